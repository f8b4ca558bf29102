//! Golden images: fixed scenes rendered offscreen with real wgpu (lavapipe, the software
//! Vulkan rasteriser, in CI) and compared with checked-in PNGs with a tolerance. A failure
//! writes the actual image and the difference to `target/golden/`. `HAILFIRE_BLESS=1`
//! rewrites the checked-in images after a deliberate change.

use std::path::{Path, PathBuf};

use hailfire::app::render::{read_png, write_png, Gpu};
use hailfire::app::scenes::{place_scenes, render_scene, SCENES};
use hailfire::content::{self, ModRoot};

const SIZE: (u32, u32) = (640, 360);
/// The smallest window the interface must hold at 200 %.
const LARGE_UI_SIZE: (u32, u32) = (960, 540);
/// A pixel differs when any channel is off by more than this.
const CHANNEL_TOLERANCE: i32 = 40;
/// The share of differing pixels a scene may have (Vulkan and GL rasterise edges slightly
/// differently; the scenes are the same).
const MAX_DIFFERING: f64 = 0.01;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

#[test]
fn golden_scenes_match() {
    let c = content::load(&[ModRoot::Mod(content::content_dir())]);
    let gpu = Gpu::headless().expect("a GPU adapter: install mesa-vulkan-drivers (lavapipe) to run this test");
    let bless = std::env::var("HAILFIRE_BLESS").is_ok_and(|v| v == "1");
    let mut failures = Vec::new();
    // Every fixed scene, and every place of the base game: the hub, each dungeon on
    // arrival and each boss in each phase.
    let places = place_scenes(&c);
    assert!(places.len() >= 8, "the base game's places: {places:?}");
    // The interface at 200 % too (the largest interface size) in a 960x540 window: menus,
    // the HUD in a fight and in the hub, the run summary.
    let large = ["title@200", "settings@200", "hub@200", "boss_hud@200", "summary@200"].map(String::from);
    for scene in SCENES.iter().map(|s| s.to_string()).chain(places).chain(large) {
        let scene = scene.as_str();
        let size = if scene.ends_with("@200") { LARGE_UI_SIZE } else { SIZE };
        let actual = render_scene(&gpu, &c, scene, size).unwrap();
        let file = scene.replace([':', '@'], "_");
        let golden = root().join("tests/golden").join(format!("{file}.png"));
        if bless {
            write_png(&golden, size, &actual).unwrap();
            continue;
        }
        let (gsize, expected) = read_png(&golden).unwrap_or_else(|e| panic!("{}: {e}", golden.display()));
        assert_eq!(gsize, size, "{scene}: golden has the wrong size");
        // A blank or near-blank frame must never pass as "close enough".
        let lit = actual.chunks_exact(4).filter(|p| p[0] as u32 + p[1] as u32 + p[2] as u32 > 120).count();
        assert!(lit > 500, "{scene}: the frame is nearly empty ({lit} lit pixels)");
        let mut diff = vec![0u8; actual.len()];
        let mut bad = 0usize;
        for (i, (a, e)) in actual.chunks_exact(4).zip(expected.chunks_exact(4)).enumerate() {
            let d = (0..3).map(|k| (a[k] as i32 - e[k] as i32).abs()).max().unwrap_or(0);
            if d > CHANNEL_TOLERANCE {
                bad += 1;
                diff[i * 4..i * 4 + 4].copy_from_slice(&[255, 0, 255, 255]);
            } else {
                let g = (e[0] / 4).max(e[1] / 4);
                diff[i * 4..i * 4 + 4].copy_from_slice(&[g, g, g, 255]);
            }
        }
        let share = bad as f64 / (size.0 * size.1) as f64;
        if share > MAX_DIFFERING {
            let out = root().join("target/golden");
            write_png(&out.join(format!("{file}.actual.png")), size, &actual).unwrap();
            write_png(&out.join(format!("{file}.diff.png")), size, &diff).unwrap();
            failures.push(format!(
                "{scene}: {:.2} % of pixels differ (see target/golden/{scene}.actual.png and .diff.png)",
                share * 100.0
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_different_scene_does_not_match_the_golden() {
    // The comparison can fail: the bullet field is not the death screen.
    let (_, a) = read_png(&root().join("tests/golden/bullets.png")).unwrap();
    let (_, b) = read_png(&root().join("tests/golden/death.png")).unwrap();
    let bad = a
        .chunks_exact(4)
        .zip(b.chunks_exact(4))
        .filter(|(x, y)| (0..3).any(|k| (x[k] as i32 - y[k] as i32).abs() > CHANNEL_TOLERANCE))
        .count();
    assert!(bad as f64 / (SIZE.0 * SIZE.1) as f64 > MAX_DIFFERING);
}

#[test]
fn preview_renders_a_boss_this_repository_has_never_seen_headless() {
    // A fresh mod from `mods new` (its boss exists nowhere in this repository), run by the
    // real binary, offscreen on the software rasteriser.
    let dir = tempfile::tempdir().unwrap();
    let m = hailfire::content::scaffold::new_mod(dir.path(), "fresh").unwrap();
    let png = dir.path().join("p.png");
    let exe = env!("CARGO_BIN_EXE_hailfire");
    let run = |extra: &[&str], out: &Path| {
        std::process::Command::new(exe)
            .arg("preview")
            .arg(&m)
            .args(extra)
            .args(["--width", "640", "--height", "360", "--out"])
            .arg(out)
            .output()
            .unwrap()
    };
    let out = run(&["--boss", "fresh_boss", "--ticks", "600"], &png);
    assert!(out.status.success(), "{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let (size, rgba) = read_png(&png).unwrap();
    assert_eq!(size, (640, 360));
    // Bullets are bright and many: count lit pixels well inside the arena (below the HUD).
    let lit = rgba.chunks_exact(4).filter(|p| p[0] as u32 + p[1] as u32 + p[2] as u32 > 450).count();
    assert!(lit > 400, "the frame shows the fight ({lit} bright pixels)");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("boss in phase 1") && !said.contains(" 0 bullets"), "{said}");
    // The second phase on request.
    let out = run(&["--boss", "fresh_boss", "--phase", "2", "--ticks", "120"], &png);
    assert!(String::from_utf8_lossy(&out.stdout).contains("boss in phase 2"));
    // A mod that no longer loads: non-zero, the error at its file and line, no image.
    std::fs::write(m.join("emitters/fresh_boss_rings.lua"), "while true do\n  ring{n = 3\nend\n").unwrap();
    let broken = dir.path().join("broken.png");
    let out = run(&["--boss", "fresh_boss"], &broken);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a broken mod must fail");
    assert!(err.contains("fresh_boss_rings.lua:"), "the error names the file and line: {err}");
    assert!(!broken.exists());
}

#[test]
fn bullets_are_clipped_to_the_arena_and_nothing_else_is() {
    use hailfire::app::render::scene::{SH_ENEMY, SH_ORB};
    use hailfire::app::render::{render_to_rgba, Camera, Renderer, Sprite};
    use hailfire::sim::Vec2;
    let gpu = Gpu::headless().expect("a GPU adapter: install mesa-vulkan-drivers (lavapipe) to run this test");
    let mut renderer = Renderer::new(&gpu.device, wgpu::TextureFormat::Rgba8UnormSrgb);
    let arena = Vec2::new(400.0, 200.0);
    let size = (640, 360);
    let cam = Camera::fit(arena, size, 0.0);
    let white = [1.0, 1.0, 1.0, 1.0];
    // A big bullet straddling the left wall, and an enemy straddling the right one (enemies
    // are not clipped: they stand on its walls), flashing from a hit (its fourth parameter is
    // the flash, not the clip flag).
    let sprites = [
        Sprite {
            pos: [400.0, 100.0],
            size: [30.0, 30.0],
            color: white,
            params: [SH_ENEMY, 0.0, 0.0, 1.0],
            ..Default::default()
        },
        Sprite {
            pos: [0.0, 100.0],
            size: [30.0, 30.0],
            color: white,
            params: [SH_ORB, 0.0, 1.0, 1.0],
            ..Default::default()
        },
    ];
    let rgba = render_to_rgba(&gpu, &mut renderer, size, &cam, &sprites, None).unwrap();
    let lit = |w: Vec2| {
        let s = cam.world_to_screen(w);
        let i = (s.y as usize * size.0 as usize + s.x as usize) * 4;
        rgba[i] as u32 + rgba[i + 1] as u32 + rgba[i + 2] as u32 > 150
    };
    assert!(lit(Vec2::new(10.0, 100.0)), "the bullet inside the arena is drawn");
    assert!(!lit(Vec2::new(-10.0, 100.0)), "the bullet outside the arena is not drawn");
    assert!(
        lit(Vec2::new(390.0, 100.0)) && lit(Vec2::new(410.0, 100.0)),
        "the enemy is drawn on both sides of the wall"
    );
}

#[test]
fn in_the_colour_blind_palette_every_bullet_reads_on_every_floor_and_shots_stand_apart() {
    use hailfire::app::render::scene::{Palette, CVD_PLAYER_SHOT, CVD_SAFE};
    use hailfire::sim::defs::{contrast, MIN_BULLET_CONTRAST};
    let c = content::load(&[
        ModRoot::Mod(content::content_dir()),
        ModRoot::Mod(content::content_dir().parent().unwrap().join("mods/example_spiral")),
    ]);
    let looks = hailfire::sim::ClientDefs::from_defs(&c.defs);
    let floors: Vec<[u8; 3]> = std::iter::once(&looks.hub.theme)
        .chain(looks.dungeons.iter().map(|d| &d.theme))
        .flat_map(|t| t.floor_colours())
        .collect();
    // Every colour the palette can give, the players' shots' included, reads at 3:1.
    for col in CVD_SAFE.iter().chain([&CVD_PLAYER_SHOT]) {
        for f in &floors {
            assert!(contrast(*col, *f) >= MIN_BULLET_CONTRAST, "{col:?} on {f:?}: {:.2}", contrast(*col, *f));
        }
    }
    // The players' shots never share a colour with an enemy kind, in either palette; in the
    // colour-blind one not even as eyes without red or green cones see them (Viénot's
    // simulation of protanopia and deuteranopia, on linear RGB).
    let seen_as = |c: [f32; 4], m: [[f32; 3]; 3]| -> [f32; 3] {
        [0, 1, 2].map(|i| m[i][0] * c[0] + m[i][1] * c[1] + m[i][2] * c[2])
    };
    let protan = [[0.11238, 0.88762, 0.0], [0.11238, 0.88762, 0.0], [0.00401, -0.00401, 1.0]];
    let deutan = [[0.29275, 0.70725, 0.0], [0.29275, 0.70725, 0.0], [-0.02234, 0.02234, 1.0]];
    let apart = |a: [f32; 3], b: [f32; 3]| (0..3).map(|i| (a[i] - b[i]).powi(2)).sum::<f32>().sqrt();
    let shot = looks.bullets.iter().position(|b| b.id == "player_shot").expect("the players' shot kind");
    // And with a mod whose enemy kinds are all the players' blue: more kinds than the
    // palette has colours, so some share one, but never the players'.
    let mut blue = looks.clone();
    for k in 0..8u8 {
        blue.bullets.push(hailfire::sim::client_defs::BulletLook {
            id: format!("blue_{k}"),
            radius: 4.0,
            color: [80 + k * 4, 200, 250],
            shape: hailfire::sim::defs::Shape::Orb,
            sprite: None,
        });
    }
    for (looks, cvd) in [(&looks, true), (&looks, false), (&blue, true)] {
        let p = Palette::with(looks, cvd);
        let mine = p.kinds[shot].0;
        for (k, (col, _)) in p.kinds.iter().enumerate().filter(|(k, _)| *k != shot) {
            assert_ne!(*col, mine, "colour-blind {cvd}: kind {} has the players' colour", looks.bullets[k].id);
            if cvd {
                for (eye, m) in [("protanopia", protan), ("deuteranopia", deutan)] {
                    let d = apart(seen_as(mine, m), seen_as(*col, m));
                    assert!(
                        d > 0.25,
                        "{eye}: kind {} looks like the players' shots ({d:.2} apart)",
                        looks.bullets[k].id
                    );
                }
            }
        }
    }
}

/// A solid PNG of one colour (RGBA8), written by the game's own encoder.
fn solid_png(path: &Path, w: u32, h: u32, rgba: [u8; 4]) {
    let px: Vec<u8> = (0..w * h).flat_map(|_| rgba).collect();
    write_png(path, (w, h), &px).unwrap();
}

#[test]
fn preview_draws_a_mods_own_sprites_for_its_enemy_and_its_bullets() {
    // An enemy drawn as a pure green square and bullets drawn as pure yellow bars: colours
    // no shape or body of the game makes (bodies are shaded, bullets have white cores).
    let dir = tempfile::tempdir().unwrap();
    let m = dir.path().join("pics");
    std::fs::create_dir_all(m.join("emitters")).unwrap();
    std::fs::write(
        m.join("mod.toml"),
        "id = \"pics\"\nname = \"Pics\"\nversion = \"0.1.0\"\ngame_version = \">=0.1.0\"\n[dependencies]\nbase = \">=0.1\"\n",
    )
    .unwrap();
    std::fs::write(m.join("bullets.toml"), "[bar]\nradius = 6.0\ncolor = \"#ff0000\"\nsprite = \"bar\"\n").unwrap();
    std::fs::write(
        m.join("enemies.toml"),
        "[box]\nname = \"Box\"\nhp = 100000\nradius = 40.0\ncolor = \"#ff0000\"\nbehaviour = \"stationary\"\nsprite = \"box\"\nemitters = [\"slow\"]\n",
    )
    .unwrap();
    std::fs::write(
        m.join("emitters/slow.lua"),
        "while true do\n  ring{n = 12, speed = 1.5, kind = \"bar\", offset = 60}\n  wait(30)\nend\n",
    )
    .unwrap();
    solid_png(&m.join("sprites/box.png"), 32, 32, [0, 255, 0, 255]);
    solid_png(&m.join("sprites/bar.png"), 16, 8, [255, 255, 0, 255]);
    let png = dir.path().join("p.png");
    let frame = || {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_hailfire"))
            .arg("preview")
            .arg(&m)
            .args(["--enemy", "box", "--ticks", "120", "--width", "640", "--height", "360", "--out"])
            .arg(&png)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        read_png(&png).unwrap().1
    };
    let rgba = frame();
    // The enemy's red glow (the bloom pass) tints the square: green stays far above the
    // rest, and no blue.
    let green_of =
        |px: &[u8]| px.chunks_exact(4).filter(|p| p[1] > 200 && (p[0] as i32) < 150 && (p[2] as i32) < 40).count();
    let green = green_of(&rgba);
    let yellow = rgba.chunks_exact(4).filter(|p| p[0] > 220 && p[1] > 200 && p[2] < 40).count();
    // The box is 80 px across in a 900 px arena drawn 340 px high: about 30 x 30 pixels.
    assert!(green > 400, "the enemy's sprite is drawn ({green} green pixels)");
    assert!(yellow > 40, "the bullets' sprite is drawn ({yellow} yellow pixels)");
    // And neither colour is there without the mod's pictures (a body, a shape instead).
    std::fs::write(m.join("bullets.toml"), "[bar]\nradius = 6.0\ncolor = \"#ff0000\"\n").unwrap();
    let toml = std::fs::read_to_string(m.join("enemies.toml")).unwrap().replace("sprite = \"box\"\n", "");
    std::fs::write(m.join("enemies.toml"), toml).unwrap();
    assert_eq!(green_of(&frame()), 0, "no such green without the sprite");
}
