//! The console's `record NAME [SECONDS]`: a spectator of that player, connected to this
//! server over the network like any other (`Client::watching` on loopback), records what
//! it receives into a replay in the data folder's `replays/`. It goes through the very
//! path a player's recording does, so `hailfire replay` plays and checks it the same way.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::{info, warn};

use crate::client::{Client, InputSample, Phase};
use crate::net::secure::ClientSecurity;
use crate::net::EnetTransport;
use crate::protocol::content::ClientContent;
use crate::sim::TICK_RATE;

/// Where `record` connects and writes: the dedicated server sets it up.
#[derive(Clone)]
pub struct RecordSetup {
    /// This server, as a client on this machine reaches it.
    pub addr: SocketAddr,
    pub password: Option<String>,
    /// The content players get (the recorder has it already: nothing is transferred).
    pub content: ClientContent,
    /// Where replays go (`<data folder>/replays`).
    pub dir: PathBuf,
    /// The recorder's key, made for this server process: the server knows it as its own
    /// (never refused by the allowlist, never remembered as a player's name).
    pub identity: crate::net::secure::Identity,
}

/// Longest recording one `record` makes, seconds (and the default).
pub const MAX_RECORD_S: u32 = 3600;
pub const DEFAULT_RECORD_S: u32 = 300;

/// The address a local client uses for a server bound to `bind` (the wildcard addresses
/// are reached on loopback).
pub fn local_addr_for(bind: SocketAddr) -> SocketAddr {
    match bind.ip() {
        std::net::IpAddr::V4(ip) if ip.is_unspecified() => SocketAddr::from(([127, 0, 0, 1], bind.port())),
        std::net::IpAddr::V6(ip) if ip.is_unspecified() => {
            SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, bind.port()))
        }
        _ => bind,
    }
}

/// Records `who` for `seconds` (or until `stop`, or until they leave) into `path`, on
/// this thread. Returns what happened, in words for the log.
pub fn record(setup: &RecordSetup, who: &str, seconds: u32, path: &std::path::Path, stop: &AtomicBool) -> String {
    let security = ClientSecurity {
        known: None,
        accept_new_key: true,
        accept_key: None,
        password: setup.password.clone(),
        pin_as: None,
        identity: Some(setup.identity.clone()),
        relay_code: None,
    };
    let net = match EnetTransport::connect_secure(setup.addr, security) {
        Ok(n) => n,
        Err(e) => return format!("record {who}: cannot open a socket: {e}"),
    };
    let mut c = Client::watching(net, "recorder", Some(setup.content.clone()), who);
    c.record();
    let start = Instant::now();
    let period = Duration::from_secs_f64(1.0 / TICK_RATE as f64);
    let mut next = start;
    while start.elapsed().as_secs_f64() < seconds as f64 && !stop.load(Ordering::Relaxed) {
        c.update(start.elapsed().as_secs_f64() * 1000.0, InputSample::default());
        c.events.clear();
        if matches!(c.phase, Phase::Failed(_) | Phase::Closed) {
            break;
        }
        next += period;
        let now = Instant::now();
        if next > now {
            std::thread::sleep(next - now);
        } else {
            next = now;
        }
    }
    let ended = match &c.phase {
        Phase::Failed(why) => format!(" (it ended: {why})"),
        _ => String::new(),
    };
    if c.is_joined() {
        c.disconnect();
    }
    let Some(r) = c.recording() else { return format!("record {who}: nothing recorded{ended}") };
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    match std::fs::write(path, r.encode()) {
        Ok(()) => format!("recorded {who} for {:.1} s into {}{ended}", r.seconds(), path.display()),
        Err(e) => format!("record {who}: cannot write {}: {e}", path.display()),
    }
}

/// Recordings running on their own threads, stopped (and written) together.
#[derive(Default)]
pub struct Recordings {
    stop: Arc<AtomicBool>,
    running: Vec<std::thread::JoinHandle<()>>,
}

impl Recordings {
    /// Starts recording `who` on a thread of its own.
    pub fn start(&mut self, setup: RecordSetup, who: String, seconds: u32, path: PathBuf) {
        let stop = self.stop.clone();
        let spawned = std::thread::Builder::new().name("recorder".into()).spawn(move || {
            let said = record(&setup, &who, seconds, &path, &stop);
            if said.starts_with("recorded") {
                info!("{said}");
            } else {
                warn!("{said}");
            }
        });
        match spawned {
            Ok(h) => self.running.push(h),
            Err(e) => warn!("record: cannot start a thread: {e}"),
        }
        self.running.retain(|h| !h.is_finished());
    }

    pub fn running(&self) -> usize {
        self.running.iter().filter(|h| !h.is_finished()).count()
    }

    /// Ends every recording now and waits for their files.
    pub fn finish(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for h in self.running.drain(..) {
            let _ = h.join();
        }
    }
}

/// A file name for a recording of `who` (only `a-z 0-9 _ -` of the name kept).
pub fn file_name(who: &str) -> String {
    file_name_in(None, who)
}

/// [`file_name`], numbered (`-2`, `-3` ...) when `dir` already has a file of that name.
pub fn file_name_in(dir: Option<&std::path::Path>, who: &str) -> String {
    let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let clean: String = who
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c.to_ascii_lowercase() } else { '_' })
        .take(24)
        .collect();
    // Names this process handed out: a recording is written only when it ends, so two
    // started in the same second must not be given the same name.
    static GIVEN: std::sync::Mutex<std::collections::BTreeSet<String>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    let mut name = format!("{clean}-{stamp}.hfr");
    let mut k = 2;
    while (given.contains(&name) || dir.is_some_and(|d| d.join(&name).exists())) && k < 1000 {
        name = format!("{clean}-{stamp}-{k}.hfr");
        k += 1;
    }
    given.insert(name.clone());
    name
}

#[cfg(test)]
mod tests {
    #[test]
    fn two_recordings_started_together_get_two_names() {
        let a = super::file_name_in(None, "Ann");
        let b = super::file_name_in(None, "Ann");
        assert_ne!(a, b);
        assert!(a.starts_with("ann-") && a.ends_with(".hfr"), "{a}");
    }
}
