-- Lancer: it shows a line, then dashes along it leaving a wall of slow pellets behind:
-- the line says where the wall will stand.
wait(rand_int(40, 100))
local w, h = arena()
while true do
  local x, y = pos()
  local a = aim("nearest")
  local rad = math.rad(a)
  -- Not out of the arena, and never into the players' half.
  local tx = math.max(40, math.min(w - 40, x + math.cos(rad) * 240))
  local ty = math.max(40, math.min(h * 0.55, y + math.sin(rad) * 240))
  local dx, dy = tx - x, ty - y
  local len = math.sqrt(dx * dx + dy * dy)
  if len > 20 then
    telegraph{angle = math.deg(math.atan(dy, dx)), length = len, width = 6, ticks = 36}
    wait(36)
    move_to(tx, ty, 24)
    for i = 1, 8 do
      wait(3)
      local px, py = pos()
      shot{x = px, y = py, angle = a + 90, speed = 0.35, kind = "pellet", lifetime = 220}
      shot{x = px, y = py, angle = a - 90, speed = 0.35, kind = "pellet", lifetime = 220}
    end
  end
  wait(rand_int(70, 110))
end
