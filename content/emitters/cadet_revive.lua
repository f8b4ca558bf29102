-- The Downed Cadet: a teammate who went down. A living player standing within the revive
-- range for the revive time (in a row, as with a friend: stepping out starts it again)
-- brings them back; the outer ring is the range, the inner one fills as they revive.
-- Nobody is stuck: after half a minute the Cadet gets up alone.
local r = rules()
local x, y = pos()
local held, waited = 0, 0
while held < r.revive_ticks and waited < 30 * r.tick_rate do
  local near = false
  for _, p in ipairs(players()) do
    if p.alive and (p.x - x) ^ 2 + (p.y - y) ^ 2 <= r.revive_range ^ 2 then
      near = true
    end
  end
  if near then held = held + 1 else held = 0 end
  if waited % 6 == 0 then
    telegraph{radius = r.revive_range, width = 2, ticks = 7, safe = true}
    if held > 0 then
      telegraph{radius = math.max(2, r.revive_range * held / r.revive_ticks), width = 4, ticks = 7, safe = true}
    end
  end
  waited = waited + 1
  wait(1)
end
if held >= r.revive_ticks then
  hint("Revived! A friend who goes down waits ten seconds for you; so do you for them.")
else
  hint("The Cadet got up alone this time. With friends, nobody gets up alone.")
end
move_to(x, -40, 90)
wait(90)
leave()
