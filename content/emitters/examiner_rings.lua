-- The Examiner, phase 1 "Weave": slow rings with wide gaps, turning a little each time.
move_to(400, 140, 40)
wait(50)
local a = 0
while true do
  ring{n = 14, angle = a, speed = 1.4, kind = "orb", lifetime = 520}
  a = a + 9
  wait(52)
end
