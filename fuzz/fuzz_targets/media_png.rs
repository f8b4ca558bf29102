//! Mods' sprites: the PNG decoder every player runs on what a server sends. It never
//! panics, and whatever it accepts is within the caps and exactly its claimed size.
#![no_main]
use hailfire::media::{decode_png, MAX_SPRITE_SIDE};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(img) = decode_png(data) {
        assert!(img.width >= 1 && img.width <= MAX_SPRITE_SIDE && img.height >= 1 && img.height <= MAX_SPRITE_SIDE);
        assert_eq!(img.rgba.len(), img.width as usize * img.height as usize * 4);
    }
});
