//! Mods: manifests, TOML definitions and Lua emitters. The base game is itself a mod
//! (`content/`); user mods live in `mods/` and in the user's data directory.
//!
//! Load order: `content/`, then `mods/`, then `<data dir>/mods`, then sorted so that
//! dependencies come first. A later mod may replace an earlier definition with the same id.

pub mod diag;
pub mod host;
pub mod loader;
pub mod lua;
pub mod manifest;
pub mod preview;
pub mod sample;
pub mod scaffold;
pub mod toml_doc;
pub mod validate;
pub mod worker;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

pub use diag::{Diagnostic, Severity};
pub use loader::ModRoot;
pub use lua::EmitterSource;

use crate::sim::script::ScriptFactory;
use crate::sim::Defs;

/// What a loaded mod is, for the Mods menu and the log.
#[derive(Clone, Debug)]
pub struct ModSummary {
    pub id: String,
    pub name: String,
    pub version: String,
    pub dir: String,
    pub loaded: bool,
    /// False when the player turned it off in the Mods menu (the base game cannot be), or
    /// when it is off until asked for and nobody asked.
    pub enabled: bool,
    /// Off until asked for (`enabled_by_default = false` in its mod.toml).
    pub off_by_default: bool,
}

/// Everything the game loaded: merged definitions, emitter sources, and the report.
#[derive(Clone)]
pub struct Content {
    pub defs: Arc<Defs>,
    pub emitters: Arc<BTreeMap<String, EmitterSource>>,
    pub mods: Vec<ModSummary>,
    pub diagnostics: Vec<Diagnostic>,
    /// Why players' games would refuse this content's client-side part (the validator
    /// they run on what they receive), found once at load; None when they would accept it.
    pub client_refusal: Option<String>,
    /// Per mod, the ids of entries and emitters that failed to parse (each with its error).
    pub broken_by_mod: BTreeMap<String, std::collections::BTreeSet<String>>,
    /// Where each emitter call with TOML `args` is written ("file:line"), by what runs it
    /// (`enemy 'imp'`, `boss 'ogre' phase 2`): a dry-run error in such an emitter also
    /// names the entry that passed the values, as well as the Lua line that used them.
    pub args_at: BTreeMap<String, String>,
}

impl Content {
    /// Scripts for a world: the base game in process, every other mod in workers.
    pub fn script_factory(&self) -> Arc<dyn ScriptFactory> {
        self.script_factory_trusting(&[])
    }

    /// Scripts for a world, running the base game and the mods in `trusted` in process.
    pub fn script_factory_trusting(&self, trusted: &[String]) -> Arc<dyn ScriptFactory> {
        Arc::new(host::ScriptHost::new(&self.defs, self.emitters.clone(), host::Isolation::workers(trusted)))
    }

    /// Scripts for a world with every mod in process (benchmarks compare against this).
    pub fn script_factory_in_process(&self) -> Arc<dyn ScriptFactory> {
        Arc::new(host::ScriptHost::new(&self.defs, self.emitters.clone(), host::Isolation::InProcess))
    }

    pub fn errors(&self) -> impl Iterator<Item = &Diagnostic> {
        self.diagnostics.iter().filter(|d| d.is_error())
    }

    /// Whether the base game itself loaded (without it there is nothing to play).
    pub fn base_loaded(&self) -> bool {
        self.mods.iter().any(|m| m.id == "base" && m.loaded)
    }

    /// Loads the default roots (see the module docs).
    pub fn load_default() -> Content {
        load(&default_roots())
    }

    /// The default roots plus `extra` folders (each a mod, or a folder of mods: the
    /// dedicated server's `--mods`), leaving out the mods whose ids are in `disabled`.
    pub fn load_configured(extra: &[PathBuf], disabled: &[String]) -> Content {
        Content::load_configured_trusting(extra, disabled, &[])
    }

    /// [`Content::load_configured`] for a server whose `trusted_mods` run in its process:
    /// the load-time dry run runs them there too, as the server will.
    pub fn load_configured_trusting(extra: &[PathBuf], disabled: &[String], trusted: &[String]) -> Content {
        Content::load_chosen(extra, &Choice { disabled: disabled.to_vec(), enabled: Vec::new() }, trusted)
    }

