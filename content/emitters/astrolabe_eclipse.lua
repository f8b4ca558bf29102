-- The Astrolabe, phase 3 "Eclipse": rings that speed up, and an aimed fan between them.
local a = 0
every(75, nil, function()
  fan{n = 5, spread = 24, aim = "nearest", speed = 3.2, kind = "orb", lifetime = 320}
end)
while true do
  ring{n = 20, angle = a, speed = 0.6, accel = 0.04, max_speed = 3.4, kind = "orb_small", lifetime = 420}
  a = a + 7
  wait(40)
end
