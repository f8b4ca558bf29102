//! The in-process transport: byte queues behind a mutex. Host-and-play hands the host's
//! packets to the server this way, so the host is just another peer and no server or
//! simulation code can tell the difference. Delivery is perfect and in order; wrap it in
//! a `Conditioner` to make it lossy.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use super::{LinkStats, NetEvent, PeerId, Transport};

#[derive(Default)]
struct Pipe {
    to_server: VecDeque<(u8, Vec<u8>)>,
    to_client: VecDeque<(u8, Vec<u8>)>,
    client_closed: bool,
    server_closed: bool,
    server_bytes_out: u64,
    server_bytes_in: u64,
}

type Shared = Arc<Mutex<Pipe>>;

fn lock(p: &Shared) -> std::sync::MutexGuard<'_, Pipe> {
    p.lock().unwrap_or_else(|e| e.into_inner())
}

/// A handle clients use to connect to a `LocalServer` (cheap to clone, `Send`).
#[derive(Clone, Default)]
pub struct LocalListener {
    pending: Arc<Mutex<Vec<Shared>>>,
}

impl LocalListener {
    pub fn new() -> Self {
        Self::default()
    }
    /// Opens a connection; the server sees it on its next poll.
    pub fn connect(&self) -> LocalClient {
        let pipe: Shared = Arc::default();
        self.pending.lock().unwrap_or_else(|e| e.into_inner()).push(pipe.clone());
        LocalClient { pipe, announced: false, closed_seen: false, bytes_sent: 0, bytes_received: 0 }
    }
    pub fn server(&self) -> LocalServer {
        LocalServer { listener: self.clone(), peers: HashMap::new(), next: 1 }
    }
}

/// The server's end: every local client is a peer.
pub struct LocalServer {
    listener: LocalListener,
    peers: HashMap<PeerId, Shared>,
    next: PeerId,
}

impl Transport for LocalServer {
    fn send(&mut self, peer: PeerId, channel: u8, data: &[u8]) {
        if let Some(p) = self.peers.get(&peer) {
            let mut p = lock(p);
            if !p.server_closed && !p.client_closed {
                p.server_bytes_out += data.len() as u64;
                p.to_client.push_back((channel, data.to_vec()));
            }
        }
    }
    fn poll(&mut self, out: &mut Vec<NetEvent>) {
        let fresh: Vec<Shared> = std::mem::take(&mut *self.listener.pending.lock().unwrap_or_else(|e| e.into_inner()));
        for pipe in fresh {
            let id = self.next;
            self.next += 1;
            self.peers.insert(id, pipe);
            out.push(NetEvent::Connected(id));
        }
        let mut gone = Vec::new();
        let mut ids: Vec<PeerId> = self.peers.keys().copied().collect();
        ids.sort_unstable();
        for id in ids {
            let mut p = lock(&self.peers[&id]);
            while let Some((channel, data)) = p.to_server.pop_front() {
                p.server_bytes_in += data.len() as u64;
                out.push(NetEvent::Packet { peer: id, channel, data });
            }
            if p.client_closed {
                gone.push(id);
            }
        }
        for id in gone {
            self.peers.remove(&id);
            out.push(NetEvent::Disconnected(id));
        }
    }
    fn disconnect(&mut self, peer: PeerId) {
        if let Some(p) = self.peers.remove(&peer) {
            lock(&p).server_closed = true;
        }
    }
    fn stats(&self, peer: PeerId) -> LinkStats {
        self.peers.get(&peer).map_or(LinkStats::default(), |p| {
            let p = lock(p);
            LinkStats { rtt_ms: 0.0, loss: 0.0, bytes_sent: p.server_bytes_out, bytes_received: p.server_bytes_in }
        })
    }
}

/// A client's end. Its only peer, the server, is peer 0.
pub struct LocalClient {
    pipe: Shared,
    announced: bool,
    closed_seen: bool,
    bytes_sent: u64,
    bytes_received: u64,
}

impl Transport for LocalClient {
    fn send(&mut self, _peer: PeerId, channel: u8, data: &[u8]) {
        let mut p = lock(&self.pipe);
        if !p.client_closed && !p.server_closed {
            self.bytes_sent += data.len() as u64;
            p.to_server.push_back((channel, data.to_vec()));
        }
    }
    fn poll(&mut self, out: &mut Vec<NetEvent>) {
        if self.closed_seen {
            return;
        }
        if !self.announced {
            self.announced = true;
            out.push(NetEvent::Connected(0));
        }
        let mut p = lock(&self.pipe);
        while let Some((channel, data)) = p.to_client.pop_front() {
            self.bytes_received += data.len() as u64;
            out.push(NetEvent::Packet { peer: 0, channel, data });
        }
        if p.server_closed {
            self.closed_seen = true;
            out.push(NetEvent::Disconnected(0));
        }
    }
    fn disconnect(&mut self, _peer: PeerId) {
        lock(&self.pipe).client_closed = true;
        self.closed_seen = true;
    }
    fn stats(&self, _peer: PeerId) -> LinkStats {
        LinkStats { rtt_ms: 0.0, loss: 0.0, bytes_sent: self.bytes_sent, bytes_received: self.bytes_received }
    }
}

impl Drop for LocalClient {
    fn drop(&mut self) {
        lock(&self.pipe).client_closed = true;
    }
}
