//! The `hailfire` program: picks a mode from the command line and runs it. Nothing else.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "hailfire", version, about = "Hailfire: a co-op bullet-hell dungeon game")]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Work with mods.
    Mods {
        #[command(subcommand)]
        action: ModsAction,
    },
    /// Measure simulation cost per tick (boss fight, 10,000-bullet stress) and boss survival.
    Bench {
        /// Shorter runs (for CI smoke).
        #[arg(long)]
        quick: bool,
    },
}

#[derive(Subcommand)]
enum ModsAction {
    /// Validate mods: manifests, TOML schemas, references, dependencies, Lua, and a dry run
    /// of every emitter and boss. With no PATH: everything the game would load.
    Check { paths: Vec<PathBuf> },
    /// List what the game would load.
    List,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Some(Command::Mods { action: ModsAction::Check { paths } }) => mods_check(&paths),
        Some(Command::Mods { action: ModsAction::List }) => {
            let c = hailfire::content::Content::load_default();
            println!("base content: {}", hailfire::content::content_dir().display());
            if let Some(u) = hailfire::content::user_mods_dir() {
                println!("user mods:    {}", u.display());
            }
            for m in &c.mods {
                println!("{:<16} {:<10} {:<8} {}", m.id, m.version, if m.loaded { "loaded" } else { "REFUSED" }, m.dir);
            }
            for d in &c.diagnostics {
                println!("{d}");
            }
            ExitCode::SUCCESS
        }
        Some(Command::Bench { quick }) => bench(quick),
        None => {
            eprintln!("hailfire: the desktop client is not built yet; try `hailfire mods check` or `hailfire bench`");
            ExitCode::from(2)
        }
    }
}

fn mods_check(paths: &[PathBuf]) -> ExitCode {
    let report = hailfire::content::validate::check(paths);
    for d in &report.diagnostics {
        println!("{d}");
    }
    for m in &report.mods {
        println!("mod {:<16} {:<8} {:<8} {}", m.id, m.version, if m.loaded { "ok" } else { "refused" }, m.dir);
    }
    let errors = report.errors();
    println!(
        "checked {} mod(s), dry-ran {} emitter(s) and {} boss(es): {} error(s)",
        report.mods.len(),
        report.emitters_run,
        report.bosses_run,
        errors
    );
    if errors > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn bench(quick: bool) -> ExitCode {
    let content = hailfire::content::Content::load_default();
    if !content.base_loaded() {
        for d in content.errors() {
            eprintln!("{d}");
        }
        return ExitCode::FAILURE;
    }
    println!("hailfire bench ({} build)", if cfg!(debug_assertions) { "debug" } else { "release" });
    for r in hailfire::bench::run_all(&content, quick) {
        println!("{r}");
    }
    let seeds = if quick { 2 } else { 8 };
    let still = hailfire::bench::mean_survival(&content, false, seeds);
    let drift = hailfire::bench::mean_survival(&content, true, seeds);
    println!("Warden opening phase, mean of {seeds} seeds: stationary player survives {still:.1} s, drifting player {drift:.1} s");
    ExitCode::SUCCESS
}
