//! Players: input frames, the input queue (`queue_input` is the single audit point), and
//! the per-player state the rules act on (HP, spawn grace, death, escape channel, linkdead).

use std::collections::VecDeque;

use super::config::*;
use super::math::Vec2;
use super::Tick;

pub type PlayerId = u32;

pub const BTN_FIRE: u8 = 1;
pub const BTN_INTERACT: u8 = 2;
pub const BTN_ESCAPE: u8 = 4;
/// Held: slower movement, a narrower and denser stream of shots, the hitbox shown.
pub const BTN_FOCUS: u8 = 8;
/// Pressed (held after a tick without it): fire a flare if one is held.
pub const BTN_FLARE: u8 = 16;
/// Every button bit that means something; others are ignored.
pub const BTN_MASK: u8 = BTN_FIRE | BTN_INTERACT | BTN_ESCAPE | BTN_FOCUS | BTN_FLARE;

/// What a player did in the current run (reset when they enter a dungeon).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunStats {
    pub damage: u32,
    pub kills: u32,
    pub grazes: u32,
    pub hits_taken: u32,
    pub downs: u32,
    pub revives: u32,
    pub flares_used: u32,
}

/// One tick of a player's intent. Nothing else a client says reaches the simulation.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct InputFrame {
    pub tick: Tick,
    /// Clamped to the unit disc when applied.
    pub mv: Vec2,
    /// Aim in degrees.
    pub aim: f32,
    pub buttons: u8,
}

impl InputFrame {
    pub fn held(&self, b: u8) -> bool {
        self.buttons & b != 0
    }
}

/// Why `queue_input` refused a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputDrop {
    /// Tick already consumed (`f.tick <= last_input_tick`).
    Replay,
    /// Already queued: the normal fate of the redundant copies each packet carries.
    Duplicate,
    /// Older than `INPUT_MAX_AGE`.
    Stale,
    /// Beyond `INPUT_MAX_LEAD` ahead of the server.
    Future,
    /// Accepted, but the queue was full and its oldest frame was dropped.
    Flood,
    /// No such player.
    UnknownPlayer,
}

#[derive(Clone, Debug)]
pub struct Player {
    pub id: PlayerId,
    pub name: String,
    pub pos: Vec2,
    pub aim: f32,
    pub hp: i32,
    pub fire_cooldown: u32,
    /// Ticks of arrival protection left.
    pub grace: u32,
    pub dead: bool,
    /// Ticks since death.
    pub dead_ticks: u32,
    /// Ticks escape has been held (dungeon only).
    pub escape: u32,
    /// The connection is gone: the body stays, treated as holding escape.
    pub linkdead: bool,
    /// Downed (`dead` too): ticks left before the player is out; 0 when not downed.
    pub downed: u32,
    /// Ticks a teammate has stood close to this downed player.
    pub revive: u32,
    /// Out of this run (`dead` too) until it ends: watching the others.
    pub out: bool,
    /// Focus held this tick.
    pub focus: bool,
    /// Flares held, and grazes toward the next one.
    pub flares: u8,
    pub graze_charge: u32,
    /// Whether the flare button was held last tick (a flare fires on the press).
    pub flare_held: bool,
    /// This player's bit in each bullet's graze mark (0..64, unique in its instance).
    pub slot: u8,
    /// The ship flown: an index into the content's ships by id (0: the first).
    pub ship: u16,
    pub stats: RunStats,
    pub queue: VecDeque<InputFrame>,
    pub held: InputFrame,
    /// Tick the held input was last refreshed by a real frame.
    pub held_at: Tick,
    pub last_input_tick: Option<Tick>,
    /// Ticks that had no fresh input frame once input had started (late or lost input).
    pub coasted: u32,
    /// Current and longest run of consecutive coasted ticks.
    pub coast_run: u32,
    pub max_coast_run: u32,
    /// How far behind its bullets this player's game draws enemies and the boss, in
    /// quarter ticks (`VIEW_STEPS_PER_TICK`; reported in its input, clamped to
    /// `LAG_COMP_MAX_TICKS`): its shots are tested against where they were then.
    pub view_delay: u32,
}

impl Player {
    pub fn new(id: PlayerId, name: &str, pos: Vec2) -> Self {
        Player {
            id,
            name: name.to_string(),
            pos,
            aim: -90.0,
            hp: PLAYER_MAX_HP,
            fire_cooldown: 0,
            grace: SPAWN_GRACE_TICKS,
            dead: false,
            dead_ticks: 0,
            escape: 0,
            linkdead: false,
            downed: 0,
            revive: 0,
            out: false,
            focus: false,
            flares: START_FLARES,
            graze_charge: 0,
            flare_held: false,
            slot: 0,
            ship: 0,
            stats: RunStats::default(),
            queue: VecDeque::new(),
            held: InputFrame::default(),
            held_at: 0,
            last_input_tick: None,
            coasted: 0,
            coast_run: 0,
            max_coast_run: 0,
            view_delay: 0,
        }
    }

    /// Arrival anywhere: full reset of combat state and fresh spawn grace.
    pub fn arrive(&mut self, pos: Vec2) {
        self.pos = pos;
        self.hp = PLAYER_MAX_HP;
        self.grace = SPAWN_GRACE_TICKS;
        self.dead = false;
        self.dead_ticks = 0;
        self.escape = 0;
        self.fire_cooldown = 0;
        self.downed = 0;
        self.revive = 0;
        self.out = false;
    }

    /// A new run: flares and the run's counts start over.
    pub fn start_run(&mut self) {
        self.flares = START_FLARES;
        self.graze_charge = 0;
        self.stats = RunStats::default();
    }

