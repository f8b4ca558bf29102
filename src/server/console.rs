//! The operator's side of a running server: the console on standard input (a terminal or a
//! pipe), the same commands from admins in the game, tick-cost accounting, the periodic
//! status line and the "falling behind" warning.
//!
//! Commands: `help`, `status`, `players`, `kick NAME|ID [reason]`, `ban NAME|ID|KEY|ADDRESS
//! [reason]`, `unban NAME|KEY|ADDRESS`, `bans`, `allow`/`disallow`/`allowlist`,
//! `op`/`deop`/`ops`, `say TEXT`, `reload`, `record`, `stop`, `restart`. A name with
//! spaces is written in double quotes.

use std::collections::VecDeque;
use std::sync::mpsc::{Receiver, TryRecvError};
use std::time::{Duration, Instant};

use tracing::{info, warn};

use super::dedicated::ModReloader;
use super::Server;
use crate::net::{PeerId, Transport};
use crate::sim::TICK_RATE;

/// One console command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    Help,
    Status,
    Players,
    Kick {
        who: String,
        reason: String,
    },
    Ban {
        who: String,
        reason: String,
    },
    Unban {
        who: String,
    },
    Bans,
    /// Allowlist and operators: by a connected player's name or id, or a key in full
    /// (`disallow` and `deop` also by name or short fingerprint).
    Allow {
        who: String,
    },
    Disallow {
        who: String,
    },
    Allowlist,
    Op {
        who: String,
    },
    Deop {
        who: String,
    },
    Ops,
    Say {
        text: String,
    },
    Reload,
    /// Stop, telling players why (None: just "the server is shutting down"), now or after
    /// `after` seconds of warnings; `restart` asks the service manager to start it again.
    Stop {
        message: Option<String>,
        after: Option<u32>,
        restart: bool,
    },
    /// Calls off a stop or restart that is counting down.
    StopCancel,
    /// Records a player's view into a replay for `seconds`.
    Record {
        who: String,
        seconds: u32,
    },
}

/// The longest countdown `stop`/`restart` take, in seconds.
pub const MAX_COUNTDOWN_S: u32 = 3600;
/// When a countdown warns the players (seconds left), besides when it starts.
pub const COUNTDOWN_MARKS: [u32; 4] = [60, 30, 10, 5];
/// The exit status of a `restart`: the systemd unit restarts the server on it.
pub const RESTART_EXIT_CODE: u8 = 75;

