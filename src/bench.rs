//! `hailfire bench`: milliseconds per tick for (a) a boss fight with four scripted players
//! and (b) a stress arena holding 10,000 live bullets, each with the Lua share; plus how
//! long a stationary and a drifting player survive the Warden's opening phase.
//! Timing lives here, never in `sim` (which has no clock).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crate::content::{Content, EmitterSource};
use crate::sim::defs::{Behaviour, DungeonDef, EnemyDef};
use crate::sim::player::{InputFrame, BTN_FIRE};
use crate::sim::rng::Rng;
use crate::sim::script::{Owner, ScriptCmd, ScriptFactory, ScriptMessage, ScriptView, Scripting};
use crate::sim::{Defs, SimEvent, Vec2, World};

/// Wraps a script runtime and adds the time spent in it to a shared counter.
struct Timed {
    inner: Box<dyn Scripting>,
    nanos: Arc<AtomicU64>,
}

impl Scripting for Timed {
    fn start(&mut self, o: Owner, g: u32, n: &str, a: Option<&crate::sim::defs::ArgValue>) {
        let t = Instant::now();
        self.inner.start(o, g, n, a);
        self.nanos.fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
    }
    fn stop(&mut self, o: Owner, g: Option<u32>) {
        self.inner.stop(o, g)
    }
    fn run(&mut self, v: &ScriptView, out: &mut Vec<ScriptCmd>, m: &mut Vec<ScriptMessage>) {
        let t = Instant::now();
        self.inner.run(v, out, m);
        self.nanos.fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
    }
    fn run_begin(&mut self, v: &ScriptView, out: &mut Vec<ScriptCmd>, m: &mut Vec<ScriptMessage>) {
        let t = Instant::now();
        self.inner.run_begin(v, out, m);
        self.nanos.fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
    }
    fn run_end(&mut self, out: &mut Vec<ScriptCmd>, m: &mut Vec<ScriptMessage>) {
        let t = Instant::now();
        self.inner.run_end(out, m);
        self.nanos.fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
    }
    fn take_lost(&mut self) -> Option<crate::sim::script::Lost> {
        self.inner.take_lost()
    }
    fn task_count(&self) -> usize {
        self.inner.task_count()
    }
}

struct TimedFactory {
    inner: Arc<dyn ScriptFactory>,
    nanos: Arc<AtomicU64>,
}

impl ScriptFactory for TimedFactory {
    fn create(&self, seed: u64) -> Box<dyn Scripting> {
        Box::new(Timed { inner: self.inner.create(seed), nanos: self.nanos.clone() })
    }
}

#[derive(Debug, Clone)]
pub struct BenchResult {
    pub name: String,
    pub ticks: u32,
    pub ms_per_tick: f64,
    pub lua_ms_per_tick: f64,
    pub mean_bullets: f64,
    pub peak_bullets: usize,
}

impl std::fmt::Display for BenchResult {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:<34} {:>8.4} ms/tick  (Lua {:>7.4} ms, {:>4.1}%)  bullets mean {:>7.1} peak {:>6}  over {} ticks",
            self.name,
            self.ms_per_tick,
            self.lua_ms_per_tick,
            100.0 * self.lua_ms_per_tick / self.ms_per_tick.max(1e-12),
            self.mean_bullets,
            self.peak_bullets,
            self.ticks
        )
    }
}

/// Timing and bullet counts over measured ticks.
#[derive(Default)]
struct Tally {
    nanos: u128,
    bullets: u64,
    peak: usize,
    ticks: u32,
}

impl Tally {
    /// Steps the world once, timed, counting the instance's bullets.
    fn step(&mut self, world: &mut World, inst: crate::sim::InstanceId) {
        let start = Instant::now();
        world.step();
        self.nanos += start.elapsed().as_nanos();
        let b = world.instances[&inst].bullets.len();
        self.bullets += b as u64;
        self.peak = self.peak.max(b);
        self.ticks += 1;
    }

    fn result(&self, name: &str, lua_nanos: u64) -> BenchResult {
        let n = self.ticks.max(1) as f64;
        BenchResult {
            name: name.into(),
            ticks: self.ticks,
            ms_per_tick: self.nanos as f64 / n / 1e6,
            lua_ms_per_tick: lua_nanos as f64 / n / 1e6,
            mean_bullets: self.bullets as f64 / n,
            peak_bullets: self.peak,
        }
    }
}

fn drift(t: u32, k: u32) -> Vec2 {
    let a = t as f32 * 0.021 + k as f32 * 1.7;
    Vec2::new(a.sin(), (a * 1.3).cos() * 0.6)
}

/// (a) The Warden fight with four scripted players, every phase in turn.
pub fn boss_fight(content: &Content, ticks_per_phase: u32) -> BenchResult {
    let nanos = Arc::new(AtomicU64::new(0));
    let factory = Arc::new(TimedFactory { inner: content.script_factory(), nanos: nanos.clone() });
    let mut world = World::new(content.defs.clone(), factory, 1);
    for id in 1..=4 {
        world.add_player(id, &format!("bot{id}"));
    }
    let inst = world.enter_dungeon(1, "warden_keep").expect("base content has warden_keep");
    for id in 2..=4 {
        world.enter_dungeon(id, "warden_keep");
    }
    let defs = world.defs.clone();
    let mut ev = Vec::new();
    let tick = world.tick;
    world.instances.get_mut(&inst).unwrap().start_boss(&defs, tick, &mut ev);
    let phases: Vec<f32> = defs.bosses["warden"].phases.iter().map(|p| p.hp_threshold).collect();
    let mut tally = Tally::default();
    nanos.store(0, Ordering::Relaxed);
    for &frac in &phases {
        for _ in 0..ticks_per_phase {
            let t = world.tick + 1;
            let boss_pos = world.instances[&inst].boss.as_ref().map_or(Vec2::new(480.0, 160.0), |b| b.pos);
            for id in 1..=4u32 {
                let p = world.player(id).map(|p| p.pos).unwrap_or_default();
                let aim = (boss_pos - p).angle_deg();
                let _ = world.queue_input(id, InputFrame { tick: t, mv: drift(t, id), aim, buttons: BTN_FIRE });
            }
            {
                // Bench harness: keep the fight in this phase and the players alive.
                let i = world.instances.get_mut(&inst).unwrap();
                i.force_boss_hp(&defs, frac - 0.01, &mut ev);
                for p in i.players.iter_mut() {
                    p.hp = 100;
                }
            }
            tally.step(&mut world, inst);
        }
    }
    tally.result("(a) Warden fight, 4 players", nanos.load(Ordering::Relaxed))
}

/// Stress: `per_tick` bullets a tick (in rings of at most 500) with a 100-tick life keeps
/// `100 * per_tick` in the air.
fn stress_emitter(per_tick: u32) -> String {
    let rings = per_tick.div_ceil(500).max(1);
    let n = (per_tick / rings).max(1);
    format!(
        r#"
local a = 0
while true do
  for k = 1, {rings} do
    ring{{n = {n}, angle = a + k * 0.37, speed = 1.5, kind = "orb_small", lifetime = 100, turn = 0.2}}
  end
  a = a + 3.7
  wait(1)
end
"#
    )
}

/// The yardstick for the bullet pool: the least any engine must do per bullet per tick,
/// written plainly as one scalar loop over a struct of arrays (turn by a fixed rotation,
/// acceleration with a speed cap, move, count down the lifetime, leave the arena, and a
/// circle test against four players), on a copy of the very bullets the stress arena
/// holds. The stress tick divided by this loop's cost for as many bullets is the ratio the
/// bench reports: what the real engine spends beyond the bare physics (spawning from Lua,
/// events, the hit grid, removing dead bullets, players).
pub struct Reference {
    x: Vec<f32>,
    y: Vec<f32>,
    vx: Vec<f32>,
    vy: Vec<f32>,
    accel: Vec<f32>,
    max_speed: Vec<f32>,
    turn_cos: Vec<f32>,
    turn_sin: Vec<f32>,
    radius: Vec<f32>,
    life: Vec<u32>,
}

