//! Every message on the wire, one enum per direction, each with its hand-written layout.
//! Integers are little-endian; `var` is an unsigned LEB128 varint, `svar` a zigzag one;
//! `str` is a u8 length and UTF-8 bytes. Byte 0 of every packet is the message type.
//!
//! Server-only simulation events (instance transfers, instance open/close, players
//! removed) have no variant here and so cannot be encoded or sent, by construction.

use super::content::{ContentDigest, CONTENT_CHUNK};
use super::wire::{DecodeError, Reader, Writer};
use crate::sim::bullets::{grid, BulletSpawn, Burst, Team};
use crate::sim::instance::{PLAYER_BULLET_LIFETIME, PLAYER_BULLET_SPEED};
use crate::sim::player::BTN_MASK;
use crate::sim::{InputFrame, Vec2};

/// Longest player name, bytes.
pub const MAX_NAME: usize = 24;
/// Frames in one `Input` message on a good link: the newest plus two redundant copies.
pub const INPUT_REDUNDANCY: usize = 3;
/// Most frames one `Input` message may carry (the client sends more copies under loss).
pub const MAX_INPUT_FRAMES: usize = 8;
/// Largest lead (ticks) an input report can express.
pub const MAX_REPORTED_NEED: u8 = 127;
/// Most entries any list in a message may claim.
pub const MAX_LIST: usize = 4096;
/// Most enemies one snapshot carries (more are left out: snapshots must fit one datagram).
pub const MAX_SNAPSHOT_ENEMIES: usize = 96;
/// Most players one snapshot carries (the receiver is never the one left out).
pub const MAX_SNAPSHOT_PLAYERS: usize = 64;
/// Bytes a snapshot's entities may take: whatever the instance holds, a snapshot fits one
/// datagram (ENet's MTU less its headers and the secure layer's).
pub const SNAPSHOT_BUDGET: usize = 1000;
/// Ticks between snapshots, as the base/ack byte counts them.
const SNAPSHOT_STEP: u32 = super::SNAPSHOT_EVERY_TICKS;
/// How far back (ticks) a delta snapshot's base may be; older acks get a full snapshot.
pub const MAX_BASE_AGE: u32 = 90;
/// Largest packet either side accepts, bytes.
pub const MAX_PACKET: usize = 64 * 1024;
/// Player position step in snapshots: 1/8 px, as u16 (0..8191 px).
pub const SNAP_POS: f32 = 8.0;

// ---------------------------------------------------------------- client -> server

/// One input frame as sent: the encoding is the validator. Move axes are i8 hundredths in
/// -100..=100 (nothing can express more than full speed, or NaN); aim is a u16 fraction
/// of a turn; buttons are the three known bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WireInput {
    pub mx: i8,
    pub my: i8,
    pub aim: u16,
    pub buttons: u8,
}

impl WireInput {
    pub fn from_frame(f: &InputFrame) -> Self {
        let q = |v: f32| if v.is_finite() { (v * 100.0).round().clamp(-100.0, 100.0) as i8 } else { 0 };
        WireInput { mx: q(f.mv.x), my: q(f.mv.y), aim: grid::angle_q(f.aim), buttons: f.buttons & BTN_MASK }
    }
    pub fn to_frame(self, tick: u32) -> InputFrame {
        InputFrame {
            tick,
            mv: Vec2::new(self.mx as f32 / 100.0, self.my as f32 / 100.0),
            aim: self.aim as f32 / grid::ANGLE,
            buttons: self.buttons,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum ClientMsg {
    /// Type 1, channel CONTROL, reliable. The first message a client sends; legal once.
    /// `u8 type, u16 version, [u8; 32] content digest, str name (1..=24 bytes)`.
    /// `version` comes first so any future layout can still be told "wrong version". The
    /// digest is of the client-side content the client has installed (all zero: none).
    Hello { version: u16, content: ContentDigest, name: String },
    /// Type 7, CONTROL, in place of `Hello`: join as a spectator of the player called
    /// `target` (any case). The same layout as `Hello`, then `str target (1..=24 bytes)`.
    /// A spectator has no body and never sends `Input`: after `Welcome` (whose player id
    /// is the watched player's) it only receives that player's instance, following them.
    Watch { version: u16, content: ContentDigest, name: String, target: String },
    /// Type 3, CONTROL. Answer to `ContentOffer` when the client has no copy: "send it".
    /// `u8 type`.
    ContentWant,
    /// Type 4, CONTROL. The client holds and has validated the offered content (from its
    /// cache or from the chunks just received): let it in. `u8 type, [u8; 32] digest`.
    ContentReady { digest: ContentDigest },
    /// Type 2, channel INPUT, unreliable sequenced. Legal after `Welcome`, every tick.
    /// `u8 type, u8 n (1..=8), u32 newest_tick, var snap_ack, u8 lead, u8 view, n x (i8 mx,
    /// i8 my, u16 aim, u8 buttons)`, newest first; frame k is for tick `newest_tick - k`.
    /// `snap_ack` is the newest snapshot the client holds (0 none, else
    /// zigzag(newest_tick - its tick) + 1): the server sends deltas against it. `lead` is
    /// how far ahead of its estimate of the server's tick the client numbered
    /// `newest_tick` (for the input report). `view` is how far behind its bullets the
    /// client draws enemies and the boss, in quarter ticks (lag compensation; the server
    /// clamps it to `LAG_COMP_MAX_TICKS`). 24 bytes with 3 frames.
    Input { newest_tick: u32, snap_ack: Option<u32>, lead: u8, view: u8, frames: Vec<WireInput> },
    /// Type 5, CONTROL. A console command from an operator (a player whose key is in the
    /// server's ops.toml; the password may then be empty) or a player who knows the
    /// server's admin password (`admin_password` in server.toml). Only ever sent inside the
    /// encrypted session, so the password is not exposed on the way; the server answers
    /// with `Notice`s and cuts off a player who guesses wrong three times.
    /// `u8 type, str password (0..=64 bytes), str command (1..=200 bytes)`.
    Admin { password: String, command: String },
    /// Type 6, CONTROL, in the hub: fly this ship (an index into the content's ships by
    /// id). The server checks only that it exists: unlocking by stars is the player's
    /// own record (co-op has nobody to cheat against). `u8 type, var ship`.
    ChooseShip { ship: u16 },
}

pub const T_HELLO: u8 = 1;
pub const T_WATCH: u8 = 7;
pub const T_ADMIN: u8 = 5;
pub const T_CHOOSE_SHIP: u8 = 6;
/// Longest admin password and console command a client may send, in bytes.
pub const MAX_ADMIN_PASSWORD: usize = 64;
pub const MAX_COMMAND: usize = 200;
pub const T_INPUT: u8 = 2;
pub const T_CONTENT_WANT: u8 = 3;
pub const T_CONTENT_READY: u8 = 4;

impl ClientMsg {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::new();
        match self {
            ClientMsg::Hello { version, content, name } => {
                w.u8(T_HELLO);
                w.u16(*version);
                w.bytes(&content.0);
                w.str(name);
            }
            ClientMsg::Watch { version, content, name, target } => {
                w.u8(T_WATCH);
                w.u16(*version);
                w.bytes(&content.0);
                w.str(name);
                w.str(target);
            }
            ClientMsg::ContentWant => w.u8(T_CONTENT_WANT),
            ClientMsg::ContentReady { digest } => {
                w.u8(T_CONTENT_READY);
                w.bytes(&digest.0);
            }
            ClientMsg::Input { newest_tick, snap_ack, lead, view, frames } => {
                w.u8(T_INPUT);
                w.u8(frames.len().min(MAX_INPUT_FRAMES) as u8);
                w.u32(*newest_tick);
                match snap_ack {
                    None => w.var(0),
                    Some(s) => {
                        let d = newest_tick.wrapping_sub(*s) as i32 as i64;
                        w.var(((d << 1) ^ (d >> 63)) as u64 + 1);
                    }
                }
                w.u8(*lead);
                w.u8(*view);
                for f in frames.iter().take(MAX_INPUT_FRAMES) {
                    w.i8(f.mx);
                    w.i8(f.my);
                    w.u16(f.aim);
                    w.u8(f.buttons);
                }
            }
            ClientMsg::ChooseShip { ship } => {
                w.u8(T_CHOOSE_SHIP);
                w.var(*ship as u64);
            }
            ClientMsg::Admin { password, command } => {
                w.u8(T_ADMIN);
                w.str(&crate::protocol::names::clip(password, MAX_ADMIN_PASSWORD));
                w.str(&crate::protocol::names::clip(command, MAX_COMMAND));
            }
        }
        w.buf
    }

    /// The version a Hello claims, read before anything else in it.
    pub fn hello_version(data: &[u8]) -> Option<u16> {
        let mut r = Reader::new(data);
        matches!(r.u8().ok()?, T_HELLO | T_WATCH).then(|| r.u16().ok()).flatten()
    }

    pub fn decode(data: &[u8]) -> Result<ClientMsg, DecodeError> {
        if data.len() > MAX_PACKET {
            return Err(DecodeError::TooLarge(data.len()));
        }
        let mut r = Reader::new(data);
        let msg = match r.u8()? {
            T_HELLO => {
                let version = r.u16()?;
                let content = ContentDigest(r.array()?);
                let name = r.str(MAX_NAME, "name")?;
                if name.trim().is_empty() {
                    return Err(DecodeError::BadValue("name"));
                }
                ClientMsg::Hello { version, content, name }
            }
            T_WATCH => {
                let version = r.u16()?;
                let content = ContentDigest(r.array()?);
                let name = r.str(MAX_NAME, "name")?;
                let target = r.str(MAX_NAME, "target")?;
                if name.trim().is_empty() || target.trim().is_empty() {
                    return Err(DecodeError::BadValue("name"));
                }
                ClientMsg::Watch { version, content, name, target }
            }
            T_CONTENT_WANT => ClientMsg::ContentWant,
            T_CONTENT_READY => ClientMsg::ContentReady { digest: ContentDigest(r.array()?) },
            T_INPUT => {
                let n = r.u8()? as usize;
                if !(1..=MAX_INPUT_FRAMES).contains(&n) {
                    return Err(DecodeError::BadValue("input count"));
                }
                let newest_tick = r.u32()?;
                let snap_ack = match r.var()? {
                    0 => None,
                    v if v > (1u64 << 32) => return Err(DecodeError::BadValue("snapshot ack")),
                    v => {
                        let z = v - 1;
                        let d = ((z >> 1) as i64) ^ -((z & 1) as i64);
                        Some(newest_tick.wrapping_sub(d as i32 as u32))
                    }
                };
                let lead = r.u8()?;
                let view = r.u8()?;
                let mut frames = Vec::with_capacity(n);
                for _ in 0..n {
                    let (mx, my, aim, buttons) = (r.i8()?, r.i8()?, r.u16()?, r.u8()?);
                    if !(-100..=100).contains(&mx) || !(-100..=100).contains(&my) {
                        return Err(DecodeError::BadValue("move axis"));
                    }
                    if buttons & !BTN_MASK != 0 {
                        return Err(DecodeError::BadValue("buttons"));
                    }
                    frames.push(WireInput { mx, my, aim, buttons });
                }
                ClientMsg::Input { newest_tick, snap_ack, lead, view, frames }
            }
            T_ADMIN => {
                let password = r.str(MAX_ADMIN_PASSWORD, "admin password")?;
                let command = r.str(MAX_COMMAND, "command")?;
                // An empty password: an operator, known by their key.
                if command.trim().is_empty() {
                    return Err(DecodeError::BadValue("command"));
                }
                ClientMsg::Admin { password, command }
            }
            T_CHOOSE_SHIP => {
                ClientMsg::ChooseShip { ship: u16::try_from(r.var()?).map_err(|_| DecodeError::BadValue("ship"))? }
            }
            t => return Err(DecodeError::UnknownType(t)),
        };
        r.finish()?;
        Ok(msg)
    }
}

// ---------------------------------------------------------------- server -> client

/// Why a server refused a client, shown to the player.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RejectReason {
    VersionMismatch {
        server: u16,
        client: u16,
    },
    /// The client did not take the server's content in time (or answered out of turn).
    ContentTimeout,
    ServerFull {
        max: u16,
    },
    BadHello,
    Kicked {
        reason: String,
    },
    TooManyMalformed,
    Banned {
        reason: String,
    },
    /// Too many players are joining at once (all of them, or from one address).
    Busy,
}

impl std::fmt::Display for RejectReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RejectReason::VersionMismatch { server, client } => {
                write!(f, "version mismatch: the server speaks protocol {server}, this game speaks {client}")
            }
            RejectReason::ContentTimeout => write!(f, "the server's game content did not finish downloading in time"),
            RejectReason::ServerFull { max } => write!(f, "the server is full ({max} players)"),
            RejectReason::BadHello => write!(f, "the server did not understand our greeting"),
            RejectReason::Kicked { reason } => write!(f, "kicked: {reason}"),
            RejectReason::TooManyMalformed => write!(f, "disconnected for sending malformed packets"),
            RejectReason::Banned { reason } => write!(f, "banned from this server: {reason}"),
            RejectReason::Busy => {
                write!(f, "the server is busy letting other players in (or under attack); try again in a few seconds")
            }
        }
    }
}

