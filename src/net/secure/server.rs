//! The server's side of the secure layer: stateless cookies, the Noise responder, the
//! password check, sessions with their limits, and sealed data in.
//!
//! Tables and what happens when they are full (numbers in `docs/SECURITY.md`):
//! - handshakes in progress live in a pool of `HALF_OPEN_MAX`, at most
//!   `MAX_HANDSHAKES_PER_IP` from one address; a full pool evicts its oldest entry, so a
//!   flood of half-open handshakes from many addresses delays an honest join by at most
//!   its own round trip;
//! - confirmed sessions: at most `per_address` from one address and `max_sessions` in all;
//!   a Hello past either is answered with `Busy` (19 bytes, only to a proven address);
//! - a confirmed session must open its one ENet peer within `CONNECT_DEADLINE` and is
//!   forgotten `RETIRE_AFTER` after that peer is gone;
//! - wrong passwords draw on a token bucket per address and one for the whole server; a
//!   check with no token is held (not answered) until one is free, at most `HOLD_MAX`.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use snow::{Builder, HandshakeState};

use super::guard::{Guard, Verdict};
use super::*;

/// Handshakes in progress the server keeps, from all addresses together.
pub const HALF_OPEN_MAX: usize = 1024;
/// Handshakes in progress one IP address may hold.
pub const MAX_HANDSHAKES_PER_IP: usize = 4;
/// Confirmed sessions one IP address may hold unless `server.toml` says otherwise: a
/// household behind one router.
pub const DEFAULT_SESSIONS_PER_ADDRESS: usize = 4;
/// A confirmed session that has not opened its ENet connection by then is forgotten.
pub const CONNECT_DEADLINE: Duration = Duration::from_secs(5);
/// How long a session outlives its ENet peer (to carry the last acknowledgements).
pub const RETIRE_AFTER: Duration = Duration::from_secs(2);
/// Wrong passwords: a burst of this many per address, then one every `GUESS_REFILL`.
pub const GUESS_BURST: f64 = 5.0;
pub const GUESS_REFILL: Duration = Duration::from_secs(6);
/// Wrong passwords for the whole server: a burst, then two a second.
pub const GLOBAL_GUESS_BURST: f64 = 30.0;
pub const GLOBAL_GUESS_REFILL: Duration = Duration::from_millis(500);
/// An address that guessed wrong this recently waits behind addresses that did not.
pub const GUESSED_RECENTLY: Duration = Duration::from_secs(600);
/// The longest a password check waits for a token before it is refused.
pub const HOLD_MAX: Duration = Duration::from_secs(7);
/// `Refuse` reasons (one byte, so a refusal is never larger than the `Confirm`).
pub const REFUSE_WRONG_PASSWORD: u8 = 1;
pub const REFUSE_NO_PASSWORD: u8 = 2;
pub const REFUSE_TOO_MANY_GUESSES: u8 = 3;
/// `Busy` reasons.
pub const BUSY_ADDRESS: u8 = 1;
pub const BUSY_FULL: u8 = 2;

pub(super) struct ServerSession {
    /// The handshake, until the client's third message (its key and password proof).
    pub(super) hs: Option<Box<HandshakeState>>,
    /// The session's keys, from the client's third message on.
    pub(super) keys: Option<Keys>,
    /// The handshake hash after our message (what the password proof is a MAC of).
    pub(super) hash: Vec<u8>,
    /// The client's first handshake message and our answer, to answer a repeat the same;
    /// and its third message, to answer a repeat of it (our answer was lost) again.
    pub(super) hello: Vec<u8>,
    pub(super) welcome: Vec<u8>,
    pub(super) confirm: Vec<u8>,
    /// The player's static key, proven in the handshake.
    pub(super) client_key: Option<[u8; 32]>,
    pub(super) confirmed: bool,
    pub(super) created: Instant,
    pub(super) last_seen: Instant,
    pub(super) window: (Instant, u32, u64),
    pub(super) guard: Guard,
    /// A password proof waiting for a guess token, and since when.
    pub(super) held: Option<([u8; 32], Instant)>,
    /// When the session is forgotten, once its ENet peer is gone.
    pub(super) retire_at: Option<Instant>,
}

