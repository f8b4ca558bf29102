-- The Astrolabe, phase 1 "Orbits": rings that curve one way, then the other.
local a, dir = 0, 1
while true do
  ring{n = 18, angle = a, speed = 1.9, turn = 0.4 * dir, kind = "orb_small", lifetime = 420}
  a = a + 10
  dir = -dir
  wait(34)
end
