//! The simulation's rules, on the real base content: determinism, spawn grace, no
//! invulnerability frames, fire cooldown, respawn lockout, the escape channel, linkdead
//! bodies, hit priority, boss phases and instances.

mod common;
use common::base;

use std::collections::BTreeSet;

use hailfire::content::{self, Content, ModRoot};
use hailfire::sim::bullets::Team;
use hailfire::sim::config::*;
use hailfire::sim::events::{Target, TransferReason};
use hailfire::sim::player::{BTN_ESCAPE, BTN_FIRE, BTN_FLARE, BTN_FOCUS, BTN_INTERACT};
use hailfire::sim::script::ShotCmd;
use hailfire::sim::{InputFrame, InstanceId, SimEvent, Vec2, World};

fn world(seed: u64) -> World {
    let c = base();
    World::new(c.defs.clone(), c.script_factory(), seed)
}

fn press(w: &mut World, id: u32, mv: Vec2, buttons: u8) {
    let t = w.tick + 1;
    let _ = w.queue_input(id, InputFrame { tick: t, mv, aim: -90.0, buttons });
}

/// Steps once with the given input and returns the events.
fn step_with(w: &mut World, id: u32, mv: Vec2, buttons: u8) -> Vec<SimEvent> {
    press(w, id, mv, buttons);
    w.step().to_vec()
}

fn enemy_shot_at(pos: Vec2, damage: i32) -> ShotCmd {
    ShotCmd {
        pos,
        angle: 0.0,
        speed: 0.0,
        radius: 4.0,
        lifetime: 30,
        kind: 1,
        accel: 0.0,
        turn: 0.0,
        max_speed: f32::INFINITY,
        damage,
    }
}

/// Puts a damaging enemy bullet right on the player (it hits during the next step).
fn shoot_player(w: &mut World, id: u32, damage: i32) {
    let inst = w.instance_of(id).unwrap();
    let pos = w.player(id).unwrap().pos;
    let tick = w.tick;
    let mut ev = Vec::new();
    w.instances.get_mut(&inst).unwrap().spawn_bullet(tick, &enemy_shot_at(pos, damage), Team::Enemy, &mut ev);
}

fn in_dungeon(seed: u64) -> (World, InstanceId) {
    let mut w = world(seed);
    w.add_player(1, "one");
    let inst = w.enter_dungeon(1, "warden_keep").unwrap();
    (w, inst)
}

fn skip_grace(w: &mut World, id: u32) {
    for _ in 0..SPAWN_GRACE_TICKS {
        step_with(w, id, Vec2::ZERO, 0);
    }
}

#[test]
fn determinism_same_seed_same_world_after_3600_ticks() {
    let run = |seed: u64| {
        let mut w = world(seed);
        for id in 1..=4 {
            w.add_player(id, "p");
            w.enter_dungeon(id, if id <= 2 { "warden_keep" } else { "hollow_grove" });
        }
        let mut hashes = Vec::new();
        for t in 0..3600u32 {
            for id in 1..=4u32 {
                let a = t as f32 * 0.03 + id as f32;
                let f = InputFrame {
                    tick: w.tick + 1,
                    mv: Vec2::new(a.sin(), a.cos()),
                    aim: (t * 7 % 360) as f32,
                    buttons: BTN_FIRE,
                };
                let _ = w.queue_input(id, f);
            }
            w.step();
            if t % 600 == 599 {
                hashes.push(w.hash());
            }
        }
        let bullets: usize = w.instances.values().map(|i| i.bullets.len()).sum();
        (hashes, bullets)
    };
    let (a, bullets) = run(42);
    let (b, _) = run(42);
    let (c, _) = run(43);
    assert!(bullets > 0, "the run must actually have bullets in flight");
    assert_eq!(a, b, "same seed and inputs must give the same world, tick for tick");
    assert_ne!(a.last(), c.last(), "a different seed gives a different run (the hash sees the world)");
}

/// A player's volley: one shot (focused) or one fan (a burst event).
fn player_shot(e: &SimEvent) -> bool {
    matches!(e, SimEvent::BulletSpawned { spawn, .. } if spawn.team == Team::Player)
        || matches!(e, SimEvent::BurstSpawned { burst, .. } if burst.shape.team == Team::Player)
}

#[test]
fn spawn_grace_protects_and_forbids_shooting_for_two_seconds() {
    let (mut w, _) = in_dungeon(1);
    let mut first_shot = None;
    for k in 1..=SPAWN_GRACE_TICKS + 5 {
        if k == 10 {
            shoot_player(&mut w, 1, 50);
        }
        let ev = step_with(&mut w, 1, Vec2::ZERO, BTN_FIRE);
        let fired = ev.iter().any(player_shot);
        if fired && first_shot.is_none() {
            first_shot = Some(k);
        }
    }
    assert_eq!(w.player(1).unwrap().hp, PLAYER_MAX_HP, "invulnerable during grace");
    assert_eq!(first_shot, Some(SPAWN_GRACE_TICKS), "first shot on the tick grace ends");
}

#[test]
fn no_invulnerability_frames_every_bullet_lands() {
    let (mut w, _) = in_dungeon(1);
    skip_grace(&mut w, 1);
    shoot_player(&mut w, 1, 7);
    shoot_player(&mut w, 1, 7);
    shoot_player(&mut w, 1, 7);
    let ev = step_with(&mut w, 1, Vec2::ZERO, 0);
    let hits: BTreeSet<u32> = ev
        .iter()
        .filter_map(|e| match e {
            SimEvent::BulletHit { target: Target::Player(1), uid, amount: 7, .. } => Some(*uid),
            _ => None,
        })
        .collect();
    assert_eq!(hits.len(), 3, "three bullets in one tick are three hits, each naming its own bullet");
    shoot_player(&mut w, 1, 7);
    step_with(&mut w, 1, Vec2::ZERO, 0);
    assert_eq!(w.player(1).unwrap().hp, PLAYER_MAX_HP - 28, "and the next tick's bullet lands too");
}

#[test]
fn fire_rate_is_a_server_cooldown() {
    let count = |pattern: &dyn Fn(u32) -> bool| {
        let (mut w, _) = in_dungeon(3);
        skip_grace(&mut w, 1);
        let mut shots = 0;
        for k in 0..120 {
            let b = if pattern(k) { BTN_FIRE } else { 0 };
            let ev = step_with(&mut w, 1, Vec2::ZERO, b);
            shots += ev.iter().filter(|e| player_shot(e)).count();
        }
        shots
    };
    let held = count(&|_| true);
    let tapped = count(&|k| k % PLAYER_FIRE_COOLDOWN_TICKS == 0);
    let mashed = count(&|k| k % 2 == 0);
    assert_eq!(held, (120 / PLAYER_FIRE_COOLDOWN_TICKS) as usize);
    assert_eq!(tapped, held, "tapping at the right rhythm is exactly as fast as holding");
    assert!(mashed <= held, "mashing is never faster");
}

