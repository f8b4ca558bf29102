//! Content sent at join: the wire encoding of [`ClientDefs`], its digest, the compressed
//! form that travels in chunks, the validator every received (or cached) copy goes
//! through, and the client's cache of content by digest.
//!
//! The validator is the same one the mod loader runs on the server's own content, so a
//! server cannot load content that its clients would refuse, and a hostile server cannot
//! make a client accept anything a mod on disk could not express. Every count, length and
//! number is bounded (the `MAX_*` constants below, documented in `docs/PROTOCOL.md`).
//!
//! Layout (format 4; integers little-endian, `var` LEB128, `str` u8 length + UTF-8,
//! `f32` IEEE bits, `rgb` 3 bytes, `theme` = `u8 backdrop, rgb base, rgb accent, f32
//! scale, f32 speed, u8 wall, music`, `music` = `f32 tempo, u8 key (semitones above C), u8 mode,
//! u8 lead voice, u32 seed`, `body` = `u8 shape, u8 parts, f32 spin`):
//! `"HFC" u8 format, var nb, nb x (str id, f32 radius, rgb, u8 shape),
//!  var ne, ne x (str id, str name, f32 radius, rgb, body),
//!  var nB, nB x (str id, str name, f32 radius, rgb, body, var np, np x str phase),
//!  var nd, nd x (str id, str name, f32 w, f32 h, f32 sx, f32 sy, var max_players, var boss, f32 px, f32 py,
//!                u8 difficulty, theme),
//!  hub: f32 w, f32 h, f32 sx, f32 sy, f32 portal_radius, theme,
//!  var ns, ns x (str id, str name, var stars, rgb, body),
//!  var nsp, nsp x (str name, var len, len bytes PNG),
//!  var nso, nso x (str name, var len, len bytes WAV or Ogg Vorbis),
//!  var nu, nu x (u8 what: 0 bullet 1 enemy 2 boss 3 ship, var index, var sprite)`
//!  (ships: format 2; themes: format 3; bodies, difficulty and music: format 4; mods'
//!  sprites and sounds: format 5).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use sha2::{Digest as _, Sha256};
use thiserror::Error;

use super::wire::{DecodeError, Reader, Writer};
use crate::sim::client_defs::*;
pub use crate::sim::client_defs::{
    validate, MAX_BOSSES, MAX_BULLET_KINDS, MAX_DUNGEONS, MAX_ENEMIES, MAX_ID, MAX_NAME, MAX_PHASES, MAX_SHIPS,
};
use crate::sim::defs::{Backdrop, BodyDef, BodyShape, HubDef, Mode, MusicDef, Shape, ThemeDef, Voice};

/// Largest client-side content a client accepts, uncompressed (and compressed), bytes.
pub const MAX_CONTENT_BYTES: usize = 4 << 20;
/// Payload of one `ContentChunk` message: one datagram under ENet's MTU.
pub const CONTENT_CHUNK: usize = 1024;
const MAGIC: &[u8; 3] = b"HFC";
const FORMAT: u8 = 5;

/// SHA-256 of the encoded content: what a client offers and what the cache is keyed by.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ContentDigest(pub [u8; 32]);

impl ContentDigest {
    pub fn of(bytes: &[u8]) -> Self {
        ContentDigest(Sha256::digest(bytes).into())
    }
    pub fn hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }
    /// The first 12 hex digits, for logs and messages.
    pub fn short(&self) -> String {
        self.hex()[..12].to_string()
    }
}

impl std::fmt::Debug for ContentDigest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ContentDigest({})", self.short())
    }
}

/// Why content was refused, in words that name the definition and field.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ContentError {
    #[error("content is truncated or malformed ({0})")]
    Decode(#[from] DecodeError),
    #[error("content is {0} bytes; this game accepts at most {max} bytes", max = MAX_CONTENT_BYTES)]
    TooLarge(usize),
    #[error("content does not start with the Hailfire content header (format {FORMAT})")]
    BadHeader,
    #[error("{0}")]
    Invalid(String),
    #[error("content does not match its digest (expected {expected}, got {got})")]
    DigestMismatch { expected: String, got: String },
    #[error("compressed content is damaged or larger than it claims")]
    BadCompression,
}

fn invalid(msg: String) -> ContentError {
    ContentError::Invalid(msg)
}

