//! ENet over UDP (rusty_enet). Notes from `TOOLCHAIN.md` applied here:
//! - `Packet::kind()` lies on received packets, so reliability is decided by channel only;
//! - unreliable packets larger than the MTU would silently go reliable: snapshots are kept
//!   small, and unreliable channels use `AlwaysUnreliable`;
//! - the 32 MiB default packet and waiting-data limits are lowered for a game server;
//! - `service()` never blocks: callers poll it from their own loop.

use std::collections::HashMap;
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

use rusty_enet as enet;

use super::secure::{ClientSecurity, Identity, SecureSocket, SecureStats, ServerSecurity};
use super::{LinkStats, NetEvent, PeerId, Transport};
use crate::protocol::{delivery, messages::MAX_PACKET, Delivery, CHANNEL_COUNT};

/// Binds a UDP socket. `[::]:PORT` is dual-stack (IPv6, and IPv4 as IPv4-mapped
/// addresses) on every OS, not only where the system's default says so; a machine
/// without IPv6 gets `0.0.0.0:PORT` instead, with a line in the log.
pub fn bind_udp(addr: SocketAddr) -> io::Result<UdpSocket> {
    let SocketAddr::V6(v6) = addr else { return UdpSocket::bind(addr) };
    if !v6.ip().is_unspecified() {
        return UdpSocket::bind(addr);
    }
    let dual = || -> io::Result<UdpSocket> {
        let s = socket2::Socket::new(socket2::Domain::IPV6, socket2::Type::DGRAM, Some(socket2::Protocol::UDP))?;
        s.set_only_v6(false)?;
        s.bind(&addr.into())?;
        Ok(s.into())
    };
    match dual() {
        Ok(s) => Ok(s),
        Err(e) if e.kind() != io::ErrorKind::AddrInUse && e.kind() != io::ErrorKind::PermissionDenied => {
            tracing::info!("no IPv6 here ({e}): listening on IPv4 only");
            UdpSocket::bind(SocketAddr::from((std::net::Ipv4Addr::UNSPECIFIED, addr.port())))
        }
        Err(e) => Err(e),
    }
}

/// Per-peer timeout: a silent peer is declared gone after at most this long.
pub const PEER_TIMEOUT_MS: u32 = 5_000;
/// ENet peers a server keeps beyond its players and joiners.
pub const SPARE_PEERS: usize = 64;

pub struct EnetTransport {
    host: enet::Host<SecureSocket>,
    bytes: HashMap<usize, (u64, u64)>,
    /// Each connected peer's address (kept past the disconnect, to end its session).
    addrs: HashMap<usize, SocketAddr>,
}

fn settings(peers: usize) -> enet::HostSettings {
    enet::HostSettings { peer_limit: peers.max(1), channel_limit: CHANNEL_COUNT, ..Default::default() }
}

impl EnetTransport {
    fn with_socket(socket: SecureSocket, peers: usize) -> io::Result<Self> {
        let mut host = enet::Host::new(socket, settings(peers)).map_err(|e| io::Error::other(format!("{e:?}")))?;
        let _ = host.set_maximum_packet_size(MAX_PACKET);
        let _ = host.set_maximum_waiting_data(4 * MAX_PACKET);
        Ok(EnetTransport { host, bytes: HashMap::new(), addrs: HashMap::new() })
    }

    /// A server listening on `bind` for up to `max_peers` connections, with a fresh key
    /// pair and no password (tests, benchmarks).
    pub fn listen(bind: SocketAddr, max_peers: usize) -> io::Result<Self> {
        Self::listen_secure(bind, max_peers, ServerSecurity::new(Identity::generate()?))
    }

    /// A server listening on `bind` for up to `max_peers` connections (players and
    /// joiners together), proving `security`'s identity and asking its password.
    pub fn listen_secure(bind: SocketAddr, max_peers: usize, mut security: ServerSecurity) -> io::Result<Self> {
        // Spare peers for connections still greeting (at most 5 s each) or being told why
        // they cannot stay, so a full server can still say "full" and a few addresses
        // (4 connections each) cannot take every peer; one session holds one peer, and
        // sessions retire a moment after their peer.
        let peers = max_peers + SPARE_PEERS;
        if security.max_sessions == 0 {
            security.max_sessions = peers;
        }
        Self::with_socket(SecureSocket::server(bind_udp(bind)?, security)?, peers)
    }

    /// A client connecting to `server`, trusting whatever key it presents (tests).
    pub fn connect(server: SocketAddr) -> io::Result<Self> {
        Self::connect_secure(server, ClientSecurity::trusting())
    }

    /// A client connecting to `server`; its only peer is the server.
    pub fn connect_secure(server: SocketAddr, security: ClientSecurity) -> io::Result<Self> {
        // A loopback server is reached from a loopback socket; anything else from any address.
        let local: SocketAddr = match (server.ip().is_loopback(), server.is_ipv4()) {
            (true, true) => "127.0.0.1:0",
            (true, false) => "[::1]:0",
            (false, true) => "0.0.0.0:0",
            (false, false) => "[::]:0",
        }
        .parse()
        .expect("valid");
        Self::connect_from(local, server, security)
    }

    /// A client connecting to `server` from the local address `local` (tests and the
    /// attack bench use other loopback addresses, 127.0.0.2 and up).
    pub fn connect_from(local: SocketAddr, server: SocketAddr, security: ClientSecurity) -> io::Result<Self> {
        let socket = SecureSocket::client(UdpSocket::bind(local)?, server, security)?;
        let mut t = Self::with_socket(socket, 1)?;
        let peer = t.host.connect(server, CHANNEL_COUNT, 0).map_err(|e| io::Error::other(format!("{e:?}")))?;
        peer.set_timeout(32, PEER_TIMEOUT_MS / 2, PEER_TIMEOUT_MS);
        Ok(t)
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.host.socket().local_addr()
    }

