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

use crate::sim::rng::Rng;
use crate::sim::script::{
    Owner, OwnerView, PlayerView, ScriptCmd, ScriptFactory, ScriptMessage, ScriptView, Scripting, ShotCmd,
};
use crate::sim::{Defs, Tick, Vec2};

/// Instructions one resume of one emitter may execute.
pub const INSTRUCTION_LIMIT: u32 = 200_000;
/// Hook granularity: the budget is checked every this many instructions.
const HOOK_EVERY: u32 = 1_000;
/// Memory cap per Lua state (one per instance).
pub const MEMORY_LIMIT: usize = 32 * 1024 * 1024;
/// Most shots one `ring`/`fan` call may fire.
pub const MAX_PATTERN_SHOTS: i64 = 720;
/// Most `log` lines per tick per instance (the rest are dropped).
const MAX_LOGS_PER_TICK: usize = 16;

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
    used: u32,
    over: bool,
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
    disabled: HashSet<String>,
    tasks: Vec<Task>,
    next_root: u64,
    pending_msgs: Vec<ScriptMessage>,
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

fn with_ctx<R>(lua: &Lua, f: impl FnOnce(&mut Ctx) -> mlua::Result<R>) -> mlua::Result<R> {
    match lua.try_app_data_mut::<Ctx>() {
        Ok(Some(mut c)) => f(&mut c),
        _ => Err(rt_err("emitter API called outside an emitter")),
    }
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
        "task",
        lua.create_function(|lua, f: Function| {
            let th = lua.create_thread(f)?;
            with_ctx(lua, |c| {
                c.new_tasks.push(th);
                Ok(())
            })
        })?,
    )?;
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
                    return Err(rt_err(format!("{at}spawn: unknown enemy '{id}'")));
                }
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
            with_ctx(lua, |c| {
                let pos = c.my_pos();
                c.cmds.push(ScriptCmd::Sfx { name: name.chars().take(64).collect(), pos });
                Ok(())
            })
        })?,
    )?;
    g.set(
        "log",
        lua.create_function(|lua, args: Variadic<Value>| {
            let parts: Vec<String> = args.iter().map(|v| v.to_string().unwrap_or_else(|_| "?".into())).collect();
            let mut line = parts.join(" ");
            line.truncate(200);
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
    Ok(())
}

fn describe(e: &mlua::Error) -> String {
    let full = describe_full(e);
    match full.find("\nstack traceback") {
        Some(i) => full[..i].to_string(),
        None => full,
    }
}

fn describe_full(e: &mlua::Error) -> String {
    match e {
        mlua::Error::CallbackError { cause, .. } => describe(cause),
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
            disabled: HashSet::new(),
            tasks: Vec::new(),
            next_root: 1,
            pending_msgs: Vec::new(),
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
            over: false,
            last_pos: String::new(),
            cmds: Vec::new(),
            logs: Vec::new(),
            new_tasks: Vec::new(),
            rng: Rng::new(seed ^ 0x4c75_6121),
            names,
        });
        install_api(&lua)?;
        lua.set_global_hook(HookTriggers::new().every_nth_instruction(HOOK_EVERY), |lua, debug| {
            let Ok(Some(mut c)) = lua.try_app_data_mut::<Ctx>() else { return Ok(VmState::Continue) };
            c.used = c.used.saturating_add(HOOK_EVERY);
            if let (Some(src), Some(line)) = (debug.source().short_src, debug.current_line()) {
                c.last_pos.clear();
                use std::fmt::Write;
                let _ = write!(c.last_pos, "{src}:{line}");
            }
            if c.used > INSTRUCTION_LIMIT || c.over {
                c.over = true;
                let src = debug.source().short_src.map(|s| s.to_string()).unwrap_or_default();
                let line = debug.current_line().map(|l| l.to_string()).unwrap_or_default();
                return Err(rt_err(format!(
                    "{src}:{line}: instruction limit exceeded ({INSTRUCTION_LIMIT} per resume; use wait(n) in long loops)"
                )));
            }
            Ok(VmState::Continue)
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
        let f = lua
            .load(&src.source)
            .set_name(format!("@{}", src.path))
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
        }
        let mut failed: Vec<(u64, String, String)> = Vec::new();
        let mut i = 0;
        while i < self.tasks.len() {
            let t = &self.tasks[i];
            if t.dead || t.wake > view.tick || failed.iter().any(|f| f.0 == t.root) {
                i += 1;
                continue;
            }
            let (owner, group, root) = (t.owner, t.group, t.root);
            if let Ok(Some(mut c)) = lua.try_app_data_mut::<Ctx>() {
                c.owner = owner;
                c.group = group;
                c.root = root;
                c.used = 0;
                c.over = false;
                c.last_pos.clear();
            }
            let res = self.tasks[i].thread.resume::<mlua::MultiValue>(());
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
            msgs.push(ScriptMessage::Error(format!("{}: {err}; emitter disabled", self.label(&emitter))));
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
