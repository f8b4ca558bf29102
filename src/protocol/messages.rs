//! Every message on the wire, one enum per direction, each with its hand-written layout.
//! Integers are little-endian; `var` is an unsigned LEB128 varint, `svar` a zigzag one;
//! `str` is a u8 length and UTF-8 bytes. Byte 0 of every packet is the message type.
//!
//! Server-only simulation events (instance transfers, instance open/close, players
//! removed) have no variant here and so cannot be encoded or sent, by construction.

use super::content::{ContentDigest, CONTENT_CHUNK};
use super::wire::{DecodeError, Reader, Writer};
use crate::sim::bullets::{grid, BulletSpawn, Team};
use crate::sim::player::BTN_MASK;
use crate::sim::{InputFrame, Vec2};

/// Longest player name, bytes.
pub const MAX_NAME: usize = 24;
/// Most frames in one `Input` message (the newest plus two redundant copies).
pub const INPUT_REDUNDANCY: usize = 3;
/// Most entries any list in a message may claim.
pub const MAX_LIST: usize = 4096;
/// Most enemies one snapshot carries (more are left out: snapshots must fit one datagram).
pub const MAX_SNAPSHOT_ENEMIES: usize = 96;
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
    /// Type 3, CONTROL. Answer to `ContentOffer` when the client has no copy: "send it".
    /// `u8 type`.
    ContentWant,
    /// Type 4, CONTROL. The client holds and has validated the offered content (from its
    /// cache or from the chunks just received): let it in. `u8 type, [u8; 32] digest`.
    ContentReady { digest: ContentDigest },
    /// Type 2, channel INPUT, unreliable sequenced. Legal after `Welcome`, every tick.
    /// `u8 type, u8 n (1..=3), u32 newest_tick, n x (i8 mx, i8 my, u16 aim, u8 buttons)`,
    /// newest first; frame k is for tick `newest_tick - k`. 21 bytes with 3 frames.
    Input { newest_tick: u32, frames: Vec<WireInput> },
}

