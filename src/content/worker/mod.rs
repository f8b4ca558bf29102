//! Untrusted mods out of process. A dungeon instance whose fight needs an emitter from a
//! mod the operator has not marked trusted starts a worker: this same executable with
//! `--script-worker`, limited by the operating system ([`limits`]), holding one Lua state
//! per mod. Each tick the server writes the starts, stops and the view to its stdin and
//! reads the commands from its stdout ([`wire`]), waiting at most:
//! - [`TICK_CPU_MS`] of the worker's own CPU time (a script spinning in C, a collector
//!   stall: anything that computes too long), or
//! - [`TICK_WALL_MS`] of wall-clock time (a worker that sleeps, blocks or is starved).
//!
//! A worker over either is killed; its instance ends with the reason, and the log names
//! the mod, the file and the last line the worker's instruction hook saw ([`probe`]). A
//! worker that dies (a panic, out of memory, a system call the filter refused) is the
//! same: a dead worker, never a dead server. Only Unix has workers; elsewhere untrusted
//! mods run in process (`docs/SECURITY.md`).

pub mod child;
pub mod limits;
pub mod probe;
pub mod wire;

use std::path::PathBuf;
#[cfg(unix)]
use std::time::{Duration, Instant};

#[cfg(unix)]
use crate::protocol::wire::Writer;
#[cfg(unix)]
use crate::sim::defs::ArgValue;
#[cfg(unix)]
use crate::sim::script::{Owner, ScriptCmd, ScriptMessage, ScriptView};
#[cfg(unix)]
use wire::{Answer, Init, Op, TickReq};

/// CPU time a worker may spend answering one tick, milliseconds, for each mod it runs
/// emitters of in that fight. Each mod's scripts get 1,000,000 instructions a tick (about
/// 5 ms on the 2-core machine of docs/PERFORMANCE.md); this is the backstop for work the
/// instruction count cannot see.
pub const TICK_CPU_MS: u64 = 8;
/// Wall-clock time a worker may take to answer one tick, milliseconds: room for a busy
/// machine to run it late, not for a worker that sleeps or blocks.
pub const TICK_WALL_MS: u64 = 60;
/// Time a new worker has to start and say it is ready, milliseconds.
pub const START_MS: u64 = 3000;
/// CPU a worker may spend setting up a tick's new emitters (making a mod's Lua state,
/// compiling), milliseconds. The worker says when setup is done, and the tick's own
/// budget starts then: setup is not a tick's work, and a mod cannot stall a tick in it
/// for longer than this.
pub const SETUP_CPU_MS: u64 = 100;
/// Workers a mod may lose (killed or dead) before its emitters are refused until the
/// next reload.
pub const KILLS_TO_DISABLE: u32 = 3;
/// CPU a worker may use between its answer and the next request (it has nothing to do
/// then), milliseconds. A worker over it [`LATE_LIMIT`] times within [`LATE_WINDOW`]
/// ticks, or over a whole tick's budget ([`TICK_CPU_MS`]) once, is killed at the next
/// request. Up to four small overruns in that window are forgiven: on a busy virtual
/// machine the hypervisor's stolen time and a page fault in the worker's last system call
/// are charged to it (seen in CI: 2 ms once in a load-time dry run).
pub const IDLE_CPU_MS: u64 = 2;
/// An answer later than this (a whole tick) is late; [`LATE_LIMIT`] late answers within
/// [`LATE_WINDOW`] ticks get a worker killed, so no worker can hold the world to a slower
/// pace by answering just inside its deadline every tick.
pub const LATE_MS: u64 = 17;
pub const LATE_LIMIT: usize = 5;
pub const LATE_WINDOW: u64 = 60;

/// The argument that makes this executable a worker.
pub const WORKER_ARG: &str = "--script-worker";

