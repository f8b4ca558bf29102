//! An instance: the hub or one dungeon run. It owns its players, enemies, boss, bullets and
//! script runtime, and steps them in a fixed order each tick:
//! bullets -> players -> enemies -> scripts -> hits -> waves/boss/clear.

use super::bullets::{BulletPool, BulletSpawn, Burst, Team};
use super::config::*;
use super::defs::{Behaviour, Defs};
use super::events::{RunOutcome, RunRow, RunSummary, SimEvent, Target, TransferReason};
use super::hits::{find_hits, find_hits_and_grazes, Circle, Grid};
use super::math::Vec2;
use super::movement::step_frame;
use super::player::{Player, PlayerId, RunStats, BTN_ESCAPE, BTN_FIRE, BTN_FLARE, BTN_FOCUS, BTN_INTERACT};
use super::rng::Rng;
use super::script::{BurstCmd, Owner, OwnerView, PlayerView, ScriptCmd, ScriptMessage, ScriptView, Scripting, ShotCmd};
use super::Tick;

pub type InstanceId = u32;

/// Speed of a player's bullets, px/tick.
pub const PLAYER_BULLET_SPEED: f32 = 10.0;
/// Lifetime of a player's bullets, ticks.
pub const PLAYER_BULLET_LIFETIME: u16 = 80;
/// The unfocused fan's span on the angle grid (its shots `FAN_SPREAD_DEG` apart).
pub fn fan_span() -> u32 {
    (FAN_SPREAD_DEG * (FAN_SHOTS - 1) as f32 * super::bullets::grid::ANGLE) as u32
}

/// After the boss dies, players stay this long to see it before returning to the hub.
pub const CLEAR_DELAY_TICKS: u32 = 2 * TICK_RATE;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InstanceKind {
    Hub,
    Dungeon(String),
}

/// A linear move ordered by a script.
#[derive(Clone, Copy, Debug)]
pub struct MoveTo {
    pub target: Vec2,
    pub ticks_left: u32,
}

#[derive(Clone, Debug)]
pub struct Enemy {
    pub id: u32,
    pub def: String,
    pub pos: Vec2,
    pub hp: i32,
    pub max_hp: i32,
    pub radius: f32,
    pub behaviour: Behaviour,
    pub speed: f32,
    pub range: f32,
    pub move_to: Option<MoveTo>,
    pub wander: Option<Vec2>,
    /// Player damage is multiplied by this (its definition's `damage_taken_mult`).
    pub damage_taken_mult: f32,
}

#[derive(Clone, Debug)]
pub struct Boss {
    pub def: String,
    pub pos: Vec2,
    pub hp: i32,
    pub max_hp: i32,
    pub radius: f32,
    pub phase: usize,
    pub move_to: Option<MoveTo>,
}

/// Where the boss (if any) and each enemy (by id) stood at one tick's hit test.
type Placed = (Tick, Option<Vec2>, Vec<(u32, Vec2)>);

/// What an instance asks its world to do with a player after a step.
#[derive(Clone, Debug, PartialEq)]
pub enum Request {
    ToHub(PlayerId, TransferReason),
    Enter(PlayerId, String),
}

pub struct Instance {
    pub id: InstanceId,
    pub kind: InstanceKind,
    pub arena: Vec2,
    pub spawn: Vec2,
    pub players: Vec<Player>,
    pub enemies: Vec<Enemy>,
    pub boss: Option<Boss>,
    pub bullets: BulletPool,
    /// Ticks since the instance opened.
    pub age: u32,
    pub cleared: bool,
    /// Shots refused because the instance was at `MAX_BULLETS_PER_INSTANCE`.
    pub bullets_refused: u64,
    /// Wall-clock cost of this instance's last step, in microseconds (for the server's
    /// status and its "falling behind" warning; never part of the simulation).
    pub step_us: u32,
    /// What the last step raised, before the world merges it (in instance order).
    pub(super) step_events: Vec<SimEvent>,
    pub(super) step_requests: Vec<Request>,
    next_uid: u32,
    next_enemy: u32,
    scripts: Box<dyn Scripting>,
    /// The scripts were handed this tick (`step_begin`), so `step_end` collects them.
    scripts_ran: bool,
    rng: Rng,
    next_wave: usize,
    wave_wait: u32,
    boss_spawned: bool,
    clear_timer: u32,
    player_kind: u16,
    player_damage: i32,
    player_radius: f32,
    max_bullet_radius: f32,
    // Scratch buffers reused every tick.
    grid: Grid,
    targets: Vec<Circle>,
    target_ids: Vec<Target>,
    hits: Vec<(usize, u16)>,
    cmds: Vec<ScriptCmd>,
    msgs: Vec<ScriptMessage>,
    pviews: Vec<PlayerView>,
    oviews: Vec<OwnerView>,
    grazes: Vec<(usize, u16)>,
    /// Who fired each live player bullet (uid -> player, tick), for the run's counts.
    shooters: std::collections::HashMap<u32, (PlayerId, Tick)>,
    /// Where the boss and each enemy were at the hit test of each of the last
    /// `LAG_COMP_MAX_TICKS` ticks (newest last): players' shots are tested against these.
    history: std::collections::VecDeque<Placed>,
    /// The tick being stepped (for the hit test's rewind).
    now: Tick,
    /// Scratch: rewound target circles.
    rewound: Vec<Circle>,
    /// The run (dungeons only): when it began, the party it was scaled for, who took part
    /// and left before its end, and whether it has ended.
    run: Run,
}

/// A dungeon run's book-keeping.
#[derive(Clone, Debug, Default)]
pub struct Run {
    pub started: Option<Tick>,
    /// Players in the instance when the first wave came (enemy and boss HP scale by it).
    pub party: u32,
    /// Rows of players who left before the end (their part still counts for the team).
    pub departed: Vec<RunRow>,
    pub ended: Option<RunOutcome>,
    /// Ticks until the players are sent to the hub after a failed run.
    pub fail_timer: u32,
    pub boss_killed: bool,
}

/// A player's score from their run counts (`clear`: the run was cleared).
pub fn player_score(st: &RunStats, flares_left: u8, clear: bool) -> u32 {
    let mut s = st.kills * SCORE_KILL + st.grazes * SCORE_GRAZE;
    if clear {
        s += flares_left as u32 * SCORE_FLARE_LEFT;
        if st.hits_taken == 0 {
            s += SCORE_NO_HIT;
        }
    }
    s
}

fn v2(a: [f32; 2]) -> Vec2 {
    Vec2::new(a[0], a[1])
}

