//! Untrusted mods in worker processes: real workers (this build's `hailfire
//! --script-worker`), real Lua, and hostile scripts. Each case ends only its own fight,
//! with its reason, while a fight in another instance of the same world goes on.

mod common;
use common::write_mod;

use std::path::Path;

use hailfire::content::{self, Content, ModRoot};
use hailfire::sim::events::RunOutcome;
use hailfire::sim::player::{InputFrame, BTN_FIRE};
use hailfire::sim::{SimEvent, Vec2, World};

fn load(root: &Path) -> Content {
    let c = content::load(&[ModRoot::Mod(content::content_dir()), ModRoot::Folder(root.to_path_buf())]);
    assert!(c.base_loaded(), "{:?}", c.diagnostics);
    assert!(c.errors().next().is_none(), "{:?}", c.diagnostics);
    c
}

/// What happened to a fight in `<id>_pit` (player 1) while player 2 fought in the
/// Warden's Keep of the same world, over at most `ticks` ticks.
struct Outcome {
    /// The reason the pit's fight was stopped (None: it was not).
    stopped: Option<String>,
    /// Player 1's run summary outcome.
    outcome: Option<RunOutcome>,
    /// Where player 1 is at the end (the hub, after a stop).
    in_hub: bool,
    /// Ticks the Keep's instance stepped, of `ticks`.
    keep_age: u32,
    logs: Vec<String>,
    errors: Vec<String>,
}

fn fight(c: &Content, id: &str, ticks: u32, stop_early: bool) -> Outcome {
    fight_paced(c, id, ticks, stop_early, None)
}

/// [`fight`], with `pace` between ticks (as a server's 60 Hz leaves them) if given.
fn fight_paced(c: &Content, id: &str, ticks: u32, stop_early: bool, pace: Option<std::time::Duration>) -> Outcome {
    let mut w = World::new(c.defs.clone(), c.script_factory(), 5);
    w.add_player(1, "victim");
    w.add_player(2, "bystander");
    let pit = w.enter_dungeon(1, &format!("{id}_pit")).expect("the pit opens");
    let keep = w.enter_dungeon(2, "warden_keep").expect("the keep opens");
    let keep_age0 = w.instances[&keep].age;
    let (mut stopped, mut outcome, mut logs, mut errors) = (None, None, Vec::new(), Vec::new());
    for _ in 0..ticks {
        for id in 1..=2 {
            let f = InputFrame { tick: w.tick + 1, mv: Vec2::ZERO, aim: -90.0, buttons: BTN_FIRE };
            let _ = w.queue_input(id, f);
        }
        for i in w.instances.values_mut() {
            for p in i.players.iter_mut() {
                p.hp = 100;
            }
        }
        for e in w.step() {
            match e {
                SimEvent::InstanceStopped { instance, reason, players, .. } if *instance == pit => {
                    assert_eq!(players, &vec![1], "the stop names who was in the fight");
                    stopped = Some(reason.clone());
                }
                SimEvent::RunEnded { to, summary, .. } if to.contains(&1) => outcome = Some(summary.outcome),
                SimEvent::ScriptLog { message, .. } => logs.push(message.clone()),
                SimEvent::ScriptError { message, .. } => errors.push(message.clone()),
                _ => {}
            }
        }
        if stop_early && stopped.is_some() && w.instance_of(1) == Some(w.hub) {
            break;
        }
        if let Some(p) = pace {
            std::thread::sleep(p);
        }
    }
    let keep_age = w.instances.get(&keep).map_or(0, |i| i.age - keep_age0);
    Outcome { stopped, outcome, in_hub: w.instance_of(1) == Some(w.hub), keep_age, logs, errors }
}

/// Asserts the pit's fight was stopped for `why`, at a line of `file`, the player was
/// sent back with a "stopped" summary, and the Keep fought on.
fn assert_stopped(o: &Outcome, why: &str, at: Option<&str>) {
    let reason = o.stopped.as_deref().unwrap_or_else(|| panic!("the fight was not stopped; errors: {:?}", o.errors));
    assert!(reason.contains(why), "reason: {reason}");
    if let Some(at) = at {
        assert!(reason.contains(&format!("last at {at}")), "the reason names the line: {reason}");
    }
    assert_eq!(o.outcome, Some(RunOutcome::Stopped));
    assert!(o.in_hub, "the player is back in the hub");
    assert!(o.keep_age > 0, "the other fight went on");
}

