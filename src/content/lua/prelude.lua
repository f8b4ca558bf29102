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

local over, charge = __hf_over, __hf_charge
__hf_over, __hf_charge = nil, nil
local _pcall, _resume, _create, _status = pcall, coroutine.resume, coroutine.create, coroutine.status
local _unpack, _pack, _error, _select = table.unpack, table.pack, error, select
local function check(...)
  if over() then _error("instruction limit exceeded", 0) end
  return ...
end
pcall = function(...) return check(_pcall(...)) end
-- The message handler runs after the error has unwound, with the budget still counting
-- (Lua would run it inside the error, where no hook fires: a loop there could never be
-- stopped). It sees the error value, not the failing stack.
xpcall = function(f, handler, ...)
  local r = _pack(_pcall(f, ...))
  check()
  if r[1] then return _unpack(r, 1, r.n) end
  return false, handler(r[2])
end
-- Every coroutine costs a fixed part of the budget when it is made: a script cannot fan
-- out into many short coroutines that each stay under the hook's interval.
coroutine.create = function(f)
  charge()
  return _create(f)
end
coroutine.resume = function(...) return check(_resume(...)) end
coroutine.wrap = function(f)
  local co = coroutine.create(f)
  return function(...)
    local r = _pack(check(_resume(co, ...)))
    if not r[1] then _error(r[2], 0) end
    return _unpack(r, 2, r.n)
  end
end
coroutine.close = nil

local _find = string.find
local function len(v) return type(v) == "string" and #v or 0 end
string.find = function(s, p, init)
  charge(len(s) // 16 + (len(s) * len(p)) // 4096)
  return _find(s, p, init, true)
end
string.match, string.gmatch, string.gsub, string.dump = nil, nil, nil, nil
for _, name in ipairs({"upper", "lower", "reverse"}) do
  local f = string[name]
  string[name] = function(s, ...)
    charge(len(s) // 32)
    return f(s, ...)
  end
end

local _insert, _remove, _sort, _concat = table.insert, table.remove, table.sort, table.concat
table.insert = function(t, ...)
  charge(#t // 16)
  return _insert(t, ...)
end
table.remove = function(t, ...)
  charge(#t // 16)
  return _remove(t, ...)
end
table.sort = function(t, ...)
  local n = #t
  charge(n * 2)
  return _sort(t, ...)
end
table.concat = function(t, sep, i, j)
  i = i or 1
  j = j or #t
  if j - i > 1048576 then _error("table.concat: more than 1048576 items", 2) end
  charge((j - i) // 4)
  return _concat(t, sep, i, j)
end

local _setmetatable, _rawget = setmetatable, rawget
setmetatable = function(t, mt)
  if mt ~= nil and _rawget(mt, "__gc") ~= nil then _error("__gc metamethods are not allowed", 2) end
  -- A generic `for`'s fourth value is to-be-closed too (no <close> in the source).
  if mt ~= nil and _rawget(mt, "__close") ~= nil then _error("__close metamethods are not allowed", 2) end
  -- Lua's own refusal (a protected metatable) is reported at the mod's line, not here.
  local ok, r = _pcall(_setmetatable, t, mt)
  if not ok then
    local m = type(r) == "string" and r or "cannot set this metatable"
    local at = m:find(": ", 1, true)
    if m:sub(1, 8) == "prelude:" and at then m = m:sub(at + 2) end
    _error(m, 2)
  end
  return r
end

math.random = function(a, b)
  if a == nil then return rand() end
  if b == nil then return rand_int(1, a) end
  return rand_int(a, b)
end
math.randomseed = nil
warn = nil
print = log
