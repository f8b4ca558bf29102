//! LAN announcements: a server on any port tells its local network it is there, so the
//! Join menu and `hailfire servers --lan` list it without knowing the port (the fixed
//! port scan stays as a fallback, for networks that drop broadcasts).
//!
//! Once a second a server sends a 17-byte datagram to UDP port `ANNOUNCE_PORT` on every
//! IPv4 interface's broadcast address, on the IPv6 all-nodes address (`ff02::1`) of each
//! IPv6 link, and on this machine's loopback (the interfaces are looked at again every
//! 30 s): `"HFan", u8 version 1, u16 game port, u16 protocol, [8] the
//! start of the server's public key` (little-endian). It says nothing a status query
//! would not, and is no larger than it must be: a listener that hears it asks the server
//! itself (the status query, with its cookie and budgets) for the name and players.
//! A server bound to a loopback address announces on loopback only.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

/// Where announcements go (`$HAILFIRE_ANNOUNCE_PORT` moves it, for tests).
pub const ANNOUNCE_PORT: u16 = 24679;
/// How often a server announces itself.
pub const EVERY: Duration = Duration::from_secs(1);
/// How often it looks again at this machine's networks.
const REFRESH: Duration = Duration::from_secs(30);
const MAGIC: &[u8; 4] = b"HFan";
const VERSION: u8 = 1;
pub const LEN: usize = 17;

pub fn port() -> u16 {
    std::env::var("HAILFIRE_ANNOUNCE_PORT").ok().and_then(|p| p.parse().ok()).unwrap_or(ANNOUNCE_PORT)
}

/// What a server announces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Announcement {
    pub port: u16,
    pub protocol: u16,
    pub key: [u8; 8],
}

impl Announcement {
    pub fn encode(&self) -> [u8; LEN] {
        let mut p = [0u8; LEN];
        p[..4].copy_from_slice(MAGIC);
        p[4] = VERSION;
        p[5..7].copy_from_slice(&self.port.to_le_bytes());
        p[7..9].copy_from_slice(&self.protocol.to_le_bytes());
        p[9..].copy_from_slice(&self.key);
        p
    }

    /// An announcement, if `data` is exactly one (anything else is ignored).
    pub fn decode(data: &[u8]) -> Option<Announcement> {
        if data.len() != LEN || &data[..4] != MAGIC || data[4] != VERSION {
            return None;
        }
        let port = u16::from_le_bytes([data[5], data[6]]);
        if port == 0 {
            return None;
        }
        let mut key = [0u8; 8];
        key.copy_from_slice(&data[9..]);
        Some(Announcement { port, protocol: u16::from_le_bytes([data[7], data[8]]), key })
    }
}

/// A server's announcer: ticked by its loop, it sends at most once per `EVERY`.
pub struct Announcer {
    v4: Option<UdpSocket>,
    v6: Option<UdpSocket>,
    targets: Vec<SocketAddr>,
    packet: [u8; LEN],
    last: Option<Instant>,
    loopback_only: bool,
    /// Where announcements go (`port()`; tests pick their own).
    to_port: u16,
    /// The IPv4 address the server is bound to (unspecified: all), and when the targets
    /// were last worked out (interfaces come and go: a laptop joins a network).
    v4_src: Ipv4Addr,
    refreshed: Instant,
}

impl Announcer {
    /// For a server listening on `bind` (its game port `port`, after binding).
    pub fn new(bind: SocketAddr, port: u16, key: [u8; 8]) -> Announcer {
        Self::to(bind, port, key, self::port())
    }

    /// [`Announcer::new`], announcing to UDP port `to_port`.
    pub fn to(bind: SocketAddr, port: u16, key: [u8; 8], to_port: u16) -> Announcer {
        let packet = Announcement { port, protocol: crate::protocol::PROTOCOL_VERSION, key }.encode();
        let loopback_only = bind.ip().to_canonical().is_loopback();
        let v4_src = match bind.ip() {
            IpAddr::V4(a) => a,
            IpAddr::V6(_) => Ipv4Addr::UNSPECIFIED,
        };
        let v4 = UdpSocket::bind((if loopback_only { Ipv4Addr::LOCALHOST } else { v4_src }, 0)).ok();
        if let Some(s) = &v4 {
            let _ = s.set_broadcast(true);
            let _ = s.set_nonblocking(true);
        }
        let v6 = (!loopback_only && bind.is_ipv6()).then(|| UdpSocket::bind((Ipv6Addr::UNSPECIFIED, 0)).ok()).flatten();
        if let Some(s) = &v6 {
            let _ = s.set_nonblocking(true);
            // Not back to this machine once per link (listeners here hear the loopback
            // announcement): it would be listed once for each.
            let _ = s.set_multicast_loop_v6(false);
        }
        let mut a = Announcer {
            v4,
            v6,
            targets: Vec::new(),
            packet,
            last: None,
            loopback_only,
            to_port,
            v4_src,
            refreshed: Instant::now(),
        };
        a.refresh_targets();
        a
    }

