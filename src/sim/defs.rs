//! Content definitions as the simulation sees them: bullet kinds, enemies, bosses, dungeons
//! and the hub. `content` fills them from TOML (the serde attributes are the schema, and
//! `deny_unknown_fields` makes a typo an error); the simulation only reads them.
//!
//! There is deliberately no field that can express contact damage: bodies never hurt.
//!
//! These are the server's definitions. What a client may see of them is the separate
//! [`ClientDefs`](super::client_defs::ClientDefs), made from these by `from_defs`; only
//! that type has a wire encoding.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::sync::Arc;

/// An emitter as an enemy or a boss phase names it: its id, and the arguments its script
/// reads from its `args` table (`emitters = ["ring", { id = "fan", args = { n = 5 } }]`),
/// so one emitter serves many enemies.
#[derive(Clone, Debug, PartialEq)]
pub struct EmitterRef {
    pub id: String,
    pub args: Option<Arc<ArgValue>>,
}

impl EmitterRef {
    pub fn plain(id: &str) -> EmitterRef {
        EmitterRef { id: id.to_string(), args: None }
    }
}

impl From<&str> for EmitterRef {
    fn from(id: &str) -> Self {
        EmitterRef::plain(id)
    }
}

/// An emitter argument: numbers, strings, booleans, and arrays or tables of them.
#[derive(Clone, Debug, PartialEq)]
pub enum ArgValue {
    Bool(bool),
    Int(i64),
    Num(f64),
    Str(String),
    List(Vec<ArgValue>),
    Table(BTreeMap<String, ArgValue>),
}

/// Limits on one emitter's arguments.
pub const MAX_ARG_VALUES: usize = 256;
pub const MAX_ARG_DEPTH: usize = 4;
pub const MAX_ARG_STRING: usize = 256;

impl ArgValue {
    /// Converts (and bounds) a TOML value; the error says what is not allowed.
    pub fn from_toml(v: &toml::Value) -> Result<ArgValue, String> {
        let mut count = 0;
        Self::convert(v, 0, &mut count)
    }

    fn convert(v: &toml::Value, depth: usize, count: &mut usize) -> Result<ArgValue, String> {
        *count += 1;
        if *count > MAX_ARG_VALUES {
            return Err(format!("emitter args may hold at most {MAX_ARG_VALUES} values"));
        }
        if depth > MAX_ARG_DEPTH {
            return Err(format!("emitter args may nest at most {MAX_ARG_DEPTH} deep"));
        }
        Ok(match v {
            toml::Value::Boolean(b) => ArgValue::Bool(*b),
            toml::Value::Integer(i) => ArgValue::Int(*i),
            toml::Value::Float(f) if f.is_finite() => ArgValue::Num(*f),
            toml::Value::Float(_) => return Err("emitter args must be finite numbers".into()),
            toml::Value::String(s) if s.len() <= MAX_ARG_STRING => ArgValue::Str(s.clone()),
            toml::Value::String(_) => return Err(format!("emitter arg strings may be at most {MAX_ARG_STRING} bytes")),
            toml::Value::Array(a) => {
                ArgValue::List(a.iter().map(|x| Self::convert(x, depth + 1, count)).collect::<Result<_, _>>()?)
            }
            toml::Value::Table(t) => ArgValue::Table(
                t.iter()
                    .map(|(k, x)| {
                        if k.len() > MAX_ARG_STRING {
                            return Err(format!("emitter arg names may be at most {MAX_ARG_STRING} bytes"));
                        }
                        Ok((k.clone(), Self::convert(x, depth + 1, count)?))
                    })
                    .collect::<Result<_, String>>()?,
            ),
            toml::Value::Datetime(_) => {
                return Err("emitter args may be numbers, strings, booleans and arrays or tables of them".into())
            }
        })
    }
}

