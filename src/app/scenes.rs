//! Fixed scenes rendered offscreen: the golden-image tests compare them with checked-in
//! PNGs, and `hailfire render --scene NAME --out FILE.png` writes them from the command line.

use anyhow::bail;

use super::render::{self, scene, Camera, EguiFrame, Gpu, Renderer};
use super::ui::hud::{self, HudState, NetOverlay};
use crate::content::Content;
use crate::protocol::messages::{SnapBoss, SnapEnemy, SnapPlayer, F_DEAD, F_SPAWN_GRACE};
use crate::sim::bullets::{BulletPool, BulletSpawn, Team};
use crate::sim::{InputFrame, Vec2, World};

/// Fixed scenes; besides them, [`place_scenes`] (`hub`, `dungeon:ID`, `boss:ID:PHASE`).
pub const SCENES: [&str; 14] = [
    "bullets", "boss_hud", "death", "hit", "title", "settings", "summary", "downed", "focus", "flare", "ships",
    "spectate", "stopped", "watch",
];

/// Every place scene of the loaded content: `hub`, `dungeon:ID` for each dungeon and
/// `boss:ID:PHASE` for each boss phase (from 1).
pub fn place_scenes(content: &Content) -> Vec<String> {
    let mut out = vec!["hub".to_string()];
    out.extend(content.defs.dungeons.keys().map(|d| format!("dungeon:{d}")));
    for (id, b) in &content.defs.bosses {
        out.extend((1..=b.phases.len()).map(|p| format!("boss:{id}:{p}")));
    }
    out
}

