//! The authoritative server: owns the world, audits input, and replicates. One process
//! hosts the hub and every dungeon; each peer hears only about the instance it is in.
//! It never knows whether a peer is across the internet or in the same process.

#[cfg(unix)]
pub mod admin_socket;
pub mod bans;
pub mod config;
pub mod console;
pub mod dedicated;
pub mod flood;
pub mod keylist;
pub mod listen;
pub mod metrics;
pub mod recorder;
pub mod records;
pub mod replicate;
pub mod soak;

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use tracing::{info, warn};

use crate::content::Content;
use crate::net::{NetEvent, PeerId, Transport};
use crate::protocol::content::{ClientContent, CONTENT_CHUNK};
use crate::protocol::messages::MAX_INPUT_FRAMES;
use crate::protocol::messages::{InputReport, SnapshotMsg, MAX_BASE_AGE, MAX_REPORTED_NEED};
use crate::protocol::*;
use crate::sim::{InputDrop, InstanceId, PlayerId, SimEvent, World, TICK_RATE};

/// A peer that has not said Hello within this many ticks is dropped.
pub const HANDSHAKE_TIMEOUT_TICKS: u32 = 5 * TICK_RATE;
/// A peer that has not taken the server's content (cached or streamed) within this many
/// ticks of the offer is dropped.
pub const CONTENT_TIMEOUT_TICKS: u32 = 60 * TICK_RATE;
/// Content chunks sent to one joining peer per tick (`CONTENT_CHUNK` bytes each: about
/// 480 KiB/s). Only the joining peer's reliable control channel carries them, so players
/// already in the game keep getting every snapshot and event on time.
pub const CONTENT_CHUNKS_PER_TICK: usize = 8;
/// A peer offered content must answer (`ContentWant` or `ContentReady`) within this long.
pub const CONTENT_ANSWER_TICKS: u32 = 10 * TICK_RATE;
/// Content streams running at once; more joiners wait their turn (within their timeout).
pub const MAX_CONCURRENT_TRANSFERS: usize = 4;
/// Most events in one `Events` packet: at most ~32 bytes each, so a packet stays well
/// under `MAX_PACKET` however busy the tick.
pub const EVENTS_PER_PACKET: usize = 1000;
/// Packets a peer may send per second on each channel (input at 60 Hz with room for
/// bursts; control traffic is a handful at join). Over the limit they are dropped; at
/// three times the limit the peer is disconnected and logged.
pub const MAX_INPUT_PACKETS_PER_SECOND: u32 = 240;
pub const MAX_CONTROL_PACKETS_PER_SECOND: u32 = 30;
/// Malformed packets tolerated from one peer before it is disconnected.
pub const MAX_MALFORMED: u32 = 64;

/// Players who may be joining (downloading the content) at once, beside the players'
/// slots: half the slots, at least 2 and at most 32.
pub fn max_joining(max_players: usize) -> usize {
    (max_players / 2).clamp(2, 32)
}

/// The host's pause, shared between the host's game and its server thread: the game asks
/// (`asked`, its menu is open); the server pauses only while the host is the one player
/// on it and says so (`paused`), and the game then stops its own clock too.
#[derive(Clone, Debug, Default)]
pub struct PauseSwitch {
    pub asked: std::sync::Arc<std::sync::atomic::AtomicBool>,
    pub paused: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

/// Joiners one address may have at once.
pub const MAX_JOINING_PER_ADDRESS: usize = 2;

/// The network connections a server needs: its players and its joiners.
pub fn peer_limit(max_players: usize) -> usize {
    max_players + max_joining(max_players)
}

#[derive(Clone, Debug)]
pub struct ServerConfig {
    pub max_players: usize,
    /// Spectators at once (peers watching a player; they never count as players).
    pub max_spectators: usize,
    pub seed: u64,
    /// Send each instance's gameplay events every this many ticks (1: every tick). The
    /// default sends them with each snapshot, in the same datagram: bullets then appear up
    /// to two ticks later, fast-forwarded to where they are, for a third of the datagrams.
    /// See docs/PERFORMANCE.md for the trade.
    pub events_every_ticks: u32,
    /// The server's name and message of the day, sent to every player in `Welcome`.
    pub name: String,
    pub motd: String,
    /// Players who send this password with an `Admin` message may run console commands
    /// (None: nobody may).
    pub admin_password: Option<String>,
    /// Where host-and-play keeps its bans (None: in memory, for this game only).
    pub ban_list: Option<std::path::PathBuf>,
    /// Admit only players whose key is on the allowlist (the host always plays).
    pub allowlist: bool,
    /// Announce the server on the local network (any port is then found by the Join
    /// menu and `hailfire servers --lan`).
    pub lan_announce: bool,
    /// Host and play: a relay friends may also join through (`hailfire relay`).
    pub relay: Option<crate::net::relay::RelayLink>,
    /// Threads that tick instances side by side (1: the server's own thread).
    pub threads: usize,
    /// Mods whose scripts run in this process; the others (but the base game) in workers.
    pub trusted_mods: Vec<String>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            max_players: 16,
            max_spectators: 8,
            seed: 0x4861_696c,
            events_every_ticks: SNAPSHOT_EVERY_TICKS,
            name: "Hailfire".into(),
            motd: String::new(),
            admin_password: None,
            ban_list: None,
            allowlist: false,
            lan_announce: true,
            relay: None,
            threads: 1,
            trusted_mods: Vec::new(),
        }
    }
}

/// Wrong admin passwords one address may send in `ADMIN_LOCKOUT_TICKS` before it is cut
/// off and refused for the rest of that time.
pub const MAX_ADMIN_FAILURES: u32 = 3;
pub const ADMIN_LOCKOUT_TICKS: u32 = 10 * 60 * TICK_RATE;

#[derive(Debug)]
enum PeerState {
    Handshake {
        since: u32,
    },
    /// Offered the server's content; `sent` is how much of it has been streamed (None:
    /// the client has not asked for it).
    Content {
        since: u32,
        sent: Option<usize>,
    },
    Playing {
        player: PlayerId,
    },
    /// A spectator of `target`: no body, no input; it receives the target's instance.
    Watching {
        target: PlayerId,
    },
}

#[derive(Debug)]
struct Peer {
    state: PeerState,
    name: String,
    /// The key the player's game proved in the secure handshake (None: the host of
    /// host-and-play, over the in-process pipe).
    key: Option<[u8; 32]>,
    /// The instance this peer was last told it is in.
    instance: Option<InstanceId>,
    malformed: u32,
    inputs_dropped: u32,
    /// The newest input tick this peer has sent (any copy), and how its frames arrived
    /// since the last snapshot (see `InputReport`).
    newest_seen: Option<u32>,
    report: Option<InputReport>,
    /// The newest snapshot the peer holds, and the snapshots it may hold (as it rebuilt
    /// them): deltas are made against the acknowledged one.
    snap_acked: Option<u32>,
    snap_hist: VecDeque<crate::protocol::Snapshot>,
    /// Tick the current rate window began, and packets per channel in it.
    rate_since: u32,
    rate: [u32; CHANNEL_COUNT],
    admin_failures: u32,
    /// The run counts last sent to this player (`RunStatus`), and when.
    run_sent: Option<(crate::client::RunStatus, u32)>,
    /// A live content update being streamed to this player: bytes sent so far.
    live_sent: Option<usize>,
    /// Asked to watch this player (by name) rather than play.
    watch: Option<String>,
    /// The list of who plays where this peer was last sent (`People`).
    people_sent: Option<Vec<(String, String)>>,
}

/// What a content reload did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReloadOutcome {
    /// What players' games hold changed.
    pub client_content_changed: bool,
    /// Players sent the new looks while they keep playing (only looks changed).
    pub players_updated_live: usize,
    /// Players asked to join again (what their games' running content relies on changed).
    pub players_asked_to_rejoin: usize,
}

/// Counters a host or a test can read.
#[derive(Clone, Debug, Default)]
pub struct ServerStats {
    pub malformed: u64,
    /// Input frames refused: stale, claiming the future, or pushed out of a full queue.
    pub inputs_dropped: u64,
    /// Packets whose newest frame was simulated already (a replayed or very late packet).
    pub inputs_replayed: u64,
    /// Frames already queued (the redundant copies every packet carries, and duplicates).
    pub inputs_duplicate: u64,
    /// Frames that overflowed the per-player queue (`INPUT_QUEUE_CAP`): a flood.
    pub inputs_flooded: u64,
    /// Snapshots sent as deltas and as whole ones.
    pub snapshots_delta: u64,
    pub snapshots_full: u64,
    pub rejected: u64,
    /// Packets dropped (or peers cut off) for going over the per-channel rate limits.
    pub rate_limited: u64,
    /// Content transfers started, and compressed bytes sent in them.
    pub content_transfers: u64,
    pub content_bytes: u64,
    /// Joins refused because too many were joining at once (all, or from one address).
    pub refused_busy: u64,
}