/// A player in a snapshot. Flags: see `F_*`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SnapPlayer {
    pub id: u32,
    pub pos: Vec2,
    pub hp: u8,
    pub flags: u8,
    /// Escape channel progress, ticks.
    pub escape: u8,
    /// Aim, 256 steps per turn.
    pub aim: u8,
}

pub const F_SPAWN_GRACE: u8 = 1;
pub const F_DEAD: u8 = 2;
pub const F_CHANNELLING: u8 = 4;
pub const F_LINKDEAD: u8 = 8;
/// Focus held (the hitbox and graze ring are drawn).
pub const F_FOCUS: u8 = 16;
/// Downed (with `F_DEAD`): a teammate may revive. While downed, `hp` carries the seconds
/// left before the player is out and `escape` the revive progress (ticks of 120).
pub const F_DOWNED: u8 = 32;
/// Out of the run (with `F_DEAD`): watching until it ends.
pub const F_OUT: u8 = 64;

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SnapEnemy {
    pub id: u32,
    /// Index into the enemy ids in sorted order (both sides hold the same content).
    pub def: u16,
    pub pos: Vec2,
    pub hp: u32,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SnapBoss {
    /// Index into the boss ids in sorted order.
    pub def: u16,
    pub pos: Vec2,
    pub hp: u32,
    pub max_hp: u32,
    pub phase: u8,
}

/// How the receiver's input frames reached the server since the previous snapshot. For
/// each frame, at its first arrival, the server takes its margin `m` (how many ticks
/// before its tick was simulated it arrived; negative: too late, the server coasted
/// through it) and the lead `l` the client numbered its packet with: `l - m` is the lead
/// that frame needed. The report carries the largest need, and how many frames arrived
/// late or never (older than the packet that should have carried them).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct InputReport {
    pub max_need: u8,
    pub late: u32,
    pub missing: u32,
}

/// An instance as one receiver sees it at one tick (what a snapshot message rebuilds).
#[derive(Clone, Debug, PartialEq)]
pub struct Snapshot {
    pub instance: u32,
    pub tick: u32,
    /// The newest input tick of the receiving player the server has consumed.
    pub last_input_tick: Option<u32>,
    /// How the receiver's input frames arrived since the last snapshot.
    pub report: Option<InputReport>,
    pub players: Vec<SnapPlayer>,
    pub enemies: Vec<SnapEnemy>,
    pub boss: Option<SnapBoss>,
}

/// A position on the snapshot grid (1/8 px, `u16` each).
pub fn snap_q(p: Vec2) -> (i32, i32) {
    (snap_pos_q(p.x) as i32, snap_pos_q(p.y) as i32)
}

/// Everything but the receiver's own player travels on a coarser grid: 1/2 px, this many
/// snapshot steps. Remote entities are drawn interpolated, where half a pixel cannot be
/// seen; only the receiver's own position feeds reconciliation and needs 1/8 px. Deltas on
/// the coarse grid fit one byte per axis for anything moving under 16 px per snapshot.
pub const COARSE: i32 = 4;

/// A position on the coarse grid, rounded once from the true position (rounding the fine
/// grid's value again would add its error to the coarse one's).
fn coarse_q(p: Vec2) -> (i32, i32) {
    let step = COARSE as f32 / SNAP_POS;
    let c = |v: f32| {
        if !v.is_finite() {
            return 0;
        }
        ((v / step).round().clamp(0.0, (u16::MAX as i32 / COARSE) as f32) as i32) * COARSE
    };
    (c(p.x), c(p.y))
}

/// The grid delta from `old` to `new` in units of `scale` steps (None: unchanged), and the
/// position it rebuilds to (what both sides then hold).
fn rel_scaled(new: (i32, i32), old: (i32, i32), scale: i32) -> Option<(i32, i32)> {
    let d = ((new.0 - old.0) as f32 / scale as f32).round() as i32;
    let e = ((new.1 - old.1) as f32 / scale as f32).round() as i32;
    (d != 0 || e != 0).then_some((d, e))
}

fn snap_f(q: (i32, i32)) -> Vec2 {
    Vec2::new(q.0 as f32 / SNAP_POS, q.1 as f32 / SNAP_POS)
}

impl Snapshot {
    /// The same snapshot with every position on the snapshot grid (what a receiver holds).
    pub fn quantized(mut self) -> Snapshot {
        for p in &mut self.players {
            p.pos = snap_f(snap_q(p.pos));
        }
        for e in &mut self.enemies {
            e.pos = snap_f(snap_q(e.pos));
        }
        if let Some(b) = &mut self.boss {
            b.pos = snap_f(snap_q(b.pos));
        }
        self
    }
}

/// A player in a snapshot message: new to the receiver (every field, absolute position)
/// or changed since the base (only the fields that changed, position as a grid delta).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlayerDelta {
    pub id: u32,
    pub new: bool,
    /// Position deltas on the 1/8 px grid (the receiver's own player), else on the
    /// `COARSE` grid.
    pub fine: bool,
    pub pos: Option<(i32, i32)>,
    pub hp: Option<u8>,
    pub flags: Option<u8>,
    pub escape: Option<u8>,
    pub aim: Option<u8>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EnemyDelta {
    pub id: u32,
    /// Present only for an enemy new to the receiver.
    pub def: Option<u16>,
    pub pos: Option<(i32, i32)>,
    pub hp: Option<u32>,
}

#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub enum BossDelta {
    #[default]
    None,
    New(SnapBoss),
    Changed {
        pos: Option<(i32, i32)>,
        hp: Option<u32>,
        max_hp: Option<u32>,
        phase: Option<u8>,
    },
}

/// A snapshot as sent: the whole state (`base: None`) or its difference from a snapshot the
/// receiver acknowledged (`base: Some(tick)`). Entities absent from the message are gone.
#[derive(Clone, Debug, PartialEq)]
pub struct SnapshotMsg {
    pub instance: u32,
    pub tick: u32,
    pub base: Option<u32>,
    pub last_input_tick: Option<u32>,
    pub report: Option<InputReport>,
    pub players: Vec<PlayerDelta>,
    pub boss: BossDelta,
    pub enemies: Vec<EnemyDelta>,
}

fn changed<T: PartialEq + Copy>(new: T, old: Option<T>) -> Option<T> {
    if old == Some(new) {
        None
    } else {
        Some(new)
    }
}

