//! What happens when things go wrong where nobody is watching a terminal (a game started
//! from a desktop entry or a Start-menu shortcut):
//! - a panic writes a crash report (version, build, OS, GPU adapter, the panic and its
//!   backtrace, the last lines of the log) to `<data dir>/crashes/` and says where it is:
//!   on stderr, in the log, and in a native dialog when the game has a display;
//! - `fatal` does the same for an error that stops the game (no GPU, say), without a
//!   report file.
//!
//! `HAILFIRE_CRASH_TEST=1` makes the program panic on purpose once logging has started,
//! so that the report can be tested in a child process.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

/// Whether errors are also shown in a dialog (the desktop game: yes; servers, bots and
/// tools: no, they have a terminal or a log).
static DIALOGS: AtomicBool = AtomicBool::new(false);
/// The GPU adapter in use, once the renderer has picked one.
static ADAPTER: OnceLock<String> = OnceLock::new();
/// The log file in use, whose last lines go into a report.
static LOG_FILE: Mutex<Option<PathBuf>> = Mutex::new(None);

/// The version line: `hailfire 0.1.0 (protocol 6, build 1a2b3c4d5e6f)`.
pub fn version_line() -> String {
    let git = env!("HAILFIRE_GIT");
    format!(
        "hailfire {} (protocol {}, build {}, {} {})",
        env!("CARGO_PKG_VERSION"),
        crate::protocol::PROTOCOL_VERSION,
        if git.is_empty() { "not from git" } else { git },
        std::env::consts::OS,
        std::env::consts::ARCH
    )
}

/// `$HAILFIRE_DATA_DIR`, else the OS data directory.
pub fn data_dir() -> Option<PathBuf> {
    if let Ok(d) = std::env::var("HAILFIRE_DATA_DIR") {
        return Some(PathBuf::from(d));
    }
    directories::ProjectDirs::from("", "", "Hailfire").map(|d| d.data_dir().to_path_buf())
}

pub fn set_adapter(name: String) {
    let _ = ADAPTER.set(name);
}

pub fn set_log_file(path: PathBuf) {
    if let Ok(mut l) = LOG_FILE.lock() {
        *l = Some(path);
    }
}

/// Shows errors in dialogs from now on (the desktop game).
pub fn enable_dialogs() {
    DIALOGS.store(true, Ordering::Relaxed);
}

fn os_name() -> String {
    let pretty = std::fs::read_to_string("/etc/os-release")
        .ok()
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix("PRETTY_NAME=").map(|v| v.trim_matches('"').to_string())));
    format!("{} {} {}", pretty.unwrap_or_default(), std::env::consts::OS, std::env::consts::ARCH).trim().to_string()
}

fn last_log_lines(n: usize) -> String {
    let Some(path) = LOG_FILE.lock().ok().and_then(|l| l.clone()) else {
        return "(no log file)".into();
    };
    match std::fs::read(&path) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes[bytes.len().saturating_sub(64 * 1024)..]).to_string();
            let lines: Vec<&str> = text.lines().collect();
            format!("({})\n{}", path.display(), lines[lines.len().saturating_sub(n)..].join("\n"))
        }
        Err(e) => format!("({}: {e})", path.display()),
    }
}

/// The text of a crash report.
pub fn report(what: &str, backtrace: &std::backtrace::Backtrace) -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    format!(
        "Hailfire crash report\n\
         version: {}\n\
         time: {secs} (Unix seconds)\n\
         OS: {}\n\
         GPU adapter: {}\n\
         thread: {}\n\
         \n\
         {what}\n\
         \n\
         backtrace:\n{backtrace}\n\
         \n\
         last log lines {}\n",
        version_line(),
        os_name(),
        ADAPTER.get().map_or("(none chosen)", |s| s.as_str()),
        std::thread::current().name().unwrap_or("(unnamed)"),
        last_log_lines(40)
    )
}

