//! `hailfire preview` with a window: the mod's boss (or enemy) against dummy players, a
//! panel with what it costs, keys to restart, pause, step, slow down, skip phases and show
//! hitboxes, and a reload whenever a file of the mod is saved (a broken save keeps the last
//! good version running and shows the errors until the next save fixes them).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::anyhow;
use winit::application::ApplicationHandler;
use winit::event::{ElementState, WindowEvent};
use winit::event_loop::{ActiveEventLoop, ControlFlow, EventLoop};
use winit::keyboard::{KeyCode, PhysicalKey};
use winit::window::{Window, WindowId};

use super::render::{self, Camera, EguiFrame, WindowGfx};
use crate::content::preview::{PreviewHost, Target};
use crate::sim::TICK_RATE;

/// Options for tests and scripts: write a frame after some seconds, quit after some.
#[derive(Default, Clone)]
pub struct PreviewWindowOptions {
    pub capture: Option<(f64, PathBuf)>,
    pub quit_after: Option<f64>,
}

struct PreviewApp {
    host: PreviewHost,
    opts: PreviewWindowOptions,
    gfx: Option<WindowGfx>,
    egui: egui::Context,
    pending_textures: egui::TexturesDelta,
    sprites: Vec<render::Sprite>,
    started: Instant,
    next_tick: Instant,
    paused: bool,
    step_once: bool,
    /// 1, 2 or 4: the simulation runs at 1/slow speed.
    slow: u32,
    frame_no: u64,
    hitboxes: bool,
    /// Cost of the last simulated tick (simulation and scripts), ms, and a slow average.
    tick_ms: f64,
    tick_ms_avg: f64,
    /// Time from a save to the first frame drawn with the reloaded mod.
    save_to_screen: Option<Duration>,
    waiting_for_frame: Option<Instant>,
    capture: render::Capture,
    pub fatal: Option<String>,
}

/// Opens the preview window and runs it until it is closed.
pub fn run(host: PreviewHost, opts: PreviewWindowOptions) -> anyhow::Result<()> {
    let el = EventLoop::new().map_err(|e| anyhow!("no display to open a window on ({e}); use --out FILE.png"))?;
    let mut app = PreviewApp {
        host,
        capture: render::Capture::new(opts.capture.clone()),
        opts,
        gfx: None,
        egui: {
            let ctx = egui::Context::default();
            crate::app::ui::style::apply(&ctx);
            ctx
        },
        pending_textures: Default::default(),
        sprites: Vec::new(),
        started: Instant::now(),
        next_tick: Instant::now(),
        paused: false,
        step_once: false,
        slow: 1,
        frame_no: 0,
        hitboxes: false,
        tick_ms: 0.0,
        tick_ms_avg: 0.0,
        save_to_screen: None,
        waiting_for_frame: None,
        fatal: None,
    };
    el.run_app(&mut app)?;
    match app.fatal {
        Some(f) => Err(anyhow!(f)),
        None => Ok(()),
    }
}

impl PreviewApp {
    fn init_gfx(&mut self, el: &ActiveEventLoop) -> anyhow::Result<()> {
        let attrs = Window::default_attributes()
            .with_title(format!("Hailfire preview: {}", self.host.path.display()))
            .with_inner_size(winit::dpi::LogicalSize::new(1280.0, 760.0));
        self.gfx = Some(WindowGfx::open(el, attrs, wgpu::PresentMode::AutoVsync, &self.egui)?);
        Ok(())
    }

    fn key(&mut self, code: KeyCode, el: &ActiveEventLoop) {
        match code {
            KeyCode::KeyR => self.host.restart(),
            KeyCode::Space => self.paused = !self.paused,
            KeyCode::Period => {
                self.paused = true;
                self.step_once = true;
            }
            KeyCode::Digit1 => self.slow = 1,
            KeyCode::Digit2 => self.slow = 2,
            KeyCode::Digit3 => self.slow = 4,
            KeyCode::KeyH => self.hitboxes = !self.hitboxes,
            KeyCode::KeyN => {
                if let Target::Boss(b) = &self.host.target {
                    let n = self.host.preview.content.defs.bosses.get(b).map_or(1, |d| d.phases.len());
                    let cur = self.host.preview.inst.boss.as_ref().map_or(0, |x| x.phase);
                    self.host.phase = Some((cur + 1) % n);
                    self.host.restart();
                }
            }
            KeyCode::Escape | KeyCode::KeyQ => el.exit(),
            _ => {}
        }
    }

    fn tick(&mut self) {
        self.frame_no += 1;
        let due = if self.paused {
            std::mem::take(&mut self.step_once)
        } else {
            self.frame_no.is_multiple_of(self.slow as u64)
        };
        if !due {
            return;
        }
        let t = Instant::now();
        self.host.preview.step();
        self.tick_ms = t.elapsed().as_secs_f64() * 1000.0;
        self.tick_ms_avg = self.tick_ms_avg * 0.95 + self.tick_ms * 0.05;
    }