impl Reference {
    pub fn of(pool: &crate::sim::bullets::BulletPool) -> Reference {
        let live: Vec<usize> = (0..pool.len()).filter(|&i| pool.is_alive(i)).collect();
        let pick = |v: &[f32]| live.iter().map(|&i| v[i]).collect::<Vec<f32>>();
        Reference {
            x: pick(&pool.x),
            y: pick(&pool.y),
            vx: pick(&pool.vx),
            vy: pick(&pool.vy),
            accel: pick(&pool.accel),
            max_speed: pick(&pool.max_speed),
            turn_cos: pick(&pool.turn_cos),
            turn_sin: pick(&pool.turn_sin),
            radius: pick(&pool.radius),
            // Outlasts a measured chunk (the bench takes a fresh copy every few ticks, so the
            // count stays the same).
            life: vec![1_000_000; live.len()],
        }
    }

    /// One tick; returns how many bullets hit a player.
    pub fn tick(&mut self, bounds: Vec2, players: &[(Vec2, f32); 4]) -> u32 {
        let mut hits = 0;
        for i in 0..self.x.len() {
            if self.life[i] == 0 {
                continue;
            }
            let (c, s) = (self.turn_cos[i], self.turn_sin[i]);
            let (mut vx, mut vy) = (self.vx[i] * c - self.vy[i] * s, self.vx[i] * s + self.vy[i] * c);
            if self.accel[i] != 0.0 {
                let sp = (vx * vx + vy * vy).sqrt();
                if sp > 0.0 {
                    let k = (sp + self.accel[i]).clamp(0.0, self.max_speed[i]) / sp;
                    vx *= k;
                    vy *= k;
                }
            }
            self.vx[i] = vx;
            self.vy[i] = vy;
            self.x[i] += vx;
            self.y[i] += vy;
            self.life[i] -= 1;
            let (x, y, r) = (self.x[i], self.y[i], self.radius[i]);
            let m = crate::sim::config::ARENA_MARGIN + r;
            if x < -m || y < -m || x > bounds.x + m || y > bounds.y + m {
                self.life[i] = 0;
                continue;
            }
            for (p, pr) in players {
                let (dx, dy) = (x - p.x, y - p.y);
                if dx * dx + dy * dy <= (r + pr) * (r + pr) {
                    hits += 1;
                    break;
                }
            }
        }
        hits
    }

    pub fn live(&self) -> usize {
        self.life.iter().filter(|&&l| l > 0).count()
    }
}

/// The reference loop's cost in nanoseconds per bullet per tick, over `ticks` ticks on
/// copies of `pool`'s live bullets, a fresh copy every 20 ticks (untimed) so that the
/// loop always runs over as many live bullets as the engine holds.
pub fn reference_ns_per_bullet(
    pool: &crate::sim::bullets::BulletPool,
    bounds: Vec2,
    players: &[(Vec2, f32); 4],
    ticks: u32,
) -> f64 {
    let (mut nanos, mut bullets, mut hits) = (0u128, 0u64, 0u64);
    let mut done = 0;
    while done < ticks {
        let mut r = Reference::of(pool);
        for _ in 0..20.min(ticks - done) {
            bullets += r.live() as u64;
            let t = Instant::now();
            hits += r.tick(bounds, players) as u64;
            nanos += t.elapsed().as_nanos();
            done += 1;
        }
    }
    std::hint::black_box(hits);
    nanos as f64 / bullets.max(1) as f64
}

/// A stress arena with `bullets` live bullets (100 a tick per 10,000) and four players
/// weaving through them; also the reference loop on a copy of its bullets (ns per bullet).
pub fn stress_n(content: &Content, bullets: u32, ticks: u32) -> (BenchResult, f64) {
    let mut defs: Defs = (*content.defs).clone();
    defs.enemies.insert(
        "bench_stress".into(),
        EnemyDef {
            id: "bench_stress".into(),
            name: "stress".into(),
            hp: i32::MAX,
            radius: 20.0,
            color: "#ffffff".into(),
            body: Default::default(),
            sprite: None,
            behaviour: Behaviour::Stationary,
            speed: 0.0,
            range: 0.0,
            emitters: vec!["bench_stress".into()],
            hostile: true,
            damage_taken_mult: 1.0,
        },
    );
    let mut d: DungeonDef = content.defs.dungeons["warden_keep"].clone();
    d.waves = vec![crate::sim::defs::WaveDef {
        delay: 0,
        spawns: vec![crate::sim::defs::SpawnDef {
            enemy: "bench_stress".into(),
            x: 480.0,
            y: 360.0,
            count: 1,
            spacing: 0.0,
        }],
    }];
    defs.dungeons.insert("bench_arena".into(), d);
    let mut emitters: BTreeMap<String, EmitterSource> = (*content.emitters).clone();
    emitters.insert(
        "bench_stress".into(),
        EmitterSource {
            id: "bench_stress".into(),
            mod_id: "bench".into(),
            path: "<bench>".into(),
            source: stress_emitter(bullets.div_ceil(100)),
        },
    );
    let defs = Arc::new(defs);
    let nanos = Arc::new(AtomicU64::new(0));
    use crate::content::host::{Isolation, ScriptHost};
    let inner: Arc<dyn ScriptFactory> = Arc::new(ScriptHost::new(&defs, Arc::new(emitters), Isolation::InProcess));
    let mut world = World::new(defs, Arc::new(TimedFactory { inner, nanos: nanos.clone() }), 2);
    for id in 1..=4 {
        world.add_player(id, "bot");
        world.enter_dungeon(id, "bench_arena");
    }
    let inst = world.instance_of(1).unwrap();
    let warm = 130;
    let mut tally = Tally::default();
    for k in 0..(warm + ticks) {
        if k == warm {
            nanos.store(0, Ordering::Relaxed);
        }
        let t = world.tick + 1;
        for id in 1..=4u32 {
            let _ = world.queue_input(id, InputFrame { tick: t, mv: drift(t, id), aim: -90.0, buttons: BTN_FIRE });
        }
        for p in world.instances.get_mut(&inst).unwrap().players.iter_mut() {
            p.hp = 100;
        }
        if k >= warm {
            tally.step(&mut world, inst);
        } else {
            world.step();
        }
    }
    let i = &world.instances[&inst];
    let players: Vec<(Vec2, f32)> =
        i.players.iter().map(|p| (p.pos, crate::sim::config::PLAYER_HITBOX_RADIUS)).collect();
    let four = [0, 1, 2, 3].map(|k| players.get(k).copied().unwrap_or((Vec2::new(-999.0, -999.0), 0.0)));
    let reference = reference_ns_per_bullet(&i.bullets, i.arena, &four, ticks.clamp(50, 400));
    let name = format!("(b) stress arena, {} bullets", group_digits(bullets as u64));
    (tally.result(&name, nanos.load(Ordering::Relaxed)), reference)
}

/// 100000 -> "100,000".
pub fn group_digits(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (k, c) in s.chars().enumerate() {
        if k > 0 && (s.len() - k).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// One row of the bullet scaling table: the stress tick against the reference loop.
#[derive(Debug, Clone)]
pub struct Scaling {
    pub bullets: f64,
    pub ms_per_tick: f64,
    pub ns_per_bullet: f64,
    pub reference_ns_per_bullet: f64,
}

impl Scaling {
    pub fn ratio(&self) -> f64 {
        self.ns_per_bullet / self.reference_ns_per_bullet.max(1e-9)
    }
}

impl std::fmt::Display for Scaling {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:>9} bullets: {:>8.4} ms/tick, {:>6.2} ns/bullet; reference loop {:>5.2} ns/bullet; ratio {:>5.2}",
            group_digits(self.bullets.round() as u64),
            self.ms_per_tick,
            self.ns_per_bullet,
            self.reference_ns_per_bullet,
            self.ratio()
        )
    }
}

/// The stress arena at each count in `counts`, each with its reference ratio (`ticks`
/// measured ticks, or 0 for [`stress_ticks`]).
pub fn scaling(content: &Content, counts: &[u32], ticks: u32, quick: bool) -> Vec<Scaling> {
    counts
        .iter()
        .map(|&n| {
            let t = if ticks == 0 { stress_ticks(n, quick) } else { ticks };
            let (r, reference) = stress_n(content, n, t);
            Scaling {
                bullets: r.mean_bullets,
                ms_per_tick: r.ms_per_tick,
                ns_per_bullet: r.ms_per_tick * 1e6 / r.mean_bullets.max(1.0),
                reference_ns_per_bullet: reference,
            }
        })
        .collect()
}

