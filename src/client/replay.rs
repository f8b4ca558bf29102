//! Replays: what a client received, recorded so that the same client code can play it
//! again, bit for bit, without the server.
//!
//! A recording starts at the server's `Welcome` and keeps, for every client tick
//! (`Client::update`), the clock the client was given, the round trip its transport
//! reported, the player's input, and every packet that arrived: exactly what decides the
//! client's state. Playing it back feeds those to a fresh [`Client`](super::Client) over a
//! [`ReplayTransport`], so the replica, the snapshots and the predicted ship come out as
//! they were. Every [`KEYFRAME_EVERY`] ticks the recording also stores a keyframe: the
//! replica's tick and a SHA-256 of every live bullet, which `hailfire replay --check`
//! compares against its own re-simulation, and from which a player seeks (the states
//! are rebuilt when the file is opened; each is checked against its hash on the way).
//!
//! File layout (`.hfr`, format 1; integers little-endian, `var` LEB128, `str` u8 length +
//! UTF-8): `"HFR" u8 format, u16 protocol, u8 flags (bit 0: recorded as a spectator),
//! str name, u64 unix seconds at the start, [u8; 32] content digest, var content length,
//! the client-side content (its wire encoding), var body length, var packed length, the
//! body deflated (raw DEFLATE)`. The body: `var frames, frames x (u64 f64-bits now_ms,
//! u32 f32-bits rtt_ms, f32 move x, f32 move y, f32 aim, u8 buttons, var packets, packets
//! x (u8 channel, var length, bytes)), var keyframes, keyframes x (var frame, u32 tick,
//! var bullets, [u8; 32] hash)`. `docs/REPLAYS.md` has the whole layout and the
//! versioning rules.

use std::sync::Arc;

use sha2::{Digest as _, Sha256};

use super::{InputSample, Replica};
use crate::net::{LinkStats, NetEvent, PeerId, Transport};
use crate::protocol::content::{ClientContent, ContentDigest};
use crate::protocol::wire::{DecodeError, Reader, Writer};
use crate::sim::Vec2;

const MAGIC: &[u8; 3] = b"HFR";
/// The replay file format this game writes and reads.
pub const FORMAT: u8 = 1;
/// Ticks between keyframes (5 s).
pub const KEYFRAME_EVERY: u32 = 300;
/// Largest recorded body (before compression): a recording stops there (about 10 hours of
/// a busy fight), and a file claiming more is refused before anything is inflated.
pub const MAX_BODY: usize = 192 << 20;
/// Largest replay file this game opens, bytes: whatever it records (a body that did not
/// compress at all, the content, the header).
pub const MAX_FILE: usize = MAX_BODY + crate::protocol::content::MAX_CONTENT_BYTES + (64 << 10);
/// What a replay may cost in memory once read, bytes: each packet and frame is charged
/// its size and its bookkeeping, so a file of many tiny packets (which deflate to almost
/// nothing) cannot blow up.
pub const MAX_MEMORY: usize = 2 * MAX_BODY;
const PACKET_COST: usize = 48;
const FRAME_COST: usize = 64;
/// Most ticks in one recording (10 hours at 60 Hz).
pub const MAX_FRAMES: usize = 60 * 60 * 60 * 10;
/// Most packets one tick may hold, and the largest packet (ENet's limit).
pub const MAX_PACKETS_PER_FRAME: usize = 4096;
pub const MAX_PACKET: usize = 1 << 20;

/// One client tick as recorded.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Frame {
    /// The clock the client was given, ms.
    pub now_ms: f64,
    /// The round trip the transport reported after reading the network, ms.
    pub rtt_ms: f32,
    pub input: InputSample,
    /// What arrived: (channel, bytes).
    pub packets: Vec<(u8, Vec<u8>)>,
}

/// The replica as it stood after a tick: its server tick and a digest of every bullet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Keyframe {
    /// The index of the frame after which it was taken.
    pub frame: u32,
    pub tick: u32,
    pub bullets: u32,
    pub hash: [u8; 32],
}

