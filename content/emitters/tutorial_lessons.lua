-- The Proving Ground's lessons, one at a time. Each waits for the players to do what it
-- asks (or for time to pass, so nobody is stuck), then the Proctor leaves and the
-- Examiner comes. Hints name the player's own keys: {move}, {fire}, {focus}, {flare}.
local w, h = arena()

local function moved_from(start, far)
  for _, p in ipairs(players()) do
    for _, q in ipairs(start) do
      if p.id == q.id and (p.x - q.x) ^ 2 + (p.y - q.y) ^ 2 > far * far then
        return true
      end
    end
  end
  return false
end

wait(45)
local start = players()
hint("Move with {move} (or the left stick). Only the white dot at your ship's heart can be hit.")
wait_until(function() return moved_from(start, 120) end, 600)
wait(60)

hint("Hold {fire} to shoot (aim with the mouse or the right stick). Take down the three drones.")
for i = 1, 3 do
  spawn("tutorial_drone", w * i / 4, h * 0.3)
end
wait(2)
-- The Proctor counts as one.
wait_until(function() return enemy_count() <= 1 end, 1500)
wait(30)

hint("Bullets come in patterns. Weave through the slow rings: keep your dot clear.")
for i = 1, 6 do
  ring{n = 12, speed = 1.3, kind = "orb", angle = i * 15, lifetime = 520}
  wait(75)
end
wait(120)

hint("Hold {focus}: you move slower, your shots gather, and your dot shows. Slip through the gaps.")
for i = 1, 8 do
  fan{n = 7, spread = 80, speed = 1.7, kind = "orb_small", aim = "nearest", lifetime = 420}
  wait(50)
end
wait(90)

hint("A bullet that passes close without hitting is a graze: grazes charge a flare (bottom right).")
for i = 1, 60 do
  shot{angle = 90 + math.sin(i * 0.35) * 35, speed = 2.0, kind = "pellet", lifetime = 420}
  wait(5)
end
wait(60)

hint("Cornered? Press {flare}: it clears the bullets around you.")
for i = 1, 5 do
  ring{n = 28, speed = 1.1, kind = "orb_small", angle = i * 6, lifetime = 560}
  wait(36)
end
wait(240)

hint("A line means an aimed shot is coming along it: step aside before it fires.")
for i = 1, 4 do
  local a = aim("nearest")
  telegraph{angle = a, length = 900, width = 2, ticks = 40}
  wait(40)
  for k = 1, 3 do
    shot{angle = a, speed = 5, kind = "rice", lifetime = 200}
    wait(5)
  end
  wait(40)
end
wait(60)

hint("A teammate is down! Stand by them until the inner ring fills to revive them.")
spawn("tutorial_cadet", w * 0.5, h * 0.55)
wait(2)
-- The Proctor counts as one; the Cadet leaves once revived (or after half a minute).
wait_until(function() return enemy_count() <= 1 end, 2400)
wait(60)
hint("Hold {escape} to leave any dungeon, whenever you like.")
wait(240)
hint("The Examiner comes. Everything it does, you have just done.")
wait(120)
leave()
