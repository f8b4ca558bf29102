-- The Whirler: a three-armed spiral whose petals start slow, speed up and curve.
-- Everything here is the public emitter API; see docs/MODDING.md.

local arms = 3
local angle = rand(0, 360)     -- seeded per instance: a run replays exactly

wait(rand_int(30, 60))          -- don't fire the moment we appear

-- A sub-task: every 2 s, an aimed fan at whoever is nearest. It dies with the Whirler.
every(120, nil, function()
  sfx("chime")                 -- the mod's own sound: sounds/chime.ogg
  fan{n = 3, spread = 24, speed = 3.5, kind = "orb", aim = "nearest"}
end)

while true do
  -- One ring of `arms` petals: a ring or fan travels as one small network event, where
  -- the same bullets fired one by one with shot{} cost about 9 bytes each.
  ring{
    n = arms,
    angle = angle,
    speed = 0.8,             -- px per tick at spawn
    accel = 0.04,            -- px per tick, per tick
    max_speed = 3.6,
    turn = 0.8,              -- degrees per tick: the petals curve clockwise
    kind = "whirl_petal",
    lifetime = 300,
    offset = 16,             -- start at the Whirler's rim, not its centre
  }
  angle = angle + 13
  wait(7)
end