impl Keyframe {
    /// The replica's state after frame `frame`: its tick, and a SHA-256 over every live
    /// bullet in uid order (position, velocity, size, life, kind, team, motion), so two
    /// replicas agree on it only when they agree bit for bit.
    pub fn of(frame: u32, replica: Option<&Replica>) -> Keyframe {
        let Some(r) = replica else { return Keyframe { frame, ..Default::default() } };
        let p = &r.pool;
        let mut live: Vec<usize> = (0..p.len()).filter(|&i| p.life[i] > 0).collect();
        live.sort_unstable_by_key(|&i| p.uid[i]);
        let mut h = Sha256::new();
        h.update(r.tick.to_le_bytes());
        for &i in &live {
            h.update(p.uid[i].to_le_bytes());
            for v in [p.x[i], p.y[i], p.vx[i], p.vy[i], p.radius[i], p.accel[i], p.max_speed[i]] {
                h.update(v.to_bits().to_le_bytes());
            }
            for v in [p.turn_cos[i], p.turn_sin[i]] {
                h.update(v.to_bits().to_le_bytes());
            }
            h.update(p.life[i].to_le_bytes());
            h.update(p.kind[i].to_le_bytes());
            h.update([p.team[i] as u8]);
        }
        Keyframe { frame, tick: r.tick, bullets: live.len() as u32, hash: h.finalize().into() }
    }
}

/// A whole recording.
#[derive(Clone, Debug)]
pub struct Replay {
    /// The protocol the recorded messages are in.
    pub protocol: u16,
    /// Recorded by a spectator (played back as one).
    pub spectator: bool,
    /// The recording player's name.
    pub name: String,
    /// When the recording started, Unix seconds.
    pub started: u64,
    /// The game content the server sent (or the game had): the replay plays without it.
    pub content: ClientContent,
    pub frames: Vec<Frame>,
    pub keyframes: Vec<Keyframe>,
}

/// Why a replay file cannot be played, in words for the player.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ReplayError {
    #[error("this is not a Hailfire replay (it does not start with the replay header)")]
    NotAReplay,
    #[error("this replay is format {0}; this game reads format {FORMAT} (a newer Hailfire wrote it: update the game)")]
    NewerFormat(u8),
    #[error("this replay was recorded with protocol {0}; this game plays protocol {1} (a newer Hailfire recorded it: update the game)")]
    NewerProtocol(u16, u16),
    #[error("this replay was recorded with protocol {0}; this game plays protocol {1} only (it was recorded by an older Hailfire)")]
    OlderProtocol(u16, u16),
    #[error("this replay is {0} bytes; this game opens at most {MAX_FILE}")]
    TooLarge(usize),
    #[error("this replay is truncated or damaged ({0})")]
    Damaged(String),
    #[error("this replay's game content is refused: {0}")]
    Content(String),
}

impl From<DecodeError> for ReplayError {
    fn from(e: DecodeError) -> Self {
        ReplayError::Damaged(e.to_string())
    }
}

fn f32w(w: &mut Writer, v: f32) {
    w.u32(v.to_bits());
}

fn f32r(r: &mut Reader) -> Result<f32, DecodeError> {
    Ok(f32::from_bits(r.u32()?))
}

impl Replay {
    /// How long it plays, seconds.
    pub fn seconds(&self) -> f64 {
        self.frames.len() as f64 / crate::sim::TICK_RATE as f64
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut body = Writer::new();
        body.var(self.frames.len() as u64);
        for f in &self.frames {
            // The clock exactly as the client had it (the deflate takes its redundancy).
            body.u64(f.now_ms.to_bits());
            f32w(&mut body, f.rtt_ms);
            f32w(&mut body, f.input.mv.x);
            f32w(&mut body, f.input.mv.y);
            f32w(&mut body, f.input.aim);
            body.u8(f.input.buttons);
            body.var(f.packets.len() as u64);
            for (ch, data) in &f.packets {
                body.u8(*ch);
                body.var(data.len() as u64);
                body.bytes(data);
            }
        }
        body.var(self.keyframes.len() as u64);
        for k in &self.keyframes {
            body.var(k.frame as u64);
            body.u32(k.tick);
            body.var(k.bullets as u64);
            body.bytes(&k.hash);
        }
        let packed = miniz_oxide::deflate::compress_to_vec(&body.buf, 6);
        let mut w = Writer::new();
        w.bytes(MAGIC);
        w.u8(FORMAT);
        w.u16(self.protocol);
        w.u8(self.spectator as u8);
        w.str(&self.name);
        w.u64(self.started);
        w.bytes(&self.content.digest.0);
        w.var(self.content.encoded.len() as u64);
        w.bytes(&self.content.encoded);
        w.var(body.buf.len() as u64);
        w.var(packed.len() as u64);
        w.bytes(&packed);
        w.buf
    }

