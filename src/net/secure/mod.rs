//! Encrypted and authenticated datagrams below ENet: the socket ENet is given when a
//! transport crosses a real network. Nothing ENet sees (and so no ENet peer) exists before
//! a session has been set up, and every datagram after that is sealed with
//! ChaCha20-Poly1305 under keys from a Noise handshake.
//!
//! Construction (see `docs/SECURITY.md` for the reasoning and the threat model):
//! - `Noise_XX_25519_ChaChaPoly_BLAKE2s` (the `snow` crate): the server proves its static
//!   X25519 key, which the client pins on first use (`KnownServers`), and the client proves
//!   its own, the player's key (`Identity::player`), which the server knows the player by.
//! - Before any Diffie-Hellman or state, a stateless cookie in the WireGuard manner: the
//!   first packet from an address is answered with `MAC(secret, address, time window)`, no
//!   larger than the request; only a packet carrying a valid cookie (proof that the
//!   source address is real) costs the server a handshake and a session slot.
//! - The client's `Confirm` is Noise's third message: its static key, and as its payload a
//!   MAC of the handshake hash keyed by the server password's hash (an empty password when
//!   there is none). The password never travels, not even encrypted, and the proof is
//!   bound to this session.
//! - Data: `u24 header, sealed datagram` (19 bytes of overhead): the header's top bit
//!   marks Data and its other 23 bits are the low bits of a per-direction 56-bit counter
//!   (the receiver takes the value nearest its newest, as QUIC does with packet numbers).
//!   The other sealed packets carry `u8 type, u24 counter`. The packet type is the AEAD
//!   nonce's top byte, so a packet relabelled on the way does not open. A 1,024-packet
//!   sliding window refuses replays. Anything that does not open is dropped and counted,
//!   never handed to ENet.
//!
//! Packet layouts: see `docs/PROTOCOL.md` ("The secure layer"), which gives every byte and
//! a worked example that `tests/protocol.rs` checks against this code.
//! - 1 `Init` c->s: `u8 version`, zero padding to `INIT_LEN`.
//! - 2 `Cookie` s->c: `u8 version, [16] cookie` (smaller than `Init`).
//! - 3 `Hello` c->s: `u8 version, [16] cookie, noise message 1 (32)`, padding to `HELLO_LEN`.
//! - 4 `Welcome` s->c: `noise message 2 (96)` (smaller than `Hello`).
//! - 5 `Confirm` c->s: `noise message 3 (96)`: the client's static key and the password
//!   proof, sealed;
//! - 6 `Accept` s->c (empty), 7 `Refuse` s->c (a one-byte reason): `u24 counter
//!   (little-endian), sealed payload`;
//! - 12 `Busy` s->c: `u8 version, u8 reason, [16] the Hello's cookie` (smaller than `Hello`);
//! - Data: byte 0 has its top bit set (see above; the 23-bit counter is big-endian).
//!
//! Receive path: the socket is drained in batches (`udp`) between ticks and at each poll,
//! garbage is refused on its first byte and length, and what opens is checked by `guard`
//! before ENet sees it.

mod client;
#[cfg(test)]
mod example;
pub mod guard;
mod identity;
mod server;
pub mod udp;

use std::collections::VecDeque;
use std::io::{self, ErrorKind};
use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use blake2::digest::{KeyInit, Mac};
use rusty_enet as enet;
use snow::StatelessTransportState;

pub use client::ClientSecurity;
use client::{ClientPhase, ClientSide};
pub use identity::{fingerprint, from_hex, to_hex, Identity, KnownServers, Pin};
use server::ServerSide;
pub use server::{
    ServerSecurity, StatusBoard, CONNECT_DEADLINE, DEFAULT_SESSIONS_PER_ADDRESS, GLOBAL_GUESS_BURST,
    GLOBAL_GUESS_REFILL, GUESSED_RECENTLY, GUESS_BURST, GUESS_REFILL, HALF_OPEN_MAX, HOLD_MAX, MAX_HANDSHAKES_PER_IP,
};

/// The Noise protocol name.
pub const NOISE: &str = "Noise_XX_25519_ChaChaPoly_BLAKE2s";
/// Version of this layer; a different one is told so in the `Cookie` answer.
pub const SECURE_VERSION: u8 = 4;
pub(crate) const INIT_LEN: usize = 64;
pub(crate) const HELLO_LEN: usize = 128;
const TAG: usize = 16;
pub(crate) const T_INIT: u8 = 1;
pub(crate) const T_COOKIE: u8 = 2;
pub(crate) const T_HELLO: u8 = 3;
pub(crate) const T_WELCOME: u8 = 4;
pub(crate) const T_CONFIRM: u8 = 5;
pub(crate) const T_ACCEPT: u8 = 6;
pub(crate) const T_REFUSE: u8 = 7;
pub(crate) const T_DATA: u8 = 8;
pub(crate) const T_BUSY: u8 = 12;
const BUSY_LEN: usize = 3 + 16;
/// Relayed friends' real addresses a host remembers (`SecureSocket::origin`).
const MAX_ORIGINS: usize = 256;

