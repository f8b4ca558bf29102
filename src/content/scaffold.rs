//! `hailfire mods new` and `hailfire mods stubs`: a working mod to start from, and the
//! editor files (LuaLS definitions from `lua::spec`, `.luarc.json`) that make a modder's
//! editor complete the emitter API and flag misspelt fields.

use std::path::{Path, PathBuf};

use super::lua::spec;

/// The LuaLS definitions file a mod carries for its editor.
pub const STUBS_FILE: &str = "hailfire.d.lua";
/// lua-language-server's settings file.
pub const LUARC_FILE: &str = ".luarc.json";

/// Writes (or refreshes) the editor files into `dir`. Returns the files written.
pub fn write_stubs(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    if !dir.is_dir() {
        return Err(std::io::Error::new(std::io::ErrorKind::NotFound, format!("{} is not a folder", dir.display())));
    }
    let stubs = dir.join(STUBS_FILE);
    let luarc = dir.join(LUARC_FILE);
    std::fs::write(&stubs, spec::stubs())?;
    // A modder's own lua-language-server settings are theirs: written only when absent.
    if luarc.exists() {
        return Ok(vec![stubs]);
    }
    std::fs::write(&luarc, spec::luarc())?;
    Ok(vec![stubs, luarc])
}

/// Why a mod id cannot be used, if it cannot.
pub fn check_id(id: &str) -> Result<(), String> {
    if id.is_empty() || id.len() > 32 {
        return Err(format!("the mod id '{id}' must be 1 to 32 characters"));
    }
    if !id.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        || !id.starts_with(|c: char| c.is_ascii_lowercase())
    {
        return Err(format!(
            "the mod id '{id}' must start with a letter and use only a-z, 0-9 and _ (it prefixes every id in the mod)"
        ));
    }
    if id == "base" {
        return Err("'base' is the base game's id".into());
    }
    Ok(())
}

