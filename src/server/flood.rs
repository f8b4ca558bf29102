//! `hailfire bench --flood`: a real server on 127.0.0.1 with two honest players fighting
//! on it, under each attack the network layer is built to absorb, from other loopback
//! addresses (127.0.0.2 and up) over real UDP. Each run reports what the honest players
//! saw and what the server counted. The attack tests (`tests/attacks.rs`) run the same
//! scenarios and assert on the reports.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use crate::client::{Client, InputSample, Phase};
use crate::content::Content;
use crate::net::secure::{self, ClientSecurity, Identity, SecureSocket, SecureStats, ServerSecurity};
use crate::net::{EnetTransport, NetEvent, Transport};
use crate::protocol::content::ClientContent;
use crate::protocol::messages::ClientMsg;
use crate::protocol::status::ServerStatus;
use crate::protocol::{CH_CONTROL, PROTOCOL_VERSION};
use crate::server::{peer_limit, Server, ServerConfig};
use crate::sim::rng::Rng;

/// What an attack does; each runs for the scenario's length.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Attack {
    /// Nothing: the honest players alone (the baseline).
    None,
    /// Random datagrams at this many a second, from four addresses.
    Garbage { rate: u32 },
    /// One address opening as many secure sessions as it can and keeping them open.
    Sessions { tries: u32 },
    /// Half-open handshakes (valid cookies, never confirmed) from this many addresses,
    /// each within its own limits (4 in progress, 8 a second).
    HalfOpen { addresses: u32 },
    /// One session asking ENet for this many peers.
    Peers { connects: u32 },
    /// One session sending reliable commands ahead of a gap and zero-length ones.
    Memory,
    /// Status queries from this many (forged-looking) addresses, 8 a second each.
    Status { addresses: u32 },
    /// Wrong passwords through full handshakes from this many addresses.
    Passwords { addresses: u32 },
    /// Joiners that take the content offer and never answer it, from this many addresses.
    Joiners { addresses: u32, each: u32 },
}

impl Attack {
    pub fn name(&self) -> String {
        match self {
            Attack::None => "no attack".into(),
            Attack::Garbage { rate } => format!("garbage flood, {rate} datagrams/s"),
            Attack::Sessions { tries } => format!("one address opening {tries} sessions"),
            Attack::HalfOpen { addresses } => format!("half-open handshakes from {addresses} addresses"),
            Attack::Peers { connects } => format!("one session asking for {connects} ENet peers"),
            Attack::Memory => "commands ahead of a gap, and empty ones".into(),
            Attack::Status { addresses } => format!("status queries from {addresses} addresses"),
            Attack::Passwords { addresses } => format!("password guesses from {addresses} addresses"),
            Attack::Joiners { addresses, each } => format!("{} joiners parked in the download", addresses * each),
        }
    }
}

/// Every scenario, the baseline first.
pub fn all(rate: u32) -> Vec<Attack> {
    vec![
        Attack::None,
        Attack::Garbage { rate },
        Attack::Sessions { tries: 12 },
        Attack::HalfOpen { addresses: 150 },
        Attack::Peers { connects: 17 },
        Attack::Memory,
        Attack::Status { addresses: 128 },
        Attack::Passwords { addresses: 40 },
        Attack::Joiners { addresses: 4, each: 4 },
    ]
}

/// One honest player's run.
#[derive(Clone, Debug, Default)]
pub struct Honest {
    pub joined: bool,
    /// Still playing when the attack ended.
    pub playing_at_end: bool,
    /// Snapshots received while the attack ran.
    pub snapshots: u64,
    pub resyncs: u32,
    pub failure: Option<String>,
}

