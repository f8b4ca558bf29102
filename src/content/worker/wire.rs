//! The frames between the server and a script worker: `[u32 length][u8 type][payload]`,
//! little-endian, over the worker's stdin and stdout. The worker's answers are untrusted
//! input (a mod that escaped Lua would control them): decoding is bounded, never panics,
//! and refuses any command the in-process API could not have produced.

use std::collections::BTreeMap;

use crate::content::lua::{EmitterSource, MAX_LOG_BYTES, MAX_PATTERN_SHOTS, MAX_SFX_NAME};
use crate::protocol::wire::{DecodeError, Reader, Writer};
use crate::sim::defs::ArgValue;
use crate::sim::script::{BurstCmd, Owner, OwnerView, PlayerView, ScriptCmd, ScriptMessage, ShotCmd};
use crate::sim::Vec2;

/// Server to worker: everything the worker needs, once.
pub const T_INIT: u8 = 1;
/// Server to worker: one tick (the starts and stops since the last, then the view).
pub const T_TICK: u8 = 2;
/// Worker to server: ready, with what the operating system holds it to.
pub const T_READY: u8 = 11;
/// Worker to server: one tick's commands and messages.
pub const T_DONE: u8 = 12;
/// Worker to server: it is about to die (a panic), and why.
pub const T_FATAL: u8 = 13;
/// Worker to server: the tick's new emitters are set up (sent only when it started some);
/// the tick's own budget starts now.
pub const T_SETUP: u8 = 14;

/// Largest frame a worker reads (from the server: the init frame carries every untrusted
/// mod's emitter sources, up to 16 MiB a mod).
pub const MAX_FRAME: usize = 1 << 30;
/// Largest frame the server reads from a worker (an answer is at most a few thousand
/// commands per mod, well under this).
pub const MAX_ANSWER: usize = 4 << 20;
/// What one mod's scripts may put in one answer, as the Lua API holds them: bullets
/// (a burst counts its bullets), spawns, commands of any kind, and messages (16 log lines
/// and the errors of the tasks that failed).
pub const SHOTS_PER_MOD: usize = crate::content::lua::MAX_SHOTS_PER_TICK;
pub const SPAWNS_PER_MOD: usize = crate::content::lua::MAX_SPAWNS_PER_TICK;
pub const CMDS_PER_MOD: usize = 16_384;
pub const MSGS_PER_MOD: usize = 16 + crate::content::lua::MAX_TASKS;
/// Longest `move_to` the API takes, ticks.
pub const MAX_MOVE_TICKS: u32 = 36_000;
/// Longest message (an error can quote a few positions and a path).
pub const MAX_MESSAGE_BYTES: usize = 4 * MAX_LOG_BYTES + 1024;

/// What a worker is handed at start.
#[derive(Clone, Debug, PartialEq)]
pub struct Init {
    pub seed: u64,
    /// Bullet kinds: (name, radius, damage), in index order.
    pub kinds: Vec<(String, f32, i32)>,
    pub enemies: Vec<String>,
    pub sounds: Vec<String>,
    pub emitters: BTreeMap<String, EmitterSource>,
}

/// A start or stop, in the order the instance made them.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    Start { owner: Owner, group: u32, name: String, args: Option<ArgValue> },
    Stop { owner: Owner, group: Option<u32> },
}

/// One tick's request.
#[derive(Clone, Debug, PartialEq)]
pub struct TickReq {
    pub tick: u32,
    pub arena: Vec2,
    pub party: u32,
    pub players: Vec<PlayerView>,
    pub owners: Vec<OwnerView>,
    pub ops: Vec<Op>,
}

/// One tick's answer.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Answer {
    pub cmds: Vec<ScriptCmd>,
    pub msgs: Vec<ScriptMessage>,
    pub tasks: u32,
}

/// Starts a frame of type `t` (the length is filled in by [`finish`]).
pub fn begin(t: u8) -> Writer {
    let mut w = Writer::new();
    w.u32(0);
    w.u8(t);
    w
}

/// Fills in the length of a frame begun with [`begin`].
pub fn finish(mut w: Writer) -> Vec<u8> {
    let n = (w.buf.len() - 4) as u32;
    w.buf[..4].copy_from_slice(&n.to_le_bytes());
    w.buf
}