impl<'de> Deserialize<'de> for EmitterRef {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Full {
            id: String,
            #[serde(default)]
            args: Option<toml::Table>,
        }
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Id(String),
            Full(Full),
        }
        match Raw::deserialize(d).map_err(|_| {
            serde::de::Error::custom("an emitter is an id (\"ring\") or a table { id = \"fan\", args = { n = 5 } }")
        })? {
            Raw::Id(id) => Ok(EmitterRef { id, args: None }),
            Raw::Full(f) => {
                let args = match f.args {
                    None => None,
                    Some(t) => {
                        Some(Arc::new(ArgValue::from_toml(&toml::Value::Table(t)).map_err(serde::de::Error::custom)?))
                    }
                };
                Ok(EmitterRef { id: f.id, args })
            }
        }
    }
}

/// How a bullet kind is drawn. Collision is always a circle of `radius`.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "snake_case")]
pub enum Shape {
    Orb,
    Rice,
    Star,
    Diamond,
    Ring,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BulletKindDef {
    #[serde(skip)]
    pub id: String,
    /// Collision and drawn radius, pixels.
    pub radius: f32,
    /// `#rrggbb`.
    pub color: String,
    #[serde(default = "default_shape")]
    pub shape: Shape,
    /// Damage dealt when it hits.
    #[serde(default = "default_damage")]
    pub damage: i32,
    /// A mod's picture (`sprites/NAME.png`) drawn instead of the shape, turned to face
    /// where the bullet flies.
    #[serde(default)]
    pub sprite: Option<String>,
}

fn default_shape() -> Shape {
    Shape::Orb
}
fn default_damage() -> i32 {
    10
}

/// How an enemy moves. Movement never hurts; enemies shoot only through emitters.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Behaviour {
    /// Walk straight at the nearest player.
    Chase,
    /// Approach to `range`, back off when closer.
    KeepDistance,
    /// Hold `range` from the nearest player while circling it.
    Strafe,
    /// Drift to random points.
    Wander,
    /// Never move (scripts may still `move_to`).
    Stationary,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnemyDef {
    #[serde(skip)]
    pub id: String,
    pub name: String,
    pub hp: i32,
    pub radius: f32,
    #[serde(default = "default_enemy_color")]
    pub color: String,
    /// How its body is drawn (client-side, sent at join).
    #[serde(default)]
    pub body: BodyDef,
    /// A mod's picture (`sprites/NAME.png`) drawn instead of the body.
    #[serde(default)]
    pub sprite: Option<String>,
    pub behaviour: Behaviour,
    /// Pixels per tick.
    #[serde(default = "default_enemy_speed")]
    pub speed: f32,
    /// Preferred distance for keep_distance and strafe, pixels.
    #[serde(default = "default_range")]
    pub range: f32,
    /// Emitters run while the enemy lives: ids, or `{ id = "...", args = { ... } }`.
    #[serde(default)]
    pub emitters: Vec<EmitterRef>,
    /// A hostile enemy must have an emitter (the content tests assert it).
    #[serde(default = "default_true")]
    pub hostile: bool,
    /// Damage from player bullets is multiplied by this (0: it cannot be hurt, and leaves
    /// only when its script calls `leave()`).
    #[serde(default = "default_mult")]
    pub damage_taken_mult: f32,
}

fn default_enemy_color() -> String {
    "#d04040".into()
}
fn default_enemy_speed() -> f32 {
    1.0
}
fn default_range() -> f32 {
    160.0
}
fn default_true() -> bool {
    true
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PhaseDef {
    pub name: String,
    /// The phase begins once boss HP / max HP falls to this fraction or below.
    /// The first phase has 1.0; later phases strictly decrease.
    pub hp_threshold: f32,
    /// Damage from player bullets is multiplied by this during the phase.
    #[serde(default = "default_mult")]
    pub damage_taken_mult: f32,
    pub emitters: Vec<EmitterRef>,
    /// When the phase begins, every enemy still in the fight (by then, the boss's summons)
    /// leaves without dying: no kill, no score. Default false: they stay and fight on.
    #[serde(default)]
    pub clear_adds: bool,
}

fn default_mult() -> f32 {
    1.0
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BossDef {
    #[serde(skip)]
    pub id: String,
    pub name: String,
    pub hp: i32,
    pub radius: f32,
    #[serde(default = "default_boss_color")]
    pub color: String,
    /// How its body is drawn; each phase after the first adds a ring and quickens it.
    #[serde(default)]
    pub body: BodyDef,
    /// A mod's picture (`sprites/NAME.png`) drawn instead of the body.
    #[serde(default)]
    pub sprite: Option<String>,
    pub phases: Vec<PhaseDef>,
}

fn default_boss_color() -> String {
    "#b050ff".into()
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpawnDef {
    pub enemy: String,
    pub x: f32,
    pub y: f32,
    #[serde(default = "default_count")]
    pub count: u32,
    /// Horizontal spacing between copies when `count` > 1, pixels.
    #[serde(default = "default_spacing")]
    pub spacing: f32,
}

fn default_count() -> u32 {
    1
}
fn default_spacing() -> f32 {
    48.0
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WaveDef {
    /// Ticks to wait after the previous wave is cleared (or the run starts).
    #[serde(default)]
    pub delay: u32,
    pub spawns: Vec<SpawnDef>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DungeonDef {
    #[serde(skip)]
    pub id: String,
    pub name: String,
    /// Width and height in pixels.
    pub arena: [f32; 2],
    /// Where arriving players appear.
    pub spawn: [f32; 2],
    #[serde(default = "default_max_players")]
    pub max_players: u32,
    #[serde(default)]
    pub waves: Vec<WaveDef>,
    /// The boss that ends the run; killing it clears the instance.
    pub boss: String,
    pub boss_pos: [f32; 2],
    /// Ticks after the last wave is cleared before the boss appears.
    #[serde(default)]
    pub boss_delay: u32,
    /// Portal position in the hub; laid out automatically when absent.
    #[serde(default)]
    pub portal: Option<[f32; 2]>,
    /// How hard it is, 1 (a first run) ..= 5, shown on its portal in the hub.
    #[serde(default = "default_difficulty")]
    pub difficulty: u8,
    /// How the dungeon looks and sounds.
    #[serde(default)]
    pub theme: ThemeDef,
}

fn default_difficulty() -> u8 {
    1
}

/// The hardest a dungeon says it is.
pub const MAX_DIFFICULTY: u8 = 5;

fn default_max_players() -> u32 {
    4
}

/// The pattern a place's floor is drawn with (animated, by the client's shader).
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq, Hash, Default)]
#[serde(rename_all = "snake_case")]
pub enum Backdrop {
    /// Flagstones with thin joints.
    #[default]
    Tiles,
    /// Sparse glyphs that glow and fade.
    Runes,
    /// Caustic light moving over a pool.
    Water,
    /// Two layers of twinkling stars.
    Stars,
    /// Sparks rising and flickering.
    Embers,
}

impl Backdrop {
    pub const ALL: [Backdrop; 5] =
        [Backdrop::Tiles, Backdrop::Runes, Backdrop::Water, Backdrop::Stars, Backdrop::Embers];
    /// Its number on the wire and in the shader.
    pub fn code(self) -> u8 {
        Backdrop::ALL.iter().position(|b| *b == self).unwrap_or(0) as u8
    }
    pub fn from_code(c: u8) -> Option<Backdrop> {
        Backdrop::ALL.get(c as usize).copied()
    }
}

/// How a place looks: its floor colour, the pattern drawn over it in the accent colour,
/// the pattern's cell size (px) and how fast it moves. Client-side content (sent at join).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ThemeDef {
    pub background: Backdrop,
    /// `#rrggbb`: the floor.
    pub base: String,
    /// `#rrggbb`: the pattern (drawn faint over the floor).
    pub accent: String,
    /// Pattern cell size, px (8..=512).
    pub scale: f32,
    /// Animation speed (0 still ..= 4).
    pub speed: f32,
    /// How the arena's walls are drawn.
    pub wall: Wall,
    /// The place's music, synthesised by the client.
    pub music: MusicDef,
}

/// The arena's walls, drawn in the theme's accent colour.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq, Hash, Default)]
#[serde(rename_all = "snake_case")]
pub enum Wall {
    /// A thin line.
    #[default]
    Line,
    /// Two lines, a keep's masonry.
    Double,
    /// A bright line with a glow, like light through leaves or a rift.
    Glow,
}

impl Wall {
    pub const ALL: [Wall; 3] = [Wall::Line, Wall::Double, Wall::Glow];
    pub fn code(self) -> u8 {
        Wall::ALL.iter().position(|w| *w == self).unwrap_or(0) as u8
    }
    pub fn from_code(c: u8) -> Option<Wall> {
        Wall::ALL.get(c as usize).copied()
    }
}

/// A body's silhouette, drawn by the client's shader as a signed-distance shape with an
/// outline and moving parts.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq, Hash, Default)]
#[serde(rename_all = "snake_case")]
pub enum BodyShape {
    /// A shaded disc with a pulsing core.
    #[default]
    Orb,
    /// A core inside a ring of `parts` segments that turns.
    Shell,
    /// A disc with `parts` spikes.
    Spiked,
    /// An eye: a pale ball, a coloured iris, a pupil that pulses.
    Eye,
    /// A polygon of `parts` sides (3 or more) with a facet shine.
    Crystal,
    /// A turret: `parts` arms from a round hub.
    Cross,
    /// An arrowhead pointing where it faces (the ships' default).
    Dart,
}

impl BodyShape {
    pub const ALL: [BodyShape; 7] = [
        BodyShape::Orb,
        BodyShape::Shell,
        BodyShape::Spiked,
        BodyShape::Eye,
        BodyShape::Crystal,
        BodyShape::Cross,
        BodyShape::Dart,
    ];
    /// Its number on the wire and in the shader.
    pub fn code(self) -> u8 {
        BodyShape::ALL.iter().position(|b| *b == self).unwrap_or(0) as u8
    }
    pub fn from_code(c: u8) -> Option<BodyShape> {
        BodyShape::ALL.get(c as usize).copied()
    }
}

/// How an enemy or a boss is drawn: a shape, how many parts it has (ring segments, spikes,
/// sides, arms) and how fast it turns (turns a second, either way).
#[derive(Clone, Copy, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct BodyDef {
    pub shape: BodyShape,
    pub parts: u8,
    pub spin: f32,
}

impl Default for BodyDef {
    fn default() -> Self {
        BodyDef { shape: BodyShape::Orb, parts: 6, spin: 0.0 }
    }
}

/// Most parts a body may have.
pub const BODY_PARTS_MAX: u8 = 12;
/// Fastest a body turns, turns a second.
pub const BODY_SPIN_MAX: f32 = 2.0;

impl BodyDef {
    pub fn problem(&self) -> Option<String> {
        if self.parts > BODY_PARTS_MAX {
            return Some(format!("body: parts must be 0..={BODY_PARTS_MAX}, not {}", self.parts));
        }
        if self.shape == BodyShape::Crystal && self.parts < 3 {
            return Some(format!("body: a crystal needs 3..={BODY_PARTS_MAX} parts (its sides), not {}", self.parts));
        }
        if !(self.spin.is_finite() && self.spin.abs() <= BODY_SPIN_MAX) {
            return Some(format!(
                "body: spin must be -{BODY_SPIN_MAX}..={BODY_SPIN_MAX} turns a second, not {}",
                self.spin
            ));
        }
        None
    }
}

/// A scale for the music: which of the twelve notes above the key it uses.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq, Hash, Default)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    Major,
    #[default]
    Minor,
    Dorian,
    Phrygian,
    Lydian,
    Mixolydian,
    /// Major pentatonic: no note can clash.
    Pentatonic,
}

impl Mode {
    pub const ALL: [Mode; 7] =
        [Mode::Major, Mode::Minor, Mode::Dorian, Mode::Phrygian, Mode::Lydian, Mode::Mixolydian, Mode::Pentatonic];
    pub fn code(self) -> u8 {
        Mode::ALL.iter().position(|m| *m == self).unwrap_or(0) as u8
    }
    pub fn from_code(c: u8) -> Option<Mode> {
        Mode::ALL.get(c as usize).copied()
    }
    /// Semitones above the key.
    pub fn steps(self) -> &'static [u8] {
        match self {
            Mode::Major => &[0, 2, 4, 5, 7, 9, 11],
            Mode::Minor => &[0, 2, 3, 5, 7, 8, 10],
            Mode::Dorian => &[0, 2, 3, 5, 7, 9, 10],
            Mode::Phrygian => &[0, 1, 3, 5, 7, 8, 10],
            Mode::Lydian => &[0, 2, 4, 6, 7, 9, 11],
            Mode::Mixolydian => &[0, 2, 4, 5, 7, 9, 10],
            Mode::Pentatonic => &[0, 2, 4, 7, 9],
        }
    }
}