/// Seconds a lone player survives the Warden's opening phase, from arrival (spawn grace
/// included), standing still (`drifting = false`) or drifting aimlessly. Never fires, so
/// the boss stays in its first phase. `None` if it survived `limit_s`.
pub fn survival(content: &Content, drifting: bool, seed: u64, limit_s: u32) -> Option<f64> {
    let mut world = World::new(content.defs.clone(), content.script_factory(), seed);
    world.add_player(1, "target");
    let inst = world.enter_dungeon(1, "warden_keep")?;
    let defs = world.defs.clone();
    let mut ev = Vec::new();
    let tick = world.tick;
    world.instances.get_mut(&inst)?.start_boss(&defs, tick, &mut ev);
    let start = world.tick;
    let mut rng = Rng::new(seed);
    let mut dir = Vec2::ZERO;
    for _ in 0..limit_s * 60 {
        let t = world.tick + 1;
        if drifting && (t.is_multiple_of(30) || dir == Vec2::ZERO) {
            dir = Vec2::from_angle_deg(rng.next_f64() as f32 * 360.0);
        }
        let mv = if drifting { dir } else { Vec2::ZERO };
        let _ = world.queue_input(1, InputFrame { tick: t, mv, aim: -90.0, buttons: 0 });
        let died = world
            .step()
            .iter()
            .any(|e| matches!(e, SimEvent::Death { target: crate::sim::events::Target::Player(1), .. }));
        if died {
            return Some((world.tick - start) as f64 / 60.0);
        }
    }
    None
}

/// Mean survival over `seeds` runs (a run that outlives the limit counts as the limit).
pub fn mean_survival(content: &Content, drifting: bool, seeds: u64) -> f64 {
    let limit = 120;
    let sum: f64 = (0..seeds).map(|s| survival(content, drifting, 1000 + s, limit).unwrap_or(limit as f64)).sum();
    sum / seeds as f64
}

pub fn run_all(content: &Content, quick: bool) -> Vec<BenchResult> {
    vec![boss_fight(content, if quick { 200 } else { 1200 })]
}

/// Ticks measured for a stress arena of `bullets` (fewer for the largest).
pub fn stress_ticks(bullets: u32, quick: bool) -> u32 {
    let full = if bullets > 20_000 { 300 } else { 1800 };
    if quick {
        full / 6
    } else {
        full
    }
}

/// What a four-player boss fight costs on the network, per client.
#[derive(Debug, Clone)]
pub struct NetFight {
    pub transport: &'static str,
    pub events_every_ticks: u32,
    pub seconds: f64,
    pub down_kbs: f64,
    pub up_kbs: f64,
    /// ENet datagram bytes (headers, acks, resends), where the transport can tell.
    pub wire_down_kbs: Option<f64>,
    pub wire_up_kbs: Option<f64>,
    /// What sending every live bullet's position (2 x f32) in every snapshot would add.
    pub per_bullet_state_kbs: f64,
    /// Down payload per client in snapshots and in events (KB/s).
    pub snapshot_kbs: f64,
    pub events_kbs: f64,
    pub mean_bullets: f64,
    pub pred_err_mean: f64,
    pub pred_err_max: f32,
}

impl std::fmt::Display for NetFight {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "net, 4-player Warden fight over {} ({:.0} s, events every {} tick(s)): per client down {:.2} KB/s, up {:.2} KB/s",
            self.transport, self.seconds, self.events_every_ticks, self.down_kbs, self.up_kbs
        )?;
        if let (Some(d), Some(u)) = (self.wire_down_kbs, self.wire_up_kbs) {
            write!(f, " (on the wire with ENet overhead: down {d:.2}, up {u:.2})")?;
        }
        write!(f, " [snapshots {:.2}, events {:.2}]", self.snapshot_kbs, self.events_kbs)?;
        write!(
            f,
            "; bullets mean {:.0}; per-bullet state in snapshots would add {:.1} KB/s; prediction error mean {:.3} px, max {:.2} px",
            self.mean_bullets, self.per_bullet_state_kbs, self.pred_err_mean, self.pred_err_max
        )
    }
}

/// Four bot clients fight the Warden (every phase in turn, players kept alive), measured
/// from the moment the boss appears. `enet`: real ENet sockets on loopback, paced in real
/// time; otherwise the deterministic in-process stepper (payload bytes only).
pub fn net_fight(content: &Content, seconds: f64, enet: bool, events_every_ticks: u32) -> anyhow::Result<NetFight> {
    use crate::client::bot::{Brain, Plan};
    use crate::client::Client;
    use crate::net::{EnetTransport, LocalListener, Multi, Transport};
    use crate::server::{Server, ServerConfig};
    let listener = LocalListener::new();
    let (server_net, clients_net, label): (Box<dyn Transport>, Vec<Box<dyn Transport>>, &'static str) = if enet {
        let srv = EnetTransport::listen("127.0.0.1:0".parse()?, 8)?;
        let addr = srv.local_addr()?;
        let mut cs: Vec<Box<dyn Transport>> = Vec::new();
        for _ in 0..4 {
            cs.push(Box::new(EnetTransport::connect(addr)?));
        }
        (Box::new(Multi::new(vec![Box::new(srv)])), cs, "ENet on loopback")
    } else {
        let cs = (0..4).map(|_| Box::new(listener.connect()) as Box<dyn Transport>).collect();
        (Box::new(listener.server()), cs, "the in-process transport")
    };
    let mut server = Server::new(content, server_net, ServerConfig { events_every_ticks, ..Default::default() });
    let mut clients: Vec<(Client<Box<dyn Transport>>, Brain)> = clients_net
        .into_iter()
        .enumerate()
        .map(|(i, n)| {
            (
                Client::new(n, &format!("bot{i}"), Some(crate::protocol::content::ClientContent::of(content))),
                Brain::new(Plan::Dungeon, "warden_keep", 50 + i as u64),
            )
        })
        .collect();
    let defs = content.defs.clone();
    let start = Instant::now();
    let mut tick = 0u64;
    // (tick the boss appeared, payload and wire byte counters of each client then)
    type Start = (u64, Vec<(u64, u64)>, Vec<(u64, u64)>, Vec<[u64; 32]>);
    let mut fight: Option<Start> = None;
    let (mut hypo, mut bullets_sum, mut samples) = (0u64, 0u64, 0u64);
    let ticks_total = (seconds * 60.0) as u64;
    let phases: Vec<f32> = defs.bosses["warden"].phases.iter().map(|p| p.hp_threshold).collect();
    loop {
        tick += 1;
        let now = if enet { start.elapsed().as_secs_f64() * 1000.0 } else { tick as f64 * 1000.0 / 60.0 };
        for (c, b) in clients.iter_mut() {
            let i = b.think(c);
            c.update(now, i);
        }
        server.tick();
        let ids: Vec<u32> = clients.iter().filter_map(|(c, _)| c.player_id).collect();
        let inst = ids.first().and_then(|id| server.world.instance_of(*id));
        let together = ids.len() == 4
            && inst.is_some_and(|i| {
                i != server.world.hub && ids.iter().all(|id| server.world.instance_of(*id) == Some(i))
            });
        if let (true, Some(inst)) = (together, inst) {
            let w = &mut server.world;
            let d = w.defs.clone();
            let t = w.tick;
            let mut ev = Vec::new();
            let i = w.instances.get_mut(&inst).expect("instance");
            if fight.is_none() {
                i.start_boss(&d, t, &mut ev);
                let bytes =
                    clients.iter().map(|(c, _)| (c.net.stats(0).bytes_sent, c.net.stats(0).bytes_received)).collect();
                let wire = clients.iter().map(|(c, _)| c.net.wire_totals().unwrap_or_default()).collect();
                let kinds = clients.iter().map(|(c, _)| c.stats.bytes_by_type).collect();
                fight = Some((tick, bytes, wire, kinds));
            }
            let (t0, _, _, _) = fight.as_ref().expect("set");
            let phase =
                (((tick - t0) as f64 / (ticks_total as f64 / phases.len() as f64)) as usize).min(phases.len() - 1);
            i.force_boss_hp(&d, phases[phase] - 0.01, &mut ev);
            for p in i.players.iter_mut() {
                p.hp = 100;
            }
            if server.world.tick.is_multiple_of(crate::protocol::SNAPSHOT_EVERY_TICKS) {
                let n = server.world.instances[&inst].bullets.len() as u64;
                hypo += n * 8;
                bullets_sum += n;
                samples += 1;
            }
        }
        if fight.as_ref().is_some_and(|(t0, _, _, _)| tick - t0 >= ticks_total) {
            break;
        }
        if tick > ticks_total + 60 * 60 {
            anyhow::bail!("the bots never got into the dungeon together");
        }
        if enet {
            let due = std::time::Duration::from_secs_f64(tick as f64 / 60.0);
            if let Some(wait) = due.checked_sub(start.elapsed()) {
                std::thread::sleep(wait);
            }
        }
    }
    let (_, b0, w0, k0) = fight.expect("fight happened");
    let secs = seconds;
    let n = clients.len() as f64;
    let (mut up, mut down, mut wup, mut wdown) = (0u64, 0u64, 0u64, 0u64);
    let (mut err_sum, mut err_max) = (0f64, 0f32);
    let (mut snap_bytes, mut event_bytes) = (0u64, 0u64);
    for (k, (c, _)) in clients.iter().enumerate() {
        let by = &c.stats.bytes_by_type;
        snap_bytes +=
            by[crate::protocol::messages::T_SNAPSHOT as usize] - k0[k][crate::protocol::messages::T_SNAPSHOT as usize];
        event_bytes +=
            by[crate::protocol::messages::T_EVENTS as usize] - k0[k][crate::protocol::messages::T_EVENTS as usize];
        let s = c.net.stats(0);
        up += s.bytes_sent - b0[k].0;
        down += s.bytes_received - b0[k].1;
        if let Some((u, d)) = c.net.wire_totals() {
            wup += u - w0[k].0;
            wdown += d - w0[k].1;
        }
        err_sum += c.stats.pred_err_mean();
        err_max = err_max.max(c.stats.pred_err_max);
    }
    let kbs = |b: u64| b as f64 / n / secs / 1024.0;
    Ok(NetFight {
        transport: label,
        events_every_ticks,
        seconds: secs,
        down_kbs: kbs(down),
        up_kbs: kbs(up),
        wire_down_kbs: enet.then(|| kbs(wdown)),
        wire_up_kbs: enet.then(|| kbs(wup)),
        per_bullet_state_kbs: hypo as f64 / secs / 1024.0,
        snapshot_kbs: kbs(snap_bytes),
        events_kbs: kbs(event_bytes),
        mean_bullets: bullets_sum as f64 / samples.max(1) as f64,
        pred_err_mean: err_sum / n,
        pred_err_max: err_max,
    })
}

