//! The deterministic world: a fixed 60 Hz step over the hub and every dungeon instance.
//!
//! Nothing in here does I/O, reads a clock, or knows about networking or rendering. The
//! server owns a [`World`]; the client runs [`BulletPool`] and [`movement`] from here too,
//! so the bullets it draws and the ship it predicts use the very code the server uses.
//!
//! Coordinates: pixels, x to the right, y **down** (screen convention), origin at the
//! top-left corner of an arena. Angles: degrees, 0 = +x (right), 90 = +y (down), so angles
//! grow clockwise on screen. Time: ticks of 1/60 s. Speeds: pixels per tick.

pub mod bullets;
pub mod client_defs;
pub mod config;
pub mod defs;
pub mod events;
pub mod hits;
pub mod instance;
pub mod math;
pub mod movement;
pub mod player;
pub mod rng;
pub mod script;
pub mod world;

pub use bullets::{BulletPool, BulletSpawn, Team};
pub use client_defs::ClientDefs;
pub use config::*;
pub use defs::Defs;
pub use events::SimEvent;
pub use instance::{Instance, InstanceId, InstanceKind};
pub use math::Vec2;
pub use player::{InputDrop, InputFrame, Player, PlayerId};
pub use world::World;

/// A simulation tick number. 60 per second, starting at 0 when the world is created.
pub type Tick = u32;