/// How a server's secure layer is set up.
#[derive(Clone)]
pub struct ServerSecurity {
    pub identity: Identity,
    /// None: no password.
    pub password: Option<String>,
    /// Most confirmed sessions in all (0: the transport picks from its peer limit).
    pub max_sessions: usize,
    /// Most confirmed sessions from one IP address (0: `DEFAULT_SESSIONS_PER_ADDRESS`).
    pub per_address: usize,
    /// What status queries are answered with (None: they are not answered). The server
    /// loop keeps it current.
    pub status: Option<StatusBoard>,
    /// A relay friends may also reach this server through (`net::relay`).
    pub relay: Option<crate::net::relay::RelayLink>,
}

impl ServerSecurity {
    /// An identity with no password, default limits, and no status answers.
    pub fn new(identity: Identity) -> Self {
        ServerSecurity { identity, password: None, max_sessions: 0, per_address: 0, status: None, relay: None }
    }
}

/// The status a server answers queries with, shared between its loop and its socket.
pub type StatusBoard = std::sync::Arc<std::sync::Mutex<crate::protocol::status::ServerStatus>>;

/// A token bucket.
#[derive(Clone, Copy)]
pub(super) struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    fn full(burst: f64, now: Instant) -> Self {
        Bucket { tokens: burst, at: now }
    }
    fn refill(&mut self, burst: f64, every: Duration, now: Instant) {
        let add = now.duration_since(self.at).as_secs_f64() / every.as_secs_f64();
        self.tokens = (self.tokens + add).min(burst);
        self.at = now;
    }
}

/// Per-second counters.
#[derive(Default)]
pub(super) struct Budget {
    since: Option<Instant>,
    pub(super) unverified: u32,
    pub(super) verified: u32,
    pub(super) cookies: u32,
    pub(super) per_ip: HashMap<IpAddr, u32>,
}

impl Budget {
    fn roll(&mut self, now: Instant) {
        if self.since.is_none_or(|t| now.duration_since(t) >= Duration::from_secs(1)) {
            *self = Budget { since: Some(now), ..Default::default() };
        }
    }
}

pub(super) struct ServerSide {
    pub(super) cfg: ServerSecurity,
    pub(super) secret: [u8; 32],
    pub(super) started: Instant,
    pub(super) sessions: HashMap<SocketAddr, ServerSession>,
    /// Handshakes in progress, oldest first (entries whose session is gone are skipped).
    pub(super) half_open: std::collections::VecDeque<(SocketAddr, Instant)>,
    /// Wrong-password budget per address (`address_key`), and its last wrong guess.
    pub(super) guesses: HashMap<IpAddr, (Bucket, Option<Instant>)>,
    pub(super) global_guesses: Bucket,
    /// Handshakes started per IP in the current second.
    pub(super) starts: HashMap<IpAddr, (Instant, u32)>,
    pub(super) status_budget: Budget,
    pub(super) last_expire: Instant,
    /// When a full table was last logged (at most once a minute each).
    pub(super) logged_full: HashMap<&'static str, Instant>,
    /// When the relay was last asked for (or told to keep) our code, and the cookie it
    /// gave us to prove our address.
    pub(super) relay_sent: Option<Instant>,
    pub(super) relay_cookie: [u8; 16],
    /// Our own nonce in every registration (a new one each keepalive, and the one
    /// before): a `Meet` that carries either is the relay's.
    pub(super) relay_nonce: [u8; 16],
    pub(super) relay_nonce_prev: [u8; 16],
    /// The relay said it has no room (logged once).
    pub(super) relay_full: bool,
    /// Friends the relay introduced, whom we punch towards for a while.
    pub(super) punching: Vec<crate::net::relay::Punching>,
    /// Where relayed friends really are, as the relay told us (session, address): the
    /// newest `MAX_ORIGINS`, for the console and the log.
    pub(super) origins: VecDeque<(u32, SocketAddr)>,
}

impl ServerSide {
    pub(super) fn new(cfg: ServerSecurity, secret: [u8; 32]) -> Self {
        let now = Instant::now();
        ServerSide {
            cfg,
            secret,
            started: now,
            sessions: HashMap::new(),
            half_open: Default::default(),
            guesses: HashMap::new(),
            global_guesses: Bucket::full(GLOBAL_GUESS_BURST, now),
            starts: HashMap::new(),
            status_budget: Budget::default(),
            last_expire: now,
            logged_full: HashMap::new(),
            relay_sent: None,
            relay_cookie: [0; 16],
            relay_nonce: crate::net::relay::new_nonce(),
            relay_nonce_prev: crate::net::relay::new_nonce(),
            relay_full: false,
            punching: Vec::new(),
            origins: VecDeque::new(),
        }
    }

