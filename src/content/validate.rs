//! `hailfire mods check`: loads mods exactly as the game would, then dry-runs every emitter
//! and every boss phase in a headless instance, and lists every problem found.

use std::path::PathBuf;
use std::sync::Arc;

use super::diag::Diagnostic;
use super::ModRoot;
use crate::sim::defs::{Behaviour, DungeonDef, EnemyDef};
use crate::sim::instance::{Instance, InstanceKind};
use crate::sim::player::{InputFrame, Player, BTN_FIRE};
use crate::sim::script::ScriptFactory;
use crate::sim::{Defs, SimEvent, Vec2};

/// Ticks each emitter and each boss phase runs in the dry run.
pub const DRY_RUN_TICKS: u32 = 300;
/// The least a dry run holds each boss phase (30 s): a phase's scripts often run a
/// timeline of several attacks before they loop, and a mistake in the third attack must
/// show here, not live. The base game's whole check takes about half a second with it.
pub const DRY_RUN_PHASE_TICKS: u32 = 1800;
/// Each boss phase in the game's own check at load, which has [`LOAD_TIME_LIMIT`] for every
/// mod together (mods' scripts run in workers, a round trip a tick): 5 s of each phase.
/// A mistake later in a phase is `mods check`'s to find; live, it stops that emitter.
pub const LOAD_PHASE_TICKS: u32 = 300;

pub struct Report {
    pub diagnostics: Vec<Diagnostic>,
    /// What the scripts wrote with `log()` during the dry run (`mods check --verbose`).
    pub logs: Vec<String>,
    pub mods: Vec<super::ModSummary>,
    pub emitters_run: usize,
    pub bosses_run: usize,
    pub dungeons_run: usize,
    /// Boss phases run, and the ticks each was held.
    pub phases_run: usize,
    pub phase_ticks: u32,
}

impl Report {
    pub fn errors(&self) -> usize {
        self.diagnostics.iter().filter(|d| d.is_error()).count()
    }
}

/// Roots for a check: the base content plus the given paths (each a mod or a folder of
/// mods); with no paths, everything the game would load.
pub fn roots_for(paths: &[PathBuf]) -> Vec<ModRoot> {
    if paths.is_empty() {
        return super::default_roots();
    }
    let mut roots = vec![ModRoot::Mod(super::content_dir())];
    for p in paths {
        roots.push(if p.join("mod.toml").is_file() { ModRoot::Mod(p.clone()) } else { ModRoot::Folder(p.clone()) });
    }
    roots
}

pub fn check(paths: &[PathBuf]) -> Report {
    check_with(paths, DRY_RUN_TICKS)
}

