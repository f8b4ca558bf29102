-- The Examiner, phase 2 "Read the Lines": each volley is shown first as a line, then
-- fires along it, with a slow ring between volleys.
while true do
  local a = aim("nearest")
  telegraph{angle = a, length = 900, width = 3, ticks = 36}
  wait(36)
  fan{n = 3, spread = 10, angle = a, speed = 4.5, kind = "rice", lifetime = 240}
  wait(30)
  ring{n = 10, angle = a + 18, speed = 1.3, kind = "orb_small", lifetime = 520}
  wait(34)
end