    /// The default roots plus `extra` folders, with the player's or operator's choice of
    /// mods: the mods under `extra` (named with `--mods`) are asked for, so a mod that is
    /// off by default loads when named there.
    pub fn load_chosen(extra: &[PathBuf], choice: &Choice, trusted: &[String]) -> Content {
        let mut roots = default_roots();
        roots.extend(extra.iter().map(|p| root_for(p)));
        let mut choice = choice.clone();
        choice.enabled.extend(extra.iter().map(|p| p.canonicalize().unwrap_or(p.clone()).display().to_string()));
        load_checked(&roots, false, &choice, trusted)
    }
}

/// Where the base content may be, in the order looked at: beside the executable in every
/// installed layout (`content/` for the tarball and Windows, `../share/hailfire/content`
/// for the Linux package, `../Resources/content` for the macOS app), then
/// `$HAILFIRE_CONTENT`, then the working directory and the source tree this was built
/// from (development).
pub fn content_candidates(exe: Option<&std::path::Path>) -> Vec<PathBuf> {
    let mut c = Vec::new();
    if let Some(dir) = exe.and_then(|e| e.parent()) {
        c.push(dir.join("content"));
        c.push(dir.join("../share/hailfire/content"));
        c.push(dir.join("../Resources/content"));
    }
    if let Ok(p) = std::env::var("HAILFIRE_CONTENT") {
        c.push(PathBuf::from(p));
    }
    c.push(PathBuf::from("content"));
    c.push(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("content"));
    c
}

/// The folder holding the base content: the first of [`content_candidates`] that holds a
/// `mod.toml` (the last one when none does, so errors name a real place to look).
pub fn content_dir() -> PathBuf {
    let exe = std::env::current_exe().ok();
    let mut candidates = content_candidates(exe.as_deref());
    match candidates.iter().position(|c| c.join("mod.toml").is_file()) {
        Some(i) => {
            let found = candidates.swap_remove(i);
            std::fs::canonicalize(&found).unwrap_or(found)
        }
        None => candidates.pop().expect("the source tree is always a candidate"),
    }
}

/// `<data dir>/mods`, where players drop mods they download.
pub fn user_mods_dir() -> Option<PathBuf> {
    directories::ProjectDirs::from("", "", "Hailfire").map(|d| d.data_dir().join("mods"))
}

pub fn default_roots() -> Vec<ModRoot> {
    let content = content_dir();
    let mods = content.parent().map(|p| p.join("mods")).unwrap_or_else(|| PathBuf::from("mods"));
    let mut roots = vec![ModRoot::Mod(content), ModRoot::Folder(mods)];
    if let Some(u) = user_mods_dir() {
        roots.push(ModRoot::Folder(u));
    }
    roots
}

/// A folder as a root: a mod if it holds `mod.toml`, else a folder of mods.
pub fn root_for(p: &std::path::Path) -> ModRoot {
    if p.join("mod.toml").is_file() {
        ModRoot::Mod(p.to_path_buf())
    } else {
        ModRoot::Folder(p.to_path_buf())
    }
}

/// Loads every mod under `roots`. Mods with errors are refused (and reported); the rest load.
pub fn load(roots: &[ModRoot]) -> Content {
    load_with(roots, false)
}

/// `lenient` (the validator's mode) keeps the valid parts of broken mods, so that their
/// references are checked and their emitters dry-run too: every error is found in one go.
pub fn load_with(roots: &[ModRoot], lenient: bool) -> Content {
    load_filtered(roots, lenient, &[])
}

/// [`load_with`], leaving out the mods whose ids are in `disabled` (never the base game).
/// A mod that depends on a disabled one is refused with a message saying so.
///
/// The game (not the lenient checker) then dry-runs what it loaded, as `mods check` does,
/// when any mod besides the base game is in: a mod whose scripts fail there is refused
/// with those errors, so the checker's verdict and the game's always agree.
pub fn load_filtered(roots: &[ModRoot], lenient: bool, disabled: &[String]) -> Content {
    load_checked(roots, lenient, &Choice { disabled: disabled.to_vec(), enabled: Vec::new() }, &[])
}

/// Which mods to load besides the base game: every mod found, less `disabled` (ids), and
/// those off by default unless named in `enabled` (by id, or by a folder they are in).
#[derive(Clone, Debug, Default)]
pub struct Choice {
    pub disabled: Vec<String>,
    pub enabled: Vec<String>,
}