impl Instance {
    pub fn new(id: InstanceId, kind: InstanceKind, defs: &Defs, scripts: Box<dyn Scripting>, seed: u64) -> Self {
        let (arena, spawn) = match &kind {
            InstanceKind::Hub => (v2(defs.hub.arena), v2(defs.hub.spawn)),
            InstanceKind::Dungeon(d) => {
                let d = &defs.dungeons[d];
                (v2(d.arena), v2(d.spawn))
            }
        };
        let player_kind = defs.bullet_kind(DEFAULT_PLAYER_BULLET).unwrap_or(0);
        let pk = defs.bullets.get(player_kind as usize);
        Instance {
            id,
            kind,
            arena,
            spawn,
            players: Vec::new(),
            enemies: Vec::new(),
            boss: None,
            bullets: BulletPool::new(),
            age: 0,
            cleared: false,
            bullets_refused: 0,
            step_us: 0,
            step_events: Vec::new(),
            step_requests: Vec::new(),
            next_uid: 1,
            next_enemy: 1,
            scripts,
            scripts_ran: false,
            rng: Rng::new(seed),
            next_wave: 0,
            wave_wait: 0,
            boss_spawned: false,
            clear_timer: 0,
            player_kind,
            player_damage: pk.map_or(10, |k| k.damage),
            player_radius: pk.map_or(4.0, |k| k.radius),
            max_bullet_radius: defs.bullets.iter().map(|b| b.radius).fold(4.0, f32::max),
            grid: Grid::default(),
            targets: Vec::new(),
            target_ids: Vec::new(),
            hits: Vec::new(),
            cmds: Vec::new(),
            msgs: Vec::new(),
            pviews: Vec::new(),
            oviews: Vec::new(),
            grazes: Vec::new(),
            shooters: std::collections::HashMap::new(),
            history: std::collections::VecDeque::new(),
            now: 0,
            rewound: Vec::new(),
            run: Run::default(),
        }
        .with_dummy(defs)
    }

    /// The hub's training dummy, when the content has one.
    fn with_dummy(mut self, defs: &Defs) -> Self {
        if let (InstanceKind::Hub, Some(d)) = (&self.kind, &defs.hub.dummy) {
            self.spawn_enemy(defs, &d.enemy, v2(d.at), &mut Vec::new());
        }
        self
    }

    pub fn run(&self) -> &Run {
        &self.run
    }

    /// Events raised outside a step (a player leaving mid-run), for the world to send.
    pub(super) fn step_events_mut(&mut self) -> &mut Vec<SimEvent> {
        &mut self.step_events
    }

    /// HP multiplier for the party that entered.
    fn party_scale(&self) -> f32 {
        1.0 + PARTY_HP_PER_PLAYER * self.run.party.saturating_sub(1) as f32
    }

    pub fn is_hub(&self) -> bool {
        self.kind == InstanceKind::Hub
    }

    pub fn dungeon(&self) -> Option<&str> {
        match &self.kind {
            InstanceKind::Dungeon(d) => Some(d),
            InstanceKind::Hub => None,
        }
    }

    /// Whether a disconnected body is still resolving here (the instance must stay open).
    pub fn has_linkdead(&self) -> bool {
        self.players.iter().any(|p| p.linkdead)
    }

    pub fn script_tasks(&self) -> usize {
        self.scripts.task_count()
    }

    /// Places an arriving player at the spawn point with fresh spawn grace. In a dungeon a
    /// newcomer starts their part of the run (a late joiner shares it from here).
    pub fn arrive(&mut self, mut p: Player) {
        let n = self.players.len() as f32;
        let offset = Vec2::new((n - 1.5) * 24.0, 0.0);
        p.arrive(self.spawn + offset);
        // The lowest graze bit nobody here has (a dungeon holds at most 64 players).
        p.slot = (0..64u8).find(|s| !self.players.iter().any(|q| q.slot == *s)).unwrap_or(63);
        if !self.is_hub() {
            p.start_run();
            self.run.started.get_or_insert(0);
        }
        self.players.push(p);
    }

    /// Takes a player out of the instance. One who leaves a dungeon run before its end
    /// (escape, or out and gone) is told the run was abandoned for them; their part
    /// stays in the team's summary.
    pub fn take_player(&mut self, id: PlayerId) -> Option<Player> {
        let i = self.players.iter().position(|p| p.id == id)?;
        let p = self.players.remove(i);
        if !self.is_hub() && self.run.ended.is_none() {
            let row = self.row(&p, false);
            self.run.departed.push(row.clone());
            self.step_events.push(SimEvent::RunEnded {
                instance: self.id,
                to: vec![p.id],
                summary: RunSummary {
                    dungeon: self.dungeon().unwrap_or_default().to_string(),
                    outcome: RunOutcome::Abandoned,
                    ticks: self.age,
                    team_score: row.score,
                    rows: vec![row],
                },
            });
        }
        Some(p)
    }

    fn row(&self, p: &Player, clear: bool) -> RunRow {
        RunRow {
            id: p.id,
            name: p.name.clone(),
            score: player_score(&p.stats, p.flares, clear),
            stats: p.stats,
            out: p.out,
        }
    }

    /// Ends the run: every participant still here gets the summary.
    fn end_run(&mut self, outcome: RunOutcome, events: &mut Vec<SimEvent>) {
        if self.run.ended.is_some() || self.is_hub() {
            return;
        }
        self.run.ended = Some(outcome);
        let clear = outcome == RunOutcome::Cleared;
        let mut rows: Vec<RunRow> = self.players.iter().map(|p| self.row(p, clear)).collect();
        rows.extend(self.run.departed.iter().cloned());
        let mut team: u32 = rows.iter().map(|r| r.score).sum();
        if clear {
            team += SCORE_BOSS;
            let secs = self.age / TICK_RATE;
            team += DEFAULT_PAR_SECONDS.saturating_sub(secs) * SCORE_PER_SECOND_UNDER_PAR;
        }
        events.push(SimEvent::RunEnded {
            instance: self.id,
            to: self.players.iter().map(|p| p.id).collect(),
            summary: RunSummary {
                dungeon: self.dungeon().unwrap_or_default().to_string(),
                outcome,
                ticks: self.age,
                team_score: team,
                rows,
            },
        });
    }

    /// Skips the waves and brings the boss in now (benchmarks, tests, the validator).
    /// No more waves in this instance (a preview of one owner).
    pub fn skip_waves(&mut self) {
        self.next_wave = usize::MAX;
    }

    pub fn start_boss(&mut self, defs: &Defs, tick: Tick, events: &mut Vec<SimEvent>) {
        if !self.boss_spawned {
            self.next_wave = usize::MAX;
            self.spawn_boss(defs, tick, events);
        }
    }

    pub fn step(&mut self, tick: Tick, defs: &Defs, events: &mut Vec<SimEvent>, requests: &mut Vec<Request>) {
        self.step_begin(tick, defs, events, requests);
        self.step_end(tick, defs, events, requests);
    }

    /// The first half of a step: everything up to the scripts, which are handed the tick
    /// (a worker process computes its answer while the world goes on; see
    /// [`Scripting::run_begin`]).
    pub fn step_begin(&mut self, tick: Tick, defs: &Defs, events: &mut Vec<SimEvent>, requests: &mut Vec<Request>) {
        self.age += 1;
        self.now = tick;
        self.bullets.step(self.arena);
        self.step_players(tick, defs, events, requests);
        self.step_enemies();
        self.scripts_begin(tick);
    }

