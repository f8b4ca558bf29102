//! Where each mod's emitters run. Every mod gets its own Lua state in each instance, so
//! no mod can reach another's tables, libraries or coroutines. Trusted mods (the base
//! game, and those an operator lists in `trusted_mods`) run in the server's process;
//! every other mod runs in a worker process ([`super::worker`]), started for the instance
//! when its fight first needs one of their emitters. Per tick, the worker's request goes
//! out first, the trusted states run while it works, then its answer is read: commands in
//! a fixed order (trusted mods by id, then the worker's mods by id), so a run is as
//! reproducible as before.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use super::lua::{EmitterSource, LuaRuntime, Names};
use crate::sim::defs::ArgValue;
use crate::sim::script::{Lost, Owner, ScriptCmd, ScriptFactory, ScriptMessage, ScriptView, Scripting};
use crate::sim::Defs;

/// The mod every game has; always trusted.
pub const BASE_MOD: &str = "base";

/// How untrusted mods run.
#[derive(Clone, Debug)]
pub enum Isolation {
    /// Every mod in the process (a worker's inside; benchmarks' comparison line).
    InProcess,
    /// Mods not in `trusted` in worker processes running this executable.
    Workers { exe: Result<std::path::PathBuf, String>, trusted: BTreeSet<String> },
}

impl Isolation {
    /// Workers for every mod but the base game and `trusted`, run from [`super::worker::worker_exe`].
    pub fn workers(trusted: &[String]) -> Isolation {
        let mut t: BTreeSet<String> = trusted.iter().cloned().collect();
        t.insert(BASE_MOD.to_string());
        Isolation::Workers { exe: super::worker::worker_exe(), trusted: t }
    }
}

/// What a host's instances share: the content and the count of each mod's lost workers.
struct Shared {
    emitters: Arc<BTreeMap<String, EmitterSource>>,
    names: Arc<Names>,
    isolation: Isolation,
    /// Per mod: workers lost, and the last reason.
    losses: Mutex<BTreeMap<String, (u32, String)>>,
}

/// Makes each instance's [`ModRouter`].
#[derive(Clone)]
pub struct ScriptHost {
    shared: Arc<Shared>,
}

impl ScriptHost {
    pub fn new(defs: &Defs, emitters: Arc<BTreeMap<String, EmitterSource>>, isolation: Isolation) -> ScriptHost {
        ScriptHost {
            shared: Arc::new(Shared {
                emitters,
                names: Arc::new(Names::of(defs)),
                isolation,
                losses: Mutex::new(BTreeMap::new()),
            }),
        }
    }

    /// Mods disabled for losing too many workers: (mod, last reason).
    pub fn disabled_mods(&self) -> Vec<(String, String)> {
        let l = self.shared.losses.lock().unwrap_or_else(|e| e.into_inner());
        l.iter()
            .filter(|(_, (n, _))| *n >= super::worker::KILLS_TO_DISABLE)
            .map(|(m, (_, why))| (m.clone(), why.clone()))
            .collect()
    }
}

impl ScriptFactory for ScriptHost {
    fn create(&self, seed: u64) -> Box<dyn Scripting> {
        Box::new(ModRouter::new(self.shared.clone(), seed))
    }
}

/// The seed of one mod's Lua state in an instance: the instance's for the base game (its
/// runs are what the golden tests pin), mixed with the mod's id for any other.
pub fn mod_seed(seed: u64, mod_id: &str) -> u64 {
    if mod_id == BASE_MOD {
        return seed;
    }
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in mod_id.bytes() {
        h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
    }
    seed ^ h
}

#[cfg(unix)]
type WorkerHandle = super::worker::Worker;

/// One instance's scripts: a Lua state per trusted mod here, a worker for the rest.
pub struct ModRouter {
    shared: Arc<Shared>,
    seed: u64,
    local: BTreeMap<String, LuaRuntime>,
    #[cfg(unix)]
    worker: Option<WorkerHandle>,
    /// The worker was lost: why (taken once by the instance), and that it was.
    lost: Option<Lost>,
    worker_gone: bool,
    pending: Vec<ScriptMessage>,
}

