//! The in-game HUD, drawn with egui over the world: own HP, the boss bar with its phase
//! name, the escape channel, the death screen (its "Return to hub" button disabled for the
//! 3 s lockout), who is in the instance, portal names, and the network overlay.

use egui::{Align2, Color32, FontId, Pos2, Rect, Stroke, Vec2 as EVec2};

#[derive(Clone, Debug, Default)]
pub struct NetOverlay {
    pub ping_ms: f32,
    pub loss: f32,
    pub up_kbs: f32,
    pub down_kbs: f32,
    pub pred_err_px: f32,
    pub lead: i64,
    /// How the datagrams go ("direct", "through the relay"; None: this machine).
    pub route: Option<&'static str>,
}

#[derive(Clone, Debug, Default)]
pub struct HudState {
    pub hp: i32,
    pub max_hp: i32,
    pub dead: bool,
    /// Seconds left before "Return to hub" is allowed (0 once it is).
    pub lockout_left: f32,
    /// Escape channel progress, 0..1 (0 when not channelling).
    pub escape: f32,
    pub in_dungeon: bool,
    pub place: String,
    /// Boss name, phase name, HP fraction.
    pub boss: Option<(String, String, f32)>,
    /// Name, is it us, alive.
    pub roster: Vec<(String, bool, bool)>,
    pub net: Option<NetOverlay>,
    /// Portal labels in screen points, and whether the player stands in that portal.
    pub portals: Vec<PortalLabel>,
    /// Other players' names, over their ships (screen points).
    pub name_tags: Vec<(String, Pos2)>,
    pub banner: Option<String>,
    pub hint: Option<String>,
    /// A script's words for the players (a tutorial's lesson) and how much of it shows
    /// (1 full, fading to 0), the player's keys already filled in.
    pub lesson: Option<(String, f32)>,
    /// What the server said lately (operator's `say`, answers to admin commands).
    pub notices: Vec<String>,
    /// The server's name and message of the day (in the hub).
    pub server_line: Option<String>,
    /// The keys that leave after death ("F / B") and that enter a portal ("E / A").
    pub leave_key: String,
    pub interact_key: String,
    /// Damage numbers: text, where (screen points), age 0..1, taken by us (red) or dealt.
    pub damage: Vec<(String, Pos2, f32, bool)>,
    /// Health bars over wounded enemies: centre of the bar (screen points), width, HP fraction.
    pub health_bars: Vec<(Pos2, f32, f32)>,
    /// Downed: seconds left before out, and the revive's progress (0..1).
    pub downed: Option<(u32, f32)>,
    /// Out of the run: watching the others until it ends.
    pub out: bool,
    /// In a dungeon: flares held, graze charge toward the next, grazes, score.
    pub run: Option<crate::client::RunStatus>,
    /// The last run's summary, until dismissed.
    pub summary: Option<crate::sim::events::RunSummary>,
}

/// What the player asked for from the HUD.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HudAction {
    ReturnToHub,
    /// The run summary was read.
    DismissSummary,
}

