//! `BulletPool`: structure-of-arrays bullet storage and its integration step.
//!
//! The client's replica runs this very code. A bullet's state is a pure function of its
//! spawn parameters and the number of ticks stepped, so a bullet that arrives late can be
//! fast-forwarded ([`BulletPool::spawn_advanced`]) and match the server's copy.
//!
//! Removal is a swap-remove of the dead slots, largest first (deterministic: the same
//! deaths in the same tick leave the same order on every machine), so removing costs what
//! died, not what lives. The pool is therefore not in uid order; a despawn by uid goes
//! through a uid -> slot index that is built on the first lookup and kept from then on
//! (the client's replica looks bullets up by uid; the server never does, and never pays
//! for the index). A bullet's state depends only on its own spawn and ticks, never on its
//! slot, so replicas match the server bullet for bullet whatever their order.

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

/// The grid every spawn parameter is snapped to before a bullet exists. The wire encodes
/// exactly these steps, so the server's bullet and the replica's are built from identical
/// numbers: parity through the wire is as exact as parity in process.
pub mod grid {
    /// Position step: 1/4 px, as i16 (±8191 px).
    pub const POS: f32 = 4.0;
    /// Angle step: 360/65536 degrees, as u16.
    pub const ANGLE: f32 = 65536.0 / 360.0;
    /// Speed and max speed step: 1/256 px/tick, as u16 (max speed `u16::MAX` = uncapped).
    pub const SPEED: f32 = 256.0;
    /// Acceleration step: 1/4096 px/tick², as i16.
    pub const ACCEL: f32 = 4096.0;
    /// Turn step: 1/256 degree/tick, as i16.
    pub const TURN: f32 = 256.0;
    /// Radius step: 1/4 px, as u8.
    pub const RADIUS: f32 = 4.0;

    pub fn pos_q(v: f32) -> i16 {
        (v * POS).round().clamp(i16::MIN as f32, i16::MAX as f32) as i16
    }
    pub fn angle_q(deg: f32) -> u16 {
        let d = if deg.is_finite() { deg.rem_euclid(360.0) } else { 0.0 };
        ((d * ANGLE).round() as u32 % 65536) as u16
    }
    pub fn speed_q(v: f32) -> u16 {
        (v * SPEED).round().clamp(0.0, (u16::MAX - 1) as f32) as u16
    }
    pub fn max_speed_q(v: f32) -> u16 {
        if v.is_finite() {
            speed_q(v)
        } else {
            u16::MAX
        }
    }
    pub fn accel_q(v: f32) -> i16 {
        (v * ACCEL).round().clamp(i16::MIN as f32, i16::MAX as f32) as i16
    }
    pub fn turn_q(v: f32) -> i16 {
        (v * TURN).round().clamp(i16::MIN as f32, i16::MAX as f32) as i16
    }
    pub fn radius_q(v: f32) -> u8 {
        (v * RADIUS).round().clamp(1.0, 255.0) as u8
    }
    pub fn max_speed_f(q: u16) -> f32 {
        if q == u16::MAX {
            f32::INFINITY
        } else {
            q as f32 / SPEED
        }
    }
}

/// Everything needed to create a bullet, identical on the server and in the replica.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BulletSpawn {
    pub uid: u32,
    pub pos: Vec2,
    /// Direction of travel, degrees.
    pub angle: f32,
    /// Pixels per tick.
    pub speed: f32,
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

impl BulletSpawn {
    /// Snaps every parameter to the wire grid (see [`grid`]). The server spawns only
    /// snapped bullets, so what a client decodes is bit-for-bit what the server simulates.
    pub fn quantized(mut self) -> Self {
        use grid::*;
        let f = |v: f32| if v.is_finite() { v } else { 0.0 };
        self.pos = Vec2::new(pos_q(f(self.pos.x)) as f32 / POS, pos_q(f(self.pos.y)) as f32 / POS);
        self.angle = angle_q(self.angle) as f32 / ANGLE;
        self.speed = speed_q(f(self.speed)) as f32 / SPEED;
        self.accel = accel_q(f(self.accel)) as f32 / ACCEL;
        self.turn = turn_q(f(self.turn)) as f32 / TURN;
        self.max_speed = max_speed_f(max_speed_q(if self.max_speed.is_nan() { f32::INFINITY } else { self.max_speed }));
        self.radius = radius_q(f(self.radius)) as f32 / RADIUS;
        self
    }