    /// Scores a graze: charges flares.
    pub fn graze(&mut self) {
        self.stats.grazes += 1;
        self.graze_charge += 1;
        if self.graze_charge >= GRAZES_PER_FLARE {
            self.graze_charge = 0;
            self.add_flare();
        }
    }

    pub fn add_flare(&mut self) {
        self.flares = (self.flares + 1).min(MAX_FLARES);
    }

    /// The single audit point for client input.
    pub fn queue_input(&mut self, now: Tick, f: InputFrame) -> Result<(), InputDrop> {
        if let Some(last) = self.last_input_tick {
            if f.tick <= last {
                return Err(InputDrop::Replay);
            }
        }
        if f.tick.saturating_add(INPUT_MAX_AGE) < now {
            return Err(InputDrop::Stale);
        }
        if f.tick > now.saturating_add(INPUT_MAX_LEAD) {
            return Err(InputDrop::Future);
        }
        let at = self.queue.partition_point(|q| q.tick < f.tick);
        if self.queue.get(at).is_some_and(|q| q.tick == f.tick) {
            return Err(InputDrop::Duplicate);
        }
        self.queue.insert(at, f);
        if self.queue.len() > INPUT_QUEUE_CAP {
            self.queue.pop_front();
            return Err(InputDrop::Flood);
        }
        Ok(())
    }

    /// The input that applies at tick `now`: the newest queued frame not in the future,
    /// else the held one (coasting) for up to `INPUT_MAX_AGE` ticks, then nothing.
    pub fn take_input(&mut self, now: Tick) -> InputFrame {
        let mut got = None;
        while self.queue.front().is_some_and(|f| f.tick <= now) {
            got = self.queue.pop_front();
        }
        if let Some(f) = got {
            self.held = f;
            self.held_at = now;
            self.last_input_tick = Some(f.tick);
            self.coast_run = 0;
        } else if self.last_input_tick.is_some() && !self.linkdead {
            self.coasted = self.coasted.saturating_add(1);
            self.coast_run += 1;
            self.max_coast_run = self.max_coast_run.max(self.coast_run);
        }
        if got.is_none() && now.saturating_sub(self.held_at) > INPUT_MAX_AGE {
            self.held = InputFrame { tick: now, mv: Vec2::ZERO, aim: self.held.aim, buttons: 0 };
        }
        let mut f = self.held;
        f.buttons &= BTN_MASK;
        if self.linkdead {
            f = InputFrame { tick: now, mv: Vec2::ZERO, aim: self.aim, buttons: BTN_ESCAPE };
        }
        f
    }

    pub fn alive(&self) -> bool {
        !self.dead
    }

    /// Can bullets hurt this player right now?
    pub fn vulnerable(&self) -> bool {
        !self.dead && self.grace == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(tick: Tick) -> InputFrame {
        InputFrame { tick, mv: Vec2::new(1.0, 0.0), aim: 0.0, buttons: 0 }
    }

    #[test]
    fn validation_table() {
        let mut p = Player::new(1, "a", Vec2::ZERO);
        let now = 100;
        assert_eq!(p.queue_input(now, f(now - INPUT_MAX_AGE - 1)), Err(InputDrop::Stale));
        assert_eq!(p.queue_input(now, f(now + INPUT_MAX_LEAD + 1)), Err(InputDrop::Future));
        assert_eq!(p.queue_input(now, f(now + INPUT_MAX_LEAD)), Ok(()));
        assert_eq!(p.queue_input(now, f(now)), Ok(()));
        assert_eq!(p.queue_input(now, f(now)), Err(InputDrop::Duplicate));
        p.take_input(now);
        assert_eq!(p.last_input_tick, Some(now));
        assert_eq!(p.queue_input(now + 1, f(now)), Err(InputDrop::Replay));
        assert_eq!(p.queue_input(now + 1, f(now - 5)), Err(InputDrop::Replay));
    }

    #[test]
    fn flood_is_capped_oldest_dropped() {
        let mut p = Player::new(1, "a", Vec2::ZERO);
        let now = 1000;
        let mut floods = 0;
        for t in (now - INPUT_MAX_AGE)..=(now + INPUT_MAX_LEAD) {
            if p.queue_input(now, f(t)) == Err(InputDrop::Flood) {
                floods += 1;
            }
        }
        assert!(p.queue.len() <= INPUT_QUEUE_CAP);
        let window = (INPUT_MAX_AGE + INPUT_MAX_LEAD + 1) as usize;
        assert_eq!(floods, window - INPUT_QUEUE_CAP, "filling the whole legal window is a flood");
        assert_eq!(p.queue.front().unwrap().tick, now + INPUT_MAX_LEAD + 1 - INPUT_QUEUE_CAP as u32, "oldest dropped");
        p.queue.clear();
        // What an honest client queues (its lead plus redundant copies) is never a flood.
        for t in now + 1..=now + 20 {
            for k in 0..3 {
                assert_ne!(p.queue_input(now, f(t.saturating_sub(k))), Err(InputDrop::Flood));
            }
        }
    }

    #[test]
    fn coasts_then_stops() {
        let mut p = Player::new(1, "a", Vec2::ZERO);
        p.queue_input(10, f(10)).unwrap();
        assert_eq!(p.take_input(10).mv.x, 1.0);
        assert_eq!(p.take_input(10 + INPUT_MAX_AGE).mv.x, 1.0, "coasting");
        assert_eq!(p.take_input(11 + INPUT_MAX_AGE).mv.x, 0.0, "then stops");
    }
}