    pub(super) fn cookie_for(&self, domain: &[u8], addr: SocketAddr, window: u64) -> [u8; 16] {
        cookie_mac(&self.secret, domain, addr, window)
    }

    pub(super) fn cookie(&self, addr: SocketAddr, window: u64) -> [u8; 16] {
        self.cookie_for(b"", addr, window)
    }

    pub(super) fn window(&self) -> u64 {
        self.started.elapsed().as_secs() / COOKIE_WINDOW_S
    }

    fn cookie_ok_for(&self, domain: &[u8], addr: SocketAddr, c: &[u8]) -> bool {
        let w = self.window();
        [w, w.saturating_sub(1)].iter().any(|&w| constant_time_eq(&self.cookie_for(domain, addr, w), c))
    }

    pub(super) fn cookie_ok(&self, addr: SocketAddr, c: &[u8]) -> bool {
        self.cookie_ok_for(b"", addr, c)
    }

    fn per_address(&self) -> usize {
        if self.cfg.per_address == 0 {
            DEFAULT_SESSIONS_PER_ADDRESS
        } else {
            self.cfg.per_address
        }
    }

    /// Logs that a table is full, at most once a minute per table.
    fn log_full(&mut self, table: &'static str, detail: String) {
        let now = Instant::now();
        if self.logged_full.get(table).is_none_or(|t| now.duration_since(*t) >= Duration::from_secs(60)) {
            self.logged_full.insert(table, now);
            tracing::warn!(table, "{detail} (logged at most once a minute; `status` counts them all)");
        }
    }

    /// Counts a Diffie-Hellman for `ip` (its address key) in the current second; false when
    /// that is past `MAX_HANDSHAKES_PER_IP_PER_SECOND`.
    fn charge_dh(&mut self, ip: IpAddr, now: Instant) -> bool {
        let st = self.starts.entry(address_key(ip)).or_insert((now, 0));
        if now.duration_since(st.0) >= Duration::from_secs(1) {
            *st = (now, 0);
        }
        st.1 += 1;
        st.1 <= MAX_HANDSHAKES_PER_IP_PER_SECOND
    }

    /// Whether a wrong guess from `ip` could be afforded now (both buckets have a token).
    fn can_guess(&mut self, ip: IpAddr, now: Instant) -> bool {
        let (b, _) = self.guesses.entry(address_key(ip)).or_insert((Bucket::full(GUESS_BURST, now), None));
        b.refill(GUESS_BURST, GUESS_REFILL, now);
        self.global_guesses.refill(GLOBAL_GUESS_BURST, GLOBAL_GUESS_REFILL, now);
        b.tokens >= 1.0 && self.global_guesses.tokens >= 1.0
    }

    fn spend_guess(&mut self, ip: IpAddr) {
        if let Some((b, last)) = self.guesses.get_mut(&address_key(ip)) {
            b.tokens -= 1.0;
            *last = Some(Instant::now());
        }
        self.global_guesses.tokens -= 1.0;
    }
}

/// A cookie: the first 16 bytes of BLAKE2s-MAC-256 keyed with the server's secret over
/// `domain` (empty for handshakes, "status" for status queries), the address as text and
/// the time window (u64 little-endian).
pub(super) fn cookie_mac(secret: &[u8; 32], domain: &[u8], addr: SocketAddr, window: u64) -> [u8; 16] {
    let a = addr.to_string();
    let m = mac(secret, &[domain, a.as_bytes(), &window.to_le_bytes()]);
    let mut c = [0u8; 16];
    c.copy_from_slice(&m[..16]);
    c
}

/// The server's `Welcome` answering a Hello's Noise message `m1` with the static key
/// `private`: the packet, the handshake hash after it (what the client's password proof
/// is a MAC of) and the handshake, which the client's `Confirm` finishes. `ephemeral`: a
/// fixed ephemeral key (the worked example only; None draws a fresh one).
pub(super) fn welcome_packet(
    private: &[u8],
    m1: &[u8],
    ephemeral: Option<&[u8]>,
) -> Option<(Vec<u8>, Vec<u8>, HandshakeState)> {
    let params = NOISE.parse().ok()?;
    let b = Builder::new(params).local_private_key(private);
    let b = match ephemeral {
        Some(e) => b.fixed_ephemeral_key_for_testing_only(e),
        None => b,
    };
    let mut hs = b.build_responder().ok()?;
    let mut payload = [0u8; 64];
    hs.read_message(m1, &mut payload).ok()?;
    let mut m2 = [0u8; 256];
    let n = hs.write_message(&[], &mut m2).ok()?;
    let hash = hs.get_handshake_hash().to_vec();
    let mut p = vec![T_WELCOME];
    p.extend_from_slice(&m2[..n]);
    Some((p, hash, hs))
}

