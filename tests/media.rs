//! Mods' sprites and sounds: the decoders take good files and refuse hostile ones with a
//! message a modder can act on (oversized dimensions, truncated files, decompression
//! bombs, wrong formats), `mods check` names the file, the TOML line and the near miss,
//! and the media travel in the client-side content, where a tampered file is refused.

use std::path::{Path, PathBuf};

use hailfire::content::validate;
use hailfire::media::{self, decode_png, decode_sound};
use hailfire::protocol::content::ClientContent;

fn repo(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(p)
}

fn chunk(kind: &[u8], data: &[u8]) -> Vec<u8> {
    let mut out = (data.len() as u32).to_be_bytes().to_vec();
    out.extend_from_slice(kind);
    out.extend_from_slice(data);
    let mut crc_in = kind.to_vec();
    crc_in.extend_from_slice(data);
    out.extend_from_slice(&crc32(&crc_in).to_be_bytes());
    out
}

fn crc32(data: &[u8]) -> u32 {
    let mut c = 0xffff_ffffu32;
    for &b in data {
        c ^= b as u32;
        for _ in 0..8 {
            c = if c & 1 != 0 { 0xedb8_8320 ^ (c >> 1) } else { c >> 1 };
        }
    }
    !c
}

/// A PNG whose header says `w` x `h` RGBA8 and whose image data inflates from `raw`.
fn png_claiming(w: u32, h: u32, raw: &[u8]) -> Vec<u8> {
    let mut ihdr = w.to_be_bytes().to_vec();
    ihdr.extend_from_slice(&h.to_be_bytes());
    ihdr.extend_from_slice(&[8, 6, 0, 0, 0]);
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    out.extend(chunk(b"IHDR", &ihdr));
    out.extend(chunk(b"IDAT", &miniz_oxide::deflate::compress_to_vec_zlib(raw, 9)));
    out.extend(chunk(b"IEND", &[]));
    out
}

/// A solid `w` x `h` PNG of one colour.
pub fn solid_png(w: u32, h: u32, rgba: [u8; 4]) -> Vec<u8> {
    // Each row: filter byte 0 (none), then its pixels.
    let row: Vec<u8> = std::iter::once(0).chain((0..w).flat_map(|_| rgba)).collect();
    png_claiming(w, h, &row.repeat(h as usize))
}

/// A 16-bit PCM WAV: `channels`, `rate`, the header's data length (`claimed` bytes) and
/// the samples actually present.
fn wav(channels: u16, rate: u32, claimed: u32, samples: &[i16]) -> Vec<u8> {
    let mut out = b"RIFF".to_vec();
    out.extend_from_slice(&claimed.saturating_add(36).to_le_bytes());
    out.extend_from_slice(b"WAVEfmt ");
    out.extend_from_slice(&16u32.to_le_bytes());
    out.extend_from_slice(&1u16.to_le_bytes());
    out.extend_from_slice(&channels.to_le_bytes());
    out.extend_from_slice(&rate.to_le_bytes());
    out.extend_from_slice(&(rate * channels as u32 * 2).to_le_bytes());
    out.extend_from_slice(&(channels * 2).to_le_bytes());
    out.extend_from_slice(&16u16.to_le_bytes());
    out.extend_from_slice(b"data");
    out.extend_from_slice(&claimed.to_le_bytes());
    for s in samples {
        out.extend_from_slice(&s.to_le_bytes());
    }
    out
}

#[test]
fn good_sprites_and_sounds_decode() {
    let img = decode_png(&solid_png(7, 3, [10, 200, 30, 255])).unwrap();
    assert_eq!((img.width, img.height, img.rgba.len()), (7, 3, 7 * 3 * 4));
    assert_eq!(&img.rgba[..4], &[10, 200, 30, 255]);
    let petal = decode_png(&std::fs::read(repo("mods/example_spiral/sprites/petal.png")).unwrap()).unwrap();
    assert_eq!((petal.width, petal.height), (24, 12));
    // The example's Ogg Vorbis chime: 0.45 s of mono at 22,050 Hz.
    let chime = decode_sound(&std::fs::read(repo("mods/example_spiral/sounds/chime.ogg")).unwrap()).unwrap();
    assert_eq!((chime.rate, chime.channels), (22_050, 1));
    assert!((chime.seconds() - 0.45).abs() < 0.03, "{} s", chime.seconds());
    assert!(chime.samples.iter().any(|s| s.abs() > 0.2), "it is not silent");
    // A stereo WAV keeps its channels and its samples.
    let w = decode_sound(&wav(2, 8_000, 8, &[16_384, -16_384, 0, 32_767])).unwrap();
    assert_eq!((w.rate, w.channels, w.frames()), (8_000, 2, 2));
    assert!((w.samples[0] - 0.5).abs() < 0.01 && (w.samples[1] + 0.5).abs() < 0.01);
}

