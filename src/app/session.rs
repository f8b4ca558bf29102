//! A game in progress: the client (and, when hosting, the listen server), what the HUD
//! shows, and which sounds the last tick's events call for.

use std::net::SocketAddr;
use std::time::Instant;

use super::audio::Audio;
use super::render::scene::{self, Camera, Palette, Sprite, WorldView};
use super::ui::hud::{HudState, NetOverlay};
use crate::app::settings::{BulletColours, Settings};
use crate::client::{Client, ClientEvent};
use crate::content::Content;
use crate::net::portmap::Status;
use crate::net::Transport;
use crate::protocol::content::{ClientContent, ContentCache, ContentDigest};
use crate::protocol::messages::{WireTarget, F_CHANNELLING, F_DEAD, F_DOWNED, F_OUT};
use crate::server::listen::ListenServer;
use crate::sim::{Vec2, PLAYER_MAX_HP, RESPAWN_LOCKOUT_TICKS, TICK_RATE};

pub struct Session<T: Transport = Box<dyn Transport>> {
    pub client: Client<T>,
    pub server: Option<ListenServer>,
    /// "Friends join at …" when hosting.
    pub host_info: Option<String>,
    pub menu_open: bool,
    pub menu_focus: bool,
    /// The in-game menu shows the settings page.
    pub settings_open: bool,
    /// The menu's "Return to hub": escape is held for the player until they arrive.
    pub returning: bool,
    dead_since: Option<Instant>,
    pub started: Instant,
    /// Time spent paused (the game clock stands still meanwhile), and since when it is.
    paused_for: std::time::Duration,
    paused_since: Option<Instant>,
    pub arrived_hub: bool,
    rates: (Instant, u64, u64, f32, f32),
    fire_cd: u32,
    pub banner: Option<(String, Instant)>,
    /// Flares going off (where, when), drawn as an expanding ring.
    pub flares_seen: Vec<(Vec2, Instant)>,
    /// Sparks flying (each with when it was made).
    sparks: Vec<(crate::app::render::scene::Spark, Instant)>,
    spark_seed: u32,
    /// A boss phase just changed: the picture holds still a moment (hit-stop), from the
    /// frame saved here, until this time.
    hitstop: Option<Instant>,
    frozen: Option<(Vec<Sprite>, Camera)>,
    /// A script's words for the players (a tutorial's lesson), and when they came.
    pub lesson: Option<(String, Instant)>,
    /// Grazes counted when last heard, and who was downed (for their sounds).
    grazes_heard: u32,
    downed_heard: Vec<u32>,
    /// Scripts' warnings before attacks (what, when it came).
    telegraphs: Vec<(crate::sim::script::Telegraph, Instant)>,
    /// Personal bests and stars (the data folder's profile.toml).
    pub profile: crate::app::profile::Profile,
    /// Whether the remembered ship was asked for since joining.
    pub ship_sent: bool,
    /// The address joined (None when hosting).
    pub addr: Option<String>,
    /// The address to add to the recent servers once the join has succeeded.
    pub remember: Option<String>,
    /// The password the join used (kept in memory only), to join again when the player
    /// starts or stops watching a friend.
    pub password: Option<String>,
    /// When hosting, where friends join, shown in the hub ("friends join at IP:PORT"),
    /// with a note when the chosen port was taken.
    pub join_line: Option<String>,
    /// The router's answer and the relay's code the hosting lines were last made from.
    map_status: Option<(Option<Status>, Option<[u8; 6]>)>,
    last_roster: Vec<String>,
    /// Colours and shapes of the session's content (the server's, once joined).
    palette: Option<(ContentDigest, bool, Palette)>,
    /// The server's notices shown now, each with when it arrived, and how many the
    /// client had received when last looked at.
    notices: Vec<(String, Instant)>,
    notices_seen: u64,
    /// Hit flashes (who, when) and death bursts (what, when) being drawn.
    flashes: Vec<(WireTarget, Instant)>,
    bursts: Vec<(crate::app::render::scene::DeathBurst, Instant)>,
    /// When the own ship was last hit (the screen shake).
    shake_at: Option<Instant>,
    /// HP last seen of enemies (with the most each was seen with: the health bar's full
    /// length), the boss and the own ship: a drop makes a damage number.
    enemy_hp: std::collections::HashMap<u32, (u32, u32, Vec2)>,
    boss_hp: Option<u32>,
    boss_pos: Vec2,
    /// Enemies that just left the snapshot (id, last HP, where, when), and deaths just
    /// reported (id, when): matched, they make the killing blow's number.
    gone: Vec<(u32, u32, Vec2, Instant)>,
    deaths: Vec<(u32, Instant)>,
    own_hp: Option<u8>,
    /// Damage numbers: who, how much, where, since when.
    damage: Vec<(WireTarget, u32, Vec2, Instant)>,
}

/// How long the screen shakes after a hit, and how far (world px).
const SHAKE_SECONDS: f32 = 0.25;
/// What a hub portal says: the place, the player's stars there, and this server's record.
pub fn portal_label(
    name: &str,
    best: Option<&crate::app::profile::Best>,
    record: Option<&crate::protocol::messages::ServerRecord>,
) -> String {
    let mut label = name.to_string();
    if let Some(b) = best {
        label = format!("{label} · {}", b.stars_text());
    }
    if let Some(r) = record {
        let secs = r.best_time_cs as f32 / 100.0;
        label = format!("{label}\nrecord {}:{:04.1} · best score {}", (secs / 60.0) as u32, secs % 60.0, r.best_score);
    }
    label
}

/// How long a script's hint stays on screen, seconds.
const LESSON_SECONDS: f32 = 8.0;
/// Most sparks in flight.
const MAX_SPARKS: usize = 400;
/// How long the picture holds still when a boss's phase changes.
const HITSTOP: std::time::Duration = std::time::Duration::from_millis(120);

/// Most telegraphs drawn at once.
const MAX_TELEGRAPHS_SHOWN: usize = 256;
const SHAKE_PX: f32 = 5.0;
/// How long a damage number rises; hits on one target closer together than `DAMAGE_MERGE`
/// add up in one number.
const DAMAGE_SECONDS: f32 = 0.8;
const DAMAGE_MERGE: f32 = 0.2;

