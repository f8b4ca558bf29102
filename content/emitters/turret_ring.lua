-- A ring that rotates a little each volley, so the gaps move. Its size, speed and pause
-- come from the enemy's entry (`args`), so one emitter serves several turrets.
local n = args.n or 12
local speed = args.speed or 2.0
local pause = args.pause or 55
local turn = rand(0, 30)
wait(rand_int(20, 60))
while true do
  ring{n = n, angle = turn, speed = speed, kind = "orb_small", lifetime = 420}
  turn = turn + 9
  wait(pause)
end
