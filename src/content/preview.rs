//! `hailfire preview`: one boss (or enemy) of a mod firing in its arena against dummy
//! players, stepped by the real simulation and the real Lua runtime. The headless
//! renderer (`app::preview`) draws it; the same model is what a windowed, reloading
//! preview would step.

use std::path::Path;

use super::{content_dir, load, root_for, Content, ModRoot};
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
}

impl Preview {
    /// Loads the base game and the mod at `path`, and puts `target` in an arena with
    /// `players` dummy players. An error lists what to fix (file:line) when the mod does
    /// not load or has no such boss or enemy.
    pub fn load(path: &Path, target: Target, phase: Option<usize>, players: usize) -> Result<Preview, Vec<String>> {
        let content = load(&[ModRoot::Mod(content_dir()), root_for(path)]);
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
        Ok(Preview { content, inst, tick: 0, target, phase })
    }

    /// One tick: the dummies drift slowly (and never die), the phase is held if asked.
    pub fn step(&mut self) {
        self.tick += 1;
        let t = self.tick;
        let defs = self.content.defs.clone();
        let mut ev = Vec::new();
        if let (Some(p), Target::Boss(b)) = (self.phase, &self.target) {
            let threshold = defs.bosses[b].phases[p].hp_threshold;
            self.inst.force_boss_hp(&defs, threshold - 0.01, &mut ev);
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
    }
}
