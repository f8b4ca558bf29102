//! `hailfire replay FILE`: a recording played through the game's own client and its own
//! drawing code (`Session`), in a window with pause, seek, speed 0.25x to 4x and a free
//! camera, or one frame offscreen (`--at SECONDS --out FRAME.png`).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::anyhow;
use winit::application::ApplicationHandler;
use winit::event::{ElementState, MouseScrollDelta, WindowEvent};
use winit::event_loop::{ActiveEventLoop, ControlFlow, EventLoop};
use winit::keyboard::{KeyCode, PhysicalKey};
use winit::window::{Window, WindowId};

use super::audio::Audio;
use super::render::{self, Camera, EguiFrame, Gpu, Renderer, WindowGfx};
use super::session::Session;
use super::settings::Settings;
use crate::client::replay::{Player, Replay, ReplayTransport};
use crate::sim::{Vec2, TICK_RATE};

/// Speeds a replay plays at (the window's `[` and `]` step through them).
pub const SPEEDS: [f64; 5] = [0.25, 0.5, 1.0, 2.0, 4.0];

/// A replay's player and what draws it: the client lives in the session between ticks
/// and is lent to the player to step (the two swap it, which costs nothing).
struct Watch {
    player: Player,
    session: Session<ReplayTransport>,
}

impl Watch {
    fn new(replay: Arc<Replay>) -> Watch {
        let player = Player::new(replay.clone());
        let session = Session::new(Player::fresh(&replay), None);
        Watch { player, session }
    }

    fn with_player<R>(&mut self, f: impl FnOnce(&mut Player) -> R) -> R {
        std::mem::swap(&mut self.session.client, &mut self.player.client);
        let r = f(&mut self.player);
        std::mem::swap(&mut self.session.client, &mut self.player.client);
        r
    }

    /// Goes to tick `frame`; what happened on the way makes no sound and no flash.
    fn seek(&mut self, frame: usize) {
        self.with_player(|p| p.seek(frame));
        self.session.client.events.clear();
    }

    /// The frame's sprites and camera, and the HUD over it.
    fn draw(
        &mut self,
        size: (u32, u32),
        time: f32,
        look: &Settings,
        out: &mut Vec<render::Sprite>,
    ) -> Option<(Camera, super::ui::hud::HudState)> {
        let cam = self.session.sprites(0.0, size, time, look, out)?;
        let hud = self.session.hud(Some(&cam), 1.0, look, None);
        Some((cam, hud))
    }
}

/// Renders the replay's frame at `seconds` offscreen, as the window would show it (the
/// recorded player's view). Returns RGBA8 pixels and a line saying what is shown.
pub fn render_at(gpu: &Gpu, replay: Arc<Replay>, seconds: f64, size: (u32, u32)) -> anyhow::Result<(Vec<u8>, String)> {
    let total = replay.seconds();
    if !(0.0..=total).contains(&seconds) {
        return Err(anyhow!("--at {seconds} is outside the replay (0 to {total:.1} s)"));
    }
    let sprites_of = replay.content.defs.sprites.clone();
    let mut w = Watch::new(replay);
    w.seek((seconds * TICK_RATE as f64).round() as usize);
    let look = Settings::default();
    let mut sprites = Vec::new();
    let (cam, hud) =
        w.draw(size, seconds as f32, &look, &mut sprites).ok_or_else(|| anyhow!("nothing is shown at {seconds} s"))?;
    let mut renderer = Renderer::new(&gpu.device, wgpu::TextureFormat::Rgba8UnormSrgb);
    renderer.sprites.set_sprites(&gpu.device, &gpu.queue, &sprites_of);
    let ctx = super::scenes::ui_context();
    let mut ui = super::scenes::egui_frame(&ctx, size, |ui| {
        super::ui::hud::draw(ui.ctx(), &hud);
    });
    let rgba = render::render_to_rgba(gpu, &mut renderer, size, &cam, &sprites, Some(&mut ui))?;
    let c = &w.session.client;
    let place = c.view.as_ref().map_or("nowhere".to_string(), |v| {
        if v.dungeon.is_empty() {
            "the hub".into()
        } else {
            v.dungeon.clone()
        }
    });
    let bullets = c.view.as_ref().map_or(0, |v| v.replica.pool.len());
    Ok((rgba, format!("{place}, {bullets} bullets, {sprites} sprites drawn", sprites = sprites.len())))
}

/// Options for tests and scripts: write a frame after some seconds, quit after some.
#[derive(Default, Clone)]
pub struct ReplayWindowOptions {
    pub capture: Option<(f64, PathBuf)>,
    pub quit_after: Option<f64>,
}

