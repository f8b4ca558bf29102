//! The Lua emitter runtime: one sandboxed Lua 5.4 state per mod per instance (see
//! `content::host`, which also decides the process it runs in), each emitter a
//! coroutine resumed by the simulation tick. `wait(n)` yields for n ticks, so a waiting
//! emitter costs nothing until it is due. Scripts see ids and copies, never the world:
//! every effect (`shot`, `move_to`, `spawn`, `sfx`) is a command applied at the tick
//! boundary. Budgets (per resume and per tick, charged across every coroutine), memory
//! and caps are the constants below; a script that errors or breaks a limit is stopped
//! with a message naming mod, file, line. `api` installs the emitter API, `sandbox` the
//! guards around the standard library and each mod's environment.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use mlua::chunk::ChunkMode;
use mlua::thread::ThreadStatus;
use mlua::{Function, HookTriggers, Lua, LuaOptions, StdLib, Table, Thread, Value, VmState};

pub use super::diag::escape_text;
use crate::sim::defs::ArgValue;
use crate::sim::rng::Rng;
use crate::sim::script::{
    BurstCmd, Owner, OwnerView, PlayerView, ScriptCmd, ScriptMessage, ScriptView, Scripting, ShotCmd,
};
use crate::sim::{Defs, Tick, Vec2};

mod api;
mod sandbox;
pub mod spec;

