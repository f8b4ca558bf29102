//! Smoke test with real processes: `hailfire --dedicated` on 127.0.0.1 and three
//! `hailfire bot` processes over real ENet. One bot is SIGKILLed mid-dungeon and the server
//! channels its body out instead of dropping it; another leaves through the menu's
//! disconnect path; the third plays on; the server stops cleanly on SIGTERM.

mod common;
use common::{free_port, read, wait_for};

use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn exe() -> &'static str {
    env!("CARGO_BIN_EXE_hailfire")
}

/// Seconds since midnight of a tracing line's timestamp ("2026-11-29T23:10:00.003463Z").
fn stamp(line: &str) -> f64 {
    let t = line.split('T').nth(1).and_then(|r| r.split('Z').next()).unwrap_or("0:0:0");
    let parts: Vec<f64> = t.split(':').map(|x| x.parse().unwrap_or(0.0)).collect();
    parts[0] * 3600.0 + parts[1] * 60.0 + parts[2]
}

fn line_with<'a>(log: &'a str, needles: &[&str]) -> Option<&'a str> {
    log.lines().find(|l| needles.iter().all(|n| l.contains(n)))
}

fn player_id(log: &str, name: &str) -> Option<String> {
    let l = line_with(log, &["player joined", &format!("name={name}")])?;
    l.split("player=").nth(1).map(|r| r.split(' ').next().unwrap_or("").to_string())
}

/// The game's binary with its data directory (server key, known servers) in `data`, so
/// that tests running at once never share keys or pins.
fn hf(data: &Path) -> Command {
    let mut c = Command::new(exe());
    c.env("HAILFIRE_DATA_DIR", data).env("XDG_CACHE_HOME", data.join("cache")).env("HAILFIRE_CONFIG_DIR", data);
    c
}

/// A server process killed when its test ends, even by a failed assertion (it would
/// otherwise keep running, and holding its port, after the test binary exits).
struct Server(Child);

