-- The Thornmother, phase 3 "Withering Ring": she draws back to the middle and closes
-- rings of thorns that turn as they go, with one gap to find; the gap moves each ring.
local w, h = arena()
move_to(w / 2, h * 0.32, 50)
wait(60)
local gap = 0
while true do
  -- A ring of 30 with four left out: the way through.
  for k = 0, 29 do
    if k < gap or k > gap + 3 then
      shot{angle = k * 12, speed = 1.7, turn = 0.25, kind = "rice", lifetime = 520}
    end
  end
  gap = (gap + rand_int(5, 9)) % 26
  wait(70)
end