/// Client-side content with its encoding and digest, computed once.
#[derive(Clone, Debug)]
pub struct ClientContent {
    pub defs: Arc<ClientDefs>,
    pub digest: ContentDigest,
    pub encoded: Arc<Vec<u8>>,
}

impl ClientContent {
    /// Wraps definitions the caller trusts (the server's own, already validated by the
    /// loader). Received bytes go through [`ClientContent::decode`] instead.
    pub fn new(defs: ClientDefs) -> Self {
        let encoded = encode(&defs);
        ClientContent { digest: ContentDigest::of(&encoded), defs: Arc::new(defs), encoded: Arc::new(encoded) }
    }

    /// Decodes and validates bytes from a server or the cache.
    pub fn decode(bytes: &[u8]) -> Result<Self, ContentError> {
        if bytes.len() > MAX_CONTENT_BYTES {
            return Err(ContentError::TooLarge(bytes.len()));
        }
        let defs = decode(bytes)?;
        validate(&defs).map_err(ContentError::Invalid)?;
        Ok(ClientContent { digest: ContentDigest::of(bytes), defs: Arc::new(defs), encoded: Arc::new(bytes.to_vec()) })
    }

    /// The compressed form that travels in `ContentChunk`s.
    pub fn packed(&self) -> Vec<u8> {
        miniz_oxide::deflate::compress_to_vec(&self.encoded, 9)
    }
}

/// Inflates a received transfer, never past `raw_len` (itself capped): a compression bomb
/// stops at the cap.
pub fn unpack(packed: &[u8], raw_len: usize) -> Result<Vec<u8>, ContentError> {
    if raw_len > MAX_CONTENT_BYTES {
        return Err(ContentError::TooLarge(raw_len));
    }
    let out = miniz_oxide::inflate::decompress_to_vec_with_limit(packed, raw_len)
        .map_err(|_| ContentError::BadCompression)?;
    if out.len() != raw_len {
        return Err(ContentError::BadCompression);
    }
    Ok(out)
}

fn rgb(w: &mut Writer, c: [u8; 3]) {
    c.iter().for_each(|b| w.u8(*b));
}

fn f32w(w: &mut Writer, v: f32) {
    w.u32(v.to_bits());
}

pub fn encode(d: &ClientDefs) -> Vec<u8> {
    let mut w = Writer::new();
    w.buf.extend_from_slice(MAGIC);
    w.u8(FORMAT);
    w.var(d.bullets.len() as u64);
    for b in &d.bullets {
        w.str(&b.id);
        f32w(&mut w, b.radius);
        rgb(&mut w, b.color);
        w.u8(shape_code(b.shape));
    }
    w.var(d.enemies.len() as u64);
    for e in &d.enemies {
        w.str(&e.id);
        w.str(&e.name);
        f32w(&mut w, e.radius);
        rgb(&mut w, e.color);
        body_w(&mut w, &e.body);
    }
    w.var(d.bosses.len() as u64);
    for b in &d.bosses {
        w.str(&b.id);
        w.str(&b.name);
        f32w(&mut w, b.radius);
        rgb(&mut w, b.color);
        body_w(&mut w, &b.body);
        w.var(b.phases.len() as u64);
        for p in &b.phases {
            w.str(p);
        }
    }
    w.var(d.dungeons.len() as u64);
    for g in &d.dungeons {
        w.str(&g.id);
        w.str(&g.name);
        for v in [g.arena[0], g.arena[1], g.spawn[0], g.spawn[1]] {
            f32w(&mut w, v);
        }
        w.var(g.max_players as u64);
        w.var(g.boss as u64);
        f32w(&mut w, g.portal[0]);
        f32w(&mut w, g.portal[1]);
        w.u8(g.difficulty);
        theme_w(&mut w, &g.theme);
    }
    for v in [d.hub.arena[0], d.hub.arena[1], d.hub.spawn[0], d.hub.spawn[1], d.hub.portal_radius] {
        f32w(&mut w, v);
    }
    theme_w(&mut w, &d.hub.theme);
    w.var(d.ships.len() as u64);
    for sh in &d.ships {
        w.str(&sh.id);
        w.str(&sh.name);
        w.var(sh.stars as u64);
        rgb(&mut w, sh.color);
        body_w(&mut w, &sh.body);
    }
    for list in [&d.sprites, &d.sounds] {
        w.var(list.len() as u64);
        for a in list {
            w.str(&a.name);
            w.var(a.bytes.len() as u64);
            w.bytes(&a.bytes);
        }
    }
    let uses: Vec<(u8, usize, u16)> = d
        .bullets
        .iter()
        .map(|b| b.sprite)
        .enumerate()
        .map(|(i, s)| (0, i, s))
        .chain(d.enemies.iter().map(|e| e.sprite).enumerate().map(|(i, s)| (1, i, s)))
        .chain(d.bosses.iter().map(|b| b.sprite).enumerate().map(|(i, s)| (2, i, s)))
        .chain(d.ships.iter().map(|sh| sh.sprite).enumerate().map(|(i, s)| (3, i, s)))
        .filter_map(|(what, i, s)| s.map(|s| (what, i, s)))
        .collect();
    w.var(uses.len() as u64);
    for (what, i, s) in uses {
        w.u8(what);
        w.var(i as u64);
        w.var(s as u64);
    }
    w.buf
}