impl ModRouter {
    fn new(shared: Arc<Shared>, seed: u64) -> ModRouter {
        ModRouter {
            shared,
            seed,
            local: BTreeMap::new(),
            #[cfg(unix)]
            worker: None,
            lost: None,
            worker_gone: false,
            pending: Vec::new(),
        }
    }

    /// Every mod in this process (what a worker runs inside).
    pub fn in_process(emitters: Arc<BTreeMap<String, EmitterSource>>, names: Arc<Names>, seed: u64) -> ModRouter {
        let shared = Shared { emitters, names, isolation: Isolation::InProcess, losses: Mutex::new(BTreeMap::new()) };
        ModRouter::new(Arc::new(shared), seed)
    }

    fn trusted(&self, mod_id: &str) -> bool {
        match &self.shared.isolation {
            Isolation::InProcess => true,
            Isolation::Workers { trusted, .. } => !cfg!(unix) || trusted.contains(mod_id),
        }
    }

    /// The worker for this instance, started now if need be.
    #[cfg(unix)]
    fn worker(&mut self, mod_id: &str) -> Result<&mut WorkerHandle, String> {
        if self.worker.is_none() {
            if self.worker_gone {
                return Err("its script worker was lost earlier in this fight".into());
            }
            let Isolation::Workers { exe, trusted } = &self.shared.isolation else {
                return Err("no workers here".into());
            };
            let exe = exe.clone()?;
            let emitters = self.shared.emitters.iter().filter(|(_, e)| !trusted.contains(&e.mod_id));
            let names = &self.shared.names;
            let mut kinds: Vec<(String, f32, i32)> = vec![(String::new(), 0.0, 0); names.kinds.len()];
            for (k, &(i, r, d)) in &names.kinds {
                if let Some(slot) = kinds.get_mut(i as usize) {
                    *slot = (k.clone(), r, d);
                }
            }
            let init = super::worker::wire::Init {
                seed: self.seed,
                kinds,
                enemies: names.enemies.iter().cloned().collect(),
                sounds: names.sounds.iter().cloned().collect(),
                emitters: emitters.map(|(k, v)| (k.clone(), v.clone())).collect(),
            };
            match WorkerHandle::spawn(&exe, &init) {
                Ok(w) => {
                    if !w.held.seccomp || !w.held.rlimits {
                        tracing::warn!(
                            "script worker runs without {} (see docs/SECURITY.md)",
                            if !w.held.seccomp { "its system call filter" } else { "its resource limits" }
                        );
                    }
                    self.worker = Some(w);
                }
                Err(lost) => {
                    self.worker_gone = true;
                    let why = format!("its script worker {}", lost.why);
                    self.lost = Some(Lost {
                        detail: crate::content::diag::escape_text(&format!("mod '{mod_id}': {why}")),
                        summary: format!("the scripts of mod '{mod_id}' could not start"),
                    });
                    return Err(why);
                }
            }
        }
        self.worker.as_mut().ok_or_else(|| "no worker".to_string())
    }

    /// Books a lost worker against the mod it was running; returns the reason to show.
    #[cfg(unix)]
    fn lose_worker(&mut self, why: String) {
        let Some(mut w) = self.worker.take() else { return };
        let lost = w.kill(why);
        self.worker_gone = true;
        // The page is the worker's to write: blame only a mod this worker was running (a
        // compromised worker could name the base game's emitter), else the only one.
        let src = self.shared.emitters.get(&lost.emitter).filter(|e| w.mods().contains(&e.mod_id));
        let mod_id = match src {
            Some(e) => Some(e.mod_id.clone()),
            None if w.mods().len() == 1 => w.mods().iter().next().cloned(),
            None => None,
        };
        // "mod 'm' emitter 'e' (path)" as the runtime's own errors begin, so tools that
        // place errors at their file and line (`mods check`) read this one too.
        let who = match (src, &mod_id) {
            (Some(e), _) => format!("mod '{}' emitter '{}' ({})", e.mod_id, e.id, e.path),
            (None, Some(m)) => format!("mod '{m}'"),
            (None, None) => format!("one of the mods {:?}", w.mods()),
        };
        let at = if lost.pos.is_empty() { String::new() } else { format!(" (last at {})", lost.pos) };
        let reason = crate::content::diag::escape_text(&format!("{who}: its script worker {}{at}", lost.why));
        let what = if lost.why.starts_with("used more") || lost.why.starts_with("did not") {
            "took too long"
        } else if lost.why.starts_with("crashed") || lost.why.starts_with("died") {
            "crashed"
        } else {
            "misbehaved"
        };
        let summary = match &mod_id {
            Some(m) => format!("the scripts of mod '{m}' {what}"),
            None => format!("a mod's scripts {what}"),
        };
        if let Some(m) = mod_id {
            let mut l = self.shared.losses.lock().unwrap_or_else(|e| e.into_inner());
            let e = l.entry(m).or_default();
            e.0 += 1;
            e.1 = reason.clone();
        }
        self.lost = Some(Lost { detail: reason, summary });
    }

