//! The boundary between the simulation and emitter scripts. The simulation hands scripts
//! a read-only view of the instance each tick and applies the commands they queue at the
//! tick boundary; scripts never hold references into the world, only ids.
//! `content::lua` implements [`Scripting`] with sandboxed Lua.

use super::math::Vec2;
use super::player::PlayerId;
use super::Tick;

/// Who owns an emitter inside one instance.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Owner {
    Enemy(u32),
    Boss,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PlayerView {
    pub id: PlayerId,
    pub pos: Vec2,
    pub hp: i32,
    pub alive: bool,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OwnerView {
    pub owner: Owner,
    pub pos: Vec2,
    pub hp: i32,
    pub max_hp: i32,
    /// Boss phase (0-based); 0 for enemies.
    pub phase: u8,
}

/// What a script may read.
pub struct ScriptView<'a> {
    pub tick: Tick,
    pub arena: Vec2,
    /// The party the run was scaled for (the players in when the first wave came; before
    /// that, those here now; 1 at least).
    pub party: u32,
    pub players: &'a [PlayerView],
    pub owners: &'a [OwnerView],
}

/// A bullet a script asked for, already resolved to a kind index.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ShotCmd {
    pub pos: Vec2,
    /// Degrees.
    pub angle: f32,
    /// Pixels per tick.
    pub speed: f32,
    pub radius: f32,
    pub lifetime: u16,
    pub kind: u16,
    pub accel: f32,
    pub turn: f32,
    pub max_speed: f32,
    pub damage: i32,
}

/// Several bullets of one shape in one call (`ring`, `fan`): one event on the wire. Bullet
/// `i` points `floor(i * span / div)` angle grid steps (1/65536 turn) after `shot.angle`
/// and starts `offset` px from `shot.pos` along its direction.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BurstCmd {
    pub shot: ShotCmd,
    pub count: u16,
    pub span: u32,
    pub div: u16,
    pub offset: f32,
}

/// A warning drawn before an attack (`telegraph{...}`): a thin line from `pos` along
/// `angle` (degrees) for `length` px and `width` px wide, or, for a circle, a glow of
/// radius `length` around `pos`; shown for `ticks` ticks. Only a picture: it changes nothing
/// in the simulation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Telegraph {
    pub pos: Vec2,
    pub angle: f32,
    pub length: f32,
    pub width: f32,
    pub ticks: u8,
    pub circle: bool,
    /// A place asked into (a gold mark: stand here), not a warning (red: keep out).
    pub safe: bool,
}

/// Limits on a telegraph (the API refuses beyond them; the wire carries no more).
pub const TELEGRAPH_LENGTH_MAX: f32 = 4096.0;
pub const TELEGRAPH_WIDTH_MAX: f32 = 64.0;
pub const TELEGRAPH_TICKS_MAX: u8 = 240;
/// Most telegraphs one mod's scripts may show in a tick (in one fight).
pub const TELEGRAPHS_PER_TICK: usize = 64;

impl Telegraph {
    /// A telegraph read from bytes (`kind`: bit 0 a circle, bit 1 safe; nothing above),
    /// if it is one the API could have made: what both decoders (the network's and the
    /// worker pipe's) accept.
    pub fn decoded(pos: Vec2, angle: f32, length: f32, width: f32, ticks: u8, kind: u8) -> Option<Telegraph> {
        if kind > 3 {
            return None;
        }
        let (circle, safe) = (kind & 1 != 0, kind & 2 != 0);
        Some(Telegraph { pos, angle, length, width, ticks, circle, safe }).filter(Telegraph::valid)
    }

    /// The kind byte both encoders write (see [`Telegraph::decoded`]).
    pub fn kind(&self) -> u8 {
        u8::from(self.circle) | u8::from(self.safe) << 1
    }

    /// Within the limits, with finite numbers.
    pub fn valid(&self) -> bool {
        self.pos.x.is_finite()
            && self.pos.y.is_finite()
            && self.angle.is_finite()
            && (0.0..=TELEGRAPH_LENGTH_MAX).contains(&self.length)
            && (0.0..=TELEGRAPH_WIDTH_MAX).contains(&self.width)
            && (1..=TELEGRAPH_TICKS_MAX).contains(&self.ticks)
    }
}