    /// Reads a replay, refusing anything this game cannot play faithfully: another
    /// format or protocol, a damaged or truncated file, content the game would refuse
    /// from a server. Every count and size is checked before it is allocated.
    pub fn decode(bytes: &[u8]) -> Result<Replay, ReplayError> {
        if bytes.len() > MAX_FILE {
            return Err(ReplayError::TooLarge(bytes.len()));
        }
        if bytes.len() < 4 || &bytes[..3] != MAGIC {
            return Err(ReplayError::NotAReplay);
        }
        let mut r = Reader::new(&bytes[3..]);
        let format = r.u8()?;
        if format != FORMAT {
            return Err(if format > FORMAT {
                ReplayError::NewerFormat(format)
            } else {
                ReplayError::Damaged(format!("unknown format {format}"))
            });
        }
        let protocol = r.u16()?;
        let ours = crate::protocol::PROTOCOL_VERSION;
        if protocol > ours {
            return Err(ReplayError::NewerProtocol(protocol, ours));
        }
        if protocol < ours {
            return Err(ReplayError::OlderProtocol(protocol, ours));
        }
        let spectator = r.u8()? & 1 == 1;
        let name = r.str(64, "name")?;
        let started = r.u64()?;
        let digest = ContentDigest(r.array()?);
        let n = r.count(crate::protocol::content::MAX_CONTENT_BYTES, 1, "content")?;
        let content = ClientContent::decode(r.bytes(n)?).map_err(|e| ReplayError::Content(e.to_string()))?;
        if content.digest != digest {
            return Err(ReplayError::Damaged("its content does not match its digest".into()));
        }
        let raw_len = r.var()? as usize;
        if raw_len > MAX_BODY {
            return Err(ReplayError::Damaged(format!("it claims {raw_len} bytes of recording; at most {MAX_BODY}")));
        }
        let packed_len = r.count(MAX_FILE, 1, "body")?;
        let packed = r.bytes(packed_len)?;
        r.finish()?;
        let body = miniz_oxide::inflate::decompress_to_vec_with_limit(packed, raw_len)
            .map_err(|_| ReplayError::Damaged("its recording does not inflate to the size it claims".into()))?;
        if body.len() != raw_len {
            return Err(ReplayError::Damaged("its recording is shorter than it claims".into()));
        }
        let mut r = Reader::new(&body);
        // A frame is at least 26 bytes: the count is checked against what is there.
        let nf = r.count(MAX_FRAMES, 26, "frames")?;
        let mut frames = Vec::with_capacity(nf);
        let mut memory = 0usize;
        for _ in 0..nf {
            let now = f64::from_bits(r.u64()?);
            if !now.is_finite() {
                return Err(ReplayError::Damaged("a tick's clock is not a number".into()));
            }
            let rtt_ms = f32r(&mut r)?;
            let mv = Vec2::new(f32r(&mut r)?, f32r(&mut r)?);
            let aim = f32r(&mut r)?;
            let buttons = r.u8()?;
            if ![rtt_ms, mv.x, mv.y, aim].iter().all(|v| v.is_finite()) {
                return Err(ReplayError::Damaged("a tick's input or round trip is not a number".into()));
            }
            let np = r.count(MAX_PACKETS_PER_FRAME, 3, "packets")?;
            memory += FRAME_COST + np * PACKET_COST;
            let mut packets = Vec::with_capacity(np);
            for _ in 0..np {
                let ch = r.u8()?;
                let len = r.count(MAX_PACKET, 1, "packet")?;
                if len == 0 {
                    return Err(ReplayError::Damaged("it holds an empty packet".into()));
                }
                memory += len;
                if memory > MAX_MEMORY {
                    return Err(ReplayError::Damaged(format!(
                        "it would take more than {} MiB of memory to play",
                        MAX_MEMORY >> 20
                    )));
                }
                packets.push((ch, r.bytes(len)?.to_vec()));
            }
            frames.push(Frame { now_ms: now, rtt_ms, input: InputSample { mv, aim, buttons }, packets });
        }
        let nk = r.count(nf + 1, 38, "keyframes")?;
        let mut keyframes = Vec::with_capacity(nk);
        for _ in 0..nk {
            let frame = r.var_u32("keyframe")?;
            let k = Keyframe { frame, tick: r.u32()?, bullets: r.var_u32("bullets")?, hash: r.array()? };
            if frame as usize >= nf || keyframes.last().is_some_and(|p: &Keyframe| p.frame >= frame) {
                return Err(ReplayError::Damaged("its keyframes are out of order".into()));
            }
            keyframes.push(k);
        }
        r.finish()?;
        Ok(Replay { protocol, spectator, name, started, content, frames, keyframes })
    }
}

