-- The Forgemaster, "Sparks": a three-armed spiral of pellets, its turn reversing every
-- few seconds.
local a, step, t = 0, 9, 0
while true do
  ring{n = 4, angle = a, speed = 3.1, kind = "pellet", lifetime = 380}
  a = a + step
  t = t + 1
  if t % 60 == 0 then
    step = -step
  end
  wait(4)
end
