//! Sound: effects and music synthesised in code at start-up (no audio files), played with
//! kira on three volume levels (master, effects, music). With no sound card the game plays
//! muted, after one warning.

use std::f32::consts::TAU;
use std::sync::Arc;

use kira::sound::static_sound::{StaticSoundData, StaticSoundHandle, StaticSoundSettings};
use kira::track::{TrackBuilder, TrackHandle};
use kira::{AudioManager, AudioManagerSettings, Decibels, DefaultBackend, Frame, Tween};

use super::music;
use crate::sim::defs::MusicDef;

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
        // A graze: a soft, short, high tick (it comes often: quiet, and rate-limited).
        "graze" => frames(0.05, |t| (TAU * 2600.0 * t).sin() * 0.06 * env(t, 0.001, 0.012)),
        // Downed: a falling two-note fall and a low thud.
        "downed" => frames(0.7, |t| {
            let f = if t < 0.2 { 392.0 } else { 261.63 };
            (TAU * f * t).sin() * 0.2 * env(t % 0.2, 0.005, 0.18) + (TAU * 70.0 * t).sin() * 0.25 * env(t, 0.002, 0.12)
        }),
        // A run lost: three notes down, slow.
        "run_lost" => frames(1.6, |t| {
            let notes = [392.0, 311.13, 261.63];
            let k = ((t / 0.35) as usize).min(2);
            let lt = t - k as f32 * 0.35;
            let tri = 2.0 * (2.0 * ((notes[k] * t) % 1.0) - 1.0).abs() - 1.0;
            tri * 0.2 * env(lt, 0.01, if k == 2 { 0.6 } else { 0.3 })
        }),
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
    /// Mods' sounds (`sounds/NAME.ogg`) from the content in play, and the files they were
    /// decoded from.
    mod_effects: Vec<(String, StaticSoundData)>,
    mod_effects_of: Vec<crate::sim::client_defs::MediaAsset>,
    /// The music playing: its theme, one handle per layer, how many layers are heard.
    playing: Option<(MusicDef, Vec<StaticSoundHandle>, usize)>,
    /// A theme's layers being made on another thread (a second or so).
    pending: Option<(MusicDef, std::sync::mpsc::Receiver<Vec<StaticSoundData>>)>,
    /// A theme whose making failed (not tried again).
    failed: Option<MusicDef>,
    /// When each effect last played (graze is rate-limited).
    last_played: std::collections::HashMap<String, std::time::Instant>,
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
            "graze",
            "downed",
            "run_lost",
            "enemy",
        ];
        let effects = names.iter().map(|n| (n.to_string(), data(synth_effect(n)))).collect();
        let (backend, muted_reason) = match Self::open(master, sfx, music) {
            Ok(b) => (b, None),
            Err(why) => {
                tracing::warn!("no sound device ({why}): playing muted");
                (Backend::Muted, Some(why))
            }
        };
        Audio {
            backend,
            effects,
            mod_effects: Vec::new(),
            mod_effects_of: Vec::new(),
            playing: None,
            pending: None,
            failed: None,
            last_played: std::collections::HashMap::new(),
            muted_reason,
        }
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

    /// Plays an effect at most once every `gap` (a graze can come every tick).
    pub fn play_limited(&mut self, name: &str, gap: std::time::Duration) {
        let now = std::time::Instant::now();
        if self.last_played.get(name).is_some_and(|t| now.duration_since(*t) < gap) {
            return;
        }
        self.last_played.insert(name.to_string(), now);
        self.play(name);
    }

    /// Takes the content's own sounds (decoded again only when they change: at join or a
    /// live content update). A sound that fails to decode (checked content cannot hold
    /// one) is left out and plays the generic sound.
    pub fn set_mod_sounds(&mut self, sounds: &[crate::sim::client_defs::MediaAsset]) {
        if self.mod_effects_of == sounds {
            return;
        }
        self.mod_effects_of = sounds.to_vec();
        self.mod_effects = sounds
            .iter()
            .filter_map(|a| {
                let s = crate::media::decode_sound(&a.bytes).ok()?;
                let frames: Vec<Frame> = if s.channels == 2 {
                    s.samples.chunks_exact(2).map(|p| Frame { left: p[0], right: p[1] }).collect()
                } else {
                    s.samples.iter().map(|&v| Frame { left: v, right: v }).collect()
                };
                let d = StaticSoundData {
                    sample_rate: s.rate,
                    frames: Arc::from(frames),
                    settings: StaticSoundSettings::default(),
                    slice: None,
                };
                Some((a.name.clone(), d))
            })
            .collect();
    }

    /// How long the effect `name` plays, seconds (a mod's sound or the game's own), if
    /// this game has it.
    pub fn effect_seconds(&self, name: &str) -> Option<f64> {
        self.mod_effects.iter().chain(&self.effects).find(|(n, _)| n == name).map(|(_, d)| d.duration().as_secs_f64())
    }

    /// Plays an effect by name: a mod's sound, else the game's own (unknown names get the
    /// generic enemy sound).
    pub fn play(&mut self, name: &str) {
        let Backend::Real(r) = &mut self.backend else { return };
        let d = self
            .mod_effects
            .iter()
            .find(|(n, _)| n == name)
            .or_else(|| self.effects.iter().find(|(n, _)| n == name))
            .or_else(|| self.effects.iter().find(|(n, _)| n == "enemy"));
        if let Some((_, d)) = d {
            let _ = r.sfx.play(d.clone());
        }
    }

    /// How many layers of music are heard now (None: no music plays).
    pub fn music_layers(&self) -> Option<usize> {
        self.playing.as_ref().map(|(_, _, n)| *n)
    }

    /// Plays the music of a place with the layers of boss phase `phase` (0: no boss;
    /// see `music::layers_at`); `None` stops it. A new theme is made on another thread and
    /// starts when ready; the same theme with other layers fades them in or out.
    pub fn music(&mut self, want: Option<(&MusicDef, u8)>) {
        let Some((m, phase)) = want else {
            self.pending = None;
            if let Some((_, mut hs, _)) = self.playing.take() {
                for h in hs.iter_mut() {
                    h.stop(Tween::default());
                }
            }
            return;
        };
        if !matches!(self.backend, Backend::Real(_)) {
            return;
        }
        let layers = music::layers_at(phase);
        if let Some((now, hs, heard)) = &mut self.playing {
            if now == m {
                if *heard != layers {
                    let fade = Tween { duration: std::time::Duration::from_millis(1500), ..Default::default() };
                    for (k, h) in hs.iter_mut().enumerate() {
                        h.set_volume(if k < layers { Decibels::IDENTITY } else { Decibels::SILENCE }, fade);
                    }
                    *heard = layers;
                }
                return;
            }
        }
        // One theme is made at a time: a server sending places faster than they are made
        // waits for the one being made (and what is wanted then is made next).
        if let Some((p, rx)) = &self.pending {
            match rx.try_recv() {
                Err(std::sync::mpsc::TryRecvError::Empty) => return,
                Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                    // The thread died: that theme stays silent rather than being tried forever.
                    self.failed = Some(p.clone());
                    self.pending = None;
                    return;
                }
                Ok(stems) => {
                    let made = p.clone();
                    self.pending = None;
                    if &made == m {
                        self.start(stems, m, layers);
                        return;
                    }
                }
            }
        }
        if self.failed.as_ref() == Some(m) {
            return;
        }
        let (tx, rx) = std::sync::mpsc::channel();
        let theme = m.clone();
        let spawned = std::thread::Builder::new().name("music".into()).spawn(move || {
            let stems: Vec<StaticSoundData> = (0..music::LAYERS)
                .map(|l| {
                    let frames: Vec<Frame> =
                        music::stem(&theme, l, RATE).into_iter().map(|[left, right]| Frame { left, right }).collect();
                    data(frames).loop_region(..)
                })
                .collect();
            let _ = tx.send(stems);
        });
        if spawned.is_ok() {
            self.pending = Some((m.clone(), rx));
        }
    }

    /// Starts a theme's stems together, looped, the first `layers` heard (fading in over the
    /// old theme's fade out).
    fn start(&mut self, stems: Vec<StaticSoundData>, m: &MusicDef, layers: usize) {
        let Backend::Real(r) = &mut self.backend else { return };
        if let Some((_, mut hs, _)) = self.playing.take() {
            let out = Tween { duration: std::time::Duration::from_millis(800), ..Default::default() };
            for h in hs.iter_mut() {
                h.stop(out);
            }
        }
        let fade_in = Tween { duration: std::time::Duration::from_millis(800), ..Default::default() };
        let mut hs = Vec::new();
        for (k, s) in stems.into_iter().enumerate() {
            let v = if k < layers { Decibels::IDENTITY } else { Decibels::SILENCE };
            if let Ok(mut h) = r.music.play(s.volume(v).fade_in_tween(fade_in)) {
                h.set_volume(v, Tween::default());
                hs.push(h);
            }
        }
        self.playing = Some((m.clone(), hs, layers));
    }
}
