-- Circles the player at range and throws aimed fans.
wait(rand_int(20, 50))
every(70, nil, function()
  fan{n = 5, spread = 50, speed = 3.0, kind = "orb", lifetime = 300}
end)
