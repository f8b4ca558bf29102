//! Music made in code: a place's [`MusicDef`] (tempo, key, mode, lead voice, seed) becomes an
//! eight-bar loop in layers. The place's music is the pad, the bass and the arpeggio; a
//! boss fight adds drums, then in its second phase a lead melody, then in its third a
//! driving top layer. Every layer is a stem of the same length, so the game starts them
//! together and fades layers in as the fight goes on (see `audio::Audio::music`).
//!
//! The seed chooses the chord progression, the bass rhythm and the melody, so two places
//! with the same key and tempo still sound different. Nothing here reads a file.

use std::f32::consts::TAU;

use crate::sim::defs::{note_semitone, Mode, MusicDef, Voice};

/// Layers: pad, bass, arpeggio (the place), drums, lead, top (a boss's phases).
pub const LAYERS: usize = 6;
/// Layers the place's music has before any boss phase.
pub const BASE_LAYERS: usize = 3;
pub const BARS: usize = 8;

/// How many layers play in boss phase `phase` (0 = no boss): the place's three, then one
/// more for each phase, up to all six.
pub fn layers_at(phase: u8) -> usize {
    (BASE_LAYERS + phase as usize).min(LAYERS)
}

/// The title screen's music (the title is not a place in any mod).
pub fn title_music() -> MusicDef {
    MusicDef { tempo: 76.0, key: "C".into(), mode: Mode::Lydian, lead: Voice::Bell, seed: 11 }
}

/// A small deterministic generator (xorshift), so a seed always makes the same song.
struct Rng(u32);

impl Rng {
    fn next(&mut self) -> u32 {
        let mut x = self.0.max(1);
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        self.0 = x;
        x
    }
    fn below(&mut self, n: u32) -> u32 {
        self.next() % n.max(1)
    }
}

#[derive(Clone, Copy)]
enum Timbre {
    Pad,
    Bass,
    Pluck,
    Kick,
    Snare,
    Hat,
    Lead(Voice),
}

/// One note: when (s), how long (s), its frequency, loudness and pan (-1 left..1 right).
#[derive(Clone, Copy)]
struct Note {
    at: f32,
    len: f32,
    freq: f32,
    vel: f32,
    pan: f32,
    timbre: Timbre,
}

/// The loop's notes, by layer.
struct Score {
    seconds: f32,
    layers: [Vec<Note>; LAYERS],
}

fn freq(semitone_from_a4: f32) -> f32 {
    440.0 * 2f32.powf(semitone_from_a4 / 12.0)
}

