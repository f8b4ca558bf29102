//! Mods' sounds: the WAV and Ogg Vorbis decoder every player runs on what a server sends.
//! It never panics, and whatever it accepts is within the caps.
#![no_main]
use hailfire::media::{decode_sound, MAX_SOUND_SECONDS, SOUND_RATES};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(s) = decode_sound(data) {
        assert!(SOUND_RATES.contains(&s.rate) && (1..=2).contains(&s.channels));
        assert!(s.frames() <= (s.rate * MAX_SOUND_SECONDS) as usize);
        assert!(s.samples.iter().all(|v| v.is_finite() && (-1.0..=1.0).contains(v)));
    }
});
