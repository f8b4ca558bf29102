//! Reads a definitions file (a TOML table of id -> definition) so that every entry is
//! checked on its own: one bad enemy does not hide the next one's error, and every error
//! carries the line and column where it is.

use std::collections::HashMap;
use std::marker::PhantomData;

use serde::de::{DeserializeOwned, DeserializeSeed, IgnoredAny, MapAccess, Visitor};

use super::diag::{line_col, Diagnostic, LineIndex};

/// A parsed TOML file with the position of every entry and every field in it.
pub struct TomlDoc {
    pub file: String,
    pub text: String,
    /// (entry, field) -> (line, col); field "" is the entry itself.
    pub locs: HashMap<(String, String), (usize, usize)>,
    pub keys: Vec<String>,
}

impl TomlDoc {
    /// Parses the syntax; syntax errors are all reported, and the file yields nothing.
    pub fn parse(file: &str, text: String, mod_id: &str, diags: &mut Vec<Diagnostic>) -> Option<TomlDoc> {
        let (root, errors) = toml::de::DeTable::parse_recoverable(&text);
        if !errors.is_empty() {
            for e in errors {
                let pos = e.span().map(|s| line_col(&text, s.start));
                diags
                    .push(Diagnostic::error(Some(mod_id), Some(file), format!("TOML syntax: {}", e.message())).at(pos));
            }
            return None;
        }
        let mut locs = HashMap::new();
        let mut keys = Vec::new();
        let index = LineIndex::new(&text);
        for (k, v) in root.get_ref().iter() {
            let key = k.get_ref().to_string();
            locs.insert((key.clone(), String::new()), index.line_col(k.span().start));
            if let Some(t) = v.get_ref().as_table() {
                for (fk, fv) in t.iter() {
                    let field = fk.get_ref().to_string();
                    // Each element of an array (each `[[boss.phases]]`, each wave) has its
                    // own place: "phases#1" is the second phase.
                    if let Some(a) = fv.get_ref().as_array() {
                        for (i, el) in a.iter().enumerate() {
                            locs.insert((key.clone(), format!("{field}#{i}")), index.line_col(el.span().start));
                        }
                    }
                    locs.insert((key.clone(), field), index.line_col(fk.span().start));
                }
            }
            keys.push(key);
        }
        drop(index);
        drop(root);
        Some(TomlDoc { file: file.to_string(), text, locs, keys })
    }

    /// Where `field` of `entry` is (`field#n`: its n-th element, from 0), falling back to
    /// the field, then to the entry.
    pub fn loc(&self, entry: &str, field: &str) -> Option<(usize, usize)> {
        let whole = field.split('#').next().unwrap_or(field);
        self.locs
            .get(&(entry.to_string(), field.to_string()))
            .or_else(|| self.locs.get(&(entry.to_string(), whole.to_string())))
            .or_else(|| self.locs.get(&(entry.to_string(), String::new())))
            .copied()
    }

    /// Deserializes every entry in one pass over one parse (linear in the file's size),
    /// then reports the broken ones with line and column by deserializing just those
    /// again (at most [`MAX_REPORTED`]; the rest are counted).
    pub fn entries<T: DeserializeOwned>(&self, mod_id: &str, diags: &mut Vec<Diagnostic>) -> Vec<(String, T)> {
        let all = toml::Deserializer::parse(&self.text)
            .and_then(|d| All::<T> { _t: PhantomData }.deserialize(d))
            .unwrap_or_default();
        let mut out = Vec::with_capacity(all.len());
        let mut broken = 0;
        for (key, v) in all {
            match v {
                Some(v) => out.push((key, v)),
                None => {
                    broken += 1;
                    if broken <= MAX_REPORTED {
                        let _ = self.entry::<T>(&key, mod_id, diags);
                    }
                }
            }
        }
        if broken > MAX_REPORTED {
            diags.push(Diagnostic::error(
                Some(mod_id),
                Some(&self.file),
                format!("{} more entries have errors (fix the ones above first)", broken - MAX_REPORTED),
            ));
        }
        out
    }

    /// Deserializes one entry. Errors (unknown or mistyped fields) carry line and column.
    pub fn entry<T: DeserializeOwned>(&self, key: &str, mod_id: &str, diags: &mut Vec<Diagnostic>) -> Option<T> {
        let result =
            toml::Deserializer::parse(&self.text).and_then(|d| Pick::<T> { key, _t: PhantomData }.deserialize(d));
        match result {
            Ok(Some(v)) => Some(v),
            Ok(None) => None,
            Err(e) => {
                let pos = e.span().map(|s| line_col(&self.text, s.start)).or_else(|| self.loc(key, ""));
                let mut msg = format!("'{key}': {}", e.message().trim());
                if let Some(hint) = did_you_mean(&msg) {
                    msg.push_str(&hint);
                }
                if msg.contains("contact_damage") {
                    msg.push_str(" (there is no contact damage in Hailfire: every threat must be a bullet)");
                }
                diags.push(Diagnostic::error(Some(mod_id), Some(&self.file), msg).at(pos));
                None
            }
        }
    }
}

/// Broken entries reported in full per file; the rest are counted.
pub const MAX_REPORTED: usize = 20;

/// Deserializes every value of the top-level table, noting (as `None`) those that fail
/// without stopping at them.
struct All<T> {
    _t: PhantomData<T>,
}

impl<'de, T: DeserializeOwned> DeserializeSeed<'de> for All<T> {
    type Value = Vec<(String, Option<T>)>;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de, T: DeserializeOwned> Visitor<'de> for All<T> {
    type Value = Vec<(String, Option<T>)>;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "a table of definitions")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::new();
        while let Some(k) = map.next_key::<String>()? {
            out.push((k, map.next_value::<T>().ok()));
        }
        Ok(out)
    }
}

/// Deserializes only the value under `key` of the top-level table, skipping the rest.
struct Pick<'a, T> {
    key: &'a str,
    _t: PhantomData<T>,
}

impl<'de, T: DeserializeOwned> DeserializeSeed<'de> for Pick<'_, T> {
    type Value = Option<T>;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Option<T>, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de, T: DeserializeOwned> Visitor<'de> for Pick<'_, T> {
    type Value = Option<T>;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "a table of definitions")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Option<T>, A::Error> {
        let mut out = None;
        while let Some(k) = map.next_key::<String>()? {
            if k == self.key {
                out = Some(map.next_value::<T>()?);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(out)
    }
}

/// " (did you mean `x`?)" for serde's "unknown field `y`, expected one of `a`, `b`".
fn did_you_mean(msg: &str) -> Option<String> {
    let rest = msg.split("unknown field `").nth(1)?;
    let (got, rest) = rest.split_once('`')?;
    let expected = rest.split("expected").nth(1)?;
    let known: Vec<&str> = expected.split('`').skip(1).step_by(2).collect();
    let s = crate::content::lua::spec::suggest(got, known.iter().copied())?;
    Some(format!(" (did you mean `{s}`?)"))
}
