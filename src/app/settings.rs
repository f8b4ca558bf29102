//! Player settings: name, bindings, volumes, display, accessibility, recent servers. Stored as
//! TOML in the OS configuration directory, written atomically (temp file, sync, rename) so
//! a crash mid-save loses nothing. An unreadable file is reported, kept aside as
//! `settings.toml.bad`, and replaced by defaults.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Every bindable action.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    MoveUp,
    MoveDown,
    MoveLeft,
    MoveRight,
    Fire,
    /// Hold: slower, a narrower and denser stream of shots, the hitbox shown.
    Focus,
    /// Press: a flare clears the enemy bullets around the ship.
    Flare,
    Interact,
    /// Hold to escape from a dungeon (and to leave after death).
    Escape,
    Menu,
    Screenshot,
    NetOverlay,
}

impl Action {
    pub const ALL: [Action; 12] = [
        Action::MoveUp,
        Action::MoveDown,
        Action::MoveLeft,
        Action::MoveRight,
        Action::Fire,
        Action::Focus,
        Action::Flare,
        Action::Interact,
        Action::Escape,
        Action::Menu,
        Action::Screenshot,
        Action::NetOverlay,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Action::MoveUp => "Move up",
            Action::MoveDown => "Move down",
            Action::MoveLeft => "Move left",
            Action::MoveRight => "Move right",
            Action::Fire => "Fire",
            Action::Focus => "Focus (slow, dense shots, hitbox shown)",
            Action::Flare => "Flare (clears bullets around you)",
            Action::Interact => "Interact (portals)",
            Action::Escape => "Escape to the hub / leave after death",
            Action::Menu => "Menu",
            Action::Screenshot => "Screenshot",
            Action::NetOverlay => "Show or hide the network overlay",
        }
    }
}

/// Action -> input names: keyboard keys as winit key codes ("KeyW", "Space"), mouse
/// buttons ("MouseLeft"), gamepad buttons ("PadSouth", "PadRightTrigger2").
pub type Bindings = BTreeMap<Action, Vec<String>>;

pub fn default_bindings() -> Bindings {
    let b = |a: Action, v: &[&str]| (a, v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
    BTreeMap::from([
        b(Action::MoveUp, &["KeyW", "ArrowUp", "PadDPadUp"]),
        b(Action::MoveDown, &["KeyS", "ArrowDown", "PadDPadDown"]),
        b(Action::MoveLeft, &["KeyA", "ArrowLeft", "PadDPadLeft"]),
        b(Action::MoveRight, &["KeyD", "ArrowRight", "PadDPadRight"]),
        b(Action::Fire, &["MouseLeft", "Space", "PadRightTrigger2", "PadRightTrigger"]),
        b(Action::Focus, &["ShiftLeft", "PadLeftTrigger"]),
        b(Action::Flare, &["KeyX", "MouseRight", "PadWest"]),
        b(Action::Interact, &["KeyE", "PadSouth"]),
        b(Action::Escape, &["KeyF", "PadEast"]),
        b(Action::Menu, &["Escape", "PadStart"]),
        b(Action::Screenshot, &["F12"]),
        b(Action::NetOverlay, &["F3", "PadSelect"]),
    ])
}

/// How the game's window is shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WindowMode {
    #[default]
    Windowed,
    /// A window the size of the screen without borders (fast to switch, plays well with
    /// other windows).
    Borderless,
    /// Exclusive fullscreen in the monitor's largest mode.
    Fullscreen,
}

impl WindowMode {
    pub const ALL: [WindowMode; 3] = [WindowMode::Windowed, WindowMode::Borderless, WindowMode::Fullscreen];
    pub fn label(self) -> &'static str {
        match self {
            WindowMode::Windowed => "Windowed",
            WindowMode::Borderless => "Borderless fullscreen",
            WindowMode::Fullscreen => "Fullscreen",
        }
    }
}

/// Colours of enemy bullets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BulletColours {
    /// The colours each mod chose.
    #[default]
    Mod,
    /// Every colour moved to the nearest of a palette that stays distinct with
    /// deuteranopia and protanopia (red-green colour blindness): reds become vermilion,
    /// greens sky blue, and so on (see `scene::colour_blind`).
    ColourBlind,
}

/// The settings page's sections (each can be reset on its own).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Section {
    #[default]
    Video,
    Audio,
    Controls,
    Network,
    Accessibility,
}