pub struct Server<T: Transport> {
    pub world: World,
    pub net: T,
    pub config: ServerConfig,
    pub stats: ServerStats,
    /// The client-side content every client plays with, and its deflated form.
    pub content: ClientContent,
    packed: Vec<u8>,
    enemy_index: BTreeMap<String, u16>,
    boss_index: BTreeMap<String, u16>,
    peers: BTreeMap<PeerId, Peer>,
    next_player: PlayerId,
    events_in: Vec<NetEvent>,
    /// Wire events waiting for the next flush, per instance.
    pending: BTreeMap<InstanceId, Vec<WireEvent>>,
    /// The mods the running content holds (a reload that would refuse one is refused).
    loaded_mods: Vec<String>,
    /// Keys, names and addresses refused at the door.
    pub bans: bans::BanList,
    /// The players admitted when `config.allowlist` is on (`allowlist.toml`).
    pub allowlist: keylist::KeyList,
    /// Players whose admin commands need no password (`ops.toml`).
    pub ops: keylist::KeyList,
    /// The key each name was last seen with (`known_players.toml`): a second key under a
    /// known name is shown as someone else, never merged.
    pub known: keylist::KeyList,
    /// `known` changed since it was last saved (it is saved now and then, not per join).
    known_dirty: bool,
    known_saved_at: u32,
    /// Keys of this server's own clients (the console's recorder): always let in, never
    /// remembered as a player.
    pub own_keys: Vec<[u8; 32]>,
    /// Each dungeon's fastest clear and best score (`records.toml` on a dedicated server).
    pub records: records::Records,
    /// Host and play: the host's pause switch (None: this server never pauses).
    pub pause: Option<PauseSwitch>,
    /// Console commands from admins, waiting for the loop that runs the console.
    admin_queue: Vec<(PeerId, String)>,
    /// Wrong admin passwords per address: since when (tick), how many.
    admin_guesses: std::collections::HashMap<std::net::IpAddr, (u32, u32)>,
    /// What players are told when the server stops (the console's `stop MESSAGE`), after
    /// "the server is shutting down".
    pub stop_message: Option<String>,
    /// The last fights stopped because their scripts could not go on: (when, line).
    pub stopped: std::collections::VecDeque<(std::time::SystemTime, String)>,
    /// A player changed ship: the hub's roster (which says who flies what) goes out again.
    ship_changed: bool,
}

/// How an answer to an admin's command starts when the command was refused (no right to
/// it) or failed (it did not do what it was asked): `hailfire bot --admin` exits 1 on it.
pub const ADMIN_REFUSED: &str = "admin command not done: ";

/// What a console answer adds when a list changed in memory but its file could not be
/// written: the change holds until the server stops (as a ban's does).
fn not_saved(r: Result<(), String>) -> String {
    match r {
        Ok(()) => String::new(),
        Err(e) => {
            warn!("the change holds until the server stops but was not saved: {e}");
            format!(" (NOT saved: {e}; it holds until the server stops)")
        }
    }
}

/// How a player's key shows next to their name: ` [ab12:cd34]` (nothing for the host of
/// host-and-play, who has no key).
fn key_tag(key: Option<&[u8; 32]>) -> String {
    key.map(|k| format!(" [{}]", keylist::short(k))).unwrap_or_default()
}

/// Stopped fights the console's `status` remembers.
const STOPPED_KEPT: usize = 8;

impl<T: Transport> Server<T> {
    pub fn new(content: &Content, net: T, config: ServerConfig) -> Self {
        let client = ClientContent::of(content);
        let mut world =
            World::new(content.defs.clone(), content.script_factory_trusting(&config.trusted_mods), config.seed);
        if let Err(e) = world.set_threads(config.threads) {
            tracing::warn!("{e}; ticking instances on one thread");
        }
        let enemy_index = content.defs.enemies.keys().enumerate().map(|(i, k)| (k.clone(), i as u16)).collect();
        let boss_index = content.defs.bosses.keys().enumerate().map(|(i, k)| (k.clone(), i as u16)).collect();
        Server {
            world,
            net,
            config,
            stats: ServerStats::default(),
            packed: client.packed(),
            content: client,
            enemy_index,
            boss_index,
            peers: BTreeMap::new(),
            next_player: 1,
            events_in: Vec::new(),
            pending: BTreeMap::new(),
            loaded_mods: content.mods.iter().filter(|m| m.loaded).map(|m| m.id.clone()).collect(),
            bans: bans::BanList::default(),
            allowlist: keylist::KeyList::in_memory(keylist::ALLOWLIST_HEADER),
            ops: keylist::KeyList::in_memory(keylist::OPS_HEADER),
            known: keylist::KeyList::in_memory(keylist::KNOWN_HEADER),
            known_dirty: false,
            known_saved_at: 0,
            own_keys: Vec::new(),
            records: records::Records::default(),
            stopped: std::collections::VecDeque::new(),
            ship_changed: false,
            pause: None,
            admin_queue: Vec::new(),
            admin_guesses: std::collections::HashMap::new(),
            stop_message: None,
        }
    }

    /// Players with a live connection (linkdead bodies are not counted).
    pub fn connected_players(&self) -> usize {
        self.peers.values().filter(|p| matches!(p.state, PeerState::Playing { .. })).count()
    }

    /// Connections on their way in: greeting, or downloading the content.
    pub fn joining(&self) -> usize {
        self.peers
            .values()
            .filter(|p| matches!(p.state, PeerState::Handshake { .. } | PeerState::Content { .. }))
            .count()
    }

    pub fn peer_of(&self, player: PlayerId) -> Option<PeerId> {
        self.peers
            .iter()
            .find(|(_, p)| matches!(p.state, PeerState::Playing { player: q } if q == player))
            .map(|(id, _)| *id)
    }

    fn send(&mut self, peer: PeerId, channel: u8, msg: &ServerMsg) {
        self.net.send(peer, channel, &msg.encode());
    }

    /// The peer's address for the log ("this machine" for the in-process pipe).
    fn addr_of(&self, peer: PeerId) -> String {
        let Some(a) = self.net.peer_addr(peer) else { return "this machine".to_string() };
        match self.net.peer_origin(peer) {
            Some(o) => format!("{} (at {o})", crate::net::relay::describe(a)),
            None => crate::net::relay::describe(a),
        }
    }

    fn reject(&mut self, peer: PeerId, why: RejectReason) {
        info!(peer, addr = %self.addr_of(peer), reason = %why, "refusing a player");
        self.stats.rejected += 1;
        self.send(peer, CH_CONTROL, &ServerMsg::Reject(why));
        self.net.disconnect(peer);
        self.peers.remove(&peer);
    }

    fn malformed(&mut self, peer: PeerId, what: &str) {
        self.stats.malformed += 1;
        let Some(p) = self.peers.get_mut(&peer) else { return };
        p.malformed += 1;
        if p.malformed == 1 || p.malformed.is_power_of_two() {
            warn!(peer, count = p.malformed, "malformed packet: {what}");
        }
        if p.malformed > MAX_MALFORMED {
            self.drop_peer(peer, Some(RejectReason::TooManyMalformed));
        }
    }

    /// Every way a connection ends goes through here: the body stays, linkdead.
    fn drop_peer(&mut self, peer: PeerId, why: Option<RejectReason>) {
        if let Some(why) = why {
            self.send(peer, CH_CONTROL, &ServerMsg::Reject(why));
            self.net.disconnect(peer);
        }
        if let Some(p) = self.peers.remove(&peer) {
            if let PeerState::Playing { player } = p.state {
                let inst = self.world.instance_of(player);
                self.world.mark_linkdead(player);
                info!(peer, player, name = %p.name, instance = ?inst, "connection closed: body is linkdead and channelling out");
            }
            if let PeerState::Watching { target } = p.state {
                info!(peer, watching = target, name = %p.name, "spectator left");
            }
        }
    }