/// Work inside C, where no instruction is counted: each `table.concat` copies 256 KiB for
/// five instructions. In the server's process this held a tick for as long as the
/// wall-clock backstop let it (and far longer through `__index` wrappers); in a worker it
/// meets its CPU deadline.
const C_LOOP: &str = "local big = {}\nfor i = 1, 4 do big[i] = string.rep('x', 1 << 16) end\nwhile true do local s = table.concat(big) end\n";

/// Waits until the script faces a lone player: the game dry-runs mods at load with two,
/// so the attack comes only in a real fight, as a time bomb would.
const ALONE: &str = "wait_until(function() return #players() == 1 end)\n";

#[test]
fn a_script_spinning_inside_c_is_killed_at_its_cpu_deadline_and_named_at_its_line() {
    let dir = tempfile::tempdir().unwrap();
    write_mod(dir.path(), "trap", &[("cloop", &format!("{ALONE}{C_LOOP}"))]);
    let c = load(dir.path());
    let o = fight(&c, "trap", 600, true);
    assert_stopped(&o, "used more than 8 ms of CPU to answer one tick", Some("trap/emitters/cloop.lua:4"));
    assert!(o.stopped.unwrap().starts_with("mod 'trap' emitter 'cloop'"));
}

#[test]
fn a_worker_that_panics_allocates_without_end_sleeps_or_spins_ends_only_its_fight() {
    let dir = tempfile::tempdir().unwrap();
    write_mod(dir.path(), "trap", &[("victim", "while true do wait(1) end\n")]);
    let c = load(dir.path());
    for (fault, why) in [
        ("panic", "crashed: panicked at"),
        ("alloc", "died (signal 6)"),
        ("sleep", "did not set up its emitters within 160 ms"),
        ("spin", "set up its emitters"),
    ] {
        // The worker reads this when it starts (test builds only).
        std::env::set_var("HAILFIRE_WORKER_FAULT", format!("{fault}:victim"));
        let o = fight(&c, "trap", 300, true);
        std::env::remove_var("HAILFIRE_WORKER_FAULT");
        assert_stopped(&o, why, None);
        assert!(o.stopped.as_deref().unwrap().contains("mod 'trap' emitter 'victim'"), "{:?}", o.stopped);
    }
}

#[test]
#[cfg(target_os = "linux")]
fn a_worker_can_open_no_file_socket_or_program() {
    let dir = tempfile::tempdir().unwrap();
    write_mod(dir.path(), "trap", &[("escapee", "while true do wait(1) end\n")]);
    let c = load(dir.path());
    // Test builds only: when `escapee` starts, the worker itself (Rust, past Lua) tries a
    // file, a socket, a program and a signal to the server, and reports what happened.
    std::env::set_var("HAILFIRE_WORKER_FAULT", "escape:escapee");
    let o = fight(&c, "trap", 300, true);
    std::env::remove_var("HAILFIRE_WORKER_FAULT");
    let reason = o.stopped.expect("the worker reported and died");
    for what in ["file ", "socket ", "program ", "signal "] {
        let part = reason.split("; ").find(|p| p.contains(what)).unwrap_or_else(|| panic!("no {what}in: {reason}"));
        assert!(part.contains("Err(") && part.contains("Operation not permitted"), "refused by the filter: {reason}");
    }
}

#[test]
#[cfg(target_os = "linux")]
fn a_worker_that_works_between_ticks_or_answers_late_every_tick_is_stopped() {
    let dir = tempfile::tempdir().unwrap();
    // (Each test's faulty emitter has its own name: the variable reaches every worker
    // this test process starts, other tests' load-time dry runs included.)
    write_mod(dir.path(), "trap", &[("pacer", "while true do ring{n = 4} wait(1) end\n")]);
    let c = load(dir.path());
    for (fault, why) in
        [("between", "computed between ticks"), ("late", "answered later than 17 ms 5 times in 60 ticks")]
    {
        std::env::set_var("HAILFIRE_WORKER_FAULT", format!("{fault}:pacer"));
        // Ticks 16 ms apart, as a server runs them: the worker's time between them shows.
        let o = fight_paced(&c, "trap", 120, true, Some(std::time::Duration::from_millis(16)));
        std::env::remove_var("HAILFIRE_WORKER_FAULT");
        assert_stopped(&o, why, None);
    }
}

