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

#[derive(Clone, Default)]
pub struct Replica {
    pub pool: BulletPool,
    /// The server tick the pool currently shows.
    pub tick: Tick,
    pub arena: Vec2,
    /// Spawns stamped later than `tick`, held until the replica gets there.
    future: Vec<BulletSpawn>,
    /// Spawns refused for breaking the replica's limits (a hostile or broken server).
    pub refused: u64,
    /// Flares stamped later than `tick`, applied when the replica gets there.
    flares: Vec<(Tick, Vec2)>,
    /// A pool to fast-forward a bullet back to a flare's tick in.
    scratch: BulletPool,
    /// Flares worked out this tick (a hostile server cannot buy unbounded work with them).
    flares_now: u32,
}

/// Flares the replica works out in one tick at most; more are refused.
pub const MAX_FLARES_PER_TICK: u32 = 64;

impl Replica {
    pub fn new(arena: Vec2, tick: Tick) -> Self {
        Replica {
            pool: BulletPool::new(),
            tick,
            arena,
            future: Vec::new(),
            refused: 0,
            flares: Vec::new(),
            scratch: BulletPool::new(),
            flares_now: 0,
        }
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
            WireEvent::Flare { tick, pos, .. } => {
                if *tick > self.tick {
                    if *tick - self.tick <= MAX_AHEAD_TICKS && self.flares.len() < 64 {
                        self.flares.push((*tick, *pos));
                    } else {
                        self.refused += 1;
                    }
                } else {
                    self.flare(*tick, *pos);
                }
            }
            _ => {}
        }
    }

    /// Clears what a flare on `at` (at or before the replica's tick) cleared on the
    /// server: each enemy bullet spawned before it is put back where it stood on that tick
    /// by the code that moves it (its spawn record, fast-forwarded), and tested there.
    fn flare(&mut self, at: Tick, pos: Vec2) {
        self.flares_now += 1;
        if self.flares_now > MAX_FLARES_PER_TICK {
            self.refused += 1;
            return;
        }
        let mut gone = Vec::new();
        let back = self.tick - at;
        for i in 0..self.pool.len() {
            let o = self.pool.origin[i];
            if self.pool.team[i] != crate::sim::Team::Enemy || o.tick >= at {
                continue;
            }
            // Too far now to have been inside then: a bullet covers at most its speed now
            // (plus what it lost slowing down) each tick it has flown since.
            let speed = Vec2::new(self.pool.vx[i], self.pool.vy[i]).length();
            let reach = back as f32 * (speed + (-self.pool.accel[i]).max(0.0) * back as f32) + 1.0;
            if self.pool.pos(i).distance(pos) > crate::sim::config::FLARE_RADIUS + reach {
                continue;
            }
            let then = if at == self.tick {
                self.pool.pos(i)
            } else {
                if back > MAX_FAST_FORWARD {
                    continue;
                }
                self.scratch.reset();
                if !self.scratch.spawn_advanced(&o, 0, at - o.tick, self.arena) {
                    continue;
                }
                self.scratch.pos(0)
            };
            if self.pool.flared(i, then, pos, at) {
                gone.push(self.pool.uid[i]);
            }
        }
        for uid in gone {
            self.pool.despawn(uid);
        }
    }

    /// One tick of every bullet, then any held spawn that is now due.
    pub fn step(&mut self) {
        self.tick += 1;
        self.flares_now = 0;
        self.pool.step(self.arena);
        if !self.flares.is_empty() {
            let now = self.tick;
            let due: Vec<(Tick, Vec2)> = self.flares.iter().filter(|f| f.0 <= now).copied().collect();
            self.flares.retain(|f| f.0 > now);
            for (t, p) in due {
                self.flare(t, p);
            }
        }
        if !self.future.is_empty() {
            let due: Vec<BulletSpawn> = self.future.iter().filter(|s| s.tick <= self.tick).copied().collect();
            self.future.retain(|s| s.tick > self.tick);
            for s in due {
                self.spawn(&s);
            }
        }
    }
}