use api::install_api;
use sandbox::mod_env;
pub use sandbox::{find_close_variable, truncate_chars};

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
/// Memory cap per Lua state (one per mod per instance).
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
#[derive(Clone, Debug, PartialEq)]
pub struct EmitterSource {
    pub id: String,
    pub mod_id: String,
    /// Path shown in messages, e.g. `mods/example/emitters/spiral.lua`.
    pub path: String,
    pub source: String,
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
#[derive(Clone, Debug, Default)]
pub struct Names {
    /// Bullet kind -> (index, radius, damage).
    pub kinds: HashMap<String, (u16, f32, i32)>,
    pub enemies: BTreeSet<String>,
    /// Mods' own sounds (`sounds/NAME.ogg`), besides the game's.
    pub sounds: BTreeSet<String>,
}

impl Names {
    pub fn of(defs: &Defs) -> Names {
        let kinds =
            defs.bullets.iter().enumerate().map(|(i, b)| (b.id.clone(), (i as u16, b.radius, b.damage))).collect();
        Names {
            kinds,
            enemies: defs.enemies.keys().cloned().collect(),
            sounds: defs.media.sounds.keys().cloned().collect(),
        }
    }
}

/// State shared between the runtime and the Rust functions Lua calls.
struct Ctx {
    tick: Tick,
    arena: Vec2,
    party: u32,
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
    telegraphs: usize,
    hints: usize,
    /// Where the running script was at the last hook ("file:line"), for errors that carry
    /// no position of their own (running out of memory).
    last_pos: String,
    cmds: Vec<ScriptCmd>,
    logs: Vec<String>,
    /// Warnings already given, by place (each is given once per instance).
    warned: HashSet<String>,
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
    /// The emitter's `args` table, handed to its first resume (then None).
    first_arg: Option<Table>,
    /// Where the hook last saw this task (kept only in a worker, for its shared page).
    at: String,
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

/// A read-only-by-convention Lua table of an emitter's arguments.
fn args_table(lua: &Lua, a: &ArgValue) -> mlua::Result<Table> {
    fn value(lua: &Lua, a: &ArgValue) -> mlua::Result<Value> {
        Ok(match a {
            ArgValue::Bool(b) => Value::Boolean(*b),
            ArgValue::Int(i) => Value::Integer(*i),
            ArgValue::Num(n) => Value::Number(*n),
            ArgValue::Str(s) => Value::String(lua.create_string(s)?),
            ArgValue::List(l) => {
                let t = lua.create_table()?;
                for (k, x) in l.iter().enumerate() {
                    t.raw_set(k + 1, value(lua, x)?)?;
                }
                Value::Table(t)
            }
            ArgValue::Table(m) => {
                let t = lua.create_table()?;
                for (k, x) in m {
                    t.raw_set(k.as_str(), value(lua, x)?)?;
                }
                Value::Table(t)
            }
        })
    }
    match value(lua, a)? {
        Value::Table(t) => Ok(t),
        _ => lua.create_table(),
    }
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

/// The mod line a coroutine stopped on (`mod/emitters/x.lua:12`): its innermost frame in
/// a mod's file. For a coroutine that ended in a memory error, whose stack Lua keeps (and
/// mlua leaves alone: no handler runs for memory errors).
fn errored_at(thread: &mlua::Thread) -> Option<String> {
    use mlua::ffi;
    let l = thread.state();
    // SAFETY: `l` is this runtime's coroutine, alive while `thread` is, and not running
    // (its resume has returned). lua_getstack and lua_getinfo with "Sl" only read its
    // frames (they push nothing and allocate nothing).
    unsafe {
        let mut ar: ffi::lua_Debug = std::mem::zeroed();
        for level in 0..16 {
            if ffi::lua_getstack(l, level, &mut ar) == 0 {
                break;
            }
            if ffi::lua_getinfo(l, c"Sl".as_ptr(), &mut ar) == 0 || ar.currentline <= 0 || ar.source.is_null() {
                continue;
            }
            if *ar.source != b'@' as std::ffi::c_char {
                continue;
            }
            let src = std::ffi::CStr::from_ptr(ar.short_src.as_ptr()).to_string_lossy();
            return Some(format!("{src}:{}", ar.currentline));
        }
    }
    None
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
        mlua::Error::MemoryError(_) => format!("out of memory (limit {} MiB per mod per fight)", MEMORY_LIMIT >> 20),
        mlua::Error::WithContext { cause, .. } => describe(cause),
        // Types in a modder's words ("an integer", not "i64").
        mlua::Error::BadArgument { pos, name, cause, .. } => {
            let which = name.as_ref().map_or(format!("argument #{pos}"), |n| format!("argument '{n}'"));
            format!("bad {which}: {}", describe(cause))
        }
        mlua::Error::FromLuaConversionError { from, to, .. } => {
            format!("expected {}, got {}", rust_type_in_words(to), lua_type_in_words(from))
        }
        other => other.to_string(),
    }
}

/// A Rust type as a modder reads it.
fn rust_type_in_words(t: &str) -> String {
    let t = t.rsplit("::").next().unwrap_or(t);
    match t {
        "i8" | "i16" | "i32" | "i64" | "isize" | "u8" | "u16" | "u32" | "u64" | "usize" | "Integer" => {
            "an integer (a whole number)".into()
        }
        "f32" | "f64" | "Number" => "a number".into(),
        "String" | "&str" | "str" | "BString" | "StdString" => "a string".into(),
        "bool" => "true or false".into(),
        "Table" => "a table".into(),
        "Function" => "a function".into(),
        other if other.starts_with("Option<") => rust_type_in_words(&other[7..other.len().saturating_sub(1)]),
        other => other.to_string(),
    }
}

/// A Lua type name with its article.
fn lua_type_in_words(t: &str) -> String {
    match t {
        "integer" | "number" => "a number".into(),
        "nil" => "nil".into(),
        "boolean" => "true or false".into(),
        other => format!("a {other}"),
    }
}

impl LuaRuntime {
    /// A runtime for the emitters in `emitters` (the host gives each mod its own).
    pub fn new(emitters: Arc<BTreeMap<String, EmitterSource>>, names: Arc<Names>, seed: u64) -> Self {
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
            party: 1,
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
            telegraphs: 0,
            hints: 0,
            last_pos: String::new(),
            cmds: Vec::new(),
            logs: Vec::new(),
            warned: HashSet::new(),
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
                    crate::content::worker::probe::note_pos(&c.last_pos);
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
        let env = match self.envs.get(&src.mod_id) {
            Some(e) => e.clone(),
            None => {
                let e = mod_env(lua).map_err(|e| describe(&e))?;
                self.envs.insert(src.mod_id.clone(), e.clone());
                e
            }
        };
        // The emitter's arguments arrive as the chunk's `...` on its first resume; the prefix
        // (on the first line, so every line number stays the script's) names them `args`.
        let text = format!("local args = ... or {{}}; {}", src.source);
        let f = lua
            .load(&text)
            .set_name(format!("@{}", src.chunk_name()))
            .set_environment(env)
            .set_mode(ChunkMode::Text)
            .into_function()
            .map_err(|e| describe(&e))?;
        if let Some(line) = find_close_variable(&f)? {
            return Err(format!("{}:{line}: to-be-closed variables (<close>) are not allowed", src.chunk_name()));
        }
        self.compiled.insert(name.to_string(), f.clone());
        Ok(f)
    }
}

impl Scripting for LuaRuntime {
    fn start(&mut self, owner: Owner, group: u32, name: &str, args: Option<&ArgValue>) {
        if self.disabled.contains(name) {
            return;
        }
        let made = self.compile(name).and_then(|f| {
            let lua = self.lua.as_ref().ok_or("Lua is not available".to_string())?;
            let thread = lua.create_thread(f).map_err(|e| describe(&e))?;
            let t = match args {
                Some(a) => args_table(lua, a),
                None => lua.create_table(),
            }
            .map_err(|e| describe(&e))?;
            Ok((thread, t))
        });
        match made {
            Ok((thread, t)) => {
                let root = self.next_root;
                self.next_root += 1;
                self.tasks.push(Task {
                    thread,
                    owner,
                    group,
                    root,
                    emitter: name.into(),
                    wake: 0,
                    dead: false,
                    first_arg: Some(t),
                    at: String::new(),
                });
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
            c.party = view.party;
            c.players.clear();
            c.players.extend_from_slice(view.players);
            c.owners.clear();
            c.owners.extend_from_slice(view.owners);
            c.tick_used = 0;
            c.shots = 0;
            c.spawns = 0;
            c.telegraphs = 0;
            c.hints = 0;
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
            let probing = crate::content::worker::probe::attached();
            if probing {
                crate::content::worker::probe::note_emitter(&self.tasks[i].emitter);
                crate::content::worker::probe::note_pos(&self.tasks[i].at);
            }
            let first = self.tasks[i].first_arg.take();
            let res = self.tasks[i].thread.resume::<mlua::MultiValue>(first);
            if probing {
                if let Ok(Some(c)) = lua.try_app_data_ref::<Ctx>() {
                    if !c.last_pos.is_empty() {
                        self.tasks[i].at.clone_from(&c.last_pos);
                    }
                }
            }
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
                        // Lua gives a memory error no position; the task's stack still
                        // says where it was (kept after a memory error), else the last
                        // line the instruction hook saw.
                        match errored_at(&t.thread) {
                            Some(at) => msg = format!("{at}: {msg}"),
                            None => {
                                if let Ok(Some(c)) = lua.try_app_data_ref::<Ctx>() {
                                    if !c.last_pos.is_empty() {
                                        msg = format!("{}: {msg} (near here)", c.last_pos);
                                    }
                                }
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
                    first_arg: None,
                    at: String::new(),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Standard Lua names the sandbox keeps (or replaces with guarded versions).
    const STANDARD: &[&str] = &[
        "_G",
        "_VERSION",
        "assert",
        "error",
        "getmetatable",
        "ipairs",
        "next",
        "pairs",
        "pcall",
        "rawequal",
        "rawget",
        "rawlen",
        "rawset",
        "select",
        "setmetatable",
        "tonumber",
        "tostring",
        "type",
        "xpcall",
        "coroutine",
        "math",
        "string",
        "table",
        "utf8",
        "warn",
    ];

    #[test]
    fn the_runtime_installs_exactly_the_described_api_and_the_stubs_cover_it() {
        let names = Arc::new(Names { kinds: HashMap::new(), enemies: BTreeSet::new(), sounds: BTreeSet::new() });
        let lua = LuaRuntime::make_state(names, 1).unwrap();
        let mut installed = BTreeSet::new();
        for pair in lua.globals().pairs::<String, Value>() {
            let (k, v) = pair.unwrap();
            if STANDARD.contains(&k.as_str()) {
                continue;
            }
            assert!(matches!(v, Value::Function(_)), "global '{k}' is not a function");
            installed.insert(k);
        }
        let described: BTreeSet<String> = spec::FUNCTIONS.iter().map(|f| f.name.to_string()).collect();
        let undocumented: Vec<_> = installed.difference(&described).collect();
        let missing: Vec<_> = described.difference(&installed).collect();
        assert!(undocumented.is_empty(), "installed but not in spec::FUNCTIONS: {undocumented:?}");
        assert!(missing.is_empty(), "in spec::FUNCTIONS but not installed: {missing:?}");
        let stubs = spec::stubs();
        for f in spec::FUNCTIONS {
            assert!(stubs.contains(&format!("\nfunction {}(", f.name)), "no stub for {}", f.name);
        }
        for f in spec::SHOT_FIELDS.iter().chain(spec::RING_FIELDS).chain(spec::FAN_FIELDS) {
            assert!(
                stubs.contains(&format!("---@field {} ", f.name)) || stubs.contains(&format!("---@field {}? ", f.name)),
                "no stub field {}",
                f.name
            );
        }
        assert!(stubs.starts_with("---@meta"));
        // The definitions file is valid Lua (lua-language-server reads it as such).
        Lua::new().load(&stubs).into_function().expect("the stubs parse as Lua");
    }
}
