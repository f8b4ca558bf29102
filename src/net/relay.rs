//! A relay for hosts no port mapping can help (carrier-grade NAT): `hailfire relay` is a
//! small UDP server anyone can run on a VPS. A host registers from its game socket and is
//! given a join code; a friend joins with `CODE@RELAY`; the relay forwards the datagrams
//! of the secure layer between them as they are. It never holds a key: everything it
//! forwards is sealed end to end (the friend's game pins the host's key as it would
//! directly), so it can read nothing, and a datagram it changes does not open.
//!
//! Datagrams (all little-endian; none answered larger than its request):
//! - `0x30 Register` host->relay: `u8 0x30, u8 version, [6] code (zeros: a new one),
//!   [16] cookie (zeros at first), [16] nonce, u8 flags`, zero padding to 64 bytes (the
//!   nonce: random, the sender's own, which the relay gives back only in a `Meet` to it;
//!   flag 1: "keep my address": introduce nobody to this host); sent every `KEEPALIVE` (it
//!   keeps the host's NAT open too);
//! - `0x36 Cookie` relay->any: `u8 0x36, u8 version, [16] cookie` (18 bytes): the answer
//!   to a Register or Join without a valid cookie (a MAC of the sender's address and the
//!   time, as the secure layer's): only a sender that receives at its address gets a code
//!   or a session, so a forged address can neither take one nor be made a target;
//! - `0x31 Code` relay->host: `u8 0x31, u8 version, [6] code` (8 bytes); `0x37 Full`: the
//!   same, refused (the relay has no room);
//! - `0x32 Join` friend->relay: as Register, with the host's code;
//! - `0x33 Joined` relay->friend: `u8 0x33, u8 version, [6] code`; `0x34 Unknown`: the
//!   same with no such host (8 bytes);
//! - `0x35 Data` relay<->host: `u8 0x35, u32 session, datagram`: the friend's datagram
//!   and the host's answer. Between friend and relay, datagrams go as they are.
//! - `0x38 Meet` relay->friend (in place of `Joined`) and relay->host: `u8 0x38, u8
//!   version, [16] proof, [16] token, u8 family (4 or 6), [16] address, u16 port, u32
//!   session` (57 bytes): the other side's public address as the relay sees it (to the
//!   host, with the relay session the friend's datagrams will come in, so that the host
//!   can say where a relayed player is), so that both can try to
//!   punch through their NATs. `proof` is the receiver's own nonce (which it sent only to
//!   the relay, so an off-path forger cannot know it); `token` is the relay's for this
//!   pair. Nobody is introduced who sent no nonce;
//! - `0x39 Punch` host<->friend, straight: `u8 0x39, u8 version, [16] token` (18 bytes),
//!   each way every `PUNCH_EVERY` for at most `PUNCH_FOR`, each answered once; the friend
//!   that hears the host plays straight to the address it heard it from, and through the
//!   relay otherwise. The game itself is unchanged either way: the same sealed session,
//!   the same pinned host key.
//!
//! The host sees each relayed friend at an address of its own (`virtual_addr`), whose /64
//! stands for the friend's real address (keyed by the relay): per-address limits at the
//! host count one friend's sessions together. Bans by address never take a relayed one
//! (the next session has another); bans by key do.

use std::collections::HashMap;
use std::io;
use std::net::{Ipv6Addr, SocketAddr, SocketAddrV6, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

pub const T_REGISTER: u8 = 0x30;
pub const T_CODE: u8 = 0x31;
pub const T_JOIN: u8 = 0x32;
pub const T_JOINED: u8 = 0x33;
pub const T_UNKNOWN: u8 = 0x34;
pub const T_DATA: u8 = 0x35;
pub const T_COOKIE: u8 = 0x36;
pub const T_FULL: u8 = 0x37;
pub const T_MEET: u8 = 0x38;
pub const T_PUNCH: u8 = 0x39;
pub const MEET_LEN: usize = 2 + 16 + 16 + 1 + 16 + 2 + 4;
pub const PUNCH_LEN: usize = 2 + 16;
/// How often each side sends a punch while it tries, and for how long it tries before a
/// friend plays through the relay.
pub const PUNCH_EVERY: Duration = Duration::from_millis(100);
pub const PUNCH_FOR: Duration = Duration::from_millis(2500);
/// Introductions a host keeps trying at once (the oldest is given up first).
pub const MAX_PUNCHING: usize = 16;
/// Punches sent this soon after an introduction go only `PUNCH_LOW_TTL` hops: far
/// enough to open the sender's own NAT, not far enough to reach the other side's router
/// before that side has sent anything, where (on Linux and many home routers) it would
/// leave a record that makes the router give that side's own punches another port.
pub const PUNCH_LOW_FOR: Duration = Duration::from_millis(300);
pub const PUNCH_LOW_TTL: u32 = 2;
pub const COOKIE_LEN: usize = 2 + 16;
/// The smallest datagram of the secure layer (a sealed `Data` with nothing in it):
/// anything shorter from a friend is not forwarded.
const MIN_FORWARD: usize = 19;
/// Relay sessions one friend address (an IPv4 address, an IPv6 /64) may hold.
pub const SESSIONS_PER_ADDRESS: usize = 4;
pub const VERSION: u8 = 1;
pub const REQUEST_LEN: usize = 64;
pub const ANSWER_LEN: usize = 8;
pub const DEFAULT_PORT: u16 = 24700;
/// How often a host registers again (a NAT forgets an idle UDP flow after 30 s or more).
pub const KEEPALIVE: Duration = Duration::from_secs(10);
/// A host or a friend silent this long is forgotten.
pub const IDLE: Duration = Duration::from_secs(60);
/// Codes use these letters: no 0/O or 1/I to misread.
const ALPHABET: &[u8; 32] = b"ABCDEFGHJKLMNPQRSTUVWXYZ23456789";

/// What the relay allows.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Friends relayed at once, in all.
    pub max_sessions: usize,
    /// Hosts registered at once, in all, and from one IP address.
    pub max_hosts: usize,
    pub max_hosts_per_ip: usize,
    /// Friends relayed to one host at once.
    pub sessions_per_host: usize,
    /// Datagrams and bytes a second one session may send each way.
    pub packets_per_second: u32,
    pub bytes_per_second: u64,
    /// Tests only: change one byte of every Nth datagram a friend sends (0: never), to show
    /// that the host's session refuses what a relay tampered with.
    pub tamper_every: u32,
    /// Introduce host and friend to each other (`Meet`) so they can try to reach each
    /// other straight; off: everything goes through the relay, and neither learns the
    /// other's address from it.
    pub introduce: bool,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_sessions: 1024,
            max_hosts: 512,
            max_hosts_per_ip: 4,
            sessions_per_host: 64,
            packets_per_second: 600,
            bytes_per_second: 512 * 1024,
            tamper_every: 0,
            introduce: true,
        }
    }
}