pub const T_HELLO: u8 = 1;
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
            ClientMsg::ContentWant => w.u8(T_CONTENT_WANT),
            ClientMsg::ContentReady { digest } => {
                w.u8(T_CONTENT_READY);
                w.bytes(&digest.0);
            }
            ClientMsg::Input { newest_tick, frames } => {
                w.u8(T_INPUT);
                w.u8(frames.len().min(INPUT_REDUNDANCY) as u8);
                w.u32(*newest_tick);
                for f in frames.iter().take(INPUT_REDUNDANCY) {
                    w.i8(f.mx);
                    w.i8(f.my);
                    w.u16(f.aim);
                    w.u8(f.buttons);
                }
            }
        }
        w.buf
    }

    /// The version a Hello claims, read before anything else in it.
    pub fn hello_version(data: &[u8]) -> Option<u16> {
        let mut r = Reader::new(data);
        (r.u8().ok()? == T_HELLO).then(|| r.u16().ok()).flatten()
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
            T_CONTENT_WANT => ClientMsg::ContentWant,
            T_CONTENT_READY => ClientMsg::ContentReady { digest: ContentDigest(r.array()?) },
            T_INPUT => {
                let n = r.u8()? as usize;
                if !(1..=INPUT_REDUNDANCY).contains(&n) {
                    return Err(DecodeError::BadValue("input count"));
                }
                let newest_tick = r.u32()?;
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
                ClientMsg::Input { newest_tick, frames }
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

#[derive(Clone, Debug, PartialEq)]
pub struct Snapshot {
    pub instance: u32,
    pub tick: u32,
    /// The newest input tick of the receiving player the server has consumed.
    pub last_input_tick: Option<u32>,
    pub players: Vec<SnapPlayer>,
    pub enemies: Vec<SnapEnemy>,
    pub boss: Option<SnapBoss>,
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
}

#[derive(Clone, Debug, PartialEq)]
pub enum ServerMsg {
    /// Type 10, CONTROL, reliable. Answer to a good Hello.
    /// `u8 type, u16 version, var player_id, u32 tick, u8 tick_rate`.
    Welcome { version: u16, player_id: u32, tick: u32, tick_rate: u8 },
    /// Type 11, CONTROL, reliable, then the server disconnects.
    /// `u8 type, u8 code, payload` (1 version: u16 server, u16 client; 2 content timeout; 3 full:
    /// u16 max; 4 bad hello; 5 kicked: str reason; 6 malformed).
    Reject(RejectReason),
    /// Type 13, CONTROL. Answer to a Hello whose content digest differs from the server's:
    /// the client-side content it must use, by digest and size. The client answers
    /// `ContentReady` (cached) or `ContentWant`, or leaves (too large).
    /// `u8 type, [u8; 32] digest, var raw_len, var packed_len`.
    ContentOffer { digest: ContentDigest, raw_len: u32, packed_len: u32 },
    /// Type 14, CONTROL, after `ContentWant`: the deflated content in order, at most
    /// `CONTENT_CHUNK` bytes each. `u8 type, var offset, var n, n bytes`.
    ContentChunk { offset: u32, data: Vec<u8> },
    /// Type 12, CONTROL, reliable, about once a second.
    /// `u8 type, var inputs_dropped, var ticks_coasted` (cumulative for this player).
    Stats { inputs_dropped: u32, ticks_coasted: u32 },
    /// Type 20, EVENTS, reliable ordered. The receiver is now in this instance: drop every
    /// bullet and entity of the old one. Followed by the bullets already in flight.
    /// `u8 type, var instance, u32 tick, str dungeon ("" = hub), u16 arena_w, u16 arena_h`.
    Enter { instance: u32, tick: u32, dungeon: String, arena: (u16, u16) },
    /// Type 21, EVENTS. Who is in the receiver's instance, whenever that changes.
    /// `u8 type, var instance, var n, n x (var id, str name)`.
    Roster { instance: u32, players: Vec<(u32, String)> },
    /// Type 22, EVENTS. What happened in the receiver's instance in one tick (or the
    /// bullets in flight right after `Enter`).
    /// `u8 type, var instance, u32 tick, var n, n x event` where an event is a u8 tag:
    /// 1 spawn: `u8 flags, svar uid_delta, var kind, i16 x, i16 y, u16 angle, u16 speed,
    ///   u8 radius, var lifetime, [i16 accel] [i16 turn] [u16 max_speed] [var tick_back]`
    ///   (flags: 1 player team, 2 accel, 4 turn, 8 max speed, 16 tick differs; values on
    ///   the `sim::bullets::grid` steps; about 15 bytes), or, with flag 32 (a repeat of the
    ///   previous spawn in this batch but for uid, position, angle and tick):
    ///   `u8 flags, svar uid_delta, i16 x, i16 y, u16 angle, [var tick_back]` (8 bytes);
    /// 2 hit: `svar uid_delta, target`; 3 despawn: `svar uid_delta`; 4 death: `target`;
    /// 5 phase: `u8`; 6 cleared; 7 sfx: `str name, i16 x, i16 y`.
    /// A target is `u8 kind (0 player, 1 enemy, 2 boss), [var id]`. Uid deltas are from the
    /// previous uid in the batch (0 at the start).
    Events { instance: u32, tick: u32, events: Vec<WireEvent> },
    /// Type 30, SNAPSHOT, unreliable sequenced, 20 Hz, newest wins.
    /// `u8 type, var instance, u32 tick, var ack (0 none, else tick - last_input_tick + 1),
    /// u8 n, n x player (var id, u16 x, u16 y, u8 hp, u8 flags, u8 escape, u8 aim),
    /// var m, m x enemy (var id, var def, u16 x, u16 y, var hp),
    /// u8 has_boss, [var def, u16 x, u16 y, var hp, var max_hp, u8 phase]`.
    /// Positions on a 1/8 px grid.
    Snapshot(Snapshot),
}

pub const T_WELCOME: u8 = 10;
pub const T_REJECT: u8 = 11;
pub const T_STATS: u8 = 12;
pub const T_CONTENT_OFFER: u8 = 13;
pub const T_CONTENT_CHUNK: u8 = 14;
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
    let mut flags = 0u8;
    if s.team == Team::Player {
        flags |= 1;
    }
    if s.accel != 0.0 {
        flags |= 2;
    }
    if s.turn != 0.0 {
        flags |= 4;
    }
    if s.max_speed.is_finite() {
        flags |= 8;
    }
    if s.tick != batch_tick {
        flags |= 16;
    }
    w.u8(flags);
    w.svar(s.uid as i64 - prev_uid as i64);
    w.var(s.kind as u64);
    w.i16(grid::pos_q(s.pos.x));
    w.i16(grid::pos_q(s.pos.y));
    w.u16(grid::angle_q(s.angle));
    w.u16(grid::speed_q(s.speed));
    w.u8(grid::radius_q(s.radius));
    w.var(s.lifetime as u64);
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

fn read_spawn(
    r: &mut Reader,
    batch_tick: u32,
    prev_uid: u32,
    prev: Option<&BulletSpawn>,
) -> Result<BulletSpawn, DecodeError> {
    let flags = r.u8()?;
    if flags & !63 != 0 {
        return Err(DecodeError::BadValue("spawn flags"));
    }
    if flags & 32 != 0 {
        if flags & 15 != 0 {
            return Err(DecodeError::BadValue("spawn flags"));
        }
        let p = prev.ok_or(DecodeError::BadValue("repeat spawn with nothing to repeat"))?;
        let uid = u32::try_from(prev_uid as i64 + r.svar()?).map_err(|_| DecodeError::BadValue("uid"))?;
        let pos = Vec2::new(r.i16()? as f32 / grid::POS, r.i16()? as f32 / grid::POS);
        let angle = r.u16()? as f32 / grid::ANGLE;
        let back = if flags & 16 != 0 { r.var_u32("tick")? } else { 0 };
        return Ok(BulletSpawn { uid, pos, angle, tick: batch_tick.wrapping_sub(back), ..*p });
    }
    let uid = u32::try_from(prev_uid as i64 + r.svar()?).map_err(|_| DecodeError::BadValue("uid"))?;
    let kind = u16::try_from(r.var()?).map_err(|_| DecodeError::BadValue("kind"))?;
    let x = r.i16()? as f32 / grid::POS;
    let y = r.i16()? as f32 / grid::POS;
    let angle = r.u16()? as f32 / grid::ANGLE;
    let speed = r.u16()? as f32 / grid::SPEED;
    let radius = r.u8()?.max(1) as f32 / grid::RADIUS;
    let lifetime = u16::try_from(r.var()?).map_err(|_| DecodeError::BadValue("lifetime"))?;
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

impl ServerMsg {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::new();
        match self {
            ServerMsg::Welcome { version, player_id, tick, tick_rate } => {
                w.u8(T_WELCOME);
                w.u16(*version);
                w.var(*player_id as u64);
                w.u32(*tick);
                w.u8(*tick_rate);
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
                        w.str(reason);
                    }
                    RejectReason::TooManyMalformed => w.u8(6),
                }
            }
            ServerMsg::ContentOffer { digest, raw_len, packed_len } => {
                w.u8(T_CONTENT_OFFER);
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
                for (id, name) in players {
                    w.var(*id as u64);
                    w.str(name);
                }
            }
            ServerMsg::Events { instance, tick, events } => {
                w.u8(T_EVENTS);
                w.var(*instance as u64);
                w.u32(*tick);
                w.var(events.len() as u64);
                let mut prev = 0u32;
                let mut last_spawn: Option<&BulletSpawn> = None;
                for e in events {
                    match e {
                        WireEvent::Spawn(s) => {
                            w.u8(1);
                            write_spawn(&mut w, s, *tick, prev, last_spawn);
                            prev = s.uid;
                            last_spawn = Some(s);
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
                    }
                }
            }
            ServerMsg::Snapshot(s) => {
                w.u8(T_SNAPSHOT);
                w.var(s.instance as u64);
                w.u32(s.tick);
                w.var(s.last_input_tick.map_or(0, |l| s.tick.wrapping_sub(l) as u64 + 1));
                w.u8(s.players.len().min(255) as u8);
                for p in s.players.iter().take(255) {
                    w.var(p.id as u64);
                    w.u16(snap_pos_q(p.pos.x));
                    w.u16(snap_pos_q(p.pos.y));
                    w.u8(p.hp);
                    w.u8(p.flags);
                    w.u8(p.escape);
                    w.u8(p.aim);
                }
                let n = s.enemies.len().min(MAX_SNAPSHOT_ENEMIES);
                w.var(n as u64);
                for e in &s.enemies[..n] {
                    w.var(e.id as u64);
                    w.var(e.def as u64);
                    w.u16(snap_pos_q(e.pos.x));
                    w.u16(snap_pos_q(e.pos.y));
                    w.var(e.hp as u64);
                }
                match &s.boss {
                    None => w.u8(0),
                    Some(b) => {
                        w.u8(1);
                        w.var(b.def as u64);
                        w.u16(snap_pos_q(b.pos.x));
                        w.u16(snap_pos_q(b.pos.y));
                        w.var(b.hp as u64);
                        w.var(b.max_hp as u64);
                        w.u8(b.phase);
                    }
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
            },
            T_REJECT => ServerMsg::Reject(match r.u8()? {
                1 => RejectReason::VersionMismatch { server: r.u16()?, client: r.u16()? },
                2 => RejectReason::ContentTimeout,
                3 => RejectReason::ServerFull { max: r.u16()? },
                4 => RejectReason::BadHello,
                5 => RejectReason::Kicked { reason: r.str(255, "reason")? },
                6 => RejectReason::TooManyMalformed,
                _ => return Err(DecodeError::BadValue("reject code")),
            }),
            T_CONTENT_OFFER => ServerMsg::ContentOffer {
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
                let n = r.count(MAX_LIST, 2, "roster")?;
                let mut players = Vec::with_capacity(n);
                for _ in 0..n {
                    players.push((r.var_u32("id")?, r.str(MAX_NAME, "name")?));
                }
                ServerMsg::Roster { instance, players }
            }
            T_EVENTS => {
                let instance = r.var_u32("instance")?;
                let tick = r.u32()?;
                let n = r.count(MAX_PACKET, 1, "events")?;
                let mut events = Vec::with_capacity(n);
                let mut prev = 0u32;
                let mut last_spawn: Option<BulletSpawn> = None;
                for _ in 0..n {
                    let e = match r.u8()? {
                        1 => {
                            let s = read_spawn(&mut r, tick, prev, last_spawn.as_ref())?;
                            prev = s.uid;
                            last_spawn = Some(s);
                            WireEvent::Spawn(s)
                        }
                        2 => {
                            let uid =
                                u32::try_from(prev as i64 + r.svar()?).map_err(|_| DecodeError::BadValue("uid"))?;
                            prev = uid;
                            WireEvent::Hit { uid, target: read_target(&mut r)? }
                        }
                        3 => {
                            let uid =
                                u32::try_from(prev as i64 + r.svar()?).map_err(|_| DecodeError::BadValue("uid"))?;
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
                        _ => return Err(DecodeError::BadValue("event tag")),
                    };
                    events.push(e);
                }
                ServerMsg::Events { instance, tick, events }
            }
            T_SNAPSHOT => {
                let instance = r.var_u32("instance")?;
                let tick = r.u32()?;
                let ack = r.var()?;
                let last_input_tick = match ack {
                    0 => None,
                    a => Some(tick.wrapping_sub(u32::try_from(a - 1).map_err(|_| DecodeError::BadValue("ack"))?)),
                };
                let np = r.u8()? as usize;
                if np * 9 > r.remaining() {
                    return Err(DecodeError::Truncated);
                }
                let mut players = Vec::with_capacity(np);
                for _ in 0..np {
                    players.push(SnapPlayer {
                        id: r.var_u32("player id")?,
                        pos: Vec2::new(r.u16()? as f32 / SNAP_POS, r.u16()? as f32 / SNAP_POS),
                        hp: r.u8()?,
                        flags: r.u8()?,
                        escape: r.u8()?,
                        aim: r.u8()?,
                    });
                }
                let ne = r.count(MAX_SNAPSHOT_ENEMIES, 7, "enemies")?;
                let mut enemies = Vec::with_capacity(ne);
                for _ in 0..ne {
                    enemies.push(SnapEnemy {
                        id: r.var_u32("enemy id")?,
                        def: u16::try_from(r.var()?).map_err(|_| DecodeError::BadValue("enemy def"))?,
                        pos: Vec2::new(r.u16()? as f32 / SNAP_POS, r.u16()? as f32 / SNAP_POS),
                        hp: r.var_u32("enemy hp")?,
                    });
                }
                let boss = match r.u8()? {
                    0 => None,
                    1 => Some(SnapBoss {
                        def: u16::try_from(r.var()?).map_err(|_| DecodeError::BadValue("boss def"))?,
                        pos: Vec2::new(r.u16()? as f32 / SNAP_POS, r.u16()? as f32 / SNAP_POS),
                        hp: r.var_u32("boss hp")?,
                        max_hp: r.var_u32("boss hp")?,
                        phase: r.u8()?,
                    }),
                    _ => return Err(DecodeError::BadValue("boss flag")),
                };
                ServerMsg::Snapshot(Snapshot { instance, tick, last_input_tick, players, enemies, boss })
            }
            t => return Err(DecodeError::UnknownType(t)),
        };
        r.finish()?;
        Ok(msg)
    }
}
