//! Content tests: the validator passes on everything we ship and asserts the game's
//! invariants; it fails, naming file and line, on every kind of broken mod; and the Lua
//! emitter API does what the modding guide says.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use hailfire::content::{self, validate, Content, ModRoot};
use hailfire::sim::instance::{Instance, InstanceKind};
use hailfire::sim::{Player, SimEvent, Vec2};

fn repo(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(p)
}

fn write(dir: &Path, rel: &str, text: &str) {
    let p = dir.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

const MANIFEST: &str = "id = \"broken\"\nname = \"Broken\"\nversion = \"0.1.0\"\ngame_version = \">=0.1.0\"\n[dependencies]\nbase = \">=0.1\"\n";

/// A mod with one hostile enemy using emitter `e`, whose script is `lua`.
fn mod_with_script(lua: &str) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    write(d.path(), "mod.toml", MANIFEST);
    write(
        d.path(),
        "enemies.toml",
        "[imp]\nname = \"Imp\"\nhp = 10\nradius = 10.0\nbehaviour = \"chase\"\nemitters = [\"e\"]\n",
    );
    write(d.path(), "emitters/e.lua", lua);
    d
}

fn check(dir: &Path) -> (usize, Vec<String>) {
    let r = validate::check(&[dir.to_path_buf()]);
    (r.errors(), r.diagnostics.iter().filter(|d| d.is_error()).map(|d| d.to_string()).collect())
}

fn assert_error(dir: &Path, file_line: &str, needle: &str) {
    let (n, errs) = check(dir);
    assert!(n > 0, "expected an error, got none");
    assert!(
        errs.iter().any(|e| e.contains(file_line) && e.contains(needle)),
        "expected an error at '{file_line}' containing '{needle}', got:\n{}",
        errs.join("\n")
    );
}

#[test]
fn shipped_content_and_mods_pass_the_validator() {
    // The base game as the game loads it, then with every shipped mod asked for.
    let r = validate::check(&[]);
    let errors: Vec<String> = r.diagnostics.iter().filter(|d| d.is_error()).map(|d| d.to_string()).collect();
    assert!(errors.is_empty(), "{}", errors.join("\n"));
    assert!(r.mods.iter().any(|m| m.id == "base" && m.loaded));
    assert!(r.emitters_run >= 5 && r.bosses_run >= 2, "the dry run actually ran emitters and bosses");
    let r = validate::check(&[content::content_dir().parent().unwrap().join("mods")]);
    let errors: Vec<String> = r.diagnostics.iter().filter(|d| d.is_error()).map(|d| d.to_string()).collect();
    assert!(errors.is_empty(), "{}", errors.join("\n"));
    assert!(r.mods.iter().any(|m| m.id == "example_spiral" && m.loaded));
    assert!(r.emitters_run >= 1, "the example's emitter ran");
    // Pointed at the base game's own folder (someone editing it): all of it runs, as with
    // no path, not only what runs a mod's scripts (which would be nothing).
    let all = validate::check(&[]);
    let r = validate::check(&[content::content_dir()]);
    assert_eq!((r.emitters_run, r.bosses_run, r.dungeons_run), (all.emitters_run, all.bosses_run, all.dungeons_run));
}

#[test]
fn game_invariants_hold_for_everything_loaded() {
    let c = content::load(&content::default_roots());
    assert!(c.errors().next().is_none(), "{:?}", c.diagnostics);
    let d = &c.defs;
    for e in d.enemies.values() {
        assert!(!e.hostile || !e.emitters.is_empty(), "hostile enemy '{}' has no emitter", e.id);
    }
    for b in d.bosses.values() {
        assert!(b.phases.len() >= 2 || b.id != "warden", "the Warden is multi-phase");
        assert_eq!(b.phases[0].hp_threshold, 1.0);
        assert!(b.phases.windows(2).all(|w| w[1].hp_threshold < w[0].hp_threshold), "boss '{}' phases ordered", b.id);
    }
    assert!(d.dungeons.len() >= 2, "at least two dungeons");
    assert!(
        d.enemies.values().any(|e| e.emitters.iter().any(|m| m.id.contains("shotgun"))),
        "a close-range shotgun enemy"
    );
    assert_eq!(d.portals().len(), d.dungeons.len(), "a hub portal per dungeon");
}

#[test]
fn contact_damage_cannot_be_expressed() {
    let d = tempfile::tempdir().unwrap();
    write(d.path(), "mod.toml", MANIFEST);
    write(
        d.path(),
        "enemies.toml",
        "[brute]\nname = \"Brute\"\nhp = 10\nradius = 10.0\nbehaviour = \"chase\"\ncontact_damage = 20\nemitters = []\n",
    );
    assert_error(d.path(), "enemies.toml:6:1", "no contact damage");
}

#[test]
fn bad_toml_is_reported_with_line_and_column() {
    let d = tempfile::tempdir().unwrap();
    write(d.path(), "mod.toml", MANIFEST);
    write(d.path(), "bullets.toml", "[a]\nradius = 4.0\ncolor = \"#ffffff\nshape = \"orb\"\n");
    assert_error(d.path(), "bullets.toml:3:", "TOML syntax");
    let d2 = tempfile::tempdir().unwrap();
    write(d2.path(), "mod.toml", MANIFEST);
    write(
        d2.path(),
        "bullets.toml",
        "[a]\nradius = \"big\"\ncolor = \"#ffffff\"\n\n[b]\nradius = 3.0\ncolr = \"#ffffff\"\n",
    );
    let (_, errs) = check(d2.path());
    assert!(errs.iter().any(|e| e.contains("bullets.toml:2:10") && e.contains("invalid type")), "{errs:?}");
    assert!(
        errs.iter().any(|e| e.contains("bullets.toml:7:1") && e.contains("unknown field `colr`")),
        "every error, not the first: {errs:?}"
    );
}

#[test]
fn a_name_players_could_not_decode_is_refused_when_the_mod_loads() {
    // A zero-width joiner in a ship's name: the wire refuses invisible characters, so the
    // server must refuse the mod rather than serve content every player would reject.
    let d = tempfile::tempdir().unwrap();
    write(d.path(), "mod.toml", MANIFEST);
    write(d.path(), "ships.toml", "[wasp]\nname = \"Wa\u{200D}sp\"\n");
    let (_, errs) = check(d.path());
    assert!(errs.iter().any(|e| e.contains("ships.toml:2") && e.contains("name must be")), "{errs:?}");
}

#[test]
fn a_ship_out_of_range_is_an_error_at_its_field() {
    let d = tempfile::tempdir().unwrap();
    write(d.path(), "mod.toml", MANIFEST);
    write(d.path(), "ships.toml", "[wasp]\nname = \"Wasp\"\nstars = 1\nshots = 40\ncooldown = 1\n");
    let (_, errs) = check(d.path());
    assert!(errs.iter().any(|e| e.contains("ships.toml:4") && e.contains("shots must be 1..=9")), "{errs:?}");
    assert!(errs.iter().any(|e| e.contains("ships.toml:5") && e.contains("cooldown must be 2..=60")), "{errs:?}");
    let d = tempfile::tempdir().unwrap();
    write(d.path(), "mod.toml", MANIFEST);
    write(d.path(), "ships.toml", "[wasp]\nname = \"Wasp\"\nshot = 3\n");
    assert_error(d.path(), "ships.toml:3:", "unknown field `shot`");
}

#[test]
fn missing_emitter_is_reported_where_it_is_referenced() {
    let d = tempfile::tempdir().unwrap();
    write(d.path(), "mod.toml", MANIFEST);
    write(
        d.path(),
        "enemies.toml",
        "[imp]\nname = \"Imp\"\nhp = 10\nradius = 10.0\nbehaviour = \"chase\"\nemitters = [\"ghost\"]\n",
    );
    assert_error(d.path(), "enemies.toml:6:1", "emitter 'ghost' does not exist");
}

#[test]
fn lua_syntax_error_names_file_and_line() {
    let d = mod_with_script("wait(1)\nlocal x = = 2\n");
    assert_error(d.path(), "emitters/e.lua:2", "Lua syntax");
}

#[test]
fn infinite_loop_is_stopped_by_the_instruction_limit() {
    let d = mod_with_script("wait(1)\nwhile true do end\n");
    assert_error(d.path(), "emitters/e.lua:2", "instruction limit");
}

#[test]
fn pcall_cannot_swallow_the_instruction_limit() {
    let d = mod_with_script("while true do\n  pcall(function() while true do end end)\nend\n");
    assert_error(d.path(), "emitters/e.lua", "instruction limit");
}

#[test]
fn memory_bomb_is_stopped_by_the_memory_limit() {
    let d = mod_with_script("local t, s = {}, 'x'\nwhile true do\n  s = s .. s\n  t[#t + 1] = s\nend\n");
    // The mod runs in a worker: filling 32 MiB takes about as long as its CPU deadline,
    // so either stops it first (the in-process limit alone: tests/hostile.rs).
    let (n, errs) = check(d.path());
    assert!(n > 0, "expected an error, got none");
    assert!(
        errs.iter().any(|e| e.contains("emitters/e.lua")
            && (e.contains("out of memory") || e.contains("ms of CPU to answer one tick"))),
        "{}",
        errs.join("\n")
    );
}

#[test]
fn io_open_is_not_there() {
    let d = mod_with_script("wait(1)\nlocal f = io.open('/etc/passwd')\n");
    assert_error(d.path(), "emitters/e.lua:2", "global 'io'");
}

