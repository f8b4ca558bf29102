//! The sandbox's guards: library functions that would work unboundedly in C get size
//! checks and charges, `tostring` and `string.format` print no addresses, `math` is the
//! portable one, each mod gets its own environment over a read-only API, and source with
//! to-be-closed variables is refused.

use mlua::{Function, Lua, Table, Value, Variadic};

use super::*;

/// The line of the first to-be-closed variable (`local x <close> = ...`) in Lua source, if
/// any. They are refused: Lua runs their `__close` handlers while it unwinds an error,
/// which can happen inside the instruction hook where no limit applies, so a looping
/// handler could never be stopped. Strings and comments are skipped.
pub fn find_close_attribute(src: &str) -> Option<usize> {
    let b = src.as_bytes();
    let (mut i, mut line) = (0usize, 1usize);
    // `[[`, `[==[` ... : returns the level when a long bracket opens at `at`.
    let long_open = |at: usize| -> Option<usize> {
        if b.get(at) != Some(&b'[') {
            return None;
        }
        let mut j = at + 1;
        while b.get(j) == Some(&b'=') {
            j += 1;
        }
        (b.get(j) == Some(&b'[')).then_some(j - at - 1)
    };
    let skip_long = |mut j: usize, level: usize, line: &mut usize| -> usize {
        let close: Vec<u8> = std::iter::once(b']').chain(std::iter::repeat_n(b'=', level)).chain([b']']).collect();
        while j < b.len() {
            if b[j..].starts_with(&close) {
                return j + close.len();
            }
            if b[j] == b'\n' {
                *line += 1;
            }
            j += 1;
        }
        j
    };
    while i < b.len() {
        match b[i] {
            b'\n' => {
                line += 1;
                i += 1;
            }
            b'-' if b.get(i + 1) == Some(&b'-') => {
                if let Some(level) = long_open(i + 2) {
                    i = skip_long(i + 4 + level, level, &mut line);
                } else {
                    while i < b.len() && b[i] != b'\n' {
                        i += 1;
                    }
                }
            }
            b'[' if long_open(i).is_some() => {
                let level = long_open(i).unwrap_or(0);
                i = skip_long(i + 2 + level, level, &mut line);
            }
            q @ (b'"' | b'\'') => {
                i += 1;
                while i < b.len() && b[i] != q && b[i] != b'\n' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
            }
            b'<' => {
                let mut j = i + 1;
                while j < b.len() && b[j].is_ascii_whitespace() {
                    j += 1;
                }
                if b[j.min(b.len())..].starts_with(b"close") {
                    let mut k = j + 5;
                    while k < b.len() && b[k].is_ascii_whitespace() {
                        k += 1;
                    }
                    if b.get(k) == Some(&b'>') {
                        return Some(line);
                    }
                }
                i += 1;
            }
            _ => i += 1,
        }
    }
    None
}

