//! The client's copy of an instance's bullets: spawn events applied to a `BulletPool`,
//! each fast-forwarded by the ticks it spent in flight, then stepped by the very code the
//! server runs. Only hits (and bullet cancels) ever remove a bullet early.

use crate::protocol::WireEvent;
use crate::sim::{BulletPool, BulletSpawn, Tick, Vec2};

#[derive(Default)]
pub struct Replica {
    pub pool: BulletPool,
    /// The server tick the pool currently shows.
    pub tick: Tick,
    pub arena: Vec2,
    /// Spawns stamped later than `tick`, held until the replica gets there.
    future: Vec<BulletSpawn>,
}

impl Replica {
    pub fn new(arena: Vec2, tick: Tick) -> Self {
        Replica { pool: BulletPool::new(), tick, arena, future: Vec::new() }
    }

    fn spawn(&mut self, s: &BulletSpawn) {
        if self.pool.find(s.uid).is_some() {
            return; // already have it (a repeated dump): spawns are idempotent
        }
        if s.tick > self.tick {
            self.future.push(*s);
            return;
        }
        self.pool.spawn_advanced(s, 0, self.tick - s.tick, self.arena);
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