impl Choice {
    /// Every mod found under `roots` asked for (the checker and the preview load what they
    /// are pointed at).
    pub fn all_of(roots: &[ModRoot]) -> Choice {
        let enabled = roots
            .iter()
            .map(|r| match r {
                ModRoot::Mod(p) | ModRoot::Folder(p) => p.canonicalize().unwrap_or(p.clone()).display().to_string(),
            })
            .collect();
        Choice { disabled: Vec::new(), enabled }
    }

    /// Whether the mod `id` in `dir`, off by default or not, stays out.
    fn is_off(&self, id: &str, dir: &std::path::Path, off_by_default: bool) -> bool {
        if id == "base" {
            return false;
        }
        if self.disabled.iter().any(|d| d == id) {
            return true;
        }
        let canon = dir.canonicalize().unwrap_or(dir.to_path_buf());
        // An empty entry names nothing (as a path it would be a prefix of every path).
        off_by_default && !self.enabled.iter().filter(|e| !e.is_empty()).any(|e| e == id || canon.starts_with(e))
    }
}

/// [`load_filtered`] with the mods in `trusted` dry-run in this process (as a server that
/// trusts them runs them), the others in script workers.
pub fn load_checked(roots: &[ModRoot], lenient: bool, choice: &Choice, trusted: &[String]) -> Content {
    let content = load_inner(roots, lenient, choice, &[]);
    if lenient || !content.mods.iter().any(|m| m.loaded && m.id != "base") {
        return content;
    }
    let dry = validate::dry_run_trusting(
        &content,
        validate::DRY_RUN_TICKS,
        validate::LOAD_PHASE_TICKS,
        validate::LOAD_TIME_LIMIT,
        trusted,
        true,
    );
    let failing: Vec<String> = content
        .mods
        .iter()
        .filter(|m| m.loaded && m.id != "base")
        .filter(|m| dry.diagnostics.iter().any(|d| d.is_error() && d.mod_id.as_deref() == Some(m.id.as_str())))
        .map(|m| m.id.clone())
        .collect();
    if failing.is_empty() {
        return content;
    }
    let mut again = load_inner(roots, lenient, choice, &failing);
    let mut diags: Vec<Diagnostic> = dry.diagnostics.into_iter().filter(|d| d.is_error()).collect();
    for id in &failing {
        diags.push(Diagnostic::error(
            Some(id),
            None,
            "refused: its scripts failed the dry run above (run `hailfire mods check` on it)",
        ));
    }
    diags.append(&mut again.diagnostics);
    again.diagnostics = diags;
    again
}

/// Loads without the load-time dry run: the preview, which runs the mod live and shows its
/// script errors as they happen, and reloads on every save.
pub fn load_for_preview(roots: &[ModRoot], choice: &Choice) -> Content {
    load_inner(roots, false, choice, &[])
}

