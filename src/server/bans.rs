//! The ban list: player keys, names and addresses refused at the door, kept in a TOML file so that bans
//! survive restarts. The console's `ban`/`unban` (and an admin's) change it; the file is
//! rewritten whole (to a temporary file, then renamed) after every change.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::content::diag::line_col;

/// One ban: a player's key, a name, an address, or several (banning a connected player
/// bans their key and name, and the address they came from unless it is this machine's).
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Ban {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub address: String,
    /// The player's key, 64 hex digits.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub key: String,
    #[serde(default)]
    pub reason: String,
    /// When, in seconds since 1970 (UTC).
    #[serde(default)]
    pub since: u64,
}

impl Ban {
    /// The address, canonical (an IPv4 address mapped into IPv6, as a server bound to
    /// `[::]` sees IPv4 players, is the IPv4 address).
    fn ip(&self) -> Option<IpAddr> {
        self.address.parse::<IpAddr>().ok().map(|i| i.to_canonical())
    }

    fn key_bytes(&self) -> Option<[u8; 32]> {
        super::keylist::parse_key(&self.key)
    }

    /// How the console shows it.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if !self.name.is_empty() {
            parts.push(self.name.clone());
        }
        if let Some(k) = self.key_bytes() {
            parts.push(format!("key [{}]", super::keylist::short(&k)));
        }
        if !self.address.is_empty() {
            parts.push(self.address.clone());
        }
        let who = parts.join(", ");
        format!("{who}: {}", if self.reason.is_empty() { "no reason given" } else { &self.reason })
    }
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct BanFile {
    #[serde(default)]
    ban: Vec<Ban>,
}

/// The bans in force, and the file they live in (None: kept in memory only, for tests and
/// host-and-play).
#[derive(Debug, Default)]
pub struct BanList {
    pub path: Option<PathBuf>,
    pub bans: Vec<Ban>,
}

impl BanList {
    /// Reads the list at `path` (a missing file is an empty list). Errors name the file,
    /// line and column.
    pub fn load(path: &Path) -> Result<BanList, String> {
        if !path.exists() {
            return Ok(BanList { path: Some(path.to_path_buf()), bans: Vec::new() });
        }
        let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let file: BanFile = toml::from_str(&text).map_err(|e| {
            let (l, c) = e.span().map(|s| line_col(&text, s.start)).unwrap_or((1, 1));
            format!("{}:{l}:{c}: {}", path.display(), e.message().trim())
        })?;
        for (i, b) in file.ban.iter().enumerate() {
            if b.name.is_empty() && b.address.is_empty() && b.key.is_empty() {
                return Err(format!("{}: ban {} has no name, address or key", path.display(), i + 1));
            }
            if !b.key.is_empty() && b.key_bytes().is_none() {
                return Err(format!("{}: ban {}: key must be 64 hex digits, not '{}'", path.display(), i + 1, b.key));
            }
            if !b.address.is_empty() && b.ip().is_none() {
                return Err(format!("{}: ban {}: '{}' is not an IP address", path.display(), i + 1, b.address));
            }
        }
        Ok(BanList { path: Some(path.to_path_buf()), bans: file.ban })
    }

    /// The ban that keeps out a player with this name, from this address, with this key,
    /// if any. Names compare without regard to case.
    pub fn refuses(&self, name: &str, ip: Option<IpAddr>, key: Option<&[u8; 32]>) -> Option<&Ban> {
        let ip = ip.map(|i| i.to_canonical());
        let name = name.to_lowercase();
        self.bans.iter().find(|b| {
            (!b.name.is_empty() && b.name.to_lowercase() == name)
                || (ip.is_some() && b.ip() == ip)
                || (key.is_some() && b.key_bytes().as_ref() == key)
        })
    }

    /// Adds a ban and saves the list.
    pub fn add(&mut self, name: &str, ip: Option<IpAddr>, key: Option<&[u8; 32]>, reason: &str) -> Result<(), String> {
        let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        self.bans.push(Ban {
            name: name.to_string(),
            address: ip.map(|i| i.to_canonical().to_string()).unwrap_or_default(),
            key: key.map(|k| crate::net::secure::to_hex(k)).unwrap_or_default(),
            reason: reason.to_string(),
            since,
        });
        self.save()
    }

