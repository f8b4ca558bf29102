//! The world: the hub plus any number of concurrent dungeon instances, one tick counter,
//! and the transfers between them. The server owns exactly one.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::defs::Defs;
use super::events::{SimEvent, TransferReason};
use super::instance::{Instance, InstanceId, InstanceKind, Request};
use super::player::{InputDrop, InputFrame, Player, PlayerId};
use super::script::ScriptFactory;
use super::Tick;

/// See [`World::set_parallel_from_us`]: half a millisecond of simulation a tick.
pub const PARALLEL_FROM_US: u64 = 500;

pub struct World {
    pub tick: Tick,
    pub defs: Arc<Defs>,
    pub instances: BTreeMap<InstanceId, Instance>,
    pub hub: InstanceId,
    factory: Arc<dyn ScriptFactory>,
    /// The definitions each instance was opened with: after a reload, running instances
    /// finish on theirs while new ones use the new (`reload`).
    inst_defs: BTreeMap<InstanceId, Arc<Defs>>,
    seed: u64,
    next_instance: InstanceId,
    location: BTreeMap<PlayerId, InstanceId>,
    /// Events of the last step.
    events: Vec<SimEvent>,
    /// Events raised outside the instances' own steps (joins, transfers, open/close).
    pending: Vec<SimEvent>,
    requests: Vec<Request>,
    /// Threads that step instances side by side (None: all on the caller's thread).
    threads: Option<Arc<rayon::ThreadPool>>,
    /// Instances are spread over the threads only when the last tick's instances took at
    /// least this long together (µs): waking a pool for a few light fights costs more
    /// than it saves.
    parallel_from_us: u64,
}

impl World {
    pub fn new(defs: Arc<Defs>, factory: Arc<dyn ScriptFactory>, seed: u64) -> Self {
        let mut w = World {
            tick: 0,
            defs,
            instances: BTreeMap::new(),
            hub: 0,
            factory,
            inst_defs: BTreeMap::new(),
            seed,
            next_instance: 0,
            location: BTreeMap::new(),
            events: Vec::new(),
            pending: Vec::new(),
            requests: Vec::new(),
            threads: None,
            parallel_from_us: PARALLEL_FROM_US,
        };
        w.hub = w.open_instance(InstanceKind::Hub);
        w
    }