/// A theme: `u8 backdrop, rgb base, rgb accent, f32 scale, f32 speed, u8 wall, music`.
fn theme_w(w: &mut Writer, t: &ThemeDef) {
    w.u8(t.background.code());
    rgb(w, parse_color(&t.base));
    rgb(w, parse_color(&t.accent));
    f32w(w, t.scale);
    f32w(w, t.speed);
    w.u8(t.wall.code());
    f32w(w, t.music.tempo);
    w.u8(crate::sim::defs::note_semitone(&t.music.key).unwrap_or(9));
    w.u8(t.music.mode.code());
    w.u8(t.music.lead.code());
    w.u32(t.music.seed);
}

/// A body: `u8 shape, u8 parts, f32 spin`.
fn body_w(w: &mut Writer, b: &BodyDef) {
    w.u8(b.shape.code());
    w.u8(b.parts);
    f32w(w, b.spin);
}

fn body_r(r: &mut Reader) -> Result<BodyDef, ContentError> {
    let shape = BodyShape::from_code(r.u8()?).ok_or_else(|| invalid("body: unknown shape".to_string()))?;
    Ok(BodyDef { shape, parts: r.u8()?, spin: read_f32(r)? })
}

fn theme_r(r: &mut Reader) -> Result<ThemeDef, ContentError> {
    let background = Backdrop::from_code(r.u8()?).ok_or_else(|| invalid("theme: unknown background".to_string()))?;
    let hex = |c: [u8; 3]| format!("#{:02x}{:02x}{:02x}", c[0], c[1], c[2]);
    Ok(ThemeDef {
        background,
        base: hex(read_rgb(r)?),
        accent: hex(read_rgb(r)?),
        scale: read_f32(r)?,
        speed: read_f32(r)?,
        wall: crate::sim::defs::Wall::from_code(r.u8()?).ok_or_else(|| invalid("theme: unknown wall".to_string()))?,
        music: {
            let tempo = read_f32(r)?;
            let key = crate::sim::defs::NOTE_NAMES
                .get(r.u8()? as usize)
                .ok_or_else(|| invalid("music: unknown key".to_string()))?
                .to_string();
            let mode = Mode::from_code(r.u8()?).ok_or_else(|| invalid("music: unknown mode".to_string()))?;
            let lead = Voice::from_code(r.u8()?).ok_or_else(|| invalid("music: unknown voice".to_string()))?;
            MusicDef { tempo, key, mode, lead, seed: r.u32()? }
        },
    })
}

fn shape_code(s: Shape) -> u8 {
    match s {
        Shape::Orb => 0,
        Shape::Rice => 1,
        Shape::Star => 2,
        Shape::Diamond => 3,
        Shape::Ring => 4,
    }
}

fn read_f32(r: &mut Reader) -> Result<f32, DecodeError> {
    Ok(f32::from_bits(r.u32()?))
}

fn read_rgb(r: &mut Reader) -> Result<[u8; 3], DecodeError> {
    Ok([r.u8()?, r.u8()?, r.u8()?])
}

