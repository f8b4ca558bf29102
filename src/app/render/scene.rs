//! Turns what the client knows into sprites: the CPU half of a frame. Kept free of GPU
//! types so it can be measured on its own (`hailfire bench` reports it at 10,000 bullets).

use bytemuck::{Pod, Zeroable};

use crate::protocol::messages::{SnapBoss, SnapEnemy, SnapPlayer, F_DEAD, F_DOWNED, F_FOCUS, F_SPAWN_GRACE};
use crate::sim::defs::Shape;
use crate::sim::{BulletPool, ClientDefs, Team, Vec2};

/// One instance of the sprite shader (48 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable, PartialEq)]
pub struct Sprite {
    pub pos: [f32; 2],
    /// Half extents, world px.
    pub size: [f32; 2],
    /// Facing (need not be normalized; zero means +x).
    pub dir: [f32; 2],
    /// Linear RGBA.
    pub color: [f32; 4],
    /// shape, glow, core, and a fourth by shape: bullets clipped to the arena, 1 enemy
    /// bullets (outlined when asked), 2 players' shots;
    /// enemies and bosses the white hit flash (0..1), ships the red one (0..-1).
    pub params: [f32; 4],
}

pub const SH_ORB: f32 = 0.0;
pub const SH_RICE: f32 = 1.0;
pub const SH_STAR: f32 = 2.0;
pub const SH_DIAMOND: f32 = 3.0;
pub const SH_RING: f32 = 4.0;
pub const SH_SHIP: f32 = 5.0;
pub const SH_SHIELD: f32 = 6.0;
pub const SH_ENEMY: f32 = 7.0;
pub const SH_RECT: f32 = 8.0;
pub const SH_FRAME: f32 = 9.0;
pub const SH_PORTAL: f32 = 10.0;
pub const SH_BOSS: f32 = 11.0;
/// A place's floor pattern over the arena (params: backdrop code, cell size; `dir.x` the
/// speed), drawn in the theme's accent colour.
pub const SH_BACKDROP: f32 = 12.0;
/// Darkens the arena toward its edges.
pub const SH_VIGNETTE: f32 = 13.0;
/// How big a portal is drawn: a third larger than the circle that takes a player in, an
/// arch to see from across the hub.
pub fn portal_arch(portal_radius: f32) -> f32 {
    portal_radius * 1.35
}

/// A flat disc (a portal's window).
pub const SH_DISC: f32 = 15.0;
/// A script's telegraph line: a thin beam that fills from its start as the attack nears
/// (params.z: how far through, 0..1).
pub const SH_TELEGRAPH: f32 = 14.0;
/// Bodies: `SH_BODY + shape code` (`BodyShape::code`); params.z = parts + 16 x boss phase,
/// `dir` turns the body.
pub const SH_BODY: f32 = 16.0;
/// A mod's sprite from the atlas (params.z: its index; w: the hit flash as for bodies),
/// and the same for a bullet (w: as for bullets, so it is clipped to the arena).
pub const SH_IMAGE: f32 = 64.0;
pub const SH_IMAGE_BULLET: f32 = 65.0;

/// Where the view looks.
#[derive(Clone, Copy, Debug)]
pub struct Camera {
    pub origin: Vec2,
    pub scale: f32,
    pub time: f32,
    /// The arena's size: bullets are clipped to it.
    pub arena: Vec2,
    /// Accessibility: how strongly enemy bullets are outlined (0 off, 1 on).
    pub outline: f32,
    /// The glow (bloom) pass's strength: 0 skips it ("Low effects").
    pub bloom: f32,
}

/// The bloom strength the game draws with when effects are on.
pub const BLOOM: f32 = 1.0;

impl Camera {
    /// Fits an arena in a framebuffer with a margin, centred.
    pub fn fit(arena: Vec2, screen: (u32, u32), time: f32) -> Camera {
        let (w, h) = (screen.0.max(1) as f32, screen.1.max(1) as f32);
        let margin = 48.0;
        let scale = (w / (arena.x + margin * 2.0)).min(h / (arena.y + margin * 2.0));
        let origin = Vec2::new(arena.x / 2.0 - w / scale / 2.0, arena.y / 2.0 - h / scale / 2.0);
        Camera { origin, scale, time, arena, outline: 0.0, bloom: BLOOM }
    }

    pub fn world_to_screen(&self, p: Vec2) -> Vec2 {
        (p - self.origin) * self.scale
    }

    pub fn screen_to_world(&self, s: Vec2) -> Vec2 {
        s * (1.0 / self.scale) + self.origin
    }
}

/// A linear colour moved `by` (0..1) toward white.
pub fn lighten(c: [f32; 4], by: f32) -> [f32; 4] {
    [c[0] + (1.0 - c[0]) * by, c[1] + (1.0 - c[1]) * by, c[2] + (1.0 - c[2]) * by, c[3]]
}

/// An sRGB byte colour as linear RGBA.
pub fn rgb_color(c: [u8; 3]) -> [f32; 4] {
    let l = |x: u8| (x as f32 / 255.0).powf(2.2);
    [l(c[0]), l(c[1]), l(c[2]), 1.0]
}