#[test]
fn an_honest_mod_in_a_worker_fights_like_it_would_in_process() {
    let dir = tempfile::tempdir().unwrap();
    let lua = "local n = 0\nwhile true do\n  n = n + 1\n  ring{n = 12, speed = 2 + rand() , angle = n * 7}\n  if n % 10 == 0 then log('volley ' .. n) end\n  wait(6)\nend\n";
    write_mod(dir.path(), "honest", &[("rings", lua)]);
    let c = load(dir.path());
    let bits = |factory| {
        let mut w = World::new(c.defs.clone(), factory, 9);
        w.add_player(1, "p");
        let inst = w.enter_dungeon(1, "honest_pit").unwrap();
        let mut logs = 0;
        for _ in 0..400 {
            for e in w.step() {
                if matches!(e, SimEvent::ScriptLog { .. }) {
                    logs += 1;
                }
            }
            assert!(w.instances.contains_key(&inst), "the fight goes on");
        }
        (w.hash(), w.instances[&inst].bullets.len(), logs)
    };
    let in_worker = bits(c.script_factory());
    let in_process = bits(c.script_factory_in_process());
    assert!(in_worker.1 > 20 && in_worker.2 >= 5, "the mod fired and logged: {in_worker:?}");
    assert_eq!(in_worker, in_process, "same bits, bullets and logs either way");
}

#[test]
fn a_mod_cannot_see_or_change_another_mods_tables_or_libraries() {
    let dir = tempfile::tempdir().unwrap();
    // Alpha tries every way it had to reach what others use; beta reports what it sees.
    let alpha = "secret = 'alpha was here'\n\
                 local f, s = pairs(string)\n\
                 log('alpha: pairs state is the view: ' .. tostring(s == string))\n\
                 log('alpha: rep via pairs: ' .. tostring(pcall(function() s.rep = nil end)))\n\
                 log('alpha: yield: ' .. tostring(pcall(function() coroutine.yield = nil end)))\n\
                 log('alpha: sqrt: ' .. tostring(pcall(function() rawset(math, 'sqrt', nil) end)))\n\
                 log('alpha: meta: ' .. tostring(getmetatable(string)))\n\
                 for k, v in pairs(table) do if k == 'insert' then log('alpha: iterates ' .. type(v)) end end\n\
                 while true do wait(1) end\n";
    let beta = "wait(5)\nlog('beta: secret ' .. tostring(rawget(_ENV, 'secret')) .. ', rep ' .. type(string.rep) .. ', yield ' .. type(coroutine.yield) .. ', sqrt ' .. type(math.sqrt))\nwhile true do wait(1) end\n";
    write_mod(dir.path(), "alpha", &[("snoop", alpha)]);
    write_mod(dir.path(), "beta", &[("watch", beta)]);
    // Both mods' enemies in one fight (one worker, a Lua state each).
    let both = dir.path().join("beta/dungeons.toml");
    let text = std::fs::read_to_string(&both)
        .unwrap()
        .replace("spawns = [", "spawns = [{ enemy = \"snoop\", x = 600.0, y = 150.0 }, ");
    std::fs::write(&both, text).unwrap();
    let c = load(dir.path());
    assert!(c.errors().next().is_none(), "{:?}", c.diagnostics);
    let o = fight(&c, "beta", 30, false);
    let logs = o.logs.join("\n");
    for want in [
        "alpha: pairs state is the view: true",
        "alpha: rep via pairs: false",
        "alpha: yield: false",
        "alpha: sqrt: false",
        "alpha: meta: false",
        "alpha: iterates function",
        "beta: secret nil, rep function, yield function, sqrt function",
    ] {
        assert!(logs.contains(want), "no '{want}' in:\n{logs}");
    }
}

