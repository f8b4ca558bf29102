//! The game's icon, drawn from a few shapes in code: a dark rounded tile, a ring of pink
//! bullets closing in, an inner ring of cyan ones, and the white ship in the middle. The
//! same geometry is written as SVG (the scalable icon), rasterised with 4x4 supersampling
//! into PNGs of any size, and packed into a Windows `.ico` and a macOS `.icns`.
//! `hailfire icon --out DIR` writes them all; `installer/package.sh` uses it, and the
//! copies in `assets/icon/` are checked against it by the tests.

use std::path::{Path, PathBuf};

type Rgba = [f32; 4];

const BG_TOP: Rgba = [0.13, 0.10, 0.24, 1.0];
const BG_BOTTOM: Rgba = [0.06, 0.05, 0.12, 1.0];
const PINK: Rgba = [1.0, 0.35, 0.6, 1.0];
const PINK_CORE: Rgba = [1.0, 0.85, 0.92, 1.0];
const CYAN: Rgba = [0.35, 0.9, 1.0, 1.0];
const SHIP: Rgba = [0.96, 0.97, 1.0, 1.0];
const FRAME: Rgba = [0.55, 0.6, 0.95, 1.0];

/// Bullets of the outer (pink) and inner (cyan) rings: centre and radius, in units of the
/// icon's size (0..1).
fn bullets() -> Vec<(f32, f32, f32, bool)> {
    let mut v = Vec::new();
    for k in 0..12 {
        let a = k as f32 * std::f32::consts::TAU / 12.0 + 0.13;
        v.push((0.5 + 0.34 * a.cos(), 0.52 + 0.34 * a.sin(), 0.055, true));
    }
    for k in 0..8 {
        let a = k as f32 * std::f32::consts::TAU / 8.0 + 0.4;
        v.push((0.5 + 0.215 * a.cos(), 0.52 + 0.215 * a.sin(), 0.028, false));
    }
    v
}

/// The ship: a triangle pointing up (three corners).
const SHIP_TRI: [(f32, f32); 3] = [(0.5, 0.38), (0.595, 0.64), (0.405, 0.64)];

fn rounded_rect_sd(x: f32, y: f32, inset: f32, r: f32) -> f32 {
    // Signed distance to the tile [inset, 1-inset]^2 with corner radius r.
    let hx = (x - 0.5).abs() - (0.5 - inset - r);
    let hy = (y - 0.5).abs() - (0.5 - inset - r);
    let ox = hx.max(0.0);
    let oy = hy.max(0.0);
    (ox * ox + oy * oy).sqrt() + hx.max(hy).min(0.0) - r
}

fn in_triangle(x: f32, y: f32, t: &[(f32, f32); 3]) -> bool {
    let s = |a: (f32, f32), b: (f32, f32)| (b.0 - a.0) * (y - a.1) - (b.1 - a.1) * (x - a.0);
    let (d1, d2, d3) = (s(t[0], t[1]), s(t[1], t[2]), s(t[2], t[0]));
    let neg = d1 < 0.0 || d2 < 0.0 || d3 < 0.0;
    let pos = d1 > 0.0 || d2 > 0.0 || d3 > 0.0;
    !(neg && pos)
}

fn over(dst: Rgba, src: Rgba, a: f32) -> Rgba {
    let a = (src[3] * a).clamp(0.0, 1.0);
    [
        src[0] * a + dst[0] * (1.0 - a),
        src[1] * a + dst[1] * (1.0 - a),
        src[2] * a + dst[2] * (1.0 - a),
        a + dst[3] * (1.0 - a),
    ]
}

/// The colour at a point of the icon (units of its size), before supersampling.
fn shade(x: f32, y: f32, bullets: &[(f32, f32, f32, bool)]) -> Rgba {
    let mut c = [0.0, 0.0, 0.0, 0.0];
    let tile = rounded_rect_sd(x, y, 0.03, 0.18);
    if tile > 0.0 {
        return c;
    }
    let g = y.clamp(0.0, 1.0);
    let bg = [
        BG_TOP[0] + (BG_BOTTOM[0] - BG_TOP[0]) * g,
        BG_TOP[1] + (BG_BOTTOM[1] - BG_TOP[1]) * g,
        BG_TOP[2] + (BG_BOTTOM[2] - BG_TOP[2]) * g,
        1.0,
    ];
    c = over(c, bg, 1.0);
    // The arena's frame: a thin line just inside the tile.
    if tile > -0.045 && tile < -0.03 {
        c = over(c, FRAME, 0.8);
    }
    for &(bx, by, r, pink) in bullets {
        let d = ((x - bx).powi(2) + (y - by).powi(2)).sqrt();
        if pink {
            // A soft glow, the bullet, and a bright core.
            let glow = (1.0 - (d - r) / (r * 1.2)).clamp(0.0, 1.0);
            c = over(c, PINK, glow * glow * 0.45);
            if d < r {
                c = over(c, PINK, 1.0);
            }
            if d < r * 0.5 {
                c = over(c, PINK_CORE, 1.0);
            }
        } else if d < r {
            c = over(c, CYAN, 1.0);
        }
    }
    if in_triangle(x, y, &SHIP_TRI) {
        c = over(c, SHIP, 1.0);
    }
    // The hitbox: a small dark dot in the ship, as in the game.
    if ((x - 0.5).powi(2) + (y - 0.56).powi(2)).sqrt() < 0.018 {
        c = over(c, [0.2, 0.25, 0.45, 1.0], 1.0);
    }
    c
}

