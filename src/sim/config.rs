//! The game's rule numbers, in one place. Every number the seed fixes is here with its reason.

/// Simulation steps per second.
pub const TICK_RATE: u32 = 60;
/// Player speed: 240 px/s, i.e. 4 px per tick at full stick.
pub const PLAYER_SPEED: f32 = 240.0 / TICK_RATE as f32;
/// Player hitbox radius (the drawn ship is larger; see `PLAYER_VISUAL_RADIUS`).
pub const PLAYER_HITBOX_RADIUS: f32 = 5.0;
/// Radius of the drawn ship. Bullets leave from its nose, not from the hitbox centre.
pub const PLAYER_VISUAL_RADIUS: f32 = 12.0;
/// Where a player's bullets appear, measured from the centre along the aim.
pub const PLAYER_MUZZLE_OFFSET: f32 = PLAYER_VISUAL_RADIUS + 2.0;
/// Full player health.
pub const PLAYER_MAX_HP: i32 = 100;
/// Ticks between two player shots: holding fire every tick fires exactly this fast.
pub const PLAYER_FIRE_COOLDOWN_TICKS: u32 = 6;
/// Arrival protection, 2 s: invulnerable and unable to shoot.
pub const SPAWN_GRACE_TICKS: u32 = 2 * TICK_RATE;
/// A dead player may leave for the hub only after 3 s, whatever the client sends.
pub const RESPAWN_LOCKOUT_TICKS: u32 = 3 * TICK_RATE;
/// Holding escape this long in a dungeon sends a player to the hub (1 s).
pub const ESCAPE_CHANNEL_TICKS: u32 = TICK_RATE;
/// Inputs older than this (relative to the server tick) are stale; a client that stops
/// sending coasts on its last input this many ticks and then stops.
pub const INPUT_MAX_AGE: u32 = 30;
/// Inputs further than this ahead of the server tick claim the future and are dropped.
/// Must stay far wider than the client's lead band (see `client`); a test asserts it.
pub const INPUT_MAX_LEAD: u32 = 40;
/// Per-player input queue cap; a flood beyond it drops the oldest queued frames. An honest
/// client queues at most its lead (the client keeps it under 20) plus a few redundant
/// copies of frames not yet consumed; the cap sits below the legal window
/// (`INPUT_MAX_AGE + INPUT_MAX_LEAD + 1` ticks) so that a flood can be told apart.
pub const INPUT_QUEUE_CAP: usize = 32;
/// Player bullet kind used when the content does not name one.
pub const DEFAULT_PLAYER_BULLET: &str = "player_shot";
/// Hard cap on live bullets per instance, so a runaway script cannot exhaust memory.
pub const MAX_BULLETS_PER_INSTANCE: usize = 120_000;
/// Hard cap on live enemies per instance.
pub const MAX_ENEMIES_PER_INSTANCE: usize = 256;
/// Bullets die this far outside the arena bounds.
pub const ARENA_MARGIN: f32 = 32.0;

// ---------------------------------------------------------------- the game's rules (runs)

/// Focus (an input bit): movement at this fraction of full speed, and a narrower, denser
/// stream of shots.
pub const FOCUS_SPEED: f32 = 0.45;
/// Ticks between shots while focused (unfocused: `PLAYER_FIRE_COOLDOWN_TICKS`, as a fan).
pub const FOCUS_FIRE_COOLDOWN_TICKS: u32 = 4;
/// The unfocused fan: this many shots, this many degrees apart.
pub const FAN_SHOTS: u16 = 3;
pub const FAN_SPREAD_DEG: f32 = 9.0;
/// Graze: an enemy bullet that passes this close to a player's hitbox (beyond the hit
/// distance) without hitting scores once for that player.
pub const GRAZE_RADIUS: f32 = 16.0;
/// Flares (the bomb): held at most, held at the start of a run, and grazes per charge.
pub const MAX_FLARES: u8 = 2;
pub const START_FLARES: u8 = 1;
pub const GRAZES_PER_FLARE: u32 = 40;
/// A flare clears enemy bullets within this radius of the player and deals this damage to
/// enemies and the boss within it. No invulnerability.
pub const FLARE_RADIUS: f32 = 150.0;
pub const FLARE_DAMAGE: i32 = 60;
/// Downed: at 0 HP with a teammate standing, a player is downed this long; a living
/// teammate within `REVIVE_RANGE` for `REVIVE_TICKS` revives them at `REVIVE_HP`; else
/// they are out until the run ends.
pub const DOWNED_TICKS: u32 = 10 * TICK_RATE;
pub const REVIVE_RANGE: f32 = 48.0;
pub const REVIVE_TICKS: u32 = 2 * TICK_RATE;
pub const REVIVE_HP: i32 = PLAYER_MAX_HP * 40 / 100;
/// A revived player's protection (as on arrival, shorter).
pub const REVIVE_GRACE_TICKS: u32 = TICK_RATE;

/// Lag compensation: a player's shots are tested against enemies and the boss where that
/// player saw them, up to this many ticks back (250 ms). The client says how far behind
/// its bullets it draws them (its view delay); the server clamps it here, so a client that
/// lies gains at most this much: hits on where an enemy was within the last 250 ms. Enemy
/// bullets against players are never rewound.
pub const LAG_COMP_MAX_TICKS: u32 = 15;
/// A view delay travels and is kept in quarter ticks (the client draws enemies at a
/// fractional time; a whole tick's rounding is 3 px on a target moving 180 px/s).
pub const VIEW_STEPS_PER_TICK: u32 = 4;
/// HP every living player gets back when a wave is cleared (a quarter of the maximum);
/// full HP when the boss appears.
pub const WAVE_HEAL: i32 = PLAYER_MAX_HP / 4;
/// Enemy and boss HP grow by this fraction for each player beyond the first in the party
/// that entered (a party of 4 fights 2.8 times the HP of one player).
pub const PARTY_HP_PER_PLAYER: f32 = 0.6;
/// Score: per kill, per boss, per graze, per unused flare at a clear, and for a clear with
/// nobody hit; time bonus per second under par (par from content, else 180 s).
pub const SCORE_KILL: u32 = 100;
pub const SCORE_BOSS: u32 = 5_000;
pub const SCORE_GRAZE: u32 = 10;
pub const SCORE_FLARE_LEFT: u32 = 500;
pub const SCORE_NO_HIT: u32 = 2_000;
pub const SCORE_PER_SECOND_UNDER_PAR: u32 = 50;
pub const DEFAULT_PAR_SECONDS: u32 = 180;
