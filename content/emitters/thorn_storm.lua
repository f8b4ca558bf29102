-- The Thornmother, phase 2 "Bramble Storm": random falling thorns and aimed fans.
every(60, nil, function()
  fan{n = 7, spread = 70, speed = 3.0, kind = "orb", lifetime = 300}
end)
while true do
  local w, _ = arena()
  shot{x = rand(20, w - 20), y = 10, angle = 90 + rand(-8, 8), speed = rand(2.0, 3.5), kind = "pellet", lifetime = 320}
  wait(4)
end