/// Commands queued by scripts, applied by the simulation at the end of the script phase.
#[derive(Clone, Debug, PartialEq)]
pub enum ScriptCmd {
    Shot(ShotCmd),
    Burst(BurstCmd),
    MoveTo {
        owner: Owner,
        target: Vec2,
        ticks: u32,
    },
    Spawn {
        enemy: String,
        pos: Vec2,
    },
    Sfx {
        name: String,
        pos: Vec2,
    },
    Telegraph(Telegraph),
    /// Words for the players on screen (`hint(text)`): a tutorial's lesson.
    Hint(String),
    /// The enemy leaves the fight (`leave()`): gone without dying, its scripts stopped.
    Leave {
        owner: Owner,
    },
}

/// Longest hint, bytes (the wire carries it as a string).
pub const HINT_MAX_BYTES: usize = 160;
/// Most hints one mod's scripts may show in a tick.
pub const HINTS_PER_TICK: usize = 4;

/// Whether `text` may be shown as a hint: 1..=HINT_MAX_BYTES bytes with no control or
/// invisible characters (what every client's decoder accepts).
pub fn hint_ok(text: &str) -> bool {
    !text.is_empty() && text.len() <= HINT_MAX_BYTES && !text.chars().any(crate::protocol::names::invisible)
}

/// A message from the script runtime: `log(...)` output or an error that stopped an emitter.
#[derive(Clone, Debug, PartialEq)]
pub enum ScriptMessage {
    Log(String),
    Error(String),
}

/// Why a fight's scripts could not go on.
#[derive(Clone, Debug, PartialEq)]
pub struct Lost {
    /// For the log and the console: mod, emitter, file, what happened, the last line seen.
    pub detail: String,
    /// For the players: which mod, in a few plain words.
    pub summary: String,
}

/// One instance's script runtime.
pub trait Scripting: Send {
    /// Starts emitter `name` for `owner` with its arguments; `group` is the boss phase (0
    /// for enemies).
    fn start(&mut self, owner: Owner, group: u32, name: &str, args: Option<&super::defs::ArgValue>);
    /// Stops the owner's emitters (all, or one group) and every task they started.
    fn stop(&mut self, owner: Owner, group: Option<u32>);
    /// Runs every task due this tick.
    fn run(&mut self, view: &ScriptView, out: &mut Vec<ScriptCmd>, msgs: &mut Vec<ScriptMessage>);
    /// The first half of [`Scripting::run`]: runtimes that work elsewhere (a worker
    /// process) are handed the tick and work meanwhile; the rest run now. The world calls
    /// this for every instance before it calls [`Scripting::run_end`] for any, so workers
    /// compute side by side and no instance waits for another's. `run` is `run_begin`
    /// then `run_end`.
    fn run_begin(&mut self, view: &ScriptView, out: &mut Vec<ScriptCmd>, msgs: &mut Vec<ScriptMessage>) {
        self.run(view, out, msgs)
    }
    /// The second half: collects what was handed out in `run_begin`.
    fn run_end(&mut self, _out: &mut Vec<ScriptCmd>, _msgs: &mut Vec<ScriptMessage>) {}
    /// Live tasks (for tests and diagnostics).
    fn task_count(&self) -> usize;
    /// Why this runtime can no longer run the fight's scripts (a mod's worker process was
    /// killed or died), once; the instance then ends its run with that reason.
    fn take_lost(&mut self) -> Option<Lost> {
        None
    }
}

/// Makes a script runtime per instance, seeded so the instance's run is reproducible.
pub trait ScriptFactory: Send + Sync {
    fn create(&self, seed: u64) -> Box<dyn Scripting>;
}

/// A runtime with no scripts: emitters do nothing. Used by the client and simple tests.
pub struct NoScripts;

impl Scripting for NoScripts {
    fn start(&mut self, _: Owner, _: u32, _: &str, _: Option<&super::defs::ArgValue>) {}
    fn stop(&mut self, _: Owner, _: Option<u32>) {}
    fn run(&mut self, _: &ScriptView, _: &mut Vec<ScriptCmd>, _: &mut Vec<ScriptMessage>) {}
    fn task_count(&self) -> usize {
        0
    }
}

impl ScriptFactory for NoScripts {
    fn create(&self, _: u64) -> Box<dyn Scripting> {
        Box::new(NoScripts)
    }
}