    /// The second half: the scripts' commands, hits and the run's progress.
    pub fn step_end(&mut self, tick: Tick, defs: &Defs, events: &mut Vec<SimEvent>, requests: &mut Vec<Request>) {
        self.scripts_end(tick, defs, events);
        if let Some(lost) = self.scripts.take_lost() {
            self.stop_run(lost, events, requests);
        }
        if self.run.ended == Some(RunOutcome::Stopped) {
            return;
        }
        self.resolve_hits(defs, events);
        self.progress(tick, defs, events, requests);
    }

    /// Ends the fight at once: its scripts cannot go on. Everyone goes back to the hub.
    fn stop_run(&mut self, lost: super::script::Lost, events: &mut Vec<SimEvent>, requests: &mut Vec<Request>) {
        if self.is_hub() || self.run.ended == Some(RunOutcome::Stopped) {
            return;
        }
        events.push(SimEvent::InstanceStopped {
            instance: self.id,
            dungeon: self.dungeon().unwrap_or_default().to_string(),
            reason: lost.detail,
            summary: lost.summary,
            players: self.players.iter().map(|p| p.id).collect(),
        });
        // A run already over (cleared, failed) keeps its outcome; its players leave now.
        self.end_run(RunOutcome::Stopped, events);
        self.run.ended = Some(RunOutcome::Stopped);
        for p in &self.players {
            requests.push(Request::ToHub(p.id, TransferReason::Stopped));
        }
    }

    fn step_players(&mut self, tick: Tick, defs: &Defs, events: &mut Vec<SimEvent>, requests: &mut Vec<Request>) {
        let hub = self.is_hub();
        let portals = if hub { defs.portals() } else { Vec::new() };
        let mut flares: Vec<(PlayerId, Vec2)> = Vec::new();
        for i in 0..self.players.len() {
            let inp = self.players[i].take_input(tick);
            let p = &mut self.players[i];
            p.focus = inp.held(BTN_FOCUS);
            let flare_pressed = inp.held(BTN_FLARE) && !p.flare_held;
            p.flare_held = inp.held(BTN_FLARE);
            if p.dead {
                p.dead_ticks = p.dead_ticks.saturating_add(1);
                if p.downed > 0 {
                    p.downed -= 1;
                    if p.downed == 0 {
                        p.out = true;
                        p.revive = 0;
                        events.push(SimEvent::PlayerOut { instance: self.id, player: p.id });
                    }
                }
                // Out of the run (never while downed: a teammate may still come), a player
                // may leave for the hub once the lockout has passed, whatever the client sends.
                if p.downed == 0 && inp.held(BTN_ESCAPE) && p.dead_ticks >= RESPAWN_LOCKOUT_TICKS {
                    requests.push(Request::ToHub(p.id, TransferReason::LeftAfterDeath));
                }
                continue;
            }
            p.grace = p.grace.saturating_sub(1);
            p.pos = step_frame(p.pos, &inp, self.arena);
            if inp.aim.is_finite() {
                p.aim = inp.aim.rem_euclid(360.0);
            }
            if hub {
                if p.linkdead {
                    // Nothing can hurt anyone in the hub: a dropped player leaves at once.
                    requests.push(Request::ToHub(p.id, TransferReason::Escaped));
                    continue;
                }
                if inp.held(BTN_INTERACT) {
                    let r = defs.hub.portal_radius + PLAYER_HITBOX_RADIUS;
                    if let Some((d, _)) = portals.iter().find(|(_, at)| v2(*at).distance(p.pos) <= r) {
                        requests.push(Request::Enter(p.id, d.clone()));
                        continue;
                    }
                }
            } else if inp.held(BTN_ESCAPE) {
                // Damage does not interrupt the channel; death (above) ends it.
                p.escape += 1;
                if p.escape >= ESCAPE_CHANNEL_TICKS {
                    requests.push(Request::ToHub(p.id, TransferReason::Escaped));
                }
            } else {
                p.escape = 0;
            }
            if flare_pressed && !hub && p.flares > 0 && self.run.ended.is_none() {
                p.flares -= 1;
                p.stats.flares_used += 1;
                flares.push((p.id, p.pos));
            }
            p.fire_cooldown = p.fire_cooldown.saturating_sub(1);
            if inp.held(BTN_FIRE) && p.grace == 0 && p.fire_cooldown == 0 {
                let focus = p.focus;
                // The ship's pattern (content), else the built-in one.
                let ship = defs.ships.values().nth(p.ship as usize);
                let (shots, spread, cooldown) = match (ship, focus) {
                    (Some(s), false) => (s.shots, s.spread, s.cooldown),
                    (Some(s), true) => (s.focus_shots, s.focus_spread, s.focus_cooldown),
                    (None, false) => (FAN_SHOTS, FAN_SPREAD_DEG, PLAYER_FIRE_COOLDOWN_TICKS),
                    (None, true) => (1, 0.0, FOCUS_FIRE_COOLDOWN_TICKS),
                };
                p.fire_cooldown = cooldown.max(1);
                let dir = Vec2::from_angle_deg(p.aim);
                let shot = ShotCmd {
                    pos: p.pos + dir * PLAYER_MUZZLE_OFFSET,
                    angle: p.aim,
                    speed: PLAYER_BULLET_SPEED,
                    radius: self.player_radius,
                    lifetime: PLAYER_BULLET_LIFETIME,
                    kind: self.player_kind,
                    accel: 0.0,
                    turn: 0.0,
                    max_speed: f32::INFINITY,
                    damage: ship.and_then(|s| s.damage).unwrap_or(self.player_damage),
                };
                let first = self.next_uid;
                let shooter = self.players[i].id;
                if shots <= 1 || hub {
                    self.spawn_bullet(tick, &shot, Team::Player, events);
                } else {
                    // A fan, one event.
                    let deg = spread * (shots - 1) as f32;
                    let fan = BurstCmd {
                        shot: ShotCmd { angle: shot.angle - deg / 2.0, ..shot },
                        count: shots,
                        span: (deg * super::bullets::grid::ANGLE) as u32,
                        div: shots - 1,
                        offset: 0.0,
                    };
                    self.spawn_burst_of(tick, &fan, Team::Player, events);
                }
                // Who fired (damage credit; in the hub, only where they saw the dummy).
                for uid in first..self.next_uid {
                    self.shooters.insert(uid, (shooter, tick));
                }
            }
        }
        if self.shooters.len() > 4096 {
            let oldest = tick.saturating_sub(PLAYER_BULLET_LIFETIME as Tick + 1);
            self.shooters.retain(|_, (_, t)| *t >= oldest);
        }
        for (id, at) in flares {
            self.flare(tick, defs, id, at, events);
        }
        if !hub {
            self.revive_downed(events);
        }
    }

