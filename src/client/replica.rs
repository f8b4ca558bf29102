//! The client's copy of an instance's bullets: spawn events applied to a `BulletPool`,
//! each fast-forwarded by the ticks it spent in flight, then stepped by the very code the
//! server runs. Only hits (and bullet cancels) ever remove a bullet early.

use crate::protocol::WireEvent;
use crate::sim::config::MAX_BULLETS_PER_INSTANCE;
use crate::sim::{BulletPool, BulletSpawn, Tick, Vec2};

/// Spawns stamped further ahead of the replica than this are refused (a server is never
/// more than a round trip ahead of the replica's clock).
pub const MAX_AHEAD_TICKS: u32 = 600;
/// The longest fast-forward: the longest life a bullet can have (3,600 ticks).
pub const MAX_FAST_FORWARD: u32 = 3_600;

#[derive(Default)]
pub struct Replica {
    pub pool: BulletPool,
    /// The server tick the pool currently shows.
    pub tick: Tick,
    pub arena: Vec2,
    /// Spawns stamped later than `tick`, held until the replica gets there.
    future: Vec<BulletSpawn>,
    /// Spawns refused for breaking the replica's limits (a hostile or broken server).
    pub refused: u64,
}

impl Replica {
    pub fn new(arena: Vec2, tick: Tick) -> Self {
        Replica { pool: BulletPool::new(), tick, arena, future: Vec::new(), refused: 0 }
    }

    fn spawn(&mut self, s: &BulletSpawn) {
        if self.pool.find(s.uid).is_some() {
            return; // already have it (a repeated dump): spawns are idempotent
        }
        // Whatever a (hostile) server sends, the replica holds no more than an instance
        // may, keeps nothing for the far future, and fast-forwards nothing longer than a
        // bullet may live: a burst of 1,024 bullets cannot buy unbounded work.
        if self.pool.len() + self.future.len() >= MAX_BULLETS_PER_INSTANCE {
            self.refused += 1;
            return;
        }
        if s.tick > self.tick {
            if s.tick - self.tick > MAX_AHEAD_TICKS {
                self.refused += 1;
                return;
            }
            self.future.push(*s);
            return;
        }
        let behind = self.tick - s.tick;
        if behind >= s.lifetime as u32 || behind > MAX_FAST_FORWARD {
            return; // it has expired already
        }
        self.pool.spawn_advanced(s, 0, behind, self.arena);
    }

    pub fn apply(&mut self, e: &WireEvent) {
        match e {
            WireEvent::Spawn(s) => self.spawn(s),
            WireEvent::Burst(b) => {
                for s in b.spawns() {
                    self.spawn(&s);
                }
            }
            WireEvent::Hit { uid, .. } | WireEvent::Despawn { uid } if !self.pool.despawn(*uid) => {
                self.future.retain(|f| f.uid != *uid);
            }
            _ => {}
        }
    }

    /// One tick of every bullet, then any held spawn that is now due.
    pub fn step(&mut self) {
        self.tick += 1;
        self.pool.step(self.arena);
        if !self.future.is_empty() {
            let due: Vec<BulletSpawn> = self.future.iter().filter(|s| s.tick <= self.tick).copied().collect();
            self.future.retain(|s| s.tick > self.tick);
            for s in due {
                self.spawn(&s);
            }
        }
    }
}
