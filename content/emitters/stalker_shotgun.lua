-- The Stalker closes in and fires a point-blank shotgun: five pellets over 62 degrees.
-- An 18-tick lifetime at 4.3 px/tick gives about 78 px of reach, so it has to close the
-- distance, and leaves nothing lingering in the arena.
wait(rand_int(10, 40))
while true do
  local p = nearest()
  if p and p.dist < 100 then
    fan{n = 5, spread = 62, speed = 4.3, lifetime = 18, kind = "pellet", aim = p.id}
    sfx("shotgun")
    wait(48)
  else
    wait(5)
  end
end