#[cfg(feature = "desktop")]
/// What a frame costs with 10,000 live bullets.
#[derive(Debug, Clone)]
pub struct RenderBench {
    pub bullets: usize,
    /// CPU time to turn the world into sprites (scene building), per frame.
    pub prep_ms: f64,
    /// The same once bullets have died out of uid order (the slots are shuffled and the
    /// sprites are put back in age order by a sort).
    pub prep_shuffled_ms: f64,
    /// Sprite upload + draw + GPU wait per frame at the given size (no readback), with
    /// all effects (floor pattern, vignette, bodies, glow pass), with "Low effects", and
    /// with the flat reference (`scene::flat_reference`: the look before themes, bodies
    /// and the glow pass).
    pub frame_ms: Option<[f64; 3]>,
    pub first_frame_ms: Option<f64>,
    pub adapter: String,
    pub size: (u32, u32),
}

#[cfg(feature = "desktop")]
impl std::fmt::Display for RenderBench {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "render, {} bullets: frame preparation on the CPU {:.3} ms ({:.3} ms once bullets died out of order)",
            self.bullets, self.prep_ms, self.prep_shuffled_ms
        )?;
        match (self.frame_ms, self.first_frame_ms) {
            (Some([all, low, flat]), Some(first)) => write!(
                f,
                "\nframe at {}x{} on {} (first frame {:.0} ms): all effects {:.2} ms ({:.0} fps), low effects {:.2} ms, flat reference {:.2} ms; all / flat {:.2}x (target <= 1.5), low / flat {:.2}x (target <= 1.1)",
                self.size.0,
                self.size.1,
                self.adapter,
                first,
                all,
                1000.0 / all,
                low,
                flat,
                all / flat,
                low / flat
            ),
            _ => write!(f, "; no GPU adapter: {}", self.adapter),
        }
    }
}

#[cfg(feature = "desktop")]
pub fn render_bench(content: &Content, frames: u32) -> RenderBench {
    use crate::app::render::{scene, Camera, Gpu, Renderer};
    use crate::sim::bullets::{BulletPool, BulletSpawn, Team};
    let arena = Vec2::new(960.0, 720.0);
    let mut pool = BulletPool::new();
    let mut rng = Rng::new(3);
    let kinds = content.defs.bullets.len().max(1) as u16;
    for uid in 0..10_000u32 {
        let s = BulletSpawn {
            uid,
            pos: Vec2::new(rng.next_f64() as f32 * arena.x, rng.next_f64() as f32 * arena.y),
            angle: rng.next_f64() as f32 * 360.0,
            speed: 2.0,
            radius: 4.0 + rng.next_f64() as f32 * 4.0,
            lifetime: 600,
            kind: (uid % kinds as u32) as u16,
            team: if uid % 10 == 0 { Team::Player } else { Team::Enemy },
            accel: 0.0,
            turn: 0.0,
            max_speed: f32::INFINITY,
            tick: 0,
        };
        pool.spawn(&s, 0);
    }
    let palette = scene::Palette::new(&crate::sim::ClientDefs::from_defs(&content.defs));
    let players = [crate::protocol::messages::SnapPlayer {
        id: 1,
        pos: Vec2::new(480.0, 600.0),
        hp: 100,
        flags: 0,
        escape: 0,
        aim: 192,
    }];
    let theme = content.defs.dungeons.get("warden_keep").map(|d| d.theme.clone()).unwrap_or_default();
    // A fight's bodies: a dozen enemies of every kind and a boss.
    let looks = crate::sim::ClientDefs::from_defs(&content.defs);
    let enemies: Vec<crate::protocol::messages::SnapEnemy> = (0..12u32)
        .map(|k| crate::protocol::messages::SnapEnemy {
            id: k,
            def: (k as usize % looks.enemies.len().max(1)) as u16,
            pos: Vec2::new(80.0 + k as f32 * 70.0, 120.0 + (k % 3) as f32 * 90.0),
            hp: 50,
        })
        .collect();
    let enemy_r: Vec<f32> = looks.enemies.iter().map(|e| e.radius).collect();
    let boss_r: Vec<f32> = looks.bosses.iter().map(|b| b.radius).collect();
    let boss = (!looks.bosses.is_empty()).then_some(crate::protocol::messages::SnapBoss {
        def: 0,
        pos: Vec2::new(480.0, 160.0),
        hp: 500,
        max_hp: 1000,
        phase: 1,
    });
    let view = scene::WorldView {
        theme: &theme,
        arena,
        bullets: &pool,
        alpha: 0.5,
        players: &players,
        own_id: Some(1),
        own_pos: None,
        own_aim: None,
        enemies: &enemies,
        enemy_radius: &enemy_r,
        boss,
        boss_radius: &boss_r,
        portals: &[],
        portal_radius: 28.0,
        flashes: &[],
        bursts: &[],
        flares: &[],
        telegraphs: &[],
        time: 0.0,
        sparks: &[],
        ships: &[],
    };
    let mut sprites = Vec::new();
    scene::build(&view, &palette, &mut sprites);
    let n = 300;
    let t = Instant::now();
    for _ in 0..n {
        scene::build(&view, &palette, &mut sprites);
    }
    let prep_ms = t.elapsed().as_secs_f64() * 1000.0 / n as f64;
    // Every seventh bullet gone (as hits and walls remove them): slots refilled out of order.
    let mut shuffled = pool.clone();
    for uid in (0..10_000u32).step_by(7) {
        shuffled.despawn(uid);
    }
    let view_shuffled = scene::WorldView { bullets: &shuffled, ..view };
    let mut other = Vec::new();
    let t = Instant::now();
    for _ in 0..n {
        scene::build(&view_shuffled, &palette, &mut other);
    }
    let prep_shuffled_ms = t.elapsed().as_secs_f64() * 1000.0 / n as f64;
    let size = (1280, 720);
    let (frame_ms, first_frame_ms, adapter) = match Gpu::headless() {
        Err(e) => (None, None, format!("{e:#}")),
        Ok(gpu) => {
            let mut r = Renderer::new(&gpu.device, wgpu::TextureFormat::Rgba8UnormSrgb);
            let tex = crate::app::render::target_texture(&gpu, r.format, size, wgpu::TextureUsages::empty());
            let view = tex.create_view(&Default::default());
            let all_cam = Camera::fit(arena, size, 0.0);
            let mut low = sprites.clone();
            scene::apply_look(&mut low, true, false);
            let low_cam = Camera { bloom: 0.0, ..all_cam };
            let flat = scene::flat_reference(&sprites);
            let mut one = |cam: &Camera, sprites: &[scene::Sprite]| {
                let t = Instant::now();
                let cmd = r.render(&gpu, &view, size, cam, sprites, None);
                gpu.queue.submit([cmd]);
                let _ = gpu.device.poll(wgpu::PollType::Wait { submission_index: None, timeout: None });
                t.elapsed().as_secs_f64() * 1000.0
            };
            let first = one(&all_cam, &sprites);
            // Interleaved, so a slow spell of the machine hits all three alike.
            let mut ms = [0.0f64; 3];
            for _ in 0..frames {
                ms[0] += one(&all_cam, &sprites);
                ms[1] += one(&low_cam, &low);
                ms[2] += one(&low_cam, &flat);
            }
            (Some(ms.map(|t| t / frames as f64)), Some(first), gpu.adapter_name())
        }
    };
    RenderBench { bullets: pool.len(), prep_ms, prep_shuffled_ms, frame_ms, first_frame_ms, adapter, size }
}

