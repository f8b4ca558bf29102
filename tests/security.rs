//! The secure layer under ENet, over real UDP sockets on 127.0.0.1: nothing readable on
//! the wire, tampered/replayed/truncated datagrams dropped and counted, server keys pinned
//! on first use and a changed key refused, passwords proven without being sent, and
//! honest players joining while the port is flooded.

mod common;
use common::base;

use std::cell::RefCell;
use std::net::{SocketAddr, UdpSocket};
use std::rc::Rc;
use std::time::{Duration, Instant};

use hailfire::client::{Client, InputSample, Phase};
use hailfire::content::Content;
use hailfire::net::secure::{ClientSecurity, Identity, KnownServers, ServerSecurity};
use hailfire::net::{EnetTransport, Transport};
use hailfire::protocol::content::ClientContent;
use hailfire::server::{Server, ServerConfig};

fn server(c: &Content, bind: &str, identity: Identity, password: Option<&str>) -> Server<EnetTransport> {
    let sec = ServerSecurity { password: password.map(str::to_string), ..ServerSecurity::new(identity) };
    let net = EnetTransport::listen_secure(bind.parse().unwrap(), 8, sec).unwrap();
    Server::new(c, net, ServerConfig::default())
}

fn client(c: &Content, to: SocketAddr, name: &str, sec: ClientSecurity) -> Client<Box<dyn Transport>> {
    let net: Box<dyn Transport> = Box::new(EnetTransport::connect_secure(to, sec).unwrap());
    Client::new(net, name, Some(ClientContent::of(c)))
}

fn open() -> ClientSecurity {
    ClientSecurity::trusting()
}

/// Ticks the server and the clients in real time until every client has joined or
/// failed, or `secs` pass. `extra` runs each tick (relays, floods).
fn run(s: &mut Server<EnetTransport>, clients: &mut [Client<Box<dyn Transport>>], secs: f64, mut extra: impl FnMut()) {
    let start = Instant::now();
    while start.elapsed().as_secs_f64() < secs {
        let now = start.elapsed().as_secs_f64() * 1000.0;
        for c in clients.iter_mut() {
            c.update(now, InputSample::default());
        }
        s.tick();
        extra();
        if clients.iter().all(|c| c.is_joined() || matches!(c.phase, Phase::Failed(_))) {
            break;
        }
        std::thread::sleep(Duration::from_millis(4));
    }
}

type Meddle = Box<dyn FnMut(usize, &[u8]) -> Vec<Vec<u8>>>;

/// A UDP relay between a client and a server that records every datagram and may change
/// them on the way (the man in the middle).
struct Relay {
    sock: UdpSocket,
    server: SocketAddr,
    client: Option<SocketAddr>,
    seen: Vec<Vec<u8>>,
    /// Applied to client->server datagrams: may return extra datagrams to send too.
    meddle: Meddle,
    count: usize,
}

impl Relay {
    fn new(server: SocketAddr, meddle: Meddle) -> Relay {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.set_nonblocking(true).unwrap();
        Relay { sock, server, client: None, seen: Default::default(), meddle, count: 0 }
    }
    fn addr(&self) -> SocketAddr {
        self.sock.local_addr().unwrap()
    }
    fn pump(&mut self) {
        let mut buf = [0u8; 4096];
        while let Ok((n, from)) = self.sock.recv_from(&mut buf) {
            let d = buf[..n].to_vec();
            self.seen.push(d.clone());
            if from == self.server {
                if let Some(c) = self.client {
                    let _ = self.sock.send_to(&d, c);
                }
            } else {
                self.client = Some(from);
                self.count += 1;
                for out in (self.meddle)(self.count, &d) {
                    let _ = self.sock.send_to(&out, self.server);
                }
            }
        }
    }
}

#[test]
fn the_wire_carries_nothing_readable() {
    let c = base();
    let mut s = server(&c, "127.0.0.1:0", Identity::generate().unwrap(), None);
    let relay = Rc::new(RefCell::new(Relay::new(s.net.local_addr().unwrap(), Box::new(|_, d| vec![d.to_vec()]))));
    let to = relay.borrow().addr();
    let mut cl = vec![client(&c, to, "PlaintextCanary", open())];
    let r = relay.clone();
    run(&mut s, &mut cl, 10.0, move || r.borrow_mut().pump());
    assert!(cl[0].is_joined(), "{:?}", cl[0].phase);
    // Play a little so snapshots and inputs cross too.
    let r = relay.clone();
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(1) {
        cl[0].update(start.elapsed().as_secs_f64() * 1000.0 + 10_000.0, InputSample::default());
        s.tick();
        r.borrow_mut().pump();
        std::thread::sleep(Duration::from_millis(4));
    }
    let relay = relay.borrow();
    let seen = &relay.seen;
    assert!(seen.len() > 50, "traffic was captured ({} datagrams)", seen.len());
    let canary = b"PlaintextCanary";
    for d in seen.iter() {
        assert!(!d.windows(canary.len()).any(|w| w == canary), "the player's name crossed in clear");
        assert!(!d.windows(3).any(|w| w == b"HFC"), "content crossed in clear");
    }
    assert!(s.world.player_count() == 1, "and the name did reach the server, sealed");
    assert!(s.world.instances.values().any(|i| i.players.iter().any(|p| p.name == "PlaintextCanary")));
}