/// Cookies are valid for the current and the previous window of this many seconds.
const COOKIE_WINDOW_S: u64 = 30;
/// A session that has not confirmed within this long is forgotten.
pub const HANDSHAKE_DEADLINE: Duration = Duration::from_secs(5);
/// A session silent for this long is forgotten (ENet pings every second).
pub const SESSION_IDLE: Duration = Duration::from_secs(30);
/// Per-session rate limits, averaged over a second: a peer above them is cut off.
pub const MAX_PACKETS_PER_SECOND: u32 = 600;
pub const MAX_BYTES_PER_SECOND: u64 = 512 * 1024;
/// Handshakes (Diffie-Hellman) one IP address may start per second.
pub const MAX_HANDSHAKES_PER_IP_PER_SECOND: u32 = 8;
/// How long one poll may spend draining the socket (the rest waits for the next poll).
pub const DRAIN_BUDGET: Duration = Duration::from_millis(4);
/// Without `begin_poll`, the drain budget starts afresh this often.
const DRAIN_WINDOW: Duration = Duration::from_millis(8);
/// Opened datagrams waiting for ENet at most; more are dropped (counted as backlog).
const MAX_READY: usize = 4096;
/// How often a client repeats an unanswered handshake packet.
const RETRY: Duration = Duration::from_millis(400);
const REPLAY_WINDOW: u64 = 1024;
// No amplification: before an address is verified, no answer is larger than its request.
const COOKIE_LEN: usize = 2 + 16;
const WELCOME_LEN: usize = 1 + 96;
/// `Confirm`: the type, then Noise's third message (the static key, sealed: 48; the
/// password proof, sealed: 48).
pub(crate) const CONFIRM_LEN: usize = 1 + 96;
const _: () = assert!(COOKIE_LEN <= INIT_LEN && WELCOME_LEN <= HELLO_LEN && BUSY_LEN <= HELLO_LEN);

/// Whether the per-address limits apply to `ip`: not to this machine's own loopback
/// address (127.0.0.1 or ::1), where an operator's bots, soak tests and tools connect
/// many at a time. Other loopback addresses (127.0.0.2 and up) are limited like any.
pub fn per_address_limited(ip: std::net::IpAddr) -> bool {
    match ip {
        std::net::IpAddr::V4(a) => a != std::net::Ipv4Addr::LOCALHOST,
        std::net::IpAddr::V6(a) => {
            a != std::net::Ipv6Addr::LOCALHOST && a.to_ipv4_mapped() != Some(std::net::Ipv4Addr::LOCALHOST)
        }
    }
}