/// How long a server notice stays on screen.
const NOTICE_SECONDS: f32 = 10.0;

/// The address friends can use: the machine's LAN address if it has one.
pub fn lan_ip() -> Option<std::net::IpAddr> {
    let s = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    s.connect("10.255.255.255:9").ok()?;
    s.local_addr().ok().map(|a| a.ip()).filter(|ip| !ip.is_unspecified())
}

/// The menu's line about hosting: where friends join (on this network, and over the
/// internet when the router forwards the port, or what to forward by hand when it does
/// not) and the key fingerprint they can compare.
fn host_info_line(s: &ListenServer) -> String {
    let port = s.addr.port();
    let fp = &s.fingerprint;
    let lan = if s.addr.ip().is_unspecified() { lan_ip() } else { Some(s.addr.ip()) };
    let here = match lan {
        Some(ip) => format!("Hosting: friends on your network join at {}", SocketAddr::new(ip, port)),
        None => format!("Hosting on UDP port {port}"),
    };
    let outside = match s.mapper.as_ref().map(|m| m.status()) {
        None => String::new(),
        Some(Status::Trying) => " · asking your router to open the port...".to_string(),
        Some(Status::Mapped { external, via }) => format!(" · over the internet at {external} (opened by {via})"),
        Some(Status::Failed(_)) => {
            format!(" · no router answered: for friends over the internet, forward UDP port {port} to this machine")
        }
    };
    let relayed = match s.relay.as_ref() {
        None => String::new(),
        Some(l) => match l.code() {
            Some(c) => format!(" · through the relay: {}@{}", crate::net::relay::code_text(&c), l.name),
            None => " · asking the relay for a code...".to_string(),
        },
    };
    format!("{here}{outside}{relayed} · key fingerprint {fp}")
}

/// The hub's short line: where friends join.
fn join_line_for(s: &ListenServer) -> String {
    let port = s.addr.port();
    // A relay's code first when the router's outside address is not a public one (a NAT
    // behind the NAT), else the mapping.
    let mapped = match s.mapper.as_ref().map(|m| m.status()) {
        Some(Status::Mapped { external, .. }) => Some(external),
        _ => None,
    };
    if let Some(e) = mapped.filter(|e| crate::net::portmap::is_public(e.ip())) {
        return format!("friends join at {e}");
    }
    if let Some((l, c)) = s.relay.as_ref().and_then(|l| l.code().map(|c| (l, c))) {
        return format!("friends join with {}@{}", crate::net::relay::code_text(&c), l.name);
    }
    if let Some(e) = mapped {
        return format!("friends join at {e}");
    }
    match if s.addr.ip().is_unspecified() { lan_ip() } else { Some(s.addr.ip()) } {
        Some(ip) => format!("friends join at {}", SocketAddr::new(ip, port)),
        None => format!("friends join on UDP port {port}"),
    }
}

impl<T: Transport> Session<T> {
    /// Keeps the hosting lines current (the router's answer comes a moment after hosting
    /// starts). The port-taken note stays.
    pub fn refresh_host_lines(&mut self) {
        let Some(s) = self.server.as_ref() else { return };
        if s.mapper.is_none() && s.relay.is_none() {
            return;
        }
        let now = (s.mapper.as_ref().map(|m| m.status()), s.relay.as_ref().and_then(|l| l.code()));
        if self.map_status.as_ref() == Some(&now) {
            return;
        }
        self.map_status = Some(now);
        let note = self.join_line.as_ref().and_then(|l| l.find(" (port ").map(|i| l[i..].to_string()));
        self.host_info = Some(host_info_line(s));
        self.join_line = Some(join_line_for(s) + note.as_deref().unwrap_or(""));
        // Said in the terminal too, as it changes (the router's answer, the relay's code).
        println!("hailfire: {}", self.host_info.as_deref().unwrap_or(""));
    }

    pub fn new(client: Client<T>, server: Option<ListenServer>) -> Session<T> {
        let host_info = server.as_ref().map(host_info_line);
        let join_line = server.as_ref().map(join_line_for);
        Session {
            client,
            server,
            host_info,
            join_line,
            map_status: None,
            menu_open: false,
            menu_focus: false,
            settings_open: false,
            returning: false,
            dead_since: None,
            started: Instant::now(),
            paused_for: std::time::Duration::ZERO,
            paused_since: None,
            arrived_hub: false,
            rates: (Instant::now(), 0, 0, 0.0, 0.0),
            fire_cd: 0,
            banner: None,
            flares_seen: Vec::new(),
            telegraphs: Vec::new(),
            sparks: Vec::new(),
            spark_seed: 1,
            hitstop: None,
            frozen: None,
            lesson: None,
            grazes_heard: 0,
            downed_heard: Vec::new(),
            ship_sent: false,
            profile: crate::app::profile::Profile::default_path()
                .map(|p| crate::app::profile::Profile::load(&p))
                .unwrap_or_default(),
            addr: None,
            remember: None,
            password: None,
            last_roster: Vec::new(),
            palette: None,
            notices: Vec::new(),
            notices_seen: 0,
            flashes: Vec::new(),
            bursts: Vec::new(),
            shake_at: None,
            enemy_hp: Default::default(),
            boss_hp: None,
            boss_pos: Vec2::ZERO,
            gone: Vec::new(),
            deaths: Vec::new(),
            own_hp: None,
            damage: Vec::new(),
        }
    }

    /// Adds `n` sparks at `at` (the oldest go past [`MAX_SPARKS`]).
    fn add_sparks(&mut self, at: Vec2, n: usize, speed: f32, color: [f32; 4]) {
        self.spark_seed = self.spark_seed.wrapping_add(1);
        let now = Instant::now();
        self.sparks
            .extend(crate::app::render::scene::spark_burst(at, n, speed, color, self.spark_seed).map(|s| (s, now)));
        let cut = self.sparks.len().saturating_sub(MAX_SPARKS);
        self.sparks.drain(..cut);
    }

