//! `hailfire preview`: one boss (or enemy) of a mod firing in its arena against dummy
//! players, stepped by the real simulation and the real Lua runtime. The headless
//! renderer (`app::preview`) draws it; the same model is what a windowed, reloading
//! preview would step.

use std::path::Path;

use std::path::PathBuf;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::{load_for_preview, root_for, Content};
use crate::sim::instance::{Instance, InstanceKind};
use crate::sim::player::Player;
use crate::sim::{InputFrame, Vec2};

/// What to preview.
#[derive(Clone, Debug, PartialEq)]
pub enum Target {
    Boss(String),
    Enemy(String),
}

pub struct Preview {
    pub content: Content,
    pub inst: Instance,
    pub tick: u32,
    pub target: Target,
    /// The boss phase (0-based) held, if one was asked for.
    pub phase: Option<usize>,
    /// What went wrong while it ran (script errors, a stopped fight), newest last; each
    /// is also written to the terminal once.
    pub run_errors: Vec<String>,
    /// The scripts' telegraphs still showing, with the tick each came.
    pub telegraphs: Vec<(crate::sim::script::Telegraph, u32)>,
    /// The scripts' last hint and the tick it came.
    pub hint: Option<(String, u32)>,
}

/// Run-time errors the preview keeps.
const MAX_RUN_ERRORS: usize = 8;

impl Preview {
    /// Loads the base game and the mod at `path`, and puts `target` in an arena with
    /// `players` dummy players. An error lists what to fix (file:line) when the mod does
    /// not load or has no such boss or enemy.
    pub fn load(path: &Path, target: Target, phase: Option<usize>, players: usize) -> Result<Preview, Vec<String>> {
        // Everything the game loads (a mod may depend on another), and this one.
        let mut roots = super::default_roots();
        roots.push(root_for(path));
        // The mod previewed is asked for, even one that is off by default (an example).
        let content = load_for_preview(&roots, &super::Choice::all_of(&roots[roots.len() - 1..]));
        let errors: Vec<String> = content.errors().map(|d| d.to_string()).collect();
        if !errors.is_empty() {
            return Err(errors);
        }
        let defs = content.defs.clone();
        let dungeon = match &target {
            Target::Boss(b) => {
                if !defs.bosses.contains_key(b) {
                    let have: Vec<&String> = defs.bosses.keys().collect();
                    return Err(vec![format!("no boss '{b}' (loaded: {have:?})")]);
                }
                match defs.dungeons.iter().find(|(_, d)| d.boss == *b) {
                    Some((id, _)) => id.clone(),
                    None => return Err(vec![format!("no dungeon has the boss '{b}': give one `boss = \"{b}\"`")]),
                }
            }
            Target::Enemy(e) => {
                if !defs.enemies.contains_key(e) {
                    let have: Vec<&String> = defs.enemies.keys().collect();
                    return Err(vec![format!("no enemy '{e}' (loaded: {have:?})")]);
                }
                // Any arena will do: the first dungeon of a mod that is not the base game,
                // else the first one.
                defs.dungeons.keys().next().cloned().ok_or_else(|| vec!["no dungeon to preview in".to_string()])?
            }
        };
        if let (Target::Boss(b), Some(p)) = (&target, phase) {
            let n = defs.bosses[b].phases.len();
            if p >= n {
                return Err(vec![format!("the boss '{b}' has {n} phase(s): --phase counts from 1 to {n}")]);
            }
        }
        let factory = content.script_factory();
        let mut inst = Instance::new(1, InstanceKind::Dungeon(dungeon), &defs, factory.create(7), 7);
        let arena = inst.arena;
        for k in 0..players.max(1) {
            let x = arena.x * (k as f32 + 1.0) / (players.max(1) as f32 + 1.0);
            inst.arrive(Player::new(k as u32 + 1, "dummy", Vec2::new(x, arena.y * 0.8)));
        }
        for p in inst.players.iter_mut() {
            p.grace = 0;
        }
        let mut ev = Vec::new();
        inst.skip_waves();
        match &target {
            Target::Boss(_) => inst.start_boss(&defs, 0, &mut ev),
            Target::Enemy(e) => inst.spawn_enemy(&defs, e, Vec2::new(arena.x * 0.5, arena.y * 0.3), &mut ev),
        }
        Ok(Preview {
            content,
            inst,
            tick: 0,
            target,
            phase,
            run_errors: Vec::new(),
            telegraphs: Vec::new(),
            hint: None,
        })
    }