#[test]
fn respawn_lockout_holds_whatever_the_client_sends() {
    let (mut w, inst) = in_dungeon(4);
    skip_grace(&mut w, 1);
    shoot_player(&mut w, 1, 1000);
    let ev = step_with(&mut w, 1, Vec2::ZERO, BTN_ESCAPE);
    assert!(ev.iter().any(|e| matches!(e, SimEvent::Death { target: Target::Player(1), .. })));
    // A client that ignores its UI and holds the button from the moment of death.
    for _ in 1..RESPAWN_LOCKOUT_TICKS {
        step_with(&mut w, 1, Vec2::ZERO, BTN_ESCAPE);
        assert_eq!(w.instance_of(1), Some(inst), "still locked out");
    }
    let ev = step_with(&mut w, 1, Vec2::ZERO, BTN_ESCAPE);
    assert!(ev
        .iter()
        .any(|e| matches!(e, SimEvent::Transfer { player: 1, reason: TransferReason::LeftAfterDeath, .. })));
    assert_eq!(w.instance_of(1), Some(w.hub));
    let p = w.player(1).unwrap();
    assert!(!p.dead && p.hp == PLAYER_MAX_HP && p.grace == SPAWN_GRACE_TICKS, "back in the hub, whole, with grace");
}

#[test]
fn escape_channel_takes_a_second_damage_does_not_interrupt_release_does() {
    let (mut w, inst) = in_dungeon(5);
    skip_grace(&mut w, 1);
    for _ in 0..ESCAPE_CHANNEL_TICKS - 1 {
        step_with(&mut w, 1, Vec2::ZERO, BTN_ESCAPE);
    }
    step_with(&mut w, 1, Vec2::ZERO, 0);
    assert_eq!(w.player(1).unwrap().escape, 0, "releasing resets the channel");
    for k in 0..ESCAPE_CHANNEL_TICKS {
        if k == 30 {
            shoot_player(&mut w, 1, 10);
        }
        assert_eq!(w.instance_of(1), Some(inst));
        step_with(&mut w, 1, Vec2::ZERO, BTN_ESCAPE);
    }
    assert_eq!(w.instance_of(1), Some(w.hub), "a hit mid-channel did not stop it");
}

#[test]
fn death_ends_the_escape_channel() {
    let (mut w, inst) = in_dungeon(6);
    skip_grace(&mut w, 1);
    for _ in 0..30 {
        step_with(&mut w, 1, Vec2::ZERO, BTN_ESCAPE);
    }
    shoot_player(&mut w, 1, 1000);
    for _ in 0..40 {
        step_with(&mut w, 1, Vec2::ZERO, BTN_ESCAPE);
    }
    let p = w.player(1).unwrap();
    assert!(p.dead);
    assert_eq!(w.instance_of(1), Some(inst), "dying mid-channel does not escape");
}

#[test]
fn linkdead_body_stays_killable_channels_out_and_keeps_the_instance_open() {
    let (mut w, inst) = in_dungeon(7);
    skip_grace(&mut w, 1);
    w.mark_linkdead(1);
    assert!(w.instances[&inst].has_linkdead());
    let mut removed_at = None;
    for k in 1..=ESCAPE_CHANNEL_TICKS + 2 {
        if k == 20 {
            shoot_player(&mut w, 1, 10);
        }
        let ev = w.step().to_vec();
        if ev.iter().any(|e| matches!(e, SimEvent::PlayerRemoved { player: 1, .. })) {
            removed_at = Some(k);
            assert!(ev.iter().any(|e| matches!(e, SimEvent::InstanceClosed { instance } if *instance == inst)));
        } else if removed_at.is_none() {
            assert!(w.instances.contains_key(&inst), "never closes under a resolving body");
        }
    }
    assert_eq!(removed_at, Some(ESCAPE_CHANNEL_TICKS), "the same second everyone pays");
    assert_eq!(w.instance_of(1), None, "forgotten, not moved to the hub");
    assert_eq!(w.queue_input(1, InputFrame::default()), Err(hailfire::sim::InputDrop::UnknownPlayer));
}

#[test]
fn linkdead_body_that_dies_resolves_after_the_lockout() {
    let (mut w, inst) = in_dungeon(8);
    skip_grace(&mut w, 1);
    w.mark_linkdead(1);
    shoot_player(&mut w, 1, 1000);
    w.step();
    assert!(w.player(1).unwrap().dead);
    for _ in 0..RESPAWN_LOCKOUT_TICKS - 1 {
        w.step();
        assert!(w.instances.contains_key(&inst));
    }
    w.step();
    assert_eq!(w.instance_of(1), None);
    assert!(!w.instances.contains_key(&inst));
}

#[test]
fn hub_portal_interact_enters_and_parties_share_an_instance() {
    let mut w = world(9);
    w.add_player(1, "a");
    w.add_player(2, "b");
    let portal = w.defs.portals().into_iter().find(|(d, _)| d == "warden_keep").unwrap().1;
    // Walk player 1 onto the portal, then interact.
    for _ in 0..400 {
        let p = w.player(1).unwrap().pos;
        let d = Vec2::new(portal[0], portal[1]) - p;
        let mv = if d.length() > 3.0 { d * (1.0 / d.length()) } else { Vec2::ZERO };
        let b = if d.length() < 10.0 { BTN_INTERACT } else { 0 };
        press(&mut w, 1, mv, b);
        w.step();
        if w.instance_of(1) != Some(w.hub) {
            break;
        }
    }
    let inst = w.instance_of(1).unwrap();
    assert_ne!(inst, w.hub, "interact on the portal entered the dungeon");
    assert_eq!(w.instances[&inst].dungeon(), Some("warden_keep"));
    assert_eq!(w.enter_dungeon(2, "warden_keep"), Some(inst), "a second player joins the open run");
    for id in 3..=6 {
        w.add_player(id, "x");
        w.enter_dungeon(id, "warden_keep");
    }
    let runs = w.instances.values().filter(|i| i.dungeon() == Some("warden_keep")).count();
    assert_eq!(runs, 2, "max_players 4: the fifth player opens a second run");
}

