//! Menus: main menu (Host and play, Join, Settings, Mods, Quit), the join form with recent
//! servers, settings (name, volumes, display, every binding), the mods list with each mod's
//! errors, the in-game menu, and error screens in words a player understands. Everything is
//! reachable by keyboard or gamepad alone (focus moves with the d-pad, A activates).

use egui::{Align, Color32, Layout, RichText};

use crate::app::settings::{Action, BulletColours, Section, Settings, WindowMode, WINDOW_SIZES};
use crate::content::Content;

#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum Page {
    #[default]
    Main,
    Join,
    Settings,
    Mods,
    Credits,
}

#[derive(Default)]
pub struct MenuState {
    pub page: Page,
    /// Why the game plays without sound (no output device), said on the Audio page.
    pub no_sound: Option<String>,
    pub join_addr: String,
    /// The server password typed on the Join page (kept for this run only, never saved).
    pub join_password: String,
    /// The last join failed on a changed server key: the address and the key it
    /// presented, to offer trusting exactly that key.
    pub key_changed_for: Option<(String, Option<[u8; 32]>)>,
    /// The settings page's open section.
    pub section: Section,
    /// The widget that had the focus last frame (to scroll a newly focused one into view).
    last_focus: Option<egui::Id>,
    /// Waiting for the next input to bind to this slot of this action.
    pub rebinding: Option<(Action, usize)>,
    /// The input pressed for `rebinding` belongs to another action: (action, slot, input,
    /// the action that has it), to ask "swap?".
    pub conflict: Option<(Action, usize, String, Action)>,
    /// How gamepad buttons are named (from the last pad seen).
    pub pad_family: crate::app::input::PadFamily,
    /// A failure to show on top of the menu.
    pub error: Option<String>,
    /// Set when the page changes, so the first widget can take focus (gamepad).
    focus_pending: bool,
    /// Servers on the local network, asked again every few seconds while Join is open.
    pub lan: LanList,
    /// This machine's address on the local network, looked up once (for "Friends join
    /// you at").
    pub(crate) lan_ip: std::sync::OnceLock<Option<std::net::IpAddr>>,
}

/// The Join page's list of servers on the local network (and this machine): a status
/// query by broadcast on the usual ports, repeated while the page is open, on a thread so
/// the menu never waits.
#[derive(Default)]
pub struct LanList {
    found: std::sync::Arc<std::sync::Mutex<Vec<crate::net::discovery::Found>>>,
    running: std::sync::Arc<std::sync::atomic::AtomicBool>,
    last: Option<std::time::Instant>,
}

impl LanList {
    /// Starts a scan if none is running and the last one is older than three seconds.
    pub fn refresh(&mut self) {
        use std::sync::atomic::Ordering;
        if self.running.load(Ordering::Relaxed) || self.last.is_some_and(|t| t.elapsed().as_secs_f32() < 3.0) {
            return;
        }
        self.last = Some(std::time::Instant::now());
        self.running.store(true, Ordering::Relaxed);
        let (found, running) = (self.found.clone(), self.running.clone());
        let spawned = std::thread::Builder::new().name("hailfire-lan".into()).spawn(move || {
            let ports = crate::net::discovery::default_ports();
            // A little over a second: every server announces itself once a second.
            let wait = crate::net::announce::EVERY + std::time::Duration::from_millis(150);
            if let Ok(list) = crate::net::discovery::lan(&ports, true, wait) {
                if let Ok(mut f) = found.lock() {
                    *f = list;
                }
            }
            running.store(false, Ordering::Relaxed);
        });
        if spawned.is_err() {
            self.running.store(false, Ordering::Relaxed);
        }
    }

    pub fn list(&self) -> Vec<crate::net::discovery::Found> {
        self.found.lock().map(|f| f.clone()).unwrap_or_default()
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum MenuAction {
    Host,
    Join {
        addr: String,
        password: String,
        /// Trust exactly this server key (the one shown when it changed).
        accept_key: Option<[u8; 32]>,
    },
    Quit,
    SettingsChanged,
    /// A mod was turned on or off for hosting (settings already changed).
    ModsChanged,
}

pub fn big(text: &str) -> egui::Button<'static> {
    egui::Button::new(RichText::new(text.to_string()).size(22.0)).min_size(egui::vec2(300.0, 44.0))
}

/// A main-menu button: smaller on a short screen (a small window, a large interface size).
fn menu_button(text: &str, compact: bool, width: f32) -> egui::Button<'static> {
    if compact {
        egui::Button::new(RichText::new(text.to_string()).size(17.0)).min_size(egui::vec2(width, 30.0))
    } else {
        big(text)
    }
}

/// Height, in points, below which the menu uses its compact layout.
const COMPACT_BELOW: f32 = 500.0;

