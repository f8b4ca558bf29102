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
  -- Six arms as one ring: one event on the network instead of six.
  ring{n = 6, angle = a, speed = 2.4, turn = 0.35, kind = "star", lifetime = 360}
  a = a + 11
  wait(8)
end