struct ReplayApp {
    watch: Watch,
    title: String,
    opts: ReplayWindowOptions,
    gfx: Option<WindowGfx>,
    egui: egui::Context,
    pending_textures: egui::TexturesDelta,
    audio: Audio,
    look: Settings,
    sprites: Vec<render::Sprite>,
    started: Instant,
    next_tick: Instant,
    paused: bool,
    step_once: bool,
    /// Index into [`SPEEDS`], and ticks owed to the replay at that speed.
    speed: usize,
    owed: f64,
    /// The free camera: off (follow what the player saw), or a pan (world px) and a zoom.
    free: Option<(Vec2, f32)>,
    held: std::collections::HashSet<KeyCode>,
    capture: render::Capture,
    pub fatal: Option<String>,
}

/// Opens a window that plays the replay until it is closed.
pub fn run(replay: Arc<Replay>, title: String, opts: ReplayWindowOptions) -> anyhow::Result<()> {
    let el = EventLoop::new()
        .map_err(|e| anyhow!("no display to open a window on ({e}); use --at SECONDS --out FRAME.png or --check"))?;
    let look = Settings::load().0;
    let mut app = ReplayApp {
        watch: Watch::new(replay),
        title,
        capture: render::Capture::new(opts.capture.clone()),
        opts,
        gfx: None,
        egui: {
            let ctx = egui::Context::default();
            crate::app::ui::style::apply(&ctx);
            ctx
        },
        pending_textures: Default::default(),
        audio: Audio::new(look.effective_master(), look.sfx_volume, 0.0),
        look,
        sprites: Vec::new(),
        started: Instant::now(),
        next_tick: Instant::now(),
        paused: false,
        step_once: false,
        speed: 2,
        owed: 0.0,
        free: None,
        held: Default::default(),
        fatal: None,
    };
    el.run_app(&mut app)?;
    match app.fatal {
        Some(f) => Err(anyhow!(f)),
        None => Ok(()),
    }
}

impl ReplayApp {
    fn key(&mut self, code: KeyCode, el: &ActiveEventLoop) {
        let frame = self.watch.player.frame;
        let five = 5 * TICK_RATE as usize;
        match code {
            KeyCode::Space => self.paused = !self.paused,
            KeyCode::Period => {
                self.paused = true;
                self.step_once = true;
            }
            KeyCode::ArrowLeft => self.watch.seek(frame.saturating_sub(five)),
            KeyCode::ArrowRight => self.watch.seek(frame + five),
            KeyCode::Home => self.watch.seek(0),
            KeyCode::BracketLeft | KeyCode::Minus => self.speed = self.speed.saturating_sub(1),
            KeyCode::BracketRight | KeyCode::Equal => self.speed = (self.speed + 1).min(SPEEDS.len() - 1),
            KeyCode::KeyF => self.free = if self.free.is_some() { None } else { Some((Vec2::new(0.0, 0.0), 1.0)) },
            KeyCode::Escape | KeyCode::KeyQ => el.exit(),
            _ => {}
        }
    }

    fn tick(&mut self) {
        // The free camera pans with WASD.
        if let Some((pan, zoom)) = self.free.as_mut() {
            let step = 8.0 / *zoom;
            for (k, d) in [
                (KeyCode::KeyW, Vec2::new(0.0, -step)),
                (KeyCode::KeyS, Vec2::new(0.0, step)),
                (KeyCode::KeyA, Vec2::new(-step, 0.0)),
                (KeyCode::KeyD, Vec2::new(step, 0.0)),
            ] {
                if self.held.contains(&k) {
                    *pan = *pan + d;
                }
            }
        }
        let n = if self.paused {
            std::mem::take(&mut self.step_once) as usize
        } else {
            self.owed += SPEEDS[self.speed];
            let n = self.owed.floor();
            self.owed -= n;
            n as usize
        };
        for _ in 0..n {
            if !self.watch.with_player(|p| p.step()) {
                self.paused = true;
                break;
            }
            self.watch.session.after_tick(&mut self.audio, false);
        }
    }