/// A place as a player sees it: the hub (four players, the own ship in a portal), a
/// dungeon on arrival (its first wave four seconds in), or a boss in a phase (the phase
/// held, three seconds in). Real simulation, scripted players, deterministic.
fn place(content: &Content, name: &str) -> anyhow::Result<Fixture> {
    let defs = content.defs.clone();
    let mut w = World::new(defs.clone(), content.script_factory(), 11);
    let parts: Vec<&str> = name.split(':').collect();
    let players: u32 = if parts[0] == "hub" { 4 } else { 2 };
    for id in 1..=players {
        w.add_player(id, &format!("player{id}"));
    }
    let (dungeon, phase) = match parts.as_slice() {
        ["hub"] => (None, None),
        ["dungeon", d] if defs.dungeons.contains_key(*d) => (Some(d.to_string()), None),
        ["boss", b, p] if defs.bosses.contains_key(*b) => {
            let n = defs.bosses[*b].phases.len();
            let p: usize = p
                .parse()
                .ok()
                .filter(|p| (1..=n).contains(p))
                .ok_or_else(|| anyhow::anyhow!("boss '{b}' has phases 1..={n}, not '{p}'"))?;
            let d = defs.dungeons.iter().find(|(_, d)| d.boss == *b).map(|(id, _)| id.clone());
            let d = d.ok_or_else(|| anyhow::anyhow!("no dungeon has the boss '{b}'"))?;
            (Some(d), Some((b.to_string(), p - 1)))
        }
        _ => {
            let places = place_scenes(content).join(", ");
            bail!("no scene '{name}' (places here: {places})")
        }
    };
    if let Some(d) = &dungeon {
        for id in 1..=players {
            w.enter_dungeon(id, d);
        }
    }
    let inst = w.instance_of(1).expect("every player is somewhere");
    if let Some((_, p)) = &phase {
        let mut ev = Vec::new();
        let t = w.tick;
        let i = w.instances.get_mut(&inst).expect("instance");
        i.start_boss(&defs, t, &mut ev);
        let hold = crate::content::validate::phase_hold(&defs.bosses[&i.boss.as_ref().expect("boss").def].phases, *p);
        i.force_boss_hp(&defs, hold, &mut ev);
    }
    let ticks = match (&dungeon, &phase) {
        (None, _) => 90,
        (Some(_), None) => 240,
        (Some(_), Some(_)) => 180,
    };
    let mut telegraphs: Vec<(crate::sim::script::Telegraph, u32)> = Vec::new();
    // The scripts' last hint (a tutorial's lesson), with default keys.
    let mut lesson: Option<String> = None;
    for k in 0..ticks {
        for id in 1..=players {
            let a = k as f32 * 0.025 + id as f32 * 1.9;
            let mv = Vec2::new(a.sin(), a.cos() * 0.3) * if dungeon.is_some() { 1.0 } else { 0.4 };
            let _ = w.queue_input(id, InputFrame { tick: w.tick + 1, mv, aim: -90.0, buttons: 1 });
        }
        if let Some(i) = w.instances.get_mut(&inst) {
            for p in i.players.iter_mut() {
                p.hp = p.hp.max(60);
            }
            if let (Some((b, p)), true) = (&phase, k % 30 == 0) {
                let hold = crate::content::validate::phase_hold(&defs.bosses[b].phases, *p);
                i.force_boss_hp(&defs, hold, &mut Vec::new());
            }
        }
        let tick = w.tick + 1;
        telegraphs.retain(|(g, at)| tick < at + g.ticks as u32);
        for e in w.step() {
            match e {
                crate::sim::SimEvent::Telegraph { instance, telegraph } if *instance == inst => {
                    telegraphs.push((*telegraph, tick));
                }
                crate::sim::SimEvent::Hint { instance, text } if *instance == inst => lesson = Some(text.clone()),
                _ => {}
            }
        }
    }
    let now = w.tick;
    let mut f = fixture_of(&w, inst, false);
    f.telegraphs = telegraphs.iter().map(|(g, at)| (*g, (now - at) as f32 / g.ticks.max(1) as f32)).collect();
    let looks = crate::sim::ClientDefs::from_defs(&defs);
    let keys = crate::app::settings::Settings::default();
    let mut hud = HudState {
        lesson: lesson.map(|t| (crate::app::window::fill_keys(&keys, Default::default(), &t), 1.0)),
        hp: 100,
        max_hp: 100,
        in_dungeon: dungeon.is_some(),
        leave_key: "F / B".into(),
        interact_key: "E / A".into(),
        roster: (1..=players).map(|id| (format!("player{id}"), id == 1, true)).collect(),
        ..Default::default()
    };
    match &dungeon {
        None => {
            // The own ship stands in the first portal: its prompt shows. (Labels are
            // placed on screen when the scene is drawn.)
            if let (Some(own), Some(first)) = (f.players.iter_mut().find(|p| p.id == 1), looks.dungeons.first()) {
                own.pos = Vec2::new(first.portal[0], first.portal[1] + 6.0);
            }
            f.portals = looks
                .dungeons
                .iter()
                .map(|d| (d.id.clone(), Vec2::new(d.portal[0], d.portal[1]), d.theme.clone()))
                .collect();
            hud.place = "Hub".into();
            // What stands in the hub is named (the training dummy), like players are.
            hud.name_tags = f
                .enemies
                .iter()
                .filter_map(|e| {
                    let look = looks.enemies.get(e.def as usize)?;
                    Some((look.name.clone(), egui::pos2(e.pos.x, e.pos.y - look.radius)))
                })
                .collect();
            hud.portals = looks
                .dungeons
                .iter()
                .enumerate()
                .map(|(k, d)| crate::app::ui::hud::PortalLabel {
                    text: crate::app::session::portal_label(&d.name, None, None),
                    at: egui::pos2(d.portal[0], d.portal[1]),
                    near: k == 0,
                    difficulty: d.difficulty,
                    // In world px until the scene is drawn.
                    radius: scene::portal_arch(looks.hub.portal_radius),
                })
                .collect();
            f.theme = defs.hub.theme.clone();
        }
        Some(d) => {
            hud.place = defs.dungeons[d].name.clone();
            f.theme = defs.dungeons[d].theme.clone();
            if let Some(b) = w.instances[&inst].boss.as_ref() {
                let bd = &defs.bosses[&b.def];
                hud.boss = Some((bd.name.clone(), bd.phases[b.phase].name.clone(), b.hp as f32 / b.max_hp as f32));
            }
        }
    }
    f.hud = Some(hud);
    Ok(f)
}

