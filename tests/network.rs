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
//! - A home behind a masquerading router running miniupnpd: a friend outside reaches the
//!   host only through the mapping UPnP, then NAT-PMP, made; it is gone when the host exits.
//! - A host and a friend each behind their own masquerading router: the friend joins by
//!   code through a relay on "the internet"; a relay that changes datagrams is caught.

mod common;
use common::{read, wait_for};

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

/// A dedicated server in namespace `i` on `bind`, logging to `data/server.log`.
fn server(ns: &Namespaces, i: usize, data: &Path, bind: &str, secs: &str) -> (Child, PathBuf) {
    server_with(ns, i, data, "server.log", &["--bind", bind, "--exit-after", secs])
}

/// A dedicated server in namespace `i` with `args`, logging to `data/LOG`; returned once
/// it listens.
fn server_with(ns: &Namespaces, i: usize, data: &Path, log: &str, args: &[&str]) -> (Child, PathBuf) {
    std::fs::create_dir_all(data).unwrap();
    let log = data.join(log);
    let c = ns
        .cmd(i, data)
        .arg("--dedicated")
        .args(args)
        .env("HAILFIRE_LOG_FILE", &log)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for(&log, &|s| s.contains("dedicated server listening"), 20);
    (c, log)
}

/// A bot in namespace `i` that stays in the hub for `secs`: (exit status, its output
/// and its log).
fn bot(ns: &Namespaces, i: usize, data: &Path, join: &str, name: &str, secs: &str) -> (i32, String) {
    let out = ns
        .cmd(i, data)
        .args(["bot", "--join", join, "--plan", "hub", "--seconds", secs, "--name", name])
        .arg("--key")
        .arg(data.join(format!("{name}.key")))
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.code().unwrap_or(-1), text)
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