impl MenuState {
    pub fn go(&mut self, p: Page) {
        self.page = p;
        self.focus_pending = true;
    }

    /// Nothing has the focus (B or Esc took it away, or the mouse clicked the background):
    /// the d-pad brings it back to the page's first widget.
    fn recover_focus(&mut self, ui: &egui::Ui) {
        let arrows = ui.input(|i| {
            [egui::Key::ArrowUp, egui::Key::ArrowDown, egui::Key::ArrowLeft, egui::Key::ArrowRight]
                .iter()
                .any(|k| i.key_pressed(*k))
        });
        if arrows && ui.ctx().memory(|m| m.focused().is_none()) {
            self.focus_pending = true;
        }
    }

    fn focus_first(&mut self, r: &egui::Response) {
        if self.focus_pending {
            r.request_focus();
            self.focus_pending = false;
        }
    }
}

/// The main menu and its pages. `host_hint` explains hosting (the port friends use).
pub fn main_menu(
    root: &mut egui::Ui,
    st: &mut MenuState,
    settings: &mut Settings,
    content: &Content,
) -> Option<MenuAction> {
    let mut action = None;
    egui::CentralPanel::default().frame(egui::Frame::NONE).show(root, |ui| {
        // A dark band behind the column, over the title screen's live fight.
        let r = ui.max_rect();
        let (w, a): (f32, u8) = match st.page {
            Page::Main => (560.0, 120),
            Page::Settings => (940.0, 210),
            _ => (620.0, 190),
        };
        ui.painter().rect_filled(
            egui::Rect::from_center_size(r.center(), egui::vec2(w.min(r.width()), r.height() + 40.0)),
            0.0,
            Color32::from_black_alpha(a),
        );
        st.recover_focus(ui);
        // A short screen (a small window or a large interface size): a smaller title and
        // buttons side by side, and everything in a scroll area so nothing is ever out of
        // reach.
        let compact = r.height() < COMPACT_BELOW;
        egui::ScrollArea::vertical().auto_shrink([false, false]).show(ui, |ui| {
        ui.with_layout(Layout::top_down(Align::Center), |ui| {
            ui.add_space(if compact { 6.0 } else { 40.0 });
            // The logo: full size on the main page; the other pages need the room (a small
            // one on a tall screen, none on a short one).
            if st.page == Page::Main {
                logo(ui, if compact { 0.6 } else { 1.0 });
                ui.add_space(if compact { 6.0 } else { 24.0 });
            } else if r.height() >= 700.0 {
                logo(ui, 0.6);
                ui.add_space(12.0);
            }
            if let Some(e) = st.error.clone() {
                egui::Frame::group(ui.style()).fill(Color32::from_rgb(60, 16, 20)).show(ui, |ui| {
                    ui.set_max_width(560.0);
                    ui.label(RichText::new(e).size(17.0).color(Color32::from_rgb(255, 190, 180)));
                    if ui.button("OK").clicked() {
                        st.error = None;
                    }
                });
                ui.add_space(12.0);
            }
            match st.page.clone() {
                Page::Main => {
                    let h = ui.add(menu_button("Host and play", compact, 300.0));
                    st.focus_first(&h);
                    if h.clicked() {
                        action = Some(MenuAction::Host);
                    }
                    let port = settings.host_port;
                    let line = match st.lan_ip.get_or_init(crate::app::session::lan_ip) {
                        Some(ip) => format!("Friends join you at {ip}:{port} (UDP)"),
                        None => format!("Friends join you on UDP port {port}"),
                    };
                    ui.label(RichText::new(line).color(Color32::from_gray(160)));
                    ui.add_space(if compact { 2.0 } else { 6.0 });
                    // Compact: two a row (Join and Settings, Mods and Credits), Quit below.
                    let mut go = None;
                    let pairs = [(Page::Join, "Join"), (Page::Settings, "Settings"), (Page::Mods, "Mods"), (Page::Credits, "Credits")];
                    if compact {
                        for pair in pairs.chunks(2) {
                            ui.allocate_ui_with_layout(
                                egui::vec2(304.0, 32.0),
                                Layout::left_to_right(Align::Center),
                                |ui| {
                                    for (page, label) in pair {
                                        if ui.add(menu_button(label, true, 148.0)).clicked() {
                                            go = Some(page.clone());
                                        }
                                    }
                                },
                            );
                        }
                    } else {
                        for (page, label) in &pairs {
                            if ui.add(big(label)).clicked() {
                                go = Some(page.clone());
                            }
                        }
                    }
                    if let Some(page) = go {
                        if page == Page::Join && st.join_addr.is_empty() {
                            st.join_addr = settings.recent_servers.first().cloned().unwrap_or_default();
                        }
                        st.go(page);
                    }
                    if ui.add(menu_button("Quit", compact, 300.0)).clicked() {
                        action = Some(MenuAction::Quit);
                    }
                    ui.add_space(if compact { 4.0 } else { 16.0 });
                    ui.label(
                        RichText::new(format!(
                            "version {} · protocol {}",
                            env!("CARGO_PKG_VERSION"),
                            crate::protocol::PROTOCOL_VERSION
                        ))
                        .color(Color32::from_gray(130)),
                    );
                }
                Page::Join => {
                    ui.label(RichText::new("Join a friend").size(26.0));
                    ui.add_space(8.0);
                    // Enter in the address or password field connects.
                    let mut enter = false;
                    ui.horizontal(|ui| {
                        ui.add_space((ui.available_width() - 420.0).max(0.0) / 2.0);
                        ui.label("Address (host or host:port)");
                        let r = ui.add(egui::TextEdit::singleline(&mut st.join_addr).desired_width(200.0));
                        st.focus_first(&r);
                        enter |= r.lost_focus() && ui.input(|i| i.key_pressed(egui::Key::Enter));
                    });
                    ui.horizontal(|ui| {
                        ui.add_space((ui.available_width() - 420.0).max(0.0) / 2.0);
                        ui.label("Your name");
                        if ui
                            .add(egui::TextEdit::singleline(&mut settings.name).char_limit(24).desired_width(200.0))
                            .changed()
                        {
                            action = Some(MenuAction::SettingsChanged);
                        }
                    });
                    ui.horizontal(|ui| {
                        ui.add_space((ui.available_width() - 420.0).max(0.0) / 2.0);
                        ui.label("Password (if the server has one)");
                        let r = ui.add(
                            egui::TextEdit::singleline(&mut st.join_password).password(true).desired_width(140.0),
                        );
                        enter |= r.lost_focus() && ui.input(|i| i.key_pressed(egui::Key::Enter));
                    });
                    ui.add_space(8.0);
                    let can = !st.join_addr.trim().is_empty() && !settings.name.trim().is_empty();
                    if ui.add_enabled(can, big("Connect")).clicked() || (enter && can) {
                        action = Some(MenuAction::Join {
                            addr: st.join_addr.trim().to_string(),
                            password: st.join_password.clone(),
                            accept_key: None,
                        });
                    }
                    if let Some((addr, key)) = st.key_changed_for.clone() {
                        ui.label(
                            RichText::new(
                                "Only trust a new key if the server's owner told you it changed (compare the fingerprint they see in their menu).",
                            )
                            .color(Color32::from_rgb(255, 200, 150)),
                        );
                        if ui.add(big("Trust the new key and join")).clicked() {
                            st.key_changed_for = None;
                            action = Some(MenuAction::Join {
                                addr,
                                password: st.join_password.clone(),
                                accept_key: key,
                            });
                        }
                    }
                    st.lan.refresh();
                    ui.add_space(10.0);
                    ui.label(RichText::new("On your network").color(Color32::from_gray(170)));
                    let lan = st.lan.list();
                    if lan.is_empty() {
                        ui.label(RichText::new("(looking… none found yet)").color(Color32::from_gray(120)));
                    }
                    for f in lan {
                        let s = &f.status;
                        let mut label = format!("{}   {}/{}   {}", s.name, s.players, s.max_players, f.addr);
                        if s.password {
                            label.push_str("   (password)");
                        }
                        let joinable = s.protocol == crate::protocol::PROTOCOL_VERSION;
                        if !joinable {
                            label.push_str("   (another version of the game)");
                        }
                        let b = ui.add_enabled(joinable, egui::Button::new(label));
                        let b = if s.motd.is_empty() { b } else { b.on_hover_text(&s.motd) };
                        if b.clicked() {
                            st.join_addr = f.addr.to_string();
                            action = Some(MenuAction::Join {
                                addr: f.addr.to_string(),
                                password: st.join_password.clone(),
                                accept_key: None,
                            });
                        }
                    }
                    if !settings.recent_servers.is_empty() {
                        ui.add_space(10.0);
                        ui.label(RichText::new("Recent servers").color(Color32::from_gray(170)));
                        for s in settings.recent_servers.clone() {
                            if ui.button(&s).clicked() {
                                st.join_addr = s.clone();
                                action = Some(MenuAction::Join {
                                    addr: s,
                                    password: st.join_password.clone(),
                                    accept_key: None,
                                });
                            }
                        }
                    }
                    ui.add_space(10.0);
                    if ui.add(big("Back")).clicked() {
                        st.go(Page::Main);
                    }
                }
                Page::Settings => {
                    if settings_page(ui, st, settings) {
                        action = Some(MenuAction::SettingsChanged);
                    }
                    if ui.add(big("Back")).clicked() {
                        st.rebinding = None;
                        st.go(Page::Main);
                    }
                }
                Page::Credits => {
                    credits_page(ui);
                    let b = ui.add(big("Back"));
                    st.focus_first(&b);
                    if b.clicked() {
                        st.go(Page::Main);
                    }
                }
                Page::Mods => {
                    if mods_page(ui, content, settings) {
                        action = Some(MenuAction::ModsChanged);
                    }
                    let b = ui.add(big("Back"));
                    st.focus_first(&b);
                    if b.clicked() {
                        st.go(Page::Main);
                    }
                }
            }
        });
        });
    });
    action
}

