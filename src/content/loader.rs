//! Finds mods, reads their manifests and definitions, orders them by dependencies and
//! merges them into one set of definitions. Everything wrong is reported, and a mod with
//! an error is refused (with anything that depends on it) while the rest still load.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;

use super::diag::{line_col, Diagnostic};
use super::lua::EmitterSource;
use super::manifest::Manifest;
use super::toml_doc::TomlDoc;
use crate::sim::defs::*;

/// Where mods are looked for.
#[derive(Clone, Debug)]
pub enum ModRoot {
    /// A folder that is itself one mod (holds `mod.toml`), like `content/`.
    Mod(PathBuf),
    /// A folder whose subfolders are mods, like `mods/`.
    Folder(PathBuf),
}

/// A mod's definitions as read from disk, with where each came from.
pub struct ParsedMod {
    pub manifest: Manifest,
    /// Its folder as messages show it, and as found.
    pub dir: String,
    pub path: PathBuf,
    pub bullets: Vec<BulletKindDef>,
    pub enemies: Vec<EnemyDef>,
    pub bosses: Vec<BossDef>,
    pub dungeons: Vec<DungeonDef>,
    pub ships: Vec<ShipDef>,
    pub hub: Option<HubDef>,
    pub emitters: Vec<EmitterSource>,
    /// Its sprites and sounds (each decoded once here, so it is known to be good).
    pub sprites: Vec<(String, MediaFile)>,
    pub sounds: Vec<(String, MediaFile)>,
    /// file name (`enemies.toml`) -> document, for locating references.
    pub docs: HashMap<String, TomlDoc>,
    /// Ids of entries and emitters this mod has but that failed to parse (their error is
    /// already reported): a reference to one is not reported again as "does not exist".
    pub broken: std::collections::BTreeSet<String>,
    pub ok: bool,
}

impl ParsedMod {
    /// Each enemy and boss phase that passes `args` to an emitter: (what runs it, the file
    /// as messages show it, the line of its `emitters` field or phase).
    pub fn args_locations(&self) -> Vec<(String, String, usize)> {
        let with_args = |ems: &[crate::sim::defs::EmitterRef]| ems.iter().any(|e| e.args.is_some());
        let mut out = Vec::new();
        for e in self.enemies.iter().filter(|e| with_args(&e.emitters)) {
            if let Some((line, _)) = self.loc("enemies.toml", &e.id, "emitters") {
                out.push((format!("enemy '{}'", e.id), self.file("enemies.toml"), line));
            }
        }
        for b in &self.bosses {
            for (i, _) in b.phases.iter().enumerate().filter(|(_, p)| with_args(&p.emitters)) {
                if let Some((line, _)) = self.loc("bosses.toml", &b.id, &format!("phases#{i}")) {
                    out.push((format!("boss '{}' phase {}", b.id, i + 1), self.file("bosses.toml"), line));
                }
            }
        }
        out
    }

    fn file(&self, name: &str) -> String {
        format!("{}/{}", self.dir, name)
    }
    fn loc(&self, file: &str, entry: &str, field: &str) -> Option<(usize, usize)> {
        self.docs.get(file).and_then(|d| d.loc(entry, field))
    }

    /// Where this mod defines `id` in `file` (for "defined again" warnings).
    pub fn place_of(&self, file: &str, id: &str) -> String {
        match self.loc(file, id, "") {
            Some((l, _)) => format!("{}:{l}", self.file(file)),
            None => self.file(file),
        }
    }
}

/// Largest file a mod may hold, bytes.
pub const MAX_FILE_BYTES: u64 = 1 << 20;
/// Largest total of a mod's files, bytes.
pub const MAX_MOD_BYTES: u64 = 16 << 20;
/// Most emitter scripts one mod may have.
pub const MAX_EMITTER_FILES: usize = 512;

/// Reads a mod's files safely: only regular files inside the mod folder (a symbolic link,
/// a FIFO or a device is refused, never opened), at most [`MAX_FILE_BYTES`] each and
/// [`MAX_MOD_BYTES`] in all, as UTF-8 text.
struct ModFiles {
    total: u64,
}

impl ModFiles {
    /// `Ok(None)` when the file does not exist; `Err` says what is wrong with it.
    fn read(&mut self, path: &Path) -> Result<Option<String>, String> {
        match self.read_raw(path)? {
            None => Ok(None),
            Some(bytes) => Self::text(bytes).map(Some),
        }
    }

    fn text(bytes: Vec<u8>) -> Result<String, String> {
        String::from_utf8(bytes).map_err(|e| {
            format!("is not UTF-8 text (bad byte at offset {}); save it as UTF-8", e.utf8_error().valid_up_to())
        })
    }

    fn read_raw(&mut self, path: &Path) -> Result<Option<Vec<u8>>, String> {
        let meta = match std::fs::symlink_metadata(path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("cannot read: {e}")),
        };
        if meta.file_type().is_symlink() {
            return Err("is a symbolic link; a mod may hold only regular files".into());
        }
        if !meta.is_file() {
            return Err("is not a regular file".into());
        }
        if meta.len() > MAX_FILE_BYTES {
            return Err(format!("is {} bytes; a mod file may be at most {MAX_FILE_BYTES}", meta.len()));
        }
        self.total += meta.len();
        if self.total > MAX_MOD_BYTES {
            return Err(format!("the mod's files add up to more than {MAX_MOD_BYTES} bytes"));
        }
        use std::io::Read;
        let mut bytes = Vec::with_capacity(meta.len() as usize);
        std::fs::File::open(path)
            .and_then(|f| f.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes))
            .map_err(|e| format!("cannot read: {e}"))?;
        if bytes.len() as u64 > MAX_FILE_BYTES {
            return Err(format!("is more than {MAX_FILE_BYTES} bytes"));
        }
        Ok(Some(bytes))
    }
}

