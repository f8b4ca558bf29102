//! The predicting client: input numbering ahead of the server with a lead that adapts to
//! how early the server says each frame arrived (kept inside a band), an ack-stall
//! detector, prediction and reconciliation of the local player through the server's own
//! movement function, interpolation of everything else, delta snapshots, and the bullet
//! replica. It is transport-agnostic: the host's client and a remote one are the same.
//!
//! # The input lead controller
//! Every frame is numbered `lead` ticks ahead of the client's estimate of the server's
//! tick, and each input packet says which lead its newest frame was numbered with. For
//! every frame, at its first arrival, the server takes its margin `m` (how many ticks
//! before it was needed it arrived) and works out `r = lead - m`, the lead that frame
//! needed: the round trip, the jitter and any loss it met (a lost copy arrives a tick
//! later, in the next packet), as the server saw them. Each snapshot reports the largest
//! `r` since the previous one and how many frames came late or never (`InputReport`:
//! one byte). The target lead is the 99th percentile of those reports over the last
//! `LEAD_WINDOW` (10 s) plus `LEAD_SAFETY`; a report of a late frame raises the target at
//! once to cover it, and the target falls by at most one tick per `LEAD_SHRINK_TICKS`
//! when the link calms. The lead
//! follows the target by numbering two frames in one tick (both carry the current input,
//! so the server never coasts through the gap) or, to shrink, by pausing the numbering for
//! a tick now and then. Redundancy (copies of recent frames per packet) grows with the
//! snapshot loss the client measures and with frames the server reports missing.

pub mod bot;
pub mod replay;
pub mod replica;

use std::collections::VecDeque;

use std::sync::Arc;

use crate::net::{NetEvent, Transport};
use crate::protocol::content::{unpack, ClientContent, ContentCache, ContentDigest, MAX_CONTENT_BYTES};
use crate::protocol::messages::*;
use crate::protocol::*;
use crate::sim::movement::step_frame;
use crate::sim::{InputFrame, Vec2, TICK_RATE};
use replica::Replica;

/// Telegraphs a game keeps showing at once (the rest of a burst are not kept).
pub const MAX_TELEGRAPHS_HELD: usize = 1024;

/// The client's lead (input tick minus its estimate of the server tick) stays in this band;
/// leaving it forces a re-sync. `INPUT_MAX_LEAD` on the server is far wider (a test checks).
pub const INPUT_LEAD_MIN: i64 = 3;
pub const INPUT_LEAD_MAX: i64 = 20;
/// Lead with no latency information yet.
pub const INPUT_TARGET_LEAD: i64 = 4;
/// Input reports (one per snapshot) the lead controller remembers: 10 s.
pub const LEAD_WINDOW: usize = 200;
/// The share of frames the lead must cover, and the margin kept above it, ticks.
pub const LEAD_PERCENTILE: f64 = 0.99;
pub const LEAD_SAFETY: f64 = 1.0;
/// The target lead falls by at most one tick this often once the link calms (2 s).
pub const LEAD_SHRINK_TICKS: u64 = 120;
/// While the lead is above its target, the numbering pauses one tick in this many (one in
/// `LEAD_PAUSE_FAST` when it is far above, after a clock jump).
pub const LEAD_PAUSE_EVERY: u64 = 20;
pub const LEAD_PAUSE_FAST: u64 = 2;
/// Frames are resent in this many packets after their own while a reported missing frame
/// is this recent (ticks).
pub const MISSING_MEMORY_TICKS: u64 = 600;
/// Snapshots without `last_input_tick` advancing before the client re-syncs.
pub const INPUT_ACK_STALL_LIMIT: u32 = 8;
/// Reconciliation: an error beyond this snaps; smaller errors blend.
pub const SNAP_DISTANCE: f32 = 24.0;
pub const BLEND: f32 = 0.3;
/// Most client events kept undrained.
pub const MAX_PENDING_EVENTS: usize = 1024;
/// Server notices a client keeps (the newest).
pub const MAX_NOTICES: usize = 32;
/// Joining a server that does not answer fails after this long.
pub const JOIN_TIMEOUT_MS: f64 = 8_000.0;
/// A content download that makes no progress for this long fails.
pub const CONTENT_STALL_MS: f64 = 10_000.0;
/// A content download fails if it is not done this long after the offer (the server gives
/// up at the same time).
pub const CONTENT_TIMEOUT_MS: f64 = 60_000.0;
/// Remote entities are drawn this many ticks in the past, between two snapshots.
pub const INTERP_DELAY_TICKS: f64 = SNAPSHOT_EVERY_TICKS as f64 * 2.0;

/// What the player is doing this tick.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct InputSample {
    pub mv: Vec2,
    pub aim: f32,
    pub buttons: u8,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Phase {
    Connecting,
    Joined,
    /// Could not join or the connection ended; the words are for the player.
    Failed(String),
    /// The player chose to disconnect.
    Closed,
}

/// Things the app turns into sound and flashes.
#[derive(Clone, Debug, PartialEq)]
pub enum ClientEvent {
    Entered {
        dungeon: String,
    },
    /// The server's looks changed and this game now holds them (a live content update):
    /// whatever was drawn from the old content is drawn again from `Client::content`.
    ContentUpdated,
    Sfx {
        name: String,
        pos: Vec2,
    },
    /// A warning before an attack, to draw for its ticks.
    Telegraph(crate::sim::script::Telegraph),
    /// A script's words for the players (a tutorial's lesson).
    Hint(String),
    Hit {
        target: WireTarget,
    },
    Death {
        target: WireTarget,
    },
    Phase {
        phase: u8,
    },
    Cleared,
    /// A flare went off at `pos` (the player's, to be seen and heard).
    Flare {
        player: u32,
        pos: Vec2,
    },
    Out {
        player: u32,
    },
    Revived {
        player: u32,
        by: u32,
    },
    Wave {
        wave: u32,
    },
    /// A run ended for this player: the summary is in `Client::summary`.
    RunEnded,
}

/// The receiver's own run counts, as the server last said them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunStatus {
    pub flares: u8,
    pub charge: u8,
    pub grazes: u32,
    pub score: u32,
}

