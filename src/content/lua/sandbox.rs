//! The sandbox's guards: library functions that would work unboundedly in C get size
//! checks and charges, `tostring` and `string.format` print no addresses, `math` is the
//! portable one, each mod gets its own environment over a read-only API, and source with
//! to-be-closed variables is refused.

use mlua::{Function, Lua, Table, Value, Variadic};

use super::*;

/// The line of the first to-be-closed variable (`local x <close> = ...`) in a compiled
/// chunk, if any. They are refused: Lua runs their `__close` handlers while it unwinds an
/// error, which can happen inside the instruction hook where no limit applies, so a looping
/// handler could never be stopped. The check reads what Lua's own parser made (the chunk's
/// bytecode, every nested function): an `OP_TBC` instruction is such a variable however
/// the source spelled it (comments between `<` and `close`, line breaks, ...).
pub fn find_close_variable(f: &Function) -> Result<Option<usize>, String> {
    close_in_dump(&f.dump(false)).map_err(|e| format!("could not inspect the compiled chunk ({e})"))
}

/// Lua 5.4's `OP_TBC` ("mark variable A to be closed"), the low 7 bits of an instruction.
const OP_TBC: u32 = 55;
/// `lineinfo` entries that mean "see abslineinfo" (`ABSLINEINFO`).
const ABS_LINE: i8 = -0x80;

