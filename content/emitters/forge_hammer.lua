-- The Forgemaster, "Hammerfall": a glowing circle where you stand; a second later a
-- ring bursts from it. Step out of the circle. With friends, the hammer takes each
-- player in turn (a team shares the pressure; alone, every blow is yours).
local turn = 0
while true do
  local alive = {}
  for _, p in ipairs(players()) do
    if p.alive then alive[#alive + 1] = p end
  end
  if #alive > 0 then
    turn = turn + 1
    local n = alive[(turn - 1) % #alive + 1]
    telegraph{x = n.x, y = n.y, radius = 60, ticks = 50}
    wait(50)
    ring{x = n.x, y = n.y, n = 16, speed = 2.2, kind = "orb", lifetime = 300}
    ring{x = n.x, y = n.y, n = 16, angle = 11, speed = 1.4, kind = "orb_small", lifetime = 360}
  end
  fan{n = 9, spread = 50, aim = "nearest", speed = 3.4, kind = "pellet", lifetime = 300}
  wait(30)
end
