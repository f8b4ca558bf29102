//! What the operating system holds a script worker to, applied by the worker to itself
//! before it reads a byte of mod code:
//! - resource limits: address space ([`ADDRESS_SPACE`]), CPU seconds ([`CPU_SECONDS`]),
//!   no files written, no core dumps, no new processes, at most a handful of descriptors;
//! - on Linux, a seccomp filter: the worker may read its stdin, write its stdout, manage
//!   its memory, read clocks and exit. Every other system call (open, socket, connect,
//!   execve, fork, kill of another process, ...) fails with EPERM. It needs no file and no
//!   network: its mods' sources arrive over the pipe.
//!
//! On other systems only what `setrlimit` gives holds (`docs/SECURITY.md` says so).

/// Address space a worker may map, bytes: its Lua states (32 MiB each), its own code and
/// a margin. Past it allocations fail and the worker dies, which ends only its instance.
pub const ADDRESS_SPACE: u64 = 1 << 30;
/// CPU seconds a worker may use in its life (a backstop under the per-tick deadline).
pub const CPU_SECONDS: u64 = 1800;
/// Descriptors a worker may hold (stdin, stdout, stderr and a few for the runtime).
const FILES: u64 = 8;

/// What held, for the server's log: (resource limits, system call filter).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Held {
    pub rlimits: bool,
    pub seccomp: bool,
}

impl Held {
    pub fn to_byte(self) -> u8 {
        self.rlimits as u8 | (self.seccomp as u8) << 1
    }
    pub fn from_byte(b: u8) -> Held {
        Held { rlimits: b & 1 != 0, seccomp: b & 2 != 0 }
    }
}

#[cfg(unix)]
fn rlimits() -> bool {
    let set = |res, v: u64| {
        let l = libc::rlimit { rlim_cur: v as libc::rlim_t, rlim_max: v as libc::rlim_t };
        // SAFETY: setrlimit with a valid struct.
        unsafe { libc::setrlimit(res, &l) == 0 }
    };
    let mut ok = true;
    ok &= set(libc::RLIMIT_AS, ADDRESS_SPACE);
    ok &= set(libc::RLIMIT_CPU, CPU_SECONDS);
    ok &= set(libc::RLIMIT_FSIZE, 0);
    ok &= set(libc::RLIMIT_CORE, 0);
    ok &= set(libc::RLIMIT_NOFILE, FILES);
    // No new processes (root is exempt from this one; the filter below is not).
    ok &= set(libc::RLIMIT_NPROC, 0);
    ok
}

#[cfg(not(unix))]
fn rlimits() -> bool {
    false
}

#[cfg(all(target_os = "linux", any(target_arch = "x86_64", target_arch = "aarch64")))]
fn seccomp() -> Result<(), String> {
    use seccompiler::{BpfProgram, SeccompAction, SeccompFilter};
    let allowed = [
        libc::SYS_read,
        libc::SYS_write,
        libc::SYS_close,
        libc::SYS_brk,
        libc::SYS_mmap,
        libc::SYS_munmap,
        libc::SYS_mremap,
        libc::SYS_mprotect,
        libc::SYS_madvise,
        libc::SYS_futex,
        libc::SYS_exit,
        libc::SYS_exit_group,
        libc::SYS_rt_sigreturn,
        libc::SYS_rt_sigprocmask,
        libc::SYS_rt_sigaction,
        libc::SYS_sigaltstack,
        libc::SYS_clock_gettime,
        libc::SYS_clock_nanosleep,
        libc::SYS_nanosleep,
        libc::SYS_getrandom,
        libc::SYS_sched_yield,
        libc::SYS_getpid,
        libc::SYS_gettid,
    ];
    let mut rules: std::collections::BTreeMap<i64, Vec<seccompiler::SeccompRule>> =
        allowed.iter().map(|&n| (n, vec![])).collect();
    // abort() (out of memory) signals its own thread: `tgkill` only with this process as
    // its target, never another (pids are easy to guess, and the server runs as the same
    // user).
    use seccompiler::{SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompRule};
    // SAFETY: getpid has no preconditions.
    let me = unsafe { libc::getpid() } as u64;
    let own = SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, me).map_err(|e| format!("{e}"))?;
    rules.insert(libc::SYS_tgkill, vec![SeccompRule::new(vec![own]).map_err(|e| format!("{e}"))?]);
    let arch = std::env::consts::ARCH.try_into().map_err(|e| format!("{e}"))?;
    let filter = SeccompFilter::new(rules, SeccompAction::Errno(libc::EPERM as u32), SeccompAction::Allow, arch)
        .map_err(|e| format!("{e}"))?;
    let prog: BpfProgram = filter.try_into().map_err(|e: seccompiler::BackendError| format!("{e}"))?;
    seccompiler::apply_filter(&prog).map_err(|e| format!("{e}"))
}

#[cfg(not(all(target_os = "linux", any(target_arch = "x86_64", target_arch = "aarch64"))))]
fn seccomp() -> Result<(), String> {
    Err("no system call filter on this platform".into())
}

/// The kernel kills a worker first when memory runs out, and never the server (Linux).
fn first_to_go() {
    #[cfg(target_os = "linux")]
    let _ = std::fs::write("/proc/self/oom_score_adj", "1000");
}

/// Applies every limit this platform has; reports what held.
pub fn apply() -> Held {
    first_to_go();
    let rlimits = rlimits();
    let seccomp = seccomp().is_ok();
    Held { rlimits, seccomp }
}
