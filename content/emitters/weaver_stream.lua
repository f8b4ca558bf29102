-- Weaver: a stream that sways left and right like a thread: watch the sway, cross where
-- it has just been.
wait(rand_int(30, 70))
local t = 0
while true do
  local a = aim("nearest")
  for i = 1, 24 do
    shot{angle = a + math.sin((t + i) * 0.35) * 28, speed = 3.0, kind = "rice", lifetime = 300}
    wait(3)
  end
  t = t + 24
  wait(60)
end