/// Shows a path relative to the working directory when it is under it.
pub fn display_path(p: &Path) -> String {
    let cwd = std::env::current_dir().ok();
    let rel = cwd.as_deref().and_then(|c| p.strip_prefix(c).ok()).unwrap_or(p);
    if rel.as_os_str().is_empty() {
        return ".".to_string(); // the current folder itself
    }
    rel.to_string_lossy().replace('\\', "/")
}

/// The mod folders under the roots, in load order of discovery (content, mods, user).
pub fn discover(roots: &[ModRoot]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    let mut push = |p: PathBuf| {
        let canon = p.canonicalize().unwrap_or(p.clone());
        if !out.iter().any(|o| o.canonicalize().unwrap_or(o.clone()) == canon) {
            out.push(p);
        }
    };
    for r in roots {
        match r {
            ModRoot::Mod(p) => push(p.clone()),
            ModRoot::Folder(p) => {
                let Ok(rd) = std::fs::read_dir(p) else { continue };
                let mut dirs: Vec<PathBuf> =
                    rd.flatten().map(|e| e.path()).filter(|p| p.join("mod.toml").is_file()).collect();
                dirs.sort();
                for d in dirs {
                    push(d);
                }
            }
        }
    }
    out
}

/// The folders under the roots' mod folders that [`discover`] passed over, each with why:
/// a folder that looks like a mod but has no `mod.toml` is a mistake worth naming (a
/// misspelt manifest would otherwise leave the mod out without a word). Hidden folders
/// are not named.
pub fn skipped(roots: &[ModRoot]) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    for r in roots {
        let ModRoot::Folder(root) = r else { continue };
        let Ok(rd) = std::fs::read_dir(root) else { continue };
        let mut dirs: Vec<PathBuf> = rd.flatten().map(|e| e.path()).filter(|p| p.is_dir()).collect();
        dirs.sort();
        for d in dirs {
            if d.join("mod.toml").is_file() || d.file_name().is_some_and(|n| n.to_string_lossy().starts_with('.')) {
                continue;
            }
            out.push((d.clone(), why_not_a_mod(&d)));
        }
    }
    out
}

/// Why a folder is not a mod, in the words a modder needs.
pub fn why_not_a_mod(dir: &Path) -> String {
    let names: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| rd.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    if dir.join("mod.toml").exists() {
        return "its mod.toml is not a regular file".to_string();
    }
    // A manifest under another name: wrong case, a typo, an extra extension.
    let close = names.iter().find(|n| {
        let l = n.to_lowercase();
        l == "mod.toml"
            || l.starts_with("mod.toml.")
            || l.starts_with("mod.") && l.ends_with(".toml")
            || l.ends_with(".toml") && crate::content::lua::spec::suggest(&l, ["mod.toml"].into_iter()).is_some()
    });
    if let Some(n) = close {
        return format!("it has no mod.toml, but has '{n}': a mod's manifest must be named exactly mod.toml");
    }
    let looks_like_mod = names.iter().any(|n| n.ends_with(".toml") || n == "emitters");
    if looks_like_mod {
        format!(
            "it has {} but no mod.toml (every mod needs one: `hailfire mods new ID` writes a working one)",
            names.iter().filter(|n| n.ends_with(".toml") || *n == "emitters").cloned().collect::<Vec<_>>().join(", ")
        )
    } else if dir.join("mods").is_dir()
        || names.iter().any(|n| std::path::Path::new(dir).join(n).join("mod.toml").is_file())
    {
        "it holds mods one level further down: point at it (or move them up)".to_string()
    } else {
        "no mod.toml in it".to_string()
    }
}

#[allow(clippy::too_many_arguments, reason = "the loader's state, passed down")]
fn read_defs<T: DeserializeOwned>(
    files: &mut ModFiles,
    dir: &Path,
    shown: &str,
    name: &str,
    mod_id: &str,
    docs: &mut HashMap<String, TomlDoc>,
    diags: &mut Vec<Diagnostic>,
    set_id: impl Fn(&mut T, String),
) -> Vec<T> {
    let file = format!("{shown}/{name}");
    let text = match files.read(&dir.join(name)) {
        Ok(Some(t)) => t,
        Ok(None) => return Vec::new(),
        Err(e) => {
            diags.push(Diagnostic::error(Some(mod_id), Some(&file), e));
            return Vec::new();
        }
    };
    let Some(doc) = TomlDoc::parse(&file, text, mod_id, diags) else { return Vec::new() };
    let mut out = Vec::new();
    for key in &doc.keys {
        if !Manifest::id_is_valid(key) {
            diags.push(
                Diagnostic::error(
                    Some(mod_id),
                    Some(&file),
                    format!("id '{key}' must use lowercase letters, digits and _"),
                )
                .at(doc.loc(key, "")),
            );
        }
    }
    for (key, mut v) in doc.entries::<T>(mod_id, diags) {
        if Manifest::id_is_valid(&key) {
            set_id(&mut v, key);
            out.push(v);
        }
    }
    docs.insert(name.to_string(), doc);
    out
}