/// Decodes the layout only; [`validate`] checks what the values mean.
pub fn decode(bytes: &[u8]) -> Result<ClientDefs, ContentError> {
    let mut r = Reader::new(bytes);
    if r.u8()? != MAGIC[0] || r.u8()? != MAGIC[1] || r.u8()? != MAGIC[2] || r.u8()? != FORMAT {
        return Err(ContentError::BadHeader);
    }
    let nb = r.count(MAX_BULLET_KINDS, 9, "bullet kinds")?;
    let mut bullets = Vec::with_capacity(nb);
    for _ in 0..nb {
        let id = r.str(MAX_ID, "bullet id")?;
        let radius = read_f32(&mut r)?;
        let color = read_rgb(&mut r)?;
        let shape = match r.u8()? {
            0 => Shape::Orb,
            1 => Shape::Rice,
            2 => Shape::Star,
            3 => Shape::Diamond,
            4 => Shape::Ring,
            _ => return Err(invalid(format!("bullet kind '{id}': unknown shape"))),
        };
        bullets.push(BulletLook { id, radius, color, shape, sprite: None });
    }
    let ne = r.count(MAX_ENEMIES, 15, "enemies")?;
    let mut enemies = Vec::with_capacity(ne);
    for _ in 0..ne {
        enemies.push(EnemyLook {
            id: r.str(MAX_ID, "enemy id")?,
            name: r.str(MAX_NAME, "enemy name")?,
            radius: read_f32(&mut r)?,
            color: read_rgb(&mut r)?,
            body: body_r(&mut r)?,
            sprite: None,
        });
    }
    let nbo = r.count(MAX_BOSSES, 16, "bosses")?;
    let mut bosses = Vec::with_capacity(nbo);
    for _ in 0..nbo {
        let id = r.str(MAX_ID, "boss id")?;
        let name = r.str(MAX_NAME, "boss name")?;
        let radius = read_f32(&mut r)?;
        let color = read_rgb(&mut r)?;
        let body = body_r(&mut r)?;
        let np = r.count(MAX_PHASES, 1, "phases")?;
        let mut phases = Vec::with_capacity(np);
        for _ in 0..np {
            phases.push(r.str(MAX_NAME, "phase name")?);
        }
        bosses.push(BossLook { id, name, radius, color, body, sprite: None, phases });
    }
    let nd = r.count(MAX_DUNGEONS, 41, "dungeons")?;
    let mut dungeons = Vec::with_capacity(nd);
    for _ in 0..nd {
        let id = r.str(MAX_ID, "dungeon id")?;
        let name = r.str(MAX_NAME, "dungeon name")?;
        let arena = [read_f32(&mut r)?, read_f32(&mut r)?];
        let spawn = [read_f32(&mut r)?, read_f32(&mut r)?];
        let max_players = r.var_u32("max players")?;
        let boss = u16::try_from(r.var()?).map_err(|_| DecodeError::BadValue("dungeon boss"))?;
        let portal = [read_f32(&mut r)?, read_f32(&mut r)?];
        let difficulty = r.u8()?;
        let theme = theme_r(&mut r)?;
        dungeons.push(DungeonInfo { id, name, arena, spawn, max_players, boss, portal, difficulty, theme });
    }
    let hub = HubDef {
        arena: [read_f32(&mut r)?, read_f32(&mut r)?],
        spawn: [read_f32(&mut r)?, read_f32(&mut r)?],
        portal_radius: read_f32(&mut r)?,
        theme: theme_r(&mut r)?,
        dummy: None,
    };
    let ns = r.count(MAX_SHIPS, 12, "ships")?;
    let mut ships = Vec::with_capacity(ns);
    for _ in 0..ns {
        ships.push(ShipLook {
            id: r.str(MAX_ID, "ship id")?,
            name: r.str(MAX_NAME, "ship name")?,
            stars: r.var_u32("ship stars")?,
            color: read_rgb(&mut r)?,
            body: body_r(&mut r)?,
            sprite: None,
        });
    }
    let mut media = |max: usize, what: &'static str| -> Result<Vec<MediaAsset>, ContentError> {
        let n = r.count(max, 2, what)?;
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            let name = r.str(MAX_ID, what)?;
            let len = r.count(MAX_CONTENT_BYTES, 1, what)?;
            out.push(MediaAsset { name, bytes: Arc::new(r.bytes(len)?.to_vec()) });
        }
        Ok(out)
    };
    let sprites = media(crate::media::MAX_SPRITES, "sprites")?;
    let sounds = media(crate::media::MAX_SOUNDS, "sounds")?;
    let nu = r.count(MAX_BULLET_KINDS + MAX_ENEMIES + MAX_BOSSES + MAX_SHIPS, 3, "sprite uses")?;
    for _ in 0..nu {
        let what = r.u8()?;
        let i = r.var()? as usize;
        let sprite = u16::try_from(r.var()?).map_err(|_| DecodeError::BadValue("sprite"))?;
        let slot = match what {
            0 => bullets.get_mut(i).map(|b| &mut b.sprite),
            1 => enemies.get_mut(i).map(|e| &mut e.sprite),
            2 => bosses.get_mut(i).map(|b| &mut b.sprite),
            3 => ships.get_mut(i).map(|s| &mut s.sprite),
            _ => None,
        };
        match slot {
            Some(slot) if slot.is_none() => *slot = Some(sprite),
            _ => return Err(invalid(format!("sprite use {what}/{i} names nothing or repeats"))),
        }
    }
    r.finish()?;
    Ok(ClientDefs { bullets, enemies, bosses, dungeons, hub, ships, sprites, sounds })
}