/// Reads the client's `Confirm` (Noise's third message, after the type byte): its
/// password proof and its static key. A message that does not open leaves `hs` as it
/// was (snow restores its state), so a forged `Confirm` cannot end an honest handshake.
pub(super) fn read_confirm(hs: &mut HandshakeState, m3: &[u8]) -> Option<([u8; 32], [u8; 32])> {
    let mut payload = [0u8; 128];
    let n = hs.read_message(m3, &mut payload).ok()?;
    let mut proof = [0u8; 32];
    let mut key = [0u8; 32];
    if n != 32 {
        return None;
    }
    proof.copy_from_slice(&payload[..32]);
    key.copy_from_slice(hs.get_remote_static()?);
    // A key whose Diffie-Hellman anyone can compute (a point of small order) proves
    // nothing, and one with its top bit set is another spelling of a smaller key.
    acceptable_key(&key).then_some((proof, key))
}

/// Whether a client's static X25519 key can stand for one player: canonical (below the
/// field prime, top bit clear) and not of small order (libsodium's list), so that only
/// the holder of its private half could have finished the handshake.
pub(super) fn acceptable_key(k: &[u8; 32]) -> bool {
    const SMALL_ORDER: [[u8; 32]; 2] = [
        [
            0xe0, 0xeb, 0x7a, 0x7c, 0x3b, 0x41, 0xb8, 0xae, 0x16, 0x56, 0xe3, 0xfa, 0xf1, 0x9f, 0xc4, 0x6a, 0xda, 0x09,
            0x8d, 0xeb, 0x9c, 0x32, 0xb1, 0xfd, 0x86, 0x62, 0x05, 0x16, 0x5f, 0x49, 0xb8, 0x00,
        ],
        [
            0x5f, 0x9c, 0x95, 0xbc, 0xa3, 0x50, 0x8c, 0x24, 0xb1, 0xd0, 0xb1, 0x55, 0x9c, 0x83, 0xef, 0x5b, 0x04, 0x44,
            0x5c, 0xc4, 0x58, 0x1c, 0x8e, 0x86, 0xd8, 0x22, 0x4e, 0xdd, 0xd0, 0x9f, 0x11, 0x57,
        ],
    ];
    if k[31] & 0x80 != 0 || SMALL_ORDER.contains(k) {
        return false;
    }
    // 0 and 1; and p - 1 and up (p = 2^255 - 19: ec ff .. ff 7f and above, p - 1 and p + 1
    // of small order, the rest not canonical).
    let zero_or_one = k[1..].iter().all(|&b| b == 0) && k[0] <= 1;
    let top = k[31] == 0x7f && k[1..31].iter().all(|&b| b == 0xff) && k[0] >= 0xec;
    !(zero_or_one || top)
}