/// A code as text (`ABC234`), or the code in `text` (any case).
pub fn code_text(c: &[u8; 6]) -> String {
    c.iter().map(|&b| b as char).collect()
}

pub fn parse_code(text: &str) -> Option<[u8; 6]> {
    let t = text.trim().to_ascii_uppercase();
    let b = t.as_bytes();
    (b.len() == 6 && b.iter().all(|x| ALPHABET.contains(x))).then(|| b.try_into().expect("6 bytes"))
}

/// `CODE@HOST[:PORT]`: a game behind a relay (the relay's port defaults to 24700).
pub fn parse_join(text: &str) -> Option<([u8; 6], String)> {
    let (code, relay) = text.trim().split_once('@')?;
    let code = parse_code(code)?;
    let relay = relay.trim();
    if relay.is_empty() {
        return None;
    }
    // A bare IPv6 literal: bracketed, so that a port can follow.
    let bracketed = relay.parse::<Ipv6Addr>().ok().map(|ip| format!("[{ip}]"));
    let relay = bracketed.as_deref().unwrap_or(relay);
    let has_port = relay.parse::<SocketAddr>().is_ok()
        || relay.rsplit_once(':').is_some_and(|(h, p)| !h.contains(':') && p.parse::<u16>().is_ok());
    Some((code, if has_port { relay.to_string() } else { format!("{relay}:{DEFAULT_PORT}") }))
}

/// The address a host's socket gives relayed session `sid`: a unique-local IPv6 address
/// whose /64 holds the session's top 16 bits, which the relay makes from the friend's own
/// address (`Relay::sid_for`): per-address limits at the host count one friend's
/// sessions together, and different friends apart.
pub fn virtual_addr(sid: u32) -> SocketAddr {
    SocketAddr::V6(SocketAddrV6::new(
        Ipv6Addr::new(0xfdff, 0xffff, (sid >> 16) as u16, 0, 0, 0, sid as u16, 1),
        DEFAULT_PORT,
        0,
        0,
    ))
}

/// The session of a virtual address, if it is one.
pub fn session_of(a: SocketAddr) -> Option<u32> {
    match a {
        SocketAddr::V6(v) if v.port() == DEFAULT_PORT => {
            let s = v.ip().segments();
            (s[0] == 0xfdff && s[1] == 0xffff && s[3..6] == [0, 0, 0] && s[7] == 1)
                .then(|| ((s[2] as u32) << 16) | s[6] as u32)
        }
        _ => None,
    }
}

/// Whether `ip` stands for relayed friends (`virtual_addr`): never worth a ban, since the
/// relay gives the next session another.
pub fn is_virtual(ip: std::net::IpAddr) -> bool {
    matches!(ip, std::net::IpAddr::V6(v) if v.segments()[..2] == [0xfdff, 0xffff])
}

/// An address as the console and the log show it: a relayed friend as "relay session N".
pub fn describe(a: SocketAddr) -> String {
    match session_of(a) {
        Some(sid) => format!("relay session {sid}"),
        None => a.to_string(),
    }
}

pub fn request(kind: u8, code: &[u8; 6]) -> Vec<u8> {
    request_with(kind, code, &[0; 16], &[0; 16])
}

/// A Register or Join carrying the relay's cookie and the sender's nonce.
pub fn request_with(kind: u8, code: &[u8; 6], cookie: &[u8; 16], nonce: &[u8; 16]) -> Vec<u8> {
    let mut p = vec![kind, VERSION];
    p.extend_from_slice(code);
    p.extend_from_slice(cookie);
    p.extend_from_slice(nonce);
    p.resize(REQUEST_LEN, 0);
    p
}

/// A host's Register: `hide`, introduce nobody to it (friends play through the relay and
/// never learn its address).
pub fn register_request(code: &[u8; 6], cookie: &[u8; 16], nonce: &[u8; 16], hide: bool) -> Vec<u8> {
    let mut p = request_with(T_REGISTER, code, cookie, nonce);
    p[40] = if hide { FLAG_HIDE } else { 0 };
    p
}

/// Register flag: introduce nobody to this host.
pub const FLAG_HIDE: u8 = 1;

/// A fresh nonce for a host's registrations or a friend's joins.
pub fn new_nonce() -> [u8; 16] {
    let mut n = [0u8; 16];
    rand_core::RngCore::fill_bytes(&mut rand_core::OsRng, &mut n);
    n
}

/// The cookie in a relay's `Cookie` answer.
pub fn read_cookie(d: &[u8]) -> Option<[u8; 16]> {
    (d.len() == COOKIE_LEN && d[0] == T_COOKIE && d[1] == VERSION).then(|| d[2..18].try_into().expect("16 bytes"))
}

fn answer(kind: u8, code: &[u8; 6]) -> [u8; ANSWER_LEN] {
    let mut p = [0u8; ANSWER_LEN];
    p[0] = kind;
    p[1] = VERSION;
    p[2..].copy_from_slice(code);
    p
}