#[test]
fn hostile_sprites_are_refused_before_they_cost_memory() {
    // Dimensions far past the cap: refused from the header, nothing allocated for them.
    let e = decode_png(&png_claiming(60_000, 60_000, &[0; 64])).unwrap_err();
    assert!(e.contains("60000x60000") && e.contains("at most 512x512"), "{e}");
    let e = decode_png(&png_claiming(0, 5, &[])).unwrap_err();
    assert!(e.contains("not a valid PNG") || e.contains("0x5"), "{e}");
    // Truncated: half of a good file.
    let good = std::fs::read(repo("mods/example_spiral/sprites/whirler.png")).unwrap();
    let e = decode_png(&good[..good.len() / 2]).unwrap_err();
    assert!(e.contains("truncated or damaged"), "{e}");
    let e = decode_png(&good[..20]).unwrap_err();
    assert!(e.contains("not a valid PNG"), "{e}");
    // Wrong format, named.
    let e = decode_png(b"GIF89a\x01\x00\x01\x00").unwrap_err();
    assert!(e.contains("is not a PNG (it is a GIF)"), "{e}");
    let e = decode_png(b"\xff\xd8\xff\xe0 JFIF").unwrap_err();
    assert!(e.contains("a JPEG"), "{e}");
    // A decompression bomb: 64 MB of zeros in a few tens of KB, behind a 512x512 header.
    // The decoder allocates for the header's size (1 MiB), never for what inflates.
    let bomb = png_claiming(512, 512, &vec![0u8; 64 << 20]);
    assert!(bomb.len() < media::MAX_SPRITE_FILE, "the bomb is small: {} bytes", bomb.len());
    // The decoder fills the image and stops reading: exactly the header's size comes out.
    let img = decode_png(&bomb).expect("the image part of the bomb is a valid black square");
    assert_eq!((img.width, img.height, img.rgba.len()), (512, 512, 512 * 512 * 4));
    // Too large a file, however it is made.
    let e = decode_png(&vec![0u8; media::MAX_SPRITE_FILE + 1]).unwrap_err();
    assert!(e.contains("a sprite may be at most"), "{e}");
}

#[test]
fn hostile_sounds_are_refused_with_what_to_do() {
    // Not WAV or Ogg: named, and what the game takes is said.
    let e = decode_sound(b"ID3\x04\x00\x00\x00\x00\x00\x00").unwrap_err();
    assert!(e.contains("neither a WAV nor an Ogg Vorbis file (it is an MP3)"), "{e}");
    let e = decode_sound(b"fLaC\x00\x00\x00\x22").unwrap_err();
    assert!(e.contains("a FLAC file"), "{e}");
    // Truncated Ogg.
    let ogg = std::fs::read(repo("mods/example_spiral/sounds/chime.ogg")).unwrap();
    let e = decode_sound(&ogg[..ogg.len() / 2]).unwrap_err();
    assert!(e.contains("not a readable Ogg file"), "{e}");
    // Longer than the cap: an Ogg of 12 s (tests/fixtures/media, made with oggenc).
    let long = std::fs::read(repo("tests/fixtures/media/long.ogg")).unwrap();
    let e = decode_sound(&long).unwrap_err();
    assert!(e.contains("10 s"), "{e}");
    // A WAV whose header claims 4 GB of samples: refused from the claim.
    let e = decode_sound(&wav(1, 8_000, u32::MAX - 64, &[0; 16])).unwrap_err();
    assert!(e.contains("268435.5 s long; a sound may be at most 10 s"), "{e}");
    // Rates and channels outside what the mixer plays.
    let e = decode_sound(&wav(1, 96_000, 4, &[0, 0])).unwrap_err();
    assert!(e.contains("96000 Hz") && e.contains("8000..=48000"), "{e}");
    let e = decode_sound(&wav(5, 8_000, 20, &[0; 10])).unwrap_err();
    assert!(e.contains("5 channels"), "{e}");
    // Eleven seconds of real samples in a WAV small enough to pass the file cap.
    let e = decode_sound(&wav(1, 8_000, 8_000 * 11 * 2, &vec![0; 8_000 * 11])).unwrap_err();
    assert!(e.contains("10 s"), "{e}");
    let e = decode_sound(&vec![0u8; media::MAX_SOUND_FILE + 1]).unwrap_err();
    assert!(e.contains("a sound may be at most"), "{e}");
}