    /// A flare: enemy bullets within its radius gone (the replica clears the same ones
    /// from the one event), and damage to enemies and the boss within it.
    fn flare(&mut self, tick: Tick, defs: &Defs, player: PlayerId, at: Vec2, events: &mut Vec<SimEvent>) {
        for i in self.bullets.flare_slots(at, tick) {
            self.bullets.kill(i);
        }
        self.bullets.compact();
        events.push(SimEvent::Flare { instance: self.id, player, pos: at, tick });
        let r = FLARE_RADIUS;
        let mut dealt = 0;
        let mut kills = 0;
        for e in self.enemies.iter_mut() {
            if e.hp > 0 && e.pos.distance(at) <= r + e.radius {
                let amount = FLARE_DAMAGE.min(e.hp);
                e.hp -= FLARE_DAMAGE;
                dealt += amount;
                if e.hp <= 0 {
                    e.hp = 0;
                    kills += 1;
                    self.scripts.stop(Owner::Enemy(e.id), None);
                    events.push(SimEvent::Death { instance: self.id, target: Target::Enemy(e.id) });
                }
            }
        }
        self.enemies.retain(|e| e.hp > 0);
        let (mut boss_dead, mut boss_hit) = (false, false);
        if let Some(b) = &mut self.boss {
            if b.hp > 0 && b.pos.distance(at) <= r + b.radius {
                // As a bullet would: the phase's damage multiplier applies (0: invulnerable).
                let mult =
                    defs.bosses.get(&b.def).and_then(|d| d.phases.get(b.phase)).map_or(1.0, |p| p.damage_taken_mult);
                let hurt = ((FLARE_DAMAGE as f32) * mult).round() as i32;
                dealt += hurt.min(b.hp).max(0);
                b.hp -= hurt.max(0);
                boss_hit = hurt > 0;
                if b.hp <= 0 {
                    b.hp = 0;
                    boss_dead = true;
                }
            }
        }
        if let Some(p) = self.players.iter_mut().find(|p| p.id == player) {
            p.stats.damage += dealt.max(0) as u32;
            p.stats.kills += kills;
        }
        if boss_dead {
            self.boss_died(events);
        } else if boss_hit {
            self.check_phase(defs, events);
        }
    }

    /// Downed players: a living teammate close enough for long enough brings them back.
    fn revive_downed(&mut self, events: &mut Vec<SimEvent>) {
        for i in 0..self.players.len() {
            if self.players[i].downed == 0 {
                continue;
            }
            let at = self.players[i].pos;
            let helper = self
                .players
                .iter()
                .filter(|q| q.alive() && !q.linkdead && q.pos.distance(at) <= REVIVE_RANGE)
                .map(|q| q.id)
                .min();
            let p = &mut self.players[i];
            match helper {
                Some(by) => {
                    p.revive += 1;
                    if p.revive >= REVIVE_TICKS {
                        p.dead = false;
                        p.downed = 0;
                        p.revive = 0;
                        p.hp = REVIVE_HP;
                        p.grace = REVIVE_GRACE_TICKS;
                        let id = p.id;
                        if let Some(h) = self.players.iter_mut().find(|q| q.id == by) {
                            h.stats.revives += 1;
                        }
                        events.push(SimEvent::Revived { instance: self.id, player: id, by });
                    }
                }
                None => p.revive = 0,
            }
        }
    }

    fn nearest_player(&self, from: Vec2) -> Option<Vec2> {
        self.players
            .iter()
            .filter(|p| p.alive())
            .map(|p| p.pos)
            .min_by(|a, b| a.distance(from).total_cmp(&b.distance(from)))
    }

    fn step_enemies(&mut self) {
        let arena = self.arena;
        for i in 0..self.enemies.len() {
            let target = self.nearest_player(self.enemies[i].pos);
            let wander_pick = Vec2::new(
                40.0 + self.rng.next_f64() as f32 * (arena.x - 80.0).max(1.0),
                40.0 + self.rng.next_f64() as f32 * (arena.y - 80.0).max(1.0),
            );
            let e = &mut self.enemies[i];
            if let Some(m) = step_move_to(&mut e.pos, e.move_to) {
                e.move_to = m;
                continue;
            }
            e.move_to = None;
            let toward = |e: &Enemy, t: Vec2, sign: f32| -> Vec2 {
                let d = t - e.pos;
                let l = d.length();
                if l < 1e-3 {
                    Vec2::ZERO
                } else {
                    d * (sign * e.speed.min(l) / l)
                }
            };
            let step = match (e.behaviour, target) {
                (Behaviour::Stationary, _) => Vec2::ZERO,
                (Behaviour::Wander, _) | (_, None) if e.behaviour != Behaviour::Stationary => {
                    let w = *e.wander.get_or_insert(wander_pick);
                    if w.distance(e.pos) < 4.0 {
                        e.wander = Some(wander_pick);
                    }
                    toward(e, w, 1.0)
                }
                (Behaviour::Chase, Some(t)) => {
                    if t.distance(e.pos) > e.radius + 16.0 {
                        toward(e, t, 1.0)
                    } else {
                        Vec2::ZERO
                    }
                }
                (Behaviour::KeepDistance, Some(t)) => {
                    let d = t.distance(e.pos);
                    if d > e.range + 12.0 {
                        toward(e, t, 1.0)
                    } else if d < e.range - 12.0 {
                        toward(e, t, -1.0)
                    } else {
                        Vec2::ZERO
                    }
                }
                (Behaviour::Strafe, Some(t)) => {
                    let d = e.pos - t;
                    let l = d.length().max(1e-3);
                    let radial = (e.range - l).clamp(-1.0, 1.0) * 0.5;
                    let tangent = Vec2::new(-d.y / l, d.x / l);
                    (tangent + d * (radial / l)).clamp_unit() * e.speed
                }
                _ => Vec2::ZERO,
            };
            e.pos = keep_inside(e.pos + step, e.radius, arena);
        }
        if let Some(b) = &mut self.boss {
            b.move_to = step_move_to(&mut b.pos, b.move_to).flatten();
        }
    }

    fn scripts_begin(&mut self, tick: Tick) {
        self.scripts_ran = false;
        if self.enemies.is_empty() && self.boss.is_none() && self.scripts.task_count() == 0 {
            return;
        }
        self.scripts_ran = true;
        self.pviews.clear();
        self.pviews.extend(self.players.iter().map(|p| PlayerView {
            id: p.id,
            pos: p.pos,
            hp: p.hp,
            alive: p.alive(),
        }));
        self.oviews.clear();
        self.oviews.extend(self.enemies.iter().map(|e| OwnerView {
            owner: Owner::Enemy(e.id),
            pos: e.pos,
            hp: e.hp,
            max_hp: e.max_hp,
            phase: 0,
        }));
        if let Some(b) = &self.boss {
            self.oviews.push(OwnerView {
                owner: Owner::Boss,
                pos: b.pos,
                hp: b.hp,
                max_hp: b.max_hp,
                phase: b.phase as u8,
            });
        }
        let party = if self.run.party > 0 { self.run.party } else { self.players.len() as u32 }.max(1);
        let view = ScriptView { tick, arena: self.arena, party, players: &self.pviews, owners: &self.oviews };
        self.scripts.run_begin(&view, &mut self.cmds, &mut self.msgs);
    }