/// `(kind, code)` of a relay answer.
pub fn read_answer(d: &[u8]) -> Option<(u8, [u8; 6])> {
    (d.len() == ANSWER_LEN && d[1] == VERSION && matches!(d[0], T_CODE | T_JOINED | T_UNKNOWN | T_FULL))
        .then(|| (d[0], d[2..8].try_into().expect("6 bytes")))
}

/// A `Meet` for a receiver whose nonce is `proof`, about `peer` (session 0).
pub fn meet(proof: &[u8; 16], token: &[u8; 16], peer: SocketAddr) -> Vec<u8> {
    meet_for(proof, token, peer, 0)
}

/// A `Meet` about `peer`, whose relay session is `sid`.
pub fn meet_for(proof: &[u8; 16], token: &[u8; 16], peer: SocketAddr, sid: u32) -> Vec<u8> {
    let mut p = vec![T_MEET, VERSION];
    p.extend_from_slice(proof);
    p.extend_from_slice(token);
    match peer.ip().to_canonical() {
        std::net::IpAddr::V4(v4) => {
            p.push(4);
            p.extend_from_slice(&v4.octets());
            p.extend_from_slice(&[0; 12]);
        }
        std::net::IpAddr::V6(v6) => {
            p.push(6);
            p.extend_from_slice(&v6.octets());
        }
    }
    p.extend_from_slice(&peer.port().to_le_bytes());
    p.extend_from_slice(&sid.to_le_bytes());
    p
}

/// The relay session a `Meet` names (0: none).
pub fn meet_session(d: &[u8]) -> u32 {
    if d.len() == MEET_LEN {
        u32::from_le_bytes(d[53..57].try_into().expect("4 bytes"))
    } else {
        0
    }
}

/// The proof of anything shaped like a `Meet` (whatever address it names).
pub fn meet_proof(d: &[u8]) -> Option<[u8; 16]> {
    (d.len() == MEET_LEN && d[0] == T_MEET && d[1] == VERSION).then(|| d[2..18].try_into().expect("16 bytes"))
}

/// `(proof, token, peer)` of a `Meet` whose address can be punched (None: not a Meet, or
/// one naming an address nobody should be sent to).
pub fn read_meet(d: &[u8]) -> Option<([u8; 16], [u8; 16], SocketAddr)> {
    if d.len() != MEET_LEN || d[0] != T_MEET || d[1] != VERSION {
        return None;
    }
    let ip: std::net::IpAddr = match d[34] {
        4 => std::net::Ipv4Addr::from(<[u8; 4]>::try_from(&d[35..39]).ok()?).into(),
        // IPv4 is family 4, never IPv4-mapped.
        6 => Ipv6Addr::from(<[u8; 16]>::try_from(&d[35..51]).ok()?).into(),
        _ => return None,
    };
    if ip.to_canonical() != ip {
        return None;
    }
    let port = u16::from_le_bytes([d[51], d[52]]);
    let nowhere = match ip {
        std::net::IpAddr::V4(a) => a.is_broadcast() || a.is_link_local() || a.octets()[0] == 0,
        std::net::IpAddr::V6(a) => (a.segments()[0] & 0xffc0) == 0xfe80,
    };
    (port != 0 && !ip.is_unspecified() && !ip.is_multicast() && !nowhere).then(|| {
        (d[2..18].try_into().expect("16 bytes"), d[18..34].try_into().expect("16 bytes"), SocketAddr::new(ip, port))
    })
}

pub fn punch(token: &[u8; 16]) -> [u8; PUNCH_LEN] {
    let mut p = [0u8; PUNCH_LEN];
    p[0] = T_PUNCH;
    p[1] = VERSION;
    p[2..].copy_from_slice(token);
    p
}

/// The token of a `Punch`.
pub fn read_punch(d: &[u8]) -> Option<[u8; 16]> {
    (d.len() == PUNCH_LEN && d[0] == T_PUNCH && d[1] == VERSION).then(|| d[2..].try_into().expect("16 bytes"))
}

/// Sends a punch to `to`; `low`: with a hop limit of `PUNCH_LOW_TTL` (not sent at all
/// where the system will not set one), the socket's own limit restored after.
pub fn send_punch(sock: &UdpSocket, to: SocketAddr, token: &[u8; 16], low: bool) {
    let p = punch(token);
    if !low {
        let _ = sock.send_to(&p, to);
        return;
    }
    let s = socket2::SockRef::from(sock);
    let v6 = matches!(to, SocketAddr::V6(a) if a.ip().to_ipv4_mapped().is_none());
    let set = |t| if v6 { s.set_unicast_hops_v6(t) } else { s.set_ttl_v4(t) };
    let before = if v6 { s.unicast_hops_v6() } else { s.ttl_v4() };
    if let Ok(before) = before {
        if set(PUNCH_LOW_TTL).is_ok() {
            let _ = sock.send_to(&p, to);
            // The game's own datagrams must not go out with the short limit.
            if set(before).is_err() && set(before).is_err() {
                tracing::warn!("could not restore the socket's hop limit after a punch");
            }
        }
    }
}

/// Whether a side told to punch `peer` by the relay at `relay` may: never at this
/// machine's loopback, unless the relay is on it too (a test, or one machine).
pub fn may_punch(peer: SocketAddr, relay: SocketAddr) -> bool {
    !peer.ip().to_canonical().is_loopback() || relay.ip().to_canonical().is_loopback()
}

/// Whether two addresses are the same host, whichever way a socket wrote them
/// (IPv4-mapped or not).
pub fn same_ip(a: SocketAddr, b: SocketAddr) -> bool {
    a.ip().to_canonical() == b.ip().to_canonical()
}

/// An introduction a side is trying: punches to `peer` from `started` for `PUNCH_FOR`.
#[derive(Clone, Debug)]
pub struct Punching {
    pub peer: SocketAddr,
    pub token: [u8; 16],
    pub started: Instant,
    pub sent: Instant,
}

