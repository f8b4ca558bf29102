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
