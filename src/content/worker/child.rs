//! The worker process: `hailfire --script-worker`, started by the server, never by a
//! person. It limits itself ([`super::limits`]), reads its mods' emitters from stdin, then
//! answers one frame a tick: the starts and stops, the view, and back the commands and
//! messages. Inside, each mod has its own Lua state (the same runtime the server uses for
//! trusted content), so the commands are the ones the server would have made itself.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::sync::Arc;

use super::wire::{self, Answer, Init, Op, TickReq};
use crate::content::host::ModRouter;
use crate::content::lua::Names;
use crate::sim::script::{ScriptView, Scripting};

fn write_frame(out: &mut impl Write, bytes: &[u8]) -> std::io::Result<()> {
    out.write_all(bytes)?;
    out.flush()
}

/// Reads one whole frame (type, payload); None at end of input.
fn read_frame(input: &mut impl Read, buf: &mut Vec<u8>) -> Option<u8> {
    let mut len = [0u8; 4];
    input.read_exact(&mut len).ok()?;
    let n = u32::from_le_bytes(len) as usize;
    if n == 0 || n > wire::MAX_FRAME {
        return None;
    }
    buf.resize(n, 0);
    input.read_exact(buf).ok()?;
    Some(buf[0])
}

/// Runs the worker until its input ends; never returns.
pub fn main() -> ! {
    // A panic (inside mlua, say) is reported as a FATAL frame, then the process ends: the
    // server sees a dead worker, never a dead server.
    std::panic::set_hook(Box::new(|info| {
        let mut msg = info.to_string();
        crate::content::lua::truncate_chars(&mut msg, 600);
        let mut w = wire::begin(wire::T_FATAL);
        w.var(msg.len() as u64);
        w.bytes(msg.as_bytes());
        let _ = write_frame(&mut std::io::stdout().lock(), &wire::finish(w));
        // SAFETY: ends the process at once, running nothing more of the program.
        #[cfg(unix)]
        unsafe {
            libc::_exit(70)
        };
        #[cfg(not(unix))]
        std::process::exit(70);
    }));
    let _page = super::probe::attach();
    #[cfg(all(feature = "test-hooks", unix))]
    let _ = SERVER_PID.set(std::os::unix::process::parent_id());
    let held = super::limits::apply();
    let mut input = std::io::stdin().lock();
    let mut output = std::io::stdout().lock();
    let mut buf = Vec::new();
    if read_frame(&mut input, &mut buf) != Some(wire::T_INIT) {
        std::process::exit(2);
    }
    let Ok(init) = Init::decode(&buf[1..]) else { std::process::exit(2) };
    let mut names = Names::default();
    for (i, (k, radius, damage)) in init.kinds.iter().enumerate() {
        names.kinds.insert(k.clone(), (i as u16, *radius, *damage));
    }
    names.enemies = init.enemies.iter().cloned().collect();
    names.sounds = init.sounds.iter().cloned().collect();
    let emitters: Arc<BTreeMap<_, _>> = Arc::new(init.emitters);
    let mut scripts = ModRouter::in_process(emitters, Arc::new(names), init.seed);
    let mut w = wire::begin(wire::T_READY);
    w.u8(held.to_byte());
    if write_frame(&mut output, &wire::finish(w)).is_err() {
        std::process::exit(0);
    }
    let mut answer = Answer::default();
    #[cfg(feature = "test-hooks")]
    let fault = test_fault();
    // Test builds: the kinds of fault that act on every tick once armed.
    #[cfg(feature = "test-hooks")]
    let mut armed: Option<String> = None;
    while let Some(t) = read_frame(&mut input, &mut buf) {
        if t != wire::T_TICK {
            std::process::exit(2);
        }
        let Ok(req) = TickReq::decode(&buf[1..]) else { std::process::exit(2) };
        let starts = req.ops.iter().any(|o| matches!(o, Op::Start { .. }));
        for op in req.ops {
            #[cfg(feature = "test-hooks")]
            if let (Op::Start { name, .. }, Some((kind, target))) = (&op, &fault) {
                if name == target {
                    super::probe::note_emitter(name);
                    if kind == "between" || kind == "late" {
                        armed = Some(kind.clone());
                    } else {
                        inject(kind);
                    }
                }
            }
            match op {
                Op::Start { owner, group, name, args } => {
                    // Compiling is work too: a hang in it is this emitter's.
                    super::probe::note_emitter(&name);
                    scripts.start(owner, group, &name, args.as_ref())
                }
                Op::Stop { owner, group } => scripts.stop(owner, group),
            }
        }
        if starts && write_frame(&mut output, &wire::finish(wire::begin(wire::T_SETUP))).is_err() {
            break;
        }
        let view = ScriptView {
            tick: req.tick,
            arena: req.arena,
            party: req.party,
            players: &req.players,
            owners: &req.owners,
        };
        answer.cmds.clear();
        answer.msgs.clear();
        scripts.run(&view, &mut answer.cmds, &mut answer.msgs);
        answer.tasks = scripts.task_count().min(u32::MAX as usize) as u32;
        #[cfg(feature = "test-hooks")]
        if armed.as_deref() == Some("late") {
            // Inside the deadline every tick, but a whole tick late.
            std::thread::sleep(std::time::Duration::from_millis(30));
        }
        if write_frame(&mut output, &answer.encode()).is_err() {
            break;
        }
        #[cfg(feature = "test-hooks")]
        if armed.as_deref() == Some("between") {
            // Work after the answer, where no tick is waiting for it.
            let t = std::time::Instant::now();
            while t.elapsed() < std::time::Duration::from_millis(20) {
                std::hint::black_box(t);
            }
        }
    }
    std::process::exit(0)
}

