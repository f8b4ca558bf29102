//! A headless player: a small brain that drives the real client (walk to a portal, fight,
//! dodge, leave after death), and `hailfire bot`, which runs several over ENet and reports
//! how the netcode did for each.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::{Client, InputSample, Phase};
use crate::net::{conditioner, Conditioner, EnetTransport, LinkProfile, Transport};
use crate::protocol::content::{ClientContent, ContentCache};
use crate::protocol::messages::{F_DEAD, F_DOWNED, F_OUT};
use crate::sim::player::{BTN_ESCAPE, BTN_FIRE, BTN_FLARE, BTN_FOCUS, BTN_INTERACT};
use crate::sim::rng::Rng;
use crate::sim::{Team, Vec2, TICK_RATE};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Plan {
    /// Stay in the hub, wander and shoot.
    Hub,
    /// Walk into a dungeon portal and fight.
    Dungeon,
    /// One run of a dungeon played to win: steer away from where the bullets in its
    /// replica will be, focus near them, revive downed teammates, flare when cornered.
    Dodge,
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
    /// Whether the flare button was pressed last tick (a flare fires on the press).
    flare_was: bool,
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
            flare_was: false,
        }
    }

    /// This tick's input. The bot knows the world only through the client: the session's
    /// content (its own, or what the server sent) tells it where the portals are.
    pub fn think<T: Transport>(&mut self, c: &Client<T>) -> InputSample {
        self.t += 1;
        let (Some(v), Some(me), Some(defs)) = (&c.view, c.pred, c.defs()) else { return InputSample::default() };
        let own = c.own_state();
        if own.is_some_and(|o| o.flags & F_DEAD != 0) {
            if self.plan == Plan::Dodge {
                // Downed: wait for a teammate; out: watch the run to its end.
                return InputSample::default();
            }
            // The death screen's "Return to hub": held; the server enforces the lockout.
            return InputSample { mv: Vec2::ZERO, aim: 0.0, buttons: BTN_ESCAPE };
        }
        if v.dungeon.is_empty() {
            // The dodging bot plays one run, then stays in the hub.
            let go = self.plan == Plan::Dungeon || (self.plan == Plan::Dodge && c.summaries.is_empty());
            if go {
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
        if self.plan == Plan::Dodge {
            return self.dodge(c, me, target, aim);
        }
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

impl Brain {
    /// The dodging plan's move: of nine moves (still, and eight directions) at full speed and
    /// focused, the one that keeps farthest from where the replica's enemy bullets will be
    /// over the next half second, nudged toward a good distance from the target (or a
    /// downed teammate, to revive them); focus when bullets are close; a flare when even
    /// the best move is hit soon.
    fn dodge<T: Transport>(&mut self, c: &Client<T>, me: Vec2, target: Option<Vec2>, aim: f32) -> InputSample {
        use crate::sim::config::{FOCUS_SPEED, PLAYER_HITBOX_RADIUS, PLAYER_SPEED};
        let Some(v) = &c.view else { return InputSample::default() };
        let pool = &v.replica.pool;
        let arena = v.arena;
        // The bullets near enough to matter, with their velocities.
        let near: Vec<(Vec2, Vec2, f32)> = (0..pool.len())
            .filter(|&i| pool.team[i] == Team::Enemy)
            .map(|i| (pool.pos(i), Vec2::new(pool.vx[i], pool.vy[i]), pool.radius[i]))
            .filter(|(p, vel, _)| p.distance(me) < 160.0 + vel.length() * 30.0)
            .collect();
        // A downed teammate to go to, else the fight's target at a distance.
        let me_id = c.player_id;
        let downed = c.view.as_ref().and_then(|v| v.latest()).and_then(|s| {
            s.players
                .iter()
                .filter(|p| Some(p.id) != me_id && p.flags & F_DOWNED != 0 && p.flags & F_OUT == 0)
                .map(|p| p.pos)
                .min_by(|a, b| a.distance(me).total_cmp(&b.distance(me)))
        });
        let goal = match (downed, target) {
            (Some(d), _) => Some((d, 20.0)),
            (None, Some(t)) => Some((t, 240.0)),
            _ => None,
        };
        // Warnings on screen: where a ring will burst or an aimed shot will fly. A person
        // steps out of them; so does the bot (a safe mark, one asking to be stood in, is
        // not a warning).
        let warned = |p: Vec2| -> bool {
            v.telegraphs.iter().filter(|(t, _)| !t.safe).any(|(t, _)| {
                if t.circle {
                    p.distance(t.pos) < t.length + PLAYER_HITBOX_RADIUS + 6.0
                } else {
                    let dir = Vec2::from_angle_deg(t.angle);
                    let along = (p - t.pos).dot(dir).clamp(0.0, t.length);
                    p.distance(t.pos + dir * along) < t.width * 0.5 + PLAYER_HITBOX_RADIUS + 10.0
                }
            })
        };
        let horizon = 30u32;
        let clearance = |pos: Vec2, dir: Vec2, speed: f32| {
            let mut worst = f32::INFINITY;
            for k in 1..=horizon {
                let mut p = pos + dir * (speed * k as f32);
                p = Vec2::new(
                    p.x.clamp(PLAYER_HITBOX_RADIUS, arena.x - PLAYER_HITBOX_RADIUS),
                    p.y.clamp(PLAYER_HITBOX_RADIUS, arena.y - PLAYER_HITBOX_RADIUS),
                );
                for (b, vel, r) in &near {
                    let d = (*b + *vel * k as f32).distance(p) - r - PLAYER_HITBOX_RADIUS;
                    // Near-term danger counts more than what is far off in time.
                    worst = worst.min(d + k as f32 * 0.8);
                }
            }
            worst
        };
        let mut best = (f32::NEG_INFINITY, Vec2::ZERO, false);
        for focus in [false, true] {
            let speed = if focus { PLAYER_SPEED * FOCUS_SPEED } else { PLAYER_SPEED };
            for k in 0..9 {
                let dir = if k == 8 { Vec2::ZERO } else { Vec2::from_angle_deg(k as f32 * 45.0) };
                let mut score = clearance(me, dir, speed).min(40.0);
                if let Some((g, want)) = goal {
                    let p = me + dir * (speed * 10.0);
                    score -= ((p.distance(g) - want).abs()) * 0.02;
                }
                // Walls are traps.
                let p = me + dir * (speed * 10.0);
                if warned(p) {
                    score -= 25.0;
                }
                let wall = p.x.min(p.y).min(arena.x - p.x).min(arena.y - p.y);
                if wall < 40.0 {
                    score -= (40.0 - wall) * 0.1;
                }
                if score > best.0 {
                    best = (score, dir, focus);
                }
            }
        }
        let (score, mv, focus_pick) = best;
        let close = near.iter().any(|(b, _, _)| b.distance(me) < 50.0);
        let mut buttons = BTN_FIRE;
        if focus_pick || close {
            buttons |= BTN_FOCUS;
        }
        // Cornered: the best move is still hit within a few ticks.
        let flare = score < 2.0 && c.run.flares > 0 && !self.flare_was;
        if flare {
            buttons |= BTN_FLARE;
        }
        self.flare_was = flare;
        InputSample { mv, aim, buttons }
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
    /// Join as spectators of this player instead of playing (no body, no input).
    pub spectate: Option<String>,
    /// Record each bot's session into this replay file (NAME-1.hfr, ... for several).
    pub record: Option<std::path::PathBuf>,
}

/// Where bot `i` of `count` records, given `--record FILE`.
fn record_path(file: &std::path::Path, i: usize, count: usize) -> std::path::PathBuf {
    if count == 1 {
        return file.to_path_buf();
    }
    let stem = file.file_stem().map_or("replay".into(), |s| s.to_string_lossy().into_owned());
    let ext = file.extension().map_or("hfr".into(), |e| e.to_string_lossy().into_owned());
    file.with_file_name(format!("{stem}-{}.{ext}", i + 1))
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

/// A run in words: "run cleared in 2:14.5, team score 18240, grazes 146, downs 1,
/// revives 0, furthest boss phase 3" (this bot's own counts).
pub fn run_line<T: Transport>(c: &Client<T>, r: &crate::sim::events::RunSummary, phase: Option<u8>) -> String {
    use crate::sim::events::RunOutcome;
    let secs = r.ticks as f64 / TICK_RATE as f64;
    let mine = r.rows.iter().find(|row| Some(row.id) == c.player_id);
    format!(
        "run {} in {}:{:04.1}, team score {}, grazes {}, downs {}, revives {}, furthest boss phase {}",
        match r.outcome {
            RunOutcome::Cleared => "cleared",
            RunOutcome::Failed => "failed",
            RunOutcome::Abandoned => "abandoned",
            RunOutcome::Stopped => "stopped by the server",
        },
        (secs / 60.0) as u32,
        secs % 60.0,
        r.team_score,
        mine.map_or(0, |m| m.stats.grazes),
        mine.map_or(0, |m| m.stats.downs),
        mine.map_or(0, |m| m.stats.revives),
        phase.map_or("-".to_string(), |p| p.to_string())
    )
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
        let client = match &opts.spectate {
            Some(target) => Client::watching(net, &name, opts.installed.clone(), target),
            None => Client::new(net, &name, opts.installed.clone()),
        }
        .with_cache(opts.cache.clone());
        let mut client = client;
        if opts.record.is_some() {
            client.record();
        }
        bots.push((client, Brain::new(opts.plan, &opts.dungeon, 1000 + i as u64)));
    }
    let start = Instant::now();
    let period = Duration::from_secs_f64(1.0 / TICK_RATE as f64);
    let mut next = start;
    let mut left = vec![false; bots.len()];
    // Per bot: whether its joining was printed, and notices printed so far.
    let mut told = vec![(false, 0u64, 0usize); bots.len()];
    // The first answer saying an admin command was refused or not done.
    let mut admin_failed: Option<String> = None;
    // Per bot: the places it saw (a spectator follows its player from place to place).
    let mut seen: Vec<Vec<String>> = vec![Vec::new(); bots.len()];
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
            if let Some(v) = &c.view {
                let place = if v.dungeon.is_empty() { "the hub".to_string() } else { v.dungeon.clone() };
                if seen[i].last() != Some(&place) {
                    seen[i].push(place);
                }
            }
            if c.is_joined() && !told[i].0 {
                told[i].0 = true;
                let motd = if c.motd.is_empty() { String::new() } else { format!(": {}", c.motd) };
                println!("bot {}: joined {:?}{motd}", c.name, c.server_name);
                if let Some(r) = c.net.route().filter(|r| *r != "direct") {
                    println!("bot {}: route: {r}", c.name);
                }
                if let (0, Some((password, commands))) = (i, &opts.admin) {
                    for cmd in commands {
                        c.admin(password, cmd);
                    }
                }
            }
            if c.summaries.len() > told[i].2 {
                for r in &c.summaries[told[i].2..] {
                    println!("bot {}: {}", c.name, run_line(c, r, brain.last_phase));
                }
                told[i].2 = c.summaries.len();
            }
            let fresh = (c.notices_seen - told[i].1).min(c.notices.len() as u64) as usize;
            for n in c.notices.iter().skip(c.notices.len() - fresh) {
                println!("bot {}: the server says: {n}", c.name);
                if i == 0 && opts.admin.is_some() && n.starts_with(crate::server::ADMIN_REFUSED) {
                    admin_failed = Some(n.clone());
                }
            }
            told[i].1 = c.notices_seen;
        }
        if bots.iter().all(|(c, _)| matches!(c.phase, Phase::Failed(_))) {
            break;
        }
        // The dodging plan plays one run: done when every bot has its summary.
        if opts.plan == Plan::Dodge
            && bots.iter().all(|(c, _)| !c.summaries.is_empty() || matches!(c.phase, Phase::Failed(_)))
        {
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
    if let Some(file) = &opts.record {
        let n = bots.len();
        for (i, (c, _)) in bots.iter_mut().enumerate() {
            let path = record_path(file, i, n);
            match c.recording() {
                Some(r) => {
                    let bytes = r.encode();
                    match std::fs::write(&path, &bytes) {
                        Ok(()) => println!(
                            "bot {}: recorded {:.1} s into {} ({} bytes, {} keyframes{})",
                            c.name,
                            r.seconds(),
                            path.display(),
                            bytes.len(),
                            r.keyframes.len(),
                            if c.recorder.as_ref().is_some_and(|r| r.full) {
                                "; stopped at the size limit"
                            } else {
                                ""
                            }
                        ),
                        Err(e) => println!("bot {}: could not write the recording {}: {e}", c.name, path.display()),
                    }
                }
                None => println!("bot {}: nothing recorded (it never joined)", c.name),
            }
        }
    }
    bots.iter_mut()
        .enumerate()
        .map(|(i, (c, brain))| {
            let st = c.net.stats(0);
            let mut problem = None;
            // A stop or restart the bot asked for ends its connection as asked.
            let asked_stop = i == 0
                && opts.admin.as_ref().is_some_and(|(_, cmds)| {
                    cmds.iter().any(|c| {
                        let w = c.split_whitespace().next().unwrap_or("").to_ascii_lowercase();
                        ["stop", "restart", "quit", "exit"].contains(&w.as_str())
                    })
                });
            match &c.phase {
                Phase::Failed(why) if asked_stop && why.contains("shutting down") => {}
                Phase::Failed(why) => problem = Some(format!("could not stay connected: {why}")),
                Phase::Connecting => problem = Some("never joined".to_string()),
                _ => {}
            }
            let known = c.defs().is_none_or(|d| d.dungeon(&brain.dungeon).is_some());
            if i == 0 && problem.is_none() {
                if let Some(n) = &admin_failed {
                    problem = Some(n.clone());
                }
            }
            if problem.is_none() && opts.plan != Plan::Hub && !known {
                let have: Vec<String> = c.defs().map_or(Vec::new(), |d| d.dungeons.iter().map(|g| g.id.clone()).collect());
                problem = Some(format!("the server has no dungeon '{}' (it has: {})", brain.dungeon, have.join(", ")));
            }
            if problem.is_none() && opts.plan != Plan::Hub && !brain.entered_dungeon && opts.leave_after.is_none() {
                problem = Some(format!("stuck: never got into the dungeon '{}'", brain.dungeon));
            }
            if problem.is_none() && !left[i] && c.stats.pred_err_n > 0 && c.stats.pred_err_recent > super::SNAP_DISTANCE {
                problem = Some(format!("prediction never recovered (recent error {:.1} px)", c.stats.pred_err_recent));
            }
            let s = &c.stats;
            // The mods' media it holds (decoded and checked like a player's game does).
            let media = match c.content.as_ref().map(|k| (k.defs.sprites.len(), k.defs.sounds.len())) {
                Some((0, 0)) | None => String::new(),
                Some((p, n)) => format!(" with {p} sprite(s) and {n} sound(s), decoded"),
            };
            let content_line = format!(
                "{}{media}{}",
                if s.content_from_cache {
                    "from the cache".to_string()
                } else if s.content_bytes > 0 {
                    format!("downloaded ({} bytes)", s.content_bytes)
                } else {
                    "installed".to_string()
                },
                match (s.content_updates, s.content_updates_refused) {
                    (0, 0) => String::new(),
                    (n, 0) => format!(", updated live {n} time(s) without reconnecting"),
                    (n, r) => format!(", updated live {n} time(s), {r} update(s) refused"),
                }
            );
            let line = format!(
                "bot {}: player {} | {} | content {} | prediction error mean {:.3} px, max {:.2} px, snaps {} | inputs dropped {} (server coasted {} ticks of {}) | lead target {}, redundancy {}, late frames {}, missing {} | resyncs {} ({} from ack stall) | payload up {:.2} KB/s, down {:.2} KB/s{}",
                c.name,
                c.player_id.map_or("-".into(), |p| p.to_string()),
                match (&brain.played, left[i]) {
                    _ if c.spectating => format!(
                        "watched {} ({} snapshots; followed them through {})",
                        opts.spectate.as_deref().unwrap_or("?"),
                        s.snapshots,
                        seen[i].join(" -> ")
                    ),
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
                content_line,
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
            // The run goes right after "bot NAME: player N".
            let run = match c.summaries.first() {
                Some(r) => Some(run_line(c, r, brain.last_phase)),
                None if opts.plan == Plan::Dodge => Some("run not finished".to_string()),
                None => None,
            };
            let line = match (run, line.split_once(" | ")) {
                (Some(run), Some((head, rest))) => format!("{head} | {run} | {rest}"),
                (_, _) => line,
            };
            BotReport { name: c.name.clone(), player_id: c.player_id, ok: problem.is_none(), problem, line }
        })
        .collect()
}