/// The game's logo, drawn in code: the name in the game's hot pink over a row of bullets
/// fanning out under it, and the tagline. `scale` 1 is its full size.
pub fn logo(ui: &mut egui::Ui, scale: f32) {
    let title = RichText::new("HAILFIRE").size(56.0 * scale).strong().color(Color32::from_rgb(255, 120, 150));
    ui.label(title);
    let (rect, _) = ui.allocate_exact_size(egui::vec2(300.0 * scale, 14.0 * scale), egui::Sense::hover());
    let p = ui.painter();
    for k in 0..9 {
        let t = k as f32 / 8.0;
        let at = egui::pos2(rect.left() + rect.width() * t, rect.center().y + (t - 0.5).abs() * 8.0 * scale);
        let r = (2.0 + 3.0 * (1.0 - (t - 0.5).abs() * 2.0)) * scale;
        let c = Color32::from_rgb(255, (120.0 + 100.0 * t) as u8, (150.0 + 60.0 * (1.0 - t)) as u8);
        p.circle_filled(at, r + 1.5 * scale, c.gamma_multiply(0.35));
        p.circle_filled(at, r, c);
        p.circle_filled(at, r * 0.45, Color32::WHITE);
    }
    if scale >= 0.8 {
        ui.label(RichText::new("co-op bullet hell").size(18.0).color(Color32::from_gray(170)));
    }
}