    /// Where and how big something that just died was, in its colour.
    fn burst_for(&self, target: WireTarget) -> Option<crate::app::render::scene::DeathBurst> {
        let snap = self.client.view.as_ref()?.latest()?;
        let defs = self.client.defs()?;
        let palette = self.palette.as_ref().map(|(_, _, p)| p);
        let (pos, size, color) = match target {
            WireTarget::Enemy(id) => {
                let e = snap.enemies.iter().find(|e| e.id == id)?;
                let r = defs.enemies.get(e.def as usize).map_or(14.0, |d| d.radius);
                (e.pos, r, palette.and_then(|p| p.enemies.get(e.def as usize).copied()))
            }
            WireTarget::Boss => {
                let b = snap.boss?;
                let r = defs.bosses.get(b.def as usize).map_or(32.0, |d| d.radius);
                (b.pos, r, palette.and_then(|p| p.bosses.get(b.def as usize).copied()))
            }
            WireTarget::Player(id) => {
                let p = snap.players.iter().find(|p| p.id == id)?;
                let own = Some(id) == self.client.player_id;
                let pos = if own { self.client.pred.unwrap_or(p.pos) } else { p.pos };
                (pos, 12.0, Some(crate::app::render::scene::player_color(id, own)))
            }
        };
        Some(crate::app::render::scene::DeathBurst {
            pos,
            color: color.unwrap_or([1.0, 0.6, 0.4, 1.0]),
            size,
            age: 0.0,
        })
    }

    /// Builds the palette of the session's content when that content (or the colour
    /// setting) changes.
    fn refresh_palette(&mut self, colour_blind: bool) {
        if let Some(c) = self.client.content.as_ref() {
            if self.palette.as_ref().is_none_or(|(d, cb, _)| *d != c.digest || *cb != colour_blind) {
                self.palette = Some((c.digest, colour_blind, Palette::with(&c.defs, colour_blind)));
            }
        }
    }

    /// Damage numbers from HP that dropped since the last tick; `killed`: what died this
    /// tick (its last HP was the killing blow: it is gone from the snapshot).
    fn track_damage(&mut self, killed: &[WireTarget]) {
        let Some(snap) = self.client.view.as_ref().and_then(|v| v.latest()) else { return };
        let now = Instant::now();
        let mut hits = Vec::new();
        let mut seen = std::collections::HashMap::with_capacity(snap.enemies.len());
        for e in &snap.enemies {
            let (old, full, _) = self.enemy_hp.get(&e.id).copied().unwrap_or((e.hp, e.hp, e.pos));
            if e.hp < old {
                hits.push((WireTarget::Enemy(e.id), old - e.hp, e.pos));
            }
            seen.insert(e.id, (e.hp, full.max(e.hp), e.pos));
        }
        // The killing blow: an enemy that left the snapshot and whose death was reported
        // (the two arrive in different messages, in either order, so both wait a moment).
        for (id, (hp, _, pos)) in &self.enemy_hp {
            if !seen.contains_key(id) && *hp > 0 {
                self.gone.push((*id, *hp, *pos, now));
            }
        }
        self.deaths.extend(killed.iter().filter_map(|t| match t {
            WireTarget::Enemy(id) => Some((*id, now)),
            _ => None,
        }));
        self.gone.retain(|g| g.3.elapsed().as_secs_f32() < 0.5);
        self.deaths.retain(|d| d.1.elapsed().as_secs_f32() < 0.5);
        let deaths = std::mem::take(&mut self.deaths);
        for (id, t) in deaths {
            match self.gone.iter().position(|g| g.0 == id) {
                Some(k) => {
                    let (_, hp, pos, _) = self.gone.remove(k);
                    hits.push((WireTarget::Enemy(id), hp, pos));
                }
                None => self.deaths.push((id, t)),
            }
        }
        self.enemy_hp = seen;
        let boss = snap.boss.map(|b| (b.hp, b.pos));
        match (self.boss_hp, boss) {
            (Some(old), Some((hp, pos))) if hp < old => hits.push((WireTarget::Boss, old - hp, pos)),
            (Some(old), None) if old > 0 && killed.contains(&WireTarget::Boss) => {
                hits.push((WireTarget::Boss, old, self.boss_pos));
            }
            _ => {}
        }
        self.boss_hp = boss.map(|b| b.0);
        if let Some((_, pos)) = boss {
            self.boss_pos = pos;
        }
        let own = self.client.own_state().map(|o| o.hp);
        if let (Some(old), Some(hp), Some(id), Some(pos)) = (self.own_hp, own, self.client.player_id, self.client.pred)
        {
            if hp < old {
                hits.push((WireTarget::Player(id), (old - hp) as u32, pos));
            }
        }
        self.own_hp = own;
        for (who, amount, pos) in hits {
            match self.damage.iter_mut().rev().find(|d| d.0 == who) {
                Some(d) if d.3.elapsed().as_secs_f32() < DAMAGE_MERGE => {
                    d.1 += amount;
                    d.2 = pos;
                }
                _ => self.damage.push((who, amount, pos, now)),
            }
        }
        self.damage.retain(|d| d.3.elapsed().as_secs_f32() < DAMAGE_SECONDS);
    }

    pub fn in_dungeon(&self) -> bool {
        self.client.view.as_ref().is_some_and(|v| !v.dungeon.is_empty())
    }