    fn on_packet(&mut self, peer: PeerId, channel: u8, data: &[u8]) {
        let now = self.world.tick;
        let Some(p) = self.peers.get_mut(&peer) else { return };
        if now.saturating_sub(p.rate_since) >= TICK_RATE {
            p.rate_since = now;
            p.rate = [0; CHANNEL_COUNT];
        }
        let limit = match channel {
            CH_INPUT => MAX_INPUT_PACKETS_PER_SECOND,
            _ => MAX_CONTROL_PACKETS_PER_SECOND,
        };
        if let Some(n) = p.rate.get_mut(channel as usize) {
            *n += 1;
            if *n > limit * 3 {
                warn!(peer, channel, "disconnecting a peer that sends too fast");
                self.stats.rate_limited += 1;
                return self.drop_peer(peer, Some(RejectReason::Kicked { reason: "sending too fast".into() }));
            }
            if *n > limit {
                self.stats.rate_limited += 1;
                return;
            }
        }
        let Some(p) = self.peers.get(&peer) else { return };
        match (&p.state, channel) {
            (PeerState::Handshake { .. }, CH_CONTROL) => self.on_hello(peer, data),
            (PeerState::Content { sent, .. }, CH_CONTROL) => {
                let streaming = sent.is_some();
                match ClientMsg::decode(data) {
                    Ok(ClientMsg::ContentWant) if !streaming => {
                        self.stats.content_transfers += 1;
                        info!(peer, bytes = self.packed.len(), "streaming content to a joining client");
                        if let Some(Peer { state: PeerState::Content { sent, .. }, .. }) = self.peers.get_mut(&peer) {
                            *sent = Some(0);
                        }
                    }
                    Ok(ClientMsg::ContentReady { digest }) if digest == self.content.digest => self.admit(peer),
                    Ok(ClientMsg::ContentReady { .. }) => self.reject(peer, RejectReason::BadHello),
                    Ok(_) => self.malformed(peer, "unexpected message while joining"),
                    Err(e) => self.malformed(peer, &e.to_string()),
                }
            }
            (PeerState::Playing { player }, CH_INPUT) => {
                let player = *player;
                match ClientMsg::decode(data) {
                    Ok(ClientMsg::Input { newest_tick, snap_ack, lead, view, frames }) => {
                        self.note_arrivals(peer, newest_tick, frames.len() as u32, lead);
                        // Lag compensation: the client's word, clamped (see LAG_COMP_MAX_TICKS).
                        if let Some(p) = self.world.player_mut(player) {
                            use crate::sim::config::{LAG_COMP_MAX_TICKS, VIEW_STEPS_PER_TICK};
                            p.view_delay = (view as u32).min(LAG_COMP_MAX_TICKS * VIEW_STEPS_PER_TICK);
                        }
                        if let (Some(a), Some(p)) = (snap_ack, self.peers.get_mut(&peer)) {
                            if a <= now && p.snap_acked.is_none_or(|b| a > b) {
                                p.snap_acked = Some(a);
                            }
                        }
                        // A replay is a packet whose newest frame was simulated already (its
                        // older frames being so is just redundancy).
                        let last = self.world.player(player).and_then(|p| p.last_input_tick);
                        if last.is_some_and(|l| newest_tick <= l) {
                            self.stats.inputs_replayed += 1;
                        }
                        for (k, f) in frames.iter().enumerate() {
                            let tick = newest_tick.wrapping_sub(k as u32);
                            match self.world.queue_input(player, f.to_frame(tick)) {
                                Ok(()) | Err(InputDrop::Replay) => {}
                                Err(InputDrop::Duplicate) => self.stats.inputs_duplicate += 1,
                                Err(why) => {
                                    if why == InputDrop::Flood {
                                        self.stats.inputs_flooded += 1;
                                    }
                                    self.stats.inputs_dropped += 1;
                                    if let Some(p) = self.peers.get_mut(&peer) {
                                        p.inputs_dropped += 1;
                                    }
                                }
                            }
                        }
                    }
                    Ok(_) => self.malformed(peer, "not an input message on the input channel"),
                    Err(e) => self.malformed(peer, &e.to_string()),
                }
            }
            (PeerState::Playing { player }, CH_CONTROL) => {
                let player = *player;
                match ClientMsg::decode(data) {
                    Ok(ClientMsg::Admin { password, command }) => self.on_admin(peer, player, &password, command),
                    // Any ship the content has, picked in the hub (a fight keeps its ship).
                    Ok(ClientMsg::ChooseShip { ship }) if (ship as usize) < self.world.defs.ships.len() => {
                        let in_hub = self.world.instance_of(player) == Some(self.world.hub);
                        if let (true, Some(p)) = (in_hub, self.world.player_mut(player)) {
                            self.ship_changed |= p.ship != ship;
                            p.ship = ship;
                        }
                    }
                    Ok(ClientMsg::ChooseShip { .. }) => self.malformed(peer, "no such ship"),
                    Ok(_) => self.malformed(peer, "unexpected message on the control channel"),
                    Err(e) => self.malformed(peer, &e.to_string()),
                }
            }
            _ => self.malformed(peer, "message on the wrong channel or at the wrong time"),
        }
    }

    /// Records how the frames of an input packet arrived (see `InputReport`): each frame
    /// once, at its first arrival (later copies are redundancy); frames older than this
    /// packet's oldest that never came are missing.
    fn note_arrivals(&mut self, peer: PeerId, newest: u32, n: u32, lead: u8) {
        // The frames compete for the next simulated tick.
        let next = self.world.tick as i64 + 1;
        let Some(p) = self.peers.get_mut(&peer) else { return };
        let oldest = newest.saturating_sub(n.max(1) - 1);
        let from = match p.newest_seen {
            Some(s) if newest <= s => return,
            // A jump further than one packet carries (the client re-synced): nothing in
            // between was ever meant to arrive.
            Some(s) if newest - s > MAX_INPUT_FRAMES as u32 => oldest,
            Some(s) => s + 1,
            None => oldest,
        };
        p.newest_seen = Some(newest);
        let r = p.report.get_or_insert_with(InputReport::default);
        for t in from..=newest {
            if t < oldest {
                r.missing += 1;
                continue;
            }
            let margin = t as i64 - next;
            if margin < 0 {
                r.late += 1;
            }
            let need = (lead as i64 - margin).clamp(0, MAX_REPORTED_NEED as i64) as u8;
            r.max_need = r.max_need.max(need);
        }
    }

    fn on_hello(&mut self, peer: PeerId, data: &[u8]) {
        match ClientMsg::hello_version(data) {
            Some(v) if v == PROTOCOL_VERSION => {}
            Some(v) => return self.reject(peer, RejectReason::VersionMismatch { server: PROTOCOL_VERSION, client: v }),
            None => return self.reject(peer, RejectReason::BadHello),
        }
        let (content, name, watch) = match ClientMsg::decode(data) {
            Ok(ClientMsg::Hello { content, name, .. }) => (content, name, None),
            Ok(ClientMsg::Watch { content, name, target, .. }) => (content, name, Some(target)),
            _ => return self.reject(peer, RejectReason::BadHello),
        };
        let name = crate::protocol::names::sanitize(&name);
        if let Some(reason) = self.banned(peer, &name) {
            return self.reject(peer, RejectReason::Banned { reason });
        }
        let key = self.net.peer_key(peer);
        if let Some(reason) = self.not_allowed(peer, key.as_ref()) {
            return self.reject(peer, RejectReason::Kicked { reason });
        }
        let name = self.name_for(&name, key.as_ref());
        // Joiners have their own room beside the players' slots: they never fill the
        // server, and one address cannot take all of that room.
        if watch.is_none() && self.world.player_count() >= self.config.max_players {
            return self.reject(peer, RejectReason::ServerFull { max: self.config.max_players as u16 });
        }
        if watch.is_some() && self.watching() >= self.config.max_spectators {
            let reason = format!("this server takes at most {} spectators", self.config.max_spectators);
            return self.reject(peer, RejectReason::Kicked { reason });
        }
        if let Some(p) = self.peers.get_mut(&peer) {
            p.name = name;
            p.key = key;
            p.watch = watch;
        }
        if content == self.content.digest {
            return self.admit(peer);
        }
        let ip = self.net.peer_addr(peer).map(|a| a.ip());
        let (mut joining, mut mine) = (0, 0);
        for (id, p) in &self.peers {
            if matches!(p.state, PeerState::Content { .. }) {
                joining += 1;
                mine += (ip.is_some() && self.net.peer_addr(*id).map(|a| a.ip()) == ip) as usize;
            }
        }
        let limited = ip.is_some_and(crate::net::secure::per_address_limited);
        if joining >= max_joining(self.config.max_players) || (limited && mine >= MAX_JOINING_PER_ADDRESS) {
            self.stats.refused_busy += 1;
            return self.reject(peer, RejectReason::Busy);
        }

        // Different (or no) content: offer ours. The client answers from its cache or asks
        // for the stream; it is let in once it says it holds and has validated it.
        let since = self.world.tick;
        if let Some(p) = self.peers.get_mut(&peer) {
            p.state = PeerState::Content { since, sent: None };
        }
        let offer = ServerMsg::ContentOffer {
            digest: self.content.digest,
            raw_len: self.content.encoded.len() as u32,
            packed_len: self.packed.len() as u32,
        };
        self.send(peer, CH_CONTROL, &offer);
    }

    /// Why this peer may not play (a ban on its key, name or address), if it may not. The
    /// host of host-and-play (a peer with no network address) is never banned.
    fn banned(&self, peer: PeerId, name: &str) -> Option<String> {
        let addr = self.net.peer_addr(peer)?;
        let key = self.net.peer_key(peer);
        let ban = self.bans.refuses(name, Some(addr.ip()), key.as_ref())?;
        Some(if ban.reason.is_empty() { "no reason given".to_string() } else { ban.reason.clone() })
    }