/// The run summary, as players see it: outcome, time, team score, a row per player; for
/// a run the server stopped, the server's word why (`why`: its latest notice saying so).
pub fn summary(ctx: &egui::Context, sum: &crate::sim::events::RunSummary, place: &str, why: Option<&str>) -> bool {
    use crate::sim::events::RunOutcome;
    let mut done = false;
    let (title, colour) = match sum.outcome {
        RunOutcome::Cleared => ("Cleared!", Color32::from_rgb(255, 225, 120)),
        RunOutcome::Failed => ("Run failed", Color32::from_rgb(255, 120, 110)),
        RunOutcome::Abandoned => ("Run abandoned", Color32::from_rgb(200, 200, 210)),
        RunOutcome::Stopped => ("Run stopped by the server", Color32::from_rgb(255, 170, 90)),
    };
    let secs = sum.ticks as f32 / crate::sim::TICK_RATE as f32;
    egui::Window::new("run summary")
        .title_bar(false)
        .resizable(false)
        .collapsible(false)
        .anchor(Align2::CENTER_CENTER, EVec2::ZERO)
        .frame(egui::Frame::window(&ctx.global_style()).fill(Color32::from_rgba_unmultiplied(12, 14, 28, 240)))
        .show(ctx, |ui| {
            ui.set_min_width(560.0);
            ui.vertical_centered(|ui| {
                ui.label(egui::RichText::new(title).size(36.0).color(colour));
                ui.label(
                    egui::RichText::new(format!(
                        "{place} · {}:{:04.1} · team score {}",
                        (secs / 60.0) as u32,
                        secs % 60.0,
                        sum.team_score
                    ))
                    .size(18.0)
                    .color(Color32::from_gray(220)),
                );
                if let (RunOutcome::Stopped, Some(why)) = (sum.outcome, why) {
                    ui.label(egui::RichText::new(why).size(16.0).color(Color32::from_rgb(255, 200, 150)));
                }
            });
            ui.add_space(10.0);
            egui::Grid::new("rows").striped(true).spacing(EVec2::new(14.0, 6.0)).show(ui, |ui| {
                for h in ["Player", "Score", "Damage", "Kills", "Grazes", "Hits taken", "Downs", "Revives", "Flares"] {
                    ui.label(egui::RichText::new(h).strong().color(Color32::from_gray(190)));
                }
                ui.end_row();
                for r in &sum.rows {
                    let name = if r.out { format!("{} (out)", r.name) } else { r.name.clone() };
                    ui.label(egui::RichText::new(name).color(Color32::WHITE));
                    let st = &r.stats;
                    for v in
                        [r.score, st.damage, st.kills, st.grazes, st.hits_taken, st.downs, st.revives, st.flares_used]
                    {
                        ui.label(v.to_string());
                    }
                    ui.end_row();
                }
            });
            ui.add_space(12.0);
            ui.vertical_centered(|ui| {
                let b = ui.add(
                    egui::Button::new(egui::RichText::new("Continue").size(20.0)).min_size(EVec2::new(200.0, 38.0)),
                );
                if b.clicked() {
                    done = true;
                }
                ui.label(egui::RichText::new("Enter / A").size(13.0).color(Color32::from_gray(160)));
            });
            if ui.input(|i| i.key_pressed(egui::Key::Enter)) {
                done = true;
            }
        });
    done
}

fn bar(p: &egui::Painter, rect: Rect, frac: f32, fill: Color32) {
    p.rect_filled(rect, 3.0, Color32::from_rgba_unmultiplied(10, 12, 24, 220));
    let mut f = rect;
    f.set_width(rect.width() * frac.clamp(0.0, 1.0));
    p.rect_filled(f, 3.0, fill);
    p.rect_stroke(rect, 3.0, Stroke::new(1.0, Color32::from_gray(150)), egui::StrokeKind::Inside);
}

/// A hub portal's words over it: the place and records, where on screen, whether the own
/// ship stands in it, and how hard the place is (1..=5, drawn as pips; 0 none).
#[derive(Clone, Debug, Default)]
pub struct PortalLabel {
    pub text: String,
    pub at: Pos2,
    pub near: bool,
    pub difficulty: u8,
    /// The portal's arch on screen, points (the words go over it).
    pub radius: f32,
}

/// Where the network overlay goes (top left).
const NET_OVERLAY: Rect = Rect { min: Pos2::new(12.0, 12.0), max: Pos2::new(312.0, 70.0) };

