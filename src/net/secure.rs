//! Encrypted and authenticated datagrams below ENet: the socket ENet is given when a
//! transport crosses a real network. Nothing ENet sees (and so no ENet peer) exists before
//! a session has been set up, and every datagram after that is sealed with
//! ChaCha20-Poly1305 under keys from a Noise handshake.
//!
//! Construction (see `docs/SECURITY.md` for the reasoning and the threat model):
//! - `Noise_NX_25519_ChaChaPoly_BLAKE2s` (the `snow` crate): the server proves its static
//!   X25519 key, which the client pins on first use (`KnownServers`); the client is
//!   anonymous (players have no accounts).
//! - Before any Diffie-Hellman or state, a stateless cookie in the WireGuard manner: the
//!   first packet from an address is answered with `MAC(secret, address, time window)`, no
//!   larger than the request; only a packet carrying a valid cookie (proof that the
//!   source address is real) costs the server a handshake and a session slot.
//! - After the handshake the client sends `Confirm`: a MAC of the handshake hash keyed by
//!   the server password's hash (an empty password when there is none), sealed. The
//!   password never travels, not even encrypted, and the proof is bound to this session.
//! - Data: `u8 type, u64 nonce, sealed datagram`; the nonce is a per-direction counter and
//!   a 1,024-packet sliding window refuses replays. Anything that does not open is
//!   dropped and counted, never handed to ENet.
//!
//! Packet layouts (byte 0 is the type; integers little-endian):
//! - 1 `Init` c->s: `u8 version`, zero padding to `INIT_LEN`.
//! - 2 `Cookie` s->c: `u8 version, [16] cookie` (smaller than `Init`).
//! - 3 `Hello` c->s: `u8 version, [16] cookie, noise message 1 (32)`, padding to `HELLO_LEN`.
//! - 4 `Welcome` s->c: `noise message 2 (96)` (smaller than `Hello`).
//! - 5 `Confirm` c->s, 6 `Accept` s->c, 7 `Refuse` s->c, 8 `Data`: `u64 nonce, sealed payload`.

use std::collections::{HashMap, VecDeque};
use std::io::{self, ErrorKind};
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use blake2::digest::{KeyInit, Mac};
use rusty_enet as enet;
use snow::{Builder, HandshakeState, StatelessTransportState};

/// The Noise protocol name.
pub const NOISE: &str = "Noise_NX_25519_ChaChaPoly_BLAKE2s";
/// Version of this layer; a different one is told so in the `Cookie` answer.
pub const SECURE_VERSION: u8 = 1;
const INIT_LEN: usize = 64;
const HELLO_LEN: usize = 128;
const TAG: usize = 16;
const T_INIT: u8 = 1;
const T_COOKIE: u8 = 2;
const T_HELLO: u8 = 3;
const T_WELCOME: u8 = 4;
const T_CONFIRM: u8 = 5;
const T_ACCEPT: u8 = 6;
const T_REFUSE: u8 = 7;
const T_DATA: u8 = 8;

/// Cookies are valid for the current and the previous window of this many seconds.
const COOKIE_WINDOW_S: u64 = 30;
/// A session that has not confirmed within this long is forgotten.
pub const HANDSHAKE_DEADLINE: Duration = Duration::from_secs(5);
/// A session silent for this long is forgotten (ENet pings every second).
pub const SESSION_IDLE: Duration = Duration::from_secs(30);
/// Sessions (in handshake or established) one IP address may hold.
pub const MAX_SESSIONS_PER_IP: usize = 4;
/// Wrong passwords one IP address may try per minute; more are refused unheard.
pub const MAX_PASSWORD_GUESSES_PER_MINUTE: u32 = 5;
/// Per-session rate limits, averaged over a second: a peer above them is cut off.
pub const MAX_PACKETS_PER_SECOND: u32 = 600;
pub const MAX_BYTES_PER_SECOND: u64 = 512 * 1024;
/// How often a client repeats an unanswered handshake packet.
const RETRY: Duration = Duration::from_millis(400);
const REPLAY_WINDOW: u64 = 1024;
// No amplification: before an address is verified, no answer is larger than its request.
const COOKIE_LEN: usize = 2 + 16;
const WELCOME_LEN: usize = 1 + 96;
const _: () = assert!(COOKIE_LEN <= INIT_LEN && WELCOME_LEN <= HELLO_LEN);