/// What the per-address limits count as one address: an IPv4 address (IPv4-mapped IPv6
/// included), or an IPv6 address's /64 (one household or machine usually holds a whole
/// /64, so counting single IPv6 addresses would limit nothing).
pub fn address_key(ip: std::net::IpAddr) -> std::net::IpAddr {
    match ip {
        std::net::IpAddr::V6(a) => match a.to_ipv4_mapped() {
            Some(v4) => std::net::IpAddr::V4(v4),
            None => {
                let s = a.segments();
                std::net::IpAddr::V6(std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        },
        v4 => v4,
    }
}

/// `to` as `sock` can send to it: an IPv4 address from a dual-stack (IPv6) socket is
/// written IPv4-mapped.
pub(super) fn reachable_from(sock: &UdpSocket, to: SocketAddr) -> SocketAddr {
    match (to, sock.local_addr()) {
        (SocketAddr::V4(v4), Ok(SocketAddr::V6(_))) => SocketAddr::new(v4.ip().to_ipv6_mapped().into(), v4.port()),
        _ => to,
    }
}

fn mac(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    let mut m = <blake2::Blake2sMac256 as KeyInit>::new_from_slice(&key[..key.len().min(32)])
        .expect("keys of up to 32 bytes are valid");
    for p in parts {
        m.update(p);
    }
    m.finalize().into_bytes().into()
}

/// The key a password proof is made with: a hash of the password (empty: none set).
fn password_key(password: &str) -> [u8; 32] {
    mac(b"hailfire password", &[password.as_bytes()])
}

/// Counts of what the layer dropped and did, for logs, `status` and tests.
#[derive(Clone, Debug, Default)]
pub struct SecureStats {
    /// Datagrams not let through, for any reason below (replays apart).
    pub dropped: u64,
    /// Datagrams refused as replays (a nonce already seen or too old).
    pub replayed: u64,
    /// Of `dropped`: a type or length no packet has, or cut short by the kernel.
    pub garbage: u64,
    /// Of `dropped`: sealed data or a Confirm from an address with no session.
    pub no_session: u64,
    /// Of `dropped`: sealed, but did not open (wrong key, tampered, forged cookie).
    pub unopened: u64,
    /// Of `dropped`: opened, but not what an honest ENet client sends (`guard`).
    pub enet_refused: u64,
    /// Of `dropped`: a second ENet connection from one session.
    pub extra_peers: u64,
    /// Of `dropped`: status queries over their budgets.
    pub status_dropped: u64,
    /// Of `dropped`: Hellos answered `Busy` (one address's share or the table is full).
    pub busy: u64,
    /// Opened datagrams dropped because ENet was this far behind.
    pub backlog: u64,
    /// Handshakes in progress evicted by newer ones (the pool was full).
    pub evicted: u64,
    /// Confirmed sessions forgotten without a peer (never connected, or peer gone).
    pub idle_dropped: u64,
    /// Sessions cut off for what ENet would have had to hold.
    pub cut_for_memory: u64,
    /// Sessions cut off for going over the rate limits.
    pub rate_limited: u64,
    /// Password checks that had to wait for a token.
    pub held_guesses: u64,
    pub refused_passwords: u64,
    pub cookies_sent: u64,
    pub handshakes: u64,
    pub status_answered: u64,
    pub status_cookies: u64,
    /// Datagrams the kernel dropped on this socket because its buffer was full.
    pub kernel_dropped: u64,
    /// The receive buffer the system granted, in bytes (0: unknown).
    pub receive_buffer: usize,
    /// Confirmed sessions and handshakes in progress now.
    pub sessions: usize,
    pub half_open: usize,
    pub bytes_sent: u64,
    pub bytes_received: u64,
}

impl SecureStats {
    /// The drop counters that are not zero, in words (for `status` and the log).
    pub fn drops(&self) -> String {
        let parts = [
            ("garbage", self.garbage),
            ("no session", self.no_session),
            ("did not open", self.unopened),
            ("replayed", self.replayed),
            ("bad ENet", self.enet_refused),
            ("extra peers", self.extra_peers),
            ("busy", self.busy),
            ("status over budget", self.status_dropped),
            ("backlog", self.backlog),
            ("evicted handshakes", self.evicted),
            ("sessions without a peer", self.idle_dropped),
            ("cut for memory", self.cut_for_memory),
            ("cut for rate", self.rate_limited),
            ("held password checks", self.held_guesses),
            ("kernel (buffer full)", self.kernel_dropped),
        ];
        let v: Vec<String> = parts.iter().filter(|(_, n)| *n > 0).map(|(w, n)| format!("{w} {n}")).collect();
        if v.is_empty() {
            "none".into()
        } else {
            v.join(", ")
        }
    }
}

/// Sliding window of received nonces.
#[derive(Default)]
struct Replay {
    top: u64,
    bits: Vec<u64>,
    any: bool,
}

impl Replay {
    /// Whether `n` is new (and records it).
    fn accept(&mut self, n: u64) -> bool {
        if self.bits.is_empty() {
            self.bits = vec![0; (REPLAY_WINDOW / 64) as usize];
        }
        if self.any && n + REPLAY_WINDOW <= self.top {
            return false;
        }
        if !self.any || n > self.top {
            let shift = if self.any { n - self.top } else { REPLAY_WINDOW };
            for k in 0..shift.min(REPLAY_WINDOW) {
                let slot = (self.top + 1 + k) % REPLAY_WINDOW;
                self.bits[(slot / 64) as usize] &= !(1 << (slot % 64));
            }
            self.top = n;
            self.any = true;
        }
        let slot = n % REPLAY_WINDOW;
        let (w, b) = ((slot / 64) as usize, 1u64 << (slot % 64));
        if self.bits[w] & b != 0 {
            return false;
        }
        self.bits[w] |= b;
        true
    }
}

struct Keys {
    transport: StatelessTransportState,
    send_nonce: u64,
    replay: Replay,
}

/// Bytes of the counter that travel with each sealed handshake packet, after its type.
const NONCE_BYTES: usize = 3;
const NONCE_MASK: u64 = (1 << (8 * NONCE_BYTES)) - 1;
/// Header of a sealed handshake packet: type and truncated counter.
const SEALED_HEADER: usize = 1 + NONCE_BYTES;
/// Data packets: a 3-byte header, top bit set, holding 23 bits of the counter.
const DATA_FLAG: u8 = 0x80;
const DATA_HEADER: usize = 3;
const DATA_MASK: u64 = (1 << 23) - 1;

/// The packet type of a datagram from its first byte.
fn kind_of(first: u8) -> u8 {
    if first & DATA_FLAG != 0 {
        T_DATA
    } else {
        first
    }
}

/// The AEAD nonce of a packet: its counter, with its type as the top byte (so the type is
/// authenticated without a byte of its own).
fn aead_nonce(kind: u8, counter: u64) -> u64 {
    ((kind as u64) << 56) | (counter & ((1 << 56) - 1))
}

/// The full counter a truncated one (`mask` bits) stands for: the value with those low
/// bits nearest to `expected` (the one after the newest received).
fn expand_counter(low: u64, expected: u64, mask: u64) -> u64 {
    let span = mask + 1;
    let candidate = (expected & !mask) | (low & mask);
    if candidate + span / 2 <= expected && candidate + span < (1 << 56) {
        candidate + span
    } else if candidate > expected + span / 2 && candidate >= span {
        candidate - span
    } else {
        candidate
    }
}

impl Keys {
    /// Seals `payload` under the next counter; the type rides in the nonce.
    fn seal(&mut self, kind: u8, payload: &[u8]) -> Option<Vec<u8>> {
        let n = self.send_nonce;
        self.send_nonce += 1;
        let head = if kind == T_DATA { DATA_HEADER } else { SEALED_HEADER };
        let mut out = vec![0u8; head + payload.len() + TAG];
        if kind == T_DATA {
            let h = (n & DATA_MASK) as u32 | ((DATA_FLAG as u32) << 16);
            out[..DATA_HEADER].copy_from_slice(&h.to_be_bytes()[1..]);
        } else {
            out[0] = kind;
            out[1..SEALED_HEADER].copy_from_slice(&n.to_le_bytes()[..NONCE_BYTES]);
        }
        let len = self.transport.write_message(aead_nonce(kind, n), payload, &mut out[head..]).ok()?;
        out.truncate(head + len);
        Some(out)
    }

    /// Opens a sealed packet into `out`; an error when it does not open (wrong key,
    /// tampered, relabelled) or is a replay.
    fn open(&mut self, packet: &[u8], out: &mut [u8]) -> Result<usize, Drop> {
        let Some(&first) = packet.first() else { return Err(Drop::Bad) };
        if out.len() + TAG + 8 < packet.len() {
            return Err(Drop::Bad);
        }
        let kind = kind_of(first);
        let head = if kind == T_DATA { DATA_HEADER } else { SEALED_HEADER };
        if packet.len() < head + TAG {
            return Err(Drop::Bad);
        }
        let (low, mask) = if kind == T_DATA {
            (u32::from_be_bytes([0, packet[0] & !DATA_FLAG, packet[1], packet[2]]) as u64, DATA_MASK)
        } else {
            let mut low = [0u8; 8];
            low[..NONCE_BYTES].copy_from_slice(&packet[1..SEALED_HEADER]);
            (u64::from_le_bytes(low), NONCE_MASK)
        };
        let expected = if self.replay.any { self.replay.top + 1 } else { 0 };
        let n = expand_counter(low, expected, mask);
        let mut plain = vec![0u8; packet.len() - head];
        let len =
            self.transport.read_message(aead_nonce(kind, n), &packet[head..], &mut plain).map_err(|_| Drop::Bad)?;
        if len > out.len() {
            return Err(Drop::Bad);
        }
        if !self.replay.accept(n) {
            return Err(Drop::Replay);
        }
        out[..len].copy_from_slice(&plain[..len]);
        Ok(len)
    }
}

enum Drop {
    Bad,
    Replay,
}

impl SecureStats {
    /// Counts a datagram that was not let through.
    fn count(&mut self, d: Drop) -> Option<usize> {
        match d {
            Drop::Bad => {
                self.dropped += 1;
                self.unopened += 1;
            }
            Drop::Replay => self.replayed += 1,
        }
        None
    }
}

// ---------------------------------------------------------------- the socket

enum Side {
    Server(Box<ServerSide>),
    Client(Box<ClientSide>),
}

/// The socket ENet runs over: UDP, with every datagram sealed (see the module docs).
pub struct SecureSocket {
    inner: UdpSocket,
    side: Side,
    pub stats: SecureStats,
    /// Why the client side gave up, in words for the player (taken by the transport).
    pub failure: Option<String>,
    rx: udp::Receiver,
    /// Opened datagrams waiting for ENet to take them.
    ready: VecDeque<(SocketAddr, Vec<u8>)>,
    opened: Vec<u8>,
    /// Time spent draining since the transport's poll began (`begin_poll`), and when that
    /// was (a user that never calls `begin_poll` gets a fresh budget every `DRAIN_WINDOW`).
    drained: Duration,
    drain_epoch: Instant,
}

impl SecureSocket {
    pub fn server(inner: UdpSocket, cfg: ServerSecurity) -> io::Result<Self> {
        let mut secret = [0u8; 32];
        rand_core::RngCore::fill_bytes(&mut rand_core::OsRng, &mut secret);
        let granted = udp::tune(&inner);
        if granted > 0 && granted < udp::RECEIVE_BUFFER {
            tracing::info!(
                granted,
                asked = udp::RECEIVE_BUFFER,
                "the system capped the UDP receive buffer (raise net.core.rmem_max: see SERVER.md)"
            );
        }
        let mut sock = Self::with(inner, Side::Server(Box::new(ServerSide::new(cfg, secret))));
        sock.stats.receive_buffer = granted;
        Ok(sock)
    }

    fn with(inner: UdpSocket, side: Side) -> Self {
        SecureSocket {
            inner,
            side,
            stats: SecureStats::default(),
            failure: None,
            rx: udp::Receiver::default(),
            ready: VecDeque::new(),
            opened: vec![0; enet::MTU_MAX],
            drained: Duration::ZERO,
            drain_epoch: Instant::now(),
        }
    }

    pub fn client(inner: UdpSocket, server: SocketAddr, cfg: ClientSecurity) -> io::Result<Self> {
        let identity = match &cfg.identity {
            Some(id) => id.clone(),
            None => Identity::generate()?,
        };
        let side = ClientSide {
            cfg,
            server,
            wire: server,
            phase: ClientPhase::Start,
            queue: VecDeque::new(),
            server_key: None,
            identity,
            relay_nonce: crate::net::relay::new_nonce(),
        };
        Ok(Self::with(inner, Side::Client(Box::new(side))))
    }

    /// Reads what the socket holds (for at most `budget`): handshakes and status queries
    /// are answered now, opened data waits for ENet. Never blocks.
    pub fn drain(&mut self, budget: Duration) -> io::Result<()> {
        let start = Instant::now();
        let r = self.drain_for(budget, start);
        self.drained += start.elapsed();
        r
    }

    /// A poll of the transport begins: `receive` may drain for `DRAIN_BUDGET` in all
    /// during it, however many times ENet calls it.
    pub fn begin_poll(&mut self) {
        self.drained = Duration::ZERO;
        self.drain_epoch = Instant::now();
    }

    fn drain_for(&mut self, budget: Duration, start: Instant) -> io::Result<()> {
        loop {
            let mut rx = std::mem::take(&mut self.rx);
            let got = udp::receive(&self.inner, &mut rx);
            let n = rx.got.len();
            for i in 0..n {
                let d = &rx.got[i];
                self.stats.bytes_received += d.len as u64;
                // A datagram straight from an address that stands for a relayed friend is
                // not one: only the relay speaks for them.
                if d.truncated || crate::net::relay::session_of(d.from).is_some() {
                    self.stats.garbage += 1;
                    self.stats.dropped += 1;
                    continue;
                }
                self.take(d.from, rx.data(i));
            }
            self.stats.kernel_dropped = rx.kernel_dropped;
            self.rx = rx;
            got?;
            if n == 0 || start.elapsed() >= budget {
                return Ok(());
            }
        }
    }

    /// Waits up to `timeout` for datagrams and drains them.
    pub fn wait(&mut self, timeout: Duration) {
        udp::wait_readable(&self.inner, timeout);
        let _ = self.drain(DRAIN_BUDGET);
        self.server_expire();
    }

    /// One datagram off the wire.
    fn take(&mut self, from: SocketAddr, data: &[u8]) {
        // A relay's: its answer to our registration, or a friend's datagram it forwards.
        if let Side::Server(s) = &mut self.side {
            let canon = |a: SocketAddr| SocketAddr::new(a.ip().to_canonical(), a.port());
            // (Compared before anything is cloned: this runs for every datagram.)
            let from_relay = s.cfg.relay.as_ref().is_some_and(|l| canon(l.addr) == canon(from));
            if let Some(link) = s.cfg.relay.clone().filter(|_| from_relay) {
                if let Some(cookie) = crate::net::relay::read_cookie(data) {
                    // Our address proven: register again at once, with the cookie.
                    s.relay_cookie = cookie;
                    let code = link.code();
                    let p = crate::net::relay::register_request(
                        &code.unwrap_or([0; 6]),
                        &cookie,
                        &s.relay_nonce,
                        link.hide,
                    );
                    let to = reachable_from(&self.inner, link.addr);
                    let _ = self.inner.send_to(&p, to);
                    return;
                }
                match (data.first(), crate::net::relay::read_answer(data)) {
                    (_, Some((crate::net::relay::T_FULL, _))) => {
                        if !s.relay_full {
                            s.relay_full = true;
                            tracing::warn!(relay = %link.addr, "the relay has no room for this host now (it keeps asking)");
                        }
                    }
                    (_, Some((crate::net::relay::T_CODE, code))) => {
                        if let Ok(mut c) = link.code.lock() {
                            if *c != Some(code) {
                                tracing::info!(
                                    code = %crate::net::relay::code_text(&code),
                                    relay = %link.addr,
                                    "friends join through the relay with {}@{}",
                                    crate::net::relay::code_text(&code),
                                    link.name
                                );
                            }
                            *c = Some(code);
                        }
                    }
                    // A friend introduced: punch towards it for a while (proven the
                    // relay's by our own nonce, which we sent to the relay alone, so
                    // nobody off the path can make us send to a third party).
                    (Some(&crate::net::relay::T_MEET), _) => {
                        let meet = crate::net::relay::read_meet(data).filter(|(proof, _, peer)| {
                            (constant_time_eq(proof, &s.relay_nonce) || constant_time_eq(proof, &s.relay_nonce_prev))
                                && crate::net::relay::may_punch(*peer, link.addr)
                        });
                        let Some((_, token, peer)) = meet else {
                            self.stats.garbage += 1;
                            self.stats.dropped += 1;
                            return;
                        };
                        let now = Instant::now();
                        s.punching.retain(|p| p.peer != peer);
                        if s.punching.len() >= crate::net::relay::MAX_PUNCHING {
                            s.punching.remove(0);
                        }
                        let mut p = crate::net::relay::Punching::new(peer, token, now);
                        p.send_due(&self.inner, now, true);
                        s.punching.push(p);
                        let sid = crate::net::relay::meet_session(data);
                        if sid != 0 {
                            s.origins.retain(|(x, _)| *x != sid);
                            if s.origins.len() >= MAX_ORIGINS {
                                s.origins.pop_front();
                            }
                            s.origins.push_back((sid, peer));
                        }
                    }
                    (Some(&crate::net::relay::T_DATA), _) if data.len() > 5 => {
                        let sid = u32::from_le_bytes(data[1..5].try_into().expect("4 bytes"));
                        let inner = data[5..].to_vec();
                        return self.take(crate::net::relay::virtual_addr(sid), &inner);
                    }
                    _ => {
                        self.stats.garbage += 1;
                        self.stats.dropped += 1;
                    }
                }
                return;
            }
        }
        // A friend the relay introduced, punching through: answered once, from the
        // socket the game runs on (which opens our NAT to it if our own punches have not).
        if let Side::Server(s) = &mut self.side {
            if data.first() == Some(&crate::net::relay::T_PUNCH) && !s.punching.is_empty() {
                let token = crate::net::relay::read_punch(data);
                let known = token.is_some_and(|t| {
                    s.punching
                        .iter()
                        .any(|p| crate::net::relay::same_ip(p.peer, from) && constant_time_eq(&p.token, &t))
                });
                if let (true, Some(t)) = (known, token) {
                    let _ = self.inner.send_to(&crate::net::relay::punch(&t), from);
                    return;
                }
            }
        }
        // The client: once it reached the host straight, the address it plays to stands
        // in for the relay's (ENet knows only that one), and the relay has nothing more to
        // say to it.
        let mut from = from;
        if let Side::Client(c) = &self.side {
            if c.wire != c.server {
                if from == c.wire {
                    from = c.server;
                } else if from == c.server {
                    self.stats.dropped += 1;
                    return;
                }
            }
        }
        let mut out = std::mem::take(&mut self.opened);
        let opened = match self.side {
            Side::Server(_) => self.server_packet(from, data, &mut out),
            Side::Client(_) => self.client_packet(from, data, &mut out),
        };
        if let Some(n) = opened {
            if self.ready.len() < MAX_READY {
                self.ready.push_back((from, out[..n].to_vec()));
            } else {
                self.stats.backlog += 1;
            }
        }
        self.opened = out;
    }

    /// The ENet peer at `addr` is gone: its session ends shortly (server side).
    pub fn retire(&mut self, addr: SocketAddr) {
        self.server_retire(addr);
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }

    /// The static key the client at `addr` proved (server side, once it confirmed).
    pub fn client_key(&self, addr: SocketAddr) -> Option<[u8; 32]> {
        match &self.side {
            Side::Server(s) => s.sessions.get(&addr).filter(|x| x.confirmed).and_then(|x| x.client_key),
            Side::Client(_) => None,
        }
    }

    /// The server's key as the client saw it (once the handshake got that far).
    pub fn server_key(&self) -> Option<[u8; 32]> {
        match &self.side {
            Side::Client(c) => c.server_key,
            Side::Server(_) => None,
        }
    }

    /// Server: where the relayed friend at virtual address `addr` really is, as the relay
    /// said when it introduced us (None: not relayed, or not introduced).
    pub fn origin(&self, addr: SocketAddr) -> Option<SocketAddr> {
        let sid = crate::net::relay::session_of(SocketAddr::new(addr.ip().to_canonical(), addr.port()))?;
        match &self.side {
            Side::Server(s) => s.origins.iter().rev().find(|(x, _)| *x == sid).map(|(_, a)| *a),
            Side::Client(_) => None,
        }
    }

    /// Client: how its datagrams reach the server, in words (None: server side).
    pub fn route(&self) -> Option<&'static str> {
        match &self.side {
            Side::Client(c) if c.cfg.relay_code.is_none() => Some("direct"),
            Side::Client(c) if c.wire != c.server => Some("straight to the host"),
            Side::Client(c) if matches!(c.phase, ClientPhase::Ready(_)) => Some("through the relay"),
            Side::Client(_) => Some("joining through the relay"),
            Side::Server(_) => None,
        }
    }

    /// Client: what the handshake got to, in words, when it stopped short of a session
    /// (None: it never heard the server, or it has a session).
    pub fn stuck_at(&self) -> Option<&'static str> {
        match &self.side {
            Side::Client(c) => match c.phase {
                ClientPhase::Hello { .. } => Some(
                    "the server answered but gave us no session: it may be full or under attack (or too many \
                     connections come from your address); try again in a minute",
                ),
                ClientPhase::Confirm { .. } => Some(
                    "the server did not answer our password proof: it may be busy checking other passwords; \
                     try again in a minute",
                ),
                _ => None,
            },
            Side::Server(_) => None,
        }
    }

    /// `to` as this socket can send to it: an IPv4 address from a dual-stack (IPv6)
    /// socket is written IPv4-mapped.
    pub(super) fn reachable(&self, to: SocketAddr) -> SocketAddr {
        reachable_from(&self.inner, to)
    }

    fn raw_send(&mut self, to: SocketAddr, data: &[u8]) {
        // A friend reached through the relay: wrapped for it.
        if let (Side::Server(s), Some(sid)) = (&self.side, crate::net::relay::session_of(to)) {
            let Some(relay) = s.cfg.relay.as_ref().map(|l| l.addr) else { return };
            let relay = self.reachable(relay);
            let mut p = Vec::with_capacity(data.len() + 5);
            p.push(crate::net::relay::T_DATA);
            p.extend_from_slice(&sid.to_le_bytes());
            p.extend_from_slice(data);
            if let Ok(n) = self.inner.send_to(&p, relay) {
                self.stats.bytes_sent += n as u64;
            }
            return;
        }
        // The client sends where it reached the host (the relay's address or, once it
        // punched through, the host's own).
        let to = match &self.side {
            Side::Client(c) if to == c.server => c.wire,
            _ => to,
        };
        match self.inner.send_to(data, to) {
            Ok(n) => self.stats.bytes_sent += n as u64,
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            Err(_) => {}
        }
    }

    fn fail(&mut self, why: String) {
        if self.failure.is_none() {
            tracing::warn!("secure session: {why}");
            self.failure = Some(why);
        }
        if let Side::Client(c) = &mut self.side {
            c.phase = ClientPhase::Failed;
            c.queue.clear();
        }
    }

    fn seal_and_send(&mut self, to: SocketAddr, data: &[u8]) {
        let sealed = match &mut self.side {
            Side::Client(c) => match &mut c.phase {
                ClientPhase::Ready(keys) => keys.seal(T_DATA, data),
                ClientPhase::Failed => None,
                _ => {
                    if c.queue.len() < 64 {
                        c.queue.push_back(data.to_vec());
                    }
                    None
                }
            },
            Side::Server(s) => {
                s.sessions.get_mut(&to).filter(|x| x.confirmed).and_then(|x| x.keys.as_mut()?.seal(T_DATA, data))
            }
        };
        if let Some(p) = sealed {
            self.raw_send(to, &p);
        }
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

impl enet::Socket for SecureSocket {
    type Address = SocketAddr;
    type Error = io::Error;

    fn init(&mut self, options: enet::SocketOptions) -> Result<(), io::Error> {
        enet::Socket::init(&mut self.inner, options)
    }

    fn send(&mut self, address: SocketAddr, buffer: &[u8]) -> Result<usize, io::Error> {
        self.seal_and_send(address, buffer);
        Ok(buffer.len())
    }

    fn receive(
        &mut self,
        buffer: &mut [u8; enet::MTU_MAX],
    ) -> Result<Option<(SocketAddr, enet::PacketReceived)>, io::Error> {
        self.client_tick();
        self.server_expire();
        // One poll may ask many times (ENet's service loop runs again while it has events):
        // the budget is per poll, not per question.
        if self.drain_epoch.elapsed() >= DRAIN_WINDOW {
            self.begin_poll();
        }
        if self.ready.is_empty() && self.drained < DRAIN_BUDGET {
            // A bounded time per poll: a flood cannot keep ENet (and the tick) waiting;
            // what is left waits for the time between ticks.
            self.drain(DRAIN_BUDGET - self.drained)?;
        }
        Ok(self.ready.pop_front().map(|(from, d)| {
            let n = d.len().min(buffer.len());
            buffer[..n].copy_from_slice(&d[..n]);
            (from, enet::PacketReceived::Complete(n))
        }))
    }
}

/// For `cargo fuzz` only: a server-side secure socket fed datagrams directly.
#[cfg(feature = "fuzzing")]
pub mod fuzzing {
    use super::*;

    pub struct Harness {
        sock: SecureSocket,
        out: Box<[u8; enet::MTU_MAX]>,
    }

    impl Default for Harness {
        fn default() -> Self {
            Self::new()
        }
    }

    impl Harness {
        pub fn new() -> Self {
            let id = Identity::generate().expect("key pair");
            let udp = UdpSocket::bind("127.0.0.1:0").expect("loopback socket");
            udp.set_nonblocking(true).expect("non-blocking");
            let sec = ServerSecurity { max_sessions: 64, status: Some(Default::default()), ..ServerSecurity::new(id) };
            Harness { sock: SecureSocket::server(udp, sec).expect("socket"), out: Box::new([0; enet::MTU_MAX]) }
        }

        /// One datagram from 127.0.0.2:`10000 + port`; what ENet would receive, if anything.
        pub fn feed(&mut self, port: u8, data: &[u8]) -> Option<usize> {
            let from = SocketAddr::from(([127, 0, 0, 2], 10_000 + port as u16));
            self.sock.server_packet(from, data, &mut self.out[..])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client written by hand against a real server socket on loopback: what each
    /// handshake packet is answered with, and that nothing is answered larger than its
    /// request (an empty `Confirm` is not answered at all).
    #[test]
    fn no_answer_is_larger_than_its_request_and_an_empty_confirm_gets_none() {
        let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
        udp.set_nonblocking(true).unwrap();
        let to = udp.local_addr().unwrap();
        let cfg = ServerSecurity { password: Some("pw".into()), ..ServerSecurity::new(Identity::generate().unwrap()) };
        let mut server = SecureSocket::server(udp, cfg).unwrap();
        let me = UdpSocket::bind("127.0.0.1:0").unwrap();
        me.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
        let mut ask = |p: &[u8]| -> Option<Vec<u8>> {
            me.send_to(p, to).unwrap();
            std::thread::sleep(Duration::from_millis(20));
            server.drain(Duration::from_millis(50)).unwrap();
            let mut buf = [0u8; 2048];
            let got = me.recv_from(&mut buf).ok().map(|(n, _)| buf[..n].to_vec());
            if let Some(a) = &got {
                assert!(a.len() <= p.len(), "{} bytes answered to {}", a.len(), p.len());
            }
            got
        };
        let cookie = ask(&client::init_packet()).expect("a cookie");
        let player = Identity::generate().unwrap();
        let (mut hs, hello) = client::hello_packet(&cookie[2..18], &player.private, None).unwrap();
        let welcome = ask(&hello).expect("a welcome");
        let mut payload = [0u8; 64];
        hs.read_message(&welcome[1..], &mut payload).unwrap();
        let hash = hs.get_handshake_hash().to_vec();
        assert_eq!(ask(&[T_CONFIRM]), None, "an empty Confirm is not answered");
        assert_eq!(ask(&[T_CONFIRM; 97]), None, "nor one that is not this handshake's");
        let wrong = client::confirm_packet(&mut hs, &mac(&password_key("nope"), &[&hash])).unwrap();
        assert_eq!(wrong.len(), 97, "the player's key and the proof, sealed");
        let mut keys =
            Keys { transport: hs.into_stateless_transport_mode().unwrap(), send_nonce: 0, replay: Replay::default() };
        let refuse = ask(&wrong).expect("a refusal (the forged Confirms did not end the handshake)");
        assert_eq!((refuse[0], refuse.len()), (T_REFUSE, 21), "a one-byte reason, sealed");
        let mut out = [0u8; 64];
        assert_eq!(keys.open(&refuse, &mut out).ok(), Some(1));
        assert_eq!(out[0], server::REFUSE_WRONG_PASSWORD);
    }

    /// A host behind a relay punches only towards a friend the relay introduced with the
    /// host's own nonce (sent to the relay alone): a forged introduction, even with a
    /// cookie that claims to be the relay's, makes it send nothing anywhere; it answers a
    /// punch only with the right token, from the introduced address.
    #[test]
    fn a_host_punches_only_where_its_relay_sent_it() {
        use crate::net::relay;
        let sock = || {
            let s = UdpSocket::bind("127.0.0.1:0").unwrap();
            s.set_read_timeout(Some(Duration::from_millis(150))).unwrap();
            s
        };
        let (fake_relay, victim, friend) = (sock(), sock(), sock());
        let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
        udp.set_nonblocking(true).unwrap();
        let host = udp.local_addr().unwrap();
        let link = relay::RelayLink::new(fake_relay.local_addr().unwrap());
        let cfg = ServerSecurity { relay: Some(link), ..ServerSecurity::new(Identity::generate().unwrap()) };
        let mut server = SecureSocket::server(udp, cfg).unwrap();
        let recv = |s: &UdpSocket| {
            let mut b = [0u8; 128];
            s.recv_from(&mut b).ok().map(|(n, from)| (b[..n].to_vec(), from))
        };
        // The host registers; its Register carries its nonce.
        std::thread::sleep(Duration::from_millis(30));
        server.server_expire();
        let (register, _) = recv(&fake_relay).expect("a registration");
        assert_eq!(register[0], relay::T_REGISTER);
        let nonce: [u8; 16] = register[24..40].try_into().unwrap();
        assert_ne!(nonce, [0; 16]);
        assert_eq!(register[40], 0, "introductions welcome");
        // A host that keeps its address says so in every registration.
        let hidden = UdpSocket::bind("127.0.0.1:0").unwrap();
        let link = relay::RelayLink { hide: true, ..relay::RelayLink::new(fake_relay.local_addr().unwrap()) };
        let cfg = ServerSecurity { relay: Some(link), ..ServerSecurity::new(Identity::generate().unwrap()) };
        let mut other = SecureSocket::server(hidden, cfg).unwrap();
        std::thread::sleep(Duration::from_millis(30));
        other.server_expire();
        let (r, _) = recv(&fake_relay).expect("a registration");
        assert_eq!((r[0], r[40]), (relay::T_REGISTER, relay::FLAG_HIDE));
        let mut step = |from: &UdpSocket, p: &[u8]| {
            from.send_to(p, host).unwrap();
            std::thread::sleep(Duration::from_millis(20));
            server.drain(Duration::from_millis(50)).unwrap();
            server.server_expire();
        };
        // Forged: a cookie "from the relay", then an introduction proven by it; and one
        // proven by zeros.
        step(&fake_relay, &[relay::T_COOKIE, relay::VERSION, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9]);
        let _ = recv(&fake_relay);
        let v = victim.local_addr().unwrap();
        step(&fake_relay, &relay::meet(&[9; 16], &[1; 16], v));
        step(&fake_relay, &relay::meet(&[0; 16], &[1; 16], v));
        assert!(recv(&victim).is_none(), "nothing is sent to an address a forger named");
        // The relay's own introduction: punches go to the friend.
        let f = friend.local_addr().unwrap();
        step(&fake_relay, &relay::meet(&nonce, &[2; 16], f));
        let (p, _) = recv(&friend).expect("a punch");
        assert_eq!(relay::read_punch(&p), Some([2; 16]));
        // A punch with another token is not answered; the right one is, to where it came
        // from (another port of the introduced address here: the host's own punches go
        // to the friend's).
        let other = sock();
        step(&other, &relay::punch(&[3; 16]));
        assert!(recv(&other).is_none(), "a wrong token is not answered");
        step(&other, &relay::punch(&[2; 16]));
        let (p, _) = recv(&other).expect("the right token is answered");
        assert_eq!(relay::read_punch(&p), Some([2; 16]));
        assert!(recv(&victim).is_none());
    }

    /// A friend joining by code: introduced to a host at an address it will not punch
    /// (link-local here), it is joined all the same and starts its handshake through the
    /// relay, rather than asking the relay again forever.
    #[test]
    fn a_friend_introduced_to_an_address_it_will_not_punch_plays_through_the_relay() {
        use crate::net::relay;
        let fake_relay = UdpSocket::bind("127.0.0.1:0").unwrap();
        fake_relay.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
        let r = fake_relay.local_addr().unwrap();
        let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
        udp.set_nonblocking(true).unwrap();
        let cfg = ClientSecurity { relay_code: Some(*b"AB3CD4"), ..ClientSecurity::trusting() };
        let mut client = SecureSocket::client(udp, r, cfg).unwrap();
        let next = |client: &mut SecureSocket| {
            client.client_tick();
            let mut b = [0u8; 128];
            let (n, from) = fake_relay.recv_from(&mut b).expect("the client says something");
            (b[..n].to_vec(), from)
        };
        let (join, from) = next(&mut client);
        assert_eq!((join[0], join.len()), (relay::T_JOIN, relay::REQUEST_LEN));
        let nonce: [u8; 16] = join[24..40].try_into().unwrap();
        let meet = relay::meet(&nonce, &[4; 16], "169.254.7.7:24680".parse().unwrap());
        fake_relay.send_to(&meet, from).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        client.drain(Duration::from_millis(50)).unwrap();
        let (init, _) = next(&mut client);
        assert_eq!((init[0], init.len()), (T_INIT, INIT_LEN), "the handshake begins, through the relay");
    }

    #[test]
    fn replay_window_accepts_each_nonce_once_and_forgets_the_ancient() {
        let mut r = Replay::default();
        assert!(r.accept(5));
        assert!(!r.accept(5));
        assert!(r.accept(3), "late but inside the window");
        assert!(!r.accept(3));
        assert!(r.accept(5000));
        assert!(!r.accept(100), "older than the window");
        assert!(r.accept(4999));
    }

    fn keys_pair() -> (Keys, Keys) {
        let params: snow::params::NoiseParams = "Noise_NN_25519_ChaChaPoly_BLAKE2s".parse().unwrap();
        let mut ini = snow::Builder::new(params.clone()).build_initiator().unwrap();
        let mut res = snow::Builder::new(params).build_responder().unwrap();
        let (mut buf, mut tmp) = ([0u8; 256], [0u8; 256]);
        let n = ini.write_message(&[], &mut buf).unwrap();
        res.read_message(&buf[..n], &mut tmp).unwrap();
        let n = res.write_message(&[], &mut buf).unwrap();
        ini.read_message(&buf[..n], &mut tmp).unwrap();
        let k = |t| Keys { transport: t, send_nonce: 0, replay: Replay::default() };
        (k(ini.into_stateless_transport_mode().unwrap()), k(res.into_stateless_transport_mode().unwrap()))
    }

    #[test]
    fn sealed_packets_cost_20_bytes_and_refuse_relabelling_replay_and_tampering() {
        let (mut a, mut b) = keys_pair();
        let mut out = [0u8; 2048];
        let p = a.seal(T_DATA, b"hello").unwrap();
        assert_eq!(p.len(), 5 + 19, "3-byte header + 16-byte tag");
        assert_eq!(b.open(&p, &mut out).ok(), Some(5));
        assert_eq!(&out[..5], b"hello");
        assert!(matches!(b.open(&p, &mut out), Err(Drop::Replay)), "a replay is refused");
        let mut relabel = a.seal(T_ACCEPT, b"x").unwrap();
        relabel[0] = T_REFUSE;
        assert!(matches!(b.open(&relabel, &mut out), Err(Drop::Bad)), "the type is authenticated");
        let mut as_data = a.seal(T_ACCEPT, b"x").unwrap();
        as_data[0] = DATA_FLAG;
        assert!(matches!(b.open(&as_data, &mut out), Err(Drop::Bad)), "a handshake packet is not data");
        let mut tampered = a.seal(T_DATA, b"x").unwrap();
        tampered[5] ^= 1;
        assert!(matches!(b.open(&tampered, &mut out), Err(Drop::Bad)));
        // Far past the truncated counter's wrap (2^23 packets), the full counter is found.
        a.send_nonce = (1 << 23) * 3 + 5;
        b.replay = Replay::default();
        b.replay.accept((1 << 23) * 3 + 1);
        let p = a.seal(T_DATA, b"late").unwrap();
        assert_eq!(b.open(&p, &mut out).ok(), Some(4));
    }

    #[test]
    fn truncated_counters_expand_to_the_nearest_value() {
        let m = NONCE_MASK + 1;
        let x = |low, exp| expand_counter(low, exp, NONCE_MASK);
        assert_eq!(x(5, 0), 5);
        assert_eq!(x(5, m * 7 + 3), m * 7 + 5);
        assert_eq!(x(m - 2, m * 7 + 3), m * 7 - 2, "slightly older: the previous wrap");
        assert_eq!(x(2, m * 7 - 3), m * 7 + 2, "slightly newer: the next wrap");
        let d = DATA_MASK + 1;
        assert_eq!(expand_counter(1, d * 5 - 1, DATA_MASK), d * 5 + 1);
    }

    #[test]
    fn fingerprints_are_stable_and_hex_round_trips() {
        let k = [7u8; 32];
        assert_eq!(fingerprint(&k), fingerprint(&k));
        assert_ne!(fingerprint(&k), fingerprint(&[8u8; 32]));
        assert_eq!(from_hex(&to_hex(&k)).unwrap(), k.to_vec());
        assert!(from_hex("abc").is_none());
    }
}