    /// After a client tick: sounds, death timing, the return-to-hub hold.
    pub fn after_tick(&mut self, audio: &mut Audio, firing: bool) {
        let own_id = self.client.player_id;
        let events: Vec<ClientEvent> = self.client.events.drain(..).collect();
        let killed: Vec<WireTarget> = events
            .iter()
            .filter_map(|e| match e {
                ClientEvent::Death { target } => Some(*target),
                _ => None,
            })
            .collect();
        for e in &events {
            match e {
                ClientEvent::Hit { target } => {
                    self.flashes.retain(|(t, _)| t != target);
                    self.flashes.push((*target, Instant::now()));
                    // Sparks where the shot landed (a few: hits come many a second).
                    if let Some(b) = self.burst_for(*target) {
                        let c = crate::app::render::scene::lighten(b.color, 0.6);
                        self.add_sparks(b.pos, 3, 160.0, c);
                    }
                    if *target == WireTarget::Player(own_id.unwrap_or(u32::MAX)) {
                        self.shake_at = Some(Instant::now());
                    }
                }
                ClientEvent::Death { target } => {
                    if let Some(b) = self.burst_for(*target) {
                        self.bursts.push((b, Instant::now()));
                    }
                }
                _ => {}
            }
        }
        for e in events {
            match e {
                ClientEvent::Entered { dungeon } => {
                    audio.play("portal");
                    self.telegraphs.clear();
                    self.lesson = None;
                    if dungeon.is_empty() {
                        self.returning = false;
                        if !self.arrived_hub {
                            self.arrived_hub = true;
                            println!("hailfire: in the hub");
                        }
                    }
                }
                ClientEvent::ContentUpdated => {
                    // The palette follows the content's digest; the words are the player's.
                    self.notices.push(("The server's mods changed how things look: updated".into(), Instant::now()));
                    println!("hailfire: the server's looks changed: updated without leaving");
                }
                ClientEvent::Hit { target: WireTarget::Player(p) } if Some(p) == own_id => audio.play("hit_taken"),
                ClientEvent::Hit { target: WireTarget::Boss | WireTarget::Enemy(_) } => audio.play("hit_dealt"),
                ClientEvent::Hit { .. } => {}
                ClientEvent::Death { target: WireTarget::Player(p) } if Some(p) == own_id => audio.play("death"),
                ClientEvent::Death { .. } => audio.play("enemy"),
                ClientEvent::Phase { phase } => {
                    audio.play("phase");
                    // Hit-stop: the next frame holds still a moment.
                    self.hitstop = Some(Instant::now() + HITSTOP);
                    self.frozen = None;
                    // The new phase, by name, across the screen.
                    let name = self.client.view.as_ref().and_then(|v| v.latest()).and_then(|s| s.boss).and_then(|b| {
                        self.client.defs()?.bosses.get(b.def as usize)?.phases.get(phase as usize).cloned()
                    });
                    self.banner = Some((
                        match name {
                            Some(n) => format!("Phase {}: {n}", phase as usize + 1),
                            None => format!("Phase {}", phase as usize + 1),
                        },
                        Instant::now(),
                    ));
                }
                ClientEvent::Cleared => {
                    audio.play("cleared");
                    self.banner = Some(("Dungeon cleared!".into(), Instant::now()));
                }
                ClientEvent::Sfx { name, .. } => audio.play(&name),
                ClientEvent::Hint(text) => self.lesson = Some((text, Instant::now())),
                ClientEvent::Telegraph(t) => {
                    // A hostile server could send many: the oldest go first.
                    if self.telegraphs.len() >= MAX_TELEGRAPHS_SHOWN {
                        self.telegraphs.remove(0);
                    }
                    self.telegraphs.push((t, Instant::now()));
                }
                ClientEvent::Flare { pos, .. } => {
                    audio.play("flare");
                    self.flares_seen.push((pos, Instant::now()));
                    self.add_sparks(pos, 24, 420.0, [1.0, 0.95, 0.7, 0.9]);
                }
                ClientEvent::Revived { player, .. } => {
                    audio.play("revive");
                    if Some(player) == own_id {
                        self.banner = Some(("Revived!".into(), Instant::now()));
                    }
                }
                ClientEvent::Out { player } if Some(player) == own_id => {
                    self.banner = Some(("You are out: watching the others".into(), Instant::now()));
                }
                ClientEvent::Out { .. } => {}
                ClientEvent::Wave { wave } => {
                    self.banner = Some((format!("Wave {wave} cleared: +25 HP, +1 flare"), Instant::now()));
                }
                ClientEvent::RunEnded => {
                    let won = self
                        .client
                        .summary
                        .as_ref()
                        .is_some_and(|s| s.outcome == crate::sim::events::RunOutcome::Cleared);
                    audio.play(if won { "cleared" } else { "run_lost" });
                    // Only runs of a dungeon this server has count (a hostile server cannot
                    // fill the profile with made-up ones).
                    let known = |d: &str| self.client.defs().is_some_and(|defs| defs.dungeon(d).is_some());
                    if let Some(sum) = self.client.summary.clone().filter(|s| known(&s.dungeon)) {
                        let new = self.profile.count(&sum, own_id);
                        if new != 0 {
                            let n = new.count_ones();
                            self.banner =
                                Some((format!("{n} new star{}", if n == 1 { "" } else { "s" }), Instant::now()));
                        }
                    }
                }
            }
        }
        self.track_damage(&killed);
        // A graze: a quiet tick, at most ten a second.
        if self.client.run.grazes > self.grazes_heard {
            audio.play_limited("graze", std::time::Duration::from_millis(100));
            if let Some(at) = self.client.pred {
                self.add_sparks(at, 2, 120.0, [0.7, 0.95, 1.0, 0.8]);
            }
        }
        self.grazes_heard = self.client.run.grazes;
        // Someone downed (the own ship or a teammate).
        let downed: Vec<u32> = self
            .client
            .view
            .as_ref()
            .and_then(|v| v.latest())
            .map(|s| s.players.iter().filter(|p| p.flags & F_DOWNED != 0).map(|p| p.id).collect())
            .unwrap_or_default();
        if downed.iter().any(|id| !self.downed_heard.contains(id)) {
            audio.play("downed");
        }
        self.downed_heard = downed;
        let own = self.client.own_state();
        let dead = own.is_some_and(|o| o.flags & F_DEAD != 0);
        match (dead, self.dead_since) {
            (true, None) => self.dead_since = Some(Instant::now()),
            (false, Some(_)) => self.dead_since = None,
            _ => {}
        }
        if own.is_some_and(|o| o.flags & F_CHANNELLING != 0 && o.escape == 1) {
            audio.play("escape");
        }
        self.fire_cd = self.fire_cd.saturating_sub(1);
        if firing
            && !dead
            && self.fire_cd == 0
            && own.is_some_and(|o| o.flags & crate::protocol::messages::F_SPAWN_GRACE == 0)
        {
            audio.play("fire");
            self.fire_cd = crate::sim::PLAYER_FIRE_COOLDOWN_TICKS;
        }
        // Who is here, on stdout when it changes (players and tests can follow along).
        let roster: Vec<String> =
            self.client.view.as_ref().map_or(Vec::new(), |v| v.roster.iter().map(|(_, n)| n.clone()).collect());
        if roster != self.last_roster && !roster.is_empty() {
            println!("hailfire: here: {}", roster.join(", "));
            self.last_roster = roster;
        }
        // The place's music, a layer more for each boss phase.
        let theme = self.client.defs().and_then(|defs| {
            let v = self.client.view.as_ref()?;
            let music = if v.dungeon.is_empty() {
                defs.hub.theme.music.clone()
            } else {
                defs.dungeon(&v.dungeon)?.theme.music.clone()
            };
            let phase = v.latest().and_then(|s| s.boss).map_or(0, |b| b.phase.saturating_add(1));
            Some((music, phase))
        });
        audio.music(theme.as_ref().map(|(m, p)| (m, *p)));
    }

