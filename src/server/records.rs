//! Records: each dungeon's fastest clear and best team score, with the party's names, in
//! `records.toml` beside the ban list. Rewritten whole (a temporary file, then renamed)
//! after each new record; a file that cannot be read is kept as `records.toml.bad`,
//! reported with its line, and the server starts with no records rather than not at all.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::content::diag::line_col;
use crate::sim::events::{RunOutcome, RunSummary};

/// One dungeon's records.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Record {
    /// Seconds of the fastest clear, and who cleared.
    #[serde(default)]
    pub best_time_s: f64,
    #[serde(default)]
    pub best_time_party: Vec<String>,
    /// The short fingerprints of the party's keys, in the same order ("" for the host).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub best_time_keys: Vec<String>,
    #[serde(default)]
    pub best_score: u32,
    #[serde(default)]
    pub best_score_party: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub best_score_keys: Vec<String>,
    /// When the newest of them was set, seconds since 1970 (UTC).
    #[serde(default)]
    pub set_at: u64,
}

/// What a clear changed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NewRecords {
    pub time: bool,
    pub score: bool,
}

/// The records, and the file they live in (None: in memory, for tests and host-and-play
/// without a data folder).
#[derive(Debug, Default)]
pub struct Records {
    pub path: Option<PathBuf>,
    pub dungeons: BTreeMap<String, Record>,
}

impl Records {
    /// Reads `path` (missing: no records yet). A file that does not parse is moved aside to
    /// `.bad` and the error (file:line:col) returned with an empty list, so the server runs.
    pub fn load(path: &Path) -> (Records, Option<String>) {
        let empty = Records { path: Some(path.to_path_buf()), dungeons: BTreeMap::new() };
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return (empty, None),
            Err(e) => return (empty, Some(format!("cannot read {}: {e}", path.display()))),
        };
        match toml::from_str::<BTreeMap<String, Record>>(&text) {
            Ok(d) => (Records { path: Some(path.to_path_buf()), dungeons: d }, None),
            Err(e) => {
                let (l, c) = e.span().map(|s| line_col(&text, s.start)).unwrap_or((1, 1));
                let bad = path.with_extension("toml.bad");
                let kept = std::fs::rename(path, &bad).is_ok();
                let why = format!(
                    "{}:{l}:{c}: {}; {}starting with no records",
                    path.display(),
                    e.message().trim(),
                    if kept { format!("kept as {}, ", bad.display()) } else { String::new() }
                );
                (empty, Some(why))
            }
        }
    }

    /// Counts a run: a clear may set the dungeon's fastest time or best score. Saves when
    /// it did; the error, if saving failed.
    /// `key_of` gives a player's short key fingerprint (records name people by key too).
    pub fn count(&mut self, run: &RunSummary, key_of: &dyn Fn(u32) -> String) -> (NewRecords, Option<String>) {
        if run.outcome != RunOutcome::Cleared || run.dungeon.is_empty() {
            return (NewRecords::default(), None);
        }
        let secs = run.ticks as f64 / crate::sim::TICK_RATE as f64;
        let party: Vec<String> = run.rows.iter().map(|r| r.name.clone()).collect();
        let keys: Vec<String> = run.rows.iter().map(|r| key_of(r.id)).collect();
        let r = self.dungeons.entry(run.dungeon.clone()).or_default();
        let mut new = NewRecords::default();
        if r.best_time_s <= 0.0 || secs < r.best_time_s {
            r.best_time_s = (secs * 100.0).round() / 100.0;
            r.best_time_party = party.clone();
            r.best_time_keys = keys.clone();
            new.time = true;
        }
        if run.team_score > r.best_score {
            r.best_score = run.team_score;
            r.best_score_party = party;
            r.best_score_keys = keys;
            new.score = true;
        }
        if !(new.time || new.score) {
            return (new, None);
        }
        r.set_at = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        (new, self.save().err())
    }

    /// What players are told (the portals show it).
    pub fn message(&self) -> crate::protocol::messages::ServerMsg {
        crate::protocol::messages::ServerMsg::Records(
            self.dungeons
                .iter()
                .map(|(d, r)| crate::protocol::messages::ServerRecord {
                    dungeon: d.clone(),
                    best_time_cs: (r.best_time_s * 100.0).round().clamp(0.0, u32::MAX as f64) as u32,
                    best_score: r.best_score,
                    party: r.best_score_party.join(", "),
                })
                .collect(),
        )
    }

    /// One line per dungeon, for the console's `status`.
    pub fn lines(&self) -> Vec<String> {
        self.dungeons
            .iter()
            .map(|(d, r)| {
                format!(
                    "{d}: fastest {:.1} s ({}), best score {} ({})",
                    r.best_time_s,
                    with_keys(&r.best_time_party, &r.best_time_keys),
                    r.best_score,
                    with_keys(&r.best_score_party, &r.best_score_keys)
                )
            })
            .collect()
    }

    fn save(&self) -> Result<(), String> {
        let Some(path) = &self.path else { return Ok(()) };
        let text = toml::to_string(&self.dungeons).map_err(|e| format!("records: {e}"))?;
        let body = format!("# Each dungeon's fastest clear and best team score (written by the server).\n{text}");
        super::keylist::write_private(path, &body)
    }
}

