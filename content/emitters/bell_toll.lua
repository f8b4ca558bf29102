-- The Bellwether, "Toll": a ring on every other beat of the music's pulse (a slow
-- 72 bpm), a heavier double ring every fourth: count it, and move between tolls.
local beat = 50
local n = 0
while true do
  n = n + 1
  if n % 4 == 0 then
    ring{n = 22, angle = n * 5, speed = 2.0, kind = "orb", lifetime = 460}
    ring{n = 22, angle = n * 5 + 8, speed = 1.6, kind = "orb_small", lifetime = 500}
  else
    ring{n = 14, angle = n * 9, speed = 1.8, kind = "orb_small", lifetime = 460}
  end
  wait(beat * 2)
end