impl SnapshotMsg {
    /// The message that turns `base` (None: nothing) into `s` for a receiver whose own
    /// player is `own`. Entities are added while they fit `SNAPSHOT_BUDGET` (the receiver's
    /// own player always); whatever did not fit is absent, as `apply` will show.
    pub fn diff(base: Option<&Snapshot>, s: &Snapshot, own: Option<u32>) -> SnapshotMsg {
        // Where a position goes: the receiver's own exactly, the rest on the coarse grid.
        let at = |p: Vec2, mine: bool| if mine { snap_q(p) } else { coarse_q(p) };
        let step = |mine: bool| if mine { 1 } else { COARSE };
        let moved = |new: (i32, i32), old: Option<(i32, i32)>, scale: i32| match old {
            Some(o) => rel_scaled(new, o, scale),
            None => Some(new),
        };
        let base = base.filter(|b| b.instance == s.instance);
        let mut budget = SNAPSHOT_BUDGET as i64;
        let mut scratch = Writer::new();
        let mut players = Vec::new();
        let order = s
            .players
            .iter()
            .filter(|p| Some(p.id) == own)
            .chain(s.players.iter().filter(|p| Some(p.id) != own))
            .take(MAX_SNAPSHOT_PLAYERS);
        for p in order {
            let old = base.and_then(|b| b.players.iter().find(|q| q.id == p.id));
            let mine = Some(p.id) == own;
            let d = PlayerDelta {
                id: p.id,
                new: old.is_none(),
                fine: mine,
                pos: moved(at(p.pos, mine), old.map(|o| snap_q(o.pos)), step(mine)),
                hp: changed(p.hp, old.map(|o| o.hp)),
                flags: changed(p.flags, old.map(|o| o.flags)),
                escape: changed(p.escape, old.map(|o| o.escape)),
                // The receiver draws its own ship with its own aim: after the first, its
                // aim is not sent. Others' aims move in steps of two (2.8 degrees).
                aim: match old {
                    Some(_) if mine => None,
                    Some(o) if (p.aim.wrapping_sub(o.aim) as i8).unsigned_abs() <= 1 => None,
                    _ => Some(p.aim),
                },
            };
            scratch.buf.clear();
            write_player(&mut scratch, &d);
            budget -= scratch.len() as i64;
            if budget < 0 && Some(p.id) != own {
                break;
            }
            players.push(d);
        }
        let boss = match (&s.boss, base.and_then(|b| b.boss.as_ref())) {
            (None, _) => BossDelta::None,
            (Some(b), Some(o)) if o.def == b.def => BossDelta::Changed {
                pos: moved(coarse_q(b.pos), Some(snap_q(o.pos)), COARSE),
                hp: changed(b.hp, Some(o.hp)),
                max_hp: changed(b.max_hp, Some(o.max_hp)),
                phase: changed(b.phase, Some(o.phase)),
            },
            (Some(b), _) => BossDelta::New(SnapBoss { pos: snap_f(coarse_q(b.pos)), ..*b }),
        };
        budget -= 24;
        let mut enemies = Vec::new();
        for e in s.enemies.iter().take(MAX_SNAPSHOT_ENEMIES) {
            let old = base.and_then(|b| b.enemies.iter().find(|q| q.id == e.id && q.def == e.def));
            let d = EnemyDelta {
                id: e.id,
                def: if old.is_none() { Some(e.def) } else { None },
                pos: moved(coarse_q(e.pos), old.map(|o| snap_q(o.pos)), COARSE),
                hp: changed(e.hp, old.map(|o| o.hp)),
            };
            scratch.buf.clear();
            write_enemy(&mut scratch, &d);
            budget -= scratch.len() as i64;
            if budget < 0 {
                break;
            }
            enemies.push(d);
        }
        SnapshotMsg {
            instance: s.instance,
            tick: s.tick,
            base: base.map(|b| b.tick),
            last_input_tick: s.last_input_tick,
            report: s.report,
            players,
            boss,
            enemies,
        }
    }

    /// Rebuilds the snapshot from its base (the receiver's copy of the snapshot at
    /// `self.base`). Fails when the base is missing or wrong, or an entry contradicts it.
    pub fn apply(&self, base: Option<&Snapshot>) -> Result<Snapshot, DecodeError> {
        let base = match (self.base, base) {
            (None, _) => None,
            (Some(t), Some(b)) if b.tick == t && b.instance == self.instance => Some(b),
            (Some(_), _) => return Err(DecodeError::BadValue("snapshot base")),
        };
        let pos = |d: (i32, i32), old: Option<(i32, i32)>, scale: i32| -> Result<Vec2, DecodeError> {
            let (x, y) = match old {
                Some(o) => {
                    (o.0.saturating_add(d.0.saturating_mul(scale)), o.1.saturating_add(d.1.saturating_mul(scale)))
                }
                None => d,
            };
            if !(0..=u16::MAX as i32).contains(&x) || !(0..=u16::MAX as i32).contains(&y) {
                return Err(DecodeError::BadValue("snapshot position"));
            }
            Ok(snap_f((x, y)))
        };
        let mut players = Vec::with_capacity(self.players.len());
        for d in &self.players {
            let old = if d.new { None } else { base.and_then(|b| b.players.iter().find(|q| q.id == d.id)) };
            if !d.new && old.is_none() {
                return Err(DecodeError::BadValue("snapshot player"));
            }
            let need = |v: Option<u8>, o: Option<u8>| v.or(o).ok_or(DecodeError::BadValue("snapshot player"));
            players.push(SnapPlayer {
                id: d.id,
                pos: match d.pos {
                    Some(p) => pos(p, old.map(|o| snap_q(o.pos)), if d.fine { 1 } else { COARSE })?,
                    None => old.map(|o| o.pos).ok_or(DecodeError::BadValue("snapshot player"))?,
                },
                hp: need(d.hp, old.map(|o| o.hp))?,
                flags: need(d.flags, old.map(|o| o.flags))?,
                escape: need(d.escape, old.map(|o| o.escape))?,
                aim: need(d.aim, old.map(|o| o.aim))?,
            });
        }
        let boss = match self.boss {
            BossDelta::None => None,
            BossDelta::New(b) => Some(b),
            BossDelta::Changed { pos: p, hp, max_hp, phase } => {
                let o = base.and_then(|b| b.boss).ok_or(DecodeError::BadValue("snapshot boss"))?;
                Some(SnapBoss {
                    def: o.def,
                    pos: match p {
                        Some(p) => pos(p, Some(snap_q(o.pos)), COARSE)?,
                        None => o.pos,
                    },
                    hp: hp.unwrap_or(o.hp),
                    max_hp: max_hp.unwrap_or(o.max_hp),
                    phase: phase.unwrap_or(o.phase),
                })
            }
        };
        let mut enemies = Vec::with_capacity(self.enemies.len());
        for d in &self.enemies {
            let old = match d.def {
                Some(_) => None,
                None => Some(
                    base.and_then(|b| b.enemies.iter().find(|q| q.id == d.id))
                        .ok_or(DecodeError::BadValue("snapshot enemy"))?,
                ),
            };
            enemies.push(SnapEnemy {
                id: d.id,
                def: d.def.or(old.map(|o| o.def)).ok_or(DecodeError::BadValue("snapshot enemy"))?,
                pos: match d.pos {
                    Some(p) => pos(p, old.map(|o| snap_q(o.pos)), COARSE)?,
                    None => old.map(|o| o.pos).ok_or(DecodeError::BadValue("snapshot enemy"))?,
                },
                hp: d.hp.or(old.map(|o| o.hp)).ok_or(DecodeError::BadValue("snapshot enemy"))?,
            });
        }
        Ok(Snapshot {
            instance: self.instance,
            tick: self.tick,
            last_input_tick: self.last_input_tick,
            report: self.report,
            players,
            enemies,
            boss,
        })
    }
}

const M_POS: u8 = 1;
const M_HP: u8 = 2;
const M_FLAGS: u8 = 4;
const M_ESCAPE: u8 = 8;
const M_AIM: u8 = 16;
const M_PHASE: u8 = 32;
const M_MAX_HP: u8 = 64;
const M_FINE: u8 = 64;
const M_NEW: u8 = 128;

fn write_pos(w: &mut Writer, new: bool, p: (i32, i32)) {
    if new {
        w.u16(p.0.clamp(0, u16::MAX as i32) as u16);
        w.u16(p.1.clamp(0, u16::MAX as i32) as u16);
    } else {
        w.svar(p.0 as i64);
        w.svar(p.1 as i64);
    }
}

fn read_pos(r: &mut Reader, new: bool) -> Result<(i32, i32), DecodeError> {
    if new {
        Ok((r.u16()? as i32, r.u16()? as i32))
    } else {
        let d = |v: i64| i32::try_from(v).map_err(|_| DecodeError::BadValue("snapshot position"));
        Ok((d(r.svar()?)?, d(r.svar()?)?))
    }
}

fn write_player(w: &mut Writer, d: &PlayerDelta) {
    w.var(d.id as u64);
    if d.new {
        w.u8(M_NEW);
        write_pos(w, true, d.pos.unwrap_or_default());
        w.u8(d.hp.unwrap_or(0));
        w.u8(d.flags.unwrap_or(0));
        w.u8(d.escape.unwrap_or(0));
        w.u8(d.aim.unwrap_or(0));
        return;
    }
    let mask = d.pos.map_or(0, |_| M_POS)
        | if d.fine { M_FINE } else { 0 }
        | d.hp.map_or(0, |_| M_HP)
        | d.flags.map_or(0, |_| M_FLAGS)
        | d.escape.map_or(0, |_| M_ESCAPE)
        | d.aim.map_or(0, |_| M_AIM);
    w.u8(mask);
    if let Some(p) = d.pos {
        write_pos(w, false, p);
    }
    for v in [d.hp, d.flags, d.escape, d.aim].into_iter().flatten() {
        w.u8(v);
    }
}

fn read_player(r: &mut Reader) -> Result<PlayerDelta, DecodeError> {
    let id = r.var_u32("player id")?;
    let mask = r.u8()?;
    if mask == M_NEW {
        return Ok(PlayerDelta {
            id,
            new: true,
            fine: true,
            pos: Some(read_pos(r, true)?),
            hp: Some(r.u8()?),
            flags: Some(r.u8()?),
            escape: Some(r.u8()?),
            aim: Some(r.u8()?),
        });
    }
    if mask & !(M_POS | M_HP | M_FLAGS | M_ESCAPE | M_AIM | M_FINE) != 0 {
        return Err(DecodeError::BadValue("snapshot player mask"));
    }
    let pos = if mask & M_POS != 0 { Some(read_pos(r, false)?) } else { None };
    let mut field = |bit: u8| -> Result<Option<u8>, DecodeError> {
        if mask & bit != 0 {
            Ok(Some(r.u8()?))
        } else {
            Ok(None)
        }
    };
    Ok(PlayerDelta {
        id,
        new: false,
        fine: mask & M_FINE != 0,
        pos,
        hp: field(M_HP)?,
        flags: field(M_FLAGS)?,
        escape: field(M_ESCAPE)?,
        aim: field(M_AIM)?,
    })
}

