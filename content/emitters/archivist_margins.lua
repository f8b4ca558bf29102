-- The Archivist, phase 2 "Margins": columns of rice fall from the top edge in the margins,
-- closing in from both sides toward the middle, and open out again.
local w, h = arena()
local step = 0
while true do
  local inset = 40 + (step % 6) * 45
  for _, x in ipairs({inset, w - inset}) do
    telegraph{x = x, y = 10, angle = 90, length = h - 20, width = 4, ticks = 30}
  end
  wait(30)
  for i = 1, 6 do
    for _, x in ipairs({inset, w - inset}) do
      shot{x = x, y = 15, angle = 90, speed = 4.0, kind = "rice", lifetime = 220}
    end
    wait(4)
  end
  ring{n = 12, angle = step * 15, speed = 1.5, kind = "orb", lifetime = 480}
  step = step + 1
  wait(40)
end
