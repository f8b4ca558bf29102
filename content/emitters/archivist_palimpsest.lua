-- The Archivist, phase 3 "Palimpsest": two spirals written over each other, turning
-- opposite ways at different speeds.
local a, b = 0, 0
while true do
  ring{n = 3, angle = a, speed = 2.2, kind = "orb_small", lifetime = 420}
  ring{n = 2, angle = b, speed = 1.5, kind = "star", lifetime = 520}
  a = a + 12
  b = b - 7
  wait(7)
end