/// Creates a working mod `id` in `parent/id`: a bullet kind, an enemy with an emitter, a
/// two-phase boss, a dungeon that uses them, a README and the editor files. It passes
/// `hailfire mods check` as written. An existing folder is never touched.
pub fn new_mod(parent: &Path, id: &str) -> Result<PathBuf, String> {
    check_id(id)?;
    let dir = parent.join(id);
    if dir.exists() {
        return Err(format!("{} already exists: nothing was written (pick another id or folder)", dir.display()));
    }
    let write = |rel: &str, text: String| -> Result<(), String> {
        let p = dir.join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
        }
        std::fs::write(&p, text).map_err(|e| format!("cannot write {}: {e}", p.display()))
    };
    std::fs::create_dir_all(parent).map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    write(
        "mod.toml",
        format!(
            "# Your mod's identity. Every id in this mod starts with \"{id}_\" so that it cannot clash\n# with another mod's (the later definition of an id wins, with a warning).\nid = \"{id}\"\nname = \"{id}\"\nversion = \"0.1.0\"\ndescription = \"A new Hailfire mod.\"\nauthors = [\"you\"]\ngame_version = \">=0.1.0\"\n\n[dependencies]\nbase = \">=0.1.0\"\n"
        ),
    )?;
    write(
        "bullets.toml",
        format!(
            "# Bullet kinds. radius is the drawn size and the hitbox (px); shape: orb, rice, star,\n# diamond, ring; damage: HP taken from whoever it hits.\n\n[{id}_needle]\nradius = 4.0\ncolor = \"#5fe0ff\"\nshape = \"rice\"\ndamage = 8\n"
        ),
    )?;
    write(
        "enemies.toml",
        format!(
            "# Enemies move by a behaviour (chase, keep_distance, strafe, wander, stationary) and\n# hurt players only through their emitters (emitters/<id>.lua).\n\n[{id}_sentry]\nname = \"Sentry\"\nhp = 90\nradius = 14.0\ncolor = \"#40c090\"\nbehaviour = \"strafe\"\nspeed = 1.2\nrange = 220.0\nemitters = [\"{id}_sentry_fan\"]\n"
        ),
    )?;
    write(
        "bosses.toml",
        format!(
            "# A boss: each phase starts when HP / max HP falls to its hp_threshold (the first is\n# 1.0, then strictly decreasing) and runs its emitters until the next.\n\n[{id}_boss]\nname = \"The New Boss\"\nhp = 1800\nradius = 30.0\ncolor = \"#ffb040\"\n\n[[{id}_boss.phases]]\nname = \"Opening\"\nhp_threshold = 1.0\nemitters = [\"{id}_boss_rings\"]\n\n[[{id}_boss.phases]]\nname = \"Finale\"\nhp_threshold = 0.5\ndamage_taken_mult = 0.8\nemitters = [\"{id}_boss_spiral\"]\n"
        ),
    )?;
    write(
        "dungeons.toml",
        format!(
            "# A dungeon: an arena (px), where players arrive, waves of enemies (each after the\n# previous is cleared plus delay ticks) and the boss that ends the run. portal is where\n# its entrance stands in the hub.\n\n[{id}_arena]\nname = \"The New Arena\"\narena = [900.0, 700.0]\nspawn = [450.0, 600.0]\nboss = \"{id}_boss\"\nboss_pos = [450.0, 160.0]\nboss_delay = 60\nportal = [640.0, 420.0]\n\n[[{id}_arena.waves]]\ndelay = 60\nspawns = [{{ enemy = \"{id}_sentry\", x = 250.0, y = 220.0, count = 2, spacing = 400.0 }}]\n"
        ),
    )?;
    write(
        &format!("emitters/{id}_sentry_fan.lua"),
        format!(
            "-- The Sentry: an aimed fan every second. An emitter is the body of a coroutine that\n-- starts when its owner appears; wait(n) pauses it for n ticks (60 ticks = 1 s).\nwait(30)\nwhile true do\n  fan{{n = 5, spread = 40, speed = 3.0, kind = \"{id}_needle\", aim = \"nearest\"}}\n  wait(60)\nend\n"
        ),
    )?;
    write(
        &format!("emitters/{id}_boss_rings.lua"),
        "-- Phase 1: rotating rings of the base game's orbs (any loaded mod's kinds work).\n-- A ring is one small network event whatever its size.\nlocal a = 0\nwhile true do\n  ring{n = 18, angle = a, speed = 2.2, kind = \"orb\"}\n  a = a + 7\n  wait(24)\nend\n"
            .to_string(),
    )?;
    write(
        &format!("emitters/{id}_boss_spiral.lua"),
        format!(
            "-- Phase 2: a curving three-armed spiral, and an aimed shot now and then.\nevery(90, nil, function()\n  shot{{angle = aim(\"nearest\"), speed = 4.0, kind = \"{id}_needle\"}}\nend)\nlocal a = rand(0, 360)\nwhile true do\n  ring{{n = 3, angle = a, speed = 1.6, turn = 0.5, kind = \"{id}_needle\", lifetime = 360}}\n  a = a + 13\n  wait(6)\nend\n"
        ),
    )?;
    write(
        "README.md",
        format!(
            "# {id}\n\nA Hailfire mod. Files:\n\n- `mod.toml`: id, version, the game versions it works with, dependencies.\n- `bullets.toml`, `enemies.toml`, `bosses.toml`, `dungeons.toml`: what exists.\n- `emitters/*.lua`: how it fires (Lua 5.4, sandboxed).\n- `{STUBS_FILE}`, `{LUARC_FILE}`: editor support (lua-language-server); refresh with\n  `hailfire mods stubs`.\n\nCheck it with `hailfire mods check {id}`; see docs/MODDING.md in the game for the API.\n"
        ),
    )?;
    write_stubs(&dir).map_err(|e| format!("cannot write the editor files: {e}"))?;
    Ok(dir)
}
