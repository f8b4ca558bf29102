-- Watcher: an aimed wall with a gap where you stand, then one more shot into the gap:
-- stay still for the wall, then move.
wait(rand_int(40, 90))
while true do
  local a = aim("nearest")
  for k = -5, 5 do
    if k < -1 or k > 1 then
      shot{angle = a + k * 5, speed = 3.0, kind = "orb_small", lifetime = 300}
    end
  end
  wait(24)
  shot{angle = aim("nearest"), speed = 4.2, kind = "rice", lifetime = 240}
  wait(80)
end