impl SecureSocket {
    pub(super) fn server_packet(&mut self, from: SocketAddr, data: &[u8], out: &mut [u8]) -> Option<usize> {
        let Side::Server(s) = &mut self.side else { return None };
        let now = Instant::now();
        // Cheapest first: the type byte and the length decide most garbage.
        let Some(&first) = data.first() else {
            self.stats.garbage += 1;
            self.stats.dropped += 1;
            return None;
        };
        match kind_of(first) {
            T_DATA => {
                let Some(sess) = s.sessions.get_mut(&from).filter(|x| x.confirmed && x.keys.is_some()) else {
                    self.stats.no_session += 1;
                    self.stats.dropped += 1;
                    return None;
                };
                let opened = sess.keys.as_mut().map_or(Err(Drop::Bad), |k| k.open(data, out));
                let n = match opened {
                    Ok(n) => n,
                    Err(d) => return self.stats.count(d),
                };
                sess.last_seen = now;
                // Rate limits over one-second windows.
                if now.duration_since(sess.window.0) >= Duration::from_secs(1) {
                    sess.window = (now, 0, 0);
                }
                sess.window.1 += 1;
                sess.window.2 += data.len() as u64;
                if sess.window.1 > MAX_PACKETS_PER_SECOND || sess.window.2 > MAX_BYTES_PER_SECOND {
                    s.sessions.remove(&from);
                    self.stats.rate_limited += 1;
                    tracing::warn!(peer = %from, "cut off: over the per-peer rate limit");
                    return None;
                }
                match sess.guard.check(&out[..n]) {
                    Verdict::Pass => Some(n),
                    Verdict::Malformed => {
                        self.stats.enet_refused += 1;
                        self.stats.dropped += 1;
                        None
                    }
                    Verdict::ExtraPeer => {
                        self.stats.extra_peers += 1;
                        self.stats.dropped += 1;
                        s.log_full("peers", format!("{from} tried to open a second ENet connection in one session"));
                        None
                    }
                    Verdict::TooMuchAhead => {
                        s.sessions.remove(&from);
                        self.stats.cut_for_memory += 1;
                        tracing::warn!(
                            peer = %from,
                            limit = super::guard::MAX_AHEAD,
                            "cut off: too many reliable commands ahead of a gap (what ENet would have to hold)"
                        );
                        None
                    }
                }
            }
            crate::protocol::status::T_QUERY => {
                self.status_query(from, data, now);
                None
            }
            T_INIT if data.len() == INIT_LEN => {
                // Stateless: the answer is a MAC, no larger than the request.
                let mut p = vec![T_COOKIE, SECURE_VERSION];
                p.extend_from_slice(&s.cookie(from, s.window()));
                self.stats.cookies_sent += 1;
                self.raw_send(from, &p);
                None
            }
            T_HELLO if data.len() == HELLO_LEN && data[1] == SECURE_VERSION => {
                self.hello(from, data, now);
                None
            }
            T_CONFIRM if data.len() == CONFIRM_LEN => {
                self.confirm(from, data, now);
                None
            }
            _ => {
                self.stats.garbage += 1;
                self.stats.dropped += 1;
                None
            }
        }
    }

    fn status_query(&mut self, from: SocketAddr, data: &[u8], now: Instant) {
        use crate::protocol::status::*;
        let Side::Server(s) = &mut self.side else { return };
        let (Some((nonce, cookie)), Some(board)) = (read_query(data), s.cfg.status.clone()) else {
            self.stats.garbage += 1;
            self.stats.dropped += 1;
            return;
        };
        s.status_budget.roll(now);
        let verified = cookie != [0; 16] && s.cookie_ok_for(b"status", from, &cookie);
        let b = &mut s.status_budget;
        let key = address_key(from.ip());
        let room = b.per_ip.len() < 8192 || b.per_ip.contains_key(&key);
        let mine = if room { *b.per_ip.entry(key).or_insert(0) } else { MAX_ANSWERS_PER_ADDRESS };
        let answer = if mine >= MAX_ANSWERS_PER_ADDRESS {
            None
        } else if verified && b.verified < MAX_VERIFIED_PER_SECOND {
            b.verified += 1;
            Some(true)
        } else if !verified && b.unverified < MAX_ANSWERS_PER_SECOND {
            b.unverified += 1;
            Some(true)
        } else if !verified && b.cookies < MAX_COOKIES_PER_SECOND {
            b.cookies += 1;
            Some(false)
        } else {
            None
        };
        match answer {
            Some(true) => {
                let b = &mut s.status_budget;
                *b.per_ip.entry(address_key(from.ip())).or_insert(0) += 1;
                let Ok(a) = board.lock().map(|st| st.answer(nonce)) else { return };
                self.stats.status_answered += 1;
                self.raw_send(from, &a);
            }
            Some(false) => {
                let c = s.cookie_for(b"status", from, s.window());
                self.stats.status_cookies += 1;
                self.raw_send(from, &cookie_answer(nonce, c));
            }
            None => {
                self.stats.status_dropped += 1;
                self.stats.dropped += 1;
            }
        }
    }

    fn busy(&mut self, from: SocketAddr, cookie: &[u8], reason: u8) {
        // Only to an address that proved itself with a cookie, and smaller than its Hello.
        let mut p = vec![T_BUSY, SECURE_VERSION, reason];
        p.extend_from_slice(cookie);
        self.stats.busy += 1;
        self.stats.dropped += 1;
        self.raw_send(from, &p);
    }