#[test]
fn player_bullets_hit_the_boss_first_scaled_by_phase() {
    let (mut w, inst) = in_dungeon(10);
    let defs = w.defs.clone();
    let tick = w.tick;
    let mut ev = Vec::new();
    {
        let i = w.instances.get_mut(&inst).unwrap();
        i.start_boss(&defs, tick, &mut ev);
        i.spawn_enemy(&defs, "turret", Vec2::new(480.0, 160.0), &mut ev);
        // Phase 2 of the Warden takes 0.8x damage.
        i.force_boss_hp(&defs, 0.55, &mut ev);
        assert_eq!(i.boss.as_ref().unwrap().phase, 1);
    }
    let boss_hp = w.instances[&inst].boss.as_ref().unwrap().hp;
    let boss_pos = w.instances[&inst].boss.as_ref().unwrap().pos;
    let shot = ShotCmd { damage: 100, ..enemy_shot_at(boss_pos, 100) };
    w.instances.get_mut(&inst).unwrap().spawn_bullet(tick, &shot, Team::Player, &mut ev);
    let ev = w.step().to_vec();
    let boss_dmg: Vec<i32> = ev
        .iter()
        .filter_map(
            |e| if let SimEvent::BulletHit { target: Target::Boss, amount, .. } = e { Some(*amount) } else { None },
        )
        .collect();
    let enemy_hits = ev.iter().filter(|e| matches!(e, SimEvent::BulletHit { target: Target::Enemy(_), .. })).count();
    assert_eq!(boss_dmg, vec![80], "boss first, damage x damage_taken_mult");
    assert_eq!(enemy_hits, 0, "the first overlap consumed the bullet");
    assert_eq!(w.instances[&inst].boss.as_ref().unwrap().hp, boss_hp - 80);
}

#[test]
fn phases_change_with_events_and_a_kill_clears_the_run() {
    let (mut w, inst) = in_dungeon(11);
    let defs = w.defs.clone();
    let mut ev = Vec::new();
    let tick = w.tick;
    w.instances.get_mut(&inst).unwrap().start_boss(&defs, tick, &mut ev);
    assert!(ev.iter().any(|e| matches!(e, SimEvent::PhaseChanged { phase: 0, name, .. } if name == "Iron Vigil")));
    ev.clear();
    w.instances.get_mut(&inst).unwrap().force_boss_hp(&defs, 0.2, &mut ev);
    let phases: Vec<u8> = ev
        .iter()
        .filter_map(|e| if let SimEvent::PhaseChanged { phase, .. } = e { Some(*phase) } else { None })
        .collect();
    assert_eq!(phases, vec![2], "straight to the phase the HP belongs to");
    for _ in 0..30 {
        w.step();
    }
    // Finish it with one huge player bullet.
    let pos = w.instances[&inst].boss.as_ref().unwrap().pos;
    let shot = ShotCmd { damage: 100_000, ..enemy_shot_at(pos, 0) };
    let tick = w.tick;
    w.instances.get_mut(&inst).unwrap().spawn_bullet(tick, &shot, Team::Player, &mut ev);
    let ev = w.step().to_vec();
    assert!(ev.iter().any(|e| matches!(e, SimEvent::Death { target: Target::Boss, .. })));
    assert!(ev.iter().any(|e| matches!(e, SimEvent::InstanceCleared { .. })));
    assert_eq!(w.instances[&inst].bullets.team.iter().filter(|t| **t == Team::Enemy).count(), 0, "bullet cancel");
    let mut back = false;
    for _ in 0..hailfire::sim::instance::CLEAR_DELAY_TICKS + 1 {
        let ev = w.step().to_vec();
        back |= ev.iter().any(|e| matches!(e, SimEvent::Transfer { reason: TransferReason::Cleared, .. }));
    }
    assert!(back && w.instance_of(1) == Some(w.hub), "cleared: everyone returns to the hub");
    assert!(!w.instances.contains_key(&inst), "and the run closes");
}

#[test]
fn input_queue_drops_per_the_validation_table() {
    use hailfire::sim::InputDrop;
    let (mut w, _) = in_dungeon(12);
    for _ in 0..100 {
        w.step();
    }
    let now = w.tick;
    let f = |tick| InputFrame { tick, mv: Vec2::new(1.0, 0.0), aim: 0.0, buttons: 0 };
    assert_eq!(w.queue_input(1, f(now - INPUT_MAX_AGE - 1)), Err(InputDrop::Stale));
    assert_eq!(w.queue_input(1, f(now + INPUT_MAX_LEAD + 1)), Err(InputDrop::Future));
    assert_eq!(w.queue_input(1, f(now + 1)), Ok(()));
    w.step();
    assert_eq!(w.queue_input(1, f(now + 1)), Err(InputDrop::Replay));
    assert_eq!(w.player(1).unwrap().last_input_tick, Some(now + 1));
    // A hostile move vector cannot buy speed.
    let before = w.player(1).unwrap().pos;
    let _ = w.queue_input(1, InputFrame { tick: w.tick + 1, mv: Vec2::new(1e9, 1e9), aim: f32::NAN, buttons: 0xff });
    w.step();
    assert!(w.player(1).unwrap().pos.distance(before) <= PLAYER_SPEED + 1e-3);
}

#[test]
fn ten_thousand_bullets_stay_consistent() {
    let (mut w, inst) = in_dungeon(13);
    let mut ev = Vec::new();
    let tick = w.tick;
    {
        let i = w.instances.get_mut(&inst).unwrap();
        for k in 0..10_000u32 {
            let a = k as f32 * 0.036;
            let shot =
                ShotCmd { angle: a * 57.29578, speed: 1.0, lifetime: 600, ..enemy_shot_at(Vec2::new(480.0, 360.0), 1) };
            i.spawn_bullet(tick, &shot, Team::Enemy, &mut ev);
        }
    }
    assert_eq!(w.instances[&inst].bullets.len(), 10_000);
    // Long enough for players' hits and the walls to remove bullets from the middle of
    // the pool (the player leaves spawn grace after 2 s).
    for t in 0..400u32 {
        let _ = w.queue_input(1, InputFrame { tick: w.tick + 1, mv: compass(t, 1), aim: 0.0, buttons: 0 });
        w.step();
        w.instances.get_mut(&inst).unwrap().players.iter_mut().for_each(|p| p.hp = 100);
    }
    let b = &mut w.instances.get_mut(&inst).unwrap().bullets;
    let n = b.len();
    assert!(n > 1_000 && n < 10_000, "some bullets left, some stayed: {n}");
    let uids: BTreeSet<u32> = b.uid.iter().copied().collect();
    assert_eq!(uids.len(), n, "every uid once");
    for i in 0..n {
        let uid = b.uid[i];
        assert_eq!(b.find(uid), Some(i), "uid {uid} found at its slot");
        assert!(b.life[i] > 0, "no dead bullet left in the pool");
    }
}

// ------------------------------------------------------------------ golden hashes

/// FNV-1a over every live bullet's bits, in uid order, for every instance.
fn bullet_bits_hash(w: &World) -> (u64, usize) {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    let mut mix = |v: u32| {
        for b in v.to_le_bytes() {
            h ^= b as u64;
            h = h.wrapping_mul(0x100_0000_01b3);
        }
    };
    let mut n = 0;
    for inst in w.instances.values() {
        let p = &inst.bullets;
        // In uid order: the pool's slot order is an implementation detail (removal is a
        // swap-remove), the bullets' bits are what must not change.
        let mut order: Vec<usize> = (0..p.len()).collect();
        order.sort_by_key(|&i| p.uid[i]);
        for i in order {
            for v in [p.uid[i], p.x[i].to_bits(), p.y[i].to_bits(), p.vx[i].to_bits(), p.vy[i].to_bits()] {
                mix(v);
            }
            mix(p.life[i] as u32);
            n += 1;
        }
    }
    (h, n)
}

