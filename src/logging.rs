//! Logging: `tracing` to stdout (filtered by `RUST_LOG`, default info) and, for servers, to
//! a log file in the data directory as well.

use std::fs::{self, File};
use std::path::PathBuf;
use std::sync::Mutex;

use tracing_subscriber::fmt::writer::MakeWriterExt;
use tracing_subscriber::EnvFilter;

/// `<data dir>/logs`.
pub fn log_dir() -> Option<PathBuf> {
    directories::ProjectDirs::from("", "", "Hailfire").map(|d| d.data_dir().join("logs"))
}

/// Starts logging. With `file`, also appends to `<data dir>/logs/<file>.log` and prints
/// where (`HAILFIRE_LOG_FILE` overrides the path).
pub fn init(file: Option<&str>) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let path = file.and_then(|f| match std::env::var("HAILFIRE_LOG_FILE") {
        Ok(p) => Some(PathBuf::from(p)),
        Err(_) => log_dir().map(|d| d.join(format!("{f}.log"))),
    });
    let opened = path.as_ref().and_then(|p| {
        if let Some(dir) = p.parent() {
            let _ = fs::create_dir_all(dir);
        }
        File::options().create(true).append(true).open(p).ok()
    });
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_target(false);
    match opened {
        Some(f) => {
            let writer = std::io::stdout.and(Mutex::new(f));
            let _ = builder.with_writer(writer).with_ansi(false).try_init();
            if let Some(p) = &path {
                tracing::info!(path = %p.display(), "logging to file");
            }
        }
        None => {
            let _ = builder.with_writer(std::io::stderr).try_init();
        }
    }
}