impl Section {
    pub const ALL: [Section; 5] =
        [Section::Video, Section::Audio, Section::Controls, Section::Network, Section::Accessibility];
    pub fn label(self) -> &'static str {
        match self {
            Section::Video => "Video",
            Section::Audio => "Audio",
            Section::Controls => "Controls",
            Section::Network => "Network",
            Section::Accessibility => "Accessibility",
        }
    }
}

/// Window sizes offered in windowed mode (logical pixels).
pub const WINDOW_SIZES: [[u32; 2]; 5] = [[960, 540], [1280, 720], [1600, 900], [1920, 1080], [2560, 1440]];

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    pub name: String,
    /// 0..1 each.
    pub master_volume: f32,
    pub sfx_volume: f32,
    pub music_volume: f32,
    /// All sound off, the sliders kept.
    pub muted: bool,
    pub window_mode: WindowMode,
    /// Read from settings files of earlier versions (true = borderless), never written.
    #[serde(skip_serializing)]
    pub fullscreen: bool,
    /// The window's size in windowed mode, logical pixels.
    pub window_size: [u32; 2],
    /// The menus' and HUD's size (0.75..2).
    pub ui_scale: f32,
    pub vsync: bool,
    /// Frames drawn per second at most: 60 (one per game tick) or 30 (every other tick).
    pub frame_cap: u32,
    /// No glow around bullets and ships (faster on software rendering and old GPUs).
    pub low_effects: bool,
    /// Accessibility: a bright outline around every enemy bullet.
    pub bullet_outline: bool,
    pub bullet_colours: BulletColours,
    /// The view shakes briefly when your ship is hit.
    pub screen_shake: bool,
    /// Hit flashes and bursts toned down.
    pub reduced_flashing: bool,
    /// Damage numbers rise from what was hit.
    pub damage_numbers: bool,
    /// A health bar over each wounded enemy.
    pub enemy_health_bars: bool,
    pub show_net_overlay: bool,
    /// Most recent first, at most 8.
    pub recent_servers: Vec<String>,
    /// The ship last picked (its id in the content; empty: the first).
    pub ship: String,
    /// UDP port to host on.
    pub host_port: u16,
    /// Address to host on: "::" lets friends in over IPv6 and IPv4 ("0.0.0.0": IPv4 only);
    /// "127.0.0.1" keeps it to this machine.
    pub host_address: String,
    pub bindings: Bindings,
    /// Mods (by id) turned off in the Mods menu: not loaded when hosting. The base game
    /// cannot be turned off. Joining a server always plays that server's content.
    pub disabled_mods: Vec<String>,
    /// Mods (by id) that are off until asked for (examples) and were turned on in the Mods
    /// menu.
    pub enabled_mods: Vec<String>,
    /// When hosting, reload mods whose files are saved (new fights use them).
    pub watch_mods: bool,
    /// Record every session into the data folder's `replays/` (`hailfire replay FILE`).
    pub record_sessions: bool,
    /// When hosting, ask the router to forward the port (UPnP or NAT-PMP), so friends on
    /// the internet can join.
    pub upnp: bool,
    /// When hosting, also take friends through this relay (`hailfire relay`, HOST[:PORT];
    /// empty: none): for a host behind carrier-grade NAT.
    pub relay: String,
    /// Keep my address from friends who join by code (no straight path: every game goes
    /// through the relay).
    pub relay_hide_address: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            name: "Pilot".into(),
            ship: String::new(),
            master_volume: 0.8,
            sfx_volume: 0.8,
            music_volume: 0.5,
            muted: false,
            window_mode: WindowMode::Windowed,
            fullscreen: false,
            window_size: [1280, 720],
            ui_scale: 1.0,
            vsync: true,
            frame_cap: 60,
            low_effects: false,
            bullet_outline: false,
            bullet_colours: BulletColours::Mod,
            screen_shake: true,
            reduced_flashing: false,
            damage_numbers: true,
            enemy_health_bars: true,
            show_net_overlay: false,
            watch_mods: false,
            record_sessions: false,
            upnp: true,
            relay: String::new(),
            relay_hide_address: false,
            recent_servers: Vec::new(),
            host_port: crate::protocol::DEFAULT_PORT,
            host_address: "::".into(),
            bindings: default_bindings(),
            disabled_mods: Vec::new(),
            enabled_mods: Vec::new(),
        }
    }
}