/// Records a client's session (see the module docs). Bounded: past [`MAX_BODY`] bytes
/// or [`MAX_FRAMES`] ticks it stops recording and says so.
#[derive(Clone, Debug, Default)]
pub struct Recorder {
    /// The Welcome has arrived: ticks are kept from the one it came in.
    pub started: bool,
    pub spectator: bool,
    pending: Option<Frame>,
    pub frames: Vec<Frame>,
    pub keyframes: Vec<Keyframe>,
    bytes: usize,
    /// Stopped at the size limit.
    pub full: bool,
    started_unix: u64,
    /// The content as the session began (a live update later arrives in the packets).
    pub content: Option<ClientContent>,
    /// Where it stops, bytes of recorded data ([`MAX_BODY`]; smaller in tests).
    pub max_bytes: usize,
}

impl Recorder {
    pub fn new(spectator: bool) -> Recorder {
        let started_unix =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        Recorder { spectator, started_unix, max_bytes: MAX_BODY, ..Default::default() }
    }

    /// A client tick begins (before the network is read).
    pub fn begin(&mut self, now_ms: f64, input: InputSample) {
        if let Some(f) = self.pending.take() {
            if self.started && !self.full {
                self.bytes += 30 + f.packets.iter().map(|(_, d)| d.len() + 4).sum::<usize>();
                let memory = self.frames.len() * FRAME_COST + self.bytes * 2;
                if self.bytes > self.max_bytes.min(MAX_BODY) || self.frames.len() >= MAX_FRAMES || memory > MAX_MEMORY {
                    self.full = true;
                    tracing::warn!("the recording reached its size limit and stopped");
                } else {
                    self.frames.push(f);
                }
            }
        }
        self.pending = Some(Frame { now_ms, rtt_ms: 0.0, input, packets: Vec::new() });
    }

    /// The round trip the transport reported after it was read.
    pub fn rtt(&mut self, rtt_ms: f32) {
        if let Some(f) = self.pending.as_mut() {
            f.rtt_ms = rtt_ms;
        }
    }

    /// A packet arrived; `welcome` says it was the server's Welcome (recording starts).
    pub fn packet(&mut self, channel: u8, data: &[u8], welcome: bool) {
        self.started |= welcome;
        if let (true, Some(f)) = (self.started, self.pending.as_mut()) {
            if f.packets.len() < MAX_PACKETS_PER_FRAME && data.len() <= MAX_PACKET {
                f.packets.push((channel, data.to_vec()));
            }
        }
    }

    /// The tick is over: a keyframe every [`KEYFRAME_EVERY`] recorded ticks.
    pub fn end(&mut self, replica: Option<&Replica>, content: Option<&ClientContent>) {
        if !self.started || self.full || self.pending.is_none() {
            return;
        }
        if self.content.is_none() {
            self.content = content.cloned();
        }
        let index = self.frames.len() as u32;
        if index.is_multiple_of(KEYFRAME_EVERY) {
            self.keyframes.push(Keyframe::of(index, replica));
        }
    }

