//! A headless player: a small brain that drives the real client (walk to a portal, fight,
//! dodge, leave after death), and `hailfire bot`, which runs several over ENet and reports
//! how the netcode did for each.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::{Client, InputSample, Phase};
use crate::net::{conditioner, Conditioner, EnetTransport, LinkProfile, Transport};
use crate::protocol::content::{ClientContent, ContentCache};
use crate::protocol::messages::F_DEAD;
use crate::sim::player::{BTN_ESCAPE, BTN_FIRE, BTN_INTERACT};
use crate::sim::rng::Rng;
use crate::sim::{Team, Vec2, TICK_RATE};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Plan {
    /// Stay in the hub, wander and shoot.
    Hub,
    /// Walk into a dungeon portal and fight.
    Dungeon,
}

pub struct Brain {
    pub plan: Plan,
    pub dungeon: String,
    rng: Rng,
    t: u32,
    wobble: f32,
    pub entered_dungeon: bool,
    /// The dungeon it fought in, whether it saw the boss, and the last boss phase seen
    /// (from 1), for the report.
    pub played: Option<String>,
    pub saw_boss: bool,
    pub last_phase: Option<u8>,
}

impl Brain {
    pub fn new(plan: Plan, dungeon: &str, seed: u64) -> Self {
        let mut rng = Rng::new(seed);
        let wobble = rng.next_f64() as f32 * std::f32::consts::TAU;
        Brain {
            plan,
            dungeon: dungeon.to_string(),
            rng,
            t: 0,
            wobble,
            entered_dungeon: false,
            played: None,
            saw_boss: false,
            last_phase: None,
        }
    }

    /// This tick's input. The bot knows the world only through the client: the session's
    /// content (its own, or what the server sent) tells it where the portals are.
    pub fn think<T: Transport>(&mut self, c: &Client<T>) -> InputSample {
        self.t += 1;
        let (Some(v), Some(me), Some(defs)) = (&c.view, c.pred, c.defs()) else { return InputSample::default() };
        let own = c.own_state();
        if own.is_some_and(|o| o.flags & F_DEAD != 0) {
            // The death screen's "Return to hub": held; the server enforces the lockout.
            return InputSample { mv: Vec2::ZERO, aim: 0.0, buttons: BTN_ESCAPE };
        }
        if v.dungeon.is_empty() {
            if self.plan == Plan::Dungeon {
                if let Some((_, at)) = defs.portals().into_iter().find(|(d, _)| *d == self.dungeon) {
                    let d = Vec2::new(at[0], at[1]) - me;
                    let l = d.length();
                    let mv = if l > 2.0 { d * (1.0 / l) } else { Vec2::ZERO };
                    let buttons = if l < defs.hub.portal_radius { BTN_INTERACT } else { 0 };
                    return InputSample { mv, aim: d.angle_deg(), buttons };
                }
            }
            let a = self.t as f32 * 0.02 + self.wobble;
            return InputSample { mv: Vec2::new(a.cos(), a.sin() * 0.5), aim: a.to_degrees(), buttons: BTN_FIRE };
        }
        self.entered_dungeon = true;
        self.played = Some(v.dungeon.clone());
        if let Some(b) = v.latest().and_then(|s| s.boss) {
            self.saw_boss = true;
            self.last_phase = Some(b.phase + 1);
        }
        let snap = c.interpolated();
        let target = snap.as_ref().and_then(|s| {
            s.boss
                .map(|b| b.pos)
                .or_else(|| s.enemies.iter().map(|e| e.pos).min_by(|a, b| a.distance(me).total_cmp(&b.distance(me))))
        });
        let aim = target.map_or(-90.0, |t| (t - me).angle_deg());
        // Keep some distance from the target while circling; push away from close bullets.
        let mut mv = Vec2::ZERO;
        if let Some(t) = target {
            let d = me - t;
            let l = d.length().max(1.0);
            let radial = (260.0 - l).clamp(-1.0, 1.0);
            let side = if (self.t / 180).is_multiple_of(2) { 1.0 } else { -1.0 };
            mv = d * (radial / l) + Vec2::new(-d.y / l, d.x / l) * (0.6 * side);
        }
        let pool = &v.replica.pool;
        let mut push = Vec2::ZERO;
        for i in 0..pool.len() {
            if pool.team[i] != Team::Enemy {
                continue;
            }
            let d = me - pool.pos(i);
            let l2 = d.length_sq();
            if l2 < 60.0 * 60.0 && l2 > 1e-3 {
                push = push + d * (1.0 / l2) * 30.0;
            }
        }
        mv = (mv + push + Vec2::new(self.rng.next_f64() as f32 - 0.5, self.rng.next_f64() as f32 - 0.5) * 0.3)
            .clamp_unit();
        InputSample { mv, aim, buttons: BTN_FIRE }
    }
}

