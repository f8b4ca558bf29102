//! Hostile mods: each attack that was seen to break the first sandbox, written only
//! against the public modding API, must be stopped or refused with mod, file and line,
//! within bounded time and memory, while the rest of the game goes on.
//!
//! These run the mods *in the server's process*, as a mod an operator marks trusted runs
//! (and as the base game does): the in-process sandbox is still what holds those. An
//! untrusted mod runs in a worker process on top of the same sandbox: `tests/workers.rs`.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use hailfire::content::{self, validate, Content, ModRoot};
use hailfire::sim::instance::{Instance, InstanceKind};
use hailfire::sim::{Player, SimEvent, Vec2};

fn write(dir: &Path, rel: &str, text: &str) {
    let p = dir.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn manifest(id: &str) -> String {
    format!("id = \"{id}\"\nname = \"{id}\"\nversion = \"1.0.0\"\ngame_version = \">=0.1.0\"\n[dependencies]\nbase = \">=0.1\"\n")
}

/// A mod `id` (in `parent/id`) whose enemy `<id>_imp` runs emitter `<id>_e` = `lua`.
fn lua_mod(parent: &Path, id: &str, lua: &str) -> PathBuf {
    let d = parent.join(id);
    write(&d, "mod.toml", &manifest(id));
    write(
        &d,
        "enemies.toml",
        &format!(
            "[{id}_imp]\nname = \"Imp\"\nhp = 10\nradius = 10.0\nbehaviour = \"stationary\"\nemitters = [\"{id}_e\"]\n"
        ),
    );
    write(&d, &format!("emitters/{id}_e.lua"), lua);
    d
}

fn load(mods: &[PathBuf]) -> Content {
    let mut roots = vec![ModRoot::Mod(content::content_dir())];
    roots.extend(mods.iter().map(|m| ModRoot::Mod(m.clone())));
    content::load_with(&roots, true)
}

struct Run {
    errors: Vec<String>,
    logs: Vec<String>,
    shots: usize,
    ticks_done: u32,
}

/// Runs `enemies` (id, position) in a Warden's Keep instance for `ticks`, on a thread: a
/// hang fails the test after 60 s instead of hanging it.
fn run(c: &Content, enemies: &[(&str, Vec2)], ticks: u32) -> Run {
    let defs = c.defs.clone();
    let factory = c.script_factory_in_process();
    let enemies: Vec<(String, Vec2)> = enemies.iter().map(|(e, p)| (e.to_string(), *p)).collect();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut inst = Instance::new(1, InstanceKind::Dungeon("warden_keep".into()), &defs, factory.create(3), 3);
        inst.arrive(Player::new(1, "p", Vec2::new(480.0, 600.0)));
        let mut ev = Vec::new();
        for (e, p) in &enemies {
            inst.spawn_enemy(&defs, e, *p, &mut ev);
        }
        let mut out = Run { errors: Vec::new(), logs: Vec::new(), shots: 0, ticks_done: 0 };
        let mut req = Vec::new();
        for t in 1..=ticks {
            inst.players[0].hp = 100;
            inst.step(t, &defs, &mut ev, &mut req);
            for e in ev.drain(..) {
                match e {
                    SimEvent::ScriptError { message, .. } => out.errors.push(message),
                    // A mod's worker process lost (killed at its deadline, or dead).
                    SimEvent::InstanceStopped { reason, .. } => out.errors.push(format!("fight stopped: {reason}")),
                    SimEvent::ScriptLog { message, .. } => out.logs.push(message),
                    SimEvent::BulletSpawned { .. } | SimEvent::BurstSpawned { .. } => out.shots += e.spawned().len(),
                    _ => {}
                }
            }
            req.clear();
            out.ticks_done = t;
        }
        let _ = tx.send(out);
    });
    rx.recv_timeout(Duration::from_secs(60)).expect("the instance hung: a script escaped its limits")
}

/// A hostile emitter alone: the errors it produced, and how long the ticks took.
fn attack(lua: &str, ticks: u32) -> (Run, Duration) {
    let d = tempfile::tempdir().unwrap();
    let m = lua_mod(d.path(), "evil", lua);
    let c = load(&[m]);
    assert!(c.errors().next().is_none(), "{:?}", c.diagnostics);
    let start = Instant::now();
    let r = run(&c, &[("evil_imp", Vec2::new(480.0, 200.0))], ticks);
    (r, start.elapsed())
}