fn write_enemy(w: &mut Writer, d: &EnemyDelta) {
    w.var(d.id as u64);
    if let Some(def) = d.def {
        w.u8(M_NEW);
        w.var(def as u64);
        write_pos(w, true, d.pos.unwrap_or_default());
        w.var(d.hp.unwrap_or(0) as u64);
        return;
    }
    w.u8(d.pos.map_or(0, |_| M_POS) | d.hp.map_or(0, |_| M_HP));
    if let Some(p) = d.pos {
        write_pos(w, false, p);
    }
    if let Some(hp) = d.hp {
        w.var(hp as u64);
    }
}

fn read_enemy(r: &mut Reader) -> Result<EnemyDelta, DecodeError> {
    let id = r.var_u32("enemy id")?;
    let mask = r.u8()?;
    if mask == M_NEW {
        let def = u16::try_from(r.var()?).map_err(|_| DecodeError::BadValue("enemy def"))?;
        let pos = read_pos(r, true)?;
        return Ok(EnemyDelta { id, def: Some(def), pos: Some(pos), hp: Some(r.var_u32("enemy hp")?) });
    }
    if mask & !(M_POS | M_HP) != 0 {
        return Err(DecodeError::BadValue("snapshot enemy mask"));
    }
    let pos = if mask & M_POS != 0 { Some(read_pos(r, false)?) } else { None };
    let hp = if mask & M_HP != 0 { Some(r.var_u32("enemy hp")?) } else { None };
    Ok(EnemyDelta { id, def: None, pos, hp })
}

fn write_boss(w: &mut Writer, b: &BossDelta) {
    match b {
        BossDelta::None => w.u8(0),
        BossDelta::New(b) => {
            w.u8(1);
            w.var(b.def as u64);
            write_pos(w, true, snap_q(b.pos));
            w.var(b.hp as u64);
            w.var(b.max_hp as u64);
            w.u8(b.phase);
        }
        BossDelta::Changed { pos: None, hp: None, max_hp: None, phase: None } => w.u8(3),
        BossDelta::Changed { pos, hp, max_hp, phase } => {
            w.u8(2);
            w.u8(pos.map_or(0, |_| M_POS)
                | hp.map_or(0, |_| M_HP)
                | max_hp.map_or(0, |_| M_MAX_HP)
                | phase.map_or(0, |_| M_PHASE));
            if let Some(p) = pos {
                write_pos(w, false, *p);
            }
            if let Some(v) = hp {
                w.var(*v as u64);
            }
            if let Some(v) = max_hp {
                w.var(*v as u64);
            }
            if let Some(v) = phase {
                w.u8(*v);
            }
        }
    }
}

fn read_boss(r: &mut Reader) -> Result<BossDelta, DecodeError> {
    Ok(match r.u8()? {
        0 => BossDelta::None,
        1 => BossDelta::New(SnapBoss {
            def: u16::try_from(r.var()?).map_err(|_| DecodeError::BadValue("boss def"))?,
            pos: snap_f(read_pos(r, true)?),
            hp: r.var_u32("boss hp")?,
            max_hp: r.var_u32("boss hp")?,
            phase: r.u8()?,
        }),
        2 => {
            let mask = r.u8()?;
            if mask & !(M_POS | M_HP | M_MAX_HP | M_PHASE) != 0 {
                return Err(DecodeError::BadValue("snapshot boss mask"));
            }
            BossDelta::Changed {
                pos: if mask & M_POS != 0 { Some(read_pos(r, false)?) } else { None },
                hp: if mask & M_HP != 0 { Some(r.var_u32("boss hp")?) } else { None },
                max_hp: if mask & M_MAX_HP != 0 { Some(r.var_u32("boss hp")?) } else { None },
                phase: if mask & M_PHASE != 0 { Some(r.u8()?) } else { None },
            }
        }
        3 => BossDelta::Changed { pos: None, hp: None, max_hp: None, phase: None },
        _ => return Err(DecodeError::BadValue("boss flag")),
    })
}

/// Who was hit or died.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WireTarget {
    Player(u32),
    Enemy(u32),
    Boss,
}

/// One gameplay event inside an `Events` batch.
#[derive(Clone, Debug, PartialEq)]
pub enum WireEvent {
    Spawn(BulletSpawn),
    /// A ring, fan or volley: the client expands it with `Burst::spawn`, as the server did.
    Burst(Burst),
    /// A bullet consumed by a hit (the one despawn a client cannot derive).
    Hit {
        uid: u32,
        target: WireTarget,
    },
    /// A bullet removed without a hit (bullet cancel when a boss dies).
    Despawn {
        uid: u32,
    },
    Death {
        target: WireTarget,
    },
    Phase {
        phase: u8,
    },
    Cleared,
    Sfx {
        name: String,
        pos: Vec2,
    },
    /// A script's warning before an attack: `i16 x, i16 y` (the position grid), `u16`
    /// angle (1/65536 turn), `u16 length` px, `u8 width` px, `u8 ticks`, `u8` 0 line or 1
    /// circle (protocol 10).
    Telegraph(crate::sim::script::Telegraph),
    /// A script's words for the players (`hint(text)`): `str text` (protocol 10).
    Hint {
        text: String,
    },
    /// A player's flare on `tick` at exactly `pos` (f32 bits): the replica clears the
    /// enemy bullets it would have cleared (`BulletPool::flared`), as the server did.
    Flare {
        player: u32,
        tick: u32,
        pos: Vec2,
    },
    /// A downed player ran out of time (or could not be revived): out of the run.
    Out {
        player: u32,
    },
    Revived {
        player: u32,
        by: u32,
    },
    /// A wave was cleared (1 = the first).
    Wave {
        wave: u32,
    },
}

#[derive(Clone, Debug, PartialEq)]
pub enum ServerMsg {
    /// Type 10, CONTROL, reliable. Answer to a good Hello, with the server's name and
    /// message of the day.
    /// `u8 type, u16 version, var player_id, u32 tick, u8 tick_rate, str name (..=48 bytes),
    /// str motd (..=160 bytes)`.
    Welcome { version: u16, player_id: u32, tick: u32, tick_rate: u8, name: String, motd: String },
    /// Type 11, CONTROL, reliable, then the server disconnects.
    /// `u8 type, u8 code, payload` (1 version: u16 server, u16 client; 2 content timeout; 3 full:
    /// u16 max; 4 bad hello; 5 kicked: str reason; 6 malformed; 7 banned: str reason).
    Reject(RejectReason),
    /// Type 13, CONTROL. Answer to a Hello whose content digest differs from the server's:
    /// the client-side content it must use, by digest and size. The client answers
    /// `ContentReady` (cached) or `ContentWant`, or leaves (too large).
    /// `u8 type, [u8; 32] digest, var raw_len, var packed_len`.
    ContentOffer { digest: ContentDigest, raw_len: u32, packed_len: u32 },
    /// Type 14, CONTROL, after `ContentWant`: the deflated content in order, at most
    /// `CONTENT_CHUNK` bytes each. `u8 type, var offset, var n, n bytes`.
    ContentChunk { offset: u32, data: Vec<u8> },
    /// Type 19, CONTROL, to a player already in: the server's mods changed only in looks
    /// (colours, names, bodies, themes), so the game swaps its content without leaving.
    /// `ContentChunk`s follow at once, as after `ContentWant` (none when the game can be
    /// expected to hold it: it never asks). Same layout as `ContentOffer`.
    ContentUpdate { digest: ContentDigest, raw_len: u32, packed_len: u32 },
    /// Type 12, CONTROL, reliable, about once a second.
    /// `u8 type, var inputs_dropped, var ticks_coasted` (cumulative for this player).
    Stats { inputs_dropped: u32, ticks_coasted: u32 },
    /// Type 15, CONTROL, reliable. Text from the server for the player to read: the
    /// operator's `say`, answers to an admin's command. `u8 type, str text (..=200 bytes)`.
    Notice { text: String },
    /// Type 16, CONTROL, reliable. A run ended for the receiver: its summary.
    /// `u8 type, str dungeon, u8 outcome (0 cleared, 1 failed, 2 abandoned), var ticks,
    /// var team_score, var n (..=64), n x (var id, str name, var score, var damage,
    /// var kills, var grazes, var hits_taken, var downs, var revives, var flares_used,
    /// u8 out)`.
    RunSummary(crate::sim::events::RunSummary),
    /// Type 17, CONTROL, reliable. The receiver's own run counts, when they change (at
    /// most twice a second, at once when flares change): `u8 type, u8 flares, u8 charge
    /// (grazes toward the next flare), var grazes, var score`.
    RunStatus { flares: u8, charge: u8, grazes: u32, score: u32 },
    /// Type 18, CONTROL, reliable. The server's records, on joining and when one falls:
    /// `u8 type, var n (..64), n x (str dungeon, var best_time (centiseconds),
    /// var best_score, str party (names, comma-separated, ..100 bytes))`.
    Records(Vec<ServerRecord>),
    /// Type 23, CONTROL, reliable. Who plays on the server and where, when that changes
    /// (at most once a second; the hub's Watch button): `u8 type, var n (..=MAX_PEOPLE),
    /// n x (str name (..=24 bytes), str place (a dungeon id, "" the hub))`.
    People(Vec<(String, String)>),
    /// Type 20, EVENTS, reliable ordered. The receiver is now in this instance: drop every
    /// bullet and entity of the old one. Followed by the bullets already in flight.
    /// `u8 type, var instance, u32 tick, str dungeon ("" = hub), u16 arena_w, u16 arena_h`.
    Enter { instance: u32, tick: u32, dungeon: String, arena: (u16, u16) },
    /// Type 21, EVENTS. Who is in the receiver's instance and the ship each flies (protocol
    /// 10), whenever that changes: `u8 type, var instance, var n, n x (var id, str name,
    /// var ship)`.
    Roster { instance: u32, players: Vec<(u32, String, u16)> },
    /// Type 22, EVENTS. What happened in the receiver's instance in one tick (or the
    /// bullets in flight right after `Enter`).
    /// `u8 type, var tick, event...` (events to the end of the message), always about the
    /// instance of the last `Enter` (the same ordered channel carries both), where an
    /// event is a u8 tag:
    /// 1 spawn: `u8 flags, svar uid_delta, var kind, i16 x, i16 y, u16 angle, u16 speed,
    ///   u8 radius, var lifetime, [i16 accel] [i16 turn] [u16 max_speed] [var tick_back]`
    ///   (flags: 1 player team, 2 accel, 4 turn, 8 max speed, 16 tick differs; values on
    ///   the `sim::bullets::grid` steps; about 15 bytes; flag 64 with flags 1..15 = 1 is a
    ///   player's shot: no speed or lifetime, which are the rules'), or, with flag 32 (a repeat of the
    ///   previous spawn in this batch but for uid, position, angle and tick):
    ///   `u8 flags, svar uid_delta, i16 x, i16 y, u16 angle, [var tick_back]` (8 bytes);
    /// 2 hit: `svar uid_delta, target`; 9 hits on the boss: `var n, n x svar uid_delta`;
    /// 3 despawn: `svar uid_delta`; 4 death: `target`;
    /// 5 phase: `u8`; 6 cleared; 7 sfx: `str name, i16 x, i16 y`;
    /// 8 burst: `u8 flags (as spawn, plus 32 offset), svar first_uid_delta, var count,
    ///   var kind, i16 x, i16 y, u16 angle0, var span, var div, u16 speed, u8 radius,
    ///   var lifetime, [i16 offset] [i16 accel] [i16 turn] [u16 max_speed] [var tick_back]`
    ///   (about 20 bytes for a whole ring; a later repeat spawn repeats its shape).
    /// A target is `u8 kind (0 player, 1 enemy, 2 boss), [var id]`. Uid deltas are from the
    /// previous uid in the batch (0 at the start).
    Events { tick: u32, events: Vec<WireEvent> },
    /// Type 30, SNAPSHOT, unreliable sequenced, 20 Hz, newest wins; a delta against the
    /// newest snapshot the client acknowledged (in `Input`), or whole.
    /// `u8 type, var instance, var tick, u8 base_ack` (high nibble: (tick - base tick) / 3,
    /// 0 whole; low nibble: ack, 0 none, else tick - last_input_tick + 1; 0xf0 then
    /// `var tick - base tick, var ack` when either does not fit),
    /// u8 report (0 none; 1..=127 need + 1; 128..=255 need + 128, then var late, var missing),
    /// u8 n, n x player, boss, enemy...` (enemies to the end), where
    /// - a player is `var id, u8 mask`: mask 128 (new) then `u16 x, u16 y, u8 hp, u8 flags,
    ///   u8 escape, u8 aim`; else bits 1 pos (`svar dx, svar dy`), 2 hp, 4 flags, 8 escape,
    ///   16 aim, each a `u8`, for the fields that changed since the base;
    /// - the boss is `u8 0` (none), `1, var def, u16 x, u16 y, var hp, var max_hp, u8 phase`,
    ///   `2, u8 mask (1 pos, 2 hp, 64 max hp, 32 phase), changed fields` or `3` (unchanged);
    /// - positions of everything but the receiver's own player (mask bit 64 "fine") change
    ///   in steps of `COARSE` (1/2 px);
    /// - an enemy is `var id, u8 mask`: 128 (new) then `var def, u16 x, u16 y, var hp`;
    ///   else bits 1 pos, 2 hp (`var`).
    ///
    /// Positions on a 1/8 px grid; an entity absent from the message is gone.
    Snapshot(SnapshotMsg),
}

