//! Sound: effects and music synthesised in code at start-up (no audio files), played with
//! kira on three volume levels (master, effects, music). With no sound card the game plays
//! muted, after one warning.

use std::f32::consts::TAU;
use std::sync::Arc;

use kira::sound::static_sound::{StaticSoundData, StaticSoundHandle, StaticSoundSettings};
use kira::track::{TrackBuilder, TrackHandle};
use kira::{AudioManager, AudioManagerSettings, Decibels, DefaultBackend, Frame, Tween};

pub const RATE: u32 = 44_100;

/// Linear 0..1 to decibels (silence below -60 dB).
pub fn db(v: f32) -> Decibels {
    if v <= 0.001 {
        Decibels::SILENCE
    } else {
        Decibels((20.0 * v.log10()).max(-60.0))
    }
}

fn frames(seconds: f32, mut f: impl FnMut(f32) -> f32) -> Vec<Frame> {
    let n = (seconds * RATE as f32) as usize;
    (0..n)
        .map(|i| {
            let v = f(i as f32 / RATE as f32).clamp(-1.0, 1.0);
            Frame { left: v, right: v }
        })
        .collect()
}

fn noise(seed: &mut u32) -> f32 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 17;
    *seed ^= *seed << 5;
    (*seed as f32 / u32::MAX as f32) * 2.0 - 1.0
}

fn env(t: f32, attack: f32, decay: f32) -> f32 {
    if t < attack {
        t / attack
    } else {
        (-(t - attack) / decay).exp()
    }
}

/// The game's sound effects, by name.
pub fn synth_effect(name: &str) -> Vec<Frame> {
    match name {
        "fire" => frames(0.07, |t| {
            let f = 880.0 - 3000.0 * t;
            (TAU * f * t).sin().signum() * 0.18 * env(t, 0.002, 0.02)
        }),
        "hit_taken" => {
            let mut s = 7u32;
            let n: Vec<f32> = (0..(0.2 * RATE as f32) as usize).map(|_| noise(&mut s)).collect();
            frames(0.2, move |t| {
                let i = ((t * RATE as f32) as usize).min(n.len() - 1);
                (n[i] * 0.5 + (TAU * 110.0 * t).sin()) * 0.45 * env(t, 0.003, 0.06)
            })
        }
        "hit_dealt" => frames(0.04, |t| (TAU * 2000.0 * t).sin() * 0.12 * env(t, 0.001, 0.01)),
        "death" => frames(0.9, |t| {
            let f = 440.0 * (1.0 - t * 0.85);
            let saw = 2.0 * ((f * t) % 1.0) - 1.0;
            saw * 0.3 * env(t, 0.01, 0.4)
        }),
        "phase" => frames(1.4, |t| {
            let a = env(t, 0.3, 0.6);
            ((TAU * 220.0 * t).sin() + (TAU * 330.0 * t).sin() * 0.8 + (TAU * 440.0 * t).sin() * 0.6) * 0.15 * a
        }),
        "portal" => frames(0.6, |t| {
            let f = 300.0 + 1500.0 * t * t;
            ((TAU * f * t).sin() * 0.7 + (TAU * f * 1.5 * t).sin() * 0.3) * 0.22 * env(t, 0.05, 0.25)
        }),
        "escape" => frames(1.0, |t| {
            let tri = 2.0 * (2.0 * ((220.0 * t) % 1.0) - 1.0).abs() - 1.0;
            tri * 0.18 * (0.6 + 0.4 * (TAU * 8.0 * t).sin()) * (1.0 - t).max(0.0)
        }),
        "cleared" => frames(1.5, |t| {
            let notes = [523.25, 659.25, 783.99, 1046.5];
            let k = ((t / 0.18) as usize).min(3);
            let lt = t - k as f32 * 0.18;
            (TAU * notes[k] * t).sin() * 0.2 * env(lt, 0.005, 0.3)
        }),
        // A flare: a falling whoosh of noise under a bright chord.
        "flare" => {
            let mut s = 31u32;
            frames(0.9, move |t| {
                let chord = (TAU * 392.0 * t).sin() + (TAU * 587.33 * t).sin() * 0.7 + (TAU * 784.0 * t).sin() * 0.5;
                (noise(&mut s) * 0.5 * (1.0 - t).max(0.0) + chord * 0.25) * 0.3 * env(t, 0.01, 0.35)
            })
        }
        // Revived: two rising notes.
        "revive" => frames(0.5, |t| {
            let f = if t < 0.18 { 523.25 } else { 783.99 };
            (TAU * f * t).sin() * 0.22 * env(t % 0.18, 0.005, 0.15)
        }),
        // Enemy and script sounds ("shotgun", "sniper", "summon", anything a mod names).
        _ => {
            let mut s = 99u32;
            frames(0.12, move |t| (noise(&mut s) * 0.4 + (TAU * 180.0 * t).sin() * 0.6) * 0.16 * env(t, 0.002, 0.03))
        }
    }
}