/// What a server has to prove who it is: its static key pair.
#[derive(Clone)]
pub struct Identity {
    pub private: Vec<u8>,
    pub public: [u8; 32],
}

impl Identity {
    pub fn generate() -> io::Result<Identity> {
        let params = NOISE.parse().map_err(|e| io::Error::other(format!("{e:?}")))?;
        let kp = Builder::new(params).generate_keypair().map_err(|e| io::Error::other(format!("{e:?}")))?;
        let mut public = [0u8; 32];
        public.copy_from_slice(&kp.public);
        Ok(Identity { private: kp.private, public })
    }

    /// The server's key pair from `path`, made on first run (readable by its owner only).
    pub fn load_or_create(path: &Path) -> io::Result<Identity> {
        if let Ok(text) = std::fs::read_to_string(path) {
            let bytes = from_hex(text.trim())
                .filter(|b| b.len() == 64)
                .ok_or_else(|| io::Error::other(format!("{}: not a Hailfire server key", path.display())))?;
            let mut public = [0u8; 32];
            public.copy_from_slice(&bytes[32..]);
            return Ok(Identity { private: bytes[..32].to_vec(), public });
        }
        let id = Identity::generate()?;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let mut text = to_hex(&id.private);
        text.push_str(&to_hex(&id.public));
        // Written aside and renamed into place: a reader never sees half a key, and when
        // two servers start at once, the first key on disk is the one both use.
        let tmp = path.with_extension(format!("tmp{}", std::process::id()));
        write_private(&tmp, &text)?;
        if std::fs::hard_link(&tmp, path).is_err() {
            let _ = std::fs::remove_file(&tmp);
            return Self::load_or_create(path);
        }
        let _ = std::fs::remove_file(&tmp);
        Ok(id)
    }

    /// `<data dir>/server_key` (`$HAILFIRE_DATA_DIR` overrides the directory).
    pub fn default_path() -> Option<PathBuf> {
        data_dir().map(|d| d.join("server_key"))
    }

    pub fn fingerprint(&self) -> String {
        fingerprint(&self.public)
    }
}

fn data_dir() -> Option<PathBuf> {
    if let Ok(d) = std::env::var("HAILFIRE_DATA_DIR") {
        return Some(PathBuf::from(d));
    }
    directories::ProjectDirs::from("", "", "Hailfire").map(|d| d.data_dir().to_path_buf())
}

fn write_private(path: &Path, text: &str) -> io::Result<()> {
    use std::io::Write;
    let mut o = std::fs::OpenOptions::new();
    o.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.mode(0o600);
    }
    o.open(path)?.write_all(text.as_bytes())
}

pub fn to_hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

pub fn from_hex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok()).collect()
}