/// The lead voice's timbre.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq, Hash, Default)]
#[serde(rename_all = "snake_case")]
pub enum Voice {
    #[default]
    Triangle,
    Square,
    Saw,
    /// A struck, ringing tone (two detuned sines with a fast decay).
    Bell,
}

impl Voice {
    pub const ALL: [Voice; 4] = [Voice::Triangle, Voice::Square, Voice::Saw, Voice::Bell];
    pub fn code(self) -> u8 {
        Voice::ALL.iter().position(|m| *m == self).unwrap_or(0) as u8
    }
    pub fn from_code(c: u8) -> Option<Voice> {
        Voice::ALL.get(c as usize).copied()
    }
}

/// A place's music: sequenced in code from these few numbers (the seed picks the chords
/// and the melody), in layers that join as a boss fight goes on.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct MusicDef {
    /// Beats a minute (50..=200).
    pub tempo: f32,
    /// The key's note: C, C#, Db, D ... B.
    pub key: String,
    pub mode: Mode,
    pub lead: Voice,
    /// Chooses the progression and the melody.
    pub seed: u32,
}

impl Default for MusicDef {
    fn default() -> Self {
        MusicDef { tempo: 100.0, key: "A".into(), mode: Mode::Minor, lead: Voice::Triangle, seed: 1 }
    }
}

