-- A ring of 12 that rotates a little each volley, so the gaps move.
local turn = rand(0, 30)
wait(rand_int(20, 60))
while true do
  ring{n = 12, angle = turn, speed = 2.0, kind = "orb_small", lifetime = 420}
  turn = turn + 9
  wait(55)
end
