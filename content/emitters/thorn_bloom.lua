-- The Thornmother, phase 1 "Bloom": petals that open outwards and curl back.
local a = 0
while true do
  ring{n = 6, angle = a, speed = 2.6, turn = 1.2, kind = "rice", lifetime = 150}
  ring{n = 6, angle = a, speed = 2.6, turn = -1.2, kind = "rice", lifetime = 150}
  a = a + 13
  wait(26)
end