/// Whether a message names the hostile file *and a line* (`evil/emitters/evil_e.lua:N`).
fn names_line(e: &str) -> bool {
    let key = "evil/emitters/evil_e.lua:";
    e.match_indices(key).any(|(i, _)| e[i + key.len()..].starts_with(|c: char| c.is_ascii_digit()))
}

fn assert_stopped(r: &Run, words: &[&str]) {
    assert!(
        r.errors.iter().any(|e| names_line(e) && words.iter().all(|w| e.contains(w))),
        "expected an error naming the file, its line and {words:?}, got {:?}",
        r.errors
    );
}

#[test]
fn a_fan_out_of_short_coroutines_is_charged_and_stopped() {
    let (r, took) = attack(
        "local function burn(d)\n  if d == 0 then for _ = 1, 40 do end return end\n  for _ = 1, 20 do coroutine.resume(coroutine.create(burn), d - 1) end\nend\nburn(9)\n",
        5,
    );
    assert_stopped(&r, &["limit exceeded"]);
    assert!(took < Duration::from_secs(20), "{took:?}");
    // Making a coroutine is charged even if it never runs: 300 of them cost more than a
    // resume may spend, though the loop itself is a few thousand instructions.
    let (r, _) = attack("for i = 1, 300 do coroutine.create(function() end) end\nwait(1000)\n", 2);
    assert_stopped(&r, &["limit exceeded"]);
}

#[test]
fn an_xpcall_handler_that_loops_is_stopped() {
    let (r, _) = attack("xpcall(function() while true do end end, function() while true do end end)\n", 3);
    assert_stopped(&r, &["limit exceeded"]);
}

#[test]
fn a_looping_tostring_cannot_swallow_the_limit_in_log() {
    let (r, _) = attack(
        "local t = setmetatable({}, {__tostring = function() while true do end end})\nwhile true do log(t) end\n",
        3,
    );
    assert_stopped(&r, &["limit exceeded"]);
    // Swallowing through pcall inside a loop does not help either.
    let (r, _) = attack("while true do pcall(function() while true do end end) end\n", 3);
    assert_stopped(&r, &["limit exceeded"]);
}

#[test]
fn c_functions_cannot_do_unbounded_work() {
    for (lua, words) in [
        ("local s = string.rep('ab', math.maxinteger)\nwait(1000)\n", &["string.rep", "bytes"][..]),
        ("local s = string.rep('', math.maxinteger)\nlog(#s)\nwait(1000)\n", &[][..]),
        ("table.move({}, 1, math.maxinteger, 1, {})\nwait(1000)\n", &["table.move"][..]),
        (
            "local s = string.rep('a', 1048576)\nlocal p = string.rep('a', 524288) .. 'b'\nlog(string.find(s, p))\nwait(1000)\n",
            &["limit exceeded"][..],
        ),
        ("local t = {}\nfor i = 1, 1000000 do t[i] = i end\nwhile true do table.insert(t, 1, 0) end\n", &["limit exceeded"][..]),
    ] {
        let (r, took) = attack(lua, 3);
        if words.is_empty() {
            assert!(r.errors.is_empty(), "{lua}: {:?}", r.errors);
            assert_eq!(r.logs, vec!["0"]);
        } else {
            assert_stopped(&r, words);
        }
        assert!(took < Duration::from_secs(20), "{lua}: {took:?}");
    }
}

#[test]
fn comparing_huge_strings_is_bounded() {
    let (r, took) = attack(
        "local s = 'a'\nfor i = 1, 23 do s = s .. s end\nlocal t = s .. ''\nlocal n = 0\nwhile true do if s < t then n = n + 1 end end\n",
        2,
    );
    assert_stopped(&r, &[]);
    assert!(took < Duration::from_secs(20), "{took:?}");
}