/// The executable workers run: `$HAILFIRE_WORKER_EXE`, else this program when it is
/// `hailfire`, else (a test binary in `target/<profile>/deps`) the `hailfire` beside it.
pub fn worker_exe() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("HAILFIRE_WORKER_EXE") {
        return Ok(PathBuf::from(p));
    }
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
    let name = format!("hailfire{}", std::env::consts::EXE_SUFFIX);
    if exe.file_name().is_some_and(|n| n == name.as_str()) {
        return Ok(exe);
    }
    let dir = exe.parent().ok_or("no folder")?;
    let beside = if dir.file_name().is_some_and(|n| n == "deps") { dir.parent().unwrap_or(dir) } else { dir };
    let candidate = beside.join(&name);
    if candidate.is_file() {
        Ok(candidate)
    } else {
        Err(format!("no '{name}' to run script workers (set HAILFIRE_WORKER_EXE)"))
    }
}

/// Why a worker was lost.
#[derive(Clone, Debug, PartialEq)]
pub struct Lost {
    pub why: String,
    /// The emitter the worker was running and where (`file:line`), as it last noted them.
    pub emitter: String,
    pub pos: String,
}

/// One worker, seen from the server.
#[cfg(unix)]
pub struct Worker {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    stdout: std::process::ChildStdout,
    #[cfg(target_os = "linux")]
    page: Option<probe::Page>,
    #[cfg(target_os = "linux")]
    cpu_clock: Option<libc::clockid_t>,
    pub held: limits::Held,
    ops: Vec<Op>,
    tasks: usize,
    /// Mods whose emitters this worker was asked to start (the CPU budget scales by them).
    mods: std::collections::BTreeSet<String>,
    /// The request sent last started emitters: the worker says when their setup is done.
    sent_starts: bool,
    /// The worker's CPU time when its last answer arrived (it should stay idle until the
    /// next request).
    idle_from: Option<Duration>,
    /// Answers received, and which of the recent ones were late.
    answers: u64,
    late: std::collections::VecDeque<u64>,
    /// Which of the recent requests found the worker had computed since its answer.
    busy_idle: std::collections::VecDeque<u64>,
    out: Writer,
    inbuf: Vec<u8>,
    /// When the last request was sent, and the worker's CPU time then.
    sent: Option<(Instant, Duration)>,
    kinds: usize,
    enemies: std::collections::BTreeSet<String>,
}

#[cfg(unix)]
fn set_nonblocking(fd: std::os::fd::RawFd) {
    // SAFETY: fcntl on a descriptor we own.
    unsafe {
        let f = libc::fcntl(fd, libc::F_GETFL);
        libc::fcntl(fd, libc::F_SETFL, f | libc::O_NONBLOCK);
    }
}

/// Waits until `fd` is ready for `events` or `ms` pass.
#[cfg(unix)]
fn wait_fd(fd: std::os::fd::RawFd, events: libc::c_short, ms: u64) {
    let mut p = libc::pollfd { fd, events, revents: 0 };
    // SAFETY: one valid pollfd.
    unsafe { libc::poll(&mut p, 1, ms.min(i32::MAX as u64) as libc::c_int) };
}