#[derive(Clone, Debug, Default)]
pub struct ClientStats {
    /// Prediction error (px) measured at each reconciliation.
    pub pred_err_sum: f64,
    pub pred_err_n: u64,
    pub pred_err_max: f32,
    /// Exponential average of recent prediction error, px.
    pub pred_err_recent: f32,
    pub snaps_over_threshold: u64,
    /// Times the local ship was put where it died (not counted as prediction errors).
    pub death_corrections: u64,
    /// Frames the server reported arriving late (after their tick) or never.
    pub late_frames: u64,
    pub missing_frames: u64,
    /// Snapshots that could not be rebuilt (their base was unknown).
    pub snapshots_unresolved: u64,
    pub snapshots_delta: u64,
    /// The lead controller's current target, and the copies each input packet carries.
    pub lead_target: i64,
    pub redundancy: usize,
    /// The client's estimate of snapshot loss (0..1).
    pub loss: f32,
    pub resyncs: u32,
    pub stall_resyncs: u32,
    pub snapshots: u64,
    pub inputs_sent: u64,
    /// The server's counts for this player (Stats message).
    pub server_inputs_dropped: u32,
    pub server_ticks_coasted: u32,
    pub malformed: u64,
    /// Payload bytes received per message type (byte 0 of each packet).
    pub bytes_by_type: [u64; 32],
    /// Content received at join (compressed bytes), and whether the cache answered.
    pub content_bytes: u64,
    pub content_from_cache: bool,
    /// Live content updates applied while playing (looks changed on the server), and
    /// those refused (what the server sent could not replace the running content).
    pub content_updates: u32,
    pub content_updates_refused: u32,
}

impl ClientStats {
    pub fn pred_err_mean(&self) -> f64 {
        if self.pred_err_n == 0 {
            0.0
        } else {
            self.pred_err_sum / self.pred_err_n as f64
        }
    }
}

/// Everything the client knows about the instance it is in.
#[derive(Clone)]
pub struct View {
    pub instance: u32,
    /// Dungeon id, "" for the hub.
    pub dungeon: String,
    pub arena: Vec2,
    pub replica: Replica,
    pub roster: Vec<(u32, String)>,
    /// The ship each player here flies (its index in the content's ships).
    pub ships: Vec<(u32, u16)>,
    /// The latest few snapshots, oldest first.
    pub snaps: VecDeque<Snapshot>,
    pub cleared: bool,
    /// Warnings still showing, each with the server tick it ends on (for bots: a person
    /// reads the same warnings on screen).
    pub telegraphs: Vec<(crate::sim::script::Telegraph, u32)>,
}

impl View {
    pub fn latest(&self) -> Option<&Snapshot> {
        self.snaps.back()
    }
}

/// A content download in progress.
#[derive(Clone, Debug)]
pub struct Download {
    pub digest: ContentDigest,
    pub raw_len: usize,
    pub packed_len: usize,
    buf: Vec<u8>,
    offered_ms: f64,
    last_ms: f64,
    /// A live update while playing (not the join's download).
    live: bool,
}

impl Download {
    fn new(digest: ContentDigest, raw_len: usize, packed_len: usize, now_ms: f64, live: bool) -> Self {
        Download {
            digest,
            raw_len,
            packed_len,
            buf: Vec::with_capacity(packed_len.min(64 << 10)),
            offered_ms: now_ms,
            last_ms: now_ms,
            live,
        }
    }

    pub fn received(&self) -> usize {
        self.buf.len()
    }
}

#[derive(Clone)]
pub struct Client<T: Transport> {
    pub net: T,
    pub phase: Phase,
    pub name: String,
    /// Content this game has installed (offered at Hello), if any.
    installed: Option<ClientContent>,
    /// The content of the session once joined: the installed one, or the server's.
    pub content: Option<ClientContent>,
    /// The server's content, held and validated, waiting for Welcome.
    incoming: Option<ClientContent>,
    pub download: Option<Download>,
    cache: Option<ContentCache>,
    /// Report the view delay for lag compensation (on; off only to measure without it).
    pub lag_compensation: bool,
    /// Join as a spectator of this player (by name): no body, no input.
    watch: Option<String>,
    /// Joined as a spectator: `player_id` is the watched player's, nothing is predicted
    /// and nothing is sent.
    pub spectating: bool,
    now_ms: f64,
    /// When the server last moved the join forward (an offer, the end of a download).
    heard_ms: Option<f64>,
    /// The content the server offered (at most one offer per connection).
    offered: Option<ContentDigest>,
    pub player_id: Option<u32>,
    /// The server's name and message of the day (from `Welcome`).
    pub server_name: String,
    pub motd: String,
    /// What the server said (operator's `say`, answers to admin commands), oldest first;
    /// the newest `MAX_NOTICES` are kept. `notices_seen` counts every notice ever received,
    /// so a reader can tell which are new.
    pub notices: VecDeque<String>,
    pub notices_seen: u64,
    started_ms: Option<f64>,
    /// Estimate of the newest server tick this client could know about.
    pub est: f64,
    /// Tick number of the next input frame.
    pub input_tick: u32,
    last_sent: Option<u32>,
    /// Client ticks since joining.
    ticks: u64,
    /// The lead the newest frame was numbered with (sent with each input packet).
    sent_lead: i64,
    /// Frames numbered this tick (all go in this tick's packet).
    fresh_frames: usize,
    /// The leads the server reported as needed (see the module docs), newest last.
    needed: VecDeque<f32>,
    /// The controller's target (0: no report yet), when it last changed, and when the
    /// numbering last paused.
    target: i64,
    target_at: u64,
    paused_at: u64,
    /// Snapshot loss estimate: decayed counts of snapshots expected and received.
    snaps_expected: f32,
    snaps_got: f32,
    missing_at: Option<u64>,
    /// Rebuilt snapshots that deltas may be based on, and the newest one's tick.
    snap_hist: VecDeque<Snapshot>,
    snap_ack: Option<u32>,
    last_acked: Option<u32>,
    stall: u32,
    unacked: VecDeque<InputFrame>,
    recent: VecDeque<InputFrame>,
    pub view: Option<View>,
    /// Predicted position of the local player.
    pub pred: Option<Vec2>,
    pub stats: ClientStats,
    /// Things for the app to turn into sound and flashes; it drains them every frame. At
    /// most `MAX_PENDING_EVENTS` wait (the oldest go first), so a client nobody drains (the
    /// bot) does not grow.
    pub events: Vec<ClientEvent>,
    /// The last run's summary, until the player dismisses it (the app) or a new one comes.
    pub summary: Option<crate::sim::events::RunSummary>,
    /// Every summary this client was sent, in order (bots print them).
    pub summaries: Vec<crate::sim::events::RunSummary>,
    /// The player's flares, graze charge, grazes and score in the current run.
    pub run: RunStatus,
    /// The server's records (shown at the portals).
    pub records: Vec<crate::protocol::messages::ServerRecord>,
    /// Who plays on the server and where (name, dungeon id; "" the hub), from `People`.
    pub people: Vec<(String, String)>,
    inbox: Vec<NetEvent>,
    transport_connected: bool,
    /// Recording this session (`--record`): everything received, tick by tick, from the
    /// server's Welcome on (see [`replay`]).
    pub recorder: Option<replay::Recorder>,
}