#[test]
fn thousands_of_tasks_are_stopped_and_the_instance_budget_holds_while_others_keep_firing() {
    // 4,000 tasks at once: each costs a coroutine's worth of budget, so the resume that
    // makes them runs out (or meets the task cap) long before.
    let (r, _) = attack(
        "for i = 1, 4000 do\n  task(function() while true do for k = 1, 150000 do end wait(1) end end)\nend\nwait(100000)\n",
        3,
    );
    assert!(
        r.errors
            .iter()
            .any(|e| e.contains("evil_e.lua") && (e.contains("limit exceeded") || e.contains("too many tasks"))),
        "{:?}",
        r.errors
    );
    // Made slowly, tasks meet the cap.
    let (r, _) = attack("for i = 1, 300 do\n  task(function() wait(100000) end)\n  wait(1)\nend\n", 400);
    assert_stopped(&r, &["too many tasks", "256"]);
    // 100 tasks each under the per-resume limit but together far over the instance's
    // budget for a tick: stopped, and the base game's turret beside it keeps firing.
    let d = tempfile::tempdir().unwrap();
    let hog = lua_mod(
        d.path(),
        "hog",
        "for i = 1, 100 do\n  task(function() while true do for k = 1, 150000 do end wait(1) end end)\nend\nwait(100000)\n",
    );
    let c = load(&[hog]);
    let r = run(&c, &[("hog_imp", Vec2::new(300.0, 200.0)), ("turret", Vec2::new(600.0, 200.0))], 240);
    assert!(
        r.errors.iter().any(|e| e.contains("hog_e.lua") && e.contains("instance budget exceeded")),
        "{:?}",
        r.errors
    );
    assert_eq!(r.ticks_done, 240);
    assert!(r.shots > 20, "the base game's turret kept firing: {} shots", r.shots);
}

#[test]
fn a_bullet_flood_is_capped_per_tick() {
    let (r, _) = attack("while true do\n  for i = 1, 40000 do ring{n = 720} end\n  wait(1)\nend\n", 3);
    assert_stopped(&r, &["bullets fired in one tick", "needs a wait()"]);
    assert!(r.shots <= hailfire::content::lua::MAX_SHOTS_PER_TICK, "{} shots", r.shots);
}

#[test]
fn log_text_is_cut_on_character_boundaries_and_escaped() {
    let (r, _) = attack(
        "log(string.rep('a', 199) .. 'é')\nlog('line one\\n2026-01-01 INFO forged line')\nlog(string.rep('x', 5000), string.rep('y', 5000))\nwait(1000)\n",
        2,
    );
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    assert_eq!(r.logs[0], "a".repeat(199));
    assert_eq!(r.logs[1], "line one\\n2026-01-01 INFO forged line", "a newline cannot start a new log line");
    assert!(r.logs[2].len() <= hailfire::content::lua::MAX_LOG_BYTES);
}

#[test]
fn scripts_print_no_addresses_and_warn_is_gone() {
    let (r, _) = attack(
        "local okw, w = pcall(function() return warn end)\nlog(tostring({}), tostring(print), type(okw and w or nil))\nlog(string.format('%s %d', {}, 3))\nlocal ok, e = pcall(string.format, '%p', {})\nlog(ok, e)\nwait(1000)\n",
        2,
    );
    assert_eq!(r.logs[0], "table function nil");
    assert_eq!(r.logs[1], "table 3");
    assert!(r.logs[2].starts_with("false") && r.logs[2].contains("%p is not allowed"), "{:?}", r.logs);
}

