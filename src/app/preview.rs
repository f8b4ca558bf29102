//! Draws a `content::preview::Preview` offscreen (the headless `hailfire preview --out`).

use crate::app::render::{self, Camera, Gpu, Renderer};
use crate::app::scenes::egui_frame;
use crate::app::ui::hud::{self, HudState};
use crate::content::preview::{Preview, Target};
use crate::sim::ClientDefs;

use super::render::scene;

/// The preview's sprites (the arena, its bodies and bullets; with `hitboxes`, the players'
/// 5 px hitboxes over their ships).
pub fn sprites(p: &Preview, hitboxes: bool, out: &mut Vec<render::Sprite>) {
    let defs = &p.content.defs;
    let i = &p.inst;
    let looks = ClientDefs::from_defs(defs);
    let palette = scene::Palette::new(&looks);
    // The same conversion the server replicates with.
    let index = |ids: Vec<&String>| ids.into_iter().enumerate().map(|(k, id)| (id.clone(), k as u16)).collect();
    let snap = crate::server::replicate::instance_snapshot(
        i,
        p.tick,
        &index(defs.enemies.keys().collect()),
        &index(defs.bosses.keys().collect()),
    );
    let (players, enemies, boss) = (snap.players, snap.enemies, snap.boss);
    let enemy_r: Vec<f32> = looks.enemies.iter().map(|e| e.radius).collect();
    let boss_r: Vec<f32> = looks.bosses.iter().map(|b| b.radius).collect();
    let theme = i.dungeon().and_then(|d| defs.dungeons.get(d)).map(|d| d.theme.clone()).unwrap_or_default();
    let view = scene::WorldView {
        theme: &theme,
        arena: i.arena,
        bullets: &i.bullets,
        alpha: 0.0,
        players: &players,
        own_id: None,
        own_pos: None,
        own_aim: None,
        enemies: &enemies,
        enemy_radius: &enemy_r,
        boss,
        boss_radius: &boss_r,
        portals: &[],
        portal_radius: looks.hub.portal_radius,
        flashes: &[],
        bursts: &[],
        flares: &[],
        telegraphs: &p
            .telegraphs
            .iter()
            .map(|(g, at)| (*g, (p.tick - at) as f32 / g.ticks.max(1) as f32))
            .collect::<Vec<_>>(),
        time: p.tick as f32 / crate::sim::TICK_RATE as f32,
        sparks: &[],
        ships: &[],
    };
    out.clear();
    scene::build(&view, &palette, out);
    if hitboxes {
        for pl in &i.players {
            let r = crate::sim::config::PLAYER_HITBOX_RADIUS;
            out.push(render::Sprite {
                pos: [pl.pos.x, pl.pos.y],
                size: [r, r],
                color: [1.0, 1.0, 1.0, 1.0],
                params: [scene::SH_RING, 0.0, 0.0, 0.0],
                ..Default::default()
            });
        }
    }
}

/// The HUD line and boss bar of a preview frame.
pub fn hud_state(p: &Preview) -> HudState {
    let defs = &p.content.defs;
    let i = &p.inst;
    let what = match &p.target {
        Target::Boss(b) => format!("preview: boss {b}"),
        Target::Enemy(e) => format!("preview: enemy {e}"),
    };
    HudState {
        damage: Vec::new(),
        health_bars: Vec::new(),
        downed: None,
        out: false,
        run: None,
        summary: None,
        hp: 100,
        max_hp: 100,
        dead: false,
        lockout_left: 0.0,
        escape: 0.0,
        in_dungeon: true,
        place: format!("{what}, tick {}, {} bullets", p.tick, i.bullets.len()),
        boss: i.boss.as_ref().map(|b| {
            let d = &defs.bosses[&b.def];
            (d.name.clone(), d.phases[b.phase].name.clone(), b.hp as f32 / b.max_hp.max(1) as f32)
        }),
        roster: Vec::new(),
        net: None,
        portals: Vec::new(),
        banner: None,
        hint: None,
        // The script's hint, for eight seconds.
        lesson: p
            .hint
            .as_ref()
            .filter(|(_, at)| p.tick < at + 8 * crate::sim::TICK_RATE)
            .map(|(t, _)| (t.clone(), 1.0)),
        notices: Vec::new(),
        server_line: None,
        leave_key: String::new(),
        interact_key: String::new(),
        name_tags: Vec::new(),
    }
}

/// The preview's current frame as RGBA8 pixels at `size`, with the boss bar (name, phase,
/// HP) and a line saying what is shown.
pub fn render(gpu: &Gpu, p: &Preview, size: (u32, u32)) -> anyhow::Result<Vec<u8>> {
    let mut out = Vec::new();
    sprites(p, false, &mut out);
    let cam = Camera::fit(p.inst.arena, size, 0.0);
    let hud = hud_state(p);
    let mut renderer = Renderer::new(&gpu.device, wgpu::TextureFormat::Rgba8UnormSrgb);
    let shown = crate::sim::client_defs::media_assets(&p.content.defs.media.sprites);
    renderer.sprites.set_sprites(&gpu.device, &gpu.queue, &shown);
    let ctx = egui::Context::default();
    crate::app::ui::style::apply(&ctx);
    let mut ui = egui_frame(&ctx, size, |ui| {
        hud::draw(ui.ctx(), &hud);
    });
    render::render_to_rgba(gpu, &mut renderer, size, &cam, &out, Some(&mut ui))
}