/// What one scenario showed.
#[derive(Clone, Debug, Default)]
pub struct Report {
    pub attack: String,
    pub secs: f64,
    pub honest: Vec<Honest>,
    pub net: SecureStats,
    pub joins_refused_busy: u64,
    /// Players and joiners on the server at the end (honest ones included).
    pub players_at_end: usize,
    pub joining_at_end: usize,
    pub max_tick_ms: f64,
    /// The server thread's CPU time over the run, as a share of one core.
    pub server_cpu: f64,
    pub rss_start_kb: u64,
    pub rss_peak_kb: u64,
    /// What the attack itself counted (sent, answered, sessions it got...).
    pub attacker: Vec<(String, u64)>,
    /// Attack-specific findings in words.
    pub notes: Vec<String>,
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "{} ({:.0} s):", self.attack, self.secs)?;
        for (i, h) in self.honest.iter().enumerate() {
            writeln!(
                f,
                "  honest bot {}: {}, {} snapshots, {} resyncs{}",
                i + 1,
                if h.playing_at_end {
                    "played throughout"
                } else if h.joined {
                    "joined, then lost"
                } else {
                    "never joined"
                },
                h.snapshots,
                h.resyncs,
                h.failure.as_ref().map(|w| format!(" ({w})")).unwrap_or_default()
            )?;
        }
        let a: Vec<String> = self.attacker.iter().map(|(k, v)| format!("{k} {v}")).collect();
        writeln!(f, "  attacker: {}", a.join(", "))?;
        writeln!(
            f,
            "  server: {} player(s), {} joining at the end; sessions {}, handshakes {}; max tick {:.1} ms; server thread {:.0} % of a core; RSS {} -> peak {} KiB; joins refused busy {}",
            self.players_at_end,
            self.joining_at_end,
            self.net.sessions,
            self.net.half_open,
            self.max_tick_ms,
            self.server_cpu * 100.0,
            self.rss_start_kb,
            self.rss_peak_kb,
            self.joins_refused_busy
        )?;
        write!(f, "  dropped: {}", self.net.drops())?;
        if self.net.status_answered + self.net.status_cookies > 0 {
            write!(
                f,
                "\n  status: {} answered, {} cookies handed out",
                self.net.status_answered, self.net.status_cookies
            )?;
        }
        for n in &self.notes {
            write!(f, "\n  {n}")?;
        }
        Ok(())
    }
}

fn rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1).and_then(|v| v.parse::<u64>().ok()))
        .map_or(0, |pages| pages * 4)
}

fn thread_cpu() -> Duration {
    #[cfg(unix)]
    {
        let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
        Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
    }
    #[cfg(not(unix))]
    Duration::ZERO
}

/// The password of the scenarios that use one.
const PASSWORD: &str = "correct horse";

struct ServerEnd {
    net: SecureStats,
    busy: u64,
    players: usize,
    joining: usize,
    max_tick_ms: f64,
    cpu: f64,
}

/// The server on its own thread, ticking at 60 Hz and draining its socket between ticks.
fn start_server(
    content: &Content,
    password: bool,
    stop: Arc<AtomicBool>,
) -> anyhow::Result<(SocketAddr, std::thread::JoinHandle<ServerEnd>)> {
    let (tx, rx) = mpsc::channel();
    let content = content.clone();
    let handle = std::thread::Builder::new().name("flood-server".into()).spawn(move || {
        let board: secure::StatusBoard = Arc::new(std::sync::Mutex::new(ServerStatus {
            protocol: PROTOCOL_VERSION,
            max_players: 8,
            name: "flood bench".into(),
            ..Default::default()
        }));
        let sec = ServerSecurity {
            password: password.then(|| PASSWORD.to_string()),
            status: Some(board.clone()),
            ..ServerSecurity::new(Identity::generate().expect("key pair"))
        };
        let net = match EnetTransport::listen_secure("127.0.0.1:0".parse().expect("valid"), peer_limit(8), sec) {
            Ok(n) => n,
            Err(e) => {
                let _ = tx.send(Err(e));
                return ServerEnd {
                    net: SecureStats::default(),
                    busy: 0,
                    players: 0,
                    joining: 0,
                    max_tick_ms: 0.0,
                    cpu: 0.0,
                };
            }
        };
        let _ = tx.send(Ok(net.local_addr().expect("bound")));
        let mut s = Server::new(&content, net, ServerConfig { max_players: 8, ..Default::default() });
        let period = Duration::from_secs_f64(1.0 / crate::sim::TICK_RATE as f64);
        let (start, cpu0) = (Instant::now(), thread_cpu());
        let mut next = start;
        let mut max_tick = Duration::ZERO;
        while !stop.load(Ordering::Relaxed) {
            let t = Instant::now();
            s.tick();
            max_tick = max_tick.max(t.elapsed());
            if let Ok(mut b) = board.lock() {
                b.players = s.connected_players() as u16;
                b.joining = s.joining() as u16;
            }
            next += period;
            if next > Instant::now() {
                s.net.wait(next);
            } else {
                next = Instant::now();
            }
        }
        let cpu = (thread_cpu() - cpu0).as_secs_f64() / start.elapsed().as_secs_f64().max(1e-3);
        ServerEnd {
            net: s.net.security_stats(),
            busy: s.stats.refused_busy,
            players: s.connected_players(),
            joining: s.joining(),
            max_tick_ms: max_tick.as_secs_f64() * 1000.0,
            cpu,
        }
    })?;
    let addr = rx.recv()??;
    Ok((addr, handle))
}

