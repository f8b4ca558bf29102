-- The Warden, phase 1 "Iron Vigil": dense rotating rings, aimed fans between them.
move_to(480, 160, 30)
wait(30)
every(84, nil, function()
  fan{n = 5, spread = 36, speed = 3.4, kind = "orb", aim = "nearest", lifetime = 360}
end)
local turn = 0
while true do
  ring{n = 24, angle = turn, speed = 1.9, kind = "orb_small", lifetime = 420}
  turn = turn + 7
  wait(30)
end
