//! Players by key: the allowlist (`allowlist.toml`), the operators (`ops.toml`) and the
//! names first seen with each key (`known_players.toml`). A player is the static key their
//! game proved in the secure handshake; a name is only a label. Each file is a list of
//! `[[player]]` tables, rewritten whole (owner-only, to a temporary file, then renamed)
//! after every change; errors name the file, line and column.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::content::diag::line_col;
use crate::net::secure::{fingerprint, from_hex, to_hex};

/// One player in a list: their key (64 hex digits), the name they were added under, and
/// when (seconds since 1970, UTC).
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    pub key: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub since: u64,
}

impl Entry {
    pub fn key_bytes(&self) -> Option<[u8; 32]> {
        from_hex(&self.key).and_then(|b| b.try_into().ok())
    }

    /// How the console shows it: name, short fingerprint, full key.
    pub fn describe(&self) -> String {
        let fp = self.key_bytes().map(|k| short(&k)).unwrap_or_default();
        format!("{} [{fp}] key {}", if self.name.is_empty() { "(no name)" } else { &self.name }, self.key)
    }
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct ListFile {
    #[serde(default)]
    player: Vec<Entry>,
}

/// A list of players by key, and the file it lives in (None: in memory only).
#[derive(Debug, Default)]
pub struct KeyList {
    pub path: Option<PathBuf>,
    pub entries: Vec<Entry>,
    /// What the file is, for its header comment.
    header: &'static str,
}

/// Names the server remembers with their keys, at most (the oldest are forgotten).
pub const MAX_KNOWN: usize = 20_000;

pub const ALLOWLIST_HEADER: &str =
    "# Hailfire allowlist: with `allowlist = true` in server.toml, only these players may\n\
     # join. Kept by the console's `allow` and `disallow`; you may edit it while the server\n\
     # is stopped. `key` is the player's key (64 hex digits: `hailfire key` prints yours).";
pub const OPS_HEADER: &str = "# Hailfire operators: these players' admin commands (`hailfire bot --admin`, the\n\
     # in-game console) need no admin password. Kept by the console's `op` and `deop`.";
pub const KNOWN_HEADER: &str = "# Hailfire: the key each player name was first seen with (since: when it was last\n\
     # seen). Someone else joining under one of these names is shown as NAME~KEY. Written\n\
     # by the server; the names least recently seen are forgotten first.";

/// The short fingerprint the console, logs and status show next to a name: the first two
/// groups of the key's fingerprint (`ab12:cd34`).
pub fn short(key: &[u8; 32]) -> String {
    fingerprint(key).chars().take(9).collect()
}

/// A key written out in full (64 hex digits), if `s` is one.
pub fn parse_key(s: &str) -> Option<[u8; 32]> {
    let s = s.trim();
    (s.len() == 64).then(|| from_hex(s)).flatten().and_then(|b| b.try_into().ok())
}

fn now_s() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

impl KeyList {
    /// An empty list kept in memory.
    pub fn in_memory(header: &'static str) -> KeyList {
        KeyList { path: None, entries: Vec::new(), header }
    }

    /// Reads the list at `path` (a missing file is an empty list).
    pub fn load(path: &Path, header: &'static str) -> Result<KeyList, String> {
        let mut list = KeyList { path: Some(path.to_path_buf()), entries: Vec::new(), header };
        if !path.exists() {
            return Ok(list);
        }
        let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let file: ListFile = toml::from_str(&text).map_err(|e| {
            let (l, c) = e.span().map(|s| line_col(&text, s.start)).unwrap_or((1, 1));
            format!("{}:{l}:{c}: {}", path.display(), e.message().trim())
        })?;
        for (i, p) in file.player.iter().enumerate() {
            if p.key_bytes().is_none() {
                return Err(format!(
                    "{}: player {} ({:?}): key must be 64 hex digits (`hailfire key` prints a player's), not '{}'",
                    path.display(),
                    i + 1,
                    p.name,
                    p.key
                ));
            }
        }
        list.entries = file.player;
        Ok(list)
    }

    pub fn contains(&self, key: &[u8; 32]) -> bool {
        self.find(key).is_some()
    }

    pub fn find(&self, key: &[u8; 32]) -> Option<&Entry> {
        self.entries.iter().find(|e| e.key_bytes().as_ref() == Some(key))
    }

    /// The entry under this name (any case), if any.
    pub fn by_name(&self, name: &str) -> Option<&Entry> {
        let name = name.to_lowercase();
        self.entries.iter().find(|e| e.name.to_lowercase() == name)
    }