    /// One tick: the dummies drift slowly (and never die), the phase is held if asked.
    pub fn step(&mut self) {
        self.tick += 1;
        let t = self.tick;
        let defs = self.content.defs.clone();
        let mut ev = Vec::new();
        if let (Some(p), Target::Boss(b)) = (self.phase, &self.target) {
            self.inst.force_boss_hp(&defs, super::validate::phase_hold(&defs.bosses[b].phases, p), &mut ev);
        }
        for (k, p) in self.inst.players.iter_mut().enumerate() {
            let a = t as f32 * 0.013 + k as f32 * 2.1;
            let _ = p.queue_input(
                t,
                InputFrame { tick: t, mv: Vec2::new(a.sin() * 0.4, a.cos() * 0.2), aim: -90.0, buttons: 0 },
            );
            p.hp = p.hp.max(50);
            p.dead = false;
        }
        let mut req = Vec::new();
        self.inst.step(t, &defs, &mut ev, &mut req);
        self.telegraphs.retain(|(g, at)| t < at + g.ticks as u32);
        for e in ev {
            let msg = match e {
                crate::sim::SimEvent::Hint { text, .. } => {
                    self.hint = Some((text, t));
                    continue;
                }
                crate::sim::SimEvent::Telegraph { telegraph, .. } => {
                    if self.telegraphs.len() < 256 {
                        self.telegraphs.push((telegraph, t));
                    }
                    continue;
                }
                crate::sim::SimEvent::ScriptError { message, .. } => message,
                crate::sim::SimEvent::InstanceStopped { reason, .. } => format!("the fight was stopped: {reason}"),
                _ => continue,
            };
            if !self.run_errors.contains(&msg) {
                eprintln!("preview: {msg}");
                if self.run_errors.len() == MAX_RUN_ERRORS {
                    self.run_errors.remove(0);
                }
                self.run_errors.push(msg);
            }
        }
    }
}

/// Editors save in bursts (a temporary file, a rename, a metadata touch): the preview
/// reloads once the mod's folder has been quiet this long.
pub const RELOAD_DEBOUNCE: Duration = Duration::from_millis(40);

/// Watches mod folders for saved `.lua` and `.toml` files, and says when a burst of
/// changes has settled (`RELOAD_DEBOUNCE` of quiet). The preview and `--watch-mods` use it.
pub struct ModWatcher {
    events: mpsc::Receiver<notify::Result<notify::Event>>,
    quiet_since: Option<Instant>,
    /// When the first change of the current burst was seen.
    pub changed_at: Option<Instant>,
    debounce: Duration,
    _watcher: notify::RecommendedWatcher,
}

impl ModWatcher {
    pub fn new(dirs: &[PathBuf], debounce: Duration) -> Result<ModWatcher, String> {
        use notify::Watcher;
        let (tx, events) = mpsc::channel();
        // A link inside a mod folder is not followed (a link to / would walk the disk).
        let config = notify::Config::default().with_follow_symlinks(false);
        let mut watcher =
            notify::RecommendedWatcher::new(tx, config).map_err(|e| format!("cannot watch files: {e}"))?;
        for d in dirs {
            watcher
                .watch(d, notify::RecursiveMode::Recursive)
                .map_err(|e| format!("cannot watch {}: {e}", d.display()))?;
        }
        Ok(ModWatcher { events, quiet_since: None, changed_at: None, debounce, _watcher: watcher })
    }