    fn hello(&mut self, from: SocketAddr, data: &[u8], now: Instant) {
        let Side::Server(s) = &mut self.side else { return };
        if !s.cookie_ok(from, &data[2..18]) {
            self.stats.unopened += 1;
            self.stats.dropped += 1;
            return;
        }
        if let Some(existing) = s.sessions.get(&from) {
            if existing.confirmed {
                self.stats.dropped += 1;
                return;
            }
            // A repeated Hello (our Welcome was lost or is late): the same answer.
            if existing.hello[..] == data[18..50] {
                let w = existing.welcome.clone();
                self.raw_send(from, &w);
                return;
            }
        }
        // Diffie-Hellmans per IP per second.
        let key = address_key(from.ip());
        if !s.charge_dh(from.ip(), now) {
            self.stats.dropped += 1;
            return;
        }
        let (mut mine_half, mut mine_confirmed, mut confirmed) = (0, 0, 0);
        for (a, x) in &s.sessions {
            confirmed += x.confirmed as usize;
            if address_key(a.ip()) == key && *a != from {
                if x.confirmed {
                    mine_confirmed += 1;
                } else {
                    mine_half += 1;
                }
            }
        }
        let cookie = data[2..18].to_vec();
        let limited = per_address_limited(from.ip());
        if limited && mine_confirmed >= s.per_address() {
            let limit = s.per_address();
            s.log_full(
                "per-address",
                format!("{} already holds {limit} sessions (max_sessions_per_address); refusing more", from.ip()),
            );
            return self.busy(from, &cookie, BUSY_ADDRESS);
        }
        if limited && mine_half >= MAX_HANDSHAKES_PER_IP {
            self.stats.dropped += 1;
            return;
        }
        let max_sessions = s.cfg.max_sessions.max(1);
        if confirmed >= max_sessions {
            s.log_full("sessions", format!("the session table is full ({max_sessions} confirmed sessions)"));
            return self.busy(from, &cookie, BUSY_FULL);
        }
        // The half-open pool: evict the oldest when full.
        let half = s.sessions.len() - confirmed;
        if half >= HALF_OPEN_MAX {
            // Password checks waiting for a token are not evicted: they are answered.
            while let Some((a, t)) = s.half_open.pop_front() {
                if s.sessions.get(&a).is_some_and(|x| !x.confirmed && x.created == t && x.held.is_none()) {
                    s.sessions.remove(&a);
                    self.stats.evicted += 1;
                    break;
                }
            }
            s.log_full("handshakes", format!("the handshake pool is full ({HALF_OPEN_MAX}); evicting the oldest"));
        }
        let Some((p, hash, hs)) = welcome_packet(&s.cfg.identity.private, &data[18..50], None) else {
            self.stats.unopened += 1;
            self.stats.dropped += 1;
            return;
        };
        s.sessions.insert(
            from,
            ServerSession {
                hs: Some(Box::new(hs)),
                keys: None,
                hash,
                hello: data[18..50].to_vec(),
                welcome: p.clone(),
                confirm: Vec::new(),
                client_key: None,
                confirmed: false,
                created: now,
                last_seen: now,
                window: (now, 0, 0),
                guard: Guard::new(),
                held: None,
                retire_at: None,
            },
        );
        s.half_open.push_back((from, now));
        if s.half_open.len() > 4 * HALF_OPEN_MAX {
            // Entries of sessions that confirmed or expired: drop them now and then.
            let sessions = &s.sessions;
            s.half_open.retain(|(a, t)| sessions.get(a).is_some_and(|x| !x.confirmed && x.created == *t));
        }
        self.stats.handshakes += 1;
        self.raw_send(from, &p);
    }