    /// Why this peer may not play on an allowlisted server, if it may not (never the host).
    fn not_allowed(&self, peer: PeerId, key: Option<&[u8; 32]>) -> Option<String> {
        if !self.config.allowlist || self.net.peer_addr(peer).is_none() {
            return None;
        }
        match key {
            Some(k) if self.allowlist.contains(k) || self.own_keys.contains(k) => None,
            Some(k) => {
                info!(addr = %self.addr_of(peer), key = %keylist::short(k), "refused a join: not on the allowlist");
                Some(format!(
                    "this server admits only the players on its allowlist; ask its admin to `allow` your key [{}]",
                    keylist::short(k)
                ))
            }
            None => Some("this server admits only the players on its allowlist".into()),
        }
    }

    /// The name a player is shown under: theirs, unless another key was seen with it
    /// first or the host (who has no key) plays under it; then the name with their key's
    /// first digits (`Bob~ab12`), so that nobody can pass for someone else by typing their
    /// name. (`~` is never part of a name as typed, so that tag cannot be typed either.)
    fn name_for(&self, name: &str, key: Option<&[u8; 32]>) -> String {
        let name = crate::protocol::names::sanitize(&name.replace('~', "-"));
        let Some(key) = key else { return name };
        if self.own_keys.contains(key) {
            return name;
        }
        let lower = name.to_lowercase();
        let hosts = self
            .peers
            .iter()
            .any(|(id, p)| p.key.is_none() && self.net.peer_addr(*id).is_none() && p.name.to_lowercase() == lower);
        let first = match self.known.by_name(&name) {
            Some(e) if e.key_bytes().as_ref() == Some(key) && !hosts => return name,
            Some(e) => e.key_bytes().map(|k| keylist::short(&k)).unwrap_or_default(),
            None if !hosts => return name,
            None => "the host".to_string(),
        };
        let tag = keylist::short(key)[..4].to_string();
        let mut base = name.clone();
        let mut end = base.len().min(crate::protocol::messages::MAX_NAME - 5);
        while !base.is_char_boundary(end) {
            end -= 1;
        }
        base.truncate(end);
        let shown = format!("{}~{tag}", base.trim_end());
        warn!(
            name = %name,
            key = %keylist::short(key),
            first_seen_with = %first,
            shown = %shown,
            "a player joined under a name first seen with another key: shown as someone else"
        );
        shown
    }

    /// Remembers the name an admitted player came with (the key it was first seen with
    /// stays); saved within a minute, and at shutdown.
    fn remember_name(&mut self, peer: PeerId) {
        let Some((name, Some(key))) = self.peers.get(&peer).map(|p| (p.name.clone(), p.key)) else { return };
        if self.own_keys.contains(&key) || name.contains('~') {
            return;
        }
        self.known.remember(&key, &name);
        self.known_dirty = true;
    }

    /// Saves the names seen, if they changed (`force`: now; else at most once a minute).
    pub fn save_known(&mut self, force: bool) {
        let now = self.world.tick;
        if !self.known_dirty || (!force && now.saturating_sub(self.known_saved_at) < 60 * TICK_RATE) {
            return;
        }
        self.known_dirty = false;
        self.known_saved_at = now;
        if let Err(e) = self.known.save() {
            warn!("the players' names were not saved: {e}");
        }
    }

    /// Connections watching a player (spectators).
    pub fn watching(&self) -> usize {
        self.peers.values().filter(|p| matches!(p.state, PeerState::Watching { .. })).count()
    }

    /// Lets a spectator in, watching the player it named (who must be playing now).
    fn admit_spectator(&mut self, peer: PeerId, target: &str) {
        let Some((_, player, shown)) = self.find_player(target) else {
            let reason = format!("nobody called '{target}' is playing here");
            return self.reject(peer, RejectReason::Kicked { reason });
        };
        if self.watching() >= self.config.max_spectators {
            let reason = format!("this server takes at most {} spectators", self.config.max_spectators);
            return self.reject(peer, RejectReason::Kicked { reason });
        }
        if let Some(p) = self.peers.get_mut(&peer) {
            p.state = PeerState::Watching { target: player };
        }
        let name = self.peers.get(&peer).map(|p| p.name.clone()).unwrap_or_default();
        info!(peer, watching = %shown, name = %name, addr = %self.addr_of(peer), spectators = self.watching(), "spectator joined");
        let welcome = ServerMsg::Welcome {
            version: PROTOCOL_VERSION,
            player_id: player,
            tick: self.world.tick,
            tick_rate: TICK_RATE as u8,
            name: self.config.name.clone(),
            motd: self.config.motd.clone(),
        };
        self.send(peer, CH_CONTROL, &welcome);
    }

    fn admit(&mut self, peer: PeerId) {
        // A ban made while the content was downloading holds.
        let name = self.peers.get(&peer).map(|p| p.name.clone()).unwrap_or_default();
        if let Some(reason) = self.banned(peer, &name) {
            return self.reject(peer, RejectReason::Banned { reason });
        }
        if let Some(target) = self.peers.get(&peer).and_then(|p| p.watch.clone()) {
            return self.admit_spectator(peer, &target);
        }
        if self.world.player_count() >= self.config.max_players {
            return self.reject(peer, RejectReason::ServerFull { max: self.config.max_players as u16 });
        }
        let Some(name) = self.peers.get(&peer).map(|p| p.name.clone()) else { return };
        let player = self.next_player;
        self.next_player += 1;
        self.world.add_player(player, &name);
        if let Some(p) = self.peers.get_mut(&peer) {
            p.state = PeerState::Playing { player };
        }
        self.remember_name(peer);
        let key = self.peers.get(&peer).and_then(|p| p.key).map_or("host".to_string(), |k| keylist::short(&k));
        info!(peer, player, name = %name, key = %key, addr = %self.addr_of(peer), players = self.world.player_count(), "player joined");
        let tick = self.world.tick;
        let welcome = ServerMsg::Welcome {
            version: PROTOCOL_VERSION,
            player_id: player,
            tick,
            tick_rate: TICK_RATE as u8,
            name: self.config.name.clone(),
            motd: self.config.motd.clone(),
        };
        self.send(peer, CH_CONTROL, &welcome);
        if !self.records.dungeons.is_empty() {
            let msg = self.records.message();
            self.send(peer, CH_CONTROL, &msg);
        }
    }

    /// One 60 Hz server tick: network in, simulate, network out.
    pub fn tick(&mut self) {
        self.save_known(false);
        let mut events = std::mem::take(&mut self.events_in);
        self.net.poll(&mut events);
        for ev in events.drain(..) {
            match ev {
                NetEvent::Connected(peer) => {
                    let since = self.world.tick;
                    self.peers.insert(
                        peer,
                        Peer {
                            state: PeerState::Handshake { since },
                            name: String::new(),
                            key: None,
                            instance: None,
                            malformed: 0,
                            inputs_dropped: 0,
                            newest_seen: None,
                            report: None,
                            snap_acked: None,
                            snap_hist: VecDeque::new(),
                            rate_since: since,
                            rate: [0; CHANNEL_COUNT],
                            admin_failures: 0,
                            run_sent: None,
                            live_sent: None,
                            watch: None,
                            people_sent: None,
                        },
                    );
                }
                NetEvent::Disconnected(peer) => self.drop_peer(peer, None),
                NetEvent::Packet { peer, channel, data } => self.on_packet(peer, channel, &data),
            }
        }
        self.events_in = events;
        let now = self.world.tick;
        let stale: Vec<(PeerId, RejectReason)> = self
            .peers
            .iter()
            .filter_map(|(id, p)| match p.state {
                PeerState::Handshake { since } if now.saturating_sub(since) > HANDSHAKE_TIMEOUT_TICKS => {
                    Some((*id, RejectReason::BadHello))
                }
                PeerState::Content { since, .. } if now.saturating_sub(since) > CONTENT_TIMEOUT_TICKS => {
                    Some((*id, RejectReason::ContentTimeout))
                }
                PeerState::Content { since, sent: None } if now.saturating_sub(since) > CONTENT_ANSWER_TICKS => {
                    Some((*id, RejectReason::ContentTimeout))
                }
                _ => None,
            })
            .collect();
        for (peer, why) in stale {
            self.reject(peer, why);
        }
        self.stream_content();
        // Host and play, the host alone with the menu open: the world waits.
        let alone = self.peers.len() == 1 && self.world.player_count() == 1;
        if let Some(p) = &self.pause {
            let now = alone && p.asked.load(std::sync::atomic::Ordering::Relaxed);
            p.paused.store(now, std::sync::atomic::Ordering::Relaxed);
            if now {
                return;
            }
        }
        let sim_events = self.world.step().to_vec();
        self.log_events(&sim_events);
        self.replicate(&sim_events);
        self.follow_spectators();
    }