    /// Initial velocity, px/tick.
    pub fn velocity(&self) -> Vec2 {
        Vec2::from_angle_deg(self.angle) * self.speed
    }
}

/// Several bullets of one shape fired in one tick from one origin: a `ring`, a `fan`, a
/// volley. It travels as one event, and both sides expand it with [`Burst::spawn`] into the
/// same bullets, bit for bit: every direction is an integer step on the angle grid, so no
/// rounding can differ between the server's expansion and a client's.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Burst {
    /// What every bullet shares: `uid` is the first bullet's (the rest follow it), `pos`
    /// the origin; `angle` is ignored (see `angle0`). Already on the grid.
    pub shape: BulletSpawn,
    /// Bullets in the burst, 1..=`Burst::MAX_COUNT`.
    pub count: u16,
    /// First direction, in angle grid steps (1/65536 of a turn).
    pub angle0: u16,
    /// Bullet `i` points `floor(i * span / div)` grid steps after `angle0`: a ring of n has
    /// span 65536 and div n; a fan has span = its spread and div n - 1.
    pub span: u32,
    pub div: u16,
    /// Distance from the origin along each bullet's own direction, on the position grid.
    pub offset: f32,
}

impl Burst {
    /// Most bullets one burst may hold (the Lua API's `n` limit is lower).
    pub const MAX_COUNT: u16 = 1024;

    /// Builds a burst from raw parameters, snapping everything to the grid (what the server
    /// does before any bullet exists).
    pub fn new(shape: BulletSpawn, count: u16, angle0_deg: f32, span: u32, div: u16, offset: f32) -> Burst {
        let offset = if offset.is_finite() { grid::pos_q(offset) as f32 / grid::POS } else { 0.0 };
        Burst {
            shape: BulletSpawn { angle: 0.0, ..shape }.quantized(),
            count: count.clamp(1, Self::MAX_COUNT),
            angle0: grid::angle_q(angle0_deg),
            span: span.min(65536),
            div: div.max(1),
            offset,
        }
    }

    /// Bullet `i` of the burst (the same on every machine).
    pub fn spawn(&self, i: u16) -> BulletSpawn {
        let step = (i as u64 * self.span as u64) / self.div.max(1) as u64;
        let a = ((self.angle0 as u64 + step) % 65536) as f32 / grid::ANGLE;
        let pos =
            if self.offset == 0.0 { self.shape.pos } else { self.shape.pos + Vec2::from_angle_deg(a) * self.offset };
        BulletSpawn { uid: self.shape.uid.wrapping_add(i as u32), pos, angle: a, ..self.shape }.quantized()
    }

    /// Every bullet of the burst, in uid order.
    pub fn spawns(&self) -> impl Iterator<Item = BulletSpawn> + '_ {
        (0..self.count).map(|i| self.spawn(i))
    }

    /// The last bullet's uid.
    pub fn last_uid(&self) -> u32 {
        self.shape.uid.wrapping_add(self.count.max(1) as u32 - 1)
    }
}

/// `v` clamped to `0..=cap`, as `f32::clamp` does it (NaN stays NaN) but without its
/// check that the bounds are ordered, which is a branch that keeps the step loop from
/// being vectorised. Both step paths use it, so they stay bit for bit the same.
#[inline(always)]
fn clamp_speed(v: f32, cap: f32) -> f32 {
    let v = if v < 0.0 { 0.0 } else { v };
    if v > cap {
        cap
    } else {
        v
    }
}

/// The arrays one tick of movement reads and writes, all of one length.
struct Lanes<'a> {
    x: &'a mut [f32],
    y: &'a mut [f32],
    vx: &'a mut [f32],
    vy: &'a mut [f32],
    turn_cos: &'a [f32],
    turn_sin: &'a [f32],
    accel: &'a [f32],
    max_speed: &'a [f32],
    radius: &'a [f32],
    life: &'a mut [u16],
}