    /// Adds a key (a key already listed only gets its name updated). Returns whether it
    /// is new. Not saved: call `save` (the change holds in memory either way).
    pub fn add(&mut self, key: &[u8; 32], name: &str) -> bool {
        let new = match self.entries.iter_mut().find(|e| e.key_bytes().as_ref() == Some(key)) {
            Some(e) => {
                e.name = name.to_string();
                false
            }
            None => {
                self.entries.push(Entry { key: to_hex(key), name: name.to_string(), since: now_s() });
                true
            }
        };
        new
    }

    /// Remembers that `name` was seen with `key` now. A name is kept with the first key it
    /// came with (one key may have many names); `since` is when it was last seen, so the
    /// list forgets the names least recently seen first. Not saved: call `save`.
    pub fn remember(&mut self, key: &[u8; 32], name: &str) {
        let lower = name.to_lowercase();
        match self.entries.iter_mut().find(|e| e.name.to_lowercase() == lower) {
            Some(e) if e.key_bytes().as_ref() == Some(key) => e.since = now_s(),
            Some(_) => {}
            None => {
                self.entries.push(Entry { key: to_hex(key), name: name.to_string(), since: now_s() });
                self.trim_to(MAX_KNOWN);
            }
        }
    }

    /// Removes the entries under a name (any case), a full key or a short fingerprint.
    /// Returns how many went. Not saved: call `save`.
    pub fn remove(&mut self, who: &str) -> usize {
        let who = who.trim();
        let lower = who.to_lowercase();
        let before = self.entries.len();
        self.entries.retain(|e| {
            let fp = e.key_bytes().map(|k| short(&k)).unwrap_or_default();
            !(e.name.to_lowercase() == lower || e.key.eq_ignore_ascii_case(who) || (!fp.is_empty() && fp == lower))
        });
        before - self.entries.len()
    }

    /// Keeps at most `max` entries, dropping the oldest (the names seen list).
    pub fn trim_to(&mut self, max: usize) {
        if self.entries.len() > max {
            self.entries.sort_by_key(|e| std::cmp::Reverse(e.since));
            self.entries.truncate(max);
        }
    }

    pub fn save(&self) -> Result<(), String> {
        let Some(path) = &self.path else { return Ok(()) };
        let body = toml::to_string_pretty(&ListFile { player: self.entries.clone() }).map_err(|e| e.to_string())?;
        write_private(path, &format!("{}\n\n{body}", self.header))
    }
}

/// Writes `text` to `path` readable by its owner only (0600 on Unix), atomically: to a
/// temporary file beside it, flushed to disk, then renamed over it. A reader (or a crash,
/// or a full disk) never leaves half a file or an empty one in its place.
pub fn write_private(path: &Path, text: &str) -> Result<(), String> {
    use std::io::Write;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let name = path.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.tmp{}", std::process::id()));
    let write = || -> std::io::Result<()> {
        let mut o = std::fs::OpenOptions::new();
        o.write(true).create(true).truncate(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            o.mode(0o600);
        }
        let mut f = o.open(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    };
    write().map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        format!("cannot write {}: {e}", path.display())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_persist_owner_only_and_remove_by_name_key_or_fingerprint() {
        let dir = std::env::temp_dir().join(format!("hailfire-keylist-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = dir.join("ops.toml");
        let mut l = KeyList::load(&path, "# ops").unwrap();
        let (a, b, c) = ([1u8; 32], [2u8; 32], [3u8; 32]);
        assert!(l.add(&a, "Ann"));
        assert!(!l.add(&a, "Annie"), "a key already listed is renamed, not added twice");
        l.add(&b, "Bob");
        l.add(&c, "Cy");
        l.save().unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        }
        let again = KeyList::load(&path, "# ops").unwrap();
        assert_eq!(again.entries, l.entries);
        assert!(again.contains(&a) && again.by_name("ANNIE").is_some());
        let mut again = again;
        assert_eq!(again.remove("annie"), 1);
        assert_eq!(again.remove(&to_hex(&b).to_uppercase()), 1);
        assert_eq!(again.remove(&short(&c)), 1);
        again.save().unwrap();
        assert!(KeyList::load(&path, "").unwrap().entries.is_empty());
        std::fs::write(&path, "[[player]]\nkey = \"abc\"\nname = \"x\"\n").unwrap();
        let e = KeyList::load(&path, "").unwrap_err();
        assert!(e.contains("64 hex digits") && e.contains("\"x\""), "{e}");
        std::fs::write(&path, "[[player]]\nkee = \"abc\"\n").unwrap();
        assert!(KeyList::load(&path, "").unwrap_err().contains("ops.toml:2:1"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