/// Per-kind drawing data, looked up by index while building a frame.
#[derive(Clone, Debug, Default)]
pub struct Palette {
    pub kinds: Vec<([f32; 4], f32)>,
    pub enemies: Vec<[f32; 4]>,
    pub bosses: Vec<[f32; 4]>,
    /// Bodies by definition index.
    pub enemy_bodies: Vec<crate::sim::defs::BodyDef>,
    pub boss_bodies: Vec<crate::sim::defs::BodyDef>,
    /// Ships by index (a player's ship comes with the roster).
    pub ship_bodies: Vec<crate::sim::defs::BodyDef>,
    /// By bullet kind, enemy, boss and ship: the atlas sprite drawn instead of the shape
    /// or body, and its half extents as a fraction of the radius (its aspect).
    pub kind_sprites: Vec<Option<(u16, [f32; 2])>>,
    pub enemy_sprites: Vec<Option<(u16, [f32; 2])>>,
    pub boss_sprites: Vec<Option<(u16, [f32; 2])>>,
    pub ship_sprites: Vec<Option<(u16, [f32; 2])>>,
}

/// The colour-blind friendly bullet palette: the Okabe-Ito colours, chosen to stay
/// distinct with deuteranopia and protanopia (red-green colour blindness), two of them
/// brightened to read on the dark arena.
pub const CVD_SAFE: [[u8; 3]; 7] = [
    [230, 159, 0],   // orange
    [86, 180, 233],  // sky blue
    [20, 190, 140],  // bluish green (brightened)
    [240, 228, 66],  // yellow
    [70, 120, 240],  // blue (brightened, still well apart from sky blue)
    [213, 94, 0],    // vermilion
    [204, 121, 167], // reddish purple
];

/// The players' shots in the colour-blind palette: pale, nearly white, unlike every colour
/// of [`CVD_SAFE`] (and drawn translucent, as always).
pub const CVD_PLAYER_SHOT: [u8; 3] = [205, 228, 255];

/// Hue in degrees, or None for greys and whites.
fn hue(c: [u8; 3]) -> Option<f32> {
    let [r, g, b] = c.map(|v| v as f32 / 255.0);
    let (max, min) = (r.max(g).max(b), r.min(g).min(b));
    let d = max - min;
    if d < 0.12 {
        return None;
    }
    Some(if max == r {
        60.0 * ((g - b) / d).rem_euclid(6.0)
    } else if max == g {
        60.0 * ((b - r) / d + 2.0)
    } else {
        60.0 * ((r - g) / d + 4.0)
    })
}

fn hue_distance(a: f32, b: f32) -> f32 {
    let d = (a - b).abs() % 360.0;
    d.min(360.0 - d)
}

/// Moves every bullet colour to the colour-blind friendly palette, keeping kinds apart:
/// the closest pairs by hue are matched first, each palette colour used once while
/// there are colours left (up to seven kinds stay pairwise distinct; beyond, a kind
/// shares the colour nearest its hue). Greys and whites stay as they are.
pub fn colour_blind(colors: &[[u8; 3]]) -> Vec<[u8; 3]> {
    let targets: Vec<f32> = CVD_SAFE.iter().map(|c| hue(*c).unwrap_or(0.0)).collect();
    let mut out = colors.to_vec();
    let mut todo: Vec<(usize, f32)> = colors.iter().enumerate().filter_map(|(i, c)| Some((i, hue(*c)?))).collect();
    let mut used = [false; CVD_SAFE.len()];
    while !todo.is_empty() {
        let free = used.iter().any(|u| !u);
        let mut best: Option<(f32, usize, usize)> = None;
        for (k, &(_, h)) in todo.iter().enumerate() {
            for (t, th) in targets.iter().enumerate() {
                if free && used[t] {
                    continue;
                }
                let d = hue_distance(h, *th);
                if best.is_none_or(|(bd, _, _)| d < bd) {
                    best = Some((d, k, t));
                }
            }
        }
        let Some((_, k, t)) = best else { break };
        used[t] = true;
        out[todo[k].0] = CVD_SAFE[t];
        todo.remove(k);
    }
    out
}

impl Palette {
    /// The palette with bullets in colour-blind friendly colours when `colour_blind`.
    pub fn with(defs: &ClientDefs, colour_blind_bullets: bool) -> Self {
        let mut p = Palette::new(defs);
        if colour_blind_bullets {
            // The enemy kinds share out the colour-blind colours; the players' shots keep
            // one of their own, a pale blue-white no enemy kind gets (so they are never
            // taken for what can hurt you).
            let player = |b: &crate::sim::client_defs::BulletLook| b.id == crate::sim::config::DEFAULT_PLAYER_BULLET;
            let enemy: Vec<usize> = (0..defs.bullets.len()).filter(|k| !player(&defs.bullets[*k])).collect();
            let colors: Vec<[u8; 3]> = enemy.iter().map(|k| defs.bullets[*k].color).collect();
            for (k, c) in enemy.iter().zip(colour_blind(&colors)) {
                p.kinds[*k].0 = rgb_color(c);
            }
            for (k, b) in defs.bullets.iter().enumerate() {
                if player(b) {
                    p.kinds[k].0 = rgb_color(CVD_PLAYER_SHOT);
                }
            }
        }
        p
    }

