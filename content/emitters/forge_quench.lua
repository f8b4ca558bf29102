-- The Forgemaster, "Quench": big slow rings with fast pellets threaded through them.
local a = 0
while true do
  ring{n = 10, angle = a, speed = 1.0, kind = "big", lifetime = 650}
  wait(30)
  ring{n = 40, angle = a + 6, speed = 2.9, kind = "pellet", lifetime = 360}
  a = a + 17
  wait(40)
end