    /// The content's ships as the menu offers them: unlocked by the stars this player has
    /// earned (every dungeon's together), `chosen` (an id) marked flown.
    /// Who the in-game menu offers to watch: friends in dungeons on a server this game
    /// joined (none when hosting), or the player being watched.
    pub fn friends(&self) -> crate::app::ui::menu::Friends {
        let watching = self.client.watch_target().map(str::to_string);
        if self.server.is_some() || watching.is_some() {
            return crate::app::ui::menu::Friends { elsewhere: Vec::new(), watching };
        }
        let defs = self.client.defs();
        let me = &self.client.name;
        let elsewhere = self
            .client
            .people
            .iter()
            .filter(|(name, place)| !place.is_empty() && name != me)
            .map(|(name, place)| (name.clone(), defs.map_or_else(|| place.clone(), |d| d.place_name(place))))
            .collect();
        crate::app::ui::menu::Friends { elsewhere, watching: None }
    }

    pub fn ship_choices(&self, chosen: &str) -> Vec<crate::app::ui::menu::ShipChoice> {
        let Some(defs) = self.client.defs() else { return Vec::new() };
        // The remembered pick if it is here and still earned, else the first free ship
        // (the one the server starts everyone in).
        let chosen = if defs.ships.iter().any(|s| s.id == chosen && self.profile.unlocks(s.stars)) {
            chosen.to_string()
        } else {
            defs.ships.iter().find(|s| s.stars == 0).or(defs.ships.first()).map(|s| s.id.clone()).unwrap_or_default()
        };
        defs.ships
            .iter()
            .map(|s| crate::app::ui::menu::ShipChoice {
                name: s.name.clone(),
                stars: s.stars,
                unlocked: self.profile.unlocks(s.stars),
                flown: s.id == chosen,
            })
            .collect()
    }

    /// Whether the host's server is paused now (hosting alone, menu open).
    pub fn paused(&self) -> bool {
        self.server.as_ref().is_some_and(|s| s.paused())
    }

    /// A tick while paused: the game's clock does not move.
    pub fn pause_clock(&mut self) {
        self.paused_since.get_or_insert_with(Instant::now);
    }

    /// The game's clock in ms: time since the session began, less the time spent paused.
    pub fn game_ms(&mut self) -> f64 {
        if let Some(t) = self.paused_since.take() {
            self.paused_for += t.elapsed();
        }
        self.started.elapsed().saturating_sub(self.paused_for).as_secs_f64() * 1000.0
    }

    pub fn lockout_left(&self) -> f32 {
        let total = RESPAWN_LOCKOUT_TICKS as f32 / TICK_RATE as f32;
        self.dead_since.map_or(0.0, |t| (total - t.elapsed().as_secs_f32()).max(0.0))
    }