/// Shown when a server never answers.
pub const NO_ANSWER: &str = "no answer from the server within 8 seconds: check the address and port (a server running a much older Hailfire, without encryption, does not answer either)";

impl<T: Transport> Client<T> {
    /// A client offering `installed` content (None: a client with no content of its own,
    /// which plays whatever the server sends).
    /// A spectator of the player called `target` (see `ClientMsg::Watch`).
    pub fn watching(net: T, name: &str, installed: Option<ClientContent>, target: &str) -> Self {
        let mut c = Client::new(net, name, installed);
        c.watch = Some(target.to_string());
        c
    }

    pub fn new(net: T, name: &str, installed: Option<ClientContent>) -> Self {
        Client {
            lag_compensation: true,
            watch: None,
            spectating: false,
            net,
            phase: Phase::Connecting,
            name: crate::protocol::names::sanitize(name),
            installed,
            content: None,
            incoming: None,
            download: None,
            cache: None,
            now_ms: 0.0,
            heard_ms: None,
            offered: None,
            player_id: None,
            server_name: String::new(),
            motd: String::new(),
            notices: VecDeque::new(),
            notices_seen: 0,
            started_ms: None,
            est: 0.0,
            input_tick: 0,
            last_sent: None,
            ticks: 0,
            sent_lead: 0,
            fresh_frames: 0,
            needed: VecDeque::new(),
            target: 0,
            target_at: 0,
            paused_at: 0,
            snaps_expected: 0.0,
            snaps_got: 0.0,
            missing_at: None,
            snap_hist: VecDeque::new(),
            snap_ack: None,
            last_acked: None,
            stall: 0,
            unacked: VecDeque::new(),
            summary: None,
            summaries: Vec::new(),
            run: RunStatus::default(),
            records: Vec::new(),
            recent: VecDeque::new(),
            view: None,
            pred: None,
            stats: ClientStats::default(),
            events: Vec::new(),
            inbox: Vec::new(),
            transport_connected: false,
            recorder: None,
            people: Vec::new(),
        }
    }

    /// Keeps received content in (and looks for offered content in) this cache.
    pub fn with_cache(mut self, cache: Option<ContentCache>) -> Self {
        self.cache = cache;
        self
    }

    /// The definitions of the session's content (once joined).
    pub fn defs(&self) -> Option<&Arc<crate::sim::ClientDefs>> {
        self.content.as_ref().map(|c| &c.defs)
    }

    /// Content download progress (bytes received, bytes in all), while one runs.
    pub fn download_progress(&self) -> Option<(usize, usize)> {
        self.download.as_ref().map(|d| (d.received(), d.packed_len))
    }

    fn fail(&mut self, why: String) {
        tracing::warn!("{why}");
        self.phase = Phase::Failed(why);
        self.download = None;
        self.net.disconnect(0);
    }

    pub fn is_joined(&self) -> bool {
        self.phase == Phase::Joined && self.view.is_some()
    }

    /// Flies ship number `ship` (an index into the content's ships) from the next volley;
    /// the server takes it in the hub.
    pub fn choose_ship(&mut self, ship: u16) {
        if self.is_joined() {
            let msg = ClientMsg::ChooseShip { ship };
            self.net.send(0, crate::protocol::CH_CONTROL, &msg.encode());
        }
    }

    /// Sends a console command for the server to run (needs its admin password; the
    /// answers arrive as notices).
    pub fn admin(&mut self, password: &str, command: &str) {
        if self.is_joined() {
            let msg = ClientMsg::Admin { password: password.to_string(), command: command.to_string() };
            self.net.send(0, crate::protocol::CH_CONTROL, &msg.encode());
        }
    }

    /// Milliseconds before a join that hears nothing gives up (None once joined, or while
    /// the content downloads, which has its own limits).
    pub fn join_wait_left_ms(&self) -> Option<f64> {
        if self.is_joined() || self.download.is_some() {
            return None;
        }
        let started = self.started_ms?;
        Some((JOIN_TIMEOUT_MS - (self.now_ms - self.heard_ms.unwrap_or(started))).max(0.0))
    }

    /// The menu's "Disconnect": close the connection, exactly as a dropped one would.
    pub fn disconnect(&mut self) {
        self.net.disconnect(0);
        let mut sink = Vec::new();
        self.net.poll(&mut sink);
        self.phase = Phase::Closed;
    }

    /// The lead the client aims for: the controller's target once the server has reported
    /// arrivals, else the round trip plus two ticks.
    pub fn target_lead(&self) -> i64 {
        if self.target > 0 {
            return self.target;
        }
        let rtt_ticks = self.net.stats(0).rtt_ms as f64 * TICK_RATE as f64 / 1000.0;
        let t = (rtt_ticks + 2.0).ceil() as i64;
        t.clamp(INPUT_LEAD_MIN + 1, INPUT_LEAD_MAX - 1).max(INPUT_TARGET_LEAD)
    }

    /// The server tick the client believes is current. `est` is a running sum corrected in
    /// small steps, so it sits a hair under a whole tick: that must not count as a tick.
    fn est_tick(&self) -> i64 {
        (self.est + 1e-6).floor() as i64
    }

    pub fn lead(&self) -> i64 {
        self.input_tick as i64 - self.est_tick()
    }

    /// Copies of recent frames each input packet carries: more when snapshots are being
    /// lost (the uplink is likely as lossy) or a frame was reported missing lately.
    pub fn redundancy(&self) -> usize {
        let loss = self.loss_estimate();
        let mut n = if loss < 0.02 {
            INPUT_REDUNDANCY
        } else if loss < 0.06 {
            4
        } else if loss < 0.12 {
            5
        } else {
            6
        };
        if self.missing_at.is_some_and(|t| self.ticks.saturating_sub(t) < MISSING_MEMORY_TICKS) {
            n += 1;
        }
        n.min(MAX_INPUT_FRAMES)
    }

    /// Share of snapshots lost recently (0..1).
    pub fn loss_estimate(&self) -> f32 {
        if self.snaps_expected < 20.0 {
            0.0
        } else {
            (1.0 - self.snaps_got / self.snaps_expected).clamp(0.0, 1.0)
        }
    }

