//! Finding servers: the status query (`protocol::status`) sent to one server, or to the
//! local network's broadcast address and this machine's usual ports.

use std::collections::BTreeMap;
use std::io;
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use crate::protocol::status::{query, query_with, read_cookie_answer, ServerStatus, QUERY_LEN};
use crate::protocol::DEFAULT_PORT;

/// Ports asked on this machine and by broadcast when none are given: the default port and
/// the nine after it (several servers on one machine).
pub fn default_ports() -> Vec<u16> {
    (DEFAULT_PORT..DEFAULT_PORT.saturating_add(10)).collect()
}

/// A server that answered.
#[derive(Clone, Debug, PartialEq)]
pub struct Found {
    /// Where it answered from, with its game port.
    pub addr: SocketAddr,
    pub status: ServerStatus,
    pub ping_ms: f64,
}

fn nonce() -> u32 {
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    (t.subsec_nanos() ^ std::process::id().rotate_left(16)) | 1
}

/// Asks one server; the answer, or an error after `timeout` (the query is sent three
/// times, in case one is lost; a busy server's cookie is sent back at once).
pub fn query_one(addr: SocketAddr, timeout: Duration) -> io::Result<Found> {
    let local: SocketAddr = if addr.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" }.parse().expect("valid");
    let socket = UdpSocket::bind(local)?;
    let n = nonce();
    let mut q = query(n);
    let start = Instant::now();
    let mut buf = [0u8; 2048];
    for attempt in 0..3u32 {
        socket.send_to(&q, addr)?;
        let until = timeout * (attempt + 1) / 3;
        while start.elapsed() < until {
            socket.set_read_timeout(Some((until - start.elapsed()).max(Duration::from_millis(1))))?;
            match socket.recv_from(&mut buf) {
                // A server with several addresses may answer from another one: the nonce
                // is what ties the answer to this query.
                Ok((len, from)) => {
                    if let Ok((got, status)) = ServerStatus::read_answer(&buf[..len]) {
                        if got == n {
                            return Ok(Found { addr, status, ping_ms: start.elapsed().as_secs_f64() * 1000.0 });
                        }
                    }
                    // Busy with unverified queries: it asks us to prove our address.
                    if let Some((got, cookie)) = read_cookie_answer(&buf[..len]) {
                        if got == n && q[6..22] == [0; 16] {
                            q = query_with(n, cookie);
                            socket.send_to(&q, from)?;
                        }
                    }
                }
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => break,
                // A closed port's ICMP error (Linux: refused; Windows: reset): try again.
                Err(e) if matches!(e.kind(), io::ErrorKind::ConnectionRefused | io::ErrorKind::ConnectionReset) => {}
                Err(e) => return Err(e),
            }
        }
    }
    Err(io::Error::new(io::ErrorKind::TimedOut, format!("no answer from {addr} within {:.1} s", timeout.as_secs_f64())))
}