    /// The world's sprites for this frame and the camera that frames them.
    pub fn sprites(
        &mut self,
        alpha: f32,
        screen: (u32, u32),
        time: f32,
        look: &Settings,
        out: &mut Vec<Sprite>,
    ) -> Option<Camera> {
        // Hit-stop: the frame after a boss's phase change, held.
        match (self.hitstop, &self.frozen) {
            (Some(until), Some((s, cam))) if Instant::now() < until => {
                out.clear();
                out.extend_from_slice(s);
                return Some(*cam);
            }
            (Some(until), _) if Instant::now() >= until => {
                self.hitstop = None;
                self.frozen = None;
            }
            _ => {}
        }
        self.refresh_palette(look.bullet_colours == BulletColours::ColourBlind);
        let palette = &self.palette.as_ref()?.2;
        let defs = self.client.defs()?;
        let v = self.client.view.as_ref()?;
        let snap = self.client.interpolated()?;
        let enemy_r: Vec<f32> = defs.enemies.iter().map(|e| e.radius).collect();
        let boss_r: Vec<f32> = defs.bosses.iter().map(|b| b.radius).collect();
        let portals: Vec<(String, Vec2, crate::sim::defs::ThemeDef)> = if v.dungeon.is_empty() {
            defs.dungeons.iter().map(|d| (d.id.clone(), Vec2::new(d.portal[0], d.portal[1]), d.theme.clone())).collect()
        } else {
            Vec::new()
        };
        use crate::app::render::scene::{BURST_SECONDS, FLASH_SECONDS};
        self.flashes.retain(|(_, t)| t.elapsed().as_secs_f32() < FLASH_SECONDS);
        self.bursts.retain(|(_, t)| t.elapsed().as_secs_f32() < BURST_SECONDS);
        // Reduced flashing: a third of the flash, bursts at half strength.
        let (flash, burst) = if look.reduced_flashing { (0.35, 0.5) } else { (1.0, 1.0) };
        let flashes: Vec<(WireTarget, f32)> =
            self.flashes.iter().map(|(w, t)| (*w, (1.0 - t.elapsed().as_secs_f32() / FLASH_SECONDS) * flash)).collect();
        self.flares_seen.retain(|(_, t)| t.elapsed().as_secs_f32() < 0.6);
        let flares: Vec<(Vec2, f32)> =
            self.flares_seen.iter().map(|(p, t)| (*p, t.elapsed().as_secs_f32() / 0.6)).collect();
        use crate::app::render::scene::SPARK_SECONDS;
        self.sparks.retain(|(_, t)| t.elapsed().as_secs_f32() < SPARK_SECONDS);
        let sparks: Vec<crate::app::render::scene::Spark> = self
            .sparks
            .iter()
            .map(|(s, t)| {
                let mut s = *s;
                s.age = t.elapsed().as_secs_f32() / SPARK_SECONDS;
                s.color[3] *= burst;
                s
            })
            .collect();
        let tick_s = 1.0 / crate::sim::TICK_RATE as f32;
        self.telegraphs.retain(|(g, t)| t.elapsed().as_secs_f32() < g.ticks as f32 * tick_s);
        let telegraphs: Vec<(crate::sim::script::Telegraph, f32)> =
            self.telegraphs.iter().map(|(g, t)| (*g, t.elapsed().as_secs_f32() / (g.ticks as f32 * tick_s))).collect();
        let bursts: Vec<crate::app::render::scene::DeathBurst> = self
            .bursts
            .iter()
            .map(|(b, t)| {
                let mut color = b.color;
                color[3] *= burst;
                crate::app::render::scene::DeathBurst { age: t.elapsed().as_secs_f32() / BURST_SECONDS, color, ..*b }
            })
            .collect();
        let theme = if v.dungeon.is_empty() {
            defs.hub.theme.clone()
        } else {
            defs.dungeon(&v.dungeon).map(|d| d.theme.clone()).unwrap_or_default()
        };
        let ships = v.ships.clone();
        let view = WorldView {
            theme: &theme,
            arena: v.arena,
            bullets: &v.replica.pool,
            alpha,
            players: &snap.players,
            own_id: self.client.player_id,
            own_pos: self.client.pred,
            own_aim: self.client.own_aim(),
            enemies: &snap.enemies,
            enemy_radius: &enemy_r,
            boss: snap.boss,
            boss_radius: &boss_r,
            portals: &portals,
            portal_radius: defs.hub.portal_radius,
            flashes: &flashes,
            bursts: &bursts,
            flares: &flares,
            telegraphs: &telegraphs,
            time,
            sparks: &sparks,
            ships: &ships,
        };
        scene::build(&view, palette, out);
        scene::apply_look(out, look.low_effects, look.bullet_outline);
        let mut cam = Camera::fit(v.arena, screen, time);
        cam.outline = if look.bullet_outline { 1.0 } else { 0.0 };
        // "Low effects" turns the glow pass off.
        cam.bloom = if look.low_effects { 0.0 } else { crate::app::render::scene::BLOOM };
        if let Some(t) = self.shake_at.map(|t| t.elapsed().as_secs_f32()).filter(|t| *t < SHAKE_SECONDS) {
            if look.screen_shake {
                let k = SHAKE_PX * (1.0 - t / SHAKE_SECONDS);
                cam.origin = cam.origin + Vec2::new((t * 95.0).sin() * k, (t * 71.0).cos() * k);
            }
        }
        if self.hitstop.is_some() && self.frozen.is_none() {
            self.frozen = Some((out.clone(), cam));
        }
        Some(cam)
    }