    /// A spectator whose player has left the world has nothing to watch: it is told so.
    fn follow_spectators(&mut self) {
        let gone: Vec<PeerId> = self
            .peers
            .iter()
            .filter(|(_, p)| {
                // Gone from the world, or only a body channelling out (no connection).
                matches!(p.state, PeerState::Watching { target }
                    if self.world.player(target).is_none() || self.peer_of(target).is_none())
            })
            .map(|(id, _)| *id)
            .collect();
        for peer in gone {
            let reason = "the player you were watching has left".to_string();
            self.drop_peer(peer, Some(RejectReason::Kicked { reason }));
        }
    }

    /// Sends the next chunks of content to every peer that asked for it.
    fn stream_content(&mut self) {
        let total = self.packed.len();
        let mut out: Vec<(PeerId, usize, usize)> = Vec::new();
        let mut running = 0;
        for (id, p) in self.peers.iter_mut() {
            if let PeerState::Content { sent: Some(sent), .. } = &mut p.state {
                if *sent >= total {
                    continue;
                }
                running += 1;
                if running > MAX_CONCURRENT_TRANSFERS {
                    break;
                }
                let from = *sent;
                let to = (from + CONTENT_CHUNK * CONTENT_CHUNKS_PER_TICK).min(total);
                *sent = to;
                if to > from {
                    out.push((*id, from, to));
                }
            }
        }
        // Live updates to players in the world, paced the same way and as many at once as
        // joins (the others wait their turn: their game plays on with the old looks).
        let mut live = 0;
        for (id, p) in self.peers.iter_mut() {
            let Some(sent) = p.live_sent.as_mut() else { continue };
            live += 1;
            if live > MAX_CONCURRENT_TRANSFERS {
                break;
            }
            let from = *sent;
            let to = (from + CONTENT_CHUNK * CONTENT_CHUNKS_PER_TICK).min(total);
            *sent = to;
            if to >= total {
                p.live_sent = None;
            }
            if to > from {
                out.push((*id, from, to));
            }
        }
        for (peer, from, to) in out {
            for at in (from..to).step_by(CONTENT_CHUNK) {
                let end = (at + CONTENT_CHUNK).min(to);
                let msg = ServerMsg::ContentChunk { offset: at as u32, data: self.packed[at..end].to_vec() };
                self.send(peer, CH_CONTROL, &msg);
                self.stats.content_bytes += (end - at) as u64;
            }
        }
    }

    fn log_events(&self, events: &[SimEvent]) {
        for e in events {
            match e {
                SimEvent::Transfer { player, from, to, reason } => {
                    info!(player, ?from, to, ?reason, "transfer")
                }
                SimEvent::PlayerRemoved { player, instance } => {
                    info!(player, instance, "linkdead body resolved: player removed from the world")
                }
                SimEvent::InstanceOpened { instance, dungeon } => {
                    info!(instance, dungeon = %dungeon, "instance opened")
                }
                SimEvent::InstanceClosed { instance } => info!(instance, "instance closed"),
                SimEvent::InstanceCleared { instance } => info!(instance, "dungeon cleared"),
                SimEvent::BossSpawned { instance, def } => info!(instance, boss = %def, "boss arrived"),
                SimEvent::PhaseChanged { instance, phase, name } => {
                    info!(instance, phase = *phase as u32 + 1, name = %name, "boss phase")
                }
                SimEvent::ScriptError { instance, message } => warn!(instance, "script error: {message}"),
                SimEvent::ScriptLog { instance, message } => info!(instance, "script: {message}"),
                SimEvent::InstanceStopped { instance, dungeon, reason, players, .. } => {
                    warn!(instance, dungeon = %dungeon, players = players.len(), "fight stopped: {reason}")
                }
                _ => {}
            }
        }
    }

    /// Peers currently placed in each instance.
    fn peers_by_instance(&self) -> BTreeMap<InstanceId, Vec<PeerId>> {
        let mut m: BTreeMap<InstanceId, Vec<PeerId>> = BTreeMap::new();
        for (id, p) in &self.peers {
            // A spectator is where the player it watches is.
            if let PeerState::Playing { player } | PeerState::Watching { target: player } = p.state {
                if let Some(i) = self.world.instance_of(player) {
                    m.entry(i).or_default().push(*id);
                }
            }
        }
        m
    }

    fn replicate(&mut self, events: &[SimEvent]) {
        let tick = self.world.tick;
        for (inst, evs) in replicate::batches(events) {
            self.pending.entry(inst).or_default().extend(evs);
        }
        self.pending.retain(|i, _| self.world.instances.contains_key(i));
        let flush = tick.is_multiple_of(self.config.events_every_ticks.max(1));
        let mut roster_changed: BTreeSet<InstanceId> = BTreeSet::new();
        if std::mem::take(&mut self.ship_changed) {
            roster_changed.insert(self.world.hub);
        }
        for e in events {
            match e {
                SimEvent::Transfer { from, to, .. } => {
                    roster_changed.insert(*to);
                    if let Some(f) = from {
                        roster_changed.insert(*f);
                    }
                }
                SimEvent::PlayerRemoved { instance, .. } => {
                    roster_changed.insert(*instance);
                }
                _ => {}
            }
        }
        // A busy tick's events go in as many packets as they need: none is ever dropped
        // for being larger than a packet may be.
        let encoded: BTreeMap<InstanceId, Vec<Vec<u8>>> = if flush {
            std::mem::take(&mut self.pending)
                .into_iter()
                .filter(|(_, evs)| !evs.is_empty())
                .map(|(i, events)| {
                    let events = replicate::grouped(events);
                    let packets = events
                        .chunks(EVENTS_PER_PACKET)
                        .map(|c| ServerMsg::Events { tick, events: c.to_vec() }.encode())
                        .collect();
                    (i, packets)
                })
                .collect()
        } else {
            BTreeMap::new()
        };
        let placement = self.peers_by_instance();
        for (inst, peers) in &placement {
            for &peer in peers {
                let told = self.peers.get(&peer).and_then(|p| p.instance);
                if told != Some(*inst) {
                    self.enter(peer, *inst);
                    roster_changed.insert(*inst);
                } else if let Some(packets) = encoded.get(inst) {
                    for bytes in packets {
                        self.net.send(peer, CH_EVENTS, bytes);
                    }
                }
            }
        }
        for inst in roster_changed {
            if let Some(peers) = placement.get(&inst) {
                let msg = self.roster(inst).encode();
                for &peer in peers {
                    self.net.send(peer, CH_EVENTS, &msg);
                }
            }
        }
        if tick.is_multiple_of(SNAPSHOT_EVERY_TICKS) {
            for (inst, peers) in &placement {
                let Some(base) = replicate::snapshot(&self.world, *inst, &self.enemy_index, &self.boss_index) else {
                    continue;
                };
                for &peer in peers {
                    let mut s = base.clone();
                    let (player, watching) = match self.peers.get(&peer).map(|p| &p.state) {
                        Some(PeerState::Playing { player }) => (*player, false),
                        Some(PeerState::Watching { target }) => (*target, true),
                        _ => continue,
                    };
                    if !watching {
                        s.last_input_tick = self.world.player(player).and_then(|p| p.last_input_tick);
                    }
                    let Some(p) = self.peers.get_mut(&peer) else { continue };
                    s.report = p.report.take();
                    // A delta against the newest snapshot the peer says it holds, if that
                    // is recent and of this instance; otherwise the whole snapshot. A
                    // spectator sends nothing, so acknowledges nothing: whole snapshots.
                    let acked = p.snap_acked.filter(|a| tick.saturating_sub(*a) <= MAX_BASE_AGE && !watching);
                    let base_snap = acked.and_then(|a| p.snap_hist.iter().find(|h| h.tick == a && h.instance == *inst));
                    let mut msg = SnapshotMsg::diff(base_snap, &s, Some(player));
                    let state = match msg.apply(base_snap) {
                        Ok(state) => state,
                        Err(_) => {
                            msg = SnapshotMsg::diff(None, &s, Some(player));
                            match msg.apply(None) {
                                Ok(state) => state,
                                Err(_) => continue,
                            }
                        }
                    };
                    if msg.base.is_some() {
                        self.stats.snapshots_delta += 1;
                    } else {
                        self.stats.snapshots_full += 1;
                    }
                    p.snap_hist.push_back(state);
                    while p.snap_hist.len() > (MAX_BASE_AGE / SNAPSHOT_EVERY_TICKS) as usize + 2 {
                        p.snap_hist.pop_front();
                    }
                    self.send(peer, CH_SNAPSHOT, &ServerMsg::Snapshot(msg));
                }
            }
        }
        self.runs(events, tick);
        if tick.is_multiple_of(TICK_RATE) {
            self.send_people();
        }
        if tick.is_multiple_of(TICK_RATE) {
            let ids: Vec<PeerId> = self.peers.keys().copied().collect();
            for peer in ids {
                let p = &self.peers[&peer];
                if let PeerState::Playing { player } = p.state {
                    let coasted = self.world.player(player).map_or(0, |pl| pl.coasted);
                    let msg = ServerMsg::Stats { inputs_dropped: p.inputs_dropped, ticks_coasted: coasted };
                    self.send(peer, CH_CONTROL, &msg);
                }
            }
        }
    }