/// [`check`] with `ticks` of dry run for each emitter, each wave, each boss phase.
pub fn check_with(paths: &[PathBuf], ticks: u32) -> Report {
    let ticks = ticks.max(1);
    let roots = roots_for(paths);
    let mut missing = Vec::new();
    for r in &roots {
        let (ModRoot::Mod(p) | ModRoot::Folder(p)) = r;
        if !p.exists() && paths.contains(p) {
            missing.push(Diagnostic::error(None, Some(&p.to_string_lossy()), "no such file or folder"));
        }
    }
    // A folder pointed at that holds no mod: said, with what was looked for (checking
    // only the base game and saying "0 errors" would pass a mod that was never read).
    let skipped = super::loader::skipped(&roots[1..]);
    for r in &roots[1..] {
        let ModRoot::Folder(p) = r else { continue };
        if !p.is_dir() {
            continue;
        }
        let shown = super::loader::display_path(p);
        if super::loader::discover(std::slice::from_ref(r)).is_empty() {
            let mut why = format!("no mod here: looked for {shown}/mod.toml and for {shown}/*/mod.toml");
            let here = super::loader::why_not_a_mod(p);
            if here != "no mod.toml in it" {
                why.push_str(&format!("; {here}"));
            }
            for (d, w) in skipped.iter().filter(|(d, _)| d.parent() == Some(p.as_path())) {
                why.push_str(&format!("; {}: {w}", super::loader::display_path(d)));
            }
            missing.push(Diagnostic::error(None, Some(&shown), why));
        } else {
            for (d, w) in skipped.iter().filter(|(d, _)| d.parent() == Some(p.as_path())) {
                missing.push(Diagnostic::warning(None, Some(&super::loader::display_path(d)), format!("skipped: {w}")));
            }
        }
    }
    // What it is pointed at is checked, examples that are off by default included.
    let asked = if paths.is_empty() { super::Choice::default() } else { super::Choice::all_of(&roots[1..]) };
    let content = super::load_checked(&roots, true, &asked, &[]);
    let mut diagnostics = content.diagnostics.clone();
    diagnostics.extend(missing);
    // Pointed at mods: what runs their scripts (the base game's own scripts are the same
    // for everyone, and `mods check` with no path runs them too).
    // Pointed at the base game's own folder (someone editing it), everything runs.
    let base = std::fs::canonicalize(super::content_dir()).ok();
    let at_base = paths.iter().any(|p| std::fs::canonicalize(p).ok() == base && base.is_some());
    let mods_only = !paths.is_empty() && !at_base;
    let d = dry_run_trusting(&content, ticks, ticks.max(DRY_RUN_PHASE_TICKS), CHECK_TIME_LIMIT, &[], mods_only);
    // The verdict per mod is the game's: a mod with an error here is one the game refuses.
    let mut mods = content.mods.clone();
    for m in mods.iter_mut() {
        let failed = diagnostics
            .iter()
            .chain(&d.diagnostics)
            .any(|x| x.is_error() && x.mod_id.as_deref() == Some(m.id.as_str()));
        if failed {
            m.loaded = false;
        }
    }
    diagnostics.extend(d.diagnostics);
    diagnostics.extend(readability(&content.defs).into_iter().map(|r| Diagnostic::warning(None, None, r)));
    Report {
        diagnostics,
        logs: d.logs,
        mods,
        emitters_run: d.emitters_run,
        bosses_run: d.bosses_run,
        dungeons_run: d.dungeons_run,
        phases_run: d.phases_run,
        phase_ticks: d.phase_ticks,
    }
}

/// Bullets that would be hard to see on a place's floor: every bullet kind against every
/// place (the hub and each dungeon), under [`MIN_BULLET_CONTRAST`] against the floor or the
/// floor under its pattern at its brightest. One line each, saying what to change.
pub fn readability(defs: &Defs) -> Vec<String> {
    use crate::sim::defs::MIN_BULLET_CONTRAST;
    let mut places: Vec<(&str, &crate::sim::defs::ThemeDef)> = vec![("the hub", &defs.hub.theme)];
    places.extend(defs.dungeons.values().filter(|d| !d.id.starts_with("__dry_")).map(|d| (d.name.as_str(), &d.theme)));
    let mut out = Vec::new();
    for b in &defs.bullets {
        let c = crate::sim::client_defs::parse_color(&b.color);
        for (place, theme) in &places {
            let ratio = theme.worst_contrast(c);
            if ratio < MIN_BULLET_CONTRAST {
                out.push(format!(
                    "bullet '{}' ({}) reads at {ratio:.1}:1 on the floor of {place} (aim for {MIN_BULLET_CONTRAST}:1: a brighter bullet, or a darker floor `base` or `accent`)",
                    b.id, b.color
                ));
            }
        }
    }
    out
}

/// What a dry run found.
pub struct DryRun {
    pub diagnostics: Vec<Diagnostic>,
    pub logs: Vec<String>,
    pub emitters_run: usize,
    pub bosses_run: usize,
    pub dungeons_run: usize,
    pub phases_run: usize,
    pub phase_ticks: u32,
}

/// Runs every emitter, every boss phase (held in turn) and every dungeon of `content` for
/// `ticks` each in headless instances, and reports what failed, with file and line. The
/// game runs this on the mods it loads (`content::load`), so what `mods check` calls an
/// error is what the game refuses.
pub fn dry_run(content: &super::Content, ticks: u32) -> DryRun {
    dry_run_within(content, ticks, CHECK_TIME_LIMIT)
}