/// A switch whose value is said in words.
fn switch(ui: &mut egui::Ui, v: &mut bool) -> bool {
    let text = if *v { "On" } else { "Off" };
    ui.checkbox(v, text).changed()
}

/// A grid row: a label and its switch. Returns whether it changed.
fn switch_row(ui: &mut egui::Ui, label: &str, v: &mut bool) -> bool {
    ui.label(label);
    let changed = switch(ui, v);
    ui.end_row();
    changed
}

/// A 0..1 slider shown as a percentage.
/// The value is a label, not egui's number box: focused by the d-pad, that box turns into
/// a text field that keeps the arrows.
fn percent(ui: &mut egui::Ui, v: &mut f32) -> egui::Response {
    ui.horizontal(|ui| {
        let r = ui.add(egui::Slider::new(v, 0.0..=1.0).step_by(0.05).show_value(false));
        ui.label(format!("{:.0} %", *v * 100.0));
        r
    })
    .inner
}

/// The settings page, in sections. Returns whether anything changed.
pub fn settings_page(ui: &mut egui::Ui, st: &mut MenuState, s: &mut Settings) -> bool {
    let mut changed = false;
    // Also over the game (the pause menu's settings), where main_menu does not run.
    st.recover_focus(ui);
    ui.label(RichText::new("Settings").size(26.0));
    ui.label(RichText::new("Page Up / Page Down or LB / RB: sections").color(Color32::from_gray(140)));
    ui.add_space(4.0);
    // Page Up/Down (the pad's bumpers) switch sections; the section's first setting takes
    // the focus.
    let step = ui.input(|i| i.key_pressed(egui::Key::PageDown) as i32 - i.key_pressed(egui::Key::PageUp) as i32);
    if step != 0 {
        let at = Section::ALL.iter().position(|x| *x == st.section).unwrap_or(0) as i32;
        st.section = Section::ALL[(at + step).rem_euclid(Section::ALL.len() as i32) as usize];
        st.rebinding = None;
        st.conflict = None;
        st.focus_pending = true;
    }
    // A narrow screen (a small window or a large interface size): narrower tabs and
    // columns, so the page fits without scrolling sideways.
    let narrow = ui.available_width() < 700.0;
    ui.horizontal(|ui| {
        let tab_w = (ui.available_width() / Section::ALL.len() as f32).min(128.0);
        ui.add_space(((ui.available_width() - tab_w * Section::ALL.len() as f32) / 2.0).max(0.0));
        for sec in Section::ALL {
            let r = ui.add(
                egui::Button::new(RichText::new(sec.label()).size(if narrow { 14.0 } else { 17.0 }))
                    .selected(st.section == sec)
                    .min_size(egui::vec2(tab_w - 8.0, if narrow { 26.0 } else { 32.0 })),
            );
            if r.clicked() {
                st.section = sec;
                st.rebinding = None;
                st.conflict = None;
            }
        }
    });
    ui.add_space(6.0);
    egui::ScrollArea::vertical().max_height(ui.available_height() - 70.0).show(ui, |ui| {
        // A centred column with a margin, not labels against the window's edge.
        ui.horizontal(|ui| {
            ui.add_space(((ui.available_width() - 760.0) / 2.0).max(if narrow { 4.0 } else { 24.0 }));
            ui.vertical(|ui| {
                let grid = egui::Grid::new(egui::Id::unique("settings"))
                    .num_columns(2)
                    .spacing([24.0, 10.0])
                    .min_col_width(if narrow { 110.0 } else { 220.0 });
                match st.section {
                    Section::Video => grid.show(ui, |ui| {
                        ui.label("Window");
                        ui.horizontal(|ui| {
                            for m in WindowMode::ALL {
                                let r = ui.selectable_value(&mut s.window_mode, m, m.label());
                                if m == s.window_mode {
                                    st.focus_first(&r);
                                }
                                changed |= r.changed();
                            }
                        });
                        ui.end_row();
                        ui.label("Window size (windowed)");
                        ui.horizontal_wrapped(|ui| {
                            for size in WINDOW_SIZES {
                                let label = format!("{} × {}", size[0], size[1]);
                                changed |= ui.selectable_value(&mut s.window_size, size, label).changed();
                            }
                        });
                        ui.end_row();
                        ui.label("Interface size");
                        ui.horizontal(|ui| {
                            let r =
                                ui.add(egui::Slider::new(&mut s.ui_scale, 0.75..=2.0).step_by(0.05).show_value(false));
                            ui.label(format!("{:.0} %", s.ui_scale * 100.0));
                            // Applied when the drag ends: rescaling under the pointer while it
                            // drags would move the slider away from it.
                            changed |= r.drag_stopped() || (r.changed() && !r.dragged());
                        });
                        ui.end_row();
                        changed |= switch_row(ui, "Vsync (wait for the display: no tearing)", &mut s.vsync);
                        ui.label("Frame rate cap");
                        ui.horizontal(|ui| {
                            changed |= ui.selectable_value(&mut s.frame_cap, 60, "60 (every game tick)").changed();
                            changed |= ui.selectable_value(&mut s.frame_cap, 30, "30 (saves power)").changed();
                        });
                        ui.end_row();
                        changed |= switch_row(ui, "Low effects (no glow; for software rendering)", &mut s.low_effects);
                    }),
                    Section::Audio => grid.show(ui, |ui| {
                        if let Some(why) = &st.no_sound {
                            ui.label(RichText::new("No sound").color(Color32::from_rgb(255, 190, 120)));
                            ui.label(
                                RichText::new(format!(
                                    "No audio output device was found, so the game is silent ({why}). Connect one and restart the game."
                                ))
                                .color(Color32::from_rgb(255, 220, 190)),
                            );
                            ui.end_row();
                        }
                        for (label, v) in [
                            ("Master volume", &mut s.master_volume),
                            ("Effects", &mut s.sfx_volume),
                            ("Music", &mut s.music_volume),
                        ] {
                            ui.label(label);
                            let r = percent(ui, v);
                            st.focus_first(&r);
                            changed |= r.changed();
                            ui.end_row();
                        }
                        changed |= switch_row(ui, "Mute all sound", &mut s.muted);
                    }),
                    // Narrow: each action over its bindings, which wrap.
                    Section::Controls if narrow => ui.vertical(|ui| {
                        ui.label(RichText::new("Click a binding to replace it").color(Color32::from_gray(150)));
                        ui.label(RichText::new("+ adds one, × removes it, Esc cancels").color(Color32::from_gray(150)));
                        for a in Action::ALL {
                            ui.add_space(4.0);
                            ui.label(a.label());
                            ui.horizontal_wrapped(|ui| changed |= binding_chips(ui, st, s, a));
                        }
                    }),
                    Section::Controls => grid.show(ui, |ui| {
                        ui.label(RichText::new("Click a binding to replace it").color(Color32::from_gray(150)));
                        ui.label(RichText::new("+ adds one, × removes it, Esc cancels").color(Color32::from_gray(150)));
                        ui.end_row();
                        for a in Action::ALL {
                            ui.label(a.label());
                            ui.horizontal(|ui| changed |= binding_chips(ui, st, s, a));
                            ui.end_row();
                        }
                    }),
                    Section::Network => grid.show(ui, |ui| {
                        ui.label("Your name");
                        let r = ui.add(egui::TextEdit::singleline(&mut s.name).char_limit(24));
                        st.focus_first(&r);
                        changed |= r.changed();
                        ui.end_row();
                        ui.label("Host on UDP port");
                        changed |= ui.add(egui::DragValue::new(&mut s.host_port).range(1024..=65535)).changed();
                        ui.end_row();
                        changed |= switch_row(ui, "Network overlay (ping, loss, traffic)", &mut s.show_net_overlay);
                        changed |= switch_row(ui, "Reload saved mods while hosting", &mut s.watch_mods);
                        changed |= switch_row(ui, "Record my sessions (replays folder)", &mut s.record_sessions);
                        changed |= switch_row(ui, "Ask my router to open the port (UPnP)", &mut s.upnp);
                        ui.label("Relay (for hosts no router can open)");
                        changed |= ui
                            .add(egui::TextEdit::singleline(&mut s.relay).hint_text("relay.example.org").char_limit(64))
                            .changed();
                        ui.end_row();
                        changed |=
                            switch_row(ui, "Keep my address from friends who join by code", &mut s.relay_hide_address);
                    }),
                    Section::Accessibility => grid.show(ui, |ui| {
                        ui.label("Outline around enemy bullets");
                        let text = if s.bullet_outline { "On" } else { "Off" };
                        let r = ui.checkbox(&mut s.bullet_outline, text);
                        st.focus_first(&r);
                        changed |= r.changed();
                        ui.end_row();
                        ui.label("Bullet colours");
                        ui.horizontal(|ui| {
                            changed |=
                                ui.selectable_value(&mut s.bullet_colours, BulletColours::Mod, "As designed").changed();
                            changed |= ui
                                .selectable_value(
                                    &mut s.bullet_colours,
                                    BulletColours::ColourBlind,
                                    "Colour-blind friendly (red-green)",
                                )
                                .changed();
                        });
                        ui.end_row();
                        changed |= switch_row(ui, "Screen shake when hit", &mut s.screen_shake);
                        changed |= switch_row(ui, "Reduced flashing", &mut s.reduced_flashing);
                        changed |= switch_row(ui, "Damage numbers", &mut s.damage_numbers);
                        changed |= switch_row(ui, "Enemy health bars", &mut s.enemy_health_bars);
                    }),
                };
                if let Some((a, slot, input, other)) = st.conflict.clone() {
                    ui.horizontal(|ui| {
                        ui.label(
                            RichText::new(format!(
                                "{} is used by {}: swap?",
                                crate::app::input::display_name(&input, st.pad_family),
                                other.label()
                            ))
                            .color(Color32::from_rgb(255, 210, 140)),
                        );
                        if ui.button("Swap").clicked() {
                            s.assign_swapping(a, slot, &input);
                            st.conflict = None;
                            changed = true;
                        }
                        if ui.button("Cancel").clicked() {
                            st.conflict = None;
                        }
                    });
                }
                ui.add_space(8.0);
                if ui.button(format!("Reset {} to the defaults", st.section.label().to_lowercase())).clicked() {
                    s.reset_section(st.section);
                    st.conflict = None;
                    changed = true;
                }
            });
        });
        // The d-pad may move the focus to a widget the scroll area hides (a large
        // interface size, a small window): bring it into view.
        let focused = ui.ctx().memory(|m| m.focused());
        if focused.is_some() && focused != st.last_focus {
            if let Some(r) = focused.and_then(|id| ui.ctx().read_response(id)) {
                ui.scroll_to_rect(r.rect, None);
            }
        }
        st.last_focus = focused;
    });
    changed
}