#[test]
fn tampered_replayed_and_truncated_datagrams_are_dropped_and_counted() {
    let c = base();
    let mut s = server(&c, "127.0.0.1:0", Identity::generate().unwrap(), None);
    // From the 12th datagram on (past the handshake), meddle with some data datagrams (top
    // bit of byte 0 set): flip a byte, send a
    // copy again (replay), cut one short, and pass the rest through untouched.
    let meddle = Box::new(|k: usize, d: &[u8]| -> Vec<Vec<u8>> {
        if k < 12 || d[0] & 0x80 == 0 {
            return vec![d.to_vec()];
        }
        match k % 10 {
            0 => {
                let mut t = d.to_vec();
                let i = t.len() / 2;
                t[i] ^= 0x40;
                vec![t, d.to_vec()]
            }
            3 => vec![d.to_vec(), d.to_vec()],
            6 => vec![d[..d.len() - 5].to_vec(), d.to_vec()],
            _ => vec![d.to_vec()],
        }
    });
    let relay = Rc::new(RefCell::new(Relay::new(s.net.local_addr().unwrap(), meddle)));
    let to = relay.borrow().addr();
    let mut cl = vec![client(&c, to, "steady", open())];
    let r = relay.clone();
    run(&mut s, &mut cl, 10.0, move || r.borrow_mut().pump());
    assert!(cl[0].is_joined(), "{:?}", cl[0].phase);
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(2) {
        cl[0].update(start.elapsed().as_secs_f64() * 1000.0 + 10_000.0, InputSample::default());
        s.tick();
        relay.borrow_mut().pump();
        std::thread::sleep(Duration::from_millis(4));
    }
    let st = s.net.security_stats();
    assert!(st.dropped >= 5, "tampered and truncated datagrams were dropped: {st:?}");
    assert!(st.replayed >= 3, "replays were refused: {st:?}");
    assert_eq!(s.stats.malformed, 0, "none of them reached the message decoder");
    assert!(cl[0].is_joined(), "and the honest session carried on");
}

#[test]
fn a_changed_server_key_is_refused_until_accepted() {
    let c = base();
    let dir = tempfile::tempdir().unwrap();
    let known = KnownServers { path: dir.path().join("known_servers") };
    let port = UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let bind = format!("127.0.0.1:{port}");
    let to: SocketAddr = bind.parse().unwrap();
    let pinning = |accept: bool| ClientSecurity {
        known: Some(known.clone()),
        accept_new_key: accept,
        accept_key: None,
        password: None,
        pin_as: None,
        identity: None,
        relay_code: None,
    };
    {
        let mut s = server(&c, &bind, Identity::generate().unwrap(), None);
        let mut cl = vec![client(&c, to, "first", pinning(false))];
        run(&mut s, &mut cl, 10.0, || {});
        assert!(cl[0].is_joined(), "first contact pins the key: {:?}", cl[0].phase);
        cl[0].disconnect();
        s.shutdown();
    }
    assert!(std::fs::read_to_string(&known.path).unwrap().contains(&to.to_string()));
    let impostor = Identity::generate().unwrap();
    let fp = impostor.fingerprint();
    let shown = impostor.public;
    let mut s = server(&c, &bind, impostor, None);
    let mut cl = vec![client(&c, to, "second", pinning(false))];
    run(&mut s, &mut cl, 10.0, || {});
    match &cl[0].phase {
        Phase::Failed(why) => {
            assert!(why.contains("different key") && why.contains(&fp) && why.contains("--accept-new-key"), "{why}")
        }
        other => panic!("a changed key was accepted: {other:?}"),
    }
    assert_eq!(s.world.player_count(), 0);
    assert_eq!(cl[0].net.presented_key(), Some(shown), "the refused key is there to show and trust");
    // Trusting some other key than the one presented does not let this one in.
    let trust = |k: [u8; 32]| ClientSecurity { accept_key: Some(k), ..pinning(false) };
    let mut cl = vec![client(&c, to, "other", trust([9; 32]))];
    run(&mut s, &mut cl, 10.0, || {});
    assert!(matches!(&cl[0].phase, Phase::Failed(w) if w.contains("different key")), "{:?}", cl[0].phase);
    // Trusting exactly the key that was shown joins, and pins it.
    let mut cl = vec![client(&c, to, "third", trust(shown))];
    run(&mut s, &mut cl, 10.0, || {});
    assert!(cl[0].is_joined(), "accepting the new key joins: {:?}", cl[0].phase);
    let mut cl = vec![client(&c, to, "fourth", pinning(false))];
    run(&mut s, &mut cl, 10.0, || {});
    assert!(cl[0].is_joined(), "and it is pinned from now on: {:?}", cl[0].phase);
    // The bot's --accept-new-key accepts whatever key comes (an explicit operator choice).
    let mut s2 = {
        s.shutdown();
        drop(s);
        server(&c, &bind, Identity::generate().unwrap(), None)
    };
    let mut cl = vec![client(&c, to, "fifth", pinning(true))];
    run(&mut s2, &mut cl, 10.0, || {});
    assert!(cl[0].is_joined(), "{:?}", cl[0].phase);
}

