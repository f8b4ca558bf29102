//! The client-side part of the content: what a client needs to replicate, draw and name
//! things, and nothing else. Bullet kinds (looks; the replica takes every number it
//! simulates from the spawn events), enemy and boss looks and names, dungeon names and
//! arenas, the hub layout. HP, behaviours, emitters, waves and damage are server-only and
//! have no field here, so they cannot cross the wire (`protocol::content` encodes this type
//! and only this type).
//!
//! Enemies, bosses and dungeons are kept sorted by id: snapshots refer to enemies and
//! bosses by their index in that order.

use super::defs::{BodyDef, Defs, HubDef, Shape};

/// Limits on what client-side content may hold. The mod loader runs [`validate`] on the
/// merged content too, so a server cannot load what its clients would refuse.
pub const MAX_BULLET_KINDS: usize = 4096;
pub const MAX_ENEMIES: usize = 4096;
pub const MAX_BOSSES: usize = 1024;
pub const MAX_PHASES: usize = 32;
pub const MAX_DUNGEONS: usize = 1024;
pub const MAX_ID: usize = 64;
pub const MAX_SHIPS: usize = 64;

/// A ship as the ship select shows it (how it fires is server-side).
#[derive(Clone, Debug, PartialEq)]
pub struct ShipLook {
    pub id: String,
    pub name: String,
    /// Stars a player needs to fly it.
    pub stars: u32,
    pub color: [u8; 3],
    pub body: BodyDef,
    /// Index into [`ClientDefs::sprites`], drawn instead of the body.
    pub sprite: Option<u16>,
}
pub const MAX_NAME: usize = 64;
/// Arena sides, px (as the mod loader requires).
pub const ARENA_MIN: f32 = 64.0;
pub const ARENA_MAX: f32 = 8192.0;
/// Bullet radius, px (as the mod loader requires).
pub const BULLET_RADIUS_MAX: f32 = 64.0;
/// Enemy and boss radius, px.
pub const BODY_RADIUS_MAX: f32 = 512.0;
pub const MAX_DUNGEON_PLAYERS: u32 = 64;