fn compose(m: &MusicDef) -> Score {
    let mut rng = Rng(m.seed.wrapping_mul(2_654_435_761).wrapping_add(0x9e37_79b9));
    let key = note_semitone(&m.key).unwrap_or(9) as i32;
    let steps = m.mode.steps();
    let n = steps.len() as i32;
    // A scale degree (any integer, octaves wrap) as semitones above the key.
    let degree = |d: i32| -> i32 { d.div_euclid(n) * 12 + steps[d.rem_euclid(n) as usize] as i32 };
    // Semitones from A4 of degree `d` in octave `oct` (4 = the octave of middle C).
    let note = |d: i32, oct: i32| -> f32 { (key + degree(d) + (oct - 4) * 12 - 9) as f32 };
    let beat = 60.0 / m.tempo.clamp(50.0, 200.0);
    let bar = beat * 4.0;
    let six = beat / 4.0;
    // The progression: four chords (the first the home chord), played twice.
    let choices = [3, 4, 5, 1, 6, 2];
    let mut prog = [0i32; 4];
    for c in prog.iter_mut().skip(1) {
        *c = choices[rng.below(choices.len() as u32) as usize];
    }
    if prog[3] == prog[2] {
        prog[3] = 4;
    }
    let bass_rhythm: Vec<bool> = (0..8).map(|k| k == 0 || rng.below(100) < 55).collect();
    let arp_shape = rng.below(3);
    let mut layers: [Vec<Note>; LAYERS] = Default::default();
    let mut melody_deg = 4i32;
    for b in 0..BARS {
        let t0 = b as f32 * bar;
        let root = prog[b % 4];
        // Pad: the chord's three notes, held the whole bar.
        for (k, d) in [0, 2, 4].iter().enumerate() {
            layers[0].push(Note {
                at: t0,
                len: bar,
                freq: freq(note(root + d, 3)),
                vel: 0.055,
                pan: (k as f32 - 1.0) * 0.5,
                timbre: Timbre::Pad,
            });
        }
        // Bass: the root on eighths, in the seed's rhythm.
        for (k, on) in bass_rhythm.iter().enumerate() {
            if *on {
                let oct = if k == 7 && b % 2 == 1 { 3 } else { 2 };
                layers[1].push(Note {
                    at: t0 + k as f32 * beat / 2.0,
                    len: beat / 2.0 * 0.9,
                    freq: freq(note(root, oct)),
                    vel: 0.16,
                    pan: 0.0,
                    timbre: Timbre::Bass,
                });
            }
        }
        // Arpeggio: the chord's notes on sixteenths, up, down or up-and-down.
        let tones = [0, 2, 4, 7];
        for k in 0..16 {
            let i = match arp_shape {
                0 => k % 4,
                1 => 3 - k % 4,
                _ => [0, 1, 2, 3, 2, 1][k % 6],
            };
            layers[2].push(Note {
                at: t0 + k as f32 * six,
                len: six * 0.9,
                freq: freq(note(root + tones[i], 4)),
                vel: if k % 4 == 0 { 0.05 } else { 0.035 },
                pan: 0.35,
                timbre: Timbre::Pluck,
            });
        }
        // Drums: kick on 1 and 3 (and the "and" of 4 every other bar), snare on 2 and 4,
        // hats on eighths.
        for k in 0..8 {
            let at = t0 + k as f32 * beat / 2.0;
            if k == 0 || k == 4 || (k == 7 && b % 2 == 1) {
                layers[3].push(Note { at, len: 0.3, freq: 55.0, vel: 0.5, pan: 0.0, timbre: Timbre::Kick });
            }
            if k == 2 || k == 6 {
                layers[3].push(Note { at, len: 0.2, freq: 180.0, vel: 0.22, pan: 0.0, timbre: Timbre::Snare });
            }
            layers[3].push(Note {
                at,
                len: 0.05,
                freq: 0.0,
                vel: if k % 2 == 0 { 0.05 } else { 0.08 },
                pan: -0.3,
                timbre: Timbre::Hat,
            });
        }
        // Lead: a walk on the scale over the chord, eighths with rests, phrases of two
        // bars (the second answers the first a step lower).
        for k in 0..8 {
            if rng.below(100) < 30 && k != 0 {
                continue;
            }
            let step = [-2, -1, -1, 0, 1, 1, 2][rng.below(7) as usize];
            melody_deg = (melody_deg + step).clamp(root, root + 9);
            let long = k % 4 == 3 || rng.below(4) == 0;
            layers[4].push(Note {
                at: t0 + k as f32 * beat / 2.0,
                len: if long { beat } else { beat / 2.0 * 0.85 },
                freq: freq(note(melody_deg - (b % 2) as i32, 5)),
                vel: 0.07,
                pan: -0.15,
                timbre: Timbre::Lead(m.lead),
            });
        }
        // Top: sixteenth hats and a high bell on the chord, the last phase's drive.
        for k in 0..16 {
            let at = t0 + k as f32 * six;
            layers[5].push(Note { at, len: 0.04, freq: 0.0, vel: 0.05, pan: 0.4, timbre: Timbre::Hat });
            if k % 3 == 0 {
                layers[5].push(Note {
                    at,
                    len: six * 2.0,
                    freq: freq(note(root + [0, 4, 2, 7][k % 4], 6)),
                    vel: 0.03,
                    pan: -0.4,
                    timbre: Timbre::Lead(Voice::Bell),
                });
            }
        }
    }
    Score { seconds: bar * BARS as f32, layers }
}

fn noise(seed: &mut u32) -> f32 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 17;
    *seed ^= *seed << 5;
    (*seed as f32 / u32::MAX as f32) * 2.0 - 1.0
}