    /// The panel's lines, and the errors of the last save (if it did not load).
    fn panel_lines(&self) -> (Vec<String>, Vec<String>) {
        let p = &self.host.preview;
        let mut l = vec![
            self.host.path.display().to_string(),
            match &self.host.target {
                Target::Boss(b) => format!("boss {b}"),
                Target::Enemy(e) => format!("enemy {e}"),
            },
        ];
        if let Some(b) = &p.inst.boss {
            l.push(format!("phase {} of {}", b.phase + 1, p.content.defs.bosses[&b.def].phases.len()));
        }
        l.push(format!("tick {}   bullets {}", p.tick, p.inst.bullets.len()));
        l.push(format!("tick cost {:.3} ms (sim + Lua; mean {:.3})", self.tick_ms, self.tick_ms_avg));
        l.push(format!(
            "speed {}{}",
            if self.slow == 1 { "1x".to_string() } else { format!("1/{}", self.slow) },
            if self.paused { ", paused" } else { "" }
        ));
        l.push(format!(
            "reloads {}{}",
            self.host.reloads,
            self.save_to_screen
                .map_or(String::new(), |d| format!(", last save to screen {:.0} ms", d.as_secs_f64() * 1000.0))
        ));
        if !p.run_errors.is_empty() {
            l.push(String::new());
            l.push("While running:".into());
            l.extend(p.run_errors.iter().map(|e| format!("  {e}")));
        }
        l.push(String::new());
        l.push("R restart   Space pause   . step   1/2/3 speed 1, 1/2, 1/4".into());
        l.push("N next phase   H hitboxes   Q quit".into());
        (l, self.host.errors.iter().take(12).cloned().collect())
    }

    fn frame(&mut self, el: &ActiveEventLoop) {
        super::preview::sprites(&self.host.preview, self.hitboxes, &mut self.sprites);
        let hud = super::preview::hud_state(&self.host.preview);
        let (lines, errors) = self.panel_lines();
        let Some(g) = self.gfx.as_mut() else { return };
        // The mods' sprites, built into the atlas again after a reload that changed them.
        let shown_sprites = crate::sim::client_defs::media_assets(&self.host.preview.content.defs.media.sprites);
        g.renderer.sprites.set_sprites(&g.gpu.device, &g.gpu.queue, &shown_sprites);
        let raw = g.egui_state.take_egui_input(&g.window);
        let size = (g.config.width, g.config.height);
        let cam = Camera::fit(self.host.preview.inst.arena, size, 0.0);
        let full = self.egui.run_ui(raw, |ui| {
            super::ui::hud::draw(ui.ctx(), &hud);
            egui::Window::new("Preview").default_pos([10.0, 40.0]).resizable(false).show(ui.ctx(), |ui| {
                for l in &lines {
                    ui.label(l);
                }
                if !errors.is_empty() {
                    ui.separator();
                    ui.colored_label(
                        egui::Color32::from_rgb(255, 110, 110),
                        "The last save does not load (the previous version runs):",
                    );
                    for e in &errors {
                        ui.colored_label(egui::Color32::from_rgb(255, 170, 150), e);
                    }
                }
            });
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
        let shown = render::present(
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
        if shown {
            if let Some(t) = self.waiting_for_frame.take() {
                self.save_to_screen = Some(t.elapsed());
                tracing::info!(ms = t.elapsed().as_secs_f64() * 1000.0, "save to screen");
            }
        }
        if let Some(path) = self.capture.due(self.started) {
            if let Err(e) = render::save_frame(&g.gpu, &mut g.renderer, size, &cam, &self.sprites, &mut ui, &path) {
                self.fatal = Some(format!("capture: {e:#}"));
                el.exit();
            }
        }
    }
}

impl ApplicationHandler for PreviewApp {
    fn resumed(&mut self, el: &ActiveEventLoop) {
        if self.gfx.is_some() {
            return;
        }
        if let Err(e) = self.init_gfx(el) {
            self.fatal = Some(format!("{e:#}"));
            el.exit();
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
            WindowEvent::KeyboardInput { event: k, .. } if k.state == ElementState::Pressed && !k.repeat => {
                if let PhysicalKey::Code(code) = k.physical_key {
                    self.key(code, el);
                }
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
        if self.host.poll() {
            self.waiting_for_frame = self.host.changed_at.take().or(Some(Instant::now()));
        }
        let dt = Duration::from_secs_f64(1.0 / TICK_RATE as f64);
        let now = Instant::now();
        let mut n = 0;
        let mut ticked = false;
        while self.next_tick <= now && n < 4 {
            self.tick();
            self.next_tick += dt;
            n += 1;
            ticked = true;
        }
        if self.next_tick + dt * 4 < now {
            self.next_tick = now;
        }
        if let Some(g) = &self.gfx {
            if ticked {
                g.window.request_redraw();
            }
        }
        el.set_control_flow(ControlFlow::WaitUntil(self.next_tick));
    }
}