    /// For tests: pretend the client's clock jumped `ticks` ahead (or behind).
    #[cfg(any(test, feature = "test-hooks"))]
    pub fn inject_drift(&mut self, ticks: i64) {
        self.input_tick = (self.input_tick as i64 + ticks).max(0) as u32;
    }

    /// For tests: shift the server-tick estimate and the input numbering together, so the
    /// lead looks normal while every input lands outside the server's window.
    #[cfg(any(test, feature = "test-hooks"))]
    pub fn inject_clock_error(&mut self, ticks: i64) {
        self.est += ticks as f64;
        self.input_tick = (self.input_tick as i64 + ticks).max(0) as u32;
    }

    /// Takes the server's input report into the controller (see the module docs).
    fn on_report(&mut self, r: InputReport) {
        if r.missing > 0 {
            self.stats.missing_frames += r.missing as u64;
            self.missing_at = Some(self.ticks);
        }
        self.stats.late_frames += r.late as u64;
        let late_need = (r.late > 0).then_some(r.max_need as f32);
        self.needed.push_back(r.max_need as f32);
        while self.needed.len() > LEAD_WINDOW {
            self.needed.pop_front();
        }
        if self.needed.is_empty() {
            return;
        }
        let mut v: Vec<f32> = self.needed.iter().copied().collect();
        let k = ((v.len() as f64 * LEAD_PERCENTILE).ceil() as usize).clamp(1, v.len()) - 1;
        let (_, p, _) = v.select_nth_unstable_by(k, f32::total_cmp);
        let mut want = *p as f64 + LEAD_SAFETY;
        if let Some(l) = late_need {
            want = want.max(l as f64 + LEAD_SAFETY);
        }
        let want = (want.ceil() as i64).clamp(INPUT_LEAD_MIN + 1, INPUT_LEAD_MAX - 1);
        if self.target == 0 || want > self.target {
            self.target = want;
            self.target_at = self.ticks;
        } else if want < self.target && self.ticks.saturating_sub(self.target_at) >= LEAD_SHRINK_TICKS {
            self.target -= 1;
            self.target_at = self.ticks;
        }
        self.stats.lead_target = self.target;
    }

    fn resync(&mut self, stall: bool) {
        self.stats.resyncs += 1;
        if stall {
            self.stats.stall_resyncs += 1;
        }
        if let Some(s) = self.view.as_ref().and_then(|v| v.latest()) {
            self.est = s.tick as f64;
        }
        let mut t = self.est_tick() + self.target_lead();
        if let Some(a) = self.last_acked {
            t = t.max(a as i64 + 1);
        }
        self.input_tick = t.max(0) as u32;
        self.stall = 0;
    }

    /// One client tick (60 Hz): network in, then this tick's input out and predicted.
    pub fn update(&mut self, now_ms: f64, input: InputSample) {
        if let Some(r) = self.recorder.as_mut() {
            r.begin(now_ms, input);
        }
        self.update_inner(now_ms, input);
        if let Some(r) = self.recorder.as_mut() {
            r.end(self.view.as_ref().map(|v| &v.replica), self.content.as_ref());
        }
    }

    /// The player this client joined to watch (a spectator), if any.
    pub fn watch_target(&self) -> Option<&str> {
        self.watch.as_deref()
    }

    /// Records what this client receives, from the server's Welcome on: call it before
    /// the client joins (a recording must start at the Welcome to play back).
    pub fn record(&mut self) {
        self.recorder = Some(replay::Recorder::new(self.watch.is_some()));
    }

    /// The recording, taken out of the recorder (None: not recording, or nothing joined
    /// yet). Called once, when the session ends.
    pub fn recording(&mut self) -> Option<replay::Replay> {
        let content = self.content.clone()?;
        let name = self.name.clone();
        let r = self.recorder.as_mut().filter(|r| r.started)?;
        Some(r.finish(&content, &name))
    }

    fn update_inner(&mut self, now_ms: f64, input: InputSample) {
        let started = *self.started_ms.get_or_insert(now_ms);
        self.now_ms = now_ms;
        self.pump();
        if self.phase == Phase::Connecting {
            if let Some(why) = self.net.failure() {
                self.phase = Phase::Failed(why);
                self.net.disconnect(0);
                return;
            }
        }
        if self.phase == Phase::Connecting {
            let offered = self.download.as_ref().map(|d| (d.offered_ms, d.last_ms));
            match offered {
                Some((_, last)) if now_ms - last > CONTENT_STALL_MS => self.fail(format!(
                    "the server stopped sending its game content ({:.0} s without progress)",
                    CONTENT_STALL_MS / 1000.0
                )),
                Some((offered, _)) if now_ms - offered > CONTENT_TIMEOUT_MS => self.fail(format!(
                    "the server's game content did not arrive within {:.0} s",
                    CONTENT_TIMEOUT_MS / 1000.0
                )),
                Some(_) => {}
                // Waiting for an answer (to Hello, or to ContentReady).
                None if now_ms - self.heard_ms.unwrap_or(started) > JOIN_TIMEOUT_MS => {
                    let why = if self.heard_ms.is_some() {
                        "the server stopped answering while we were joining".to_string()
                    } else if let Some(w) = self.net.stuck_at() {
                        w.to_string()
                    } else {
                        NO_ANSWER.to_string()
                    };
                    self.phase = Phase::Failed(why);
                    self.net.disconnect(0);
                }
                None => {}
            }
        }
        if !self.is_joined() {
            return;
        }
        self.ticks += 1;
        self.est += 1.0;
        if self.spectating {
            // Watching: the clock, the snapshots and the replica, nothing to send.
            self.step_replica();
            return;
        }
        let lead = self.lead();
        if !(INPUT_LEAD_MIN..=INPUT_LEAD_MAX).contains(&lead) {
            self.resync(false);
        }
        let target = self.target_lead();
        let lead = self.lead();
        // Grow at once (two frames this tick); shrink gently (pause now and then).
        let pause_every = if lead > target + 4 { LEAD_PAUSE_FAST } else { LEAD_PAUSE_EVERY };
        let step = if lead < target {
            2
        } else if lead > target && self.ticks.saturating_sub(self.paused_at) >= pause_every {
            self.paused_at = self.ticks;
            0
        } else {
            1
        };
        self.input_tick += step;
        // Frames are never renumbered: a tick already sent stays what it was.
        if self.last_sent.is_some_and(|l| self.input_tick <= l) {
            self.send_input();
        } else {
            // Every tick from the last one sent up to the new number gets this input (the
            // server would otherwise coast through the gap), except ticks too old for one
            // packet to carry, through which the server will coast on the previous frame.
            let first = self.last_sent.map_or(self.input_tick, |l| l + 1);
            let fill_from = first.max(self.input_tick.saturating_sub(MAX_INPUT_FRAMES as u32 - 1));
            self.fresh_frames = (self.input_tick - fill_from + 1) as usize;
            let held = self.recent.back().copied().unwrap_or_default();
            let can_move = self.own_can_move();
            let arena = self.view.as_ref().map(|v| v.arena);
            let mut pos = self.pred;
            if let (Some(p), Some(arena), true) = (pos.as_mut(), arena, can_move) {
                for _ in first..fill_from {
                    *p = step_frame(*p, &held, arena);
                }
            }
            for t in fill_from..=self.input_tick {
                let frame = InputFrame { tick: t, mv: input.mv, aim: input.aim, buttons: input.buttons };
                // What the server will apply is the quantized frame: predict with exactly that.
                let frame = WireInput::from_frame(&frame).to_frame(t);
                self.unacked.push_back(frame);
                self.recent.push_back(frame);
                self.sent_lead = t as i64 - self.est_tick();
                if let (Some(p), Some(arena), true) = (pos.as_mut(), arena, can_move) {
                    *p = step_frame(*p, &frame, arena);
                }
            }
            while self.recent.len() > MAX_INPUT_FRAMES {
                self.recent.pop_front();
            }
            self.pred = pos;
            self.last_sent = Some(self.input_tick);
            self.send_input();
        }
        self.stats.redundancy = self.redundancy();
        self.stats.loss = self.loss_estimate();
        self.step_replica();
    }

