-- Three fast aimed shots in a burst, then a long pause.
wait(rand_int(30, 90))
while true do
  for i = 1, 3 do
    shot{angle = aim("nearest"), speed = 6.5, kind = "rice", lifetime = 180}
    wait(6)
  end
  sfx("sniper")
  wait(100)
end
