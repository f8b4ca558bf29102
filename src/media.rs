//! Mods' own sprites (PNG) and sounds (WAV, Ogg Vorbis): the caps, the decoders and the
//! sprite atlas layout.
//!
//! The same functions run in three places, so a server can never load media its players
//! would refuse: the mod loader on every file, the client on every file it receives at
//! join (or finds in its cache), and the renderer and the mixer when they turn them into
//! pixels and samples. Every decoder checks what a file claims (dimensions, channels,
//! rate, length) before it allocates for it, stops at the caps however the data inflates,
//! and is fuzzed (`fuzz/fuzz_targets/media_png.rs`, `media_sound.rs`).
//!
//! Only two well-kept decoders are linked for this: `png` and `symphonia` with its Ogg
//! and WAV readers and its Vorbis and PCM codecs registered by hand (never the crate's
//! default set, which would accept whatever formats another dependency turned on).

use std::io::Cursor;

/// Largest PNG file, bytes.
pub const MAX_SPRITE_FILE: usize = 256 << 10;
/// Largest side of a sprite, pixels.
pub const MAX_SPRITE_SIDE: u32 = 512;
/// Largest sound file, bytes.
pub const MAX_SOUND_FILE: usize = 512 << 10;
/// Longest sound, seconds.
pub const MAX_SOUND_SECONDS: u32 = 10;
/// Sample rates a sound may have, Hz.
pub const SOUND_RATES: std::ops::RangeInclusive<u32> = 8_000..=48_000;
/// Media one mod may ship, bytes (files as stored).
pub const MAX_MOD_MEDIA: usize = 2 << 20;
/// Sprites and sounds the whole content may hold.
pub const MAX_SPRITES: usize = 256;
pub const MAX_SOUNDS: usize = 256;
/// Side of the one texture every sprite is packed into, pixels.
pub const ATLAS_SIDE: u32 = 2048;
/// Transparent pixels kept around each sprite in the atlas (no neighbour bleeds in when
/// the sampler filters).
pub const ATLAS_GUTTER: u32 = 2;

/// A decoded sprite: RGBA8, row by row.
#[derive(Clone, Debug, PartialEq)]
pub struct Image {
    pub width: u32,
    pub height: u32,
    pub rgba: Vec<u8>,
}

/// A decoded sound: interleaved samples in [-1, 1].
#[derive(Clone, Debug, PartialEq)]
pub struct Sound {
    pub rate: u32,
    pub channels: u16,
    pub samples: Vec<f32>,
}

impl Sound {
    pub fn frames(&self) -> usize {
        self.samples.len() / self.channels.max(1) as usize
    }
    pub fn seconds(&self) -> f32 {
        self.frames() as f32 / self.rate.max(1) as f32
    }
}

/// A sprite or sound name (the file's name without its extension).
pub fn name_ok(s: &str) -> bool {
    !s.is_empty() && s.len() <= 64 && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// What the first bytes say a file is, for "this is not a PNG" messages.
fn looks_like(bytes: &[u8]) -> &'static str {
    if bytes.starts_with(b"\x89PNG") {
        "a PNG"
    } else if bytes.starts_with(b"OggS") {
        "an Ogg file"
    } else if bytes.starts_with(b"RIFF") {
        "a RIFF (WAV) file"
    } else if bytes.starts_with(b"\xff\xd8\xff") {
        "a JPEG"
    } else if bytes.starts_with(b"GIF8") {
        "a GIF"
    } else if bytes.starts_with(b"ID3") || bytes.starts_with(b"\xff\xfb") {
        "an MP3"
    } else if bytes.starts_with(b"fLaC") {
        "a FLAC file"
    } else if bytes.is_empty() {
        "empty"
    } else {
        "not a known format"
    }
}

/// Decodes a PNG sprite, checking its size before any pixel is allocated. A panic inside
/// the decoder library is contained and reported as a damaged file.
pub fn decode_png(bytes: &[u8]) -> Result<Image, String> {
    crate::crash::contained(|| png_inner(bytes))
        .unwrap_or_else(|| Err("is damaged (the PNG decoder failed on it)".into()))
}