pub const MUSIC_TEMPO: std::ops::RangeInclusive<f32> = 50.0..=200.0;
pub const NOTE_NAMES: [&str; 12] = ["C", "C#", "D", "D#", "E", "F", "F#", "G", "G#", "A", "A#", "B"];

/// A note name (C, C#, Db ... B) as semitones above C.
pub fn note_semitone(name: &str) -> Option<u8> {
    let flats = ["C", "Db", "D", "Eb", "E", "F", "Gb", "G", "Ab", "A", "Bb", "B"];
    NOTE_NAMES.iter().position(|n| *n == name).or_else(|| flats.iter().position(|n| *n == name)).map(|i| i as u8)
}

impl MusicDef {
    pub fn problem(&self) -> Option<String> {
        if !MUSIC_TEMPO.contains(&self.tempo) {
            return Some(format!("music: tempo must be 50..=200 beats a minute, not {}", self.tempo));
        }
        if note_semitone(&self.key).is_none() {
            return Some(format!("music: key must be a note such as \"D\" or \"F#\" or \"Bb\", not {:?}", self.key));
        }
        None
    }
}

impl Default for ThemeDef {
    fn default() -> Self {
        ThemeDef {
            background: Backdrop::Tiles,
            base: "#07080f".into(),
            accent: "#2a3160".into(),
            scale: 64.0,
            speed: 1.0,
            wall: Wall::Line,
            music: MusicDef::default(),
        }
    }
}

