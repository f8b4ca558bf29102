//! A deterministic client+server stepper: the real server and real clients in one process
//! over the in-process transport (optionally through the link conditioner), advanced one
//! 60 Hz tick at a time on a hand-driven clock. Most netcode tests are written against it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::client::{Client, InputSample};
use crate::content::Content;
use crate::net::conditioner::{Clock, SharedProfile};
use crate::net::{Conditioner, LinkProfile, LocalListener, Transport};
use crate::protocol::content::{ClientContent, ContentCache};
use crate::server::{Server, ServerConfig};
use crate::sim::TICK_RATE;

pub type DynClient = Client<Box<dyn Transport>>;

pub struct Stepper {
    pub server: Server<Box<dyn Transport>>,
    pub clients: Vec<DynClient>,
    pub content: Content,
    listener: LocalListener,
    now_bits: Arc<AtomicU64>,
    pub ticks: u64,
}

impl Stepper {
    pub fn new(content: Content, config: ServerConfig) -> Self {
        let listener = LocalListener::new();
        let net: Box<dyn Transport> = Box::new(listener.server());
        let server = Server::new(&content, net, config);
        Stepper {
            server,
            clients: Vec::new(),
            content,
            listener,
            now_bits: Arc::new(AtomicU64::new(0f64.to_bits())),
            ticks: 0,
        }
    }

    pub fn now_ms(&self) -> f64 {
        f64::from_bits(self.now_bits.load(Ordering::Relaxed))
    }

    pub fn clock(&self) -> Clock {
        let bits = self.now_bits.clone();
        Arc::new(move || f64::from_bits(bits.load(Ordering::Relaxed)))
    }

    /// Adds a client over the in-process pipe, through a conditioner unless the link is clean.
    pub fn add_client(&mut self, name: &str, link: LinkProfile) -> usize {
        let pipe = self.listener.connect();
        let net: Box<dyn Transport> = if link == LinkProfile::CLEAN {
            Box::new(pipe)
        } else {
            Box::new(Conditioner::new(pipe, link, self.clock(), 99 + self.clients.len() as u64))
        };
        self.clients.push(Client::new(net, name, Some(ClientContent::of(&self.content))));
        self.clients.len() - 1
    }

    /// Adds a client over a clean pipe that has `installed` content of its own (None: no
    /// content at all), not the server's: it must take the server's at join, from `cache`
    /// if that holds it.
    pub fn add_client_with_content(
        &mut self,
        name: &str,
        installed: Option<ClientContent>,
        cache: Option<ContentCache>,
    ) -> usize {
        let net: Box<dyn Transport> = Box::new(self.listener.connect());
        self.clients.push(Client::new(net, name, installed).with_cache(cache));
        self.clients.len() - 1
    }

    /// Adds a spectator of the player called `target`, over a clean pipe.
    pub fn add_watcher(&mut self, name: &str, target: &str) -> usize {
        let net: Box<dyn Transport> = Box::new(self.listener.connect());
        self.clients.push(Client::watching(net, name, Some(ClientContent::of(&self.content)), target));
        self.clients.len() - 1
    }

    /// Adds a client whose link can be changed while it runs (to cut it, say).
    pub fn add_client_with_handle(&mut self, name: &str, link: LinkProfile) -> (usize, SharedProfile) {
        let c = Conditioner::new(self.listener.connect(), link, self.clock(), 99 + self.clients.len() as u64);
        let handle = c.profile_handle();
        self.clients.push(Client::new(Box::new(c), name, Some(ClientContent::of(&self.content))));
        (self.clients.len() - 1, handle)
    }

    /// One tick: every client samples and sends first, then the server ticks (the order a
    /// listen server uses, so input sampled this frame is consumed this frame).
    pub fn step(&mut self, mut input: impl FnMut(usize, &DynClient) -> InputSample) {
        self.ticks += 1;
        let now = self.ticks as f64 * 1000.0 / TICK_RATE as f64;
        self.now_bits.store(now.to_bits(), Ordering::Relaxed);
        for (i, c) in self.clients.iter_mut().enumerate() {
            let s = input(i, c);
            c.update(now, s);
        }
        self.server.tick();
    }

    /// Steps until `done` holds (true) or `max` ticks pass (false).
    pub fn run_until(
        &mut self,
        max: u32,
        mut input: impl FnMut(usize, &DynClient) -> InputSample,
        mut done: impl FnMut(&Stepper) -> bool,
    ) -> bool {
        for _ in 0..max {
            self.step(&mut input);
            if done(self) {
                return true;
            }
        }
        false
    }
}