/// `hailfire servers --lan` in namespace `i`: what it listed.
fn lan_list(ns: &Namespaces, i: usize, data: &Path) -> String {
    let out = ns.cmd(i, data).args(["servers", "--lan", "--wait-ms", "2500"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    text
}

/// The IPv6 address (`[...]:port`) a listing shows for the server on `port`.
fn listed_at(text: &str, port: u16, what: &str) -> String {
    let tail = format!("]:{port}");
    text.split_whitespace()
        .find(|w| w.starts_with('[') && w.ends_with(&tail))
        .unwrap_or_else(|| panic!("{what}: {text}"))
        .to_string()
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
    let text = lan_list(&ns, 1, &db);
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

/// Networks with no IPv4 at all: a server on two of them is found by its announcements
/// (to `ff02::1` on each link) from both, asked for its status and joined, all over IPv6.
#[test]
fn on_ipv6_only_lans_a_server_is_listed_on_each_queried_and_joined() {
    let Some(ns) = Namespaces::new("six", 3) else { return };
    ns.link(0, 1).expect("a veth pair between the first two");
    for (i, a) in [(0usize, "10.77.0.1/24"), (1, "10.77.0.2/24")] {
        let dev = format!("v{}", &ns.name(i)[2..]);
        sh(&format!("ip -n {} addr del {a} dev {dev}", ns.name(i))).expect("IPv4 removed");
    }
    // A second link from the server's machine, to the third.
    let (n0, n2) = (ns.name(0), ns.name(2));
    sh(&format!(
        "ip link add s{a} netns {n0} type veth peer name s{b} netns {n2} && \
         ip -n {n0} addr add fd78::1/64 dev s{a} nodad && ip -n {n2} addr add fd78::2/64 dev s{b} nodad && \
         ip -n {n0} link set s{a} up && ip -n {n2} link set s{b} up",
        a = &n0[2..],
        b = &n2[2..]
    ))
    .expect("a second link");
    let dc = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (da, db) = (dir.path().join("a"), dir.path().join("b"));
    std::fs::create_dir_all(&db).unwrap();
    let port = 33000 + (std::process::id() % 2000) as u16;
    let (srv, log) = server(&ns, 0, &da, &format!("[::]:{port}"), "15");
    let text = lan_list(&ns, 1, &db);
    assert!(!text.contains("10.77."), "{text}");
    // The address it was listed at is one a player can join.
    let at = listed_at(&text, port, "listed over IPv6");
    let (code, out) = bot(&ns, 1, &db, &at, "sixonly", "2");
    assert_eq!(code, 0, "joined at {at}: {out}");
    assert!(read(&log).contains("name=sixonly"));
    // Heard on the other link too.
    let at = listed_at(&lan_list(&ns, 2, dc.path()), port, "listed on the second link");
    let (code, out) = bot(&ns, 2, dc.path(), &at, "second", "2");
    assert_eq!(code, 0, "joined at {at}: {out}");
    // And at the server's link-local address, with the friend's interface (once that
    // address has passed its duplicate check).
    let (a, b) = (format!("s{}", &n0[2..]), format!("s{}", &n2[2..]));
    let mut ll = String::new();
    for _ in 0..50 {
        let shown = sh(&format!("ip -n {n0} -6 -o addr show dev {a} scope link")).unwrap_or_default();
        if !shown.contains("tentative") {
            ll = shown
                .split_whitespace()
                .skip_while(|w| *w != "inet6")
                .nth(1)
                .unwrap_or("")
                .split('/')
                .next()
                .unwrap()
                .to_string();
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(ll.starts_with("fe80"), "the server's link-local address: {ll:?}");
    let index = sh(&format!("ip -n {n2} -o link show {b}")).unwrap();
    let index = index.split(':').next().unwrap().trim().to_string();
    let at = format!("[{ll}%{index}]:{port}");
    let (code, out) = bot(&ns, 2, dc.path(), &at, "linklocal", "2");
    assert_eq!(code, 0, "joined at {at}: {out}");
    finish(srv);
}

/// A home network behind a router that masquerades (nftables) and runs miniupnpd, and a
/// friend on the router's outside. The router's outside address, 11.77.0.1, is a public
/// one as miniupnpd requires, but it lives only in these namespaces: nothing here has a
/// route off this machine.
struct Home {
    ns: Namespaces,
    dir: tempfile::TempDir,
    upnpd: Option<Child>,
}

const HOME: usize = 0;
const ROUTER: usize = 1;
const FRIEND: usize = 2;

impl Home {
    fn new() -> Option<Home> {
        if Command::new("miniupnpd").arg("--version").output().is_err() || sh("command -v nft").is_err() {
            eprintln!("SKIPPED: miniupnpd or nft is not installed (apt install miniupnpd-nftables nftables)");
            return None;
        }
        let ns = Namespaces::new("nat", 3)?;
        let (h, r, f) = (ns.name(HOME).to_string(), ns.name(ROUTER).to_string(), ns.name(FRIEND).to_string());
        let (vh, vrl, vrw, vf) =
            (format!("v{}", &h[2..]), format!("l{}", &r[2..]), format!("w{}", &r[2..]), format!("v{}", &f[2..]));
        sh(&format!(
            "ip link add {vh} netns {h} type veth peer name {vrl} netns {r} && \
             ip link add {vf} netns {f} type veth peer name {vrw} netns {r} && \
             ip -n {h} addr add 10.88.1.2/24 dev {vh} && ip -n {h} link set {vh} up && \
             ip -n {h} route add default via 10.88.1.1 && \
             ip -n {r} addr add 10.88.1.1/24 dev {vrl} && ip -n {r} link set {vrl} up && \
             ip -n {r} addr add 11.77.0.1/24 dev {vrw} && ip -n {r} link set {vrw} up && \
             ip -n {f} addr add 11.77.0.2/24 dev {vf} && ip -n {f} link set {vf} up && \
             ip netns exec {r} sysctl -qw net.ipv4.ip_forward=1"
        ))
        .expect("the home, router and friend namespaces");
        // The router: forwards the home network out and back, masquerading; what comes in
        // is dropped unless miniupnpd's chains say otherwise.
        let rules = [
            "table inet filter {".to_string(),
            "chain forward {".into(),
            "type filter hook forward priority 0; policy drop;".into(),
            "ct state established,related accept".into(),
            format!("iifname \"{vrl}\" oifname \"{vrw}\" accept"),
            "jump miniupnpd".into(),
            "}".into(),
            "chain miniupnpd {".into(),
            "}".into(),
            "chain prerouting {".into(),
            "type nat hook prerouting priority -100; policy accept;".into(),
            "jump prerouting_miniupnpd".into(),
            "}".into(),
            "chain prerouting_miniupnpd {".into(),
            "}".into(),
            "chain postrouting {".into(),
            "type nat hook postrouting priority 100; policy accept;".into(),
            "jump postrouting_miniupnpd".into(),
            format!("oifname \"{vrw}\" ip saddr 10.88.1.0/24 masquerade"),
            "}".into(),
            "chain postrouting_miniupnpd {".into(),
            "}".into(),
            "}".into(),
        ]
        .join("\n");
        let dir = tempfile::tempdir().unwrap();
        let rules_file = dir.path().join("router.nft");
        std::fs::write(&rules_file, rules).unwrap();
        sh(&format!("ip netns exec {r} nft -f {}", rules_file.display())).expect("the router's rules");
        Some(Home { ns, dir, upnpd: None })
    }

    /// Starts miniupnpd on the router with UPnP, NAT-PMP or both.
    fn start_upnpd(&mut self, upnp: bool, natpmp: bool) {
        self.stop_upnpd();
        let r = self.ns.name(ROUTER);
        let conf = self.dir.path().join("miniupnpd.conf");
        std::fs::write(
            &conf,
            format!(
                "ext_ifname=w{}\nlistening_ip=l{}\nhttp_port=0\nenable_upnp={}\nenable_natpmp={}\nsecure_mode=yes\n\
                 system_uptime=yes\nuuid=3e4a1c2b-7d5f-4a6e-9b8c-1d2e3f4a5b6c\n\
                 allow 1024-65535 10.88.1.0/24 1024-65535\ndeny 0-65535 0.0.0.0/0 0-65535\n",
                &r[2..],
                &r[2..],
                if upnp { "yes" } else { "no" },
                if natpmp { "yes" } else { "no" }
            ),
        )
        .unwrap();
        let log = self.dir.path().join("miniupnpd.log");
        let child = Command::new("ip")
            .args(["netns", "exec", r, "miniupnpd", "-d", "-f"])
            .arg(&conf)
            .arg("-P")
            .arg(self.dir.path().join("miniupnpd.pid"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        self.upnpd = Some(child);
        wait_for(&log, &|s| s.contains("HTTP listening") || s.contains("Listening for NAT-PMP"), 10);
    }

    fn stop_upnpd(&mut self) {
        if let Some(mut c) = self.upnpd.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// The port forwards miniupnpd has put in the router's rules now.
    fn forwards(&self) -> String {
        sh(&format!("ip netns exec {} nft list chain inet filter prerouting_miniupnpd", self.ns.name(ROUTER)))
            .unwrap_or_default()
    }
}

impl Drop for Home {
    fn drop(&mut self) {
        self.stop_upnpd();
    }
}

#[test]
fn a_friend_outside_reaches_a_home_server_only_through_the_mapping_upnp_or_nat_pmp_made() {
    let Some(mut home) = Home::new() else { return };
    let data = home.dir.path().join("host");
    let friend = home.dir.path().join("friend");
    std::fs::create_dir_all(&friend).unwrap();
    let port = 24680;
    let outside = format!("11.77.0.1:{port}");

    // No mapping: the router keeps the friend out.
    let (srv, _) = server(&home.ns, HOME, &data, &format!("[::]:{port}"), "8");
    let (code, out) = bot(&home.ns, FRIEND, &friend, &outside, "friend", "2");
    assert_ne!(code, 0, "nothing is forwarded yet: {out}");
    finish(srv);

    for (upnp, natpmp, via) in [(true, false, "UPnP"), (false, true, "NAT-PMP")] {
        home.start_upnpd(upnp, natpmp);
        // The same host (its key, which the friend pinned) each time.
        let bind = format!("[::]:{port}");
        let (srv, log) = server_with(
            &home.ns,
            HOME,
            &data,
            &format!("server-{via}.log"),
            &["--bind", &bind, "--upnp", "--exit-after", "20"],
        );
        let s = wait_for(&log, &|s| s.contains("friends on the internet join at") || s.contains("no port mapping"), 20);
        let by = s.contains(&format!("via=\"{via}\"")) || s.contains(&format!("via={via}"));
        assert!(s.contains(&format!("friends on the internet join at {outside}")) && by, "mapped by {via}: {s}");
        assert!(home.forwards().contains(&format!("{port}")), "the router forwards it: {}", home.forwards());
        let (code, out) = bot(&home.ns, FRIEND, &friend, &outside, "friend", "3");
        assert_eq!(code, 0, "the friend joins through the {via} mapping: {out}");
        finish(srv);
        let s = read(&log);
        assert!(s.contains(&format!("removed the {via} port mapping")), "{s}");
        assert!(!home.forwards().contains(&format!("{port}")), "gone when the host exits: {}", home.forwards());
    }
}

/// Host and play, in a window, at home behind the router that runs miniupnpd: the game
/// asks the router by itself, says where friends join (in its terminal, and on screen),
/// a friend outside joins there and plays, and the forward is gone once the game quits.
#[test]
#[cfg(unix)]
fn host_and_play_at_home_opens_the_router_and_says_where_friends_join() {
    let Some(mut home) = Home::new() else { return };
    if Command::new("Xvfb").arg("-help").output().is_err() {
        eprintln!("SKIPPED: Xvfb is not installed (apt install xvfb)");
        return;
    }
    home.start_upnpd(true, false);
    let x = common::xvfb();
    let cfg = home.dir.path().join("game");
    let friend = home.dir.path().join("friend");
    for d in [&cfg, &friend, &cfg.join("xdg")] {
        std::fs::create_dir_all(d).unwrap();
    }
    // A relay on the internet, which the host also registers with (Settings > Network).
    let relay_log = friend.join("relay.log");
    let mut relay = home
        .ns
        .cmd(FRIEND, &friend)
        .args(["relay", "--bind", "11.77.0.2:24700", "--exit-after", "40"])
        .env("HAILFIRE_LOG_FILE", &relay_log)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for(&relay_log, &|s| s.contains("relay listening"), 10);
    // The settings a player has after choosing a name and a relay, and keeping their
    // address from friends who join by code: the rest as it comes.
    std::fs::write(cfg.join("settings.toml"), "name = \"Hosty\"\nrelay = \"11.77.0.2\"\nrelay_hide_address = true\n")
        .unwrap();
    let said = cfg.join("stdout.txt");
    let mut game = home
        .ns
        .cmd(HOME, &cfg)
        .args(["--host", "--quit-after", "25"])
        .env("DISPLAY", &x.display)
        .env("XDG_RUNTIME_DIR", cfg.join("xdg"))
        .env("HAILFIRE_LOG_FILE", cfg.join("game.log"))
        .env_remove("WAYLAND_DISPLAY")
        .stdout(std::fs::File::create(&said).unwrap())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let both = |l: &str| l.contains("over the internet at 11.77.0.1:24680") && l.contains("through the relay: ");
    let s = wait_for(&said, &|s| s.lines().any(both), 60);
    let line = s.lines().find(|l| both(l)).unwrap();
    assert!(
        line.contains("(opened by UPnP)") && line.contains("friends on your network join at 10.88.1.2:24680"),
        "{line}"
    );
    let join_code = line.split("through the relay: ").nth(1).unwrap()[..6].to_string();
    assert!(line.contains(&format!("{join_code}@11.77.0.2 ")), "the relay as it was typed: {line}");
    assert!(home.forwards().contains("24680"), "the router forwards it: {}", home.forwards());
    let (code, out) = bot(&home.ns, FRIEND, &friend, "11.77.0.1:24680", "friend", "3");
    assert_eq!(code, 0, "the friend joins the hosted game through the mapping: {out}");
    let (rc, out) = bot(&home.ns, FRIEND, &friend, &format!("{join_code}@11.77.0.2"), "byrelay", "2");
    assert_eq!(rc, 0, "and by the relay's code: {out}");
    assert!(out.contains("route: through the relay"), "not introduced to a host that keeps its address: {out}");
    // What the host sees (kept for a look: HAILFIRE_SHOT_DIR).
    let shot = cfg.join("hosting.png");
    let ok = Command::new("import").args(["-display", &x.display, "-window", "root"]).arg(&shot).status();
    if let (Ok(st), Ok(dir)) = (ok, std::env::var("HAILFIRE_SHOT_DIR")) {
        if st.success() {
            let _ = std::fs::copy(&shot, Path::new(&dir).join("host-and-play-at-home.png"));
        }
    }
    let start = Instant::now();
    while game.try_wait().unwrap().is_none() {
        assert!(start.elapsed() < Duration::from_secs(60), "the game did not quit");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(!home.forwards().contains("24680"), "gone when the game quits: {}", home.forwards());
    let _ = relay.kill();
    let _ = relay.wait();
}

/// The rules of a home router that lets its network out (masquerading) and nothing in but
/// answers.
fn masquerading_router(lan: &str, wan: &str, net: &str) -> String {
    [
        "table inet home {".to_string(),
        "chain forward {".into(),
        "type filter hook forward priority 0; policy drop;".into(),
        "ct state established,related accept".into(),
        format!("iifname \"{lan}\" oifname \"{wan}\" accept"),
        "}".into(),
        "chain postrouting {".into(),
        "type nat hook postrouting priority 100; policy accept;".into(),
        format!("oifname \"{wan}\" ip saddr {net} masquerade"),
        "}".into(),
        "}".into(),
    ]
    .join("\n")
}

/// A host and a friend, each behind a masquerading router of their own, and between them
/// "the internet" (a namespace) where a relay runs: the friend joins the host by code
/// through the relay and plays; with a relay that changes one datagram in five, the
/// host's session refuses what was changed and says so.
#[test]
fn a_friend_joins_a_host_behind_its_own_nat_by_code_through_a_relay_that_can_change_nothing() {
    let (h, ra, net, rb, f) = (0usize, 1usize, 2usize, 3usize, 4usize);
    let Some(ns) = Namespaces::new("rly", 5) else { return };
    let n = |i: usize| ns.name(i).to_string();
    let t = |p: &str, i: usize| format!("{p}{}", &ns.name(i)[2..]);
    let dir = tempfile::tempdir().unwrap();
    sh(&format!(
        "ip link add {vh} netns {h} type veth peer name {la} netns {ra} && \
         ip link add {wa} netns {ra} type veth peer name {ia} netns {net} && \
         ip link add {ib} netns {net} type veth peer name {wb} netns {rb} && \
         ip link add {lb} netns {rb} type veth peer name {vf} netns {f} && \
         ip -n {h} addr add 10.1.0.2/24 dev {vh} && ip -n {h} link set {vh} up && ip -n {h} route add default via 10.1.0.1 && \
         ip -n {ra} addr add 10.1.0.1/24 dev {la} && ip -n {ra} link set {la} up && \
         ip -n {ra} addr add 11.77.1.2/24 dev {wa} && ip -n {ra} link set {wa} up && ip -n {ra} route add default via 11.77.1.1 && \
         ip -n {net} addr add 11.77.1.1/24 dev {ia} && ip -n {net} link set {ia} up && \
         ip -n {net} addr add 11.77.2.1/24 dev {ib} && ip -n {net} link set {ib} up && \
         ip -n {rb} addr add 11.77.2.2/24 dev {wb} && ip -n {rb} link set {wb} up && ip -n {rb} route add default via 11.77.2.1 && \
         ip -n {rb} addr add 10.2.0.1/24 dev {lb} && ip -n {rb} link set {lb} up && \
         ip -n {f} addr add 10.2.0.2/24 dev {vf} && ip -n {f} link set {vf} up && ip -n {f} route add default via 10.2.0.1 && \
         ip netns exec {ra} sysctl -qw net.ipv4.ip_forward=1 && ip netns exec {rb} sysctl -qw net.ipv4.ip_forward=1 && \
         ip netns exec {net} sysctl -qw net.ipv4.ip_forward=1",
        h = n(h), ra = n(ra), net = n(net), rb = n(rb), f = n(f),
        vh = t("v", h), la = t("l", ra), wa = t("w", ra), ia = t("a", net), ib = t("b", net), wb = t("w", rb), lb = t("l", rb), vf = t("v", f),
    ))
    .expect("two homes, two routers and the internet between");
    for (r, lan, wan, net) in [(ra, t("l", ra), t("w", ra), "10.1.0.0/24"), (rb, t("l", rb), t("w", rb), "10.2.0.0/24")]
    {
        let file = dir.path().join(format!("router{r}.nft"));
        std::fs::write(&file, masquerading_router(&lan, &wan, net)).unwrap();
        sh(&format!("ip netns exec {} nft -f {}", n(r), file.display())).expect("a router's rules");
    }
    let (hd, fd, rd) = (dir.path().join("host"), dir.path().join("friend"), dir.path().join("relay"));
    for d in [&hd, &fd, &rd] {
        std::fs::create_dir_all(d).unwrap();
    }
    let relay = |tamper: &str| {
        let log = rd.join(format!("relay{tamper}.log"));
        let c = ns
            .cmd(net, &rd)
            .args(["relay", "--bind", "[::]:24700", "--exit-after", "40", "--tamper-every", tamper])
            .env("HAILFIRE_LOG_FILE", &log)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        wait_for(&log, &|s| s.contains("relay listening"), 10);
        c
    };

    // The friend cannot reach the host directly (its router lets nothing in).
    let mut r = relay("0");
    let (srv, _) = server(&ns, h, &hd, "[::]:24680", "10");
    let (code, _) = bot(&ns, f, &fd, "11.77.1.2:24680", "direct", "2");
    assert_ne!(code, 0, "nothing comes in through the host's router");
    finish(srv);

    // Through the relay, by code.
    let (srv, log_r) = server_with(
        &ns,
        h,
        &hd,
        "server-relay.log",
        &["--bind", "[::]:24680", "--relay", "11.77.1.1", "--exit-after", "40"],
    );
    let s = wait_for(&log_r, &|s| s.contains("friends join through the relay with"), 20);
    let code = s.split("friends join through the relay with ").nth(1).unwrap()[..6].to_string();
    let join = format!("{code}@11.77.2.1");
    // Both routers keep a socket's port towards any address (as most home routers do):
    // introduced by the relay, host and friend punch through and play straight, the
    // host seeing the friend at its router's outside address.
    let (rc, out) = bot(&ns, f, &fd, &join, "punched", "3");
    assert_eq!(rc, 0, "the friend plays, introduced by the relay: {out}");
    let s = read(&log_r);
    let joined = s.lines().find(|l| l.contains("name=punched")).unwrap_or_else(|| panic!("{s}"));
    assert!(joined.contains("addr=11.77.2.2:"), "the friend came straight, from its router: {joined}\nbot: {out}");
    assert!(out.contains("route: straight to the host"), "and says so: {out}");
    let (rc, out) = bot(&ns, f, &fd, "ZZZZZZ@11.77.2.1", "nocode", "2");
    assert!(rc != 0 && out.contains("has no game with the code ZZZZZZ"), "{out}");

    // The friend's router now gives each destination a port of its own (a "symmetric"
    // NAT, which no punching gets through): the friend plays through the relay.
    let file = dir.path().join("symmetric.nft");
    std::fs::write(
        &file,
        masquerading_router(&t("l", rb), &t("w", rb), "10.2.0.0/24").replace("masquerade", "masquerade fully-random"),
    )
    .unwrap();
    sh(&format!("ip netns exec {} sh -c 'nft flush ruleset && nft -f {}'", n(rb), file.display()))
        .expect("a symmetric NAT");
    let (rc, out) = bot(&ns, f, &fd, &join, "relayed", "3");
    assert_eq!(rc, 0, "the friend plays through the relay: {out}");
    let s = read(&log_r);
    let joined = s.lines().find(|l| l.contains("name=relayed")).unwrap_or_else(|| panic!("{s}"));
    assert!(joined.contains("addr=relay session"), "punching failed, the relay carried the game: {joined}");
    assert!(joined.contains(" (at 11.77.2.2:"), "the host knows where the relayed friend is: {joined}");
    assert!(out.contains("route: through the relay"), "and says so: {out}");

    // A relay that changes one datagram in five: what it changed does not open, and the
    // host's own count says so; what it did not change still makes a game.
    let _ = r.kill();
    let _ = r.wait();
    r = relay("5");
    // The host registers again within its keepalive and keeps its code.
    let again = |s: &str| s.matches("friends join through the relay with").count() >= 1;
    wait_for(&log_r, &again, 15);
    std::thread::sleep(Duration::from_secs(11));
    let s = read(&log_r);
    let again = s.rsplit("friends join through the relay with ").next().unwrap()[..6].to_string();
    assert_eq!(again, code, "the host keeps its code across the relay's restart");
    let (_, out) = bot(&ns, f, &fd, &format!("{code}@11.77.2.1"), "tampered", "4");
    let status = ns.cmd(h, &hd).args(["console", "--run", "status"]).output().unwrap();
    let status = String::from_utf8_lossy(&status.stdout).into_owned();
    assert!(status.contains("did not open"), "the host refused what the relay changed: {status}\nbot: {out}");
    let _ = r.kill();
    let _ = r.wait();
    finish(srv);
}