/// The most of the accent colour the floor pattern ever shows (the shader's constant):
/// readability is checked against the floor at this strength.
pub const THEME_PATTERN_PEAK: f32 = 0.3;
/// The least contrast a bullet should have against any floor colour (WCAG's 3:1 for
/// graphics), checked by `mods check` and, for the shipped content, by the tests.
pub const MIN_BULLET_CONTRAST: f32 = 3.0;

/// WCAG contrast ratio of two sRGB colours (1 to 21).
pub fn contrast(a: [u8; 3], b: [u8; 3]) -> f32 {
    let lum = |c: [u8; 3]| {
        let l = |v: u8| {
            let v = v as f32 / 255.0;
            if v <= 0.04045 {
                v / 12.92
            } else {
                ((v + 0.055) / 1.055).powf(2.4)
            }
        };
        0.2126 * l(c[0]) + 0.7152 * l(c[1]) + 0.0722 * l(c[2])
    };
    let (x, y) = (lum(a), lum(b));
    (x.max(y) + 0.05) / (x.min(y) + 0.05)
}

/// Limits on a theme's numbers.
pub const THEME_SCALE: std::ops::RangeInclusive<f32> = 8.0..=512.0;
pub const THEME_SPEED: std::ops::RangeInclusive<f32> = 0.0..=4.0;