    fn scripts_end(&mut self, tick: Tick, defs: &Defs, events: &mut Vec<SimEvent>) {
        if !self.scripts_ran {
            return;
        }
        self.scripts.run_end(&mut self.cmds, &mut self.msgs);
        let cmds = std::mem::take(&mut self.cmds);
        for c in &cmds {
            match c {
                ScriptCmd::Shot(s) => self.spawn_bullet(tick, s, Team::Enemy, events),
                ScriptCmd::Burst(b) => self.spawn_burst(tick, b, events),
                ScriptCmd::MoveTo { owner, target, ticks } => {
                    // The target is kept inside the arena, so no script can move a body out
                    // of reach (or to NaN, where nothing could ever hit it).
                    let ticks_left = (*ticks).max(1);
                    match owner {
                        Owner::Boss => {
                            if let Some(b) = &mut self.boss {
                                let target = keep_inside(*target, b.radius, self.arena);
                                b.move_to = Some(MoveTo { target, ticks_left });
                            }
                        }
                        Owner::Enemy(id) => {
                            if let Some(e) = self.enemies.iter_mut().find(|e| e.id == *id) {
                                let target = keep_inside(*target, e.radius, self.arena);
                                e.move_to = Some(MoveTo { target, ticks_left });
                            }
                        }
                    }
                }
                ScriptCmd::Spawn { enemy, pos } => self.spawn_enemy(defs, enemy, *pos, events),
                ScriptCmd::Sfx { name, pos } => {
                    events.push(SimEvent::Sfx { instance: self.id, name: name.clone(), pos: *pos })
                }
                ScriptCmd::Telegraph(t) => events.push(SimEvent::Telegraph { instance: self.id, telegraph: *t }),
                ScriptCmd::Hint(text) => events.push(SimEvent::Hint { instance: self.id, text: text.clone() }),
                ScriptCmd::Leave { owner: Owner::Enemy(id) } => {
                    if let Some(at) = self.enemies.iter().position(|e| e.id == *id) {
                        self.enemies.remove(at);
                        self.scripts.stop(Owner::Enemy(*id), None);
                    }
                }
                ScriptCmd::Leave { owner: Owner::Boss } => {}
            }
        }
        self.cmds = cmds;
        self.cmds.clear();
        for m in self.msgs.drain(..) {
            events.push(match m {
                ScriptMessage::Log(message) => SimEvent::ScriptLog { instance: self.id, message },
                ScriptMessage::Error(message) => SimEvent::ScriptError { instance: self.id, message },
            });
        }
    }

    /// A shot of player `shooter`'s (credited to them, and tested where they saw the
    /// targets: lag compensation); tests use it to place a shot exactly.
    pub fn spawn_shot_of(&mut self, tick: Tick, shooter: PlayerId, s: &ShotCmd, events: &mut Vec<SimEvent>) {
        let first = self.next_uid;
        self.spawn_bullet(tick, s, Team::Player, events);
        for uid in first..self.next_uid {
            self.shooters.insert(uid, (shooter, tick));
        }
    }

    /// Spawns one bullet now (scripts and players go through here; tests may too).
    pub fn spawn_bullet(&mut self, tick: Tick, s: &ShotCmd, team: Team, events: &mut Vec<SimEvent>) {
        if self.bullets.len() >= MAX_BULLETS_PER_INSTANCE {
            self.bullets_refused += 1;
            return;
        }
        let spawn = BulletSpawn {
            uid: self.next_uid,
            pos: s.pos,
            angle: s.angle,
            speed: s.speed,
            radius: s.radius,
            lifetime: s.lifetime,
            kind: s.kind,
            team,
            accel: s.accel,
            turn: s.turn,
            max_speed: s.max_speed,
            tick,
        }
        .quantized();
        self.next_uid = self.next_uid.wrapping_add(1);
        self.max_bullet_radius = self.max_bullet_radius.max(spawn.radius);
        self.bullets.spawn(&spawn, s.damage);
        events.push(SimEvent::BulletSpawned { instance: self.id, spawn });
    }

    /// Spawns a ring, fan or volley of enemy bullets: one event, expanded by the same code
    /// on every client. Fewer bullets than asked when the instance is near its cap.
    pub fn spawn_burst(&mut self, tick: Tick, b: &BurstCmd, events: &mut Vec<SimEvent>) {
        self.spawn_burst_of(tick, b, Team::Enemy, events)
    }

    /// A burst of one team's bullets (players fire fans this way).
    pub fn spawn_burst_of(&mut self, tick: Tick, b: &BurstCmd, team: Team, events: &mut Vec<SimEvent>) {
        let room = MAX_BULLETS_PER_INSTANCE.saturating_sub(self.bullets.len());
        let count = (b.count as usize).min(room).min(Burst::MAX_COUNT as usize) as u16;
        self.bullets_refused += b.count as u64 - count as u64;
        if count == 0 {
            return;
        }
        let s = &b.shot;
        let shape = BulletSpawn {
            uid: self.next_uid,
            pos: s.pos,
            angle: 0.0,
            speed: s.speed,
            radius: s.radius,
            lifetime: s.lifetime,
            kind: s.kind,
            team,
            accel: s.accel,
            turn: s.turn,
            max_speed: s.max_speed,
            tick,
        };
        let burst = Burst::new(shape, count, s.angle, b.span, b.div, b.offset);
        self.next_uid = self.next_uid.wrapping_add(count as u32);
        self.max_bullet_radius = self.max_bullet_radius.max(s.radius);
        for spawn in burst.spawns() {
            self.bullets.spawn(&spawn, s.damage);
        }
        events.push(SimEvent::BurstSpawned { instance: self.id, burst });
    }

    /// Spawns an enemy by id and starts its emitters. Unknown ids are reported, not fatal.
    pub fn spawn_enemy(&mut self, defs: &Defs, id: &str, pos: Vec2, events: &mut Vec<SimEvent>) {
        let Some(d) = defs.enemies.get(id) else {
            events.push(SimEvent::ScriptError { instance: self.id, message: format!("spawn: no enemy '{id}'") });
            return;
        };
        if self.enemies.len() >= MAX_ENEMIES_PER_INSTANCE {
            return;
        }
        let eid = self.next_enemy;
        self.next_enemy += 1;
        let r = d.radius;
        let pos = keep_inside(pos, r, self.arena);
        let hp = ((d.hp as f32 * self.party_scale()).round() as i32).max(1);
        self.enemies.push(Enemy {
            id: eid,
            def: id.to_string(),
            pos,
            hp,
            max_hp: hp,
            radius: r,
            behaviour: d.behaviour,
            speed: d.speed,
            range: d.range,
            move_to: None,
            wander: None,
            damage_taken_mult: d.damage_taken_mult,
        });
        for em in &d.emitters {
            self.scripts.start(Owner::Enemy(eid), 0, &em.id, em.args.as_deref());
        }
        events.push(SimEvent::EnemySpawned { instance: self.id, id: eid, def: id.to_string(), pos });
    }