/// An action's bindings as buttons (click to replace, `+` to add, `×` to remove); true
/// when one was removed.
fn binding_chips(ui: &mut egui::Ui, st: &mut MenuState, s: &mut Settings, a: Action) -> bool {
    let mut changed = false;
    let keys = s.bindings.get(&a).cloned().unwrap_or_default();
    for slot in 0..=keys.len() {
        let waiting = st.rebinding == Some((a, slot));
        let text = match (waiting, keys.get(slot)) {
            (true, _) => "press…".to_string(),
            (false, Some(k)) => crate::app::input::display_name(k, st.pad_family),
            (false, None) => "+".to_string(),
        };
        let b = ui.add(egui::Button::new(RichText::new(text).monospace()).selected(waiting));
        st.focus_first(&b);
        if b.clicked() {
            st.rebinding = if waiting { None } else { Some((a, slot)) };
            st.conflict = None;
        }
        if slot < keys.len() && !waiting && ui.small_button("×").on_hover_text("Remove").clicked() {
            s.clear_slot(a, slot);
            changed = true;
        }
    }
    changed
}

/// Who made the game and what it is built with.
fn credits_page(ui: &mut egui::Ui) {
    ui.label(RichText::new("Credits").size(26.0));
    ui.add_space(6.0);
    let dim = Color32::from_gray(175);
    for (head, body) in [
        ("Hailfire", "made by the Hailfire team; code under MIT or Apache-2.0"),
        ("Art and sound", "every sprite drawn by a shader, every sound synthesised in code"),
        ("Engine", "Rust, wgpu, winit, egui, kira, gilrs, rusty_enet, Lua 5.4 through mlua"),
        ("Fonts", "Ubuntu (Ubuntu Font Licence), Hack (MIT), Noto Emoji (OFL), emoji icons (MIT)"),
    ] {
        ui.label(RichText::new(head).size(18.0).strong());
        ui.label(RichText::new(body).color(dim));
        ui.add_space(6.0);
    }
    ui.label(RichText::new(crate::crash::version_line()).monospace().color(dim));
}