/// Content the client keeps by digest, in the cache directory, so a second join to the
/// same server (or any server with the same content) transfers nothing.
#[derive(Clone, Debug)]
pub struct ContentCache {
    pub dir: PathBuf,
}

/// Most files the cache keeps; the least recently used go first.
pub const CACHE_MAX_FILES: usize = 32;

impl ContentCache {
    /// `<cache dir>/content` (`~/.cache/hailfire/content` on Linux).
    pub fn default_dir() -> Option<PathBuf> {
        directories::ProjectDirs::from("", "", "Hailfire").map(|d| d.cache_dir().join("content"))
    }

    pub fn new(dir: impl Into<PathBuf>) -> Self {
        ContentCache { dir: dir.into() }
    }

    fn path(&self, d: &ContentDigest) -> PathBuf {
        self.dir.join(format!("{}.hfc", d.hex()))
    }

    /// The cached content with this digest, validated again; a damaged file is removed.
    pub fn load(&self, d: &ContentDigest) -> Option<ClientContent> {
        use std::io::Read;
        let path = self.path(d);
        // One open, then checks on what was opened: a FIFO or device never blocks us and
        // no file is read past the cap.
        let file = std::fs::File::open(&path).ok()?;
        let meta = file.metadata().ok()?;
        let mut bytes = Vec::new();
        let read = meta.is_file()
            && file.take(MAX_CONTENT_BYTES as u64 + 1).read_to_end(&mut bytes).is_ok()
            && bytes.len() <= MAX_CONTENT_BYTES;
        match ClientContent::decode(&bytes) {
            Ok(c) if read && c.digest == *d => {
                // Touch it: the cache evicts the least recently used.
                let _ = std::fs::File::options()
                    .append(true)
                    .open(&path)
                    .and_then(|f| f.set_modified(std::time::SystemTime::now()));
                Some(c)
            }
            _ => {
                tracing::warn!(file = %path.display(), "cached content is damaged; removing it");
                let _ = std::fs::remove_file(&path);
                None
            }
        }
    }

    /// Stores content (atomically: a temporary file renamed into place), then trims the
    /// cache to [`CACHE_MAX_FILES`].
    pub fn store(&self, c: &ClientContent) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        let path = self.path(&c.digest);
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, c.encoded.as_slice())?;
        std::fs::rename(&tmp, &path)?;
        self.trim();
        Ok(())
    }

    fn trim(&self) {
        let Ok(rd) = std::fs::read_dir(&self.dir) else { return };
        let entries: Vec<std::fs::DirEntry> = rd.flatten().collect();
        // Leftovers of an interrupted store.
        for e in &entries {
            if e.path().extension().is_some_and(|x| x == "tmp") {
                let _ = std::fs::remove_file(e.path());
            }
        }
        let mut files: Vec<(std::time::SystemTime, PathBuf)> = entries
            .iter()
            .filter(|e| e.path().extension().is_some_and(|x| x == "hfc"))
            .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
            .collect();
        if files.len() <= CACHE_MAX_FILES {
            return;
        }
        files.sort();
        for (_, p) in &files[..files.len() - CACHE_MAX_FILES] {
            let _ = std::fs::remove_file(p);
        }
    }

    pub fn contains(&self, d: &ContentDigest) -> bool {
        Path::exists(&self.path(d))
    }
}

impl ClientContent {
    /// The client-side part of loaded content.
    pub fn of(content: &crate::content::Content) -> Self {
        ClientContent::new(ClientDefs::from_defs(&content.defs))
    }
}