/// The fixture of instance `inst` of a world as its players see it (with `dead`, player 1
/// is dead).
fn fixture_of(w: &World, inst: crate::sim::InstanceId, dead: bool) -> Fixture {
    let defs = &w.defs;
    let i = &w.instances[&inst];
    let enemy_index: Vec<&String> = defs.enemies.keys().collect();
    let players = i
        .players
        .iter()
        .map(|p| {
            let mut f = if p.grace > 0 { F_SPAWN_GRACE } else { 0 };
            if dead && p.id == 1 {
                f |= F_DEAD;
            }
            SnapPlayer { id: p.id, pos: p.pos, hp: p.hp.clamp(0, 255) as u8, flags: f, escape: 0, aim: 192 }
        })
        .collect();
    let enemies = i
        .enemies
        .iter()
        .map(|e| SnapEnemy {
            id: e.id,
            def: enemy_index.iter().position(|k| **k == e.def).unwrap_or(0) as u16,
            pos: e.pos,
            hp: e.hp.max(0) as u32,
        })
        .collect();
    let boss = i.boss.as_ref().map(|b| SnapBoss {
        def: defs.bosses.keys().position(|k| *k == b.def).unwrap_or(0) as u16,
        pos: b.pos,
        hp: b.hp as u32,
        max_hp: b.max_hp as u32,
        phase: b.phase as u8,
    });
    Fixture {
        arena: i.arena,
        theme: i.dungeon().and_then(|d| defs.dungeons.get(d)).map(|d| d.theme.clone()).unwrap_or_default(),
        bullets: i.bullets.clone(),
        players,
        enemies,
        boss,
        hud: None,
        telegraphs: Vec::new(),
        portals: Vec::new(),
    }
}

thread_local! {
    /// The interface size the scene being rendered asks for (`NAME@200`: 200 %).
    static ZOOM: std::cell::Cell<f32> = const { std::cell::Cell::new(1.0) };
}

/// An egui context at the scene's interface size.
pub fn ui_context() -> egui::Context {
    let ctx = egui::Context::default();
    crate::app::ui::style::apply(&ctx);
    ctx.set_zoom_factor(ZOOM.with(|z| z.get()));
    ctx
}

/// Runs egui a few frames, a second apart (so that areas are sized and fade-ins are over),
/// and returns what to paint.
pub fn egui_frame(ctx: &egui::Context, size: (u32, u32), mut ui: impl FnMut(&mut egui::Ui)) -> EguiFrame {
    // The screen in points (a larger interface size is fewer points on the same pixels).
    let z = ZOOM.with(|z| z.get());
    let raw = |t: f64| egui::RawInput {
        screen_rect: Some(egui::Rect::from_min_size(
            egui::Pos2::ZERO,
            egui::vec2(size.0 as f32 / z, size.1 as f32 / z),
        )),
        time: Some(t),
        ..Default::default()
    };
    let mut textures = egui::TexturesDelta::default();
    for t in 0..3 {
        let mut o = ctx.run_ui(raw(t as f64), &mut ui);
        textures.append(std::mem::take(&mut o.textures_delta));
    }
    let mut out = ctx.run_ui(raw(3.0), &mut ui);
    textures.append(std::mem::take(&mut out.textures_delta));
    let primitives = ctx.tessellate(out.shapes, out.pixels_per_point);
    EguiFrame { primitives, textures, pixels_per_point: out.pixels_per_point }
}

struct Fixture {
    arena: Vec2,
    /// How the place looks.
    theme: crate::sim::defs::ThemeDef,
    bullets: BulletPool,
    players: Vec<SnapPlayer>,
    enemies: Vec<SnapEnemy>,
    boss: Option<SnapBoss>,
    hud: Option<HudState>,
    /// Telegraphs showing, and how far through each is.
    telegraphs: Vec<(crate::sim::script::Telegraph, f32)>,
    /// Hub portals (their labels are in the HUD, at world positions until drawn).
    portals: Vec<(String, Vec2, crate::sim::defs::ThemeDef)>,
}

fn player(id: u32, pos: Vec2, flags: u8) -> SnapPlayer {
    SnapPlayer { id, pos, hp: 100, flags, escape: 0, aim: 192 }
}

fn bullet_field(content: &Content) -> Fixture {
    let arena = Vec2::new(960.0, 720.0);
    let mut pool = BulletPool::new();
    let mut uid = 1;
    let kinds = content.defs.bullets.len();
    for (k, _) in content.defs.bullets.iter().enumerate() {
        let y = 80.0 + k as f32 * (560.0 / kinds.max(1) as f32);
        for j in 0..14 {
            let s = BulletSpawn {
                uid,
                pos: Vec2::new(90.0 + j as f32 * 56.0, y),
                angle: j as f32 * 27.0,
                speed: 2.0,
                radius: content.defs.bullets[k].radius,
                lifetime: 600,
                kind: k as u16,
                team: if content.defs.bullets[k].id == "player_shot" { Team::Player } else { Team::Enemy },
                accel: 0.0,
                turn: 0.0,
                max_speed: f32::INFINITY,
                tick: 0,
            };
            pool.spawn(&s, 0);
            uid += 1;
        }
    }
    Fixture {
        arena,
        theme: content.defs.hub.theme.clone(),
        bullets: pool,
        players: vec![player(1, Vec2::new(400.0, 680.0), 0), player(2, Vec2::new(560.0, 680.0), F_SPAWN_GRACE)],
        enemies: vec![],
        boss: None,
        hud: None,
        telegraphs: Vec::new(),
        portals: Vec::new(),
    }
}

