//! The local admin channel: the dedicated server listens on a Unix socket in its data
//! folder (`console.sock`, owner-only), and `hailfire console` attaches to it. Anyone who
//! can open the socket is the server's operator, so the socket file is made readable and
//! writable by its owner alone; no password crosses it.
//!
//! The exchange is lines of text: the console sends one command per line; the server
//! answers with the command's lines, then an end line: [`END`] followed by `ok` or
//! `error` (whether the command did what it was asked). Lines from the server never start
//! with [`END`]'s character.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::time::Duration;

/// Starts the end line of an answer (an ASCII record separator: never in a reply).
pub const END: char = '\u{1e}';
/// Longest command line a console may send, bytes.
pub const MAX_LINE: usize = 4096;
/// Consoles attached at once.
pub const MAX_CONSOLES: usize = 8;

/// A command from a console, and where its answer goes.
pub struct Request {
    pub line: String,
    pub reply: Sender<(bool, Vec<String>)>,
}

/// The socket's default place: `<data folder>/console.sock`.
pub fn default_path() -> Option<PathBuf> {
    crate::crash::data_dir().map(|d| d.join("console.sock"))
}

/// Listens on `path` (owner-only). A socket left by a server that is gone is replaced;
/// one that answers belongs to a running server, and this one does not take it.
pub fn listen(path: &Path) -> Result<Receiver<Request>, String> {
    if UnixStream::connect(path).is_ok() {
        return Err(format!("{} is in use: another server runs with this data folder", path.display()));
    }
    let _ = std::fs::remove_file(path);
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let listener = UnixListener::bind(path).map_err(|e| format!("cannot listen on {}: {e}", path.display()))?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| format!("cannot make {} owner-only: {e}", path.display()))?;
    let (tx, rx) = channel();
    let live = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    std::thread::Builder::new()
        .name("admin socket".into())
        .spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { continue };
                if live.load(std::sync::atomic::Ordering::Relaxed) >= MAX_CONSOLES {
                    let mut c = conn;
                    let _ = writeln!(c, "too many consoles are attached ({MAX_CONSOLES})\n{END}error");
                    continue;
                }
                let (tx, live) = (tx.clone(), live.clone());
                live.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let _ = std::thread::Builder::new().name("console".into()).spawn(move || {
                    serve(conn, &tx);
                    live.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
                });
            }
        })
        .map_err(|e| format!("cannot start the admin socket: {e}"))?;
    Ok(rx)
}

/// One console: its lines to the server's loop, the answers back.
fn serve(conn: UnixStream, tx: &Sender<Request>) {
    let Ok(mut out) = conn.try_clone() else { return };
    let mut reader = BufReader::new(conn);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        // A line of at most MAX_LINE bytes; a longer one ends the console.
        match (&mut reader).take(MAX_LINE as u64 + 1).read_until(b'\n', &mut buf) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if buf.len() > MAX_LINE {
            let _ = write!(out, "the command is longer than {MAX_LINE} bytes\n{END}error\n");
            return;
        }
        let line = String::from_utf8_lossy(&buf).trim().to_string();
        let (reply, answers) = channel();
        if tx.send(Request { line, reply }).is_err() {
            return;
        }
        // The server answers at its next tick; a stopping server may not.
        let answer =
            answers.recv_timeout(Duration::from_secs(10)).unwrap_or((false, vec!["the server did not answer".into()]));
        let mut text = String::new();
        for l in &answer.1 {
            text.push_str(l.trim_start_matches(END));
            text.push('\n');
        }
        text.push(END);
        text.push_str(if answer.0 { "ok\n" } else { "error\n" });
        if out.write_all(text.as_bytes()).is_err() {
            return;
        }
    }
}

/// Sends one command and reads its answer: (did it, the lines).
pub fn ask(
    conn: &mut UnixStream,
    reader: &mut BufReader<UnixStream>,
    line: &str,
) -> std::io::Result<(bool, Vec<String>)> {
    writeln!(conn, "{}", line.replace(['\n', '\r'], " "))?;
    let mut lines = Vec::new();
    loop {
        let mut l = String::new();
        if reader.read_line(&mut l)? == 0 {
            return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "the server closed the console"));
        }
        let l = l.trim_end_matches(['\n', '\r']);
        if let Some(end) = l.strip_prefix(END) {
            return Ok((end == "ok", lines));
        }
        lines.push(l.to_string());
    }
}

/// `hailfire console`: attach to the server whose socket is at `path`. With `run`, send
/// that one command and exit 0 if it did what it was asked, 1 if not, 2 when no server
/// answers; without, read commands from standard input (a prompt when it is a terminal;
/// Up and Down recall earlier commands).
pub fn console(path: &Path, run: Option<&str>) -> u8 {
    let mut conn = match UnixStream::connect(path) {
        Ok(c) => c,
        Err(e) => {
            eprintln!(
                "hailfire console: no server answers at {} ({e}). Is it running with this data folder? (--socket PATH, or $HAILFIRE_DATA_DIR as the server has it)",
                path.display()
            );
            return 2;
        }
    };
    let Ok(read_half) = conn.try_clone() else { return 2 };
    let mut reader = BufReader::new(read_half);
    if let Some(cmd) = run {
        return match ask(&mut conn, &mut reader, cmd) {
            Ok((ok, lines)) => {
                lines.iter().for_each(|l| println!("{l}"));
                if ok {
                    0
                } else {
                    1
                }
            }
            Err(e) => {
                eprintln!("hailfire console: {e}");
                2
            }
        };
    }
    let mut editor = match rustyline::DefaultEditor::new() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("hailfire console: {e}");
            return 2;
        }
    };
    println!("attached to {} (help for the commands, Ctrl+D to leave)", path.display());
    loop {
        let line = match editor.readline("hailfire> ") {
            Ok(l) => l,
            Err(rustyline::error::ReadlineError::Interrupted) => continue,
            Err(_) => return 0,
        };
        if line.trim().is_empty() {
            continue;
        }
        let _ = editor.add_history_entry(line.as_str());
        match ask(&mut conn, &mut reader, &line) {
            Ok((_, lines)) => lines.iter().for_each(|l| println!("{l}")),
            Err(e) => {
                eprintln!("hailfire console: {e}");
                return 2;
            }
        }
    }
}
