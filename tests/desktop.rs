//! The desktop game: settings round trip and the corrupt-file path, the muted-audio path
//! (and real playback through ALSA's null device), and real windows under Xvfb: host and
//! play reaches the hub and shows the game, quits cleanly on Ctrl+Q; a second process joins
//! it and both see each other; with no display a windowed run fails at once, clearly.

mod common;
use common::{free_port, xvfb, Xvfb};

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use hailfire::app::audio::{synth_effect, Audio};
use hailfire::app::settings::{Action, BulletColours, Section, Settings, WindowMode};

#[test]
fn settings_round_trip() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("settings.toml");
    let mut s = Settings {
        name: "Ann".into(),
        music_volume: 0.25,
        window_mode: WindowMode::Fullscreen,
        ui_scale: 1.25,
        frame_cap: 30,
        bullet_colours: BulletColours::ColourBlind,
        bullet_outline: true,
        screen_shake: false,
        disabled_mods: vec!["example_spiral".into()],
        enabled_mods: vec!["my_example".into()],
        ..Default::default()
    };
    s.remember_server("example.org:24680");
    s.rebind(Action::Fire, "KeyJ");
    s.save_to(&p).unwrap();
    let (back, warn) = Settings::load_from(&p);
    assert!(warn.is_none());
    assert_eq!(back, s);
    assert!(!d.path().join("settings.toml.tmp").exists(), "the temp file was renamed into place");
}

#[test]
fn an_older_settings_file_keeps_its_fullscreen_and_sections_reset_alone() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("settings.toml");
    // Written by an earlier version: fullscreen was a switch (borderless).
    std::fs::write(&p, "name = \"Ann\"\nfullscreen = true\nui_scale = 40.0\n").unwrap();
    let (mut s, warn) = Settings::load_from(&p);
    assert!(warn.is_none(), "{warn:?}");
    assert_eq!(s.window_mode, WindowMode::Borderless);
    assert_eq!(s.ui_scale, 2.0, "clamped");
    s.save_to(&p).unwrap();
    let text = std::fs::read_to_string(&p).unwrap();
    assert!(!text.contains("fullscreen =") && text.contains("window_mode = \"borderless\""), "{text}");
    // Resetting one section leaves the others alone.
    s.screen_shake = false;
    s.master_volume = 0.1;
    s.rebind(Action::Fire, "KeyJ");
    s.reset_section(Section::Accessibility);
    assert!(s.screen_shake);
    assert_eq!(s.master_volume, 0.1);
    assert_eq!(s.bindings[&Action::Fire][0], "KeyJ");
    s.reset_section(Section::Video);
    assert_eq!(s.window_mode, WindowMode::Windowed);
    assert_eq!(s.name, "Ann");
}

#[test]
fn a_corrupt_settings_file_is_reported_kept_aside_and_replaced_by_defaults() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("settings.toml");
    std::fs::write(&p, "name = \"Ann\"\nmusic_volume = \"loud\"\n").unwrap();
    let (s, warn) = Settings::load_from(&p);
    assert_eq!(s, Settings::default());
    let w = warn.expect("a message for the player");
    assert!(w.contains("line 2") && w.contains("settings.toml.bad"), "{w}");
    assert_eq!(
        std::fs::read_to_string(d.path().join("settings.toml.bad")).unwrap(),
        "name = \"Ann\"\nmusic_volume = \"loud\"\n"
    );
    // Nonsense values that parse are clamped, not trusted.
    std::fs::write(&p, "master_volume = 9.0\nname = \"\"\n").unwrap();
    let (s, warn) = Settings::load_from(&p);
    assert!(warn.is_none());
    assert_eq!(s.master_volume, 1.0);
    assert_eq!(s.name, "Pilot");
    assert!(Action::ALL.iter().all(|a| s.bindings.contains_key(a)), "missing bindings are filled in");
}

#[test]
fn sounds_are_synthesised_and_not_silent() {
    for name in ["fire", "hit_taken", "hit_dealt", "death", "phase", "portal", "escape", "cleared", "shotgun"] {
        let f = synth_effect(name);
        let peak = f.iter().map(|x| x.left.abs()).fold(0.0, f32::max);
        assert!(!f.is_empty() && peak > 0.05 && peak <= 1.0, "{name}: peak {peak}");
    }
}