/// A real Warden fight, 300 ticks in, with four scripted players (deterministic).
fn boss_fight(content: &Content, dead: bool) -> Fixture {
    let mut w = World::new(content.defs.clone(), content.script_factory(), 11);
    for id in 1..=4 {
        w.add_player(id, &format!("player{id}"));
        w.enter_dungeon(id, "warden_keep");
    }
    let inst = w.instance_of(1).expect("in the dungeon");
    let defs = w.defs.clone();
    let mut ev = Vec::new();
    let t = w.tick;
    w.instances.get_mut(&inst).expect("instance").start_boss(&defs, t, &mut ev);
    w.instances.get_mut(&inst).expect("instance").force_boss_hp(&defs, 0.55, &mut ev);
    for k in 0..300u32 {
        for id in 1..=4u32 {
            let a = k as f32 * 0.03 + id as f32 * 1.3;
            let _ = w.queue_input(
                id,
                InputFrame { tick: w.tick + 1, mv: Vec2::new(a.sin(), a.cos() * 0.4), aim: -90.0, buttons: 1 },
            );
        }
        for p in w.instances.get_mut(&inst).expect("instance").players.iter_mut() {
            p.hp = p.hp.max(40);
        }
        w.step();
    }
    let i = &w.instances[&inst];
    let b = i.boss.as_ref().expect("boss");
    let bd = &defs.bosses[&b.def];
    let hud = HudState {
        hp: if dead { 0 } else { 70 },
        max_hp: 100,
        dead,
        lockout_left: if dead { 1.8 } else { 0.0 },
        escape: if dead { 0.0 } else { 0.45 },
        in_dungeon: true,
        place: defs.dungeons["warden_keep"].name.clone(),
        boss: Some((bd.name.clone(), bd.phases[b.phase].name.clone(), b.hp as f32 / b.max_hp as f32)),
        roster: (1..=4).map(|id| (format!("player{id}"), id == 1, !(dead && id == 1))).collect(),
        net: (!dead).then_some(NetOverlay {
            ping_ms: 42.0,
            loss: 0.01,
            up_kbs: 1.23,
            down_kbs: 2.9,
            pred_err_px: 0.05,
            lead: 6,
            route: Some("through the relay"),
        }),
        portals: vec![],
        banner: None,
        hint: None,
        lesson: None,
        notices: if dead { Vec::new() } else { vec!["[server] the server restarts in 5 minutes".into()] },
        server_line: None,
        leave_key: "F / B".into(),
        interact_key: "E / A".into(),
        name_tags: Vec::new(),
        damage: Vec::new(),
        health_bars: Vec::new(),
        downed: None,
        out: false,
        run: None,
        summary: None,
    };
    let mut f = fixture_of(&w, inst, dead);
    f.hud = Some(hud);
    f
}