#[test]
fn a_password_is_proven_never_sent_and_guesses_are_limited() {
    let c = base();
    let mut s = server(&c, "127.0.0.1:0", Identity::generate().unwrap(), Some("hunter2"));
    let to = s.net.local_addr().unwrap();
    let with = |p: Option<&str>| ClientSecurity {
        known: None,
        accept_new_key: false,
        accept_key: None,
        password: p.map(str::to_string),
        pin_as: None,
        identity: None,
        relay_code: None,
    };
    let mut cl = vec![client(&c, to, "nopass", with(None))];
    run(&mut s, &mut cl, 10.0, || {});
    assert!(matches!(&cl[0].phase, Phase::Failed(w) if w.contains("wrong password")), "{:?}", cl[0].phase);
    // The right password, through a recording relay: it never appears on the wire.
    let relay = Rc::new(RefCell::new(Relay::new(to, Box::new(|_, d| vec![d.to_vec()]))));
    let via = relay.borrow().addr();
    let mut cl = vec![client(&c, via, "friend", with(Some("hunter2")))];
    let r = relay.clone();
    run(&mut s, &mut cl, 10.0, move || r.borrow_mut().pump());
    assert!(cl[0].is_joined(), "{:?}", cl[0].phase);
    let relay = relay.borrow();
    assert!(!relay.seen.iter().any(|d| d.windows(7).any(|w| w == b"hunter2")));
    // Wrong guesses from one address: the first few are answered at once (the join without
    // a password was one), then each waits for the address's next token.
    use hailfire::net::secure::{GUESS_BURST, GUESS_REFILL};
    for k in 0..GUESS_BURST as usize - 1 {
        let mut cl = vec![client(&c, to, "guesser", with(Some(&format!("guess{k}"))))];
        let t = Instant::now();
        run(&mut s, &mut cl, 10.0, || {});
        assert!(matches!(&cl[0].phase, Phase::Failed(w) if w.contains("wrong password")), "{:?}", cl[0].phase);
        assert!(t.elapsed() < Duration::from_secs(2), "within the burst: answered at once");
    }
    let mut cl = vec![client(&c, to, "guesser", with(Some("one more")))];
    let t = Instant::now();
    run(&mut s, &mut cl, 10.0, || {});
    assert!(matches!(&cl[0].phase, Phase::Failed(w) if w.contains("wrong password")), "{:?}", cl[0].phase);
    assert!(t.elapsed() >= GUESS_REFILL / 2, "past the burst, a guess waits for a token: {:?}", t.elapsed());
    // A player at the same address with the right password is not locked out: it waits
    // for the next token (the guesser's tokens are spent), then joins.
    let mut cl = vec![client(&c, to, "late", with(Some("hunter2")))];
    let t = Instant::now();
    run(&mut s, &mut cl, 10.0, || {});
    assert!(cl[0].is_joined(), "{:?}", cl[0].phase);
    assert!(t.elapsed() >= GUESS_REFILL / 2, "it waited for a token: {:?}", t.elapsed());
    let st = s.net.security_stats();
    assert_eq!(st.refused_passwords, GUESS_BURST as u64 + 1, "{st:?}");
    assert!(st.held_guesses >= 2, "{st:?}");
}