/// Checks that a Lua file compiles (text only), reporting the line of a syntax error.
fn syntax_check(src: &EmitterSource, diags: &mut Vec<Diagnostic>) -> bool {
    let lua = mlua::Lua::new_with(mlua::StdLib::NONE, mlua::LuaOptions::default());
    let Ok(lua) = lua else { return true };
    match lua
        .load(&src.source)
        .set_name(format!("@{}", src.chunk_name()))
        .set_mode(mlua::chunk::ChunkMode::Text)
        .into_function()
    {
        Ok(f) => match super::lua::find_close_variable(&f) {
            Ok(None) => true,
            Ok(Some(line)) => {
                diags.push(
                    Diagnostic::error(
                        Some(&src.mod_id),
                        Some(&src.path),
                        "to-be-closed variables (<close>) are not allowed in emitters",
                    )
                    .at(Some((line, 1))),
                );
                false
            }
            Err(e) => {
                diags.push(Diagnostic::error(Some(&src.mod_id), Some(&src.path), e));
                false
            }
        },
        Err(e) => {
            let msg = match &e {
                mlua::Error::SyntaxError { message, .. } => message.clone(),
                other => other.to_string(),
            };
            // Lua's message starts "path:line: ...": lift the line into the diagnostic.
            let rest = msg.strip_prefix(&format!("{}:", src.chunk_name())).unwrap_or(&msg);
            let (line, text) = match rest.split_once(':') {
                Some((l, t)) if l.parse::<usize>().is_ok() => (l.parse().ok(), t.trim().to_string()),
                _ => (None, msg.clone()),
            };
            diags.push(
                Diagnostic::error(Some(&src.mod_id), Some(&src.path), format!("Lua syntax: {text}"))
                    .at(line.map(|l| (l, 1))),
            );
            false
        }
    }
}

/// Reads one mod folder. Returns `None` when even the manifest is unusable.
pub fn parse_mod(dir: &Path, diags: &mut Vec<Diagnostic>) -> Option<ParsedMod> {
    let shown = display_path(dir);
    let mpath = format!("{shown}/mod.toml");
    let mut files = ModFiles { total: 0 };
    let text = match files.read(&dir.join("mod.toml")) {
        Ok(Some(t)) => t,
        Ok(None) => {
            diags.push(Diagnostic::error(None, Some(&mpath), "cannot read the manifest: no such file"));
            return None;
        }
        Err(e) => {
            diags.push(Diagnostic::error(None, Some(&mpath), format!("the manifest {e}")));
            return None;
        }
    };
    let manifest: Manifest = match toml::from_str(&text) {
        Ok(m) => m,
        Err(e) => {
            let pos = e.span().map(|s| line_col(&text, s.start));
            diags.push(Diagnostic::error(None, Some(&mpath), format!("manifest: {}", e.message().trim())).at(pos));
            return None;
        }
    };
    let before = diags.len();
    let id = manifest.id.clone();
    if !Manifest::id_is_valid(&id) {
        diags.push(Diagnostic::error(Some(&id), Some(&mpath), "mod id must use lowercase letters, digits and _"));
    }
    let mut docs = HashMap::new();
    let bullets =
        read_defs(&mut files, dir, &shown, "bullets.toml", &id, &mut docs, diags, |d: &mut BulletKindDef, k| d.id = k);
    let enemies =
        read_defs(&mut files, dir, &shown, "enemies.toml", &id, &mut docs, diags, |d: &mut EnemyDef, k| d.id = k);
    let ships = read_defs(&mut files, dir, &shown, "ships.toml", &id, &mut docs, diags, |d: &mut ShipDef, k| d.id = k);
    let bosses =
        read_defs(&mut files, dir, &shown, "bosses.toml", &id, &mut docs, diags, |d: &mut BossDef, k| d.id = k);
    let dungeons =
        read_defs(&mut files, dir, &shown, "dungeons.toml", &id, &mut docs, diags, |d: &mut DungeonDef, k| d.id = k);
    let hub = match files.read(&dir.join("hub.toml")) {
        Ok(Some(t)) => match toml::from_str::<HubDef>(&t) {
            Ok(h) => Some(h),
            Err(e) => {
                let pos = e.span().map(|s| line_col(&t, s.start));
                diags.push(
                    Diagnostic::error(Some(&id), Some(&format!("{shown}/hub.toml")), e.message().trim().to_string())
                        .at(pos),
                );
                None
            }
        },
        Ok(None) => None,
        Err(e) => {
            diags.push(Diagnostic::error(Some(&id), Some(&format!("{shown}/hub.toml")), e));
            None
        }
    };
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            let known =
                ["mod.toml", "bullets.toml", "enemies.toml", "bosses.toml", "dungeons.toml", "hub.toml", "ships.toml"];
            if name.ends_with(".toml") && !known.contains(&name.as_str()) {
                diags.push(Diagnostic::warning(
                    Some(&id),
                    Some(&format!("{shown}/{name}")),
                    format!("unknown definitions file (known: {})", known[1..].join(", ")),
                ));
            }
        }
    }
    let mut emitters = Vec::new();
    let mut broken = std::collections::BTreeSet::new();
    let edir = dir.join("emitters");
    if let Ok(rd) = std::fs::read_dir(&edir) {
        let mut scripts: Vec<PathBuf> =
            rd.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "lua")).collect();
        scripts.sort();
        if scripts.len() > MAX_EMITTER_FILES {
            diags.push(Diagnostic::error(
                Some(&id),
                Some(&display_path(&edir)),
                format!("{} emitter files; a mod may have at most {MAX_EMITTER_FILES}", scripts.len()),
            ));
            scripts.truncate(MAX_EMITTER_FILES);
        }
        for f in scripts {
            let stem = f.file_stem().map(|s| s.to_string_lossy().to_string()).unwrap_or_default();
            let path = display_path(&f);
            if !Manifest::id_is_valid(&stem) {
                diags.push(Diagnostic::error(
                    Some(&id),
                    Some(&path),
                    "emitter file names must use lowercase letters, digits and _",
                ));
                continue;
            }
            match files.read_raw(&f).and_then(|b| match b {
                Some(b) if b.first() == Some(&0x1b) => Ok(Some(Err(()))),
                Some(b) => ModFiles::text(b).map(|t| Some(Ok(t))),
                None => Ok(None),
            }) {
                Ok(Some(Err(()))) => {
                    diags.push(Diagnostic::error(
                        Some(&id),
                        Some(&path),
                        "precompiled Lua bytecode is not allowed; ship the source",
                    ));
                }
                Ok(Some(Ok(text))) => {
                    let src = EmitterSource { id: stem, mod_id: id.clone(), path, source: text };
                    if syntax_check(&src, diags) {
                        emitters.push(src);
                    } else {
                        broken.insert(src.id);
                    }
                }
                Ok(None) => {}
                Err(e) => diags.push(Diagnostic::error(Some(&id), Some(&path), e)),
            }
        }
    }
    let (sprites, sounds) = read_media(&mut files, dir, &id, diags);
    let ok = !diags[before..].iter().any(|d| d.is_error());
    // Entries present in a file but not parsed had an error each, already reported.
    let parsed_ids: Vec<&str> = bullets
        .iter()
        .map(|b| b.id.as_str())
        .chain(enemies.iter().map(|e| e.id.as_str()))
        .chain(bosses.iter().map(|b| b.id.as_str()))
        .chain(dungeons.iter().map(|d| d.id.as_str()))
        .chain(ships.iter().map(|d| d.id.as_str()))
        .collect();
    for f in ["bullets.toml", "enemies.toml", "bosses.toml", "dungeons.toml", "ships.toml"] {
        if let Some(doc) = docs.get(f) {
            broken.extend(doc.keys.iter().filter(|k| !parsed_ids.contains(&k.as_str())).cloned());
        }
    }
    Some(ParsedMod {
        manifest,
        dir: shown,
        path: dir.to_path_buf(),
        bullets,
        enemies,
        bosses,
        dungeons,
        ships,
        hub,
        emitters,
        sprites,
        sounds,
        docs,
        broken,
        ok,
    })
}