/// Asks this machine (127.0.0.1) on `ports` and, with `broadcast`, the local network
/// (255.255.255.255) on the same ports, and listens for servers announcing themselves
/// (`announce`: any port); gathers answers for `wait` (an announcement comes once a
/// second: a second or more hears every server). A server on this machine answers twice
/// (loopback and the network): it is listed once, at 127.0.0.1.
/// Answers from different machines are never merged, whatever they claim (the key prefix
/// in an answer is not proof of anything).
pub fn lan(ports: &[u16], broadcast: bool, wait: Duration) -> io::Result<Vec<Found>> {
    let socket = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0))?;
    let n = nonce();
    let q = query(n);
    let mut targets: Vec<SocketAddr> = ports.iter().map(|&p| SocketAddr::from((Ipv4Addr::LOCALHOST, p))).collect();
    if broadcast {
        // A machine with no network refuses broadcast: this machine is still asked.
        if socket.set_broadcast(true).is_ok() {
            targets.extend(ports.iter().map(|&p| SocketAddr::from((Ipv4Addr::BROADCAST, p))));
        }
    }
    let start = Instant::now();
    for t in &targets {
        let _ = socket.send_to(&q, t);
    }
    // Servers on any port, as they announce themselves: each is asked as it is heard.
    let (tx, heard) = std::sync::mpsc::channel();
    let listener = std::thread::spawn(move || {
        let _ = super::announce::listen_each(wait, |addr, _| {
            let _ = tx.send(addr);
        });
    });
    let mut asked = std::collections::BTreeSet::new();
    // Answers to a server heard at the last moment get a little longer.
    let mut until = wait;
    let mut found: BTreeMap<SocketAddr, Found> = BTreeMap::new();
    let mut cookies = std::collections::BTreeSet::new();
    let mut buf = [0u8; QUERY_LEN * 2];
    while start.elapsed() < until {
        for addr in heard.try_iter() {
            let addr: SocketAddr = match addr {
                SocketAddr::V4(_) => addr,
                // This socket speaks IPv4; an IPv6 server is asked on its own.
                SocketAddr::V6(_) => {
                    let v6 = asked.iter().filter(|a: &&SocketAddr| a.is_ipv6()).count();
                    if v6 < 4 && asked.insert(addr) {
                        if let Ok(f) = query_one(addr, Duration::from_millis(150)) {
                            found.entry(addr).or_insert(f);
                        }
                    }
                    continue;
                }
            };
            if asked.insert(addr) && !targets.contains(&addr) {
                let _ = socket.send_to(&q, addr);
                until = until.max(start.elapsed() + Duration::from_millis(300));
            }
        }
        let left = until.saturating_sub(start.elapsed());
        socket.set_read_timeout(Some(left.clamp(Duration::from_millis(1), Duration::from_millis(50))))?;
        match socket.recv_from(&mut buf) {
            Ok((len, from)) => {
                if let Some((got, cookie)) = read_cookie_answer(&buf[..len]) {
                    if got == n && cookies.insert(from) {
                        let _ = socket.send_to(&query_with(n, cookie), from);
                    }
                    continue;
                }
                let Ok((got, status)) = ServerStatus::read_answer(&buf[..len]) else { continue };
                if got != n {
                    continue;
                }
                let ping_ms = start.elapsed().as_secs_f64() * 1000.0;
                let addr = SocketAddr::new(from.ip(), status.port);
                found.entry(addr).or_insert(Found { addr, status, ping_ms });
            }
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {}
            // An unreachable port on this machine answers with an ICMP error on some
            // systems (Linux: refused; Windows: reset): keep listening for the others.
            Err(e) if matches!(e.kind(), io::ErrorKind::ConnectionRefused | io::ErrorKind::ConnectionReset) => {}
            Err(e) => return Err(e),
        }
    }
    let _ = listener.join();
    // This machine's own servers, heard on loopback, are dropped from the network list.
    let local: Vec<([u8; 8], u16)> =
        found.values().filter(|f| f.addr.ip().is_loopback()).map(|f| (f.status.key, f.status.port)).collect();
    let mine = |f: &Found| local.contains(&(f.status.key, f.status.port)) && is_this_machine(f.addr.ip());
    let mut v: Vec<Found> = found.into_values().filter(|f| f.addr.ip().is_loopback() || !mine(f)).collect();
    v.sort_by(|a, b| a.status.name.cmp(&b.status.name).then(a.addr.cmp(&b.addr)));
    Ok(v)
}

/// Whether an address is one of this machine's own (the one it would use to reach the
/// network): only then may a network answer be the same server as a loopback one.
fn is_this_machine(ip: std::net::IpAddr) -> bool {
    let Ok(s) = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)) else { return false };
    s.connect((Ipv4Addr::new(10, 255, 255, 255), 9)).is_ok() && s.local_addr().is_ok_and(|a| a.ip() == ip)
}

/// One line per server, for `hailfire servers`.
pub fn describe(f: &Found) -> String {
    let s = &f.status;
    let mut notes = Vec::new();
    if s.password {
        notes.push("password".to_string());
    }
    if s.protocol != crate::protocol::PROTOCOL_VERSION {
        notes.push(format!(
            "protocol {} (this game speaks {}: cannot join)",
            s.protocol,
            crate::protocol::PROTOCOL_VERSION
        ));
    }
    if s.players >= s.max_players {
        notes.push("full".into());
    }
    format!(
        "{:<24} {:>3}/{:<3} {:<21} {:>5.0} ms{}{}",
        format!("{:?}", s.name),
        s.players,
        s.max_players,
        f.addr.to_string(),
        f.ping_ms,
        if notes.is_empty() { String::new() } else { format!("  ({})", notes.join(", ")) },
        if s.motd.is_empty() { String::new() } else { format!("  {}", s.motd) }
    )
}
