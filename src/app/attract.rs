//! The title screen's attract mode: a real boss fight from the installed content, run by the
//! same simulation as the game (four unseen players circling, never firing, never dying),
//! drawn dimmed behind the menus. The boss moves to its next phase every
//! [`PHASE_SECONDS`]; after the last one the fight starts again, so the pattern evolves
//! slowly and never ends.

use crate::content::Content;
use crate::protocol::messages::{SnapBoss, SnapEnemy};
use crate::sim::instance::Instance;
use crate::sim::{Defs, InputFrame, InstanceId, Vec2, World, TICK_RATE};

use super::render::scene::{self, Camera, Palette, Sprite, WorldView};

/// How long each phase plays before the next.
pub const PHASE_SECONDS: u32 = 14;

/// Enemies and the boss of an instance as a snapshot shows them (definition indices in the
/// sorted order both sides use).
pub fn snap_of(inst: &Instance, defs: &Defs) -> (Vec<SnapEnemy>, Option<SnapBoss>) {
    let enemies = inst
        .enemies
        .iter()
        .map(|e| SnapEnemy {
            id: e.id,
            def: defs.enemies.keys().position(|k| *k == e.def).unwrap_or(0) as u16,
            pos: e.pos,
            hp: e.hp.max(0) as u32,
        })
        .collect();
    let boss = inst.boss.as_ref().map(|b| SnapBoss {
        def: defs.bosses.keys().position(|k| *k == b.def).unwrap_or(0) as u16,
        pos: b.pos,
        hp: b.hp.max(0) as u32,
        max_hp: b.max_hp.max(0) as u32,
        phase: b.phase as u8,
    });
    (enemies, boss)
}

pub struct Attract {
    content: Content,
    dungeon: String,
    world: World,
    inst: InstanceId,
    ticks: u32,
    palette: Palette,
    /// The content's sprites (the renderer's atlas holds them while this draws).
    pub sprites: Vec<crate::sim::client_defs::MediaAsset>,
    enemy_r: Vec<f32>,
    boss_r: Vec<f32>,
}

impl Attract {
    /// None when the content has no dungeon with a boss (a broken install: the menu shows
    /// its plain background).
    pub fn new(content: &Content) -> Option<Attract> {
        let with_boss =
            |id: &str| content.defs.dungeons.get(id).is_some_and(|d| content.defs.bosses.contains_key(&d.boss));
        let dungeon = if with_boss("warden_keep") {
            "warden_keep".to_string()
        } else {
            content.defs.dungeons.keys().find(|d| with_boss(d))?.clone()
        };
        let looks = crate::sim::ClientDefs::from_defs(&content.defs);
        let (world, inst) = Self::fight(content, &dungeon)?;
        Some(Attract {
            content: content.clone(),
            dungeon,
            world,
            inst,
            ticks: 0,
            palette: Palette::new(&looks),
            sprites: looks.sprites.clone(),
            enemy_r: looks.enemies.iter().map(|e| e.radius).collect(),
            boss_r: looks.bosses.iter().map(|b| b.radius).collect(),
        })
    }

    fn fight(content: &Content, dungeon: &str) -> Option<(World, InstanceId)> {
        let mut w = World::new(content.defs.clone(), content.script_factory(), 7);
        for id in 1..=4 {
            w.add_player(id, "");
            w.enter_dungeon(id, dungeon);
        }
        let inst = w.instance_of(1)?;
        let defs = w.defs.clone();
        let t = w.tick;
        let mut ev = Vec::new();
        w.instances.get_mut(&inst)?.start_boss(&defs, t, &mut ev);
        Some((w, inst))
    }

    /// One simulation tick.
    pub fn step(&mut self) {
        self.ticks += 1;
        let k = self.ticks as f32 / TICK_RATE as f32;
        for id in 1..=4u32 {
            let a = k * 0.5 + id as f32 * 1.57;
            let frame =
                InputFrame { tick: self.world.tick + 1, mv: Vec2::new(a.cos(), a.sin() * 0.5), aim: -90.0, buttons: 0 };
            let _ = self.world.queue_input(id, frame);
        }
        let defs = self.world.defs.clone();
        let phase_ticks = PHASE_SECONDS * TICK_RATE;
        let mut restart = false;
        if let Some(i) = self.world.instances.get_mut(&self.inst) {
            for p in i.players.iter_mut() {
                p.hp = crate::sim::PLAYER_MAX_HP;
            }
            if self.ticks.is_multiple_of(phase_ticks) {
                match i.boss.as_ref().map(|b| (b.def.clone(), b.phase)) {
                    Some((def, phase)) if phase + 1 < defs.bosses[&def].phases.len() => {
                        let to = defs.bosses[&def].phases[phase + 1].hp_threshold - 0.01;
                        i.force_boss_hp(&defs, to.max(0.01), &mut Vec::new());
                    }
                    _ => restart = true,
                }
            }
        } else {
            restart = true;
        }
        if restart {
            if let Some((w, i)) = Self::fight(&self.content, &self.dungeon) {
                (self.world, self.inst) = (w, i);
            }
        }
        self.world.step();
    }

    /// The fight's bullets, enemies and boss, dimmed, fitted to `screen`.
    pub fn sprites(&self, screen: (u32, u32), time: f32, out: &mut Vec<Sprite>) -> Option<Camera> {
        let i = self.world.instances.get(&self.inst)?;
        let (enemies, boss) = snap_of(i, &self.world.defs);
        let theme = self.world.defs.dungeons.get(&self.dungeon).map(|d| d.theme.clone()).unwrap_or_default();
        let view = WorldView {
            theme: &theme,
            arena: i.arena,
            bullets: &i.bullets,
            alpha: 0.0,
            players: &[],
            own_id: None,
            own_pos: None,
            own_aim: None,
            enemies: &enemies,
            enemy_radius: &self.enemy_r,
            boss,
            boss_radius: &self.boss_r,
            portals: &[],
            portal_radius: 0.0,
            flashes: &[],
            bursts: &[],
            flares: &[],
            telegraphs: &[],
            time,
            sparks: &[],
            ships: &[],
        };
        scene::build(&view, &self.palette, out);
        // Behind the menus: darker, without the white-hot cores.
        for s in out.iter_mut() {
            for c in s.color.iter_mut().take(3) {
                *c *= 0.4;
            }
            if s.params[0] <= scene::SH_RING {
                s.params[2] *= 0.25;
            }
        }
        Some(Camera::fit(i.arena, screen, time))
    }
}