/// A loop of music: soft arpeggios over a bass pulse. `boss` is faster and minor.
pub fn synth_music(boss: bool) -> Vec<Frame> {
    let (bpm, scale, bars): (f32, [f32; 5], usize) = if boss {
        (140.0, [220.0, 261.63, 293.66, 329.63, 392.0], 4)
    } else {
        (96.0, [261.63, 293.66, 329.63, 392.0, 440.0], 4)
    };
    let beat = 60.0 / bpm / 2.0;
    let steps = bars * 8;
    let pattern = [0usize, 2, 4, 2, 1, 3, 4, 3];
    let total = steps as f32 * beat;
    frames(total, move |t| {
        let k = ((t / beat) as usize).min(steps - 1);
        let lt = t - k as f32 * beat;
        let bar = k / 8;
        let root = [1.0, 0.8909, 0.75, 0.8409][bar % 4];
        let f = scale[pattern[k % 8]] * root;
        let tri = 2.0 * (2.0 * ((f * t) % 1.0) - 1.0).abs() - 1.0;
        let lead = tri * 0.12 * env(lt, 0.01, beat * 0.8);
        let bass_f = scale[0] * root / 2.0;
        let bass = (TAU * bass_f * t).sin() * if boss { 0.16 * env(lt, 0.005, 0.08) } else { 0.09 };
        lead + bass
    })
}

struct Real {
    manager: AudioManager<DefaultBackend>,
    sfx: TrackHandle,
    music: TrackHandle,
}

enum Backend {
    Real(Box<Real>),
    Muted,
}

/// The game's audio. Muted when there is no usable sound device.
pub struct Audio {
    backend: Backend,
    effects: Vec<(String, StaticSoundData)>,
    hub_music: StaticSoundData,
    boss_music: StaticSoundData,
    playing: Option<(bool, StaticSoundHandle)>,
    /// Why the game is muted, shown once.
    pub muted_reason: Option<String>,
}

fn data(f: Vec<Frame>) -> StaticSoundData {
    StaticSoundData { sample_rate: RATE, frames: Arc::from(f), settings: StaticSoundSettings::default(), slice: None }
}

impl Audio {
    pub fn new(master: f32, sfx: f32, music: f32) -> Audio {
        let names = [
            "fire",
            "hit_taken",
            "hit_dealt",
            "death",
            "phase",
            "portal",
            "escape",
            "cleared",
            "flare",
            "revive",
            "enemy",
        ];
        let effects = names.iter().map(|n| (n.to_string(), data(synth_effect(n)))).collect();
        let hub_music = data(synth_music(false)).loop_region(..);
        let boss_music = data(synth_music(true)).loop_region(..);
        let (backend, muted_reason) = match Self::open(master, sfx, music) {
            Ok(b) => (b, None),
            Err(why) => {
                tracing::warn!("no sound device ({why}): playing muted");
                (Backend::Muted, Some(why))
            }
        };
        Audio { backend, effects, hub_music, boss_music, playing: None, muted_reason }
    }

    fn open(master: f32, sfx: f32, music: f32) -> Result<Backend, String> {
        let mut manager =
            AudioManager::<DefaultBackend>::new(AudioManagerSettings::default()).map_err(|e| e.to_string())?;
        manager.main_track().set_volume(db(master), Tween::default());
        let sfx = manager.add_sub_track(TrackBuilder::new().volume(db(sfx))).map_err(|e| e.to_string())?;
        let music = manager.add_sub_track(TrackBuilder::new().volume(db(music))).map_err(|e| e.to_string())?;
        Ok(Backend::Real(Box::new(Real { manager, sfx, music })))
    }

    pub fn is_muted(&self) -> bool {
        matches!(self.backend, Backend::Muted)
    }

    pub fn set_volumes(&mut self, master: f32, sfx_v: f32, music_v: f32) {
        if let Backend::Real(r) = &mut self.backend {
            r.manager.main_track().set_volume(db(master), Tween::default());
            r.sfx.set_volume(db(sfx_v), Tween::default());
            r.music.set_volume(db(music_v), Tween::default());
        }
    }

    /// Plays an effect by name (unknown names get the generic enemy sound).
    pub fn play(&mut self, name: &str) {
        let Backend::Real(r) = &mut self.backend else { return };
        let d =
            self.effects.iter().find(|(n, _)| n == name).or_else(|| self.effects.iter().find(|(n, _)| n == "enemy"));
        if let Some((_, d)) = d {
            let _ = r.sfx.play(d.clone());
        }
    }

    /// Switches the music (hub or boss); `None` stops it.
    pub fn music(&mut self, boss: Option<bool>) {
        if self.playing.as_ref().map(|(b, _)| *b) == boss {
            return;
        }
        if let Some((_, mut h)) = self.playing.take() {
            h.stop(Tween::default());
        }
        let Some(boss) = boss else { return };
        if let Backend::Real(r) = &mut self.backend {
            let d = if boss { self.boss_music.clone() } else { self.hub_music.clone() };
            if let Ok(h) = r.music.play(d) {
                self.playing = Some((boss, h));
            }
        }
    }
}