pub const T_WELCOME: u8 = 10;
pub const T_REJECT: u8 = 11;
pub const T_STATS: u8 = 12;
pub const T_CONTENT_OFFER: u8 = 13;
pub const T_CONTENT_CHUNK: u8 = 14;
pub const T_NOTICE: u8 = 15;
pub const T_RUN_SUMMARY: u8 = 16;
pub const T_RUN_STATUS: u8 = 17;
pub const T_RECORDS: u8 = 18;
pub const T_CONTENT_UPDATE: u8 = 19;
pub const T_PEOPLE: u8 = 23;
/// Most players a `People` message lists.
pub const MAX_PEOPLE: usize = 256;

/// One dungeon's record on a server, as players see it at the portal.
#[derive(Clone, Debug, PartialEq)]
pub struct ServerRecord {
    pub dungeon: String,
    pub best_time_cs: u32,
    pub best_score: u32,
    pub party: String,
}
/// Most rows a run summary carries.
pub const MAX_SUMMARY_ROWS: usize = 64;
/// Longest server name, message of the day and notice, in bytes.
pub const MAX_SERVER_NAME: usize = 48;
pub const MAX_MOTD: usize = 160;
pub const MAX_NOTICE: usize = 200;
pub const T_ENTER: u8 = 20;
pub const T_ROSTER: u8 = 21;
pub const T_EVENTS: u8 = 22;
pub const T_SNAPSHOT: u8 = 30;

fn snap_pos_q(v: f32) -> u16 {
    if v.is_finite() {
        (v * SNAP_POS).round().clamp(0.0, u16::MAX as f32) as u16
    } else {
        0
    }
}

fn write_target(w: &mut Writer, t: WireTarget) {
    match t {
        WireTarget::Player(id) => {
            w.u8(0);
            w.var(id as u64)
        }
        WireTarget::Enemy(id) => {
            w.u8(1);
            w.var(id as u64)
        }
        WireTarget::Boss => w.u8(2),
    }
}

fn read_target(r: &mut Reader) -> Result<WireTarget, DecodeError> {
    Ok(match r.u8()? {
        0 => WireTarget::Player(r.var_u32("target id")?),
        1 => WireTarget::Enemy(r.var_u32("target id")?),
        2 => WireTarget::Boss,
        _ => return Err(DecodeError::BadValue("target")),
    })
}

/// Whether two spawns share everything but uid, position, angle and tick (a ring, a fan,
/// a spiral's next shot, another player's shot): the second is sent as a repeat.
fn same_shape(a: &BulletSpawn, b: &BulletSpawn) -> bool {
    a.kind == b.kind
        && a.team == b.team
        && a.lifetime == b.lifetime
        && grid::speed_q(a.speed) == grid::speed_q(b.speed)
        && grid::radius_q(a.radius) == grid::radius_q(b.radius)
        && grid::accel_q(a.accel) == grid::accel_q(b.accel)
        && grid::turn_q(a.turn) == grid::turn_q(b.turn)
        && grid::max_speed_q(a.max_speed) == grid::max_speed_q(b.max_speed)
}

/// The fields a spawn's or a burst's flags say are present (accel, turn, max speed, tick).
fn write_optional_fields(w: &mut Writer, s: &BulletSpawn, flags: u8, batch_tick: u32) {
    if flags & 2 != 0 {
        w.i16(grid::accel_q(s.accel));
    }
    if flags & 4 != 0 {
        w.i16(grid::turn_q(s.turn));
    }
    if flags & 8 != 0 {
        w.u16(grid::max_speed_q(s.max_speed));
    }
    if flags & 16 != 0 {
        w.var(batch_tick.wrapping_sub(s.tick) as u64);
    }
}

/// The flags a spawn or a burst shape sets: 1 player team, 2 accel, 4 turn, 8 max speed,
/// 16 tick differs from the batch's (values already on the grid, so zero is exact).
fn shape_flags(s: &BulletSpawn, batch_tick: u32) -> u8 {
    let mut flags = 0u8;
    if s.team == Team::Player {
        flags |= 1;
    }
    if grid::accel_q(s.accel) != 0 {
        flags |= 2;
    }
    if grid::turn_q(s.turn) != 0 {
        flags |= 4;
    }
    if s.max_speed.is_finite() {
        flags |= 8;
    }
    if s.tick != batch_tick {
        flags |= 16;
    }
    flags
}

fn write_spawn(w: &mut Writer, s: &BulletSpawn, batch_tick: u32, prev_uid: u32, prev: Option<&BulletSpawn>) {
    if prev.is_some_and(|p| same_shape(p, s)) {
        let flags = 32 | if s.tick != batch_tick { 16 } else { 0 };
        w.u8(flags);
        w.svar(s.uid as i64 - prev_uid as i64);
        w.i16(grid::pos_q(s.pos.x));
        w.i16(grid::pos_q(s.pos.y));
        w.u16(grid::angle_q(s.angle));
        if flags & 16 != 0 {
            w.var(batch_tick.wrapping_sub(s.tick) as u64);
        }
        return;
    }
    let mut flags = shape_flags(s, batch_tick);
    // A player's shot: speed and lifetime are the rules' own, not sent.
    let player_shot = flags & 15 == 1
        && grid::speed_q(s.speed) == grid::speed_q(PLAYER_BULLET_SPEED)
        && s.lifetime == PLAYER_BULLET_LIFETIME;
    if player_shot {
        flags |= 64;
    }
    w.u8(flags);
    w.svar(s.uid as i64 - prev_uid as i64);
    w.var(s.kind as u64);
    w.i16(grid::pos_q(s.pos.x));
    w.i16(grid::pos_q(s.pos.y));
    w.u16(grid::angle_q(s.angle));
    if !player_shot {
        w.u16(grid::speed_q(s.speed));
    }
    w.u8(grid::radius_q(s.radius));
    if !player_shot {
        w.var(s.lifetime as u64);
    }
    write_optional_fields(w, s, flags, batch_tick);
}