    fn open_instance(&mut self, kind: InstanceKind) -> InstanceId {
        let id = self.next_instance;
        self.next_instance += 1;
        let seed = self.seed ^ (id as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let inst = Instance::new(id, kind.clone(), &self.defs, self.factory.create(seed), seed);
        self.instances.insert(id, inst);
        self.inst_defs.insert(id, self.defs.clone());
        if let InstanceKind::Dungeon(d) = kind {
            self.pending.push(SimEvent::InstanceOpened { instance: id, dungeon: d });
        }
        id
    }

    /// A player joins the world: they arrive in the hub with spawn grace.
    pub fn add_player(&mut self, id: PlayerId, name: &str) -> bool {
        if self.location.contains_key(&id) {
            return false;
        }
        let hub = self.hub;
        let mut p = Player::new(id, name, Default::default());
        // Everyone starts in the first ship that needs no stars.
        p.ship = self.defs.ships.values().position(|s| s.stars == 0).unwrap_or(0) as u16;
        self.instances.get_mut(&hub).expect("hub exists").arrive(p);
        self.location.insert(id, hub);
        self.pending.push(SimEvent::Transfer { player: id, from: None, to: hub, reason: TransferReason::Joined });
        true
    }

    /// The connection is gone. The body stays, killable, channelling escape.
    pub fn mark_linkdead(&mut self, id: PlayerId) {
        if let Some(p) = self.player_mut(id) {
            p.linkdead = true;
        }
    }

    pub fn queue_input(&mut self, id: PlayerId, f: InputFrame) -> Result<(), InputDrop> {
        let now = self.tick;
        match self.player_mut(id) {
            Some(p) if !p.linkdead => p.queue_input(now, f),
            _ => Err(InputDrop::UnknownPlayer),
        }
    }

    pub fn instance_of(&self, id: PlayerId) -> Option<InstanceId> {
        self.location.get(&id).copied()
    }

    pub fn player(&self, id: PlayerId) -> Option<&Player> {
        let inst = self.instances.get(self.location.get(&id)?)?;
        inst.players.iter().find(|p| p.id == id)
    }

    pub fn player_mut(&mut self, id: PlayerId) -> Option<&mut Player> {
        let inst = self.instances.get_mut(self.location.get(&id)?)?;
        inst.players.iter_mut().find(|p| p.id == id)
    }

    pub fn player_count(&self) -> usize {
        self.location.len()
    }

    /// Sends a player into a dungeon, joining an open run of it or opening a new one.
    pub fn enter_dungeon(&mut self, id: PlayerId, dungeon: &str) -> Option<InstanceId> {
        let max = self.defs.dungeons.get(dungeon)?.max_players as usize;
        // Only runs on the current content take newcomers (after a reload, older ones
        // finish with the players they have).
        let current = |id: &InstanceId| self.inst_defs.get(id).is_none_or(|d| Arc::ptr_eq(d, &self.defs));
        let existing = self.instances.values().find(|i| {
            i.dungeon() == Some(dungeon)
                && !i.cleared
                && i.run().ended.is_none()
                && i.players.len() < max
                && current(&i.id)
        });
        let to = match existing {
            Some(i) => i.id,
            None => self.open_instance(InstanceKind::Dungeon(dungeon.to_string())),
        };
        self.move_player(id, to, TransferReason::Portal);
        Some(to)
    }

    fn move_player(&mut self, id: PlayerId, to: InstanceId, reason: TransferReason) {
        let Some(from) = self.location.get(&id).copied() else { return };
        let Some(p) = self.instances.get_mut(&from).and_then(|i| i.take_player(id)) else { return };
        // What leaving raised (an abandoned run's summary) goes out with this step's
        // events: the instance may close before it steps again.
        if let Some(i) = self.instances.get_mut(&from) {
            self.pending.append(i.step_events_mut());
        }
        if p.linkdead {
            // A dropped player's body has resolved: it is forgotten, not moved.
            self.location.remove(&id);
            self.pending.push(SimEvent::PlayerRemoved { player: id, instance: from });
            return;
        }
        self.instances.get_mut(&to).expect("target instance exists").arrive(p);
        self.location.insert(id, to);
        self.pending.push(SimEvent::Transfer { player: id, from: Some(from), to, reason });
    }

    /// One 60 Hz tick of every instance. Returns what happened, in order.
    pub fn step(&mut self) -> &[SimEvent] {
        self.tick += 1;
        let tick = self.tick;
        // Events raised between steps (joins) are reported with this step.
        let mut events = std::mem::take(&mut self.events);
        events.clear();
        events.append(&mut self.pending);
        let mut requests = std::mem::take(&mut self.requests);
        let (inst_defs, defs) = (&self.inst_defs, &self.defs);
        // Two passes: every instance's first half (its scripts handed the tick: a worker
        // process computes while the world goes on), then every second half (the
        // scripts' answers collected). Workers thus compute side by side, and a slow one
        // costs the others nothing until its own second half.
        let half = |second: bool| {
            move |(id, inst): (&InstanceId, &mut Instance)| {
                let d = inst_defs.get(id).unwrap_or(defs);
                let t0 = std::time::Instant::now();
                let (mut ev, mut rq) = (std::mem::take(&mut inst.step_events), std::mem::take(&mut inst.step_requests));
                if second {
                    inst.step_end(tick, d, &mut ev, &mut rq);
                } else {
                    inst.step_begin(tick, d, &mut ev, &mut rq);
                }
                (inst.step_events, inst.step_requests) = (ev, rq);
                let us = t0.elapsed().as_micros().min(u32::MAX as u128) as u32;
                inst.step_us = if second { inst.step_us.saturating_add(us) } else { us };
            }
        };
        let last_us: u64 = self.instances.values().map(|i| i.step_us as u64).sum();
        for second in [false, true] {
            match &self.threads {
                Some(pool) if self.instances.len() > 1 && last_us >= self.parallel_from_us => {
                    use rayon::prelude::*;
                    // Instances share nothing while they step. Each is one task, the slowest
                    // of the last tick first, so a long one starts at once and the others
                    // spread over the remaining threads meanwhile.
                    let mut work: Vec<(&InstanceId, &mut Instance)> = self.instances.iter_mut().collect();
                    work.sort_by_key(|(_, i)| std::cmp::Reverse(i.step_us));
                    pool.install(|| work.into_par_iter().with_max_len(1).for_each(half(second)));
                }
                _ => self.instances.iter_mut().for_each(half(second)),
            }
        }
        // Merged in instance order: the same events in the same order, whatever the
        // number of threads.
        for inst in self.instances.values_mut() {
            events.append(&mut inst.step_events);
            requests.append(&mut inst.step_requests);
        }
        self.events = events;
        for r in requests.drain(..) {
            match r {
                Request::ToHub(id, reason) => self.move_player(id, self.hub, reason),
                Request::Enter(id, d) => {
                    self.enter_dungeon(id, &d);
                }
            }
        }
        self.requests = requests;
        // A run with nobody left closes; a linkdead body counts as somebody, so an
        // instance never closes under a body that is still resolving.
        let empty: Vec<InstanceId> =
            self.instances.values().filter(|i| !i.is_hub() && i.players.is_empty()).map(|i| i.id).collect();
        for id in empty {
            self.instances.remove(&id);
            self.inst_defs.remove(&id);
            self.pending.push(SimEvent::InstanceClosed { instance: id });
        }
        self.events.append(&mut self.pending);
        &self.events
    }

    /// Steps instances on `n` threads (1: on the caller's thread, as before). The world's
    /// state and events after each step are the same whatever `n`.
    pub fn set_threads(&mut self, n: usize) -> Result<(), String> {
        self.threads = if n <= 1 {
            None
        } else {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(n)
                .thread_name(|i| format!("hailfire-sim-{i}"))
                // Lua runs on these threads: the main thread's stack size, not rayon's 2 MiB.
                .stack_size(8 << 20)
                .build()
                .map_err(|e| format!("cannot start {n} simulation threads: {e}"))?;
            Some(Arc::new(pool))
        };
        Ok(())
    }

    /// Spread instances over the threads only when they took at least `us` µs together
    /// in the previous tick (default [`PARALLEL_FROM_US`]; 0: always, for tests and
    /// benchmarks). The results are the same either way.
    pub fn set_parallel_from_us(&mut self, us: u64) {
        self.parallel_from_us = us;
    }

    /// How many threads step instances.
    pub fn threads(&self) -> usize {
        self.threads.as_ref().map_or(1, |p| p.current_num_threads())
    }

    /// New definitions and scripts (a mod was saved): instances opened from now on use
    /// them; running fights finish on the ones they started with. The hub keeps the
    /// definitions it was built with (its arena and spawn are cached in it); a change to
    /// the hub or the dungeon list is one players' games hold, which makes them rejoin.
    pub fn reload(&mut self, defs: Arc<Defs>, factory: Arc<dyn ScriptFactory>) {
        self.defs = defs;
        self.factory = factory;
    }

    /// How many dungeon instances still run on definitions other than the current ones.
    pub fn instances_on_old_content(&self) -> usize {
        self.inst_defs.iter().filter(|(id, d)| **id != self.hub && !Arc::ptr_eq(d, &self.defs)).count()
    }

    /// Events of the last step (also returned by [`step`](Self::step)).
    pub fn events(&self) -> &[SimEvent] {
        &self.events
    }

    /// A hash of the whole world state (determinism tests).
    pub fn hash(&self) -> u64 {
        let mut h = 0xcbf2_9ce4_8422_2325u64 ^ self.tick as u64;
        for inst in self.instances.values() {
            inst.hash_into(&mut h);
        }
        h
    }
}
