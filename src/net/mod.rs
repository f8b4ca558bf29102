//! Transports move bytes between peer ids and know nothing of the game. The channel number
//! decides delivery (`protocol::delivery`). Implementations: ENet over UDP (`enet`), an
//! in-process pipe for host-and-play and tests (`local`), a pair of them multiplexed
//! (`Multi`), and a link conditioner that wraps any transport (`conditioner`).
//!
//! A transport that wraps another (the conditioner; later, encryption under ENet) keeps
//! this same interface, so nothing above it changes.

pub mod announce;
pub mod conditioner;
pub mod discovery;
pub mod enet;
pub mod local;
pub mod portmap;
pub mod relay;
pub mod secure;

pub use conditioner::{Conditioner, LinkProfile};
pub use enet::EnetTransport;
pub use local::{LocalClient, LocalListener, LocalServer};

/// Resolves what a player types to join (default port `protocol::DEFAULT_PORT`):
/// `host`, `host:port`, `1.2.3.4[:port]`, `[2001:db8::1]:port`, `[2001:db8::1]` and a bare
/// IPv6 literal (`::1`, `2001:db8::1`); a host name may resolve to either family.
pub fn resolve(addr: &str) -> std::io::Result<std::net::SocketAddr> {
    use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
    let addr = addr.trim();
    if let Ok(a) = addr.parse::<SocketAddr>() {
        return Ok(a);
    }
    // A bare address (IPv6 ones have colons of their own), or one in brackets.
    let bare = addr.strip_prefix('[').and_then(|a| a.strip_suffix(']')).unwrap_or(addr);
    if let Ok(ip) = bare.parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, crate::protocol::DEFAULT_PORT));
    }
    let with_port = if addr.rsplit_once(':').is_some_and(|(h, p)| !h.contains(':') && p.parse::<u16>().is_ok()) {
        addr.to_string()
    } else {
        format!("{addr}:{}", crate::protocol::DEFAULT_PORT)
    };
    with_port
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::NotFound, format!("cannot resolve '{addr}'")))
}

/// A connection, as numbered by the transport that owns it.
pub type PeerId = u32;

#[derive(Debug, Clone, PartialEq)]
pub enum NetEvent {
    Connected(PeerId),
    Disconnected(PeerId),
    Packet { peer: PeerId, channel: u8, data: Vec<u8> },
}

/// What a transport knows about a link.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LinkStats {
    pub rtt_ms: f32,
    /// Fraction of packets lost, 0..1, where the transport can tell.
    pub loss: f32,
    /// Game payload bytes handed to / received from this link.
    pub bytes_sent: u64,
    pub bytes_received: u64,
}

pub trait Transport {
    /// Queues bytes for a peer; the channel decides reliability and ordering.
    fn send(&mut self, peer: PeerId, channel: u8, data: &[u8]);
    /// Sends what is queued and collects what arrived. Never blocks.
    fn poll(&mut self, out: &mut Vec<NetEvent>);
    /// Closes a connection; the other side sees `Disconnected`.
    fn disconnect(&mut self, peer: PeerId);
    fn stats(&self, peer: PeerId) -> LinkStats;
    /// Every byte this transport put on / took off the network, protocol overhead
    /// included, where it can tell (ENet: yes; in-process: there is no network).
    fn wire_totals(&self) -> Option<(u64, u64)> {
        None
    }
    /// Why the connection could not be made, in words for the player, once (the secure
    /// layer refusing a changed server key, a wrong password).
    fn failure(&mut self) -> Option<String> {
        None
    }
    /// The key the server presented in the secure handshake, if this transport has one.
    fn presented_key(&self) -> Option<[u8; 32]> {
        None
    }
    /// The network address of a peer, where there is one (not for the in-process pipe).
    fn peer_addr(&self, _peer: PeerId) -> Option<std::net::SocketAddr> {
        None
    }
    /// Where a peer reached through a relay really is, where the relay said.
    fn peer_origin(&self, _peer: PeerId) -> Option<std::net::SocketAddr> {
        None
    }
    /// The static key a peer proved in the secure handshake (the player's key), where
    /// there is one (not for the in-process pipe: that is the host).
    fn peer_key(&self, _peer: PeerId) -> Option<[u8; 32]> {
        None
    }
    /// What the secure layer under this transport counted, where there is one.
    fn security(&self) -> Option<secure::SecureStats> {
        None
    }
    /// Client: why a connection that heard the server never became a session, in words.
    fn stuck_at(&self) -> Option<&'static str> {
        None
    }
    /// Client: how its datagrams reach the server, in words ("direct", "through the
    /// relay", ...); None where there is no network (the in-process pipe).
    fn route(&self) -> Option<&'static str> {
        None
    }
    /// Idles until `until`. A transport over a socket reads it meanwhile, so a flood
    /// between two ticks empties the socket instead of overflowing its buffer.
    fn wait(&mut self, until: std::time::Instant) {
        let now = std::time::Instant::now();
        if until > now {
            std::thread::sleep(until - now);
        }
    }
}

