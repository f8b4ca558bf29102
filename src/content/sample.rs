//! Writes a complete, valid mod to a folder: a new bullet kind, an enemy with a Lua
//! emitter, a two-phase boss and a dungeon that uses them, plus `extra` filler bullet
//! kinds, enemies and dungeons to make the client-side content as large as a big mod's.
//! Tests use it for "a mod the client does not have"; `hailfire bench --join` for the
//! large-mod join figures.

use std::path::{Path, PathBuf};

/// Writes mod `id` into `parent/id` and returns that folder. Its dungeon is `<id>_pit`.
pub fn write_mod(parent: &Path, id: &str, extra: usize) -> std::io::Result<PathBuf> {
    let dir = parent.join(id);
    std::fs::create_dir_all(dir.join("emitters"))?;
    std::fs::write(
        dir.join("mod.toml"),
        format!(
            "id = \"{id}\"\nname = \"Generated mod {id}\"\nversion = \"1.0.0\"\ngame_version = \">=0.1.0\"\n\n[dependencies]\nbase = \">=0.1.0\"\n"
        ),
    )?;
    let mut bullets = format!("[{id}_needle]\nradius = 3.5\ncolor = \"#40e0ff\"\nshape = \"diamond\"\ndamage = 7\n");
    let mut enemies = format!(
        "[{id}_spinner]\nname = \"Spinner\"\nhp = 120\nradius = 14.0\ncolor = \"#20c0a0\"\nbehaviour = \"strafe\"\nspeed = 1.2\nrange = 200.0\nemitters = [\"{id}_spin\"]\n"
    );
    let mut dungeons = format!(
        "[{id}_pit]\nname = \"The Generated Pit\"\narena = [900.0, 700.0]\nspawn = [450.0, 600.0]\nboss = \"{id}_queen\"\nboss_pos = [450.0, 170.0]\nboss_delay = 30\nportal = [700.0, 420.0]\n\n[[{id}_pit.waves]]\ndelay = 30\nspawns = [{{ enemy = \"{id}_spinner\", x = 300.0, y = 220.0, count = 2, spacing = 300.0 }}]\n"
    );
    for k in 0..extra {
        bullets.push_str(&format!(
            "\n[{id}_filler_kind_{k}]\nradius = {}.5\ncolor = \"#{:06x}\"\nshape = \"orb\"\n",
            2 + k % 9,
            (k * 2_654_435_761) % 0xff_ffff
        ));
        enemies.push_str(&format!(
            "\n[{id}_filler_enemy_{k}]\nname = \"Filler creature number {k} of a generated bestiary\"\nhp = 50\nradius = {}.0\ncolor = \"#{:06x}\"\nbehaviour = \"wander\"\nhostile = false\n",
            8 + k % 20,
            (k * 40_503) % 0xff_ffff
        ));
        if k % 8 == 0 {
            dungeons.push_str(&format!(
                "\n[{id}_filler_pit_{k}]\nname = \"Filler pit {k}\"\narena = [{}.0, 640.0]\nspawn = [300.0, 500.0]\nboss = \"{id}_queen\"\nboss_pos = [300.0, 150.0]\n",
                640 + k
            ));
        }
    }
    std::fs::write(dir.join("bullets.toml"), bullets)?;
    std::fs::write(dir.join("enemies.toml"), enemies)?;
    std::fs::write(dir.join("dungeons.toml"), dungeons)?;
    std::fs::write(
        dir.join("bosses.toml"),
        format!(
            "[{id}_queen]\nname = \"The Generated Queen\"\nhp = 2400\nradius = 28.0\ncolor = \"#e0a020\"\n\n[[{id}_queen.phases]]\nname = \"Needles\"\nhp_threshold = 1.0\nemitters = [\"{id}_needles\"]\n\n[[{id}_queen.phases]]\nname = \"Curl\"\nhp_threshold = 0.5\nemitters = [\"{id}_curl\"]\n"
        ),
    )?;
    std::fs::write(
        dir.join(format!("emitters/{id}_spin.lua")),
        format!("local a = 0\nwhile true do\n  ring{{n = 6, speed = 2.2, kind = \"{id}_needle\", angle = a}}\n  a = a + 11\n  wait(20)\nend\n"),
    )?;
    std::fs::write(
        dir.join(format!("emitters/{id}_needles.lua")),
        format!("while true do\n  fan{{n = 7, spread = 50, speed = 3.0, kind = \"{id}_needle\", aim = \"nearest\"}}\n  wait(18)\nend\n"),
    )?;
    std::fs::write(
        dir.join(format!("emitters/{id}_curl.lua")),
        format!(
            "local a = 0\nwhile true do\n  for k = 0, 3 do\n    shot{{angle = a + k * 90, speed = 1.0, accel = 0.03, max_speed = 3.2, turn = 1.1, kind = \"{id}_needle\", lifetime = 260}}\n  end\n  a = a + 9\n  wait(6)\nend\n"
        ),
    )?;
    Ok(dir)
}
