-- Pulsar: two rings at once, one fast and one slow, offset by half a gap: the slow ring
-- hides in the fast one's wake.
wait(rand_int(30, 70))
local a = 0
while true do
  ring{n = 12, angle = a, speed = 2.6, kind = "orb_small", lifetime = 300}
  ring{n = 12, angle = a + 15, speed = 1.2, kind = "orb_small", lifetime = 500}
  a = a + 9
  wait(80)
end