    fn confirm(&mut self, from: SocketAddr, data: &[u8], now: Instant) {
        let Side::Server(s) = &mut self.side else { return };
        let Some(sess) = s.sessions.get_mut(&from) else {
            self.stats.no_session += 1;
            self.stats.dropped += 1;
            return;
        };
        if sess.hs.is_none() {
            // A repeat of the Confirm we took: our Accept was lost, so it is sent again
            // (sealed afresh) until the client's ENet connection shows it arrived.
            let repeat = sess.confirmed && !sess.guard.connected() && data == &sess.confirm[..];
            let again = if repeat { sess.keys.as_mut().and_then(|k| k.seal(T_ACCEPT, &[])) } else { None };
            self.stats.dropped += 1;
            if let Some(p) = again {
                self.raw_send(from, &p);
            }
            return;
        };
        // Reading it costs a Diffie-Hellman (a client can make its key open and its proof
        // not, again and again): charged to the address like a Hello's.
        if !s.charge_dh(from.ip(), now) && per_address_limited(from.ip()) {
            self.stats.dropped += 1;
            return;
        }
        let Some(sess) = s.sessions.get_mut(&from) else { return };
        let Some(hs) = sess.hs.as_mut() else { return };
        let Some((proof, key)) = read_confirm(hs, &data[1..]) else {
            // Not this handshake's third message (never answered: a refusal would be
            // larger than the request).
            self.stats.unopened += 1;
            self.stats.dropped += 1;
            return;
        };
        let Some(transport) = sess.hs.take().and_then(|hs| hs.into_stateless_transport_mode().ok()) else {
            self.stats.dropped += 1;
            return;
        };
        sess.keys = Some(Keys { transport, send_nonce: 0, replay: Replay::default() });
        sess.client_key = Some(key);
        sess.confirm = data.to_vec();
        sess.held = Some((proof, now));
        // Decided now unless other checks are waiting for a token (then in their order).
        if !s.sessions.iter().any(|(a, x)| *a != from && x.held.is_some()) {
            self.judge(from, now);
        } else if s.cfg.password.is_some() {
            self.stats.held_guesses += 1;
        }
    }

    /// Decides a held password check if it can be decided now.
    fn judge(&mut self, from: SocketAddr, now: Instant) {
        let Side::Server(s) = &mut self.side else { return };
        let Some(sess) = s.sessions.get(&from) else { return };
        let Some((proof, since)) = sess.held else { return };
        let want = mac(&password_key(s.cfg.password.as_deref().unwrap_or("")), &[&sess.hash]);
        let good = constant_time_eq(&proof, &want);
        let reason = if s.cfg.password.is_none() {
            // Nothing to guess: the answer is immediate.
            (!good).then_some(REFUSE_NO_PASSWORD)
        } else if s.can_guess(from.ip(), now) {
            (!good).then_some(REFUSE_WRONG_PASSWORD)
        } else if now.duration_since(since) < HOLD_MAX {
            // No token: the check waits (unanswered) for one.
            if since == now {
                self.stats.held_guesses += 1;
            }
            return;
        } else {
            Some(REFUSE_TOO_MANY_GUESSES)
        };
        let Some(sess) = s.sessions.get_mut(&from) else { return };
        sess.held = None;
        let reply = match reason {
            None => {
                sess.confirmed = true;
                sess.last_seen = now;
                // From here the connect deadline runs.
                sess.created = now;
                sess.keys.as_mut().and_then(|k| k.seal(T_ACCEPT, &[]))
            }
            Some(r) => {
                let p = sess.keys.as_mut().and_then(|k| k.seal(T_REFUSE, &[r]));
                s.sessions.remove(&from);
                if r == REFUSE_WRONG_PASSWORD {
                    s.spend_guess(from.ip());
                    self.stats.refused_passwords += 1;
                    tracing::info!(address = %from.ip(), "refused a join: wrong password");
                } else if r == REFUSE_TOO_MANY_GUESSES {
                    s.log_full("passwords", format!("{} waited too long for a password check", from.ip()));
                }
                p
            }
        };
        if let Some(p) = reply {
            self.raw_send(from, &p);
        }
    }

    /// The ENet peer of the session at `addr` is gone: forget the session shortly.
    pub(super) fn server_retire(&mut self, addr: SocketAddr) {
        if let Side::Server(s) = &mut self.side {
            if let Some(x) = s.sessions.get_mut(&addr) {
                x.retire_at.get_or_insert(Instant::now() + RETIRE_AFTER);
            }
            // A relayed friend gone: its session number may come back for someone else.
            if let Some(sid) = crate::net::relay::session_of(SocketAddr::new(addr.ip().to_canonical(), addr.port())) {
                s.origins.retain(|(x, _)| *x != sid);
            }
        }
    }