#[test]
fn require_and_load_are_not_there() {
    let d = mod_with_script("wait(1)\nrequire('os')\n");
    assert_error(d.path(), "emitters/e.lua:2", "global 'require'");
    let d = mod_with_script("load('return 1')()\n");
    assert_error(d.path(), "emitters/e.lua:1", "global 'load'");
    let d = mod_with_script("string.dump(wait)\n");
    assert_error(d.path(), "emitters/e.lua:1", "dump");
}

#[test]
fn bytecode_files_are_refused() {
    let d = mod_with_script("");
    std::fs::write(d.path().join("emitters/e.lua"), b"\x1bLua\x54\x00junk").unwrap();
    assert_error(d.path(), "emitters/e.lua", "bytecode");
}

#[test]
fn dependency_problems_are_refused_with_a_clear_message() {
    let root = tempfile::tempdir().unwrap();
    let m = |id: &str, deps: &str| {
        format!(
            "id = \"{id}\"\nname = \"{id}\"\nversion = \"1.0.0\"\ngame_version = \">=0.1.0\"\n[dependencies]\n{deps}"
        )
    };
    write(root.path(), "a/mod.toml", &m("a", "b = \"*\"\n"));
    write(root.path(), "b/mod.toml", &m("b", "a = \"*\"\n"));
    write(root.path(), "c/mod.toml", &m("c", "nothere = \">=1\"\n"));
    write(root.path(), "d/mod.toml", &m("d", "base = \">=5.0\"\n"));
    write(root.path(), "e/mod.toml", "id = \"e\"\nname = \"e\"\nversion = \"1.0.0\"\ngame_version = \">=9.0\"\n");
    let (_, errs) = check(root.path());
    let has = |s: &str| errs.iter().any(|e| e.contains(s));
    assert!(has("dependency cycle"), "{errs:?}");
    assert!(has("depends on 'nothere'"), "{errs:?}");
    assert!(has("depends on 'base' >=5.0"), "{errs:?}");
    assert!(has("supports game version >=9.0"), "{errs:?}");
    // The game itself refuses them and still loads the base content.
    let c = content::load(&[ModRoot::Mod(content::content_dir()), ModRoot::Folder(root.path().to_path_buf())]);
    assert!(c.base_loaded());
    assert!(c.mods.iter().filter(|m| m.id != "base").all(|m| !m.loaded));
}

#[test]
fn boss_phases_must_be_ordered() {
    let d = tempfile::tempdir().unwrap();
    write(d.path(), "mod.toml", MANIFEST);
    write(d.path(), "emitters/e.lua", "while true do ring{n = 4} wait(30) end\n");
    write(
        d.path(),
        "bosses.toml",
        "[bad]\nname = \"Bad\"\nhp = 100\nradius = 20.0\n\n[[bad.phases]]\nname = \"one\"\nhp_threshold = 1.0\nemitters = [\"e\"]\n\n[[bad.phases]]\nname = \"two\"\nhp_threshold = 1.0\nemitters = [\"e\"]\n",
    );
    assert_error(d.path(), "bosses.toml", "strictly decreasing");
    // One message for the one mistake: not a second one, without a file, from the dry run.
    let (n, errs) = check(d.path());
    assert_eq!(n, 1, "{errs:#?}");
}

#[test]
fn a_broken_user_mod_never_stops_the_game_loading() {
    let d = mod_with_script("while true do end\n");
    let c = content::load(&[ModRoot::Mod(content::content_dir()), ModRoot::Mod(d.path().to_path_buf())]);
    assert!(c.base_loaded());
}

// ---- The Lua emitter API, driven through a real instance ----

fn instance_with(script: &str, seed: u64) -> (Instance, Arc<hailfire::sim::Defs>) {
    let d = mod_with_script(script);
    let c: Content =
        content::load_with(&[ModRoot::Mod(content::content_dir()), ModRoot::Mod(d.path().to_path_buf())], true);
    let defs = c.defs.clone();
    let factory = c.script_factory();
    let mut inst = Instance::new(1, InstanceKind::Dungeon("warden_keep".into()), &defs, factory.create(seed), seed);
    inst.arrive(Player::new(1, "p", Vec2::ZERO));
    (inst, defs)
}

fn run(inst: &mut Instance, defs: &hailfire::sim::Defs, from: u32, ticks: u32) -> Vec<SimEvent> {
    let mut all = Vec::new();
    let mut ev = Vec::new();
    let mut req = Vec::new();
    for t in from..from + ticks {
        inst.step(t, defs, &mut ev, &mut req);
        all.append(&mut ev);
    }
    all
}

fn spawned(ev: &[SimEvent]) -> Vec<hailfire::sim::BulletSpawn> {
    ev.iter().flat_map(|e| e.spawned()).collect()
}

#[test]
fn ring_fan_and_shot_fire_what_they_say() {
    let (mut inst, defs) = instance_with(
        "ring{n = 12, speed = 2, kind = 'orb'}\nwait(1)\nfan{n = 5, spread = 40, angle = 90, speed = 3}\nwait(1)\nshot{angle = 0, speed = 4, accel = 0.1, turn = 2, max_speed = 6, lifetime = 50}\nwait(1000)\n",
        1,
    );
    let mut ev = Vec::new();
    inst.spawn_enemy(&defs, "imp", Vec2::new(400.0, 300.0), &mut ev);
    let ev = run(&mut inst, &defs, 1, 3);
    let bursts = ev.iter().filter(|e| matches!(e, SimEvent::BurstSpawned { .. })).count();
    assert_eq!(bursts, 2, "the ring and the fan are one event each");
    let s = spawned(&ev);
    assert_eq!(s.len(), 12 + 5 + 1);
    let ring_angles: Vec<f32> = s[..12].iter().map(|b| b.angle.rem_euclid(360.0)).collect();
    for (i, a) in ring_angles.iter().enumerate() {
        let want = (90.0 + i as f32 * 30.0).rem_euclid(360.0);
        assert!((a - want).abs() < 0.01 || (a - want).abs() > 359.9, "ring bullet {i}: {a} vs {want}");
    }
    let fan: Vec<f32> = s[12..17].iter().map(|b| b.angle).collect();
    assert!((fan[0] - 70.0).abs() < 0.01 && (fan[4] - 110.0).abs() < 0.01, "{fan:?}");
    let last = s[17];
    // Snapped to the wire grid (1/4096 px/tick² and 1/256 degree/tick steps).
    assert!((last.accel - 0.1).abs() <= 0.5 / 4096.0 && (last.turn - 2.0).abs() < 1e-6, "{last:?}");
    assert_eq!((last.max_speed, last.lifetime), (6.0, 50));
}

#[test]
fn a_telegraph_shows_where_an_attack_will_go_and_changes_nothing_else() {
    // An aimed line at the one player, then a circle, then the shot along the line.
    let (mut inst, defs) = instance_with(
        "local a = aim('nearest')\ntelegraph{angle = a, length = 500, width = 2, ticks = 20}\nwait(1)\ntelegraph{radius = 40, ticks = 10, safe = true}\nwait(1)\ntelegraph{aim = 'nearest', x = 10, y = 20}\nwait(1000)\n",
        1,
    );
    inst.players[0].pos = Vec2::new(400.0, 600.0);
    let mut ev = Vec::new();
    inst.spawn_enemy(&defs, "imp", Vec2::new(400.0, 300.0), &mut ev);
    let ev = run(&mut inst, &defs, 1, 4);
    let t: Vec<_> = ev
        .iter()
        .filter_map(|e| match e {
            SimEvent::Telegraph { telegraph, .. } => Some(*telegraph),
            _ => None,
        })
        .collect();
    assert_eq!(t.len(), 3, "{t:?}");
    assert!(!t[0].circle && (t[0].angle - 90.0).abs() < 0.5, "aimed down at the player: {:?}", t[0]);
    assert_eq!((t[0].length, t[0].width, t[0].ticks), (500.0, 2.0, 20));
    assert!(t[1].circle && t[1].length == 40.0 && t[1].ticks == 10 && t[1].safe);
    assert!(!t[0].safe && !t[2].safe, "a warning unless asked");
    assert_eq!((t[2].pos, t[2].length, t[2].ticks), (Vec2::new(10.0, 20.0), 600.0, 30), "the defaults");
    assert!(spawned(&ev).is_empty(), "a telegraph fires nothing");
    // Mistakes are errors at their line, with a hint.
    let d = mod_with_script("wait(1)\ntelegraph{lenght = 300}\nwait(1000)\n");
    assert_error(d.path(), "e.lua:2", "unknown field 'lenght' (did you mean 'length'?)");
    let d = mod_with_script("wait(1)\n\ntelegraph{radius = 30, length = 300}\nwait(1000)\n");
    assert_error(d.path(), "e.lua:3", "not both");
    let d = mod_with_script("wait(1)\ntelegraph{ticks = 500}\nwait(1000)\n");
    assert_error(d.path(), "e.lua:2", "'ticks' must be 1..=240");
    let d = mod_with_script("wait(1)\ntelegraph{radius = 30, safe = 1}\nwait(1000)\n");
    assert_error(d.path(), "e.lua:2", "field 'safe' must be true or false, not number");
    let d = mod_with_script("wait(1)\nfor i = 1, 65 do telegraph{} end\nwait(1000)\n");
    assert_error(d.path(), "e.lua:2", "more than 64 telegraphs in one tick");
    // A number finite in Lua but not as the game's f32 is refused at its line (it would
    // have stopped the fight at the worker's decoder).
    let d = mod_with_script("wait(1)\ntelegraph{angle = 1e39}\nwait(1000)\n");
    assert_error(d.path(), "e.lua:2", "must be a finite number");
    let d = mod_with_script("wait(1)\nshot{x = -1e300}\nwait(1000)\n");
    assert_error(d.path(), "e.lua:2", "must be a finite number");
}