    fn own_can_move(&self) -> bool {
        let (Some(v), Some(id)) = (&self.view, self.player_id) else { return false };
        v.latest().and_then(|s| s.players.iter().find(|p| p.id == id)).is_none_or(|p| p.flags & F_DEAD == 0)
    }

    /// How far behind the bullets it draws enemies and the boss, in quarter ticks
    /// (`VIEW_STEPS_PER_TICK`): the bullet replica
    /// runs at the estimate of the server's tick plus half the round trip, the rest are
    /// interpolated `INTERP_DELAY_TICKS` behind the estimate. The server tests this
    /// player's shots against where enemies were that long ago (lag compensation); with
    /// `lag_compensation` off (a test, the measurement) it says 0.
    pub fn view_delay(&self) -> u8 {
        self.view_delay_after(0)
    }

    /// [`Client::view_delay`] once the replica has stepped `steps` more ticks: the input
    /// goes out before this frame's replica step, and what it reports must be what this
    /// frame shows (a tick off is 3 px on a target moving 180 px/s).
    fn view_delay_after(&self, steps: u32) -> u8 {
        if !self.lag_compensation {
            return 0;
        }
        let Some(v) = &self.view else { return 0 };
        let behind = (v.replica.tick + steps) as f64 - (self.est - INTERP_DELAY_TICKS);
        (behind * crate::sim::config::VIEW_STEPS_PER_TICK as f64).round().clamp(0.0, 255.0) as u8
    }

    fn send_input(&mut self) {
        let Some(newest) = self.recent.back().map(|f| f.tick) else { return };
        // Newest first, consecutive ticks only (a gap ends the redundancy).
        let mut frames = Vec::new();
        // A tick that numbered several frames sends them all, so none is missing.
        let n = self.redundancy().max(std::mem::take(&mut self.fresh_frames));
        for (k, f) in self.recent.iter().rev().take(n).enumerate() {
            if f.tick != newest.wrapping_sub(k as u32) {
                break;
            }
            frames.push(WireInput::from_frame(f));
        }
        let lead = self.sent_lead.clamp(0, 255) as u8;
        let view = self.view_delay_after(self.replica_steps());
        let msg = ClientMsg::Input { newest_tick: newest, snap_ack: self.snap_ack, lead, view, frames };
        self.net.send(0, CH_INPUT, &msg.encode());
        self.stats.inputs_sent += 1;
    }

    /// Ticks the bullet replica steps this frame: it runs at the estimate of the server's
    /// tick plus half the round trip, catching up two at a time or waiting.
    fn replica_steps(&self) -> u32 {
        let one_way = self.net.stats(0).rtt_ms as f64 * TICK_RATE as f64 / 2000.0;
        let Some(v) = &self.view else { return 0 };
        let desired = self.est + one_way;
        let r = v.replica.tick as f64;
        if r < desired - 2.0 {
            2
        } else if r > desired + 2.0 {
            0
        } else {
            1
        }
    }

    fn step_replica(&mut self) {
        let steps = self.replica_steps();
        let Some(v) = &mut self.view else { return };
        for _ in 0..steps {
            v.replica.step();
        }
    }

    /// Reads everything that arrived.
    pub fn pump(&mut self) {
        let mut inbox = std::mem::take(&mut self.inbox);
        self.net.poll(&mut inbox);
        if let Some(r) = self.recorder.as_mut() {
            r.rtt(self.net.stats(0).rtt_ms);
            for ev in &inbox {
                if let NetEvent::Packet { channel, data, .. } = ev {
                    let welcome = data.first() == Some(&crate::protocol::messages::T_WELCOME)
                        && self.phase == Phase::Connecting
                        && self.player_id.is_none();
                    r.packet(*channel, data, welcome);
                }
            }
        }
        for ev in inbox.drain(..) {
            match ev {
                NetEvent::Connected(_) => {
                    self.transport_connected = true;
                    let content = self.installed.as_ref().map_or(ContentDigest::default(), |c| c.digest);
                    let name = self.name.clone();
                    let hello = match &self.watch {
                        None => ClientMsg::Hello { version: PROTOCOL_VERSION, content, name },
                        Some(target) => {
                            ClientMsg::Watch { version: PROTOCOL_VERSION, content, name, target: target.clone() }
                        }
                    };
                    self.net.send(0, CH_CONTROL, &hello.encode());
                }
                NetEvent::Disconnected(_) => {
                    if matches!(self.phase, Phase::Connecting | Phase::Joined) {
                        self.phase = Phase::Failed(if self.player_id.is_some() {
                            "connection lost".into()
                        } else if self.transport_connected {
                            "the server closed the connection before we could join".into()
                        } else {
                            NO_ANSWER.into()
                        });
                    }
                }
                NetEvent::Packet { data, .. } => match ServerMsg::decode(&data) {
                    Ok(m) if data[0] < 32 => {
                        self.stats.bytes_by_type[data[0] as usize] += data.len() as u64;
                        self.on_message(m)
                    }
                    Ok(m) => self.on_message(m),
                    Err(_) => self.stats.malformed += 1,
                },
            }
        }
        self.inbox = inbox;
        if self.events.len() > MAX_PENDING_EVENTS {
            let cut = self.events.len() - MAX_PENDING_EVENTS;
            self.events.drain(..cut);
        }
    }

