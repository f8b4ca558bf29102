//! The emitter API installed in every Lua state: `task`, the firing functions (`shot`,
//! `ring`, `fan`), `aim`, `players`, `me`, `pos`, `tick`, `arena`, `rand`, `move_to`,
//! `spawn`, `sfx` and `log`, then the prelude (`prelude.lua`).

use mlua::chunk::ChunkMode;
use mlua::{Function, Lua, Table, Value, Variadic};

use super::sandbox::*;
use super::*;

/// Shot parameters read from a Lua table before any shared state is borrowed.
pub(super) struct ShotSpec {
    x: Option<f32>,
    y: Option<f32>,
    angle: Option<f32>,
    speed: f32,
    kind: String,
    lifetime: u16,
    accel: f32,
    turn: f32,
    max_speed: f32,
    damage: Option<i32>,
    radius: Option<f32>,
    offset: f32,
}

pub(super) fn num(t: &Table, k: &str) -> mlua::Result<Option<f32>> {
    match t.get::<Value>(k)? {
        Value::Nil => Ok(None),
        // Checked after the cast: 1e39 is a finite f64 but no f32.
        Value::Integer(i) => Ok(Some(i as f32)),
        Value::Number(n) if (n as f32).is_finite() => Ok(Some(n as f32)),
        Value::Number(_) => Err(rt_err(format!("field '{k}' must be a finite number (within ±3.4e38)"))),
        other => Err(rt_err(format!("field '{k}' must be a number, got {}", other.type_name()))),
    }
}

/// Refuses a firing table with a field the function does not take, naming the nearest
/// known one: a misspelt field would otherwise be silently ignored.
fn check_fields(t: &Table, extra: &[super::spec::Field]) -> mlua::Result<()> {
    check_known(t, super::spec::SHOT_FIELDS, extra)
}

/// Refuses a table with a field outside `a` and `b`, naming the nearest known one.
fn check_known(t: &Table, a: &[super::spec::Field], b: &[super::spec::Field]) -> mlua::Result<()> {
    let known = || a.iter().chain(b).map(|f| f.name);
    for pair in t.pairs::<Value, Value>() {
        let (k, _) = pair?;
        let Value::String(s) = &k else {
            return Err(rt_err(format!("firing tables take named fields only (got a {} key)", k.type_name())));
        };
        if s.as_bytes().len() > 64 {
            return Err(rt_err(format!("unknown field of {} bytes", s.as_bytes().len())));
        }
        if known().any(|f| f.as_bytes() == s.as_bytes().as_ref()) {
            continue;
        }
        let name = s.to_string_lossy();
        let suggestion = if name.len() <= 64 { super::spec::suggest(&name, known()) } else { None };
        let hint = match suggestion {
            Some(s) => format!(" (did you mean '{s}'?)"),
            None => format!(" (known fields: {})", known().collect::<Vec<_>>().join(", ")),
        };
        let shown: String = crate::content::diag::escape_text(&name).chars().take(40).collect();
        return Err(rt_err(format!("unknown field '{shown}'{hint}")));
    }
    Ok(())
}

impl ShotSpec {
    fn read(t: &Table, extra: &[super::spec::Field]) -> mlua::Result<ShotSpec> {
        check_fields(t, extra)?;
        let kind = match t.get::<Value>("kind")? {
            Value::Nil => "orb".to_string(),
            Value::String(s) => s.to_str()?.to_string(),
            other => return Err(rt_err(format!("field 'kind' must be a string, got {}", other.type_name()))),
        };
        let lifetime = num(t, "lifetime")?.unwrap_or(300.0);
        if !(1.0..=3600.0).contains(&lifetime) {
            return Err(rt_err("field 'lifetime' must be between 1 and 3600 ticks"));
        }
        Ok(ShotSpec {
            x: num(t, "x")?,
            y: num(t, "y")?,
            angle: num(t, "angle")?,
            speed: num(t, "speed")?.unwrap_or(3.0),
            kind,
            lifetime: lifetime as u16,
            accel: num(t, "accel")?.unwrap_or(0.0),
            turn: num(t, "turn")?.unwrap_or(0.0),
            max_speed: num(t, "max_speed")?.unwrap_or(f32::INFINITY),
            damage: num(t, "damage")?.map(|d| d.clamp(0.0, 1000.0) as i32),
            radius: num(t, "radius")?.map(|r| r.clamp(0.5, 64.0)),
            offset: num(t, "offset")?.unwrap_or(0.0),
        })
    }

