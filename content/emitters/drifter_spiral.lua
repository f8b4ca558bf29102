-- A slow spiral of curving bullets: each one turns as it flies.
local a = rand(0, 360)
while true do
  ring{n = 2, angle = a, speed = 1.8, turn = 0.6, kind = "rice", lifetime = 240}
  a = a + 17
  wait(8)
end
