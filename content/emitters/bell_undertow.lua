-- The Bellwether, "Undertow": fans that curve back toward where you were, like water
-- pulling at you; and the bell drifts side to side.
local w, h = arena()
task(function()
  while true do
    move_to(w * 0.3, 180, 150)
    wait(170)
    move_to(w * 0.7, 180, 150)
    wait(170)
  end
end)
local side = 1
while true do
  local a = aim("nearest")
  fan{n = 9, spread = 70, angle = a + 30 * side, speed = 2.6, turn = -0.45 * side, kind = "rice", lifetime = 320}
  side = -side
  wait(38)
end