/// Players' moves without any platform function: eight compass directions from integers.
fn compass(t: u32, id: u32) -> Vec2 {
    const D: [(f32, f32); 8] =
        [(1.0, 0.0), (0.7, 0.7), (0.0, 1.0), (-0.7, 0.7), (-1.0, 0.0), (-0.7, -0.7), (0.0, -1.0), (0.7, -0.7)];
    let (x, y) = D[((t / 20 + id * 3) % 8) as usize];
    Vec2::new(x, y)
}

/// A boss fight of 900 ticks, four scripted players kept alive, from the boss's arrival.
fn boss_fight_hash(c: &Content, dungeon: &str) -> (u64, usize) {
    boss_fight_hash_with(c, c.script_factory(), dungeon)
}

fn boss_fight_hash_with(
    c: &Content,
    scripts: std::sync::Arc<dyn hailfire::sim::script::ScriptFactory>,
    dungeon: &str,
) -> (u64, usize) {
    let mut w = World::new(c.defs.clone(), scripts, 2026);
    for id in 1..=4 {
        w.add_player(id, "p");
        w.enter_dungeon(id, dungeon);
    }
    let inst = w.instance_of(1).unwrap();
    let defs = w.defs.clone();
    let mut ev = Vec::new();
    let t0 = w.tick;
    w.instances.get_mut(&inst).unwrap().start_boss(&defs, t0, &mut ev);
    for t in 0..900u32 {
        for id in 1..=4u32 {
            let f = InputFrame { tick: w.tick + 1, mv: compass(t, id), aim: (t * 7 % 360) as f32, buttons: BTN_FIRE };
            let _ = w.queue_input(id, f);
        }
        for p in w.instances.get_mut(&inst).unwrap().players.iter_mut() {
            p.hp = 100;
        }
        w.step();
    }
    bullet_bits_hash(&w)
}

/// Bullets that turn, accelerate and hit their speed caps, spawned at angles all round the
/// circle: the paths that use `sin`/`cos` at spawn and every tick after.
fn stress_field_hash() -> (u64, usize) {
    use hailfire::sim::{BulletPool, BulletSpawn};
    let mut pool = BulletPool::new();
    for k in 0..2000u32 {
        let s = BulletSpawn {
            uid: k + 1,
            pos: Vec2::new(2000.0 + (k % 40) as f32 * 3.25, 2000.0 + (k / 40) as f32 * 2.5),
            angle: k as f32 * 137.507_76,
            speed: 0.5 + (k % 13) as f32 * 0.25,
            radius: 4.0,
            lifetime: 1200,
            kind: 0,
            team: Team::Enemy,
            accel: ((k % 7) as f32 - 3.0) * 0.01,
            turn: ((k % 97) as f32 - 48.0) * 0.0371,
            max_speed: if k % 3 == 0 { f32::INFINITY } else { 3.0 + (k % 5) as f32 },
            tick: 0,
        }
        .quantized();
        pool.spawn(&s, 0);
    }
    for _ in 0..900 {
        pool.step(Vec2::new(4000.0, 4000.0));
    }
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    let mut order: Vec<usize> = (0..pool.len()).collect();
    order.sort_by_key(|&i| pool.uid[i]);
    for i in order {
        for v in [pool.uid[i], pool.x[i].to_bits(), pool.y[i].to_bits(), pool.vx[i].to_bits(), pool.vy[i].to_bits()] {
            for b in v.to_le_bytes() {
                h ^= b as u64;
                h = h.wrapping_mul(0x100_0000_01b3);
            }
        }
    }
    (h, pool.len())
}

/// Golden hashes: the exact bits of every live bullet after 900 ticks of each shipped boss
/// fight, and of a turning/accelerating stress field. Any platform that runs `cargo test`
/// proves here that it simulates bit for bit like Linux x86-64.
///
/// How the constants were made: run this test on Linux x86-64 (Debian 12, Rust 1.95, the
/// `libm` crate for every transcendental function, see `sim::math`) with
/// `HAILFIRE_PRINT_GOLDEN=1 cargo test --test simulation golden -- --nocapture`, and
/// copy the printed values. They may change only with a deliberate change to the
/// simulation, the shipped patterns or the seeds here, recorded in the protocol history
/// (`protocol::PROTOCOL_VERSION`); a change on one platform only is a determinism bug.
/// Changed in protocol 5: `ring` and `fan` became bursts whose directions are integer
/// steps of the angle grid (rings moved by at most 1/65536 of a turn per bullet), and the
/// shipped spirals that fired their arms one `shot` at a time became rings.
/// Changed in protocol 8 (the game's rules): an unfocused player fires a three-shot fan,
/// boss and enemy HP scale with the party, and players meet the boss at full health (the
/// stress field, which has no players' rules in it, kept its value).
#[test]
fn golden_hashes_pin_the_simulation_bits() {
    let c = content::load(&[
        ModRoot::Mod(content::content_dir()),
        ModRoot::Mod(content::content_dir().parent().unwrap().join("mods/example_spiral")),
    ]);
    assert!(c.errors().next().is_none(), "{:?}", c.diagnostics);
    let got = [
        ("warden_keep", boss_fight_hash(&c, "warden_keep")),
        ("hollow_grove", boss_fight_hash(&c, "hollow_grove")),
        ("whirl_pit", boss_fight_hash(&c, "whirl_pit")),
        ("stress", stress_field_hash()),
    ];
    if std::env::var_os("HAILFIRE_PRINT_GOLDEN").is_some() {
        for (name, (h, n)) in &got {
            println!("(\"{name}\", (0x{h:016x}, {n})),");
        }
    }
    let want: [(&str, (u64, usize)); 4] = [
        ("warden_keep", (0x449c_404c_ef9a_db12, 294)),
        ("hollow_grove", (0x30b0_6c16_87cf_cc29, 166)),
        ("whirl_pit", (0x8b78_80a8_1f68_68a8, 264)),
        ("stress", (0x1c75_73ac_fc24_95b7, 1827)),
    ];
    for ((name, g), (_, w)) in got.iter().zip(want.iter()) {
        assert!(g.1 > 50, "{name}: the fight must have bullets in flight to pin anything ({} live)", g.1);
        assert_eq!(g, w, "{name}: (hash, live bullets) differ from the golden values");
    }
    // The same fights with every script, the base game's too, in a worker process: the
    // same bits (same code, same inputs, same order).
    use hailfire::content::host::{Isolation, ScriptHost};
    let exe = hailfire::content::worker::worker_exe();
    let all_in_workers = std::sync::Arc::new(ScriptHost::new(
        &c.defs,
        c.emitters.clone(),
        Isolation::Workers { exe, trusted: Default::default() },
    ));
    for (name, w) in want.iter().take(3) {
        assert_eq!(&boss_fight_hash_with(&c, all_in_workers.clone(), name), w, "{name} with its scripts in a worker");
    }
}