    fn frame(&mut self, el: &ActiveEventLoop) {
        let Some(g) = self.gfx.as_mut() else { return };
        let size = (g.config.width, g.config.height);
        let time = self.started.elapsed().as_secs_f32();
        self.sprites.clear();
        let drawn = self.watch.draw(size, time, &self.look, &mut self.sprites);
        let mut cam = drawn.as_ref().map_or_else(|| Camera::fit(Vec2::new(960.0, 640.0), size, time), |d| d.0);
        if let Some((pan, zoom)) = self.free {
            // Zoom about the screen's centre, then pan.
            let centre = cam.screen_to_world(Vec2::new(size.0 as f32 / 2.0, size.1 as f32 / 2.0));
            cam.scale *= zoom;
            cam.origin = centre + pan - Vec2::new(size.0 as f32, size.1 as f32) * (0.5 / cam.scale);
        }
        // The content in play: the recording's, or a live update that came during it.
        if let Some(c) = self.watch.session.client.content.as_ref() {
            g.renderer.sprites.set_sprites(&g.gpu.device, &g.gpu.queue, &c.defs.sprites);
            self.audio.set_mod_sounds(&c.defs.sounds);
        }
        let p = &self.watch.player;
        let line = format!(
            "{}   {:.1} / {:.1} s   {}x{}{}",
            self.title,
            p.seconds(),
            p.replay.seconds(),
            SPEEDS[self.speed],
            if self.paused { "   paused" } else { "" },
            if self.free.is_some() { "   free camera" } else { "" }
        );
        let keys =
            "Space pause   . step   Left/Right 5 s   Home start   [ ] speed   F free camera (WASD, wheel)   Q quit";
        let raw = g.egui_state.take_egui_input(&g.window);
        let hud = drawn.map(|d| d.1);
        let full = self.egui.run_ui(raw, |ui| {
            if let Some(h) = &hud {
                super::ui::hud::draw(ui.ctx(), h);
            }
            egui::Area::new(egui::Id::unique("replay")).anchor(egui::Align2::LEFT_TOP, [12.0, 10.0]).show(
                ui.ctx(),
                |ui| {
                    ui.label(egui::RichText::new(&line).strong());
                },
            );
            egui::Area::new(egui::Id::unique("replay_keys")).anchor(egui::Align2::CENTER_BOTTOM, [0.0, -8.0]).show(
                ui.ctx(),
                |ui| {
                    ui.label(keys);
                },
            );
        });
        g.egui_state.handle_platform_output(&g.window, full.platform_output);
        self.pending_textures.append(full.textures_delta);
        let primitives = self.egui.tessellate(full.shapes, full.pixels_per_point);
        if size.0 == 0 || size.1 == 0 {
            return;
        }
        let mut ui = EguiFrame {
            primitives,
            textures: std::mem::take(&mut self.pending_textures),
            pixels_per_point: full.pixels_per_point,
        };
        render::present(
            &g.gpu,
            &g.surface,
            &g.config,
            &g.window,
            &mut g.renderer,
            &cam,
            &self.sprites,
            &mut ui,
            &mut self.pending_textures,
        );
        if let Some(path) = self.capture.due(self.started) {
            if let Err(e) = render::save_frame(&g.gpu, &mut g.renderer, size, &cam, &self.sprites, &mut ui, &path) {
                self.fatal = Some(format!("capture: {e:#}"));
                el.exit();
            }
        }
    }
}

impl ApplicationHandler for ReplayApp {
    fn resumed(&mut self, el: &ActiveEventLoop) {
        if self.gfx.is_some() {
            return;
        }
        let attrs = Window::default_attributes()
            .with_title(format!("Hailfire replay: {}", self.title))
            .with_inner_size(winit::dpi::LogicalSize::new(1280.0, 760.0));
        match WindowGfx::open(el, attrs, wgpu::PresentMode::AutoVsync, &self.egui) {
            Ok(g) => self.gfx = Some(g),
            Err(e) => {
                self.fatal = Some(format!("{e:#}"));
                el.exit();
            }
        }
        self.next_tick = Instant::now();
    }

    fn window_event(&mut self, el: &ActiveEventLoop, _id: WindowId, event: WindowEvent) {
        let Some(g) = self.gfx.as_mut() else { return };
        let _ = g.egui_state.on_window_event(&g.window, &event);
        match &event {
            WindowEvent::CloseRequested => el.exit(),
            WindowEvent::Resized(size) if size.width > 0 && size.height > 0 => {
                g.config.width = size.width;
                g.config.height = size.height;
                g.surface.configure(&g.gpu.device, &g.config);
            }
            WindowEvent::KeyboardInput { event: k, .. } => {
                if let PhysicalKey::Code(code) = k.physical_key {
                    if k.state == ElementState::Pressed {
                        self.held.insert(code);
                        if !k.repeat {
                            self.key(code, el);
                        }
                    } else {
                        self.held.remove(&code);
                    }
                }
            }
            WindowEvent::MouseWheel { delta, .. } => {
                let up = match delta {
                    MouseScrollDelta::LineDelta(_, y) => *y,
                    MouseScrollDelta::PixelDelta(p) => p.y as f32 / 40.0,
                };
                let (pan, zoom) = self.free.get_or_insert((Vec2::new(0.0, 0.0), 1.0));
                let _ = pan;
                *zoom = (*zoom * 1.1f32.powf(up)).clamp(0.25, 6.0);
            }
            WindowEvent::RedrawRequested => self.frame(el),
            _ => {}
        }
    }

    fn about_to_wait(&mut self, el: &ActiveEventLoop) {
        if self.opts.quit_after.is_some_and(|q| self.started.elapsed().as_secs_f64() >= q) {
            el.exit();
            return;
        }
        let dt = Duration::from_secs_f64(1.0 / TICK_RATE as f64);
        let now = Instant::now();
        let mut n = 0;
        while self.next_tick <= now && n < 4 {
            self.tick();
            self.next_tick += dt;
            n += 1;
        }
        if self.next_tick + dt * 4 < now {
            self.next_tick = now;
        }
        if let Some(g) = &self.gfx {
            g.window.request_redraw();
        }
        el.set_control_flow(ControlFlow::WaitUntil(self.next_tick));
    }
}
