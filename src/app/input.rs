//! Keyboard, mouse and gamepad input, turned into the client's `InputSample` through the
//! player's bindings. Input names: winit key codes ("KeyW"), "MouseLeft"/"MouseRight"/
//! "MouseMiddle", and gamepad buttons as "Pad" + gilrs's name ("PadSouth").

use std::collections::HashSet;

use super::settings::{Action, Settings};
use crate::client::InputSample;
use crate::sim::player::{BTN_ESCAPE, BTN_FIRE, BTN_INTERACT};
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
            self.pressed.push(name);
        }
    }

    /// Whether a raw input (not an action) is held, e.g. "ControlLeft".
    pub fn is_held(&self, name: &str) -> bool {
        self.held.contains(name)
    }

    pub fn release(&mut self, name: &str) {
        self.held.remove(name);
    }

    pub fn release_all(&mut self) {
        self.held.clear();
        self.left_stick = Vec2::ZERO;
        self.right_stick = Vec2::ZERO;
    }

    /// Inputs newly pressed since the last call (for one-shot actions and rebinding).
    pub fn take_pressed(&mut self) -> Vec<String> {
        std::mem::take(&mut self.pressed)
    }

    pub fn held(&self, s: &Settings, a: Action) -> bool {
        s.bindings.get(&a).is_some_and(|v| v.iter().any(|i| self.held.contains(i)))
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
        if self.held(s, Action::Fire) {
            buttons |= BTN_FIRE;
        }
        if self.held(s, Action::Interact) {
            buttons |= BTN_INTERACT;
        }
        if self.held(s, Action::Escape) || self.synthetic_escape {
            buttons |= BTN_ESCAPE;
        }
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