#[test]
fn a_reload_mid_fight_leaves_the_running_fight_on_its_own_definitions() {
    let c = base();
    let mut w = World::new(c.defs.clone(), c.script_factory(), 3);
    w.add_player(1, "a");
    let old = w.enter_dungeon(1, "warden_keep").unwrap();
    let defs = w.defs.clone();
    let t = w.tick;
    let mut ev = Vec::new();
    w.instances.get_mut(&old).unwrap().start_boss(&defs, t, &mut ev);
    // New definitions: the Warden has a single phase now.
    let mut nd = (*c.defs).clone();
    nd.bosses.get_mut("warden").unwrap().phases.truncate(1);
    w.reload(std::sync::Arc::new(nd), c.script_factory());
    // The old fight goes through all three of its phases without a panic.
    for frac in [0.5, 0.2] {
        let d = defs.clone();
        w.instances.get_mut(&old).unwrap().force_boss_hp(&d, frac, &mut ev);
        for _ in 0..30 {
            w.step();
        }
    }
    assert_eq!(w.instances[&old].boss.as_ref().unwrap().phase, 2, "the old fight reached its third phase");
    // A newcomer does not join the old run: a new one opens on the new definitions.
    w.add_player(2, "b");
    let new = w.enter_dungeon(2, "warden_keep").unwrap();
    assert_ne!(new, old);
    assert_eq!(w.instances_on_old_content(), 1);
}

/// Several fights in three dungeons (24 players, bosses up, everyone firing), stepped with
/// `threads` simulation threads: the world hash after every tick and every event in order.
fn threaded_run(c: &Content, threads: usize, ticks: u32) -> (Vec<u64>, Vec<SimEvent>, usize) {
    let mut w = World::new(c.defs.clone(), c.script_factory(), 77);
    w.set_threads(threads).unwrap();
    // Always spread, however light the tick (the default waits for 0.5 ms of work).
    w.set_parallel_from_us(0);
    assert_eq!(w.threads(), threads.max(1));
    let dungeons = ["warden_keep", "hollow_grove", "whirl_pit"];
    for id in 1..=24u32 {
        w.add_player(id, "p");
        w.enter_dungeon(id, dungeons[(id as usize - 1) / 8]);
    }
    let defs = w.defs.clone();
    let t0 = w.tick;
    let ids: Vec<InstanceId> = w.instances.keys().copied().filter(|i| *i != w.hub).collect();
    for i in &ids {
        w.instances.get_mut(i).unwrap().start_boss(&defs, t0, &mut Vec::new());
    }
    let (mut hashes, mut events) = (Vec::new(), Vec::new());
    for t in 0..ticks {
        for id in 1..=24u32 {
            let f = InputFrame { tick: w.tick + 1, mv: compass(t, id), aim: (t * 7 % 360) as f32, buttons: BTN_FIRE };
            let _ = w.queue_input(id, f);
        }
        for i in &ids {
            if let Some(inst) = w.instances.get_mut(i) {
                inst.players.iter_mut().for_each(|p| p.hp = 100);
            }
        }
        events.extend(w.step().iter().cloned());
        hashes.push(w.hash());
    }
    (hashes, events, ids.len())
}

#[test]
fn instances_stepped_on_threads_give_the_same_world_as_one_thread() {
    let c = base();
    let (h1, e1, instances) = threaded_run(&c, 1, 300);
    assert!(instances >= 4, "{instances} fights");
    assert!(e1.iter().filter(|e| matches!(e, SimEvent::BulletHit { .. })).count() > 10, "the fights hit things");
    for threads in [2, 4] {
        let (h, e, _) = threaded_run(&c, threads, 300);
        assert_eq!(h, h1, "world hash per tick, {threads} threads");
        let first = e.iter().zip(&e1).position(|(a, b)| a != b);
        assert!(first.is_none() && e.len() == e1.len(), "{threads} threads: events differ from event {first:?} on");
    }
}

// ---------------------------------------------------------------- the game's rules: runs

/// Steps once with each player's input (players not named send nothing).
fn step_each(w: &mut World, inputs: &[(u32, Vec2, u8)]) -> Vec<SimEvent> {
    for &(id, mv, b) in inputs {
        press(w, id, mv, b);
    }
    w.step().to_vec()
}

/// Two players in the Warden's Keep, their arrival grace over.
fn pair_in_dungeon(seed: u64) -> (World, InstanceId) {
    let mut w = world(seed);
    for id in [1, 2] {
        w.add_player(id, "p");
        w.enter_dungeon(id, "warden_keep");
    }
    let inst = w.instance_of(1).unwrap();
    for _ in 0..SPAWN_GRACE_TICKS {
        step_each(&mut w, &[(1, Vec2::ZERO, 0), (2, Vec2::ZERO, 0)]);
    }
    (w, inst)
}

/// A bullet of `damage` that will pass `offset` px beside player `id` (beyond the hit
/// distance, inside the graze radius), fired across them.
fn graze_past(w: &mut World, id: u32, offset: f32) {
    let inst = w.instance_of(id).unwrap();
    let p = w.player(id).unwrap().pos;
    let tick = w.tick;
    let mut shot = enemy_shot_at(Vec2::new(p.x - 40.0, p.y - offset), 10);
    shot.speed = 4.0;
    shot.lifetime = 60;
    let mut ev = Vec::new();
    w.instances.get_mut(&inst).unwrap().spawn_bullet(tick, &shot, Team::Enemy, &mut ev);
}

#[test]
fn a_graze_counts_once_per_bullet_and_player_and_never_for_a_hit() {
    let (mut w, _) = in_dungeon(5);
    skip_grace(&mut w, 1);
    // Passing 12 px from the hitbox's centre: 4 (bullet) + 5 (hitbox) = 9 px is a hit,
    // 9 + GRAZE_RADIUS a graze. It stays within the graze radius for several ticks.
    graze_past(&mut w, 1, 12.0);
    for _ in 0..30 {
        step_with(&mut w, 1, Vec2::ZERO, 0);
    }
    let p = w.player(1).unwrap();
    assert_eq!((p.stats.grazes, p.graze_charge, p.hp), (1, 1, PLAYER_MAX_HP), "one graze for one bullet, no damage");
    // A bullet that hits after grazing is no graze.
    graze_past(&mut w, 1, 3.0);
    for _ in 0..30 {
        step_with(&mut w, 1, Vec2::ZERO, 0);
    }
    let p = w.player(1).unwrap();
    assert_eq!(p.stats.grazes, 1, "the hit undid its graze");
    assert_eq!((p.hp, p.stats.hits_taken), (PLAYER_MAX_HP - 10, 1));
    // Far away: nothing.
    graze_past(&mut w, 1, 9.0 + GRAZE_RADIUS + 3.0);
    for _ in 0..30 {
        step_with(&mut w, 1, Vec2::ZERO, 0);
    }
    assert_eq!(w.player(1).unwrap().stats.grazes, 1);
    // Grazes charge flares: GRAZES_PER_FLARE of them make one (up to MAX_FLARES).
    let p = w.player_mut(1).unwrap();
    p.flares = 0;
    for _ in 0..GRAZES_PER_FLARE {
        p.graze();
    }
    assert_eq!(p.flares, 1);
}