    /// Counts `n` bullets against the instance's per-tick limit.
    fn count(c: &mut Ctx, n: usize) -> mlua::Result<()> {
        if c.shots + n > MAX_SHOTS_PER_TICK {
            return Err(rt_err(format!(
                "more than {MAX_SHOTS_PER_TICK} bullets fired in one tick in this instance: a loop that fires needs a wait() in it (wait(1) fires once a tick)"
            )));
        }
        c.shots += n;
        Ok(())
    }

    /// The shot this spec describes at `angle` from `origin` (offset not applied).
    fn cmd(&self, c: &mut Ctx, origin: Vec2, angle: f32) -> mlua::Result<ShotCmd> {
        let &(kind, radius, damage) =
            c.names.kinds.get(&self.kind).ok_or_else(|| rt_err(format!("unknown bullet kind '{}'", self.kind)))?;
        Ok(ShotCmd {
            pos: origin,
            angle,
            speed: self.speed,
            radius: self.radius.unwrap_or(radius),
            lifetime: self.lifetime,
            kind,
            accel: self.accel,
            turn: self.turn,
            max_speed: self.max_speed,
            damage: self.damage.unwrap_or(damage),
        })
    }

    fn origin(&self, c: &mut Ctx) -> Vec2 {
        let me = c.my_pos();
        Vec2::new(self.x.unwrap_or(me.x), self.y.unwrap_or(me.y))
    }

    /// Queues `n` bullets as one burst: bullet `i` at `angle0` plus `i * span / div` steps
    /// of the angle grid (1/65536 turn). One event on the wire, whatever `n`.
    fn burst(&self, c: &mut Ctx, n: i64, angle0: f32, span: u32, div: u16) -> mlua::Result<()> {
        Self::count(c, n as usize)?;
        let origin = self.origin(c);
        let shot = self.cmd(c, origin, angle0)?;
        c.cmds.push(ScriptCmd::Burst(BurstCmd { shot, count: n as u16, span, div, offset: self.offset }));
        Ok(())
    }

    /// Queues one bullet at `angle` (degrees).
    fn fire(&self, c: &mut Ctx, angle: f32) -> mlua::Result<()> {
        Self::count(c, 1)?;
        let origin = self.origin(c) + Vec2::from_angle_deg(angle) * self.offset;
        let shot = self.cmd(c, origin, angle)?;
        c.cmds.push(ScriptCmd::Shot(shot));
        Ok(())
    }
}

pub(super) fn pattern_n(t: &Table) -> mlua::Result<i64> {
    let n = num(t, "n")?.ok_or_else(|| rt_err("field 'n' is required"))? as i64;
    if !(1..=MAX_PATTERN_SHOTS).contains(&n) {
        return Err(rt_err(format!("field 'n' must be between 1 and {MAX_PATTERN_SHOTS}")));
    }
    Ok(n)
}

/// Angle from the owner to the chosen player, degrees; 90 (down) if nobody qualifies.
pub(super) fn aim_angle(c: &mut Ctx, target: &Value) -> mlua::Result<f32> {
    let me = c.my_pos();
    let alive: Vec<PlayerView> = c.players.iter().copied().filter(|p| p.alive).collect();
    let by_dist = |a: &&PlayerView, b: &&PlayerView| a.pos.distance(me).total_cmp(&b.pos.distance(me));
    let pick = match target {
        Value::Nil => alive.iter().min_by(by_dist).copied(),
        Value::String(s) => match &*s.to_str()? {
            "nearest" => alive.iter().min_by(by_dist).copied(),
            "farthest" => alive.iter().max_by(by_dist).copied(),
            "random" if !alive.is_empty() => {
                let i = c.rng.range_i64(0, alive.len() as i64 - 1) as usize;
                Some(alive[i])
            }
            "random" => None,
            other => {
                return Err(rt_err(format!("aim: unknown target '{other}' (nearest, farthest, random or a player id)")))
            }
        },
        Value::Integer(id) => alive.iter().find(|p| p.id as i64 == *id).copied(),
        Value::Number(id) => alive.iter().find(|p| p.id as f64 == *id).copied(),
        other => return Err(rt_err(format!("aim: bad target of type {}", other.type_name()))),
    };
    Ok(pick.map_or(90.0, |p| (p.pos - me).angle_deg()))
}