impl ThemeDef {
    /// The floor's colours a bullet is seen against: the plain floor, and the floor under
    /// the pattern at its brightest.
    pub fn floor_colours(&self) -> [[u8; 3]; 2] {
        let (b, a) =
            (crate::sim::client_defs::parse_color(&self.base), crate::sim::client_defs::parse_color(&self.accent));
        let mix = |i: usize| (b[i] as f32 + (a[i] as f32 - b[i] as f32) * THEME_PATTERN_PEAK).round() as u8;
        [b, [mix(0), mix(1), mix(2)]]
    }

    /// The worst contrast of colour `c` against this floor.
    pub fn worst_contrast(&self, c: [u8; 3]) -> f32 {
        self.floor_colours().iter().map(|f| contrast(c, *f)).fold(f32::INFINITY, f32::min)
    }

    /// The theme as it travels: the music's key spelt with sharps ("Eb" is "D#"), as
    /// players' games decode it.
    pub fn canonical(&self) -> ThemeDef {
        let mut t = self.clone();
        if let Some(k) = note_semitone(&t.music.key) {
            t.music.key = NOTE_NAMES[k as usize].to_string();
        }
        t
    }

    /// What is wrong with it, if anything (the loader and the client's validator say it).
    pub fn problem(&self) -> Option<String> {
        let hex = |c: &str| c.len() == 7 && c.starts_with('#') && c[1..].bytes().all(|b| b.is_ascii_hexdigit());
        if !hex(&self.base) {
            return Some("theme: base must look like \"#0a0c18\"".into());
        }
        if !hex(&self.accent) {
            return Some("theme: accent must look like \"#3050a0\"".into());
        }
        if !THEME_SCALE.contains(&self.scale) {
            return Some(format!("theme: scale must be 8..=512 px, not {}", self.scale));
        }
        if !THEME_SPEED.contains(&self.speed) {
            return Some(format!("theme: speed must be 0..=4, not {}", self.speed));
        }
        if let Some(why) = self.music.problem() {
            return Some(format!("theme: {why}"));
        }
        None
    }
}

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct HubDef {
    pub arena: [f32; 2],
    pub spawn: [f32; 2],
    #[serde(default = "default_portal_radius")]
    pub portal_radius: f32,
    /// How the hub looks.
    #[serde(default)]
    pub theme: ThemeDef,
    /// A training dummy to shoot at: a harmless enemy that takes every hit and never dies
    /// (server-side only; players see it as any enemy).
    #[serde(default)]
    pub dummy: Option<DummyDef>,
}

/// Where the hub's training dummy stands and which (harmless) enemy it is.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DummyDef {
    pub enemy: String,
    pub at: [f32; 2],
}

fn default_portal_radius() -> f32 {
    28.0
}

impl Default for HubDef {
    fn default() -> Self {
        HubDef {
            arena: [960.0, 640.0],
            spawn: [480.0, 480.0],
            portal_radius: 28.0,
            theme: ThemeDef::default(),
            dummy: None,
        }
    }
}