    fn on_message(&mut self, m: ServerMsg) {
        match m {
            ServerMsg::ContentOffer { digest, raw_len, packed_len } => self.on_offer(digest, raw_len, packed_len),
            ServerMsg::ContentChunk { offset, data } => self.on_chunk(offset, &data),
            ServerMsg::ContentUpdate { digest, raw_len, packed_len } => self.on_update(digest, raw_len, packed_len),
            ServerMsg::RunSummary(sum) => {
                if self.summaries.len() < 64 {
                    self.summaries.push(sum.clone());
                }
                self.summary = Some(sum);
                self.events.push(ClientEvent::RunEnded);
            }
            ServerMsg::RunStatus { flares, charge, grazes, score } => {
                self.run = RunStatus { flares, charge, grazes, score };
            }
            ServerMsg::Records(list) => self.records = list,
            ServerMsg::People(list) => self.people = list,
            ServerMsg::Notice { text } => {
                if self.notices.len() == MAX_NOTICES {
                    self.notices.pop_front();
                }
                self.notices.push_back(text);
                self.notices_seen += 1;
            }
            ServerMsg::Welcome { player_id, tick, name, motd, .. } => {
                // Legal once, while joining, and only with the content agreed on: the
                // offered one once it is held, else (no offer) the installed one.
                if self.phase != Phase::Connecting || self.player_id.is_some() {
                    self.stats.malformed += 1;
                    return;
                }
                if self.download.is_some() {
                    return self.fail("the server let us in before its game content had arrived".into());
                }
                let content = match (self.offered, self.incoming.take()) {
                    (Some(d), Some(c)) if c.digest == d => c,
                    (None, _) => match self.installed.clone() {
                        Some(c) => c,
                        None => return self.fail("the server let us in without sending its game content".into()),
                    },
                    _ => return self.fail("the server let us in before its game content had arrived".into()),
                };
                self.content = Some(content);
                self.player_id = Some(player_id);
                self.spectating = self.watch.is_some();
                self.server_name = name;
                self.motd = motd;
                self.phase = Phase::Joined;
                self.est = tick as f64;
                self.input_tick = tick.wrapping_add(self.target_lead() as u32);
            }
            ServerMsg::Reject(why) => {
                self.phase = Phase::Failed(why.to_string());
                self.net.disconnect(0);
            }
            ServerMsg::Stats { inputs_dropped, ticks_coasted } => {
                self.stats.server_inputs_dropped = inputs_dropped;
                self.stats.server_ticks_coasted = ticks_coasted;
            }
            ServerMsg::Enter { instance, tick, dungeon, arena } => {
                let arena = Vec2::new(arena.0 as f32, arena.1 as f32);
                self.view = Some(View {
                    instance,
                    dungeon: dungeon.clone(),
                    arena,
                    replica: Replica::new(arena, tick),
                    roster: Vec::new(),
                    ships: Vec::new(),
                    snaps: VecDeque::new(),
                    cleared: false,
                    telegraphs: Vec::new(),
                });
                self.pred = None;
                self.events.push(ClientEvent::Entered { dungeon });
            }
            ServerMsg::Roster { instance, players } => {
                if let Some(v) = self.view.as_mut().filter(|v| v.instance == instance) {
                    v.ships = players.iter().map(|(id, _, ship)| (*id, *ship)).collect();
                    v.roster = players.into_iter().map(|(id, name, _)| (id, name)).collect();
                }
            }
            ServerMsg::Events { tick, events } => {
                // Events follow the `Enter` of their instance on the same ordered channel.
                let Some(v) = self.view.as_mut() else { return };
                v.telegraphs.retain(|(_, until)| *until > tick);
                for e in &events {
                    v.replica.apply(e);
                    match e {
                        WireEvent::Hit { target, .. } => self.events.push(ClientEvent::Hit { target: *target }),
                        WireEvent::Death { target } => self.events.push(ClientEvent::Death { target: *target }),
                        WireEvent::Phase { phase } => self.events.push(ClientEvent::Phase { phase: *phase }),
                        WireEvent::Cleared => {
                            v.cleared = true;
                            self.events.push(ClientEvent::Cleared)
                        }
                        WireEvent::Sfx { name, pos } => {
                            self.events.push(ClientEvent::Sfx { name: name.clone(), pos: *pos })
                        }
                        WireEvent::Telegraph(t) => {
                            // Bounded whatever a server sends (a script may show 64 a tick).
                            if v.telegraphs.len() < MAX_TELEGRAPHS_HELD {
                                v.telegraphs.push((*t, tick.saturating_add(t.ticks as u32)));
                            }
                            self.events.push(ClientEvent::Telegraph(*t))
                        }
                        WireEvent::Hint { text } => self.events.push(ClientEvent::Hint(text.clone())),
                        WireEvent::Flare { player, pos, .. } => {
                            self.events.push(ClientEvent::Flare { player: *player, pos: *pos })
                        }
                        WireEvent::Out { player } => self.events.push(ClientEvent::Out { player: *player }),
                        WireEvent::Revived { player, by } => {
                            self.events.push(ClientEvent::Revived { player: *player, by: *by })
                        }
                        WireEvent::Wave { wave } => self.events.push(ClientEvent::Wave { wave: *wave }),
                        WireEvent::Spawn(_) | WireEvent::Burst(_) | WireEvent::Despawn { .. } => {}
                    }
                }
            }
            ServerMsg::Snapshot(m) => {
                let base = m.base.and_then(|b| self.snap_hist.iter().find(|h| h.tick == b && h.instance == m.instance));
                match m.apply(base) {
                    Ok(s) => {
                        if m.base.is_some() {
                            self.stats.snapshots_delta += 1;
                        }
                        if self.snap_ack.is_none_or(|a| s.tick > a) {
                            self.snap_ack = Some(s.tick);
                        }
                        self.snap_hist.push_back(s.clone());
                        while self.snap_hist.len() > 64 {
                            self.snap_hist.pop_front();
                        }
                        self.on_snapshot(s)
                    }
                    Err(_) => self.stats.snapshots_unresolved += 1,
                }
            }
        }
    }

