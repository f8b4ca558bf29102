//! A link conditioner: wraps any transport and makes both directions late, jittery, lossy,
//! duplicating and (through jitter) reordering. Jitter is Gaussian and drawn per packet, so
//! unreliable packets overtake each other as they do on a real congested path. Reliable channels are never lost, only
//! delayed as a retransmission would delay them, and stay in order; sequenced channels
//! drop a packet that arrives after a newer one, as ENet does. Used by tests and the bot.

use std::collections::HashMap;
use std::sync::Arc;

use super::{LinkStats, NetEvent, PeerId, Transport};
use crate::protocol::{delivery, Delivery};
use crate::sim::rng::Rng;

/// What the link does. `rtt_ms` is split evenly between the two directions.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinkProfile {
    pub rtt_ms: f32,
    /// Standard deviation of each packet's one-way delay, ms (Gaussian, per packet, cut at
    /// four deviations so a delay is never negative or absurd).
    pub jitter_ms: f32,
    /// Probability a packet is lost (unreliable: gone; reliable: resent one RTT later).
    pub loss: f32,
    /// Probability an unreliable packet arrives twice.
    pub duplicate: f32,
    /// Everything this side sends is lost (a dead uplink), while it still receives.
    pub outgoing_blackout: bool,
}

impl LinkProfile {
    pub const CLEAN: LinkProfile =
        LinkProfile { rtt_ms: 0.0, jitter_ms: 0.0, loss: 0.0, duplicate: 0.0, outgoing_blackout: false };
    /// The "bad link" of the test plan: 100 ms RTT, 20 ms jitter, 5 % loss.
    pub const BAD: LinkProfile =
        LinkProfile { rtt_ms: 100.0, jitter_ms: 20.0, loss: 0.05, duplicate: 0.01, outgoing_blackout: false };
    /// A player far from the server: 200 ms RTT, 30 ms jitter, 10 % loss, 1 % duplicates.
    pub const FAR: LinkProfile =
        LinkProfile { rtt_ms: 200.0, jitter_ms: 30.0, loss: 0.10, duplicate: 0.01, outgoing_blackout: false };

    /// `clean`, `bad`, `far`, or explicit values `RTT,JITTER,LOSS[,DUPLICATE]` such as
    /// `200ms,30ms,10%` or `150,10,2%,1%` (milliseconds; percentages or fractions).
    pub fn parse(s: &str) -> Result<LinkProfile, String> {
        match s.trim() {
            "clean" => return Ok(LinkProfile::CLEAN),
            "bad" => return Ok(LinkProfile::BAD),
            "far" => return Ok(LinkProfile::FAR),
            _ => {}
        }
        let parts: Vec<&str> = s.split(',').map(str::trim).collect();
        if !(3..=4).contains(&parts.len()) {
            return Err(format!(
                "'{s}': expected clean, bad, far or RTT,JITTER,LOSS[,DUPLICATE] such as 200ms,30ms,10%"
            ));
        }
        let ms = |v: &str, what: &str| -> Result<f32, String> {
            let n = v.strip_suffix("ms").unwrap_or(v).trim();
            match n.parse::<f32>() {
                Ok(x) if x.is_finite() && (0.0..=10_000.0).contains(&x) => Ok(x),
                _ => Err(format!("'{s}': {what} '{v}' must be milliseconds between 0 and 10000 (like 200ms)")),
            }
        };
        let frac = |v: &str, what: &str| -> Result<f32, String> {
            let (n, scale) = match v.strip_suffix('%') {
                Some(n) => (n.trim(), 100.0),
                None => (v, 1.0),
            };
            match n.parse::<f32>() {
                Ok(x) if x.is_finite() && (0.0..=1.0).contains(&(x / scale)) => Ok(x / scale),
                _ => Err(format!("'{s}': {what} '{v}' must be a percentage between 0% and 100% (like 10%)")),
            }
        };
        Ok(LinkProfile {
            rtt_ms: ms(parts[0], "the round trip")?,
            jitter_ms: ms(parts[1], "the jitter")?,
            loss: frac(parts[2], "the loss")?,
            duplicate: parts.get(3).map_or(Ok(0.0), |d| frac(d, "the duplicate rate"))?,
            outgoing_blackout: false,
        })
    }
}

