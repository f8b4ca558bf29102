//! Menus: main menu (Host and play, Join, Settings, Mods, Quit), the join form with recent
//! servers, settings (name, volumes, display, every binding), the mods list with each mod's
//! errors, the in-game menu, and error screens in words a player understands. Everything is
//! reachable by keyboard or gamepad alone (focus moves with the d-pad, A activates).

use egui::{Align, Color32, Layout, RichText};

use crate::app::settings::{Action, Settings};
use crate::content::Content;

#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum Page {
    #[default]
    Main,
    Join,
    Settings,
    Mods,
}

#[derive(Default)]
pub struct MenuState {
    pub page: Page,
    pub join_addr: String,
    /// The server password typed on the Join page (kept for this run only, never saved).
    pub join_password: String,
    /// The last join failed on a changed server key: the address and the key it
    /// presented, to offer trusting exactly that key.
    pub key_changed_for: Option<(String, Option<[u8; 32]>)>,
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
            if let Ok(list) = crate::net::discovery::lan(&ports, true, std::time::Duration::from_millis(700)) {
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

fn big(text: &str) -> egui::Button<'static> {
    egui::Button::new(RichText::new(text.to_string()).size(22.0)).min_size(egui::vec2(300.0, 44.0))
}

impl MenuState {
    pub fn go(&mut self, p: Page) {
        self.page = p;
        self.focus_pending = true;
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
        ui.with_layout(Layout::top_down(Align::Center), |ui| {
            ui.add_space(40.0);
            ui.label(RichText::new("HAILFIRE").size(56.0).strong().color(Color32::from_rgb(255, 120, 150)));
            ui.label(RichText::new("co-op bullet hell").size(18.0).color(Color32::from_gray(170)));
            ui.add_space(24.0);
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
                    let h = ui.add(big("Host and play"));
                    st.focus_first(&h);
                    if h.clicked() {
                        action = Some(MenuAction::Host);
                    }
                    ui.label(
                        RichText::new(format!("Friends join you on UDP port {}", settings.host_port))
                            .color(Color32::from_gray(160)),
                    );
                    ui.add_space(6.0);
                    if ui.add(big("Join")).clicked() {
                        if st.join_addr.is_empty() {
                            st.join_addr = settings.recent_servers.first().cloned().unwrap_or_default();
                        }
                        st.go(Page::Join);
                    }
                    if ui.add(big("Settings")).clicked() {
                        st.go(Page::Settings);
                    }
                    if ui.add(big("Mods")).clicked() {
                        st.go(Page::Mods);
                    }
                    if ui.add(big("Quit")).clicked() {
                        action = Some(MenuAction::Quit);
                    }
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
    action
}

/// Returns whether anything changed.
pub fn settings_page(ui: &mut egui::Ui, st: &mut MenuState, s: &mut Settings) -> bool {
    let mut changed = false;
    ui.label(RichText::new("Settings").size(26.0));
    egui::ScrollArea::vertical().max_height(ui.available_height() - 70.0).show(ui, |ui| {
        // A centred column with a margin, not labels against the window's edge.
        ui.horizontal(|ui| {
            ui.add_space(((ui.available_width() - 860.0) / 2.0).max(24.0));
            ui.vertical(|ui| {
                egui::Grid::new(egui::Id::unique("settings")).num_columns(2).spacing([24.0, 8.0]).show(ui, |ui| {
                    ui.label("Name");
                    let r = ui.add(egui::TextEdit::singleline(&mut s.name).char_limit(24));
                    st.focus_first(&r);
                    changed |= r.changed();
                    ui.end_row();
                    for (label, v) in [
                        ("Master volume", &mut s.master_volume),
                        ("Effects", &mut s.sfx_volume),
                        ("Music", &mut s.music_volume),
                    ] {
                        ui.label(label);
                        changed |= ui.add(egui::Slider::new(v, 0.0..=1.0).show_value(true)).changed();
                        ui.end_row();
                    }
                    ui.label("Fullscreen");
                    changed |= ui.checkbox(&mut s.fullscreen, "").changed();
                    ui.end_row();
                    ui.label("Vsync");
                    changed |= ui.checkbox(&mut s.vsync, "").changed();
                    ui.end_row();
                    ui.label("Show the network overlay");
                    changed |= ui.checkbox(&mut s.show_net_overlay, "").changed();
                    ui.end_row();
                    ui.label("Reload saved mods while hosting");
                    changed |= ui.checkbox(&mut s.watch_mods, "").changed();
                    ui.end_row();
                    ui.label("Host on UDP port");
                    changed |= ui.add(egui::DragValue::new(&mut s.host_port).range(1024..=65535)).changed();
                    ui.end_row();
                    ui.label(RichText::new("Controls").size(18.0));
                    ui.label(
                        RichText::new("Click a binding to replace it, + to add one, × to remove it.")
                            .color(Color32::from_gray(150)),
                    );
                    ui.end_row();
                    for a in Action::ALL {
                        ui.label(a.label());
                        ui.horizontal(|ui| {
                            let keys = s.bindings.get(&a).cloned().unwrap_or_default();
                            for slot in 0..=keys.len() {
                                let waiting = st.rebinding == Some((a, slot));
                                let text = match (waiting, keys.get(slot)) {
                                    (true, _) => "press…".to_string(),
                                    (false, Some(k)) => crate::app::input::display_name(k, st.pad_family),
                                    (false, None) => "+".to_string(),
                                };
                                let b = ui.add(egui::Button::new(RichText::new(text).monospace()).selected(waiting));
                                if b.clicked() {
                                    st.rebinding = if waiting { None } else { Some((a, slot)) };
                                    st.conflict = None;
                                }
                                if slot < keys.len()
                                    && !waiting
                                    && ui.small_button("×").on_hover_text("Remove").clicked()
                                {
                                    s.clear_slot(a, slot);
                                    changed = true;
                                }
                            }
                            if st.rebinding.is_some_and(|(r, _)| r == a) {
                                ui.label(RichText::new("Esc cancels").color(Color32::from_gray(150)));
                            }
                        });
                        ui.end_row();
                    }
                });
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
                if ui.button("Reset controls to the defaults").clicked() {
                    s.reset_controls();
                    st.conflict = None;
                    changed = true;
                }
            });
        });
    });
    changed
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
            let label = RichText::new(format!("{}  {}  ({})  — {mark}", m.name, m.version, m.id)).size(17.0).color(col);
            if m.id == "base" {
                ui.label(label);
            } else {
                let mut on = m.enabled;
                if ui.checkbox(&mut on, label).changed() {
                    settings.disabled_mods.retain(|d| *d != m.id);
                    if !on {
                        settings.disabled_mods.push(m.id.clone());
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

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GameMenuAction {
    Resume,
    ReturnToHub,
    Disconnect,
    Quit,
    /// The host removes a player (by player id): kick, or ban (name and address).
    Kick(u32),
    Ban(u32),
}

/// The in-game menu. In a dungeon it warns, honestly, what leaving costs.
/// `players`: the other players here, when this game is the host (it may kick or ban them).
pub fn game_menu(
    ctx: &egui::Context,
    in_dungeon: bool,
    focus: bool,
    host_info: Option<&str>,
    players: Option<&[(u32, String)]>,
) -> Option<GameMenuAction> {
    let mut action = None;
    egui::Area::new(egui::Id::unique("game_menu")).anchor(egui::Align2::CENTER_CENTER, egui::Vec2::ZERO).show(ctx, |ui| {
        egui::Frame::window(ui.style()).show(ui, |ui| {
            ui.set_width(380.0);
            ui.vertical_centered(|ui| {
                ui.label(RichText::new("Paused? Not quite: the world goes on").size(16.0).color(Color32::from_gray(180)));
                ui.add_space(8.0);
                let r = ui.add(big("Resume"));
                if focus {
                    r.request_focus();
                }
                if r.clicked() {
                    action = Some(GameMenuAction::Resume);
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