    fn on_offer(&mut self, digest: ContentDigest, raw_len: u32, packed_len: u32) {
        if self.offered.is_some() {
            // One offer per connection: a server cannot keep a join going, or churn the
            // cache, by offering again and again.
            return self.fail("the server offered its game content twice".into());
        }
        if self.phase != Phase::Connecting || self.player_id.is_some() {
            self.stats.malformed += 1;
            return;
        }
        self.offered = Some(digest);
        self.heard_ms = Some(self.now_ms);
        let (raw, packed) = (raw_len as usize, packed_len as usize);
        if raw > MAX_CONTENT_BYTES || packed > MAX_CONTENT_BYTES {
            return self.fail(format!(
                "the server's game content is too large ({:.1} MiB; this game accepts at most {} MiB)",
                raw.max(packed) as f64 / (1u64 << 20) as f64,
                MAX_CONTENT_BYTES >> 20
            ));
        }
        if let Some(c) = self.cache.as_ref().and_then(|cache| cache.load(&digest)) {
            tracing::info!(digest = %digest.short(), "using the server's content from the cache");
            self.stats.content_from_cache = true;
            self.incoming = Some(c);
            self.net.send(0, CH_CONTROL, &ClientMsg::ContentReady { digest }.encode());
            return;
        }
        tracing::info!(digest = %digest.short(), bytes = packed, "downloading the server's content");
        self.download = Some(Download::new(digest, raw, packed, self.now_ms, false));
        self.net.send(0, CH_CONTROL, &ClientMsg::ContentWant.encode());
    }

    /// A live content update: only while playing, one at a time, within the same size
    /// limit as at join. The chunks follow unasked.
    fn on_update(&mut self, digest: ContentDigest, raw_len: u32, packed_len: u32) {
        // A newer update replaces one still arriving (the server saved twice quickly: its
        // stream of the first stopped where this message is).
        if self.phase != Phase::Joined || self.download.as_ref().is_some_and(|d| !d.live) {
            self.stats.malformed += 1;
            return;
        }
        let (raw, packed) = (raw_len as usize, packed_len as usize);
        if raw > MAX_CONTENT_BYTES || packed > MAX_CONTENT_BYTES {
            self.stats.content_updates_refused += 1;
            tracing::warn!(bytes = raw.max(packed), "refused a live content update: too large");
            return;
        }
        tracing::info!(digest = %digest.short(), bytes = packed, "the server's looks changed: updating");
        self.download = Some(Download::new(digest, raw, packed, self.now_ms, true));
    }

    /// Swaps in content received while playing, if it can replace the running one.
    fn apply_update(&mut self, c: ClientContent) {
        let verdict = match &self.content {
            Some(old) => old.defs.live_compatible(&c.defs),
            None => Err("no content to update".into()),
        };
        match verdict {
            Ok(()) => {
                if let Some(cache) = &self.cache {
                    if let Err(e) = cache.store(&c) {
                        tracing::warn!(dir = %cache.dir.display(), "could not cache the server's content: {e}");
                    }
                }
                tracing::info!(digest = %c.digest.short(), "live content update applied");
                self.content = Some(c);
                self.stats.content_updates += 1;
                self.events.push(ClientEvent::ContentUpdated);
            }
            Err(why) => {
                // The server checks the same before sending; a server that did not is
                // ignored, and the running content stays.
                self.stats.content_updates_refused += 1;
                tracing::warn!("refused a live content update: {why}");
            }
        }
    }

    fn on_chunk(&mut self, offset: u32, data: &[u8]) {
        let now = self.now_ms;
        let Some(d) = self.download.as_mut() else {
            self.stats.malformed += 1;
            return;
        };
        if offset as usize != d.buf.len() || d.buf.len() + data.len() > d.packed_len {
            return self.fail("the server sent its game content out of order or longer than it said".into());
        }
        d.buf.extend_from_slice(data);
        d.last_ms = now;
        self.stats.content_bytes += data.len() as u64;
        if d.buf.len() < d.packed_len {
            return;
        }
        let Some(d) = self.download.take() else { return };
        let result = unpack(&d.buf, d.raw_len).and_then(|raw| {
            let got = ContentDigest::of(&raw);
            if got != d.digest {
                return Err(crate::protocol::content::ContentError::DigestMismatch {
                    expected: d.digest.short(),
                    got: got.short(),
                });
            }
            ClientContent::decode(&raw)
        });
        match result {
            Ok(c) if d.live => self.apply_update(c),
            Err(e) if d.live => {
                self.stats.content_updates_refused += 1;
                tracing::warn!("refused a live content update: {e}");
            }
            Ok(c) => {
                if let Some(cache) = &self.cache {
                    if let Err(e) = cache.store(&c) {
                        tracing::warn!(dir = %cache.dir.display(), "could not cache the server's content: {e}");
                    }
                }
                self.incoming = Some(c);
                self.heard_ms = Some(self.now_ms);
                self.net.send(0, CH_CONTROL, &ClientMsg::ContentReady { digest: d.digest }.encode());
            }
            Err(e) => self.fail(format!("the server sent game content this game refuses: {e}")),
        }
    }