/// One sample of a note `t` seconds after it began (silent once its release is over).
fn voice(n: &Note, t: f32, seed: &mut u32) -> f32 {
    let f = n.freq;
    let ph = |k: f32| (f * k * t).fract();
    let tri = |p: f32| 4.0 * (p - 0.5).abs() - 1.0;
    let release = 0.08;
    let gate = if t < n.len { 1.0 } else { (1.0 - (t - n.len) / release).max(0.0) };
    match n.timbre {
        Timbre::Pad => {
            // Two detuned saws, slow in and out.
            let a = (t / 0.4).min(1.0) * gate;
            let s = (2.0 * ph(1.0) - 1.0) + (2.0 * ph(1.006) - 1.0);
            s * 0.5 * a
        }
        Timbre::Bass => {
            let a = (-t * 5.0).exp() * 0.7 + 0.3;
            ((TAU * f * t).sin() + 0.35 * (if ph(1.0) < 0.5 { 1.0 } else { -1.0 })) * a * gate
        }
        Timbre::Pluck => tri(ph(1.0)) * (-t * 18.0).exp() * gate,
        Timbre::Kick => {
            let sweep = 50.0 + 110.0 * (-t * 30.0).exp();
            (TAU * sweep * t).sin() * (-t * 9.0).exp()
        }
        Timbre::Snare => (noise(seed) * 0.8 + (TAU * f * t).sin() * 0.4) * (-t * 22.0).exp(),
        Timbre::Hat => noise(seed) * (-t * 90.0).exp(),
        Timbre::Lead(v) => {
            let vib = 1.0 + 0.004 * (TAU * 5.5 * t).sin() * (t * 2.0).min(1.0);
            let p = (f * vib * t).fract();
            let a = (t / 0.01).min(1.0) * gate;
            match v {
                Voice::Triangle => tri(p) * a,
                Voice::Square => (if p < 0.5 { 0.6 } else { -0.6 }) * a,
                Voice::Saw => (2.0 * p - 1.0) * 0.7 * a,
                Voice::Bell => {
                    let d = (-t * 4.0).exp();
                    ((TAU * f * t).sin() + 0.5 * (TAU * f * 2.76 * t).sin() * d) * d * gate.max(d * 0.5)
                }
            }
        }
    }
}

/// Renders layer `layer` of music `m` as a seamless loop: stereo samples at `rate`
/// (interleaved left, right), one loop long. A note that rings past the end wraps to the
/// start, so the loop has no click.
pub fn stem(m: &MusicDef, layer: usize, rate: u32) -> Vec<[f32; 2]> {
    let score = compose(m);
    let len = (score.seconds * rate as f32) as usize;
    let mut out = vec![[0.0f32; 2]; len.max(1)];
    let mut seed = 0x1234_5678u32 ^ (layer as u32 * 7919);
    for n in score.layers.get(layer).map(|l| l.as_slice()).unwrap_or(&[]) {
        let start = (n.at * rate as f32) as usize;
        let tail = match n.timbre {
            Timbre::Kick | Timbre::Snare | Timbre::Hat => n.len,
            Timbre::Lead(Voice::Bell) => n.len + 0.6,
            _ => n.len + 0.08,
        };
        let count = (tail * rate as f32) as usize;
        let (l, r) = ((1.0 - n.pan) * 0.5 + 0.25, (1.0 + n.pan) * 0.5 + 0.25);
        for k in 0..count {
            let s = voice(n, k as f32 / rate as f32, &mut seed) * n.vel;
            let i = (start + k) % out.len();
            out[i][0] += s * l;
            out[i][1] += s * r;
        }
    }
    out
}

