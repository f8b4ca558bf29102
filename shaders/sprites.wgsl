// Hailfire sprites: every bullet, ship, enemy, portal and the arena in one instanced draw.
// Each instance is a quad; the fragment shader draws its shape as a signed distance field
// with a bright core, a dark rim and a soft glow, so dense patterns stay legible.

struct Camera {
    // Framebuffer size in pixels.
    screen: vec2<f32>,
    // World position shown at the top-left corner of the screen.
    origin: vec2<f32>,
    // Screen pixels per world pixel.
    scale: f32,
    time: f32,
    // The arena's size in world pixels (bullets are clipped to it by a scissor rectangle).
    arena: vec2<f32>,
    // x: how strongly enemy bullets are outlined (accessibility), 0..1; y: the bloom
    // pass's strength.
    style: vec4<f32>,
};

@group(0) @binding(0) var<uniform> cam: Camera;
// Mods' sprites, packed in one texture, and where each is in it (x, y, w, h in texture
// coordinates), by index.
@group(0) @binding(1) var atlas: texture_2d<f32>;
@group(0) @binding(2) var atlas_sampler: sampler;
@group(0) @binding(3) var<uniform> rects: array<vec4<f32>, 256>;

struct In {
    @builtin(vertex_index) vid: u32,
    @location(0) pos: vec2<f32>,
    @location(1) size: vec2<f32>,
    @location(2) dir: vec2<f32>,
    @location(3) color: vec4<f32>,
    // x: shape, y: glow (extra radius as a fraction of the size), z: core strength,
    // w: bullets are clipped to the arena (by the renderer's scissor), 1 enemy bullets,
    // 2 players' shots; enemies, bosses: white hit flash (0..1); ships:
    // red hit flash (0..-1)
    @location(4) params: vec4<f32>,
};

struct Out {
    @builtin(position) clip: vec4<f32>,
    @location(0) local: vec2<f32>,
    @location(1) color: vec4<f32>,
    @location(2) params: vec4<f32>,
    @location(3) size: vec2<f32>,
    // World position (the floor's patterns are laid out in the world).
    @location(4) world: vec2<f32>,
    // The length of `dir` (the floor pattern's speed).
    @location(5) extra: f32,
};

// Corner `v.vid` of instance `v`'s quad, `expand` times its half size `size`, turned to
// face `dir`.
fn corner(v: In, expand: f32, size: vec2<f32>) -> Out {
    var corners = array<vec2<f32>, 6>(
        vec2(-1.0, -1.0), vec2(1.0, -1.0), vec2(1.0, 1.0),
        vec2(-1.0, -1.0), vec2(1.0, 1.0), vec2(-1.0, 1.0),
    );
    let c = corners[v.vid] * expand;
    let d = normalize(select(vec2(1.0, 0.0), v.dir, dot(v.dir, v.dir) > 1e-8));
    let offset = c * size;
    let world = v.pos + vec2(offset.x * d.x - offset.y * d.y, offset.x * d.y + offset.y * d.x);
    let screen = (world - cam.origin) * cam.scale;
    var o: Out;
    o.clip = vec4(screen.x / cam.screen.x * 2.0 - 1.0, 1.0 - screen.y / cam.screen.y * 2.0, 0.0, 1.0);
    o.local = c;
    o.color = v.color;
    o.params = v.params;
    o.size = v.size;
    o.world = world;
    o.extra = length(v.dir);
    return o;
}

@vertex
fn vs_main(v: In) -> Out {
    return corner(v, 1.0 + v.params.y, v.size);
}

fn hash2(p: vec2<f32>) -> f32 {
    let q = fract(p * vec2(0.1031, 0.1030));
    let r = q + dot(q, q.yx + 33.33);
    return fract((r.x + r.y) * r.x);
}

