//! The Lua emitter runtime: one sandboxed Lua 5.4 state per instance, each emitter a
//! coroutine resumed by the simulation tick. `wait(n)` yields for n ticks, so a waiting
//! emitter costs nothing until it is due. Scripts see ids and copies, never the world:
//! every effect (`shot`, `move_to`, `spawn`, `sfx`) is a command applied at the tick
//! boundary. Limits: a memory cap per state and an instruction budget per resume; a
//! script that errors or breaks a limit is stopped with a message naming mod, file, line.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use mlua::chunk::ChunkMode;
use mlua::thread::ThreadStatus;
use mlua::{Function, HookTriggers, Lua, LuaOptions, StdLib, Table, Thread, Value, Variadic, VmState};

pub use super::diag::escape_text;
use crate::sim::rng::Rng;
use crate::sim::script::{
    Owner, OwnerView, PlayerView, ScriptCmd, ScriptFactory, ScriptMessage, ScriptView, Scripting, ShotCmd,
};
use crate::sim::{Defs, Tick, Vec2};

/// Instructions one resume of one emitter may execute.
pub const INSTRUCTION_LIMIT: u32 = 200_000;
/// Instructions all the emitters of one instance may execute in one tick, together.
pub const TICK_INSTRUCTION_BUDGET: u32 = 1_000_000;
/// What making a coroutine (`coroutine.create`, `wrap`, `task`) costs, in instructions.
pub const COROUTINE_COST: u32 = 1_000;
/// Hook granularity: the budgets are checked every this many instructions (of each thread).
const HOOK_EVERY: u32 = 250;
/// Wall-clock backstop for one resume: work inside C functions (copying huge strings) is
/// not counted in instructions, so a resume running this long is stopped too.
pub const RESUME_WALL_MS: u64 = 100;
/// Memory cap per Lua state (one per instance).
pub const MEMORY_LIMIT: usize = 32 * 1024 * 1024;
/// Largest string `string.rep` may build, bytes.
pub const MAX_STRING_BYTES: usize = 1 << 20;
/// Most elements `table.move` may move in one call.
pub const MAX_MOVE: i64 = 1 << 20;
/// Live tasks (coroutines started by `task`, `every` and emitters) per instance.
pub const MAX_TASKS: usize = 256;
/// Bullets the emitters of one instance may fire in one tick.
pub const MAX_SHOTS_PER_TICK: usize = 4_096;
/// Enemies the emitters of one instance may spawn in one tick.
pub const MAX_SPAWNS_PER_TICK: usize = 32;
/// Most shots one `ring`/`fan` call may fire.
pub const MAX_PATTERN_SHOTS: i64 = 720;
/// Most `log` lines per tick per instance (the rest are dropped), and bytes per line.
const MAX_LOGS_PER_TICK: usize = 16;
pub const MAX_LOG_BYTES: usize = 200;
/// Longest sound name `sfx` accepts (the wire carries at most 64 bytes).
pub const MAX_SFX_NAME: usize = 32;

const PRELUDE: &str = include_str!("prelude.lua");

/// One emitter script as loaded from a mod.
#[derive(Clone, Debug)]
pub struct EmitterSource {
    pub id: String,
    pub mod_id: String,
    /// Path shown in messages, e.g. `mods/example/emitters/spiral.lua`.
    pub path: String,
    pub source: String,
}

/// The line of the first to-be-closed variable (`local x <close> = ...`) in Lua source, if
/// any. They are refused: Lua runs their `__close` handlers while it unwinds an error,
/// which can happen inside the instruction hook where no limit applies, so a looping
/// handler could never be stopped. Strings and comments are skipped.
pub fn find_close_attribute(src: &str) -> Option<usize> {
    let b = src.as_bytes();
    let (mut i, mut line) = (0usize, 1usize);
    // `[[`, `[==[` ... : returns the level when a long bracket opens at `at`.
    let long_open = |at: usize| -> Option<usize> {
        if b.get(at) != Some(&b'[') {
            return None;
        }
        let mut j = at + 1;
        while b.get(j) == Some(&b'=') {
            j += 1;
        }
        (b.get(j) == Some(&b'[')).then_some(j - at - 1)
    };
    let skip_long = |mut j: usize, level: usize, line: &mut usize| -> usize {
        let close: Vec<u8> = std::iter::once(b']').chain(std::iter::repeat_n(b'=', level)).chain([b']']).collect();
        while j < b.len() {
            if b[j..].starts_with(&close) {
                return j + close.len();
            }
            if b[j] == b'\n' {
                *line += 1;
            }
            j += 1;
        }
        j
    };
    while i < b.len() {
        match b[i] {
            b'\n' => {
                line += 1;
                i += 1;
            }
            b'-' if b.get(i + 1) == Some(&b'-') => {
                if let Some(level) = long_open(i + 2) {
                    i = skip_long(i + 4 + level, level, &mut line);
                } else {
                    while i < b.len() && b[i] != b'\n' {
                        i += 1;
                    }
                }
            }
            b'[' if long_open(i).is_some() => {
                let level = long_open(i).unwrap_or(0);
                i = skip_long(i + 2 + level, level, &mut line);
            }
            q @ (b'"' | b'\'') => {
                i += 1;
                while i < b.len() && b[i] != q && b[i] != b'\n' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
            }
            b'<' => {
                let mut j = i + 1;
                while j < b.len() && b[j].is_ascii_whitespace() {
                    j += 1;
                }
                if b[j.min(b.len())..].starts_with(b"close") {
                    let mut k = j + 5;
                    while k < b.len() && b[k].is_ascii_whitespace() {
                        k += 1;
                    }
                    if b.get(k) == Some(&b'>') {
                        return Some(line);
                    }
                }
                i += 1;
            }
            _ => i += 1,
        }
    }
    None
}