    pub fn new(defs: &ClientDefs) -> Self {
        let shape = |s: Shape| match s {
            Shape::Orb => SH_ORB,
            Shape::Rice => SH_RICE,
            Shape::Star => SH_STAR,
            Shape::Diamond => SH_DIAMOND,
            Shape::Ring => SH_RING,
        };
        // Each sprite's aspect, from its PNG header (the validator has decoded it whole).
        let aspect: Vec<[f32; 2]> = defs
            .sprites
            .iter()
            .map(|a| {
                let (w, h) = crate::media::png_size(&a.bytes).unwrap_or((1, 1));
                let m = w.max(h).max(1) as f32;
                [w as f32 / m, h as f32 / m]
            })
            .collect();
        let sprite = |i: Option<u16>| i.and_then(|i| aspect.get(i as usize).map(|a| (i, *a)));
        Palette {
            kind_sprites: defs.bullets.iter().map(|b| sprite(b.sprite)).collect(),
            enemy_sprites: defs.enemies.iter().map(|e| sprite(e.sprite)).collect(),
            boss_sprites: defs.bosses.iter().map(|b| sprite(b.sprite)).collect(),
            ship_sprites: defs.ships.iter().map(|sh| sprite(sh.sprite)).collect(),
            kinds: defs.bullets.iter().map(|b| (rgb_color(b.color), shape(b.shape))).collect(),
            enemies: defs.enemies.iter().map(|e| rgb_color(e.color)).collect(),
            bosses: defs.bosses.iter().map(|b| rgb_color(b.color)).collect(),
            enemy_bodies: defs.enemies.iter().map(|e| e.body).collect(),
            boss_bodies: defs.bosses.iter().map(|b| b.body).collect(),
            ship_bodies: defs.ships.iter().map(|s| s.body).collect(),
        }
    }
}

/// A player's colour: the local ship is white-cyan, others get a stable hue from their id.
pub fn player_color(id: u32, own: bool) -> [f32; 4] {
    if own {
        return [0.75, 1.0, 1.0, 1.0];
    }
    let hues = [[1.0, 0.55, 0.2, 1.0], [0.5, 1.0, 0.35, 1.0], [1.0, 0.4, 0.85, 1.0], [0.95, 0.9, 0.3, 1.0]];
    hues[id as usize % hues.len()]
}

/// Everything a frame of the world shows.
pub struct WorldView<'a> {
    pub arena: Vec2,
    pub bullets: &'a BulletPool,
    /// Fraction of the way to the next tick, for drawing bullets between ticks.
    pub alpha: f32,
    pub players: &'a [SnapPlayer],
    pub own_id: Option<u32>,
    /// The local player's predicted position (drawn instead of the snapshot's).
    pub own_pos: Option<Vec2>,
    /// The local player's own aim (degrees), drawn instead of the server's echo of it.
    pub own_aim: Option<f32>,
    pub enemies: &'a [SnapEnemy],
    pub enemy_radius: &'a [f32],
    pub boss: Option<SnapBoss>,
    pub boss_radius: &'a [f32],
    /// Hub portals: name, position, and the look of the place each leads to (a portal is
    /// a window onto its dungeon's floor, framed in its accent colour).
    pub portals: &'a [(String, Vec2, crate::sim::defs::ThemeDef)],
    pub portal_radius: f32,
    /// Who was hit lately, and how much white to flash them with (0..1).
    pub flashes: &'a [(crate::protocol::WireTarget, f32)],
    /// Death bursts in progress.
    pub bursts: &'a [DeathBurst],
    /// Flares going off: where, and how far along (0..1).
    pub flares: &'a [(Vec2, f32)],
    /// How the place looks (its floor).
    pub theme: &'a crate::sim::defs::ThemeDef,
    /// Scripts' warnings before attacks, and how far through each is (0..1).
    pub telegraphs: &'a [(crate::sim::script::Telegraph, f32)],
    /// Seconds, for bodies' turning parts.
    pub time: f32,
    /// Particles: sparks from hits, grazes and flares.
    pub sparks: &'a [Spark],
    /// The ship each player flies (player id, ship index); a player not listed flies the
    /// first.
    pub ships: &'a [(u32, u16)],
}

/// A spark: a short streak flying out from a hit, a graze or a flare (drawn by the client
/// only; a flat streak, so it never reads as a bullet).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Spark {
    pub pos: Vec2,
    /// Its velocity, px a second.
    pub vel: Vec2,
    pub color: [f32; 4],
    /// 0 new .. 1 gone.
    pub age: f32,
}

/// How long a spark lives, seconds.
pub const SPARK_SECONDS: f32 = 0.3;

/// `n` sparks flying out of `at` in `color`, turned by `seed` (so two bursts differ).
pub fn spark_burst(at: Vec2, n: usize, speed: f32, color: [f32; 4], seed: u32) -> impl Iterator<Item = Spark> {
    (0..n).map(move |k| {
        let h = (seed.wrapping_mul(2_654_435_761).wrapping_add(k as u32 * 40_503)) >> 8;
        let jitter = (h & 0xff) as f32 / 255.0;
        let a = (k as f32 + jitter) / n as f32 * std::f32::consts::TAU;
        let v = speed * (0.6 + 0.8 * ((h >> 8) & 0xff) as f32 / 255.0);
        Spark { pos: at, vel: Vec2::new(a.cos(), a.sin()) * v, color, age: 0.0 }
    })
}

/// A short burst where something died (drawn by the client only; no gameplay).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DeathBurst {
    pub pos: Vec2,
    pub color: [f32; 4],
    /// Size of what died, px.
    pub size: f32,
    /// 0 at the death, 1 when the burst is gone.
    pub age: f32,
}

/// How long a death burst lasts, and a hit flash, in seconds.
pub const BURST_SECONDS: f32 = 0.6;
pub const FLASH_SECONDS: f32 = 0.12;