/// "Ann [ab12:cd34], Bob [ef56:7890]": names with their keys where known.
fn with_keys(names: &[String], keys: &[String]) -> String {
    names
        .iter()
        .enumerate()
        .map(|(i, n)| match keys.get(i).filter(|k| !k.is_empty()) {
            Some(k) => format!("{n} [{k}]"),
            None => n.clone(),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::events::RunRow;

    fn run(ticks: u32, score: u32, outcome: RunOutcome) -> RunSummary {
        RunSummary {
            dungeon: "warden_keep".into(),
            outcome,
            ticks,
            team_score: score,
            rows: vec![RunRow { id: 1, name: "Ann".into(), score, stats: Default::default(), out: false }],
        }
    }

    #[test]
    fn records_survive_a_restart_and_a_corrupt_file_is_kept_aside() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("records.toml");
        let (mut r, err) = Records::load(&path);
        assert!(err.is_none() && r.dungeons.is_empty());
        assert_eq!(
            r.count(&run(6000, 900, RunOutcome::Failed), &|_| String::new()).0,
            NewRecords::default(),
            "a failed run sets nothing"
        );
        assert_eq!(
            r.count(&run(6000, 900, RunOutcome::Cleared), &|id| format!("k{id}")).0,
            NewRecords { time: true, score: true }
        );
        assert_eq!(
            r.count(&run(7200, 1000, RunOutcome::Cleared), &|id| format!("k{id}")).0,
            NewRecords { time: false, score: true }
        );
        assert_eq!(r.count(&run(7200, 10, RunOutcome::Cleared), &|_| String::new()).0, NewRecords::default());
        let (back, err) = Records::load(&path);
        assert!(err.is_none(), "{err:?}");
        let w = &back.dungeons["warden_keep"];
        assert_eq!((w.best_time_s, w.best_score), (100.0, 1000));
        assert_eq!(w.best_time_party, vec!["Ann".to_string()]);
        assert!(
            back.lines()[0].starts_with("warden_keep: fastest 100.0 s (Ann [k1]), best score 1000 (Ann [k1])"),
            "{:?}",
            back.lines()
        );
        std::fs::write(&path, "[warden_keep]\nbest_score = \"lots\"\n").unwrap();
        let (r, err) = Records::load(&path);
        let err = err.expect("the broken file is reported");
        assert!(err.contains("records.toml:2:14") && err.contains("kept as"), "{err}");
        assert!(r.dungeons.is_empty() && path.with_extension("toml.bad").exists() && !path.exists());
    }
}