    fn spawn_boss(&mut self, defs: &Defs, _tick: Tick, events: &mut Vec<SimEvent>) {
        let Some(dungeon) = self.dungeon().map(str::to_string) else { return };
        let dd = &defs.dungeons[&dungeon];
        let Some(bd) = defs.bosses.get(&dd.boss) else { return };
        self.boss_spawned = true;
        if self.run.party == 0 {
            self.run.party = self.players.len() as u32;
        }
        let hp = ((bd.hp as f32 * self.party_scale()).round() as i32).max(1);
        // Everyone standing meets the boss at full health.
        for p in self.players.iter_mut().filter(|p| p.alive()) {
            p.hp = PLAYER_MAX_HP;
        }
        self.boss = Some(Boss {
            def: bd.id.clone(),
            pos: v2(dd.boss_pos),
            hp,
            max_hp: hp,
            radius: bd.radius,
            phase: 0,
            move_to: None,
        });
        events.push(SimEvent::BossSpawned { instance: self.id, def: bd.id.clone() });
        self.enter_phase(defs, 0, events);
    }

    fn enter_phase(&mut self, defs: &Defs, phase: usize, events: &mut Vec<SimEvent>) {
        let Some(b) = &mut self.boss else { return };
        let bd = &defs.bosses[&b.def];
        if phase > 0 {
            self.scripts.stop(Owner::Boss, Some(b.phase as u32));
        }
        b.phase = phase;
        let ph = &bd.phases[phase];
        if phase > 0 && ph.clear_adds {
            for e in self.enemies.drain(..) {
                self.scripts.stop(Owner::Enemy(e.id), None);
            }
        }
        for em in &ph.emitters {
            self.scripts.start(Owner::Boss, phase as u32, &em.id, em.args.as_deref());
        }
        events.push(SimEvent::PhaseChanged { instance: self.id, phase: phase as u8, name: ph.name.clone() });
    }

    /// Keeps where the boss and each enemy are now (at this tick's hit test), for the
    /// last `LAG_COMP_MAX_TICKS` ticks.
    fn record_history(&mut self) {
        let mut row = if self.history.len() > LAG_COMP_MAX_TICKS as usize {
            self.history.pop_front().map(|(_, _, v)| v).unwrap_or_default()
        } else {
            Vec::new()
        };
        row.clear();
        row.extend(self.enemies.iter().map(|e| (e.id, e.pos)));
        let boss = self.boss.as_ref().map(|b| b.pos);
        self.history.push_back((self.now, boss, row));
    }

    /// Lag compensation: each player's shots against the boss and enemies where that
    /// player saw them, `view_delay` quarter ticks ago (clamped when it was set). The targets are
    /// the same, in the same order, as `self.targets` (the ones alive now: what died since
    /// cannot be hit again, what came since is where it is); only where they stand
    /// differs. Enemy bullets against players are never rewound (`resolve_hits` tests
    /// them against where players are now).
    fn rewound_hits(&mut self, pad: f32) {
        // Each player's delay, looked up once (ids in order: a binary search per bullet).
        let mut delays: Vec<(PlayerId, u32)> =
            self.players.iter().map(|p| (p.id, p.view_delay.min(LAG_COMP_MAX_TICKS * VIEW_STEPS_PER_TICK))).collect();
        delays.sort_unstable();
        let delay_of = |shooter: Option<PlayerId>| -> u32 {
            shooter.and_then(|s| delays.binary_search_by_key(&s, |d| d.0).ok()).map_or(0, |k| delays[k].1)
        };
        let pool = &self.bullets;
        let mut mine: Vec<(u32, usize)> = (0..pool.len())
            .filter(|&i| pool.team[i] == Team::Player && pool.life[i] > 0)
            .map(|i| (delay_of(self.shooters.get(&pool.uid[i]).map(|s| s.0)), i))
            .collect();
        mine.sort_unstable();
        let mut k = 0;
        while k < mine.len() {
            let d = mine[k].0;
            let end = k + mine[k..].iter().take_while(|(x, _)| *x == d).count();
            // Where the targets were d quarter ticks ago: between the two ticks kept
            // either side (the oldest kept, if not that far back).
            let (whole, part) =
                (d / VIEW_STEPS_PER_TICK, (d % VIEW_STEPS_PER_TICK) as f32 / VIEW_STEPS_PER_TICK as f32);
            let at = |back: u32| {
                let want = self.now.saturating_sub(back);
                self.history.iter().find(|(t, _, _)| *t >= want)
            };
            let (newer, older) = (at(whole), at(whole + 1));
            let place = |row: Option<&Placed>, id: &Target| match (id, row) {
                (Target::Boss, Some((_, Some(b), _))) => Some(*b),
                // Rows are in enemy order, and enemy ids only grow: a binary search.
                (Target::Enemy(e), Some((_, _, r))) => r.binary_search_by_key(e, |x| x.0).ok().map(|k| r[k].1),
                _ => None,
            };
            self.rewound.clear();
            for (c, id) in self.targets.iter().zip(&self.target_ids) {
                let was = match (place(newer, id), place(older, id)) {
                    (Some(a), Some(b)) => a + (b - a) * part,
                    (Some(a), None) => a,
                    _ => c.pos,
                };
                self.rewound.push(Circle { pos: was, r: c.r });
            }
            let gridded = self.rewound.len() > crate::sim::hits::BRUTE_FORCE_TARGETS;
            if gridded {
                self.grid.build(self.arena, &self.rewound, pad);
            }
            for &(_, i) in &mine[k..end] {
                let (bx, by, br) = (pool.x[i], pool.y[i], pool.radius[i]);
                let hit = |t: usize| {
                    let c = &self.rewound[t];
                    let (dx, dy) = (bx - c.pos.x, by - c.pos.y);
                    dx * dx + dy * dy <= (br + c.r) * (br + c.r)
                };
                let first = if gridded {
                    self.grid.query(Vec2::new(bx, by)).iter().map(|&t| t as usize).find(|&t| hit(t))
                } else {
                    (0..self.rewound.len()).find(|&t| hit(t))
                };
                if let Some(t) = first {
                    self.hits.push((i, t as u16));
                }
            }
            k = end;
        }
        // The order the rules read hits in: by bullet, as without the rewind.
        self.hits.sort_unstable();
    }

