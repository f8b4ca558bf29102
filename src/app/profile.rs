//! The player's profile: personal bests and stars per dungeon, in `profile.toml` in the
//! data folder (beside the game's key files). Stars: one for a clear, one for a clear with
//! nobody out, one for a clear under par. Written whole (a temporary file, then renamed);
//! a file that does not read is set aside as `.bad` and a new profile starts.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::sim::events::{RunOutcome, RunSummary};

pub const STAR_CLEARED: u8 = 1;
pub const STAR_NOBODY_OUT: u8 = 2;
pub const STAR_UNDER_PAR: u8 = 4;

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct Best {
    pub best_time_s: f64,
    pub best_score: u32,
    pub stars: u8,
    pub clears: u32,
    pub runs: u32,
}

impl Best {
    /// "2 of 3 stars" (the interface's fonts have no star glyph).
    pub fn stars_text(&self) -> String {
        format!("{} of 3 stars", (self.stars & 7).count_ones())
    }
}

#[derive(Debug, Default)]
pub struct Profile {
    pub path: Option<PathBuf>,
    pub dungeons: BTreeMap<String, Best>,
}

impl Profile {
    pub fn default_path() -> Option<PathBuf> {
        crate::crash::data_dir().map(|d| d.join("profile.toml"))
    }

    /// Reads `path` (missing: a new profile).
    pub fn load(path: &Path) -> Profile {
        let dungeons = match std::fs::read_to_string(path) {
            Ok(text) => match toml::from_str(&text) {
                Ok(d) => d,
                Err(e) => {
                    let bad = path.with_extension("toml.bad");
                    let _ = std::fs::rename(path, &bad);
                    tracing::warn!(
                        "{}: {}; kept as {}, starting a new profile",
                        path.display(),
                        e.message(),
                        bad.display()
                    );
                    BTreeMap::new()
                }
            },
            Err(_) => BTreeMap::new(),
        };
        Profile { path: Some(path.to_path_buf()), dungeons }
    }

    /// Stars earned over every dungeon.
    pub fn total_stars(&self) -> u32 {
        self.dungeons.values().map(|b| (b.stars & 7).count_ones()).sum()
    }

    /// Whether a ship needing `stars` is unlocked.
    pub fn unlocks(&self, stars: u32) -> bool {
        stars <= self.total_stars()
    }

    /// Counts a run this player (`me`) took part in; saves. Returns the stars it earned
    /// that were new.
    pub fn count(&mut self, run: &RunSummary, me: Option<u32>) -> u8 {
        if run.dungeon.is_empty() || !run.rows.iter().any(|r| Some(r.id) == me) {
            return 0;
        }
        let b = self.dungeons.entry(run.dungeon.clone()).or_default();
        b.runs += 1;
        let mut new = 0;
        if run.outcome == RunOutcome::Cleared {
            b.clears += 1;
            let secs = run.ticks as f64 / crate::sim::TICK_RATE as f64;
            if b.best_time_s <= 0.0 || secs < b.best_time_s {
                b.best_time_s = (secs * 100.0).round() / 100.0;
            }
            b.best_score = b.best_score.max(run.team_score);
            let mut earned = STAR_CLEARED;
            if run.rows.iter().all(|r| !r.out) {
                earned |= STAR_NOBODY_OUT;
            }
            if secs <= crate::sim::config::DEFAULT_PAR_SECONDS as f64 {
                earned |= STAR_UNDER_PAR;
            }
            new = earned & !b.stars;
            b.stars |= earned;
        }
        if let Err(e) = self.save() {
            tracing::warn!("could not save the profile: {e}");
        }
        new
    }

    fn save(&self) -> Result<(), String> {
        let Some(path) = &self.path else { return Ok(()) };
        let text = toml::to_string(&self.dungeons).map_err(|e| e.to_string())?;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
        }
        let tmp = path.with_extension("toml.tmp");
        std::fs::write(&tmp, format!("# Your personal bests and stars (written by the game).\n{text}"))
            .map_err(|e| e.to_string())?;
        std::fs::rename(&tmp, path).map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::events::RunRow;

    #[test]
    fn stars_are_earned_once_and_kept_across_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("profile.toml");
        let mut p = Profile::load(&path);
        let row = |id, out| RunRow { id, name: "x".into(), score: 10, stats: Default::default(), out };
        let run = |outcome, secs: u32, out| RunSummary {
            dungeon: "warden_keep".into(),
            outcome,
            ticks: secs * 60,
            team_score: 500,
            rows: vec![row(1, false), row(2, out)],
        };
        assert_eq!(p.count(&run(RunOutcome::Failed, 50, false), Some(1)), 0);
        assert_eq!(p.count(&run(RunOutcome::Cleared, 400, true), Some(1)), STAR_CLEARED);
        assert_eq!(p.count(&run(RunOutcome::Cleared, 90, false), Some(1)), STAR_NOBODY_OUT | STAR_UNDER_PAR);
        assert_eq!(p.count(&run(RunOutcome::Cleared, 90, false), Some(1)), 0, "nothing new");
        assert_eq!(p.count(&run(RunOutcome::Cleared, 90, false), Some(9)), 0, "not this player's run");
        let back = Profile::load(&path);
        let b = &back.dungeons["warden_keep"];
        assert_eq!((b.stars_text().as_str(), b.best_time_s, b.clears, b.runs), ("3 of 3 stars", 90.0, 3, 4));
        // Stars unlock ships: three here, so a 2-star ship is free and a 4-star one is not.
        assert_eq!(back.total_stars(), 3);
        assert!(back.unlocks(0) && back.unlocks(2) && back.unlocks(3) && !back.unlocks(4));
        std::fs::write(&path, "nonsense = [").unwrap();
        assert!(Profile::load(&path).dungeons.is_empty() && path.with_extension("toml.bad").exists());
    }
}