    /// Who plays where, to every player and spectator, when it changed since it was last
    /// sent (a newcomer gets it at the next second: `people_sent` forgets who had it).
    fn send_people(&mut self) {
        let mut people: Vec<(String, String)> = self
            .peers
            .values()
            .filter_map(|p| match p.state {
                PeerState::Playing { player } => {
                    let place = match self.world.instance_of(player) {
                        Some(i) if i != self.world.hub => {
                            self.world.instances.get(&i).and_then(|x| x.dungeon()).unwrap_or("").to_string()
                        }
                        _ => String::new(),
                    };
                    Some((p.name.clone(), place))
                }
                _ => None,
            })
            .collect();
        people.sort();
        people.truncate(crate::protocol::messages::MAX_PEOPLE);
        let ids: Vec<PeerId> = self.peers.keys().copied().collect();
        for peer in ids {
            let p = &self.peers[&peer];
            let joined = matches!(p.state, PeerState::Playing { .. } | PeerState::Watching { .. });
            if joined && p.people_sent.as_ref() != Some(&people) {
                self.send(peer, CH_CONTROL, &ServerMsg::People(people.clone()));
                if let Some(p) = self.peers.get_mut(&peer) {
                    p.people_sent = Some(people.clone());
                }
            }
        }
    }

    /// Runs: each ended run's summary to its players (and the records it set), and each
    /// player's own counts when they change (flares at once, the rest twice a second).
    fn runs(&mut self, events: &[SimEvent], tick: u32) {
        for e in events {
            if let SimEvent::InstanceStopped { instance, dungeon, reason, summary, players } = e {
                // Players get the mod and what happened, not the server's paths.
                let text = crate::protocol::names::clip(
                    &format!("{}{summary}.", crate::protocol::STOPPED_NOTICE),
                    crate::protocol::messages::MAX_NOTICE,
                );
                for player in players {
                    if let Some(peer) = self.peer_of(*player) {
                        self.send(peer, CH_CONTROL, &ServerMsg::Notice { text: text.clone() });
                    }
                }
                if self.stopped.len() == STOPPED_KEPT {
                    self.stopped.pop_front();
                }
                let line = format!("instance {instance} {dungeon}: {reason}");
                self.stopped.push_back((std::time::SystemTime::now(), line));
            }
        }
        for e in events {
            let SimEvent::RunEnded { instance, to, summary } = e else { continue };
            info!(
                instance,
                dungeon = %summary.dungeon,
                outcome = ?summary.outcome,
                secs = summary.ticks / TICK_RATE,
                score = summary.team_score,
                players = to.len(),
                "run ended"
            );
            if to.len() != 1 || summary.outcome != crate::sim::events::RunOutcome::Abandoned {
                let key_of = |id: u32| {
                    self.peers
                        .values()
                        .find(|p| matches!(p.state, PeerState::Playing { player } if player == id))
                        .and_then(|p| p.key)
                        .map_or(String::new(), |k| keylist::short(&k))
                };
                let (new, err) = self.records.count(summary, &key_of);
                if let Some(e) = err {
                    warn!("{e}");
                }
                if new.time || new.score {
                    info!(dungeon = %summary.dungeon, time = new.time, score = new.score, "new record");
                    let msg = self.records.message();
                    let ids: Vec<PeerId> = self.peers.keys().copied().collect();
                    for peer in ids {
                        if matches!(self.peers[&peer].state, PeerState::Playing { .. }) {
                            self.send(peer, CH_CONTROL, &msg);
                        }
                    }
                }
            }
            for player in to {
                if let Some(peer) = self.peer_of(*player) {
                    self.send(peer, CH_CONTROL, &ServerMsg::RunSummary(summary.clone()));
                }
            }
        }
        let ids: Vec<PeerId> = self.peers.keys().copied().collect();
        for peer in ids {
            let PeerState::Playing { player } = self.peers[&peer].state else { continue };
            let Some(p) = self.world.player(player) else { continue };
            let now = crate::client::RunStatus {
                flares: p.flares,
                charge: p.graze_charge.min(255) as u8,
                grazes: p.stats.grazes,
                score: crate::sim::instance::player_score(&p.stats, p.flares, false),
            };
            // At once when flares change, else at most twice a second when anything did.
            let due = match self.peers[&peer].run_sent {
                None => true,
                Some((sent, at)) => sent != now && (sent.flares != now.flares || tick >= at + 30),
            };
            if due {
                let crate::client::RunStatus { flares, charge, grazes, score } = now;
                self.send(peer, CH_CONTROL, &ServerMsg::RunStatus { flares, charge, grazes, score });
                if let Some(pp) = self.peers.get_mut(&peer) {
                    pp.run_sent = Some((now, tick));
                }
            }
        }
    }

    fn roster(&self, inst: InstanceId) -> ServerMsg {
        let players = self
            .world
            .instances
            .get(&inst)
            .map_or(Vec::new(), |i| i.players.iter().map(|p| (p.id, p.name.clone(), p.ship)).collect());
        ServerMsg::Roster { instance: inst, players }
    }

    /// Tells a peer it is now in `inst`, then sends every bullet already in flight there.
    fn enter(&mut self, peer: PeerId, inst: InstanceId) {
        let Some(i) = self.world.instances.get(&inst) else { return };
        let tick = self.world.tick;
        let enter = ServerMsg::Enter {
            instance: inst,
            tick,
            dungeon: i.dungeon().unwrap_or("").to_string(),
            arena: (i.arena.x as u16, i.arena.y as u16),
        };
        // In uid order (the pool's slots are not): neighbouring uids and shapes pack small.
        let mut origins = i.bullets.origin.clone();
        origins.sort_unstable_by_key(|s| s.uid);
        let dumps: Vec<Vec<u8>> = origins
            .chunks(EVENTS_PER_PACKET)
            .map(|c| ServerMsg::Events { tick, events: c.iter().map(|s| WireEvent::Spawn(*s)).collect() }.encode())
            .collect();
        self.send(peer, CH_EVENTS, &enter);
        for d in dumps {
            self.net.send(peer, CH_EVENTS, &d);
        }
        if let Some(p) = self.peers.get_mut(&peer) {
            p.instance = Some(inst);
        }
    }

    /// Takes reloaded content (a mod was saved, `--watch-mods`). Content that does not load
    /// is refused and the running one stays. Otherwise instances opened from now on use
    /// it and running fights finish on theirs. When what players' games hold changes too:
    /// a change of looks only (colours, names, bodies, themes) reaches the players already
    /// in live, and they keep playing; a change their running games rely on (ids, sizes,
    /// arenas) asks them to join again, saying what changed (host-and-play refuses it).
    pub fn reload(&mut self, content: &Content, allow_rejoin: bool) -> Result<ReloadOutcome, Vec<String>> {
        let errors: Vec<String> = content.errors().map(|d| d.to_string()).collect();
        // A mod that runs now and would be refused (the save broke it) keeps the running
        // content; errors of mods that were refused already change nothing.
        let broke: Vec<&str> = self
            .loaded_mods
            .iter()
            .filter(|id| !content.mods.iter().any(|m| &m.id == *id && m.loaded))
            .map(|s| s.as_str())
            .collect();
        if !broke.is_empty() || !content.base_loaded() || content.client_refusal.is_some() {
            let mut e = errors;
            e.push(format!("the saved mod(s) {} would no longer load", broke.join(", ")));
            return Err(e);
        }
        let client = ClientContent::of(content);
        let changed = client.digest != self.content.digest;
        let live = self.content.defs.live_compatible(&client.defs);
        if let (true, false, Err(why)) = (changed, allow_rejoin, &live) {
            return Err(vec![format!(
                "the change reaches what players' running games rely on ({why}): restart hosting to use it"
            )]);
        }
        self.world.reload(content.defs.clone(), content.script_factory_trusting(&self.config.trusted_mods));
        self.loaded_mods = content.mods.iter().filter(|m| m.loaded).map(|m| m.id.clone()).collect();
        let (mut rejoin, mut updated) = (0, 0);
        if changed {
            self.packed = client.packed();
            self.content = client;
            self.enemy_index = content.defs.enemies.keys().enumerate().map(|(i, k)| (k.clone(), i as u16)).collect();
            self.boss_index = content.defs.bosses.keys().enumerate().map(|(i, k)| (k.clone(), i as u16)).collect();
            let ids: Vec<PeerId> = self
                .peers
                .iter()
                .filter(|(_, p)| !matches!(p.state, PeerState::Handshake { .. }))
                .map(|(id, _)| *id)
                .collect();
            match live {
                Ok(()) => {
                    // Looks only: players in the world get them now and play on; a player
                    // still joining is offered the old content and is asked to join again
                    // (rare: a save during someone's download).
                    let update = ServerMsg::ContentUpdate {
                        digest: self.content.digest,
                        raw_len: self.content.encoded.len() as u32,
                        packed_len: self.packed.len() as u32,
                    };
                    for peer in ids {
                        // Spectators hold content too: they get the new looks as players do.
                        let playing = self
                            .peers
                            .get(&peer)
                            .is_some_and(|p| matches!(p.state, PeerState::Playing { .. } | PeerState::Watching { .. }));
                        if playing {
                            self.send(peer, CH_CONTROL, &update);
                            if let Some(p) = self.peers.get_mut(&peer) {
                                p.live_sent = Some(0);
                            }
                            updated += 1;
                        } else {
                            rejoin += 1;
                            let reason = "the server's mods changed while you joined: join again".to_string();
                            self.drop_peer(peer, Some(RejectReason::Kicked { reason }));
                        }
                    }
                }
                Err(why) => {
                    rejoin = ids.len();
                    for peer in ids {
                        let reason = format!("the server's mods changed ({why}): join again to download them");
                        self.drop_peer(peer, Some(RejectReason::Kicked { reason }));
                    }
                }
            }
        }
        Ok(ReloadOutcome {
            client_content_changed: changed,
            players_updated_live: updated,
            players_asked_to_rejoin: rejoin,
        })
    }