impl Punching {
    pub fn new(peer: SocketAddr, token: [u8; 16], now: Instant) -> Punching {
        Punching { peer, token, started: now, sent: now }
    }

    pub fn over(&self, now: Instant) -> bool {
        now.duration_since(self.started) >= PUNCH_FOR
    }

    /// Sends the next punch if one is due (the first at once): `true` if it did.
    pub fn send_due(&mut self, sock: &UdpSocket, now: Instant, first: bool) -> bool {
        if !first && now.duration_since(self.sent) < PUNCH_EVERY {
            return false;
        }
        self.sent = now;
        let to = match (self.peer, sock.local_addr()) {
            (SocketAddr::V4(v4), Ok(SocketAddr::V6(_))) => SocketAddr::new(v4.ip().to_ipv6_mapped().into(), v4.port()),
            (p, _) => p,
        };
        send_punch(sock, to, &self.token, now.duration_since(self.started) < PUNCH_LOW_FOR);
        true
    }
}

/// A host's link to a relay: where the relay is, and the join code it gave (shared with
/// the server loop, which shows it).
#[derive(Clone, Debug)]
pub struct RelayLink {
    pub addr: SocketAddr,
    /// The relay as the host typed it (`relay.example.org`, `203.0.113.5:9000`): what
    /// friends are told to type after the code.
    pub name: String,
    /// Keep this host's address from friends: the relay introduces nobody to it (every
    /// game goes through the relay).
    pub hide: bool,
    pub code: std::sync::Arc<std::sync::Mutex<Option<[u8; 6]>>>,
}

impl RelayLink {
    pub fn new(addr: SocketAddr) -> RelayLink {
        RelayLink { addr, name: addr.to_string(), hide: false, code: Default::default() }
    }

    /// The relay `text` names (`HOST[:PORT]`, port 24700 by default), resolved to an
    /// address a server bound to `bind` can send to: an IPv4 one for a server on an IPv4
    /// address, an IPv6 one for a server on one IPv6 address, whichever the name gives
    /// first for a dual-stack one (`[::]`).
    pub fn resolve(text: &str, bind: SocketAddr) -> Result<RelayLink, String> {
        use std::net::ToSocketAddrs;
        let text = text.trim();
        let Some((_, with_port)) = parse_join(&format!("AAAAAA@{text}")) else {
            return Err(format!("{text:?} is not an address (HOST[:PORT], default port {DEFAULT_PORT})"));
        };
        let found: Vec<SocketAddr> = match with_port.parse::<SocketAddr>() {
            Ok(a) => vec![a],
            Err(_) => {
                with_port.to_socket_addrs().map_err(|e| format!("cannot find the relay {text:?}: {e}"))?.collect()
            }
        };
        let (v4, v6) = match bind {
            SocketAddr::V4(_) => (true, false),
            SocketAddr::V6(b) if b.ip().is_unspecified() => (true, true),
            SocketAddr::V6(_) => (false, true),
        };
        let reachable = |a: &&SocketAddr| if a.ip().to_canonical().is_ipv4() { v4 } else { v6 };
        let addr = found.iter().find(reachable).copied().ok_or_else(|| {
            let (has, only) = if v4 { ("IPv4", "IPv4") } else { ("IPv6", "one IPv6 address") };
            format!(
                "the relay {text:?} has no {has} address, and this server listens on {only} ({bind}); \
                 listen on [::] or use another relay"
            )
        })?;
        // Friends type the name as the host did (the port only where it is not the usual).
        let name = with_port.strip_suffix(&format!(":{DEFAULT_PORT}")).unwrap_or(&with_port);
        let name = name.strip_prefix('[').and_then(|n| n.strip_suffix(']')).filter(|n| n.contains(':')).map_or(
            name.to_string(),
            // A bare IPv6 literal: a code and a port would be ambiguous without brackets.
            |n| format!("[{n}]"),
        );
        Ok(RelayLink { addr, name, hide: false, code: Default::default() })
    }

    pub fn code(&self) -> Option<[u8; 6]> {
        self.code.lock().ok().and_then(|c| *c)
    }
}

struct Host {
    addr: SocketAddr,
    last: Instant,
    /// The nonce of its last registration (the proof in a `Meet` for it; zeros: none).
    nonce: [u8; 16],
    /// It asked to be introduced to nobody.
    hide: bool,
}

struct Session {
    code: [u8; 6],
    sid: u32,
    last: Instant,
    /// (window start, packets, bytes) each way: friend to host, host to friend.
    rate: [(Instant, u32, u64); 2],
    forwarded: u32,
    /// When host and friend were last introduced.
    met: Option<Instant>,
}

/// What the relay counted (for its log).
#[derive(Clone, Debug, Default)]
pub struct RelayStats {
    pub hosts: usize,
    pub sessions: usize,
    pub forwarded: u64,
    pub refused: u64,
}

pub struct Relay {
    socket: UdpSocket,
    limits: Limits,
    hosts: HashMap<[u8; 6], Host>,
    sessions: HashMap<SocketAddr, Session>,
    by_sid: HashMap<u32, SocketAddr>,
    pub stats: RelayStats,
    /// Keys the cookies and session numbers (drawn at start).
    secret: [u8; 32],
    started: Instant,
}

impl Relay {
    pub fn bind(addr: SocketAddr, limits: Limits) -> io::Result<Relay> {
        let socket = crate::net::enet::bind_udp(addr)?;
        socket.set_read_timeout(Some(Duration::from_millis(100)))?;
        let mut secret = [0u8; 32];
        rand_core::RngCore::fill_bytes(&mut rand_core::OsRng, &mut secret);
        Ok(Relay {
            socket,
            limits,
            hosts: HashMap::new(),
            sessions: HashMap::new(),
            by_sid: HashMap::new(),
            stats: RelayStats::default(),
            secret,
            started: Instant::now(),
        })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.socket.local_addr()
    }