/// Cuts a string to at most `max` bytes without splitting a character.
pub fn truncate_chars(s: &mut String, max: usize) {
    if s.len() > max {
        let mut end = max;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
}

/// `tostring` without addresses: tables, functions, threads and userdata without a
/// `__tostring` or `__name` print as their type, so two runs print the same text.
pub(super) fn plain_tostring(lua: &Lua, v: &Value, original: &Function) -> mlua::Result<String> {
    let has_meta = |mt: Option<Table>| {
        mt.is_some_and(|m| {
            m.raw_get::<Value>("__tostring").is_ok_and(|v| !v.is_nil())
                || m.raw_get::<Value>("__name").is_ok_and(|v| !v.is_nil())
        })
    };
    let custom = match v {
        Value::Table(t) => has_meta(t.metatable()),
        Value::UserData(_) | Value::Function(_) | Value::Thread(_) | Value::LightUserData(_) => false,
        _ => true,
    };
    if custom {
        return original.call::<String>(v.clone());
    }
    let _ = lua;
    Ok(v.type_name().to_string())
}

/// Standard functions that would do unbounded work inside one VM instruction get size
/// checks and a charge against the budget; functions that would print addresses (which
/// differ from run to run) print plain type names; `%p` is refused.
pub(super) fn install_guarded_stdlib(lua: &Lua, g: &Table) -> mlua::Result<()> {
    let string: Table = g.get("string")?;
    let table: Table = g.get("table")?;
    string.set(
        "rep",
        lua.create_function(|lua, (s, n, sep): (mlua::LuaString, i64, Option<mlua::LuaString>)| {
            let at = caller(lua);
            let (s, sep) = (s.as_bytes().to_vec(), sep.map(|x| x.as_bytes().to_vec()).unwrap_or_default());
            if n <= 0 || (s.is_empty() && sep.is_empty()) {
                return lua.create_string("");
            }
            let total = (s.len() as u128) * n as u128 + (sep.len() as u128) * (n as u128 - 1);
            if total > MAX_STRING_BYTES as u128 {
                return Err(rt_err(format!(
                    "{at}string.rep: the result would be {total} bytes; at most {MAX_STRING_BYTES}"
                )));
            }
            charge(lua, total as u64 / 32)?;
            let out = if sep.is_empty() {
                s.repeat(n as usize)
            } else {
                let mut unit = s.clone();
                unit.extend_from_slice(&sep);
                let mut out = unit.repeat(n as usize - 1);
                out.extend_from_slice(&s);
                out
            };
            lua.create_string(&out)
        })?,
    )?;
    let original_move: Function = table.get("move")?;
    table.set(
        "move",
        lua.create_function(move |lua, args: Variadic<Value>| {
            let int = |i: usize| match args.get(i) {
                Some(Value::Integer(v)) => Some(*v),
                Some(Value::Number(v)) if v.fract() == 0.0 => Some(*v as i64),
                _ => None,
            };
            if let (Some(f), Some(e)) = (int(1), int(2)) {
                let n = e.saturating_sub(f).saturating_add(1);
                if n > MAX_MOVE {
                    return Err(rt_err(format!("{}table.move: {n} elements; at most {MAX_MOVE}", caller(lua))));
                }
                charge(lua, n.max(0) as u64)?;
            }
            original_move.call::<Value>(args)
        })?,
    )?;
    let original_tostring: Function = g.get("tostring")?;
    lua.set_named_registry_value("hf_tostring", original_tostring.clone())?;
    let ts = original_tostring.clone();
    g.set("tostring", lua.create_function(move |lua, v: Value| plain_tostring(lua, &v, &ts))?)?;
    let original_format: Function = string.get("format")?;
    string.set(
        "format",
        lua.create_function(move |lua, (fmt, args): (mlua::LuaString, Variadic<Value>)| {
            let bytes = fmt.as_bytes().to_vec();
            let mut args: Vec<Value> = args.into_iter().collect();
            let (mut i, mut arg) = (0usize, 0usize);
            while i < bytes.len() {
                if bytes[i] != b'%' {
                    i += 1;
                    continue;
                }
                i += 1;
                if bytes.get(i) == Some(&b'%') {
                    i += 1;
                    continue;
                }
                while i < bytes.len() && b"-+ #0123456789.".contains(&bytes[i]) {
                    i += 1;
                }
                match bytes.get(i) {
                    Some(b'p') => {
                        return Err(rt_err(format!(
                            "{}string.format: %p is not allowed (addresses differ from run to run)",
                            caller(lua)
                        )))
                    }
                    Some(b's') => {
                        if let Some(v) = args.get(arg) {
                            if !matches!(v, Value::String(_) | Value::Integer(_) | Value::Number(_)) {
                                let t = plain_tostring(lua, v, &original_tostring)?;
                                args[arg] = Value::String(lua.create_string(&t)?);
                            }
                        }
                    }
                    _ => {}
                }
                arg += 1;
                i += 1;
            }
            original_format.call::<mlua::LuaString>((fmt, Variadic::from_iter(args)))
        })?,
    )?;
    Ok(())
}

/// Replaces the `math` functions that would call the platform's C library with the
/// portable ones (`libm`, a port of musl), so a script computes the same bits on every OS
/// and CPU (see `sim::math`). `math.sqrt`, `floor`, `fmod`, `abs` are exact already. The
/// `^` operator still calls the C `pow` for any exponent but 2 (Lua gives no hook for it):
/// `docs/MODDING.md` tells modders to multiply instead.
pub(super) fn install_portable_math(lua: &Lua, g: &Table) -> mlua::Result<()> {
    let math: Table = g.get("math")?;
    type Unary = fn(f64) -> f64;
    let unary: [(&str, Unary); 6] = [
        ("sin", libm::sin),
        ("cos", libm::cos),
        ("tan", libm::tan),
        ("asin", libm::asin),
        ("acos", libm::acos),
        ("exp", libm::exp),
    ];
    for (name, f) in unary {
        math.set(name, lua.create_function(move |_, x: f64| Ok(f(x)))?)?;
    }
    // math.log(x [, base]): the base form divides two portable logs.
    math.set(
        "log",
        lua.create_function(|_, (x, base): (f64, Option<f64>)| {
            Ok(match base {
                None => libm::log(x),
                Some(2.0) => libm::log2(x),
                Some(10.0) => libm::log10(x),
                Some(b) => libm::log(x) / libm::log(b),
            })
        })?,
    )?;
    // math.atan(y [, x]) is atan2 in Lua 5.4.
    math.set("atan", lua.create_function(|_, (y, x): (f64, Option<f64>)| Ok(libm::atan2(y, x.unwrap_or(1.0))))?)?;
    Ok(())
}

/// The standard library tables a mod sees as read-only views.
pub(super) const LIBRARIES: [&str; 5] = ["string", "table", "math", "coroutine", "utf8"];

/// A mod's own global environment: its globals are its own; everything else (the emitter
/// API, the standard library, through read-only views) is looked up in the shared API,
/// which no mod can change. One mod cannot alter what another mod's scripts see.
pub(super) fn mod_env(lua: &Lua) -> mlua::Result<Table> {
    let api: Table = lua.named_registry_value("hf_api")?;
    let env = lua.create_table()?;
    let refuse = lua.create_function(|_, (_t, k): (Value, Value)| -> mlua::Result<()> {
        let k = match k {
            Value::String(s) => s.to_string_lossy(),
            other => other.type_name().to_string(),
        };
        Err(rt_err(format!("the standard library is read-only (cannot set '{}')", escape_text(&k))))
    })?;
    for name in LIBRARIES {
        let lib: Table = api.get(name)?;
        let view = lua.create_table()?;
        let mt = lua.create_table()?;
        mt.raw_set("__index", lib.clone())?;
        mt.raw_set("__newindex", refuse.clone())?;
        mt.raw_set("__metatable", false)?;
        let next: Function = api.get("next")?;
        let l2 = lib.clone();
        mt.raw_set("__pairs", lua.create_function(move |_, _t: Value| Ok((next.clone(), l2.clone(), Value::Nil)))?)?;
        view.set_metatable(Some(mt))?;
        env.raw_set(name, view)?;
    }
    env.raw_set("_G", env.clone())?;
    let mt = lua.create_table()?;
    mt.raw_set("__index", api)?;
    mt.raw_set("__metatable", false)?;
    env.set_metatable(Some(mt))?;
    Ok(env)
}