/// Reads a mod's `sprites/*.png` and `sounds/*.wav|ogg`, decoding each with the decoders
/// players run (`crate::media`), within the media caps. A bad file is an error that names
/// it; a file of another kind in those folders is a warning.
#[allow(clippy::type_complexity)]
fn read_media(
    files: &mut ModFiles,
    dir: &Path,
    id: &str,
    diags: &mut Vec<Diagnostic>,
) -> (Vec<(String, MediaFile)>, Vec<(String, MediaFile)>) {
    use crate::media;
    let mut total = 0usize;
    let mut out = (Vec::new(), Vec::new());
    for (folder, exts) in [("sprites", &["png"][..]), ("sounds", &["wav", "ogg"][..])] {
        let fdir = dir.join(folder);
        let Ok(rd) = std::fs::read_dir(&fdir) else { continue };
        let mut paths: Vec<PathBuf> = rd.flatten().map(|e| e.path()).collect();
        paths.sort();
        let mut seen: std::collections::BTreeMap<String, String> = Default::default();
        for f in paths {
            let path = display_path(&f);
            let ext = f.extension().map(|x| x.to_string_lossy().to_ascii_lowercase()).unwrap_or_default();
            if !exts.contains(&ext.as_str()) {
                let want = exts.iter().map(|e| format!(".{e}")).collect::<Vec<_>>().join(" or ");
                diags.push(Diagnostic::warning(
                    Some(id),
                    Some(&path),
                    format!("not used: {folder}/ holds {want} files only"),
                ));
                continue;
            }
            let stem = f.file_stem().map(|s| s.to_string_lossy().to_string()).unwrap_or_default();
            if !media::name_ok(&stem) {
                diags.push(Diagnostic::error(
                    Some(id),
                    Some(&path),
                    format!("{folder} file names must be 1..=64 lowercase letters, digits and _ (the name is what TOML and scripts use)"),
                ));
                continue;
            }
            if folder == "sounds" && stem.len() > crate::content::lua::MAX_SFX_NAME {
                diags.push(Diagnostic::error(
                    Some(id),
                    Some(&path),
                    format!("sound names are at most {} bytes (what sfx() takes)", crate::content::lua::MAX_SFX_NAME),
                ));
                continue;
            }
            if folder == "sounds" && crate::content::lua::spec::SOUNDS.contains(&stem.as_str()) {
                diags.push(Diagnostic::error(
                    Some(id),
                    Some(&path),
                    format!("'{stem}' is one of the game's own sounds; give the file another name"),
                ));
                continue;
            }
            if let Some(other) = seen.insert(stem.clone(), path.clone()) {
                diags.push(Diagnostic::error(
                    Some(id),
                    Some(&path),
                    format!("{other} has the same name '{stem}'; keep one"),
                ));
                continue;
            }
            let bytes = match files.read_raw(&f) {
                Ok(Some(b)) => b,
                Ok(None) => continue,
                Err(e) => {
                    diags.push(Diagnostic::error(Some(id), Some(&path), e));
                    continue;
                }
            };
            let checked = if folder == "sprites" {
                media::decode_png(&bytes).map(|_| ())
            } else {
                media::decode_sound(&bytes).map(|_| ())
            };
            if let Err(e) = checked {
                diags.push(Diagnostic::error(Some(id), Some(&path), e));
                continue;
            }
            total += bytes.len();
            if total > media::MAX_MOD_MEDIA {
                diags.push(Diagnostic::error(
                    Some(id),
                    Some(&path),
                    format!("the mod's sprites and sounds add up to more than {} bytes", media::MAX_MOD_MEDIA),
                ));
                continue;
            }
            let file = MediaFile { bytes: std::sync::Arc::new(bytes), mod_id: id.to_string(), path };
            if folder == "sprites" {
                out.0.push((stem, file));
            } else {
                out.1.push((stem, file));
            }
        }
    }
    out
}