/// The installed mods, each with a switch for hosting. Returns whether one was switched.
fn mods_page(ui: &mut egui::Ui, content: &Content, settings: &mut Settings) -> bool {
    let mut changed = false;
    ui.label(RichText::new("Mods").size(26.0));
    ui.label(
        RichText::new("Drop mods into the user mods folder; check them with `hailfire mods check`.")
            .color(Color32::from_gray(160)),
    );
    ui.label(
        RichText::new(
            "Ticked mods are used when you host. Joining a server plays that server's mods: you need not install them.",
        )
        .color(Color32::from_gray(160)),
    );
    if let Some(d) = crate::content::user_mods_dir() {
        ui.label(RichText::new(d.display().to_string()).monospace().color(Color32::from_gray(160)));
    }
    egui::ScrollArea::vertical().max_height(ui.available_height() - 70.0).show(ui, |ui| {
        for m in &content.mods {
            let (mark, col) = if !m.enabled {
                ("off", Color32::from_gray(150))
            } else if m.loaded {
                ("loaded", Color32::from_rgb(120, 220, 140))
            } else {
                ("refused", Color32::from_rgb(255, 120, 110))
            };
            // An example that ships with the game says so: it is off until ticked.
            let note = if m.off_by_default { "  · an example, off until ticked" } else { "" };
            let label =
                RichText::new(format!("{}  {}  ({})  — {mark}{note}", m.name, m.version, m.id)).size(17.0).color(col);
            if m.id == "base" {
                ui.label(label);
            } else {
                let mut on = m.enabled;
                if ui.checkbox(&mut on, label).changed() {
                    settings.disabled_mods.retain(|d| *d != m.id);
                    settings.enabled_mods.retain(|d| *d != m.id);
                    match (on, m.off_by_default) {
                        (false, _) => settings.disabled_mods.push(m.id.clone()),
                        (true, true) => settings.enabled_mods.push(m.id.clone()),
                        (true, false) => {}
                    }
                    changed = true;
                }
            }
            for d in content.diagnostics.iter().filter(|d| d.mod_id.as_deref() == Some(m.id.as_str())) {
                ui.label(RichText::new(d.to_string()).monospace().size(12.0).color(Color32::from_rgb(255, 200, 160)));
            }
        }
    });
    changed
}