fn load_inner(roots: &[ModRoot], lenient: bool, choice: &Choice, refused: &[String]) -> Content {
    let mut diags = Vec::new();
    let mut parsed: Vec<_> = loader::discover(roots).iter().filter_map(|d| loader::parse_mod(d, &mut diags)).collect();
    for m in parsed.iter_mut().filter(|m| refused.contains(&m.manifest.id)) {
        m.ok = false;
    }
    // A mod folder given by itself (not found in a folder of mods) is asked for.
    let mut choice = choice.clone();
    choice.enabled.extend(roots.iter().filter_map(|r| match r {
        ModRoot::Mod(p) => Some(p.canonicalize().unwrap_or(p.clone()).display().to_string()),
        ModRoot::Folder(_) => None,
    }));
    // Decided for each mod found, not for its id: a copy of an example that is asked for
    // (a modder's copy given to --mods, keeping the example's id) loads, while the
    // example itself stays off.
    let off: Vec<bool> =
        parsed.iter().map(|m| choice.is_off(&m.manifest.id, &m.path, !m.manifest.enabled_by_default)).collect();
    let broken: Vec<String> = parsed.iter().filter(|m| !m.ok).map(|m| m.dir.clone()).collect();
    let broken_by_mod: BTreeMap<String, std::collections::BTreeSet<String>> =
        parsed.iter().filter(|m| !m.broken.is_empty()).map(|m| (m.manifest.id.clone(), m.broken.clone())).collect();
    let mut args_at = BTreeMap::new();
    for m in &parsed {
        for (owner, file, at) in m.args_locations() {
            args_at.insert(owner, format!("{file}:{at}"));
        }
    }
    if lenient {
        parsed.iter_mut().for_each(|m| m.ok = true);
    }
    let mut summaries: Vec<ModSummary> = parsed
        .iter()
        .zip(&off)
        .map(|(m, off)| ModSummary {
            id: m.manifest.id.clone(),
            name: m.manifest.name.clone(),
            version: m.manifest.version.to_string(),
            dir: m.dir.clone(),
            loaded: false,
            enabled: !off,
            off_by_default: !m.manifest.enabled_by_default,
        })
        .collect();
    let parsed: Vec<_> = parsed.into_iter().zip(off).filter(|(_, off)| !off).map(|(m, _)| m).collect();
    let mut mods: Vec<_> = loader::order(parsed, &mut diags).into_iter().filter(|m| m.ok).collect();
    diags.extend(loader::redefinitions(&mods));
    // Check references against the merged set; refuse offenders and merge again until stable.
    let (defs, emitters) = loop {
        let (defs, emitters) = loader::merge(&mods);
        let mut scratch = Vec::new();
        let bad: Vec<usize> = (0..mods.len())
            .filter(|&i| loader::check_refs(&mods[i], &defs, &emitters, &mods[i].broken, &mut scratch) > 0)
            .collect();
        if bad.is_empty() {
            break (defs, emitters);
        }
        diags.extend(scratch.into_iter().filter(|d| d.is_error()));
        if lenient {
            break loader::merge(&mods);
        }
        for i in bad.into_iter().rev() {
            mods.remove(i);
        }
        // Dependents of a refused mod go too.
        let mut again = Vec::new();
        mods = loader::order(std::mem::take(&mut mods), &mut again);
        diags.extend(again);
    };
    let mut defs = defs;
    if defs.bullet_kind(crate::sim::config::DEFAULT_PLAYER_BULLET).is_none() && !mods.is_empty() {
        diags.push(Diagnostic::error(
            None,
            None,
            format!(
                "no loaded mod defines the bullet kind '{}' that players fire",
                crate::sim::config::DEFAULT_PLAYER_BULLET
            ),
        ));
    }
    for s in summaries.iter_mut() {
        s.loaded = !broken.contains(&s.dir) && mods.iter().any(|m| m.manifest.id == s.id && m.dir == s.dir);
    }
    if defs.bullets.is_empty() {
        defs.bullets.push(crate::sim::defs::BulletKindDef {
            id: crate::sim::config::DEFAULT_PLAYER_BULLET.into(),
            radius: 4.0,
            color: "#ffffff".into(),
            shape: crate::sim::defs::Shape::Orb,
            damage: 10,
            sprite: None,
        });
    }
    // What clients will receive must pass the very validator they run on it.
    let looks = crate::sim::ClientDefs::from_defs(&defs);
    let client_refusal = crate::sim::client_defs::validate(&looks).err().or_else(|| {
        // The whole of it, mods' media included, must also fit what a client accepts.
        let n = crate::protocol::content::encode(&looks).len();
        (n > crate::protocol::content::MAX_CONTENT_BYTES).then(|| {
            format!(
                "it is {n} bytes with every mod's sprites and sounds; players accept at most {} (use fewer or smaller media files)",
                crate::protocol::content::MAX_CONTENT_BYTES
            )
        })
    });
    if let Some(e) = &client_refusal {
        diags.push(Diagnostic::error(None, None, format!("players' games would refuse this content: {e}")));
    }
    dedup(&mut diags);
    Content {
        defs: Arc::new(defs),
        emitters: Arc::new(emitters),
        mods: summaries,
        diagnostics: diags,
        client_refusal,
        broken_by_mod,
        args_at,
    }
}

fn dedup(d: &mut Vec<Diagnostic>) {
    let mut seen = Vec::new();
    d.retain(|x| {
        let k = x.to_string();
        if seen.contains(&k) {
            false
        } else {
            seen.push(k);
            true
        }
    });
}
