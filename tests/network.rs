//! Reaching servers across real networks, built for each test out of Linux network
//! namespaces (root only: a test that cannot make them says SKIPPED and returns; CI runs
//! as root). Every address here lives inside namespaces this test made and removes;
//! nothing outside this machine is ever a target.
//!
//! - Dual-stack: a server on its default `[::]` takes IPv4 and IPv6 players, and shows,
//!   limits and bans an IPv4 player by their IPv4 address.
//! - A LAN of two machines (a veth pair): a server on a random port is listed by
//!   `hailfire servers --lan` from the other machine through its announcements, and a bot
//!   plays there over a ULA IPv6 address and over IPv4.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn exe() -> &'static str {
    env!("CARGO_BIN_EXE_hailfire")
}

fn sh(cmd: &str) -> Result<String, String> {
    let out = Command::new("sh").arg("-c").arg(cmd).output().map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!("`{cmd}`: {}", String::from_utf8_lossy(&out.stderr)))
    }
}

/// Network namespaces made for one test, removed when it ends (even on a panic).
struct Namespaces {
    names: Vec<String>,
}

impl Namespaces {
    /// Namespaces `tag-a`, `tag-b`, ... each with its loopback up; None (after saying
    /// SKIPPED) where this machine does not allow it.
    fn new(tag: &str, n: usize) -> Option<Namespaces> {
        let base = format!("hf{}{}", tag, std::process::id() % 100_000);
        let mut ns = Namespaces { names: Vec::new() };
        for i in 0..n {
            let name = format!("{base}{}", (b'a' + i as u8) as char);
            if let Err(e) = sh(&format!("ip netns add {name} && ip -n {name} link set lo up")) {
                eprintln!("SKIPPED: cannot make network namespaces here (needs root and iproute2): {e}");
                return None;
            }
            ns.names.push(name);
        }
        Some(ns)
    }

    fn name(&self, i: usize) -> &str {
        &self.names[i]
    }

    /// A command run inside namespace `i`.
    fn cmd(&self, i: usize, data: &Path) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", self.name(i), exe()])
            .env("HAILFIRE_DATA_DIR", data)
            .env("HAILFIRE_CONFIG_DIR", data)
            .env("XDG_CACHE_HOME", data.join("cache"))
            .env("RUST_LOG", "info");
        c
    }

    /// Joins namespaces `a` and `b` with a veth pair: IPv4 10.77.0.1 and .2 (/24), IPv6
    /// fd77::1 and ::2 (/64, a unique local prefix).
    fn link(&self, a: usize, b: usize) -> Result<(), String> {
        let (na, nb) = (self.name(a), self.name(b));
        let (va, vb) = (format!("v{}", &na[2..]), format!("v{}", &nb[2..]));
        sh(&format!(
            "ip link add {va} netns {na} type veth peer name {vb} netns {nb} && \
             ip -n {na} addr add 10.77.0.1/24 broadcast 10.77.0.255 dev {va} && \
             ip -n {nb} addr add 10.77.0.2/24 broadcast 10.77.0.255 dev {vb} && \
             ip -n {na} addr add fd77::1/64 dev {va} nodad && \
             ip -n {nb} addr add fd77::2/64 dev {vb} nodad && \
             ip -n {na} link set {va} up && ip -n {nb} link set {vb} up"
        ))
        .map(|_| ())
    }
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        for n in &self.names {
            let _ = sh(&format!("ip netns pids {n} | xargs -r kill -9; ip netns del {n}"));
        }
    }
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