#[cfg(unix)]
impl Worker {
    /// Starts a worker for `init` and waits (at most [`START_MS`]) until it is ready.
    pub fn spawn(exe: &std::path::Path, init: &Init) -> Result<Worker, Lost> {
        use std::os::fd::AsRawFd;
        use std::process::{Command, Stdio};
        let lost = |why: String| Lost { why, emitter: String::new(), pos: String::new() };
        let mut cmd = Command::new(exe);
        cmd.arg(WORKER_ARG).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::null());
        // Nothing of the server's environment but what a test may set.
        cmd.env_clear();
        #[cfg(feature = "test-hooks")]
        if let Some(f) = std::env::var_os("HAILFIRE_WORKER_FAULT") {
            cmd.env("HAILFIRE_WORKER_FAULT", f);
        }
        #[cfg(target_os = "linux")]
        let page = probe::Page::new();
        {
            use std::os::unix::process::CommandExt;
            // Its own process group: a Ctrl-C at the server's terminal reaches the server,
            // which shuts down in order, not its workers first.
            cmd.process_group(0);
        }
        #[cfg(target_os = "linux")]
        {
            use std::os::unix::process::CommandExt;
            let fd = page.as_ref().map(|p| p.fd.as_raw_fd());
            // SAFETY: only async-signal-safe calls, in the child between fork and exec.
            unsafe {
                cmd.pre_exec(move || {
                    if let Some(fd) = fd {
                        // dup2 onto itself keeps close-on-exec: clear it by hand then.
                        let ok = if fd == 3 { libc::fcntl(3, libc::F_SETFD, 0) >= 0 } else { libc::dup2(fd, 3) >= 0 };
                        if !ok {
                            return Err(std::io::Error::last_os_error());
                        }
                    }
                    // Nothing else the server holds open reaches the worker.
                    libc::syscall(libc::SYS_close_range, 4u32, u32::MAX, 0u32);
                    // Dies with the server (the thread that started it lives as long).
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                    Ok(())
                });
            }
        }
        let mut child = cmd.spawn().map_err(|e| lost(format!("could not start ({}): {e}", exe.display())))?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(lost("no pipes".into()));
        };
        set_nonblocking(stdin.as_raw_fd());
        set_nonblocking(stdout.as_raw_fd());
        #[cfg(target_os = "linux")]
        let cpu_clock = {
            let mut clk: libc::clockid_t = 0;
            // SAFETY: asks for the CPU clock of our own child.
            (unsafe { libc::clock_getcpuclockid(child.id() as libc::pid_t, &mut clk) } == 0).then_some(clk)
        };
        let mut w = Worker {
            child,
            stdin,
            stdout,
            #[cfg(target_os = "linux")]
            page,
            #[cfg(target_os = "linux")]
            cpu_clock,
            held: limits::Held::default(),
            ops: Vec::new(),
            tasks: 0,
            mods: Default::default(),
            sent_starts: false,
            idle_from: None,
            answers: 0,
            late: Default::default(),
            busy_idle: Default::default(),
            out: Writer::new(),
            inbuf: Vec::new(),
            sent: None,
            kinds: init.kinds.len(),
            enemies: init.enemies.iter().cloned().collect(),
        };
        let (start, wall) = (Instant::now(), Duration::from_millis(START_MS));
        let res = w.write_all(&init.encode(), start + wall).and_then(|()| w.read_frame((start, wall), None, "start"));
        match res {
            Ok((wire::T_READY, p)) if p.len() == 1 => {
                w.held = limits::Held::from_byte(p[0]);
                Ok(w)
            }
            Ok(_) => Err(w.kill("answered its start with something else".into())),
            Err(why) => Err(w.kill(why)),
        }
    }

    /// Kills the worker (if it still runs) and says why, with where it last was.
    pub fn kill(&mut self, why: String) -> Lost {
        let _ = self.child.kill();
        let status = self.child.wait().ok();
        #[cfg(target_os = "linux")]
        let (emitter, pos) = self.page.as_ref().map(|p| p.snapshot()).unwrap_or_default();
        #[cfg(not(target_os = "linux"))]
        let (emitter, pos) = (String::new(), String::new());
        let why = match status.and_then(|s| {
            use std::os::unix::process::ExitStatusExt;
            s.signal()
        }) {
            // Killed by someone else than us (the kernel: a CPU limit, SIGSYS, ...).
            Some(sig) if sig != libc::SIGKILL => format!("{why} (signal {sig})"),
            _ => why,
        };
        Lost { why, emitter, pos }
    }

    fn cpu_time(&self) -> Duration {
        #[cfg(target_os = "linux")]
        if let Some(clk) = self.cpu_clock {
            let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
            // SAFETY: reads a clock into a valid timespec.
            if unsafe { libc::clock_gettime(clk, &mut ts) } == 0 {
                return Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32);
            }
        }
        Duration::ZERO
    }

    fn write_all(&mut self, mut bytes: &[u8], deadline: Instant) -> Result<(), String> {
        use std::io::Write;
        use std::os::fd::AsRawFd;
        while !bytes.is_empty() {
            match self.stdin.write(bytes) {
                Ok(0) => return Err("closed its input".into()),
                Ok(n) => bytes = &bytes[n..],
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Err("stopped reading its input".into());
                    }
                    wait_fd(self.stdin.as_raw_fd(), libc::POLLOUT, left.as_millis() as u64 + 1);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return Err("died".into()),
            }
        }
        Ok(())
    }

    /// Reads one frame, waiting at most `wall` from `start`, and (with `cpu`: the worker's CPU time
    /// when the wait began, and how much more it may use) no longer than that CPU. `what`
    /// names the work in the error.
    fn read_frame(
        &mut self,
        (start, wall): (Instant, Duration),
        cpu: Option<(Duration, Duration)>,
        what: &str,
    ) -> Result<(u8, Vec<u8>), String> {
        let deadline = start + wall;
        use std::io::Read;
        use std::os::fd::AsRawFd;
        let mut chunk = [0u8; 16 * 1024];
        loop {
            match wire::split(&self.inbuf, wire::MAX_ANSWER) {
                Ok(Some((t, p, used))) => {
                    let frame = (t, p.to_vec());
                    self.inbuf.drain(..used);
                    if self.inbuf.capacity() > 1 << 20 && self.inbuf.len() < 1 << 16 {
                        self.inbuf.shrink_to(1 << 16);
                    }
                    if t == wire::T_FATAL {
                        let mut r = crate::protocol::wire::Reader::new(&frame.1);
                        let msg = r
                            .count(4096, 1, "message")
                            .and_then(|n| r.bytes(n))
                            .map(|b| crate::content::diag::escape_text(&String::from_utf8_lossy(b)))
                            .unwrap_or_default();
                        return Err(format!("crashed: {msg}"));
                    }
                    return Ok(frame);
                }
                Ok(None) => {}
                Err(e) => return Err(format!("sent a malformed answer ({e})")),
            }
            match self.stdout.read(&mut chunk) {
                Ok(0) => return Err("died".into()),
                Ok(n) => {
                    self.inbuf.extend_from_slice(&chunk[..n]);
                    continue;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => return Err("died".into()),
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(format!("did not {what} within {} ms", wall.as_millis()));
            }
            let mut wait = deadline - now;
            if let Some((cpu0, cpu_budget)) = cpu {
                let used = self.cpu_time().saturating_sub(cpu0);
                if used >= cpu_budget {
                    return Err(format!("used more than {} ms of CPU to {what}", cpu_budget.as_millis()));
                }
                // Its CPU time cannot grow faster than the clock: look again when it could
                // have used up what is left (at least every millisecond).
                wait = wait.min((cpu_budget - used).max(Duration::from_millis(1)));
            }
            wait_fd(self.stdout.as_raw_fd(), libc::POLLIN, wait.as_millis().max(1) as u64);
        }
    }

    /// The wall-clock time one tick's answer may take: [`TICK_WALL_MS`], plus the CPU
    /// budget past the first mod's.
    pub fn wall_budget(&self) -> Duration {
        Duration::from_millis(TICK_WALL_MS) + self.cpu_budget() - Duration::from_millis(TICK_CPU_MS)
    }

    /// The CPU one tick's answer may take: [`TICK_CPU_MS`] for each mod started here.
    pub fn cpu_budget(&self) -> Duration {
        Duration::from_millis(TICK_CPU_MS * self.mods.len().max(1) as u64)
    }

    pub fn start(&mut self, mod_id: &str, owner: Owner, group: u32, name: &str, args: Option<&ArgValue>) {
        if !self.mods.contains(mod_id) {
            self.mods.insert(mod_id.to_string());
        }
        self.ops.push(Op::Start { owner, group, name: name.to_string(), args: args.cloned() });
        self.tasks += 1;
    }

    pub fn stop(&mut self, owner: Owner, group: Option<u32>) {
        self.ops.push(Op::Stop { owner, group });
    }

    /// The mods whose emitters this worker was asked to start.
    pub fn mods(&self) -> &std::collections::BTreeSet<String> {
        &self.mods
    }

    /// Live tasks as of the last answer, plus the starts sent since.
    pub fn task_count(&self) -> usize {
        self.tasks
    }

    /// Sends this tick's request (the answer is collected by [`Worker::finish`]).
    pub fn send(&mut self, view: &ScriptView) -> Result<(), String> {
        let req = TickReq {
            tick: view.tick,
            arena: view.arena,
            party: view.party,
            players: view.players.to_vec(),
            owners: view.owners.to_vec(),
            ops: std::mem::take(&mut self.ops),
        };
        self.sent_starts = req.ops.iter().any(|o| matches!(o, Op::Start { .. }));
        let mut out = std::mem::take(&mut self.out);
        req.encode_into(&mut out);
        let now = Instant::now();
        let cpu0 = self.cpu_time();
        if let Some(idle) = self.idle_from.take() {
            let between = cpu0.saturating_sub(idle);
            if between > Duration::from_millis(IDLE_CPU_MS) {
                self.busy_idle.push_back(self.answers);
            }
            while self.busy_idle.front().is_some_and(|&a| a + LATE_WINDOW <= self.answers) {
                self.busy_idle.pop_front();
            }
            if between > Duration::from_millis(TICK_CPU_MS) || self.busy_idle.len() >= LATE_LIMIT {
                self.out = out;
                return Err(format!(
                    "computed between ticks ({} ms of CPU; {} times in {LATE_WINDOW} ticks)",
                    between.as_millis(),
                    self.busy_idle.len()
                ));
            }
        }
        let res = self.write_all(&out.buf, now + self.wall_budget());
        self.out = out;
        self.sent = Some((now, cpu0));
        res
    }

    /// Waits for the answer to the request sent last and appends it.
    pub fn finish(&mut self, out: &mut Vec<ScriptCmd>, msgs: &mut Vec<ScriptMessage>) -> Result<(), String> {
        let Some((mut at, mut cpu0)) = self.sent.take() else { return Ok(()) };
        if std::mem::take(&mut self.sent_starts) {
            // New emitters first: their setup has its own budget, then the tick's begins.
            let budget = Some((cpu0, Duration::from_millis(SETUP_CPU_MS)));
            let wall = Duration::from_millis(SETUP_CPU_MS + TICK_WALL_MS);
            let (t, payload) = self.read_frame((at, wall), budget, "set up its emitters")?;
            if t != wire::T_SETUP || !payload.is_empty() {
                return Err("sent a malformed answer (not a setup's)".into());
            }
            (at, cpu0) = (Instant::now(), self.cpu_time());
        }
        let (t, p) = self.read_frame((at, self.wall_budget()), Some((cpu0, self.cpu_budget())), "answer one tick")?;
        if t != wire::T_DONE {
            return Err("sent a malformed answer (not a tick's)".into());
        }
        self.idle_from = Some(self.cpu_time());
        self.answers += 1;
        if at.elapsed() > Duration::from_millis(LATE_MS) {
            self.late.push_back(self.answers);
        }
        while self.late.front().is_some_and(|&a| a + LATE_WINDOW <= self.answers) {
            self.late.pop_front();
        }
        if self.late.len() >= LATE_LIMIT {
            return Err(format!("answered later than {LATE_MS} ms {LATE_LIMIT} times in {LATE_WINDOW} ticks"));
        }
        let enemies = &self.enemies;
        let a: Answer = Answer::decode(&p, self.kinds, |e| enemies.contains(e), self.mods.len())
            .map_err(|e| format!("sent a malformed answer ({e})"))?;
        self.tasks = a.tasks as usize;
        out.extend(a.cmds);
        msgs.extend(a.msgs);
        Ok(())
    }
}

#[cfg(unix)]
impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
