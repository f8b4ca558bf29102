//! The windowed game: winit event loop, fixed 60 Hz client ticks with render
//! interpolation, frame pacing that sleeps (vsync on by default, never a spinning core),
//! resize/minimise/DPI handling, screenshots, and the switch between menus and a session.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use winit::application::ApplicationHandler;
use winit::event::{ElementState, WindowEvent};
use winit::event_loop::{ActiveEventLoop, ControlFlow};
use winit::keyboard::{KeyCode, ModifiersState, PhysicalKey};
use winit::window::{Fullscreen, Window, WindowId};

use super::audio::Audio;
use super::input::{self, Device, InputState};
use super::render::{self, EguiFrame, WindowGfx};
use super::session::Session;
use super::settings::{Action, Settings, WindowMode};
use super::ui::{hud, menu};
use crate::client::Phase;
use crate::content::Content;
use crate::sim::{Vec2, TICK_RATE};

#[derive(Clone, Debug, Default)]
pub struct AppOptions {
    pub host: bool,
    pub join: Option<String>,
    pub name: Option<String>,
    /// Write a PNG of the frame this many seconds after start (tests).
    pub capture: Option<(f64, PathBuf)>,
    /// Quit this many seconds after start (tests).
    pub quit_after: Option<f64>,
    /// Record the first session into this replay file (`--record`).
    pub record: Option<PathBuf>,
}

pub struct App {
    opts: AppOptions,
    content: Content,
    settings: Settings,
    settings_warning: Option<String>,
    gfx: Option<WindowGfx>,
    egui: egui::Context,
    pending_textures: egui::TexturesDelta,
    audio: Audio,
    gilrs: Option<gilrs::Gilrs>,
    input: InputState,
    pad_events: Vec<egui::Event>,
    modifiers: ModifiersState,
    menu: menu::MenuState,
    session: Option<Session>,
    started: Instant,
    next_tick: Instant,
    alpha: f32,
    minimized: bool,
    screenshot: bool,
    capture: render::Capture,
    sprites: Vec<render::Sprite>,
    /// The title screen's live background: None until built, Some(None) when the content
    /// has no fight to show (not tried again until the mods change).
    attract: Option<Option<super::attract::Attract>>,
    /// The title screen's music.
    title_music: crate::sim::defs::MusicDef,
    /// The window size last asked for from the settings (not the player's own resizing).
    applied_size: [u32; 2],
    /// Ticks since start (the frame-rate cap draws on every other one at 30).
    ticks: u64,
    /// The window is on Wayland (no exclusive fullscreen there).
    wayland: bool,
    pub fatal: Option<String>,
}

impl App {
    pub fn new(opts: AppOptions, content: Content) -> App {
        let (mut settings, settings_warning) = Settings::load();
        if let Some(n) = &opts.name {
            settings.name = n.clone();
            settings.sanitize();
        }
        let audio = Audio::new(settings.effective_master(), settings.sfx_volume, settings.music_volume);
        let gilrs = match gilrs::Gilrs::new() {
            Ok(g) => Some(g),
            Err(e) => {
                tracing::warn!("gamepads unavailable: {e}");
                None
            }
        };
        let egui_ctx = egui::Context::default();
        crate::app::ui::style::apply(&egui_ctx);
        // The interface size is a setting; egui's own Ctrl+/- zoom would bypass it.
        egui_ctx.options_mut(|o| o.zoom_with_keyboard = false);
        let mut menu = menu::MenuState::default();
        menu.go(menu::Page::Main);
        menu.error = settings_warning.clone();
        menu.no_sound = audio.muted_reason.clone();
        if !content.base_loaded() {
            menu.error = Some("The base game content failed to load; see Mods and run `hailfire mods check`.".into());
        }
        // Host-and-play runs the mods the player enabled in the Mods menu.
        let content = if settings.disabled_mods.is_empty() && settings.enabled_mods.is_empty() {
            content
        } else {
            Content::load_chosen(&[], &settings.mod_choice(), &[])
        };
        App {
            capture: render::Capture::new(opts.capture.clone()),
            opts,
            content,
            settings,
            settings_warning,
            gfx: None,
            egui: egui_ctx,
            pending_textures: Default::default(),
            audio,
            gilrs,
            input: InputState::default(),
            pad_events: Vec::new(),
            modifiers: ModifiersState::empty(),
            menu,
            session: None,
            started: Instant::now(),
            next_tick: Instant::now(),
            alpha: 0.0,
            minimized: false,
            screenshot: false,
            sprites: Vec::new(),
            attract: None,
            title_music: crate::app::music::title_music(),
            applied_size: [0, 0],
            ticks: 0,
            wayland: false,
            fatal: None,
        }
    }