    fn resolve_hits(&mut self, defs: &Defs, events: &mut Vec<SimEvent>) {
        // Every tick, bullets or not: a shot fired next tick may need where things were now.
        self.record_history();
        if self.bullets.is_empty() {
            return;
        }
        let in_hub = self.is_hub();
        // The grid's padding: the largest radius seen, plus a pixel for the wire grid's
        // rounding (a spawn's radius is snapped to 1/8 px), so the grid never misses an
        // overlap the brute-force path would find.
        let pad = self.max_bullet_radius + 1.0;
        let use_grid = |n: usize| n > crate::sim::hits::BRUTE_FORCE_TARGETS;
        // Enemy bullets against vulnerable players, and in the same pass the grazes of
        // those that pass close without hitting.
        self.targets.clear();
        self.target_ids.clear();
        for p in &self.players {
            if p.vulnerable() {
                self.targets.push(Circle { pos: p.pos, r: PLAYER_HITBOX_RADIUS });
                self.target_ids.push(Target::Player(p.id));
            }
        }
        self.hits.clear();
        self.grazes.clear();
        let grazing = !self.is_hub();
        if !self.targets.is_empty() {
            if use_grid(self.targets.len()) {
                self.grid.build(self.arena, &self.targets, pad + if grazing { GRAZE_RADIUS } else { 0.0 });
            }
            let g = if grazing { Some(&mut self.grazes) } else { None };
            find_hits_and_grazes(&self.bullets, Team::Enemy, &self.targets, &self.grid, &mut self.hits, g);
        }
        for k in 0..self.grazes.len() {
            let (bi, ti) = self.grazes[k];
            let Target::Player(pid) = self.target_ids[ti as usize] else { continue };
            let Some(p) = self.players.iter_mut().find(|p| p.id == pid) else { continue };
            let bit = 1u64 << p.slot;
            if self.bullets.grazed[bi] & bit != 0 {
                continue;
            }
            self.bullets.grazed[bi] |= bit;
            p.graze();
        }
        let mut downed_any = false;
        for k in 0..self.hits.len() {
            let (bi, ti) = self.hits[k];
            let Target::Player(pid) = self.target_ids[ti as usize] else { continue };
            let slot = self.players.iter().find(|p| p.id == pid).map_or(0, |p| p.slot);
            let grazed_it = self.bullets.grazed[bi] & (1u64 << slot) != 0;
            let teammates = self.players.iter().filter(|q| q.id != pid && q.alive() && !q.linkdead).count();
            let Some(p) = self.players.iter_mut().find(|p| p.id == pid) else { continue };
            if p.dead {
                continue;
            }
            if grazed_it {
                // It grazed, then hit: no graze after all.
                p.stats.grazes = p.stats.grazes.saturating_sub(1);
                p.graze_charge = p.graze_charge.saturating_sub(1);
            }
            let dmg = self.bullets.damage[bi];
            p.hp -= dmg;
            p.stats.hits_taken += 1;
            let uid = self.bullets.uid[bi];
            self.bullets.kill(bi);
            events.push(SimEvent::BulletHit {
                instance: self.id,
                uid,
                target: Target::Player(pid),
                amount: dmg,
                hp: p.hp,
            });
            if p.hp <= 0 {
                p.hp = 0;
                p.dead = true;
                p.dead_ticks = 0;
                p.escape = 0;
                p.stats.downs += 1;
                events.push(SimEvent::Death { instance: self.id, target: Target::Player(pid) });
                if self.kind != InstanceKind::Hub {
                    if teammates > 0 {
                        // Downed: a teammate may still come.
                        p.downed = DOWNED_TICKS;
                        p.revive = 0;
                    } else {
                        p.out = true;
                        events.push(SimEvent::PlayerOut { instance: self.id, player: pid });
                    }
                    downed_any = true;
                }
            }
        }
        if downed_any && self.run.ended.is_none() && self.players.iter().all(|p| p.dead) {
            // Nobody is left standing to revive anyone: the run has failed.
            self.end_run(RunOutcome::Failed, events);
            self.run.fail_timer = RESPAWN_LOCKOUT_TICKS + 1;
        }
        // Player bullets against the boss first, then enemies.
        self.targets.clear();
        self.target_ids.clear();
        if let Some(b) = &self.boss {
            if b.hp > 0 {
                self.targets.push(Circle { pos: b.pos, r: b.radius });
                self.target_ids.push(Target::Boss);
            }
        }
        for e in &self.enemies {
            self.targets.push(Circle { pos: e.pos, r: e.radius });
            self.target_ids.push(Target::Enemy(e.id));
        }
        self.hits.clear();
        if !self.targets.is_empty() {
            if self.players.iter().all(|p| p.view_delay == 0) {
                if use_grid(self.targets.len()) {
                    self.grid.build(self.arena, &self.targets, pad);
                }
                find_hits(&self.bullets, Team::Player, &self.targets, &self.grid, &mut self.hits);
            } else {
                self.rewound_hits(pad);
            }
        }
        let mut enemy_died = false;
        for k in 0..self.hits.len() {
            let (bi, ti) = self.hits[k];
            let target = self.target_ids[ti as usize];
            let base = self.bullets.damage[bi];
            let (hp, amount) = match target {
                Target::Boss => {
                    let Some(b) = &mut self.boss else { continue };
                    if b.hp <= 0 {
                        continue;
                    }
                    let mult = defs.bosses[&b.def].phases[b.phase].damage_taken_mult;
                    let amount = ((base as f32) * mult).round() as i32;
                    b.hp -= amount;
                    (&mut b.hp, amount)
                }
                Target::Enemy(id) => {
                    let Some(e) = self.enemies.iter_mut().find(|e| e.id == id) else { continue };
                    if e.hp <= 0 {
                        continue;
                    }
                    let mult = e.damage_taken_mult;
                    let amount = if mult == 1.0 { base } else { ((base as f32) * mult).round() as i32 };
                    e.hp -= amount;
                    (&mut e.hp, amount)
                }
                Target::Player(_) => continue,
            };
            let died = *hp <= 0;
            let dealt = (amount + (*hp).min(0)).max(0) as u32;
            if died {
                *hp = 0;
            }
            let hp_now = *hp;
            let uid = self.bullets.uid[bi];
            if let Some((shooter, _)) = self.shooters.remove(&uid) {
                if let Some(p) = self.players.iter_mut().find(|p| p.id == shooter).filter(|_| !in_hub) {
                    p.stats.damage += dealt;
                    // Nothing dies in the hub (the dummy stands again): no kills there.
                    p.stats.kills += (died && !in_hub && matches!(target, Target::Enemy(_))) as u32;
                }
            }
            self.bullets.kill(bi);
            events.push(SimEvent::BulletHit { instance: self.id, uid, target, amount, hp: hp_now });
            match target {
                Target::Boss if died => self.boss_died(events),
                Target::Boss => self.check_phase(defs, events),
                // Nothing dies in the hub: the training dummy is whole again.
                Target::Enemy(id) if died && self.kind == InstanceKind::Hub => {
                    if let Some(e) = self.enemies.iter_mut().find(|e| e.id == id) {
                        e.hp = e.max_hp;
                    }
                }
                Target::Enemy(id) if died => {
                    enemy_died = true;
                    self.scripts.stop(Owner::Enemy(id), None);
                    events.push(SimEvent::Death { instance: self.id, target });
                }
                _ => {}
            }
        }
        if enemy_died {
            self.enemies.retain(|e| e.hp > 0);
        }
        self.bullets.compact();
    }

    /// Sets the boss's HP to a fraction of its maximum and applies any phase change
    /// (the validator walks every phase this way).
    /// The uid the next bullet will get (bullets made so far, counting from 1).
    pub fn next_uid(&self) -> u32 {
        self.next_uid
    }

    pub fn force_boss_hp(&mut self, defs: &Defs, frac: f32, events: &mut Vec<SimEvent>) {
        if let Some(b) = &mut self.boss {
            b.hp = ((b.max_hp as f32 * frac) as i32).max(1);
        }
        self.check_phase(defs, events);
    }