    /// What the HUD shows. `cam` and `ppp` place portal labels.
    pub fn hud(&mut self, cam: Option<&Camera>, ppp: f32, look: &Settings, hint: Option<String>) -> HudState {
        self.refresh_host_lines();
        let net_overlay = look.show_net_overlay;
        let fresh = (self.client.notices_seen - self.notices_seen).min(self.client.notices.len() as u64) as usize;
        let now = Instant::now();
        for n in self.client.notices.iter().skip(self.client.notices.len() - fresh) {
            self.notices.push((n.clone(), now));
        }
        self.notices_seen = self.client.notices_seen;
        self.notices.retain(|(_, t)| t.elapsed().as_secs_f32() < NOTICE_SECONDS);
        let cut = self.notices.len().saturating_sub(5);
        self.notices.drain(..cut);
        let c = &self.client;
        let own = c.own_state();
        let v = c.view.as_ref();
        let empty = crate::sim::ClientDefs::default();
        let defs = c.defs().map_or(&empty, |d| d.as_ref());
        let place = defs.place_name(v.map_or("", |v| v.dungeon.as_str()));
        let snap = v.and_then(|v| v.latest());
        let boss = snap.and_then(|s| s.boss).and_then(|b| {
            let bd = defs.bosses.get(b.def as usize)?;
            let phase = bd.phases.get(b.phase as usize).cloned().unwrap_or_default();
            Some((bd.name.clone(), phase, b.hp as f32 / b.max_hp.max(1) as f32))
        });
        let roster = v
            .map(|v| {
                v.roster
                    .iter()
                    .map(|(id, name)| {
                        let alive = snap
                            .and_then(|s| s.players.iter().find(|p| p.id == *id))
                            .is_none_or(|p| p.flags & F_DEAD == 0);
                        (name.clone(), Some(*id) == c.player_id, alive)
                    })
                    .collect()
            })
            .unwrap_or_default();
        let me = c.pred;
        let portals = match (v, cam) {
            (Some(v), Some(cam)) if v.dungeon.is_empty() => defs
                .portals()
                .into_iter()
                .map(|(d, p)| {
                    let at = Vec2::new(p[0], p[1]);
                    let s = cam.world_to_screen(at) * (1.0 / ppp);
                    let near = me.is_some_and(|m| m.distance(at) <= defs.hub.portal_radius);
                    let label = portal_label(
                        &defs.place_name(&d),
                        self.profile.dungeons.get(&d),
                        c.records.iter().find(|r| r.dungeon == d),
                    );
                    let difficulty = defs.dungeon(&d).map_or(0, |g| g.difficulty);
                    let radius = crate::app::render::scene::portal_arch(defs.hub.portal_radius) * cam.scale / ppp;
                    crate::app::ui::hud::PortalLabel { text: label, at: egui::pos2(s.x, s.y), near, difficulty, radius }
                })
                .collect(),
            _ => Vec::new(),
        };
        // Names over the other players' ships.
        let name_tags = match (v, cam, snap) {
            (Some(v), Some(cam), Some(s)) => {
                let tag = |at: Vec2| {
                    let sp = cam.world_to_screen(at) * (1.0 / ppp);
                    egui::pos2(sp.x, sp.y)
                };
                let mut tags: Vec<(String, egui::Pos2)> = s
                    .players
                    .iter()
                    .filter(|p| Some(p.id) != c.player_id)
                    .filter_map(|p| Some((v.roster.iter().find(|(id, _)| *id == p.id)?.1.clone(), tag(p.pos))))
                    .collect();
                // In the hub, what stands there is named (the training dummy).
                if v.dungeon.is_empty() {
                    tags.extend(s.enemies.iter().filter_map(|e| {
                        let look = defs.enemies.get(e.def as usize)?;
                        Some((look.name.clone(), tag(e.pos + Vec2::new(0.0, -look.radius))))
                    }));
                }
                tags
            }
            _ => Vec::new(),
        };
        let damage = match cam {
            Some(cam) if look.damage_numbers => self
                .damage
                .iter()
                .map(|(who, n, at, t)| {
                    // From the top of what was hit (above an enemy's health bar).
                    let r = match who {
                        WireTarget::Enemy(id) => snap
                            .and_then(|s| s.enemies.iter().find(|e| e.id == *id))
                            .and_then(|e| defs.enemies.get(e.def as usize))
                            .map_or(14.0, |d| d.radius),
                        WireTarget::Boss => snap
                            .and_then(|s| s.boss)
                            .and_then(|b| defs.bosses.get(b.def as usize))
                            .map_or(32.0, |d| d.radius),
                        WireTarget::Player(_) => 10.0,
                    };
                    let s = cam.world_to_screen(*at - Vec2::new(0.0, r + 6.0)) * (1.0 / ppp);
                    let taken = matches!(who, WireTarget::Player(_));
                    let text = if taken { format!("-{n}") } else { n.to_string() };
                    (text, egui::pos2(s.x, s.y), t.elapsed().as_secs_f32() / DAMAGE_SECONDS, taken)
                })
                .collect(),
            _ => Vec::new(),
        };
        // Where the enemies are drawn (interpolated, a little behind the latest snapshot).
        let drawn = c.interpolated();
        let health_bars = match (cam, drawn.as_ref()) {
            (Some(cam), Some(s)) if look.enemy_health_bars => s
                .enemies
                .iter()
                .filter_map(|e| {
                    let (_, full, _) = self.enemy_hp.get(&e.id).copied()?;
                    if e.hp >= full || full == 0 {
                        return None;
                    }
                    let r = defs.enemies.get(e.def as usize).map_or(14.0, |d| d.radius);
                    let at = cam.world_to_screen(e.pos - Vec2::new(0.0, r + 7.0)) * (1.0 / ppp);
                    let w = (2.0 * r * cam.scale / ppp).max(18.0);
                    Some((egui::pos2(at.x, at.y), w, e.hp as f32 / full as f32))
                })
                .collect(),
            _ => Vec::new(),
        };
        let st = c.net.stats(0);
        let now = Instant::now();
        let dt = now.duration_since(self.rates.0).as_secs_f32();
        if dt >= 1.0 {
            self.rates.3 = (st.bytes_sent - self.rates.1.min(st.bytes_sent)) as f32 / dt / 1024.0;
            self.rates.4 = (st.bytes_received - self.rates.2.min(st.bytes_received)) as f32 / dt / 1024.0;
            self.rates = (now, st.bytes_sent, st.bytes_received, self.rates.3, self.rates.4);
        }
        let net = net_overlay.then(|| NetOverlay {
            ping_ms: st.rtt_ms,
            loss: st.loss,
            up_kbs: self.rates.3,
            down_kbs: self.rates.4,
            pred_err_px: c.stats.pred_err_recent,
            lead: c.lead(),
            route: c.net.route(),
        });
        if self.banner.as_ref().is_some_and(|(_, t)| t.elapsed().as_secs_f32() > 3.0) {
            self.banner = None;
        }
        HudState {
            hp: own.map_or(PLAYER_MAX_HP, |o| if o.flags & F_DOWNED != 0 { 0 } else { o.hp as i32 }),
            max_hp: PLAYER_MAX_HP,
            dead: own.is_some_and(|o| o.flags & F_DEAD != 0),
            lockout_left: self.lockout_left(),
            escape: own
                .filter(|o| o.flags & F_CHANNELLING != 0)
                .map_or(0.0, |o| o.escape as f32 / crate::sim::ESCAPE_CHANNEL_TICKS as f32),
            in_dungeon: v.is_some_and(|v| !v.dungeon.is_empty()),
            place,
            boss,
            roster,
            net,
            portals,
            // Watching a friend: said at all times, with the way back.
            banner: self.banner.as_ref().map(|(b, _)| b.clone()).or_else(|| {
                c.watch_target().filter(|w| !w.is_empty()).map(|who| format!("Watching {who} (Esc: Stop watching)"))
            }),
            hint,
            // A lesson shows for eight seconds (fading in its last), or until the next.
            lesson: self.lesson.as_ref().and_then(|(t, at)| {
                let age = at.elapsed().as_secs_f32();
                (age < LESSON_SECONDS).then(|| (t.clone(), (LESSON_SECONDS - age).min(1.0)))
            }),
            notices: self.notices.iter().map(|(n, _)| n.clone()).collect(),
            // In the hub: where this is (the server's name and message of the day; when
            // hosting, where friends join).
            server_line: (v.is_some_and(|v| v.dungeon.is_empty()) && !c.server_name.is_empty()).then(|| {
                match (&self.join_line, c.motd.is_empty()) {
                    (Some(j), _) => format!("{} · {j}", c.server_name),
                    (None, true) => c.server_name.clone(),
                    (None, false) => format!("{} — {}", c.server_name, c.motd),
                }
            }),
            leave_key: String::new(),
            interact_key: String::new(),
            name_tags,
            damage,
            health_bars,
            downed: own
                .filter(|o| o.flags & F_DOWNED != 0)
                .map(|o| (o.hp as u32, o.escape as f32 / crate::sim::config::REVIVE_TICKS as f32)),
            out: own.is_some_and(|o| o.flags & F_OUT != 0),
            run: v.is_some_and(|v| !v.dungeon.is_empty()).then_some(c.run),
            summary: c.summary.clone(),
        }
    }