/// The game's rules on screen, in the Warden's fight: "summary" (a cleared run's summary
/// over it), "downed" (the own ship downed, a teammate reviving it), "focus" (the own ship
/// focused: the graze ring, and the flares and score in the corner), "flare" (one going
/// off: the enemy bullets around the ship cleared as the server would).
fn run_scene(content: &Content, name: &str) -> Fixture {
    use crate::protocol::messages::{F_DEAD, F_DOWNED, F_FOCUS};
    use crate::sim::events::{RunOutcome, RunRow, RunSummary};
    use crate::sim::player::RunStats;
    let mut f = boss_fight(content, false);
    let own = f.players.iter().find(|p| p.id == 1).map_or(f.arena * 0.5, |p| p.pos);
    let status = crate::client::RunStatus { flares: 1, charge: 26, grazes: 146, score: 3_960 };
    let hud = f.hud.as_mut().expect("the fight has a HUD");
    hud.run = Some(status);
    match name {
        "stopped" => {
            // A mod's script worker was lost: the fight ended for everyone, with a word why.
            hud.net = None;
            hud.notices = vec!["The fight was stopped: the scripts of mod 'whirl_mod' took too long.".into()];
            let row = |id, name: &str, damage, grazes| RunRow {
                id,
                name: name.into(),
                score: 0,
                stats: RunStats { damage, kills: 0, grazes, hits_taken: 1, downs: 0, revives: 0, flares_used: 0 },
                out: false,
            };
            hud.summary = Some(RunSummary {
                dungeon: "warden_keep".into(),
                outcome: RunOutcome::Stopped,
                ticks: 38 * 60,
                team_score: 0,
                rows: vec![row(1, "Zoë", 840, 22), row(2, "Kasimir", 610, 17)],
            });
        }
        "summary" => {
            // The boss is down, its bullets cancelled, the players still in the arena.
            f.boss = None;
            f.enemies.clear();
            hud.boss = None;
            hud.escape = 0.0;
            hud.net = None;
            hud.notices.clear();
            f.bullets.clear();
            let row = |id, name: &str, score, damage, kills, grazes, hits, downs, revives, flares| RunRow {
                id,
                name: name.into(),
                score,
                stats: RunStats { damage, kills, grazes, hits_taken: hits, downs, revives, flares_used: flares },
                out: false,
            };
            hud.summary = Some(RunSummary {
                dungeon: "warden_keep".into(),
                outcome: RunOutcome::Cleared,
                ticks: 2 * 60 * 60 + 14 * 60 + 30,
                team_score: 18_240,
                rows: vec![
                    row(1, "Zoë", 6_350, 4_120, 9, 146, 3, 1, 0, 2),
                    row(2, "Kasimir", 4_890, 3_380, 7, 98, 5, 0, 1, 1),
                ],
            });
        }
        "downed" => {
            hud.hp = 0;
            hud.dead = true;
            hud.downed = Some((7, 0.55));
            for p in f.players.iter_mut() {
                if p.id == 1 {
                    p.flags = F_DEAD | F_DOWNED;
                    p.hp = 7;
                    p.escape = 66;
                } else {
                    p.pos = own + Vec2::new(30.0, 10.0);
                }
            }
        }
        "focus" => {
            for p in f.players.iter_mut().filter(|p| p.id == 1) {
                p.flags |= F_FOCUS;
            }
        }
        "spectate" => {
            // Out of the run: the own ship a dim wreck, the others fighting on.
            hud.dead = true;
            hud.out = true;
            hud.hp = 0;
            hud.lockout_left = 0.0;
            hud.leave_key = "F / B".into();
            for p in f.players.iter_mut().filter(|p| p.id == 1) {
                p.flags = F_DEAD | crate::protocol::messages::F_OUT;
                p.hp = 0;
            }
        }
        _ => {
            // The flare's clearing, as the server does it (the field's bullets were
            // spawned before the flare's tick).
            let tick = f.bullets.spawn_tick.iter().copied().max().unwrap_or(0) + 1;
            for i in f.bullets.flare_slots(own, tick) {
                f.bullets.kill(i);
            }
            f.bullets.compact();
            hud.run = Some(crate::client::RunStatus { flares: 0, ..status });
        }
    }
    f
}

/// The title screen (its live fight 20 s in) or the settings page (the Controls section,
/// with default settings), as a player first sees them.
fn menu_scene(gpu: &Gpu, content: &Content, name: &str, size: (u32, u32)) -> anyhow::Result<Vec<u8>> {
    use crate::app::settings::{Section, Settings};
    use crate::app::ui::menu::{self, MenuState, Page};
    let mut sprites = Vec::new();
    let mut cam = Camera::fit(Vec2::new(960.0, 640.0), size, 0.0);
    if let Some(mut a) = crate::app::attract::Attract::new(content) {
        for _ in 0..20 * crate::sim::TICK_RATE {
            a.step();
        }
        cam = a.sprites(size, 0.0, &mut sprites).unwrap_or(cam);
    }
    let mut st = MenuState::default();
    // Not this machine's address: the scene is the same everywhere.
    st.lan_ip = std::sync::OnceLock::from(None);
    let mut settings = Settings::default();
    if name == "settings" {
        st.go(Page::Settings);
        st.section = Section::Controls;
        sprites.clear();
    } else {
        st.go(Page::Main);
    }
    let ctx = ui_context();
    let mut ui = egui_frame(&ctx, size, |ui| {
        menu::main_menu(ui, &mut st, &mut settings, content);
    });
    let mut renderer = Renderer::new(&gpu.device, wgpu::TextureFormat::Rgba8UnormSrgb);
    render::render_to_rgba(gpu, &mut renderer, size, &cam, &sprites, Some(&mut ui))
}