    pub(super) fn server_expire(&mut self) {
        let Side::Server(s) = &mut self.side else { return };
        let now = Instant::now();
        if now.duration_since(s.last_expire) < Duration::from_millis(20) {
            return;
        }
        s.last_expire = now;
        // Registered with the relay: again every so often (which keeps our NAT's door to it
        // open), every second until it answers.
        if let Some(link) = s.cfg.relay.clone() {
            let code = link.code();
            let every = if code.is_some() { crate::net::relay::KEEPALIVE } else { Duration::from_secs(1) };
            if s.relay_sent.is_none_or(|t| now.duration_since(t) >= every) {
                s.relay_sent = Some(now);
                // A new nonce with each keepalive (the last one still proves a Meet sent
                // meanwhile): one seen on the path is good for seconds, not for the game.
                s.relay_nonce_prev = s.relay_nonce;
                s.relay_nonce = crate::net::relay::new_nonce();
                let p = crate::net::relay::register_request(
                    &code.unwrap_or([0; 6]),
                    &s.relay_cookie,
                    &s.relay_nonce,
                    link.hide,
                );
                let to = self.reachable(link.addr);
                let _ = self.inner.send_to(&p, to);
            }
        }
        // Friends the relay introduced: a punch each every so often, which opens our NAT
        // towards them (until they are heard or the time is up).
        let Side::Server(s) = &mut self.side else { return };
        s.punching.retain(|p| !p.over(now));
        for p in &mut s.punching {
            p.send_due(&self.inner, now, false);
        }
        // Held password checks first (one that waited to the end is refused, not dropped):
        // addresses with no wrong guess in the last ten minutes first, then oldest first.
        let guessed = |ip: IpAddr| s.guesses.get(&address_key(ip)).is_some_and(|(_, last)| last.is_some());
        let mut held: Vec<(bool, Instant, SocketAddr)> =
            s.sessions.iter().filter_map(|(a, x)| x.held.map(|(_, t)| (guessed(a.ip()), t, *a))).collect();
        held.sort();
        for (_, _, a) in held {
            self.judge(a, now);
        }
        let Side::Server(s) = &mut self.side else { return };
        let mut idle = 0;
        s.sessions.retain(|_, x| {
            let keep = if let Some(t) = x.retire_at {
                now < t
            } else if x.confirmed {
                now.duration_since(x.last_seen) < SESSION_IDLE
                    && (x.guard.connected() || now.duration_since(x.created) < CONNECT_DEADLINE)
                    && !(x.guard.disconnected && now.duration_since(x.last_seen) > RETIRE_AFTER)
            } else if let Some((_, since)) = x.held {
                now.duration_since(since) <= HOLD_MAX
            } else {
                now.duration_since(x.created) < HANDSHAKE_DEADLINE
            };
            if !keep && x.confirmed {
                idle += 1;
            }
            keep
        });
        self.stats.idle_dropped += idle;
        s.guesses.retain(|_, (b, last)| {
            b.refill(GUESS_BURST, GUESS_REFILL, now);
            b.tokens < GUESS_BURST || last.is_some_and(|t| now.duration_since(t) < GUESSED_RECENTLY)
        });
        s.starts.retain(|_, (t, _)| now.duration_since(*t) < Duration::from_secs(1));
        while s.half_open.front().is_some_and(|(a, t)| s.sessions.get(a).is_none_or(|x| x.created != *t)) {
            s.half_open.pop_front();
        }
        let confirmed = s.sessions.values().filter(|x| x.confirmed).count();
        self.stats.sessions = confirmed;
        self.stats.half_open = s.sessions.len() - confirmed;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_anyone_could_use_are_not_player_keys() {
        let real = Identity::generate().unwrap().public;
        assert!(acceptable_key(&real));
        let mut high = real;
        high[31] |= 0x80;
        assert!(!acceptable_key(&high), "the same key with its top bit set");
        let mut one = [0u8; 32];
        one[0] = 1;
        assert!(!acceptable_key(&[0u8; 32]) && !acceptable_key(&one));
        let mut p_minus_1 = [0xffu8; 32];
        p_minus_1[0] = 0xec;
        p_minus_1[31] = 0x7f;
        assert!(!acceptable_key(&p_minus_1));
        let mut p_plus_2 = p_minus_1;
        p_plus_2[0] = 0xef;
        assert!(!acceptable_key(&p_plus_2), "not canonical");
        let small = [
            0x5f, 0x9c, 0x95, 0xbc, 0xa3, 0x50, 0x8c, 0x24, 0xb1, 0xd0, 0xb1, 0x55, 0x9c, 0x83, 0xef, 0x5b, 0x04, 0x44,
            0x5c, 0xc4, 0x58, 0x1c, 0x8e, 0x86, 0xd8, 0x22, 0x4e, 0xdd, 0xd0, 0x9f, 0x11, 0x57,
        ];
        assert!(!acceptable_key(&small));
    }
}