    fn save_settings(&mut self) {
        // A sanitized copy is saved; the one in memory keeps the name as it is being typed
        // (sanitizing trims it, so a space could not be typed).
        let mut saved = self.settings.clone();
        saved.sanitize();
        let typed = std::mem::take(&mut self.settings.name);
        self.settings = Settings { name: typed, ..saved.clone() };
        if let Err(e) = saved.save() {
            self.menu.error = Some(format!("Could not save settings to {}: {e}", Settings::path().display()));
        }
        self.audio.set_volumes(self.settings.effective_master(), self.settings.sfx_volume, self.settings.music_volume);
    }

    /// Saves the settings and applies what shows at once: window mode and size, vsync,
    /// interface size, volumes.
    fn apply_settings(&mut self) {
        self.save_settings();
        self.egui.set_zoom_factor(self.settings.ui_scale);
        let Some(g) = self.gfx.as_mut() else { return };
        let mode = self.settings.window_mode;
        let now = match g.window.fullscreen() {
            None => WindowMode::Windowed,
            Some(Fullscreen::Borderless(_)) => WindowMode::Borderless,
            Some(Fullscreen::Exclusive(_)) => WindowMode::Fullscreen,
        };
        if now != mode {
            g.window.set_fullscreen(fullscreen_for(&g.window, mode, self.wayland));
        }
        // The size chosen is asked for when it changes in windowed mode, and when the
        // window comes back to windowed mode (a size picked while fullscreen counts then).
        let back_to_window = now != WindowMode::Windowed && mode == WindowMode::Windowed;
        if mode == WindowMode::Windowed && (self.applied_size != self.settings.window_size || back_to_window) {
            let [w, h] = self.settings.window_size;
            let _ = g.window.request_inner_size(winit::dpi::LogicalSize::new(w as f64, h as f64));
            self.applied_size = self.settings.window_size;
        }
        let pm = if self.settings.vsync { wgpu::PresentMode::AutoVsync } else { wgpu::PresentMode::AutoNoVsync };
        if g.config.present_mode != pm {
            g.config.present_mode = pm;
            g.surface.configure(&g.gpu.device, &g.config);
        }
    }

    fn init_gfx(&mut self, el: &ActiveEventLoop) -> anyhow::Result<()> {
        let icon = winit::window::Icon::from_rgba(crate::app::icon::rgba(64), 64, 64).ok();
        let [w, h] = self.settings.window_size;
        self.applied_size = self.settings.window_size;
        self.egui.set_zoom_factor(self.settings.ui_scale);
        let attrs = Window::default_attributes()
            .with_title("Hailfire")
            .with_window_icon(icon)
            .with_inner_size(winit::dpi::LogicalSize::new(w as f64, h as f64))
            .with_min_inner_size(winit::dpi::LogicalSize::new(640.0, 360.0));
        // The name desktops match with the desktop entry (its StartupWMClass on X11, its
        // file name on Wayland: X11's WM_CLASS is "hailfire", "io.hailfire.Hailfire" and
        // Wayland's app id "io.hailfire.Hailfire"), so the running game shows its icon.
        #[cfg(all(unix, not(target_os = "macos")))]
        let attrs =
            winit::platform::wayland::WindowAttributesExtWayland::with_name(attrs, "io.hailfire.Hailfire", "hailfire");
        let g = WindowGfx::open(el, attrs, self.present_mode(), &self.egui)?;
        #[cfg(all(unix, not(target_os = "macos")))]
        {
            use winit::platform::wayland::ActiveEventLoopExtWayland;
            self.wayland = el.is_wayland();
        }
        if self.settings.window_mode != WindowMode::Windowed {
            g.window.set_fullscreen(fullscreen_for(&g.window, self.settings.window_mode, self.wayland));
        }
        tracing::info!(adapter = %g.gpu.adapter_name(), "window open");
        crate::crash::set_adapter(g.gpu.adapter_name());
        self.gfx = Some(g);
        Ok(())
    }

    fn present_mode(&self) -> wgpu::PresentMode {
        if self.settings.vsync {
            wgpu::PresentMode::AutoVsync
        } else {
            wgpu::PresentMode::AutoNoVsync
        }
    }

    /// `remember`: the address to keep in the recent servers once the join succeeds
    /// (never for a failed one).
    fn start_session(&mut self, s: anyhow::Result<Session>, remember: Option<String>) {
        match s {
            Ok(mut s) => {
                s.remember = remember;
                if self.opts.record.is_some() || self.settings.record_sessions {
                    s.client.record();
                }
                self.session = Some(s);
                self.menu.error = None;
            }
            Err(e) => self.menu.error = Some(format!("{e:#}")),
        }
    }