fn open_security(password: Option<&str>) -> ClientSecurity {
    ClientSecurity {
        known: None,
        accept_new_key: false,
        accept_key: None,
        password: password.map(str::to_string),
        pin_as: None,
        identity: None,
        relay_code: None,
    }
}

/// The `k`th attacker address: 127.0.`1 + k / 250`.`2 + k % 250`.
pub fn attacker_ip(k: u32) -> Ipv4Addr {
    Ipv4Addr::new(127, 0, (1 + k / 250) as u8, (2 + k % 250) as u8)
}

type Counters = Vec<(String, Arc<AtomicU64>)>;

fn counter(list: &mut Counters, name: &str) -> Arc<AtomicU64> {
    let c = Arc::new(AtomicU64::new(0));
    list.push((name.to_string(), c.clone()));
    c
}

/// Runs one scenario: the server, the attack, and 1.5 s into it two honest bots that join
/// and fight; the attack goes on for `secs` seconds once they have joined.
pub fn run(content: &Content, attack: Attack, secs: f64) -> anyhow::Result<Report> {
    let password = matches!(attack, Attack::Passwords { .. });
    let stop_server = Arc::new(AtomicBool::new(false));
    let (addr, server) = start_server(content, password, stop_server.clone())?;
    let rss_start = rss_kb();
    let stop = Arc::new(AtomicBool::new(false));
    let mut counters: Counters = Vec::new();
    let notes: Arc<std::sync::Mutex<Vec<String>>> = Default::default();
    let attacker = {
        let (stop, content) = (stop.clone(), content.clone());
        let c: Vec<Arc<AtomicU64>> = match attack {
            Attack::None => vec![],
            Attack::Garbage { .. } => vec![counter(&mut counters, "sent")],
            Attack::Sessions { .. } => {
                vec![counter(&mut counters, "connected"), counter(&mut counters, "told busy")]
            }
            Attack::HalfOpen { .. } => vec![counter(&mut counters, "hellos"), counter(&mut counters, "welcomes")],
            Attack::Peers { .. } => {
                vec![counter(&mut counters, "connects sent"), counter(&mut counters, "peers verified")]
            }
            Attack::Memory => vec![counter(&mut counters, "commands sent"), counter(&mut counters, "peers verified")],
            Attack::Status { .. } => vec![counter(&mut counters, "queries"), counter(&mut counters, "answers")],
            Attack::Passwords { .. } => vec![counter(&mut counters, "guesses"), counter(&mut counters, "refused")],
            Attack::Joiners { .. } => vec![counter(&mut counters, "parked"), counter(&mut counters, "told busy")],
        };
        let notes = notes.clone();
        std::thread::Builder::new().name("flood-attacker".into()).spawn(move || {
            if let Err(e) = attack_loop(attack, addr, &content, &stop, &c, &notes) {
                notes.lock().expect("notes").push(format!("the attack stopped early: {e:#}"));
            }
        })?
    };
    // The honest players (with the right password where there is one) join once the
    // attack is under way.
    if attack != Attack::None {
        std::thread::sleep(Duration::from_millis(1500));
    }
    let mut bots: Vec<Client<EnetTransport>> = (0..2)
        .map(|i| {
            let net = EnetTransport::connect_secure(addr, open_security(password.then_some(PASSWORD)))?;
            Ok(Client::new(net, &format!("honest-{}", i + 1), Some(ClientContent::of(content))))
        })
        .collect::<std::io::Result<_>>()?;
    let start = Instant::now();
    let mut joined_at = None;
    let mut peak = rss_start;
    let mut honest = vec![Honest::default(); bots.len()];
    let mut snaps0 = vec![0u64; bots.len()];
    let mut probe: Option<std::thread::JoinHandle<String>> = None;
    let mut probed = false;
    loop {
        let now_ms = start.elapsed().as_secs_f64() * 1000.0;
        for (i, b) in bots.iter_mut().enumerate() {
            let t = now_ms / 1000.0 + i as f64;
            let mv = crate::sim::math::Vec2::new(t.sin() as f32, (t * 0.7).cos() as f32);
            b.update(now_ms, InputSample { mv, aim: t as f32, buttons: 1 });
            if b.is_joined() && !honest[i].joined {
                honest[i].joined = true;
                snaps0[i] = b.stats.snapshots;
            }
        }
        if joined_at.is_none() && bots.iter().all(|b| b.is_joined()) {
            joined_at = Some(Instant::now());
        }
        peak = peak.max(rss_kb());
        // A real status query, made once mid-attack (on its own thread: it waits).
        if let (Attack::Status { .. }, Some(t), false) = (attack, joined_at, probed) {
            if t.elapsed().as_secs_f64() > secs / 2.0 {
                probed = true;
                probe = Some(std::thread::spawn(move || {
                    let q = Instant::now();
                    match crate::net::discovery::query_one(addr, Duration::from_secs(3)) {
                        Ok(f) => format!(
                            "a real status query was answered in {:.0} ms ({} player(s))",
                            q.elapsed().as_secs_f64() * 1000.0,
                            f.status.players
                        ),
                        Err(e) => format!("a real status query failed: {e}"),
                    }
                }));
            }
        }
        let failed = bots.iter().all(|b| matches!(b.phase, Phase::Failed(_)));
        let done = joined_at.is_some_and(|t| t.elapsed().as_secs_f64() >= secs);
        if done || failed || start.elapsed().as_secs_f64() > secs + 20.0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(8));
    }
    stop.store(true, Ordering::Relaxed);
    let _ = attacker.join();
    for (i, b) in bots.iter().enumerate() {
        honest[i].playing_at_end = b.is_joined();
        honest[i].snapshots = b.stats.snapshots - snaps0[i];
        honest[i].resyncs = b.stats.resyncs;
        if let Phase::Failed(w) = &b.phase {
            honest[i].failure = Some(w.clone());
        }
    }
    stop_server.store(true, Ordering::Relaxed);
    let end = server.join().map_err(|_| anyhow::anyhow!("the server thread panicked"))?;
    let mut notes = std::mem::take(&mut *notes.lock().expect("notes"));
    notes.extend(probe.and_then(|p| p.join().ok()));
    Ok(Report {
        attack: attack.name(),
        secs,
        honest,
        net: end.net,
        joins_refused_busy: end.busy,
        players_at_end: end.players,
        joining_at_end: end.joining,
        max_tick_ms: end.max_tick_ms,
        server_cpu: end.cpu,
        rss_start_kb: rss_start,
        rss_peak_kb: peak,
        attacker: counters.iter().map(|(k, v)| (k.clone(), v.load(Ordering::Relaxed))).collect(),
        notes,
    })
}

