-- Anvil: a wall falls across the arena with one gap, and the gap moves: find it early.
local w, h = arena()
wait(rand_int(30, 60))
local gap = rand(0.2, 0.8)
while true do
  local x0, y0 = pos()
  for i = 0, 23 do
    local x = 20 + i * (w - 40) / 23
    if math.abs(x / w - gap) > 0.07 then
      shot{x = x, y = math.max(20, y0 - 30), angle = 90, speed = 1.5, kind = "rice", lifetime = 520}
    end
  end
  gap = math.max(0.12, math.min(0.88, gap + rand(-0.25, 0.25)))
  wait(110)
end
