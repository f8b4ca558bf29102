-- Hailfire emitter prelude: runs once per Lua state, before any mod script.
-- Helpers written in Lua so that they can yield; the sandbox wrappers at the end
-- keep pcall/xpcall/coroutine from swallowing the instruction limit.

function wait(n)
  coroutine.yield(n or 1)
end

function wait_until(pred, max_ticks)
  local t = 0
  while not pred() do
    if max_ticks and t >= max_ticks then return false end
    coroutine.yield(1)
    t = t + 1
  end
  return true
end

function every(interval, times, fn)
  return task(function()
    local i = 1
    while times == nil or i <= times do
      fn(i)
      i = i + 1
      coroutine.yield(interval)
    end
  end)
end

-- The nearest living player as {id, x, y, hp, alive, dist}, or nil.
function nearest()
  local x, y = pos()
  local best, bd = nil, math.huge
  for _, p in ipairs(players()) do
    if p.alive then
      local d = math.sqrt((p.x - x) ^ 2 + (p.y - y) ^ 2)
      if d < bd then best, bd = p, d end
    end
  end
  if best then best.dist = bd end
  return best
end

local over = __hf_over
__hf_over = nil
local _pcall, _xpcall, _resume, _create = pcall, xpcall, coroutine.resume, coroutine.create
local _unpack, _pack, _error = table.unpack, table.pack, error
local function check(...)
  if over() then _error("instruction limit exceeded", 2) end
  return ...
end
pcall = function(...) return check(_pcall(...)) end
xpcall = function(...) return check(_xpcall(...)) end
coroutine.resume = function(...) return check(_resume(...)) end
coroutine.wrap = function(f)
  local co = _create(f)
  return function(...)
    local r = _pack(check(_resume(co, ...)))
    if not r[1] then _error(r[2], 0) end
    return _unpack(r, 2, r.n)
  end
end

local _find = string.find
string.find = function(s, p, init) return _find(s, p, init, true) end
string.match, string.gmatch, string.gsub, string.dump = nil, nil, nil, nil

local _setmetatable, _rawget = setmetatable, rawget
setmetatable = function(t, mt)
  if mt ~= nil and _rawget(mt, "__gc") ~= nil then _error("__gc metamethods are not allowed", 2) end
  return _setmetatable(t, mt)
end

math.random = function(a, b)
  if a == nil then return rand() end
  if b == nil then return rand_int(1, a) end
  return rand_int(a, b)
end
math.randomseed = nil
print = log