    /// The other players in the host's place, when this game hosts (None: not hosting).
    pub fn kickable(&self) -> Option<Vec<(u32, String)>> {
        self.server.as_ref()?;
        let me = self.client.player_id;
        let v = self.client.view.as_ref()?;
        Some(v.roster.iter().filter(|(id, _)| Some(*id) != me).cloned().collect())
    }

    /// Runs a console command on the server this game hosts (kick and ban from the menu).
    pub fn host_command(&self, line: &str) {
        if let Some(s) = &self.server {
            s.command(line);
        }
    }

    /// Ends the session the way the menu's "Disconnect" does.
    pub fn close(&mut self) {
        self.client.disconnect();
        if let Some(mut s) = self.server.take() {
            s.stop();
        }
    }
}

/// Sessions over the network (or the in-process pipe to this game's own server).
impl Session {
    pub fn host(content: &Content, settings: &crate::app::settings::Settings) -> anyhow::Result<Session> {
        let (name, address, port) = (&settings.name, &settings.host_address, settings.host_port);
        let ip: std::net::IpAddr = address
            .parse()
            .map_err(|_| anyhow::anyhow!("the host address '{address}' in settings is not an IP address"))?;
        let watch = settings.watch_mods.then(|| settings.mod_choice());
        // Friends see this name in their Join menu's LAN list and when they join.
        let relay = if settings.relay.trim().is_empty() {
            None
        } else {
            let bind = std::net::SocketAddr::new(ip, port);
            Some(crate::net::relay::RelayLink {
                hide: settings.relay_hide_address,
                ..crate::net::relay::RelayLink::resolve(&settings.relay, bind)
                    .map_err(|e| anyhow::anyhow!("the relay in settings: {e}"))?
            })
        };
        let config = crate::server::ServerConfig {
            relay,
            name: crate::protocol::names::clip(&format!("{}'s game", crate::protocol::names::sanitize(name)), 48),
            // The host's bans (Kick/Ban in the in-game menu) last across games.
            ban_list: crate::crash::data_dir().map(|d| d.join("host_bans.toml")),
            ..Default::default()
        };
        let mut server = match ListenServer::start_watching(
            content.clone(),
            SocketAddr::new(ip, port),
            config.clone(),
            watch.clone(),
        ) {
            Ok(s) => s,
            // The port is taken (another game?): take any free one and say which.
            Err(_) => ListenServer::start_watching(content.clone(), SocketAddr::new(ip, 0), config, watch)?,
        };
        if settings.upnp {
            server.map_port();
        }
        // The host's client holds the very content the server runs: nothing to transfer.
        let installed = Some(ClientContent::of(content));
        let client = Client::new(Box::new(server.local.connect()) as Box<dyn Transport>, name, installed);
        let mut s = Session::new(client, Some(server));
        let got = s.server.as_ref().map_or(port, |l| l.addr.port());
        if got != port {
            // Said where the host looks (the hub, for as long as it is hosting).
            if let Some(l) = s.join_line.as_mut() {
                l.push_str(&format!(" (port {port} was taken, another game?)"));
            }
        }
        println!("hailfire: {}", s.host_info.as_deref().unwrap_or(""));
        Ok(s)
    }

    /// Joins a friend: offers the content installed here; if the server's differs, it is
    /// taken from the cache or downloaded, and played for this session only.
    pub fn join(
        content: &Content,
        name: &str,
        addr: &str,
        password: Option<String>,
        accept_key: Option<[u8; 32]>,
    ) -> anyhow::Result<Session> {
        Self::join_watching(content, name, addr, password, accept_key, None)
    }

    /// [`Session::join`], as a spectator of the player called `watch` when given (no body,
    /// no input: the camera follows them from place to place).
    pub fn join_watching(
        content: &Content,
        name: &str,
        addr: &str,
        password: Option<String>,
        accept_key: Option<[u8; 32]>,
        watch: Option<&str>,
    ) -> anyhow::Result<Session> {
        // `CODE@RELAY`: a game behind a relay.
        let relayed = crate::net::relay::parse_join(addr);
        let target = relayed.as_ref().map_or(addr, |(_, r)| r.as_str());
        let sa = crate::net::resolve(target).map_err(|e| anyhow::anyhow!("cannot find the server '{target}': {e}"))?;
        let security = crate::net::secure::ClientSecurity {
            known: crate::net::secure::KnownServers::default_path()
                .map(|path| crate::net::secure::KnownServers { path }),
            accept_new_key: false,
            accept_key,
            password: password.clone().filter(|p| !p.is_empty()),
            pin_as: Some(addr.to_string()),
            identity: Some(crate::net::secure::Identity::player()?),
            relay_code: relayed.map(|(c, _)| c),
        };
        let net = crate::net::EnetTransport::connect_secure(sa, security)?;
        let installed = content.base_loaded().then(|| ClientContent::of(content));
        let cache = ContentCache::default_dir().map(ContentCache::new);
        let net: Box<dyn Transport> = Box::new(net);
        let client = match watch {
            Some(who) => Client::watching(net, name, installed, who),
            None => Client::new(net, name, installed),
        };
        let mut s = Session::new(client.with_cache(cache), None);
        s.addr = Some(addr.to_string());
        s.password = password;
        Ok(s)
    }
}