#[derive(Clone, Debug)]
pub struct BotOptions {
    pub join: SocketAddr,
    pub count: usize,
    pub seconds: f64,
    pub plan: Plan,
    pub dungeon: String,
    pub name: String,
    /// Disconnect (the menu's "Disconnect to menu" path) after this many seconds.
    pub leave_after: Option<f64>,
    pub link: LinkProfile,
    /// Content the bots offer at join (None: none; they take the server's).
    pub installed: Option<ClientContent>,
    /// Where received content is cached (None: not cached).
    pub cache: Option<ContentCache>,
    /// Key pinning and the password for the server.
    pub security: crate::net::secure::ClientSecurity,
    /// Console commands the first bot sends once joined, with the admin password.
    pub admin: Option<(String, Vec<String>)>,
}

/// One bot's outcome.
#[derive(Clone, Debug)]
pub struct BotReport {
    pub name: String,
    pub player_id: Option<u32>,
    pub ok: bool,
    pub problem: Option<String>,
    pub line: String,
}

/// Runs `count` bots for `seconds`; every bot's report, in order.
pub fn run(opts: &BotOptions) -> Vec<BotReport> {
    let clock = conditioner::wall_clock();
    let mut bots: Vec<(Client<Box<dyn Transport>>, Brain)> = Vec::new();
    for i in 0..opts.count {
        let name = if opts.count == 1 { opts.name.clone() } else { format!("{}-{}", opts.name, i + 1) };
        let net: Box<dyn Transport> = match EnetTransport::connect_secure(opts.join, opts.security.clone()) {
            Ok(e) if opts.link == LinkProfile::CLEAN => Box::new(e),
            Ok(e) => Box::new(Conditioner::new(e, opts.link, clock.clone(), 77 + i as u64)),
            Err(e) => {
                eprintln!("bot {name}: cannot open a socket: {e}");
                continue;
            }
        };
        let client = Client::new(net, &name, opts.installed.clone()).with_cache(opts.cache.clone());
        bots.push((client, Brain::new(opts.plan, &opts.dungeon, 1000 + i as u64)));
    }
    let start = Instant::now();
    let period = Duration::from_secs_f64(1.0 / TICK_RATE as f64);
    let mut next = start;
    let mut left = vec![false; bots.len()];
    // Per bot: whether its joining was printed, and notices printed so far.
    let mut told = vec![(false, 0u64); bots.len()];
    while start.elapsed().as_secs_f64() < opts.seconds {
        let now = start.elapsed().as_secs_f64() * 1000.0;
        for (i, (c, brain)) in bots.iter_mut().enumerate() {
            if left[i] {
                continue;
            }
            if opts.leave_after.is_some_and(|s| now / 1000.0 >= s) && c.is_joined() {
                c.disconnect();
                left[i] = true;
                continue;
            }
            let input = brain.think(c);
            c.update(now, input);
            c.events.clear(); // nothing plays sounds here
            if c.is_joined() && !told[i].0 {
                told[i].0 = true;
                let motd = if c.motd.is_empty() { String::new() } else { format!(": {}", c.motd) };
                println!("bot {}: joined {:?}{motd}", c.name, c.server_name);
                if let (0, Some((password, commands))) = (i, &opts.admin) {
                    for cmd in commands {
                        c.admin(password, cmd);
                    }
                }
            }
            let fresh = (c.notices_seen - told[i].1).min(c.notices.len() as u64) as usize;
            for n in c.notices.iter().skip(c.notices.len() - fresh) {
                println!("bot {}: the server says: {n}", c.name);
            }
            told[i].1 = c.notices_seen;
        }
        if bots.iter().all(|(c, _)| matches!(c.phase, Phase::Failed(_))) {
            break;
        }
        next += period;
        let n = Instant::now();
        if next > n {
            std::thread::sleep(next - n);
        } else {
            next = n;
        }
    }
    let secs = start.elapsed().as_secs_f64().max(1e-3);
    // Leaving at the end goes through the same path as the menu's "Disconnect".
    for (i, (c, _)) in bots.iter_mut().enumerate() {
        if !left[i] && c.is_joined() {
            c.disconnect();
        }
    }
    bots.iter_mut()
        .enumerate()
        .map(|(i, (c, brain))| {
            let st = c.net.stats(0);
            let mut problem = None;
            match &c.phase {
                Phase::Failed(why) => problem = Some(format!("could not stay connected: {why}")),
                Phase::Connecting => problem = Some("never joined".to_string()),
                _ => {}
            }
            let known = c.defs().is_none_or(|d| d.dungeon(&brain.dungeon).is_some());
            if problem.is_none() && opts.plan == Plan::Dungeon && !known {
                let have: Vec<String> = c.defs().map_or(Vec::new(), |d| d.dungeons.iter().map(|g| g.id.clone()).collect());
                problem = Some(format!("the server has no dungeon '{}' (it has: {})", brain.dungeon, have.join(", ")));
            }
            if problem.is_none() && opts.plan == Plan::Dungeon && !brain.entered_dungeon && opts.leave_after.is_none() {
                problem = Some(format!("stuck: never got into the dungeon '{}'", brain.dungeon));
            }
            if problem.is_none() && !left[i] && c.stats.pred_err_n > 0 && c.stats.pred_err_recent > super::SNAP_DISTANCE {
                problem = Some(format!("prediction never recovered (recent error {:.1} px)", c.stats.pred_err_recent));
            }
            let s = &c.stats;
            let line = format!(
                "bot {}: player {} | {} | content {} | prediction error mean {:.3} px, max {:.2} px, snaps {} | inputs dropped {} (server coasted {} ticks of {}) | lead target {}, redundancy {}, late frames {}, missing {} | resyncs {} ({} from ack stall) | payload up {:.2} KB/s, down {:.2} KB/s{}",
                c.name,
                c.player_id.map_or("-".into(), |p| p.to_string()),
                match (&brain.played, left[i]) {
                    (_, true) => "left via disconnect".to_string(),
                    (Some(d), _) => format!(
                        "fought in the dungeon {d} ({})",
                        match brain.last_phase {
                            Some(p) => format!("reached the boss, last phase seen {p}"),
                            None => "the boss never appeared".to_string(),
                        }
                    ),
                    (None, _) => "in the hub".to_string(),
                },
                if s.content_from_cache {
                    "from the cache".to_string()
                } else if s.content_bytes > 0 {
                    format!("downloaded ({} bytes)", s.content_bytes)
                } else {
                    "installed".to_string()
                },
                s.pred_err_mean(),
                s.pred_err_max,
                s.snaps_over_threshold,
                s.server_inputs_dropped,
                s.server_ticks_coasted,
                c.ticks_joined(),
                s.lead_target.max(c.target_lead()),
                s.redundancy,
                s.late_frames,
                s.missing_frames,
                s.resyncs,
                s.stall_resyncs,
                st.bytes_sent as f64 / secs / 1024.0,
                st.bytes_received as f64 / secs / 1024.0,
                c.net.wire_totals().map_or(String::new(), |(up, down)| format!(
                    " | on the wire (ENet) up {:.2} KB/s, down {:.2} KB/s",
                    up as f64 / secs / 1024.0,
                    down as f64 / secs / 1024.0
                )),
            );
            BotReport { name: c.name.clone(), player_id: c.player_id, ok: problem.is_none(), problem, line }
        })
        .collect()
}
