-- The Examiner, phase 3 "Focus": a slow two-armed spiral, dense enough that focusing to
-- slip between its arms is the easy way through.
local a = 0
while true do
  ring{n = 2, angle = a, speed = 1.6, kind = "pellet", lifetime = 480}
  a = a + 13
  wait(6)
end
