-- Cinder: it runs at you and bursts when close: keep your distance, or shoot it first.
wait(30)
while true do
  wait_until(function()
    local n = nearest()
    return n ~= nil and n.dist < 170
  end)
  sfx("shotgun")
  fan{n = 7, spread = 50, aim = "nearest", speed = 3.4, kind = "orb_small", lifetime = 90}
  wait(70)
end