// A place's floor: how much of the accent colour shows at world position `w`, for
// pattern `kind`, cell size `s`, at animation time `t`. Parallax: the pattern moves by
// a part of the camera's motion, so shakes show depth.
fn backdrop(kind: u32, w_in: vec2<f32>, s: f32, t: f32) -> f32 {
    let w = w_in - cam.origin * 0.2;
    switch kind {
        case 1u: {                                                           // runes
            let g = w / s;
            let c = floor(g);
            let f = fract(g) - 0.5;
            // A faint grid joins the glyphs.
            let grid = 0.12 * (1.0 - smoothstep(0.0, 0.025, 0.5 - max(abs(f.x), abs(f.y))));
            let h = hash2(c);
            if (h < 0.82) { return grid; }
            let pulse = 0.5 + 0.5 * sin(t * 1.3 + h * 40.0);
            let r = length(f);
            let ring = 1.0 - smoothstep(0.0, 0.03, abs(r - 0.3));
            let a = atan2(f.y, f.x) + h * 6.28;
            let spokes = (1.0 - smoothstep(0.0, 0.05, abs(sin(a * 1.5)) * r)) * step(r, 0.3);
            let dot_ = 1.0 - smoothstep(0.04, 0.07, r);
            return grid + (ring * 0.8 + spokes * 0.5 + dot_) * (0.25 + 0.75 * pulse);
        }
        case 2u: {                                                           // water
            let p = w / s;
            var v = sin(p.x * 1.7 + t * 0.9) + sin(p.y * 2.1 - t * 0.7);
            v = v + sin((p.x + p.y) * 1.3 + t * 1.1) + sin(length(p - vec2(3.0, 2.0)) * 2.3 - t);
            let c = pow(0.5 + 0.5 * sin(v * 2.2), 14.0);
            return 0.1 + c * 0.55;
        }
        case 3u: {                                                           // stars
            var total = 0.0;
            for (var layer = 0; layer < 2; layer = layer + 1) {
                let k = f32(layer);
                let ls = s * (1.0 + k * 0.9);
                let g = (w_in - cam.origin * (0.1 + 0.25 * k) + vec2(t * 4.0 * (1.0 + k), 0.0)) / ls;
                let c = floor(g);
                let h = hash2(c + k * 17.0);
                let at = vec2(hash2(c + 3.1), hash2(c + 7.7)) * 0.8 + 0.1;
                let d = length(fract(g) - at);
                let tw = 0.55 + 0.45 * sin(t * 2.5 + h * 50.0);
                total = total + (1.0 - smoothstep(0.0, 0.06 + 0.04 * k, d)) * tw * step(0.45, h);
            }
            return total;
        }
        case 4u: {                                                           // embers
            var total = 0.08;
            for (var layer = 0; layer < 2; layer = layer + 1) {
                let k = f32(layer);
                let ls = s * (1.0 + k * 0.6);
                let g = (w + vec2(sin(t * 0.7 + k) * s * 0.2, t * s * (0.5 + 0.4 * k))) / ls;
                let c = floor(g);
                let h = hash2(c + k * 31.0);
                let at = vec2(hash2(c + 1.3), hash2(c + 5.9)) * 0.7 + 0.15;
                let d = length((fract(g) - at) * vec2(1.0, 0.6));
                let flick = 0.5 + 0.5 * sin(t * 9.0 + h * 80.0);
                total = total + (1.0 - smoothstep(0.0, 0.07, d)) * flick * step(0.55, h);
            }
            return total;
        }
        default: {                                                           // tiles
            let g = w / s;
            let f = fract(g);
            let e = min(min(f.x, 1.0 - f.x), min(f.y, 1.0 - f.y));
            let joint = 1.0 - smoothstep(0.0, 0.035, e);
            let stone = hash2(floor(g)) * 0.22;
            let sheen = 0.08 * sin(t * 0.4 + hash2(floor(g) + 9.0) * 6.28);
            return joint * 0.7 + stone + max(sheen, 0.0);
        }
    }
}