fn flash_of(view: &WorldView, t: crate::protocol::WireTarget) -> f32 {
    view.flashes.iter().find(|(w, _)| *w == t).map_or(0.0, |(_, f)| *f)
}

/// The player's display settings on a built frame: `low_effects` drops every glow and the
/// floor's pattern (fewer pixels to shade: faster on software rendering); `outline` drops the glow of enemy
/// bullets so that their outline (drawn by the shader) stays crisp.
pub fn apply_look(out: &mut Vec<Sprite>, low_effects: bool, outline: bool) {
    // Low effects: the floor is its plain colour (no pattern, no vignette to shade).
    if low_effects {
        out.retain(|s| s.params[0] != SH_BACKDROP && s.params[0] != SH_VIGNETTE);
    }
    for s in out.iter_mut() {
        if low_effects || (outline && s.params[0] <= SH_RING && s.params[3] == 1.0) {
            s.params[1] = 0.0;
        }
    }
}

/// The flat look the game had before themes (kept as the reference `bench --render`
/// measures the effects against): a plain floor, bodies as shaded discs, and no glow pass
/// (draw it with `Camera::bloom` 0).
pub fn flat_reference(sprites: &[Sprite]) -> Vec<Sprite> {
    sprites
        .iter()
        .filter(|s| s.params[0] != SH_BACKDROP && s.params[0] != SH_VIGNETTE && s.params[0] != SH_TELEGRAPH)
        .map(|s| {
            let mut s = *s;
            if s.params[0] >= SH_BODY && s.params[0] < SH_IMAGE {
                s.params[0] = SH_ENEMY;
                s.params[2] = 0.0;
                s.dir = [0.0, 0.0];
            }
            s
        })
        .collect()
}

