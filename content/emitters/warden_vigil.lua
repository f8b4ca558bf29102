-- The Warden, phase 1 "Iron Vigil": rotating rings, aimed fans between them.
move_to(480, 160, 30)
wait(30)
every(75, nil, function()
  fan{n = 5, spread = 36, speed = 3.4, kind = "orb", aim = "nearest", lifetime = 360}
end)
local turn = 0
while true do
  ring{n = 16, angle = turn, speed = 2.2, kind = "orb_small", lifetime = 400}
  turn = turn + 7
  wait(40)
end