/// Refuses mods with missing or incompatible dependencies, unsupported game versions or
/// dependency cycles, and returns the rest in an order where dependencies come first.
pub fn order(mods: Vec<ParsedMod>, diags: &mut Vec<Diagnostic>) -> Vec<ParsedMod> {
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    let mut alive: Vec<ParsedMod> = Vec::new();
    for m in mods {
        let mf = m.file("mod.toml");
        if let Some(first) = seen.get(&m.manifest.id) {
            diags.push(Diagnostic::error(
                Some(&m.manifest.id),
                Some(&mf),
                format!("another mod with id '{}' is already loaded from {first}; this one is skipped", m.manifest.id),
            ));
            continue;
        }
        seen.insert(m.manifest.id.clone(), m.dir.clone());
        if !m.manifest.supports_game() {
            diags.push(Diagnostic::error(
                Some(&m.manifest.id),
                Some(&mf),
                format!(
                    "supports game version {} but this is {}",
                    m.manifest.game_version,
                    super::manifest::GAME_VERSION
                ),
            ));
            continue;
        }
        alive.push(m);
    }
    // Refuse mods whose dependencies are missing, broken or the wrong version, repeatedly
    // (a refusal can cascade).
    loop {
        let ids: BTreeMap<String, (semver::Version, bool)> =
            alive.iter().map(|m| (m.manifest.id.clone(), (m.manifest.version.clone(), m.ok))).collect();
        let mut refused = None;
        'outer: for (i, m) in alive.iter().enumerate() {
            for (dep, req) in &m.manifest.dependencies {
                let why = match ids.get(dep) {
                    None => format!("depends on '{dep}' ({req}), which is not installed"),
                    Some((v, _)) if !req.matches(v) => {
                        format!("depends on '{dep}' {req}, but version {v} is installed")
                    }
                    Some((_, false)) => format!("depends on '{dep}', which has errors"),
                    _ => continue,
                };
                diags.push(Diagnostic::error(Some(&m.manifest.id), Some(&m.file("mod.toml")), why));
                refused = Some(i);
                break 'outer;
            }
        }
        match refused {
            Some(i) => {
                alive.remove(i);
            }
            None => break,
        }
    }
    // Kahn's algorithm, ties broken by discovery order.
    let mut ordered = Vec::new();
    let mut rest = alive;
    loop {
        let done: Vec<String> = ordered.iter().map(|m: &ParsedMod| m.manifest.id.clone()).collect();
        let ready = rest.iter().position(|m| m.manifest.dependencies.keys().all(|d| done.contains(d)));
        match ready {
            Some(i) => ordered.push(rest.remove(i)),
            None => break,
        }
    }
    if !rest.is_empty() {
        let names: Vec<String> = rest.iter().map(|m| m.manifest.id.clone()).collect();
        for m in &rest {
            diags.push(Diagnostic::error(
                Some(&m.manifest.id),
                Some(&m.file("mod.toml")),
                format!("dependency cycle among: {}", names.join(" -> ")),
            ));
        }
    }
    ordered
}

/// Merges mods in order; a later mod's definition with the same id replaces the earlier one.
/// A warning for every id that a later mod defines again (bullet kinds, enemies, bosses,
/// dungeons, emitters), naming both places: the later definition wins, which a modder
/// should know they did.
pub fn redefinitions(mods: &[ParsedMod]) -> Vec<Diagnostic> {
    let mut seen: HashMap<(&str, String), (String, String)> = HashMap::new();
    let mut out = Vec::new();
    for m in mods {
        let mid = m.manifest.id.as_str();
        let mut entries: Vec<(&str, &str, String, String)> = Vec::new();
        for b in &m.bullets {
            entries.push(("bullet kind", "bullets.toml", b.id.clone(), m.place_of("bullets.toml", &b.id)));
        }
        for e in &m.enemies {
            entries.push(("enemy", "enemies.toml", e.id.clone(), m.place_of("enemies.toml", &e.id)));
        }
        for b in &m.bosses {
            entries.push(("boss", "bosses.toml", b.id.clone(), m.place_of("bosses.toml", &b.id)));
        }
        for d in &m.dungeons {
            entries.push(("dungeon", "dungeons.toml", d.id.clone(), m.place_of("dungeons.toml", &d.id)));
        }
        for e in &m.emitters {
            entries.push(("emitter", "", e.id.clone(), e.path.clone()));
        }
        for (kind, _, id, place) in entries {
            match seen.get(&(kind, id.clone())) {
                Some((other, other_place)) if other != mid => out.push(Diagnostic::warning(
                    Some(mid),
                    Some(&place),
                    format!(
                        "{kind} '{id}' is defined again here, over mod '{other}' ({other_place}): the later definition wins. If you did not mean to replace it, prefix your ids with your mod's ('{mid}_{id}')"
                    ),
                )),
                _ => {}
            }
            seen.insert((kind, id), (mid.to_string(), place));
        }
    }
    out
}

