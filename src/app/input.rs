//! Keyboard, mouse and gamepad input, turned into the client's `InputSample` through the
//! player's bindings. Input names: winit key codes ("KeyW"), "MouseLeft"/"MouseRight"/
//! "MouseMiddle", and gamepad buttons as "Pad" + gilrs's name ("PadSouth").

use std::collections::HashSet;

use super::settings::{Action, Settings};
use crate::client::InputSample;
use crate::sim::player::{BTN_ESCAPE, BTN_FIRE, BTN_FLARE, BTN_FOCUS, BTN_INTERACT};
use crate::sim::Vec2;

pub fn key_name(code: winit::keyboard::KeyCode) -> String {
    format!("{code:?}")
}

pub fn mouse_name(b: winit::event::MouseButton) -> String {
    match b {
        winit::event::MouseButton::Left => "MouseLeft".into(),
        winit::event::MouseButton::Right => "MouseRight".into(),
        winit::event::MouseButton::Middle => "MouseMiddle".into(),
        other => format!("Mouse{other:?}"),
    }
}

pub fn pad_name(b: gilrs::Button) -> String {
    format!("Pad{b:?}")
}

/// What a gamepad button does in the menus, as the keys egui knows: the d-pad moves the
/// focus to the nearest widget in its direction (egui's arrow-key navigation; left and right
/// move a focused slider instead), the bumpers (LB/RB, L1/R1) switch the settings
/// page's sections as Page Up/Page Down do, A (South) activates, B (East) leaves a text
/// field. In a text field (`in_text`), which keeps the arrow keys for its cursor, up and
/// down move on as Shift+Tab and Tab. A press and a release each.
pub fn pad_menu_events(b: gilrs::Button, in_text: bool) -> Vec<egui::Event> {
    let (key, shift) = match b {
        gilrs::Button::DPadDown if in_text => (egui::Key::Tab, false),
        gilrs::Button::DPadUp if in_text => (egui::Key::Tab, true),
        gilrs::Button::DPadDown => (egui::Key::ArrowDown, false),
        gilrs::Button::DPadUp => (egui::Key::ArrowUp, false),
        gilrs::Button::DPadLeft => (egui::Key::ArrowLeft, false),
        gilrs::Button::DPadRight => (egui::Key::ArrowRight, false),
        gilrs::Button::LeftTrigger => (egui::Key::PageUp, false),
        gilrs::Button::RightTrigger => (egui::Key::PageDown, false),
        gilrs::Button::South => (egui::Key::Enter, false),
        gilrs::Button::East => (egui::Key::Escape, false),
        _ => return Vec::new(),
    };
    let modifiers = egui::Modifiers { shift, ..Default::default() };
    [true, false]
        .map(|pressed| egui::Event::Key { key, physical_key: None, pressed, repeat: false, modifiers })
        .to_vec()
}

/// Gamepad button naming: the letters of Xbox-style pads or the shapes of PlayStation ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum PadFamily {
    #[default]
    Xbox,
    PlayStation,
}

impl PadFamily {
    /// From the name the system gives a pad (gilrs: "Sony DualSense", "Xbox Wireless ...").
    pub fn of(pad_name: &str) -> PadFamily {
        let n = pad_name.to_ascii_lowercase();
        if ["playstation", "dualshock", "dualsense", "ps3", "ps4", "ps5", "sony"].iter().any(|k| n.contains(k)) {
            PadFamily::PlayStation
        } else {
            PadFamily::Xbox
        }
    }
}