    fn disabled(&self, mod_id: &str) -> Option<String> {
        let l = self.shared.losses.lock().unwrap_or_else(|e| e.into_inner());
        l.get(mod_id).filter(|(n, _)| *n >= super::worker::KILLS_TO_DISABLE).map(|(n, why)| {
            format!("mod '{mod_id}' is disabled until its mods are reloaded: it lost {n} script workers (last: {why})")
        })
    }
}

impl Scripting for ModRouter {
    fn start(&mut self, owner: Owner, group: u32, name: &str, args: Option<&ArgValue>) {
        let Some(mod_id) = self.shared.emitters.get(name).map(|e| e.mod_id.clone()) else {
            self.pending.push(ScriptMessage::Error(format!("emitter '{name}': no emitter by that name")));
            return;
        };
        if let Some(why) = self.disabled(&mod_id) {
            self.pending.push(ScriptMessage::Error(why));
            return;
        }
        if self.trusted(&mod_id) {
            let (emitters, names, seed) = (self.shared.emitters.clone(), self.shared.names.clone(), self.seed);
            self.local
                .entry(mod_id.clone())
                .or_insert_with(|| LuaRuntime::new(emitters, names, mod_seed(seed, &mod_id)))
                .start(owner, group, name, args);
            return;
        }
        #[cfg(unix)]
        match self.worker(&mod_id) {
            Ok(w) => w.start(&mod_id, owner, group, name, args),
            Err(why) => {
                if !self.worker_gone {
                    self.pending.push(ScriptMessage::Error(format!("mod '{mod_id}': {why}")));
                }
            }
        }
    }

    fn stop(&mut self, owner: Owner, group: Option<u32>) {
        for rt in self.local.values_mut() {
            rt.stop(owner, group);
        }
        #[cfg(unix)]
        if let Some(w) = &mut self.worker {
            w.stop(owner, group);
        }
    }

    fn run(&mut self, view: &ScriptView, out: &mut Vec<ScriptCmd>, msgs: &mut Vec<ScriptMessage>) {
        self.run_begin(view, out, msgs);
        self.run_end(out, msgs);
    }

    fn run_begin(&mut self, view: &ScriptView, out: &mut Vec<ScriptCmd>, msgs: &mut Vec<ScriptMessage>) {
        msgs.append(&mut self.pending);
        // The worker's request goes first, so it works while the trusted states run (and
        // while the world steps other instances, until `run_end`).
        #[cfg(unix)]
        if let Some(w) = &mut self.worker {
            if let Err(why) = w.send(view) {
                self.lose_worker(why);
            }
        }
        for rt in self.local.values_mut() {
            rt.run(view, out, msgs);
        }
    }

    fn run_end(&mut self, out: &mut Vec<ScriptCmd>, msgs: &mut Vec<ScriptMessage>) {
        #[cfg(unix)]
        if let Some(w) = &mut self.worker {
            if let Err(why) = w.finish(out, msgs) {
                self.lose_worker(why);
            }
        }
        #[cfg(not(unix))]
        let _ = (out, msgs);
    }

    fn task_count(&self) -> usize {
        let here: usize = self.local.values().map(|r| r.task_count()).sum();
        #[cfg(unix)]
        let there = self.worker.as_ref().map_or(0, |w| w.task_count());
        #[cfg(not(unix))]
        let there = 0;
        here + there
    }

    fn take_lost(&mut self) -> Option<Lost> {
        self.lost.take()
    }
}