    /// A connected player by name (any case) or player id: peer, player id, name.
    /// A number is a player id first (a player may be named "3"); `#3` is only an id.
    pub fn find_player(&self, who: &str) -> Option<(PeerId, PlayerId, String)> {
        let by_id = |id: PlayerId| {
            self.peers.iter().find_map(|(peer, p)| match p.state {
                PeerState::Playing { player } if player == id => Some((*peer, player, p.name.clone())),
                _ => None,
            })
        };
        if let Some(id) = who.strip_prefix('#') {
            return id.parse().ok().and_then(by_id);
        }
        if let Some(found) = who.parse().ok().and_then(by_id) {
            return Some(found);
        }
        self.peers.iter().find_map(|(peer, p)| match p.state {
            PeerState::Playing { player } if p.name.to_lowercase() == who.to_lowercase() => {
                Some((*peer, player, p.name.clone()))
            }
            _ => None,
        })
    }

    /// Disconnects the player called `who` (a name or a player id) with `reason`, which
    /// their game shows. Returns what was done, for the console.
    pub fn kick(&mut self, who: &str, reason: &str) -> Result<String, String> {
        let reason =
            if reason.trim().is_empty() { "kicked by the server".to_string() } else { reason.trim().to_string() };
        let Some((peer, player, name)) = self.find_player(who) else {
            // A spectator, by name.
            let spectator = self.peers.iter().find_map(|(peer, p)| match p.state {
                PeerState::Watching { .. } if p.name.to_lowercase() == who.to_lowercase() => {
                    Some((*peer, p.name.clone()))
                }
                _ => None,
            });
            if let Some((peer, name)) = spectator {
                info!(name = %name, addr = %self.addr_of(peer), reason = %reason, "spectator kicked");
                self.drop_peer(peer, Some(RejectReason::Kicked { reason: reason.clone() }));
                return Ok(format!("kicked {name} (a spectator): {reason}"));
            }
            return Err(format!("no player or spectator '{who}' is connected (see `players`)"));
        };
        info!(player, name = %name, addr = %self.addr_of(peer), reason = %reason, "kicked");
        self.drop_peer(peer, Some(RejectReason::Kicked { reason: reason.clone() }));
        Ok(format!("kicked {name} (player {player}): {reason}"))
    }

    /// Bans `who`: a connected player (by name or id: their key, their name and their
    /// address unless it is this machine's), a key (64 hex digits), an IP address, or a
    /// name not connected now. Everyone the ban covers is disconnected with the reason, and
    /// the ban list file is saved.
    pub fn ban(&mut self, who: &str, reason: &str) -> Result<String, String> {
        let reason =
            if reason.trim().is_empty() { "banned by the server".to_string() } else { reason.trim().to_string() };
        let ip: Option<std::net::IpAddr> = who.parse().ok();
        let (name, ip, key) = match (self.find_player(who), ip, keylist::parse_key(who)) {
            (_, Some(ip), _) => (String::new(), Some(ip), None),
            (_, None, Some(k)) => (String::new(), None, Some(k)),
            // The host of host-and-play has no address and cannot be banned.
            (Some((peer, _, _)), None, None) if self.net.peer_addr(peer).is_none() => {
                return Err("that is the host of this game: it cannot be banned".into())
            }
            (Some((peer, _, name)), None, None) => {
                // This machine's address is the operator's own (bots, tools, the recorder):
                // a player on it is banned by key and name only.
                let ip = self
                    .net
                    .peer_addr(peer)
                    .map(|a| a.ip())
                    .filter(|i| crate::net::secure::per_address_limited(*i) && !crate::net::relay::is_virtual(*i));
                (name, ip, self.peers.get(&peer).and_then(|p| p.key))
            }
            (None, None, None) if who.starts_with('#') || who.chars().all(|c| c.is_ascii_digit()) => {
                return Err(format!("no player {who} is connected (see `players`)"))
            }
            (None, None, None) => (crate::protocol::names::sanitize(who), None, None),
        };
        // Kept in memory even if the file cannot be written: the ban holds until a restart.
        let saved = self.bans.add(&name, ip, key.as_ref(), &reason);
        let what = self.bans.bans.last().map(|b| b.describe()).unwrap_or_default();
        // Everyone it covers goes, playing or still joining; never the host (no address).
        let covered: Vec<(PeerId, String)> = self
            .peers
            .iter()
            .filter(|(id, p)| {
                let addr = self.net.peer_addr(**id);
                !matches!(p.state, PeerState::Handshake { .. })
                    && addr.is_some()
                    && self.bans.refuses(&p.name, addr.map(|a| a.ip()), p.key.as_ref()).is_some()
            })
            .map(|(id, p)| (*id, p.name.clone()))
            .collect();
        for (peer, who) in &covered {
            info!(name = %who, addr = %self.addr_of(*peer), reason = %reason, "disconnected by a ban");
            self.drop_peer(*peer, Some(RejectReason::Banned { reason: reason.clone() }));
        }
        info!(ban = %what, disconnected = covered.len(), "banned");
        let note = match saved {
            Ok(()) => String::new(),
            Err(e) => {
                warn!("the ban holds until the server stops but was not saved: {e}");
                format!(" (NOT saved: {e})")
            }
        };
        Ok(format!("banned {what}; {} player(s) disconnected{note}", covered.len()))
    }

    /// The key of a connected player (by name or id), or a key written in full.
    fn key_of(&self, who: &str) -> Result<([u8; 32], String), String> {
        if let Some(k) = keylist::parse_key(who) {
            // Named as the server first saw it, if it has seen it.
            let name = self.known.find(&k).map(|e| e.name.clone()).unwrap_or_default();
            return Ok((k, name));
        }
        let Some((peer, _, name)) = self.find_player(who) else {
            return Err(format!(
                "no player '{who}' is connected: name a connected player, or give a key in full (64 hex digits; \
                 `hailfire key` prints a player's own)"
            ));
        };
        match self.peers.get(&peer).and_then(|p| p.key) {
            Some(k) => Ok((k, name)),
            None => Err(format!("{name} is the host of this game: the host always plays")),
        }
    }

    /// Puts a player (by name or id, or a key) on the allowlist.
    pub fn allow(&mut self, who: &str) -> Result<String, String> {
        let (key, name) = self.key_of(who)?;
        let new = self.allowlist.add(&key, &name);
        let note = not_saved(self.allowlist.save());
        info!(name = %name, key = %keylist::short(&key), "allowed");
        let state = if self.config.allowlist { "" } else { " (the allowlist is off: allowlist = true in server.toml)" };
        let done = if new { "put" } else { "kept" };
        Ok(format!("{done} {name} [{}] on the allowlist{state}{note}", keylist::short(&key)))
    }

    /// Takes players off the allowlist (by name, key or fingerprint); a connected player
    /// it no longer admits is disconnected.
    pub fn disallow(&mut self, who: &str) -> Result<String, String> {
        let n = self.allowlist.remove(who);
        if n == 0 {
            return Err(format!("nobody on the allowlist is '{who}' (see `allowlist`)"));
        }
        let note = not_saved(self.allowlist.save());
        let mut gone = 0;
        if self.config.allowlist {
            let out: Vec<PeerId> = self
                .peers
                .iter()
                .filter(|(id, p)| {
                    self.net.peer_addr(**id).is_some()
                        && !p.key.is_some_and(|k| self.allowlist.contains(&k) || self.own_keys.contains(&k))
                })
                .map(|(id, _)| *id)
                .collect();
            gone = out.len();
            for peer in out {
                let reason = "taken off this server's allowlist".to_string();
                self.drop_peer(peer, Some(RejectReason::Kicked { reason }));
            }
        }
        info!(who, removed = n, disconnected = gone, "disallowed");
        Ok(format!("took {n} player(s) off the allowlist; {gone} disconnected{note}"))
    }