/// One tick of every bullet in `l`, without branches; returns how many died.
#[inline(always)]
fn step_lanes(l: Lanes, bounds: Vec2) -> u32 {
    let n = l.x.len();
    let (x, y, vxs, vys) = (l.x, &mut l.y[..n], &mut l.vx[..n], &mut l.vy[..n]);
    let (tcs, tss, acc, cap) = (&l.turn_cos[..n], &l.turn_sin[..n], &l.accel[..n], &l.max_speed[..n]);
    let (rad, life) = (&l.radius[..n], &mut l.life[..n]);
    let margin = super::config::ARENA_MARGIN;
    let mut died = 0u32;
    for i in 0..n {
        let (mut vx, mut vy) = (vxs[i], vys[i]);
        let (c, s) = (tcs[i], tss[i]);
        let turning = s != 0.0;
        let (rx, ry) = (vx * c - vy * s, vx * s + vy * c);
        vx = if turning { rx } else { vx };
        vy = if turning { ry } else { vy };
        let a = acc[i];
        let sp = (vx * vx + vy * vy).sqrt();
        let k = clamp_speed(sp + a, cap[i]) / sp;
        let scale = (a != 0.0) & (sp > 0.0);
        vx = if scale { vx * k } else { vx };
        vy = if scale { vy * k } else { vy };
        vxs[i] = vx;
        vys[i] = vy;
        let (nx, ny) = (x[i] + vx, y[i] + vy);
        x[i] = nx;
        y[i] = ny;
        let l = life[i].saturating_sub(1);
        let m = margin + rad[i];
        let alive = (l > 0) & (nx > -m) & (ny > -m) & (nx < bounds.x + m) & (ny < bounds.y + m);
        life[i] = if alive { l } else { 0 };
        died += !alive as u32;
    }
    died
}

/// Whether the step may use the CPU's vector instructions (the benchmark turns them off to
/// measure the scalar path that CPUs without AVX2 take; the results are the same bits).
static SIMD: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

/// See [`SIMD`].
pub fn set_simd(enabled: bool) {
    SIMD.store(enabled, std::sync::atomic::Ordering::Relaxed);
}