fn sd_star5(p_in: vec2<f32>, r: f32, rf: f32) -> f32 {
    let k1 = vec2(0.809016994375, -0.587785252292);
    let k2 = vec2(-k1.x, k1.y);
    var p = vec2(abs(p_in.x), -p_in.y);
    p = p - 2.0 * max(dot(k1, p), 0.0) * k1;
    p = p - 2.0 * max(dot(k2, p), 0.0) * k2;
    p.x = abs(p.x);
    p.y = p.y - r;
    let ba = rf * vec2(-k1.y, k1.x) - vec2(0.0, 1.0);
    let h = clamp(dot(p, ba) / dot(ba, ba), 0.0, r);
    return length(p - ba * h) * sign(p.y * ba.x - p.x * ba.y);
}

// A regular polygon of `n` sides and circumradius `r`, a vertex along +x.
fn sd_polygon(p: vec2<f32>, r: f32, n: f32) -> f32 {
    let sector = 6.2831853 / n;
    let a = atan2(p.y, p.x);
    let ang = a - sector * floor(a / sector + 0.5);
    // Fold into one sector, measured from its middle (an edge's normal, half a sector
    // from the vertex).
    let m = ang - sector * 0.5 * sign(ang);
    let q = length(p) * vec2(cos(m), abs(sin(m)));
    let half = sector * 0.5;
    let q2 = q - vec2(r * cos(half), 0.0);
    let h = clamp(q2.y, 0.0, r * sin(half));
    return length(q2 - vec2(0.0, h)) * sign(q2.x);
}

// A body's silhouette (sim::defs::BodyShape: 0 orb, 1 shell, 2 spiked, 3 eye, 4 crystal,
// 5 cross, 6 dart), `parts` its segments, spikes, sides or arms.
fn body_sd(kind: u32, p: vec2<f32>, parts: f32) -> f32 {
    let r = length(p);
    let a = atan2(p.y, p.x);
    let n = max(parts, 1.0);
    switch kind {
        case 1u: {                                                      // shell
            let core = r - 0.5;
            let ring = abs(r - 0.8) - 0.13;
            // Gaps between the ring's segments (zero parts: a whole ring).
            let seg = abs(fract(a / 6.2831853 * n) - 0.5) * 2.0;
            let gap = select((0.78 - seg) * 0.8 * 3.14159 / n, -1.0, parts < 0.5);
            return min(core, max(ring, -gap));
        }
        case 2u: {                                                      // spiked
            let k = pow(max(cos(a * n), 0.0), 3.0);
            return (r - (0.6 + 0.37 * k)) * 0.75;
        }
        case 4u: { return sd_polygon(p, 0.96, max(parts, 3.0)); }       // crystal
        case 5u: {                                                      // cross
            let sector = 6.2831853 / n;
            let ang = a - sector * floor(a / sector + 0.5);
            let q = r * vec2(cos(ang), abs(sin(ang)));
            let arm = max(abs(q.x - 0.5) - 0.46, q.y - 0.2);
            return min(r - 0.55, arm);
        }
        case 6u: { return sd_triangle(p); }                             // dart
        default: { return r - 0.92; }                                   // orb, eye
    }
}

fn sd_triangle(p: vec2<f32>) -> f32 {
    // Points along +x (the ship's heading).
    let a = vec2(1.0, 0.0);
    let b = vec2(-0.8, 0.75);
    let c = vec2(-0.8, -0.75);
    let e0 = b - a; let e1 = c - b; let e2 = a - c;
    let v0 = p - a; let v1 = p - b; let v2 = p - c;
    let pq0 = v0 - e0 * clamp(dot(v0, e0) / dot(e0, e0), 0.0, 1.0);
    let pq1 = v1 - e1 * clamp(dot(v1, e1) / dot(e1, e1), 0.0, 1.0);
    let pq2 = v2 - e2 * clamp(dot(v2, e2) / dot(e2, e2), 0.0, 1.0);
    let s = sign(e0.x * e2.y - e0.y * e2.x);
    let d = min(min(vec2(dot(pq0, pq0), s * (v0.x * e0.y - v0.y * e0.x)),
                    vec2(dot(pq1, pq1), s * (v1.x * e1.y - v1.y * e1.x))),
                    vec2(dot(pq2, pq2), s * (v2.x * e2.y - v2.y * e2.x)));
    return -sqrt(d.x) * sign(d.y);
}

