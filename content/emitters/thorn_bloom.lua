-- The Thornmother, phase 1 "Bloom": petals that open outwards and curl back.
local a = 0
while true do
  for k = 0, 5 do
    shot{angle = a + k * 60, speed = 2.6, turn = 1.2, kind = "rice", lifetime = 150}
    shot{angle = a + k * 60, speed = 2.6, turn = -1.2, kind = "rice", lifetime = 150}
  end
  a = a + 13
  wait(26)
end
