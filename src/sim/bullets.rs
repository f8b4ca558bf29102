//! `BulletPool`: structure-of-arrays bullet storage and its integration step.
//!
//! The client's replica runs this very code. A bullet's state is a pure function of its
//! spawn parameters and the number of ticks stepped, so a bullet that arrives late can be
//! fast-forwarded ([`BulletPool::spawn_advanced`]) and match the server's copy.
//!
//! Uids grow monotonically within an instance and removal is a stable compaction, so the
//! pool stays sorted by uid: a despawn by uid is a binary search, with no side index.

use super::math::Vec2;
use super::Tick;

/// Which side fired a bullet: enemy bullets hurt players, player bullets hurt enemies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Team {
    Enemy = 0,
    Player = 1,
}

impl Team {
    pub fn from_u8(v: u8) -> Option<Team> {
        match v {
            0 => Some(Team::Enemy),
            1 => Some(Team::Player),
            _ => None,
        }
    }
}

/// Everything needed to create a bullet, identical on the server and in the replica.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BulletSpawn {
    pub uid: u32,
    pub pos: Vec2,
    /// Pixels per tick.
    pub vel: Vec2,
    pub radius: f32,
    /// Ticks until it expires.
    pub lifetime: u16,
    pub kind: u16,
    pub team: Team,
    /// Change of speed per tick, along the velocity (px/tick²).
    pub accel: f32,
    /// Rotation of the velocity per tick, degrees (positive = clockwise on screen).
    pub turn: f32,
    /// Speed cap for accelerating bullets (px/tick); `f32::INFINITY` when uncapped.
    pub max_speed: f32,
    /// Server tick the bullet was generated at.
    pub tick: Tick,
}

/// Structure-of-arrays bullet storage.
#[derive(Clone, Debug, Default)]
pub struct BulletPool {
    pub uid: Vec<u32>,
    pub x: Vec<f32>,
    pub y: Vec<f32>,
    pub vx: Vec<f32>,
    pub vy: Vec<f32>,
    pub radius: Vec<f32>,
    /// Remaining ticks; 0 marks a bullet dead until the next compaction.
    pub life: Vec<u16>,
    pub kind: Vec<u16>,
    pub team: Vec<Team>,
    pub accel: Vec<f32>,
    pub max_speed: Vec<f32>,
    /// Turn stored as its cosine and sine, computed once at spawn.
    pub turn_cos: Vec<f32>,
    pub turn_sin: Vec<f32>,
    /// Damage dealt on a hit (server only; the replica stores 0).
    pub damage: Vec<i32>,
    pub spawn_tick: Vec<Tick>,
    dirty: bool,
}

impl BulletPool {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn len(&self) -> usize {
        self.uid.len()
    }

    pub fn is_empty(&self) -> bool {
        self.uid.is_empty()
    }

    pub fn clear(&mut self) {
        *self = Self::default();
    }

    /// Appends a bullet. Returns its slot.
    pub fn spawn(&mut self, s: &BulletSpawn, damage: i32) -> usize {
        let (ts, tc) = s.turn.to_radians().sin_cos();
        // Keep the pool sorted by uid; the normal case (increasing uids) is a push.
        let at = match self.uid.last() {
            Some(&last) if s.uid <= last => self.uid.partition_point(|&u| u < s.uid),
            _ => self.uid.len(),
        };
        self.uid.insert(at, s.uid);
        self.x.insert(at, s.pos.x);
        self.y.insert(at, s.pos.y);
        self.vx.insert(at, s.vel.x);
        self.vy.insert(at, s.vel.y);
        self.radius.insert(at, s.radius);
        self.life.insert(at, s.lifetime.max(1));
        self.kind.insert(at, s.kind);
        self.team.insert(at, s.team);
        self.accel.insert(at, s.accel);
        self.max_speed.insert(at, s.max_speed);
        self.turn_cos.insert(at, if s.turn == 0.0 { 1.0 } else { tc });
        self.turn_sin.insert(at, if s.turn == 0.0 { 0.0 } else { ts });
        self.damage.insert(at, damage);
        self.spawn_tick.insert(at, s.tick);
        at
    }

    /// Spawns a bullet and fast-forwards it by `ticks` steps (the ticks it spent in
    /// flight). Returns false when it would already have expired or left the arena.
    pub fn spawn_advanced(&mut self, s: &BulletSpawn, damage: i32, ticks: u32, bounds: Vec2) -> bool {
        let i = self.spawn(s, damage);
        for _ in 0..ticks {
            if !self.step_one(i, bounds) {
                self.kill(i);
                self.compact();
                return false;
            }
        }
        true
    }

    /// One tick of one bullet. Returns whether it is still alive.
    #[inline]
    fn step_one(&mut self, i: usize, bounds: Vec2) -> bool {
        let (mut vx, mut vy) = (self.vx[i], self.vy[i]);
        let (c, s) = (self.turn_cos[i], self.turn_sin[i]);
        if s != 0.0 {
            let nvx = vx * c - vy * s;
            vy = vx * s + vy * c;
            vx = nvx;
        }
        let a = self.accel[i];
        if a != 0.0 {
            let sp = (vx * vx + vy * vy).sqrt();
            if sp > 0.0 {
                let ns = (sp + a).clamp(0.0, self.max_speed[i]);
                let k = ns / sp;
                vx *= k;
                vy *= k;
            }
        }
        self.vx[i] = vx;
        self.vy[i] = vy;
        let x = self.x[i] + vx;
        let y = self.y[i] + vy;
        self.x[i] = x;
        self.y[i] = y;
        let life = self.life[i].saturating_sub(1);
        self.life[i] = life;
        let m = super::config::ARENA_MARGIN + self.radius[i];
        life > 0 && x > -m && y > -m && x < bounds.x + m && y < bounds.y + m
    }