/// A frame found at the start of a buffer: (type, payload, bytes used).
pub type Frame<'a> = (u8, &'a [u8], usize);

/// A complete frame at the start of `buf`, if one has arrived (frames over `max` bytes
/// are refused as soon as their length is read).
pub fn split(buf: &[u8], max: usize) -> Result<Option<Frame<'_>>, DecodeError> {
    if buf.len() < 4 {
        return Ok(None);
    }
    let n = u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
    if n == 0 {
        return Err(DecodeError::BadValue("frame length"));
    }
    if n > max {
        return Err(DecodeError::TooLarge(n));
    }
    if buf.len() < 4 + n {
        return Ok(None);
    }
    Ok(Some((buf[4], &buf[5..4 + n], 4 + n)))
}

fn text(w: &mut Writer, s: &str) {
    w.var(s.len() as u64);
    w.bytes(s.as_bytes());
}

fn read_text(r: &mut Reader, max: usize, field: &'static str) -> Result<String, DecodeError> {
    let n = r.count(max, 1, field)?;
    String::from_utf8(r.bytes(n)?.to_vec()).map_err(|_| DecodeError::BadValue(field))
}

fn f32w(w: &mut Writer, v: f32) {
    w.u32(v.to_bits());
}

fn f32r(r: &mut Reader) -> Result<f32, DecodeError> {
    Ok(f32::from_bits(r.u32()?))
}

fn finite(r: &mut Reader, field: &'static str) -> Result<f32, DecodeError> {
    let v = f32r(r)?;
    if v.is_finite() {
        Ok(v)
    } else {
        Err(DecodeError::BadValue(field))
    }
}

fn owner_w(w: &mut Writer, o: Owner) {
    match o {
        Owner::Boss => w.u8(0),
        Owner::Enemy(id) => {
            w.u8(1);
            w.u32(id);
        }
    }
}

fn owner_r(r: &mut Reader) -> Result<Owner, DecodeError> {
    match r.u8()? {
        0 => Ok(Owner::Boss),
        1 => Ok(Owner::Enemy(r.u32()?)),
        _ => Err(DecodeError::BadValue("owner")),
    }
}

fn arg_w(w: &mut Writer, a: &ArgValue) {
    match a {
        ArgValue::Bool(b) => w.u8(*b as u8),
        ArgValue::Int(i) => {
            w.u8(2);
            w.u64(*i as u64);
        }
        ArgValue::Num(n) => {
            w.u8(3);
            w.u64(n.to_bits());
        }
        ArgValue::Str(s) => {
            w.u8(4);
            text(w, s);
        }
        ArgValue::List(l) => {
            w.u8(5);
            w.var(l.len() as u64);
            l.iter().for_each(|x| arg_w(w, x));
        }
        ArgValue::Table(m) => {
            w.u8(6);
            w.var(m.len() as u64);
            for (k, x) in m {
                text(w, k);
                arg_w(w, x);
            }
        }
    }
}

fn arg_r(r: &mut Reader, depth: u32) -> Result<ArgValue, DecodeError> {
    if depth > 16 {
        return Err(DecodeError::BadValue("argument depth"));
    }
    Ok(match r.u8()? {
        0 => ArgValue::Bool(false),
        1 => ArgValue::Bool(true),
        2 => ArgValue::Int(r.u64()? as i64),
        3 => ArgValue::Num(f64::from_bits(r.u64()?)),
        4 => ArgValue::Str(read_text(r, 1 << 16, "argument")?),
        5 => {
            let n = r.count(4096, 1, "argument list")?;
            (0..n).map(|_| arg_r(r, depth + 1)).collect::<Result<_, _>>().map(ArgValue::List)?
        }
        6 => {
            let n = r.count(4096, 2, "argument table")?;
            let mut m = BTreeMap::new();
            for _ in 0..n {
                let k = read_text(r, 256, "argument key")?;
                m.insert(k, arg_r(r, depth + 1)?);
            }
            ArgValue::Table(m)
        }
        _ => return Err(DecodeError::BadValue("argument")),
    })
}

