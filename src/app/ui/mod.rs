//! egui screens: the HUD (`hud`) and the menus (`menu`), in the game's style (`style`).

pub mod hud;
pub mod menu;
pub mod style;
