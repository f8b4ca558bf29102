//! egui screens: the HUD (`hud`) and the menus (`menu`).

pub mod hud;
pub mod menu;
