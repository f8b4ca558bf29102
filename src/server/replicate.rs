//! Turns simulation events and state into wire messages. The only place that decides what
//! a client may learn: server-only events (transfers, instance open/close, removals) have
//! no `WireEvent` and fall through here untranslated.

use std::collections::BTreeMap;

use crate::protocol::messages::*;
use crate::sim::events::Target;
use crate::sim::{InstanceId, SimEvent, World, SPAWN_GRACE_TICKS};

fn target(t: Target) -> WireTarget {
    match t {
        Target::Player(id) => WireTarget::Player(id),
        Target::Enemy(id) => WireTarget::Enemy(id),
        Target::Boss => WireTarget::Boss,
    }
}

/// The wire events of one step, per instance, in the order they happened.
pub fn batches(events: &[SimEvent]) -> BTreeMap<InstanceId, Vec<WireEvent>> {
    let mut out: BTreeMap<InstanceId, Vec<WireEvent>> = BTreeMap::new();
    for e in events {
        let (inst, ev) = match e {
            SimEvent::BulletSpawned { instance, spawn } => (*instance, WireEvent::Spawn(*spawn)),
            SimEvent::BurstSpawned { instance, burst } => (*instance, WireEvent::Burst(*burst)),
            SimEvent::BulletHit { instance, uid, target: t, .. } => {
                (*instance, WireEvent::Hit { uid: *uid, target: target(*t) })
            }
            SimEvent::BulletDespawned { instance, uid } => (*instance, WireEvent::Despawn { uid: *uid }),
            SimEvent::Death { instance, target: t } => (*instance, WireEvent::Death { target: target(*t) }),
            SimEvent::PhaseChanged { instance, phase, .. } => (*instance, WireEvent::Phase { phase: *phase }),
            SimEvent::InstanceCleared { instance } => (*instance, WireEvent::Cleared),
            SimEvent::Sfx { instance, name, pos } => (*instance, WireEvent::Sfx { name: name.clone(), pos: *pos }),
            SimEvent::Telegraph { instance, telegraph } => (*instance, WireEvent::Telegraph(*telegraph)),
            SimEvent::Hint { instance, text } => (*instance, WireEvent::Hint { text: text.clone() }),
            SimEvent::Flare { instance, player, pos, tick } => {
                (*instance, WireEvent::Flare { player: *player, tick: *tick, pos: *pos })
            }
            SimEvent::PlayerOut { instance, player } => (*instance, WireEvent::Out { player: *player }),
            SimEvent::Revived { instance, player, by } => (*instance, WireEvent::Revived { player: *player, by: *by }),
            SimEvent::WaveCleared { instance, wave } => (*instance, WireEvent::Wave { wave: *wave }),
            _ => continue,
        };
        out.entry(inst).or_default().push(ev);
    }
    out
}

/// A flush's events with every spawn and burst first, grouped by shape (stable), then the
/// rest in the order they happened. Bullets of one shape become one full spawn and
/// 8-byte repeats however the ticks interleaved them; moving hits and despawns after
/// the spawns keeps every bullet's spawn ahead of its removal, and the client handles a
/// flush's sounds and deaths together anyway.
pub fn grouped(events: Vec<WireEvent>) -> Vec<WireEvent> {
    use crate::sim::bullets::grid;
    let key = |s: &crate::sim::BulletSpawn| {
        (
            s.team as u8,
            s.kind,
            s.lifetime,
            grid::speed_q(s.speed),
            grid::radius_q(s.radius),
            grid::accel_q(s.accel),
            grid::turn_q(s.turn),
            grid::max_speed_q(s.max_speed),
        )
    };
    let (mut spawns, rest): (Vec<WireEvent>, Vec<WireEvent>) =
        events.into_iter().partition(|e| matches!(e, WireEvent::Spawn(_) | WireEvent::Burst(_)));
    spawns.sort_by_key(|e| match e {
        WireEvent::Spawn(s) => key(s),
        WireEvent::Burst(b) => key(&b.shape),
        _ => unreachable!("only spawns were partitioned here"),
    });
    spawns.extend(rest);
    spawns
}

/// The shared part of an instance's snapshot (the per-peer ack is filled in by the caller).
pub fn snapshot(
    world: &World,
    inst: InstanceId,
    enemy_index: &BTreeMap<String, u16>,
    boss_index: &BTreeMap<String, u16>,
) -> Option<Snapshot> {
    let i = world.instances.get(&inst)?;
    Some(instance_snapshot(i, world.tick, enemy_index, boss_index))
}

/// An instance as a snapshot at `tick` (`def` fields index the sorted enemy and boss ids).
pub fn instance_snapshot(
    i: &crate::sim::instance::Instance,
    tick: u32,
    enemy_index: &BTreeMap<String, u16>,
    boss_index: &BTreeMap<String, u16>,
) -> Snapshot {
    let players = i
        .players
        .iter()
        .map(|p| {
            let mut flags = 0;
            if p.grace > 0 {
                flags |= F_SPAWN_GRACE;
            }
            if p.dead {
                flags |= F_DEAD;
            }
            if p.escape > 0 {
                flags |= F_CHANNELLING;
            }
            if p.linkdead {
                flags |= F_LINKDEAD;
            }
            if p.focus && !p.dead {
                flags |= F_FOCUS;
            }
            if p.downed > 0 {
                flags |= F_DOWNED;
            }
            if p.out {
                flags |= F_OUT;
            }
            debug_assert!(p.grace <= SPAWN_GRACE_TICKS);
            // A downed player's hp byte is the seconds left, and escape the revive progress.
            let (hp, escape) = if p.downed > 0 {
                (p.downed.div_ceil(crate::sim::TICK_RATE), p.revive)
            } else {
                (p.hp.clamp(0, 255) as u32, p.escape)
            };
            SnapPlayer {
                id: p.id,
                pos: p.pos,
                hp: hp.min(255) as u8,
                flags,
                escape: escape.min(255) as u8,
                aim: ((p.aim.rem_euclid(360.0) / 360.0 * 256.0) as u32 % 256) as u8,
            }
        })
        .collect();
    let enemies = i
        .enemies
        .iter()
        .take(MAX_SNAPSHOT_ENEMIES)
        .map(|e| SnapEnemy {
            id: e.id,
            def: enemy_index.get(&e.def).copied().unwrap_or(0),
            pos: e.pos,
            hp: e.hp.max(0) as u32,
        })
        .collect();
    let boss = i.boss.as_ref().map(|b| SnapBoss {
        def: boss_index.get(&b.def).copied().unwrap_or(0),
        pos: b.pos,
        hp: b.hp.max(0) as u32,
        max_hp: b.max_hp.max(0) as u32,
        phase: b.phase as u8,
    });
    Snapshot { instance: i.id, tick, last_input_tick: None, report: None, players, enemies, boss }
}