    /// True once after a burst of changes has settled.
    pub fn poll(&mut self) -> bool {
        let now = Instant::now();
        while let Ok(ev) = self.events.try_recv() {
            // Only events that can change what loads (not reads or editors' hidden files).
            let relevant = ev.as_ref().is_ok_and(|e| {
                !matches!(e.kind, notify::EventKind::Access(_))
                    && e.paths.iter().any(|p| {
                        p.extension().is_some_and(|x| x == "lua" || x == "toml")
                            && !p.file_name().is_some_and(|n| n.to_string_lossy().starts_with('.'))
                    })
            });
            if relevant {
                self.changed_at.get_or_insert(now);
                self.quiet_since = Some(now);
            }
        }
        match self.quiet_since {
            Some(q) if now.duration_since(q) >= self.debounce => {
                self.quiet_since = None;
                true
            }
            _ => false,
        }
    }
}

/// A preview that reloads when any file of its mod is saved. A mod that no longer loads
/// keeps the last good version running and holds the errors until a save fixes them.
pub struct PreviewHost {
    pub path: PathBuf,
    pub target: Target,
    pub phase: Option<usize>,
    pub players: usize,
    pub preview: Preview,
    /// Errors of the last reload that failed (empty when the running version is current).
    pub errors: Vec<String>,
    /// Reloads done, and when the last one finished.
    pub reloads: u32,
    pub reloaded_at: Option<Instant>,
    /// When the first change of the current burst was seen.
    pub changed_at: Option<Instant>,
    watcher: ModWatcher,
}

impl PreviewHost {
    pub fn start(
        path: &Path,
        target: Target,
        phase: Option<usize>,
        players: usize,
    ) -> Result<PreviewHost, Vec<String>> {
        let preview = Preview::load(path, target.clone(), phase, players)?;
        let watcher = ModWatcher::new(&[path.to_path_buf()], RELOAD_DEBOUNCE).map_err(|e| vec![e])?;
        Ok(PreviewHost {
            path: path.to_path_buf(),
            target,
            phase,
            players,
            preview,
            errors: Vec::new(),
            reloads: 0,
            reloaded_at: None,
            changed_at: None,
            watcher,
        })
    }

    /// Takes file events; once the folder is quiet, reloads. Returns true when it reloaded
    /// (successfully or not).
    pub fn poll(&mut self) -> bool {
        if !self.watcher.poll() {
            return false;
        }
        self.changed_at = self.watcher.changed_at.take();
        self.reload();
        true
    }

    /// Loads the mod again: the new version restarts the fight; a broken one leaves the
    /// running version and records why.
    pub fn reload(&mut self) {
        match Preview::load(&self.path, self.target.clone(), self.phase, self.players) {
            Ok(p) => {
                if !self.errors.is_empty() {
                    eprintln!("preview: reloaded: the mod loads again");
                    tracing::info!("preview reloaded: the mod loads again");
                }
                self.preview = p;
                self.errors.clear();
            }
            Err(e) => {
                // Said where the modder is looking (the terminal) and kept in the log, as
                // well as drawn over the window: a reload that failed must not go unseen.
                eprintln!(
                    "preview: the save did not load ({} error(s)); the last good version keeps running:",
                    e.len()
                );
                for line in &e {
                    eprintln!("  {line}");
                    tracing::warn!("preview reload failed: {line}");
                }
                self.errors = e
            }
        }
        self.reloads += 1;
        self.reloaded_at = Some(Instant::now());
    }

    /// Restarts the running version from its first tick (the same as a reload without a
    /// change; a broken mod keeps running).
    pub fn restart(&mut self) {
        if let Ok(p) = Preview::load(&self.path, self.target.clone(), self.phase, self.players) {
            self.preview = p;
        }
    }
}