fn read_spawn(
    r: &mut Reader,
    batch_tick: u32,
    prev_uid: u32,
    prev: Option<&BulletSpawn>,
) -> Result<BulletSpawn, DecodeError> {
    let flags = r.u8()?;
    if flags & !127 != 0 || (flags & 64 != 0 && flags & (32 | 15) != 1) {
        return Err(DecodeError::BadValue("spawn flags"));
    }
    let player_shot = flags & 64 != 0;
    if flags & 32 != 0 {
        if flags & 15 != 0 {
            return Err(DecodeError::BadValue("spawn flags"));
        }
        let p = prev.ok_or(DecodeError::BadValue("repeat spawn with nothing to repeat"))?;
        let uid = next_uid(prev_uid, r.svar()?)?;
        let pos = Vec2::new(r.i16()? as f32 / grid::POS, r.i16()? as f32 / grid::POS);
        let angle = r.u16()? as f32 / grid::ANGLE;
        let back = if flags & 16 != 0 { r.var_u32("tick")? } else { 0 };
        return Ok(BulletSpawn { uid, pos, angle, tick: batch_tick.wrapping_sub(back), ..*p });
    }
    let uid = next_uid(prev_uid, r.svar()?)?;
    let kind = u16::try_from(r.var()?).map_err(|_| DecodeError::BadValue("kind"))?;
    let x = r.i16()? as f32 / grid::POS;
    let y = r.i16()? as f32 / grid::POS;
    let angle = r.u16()? as f32 / grid::ANGLE;
    let speed = if player_shot { grid::speed_q(PLAYER_BULLET_SPEED) } else { r.u16()? } as f32 / grid::SPEED;
    let radius = r.u8()?.max(1) as f32 / grid::RADIUS;
    let lifetime = if player_shot {
        PLAYER_BULLET_LIFETIME
    } else {
        u16::try_from(r.var()?).map_err(|_| DecodeError::BadValue("lifetime"))?
    };
    let accel = if flags & 2 != 0 { r.i16()? as f32 / grid::ACCEL } else { 0.0 };
    let turn = if flags & 4 != 0 { r.i16()? as f32 / grid::TURN } else { 0.0 };
    let max_speed = if flags & 8 != 0 { grid::max_speed_f(r.u16()?) } else { f32::INFINITY };
    let back = if flags & 16 != 0 { r.var_u32("tick")? } else { 0 };
    Ok(BulletSpawn {
        uid,
        pos: Vec2::new(x, y),
        angle,
        speed,
        radius,
        lifetime,
        kind,
        team: if flags & 1 != 0 { Team::Player } else { Team::Enemy },
        accel,
        turn,
        max_speed,
        tick: batch_tick.wrapping_sub(back),
    })
}

/// A uid from the previous one and a (hostile, possibly huge) delta.
fn next_uid(prev: u32, delta: i64) -> Result<u32, DecodeError> {
    (prev as i64).checked_add(delta).and_then(|u| u32::try_from(u).ok()).ok_or(DecodeError::BadValue("uid"))
}

/// Whether a burst is a player's fan by the rules (`sim::instance`): then its count, span,
/// division, speed and lifetime go without saying (burst flag 64).
fn is_rules_fan(b: &Burst, flags: u8) -> bool {
    use crate::sim::config::FAN_SHOTS;
    use crate::sim::instance::{fan_span, PLAYER_BULLET_LIFETIME, PLAYER_BULLET_SPEED};
    let s = &b.shape;
    flags & !(1 | 16) == 0
        && s.team == Team::Player
        && b.count == FAN_SHOTS
        && b.span == fan_span()
        && b.div == FAN_SHOTS - 1
        && grid::speed_q(s.speed) == grid::speed_q(PLAYER_BULLET_SPEED)
        && s.lifetime == PLAYER_BULLET_LIFETIME
}

fn write_burst(w: &mut Writer, b: &Burst, batch_tick: u32, prev_uid: u32) {
    let s = &b.shape;
    let mut flags = shape_flags(s, batch_tick);
    if grid::pos_q(b.offset) != 0 {
        flags |= 32;
    }
    if is_rules_fan(b, flags) {
        // A player's fan: `u8 flags (64|1|[16]), svar uid, var kind, i16 x, i16 y,
        // u16 angle0, u8 radius, [var tick_back]`.
        w.u8(flags | 64);
        w.svar(s.uid as i64 - prev_uid as i64);
        w.var(s.kind as u64);
        w.i16(grid::pos_q(s.pos.x));
        w.i16(grid::pos_q(s.pos.y));
        w.u16(b.angle0);
        w.u8(grid::radius_q(s.radius));
        write_optional_fields(w, s, flags, batch_tick);
        return;
    }
    w.u8(flags);
    w.svar(s.uid as i64 - prev_uid as i64);
    w.var(b.count as u64);
    w.var(s.kind as u64);
    w.i16(grid::pos_q(s.pos.x));
    w.i16(grid::pos_q(s.pos.y));
    w.u16(b.angle0);
    w.var(b.span as u64);
    w.var(b.div as u64);
    w.u16(grid::speed_q(s.speed));
    w.u8(grid::radius_q(s.radius));
    w.var(s.lifetime as u64);
    if flags & 32 != 0 {
        w.i16(grid::pos_q(b.offset));
    }
    write_optional_fields(w, s, flags, batch_tick);
}

fn read_burst(r: &mut Reader, batch_tick: u32, prev_uid: u32) -> Result<Burst, DecodeError> {
    let flags = r.u8()?;
    if flags & 64 != 0 {
        use crate::sim::config::FAN_SHOTS;
        use crate::sim::instance::{fan_span, PLAYER_BULLET_LIFETIME, PLAYER_BULLET_SPEED};
        if flags & !(64 | 1 | 16) != 0 || flags & 1 == 0 {
            return Err(DecodeError::BadValue("burst flags"));
        }
        let uid = next_uid(prev_uid, r.svar()?)?;
        let kind = u16::try_from(r.var()?).map_err(|_| DecodeError::BadValue("kind"))?;
        let pos = Vec2::new(r.i16()? as f32 / grid::POS, r.i16()? as f32 / grid::POS);
        let angle0 = r.u16()?;
        let radius = r.u8()?.max(1) as f32 / grid::RADIUS;
        let back = if flags & 16 != 0 { r.var_u32("tick")? } else { 0 };
        let shape = BulletSpawn {
            uid,
            pos,
            angle: 0.0,
            speed: PLAYER_BULLET_SPEED,
            radius,
            lifetime: PLAYER_BULLET_LIFETIME,
            kind,
            team: Team::Player,
            accel: 0.0,
            turn: 0.0,
            max_speed: f32::INFINITY,
            tick: batch_tick.wrapping_sub(back),
        }
        .quantized();
        return Ok(Burst { shape, count: FAN_SHOTS, angle0, span: fan_span(), div: FAN_SHOTS - 1, offset: 0.0 });
    }
    if flags & !63 != 0 {
        return Err(DecodeError::BadValue("burst flags"));
    }
    let uid = next_uid(prev_uid, r.svar()?)?;
    let count = u16::try_from(r.var()?).map_err(|_| DecodeError::BadValue("burst count"))?;
    if !(1..=Burst::MAX_COUNT).contains(&count) {
        return Err(DecodeError::BadValue("burst count"));
    }
    let kind = u16::try_from(r.var()?).map_err(|_| DecodeError::BadValue("kind"))?;
    let pos = Vec2::new(r.i16()? as f32 / grid::POS, r.i16()? as f32 / grid::POS);
    let angle0 = r.u16()?;
    let span = r.var_u32("burst span")?;
    if span > 65536 {
        return Err(DecodeError::BadValue("burst span"));
    }
    let div = u16::try_from(r.var()?).map_err(|_| DecodeError::BadValue("burst div"))?;
    if div == 0 {
        return Err(DecodeError::BadValue("burst div"));
    }
    let speed = r.u16()? as f32 / grid::SPEED;
    let radius = r.u8()?.max(1) as f32 / grid::RADIUS;
    let lifetime = u16::try_from(r.var()?).map_err(|_| DecodeError::BadValue("lifetime"))?;
    let offset = if flags & 32 != 0 { r.i16()? as f32 / grid::POS } else { 0.0 };
    let accel = if flags & 2 != 0 { r.i16()? as f32 / grid::ACCEL } else { 0.0 };
    let turn = if flags & 4 != 0 { r.i16()? as f32 / grid::TURN } else { 0.0 };
    let max_speed = if flags & 8 != 0 { grid::max_speed_f(r.u16()?) } else { f32::INFINITY };
    let back = if flags & 16 != 0 { r.var_u32("tick")? } else { 0 };
    let shape = BulletSpawn {
        uid,
        pos,
        angle: 0.0,
        speed,
        radius,
        lifetime,
        kind,
        team: if flags & 1 != 0 { Team::Player } else { Team::Enemy },
        accel,
        turn,
        max_speed,
        tick: batch_tick.wrapping_sub(back),
    };
    Ok(Burst { shape, count, angle0, span, div, offset })
}

