-- Mirror: pairs of bullets curving in from both sides, mirror images of each other: the
-- safe line is the one between them.
wait(rand_int(20, 60))
local t = 0
while true do
  local a = aim("nearest")
  for k = -2, 2 do
    shot{angle = a + 40 + k * 6, speed = 2.4, turn = -0.55, kind = "rice", lifetime = 300}
    shot{angle = a - 40 - k * 6, speed = 2.4, turn = 0.55, kind = "rice", lifetime = 300}
  end
  t = t + 1
  wait(60)
end