fn wait_for(p: &Path, what: &dyn Fn(&str) -> bool, secs: u64) -> String {
    let start = Instant::now();
    loop {
        let s = read(p);
        if what(&s) {
            return s;
        }
        assert!(start.elapsed() < Duration::from_secs(secs), "timed out waiting; log so far:\n{s}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A dedicated server in namespace `i` on `bind`, logging to `data/server.log`.
fn server(ns: &Namespaces, i: usize, data: &Path, bind: &str, secs: &str) -> (Child, PathBuf) {
    std::fs::create_dir_all(data).unwrap();
    let log = data.join("server.log");
    let c = ns
        .cmd(i, data)
        .args(["--dedicated", "--bind", bind, "--exit-after", secs])
        .env("HAILFIRE_LOG_FILE", &log)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for(&log, &|s| s.contains("dedicated server listening"), 20);
    (c, log)
}

/// A bot in namespace `i` that stays in the hub for `secs`: (exit status, output).
fn bot(ns: &Namespaces, i: usize, data: &Path, join: &str, name: &str, secs: &str) -> (i32, String) {
    let out = ns
        .cmd(i, data)
        .args(["bot", "--join", join, "--plan", "hub", "--seconds", secs, "--name", name])
        .arg("--key")
        .arg(data.join(format!("{name}.key")))
        .output()
        .unwrap();
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into_owned())
}

fn finish(mut c: Child) {
    let start = Instant::now();
    while c.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(40) {
            let _ = c.kill();
            panic!("the server did not stop");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut s = String::new();
    if let Some(mut o) = c.stdout.take() {
        let _ = o.read_to_string(&mut s);
    }
}

#[test]
fn a_server_on_its_default_dual_stack_address_takes_ipv4_and_ipv6_players() {
    let Some(ns) = Namespaces::new("ds", 1) else { return };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // The default bind, [::], in a namespace of its own (nothing outside can reach it).
    let (srv, log) = server(&ns, 0, d, "[::]:24680", "20");
    let (code, out) = bot(&ns, 0, d, "127.0.0.1", "four", "2");
    assert_eq!(code, 0, "an IPv4 player on the dual-stack server: {out}");
    let (code, out) = bot(&ns, 0, d, "[::1]:24680", "six", "2");
    assert_eq!(code, 0, "an IPv6 player: {out}");
    let (code, out) = bot(&ns, 0, d, "::1", "bare", "2");
    assert_eq!(code, 0, "a bare IPv6 literal, default port: {out}");
    let s = read(&log);
    assert!(s.contains("name=four") && s.contains("addr=127.0.0.1:"), "the IPv4 player shown as IPv4: {s}");
    assert!(!s.contains("::ffff:"), "never as an IPv4-mapped address: {s}");
    assert!(s.contains("name=six") && s.contains("addr=[::1]:"), "{s}");
    finish(srv);
}

#[test]
fn a_server_on_a_random_port_is_listed_across_a_lan_and_plays_over_ipv4_and_a_ula_ipv6_address() {
    let Some(ns) = Namespaces::new("lan", 2) else { return };
    ns.link(0, 1).expect("a veth pair between the two");
    let dir = tempfile::tempdir().unwrap();
    let (da, db) = (dir.path().join("a"), dir.path().join("b"));
    std::fs::create_dir_all(&db).unwrap();
    // A port no scan asks: only the server's announcements can make it known.
    let port = 31000 + (std::process::id() % 2000) as u16;
    let (srv, log) = server(&ns, 0, &da, &format!("[::]:{port}"), "30");
    let out = ns.cmd(1, &db).args(["servers", "--lan", "--wait-ms", "2500"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains(&format!("10.77.0.1:{port}")), "listed from the other machine: {text}");
    // The status query over IPv6, and a player over the ULA address and over IPv4.
    let out = ns.cmd(1, &db).args(["servers", "--query", &format!("[fd77::1]:{port}")]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let (code, out) = bot(&ns, 1, &db, &format!("[fd77::1]:{port}"), "ula", "2");
    assert_eq!(code, 0, "{out}");
    let (code, out) = bot(&ns, 1, &db, &format!("10.77.0.1:{port}"), "vfour", "2");
    assert_eq!(code, 0, "{out}");
    let s = read(&log);
    assert!(s.contains("addr=[fd77::2]:") && s.contains("addr=10.77.0.2:"), "{s}");
    finish(srv);
}