fn write(dir: &Path, rel: &str, bytes: &[u8]) {
    let p = dir.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, bytes).unwrap();
}

const MANIFEST: &str = "id = \"pics\"\nname = \"Pics\"\nversion = \"0.1.0\"\ngame_version = \">=0.1.0\"\n[dependencies]\nbase = \">=0.1\"\n";

#[test]
fn mods_check_names_each_media_mistake_at_its_file() {
    let d = tempfile::tempdir().unwrap();
    let m = d.path();
    write(m, "mod.toml", MANIFEST.as_bytes());
    write(m, "bullets.toml", b"[spark]\nradius = 4.0\ncolor = \"#ffffff\"\nsprite = \"sprak\"\n");
    write(m, "sprites/spark.png", &solid_png(8, 8, [255, 255, 0, 255]));
    write(m, "sprites/huge.png", &png_claiming(4096, 16, &[0; 16]));
    write(m, "sprites/fake.png", b"GIF89a....");
    write(m, "sprites/Bad Name.png", &solid_png(2, 2, [0; 4]));
    write(m, "sprites/notes.txt", b"hello");
    write(m, "sounds/death.wav", &wav(1, 8_000, 4, &[0, 0]));
    write(m, "sounds/boom.wav", &wav(1, 8_000, 4, &[0, 0]));
    write(m, "sounds/boom.ogg", &std::fs::read(repo("mods/example_spiral/sounds/chime.ogg")).unwrap());
    let r = validate::check(&[m.to_path_buf()]);
    let all: Vec<String> = r.diagnostics.iter().map(|d| d.to_string()).collect();
    let has = |file: &str, words: &str| {
        assert!(
            all.iter().any(|l| l.contains(file) && l.contains(words)),
            "no '{words}' at {file} in:\n{}",
            all.join("\n")
        )
    };
    has("bullets.toml:4", "sprite 'sprak' does not exist (no sprites/sprak.png; did you mean 'spark'?");
    has("sprites/huge.png", "is 4096x16 pixels; a sprite may be at most 512x512");
    has("sprites/fake.png", "is not a PNG (it is a GIF); save it as PNG");
    has("sprites/Bad Name.png", "lowercase letters, digits and _");
    has("sprites/notes.txt", "not used: sprites/ holds .png files only");
    has("sounds/death.wav", "'death' is one of the game's own sounds");
    has("sounds/boom.wav", "has the same name 'boom'; keep one");
    assert_eq!(r.errors(), 6, "{}", all.join("\n"));
    // An unknown sound in sfx() is a warning that names the mod's sounds too, never an error.
    write(
        m,
        "enemies.toml",
        b"[pic]\nname = \"Pic\"\nhp = 10\nradius = 10.0\nbehaviour = \"chase\"\nemitters = [\"e\"]\n",
    );
    write(m, "emitters/e.lua", b"while true do\n  sfx(\"bom\")\n  wait(10)\nend\n");
    for f in ["sprites/huge.png", "sprites/fake.png", "sprites/Bad Name.png", "sounds/death.wav", "sounds/boom.wav"] {
        std::fs::remove_file(m.join(f)).unwrap();
    }
    write(m, "bullets.toml", b"[spark]\nradius = 4.0\ncolor = \"#ffffff\"\nsprite = \"spark\"\n");
    let r = validate::check(&[m.to_path_buf()]);
    let all: Vec<String> = r.diagnostics.iter().map(|d| d.to_string()).collect();
    assert_eq!(r.errors(), 0, "{}", all.join("\n"));
    assert!(
        all.iter()
            .any(|l| l.contains("e.lua:2") && l.contains("unknown sound 'bom'") && l.contains("did you mean 'boom'")),
        "{}",
        all.join("\n")
    );
}

