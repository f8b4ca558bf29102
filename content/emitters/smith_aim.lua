-- Smith: three lines, then three shots down them; the middle one aimed at you.
wait(rand_int(50, 100))
while true do
  local a = aim("nearest")
  for k = -1, 1 do
    telegraph{angle = a + k * 14, length = 900, width = 2, ticks = 30}
  end
  wait(30)
  for k = -1, 1 do
    shot{angle = a + k * 14, speed = 6.0, kind = "rice", lifetime = 200}
  end
  sfx("sniper")
  wait(90)
end