    /// Writes the session's recording, if it was recording (`--record FILE` takes the
    /// first session; the setting keeps each one in the data folder's replays/).
    fn save_recording(&mut self, s: &mut Session) {
        if let Some(r) = s.client.recording() {
            // `--record FILE` takes the first session; the setting keeps each one.
            let path = self.opts.record.take().or_else(|| {
                crate::crash::data_dir().map(|d| {
                    let dir = d.join("replays");
                    let name = crate::server::recorder::file_name_in(Some(&dir), "session");
                    dir.join(name)
                })
            });
            if let Some(path) = path {
                if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                    let _ = std::fs::create_dir_all(dir);
                }
                match std::fs::write(&path, r.encode()) {
                    Ok(()) => {
                        println!("hailfire: replay of {:.0} s saved to {}", r.seconds(), path.display());
                        tracing::info!(path = %path.display(), seconds = r.seconds(), "replay saved");
                    }
                    Err(e) => tracing::warn!(path = %path.display(), "could not save the replay: {e}"),
                }
            }
        }
    }

    /// Leaves the server and joins it again: as a spectator of `watch`, or as a player.
    fn rejoin(&mut self, watch: Option<String>) {
        let Some((addr, password)) = self.session.as_ref().and_then(|s| Some((s.addr.clone()?, s.password.clone())))
        else {
            return;
        };
        if let Some(mut s) = self.session.take() {
            self.save_recording(&mut s);
            // Through the menu's own path: the ship channels out as on "Disconnect".
            s.close();
        }
        let s = Session::join_watching(&self.content, &self.settings.name, &addr, password, None, watch.as_deref());
        self.start_session(s, None);
        if let Some(s) = self.session.as_mut() {
            s.menu_open = false;
        }
    }

    fn end_session(&mut self, why: Option<String>) {
        let (mut addr, mut key) = (None, None);
        if let Some(mut s) = self.session.take() {
            addr = s.addr.clone();
            key = s.client.net.presented_key();
            self.save_recording(&mut s);
            s.close();
        }
        self.input.synthetic_escape = false;
        self.menu.rebinding = None;
        self.menu.conflict = None;
        self.audio.music(Some((&self.title_music, 0)));
        if let Some(w) = &why {
            // Also for players (and tests) who started the game from a terminal.
            println!("hailfire: {w}");
        }
        // A changed server key: back to the Join page, with the choice to trust it.
        let key_changed = why.as_deref().is_some_and(|w| w.contains("presented a different key"));
        self.menu.error = why;
        match (key_changed, addr) {
            (true, Some(a)) => {
                self.menu.join_addr = a.clone();
                self.menu.key_changed_for = Some((a, key));
                self.menu.go(menu::Page::Join);
            }
            // A join that failed or ended: back to the Join page, the address kept.
            (false, Some(a)) if self.menu.error.is_some() => {
                self.menu.join_addr = a;
                self.menu.go(menu::Page::Join);
            }
            _ => self.menu.go(menu::Page::Main),
        }
    }

    /// One 60 Hz client tick.
    fn tick(&mut self) {
        let ship = self.ship_screen();
        let in_menu = self.session.as_ref().is_none_or(|s| s.menu_open);
        let mut sample = if in_menu {
            self.input.in_menu();
            Default::default()
        } else {
            self.input.sample(&self.settings, ship)
        };
        self.ticks += 1;
        let Some(s) = self.session.as_mut() else {
            // The title's music (made on another thread the first time).
            self.audio.music(Some((&self.title_music, 0)));
            if let Some(Some(a)) = self.attract.as_mut() {
                if !self.minimized {
                    a.step();
                }
            }
            return;
        };
        self.attract = None;
        if s.returning {
            sample.buttons |= crate::sim::player::BTN_ESCAPE;
        }
        // Hosting alone, the menu open: the server waits, and this game's clock with it.
        if let Some(srv) = &s.server {
            srv.ask_pause(s.menu_open);
        }
        if s.paused() {
            s.pause_clock();
            return;
        }
        let now_ms = s.game_ms();
        s.client.update(now_ms, sample);
        if s.client.is_joined() && !s.ship_sent {
            // The ship picked last time, if this server has it and it is still earned.
            s.ship_sent = true;
            let choices = s.ship_choices(&self.settings.ship);
            if let Some(k) = choices.iter().position(|c| c.flown && c.unlocked) {
                s.client.choose_ship(k as u16);
            }
        }
        if s.client.is_joined() {
            if let Some(a) = s.remember.take() {
                self.settings.remember_server(&a);
                let _ = self.settings.save();
            }
        }
        s.after_tick(&mut self.audio, sample.buttons & crate::sim::player::BTN_FIRE != 0);
        match s.client.phase.clone() {
            Phase::Failed(why) => {
                let msg = if s.client.player_id.is_some() {
                    format!("Connection lost: {why}")
                } else {
                    format!("Could not join: {why}")
                };
                self.end_session(Some(msg));
            }
            Phase::Closed => self.end_session(None),
            _ => {}
        }
    }

    /// The local ship on screen, physical pixels (for mouse aim).
    fn ship_screen(&self) -> Option<Vec2> {
        let g = self.gfx.as_ref()?;
        let s = self.session.as_ref()?;
        let v = s.client.view.as_ref()?;
        let cam = render::Camera::fit(v.arena, (g.config.width, g.config.height), 0.0);
        Some(cam.world_to_screen(s.client.pred?))
    }

    fn handle_pressed(&mut self, el: &ActiveEventLoop) {
        let pressed = self.input.take_pressed();
        if let Some((a, slot)) = self.menu.rebinding {
            if let Some(p) = pressed.iter().find(|p| *p != "Escape" && *p != "PadEast") {
                // The slot is replaced; a key another action uses is not taken silently.
                match self.settings.assign(a, slot, p) {
                    Ok(()) => self.save_settings(),
                    Err(other) => self.menu.conflict = Some((a, slot, p.clone(), other)),
                }
                self.menu.rebinding = None;
            } else if pressed.iter().any(|p| p == "Escape" || p == "PadEast") {
                self.menu.rebinding = None;
            }
            return;
        }
        for p in pressed {
            for a in self.settings.actions_for(&p) {
                match a {
                    Action::Menu => match &mut self.session {
                        // From the settings over the game, back to the game's menu.
                        Some(s) if s.settings_open => {
                            s.settings_open = false;
                            s.menu_focus = true;
                        }
                        Some(s) => {
                            s.menu_open = !s.menu_open;
                            s.menu_focus = s.menu_open;
                            s.settings_open = false;
                        }
                        None => self.menu.go(menu::Page::Main),
                    },
                    Action::Screenshot => self.screenshot = true,
                    Action::NetOverlay => {
                        self.settings.show_net_overlay = !self.settings.show_net_overlay;
                        self.save_settings();
                    }
                    _ => {}
                }
            }
            let ctrl =
                self.modifiers.control_key() || self.input.is_held("ControlLeft") || self.input.is_held("ControlRight");
            if p == "KeyQ" && ctrl {
                self.quit(el);
            }
        }
    }

    fn quit(&mut self, el: &ActiveEventLoop) {
        if self.session.is_some() {
            self.end_session(None);
        }
        el.exit();
    }

    fn poll_gamepads(&mut self) {
        let Some(g) = self.gilrs.as_mut() else { return };
        let in_menus = self.session.as_ref().is_none_or(|s| {
            // The run summary too: A (Enter) continues.
            s.menu_open || s.client.summary.is_some() || s.client.own_state().is_some_and(|o| o.flags & 2 != 0)
        });
        while let Some(ev) = g.next_event() {
            self.input.device = Device::Gamepad;
            self.menu.pad_family = input::PadFamily::of(g.gamepad(ev.id).name());
            match ev.event {
                gilrs::EventType::ButtonPressed(b, _) => {
                    self.input.press(input::pad_name(b));
                    // While waiting for a binding the press is the binding, not navigation.
                    let in_text = self.egui.egui_wants_keyboard_input();
                    if in_menus && self.menu.rebinding.is_none() {
                        self.pad_events.extend(input::pad_menu_events(b, in_text));
                    }
                    // B backs out of a page (in a text field it only leaves the field; while
                    // waiting for a binding it cancels, in handle_pressed).
                    if b == gilrs::Button::East && self.menu.rebinding.is_none() && !in_text {
                        match self.session.as_mut() {
                            Some(s) if s.settings_open => {
                                s.settings_open = false;
                                s.menu_focus = true;
                            }
                            Some(s) if s.menu_open => s.menu_open = false,
                            Some(_) => {}
                            None if self.menu.page != menu::Page::Main => self.menu.go(menu::Page::Main),
                            None => {}
                        }
                    }
                }
                gilrs::EventType::ButtonReleased(b, _) => self.input.release(&input::pad_name(b)),
                gilrs::EventType::AxisChanged(axis, v, _) => match axis {
                    gilrs::Axis::LeftStickX => self.input.left_stick.x = v,
                    gilrs::Axis::LeftStickY => self.input.left_stick.y = -v,
                    gilrs::Axis::RightStickX => self.input.right_stick.x = v,
                    gilrs::Axis::RightStickY => self.input.right_stick.y = -v,
                    _ => {}
                },
                gilrs::EventType::Connected => tracing::info!("gamepad connected"),
                gilrs::EventType::Disconnected => {
                    tracing::info!("gamepad disconnected");
                    self.input.release_all();
                }
                _ => {}
            }
        }
    }

    /// An action's first keyboard/mouse binding and first gamepad binding, as players
    /// know them: "F / B".
    fn keys_for(&self, a: Action) -> String {
        keys_for(&self.settings, self.menu.pad_family, a)
    }

    fn hint(&self) -> Option<String> {
        let s = self.session.as_ref()?;
        let key = |a: Action| self.keys_for(a);
        let v = s.client.view.as_ref()?;
        Some(if v.dungeon.is_empty() {
            format!(
                "Walk into a portal and press {} · menu: {} · network overlay: {}",
                key(Action::Interact),
                key(Action::Menu),
                key(Action::NetOverlay)
            )
        } else {
            format!("Hold {} to escape to the hub (1 s) · menu: {}", key(Action::Escape), key(Action::Menu))
        })
    }

    fn frame(&mut self, el: &ActiveEventLoop) {
        let hint = self.hint();
        let leave_key = self.keys_for(Action::Escape);
        let interact_key = self.keys_for(Action::Interact);
        let Some(g) = self.gfx.as_mut() else { return };
        let mut raw = g.egui_state.take_egui_input(&g.window);
        raw.events.append(&mut self.pad_events);
        let size = (g.config.width, g.config.height);
        // egui's points: the display's scale times the player's interface size.
        let ppp = self.egui.pixels_per_point();
        let time = self.started.elapsed().as_secs_f32();
        let cam = match &mut self.session {
            Some(s) => {
                // The atlas holds the session's content's sprites (built again only when
                // they change: at join, or a live content update).
                if let Some(c) = s.client.content.as_ref() {
                    g.renderer.sprites.set_sprites(&g.gpu.device, &g.gpu.queue, &c.defs.sprites);
                    self.audio.set_mod_sounds(&c.defs.sounds);
                }
                s.sprites(self.alpha, size, time, &self.settings, &mut self.sprites)
            }
            None => {
                self.sprites.clear();
                // The title screen: a live fight behind the menus.
                let content = &self.content;
                let a = self.attract.get_or_insert_with(|| super::attract::Attract::new(content));
                if let Some(a) = a.as_ref() {
                    g.renderer.sprites.set_sprites(&g.gpu.device, &g.gpu.queue, &a.sprites);
                }
                let cam = a.as_ref().and_then(|a| a.sprites(size, time, &mut self.sprites));
                render::scene::apply_look(&mut self.sprites, self.settings.low_effects, false);
                // "Low effects" turns the glow pass off here too.
                cam.map(|c| render::Camera { bloom: if self.settings.low_effects { 0.0 } else { c.bloom }, ..c })
            }
        };
        let cam = cam.unwrap_or_else(|| render::Camera::fit(Vec2::new(960.0, 640.0), size, time));
        let mut hud = self.session.as_mut().map(|s| {
            let mut h = s.hud(Some(&cam), ppp, &self.settings, hint);
            h.leave_key = leave_key;
            h.interact_key = interact_key;
            h
        });
        if let Some(h) = hud.as_mut() {
            h.lesson = h.lesson.take().map(|(t, a)| (fill_keys(&self.settings, self.menu.pad_family, &t), a));
        }
        let mut menu_action = None;
        let mut game_action = None;
        let mut hud_action = None;
        let mut cancel_join = false;
        let mut settings_changed = false;
        let full = self.egui.run_ui(raw, |ui| match (&mut self.session, &hud) {
            (Some(s), Some(h)) => {
                if s.client.is_joined() {
                    hud_action = hud::draw(ui.ctx(), h);
                } else {
                    // No HUD until there is something to show: where, how long, a way out.
                    let progress = s.client.download_progress();
                    let wait = s.client.join_wait_left_ms();
                    let to = s.addr.clone().unwrap_or_else(|| "your game".into());
                    egui::Area::new(egui::Id::unique("cancel_join"))
                        .anchor(egui::Align2::CENTER_CENTER, egui::vec2(0.0, 90.0))
                        .show(ui.ctx(), |ui| {
                            ui.vertical_centered(|ui| {
                                if let Some(ms) = wait {
                                    ui.label(
                                        egui::RichText::new(format!(
                                            "{to} · giving up in {:.0} s",
                                            (ms / 1000.0).ceil()
                                        ))
                                        .color(egui::Color32::from_gray(160)),
                                    );
                                }
                                let b = ui.add(
                                    egui::Button::new(egui::RichText::new("Cancel").size(20.0))
                                        .min_size(egui::vec2(200.0, 40.0)),
                                );
                                if b.clicked() {
                                    cancel_join = true;
                                }
                            });
                        });
                    egui::Area::new(egui::Id::unique("connecting"))
                        .anchor(egui::Align2::CENTER_CENTER, egui::Vec2::ZERO)
                        .show(ui.ctx(), |ui| match progress {
                            Some((got, all)) => {
                                ui.set_width(520.0);
                                ui.vertical_centered(|ui| {
                                    ui.add(
                                        egui::Label::new(
                                            egui::RichText::new("Downloading the server's game content…").size(24.0),
                                        )
                                        .wrap_mode(egui::TextWrapMode::Extend),
                                    );
                                    ui.label(
                                        egui::RichText::new("Only the first time: it is kept for the next join.")
                                            .color(egui::Color32::from_gray(150)),
                                    );
                                    ui.add_space(6.0);
                                    ui.add(
                                        egui::ProgressBar::new(got as f32 / all.max(1) as f32)
                                            .desired_width(480.0)
                                            .text(format!(
                                                "{:.0} of {:.0} KB",
                                                got as f32 / 1024.0,
                                                all as f32 / 1024.0
                                            )),
                                    );
                                });
                            }
                            None => {
                                ui.label(egui::RichText::new("Connecting…").size(28.0));
                            }
                        });
                }
                if s.menu_open && s.settings_open {
                    // Settings from the in-game menu, over the game (which goes on).
                    egui::Area::new(egui::Id::unique("game_settings"))
                        .anchor(egui::Align2::CENTER_CENTER, egui::Vec2::ZERO)
                        .show(ui.ctx(), |ui| {
                            egui::Frame::window(ui.style()).show(ui, |ui| {
                                let screen = ui.ctx().content_rect();
                                ui.set_width((screen.width() - 60.0).min(900.0));
                                ui.set_max_height(screen.height() - 60.0);
                                ui.vertical_centered(|ui| {
                                    settings_changed |= menu::settings_page(ui, &mut self.menu, &mut self.settings);
                                    if ui.add(menu::big("Back")).clicked() {
                                        self.menu.rebinding = None;
                                        s.settings_open = false;
                                        s.menu_focus = true;
                                    }
                                });
                            });
                        });
                } else if s.menu_open {
                    let others = s.kickable();
                    game_action = menu::game_menu(
                        ui.ctx(),
                        s.in_dungeon(),
                        s.menu_focus,
                        s.host_info.as_deref(),
                        others.as_deref(),
                        s.paused(),
                        &s.ship_choices(&self.settings.ship),
                        &s.friends(),
                    );
                    s.menu_focus = false;
                }
            }
            _ => menu_action = menu::main_menu(ui, &mut self.menu, &mut self.settings, &self.content),
        });
        g.egui_state.handle_platform_output(&g.window, full.platform_output);
        self.pending_textures.append(full.textures_delta);
        let primitives = self.egui.tessellate(full.shapes, full.pixels_per_point);
        if !self.minimized && size.0 > 0 && size.1 > 0 {
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
            let due_capture = self.capture.due(self.started);
            if self.screenshot || due_capture.is_some() {
                let path = match &due_capture {
                    Some(p) => p.clone(),
                    None => crate::logging::log_dir()
                        .map(|d| d.with_file_name("screenshots"))
                        .unwrap_or_else(|| PathBuf::from("screenshots"))
                        .join(format!(
                            "hailfire-{}.png",
                            std::time::SystemTime::now()
                                .duration_since(std::time::UNIX_EPOCH)
                                .map_or(0, |d| d.as_secs())
                        )),
                };
                match render::save_frame(&g.gpu, &mut g.renderer, size, &cam, &self.sprites, &mut ui, &path) {
                    Ok(()) => println!("hailfire: screenshot written to {}", path.display()),
                    Err(e) => tracing::warn!("screenshot failed: {e:#}"),
                }
                self.screenshot = false;
            }
        } else {
            self.pending_textures.append(std::mem::take(
                &mut EguiFrame { primitives, textures: Default::default(), pixels_per_point: 1.0 }.textures,
            ));
        }
        if let Some(a) = menu_action {
            match a {
                menu::MenuAction::Host => {
                    self.settings.sanitize();
                    let s = Session::host(&self.content, &self.settings);
                    self.start_session(s, None);
                }
                menu::MenuAction::Join { addr, password, accept_key } => {
                    self.settings.sanitize();
                    let s = Session::join(&self.content, &self.settings.name, &addr, Some(password), accept_key);
                    self.start_session(s, Some(addr));
                }
                menu::MenuAction::Quit => self.quit(el),
                menu::MenuAction::ModsChanged => {
                    self.save_settings();
                    self.attract = None;
                    self.content = Content::load_chosen(&[], &self.settings.mod_choice(), &[]);
                }
                menu::MenuAction::SettingsChanged => settings_changed = true,
            }
        }
        if settings_changed {
            self.apply_settings();
        }
        if cancel_join {
            let addr = self.session.as_ref().and_then(|s| s.addr.clone());
            self.end_session(None);
            if let Some(a) = addr {
                self.menu.join_addr = a;
                self.menu.go(menu::Page::Join);
            }
        }
        if let Some(s) = self.session.as_mut() {
            if hud_action == Some(hud::HudAction::ReturnToHub) {
                s.returning = true;
            }
            if hud_action == Some(hud::HudAction::DismissSummary) {
                s.client.summary = None;
            }
            match game_action {
                Some(menu::GameMenuAction::Resume) => s.menu_open = false,
                Some(menu::GameMenuAction::Settings) => {
                    s.settings_open = true;
                    self.menu.go(self.menu.page.clone());
                }
                Some(menu::GameMenuAction::ReturnToHub) => {
                    // The same server-side channel as holding the key.
                    s.returning = true;
                    s.menu_open = false;
                }
                Some(menu::GameMenuAction::Disconnect) => self.end_session(None),
                Some(menu::GameMenuAction::Quit) => self.quit(el),
                Some(menu::GameMenuAction::Kick(id)) => s.host_command(&format!("kick {id} kicked by the host")),
                Some(menu::GameMenuAction::Ban(id)) => s.host_command(&format!("ban {id} banned by the host")),
                Some(menu::GameMenuAction::Watch(who)) => self.rejoin(Some(who)),
                Some(menu::GameMenuAction::StopWatching) => self.rejoin(None),
                Some(menu::GameMenuAction::Ship(k)) => {
                    s.client.choose_ship(k);
                    if let Some(id) = s.client.defs().and_then(|d| d.ships.get(k as usize)).map(|sh| sh.id.clone()) {
                        self.settings.ship = id;
                        let _ = self.settings.save();
                    }
                }
                None => {}
            }
        }
    }
}