    fn new_code(&mut self) -> [u8; 6] {
        loop {
            // From the system's generator: a code cannot be worked out from others.
            let mut r = [0u8; 6];
            rand_core::RngCore::fill_bytes(&mut rand_core::OsRng, &mut r);
            let c = r.map(|b| ALPHABET[(b % 32) as usize]);
            if !self.hosts.contains_key(&c) {
                return c;
            }
        }
    }

    fn keyed(&self, parts: &[&[u8]]) -> [u8; 32] {
        use blake2::digest::{KeyInit, Mac};
        let mut m = <blake2::Blake2sMac256 as KeyInit>::new_from_slice(&self.secret).expect("a 32-byte key");
        for p in parts {
            m.update(p);
        }
        m.finalize().into_bytes().into()
    }

    /// The cookie of `addr` in 30-second window `w` (this window's and the last one's are
    /// accepted).
    fn cookie(&self, addr: SocketAddr, w: u64) -> [u8; 16] {
        self.keyed(&[addr.to_string().as_bytes(), &w.to_le_bytes()])[..16].try_into().expect("16 bytes")
    }

    fn cookie_ok(&self, addr: SocketAddr, c: &[u8]) -> bool {
        let w = self.started.elapsed().as_secs() / 30;
        [w, w.saturating_sub(1)].iter().any(|&w| self.cookie(addr, w)[..] == *c)
    }

    /// A session number for a friend at `addr`: its top 16 bits from the friend's address
    /// (an IPv4 address, an IPv6 /64), the rest free among the live ones.
    fn sid_for(&self, addr: SocketAddr) -> Option<u32> {
        let key = crate::net::secure::address_key(addr.ip());
        let h = self.keyed(&[b"sid", key.to_string().as_bytes()]);
        let hi = (u16::from_le_bytes([h[0], h[1]]) as u32) << 16;
        let mut r = [0u8; 2];
        rand_core::RngCore::fill_bytes(&mut rand_core::OsRng, &mut r);
        let start = u16::from_le_bytes(r);
        (0..=u16::MAX)
            .map(|i| hi | start.wrapping_add(i) as u32)
            .find(|sid| *sid & 0xffff != 0 && !self.by_sid.contains_key(sid))
    }

    /// Runs until `stop`.
    pub fn run(&mut self, stop: &AtomicBool) {
        let mut buf = vec![0u8; 2048];
        let mut last_expire = Instant::now();
        let mut last_log = Instant::now();
        while !stop.load(Ordering::Relaxed) {
            match self.socket.recv_from(&mut buf) {
                // Addresses stay as the socket gives them (IPv4-mapped on a dual-stack
                // socket): answers go back to exactly that.
                Ok((n, from)) => {
                    let data = buf[..n].to_vec();
                    self.packet(from, &data);
                }
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {}
                Err(_) => {}
            }
            if last_expire.elapsed() >= Duration::from_secs(1) {
                last_expire = Instant::now();
                self.expire();
            }
            if last_log.elapsed() >= Duration::from_secs(60) {
                last_log = Instant::now();
                tracing::info!(
                    hosts = self.hosts.len(),
                    sessions = self.sessions.len(),
                    forwarded = self.stats.forwarded,
                    refused = self.stats.refused,
                    "relay status"
                );
            }
        }
    }

    fn send(&self, to: SocketAddr, data: &[u8]) {
        let _ = self.socket.send_to(data, to);
    }

    /// One datagram.
    pub fn packet(&mut self, from: SocketAddr, d: &[u8]) {
        let now = Instant::now();
        match d.first() {
            Some(&kind @ (T_REGISTER | T_JOIN)) if d.len() == REQUEST_LEN && d[1] == VERSION => {
                // Only an address that receives: the first request is answered with a
                // cookie, no larger than it, and only one carrying it is acted on.
                if !self.cookie_ok(from, &d[8..24]) {
                    let w = self.started.elapsed().as_secs() / 30;
                    let mut p = vec![T_COOKIE, VERSION];
                    p.extend_from_slice(&self.cookie(from, w));
                    return self.send(from, &p);
                }
                let code: [u8; 6] = d[2..8].try_into().expect("6 bytes");
                let nonce: [u8; 16] = d[24..40].try_into().expect("16 bytes");
                if kind == T_REGISTER {
                    self.register(from, code, nonce, d[40] & FLAG_HIDE != 0, now)
                } else {
                    self.join(from, code, nonce, now)
                }
            }
            // The host's answer to a friend.
            Some(&T_DATA) if d.len() > 5 => {
                let sid = u32::from_le_bytes(d[1..5].try_into().expect("4 bytes"));
                let Some(friend) = self.by_sid.get(&sid).copied() else { return };
                let Some(s) = self.sessions.get_mut(&friend) else { return };
                let Some(host) = self.hosts.get(&s.code) else { return };
                if host.addr != from {
                    self.stats.refused += 1;
                    return;
                }
                if !within(&mut s.rate[1], d.len() - 5, now, &self.limits) {
                    self.stats.refused += 1;
                    return;
                }
                self.stats.forwarded += 1;
                let _ = self.socket.send_to(&d[5..], friend);
            }
            // A friend's datagram for the host.
            Some(_) => {
                if d.len() < MIN_FORWARD {
                    self.stats.refused += 1;
                    return;
                }
                let Some(s) = self.sessions.get_mut(&from) else {
                    self.stats.refused += 1;
                    return;
                };
                let Some(host) = self.hosts.get(&s.code).map(|h| h.addr) else { return };
                if !within(&mut s.rate[0], d.len(), now, &self.limits) {
                    self.stats.refused += 1;
                    return;
                }
                s.last = now;
                s.forwarded += 1;
                let mut p = Vec::with_capacity(d.len() + 5);
                p.push(T_DATA);
                p.extend_from_slice(&s.sid.to_le_bytes());
                p.extend_from_slice(d);
                if self.limits.tamper_every > 0 && s.forwarded.is_multiple_of(self.limits.tamper_every) {
                    let last = p.len() - 1;
                    p[last] ^= 0x5a;
                }
                self.stats.forwarded += 1;
                let _ = self.socket.send_to(&p, host);
            }
            None => {}
        }
    }