impl<T: Transport + ?Sized> Transport for Box<T> {
    fn failure(&mut self) -> Option<String> {
        (**self).failure()
    }
    fn presented_key(&self) -> Option<[u8; 32]> {
        (**self).presented_key()
    }
    fn send(&mut self, peer: PeerId, channel: u8, data: &[u8]) {
        (**self).send(peer, channel, data)
    }
    fn poll(&mut self, out: &mut Vec<NetEvent>) {
        (**self).poll(out)
    }
    fn disconnect(&mut self, peer: PeerId) {
        (**self).disconnect(peer)
    }
    fn stats(&self, peer: PeerId) -> LinkStats {
        (**self).stats(peer)
    }
    fn wire_totals(&self) -> Option<(u64, u64)> {
        (**self).wire_totals()
    }
    fn peer_addr(&self, peer: PeerId) -> Option<std::net::SocketAddr> {
        (**self).peer_addr(peer)
    }
    fn peer_origin(&self, peer: PeerId) -> Option<std::net::SocketAddr> {
        (**self).peer_origin(peer)
    }
    fn peer_key(&self, peer: PeerId) -> Option<[u8; 32]> {
        (**self).peer_key(peer)
    }
    fn wait(&mut self, until: std::time::Instant) {
        (**self).wait(until)
    }
    fn security(&self) -> Option<secure::SecureStats> {
        (**self).security()
    }
    fn stuck_at(&self) -> Option<&'static str> {
        (**self).stuck_at()
    }
    fn route(&self) -> Option<&'static str> {
        (**self).route()
    }
}

/// Several transports behind one set of peer ids: the low two bits say which part. The
/// server listens on ENet and on an in-process pipe at once this way (host and play).
pub struct Multi {
    parts: Vec<Box<dyn Transport>>,
    scratch: Vec<NetEvent>,
}

impl Multi {
    pub fn new(parts: Vec<Box<dyn Transport>>) -> Self {
        assert!(parts.len() <= 4, "Multi holds at most four transports");
        Multi { parts, scratch: Vec::new() }
    }
    fn split(peer: PeerId) -> (usize, PeerId) {
        ((peer & 3) as usize, peer >> 2)
    }
    fn join(part: usize, peer: PeerId) -> PeerId {
        (peer << 2) | part as PeerId
    }
}

impl Transport for Multi {
    fn send(&mut self, peer: PeerId, channel: u8, data: &[u8]) {
        let (p, id) = Self::split(peer);
        if let Some(t) = self.parts.get_mut(p) {
            t.send(id, channel, data)
        }
    }
    fn poll(&mut self, out: &mut Vec<NetEvent>) {
        for (i, t) in self.parts.iter_mut().enumerate() {
            self.scratch.clear();
            t.poll(&mut self.scratch);
            out.extend(self.scratch.drain(..).map(|e| match e {
                NetEvent::Connected(p) => NetEvent::Connected(Self::join(i, p)),
                NetEvent::Disconnected(p) => NetEvent::Disconnected(Self::join(i, p)),
                NetEvent::Packet { peer, channel, data } => {
                    NetEvent::Packet { peer: Self::join(i, peer), channel, data }
                }
            }));
        }
    }
    fn disconnect(&mut self, peer: PeerId) {
        let (p, id) = Self::split(peer);
        if let Some(t) = self.parts.get_mut(p) {
            t.disconnect(id)
        }
    }
    fn stats(&self, peer: PeerId) -> LinkStats {
        let (p, id) = Self::split(peer);
        self.parts.get(p).map(|t| t.stats(id)).unwrap_or_default()
    }
    fn peer_addr(&self, peer: PeerId) -> Option<std::net::SocketAddr> {
        let (p, id) = Self::split(peer);
        self.parts.get(p).and_then(|t| t.peer_addr(id))
    }
    fn peer_origin(&self, peer: PeerId) -> Option<std::net::SocketAddr> {
        let (p, id) = Self::split(peer);
        self.parts.get(p).and_then(|t| t.peer_origin(id))
    }
    fn peer_key(&self, peer: PeerId) -> Option<[u8; 32]> {
        let (p, id) = Self::split(peer);
        self.parts.get(p).and_then(|t| t.peer_key(id))
    }
    fn security(&self) -> Option<secure::SecureStats> {
        self.parts.iter().find_map(|t| t.security())
    }
    /// Waits in short steps, letting each part read its socket.
    fn wait(&mut self, until: std::time::Instant) {
        loop {
            let now = std::time::Instant::now();
            if now >= until {
                return;
            }
            let step = (now + std::time::Duration::from_millis(1)).min(until);
            for t in self.parts.iter_mut() {
                t.wait(step);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn what_players_type_to_join_resolves_in_either_family() {
        let r = |s: &str| super::resolve(s).map(|a| a.to_string()).unwrap_or_else(|e| format!("error: {e}"));
        let d = crate::protocol::DEFAULT_PORT;
        assert_eq!(r("127.0.0.1"), format!("127.0.0.1:{d}"));
        assert_eq!(r("127.0.0.1:5000"), "127.0.0.1:5000");
        assert_eq!(r("::1"), format!("[::1]:{d}"), "a bare IPv6 literal");
        assert_eq!(r("2001:db8::7"), format!("[2001:db8::7]:{d}"));
        assert_eq!(r("[::1]"), format!("[::1]:{d}"), "in brackets, no port");
        assert_eq!(r("[::1]:5000"), "[::1]:5000");
        assert!(r(" localhost:5000 ").ends_with(":5000"), "a host name and a port");
        assert!(r("localhost").ends_with(&format!(":{d}")));
        assert!(r("no such host.invalid").starts_with("error"));
    }
}
