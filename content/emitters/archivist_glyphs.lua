-- The Archivist, phase 1 "Glyphs": rings that slow to a stop, hang a moment, then the
-- next ring pushes through them: read which bullets still move.
local a = 0
while true do
  ring{n = 16, angle = a, speed = 2.6, accel = -0.03, max_speed = 2.6, kind = "orb_small", lifetime = 300}
  a = a + 11
  wait(55)
end