fn bind(ip: Ipv4Addr) -> anyhow::Result<UdpSocket> {
    let s = UdpSocket::bind(SocketAddr::new(IpAddr::V4(ip), 0))?;
    s.set_nonblocking(true)?;
    Ok(s)
}

fn attack_loop(
    attack: Attack,
    to: SocketAddr,
    content: &Content,
    stop: &AtomicBool,
    c: &[Arc<AtomicU64>],
    notes: &std::sync::Mutex<Vec<String>>,
) -> anyhow::Result<()> {
    let mut rng = Rng::new(0xF100D);
    let add = |i: usize, n: u64| {
        c[i].fetch_add(n, Ordering::Relaxed);
    };
    match attack {
        Attack::None => {
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        Attack::Garbage { rate } => {
            let socks: Vec<UdpSocket> = (0..4).map(|k| bind(attacker_ip(k))).collect::<anyhow::Result<_>>()?;
            let start = Instant::now();
            let mut sent = 0u64;
            let mut buf = vec![0u8; 1400];
            while !stop.load(Ordering::Relaxed) {
                let due = (start.elapsed().as_secs_f64() * rate as f64) as u64;
                while sent < due {
                    let n = 1 + (rng.next_u64() % 1200) as usize;
                    for b in buf[..n].iter_mut() {
                        *b = rng.next_u64() as u8;
                    }
                    let _ = socks[(sent % 4) as usize].send_to(&buf[..n], to);
                    sent += 1;
                }
                add(0, 0);
                c[0].store(sent, Ordering::Relaxed);
                std::thread::sleep(Duration::from_micros(500));
            }
        }
        Attack::Sessions { tries } => {
            let local = SocketAddr::new(IpAddr::V4(attacker_ip(1)), 0);
            let mut held: Vec<EnetTransport> = Vec::new();
            let mut evs = Vec::new();
            let mut last_try = Instant::now() - Duration::from_secs(1);
            let mut opened = 0;
            let mut connected = std::collections::BTreeSet::new();
            while !stop.load(Ordering::Relaxed) {
                // One new session every 150 ms (under the handshake rate limit).
                if opened < tries && last_try.elapsed() > Duration::from_millis(150) {
                    held.push(EnetTransport::connect_from(local, to, open_security(None))?);
                    opened += 1;
                    last_try = Instant::now();
                }
                for (i, t) in held.iter_mut().enumerate() {
                    evs.clear();
                    t.poll(&mut evs);
                    if evs.iter().any(|e| matches!(e, NetEvent::Connected(_))) && connected.insert(i) {
                        add(0, 1);
                    }
                    if let Some(w) = t.failure() {
                        add(1, 1);
                        let mut n = notes.lock().expect("notes");
                        if n.len() < 3 {
                            n.push(format!("an extra session was told: {w}"));
                        }
                    }
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        Attack::HalfOpen { addresses } => {
            let socks: Vec<UdpSocket> =
                (0..addresses).map(|k| bind(attacker_ip(10 + k))).collect::<anyhow::Result<_>>()?;
            let mut cookies: Vec<Option<[u8; 16]>> = vec![None; socks.len()];
            let mut init = vec![secure::T_INIT, secure::SECURE_VERSION];
            init.resize(secure::INIT_LEN, 0);
            let start = Instant::now();
            let mut buf = [0u8; 512];
            let mut rounds = 0u64;
            while !stop.load(Ordering::Relaxed) {
                for (k, s) in socks.iter().enumerate() {
                    while let Ok((n, _)) = s.recv_from(&mut buf) {
                        if n == 18 && buf[0] == secure::T_COOKIE {
                            let mut c = [0u8; 16];
                            c.copy_from_slice(&buf[2..18]);
                            cookies[k] = Some(c);
                        } else if buf[0] == secure::T_WELCOME {
                            add(1, 1);
                        }
                    }
                    match cookies[k] {
                        None => {
                            let _ = s.send_to(&init, to);
                        }
                        Some(c) => {
                            // Eight a second from each address: its limit.
                            let due = (start.elapsed().as_secs_f64() * 8.0) as u64;
                            if rounds < due {
                                let mut p = vec![secure::T_HELLO, secure::SECURE_VERSION];
                                p.extend_from_slice(&c);
                                p.extend((0..32).map(|_| rng.next_u64() as u8));
                                p.resize(secure::HELLO_LEN, 0);
                                let _ = s.send_to(&p, to);
                                add(0, 1);
                            }
                        }
                    }
                }
                if cookies.iter().all(Option::is_some) {
                    let due = (start.elapsed().as_secs_f64() * 8.0) as u64;
                    if rounds < due {
                        rounds += 1;
                    }
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        Attack::Peers { .. } | Attack::Memory => {
            // A secure session of our own, through which raw ENet bytes are sent.
            let udp = bind(attacker_ip(2))?;
            let mut sock = SecureSocket::client(udp, to, open_security(None))?;
            let mut buf = [0u8; rusty_enet::MTU_MAX];
            use rusty_enet::Socket as _;
            let mut session = (0u16, 0u8);
            let mut verified = false;
            let mut peers = std::collections::BTreeSet::new();
            let start = Instant::now();
            let connect = |id: u32| {
                let mut d = vec![0x8F, 0xFF, 0, 0, 0x80 | 2, 0xFF, 0, 1, 0, 0, 0xFF, 0xFF];
                for v in [1392u32, 65536, crate::protocol::CHANNEL_COUNT as u32, 0, 0, 5000, 2, 2, id, 0] {
                    d.extend_from_slice(&v.to_be_bytes());
                }
                d
            };
            let mut sent_connects = 0;
            let mut seq: u16 = 2;
            let mut last = Instant::now();
            while !stop.load(Ordering::Relaxed) {
                // Drives the handshake and reads what the server's ENet says.
                while let Ok(Some((_, rusty_enet::PacketReceived::Complete(n)))) = sock.receive(&mut buf) {
                    let d = buf[..n].to_vec();
                    if d.len() < 2 {
                        continue;
                    }
                    let sent_time = if d[0] & 0x80 != 0 && d.len() >= 4 { [d[2], d[3]] } else { [0, 0] };
                    let mut at = if d[0] & 0x80 != 0 { 4 } else { 2 };
                    while at + 4 <= d.len() {
                        let kind = d[at] & 0x0F;
                        if kind == 3 && at + 44 <= d.len() {
                            session = (u16::from_be_bytes([d[at + 4], d[at + 5]]), d[at + 6]);
                            if peers.insert(session.0) {
                                add(1, 1);
                            }
                            verified = true;
                            // Acknowledge it: the server's peer is then connected.
                            let peer = session.0 | ((session.1 as u16 & 3) << 12) | 0x8000;
                            let mut ack = peer.to_be_bytes().to_vec();
                            ack.extend_from_slice(&[0, 0, 1, 0xFF, d[at + 2], d[at + 3], d[at + 2], d[at + 3]]);
                            ack.extend_from_slice(&sent_time);
                            let _ = sock.send(to, &ack);
                            break;
                        }
                        at += match kind {
                            1 => 8,
                            3 => 44,
                            4 => 8,
                            5 => 4,
                            _ => break,
                        };
                    }
                }
                // Under the per-session rate limit (600 datagrams a second): 2 every 4 ms.
                let every = if attack == Attack::Memory { 4 } else { 20 };
                if start.elapsed() > Duration::from_millis(300) && last.elapsed() > Duration::from_millis(every) {
                    last = Instant::now();
                    match attack {
                        Attack::Peers { connects } if sent_connects < connects => {
                            let _ = sock.send(to, &connect(1000 + sent_connects));
                            sent_connects += 1;
                            add(0, 1);
                        }
                        Attack::Memory if !verified => {
                            let _ = sock.send(to, &connect(7));
                        }
                        Attack::Memory => {
                            // Reliable commands on the control channel ahead of a gap
                            // (number 1 never comes), 32 to a datagram, and as many
                            // zero-length unreliable ones tagged to wait for them: what
                            // ENet 0.4 would keep without bound.
                            let peer = session.0 | ((session.1 as u16 & 3) << 12) | 0x8000;
                            let mut d = peer.to_be_bytes().to_vec();
                            d.extend_from_slice(&[0, 0]);
                            for _ in 0..32 {
                                d.extend_from_slice(&[0x80 | 6, CH_CONTROL]);
                                d.extend_from_slice(&seq.to_be_bytes());
                                d.extend_from_slice(&1u16.to_be_bytes());
                                d.push(0);
                                seq = seq.wrapping_add(1).max(2);
                            }
                            let _ = sock.send(to, &d);
                            let mut z = peer.to_be_bytes().to_vec();
                            z.extend_from_slice(&[0, 0]);
                            for k in 0..32u16 {
                                z.extend_from_slice(&[7, crate::protocol::CH_INPUT]);
                                z.extend_from_slice(&(1 + seq % 4000).to_be_bytes());
                                z.extend_from_slice(&(k + seq).to_be_bytes());
                                z.extend_from_slice(&0u16.to_be_bytes());
                            }
                            let _ = sock.send(to, &z);
                            add(0, 64);
                        }
                        _ => {}
                    }
                }
                if sock.failure.is_some() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            if let (Attack::Peers { .. }, Some(w)) = (attack, sock.failure.take()) {
                notes.lock().expect("notes").push(w);
            }
        }
        Attack::Status { addresses } => {
            let socks: Vec<UdpSocket> =
                (0..addresses).map(|k| bind(attacker_ip(300 + k))).collect::<anyhow::Result<_>>()?;
            let start = Instant::now();
            let mut rounds = 0u64;
            let mut buf = [0u8; 512];
            while !stop.load(Ordering::Relaxed) {
                let due = (start.elapsed().as_secs_f64() * 8.0) as u64;
                while rounds < due {
                    for s in &socks {
                        let _ = s.send_to(&crate::protocol::status::query(rounds as u32), to);
                        add(0, 1);
                    }
                    rounds += 1;
                }
                for s in &socks {
                    while let Ok((n, _)) = s.recv_from(&mut buf) {
                        if buf[..n].first() == Some(&crate::protocol::status::T_STATUS) {
                            add(1, 1);
                        }
                    }
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        Attack::Passwords { addresses } => {
            let mut live: Vec<(EnetTransport, Instant)> = Vec::new();
            let mut k = 0u32;
            let mut evs = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                // A new guess from the next address every 10 ms (about 100 a second).
                if live.len() < 4 * addresses as usize {
                    let ip = attacker_ip(600 + k % addresses);
                    k += 1;
                    let local = SocketAddr::new(IpAddr::V4(ip), 0);
                    let guess = format!("guess {k}");
                    live.push((EnetTransport::connect_from(local, to, open_security(Some(&guess)))?, Instant::now()));
                    add(0, 1);
                }
                live.retain_mut(|(t, born)| {
                    evs.clear();
                    t.poll(&mut evs);
                    match t.failure() {
                        Some(w) => {
                            if w.ends_with("wrong password") {
                                add(1, 1);
                            }
                            false
                        }
                        None => born.elapsed() < Duration::from_secs(10),
                    }
                });
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        Attack::Joiners { addresses, each } => {
            let other = crate::protocol::content::ContentDigest([0xEE; 32]);
            let mut js: Vec<(EnetTransport, bool)> = Vec::new();
            for a in 0..addresses {
                for _ in 0..each {
                    let local = SocketAddr::new(IpAddr::V4(attacker_ip(900 + a)), 0);
                    js.push((EnetTransport::connect_from(local, to, open_security(None))?, false));
                }
            }
            let _ = content;
            let mut evs = Vec::new();
            let mut counted = std::collections::BTreeSet::new();
            while !stop.load(Ordering::Relaxed) {
                for (i, (t, greeted)) in js.iter_mut().enumerate() {
                    evs.clear();
                    t.poll(&mut evs);
                    for e in &evs {
                        match e {
                            NetEvent::Connected(p) if !*greeted => {
                                *greeted = true;
                                let hello = ClientMsg::Hello {
                                    version: PROTOCOL_VERSION,
                                    content: other,
                                    name: "parked".into(),
                                };
                                t.send(*p, CH_CONTROL, &hello.encode());
                            }
                            NetEvent::Packet { data, .. } if counted.insert(i) => {
                                match crate::protocol::messages::ServerMsg::decode(data) {
                                    Ok(crate::protocol::messages::ServerMsg::ContentOffer { .. }) => add(0, 1),
                                    Ok(crate::protocol::messages::ServerMsg::Reject(_)) => add(1, 1),
                                    _ => {
                                        counted.remove(&i);
                                    }
                                }
                            }
                            _ => {}
                        }
                    }
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
    Ok(())
}