/// The in-game menu in the hub with the content's ships, as a player with 3 stars sees it:
/// the Arrow flown, the Comet free to pick, the others locked with the stars they need.
/// `watch`: the same menu on a friend's server, two friends fighting in dungeons, each
/// with a Watch button.
fn ships_scene(gpu: &Gpu, content: &Content, size: (u32, u32), watch: bool) -> anyhow::Result<Vec<u8>> {
    use crate::app::ui::menu::{self, ShipChoice};
    let stars = 3;
    let ships: Vec<ShipChoice> = content
        .defs
        .ships
        .values()
        .enumerate()
        .map(|(k, s)| ShipChoice { name: s.name.clone(), stars: s.stars, unlocked: s.stars <= stars, flown: k == 0 })
        .collect();
    let ctx = ui_context();
    let mut ui = egui_frame(&ctx, size, |ui| {
        let friends = if watch {
            let name = |id: &str| content.defs.dungeons.get(id).map_or(id.to_string(), |d| d.name.clone());
            menu::Friends {
                elsewhere: vec![("Ann".into(), name("warden_keep")), ("Bo".into(), name("hollow_grove"))],
                watching: None,
            }
        } else {
            menu::Friends::default()
        };
        menu::game_menu(ui.ctx(), false, false, None, None, false, &ships, &friends);
    });
    let cam = Camera::fit(Vec2::new(960.0, 640.0), size, 0.0);
    let mut renderer = Renderer::new(&gpu.device, wgpu::TextureFormat::Rgba8UnormSrgb);
    render::render_to_rgba(gpu, &mut renderer, size, &cam, &[], Some(&mut ui))
}

/// Renders a named scene at `size`; returns RGBA8 pixels. `NAME@200` draws the interface
/// at 200 % (the largest interface size a player can choose).
pub fn render_scene(gpu: &Gpu, content: &Content, name: &str, size: (u32, u32)) -> anyhow::Result<Vec<u8>> {
    let (name, zoom) = match name.split_once('@') {
        Some((n, "200")) => (n, 2.0),
        Some((_, z)) => bail!("interface size '{z}': only @200 (200 %) is a scene"),
        None => (name, 1.0),
    };
    ZOOM.with(|z| z.set(zoom));
    let out = render_scene_at(gpu, content, name, size);
    ZOOM.with(|z| z.set(1.0));
    out
}

