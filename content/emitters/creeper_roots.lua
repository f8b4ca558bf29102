-- Creeper: crawls after the nearest player and leaves thorns where it has been; they
-- hang still for four seconds. Lead it round in a wide loop, never into a corner.
wait(rand_int(10, 40))
local n = 0
while true do
  local x, y = pos()
  shot{x = x, y = y, angle = n * 37, speed = 0, kind = "rice", lifetime = 240}
  n = n + 1
  if n % 15 == 0 then
    fan{n = 3, spread = 30, speed = 2.2, kind = "orb_small", aim = "nearest", lifetime = 300}
  end
  wait(6)
end