/// Walks a `string.dump` of a Lua 5.4 chunk (`ldump.c`'s layout) for `OP_TBC`.
fn close_in_dump(b: &[u8]) -> Result<Option<usize>, &'static str> {
    struct R<'a> {
        b: &'a [u8],
        i: usize,
    }
    impl R<'_> {
        fn take(&mut self, n: usize) -> Result<&[u8], &'static str> {
            let end = self.i.checked_add(n).filter(|&e| e <= self.b.len()).ok_or("truncated")?;
            let s = &self.b[self.i..end];
            self.i = end;
            Ok(s)
        }
        fn byte(&mut self) -> Result<u8, &'static str> {
            Ok(self.take(1)?[0])
        }
        /// `dumpSize`: 7 bits a byte, most significant first, the last byte flagged 0x80.
        fn size(&mut self) -> Result<usize, &'static str> {
            let mut x: usize = 0;
            loop {
                let c = self.byte()?;
                x = x.checked_mul(128).ok_or("size overflow")? | (c & 0x7f) as usize;
                if c & 0x80 != 0 {
                    return Ok(x);
                }
            }
        }
        fn string(&mut self) -> Result<(), &'static str> {
            let n = self.size()?;
            if n > 0 {
                self.take(n - 1)?;
            }
            Ok(())
        }
        fn function(&mut self) -> Result<Option<usize>, &'static str> {
            self.string()?; // source
            let line_defined = self.size()?;
            self.size()?; // last line
            self.take(3)?; // params, vararg, stack size
            let ncode = self.size()?;
            let code = self.take(ncode.checked_mul(4).ok_or("code size")?)?.to_vec();
            let tbc = code.chunks_exact(4).position(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]) & 0x7f == OP_TBC);
            for _ in 0..self.size()? {
                match self.byte()? {
                    0x00 | 0x01 | 0x11 => {}
                    0x03 | 0x13 => {
                        self.take(8)?;
                    }
                    0x04 | 0x14 => self.string()?,
                    _ => return Err("unknown constant type"),
                }
            }
            let nup = self.size()?;
            self.take(nup.checked_mul(3).ok_or("upvalues")?)?;
            let mut inner = None;
            for _ in 0..self.size()? {
                let found = self.function()?;
                inner = inner.or(found);
            }
            let nline = self.size()?;
            let lineinfo: Vec<i8> = self.take(nline)?.iter().map(|&x| x as i8).collect();
            let mut abs = Vec::new();
            for _ in 0..self.size()? {
                abs.push((self.size()?, self.size()?));
            }
            for _ in 0..self.size()? {
                self.string()?;
                self.size()?;
                self.size()?;
            }
            for _ in 0..self.size()? {
                self.string()?;
            }
            let Some(pc) = tbc else { return Ok(inner) };
            // ldebug.c's luaG_getfuncline: from the last absolute line at or before pc, add
            // the relative steps up to it.
            let (mut base_pc, mut line) = match abs.iter().rev().find(|(p, _)| *p <= pc) {
                Some(&(p, l)) => (p as i64, l as i64),
                None => (-1, line_defined as i64),
            };
            while base_pc < pc as i64 {
                base_pc += 1;
                match lineinfo.get(base_pc as usize) {
                    Some(&d) if d != ABS_LINE => line += d as i64,
                    _ => {}
                }
            }
            Ok(Some(line.max(1) as usize))
        }
    }
    let mut r = R { b, i: 0 };
    if r.take(4)? != b"\x1bLua" || r.byte()? != 0x54 {
        return Err("not a Lua 5.4 chunk");
    }
    // format, LUAC_DATA (6), sizes of Instruction, Integer, Number, LUAC_INT, LUAC_NUM
    r.take(1 + 6 + 3 + 8 + 8)?;
    r.byte()?; // main function's upvalue count
    r.function()
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
        // `pairs(view)` iterates the library through a closure: the real table is never
        // handed out (the generic `for`'s state value is the view itself).
        let next: Function = api.get("next")?;
        let l2 = lib.clone();
        let step =
            lua.create_function(move |_, (_view, k): (Value, Value)| next.call::<(Value, Value)>((l2.clone(), k)))?;
        mt.raw_set("__pairs", lua.create_function(move |_, t: Value| Ok((step.clone(), t, Value::Nil)))?)?;
        view.set_metatable(Some(mt))?;
        env.raw_set(name, view)?;
    }
    // `rawset` on a library view would write the view itself: refused like any write.
    let views = lua.create_table()?;
    for name in LIBRARIES {
        views.raw_set(env.raw_get::<Table>(name)?, true)?;
    }
    let raw: Function = api.get("rawset")?;
    env.raw_set(
        "rawset",
        lua.create_function(move |_, (t, k, v): (Value, Value, Value)| {
            if let Value::Table(tt) = &t {
                if views.raw_get::<bool>(tt.clone()).unwrap_or(false) {
                    return Err(rt_err("the standard library is read-only (rawset on a library)"));
                }
            }
            if matches!(&k, Value::String(s) if s.as_bytes().as_ref() == b"__close") {
                return Err(rt_err("__close metamethods are not allowed"));
            }
            raw.call::<Value>((t, k, v))
        })?,
    )?;
    env.raw_set("_G", env.clone())?;
    // Strict globals: reading a name that neither the API nor the mod defined is an error
    // at the mod's line. Lua would read nil, and a misspelt name in a firing table would
    // quietly become the field's default. `rawget(_ENV, name)` tests for one on purpose.
    let strict = lua.create_function(move |lua, (env, k): (Table, Value)| -> mlua::Result<Value> {
        let v: Value = api.raw_get(k.clone())?;
        let Value::String(name) = &k else { return Ok(v) };
        if !v.is_nil() {
            return Ok(v);
        }
        let mut name = name.to_string_lossy();
        // The suggestion is Rust's work, outside the instruction budget: only for names a
        // person types, against keys of about the same length, a bounded number of them.
        const LONGEST: usize = 64;
        let mut known: Vec<String> = Vec::new();
        if name.len() <= LONGEST {
            'scan: for t in [&api, &env] {
                for (k, (key, _)) in t.pairs::<Value, Value>().flatten().enumerate() {
                    if k >= 4096 {
                        continue 'scan;
                    }
                    if let Value::String(key) = key {
                        let n = key.as_bytes().len();
                        if n <= LONGEST && n.abs_diff(name.len()) <= 3 {
                            known.push(key.to_string_lossy());
                        }
                    }
                }
            }
        }
        let hint = crate::content::lua::spec::suggest(&name, known.iter().map(|s| s.as_str()))
            .map(|g| format!(" (did you mean '{g}'?)"))
            .unwrap_or_default();
        truncate_chars(&mut name, LONGEST);
        let name = escape_text(&name);
        Err(rt_err(format!(
            "{}undefined global '{name}'{hint}: a global is nil until the script sets one (to test for one on purpose: rawget(_ENV, \"{name}\"))",
            where_in_mod(lua)
        )))
    })?;
    let mt = lua.create_table()?;
    mt.raw_set("__index", strict)?;
    mt.raw_set("__metatable", false)?;
    env.set_metatable(Some(mt))?;
    Ok(env)
}