impl Init {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = begin(T_INIT);
        w.u64(self.seed);
        w.var(self.kinds.len() as u64);
        for (name, radius, damage) in &self.kinds {
            text(&mut w, name);
            f32w(&mut w, *radius);
            w.u32(*damage as u32);
        }
        w.var(self.enemies.len() as u64);
        self.enemies.iter().for_each(|e| text(&mut w, e));
        w.var(self.sounds.len() as u64);
        self.sounds.iter().for_each(|e| text(&mut w, e));
        w.var(self.emitters.len() as u64);
        for e in self.emitters.values() {
            text(&mut w, &e.id);
            text(&mut w, &e.mod_id);
            text(&mut w, &e.path);
            text(&mut w, &e.source);
        }
        finish(w)
    }

    pub fn decode(p: &[u8]) -> Result<Init, DecodeError> {
        let mut r = Reader::new(p);
        let seed = r.u64()?;
        let n = r.count(u16::MAX as usize, 9, "kinds")?;
        let mut kinds = Vec::with_capacity(n);
        for _ in 0..n {
            kinds.push((read_text(&mut r, 256, "kind")?, f32r(&mut r)?, r.u32()? as i32));
        }
        let n = r.count(1 << 16, 1, "enemies")?;
        let enemies = (0..n).map(|_| read_text(&mut r, 256, "enemy")).collect::<Result<_, _>>()?;
        let n = r.count(1 << 16, 1, "sounds")?;
        let sounds = (0..n).map(|_| read_text(&mut r, 256, "sound")).collect::<Result<_, _>>()?;
        let n = r.count(1 << 16, 4, "emitters")?;
        let mut emitters = BTreeMap::new();
        for _ in 0..n {
            let id = read_text(&mut r, 256, "emitter")?;
            let mod_id = read_text(&mut r, 256, "mod")?;
            let path = read_text(&mut r, 4096, "path")?;
            let source = read_text(&mut r, MAX_FRAME, "source")?;
            emitters.insert(id.clone(), EmitterSource { id, mod_id, path, source });
        }
        r.finish()?;
        Ok(Init { seed, kinds, enemies, sounds, emitters })
    }
}

impl TickReq {
    pub fn encode_into(&self, w: &mut Writer) {
        w.buf.clear();
        w.u32(0);
        w.u8(T_TICK);
        w.var(self.ops.len() as u64);
        for op in &self.ops {
            match op {
                Op::Start { owner, group, name, args } => {
                    w.u8(0);
                    owner_w(w, *owner);
                    w.u32(*group);
                    text(w, name);
                    match args {
                        None => w.u8(0),
                        Some(a) => {
                            w.u8(1);
                            arg_w(w, a);
                        }
                    }
                }
                Op::Stop { owner, group } => {
                    w.u8(1);
                    owner_w(w, *owner);
                    match group {
                        None => w.u8(0),
                        Some(g) => {
                            w.u8(1);
                            w.u32(*g);
                        }
                    }
                }
            }
        }
        w.u32(self.tick);
        f32w(w, self.arena.x);
        f32w(w, self.arena.y);
        w.u32(self.party);
        w.var(self.players.len() as u64);
        for p in &self.players {
            w.u32(p.id);
            f32w(w, p.pos.x);
            f32w(w, p.pos.y);
            w.u32(p.hp as u32);
            w.u8(p.alive as u8);
        }
        w.var(self.owners.len() as u64);
        for o in &self.owners {
            owner_w(w, o.owner);
            f32w(w, o.pos.x);
            f32w(w, o.pos.y);
            w.u32(o.hp as u32);
            w.u32(o.max_hp as u32);
            w.u8(o.phase);
        }
        let n = (w.buf.len() - 4) as u32;
        w.buf[..4].copy_from_slice(&n.to_le_bytes());
    }

