-- The Astrolabe, phase 2 "Meridians": it shows four lines turning with it, then fires
-- streams down them; between the streams, slow stars drift.
local w, h = arena()
task(function()
  while true do
    move_to(w * 0.3, 170, 120)
    wait(150)
    move_to(w * 0.7, 170, 120)
    wait(150)
  end
end)
local base = 0
while true do
  for k = 0, 3 do
    telegraph{angle = base + k * 90, length = 1000, width = 2, ticks = 40}
  end
  wait(40)
  for i = 1, 10 do
    for k = 0, 3 do
      shot{angle = base + k * 90 + i * 1.5, speed = 4.0, kind = "rice", lifetime = 260}
    end
    wait(4)
  end
  ring{n = 8, angle = base + 45, speed = 1.2, kind = "star", lifetime = 520}
  base = base + 23
  wait(30)
end