thread_local! {
    /// Inside [`contained`]: a panic is a failure to report, not a crash.
    static CONTAINED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f`, turning a panic inside it into `None` (logged as a warning, no crash report):
/// for third-party decoders fed untrusted bytes (mods' media), whose panic must cost the
/// file, never the game.
pub fn contained<R>(f: impl FnOnce() -> R + std::panic::UnwindSafe) -> Option<R> {
    let was = CONTAINED.with(|c| c.replace(true));
    let r = std::panic::catch_unwind(f);
    CONTAINED.with(|c| c.set(was));
    r.ok()
}

/// Installs the panic hook that writes crash reports.
pub fn install() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if CONTAINED.with(|c| c.get()) {
            tracing::warn!("a decoder failed on a file and was stopped: {info}");
            return;
        }
        previous(info);
        let bt = std::backtrace::Backtrace::force_capture();
        let text = report(&format!("panic: {info}"), &bt);
        let written = data_dir().and_then(|d| {
            let dir = d.join("crashes");
            std::fs::create_dir_all(&dir).ok()?;
            let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
            let path = dir.join(format!("crash-{secs}-{}.txt", std::process::id()));
            std::fs::write(&path, &text).ok()?;
            Some(path)
        });
        let msg = match &written {
            Some(p) => format!(
                "Hailfire crashed. A crash report was written to\n{}\nPlease attach it when you report the problem.",
                p.display()
            ),
            None => "Hailfire crashed, and the crash report could not be written (no data folder).".to_string(),
        };
        eprintln!("{msg}");
        tracing::error!(report = ?written, "crashed: {info}");
        if DIALOGS.load(Ordering::Relaxed) {
            dialog("Hailfire crashed", &msg);
        }
    }));
}

/// `HAILFIRE_CRASH_TEST=1`: panics on purpose (called once logging has started, so the
/// report holds log lines too).
pub fn test_crash_if_asked() {
    if std::env::var_os("HAILFIRE_CRASH_TEST").is_some() {
        panic!("HAILFIRE_CRASH_TEST is set: crashing on purpose to test the crash report");
    }
}

/// An error that stops the program: on stderr, in the log and, for the desktop game, in
/// a dialog.
pub fn fatal(msg: &str) {
    eprintln!("hailfire: {msg}");
    tracing::error!("{msg}");
    if DIALOGS.load(Ordering::Relaxed) {
        dialog("Hailfire could not start", msg);
    }
}

/// A native message box: MessageBox on Windows, an AppleScript alert on macOS, and on
/// Linux the first of zenity, kdialog and xmessage that is installed.
pub fn dialog(title: &str, text: &str) {
    #[cfg(windows)]
    {
        #[link(name = "user32")]
        extern "system" {
            fn MessageBoxW(hwnd: *mut core::ffi::c_void, text: *const u16, caption: *const u16, flags: u32) -> i32;
        }
        let w = |s: &str| s.encode_utf16().chain(std::iter::once(0)).collect::<Vec<u16>>();
        let (t, c) = (w(text), w(title));
        // SAFETY: two NUL-terminated UTF-16 strings that outlive the call; no owner window.
        unsafe {
            MessageBoxW(std::ptr::null_mut(), t.as_ptr(), c.as_ptr(), 0x10);
        }
    }
    #[cfg(target_os = "macos")]
    {
        let script =
            format!("display alert {:?} message {:?} as critical", title.replace('"', "'"), text.replace('"', "'"));
        let _ = std::process::Command::new("osascript").args(["-e", &script]).status();
    }
    #[cfg(all(unix, not(target_os = "macos")))]
    {
        use std::process::{Command, Stdio};
        if std::env::var_os("DISPLAY").is_none() && std::env::var_os("WAYLAND_DISPLAY").is_none() {
            return;
        }
        let tries: [(&str, Vec<String>); 3] = [
            ("zenity", vec!["--error".into(), format!("--title={title}"), format!("--text={text}")]),
            ("kdialog", vec!["--title".into(), title.into(), "--error".into(), text.into()]),
            ("xmessage", vec!["-center".into(), format!("{title}\n\n{text}")]),
        ];
        for (prog, args) in tries {
            let ran = Command::new(prog)
                .args(&args)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
            if ran.is_ok() {
                return;
            }
        }
    }
}