#[test]
fn muted_audio_path_plays_nothing_and_breaks_nothing() {
    // This machine (and CI) has no sound card: the game must play muted with one warning.
    let mut a = Audio::new(0.8, 0.8, 0.5);
    if a.is_muted() {
        assert!(a.muted_reason.is_some());
    }
    for _ in 0..300 {
        a.play("fire");
        a.play("no_such_sound");
    }
    let m = hailfire::app::music::title_music();
    a.music(Some((&m, 2)));
    a.music(Some((&m, 0)));
    assert_eq!(a.music_layers(), None, "muted: no music plays");
    a.set_volumes(0.0, 1.0, 1.0);
    a.music(None);
}

#[test]
fn a_mods_sounds_reach_the_mixer_by_name() {
    // The example mod's chime (Ogg Vorbis, 0.45 s) and a WAV, as content carries them.
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let chime = std::fs::read(repo.join("mods/example_spiral/sounds/chime.ogg")).unwrap();
    let asset = |name: &str, bytes: Vec<u8>| hailfire::sim::client_defs::MediaAsset {
        name: name.into(),
        bytes: std::sync::Arc::new(bytes),
    };
    let mut a = Audio::new(0.8, 0.8, 0.5);
    assert_eq!(a.effect_seconds("chime"), None, "not before the content has it");
    a.set_mod_sounds(&[asset("chime", chime.clone())]);
    let s = a.effect_seconds("chime").expect("the mod's sound is in the mixer");
    assert!((s - 0.45).abs() < 0.03, "{s} s");
    a.play("chime");
    // Other content (a live update, another server): the old sounds go.
    a.set_mod_sounds(&[asset("bell", chime)]);
    assert_eq!(a.effect_seconds("chime"), None);
    assert!(a.effect_seconds("bell").is_some() && a.effect_seconds("fire").is_some());
}

#[test]
fn real_playback_through_alsas_null_device() {
    // An ALSA configuration whose default device discards audio lets the real backend start
    // on a machine with no sound card: the whole path up to the device is exercised.
    let d = tempfile::tempdir().unwrap();
    let conf = d.path().join("asound.conf");
    std::fs::write(&conf, "pcm.!default { type null }\n").unwrap();
    // Run in a child process so the ALSA configuration path is read fresh.
    let status = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "alsa_null_child", "--ignored", "--nocapture"])
        .env("ALSA_CONFIG_PATH", &conf)
        .status()
        .unwrap();
    assert!(status.success());
}