pub(super) fn install_api(lua: &Lua) -> mlua::Result<()> {
    let g = lua.globals();
    for name in ["dofile", "loadfile", "load", "collectgarbage", "require", "module"] {
        g.set(name, Value::Nil)?;
    }
    install_portable_math(lua, &g)?;
    g.set(
        "__hf_over",
        lua.create_function(|lua, ()| Ok(lua.try_app_data_ref::<Ctx>().ok().flatten().is_some_and(|c| c.over)))?,
    )?;
    g.set(
        "__hf_charge",
        lua.create_function(|lua, n: Option<i64>| {
            let n = n.map_or(COROUTINE_COST as u64, |n| n.max(0) as u64);
            charge(lua, n)
        })?,
    )?;
    g.set(
        "task",
        lua.create_function(|lua, f: Function| {
            let at = caller(lua);
            charge(lua, COROUTINE_COST as u64)?;
            with_ctx(lua, |c| {
                if c.live_tasks >= MAX_TASKS {
                    return Err(rt_err(format!("{at}task: too many tasks (at most {MAX_TASKS} per instance)")));
                }
                c.live_tasks += 1;
                Ok(())
            })?;
            let th = lua.create_thread(f)?;
            with_ctx(lua, |c| {
                c.new_tasks.push(th);
                Ok(())
            })
        })?,
    )?;
    install_guarded_stdlib(lua, &g)?;
    g.set(
        "shot",
        lua.create_function(|lua, t: Table| {
            let spec = ShotSpec::read(&t, &[]).map_err(|e| rt_err(format!("{}shot: {e}", caller(lua))))?;
            // The caller's line is looked up only for an error: it costs more than the shot.
            let res = with_ctx(lua, |c| {
                let angle = spec.angle.unwrap_or(90.0);
                spec.fire(c, angle)
            });
            res.map_err(|e| match e {
                mlua::Error::RuntimeError(m) if !m.contains(".lua:") => rt_err(format!("{}shot: {m}", caller(lua))),
                other => other,
            })
        })?,
    )?;
    g.set(
        "ring",
        lua.create_function(|lua, t: Table| {
            let at = || caller(lua);
            let spec =
                ShotSpec::read(&t, super::spec::RING_FIELDS).map_err(|e| rt_err(format!("{}ring: {e}", at())))?;
            let n = pattern_n(&t).map_err(|e| rt_err(format!("{}ring: {e}", at())))?;
            let res = with_ctx(lua, |c| {
                let start = spec.angle.unwrap_or(90.0);
                // A full turn in n equal integer steps of the angle grid.
                spec.burst(c, n, start, 65536, n as u16)
            });
            res.map_err(|e| match e {
                mlua::Error::RuntimeError(m) if !m.contains(".lua:") => rt_err(format!("{}ring: {m}", at())),
                other => other,
            })
        })?,
    )?;
    g.set(
        "fan",
        lua.create_function(|lua, t: Table| {
            // The caller's line only where a message needs it (it costs more than a shot).
            let at = || caller(lua);
            let spec = ShotSpec::read(&t, super::spec::FAN_FIELDS).map_err(|e| rt_err(format!("{}fan: {e}", at())))?;
            let n = pattern_n(&t).map_err(|e| rt_err(format!("{}fan: {e}", at())))?;
            let spread = num(&t, "spread")?.unwrap_or(30.0);
            let aimed = t.get::<Value>("aim")?;
            with_ctx(lua, |c| {
                if !matches!(aimed, Value::Nil) && spec.angle.is_some() {
                    let at = at();
                    if c.warned.insert(at.clone()) {
                        c.logs.push(format!("warning: {at}fan: both 'aim' and 'angle' are given; 'aim' wins"));
                    }
                }
                let centre = match (&aimed, spec.angle) {
                    (Value::Nil, Some(a)) => a,
                    (Value::Nil, None) => aim_angle(c, &Value::Nil)?,
                    (v, _) => aim_angle(c, v).map_err(|e| rt_err(format!("{}fan: {e}", at())))?,
                };
                // The spread on the angle grid, shared out in n - 1 equal integer steps (a
                // negative spread is the same fan).
                let spread = spread.abs().min(360.0);
                let (first, span, div) = if n == 1 {
                    (centre, 0, 1)
                } else {
                    let span = (spread * crate::sim::bullets::grid::ANGLE).round() as u32;
                    (centre - spread / 2.0, span, (n - 1) as u16)
                };
                spec.burst(c, n, first, span, div).map_err(|e| rt_err(format!("{}fan: {e}", at())))
            })
        })?,
    )?;
    g.set(
        "aim",
        lua.create_function(|lua, target: Value| {
            let at = caller(lua);
            with_ctx(lua, |c| aim_angle(c, &target).map_err(|e| rt_err(format!("{at}{e}"))))
        })?,
    )?;
    g.set(
        "angle_to",
        lua.create_function(|lua, (x, y): (f32, f32)| {
            with_ctx(lua, |c| Ok((Vec2::new(x, y) - c.my_pos()).angle_deg()))
        })?,
    )?;
    g.set(
        "players",
        lua.create_function(|lua, ()| {
            let list: Vec<PlayerView> = with_ctx(lua, |c| Ok(c.players.clone()))?;
            let t = lua.create_table()?;
            for (i, p) in list.iter().enumerate() {
                let e = lua.create_table()?;
                e.set("id", p.id)?;
                e.set("x", p.pos.x)?;
                e.set("y", p.pos.y)?;
                e.set("hp", p.hp)?;
                e.set("alive", p.alive)?;
                t.set(i + 1, e)?;
            }
            Ok(t)
        })?,
    )?;
    g.set(
        "me",
        lua.create_function(|lua, ()| {
            let (o, owner) = with_ctx(lua, |c| Ok((c.me().copied(), c.owner)))?;
            let t = lua.create_table()?;
            if let Some(o) = o {
                t.set("x", o.pos.x)?;
                t.set("y", o.pos.y)?;
                t.set("hp", o.hp)?;
                t.set("max_hp", o.max_hp)?;
                t.set("phase", o.phase as i64 + 1)?;
            }
            match owner {
                Owner::Boss => t.set("boss", true)?,
                Owner::Enemy(id) => t.set("id", id)?,
            }
            Ok(t)
        })?,
    )?;
    g.set("pos", lua.create_function(|lua, ()| with_ctx(lua, |c| Ok((c.my_pos().x, c.my_pos().y))))?)?;
    g.set("tick", lua.create_function(|lua, ()| with_ctx(lua, |c| Ok(c.tick)))?)?;
    g.set("party_size", lua.create_function(|lua, ()| with_ctx(lua, |c| Ok(c.party)))?)?;
    g.set("arena", lua.create_function(|lua, ()| with_ctx(lua, |c| Ok((c.arena.x, c.arena.y))))?)?;
    g.set(
        "enemy_count",
        lua.create_function(|lua, ()| {
            with_ctx(lua, |c| Ok(c.owners.iter().filter(|o| matches!(o.owner, Owner::Enemy(_)) && o.hp > 0).count()))
        })?,
    )?;
    g.set(
        "rules",
        lua.create_function(|lua, ()| {
            use crate::sim::config::*;
            let t = lua.create_table()?;
            t.set("tick_rate", TICK_RATE)?;
            t.set("player_hp", PLAYER_MAX_HP)?;
            t.set("player_speed", PLAYER_SPEED * TICK_RATE as f32)?;
            t.set("hitbox_radius", PLAYER_HITBOX_RADIUS)?;
            t.set("graze_radius", GRAZE_RADIUS)?;
            t.set("flare_radius", FLARE_RADIUS)?;
            t.set("downed_ticks", DOWNED_TICKS)?;
            t.set("revive_range", REVIVE_RANGE)?;
            t.set("revive_ticks", REVIVE_TICKS)?;
            Ok(t)
        })?,
    )?;
    g.set(
        "rand",
        lua.create_function(|lua, (a, b): (Option<f64>, Option<f64>)| {
            with_ctx(lua, |c| {
                let r = c.rng.next_f64();
                Ok(match (a, b) {
                    (Some(a), Some(b)) => a + (b - a) * r,
                    (Some(b), None) => b * r,
                    _ => r,
                })
            })
        })?,
    )?;
    g.set("rand_int", lua.create_function(|lua, (a, b): (i64, i64)| with_ctx(lua, |c| Ok(c.rng.range_i64(a, b))))?)?;
    g.set(
        "move_to",
        lua.create_function(|lua, (x, y, ticks): (f32, f32, Option<u32>)| {
            if !x.is_finite() || !y.is_finite() {
                return Err(rt_err(format!("{}move_to: coordinates must be finite", caller(lua))));
            }
            with_ctx(lua, |c| {
                let owner = c.owner;
                c.cmds.push(ScriptCmd::MoveTo {
                    owner,
                    target: Vec2::new(x, y),
                    ticks: ticks.unwrap_or(60).clamp(1, 36_000),
                });
                Ok(())
            })
        })?,
    )?;
    g.set(
        "leave",
        lua.create_function(|lua, ()| {
            let at = caller(lua);
            with_ctx(lua, |c| match c.owner {
                Owner::Enemy(_) => {
                    let owner = c.owner;
                    c.cmds.push(ScriptCmd::Leave { owner });
                    Ok(())
                }
                Owner::Boss => Err(rt_err(format!("{at}leave: a boss cannot leave its fight (it ends when it dies)"))),
            })
        })?,
    )?;
    g.set(
        "spawn",
        lua.create_function(|lua, (id, x, y): (String, Option<f32>, Option<f32>)| {
            let at = caller(lua);
            with_ctx(lua, |c| {
                if !c.names.enemies.contains(&id) {
                    return Err(rt_err(format!("{at}spawn: unknown enemy '{}'", escape_text(&id))));
                }
                if c.spawns >= MAX_SPAWNS_PER_TICK {
                    return Err(rt_err(format!("{at}spawn: more than {MAX_SPAWNS_PER_TICK} enemies in one tick")));
                }
                c.spawns += 1;
                let me = c.my_pos();
                let pos =
                    Vec2::new(x.filter(|v| v.is_finite()).unwrap_or(me.x), y.filter(|v| v.is_finite()).unwrap_or(me.y));
                c.cmds.push(ScriptCmd::Spawn { enemy: id, pos });
                Ok(())
            })
        })?,
    )?;
    g.set(
        "sfx",
        lua.create_function(|lua, name: String| {
            // Only names every client can decode: a refused name would cost them the rest of
            // that tick's events.
            if name.is_empty()
                || name.len() > MAX_SFX_NAME
                || !name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
            {
                return Err(rt_err(format!(
                    "{}sfx: sound names are 1..={MAX_SFX_NAME} of a-z, 0-9 and _, not '{}'",
                    caller(lua),
                    escape_text(&name)
                )));
            }
            let at = caller(lua);
            with_ctx(lua, |c| {
                if !super::spec::SOUNDS.contains(&name.as_str()) && !c.names.sounds.contains(&name) {
                    // A sound this game does not have plays nothing and stops nothing: a
                    // mod written for a game with more sounds still runs. The checker
                    // warns, once per place.
                    let known = || super::spec::SOUNDS.iter().copied().chain(c.names.sounds.iter().map(|s| s.as_str()));
                    let hint = match super::spec::suggest(&name, known()) {
                        Some(s) => format!("did you mean '{s}'? "),
                        None => String::new(),
                    };
                    if c.warned.insert(at.clone()) {
                        let all: Vec<&str> = known().collect();
                        c.logs.push(format!(
                            "warning: {at}sfx: unknown sound '{name}' plays nothing ({hint}sounds: {})",
                            all.join(", ")
                        ));
                    }
                    return Ok(());
                }
                let pos = c.my_pos();
                c.cmds.push(ScriptCmd::Sfx { name, pos });
                Ok(())
            })
        })?,
    )?;
    g.set(
        "hint",
        lua.create_function(|lua, text: String| {
            use crate::sim::script::{hint_ok, HINTS_PER_TICK, HINT_MAX_BYTES};
            if !hint_ok(&text) {
                return Err(rt_err(format!(
                    "{}hint: the text must be 1..={HINT_MAX_BYTES} bytes with no control characters, not '{}'",
                    caller(lua),
                    escape_text(&text.chars().take(40).collect::<String>())
                )));
            }
            with_ctx(lua, |c| {
                if c.hints >= HINTS_PER_TICK {
                    return Err(rt_err(format!("hint: more than {HINTS_PER_TICK} hints in one tick")));
                }
                c.hints += 1;
                c.cmds.push(ScriptCmd::Hint(text));
                Ok(())
            })
        })?,
    )?;
    g.set(
        "telegraph",
        lua.create_function(|lua, t: Table| {
            let at = || caller(lua);
            let fail = |e: mlua::Error| match e {
                mlua::Error::RuntimeError(m) if !m.contains(".lua:") => rt_err(format!("{}telegraph: {m}", at())),
                other => other,
            };
            check_known(&t, super::spec::TELEGRAPH_FIELDS, &[]).map_err(fail)?;
            use crate::sim::script::{
                Telegraph, TELEGRAPHS_PER_TICK, TELEGRAPH_LENGTH_MAX, TELEGRAPH_TICKS_MAX, TELEGRAPH_WIDTH_MAX,
            };
            let ranged = |k: &str, lo: f32, hi: f32, default: f32| -> mlua::Result<f32> {
                let v = num(&t, k)?.unwrap_or(default);
                if !(lo..=hi).contains(&v) {
                    return Err(rt_err(format!("field '{k}' must be {lo}..={hi}, not {v}")));
                }
                Ok(v)
            };
            let radius = num(&t, "radius").map_err(fail)?;
            let circle = radius.is_some();
            if circle
                && (!matches!(t.get::<Value>("length")?, Value::Nil) || !matches!(t.get::<Value>("angle")?, Value::Nil))
            {
                return Err(fail(rt_err(
                    "give 'radius' for a circle or 'angle'/'aim' and 'length' for a line, not both",
                )));
            }
            let length = if circle {
                ranged("radius", 1.0, TELEGRAPH_LENGTH_MAX, 0.0).map_err(fail)?
            } else {
                ranged("length", 1.0, TELEGRAPH_LENGTH_MAX, 600.0).map_err(fail)?
            };
            let width = ranged("width", 1.0, TELEGRAPH_WIDTH_MAX, 3.0).map_err(fail)?;
            let ticks = ranged("ticks", 1.0, TELEGRAPH_TICKS_MAX as f32, 30.0).map_err(fail)?.round() as u8;
            let (x, y) = (num(&t, "x").map_err(fail)?, num(&t, "y").map_err(fail)?);
            let angle = num(&t, "angle").map_err(fail)?;
            let aimed = t.get::<Value>("aim")?;
            let safe = match t.get::<Value>("safe")? {
                Value::Nil => false,
                Value::Boolean(b) => b,
                other => {
                    // Lua's own names: an integer is a number to the modder.
                    let ty = if matches!(other, Value::Integer(_)) { "number" } else { other.type_name() };
                    return Err(fail(rt_err(format!("field 'safe' must be true or false, not {ty}"))));
                }
            };
            with_ctx(lua, |c| {
                if c.telegraphs >= TELEGRAPHS_PER_TICK {
                    return Err(rt_err(format!("more than {TELEGRAPHS_PER_TICK} telegraphs in one tick")));
                }
                let me = c.my_pos();
                let pos = Vec2::new(x.unwrap_or(me.x), y.unwrap_or(me.y));
                let angle = match (&aimed, angle) {
                    (Value::Nil, Some(a)) => a,
                    (Value::Nil, None) => 90.0,
                    (v, _) => aim_angle(c, v)?,
                };
                let t = Telegraph { pos, angle, length, width, ticks, circle, safe };
                if !t.valid() {
                    return Err(rt_err("its numbers must be finite and within the limits"));
                }
                c.telegraphs += 1;
                c.cmds.push(ScriptCmd::Telegraph(t));
                Ok(())
            })
            .map_err(fail)
        })?,
    )?;
    g.set(
        "log",
        lua.create_function(|lua, args: Variadic<Value>| {
            with_ctx(lua, |_| Ok(()))?;
            let tostring: Function = lua.named_registry_value("hf_tostring")?;
            let mut line = String::new();
            for (k, v) in args.iter().enumerate() {
                if line.len() >= MAX_LOG_BYTES {
                    break;
                }
                let mut part = match v {
                    Value::String(s) => s.to_string_lossy(),
                    other => plain_tostring(lua, other, &tostring)?,
                };
                truncate_chars(&mut part, MAX_LOG_BYTES);
                if k > 0 {
                    line.push(' ');
                }
                line.push_str(&part);
            }
            let mut line = escape_text(&line);
            truncate_chars(&mut line, MAX_LOG_BYTES);
            with_ctx(lua, |c| {
                if c.logs.len() < MAX_LOGS_PER_TICK {
                    c.logs.push(line);
                }
                Ok(())
            })
        })?,
    )?;
    // The string metatable is shared by every string: keep scripts from replacing it.
    let smt: Table = lua.load("return getmetatable('')").eval()?;
    smt.set("__metatable", false)?;
    lua.load(PRELUDE).set_name("=prelude").set_mode(ChunkMode::Text).exec()?;
    // The API every mod sees: a snapshot of the globals, read through each mod's own
    // environment (see `mod_env`), never written.
    let api = lua.create_table()?;
    for pair in g.pairs::<Value, Value>() {
        let (k, v) = pair?;
        if !matches!(&k, Value::String(s) if s.as_bytes() == b"_G") {
            api.raw_set(k, v)?;
        }
    }
    lua.set_named_registry_value("hf_api", api)?;
    Ok(())
}