pub const HELP: &str = "\
commands:
  status                        players, instances, tick cost, uptime, traffic
  players                       who is connected: id, name, address, ping, loss, where
  kick NAME|ID [reason]         disconnect a player; they see the reason
  ban NAME|ID|KEY|ADDRESS [reason]
                                keep a player (their key, name and address), a key
                                or an address out
  unban NAME|KEY|ADDRESS        lift a ban (KEY: in full, or the [ab12:cd34] shown)
  bans                          the ban list
  allow NAME|ID|KEY             put a player's key on the allowlist (in force with
                                allowlist = true in server.toml)
  disallow NAME|KEY             take a player off it (they are disconnected)
  allowlist                     who is on it
  op NAME|ID|KEY                make a player an operator: their admin commands need
                                no admin password
  deop NAME|KEY                 take that away
  ops                           the operators
  say TEXT                      a message every player reads
  reload                        reload the mods (fights that start after use them)
  stop [SECONDS] [message]      disconnect everyone (they read \"the server is shutting
                                down: message\", e.g. \"restarting, back soon\") and stop;
                                with SECONDS, warn them at 60, 30, 10 and 5 s first
  restart [SECONDS] [message]   the same, then exit with status 75: the systemd unit
                                starts the server again
  stop cancel                   call off a countdown
  record NAME [SECONDS]         record what NAME sees (default 300 s, 5m works) into a
                                replay in the data folder's replays/ (hailfire replay FILE)
(a name with spaces goes in double quotes: kick \"Big Bob\" spamming)";

/// Splits off the first word (or a double-quoted phrase).
fn first_word(s: &str) -> (String, &str) {
    let s = s.trim_start();
    if let Some(rest) = s.strip_prefix('"') {
        if let Some(end) = rest.find('"') {
            return (rest[..end].to_string(), rest[end + 1..].trim_start());
        }
    }
    match s.find(char::is_whitespace) {
        Some(i) => (s[..i].to_string(), s[i..].trim_start()),
        None => (s.to_string(), ""),
    }
}

impl Command {
    /// Reads one line; `Ok(None)` for a blank line. Errors say what is wrong and how to
    /// write it.
    pub fn parse(line: &str) -> Result<Option<Command>, String> {
        let (word, rest) = first_word(line.trim());
        let need = |what: &str, usage: &str| -> Result<String, String> {
            let (w, _) = first_word(rest);
            if w.is_empty() {
                Err(format!("{what} needs {usage}"))
            } else {
                Ok(w)
            }
        };
        let after_first = || first_word(rest).1.trim().to_string();
        Ok(Some(match word.to_ascii_lowercase().as_str() {
            "" => return Ok(None),
            "help" | "?" => Command::Help,
            "status" => Command::Status,
            "players" | "list" => Command::Players,
            "kick" => {
                Command::Kick { who: need("kick", "a player's name or id: kick NAME [reason]")?, reason: after_first() }
            }
            "ban" => Command::Ban {
                who: need("ban", "a player's name or id, or an address: ban NAME [reason]")?,
                reason: after_first(),
            },
            "unban" => Command::Unban { who: need("unban", "a name or an address: unban NAME")? },
            "bans" => Command::Bans,
            "allow" => Command::Allow { who: need("allow", "a player's name or id, or a key: allow NAME")? },
            "disallow" => {
                Command::Disallow { who: need("disallow", "a name or a key on the allowlist: disallow NAME")? }
            }
            "allowlist" => Command::Allowlist,
            "op" => Command::Op { who: need("op", "a player's name or id, or a key: op NAME")? },
            "deop" => Command::Deop { who: need("deop", "an operator's name or key: deop NAME")? },
            "ops" => Command::Ops,
            "say" if rest.trim().is_empty() => return Err("say needs the text to send: say TEXT".into()),
            "say" => Command::Say { text: rest.trim().to_string() },
            "reload" => Command::Reload,
            "record" => {
                let who = need("record", "a player's name: record NAME [SECONDS]")?;
                let (secs, _) = first_word(first_word(rest).1);
                let seconds = if secs.is_empty() {
                    super::recorder::DEFAULT_RECORD_S
                } else {
                    countdown_seconds(&secs).filter(|s| *s >= 1).ok_or_else(|| {
                        format!("record: '{secs}' is not a length: write seconds or minutes, like 60, 90s or 5m (at most 60m)")
                    })?
                };
                Command::Record { who, seconds: seconds.min(super::recorder::MAX_RECORD_S) }
            }
            "stop" | "quit" | "exit" | "restart" if first_word(rest).0.eq_ignore_ascii_case("cancel") => {
                Command::StopCancel
            }
            "stop" | "quit" | "exit" | "restart" => {
                // An optional countdown first: anything that starts like a number must be
                // one (a typo must never stop the server at once).
                let (first, after_first) = first_word(rest);
                let numeric = first.starts_with(|c: char| c.is_ascii_digit() || c == '-' || c == '+' || c == '.');
                let (after, message) = if numeric {
                    let n = countdown_seconds(&first).ok_or_else(|| {
                        format!("{word}: '{first}' is not a countdown: write seconds or minutes, like 60, 90s or 5m (at most 60m)")
                    })?;
                    let (unit, _) = first_word(after_first);
                    if ["s", "sec", "secs", "second", "seconds", "m", "min", "mins", "minute", "minutes"]
                        .contains(&unit.to_ascii_lowercase().as_str())
                    {
                        return Err(format!("{word}: write the unit with the number, like {n}s or {n}m"));
                    }
                    (Some(n).filter(|n| *n > 0), after_first)
                } else {
                    (None, rest)
                };
                Command::Stop {
                    message: Some(message.trim().to_string()).filter(|m| !m.is_empty()),
                    after,
                    restart: word.eq_ignore_ascii_case("restart"),
                }
            }
            other => return Err(format!("unknown command '{other}' (type `help`)")),
        }))
    }
}

/// Tick costs over the last minute, and what the periodic status line reports.
pub struct Ops {
    pub started: Instant,
    /// Cost of each of the last minute's ticks, in microseconds.
    costs: VecDeque<u32>,
    /// How often the status line is logged (None: never).
    pub status_every: Option<Duration>,
    last_status: Instant,
    /// Wire totals (sent, received) at the last status line.
    last_traffic: (u64, u64),
    last_behind_warning: Option<Instant>,
    /// Drops already reported in the log.
    drops_logged: u64,
    /// Lines typed on standard input, from a reader thread.
    stdin: Option<Receiver<String>>,
    /// Set by `stop` (and `restart`), at once or when its countdown ends.
    pub stop_requested: bool,
    /// Set by `restart`: the server should exit with `RESTART_EXIT_CODE`.
    pub restart_requested: bool,
    /// A `stop`/`restart` counting down: when it ends, its message, whether it restarts,
    /// and the warnings still to give.
    countdown: Option<(Instant, Option<String>, bool, Vec<u32>)>,
    /// Prometheus metrics (`metrics_bind`), when served.
    metrics: Option<super::metrics::Metrics>,
    /// What status queries are answered with: kept current here.
    board: Option<crate::net::secure::StatusBoard>,
    /// Announces the server on the local network (`lan_announce`).
    announcer: Option<crate::net::announce::Announcer>,
    ticks: u64,
    /// Where `record` connects and writes (the dedicated server only), and the
    /// recordings running.
    record_setup: Option<super::recorder::RecordSetup>,
    pub recordings: super::recorder::Recordings,
    /// Commands from consoles attached to the admin socket (`hailfire console`).
    #[cfg(unix)]
    socket: Option<Receiver<super::admin_socket::Request>>,
}

/// Ticks kept for the tick-cost figures: one minute.
const COST_WINDOW: usize = 60 * TICK_RATE as usize;

impl Ops {
    pub fn new(status_every: Option<Duration>) -> Ops {
        let now = Instant::now();
        Ops {
            started: now,
            costs: VecDeque::with_capacity(COST_WINDOW),
            status_every,
            last_status: now,
            last_traffic: (0, 0),
            last_behind_warning: None,
            drops_logged: 0,
            stdin: None,
            stop_requested: false,
            restart_requested: false,
            record_setup: None,
            recordings: Default::default(),
            #[cfg(unix)]
            socket: None,
            countdown: None,
            metrics: None,
            board: None,
            announcer: None,
            ticks: 0,
        }
    }

    /// Reads commands from standard input (a terminal or a pipe) on a thread of its own.
    /// When standard input ends (closed pipe, /dev/null under systemd), the console just
    /// stops listening; the server keeps running.
    pub fn with_stdin(mut self) -> Ops {
        // A server started in the background of a terminal (`hailfire --dedicated &`)
        // would be stopped by SIGTTIN when it reads: ignored, the read fails instead and
        // the console goes quiet.
        #[cfg(unix)]
        // SAFETY: setting a signal's disposition to "ignore" has no handler to be unsafe.
        unsafe {
            libc::signal(libc::SIGTTIN, libc::SIG_IGN);
        }
        let (tx, rx) = std::sync::mpsc::channel();
        let spawned = std::thread::Builder::new().name("hailfire-console".into()).spawn(move || {
            use std::io::BufRead;
            let mut input = std::io::stdin().lock();
            let mut buf = Vec::new();
            loop {
                buf.clear();
                // Bytes, not text: a line that is not UTF-8 is read as well as it can be
                // instead of ending the console.
                match input.read_until(b'\n', &mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        let line = String::from_utf8_lossy(&buf).trim_end_matches(['\r', '\n']).to_string();
                        if tx.send(line).is_err() {
                            break;
                        }
                    }
                }
            }
        });
        if spawned.is_ok() {
            self.stdin = Some(rx);
        }
        self
    }

    /// Keeps `board` (what LAN and status queries are answered with) current.
    pub fn with_board(mut self, board: crate::net::secure::StatusBoard) -> Ops {
        self.board = Some(board);
        self
    }

    /// Announces the server on the local network once a second (see `net::announce`).
    pub fn with_announcer(mut self, a: Option<crate::net::announce::Announcer>) -> Ops {
        self.announcer = a;
        self
    }

    /// Takes commands from consoles attached to the admin socket at `path`.
    #[cfg(unix)]
    pub fn listen_socket(&mut self, path: &std::path::Path) -> Result<(), String> {
        self.socket = Some(super::admin_socket::listen(path)?);
        Ok(())
    }

    /// Lets `record` record players (the dedicated server).
    pub fn with_recording(mut self, setup: super::recorder::RecordSetup) -> Ops {
        self.record_setup = Some(setup);
        self
    }

    /// Keeps the Prometheus metrics current.
    pub fn with_metrics(mut self, m: super::metrics::Metrics) -> Ops {
        self.metrics = Some(m);
        self
    }

    /// Takes commands from `rx` instead (the host's in-game menu in host-and-play).
    pub fn with_commands(mut self, rx: Receiver<String>) -> Ops {
        self.stdin = Some(rx);
        self
    }

    /// Mean and largest tick cost over the last minute, in milliseconds.
    pub fn tick_cost_ms(&self) -> (f64, f64) {
        if self.costs.is_empty() {
            return (0.0, 0.0);
        }
        let sum: u64 = self.costs.iter().map(|&c| c as u64).sum();
        let max = self.costs.iter().copied().max().unwrap_or(0);
        (sum as f64 / self.costs.len() as f64 / 1000.0, max as f64 / 1000.0)
    }

    /// Called after every tick with what it cost: runs the commands typed or sent by
    /// admins, logs the status line when due and warns when a tick overran its budget.
    pub fn after_tick<T: Transport>(
        &mut self,
        server: &mut Server<T>,
        cost: Duration,
        mut reload: Option<&mut ModReloader>,
    ) {
        if let Some(a) = self.announcer.as_mut() {
            a.tick();
        }
        if self.costs.len() == COST_WINDOW {
            self.costs.pop_front();
        }
        self.ticks += 1;
        if let (Some(board), 0) = (&self.board, self.ticks % 30) {
            if let Ok(mut b) = board.lock() {
                b.players = server.connected_players().min(u16::MAX as usize) as u16;
                b.joining = server.joining().min(u16::MAX as usize) as u16;
            }
        }
        // What the network layer dropped, at most once a minute and only when it grew.
        if self.ticks.is_multiple_of(TICK_RATE as u64 * 60) {
            if let Some(sec) = server.net.security() {
                let line = sec.drops();
                if sec.dropped + sec.replayed + sec.evicted + sec.idle_dropped + sec.kernel_dropped > self.drops_logged
                {
                    self.drops_logged =
                        sec.dropped + sec.replayed + sec.evicted + sec.idle_dropped + sec.kernel_dropped;
                    warn!(sessions = sec.sessions, handshakes = sec.half_open, "dropped so far: {line}");
                }
            }
        }
        self.costs.push_back(cost.as_micros().min(u32::MAX as u128) as u32);
        self.count_down(server);
        if let Some(m) = &self.metrics {
            m.tick(cost);
            if self.ticks.is_multiple_of(TICK_RATE as u64) {
                m.update(server);
            }
        }
        let budget = Duration::from_secs_f64(1.0 / TICK_RATE as f64);
        if cost > budget && self.last_behind_warning.is_none_or(|t| t.elapsed() > Duration::from_secs(10)) {
            self.last_behind_warning = Some(Instant::now());
            match server.world.instances.values().max_by_key(|i| i.step_us) {
                Some(i) => warn!(
                    tick_ms = format!("{:.1}", cost.as_secs_f64() * 1000.0),
                    instance = i.id,
                    dungeon = i.dungeon().unwrap_or("hub"),
                    bullets = i.bullets.len(),
                    instance_ms = format!("{:.1}", i.step_us as f64 / 1000.0),
                    "a tick took longer than its 16.7 ms: the server is falling behind"
                ),
                None => warn!(tick_ms = cost.as_secs_f64() * 1000.0, "a tick took longer than its 16.7 ms"),
            }
        }
        let mut lines: Vec<(Option<PeerId>, String)> = Vec::new();
        if let Some(rx) = &self.stdin {
            loop {
                match rx.try_recv() {
                    Ok(l) => lines.push((None, l)),
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => {
                        self.stdin = None;
                        break;
                    }
                }
            }
        }
        lines.extend(server.take_admin_commands().into_iter().map(|(p, c)| (Some(p), c)));
        // Consoles on the admin socket: each answer goes back to its console.
        #[cfg(unix)]
        if let Some(rx) = &self.socket {
            let requests: Vec<_> = rx.try_iter().collect();
            for r in requests {
                info!(command = %r.line, "console command from the admin socket");
                let answer = self.run_checked(server, &r.line, reload.as_deref_mut());
                let _ = r.reply.send(answer);
            }
        }
        for (from, line) in lines {
            let (ok, mut out) = self.run_checked(server, &line, reload.as_deref_mut());
            if !ok && from.is_some() {
                // An admin in the game learns it was not done (their tool's exit status).
                if let Some(first) = out.first_mut() {
                    *first = format!("{}{first}", super::ADMIN_REFUSED);
                }
            }
            match from {
                None => {
                    // Never println!: a closed standard output must not stop the server.
                    use std::io::Write;
                    let mut o = std::io::stdout().lock();
                    for l in &out {
                        let _ = writeln!(o, "{l}");
                    }
                }
                Some(peer) => {
                    for l in out.iter().take(24) {
                        server.notice(peer, l);
                    }
                }
            }
        }
        if let Some(every) = self.status_every {
            if self.last_status.elapsed() >= every {
                let line = self.status_line(server);
                info!("{line}");
            }
        }
    }

    /// The one-line summary the log gets every few minutes; traffic is since the last one.
    fn status_line<T: Transport>(&mut self, server: &Server<T>) -> String {
        let secs = self.last_status.elapsed().as_secs_f64().max(1e-3);
        self.last_status = Instant::now();
        let (mean, max) = self.tick_cost_ms();
        let traffic = match server.net.wire_totals() {
            Some((sent, recv)) => {
                let (s0, r0) = std::mem::replace(&mut self.last_traffic, (sent, recv));
                format!(
                    ", traffic {:.1} KB/s out {:.1} KB/s in",
                    sent.saturating_sub(s0) as f64 / secs / 1000.0,
                    recv.saturating_sub(r0) as f64 / secs / 1000.0
                )
            }
            None => String::new(),
        };
        format!(
            "status: {} player(s), {} instance(s), {} bullet(s), tick {mean:.2} ms mean {max:.2} ms max (last minute){traffic}, up {}",
            server.connected_players(),
            server.world.instances.len(),
            server.world.instances.values().map(|i| i.bullets.len()).sum::<usize>(),
            uptime(self.started.elapsed())
        )
    }

    /// Runs one command line; returns what to show whoever typed it.
    pub fn run<T: Transport>(
        &mut self,
        server: &mut Server<T>,
        line: &str,
        reload: Option<&mut ModReloader>,
    ) -> Vec<String> {
        self.run_checked(server, line, reload).1
    }

    /// [`Ops::run`], and whether the command did what it was asked (a typo, an unknown
    /// player, nothing to cancel: false). `hailfire console --run` exits with it.
    pub fn run_checked<T: Transport>(
        &mut self,
        server: &mut Server<T>,
        line: &str,
        reload: Option<&mut ModReloader>,
    ) -> (bool, Vec<String>) {
        let cmd = match Command::parse(line) {
            Ok(Some(c)) => c,
            Ok(None) => return (true, Vec::new()),
            Err(e) => return (false, vec![e]),
        };
        let failed = std::cell::Cell::new(false);
        let fail = |line: String| {
            failed.set(true);
            vec![line]
        };
        let one = |r: Result<String, String>| match r {
            Ok(s) => vec![s],
            Err(e) => fail(e),
        };
        let out = self.apply(server, cmd, reload, &one, &fail);
        (!failed.get(), out)
    }

    fn apply<T: Transport>(
        &mut self,
        server: &mut Server<T>,
        cmd: Command,
        reload: Option<&mut ModReloader>,
        one: &dyn Fn(Result<String, String>) -> Vec<String>,
        fail: &dyn Fn(String) -> Vec<String>,
    ) -> Vec<String> {
        match cmd {
            Command::Help => HELP.lines().map(str::to_string).collect(),
            Command::Status => {
                let (mean, max) = self.tick_cost_ms();
                let mut out = vec![format!(
                    "{:?} up {}, {} of {} player(s), {} joining, tick {mean:.2} ms mean {max:.2} ms max over the last minute (budget 16.7)",
                    server.config.name,
                    uptime(self.started.elapsed()),
                    server.connected_players(),
                    server.config.max_players,
                    server.joining()
                )];
                if let Some(sec) = server.net.security() {
                    out.push(format!(
                        "network: {} session(s), {} handshake(s) in progress, receive buffer {}; dropped: {}",
                        sec.sessions,
                        sec.half_open,
                        if sec.receive_buffer > 0 { bytes(sec.receive_buffer as u64) } else { "unknown".into() },
                        sec.drops()
                    ));
                }
                if let Some((sent, recv)) = server.net.wire_totals() {
                    let s = self.started.elapsed().as_secs_f64().max(1e-3);
                    out.push(format!(
                        "traffic: {} out, {} in ({:.1} / {:.1} KB/s on average)",
                        bytes(sent),
                        bytes(recv),
                        sent as f64 / s / 1000.0,
                        recv as f64 / s / 1000.0
                    ));
                }
                if !server.records.dungeons.is_empty() {
                    out.push("records:".into());
                    out.extend(server.records.lines().into_iter().map(|l| format!("  {l}")));
                }
                out.push("players:".into());
                let players = server.player_lines();
                if players.is_empty() {
                    out.push("  (nobody)".into());
                }
                out.extend(players.into_iter().map(|l| format!("  {l}")));
                out.push("instances:".into());
                out.extend(server.instance_lines().into_iter().map(|l| format!("  {l}")));
                if !server.stopped.is_empty() {
                    out.push("fights stopped (their scripts could not go on):".into());
                    for (at, line) in &server.stopped {
                        let ago = at.elapsed().map_or(0, |d| d.as_secs());
                        out.push(format!("  {ago} s ago: {line}"));
                    }
                }
                out
            }
            Command::Players => {
                let p = server.player_lines();
                if p.is_empty() {
                    vec!["nobody is connected".into()]
                } else {
                    p
                }
            }
            Command::Kick { who, reason } => one(server.kick(&who, &reason)),
            Command::Ban { who, reason } => one(server.ban(&who, &reason)),
            Command::Unban { who } => one(server.unban(&who)),
            Command::Bans => {
                if server.bans.bans.is_empty() {
                    vec!["nobody is banned".into()]
                } else {
                    server.bans.bans.iter().map(|b| b.describe()).collect()
                }
            }
            Command::Allow { who } => one(server.allow(&who)),
            Command::Disallow { who } => one(server.disallow(&who)),
            Command::Op { who } => one(server.op(&who)),
            Command::Deop { who } => one(server.deop(&who)),
            Command::Allowlist => {
                let state = if server.config.allowlist {
                    "the allowlist is on: only these players may join"
                } else {
                    "the allowlist is off (allowlist = true in server.toml turns it on)"
                };
                let mut out = vec![state.to_string()];
                if server.allowlist.entries.is_empty() {
                    out.push("  (nobody)".into());
                }
                out.extend(server.allowlist.entries.iter().map(|e| format!("  {}", e.describe())));
                out
            }
            Command::Ops => {
                if server.ops.entries.is_empty() {
                    vec!["no operators".into()]
                } else {
                    server.ops.entries.iter().map(|e| e.describe()).collect()
                }
            }
            Command::Say { text } => {
                let n = server.say(&text);
                vec![format!("said to {n} player(s)")]
            }
            Command::Reload => match reload {
                Some(r) => {
                    r.request();
                    vec!["reloading the mods (the log says how it went)".into()]
                }
                None => fail("this server cannot reload its mods".into()),
            },
            Command::Stop { message, after: None, restart } => {
                info!(message = message.as_deref().unwrap_or(""), restart, "stop requested from the console");
                server.stop_message = message;
                self.stop_requested = true;
                self.restart_requested = restart;
                vec![if restart { "restarting" } else { "stopping" }.into()]
            }
            Command::Stop { message, after: Some(secs), restart } => {
                let what = if restart { "restarts" } else { "stops" };
                info!(
                    seconds = secs,
                    message = message.as_deref().unwrap_or(""),
                    restart,
                    "countdown started from the console"
                );
                let marks: Vec<u32> = COUNTDOWN_MARKS.iter().copied().filter(|m| *m < secs).collect();
                server.say(&countdown_text(what, secs, message.as_deref()));
                self.countdown = Some((Instant::now() + Duration::from_secs(secs as u64), message, restart, marks));
                vec![format!("the server {what} in {secs} s (players are told at {COUNTDOWN_MARKS:?} s; `stop cancel` calls it off)")]
            }
            Command::Record { who, seconds } => {
                let Some(setup) = self.record_setup.clone() else {
                    return fail("this server cannot record (the dedicated server can)".into());
                };
                let Some((_, player, name)) = server.find_player(&who) else {
                    return fail(format!("no player '{who}' is connected (see `players`)"));
                };
                if server.watching() >= server.config.max_spectators {
                    return fail(format!(
                        "no spectator place is free (max_spectators = {}): a recording watches as a spectator",
                        server.config.max_spectators
                    ));
                }
                let path = setup.dir.join(super::recorder::file_name_in(Some(&setup.dir), &name));
                info!(player, name = %name, seconds, path = %path.display(), "recording a player's view");
                self.recordings.start(setup, name.clone(), seconds, path.clone());
                vec![format!(
                    "recording {name} (player {player}) for {seconds} s into {} (a spectator called \"recorder\" follows them; the log says when it is written)",
                    path.display()
                )]
            }
            Command::StopCancel => match self.countdown.take() {
                Some(_) => {
                    info!("countdown called off from the console");
                    server.say("The server will not stop after all.");
                    vec!["called off".into()]
                }
                None => fail("nothing is counting down".into()),
            },
        }
    }
}

/// A countdown as written: `60`, `90s`, `5m` (at most `MAX_COUNTDOWN_S`).
fn countdown_seconds(s: &str) -> Option<u32> {
    let s = s.to_ascii_lowercase();
    let (digits, scale) = match s.strip_suffix('m') {
        Some(d) => (d, 60),
        None => (s.strip_suffix('s').unwrap_or(&s), 1),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse::<u32>().ok()?.checked_mul(scale).filter(|n| *n <= MAX_COUNTDOWN_S)
}

/// "The server stops in 30 s: message".
fn countdown_text(what: &str, secs: u32, message: Option<&str>) -> String {
    match message {
        Some(m) => format!("The server {what} in {secs} s: {m}"),
        None => format!("The server {what} in {secs} s."),
    }
}

impl Ops {
    /// A countdown's warnings, then its stop.
    fn count_down<T: Transport>(&mut self, server: &mut Server<T>) {
        let Some((at, message, restart, marks)) = &mut self.countdown else { return };
        let left = at.saturating_duration_since(Instant::now());
        let what = if *restart { "restarts" } else { "stops" };
        while let Some(&m) = marks.first() {
            if left > Duration::from_secs(m as u64) {
                break;
            }
            marks.remove(0);
            server.say(&countdown_text(what, m, message.as_deref()));
        }
        if left.is_zero() {
            server.stop_message = message.take();
            self.restart_requested = *restart;
            self.stop_requested = true;
            self.countdown = None;
        }
    }
}

fn bytes(b: u64) -> String {
    match b {
        0..=999_999 => format!("{:.1} KB", b as f64 / 1e3),
        1_000_000..=999_999_999 => format!("{:.1} MB", b as f64 / 1e6),
        _ => format!("{:.2} GB", b as f64 / 1e9),
    }
}

fn uptime(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..=59 => format!("{s} s"),
        60..=3599 => format!("{} min {} s", s / 60, s % 60),
        _ => format!("{} h {} min", s / 3600, (s % 3600) / 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_parse_with_quotes_and_reasons() {
        assert_eq!(Command::parse("  ").unwrap(), None);
        assert_eq!(
            Command::parse("kick \"Big Bob\" spamming the chat").unwrap(),
            Some(Command::Kick { who: "Big Bob".into(), reason: "spamming the chat".into() })
        );
        assert_eq!(Command::parse("KICK 3").unwrap(), Some(Command::Kick { who: "3".into(), reason: String::new() }));
        assert_eq!(
            Command::parse("ban 203.0.113.9 flooding").unwrap(),
            Some(Command::Ban { who: "203.0.113.9".into(), reason: "flooding".into() })
        );
        assert_eq!(Command::parse("say  hello  all ").unwrap(), Some(Command::Say { text: "hello  all".into() }));
        assert!(Command::parse("kick").unwrap_err().contains("kick NAME"));
        assert!(Command::parse("say").unwrap_err().contains("say TEXT"));
        assert!(Command::parse("frobnicate").unwrap_err().contains("type `help`"));
        assert_eq!(Command::parse("stop").unwrap(), Some(Command::Stop { message: None, after: None, restart: false }));
        assert_eq!(
            Command::parse("stop restarting for an update").unwrap(),
            Some(Command::Stop { message: Some("restarting for an update".into()), after: None, restart: false })
        );
        assert_eq!(
            Command::parse("stop 60 maintenance").unwrap(),
            Some(Command::Stop { message: Some("maintenance".into()), after: Some(60), restart: false })
        );
        assert_eq!(
            Command::parse("Restart 30").unwrap(),
            Some(Command::Stop { message: None, after: Some(30), restart: true })
        );
        assert_eq!(Command::parse("stop cancel").unwrap(), Some(Command::StopCancel));
        assert_eq!(Command::parse("restart \"Cancel\"").unwrap(), Some(Command::StopCancel));
        assert_eq!(
            Command::parse("restart 5m back soon").unwrap(),
            Some(Command::Stop { message: Some("back soon".into()), after: Some(300), restart: true })
        );
        assert_eq!(
            Command::parse("stop 90s").unwrap(),
            Some(Command::Stop { message: None, after: Some(90), restart: false })
        );
        assert_eq!(
            Command::parse("stop 0").unwrap(),
            Some(Command::Stop { message: None, after: None, restart: false })
        );
        // A typo never stops the server at once: it is an error that says how to write it.
        for typo in [
            "stop 99999",
            "stop 61m",
            "stop 1.5",
            "stop -5",
            "stop 4294967296",
            "stop 5x",
            "stop 2 minutes of maintenance",
        ] {
            assert!(Command::parse(typo).is_err(), "{typo} was taken");
        }
        assert!(Command::parse("stop 2 minutes").unwrap_err().contains("like 2s or 2m"));
    }

    #[test]
    fn uptime_reads_well() {
        assert_eq!(uptime(Duration::from_secs(5)), "5 s");
        assert_eq!(uptime(Duration::from_secs(125)), "2 min 5 s");
        assert_eq!(uptime(Duration::from_secs(7260)), "2 h 1 min");
    }
}