/// One join measured over real ENet on loopback.
pub struct JoinBench {
    pub label: String,
    /// Client-side content: encoded and deflated sizes, bytes.
    pub raw: usize,
    pub packed: usize,
    /// Bytes the client received on the wire (ENet framing included) until it was in.
    pub wire_down: u64,
    pub wire_up: u64,
    /// From the connect call to `Welcome`, ms.
    pub ms: f64,
    pub from_cache: bool,
}

impl std::fmt::Display for JoinBench {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "join, {}: content {} bytes ({} deflated) | {:.1} KB down, {:.1} KB up on the wire | {:.0} ms to Welcome{}",
            self.label,
            self.raw,
            self.packed,
            self.wire_down as f64 / 1024.0,
            self.wire_up as f64 / 1024.0,
            self.ms,
            if self.from_cache { " (content from the cache)" } else { "" }
        )
    }
}

/// Joins a server running `content` from a client that has `installed` (None: nothing)
/// and the given cache, over ENet on loopback in real time; the server ticks at 60 Hz.
pub fn join_once(
    content: &Content,
    label: &str,
    installed: Option<crate::protocol::content::ClientContent>,
    cache: Option<crate::protocol::content::ContentCache>,
) -> anyhow::Result<JoinBench> {
    use crate::client::Client;
    use crate::net::{EnetTransport, Transport};
    use crate::server::{Server, ServerConfig};
    let srv = EnetTransport::listen("127.0.0.1:0".parse()?, 4)?;
    let addr = srv.local_addr()?;
    let mut server = Server::new(content, srv, ServerConfig::default());
    let net = EnetTransport::connect(addr)?;
    let start = Instant::now();
    let mut client = Client::new(Box::new(net) as Box<dyn Transport>, "bench", installed).with_cache(cache);
    let period = std::time::Duration::from_secs_f64(1.0 / 60.0);
    let mut next = start;
    while !client.is_joined() && client.player_id.is_none() {
        client.update(start.elapsed().as_secs_f64() * 1000.0, Default::default());
        if let crate::client::Phase::Failed(why) = &client.phase {
            anyhow::bail!("join failed: {why}");
        }
        server.tick();
        anyhow::ensure!(start.elapsed().as_secs() < 60, "join did not finish in 60 s");
        next += period;
        if let Some(d) = next.checked_duration_since(Instant::now()) {
            std::thread::sleep(d);
        }
    }
    let ms = start.elapsed().as_secs_f64() * 1000.0;
    let (up, down) = client.net.wire_totals().unwrap_or((0, 0));
    Ok(JoinBench {
        label: label.to_string(),
        raw: server.content.encoded.len(),
        packed: server.content.packed().len(),
        wire_down: down,
        wire_up: up,
        ms,
        from_cache: client.stats.content_from_cache,
    })
}

/// Join cost with the base content and with a large generated mod, each cold (nothing
/// installed, empty cache) and cached, plus the base content already installed.
pub fn join_bench() -> anyhow::Result<Vec<JoinBench>> {
    use crate::protocol::content::{ClientContent, ContentCache};
    let tmp = std::env::temp_dir().join(format!("hailfire-join-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let base = crate::content::load(&[crate::content::ModRoot::Mod(crate::content::content_dir())]);
    let big_dir = crate::content::sample::write_mod(&tmp.join("mods"), "big", 1500)?;
    let big = crate::content::load(&[
        crate::content::ModRoot::Mod(crate::content::content_dir()),
        crate::content::ModRoot::Mod(big_dir),
    ]);
    anyhow::ensure!(big.errors().next().is_none(), "generated mod failed to load");
    let cache = ContentCache::new(tmp.join("cache"));
    let mut out = vec![join_once(&base, "base content, installed", Some(ClientContent::of(&base)), None)?];
    out.push(join_once(&base, "base content, cold", None, Some(cache.clone()))?);
    out.push(join_once(&base, "base content, cached", None, Some(cache.clone()))?);
    out.push(join_once(&big, "large mod (1,500 extra kinds and enemies), cold", None, Some(cache.clone()))?);
    out.push(join_once(&big, "large mod, cached", None, Some(cache))?);
    let _ = std::fs::remove_dir_all(&tmp);
    Ok(out)
}

/// What one emitter pattern costs on the network: the events (spawns, bursts, hits) one
/// idle, immortal player receives while a boss phase fires at it.
#[derive(Debug, Clone)]
pub struct PatternCost {
    pub name: String,
    pub seconds: f64,
    /// Bullets the pattern created per second.
    pub bullets_per_s: f64,
    /// Event payload down per client, KB/s (what the pattern adds to a client's traffic).
    pub events_kbs: f64,
    /// Event payload per bullet, bytes.
    pub bytes_per_bullet: f64,
}

impl std::fmt::Display for PatternCost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "pattern {}: {:.0} bullets/s cost {:.2} KB/s of events per client ({:.2} bytes per bullet)",
            self.name, self.bullets_per_s, self.events_kbs, self.bytes_per_bullet
        )
    }
}