@fragment
fn fs_main(i: Out) -> @location(0) vec4<f32> {
    let shape = u32(i.params.x + 0.5);
    if (shape >= 64u) {
        // A mod's sprite (z: its index), in its own colours; the tint's alpha fades it and
        // a body's hit flash (w; not a bullet's) whitens or reddens it.
        let r = rects[min(u32(i.params.z + 0.5), 255u)];
        let q = clamp(i.local * 0.5 + vec2(0.5), vec2(0.0), vec2(1.0));
        let c = textureSampleLevel(atlas, atlas_sampler, r.xy + q * r.zw, 0.0);
        var rgb = c.rgb;
        if (shape == 64u && i.params.w != 0.0) {
            let to = select(vec3(1.0, 1.0, 1.0), vec3(1.0, 0.12, 0.12), i.params.w < 0.0);
            rgb = mix(rgb, to, clamp(abs(i.params.w), 0.0, 1.0) * 0.85);
        }
        return vec4(rgb, c.a * i.color.a);
    }
    if (shape == 12u) {
        // The floor's pattern: the accent colour, faint, over the floor's own colour.
        let k = backdrop(u32(i.params.z + 0.5), i.world, max(i.params.w, 1.0), cam.time * i.extra);
        // Faint on purpose: what can kill you must always read above the floor. 0.3 is
        // sim::defs::THEME_PATTERN_PEAK (bullet contrast is checked against it).
        // y > 0: a portal's window, shown brighter and cut to a circle.
        let window = i.params.y > 0.5;
        let mask = select(1.0, 1.0 - smoothstep(0.92, 1.0, length(i.local)), window);
        let peak = select(0.3, 0.9, window);
        return vec4(i.color.rgb, clamp(k, 0.0, 1.0) * peak * mask * i.color.a);
    }
    if (shape == 15u) {
        // A flat disc.
        let aa = 1.5 / max(i.size.x * cam.scale, 1.0);
        return vec4(i.color.rgb, (1.0 - smoothstep(1.0 - aa, 1.0, length(i.local))) * i.color.a);
    }
    if (shape == 13u) {
        // Vignette: darker toward the arena's edges and corners.
        let e = length(max(abs(i.local) - vec2(0.45), vec2(0.0))) / 0.75;
        return vec4(i.color.rgb, smoothstep(0.0, 1.0, e) * i.color.a);
    }
    if (shape == 14u) {
        // A telegraph: a thin line, dashed and dim, that fills bright from its start as
        // the attack nears (z: how far through, 0..1).
        let k = i.params.z;
        let along = (i.local.x + 1.0) * 0.5;
        let across = abs(i.local.y) * i.size.y;
        let half = max(i.size.y - 1.5, 0.5);
        let edge = 1.0 - smoothstep(half - 0.5, half + 1.0, across);
        let filled = step(along, k);
        let dash = 0.5 + 0.5 * step(0.5, fract(along * i.size.x / 10.0 - cam.time * 3.0));
        let a = edge * mix(0.4 * dash, 1.0, filled) * (1.0 - 0.6 * smoothstep(0.9, 1.0, along));
        return vec4(mix(i.color.rgb, vec3(1.0), filled * 0.35), a * i.color.a);
    }
    let glow = i.params.y;
    let core = i.params.z;
    let p = i.local;
    var d: f32;
    switch shape {
        case 0u: { d = length(p) - 1.0; }                                  // orb
        case 1u: { d = (length(p / vec2(1.0, 0.5)) - 1.0) * 0.5; }         // rice
        case 2u: { d = sd_star5(p, 1.0, 0.45); }                           // star
        case 3u: { d = (abs(p.x) + abs(p.y) - 1.0) * 0.7071; }             // diamond
        case 4u: { d = abs(length(p) - 0.72) - 0.28; }                     // ring
        case 5u: { d = sd_triangle(p); }                                   // ship
        case 6u: { d = abs(length(p) - 0.92) - 0.08; }                     // shield
        case 7u, 11u: { d = length(p) - 1.0; }                             // enemy, boss
        case 8u: { d = max(abs(p.x), abs(p.y)) - 1.0; }                    // filled rect
        case 9u: {                                                         // rect outline
            // Each side measured in its own pixels (the arena is not square).
            let px = (vec2(1.0) - abs(p)) * i.size;
            let e = min(px.x, px.y);
            // z: 0 a line, 1 two lines (a keep's masonry), 2 a bright line that glows.
            let style = u32(i.params.z + 0.5);
            var w = abs(e - 3.0) - 3.0;
            if (style == 1u) {
                w = min(abs(e - 1.5) - 1.5, abs(e - 7.0) - 1.2);
            }
            d = w / max(i.size.x, i.size.y);
        }
        case 10u: {                                                        // portal
            let a = atan2(p.y, p.x) + cam.time * 1.5;
            d = abs(length(p) - 0.8 - 0.06 * sin(a * 6.0)) - 0.14;
        }
        default: {
            if (shape >= 16u) {
                d = body_sd(shape - 16u, p, i.params.z - 16.0 * floor(i.params.z / 16.0));
            } else {
                d = length(p) - 1.0;
            }
        }
    }
    // Anti-aliasing width in local units (one screen pixel).
    let aa = 1.0 / max(min(i.size.x, i.size.y) * cam.scale, 1.0);
    let fill = 1.0 - smoothstep(-aa, aa, d);
    var rgb = i.color.rgb;
    var alpha = i.color.a * fill;
    if (shape <= 4u) {
        // Bullets: white-hot core, coloured body, dark rim for contrast.
        let inner = clamp(-d * 2.2, 0.0, 1.0);
        rgb = mix(rgb, vec3(1.0, 1.0, 1.0), core * inner * inner);
        let rim = smoothstep(-0.22, -0.05, d);
        rgb = mix(rgb, rgb * 0.35, rim * 0.8);
        if (cam.style.x > 0.0 && abs(i.params.w - 1.0) < 0.25) {
            // Outline boost: a bright edge outside the dark rim, and no glow to blur it.
            let edge = smoothstep(-0.12, -0.03, d);
            rgb = mix(rgb, vec3(1.0, 1.0, 1.0), edge * cam.style.x);
        }
    } else if (shape == 7u || shape == 11u) {
        let r = length(p);
        rgb = mix(rgb * 0.55, rgb, smoothstep(0.2, 0.85, r));
        let rim = smoothstep(-0.12, -0.02, d);
        rgb = mix(rgb, vec3(0.05, 0.05, 0.08), rim);
        if (shape == 11u) {
            let a = atan2(p.y, p.x) - cam.time * 0.8;
            rgb = rgb + vec3(0.25) * smoothstep(0.8, 1.0, sin(a * 5.0)) * step(r, 0.7);
        }
    } else if (shape >= 16u) {
        // Bodies: shaded toward the edge, a pulsing core (faster each boss phase), parts
        // by shape, a ring per boss phase past the first, and a dark outline.
        let kind = shape - 16u;
        let parts = i.params.z - 16.0 * floor(i.params.z / 16.0);
        let phase = floor(i.params.z / 16.0);
        let r = length(p);
        let t = cam.time;
        let pulse = 0.5 + 0.5 * sin(t * (3.0 + 2.5 * phase));
        rgb = mix(rgb * 0.5, rgb, smoothstep(0.1, 0.9, r));
        if (kind == 3u) {
            // An eye: pale ball, coloured iris, a pupil that widens and narrows.
            let iris = 1.0 - smoothstep(0.5, 0.55, r);
            let pr = 0.17 + 0.08 * pulse;
            let pupil = 1.0 - smoothstep(pr, pr + 0.04, r);
            rgb = mix(vec3(0.9, 0.88, 0.84), i.color.rgb, iris);
            rgb = mix(rgb, vec3(0.03, 0.02, 0.05), pupil);
            rgb = mix(rgb, vec3(1.0), (1.0 - smoothstep(0.0, 0.06, length(p - vec2(0.2, -0.2)))) * 0.9);
        } else {
            let cr = 0.2 + 0.07 * pulse;
            let c = 1.0 - smoothstep(cr - 0.06, cr + 0.05, r);
            rgb = mix(rgb, mix(rgb, vec3(1.0), 0.8), c);
        }
        if (kind == 4u) {
            // Facets: alternate sides lit and shaded.
            let n = max(parts, 3.0);
            let f = floor((atan2(p.y, p.x) + 3.14159265) / 6.2831853 * n);
            rgb = rgb * (0.78 + 0.34 * (f - 2.0 * floor(f / 2.0)));
        }
        for (var k = 1; k <= 3; k = k + 1) {
            if (f32(k) > phase) { break; }
            let rk = 0.3 + 0.13 * f32(k);
            let turn = select(1.0, -1.0, k == 2);
            let dash = step(0.0, sin((atan2(p.y, p.x) + turn * t * (1.0 + f32(k))) * 5.0));
            let ring = 1.0 - smoothstep(0.015, 0.045, abs(r - rk));
            rgb = mix(rgb, vec3(1.0, 0.95, 0.85), ring * dash * 0.85);
        }
        rgb = mix(rgb, vec3(1.0, 0.85, 0.75), 0.07 * phase);
        let rim = smoothstep(-0.13, -0.03, d);
        rgb = mix(rgb, vec3(0.04, 0.04, 0.07), rim);
    } else if (shape == 5u) {
        let rim = smoothstep(-0.18, -0.04, d);
        rgb = mix(rgb, vec3(1.0, 1.0, 1.0), rim * 0.6);
    }
    if (shape >= 5u && i.params.w != 0.0) {
        // Hit flash for a moment: enemies and bosses go white (w > 0), ships red (w < 0).
        let to = select(vec3(1.0, 1.0, 1.0), vec3(1.0, 0.12, 0.12), i.params.w < 0.0);
        rgb = mix(rgb, to, clamp(abs(i.params.w), 0.0, 1.0) * 0.85);
    }
    if (glow > 0.0 && d > 0.0) {
        // Soft halo that reaches zero before the quad's edge (no visible square).
        let g = exp(-d * 3.5) * 0.55 * (1.0 - smoothstep(0.0, glow, d));
        return vec4(i.color.rgb, max(alpha, g * i.color.a));
    }
    return vec4(rgb, alpha);
}