    /// The recording, with the content the session began with (else `content`) and the
    /// player's name; the recorder is empty afterwards. A tick in progress is kept when there is room; a keyframe
    /// never names a tick that is not there.
    pub fn finish(&mut self, content: &ClientContent, name: &str) -> Replay {
        self.begin(0.0, InputSample::default());
        self.pending = None;
        let n = self.frames.len();
        self.keyframes.retain(|k| (k.frame as usize) < n);
        Replay {
            protocol: crate::protocol::PROTOCOL_VERSION,
            spectator: self.spectator,
            name: name.chars().take(24).collect(),
            started: self.started_unix,
            content: self.content.clone().unwrap_or_else(|| content.clone()),
            // Taken, not copied: a long recording is not held twice (it is finished once).
            frames: std::mem::take(&mut self.frames),
            keyframes: std::mem::take(&mut self.keyframes),
        }
    }
}

/// Plays recorded ticks into a client: the transport a replayed client runs over. The
/// player sets the tick to deliver ([`ReplayTransport::at`]) before each update; what the
/// client sends is dropped.
#[derive(Clone)]
pub struct ReplayTransport {
    replay: Arc<Replay>,
    /// The tick whose packets the next poll delivers, and whether it has.
    frame: usize,
    delivered: bool,
    connected: bool,
}

impl ReplayTransport {
    pub fn new(replay: Arc<Replay>) -> Self {
        ReplayTransport { replay, frame: 0, delivered: false, connected: false }
    }

    /// The next poll delivers tick `frame`.
    pub fn at(&mut self, frame: usize) {
        self.frame = frame;
        self.delivered = false;
    }
}

impl Transport for ReplayTransport {
    fn send(&mut self, _peer: PeerId, _channel: u8, _data: &[u8]) {}

    fn poll(&mut self, out: &mut Vec<NetEvent>) {
        if !self.connected {
            self.connected = true;
            out.push(NetEvent::Connected(0));
        }
        if self.delivered {
            return;
        }
        self.delivered = true;
        if let Some(f) = self.replay.frames.get(self.frame) {
            for (ch, data) in &f.packets {
                out.push(NetEvent::Packet { peer: 0, channel: *ch, data: data.clone() });
            }
        }
    }

    fn disconnect(&mut self, _peer: PeerId) {}

    fn stats(&self, _peer: PeerId) -> LinkStats {
        let rtt_ms = self.replay.frames.get(self.frame).map_or(0.0, |f| f.rtt_ms);
        LinkStats { rtt_ms, ..Default::default() }
    }
}

/// Plays a replay through the normal client: one recorded tick per [`Player::step`],
/// seeking by re-simulating from the nearest keyframe.
pub struct Player {
    pub replay: Arc<Replay>,
    pub client: super::Client<ReplayTransport>,
    /// The next tick to play (0: nothing played yet).
    pub frame: usize,
    /// The client as it stood at keyframes, built as the replay plays (each checked
    /// against its keyframe's hash first), by frame.
    checkpoints: Vec<(usize, super::Client<ReplayTransport>)>,
    /// Keyframes whose hash the re-simulation did not match: (frame, what it had).
    pub mismatches: Vec<(u32, Keyframe)>,
    pub checked: usize,
}

/// Checkpoints kept at most (every keyframe up to this; then every other one, and so on).
const MAX_CHECKPOINTS: usize = 240;

impl Player {
    pub fn new(replay: Arc<Replay>) -> Player {
        let client = Self::fresh(&replay);
        Player { replay, client, frame: 0, checkpoints: Vec::new(), mismatches: Vec::new(), checked: 0 }
    }

    /// A client ready to play `replay` from its start.
    pub fn fresh(replay: &Arc<Replay>) -> super::Client<ReplayTransport> {
        let t = ReplayTransport::new(replay.clone());
        let content = Some(replay.content.clone());
        if replay.spectator {
            super::Client::watching(t, &replay.name, content, "")
        } else {
            super::Client::new(t, &replay.name, content)
        }
    }

    pub fn len(&self) -> usize {
        self.replay.frames.len()
    }

    pub fn is_empty(&self) -> bool {
        self.replay.frames.is_empty()
    }

    pub fn at_end(&self) -> bool {
        self.frame >= self.len()
    }

    /// Seconds played.
    pub fn seconds(&self) -> f64 {
        self.frame as f64 / crate::sim::TICK_RATE as f64
    }

