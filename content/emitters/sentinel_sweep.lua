-- Sentinel: it shows where its beam will sweep, then sweeps it: a dense line of pellets
-- turning across the arena. Stand behind where it started.
wait(rand_int(40, 90))
local dir = 1
while true do
  local a = aim("nearest") - 50 * dir
  telegraph{angle = a, length = 800, width = 4, ticks = 40}
  telegraph{angle = a + 100 * dir, length = 800, width = 2, ticks = 40}
  wait(40)
  for i = 0, 33 do
    shot{angle = a + i * 3 * dir, speed = 4.2, kind = "pellet", lifetime = 240}
    wait(2)
  end
  dir = -dir
  wait(80)
end