#[derive(Clone, Debug, PartialEq)]
pub struct BulletLook {
    pub id: String,
    pub radius: f32,
    pub color: [u8; 3],
    pub shape: Shape,
    /// Index into [`ClientDefs::sprites`], drawn instead of the shape.
    pub sprite: Option<u16>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct EnemyLook {
    pub id: String,
    pub name: String,
    pub radius: f32,
    pub color: [u8; 3],
    pub body: BodyDef,
    pub sprite: Option<u16>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct BossLook {
    pub id: String,
    pub name: String,
    pub radius: f32,
    pub color: [u8; 3],
    pub body: BodyDef,
    pub sprite: Option<u16>,
    /// Phase names, in order (the HUD shows the current one).
    pub phases: Vec<String>,
}

/// Mods' sprites or sounds as client-side content carries them (sorted by name).
pub fn media_assets(m: &std::collections::BTreeMap<String, super::defs::MediaFile>) -> Vec<MediaAsset> {
    m.iter().map(|(name, f)| MediaAsset { name: name.clone(), bytes: f.bytes.clone() }).collect()
}

/// A mod's sprite (PNG) or sound (WAV, Ogg Vorbis) as its file holds it; players decode
/// it with `crate::media` (the validator does, before anything uses it).
#[derive(Clone, Debug, PartialEq)]
pub struct MediaAsset {
    pub name: String,
    pub bytes: std::sync::Arc<Vec<u8>>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct DungeonInfo {
    pub id: String,
    pub name: String,
    pub arena: [f32; 2],
    pub spawn: [f32; 2],
    pub max_players: u32,
    /// Index into [`ClientDefs::bosses`].
    pub boss: u16,
    /// Portal position in the hub (laid out already when the mod gave none).
    pub portal: [f32; 2],
    /// 1..=5, shown on the portal.
    pub difficulty: u8,
    /// How it looks and sounds.
    pub theme: super::defs::ThemeDef,
}

#[derive(Clone, Debug, PartialEq, Default)]
pub struct ClientDefs {
    pub bullets: Vec<BulletLook>,
    pub enemies: Vec<EnemyLook>,
    pub bosses: Vec<BossLook>,
    pub dungeons: Vec<DungeonInfo>,
    pub hub: HubDef,
    /// Ships, sorted by id (a ship's number is its index here).
    pub ships: Vec<ShipLook>,
    /// Mods' sprites and sounds, sorted by name (looks refer to sprites by index; `sfx`
    /// events name sounds).
    pub sprites: Vec<MediaAsset>,
    pub sounds: Vec<MediaAsset>,
}

/// `#rrggbb` as bytes; anything else is white (the mod loader refuses bad colours first).
pub fn parse_color(s: &str) -> [u8; 3] {
    let h = s.strip_prefix('#').unwrap_or(s);
    match (h.len(), u32::from_str_radix(h, 16)) {
        (6, Ok(v)) => [(v >> 16) as u8, (v >> 8) as u8, v as u8],
        _ => [255, 255, 255],
    }
}

impl ClientDefs {
    /// Whether `new` can replace these definitions in a running game (a live content
    /// update): the ids in order (snapshots and events refer to them by index), sizes,
    /// arenas and layouts must stay; colours, names, bodies, shapes, themes, difficulty and
    /// phase names may change. Err says what changed, in words for the players.
    pub fn live_compatible(&self, new: &ClientDefs) -> Result<(), String> {
        fn same<T>(a: &[T], b: &[T], id: impl Fn(&T) -> &str) -> bool {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| id(x) == id(y))
        }
        if !same(&self.bullets, &new.bullets, |b| &b.id) {
            return Err("bullet kinds were added or removed".into());
        }
        if let Some((b, _)) = self.bullets.iter().zip(&new.bullets).find(|(a, b)| a.radius != b.radius) {
            return Err(format!("bullet kind '{}' changed size", b.id));
        }
        if !same(&self.enemies, &new.enemies, |e| &e.id) {
            return Err("enemies were added or removed".into());
        }
        if let Some((e, _)) = self.enemies.iter().zip(&new.enemies).find(|(a, b)| a.radius != b.radius) {
            return Err(format!("enemy '{}' changed size", e.id));
        }
        if !same(&self.bosses, &new.bosses, |b| &b.id) {
            return Err("bosses were added or removed".into());
        }
        if let Some((b, _)) =
            self.bosses.iter().zip(&new.bosses).find(|(a, b)| a.radius != b.radius || a.phases.len() != b.phases.len())
        {
            return Err(format!("boss '{}' changed size or its number of phases", b.id));
        }
        if !same(&self.dungeons, &new.dungeons, |d| &d.id) {
            return Err("dungeons were added or removed".into());
        }
        let layout = |d: &DungeonInfo| (d.arena, d.spawn, d.max_players, d.boss, d.portal);
        if let Some((d, _)) = self.dungeons.iter().zip(&new.dungeons).find(|(a, b)| layout(a) != layout(b)) {
            return Err(format!("dungeon '{}' changed its arena, boss or portal", d.id));
        }
        if !same(&self.ships, &new.ships, |s| &s.id)
            || self.ships.iter().zip(&new.ships).any(|(a, b)| a.stars != b.stars)
        {
            return Err("the ships changed".into());
        }
        let hub = |h: &HubDef| (h.arena, h.spawn, h.portal_radius, h.dummy.clone());
        if hub(&self.hub) != hub(&new.hub) {
            return Err("the hub's layout changed".into());
        }
        Ok(())
    }

    /// The client-side part of merged definitions.
    pub fn from_defs(d: &Defs) -> ClientDefs {
        let boss_ids: Vec<&String> = d.bosses.keys().collect();
        let portals = d.portals();
        let sprite = |name: &Option<String>| {
            name.as_ref().and_then(|n| d.media.sprites.keys().position(|k| k == n)).map(|i| i as u16)
        };
        let assets = media_assets;
        ClientDefs {
            bullets: d
                .bullets
                .iter()
                .map(|b| BulletLook {
                    id: b.id.clone(),
                    radius: b.radius,
                    color: parse_color(&b.color),
                    shape: b.shape,
                    sprite: sprite(&b.sprite),
                })
                .collect(),
            enemies: d
                .enemies
                .iter()
                .map(|(id, e)| EnemyLook {
                    id: id.clone(),
                    name: e.name.clone(),
                    radius: e.radius,
                    color: parse_color(&e.color),
                    body: e.body,
                    sprite: sprite(&e.sprite),
                })
                .collect(),
            bosses: d
                .bosses
                .iter()
                .map(|(id, b)| BossLook {
                    id: id.clone(),
                    name: b.name.clone(),
                    radius: b.radius,
                    color: parse_color(&b.color),
                    body: b.body,
                    sprite: sprite(&b.sprite),
                    phases: b.phases.iter().map(|p| p.name.clone()).collect(),
                })
                .collect(),
            dungeons: d
                .dungeons
                .iter()
                .zip(portals)
                .map(|((id, g), (_, portal))| DungeonInfo {
                    id: id.clone(),
                    name: g.name.clone(),
                    arena: g.arena,
                    spawn: g.spawn,
                    max_players: g.max_players,
                    boss: boss_ids.iter().position(|b| **b == g.boss).unwrap_or(0) as u16,
                    portal,
                    difficulty: g.difficulty,
                    theme: g.theme.canonical(),
                })
                .collect(),
            // The dummy is the server's business: players see it as an enemy.
            hub: HubDef { dummy: None, theme: d.hub.theme.canonical(), ..d.hub.clone() },
            ships: d
                .ships
                .iter()
                .map(|(id, sh)| ShipLook {
                    id: id.clone(),
                    name: sh.name.clone(),
                    stars: sh.stars,
                    color: parse_color(&sh.color),
                    body: sh.body,
                    sprite: sprite(&sh.sprite),
                })
                .collect(),
            sprites: assets(&d.media.sprites),
            sounds: assets(&d.media.sounds),
        }
    }

    pub fn dungeon(&self, id: &str) -> Option<&DungeonInfo> {
        self.dungeons.iter().find(|d| d.id == id)
    }

    /// Hub portal positions, one per dungeon, in dungeon id order.
    pub fn portals(&self) -> Vec<(String, [f32; 2])> {
        self.dungeons.iter().map(|d| (d.id.clone(), d.portal)).collect()
    }

    /// The name to show for a dungeon id ("" is the hub).
    pub fn place_name(&self, dungeon: &str) -> String {
        if dungeon.is_empty() {
            return "The Hub".into();
        }
        self.dungeon(dungeon).map_or_else(|| dungeon.to_string(), |d| d.name.clone())
    }
}

fn id_ok(s: &str) -> bool {
    !s.is_empty() && s.len() <= MAX_ID && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

fn in_range(v: f32, lo: f32, hi: f32) -> bool {
    v.is_finite() && v >= lo && v <= hi
}

fn positive_upto(v: f32, hi: f32) -> bool {
    v.is_finite() && v > 0.0 && v <= hi
}

/// Checks every value and reference of client-side content: the rules a mod on disk is
/// held to by the loader, and the ones the renderer and the wire rely on.
pub fn validate(d: &ClientDefs) -> Result<(), String> {
    validate_media(d)?;
    for (k, sh) in d.ships.iter().enumerate() {
        let ok_id = !sh.id.is_empty()
            && sh.id.len() <= MAX_ID
            && sh.id.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
        if !ok_id || (k > 0 && d.ships[k - 1].id >= sh.id) {
            return Err(format!("ship '{}': ids must be unique, sorted, of a-z 0-9 _", sh.id));
        }
        if sh.name.is_empty() || sh.name.len() > MAX_NAME || sh.name.chars().any(crate::protocol::names::invisible) {
            return Err(format!("ship '{}': a name of 1..={MAX_NAME} bytes of text", sh.id));
        }
        if sh.stars > 1000 {
            return Err(format!("ship '{}': stars must be 0..=1000", sh.id));
        }
        if let Some(why) = sh.body.problem() {
            return Err(format!("ship '{}': {why}", sh.id));
        }
    }
    let counts = [
        ("bullet kinds", d.bullets.len(), MAX_BULLET_KINDS),
        ("enemies", d.enemies.len(), MAX_ENEMIES),
        ("bosses", d.bosses.len(), MAX_BOSSES),
        ("dungeons", d.dungeons.len(), MAX_DUNGEONS),
        ("ships", d.ships.len(), MAX_SHIPS),
    ];
    for (what, n, max) in counts {
        if n > max {
            return Err(format!("{n} {what}; at most {max} are allowed"));
        }
    }
    let names = d
        .enemies
        .iter()
        .map(|e| &e.name)
        .chain(d.bosses.iter().flat_map(|b| std::iter::once(&b.name).chain(&b.phases)))
        .chain(d.dungeons.iter().map(|g| &g.name))
        .chain(d.ships.iter().map(|s| &s.name));
    // The wire refuses invisible characters in every string: a name the server loads must
    // be one its players can decode.
    for n in names {
        if n.len() > MAX_NAME || n.chars().any(crate::protocol::names::invisible) {
            return Err(format!(
                "name '{}' must be at most {MAX_NAME} bytes with no control or invisible characters",
                crate::protocol::names::for_log(n)
            ));
        }
    }
    let mut ids: std::collections::BTreeSet<&str> = std::collections::BTreeSet::new();
    for b in &d.bullets {
        if !id_ok(&b.id) {
            return Err(format!("bullet kind id '{}' must be 1..={MAX_ID} of a-z, 0-9, _", b.id));
        }
        if !ids.insert(&b.id) {
            return Err(format!("bullet kind '{}' is defined twice", b.id));
        }
        if !positive_upto(b.radius, BULLET_RADIUS_MAX) {
            return Err(format!("bullet kind '{}': radius {} is outside (0, {BULLET_RADIUS_MAX}]", b.id, b.radius));
        }
    }
    let sorted = |what: &str, list: Vec<&str>| -> Result<(), String> {
        for (i, id) in list.iter().enumerate() {
            if !id_ok(id) {
                return Err(format!("{what} id '{id}' must be 1..={MAX_ID} of a-z, 0-9, _"));
            }
            if i > 0 && list[i - 1] >= *id {
                return Err(format!("{what} '{id}' is out of order or defined twice"));
            }
        }
        Ok(())
    };
    sorted("enemy", d.enemies.iter().map(|e| e.id.as_str()).collect())?;
    sorted("boss", d.bosses.iter().map(|e| e.id.as_str()).collect())?;
    sorted("dungeon", d.dungeons.iter().map(|e| e.id.as_str()).collect())?;
    for e in &d.enemies {
        if !positive_upto(e.radius, BODY_RADIUS_MAX) {
            return Err(format!("enemy '{}': radius {} is outside (0, {BODY_RADIUS_MAX}]", e.id, e.radius));
        }
        if let Some(why) = e.body.problem() {
            return Err(format!("enemy '{}': {why}", e.id));
        }
    }
    for b in &d.bosses {
        if !positive_upto(b.radius, BODY_RADIUS_MAX) {
            return Err(format!("boss '{}': radius {} is outside (0, {BODY_RADIUS_MAX}]", b.id, b.radius));
        }
        if let Some(why) = b.body.problem() {
            return Err(format!("boss '{}': {why}", b.id));
        }
        if b.phases.is_empty() {
            return Err(format!("boss '{}' has no phases", b.id));
        }
    }
    let arena_ok = |a: [f32; 2]| in_range(a[0], ARENA_MIN, ARENA_MAX) && in_range(a[1], ARENA_MIN, ARENA_MAX);
    let inside = |p: [f32; 2], a: [f32; 2]| in_range(p[0], 0.0, a[0]) && in_range(p[1], 0.0, a[1]);
    if !arena_ok(d.hub.arena) {
        return Err(format!("hub: arena {:?} must be {ARENA_MIN}..={ARENA_MAX} px on each side", d.hub.arena));
    }
    if !inside(d.hub.spawn, d.hub.arena) {
        return Err(format!("hub: spawn {:?} is outside the arena", d.hub.spawn));
    }
    if !in_range(d.hub.portal_radius, 4.0, 256.0) {
        return Err(format!("hub: portal_radius {} is outside 4..=256", d.hub.portal_radius));
    }
    if let Some(why) = d.hub.theme.problem() {
        return Err(format!("hub: {why}"));
    }
    for g in &d.dungeons {
        if let Some(why) = g.theme.problem() {
            return Err(format!("dungeon '{}': {why}", g.id));
        }
        if !(1..=super::defs::MAX_DIFFICULTY).contains(&g.difficulty) {
            return Err(format!("dungeon '{}': difficulty {} is outside 1..=5", g.id, g.difficulty));
        }
        if !arena_ok(g.arena) {
            return Err(format!(
                "dungeon '{}': arena {:?} must be {ARENA_MIN}..={ARENA_MAX} px on each side",
                g.id, g.arena
            ));
        }
        if !inside(g.spawn, g.arena) {
            return Err(format!("dungeon '{}': spawn {:?} is outside its arena", g.id, g.spawn));
        }
        if !inside(g.portal, d.hub.arena) {
            return Err(format!("dungeon '{}': portal {:?} is outside the hub", g.id, g.portal));
        }
        if !(1..=MAX_DUNGEON_PLAYERS).contains(&g.max_players) {
            return Err(format!(
                "dungeon '{}': max_players {} is outside 1..={MAX_DUNGEON_PLAYERS}",
                g.id, g.max_players
            ));
        }
        if g.boss as usize >= d.bosses.len() {
            return Err(format!("dungeon '{}' names boss #{} which does not exist", g.id, g.boss));
        }
    }
    Ok(())
}

/// Sprites and sounds: names, counts, sizes, each file decoding with the game's own
/// decoders, the sprites fitting the atlas, and every look's sprite index in range.
fn validate_media(d: &ClientDefs) -> Result<(), String> {
    use crate::media;
    for (what, list, max) in [("sprites", &d.sprites, media::MAX_SPRITES), ("sounds", &d.sounds, media::MAX_SOUNDS)] {
        if list.len() > max {
            return Err(format!("{} {what}; at most {max} are allowed", list.len()));
        }
        for (i, a) in list.iter().enumerate() {
            if !media::name_ok(&a.name) || (i > 0 && list[i - 1].name >= a.name) {
                return Err(format!("{what}: name '{}' must be unique, sorted, of a-z 0-9 _", a.name));
            }
        }
    }
    for s in &d.sounds {
        if s.name.len() > crate::content::lua::MAX_SFX_NAME
            || crate::content::lua::spec::SOUNDS.contains(&s.name.as_str())
        {
            return Err(format!("sound '{}' has the name of one of the game's own sounds", s.name));
        }
        media::decode_sound(&s.bytes).map_err(|e| format!("sound '{}' {e}", s.name))?;
    }
    let mut sizes = Vec::with_capacity(d.sprites.len());
    for s in &d.sprites {
        let img = media::decode_png(&s.bytes).map_err(|e| format!("sprite '{}' {e}", s.name))?;
        sizes.push((img.width, img.height));
    }
    media::atlas_layout(&sizes)?;
    let n = d.sprites.len();
    let refs = d
        .bullets
        .iter()
        .map(|b| (&b.id, b.sprite))
        .chain(d.enemies.iter().map(|e| (&e.id, e.sprite)))
        .chain(d.bosses.iter().map(|b| (&b.id, b.sprite)))
        .chain(d.ships.iter().map(|s| (&s.id, s.sprite)));
    for (id, sprite) in refs {
        if sprite.is_some_and(|i| i as usize >= n) {
            return Err(format!("'{id}' uses sprite {} of {n}", sprite.unwrap_or(0)));
        }
    }
    Ok(())
}

#[cfg(test)]
mod live_tests {
    use super::*;

    #[test]
    fn looks_may_change_live_and_what_a_running_game_relies_on_may_not() {
        let c = crate::content::load(&[crate::content::ModRoot::Mod(crate::content::content_dir())]);
        let old = ClientDefs::from_defs(&c.defs);
        let mut new = old.clone();
        new.enemies[0].color = [1, 2, 3];
        new.enemies[0].name = "Renamed".into();
        new.bullets[0].color = [9, 9, 9];
        new.dungeons[0].theme.base = "#ff0000".into();
        new.bosses[0].phases[0] = "Another name".into();
        assert_eq!(old.live_compatible(&new), Ok(()));
        let mut bigger = old.clone();
        bigger.bullets[1].radius += 1.0;
        assert!(old.live_compatible(&bigger).unwrap_err().contains("changed size"));
        let mut fewer = old.clone();
        fewer.enemies.pop();
        assert!(old.live_compatible(&fewer).unwrap_err().contains("enemies were added or removed"));
        let mut moved = old.clone();
        moved.dungeons[0].arena[0] += 10.0;
        assert!(old.live_compatible(&moved).unwrap_err().contains("arena"));
        let mut phases = old.clone();
        phases.bosses[0].phases.push("Extra".into());
        assert!(old.live_compatible(&phases).unwrap_err().contains("phases"));
    }
}