    pub fn decode(p: &[u8]) -> Result<TickReq, DecodeError> {
        let mut r = Reader::new(p);
        let n = r.count(1 << 20, 2, "ops")?;
        let mut ops = Vec::with_capacity(n);
        for _ in 0..n {
            ops.push(match r.u8()? {
                0 => {
                    let owner = owner_r(&mut r)?;
                    let group = r.u32()?;
                    let name = read_text(&mut r, 256, "emitter")?;
                    let args = match r.u8()? {
                        0 => None,
                        _ => Some(arg_r(&mut r, 0)?),
                    };
                    Op::Start { owner, group, name, args }
                }
                1 => {
                    let owner = owner_r(&mut r)?;
                    let group = match r.u8()? {
                        0 => None,
                        _ => Some(r.u32()?),
                    };
                    Op::Stop { owner, group }
                }
                _ => return Err(DecodeError::BadValue("op")),
            });
        }
        let tick = r.u32()?;
        let arena = Vec2::new(f32r(&mut r)?, f32r(&mut r)?);
        let party = r.u32()?;
        let n = r.count(1 << 16, 17, "players")?;
        let mut players = Vec::with_capacity(n);
        for _ in 0..n {
            players.push(PlayerView {
                id: r.u32()?,
                pos: Vec2::new(f32r(&mut r)?, f32r(&mut r)?),
                hp: r.u32()? as i32,
                alive: r.u8()? != 0,
            });
        }
        let n = r.count(1 << 16, 18, "owners")?;
        let mut owners = Vec::with_capacity(n);
        for _ in 0..n {
            owners.push(OwnerView {
                owner: owner_r(&mut r)?,
                pos: Vec2::new(f32r(&mut r)?, f32r(&mut r)?),
                hp: r.u32()? as i32,
                max_hp: r.u32()? as i32,
                phase: r.u8()?,
            });
        }
        r.finish()?;
        Ok(TickReq { tick, arena, party, players, owners, ops })
    }
}

fn shot_w(w: &mut Writer, s: &ShotCmd) {
    f32w(w, s.pos.x);
    f32w(w, s.pos.y);
    f32w(w, s.angle);
    f32w(w, s.speed);
    f32w(w, s.radius);
    w.u16(s.lifetime);
    w.u16(s.kind);
    f32w(w, s.accel);
    f32w(w, s.turn);
    f32w(w, s.max_speed);
    w.u32(s.damage as u32);
}

/// A shot as the API would have made it: finite numbers (the top speed may be infinite),
/// a known kind, and the API's ranges.
fn shot_r(r: &mut Reader, kinds: usize) -> Result<ShotCmd, DecodeError> {
    let s = ShotCmd {
        pos: Vec2::new(finite(r, "x")?, finite(r, "y")?),
        angle: finite(r, "angle")?,
        speed: finite(r, "speed")?,
        radius: finite(r, "radius")?,
        lifetime: r.u16()?,
        kind: r.u16()?,
        accel: finite(r, "accel")?,
        turn: finite(r, "turn")?,
        max_speed: f32r(r)?,
        damage: r.u32()? as i32,
    };
    let ok = (s.kind as usize) < kinds
        && (1..=3600).contains(&s.lifetime)
        && (0.5..=64.0).contains(&s.radius)
        && (0..=1000).contains(&s.damage)
        && !s.max_speed.is_nan();
    if ok {
        Ok(s)
    } else {
        Err(DecodeError::BadValue("shot"))
    }
}

