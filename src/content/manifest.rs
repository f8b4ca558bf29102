//! `mod.toml`: who a mod is, which game versions it supports, what it depends on.

use std::collections::BTreeMap;

use semver::{Version, VersionReq};
use serde::Deserialize;

/// The version mods declare compatibility with.
pub const GAME_VERSION: &str = env!("CARGO_PKG_VERSION");

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// Lowercase letters, digits and `_`; unique among loaded mods.
    pub id: String,
    pub name: String,
    pub version: Version,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub authors: Vec<String>,
    /// Game versions this mod works with, e.g. `">=0.1, <0.2"`.
    pub game_version: VersionReq,
    /// Mod id -> version requirement.
    #[serde(default)]
    pub dependencies: BTreeMap<String, VersionReq>,
    /// False for a mod that is loaded only when asked for (an example that ships with the
    /// game): turned on in the Mods menu, or named with `--mods`.
    #[serde(default = "default_true")]
    pub enabled_by_default: bool,
}

fn default_true() -> bool {
    true
}

impl Manifest {
    pub fn id_is_valid(id: &str) -> bool {
        !id.is_empty()
            && id.len() <= 64
            && id.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
    }

    pub fn supports_game(&self) -> bool {
        Version::parse(GAME_VERSION).is_ok_and(|v| self.game_version.matches(&v))
    }
}