impl std::fmt::Display for LinkProfile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} ms RTT, {} ms jitter, {}% loss, {}% duplicates",
            self.rtt_ms,
            self.jitter_ms,
            self.loss * 100.0,
            self.duplicate * 100.0
        )
    }
}

/// Milliseconds from some fixed start; tests drive it by hand.
pub type Clock = Arc<dyn Fn() -> f64 + Send + Sync>;

/// A wall clock starting now.
pub fn wall_clock() -> Clock {
    let start = std::time::Instant::now();
    Arc::new(move || start.elapsed().as_secs_f64() * 1000.0)
}

struct Held<T> {
    due: f64,
    order: u64,
    key: (PeerId, u8),
    seq: u64,
    item: T,
}

enum Out {
    Send(Vec<u8>),
    Disconnect,
}

/// A profile that can be changed while the link is in use (tests cut links this way).
pub type SharedProfile = Arc<std::sync::Mutex<LinkProfile>>;

pub struct Conditioner<T: Transport> {
    inner: T,
    profile: SharedProfile,
    clock: Clock,
    rng: Rng,
    outgoing: Vec<Held<Out>>,
    incoming: Vec<Held<NetEvent>>,
    last_due: HashMap<(bool, PeerId, u8), f64>,
    next_seq: HashMap<(bool, PeerId, u8), u64>,
    delivered_seq: HashMap<(bool, PeerId, u8), u64>,
    order: u64,
    scratch: Vec<NetEvent>,
    /// Packets this conditioner threw away (loss and stale sequenced arrivals).
    pub dropped: u64,
}

/// Channel number used for connect/disconnect notices: ordered after everything else.
const CONTROL_KEY: u8 = 255;

impl<T: Transport> Conditioner<T> {
    pub fn new(inner: T, profile: LinkProfile, clock: Clock, seed: u64) -> Self {
        Conditioner {
            inner,
            profile: Arc::new(std::sync::Mutex::new(profile)),
            clock,
            rng: Rng::new(seed),
            outgoing: Vec::new(),
            incoming: Vec::new(),
            last_due: HashMap::new(),
            next_seq: HashMap::new(),
            delivered_seq: HashMap::new(),
            order: 0,
            scratch: Vec::new(),
            dropped: 0,
        }
    }

    pub fn inner(&self) -> &T {
        &self.inner
    }

    /// A handle to change the link's behaviour while it runs.
    pub fn profile_handle(&self) -> SharedProfile {
        self.profile.clone()
    }