#[test]
fn close_variables_are_refused_however_the_source_spells_them() {
    let dir = tempfile::tempdir().unwrap();
    let sneaky = "local h = setmetatable({}, {__close = function() while true do end end})\n\
                  do\n  local x <--[[ not a comparison ]]close\n  > = h\nend\n";
    // A generic `for`'s fourth value is to-be-closed as well, with no `<close>` written.
    let for_close = "for _ in next, {}, nil, setmetatable({}, {__close = function() end}) do end\nwait(1)\n";
    write_mod(dir.path(), "trap", &[("closer", sneaky), ("fine", "local y <const> = 3\nwait(y)\n")]);
    // (A mod of its own: the first is refused before its scripts ever run.)
    write_mod(dir.path(), "loops", &[("closing_for", for_close)]);
    let c = content::load(&[ModRoot::Mod(content::content_dir()), ModRoot::Folder(dir.path().to_path_buf())]);
    let errs: Vec<String> = c.errors().map(|d| d.to_string()).collect();
    // Lua places the mark where the statement ends.
    assert!(
        errs.iter().any(|e| e.contains("closer.lua:4:") && e.contains("<close>")),
        "the <close> is refused at its statement: {errs:?}"
    );
    assert!(!errs.iter().any(|e| e.contains("fine.lua")), "<const> is fine: {errs:?}");
    assert!(
        errs.iter().any(|e| e.contains("closing_for.lua:1") && e.contains("__close metamethods are not allowed")),
        "a closing value for a generic for is refused at its line: {errs:?}"
    );
}

#[test]
fn a_mod_that_keeps_killing_its_workers_is_disabled_until_a_reload() {
    let dir = tempfile::tempdir().unwrap();
    write_mod(dir.path(), "trap", &[("boom", &format!("{ALONE}{C_LOOP}"))]);
    let c = load(dir.path());
    let scripts = c.script_factory();
    let mut w = World::new(c.defs.clone(), scripts, 5);
    w.add_player(1, "p");
    let mut reasons = Vec::new();
    let mut refusals = Vec::new();
    for _ in 0..4 {
        w.enter_dungeon(1, "trap_pit").unwrap();
        for _ in 0..120 {
            for e in w.step() {
                match e {
                    SimEvent::InstanceStopped { reason, .. } => reasons.push(reason.clone()),
                    SimEvent::ScriptError { message, .. } if message.contains("disabled until") => {
                        refusals.push(message.clone())
                    }
                    _ => {}
                }
            }
            if w.instance_of(1) == Some(w.hub) {
                break;
            }
        }
    }
    // The fourth fight (its emitters refused) goes on without them: leave it for the Keep.
    assert_ne!(w.instance_of(1), Some(w.hub));
    w.enter_dungeon(1, "warden_keep").unwrap();
    assert_eq!(reasons.len(), 3, "three workers lost: {reasons:?}");
    assert!(!refusals.is_empty(), "the fourth fight refuses the mod's emitters");
    assert!(refusals[0].contains("mod 'trap' is disabled") && refusals[0].contains("lost 3 script workers"));
    // A reload (new factory) gives the mod another chance.
    w.reload(std::sync::Arc::new((*c.defs).clone()), c.script_factory());
    w.enter_dungeon(1, "trap_pit").unwrap();
    let mut stopped_again = false;
    for _ in 0..120 {
        stopped_again |= w.step().iter().any(|e| matches!(e, SimEvent::InstanceStopped { .. }));
    }
    assert!(stopped_again, "after a reload the mod runs (and is stopped) again");
}

#[test]
fn mods_check_runs_mods_in_workers_and_names_a_hanging_mod_at_its_line() {
    let dir = tempfile::tempdir().unwrap();
    write_mod(dir.path(), "trap", &[("hang", C_LOOP)]);
    let start = std::time::Instant::now();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hailfire"))
        .args(["mods", "check"])
        .arg(dir.path().join("trap"))
        .env("HAILFIRE_DATA_DIR", dir.path().join("data"))
        .env("HAILFIRE_CONFIG_DIR", dir.path().join("data"))
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(!out.status.success(), "{text}");
    assert!(text.contains("emitters/hang.lua:3:"), "the hanging line is named: {text}");
    assert!(text.contains("used more than 8 ms of CPU to answer one tick"), "{text}");
    // Not a timing assertion on the deadline: a bound that only a hang would break.
    assert!(start.elapsed().as_secs() < 60, "mods check finished");
}
