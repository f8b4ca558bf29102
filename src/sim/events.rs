//! What a step reports. The server turns some of these into wire messages; `Transfer`,
//! `InstanceOpened` and `InstanceClosed` are server-only and have no encoding at all.

use super::bullets::{BulletSpawn, Burst};
use super::instance::InstanceId;
use super::math::Vec2;
use super::player::{PlayerId, RunStats};

/// Something that can take damage.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Target {
    Player(PlayerId),
    Enemy(u32),
    Boss,
}

/// Why a player moved between instances.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransferReason {
    Joined,
    Portal,
    Escaped,
    LeftAfterDeath,
    Cleared,
    /// Everyone was down or out: the run failed.
    Failed,
    /// The server stopped the fight (a mod's script worker was lost).
    Stopped,
}

/// How a run ended for those it is told to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunOutcome {
    Cleared,
    Failed,
    /// The player left before the end (escape, or out and gone to the hub).
    Abandoned,
    /// The server stopped the fight: its scripts could not go on (a mod's worker was
    /// killed at its deadline or died). Nothing counts.
    Stopped,
}

/// One player's line in a run's summary.
#[derive(Clone, Debug, PartialEq)]
pub struct RunRow {
    pub id: PlayerId,
    pub name: String,
    pub score: u32,
    pub stats: RunStats,
    /// Out when the run ended (or when they left).
    pub out: bool,
}

/// What a run came to: shown to every participant when it ends.
#[derive(Clone, Debug, PartialEq)]
pub struct RunSummary {
    pub dungeon: String,
    pub outcome: RunOutcome,
    /// Ticks from the instance's opening to the end.
    pub ticks: u32,
    pub team_score: u32,
    pub rows: Vec<RunRow>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum SimEvent {
    BulletSpawned {
        instance: InstanceId,
        spawn: BulletSpawn,
    },
    /// A ring, fan or volley: `burst.count` bullets with consecutive uids, one event.
    BurstSpawned {
        instance: InstanceId,
        burst: Burst,
    },
    /// A bullet removed early without a hit (a bullet cancel when a boss dies). Expiry
    /// and leaving the arena are never reported: both sides derive them.
    BulletDespawned {
        instance: InstanceId,
        uid: u32,
    },
    /// A bullet hit a target: the bullet is consumed and `amount` damage dealt, leaving
    /// the target at `hp`. One event, so nothing downstream has to pair a despawn with a
    /// damage by their order.
    BulletHit {
        instance: InstanceId,
        uid: u32,
        target: Target,
        amount: i32,
        hp: i32,
    },
    Death {
        instance: InstanceId,
        target: Target,
    },
    PhaseChanged {
        instance: InstanceId,
        phase: u8,
        name: String,
    },
    EnemySpawned {
        instance: InstanceId,
        id: u32,
        def: String,
        pos: Vec2,
    },
    BossSpawned {
        instance: InstanceId,
        def: String,
    },
    InstanceCleared {
        instance: InstanceId,
    },
    /// A player fired a flare at `pos` on `tick`: the enemy bullets within its radius are
    /// gone (each side works out which from this one event).
    Flare {
        instance: InstanceId,
        player: PlayerId,
        pos: Vec2,
        tick: super::Tick,
    },
    /// A downed player's time ran out (or nobody could revive them): out of the run.
    PlayerOut {
        instance: InstanceId,
        player: PlayerId,
    },
    Revived {
        instance: InstanceId,
        player: PlayerId,
        by: PlayerId,
    },
    /// A wave was cleared (1 = the first): those standing healed and gained a flare.
    WaveCleared {
        instance: InstanceId,
        wave: u32,
    },
    /// The run ended for the players in `to` (all of them, or one who left).
    RunEnded {
        instance: InstanceId,
        to: Vec<PlayerId>,
        summary: RunSummary,
    },
    Sfx {
        instance: InstanceId,
        name: String,
        pos: Vec2,
    },
    /// A script's words for the players in the instance (`hint(text)`).
    Hint {
        instance: InstanceId,
        text: String,
    },
    /// A script's warning before an attack (drawn by clients, nothing else).
    Telegraph {
        instance: InstanceId,
        telegraph: super::script::Telegraph,
    },
    /// A script wrote with `log(...)`.
    ScriptLog {
        instance: InstanceId,
        message: String,
    },
    /// A script failed or broke a limit and its emitter was stopped.
    ScriptError {
        instance: InstanceId,
        message: String,
    },
    /// The instance's scripts could not go on (a mod's worker was lost): its run ended
    /// for `players`, who go back to the hub.
    InstanceStopped {
        instance: InstanceId,
        dungeon: String,
        /// For the log and the console (mod, emitter, file, line).
        reason: String,
        /// For the players (which mod, in plain words).
        summary: String,
        players: Vec<PlayerId>,
    },
    /// Server-only: a player moved (or arrived, `from: None`).
    Transfer {
        player: PlayerId,
        from: Option<InstanceId>,
        to: InstanceId,
        reason: TransferReason,
    },
    /// Server-only: a linkdead body resolved and the player is gone from the world.
    PlayerRemoved {
        player: PlayerId,
        instance: InstanceId,
    },
    /// Server-only.
    InstanceOpened {
        instance: InstanceId,
        dungeon: String,
    },
    /// Server-only.
    InstanceClosed {
        instance: InstanceId,
    },
}

impl SimEvent {
    /// The bullets this event created (one for a spawn, each of a burst's, else none).
    pub fn spawned(&self) -> Vec<BulletSpawn> {
        match self {
            SimEvent::BulletSpawned { spawn, .. } => vec![*spawn],
            SimEvent::BurstSpawned { burst, .. } => burst.spawns().collect(),
            _ => Vec::new(),
        }
    }
}