/// The icon as RGBA8 pixels, `size` x `size`.
pub fn rgba(size: u32) -> Vec<u8> {
    let b = bullets();
    let n = 4;
    let mut out = Vec::with_capacity((size * size * 4) as usize);
    for py in 0..size {
        for px in 0..size {
            let mut acc = [0.0f32; 4];
            for sy in 0..n {
                for sx in 0..n {
                    let x = (px as f32 + (sx as f32 + 0.5) / n as f32) / size as f32;
                    let y = (py as f32 + (sy as f32 + 0.5) / n as f32) / size as f32;
                    let c = shade(x, y, &b);
                    // Premultiplied accumulation.
                    acc[0] += c[0] * c[3];
                    acc[1] += c[1] * c[3];
                    acc[2] += c[2] * c[3];
                    acc[3] += c[3];
                }
            }
            let a = acc[3] / (n * n) as f32;
            let un = |v: f32| if acc[3] > 0.0 { v / acc[3] } else { 0.0 };
            for v in [un(acc[0]), un(acc[1]), un(acc[2]), a] {
                out.push((v.clamp(0.0, 1.0) * 255.0).round() as u8);
            }
        }
    }
    out
}

fn hex(c: Rgba) -> String {
    format!("#{:02x}{:02x}{:02x}", (c[0] * 255.0) as u8, (c[1] * 255.0) as u8, (c[2] * 255.0) as u8)
}

/// The same icon as SVG (a 512-unit square). Plain shapes, solid fills and opacity only,
/// so that every SVG renderer (desktops, ImageMagick's own) draws it alike.
pub fn svg() -> String {
    let s = 512.0;
    let mid =
        [(BG_TOP[0] + BG_BOTTOM[0]) / 2.0, (BG_TOP[1] + BG_BOTTOM[1]) / 2.0, (BG_TOP[2] + BG_BOTTOM[2]) / 2.0, 1.0];
    let mut o = String::from(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"512\" height=\"512\" viewBox=\"0 0 512 512\">\n",
    );
    let inset = 0.03 * s;
    o.push_str(&format!(
        "<rect x=\"{inset:.1}\" y=\"{inset:.1}\" width=\"{w:.1}\" height=\"{w:.1}\" rx=\"{r:.1}\" fill=\"{}\" stroke=\"none\"/>\n",
        hex(mid),
        w = s - 2.0 * inset,
        r = 0.18 * s
    ));
    let fi = 0.0675 * s;
    o.push_str(&format!(
        "<rect x=\"{fi:.1}\" y=\"{fi:.1}\" width=\"{w:.1}\" height=\"{w:.1}\" rx=\"{r:.1}\" fill=\"none\" stroke=\"{}\" stroke-opacity=\"0.8\" stroke-width=\"{sw:.1}\"/>\n",
        hex(FRAME),
        w = s - 2.0 * fi,
        r = 0.1425 * s,
        sw = 0.015 * s
    ));
    // Glows first (solid colours blended with the tile, for renderers without opacity),
    // then the bullets over them.
    let blend = |a: f32| over(mid, PINK, a);
    for pass in 0..2 {
        for (bx, by, r, pink) in bullets() {
            let (x, y, r) = (bx * s, by * s, r * s);
            let circle = |r: f32, c: Rgba| {
                format!("<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"{r:.1}\" fill=\"{}\" stroke=\"none\"/>\n", hex(c))
            };
            match (pass, pink) {
                (0, true) => {
                    o.push_str(&circle(r * 1.9, blend(0.15)));
                    o.push_str(&circle(r * 1.45, blend(0.35)));
                }
                (1, true) => {
                    o.push_str(&circle(r, PINK));
                    o.push_str(&circle(r * 0.5, PINK_CORE));
                }
                (1, false) => o.push_str(&circle(r, CYAN)),
                _ => {}
            }
        }
    }
    let pts: Vec<String> = SHIP_TRI.iter().map(|(x, y)| format!("{:.1},{:.1}", x * s, y * s)).collect();
    o.push_str(&format!("<polygon points=\"{}\" fill=\"{}\" stroke=\"none\"/>\n", pts.join(" "), hex(SHIP)));
    o.push_str(&format!(
        "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"{:.1}\" fill=\"#334073\" stroke=\"none\"/>\n",
        0.5 * s,
        0.56 * s,
        0.018 * s
    ));
    o.push_str("</svg>\n");
    o
}