    /// Lifts every ban on this name, address, key or short key fingerprint; returns how
    /// many there were. (A ban of several together is lifted whole, by any of them.)
    pub fn remove(&mut self, who: &str) -> Result<usize, String> {
        let ip: Option<IpAddr> = who.trim().parse::<IpAddr>().ok().map(|i| i.to_canonical());
        let name = crate::protocol::names::sanitize(who).to_lowercase();
        let raw = who.trim().to_lowercase();
        let before = self.bans.len();
        self.bans.retain(|b| {
            let key = b.key_bytes();
            let by_key = key.is_some_and(|k| b.key.eq_ignore_ascii_case(&raw) || super::keylist::short(&k) == raw);
            !(b.name.to_lowercase() == name && !b.name.is_empty() || (ip.is_some() && b.ip() == ip) || by_key)
        });
        let n = before - self.bans.len();
        if n > 0 {
            self.save()?;
        }
        Ok(n)
    }

    fn save(&self) -> Result<(), String> {
        let Some(path) = &self.path else { return Ok(()) };
        let body = toml::to_string_pretty(&BanFile { ban: self.bans.clone() }).map_err(|e| e.to_string())?;
        let text = format!(
            "# Hailfire ban list, written by the server's `ban` and `unban` commands. You may edit\n\
             # it while the server is stopped: each [[ban]] has a key (64 hex digits), a name,\n\
             # an address, or several of them.\n\n{body}"
        );
        super::keylist::write_private(path, &text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bans_persist_and_lift() {
        let dir = std::env::temp_dir().join(format!("hailfire-bans-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = dir.join("bans.toml");
        let mut list = BanList::load(&path).unwrap();
        assert!(list.bans.is_empty());
        let ip: IpAddr = "203.0.113.7".parse().unwrap();
        list.add("Griefer", Some(ip), None, "spawn camping").unwrap();
        list.add("", Some("2001:db8::1".parse().unwrap()), None, "").unwrap();
        let again = BanList::load(&path).unwrap();
        assert_eq!(again.bans, list.bans);
        assert_eq!(again.refuses("griefer", None, None).map(|b| b.reason.as_str()), Some("spawn camping"));
        assert!(again.refuses("someone", Some(ip), None).is_some());
        assert!(again.refuses("someone", Some("2001:db8::1".parse().unwrap()), None).is_some());
        assert!(again.refuses("someone", Some("198.51.100.1".parse().unwrap()), None).is_none());
        // An IPv4 player seen by a server bound to [::] (IPv4-mapped) is the same address.
        assert!(again.refuses("someone", Some("::ffff:203.0.113.7".parse().unwrap()), None).is_some());
        assert!(again.refuses("GRIEFER", None, None).is_some() && again.refuses("griefer2", None, None).is_none());
        let mut again = again;
        // By key: under any name, from any address.
        let key = [7u8; 32];
        again.add("", None, Some(&key), "alt accounts").unwrap();
        let again2 = BanList::load(&path).unwrap();
        assert!(again2.refuses("a new name", Some("198.51.100.1".parse().unwrap()), Some(&key)).is_some());
        assert!(again2.refuses("a new name", None, Some(&[8u8; 32])).is_none());
        assert_eq!(again.remove(&super::super::keylist::short(&key)).unwrap(), 1);
        assert!(again.refuses("x", None, Some(&key)).is_none());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600, "owner-only");
        }
        assert_eq!(again.remove(" GRIEFER ").unwrap(), 1);
        assert_eq!(again.remove("nobody").unwrap(), 0);
        assert!(BanList::load(&path).unwrap().refuses("griefer", Some(ip), None).is_none());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_broken_list_names_its_line() {
        let dir = std::env::temp_dir().join(format!("hailfire-bans-bad-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("bans.toml");
        std::fs::write(&path, "[[ban]]\nname = \"x\"\nadress = \"1.2.3.4\"\n").unwrap();
        let e = BanList::load(&path).unwrap_err();
        assert!(e.contains("bans.toml:3:1") && e.contains("adress"), "{e}");
        std::fs::write(&path, "[[ban]]\naddress = \"not an ip\"\n").unwrap();
        assert!(BanList::load(&path).unwrap_err().contains("not an IP address"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