/// [`step_lanes`] compiled for AVX2 (8 bullets per instruction).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn step_avx2(l: Lanes, bounds: Vec2) -> u32 {
    step_lanes(l, bounds)
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
    /// The spawn record each bullet came from (sent to a player who arrives later, who
    /// fast-forwards it to now and gets the very same bullet).
    pub origin: Vec<BulletSpawn>,
    /// Players who have grazed this bullet (bit `Player::slot`; server only).
    pub grazed: Vec<u64>,
    dirty: bool,
    /// uid -> slot, once [`find`](Self::find) has been used.
    index: Option<std::collections::HashMap<u32, u32>>,
    /// A removal moved a bullet, or an older uid came after a newer one: the slots are
    /// no longer in uid order.
    shuffled: bool,
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

    /// Empties the pool, keeping its memory for reuse.
    pub fn reset(&mut self) {
        for v in [&mut self.x, &mut self.y, &mut self.vx, &mut self.vy, &mut self.radius, &mut self.accel] {
            v.clear();
        }
        for v in [&mut self.max_speed, &mut self.turn_cos, &mut self.turn_sin] {
            v.clear();
        }
        self.uid.clear();
        self.life.clear();
        self.kind.clear();
        self.team.clear();
        self.damage.clear();
        self.spawn_tick.clear();
        self.origin.clear();
        self.grazed.clear();
        self.dirty = false;
        self.index = None;
        self.shuffled = false;
    }

    /// Appends a bullet. Returns its slot.
    pub fn spawn(&mut self, s: &BulletSpawn, damage: i32) -> usize {
        let (ts, tc) = super::math::portable::sin_cos(s.turn.to_radians());
        let at = self.uid.len();
        self.shuffled |= self.uid.last().is_some_and(|&last| s.uid < last);
        let vel = s.velocity();
        self.uid.push(s.uid);
        self.x.push(s.pos.x);
        self.y.push(s.pos.y);
        self.vx.push(vel.x);
        self.vy.push(vel.y);
        self.radius.push(s.radius);
        self.life.push(s.lifetime.max(1));
        self.kind.push(s.kind);
        self.team.push(s.team);
        self.accel.push(s.accel);
        self.max_speed.push(s.max_speed);
        self.turn_cos.push(if s.turn == 0.0 { 1.0 } else { tc });
        self.turn_sin.push(if s.turn == 0.0 { 0.0 } else { ts });
        self.damage.push(damage);
        self.spawn_tick.push(s.tick);
        self.origin.push(*s);
        self.grazed.push(0);
        if let Some(ix) = self.index.as_mut() {
            ix.insert(s.uid, at as u32);
        }
        at
    }

    /// Spawns a bullet and fast-forwards it by `ticks` steps (the ticks it spent in
    /// flight). Returns false when it would already have expired or left the arena.
    pub fn spawn_advanced(&mut self, s: &BulletSpawn, damage: i32, ticks: u32, bounds: Vec2) -> bool {
        let i = self.spawn(s, damage);
        for _ in 0..ticks {
            if !self.step_one(i, bounds) {
                self.remove_at(i);
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
                let ns = clamp_speed(sp + a, self.max_speed[i]);
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
    ///
    /// The same arithmetic as [`step_one`](Self::step_one), bit for bit, written without
    /// branches over the hot arrays only (selects instead of `if`); on x86-64 with AVX2 the
    /// compiler turns it into 8-wide vector code (IEEE single-precision add, multiply,
    /// divide and square root round the same in every lane, and nothing is fused, so the
    /// result is the same bits as the scalar path other machines take).
    pub fn step(&mut self, bounds: Vec2) {
        let lanes = self.lanes();
        #[cfg(target_arch = "x86_64")]
        let died = if SIMD.load(std::sync::atomic::Ordering::Relaxed) && std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU was just seen to support AVX2, all `step_avx2` requires.
            unsafe { step_avx2(lanes, bounds) }
        } else {
            step_lanes(lanes, bounds)
        };
        #[cfg(not(target_arch = "x86_64"))]
        let died = step_lanes(lanes, bounds);
        if died > 0 {
            self.dirty = true;
        }
        self.compact();
    }

    /// The movement arrays, for one tick of [`step_lanes`].
    fn lanes(&mut self) -> Lanes<'_> {
        let n = self.uid.len();
        Lanes {
            x: &mut self.x[..n],
            y: &mut self.y[..n],
            vx: &mut self.vx[..n],
            vy: &mut self.vy[..n],
            turn_cos: &self.turn_cos[..n],
            turn_sin: &self.turn_sin[..n],
            accel: &self.accel[..n],
            max_speed: &self.max_speed[..n],
            radius: &self.radius[..n],
            life: &mut self.life[..n],
        }
    }

    /// Marks a bullet dead; it is removed by the next [`compact`](Self::compact).
    pub fn kill(&mut self, i: usize) {
        self.life[i] = 0;
        self.dirty = true;
    }

    pub fn is_alive(&self, i: usize) -> bool {
        self.life[i] > 0
    }

    /// Whether the slots are in uid order (nothing was removed from the middle and uids
    /// came in order): drawing oldest first then needs no sort.
    pub fn in_uid_order(&self) -> bool {
        !self.shuffled
    }

    /// Slot of a bullet by uid (builds the index on first use, kept from then on).
    pub fn find(&mut self, uid: u32) -> Option<usize> {
        let uids = &self.uid;
        let ix = self.index.get_or_insert_with(|| uids.iter().enumerate().map(|(i, &u)| (u, i as u32)).collect());
        ix.get(&uid).map(|&i| i as usize)
    }

    /// Slot of a bullet by uid without an index (a scan; tests and rare lookups).
    pub fn position(&self, uid: u32) -> Option<usize> {
        self.uid.iter().position(|&u| u == uid)
    }

    /// Removes a bullet by uid (a despawn event). Returns whether it was there.
    /// One lookup and one swap-remove: a client applying the boss's bullet cancel (up to
    /// the cap's 120,000 despawns in a tick) pays for each, not for the pool each time.
    pub fn despawn(&mut self, uid: u32) -> bool {
        match self.find(uid) {
            Some(i) => {
                if self.dirty {
                    self.kill(i);
                    self.compact();
                } else {
                    self.remove_at(i);
                }
                true
            }
            None => false,
        }
    }

    /// Removes slot `i` now: the last bullet takes its place (the index follows).
    fn remove_at(&mut self, i: usize) {
        let last = self.uid.len() - 1;
        self.shuffled |= i != last;
        if let Some(ix) = self.index.as_mut() {
            ix.remove(&self.uid[i]);
            if i != last {
                ix.insert(self.uid[last], i as u32);
            }
        }
        self.uid.swap_remove(i);
        self.x.swap_remove(i);
        self.y.swap_remove(i);
        self.vx.swap_remove(i);
        self.vy.swap_remove(i);
        self.radius.swap_remove(i);
        self.life.swap_remove(i);
        self.kind.swap_remove(i);
        self.team.swap_remove(i);
        self.accel.swap_remove(i);
        self.max_speed.swap_remove(i);
        self.turn_cos.swap_remove(i);
        self.turn_sin.swap_remove(i);
        self.damage.swap_remove(i);
        self.spawn_tick.swap_remove(i);
        self.origin.swap_remove(i);
        self.grazed.swap_remove(i);
    }

    /// Removes dead bullets: each dead slot, largest first, takes the last bullet
    /// (a swap-remove in every array). Costs what died, plus one scan of the lifetimes.
    pub fn compact(&mut self) {
        if !self.dirty {
            return;
        }
        self.dirty = false;
        let mut d = self.uid.len();
        while d > 0 {
            d -= 1;
            if self.life[d] == 0 {
                self.remove_at(d);
            }
        }
    }

    pub fn pos(&self, i: usize) -> Vec2 {
        Vec2::new(self.x[i], self.y[i])
    }

    /// The slots of live enemy bullets a flare at `at` clears: those within `FLARE_RADIUS`
    /// of it, among bullets spawned before `tick` (a flare goes off before the tick's
    /// scripts fire). The server and the replica call this one test.
    pub fn flare_slots(&self, at: Vec2, tick: Tick) -> Vec<usize> {
        (0..self.len()).filter(|&i| self.flared(i, self.pos(i), at, tick)).collect()
    }

    /// Whether bullet `i`, standing at `pos` at the flare's tick, is cleared by it.
    pub fn flared(&self, i: usize, pos: Vec2, at: Vec2, tick: Tick) -> bool {
        let r = super::config::FLARE_RADIUS;
        let (dx, dy) = (pos.x - at.x, pos.y - at.y);
        self.team[i] == Team::Enemy && self.life[i] > 0 && self.spawn_tick[i] < tick && dx * dx + dy * dy <= r * r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spawn(uid: u32, accel: f32, turn: f32) -> BulletSpawn {
        BulletSpawn {
            uid,
            pos: Vec2::new(100.0, 100.0),
            angle: 14.0,
            speed: 2.06,
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
        far.angle = 0.0;
        far.speed = 100.0;
        p.spawn(&far, 0);
        p.step(bounds);
        p.step(bounds);
        assert_eq!(p.uid, vec![1], "the fast bullet left the arena");
        p.step(bounds);
        assert!(p.is_empty(), "lifetime 3 ends after 3 steps");
    }

    #[test]
    fn acceleration_respects_max_speed_and_despawn_finds_by_uid() {
        let bounds = Vec2::new(1e6, 1e6);
        let mut p = BulletPool::new();
        p.spawn(&spawn(5, 1.0, 0.0), 0);
        p.spawn(&spawn(3, 0.0, 0.0), 0);
        p.spawn(&spawn(9, 0.0, 0.0), 0);
        for _ in 0..20 {
            p.step(bounds);
        }
        let i = p.find(5).unwrap();
        let sp = (p.vx[i].powi(2) + p.vy[i].powi(2)).sqrt();
        assert!((sp - 6.0).abs() < 1e-4, "speed capped at max_speed, got {sp}");
        assert!(p.despawn(3));
        assert!(!p.despawn(3));
        let mut left = p.uid.clone();
        left.sort();
        assert_eq!(left, vec![5, 9]);
    }

    /// Random bullets of every motion: turning, accelerating, decelerating, capped,
    /// leaving the arena, expiring.
    fn random_pool(seed: u64, n: u32) -> BulletPool {
        let mut rng = crate::sim::rng::Rng::new(seed);
        let mut p = BulletPool::new();
        for uid in 0..n {
            let r = |rng: &mut crate::sim::rng::Rng, a: f64, b: f64| (a + rng.next_f64() * (b - a)) as f32;
            let mut s = spawn(uid, 0.0, 0.0);
            s.pos = Vec2::new(r(&mut rng, 0.0, 400.0), r(&mut rng, 0.0, 300.0));
            s.angle = r(&mut rng, 0.0, 360.0);
            s.speed = r(&mut rng, 0.0, 5.0);
            s.lifetime = r(&mut rng, 1.0, 200.0) as u16;
            s.accel = if uid % 3 == 0 { r(&mut rng, -0.2, 0.2) } else { 0.0 };
            s.turn = if uid % 2 == 0 { r(&mut rng, -3.0, 3.0) } else { 0.0 };
            s.max_speed = if uid % 5 == 0 { r(&mut rng, 1.0, 6.0) } else { f32::INFINITY };
            // Edge cases: at rest and accelerating, a speed cap of 0, slowing through zero.
            match uid % 50 {
                1 => (s.speed, s.accel) = (0.0, 0.1),
                2 => (s.max_speed, s.accel) = (0.0, 0.1),
                3 => (s.speed, s.accel) = (0.3, -0.25),
                _ => {}
            }
            p.spawn(&s, 0);
        }
        p
    }

    #[test]
    fn the_vector_step_equals_the_scalar_step_bit_for_bit() {
        // `step` takes the AVX2 path on CPUs that have it (this one, in CI), `step_one`
        // is plain scalar code: every bullet must come out with the same bits.
        let bounds = Vec2::new(400.0, 300.0);
        let mut fast = random_pool(11, 3000);
        let mut slow = fast.clone();
        for tick in 0..150 {
            fast.step(bounds);
            for i in 0..slow.len() {
                if !slow.step_one(i, bounds) {
                    slow.kill(i);
                }
            }
            slow.compact();
            assert_eq!(fast.uid, slow.uid, "tick {tick}: the same bullets died, the same slots moved");
            for i in 0..fast.len() {
                let bits = |p: &BulletPool| (p.x[i].to_bits(), p.y[i].to_bits(), p.vx[i].to_bits(), p.vy[i].to_bits());
                assert_eq!(bits(&fast), bits(&slow), "tick {tick}, uid {}", fast.uid[i]);
                assert_eq!(fast.life[i], slow.life[i]);
            }
        }
        assert!(fast.len() < 3000 && !fast.is_empty(), "some died, some live: {}", fast.len());
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_avx2_loop_equals_the_portable_loop_bit_for_bit() {
        if !std::arch::is_x86_feature_detected!("avx2") {
            eprintln!("no AVX2 on this CPU: nothing to compare");
            return;
        }
        let bounds = Vec2::new(400.0, 300.0);
        let mut a = random_pool(23, 2000);
        let mut b = a.clone();
        for _ in 0..120 {
            // SAFETY: AVX2 was detected above.
            let da = unsafe { step_avx2(a.lanes(), bounds) };
            let db = step_lanes(b.lanes(), bounds);
            assert_eq!(da, db);
            for i in 0..a.len() {
                assert_eq!(
                    (a.x[i].to_bits(), a.y[i].to_bits(), a.vx[i].to_bits(), a.vy[i].to_bits(), a.life[i]),
                    (b.x[i].to_bits(), b.y[i].to_bits(), b.vx[i].to_bits(), b.vy[i].to_bits(), b.life[i])
                );
            }
        }
    }

    #[test]
    fn the_uid_index_follows_every_removal_and_spawn() {
        let bounds = Vec2::new(400.0, 300.0);
        let mut p = random_pool(5, 500);
        assert_eq!(p.find(17), Some(17), "index built on first use");
        let mut rng = crate::sim::rng::Rng::new(9);
        let mut next = 500;
        for _ in 0..60 {
            for _ in 0..5 {
                let uid = (rng.next_f64() * next as f64) as u32;
                p.despawn(uid);
            }
            p.step(bounds);
            p.spawn(&spawn(next, 0.0, 1.0), 0);
            next += 1;
            for i in 0..p.len() {
                assert_eq!(p.find(p.uid[i]), Some(i), "uid {} at slot {i}", p.uid[i]);
            }
        }
        for uid in 0..next {
            assert_eq!(p.find(uid), p.position(uid), "uid {uid}");
        }
    }
}