    fn on_snapshot(&mut self, s: Snapshot) {
        let Some(v) = self.view.as_mut() else { return };
        if s.instance != v.instance || v.latest().is_some_and(|l| s.tick <= l.tick) {
            return;
        }
        self.stats.snapshots += 1;
        // Snapshot loss, from the gaps in the ticks of those that arrive.
        if let Some(l) = v.latest() {
            let expected = (s.tick - l.tick).div_ceil(SNAPSHOT_EVERY_TICKS).clamp(1, 20) as f32;
            self.snaps_expected = self.snaps_expected * 0.99 + expected;
            self.snaps_got = self.snaps_got * 0.99 + 1.0;
        }
        if let Some(r) = s.report {
            self.on_report(r);
        }
        let Some(v) = self.view.as_mut() else { return };
        // Clock: follow the snapshot stream gently, jump when far off.
        let err = s.tick as f64 - self.est;
        if err.abs() > 10.0 {
            self.est = s.tick as f64;
        } else {
            self.est += err * 0.1;
        }
        let arena = v.arena;
        let own = self.player_id.and_then(|id| s.players.iter().find(|p| p.id == id).copied());
        let ack = s.last_input_tick;
        let tick = s.tick;
        v.snaps.push_back(s);
        while v.snaps.len() > 4 {
            v.snaps.pop_front();
        }
        // Ack-stall detector.
        match ack {
            Some(l) if Some(l) != self.last_acked => {
                self.stall = 0;
                self.last_acked = Some(l);
            }
            _ if self.last_sent.is_some() => self.stall += 1,
            _ => {}
        }
        if let Some(l) = ack {
            while self.unacked.front().is_some_and(|f| f.tick <= l) {
                self.unacked.pop_front();
            }
        }
        if self.stall >= INPUT_ACK_STALL_LIMIT {
            self.resync(true);
        }
        if self.spectating {
            return; // the watched player is drawn where the snapshots put them
        }
        let Some(own) = own else { return };
        // Reconcile: the server's position, then every unacknowledged frame replayed
        // through the same movement function (coasting over any gap, as the server does).
        let mut pos = own.pos;
        if own.flags & F_DEAD == 0 {
            let mut held = self.unacked.front().copied().unwrap_or_default();
            let mut t = ack.unwrap_or(tick);
            for f in &self.unacked {
                while t + 1 < f.tick {
                    pos = step_frame(pos, &held, arena);
                    t += 1;
                }
                pos = step_frame(pos, f, arena);
                held = *f;
                t = f.tick;
            }
        }
        // A dead ship does not move: the server stopped it at the moment of death, which
        // the client learns of a round trip later. Putting the wreck where it fell is not a
        // prediction error (nothing could have predicted the hit), so it is not counted.
        let died = own.flags & F_DEAD != 0;
        if died {
            if self.pred.is_some_and(|p| p.distance(pos) > 0.0) {
                self.stats.death_corrections += 1;
            }
            self.pred = Some(pos);
            return;
        }
        match self.pred {
            None => self.pred = Some(pos),
            Some(p) => {
                let e = p.distance(pos);
                self.stats.pred_err_sum += e as f64;
                self.stats.pred_err_n += 1;
                self.stats.pred_err_max = self.stats.pred_err_max.max(e);
                self.stats.pred_err_recent = self.stats.pred_err_recent * 0.9 + e * 0.1;
                if e > SNAP_DISTANCE {
                    self.stats.snaps_over_threshold += 1;
                    self.pred = Some(pos);
                } else {
                    self.pred = Some(p.lerp(pos, BLEND));
                }
            }
        }
    }

    /// Remote players, enemies and the boss, interpolated between the two snapshots that
    /// bracket `est - INTERP_DELAY_TICKS`.
    pub fn interpolated(&self) -> Option<Snapshot> {
        let v = self.view.as_ref()?;
        let render = self.est - INTERP_DELAY_TICKS;
        let b_idx = v.snaps.iter().position(|s| s.tick as f64 >= render).unwrap_or(v.snaps.len().saturating_sub(1));
        let b = v.snaps.get(b_idx)?;
        let Some(a) = b_idx.checked_sub(1).and_then(|i| v.snaps.get(i)) else { return Some(b.clone()) };
        let t = ((render - a.tick as f64) / (b.tick as f64 - a.tick as f64).max(1.0)).clamp(0.0, 1.0) as f32;
        let mut out = b.clone();
        for p in &mut out.players {
            if let Some(pa) = a.players.iter().find(|q| q.id == p.id) {
                p.pos = pa.pos.lerp(p.pos, t);
            }
        }
        for e in &mut out.enemies {
            if let Some(ea) = a.enemies.iter().find(|q| q.id == e.id) {
                e.pos = ea.pos.lerp(e.pos, t);
            }
        }
        if let (Some(bb), Some(ba)) = (&mut out.boss, &a.boss) {
            bb.pos = ba.pos.lerp(bb.pos, t);
        }
        Some(out)
    }

    /// Client ticks since this client joined.
    pub fn ticks_joined(&self) -> u64 {
        self.ticks
    }

    /// The aim (degrees) of the newest input frame: the local ship is drawn with it.
    pub fn own_aim(&self) -> Option<f32> {
        self.recent.back().map(|f| f.aim)
    }

    /// The local player as the last snapshot saw it.
    pub fn own_state(&self) -> Option<SnapPlayer> {
        let id = self.player_id?;
        self.view.as_ref()?.latest()?.players.iter().find(|p| p.id == id).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::LocalListener;

    fn client() -> Client<crate::net::LocalClient> {
        let l = LocalListener::new();
        Client::new(l.connect(), "c", None)
    }

    fn report(need: u8, late: u32) -> InputReport {
        InputReport { max_need: need, late, missing: 0 }
    }

    #[test]
    fn the_lead_covers_the_99th_percentile_grows_at_once_and_shrinks_one_tick_per_two_seconds() {
        let mut c = client();
        assert_eq!(c.target, 0, "no report yet: the fallback");
        // A steady link needing 9 ticks: the target covers it with a tick to spare.
        for _ in 0..LEAD_WINDOW {
            c.on_report(report(9, 0));
        }
        assert_eq!(c.target_lead(), 10);
        // Two reports in 200 needing 12 are the 1 % the percentile leaves out...
        c.on_report(report(12, 0));
        c.on_report(report(12, 0));
        assert_eq!(c.target_lead(), 10, "the 99th percentile of the window is still 9");
        // ...a third is not, and the target grows at once.
        c.on_report(report(12, 0));
        assert_eq!(c.target_lead(), 13);
        // A single late frame needing 15: at once, even though it is one report.
        c.on_report(report(15, 1));
        assert_eq!(c.target_lead(), 16, "a late frame raises the target immediately");
        assert_eq!(c.stats.late_frames, 1);
        // The link calms: nothing for 119 ticks, then one tick down per 120 ticks.
        for t in 1..=LEAD_SHRINK_TICKS * 3 {
            c.ticks += 1;
            c.on_report(report(4, 0));
            let expect = 16 - (t / LEAD_SHRINK_TICKS) as i64;
            assert_eq!(c.target_lead(), expect.max(4), "tick {t}");
        }
        // Far past the window, it settles at the floor the new reports ask for.
        for _ in 0..LEAD_WINDOW as u64 * 20 {
            c.ticks += 1;
            c.on_report(report(1, 0));
        }
        assert_eq!(c.target_lead(), INPUT_LEAD_MIN + 1);
        // A missing frame raises redundancy for a while.
        assert_eq!(c.redundancy(), INPUT_REDUNDANCY);
        c.on_report(InputReport { max_need: 1, late: 0, missing: 2 });
        assert_eq!(c.redundancy(), INPUT_REDUNDANCY + 1);
        c.ticks += MISSING_MEMORY_TICKS;
        assert_eq!(c.redundancy(), INPUT_REDUNDANCY);
    }
}