fn png_inner(bytes: &[u8]) -> Result<Image, String> {
    if bytes.len() > MAX_SPRITE_FILE {
        return Err(format!("is {} bytes; a sprite may be at most {MAX_SPRITE_FILE}", bytes.len()));
    }
    if !bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        return Err(format!("is not a PNG (it is {}); save it as PNG", looks_like(bytes)));
    }
    // Enough for the largest sprite at 16 bits a channel, and nothing more.
    let limit = (MAX_SPRITE_SIDE * MAX_SPRITE_SIDE * 8) as usize + (1 << 16);
    let mut dec = png::Decoder::new_with_limits(Cursor::new(bytes), png::Limits { bytes: limit });
    dec.set_transformations(png::Transformations::EXPAND | png::Transformations::STRIP_16);
    let mut reader = dec.read_info().map_err(|e| format!("is not a valid PNG ({e})"))?;
    let (w, h) = {
        let info = reader.info();
        (info.width, info.height)
    };
    if w == 0 || h == 0 || w > MAX_SPRITE_SIDE || h > MAX_SPRITE_SIDE {
        return Err(format!("is {w}x{h} pixels; a sprite may be at most {MAX_SPRITE_SIDE}x{MAX_SPRITE_SIDE}"));
    }
    if reader.info().is_animated() {
        return Err("is an animated PNG; a sprite is one still image".into());
    }
    let size = reader.output_buffer_size().ok_or("is not a valid PNG (its size overflows)")?;
    if size > w as usize * h as usize * 4 {
        return Err("is not a valid PNG (its pixel format is larger than 8 bits a channel)".into());
    }
    let mut buf = vec![0u8; size];
    let frame = reader.next_frame(&mut buf).map_err(|e| format!("is truncated or damaged ({e})"))?;
    buf.truncate(frame.buffer_size());
    if frame.bit_depth != png::BitDepth::Eight {
        return Err(format!("has {:?}-bit channels after expansion; save it with 8 bits a channel", frame.bit_depth));
    }
    let px = w as usize * h as usize;
    let rgba: Vec<u8> = match frame.color_type {
        png::ColorType::Rgba if buf.len() == px * 4 => buf,
        png::ColorType::Rgb if buf.len() == px * 3 => {
            buf.chunks_exact(3).flat_map(|p| [p[0], p[1], p[2], 255]).collect()
        }
        png::ColorType::GrayscaleAlpha if buf.len() == px * 2 => {
            buf.chunks_exact(2).flat_map(|p| [p[0], p[0], p[0], p[1]]).collect()
        }
        png::ColorType::Grayscale if buf.len() == px => buf.iter().flat_map(|&g| [g, g, g, 255]).collect(),
        other => return Err(format!("has an unexpected pixel layout ({other:?}, {} bytes)", buf.len())),
    };
    Ok(Image { width: w, height: h, rgba })
}

/// Just the size a PNG claims (for the atlas layout), read from its header.
pub fn png_size(bytes: &[u8]) -> Result<(u32, u32), String> {
    let dec = png::Decoder::new_with_limits(Cursor::new(bytes), png::Limits { bytes: 1 << 16 });
    let reader = dec.read_info().map_err(|e| format!("is not a valid PNG ({e})"))?;
    Ok((reader.info().width, reader.info().height))
}

/// Decodes a WAV (PCM) or Ogg Vorbis sound, checking its rate, channels and length before
/// it decodes, and stopping at [`MAX_SOUND_SECONDS`] whatever the headers said. A panic
/// inside the decoder library is contained and reported as a damaged file.
pub fn decode_sound(bytes: &[u8]) -> Result<Sound, String> {
    crate::crash::contained(|| sound_inner(bytes))
        .unwrap_or_else(|| Err("is damaged (the sound decoder failed on it)".into()))
}