/// What winit needs for a window mode: exclusive fullscreen takes the monitor's largest,
/// fastest mode (borderless when it lists none, and on Wayland, which has no exclusive
/// mode: winit ignores the request there).
fn fullscreen_for(window: &Window, mode: WindowMode, wayland: bool) -> Option<Fullscreen> {
    match mode {
        WindowMode::Windowed => None,
        WindowMode::Borderless => Some(Fullscreen::Borderless(None)),
        WindowMode::Fullscreen if wayland => Some(Fullscreen::Borderless(None)),
        WindowMode::Fullscreen => {
            let best = window.current_monitor().and_then(|m| {
                m.video_modes()
                    .max_by_key(|v| (v.size().width as u64 * v.size().height as u64, v.refresh_rate_millihertz()))
            });
            Some(best.map_or(Fullscreen::Borderless(None), Fullscreen::Exclusive))
        }
    }
}

impl ApplicationHandler for App {
    fn resumed(&mut self, el: &ActiveEventLoop) {
        if self.gfx.is_some() {
            return;
        }
        if let Err(e) = self.init_gfx(el) {
            self.fatal = Some(format!("{e:#}"));
            el.exit();
            return;
        }
        if let Some(w) = &self.settings_warning {
            tracing::warn!("{w}");
        }
        if self.opts.host {
            let s = Session::host(&self.content, &self.settings);
            self.start_session(s, None);
        } else if let Some(addr) = self.opts.join.clone() {
            let s = Session::join(&self.content, &self.settings.name, &addr, None, None);
            self.start_session(s, Some(addr));
        }
        self.next_tick = Instant::now();
    }

