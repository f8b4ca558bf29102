//! Logging: `tracing` to stdout (filtered by `RUST_LOG`, default info) and, for servers, to
//! a log file in the data directory as well.

use std::fs::{self, File};
use std::path::PathBuf;
use std::sync::Mutex;

use tracing_subscriber::fmt::writer::MakeWriterExt;
use tracing_subscriber::EnvFilter;

/// A log file is rotated when it passes this size (`x.log` -> `x.log.1` -> ... -> `.3`).
pub const MAX_LOG_BYTES: u64 = 16 << 20;
/// Rotated files kept beside the current one.
pub const KEPT_LOGS: u32 = 3;

/// A log file that rotates itself when it grows past `MAX_LOG_BYTES` (at start and while
/// running), so a server's logs stay bounded whatever its uptime.
pub struct RotatingFile {
    path: PathBuf,
    file: Option<File>,
    size: u64,
    limit: u64,
}

impl RotatingFile {
    pub fn open(path: PathBuf, limit: u64) -> std::io::Result<RotatingFile> {
        let mut r = RotatingFile { path, file: None, size: 0, limit };
        r.reopen()?;
        if r.size >= limit {
            r.rotate()?;
        }
        Ok(r)
    }

    fn reopen(&mut self) -> std::io::Result<()> {
        let f = File::options().create(true).append(true).open(&self.path)?;
        self.size = f.metadata().map(|m| m.len()).unwrap_or(0);
        self.file = Some(f);
        Ok(())
    }

    fn rotated(&self, k: u32) -> PathBuf {
        let mut s = self.path.clone().into_os_string();
        s.push(format!(".{k}"));
        PathBuf::from(s)
    }

    fn rotate(&mut self) -> std::io::Result<()> {
        self.file = None;
        let _ = fs::remove_file(self.rotated(KEPT_LOGS));
        for k in (1..KEPT_LOGS).rev() {
            let _ = fs::rename(self.rotated(k), self.rotated(k + 1));
        }
        fs::rename(&self.path, self.rotated(1))?;
        self.reopen()
    }
}

impl std::io::Write for RotatingFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.size + buf.len() as u64 > self.limit && self.size > 0 {
            self.rotate()?;
        }
        let n = match &mut self.file {
            Some(f) => f.write(buf)?,
            None => buf.len(),
        };
        self.size += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        match &mut self.file {
            Some(f) => f.flush(),
            None => Ok(()),
        }
    }
}

/// `<data dir>/logs` (`$HAILFIRE_DATA_DIR` moves the data directory).
pub fn log_dir() -> Option<PathBuf> {
    crate::crash::data_dir().map(|d| d.join("logs"))
}

/// Starts logging. With `file`, also appends to `<data dir>/logs/<file>.log` and prints
/// where (`HAILFIRE_LOG_FILE` overrides the path).
pub fn init(file: Option<&str>) {
    // The media decoders' own notes ("selected vorbis mapper ...") are not the game's,
    // whatever level the operator asked for.
    let mut filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    for quiet in [
        "symphonia_core=warn",
        "symphonia_format_ogg=warn",
        "symphonia_codec_vorbis=warn",
        "symphonia_format_riff=warn",
        "symphonia_codec_pcm=warn",
    ] {
        if let Ok(d) = quiet.parse() {
            filter = filter.add_directive(d);
        }
    }
    let path = file.and_then(|f| match std::env::var("HAILFIRE_LOG_FILE") {
        Ok(p) => Some(PathBuf::from(p)),
        Err(_) => log_dir().map(|d| d.join(format!("{f}.log"))),
    });
    let opened = path.as_ref().and_then(|p| {
        if let Some(dir) = p.parent() {
            let _ = fs::create_dir_all(dir);
        }
        match RotatingFile::open(p.clone(), MAX_LOG_BYTES) {
            Ok(f) => Some(f),
            Err(e) => {
                // Said where the operator looks first; the log goes to standard error.
                eprintln!("hailfire: cannot open the log file {}: {e}; logging to standard error only", p.display());
                None
            }
        }
    });
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_target(false);
    match opened {
        Some(f) => {
            let writer = std::io::stdout.and(Mutex::new(f));
            let _ = builder.with_writer(writer).with_ansi(false).try_init();
            if let Some(p) = &path {
                crate::crash::set_log_file(p.clone());
                tracing::info!(path = %p.display(), "logging to file");
            }
        }
        None => {
            // Colour only for a person at a terminal, never into a pipe or a journal.
            use std::io::IsTerminal;
            let _ = builder.with_writer(std::io::stderr).with_ansi(std::io::stderr().is_terminal()).try_init();
        }
    }
    crate::crash::test_crash_if_asked();
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_log_file_rotates_when_full_and_keeps_three() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("server.log");
        let mut f = RotatingFile::open(p.clone(), 100).unwrap();
        for k in 0..50 {
            writeln!(f, "line {k:03} of the log").unwrap();
        }
        let size = |p: &std::path::Path| fs::metadata(p).map(|m| m.len()).unwrap_or(0);
        assert!(size(&p) <= 100, "the current file stays under the limit ({})", size(&p));
        for k in 1..=KEPT_LOGS {
            assert!(size(&f.rotated(k)) > 0, "kept {k}");
        }
        assert!(!f.rotated(KEPT_LOGS + 1).exists(), "no more than {KEPT_LOGS} kept");
        assert!(fs::read_to_string(&p).unwrap().contains("line 049"), "the newest lines are in the current file");
        // A restart with a full file starts a fresh one.
        drop(f);
        fs::write(&p, "x".repeat(150)).unwrap();
        let _f = RotatingFile::open(p.clone(), 100).unwrap();
        assert_eq!(size(&p), 0);
    }
}
