-- Bellows: big slow orbs and small fast pellets from the same place: two speeds to read
-- at once.
wait(rand_int(30, 70))
local a = 0
while true do
  ring{n = 8, angle = a, speed = 1.1, kind = "big", lifetime = 600}
  wait(20)
  fan{n = 9, spread = 60, aim = "nearest", speed = 3.6, kind = "pellet", lifetime = 260}
  a = a + 22
  wait(60)
end