    fn refresh_targets(&mut self) {
        let (p, v4_src) = (self.to_port, self.v4_src);
        self.refreshed = Instant::now();
        // Loopback's broadcast address on Linux, where every listener on this machine hears
        // it (a unicast datagram reaches only one of the sockets sharing the port); the
        // loopback address elsewhere.
        let lo = if cfg!(target_os = "linux") { Ipv4Addr::new(127, 255, 255, 255) } else { Ipv4Addr::LOCALHOST };
        let mut t = vec![SocketAddr::from((lo, p))];
        if !self.loopback_only {
            for b in broadcast_addresses() {
                // A server bound to one address announces on that address's network only.
                if v4_src.is_unspecified() || b.0 == v4_src {
                    t.push(SocketAddr::from((b.1, p)));
                }
            }
            if v4_src.is_unspecified() {
                t.push(SocketAddr::from((Ipv4Addr::BROADCAST, p)));
            }
            // All nodes on each IPv6 link (one datagram with no interface named would
            // go out on one link only).
            let all_nodes = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);
            let links = ipv6_links();
            if links.is_empty() {
                t.push(SocketAddr::from((all_nodes, p)));
            }
            for index in links {
                t.push(SocketAddr::V6(std::net::SocketAddrV6::new(all_nodes, p, 0, index)));
            }
        }
        t.sort();
        t.dedup();
        self.targets = t;
    }

    /// Sends the announcement if it is due. Never blocks; errors (no network, a
    /// firewall) are ignored: the port scan still finds the server.
    pub fn tick(&mut self) {
        if self.last.is_some_and(|t| t.elapsed() < EVERY) {
            return;
        }
        if self.refreshed.elapsed() >= REFRESH {
            self.refresh_targets();
        }
        self.last = Some(Instant::now());
        for t in &self.targets {
            let s = if t.is_ipv4() { self.v4.as_ref() } else { self.v6.as_ref() };
            if let Some(s) = s {
                let _ = s.send_to(&self.packet, t);
            }
        }
    }

    pub fn targets(&self) -> &[SocketAddr] {
        &self.targets
    }
}

/// Calls `each` with every address of every interface that is up and not loopback.
#[cfg(unix)]
fn each_interface(mut each: impl FnMut(&libc::ifaddrs)) {
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `list` with a linked list we only read, then free once.
    unsafe {
        if libc::getifaddrs(&mut list) != 0 {
            return;
        }
        let mut cur = list;
        while !cur.is_null() {
            let i = &*cur;
            let flags = i.ifa_flags;
            if !i.ifa_addr.is_null() && flags & libc::IFF_UP as u32 != 0 && flags & libc::IFF_LOOPBACK as u32 == 0 {
                each(i);
            }
            cur = i.ifa_next;
        }
        libc::freeifaddrs(list);
    }
}

/// Each IPv4 interface's (address, broadcast address), loopback left out.
#[cfg(unix)]
fn broadcast_addresses() -> Vec<(Ipv4Addr, Ipv4Addr)> {
    let mut out = Vec::new();
    each_interface(|i| {
        // SAFETY: the addresses getifaddrs gave, read as the family they say they are.
        unsafe {
            if (*i.ifa_addr).sa_family as i32 != libc::AF_INET || i.ifa_flags & libc::IFF_BROADCAST as u32 == 0 {
                return;
            }
            let a = &*(i.ifa_addr as *const libc::sockaddr_in);
            let addr = Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr));
            #[cfg(any(target_os = "linux", target_os = "android"))]
            let b = i.ifa_ifu;
            #[cfg(not(any(target_os = "linux", target_os = "android")))]
            let b = i.ifa_dstaddr;
            if !b.is_null() && (*b).sa_family as i32 == libc::AF_INET {
                let b = &*(b as *const libc::sockaddr_in);
                out.push((addr, Ipv4Addr::from(u32::from_be(b.sin_addr.s_addr))));
            }
        }
    });
    out
}

#[cfg(not(unix))]
fn broadcast_addresses() -> Vec<(Ipv4Addr, Ipv4Addr)> {
    Vec::new()
}

/// The index of each interface that is up, not loopback, takes multicast and has an IPv6
/// address.
#[cfg(unix)]
fn ipv6_links() -> Vec<u32> {
    let mut out = Vec::new();
    each_interface(|i| {
        // SAFETY: the address and name getifaddrs gave.
        unsafe {
            if (*i.ifa_addr).sa_family as i32 == libc::AF_INET6 && i.ifa_flags & libc::IFF_MULTICAST as u32 != 0 {
                let index = libc::if_nametoindex(i.ifa_name);
                if index != 0 && !out.contains(&index) {
                    out.push(index);
                }
            }
        }
    });
    out
}

#[cfg(not(unix))]
fn ipv6_links() -> Vec<u32> {
    Vec::new()
}

/// Listens for announcements for `wait`: each server heard, as (its address with its game
/// port, what it announced). Several listeners on one machine each hear every broadcast
/// (the port is shared).
pub fn listen(wait: Duration) -> io::Result<Vec<(SocketAddr, Announcement)>> {
    let mut heard = Vec::new();
    listen_each(wait, |a, x| heard.push((a, x)))?;
    Ok(heard)
}