    fn check_phase(&mut self, defs: &Defs, events: &mut Vec<SimEvent>) {
        let Some(b) = &self.boss else { return };
        let phases = &defs.bosses[&b.def].phases;
        let frac = b.hp as f32 / b.max_hp.max(1) as f32;
        let mut next = b.phase;
        while next + 1 < phases.len() && frac <= phases[next + 1].hp_threshold {
            next += 1;
        }
        if next != b.phase {
            self.enter_phase(defs, next, events);
        }
    }

    fn boss_died(&mut self, events: &mut Vec<SimEvent>) {
        self.scripts.stop(Owner::Boss, None);
        events.push(SimEvent::Death { instance: self.id, target: Target::Boss });
        for e in self.enemies.drain(..) {
            self.scripts.stop(Owner::Enemy(e.id), None);
        }
        // Bullet cancel: every hostile bullet disappears, reported so replicas match.
        // In uid order: the wire packs neighbouring uids smaller.
        let mut cancelled: Vec<(u32, usize)> = (0..self.bullets.len())
            .filter(|&i| self.bullets.team[i] == Team::Enemy && self.bullets.is_alive(i))
            .map(|i| (self.bullets.uid[i], i))
            .collect();
        cancelled.sort_unstable();
        for (uid, i) in cancelled {
            events.push(SimEvent::BulletDespawned { instance: self.id, uid });
            self.bullets.kill(i);
        }
        self.cleared = true;
        self.clear_timer = CLEAR_DELAY_TICKS;
        events.push(SimEvent::InstanceCleared { instance: self.id });
        self.run.boss_killed = true;
        self.end_run(RunOutcome::Cleared, events);
    }

    fn progress(&mut self, tick: Tick, defs: &Defs, events: &mut Vec<SimEvent>, requests: &mut Vec<Request>) {
        let Some(dungeon) = self.dungeon().map(str::to_string) else { return };
        if self.run.ended == Some(RunOutcome::Failed) {
            self.run.fail_timer = self.run.fail_timer.saturating_sub(1);
            if self.run.fail_timer == 0 {
                for p in &self.players {
                    requests.push(Request::ToHub(p.id, TransferReason::Failed));
                }
                self.run.fail_timer = u32::MAX;
            }
            return;
        }
        // Nobody left standing (the last one left, or every downed player ran out of time):
        // the run has failed.
        if self.run.ended.is_none() && !self.cleared && !self.players.is_empty() && self.players.iter().all(|p| p.dead)
        {
            self.end_run(RunOutcome::Failed, events);
            self.run.fail_timer = RESPAWN_LOCKOUT_TICKS + 1;
            return;
        }
        if self.cleared {
            self.clear_timer = self.clear_timer.saturating_sub(1);
            if self.clear_timer == 0 {
                for p in &self.players {
                    requests.push(Request::ToHub(p.id, TransferReason::Cleared));
                }
            }
            return;
        }
        if self.boss_spawned || !self.enemies.is_empty() {
            return;
        }
        let d = &defs.dungeons[&dungeon];
        if self.wave_wait == 0 && self.next_wave > 0 && self.next_wave != usize::MAX {
            // A wave was just cleared: those standing heal a quarter and gain a flare.
            for p in self.players.iter_mut().filter(|p| p.alive()) {
                p.hp = (p.hp + WAVE_HEAL).min(PLAYER_MAX_HP);
                p.add_flare();
            }
            events.push(SimEvent::WaveCleared { instance: self.id, wave: self.next_wave as u32 });
        }
        self.wave_wait += 1;
        if self.next_wave < d.waves.len() {
            let w = &d.waves[self.next_wave];
            if self.wave_wait >= w.delay {
                if self.next_wave == 0 {
                    // The party this run is scaled for: who came in before the first wave.
                    self.run.party = self.players.len() as u32;
                }
                self.wave_wait = 0;
                self.next_wave += 1;
                for s in w.spawns.clone() {
                    for k in 0..s.count {
                        let pos = Vec2::new(s.x + k as f32 * s.spacing, s.y);
                        self.spawn_enemy(defs, &s.enemy, pos, events);
                    }
                }
            }
        } else if self.wave_wait >= d.boss_delay {
            self.spawn_boss(defs, tick, events);
        }
    }

    /// Folds everything that matters into a 64-bit FNV-1a hash (the determinism test).
    pub fn hash_into(&self, h: &mut u64) {
        let mut mix = |v: u64| {
            for b in v.to_le_bytes() {
                *h ^= b as u64;
                *h = h.wrapping_mul(0x100_0000_01b3);
            }
        };
        mix(self.id as u64);
        mix(self.next_uid as u64);
        for p in &self.players {
            mix(p.id as u64);
            mix(p.pos.x.to_bits() as u64 | (p.pos.y.to_bits() as u64) << 32);
            mix(p.hp as u64 ^ (p.dead as u64) << 40 ^ (p.grace as u64) << 48);
            mix(p.downed as u64 | (p.revive as u64) << 16 | (p.out as u64) << 32 | (p.flares as u64) << 40);
            mix(p.ship as u64);
            let st = &p.stats;
            mix(st.damage as u64 | (st.grazes as u64) << 32);
            mix(st.kills as u64 | (st.hits_taken as u64) << 16 | (st.downs as u64) << 32 | (st.revives as u64) << 48);
        }
        mix(self.run.ended.map_or(0, |o| o as u64 + 1) | (self.run.party as u64) << 8);
        for e in &self.enemies {
            mix(e.id as u64);
            mix(e.pos.x.to_bits() as u64 | (e.pos.y.to_bits() as u64) << 32);
            mix(e.hp as u64);
        }
        if let Some(b) = &self.boss {
            mix(b.hp as u64 | (b.phase as u64) << 40);
            mix(b.pos.x.to_bits() as u64 | (b.pos.y.to_bits() as u64) << 32);
        }
        for i in 0..self.bullets.len() {
            mix(self.bullets.uid[i] as u64);
            mix(self.bullets.x[i].to_bits() as u64 | (self.bullets.y[i].to_bits() as u64) << 32);
        }
    }
}

/// Advances a scripted linear move one tick; returns the remaining move, if any.
/// A body's centre kept inside the arena, whatever it is given: never panics (a body
/// wider than the arena sits in the middle) and turns a non-finite position into the
/// arena's centre.
pub fn keep_inside(p: Vec2, r: f32, arena: Vec2) -> Vec2 {
    let axis = |v: f32, side: f32| {
        let (lo, hi) = (r.min(side / 2.0), (side - r).max(side / 2.0));
        if v.is_finite() {
            v.max(lo).min(hi)
        } else {
            side / 2.0
        }
    };
    Vec2::new(axis(p.x, arena.x), axis(p.y, arena.y))
}

fn step_move_to(pos: &mut Vec2, m: Option<MoveTo>) -> Option<Option<MoveTo>> {
    let m = m?;
    let t = m.ticks_left.max(1) as f32;
    *pos = *pos + (m.target - *pos) * (1.0 / t);
    Some(if m.ticks_left > 1 { Some(MoveTo { target: m.target, ticks_left: m.ticks_left - 1 }) } else { None })
}