pub fn merge(mods: &[ParsedMod]) -> (Defs, BTreeMap<String, EmitterSource>) {
    let mut defs = Defs::default();
    let mut emitters = BTreeMap::new();
    for m in mods {
        for b in &m.bullets {
            match defs.bullets.iter_mut().find(|x| x.id == b.id) {
                Some(x) => *x = b.clone(),
                None => defs.bullets.push(b.clone()),
            }
        }
        for e in &m.enemies {
            defs.enemies.insert(e.id.clone(), e.clone());
        }
        for sh in &m.ships {
            defs.ships.insert(sh.id.clone(), sh.clone());
        }
        for b in &m.bosses {
            defs.bosses.insert(b.id.clone(), b.clone());
        }
        for d in &m.dungeons {
            defs.dungeons.insert(d.id.clone(), d.clone());
        }
        if let Some(h) = &m.hub {
            defs.hub = h.clone();
        }
        for e in &m.emitters {
            emitters.insert(e.id.clone(), e.clone());
        }
        // A later mod's file of the same name replaces an earlier one's (a texture pack).
        for (name, f) in &m.sprites {
            defs.media.sprites.insert(name.clone(), f.clone());
        }
        for (name, f) in &m.sounds {
            defs.media.sounds.insert(name.clone(), f.clone());
        }
    }
    (defs, emitters)
}

pub fn color_ok(c: &str) -> bool {
    c.len() == 7 && c.starts_with('#') && c[1..].bytes().all(|b| b.is_ascii_hexdigit())
}

fn inside(p: [f32; 2], arena: [f32; 2]) -> bool {
    p[0].is_finite() && p[1].is_finite() && p[0] >= 0.0 && p[1] >= 0.0 && p[0] <= arena[0] && p[1] <= arena[1]
}