/// Test builds only: the server's pid, read before the limits (the `escape` fault tries to
/// signal it).
#[cfg(all(feature = "test-hooks", unix))]
static SERVER_PID: std::sync::OnceLock<u32> = std::sync::OnceLock::new();

/// Test builds only: `HAILFIRE_WORKER_FAULT=KIND:EMITTER` makes the worker fail when that
/// emitter starts, in ways no Lua can reach on purpose: `panic`, `sleep` (past any
/// deadline), `alloc` (Rust memory without end), `spin` (a loop with no Lua in it).
#[cfg(feature = "test-hooks")]
fn test_fault() -> Option<(String, String)> {
    let v = std::env::var("HAILFIRE_WORKER_FAULT").ok()?;
    let (k, e) = v.split_once(':')?;
    Some((k.to_string(), e.to_string()))
}

#[cfg(feature = "test-hooks")]
fn inject(kind: &str) {
    match kind {
        "panic" => panic!("injected panic"),
        "sleep" => std::thread::sleep(std::time::Duration::from_secs(30)),
        "alloc" => {
            let mut hold: Vec<Vec<u8>> = Vec::new();
            loop {
                let mut v = Vec::with_capacity(64 << 20);
                v.push(1u8);
                hold.push(v);
            }
        }
        // What a script that escaped Lua would try first: a file, the network, a program.
        // Each must fail; the panic reports how (the test reads it from the FATAL frame).
        "escape" => {
            let file = std::fs::read("/etc/hostname").map(|_| "read").map_err(|e| e.to_string());
            let net = std::net::UdpSocket::bind("127.0.0.1:0").map(|_| "bound").map_err(|e| e.to_string());
            let exec = std::process::Command::new("/bin/true").status().map(|_| "ran").map_err(|e| e.to_string());
            // Signal 0 only asks whether the server could be signalled: harmless either way.
            let server = SERVER_PID.get().copied().unwrap_or(1) as libc::c_long;
            // SAFETY: a system call with plain numbers.
            let sig = match unsafe { libc::syscall(libc::SYS_tgkill, server, server, 0) } {
                0 => Ok("could"),
                _ => Err(std::io::Error::last_os_error().to_string()),
            };
            panic!("escape: file {file:?}; socket {net:?}; program {exec:?}; signal {sig:?}");
        }
        "spin" => {
            let mut x = 0u64;
            loop {
                x = std::hint::black_box(x.wrapping_add(1));
            }
        }
        _ => {}
    }
}