impl std::ops::Deref for Server {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for Server {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// A dedicated server on 127.0.0.1:`port` logging to `log`, with `extra` arguments.
fn dedicated(data: &Path, port: u16, log: &Path, extra: &[&std::ffi::OsStr]) -> Server {
    let c = hf(data)
        .args(["--dedicated", "--bind", &format!("127.0.0.1:{port}")])
        .args(extra)
        .env("HAILFIRE_LOG_FILE", log)
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let c = Server(c);
    wait_for(log, &|s| s.contains("dedicated server listening"), 20);
    c
}

fn bot(data: &Path, port: u16, args: &[&str]) -> Child {
    hf(data)
        .args(["bot", "--join", &format!("127.0.0.1:{port}"), "--plan", "dungeon"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

fn finish(mut c: Child, secs: u64) -> (i32, String) {
    let start = Instant::now();
    loop {
        if let Some(st) = c.try_wait().unwrap() {
            let mut out = String::new();
            c.stdout.take().unwrap().read_to_string(&mut out).unwrap();
            return (st.code().unwrap_or(-1), out);
        }
        if start.elapsed() > Duration::from_secs(secs) {
            let _ = c.kill();
            panic!("process did not finish in {secs} s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn dedicated_server_and_three_bots_sigkill_and_disconnect_both_channel_out() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("server.log");
    let port = free_port();
    let d = dir.path();
    let mut server = dedicated(d, port, &log, &["--max-players".as_ref(), "8".as_ref()]);

    let stayer = bot(d, port, &["--name", "stayer", "--seconds", "24"]);
    let victim = bot(d, port, &["--name", "victim", "--seconds", "60"]);
    let leaver = bot(d, port, &["--name", "leaver", "--seconds", "18", "--leave-after", "10"]);

    // Wait until the victim is in the dungeon, then kill it without warning.
    let s = wait_for(&log, &|s| player_id(s, "victim").is_some(), 20);
    let vid = player_id(&s, "victim").unwrap();
    wait_for(&log, &|s| line_with(s, &["transfer", &format!("player={vid} "), "Portal"]).is_some(), 20);
    std::thread::sleep(Duration::from_secs(2));
    let mut victim = victim;
    victim.kill().unwrap(); // SIGKILL
    let _ = victim.wait();

    let (leaver_code, leaver_out) = finish(leaver, 40);
    let (stayer_code, stayer_out) = finish(stayer, 60);
    assert_eq!(leaver_code, 0, "{leaver_out}");
    assert!(leaver_out.contains("left via disconnect"), "{leaver_out}");
    assert_eq!(stayer_code, 0, "the server kept serving the rest: {stayer_out}");
    assert!(stayer_out.contains("fought in the dungeon"), "{stayer_out}");

    let s = wait_for(&log, &|s| line_with(s, &["linkdead body resolved", &format!("player={vid} ")]).is_some(), 20);
    // The killed bot: the connection drop made its body linkdead; it was removed only after
    // channelling (1 s), not on the spot.
    let closed =
        line_with(&s, &["connection closed", "name=victim"]).expect("the server saw the victim's connection close");
    assert!(closed.contains("linkdead"), "{closed}");
    let resolved = line_with(&s, &["linkdead body resolved", &format!("player={vid} ")]).unwrap();
    let dt = stamp(resolved) - stamp(closed);
    assert!(dt >= 0.9, "the body channelled out ({dt:.2} s), it was not dropped instantly");
    // The menu's disconnect goes down the very same path.
    let lid = player_id(&s, "leaver").unwrap();
    let lclosed = line_with(&s, &["connection closed", "name=leaver"]).expect("leaver's close seen");
    let lres = line_with(&s, &["linkdead body resolved", &format!("player={lid} ")]).expect("leaver's body resolved");
    assert!(stamp(lres) - stamp(lclosed) >= 0.9, "{lclosed}\n{lres}");
    assert!(!s.contains("panicked"));

    // SIGTERM: a clean stop.
    let st = Command::new("kill").args(["-TERM", &server.id().to_string()]).status().unwrap();
    assert!(st.success());
    let start = Instant::now();
    let code = loop {
        if let Some(c) = server.try_wait().unwrap() {
            break c.code();
        }
        assert!(start.elapsed() < Duration::from_secs(10), "server did not stop on SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(code, Some(0));
    assert!(read(&log).contains("server stopped cleanly"));
}

/// The game loop end to end: two dodging bots play a run of the Hollow Grove (the first real
/// dungeon, which two dodging bots clear in every run of the balance bench) on a real
/// dedicated server; each prints the run's outcome, time, score and counts, and the
/// server keeps the record in records.toml beside its settings.
#[test]
fn two_dodging_bots_play_a_run_each_prints_the_summary_and_the_server_keeps_the_record() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("server.log");
    let port = free_port();
    let d = dir.path();
    let mut server = dedicated(d, port, &log, &[]);
    let bots = hf(d)
        .args(["bot", "--join", &format!("127.0.0.1:{port}"), "--plan", "dodge", "--dungeon", "hollow_grove"])
        .args(["--count", "2", "--seconds", "240"])
        .arg("--record")
        .arg(d.join("run.hfr"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (code, out) = finish(bots, 260);
    let _ = server.kill();
    let _ = server.wait();
    assert_eq!(code, 0, "{out}");
    // Each bot recorded its run against the real server; each replays bit for bit.
    for k in 1..=2 {
        let file = d.join(format!("run-{k}.hfr"));
        assert!(out.contains(&format!("s into {} (", file.display())), "{out}");
        let check = hf(d).arg("replay").arg(&file).arg("--check").output().unwrap();
        let said = String::from_utf8_lossy(&check.stdout);
        assert!(check.status.success(), "{said}{}", String::from_utf8_lossy(&check.stderr));
        assert!(said.contains("matches the recording bit for bit at all"), "{said}");
    }
    // And one frame of it, offscreen, as the replay window shows it.
    #[cfg(feature = "desktop")]
    {
        let png = d.join("f.png");
        let shot = hf(d)
            .args(["replay"])
            .arg(d.join("run-1.hfr"))
            .args(["--at", "30", "--width", "640", "--height", "360", "--out"])
            .arg(&png)
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&shot.stdout);
        assert!(shot.status.success(), "{said}{}", String::from_utf8_lossy(&shot.stderr));
        assert!(said.contains("hollow_grove"), "the frame at 30 s is in the Grove: {said}");
        assert!(std::fs::metadata(&png).map(|m| m.len()).unwrap_or(0) > 10_000, "a frame was written");
    }
    for name in ["bot-1", "bot-2"] {
        let line = out
            .lines()
            .find(|l| l.starts_with(&format!("bot {name}: run ")))
            .unwrap_or_else(|| panic!("{name} printed its run: {out}"));
        assert!(line.contains("run cleared"), "the dodging bots clear the Grove: {line}");
        assert!(line.contains("team score") && line.contains("grazes") && line.contains("downs"), "{line}");
    }
    let server_log = read(&log);
    assert!(server_log.contains("run ended"), "{server_log}");
    let records = read(&d.join("records.toml"));
    assert!(records.contains("[hollow_grove]") && records.contains("bot-1"), "{records}");
}

#[test]
fn a_headless_bot_joining_nothing_exits_non_zero_within_8_seconds() {
    let port = free_port();
    let start = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let out = hf(dir.path()).args(["bot", "--join", &format!("127.0.0.1:{port}"), "--seconds", "20"]).output().unwrap();
    let took = start.elapsed();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_ne!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("no answer from the server"), "{text}");
    assert!(took < Duration::from_secs(10), "took {took:?}");
}

#[test]
fn garbage_aimed_at_the_udp_port_does_not_stop_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("server.log");
    let port = free_port();
    let mut server = dedicated(dir.path(), port, &log, &[]);
    // Random datagrams, and datagrams shaped like ENet commands with hostile lengths and
    // fragment fields, from many source ports.
    let mut rng = hailfire::sim::rng::Rng::new(77);
    let target = format!("127.0.0.1:{port}");
    for s in 0..20 {
        let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        for k in 0..1500u32 {
            let n = 1 + (rng.next_u64() % 1400) as usize;
            let mut d: Vec<u8> = (0..n).map(|_| rng.next_u64() as u8).collect();
            if k % 3 == 0 && d.len() > 12 {
                // peer id 0x0fff (none), a plausible command byte, then random fields.
                d[0] = 0x0f;
                d[1] = 0xff;
                d[4] = [1u8, 2, 3, 6, 7, 8, 9, 12][(k as usize / 3 + s) % 8] | 0x80;
            }
            let _ = sock.send_to(&d, &target);
        }
    }
    // The server is still alive and still serves a real client.
    std::thread::sleep(Duration::from_millis(500));
    assert!(server.try_wait().unwrap().is_none(), "the server died:\n{}", read(&log));
    let out = hf(dir.path()).args(["bot", "--join", &target, "--seconds", "4", "--plan", "hub"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}\n{}", read(&log));
    let _ = Command::new("kill").args(["-TERM", &server.id().to_string()]).status();
    let _ = server.wait();
}

#[test]
fn a_dedicated_server_with_extra_mods_serves_a_stock_bot_that_fights_in_the_mods_dungeon() {
    let dir = tempfile::tempdir().unwrap();
    let mods = dir.path().join("server-mods");
    hailfire::content::sample::write_mod(&mods, "vps", 2).unwrap();
    let log = dir.path().join("server.log");
    let cache = dir.path().join("bot-cache");
    let port = free_port();
    // The example mod too: it ships two sprites and an Ogg sound.
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("mods/example_spiral");
    let mut server = dedicated(
        dir.path(),
        port,
        &log,
        &["--mods".as_ref(), mods.as_os_str(), "--mods".as_ref(), example.as_os_str()],
    );
    assert!(read(&log).contains("id=vps"), "the server loaded the extra mod folder:\n{}", read(&log));
    // The bot runs from this checkout, which has no such mod, and a fresh cache.
    let run = || {
        hf(dir.path())
            .args(["bot", "--join", &format!("127.0.0.1:{port}"), "--dungeon", "vps_pit", "--seconds", "12"])
            .env("XDG_CACHE_HOME", &cache)
            .output()
            .unwrap()
    };
    let out = run();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}\n{}", read(&log));
    assert!(text.contains("fought in the dungeon") && text.contains("content downloaded"), "{text}");
    // The stock bot holds the mod's media, decoded by the decoders a player's game runs.
    assert!(text.contains("with 2 sprite(s) and 1 sound(s), decoded"), "{text}");
    // A second run finds the content, media and all, in its cache.
    let out = run();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("content from the cache with 2 sprite(s) and 1 sound(s)"), "{text}");
    let _ = Command::new("kill").args(["-TERM", &server.id().to_string()]).status();
    let _ = server.wait();
    assert!(!read(&log).contains("panicked"));
}

#[test]
fn hostile_mods_on_a_real_server_are_stopped_and_every_instance_keeps_ticking() {
    let dir = tempfile::tempdir().unwrap();
    let mods = dir.path().join("mods");
    let m = mods.join("grim");
    std::fs::create_dir_all(m.join("emitters")).unwrap();
    std::fs::write(
        m.join("mod.toml"),
        "id = \"grim\"\nname = \"Grim\"\nversion = \"1.0.0\"\ngame_version = \">=0.1.0\"\n[dependencies]\nbase = \">=0.1\"\n",
    )
    .unwrap();
    // Each behaves while it is checked (the game dry-runs mods at load, with two players)
    // and attacks once it faces a lone player on the server: containment must not depend
    // on the check having seen the attack.
    let attacks = [
        ("hang", "wait(20)\nwait_until(function() return #players() == 1 end)\nxpcall(function() while true do end end, function() while true do end end)\n"),
        (
            "fan",
            "wait(20)\nwait_until(function() return #players() == 1 end)\nlocal function burn(d)\n  if d == 0 then for _ = 1, 40 do end return end\n  for _ = 1, 20 do coroutine.resume(coroutine.create(burn), d - 1) end\nend\nburn(12)\n",
        ),
        ("swarm", "wait(20)\nwait_until(function() return #players() == 1 end)\nfor i = 1, 4000 do task(function() while true do for k = 1, 150000 do end wait(1) end end) end\n"),
        ("flood", "wait(20)\nwait_until(function() return #players() == 1 end)\nwhile true do for i = 1, 40000 do ring{n = 720} end wait(1) end\n"),
        ("rep", "wait(20)\nwait_until(function() return #players() == 1 end)\nlocal s = string.rep('ab', math.maxinteger)\n"),
    ];
    let mut enemies = String::new();
    let mut spawns = Vec::new();
    for (k, (name, lua)) in attacks.iter().enumerate() {
        std::fs::write(m.join(format!("emitters/{name}.lua")), lua).unwrap();
        enemies.push_str(&format!(
            "[{name}]\nname = \"{name}\"\nhp = 100000\nradius = 12.0\nbehaviour = \"stationary\"\nemitters = [\"{name}\"]\n\n"
        ));
        spawns.push(format!("{{ enemy = \"{name}\", x = {}.0, y = 150.0 }}", 100 + k * 150));
    }
    std::fs::write(m.join("enemies.toml"), enemies).unwrap();
    std::fs::write(
        m.join("dungeons.toml"),
        format!(
            "[grim_pit]\nname = \"Grim Pit\"\narena = [900.0, 700.0]\nspawn = [450.0, 600.0]\nboss = \"warden\"\nboss_pos = [450.0, 100.0]\nportal = [700.0, 420.0]\n\n[[grim_pit.waves]]\nspawns = [{}]\n",
            spawns.join(", ")
        ),
    )
    .unwrap();
    let log = dir.path().join("server.log");
    let port = free_port();
    // Two simulation threads: the hostile fight and the bystander's tick side by side.
    let mut server =
        dedicated(dir.path(), port, &log, &["--mods".as_ref(), mods.as_os_str(), "--threads".as_ref(), "2".as_ref()]);
    let cache = dir.path().join("cache");
    let bot_in = |dungeon: &str, name: &str| {
        hf(dir.path())
            .args(["bot", "--join", &format!("127.0.0.1:{port}"), "--dungeon", dungeon, "--seconds", "12"])
            .args(["--name", name])
            .env("XDG_CACHE_HOME", &cache)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };
    let victim = bot_in("grim_pit", "victim");
    let bystander = bot_in("warden_keep", "bystander");
    let (vc, vout) = finish(victim, 60);
    let (bc, bout) = finish(bystander, 60);
    let s = read(&log);
    assert_eq!(vc, 0, "{vout}\n{s}");
    assert_eq!(bc, 0, "{bout}\n{s}");
    assert!(vout.contains("fought in the dungeon") && bout.contains("fought in the dungeon"), "{vout}\n{bout}");
    for (name, _) in attacks {
        assert!(
            s.lines().any(|l| l.contains("script error") && l.contains(&format!("grim/emitters/{name}.lua:"))),
            "no error at a line of {name}.lua in the log:\n{s}"
        );
    }
    // Two, or fewer on a machine with fewer cores (never more threads than cores).
    assert!(s.contains("sim_threads="), "{s}");
    assert!(!s.contains("fell behind"), "a hostile mod stalled the server:\n{s}");
    assert!(!s.contains("panicked"));
    assert!(server.try_wait().unwrap().is_none(), "the server is still running");
    let _ = Command::new("kill").args(["-TERM", &server.id().to_string()]).status();
    assert_eq!(server.wait().unwrap().code(), Some(0));
}

#[test]
fn a_password_protected_dedicated_server_refuses_bots_without_it_and_never_logs_it() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("server.log");
    let port = free_port();
    let mut server = dedicated(dir.path(), port, &log, &["--password".as_ref(), "s3cret-w0rd".as_ref()]);
    let run = |extra: &[&str]| {
        hf(dir.path())
            .args(["bot", "--join", &format!("127.0.0.1:{port}"), "--plan", "hub", "--seconds", "3"])
            .args(extra)
            .output()
            .unwrap()
    };
    let out = run(&[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_ne!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("wrong password") || text.contains("no password"), "{text}");
    let out = run(&["--password", "s3cret-w0rd"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}\n{}", read(&log));
    let s = read(&log);
    assert!(s.contains("refused a join: wrong password"), "{s}");
    assert!(s.contains("fingerprint="), "the server logs its key's fingerprint: {s}");
    assert!(!s.contains("s3cret-w0rd"), "the password was logged:\n{s}");
    let _ = Command::new("kill").args(["-TERM", &server.id().to_string()]).status();
    let _ = server.wait();
}

/// A number in `text` right after `before`.
fn number_after(text: &str, before: &str) -> f64 {
    let at = text.find(before).unwrap_or_else(|| panic!("'{before}' not in: {text}")) + before.len();
    let n: String = text[at..].chars().take_while(|c| c.is_ascii_digit() || *c == '.').collect();
    n.parse().unwrap_or_else(|_| panic!("no number after '{before}' in: {text}"))
}

#[test]
fn a_bot_far_from_the_server_fights_45_seconds_without_rubber_banding() {
    // Real processes, real ENet on loopback, the bot's own link conditioner: 200 ms RTT,
    // 30 ms Gaussian jitter (packets reorder), 10 % loss, 1 % duplicates.
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("server.log");
    let port = free_port();
    let mut server = dedicated(dir.path(), port, &log, &[]);
    let b = bot(dir.path(), port, &["--seconds", "45", "--name", "far", "--link", "200ms,30ms,10%,1%"]);
    let (code, out) = finish(b, 90);
    let _ = server.kill();
    let _ = server.wait();
    eprintln!("{out}");
    assert_eq!(code, 0, "{out}\n{}", read(&log));
    assert!(out.contains("fought in the dungeon"), "{out}");
    let coasted = number_after(&out, "server coasted ");
    let ticks = number_after(&out, " ticks of ");
    assert!(ticks > 40.0 * 60.0, "joined for {ticks} ticks");
    assert!(coasted <= ticks * 0.01, "the server coasted on {coasted} of {ticks} ticks");
    assert_eq!(number_after(&out, ", snaps "), 0.0, "no rubber-banding: {out}");
    assert!(number_after(&out, "px, max ") < 24.0, "{out}");
}

#[test]
fn mods_new_then_mods_check_passes_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let out = hf(dir.path()).args(["mods", "new", "first_mod", "--dir"]).arg(dir.path()).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let m = dir.path().join("first_mod");
    let out = hf(dir.path()).args(["mods", "check"]).arg(&m).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("0 error(s)") && text.contains("first_mod"), "{text}");
    // A second `mods new` with the same id refuses, non-zero, and says why.
    let out = hf(dir.path()).args(["mods", "new", "first_mod", "--dir"]).arg(dir.path()).output().unwrap();
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("already exists"));
    // `mods stubs` writes the editor files into a folder.
    let out = hf(dir.path()).args(["mods", "stubs"]).arg(&m).output().unwrap();
    assert!(out.status.success() && String::from_utf8_lossy(&out.stdout).contains("hailfire.d.lua"));
}

#[test]
fn watch_mods_reloads_a_saved_emitter_for_new_fights_and_leaves_running_ones_alone() {
    let dir = tempfile::tempdir().unwrap();
    let mods = dir.path().join("mods");
    let m = hailfire::content::scaffold::new_mod(&mods, "hot").unwrap();
    // One player per run, no waves: each bot gets its own fight with the boss at once.
    let d = std::fs::read_to_string(m.join("dungeons.toml")).unwrap();
    let d =
        d.split("\n[[hot_arena.waves]]").next().unwrap().replace("boss_delay = 60", "boss_delay = 0\nmax_players = 1");
    std::fs::write(m.join("dungeons.toml"), d).unwrap();
    let rings = m.join("emitters/hot_boss_rings.lua");
    let pattern = std::fs::read_to_string(&rings).unwrap();
    std::fs::write(&rings, format!("every(30, nil, function() log(\"pattern version 1\") end)\n{pattern}")).unwrap();
    let log = dir.path().join("server.log");
    let port = free_port();
    let mut server = dedicated(dir.path(), port, &log, &["--mods".as_ref(), mods.as_os_str(), "--watch-mods".as_ref()]);
    let cache = dir.path().join("cache");
    let bot_in = |name: &str, secs: &str| {
        hf(dir.path())
            .args(["bot", "--join", &format!("127.0.0.1:{port}"), "--dungeon", "hot_arena", "--seconds", secs])
            .args(["--name", name])
            .env("XDG_CACHE_HOME", &cache)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };
    let first = bot_in("first", "22");
    wait_for(&log, &|s| s.contains("pattern version 1"), 20);
    // Save a new version of the pattern while the first fight runs.
    std::fs::write(&rings, format!("every(30, nil, function() log(\"pattern version 2\") end)\n{pattern}")).unwrap();
    let s = wait_for(&log, &|s| s.contains("mods reloaded"), 10);
    let reloaded_at = s.find("mods reloaded").unwrap();
    let second = bot_in("second", "10");
    let (c2, out2) = finish(second, 40);
    let (c1, out1) = finish(first, 40);
    let _ = server.kill();
    let _ = server.wait();
    let s = read(&log);
    assert_eq!((c1, c2), (0, 0), "{out1}\n{out2}\n{s}");
    let after = &s[reloaded_at..];
    assert!(after.contains("pattern version 2"), "the fight that started after the save runs the new pattern:\n{s}");
    assert!(after.contains("pattern version 1"), "the running fight was not disturbed:\n{s}");
    assert!(!s.contains("join again"), "only an emitter changed: nobody was asked to rejoin");
}

#[test]
fn a_refused_bot_is_told_why_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("server.log");
    let port = free_port();
    let mut server = dedicated(dir.path(), port, &log, &["--max-players".as_ref(), "1".as_ref()]);
    let first = hf(dir.path())
        .args(["bot", "--join", &format!("127.0.0.1:{port}"), "--plan", "hub", "--seconds", "30", "--name", "first"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for(&log, &|s| s.contains("player joined"), 15);
    let out = hf(dir.path())
        .args(["bot", "--join", &format!("127.0.0.1:{port}"), "--plan", "hub", "--seconds", "4", "--name", "second"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{text}");
    assert!(text.contains("the server is full (1 players)"), "the reason reached the bot: {text}");
    // A server that stops tells the players still in why.
    let _ = Command::new("kill").args(["-TERM", &server.id().to_string()]).status();
    let _ = server.wait();
    let (code, out) = finish(first, 40);
    assert_ne!(code, 0, "{out}");
    assert!(out.contains("the server is shutting down"), "the first bot was told: {out}");
}

#[test]
fn the_server_writes_its_settings_file_flags_override_it_and_mistakes_are_located() {
    let dir = tempfile::tempdir().unwrap();
    // First run: the file is written with every setting.
    let out = hf(dir.path()).args(["--dedicated", "--print-config"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let file = dir.path().join("server.toml");
    let text = std::fs::read_to_string(&file).unwrap();
    for key in [
        "name",
        "motd",
        "bind",
        "max_players",
        "password",
        "event_every",
        "mods",
        "watch_mods",
        "log_level",
        "admin_password",
        "ban_list",
        "status_every_s",
        "threads",
    ] {
        assert!(text.contains(&format!("\n{key} = ")), "{key} is in the default file:\n{text}");
    }
    // The file's values, overridden by flags.
    std::fs::write(
        &file,
        text.replace("max_players = 16", "max_players = 6").replace("password = \"\"", "password = \"sekrit\""),
    )
    .unwrap();
    let out = hf(dir.path())
        .args(["--dedicated", "--print-config", "--event-every", "1", "--threads", "3"])
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(shown.contains("max_players = 6") && shown.contains("event_every = 1"), "{shown}");
    assert!(shown.contains("threads = 3"), "{shown}");
    assert!(!shown.contains("sekrit") && shown.contains("password = \"(set)\""), "{shown}");
    // A mistyped key: an error at its line, non-zero, nothing started.
    std::fs::write(&file, "name = \"x\"\nmax_playrs = 4\n").unwrap();
    let out = hf(dir.path()).args(["--dedicated", "--exit-after", "1"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("server.toml:2:1") && err.contains("unknown field `max_playrs`"), "{err}");
    // Flags out of range are refused with the range.
    let out = hf(dir.path()).args(["--dedicated", "--max-players", "0"]).output().unwrap();
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("1..=256"));
    // An empty file (a write that failed elsewhere) is not "all defaults": it is an error,
    // and the file is left for the operator.
    std::fs::write(&file, "\n").unwrap();
    let out = hf(dir.path()).args(["--dedicated", "--exit-after", "1"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("server.toml is empty") && err.contains("delete it"), "{err}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "\n");
    std::fs::write(&file, "# every setting at its default\n").unwrap();
    let out = hf(dir.path()).args(["--dedicated", "--bind", "127.0.0.1:70000"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("a port 1..65535"), "{err}");
    assert!(!err.contains("another server"), "{err}");
    // Only a port in use talks about another server.
    let taken = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let bind = taken.local_addr().unwrap().to_string();
    let out = hf(dir.path()).args(["--dedicated", "--bind", &bind, "--exit-after", "2"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("the port is in use (another server"), "{err}");
}

/// A dedicated server whose console is a pipe: what it prints is gathered by a thread.
struct Console {
    child: Server,
    stdin: std::process::ChildStdin,
    out: std::sync::Arc<std::sync::Mutex<String>>,
}

impl Console {
    fn start(data: &Path, port: u16, log: &Path) -> Console {
        Console::start_with(data, port, log, &[])
    }

    fn start_with(data: &Path, port: u16, log: &Path, extra: &[&std::ffi::OsStr]) -> Console {
        let mut child = hf(data)
            .args(["--dedicated", "--bind", &format!("127.0.0.1:{port}")])
            .args(extra)
            .env("HAILFIRE_LOG_FILE", log)
            .env("RUST_LOG", "info")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let out = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let (mut stdout, o) = (child.stdout.take().unwrap(), out.clone());
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stdout.read(&mut buf) {
                if n == 0 {
                    break;
                }
                o.lock().unwrap().push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        let mut child = Server(child);
        wait_for(log, &|s| s.contains("dedicated server listening"), 20);
        Console { stdin: child.stdin.take().unwrap(), child, out }
    }

    /// Types `line` and waits until what the server printed after it satisfies `what`.
    fn type_line(&mut self, line: &str, what: &dyn Fn(&str) -> bool) -> String {
        use std::io::Write;
        let from = self.out.lock().unwrap().len();
        writeln!(self.stdin, "{line}").unwrap();
        let start = Instant::now();
        loop {
            let s = self.out.lock().unwrap()[from..].to_string();
            if what(&s) {
                return s;
            }
            assert!(start.elapsed() < Duration::from_secs(15), "no answer to '{line}'; printed:\n{s}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// A bot that stays in the hub, with a player key of its own per name (`keys/NAME.key`)
/// unless `extra` gives one.
fn hub_bot(data: &Path, port: u16, name: &str, seconds: &str, extra: &[&str]) -> Child {
    let key = data.join("keys").join(format!("{name}.key"));
    let mut c = hf(data);
    c.args(["bot", "--join", &format!("127.0.0.1:{port}"), "--plan", "hub", "--seconds", seconds, "--name", name]);
    if !extra.contains(&"--key") {
        c.arg("--key").arg(&key);
    }
    c.args(extra).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap()
}

#[test]
fn the_console_on_a_pipe_shows_status_says_kicks_and_bans_across_a_restart_and_admins_can_use_it() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("server.log");
    let port = free_port();
    std::fs::write(
        dir.path().join("server.toml"),
        "name = \"Test Den\"\nmotd = \"be kind\"\nadmin_password = \"opensesame\"\n",
    )
    .unwrap();
    let mut console = Console::start(dir.path(), port, &log);
    let alice = hub_bot(dir.path(), port, "alice", "60", &[]);
    let bob = hub_bot(dir.path(), port, "bob", "60", &[]);
    wait_for(&log, &|s| s.matches("player joined").count() >= 2, 20);
    let status = console.type_line("status", &|s| s.contains("instances:") && s.contains("bob"));
    assert!(status.contains("\"Test Den\" up") && status.contains("2 of 16 player(s)"), "{status}");
    assert!(
        status.contains("\"alice\" [") && status.contains("] from 127.0.0.1:") && status.contains("ping"),
        "{status}"
    );
    assert!(status.contains("instance 0 (hub): 2 player(s)"), "{status}");
    assert!(status.contains("ms mean") && status.contains("traffic:"), "{status}");
    console.type_line("say the arena closes soon", &|s| s.contains("said to 2 player(s)"));
    console.type_line("kick alice too loud", &|s| s.contains("kicked alice"));
    let (code, out) = finish(alice, 20);
    assert_ne!(code, 0, "a kicked bot fails: {out}");
    assert!(out.contains("joined \"Test Den\": be kind"), "the name and MOTD reached the player: {out}");
    assert!(out.contains("the server says: [server] the arena closes soon"), "{out}");
    assert!(out.contains("kicked: too loud"), "the reason reached the player: {out}");
    // A player on this machine's address is banned by key and name (127.0.0.1 is the
    // operator's own: its bots, its tools).
    console.type_line("ban bob cheating", &|s| s.contains("banned bob, key ["));
    assert!(!console.out.lock().unwrap().contains("127.0.0.1: cheating"), "the loopback address is not banned");
    let (code, out) = finish(bob, 20);
    assert_ne!(code, 0, "{out}");
    assert!(out.contains("banned from this server: cheating"), "{out}");
    let unknown = console.type_line("frobnicate", &|s| s.contains("unknown command"));
    assert!(unknown.contains("type `help`"), "{unknown}");
    console.type_line("stop", &|s| s.contains("stopping"));
    let start = Instant::now();
    let code = loop {
        if let Some(st) = console.child.try_wait().unwrap() {
            break st.code();
        }
        assert!(start.elapsed() < Duration::from_secs(15), "the server did not stop");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(code, Some(0), "`stop` stops cleanly");
    assert!(read(&dir.path().join("bans.toml")).contains("name = \"bob\""), "the ban is in the file");

    // After a restart the ban (bob's name and key) holds, here against the name.
    let mut console = Console::start(dir.path(), port, &log);
    let out = hub_bot(dir.path(), port, "Bob", "5", &[]).wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success() && text.contains("banned from this server: cheating"), "{text}");
    console.type_line("bans", &|s| s.contains("bob, key [") && s.contains("]: cheating"));
    console.type_line("ban dave", &|s| s.contains("banned dave: banned by the server; 0 player(s)"));
    // An admin with the password lifts it from the game; a wrong password is refused.
    let out = hub_bot(dir.path(), port, "mallory", "3", &["--admin-password", "guess", "--admin", "unban dave"])
        .wait_with_output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("the server says: admin command not done: wrong admin password"), "{text}");
    assert_eq!(out.status.code(), Some(1), "a refused admin command fails the bot: {text}");
    let out = hub_bot(dir.path(), port, "carol", "3", &["--admin-password", "opensesame", "--admin", "unban dave"])
        .wait_with_output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("the server says: lifted 1 ban(s) on dave"), "{text}");
    assert!(out.status.success(), "a command done: {text}");
    let out = hub_bot(dir.path(), port, "dave", "2", &[]).wait_with_output().unwrap();
    assert!(out.status.success(), "dave may join again: {}", String::from_utf8_lossy(&out.stdout));
    // Three wrong passwords from one address (over several connections) and it is cut off.
    let out = hub_bot(
        dir.path(),
        port,
        "mallory",
        "4",
        &["--admin-password", "guess2", "--admin", "status", "--admin", "status", "--admin", "status"],
    )
    .wait_with_output()
    .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success() && text.contains("kicked: wrong admin password"), "{text}");
    let s = read(&log);
    assert!(s.contains("wrong admin password") && s.contains("name=mallory"), "refusals are logged: {s}");
    let printed = console.out.lock().unwrap().clone();
    for secret in ["opensesame", "guess"] {
        assert!(!s.contains(secret) && !printed.contains(secret), "the password '{secret}' is never shown");
    }
    assert!(line_with(&s, &["refusing a player", "addr=127.0.0.1:", "banned"]).is_some(), "{s}");
    // Restarting after a countdown: the players still on are warned, then read the
    // message; the server exits with 75, on which the systemd unit starts it again.
    let frank = hub_bot(dir.path(), port, "frank", "30", &[]);
    wait_for(&log, &|s| s.contains("name=frank"), 15);
    console.type_line("restart 6 back soon", &|s| s.contains("restarts in 6 s"));
    let status = console.child.wait().unwrap();
    assert_eq!(status.code(), Some(75), "a restart's exit status");
    let (code, out) = finish(frank, 20);
    assert_ne!(code, 0, "{out}");
    for said in ["The server restarts in 6 s: back soon", "The server restarts in 5 s: back soon"] {
        assert!(out.contains(said), "warned: {said}: {out}");
    }
    assert!(out.contains("the server is shutting down: back soon"), "{out}");
}

#[test]
fn servers_on_this_machine_answer_the_lan_and_status_queries() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("server.log");
    let port = free_port();
    std::fs::write(dir.path().join("server.toml"), "name = \"Lan Party\"\nmotd = \"pizza at 8\"\npassword = \"pw\"\n")
        .unwrap();
    let mut server = dedicated(dir.path(), port, &log, &[]);
    // Someone joins: the count in the answers follows (within half a second).
    let player = hub_bot(dir.path(), port, "guest", "8", &["--password", "pw"]);
    wait_for(&log, &|s| s.contains("player joined"), 15);
    std::thread::sleep(Duration::from_millis(700));
    let out = hf(dir.path())
        .args(["servers", "--lan", "--local", "--port", &port.to_string(), "--port", &free_port().to_string()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    let line = text.lines().find(|l| l.contains("\"Lan Party\"")).unwrap_or_else(|| panic!("listed: {text}"));
    assert!(line.contains(&format!("127.0.0.1:{port}")) && line.contains("1/16"), "{line}");
    assert!(line.contains("password") && line.contains("pizza at 8"), "{line}");
    let out = hf(dir.path()).args(["servers", "--query", &format!("127.0.0.1:{port}")]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("\"Lan Party\"") && text.contains("1/16"), "{text}");
    // Nobody there: a clear failure for a monitoring script.
    let silent = free_port();
    let out = hf(dir.path())
        .args(["servers", "--query", &format!("127.0.0.1:{silent}"), "--wait-ms", "600"])
        .output()
        .unwrap();
    assert!(!out.status.success(), "no answer is a failure");
    assert!(String::from_utf8_lossy(&out.stderr).contains("no answer from 127.0.0.1"), "{out:?}");
    let _ = finish(player, 20);
    let _ = server.kill();
    let _ = server.wait();
}

#[test]
fn version_names_the_protocol_and_build_and_a_crash_writes_a_report_with_the_log() {
    let out = Command::new(exe()).arg("--version").output().unwrap();
    let v = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && v.starts_with("hailfire 0."), "{v}");
    assert!(v.contains(&format!("protocol {}", hailfire::protocol::PROTOCOL_VERSION)), "{v}");
    assert!(v.contains("build "), "{v}");
    // A crash in a child process: the report lands in the data folder and says where.
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("server.log");
    let out = hf(dir.path())
        .args(["--dedicated", "--exit-after", "5"])
        .env("HAILFIRE_CRASH_TEST", "1")
        .env("HAILFIRE_LOG_FILE", &log)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "it crashed");
    assert!(err.contains("A crash report was written to"), "the player is told where: {err}");
    let crashes: Vec<_> = std::fs::read_dir(dir.path().join("crashes")).unwrap().flatten().collect();
    assert_eq!(crashes.len(), 1, "one report");
    let report = read(&crashes[0].path());
    for needle in [
        "Hailfire crash report",
        "version: hailfire 0.",
        "OS: ",
        "GPU adapter:",
        "panic: ",
        "HAILFIRE_CRASH_TEST",
        "backtrace:",
        "logging to file",
    ] {
        assert!(report.contains(needle), "the report has '{needle}':\n{report}");
    }
    assert!(err.contains(&crashes[0].path().display().to_string()), "{err}");
}

#[test]
fn a_mod_looping_in_table_concat_ends_only_its_fight_and_status_says_why() {
    let dir = tempfile::tempdir().unwrap();
    // Behaves in the load-time dry run (two players); facing a lone player it copies
    // 4 MiB inside C for every five instructions, forever.
    let spin = "wait_until(function() return #players() == 1 end)\nlocal big = {}\nfor i = 1, 4 do big[i] = string.rep('x', 1 << 20) end\nwhile true do local s = table.concat(big) end\n";
    common::write_mod(&dir.path().join("mods"), "spin", &[("spin", spin)]);
    let log = dir.path().join("server.log");
    let port = free_port();
    let mods = dir.path().join("mods");
    let mut console = Console::start_with(dir.path(), port, &log, &["--mods".as_ref(), mods.as_os_str()]);
    let bot_in = |dungeon: &str, name: &str, secs: &str| {
        hf(dir.path())
            .args(["bot", "--join", &format!("127.0.0.1:{port}"), "--dungeon", dungeon, "--seconds", secs])
            .args(["--name", name])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };
    let bystander = bot_in("warden_keep", "bystander", "14");
    std::thread::sleep(Duration::from_secs(2));
    let victim = bot_in("spin_pit", "victim", "8");
    let (vc, vout) = finish(victim, 60);
    let (bc, bout) = finish(bystander, 60);
    let s = read(&log);
    assert!(vc == 0 || vout.contains("stopped"), "{vout}\n{s}");
    assert!(vout.contains("run stopped by the server"), "the victim was told: {vout}");
    assert_eq!(bc, 0, "{bout}\n{s}");
    assert!(bout.contains("fought in the dungeon") && bout.contains("resyncs 0 "), "{bout}");
    let stop = line_with(&s, &["fight stopped", "spin_pit"]).unwrap_or_else(|| panic!("no stop in the log:\n{s}"));
    assert!(stop.contains("mod 'spin' emitter 'spin'") && stop.contains("used more than 8 ms of CPU"), "{stop}");
    // 60 Hz: the server never had to skip ticks to catch up (a single long tick, which a
    // busy test machine can cause by itself, is caught up at once and only warned about).
    assert!(!s.contains("fell behind"), "the server kept its 60 Hz:\n{s}");
    let status = console.type_line("status", &|o| o.contains("instances:") && o.contains("fights stopped"));
    assert!(status.contains("spin_pit: mod 'spin' emitter 'spin'"), "{status}");
    assert!(console.child.try_wait().unwrap().is_none(), "the server is still running");
    let _ = Command::new("kill").args(["-TERM", &console.child.id().to_string()]).status();
    assert_eq!(console.child.wait().unwrap().code(), Some(0));
}

/// `metrics_bind`: Prometheus metrics over HTTP on a real server, counting a real player;
/// anything but `GET /metrics` is a 404.
#[test]
fn a_server_with_metrics_bind_serves_prometheus_metrics() {
    use std::io::{Read, Write};
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("server.log");
    let port = free_port();
    // A TCP port: bound and released, then given to the server.
    let mport = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    std::fs::write(dir.path().join("server.toml"), format!("metrics_bind = \"127.0.0.1:{mport}\"\n")).unwrap();
    let mut server = dedicated(dir.path(), port, &log, &[]);
    wait_for(&log, &|s| s.contains("serving Prometheus metrics"), 10);
    let player = hub_bot(dir.path(), port, "metered", "6", &[]);
    wait_for(&log, &|s| s.contains("player joined"), 15);
    let get = |path: &str| -> String {
        let mut c = std::net::TcpStream::connect(("127.0.0.1", mport)).unwrap();
        write!(c, "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").unwrap();
        let mut out = String::new();
        c.read_to_string(&mut out).unwrap();
        out
    };
    // The values are refreshed once a second.
    let start = Instant::now();
    let page = loop {
        let p = get("/metrics");
        if p.contains("hailfire_players 1") || start.elapsed() > Duration::from_secs(5) {
            break p;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(page.starts_with("HTTP/1.1 200") && page.contains("application/openmetrics-text"), "{page}");
    for want in [
        "hailfire_players 1",
        "# TYPE hailfire_tick_seconds histogram",
        "hailfire_tick_seconds_bucket{le=",
        "hailfire_instances ",
        "hailfire_dropped_datagrams_total{reason=\"garbage\"}",
        "hailfire_handshakes_total ",
        "hailfire_received_bytes_total ",
        "# EOF",
    ] {
        assert!(page.contains(want), "{want} in:\n{page}");
    }
    assert!(get("/").starts_with("HTTP/1.1 404"), "only /metrics");
    // A client that connects and says nothing, or sends an endless request, holds the
    // page for at most its 2 s deadline; the next one is answered.
    let idle = std::net::TcpStream::connect(("127.0.0.1", mport)).unwrap();
    let mut flood = std::net::TcpStream::connect(("127.0.0.1", mport)).unwrap();
    let _ = flood.write_all(&vec![b'x'; 64 * 1024]);
    let t = Instant::now();
    assert!(get("/metrics").contains("hailfire_players"), "answered after a stalled client");
    assert!(t.elapsed() < Duration::from_secs(8), "within the deadlines: {:?}", t.elapsed());
    drop((idle, flood));
    let _ = finish(player, 15);
    let _ = server.kill();
    let _ = server.wait();
}

#[test]
fn the_console_records_a_players_fight_into_a_replay_that_checks() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let log = d.join("server.log");
    let port = free_port();
    let mut console = Console::start(d, port, &log);
    let pilot = hf(d)
        .args(["bot", "--join", &format!("127.0.0.1:{port}"), "--plan", "dodge", "--name", "pilot", "--seconds", "30"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for(&log, &|s| s.contains("player joined"), 20);
    let bad = console.type_line("record nobody", &|s| s.contains("no player"));
    assert!(bad.contains("no player 'nobody' is connected"), "{bad}");
    let typo = console.type_line("record pilot 2x", &|s| s.contains("not a length"));
    assert!(typo.contains("like 60, 90s or 5m"), "{typo}");
    let said = console.type_line("record pilot 12", &|s| s.contains("recording pilot"));
    assert!(said.contains("for 12 s into") && said.contains("replays"), "{said}");
    // The recorder follows the pilot as a spectator, then writes its file.
    let written = wait_for(&log, &|s| s.contains("recorded pilot for"), 40);
    let file = std::fs::read_dir(d.join("replays"))
        .expect("the replays folder")
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "hfr"))
        .unwrap_or_else(|| panic!("a replay file: {written}"));
    let check = hf(d).arg("replay").arg(&file).arg("--check").output().unwrap();
    let out = String::from_utf8_lossy(&check.stdout);
    assert!(check.status.success(), "{out}{}", String::from_utf8_lossy(&check.stderr));
    assert!(out.contains("recorded by recorder (watching)") && out.contains("bit for bit"), "{out}");
    let (code, bot_out) = finish(pilot, 60);
    assert_eq!(code, 0, "{bot_out}");
    console.type_line("stop", &|s| s.contains("stopping"));
    let _ = console.child.wait();
}

#[test]
#[cfg(unix)]
fn hailfire_console_attaches_over_the_owner_only_socket_and_run_exits_with_meaning() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let log = d.join("server.log");
    let port = free_port();
    // Standard input closed, as under systemd: the socket is the only console.
    let mut server = dedicated(d, port, &log, &[]);
    wait_for(&log, &|s| s.contains("admin socket"), 20);
    let sock = d.join("console.sock");
    let mode = std::fs::metadata(&sock).expect("the socket").permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "owner-only");
    let pilot = hub_bot(d, port, "pilot", "40", &[]);
    wait_for(&log, &|s| s.contains("player joined"), 20);
    let run = |cmd: &str| {
        let out = hf(d).args(["console", "--run", cmd]).output().unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let (code, out) = run("players");
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("\"pilot\""), "{out}");
    let (code, out) = run("kick nobody");
    assert_eq!(code, Some(1), "a command that did nothing fails: {out}");
    assert!(out.contains("no player or spectator 'nobody'"), "{out}");
    let (code, out) = run("frobnicate");
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("unknown command"), "{out}");
    // Interactive, from a pipe: several commands, one answer each.
    let mut c = hf(d).arg("console").stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
    {
        use std::io::Write;
        let mut i = c.stdin.take().unwrap();
        writeln!(i, "say hello from the socket").unwrap();
        writeln!(i, "status").unwrap();
    }
    let out = c.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("said to 1 player(s)") && text.contains("instances:"), "{text}");
    let (code, out) = run("kick pilot bye");
    assert_eq!(code, Some(0), "{out}");
    let (_, bot_out) = finish(pilot, 20);
    assert!(
        bot_out.contains("the server says: [server] hello from the socket") && bot_out.contains("kicked: bye"),
        "{bot_out}"
    );
    // A stop through the socket stops the server; then nothing answers (exit 2).
    let (code, out) = run("stop");
    assert_eq!(code, Some(0), "{out}");
    let start = Instant::now();
    while server.try_wait().unwrap().is_none() {
        assert!(start.elapsed() < Duration::from_secs(20), "the server did not stop");
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = hf(d).args(["console", "--run", "status"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no server answers"));
}

/// `hailfire key --file F`: the short fingerprint and the key in full.
fn key_of(d: &Path, name: &str) -> (String, String) {
    let f = d.join("keys").join(format!("{name}.key"));
    let out = hf(d).args(["key", "--file"]).arg(&f).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{text}");
    let field =
        |label: &str| text.lines().find_map(|l| l.strip_prefix(label)).map(|v| v.trim().to_string()).expect(label);
    (field("player key:"), field("in full:"))
}

#[test]
#[cfg(unix)]
fn players_are_known_by_their_keys_for_bans_names_operators_and_the_allowlist() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let log = d.join("server.log");
    let port = free_port();
    let run = |cmd: &str| {
        let out = hf(d).args(["console", "--run", cmd]).output().unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let mut server = dedicated(d, port, &log, &[]);
    wait_for(&log, &|s| s.contains("admin socket"), 20);
    let ann = hub_bot(d, port, "ann", "60", &[]);
    let bea = hub_bot(d, port, "bea", "60", &[]);
    wait_for(&log, &|s| s.matches("player joined").count() >= 2, 20);
    let (ann_fp, _) = key_of(d, "ann");
    let (bea_fp, bea_key) = key_of(d, "bea");
    let (_, out) = run("players");
    assert!(out.contains(&format!("\"ann\" [{ann_fp}]")) && out.contains(&format!("\"bea\" [{bea_fp}]")), "{out}");
    assert!(read(&log).contains(&format!("key={ann_fp}")), "the log names the key");

    // Banned: by key, so another name does not help; another key from the same address
    // is let in (the ban is not on the address).
    let (code, out) = run("ban ann griefing");
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains(&format!("key [{ann_fp}]")), "{out}");
    let (_, ann_out) = finish(ann, 20);
    assert!(ann_out.contains("banned from this server: griefing"), "{ann_out}");
    let ann_key = d.join("keys/ann.key");
    let out = hub_bot(d, port, "zed", "3", &["--key", ann_key.to_str().unwrap()]).wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success() && text.contains("banned from this server: griefing"), "{text}");
    let out = hub_bot(d, port, "cy", "2", &[]).wait_with_output().unwrap();
    assert!(out.status.success(), "another key from the same address plays: {}", String::from_utf8_lossy(&out.stdout));

    // A name seen first with another key: shown as someone else, never merged.
    let fake = hub_bot(d, port, "bea", "30", &["--key", d.join("keys/impostor.key").to_str().unwrap()]);
    wait_for(&log, &|s| s.contains("first seen with another key"), 20);
    let (imp_fp, _) = key_of(d, "impostor");
    let (_, out) = run("players");
    assert!(out.contains(&format!("\"bea~{}\" [{imp_fp}]", &imp_fp[..4])), "{out}");
    assert!(out.contains(&format!("\"bea\" [{bea_fp}]")), "the first bea keeps her name: {out}");

    // An operator's admin commands need no password; nobody else's do.
    let out = hub_bot(d, port, "cy", "3", &["--admin", "say hello"]).wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "not an operator: {text}");
    assert!(text.contains("admin command not done"), "{text}");
    let (code, out) = run("op bea");
    assert_eq!(code, Some(0), "{out}");
    assert!(std::fs::read_to_string(d.join("ops.toml")).unwrap().contains(&bea_key), "kept in ops.toml");
    let out = hub_bot(
        d,
        port,
        "bea2",
        "3",
        &["--key", d.join("keys/bea.key").to_str().unwrap(), "--admin", &format!("kick bea~{} impostor", &imp_fp[..4])],
    )
    .wait_with_output()
    .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("kicked bea~"), "an operator's kick, no password: {text}");
    let (code, _) = run("deop nobody");
    assert_eq!(code, Some(1));

    // The allowlist, on after a restart: bea (allowed by key, while she was away) plays,
    // cy does not; disallowing bea while she plays disconnects her.
    let (code, out) = run(&format!("allow {bea_key}"));
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("the allowlist is off"), "{out}");
    run("kick bea");
    let _ = finish(bea, 20);
    let _ = finish(fake, 20);
    run("stop");
    server.wait().unwrap();
    let toml = d.join("server.toml");
    let text = std::fs::read_to_string(&toml).unwrap().replace("allowlist = false", "allowlist = true");
    std::fs::write(&toml, text).unwrap();
    let mut server = dedicated(d, port, &log, &[]);
    wait_for(&log, &|s| s.contains("allowlist=on"), 20);
    let out = hub_bot(d, port, "cy", "3", &[]).wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success() && text.contains("only the players on its allowlist"), "{text}");
    let before = read(&log).matches("player joined").count();
    let bea = hub_bot(d, port, "bea", "60", &[]);
    wait_for(&log, &|s| s.matches("player joined").count() > before, 20);
    // The console's recorder (a spectator with the server's own key) is let in.
    let (code, out) = run("record bea 2");
    assert_eq!(code, Some(0), "{out}");
    let written = wait_for(&log, &|s| s.contains("recorded bea for") || s.contains("record bea:"), 30);
    assert!(written.contains("recorded bea for"), "the recorder got in: {written}");
    assert!(!written.contains("name=recorder~"), "nor is it taken for someone else");
    let (code, out) = run("disallow bea");
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("1 disconnected"), "{out}");
    let (_, bea_out) = finish(bea, 20);
    assert!(bea_out.contains("taken off this server's allowlist"), "{bea_out}");
    for f in ["ops.toml", "allowlist.toml", "bans.toml", "known_players.toml", "server.toml"] {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(d.join(f)).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{f} is the owner's only");
    }
    run("stop");
    server.wait().unwrap();
}

/// The first run on a full file system (a small tmpfs, filled): the server says it could
/// not write its settings and stops, leaving no file (never an empty one that a later
/// start would read as the defaults). Needs root for the mount; says so where it cannot.
#[test]
#[cfg(target_os = "linux")]
fn a_full_disk_at_first_run_stops_the_server_with_a_clear_message_and_no_empty_config() {
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path().join("small");
    std::fs::create_dir_all(&mnt).unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=64k", "tmpfs"])
        .arg(&mnt)
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        eprintln!("SKIPPED: cannot mount a tmpfs here (needs root); the full-disk case was not tried");
        return;
    }
    struct Unmount(std::path::PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(&self.0).status();
        }
    }
    let _guard = Unmount(mnt.clone());
    // Fill it.
    {
        use std::io::Write;
        let mut f = std::fs::File::create(mnt.join("filler")).unwrap();
        let block = vec![0u8; 4096];
        while f.write_all(&block).and_then(|_| f.flush()).is_ok() {}
    }
    let out = Command::new(exe())
        .args(["--dedicated", "--exit-after", "1", "--bind", "127.0.0.1:0"])
        .env("HAILFIRE_CONFIG_DIR", &mnt)
        .env("HAILFIRE_DATA_DIR", dir.path().join("data"))
        .env("XDG_CACHE_HOME", dir.path().join("cache"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("cannot write") && err.contains("server.toml") && err.contains("nothing was written"),
        "{err}"
    );
    let left: Vec<String> = std::fs::read_dir(&mnt)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != "filler")
        .collect();
    assert!(left.is_empty(), "no settings file, not even an empty one, and no temporary: {left:?}");
}