    /// Integrates every bullet one tick and removes those that expired or left the arena.
    pub fn step(&mut self, bounds: Vec2) {
        for i in 0..self.uid.len() {
            if self.life[i] == 0 {
                continue;
            }
            if !self.step_one(i, bounds) {
                self.life[i] = 0;
                self.dirty = true;
            }
        }
        self.compact();
    }

    /// Marks a bullet dead; it is removed by the next [`compact`](Self::compact).
    pub fn kill(&mut self, i: usize) {
        self.life[i] = 0;
        self.dirty = true;
    }

    pub fn is_alive(&self, i: usize) -> bool {
        self.life[i] > 0
    }

    /// Slot of a bullet by uid.
    pub fn find(&self, uid: u32) -> Option<usize> {
        self.uid.binary_search(&uid).ok()
    }

    /// Removes a bullet by uid (a despawn event). Returns whether it was there.
    pub fn despawn(&mut self, uid: u32) -> bool {
        match self.find(uid) {
            Some(i) => {
                self.kill(i);
                self.compact();
                true
            }
            None => false,
        }
    }

    /// Stable removal of dead bullets (keeps uid order).
    pub fn compact(&mut self) {
        if !self.dirty {
            return;
        }
        self.dirty = false;
        let n = self.uid.len();
        let mut w = 0;
        for r in 0..n {
            if self.life[r] == 0 {
                continue;
            }
            if w != r {
                self.uid[w] = self.uid[r];
                self.x[w] = self.x[r];
                self.y[w] = self.y[r];
                self.vx[w] = self.vx[r];
                self.vy[w] = self.vy[r];
                self.radius[w] = self.radius[r];
                self.life[w] = self.life[r];
                self.kind[w] = self.kind[r];
                self.team[w] = self.team[r];
                self.accel[w] = self.accel[r];
                self.max_speed[w] = self.max_speed[r];
                self.turn_cos[w] = self.turn_cos[r];
                self.turn_sin[w] = self.turn_sin[r];
                self.damage[w] = self.damage[r];
                self.spawn_tick[w] = self.spawn_tick[r];
            }
            w += 1;
        }
        self.uid.truncate(w);
        self.x.truncate(w);
        self.y.truncate(w);
        self.vx.truncate(w);
        self.vy.truncate(w);
        self.radius.truncate(w);
        self.life.truncate(w);
        self.kind.truncate(w);
        self.team.truncate(w);
        self.accel.truncate(w);
        self.max_speed.truncate(w);
        self.turn_cos.truncate(w);
        self.turn_sin.truncate(w);
        self.damage.truncate(w);
        self.spawn_tick.truncate(w);
    }

    pub fn pos(&self, i: usize) -> Vec2 {
        Vec2::new(self.x[i], self.y[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spawn(uid: u32, accel: f32, turn: f32) -> BulletSpawn {
        BulletSpawn {
            uid,
            pos: Vec2::new(100.0, 100.0),
            vel: Vec2::new(2.0, 0.5),
            radius: 4.0,
            lifetime: 120,
            kind: 0,
            team: Team::Enemy,
            accel,
            turn,
            max_speed: 6.0,
            tick: 0,
        }
    }

    #[test]
    fn fast_forward_equals_stepping() {
        let bounds = Vec2::new(10_000.0, 10_000.0);
        for (a, t) in [(0.0, 0.0), (0.05, 0.0), (0.0, 1.5), (0.1, -2.0), (-0.05, 0.7)] {
            let mut stepped = BulletPool::new();
            stepped.spawn(&spawn(1, a, t), 0);
            for _ in 0..37 {
                stepped.step(bounds);
            }
            let mut ff = BulletPool::new();
            assert!(ff.spawn_advanced(&spawn(1, a, t), 0, 37, bounds));
            assert_eq!(stepped.x[0].to_bits(), ff.x[0].to_bits());
            assert_eq!(stepped.y[0].to_bits(), ff.y[0].to_bits());
            assert_eq!(stepped.vx[0].to_bits(), ff.vx[0].to_bits());
        }
    }

    #[test]
    fn lifetime_and_bounds_kill_without_events() {
        let bounds = Vec2::new(200.0, 200.0);
        let mut p = BulletPool::new();
        let mut s = spawn(1, 0.0, 0.0);
        s.lifetime = 3;
        p.spawn(&s, 0);
        let mut far = spawn(2, 0.0, 0.0);
        far.vel = Vec2::new(100.0, 0.0);
        p.spawn(&far, 0);
        p.step(bounds);
        p.step(bounds);
        assert_eq!(p.uid, vec![1], "the fast bullet left the arena");
        p.step(bounds);
        assert!(p.is_empty(), "lifetime 3 ends after 3 steps");
    }

    #[test]
    fn acceleration_respects_max_speed_and_pool_stays_sorted() {
        let bounds = Vec2::new(1e6, 1e6);
        let mut p = BulletPool::new();
        p.spawn(&spawn(5, 1.0, 0.0), 0);
        p.spawn(&spawn(3, 0.0, 0.0), 0);
        p.spawn(&spawn(9, 0.0, 0.0), 0);
        assert_eq!(p.uid, vec![3, 5, 9]);
        for _ in 0..20 {
            p.step(bounds);
        }
        let i = p.find(5).unwrap();
        let sp = (p.vx[i].powi(2) + p.vy[i].powi(2)).sqrt();
        assert!((sp - 6.0).abs() < 1e-4, "speed capped at max_speed, got {sp}");
        assert!(p.despawn(3));
        assert!(!p.despawn(3));
        assert_eq!(p.uid, vec![5, 9]);
    }
}