/// The music of `m` with `layers` layers (see [`layers_at`]) for `seconds`, looped and
/// mixed, soft-clipped: what `hailfire render --music` writes.
pub fn render(m: &MusicDef, layers: usize, seconds: f32, rate: u32) -> Vec<[f32; 2]> {
    let stems: Vec<Vec<[f32; 2]>> = (0..layers.min(LAYERS)).map(|l| stem(m, l, rate)).collect();
    let n = (seconds.max(0.0) * rate as f32) as usize;
    (0..n)
        .map(|i| {
            let mut f = [0.0f32; 2];
            for s in &stems {
                let x = s[i % s.len()];
                f[0] += x[0];
                f[1] += x[1];
            }
            [f[0].tanh(), f[1].tanh()]
        })
        .collect()
}

/// Root-mean-square loudness of samples.
pub fn rms(s: &[[f32; 2]]) -> f32 {
    if s.is_empty() {
        return 0.0;
    }
    (s.iter().map(|f| f[0] * f[0] + f[1] * f[1]).sum::<f32>() / (2 * s.len()) as f32).sqrt()
}

/// A 16-bit stereo WAV file of the samples.
pub fn wav(samples: &[[f32; 2]], rate: u32) -> Vec<u8> {
    let data = (samples.len() * 4) as u32;
    let mut b = Vec::with_capacity(44 + data as usize);
    b.extend_from_slice(b"RIFF");
    b.extend_from_slice(&(36 + data).to_le_bytes());
    b.extend_from_slice(b"WAVEfmt ");
    b.extend_from_slice(&16u32.to_le_bytes());
    b.extend_from_slice(&1u16.to_le_bytes());
    b.extend_from_slice(&2u16.to_le_bytes());
    b.extend_from_slice(&rate.to_le_bytes());
    b.extend_from_slice(&(rate * 4).to_le_bytes());
    b.extend_from_slice(&4u16.to_le_bytes());
    b.extend_from_slice(&16u16.to_le_bytes());
    b.extend_from_slice(b"data");
    b.extend_from_slice(&data.to_le_bytes());
    for f in samples {
        for c in f {
            b.extend_from_slice(&((c.clamp(-1.0, 1.0) * 32767.0) as i16).to_le_bytes());
        }
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loop_is_eight_bars_long_and_every_layer_sounds() {
        let m = MusicDef::default();
        let bar = 60.0 / m.tempo * 4.0;
        for l in 0..LAYERS {
            let s = stem(&m, l, 8000);
            assert_eq!(s.len(), (bar * BARS as f32 * 8000.0) as usize, "layer {l}");
            assert!(rms(&s) > 0.005, "layer {l} is silent: {}", rms(&s));
        }
    }

    #[test]
    fn every_place_has_music_of_the_asked_length_that_grows_louder_with_each_phase() {
        let c = crate::content::load(&[crate::content::ModRoot::Mod(crate::content::content_dir())]);
        let mut themes = vec![("title".to_string(), title_music()), ("hub".into(), c.defs.hub.theme.music.clone())];
        themes.extend(c.defs.dungeons.iter().map(|(id, d)| (id.clone(), d.theme.music.clone())));
        assert!(themes.len() >= 4);
        let rate = 11_025;
        for (id, m) in &themes {
            let mut last = 0.0;
            for phase in 0..=3u8 {
                let s = render(m, layers_at(phase), 10.0, rate);
                assert_eq!(s.len(), 10 * rate as usize, "{id}");
                let loud = rms(&s);
                assert!(loud > 0.02, "{id} phase {phase}: nearly silent ({loud})");
                assert!(loud > last, "{id}: phase {phase} ({loud}) is no louder than the one before ({last})");
                last = loud;
            }
        }
        // Places sound different from each other.
        let first: Vec<Vec<[f32; 2]>> = themes.iter().map(|(_, m)| render(m, 3, 2.0, rate)).collect();
        for i in 0..first.len() {
            for j in i + 1..first.len() {
                assert_ne!(first[i], first[j], "{} and {} sound the same", themes[i].0, themes[j].0);
            }
        }
    }

    #[test]
    fn the_seed_changes_the_song() {
        let a = MusicDef::default();
        let b = MusicDef { seed: a.seed + 1, ..a.clone() };
        assert_ne!(stem(&a, 4, 8000), stem(&b, 4, 8000));
        assert_eq!(stem(&a, 4, 8000), stem(&a, 4, 8000), "the same seed, the same song");
    }
}