#[test]
fn a_flare_clears_the_enemy_bullets_in_its_radius_and_hurts_what_is_near() {
    let (mut w, inst) = in_dungeon(6);
    skip_grace(&mut w, 1);
    let at = w.player(1).unwrap().pos;
    let tick = w.tick;
    let mut ev = Vec::new();
    let i = w.instances.get_mut(&inst).unwrap();
    // Still bullets at 100 px (inside) and 200 px (outside), and a player's own shot inside.
    for (dx, dy) in [(100.0, 0.0), (0.0, -100.0), (200.0, 0.0), (-160.0, 0.0)] {
        let mut s = enemy_shot_at(Vec2::new(at.x + dx, at.y + dy), 10);
        s.lifetime = 300;
        i.spawn_bullet(tick, &s, Team::Enemy, &mut ev);
    }
    let mut own = enemy_shot_at(Vec2::new(at.x + 50.0, at.y), 10);
    own.lifetime = 300;
    i.spawn_bullet(tick, &own, Team::Player, &mut ev);
    let before = i.bullets.len();
    assert_eq!(w.player(1).unwrap().flares, START_FLARES);
    let ev = step_with(&mut w, 1, Vec2::ZERO, BTN_FLARE);
    assert!(ev.iter().any(|e| matches!(e, SimEvent::Flare { player: 1, .. })));
    let i = &w.instances[&inst];
    assert_eq!(before - i.bullets.len(), 2, "exactly the two enemy bullets within {FLARE_RADIUS} px");
    assert!(i.bullets.team.iter().filter(|t| **t == Team::Player).count() >= 1, "own shots stay");
    assert_eq!(w.player(1).unwrap().flares, START_FLARES - 1);
    // Held, it does not fire again; with none left, pressing does nothing.
    let ev = step_with(&mut w, 1, Vec2::ZERO, BTN_FLARE);
    assert!(!ev.iter().any(|e| matches!(e, SimEvent::Flare { .. })), "a flare fires on the press, not while held");
    step_with(&mut w, 1, Vec2::ZERO, 0);
    let ev = step_with(&mut w, 1, Vec2::ZERO, BTN_FLARE);
    assert!(!ev.iter().any(|e| matches!(e, SimEvent::Flare { .. })), "no flares left");
}

#[test]
fn a_downed_player_is_revived_by_a_teammate_close_enough_for_two_seconds() {
    let (mut w, _) = pair_in_dungeon(7);
    w.player_mut(1).unwrap().hp = 5;
    shoot_player(&mut w, 1, 50);
    step_each(&mut w, &[(1, Vec2::ZERO, 0), (2, Vec2::ZERO, 0)]);
    let p = w.player(1).unwrap();
    assert!(p.dead && p.downed > 0 && !p.out, "downed, not out: a teammate stands");
    // The teammate stands 100 px away: too far, no progress.
    let at = w.player(1).unwrap().pos;
    w.player_mut(2).unwrap().pos = Vec2::new(at.x + 100.0, at.y);
    for _ in 0..REVIVE_TICKS {
        step_each(&mut w, &[(1, Vec2::ZERO, 0), (2, Vec2::ZERO, 0)]);
    }
    assert!(w.player(1).unwrap().dead, "nobody in range");
    // Within 48 px: revived after exactly two seconds.
    w.player_mut(2).unwrap().pos = Vec2::new(at.x + REVIVE_RANGE - 4.0, at.y);
    let mut revived_after = None;
    for k in 1..=REVIVE_TICKS + 5 {
        let ev = step_each(&mut w, &[(1, Vec2::ZERO, 0), (2, Vec2::ZERO, 0)]);
        if ev.iter().any(|e| matches!(e, SimEvent::Revived { player: 1, by: 2, .. })) {
            revived_after = Some(k);
            break;
        }
    }
    assert_eq!(revived_after, Some(REVIVE_TICKS));
    let p = w.player(1).unwrap();
    assert!(!p.dead && p.hp == REVIVE_HP);
    assert_eq!(w.player(2).unwrap().stats.revives, 1);
}

#[test]
fn downed_too_long_is_out_and_all_down_fails_the_run() {
    let (mut w, inst) = pair_in_dungeon(8);
    shoot_player(&mut w, 1, 200);
    step_each(&mut w, &[(1, Vec2::ZERO, 0), (2, Vec2::ZERO, 0)]);
    // The teammate stays out of reach (and alive: the waves come meanwhile).
    w.player_mut(2).unwrap().pos = Vec2::new(10.0, 10.0);
    w.player_mut(2).unwrap().hp = 1_000_000;
    let mut out_after = None;
    for k in 1..=DOWNED_TICKS + 2 {
        let ev = step_each(&mut w, &[(1, Vec2::ZERO, 0), (2, Vec2::ZERO, 0)]);
        if ev.iter().any(|e| matches!(e, SimEvent::PlayerOut { player: 1, .. })) {
            out_after = Some(k);
        }
    }
    assert_eq!(out_after, Some(DOWNED_TICKS), "out after ten seconds downed");
    assert!(w.instances[&inst].run().ended.is_none(), "one still stands: the run goes on");
    // The last one standing goes down: nobody can revive anyone, the run has failed.
    w.player_mut(2).unwrap().hp = 1;
    shoot_player(&mut w, 2, 200);
    let ev = step_each(&mut w, &[(1, Vec2::ZERO, 0), (2, Vec2::ZERO, 0)]);
    let sum = ev.iter().find_map(|e| match e {
        SimEvent::RunEnded { summary, to, .. } => Some((summary.clone(), to.clone())),
        _ => None,
    });
    let (sum, to) = sum.expect("the run ended");
    assert_eq!(sum.outcome, hailfire::sim::events::RunOutcome::Failed);
    assert_eq!(to, vec![1, 2], "both are told");
    assert_eq!(sum.rows.iter().map(|r| r.stats.downs).sum::<u32>(), 2);
    // Both go back to the hub after the lockout.
    for _ in 0..RESPAWN_LOCKOUT_TICKS + 2 {
        step_each(&mut w, &[(1, Vec2::ZERO, 0), (2, Vec2::ZERO, 0)]);
    }
    assert_eq!(w.instance_of(1), Some(w.hub));
    assert_eq!(w.instance_of(2), Some(w.hub));
}

