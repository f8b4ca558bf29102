-- The Warden, phase 2 "Spiral Sentence": a double spiral of curving stars while the
-- Warden paces the top of the arena.
task(function()
  while true do
    move_to(300, 170, 120)
    wait(140)
    move_to(660, 170, 120)
    wait(140)
  end
end)
local a = 0
while true do
  for k = 0, 5 do
    shot{angle = a + k * 60, speed = 2.4, turn = 0.35, kind = "star", lifetime = 360}
  end
  a = a + 11
  wait(8)
end