impl Settings {
    /// Which mods host-and-play loads: every mod found, less those turned off, and the
    /// examples turned on.
    pub fn mod_choice(&self) -> crate::content::Choice {
        crate::content::Choice { disabled: self.disabled_mods.clone(), enabled: self.enabled_mods.clone() }
    }

    /// `$HAILFIRE_CONFIG_DIR/settings.toml`, else the OS configuration directory.
    pub fn path() -> PathBuf {
        if let Ok(d) = std::env::var("HAILFIRE_CONFIG_DIR") {
            return PathBuf::from(d).join("settings.toml");
        }
        directories::ProjectDirs::from("", "", "Hailfire")
            .map(|d| d.config_dir().join("settings.toml"))
            .unwrap_or_else(|| PathBuf::from("settings.toml"))
    }

    /// Loads settings. A missing file gives defaults; an unreadable one gives defaults and a
    /// message saying what was wrong and where the bad file was kept.
    pub fn load_from(path: &Path) -> (Settings, Option<String>) {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return (Settings::default(), None),
            // Not text at all: set aside like any unreadable file (never overwritten).
            Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
                let bad = path.with_extension("toml.bad");
                let kept = std::fs::rename(path, &bad).is_ok();
                let msg = format!(
                    "the settings file {} is not text (UTF-8). {}Using defaults.",
                    path.display(),
                    if kept { format!("It was kept as {}. ", bad.display()) } else { String::new() }
                );
                return (Settings::default(), Some(msg));
            }
            Err(e) => {
                return (Settings::default(), Some(format!("could not read {}: {e}; using defaults", path.display())))
            }
        };
        match toml::from_str::<Settings>(&text) {
            Ok(mut s) => {
                s.sanitize();
                (s, None)
            }
            Err(e) => {
                let bad = path.with_extension("toml.bad");
                let kept = std::fs::rename(path, &bad).is_ok();
                let pos = e.span().map(|s| crate::content::diag::line_col(&text, s.start));
                let at = pos.map_or(String::new(), |(l, c)| format!(" at line {l}, column {c}"));
                let msg = format!(
                    "the settings file {} could not be read{at}: {}. {}Using defaults.",
                    path.display(),
                    e.message().trim(),
                    if kept { format!("It was kept as {}. ", bad.display()) } else { String::new() }
                );
                (Settings::default(), Some(msg))
            }
        }
    }

    pub fn load() -> (Settings, Option<String>) {
        Self::load_from(&Self::path())
    }

    /// Clamps values a hand-edited file could get wrong; fills in unbound actions.
    pub fn sanitize(&mut self) {
        for v in [&mut self.master_volume, &mut self.sfx_volume, &mut self.music_volume] {
            *v = if v.is_finite() { v.clamp(0.0, 1.0) } else { 0.8 };
        }
        self.name = if self.name.chars().all(|c| c.is_control() || c.is_whitespace()) {
            "Pilot".into()
        } else {
            crate::protocol::names::sanitize(&self.name)
        };
        self.recent_servers.truncate(8);
        if std::mem::take(&mut self.fullscreen) && self.window_mode == WindowMode::Windowed {
            self.window_mode = WindowMode::Borderless;
        }
        self.ui_scale = if self.ui_scale.is_finite() { self.ui_scale.clamp(0.75, 2.0) } else { 1.0 };
        self.frame_cap = if self.frame_cap <= 30 { 30 } else { 60 };
        self.window_size = [self.window_size[0].clamp(640, 7680), self.window_size[1].clamp(360, 4320)];
        let defaults = default_bindings();
        for a in Action::ALL {
            self.bindings.entry(a).or_insert_with(|| defaults[&a].clone());
        }
    }

    /// Writes atomically: a temp file next to the target, flushed to disk, then renamed.
    pub fn save_to(&self, path: &Path) -> std::io::Result<()> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let text = toml::to_string_pretty(self).map_err(std::io::Error::other)?;
        let tmp = path.with_extension("toml.tmp");
        {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(
                b"# Hailfire settings. Edit with care: a broken file is set aside and replaced by defaults.\n",
            )?;
            f.write_all(text.as_bytes())?;
            f.sync_all()?;
        }
        std::fs::rename(&tmp, path)
    }

    pub fn save(&self) -> std::io::Result<()> {
        self.save_to(&Self::path())
    }

    /// Remembers a server address at the top of the recent list.
    pub fn remember_server(&mut self, addr: &str) {
        self.recent_servers.retain(|a| a != addr);
        self.recent_servers.insert(0, addr.to_string());
        self.recent_servers.truncate(8);
    }

    /// Which action, if any, an input name triggers.
    pub fn actions_for(&self, input: &str) -> Vec<Action> {
        self.bindings.iter().filter(|(_, v)| v.iter().any(|i| i == input)).map(|(a, _)| *a).collect()
    }

    /// Binds `input` to `action` (first slot), removing it from any other action.
    pub fn rebind(&mut self, action: Action, input: &str) {
        for v in self.bindings.values_mut() {
            v.retain(|i| i != input);
        }
        let slot = self.bindings.entry(action).or_default();
        slot.insert(0, input.to_string());
    }

    /// Puts `input` in `slot` of `action`, **replacing** what the slot held (`slot` past the
    /// end adds one). If another action uses `input`, nothing changes and that action is
    /// returned, so the player can be asked "swap?" ([`assign_swapping`](Self::assign_swapping)).
    /// An input already elsewhere in this action moves to the slot.
    pub fn assign(&mut self, action: Action, slot: usize, input: &str) -> Result<(), Action> {
        if let Some(other) = self.actions_for(input).into_iter().find(|a| *a != action) {
            return Err(other);
        }
        let v = self.bindings.entry(action).or_default();
        v.retain(|i| i != input);
        let slot = slot.min(v.len());
        if slot < v.len() {
            v[slot] = input.to_string();
        } else {
            v.push(input.to_string());
        }
        Ok(())
    }

    /// [`assign`](Self::assign), taking `input` from the action that had it; that action
    /// gets what the slot held in its place (a swap), or just loses it when the slot was
    /// empty.
    pub fn assign_swapping(&mut self, action: Action, slot: usize, input: &str) {
        let old = self.bindings.get(&action).and_then(|v| v.get(slot)).cloned();
        for (a, v) in self.bindings.iter_mut() {
            if *a == action {
                continue;
            }
            if let Some(i) = v.iter().position(|x| x == input) {
                match &old {
                    Some(o) if !v.contains(o) => v[i] = o.clone(),
                    _ => {
                        v.remove(i);
                    }
                }
            }
        }
        let _ = self.assign(action, slot, input);
    }

    /// Removes one binding of `action`.
    pub fn clear_slot(&mut self, action: Action, slot: usize) {
        if let Some(v) = self.bindings.get_mut(&action) {
            if slot < v.len() {
                v.remove(slot);
            }
        }
    }

    /// Every binding back to the defaults.
    pub fn reset_controls(&mut self) {
        self.bindings = default_bindings();
    }

    /// The master volume as played: 0 when muted.
    pub fn effective_master(&self) -> f32 {
        if self.muted {
            0.0
        } else {
            self.master_volume
        }
    }

    /// One section of the settings page back to the defaults (the name, recent servers
    /// and mods are kept).
    pub fn reset_section(&mut self, section: Section) {
        let d = Settings::default();
        match section {
            Section::Video => {
                self.window_mode = d.window_mode;
                self.window_size = d.window_size;
                self.ui_scale = d.ui_scale;
                self.vsync = d.vsync;
                self.frame_cap = d.frame_cap;
                self.low_effects = d.low_effects;
            }
            Section::Audio => {
                self.master_volume = d.master_volume;
                self.sfx_volume = d.sfx_volume;
                self.music_volume = d.music_volume;
                self.muted = d.muted;
            }
            Section::Controls => self.reset_controls(),
            Section::Network => {
                self.host_port = d.host_port;
                self.show_net_overlay = d.show_net_overlay;
                self.watch_mods = d.watch_mods;
                self.record_sessions = d.record_sessions;
                self.upnp = d.upnp;
                self.relay = d.relay.clone();
                self.relay_hide_address = d.relay_hide_address;
            }
            Section::Accessibility => {
                self.bullet_outline = d.bullet_outline;
                self.bullet_colours = d.bullet_colours;
                self.screen_shake = d.screen_shake;
                self.reduced_flashing = d.reduced_flashing;
                self.damage_numbers = d.damage_numbers;
                self.enemy_health_bars = d.enemy_health_bars;
            }
        }
    }
}