impl ServerMsg {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::new();
        match self {
            ServerMsg::Welcome { version, player_id, tick, tick_rate, name, motd } => {
                w.u8(T_WELCOME);
                w.u16(*version);
                w.var(*player_id as u64);
                w.u32(*tick);
                w.u8(*tick_rate);
                w.str(&crate::protocol::names::clip(name, MAX_SERVER_NAME));
                w.str(&crate::protocol::names::clip(motd, MAX_MOTD));
            }
            ServerMsg::Notice { text } => {
                w.u8(T_NOTICE);
                w.str(&crate::protocol::names::clip(text, MAX_NOTICE));
            }
            ServerMsg::RunSummary(sum) => {
                use crate::sim::events::RunOutcome;
                w.u8(T_RUN_SUMMARY);
                w.str(&crate::protocol::names::clip(&sum.dungeon, 64));
                w.u8(match sum.outcome {
                    RunOutcome::Cleared => 0,
                    RunOutcome::Failed => 1,
                    RunOutcome::Abandoned => 2,
                    RunOutcome::Stopped => 3,
                });
                w.var(sum.ticks as u64);
                w.var(sum.team_score as u64);
                let rows = &sum.rows[..sum.rows.len().min(MAX_SUMMARY_ROWS)];
                w.var(rows.len() as u64);
                for r in rows {
                    w.var(r.id as u64);
                    w.str(&crate::protocol::names::clip(&r.name, MAX_NAME));
                    let st = &r.stats;
                    for v in
                        [r.score, st.damage, st.kills, st.grazes, st.hits_taken, st.downs, st.revives, st.flares_used]
                    {
                        w.var(v as u64);
                    }
                    w.u8(r.out as u8);
                }
            }
            ServerMsg::Records(list) => {
                w.u8(T_RECORDS);
                let list = &list[..list.len().min(MAX_SUMMARY_ROWS)];
                w.var(list.len() as u64);
                for r in list {
                    w.str(&crate::protocol::names::clip(&r.dungeon, 64));
                    w.var(r.best_time_cs as u64);
                    w.var(r.best_score as u64);
                    w.str(&crate::protocol::names::clip(&r.party, 100));
                }
            }
            ServerMsg::People(list) => {
                w.u8(T_PEOPLE);
                let list = &list[..list.len().min(MAX_PEOPLE)];
                w.var(list.len() as u64);
                for (name, place) in list {
                    w.str(&crate::protocol::names::clip(name, 24));
                    w.str(&crate::protocol::names::clip(place, 64));
                }
            }
            ServerMsg::RunStatus { flares, charge, grazes, score } => {
                w.u8(T_RUN_STATUS);
                w.u8(*flares);
                w.u8(*charge);
                w.var(*grazes as u64);
                w.var(*score as u64);
            }
            ServerMsg::Reject(r) => {
                w.u8(T_REJECT);
                match r {
                    RejectReason::VersionMismatch { server, client } => {
                        w.u8(1);
                        w.u16(*server);
                        w.u16(*client);
                    }
                    RejectReason::ContentTimeout => w.u8(2),
                    RejectReason::ServerFull { max } => {
                        w.u8(3);
                        w.u16(*max);
                    }
                    RejectReason::BadHello => w.u8(4),
                    RejectReason::Kicked { reason } => {
                        w.u8(5);
                        w.str(&crate::protocol::names::clip(reason, 255));
                    }
                    RejectReason::TooManyMalformed => w.u8(6),
                    RejectReason::Banned { reason } => {
                        w.u8(7);
                        w.str(&crate::protocol::names::clip(reason, 255));
                    }
                    RejectReason::Busy => w.u8(8),
                }
            }
            ServerMsg::ContentOffer { digest, raw_len, packed_len } => {
                w.u8(T_CONTENT_OFFER);
                w.bytes(&digest.0);
                w.var(*raw_len as u64);
                w.var(*packed_len as u64);
            }
            ServerMsg::ContentUpdate { digest, raw_len, packed_len } => {
                w.u8(T_CONTENT_UPDATE);
                w.bytes(&digest.0);
                w.var(*raw_len as u64);
                w.var(*packed_len as u64);
            }
            ServerMsg::ContentChunk { offset, data } => {
                w.u8(T_CONTENT_CHUNK);
                w.var(*offset as u64);
                let d = &data[..data.len().min(CONTENT_CHUNK)];
                w.var(d.len() as u64);
                w.bytes(d);
            }
            ServerMsg::Stats { inputs_dropped, ticks_coasted } => {
                w.u8(T_STATS);
                w.var(*inputs_dropped as u64);
                w.var(*ticks_coasted as u64);
            }
            ServerMsg::Enter { instance, tick, dungeon, arena } => {
                w.u8(T_ENTER);
                w.var(*instance as u64);
                w.u32(*tick);
                w.str(dungeon);
                w.u16(arena.0);
                w.u16(arena.1);
            }
            ServerMsg::Roster { instance, players } => {
                w.u8(T_ROSTER);
                w.var(*instance as u64);
                w.var(players.len() as u64);
                for (id, name, ship) in players {
                    w.var(*id as u64);
                    w.str(name);
                    w.var(*ship as u64);
                }
            }
            ServerMsg::Events { tick, events } => {
                w.u8(T_EVENTS);
                w.var(*tick as u64);
                let mut prev = 0u32;
                let mut last_spawn: Option<&BulletSpawn> = None;
                let mut k = 0;
                while k < events.len() {
                    let e = &events[k];
                    k += 1;
                    match e {
                        WireEvent::Spawn(s) => {
                            w.u8(1);
                            write_spawn(&mut w, s, *tick, prev, last_spawn);
                            prev = s.uid;
                            last_spawn = Some(s);
                        }
                        WireEvent::Burst(b) => {
                            w.u8(8);
                            write_burst(&mut w, b, *tick, prev);
                            prev = b.last_uid();
                            last_spawn = Some(&b.shape);
                        }
                        WireEvent::Hit { uid, target: WireTarget::Boss } => {
                            // A run of hits on the boss: one tag, one count.
                            let run = events[k..]
                                .iter()
                                .take_while(|e| matches!(e, WireEvent::Hit { target: WireTarget::Boss, .. }))
                                .count();
                            w.u8(9);
                            w.var(run as u64 + 1);
                            w.svar(*uid as i64 - prev as i64);
                            prev = *uid;
                            for e in &events[k..k + run] {
                                if let WireEvent::Hit { uid, .. } = e {
                                    w.svar(*uid as i64 - prev as i64);
                                    prev = *uid;
                                }
                            }
                            k += run;
                        }
                        WireEvent::Hit { uid, target } => {
                            w.u8(2);
                            w.svar(*uid as i64 - prev as i64);
                            prev = *uid;
                            write_target(&mut w, *target);
                        }
                        WireEvent::Despawn { uid } => {
                            w.u8(3);
                            w.svar(*uid as i64 - prev as i64);
                            prev = *uid;
                        }
                        WireEvent::Death { target } => {
                            w.u8(4);
                            write_target(&mut w, *target);
                        }
                        WireEvent::Phase { phase } => {
                            w.u8(5);
                            w.u8(*phase);
                        }
                        WireEvent::Cleared => w.u8(6),
                        WireEvent::Sfx { name, pos } => {
                            w.u8(7);
                            w.str(name);
                            w.i16(grid::pos_q(pos.x));
                            w.i16(grid::pos_q(pos.y));
                        }
                        WireEvent::Flare { player, tick: at, pos } => {
                            w.u8(10);
                            w.var(*player as u64);
                            w.svar(*at as i64 - *tick as i64);
                            w.u32(pos.x.to_bits());
                            w.u32(pos.y.to_bits());
                        }
                        WireEvent::Out { player } => {
                            w.u8(11);
                            w.var(*player as u64);
                        }
                        WireEvent::Revived { player, by } => {
                            w.u8(12);
                            w.var(*player as u64);
                            w.var(*by as u64);
                        }
                        WireEvent::Wave { wave } => {
                            w.u8(13);
                            w.var(*wave as u64);
                        }
                        WireEvent::Hint { text } => {
                            w.u8(15);
                            w.str(text);
                        }
                        WireEvent::Telegraph(t) => {
                            w.u8(14);
                            w.i16(grid::pos_q(t.pos.x));
                            w.i16(grid::pos_q(t.pos.y));
                            w.u16((t.angle.rem_euclid(360.0) / 360.0 * 65536.0).round() as u32 as u16);
                            w.u16(t.length.clamp(0.0, crate::sim::script::TELEGRAPH_LENGTH_MAX).round() as u16);
                            w.u8(t.width.clamp(0.0, crate::sim::script::TELEGRAPH_WIDTH_MAX).round() as u8);
                            w.u8(t.ticks.min(crate::sim::script::TELEGRAPH_TICKS_MAX));
                            w.u8(t.kind());
                        }
                    }
                }
            }
            ServerMsg::Snapshot(s) => {
                w.u8(T_SNAPSHOT);
                w.var(s.instance as u64);
                w.var(s.tick as u64);
                let back = s.base.map_or(0, |b| s.tick.wrapping_sub(b));
                let ack = s.last_input_tick.map_or(0, |l| s.tick.wrapping_sub(l) as u64 + 1);
                if back % SNAPSHOT_STEP == 0 && back / SNAPSHOT_STEP < 15 && ack < 16 {
                    w.u8(((back / SNAPSHOT_STEP) as u8) << 4 | ack as u8);
                } else {
                    w.u8(0xf0);
                    w.var(back as u64);
                    w.var(ack);
                }
                match &s.report {
                    None => w.u8(0),
                    Some(r) if r.late == 0 && r.missing == 0 && r.max_need < MAX_REPORTED_NEED - 1 => {
                        w.u8(1 + r.max_need)
                    }
                    Some(r) => {
                        w.u8(128 + r.max_need.min(MAX_REPORTED_NEED));
                        w.var(r.late as u64);
                        w.var(r.missing as u64);
                    }
                }
                w.u8(s.players.len().min(MAX_SNAPSHOT_PLAYERS) as u8);
                for p in s.players.iter().take(MAX_SNAPSHOT_PLAYERS) {
                    write_player(&mut w, p);
                }
                write_boss(&mut w, &s.boss);
                let n = s.enemies.len().min(MAX_SNAPSHOT_ENEMIES);
                for e in &s.enemies[..n] {
                    write_enemy(&mut w, e);
                }
            }
        }
        w.buf
    }

    pub fn decode(data: &[u8]) -> Result<ServerMsg, DecodeError> {
        if data.len() > MAX_PACKET {
            return Err(DecodeError::TooLarge(data.len()));
        }
        let mut r = Reader::new(data);
        let msg = match r.u8()? {
            T_WELCOME => ServerMsg::Welcome {
                version: r.u16()?,
                player_id: r.var_u32("player id")?,
                tick: r.u32()?,
                tick_rate: r.u8()?,
                name: r.str(MAX_SERVER_NAME, "server name")?,
                motd: r.str(MAX_MOTD, "motd")?,
            },
            T_NOTICE => ServerMsg::Notice { text: r.str(MAX_NOTICE, "notice")? },
            T_RUN_SUMMARY => {
                use crate::sim::events::{RunOutcome, RunRow, RunSummary};
                use crate::sim::player::RunStats;
                let dungeon = r.str(64, "dungeon")?;
                let outcome = match r.u8()? {
                    0 => RunOutcome::Cleared,
                    1 => RunOutcome::Failed,
                    2 => RunOutcome::Abandoned,
                    3 => RunOutcome::Stopped,
                    _ => return Err(DecodeError::BadValue("run outcome")),
                };
                let ticks = r.var_u32("ticks")?;
                let team_score = r.var_u32("score")?;
                let n = r.count(MAX_SUMMARY_ROWS, 11, "rows")?;
                let mut rows = Vec::with_capacity(n);
                for _ in 0..n {
                    let id = r.var_u32("player")?;
                    let name = r.str(MAX_NAME, "name")?;
                    let mut v = [0u32; 8];
                    for x in v.iter_mut() {
                        *x = r.var_u32("count")?;
                    }
                    let out = match r.u8()? {
                        0 => false,
                        1 => true,
                        _ => return Err(DecodeError::BadValue("out")),
                    };
                    let stats = RunStats {
                        damage: v[1],
                        kills: v[2],
                        grazes: v[3],
                        hits_taken: v[4],
                        downs: v[5],
                        revives: v[6],
                        flares_used: v[7],
                    };
                    rows.push(RunRow { id, name, score: v[0], stats, out });
                }
                ServerMsg::RunSummary(RunSummary { dungeon, outcome, ticks, team_score, rows })
            }
            T_PEOPLE => {
                let n = r.count(MAX_PEOPLE, 2, "people")?;
                let mut list = Vec::with_capacity(n);
                for _ in 0..n {
                    list.push((r.str(24, "name")?, r.str(64, "place")?));
                }
                ServerMsg::People(list)
            }
            T_RECORDS => {
                let n = r.count(MAX_SUMMARY_ROWS, 4, "records")?;
                let mut list = Vec::with_capacity(n);
                for _ in 0..n {
                    list.push(ServerRecord {
                        dungeon: r.str(64, "dungeon")?,
                        best_time_cs: r.var_u32("time")?,
                        best_score: r.var_u32("score")?,
                        party: r.str(100, "party")?,
                    });
                }
                ServerMsg::Records(list)
            }
            T_RUN_STATUS => ServerMsg::RunStatus {
                flares: r.u8()?,
                charge: r.u8()?,
                grazes: r.var_u32("grazes")?,
                score: r.var_u32("score")?,
            },
            T_REJECT => ServerMsg::Reject(match r.u8()? {
                1 => RejectReason::VersionMismatch { server: r.u16()?, client: r.u16()? },
                2 => RejectReason::ContentTimeout,
                3 => RejectReason::ServerFull { max: r.u16()? },
                4 => RejectReason::BadHello,
                5 => RejectReason::Kicked { reason: r.str(255, "reason")? },
                6 => RejectReason::TooManyMalformed,
                7 => RejectReason::Banned { reason: r.str(255, "reason")? },
                8 => RejectReason::Busy,
                _ => return Err(DecodeError::BadValue("reject code")),
            }),
            T_CONTENT_OFFER => ServerMsg::ContentOffer {
                digest: ContentDigest(r.array()?),
                raw_len: r.var_u32("content size")?,
                packed_len: r.var_u32("content size")?,
            },
            T_CONTENT_UPDATE => ServerMsg::ContentUpdate {
                digest: ContentDigest(r.array()?),
                raw_len: r.var_u32("content size")?,
                packed_len: r.var_u32("content size")?,
            },
            T_CONTENT_CHUNK => {
                let offset = r.var_u32("content offset")?;
                let n = r.count(CONTENT_CHUNK, 1, "content chunk")?;
                if n == 0 {
                    return Err(DecodeError::BadValue("content chunk"));
                }
                ServerMsg::ContentChunk { offset, data: r.bytes(n)?.to_vec() }
            }
            T_STATS => ServerMsg::Stats { inputs_dropped: r.var_u32("stats")?, ticks_coasted: r.var_u32("stats")? },
            T_ENTER => ServerMsg::Enter {
                instance: r.var_u32("instance")?,
                tick: r.u32()?,
                dungeon: r.str(64, "dungeon")?,
                arena: (r.u16()?, r.u16()?),
            },
            T_ROSTER => {
                let instance = r.var_u32("instance")?;
                let n = r.count(MAX_LIST, 3, "roster")?;
                let mut players = Vec::with_capacity(n);
                for _ in 0..n {
                    let (id, name) = (r.var_u32("id")?, r.str(MAX_NAME, "name")?);
                    let ship = u16::try_from(r.var()?).map_err(|_| DecodeError::BadValue("ship"))?;
                    players.push((id, name, ship));
                }
                ServerMsg::Roster { instance, players }
            }
            T_EVENTS => {
                let tick = r.var_u32("tick")?;
                let mut events = Vec::new();
                let mut prev = 0u32;
                let mut last_spawn: Option<BulletSpawn> = None;
                while r.remaining() > 0 {
                    let e = match r.u8()? {
                        1 => {
                            let s = read_spawn(&mut r, tick, prev, last_spawn.as_ref())?;
                            prev = s.uid;
                            last_spawn = Some(s);
                            WireEvent::Spawn(s)
                        }
                        8 => {
                            let b = read_burst(&mut r, tick, prev)?;
                            prev = b.last_uid();
                            last_spawn = Some(b.shape);
                            WireEvent::Burst(b)
                        }
                        2 => {
                            let uid = next_uid(prev, r.svar()?)?;
                            prev = uid;
                            WireEvent::Hit { uid, target: read_target(&mut r)? }
                        }
                        9 => {
                            let n = r.count(MAX_PACKET, 1, "hits")?;
                            if n == 0 {
                                return Err(DecodeError::BadValue("hits"));
                            }
                            for _ in 1..n {
                                let uid = next_uid(prev, r.svar()?)?;
                                prev = uid;
                                events.push(WireEvent::Hit { uid, target: WireTarget::Boss });
                            }
                            let uid = next_uid(prev, r.svar()?)?;
                            prev = uid;
                            WireEvent::Hit { uid, target: WireTarget::Boss }
                        }
                        3 => {
                            let uid = next_uid(prev, r.svar()?)?;
                            prev = uid;
                            WireEvent::Despawn { uid }
                        }
                        4 => WireEvent::Death { target: read_target(&mut r)? },
                        5 => WireEvent::Phase { phase: r.u8()? },
                        6 => WireEvent::Cleared,
                        7 => {
                            let name = r.str(64, "sfx")?;
                            let pos = Vec2::new(r.i16()? as f32 / grid::POS, r.i16()? as f32 / grid::POS);
                            WireEvent::Sfx { name, pos }
                        }
                        10 => {
                            let player = r.var_u32("player")?;
                            let at = (tick as i64 + r.svar()?).clamp(0, u32::MAX as i64) as u32;
                            let pos = Vec2::new(f32::from_bits(r.u32()?), f32::from_bits(r.u32()?));
                            if !pos.x.is_finite() || !pos.y.is_finite() {
                                return Err(DecodeError::BadValue("flare position"));
                            }
                            WireEvent::Flare { player, tick: at, pos }
                        }
                        11 => WireEvent::Out { player: r.var_u32("player")? },
                        12 => WireEvent::Revived { player: r.var_u32("player")?, by: r.var_u32("player")? },
                        13 => WireEvent::Wave { wave: r.var_u32("wave")? },
                        15 => {
                            let text = r.str(crate::sim::script::HINT_MAX_BYTES, "hint")?;
                            if text.is_empty() {
                                return Err(DecodeError::BadValue("hint"));
                            }
                            WireEvent::Hint { text }
                        }
                        14 => {
                            let pos = Vec2::new(r.i16()? as f32 / grid::POS, r.i16()? as f32 / grid::POS);
                            let angle = r.u16()? as f32 / 65536.0 * 360.0;
                            let length = r.u16()? as f32;
                            let width = r.u8()? as f32;
                            let (ticks, kind) = (r.u8()?, r.u8()?);
                            let t = crate::sim::script::Telegraph::decoded(pos, angle, length, width, ticks, kind);
                            WireEvent::Telegraph(t.ok_or(DecodeError::BadValue("telegraph"))?)
                        }
                        _ => return Err(DecodeError::BadValue("event tag")),
                    };
                    events.push(e);
                }
                ServerMsg::Events { tick, events }
            }
            T_SNAPSHOT => {
                let instance = r.var_u32("instance")?;
                let tick = r.var_u32("tick")?;
                let packed = r.u8()?;
                let (back, ack) = if packed >> 4 == 15 {
                    if packed != 0xf0 {
                        return Err(DecodeError::BadValue("snapshot base"));
                    }
                    (r.var_u32("snapshot base")?, r.var()?)
                } else {
                    ((packed >> 4) as u32 * SNAPSHOT_STEP, (packed & 15) as u64)
                };
                let base = (back != 0).then(|| tick.wrapping_sub(back));
                let last_input_tick = match ack {
                    0 => None,
                    a => Some(tick.wrapping_sub(u32::try_from(a - 1).map_err(|_| DecodeError::BadValue("ack"))?)),
                };
                let report = match r.u8()? {
                    0 => None,
                    v @ 1..=127 => Some(InputReport { max_need: v - 1, late: 0, missing: 0 }),
                    v => Some(InputReport {
                        max_need: v - 128,
                        late: r.var_u32("input report")?,
                        missing: r.var_u32("input report")?,
                    }),
                };
                let np = r.u8()? as usize;
                if np > MAX_SNAPSHOT_PLAYERS || np * 2 > r.remaining() {
                    return Err(DecodeError::BadValue("players"));
                }
                let players = (0..np).map(|_| read_player(&mut r)).collect::<Result<Vec<_>, _>>()?;
                let boss = read_boss(&mut r)?;
                let mut enemies = Vec::new();
                while r.remaining() > 0 {
                    if enemies.len() >= MAX_SNAPSHOT_ENEMIES {
                        return Err(DecodeError::BadValue("enemies"));
                    }
                    enemies.push(read_enemy(&mut r)?);
                }
                ServerMsg::Snapshot(SnapshotMsg {
                    instance,
                    tick,
                    base,
                    last_input_tick,
                    report,
                    players,
                    boss,
                    enemies,
                })
            }
            t => return Err(DecodeError::UnknownType(t)),
        };
        r.finish()?;
        Ok(msg)
    }
}