pub fn draw(ctx: &egui::Context, hud: &HudState) -> Option<HudAction> {
    let mut action = None;
    let screen = ctx.content_rect();
    // Under every window and area (the pause menu, the death screen's button), over the world.
    let p = ctx.layer_painter(egui::LayerId::new(egui::Order::Background, egui::Id::unique("hud")));
    let text = Color32::from_rgb(225, 230, 245);
    // Portal names; standing in one, what to press to enter.
    // Portals close together on screen (a small window, a large interface size) get
    // narrower plates in smaller type, so that neighbours do not overlap.
    let spacing = |at: Pos2| {
        hud.portals.iter().map(|o| o.at).filter(|o| *o != at).map(|o| (o.x - at.x).abs()).fold(f32::INFINITY, f32::min)
    };
    for PortalLabel { text: name, at, near, difficulty, radius } in &hud.portals {
        let room = (spacing(*at) - 10.0).clamp(70.0, 130.0);
        let size = if room < 110.0 { 12.0 } else { 15.0 };
        // Pips just over the portal's arch, the plate over the pips.
        let mut top = at.y - radius.max(20.0) - 8.0;
        // On a dark plate, so the words read over any floor.
        let g = p.layout(name.clone(), FontId::proportional(size), text, room);
        let mut plate = Rect::from_center_size(
            egui::pos2(at.x, top - 10.0 - g.size().y / 2.0 - 4.0),
            g.size() + EVec2::new(14.0, 8.0),
        );
        // No room above (a portal near the top of the screen): under the arch instead.
        if plate.top() < screen.top() + 2.0 {
            top = at.y + radius.max(20.0) + 8.0;
            plate = plate.translate(EVec2::new(0.0, top + 10.0 - plate.top()));
        }
        p.rect_filled(plate, 4.0, Color32::from_rgba_unmultiplied(6, 6, 14, 190));
        p.galley(plate.min + EVec2::new(7.0, 4.0), g, text);
        // Difficulty: five pips under the plate, as many lit as the place is hard.
        if *difficulty > 0 {
            for k in 0..5u8 {
                let c = egui::pos2(at.x + (k as f32 - 2.0) * 11.0, top);
                if k < *difficulty {
                    p.circle_filled(c, 3.6, Color32::from_rgb(255, 170, 70));
                } else {
                    p.circle_stroke(c, 3.2, Stroke::new(1.0, Color32::from_gray(140)));
                }
            }
        }
        if *near && !hud.interact_key.is_empty() {
            let name = name.lines().next().unwrap_or_default();
            let prompt = format!("{}: enter {name}", hud.interact_key);
            let g = p.layout_no_wrap(prompt, FontId::proportional(17.0), Color32::from_rgb(255, 240, 170));
            // Just under the arch, where the ship stands: above, it would cover the next
            // portal's words when portals stand close.
            let y = at.y + radius.max(20.0) + 8.0 + g.size().y / 2.0;
            let r = Rect::from_center_size(egui::pos2(at.x, y), g.size() + EVec2::new(14.0, 8.0));
            p.rect_filled(r, 4.0, Color32::from_rgba_unmultiplied(0, 0, 0, 190));
            p.galley(r.min + EVec2::new(7.0, 4.0), g, Color32::WHITE);
        }
    }
    for (name, at) in &hud.name_tags {
        p.text(
            *at + EVec2::new(0.0, -18.0),
            Align2::CENTER_BOTTOM,
            name,
            FontId::proportional(13.0),
            Color32::from_gray(215),
        );
    }
    for (at, w, frac) in &hud.health_bars {
        let r = Rect::from_center_size(*at, EVec2::new(*w, 5.0));
        p.rect_filled(r.expand(1.0), 2.0, Color32::from_rgba_unmultiplied(0, 0, 0, 200));
        let mut f = r;
        f.set_width(r.width() * frac.clamp(0.0, 1.0));
        p.rect_filled(f, 2.0, Color32::from_rgb(240, 90, 80));
    }
    // Damage numbers rise and fade. Damage taken is white on a red pill (it must read on
    // any floor and over any bullets); damage dealt is light text with a dark outline.
    for (text, at, age, taken) in &hud.damage {
        let a = ((1.0 - age) * 255.0).clamp(0.0, 255.0) as u8;
        let at = *at + EVec2::new(0.0, -14.0 - 34.0 * age);
        if *taken {
            let g = p.layout_no_wrap(
                text.clone(),
                FontId::proportional(19.0),
                Color32::from_rgba_unmultiplied(255, 255, 255, a),
            );
            let r = Rect::from_center_size(at - EVec2::new(0.0, g.size().y / 2.0), g.size() + EVec2::new(12.0, 4.0));
            p.rect_filled(r, 8.0, Color32::from_rgba_unmultiplied(190, 30, 45, (a as f32 * 0.9) as u8));
            p.rect_stroke(
                r,
                8.0,
                egui::Stroke::new(1.0, Color32::from_rgba_unmultiplied(255, 190, 190, a)),
                egui::StrokeKind::Inside,
            );
            p.galley(r.min + EVec2::new(6.0, 2.0), g, Color32::WHITE);
        } else {
            let col = Color32::from_rgba_unmultiplied(255, 240, 200, a);
            let shadow = Color32::from_rgba_unmultiplied(0, 0, 0, a);
            for d in [EVec2::new(1.0, 1.0), EVec2::new(-1.0, 1.0), EVec2::new(1.0, -1.0), EVec2::new(-1.0, -1.0)] {
                p.text(at + d, Align2::CENTER_BOTTOM, text, FontId::proportional(14.0), shadow);
            }
            p.text(at, Align2::CENTER_BOTTOM, text, FontId::proportional(14.0), col);
        }
    }
    // Own HP, bottom left.
    let hp_rect = Rect::from_min_size(Pos2::new(16.0, screen.bottom() - 40.0), EVec2::new(260.0, 22.0));
    let frac = hud.hp as f32 / hud.max_hp.max(1) as f32;
    let col = if frac > 0.5 {
        Color32::from_rgb(70, 210, 120)
    } else if frac > 0.25 {
        Color32::from_rgb(230, 190, 60)
    } else {
        Color32::from_rgb(230, 70, 70)
    };
    bar(&p, hp_rect, frac, col);
    p.text(
        hp_rect.center(),
        Align2::CENTER_CENTER,
        format!("HP {} / {}", hud.hp.max(0), hud.max_hp),
        FontId::proportional(14.0),
        Color32::WHITE,
    );
    p.text(Pos2::new(16.0, screen.bottom() - 48.0), Align2::LEFT_BOTTOM, &hud.place, FontId::proportional(15.0), text);
    // Flares, graze charge and score, bottom right.
    if let Some(r) = &hud.run {
        let x = screen.right() - 16.0;
        let y = screen.bottom() - 20.0;
        for k in 0..crate::sim::config::MAX_FLARES {
            let c = Pos2::new(x - 12.0 - k as f32 * 28.0, y - 10.0);
            if k < r.flares {
                p.circle_filled(c, 10.0, Color32::from_rgb(255, 220, 120));
                p.circle_stroke(c, 12.0, Stroke::new(2.0, Color32::from_rgb(255, 160, 60)));
            } else {
                p.circle_stroke(c, 10.0, Stroke::new(1.5, Color32::from_gray(110)));
            }
        }
        let charge = r.charge as f32 / crate::sim::config::GRAZES_PER_FLARE as f32;
        let cr = Rect::from_min_size(Pos2::new(x - 140.0, y - 34.0), EVec2::new(140.0, 6.0));
        bar(&p, cr, charge, Color32::from_rgb(140, 220, 255));
        p.text(
            Pos2::new(x, y - 40.0),
            Align2::RIGHT_BOTTOM,
            format!("grazes {}   score {}", r.grazes, r.score),
            FontId::proportional(14.0),
            text,
        );
    }
    // Boss bar, top centre.
    if let Some((name, phase, f)) = &hud.boss {
        let w = (screen.width() * 0.6).min(720.0);
        // Under the network overlay when the screen is too narrow for both side by side (a
        // large interface size).
        let left = screen.center().x - w / 2.0;
        let below =
            NET_OVERLAY.bottom() + 26.0 + if hud.net.as_ref().is_some_and(|n| n.route.is_some()) { 16.0 } else { 0.0 };
        let y = if hud.net.is_some() && left < NET_OVERLAY.right() + 8.0 { below } else { 30.0 };
        let r = Rect::from_min_size(Pos2::new(left, y), EVec2::new(w, 16.0));
        bar(&p, r, *f, Color32::from_rgb(190, 80, 255));
        p.text(
            r.center_top() - EVec2::new(0.0, 4.0),
            Align2::CENTER_BOTTOM,
            format!("{name} — {phase}"),
            FontId::proportional(16.0),
            text,
        );
    }
    // Roster, top right.
    let mut y = 60.0;
    p.text(
        Pos2::new(screen.right() - 16.0, y),
        Align2::RIGHT_TOP,
        "In this place",
        FontId::proportional(13.0),
        Color32::from_gray(160),
    );
    for (name, own, alive) in &hud.roster {
        y += 18.0;
        let c = if !alive {
            Color32::from_gray(110)
        } else if *own {
            Color32::from_rgb(170, 255, 255)
        } else {
            text
        };
        p.text(Pos2::new(screen.right() - 16.0, y), Align2::RIGHT_TOP, name, FontId::proportional(14.0), c);
    }
    if let Some(n) = &hud.net {
        let lines = format!(
            "ping {:.0} ms   loss {:.1} %\nup {:.2} KB/s   down {:.2} KB/s\nprediction error {:.2} px   lead {}",
            n.ping_ms,
            n.loss * 100.0,
            n.up_kbs,
            n.down_kbs,
            n.pred_err_px,
            n.lead
        );
        let lines = match n.route {
            Some(r) => format!("{lines}\nroute: {r}"),
            None => lines,
        };
        let mut r = NET_OVERLAY;
        if n.route.is_some() {
            r.max.y += 16.0;
        }
        p.rect_filled(r, 4.0, Color32::from_rgba_unmultiplied(0, 0, 0, 170));
        p.text(
            r.min + EVec2::new(8.0, 6.0),
            Align2::LEFT_TOP,
            lines,
            FontId::monospace(12.0),
            Color32::from_rgb(160, 255, 160),
        );
    }
    if let Some(l) = &hud.server_line {
        p.text(
            Pos2::new(screen.center().x, 14.0),
            Align2::CENTER_TOP,
            l,
            FontId::proportional(16.0),
            Color32::from_rgb(200, 215, 255),
        );
    }
    // Server notices, bottom left above the HP bar, newest lowest.
    let mut ny = screen.bottom() - 76.0;
    let mut notes_right: f32 = 0.0;
    // (A stopped fight's notice is in the summary while it is up.)
    let in_summary = |n: &String| hud.summary.is_some() && n.starts_with(crate::protocol::STOPPED_NOTICE);
    for n in hud.notices.iter().rev().filter(|n| !in_summary(n)) {
        let g = p.layout_no_wrap(n.clone(), FontId::proportional(15.0), Color32::from_rgb(255, 235, 170));
        let r = Rect::from_min_size(Pos2::new(12.0, ny - g.size().y - 4.0), g.size() + EVec2::new(12.0, 6.0));
        p.rect_filled(r, 4.0, Color32::from_rgba_unmultiplied(0, 0, 0, 170));
        p.galley(r.min + EVec2::new(6.0, 3.0), g, Color32::WHITE);
        ny = r.top() - 4.0;
        notes_right = notes_right.max(r.right());
    }
    // Escape channel.
    if hud.escape > 0.0 && !hud.dead {
        let mut r =
            Rect::from_center_size(Pos2::new(screen.center().x, screen.bottom() - 90.0), EVec2::new(240.0, 14.0));
        // Above the notices when they reach under it (a narrow screen).
        if notes_right > r.left() && ny < r.bottom() + 20.0 {
            r = r.translate(EVec2::new(0.0, ny - 8.0 - r.bottom()));
        }
        bar(&p, r, hud.escape, Color32::from_rgb(120, 180, 255));
        p.text(
            r.center_top() - EVec2::new(0.0, 4.0),
            Align2::CENTER_BOTTOM,
            "Escaping to the hub… (you can still be hit)",
            FontId::proportional(14.0),
            text,
        );
    }
    if let Some(b) = &hud.banner {
        p.text(
            screen.center() - EVec2::new(0.0, 120.0),
            Align2::CENTER_CENTER,
            b,
            FontId::proportional(34.0),
            Color32::from_rgb(255, 230, 140),
        );
    }
    // A lesson: large, on a see-through plate at the top (under the boss bar when there
    // is one), where it hides the least of the fight.
    if let Some((text, a)) = &hud.lesson {
        let a = a.clamp(0.0, 1.0);
        let g = p.layout(
            text.clone(),
            FontId::proportional(21.0),
            Color32::from_rgba_unmultiplied(255, 244, 200, (255.0 * a) as u8),
            (screen.width() - 40.0).min(720.0),
        );
        let top = if hud.boss.is_some() { 86.0 } else { 44.0 };
        let r = Rect::from_min_size(
            Pos2::new(screen.center().x - g.size().x / 2.0 - 14.0, top),
            g.size() + EVec2::new(28.0, 16.0),
        );
        p.rect_filled(r, 8.0, Color32::from_rgba_unmultiplied(10, 8, 24, (165.0 * a) as u8));
        p.rect_stroke(
            r,
            8.0,
            Stroke::new(1.5, Color32::from_rgba_unmultiplied(255, 120, 150, (200.0 * a) as u8)),
            egui::StrokeKind::Inside,
        );
        p.galley(r.min + EVec2::new(14.0, 8.0), g, Color32::WHITE);
    }
    if let Some(h) = &hud.hint {
        p.text(
            Pos2::new(screen.center().x, screen.bottom() - 16.0),
            Align2::CENTER_BOTTOM,
            h,
            FontId::proportional(13.0),
            Color32::from_gray(170),
        );
    }
    if let (true, Some((secs, k))) = (hud.dead, hud.downed) {
        p.rect_filled(screen, 0.0, Color32::from_rgba_unmultiplied(40, 20, 0, 90));
        p.text(
            Pos2::new(screen.center().x, 84.0),
            Align2::CENTER_TOP,
            format!("Downed: {secs} s for a teammate to reach you"),
            FontId::proportional(26.0),
            Color32::from_rgb(255, 190, 100),
        );
        if k > 0.0 {
            let r = Rect::from_center_size(Pos2::new(screen.center().x, 132.0), EVec2::new(260.0, 14.0));
            bar(&p, r, k, Color32::from_rgb(120, 240, 150));
            p.text(
                r.center_bottom() + EVec2::new(0.0, 6.0),
                Align2::CENTER_TOP,
                "Reviving…",
                FontId::proportional(14.0),
                text,
            );
        }
    } else if hud.dead && hud.out && hud.summary.is_none() {
        let mut text = "Out: watching the others until the run ends".to_string();
        if !hud.leave_key.is_empty() && hud.lockout_left <= 0.0 {
            text = format!("{text}\nhold {} to leave for the hub", hud.leave_key);
        }
        let g = p.layout(text, FontId::proportional(20.0), Color32::from_rgb(225, 225, 240), 600.0);
        let r = Rect::from_center_size(Pos2::new(screen.center().x, 96.0), g.size() + EVec2::new(24.0, 12.0));
        p.rect_filled(r, 6.0, Color32::from_rgba_unmultiplied(0, 0, 0, 190));
        p.galley(r.min + EVec2::new(12.0, 6.0), g, Color32::WHITE);
    } else if hud.dead && hud.summary.is_none() {
        p.rect_filled(screen, 0.0, Color32::from_rgba_unmultiplied(40, 0, 0, 140));
        egui::Area::new(egui::Id::unique("death")).anchor(Align2::CENTER_CENTER, EVec2::ZERO).show(ctx, |ui| {
            ui.vertical_centered(|ui| {
                ui.label(egui::RichText::new("You died").size(40.0).color(Color32::from_rgb(255, 120, 110)));
                ui.add_space(12.0);
                let ready = hud.lockout_left <= 0.0;
                let label = if ready {
                    "Return to hub".to_string()
                } else {
                    format!("Return to hub ({:.1} s)", hud.lockout_left)
                };
                let b = ui.add_enabled(
                    ready,
                    egui::Button::new(egui::RichText::new(label).size(20.0)).min_size(EVec2::new(220.0, 40.0)),
                );
                // Never focused: a focused button would be pressed by Space (fire) and would
                // swallow the leave key. The leave key (F / B) works by itself.
                if b.clicked() {
                    action = Some(HudAction::ReturnToHub);
                }
                if !hud.leave_key.is_empty() {
                    ui.label(
                        egui::RichText::new(format!("or hold {}", hud.leave_key))
                            .size(16.0)
                            .color(Color32::from_gray(200)),
                    );
                }
            });
        });
    }
    if let Some(sum) = &hud.summary {
        let why = hud.notices.iter().rev().find(|n| n.starts_with(crate::protocol::STOPPED_NOTICE)).map(String::as_str);
        if summary(ctx, sum, &hud.place, why) {
            action = Some(HudAction::DismissSummary);
        }
    }
    action
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(ctx: &egui::Context, hud: &HudState, events: Vec<egui::Event>) -> Option<HudAction> {
        let raw = egui::RawInput {
            screen_rect: Some(Rect::from_min_size(Pos2::ZERO, EVec2::new(1280.0, 720.0))),
            events,
            ..Default::default()
        };
        let mut action = None;
        let mut out = ctx.run_ui(raw, |ui| action = draw(ui.ctx(), hud));
        out.textures_delta.clear();
        action
    }

    fn key(k: egui::Key, pressed: bool) -> egui::Event {
        egui::Event::Key { key: k, physical_key: None, pressed, repeat: false, modifiers: Default::default() }
    }

    /// Holding fire (Space) on the death screen must not press "Return to hub": the
    /// button never takes keyboard focus (the leave key works through the game's input).
    #[test]
    fn fire_does_not_press_return_to_hub_on_the_death_screen() {
        let ctx = egui::Context::default();
        let hud =
            HudState { dead: true, lockout_left: 0.0, max_hp: 100, leave_key: "F / B".into(), ..Default::default() };
        for _ in 0..3 {
            assert_eq!(frame(&ctx, &hud, Vec::new()), None);
        }
        for _ in 0..3 {
            let got = frame(&ctx, &hud, vec![key(egui::Key::Space, true), key(egui::Key::Space, false)]);
            assert_eq!(got, None, "Space clicked the death screen's button");
            let got = frame(&ctx, &hud, vec![key(egui::Key::Enter, true), key(egui::Key::Enter, false)]);
            assert_eq!(got, None, "Enter clicked the death screen's button");
        }
        assert!(ctx.memory(|m| m.focused().is_none()), "nothing on the death screen holds the keyboard");
    }
}