/// Builds the frame's sprites into `out` (cleared first). Bullets go last so they are on
/// top of everything: what can kill you is never hidden.
pub fn build(view: &WorldView, palette: &Palette, out: &mut Vec<Sprite>) {
    out.clear();
    out.reserve(view.bullets.len() + 64);
    let a = view.arena;
    let theme = view.theme;
    let parse = crate::sim::client_defs::parse_color;
    // The floor: its colour, its pattern in the accent colour, and a vignette.
    out.push(Sprite {
        pos: [a.x / 2.0, a.y / 2.0],
        size: [a.x / 2.0, a.y / 2.0],
        color: rgb_color(parse(&theme.base)),
        params: [SH_RECT, 0.0, 0.0, 0.0],
        ..Default::default()
    });
    out.push(Sprite {
        pos: [a.x / 2.0, a.y / 2.0],
        size: [a.x / 2.0, a.y / 2.0],
        dir: [theme.speed.max(1e-3), 0.0],
        color: rgb_color(parse(&theme.accent)),
        params: [SH_BACKDROP, 0.0, theme.background.code() as f32, theme.scale],
    });
    out.push(Sprite {
        pos: [a.x / 2.0, a.y / 2.0],
        size: [a.x / 2.0, a.y / 2.0],
        color: [0.0, 0.0, 0.0, 0.55],
        params: [SH_VIGNETTE, 0.0, 0.0, 0.0],
        ..Default::default()
    });
    out.push(Sprite {
        pos: [a.x / 2.0, a.y / 2.0],
        size: [a.x / 2.0 + 3.0, a.y / 2.0 + 3.0],
        color: lighten(
            rgb_color(parse(&theme.accent)),
            if theme.wall == crate::sim::defs::Wall::Glow { 0.55 } else { 0.3 },
        ),
        // The wall's style in z; a glowing wall gets a halo.
        params: [
            SH_FRAME,
            if theme.wall == crate::sim::defs::Wall::Glow { 0.02 } else { 0.0 },
            theme.wall.code() as f32,
            0.0,
        ],
        ..Default::default()
    });
    for (_, p, look) in view.portals {
        let r = portal_arch(view.portal_radius);
        let accent = rgb_color(parse(&look.accent));
        // The window: the place's floor, its pattern (scaled down to show a few cells),
        // then the turning frame.
        out.push(Sprite {
            pos: [p.x, p.y],
            size: [r * 0.9, r * 0.9],
            color: rgb_color(parse(&look.base)),
            params: [SH_DISC, 0.0, 0.0, 0.0],
            ..Default::default()
        });
        out.push(Sprite {
            pos: [p.x, p.y],
            size: [r * 0.9, r * 0.9],
            dir: [look.speed.max(1e-3), 0.0],
            color: lighten(accent, 0.25),
            params: [SH_BACKDROP, 1.0, look.background.code() as f32, (look.scale * 0.35).max(6.0)],
        });
        out.push(Sprite {
            pos: [p.x, p.y],
            size: [r, r],
            color: lighten(accent, 0.35),
            params: [SH_PORTAL, 0.25, 0.0, 0.0],
            ..Default::default()
        });
    }
    // Telegraphs, under the bodies and bullets: a thin warning line (or a glowing circle)
    // that brightens as the attack nears.
    for (t, age) in view.telegraphs {
        let k = age.clamp(0.0, 1.0);
        // Red keeps players out; gold (a downed teammate's ring) asks them in.
        let color = if t.safe { [1.0, 0.75, 0.3, 0.35 + 0.45 * k] } else { [1.0, 0.32, 0.26, 0.35 + 0.45 * k] };
        if t.circle {
            out.push(Sprite {
                pos: [t.pos.x, t.pos.y],
                size: [t.length, t.length],
                color,
                // w 3: a telegraph's circle (no glow pass: it would wash over the arena).
                params: [SH_RING, 0.25, 0.0, 3.0],
                ..Default::default()
            });
        } else {
            let d = Vec2::from_angle_deg(t.angle);
            let mid = t.pos + d * (t.length / 2.0);
            out.push(Sprite {
                pos: [mid.x, mid.y],
                size: [t.length / 2.0, t.width.max(1.0) / 2.0 + 1.5],
                dir: [d.x, d.y],
                color,
                params: [SH_TELEGRAPH, 0.0, k, 0.0],
            });
        }
    }
    // An enemy or boss body: radius, colour and look by definition index, with a fallback.
    let body = |pos: Vec2,
                def: u16,
                radii: &[f32],
                colors: &[[f32; 4]],
                looks: &[crate::sim::defs::BodyDef],
                sprites: &[Option<(u16, [f32; 2])>],
                fallback: (f32, [f32; 4]),
                glow: f32,
                phase: u8| {
        let r = radii.get(def as usize).copied().unwrap_or(fallback.0);
        let color = colors.get(def as usize).copied().unwrap_or(fallback.1);
        if let Some(&Some((i, a))) = sprites.get(def as usize) {
            // A mod's picture, upright (the glow pass still gives it a halo of its colour).
            return Sprite {
                pos: [pos.x, pos.y],
                size: [r * a[0], r * a[1]],
                dir: [1.0, 0.0],
                color,
                params: [SH_IMAGE, 0.0, i as f32, 0.0],
            };
        }
        let look = looks.get(def as usize).copied().unwrap_or_default();
        // Each phase turns a boss faster.
        let turn = view.time * look.spin * (1.0 + 0.5 * phase as f32) * std::f32::consts::TAU;
        Sprite {
            pos: [pos.x, pos.y],
            size: [r, r],
            dir: [turn.cos(), turn.sin()],
            color,
            params: [SH_BODY + look.shape.code() as f32, glow, look.parts as f32 + 16.0 * phase.min(15) as f32, 0.0],
        }
    };
    use crate::protocol::WireTarget;
    for e in view.enemies {
        let mut s = body(
            e.pos,
            e.def,
            view.enemy_radius,
            &palette.enemies,
            &palette.enemy_bodies,
            &palette.enemy_sprites,
            (14.0, [0.8, 0.2, 0.2, 1.0]),
            0.15,
            0,
        );
        s.params[3] = flash_of(view, WireTarget::Enemy(e.id));
        out.push(s);
    }
    if let Some(b) = view.boss {
        let mut s = body(
            b.pos,
            b.def,
            view.boss_radius,
            &palette.bosses,
            &palette.boss_bodies,
            &palette.boss_sprites,
            (32.0, [0.7, 0.3, 1.0, 1.0]),
            0.3,
            b.phase,
        );
        s.params[3] = flash_of(view, WireTarget::Boss);
        out.push(s);
    }
    for p in view.players {
        let own = Some(p.id) == view.own_id;
        let pos = if own { view.own_pos.unwrap_or(p.pos) } else { p.pos };
        let aim = match view.own_aim {
            Some(a) if own => a.to_radians(),
            _ => p.aim as f32 / 256.0 * std::f32::consts::TAU,
        };
        let mut c = player_color(p.id, own);
        if p.flags & F_DEAD != 0 {
            c = [0.25, 0.25, 0.3, 0.6];
        }
        let r = crate::sim::config::PLAYER_VISUAL_RADIUS;
        // The ship's look (content), facing the aim; the built-in dart when unknown.
        let ship = view.ships.iter().find(|(id, _)| *id == p.id).map_or(0, |(_, s)| *s as usize);
        let look = palette.ship_bodies.get(ship).copied();
        let (shape, parts) = match look {
            Some(b) => (SH_BODY + b.shape.code() as f32, b.parts as f32),
            None => (SH_SHIP, 0.0),
        };
        let flash = -flash_of(view, WireTarget::Player(p.id));
        out.push(match palette.ship_sprites.get(ship).copied().flatten() {
            // A mod's picture, facing the aim (pictures face right).
            Some((i, a)) => Sprite {
                pos: [pos.x, pos.y],
                size: [r * a[0], r * a[1]],
                dir: [aim.cos(), aim.sin()],
                color: c,
                params: [SH_IMAGE, 0.0, i as f32, flash],
            },
            None => Sprite {
                pos: [pos.x, pos.y],
                size: [r, r],
                dir: [aim.cos(), aim.sin()],
                color: c,
                params: [shape, 0.2, parts, flash],
            },
        });
        // The hitbox dot: what actually gets hit is much smaller than the ship.
        let hb = crate::sim::config::PLAYER_HITBOX_RADIUS;
        out.push(Sprite {
            pos: [pos.x, pos.y],
            size: [hb, hb],
            color: [1.0, 1.0, 1.0, 1.0],
            params: [SH_ORB, 0.0, 1.0, 0.0],
            ..Default::default()
        });
        if p.flags & F_SPAWN_GRACE != 0 {
            out.push(Sprite {
                pos: [pos.x, pos.y],
                size: [r + 8.0, r + 8.0],
                color: [0.5, 0.85, 1.0, 0.8],
                params: [SH_SHIELD, 0.3, 0.0, 0.0],
                ..Default::default()
            });
        }
        // Focused: the graze ring (bullets passing inside it, without touching the dot,
        // charge flares).
        if p.flags & F_FOCUS != 0 {
            let g = hb + crate::sim::config::GRAZE_RADIUS;
            out.push(Sprite {
                pos: [pos.x, pos.y],
                size: [g, g],
                color: [0.7, 0.95, 1.0, 0.45],
                params: [SH_RING, 0.1, 0.0, 0.0],
                ..Default::default()
            });
        }
        // Downed: the circle a teammate must stand in, filling as they revive.
        if p.flags & F_DOWNED != 0 {
            let reach = crate::sim::config::REVIVE_RANGE;
            let k = p.escape as f32 / crate::sim::config::REVIVE_TICKS as f32;
            out.push(Sprite {
                pos: [pos.x, pos.y],
                size: [reach, reach],
                color: [1.0, 0.75, 0.3, 0.35 + 0.5 * k],
                params: [SH_RING, 0.2, 0.0, 0.0],
                ..Default::default()
            });
            if k > 0.0 {
                out.push(Sprite {
                    pos: [pos.x, pos.y],
                    size: [reach * k, reach * k],
                    color: [0.5, 1.0, 0.6, 0.6],
                    params: [SH_RING, 0.3, 0.0, 0.0],
                    ..Default::default()
                });
            }
        }
    }
    // Flares: a bright ring sweeping out to the flare's radius.
    for (at, age) in view.flares {
        let r = crate::sim::config::FLARE_RADIUS * (0.15 + 0.85 * age.clamp(0.0, 1.0));
        out.push(Sprite {
            pos: [at.x, at.y],
            size: [r, r],
            color: [1.0, 0.95, 0.7, (1.0 - age).clamp(0.0, 1.0)],
            params: [SH_RING, 0.8, 0.0, 0.0],
            ..Default::default()
        });
    }
    // Death bursts: an expanding ring and sparks flying out, fading.
    for d in view.bursts {
        let fade = (1.0 - d.age).clamp(0.0, 1.0);
        let mut c = d.color;
        c[3] *= fade;
        let r = d.size * (0.6 + 1.8 * d.age);
        out.push(Sprite {
            pos: [d.pos.x, d.pos.y],
            size: [r, r],
            color: c,
            params: [SH_RING, 0.3, 0.0, 0.0],
            ..Default::default()
        });
        for k in 0..10 {
            let a = k as f32 * std::f32::consts::TAU / 10.0 + d.size;
            let out_r = d.size * (0.5 + 2.6 * d.age);
            let sr = (d.size * 0.16).max(2.0) * fade;
            out.push(Sprite {
                pos: [d.pos.x + a.cos() * out_r, d.pos.y + a.sin() * out_r],
                size: [sr, sr],
                color: [1.0, 0.95, 0.85, fade],
                params: [SH_ORB, 0.5, 1.0, 0.0],
                ..Default::default()
            });
        }
    }
    // Sparks: flat streaks along their flight, shrinking and fading.
    for s in view.sparks {
        let k = s.age.clamp(0.0, 1.0);
        let p = s.pos + s.vel * (k * SPARK_SECONDS);
        let len = 1.0 + 4.0 * (1.0 - k);
        let mut c = s.color;
        c[3] *= 1.0 - k;
        out.push(Sprite {
            pos: [p.x, p.y],
            size: [len, 1.1],
            dir: [s.vel.x, s.vel.y],
            color: c,
            params: [SH_DISC, 0.0, 0.0, 0.0],
        });
    }
    let b = view.bullets;
    let t = view.alpha;
    // Oldest first, newest on top, whatever the pool's slot order (a slot is refilled by
    // the last bullet when one dies: drawn in slot order, overlapping bullets would swap
    // which is on top). The pool is nearly in this order already, so the sort is cheap.
    // Oldest first. A pool nobody removed from the middle of is in uid order already: it is
    // walked as it is (the common case stays a plain loop); otherwise through a sorted
    // index list.
    let order: Option<Vec<u32>> = (!b.in_uid_order()).then(|| {
        // uid and slot packed in one u64: a plain integer sort.
        let mut o: Vec<u64> = (0..b.len()).map(|i| (b.uid[i] as u64) << 32 | i as u64).collect();
        o.sort_unstable();
        o.into_iter().map(|k| k as u32).collect()
    });
    for pass in [Team::Player, Team::Enemy] {
        match &order {
            None => push_bullets(b, palette, t, pass, 0..b.len(), out),
            Some(o) => push_bullets(b, palette, t, pass, o.iter().map(|&i| i as usize), out),
        }
    }
}