impl Answer {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = begin(T_DONE);
        w.u32(self.tasks);
        w.var(self.cmds.len() as u64);
        for c in &self.cmds {
            match c {
                ScriptCmd::Shot(s) => {
                    w.u8(0);
                    shot_w(&mut w, s);
                }
                ScriptCmd::Burst(b) => {
                    w.u8(1);
                    shot_w(&mut w, &b.shot);
                    w.u16(b.count);
                    w.u32(b.span);
                    w.u16(b.div);
                    f32w(&mut w, b.offset);
                }
                ScriptCmd::MoveTo { owner, target, ticks } => {
                    w.u8(2);
                    owner_w(&mut w, *owner);
                    f32w(&mut w, target.x);
                    f32w(&mut w, target.y);
                    w.u32(*ticks);
                }
                ScriptCmd::Spawn { enemy, pos } => {
                    w.u8(3);
                    text(&mut w, enemy);
                    f32w(&mut w, pos.x);
                    f32w(&mut w, pos.y);
                }
                ScriptCmd::Sfx { name, pos } => {
                    w.u8(4);
                    text(&mut w, name);
                    f32w(&mut w, pos.x);
                    f32w(&mut w, pos.y);
                }
                ScriptCmd::Hint(text) => {
                    w.u8(6);
                    self::text(&mut w, text);
                }
                ScriptCmd::Leave { owner } => {
                    w.u8(7);
                    owner_w(&mut w, *owner);
                }
                ScriptCmd::Telegraph(t) => {
                    w.u8(5);
                    for v in [t.pos.x, t.pos.y, t.angle, t.length, t.width] {
                        f32w(&mut w, v);
                    }
                    w.u8(t.ticks);
                    w.u8(t.kind());
                }
            }
        }
        w.var(self.msgs.len() as u64);
        for m in &self.msgs {
            let (t, s) = match m {
                ScriptMessage::Log(s) => (0, s),
                ScriptMessage::Error(s) => (1, s),
            };
            w.u8(t);
            text(&mut w, s);
        }
        finish(w)
    }

    /// Decodes an answer, refusing anything the API could not have made: `kinds` bullet
    /// kinds exist, `enemy` says which enemy names do, and the worker runs `mods` mods
    /// (each held to the API's per-tick limits: [`SHOTS_PER_MOD`] and the rest).
    pub fn decode(p: &[u8], kinds: usize, enemy: impl Fn(&str) -> bool, mods: usize) -> Result<Answer, DecodeError> {
        let mods = mods.max(1);
        let mut r = Reader::new(p);
        let tasks = r.u32()?;
        // The smallest command is a boss's leave: 2 bytes.
        let n = r.count(CMDS_PER_MOD * mods, 2, "commands")?;
        let mut cmds = Vec::with_capacity(n);
        let (mut shots, mut spawns, mut telegraphs, mut hints) = (0usize, 0usize, 0usize, 0usize);
        for _ in 0..n {
            cmds.push(match r.u8()? {
                0 => {
                    shots += 1;
                    ScriptCmd::Shot(shot_r(&mut r, kinds)?)
                }
                1 => {
                    let shot = shot_r(&mut r, kinds)?;
                    let (count, span, div, offset) = (r.u16()?, r.u32()?, r.u16()?, finite(&mut r, "offset")?);
                    if count == 0 || count as i64 > MAX_PATTERN_SHOTS || div == 0 {
                        return Err(DecodeError::BadValue("burst"));
                    }
                    shots += count as usize;
                    ScriptCmd::Burst(BurstCmd { shot, count, span, div, offset })
                }
                2 => {
                    let owner = owner_r(&mut r)?;
                    let target = Vec2::new(finite(&mut r, "x")?, finite(&mut r, "y")?);
                    let ticks = r.u32()?;
                    if !(1..=MAX_MOVE_TICKS).contains(&ticks) {
                        return Err(DecodeError::BadValue("move ticks"));
                    }
                    ScriptCmd::MoveTo { owner, target, ticks }
                }
                3 => {
                    let name = read_text(&mut r, 64, "enemy")?;
                    if !enemy(&name) {
                        return Err(DecodeError::BadValue("enemy"));
                    }
                    spawns += 1;
                    ScriptCmd::Spawn { enemy: name, pos: Vec2::new(finite(&mut r, "x")?, finite(&mut r, "y")?) }
                }
                4 => {
                    let name = read_text(&mut r, MAX_SFX_NAME, "sound")?;
                    let ok = !name.is_empty()
                        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
                    if !ok {
                        return Err(DecodeError::BadValue("sound"));
                    }
                    ScriptCmd::Sfx { name, pos: Vec2::new(finite(&mut r, "x")?, finite(&mut r, "y")?) }
                }
                // Only an enemy may leave (the API refuses a boss).
                7 => match owner_r(&mut r)? {
                    Owner::Boss => return Err(DecodeError::BadValue("a boss leaving")),
                    owner => ScriptCmd::Leave { owner },
                },
                6 => {
                    hints += 1;
                    let t = read_text(&mut r, crate::sim::script::HINT_MAX_BYTES, "hint")?;
                    if !crate::sim::script::hint_ok(&t) {
                        return Err(DecodeError::BadValue("hint"));
                    }
                    ScriptCmd::Hint(t)
                }
                5 => {
                    telegraphs += 1;
                    let pos = Vec2::new(finite(&mut r, "x")?, finite(&mut r, "y")?);
                    let (angle, length, width) =
                        (finite(&mut r, "angle")?, finite(&mut r, "length")?, finite(&mut r, "width")?);
                    let (ticks, kind) = (r.u8()?, r.u8()?);
                    let t = crate::sim::script::Telegraph::decoded(pos, angle, length, width, ticks, kind);
                    ScriptCmd::Telegraph(t.ok_or(DecodeError::BadValue("telegraph"))?)
                }
                _ => return Err(DecodeError::BadValue("command")),
            });
            if shots > SHOTS_PER_MOD * mods
                || spawns > SPAWNS_PER_MOD * mods
                || telegraphs > crate::sim::script::TELEGRAPHS_PER_TICK * mods
                || hints > crate::sim::script::HINTS_PER_TICK * mods
            {
                return Err(DecodeError::BadValue("more than the API allows in one tick"));
            }
        }
        let n = r.count(MSGS_PER_MOD * mods, 2, "messages")?;
        let mut msgs = Vec::with_capacity(n);
        for _ in 0..n {
            let t = r.u8()?;
            // Escaped again here: the worker's own escaping is not trusted.
            let s = crate::content::diag::escape_text(&read_text(&mut r, MAX_MESSAGE_BYTES, "message")?);
            msgs.push(if t == 0 { ScriptMessage::Log(s) } else { ScriptMessage::Error(s) });
        }
        r.finish()?;
        Ok(Answer { cmds, msgs, tasks })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shot() -> ShotCmd {
        ShotCmd {
            pos: Vec2::new(1.0, 2.0),
            angle: 30.0,
            speed: 3.0,
            radius: 4.0,
            lifetime: 300,
            kind: 1,
            accel: 0.0,
            turn: 0.5,
            max_speed: f32::INFINITY,
            damage: 8,
        }
    }

    #[test]
    fn frames_round_trip() {
        let mut args = BTreeMap::new();
        args.insert("n".to_string(), ArgValue::Int(12));
        args.insert("l".to_string(), ArgValue::List(vec![ArgValue::Num(0.5), ArgValue::Str("x".into())]));
        let req = TickReq {
            tick: 7,
            arena: Vec2::new(960.0, 540.0),
            party: 2,
            players: vec![PlayerView { id: 3, pos: Vec2::new(5.0, 6.0), hp: 80, alive: true }],
            owners: vec![OwnerView { owner: Owner::Enemy(9), pos: Vec2::ZERO, hp: 5, max_hp: 10, phase: 0 }],
            ops: vec![
                Op::Start { owner: Owner::Boss, group: 2, name: "spin".into(), args: Some(ArgValue::Table(args)) },
                Op::Stop { owner: Owner::Enemy(9), group: None },
            ],
        };
        let mut w = Writer::new();
        req.encode_into(&mut w);
        let (t, p, used) = split(&w.buf, MAX_FRAME).unwrap().unwrap();
        assert_eq!((t, used), (T_TICK, w.buf.len()));
        assert_eq!(TickReq::decode(p).unwrap(), req);
        let ans = Answer {
            cmds: vec![
                ScriptCmd::Shot(shot()),
                ScriptCmd::Burst(BurstCmd { shot: shot(), count: 12, span: 65536, div: 12, offset: 4.0 }),
                ScriptCmd::MoveTo { owner: Owner::Boss, target: Vec2::new(1.0, 1.0), ticks: 30 },
                ScriptCmd::Spawn { enemy: "bat".into(), pos: Vec2::ZERO },
                ScriptCmd::Sfx { name: "boom".into(), pos: Vec2::ZERO },
                ScriptCmd::Telegraph(tele()),
                ScriptCmd::Hint("Fire with {fire}".into()),
                ScriptCmd::Leave { owner: Owner::Enemy(3) },
            ],
            msgs: vec![ScriptMessage::Log("hi".into()), ScriptMessage::Error("bad".into())],
            tasks: 4,
        };
        let bytes = ans.encode();
        let (t, p, _) = split(&bytes, MAX_ANSWER).unwrap().unwrap();
        assert_eq!(t, T_DONE);
        assert_eq!(Answer::decode(p, 2, |e| e == "bat", 1).unwrap(), ans);
    }

    fn tele() -> crate::sim::script::Telegraph {
        crate::sim::script::Telegraph {
            pos: Vec2::new(3.0, 4.0),
            angle: 33.0,
            length: 500.0,
            width: 2.0,
            ticks: 20,
            circle: false,
            safe: false,
        }
    }

    #[test]
    fn answers_the_api_could_not_make_are_refused() {
        let bad = [
            ShotCmd { speed: f32::NAN, ..shot() },
            ShotCmd { kind: 2, ..shot() },
            ShotCmd { lifetime: 0, ..shot() },
            ShotCmd { damage: -1, ..shot() },
            ShotCmd { radius: 1000.0, ..shot() },
        ];
        for s in bad {
            let bytes = Answer { cmds: vec![ScriptCmd::Shot(s)], ..Default::default() }.encode();
            let (_, p, _) = split(&bytes, MAX_ANSWER).unwrap().unwrap();
            assert!(Answer::decode(p, 2, |_| true, 1).is_err(), "{s:?}");
        }
        let spawn =
            Answer { cmds: vec![ScriptCmd::Spawn { enemy: "nope".into(), pos: Vec2::ZERO }], ..Default::default() };
        let bytes = spawn.encode();
        assert!(Answer::decode(&bytes[5..], 2, |e| e == "bat", 1).is_err());
        // More than one mod's API could make in a tick: 4,097 bullets, a 0-tick move.
        let many = Answer { cmds: vec![ScriptCmd::Shot(shot()); SHOTS_PER_MOD + 1], ..Default::default() }.encode();
        assert!(Answer::decode(&many[5..], 2, |_| true, 1).is_err());
        assert!(Answer::decode(&many[5..], 2, |_| true, 2).is_ok(), "two mods may fire twice as many");
        // Telegraphs: past the limits, or more than a mod may show in a tick.
        for t in [
            crate::sim::script::Telegraph { ticks: 0, ..tele() },
            crate::sim::script::Telegraph { length: 5000.0, ..tele() },
            crate::sim::script::Telegraph { angle: f32::NAN, ..tele() },
        ] {
            let b = Answer { cmds: vec![ScriptCmd::Telegraph(t)], ..Default::default() }.encode();
            assert!(Answer::decode(&b[5..], 2, |_| true, 1).is_err(), "{t:?}");
        }
        let boss = Answer { cmds: vec![ScriptCmd::Leave { owner: Owner::Boss }], ..Default::default() }.encode();
        assert!(Answer::decode(&boss[5..], 2, |_| true, 1).is_err(), "a boss leaving: the API cannot make it");
        let bad = Answer { cmds: vec![ScriptCmd::Hint("a\u{0007}bell".into())], ..Default::default() }.encode();
        assert!(Answer::decode(&bad[5..], 2, |_| true, 1).is_err(), "a hint no client could show");
        let n = crate::sim::script::TELEGRAPHS_PER_TICK + 1;
        let b = Answer { cmds: vec![ScriptCmd::Telegraph(tele()); n], ..Default::default() }.encode();
        assert!(Answer::decode(&b[5..], 2, |_| true, 1).is_err(), "{n} telegraphs in a tick");
        let mv = ScriptCmd::MoveTo { owner: Owner::Boss, target: Vec2::ZERO, ticks: 0 };
        let still = Answer { cmds: vec![mv], ..Default::default() }.encode();
        assert!(Answer::decode(&still[5..], 2, |_| true, 1).is_err());
        // Every prefix and every single-byte change decodes or fails, never panics.
        let bytes = Answer { cmds: vec![ScriptCmd::Shot(shot())], ..Default::default() }.encode();
        for n in 5..bytes.len() {
            let _ = Answer::decode(&bytes[5..n], 2, |_| true, 1);
        }
        for i in 5..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0xff;
            let _ = Answer::decode(&b[5..], 2, |_| true, 1);
        }
        assert!(split(&[0, 0, 0, 0, 1], MAX_ANSWER).is_err(), "an empty frame");
        assert!(split(&((MAX_ANSWER + 1) as u32).to_le_bytes(), MAX_ANSWER).is_err(), "an oversized answer");
    }
}