    fn window_event(&mut self, el: &ActiveEventLoop, _id: WindowId, event: WindowEvent) {
        let Some(g) = self.gfx.as_mut() else { return };
        let consumed = g.egui_state.on_window_event(&g.window, &event).consumed;
        match &event {
            WindowEvent::CloseRequested => self.quit(el),
            WindowEvent::Resized(size) => {
                self.minimized = size.width == 0 || size.height == 0;
                if !self.minimized {
                    g.config.width = size.width;
                    g.config.height = size.height;
                    g.surface.configure(&g.gpu.device, &g.config);
                }
            }
            WindowEvent::Occluded(o) => self.minimized = *o,
            WindowEvent::Focused(false) => self.input.release_all(),
            WindowEvent::ModifiersChanged(m) => self.modifiers = m.state(),
            WindowEvent::KeyboardInput { event: k, .. } => {
                if let PhysicalKey::Code(code) = k.physical_key {
                    self.input.device = Device::KeyboardMouse;
                    let name = input::key_name(code);
                    match k.state {
                        ElementState::Pressed if !k.repeat => {
                            // Text fields keep their keys, except the menu key and Ctrl+Q.
                            let ctrl = self.modifiers.control_key()
                                || self.input.is_held("ControlLeft")
                                || self.input.is_held("ControlRight");
                            let ctrl_q = code == KeyCode::KeyQ && ctrl;
                            let always = matches!(code, KeyCode::Escape | KeyCode::F12) || ctrl_q;
                            if !consumed || always || self.menu.rebinding.is_some() {
                                self.input.press(name);
                            }
                        }
                        ElementState::Released => self.input.release(&name),
                        _ => {}
                    }
                }
            }
            WindowEvent::MouseInput { state, button, .. } => {
                self.input.device = Device::KeyboardMouse;
                let name = input::mouse_name(*button);
                match state {
                    ElementState::Pressed if !consumed || self.menu.rebinding.is_some() => self.input.press(name),
                    ElementState::Released => self.input.release(&name),
                    _ => {}
                }
            }
            WindowEvent::CursorMoved { position, .. } => {
                self.input.cursor = Vec2::new(position.x as f32, position.y as f32);
                self.input.device = Device::KeyboardMouse;
            }
            WindowEvent::RedrawRequested => self.frame(el),
            _ => {}
        }
        self.handle_pressed(el);
    }