    /// Plays the next recorded tick; false at the end.
    pub fn step(&mut self) -> bool {
        let Some(f) = self.replay.frames.get(self.frame) else { return false };
        let (now, input) = (f.now_ms, f.input);
        self.client.net.at(self.frame);
        self.client.update(now, input);
        let index = self.frame as u32;
        self.frame += 1;
        // A keyframe for this tick: check the replica against it, keep the state.
        if let Ok(k) = self.replay.keyframes.binary_search_by_key(&index, |k| k.frame) {
            let want = self.replay.keyframes[k];
            let got = Keyframe::of(index, self.client.view.as_ref().map(|v| &v.replica));
            self.checked += 1;
            if got != want {
                if self.mismatches.len() < 64 {
                    self.mismatches.push((index, got));
                }
            } else if self.checkpoints.last().is_none_or(|(f, _)| *f < self.frame) {
                self.checkpoints.push((self.frame, self.client.clone()));
                if self.checkpoints.len() > MAX_CHECKPOINTS {
                    // Thin out: keep every other one (seeking re-simulates a little more).
                    let mut keep = false;
                    self.checkpoints.retain(|_| {
                        keep = !keep;
                        keep
                    });
                }
            }
        }
        true
    }

    /// Goes to tick `frame` (clamped): from the nearest checkpoint at or before it (the
    /// start when none), re-simulating the ticks between. Forward seeks past what has
    /// been played simply play on.
    pub fn seek(&mut self, frame: usize) {
        let frame = frame.min(self.len());
        if frame < self.frame {
            match self.checkpoints.iter().rev().find(|(f, _)| *f <= frame) {
                Some((f, c)) => {
                    self.frame = *f;
                    self.client = c.clone();
                }
                None => {
                    self.frame = 0;
                    self.client = Self::fresh(&self.replay);
                }
            }
        } else if let Some((f, c)) = self.checkpoints.iter().rev().find(|(f, _)| *f <= frame && *f > self.frame) {
            self.frame = *f;
            self.client = c.clone();
        }
        while self.frame < frame && self.step() {}
    }

    /// Plays the whole replay, checking every keyframe: Ok with (keyframes, bullets in
    /// the last keyframe), or the first tick where the re-simulation differs.
    pub fn check(&mut self) -> Result<(usize, u32), String> {
        while self.step() {}
        if let Some((frame, got)) = self.mismatches.first() {
            let want = self.replay.keyframes.iter().find(|k| k.frame == *frame).copied().unwrap_or_default();
            return Err(format!(
                "the re-simulation differs from the recording at {:.2} s (tick {}): recorded {} bullets at server tick {}, re-simulated {} at tick {}",
                *frame as f64 / crate::sim::TICK_RATE as f64,
                frame,
                want.bullets,
                want.tick,
                got.bullets,
                got.tick
            ));
        }
        if self.checked != self.replay.keyframes.len() {
            return Err(format!("only {} of {} keyframes were reached", self.checked, self.replay.keyframes.len()));
        }
        Ok((self.checked, self.replay.keyframes.last().map_or(0, |k| k.bullets)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn content() -> ClientContent {
        ClientContent::new(crate::sim::ClientDefs::default())
    }

    /// A recorder that stops at its size limit keeps a file the game opens: no keyframe
    /// names a tick it did not keep.
    #[test]
    fn a_recording_stopped_at_its_limit_still_opens() {
        // Each tick costs 37 bytes here: these stop right after a keyframe's tick (300, 600)
        // and elsewhere.
        for limit in [37 * 300 + 10, 37 * 600 + 1, 37 * 450] {
            let mut r = Recorder::new(false);
            r.max_bytes = limit;
            for t in 0..700u32 {
                r.begin(t as f64 * 16.0, InputSample::default());
                r.packet(0, &[10, 1, 2], t == 0);
                r.end(None, None);
            }
            assert!(r.full, "limit {limit}");
            let replay = r.finish(&content(), "p");
            let back = Replay::decode(&replay.encode()).expect("the stopped recording opens");
            assert!(back.keyframes.iter().all(|k| (k.frame as usize) < back.frames.len()));
            assert!(!back.keyframes.is_empty());
        }
    }
}