    fn profile(&self) -> LinkProfile {
        *self.profile.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A standard normal draw (Box-Muller), cut at four deviations.
    fn gaussian(&mut self) -> f64 {
        let u1 = self.rng.next_f64().max(1e-12);
        let u2 = self.rng.next_f64();
        ((-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()).clamp(-4.0, 4.0)
    }

    fn chance(&mut self, p: f32) -> bool {
        p > 0.0 && (self.rng.next_f64() as f32) < p
    }

    /// Due times for one packet: empty when lost, two when duplicated.
    fn schedule(&mut self, dir_in: bool, peer: PeerId, channel: u8, now: f64) -> Vec<f64> {
        let profile = self.profile();
        if !dir_in && profile.outgoing_blackout && channel != CONTROL_KEY {
            self.dropped += 1;
            return vec![];
        }
        let one_way = profile.rtt_ms as f64 / 2.0;
        let jitter = profile.jitter_ms as f64 * self.gaussian();
        let mut due = now + (one_way + jitter).max(0.0);
        let reliable = channel == CONTROL_KEY || delivery(channel) == Delivery::Reliable;
        if reliable {
            while self.chance(profile.loss) {
                due += profile.rtt_ms.max(1.0) as f64;
            }
            // In order: never before the previous reliable packet on this channel.
            let key = (dir_in, peer, channel);
            let last = self.last_due.get(&key).copied().unwrap_or(0.0);
            due = due.max(last);
            if channel == CONTROL_KEY {
                let latest = self.last_due.iter().filter(|((d, p, _), _)| *d == dir_in && *p == peer).map(|(_, v)| *v);
                due = latest.fold(due, f64::max);
            }
            self.last_due.insert(key, due);
            return vec![due];
        }
        if self.chance(profile.loss) {
            self.dropped += 1;
            return vec![];
        }
        if self.chance(profile.duplicate) {
            let extra = due + profile.jitter_ms as f64 * self.gaussian().abs();
            return vec![due, extra];
        }
        vec![due]
    }

    fn seq(&mut self, dir_in: bool, peer: PeerId, channel: u8) -> u64 {
        let s = self.next_seq.entry((dir_in, peer, channel)).or_insert(0);
        *s += 1;
        *s
    }

    /// A sequenced packet older than one already delivered is dropped.
    fn fresh(&mut self, dir_in: bool, key: (PeerId, u8), seq: u64) -> bool {
        if delivery(key.1) != (Delivery::Unreliable { sequenced: true }) {
            return true;
        }
        let last = self.delivered_seq.entry((dir_in, key.0, key.1)).or_insert(0);
        if seq <= *last && *last != 0 && seq != *last {
            self.dropped += 1;
            return false;
        }
        if seq == *last {
            return true; // a duplicate of the newest: let it through, as UDP would
        }
        *last = seq;
        true
    }
}

fn take_due<X>(q: &mut Vec<Held<X>>, now: f64) -> Vec<Held<X>> {
    let mut due = Vec::new();
    let mut i = 0;
    while i < q.len() {
        if q[i].due <= now {
            due.push(q.swap_remove(i));
        } else {
            i += 1;
        }
    }
    due.sort_by(|a, b| a.due.total_cmp(&b.due).then(a.order.cmp(&b.order)));
    due
}

impl<T: Transport> Transport for Conditioner<T> {
    fn send(&mut self, peer: PeerId, channel: u8, data: &[u8]) {
        let now = (self.clock)();
        let seq = self.seq(false, peer, channel);
        for due in self.schedule(false, peer, channel, now) {
            self.order += 1;
            self.outgoing.push(Held {
                due,
                order: self.order,
                key: (peer, channel),
                seq,
                item: Out::Send(data.to_vec()),
            });
        }
    }

    fn poll(&mut self, out: &mut Vec<NetEvent>) {
        let now = (self.clock)();
        for h in take_due(&mut self.outgoing, now) {
            if !self.fresh(false, h.key, h.seq) {
                continue;
            }
            match h.item {
                Out::Send(data) => self.inner.send(h.key.0, h.key.1, &data),
                Out::Disconnect => self.inner.disconnect(h.key.0),
            }
        }
        self.scratch.clear();
        let mut got = std::mem::take(&mut self.scratch);
        self.inner.poll(&mut got);
        for ev in got.drain(..) {
            let (peer, channel) = match &ev {
                NetEvent::Packet { peer, channel, .. } => (*peer, *channel),
                NetEvent::Connected(p) | NetEvent::Disconnected(p) => (*p, CONTROL_KEY),
            };
            let seq = self.seq(true, peer, channel);
            let dues = self.schedule(true, peer, channel, now);
            for due in dues {
                self.order += 1;
                self.incoming.push(Held { due, order: self.order, key: (peer, channel), seq, item: ev.clone() });
            }
        }
        self.scratch = got;
        for h in take_due(&mut self.incoming, now) {
            if h.key.1 == CONTROL_KEY || self.fresh(true, h.key, h.seq) {
                out.push(h.item);
            }
        }
    }

    fn disconnect(&mut self, peer: PeerId) {
        let now = (self.clock)();
        let due = self.schedule(false, peer, CONTROL_KEY, now).first().copied().unwrap_or(now);
        self.order += 1;
        self.outgoing.push(Held { due, order: self.order, key: (peer, CONTROL_KEY), seq: 0, item: Out::Disconnect });
    }

    fn stats(&self, peer: PeerId) -> LinkStats {
        let p = self.profile();
        let mut s = self.inner.stats(peer);
        s.rtt_ms += p.rtt_ms;
        s.loss = s.loss.max(p.loss);
        s
    }

    fn wire_totals(&self) -> Option<(u64, u64)> {
        self.inner.wire_totals()
    }

    fn failure(&mut self) -> Option<String> {
        self.inner.failure()
    }

    fn presented_key(&self) -> Option<[u8; 32]> {
        self.inner.presented_key()
    }

    fn stuck_at(&self) -> Option<&'static str> {
        self.inner.stuck_at()
    }

    fn route(&self) -> Option<&'static str> {
        self.inner.route()
    }
}