/// One idle player in `dungeon` while its boss holds phase `phase` for `seconds`
/// (in-process, so the figure is the game payload, not ENet's or the secure layer's).
pub fn pattern_cost(
    content: &Content,
    dungeon: &str,
    phase: usize,
    seconds: f64,
    name: &str,
) -> anyhow::Result<PatternCost> {
    use crate::client::{Client, InputSample};
    use crate::net::{LocalListener, Transport};
    use crate::server::{Server, ServerConfig};
    let boss = content
        .defs
        .dungeons
        .get(dungeon)
        .map(|d| d.boss.clone())
        .ok_or_else(|| anyhow::anyhow!("no dungeon '{dungeon}'"))?;
    let threshold = content.defs.bosses[&boss].phases.get(phase).map_or(1.0, |p| p.hp_threshold);
    let listener = LocalListener::new();
    let mut server = Server::new(content, Box::new(listener.server()) as Box<dyn Transport>, ServerConfig::default());
    let installed = crate::protocol::content::ClientContent::of(content);
    let mut client = Client::new(Box::new(listener.connect()) as Box<dyn Transport>, "idle", Some(installed));
    let mut tick = 0u64;
    let mut step = |server: &mut Server<Box<dyn Transport>>, client: &mut Client<Box<dyn Transport>>| {
        tick += 1;
        client.update(tick as f64 * 1000.0 / 60.0, InputSample::default());
        server.tick();
    };
    for _ in 0..30 {
        step(&mut server, &mut client);
    }
    let id = client.player_id.ok_or_else(|| anyhow::anyhow!("the client did not join"))?;
    let inst = server.world.enter_dungeon(id, dungeon).ok_or_else(|| anyhow::anyhow!("no dungeon '{dungeon}'"))?;
    for _ in 0..10 {
        step(&mut server, &mut client);
    }
    let defs = server.world.defs.clone();
    let t = server.world.tick;
    let mut ev = Vec::new();
    server.world.instances.get_mut(&inst).expect("instance").start_boss(&defs, t, &mut ev);
    let ticks = (seconds * 60.0) as u64;
    let (mut bytes0, mut uid0) = (0u64, 0u32);
    let gone = |k: u64| {
        anyhow::anyhow!("the fight in {dungeon} (boss phase {}) ended after {:.1} s", phase + 1, k as f64 / 60.0)
    };
    for k in 0..ticks + 120 {
        if k == 120 {
            bytes0 = client.stats.bytes_by_type[crate::protocol::messages::T_EVENTS as usize];
            uid0 = server.world.instances.get(&inst).ok_or_else(|| gone(k))?.next_uid();
        }
        if let Some(i) = server.world.instances.get_mut(&inst) {
            i.force_boss_hp(&defs, threshold - 0.01, &mut ev);
            for p in i.players.iter_mut() {
                p.hp = 100;
            }
        }
        step(&mut server, &mut client);
    }
    let bytes = client.stats.bytes_by_type[crate::protocol::messages::T_EVENTS as usize] - bytes0;
    let bullets =
        server.world.instances.get(&inst).ok_or_else(|| gone(ticks + 120))?.next_uid().wrapping_sub(uid0) as f64;
    Ok(PatternCost {
        name: name.to_string(),
        seconds,
        bullets_per_s: bullets / seconds,
        events_kbs: bytes as f64 / seconds / 1024.0,
        bytes_per_bullet: bytes as f64 / bullets.max(1.0),
    })
}

/// The densest shipped pattern (every boss phase of every dungeon, the most event bytes),
/// and a stress pattern of 100 bullets every tick, fired as one ring and as 100 shots.
pub fn pattern_costs(content: &Content, seconds: f64) -> anyhow::Result<Vec<PatternCost>> {
    let mut densest: Option<PatternCost> = None;
    for (id, d) in &content.defs.dungeons {
        let boss = &d.boss;
        for (k, ph) in content.defs.bosses[boss].phases.iter().enumerate() {
            // A phase whose fight cannot be held (it ends by itself) is left out, said.
            let c = match pattern_cost(
                content,
                id,
                k,
                seconds,
                &format!("{boss} phase {} \"{}\" (densest shipped)", k + 1, ph.name),
            ) {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("bench: left out: {e}");
                    continue;
                }
            };
            if densest.as_ref().is_none_or(|b| c.events_kbs > b.events_kbs) {
                densest = Some(c);
            }
        }
    }
    let mut out: Vec<PatternCost> = densest.into_iter().collect();
    let dir = tempfile_dir()?;
    for (name, script) in [
        (
            "stress: a 100-bullet ring every tick",
            "while true do\n  ring{n = 100, speed = 2.5, angle = tick() * 3.7, kind = \"stress_needle\", lifetime = 120}\n  wait(1)\nend\n",
        ),
        (
            "stress: 100 single shots every tick",
            "while true do\n  for k = 1, 100 do\n    shot{angle = rand(0, 360), speed = rand(1.5, 3.5), kind = \"stress_needle\", lifetime = 120}\n  end\n  wait(1)\nend\n",
        ),
    ] {
        let m = crate::content::sample::write_mod(&dir, "stress", 0)?;
        std::fs::write(m.join("emitters/stress_needles.lua"), script)?;
        let c = crate::content::load(&[
            crate::content::ModRoot::Mod(crate::content::content_dir()),
            crate::content::ModRoot::Mod(m),
        ]);
        if let Some(e) = c.errors().next() {
            anyhow::bail!("stress mod: {e}");
        }
        out.push(pattern_cost(&c, "stress_pit", 0, seconds, name)?);
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(out)
}

fn tempfile_dir() -> std::io::Result<std::path::PathBuf> {
    let d = std::env::temp_dir().join(format!("hailfire-bench-{}", std::process::id()));
    std::fs::create_dir_all(&d)?;
    Ok(d)
}

/// `hailfire bench --instances N`: N concurrent Warden fights of four scripted players each
/// in one world, on 1, 2, 4 … `threads` simulation threads.
#[derive(Debug, Clone)]
pub struct InstancesBench {
    pub instances: usize,
    pub threads: usize,
    pub ticks: u32,
    pub ms_per_tick: f64,
    /// Share of the tick's CPU time spent in Lua (summed over threads).
    pub lua_share: f64,
    pub mean_bullets: f64,
    /// Resident memory the fights added, per instance (Linux; None elsewhere).
    pub kib_per_instance: Option<f64>,
    /// How much faster than the same fights on one thread.
    pub speedup: f64,
    /// Every script (the base game's too) ran in worker processes, one per fight.
    pub workers: bool,
    /// Opening a fight and starting its boss (with `workers`, starting its worker), ms.
    pub open_ms_per_fight: f64,
}

impl std::fmt::Display for InstancesBench {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} Warden fights ({} players){}, {} thread{}: {:.3} ms/tick ({:.2} µs per fight, {:.0} % of the 16.7 ms budget; Lua {:.0} %; {:.0} bullets per fight; x{:.2} of one thread)",
            self.instances,
            self.instances * 4,
            if self.workers { ", scripts in worker processes" } else { "" },
            self.threads,
            if self.threads == 1 { "" } else { "s" },
            self.ms_per_tick,
            self.ms_per_tick * 1000.0 / self.instances.max(1) as f64,
            self.ms_per_tick / (1000.0 / 60.0) * 100.0,
            self.lua_share * 100.0,
            self.mean_bullets,
            self.speedup
        )?;
        if self.workers {
            write!(f, "; a fight and its worker start in {:.2} ms", self.open_ms_per_fight)?;
        }
        if let Some(k) = self.kib_per_instance {
            let whose = if self.workers { " with its worker (proportional set size)" } else { "" };
            write!(f, "; memory {k:.0} KiB per fight{whose} ({:.0} MiB in all)", k * self.instances as f64 / 1024.0)?;
        }
        Ok(())
    }
}

/// A process's resident memory, KiB (Linux).
fn rss_kib(pid: &str) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines().find(|l| l.starts_with("VmRSS:"))?.split_whitespace().nth(1)?.parse().ok()
}

/// A process's proportional set size, KiB (Linux): its own memory plus its share of the
/// pages it maps with others (every worker maps the same executable).
fn pss_kib(pid: &str) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok()?;
    s.lines().find(|l| l.starts_with("Pss:"))?.split_whitespace().nth(1)?.parse().ok()
}

/// This process's resident memory and its children's (script workers, by their
/// proportional set size), KiB (Linux).
fn own_rss_kib() -> Option<u64> {
    let mut total = rss_kib("self")?;
    for task in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let kids = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        total += kids.split_whitespace().filter_map(|p| pss_kib(p).or_else(|| rss_kib(p))).sum::<u64>();
    }
    Some(total)
}

/// N Warden fights in one world, every boss phase in turn, the players firing and kept
/// alive; measured on 1, 2, 4 … `threads` threads, each on a fresh world (the same fights,
/// so the same work).
/// Most fights `bench --instances` runs with their scripts in workers (one process each).
pub const WORKER_FIGHTS: u32 = 100;