/// How long `mods check`'s dry run may take in all, and the game's at load.
pub const CHECK_TIME_LIMIT: std::time::Duration = std::time::Duration::from_secs(60);
pub const LOAD_TIME_LIMIT: std::time::Duration = std::time::Duration::from_secs(5);

/// The wall-clock budget of a dry run, and what was running when it ran out.
struct Budget {
    deadline: std::time::Instant,
    limit: std::time::Duration,
    ran_out_in: Option<String>,
}

/// [`dry_run`] that stops after `limit`: what was running then is an error of its mod
/// (scripts that use most of their budget every tick could otherwise make a load last).
pub fn dry_run_within(content: &super::Content, ticks: u32, limit: std::time::Duration) -> DryRun {
    dry_run_trusting(content, ticks, ticks.max(DRY_RUN_PHASE_TICKS), limit, &[], false)
}

/// [`dry_run_within`], running the mods in `trusted` in this process and every other mod
/// but the base game in script workers, as a server with that `trusted_mods` runs them.
pub fn dry_run_trusting(
    content: &super::Content,
    ticks: u32,
    phase_ticks: u32,
    limit: std::time::Duration,
    trusted: &[String],
    mods_only: bool,
) -> DryRun {
    let ticks = ticks.max(1);
    let phase_ticks = phase_ticks.max(1);
    let mut phases_run = 0;
    // `mods_only` (the game's check at load): only what runs some mod's script. What runs
    // the base game's scripts alone cannot fail because of a mod, and its tests cover it;
    // running it too would spend the load's time budget on the shipped content.
    let mods_script = |ems: &mut dyn Iterator<Item = &crate::sim::defs::EmitterRef>| -> bool {
        if !mods_only {
            return true;
        }
        for r in ems {
            if content.emitters.get(&r.id).is_none_or(|e| e.mod_id != "base") {
                return true;
            }
        }
        false
    };
    let mut budget = Budget { deadline: std::time::Instant::now() + limit, limit, ran_out_in: None };
    let label = |em: Option<&crate::sim::defs::EmitterRef>| -> String {
        em.and_then(|r| content.emitters.get(&r.id))
            .map_or("dry run".to_string(), |e| format!("mod '{}' emitter '{}' ({})", e.mod_id, e.id, e.path))
    };
    let mut diagnostics = Vec::new();
    let mut defs: Defs = (*content.defs).clone();
    // A synthetic arena for the dry run, and a dummy owner for emitters nothing uses.
    let used: Vec<String> = defs
        .enemies
        .values()
        .flat_map(|e| e.emitters.iter().map(|x| x.id.clone()))
        .chain(defs.bosses.values().flat_map(|b| b.phases.iter().flat_map(|p| p.emitters.iter().map(|x| x.id.clone()))))
        .collect();
    for (id, e) in content.emitters.iter() {
        // An emitter of a mod with a broken enemy or boss may be that one's: the broken
        // entry's error is the one to fix, not this.
        if !used.contains(id) && !content.broken_by_mod.contains_key(&e.mod_id) {
            diagnostics.push(Diagnostic::warning(
                Some(&e.mod_id),
                Some(&e.path),
                format!("emitter '{id}' is not used by any enemy or boss"),
            ));
            defs.enemies.insert(
                format!("__dry_{id}"),
                EnemyDef {
                    id: format!("__dry_{id}"),
                    name: id.clone(),
                    hp: 1_000_000,
                    radius: 16.0,
                    color: "#ffffff".into(),
                    body: Default::default(),
                    sprite: None,
                    behaviour: Behaviour::Stationary,
                    speed: 0.0,
                    range: 0.0,
                    emitters: vec![crate::sim::defs::EmitterRef::plain(id)],
                    hostile: true,
                    damage_taken_mult: 1.0,
                },
            );
        }
    }
    let boss_ids: Vec<String> = defs.bosses.keys().cloned().collect();
    for b in &boss_ids {
        defs.dungeons.insert(
            format!("__dry_{b}"),
            DungeonDef {
                id: format!("__dry_{b}"),
                name: "dry run".into(),
                arena: [960.0, 720.0],
                spawn: [480.0, 600.0],
                max_players: 4,
                waves: vec![],
                boss: b.clone(),
                boss_pos: [480.0, 160.0],
                boss_delay: 0,
                portal: None,
                difficulty: 1,
                theme: Default::default(),
            },
        );
    }
    let defs = Arc::new(defs);
    // Mods run as a server runs them: the base game here, every other mod in a worker
    // process with the server's deadline.
    let factory =
        super::host::ScriptHost::new(&defs, content.emitters.clone(), super::host::Isolation::workers(trusted));
    let mut emitters_run = 0;
    let mut errors = Vec::new();
    let mut logs = Vec::new();
    let enemy_ids: Vec<String> = defs.enemies.keys().cloned().collect();
    let arena_dungeon = boss_ids.first().map(|b| format!("__dry_{b}"));
    for e in &enemy_ids {
        let Some(dungeon) = &arena_dungeon else { break };
        if defs.enemies[e].emitters.is_empty() || !mods_script(&mut defs.enemies[e].emitters.iter()) {
            continue; // nothing to run: an enemy without emitters cannot fail at run time
        }
        let mut inst = dry_instance(&defs, &factory, dungeon);
        let mut ev = Vec::new();
        inst.spawn_enemy(&defs, e, Vec2::new(480.0, 200.0), &mut ev);
        let who = label(defs.enemies[e].emitters.first());
        let ctx = format!("enemy '{e}'");
        run(
            &mut inst,
            &defs,
            &Segment { start: 1, ticks, hold: None, ctx: &ctx, who: &who },
            &mut errors,
            &mut logs,
            &mut budget,
        );
        emitters_run += defs.enemies[e].emitters.len();
    }
    let mut bosses_run = 0;
    for b in &boss_ids {
        if !mods_script(&mut defs.bosses[b].phases.iter().flat_map(|p| p.emitters.iter())) {
            continue;
        }
        if !phases_in_order(&defs.bosses[b].phases) {
            continue; // the loader said so at its line; running it would only say it again
        }
        let dungeon = format!("__dry_{b}");
        let mut inst = dry_instance(&defs, &factory, &dungeon);
        let mut ev = Vec::new();
        inst.start_boss(&defs, 1, &mut ev);
        let mut t = 1;
        // Every phase in turn, its HP held inside the phase while the dry-run players fire
        // (as the bench does), so no phase is skipped and the boss never dies early.
        let phases = &defs.bosses[b].phases;
        for i in 0..phases.len() {
            let hold = phase_hold(phases, i);
            let who = label(phases[i].emitters.first());
            let ctx = format!("boss '{b}' phase {} \"{}\"", i + 1, phases[i].name);
            let seg = Segment { start: t, ticks: phase_ticks, hold: Some(hold), ctx: &ctx, who: &who };
            run(&mut inst, &defs, &seg, &mut errors, &mut logs, &mut budget);
            if budget.ran_out_in.is_none() && inst.boss.as_ref().map(|x| x.phase) != Some(i) {
                errors.push((format!("dry run: boss '{b}' could not be held in phase {} for the dry run", i + 1), ctx));
            }
            t += phase_ticks;
            phases_run += 1;
        }
        bosses_run += 1;
    }
    // Each real dungeon as the server will run it: its own arena, its waves' enemies
    // together (so emitters that interact, and bodies that meet the walls, are exercised),
    // then its boss through every phase with the wave enemies still about.
    let mut dungeons_run = 0;
    let real: Vec<String> = defs.dungeons.keys().filter(|d| !d.starts_with("__dry_")).cloned().collect();
    for d in &real {
        let dd = &defs.dungeons[d];
        if !defs.bosses.get(&dd.boss).is_some_and(|b| phases_in_order(&b.phases)) {
            continue; // reported by the reference check, or the phases' order by the loader
        }
        let wave_emitters = dd.waves.iter().flat_map(|w| w.spawns.iter()).filter_map(|s| defs.enemies.get(&s.enemy));
        let mut all = defs.bosses[&dd.boss]
            .phases
            .iter()
            .flat_map(|p| p.emitters.iter())
            .chain(wave_emitters.flat_map(|e| e.emitters.iter()));
        if !mods_script(&mut all) {
            continue;
        }
        let mut inst = dry_instance(&defs, &factory, d);
        let mut ev = Vec::new();
        let mut t = 1;
        let who = label(defs.bosses[&dd.boss].phases.first().and_then(|p| p.emitters.first()));
        let ctx = format!("dungeon '{d}' as it opens");
        run(
            &mut inst,
            &defs,
            &Segment { start: t, ticks, hold: None, ctx: &ctx, who: &who },
            &mut errors,
            &mut logs,
            &mut budget,
        );
        t += ticks;
        for wave in &dd.waves {
            for s in &wave.spawns {
                for k in 0..s.count.min(64) {
                    let pos = Vec2::new(s.x + k as f32 * s.spacing, s.y);
                    inst.spawn_enemy(&defs, &s.enemy, pos, &mut ev);
                }
            }
        }
        let ctx = format!("dungeon '{d}' with every wave's enemies");
        run(
            &mut inst,
            &defs,
            &Segment { start: t, ticks, hold: None, ctx: &ctx, who: &who },
            &mut errors,
            &mut logs,
            &mut budget,
        );
        t += ticks;
        if inst.boss.is_none() {
            inst.start_boss(&defs, t, &mut ev);
        }
        let phases = &defs.bosses[&dd.boss].phases;
        for i in 0..phases.len() {
            let ctx = format!("dungeon '{d}', boss '{}' phase {} \"{}\"", dd.boss, i + 1, phases[i].name);
            let seg = Segment { start: t, ticks: phase_ticks, hold: Some(phase_hold(phases, i)), ctx: &ctx, who: &who };
            run(&mut inst, &defs, &seg, &mut errors, &mut logs, &mut budget);
            t += phase_ticks;
        }
        dungeons_run += 1;
    }
    if let Some(who) = &budget.ran_out_in {
        errors.push((
            format!(
                "{who}: the dry run took longer than {} ms in all and stopped here (a script that uses most of its budget every tick?); what came after was not run",
                budget.limit.as_millis()
            ),
            String::new(),
        ));
    }
    // One message per mistake: the first place and time it happened.
    errors.sort_by(|a, b| a.0.cmp(&b.0));
    errors.dedup_by(|a, b| a.0 == b.0);
    // Missing emitters are already reported, with their line, by the reference check.
    errors.retain(|(m, _)| !m.contains("no emitter named"));
    for (msg, ctx) in errors {
        diagnostics.push(script_diagnostic(content, &msg, &ctx));
    }
    logs.dedup();
    // A script's warnings (given once per place: `fan` with both `aim` and `angle`, say).
    for l in logs.iter().filter_map(|l| l.strip_prefix("warning: ")) {
        let w = Diagnostic::warning(None, None, l.to_string());
        if !diagnostics.iter().any(|d: &Diagnostic| d.message == w.message) {
            diagnostics.push(w);
        }
    }
    DryRun { diagnostics, logs, emitters_run, bosses_run, dungeons_run, phases_run, phase_ticks }
}