/// [`listen`], calling `each` as each new server is heard.
pub fn listen_each(wait: Duration, each: impl FnMut(SocketAddr, Announcement)) -> io::Result<()> {
    listen_on(port(), wait, each)
}

/// [`listen_each`] on UDP port `p`.
pub fn listen_on(p: u16, wait: Duration, mut each: impl FnMut(SocketAddr, Announcement)) -> io::Result<()> {
    let mut sockets = Vec::new();
    for (domain, addr) in [
        (socket2::Domain::IPV4, SocketAddr::from((Ipv4Addr::UNSPECIFIED, p))),
        (socket2::Domain::IPV6, SocketAddr::from((Ipv6Addr::UNSPECIFIED, p))),
    ] {
        let open = || -> io::Result<UdpSocket> {
            let s = socket2::Socket::new(domain, socket2::Type::DGRAM, Some(socket2::Protocol::UDP))?;
            s.set_reuse_address(true)?;
            #[cfg(all(unix, not(any(target_os = "solaris", target_os = "illumos"))))]
            s.set_reuse_port(true)?;
            if domain == socket2::Domain::IPV6 {
                s.set_only_v6(true)?;
            }
            s.bind(&addr.into())?;
            s.set_nonblocking(true)?;
            Ok(s.into())
        };
        match open() {
            Ok(s) => sockets.push(s),
            // No IPv6 here: IPv4 alone.
            Err(_) if domain == socket2::Domain::IPV6 => {}
            Err(e) => return Err(e),
        }
    }
    let start = Instant::now();
    let mut heard: Vec<SocketAddr> = Vec::new();
    let mut buf = [0u8; 64];
    while start.elapsed() < wait {
        let mut got = false;
        for s in &sockets {
            // A flood at the port must not keep this past its time.
            while start.elapsed() < wait {
                let Ok((n, from)) = s.recv_from(&mut buf) else { break };
                got = true;
                let Some(a) = Announcement::decode(&buf[..n]) else { continue };
                // The sender's address with the announced port (an IPv6 link-local one
                // keeps its interface).
                let addr = match from {
                    SocketAddr::V6(v) if v.ip().to_ipv4_mapped().is_none() => {
                        SocketAddr::V6(std::net::SocketAddrV6::new(*v.ip(), a.port, 0, v.scope_id()))
                    }
                    _ => SocketAddr::new(from.ip().to_canonical(), a.port),
                };
                // At most a few ports from one sender (a forged flood of announcements must
                // not turn listeners into a source of queries at one victim's every port).
                let from_it = heard.iter().filter(|h| h.ip() == addr.ip()).count();
                if !heard.contains(&addr) && heard.len() < 64 && from_it < 4 {
                    heard.push(addr);
                    each(addr, a);
                }
            }
        }
        if !got {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn announcements_round_trip_and_anything_else_is_ignored() {
        let a = Announcement { port: 31337, protocol: 13, key: [1, 2, 3, 4, 5, 6, 7, 8] };
        let p = a.encode();
        assert_eq!(p.len(), LEN);
        assert_eq!(Announcement::decode(&p), Some(a));
        assert_eq!(Announcement::decode(&p[..16]), None);
        let mut bad = p;
        bad[4] = 2;
        assert_eq!(Announcement::decode(&bad), None, "another version");
        let mut zero = p;
        zero[5] = 0;
        zero[6] = 0;
        assert_eq!(Announcement::decode(&zero), None, "port 0");
        assert_eq!(Announcement::decode(b"HFan\x01garbage garbage"), None);
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn every_listener_on_this_machine_hears_a_loopback_server() {
        // A port of our own (not $HAILFIRE_ANNOUNCE_PORT, which other tests may move).
        let to = UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let listeners: Vec<_> = (0..2)
            .map(|_| {
                std::thread::spawn(move || {
                    let mut heard = Vec::new();
                    listen_on(to, Duration::from_millis(1500), |a, x| heard.push((a, x))).unwrap();
                    heard
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(200));
        let mut a = Announcer::to("127.0.0.1:5001".parse().unwrap(), 5001, [9; 8], to);
        let start = Instant::now();
        while start.elapsed() < Duration::from_millis(1200) {
            a.tick();
            a.last = None;
            std::thread::sleep(Duration::from_millis(100));
        }
        for l in listeners {
            let heard = l.join().unwrap();
            assert!(
                heard.iter().any(|(addr, x)| addr.port() == 5001 && x.key == [9; 8]),
                "each listener hears it: {heard:?}"
            );
        }
    }

    #[test]
    fn a_loopback_server_announces_on_loopback_only() {
        let a = Announcer::new("127.0.0.1:5000".parse().unwrap(), 5000, [0; 8]);
        assert!(a.targets().iter().all(|t| t.ip().is_loopback()), "{:?}", a.targets());
        let a = Announcer::new("[::]:5000".parse().unwrap(), 5000, [0; 8]);
        assert!(a.targets().iter().any(|t| t.ip() == IpAddr::V4(Ipv4Addr::BROADCAST)), "{:?}", a.targets());
    }
}