impl EmitterSource {
    /// The name Lua gives this chunk in messages: short and mod-relative
    /// (`my_mod/emitters/spin.lua`), so Lua's 60-byte limit never cuts off the line.
    pub fn chunk_name(&self) -> String {
        let file = format!("/emitters/{}.lua", self.id);
        let room = 58usize.saturating_sub(file.len()).max(8);
        let mut m = self.mod_id.clone();
        truncate_chars(&mut m, room);
        format!("{m}{file}")
    }
}

/// What scripts may refer to by name.
struct Names {
    /// Bullet kind -> (index, radius, damage).
    kinds: HashMap<String, (u16, f32, i32)>,
    enemies: BTreeSet<String>,
}

/// Creates a Lua runtime per instance from the loaded content.
pub struct LuaFactory {
    emitters: Arc<BTreeMap<String, EmitterSource>>,
    names: Arc<Names>,
}

impl LuaFactory {
    pub fn new(defs: &Defs, emitters: Arc<BTreeMap<String, EmitterSource>>) -> Self {
        let kinds =
            defs.bullets.iter().enumerate().map(|(i, b)| (b.id.clone(), (i as u16, b.radius, b.damage))).collect();
        let enemies = defs.enemies.keys().cloned().collect();
        LuaFactory { emitters, names: Arc::new(Names { kinds, enemies }) }
    }
}

impl ScriptFactory for LuaFactory {
    fn create(&self, seed: u64) -> Box<dyn Scripting> {
        Box::new(LuaRuntime::new(self.emitters.clone(), self.names.clone(), seed))
    }
}

/// State shared between the runtime and the Rust functions Lua calls.
struct Ctx {
    tick: Tick,
    arena: Vec2,
    players: Vec<PlayerView>,
    owners: Vec<OwnerView>,
    owner: Owner,
    group: u32,
    root: u64,
    /// Instructions this resume, and this tick across every task.
    used: u32,
    tick_used: u32,
    /// When this resume began (the wall-clock backstop).
    resume_start: std::time::Instant,
    /// A budget ran out: sticky until the next resume, so no Lua construct can swallow it.
    over: bool,
    over_why: String,
    /// Live tasks (including ones made this resume), shots and spawns this tick.
    live_tasks: usize,
    shots: usize,
    spawns: usize,
    /// Where the running script was at the last hook ("file:line"), for errors that carry
    /// no position of their own (running out of memory).
    last_pos: String,
    cmds: Vec<ScriptCmd>,
    logs: Vec<String>,
    new_tasks: Vec<Thread>,
    rng: Rng,
    names: Arc<Names>,
}

impl Ctx {
    fn me(&self) -> Option<&OwnerView> {
        self.owners.iter().find(|o| o.owner == self.owner)
    }
    fn my_pos(&self) -> Vec2 {
        self.me().map_or(Vec2::ZERO, |o| o.pos)
    }
}

struct Task {
    thread: Thread,
    owner: Owner,
    group: u32,
    /// Id of the emitter start this task descends from (errors stop the whole family).
    root: u64,
    emitter: Arc<str>,
    wake: Tick,
    dead: bool,
}

pub struct LuaRuntime {
    lua: Option<Lua>,
    emitters: Arc<BTreeMap<String, EmitterSource>>,
    compiled: HashMap<String, Function>,
    /// Each mod's environment, by mod id.
    envs: HashMap<String, Table>,
    disabled: HashSet<String>,
    tasks: Vec<Task>,
    next_root: u64,
    pending_msgs: Vec<ScriptMessage>,
    /// Where to start next tick when this tick's budget ran out.
    resume_at: usize,
}

fn rt_err(msg: impl Into<String>) -> mlua::Error {
    mlua::Error::RuntimeError(msg.into())
}

/// "file:line: " of the Lua code calling a Rust function, for error messages.
fn caller(lua: &Lua) -> String {
    lua.inspect_stack(1, |d| {
        let src = d.source().short_src.map(|s| s.to_string()).unwrap_or_default();
        match d.current_line() {
            Some(l) => format!("{src}:{l}: "),
            None => String::new(),
        }
    })
    .unwrap_or_default()
}

/// "file:line: " of the innermost mod code on the stack (skipping the prelude and Rust),
/// so that a limit met inside a library wrapper is reported where the mod called it.
fn where_in_mod(lua: &Lua) -> String {
    for level in 0..24 {
        let found = lua.inspect_stack(level, |d| {
            let src = d.source();
            let from_mod = src.source.as_deref().is_some_and(|s| s.starts_with('@'));
            match (from_mod, src.short_src, d.current_line()) {
                (true, Some(file), Some(line)) => Some(format!("{file}:{line}: ")),
                _ => None,
            }
        });
        match found {
            None => break,               // past the bottom of the stack
            Some(Some(at)) => return at, // a mod frame
            Some(None) => {}
        }
    }
    String::new()
}

/// Charges work done outside the VM; when a budget runs out, the error (and the position
/// kept for the post-resume report) names the mod's line.
fn charge(lua: &Lua, n: u64) -> mlua::Result<()> {
    let res = with_ctx(lua, |c| c.charge(n));
    if res.is_err() {
        let at = where_in_mod(lua);
        if let Ok(Some(mut c)) = lua.try_app_data_mut::<Ctx>() {
            if !at.is_empty() {
                c.last_pos = at.trim_end_matches([':', ' ']).to_string();
            }
            return Err(rt_err(format!("{at}{}", c.over_why)));
        }
    }
    res
}

fn with_ctx<R>(lua: &Lua, f: impl FnOnce(&mut Ctx) -> mlua::Result<R>) -> mlua::Result<R> {
    match lua.try_app_data_mut::<Ctx>() {
        Ok(Some(c)) if c.over => Err(rt_err(c.over_why.clone())),
        Ok(Some(mut c)) => f(&mut c),
        _ => Err(rt_err("emitter API called outside an emitter")),
    }
}

impl Ctx {
    /// Charges `n` instructions of work done outside the VM (C functions, new coroutines).
    fn charge(&mut self, n: u64) -> mlua::Result<()> {
        let n = n.min(u32::MAX as u64) as u32;
        self.used = self.used.saturating_add(n);
        self.tick_used = self.tick_used.saturating_add(n);
        self.check_budgets()
    }