#[test]
fn a_mods_media_travel_in_the_content_and_a_tampered_file_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let m = d.path().join("pics");
    write(&m, "mod.toml", MANIFEST.as_bytes());
    write(&m, "bullets.toml", b"[spark]\nradius = 4.0\ncolor = \"#ffffff\"\nsprite = \"spark\"\n");
    write(&m, "ships.toml", b"[kite]\nname = \"Kite\"\nsprite = \"kite\"\n");
    write(&m, "sprites/spark.png", &solid_png(8, 8, [255, 255, 0, 255]));
    write(&m, "sprites/kite.png", &solid_png(16, 8, [0, 255, 255, 255]));
    write(&m, "sounds/boom.ogg", &std::fs::read(repo("mods/example_spiral/sounds/chime.ogg")).unwrap());
    let content = hailfire::content::load(&[
        hailfire::content::ModRoot::Mod(repo("content")),
        hailfire::content::ModRoot::Mod(m.clone()),
    ]);
    assert_eq!(content.errors().count(), 0, "{:?}", content.errors().map(|e| e.to_string()).collect::<Vec<_>>());
    let c = ClientContent::of(&content);
    let names: Vec<&str> = c.defs.sprites.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["kite", "spark"]);
    assert_eq!(c.defs.sounds.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), ["boom"]);
    let spark = c.defs.bullets.iter().find(|b| b.id == "spark").unwrap();
    assert_eq!(spark.sprite, Some(1));
    assert_eq!(c.defs.ships.iter().find(|s| s.id == "kite").unwrap().sprite, Some(0));
    // Across the wire and back: the same definitions, media included.
    let back = ClientContent::decode(&c.encoded).unwrap();
    assert_eq!(*back.defs, *c.defs);
    assert_eq!(back.digest, c.digest);
    // A sprite's bytes changed on the way (a hostile server): the PNG no longer decodes,
    // and the client refuses the content, naming the sprite.
    let png = std::fs::read(m.join("sprites/spark.png")).unwrap();
    let at = c.encoded.windows(png.len()).position(|w| w == png.as_slice()).expect("the PNG is in the content");
    let mut bad = c.encoded.to_vec();
    bad[at + png.len() - 20] ^= 0xff;
    let e = ClientContent::decode(&bad).unwrap_err().to_string();
    assert!(e.contains("sprite 'spark'"), "{e}");
    // A sprite index past the list: refused.
    let mut defs = (*c.defs).clone();
    defs.bullets[0].sprite = Some(7);
    let e = hailfire::sim::client_defs::validate(&defs).unwrap_err();
    assert!(e.contains("uses sprite 7 of 2"), "{e}");
    // More sprites than the atlas holds: refused by name of the rule.
    let mut defs = (*c.defs).clone();
    let big = std::sync::Arc::new(solid_png(512, 512, [1, 2, 3, 255]));
    defs.sprites = (0..10)
        .map(|i| hailfire::sim::client_defs::MediaAsset { name: format!("big{i:02}"), bytes: big.clone() })
        .collect();
    for b in defs.bullets.iter_mut() {
        b.sprite = None;
    }
    for s in defs.ships.iter_mut() {
        s.sprite = None;
    }
    let e = hailfire::sim::client_defs::validate(&defs).unwrap_err();
    assert!(e.contains("do not all fit"), "{e}");
}

#[test]
fn a_sound_whose_header_does_not_say_its_length_is_stopped_at_ten_seconds() {
    // A streamed WAV: its data length is "unknown" (all ones), so only the decoding itself
    // can find it too long.
    let e = decode_sound(&wav(1, 8_000, u32::MAX, &vec![0; 8_000 * 11])).unwrap_err();
    assert!(e.contains("longer than 10 s"), "{e}");
    // Nine seconds the same way: played.
    let ok = decode_sound(&wav(1, 8_000, u32::MAX, &vec![100; 8_000 * 9])).unwrap();
    assert_eq!(ok.frames(), 8_000 * 9);
}

#[test]
fn a_panic_inside_a_decoder_costs_the_file_not_the_game() {
    assert_eq!(hailfire::crash::contained(|| 7), Some(7));
    assert_eq!(hailfire::crash::contained(|| -> u8 { panic!("a decoder bug") }), None);
}
