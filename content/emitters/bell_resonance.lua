-- The Bellwether, "Resonance": with the toll, aimed lines between the rings.
while true do
  local a = aim("nearest")
  telegraph{angle = a, length = 900, width = 2, ticks = 30}
  wait(30)
  for i = 1, 4 do
    shot{angle = a, speed = 5.0, kind = "rice", lifetime = 220}
    wait(4)
  end
  wait(50)
end