    fn check_budgets(&mut self) -> mlua::Result<()> {
        if !self.over {
            if self.used > INSTRUCTION_LIMIT {
                self.over_why =
                    format!("instruction limit exceeded ({INSTRUCTION_LIMIT} per resume; use wait(n) in long loops)");
            } else if self.tick_used > TICK_INSTRUCTION_BUDGET {
                self.over_why = format!(
                    "instance budget exceeded ({TICK_INSTRUCTION_BUDGET} instructions per tick for all emitters together)"
                );
            } else if self.resume_start.elapsed().as_millis() as u64 > RESUME_WALL_MS {
                self.over_why = format!("ran for more than {RESUME_WALL_MS} ms in one resume");
            } else {
                return Ok(());
            }
            self.over = true;
        }
        Err(rt_err(self.over_why.clone()))
    }
}

/// Cuts a string to at most `max` bytes without splitting a character.
pub fn truncate_chars(s: &mut String, max: usize) {
    if s.len() > max {
        let mut end = max;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
}

/// `tostring` without addresses: tables, functions, threads and userdata without a
/// `__tostring` or `__name` print as their type, so two runs print the same text.
fn plain_tostring(lua: &Lua, v: &Value, original: &Function) -> mlua::Result<String> {
    let has_meta = |mt: Option<Table>| {
        mt.is_some_and(|m| {
            m.raw_get::<Value>("__tostring").is_ok_and(|v| !v.is_nil())
                || m.raw_get::<Value>("__name").is_ok_and(|v| !v.is_nil())
        })
    };
    let custom = match v {
        Value::Table(t) => has_meta(t.metatable()),
        Value::UserData(_) | Value::Function(_) | Value::Thread(_) | Value::LightUserData(_) => false,
        _ => true,
    };
    if custom {
        return original.call::<String>(v.clone());
    }
    let _ = lua;
    Ok(v.type_name().to_string())
}

/// Shot parameters read from a Lua table before any shared state is borrowed.
struct ShotSpec {
    x: Option<f32>,
    y: Option<f32>,
    angle: Option<f32>,
    speed: f32,
    kind: String,
    lifetime: u16,
    accel: f32,
    turn: f32,
    max_speed: f32,
    damage: Option<i32>,
    radius: Option<f32>,
    offset: f32,
}

fn num(t: &Table, k: &str) -> mlua::Result<Option<f32>> {
    match t.get::<Value>(k)? {
        Value::Nil => Ok(None),
        Value::Integer(i) => Ok(Some(i as f32)),
        Value::Number(n) if n.is_finite() => Ok(Some(n as f32)),
        Value::Number(_) => Err(rt_err(format!("field '{k}' must be a finite number"))),
        other => Err(rt_err(format!("field '{k}' must be a number, got {}", other.type_name()))),
    }
}

impl ShotSpec {
    fn read(t: &Table) -> mlua::Result<ShotSpec> {
        let kind = match t.get::<Value>("kind")? {
            Value::Nil => "orb".to_string(),
            Value::String(s) => s.to_str()?.to_string(),
            other => return Err(rt_err(format!("field 'kind' must be a string, got {}", other.type_name()))),
        };
        let lifetime = num(t, "lifetime")?.unwrap_or(300.0);
        if !(1.0..=3600.0).contains(&lifetime) {
            return Err(rt_err("field 'lifetime' must be between 1 and 3600 ticks"));
        }
        Ok(ShotSpec {
            x: num(t, "x")?,
            y: num(t, "y")?,
            angle: num(t, "angle")?,
            speed: num(t, "speed")?.unwrap_or(3.0),
            kind,
            lifetime: lifetime as u16,
            accel: num(t, "accel")?.unwrap_or(0.0),
            turn: num(t, "turn")?.unwrap_or(0.0),
            max_speed: num(t, "max_speed")?.unwrap_or(f32::INFINITY),
            damage: num(t, "damage")?.map(|d| d.clamp(0.0, 1000.0) as i32),
            radius: num(t, "radius")?.map(|r| r.clamp(0.5, 64.0)),
            offset: num(t, "offset")?.unwrap_or(0.0),
        })
    }

    /// Queues one bullet at `angle` (degrees).
    fn fire(&self, c: &mut Ctx, angle: f32) -> mlua::Result<()> {
        if c.shots >= MAX_SHOTS_PER_TICK {
            return Err(rt_err(format!("more than {MAX_SHOTS_PER_TICK} bullets fired in one tick in this instance")));
        }
        c.shots += 1;
        let &(kind, radius, damage) =
            c.names.kinds.get(&self.kind).ok_or_else(|| rt_err(format!("unknown bullet kind '{}'", self.kind)))?;
        let me = c.my_pos();
        let origin = Vec2::new(self.x.unwrap_or(me.x), self.y.unwrap_or(me.y));
        let dir = Vec2::from_angle_deg(angle);
        c.cmds.push(ScriptCmd::Shot(ShotCmd {
            pos: origin + dir * self.offset,
            angle,
            speed: self.speed,
            radius: self.radius.unwrap_or(radius),
            lifetime: self.lifetime,
            kind,
            accel: self.accel,
            turn: self.turn,
            max_speed: self.max_speed,
            damage: self.damage.unwrap_or(damage),
        }));
        Ok(())
    }
}

fn pattern_n(t: &Table) -> mlua::Result<i64> {
    let n = num(t, "n")?.ok_or_else(|| rt_err("field 'n' is required"))? as i64;
    if !(1..=MAX_PATTERN_SHOTS).contains(&n) {
        return Err(rt_err(format!("field 'n' must be between 1 and {MAX_PATTERN_SHOTS}")));
    }
    Ok(n)
}

/// Angle from the owner to the chosen player, degrees; 90 (down) if nobody qualifies.
fn aim_angle(c: &mut Ctx, target: &Value) -> mlua::Result<f32> {
    let me = c.my_pos();
    let alive: Vec<PlayerView> = c.players.iter().copied().filter(|p| p.alive).collect();
    let by_dist = |a: &&PlayerView, b: &&PlayerView| a.pos.distance(me).total_cmp(&b.pos.distance(me));
    let pick = match target {
        Value::Nil => alive.iter().min_by(by_dist).copied(),
        Value::String(s) => match &*s.to_str()? {
            "nearest" => alive.iter().min_by(by_dist).copied(),
            "farthest" => alive.iter().max_by(by_dist).copied(),
            "random" if !alive.is_empty() => {
                let i = c.rng.range_i64(0, alive.len() as i64 - 1) as usize;
                Some(alive[i])
            }
            "random" => None,
            other => {
                return Err(rt_err(format!("aim: unknown target '{other}' (nearest, farthest, random or a player id)")))
            }
        },
        Value::Integer(id) => alive.iter().find(|p| p.id as i64 == *id).copied(),
        Value::Number(id) => alive.iter().find(|p| p.id as f64 == *id).copied(),
        other => return Err(rt_err(format!("aim: bad target of type {}", other.type_name()))),
    };
    Ok(pick.map_or(90.0, |p| (p.pos - me).angle_deg()))
}

/// Replaces the `math` functions that would call the platform's C library with the
/// portable ones (`libm`, a port of musl), so a script computes the same bits on every OS
/// and CPU (see `sim::math`). `math.sqrt`, `floor`, `fmod`, `abs` are exact already. The
/// `^` operator still calls the C `pow` for any exponent but 2 (Lua gives no hook for it):
/// `docs/MODDING.md` tells modders to multiply instead.
/// Standard functions that would do unbounded work inside one VM instruction get size
/// checks and a charge against the budget; functions that would print addresses (which
/// differ from run to run) print plain type names; `%p` is refused.
fn install_guarded_stdlib(lua: &Lua, g: &Table) -> mlua::Result<()> {
    let string: Table = g.get("string")?;
    let table: Table = g.get("table")?;
    string.set(
        "rep",
        lua.create_function(|lua, (s, n, sep): (mlua::LuaString, i64, Option<mlua::LuaString>)| {
            let at = caller(lua);
            let (s, sep) = (s.as_bytes().to_vec(), sep.map(|x| x.as_bytes().to_vec()).unwrap_or_default());
            if n <= 0 || (s.is_empty() && sep.is_empty()) {
                return lua.create_string("");
            }
            let total = (s.len() as u128) * n as u128 + (sep.len() as u128) * (n as u128 - 1);
            if total > MAX_STRING_BYTES as u128 {
                return Err(rt_err(format!(
                    "{at}string.rep: the result would be {total} bytes; at most {MAX_STRING_BYTES}"
                )));
            }
            charge(lua, total as u64 / 32)?;
            let out = if sep.is_empty() {
                s.repeat(n as usize)
            } else {
                let mut unit = s.clone();
                unit.extend_from_slice(&sep);
                let mut out = unit.repeat(n as usize - 1);
                out.extend_from_slice(&s);
                out
            };
            lua.create_string(&out)
        })?,
    )?;
    let original_move: Function = table.get("move")?;
    table.set(
        "move",
        lua.create_function(move |lua, args: Variadic<Value>| {
            let int = |i: usize| match args.get(i) {
                Some(Value::Integer(v)) => Some(*v),
                Some(Value::Number(v)) if v.fract() == 0.0 => Some(*v as i64),
                _ => None,
            };
            if let (Some(f), Some(e)) = (int(1), int(2)) {
                let n = e.saturating_sub(f).saturating_add(1);
                if n > MAX_MOVE {
                    return Err(rt_err(format!("{}table.move: {n} elements; at most {MAX_MOVE}", caller(lua))));
                }
                charge(lua, n.max(0) as u64)?;
            }
            original_move.call::<Value>(args)
        })?,
    )?;
    let original_tostring: Function = g.get("tostring")?;
    lua.set_named_registry_value("hf_tostring", original_tostring.clone())?;
    let ts = original_tostring.clone();
    g.set("tostring", lua.create_function(move |lua, v: Value| plain_tostring(lua, &v, &ts))?)?;
    let original_format: Function = string.get("format")?;
    string.set(
        "format",
        lua.create_function(move |lua, (fmt, args): (mlua::LuaString, Variadic<Value>)| {
            let bytes = fmt.as_bytes().to_vec();
            let mut args: Vec<Value> = args.into_iter().collect();
            let (mut i, mut arg) = (0usize, 0usize);
            while i < bytes.len() {
                if bytes[i] != b'%' {
                    i += 1;
                    continue;
                }
                i += 1;
                if bytes.get(i) == Some(&b'%') {
                    i += 1;
                    continue;
                }
                while i < bytes.len() && b"-+ #0123456789.".contains(&bytes[i]) {
                    i += 1;
                }
                match bytes.get(i) {
                    Some(b'p') => {
                        return Err(rt_err(format!(
                            "{}string.format: %p is not allowed (addresses differ from run to run)",
                            caller(lua)
                        )))
                    }
                    Some(b's') => {
                        if let Some(v) = args.get(arg) {
                            if !matches!(v, Value::String(_) | Value::Integer(_) | Value::Number(_)) {
                                let t = plain_tostring(lua, v, &original_tostring)?;
                                args[arg] = Value::String(lua.create_string(&t)?);
                            }
                        }
                    }
                    _ => {}
                }
                arg += 1;
                i += 1;
            }
            original_format.call::<mlua::LuaString>((fmt, Variadic::from_iter(args)))
        })?,
    )?;
    Ok(())
}

fn install_portable_math(lua: &Lua, g: &Table) -> mlua::Result<()> {
    let math: Table = g.get("math")?;
    type Unary = fn(f64) -> f64;
    let unary: [(&str, Unary); 6] = [
        ("sin", libm::sin),
        ("cos", libm::cos),
        ("tan", libm::tan),
        ("asin", libm::asin),
        ("acos", libm::acos),
        ("exp", libm::exp),
    ];
    for (name, f) in unary {
        math.set(name, lua.create_function(move |_, x: f64| Ok(f(x)))?)?;
    }
    // math.log(x [, base]): the base form divides two portable logs.
    math.set(
        "log",
        lua.create_function(|_, (x, base): (f64, Option<f64>)| {
            Ok(match base {
                None => libm::log(x),
                Some(2.0) => libm::log2(x),
                Some(10.0) => libm::log10(x),
                Some(b) => libm::log(x) / libm::log(b),
            })
        })?,
    )?;
    // math.atan(y [, x]) is atan2 in Lua 5.4.
    math.set("atan", lua.create_function(|_, (y, x): (f64, Option<f64>)| Ok(libm::atan2(y, x.unwrap_or(1.0))))?)?;
    Ok(())
}

fn install_api(lua: &Lua) -> mlua::Result<()> {
    let g = lua.globals();
    for name in ["dofile", "loadfile", "load", "collectgarbage", "require", "module"] {
        g.set(name, Value::Nil)?;
    }
    install_portable_math(lua, &g)?;
    g.set(
        "__hf_over",
        lua.create_function(|lua, ()| Ok(lua.try_app_data_ref::<Ctx>().ok().flatten().is_some_and(|c| c.over)))?,
    )?;
    g.set(
        "__hf_charge",
        lua.create_function(|lua, n: Option<i64>| {
            let n = n.map_or(COROUTINE_COST as u64, |n| n.max(0) as u64);
            charge(lua, n)
        })?,
    )?;
    g.set(
        "task",
        lua.create_function(|lua, f: Function| {
            let at = caller(lua);
            charge(lua, COROUTINE_COST as u64)?;
            with_ctx(lua, |c| {
                if c.live_tasks >= MAX_TASKS {
                    return Err(rt_err(format!("{at}task: too many tasks (at most {MAX_TASKS} per instance)")));
                }
                c.live_tasks += 1;
                Ok(())
            })?;
            let th = lua.create_thread(f)?;
            with_ctx(lua, |c| {
                c.new_tasks.push(th);
                Ok(())
            })
        })?,
    )?;
    install_guarded_stdlib(lua, &g)?;
    g.set(
        "shot",
        lua.create_function(|lua, t: Table| {
            let spec = ShotSpec::read(&t).map_err(|e| rt_err(format!("{}shot: {e}", caller(lua))))?;
            let at = caller(lua);
            with_ctx(lua, |c| {
                let angle = spec.angle.unwrap_or(90.0);
                spec.fire(c, angle).map_err(|e| rt_err(format!("{at}shot: {e}")))
            })
        })?,
    )?;
    g.set(
        "ring",
        lua.create_function(|lua, t: Table| {
            let at = caller(lua);
            let spec = ShotSpec::read(&t).map_err(|e| rt_err(format!("{at}ring: {e}")))?;
            let n = pattern_n(&t).map_err(|e| rt_err(format!("{at}ring: {e}")))?;
            with_ctx(lua, |c| {
                let start = spec.angle.unwrap_or(90.0);
                for i in 0..n {
                    spec.fire(c, start + i as f32 * 360.0 / n as f32).map_err(|e| rt_err(format!("{at}ring: {e}")))?;
                }
                Ok(())
            })
        })?,
    )?;
    g.set(
        "fan",
        lua.create_function(|lua, t: Table| {
            let at = caller(lua);
            let spec = ShotSpec::read(&t).map_err(|e| rt_err(format!("{at}fan: {e}")))?;
            let n = pattern_n(&t).map_err(|e| rt_err(format!("{at}fan: {e}")))?;
            let spread = num(&t, "spread")?.unwrap_or(30.0);
            let aimed = t.get::<Value>("aim")?;
            with_ctx(lua, |c| {
                let centre = match (&aimed, spec.angle) {
                    (Value::Nil, Some(a)) => a,
                    (Value::Nil, None) => aim_angle(c, &Value::Nil)?,
                    (v, _) => aim_angle(c, v)?,
                };
                for i in 0..n {
                    let a = if n == 1 { centre } else { centre - spread / 2.0 + spread * i as f32 / (n - 1) as f32 };
                    spec.fire(c, a).map_err(|e| rt_err(format!("{at}fan: {e}")))?;
                }
                Ok(())
            })
        })?,
    )?;
    g.set(
        "aim",
        lua.create_function(|lua, target: Value| {
            let at = caller(lua);
            with_ctx(lua, |c| aim_angle(c, &target).map_err(|e| rt_err(format!("{at}{e}"))))
        })?,
    )?;
    g.set(
        "angle_to",
        lua.create_function(|lua, (x, y): (f32, f32)| {
            with_ctx(lua, |c| Ok((Vec2::new(x, y) - c.my_pos()).angle_deg()))
        })?,
    )?;
    g.set(
        "players",
        lua.create_function(|lua, ()| {
            let list: Vec<PlayerView> = with_ctx(lua, |c| Ok(c.players.clone()))?;
            let t = lua.create_table()?;
            for (i, p) in list.iter().enumerate() {
                let e = lua.create_table()?;
                e.set("id", p.id)?;
                e.set("x", p.pos.x)?;
                e.set("y", p.pos.y)?;
                e.set("hp", p.hp)?;
                e.set("alive", p.alive)?;
                t.set(i + 1, e)?;
            }
            Ok(t)
        })?,
    )?;
    g.set(
        "me",
        lua.create_function(|lua, ()| {
            let (o, owner) = with_ctx(lua, |c| Ok((c.me().copied(), c.owner)))?;
            let t = lua.create_table()?;
            if let Some(o) = o {
                t.set("x", o.pos.x)?;
                t.set("y", o.pos.y)?;
                t.set("hp", o.hp)?;
                t.set("max_hp", o.max_hp)?;
                t.set("phase", o.phase as i64 + 1)?;
            }
            match owner {
                Owner::Boss => t.set("boss", true)?,
                Owner::Enemy(id) => t.set("id", id)?,
            }
            Ok(t)
        })?,
    )?;
    g.set("pos", lua.create_function(|lua, ()| with_ctx(lua, |c| Ok((c.my_pos().x, c.my_pos().y))))?)?;
    g.set("tick", lua.create_function(|lua, ()| with_ctx(lua, |c| Ok(c.tick)))?)?;
    g.set("arena", lua.create_function(|lua, ()| with_ctx(lua, |c| Ok((c.arena.x, c.arena.y))))?)?;
    g.set(
        "rand",
        lua.create_function(|lua, (a, b): (Option<f64>, Option<f64>)| {
            with_ctx(lua, |c| {
                let r = c.rng.next_f64();
                Ok(match (a, b) {
                    (Some(a), Some(b)) => a + (b - a) * r,
                    (Some(b), None) => b * r,
                    _ => r,
                })
            })
        })?,
    )?;
    g.set("rand_int", lua.create_function(|lua, (a, b): (i64, i64)| with_ctx(lua, |c| Ok(c.rng.range_i64(a, b))))?)?;
    g.set(
        "move_to",
        lua.create_function(|lua, (x, y, ticks): (f32, f32, Option<u32>)| {
            if !x.is_finite() || !y.is_finite() {
                return Err(rt_err(format!("{}move_to: coordinates must be finite", caller(lua))));
            }
            with_ctx(lua, |c| {
                let owner = c.owner;
                c.cmds.push(ScriptCmd::MoveTo {
                    owner,
                    target: Vec2::new(x, y),
                    ticks: ticks.unwrap_or(60).clamp(1, 36_000),
                });
                Ok(())
            })
        })?,
    )?;
    g.set(
        "spawn",
        lua.create_function(|lua, (id, x, y): (String, Option<f32>, Option<f32>)| {
            let at = caller(lua);
            with_ctx(lua, |c| {
                if !c.names.enemies.contains(&id) {
                    return Err(rt_err(format!("{at}spawn: unknown enemy '{}'", escape_text(&id))));
                }
                if c.spawns >= MAX_SPAWNS_PER_TICK {
                    return Err(rt_err(format!("{at}spawn: more than {MAX_SPAWNS_PER_TICK} enemies in one tick")));
                }
                c.spawns += 1;
                let me = c.my_pos();
                let pos =
                    Vec2::new(x.filter(|v| v.is_finite()).unwrap_or(me.x), y.filter(|v| v.is_finite()).unwrap_or(me.y));
                c.cmds.push(ScriptCmd::Spawn { enemy: id, pos });
                Ok(())
            })
        })?,
    )?;
    g.set(
        "sfx",
        lua.create_function(|lua, name: String| {
            // Only names every client can decode: a refused name would cost them the rest of
            // that tick's events.
            if name.is_empty()
                || name.len() > MAX_SFX_NAME
                || !name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
            {
                return Err(rt_err(format!(
                    "{}sfx: sound names are 1..={MAX_SFX_NAME} of a-z, 0-9 and _, not '{}'",
                    caller(lua),
                    escape_text(&name)
                )));
            }
            with_ctx(lua, |c| {
                let pos = c.my_pos();
                c.cmds.push(ScriptCmd::Sfx { name, pos });
                Ok(())
            })
        })?,
    )?;
    g.set(
        "log",
        lua.create_function(|lua, args: Variadic<Value>| {
            with_ctx(lua, |_| Ok(()))?;
            let tostring: Function = lua.named_registry_value("hf_tostring")?;
            let mut line = String::new();
            for (k, v) in args.iter().enumerate() {
                if line.len() >= MAX_LOG_BYTES {
                    break;
                }
                let mut part = match v {
                    Value::String(s) => s.to_string_lossy(),
                    other => plain_tostring(lua, other, &tostring)?,
                };
                truncate_chars(&mut part, MAX_LOG_BYTES);
                if k > 0 {
                    line.push(' ');
                }
                line.push_str(&part);
            }
            let mut line = escape_text(&line);
            truncate_chars(&mut line, MAX_LOG_BYTES);
            with_ctx(lua, |c| {
                if c.logs.len() < MAX_LOGS_PER_TICK {
                    c.logs.push(line);
                }
                Ok(())
            })
        })?,
    )?;
    // The string metatable is shared by every string: keep scripts from replacing it.
    let smt: Table = lua.load("return getmetatable('')").eval()?;
    smt.set("__metatable", false)?;
    lua.load(PRELUDE).set_name("=prelude").set_mode(ChunkMode::Text).exec()?;
    // The API every mod sees: a snapshot of the globals, read through each mod's own
    // environment (see `mod_env`), never written.
    let api = lua.create_table()?;
    for pair in g.pairs::<Value, Value>() {
        let (k, v) = pair?;
        if !matches!(&k, Value::String(s) if s.as_bytes() == b"_G") {
            api.raw_set(k, v)?;
        }
    }
    lua.set_named_registry_value("hf_api", api)?;
    Ok(())
}

/// The standard library tables a mod sees as read-only views.
const LIBRARIES: [&str; 5] = ["string", "table", "math", "coroutine", "utf8"];

/// A mod's own global environment: its globals are its own; everything else (the emitter
/// API, the standard library, through read-only views) is looked up in the shared API,
/// which no mod can change. One mod cannot alter what another mod's scripts see.
fn mod_env(lua: &Lua) -> mlua::Result<Table> {
    let api: Table = lua.named_registry_value("hf_api")?;
    let env = lua.create_table()?;
    let refuse = lua.create_function(|_, (_t, k): (Value, Value)| -> mlua::Result<()> {
        let k = match k {
            Value::String(s) => s.to_string_lossy(),
            other => other.type_name().to_string(),
        };
        Err(rt_err(format!("the standard library is read-only (cannot set '{}')", escape_text(&k))))
    })?;
    for name in LIBRARIES {
        let lib: Table = api.get(name)?;
        let view = lua.create_table()?;
        let mt = lua.create_table()?;
        mt.raw_set("__index", lib.clone())?;
        mt.raw_set("__newindex", refuse.clone())?;
        mt.raw_set("__metatable", false)?;
        let next: Function = api.get("next")?;
        let l2 = lib.clone();
        mt.raw_set("__pairs", lua.create_function(move |_, _t: Value| Ok((next.clone(), l2.clone(), Value::Nil)))?)?;
        view.set_metatable(Some(mt))?;
        env.raw_set(name, view)?;
    }
    env.raw_set("_G", env.clone())?;
    let mt = lua.create_table()?;
    mt.raw_set("__index", api)?;
    mt.raw_set("__metatable", false)?;
    env.set_metatable(Some(mt))?;
    Ok(env)
}

fn describe(e: &mlua::Error) -> String {
    let full = describe_full(e);
    match full.find("\nstack traceback") {
        Some(i) => full[..i].to_string(),
        None => full,
    }
}

/// The first `file.lua:N` position in a traceback (the mod's line that called into Rust).
fn traceback_position(tb: &str) -> Option<String> {
    tb.lines().map(str::trim).find_map(|l| {
        let (pos, _) = l.split_once(": ")?;
        let (file, line) = pos.rsplit_once(':')?;
        (file.ends_with(".lua") && !line.is_empty() && line.bytes().all(|b| b.is_ascii_digit()))
            .then(|| pos.to_string())
    })
}

fn describe_full(e: &mlua::Error) -> String {
    match e {
        mlua::Error::CallbackError { cause, traceback } => {
            let msg = describe(cause);
            // Argument conversion errors carry no position of their own.
            match traceback_position(traceback) {
                Some(at) if !msg.contains(".lua:") => format!("{at}: {msg}"),
                _ => msg,
            }
        }
        mlua::Error::RuntimeError(s) => s.clone(),
        mlua::Error::SyntaxError { message, .. } => message.clone(),
        mlua::Error::MemoryError(_) => format!("out of memory (limit {} MiB per instance)", MEMORY_LIMIT >> 20),
        mlua::Error::WithContext { cause, .. } => describe(cause),
        other => other.to_string(),
    }
}

impl LuaRuntime {
    fn new(emitters: Arc<BTreeMap<String, EmitterSource>>, names: Arc<Names>, seed: u64) -> Self {
        let mut rt = LuaRuntime {
            lua: None,
            emitters,
            compiled: HashMap::new(),
            envs: HashMap::new(),
            disabled: HashSet::new(),
            tasks: Vec::new(),
            next_root: 1,
            pending_msgs: Vec::new(),
            resume_at: 0,
        };
        match Self::make_state(names, seed) {
            Ok(l) => rt.lua = Some(l),
            Err(e) => rt.pending_msgs.push(ScriptMessage::Error(format!("could not start Lua: {e}"))),
        }
        rt
    }

    fn make_state(names: Arc<Names>, seed: u64) -> mlua::Result<Lua> {
        let lua = Lua::new_with(
            StdLib::COROUTINE | StdLib::TABLE | StdLib::STRING | StdLib::MATH | StdLib::UTF8,
            LuaOptions::default(),
        )?;
        lua.set_app_data(Ctx {
            tick: 0,
            arena: Vec2::ZERO,
            players: Vec::new(),
            owners: Vec::new(),
            owner: Owner::Boss,
            group: 0,
            root: 0,
            used: 0,
            tick_used: 0,
            resume_start: std::time::Instant::now(),
            over: false,
            over_why: String::new(),
            live_tasks: 0,
            shots: 0,
            spawns: 0,
            last_pos: String::new(),
            cmds: Vec::new(),
            logs: Vec::new(),
            new_tasks: Vec::new(),
            rng: Rng::new(seed ^ 0x4c75_6121),
            names,
        });
        install_api(&lua)?;
        lua.set_global_hook(HookTriggers::new().every_nth_instruction(HOOK_EVERY), |lua, debug| {
            let from_mod = debug.source().source.as_deref().is_some_and(|s| s.starts_with('@'));
            let Ok(Some(mut c)) = lua.try_app_data_mut::<Ctx>() else { return Ok(VmState::Continue) };
            if from_mod {
                if let (Some(src), Some(l)) = (debug.source().short_src, debug.current_line()) {
                    c.last_pos.clear();
                    use std::fmt::Write;
                    let _ = write!(c.last_pos, "{src}:{l}");
                }
            }
            match c.charge(HOOK_EVERY as u64) {
                Ok(()) => Ok(VmState::Continue),
                Err(_) => {
                    let why = c.over_why.clone();
                    let at = if from_mod { c.last_pos.clone() } else { String::new() };
                    drop(c);
                    let at = if at.is_empty() { where_in_mod(lua) } else { format!("{at}: ") };
                    Err(rt_err(format!("{at}{why}")))
                }
            }
        })?;
        lua.set_memory_limit(MEMORY_LIMIT)?;
        Ok(lua)
    }

    fn label(&self, emitter: &str) -> String {
        match self.emitters.get(emitter) {
            Some(e) => format!("mod '{}' emitter '{}' ({})", e.mod_id, e.id, e.path),
            None => format!("emitter '{emitter}'"),
        }
    }

    fn compile(&mut self, name: &str) -> Result<Function, String> {
        if let Some(f) = self.compiled.get(name) {
            return Ok(f.clone());
        }
        let lua = self.lua.as_ref().ok_or("Lua is not available")?;
        let src = self.emitters.get(name).ok_or_else(|| format!("no emitter named '{name}'"))?;
        if let Some(line) = find_close_attribute(&src.source) {
            return Err(format!("{}:{line}: to-be-closed variables (<close>) are not allowed", src.chunk_name()));
        }
        let env = match self.envs.get(&src.mod_id) {
            Some(e) => e.clone(),
            None => {
                let e = mod_env(lua).map_err(|e| describe(&e))?;
                self.envs.insert(src.mod_id.clone(), e.clone());
                e
            }
        };
        let f = lua
            .load(&src.source)
            .set_name(format!("@{}", src.chunk_name()))
            .set_environment(env)
            .set_mode(ChunkMode::Text)
            .into_function()
            .map_err(|e| describe(&e))?;
        self.compiled.insert(name.to_string(), f.clone());
        Ok(f)
    }
}

impl Scripting for LuaRuntime {
    fn start(&mut self, owner: Owner, group: u32, name: &str) {
        if self.disabled.contains(name) {
            return;
        }
        let made = self.compile(name).and_then(|f| {
            self.lua.as_ref().ok_or("Lua is not available".to_string())?.create_thread(f).map_err(|e| describe(&e))
        });
        match made {
            Ok(thread) => {
                let root = self.next_root;
                self.next_root += 1;
                self.tasks.push(Task { thread, owner, group, root, emitter: name.into(), wake: 0, dead: false });
            }
            Err(e) => {
                self.disabled.insert(name.to_string());
                self.pending_msgs.push(ScriptMessage::Error(format!("{}: {e}; emitter disabled", self.label(name))));
            }
        }
    }

    fn stop(&mut self, owner: Owner, group: Option<u32>) {
        self.tasks.retain(|t| !(t.owner == owner && group.is_none_or(|g| t.group == g)));
    }

    fn run(&mut self, view: &ScriptView, out: &mut Vec<ScriptCmd>, msgs: &mut Vec<ScriptMessage>) {
        msgs.append(&mut self.pending_msgs);
        let Some(lua) = self.lua.clone() else { return };
        {
            let Ok(Some(mut c)) = lua.try_app_data_mut::<Ctx>() else { return };
            c.tick = view.tick;
            c.arena = view.arena;
            c.players.clear();
            c.players.extend_from_slice(view.players);
            c.owners.clear();
            c.owners.extend_from_slice(view.owners);
            c.tick_used = 0;
            c.shots = 0;
            c.spawns = 0;
        }
        let mut failed: Vec<(u64, String, String)> = Vec::new();
        // When the instance's budget ran out last tick, the tasks that were left waiting
        // go first now (otherwise the order never changes: it is part of determinism).
        let from = std::mem::take(&mut self.resume_at);
        if from > 0 && from < self.tasks.len() {
            self.tasks.rotate_left(from);
        }
        let mut i = 0;
        while i < self.tasks.len() {
            let t = &self.tasks[i];
            if t.dead || t.wake > view.tick || failed.iter().any(|f| f.0 == t.root) {
                i += 1;
                continue;
            }
            let (owner, group, root) = (t.owner, t.group, t.root);
            let live = self.tasks.iter().filter(|t| !t.dead).count();
            if let Ok(Some(mut c)) = lua.try_app_data_mut::<Ctx>() {
                if c.tick_used >= TICK_INSTRUCTION_BUDGET {
                    self.resume_at = i; // the rest wait for the next tick, and go first
                    break;
                }
                c.owner = owner;
                c.group = group;
                c.root = root;
                c.used = 0;
                c.over = false;
                c.over_why.clear();
                c.live_tasks = live;
                c.resume_start = std::time::Instant::now();
                c.last_pos.clear();
            }
            let res = self.tasks[i].thread.resume::<mlua::MultiValue>(());
            // A budget that ran out ends the task whatever the script did with the error
            // (caught it, swallowed it in a metamethod, returned normally).
            let over = match lua.try_app_data_ref::<Ctx>() {
                Ok(Some(c)) if c.over => Some(if c.last_pos.is_empty() {
                    c.over_why.clone()
                } else {
                    format!("{}: {}", c.last_pos, c.over_why)
                }),
                _ => None,
            };
            let res = match (res, over) {
                // The error the script saw may have been rethrown, wrapped or replaced on
                // the way out: report the budget and where the mod was.
                (_, Some(why)) => Err(rt_err(why)),
                (r, None) => r,
            };
            let new_tasks = match lua.try_app_data_mut::<Ctx>() {
                Ok(Some(mut c)) => std::mem::take(&mut c.new_tasks),
                _ => Vec::new(),
            };
            let t = &mut self.tasks[i];
            match res {
                Ok(vals) if t.thread.status() == ThreadStatus::Resumable => {
                    let n = match vals.front() {
                        Some(Value::Integer(n)) => *n,
                        Some(Value::Number(n)) if n.is_finite() => n.ceil() as i64,
                        _ => 1,
                    };
                    t.wake = view.tick + n.clamp(1, 1_000_000) as u32;
                }
                Ok(_) => t.dead = true,
                Err(e) => {
                    t.dead = true;
                    let mut msg = describe(&e);
                    if matches!(e, mlua::Error::MemoryError(_)) {
                        if let Ok(Some(c)) = lua.try_app_data_ref::<Ctx>() {
                            if !c.last_pos.is_empty() {
                                msg = format!("{}: {msg} (near here)", c.last_pos);
                            }
                        }
                    }
                    failed.push((root, t.emitter.to_string(), msg));
                }
            }
            let emitter = self.tasks[i].emitter.clone();
            for thread in new_tasks {
                self.tasks.push(Task {
                    thread,
                    owner,
                    group,
                    root,
                    emitter: emitter.clone(),
                    wake: view.tick,
                    dead: false,
                });
            }
            i += 1;
        }
        for (root, emitter, err) in failed {
            self.tasks.retain(|t| t.root != root);
            self.disabled.insert(emitter.clone());
            let msg = escape_text(&format!("{}: {err}; emitter disabled", self.label(&emitter)));
            msgs.push(ScriptMessage::Error(msg));
        }
        self.tasks.retain(|t| !t.dead);
        if let Ok(Some(mut c)) = lua.try_app_data_mut::<Ctx>() {
            out.append(&mut c.cmds);
            msgs.extend(c.logs.drain(..).map(ScriptMessage::Log));
        };
    }

    fn task_count(&self) -> usize {
        self.tasks.len()
    }
}