/// An input as players know it: "W", "Up arrow", "Left mouse", "A" or "Cross".
pub fn display_name(input: &str, family: PadFamily) -> String {
    if let Some(pad) = input.strip_prefix("Pad") {
        let ps = family == PadFamily::PlayStation;
        let s = match pad {
            "South" => {
                if ps {
                    "Cross"
                } else {
                    "A"
                }
            }
            "East" => {
                if ps {
                    "Circle"
                } else {
                    "B"
                }
            }
            "West" => {
                if ps {
                    "Square"
                } else {
                    "X"
                }
            }
            "North" => {
                if ps {
                    "Triangle"
                } else {
                    "Y"
                }
            }
            "LeftTrigger" => {
                if ps {
                    "L1"
                } else {
                    "LB"
                }
            }
            "LeftTrigger2" => {
                if ps {
                    "L2"
                } else {
                    "LT"
                }
            }
            "RightTrigger" => {
                if ps {
                    "R1"
                } else {
                    "RB"
                }
            }
            "RightTrigger2" => {
                if ps {
                    "R2"
                } else {
                    "RT"
                }
            }
            "Select" => {
                if ps {
                    "Share"
                } else {
                    "View"
                }
            }
            "Start" => {
                if ps {
                    "Options"
                } else {
                    "Menu button"
                }
            }
            "Mode" => {
                if ps {
                    "PS button"
                } else {
                    "Xbox button"
                }
            }
            "LeftThumb" => "Left stick press",
            "RightThumb" => "Right stick press",
            "DPadUp" => "D-pad up",
            "DPadDown" => "D-pad down",
            "DPadLeft" => "D-pad left",
            "DPadRight" => "D-pad right",
            other => return format!("Pad {other}"),
        };
        return s.to_string();
    }
    if let Some(m) = input.strip_prefix("Mouse") {
        return match m {
            "Left" => "Left mouse".into(),
            "Right" => "Right mouse".into(),
            "Middle" => "Middle mouse".into(),
            other => format!("Mouse {other}"),
        };
    }
    if let Some(k) = input.strip_prefix("Key") {
        return k.to_string();
    }
    if let Some(d) = input.strip_prefix("Digit") {
        return d.to_string();
    }
    if let Some(d) = input.strip_prefix("Arrow") {
        return format!("{d} arrow");
    }
    if let Some(n) = input.strip_prefix("Numpad") {
        return format!("Numpad {n}");
    }
    for (side, word) in [("Left", "Left"), ("Right", "Right")] {
        for (key, name) in [("Shift", "Shift"), ("Control", "Ctrl"), ("Alt", "Alt"), ("Super", "Super")] {
            if input == format!("{key}{side}") {
                return format!("{word} {name}");
            }
        }
    }
    match input {
        "Escape" => "Esc".into(),
        "Space" => "Space".into(),
        "Enter" => "Enter".into(),
        "Backspace" => "Backspace".into(),
        "Backquote" => "`".into(),
        "Minus" => "-".into(),
        "Equal" => "=".into(),
        "Comma" => ",".into(),
        "Period" => ".".into(),
        "Slash" => "/".into(),
        "Semicolon" => ";".into(),
        "Quote" => "'".into(),
        "BracketLeft" => "[".into(),
        "BracketRight" => "]".into(),
        other => other.to_string(),
    }
}

/// Which device the player last used (decides whether the mouse or a stick aims).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Device {
    #[default]
    KeyboardMouse,
    Gamepad,
}

#[derive(Default)]
pub struct InputState {
    held: HashSet<String>,
    /// Inputs pressed since the last `take_pressed`.
    pressed: Vec<String>,
    /// Inputs pressed since the last `sample`: a tap shorter than a tick (pressed and
    /// released between two samples) still counts for the next tick.
    tapped: HashSet<String>,
    /// Inputs held while a menu was open: ignored by the game until released (the B that
    /// closed the pause menu must not also start an escape).
    suppressed: HashSet<String>,
    /// Cursor in physical pixels.
    pub cursor: Vec2,
    pub left_stick: Vec2,
    pub right_stick: Vec2,
    pub device: Device,
    last_aim: f32,
    /// The menu's "Return to hub": escape held by the game, not a key.
    pub synthetic_escape: bool,
}

impl InputState {
    pub fn press(&mut self, name: String) {
        if self.held.insert(name.clone()) {
            self.tapped.insert(name.clone());
            self.pressed.push(name);
        }
    }

    /// Whether a raw input (not an action) is held, e.g. "ControlLeft".
    pub fn is_held(&self, name: &str) -> bool {
        self.held.contains(name)
    }

    pub fn release(&mut self, name: &str) {
        self.held.remove(name);
        self.suppressed.remove(name);
    }

    /// A tick spent in a menu: what was pressed there is the menu's, not the game's.
    pub fn in_menu(&mut self) {
        self.tapped.clear();
        self.suppressed.extend(self.held.iter().cloned());
    }

    pub fn release_all(&mut self) {
        self.held.clear();
        self.suppressed.clear();
        self.left_stick = Vec2::ZERO;
        self.right_stick = Vec2::ZERO;
    }

    /// Inputs newly pressed since the last call (for one-shot actions and rebinding).
    pub fn take_pressed(&mut self) -> Vec<String> {
        std::mem::take(&mut self.pressed)
    }