fn render_scene_at(gpu: &Gpu, content: &Content, name: &str, size: (u32, u32)) -> anyhow::Result<Vec<u8>> {
    if name == "title" || name == "settings" {
        return menu_scene(gpu, content, name, size);
    }
    if name == "ships" || name == "watch" {
        return ships_scene(gpu, content, size, name == "watch");
    }
    let mut f = match name {
        "bullets" => bullet_field(content),
        "boss_hud" => boss_fight(content, false),
        "death" | "hit" => boss_fight(content, name == "death"),
        "summary" | "downed" | "focus" | "flare" | "spectate" | "stopped" => run_scene(content, name),
        other if other == "hub" || other.starts_with("dungeon:") || other.starts_with("boss:") => {
            place(content, other)?
        }
        other => bail!("no scene '{other}' (scenes: {}, hub, dungeon:ID, boss:ID:PHASE)", SCENES.join(", ")),
    };
    let looks = crate::sim::ClientDefs::from_defs(&content.defs);
    let palette = scene::Palette::new(&looks);
    let enemy_r: Vec<f32> = looks.enemies.iter().map(|e| e.radius).collect();
    let boss_r: Vec<f32> = looks.bosses.iter().map(|b| b.radius).collect();
    // "hit": the own ship and the boss flashing, and an enemy dying beside the boss.
    let (flashes, bursts) = if name == "hit" {
        let at = f.boss.map_or(f.arena * 0.5, |b| b.pos + Vec2::new(-90.0, 40.0));
        // The numbers that rose from those hits, and a wounded enemy's health bar.
        let cam = Camera::fit(f.arena, size, 0.0);
        let pt = |w: Vec2| {
            let s = cam.world_to_screen(w);
            egui::pos2(s.x, s.y)
        };
        let own = f.players.iter().find(|p| p.id == 1).map_or(f.arena * 0.5, |p| p.pos);
        let boss_at = f.boss.map_or(f.arena * 0.5, |b| b.pos);
        if let Some(h) = f.hud.as_mut() {
            h.damage = vec![("-12".into(), pt(own), 0.3, true), ("36".into(), pt(boss_at), 0.5, false)];
            h.health_bars = vec![(pt(at + Vec2::new(60.0, -24.0)), 28.0, 0.4)];
        }
        (
            vec![(crate::protocol::WireTarget::Player(1), 0.9), (crate::protocol::WireTarget::Boss, 0.7)],
            vec![scene::DeathBurst { pos: at, color: [0.9, 0.35, 0.35, 1.0], size: 14.0, age: 0.35 }],
        )
    } else {
        (Vec::new(), Vec::new())
    };
    // "flare": one going off around the own ship, a third of the way out.
    let flares: Vec<(Vec2, f32)> = if name == "flare" {
        f.players.iter().filter(|p| p.id == 1).map(|p| (p.pos, 0.45)).collect()
    } else {
        Vec::new()
    };
    // Sparks: from the flare ("flare"), and from shots landing on the boss ("hit").
    let sparks: Vec<scene::Spark> = match (name, f.boss) {
        ("flare", _) => flares
            .iter()
            .flat_map(|(at, _)| scene::spark_burst(*at, 24, 420.0, [1.0, 0.95, 0.7, 0.9], 7))
            .map(|s| scene::Spark { age: 0.45, ..s })
            .collect(),
        ("hit", Some(b)) => (0..4u32)
            .flat_map(|k| {
                let at = b.pos + Vec2::new(k as f32 * 9.0 - 14.0, 20.0);
                scene::spark_burst(at, 3, 160.0, [1.0, 0.85, 1.0, 1.0], k)
                    .map(move |s| scene::Spark { age: 0.15 + 0.2 * k as f32, ..s })
            })
            .collect(),
        _ => Vec::new(),
    };
    let view = scene::WorldView {
        theme: &f.theme,
        arena: f.arena,
        bullets: &f.bullets,
        alpha: 0.0,
        players: &f.players,
        own_id: Some(1),
        own_pos: None,
        own_aim: None,
        enemies: &f.enemies,
        enemy_radius: &enemy_r,
        boss: f.boss,
        boss_radius: &boss_r,
        portals: &f.portals,
        portal_radius: looks.hub.portal_radius,
        flashes: &flashes,
        bursts: &bursts,
        flares: &flares,
        telegraphs: &f.telegraphs,
        time: 0.0,
        sparks: &sparks,
        // Players 2 to 4 fly the other ships, so every ship's look is in the pictures.
        ships: &[(2, 1), (3, 2), (4, 3)],
    };
    let mut sprites = Vec::new();
    scene::build(&view, &palette, &mut sprites);
    let cam = Camera::fit(f.arena, size, 0.0);
    // Portal labels go over their portals on this screen.
    if let Some(h) = f.hud.as_mut() {
        let zoom = ZOOM.with(|z| z.get());
        for l in h.portals.iter_mut() {
            let s = cam.world_to_screen(Vec2::new(l.at.x, l.at.y)) * (1.0 / zoom);
            l.at = egui::pos2(s.x, s.y);
            l.radius *= cam.scale / zoom;
        }
        if !h.portals.is_empty() {
            // The hub's tags were placed in the world too.
            for (_, at) in h.name_tags.iter_mut() {
                let s = cam.world_to_screen(Vec2::new(at.x, at.y)) * (1.0 / zoom);
                *at = egui::pos2(s.x, s.y);
            }
        }
    }
    let mut renderer = Renderer::new(&gpu.device, wgpu::TextureFormat::Rgba8UnormSrgb);
    renderer.sprites.set_sprites(&gpu.device, &gpu.queue, &looks.sprites);
    let mut ui = f.hud.as_ref().map(|h| {
        let ctx = ui_context();
        egui_frame(&ctx, size, |ui| {
            hud::draw(ui.ctx(), h);
        })
    });
    render::render_to_rgba(gpu, &mut renderer, size, &cam, &sprites, ui.as_mut())
}