// The glow (bloom) pass: every bright thing splatted as a wide soft blob into a buffer a
// quarter of the screen's size, which is then added over the frame, smoothed by the
// bilinear upscale (src/app/render/mod.rs, `Bloom`). One cheap pass instead of blurs.
const BLOOM_REACH: f32 = 3.0;

@vertex
fn vs_bloom(v: In) -> Out {
    let shape = u32(v.params.x + 0.5);
    // The floor, its pattern, the vignette, frames, telegraphs and discs do not glow: an
    // empty quad. At least 3 px, so the smallest bullets still cover a pixel of the
    // quarter-size buffer.
    let telegraph_circle = shape == 4u && abs(v.params.w - 3.0) < 0.25;
    let glows = !(shape == 8u || shape == 9u || shape == 12u || shape == 13u || shape == 14u || shape == 15u
        || telegraph_circle);
    return corner(v, select(0.0, BLOOM_REACH, glows), max(v.size, vec2(3.0)));
}

@fragment
fn fs_bloom(i: Out) -> @location(0) vec4<f32> {
    let r = length(i.local);
    // Players' shots glow less (they must never outshine what can hurt).
    let sh = u32(i.params.x + 0.5);
    let own = select(1.0, 0.4, abs(i.params.w - 2.0) < 0.25 && (sh <= 4u || sh == 65u));
    let k = exp(-r * r * 0.55) * 0.16 * own * cam.style.y;
    return vec4(i.color.rgb * i.color.a * k, 0.0);
}