#[test]
fn hints_reach_the_players_in_order_and_bad_ones_are_errors_at_their_line() {
    let (mut inst, defs) = instance_with(
        "hint('Move with {move}')\nwait(2)\nhint('Hold {focus} to slow down')\nwait(1)\nhint('Flare!')\nwait(1000)\n",
        1,
    );
    let mut ev = Vec::new();
    inst.spawn_enemy(&defs, "imp", Vec2::new(400.0, 300.0), &mut ev);
    let ev = run(&mut inst, &defs, 1, 6);
    let said: Vec<&str> = ev
        .iter()
        .filter_map(|e| match e {
            SimEvent::Hint { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(said, ["Move with {move}", "Hold {focus} to slow down", "Flare!"]);
    let d = mod_with_script("wait(1)\nhint('')\nwait(1000)\n");
    assert_error(d.path(), "e.lua:2", "hint: the text must be 1..=160 bytes");
    let d = mod_with_script("wait(1)\n\nhint('ring\\7')\nwait(1000)\n");
    assert_error(d.path(), "e.lua:3", "no control characters");
    let d = mod_with_script("wait(1)\nfor i = 1, 5 do hint('x') end\nwait(1000)\n");
    assert_error(d.path(), "e.lua:2", "more than 4 hints in one tick");
}

#[test]
fn enemy_count_leave_and_an_enemy_that_cannot_be_hurt() {
    // The first imp counts itself and the two it spawned, waits for them to go (they leave
    // after five ticks), then leaves.
    let (mut inst, defs) = instance_with(
        "if me().id ~= 1 then wait(5) leave() wait(1000) end\nspawn('imp', 100, 100)\nspawn('imp', 200, 100)\nwait(1)\nlog('count ' .. enemy_count())\nwait_until(function() return enemy_count() <= 1 end)\nleave()\nwait(1000)\n",
        1,
    );
    let mut ev = Vec::new();
    inst.spawn_enemy(&defs, "imp", Vec2::new(400.0, 300.0), &mut ev);
    let ev = run(&mut inst, &defs, 1, 3);
    assert!(
        ev.iter().any(|e| matches!(e, SimEvent::ScriptLog { message, .. } if message.ends_with("count 3"))),
        "{ev:?}"
    );
    // Gone without dying: no death, no kill.
    let ev = run(&mut inst, &defs, 4, 10);
    assert!(inst.enemies.is_empty(), "{:?}", inst.enemies.iter().map(|e| e.id).collect::<Vec<_>>());
    assert!(!ev.iter().any(|e| matches!(e, SimEvent::Death { .. })), "leaving is not dying");
    // A boss cannot leave: an error at its line.
    let d = mod_with_script("wait(1)\nleave()\nwait(1000)\n");
    write(
        d.path(),
        "bosses.toml",
        "[ogre]\nname = \"Ogre\"\nhp = 100\nradius = 20.0\n[[ogre.phases]]\nname = \"One\"\nhp_threshold = 1.0\nemitters = [\"e\"]\n",
    );
    assert_error(d.path(), "e.lua:2", "a boss cannot leave");
    // damage_taken_mult = 0: shots land on it and take nothing.
    let c = content::load(&[ModRoot::Mod(content::content_dir())]);
    assert_eq!(c.defs.enemies["tutorial_proctor"].damage_taken_mult, 0.0);
    let d = mod_with_script("wait(1000)\n");
    write(
        d.path(),
        "enemies.toml",
        "[imp]\nname = \"Imp\"\nhp = 10\nradius = 10.0\nbehaviour = \"chase\"\nemitters = [\"e\"]\ndamage_taken_mult = -1.0\n",
    );
    assert_error(d.path(), "enemies.toml", "damage_taken_mult must be 0..=10");
}

#[test]
fn an_undefined_global_is_an_error_at_its_line_with_a_suggestion() {
    // The mistake a modder made: a misspelt name in a firing table read as nil, the field
    // fell back to its default, the bullets stopped curving, and nothing said so.
    let d = mod_with_script("drift = 0.6\nwait(1)\nring{n = 4, turn = dirft}\nwait(1000)\n");
    assert_error(d.path(), "e.lua:3", "undefined global 'dirft' (did you mean 'drift'?)");
    let d = mod_with_script("wait(1)\n\nwiat(3)\nwait(1000)\n");
    assert_error(d.path(), "e.lua:3", "undefined global 'wiat' (did you mean 'wait'?)");
    // The deliberate test stays possible; the mod's own globals and the API read as ever.
    let d = mod_with_script(
        "function helper() return 2 end\ncount = 1\nif rawget(_ENV, 'maybe') == nil then count = count + helper() end\nwait(1)\nring{n = count, speed = math.max(1, 2)}\nwait(1000)\n",
    );
    let (n, errs) = check(d.path());
    assert_eq!(n, 0, "{errs:?}");
}

#[test]
fn a_folder_without_a_mod_fails_the_check_and_says_what_it_looked_for() {
    // An empty folder: nothing to check is a failure, not "0 errors" on the base game.
    let empty = tempfile::tempdir().unwrap();
    let (n, errs) = check(empty.path());
    assert!(n > 0, "an empty folder passed the check");
    assert!(errs.iter().any(|e| e.contains("no mod here: looked for") && e.contains("/*/mod.toml")), "{errs:?}");
    // A mod whose manifest is misnamed, checked directly: the message names the file.
    let d = mod_with_script("wait(1000)\n");
    std::fs::rename(d.path().join("mod.toml"), d.path().join("Mod.toml")).unwrap();
    assert_error(d.path(), "", "it has no mod.toml, but has 'Mod.toml'");
    // In a folder of mods: the good one is checked, the misnamed one is named as skipped.
    let root = tempfile::tempdir().unwrap();
    let good = root.path().join("good_mod");
    write(&good, "mod.toml", MANIFEST);
    let bad = root.path().join("bad_mod");
    write(&bad, "mods.toml", MANIFEST);
    write(&bad, "emitters/e.lua", "wait(1000)\n");
    let r = validate::check(&[root.path().to_path_buf()]);
    assert_eq!(r.errors(), 0, "{:?}", r.diagnostics);
    assert!(r.mods.iter().any(|m| m.dir.ends_with("good_mod")), "{:?}", r.mods);
    let warned: Vec<String> = r.diagnostics.iter().filter(|d| !d.is_error()).map(|d| d.to_string()).collect();
    assert!(
        warned.iter().any(|w| w.contains("bad_mod") && w.contains("skipped") && w.contains("'mods.toml'")),
        "{warned:?}"
    );
    // And what `mods list` shows comes from the same place.
    let skipped = hailfire::content::loader::skipped(&[ModRoot::Folder(root.path().to_path_buf())]);
    assert_eq!(skipped.len(), 1, "{skipped:?}");
}

#[test]
fn a_phase_with_clear_adds_sends_the_summons_away_and_one_without_keeps_them() {
    for clear in [false, true] {
        let d = mod_with_script("wait(1000)\n");
        write(d.path(), "emitters/summon.lua", "spawn('imp', 100, 100)\nspawn('imp', 200, 100)\nwait(100000)\n");
        write(d.path(), "emitters/calm.lua", "wait(100000)\n");
        write(
            d.path(),
            "bosses.toml",
            &format!("[ogre]\nname = \"Ogre\"\nhp = 1000\nradius = 20.0\n[[ogre.phases]]\nname = \"One\"\nhp_threshold = 1.0\nemitters = [\"summon\"]\n[[ogre.phases]]\nname = \"Two\"\nhp_threshold = 0.5\nclear_adds = {clear}\nemitters = [\"calm\"]\n"),
        );
        write(
            d.path(),
            "dungeons.toml",
            "[den]\nname = \"Den\"\narena = [800.0, 600.0]\nspawn = [400.0, 500.0]\nboss = \"ogre\"\nboss_pos = [400.0, 150.0]\n",
        );
        let c: Content =
            content::load_with(&[ModRoot::Mod(content::content_dir()), ModRoot::Mod(d.path().to_path_buf())], true);
        assert!(c.errors().next().is_none(), "{:?}", c.diagnostics);
        let defs = c.defs.clone();
        let mut inst = Instance::new(1, InstanceKind::Dungeon("den".into()), &defs, c.script_factory().create(1), 1);
        inst.arrive(Player::new(1, "p", Vec2::new(400.0, 500.0)));
        let mut ev = Vec::new();
        inst.start_boss(&defs, 1, &mut ev);
        run(&mut inst, &defs, 1, 3);
        assert_eq!(inst.enemies.len(), 2, "the summons came");
        inst.force_boss_hp(&defs, 0.4, &mut ev);
        let later = run(&mut inst, &defs, 4, 3);
        assert_eq!(inst.boss.as_ref().unwrap().phase, 1);
        assert_eq!(inst.enemies.len(), if clear { 0 } else { 2 }, "clear_adds = {clear}");
        assert!(!later.iter().chain(&ev).any(|e| matches!(e, SimEvent::Death { .. })), "leaving is not dying");
    }
}

#[test]
fn mistakes_are_told_in_a_modders_words_at_the_mods_line() {
    // Types in words, not Rust's ("expected i64").
    let d = mod_with_script("wait(1)\nlocal a = rand_int('a', 2)\nwait(1000)\n");
    assert_error(d.path(), "e.lua:2", "bad argument #1: expected an integer (a whole number), got a string");
    // Lua's refusal of a protected metatable, at the mod's line (not inside the prelude).
    let d = mod_with_script("wait(1)\n\nsetmetatable(string, {})\nwait(1000)\n");
    assert_error(d.path(), "e.lua:3", "cannot change a protected metatable");
    let (_, errs) = check(d.path());
    assert!(!errs.iter().any(|e| e.contains("prelude")), "{errs:?}");
    // A loop that fires without waiting: the fix, in the message.
    let d = mod_with_script("wait(1)\nwhile true do ring{n = 720} end\n");
    assert_error(d.path(), "e.lua:2", "needs a wait()");
}

#[test]
fn a_bad_value_from_toml_args_names_the_entry_that_passed_it() {
    let d = mod_with_script("wait(1)\nring{n = args.n}\nwait(1000)\n");
    write(
        d.path(),
        "enemies.toml",
        "[imp]\nname = \"Imp\"\nhp = 10\nradius = 10.0\nbehaviour = \"chase\"\nemitters = [{ id = \"e\", args = { n = \"many\" } }]\n",
    );
    // The Lua line that used the value, and the TOML entry that passed it.
    assert_error(d.path(), "e.lua:2", "field 'n' must be a number, got string");
    let (_, errs) = check(d.path());
    assert!(errs.iter().any(|e| e.contains("e.lua:2") && e.contains("enemies.toml:6")), "{errs:#?}");
}

#[test]
fn rules_are_the_games_own_numbers() {
    use hailfire::sim::config::*;
    let (mut inst, defs) = instance_with(
        "local r = rules()\nlog(string.format('%d %d %g %g %g %g %d %g %d', r.tick_rate, r.player_hp, r.player_speed, r.hitbox_radius, r.graze_radius, r.flare_radius, r.downed_ticks, r.revive_range, r.revive_ticks))\nwait(1000)\n",
        1,
    );
    let mut ev = Vec::new();
    inst.spawn_enemy(&defs, "imp", Vec2::new(400.0, 300.0), &mut ev);
    let ev = run(&mut inst, &defs, 1, 2);
    let want = format!(
        "{} {} {} {} {} {} {} {} {}",
        TICK_RATE,
        PLAYER_MAX_HP,
        PLAYER_SPEED * TICK_RATE as f32,
        PLAYER_HITBOX_RADIUS,
        GRAZE_RADIUS,
        FLARE_RADIUS,
        DOWNED_TICKS,
        REVIVE_RANGE,
        REVIVE_TICKS
    );
    assert!(
        ev.iter().any(|e| matches!(e, SimEvent::ScriptLog { message, .. } if message.ends_with(&want))),
        "want {want}: {ev:?}"
    );
}

#[test]
fn waiting_costs_nothing_and_tasks_die_with_their_owner() {
    let (mut inst, defs) = instance_with(
        "task(function() while true do shot{speed = 1} wait(10) end end)\nevery(5, 3, function(i) shot{speed = 2} end)\nwait(100000)\n",
        2,
    );
    let mut ev = Vec::new();
    inst.spawn_enemy(&defs, "imp", Vec2::new(400.0, 300.0), &mut ev);
    let s = spawned(&run(&mut inst, &defs, 1, 40));
    assert_eq!(s.iter().filter(|b| b.speed > 1.5).count(), 3, "every(5, 3, ...) fires three times");
    assert_eq!(s.iter().filter(|b| b.speed < 1.5).count(), 4, "the task fires at 1, 11, 21, 31");
    assert_eq!(inst.script_tasks(), 2, "main + task (every's task finished)");
    // Kill the enemy: its tasks go with it.
    inst.enemies[0].hp = 1;
    let pos = inst.enemies[0].pos;
    let shot = hailfire::sim::script::ShotCmd {
        pos,
        angle: 0.0,
        speed: 0.0,
        radius: 4.0,
        lifetime: 5,
        kind: 0,
        accel: 0.0,
        turn: 0.0,
        max_speed: f32::INFINITY,
        damage: 10,
    };
    inst.spawn_bullet(41, &shot, hailfire::sim::Team::Player, &mut ev);
    run(&mut inst, &defs, 41, 1);
    assert!(inst.enemies.is_empty());
    // A mod's scripts run in a worker, which counts its tasks when it next answers.
    run(&mut inst, &defs, 42, 1);
    assert_eq!(inst.script_tasks(), 0, "tasks died with their owner");
}

#[test]
fn rand_is_seeded_per_instance() {
    let src = "for i = 1, 5 do shot{angle = rand(0, 360), speed = rand_int(1, 4)} end\nwait(1000)\n";
    let angles = |seed| {
        let (mut inst, defs) = instance_with(src, seed);
        let mut ev = Vec::new();
        inst.spawn_enemy(&defs, "imp", Vec2::new(400.0, 300.0), &mut ev);
        spawned(&run(&mut inst, &defs, 1, 1)).iter().map(|b| (b.angle.to_bits(), b.speed.to_bits())).collect::<Vec<_>>()
    };
    assert_eq!(angles(5), angles(5));
    assert_ne!(angles(5), angles(6));
}

#[test]
fn a_script_error_disables_only_that_emitter_and_the_world_keeps_ticking() {
    let (mut inst, defs) = instance_with("wait(3)\nshot{kind = 'no_such_kind'}\n", 3);
    let mut ev = Vec::new();
    inst.spawn_enemy(&defs, "imp", Vec2::new(400.0, 300.0), &mut ev);
    inst.spawn_enemy(&defs, "turret", Vec2::new(200.0, 300.0), &mut ev);
    let ev = run(&mut inst, &defs, 1, 200);
    let errs: Vec<&String> = ev
        .iter()
        .filter_map(|e| if let SimEvent::ScriptError { message, .. } = e { Some(message) } else { None })
        .collect();
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(
        errs[0].contains("mod 'broken'") && errs[0].contains("e.lua:2") && errs[0].contains("unknown bullet kind"),
        "{}",
        errs[0]
    );
    assert!(spawned(&ev).len() > 10, "the turret kept firing");
}

#[test]
fn scripts_cannot_reach_the_host() {
    let (mut inst, defs) = instance_with(
        "local bad = {}\nfor _, n in ipairs({'io', 'os', 'debug', 'package', 'dofile', 'loadfile', 'load', 'require', 'collectgarbage'}) do\n  local ok, v = pcall(function() return _G[n] end)\n  if ok and v ~= nil then bad[#bad + 1] = n end\nend\nlog('exposed: ' .. table.concat(bad, ','))\nwait(1000)\n",
        4,
    );
    let mut ev = Vec::new();
    inst.spawn_enemy(&defs, "imp", Vec2::new(400.0, 300.0), &mut ev);
    let ev = run(&mut inst, &defs, 1, 1);
    let logs: Vec<&String> = ev
        .iter()
        .filter_map(|e| if let SimEvent::ScriptLog { message, .. } = e { Some(message) } else { None })
        .collect();
    assert_eq!(logs, vec!["exposed: "]);
}

#[test]
fn validator_cli_lists_every_error_and_exits_non_zero() {
    let d = tempfile::tempdir().unwrap();
    write(d.path(), "mod.toml", MANIFEST);
    write(
        d.path(),
        "enemies.toml",
        "[a]\nname = \"A\"\nhp = 10\nradius = 10.0\nbehaviour = \"chase\"\nemitters = [\"loop\", \"io\"]\n",
    );
    write(d.path(), "emitters/loop.lua", "while true do end\n");
    write(d.path(), "emitters/io.lua", "io.open('x')\n");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hailfire"))
        .args(["mods", "check"])
        .arg(d.path())
        .current_dir(repo(""))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("loop.lua:1") && text.contains("instruction limit"), "{text}");
    assert!(text.contains("io.lua:1") && text.contains("global 'io'"), "{text}");
    let ok = std::process::Command::new(env!("CARGO_BIN_EXE_hailfire"))
        .args(["mods", "check"])
        .current_dir(repo(""))
        .output()
        .unwrap();
    assert!(ok.status.success(), "{}", String::from_utf8_lossy(&ok.stdout));
}

#[test]
fn mods_turned_off_for_hosting_are_left_out_and_their_dependents_refused() {
    let d = tempfile::tempdir().unwrap();
    let a = hailfire::content::sample::write_mod(d.path(), "alpha", 0).unwrap();
    write(
        d.path(),
        "beta/mod.toml",
        "id = \"beta\"\nname = \"Beta\"\nversion = \"1.0.0\"\ngame_version = \">=0.1.0\"\n[dependencies]\nalpha = \">=1.0\"\n",
    );
    let roots = [ModRoot::Mod(content::content_dir()), ModRoot::Mod(a), ModRoot::Mod(d.path().join("beta"))];
    let on = content::load_filtered(&roots, false, &[]);
    assert!(on.mods.iter().all(|m| m.loaded && m.enabled), "{:?}", on.mods);
    assert!(on.defs.dungeons.contains_key("alpha_pit"));
    let off = content::load_filtered(&roots, false, &["alpha".to_string(), "base".to_string()]);
    let alpha = off.mods.iter().find(|m| m.id == "alpha").unwrap();
    assert!(!alpha.enabled && !alpha.loaded);
    assert!(!off.defs.dungeons.contains_key("alpha_pit"), "a disabled mod's content is not loaded");
    assert!(off.base_loaded(), "the base game cannot be turned off");
    assert!(!off.mods.iter().find(|m| m.id == "beta").unwrap().loaded, "beta needs alpha");
    assert!(
        off.diagnostics.iter().any(|x| x.to_string().contains("alpha")),
        "the refusal says which dependency is missing: {:?}",
        off.diagnostics
    );
}

#[test]
fn content_players_would_refuse_does_not_load_on_the_server() {
    let d = tempfile::tempdir().unwrap();
    let m = hailfire::content::sample::write_mod(d.path(), "wide", 0).unwrap();
    // A portal outside the hub: players' games would refuse it, so the server does too.
    let text = std::fs::read_to_string(m.join("dungeons.toml"))
        .unwrap()
        .replace("portal = [700.0, 420.0]", "portal = [5000.0, 420.0]");
    std::fs::write(m.join("dungeons.toml"), text).unwrap();
    let c = content::load(&[ModRoot::Mod(content::content_dir()), ModRoot::Mod(m)]);
    let errs: Vec<String> = c.errors().map(|e| e.to_string()).collect();
    assert!(
        errs.iter().any(|e| e.contains("dungeons.toml:") && e.contains("wide_pit") && e.contains("portal")),
        "the mod's own check names file and line: {errs:?}"
    );
    assert!(!c.mods.iter().find(|m| m.id == "wide").unwrap().loaded, "and the mod is refused");
}

#[test]
fn lua_math_gives_the_portable_bits_not_the_platforms() {
    // Arguments where musl's algorithms (the `libm` crate) and glibc disagree in the last
    // bit: a script must get musl's answer on every platform, like the simulation does.
    type Portable = fn(f64) -> f64;
    let cases: [(&str, f64, Portable); 6] = [
        ("sin", 0.08771999999999999, libm::sin),
        ("cos", 0.148393, libm::cos),
        ("tan", 0.05848, libm::tan),
        ("exp", 0.057018, libm::exp),
        ("log", 0.004386, libm::log),
        ("asin", 0.005356, libm::asin),
    ];
    let calls: Vec<String> = cases.iter().map(|(f, x, _)| format!("string.format('%.17g', math.{f}({x:?}))")).collect();
    let script = format!("log({})\nwait(1000)\n", calls.join(", "));
    let (mut inst, defs) = instance_with(&script, 5);
    let mut ev = Vec::new();
    inst.spawn_enemy(&defs, "imp", Vec2::new(400.0, 300.0), &mut ev);
    let ev = run(&mut inst, &defs, 1, 1);
    let line = ev
        .iter()
        .find_map(|e| if let SimEvent::ScriptLog { message, .. } = e { Some(message.clone()) } else { None })
        .expect("the script logged");
    let got: Vec<f64> = line.split(' ').map(|v| v.parse().unwrap()).collect();
    for ((name, x, portable), g) in cases.iter().zip(&got) {
        assert_eq!(
            g.to_bits(),
            portable(*x).to_bits(),
            "math.{name}({x:?}) = {g:?}, want the portable {:?}",
            portable(*x)
        );
    }
    // math.atan(y, x) is the portable atan2.
    let (mut inst, defs) = instance_with("log(string.format('%.17g', math.atan(1, 3)))\nwait(1000)\n", 5);
    let mut ev2 = Vec::new();
    inst.spawn_enemy(&defs, "imp", Vec2::new(400.0, 300.0), &mut ev2);
    let ev = run(&mut inst, &defs, 1, 1);
    let v: f64 = ev
        .iter()
        .find_map(|e| if let SimEvent::ScriptLog { message, .. } = e { message.parse().ok() } else { None })
        .unwrap();
    assert_eq!(v.to_bits(), libm::atan2(1.0, 3.0).to_bits());
}

#[test]
fn party_size_tells_an_emitter_the_party_the_run_is_scaled_for() {
    let (mut inst, defs) = instance_with("log('party ' .. party_size())\nwait(1000)\n", 4);
    for id in 2..=3 {
        inst.arrive(Player::new(id, "p", Vec2::ZERO));
    }
    let mut ev = Vec::new();
    inst.spawn_enemy(&defs, "imp", Vec2::new(400.0, 300.0), &mut ev);
    let ev = run(&mut inst, &defs, 1, 1);
    let logs: Vec<&String> = ev
        .iter()
        .filter_map(|e| if let SimEvent::ScriptLog { message, .. } = e { Some(message) } else { None })
        .collect();
    assert_eq!(logs, vec!["party 3"]);
}

#[test]
fn the_modding_guide_documents_exactly_the_emitter_api() {
    use hailfire::content::lua::spec;
    let doc =
        std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/MODDING.md")).unwrap();
    let start = doc.find("## Emitters").expect("an Emitters section");
    let section = &doc[start..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |e| e + 3)];
    // Every function a table row documents exists...
    let mut documented = std::collections::BTreeSet::new();
    for line in section.lines().filter(|l| l.starts_with("| `")) {
        let name: String = line[3..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
        let after = line[3 + name.len()..].chars().next();
        if matches!(after, Some('(') | Some('{')) {
            documented.insert(name);
        }
    }
    let described: std::collections::BTreeSet<String> = spec::FUNCTIONS.iter().map(|f| f.name.to_string()).collect();
    let phantom: Vec<_> = documented.difference(&described).collect();
    assert!(phantom.is_empty(), "documented but not part of the API: {phantom:?}");
    // ...and every function of the API is documented (in a table or in the prose).
    for f in spec::FUNCTIONS {
        assert!(
            section.contains(&format!("`{}(", f.name)) || section.contains(&format!("`{}{{", f.name)),
            "docs/MODDING.md does not document {}",
            f.name
        );
    }
    for f in spec::SHOT_FIELDS.iter().chain(spec::FAN_FIELDS).chain(spec::RING_FIELDS).chain(spec::TELEGRAPH_FIELDS) {
        assert!(section.contains(&format!("`{}`", f.name)), "the firing field {} is not documented", f.name);
    }
    assert!(documented.len() >= 15, "the tables were found ({documented:?})");
}

#[test]
fn a_misspelt_firing_field_or_aim_target_is_an_error_at_its_line_with_a_hint() {
    let d = mod_with_script("wait(1)\n\nshot{spede = 3}\nwait(1000)\n");
    assert_error(d.path(), "e.lua:3", "unknown field 'spede' (did you mean 'speed'?)");
    let d = mod_with_script("wait(1)\nring{n = 8, lifetim = 60}\nwait(1000)\n");
    assert_error(d.path(), "e.lua:2", "did you mean 'lifetime'?");
    // `spread` belongs to fans; on a ring it is a mistake, and the hint lists what fits.
    let d = mod_with_script("ring{n = 8, spread = 40}\nwait(1000)\n");
    assert_error(d.path(), "e.lua:1", "unknown field 'spread'");
    let d = mod_with_script("wait(2)\nfan{n = 3, aim = \"closest\"}\nwait(1000)\n");
    assert_error(d.path(), "e.lua:2", "unknown target 'closest'");
    // Every documented field is accepted.
    let ok = mod_with_script(
        "shot{kind = 'orb', x = 1, y = 2, angle = 3, speed = 1, accel = 0, max_speed = 2, turn = 1, lifetime = 9, offset = 1, radius = 3, damage = 1}\nring{n = 3}\nfan{n = 2, spread = 10, aim = 'nearest'}\nwait(1000)\n",
    );
    let (n, errs) = check(ok.path());
    assert_eq!(n, 0, "{errs:?}");
}

#[test]
fn mods_new_makes_a_mod_that_passes_the_checker_and_carries_editor_files() {
    let d = tempfile::tempdir().unwrap();
    let m = hailfire::content::scaffold::new_mod(d.path(), "first_mod").unwrap();
    let r = validate::check(std::slice::from_ref(&m));
    let errs: Vec<String> = r.diagnostics.iter().map(|d| d.to_string()).collect();
    assert_eq!(r.errors(), 0, "{}", errs.join("\n"));
    assert!(r.mods.iter().any(|x| x.id == "first_mod" && x.loaded));
    assert!(r.bosses_run >= 1 && r.phases_run >= 2 && r.emitters_run >= 1, "its boss, phases and enemy were dry-run");
    let stubs = std::fs::read_to_string(m.join("hailfire.d.lua")).unwrap();
    assert!(
        stubs.starts_with("---@meta") && stubs.contains("---@class (exact) hf.Shot") && stubs.contains("---@param")
    );
    assert!(std::fs::read_to_string(m.join(".luarc.json")).unwrap().contains("hailfire.d.lua"));
    // The game loads it too: its dungeon exists next to the base game's.
    let c = content::load(&[ModRoot::Mod(content::content_dir()), ModRoot::Mod(m.clone())]);
    assert!(c.defs.dungeons.contains_key("first_mod_arena") && c.errors().next().is_none());
    // An existing folder is never overwritten; bad ids are refused with the rule.
    std::fs::write(m.join("mod.toml"), "mine").unwrap();
    let e = hailfire::content::scaffold::new_mod(d.path(), "first_mod").unwrap_err();
    assert!(e.contains("already exists"), "{e}");
    assert_eq!(std::fs::read_to_string(m.join("mod.toml")).unwrap(), "mine");
    for bad in ["", "Caps", "9lives", "has-dash", "base"] {
        assert!(hailfire::content::scaffold::new_mod(d.path(), bad).is_err(), "'{bad}' accepted");
    }
    // `mods stubs` refreshes the editor files.
    std::fs::write(m.join("hailfire.d.lua"), "old").unwrap();
    hailfire::content::scaffold::write_stubs(&m).unwrap();
    assert!(std::fs::read_to_string(m.join("hailfire.d.lua")).unwrap().starts_with("---@meta"));
}

/// A fresh `mods new` mod in a temporary folder, with `edit` applied to its files.
fn scaffolded(edit: impl FnOnce(&Path)) -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let m = hailfire::content::scaffold::new_mod(d.path(), "fm").unwrap();
    edit(&m);
    (d, m)
}

fn append(p: &Path, text: &str) {
    let mut s = std::fs::read_to_string(p).unwrap();
    s.push_str(text);
    std::fs::write(p, s).unwrap();
}

fn all_diags(dir: &Path) -> Vec<String> {
    validate::check(&[dir.to_path_buf()]).diagnostics.iter().map(|d| d.to_string()).collect()
}

#[test]
fn errors_in_a_later_phase_or_wave_point_at_that_table() {
    let (_d, m) = scaffolded(|m| {
        append(
            &m.join("bosses.toml"),
            "\n[[fm_boss.phases]]\nname = \"Third\"\nhp_threshold = 0.7\nemitters = [\"fm_boss_rings\"]\n",
        );
        append(
            &m.join("dungeons.toml"),
            "\n[[fm_arena.waves]]\ndelay = 30\nspawns = [{ enemy = \"nobody\", x = 10.0, y = 10.0 }]\n",
        );
    });
    let bosses = std::fs::read_to_string(m.join("bosses.toml")).unwrap();
    let third = bosses.lines().position(|l| l.contains("name = \"Third\"")).unwrap(); // 0-based: the header's line
    let dungeons = std::fs::read_to_string(m.join("dungeons.toml")).unwrap();
    let wave2 =
        dungeons.lines().collect::<Vec<_>>().iter().rposition(|l| l.starts_with("[[fm_arena.waves]]")).unwrap() + 1;
    assert_error(&m, &format!("bosses.toml:{third}:"), "phase 3 'Third': phases must be ordered");
    assert_error(&m, &format!("dungeons.toml:{wave2}:"), "wave 2: enemy 'nobody' does not exist");
}

#[test]
fn one_root_error_gives_one_message() {
    // A syntax error in an emitter: not also "emitter does not exist" for its enemy.
    let (_d, m) =
        scaffolded(|m| std::fs::write(m.join("emitters/fm_sentry_fan.lua"), "wait(1)\nlocal x = = 1\n").unwrap());
    let diags = all_diags(&m);
    assert!(diags.iter().any(|d| d.contains("fm_sentry_fan.lua:2") && d.contains("Lua syntax")), "{diags:#?}");
    assert!(!diags.iter().any(|d| d.contains("does not exist")), "no cascade: {diags:#?}");
    // A misspelt field in a boss: one error with a hint, not "boss does not exist" for its
    // dungeon nor "emitter not used" for its emitters.
    let (_d, m) = scaffolded(|m| {
        let p = m.join("bosses.toml");
        let s = std::fs::read_to_string(&p).unwrap().replace("hp = 1800", "hpp = 1800");
        std::fs::write(p, s).unwrap();
    });
    let diags = all_diags(&m);
    assert_eq!(diags.len(), 1, "exactly one message: {diags:#?}");
    assert!(diags[0].contains("unknown field `hpp`") && diags[0].contains("did you mean `hp`?"), "{}", diags[0]);
}

#[test]
fn unknown_sounds_are_warnings_at_their_line_play_nothing_and_the_list_is_documented() {
    // A sound this game lacks never refuses the mod: the checker warns, once, at its line.
    let d = mod_with_script("wait(1)\nsfx(\"shotgun\")\nwhile true do sfx(\"shotgn\") wait(10) end\n");
    let r = validate::check(&[d.path().to_path_buf()]);
    assert_eq!(r.errors(), 0, "{:?}", r.diagnostics);
    assert!(r.mods.iter().any(|m| m.id == "broken" && m.loaded), "the mod loads");
    let warned: Vec<String> = r.diagnostics.iter().filter(|x| !x.is_error()).map(|x| x.to_string()).collect();
    let said: Vec<&String> = warned.iter().filter(|w| w.contains("unknown sound 'shotgn'")).collect();
    assert_eq!(said.len(), 1, "{warned:#?}");
    assert!(
        said[0].contains("e.lua:3") && said[0].contains("did you mean 'shotgun'?") && said[0].contains("plays nothing")
    );
    // It plays nothing: only the known sound reaches the fight.
    let (mut inst, defs) = instance_with("sfx(\"shotgun\")\nsfx(\"shotgn\")\nwait(1000)\n", 1);
    let mut ev = Vec::new();
    inst.spawn_enemy(&defs, "imp", Vec2::new(400.0, 300.0), &mut ev);
    let ev = run(&mut inst, &defs, 1, 2);
    let sounds: Vec<&String> =
        ev.iter().filter_map(|e| if let SimEvent::Sfx { name, .. } = e { Some(name) } else { None }).collect();
    assert_eq!(sounds, vec!["shotgun"]);
    let doc = std::fs::read_to_string(repo("docs/MODDING.md")).unwrap();
    for s in hailfire::content::lua::spec::SOUNDS {
        assert!(doc.contains(&format!("`{s}`")), "docs/MODDING.md lists the sound {s}");
    }
}

#[test]
fn redefining_another_mods_id_is_a_warning_naming_both_places() {
    let (_d, m) = scaffolded(|m| {
        append(&m.join("bullets.toml"), "\n[orb]\nradius = 3.0\ncolor = \"#ffffff\"\nshape = \"orb\"\ndamage = 1\n")
    });
    let r = validate::check(std::slice::from_ref(&m));
    assert_eq!(r.errors(), 0);
    let w: Vec<String> = r.diagnostics.iter().filter(|d| !d.is_error()).map(|d| d.to_string()).collect();
    assert!(
        w.iter().any(|d| d.contains("bullet kind 'orb' is defined again")
            && d.contains("fm/bullets.toml:")
            && d.contains("content/bullets.toml:")),
        "{w:#?}"
    );
}

#[test]
fn the_dry_run_holds_every_boss_phase_and_shows_the_logs() {
    let (_d, m) = scaffolded(|m| {
        for (f, phase) in [("fm_boss_rings", 1), ("fm_boss_spiral", 2)] {
            let p = m.join(format!("emitters/{f}.lua"));
            let s = std::fs::read_to_string(&p).unwrap();
            std::fs::write(p, format!("log(\"phase {phase} ran, me().phase = \" .. me().phase)\n{s}")).unwrap();
        }
        // A third phase whose emitter fails only 20 s in (its third attack, say): the dry
        // run must get there, and stay long enough, to see it.
        append(
            &m.join("bosses.toml"),
            "\n[[fm_boss.phases]]\nname = \"Last\"\nhp_threshold = 0.1\nemitters = [\"fm_last\"]\n",
        );
        std::fs::write(m.join("emitters/fm_last.lua"), "wait(1200)\nshot{kind = \"no_such_kind\"}\n").unwrap();
    });
    let r = validate::check(std::slice::from_ref(&m));
    assert!(r.logs.iter().any(|l| l.contains("phase 1 ran, me().phase = 1")), "{:?}", r.logs);
    assert!(r.logs.iter().any(|l| l.contains("phase 2 ran, me().phase = 2")), "{:?}", r.logs);
    let errs: Vec<String> = r.diagnostics.iter().filter(|d| d.is_error()).map(|d| d.to_string()).collect();
    assert!(errs.iter().any(|e| e.contains("fm_last.lua:2") && e.contains("unknown bullet kind")), "{errs:#?}");
    assert!(!errs.iter().any(|e| e.contains("could not be held")), "{errs:#?}");
    // Where and when: the phase by number and name, and the time into it.
    let e = errs.iter().find(|e| e.contains("unknown bullet kind")).unwrap();
    assert!(e.contains("boss 'fm_boss' phase 3 \"Last\", 20.0 s in"), "{e}");
    // One message for the one mistake (the boss alone and in its dungeon both meet it).
    assert_eq!(errs.iter().filter(|e| e.contains("unknown bullet kind")).count(), 1, "{errs:#?}");
    assert_eq!(r.phase_ticks, validate::DRY_RUN_PHASE_TICKS);
}

#[test]
fn the_checker_and_the_game_agree_on_a_mod_whose_dry_run_fails() {
    // It parses, its references resolve; only running it shows the mistake.
    let (_d, m) = scaffolded(|m| {
        std::fs::write(m.join("emitters/fm_sentry_fan.lua"), "wait(3)\nshot{kind = \"no_such_kind\"}\n").unwrap()
    });
    let r = validate::check(std::slice::from_ref(&m));
    assert!(r.errors() > 0);
    let verdict = r.mods.iter().find(|x| x.id == "fm").unwrap();
    assert!(!verdict.loaded, "mods check does not call it ok");
    let c = content::load(&[ModRoot::Mod(content::content_dir()), ModRoot::Mod(m.clone())]);
    let loaded = c.mods.iter().find(|x| x.id == "fm").unwrap();
    assert!(!loaded.loaded, "and the game refuses it too");
    let errs: Vec<String> = c.errors().map(|d| d.to_string()).collect();
    assert!(errs.iter().any(|e| e.contains("fm_sentry_fan.lua:2") && e.contains("unknown bullet kind")), "{errs:#?}");
    assert!(errs.iter().any(|e| e.contains("refused: its scripts failed the dry run")), "{errs:#?}");
    assert!(!c.defs.dungeons.contains_key("fm_arena") && c.defs.dungeons.contains_key("warden_keep"), "the rest loads");
    // A good mod loads with its dry run passed.
    let (_d2, good) = scaffolded(|_| {});
    let c = content::load(&[ModRoot::Mod(content::content_dir()), ModRoot::Mod(good)]);
    assert!(c.mods.iter().any(|x| x.id == "fm" && x.loaded) && c.errors().next().is_none());
}

#[test]
fn emitters_take_arguments_from_toml_and_bad_ones_are_refused_at_their_line() {
    let d = tempfile::tempdir().unwrap();
    write(d.path(), "mod.toml", MANIFEST);
    write(
        d.path(),
        "enemies.toml",
        "[imp]\nname = \"Imp\"\nhp = 10\nradius = 10.0\nbehaviour = \"chase\"\nemitters = [{ id = \"e\", args = { n = 7, kind = \"rice\", speeds = [1.5, 2.5], deep = { on = true } } }]\n\n[imp2]\nname = \"Imp two\"\nhp = 10\nradius = 10.0\nbehaviour = \"chase\"\nemitters = [\"e\"]\n",
    );
    write(
        d.path(),
        "emitters/e.lua",
        "local n = args.n or 3\nassert(args.n == nil or (args.kind == 'rice' and args.speeds[2] == 2.5 and args.deep.on == true))\nring{n = n, kind = args.kind or 'orb', speed = args.speeds and args.speeds[1] or 1}\nwait(1000)\n",
    );
    let c: Content =
        content::load_with(&[ModRoot::Mod(content::content_dir()), ModRoot::Mod(d.path().to_path_buf())], true);
    assert!(c.errors().next().is_none(), "{:?}", c.diagnostics);
    let defs = c.defs.clone();
    let mut inst =
        Instance::new(1, InstanceKind::Dungeon("warden_keep".into()), &defs, c.script_factory().create(1), 1);
    inst.arrive(Player::new(1, "p", Vec2::ZERO));
    let mut ev = Vec::new();
    inst.spawn_enemy(&defs, "imp", Vec2::new(300.0, 300.0), &mut ev);
    inst.spawn_enemy(&defs, "imp2", Vec2::new(500.0, 300.0), &mut ev);
    let s = spawned(&run(&mut inst, &defs, 1, 2));
    let errs: Vec<String> = run(&mut inst, &defs, 3, 1)
        .iter()
        .filter_map(|e| if let SimEvent::ScriptError { message, .. } = e { Some(message.clone()) } else { None })
        .collect();
    assert!(errs.is_empty(), "{errs:?}");
    assert_eq!(s.len(), 7 + 3, "the first imp's ring has its args' 7 bullets, the second the default 3");
    let rice = defs.bullet_kind("rice").unwrap();
    assert_eq!(s.iter().filter(|b| b.kind == rice && b.speed == 1.5).count(), 7);
    // What args may hold is bounded; anything else is an error at its line.
    for (bad, why) in [
        ("{ id = \"e\", args = { when = 1979-05-27 } }", "numbers, strings, booleans"),
        ("{ id = \"e\", args = { x = [[[[[[1]]]]]] } }", "nest at most"),
        ("{ id = \"e\", argz = { n = 1 } }", "an emitter is an id"),
    ] {
        let d = mod_with_script("wait(1000)\n");
        write(
            d.path(),
            "enemies.toml",
            &format!("[imp]\nname = \"Imp\"\nhp = 10\nradius = 10.0\nbehaviour = \"chase\"\nemitters = [{bad}]\n"),
        );
        assert_error(d.path(), "enemies.toml:6", why);
    }
}

#[test]
fn the_preview_reloads_on_save_and_a_broken_save_keeps_the_last_good_version() {
    use hailfire::content::preview::{PreviewHost, Target};
    use std::time::{Duration, Instant};
    let (_d, m) = scaffolded(|_| {});
    let mut host = PreviewHost::start(&m, Target::Boss("fm_boss".into()), None, 1).unwrap();
    for _ in 0..100 {
        host.preview.step();
    }
    let before = host.preview.inst.bullets.len();
    assert!(before > 40, "rings of 18 ({before} bullets)");
    let wait_reload = |host: &mut PreviewHost, n: u32| {
        let start = Instant::now();
        while host.reloads < n {
            assert!(start.elapsed() < Duration::from_secs(5), "no reload within 5 s of the save");
            host.poll();
            std::thread::sleep(Duration::from_millis(2));
        }
        start.elapsed()
    };
    // Save a new pattern: rings of 5.
    let rings = m.join("emitters/fm_boss_rings.lua");
    let good = std::fs::read_to_string(&rings).unwrap().replace("n = 18", "n = 5");
    std::thread::sleep(Duration::from_millis(20));
    std::fs::write(&rings, &good).unwrap();
    let took = wait_reload(&mut host, 1);
    eprintln!("save to reloaded preview: {took:?}");
    assert!(took < Duration::from_secs(1), "the new pattern is in effect within a second ({took:?})");
    assert!(host.errors.is_empty(), "{:?}", host.errors);
    for _ in 0..100 {
        host.preview.step();
    }
    let after = host.preview.inst.bullets.len();
    assert!(after * 2 < before, "the new pattern runs: {before} bullets before, {after} after");
    // A broken save: the last good version keeps running and the error names file:line.
    std::fs::write(&rings, "while true do\n  ring{n = 5\nend\n").unwrap();
    wait_reload(&mut host, 2);
    assert!(host.errors.iter().any(|e| e.contains("fm_boss_rings.lua:")), "{:?}", host.errors);
    let t = host.preview.tick;
    for _ in 0..60 {
        host.preview.step();
    }
    assert_eq!(host.preview.tick, t + 60, "the old version still runs");
    assert!(!host.preview.inst.bullets.is_empty());
    // The next good save clears the errors.
    std::fs::write(&rings, &good).unwrap();
    wait_reload(&mut host, 3);
    assert!(host.errors.is_empty(), "{:?}", host.errors);
}

#[test]
fn a_fan_with_both_aim_and_angle_is_a_warning_saying_aim_wins() {
    let d = mod_with_script("wait(2)\nfan{n = 3, angle = 45, aim = \"nearest\"}\nwait(1000)\n");
    let r = validate::check(&[d.path().to_path_buf()]);
    assert_eq!(r.errors(), 0);
    let w: Vec<String> = r.diagnostics.iter().filter(|d| !d.is_error()).map(|d| d.to_string()).collect();
    assert!(w.iter().any(|x| x.contains("e.lua:2") && x.contains("'aim' wins")), "{w:#?}");
}

#[test]
fn emitter_arguments_are_bounded_in_count_and_size() {
    use hailfire::sim::defs::{ArgValue, MAX_ARG_STRING, MAX_ARG_VALUES};
    let many: toml::Value =
        toml::from_str(&format!("v = [{}]", (0..MAX_ARG_VALUES).map(|k| k.to_string()).collect::<Vec<_>>().join(", ")))
            .unwrap();
    let e = ArgValue::from_toml(&many).unwrap_err();
    assert!(e.contains("at most 256 values"), "{e}");
    let long: toml::Value = toml::from_str(&format!("v = \"{}\"", "x".repeat(MAX_ARG_STRING + 1))).unwrap();
    assert!(ArgValue::from_toml(&long).unwrap_err().contains("strings may be at most"));
    let key: toml::Value = toml::from_str(&format!("{} = 1", "k".repeat(MAX_ARG_STRING + 1))).unwrap();
    assert!(ArgValue::from_toml(&key).unwrap_err().contains("names may be at most"));
    let fine: toml::Value = toml::from_str("n = 5\nkinds = [\"a\", \"b\"]\nsub = { on = true }").unwrap();
    assert!(ArgValue::from_toml(&fine).is_ok());
}

#[test]
fn a_dry_run_that_runs_out_of_time_blames_the_script_that_was_running() {
    // Every tick just under the per-tick budget: legal, but slow to dry-run.
    let d = mod_with_script("while true do\n  for i = 1, 50000 do end\n  wait(1)\nend\n");
    write(
        d.path(),
        "enemies.toml",
        "[aa_imp]\nname = \"Imp\"\nhp = 10\nradius = 10.0\nbehaviour = \"chase\"\nemitters = [\"e\"]\n",
    );
    let c = content::load_with(&[ModRoot::Mod(content::content_dir()), ModRoot::Mod(d.path().to_path_buf())], true);
    assert_eq!(c.defs.enemies.keys().next().map(String::as_str), Some("aa_imp"), "its enemy is dry-run first");
    let r = validate::dry_run_within(&c, 300, std::time::Duration::from_millis(5));
    let errs: Vec<String> = r.diagnostics.iter().filter(|d| d.is_error()).map(|d| d.to_string()).collect();
    assert!(errs.iter().any(|e| e.contains("[mod broken]") && e.contains("took longer than")), "{errs:#?}");
    // A script's own error text cannot pin the blame on another mod.
    let d = mod_with_script("wait(2)\nerror(\"(content/emitters/turret_ring.lua)\")\n");
    let r = validate::check(&[d.path().to_path_buf()]);
    let mine: Vec<String> = r.diagnostics.iter().filter(|d| d.is_error()).map(|d| d.to_string()).collect();
    assert!(mine.iter().any(|e| e.contains("[mod broken]")), "{mine:#?}");
    assert!(!mine.iter().any(|e| e.contains("[mod base]")), "{mine:#?}");
}

#[test]
fn every_place_has_a_theme_and_every_shipped_bullet_reads_on_every_floor() {
    use hailfire::sim::defs::{Backdrop, MIN_BULLET_CONTRAST};
    let c = content::load(&[
        ModRoot::Mod(content::content_dir()),
        ModRoot::Mod(content::content_dir().parent().unwrap().join("mods/example_spiral")),
    ]);
    assert!(c.errors().next().is_none(), "{:?}", c.diagnostics);
    // Each place its own look: no two places (the hub among them) share a backdrop in the
    // same colours, and every backdrop is used.
    let mut seen = vec![(c.defs.hub.theme.background, c.defs.hub.theme.accent.clone())];
    for d in c.defs.dungeons.values() {
        let look = (d.theme.background, d.theme.accent.clone());
        assert!(!seen.contains(&look), "{} looks like another place: {look:?}", d.id);
        seen.push(look);
    }
    for b in Backdrop::ALL {
        assert!(seen.iter().any(|(s, _)| *s == b), "no place uses {b:?}: {seen:?}");
    }
    // Readability as a rule: every bullet kind against every floor colour, 3:1 or better.
    assert_eq!(validate::readability(&c.defs), Vec::<String>::new());
    for b in &c.defs.bullets {
        let col = hailfire::sim::client_defs::parse_color(&b.color);
        for t in std::iter::once(&c.defs.hub.theme).chain(c.defs.dungeons.values().map(|d| &d.theme)) {
            assert!(t.worst_contrast(col) >= MIN_BULLET_CONTRAST, "{} on {:?}", b.id, t);
        }
    }
}

#[test]
fn a_bad_theme_is_an_error_at_its_line_and_a_hard_to_read_one_a_warning() {
    let d = tempfile::tempdir().unwrap();
    write(d.path(), "mod.toml", MANIFEST);
    let dungeon = |theme: &str| {
        format!("[murk]\nname = \"Murk\"\narena = [800.0, 600.0]\nspawn = [400.0, 500.0]\nboss = \"warden\"\nboss_pos = [400.0, 150.0]\n\n[murk.theme]\n{theme}\n")
    };
    for (theme, words) in [
        ("background = \"lava\"", "unknown variant `lava`"),
        ("scale = 2.0", "scale must be 8..=512"),
        ("speed = 9.0", "speed must be 0..=4"),
        ("base = \"dark\"", "base must look like"),
        ("glow = 1.0", "unknown field `glow`"),
    ] {
        write(d.path(), "dungeons.toml", &dungeon(theme));
        let (n, errs) = check(d.path());
        assert!(n > 0, "{theme}: no error");
        assert!(
            errs.iter().any(|e| e.contains("dungeons.toml:") && e.contains(words)),
            "{theme}: expected '{words}' at a line of dungeons.toml, got {errs:?}"
        );
    }
    // A floor as bright as the bullets loads, with a warning naming what to change.
    write(d.path(), "dungeons.toml", &dungeon("base = \"#ff4040\"\naccent = \"#ffffff\""));
    let r = validate::check(&[d.path().to_path_buf()]);
    assert_eq!(r.errors(), 0, "{:?}", r.diagnostics);
    let warns: Vec<String> = r.diagnostics.iter().filter(|x| !x.is_error()).map(|x| x.to_string()).collect();
    assert!(warns.iter().any(|w| w.contains("on the floor of Murk") && w.contains(":1")), "{warns:?}");
}

#[test]
fn the_hub_has_a_training_dummy_that_takes_every_hit_and_never_dies() {
    let c = content::load(&[ModRoot::Mod(content::content_dir())]);
    let defs = c.defs.clone();
    let d = defs.hub.dummy.clone().expect("the base game's hub has a dummy");
    let mut hub = Instance::new(1, InstanceKind::Hub, &defs, c.script_factory().create(1), 1);
    assert_eq!(hub.enemies.len(), 1, "the dummy stands in the hub");
    assert_eq!(hub.enemies[0].def, d.enemy);
    // A player right under it, firing up, for ten seconds: far more than its HP.
    hub.arrive(Player::new(1, "p", Vec2::ZERO));
    hub.players[0].pos = Vec2::new(d.at[0], d.at[1] + 120.0);
    let (mut dealt, mut ev, mut req) = (0u32, Vec::new(), Vec::new());
    for t in 1..=600u32 {
        let f = hailfire::sim::InputFrame { tick: t, mv: Vec2::ZERO, aim: -90.0, buttons: 1 };
        let _ = hub.players[0].queue_input(t, f);
        hub.step(t, &defs, &mut ev, &mut req);
        for e in ev.drain(..) {
            match e {
                SimEvent::BulletHit { target: hailfire::sim::events::Target::Enemy(_), amount, .. } => {
                    dealt += amount as u32
                }
                SimEvent::Death { .. } => panic!("something died in the hub: {e:?}"),
                _ => {}
            }
        }
    }
    let max = hub.enemies[0].max_hp as u32;
    assert!(dealt > max * 3 / 2, "the dummy took {dealt} damage (HP {max}): it was 'killed' and stood again");
    assert_eq!(hub.enemies.len(), 1, "and it still stands");
    assert!(hub.players.iter().all(|p| !p.dead && p.hp == hailfire::sim::PLAYER_MAX_HP), "and it hurt nobody");
}

#[test]
fn a_hub_dummy_that_could_shoot_is_refused() {
    let d = mod_with_script("wait(1000)\n");
    write(
        d.path(),
        "hub.toml",
        "arena = [960.0, 640.0]\nspawn = [480.0, 480.0]\n[dummy]\nenemy = \"imp\"\nat = [100.0, 100.0]\n",
    );
    assert_error(d.path(), "hub.toml", "must be harmless");
    let d = mod_with_script("wait(1000)\n");
    write(
        d.path(),
        "hub.toml",
        "arena = [960.0, 640.0]\nspawn = [480.0, 480.0]\n[dummy]\nenemy = \"nobody\"\nat = [100.0, 100.0]\n",
    );
    assert_error(d.path(), "hub.toml", "enemy 'nobody' does not exist");
}

#[test]
fn the_example_mod_ships_but_plays_only_when_asked_for() {
    let example = content::content_dir().parent().unwrap().join("mods/example_spiral");
    // What the game and a dedicated server without --mods load: the base game alone.
    let plain = Content::load_configured(&[], &[]);
    assert!(!plain.defs.dungeons.contains_key("whirl_pit"), "{:?}", plain.defs.dungeons.keys());
    let m = plain.mods.iter().find(|m| m.id == "example_spiral").expect("found, and listed as off");
    assert!(!m.enabled && !m.loaded && m.off_by_default);
    // `--mods mods/example_spiral` (or the folder of mods) asks for it.
    for extra in [example.clone(), example.parent().unwrap().to_path_buf()] {
        let on = Content::load_configured(std::slice::from_ref(&extra), &[]);
        assert!(on.defs.dungeons.contains_key("whirl_pit"), "--mods {}", extra.display());
    }
    // So does the Mods menu's tick (by id); and the player may still turn it off.
    let ticked =
        Content::load_chosen(&[], &content::Choice { disabled: vec![], enabled: vec!["example_spiral".into()] }, &[]);
    assert!(ticked.defs.dungeons.contains_key("whirl_pit"));
    let both = Content::load_chosen(
        &[],
        &content::Choice { disabled: vec!["example_spiral".into()], enabled: vec!["example_spiral".into()] },
        &[],
    );
    assert!(!both.defs.dungeons.contains_key("whirl_pit"), "off wins");
    // An empty entry (a blank `--mods ""` or settings line) asks for nothing.
    let blank = Content::load_chosen(&[], &content::Choice { disabled: vec![], enabled: vec![String::new()] }, &[]);
    assert!(!blank.defs.dungeons.contains_key("whirl_pit"));
    // The checker pointed at it checks it.
    let (n, errs) = check(&example);
    assert_eq!(n, 0, "{errs:?}");
    assert!(validate::check(&[example]).mods.iter().any(|m| m.id == "example_spiral" && m.loaded));
}

#[test]
fn the_load_time_dry_run_runs_what_mods_script_and_not_the_base_game_again() {
    let limit = std::time::Duration::from_secs(30);
    let base = content::load(&[ModRoot::Mod(content::content_dir())]);
    let r = validate::dry_run_trusting(&base, 60, 60, limit, &[], true);
    assert_eq!((r.emitters_run, r.bosses_run, r.dungeons_run), (0, 0, 0), "the base game alone: nothing to run");
    let with = content::load(&[
        ModRoot::Mod(content::content_dir()),
        ModRoot::Mod(content::content_dir().parent().unwrap().join("mods/example_spiral")),
    ]);
    let r = validate::dry_run_trusting(&with, 60, 60, limit, &[], true);
    // The example's Whirler, alone and in its dungeon (whose boss is the base game's).
    assert_eq!((r.emitters_run, r.dungeons_run), (1, 1));
    // `mods check` runs everything.
    let all = validate::dry_run_trusting(&with, 60, 60, limit, &[], false);
    assert!(all.bosses_run >= 7 && all.dungeons_run >= 8);
}

/// A modder copies the example (keeping its id, as one does at first) and gives the copy
/// to a server: the copy loads, though the example it came from stays off.
#[test]
fn a_copy_of_the_off_example_given_by_path_loads_and_the_original_stays_off() {
    let d = tempfile::tempdir().unwrap();
    let copy = d.path().join("my_spiral");
    let src = repo("mods/example_spiral");
    for entry in [
        "mod.toml",
        "bullets.toml",
        "enemies.toml",
        "dungeons.toml",
        "emitters/whirler.lua",
        "sprites/petal.png",
        "sprites/whirler.png",
        "sounds/chime.ogg",
    ] {
        std::fs::create_dir_all(copy.join(entry).parent().unwrap()).unwrap();
        std::fs::copy(src.join(entry), copy.join(entry)).unwrap();
    }
    let c = Content::load_chosen(std::slice::from_ref(&copy), &content::Choice::default(), &[]);
    assert_eq!(c.errors().count(), 0, "{:?}", c.errors().map(|e| e.to_string()).collect::<Vec<_>>());
    assert!(c.defs.dungeons.contains_key("whirl_pit"), "the copy's dungeon loads");
    let loaded: Vec<&str> = c.mods.iter().filter(|m| m.loaded).map(|m| m.dir.as_str()).collect();
    assert!(loaded.iter().any(|d| d.contains("my_spiral")), "{loaded:?}");
    assert!(!loaded.iter().any(|d| d.ends_with("mods/example_spiral")), "{loaded:?}");
}