    /// Makes a player (by name or id, or a key) an operator: admin commands without the
    /// admin password.
    pub fn op(&mut self, who: &str) -> Result<String, String> {
        let (key, name) = self.key_of(who)?;
        self.ops.add(&key, &name);
        let note = not_saved(self.ops.save());
        info!(name = %name, key = %keylist::short(&key), "made an operator");
        let fp = keylist::short(&key);
        Ok(format!("{name} [{fp}] is an operator: their admin commands need no password{note}"))
    }

    /// Takes the operator role away (by name, key or fingerprint).
    pub fn deop(&mut self, who: &str) -> Result<String, String> {
        match self.ops.remove(who) {
            0 => Err(format!("no operator is '{who}' (see `ops`)")),
            n => {
                let note = not_saved(self.ops.save());
                info!(who, removed = n, "no longer an operator");
                Ok(format!("{n} player(s) no longer operators{note}"))
            }
        }
    }

    /// Lifts the bans on a name or an address.
    pub fn unban(&mut self, who: &str) -> Result<String, String> {
        match self.bans.remove(who)? {
            0 => Err(format!("nothing is banned under '{who}' (see `bans`)")),
            n => {
                info!(who, lifted = n, "unbanned");
                Ok(format!("lifted {n} ban(s) on {who}"))
            }
        }
    }

    /// Text every connected player reads (the console's `say`).
    pub fn say(&mut self, text: &str) -> usize {
        let msg = ServerMsg::Notice { text: format!("[server] {}", text.trim()) };
        let playing: Vec<PeerId> = self
            .peers
            .iter()
            .filter(|(_, p)| matches!(p.state, PeerState::Playing { .. }))
            .map(|(id, _)| *id)
            .collect();
        for &peer in &playing {
            self.send(peer, CH_CONTROL, &msg);
        }
        info!(text = text.trim(), players = playing.len(), "said");
        playing.len()
    }

    /// Text for one peer (answers to an admin's command).
    pub fn notice(&mut self, peer: PeerId, text: &str) {
        if self.peers.contains_key(&peer) {
            self.send(peer, CH_CONTROL, &ServerMsg::Notice { text: text.to_string() });
        }
    }

    /// Console commands admins sent since the last call, with who sent each.
    pub fn take_admin_commands(&mut self) -> Vec<(PeerId, String)> {
        std::mem::take(&mut self.admin_queue)
    }

    fn on_admin(&mut self, peer: PeerId, player: PlayerId, password: &str, command: String) {
        let name = self.peers.get(&peer).map(|p| p.name.clone()).unwrap_or_default();
        let addr = self.addr_of(peer);
        // An operator's key is their proof: no password.
        if let Some(k) = self.peers.get(&peer).and_then(|p| p.key).filter(|k| self.ops.contains(k)) {
            info!(player, name = %name, key = %keylist::short(&k), command = %crate::protocol::names::for_log(&command), "operator command");
            if self.admin_queue.len() < 16 {
                self.admin_queue.push((peer, command));
            }
            return;
        }
        // No password and no operator's key: said plainly, and not a wrong guess.
        if password.is_empty() && self.config.admin_password.is_some() {
            let fp = self.peers.get(&peer).and_then(|p| p.key).map_or("none".to_string(), |k| keylist::short(&k));
            return self.notice(
                peer,
                &format!("{ADMIN_REFUSED}your key [{fp}] is not an operator here (ops.toml): give the admin password"),
            );
        }
        let Some(expected) = self.config.admin_password.clone() else {
            // Logged once per connection (a client could send these as fast as it may).
            if let Some(p) = self.peers.get_mut(&peer).filter(|p| p.admin_failures == 0) {
                p.admin_failures = 1;
                warn!(player, name = %name, addr = %addr, "admin command refused: this server has no admin password");
            }
            return self.notice(
                peer,
                &format!("{ADMIN_REFUSED}this server takes no admin commands from you (no admin_password is set and your key is not in ops.toml)"),
            );
        };
        // Wrong passwords are counted per address over ADMIN_LOCKOUT_TICKS (reconnecting
        // does not reset them); an address over the limit is not even checked.
        let ip = self.net.peer_addr(peer).map(|a| a.ip().to_canonical());
        let now = self.world.tick;
        self.admin_guesses.retain(|_, (since, _)| now.saturating_sub(*since) < ADMIN_LOCKOUT_TICKS);
        if ip.and_then(|ip| self.admin_guesses.get(&ip)).is_some_and(|(_, n)| *n >= MAX_ADMIN_FAILURES) {
            warn!(player, name = %name, addr = %addr, "admin command refused: too many wrong passwords from this address");
            return self.drop_peer(
                peer,
                Some(RejectReason::Kicked { reason: "too many wrong admin passwords: wait ten minutes".into() }),
            );
        }
        // Compared as SHA-256 digests, in constant time: neither the content nor the
        // length of the password shows in the timing. The session is encrypted, so the
        // password was not exposed on the way.
        use sha2::Digest;
        let (a, b) = (sha2::Sha256::digest(password.as_bytes()), sha2::Sha256::digest(expected.as_bytes()));
        let ok = a.iter().zip(b.iter()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0;
        if !ok {
            let failures = match ip {
                Some(ip) => {
                    if self.admin_guesses.len() >= 4096 {
                        self.admin_guesses.clear();
                    }
                    let e = self.admin_guesses.entry(ip).or_insert((now, 0));
                    e.1 += 1;
                    e.1
                }
                None => MAX_ADMIN_FAILURES,
            };
            warn!(player, name = %name, addr = %addr, failures, "admin command refused: wrong admin password");
            if failures >= MAX_ADMIN_FAILURES {
                return self.drop_peer(peer, Some(RejectReason::Kicked { reason: "wrong admin password".into() }));
            }
            return self.notice(peer, &format!("{ADMIN_REFUSED}wrong admin password"));
        }
        info!(player, name = %name, addr = %addr, command = %crate::protocol::names::for_log(&command), "admin command");
        if self.admin_queue.len() < 16 {
            self.admin_queue.push((peer, command));
        }
    }

    /// One line per connected player: id, name, address, ping, loss, where they are.
    pub fn player_lines(&self) -> Vec<String> {
        self.peers
            .iter()
            .filter_map(|(peer, p)| {
                let s = self.net.stats(*peer);
                let addr = self.addr_of(*peer);
                let player = match p.state {
                    PeerState::Playing { player } => player,
                    PeerState::Watching { target } => {
                        let watched = self.world.player(target).map_or("?".to_string(), |t| t.name.clone());
                        return Some(format!(
                            "spectator {:?}{} from {addr}: watching {watched:?} (player {target}), ping {:.0} ms",
                            p.name,
                            key_tag(p.key.as_ref()),
                            s.rtt_ms
                        ));
                    }
                    _ => return None,
                };
                let place = match self.world.instance_of(player) {
                    Some(i) if i == self.world.hub => "the hub".to_string(),
                    Some(i) => format!(
                        "instance {i} ({})",
                        self.world.instances.get(&i).and_then(|x| x.dungeon()).unwrap_or("?")
                    ),
                    None => "nowhere".to_string(),
                };
                Some(format!(
                    "player {player} {:?}{} from {addr}: ping {:.0} ms, loss {:.1} %, in {place}",
                    p.name,
                    key_tag(p.key.as_ref()),
                    s.rtt_ms,
                    s.loss * 100.0
                ))
            })
            .collect()
    }

    /// The instances with their players and bullets.
    pub fn instance_lines(&self) -> Vec<String> {
        self.world
            .instances
            .values()
            .map(|i| {
                format!(
                    "instance {} {}: {} player(s), {} bullet(s), {} enem(ies){}",
                    i.id,
                    i.dungeon().unwrap_or("(hub)"),
                    i.players.len(),
                    i.bullets.len(),
                    i.enemies.len(),
                    if i.boss.is_some() { ", boss" } else { "" }
                )
            })
            .collect()
    }

    /// Ends every connection (server shutdown). Bodies go linkdead like any other drop.
    pub fn shutdown(&mut self) {
        self.save_known(true);
        let reason = match &self.stop_message {
            Some(m) => format!("the server is shutting down: {m}"),
            None => "the server is shutting down".to_string(),
        };
        let ids: Vec<PeerId> = self.peers.keys().copied().collect();
        for peer in ids {
            self.drop_peer(peer, Some(RejectReason::Kicked { reason: reason.clone() }));
        }
        let mut sink = Vec::new();
        self.net.poll(&mut sink);
    }
}
