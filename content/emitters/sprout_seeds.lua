-- Sprout: a ring of seeds that barely move, then quicken until they are fast. A slow
-- ring is a fast ring soon: get clear of it while it crawls.
wait(rand_int(20, 80))
while true do
  ring{n = 10, angle = rand(0, 36), speed = 0.3, accel = 0.035, max_speed = 3.4, kind = "rice", lifetime = 400}
  wait(110)
end