/// With `workers`, every script (the base game's too) runs in worker processes, one per
/// fight, as an untrusted mod's would: the cost of the worker path.
pub fn instances(content: &Content, n: u32, threads: usize, quick: bool, workers: bool) -> Vec<InstancesBench> {
    let nanos = Arc::new(AtomicU64::new(0));
    let players = n * 4;
    let scripts: Arc<dyn ScriptFactory> = if workers {
        use crate::content::host::{Isolation, ScriptHost};
        let isolation = Isolation::Workers { exe: crate::content::worker::worker_exe(), trusted: Default::default() };
        Arc::new(ScriptHost::new(&content.defs, content.emitters.clone(), isolation))
    } else {
        content.script_factory_in_process()
    };
    let build = || {
        let factory = Arc::new(TimedFactory { inner: scripts.clone(), nanos: nanos.clone() });
        let mut world = World::new(content.defs.clone(), factory, 3);
        for id in 1..=players {
            world.add_player(id, "bot");
            world.enter_dungeon(id, "warden_keep");
        }
        let defs = world.defs.clone();
        let fights: Vec<crate::sim::InstanceId> = world.instances.keys().copied().filter(|i| *i != world.hub).collect();
        let t0 = world.tick;
        for i in &fights {
            world.instances.get_mut(i).expect("fight").start_boss(&defs, t0, &mut Vec::new());
        }
        (world, fights)
    };
    let defs = content.defs.clone();
    let phases: Vec<f32> = defs.bosses["warden"].phases.iter().map(|p| p.hp_threshold).collect();
    let ticks = if quick { 60 } else { 300 };
    let step = |world: &mut World, fights: &[crate::sim::InstanceId], k: u32| -> (u128, u64) {
        let t = world.tick + 1;
        let frac = phases[(k as usize * phases.len() / ticks as usize).min(phases.len() - 1)];
        for id in 1..=players {
            let _ = world.queue_input(id, InputFrame { tick: t, mv: drift(t, id), aim: -90.0, buttons: BTN_FIRE });
        }
        let mut bullets = 0;
        for i in fights {
            if let Some(inst) = world.instances.get_mut(i) {
                inst.force_boss_hp(&defs, frac - 0.01, &mut Vec::new());
                inst.players.iter_mut().for_each(|p| p.hp = 100);
                bullets += inst.bullets.len() as u64;
            }
        }
        let start = Instant::now();
        world.step();
        (start.elapsed().as_nanos(), bullets)
    };
    let mut counts = vec![1];
    while counts.last().is_some_and(|&c| c * 2 <= threads) {
        counts.push(counts.last().copied().unwrap_or(1) * 2);
    }
    if counts.last() != Some(&threads) && threads > 1 {
        counts.push(threads);
    }
    let mut out: Vec<InstancesBench> = Vec::new();
    let mut kib = None;
    for t in counts {
        let before = own_rss_kib();
        let built = Instant::now();
        let (mut world, fights) = build();
        let build_ms = built.elapsed().as_secs_f64() * 1000.0 / fights.len().max(1) as f64;
        if world.set_threads(t).is_err() {
            break;
        }
        world.set_parallel_from_us(0);
        // Warm up: every fight's scripts running, the first bullets in the air.
        for k in 0..60 {
            step(&mut world, &fights, k);
        }
        if kib.is_none() {
            kib = before.zip(own_rss_kib()).map(|(b, a)| a.saturating_sub(b) as f64 / fights.len().max(1) as f64);
        }
        nanos.store(0, Ordering::Relaxed);
        let (mut wall, mut bullets) = (0u128, 0u64);
        for k in 0..ticks {
            let (w, b) = step(&mut world, &fights, k);
            wall += w;
            bullets += b;
        }
        let ms = wall as f64 / ticks as f64 / 1e6;
        let one = out.first().map_or(ms, |r| r.ms_per_tick);
        out.push(InstancesBench {
            instances: fights.len(),
            threads: t,
            ticks,
            ms_per_tick: ms,
            lua_share: nanos.load(Ordering::Relaxed) as f64 / (wall as f64 * t as f64).max(1.0),
            mean_bullets: bullets as f64 / ticks as f64 / fights.len().max(1) as f64,
            kib_per_instance: kib,
            speedup: one / ms.max(1e-12),
            workers,
            open_ms_per_fight: build_ms,
        });
    }
    out
}

/// One row of the balance bench: a dungeon played by one setup of bots, several runs.
#[derive(Debug, Clone)]
pub struct BalanceRow {
    pub dungeon: String,
    /// "1 drifting", "1 dodging", "2 dodging", "4 dodging".
    pub setup: String,
    pub runs: u32,
    pub cleared: u32,
    /// Median seconds from arriving to the first death among the bots (the run's length
    /// when nobody died; a drifting bot's run ends at its death or after `limit_s`).
    pub median_survival_s: f64,
    /// The shortest of those.
    pub min_survival_s: f64,
    /// Mean seconds each boss phase lasted, over the runs that reached it.
    pub phase_s: Vec<Option<f64>>,
}

impl std::fmt::Display for BalanceRow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let phases: Vec<String> =
            self.phase_s.iter().map(|p| p.map_or("-".to_string(), |s| format!("{s:.0} s"))).collect();
        write!(
            f,
            "{:<17} {:<10} cleared {:>2}/{:<2} ({:>3.0} %)  survival median {:>5.1} s, shortest {:>5.1} s  boss phases: {}",
            self.dungeon,
            self.setup,
            self.cleared,
            self.runs,
            100.0 * self.cleared as f64 / self.runs.max(1) as f64,
            self.median_survival_s,
            self.min_survival_s,
            phases.join(", ")
        )
    }
}

/// What one bench run saw.
pub struct BalanceRun {
    pub cleared: bool,
    pub survival_s: f64,
    /// (phase index, seconds it lasted)
    pub phases: Vec<(usize, f64)>,
}

/// Plays `dungeon` once with `bots` bots of `plan` (real server, real clients, in process,
/// one seed), for at most `limit_s` seconds of game time.
pub fn balance_run(
    content: &Content,
    dungeon: &str,
    plan: crate::client::bot::Plan,
    bots: usize,
    seed: u64,
    limit_s: f64,
) -> BalanceRun {
    use crate::client::bot::{Brain, Plan};
    use crate::protocol::messages::F_DEAD;
    use crate::stepper::Stepper;
    let config = crate::server::ServerConfig { seed, ..Default::default() };
    let mut st = Stepper::new(content.clone(), config);
    let mut brains: Vec<Brain> = (0..bots)
        .map(|i| {
            st.add_client(&format!("bot{i}"), crate::net::LinkProfile::CLEAN);
            Brain::new(plan, dungeon, seed * 31 + i as u64)
        })
        .collect();
    let (mut arrived, mut first_death): (Option<u64>, Option<u64>) = (None, None);
    let mut phase: Option<(usize, u64)> = None;
    let mut phases = Vec::new();
    let limit = (limit_s * crate::sim::TICK_RATE as f64) as u64;
    let mut cleared = false;
    let secs = |t: u64| t as f64 / crate::sim::TICK_RATE as f64;
    while st.ticks < limit + arrived.unwrap_or(0) {
        st.step(|i, c| brains[i].think(c));
        let here = st.clients.iter().any(|c| c.view.as_ref().is_some_and(|v| v.dungeon == dungeon));
        if here && arrived.is_none() {
            arrived = Some(st.ticks);
        }
        if arrived.is_none() {
            if st.ticks > 60 * crate::sim::TICK_RATE as u64 {
                break; // never got in
            }
            continue;
        }
        let in_fight = |c: &crate::stepper::DynClient| c.view.as_ref().is_some_and(|v| v.dungeon == dungeon);
        if first_death.is_none()
            && st.clients.iter().any(|c| in_fight(c) && c.own_state().is_some_and(|o| o.flags & F_DEAD != 0))
        {
            first_death = Some(st.ticks);
            if plan == Plan::Dungeon {
                break;
            }
        }
        let now_phase =
            st.clients[0].view.as_ref().and_then(|v| v.latest()).and_then(|s| s.boss).map(|b| b.phase as usize);
        if let Some(p) = now_phase {
            match phase {
                Some((q, at)) if q != p => {
                    phases.push((q, secs(st.ticks - at)));
                    phase = Some((p, st.ticks));
                }
                None => phase = Some((p, st.ticks)),
                _ => {}
            }
        }
        // A dodging run ends with its summary.
        if let Some(s) = st.clients.iter().find_map(|c| c.summaries.last()) {
            cleared = s.outcome == crate::sim::events::RunOutcome::Cleared;
            if cleared {
                if let Some((q, at)) = phase.take() {
                    phases.push((q, secs(st.ticks - at)));
                }
            }
            break;
        }
    }
    let start = arrived.unwrap_or(st.ticks);
    BalanceRun { cleared, survival_s: secs(first_death.unwrap_or(st.ticks).saturating_sub(start)), phases }
}