#[test]
fn a_saboteur_mod_cannot_change_what_another_mods_scripts_see() {
    let d = tempfile::tempdir().unwrap();
    let victim = lua_mod(d.path(), "victim", "while true do\n  ring{n = 4, speed = 2}\n  log(math.random(1, 1000000), #string.rep('a', 3))\n  wait(10)\nend\n");
    let saboteur = lua_mod(
        d.path(),
        "saboteur",
        "ring = function() end\nmath = {random = function() return 7 end}\nlog('setmetatable(_G) write:', pcall(setmetatable, _G, {}))\nlocal ok, e = pcall(function() string.rep = function() return '' end end)\nlog('string.rep write:', ok, e)\nlocal ok2 = pcall(function() rawset(string, 'rep', nil) end)\nlog('rawset on the view:', ok2, #string.rep('a', 2))\nwait(100000)\n",
    );
    let alone = load(std::slice::from_ref(&victim));
    let both = load(&[victim, saboteur]);
    assert!(both.errors().next().is_none(), "{:?}", both.diagnostics);
    let a = run(&alone, &[("victim_imp", Vec2::new(480.0, 200.0))], 60);
    let b = run(&both, &[("victim_imp", Vec2::new(480.0, 200.0)), ("saboteur_imp", Vec2::new(200.0, 200.0))], 60);
    let victim_logs: Vec<&String> = b.logs.iter().filter(|l| !l.contains("write") && !l.contains("rawset")).collect();
    assert!(b.errors.is_empty(), "{:?}", b.errors);
    assert_eq!(a.logs.iter().collect::<Vec<_>>(), victim_logs, "the victim's view of the API is unchanged");
    assert_eq!(a.shots, b.shots, "the victim's rings still fire");
    let w = b.logs.iter().find(|l| l.contains("string.rep write")).unwrap();
    assert!(w.contains("false") && w.contains("read-only"), "{w}");
}

#[test]
fn move_to_cannot_take_a_body_out_of_the_arena() {
    let (r, _) = attack(
        "local k = 0\nwhile true do\n  k = k + 1\n  if k % 2 == 0 then move_to(1e30, -1e30, 1) else move_to(-3.4e38, 3.4e38, 2) end\n  local x, y = pos()\n  log(x, y)\n  wait(1)\nend\n",
        30,
    );
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    for l in &r.logs[2..] {
        let v: Vec<f32> = l.split(' ').map(|x| x.parse().unwrap()).collect();
        assert!(v.iter().all(|c| c.is_finite()), "{l}");
        assert!((10.0..=950.0).contains(&v[0]) && (10.0..=710.0).contains(&v[1]), "left the 960x720 arena: {l}");
    }
}

fn check_errors(dir: &Path) -> Vec<String> {
    let r = validate::check(&[dir.to_path_buf()]);
    r.diagnostics.iter().filter(|d| d.is_error()).map(|d| d.to_string()).collect()
}

#[test]
fn numbers_that_would_panic_or_escape_are_refused_at_load_with_their_line() {
    let d = tempfile::tempdir().unwrap();
    let m = d.path().join("bad");
    write(&m, "mod.toml", &manifest("bad"));
    write(
        &m,
        "enemies.toml",
        "[fat]\nname = \"Fat\"\nhp = 10\nradius = 120.0\nbehaviour = \"chase\"\nhostile = false\n\n[odd]\nname = \"Odd\"\nhp = 10\nradius = 10.0\nbehaviour = \"strafe\"\nrange = nan\nhostile = false\n",
    );
    write(
        &m,
        "dungeons.toml",
        "[tiny]\nname = \"Tiny\"\narena = [200.0, 200.0]\nspawn = [100.0, 150.0]\nboss = \"warden\"\nboss_pos = [100.0, 60.0]\nportal = [nan, 100.0]\n\n[[tiny.waves]]\nspawns = [{ enemy = \"fat\", x = 100.0, y = 100.0 }, { enemy = \"odd\", x = nan, y = 50.0, spacing = inf }]\n",
    );
    write(&m, "hub.toml", "arena = [1e9, 1e9]\nspawn = [10.0, 10.0]\n");
    let errs = check_errors(&m).join("\n");
    for needle in [
        "enemies.toml:13",
        "range",
        "dungeons.toml:7",
        "portal",
        "'fat' (radius 120) does not fit",
        "spawn x/y",
        "spacing",
        "hub.toml",
        "8192",
    ] {
        assert!(errs.contains(needle), "expected '{needle}' in:\n{errs}");
    }
    // And at run time, a body larger than its arena is placed, not a panic.
    let p = hailfire::sim::instance::keep_inside(Vec2::new(50.0, f32::NAN), 120.0, Vec2::new(200.0, 200.0));
    assert_eq!((p.x, p.y), (100.0, 100.0));
}