    fn about_to_wait(&mut self, el: &ActiveEventLoop) {
        if self.opts.quit_after.is_some_and(|q| self.started.elapsed().as_secs_f64() >= q) {
            self.quit(el);
            return;
        }
        self.poll_gamepads();
        self.handle_pressed(el);
        let dt = Duration::from_secs_f64(1.0 / TICK_RATE as f64);
        let now = Instant::now();
        let mut ticked = false;
        let mut n = 0;
        while self.next_tick <= now && n < 5 {
            self.tick();
            self.next_tick += dt;
            ticked = true;
            n += 1;
        }
        if self.next_tick + dt * 5 < now {
            self.next_tick = now; // far behind (a stall): do not try to catch up
        }
        self.alpha = 1.0
            - (self.next_tick.saturating_duration_since(Instant::now()).as_secs_f32() / dt.as_secs_f32())
                .clamp(0.0, 1.0);
        if let Some(g) = &self.gfx {
            // The frame-rate cap: at 30, every other tick is drawn.
            let capped = self.settings.frame_cap <= 30 && self.ticks % 2 == 1;
            if ticked && !self.minimized && !capped {
                g.window.request_redraw();
            }
        }
        el.set_control_flow(ControlFlow::WaitUntil(self.next_tick));
    }
}

/// An action's first keyboard/mouse binding and first gamepad binding, as players know
/// them: "F / B".
fn keys_for(settings: &Settings, family: input::PadFamily, a: Action) -> String {
    let v = settings.bindings.get(&a).cloned().unwrap_or_default();
    let name = |k: &String| input::display_name(k, family);
    let kb = v.iter().find(|k| !k.starts_with("Pad")).map(name);
    let pad = v.iter().find(|k| k.starts_with("Pad")).map(name);
    match (kb, pad) {
        (Some(k), Some(p)) => format!("{k} / {p}"),
        (Some(k), None) | (None, Some(k)) => k,
        (None, None) => "(unbound)".into(),
    }
}

/// A script's hint with the player's keys put in: `{fire}`, `{focus}`, `{flare}`,
/// `{escape}`, `{interact}`, `{move}`.
pub fn fill_keys(settings: &Settings, family: input::PadFamily, text: &str) -> String {
    let mut out = text.to_string();
    for (name, a) in [
        ("{fire}", Action::Fire),
        ("{focus}", Action::Focus),
        ("{flare}", Action::Flare),
        ("{escape}", Action::Escape),
        ("{interact}", Action::Interact),
    ] {
        if out.contains(name) {
            out = out.replace(name, &keys_for(settings, family, a));
        }
    }
    if out.contains("{move}") {
        let keys: Vec<String> = [Action::MoveUp, Action::MoveLeft, Action::MoveDown, Action::MoveRight]
            .iter()
            .map(|a| keys_for(settings, family, *a).split(" / ").next().unwrap_or_default().to_string())
            .collect();
        out = out.replace("{move}", &keys.join(""));
    }
    out
}