/// Phases from 1.0 down, strictly: the only order the dry run can hold each one in (the
/// loader reports any other, at its line).
fn phases_in_order(phases: &[crate::sim::defs::PhaseDef]) -> bool {
    phases.first().is_some_and(|p| p.hp_threshold == 1.0)
        && phases.windows(2).all(|w| w[1].hp_threshold < w[0].hp_threshold && w[1].hp_threshold > 0.0)
}

/// The HP fraction that keeps a boss in phase `i`: halfway between its threshold and the
/// next one's (or zero).
pub fn phase_hold(phases: &[crate::sim::defs::PhaseDef], i: usize) -> f32 {
    let next = phases.get(i + 1).map_or(0.0, |p| p.hp_threshold);
    (phases[i].hp_threshold + next) / 2.0
}

fn dry_instance(defs: &Defs, factory: &super::host::ScriptHost, dungeon: &str) -> Instance {
    let mut inst = Instance::new(1, InstanceKind::Dungeon(dungeon.to_string()), defs, factory.create(7), 7);
    for id in 1..=2 {
        inst.arrive(Player::new(id, "dry-run", Vec2::ZERO));
    }
    inst
}

/// One stretch of a dry run: `ticks` from `start`, the boss held at `hold` of its HP if
/// given; `ctx` says what runs (for the messages), `who` whose script leads it.
struct Segment<'a> {
    start: u32,
    ticks: u32,
    hold: Option<f32>,
    ctx: &'a str,
    who: &'a str,
}