#[cfg(unix)]
#[test]
fn the_loader_reads_only_regular_utf8_files_of_bounded_size() {
    let d = tempfile::tempdir().unwrap();
    let m = lua_mod(d.path(), "traps", "wait(1000)\n");
    std::os::unix::fs::symlink("/dev/zero", m.join("emitters/zero.lua")).unwrap();
    let fifo = m.join("emitters/fifo.lua");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    std::fs::write(m.join("bullets.toml"), b"[x]\nradius = 4.0\ncolor = \"#ff\xff\xfe\"\n").unwrap();
    std::fs::write(m.join("emitters/big.lua"), vec![b'-'; 2 << 20]).unwrap();
    let (tx, rx) = mpsc::channel();
    let dir = m.clone();
    std::thread::spawn(move || {
        let _ = tx.send(check_errors(&dir));
    });
    let errs = rx.recv_timeout(Duration::from_secs(30)).expect("the loader blocked on a FIFO or an endless file");
    let all = errs.join("\n");
    assert!(all.contains("zero.lua") && all.contains("symbolic link"), "{all}");
    assert!(all.contains("fifo.lua") && all.contains("not a regular file"), "{all}");
    assert!(all.contains("bullets.toml") && all.contains("not UTF-8"), "{all}");
    assert!(all.contains("big.lua") && all.contains("bytes"), "{all}");
}

#[test]
fn a_definitions_file_with_thousands_of_entries_loads_with_each_error_located() {
    let d = tempfile::tempdir().unwrap();
    let m = d.path().join("many");
    write(&m, "mod.toml", &manifest("many"));
    let mut text = String::new();
    for k in 0..8000 {
        text.push_str(&format!("[k{k}]\nradius = 3.0\ncolor = \"#ffffff\"\n"));
    }
    text.push_str("[broken]\nradius = \"big\"\ncolor = \"#ffffff\"\n");
    write(&m, "bullets.toml", &text);
    let c = content::load_with(&[ModRoot::Mod(content::content_dir()), ModRoot::Mod(m)], true);
    assert!(c.defs.bullets.len() > 8000);
    let errs: Vec<String> = c.errors().map(|e| e.to_string()).collect();
    assert!(errs.iter().any(|e| e.contains("bullets.toml:24002") && e.contains("broken")), "{errs:?}");
}

#[test]
fn error_text_cannot_forge_the_checkers_output_and_deep_paths_keep_their_line() {
    let d = tempfile::tempdir().unwrap();
    let deep = d.path().join("a_very_long_folder_name_for_mods/another_long_folder_name/and_more");
    let m = lua_mod(&deep, "forger", "wait(2)\nerror('\\27[2J\\nchecked 9 mod(s): 0 error(s)')\n");
    let out =
        std::process::Command::new(env!("CARGO_BIN_EXE_hailfire")).args(["mods", "check"]).arg(&m).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains('\u{1b}'), "raw escape codes printed:\n{text}");
    assert!(!text.lines().any(|l| l.starts_with("checked 9")), "a forged summary line:\n{text}");
    assert!(text.contains("forger/emitters/forger_e.lua:2"), "the line survives a long path:\n{text}");
    assert!(!out.status.success());
}

#[test]
fn the_checker_runs_each_dungeon_with_its_waves_together() {
    // Two emitters of one mod that only fail together, in their dungeon's real arena.
    let d = tempfile::tempdir().unwrap();
    let m = d.path().join("pair");
    write(&m, "mod.toml", &manifest("pair"));
    write(
        &m,
        "enemies.toml",
        "[a]\nname = \"A\"\nhp = 10\nradius = 10.0\nbehaviour = \"stationary\"\nemitters = [\"a\"]\n\n[b]\nname = \"B\"\nhp = 10\nradius = 10.0\nbehaviour = \"stationary\"\nemitters = [\"b\"]\n",
    );
    write(&m, "emitters/a.lua", "flag_from_a = true\nwait(100000)\n");
    write(&m, "emitters/b.lua", "wait(5)\nif flag_from_a then error('only with a') end\nwait(100000)\n");
    write(
        &m,
        "dungeons.toml",
        "[pit]\nname = \"Pit\"\narena = [400.0, 300.0]\nspawn = [200.0, 250.0]\nboss = \"warden\"\nboss_pos = [200.0, 60.0]\n\n[[pit.waves]]\nspawns = [{ enemy = \"a\", x = 100.0, y = 100.0 }, { enemy = \"b\", x = 300.0, y = 100.0 }]\n",
    );
    let errs = check_errors(&m).join("\n");
    assert!(errs.contains("pair/emitters/b.lua:2") && errs.contains("only with a"), "{errs}");
}

