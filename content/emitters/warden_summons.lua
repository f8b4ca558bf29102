-- The Warden, phase 2: calls two Stalkers every few seconds, at most a handful alive.
wait(120)
while true do
  local x, y = pos()
  spawn("stalker", x - 80, y + 40)
  spawn("stalker", x + 80, y + 40)
  sfx("summon")
  wait(360)
end