#[test]
fn alone_at_zero_hp_the_run_ends() {
    let (mut w, inst) = in_dungeon(9);
    skip_grace(&mut w, 1);
    shoot_player(&mut w, 1, 500);
    let ev = step_with(&mut w, 1, Vec2::ZERO, 0);
    assert!(w.player(1).unwrap().out, "no teammate: out at once, never downed");
    assert!(ev.iter().any(|e| matches!(e, SimEvent::RunEnded { .. })));
    assert_eq!(w.instances[&inst].run().ended, Some(hailfire::sim::events::RunOutcome::Failed));
}

#[test]
fn enemy_and_boss_hp_scale_with_the_party_that_entered() {
    let hp_with = |n: u32| {
        let mut w = world(10);
        for id in 1..=n {
            w.add_player(id, "p");
            w.enter_dungeon(id, "warden_keep");
        }
        let inst = w.instance_of(1).unwrap();
        let ins: Vec<(u32, Vec2, u8)> = (1..=n).map(|id| (id, Vec2::ZERO, 0)).collect();
        for _ in 0..600 {
            step_each(&mut w, &ins);
            if !w.instances[&inst].enemies.is_empty() {
                break;
            }
        }
        let i = &w.instances[&inst];
        assert_eq!(i.run().party, n);
        i.enemies.first().map(|e| e.max_hp).expect("the first wave came")
    };
    let (one, four) = (hp_with(1), hp_with(4));
    assert_eq!(four, (one as f32 * (1.0 + 3.0 * PARTY_HP_PER_PLAYER)).round() as i32);
}

#[test]
fn focus_moves_at_the_focus_speed() {
    let (mut w, _) = in_dungeon(11);
    skip_grace(&mut w, 1);
    let a = w.player(1).unwrap().pos;
    step_with(&mut w, 1, Vec2::new(1.0, 0.0), BTN_FOCUS);
    let b = w.player(1).unwrap().pos;
    step_with(&mut w, 1, Vec2::new(1.0, 0.0), 0);
    let c = w.player(1).unwrap().pos;
    assert!(((b.x - a.x) - PLAYER_SPEED * FOCUS_SPEED).abs() < 1e-4, "{}", b.x - a.x);
    assert!(((c.x - b.x) - PLAYER_SPEED).abs() < 1e-4);
}

#[test]
fn leaving_a_run_alone_still_brings_the_abandoned_summary() {
    let (mut w, inst) = in_dungeon(12);
    skip_grace(&mut w, 1);
    let mut got = None;
    for _ in 0..ESCAPE_CHANNEL_TICKS + 5 {
        let ev = step_with(&mut w, 1, Vec2::ZERO, BTN_ESCAPE);
        if let Some(s) = ev.iter().find_map(|e| match e {
            SimEvent::RunEnded { summary, to, .. } => Some((summary.outcome, to.clone())),
            _ => None,
        }) {
            got = Some(s);
        }
    }
    assert_eq!(got, Some((hailfire::sim::events::RunOutcome::Abandoned, vec![1])));
    assert!(!w.instances.contains_key(&inst), "the emptied run closed in the same step");
}

#[test]
fn when_the_last_one_standing_leaves_a_downed_teammate_the_run_fails() {
    let (mut w, inst) = pair_in_dungeon(13);
    shoot_player(&mut w, 1, 500);
    step_each(&mut w, &[(1, Vec2::ZERO, 0), (2, Vec2::ZERO, 0)]);
    assert!(w.player(1).unwrap().downed > 0);
    w.player_mut(2).unwrap().hp = 1_000_000;
    for _ in 0..ESCAPE_CHANNEL_TICKS + 5 {
        step_each(&mut w, &[(1, Vec2::ZERO, 0), (2, Vec2::ZERO, BTN_ESCAPE)]);
    }
    assert_eq!(w.instance_of(2), Some(w.hub), "the teammate escaped");
    assert_eq!(
        w.instances[&inst].run().ended,
        Some(hailfire::sim::events::RunOutcome::Failed),
        "nobody is left to revive: failed at once, not after the downed timer"
    );
}

#[test]
fn a_ship_fires_its_pattern_from_content() {
    let volleys = |ship: &str, buttons: u8| {
        let (mut w, _) = in_dungeon(14);
        let k = w.defs.ships.keys().position(|id| id == ship).expect("a shipped ship") as u16;
        w.player_mut(1).unwrap().ship = k;
        skip_grace(&mut w, 1);
        let mut shots = Vec::new();
        for _ in 0..60 {
            for e in step_with(&mut w, 1, Vec2::ZERO, BTN_FIRE | buttons) {
                match e {
                    SimEvent::BulletSpawned { spawn, .. } if spawn.team == Team::Player => shots.push(1),
                    SimEvent::BurstSpawned { burst, .. } if burst.shape.team == Team::Player => {
                        shots.push(burst.count as usize)
                    }
                    _ => {}
                }
            }
        }
        shots
    };
    let d = base().defs.clone();
    for (id, s) in &d.ships {
        let v = volleys(id, 0);
        assert_eq!(v.len() as u32, 60 / s.cooldown + u32::from(60 % s.cooldown != 0), "{id}: volleys a second");
        assert!(v.iter().all(|&n| n == s.shots as usize), "{id}: {v:?}");
        let f = volleys(id, BTN_FOCUS);
        assert!(f.iter().all(|&n| n == s.focus_shots as usize), "{id} focused: {f:?}");
    }
    assert!(d.ships.len() >= 4, "four ships ship");
    assert_eq!(d.ships.keys().next().map(String::as_str), Some("arrow"), "everyone starts in the Arrow");
}

#[test]
fn four_dodging_bots_clear_every_shipped_dungeon_and_see_every_boss_phase() {
    use hailfire::client::bot::Plan;
    let c = content::load(&[ModRoot::Mod(content::content_dir())]);
    for (id, d) in &c.defs.dungeons {
        let r = hailfire::bench::balance_run(&c, id, Plan::Dodge, 4, 1, 420.0);
        assert!(r.cleared, "{id}: four dodging bots did not clear it in 7 minutes");
        let phases = c.defs.bosses[&d.boss].phases.len();
        let seen: std::collections::BTreeSet<usize> = r.phases.iter().map(|(p, _)| *p).collect();
        assert_eq!(seen.len(), phases, "{id}: the boss's phases seen {seen:?} of {phases}");
    }
}