#[test]
#[ignore = "run by real_playback_through_alsas_null_device in its own process"]
fn alsa_null_child() {
    let mut a = Audio::new(0.8, 0.8, 0.5);
    assert!(!a.is_muted(), "the null ALSA device should open: {:?}", a.muted_reason);
    a.play("fire");
    // A mod's sound plays through the real backend too.
    let chime =
        std::fs::read(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("mods/example_spiral/sounds/chime.ogg"));
    let asset =
        hailfire::sim::client_defs::MediaAsset { name: "chime".into(), bytes: std::sync::Arc::new(chime.unwrap()) };
    a.set_mod_sounds(&[asset]);
    a.play("chime");
    // A place's music is made on another thread, then starts with the place's layers; a
    // boss phase brings in more.
    let m = hailfire::app::music::title_music();
    let t = std::time::Instant::now();
    while a.music_layers().is_none() && t.elapsed() < Duration::from_secs(30) {
        a.music(Some((&m, 0)));
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(a.music_layers(), Some(hailfire::app::music::BASE_LAYERS), "the music started");
    a.music(Some((&m, 2)));
    assert_eq!(a.music_layers(), Some(hailfire::app::music::BASE_LAYERS + 2), "phase 2 adds two layers");
    std::thread::sleep(Duration::from_millis(200));
    a.music(None);
    assert_eq!(a.music_layers(), None);
}

// ---------------------------------------------------------------- windows under Xvfb

struct Game {
    child: Child,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Game {
    fn start(x: &Xvfb, cfg: &Path, args: &[&str]) -> Game {
        let rt = cfg.join("xdg");
        std::fs::create_dir_all(&rt).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_hailfire"))
            .args(args)
            .env("DISPLAY", &x.display)
            .env("HAILFIRE_CONFIG_DIR", cfg)
            .env("HAILFIRE_DATA_DIR", cfg)
            .env("XDG_RUNTIME_DIR", &rt)
            .env("HAILFIRE_LOG_FILE", cfg.join("game.log"))
            .env_remove("WAYLAND_DISPLAY")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                let _ = tx.send(l);
            }
        });
        Game { child, lines: rx, seen: Vec::new() }
    }

    fn wait_for(&mut self, what: &dyn Fn(&str) -> bool, secs: u64) -> String {
        let start = Instant::now();
        loop {
            if let Some(l) = self.seen.iter().find(|l| what(l)) {
                return l.clone();
            }
            match self.lines.recv_timeout(Duration::from_millis(200)) {
                Ok(l) => self.seen.push(l),
                Err(_) if start.elapsed() > Duration::from_secs(secs) => {
                    let _ = self.child.kill();
                    panic!("timed out; the game printed:\n{}", self.seen.join("\n"));
                }
                Err(_) => {}
            }
        }
    }

    fn wait_exit(&mut self, secs: u64) -> Option<i32> {
        let start = Instant::now();
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s.code();
            }
            if start.elapsed() > Duration::from_secs(secs) {
                let _ = self.child.kill();
                panic!("the game did not exit; it printed:\n{}", self.seen.join("\n"));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

fn config_with_port(dir: &Path, name: &str, port: u16) {
    // Tests host on 127.0.0.1 only.
    std::fs::write(
        dir.join("settings.toml"),
        format!("name = \"{name}\"\nhost_port = {port}\nhost_address = \"127.0.0.1\"\n"),
    )
    .unwrap();
}

#[test]
fn window_host_and_play_reaches_the_hub_shows_the_game_and_quits_cleanly() {
    let x = xvfb();
    let cfg = tempfile::tempdir().unwrap();
    config_with_port(cfg.path(), "Host", free_port());
    // Recording the session as it goes (the host's own client, through the same path).
    let rec = cfg.path().join("hosted.hfr");
    let mut g = Game::start(&x, cfg.path(), &["--host", "--record", rec.to_str().unwrap()]);
    g.wait_for(&|l| l.contains("in the hub"), 60);
    std::thread::sleep(Duration::from_secs(2));
    let shot = cfg.path().join("screen.png");
    let ok = Command::new("import")
        .args(["-display", &x.display, "-window", "root", shot.to_str().unwrap()])
        .status()
        .unwrap();
    assert!(ok.success(), "import (imagemagick) took the screenshot");
    let ((w, h), rgba) = hailfire::app::render::read_png(&shot).unwrap();
    // Not a blank or an error frame: the arena, its frame, portals and the HUD are there.
    let mut colours = std::collections::HashSet::new();
    let mut bright = 0;
    for p in rgba.chunks_exact(4) {
        colours.insert((p[0] / 16, p[1] / 16, p[2] / 16));
        if p[0] as u32 + p[1] as u32 + p[2] as u32 > 300 {
            bright += 1;
        }
    }
    assert!(colours.len() > 20, "a real frame has many colours, got {}", colours.len());
    assert!(bright > 500, "text, portals and the ship are bright ({bright} px)");
    let blueish = rgba.chunks_exact(4).filter(|p| p[2] > 150 && p[2] as u32 > p[0] as u32 + 40).count();
    assert!(blueish > 200, "the portals and the arena frame are drawn ({blueish} px) in {w}x{h}");
    // The quit input: Ctrl+Q to the focused window.
    let wid = String::from_utf8(
        Command::new("xdotool")
            .args(["search", "--sync", "--name", "Hailfire"])
            .env("DISPLAY", &x.display)
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let wid = wid.lines().next().expect("the game window exists").to_string();
    // Without a window manager focus can lag behind on a loaded machine: focus, then send
    // the quit input, and send it again if the game is still running a few seconds later.
    for _ in 0..5 {
        for args in [vec!["windowfocus", "--sync", wid.as_str()], vec!["key", "--delay", "50", "ctrl+q"]] {
            Command::new("xdotool").args(&args).env("DISPLAY", &x.display).status().unwrap();
        }
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(4) && g.child.try_wait().unwrap().is_none() {
            std::thread::sleep(Duration::from_millis(100));
        }
        if g.child.try_wait().unwrap().is_some() {
            break;
        }
    }
    assert_eq!(g.wait_exit(10), Some(0), "a clean exit");
    // The session was saved on the way out, and it replays.
    let check = Command::new(env!("CARGO_BIN_EXE_hailfire")).arg("replay").arg(&rec).arg("--check").output().unwrap();
    let said = String::from_utf8_lossy(&check.stdout);
    assert!(check.status.success() && said.contains("bit for bit"), "{said}{}", String::from_utf8_lossy(&check.stderr));
}

#[test]
fn window_host_and_a_second_process_joining_see_each_other() {
    let x = xvfb();
    let port = free_port();
    let host_cfg = tempfile::tempdir().unwrap();
    let join_cfg = tempfile::tempdir().unwrap();
    config_with_port(host_cfg.path(), "Hosty", port);
    config_with_port(join_cfg.path(), "Joiner", free_port());
    let mut host = Game::start(&x, host_cfg.path(), &["--host", "--quit-after", "60"]);
    host.wait_for(&|l| l.contains("in the hub"), 60);
    let mut friend = Game::start(&x, join_cfg.path(), &["--join", &format!("127.0.0.1:{port}"), "--quit-after", "60"]);
    friend.wait_for(&|l| l.contains("in the hub"), 60);
    let both = |l: &str| l.contains("here:") && l.contains("Hosty") && l.contains("Joiner");
    friend.wait_for(&both, 30);
    host.wait_for(&both, 30);
    // The friend's settings remember the server.
    let saved = std::fs::read_to_string(join_cfg.path().join("settings.toml")).unwrap();
    assert!(saved.contains(&format!("127.0.0.1:{port}")), "{saved}");
    let _ = friend.child.kill();
    let _ = host.child.kill();
}

#[test]
fn a_join_that_fails_says_why_and_is_not_remembered() {
    let x = xvfb();
    let cfg = tempfile::tempdir().unwrap();
    config_with_port(cfg.path(), "Lost", free_port());
    let nobody = free_port();
    let mut g = Game::start(&x, cfg.path(), &["--join", &format!("127.0.0.1:{nobody}"), "--quit-after", "20"]);
    let line = g.wait_for(&|l| l.contains("Could not join"), 20);
    assert!(line.contains("no answer from the server"), "{line}");
    assert_eq!(g.wait_exit(15), Some(0));
    let saved = std::fs::read_to_string(cfg.path().join("settings.toml")).unwrap_or_default();
    assert!(!saved.contains(&format!("127.0.0.1:{nobody}")), "a failed address was saved: {saved}");
}

#[test]
fn with_no_display_a_windowed_run_fails_at_once_with_a_clear_message() {
    let start = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_hailfire"))
        .arg("--host")
        .env_remove("DISPLAY")
        .env_remove("WAYLAND_DISPLAY")
        .env("HAILFIRE_LOG_FILE", std::env::temp_dir().join("hf-nodisplay.log"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no display") && err.contains("--dedicated"), "{err}");
    assert!(start.elapsed() < Duration::from_secs(5));
}

#[test]
fn window_preview_reloads_a_saved_pattern_and_draws_it() {
    let x = xvfb();
    let cfg = tempfile::tempdir().unwrap();
    let m = hailfire::content::scaffold::new_mod(cfg.path(), "pv").unwrap();
    let shot = cfg.path().join("preview.png");
    let mut g = Game::start(
        &x,
        cfg.path(),
        &[
            "--capture-after",
            "5",
            "--capture",
            shot.to_str().unwrap(),
            "--quit-after",
            "6",
            "preview",
            m.to_str().unwrap(),
            "--boss",
            "pv_boss",
        ],
    );
    std::thread::sleep(Duration::from_secs(2));
    let rings = m.join("emitters/pv_boss_rings.lua");
    let s = std::fs::read_to_string(&rings).unwrap().replace("n = 18", "n = 40");
    std::fs::write(&rings, s).unwrap();
    let line = g.wait_for(&|l| l.contains("save to screen"), 20);
    // The line as printed (colour codes taken out).
    let mut plain = String::new();
    let mut esc = false;
    for ch in line.chars() {
        match (esc, ch) {
            (false, '\u{1b}') => esc = true,
            (true, 'm') => esc = false,
            (true, _) => {}
            (false, c) => plain.push(c),
        }
    }
    let ms: f64 = Some(plain.as_str())
        .and_then(|l| l.split("ms=").nth(1))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("the preview logged its save-to-screen time");
    assert!(ms < 1000.0, "the saved pattern was on screen {ms} ms after the save");
    // It quits by itself after 6 s, the capture written.
    let start = std::time::Instant::now();
    while g.child.try_wait().unwrap().is_none() {
        assert!(start.elapsed() < Duration::from_secs(30), "the preview did not quit");
        std::thread::sleep(Duration::from_millis(100));
    }
    let ((w, h), rgba) = hailfire::app::render::read_png(&shot).unwrap();
    let bright = rgba.chunks_exact(4).filter(|p| p[0] as u32 + p[1] as u32 + p[2] as u32 > 450).count();
    assert!(bright > 1000, "the frame shows the fight and the panel ({bright} bright px of {w}x{h})");
}

#[test]
fn window_replay_plays_a_recorded_fight() {
    // Twenty seconds of a bot in the Keep, recorded in process, then played in a window.
    let content = hailfire::content::Content::load_default();
    let mut st = hailfire::stepper::Stepper::new(content, hailfire::server::ServerConfig::default());
    st.add_client("pilot", hailfire::net::LinkProfile::CLEAN);
    st.clients[0].record();
    let mut brain = hailfire::client::bot::Brain::new(hailfire::client::bot::Plan::Dodge, "warden_keep", 5);
    for _ in 0..20 * 60 {
        st.step(|_, cl| brain.think(cl));
    }
    let cfg = tempfile::tempdir().unwrap();
    let file = cfg.path().join("fight.hfr");
    std::fs::write(&file, st.clients[0].recording().unwrap().encode()).unwrap();
    let x = xvfb();
    let shot = cfg.path().join("replay.png");
    let mut g = Game::start(
        &x,
        cfg.path(),
        &[
            "--capture-after",
            "4",
            "--capture",
            shot.to_str().unwrap(),
            "--quit-after",
            "5",
            "replay",
            file.to_str().unwrap(),
        ],
    );
    let start = std::time::Instant::now();
    while g.child.try_wait().unwrap().is_none() {
        assert!(start.elapsed() < Duration::from_secs(40), "the replay window did not quit");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(g.child.wait().unwrap().success());
    // Four seconds in: the fight itself, inside the arena (away from the panel's text at
    // the top and the keys at the bottom): the ship glowing, its shots, the walls.
    let ((w, h), rgba) = hailfire::app::render::read_png(&shot).unwrap();
    let inside = |x: u32, y: u32| x > w / 5 && x < w * 4 / 5 && y > h / 8 && y < h * 7 / 8;
    let bright = rgba
        .chunks_exact(4)
        .enumerate()
        .filter(|(i, p)| inside(*i as u32 % w, *i as u32 / w) && p[0] as u32 + p[1] as u32 + p[2] as u32 > 450)
        .count();
    assert!(bright > 150, "the frame shows the fight ({bright} bright px inside the arena of {w}x{h})");
}

/// One menu frame with these gamepad buttons pressed, through the same translation the
/// game uses (`input::pad_menu_events`).
fn pad_frame(ctx: &egui::Context, buttons: &[gilrs::Button], mut ui: impl FnMut(&mut egui::Ui)) {
    let in_text = ctx.egui_wants_keyboard_input();
    let events = buttons.iter().flat_map(|b| hailfire::app::input::pad_menu_events(*b, in_text)).collect();
    let raw = egui::RawInput {
        screen_rect: Some(egui::Rect::from_min_size(egui::Pos2::ZERO, egui::vec2(1280.0, 720.0))),
        events,
        ..Default::default()
    };
    ctx.run_ui(raw, &mut ui).textures_delta.clear();
}

#[test]
fn the_menus_work_with_a_gamepad_alone() {
    use gilrs::Button::{DPadDown, DPadRight, LeftTrigger, RightTrigger, South};
    use hailfire::app::ui::menu::{game_menu, main_menu, GameMenuAction, MenuAction, MenuState, Page};
    let content = hailfire::content::load(&[hailfire::content::ModRoot::Mod(hailfire::content::content_dir())]);
    let ctx = egui::Context::default();
    let mut st = MenuState::default();
    st.go(Page::Main);
    let mut s = Settings::default();
    let actions = std::cell::RefCell::new(Vec::new());
    // Each press is followed by a quiet frame (focus moves take effect on the next frame).
    let press = |st: &mut MenuState, s: &mut Settings, seq: &[gilrs::Button]| {
        for b in seq.iter().map(|b| vec![*b]).chain([vec![]]) {
            pad_frame(&ctx, &b, |ui| actions.borrow_mut().extend(main_menu(ui, st, s, &content)));
            pad_frame(&ctx, &[], |ui| actions.borrow_mut().extend(main_menu(ui, st, s, &content)));
        }
    };
    press(&mut st, &mut s, &[]);
    // Host and play has the focus from the first frame: down twice is Settings.
    press(&mut st, &mut s, &[DPadDown, DPadDown, South]);
    assert_eq!(st.page, Page::Settings);
    // The bumpers switch sections; the section's first setting takes the focus.
    press(&mut st, &mut s, &[RightTrigger, RightTrigger, RightTrigger, RightTrigger]);
    assert_eq!(st.section, Section::Accessibility);
    press(&mut st, &mut s, &[South]);
    assert!(s.bullet_outline, "A switched the outline on");
    // Back to Audio; the master volume slider moves with the d-pad.
    press(&mut st, &mut s, &[LeftTrigger, LeftTrigger, LeftTrigger]);
    assert_eq!(st.section, Section::Audio);
    let before = s.master_volume;
    press(&mut st, &mut s, &[DPadRight, DPadRight]);
    assert!(s.master_volume > before, "{} -> {}", before, s.master_volume);
    let changed = actions.borrow().iter().filter(|a| **a == MenuAction::SettingsChanged).count();
    assert!(changed >= 2, "{:?}", actions.borrow());
    // Down to Back (past the other sliders, the mute switch and the reset button), and out.
    press(&mut st, &mut s, &[DPadDown, DPadDown, DPadDown, DPadDown, DPadDown, South]);
    assert_eq!(st.page, Page::Main, "Back reached by the d-pad");
    // Join: from the address field (a text field keeps the arrows for its cursor, so the
    // d-pad moves on as Tab) past the name, the password and Connect, to Back.
    st.join_addr = "127.0.0.1:9".into();
    press(&mut st, &mut s, &[DPadDown, South]);
    assert_eq!(st.page, Page::Join);
    press(&mut st, &mut s, &[DPadDown, DPadDown, DPadDown, DPadDown, South]);
    assert_eq!(st.page, Page::Main, "Back on the Join page reached with the pad");
    assert!(!actions.borrow().iter().any(|a| matches!(a, MenuAction::Join { .. })), "{:?}", actions.borrow());

    // The in-game menu: Resume has the focus; down once is Settings.
    let ctx = egui::Context::default();
    let mut got = None;
    for (i, b) in [vec![], vec![], vec![DPadDown], vec![], vec![South], vec![]].into_iter().enumerate() {
        pad_frame(&ctx, &b, |ui| {
            if let Some(a) = game_menu(ui.ctx(), true, i == 0, None, None, false, &[], &Default::default()) {
                got = Some(a);
            }
        });
    }
    assert_eq!(got, Some(GameMenuAction::Settings));

    // In the hub of a friend's server: after Settings comes the first friend's Watch.
    let friends = hailfire::app::ui::menu::Friends {
        elsewhere: vec![("Ann".into(), "The Warden's Keep".into())],
        watching: None,
    };
    let ctx = egui::Context::default();
    let mut got = None;
    for (i, b) in [vec![], vec![], vec![DPadDown], vec![DPadDown], vec![], vec![South], vec![]].into_iter().enumerate()
    {
        pad_frame(&ctx, &b, |ui| {
            if let Some(a) = game_menu(ui.ctx(), false, i == 0, None, None, false, &[], &friends) {
                got = Some(a);
            }
        });
    }
    assert_eq!(got, Some(GameMenuAction::Watch("Ann".into())));
    // While watching: no list, and Stop watching instead.
    let watching = hailfire::app::ui::menu::Friends { elsewhere: Vec::new(), watching: Some("Ann".into()) };
    let ctx = egui::Context::default();
    let mut got = None;
    for (i, b) in [vec![], vec![], vec![DPadDown], vec![DPadDown], vec![], vec![South], vec![]].into_iter().enumerate()
    {
        pad_frame(&ctx, &b, |ui| {
            if let Some(a) = game_menu(ui.ctx(), false, i == 0, None, None, false, &[], &watching) {
                got = Some(a);
            }
        });
    }
    assert_eq!(got, Some(GameMenuAction::StopWatching));
}