    fn register(&mut self, from: SocketAddr, asked: [u8; 6], nonce: [u8; 16], hide: bool, now: Instant) {
        // Its own code again (a keepalive), or a new one.
        if let Some(h) = self.hosts.get_mut(&asked).filter(|h| h.addr == from) {
            h.last = now;
            (h.nonce, h.hide) = (nonce, hide);
            return self.send(from, &answer(T_CODE, &asked));
        }
        if let Some((code, h)) = self.hosts.iter_mut().find(|(_, h)| h.addr == from) {
            (h.nonce, h.hide) = (nonce, hide);
            let code = *code;
            return self.send(from, &answer(T_CODE, &code));
        }
        let key = crate::net::secure::address_key(from.ip());
        let mine = self.hosts.values().filter(|h| crate::net::secure::address_key(h.addr.ip()) == key).count();
        if self.hosts.len() >= self.limits.max_hosts || mine >= self.limits.max_hosts_per_ip {
            self.stats.refused += 1;
            return self.send(from, &answer(T_FULL, &asked));
        }
        // A host that had a code (this relay restarted, or forgot it) keeps it if nobody
        // took it meanwhile: its friends' "CODE@RELAY" still works.
        let valid = asked.iter().all(|b| ALPHABET.contains(b));
        let code = if valid && !self.hosts.contains_key(&asked) { asked } else { self.new_code() };
        self.hosts.insert(code, Host { addr: from, last: now, nonce, hide });
        tracing::info!(code = %code_text(&code), host = %canonical(from), "a host registered");
        self.send(from, &answer(T_CODE, &code));
    }

    fn join(&mut self, from: SocketAddr, code: [u8; 6], nonce: [u8; 16], now: Instant) {
        if !self.hosts.contains_key(&code) {
            self.stats.refused += 1;
            return self.send(from, &answer(T_UNKNOWN, &code));
        }
        if let Some(s) = self.sessions.get_mut(&from) {
            if s.code == code {
                s.last = now;
                return self.joined(from, code, nonce, now);
            }
            // The same socket, proven, joining another game: the old session ends.
            let sid = s.sid;
            self.sessions.remove(&from);
            self.by_sid.remove(&sid);
        }
        let key = crate::net::secure::address_key(from.ip());
        let per_host = self.sessions.values().filter(|s| s.code == code).count();
        let mine = self.by_sid.values().filter(|a| crate::net::secure::address_key(a.ip()) == key).count();
        if self.sessions.len() >= self.limits.max_sessions
            || per_host >= self.limits.sessions_per_host
            || mine >= SESSIONS_PER_ADDRESS
        {
            self.stats.refused += 1;
            return self.send(from, &answer(T_FULL, &code));
        }
        let Some(sid) = self.sid_for(from) else { return };
        self.sessions.insert(from, Session { code, sid, last: now, rate: [(now, 0, 0); 2], forwarded: 0, met: None });
        self.by_sid.insert(sid, from);
        tracing::debug!(code = %code_text(&code), friend = %canonical(from), session = sid, "a friend joined through the relay");
        self.joined(from, code, nonce, now)
    }

    /// Tells a friend it joined: with an introduction to the host where both sent a nonce
    /// and are of one address family (each is then told the other's address, the host at
    /// most once in two seconds for one session), else plainly.
    fn joined(&mut self, friend: SocketAddr, code: [u8; 6], nonce: [u8; 16], now: Instant) {
        let host = self.hosts.get(&code).filter(|h| !h.hide).map(|h| (h.addr, h.nonce));
        if host.is_none() && self.hosts.contains_key(&code) {
            // A host that keeps its address: plainly joined.
            return self.send(friend, &answer(T_JOINED, &code));
        }
        let session = self.sessions.get_mut(&friend);
        let (Some((host, host_nonce)), Some(s)) = (host, session) else { return };
        let (h, f) = (host.ip().to_canonical(), friend.ip().to_canonical());
        // Of one family, and of one scope (a host on the relay's own machine cannot be
        // punched from elsewhere).
        let same_kind = h.is_ipv4() == f.is_ipv4() && h.is_loopback() == f.is_loopback();
        if !self.limits.introduce || !same_kind || nonce == [0; 16] || host_nonce == [0; 16] {
            return self.send(friend, &answer(T_JOINED, &code));
        }
        let sid = s.sid;
        let tell_host = s.met.is_none_or(|t| now.duration_since(t) >= Duration::from_secs(2));
        if tell_host {
            s.met = Some(now);
        }
        let token: [u8; 16] = self.keyed(&[
            b"meet",
            canonical(friend).to_string().as_bytes(),
            canonical(host).to_string().as_bytes(),
            &sid.to_le_bytes(),
        ])[..16]
            .try_into()
            .expect("16 bytes");
        if tell_host {
            self.send(host, &meet_for(&host_nonce, &token, canonical(friend), sid));
        }
        self.send(friend, &meet(&nonce, &token, canonical(host)));
    }

    fn expire(&mut self) {
        let now = Instant::now();
        self.hosts.retain(|code, h| {
            let keep = now.duration_since(h.last) < IDLE;
            if !keep {
                tracing::info!(code = %code_text(code), "a host went quiet: its code is free again");
            }
            keep
        });
        let hosts = &self.hosts;
        let by_sid = &mut self.by_sid;
        self.sessions.retain(|_, s| {
            let keep = now.duration_since(s.last) < IDLE && hosts.contains_key(&s.code);
            if !keep {
                by_sid.remove(&s.sid);
            }
            keep
        });
        self.stats.hosts = self.hosts.len();
        self.stats.sessions = self.sessions.len();
    }
}

