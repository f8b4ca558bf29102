-- Three fast shots in a burst, then a long pause. The sniper takes aim first: a thin line
-- shows where the burst will go (it fires along that line, so a player who sees it can
-- step aside).
wait(rand_int(30, 90))
while true do
  local a = aim("nearest")
  telegraph{angle = a, length = 900, width = 2, ticks = 24}
  wait(24)
  for i = 1, 3 do
    shot{angle = a, speed = 6.5, kind = "rice", lifetime = 180}
    wait(6)
  end
  sfx("sniper")
  wait(76)
end