/// A short, readable digest of a server key, for people to compare out loud.
pub fn fingerprint(public: &[u8]) -> String {
    let h = mac(b"hailfire fingerprint", &[public]);
    h[..8].chunks(2).map(to_hex).collect::<Vec<_>>().join(":")
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

/// Server keys pinned per address, like SSH's `known_hosts`: `ADDRESS HEXKEY` per line.
#[derive(Clone, Debug)]
pub struct KnownServers {
    pub path: PathBuf,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pin {
    /// First contact: pinned now.
    New,
    Match,
    /// A different key than the pinned one: refused.
    Changed {
        pinned: String,
    },
}

impl KnownServers {
    /// `<data dir>/known_servers`.
    pub fn default_path() -> Option<PathBuf> {
        data_dir().map(|d| d.join("known_servers"))
    }

    fn read(&self) -> Vec<(String, String)> {
        std::fs::read_to_string(&self.path)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.split_once(' ').map(|(a, k)| (a.to_string(), k.trim().to_string())))
            .collect()
    }

    /// Checks `key` for `addr`, pinning it on first contact (or when `accept_new` says the
    /// player accepted a changed key).
    pub fn check(&self, addr: &str, key: &[u8], accept_new: bool) -> io::Result<Pin> {
        let hex = to_hex(key);
        let mut all = self.read();
        let result = match all.iter().find(|(a, _)| a == addr) {
            Some((_, k)) if *k == hex => return Ok(Pin::Match),
            Some((_, k)) if !accept_new => {
                let pinned = from_hex(k).map_or_else(|| k.clone(), |b| fingerprint(&b));
                return Ok(Pin::Changed { pinned });
            }
            _ => Pin::New,
        };
        all.retain(|(a, _)| a != addr);
        all.push((addr.to_string(), hex));
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let text: String = all.iter().map(|(a, k)| format!("{a} {k}\n")).collect();
        write_private(&self.path, &text)?;
        Ok(result)
    }
}

/// Counts of what the layer dropped and did, for logs and tests.
#[derive(Clone, Debug, Default)]
pub struct SecureStats {
    /// Datagrams that failed to open or parse, or came from no session.
    pub dropped: u64,
    /// Datagrams refused as replays (a nonce already seen or too old).
    pub replayed: u64,
    pub cookies_sent: u64,
    pub handshakes: u64,
    pub refused_passwords: u64,
    /// Sessions cut off for going over the rate limits.
    pub rate_limited: u64,
    pub sessions: usize,
    pub bytes_sent: u64,
    pub bytes_received: u64,
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

impl Keys {
    fn seal(&mut self, kind: u8, payload: &[u8]) -> Option<Vec<u8>> {
        let n = self.send_nonce;
        self.send_nonce += 1;
        let mut out = vec![0u8; 9 + payload.len() + TAG];
        out[0] = kind;
        out[1..9].copy_from_slice(&n.to_le_bytes());
        let len = self.transport.write_message(n, payload, &mut out[9..]).ok()?;
        out.truncate(9 + len);
        Some(out)
    }

    /// Opens a sealed packet into `out`; None when it does not open or is a replay.
    fn open(&mut self, packet: &[u8], out: &mut [u8]) -> Result<usize, Drop> {
        if packet.len() < 9 + TAG {
            return Err(Drop::Bad);
        }
        let n = u64::from_le_bytes(packet[1..9].try_into().map_err(|_| Drop::Bad)?);
        let len = self.transport.read_message(n, &packet[9..], out).map_err(|_| Drop::Bad)?;
        if !self.replay.accept(n) {
            return Err(Drop::Replay);
        }
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
            Drop::Bad => self.dropped += 1,
            Drop::Replay => self.replayed += 1,
        }
        None
    }
}

// ---------------------------------------------------------------- server side

struct ServerSession {
    keys: Keys,
    hash: Vec<u8>,
    /// The client's first handshake message and our answer, to answer a repeat the same.
    hello: Vec<u8>,
    welcome: Vec<u8>,
    confirmed: bool,
    created: Instant,
    last_seen: Instant,
    window: (Instant, u32, u64),
}

/// How a server's secure layer is set up.
#[derive(Clone)]
pub struct ServerSecurity {
    pub identity: Identity,
    /// None: no password.
    pub password: Option<String>,
    /// Most sessions in all (the ENet peer limit plus room for handshakes).
    pub max_sessions: usize,
}

struct ServerSide {
    cfg: ServerSecurity,
    secret: [u8; 32],
    started: Instant,
    sessions: HashMap<SocketAddr, ServerSession>,
    guesses: HashMap<IpAddr, (Instant, u32)>,
}

impl ServerSide {
    fn cookie(&self, addr: SocketAddr, window: u64) -> [u8; 16] {
        let a = addr.to_string();
        let m = mac(&self.secret, &[a.as_bytes(), &window.to_le_bytes()]);
        let mut c = [0u8; 16];
        c.copy_from_slice(&m[..16]);
        c
    }

    fn window(&self) -> u64 {
        self.started.elapsed().as_secs() / COOKIE_WINDOW_S
    }

    fn cookie_ok(&self, addr: SocketAddr, c: &[u8]) -> bool {
        let w = self.window();
        [w, w.saturating_sub(1)].iter().any(|&w| self.cookie(addr, w)[..] == *c)
    }
}

// ---------------------------------------------------------------- client side

/// How a client checks the server it reaches.
#[derive(Clone, Debug)]
pub struct ClientSecurity {
    /// Where pinned keys live (None: trust any key, for tests and in-process links).
    pub known: Option<KnownServers>,
    /// Accept (and pin) a key that differs from the pinned one.
    pub accept_new_key: bool,
    pub password: Option<String>,
}

enum ClientPhase {
    Start,
    Init { sent: Instant },
    Hello { hs: Box<HandshakeState>, packet: Vec<u8>, sent: Instant },
    Confirm { keys: Keys, proof: [u8; 32], sent: Instant },
    Ready(Keys),
    Failed,
}

struct ClientSide {
    cfg: ClientSecurity,
    server: SocketAddr,
    phase: ClientPhase,
    /// ENet datagrams waiting for the session.
    queue: VecDeque<Vec<u8>>,
    pub server_key: Option<[u8; 32]>,
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
    scratch: Vec<u8>,
}

impl SecureSocket {
    pub fn server(inner: UdpSocket, cfg: ServerSecurity) -> io::Result<Self> {
        let mut secret = [0u8; 32];
        rand_core::RngCore::fill_bytes(&mut rand_core::OsRng, &mut secret);
        let side =
            ServerSide { cfg, secret, started: Instant::now(), sessions: HashMap::new(), guesses: HashMap::new() };
        Ok(SecureSocket {
            inner,
            side: Side::Server(Box::new(side)),
            stats: SecureStats::default(),
            failure: None,
            scratch: vec![0; 70_000],
        })
    }

    pub fn client(inner: UdpSocket, server: SocketAddr, cfg: ClientSecurity) -> Self {
        let side = ClientSide { cfg, server, phase: ClientPhase::Start, queue: VecDeque::new(), server_key: None };
        SecureSocket {
            inner,
            side: Side::Client(Box::new(side)),
            stats: SecureStats::default(),
            failure: None,
            scratch: vec![0; 70_000],
        }
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }

    /// The server's key as the client saw it (once the handshake got that far).
    pub fn server_key(&self) -> Option<[u8; 32]> {
        match &self.side {
            Side::Client(c) => c.server_key,
            Side::Server(_) => None,
        }
    }

    fn raw_send(&mut self, to: SocketAddr, data: &[u8]) {
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

    /// Client: moves the handshake on (first packet, retries).
    fn client_tick(&mut self) {
        let Side::Client(c) = &mut self.side else { return };
        let server = c.server;
        let now = Instant::now();
        let mut out: Option<Vec<u8>> = None;
        match &mut c.phase {
            ClientPhase::Start => {
                c.phase = ClientPhase::Init { sent: now };
                out = Some(init_packet());
            }
            ClientPhase::Init { sent } if now.duration_since(*sent) > RETRY => {
                *sent = now;
                out = Some(init_packet());
            }
            ClientPhase::Hello { packet, sent, .. } if now.duration_since(*sent) > RETRY => {
                *sent = now;
                out = Some(packet.clone());
            }
            // A repeated Confirm is sealed afresh: the server refuses replayed nonces.
            ClientPhase::Confirm { keys, proof, sent } if now.duration_since(*sent) > RETRY => {
                *sent = now;
                out = keys.seal(T_CONFIRM, &proof[..]);
            }
            _ => {}
        }
        if let Some(p) = out {
            self.raw_send(server, &p);
        }
    }

    fn client_packet(&mut self, from: SocketAddr, data: &[u8], out: &mut [u8; enet::MTU_MAX]) -> Option<usize> {
        let Side::Client(c) = &mut self.side else { return None };
        if from != c.server || data.is_empty() {
            self.stats.dropped += 1;
            return None;
        }
        let now = Instant::now();
        match (data[0], &mut c.phase) {
            (T_COOKIE, ClientPhase::Init { .. }) if data.len() == 18 => {
                if data[1] != SECURE_VERSION {
                    let v = data[1];
                    self.fail(format!(
                        "the server speaks secure-session version {v}, this game {SECURE_VERSION}: update the game"
                    ));
                    return None;
                }
                let params = NOISE.parse().ok()?;
                let mut hs = Builder::new(params).build_initiator().ok()?;
                let mut m1 = [0u8; 64];
                let n = hs.write_message(&[], &mut m1).ok()?;
                let mut p = vec![T_HELLO, SECURE_VERSION];
                p.extend_from_slice(&data[2..18]);
                p.extend_from_slice(&m1[..n]);
                p.resize(HELLO_LEN, 0);
                c.phase = ClientPhase::Hello { hs: Box::new(hs), packet: p.clone(), sent: now };
                self.raw_send(from, &p);
                None
            }
            (T_WELCOME, ClientPhase::Hello { .. }) => {
                let ClientPhase::Hello { mut hs, .. } = std::mem::replace(&mut c.phase, ClientPhase::Failed) else {
                    return None;
                };
                let mut payload = [0u8; 64];
                if hs.read_message(&data[1..], &mut payload).is_err() {
                    self.stats.dropped += 1;
                    self.fail("the server's handshake did not verify".into());
                    return None;
                }
                let mut key = [0u8; 32];
                key.copy_from_slice(hs.get_remote_static()?);
                c.server_key = Some(key);
                let hash = hs.get_handshake_hash().to_vec();
                if let Some(known) = &c.cfg.known {
                    let addr = c.server.to_string();
                    match known.check(&addr, &key, c.cfg.accept_new_key) {
                        Ok(Pin::Changed { pinned }) => {
                            let why = format!(
                                "the server at {addr} presented a different key (fingerprint {}) from the one pinned for it ({pinned}). \
                                 If its owner changed it, accept the new key (the Join page's 'Trust the new key', or the bot's --accept-new-key); otherwise someone may be impersonating it",
                                fingerprint(&key)
                            );
                            self.fail(why);
                            return None;
                        }
                        Ok(Pin::New) => {
                            tracing::info!(server = %addr, fingerprint = %fingerprint(&key), "pinned the server's key on first contact")
                        }
                        Ok(Pin::Match) => {}
                        Err(e) => tracing::warn!("could not record the server's key: {e}"),
                    }
                }
                let transport = hs.into_stateless_transport_mode().ok()?;
                let mut keys = Keys { transport, send_nonce: 0, replay: Replay::default() };
                let proof = mac(&password_key(c.cfg.password.as_deref().unwrap_or("")), &[&hash]);
                let p = keys.seal(T_CONFIRM, &proof)?;
                c.phase = ClientPhase::Confirm { keys, proof, sent: now };
                self.raw_send(from, &p);
                None
            }
            (T_ACCEPT | T_REFUSE, ClientPhase::Confirm { keys, .. }) => {
                let kind = data[0];
                let mut buf = [0u8; 256];
                match keys.open(data, &mut buf) {
                    Ok(n) if kind == T_REFUSE => {
                        let why = String::from_utf8_lossy(&buf[..n]).to_string();
                        self.fail(format!("the server refused us: {why}"));
                    }
                    Ok(_) => {
                        let ClientPhase::Confirm { keys, .. } = std::mem::replace(&mut c.phase, ClientPhase::Failed)
                        else {
                            return None;
                        };
                        c.phase = ClientPhase::Ready(keys);
                        let queued: Vec<Vec<u8>> = c.queue.drain(..).collect();
                        for d in queued {
                            self.seal_and_send(from, &d);
                        }
                    }
                    Err(_) => self.stats.dropped += 1,
                }
                None
            }
            (T_DATA, ClientPhase::Ready(keys)) => match keys.open(data, out) {
                Ok(n) => Some(n),
                Err(d) => self.stats.count(d),
            },
            _ => self.stats.count(Drop::Bad),
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
            Side::Server(s) => s.sessions.get_mut(&to).filter(|x| x.confirmed).and_then(|x| x.keys.seal(T_DATA, data)),
        };
        if let Some(p) = sealed {
            self.raw_send(to, &p);
        }
    }

    fn server_packet(&mut self, from: SocketAddr, data: &[u8], out: &mut [u8; enet::MTU_MAX]) -> Option<usize> {
        let Side::Server(s) = &mut self.side else { return None };
        let now = Instant::now();
        let Some(&kind) = data.first() else {
            self.stats.dropped += 1;
            return None;
        };
        match kind {
            T_INIT if data.len() == INIT_LEN => {
                // Stateless: the answer is a MAC, no larger than the request.
                let mut p = vec![T_COOKIE, SECURE_VERSION];
                p.extend_from_slice(&s.cookie(from, s.window()));
                self.stats.cookies_sent += 1;
                self.raw_send(from, &p);
                None
            }
            T_HELLO if data.len() == HELLO_LEN && data[1] == SECURE_VERSION => {
                if !s.cookie_ok(from, &data[2..18]) {
                    self.stats.dropped += 1;
                    return None;
                }
                if let Some(existing) = s.sessions.get(&from) {
                    if existing.confirmed {
                        self.stats.dropped += 1;
                        return None;
                    }
                    // A repeated Hello (our Welcome was lost or is late): the same answer.
                    if existing.hello[..] == data[18..50] {
                        let w = existing.welcome.clone();
                        self.raw_send(from, &w);
                        return None;
                    }
                }
                let per_ip = s.sessions.keys().filter(|a| a.ip() == from.ip() && **a != from).count();
                let blocked = s.guesses.get(&from.ip()).is_some_and(|(t, n)| {
                    now.duration_since(*t) < Duration::from_secs(60) && *n >= MAX_PASSWORD_GUESSES_PER_MINUTE
                });
                if per_ip >= MAX_SESSIONS_PER_IP || s.sessions.len() >= s.cfg.max_sessions || blocked {
                    self.stats.dropped += 1;
                    return None;
                }
                let params = NOISE.parse().ok()?;
                let mut hs = Builder::new(params).local_private_key(&s.cfg.identity.private).build_responder().ok()?;
                let mut payload = [0u8; 64];
                if hs.read_message(&data[18..50], &mut payload).is_err() {
                    self.stats.dropped += 1;
                    return None;
                }
                let mut m2 = [0u8; 256];
                let n = hs.write_message(&[], &mut m2).ok()?;
                let hash = hs.get_handshake_hash().to_vec();
                let transport = hs.into_stateless_transport_mode().ok()?;
                let mut p = vec![T_WELCOME];
                p.extend_from_slice(&m2[..n]);
                s.sessions.insert(
                    from,
                    ServerSession {
                        keys: Keys { transport, send_nonce: 0, replay: Replay::default() },
                        hash,
                        hello: data[18..50].to_vec(),
                        welcome: p.clone(),
                        confirmed: false,
                        created: now,
                        last_seen: now,
                        window: (now, 0, 0),
                    },
                );
                self.stats.handshakes += 1;
                self.raw_send(from, &p);
                None
            }
            T_CONFIRM => {
                let Some(sess) = s.sessions.get_mut(&from) else {
                    self.stats.dropped += 1;
                    return None;
                };
                let mut buf = [0u8; 64];
                let Ok(n) = sess.keys.open(data, &mut buf) else {
                    self.stats.dropped += 1;
                    return None;
                };
                let want = mac(&password_key(s.cfg.password.as_deref().unwrap_or("")), &[&sess.hash]);
                let good = n == 32 && constant_time_eq(&buf[..32], &want);
                let reply = if good {
                    sess.confirmed = true;
                    sess.last_seen = now;
                    sess.keys.seal(T_ACCEPT, &[])
                } else {
                    let why = if s.cfg.password.is_some() {
                        "wrong password"
                    } else {
                        "this server has no password; join without one"
                    };
                    let p = sess.keys.seal(T_REFUSE, why.as_bytes());
                    s.sessions.remove(&from);
                    let g = s.guesses.entry(from.ip()).or_insert((now, 0));
                    if now.duration_since(g.0) > Duration::from_secs(60) {
                        *g = (now, 0);
                    }
                    g.1 += 1;
                    self.stats.refused_passwords += 1;
                    tracing::info!(address = %from.ip(), "refused a join: wrong password");
                    p
                };
                if let Some(p) = reply {
                    self.raw_send(from, &p);
                }
                None
            }
            T_DATA => {
                let Some(sess) = s.sessions.get_mut(&from).filter(|x| x.confirmed) else {
                    self.stats.dropped += 1;
                    return None;
                };
                match sess.keys.open(data, out) {
                    Ok(n) => {
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
                        Some(n)
                    }
                    Err(d) => self.stats.count(d),
                }
            }
            _ => self.stats.count(Drop::Bad),
        }
    }

    fn server_expire(&mut self) {
        let Side::Server(s) = &mut self.side else { return };
        let now = Instant::now();
        s.sessions.retain(|_, x| {
            if x.confirmed {
                now.duration_since(x.last_seen) < SESSION_IDLE
            } else {
                now.duration_since(x.created) < HANDSHAKE_DEADLINE
            }
        });
        s.guesses.retain(|_, (t, _)| now.duration_since(*t) < Duration::from_secs(60));
        self.stats.sessions = s.sessions.len();
    }
}

fn init_packet() -> Vec<u8> {
    let mut p = vec![T_INIT, SECURE_VERSION];
    p.resize(INIT_LEN, 0);
    p
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
        loop {
            let mut raw = std::mem::take(&mut self.scratch);
            let got = self.inner.recv_from(&mut raw);
            let r = match got {
                Ok((n, from)) => {
                    self.stats.bytes_received += n as u64;
                    let opened = match self.side {
                        Side::Server(_) => self.server_packet(from, &raw[..n], buffer),
                        Side::Client(_) => self.client_packet(from, &raw[..n], buffer),
                    };
                    opened.map(|len| Some((from, enet::PacketReceived::Complete(len))))
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => Some(None),
                Err(e) if e.kind() == ErrorKind::ConnectionReset => None,
                Err(e) => {
                    self.scratch = raw;
                    return Err(e);
                }
            };
            self.scratch = raw;
            if let Some(r) = r {
                return Ok(r);
            }
        }
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
            let sec = ServerSecurity { identity: id, password: None, max_sessions: 64 };
            Harness { sock: SecureSocket::server(udp, sec).expect("socket"), out: Box::new([0; enet::MTU_MAX]) }
        }

        /// One datagram from 127.0.0.2:`10000 + port`; what ENet would receive, if anything.
        pub fn feed(&mut self, port: u8, data: &[u8]) -> Option<usize> {
            let from = SocketAddr::from(([127, 0, 0, 2], 10_000 + port as u16));
            self.sock.server_packet(from, data, &mut self.out)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn fingerprints_are_stable_and_hex_round_trips() {
        let k = [7u8; 32];
        assert_eq!(fingerprint(&k), fingerprint(&k));
        assert_ne!(fingerprint(&k), fingerprint(&[8u8; 32]));
        assert_eq!(from_hex(&to_hex(&k)).unwrap(), k.to_vec());
        assert!(from_hex("abc").is_none());
    }
}
