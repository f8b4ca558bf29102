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

use super::{LinkStats, NetEvent, PeerId, Transport};
use crate::protocol::{delivery, messages::MAX_PACKET, Delivery, CHANNEL_COUNT};

/// Per-peer timeout: a silent peer is declared gone after at most this long.
pub const PEER_TIMEOUT_MS: u32 = 5_000;

/// A UDP socket that counts every datagram byte ENet sends and receives (ENet headers,
/// acknowledgements and resends included; UDP/IP headers not). This is also the layer
/// where an encrypting wrapper will sit later: rusty_enet takes any `Socket`.
pub struct CountingSocket {
    inner: UdpSocket,
    sent: u64,
    received: u64,
}

impl enet::Socket for CountingSocket {
    type Address = SocketAddr;
    type Error = io::Error;

    fn init(&mut self, options: enet::SocketOptions) -> Result<(), io::Error> {
        enet::Socket::init(&mut self.inner, options)
    }

    fn send(&mut self, address: SocketAddr, buffer: &[u8]) -> Result<usize, io::Error> {
        let n = enet::Socket::send(&mut self.inner, address, buffer)?;
        self.sent += n as u64;
        Ok(n)
    }

    fn receive(
        &mut self,
        buffer: &mut [u8; enet::MTU_MAX],
    ) -> Result<Option<(SocketAddr, enet::PacketReceived)>, io::Error> {
        let r = enet::Socket::receive(&mut self.inner, buffer)?;
        if let Some((_, enet::PacketReceived::Complete(n))) = &r {
            self.received += *n as u64;
        }
        Ok(r)
    }
}

pub struct EnetTransport {
    host: enet::Host<CountingSocket>,
    bytes: HashMap<usize, (u64, u64)>,
}

fn settings(peers: usize) -> enet::HostSettings {
    enet::HostSettings { peer_limit: peers.max(1), channel_limit: CHANNEL_COUNT, ..Default::default() }
}

impl EnetTransport {
    fn with_socket(socket: UdpSocket, peers: usize) -> io::Result<Self> {
        let socket = CountingSocket { inner: socket, sent: 0, received: 0 };
        let mut host = enet::Host::new(socket, settings(peers)).map_err(|e| io::Error::other(format!("{e:?}")))?;
        let _ = host.set_maximum_packet_size(MAX_PACKET);
        let _ = host.set_maximum_waiting_data(4 * MAX_PACKET);
        Ok(EnetTransport { host, bytes: HashMap::new() })
    }

    /// A server listening on `bind` for up to `max_peers` connections.
    pub fn listen(bind: SocketAddr, max_peers: usize) -> io::Result<Self> {
        // A few spare slots so that a full server can still say "full" to newcomers.
        Self::with_socket(UdpSocket::bind(bind)?, max_peers + 4)
    }

    /// A client connecting to `server`; its only peer is the server.
    pub fn connect(server: SocketAddr) -> io::Result<Self> {
        // A loopback server is reached from a loopback socket; anything else from any address.
        let local: SocketAddr = match (server.ip().is_loopback(), server.is_ipv4()) {
            (true, true) => "127.0.0.1:0",
            (true, false) => "[::1]:0",
            (false, true) => "0.0.0.0:0",
            (false, false) => "[::]:0",
        }
        .parse()
        .expect("valid");
        let mut t = Self::with_socket(UdpSocket::bind(local)?, 1)?;
        let peer = t.host.connect(server, CHANNEL_COUNT, 0).map_err(|e| io::Error::other(format!("{e:?}")))?;
        peer.set_timeout(32, PEER_TIMEOUT_MS / 2, PEER_TIMEOUT_MS);
        Ok(t)
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.host.socket().inner.local_addr()
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
        loop {
            match self.host.service() {
                Ok(Some(ev)) => match ev.no_ref() {
                    enet::EventNoRef::Connect { peer, .. } => {
                        self.bytes.insert(peer.0, (0, 0));
                        if let Some(p) = self.host.get_peer_mut(peer) {
                            p.set_timeout(32, PEER_TIMEOUT_MS / 2, PEER_TIMEOUT_MS);
                        }
                        out.push(NetEvent::Connected(peer.0 as PeerId));
                    }
                    enet::EventNoRef::Disconnect { peer, .. } => out.push(NetEvent::Disconnected(peer.0 as PeerId)),
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
            p.disconnect(0);
        }
        self.host.flush();
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
        let s = self.host.socket();
        Some((s.sent, s.received))
    }
}

/// How long to sleep between polls when idle: short enough for 60 Hz input.
pub const POLL_SLEEP: Duration = Duration::from_millis(1);