#[test]
fn honest_players_join_while_the_port_is_flooded_and_state_stays_bounded() {
    let c = base();
    let mut s = server(&c, "127.0.0.1:0", Identity::generate().unwrap(), None);
    let to = s.net.local_addr().unwrap();
    // Plain ENet hosts hammering the port (old clients, or a slot-exhaustion tool).
    let mut plain: Vec<rusty_enet::Host<UdpSocket>> = (0..24)
        .map(|_| {
            let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
            let mut h = rusty_enet::Host::new(sock, rusty_enet::HostSettings::default()).unwrap();
            let _ = h.connect(to, 4, 0);
            h
        })
        .collect();
    // Handshake starts from many sources (they get cookies, never state), Hellos with
    // forged cookies, and random bytes.
    let junk: Vec<UdpSocket> = (0..16).map(|_| UdpSocket::bind("127.0.0.1:0").unwrap()).collect();
    let mut rng = hailfire::sim::rng::Rng::new(9);
    let mut flood = move || {
        for h in plain.iter_mut() {
            let _ = h.service();
        }
        for (k, j) in junk.iter().enumerate() {
            let mut init = vec![1u8, 1];
            init.resize(64, 0);
            let _ = j.send_to(&init, to);
            let mut hello = vec![3u8, 1];
            hello.extend((0..126).map(|_| rng.next_u64() as u8));
            let _ = j.send_to(&hello, to);
            let n = 1 + (rng.next_u64() % 1200) as usize;
            let d: Vec<u8> = (0..n).map(|_| (rng.next_u64() >> (k % 8)) as u8).collect();
            let _ = j.send_to(&d, to);
        }
    };
    let mut cl = vec![client(&c, to, "honest-1", open()), client(&c, to, "honest-2", open())];
    run(&mut s, &mut cl, 15.0, &mut flood);
    assert!(cl.iter().all(|c| c.is_joined()), "{:?}", cl.iter().map(|c| c.phase.clone()).collect::<Vec<_>>());
    for _ in 0..100 {
        flood();
        s.tick();
        std::thread::sleep(Duration::from_millis(2));
    }
    let st = s.net.security_stats();
    assert!(st.sessions <= 2, "only the honest players hold sessions: {st:?}");
    assert!(st.cookies_sent > 100 && st.dropped > 1000, "the flood was answered statelessly and dropped: {st:?}");
    assert_eq!(s.connected_players(), 2);
}

#[test]
fn status_queries_cannot_amplify_and_are_rate_limited() {
    use hailfire::protocol::status::{query, ServerStatus, MAX_ANSWERS_PER_ADDRESS, QUERY_LEN};
    let c = base();
    let board = std::sync::Arc::new(std::sync::Mutex::new(ServerStatus {
        name: "N".repeat(200),
        motd: "M".repeat(200),
        max_players: 8,
        ..Default::default()
    }));
    let sec = ServerSecurity { status: Some(board.clone()), ..ServerSecurity::new(Identity::generate().unwrap()) };
    let net = EnetTransport::listen_secure("127.0.0.1:0".parse().unwrap(), 8, sec).unwrap();
    let addr = net.local_addr().unwrap();
    let mut s = Server::new(&c, net, ServerConfig::default());
    let probe = UdpSocket::bind("127.0.0.1:0").unwrap();
    probe.set_nonblocking(true).unwrap();
    // A short and a long query (never answered), then a burst of good ones.
    probe.send_to(&query(1_000_007)[..QUERY_LEN - 1], addr).unwrap();
    let mut long = query(1_000_008);
    long.push(0);
    probe.send_to(&long, addr).unwrap();
    let burst = 100;
    let mut answers = Vec::new();
    // Two bursts a second apart: each gets exactly the per-address budget.
    for round in 0..2u32 {
        for i in 0..burst {
            probe.send_to(&query(round * 1000 + i), addr).unwrap();
        }
        let before = answers.len();
        let start = Instant::now();
        while start.elapsed() < Duration::from_millis(1100) {
            s.tick();
            let mut buf = [0u8; 2048];
            while let Ok((n, _)) = probe.recv_from(&mut buf) {
                answers.push(buf[..n].to_vec());
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(
            answers.len() - before,
            MAX_ANSWERS_PER_ADDRESS as usize,
            "round {round}: answers to a burst of {burst} from one address"
        );
    }
    for a in &answers {
        assert!(a.len() <= QUERY_LEN, "an answer of {} bytes to a query of {QUERY_LEN}", a.len());
        let (nonce, st) = ServerStatus::read_answer(a).unwrap();
        assert!(nonce % 1000 < burst, "only well-formed queries are answered (nonce {nonce})");
        assert_eq!(st.max_players, 8);
    }
}