/// An address as logged (IPv4 as IPv4, not IPv4-mapped).
fn canonical(a: SocketAddr) -> SocketAddr {
    SocketAddr::new(a.ip().to_canonical(), a.port())
}

/// Per-second budgets of one direction of one session.
fn within(w: &mut (Instant, u32, u64), len: usize, now: Instant, l: &Limits) -> bool {
    if now.duration_since(w.0) >= Duration::from_secs(1) {
        *w = (now, 0, 0);
    }
    w.1 += 1;
    w.2 += len as u64;
    w.1 <= l.packets_per_second && w.2 <= l.bytes_per_second
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    #[test]
    fn nothing_is_given_to_an_address_that_has_not_shown_it_receives() {
        let mut relay = Relay::bind("127.0.0.1:0".parse().unwrap(), Limits::default()).unwrap();
        let sock = |_| {
            let s = UdpSocket::bind("127.0.0.1:0").unwrap();
            s.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
            s
        };
        let (host, friend) = (sock(0), sock(1));
        let (h, f) = (host.local_addr().unwrap(), friend.local_addr().unwrap());
        let recv = |s: &UdpSocket| {
            let mut b = [0u8; 128];
            let n = s.recv(&mut b).expect("an answer");
            b[..n].to_vec()
        };
        relay.packet(h, &request(T_REGISTER, &[0; 6]));
        let a = recv(&host);
        let cookie = read_cookie(&a).expect("first a cookie, no code");
        assert!(a.len() < REQUEST_LEN && relay.hosts.is_empty());
        let (hn, fnn) = ([5u8; 16], [6u8; 16]);
        relay.packet(h, &request_with(T_REGISTER, &[0; 6], &[7; 16], &hn));
        assert!(read_cookie(&recv(&host)).is_some(), "a made-up cookie is not one");
        relay.packet(h, &request_with(T_REGISTER, &[0; 6], &cookie, &hn));
        let (kind, code) = read_answer(&recv(&host)).expect("a code");
        assert_eq!(kind, T_CODE);
        // A join claiming the friend's address, without its cookie: no session.
        relay.packet(f, &request(T_JOIN, &code));
        let c = read_cookie(&recv(&friend)).expect("a cookie");
        assert!(relay.sessions.is_empty(), "nothing for an address that did not prove itself");
        // The host's own cookie is not the friend's.
        relay.packet(f, &request_with(T_JOIN, &code, &cookie, &fnn));
        assert!(read_cookie(&recv(&friend)).is_some() && relay.sessions.is_empty());
        relay.packet(f, &request_with(T_JOIN, &code, &c, &fnn));
        // Joined, with an introduction each way, each proven by the receiver's own nonce
        // (which only it and the relay know).
        let (proof, token, host_addr) = read_meet(&recv(&friend)).expect("the friend is introduced to the host");
        assert_eq!((proof, host_addr), (fnn, h));
        let to_host = recv(&host);
        let (proof, token_h, friend_addr) = read_meet(&to_host).expect("the host is introduced to the friend");
        assert_eq!((proof, token_h, friend_addr), (hn, token, f));
        assert_eq!(relay.sessions.len(), 1);
        assert_eq!(meet_session(&to_host), relay.sessions[&f].sid, "the host is told the friend's relay session");
        // Asked again at once: the friend hears it again, the host not (at most once in 2 s).
        relay.packet(f, &request_with(T_JOIN, &code, &c, &fnn));
        assert!(read_meet(&recv(&friend)).is_some());
        assert!(host.recv(&mut [0u8; 64]).is_err(), "the host is not told twice at once");
        // Too short to be a sealed datagram: not forwarded.
        relay.packet(f, &[0x80, 0, 1]);
        assert!(host.recv(&mut [0u8; 64]).is_err(), "nothing forwarded");
        relay.packet(f, &[0x80; 40]);
        assert_eq!(recv(&host).len(), 45, "a datagram forwarded with its session");
    }

    #[test]
    fn a_relay_that_does_not_introduce_says_joined() {
        let limits = Limits { introduce: false, ..Limits::default() };
        let mut relay = Relay::bind("127.0.0.1:0".parse().unwrap(), limits).unwrap();
        let friend = UdpSocket::bind("127.0.0.1:0").unwrap();
        friend.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
        let f = friend.local_addr().unwrap();
        let h: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let cookie = relay.cookie(h, relay.started.elapsed().as_secs() / 30);
        relay.packet(h, &request_with(T_REGISTER, &[0; 6], &cookie, &[5; 16]));
        let code = *relay.hosts.keys().next().expect("registered");
        let c = relay.cookie(f, relay.started.elapsed().as_secs() / 30);
        relay.packet(f, &request_with(T_JOIN, &code, &c, &[6; 16]));
        let mut b = [0u8; 128];
        let n = friend.recv(&mut b).unwrap();
        assert_eq!(read_answer(&b[..n]).map(|a| a.0), Some(T_JOINED));
        // Introducing, but the host asked to keep its address: the friend is plainly
        // joined, and the host is told nothing.
        let mut relay = Relay::bind("127.0.0.1:0".parse().unwrap(), Limits::default()).unwrap();
        let host = UdpSocket::bind("127.0.0.1:0").unwrap();
        host.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
        let ha = host.local_addr().unwrap();
        let cookie = relay.cookie(ha, relay.started.elapsed().as_secs() / 30);
        relay.packet(ha, &register_request(&[0; 6], &cookie, &[5; 16], true));
        let mut hb = [0u8; 128];
        assert_eq!(host.recv(&mut hb).map(|n| hb[0] == T_CODE && n == ANSWER_LEN).ok(), Some(true));
        let code = *relay.hosts.keys().next().expect("registered");
        let c = relay.cookie(f, relay.started.elapsed().as_secs() / 30);
        relay.packet(f, &request_with(T_JOIN, &code, &c, &[6; 16]));
        let n = friend.recv(&mut b).unwrap();
        assert_eq!(read_answer(&b[..n]).map(|a| a.0), Some(T_JOINED), "a hidden host: plainly joined");
        assert!(host.recv(&mut hb).is_err(), "and the host is introduced to nobody");
        // Introducing, but the friend sent no nonce: nobody is introduced.
        let mut relay = Relay::bind("127.0.0.1:0".parse().unwrap(), Limits::default()).unwrap();
        let cookie = relay.cookie(h, relay.started.elapsed().as_secs() / 30);
        relay.packet(h, &request_with(T_REGISTER, &[0; 6], &cookie, &[5; 16]));
        let code = *relay.hosts.keys().next().expect("registered");
        let c = relay.cookie(f, relay.started.elapsed().as_secs() / 30);
        relay.packet(f, &request_with(T_JOIN, &code, &c, &[0; 16]));
        let n = friend.recv(&mut b).unwrap();
        assert_eq!(read_answer(&b[..n]).map(|a| a.0), Some(T_JOINED));
    }

    #[test]
    fn meets_and_punches_read_back_and_refuse_what_is_not_one() {
        for peer in ["11.77.1.2:24680", "[2001:db8::7]:9", "[::ffff:11.77.1.2]:24680"] {
            let peer: SocketAddr = peer.parse().unwrap();
            let m = meet(&[1; 16], &[2; 16], peer);
            assert!(m.len() == MEET_LEN && m.len() <= REQUEST_LEN, "no larger than the join it answers");
            let (p, t, a) = read_meet(&m).unwrap();
            assert_eq!((p, t), ([1; 16], [2; 16]));
            assert!(same_ip(a, peer) && a.port() == peer.port());
        }
        let mut m = meet(&[1; 16], &[2; 16], "11.77.1.2:24680".parse().unwrap());
        m[34] = 5;
        assert!(read_meet(&m).is_none(), "no such family");
        assert!(read_meet(&meet(&[1; 16], &[2; 16], "0.0.0.0:1".parse().unwrap())).is_none());
        assert!(read_meet(&meet(&[1; 16], &[2; 16], "11.77.1.2:0".parse().unwrap())).is_none());
        let mut mapped = meet(&[1; 16], &[2; 16], "[2001:db8::7]:9".parse().unwrap());
        mapped[35..51].copy_from_slice(&Ipv4Addr::new(11, 77, 1, 2).to_ipv6_mapped().octets());
        assert!(read_meet(&mapped).is_none(), "IPv4 comes as family 4, never mapped");
        for nowhere in ["255.255.255.255:9", "169.254.1.1:9", "[fe80::1]:9", "[ff02::1]:9", "0.1.2.3:9"] {
            assert!(read_meet(&meet(&[1; 16], &[2; 16], nowhere.parse().unwrap())).is_none(), "{nowhere}");
        }
        let (lo, public): (SocketAddr, SocketAddr) =
            ("127.0.0.1:5".parse().unwrap(), "11.77.1.1:24700".parse().unwrap());
        assert!(!may_punch(lo, public) && may_punch(lo, lo) && may_punch(public, public));
        assert_eq!(read_punch(&punch(&[3; 16])), Some([3; 16]));
        assert!(read_punch(&punch(&[3; 16])[..17]).is_none());
    }

    #[test]
    fn codes_joins_and_virtual_addresses() {
        let c = parse_code("ab3cd4").expect("a code, any case");
        assert_eq!(code_text(&c), "AB3CD4");
        assert!(parse_code("AB0CD4").is_none(), "no 0, O, 1 or I");
        assert!(parse_code("ABCDE").is_none());
        assert_eq!(parse_join("ab3cd4@relay.example").map(|(_, r)| r), Some("relay.example:24700".into()));
        assert_eq!(parse_join("AB3CD4@[2001:db8::1]:9000").map(|(_, r)| r), Some("[2001:db8::1]:9000".into()));
        assert!(parse_join("relay.example").is_none() && parse_join("AB3CD4@").is_none());
        assert_eq!(parse_join("AB3CD4@2001:db8::1").map(|(_, r)| r), Some("[2001:db8::1]:24700".into()));
        let any: SocketAddr = "[::]:24680".parse().unwrap();
        let v4: SocketAddr = "0.0.0.0:24680".parse().unwrap();
        let l = RelayLink::resolve("localhost", v4).unwrap();
        assert!(l.addr.is_ipv4() && l.addr.port() == DEFAULT_PORT, "IPv4 for a server on IPv4: {l:?}");
        assert_eq!(l.name, "localhost", "shown as typed");
        assert_eq!(RelayLink::resolve("localhost:9000", any).unwrap().name, "localhost:9000");
        assert_eq!(RelayLink::resolve("[2001:db8::1]:24700", any).unwrap().name, "[2001:db8::1]");
        assert!(RelayLink::resolve("2001:db8::1", v4).unwrap_err().contains("no IPv4 address"));
        let one_v6: SocketAddr = "[2001:db8::5]:24680".parse().unwrap();
        assert!(RelayLink::resolve("192.0.2.1", one_v6).unwrap_err().contains("no IPv6 address"));
        assert!(RelayLink::resolve("", any).is_err());
        for sid in [1u32, 65_537, u32::MAX] {
            assert_eq!(session_of(virtual_addr(sid)), Some(sid));
        }
        assert_eq!(session_of("[fdff:ffff::2]:24700".parse().unwrap()), None);
        use crate::net::secure::address_key;
        assert_eq!(
            address_key(virtual_addr(0x0001_0001).ip()),
            address_key(virtual_addr(0x0001_0002).ip()),
            "one friend address's sessions count together at the host"
        );
        assert_ne!(address_key(virtual_addr(0x0001_0001).ip()), address_key(virtual_addr(0x0002_0001).ip()));
    }
}