    /// What the secure layer counted (drops, replays, handshakes, sessions).
    pub fn security_stats(&self) -> SecureStats {
        self.host.socket().stats.clone()
    }

    /// The key the server presented (client side).
    pub fn server_key(&self) -> Option<[u8; 32]> {
        self.host.socket().server_key()
    }
}

impl Transport for EnetTransport {
    fn send(&mut self, peer: PeerId, channel: u8, data: &[u8]) {
        let kind = match delivery(channel) {
            Delivery::Reliable => enet::PacketKind::Reliable,
            Delivery::Unreliable { sequenced } => enet::PacketKind::AlwaysUnreliable { sequenced },
        };
        if let Some(p) = self.host.get_peer_mut(enet::PeerID(peer as usize)) {
            if p.connected() && p.send(channel, &enet::Packet::new(data, kind)).is_ok() {
                self.bytes.entry(peer as usize).or_default().0 += data.len() as u64;
            }
        }
    }

    fn poll(&mut self, out: &mut Vec<NetEvent>) {
        self.host.socket_mut().begin_poll();
        loop {
            match self.host.service() {
                Ok(Some(ev)) => match ev.no_ref() {
                    enet::EventNoRef::Connect { peer, .. } => {
                        self.bytes.insert(peer.0, (0, 0));
                        if let Some(p) = self.host.get_peer_mut(peer) {
                            p.set_timeout(32, PEER_TIMEOUT_MS / 2, PEER_TIMEOUT_MS);
                            if let Some(a) = p.address() {
                                self.addrs.insert(peer.0, a);
                            }
                        }
                        out.push(NetEvent::Connected(peer.0 as PeerId));
                    }
                    enet::EventNoRef::Disconnect { peer, .. } => {
                        if let Some(a) = self.addrs.remove(&peer.0) {
                            self.host.socket_mut().retire(a);
                        }
                        out.push(NetEvent::Disconnected(peer.0 as PeerId))
                    }
                    enet::EventNoRef::Receive { peer, channel_id, packet } => {
                        if (channel_id as usize) < CHANNEL_COUNT {
                            let data = packet.data().to_vec();
                            self.bytes.entry(peer.0).or_default().1 += data.len() as u64;
                            out.push(NetEvent::Packet { peer: peer.0 as PeerId, channel: channel_id, data });
                        }
                    }
                },
                Ok(None) => break,
                // A socket error (e.g. an ICMP "unreachable" surfacing on some platforms)
                // must not take the server down; ENet's own timeouts handle lost peers.
                Err(_) => break,
            }
        }
        self.host.flush();
    }

    fn disconnect(&mut self, peer: PeerId) {
        if let Some(p) = self.host.get_peer_mut(enet::PeerID(peer as usize)) {
            // After what is queued (a Reject with its reason): `disconnect` would drop it.
            p.disconnect_later(0);
        }
        self.host.flush();
    }

    /// An IPv4 player reaching a dual-stack server (`[::]`) is shown, limited and banned
    /// by their IPv4 address, not the IPv4-mapped IPv6 one the socket sees.
    fn peer_addr(&self, peer: PeerId) -> Option<SocketAddr> {
        let a = self.host.get_peer(enet::PeerID(peer as usize)).and_then(|p| p.address())?;
        Some(SocketAddr::new(a.ip().to_canonical(), a.port()))
    }

    fn peer_origin(&self, peer: PeerId) -> Option<SocketAddr> {
        let a = self.host.get_peer(enet::PeerID(peer as usize)).and_then(|p| p.address())?;
        self.host.socket().origin(a).map(|o| SocketAddr::new(o.ip().to_canonical(), o.port()))
    }

    fn peer_key(&self, peer: PeerId) -> Option<[u8; 32]> {
        // The session is kept under the address as the socket sees it.
        let raw = self.host.get_peer(enet::PeerID(peer as usize)).and_then(|p| p.address());
        let addr = self.addrs.get(&(peer as usize)).copied().or(raw)?;
        self.host.socket().client_key(addr)
    }

    fn stats(&self, peer: PeerId) -> LinkStats {
        let (sent, recv) = self.bytes.get(&(peer as usize)).copied().unwrap_or_default();
        match self.host.get_peer(enet::PeerID(peer as usize)) {
            Some(p) => LinkStats {
                rtt_ms: p.round_trip_time().as_secs_f32() * 1000.0,
                loss: p.packet_loss() as f32 / 65536.0,
                bytes_sent: sent,
                bytes_received: recv,
            },
            None => LinkStats { bytes_sent: sent, bytes_received: recv, ..Default::default() },
        }
    }

    fn wire_totals(&self) -> Option<(u64, u64)> {
        let s = &self.host.socket().stats;
        Some((s.bytes_sent, s.bytes_received))
    }

    fn failure(&mut self) -> Option<String> {
        self.host.socket_mut().failure.take()
    }

    fn security(&self) -> Option<SecureStats> {
        Some(self.security_stats())
    }

    fn stuck_at(&self) -> Option<&'static str> {
        self.host.socket().stuck_at()
    }

    fn route(&self) -> Option<&'static str> {
        self.host.socket().route()
    }

    fn wait(&mut self, until: std::time::Instant) {
        loop {
            let now = std::time::Instant::now();
            if now >= until {
                return;
            }
            self.host.socket_mut().wait(until - now);
        }
    }

    fn presented_key(&self) -> Option<[u8; 32]> {
        self.server_key()
    }
}

/// How long to sleep between polls when idle: short enough for 60 Hz input.
pub const POLL_SLEEP: Duration = Duration::from_millis(1);