    pub fn held(&self, s: &Settings, a: Action) -> bool {
        s.bindings.get(&a).is_some_and(|v| v.iter().any(|i| self.held.contains(i) && !self.suppressed.contains(i)))
    }

    /// This tick's input. `ship_screen` is the local ship on screen (physical pixels), to
    /// aim at the cursor; `world_per_px` converts nothing (aim is an angle).
    pub fn sample(&mut self, s: &Settings, ship_screen: Option<Vec2>) -> InputSample {
        let axis = |neg: Action, pos: Action| (self.held(s, pos) as i32 - self.held(s, neg) as i32) as f32;
        let mut mv = Vec2::new(axis(Action::MoveLeft, Action::MoveRight), axis(Action::MoveUp, Action::MoveDown));
        if self.left_stick.length() > 0.2 {
            mv = self.left_stick;
        }
        let mv = mv.clamp_unit();
        let aim = match self.device {
            Device::Gamepad if self.right_stick.length() > 0.3 => self.right_stick.angle_deg(),
            Device::Gamepad if mv.length() > 0.3 && self.right_stick.length() <= 0.3 => self.last_aim,
            Device::KeyboardMouse => match ship_screen {
                Some(ship) if (self.cursor - ship).length() > 2.0 => (self.cursor - ship).angle_deg(),
                _ => self.last_aim,
            },
            _ => self.last_aim,
        };
        self.last_aim = aim;
        let mut buttons = 0;
        let on = |a: Action| {
            self.held(s, a) || s.bindings.get(&a).is_some_and(|v| v.iter().any(|i| self.tapped.contains(i)))
        };
        if on(Action::Fire) {
            buttons |= BTN_FIRE;
        }
        if on(Action::Interact) {
            buttons |= BTN_INTERACT;
        }
        if on(Action::Focus) {
            buttons |= BTN_FOCUS;
        }
        if on(Action::Flare) {
            buttons |= BTN_FLARE;
        }
        if on(Action::Escape) || self.synthetic_escape {
            buttons |= BTN_ESCAPE;
        }
        self.tapped.clear();
        InputSample { mv, aim, buttons }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bindings_drive_the_sample_and_rebinding_takes_effect() {
        let mut s = Settings::default();
        let mut i = InputState::default();
        i.press("KeyW".into());
        i.press("Space".into());
        let x = i.sample(&s, None);
        assert_eq!(x.mv, Vec2::new(0.0, -1.0));
        assert_eq!(x.buttons & BTN_FIRE, BTN_FIRE);
        s.rebind(Action::Fire, "KeyJ");
        s.rebind(Action::MoveUp, "KeyI");
        let x = i.sample(&s, None);
        assert_eq!(x.buttons & BTN_FIRE, BTN_FIRE, "Space is still bound to fire as a second binding");
        i.release("Space");
        i.release("KeyW");
        i.press("KeyJ".into());
        i.press("KeyI".into());
        let x = i.sample(&s, None);
        assert_eq!(x.buttons & BTN_FIRE, BTN_FIRE);
        assert_eq!(x.mv, Vec2::new(0.0, -1.0), "the new key moves up");
        s.rebind(Action::Interact, "KeyI");
        let x = i.sample(&s, None);
        assert_eq!(x.mv, Vec2::ZERO, "a key moved to another action no longer moves");
        assert_eq!(x.buttons & BTN_INTERACT, BTN_INTERACT);
    }

    #[test]
    fn what_was_pressed_in_a_menu_stays_in_the_menu() {
        let s = Settings::default();
        let mut i = InputState::default();
        // B (escape / leave after death) held to close the pause menu, A tapped on a
        // setting, RB (fire) tapped to switch a section.
        i.press("PadEast".into());
        i.press("PadSouth".into());
        i.release("PadSouth");
        i.press("PadRightTrigger".into());
        i.release("PadRightTrigger");
        i.in_menu();
        let x = i.sample(&s, None);
        assert_eq!(x.buttons, 0, "nothing reaches the game after the menu closes");
        // Released and pressed again: the game's again.
        i.release("PadEast");
        i.press("PadEast".into());
        assert_eq!(i.sample(&s, None).buttons & BTN_ESCAPE, BTN_ESCAPE);
    }

    #[test]
    fn a_tap_shorter_than_a_tick_still_counts_once() {
        let s = Settings::default();
        let mut i = InputState::default();
        i.press("KeyE".into());
        i.release("KeyE");
        assert_eq!(i.sample(&s, None).buttons & BTN_INTERACT, BTN_INTERACT, "the tap reaches the next tick");
        assert_eq!(i.sample(&s, None).buttons & BTN_INTERACT, 0, "and only that one");
    }

    #[test]
    fn inputs_read_as_players_know_them() {
        let x = PadFamily::Xbox;
        assert_eq!(display_name("KeyW", x), "W");
        assert_eq!(display_name("ArrowUp", x), "Up arrow");
        assert_eq!(display_name("MouseLeft", x), "Left mouse");
        assert_eq!(display_name("ShiftLeft", x), "Left Shift");
        assert_eq!(display_name("Digit3", x), "3");
        assert_eq!(display_name("Escape", x), "Esc");
        assert_eq!(display_name("PadSouth", x), "A");
        assert_eq!(display_name("PadSouth", PadFamily::PlayStation), "Cross");
        assert_eq!(display_name("PadRightTrigger2", PadFamily::PlayStation), "R2");
        assert_eq!(display_name("PadDPadUp", x), "D-pad up");
        assert_eq!(
            PadFamily::of("Sony Interactive Entertainment DualSense Wireless Controller"),
            PadFamily::PlayStation
        );
        assert_eq!(PadFamily::of("Xbox Wireless Controller"), PadFamily::Xbox);
    }

    #[test]
    fn rebinding_replaces_its_slot_and_asks_before_taking_a_key() {
        let mut s = Settings::default();
        let before = s.bindings[&Action::Fire].clone();
        // Replace the first fire binding with J: the slot changes, the others stay.
        s.assign(Action::Fire, 0, "KeyJ").unwrap();
        assert_eq!(s.bindings[&Action::Fire][0], "KeyJ");
        assert_eq!(s.bindings[&Action::Fire].len(), before.len(), "replaced, not added");
        assert!(!s.bindings[&Action::Fire].contains(&before[0]));
        // E belongs to Interact: nothing changes, the conflict is reported.
        assert_eq!(s.assign(Action::Fire, 0, "KeyE"), Err(Action::Interact));
        assert_eq!(s.bindings[&Action::Fire][0], "KeyJ");
        assert!(s.bindings[&Action::Interact].contains(&"KeyE".to_string()));
        // Swapping: Fire's slot gets E, Interact gets J in E's place.
        s.assign_swapping(Action::Fire, 0, "KeyE");
        assert_eq!(s.bindings[&Action::Fire][0], "KeyE");
        assert!(s.bindings[&Action::Interact].contains(&"KeyJ".to_string()));
        assert!(!s.bindings[&Action::Interact].contains(&"KeyE".to_string()));
        assert_eq!(s.actions_for("KeyE"), vec![Action::Fire], "one key, one action");
        // A slot past the end adds; clearing removes one; reset restores everything.
        let n = s.bindings[&Action::Menu].len();
        s.assign(Action::Menu, 99, "KeyP").unwrap();
        assert_eq!(s.bindings[&Action::Menu].len(), n + 1);
        s.clear_slot(Action::Menu, n);
        assert_eq!(s.bindings[&Action::Menu].len(), n);
        s.reset_controls();
        assert_eq!(s.bindings, Settings::default().bindings);
    }

    #[test]
    fn a_settings_file_that_is_not_text_is_set_aside() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("settings.toml");
        std::fs::write(&p, [0xff, 0xfe, 0x00, 0x41]).unwrap();
        let (s, msg) = Settings::load_from(&p);
        assert_eq!(s.name, Settings::default().name);
        assert!(msg.unwrap().contains("not text"));
        assert_eq!(std::fs::read(d.path().join("settings.toml.bad")).unwrap(), vec![0xff, 0xfe, 0x00, 0x41]);
    }

    #[test]
    fn aim_follows_the_cursor_or_the_right_stick() {
        let s = Settings::default();
        let mut i = InputState { cursor: Vec2::new(100.0, 0.0), ..Default::default() };
        let a = i.sample(&s, Some(Vec2::new(0.0, 0.0))).aim;
        assert!(a.abs() < 1e-3);
        i.device = Device::Gamepad;
        i.right_stick = Vec2::new(0.0, 1.0);
        assert!((i.sample(&s, None).aim - 90.0).abs() < 1e-3);
        i.left_stick = Vec2::new(2.0, 0.0);
        assert!((i.sample(&s, None).mv.length() - 1.0).abs() < 1e-5, "stick clamped to the unit disc");
    }
}
