-- Bloomer: rings that start slow and speed up: what looks far is soon near.
wait(rand_int(30, 80))
local a = 0
while true do
  ring{n = 16, angle = a, speed = 0.5, accel = 0.045, max_speed = 3.8, kind = "orb_small", lifetime = 360}
  a = a + 11
  wait(66)
end
