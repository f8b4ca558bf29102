//! The desktop program: window and loop, renderer, menus and HUD, input, audio, settings.

pub mod render;
pub mod scenes;
pub mod ui;
