//! Who a server is: its key pair on disk, the keys clients have pinned per address, and
//! the fingerprints people compare.

use std::io;
use std::path::{Path, PathBuf};

use snow::Builder;

use super::{mac, NOISE};

/// A static key pair: what a server proves who it is with, and what a player is known by.
#[derive(Clone)]
pub struct Identity {
    pub private: Vec<u8>,
    pub public: [u8; 32],
}

/// Shows the fingerprint only: the private half never reaches a log.
impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Identity({})", self.fingerprint())
    }
}

impl Identity {
    pub fn generate() -> io::Result<Identity> {
        let params = NOISE.parse().map_err(|e| io::Error::other(format!("{e:?}")))?;
        let kp = Builder::new(params).generate_keypair().map_err(|e| io::Error::other(format!("{e:?}")))?;
        let mut public = [0u8; 32];
        public.copy_from_slice(&kp.public);
        Ok(Identity { private: kp.private, public })
    }

    /// The server's key pair from `path`, made on first run (readable by its owner only).
    pub fn load_or_create(path: &Path) -> io::Result<Identity> {
        match Self::load(path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            other => return other,
        }
        let id = Identity::generate()?;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let mut text = to_hex(&id.private);
        text.push_str(&to_hex(&id.public));
        // Written aside and renamed into place: a reader never sees half a key, and when
        // two servers start at once, the first key on disk is the one both use.
        let tmp = path.with_extension(format!("tmp{}", std::process::id()));
        write_private(&tmp, &text)?;
        let linked = std::fs::hard_link(&tmp, path);
        let _ = std::fs::remove_file(&tmp);
        match linked {
            Ok(()) => Ok(id),
            // Another server made one first: use that one.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Self::load(path),
            Err(e) => Err(e),
        }
    }

    /// The key pair in `path`; any problem with the file is an error that names it (it is
    /// never silently replaced: that would change the server's identity).
    pub fn load(path: &Path) -> io::Result<Identity> {
        let text = std::fs::read_to_string(path)?;
        let bytes = from_hex(text.trim())
            .filter(|b| b.len() == 64)
            .ok_or_else(|| {
                io::Error::other(if path.file_name().is_some_and(|n| n == "server_key") {
                    "not a Hailfire server key (move it away to make a new one; returning players will then be asked to trust the new key)"
                } else {
                    "not a Hailfire key (move it away to make a new one; servers will then see you as a new player)"
                })
            })?;
        let mut public = [0u8; 32];
        public.copy_from_slice(&bytes[32..]);
        Ok(Identity { private: bytes[..32].to_vec(), public })
    }

    /// `<data dir>/server_key` (`$HAILFIRE_DATA_DIR` overrides the directory).
    pub fn default_path() -> Option<PathBuf> {
        data_dir().map(|d| d.join("server_key"))
    }

    /// `<data dir>/player_key`: the key a game proves when it joins a server, which
    /// servers know the player by (bans, allowlists, admins, records).
    pub fn player_path() -> Option<PathBuf> {
        data_dir().map(|d| d.join("player_key"))
    }

    /// This player's key pair, made on first run (0600, written atomically). An error
    /// names the file.
    pub fn player() -> io::Result<Identity> {
        let path = Self::player_path().ok_or_else(|| io::Error::other("no data folder for the player's key"))?;
        Self::load_or_create(&path).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))
    }

    pub fn fingerprint(&self) -> String {
        fingerprint(&self.public)
    }
}

use crate::crash::data_dir;

fn write_private(path: &Path, text: &str) -> io::Result<()> {
    use std::io::Write;
    let mut o = std::fs::OpenOptions::new();
    o.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.mode(0o600);
    }
    o.open(path)?.write_all(text.as_bytes())
}

pub fn to_hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

pub fn from_hex(s: &str) -> Option<Vec<u8>> {
    // Hex digits only (`from_str_radix` would take a sign), so one key has one spelling
    // but for case.
    if !s.len().is_multiple_of(2) || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok()).collect()
}

/// A short, readable digest of a server key, for people to compare out loud.
pub fn fingerprint(public: &[u8]) -> String {
    let h = mac(b"hailfire fingerprint", &[public]);
    h[..16].chunks(2).map(to_hex).collect::<Vec<_>>().join(":")
}

/// Server keys pinned per address, like SSH's `known_hosts`: `ADDRESS HEXKEY` per line.
#[derive(Clone, Debug)]
pub struct KnownServers {
    pub path: PathBuf,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pin {
    /// First contact: pinned now.
    New,
    Match,
    /// A different key than the pinned one: refused.
    Changed {
        pinned: String,
    },
    /// A different key than the pinned one, accepted by the player: pinned now.
    Replaced,
}

impl KnownServers {
    /// `<data dir>/known_servers`.
    pub fn default_path() -> Option<PathBuf> {
        data_dir().map(|d| d.join("known_servers"))
    }

    fn read(&self) -> Vec<(String, String)> {
        std::fs::read_to_string(&self.path)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.split_once(' ').map(|(a, k)| (a.to_string(), k.trim().to_string())))
            .collect()
    }

    /// Checks `key` for `addr`, pinning it on first contact (or when `accept_new` says the
    /// player accepted a changed key).
    pub fn check(&self, addr: &str, key: &[u8], accept_new: bool) -> io::Result<Pin> {
        let hex = to_hex(key);
        let mut all = self.read();
        let result = match all.iter().find(|(a, _)| a == addr) {
            Some((_, k)) if *k == hex => return Ok(Pin::Match),
            Some((_, k)) if !accept_new => {
                let pinned = from_hex(k).map_or_else(|| k.clone(), |b| fingerprint(&b));
                return Ok(Pin::Changed { pinned });
            }
            Some(_) => Pin::Replaced,
            None => Pin::New,
        };
        all.retain(|(a, _)| a != addr);
        all.push((addr.to_string(), hex));
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let text: String = all.iter().map(|(a, k)| format!("{a} {k}\n")).collect();
        write_private(&self.path, &text)?;
        Ok(result)
    }
}