/// Who the in-game menu offers to watch: friends in dungeons (name, the place's name) on
/// a server this game joined (a host cannot leave its own server to watch), or the one
/// being watched.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Friends {
    pub elsewhere: Vec<(String, String)>,
    pub watching: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GameMenuAction {
    Resume,
    Settings,
    ReturnToHub,
    Disconnect,
    Quit,
    /// The host removes a player (by player id): kick, or ban (name and address).
    Kick(u32),
    Ban(u32),
    /// Fly this ship (index in the content's ships).
    Ship(u16),
    /// Leave, and join the same server again as a spectator of this player.
    Watch(String),
    /// Leave watching, and join the same server again as a player.
    StopWatching,
}

/// A ship as the menu offers it: name, stars needed, whether the player has them, and
/// whether it is the one flown.
#[derive(Clone, Debug, PartialEq)]
pub struct ShipChoice {
    pub name: String,
    pub stars: u32,
    pub unlocked: bool,
    pub flown: bool,
}

/// The in-game menu. In a dungeon it warns, honestly, what leaving costs.
/// `players`: the other players here, when this game is the host (it may kick or ban them).
#[allow(clippy::too_many_arguments)]
pub fn game_menu(
    ctx: &egui::Context,
    in_dungeon: bool,
    focus: bool,
    host_info: Option<&str>,
    players: Option<&[(u32, String)]>,
    paused: bool,
    ships: &[ShipChoice],
    friends: &Friends,
) -> Option<GameMenuAction> {
    let mut action = None;
    egui::Area::new(egui::Id::unique("game_menu")).anchor(egui::Align2::CENTER_CENTER, egui::Vec2::ZERO).show(ctx, |ui| {
        egui::Frame::window(ui.style()).show(ui, |ui| {
            ui.set_width(380.0);
            ui.vertical_centered(|ui| {
                if paused {
                    ui.label(RichText::new("Paused").size(22.0).color(Color32::from_rgb(255, 230, 140)));
                } else {
                    let why = if host_info.is_some() {
                        "Not paused: others are playing on your server"
                    } else {
                        "Not paused: the world goes on"
                    };
                    ui.label(RichText::new(why).size(16.0).color(Color32::from_gray(180)));
                }
                ui.add_space(8.0);
                let r = ui.add(big("Resume"));
                if focus {
                    r.request_focus();
                }
                if r.clicked() {
                    action = Some(GameMenuAction::Resume);
                }
                if ui.add(big("Settings")).clicked() {
                    action = Some(GameMenuAction::Settings);
                }
                // Ships, picked in the hub; stars (from clears) unlock them.
                if !ships.is_empty() && !in_dungeon {
                    ui.add_space(6.0);
                    ui.label(RichText::new("Ship").size(15.0).color(Color32::from_gray(200)));
                    ui.horizontal_wrapped(|ui| {
                        for (k, sh) in ships.iter().enumerate() {
                            let label = if sh.unlocked {
                                sh.name.clone()
                            } else {
                                format!("{} ({} stars)", sh.name, sh.stars)
                            };
                            let b = egui::Button::new(RichText::new(label).size(15.0)).selected(sh.flown);
                            if ui.add_enabled(sh.unlocked, b).clicked() {
                                action = Some(GameMenuAction::Ship(k as u16));
                            }
                        }
                    });
                }
                if in_dungeon {
                    if ui.add(big("Return to hub")).clicked() {
                        action = Some(GameMenuAction::ReturnToHub);
                    }
                    ui.label(
                        RichText::new("Leaving a dungeon channels for one second. You can still be hit, and if you die, you stay.")
                            .color(Color32::from_rgb(255, 200, 120)),
                    );
                }
                if let Some(who) = &friends.watching {
                    ui.label(RichText::new(format!("Watching {who}")).size(16.0).color(Color32::from_rgb(160, 220, 255)));
                    if ui.add(big("Stop watching")).on_hover_text("Join this server again as a player").clicked() {
                        action = Some(GameMenuAction::StopWatching);
                    }
                } else if !in_dungeon && !friends.elsewhere.is_empty() {
                    // Friends fighting elsewhere on this server: watch one (this game leaves
                    // and joins again as a spectator; "Stop watching" comes back).
                    ui.add_space(6.0);
                    ui.label(RichText::new("Friends in dungeons").size(15.0).color(Color32::from_gray(200)));
                    egui::Grid::new("friends_elsewhere").num_columns(3).spacing([12.0, 6.0]).show(ui, |ui| {
                        for (name, place) in &friends.elsewhere {
                            ui.label(RichText::new(name).size(16.0));
                            ui.label(RichText::new(place).color(Color32::from_gray(170)));
                            if ui.button("Watch").on_hover_text(format!("Watch {name}'s fight as a spectator")).clicked()
                            {
                                action = Some(GameMenuAction::Watch(name.clone()));
                            }
                            ui.end_row();
                        }
                    });
                }
                if ui.add(big("Disconnect to menu")).clicked() {
                    action = Some(GameMenuAction::Disconnect);
                }
                if in_dungeon {
                    ui.label(
                        RichText::new("Disconnecting leaves your ship in the dungeon for that same second.")
                            .color(Color32::from_rgb(255, 200, 120)),
                    );
                }
                if let Some(h) = host_info {
                    ui.label(RichText::new(h).color(Color32::from_gray(170)));
                    // "IP:PORT" of "friends join at IP:PORT (…)", ready to paste in a chat.
                    let addr = h.split("join at ").nth(1).and_then(|r| r.split_whitespace().next());
                    if let Some(a) = addr {
                        if ui.button(format!("Copy {a}")).on_hover_text("Copy the address friends join").clicked() {
                            ui.ctx().copy_text(a.to_string());
                        }
                    }
                }
                if let Some(players) = players.filter(|p| !p.is_empty()) {
                    ui.add_space(8.0);
                    ui.label(RichText::new("Players here").color(Color32::from_gray(170)));
                    egui::Grid::new("host_roster").num_columns(3).spacing([12.0, 6.0]).show(ui, |ui| {
                        for (id, name) in players {
                            ui.label(RichText::new(name).size(16.0));
                            if ui.button("Kick").on_hover_text("Disconnect them; they may join again").clicked() {
                                action = Some(GameMenuAction::Kick(*id));
                            }
                            if ui.button("Ban").on_hover_text("Disconnect them and keep their name and address out").clicked() {
                                action = Some(GameMenuAction::Ban(*id));
                            }
                            ui.end_row();
                        }
                    });
                }
                if ui.add(big("Quit game")).clicked() {
                    action = Some(GameMenuAction::Quit);
                }
            });
        });
    });
    action
}