/// Checks one mod's definitions against the merged set: references resolve, numbers are
/// sane, and the game's invariants hold. Returns the number of errors added.
pub fn check_refs(
    m: &ParsedMod,
    defs: &Defs,
    emitters: &BTreeMap<String, EmitterSource>,
    broken: &std::collections::BTreeSet<String>,
    diags: &mut Vec<Diagnostic>,
) -> usize {
    let before = diags.len();
    let id = m.manifest.id.as_str();
    // A reference to something whose own error was reported is not reported again.
    let emitter_ok = |em: &str| emitters.contains_key(em) || broken.contains(em);
    let mut err = |file: &str, entry: &str, field: &str, msg: String| {
        diags.push(Diagnostic::error(Some(id), Some(&m.file(file)), msg).at(m.loc(file, entry, field)));
    };
    // Sprites named in TOML are the mods' own pictures (any loaded mod's, by file name).
    let sprite_refs = m
        .bullets
        .iter()
        .map(|b| ("bullets.toml", "bullet", &b.id, &b.sprite))
        .chain(m.enemies.iter().map(|e| ("enemies.toml", "enemy", &e.id, &e.sprite)))
        .chain(m.bosses.iter().map(|b| ("bosses.toml", "boss", &b.id, &b.sprite)))
        .chain(m.ships.iter().map(|sh| ("ships.toml", "ship", &sh.id, &sh.sprite)));
    for (f, what, entry, sprite) in sprite_refs {
        let Some(name) = sprite else { continue };
        if !defs.media.sprites.contains_key(name) {
            let hint = match crate::content::lua::spec::suggest(name, defs.media.sprites.keys().map(|k| k.as_str())) {
                Some(s) => format!("did you mean '{s}'? "),
                None => String::new(),
            };
            let have = if defs.media.sprites.is_empty() {
                "no mod has a sprites/ folder with PNG files".to_string()
            } else {
                format!("sprites: {}", defs.media.sprites.keys().cloned().collect::<Vec<_>>().join(", "))
            };
            err(
                f,
                entry,
                "sprite",
                format!("{what} '{entry}': sprite '{name}' does not exist (no sprites/{name}.png; {hint}{have})"),
            );
        }
    }
    for b in &m.bullets {
        let f = "bullets.toml";
        if !(b.radius > 0.0 && b.radius <= 64.0) {
            err(f, &b.id, "radius", format!("bullet '{}': radius must be in (0, 64]", b.id));
        }
        if !color_ok(&b.color) {
            err(f, &b.id, "color", format!("bullet '{}': color must look like \"#ff8040\"", b.id));
        }
        if b.damage < 0 {
            err(f, &b.id, "damage", format!("bullet '{}': damage must not be negative", b.id));
        }
    }
    for e in &m.enemies {
        let f = "enemies.toml";
        if e.hp <= 0 {
            err(f, &e.id, "hp", format!("enemy '{}': hp must be positive", e.id));
        }
        if !(e.radius > 0.0 && e.radius <= 256.0) {
            err(f, &e.id, "radius", format!("enemy '{}': radius must be in (0, 256]", e.id));
        }
        if !(e.range.is_finite() && e.range >= 0.0 && e.range <= 8192.0) {
            err(f, &e.id, "range", format!("enemy '{}': range must be a number in [0, 8192] px", e.id));
        }
        if !(e.speed.is_finite() && e.speed >= 0.0 && e.speed <= 20.0) {
            err(f, &e.id, "speed", format!("enemy '{}': speed must be in [0, 20] px/tick", e.id));
        }
        if !color_ok(&e.color) {
            err(f, &e.id, "color", format!("enemy '{}': color must look like \"#ff8040\"", e.id));
        }
        if let Some(why) = e.body.problem() {
            err(f, &e.id, "body", format!("enemy '{}': {why}", e.id));
        }
        if !(e.damage_taken_mult.is_finite() && (0.0..=10.0).contains(&e.damage_taken_mult)) {
            err(f, &e.id, "damage_taken_mult", format!("enemy '{}': damage_taken_mult must be 0..=10", e.id));
        }
        for em in e.emitters.iter().map(|x| x.id.as_str()) {
            if !emitter_ok(em) {
                err(
                    f,
                    &e.id,
                    "emitters",
                    format!("enemy '{}': emitter '{em}' does not exist (no emitters/{em}.lua)", e.id),
                );
            }
        }
        if e.hostile && e.emitters.is_empty() {
            err(
                f,
                &e.id,
                "",
                format!("enemy '{}' is hostile but has no emitter: enemies hurt only through bullets (set hostile = false for a harmless one)", e.id),
            );
        }
    }
    for sh in &m.ships {
        let f = "ships.toml";
        let bad = |what: &str| format!("ship '{}': {what}", sh.id);
        if sh.name.is_empty() || sh.name.len() > 64 || sh.name.chars().any(crate::protocol::names::invisible) {
            err(f, &sh.id, "name", bad("name must be 1..64 bytes of text"));
        }
        if !color_ok(&sh.color) {
            err(f, &sh.id, "color", bad("color must look like \"#ff8040\""));
        }
        if sh.stars > 1000 {
            err(f, &sh.id, "stars", bad("stars must be 0..=1000"));
        }
        for (field, n) in [("shots", sh.shots), ("focus_shots", sh.focus_shots)] {
            if !(1..=9).contains(&n) {
                err(f, &sh.id, field, bad(&format!("{field} must be 1..=9")));
            }
        }
        for (field, d) in [("spread", sh.spread), ("focus_spread", sh.focus_spread)] {
            if !(d.is_finite() && (0.0..=45.0).contains(&d)) {
                err(f, &sh.id, field, bad(&format!("{field} must be 0..=45 degrees")));
            }
        }
        for (field, c) in [("cooldown", sh.cooldown), ("focus_cooldown", sh.focus_cooldown)] {
            if !(2..=60).contains(&c) {
                err(f, &sh.id, field, bad(&format!("{field} must be 2..=60 ticks")));
            }
        }
        if sh.damage.is_some_and(|d| !(1..=100).contains(&d)) {
            err(f, &sh.id, "damage", bad("damage must be 1..=100"));
        }
        if let Some(why) = sh.body.problem() {
            err(f, &sh.id, "body", bad(&why));
        }
    }
    for b in &m.bosses {
        let f = "bosses.toml";
        if b.hp <= 0 {
            err(f, &b.id, "hp", format!("boss '{}': hp must be positive", b.id));
        }
        if b.phases.is_empty() {
            err(f, &b.id, "phases", format!("boss '{}' has no phases", b.id));
        }
        if !(b.radius > 0.0 && b.radius <= 512.0) {
            err(f, &b.id, "radius", format!("boss '{}': radius must be in (0, 512]", b.id));
        }
        if let Some(why) = b.body.problem() {
            err(f, &b.id, "body", format!("boss '{}': {why}", b.id));
        }
        for (i, p) in b.phases.iter().enumerate() {
            let n = i + 1;
            if i == 0 && p.hp_threshold != 1.0 {
                err(
                    f,
                    &b.id,
                    &format!("phases#{i}"),
                    format!("boss '{}' phase {n} '{}': the first phase must have hp_threshold = 1.0", b.id, p.name),
                );
            }
            if !(p.hp_threshold > 0.0 && p.hp_threshold <= 1.0) {
                err(
                    f,
                    &b.id,
                    &format!("phases#{i}"),
                    format!("boss '{}' phase {n}: hp_threshold must be in (0, 1]", b.id),
                );
            }
            if i > 0 && p.hp_threshold >= b.phases[i - 1].hp_threshold {
                err(
                    f,
                    &b.id,
                    &format!("phases#{i}"),
                    format!(
                        "boss '{}' phase {n} '{}': phases must be ordered by strictly decreasing hp_threshold",
                        b.id, p.name
                    ),
                );
            }
            if !(p.damage_taken_mult.is_finite() && p.damage_taken_mult >= 0.0 && p.damage_taken_mult <= 100.0) {
                err(
                    f,
                    &b.id,
                    &format!("phases#{i}"),
                    format!("boss '{}' phase {n}: damage_taken_mult must be in [0, 100]", b.id),
                );
            }
            if p.emitters.is_empty() {
                err(f, &b.id, &format!("phases#{i}"), format!("boss '{}' phase {n} '{}' has no emitter", b.id, p.name));
            }
            for em in p.emitters.iter().map(|x| x.id.as_str()) {
                if !emitter_ok(em) {
                    err(
                        f,
                        &b.id,
                        &format!("phases#{i}"),
                        format!("boss '{}' phase {n}: emitter '{em}' does not exist", b.id),
                    );
                }
            }
        }
    }
    for d in &m.dungeons {
        let f = "dungeons.toml";
        let [w, h] = d.arena;
        if !(64.0..=8192.0).contains(&w) || !(64.0..=8192.0).contains(&h) {
            err(f, &d.id, "arena", format!("dungeon '{}': arena sides must be 64..8192 px", d.id));
        }
        if !inside(d.spawn, d.arena) {
            err(f, &d.id, "spawn", format!("dungeon '{}': spawn is outside the arena", d.id));
        }
        if !inside(d.boss_pos, d.arena) {
            err(f, &d.id, "boss_pos", format!("dungeon '{}': boss_pos is outside the arena", d.id));
        }
        if !defs.bosses.contains_key(&d.boss) && !broken.contains(&d.boss) {
            err(f, &d.id, "boss", format!("dungeon '{}': boss '{}' does not exist", d.id, d.boss));
        }
        let fits = |r: f32| 2.0 * r <= w.min(h);
        if let Some(b) = defs.bosses.get(&d.boss).filter(|b| !fits(b.radius)) {
            err(
                f,
                &d.id,
                "boss",
                format!("dungeon '{}': boss '{}' (radius {}) does not fit in the {w}x{h} arena", d.id, b.id, b.radius),
            );
        }
        if !(1..=crate::sim::client_defs::MAX_DUNGEON_PLAYERS).contains(&d.max_players) {
            err(
                f,
                &d.id,
                "max_players",
                format!("dungeon '{}': max_players must be 1..={}", d.id, crate::sim::client_defs::MAX_DUNGEON_PLAYERS),
            );
        }
        if let Some(p) = d.portal {
            if !inside(p, defs.hub.arena) {
                err(f, &d.id, "portal", format!("dungeon '{}': portal {:?} is outside the hub's arena", d.id, p));
            }
        }
        if let Some(why) = d.theme.problem() {
            err(f, &d.id, "theme", format!("dungeon '{}': {why}", d.id));
        }
        if !(1..=crate::sim::defs::MAX_DIFFICULTY).contains(&d.difficulty) {
            err(f, &d.id, "difficulty", format!("dungeon '{}': difficulty must be 1..=5, not {}", d.id, d.difficulty));
        }
        for (wi, wave) in d.waves.iter().enumerate() {
            for s in &wave.spawns {
                if !defs.enemies.contains_key(&s.enemy) && !broken.contains(&s.enemy) {
                    err(
                        f,
                        &d.id,
                        &format!("waves#{wi}"),
                        format!("dungeon '{}' wave {}: enemy '{}' does not exist", d.id, wi + 1, s.enemy),
                    );
                }
                if s.count > 64 {
                    err(
                        f,
                        &d.id,
                        &format!("waves#{wi}"),
                        format!("dungeon '{}' wave {}: count must be at most 64", d.id, wi + 1),
                    );
                }
                if !inside([s.x, s.y], d.arena) {
                    err(
                        f,
                        &d.id,
                        &format!("waves#{wi}"),
                        format!("dungeon '{}' wave {}: spawn x/y must be numbers inside the arena", d.id, wi + 1),
                    );
                }
                if !(s.spacing.is_finite() && s.spacing.abs() <= 8192.0) {
                    err(
                        f,
                        &d.id,
                        &format!("waves#{wi}"),
                        format!("dungeon '{}' wave {}: spacing must be a number within 8192 px", d.id, wi + 1),
                    );
                }
                if let Some(e) = defs.enemies.get(&s.enemy).filter(|e| !fits(e.radius)) {
                    err(
                        f,
                        &d.id,
                        &format!("waves#{wi}"),
                        format!(
                            "dungeon '{}' wave {}: enemy '{}' (radius {}) does not fit in the {w}x{h} arena",
                            d.id,
                            wi + 1,
                            e.id,
                            e.radius
                        ),
                    );
                }
            }
        }
    }
    if let Some(hub) = &m.hub {
        let side = |v: f32| (64.0..=8192.0).contains(&v);
        if !inside(hub.spawn, hub.arena) || !side(hub.arena[0]) || !side(hub.arena[1]) {
            diags.push(Diagnostic::error(
                Some(id),
                Some(&m.file("hub.toml")),
                "hub: the arena's sides must be 64..8192 px and the spawn inside it",
            ));
        }
        if !(4.0..=256.0).contains(&hub.portal_radius) {
            diags.push(Diagnostic::error(Some(id), Some(&m.file("hub.toml")), "hub: portal_radius must be 4..256 px"));
        }
        if let Some(why) = hub.theme.problem() {
            diags.push(Diagnostic::error(Some(id), Some(&m.file("hub.toml")), format!("hub: {why}")));
        }
        if let Some(d) = &hub.dummy {
            // The hub is safe: its dummy must be an enemy that cannot shoot.
            let why = match defs.enemies.get(&d.enemy) {
                None => Some(format!("hub: dummy: enemy '{}' does not exist", d.enemy)),
                Some(e) if e.hostile || !e.emitters.is_empty() => Some(format!(
                    "hub: dummy: enemy '{}' must be harmless (hostile = false and no emitters): the hub is safe",
                    d.enemy
                )),
                Some(_) if !inside(d.at, hub.arena) => {
                    Some(format!("hub: dummy: at {:?} is outside the hub's arena", d.at))
                }
                Some(_) => None,
            };
            if let Some(why) = why {
                diags.push(Diagnostic::error(Some(id), Some(&m.file("hub.toml")), why));
            }
        }
    }
    diags.len() - before
}