fn sound_inner(bytes: &[u8]) -> Result<Sound, String> {
    use symphonia::core::codecs::audio::AudioDecoderOptions;
    use symphonia::core::codecs::registry::CodecRegistry;
    use symphonia::core::formats::probe::{Hint, Probe};
    use symphonia::core::formats::{FormatOptions, TrackType};
    use symphonia::core::io::MediaSourceStream;
    use symphonia::core::meta::MetadataOptions;

    if bytes.len() > MAX_SOUND_FILE {
        return Err(format!("is {} bytes; a sound may be at most {MAX_SOUND_FILE}", bytes.len()));
    }
    let wav = bytes.len() >= 12 && bytes.starts_with(b"RIFF") && &bytes[8..12] == b"WAVE";
    let ogg = bytes.starts_with(b"OggS");
    if !wav && !ogg {
        return Err(format!("is neither a WAV nor an Ogg Vorbis file (it is {})", looks_like(bytes)));
    }
    let mut probe = Probe::default();
    if wav {
        probe.register_format::<symphonia::default::formats::WavReader<'_>>();
    } else {
        probe.register_format::<symphonia::default::formats::OggReader<'_>>();
    }
    let mut codecs = CodecRegistry::new();
    codecs.register_audio_decoder::<symphonia::default::codecs::PcmDecoder>();
    codecs.register_audio_decoder::<symphonia::default::codecs::VorbisDecoder>();
    let mss = MediaSourceStream::new(Box::new(Cursor::new(bytes.to_vec())), Default::default());
    let mut format = probe
        .probe(&Hint::new(), mss, FormatOptions::default(), MetadataOptions::default())
        .map_err(|e| format!("is not a readable {} ({e})", if wav { "WAV" } else { "Ogg file" }))?;
    let track = format.default_track(TrackType::Audio).ok_or("has no audio track")?;
    let track_id = track.id;
    let params = track.codec_params.as_ref().and_then(|p| p.audio()).ok_or("has no audio track")?.clone();
    let rate = params.sample_rate.ok_or("does not say its sample rate")?;
    if !SOUND_RATES.contains(&rate) {
        return Err(format!(
            "has a sample rate of {rate} Hz; sounds must be {}..={} Hz",
            SOUND_RATES.start(),
            SOUND_RATES.end()
        ));
    }
    let channels = params.channels.as_ref().map(|c| c.count()).ok_or("does not say how many channels it has")?;
    if !(1..=2).contains(&channels) {
        return Err(format!("has {channels} channels; sounds are mono or stereo"));
    }
    let max_frames = (rate * MAX_SOUND_SECONDS) as u64;
    if track.num_frames.is_some_and(|n| n > max_frames) {
        return Err(format!(
            "is {:.1} s long; a sound may be at most {MAX_SOUND_SECONDS} s",
            track.num_frames.unwrap_or(0) as f64 / rate as f64
        ));
    }
    let mut decoder = codecs
        .make_audio_decoder(&params, &AudioDecoderOptions::default())
        .map_err(|e| format!("uses a codec this game does not play ({e}); use 16-bit PCM WAV or Ogg Vorbis"))?;
    let cap = max_frames as usize * channels;
    let mut samples: Vec<f32> = Vec::new();
    let mut chunk: Vec<f32> = Vec::new();
    loop {
        let packet = match format.next_packet() {
            Ok(Some(p)) => p,
            Ok(None) => break,
            Err(symphonia::core::errors::Error::IoError(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
            Err(e) => return Err(format!("is damaged ({e})")),
        };
        if packet.track_id != track_id {
            continue;
        }
        let buf = decoder.decode(&packet).map_err(|e| format!("is damaged ({e})"))?;
        if buf.spec().channels().count() != channels || buf.spec().rate() != rate {
            return Err("changes its rate or channels part way; save it again as one stream".into());
        }
        if samples.len() + buf.samples_interleaved() > cap {
            return Err(format!("is longer than {MAX_SOUND_SECONDS} s (a sound may be at most that)"));
        }
        chunk.resize(buf.samples_interleaved(), 0.0);
        buf.copy_to_slice_interleaved(&mut chunk);
        samples.extend(chunk.iter().map(|s| if s.is_finite() { s.clamp(-1.0, 1.0) } else { 0.0 }));
    }
    if samples.is_empty() {
        return Err("holds no audio".into());
    }
    Ok(Sound { rate, channels: channels as u16, samples })
}

/// Where each sprite goes in the atlas (x, y, w, h), in the order given: shelves, the
/// tallest sprites first, [`ATLAS_GUTTER`] pixels apart. The same sizes always give the
/// same layout. Err when they do not all fit in [`ATLAS_SIDE`] squared.
pub fn atlas_layout(sizes: &[(u32, u32)]) -> Result<Vec<[u32; 4]>, String> {
    let mut order: Vec<usize> = (0..sizes.len()).collect();
    order.sort_by_key(|&i| (std::cmp::Reverse(sizes[i].1), std::cmp::Reverse(sizes[i].0), i));
    let mut out = vec![[0u32; 4]; sizes.len()];
    let (mut x, mut y, mut shelf) = (ATLAS_GUTTER, ATLAS_GUTTER, 0u32);
    for i in order {
        let (w, h) = sizes[i];
        if w == 0 || h == 0 || w > MAX_SPRITE_SIDE || h > MAX_SPRITE_SIDE {
            return Err(format!("a sprite of {w}x{h} pixels cannot be placed"));
        }
        if x + w + ATLAS_GUTTER > ATLAS_SIDE {
            x = ATLAS_GUTTER;
            y += shelf + ATLAS_GUTTER;
            shelf = 0;
        }
        if y + h + ATLAS_GUTTER > ATLAS_SIDE {
            return Err(format!(
                "the sprites do not all fit in the {ATLAS_SIDE}x{ATLAS_SIDE} texture they share; use fewer or smaller ones"
            ));
        }
        out[i] = [x, y, w, h];
        x += w + ATLAS_GUTTER;
        shelf = shelf.max(h);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    pub fn png_of(w: u32, h: u32, color: png::ColorType, data: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut enc = png::Encoder::new(&mut out, w, h);
        enc.set_color(color);
        enc.set_depth(png::BitDepth::Eight);
        enc.write_header().unwrap().write_image_data(data).unwrap();
        out
    }

    #[test]
    fn a_png_decodes_to_rgba_in_each_colour_type() {
        let rgba = decode_png(&png_of(2, 1, png::ColorType::Rgba, &[1, 2, 3, 4, 5, 6, 7, 8])).unwrap();
        assert_eq!((rgba.width, rgba.height, rgba.rgba), (2, 1, vec![1, 2, 3, 4, 5, 6, 7, 8]));
        let rgb = decode_png(&png_of(1, 1, png::ColorType::Rgb, &[9, 8, 7])).unwrap();
        assert_eq!(rgb.rgba, vec![9, 8, 7, 255]);
        let g = decode_png(&png_of(1, 1, png::ColorType::Grayscale, &[50])).unwrap();
        assert_eq!(g.rgba, vec![50, 50, 50, 255]);
    }

    #[test]
    fn the_atlas_keeps_sprites_apart_and_refuses_what_cannot_fit() {
        let r = atlas_layout(&[(10, 20), (30, 5), (512, 512)]).unwrap();
        for (i, a) in r.iter().enumerate() {
            for b in &r[i + 1..] {
                let apart = a[0] + a[2] + ATLAS_GUTTER <= b[0]
                    || b[0] + b[2] + ATLAS_GUTTER <= a[0]
                    || a[1] + a[3] + ATLAS_GUTTER <= b[1]
                    || b[1] + b[3] + ATLAS_GUTTER <= a[1];
                assert!(apart, "{a:?} {b:?}");
            }
        }
        assert_eq!(&r[2][2..], &[512, 512]);
        // Sixteen of the largest fill it three to a shelf (with gutters): not all 16 fit.
        assert!(atlas_layout(&[(512, 512); 9]).is_ok());
        assert!(atlas_layout(&[(512, 512); 16]).unwrap_err().contains("do not all fit"));
    }
}