fn png_bytes(size: u32) -> anyhow::Result<Vec<u8>> {
    let mut buf = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut buf, size, size);
        enc.set_color(png::ColorType::Rgba);
        enc.set_depth(png::BitDepth::Eight);
        let mut w = enc.write_header()?;
        w.write_image_data(&rgba(size))?;
    }
    Ok(buf)
}

/// A Windows icon holding PNG images (16 to 256 px), as Windows Vista and later read.
pub fn ico() -> anyhow::Result<Vec<u8>> {
    let sizes = [16u32, 24, 32, 48, 64, 128, 256];
    let images: Vec<Vec<u8>> = sizes.iter().map(|&s| png_bytes(s)).collect::<anyhow::Result<_>>()?;
    let mut o = Vec::new();
    o.extend_from_slice(&[0, 0, 1, 0]);
    o.extend_from_slice(&(sizes.len() as u16).to_le_bytes());
    let mut offset = 6 + 16 * sizes.len() as u32;
    for (s, img) in sizes.iter().zip(&images) {
        let dim = if *s >= 256 { 0 } else { *s as u8 };
        o.extend_from_slice(&[dim, dim, 0, 0]);
        o.extend_from_slice(&1u16.to_le_bytes()); // colour planes
        o.extend_from_slice(&32u16.to_le_bytes()); // bits per pixel
        o.extend_from_slice(&(img.len() as u32).to_le_bytes());
        o.extend_from_slice(&offset.to_le_bytes());
        offset += img.len() as u32;
    }
    for img in &images {
        o.extend_from_slice(img);
    }
    Ok(o)
}

/// A macOS icon set file (`.icns`) holding PNG images of 32 to 1024 px.
pub fn icns() -> anyhow::Result<Vec<u8>> {
    let entries: [(&[u8; 4], u32); 6] =
        [(b"ic11", 32), (b"ic12", 64), (b"ic07", 128), (b"ic08", 256), (b"ic09", 512), (b"ic10", 1024)];
    let mut body = Vec::new();
    for (kind, size) in entries {
        let img = png_bytes(size)?;
        body.extend_from_slice(kind);
        body.extend_from_slice(&(img.len() as u32 + 8).to_be_bytes());
        body.extend_from_slice(&img);
    }
    let mut o = Vec::new();
    o.extend_from_slice(b"icns");
    o.extend_from_slice(&(body.len() as u32 + 8).to_be_bytes());
    o.extend_from_slice(&body);
    Ok(o)
}

/// The PNG sizes a Linux desktop gets (hicolor theme).
pub const PNG_SIZES: [u32; 7] = [16, 32, 48, 64, 128, 256, 512];

/// Writes `hailfire.svg`, `hailfire-SIZE.png` for every size, `hailfire.ico` and
/// `hailfire.icns` into `dir`; returns the files.
pub fn write_all(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut files = Vec::new();
    let mut put = |name: String, bytes: Vec<u8>| -> anyhow::Result<()> {
        let p = dir.join(name);
        std::fs::write(&p, bytes)?;
        files.push(p);
        Ok(())
    };
    put("hailfire.svg".into(), svg().into_bytes())?;
    for s in PNG_SIZES {
        put(format!("hailfire-{s}.png"), png_bytes(s)?)?;
    }
    put("hailfire.ico".into(), ico()?)?;
    put("hailfire.icns".into(), icns()?)?;
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_icon_has_a_transparent_corner_a_dark_tile_and_a_white_ship() {
        let s = 64;
        let px = rgba(s);
        let at = |x: u32, y: u32| &px[((y * s + x) * 4) as usize..((y * s + x) * 4 + 4) as usize];
        assert_eq!(at(0, 0)[3], 0, "corners are transparent");
        let tile = at(12, 12);
        assert!(tile[3] == 255 && tile[0] < 60 && tile[2] < 90, "the tile is dark: {tile:?}");
        let ship = at(32, 30);
        assert!(ship.iter().take(3).all(|&c| c > 220), "the ship is white: {ship:?}");
        let ico = ico().unwrap();
        assert_eq!(&ico[..4], &[0, 0, 1, 0]);
        assert_eq!(u16::from_le_bytes([ico[4], ico[5]]), 7);
        assert!(svg().starts_with("<svg") && svg().contains("<polygon"));
    }

    /// `assets/icon/` holds what Windows builds embed (`build.rs`) and what the README
    /// shows: it must be what this code draws. `HAILFIRE_WRITE_ICONS=1` rewrites it.
    #[test]
    fn the_committed_icons_are_the_drawn_ones() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/icon");
        let files = [
            ("hailfire.svg", svg().into_bytes()),
            ("hailfire.ico", ico().unwrap()),
            ("hailfire-512.png", png_bytes(512).unwrap()),
        ];
        for (name, bytes) in files {
            let path = dir.join(name);
            if std::env::var_os("HAILFIRE_WRITE_ICONS").is_some() {
                std::fs::write(&path, &bytes).unwrap();
            }
            assert!(
                std::fs::read(&path).unwrap_or_default() == bytes,
                "{} is stale: HAILFIRE_WRITE_ICONS=1 cargo test icon",
                path.display()
            );
        }
    }
}