/// All definitions after every mod is merged. Kinds are indexed by `u16` on the wire.
/// A ship players fly: its look and how it fires, unfocused and focused. Defined in
/// content (`ships.toml`), so mods add ships; unlocked by stars (the player's own record:
/// the server checks only that a ship exists).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ShipDef {
    #[serde(skip)]
    pub id: String,
    pub name: String,
    /// Stars (over every dungeon) a player needs to fly it.
    #[serde(default)]
    pub stars: u32,
    #[serde(default = "default_ship_color")]
    pub color: String,
    /// Unfocused: shots in a fan, degrees between them, ticks between volleys.
    #[serde(default = "default_ship_shots")]
    pub shots: u16,
    #[serde(default = "default_ship_spread")]
    pub spread: f32,
    #[serde(default = "default_ship_cooldown")]
    pub cooldown: u32,
    /// Focused: the same, narrower and denser as a ship wishes.
    #[serde(default = "default_one")]
    pub focus_shots: u16,
    #[serde(default)]
    pub focus_spread: f32,
    #[serde(default = "default_ship_focus_cooldown")]
    pub focus_cooldown: u32,
    /// Damage of each shot (the player bullet kind's when absent).
    #[serde(default)]
    pub damage: Option<i32>,
    /// How it is drawn: a body shape facing where the ship aims (its `spin` is unused).
    #[serde(default = "default_ship_body")]
    pub body: BodyDef,
    /// A mod's picture (`sprites/NAME.png`) drawn instead of the body, facing the aim.
    #[serde(default)]
    pub sprite: Option<String>,
}

fn default_ship_body() -> BodyDef {
    BodyDef { shape: BodyShape::Dart, parts: 3, spin: 0.0 }
}

fn default_ship_color() -> String {
    "#bfffff".into()
}
fn default_ship_shots() -> u16 {
    3
}
fn default_ship_spread() -> f32 {
    9.0
}
fn default_ship_cooldown() -> u32 {
    6
}
fn default_one() -> u16 {
    1
}
fn default_ship_focus_cooldown() -> u32 {
    4
}

#[derive(Clone, Debug, Default)]
pub struct Defs {
    pub bullets: Vec<BulletKindDef>,
    pub enemies: BTreeMap<String, EnemyDef>,
    /// Ships, by id (a player's ship is an index into this order; none: the built-in one).
    pub ships: BTreeMap<String, ShipDef>,
    pub bosses: BTreeMap<String, BossDef>,
    pub dungeons: BTreeMap<String, DungeonDef>,
    pub hub: HubDef,
    /// Mods' sprites and sounds, by name (checked by `crate::media` when loaded).
    pub media: Media,
}

/// One sprite or sound file a mod ships, as stored.
#[derive(Clone, Debug)]
pub struct MediaFile {
    pub bytes: std::sync::Arc<Vec<u8>>,
    /// The mod it came from and its path as messages show it.
    pub mod_id: String,
    pub path: String,
}

/// Mods' sprites (`sprites/*.png`) and sounds (`sounds/*.wav`, `sounds/*.ogg`), by the
/// file's name without its extension.
#[derive(Clone, Debug, Default)]
pub struct Media {
    pub sprites: BTreeMap<String, MediaFile>,
    pub sounds: BTreeMap<String, MediaFile>,
}

impl Defs {
    pub fn bullet_kind(&self, id: &str) -> Option<u16> {
        self.bullets.iter().position(|b| b.id == id).map(|i| i as u16)
    }

    /// Hub portal positions, one per dungeon, in dungeon id order.
    pub fn portals(&self) -> Vec<(String, [f32; 2])> {
        let n = self.dungeons.len().max(1) as f32;
        let [w, _h] = self.hub.arena;
        self.dungeons
            .iter()
            .enumerate()
            .map(|(i, (id, d))| {
                let auto = [w * (i as f32 + 1.0) / (n + 1.0), 160.0];
                (id.clone(), d.portal.unwrap_or(auto))
            })
            .collect()
    }
}