/// Steps an instance with two players drifting and firing through a [`Segment`]; collects
/// script errors (with where and when in the segment) and log lines. Stops when the
/// budget is spent (noting who was running).
fn run(
    inst: &mut Instance,
    defs: &Defs,
    seg: &Segment,
    errors: &mut Vec<(String, String)>,
    logs: &mut Vec<String>,
    budget: &mut Budget,
) {
    let mut events = Vec::new();
    let mut req = Vec::new();
    let (start, hold) = (seg.start, seg.hold);
    for t in start..start + seg.ticks {
        if budget.ran_out_in.is_some() {
            return;
        }
        if std::time::Instant::now() >= budget.deadline {
            budget.ran_out_in = Some(seg.who.to_string());
            return;
        }
        let when = || format!("{}, {:.1} s in", seg.ctx, (t - start) as f64 / crate::sim::TICK_RATE as f64);
        if let Some(frac) = hold {
            inst.force_boss_hp(defs, frac, &mut events);
        }
        for (k, p) in inst.players.iter_mut().enumerate() {
            let a = (t as f32 * 0.05 + k as f32 * 2.0).sin();
            let f = InputFrame { tick: t, mv: Vec2::new(a, -a * 0.5), aim: -90.0, buttons: BTN_FIRE };
            let _ = p.queue_input(t, f);
            // Dry-run players never die for good: the emitter must face someone.
            p.hp = p.hp.max(1);
            p.dead = false;
        }
        inst.step(t, defs, &mut events, &mut req);
        for e in events.drain(..) {
            match e {
                SimEvent::ScriptError { message, .. } => errors.push((message, when())),
                SimEvent::InstanceStopped { reason, .. } => errors.push((reason, when())),
                SimEvent::ScriptLog { message, .. } if logs.len() < 10_000 => logs.push(message),
                _ => {}
            }
        }
        req.clear();
    }
}

