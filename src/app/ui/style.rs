//! The game's interface style: egui's dark theme recoloured to the game's (night blue
//! panels, a violet frame, the logo's hot pink for what is chosen), rounder and roomier.
//! Applied to every egui context the game makes: the window's, the preview's and the
//! offscreen scenes' (so the golden images show what players see).

use egui::{Color32, CornerRadius, Stroke};

/// The logo's pink: what is selected or focused.
pub const ACCENT: Color32 = Color32::from_rgb(255, 120, 150);
/// The frame of windows and panels.
pub const FRAME: Color32 = Color32::from_rgb(122, 102, 216);

/// Sets the game's style on `ctx`.
pub fn apply(ctx: &egui::Context) {
    ctx.all_styles_mut(|s| {
        let v = &mut s.visuals;
        *v = egui::Visuals::dark();
        v.panel_fill = Color32::from_rgb(12, 12, 26);
        v.window_fill = Color32::from_rgba_unmultiplied(14, 13, 30, 240);
        v.window_stroke = Stroke::new(1.5, FRAME);
        v.window_corner_radius = CornerRadius::same(10);
        v.extreme_bg_color = Color32::from_rgb(8, 8, 18);
        v.faint_bg_color = Color32::from_rgb(20, 19, 40);
        v.selection.bg_fill = Color32::from_rgb(150, 52, 96);
        v.selection.stroke = Stroke::new(1.5, ACCENT);
        v.hyperlink_color = ACCENT;
        let radius = CornerRadius::same(8);
        let w = &mut v.widgets;
        w.noninteractive.bg_fill = Color32::from_rgb(20, 19, 40);
        w.noninteractive.bg_stroke = Stroke::new(1.0, Color32::from_rgb(52, 48, 90));
        w.noninteractive.fg_stroke = Stroke::new(1.0, Color32::from_rgb(215, 215, 232));
        w.inactive.bg_fill = Color32::from_rgb(34, 32, 62);
        w.inactive.weak_bg_fill = Color32::from_rgb(34, 32, 62);
        w.inactive.bg_stroke = Stroke::new(1.0, Color32::from_rgb(70, 62, 120));
        w.inactive.fg_stroke = Stroke::new(1.0, Color32::from_rgb(226, 226, 240));
        w.hovered.bg_fill = Color32::from_rgb(58, 48, 104);
        w.hovered.weak_bg_fill = Color32::from_rgb(58, 48, 104);
        w.hovered.bg_stroke = Stroke::new(1.5, FRAME);
        w.hovered.fg_stroke = Stroke::new(1.5, Color32::WHITE);
        w.active.bg_fill = Color32::from_rgb(96, 58, 140);
        w.active.weak_bg_fill = Color32::from_rgb(96, 58, 140);
        w.active.bg_stroke = Stroke::new(2.0, ACCENT);
        w.active.fg_stroke = Stroke::new(2.0, Color32::WHITE);
        w.open = w.active;
        for wv in [&mut w.noninteractive, &mut w.inactive, &mut w.hovered, &mut w.active, &mut w.open] {
            wv.corner_radius = radius;
        }
        s.spacing.button_padding = egui::vec2(10.0, 5.0);
        s.spacing.item_spacing = egui::vec2(8.0, 6.0);
    });
}
