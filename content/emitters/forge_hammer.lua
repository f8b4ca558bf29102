-- The Forgemaster, "Hammerfall": a glowing circle where you stand; a second later a
-- ring bursts from it. Step out of the circle.
while true do
  local n = nearest()
  if n ~= nil then
    telegraph{x = n.x, y = n.y, radius = 60, ticks = 50}
    wait(50)
    ring{x = n.x, y = n.y, n = 16, speed = 2.2, kind = "orb", lifetime = 300}
    ring{x = n.x, y = n.y, n = 16, angle = 11, speed = 1.4, kind = "orb_small", lifetime = 360}
  end
  fan{n = 9, spread = 50, aim = "nearest", speed = 3.4, kind = "pellet", lifetime = 300}
  wait(30)
end