#[test]
fn the_tutorial_teaches_in_order_and_a_dodging_newcomer_clears_it() {
    use hailfire::client::bot::{Brain, Plan};
    use hailfire::client::ClientEvent;
    let c = content::load(&[ModRoot::Mod(content::content_dir())]);
    let script = std::fs::read_to_string(content::content_dir().join("emitters/tutorial_lessons.lua")).unwrap();
    // The lessons as the script says them, in order; the downed Cadet's thanks come in the
    // middle, once the newcomer has revived them.
    let mut lessons: Vec<&str> =
        script.lines().filter_map(|l| l.trim().strip_prefix("hint(\"")?.strip_suffix("\")")).collect();
    assert!(lessons.len() >= 9, "{lessons:?}");
    let down = lessons.iter().position(|l| l.starts_with("A teammate is down")).expect("the revive lesson");
    let cadet = std::fs::read_to_string(content::content_dir().join("emitters/cadet_revive.lua")).unwrap();
    let revived = cadet.lines().find_map(|l| l.trim().strip_prefix("hint(\"Revived")?.strip_suffix("\")")).unwrap();
    let revived = format!("Revived{revived}");
    lessons.insert(down + 1, &revived);
    let cadet_def = c.defs.enemies.keys().position(|k| k == "tutorial_cadet").expect("the Cadet") as u16;
    let mut st = hailfire::stepper::Stepper::new(c, Default::default());
    st.add_client("newcomer", hailfire::net::LinkProfile::CLEAN);
    let mut brain = Brain::new(Plan::Dodge, "tutorial", 1);
    let mut heard = Vec::new();
    for _ in 0..10 * 60 * 60 {
        // When told a teammate is down, the newcomer walks to them and stands there.
        let told = heard.len() == down + 1;
        st.step(|_, cl| {
            let at = cl
                .view
                .as_ref()
                .and_then(|v| v.latest())
                .and_then(|s| s.enemies.iter().find(|e| e.def == cadet_def))
                .map(|e| e.pos);
            match (told, at, cl.pred) {
                (true, Some(at), Some(me)) => {
                    let d = at - me;
                    let n = d.length().max(1.0);
                    hailfire::client::InputSample {
                        mv: if n > 6.0 { d * (1.0 / n) } else { Default::default() },
                        aim: -90.0,
                        buttons: 0,
                    }
                }
                _ => brain.think(cl),
            }
        });
        for e in st.clients[0].events.drain(..) {
            if let ClientEvent::Hint(t) = e {
                heard.push(t);
            }
        }
        if !st.clients[0].summaries.is_empty() {
            break;
        }
    }
    assert_eq!(heard, lessons, "every lesson, once, in order");
    let s = st.clients[0].summaries.last().expect("the run ended");
    assert_eq!(s.outcome, hailfire::sim::events::RunOutcome::Cleared, "{s:?}");
    assert!(s.ticks > 90 * 60, "about three minutes, not a rush: {} s", s.ticks / 60);
}

/// Lag compensation: a dummy walks right 6 px a tick; a player's shot is put where it was
/// some ticks ago. It hits when the shooter's view delay says they saw it there, and not
/// otherwise; a delay past the clamp buys nothing; and enemy bullets are never rewound.
#[test]
fn lag_compensation_rewinds_player_shots_against_enemies_only_within_the_clamp() {
    // In the hub: nothing else there to hit (no waves, no boss), and its dummies stand again.
    let mut w = world(3);
    w.add_player(1, "one");
    let inst = w.hub;
    let defs = w.defs.clone();
    let mut ev = Vec::new();
    w.instances.get_mut(&inst).unwrap().enemies.clear();
    w.instances.get_mut(&inst).unwrap().spawn_enemy(&defs, "training_dummy", Vec2::new(200.0, 200.0), &mut ev);
    let walk = |w: &mut World| {
        for _ in 0..30 {
            let i = w.instances.get_mut(&inst).unwrap();
            let e = &mut i.enemies[0];
            e.pos = Vec2::new(e.pos.x + 6.0, 200.0);
            step_with(w, 1, Vec2::ZERO, 0);
        }
    };
    // A shot where the dummy stood `back` ticks before the coming step's hit test, from
    // a player whose game drew it `delay` ticks behind.
    let shot_hits = |w: &mut World, back: f32, delay: u32| -> bool {
        w.instances.get_mut(&inst).unwrap().enemies[0].pos = Vec2::new(200.0, 200.0);
        walk(w);
        w.player_mut(1).unwrap().view_delay = delay * VIEW_STEPS_PER_TICK;
        let i = w.instances.get_mut(&inst).unwrap();
        // The coming step moves it 6 px more before the hit test.
        let now = i.enemies[0].pos.x + 6.0;
        let at = Vec2::new(now - 6.0 * back, 200.0);
        let tick = w.tick;
        let shot = ShotCmd { radius: 2.0, ..enemy_shot_at(at, 1) };
        let mut ev = Vec::new();
        w.instances.get_mut(&inst).unwrap().spawn_shot_of(tick, 1, &shot, &mut ev);
        let i = w.instances.get_mut(&inst).unwrap();
        let x = i.enemies[0].pos.x;
        i.enemies[0].pos = Vec2::new(x + 6.0, 200.0);
        let ev = step_with(w, 1, Vec2::ZERO, 0);
        ev.iter().any(|e| matches!(e, SimEvent::BulletHit { target: Target::Enemy(_), .. }))
    };
    // The dummy is 16 px in radius and moves 6 px a tick: 10 ticks back is 60 px away.
    assert!(!shot_hits(&mut w, 10.0, 0), "without a delay, the shot at the old place misses");
    assert!(shot_hits(&mut w, 10.0, 10), "seen 10 ticks back, it hits where it was seen");
    assert!(!shot_hits(&mut w, 10.0, 3), "a delay that does not match misses");
    assert!(shot_hits(&mut w, 0.0, 0), "where it is now, without a delay");
    // The clamp: the server keeps 15 ticks; 30 ticks back never hits, whatever is claimed.
    assert!(!shot_hits(&mut w, 30.0, 30), "past the clamp");
    assert!(shot_hits(&mut w, LAG_COMP_MAX_TICKS as f32, 30), "a claim past it is held to it");
    // Enemy bullets against players: where the player is now, never where they were.
    let (mut w, _) = in_dungeon(3);
    skip_grace(&mut w, 1);
    w.player_mut(1).unwrap().view_delay = LAG_COMP_MAX_TICKS * VIEW_STEPS_PER_TICK;
    let before = w.player(1).unwrap().pos;
    for _ in 0..20 {
        step_with(&mut w, 1, Vec2::new(1.0, 0.0), 0);
    }
    let hp = w.player(1).unwrap().hp;
    let tick = w.tick;
    let mut ev = Vec::new();
    let inst = w.instance_of(1).unwrap();
    w.instances.get_mut(&inst).unwrap().spawn_bullet(tick, &enemy_shot_at(before, 30), Team::Enemy, &mut ev);
    step_with(&mut w, 1, Vec2::ZERO, 0);
    assert_eq!(w.player(1).unwrap().hp, hp, "a bullet where the player was 20 ticks ago does not hit them");
    shoot_player(&mut w, 1, 30);
    step_with(&mut w, 1, Vec2::ZERO, 0);
    assert!(w.player(1).unwrap().hp < hp, "where they are, it does");
}