/// The sprites of `pass`'s bullets, in the order of `slots`.
#[inline(never)]
fn push_bullets(
    b: &BulletPool,
    palette: &Palette,
    t: f32,
    pass: Team,
    slots: impl Iterator<Item = usize>,
    out: &mut Vec<Sprite>,
) {
    for i in slots {
        if b.team[i] != pass {
            continue;
        }
        let (vx, vy) = (b.vx[i], b.vy[i]);
        let (mut color, shape) =
            palette.kinds.get(b.kind[i] as usize).copied().unwrap_or(([1.0, 1.0, 1.0, 1.0], SH_ORB));
        let mut r = b.radius[i];
        let mut glow = 0.6;
        if pass == Team::Player {
            // Players' shots: larger and brighter than their hitbox, so they read
            // against any pattern (enemy bullets still draw over them).
            r *= 1.5;
            glow = 0.35;
            for ch in color.iter_mut().take(3) {
                *ch = *ch * 0.6 + 0.4;
            }
            // Translucent: never mistaken for what can hurt you.
            color[3] *= 0.6;
        }
        let team = if pass == Team::Player { 2.0 } else { 1.0 };
        out.push(match palette.kind_sprites.get(b.kind[i] as usize).copied().flatten() {
            // A mod's picture, facing where the bullet flies; the glow pass gives it a
            // halo of the kind's colour.
            Some((k, a)) => Sprite {
                pos: [b.x[i] + vx * t, b.y[i] + vy * t],
                size: [r * a[0], r * a[1]],
                dir: [vx, vy],
                color,
                params: [SH_IMAGE_BULLET, 0.0, k as f32, team],
            },
            None => Sprite {
                pos: [b.x[i] + vx * t, b.y[i] + vy * t],
                size: [r, r],
                dir: [vx, vy],
                color,
                // Both kinds are clipped to the arena; only enemy bullets get the outline.
                params: [shape, glow, 0.85, team],
            },
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 100x100 arena with these bullets and nothing else.
    fn bare<'a>(theme: &'a crate::sim::defs::ThemeDef, pool: &'a BulletPool) -> WorldView<'a> {
        WorldView {
            theme,
            arena: Vec2::new(100.0, 100.0),
            bullets: pool,
            alpha: 0.0,
            players: &[],
            own_id: None,
            own_pos: None,
            own_aim: None,
            enemies: &[],
            enemy_radius: &[],
            boss: None,
            boss_radius: &[],
            portals: &[],
            portal_radius: 0.0,
            flashes: &[],
            bursts: &[],
            flares: &[],
            telegraphs: &[],
            time: 0.0,
            sparks: &[],
            ships: &[],
        }
    }

    #[test]
    fn the_colour_blind_palette_keeps_the_base_kinds_apart() {
        // The base game's bullet colours: player shot, orb, small orb, pellet, rice, star, big.
        let base = [
            [0x80, 0xe8, 0xff],
            [0xff, 0x4f, 0x6d],
            [0xff, 0xb0, 0x40],
            [0xff, 0xe0, 0x60],
            [0x60, 0xff, 0x9a],
            [0xc4, 0x83, 0xff],
            [0xff, 0x38, 0x38],
        ];
        let out = colour_blind(&base);
        for (i, a) in out.iter().enumerate() {
            assert!(CVD_SAFE.contains(a), "kind {i} -> {a:?} is from the safe palette");
            for b in &out[i + 1..] {
                assert_ne!(a, b, "two kinds got the same colour: {out:?}");
            }
        }
        // Red-green pairs land on the blue-yellow axis: the green rice is not red's
        // vermilion, the yellow pellet stays yellow.
        assert_eq!(out[3], CVD_SAFE[3]);
        assert_ne!(out[4], CVD_SAFE[5]);
        // Greys stay; more kinds than colours share the nearest.
        assert_eq!(colour_blind(&[[200, 200, 200]]), vec![[200, 200, 200]]);
        assert_eq!(colour_blind(&[[255, 0, 0]; 9]).len(), 9);
    }

    #[test]
    fn bullets_are_drawn_oldest_first_whatever_their_slots() {
        use crate::sim::bullets::BulletSpawn;
        let mut pool = BulletPool::new();
        for uid in 0..6u32 {
            let s = BulletSpawn {
                uid,
                pos: Vec2::new(10.0 * uid as f32, 50.0),
                angle: 0.0,
                speed: 0.0,
                radius: 4.0,
                lifetime: 100,
                kind: 0,
                team: Team::Enemy,
                accel: 0.0,
                turn: 0.0,
                max_speed: f32::INFINITY,
                tick: 0,
            };
            pool.spawn(&s, 0);
        }
        // The newest bullet takes the dead one's slot.
        pool.despawn(1);
        assert_ne!(pool.uid, vec![0, 2, 3, 4, 5], "the slots are out of uid order");
        let theme = crate::sim::defs::ThemeDef::default();
        let view = bare(&theme, &pool);
        let mut out = Vec::new();
        build(&view, &Palette::default(), &mut out);
        let xs: Vec<f32> = out.iter().filter(|s| s.params[3] == 1.0).map(|s| s.pos[0]).collect();
        assert_eq!(xs, vec![0.0, 20.0, 30.0, 40.0, 50.0], "drawn in uid order (x = 10 * uid)");
    }

    #[test]
    fn telegraphs_bodies_and_sparks_are_drawn_where_they_are_and_under_the_bullets() {
        use crate::protocol::messages::{SnapBoss, SnapEnemy};
        use crate::sim::defs::{BodyDef, BodyShape};
        use crate::sim::script::Telegraph;
        let mut pool = BulletPool::new();
        pool.spawn(
            &crate::sim::bullets::BulletSpawn {
                uid: 1,
                pos: Vec2::new(50.0, 50.0),
                angle: 0.0,
                speed: 0.0,
                radius: 4.0,
                lifetime: 100,
                kind: 0,
                team: Team::Enemy,
                accel: 0.0,
                turn: 0.0,
                max_speed: f32::INFINITY,
                tick: 0,
            },
            0,
        );
        let theme = crate::sim::defs::ThemeDef::default();
        let line = Telegraph {
            pos: Vec2::new(10.0, 20.0),
            angle: 0.0,
            length: 100.0,
            width: 4.0,
            ticks: 30,
            circle: false,
            safe: false,
        };
        let ring = Telegraph {
            pos: Vec2::new(5.0, 5.0),
            angle: 0.0,
            length: 40.0,
            width: 3.0,
            ticks: 30,
            circle: true,
            safe: false,
        };
        let enemies = [SnapEnemy { id: 1, def: 0, pos: Vec2::new(30.0, 30.0), hp: 5 }];
        let boss = SnapBoss { def: 0, pos: Vec2::new(70.0, 30.0), hp: 1, max_hp: 2, phase: 2 };
        let sparks: Vec<Spark> = spark_burst(Vec2::new(60.0, 60.0), 4, 100.0, [1.0; 4], 3).collect();
        let view = WorldView {
            enemies: &enemies,
            enemy_radius: &[12.0],
            boss: Some(boss),
            boss_radius: &[30.0],
            telegraphs: &[
                (line, 0.5),
                (ring, 0.2),
                (Telegraph { pos: Vec2::new(90.0, 90.0), safe: true, ..ring }, 0.2),
            ],
            time: 0.25,
            sparks: &sparks,
            ..bare(&theme, &pool)
        };
        let palette = Palette {
            enemies: vec![[1.0; 4]],
            bosses: vec![[1.0; 4]],
            enemy_bodies: vec![BodyDef { shape: BodyShape::Cross, parts: 4, spin: 1.0 }],
            boss_bodies: vec![BodyDef { shape: BodyShape::Shell, parts: 8, spin: 0.0 }],
            ..Default::default()
        };
        let mut out = Vec::new();
        build(&view, &palette, &mut out);
        let at = |shape: f32| out.iter().position(|s| s.params[0] == shape);
        // The line: centred halfway along, pointing its way, as wide as asked (plus the
        // soft edge), filled as far as the attack has come.
        let l = out[at(SH_TELEGRAPH).expect("a line")];
        assert_eq!((l.pos, l.size, l.dir, l.params[2]), ([60.0, 20.0], [50.0, 3.5], [1.0, 0.0], 0.5));
        let warn = out.iter().find(|s| s.params[0] == SH_RING && s.pos == [5.0, 5.0] && s.size == [40.0, 40.0]);
        let safe = out.iter().find(|s| s.params[0] == SH_RING && s.pos == [90.0, 90.0]);
        // A warning is red; a safe mark is gold, as a downed teammate's ring.
        assert!(warn.expect("the circle").color[1] < 0.5 && safe.expect("the safe circle").color[1] > 0.7);
        // Bodies: the look's shape and parts; a boss's phase in the parts; the enemy turned
        // a quarter turn a second for a quarter second.
        let e = out[at(SH_BODY + BodyShape::Cross.code() as f32).expect("the enemy's body")];
        assert_eq!(e.params[2], 4.0);
        assert!((e.dir[0] - 0.0).abs() < 1e-5 && (e.dir[1] - 1.0).abs() < 1e-5, "{:?}", e.dir);
        let b = out[at(SH_BODY + BodyShape::Shell.code() as f32).expect("the boss's body")];
        assert_eq!(b.params[2], 8.0 + 16.0 * 2.0);
        assert_eq!(out.iter().filter(|s| s.params[0] == SH_DISC).count(), 4, "the sparks");
        // Everything is under the one bullet.
        let bullet = out.iter().position(|s| s.params[3] == 1.0).expect("the bullet");
        assert_eq!(bullet, out.len() - 1);
    }

    #[test]
    fn the_flat_reference_is_the_look_before_themes() {
        let sprites = vec![
            Sprite { params: [SH_RECT, 0.0, 0.0, 0.0], ..Default::default() },
            Sprite { params: [SH_BACKDROP, 0.0, 1.0, 64.0], ..Default::default() },
            Sprite { params: [SH_VIGNETTE, 0.0, 0.0, 0.0], ..Default::default() },
            Sprite { params: [SH_BODY + 2.0, 0.15, 37.0, 0.5], dir: [0.0, 1.0], ..Default::default() },
            Sprite { params: [SH_ORB, 0.6, 1.0, 1.0], ..Default::default() },
        ];
        let flat = flat_reference(&sprites);
        let shapes: Vec<f32> = flat.iter().map(|s| s.params[0]).collect();
        assert_eq!(shapes, vec![SH_RECT, SH_ENEMY, SH_ORB]);
        assert_eq!(flat[1].params, [SH_ENEMY, 0.15, 0.0, 0.5], "the glow and the hit flash kept");
    }

    #[test]
    fn low_effects_drop_every_glow_and_the_outline_only_enemy_bullets_glow() {
        let s = |shape: f32, w: f32| Sprite { params: [shape, 0.6, 0.85, w], ..Default::default() };
        let mut v = vec![s(SH_ORB, 1.0), s(SH_ORB, 2.0), s(SH_SHIP, 0.0), s(SH_RING, 0.0)];
        apply_look(&mut v, false, true);
        let glows: Vec<f32> = v.iter().map(|x| x.params[1]).collect();
        assert_eq!(glows, vec![0.0, 0.6, 0.6, 0.6], "outline: enemy bullets only (not shots, ships, bursts)");
        apply_look(&mut v, true, false);
        assert!(v.iter().all(|x| x.params[1] == 0.0));
    }
}