/// Turns a runtime error message into a diagnostic with the script's file and line.
fn script_diagnostic(content: &super::Content, msg: &str, ctx: &str) -> Diagnostic {
    // The runtime starts every message with "mod 'm' emitter 'e' (path)": only that prefix
    // names the culprit (a script's own error text cannot point at another mod).
    let src = content
        .emitters
        .values()
        .find(|e| msg.starts_with(&format!("mod '{}' emitter '{}' ({})", e.mod_id, e.id, e.path)));
    let at = if ctx.is_empty() { String::new() } else { format!(" ({ctx})") };
    // Values passed from TOML: name the entry that passed them as well as the Lua line.
    let from_toml = content
        .args_at
        .iter()
        .find(|(owner, _)| {
            // `owner` as a whole part of "dungeon 'd', boss 'b' phase 2 \"Name\", 3.0 s in".
            ctx.match_indices(owner.as_str()).any(|(i, _)| {
                let before = i == 0 || ctx[..i].ends_with(", ");
                let after = ctx[i + owner.len()..].chars().next();
                before && after.is_none_or(|c| c == ',' || c == ' ')
            })
        })
        .map(|(_, file_line)| {
            format!(" (its args = {{...}} are set at {file_line}: a value from there may be the one to fix)")
        })
        .unwrap_or_default();
    let Some(src) = src else { return Diagnostic::error(None, None, format!("{msg}{at}")) };
    let line = msg
        .split(&format!("{}:", src.chunk_name()))
        .nth(1)
        .map(|rest| rest.trim_start().chars().take_while(|c| c.is_ascii_digit()).collect::<String>())
        .and_then(|l| l.parse::<usize>().ok());
    Diagnostic::error(Some(&src.mod_id), Some(&src.path), format!("dry run{at}: {msg}{from_toml}"))
        .at(line.map(|l| (l, 1)))
}