/// The balance bench: every dungeon (or `only`), each played by one drifting bot, one, two
/// and four dodging bots, `runs` times each with seeds 1..=runs.
pub fn balance_bench(content: &Content, only: Option<&str>, runs: u32, quick: bool) -> Vec<BalanceRow> {
    use crate::client::bot::Plan;
    let mut dungeons: Vec<(&String, &crate::sim::defs::DungeonDef)> = content.defs.dungeons.iter().collect();
    dungeons.sort_by_key(|(id, d)| (d.difficulty, (*id).clone()));
    let mut rows = Vec::new();
    let limit = if quick { 240.0 } else { 420.0 };
    for (id, def) in dungeons.into_iter().filter(|(id, _)| only.is_none_or(|o| o == id.as_str())) {
        let n_phases = content.defs.bosses.get(&def.boss).map_or(0, |b| b.phases.len());
        for (setup, plan, bots, limit_s) in [
            ("1 drifting", Plan::Dungeon, 1, 60.0),
            ("1 dodging", Plan::Dodge, 1, limit),
            ("2 dodging", Plan::Dodge, 2, limit),
            ("4 dodging", Plan::Dodge, 4, limit),
        ] {
            let results: Vec<BalanceRun> =
                (1..=runs as u64).map(|seed| balance_run(content, id, plan, bots, seed, limit_s)).collect();
            let mut surv: Vec<f64> = results.iter().map(|r| r.survival_s).collect();
            surv.sort_by(f64::total_cmp);
            let phase_s = (0..n_phases)
                .map(|p| {
                    let d: Vec<f64> = results
                        .iter()
                        .flat_map(|r| r.phases.iter().filter(|(q, _)| *q == p).map(|(_, s)| *s))
                        .collect();
                    (!d.is_empty()).then(|| d.iter().sum::<f64>() / d.len() as f64)
                })
                .collect();
            rows.push(BalanceRow {
                dungeon: id.clone(),
                setup: setup.to_string(),
                runs,
                cleared: results.iter().filter(|r| r.cleared).count() as u32,
                median_survival_s: surv.get(surv.len() / 2).copied().unwrap_or(0.0),
                min_survival_s: surv.first().copied().unwrap_or(0.0),
                phase_s,
            });
        }
    }
    rows
}

/// What the lag compensation bench measured (one link, with or without compensation).
#[derive(Clone, Debug)]
pub struct LagCompResult {
    pub link: crate::net::LinkProfile,
    pub compensate: bool,
    pub seconds: f64,
    /// Shots fired, shots that met the target on the shooter's screen, and of those, the
    /// ones the server counted as hits.
    pub shots: usize,
    pub screen_hits: usize,
    pub confirmed: usize,
    /// Server hits the shooter's screen never showed (the other way of being wrong).
    pub unseen: usize,
    /// The view delay the client reported at the end, quarter ticks.
    pub view_delay: u8,
}

impl std::fmt::Display for LagCompResult {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let share = if self.screen_hits == 0 { 0.0 } else { 100.0 * self.confirmed as f64 / self.screen_hits as f64 };
        write!(
            f,
            "lag compensation {:<3} on {:.0} ms / {:.0} ms / {:.0} %: {} shots in {:.0} s, {} hit on screen, {} of those on the server ({:.1} %), {} server hits not seen on screen; view delay {:.2} ticks",
            if self.compensate { "on" } else { "off" },
            self.link.rtt_ms,
            self.link.jitter_ms,
            self.link.loss * 100.0,
            self.shots,
            self.seconds,
            self.screen_hits,
            self.confirmed,
            share,
            self.unseen,
            self.view_delay as f32 / crate::sim::config::VIEW_STEPS_PER_TICK as f32
        )
    }
}

/// One bot on `link` in the hub (nothing else to hit there, and nothing dies) shoots at a
/// training dummy the bench moves along a circle at 3 px a tick (180 px/s), aiming with
/// lead at where its replica shows the dummy. A shot "hit on screen" when the bullet, as
/// its game draws it, overlapped the dummy as its game draws it; the server's hits are
/// its own `BulletHit` events. Real server, real client, the in-process link conditioner.
pub fn lag_comp_bench(
    content: &Content,
    link: crate::net::LinkProfile,
    compensate: bool,
    seconds: f64,
    seed: u64,
) -> LagCompResult {
    use crate::client::InputSample;
    use crate::sim::bullets::Team;
    use crate::sim::player::BTN_FIRE;
    use crate::sim::{SimEvent, Vec2};
    use crate::stepper::Stepper;
    use std::collections::BTreeSet;
    let config = crate::server::ServerConfig { seed, ..Default::default() };
    let mut st = Stepper::new(content.clone(), config);
    st.add_client("aimer", link);
    st.clients[0].lag_compensation = compensate;
    st.run_until(60 * 10, |_, _| InputSample::default(), |st| st.clients[0].is_joined());
    let hub = st.server.world.hub;
    let defs = st.server.world.defs.clone();
    let dummy = defs.hub.dummy.as_ref().map_or("training_dummy".to_string(), |d| d.enemy.clone());
    let radius = defs.enemies.get(&dummy).map_or(16.0, |e| e.radius);
    let arena = Vec2::new(defs.hub.arena[0], defs.hub.arena[1]);
    let centre = Vec2::new(arena.x * 0.5, arena.y * 0.4);
    {
        let i = st.server.world.instances.get_mut(&hub).expect("the hub");
        i.enemies.clear();
        let mut ev = Vec::new();
        i.spawn_enemy(&defs, &dummy, centre, &mut ev);
    }
    let orbit = 150.0f32;
    let omega = 3.0 / orbit; // radians a tick: 3 px a tick along the circle
    let (mut shots, mut screen, mut server) = (BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
    let mut last_seen: Option<Vec2> = None;
    let ticks = (seconds * crate::sim::TICK_RATE as f64) as u64;
    let bullet_speed = crate::sim::instance::PLAYER_BULLET_SPEED;
    for t in 0..ticks {
        // The dummy's path (the server's truth).
        let a = t as f32 * omega;
        if let Some(e) = st.server.world.instances.get_mut(&hub).and_then(|i| i.enemies.first_mut()) {
            e.pos = centre + Vec2::new(a.cos(), a.sin()) * orbit;
        }
        st.step(|_, c| {
            // Aim where the dummy will be when the shot gets there, as the game shows it.
            let (Some(me), Some(s)) = (c.pred, c.interpolated()) else { return InputSample::default() };
            let Some(e) = s.enemies.first() else { return InputSample::default() };
            let vel = last_seen.map_or(Vec2::ZERO, |p| e.pos - p);
            last_seen = Some(e.pos);
            let mut aim_at = e.pos;
            for _ in 0..3 {
                let tof = aim_at.distance(me) / bullet_speed;
                aim_at = e.pos + vel * tof;
            }
            let d = aim_at - me;
            InputSample { mv: Vec2::ZERO, aim: d.y.atan2(d.x).to_degrees(), buttons: BTN_FIRE }
        });
        for e in st.server.world.events() {
            if let SimEvent::BulletHit { uid, target: crate::sim::events::Target::Enemy(_), .. } = e {
                server.insert(*uid);
            }
        }
        // What the shooter's screen shows now: its bullets against the drawn dummy.
        let c = &st.clients[0];
        let (Some(v), Some(s)) = (&c.view, c.interpolated()) else { continue };
        let Some(e) = s.enemies.first() else { continue };
        let pool = &v.replica.pool;
        for i in 0..pool.len() {
            if pool.team[i] != Team::Player || pool.life[i] == 0 {
                continue;
            }
            shots.insert(pool.uid[i]);
            let r = radius + pool.radius[i];
            if pool.pos(i).distance(e.pos) <= r {
                screen.insert(pool.uid[i]);
            }
        }
    }
    let confirmed = screen.intersection(&server).count();
    let unseen = server.difference(&screen).count();
    LagCompResult {
        link,
        compensate,
        seconds,
        shots: shots.len(),
        screen_hits: screen.len(),
        confirmed,
        unseen,
        view_delay: st.clients[0].view_delay(),
    }
}
