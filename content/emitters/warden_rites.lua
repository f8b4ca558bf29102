-- The Warden, phase 3 "Last Rites": accelerating rings and aimed big shots.
move_to(480, 200, 40)
wait(40)
every(50, nil, function()
  shot{angle = aim("random"), speed = 2.0, accel = 0.05, max_speed = 5.5, kind = "big", lifetime = 300}
end)
local turn = 0
while true do
  ring{n = 28, angle = turn, speed = 0.6, accel = 0.04, max_speed = 4.0, kind = "orb", lifetime = 360}
  turn = turn + 9
  wait(28)
end