#[test]
fn no_metamethod_or_iterator_can_swallow_or_outlast_the_limit() {
    // To-be-closed variables run their handler while Lua unwinds an error, where no hook
    // can fire: they are refused at load, at their line (strings and comments are not
    // mistaken for them).
    let d = tempfile::tempdir().unwrap();
    let m = lua_mod(
        d.path(),
        "closer",
        "-- a comment: local x <close>\nlocal s = 'not <close> either'\nlocal t < close > = setmetatable({}, {__close = function() while true do end end})\nwhile true do end\n",
    );
    let errs = check_errors(&m).join("\n");
    assert!(errs.contains("closer_e.lua:3") && errs.contains("<close>"), "{errs}");
    for lua in [
        "error(setmetatable({}, {__tostring = function() while true do end end}))\n",
        "local t = setmetatable({}, {__index = function() while true do end end})\nlocal x = t.foo\n",
        "for k in function() while true do end end do end\n",
        "while true do local ok = pcall(tostring, setmetatable({}, {__tostring = function() while true do end end})) end\n",
        "local co = coroutine.wrap(function() while true do end end)\nwhile true do pcall(co) end\n",
    ] {
        let (r, took) = attack(lua, 3);
        assert!(
            r.errors.iter().any(|e| names_line(e) && e.contains("limit exceeded")),
            "{lua}: expected the limit at a line of the file, got {:?}",
            r.errors
        );
        assert!(took < Duration::from_secs(20), "{lua}: {took:?}");
    }
}

#[test]
fn api_misuse_and_deep_recursion_are_reported_at_their_line() {
    for (lua, words) in [
        ("wait(1)\nring('not a table')\n", &["evil_e.lua:2"][..]),
        ("wait(1)\nlocal function f(n) return f(n + 1) + 1 end\nf(1)\n", &["evil_e.lua:2"][..]),
    ] {
        let (r, _) = attack(lua, 3);
        assert!(r.errors.iter().any(|e| names_line(e) && words.iter().all(|w| e.contains(w))), "{lua}: {:?}", r.errors);
    }
}

#[test]
fn a_memory_bomb_is_stopped_and_the_instance_goes_on() {
    // Lua gives a memory error no position: the report takes it from the coroutine's stack.
    let d = tempfile::tempdir().unwrap();
    let m = lua_mod(
        d.path(),
        "evil",
        "wait(1)\nlocal s = string.rep('x', 1048576)\nlocal t = {}\nfor i = 1, 64 do t[i] = s .. i end\n",
    );
    let c = load(&[m]);
    let r = run(&c, &[("evil_imp", Vec2::new(480.0, 200.0)), ("turret", Vec2::new(600.0, 200.0))], 200);
    assert!(r.errors.iter().any(|e| e.contains("evil_e.lua:4: out of memory")), "{:?}", r.errors);
    assert!(r.shots > 10, "the turret in the same instance kept firing after the bomb");
}

/// Reading an undefined global makes a "did you mean": work in Rust, outside the
/// instruction budget. A huge name, or an environment full of huge names, costs nothing
/// to report, and the message stays short.
#[test]
fn a_huge_undefined_name_is_reported_cheaply() {
    let (r, took) = attack(
        "for i = 1, 20 do rawset(_ENV, string.rep('x', 90000) .. i, 1) end\nlocal ok, e = pcall(function() return _ENV[string.rep('x', 90000) .. 'y'] end)\nlog(tostring(ok) .. ' ' .. #tostring(e))\nwait(1000)\n",
        2,
    );
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    let said = r.logs.first().expect("the script went on");
    let (ok, len) = said.split_once(' ').unwrap();
    assert_eq!(ok, "false", "still an error");
    assert!(len.parse::<usize>().unwrap() < 600, "a short message (the name clipped to 64 characters): {said}");
    eprintln!("reported in {took:?}");
}
