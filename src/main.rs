//! The `hailfire` program: picks a mode from the command line and runs it. Nothing else.
//!
//! On Windows, release builds use the GUI subsystem so that a double-click opens no console
//! window; when started from a terminal (`--dedicated`, `bot`, `mods check`, ...) the program
//! attaches to the parent's console so that its output still appears there.

#![cfg_attr(all(windows, not(debug_assertions)), windows_subsystem = "windows")]

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "hailfire", about = "Hailfire: a co-op bullet-hell dungeon game", disable_version_flag = true)]
struct Cli {
    /// Print the version, protocol version and build, and exit.
    #[arg(long, short = 'V')]
    version: bool,
    #[command(subcommand)]
    command: Option<Command>,
    /// Run a headless server (no window, audio or GPU).
    #[arg(long)]
    dedicated: bool,
    /// The dedicated server's settings file (default: server.toml in the configuration
    /// folder, written with every setting on first run). Flags override it.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Print the dedicated server's settings in effect (file and flags) and exit.
    #[arg(long)]
    print_config: bool,
    /// Address and port the dedicated server listens on (default [::]:24680: IPv6 and IPv4). Also
    /// read from $HAILFIRE_BIND (a container's configuration).
    #[arg(long, env = "HAILFIRE_BIND")]
    bind: Option<String>,
    /// Most players on the server at once (1..=256; default 16). Also read from
    /// $HAILFIRE_MAX_PLAYERS.
    #[arg(long, env = "HAILFIRE_MAX_PLAYERS", value_parser = clap::value_parser!(u64).range(1..=256))]
    max_players: Option<u64>,
    /// Also take friends through this relay (`hailfire relay`): the log says the join code
    /// (CODE@RELAY). For a host behind carrier-grade NAT.
    #[arg(long, value_name = "ADDR")]
    relay: Option<String>,
    /// Ask the router to forward the dedicated server's port (UPnP IGD or NAT-PMP): for a
    /// server at home. The log says the address friends on the internet use.
    #[arg(long)]
    upnp: bool,
    /// Stop the dedicated server after this many seconds.
    #[arg(long)]
    exit_after: Option<f64>,
    /// Send gameplay events every N ticks (3, the default: with each snapshot, in the same
    /// datagram; 1: every tick, bullets up to 2 ticks sooner for ~0.4 KB/s more a player).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=6))]
    event_every: Option<u32>,
    /// Threads that tick instances side by side (dedicated server; 0, the default: the
    /// machine's cores minus one, at least one).
    #[arg(long, value_parser = clap::value_parser!(u64).range(0..=256))]
    threads: Option<u64>,
    /// Reload the dedicated server's mods when one of their files is saved: fights that
    /// start after the save use the new version, running ones finish on the old. A change
    /// of looks only (colours, names, bodies, themes) reaches connected players live; a
    /// change their games rely on (an enemy, bullet kind or dungeon added or removed, a
    /// size, an arena) asks them to join again, saying what changed.
    #[arg(long)]
    watch_mods: bool,
    /// Extra mod folder for the dedicated server (a mod, or a folder of mods); repeatable.
    /// Players need not have these mods: the server sends what their game needs at join.
    #[arg(long = "mods", value_name = "DIR")]
    mods: Vec<PathBuf>,
    /// Password players must give to join the dedicated server (never logged). Also read
    /// from $HAILFIRE_PASSWORD, which keeps it out of the process list.
    #[arg(long, env = "HAILFIRE_PASSWORD", hide_env_values = true)]
    password: Option<String>,
    /// Go straight to host-and-play.
    #[arg(long)]
    host: bool,
    /// Go straight into a server: HOST[:PORT].
    #[arg(long)]
    join: Option<String>,
    /// Record the game's first session (host or join) into this replay file; play it with
    /// `hailfire replay FILE`. (The setting "Record my sessions" keeps every session in
    /// the data folder's replays/.)
    #[arg(long, value_name = "FILE")]
    record: Option<PathBuf>,
    /// Player name (saved in settings).
    #[arg(long)]
    name: Option<String>,
    /// Write a PNG of the window's frame this many seconds after start (with --capture).
    #[arg(long, requires = "capture")]
    capture_after: Option<f64>,
    /// Where --capture-after writes.
    #[arg(long)]
    capture: Option<PathBuf>,
    /// Quit the game this many seconds after start.
    #[arg(long)]
    quit_after: Option<f64>,
}

#[cfg(windows)]
fn attach_console() {
    #[link(name = "kernel32")]
    extern "system" {
        fn AttachConsole(process_id: u32) -> i32;
    }
    const ATTACH_PARENT_PROCESS: u32 = u32::MAX;
    // SAFETY: a plain Win32 call with no pointers; failure (no parent console) is fine.
    unsafe {
        AttachConsole(ATTACH_PARENT_PROCESS);
    }
}

#[cfg(not(windows))]
fn attach_console() {}

#[derive(Subcommand)]
enum Command {
    /// Run a server in this process with bot processes playing on it for a while, and
    /// print per interval: server and bot memory, tick cost, players, instances, bullets,
    /// traffic (a benchmark for memory that stays flat; see docs/PERFORMANCE.md).
    Soak {
        #[arg(long, default_value_t = 16)]
        bots: usize,
        /// How many of the bots play through the bad link.
        #[arg(long, default_value_t = 4)]
        bad: usize,
        /// How many of the bots join, fight and leave again every interval.
        #[arg(long, default_value_t = 2)]
        churn: usize,
        #[arg(long, default_value_t = 30.0)]
        minutes: f64,
        /// Seconds between report lines.
        #[arg(long, default_value_t = 60.0)]
        every: f64,
        #[arg(long, default_value = "warden_keep")]
        dungeon: String,
        /// Also write the series to this CSV file.
        #[arg(long)]
        csv: Option<PathBuf>,
    },
    /// Find servers: those on the local network (--lan), or ask one (--query) as a
    /// monitoring script would. Lists name, players, address, ping, password.
    Servers {
        /// Ask the local network (broadcast) and this machine.
        #[arg(long, conflicts_with = "query")]
        lan: bool,
        /// With --lan: ask only this machine (127.0.0.1), no broadcast.
        #[arg(long, requires = "lan")]
        local: bool,
        /// With --lan: the ports to ask (repeatable; default 24680 to 24689).
        #[arg(long = "port", requires = "lan")]
        ports: Vec<u16>,
        /// Ask one server, HOST[:PORT]; exits non-zero when it does not answer.
        #[arg(long)]
        query: Option<String>,
        /// How long to wait for answers, in milliseconds.
        #[arg(long, default_value_t = 1500)]
        wait_ms: u64,
    },
    /// Work with mods.
    Mods {
        #[command(subcommand)]
        action: ModsAction,
    },
    /// Run headless bots that join a server and play, then report how the netcode did.
    Bot {
        /// Server address, HOST[:PORT].
        #[arg(long)]
        join: String,
        #[arg(long, default_value_t = 1)]
        count: usize,
        #[arg(long, default_value_t = 30.0)]
        seconds: f64,
        /// hub: stay in the hub; dungeon: take a portal and fight; dodge: play one run to win
        /// (dodge, focus, revive, flare) and report it.
        #[arg(long, default_value = "dungeon")]
        plan: String,
        /// Which dungeon to enter with --plan dungeon or dodge.
        #[arg(long, default_value = "warden_keep")]
        dungeon: String,
        #[arg(long, default_value = "bot")]
        name: String,
        /// Disconnect after this many seconds, through the same path as the menu's
        /// "Disconnect to menu".
        #[arg(long)]
        leave_after: Option<f64>,
        /// The link, through the link conditioner: clean; bad (100 ms RTT, 20 ms jitter,
        /// 5 % loss, 1 % duplicates); far (200 ms, 30 ms, 10 %, 1 %); or explicit values
        /// RTT,JITTER,LOSS[,DUPLICATE] such as 200ms,30ms,10%. Jitter is Gaussian per packet.
        #[arg(long, default_value = "clean")]
        link: String,
        /// Join as a spectator of the player called NAME (no body, no input): follow them
        /// from place to place and report what was seen.
        #[arg(long, value_name = "NAME")]
        spectate: Option<String>,
        /// Neither read nor write the content cache (always download the server's content
        /// when it differs from the installed one).
        #[arg(long)]
        no_cache: bool,
        /// The server's password, if it has one ($HAILFIRE_PASSWORD also works).
        #[arg(long, env = "HAILFIRE_PASSWORD", hide_env_values = true)]
        password: Option<String>,
        /// Accept (and pin) the server's key even if it differs from the one pinned for
        /// this address in known_servers.
        #[arg(long)]
        accept_new_key: bool,
        /// Once joined, run this console command on the server (repeatable). The server
        /// takes it from an operator's key (ops.toml) or with --admin-password; its answers
        /// are printed, and the bot exits 1 if one was refused or not done.
        #[arg(long = "admin")]
        admin: Vec<String>,
        /// The server's admin password ($HAILFIRE_ADMIN_PASSWORD also works).
        #[arg(long, env = "HAILFIRE_ADMIN_PASSWORD", hide_env_values = true)]
        admin_password: Option<String>,
        /// Record what the bot receives into this replay file (with --count N, one file a
        /// bot: NAME-1.hfr, ...); play it with `hailfire replay FILE`.
        #[arg(long, value_name = "FILE")]
        record: Option<PathBuf>,
        /// The key pair the bot proves when it joins (servers know a player by it: bans,
        /// allowlists, admins); made there on first use. Default: this machine's player
        /// key (`player_key` in the data folder), the one the game uses.
        #[arg(long, value_name = "FILE")]
        key: Option<PathBuf>,
    },
    /// Run a relay for hosts behind carrier-grade NAT (no router can open a port): a host
    /// registers with `--relay ADDR` and gets a join code; friends join with CODE@ADDR; the
    /// relay forwards the sealed datagrams and can read none of them.
    Relay {
        /// Address and UDP port to listen on.
        #[arg(long, default_value = "[::]:24700")]
        bind: String,
        /// Friends relayed at once, in all.
        #[arg(long, default_value_t = 1024)]
        max_sessions: usize,
        /// Hosts registered at once, in all.
        #[arg(long, default_value_t = 512)]
        max_hosts: usize,
        /// Stop after this many seconds (tests).
        #[arg(long)]
        exit_after: Option<f64>,
        /// Tests only: change one byte of every Nth datagram a friend sends.
        #[arg(long, hide = true, default_value_t = 0)]
        tamper_every: u32,
        /// Do not introduce hosts and friends to each other: every game goes through the
        /// relay (more of its bandwidth), and neither side learns the other's address
        /// from it. By default they are told each other's public address and try to
        /// reach each other straight ("hole punching"), and use the relay only where
        /// that fails.
        #[arg(long)]
        no_introduce: bool,
    },
    /// Print this machine's player key (made on first use): the short fingerprint
    /// servers show next to your name, and the key in full, which a server's admin puts on
    /// its allowlist or makes an operator. Back up the file it names to keep your identity.
    Key {
        /// Another key file (as `bot --key` uses).
        #[arg(long, value_name = "FILE")]
        file: Option<PathBuf>,
    },
    /// Attach to the dedicated server running with this data folder, through its local
    /// admin socket (`console.sock`, owner-only): type console commands (help lists them),
    /// or run one with --run and exit 0 when it did what it was asked, 1 when not, 2 when
    /// no server answers.
    Console {
        /// One command to run, for scripts: `hailfire console --run "kick Bob"`.
        #[arg(long, value_name = "COMMAND")]
        run: Option<String>,
        /// The server's socket (default: the data folder's console.sock, as
        /// $HAILFIRE_DATA_DIR gives it).
        #[arg(long, value_name = "PATH")]
        socket: Option<PathBuf>,
    },
    /// Play a recorded session (`--record`): in a window with pause, seek, speed and a free
    /// camera; or check it (`--check`: re-simulate it and compare every keyframe's bullets);
    /// or render one frame offscreen (`--at SECONDS --out FRAME.png`).
    Replay {
        file: PathBuf,
        /// Re-simulate the whole replay and verify every bullet at every keyframe against
        /// what was recorded; exits non-zero at the first difference.
        #[arg(long)]
        check: bool,
        /// With --out: the moment to render, seconds from the start.
        #[arg(long, requires = "out")]
        at: Option<f64>,
        #[arg(long, requires = "at")]
        out: Option<PathBuf>,
        #[arg(long, default_value_t = 1280)]
        width: u32,
        #[arg(long, default_value_t = 720)]
        height: u32,
    },
    /// Run one boss (or enemy) of a mod in its arena against dummy players and write the
    /// last frame to a PNG, offscreen (no window needed). Exits non-zero, with the errors
    /// (file:line), when the mod does not load.
    Preview {
        /// The mod's folder.
        path: PathBuf,
        #[arg(long, conflicts_with = "enemy")]
        boss: Option<String>,
        #[arg(long)]
        enemy: Option<String>,
        /// Hold this boss phase (from 1).
        #[arg(long)]
        phase: Option<usize>,
        #[arg(long, default_value_t = 1)]
        players: usize,
        #[arg(long, default_value_t = 300)]
        ticks: u32,
        /// Write the last frame here, headless, and exit (without it: open a window that
        /// reloads whenever a file of the mod is saved).
        #[arg(long)]
        out: Option<PathBuf>,
        #[arg(long, default_value_t = 1280)]
        width: u32,
        #[arg(long, default_value_t = 720)]
        height: u32,
    },
    /// Write the game's icon into DIR: SVG, PNGs of 16 to 512 px, a Windows .ico and a
    /// macOS .icns (the packaging script uses them).
    Icon {
        #[arg(long, default_value = "icons")]
        out: PathBuf,
    },
    /// Render a scene offscreen to a PNG (no window needed), or a place's music to a WAV.
    Render {
        /// A fixed scene (bullets, boss_hud, death, hit, title, settings, summary, downed,
        /// focus, flare, ships, spectate, stopped) or a place: hub, dungeon:ID (on arrival),
        /// boss:ID:PHASE (PHASE from 1).
        #[arg(long, required_unless_present = "music", conflicts_with = "music")]
        scene: Option<String>,
        /// Write a place's music instead: a dungeon id, "hub" or "title".
        #[arg(long)]
        music: Option<String>,
        /// With --music: how long, in seconds (1..=600).
        #[arg(long, default_value_t = 30.0, requires = "music")]
        seconds: f32,
        /// With --music: the boss phase layers to add (0 the place's music alone).
        #[arg(long, default_value_t = 0, requires = "music")]
        phase: u8,
        #[arg(long)]
        out: PathBuf,
        #[arg(long, default_value_t = 1280)]
        width: u32,
        #[arg(long, default_value_t = 720)]
        height: u32,
    },
    /// Measure simulation cost per tick (boss fight, 10,000 and 100,000 bullets against a reference loop) and boss survival.
    Bench {
        /// Shorter runs (for CI smoke).
        #[arg(long)]
        quick: bool,
        /// Also measure a four-player boss fight's network traffic over real ENet on
        /// loopback (runs in real time).
        #[arg(long)]
        net: bool,
        /// Also measure frame preparation and drawing with 10,000 bullets.
        #[arg(long)]
        render: bool,
        /// Only measure joining (bytes and time, base content and a large mod, cold and
        /// cached) over ENet on loopback.
        #[arg(long)]
        join: bool,
        /// Only the stress arena, at these live bullet counts (comma-separated, e.g.
        /// 100,1000,10000,100000), each against the reference loop.
        #[arg(long, value_delimiter = ',', conflicts_with_all = ["instances", "net", "render", "join"],
              value_parser = clap::value_parser!(u32).range(100..=120_000))]
        bullets: Vec<u32>,
        /// Only N concurrent Warden fights of four scripted players in one world: cost per
        /// tick and per instance, the Lua share, memory per instance, and the scaling from
        /// one thread to --threads.
        #[arg(long, conflicts_with_all = ["net", "render", "join"], value_parser = clap::value_parser!(u32).range(1..=20_000))]
        instances: Option<u32>,
        /// Threads that tick instances (with --instances; default: every core).
        #[arg(long, requires = "instances", value_parser = clap::value_parser!(u64).range(1..=256))]
        threads: Option<u64>,
        /// With --bullets: the scalar bullet step only (what CPUs without AVX2 run).
        #[arg(long, requires = "bullets")]
        scalar: bool,
        /// Only the network under attack: a server on 127.0.0.1 with two honest bots
        /// fighting, under a garbage flood and each exhaustion attack from other loopback
        /// addresses; prints what the bots saw and what the server dropped and why.
        #[arg(long, conflicts_with_all = ["instances", "net", "render", "join", "bullets"])]
        flood: bool,
        /// With --flood: seconds each attack runs.
        #[arg(long, requires = "flood", default_value_t = 10.0)]
        seconds: f64,
        /// With --flood: datagrams a second of the garbage flood.
        #[arg(long, requires = "flood", default_value_t = 16_000)]
        rate: u32,
        /// The lag compensation bench: a bot on a far link (200 ms, 30 ms, 10 %) shoots at a
        /// target circling at 180 px/s, aiming through its replica; of the shots that hit on
        /// its screen, the share that hit on the server, with and without compensation.
        #[arg(long, conflicts_with_all = ["instances", "net", "render", "join", "bullets", "flood"])]
        lag_comp: bool,
        /// With --lag-comp: one link instead of the far and the bad one (`far`, `bad`,
        /// `clean`, or `RTT,JITTER,LOSS` such as `300ms,40ms,5%`).
        #[arg(long, requires = "lag_comp")]
        link: Option<String>,
        /// The balance bench: each dungeon played by bots (one drifting; one, two and four
        /// dodging), in process, deterministic per seed: clear rates, survival, boss phases.
        #[arg(long, conflicts_with_all = ["instances", "net", "render", "join", "bullets", "flood"])]
        balance: bool,
        /// With --balance: one dungeon only.
        #[arg(long, requires = "balance")]
        dungeon: Option<String>,
        /// With --balance: runs of each setup (seeds 1..=N; default 5, 2 with --quick).
        #[arg(long, requires = "balance", value_parser = clap::value_parser!(u32).range(1..=100))]
        runs: Option<u32>,
    },
}

#[derive(Subcommand)]
enum ModsAction {
    /// Validate mods: manifests, TOML schemas, references, dependencies, Lua, and a dry run
    /// of every emitter and boss. With no PATH: everything the game would load.
    Check {
        paths: Vec<PathBuf>,
        /// Ticks of dry run for each emitter and each dungeon's waves; each boss phase runs
        /// for this or 30 s (1800 ticks), whichever is longer.
        #[arg(long, default_value_t = hailfire::content::validate::DRY_RUN_TICKS)]
        ticks: u32,
        /// Also show what the scripts wrote with log() during the dry run.
        #[arg(long)]
        verbose: bool,
    },
    /// List what the game would load.
    List,
    /// Create a working mod to start from in DIR/ID (default: the current folder): a
    /// bullet kind, an enemy, a two-phase boss, a dungeon, a README and editor files.
    New {
        id: String,
        #[arg(long, default_value = ".")]
        dir: PathBuf,
    },
    /// Write (or refresh) the editor files into a mod folder (default: the current one):
    /// LuaLS definitions of the emitter API and a .luarc.json for lua-language-server.
    Stubs {
        #[arg(default_value = ".")]
        dir: PathBuf,
    },
}

fn main() -> ExitCode {
    // A script worker (started by a server for untrusted mods): nothing else of the program.
    if std::env::args_os().nth(1).is_some_and(|a| a == hailfire::content::worker::WORKER_ARG) {
        hailfire::content::worker::child::main();
    }
    attach_console();
    hailfire::crash::install();
    let cli = Cli::parse();
    if cli.version {
        println!("{}", hailfire::crash::version_line());
        return ExitCode::SUCCESS;
    }
    if cli.dedicated {
        use hailfire::server::config::{default_path, ServerFile};
        let path = cli.config.clone().unwrap_or_else(default_path);
        let file = match ServerFile::load_or_create(&path, true) {
            Ok(f) => f,
            Err(e) => {
                eprintln!("hailfire: {e}");
                return ExitCode::from(2);
            }
        };
        // Flags win over the file.
        let mut eff = file;
        if let Some(b) = cli.bind.clone() {
            eff.bind = b;
        }
        if let Some(n) = cli.max_players {
            eff.max_players = n as usize;
        }
        if let Some(n) = cli.event_every {
            eff.event_every = n;
        }
        if let Some(n) = cli.threads {
            eff.threads = n as usize;
        }
        eff.mods.extend(cli.mods.iter().cloned());
        if let Some(p) = cli.password.clone().filter(|p| !p.is_empty()) {
            eff.password = p;
        }
        eff.watch_mods |= cli.watch_mods;
        eff.upnp |= cli.upnp;
        if let Some(r) = cli.relay.clone() {
            eff.relay = r;
        }
        if cli.print_config {
            println!("# {} with the command line's flags", path.display());
            print!("{}", eff.effective_text());
            return ExitCode::SUCCESS;
        }
        if std::env::var_os("RUST_LOG").is_none() {
            std::env::set_var("RUST_LOG", &eff.log_level);
        }
        hailfire::logging::init(Some("server"));
        tracing::info!(config = %path.display(), name = %eff.name, motd = %eff.motd, "server settings");
        let bind = match hailfire::net::resolve(&eff.bind) {
            Ok(b) => b,
            Err(e) => {
                eprintln!(
                    "hailfire: bind = {}: {e} (an address and a port 1..65535, like [::]:24680 or 0.0.0.0:24680)",
                    eff.bind
                );
                return ExitCode::from(2);
            }
        };
        let opts = hailfire::server::dedicated::DedicatedOptions {
            bind,
            max_players: eff.max_players,
            max_spectators: eff.max_spectators,
            metrics_bind: eff.metrics_bind.parse().ok(),
            exit_after: cli.exit_after,
            events_every_ticks: eff.event_every,
            mods: eff.mods.clone(),
            password: Some(eff.password.clone()).filter(|p| !p.is_empty()),
            watch_mods: eff.watch_mods,
            name: eff.name.clone(),
            motd: eff.motd.clone(),
            admin_password: Some(eff.admin_password.clone()).filter(|p| !p.is_empty()),
            // A relative ban list lives beside the settings file.
            ban_list: Some(path.parent().map_or_else(|| eff.ban_list.clone(), |d| d.join(&eff.ban_list))),
            status_every: (eff.status_every_s > 0).then(|| std::time::Duration::from_secs(eff.status_every_s)),
            threads: eff.sim_threads(),
            max_sessions_per_address: eff.max_sessions_per_address,
            trusted_mods: eff.trusted_mods.clone(),
            allowlist: eff.allowlist,
            lan_announce: eff.lan_announce,
            upnp: eff.upnp,
            relay: if eff.relay.is_empty() {
                None
            } else {
                match hailfire::net::relay::RelayLink::resolve(&eff.relay, bind) {
                    Ok(l) => Some(hailfire::net::relay::RelayLink { hide: eff.relay_hide_address, ..l }),
                    Err(e) => {
                        eprintln!("hailfire: relay = {:?}: {e}", eff.relay);
                        return ExitCode::from(2);
                    }
                }
            },
        };
        return match hailfire::server::dedicated::run(opts) {
            Ok(hailfire::server::dedicated::Ended::Stopped) => ExitCode::SUCCESS,
            // `restart`: the systemd unit starts the server again on this status.
            Ok(hailfire::server::dedicated::Ended::Restart) => {
                ExitCode::from(hailfire::server::console::RESTART_EXIT_CODE)
            }
            Err(e) => {
                eprintln!("hailfire: {e:#}");
                ExitCode::FAILURE
            }
        };
    }
    match cli.command {
        Some(Command::Bot {
            join,
            count,
            seconds,
            plan,
            dungeon,
            name,
            leave_after,
            link,
            no_cache,
            password,
            accept_new_key,
            admin,
            admin_password,
            spectate,
            record,
            key,
        }) => {
            hailfire::logging::init(None);
            let identity = match &key {
                Some(path) => hailfire::net::secure::Identity::load_or_create(path)
                    .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", path.display()))),
                None => hailfire::net::secure::Identity::player(),
            };
            let identity = match identity {
                Ok(id) => id,
                Err(e) => {
                    eprintln!("hailfire bot: cannot read or make the player key: {e}");
                    return ExitCode::from(2);
                }
            };
            let security = hailfire::net::secure::ClientSecurity {
                known: hailfire::net::secure::KnownServers::default_path()
                    .map(|path| hailfire::net::secure::KnownServers { path }),
                accept_new_key,
                accept_key: None,
                password,
                pin_as: Some(join.clone()),
                identity: Some(identity),
                relay_code: hailfire::net::relay::parse_join(&join).map(|(c, _)| c),
            };
            // Without a password the server goes by the bot's key (an operator's, in ops.toml).
            let admin = (!admin.is_empty()).then(|| (admin_password.unwrap_or_default(), admin));
            bot(
                join,
                count,
                seconds,
                plan,
                dungeon,
                name,
                leave_after,
                link,
                no_cache,
                security,
                admin,
                spectate,
                record,
            )
        }
        Some(Command::Mods { action: ModsAction::Check { paths, ticks, verbose } }) => {
            mods_check(&paths, ticks, verbose)
        }
        Some(Command::Mods { action: ModsAction::New { id, dir } }) => {
            match hailfire::content::scaffold::new_mod(&dir, &id) {
                Ok(path) => {
                    println!("created the mod '{id}' in {}", path.display());
                    println!("next: hailfire mods check {}", path.display());
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("hailfire mods new: {e}");
                    ExitCode::from(2)
                }
            }
        }
        Some(Command::Mods { action: ModsAction::Stubs { dir } }) => {
            match hailfire::content::scaffold::write_stubs(&dir) {
                Ok(files) => {
                    files.iter().for_each(|f| println!("wrote {}", f.display()));
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("hailfire mods stubs: {e}");
                    ExitCode::from(2)
                }
            }
        }
        Some(Command::Mods { action: ModsAction::List }) => {
            let c = hailfire::content::Content::load_default();
            println!("base content: {}", hailfire::content::content_dir().display());
            if let Some(u) = hailfire::content::user_mods_dir() {
                println!("user mods:    {}", u.display());
            }
            let mut examples = Vec::new();
            for m in &c.mods {
                if !m.enabled && m.off_by_default {
                    examples.push(format!("{} ({})", m.id, m.dir));
                    continue;
                }
                let state = match (m.loaded, m.enabled) {
                    (true, _) => "loaded",
                    (false, false) => "off",
                    (false, true) => "REFUSED",
                };
                println!("{:<16} {:<10} {:<8} {}", m.id, m.version, state, m.dir);
            }
            if !examples.is_empty() {
                println!("off until asked for (the Mods menu, or --mods on a server): {}", examples.join(", "));
            }
            for (d, why) in hailfire::content::loader::skipped(&hailfire::content::default_roots()) {
                println!("skipped {}: {why}", d.display());
            }
            for d in &c.diagnostics {
                println!("{d}");
            }
            ExitCode::SUCCESS
        }
        Some(Command::Bench { balance: true, dungeon, runs, quick, .. }) => {
            let content = hailfire::content::Content::load_default();
            if let Some(d) = dungeon.as_deref().filter(|d| !content.defs.dungeons.contains_key(*d)) {
                let known: Vec<&str> = content.defs.dungeons.keys().map(|k| k.as_str()).collect();
                eprintln!("hailfire bench: no dungeon '{d}' (dungeons: {})", known.join(", "));
                return ExitCode::FAILURE;
            }
            let runs = runs.unwrap_or(if quick { 2 } else { 5 });
            println!("balance bench: {runs} run(s) of each setup, seeds 1..={runs}");
            let t = std::time::Instant::now();
            for row in hailfire::bench::balance_bench(&content, dungeon.as_deref(), runs, quick) {
                println!("{row}");
            }
            println!("({:.0} s)", t.elapsed().as_secs_f64());
            ExitCode::SUCCESS
        }
        Some(Command::Bench { lag_comp: true, quick, link, .. }) => {
            let content = hailfire::content::Content::load_default();
            let secs = if quick { 20.0 } else { 120.0 };
            let links = match link.as_deref().map(hailfire::net::LinkProfile::parse) {
                None => vec![hailfire::net::LinkProfile::FAR, hailfire::net::LinkProfile::BAD],
                Some(Ok(l)) => vec![l],
                Some(Err(e)) => {
                    eprintln!("hailfire bench: --link: {e}");
                    return ExitCode::FAILURE;
                }
            };
            for link in links {
                for compensate in [false, true] {
                    println!("{}", hailfire::bench::lag_comp_bench(&content, link, compensate, secs, 1));
                }
            }
            ExitCode::SUCCESS
        }
        Some(Command::Bench { flood: true, seconds, rate, .. }) => {
            if !(1.0..=600.0).contains(&seconds) || !(1..=1_000_000).contains(&rate) {
                eprintln!("hailfire bench --flood: --seconds must be 1..=600 and --rate 1..=1000000");
                return ExitCode::from(2);
            }
            let content = hailfire::content::Content::load_default();
            let mut ok = true;
            for attack in hailfire::server::flood::all(rate) {
                match hailfire::server::flood::run(&content, attack, seconds) {
                    Ok(r) => println!("{r}\n"),
                    Err(e) => {
                        eprintln!("{}: {e:#}", attack.name());
                        ok = false;
                    }
                }
            }
            if ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Some(Command::Bench { join: true, .. }) => match hailfire::bench::join_bench() {
            Ok(rs) => {
                rs.iter().for_each(|r| println!("{r}"));
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("join bench: {e:#}");
                ExitCode::FAILURE
            }
        },
        Some(Command::Bench { quick, bullets, scalar, .. }) if !bullets.is_empty() => {
            let content = hailfire::content::Content::load_default();
            hailfire::sim::bullets::set_simd(!scalar);
            for s in hailfire::bench::scaling(&content, &bullets, 0, quick) {
                println!("{s}");
            }
            ExitCode::SUCCESS
        }
        Some(Command::Bench { quick, instances: Some(n), threads, .. }) => {
            let content = hailfire::content::Content::load_default();
            let threads =
                threads.map_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()), |t| t as usize);
            let here = hailfire::bench::instances(&content, n, threads, quick, false);
            here.iter().for_each(|r| println!("{r}"));
            // The same fights with every script in a worker process (as untrusted mods run),
            // at most WORKER_FIGHTS of them (each is a process), against as many in process.
            let wn = n.min(hailfire::bench::WORKER_FIGHTS);
            let there = hailfire::bench::instances(&content, wn, threads, quick, true);
            there.iter().for_each(|r| println!("{r}"));
            let same =
                if wn == n { here.clone() } else { hailfire::bench::instances(&content, wn, threads, quick, false) };
            for (a, b) in same.iter().zip(&there) {
                let per = (b.ms_per_tick - a.ms_per_tick) * 1000.0 / a.instances.max(1) as f64;
                println!(
                    "worker path, {} fights, {} thread{}: {per:+.1} µs per instance-tick over in process",
                    a.instances,
                    a.threads,
                    if a.threads == 1 { "" } else { "s" }
                );
            }
            ExitCode::SUCCESS
        }
        Some(Command::Bench { quick, net, render, .. }) => bench(quick, net, render),
        #[cfg(feature = "desktop")]
        Some(Command::Render { music: Some(id), seconds, phase, out, .. }) => render_music(&id, seconds, phase, &out),
        #[cfg(feature = "desktop")]
        Some(Command::Render { scene, out, width, height, .. }) => {
            render(scene.as_deref().unwrap_or_default(), &out, (width, height))
        }
        #[cfg(feature = "desktop")]
        Some(Command::Icon { out }) => match hailfire::app::icon::write_all(&out) {
            Ok(files) => {
                files.iter().for_each(|f| println!("wrote {}", f.display()));
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("hailfire icon: {e:#}");
                ExitCode::FAILURE
            }
        },
        #[cfg(not(feature = "desktop"))]
        Some(Command::Icon { .. }) => no_desktop("icon"),
        #[cfg(feature = "desktop")]
        Some(Command::Preview { path, boss, enemy, phase, players, ticks, out, width, height }) => {
            let window = hailfire::app::preview_window::PreviewWindowOptions {
                capture: cli.capture_after.zip(cli.capture.clone()),
                quit_after: cli.quit_after,
            };
            preview(&path, boss, enemy, phase, players, ticks, out, (width, height), window)
        }
        #[cfg(not(feature = "desktop"))]
        Some(Command::Render { .. }) => no_desktop("render"),
        #[cfg(not(feature = "desktop"))]
        Some(Command::Preview { .. }) => no_desktop("preview"),
        Some(Command::Relay { bind, max_sessions, max_hosts, exit_after, tamper_every, no_introduce }) => {
            hailfire::logging::init(Some("relay"));
            let addr = match hailfire::net::resolve(&bind) {
                Ok(a) => a,
                Err(e) => {
                    eprintln!("hailfire relay: --bind {bind}: {e}");
                    return ExitCode::from(2);
                }
            };
            let limits = hailfire::net::relay::Limits {
                max_sessions,
                max_hosts,
                tamper_every,
                introduce: !no_introduce,
                ..Default::default()
            };
            let mut relay = match hailfire::net::relay::Relay::bind(addr, limits) {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("hailfire relay: cannot listen on {addr}: {e}");
                    return ExitCode::from(2);
                }
            };
            let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
            let s = stop.clone();
            let _ = ctrlc::set_handler(move || s.store(true, std::sync::atomic::Ordering::Relaxed));
            if let Some(secs) = exit_after {
                let s = stop.clone();
                std::thread::spawn(move || {
                    std::thread::sleep(std::time::Duration::from_secs_f64(secs));
                    s.store(true, std::sync::atomic::Ordering::Relaxed);
                });
            }
            tracing::info!(addr = %relay.local_addr().map_or(addr, |a| a), "relay listening");
            relay.run(&stop);
            tracing::info!(forwarded = relay.stats.forwarded, refused = relay.stats.refused, "relay stopped");
            ExitCode::SUCCESS
        }
        Some(Command::Key { file }) => {
            use hailfire::net::secure::Identity;
            let path = match file.or_else(Identity::player_path) {
                Some(p) => p,
                None => {
                    eprintln!("hailfire key: no data folder for the player's key");
                    return ExitCode::from(2);
                }
            };
            match Identity::load_or_create(&path) {
                Ok(id) => {
                    println!("player key:  {}", hailfire::server::keylist::short(&id.public));
                    println!("in full:     {}", hailfire::net::secure::to_hex(&id.public));
                    println!("fingerprint: {}", id.fingerprint());
                    println!("file:        {} (back it up: without it, servers see a new player)", path.display());
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("hailfire key: {}: {e}", path.display());
                    ExitCode::from(2)
                }
            }
        }
        #[cfg(unix)]
        Some(Command::Console { run, socket }) => {
            let Some(path) = socket.or_else(hailfire::server::admin_socket::default_path) else {
                eprintln!("hailfire console: no data folder: give the socket with --socket PATH");
                return ExitCode::from(2);
            };
            ExitCode::from(hailfire::server::admin_socket::console(&path, run.as_deref()))
        }
        #[cfg(not(unix))]
        Some(Command::Console { .. }) => {
            eprintln!(
                "hailfire console: the admin socket needs a Unix system (use the server's own console or bot --admin)"
            );
            ExitCode::from(2)
        }
        Some(Command::Replay { file, check, at, out, width, height }) => replay(
            &file,
            check,
            at.zip(out),
            (width, height),
            cli.capture_after.zip(cli.capture.clone()),
            cli.quit_after,
        ),
        Some(Command::Servers { lan, local, ports, query, wait_ms }) => servers(lan, local, ports, query, wait_ms),
        Some(Command::Soak { bots, bad, churn, minutes, every, dungeon, csv }) => {
            if std::env::var_os("RUST_LOG").is_none() {
                std::env::set_var("RUST_LOG", "warn");
            }
            hailfire::logging::init(None);
            let opts = hailfire::server::soak::SoakOptions { bots, bad, churn, minutes, every_s: every, dungeon, csv };
            match hailfire::server::soak::run(&opts) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("hailfire soak: {e:#}");
                    ExitCode::FAILURE
                }
            }
        }
        #[cfg(not(feature = "desktop"))]
        None => no_desktop("the game"),
        #[cfg(feature = "desktop")]
        None => {
            hailfire::crash::enable_dialogs();
            hailfire::logging::init(Some("game"));
            let opts = hailfire::app::AppOptions {
                host: cli.host,
                join: cli.join,
                name: cli.name,
                capture: cli.capture_after.zip(cli.capture),
                quit_after: cli.quit_after,
                record: cli.record,
            };
            match hailfire::app::run(opts) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    hailfire::crash::fatal(&format!("{e:#}"));
                    ExitCode::FAILURE
                }
            }
        }
    }
}

fn servers(lan: bool, local: bool, ports: Vec<u16>, query: Option<String>, wait_ms: u64) -> ExitCode {
    use hailfire::net::discovery;
    let wait = std::time::Duration::from_millis(wait_ms.max(1));
    if let Some(q) = query {
        let addr = match hailfire::net::resolve(&q) {
            Ok(a) => a,
            Err(e) => {
                eprintln!("hailfire servers: --query {q}: {e}");
                return ExitCode::from(2);
            }
        };
        return match discovery::query_one(addr, wait) {
            Ok(f) => {
                println!("{}", discovery::describe(&f));
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("hailfire servers: {e}");
                ExitCode::FAILURE
            }
        };
    }
    if !lan {
        eprintln!("hailfire servers: say --lan (servers on the local network) or --query HOST[:PORT]");
        return ExitCode::from(2);
    }
    let ports = if ports.is_empty() { discovery::default_ports() } else { ports };
    match discovery::lan(&ports, !local, wait) {
        Ok(found) if found.is_empty() => {
            println!(
                "no server answered ({} on ports {:?})",
                if local { "this machine" } else { "the local network" },
                ports
            );
            ExitCode::SUCCESS
        }
        Ok(found) => {
            for f in &found {
                println!("{}", discovery::describe(f));
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("hailfire servers: {e}");
            ExitCode::FAILURE
        }
    }
}

#[allow(clippy::too_many_arguments, reason = "one argument per command-line flag")]
fn bot(
    join: String,
    count: usize,
    seconds: f64,
    plan: String,
    dungeon: String,
    name: String,
    leave_after: Option<f64>,
    link: String,
    no_cache: bool,
    security: hailfire::net::secure::ClientSecurity,
    admin: Option<(String, Vec<String>)>,
    spectate: Option<String>,
    record: Option<PathBuf>,
) -> ExitCode {
    use hailfire::client::bot::{BotOptions, Plan};
    // `CODE@RELAY`: the relay's address (the code is in `security`).
    let target = hailfire::net::relay::parse_join(&join).map_or(join.clone(), |(_, r)| r);
    let join = match hailfire::net::resolve(&target) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("hailfire bot: --join {join}: {e}");
            return ExitCode::from(2);
        }
    };
    let plan = match plan.as_str() {
        // A spectator plays nothing: it follows its player.
        _ if spectate.is_some() => Plan::Hub,
        "hub" => Plan::Hub,
        "dungeon" => Plan::Dungeon,
        "dodge" => Plan::Dodge,
        other => {
            eprintln!("hailfire bot: --plan must be hub, dungeon or dodge, not '{other}'");
            return ExitCode::from(2);
        }
    };
    let link = match hailfire::net::LinkProfile::parse(&link) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("hailfire bot: --link {e}");
            return ExitCode::from(2);
        }
    };
    // Bots offer the content installed here, if it loads; either way they play whatever
    // the server sends, and cache it like the game does.
    let content = hailfire::content::Content::load_default();
    let installed = content.base_loaded().then(|| hailfire::protocol::content::ClientContent::of(&content));
    let cache = if no_cache {
        None
    } else {
        hailfire::protocol::content::ContentCache::default_dir().map(hailfire::protocol::content::ContentCache::new)
    };
    let opts = BotOptions {
        join,
        count,
        seconds,
        plan,
        dungeon,
        name,
        leave_after,
        link,
        installed,
        cache,
        security,
        admin,
        spectate,
        record,
    };
    let reports = hailfire::client::bot::run(&opts);
    let mut ok = reports.len() == count;
    for r in &reports {
        println!("{}", r.line);
        if let Some(p) = &r.problem {
            println!("bot {}: FAILED: {p}", r.name);
            ok = false;
        }
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// This build has no window, GPU or audio (built with `--no-default-features`).
#[cfg(not(feature = "desktop"))]
fn no_desktop(what: &str) -> ExitCode {
    eprintln!(
        "hailfire: {what} needs the desktop build; this is the server build (no window, GPU or audio): it runs --dedicated, bot, mods and bench"
    );
    ExitCode::from(2)
}

#[cfg(feature = "desktop")]
fn render(scene: &str, out: &std::path::Path, size: (u32, u32)) -> ExitCode {
    let content = hailfire::content::Content::load_default();
    let run = || -> anyhow::Result<()> {
        let gpu = hailfire::app::render::Gpu::headless()?;
        let rgba = hailfire::app::scenes::render_scene(&gpu, &content, scene, size)?;
        hailfire::app::render::write_png(out, size, &rgba)?;
        println!("wrote {} ({}x{}, {})", out.display(), size.0, size.1, gpu.adapter_name());
        Ok(())
    };
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hailfire render: {e:#}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(feature = "desktop")]
#[allow(clippy::too_many_arguments)]
fn preview(
    path: &std::path::Path,
    boss: Option<String>,
    enemy: Option<String>,
    phase: Option<usize>,
    players: usize,
    ticks: u32,
    out: Option<PathBuf>,
    size: (u32, u32),
    window: hailfire::app::preview_window::PreviewWindowOptions,
) -> ExitCode {
    use hailfire::content::preview::{Preview, PreviewHost, Target};
    let target = match (boss, enemy) {
        (Some(b), _) => Target::Boss(b),
        (None, Some(e)) => Target::Enemy(e),
        (None, None) => {
            eprintln!("hailfire preview: say what to show: --boss ID or --enemy ID");
            return ExitCode::from(2);
        }
    };
    if phase == Some(0) {
        eprintln!("hailfire preview: --phase counts from 1");
        return ExitCode::from(2);
    }
    let Some(out) = out else {
        hailfire::logging::init(Some("preview"));
        let host = match PreviewHost::start(path, target, phase.map(|p| p - 1), players.clamp(1, 16)) {
            Ok(h) => h,
            Err(errors) => {
                for e in errors {
                    eprintln!("{e}");
                }
                eprintln!("hailfire preview: {} does not load (see above)", path.display());
                return ExitCode::FAILURE;
            }
        };
        return match hailfire::app::preview_window::run(host, window) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("hailfire preview: {e:#}");
                ExitCode::FAILURE
            }
        };
    };
    let mut p = match Preview::load(path, target, phase.map(|p| p - 1), players.clamp(1, 16)) {
        Ok(p) => p,
        Err(errors) => {
            for e in errors {
                eprintln!("{e}");
            }
            eprintln!("hailfire preview: {} does not load (see above)", path.display());
            return ExitCode::FAILURE;
        }
    };
    let start = std::time::Instant::now();
    for _ in 0..ticks {
        p.step();
    }
    let sim_ms = start.elapsed().as_secs_f64() * 1000.0;
    let run = || -> anyhow::Result<String> {
        let gpu = hailfire::app::render::Gpu::headless()?;
        let rgba = hailfire::app::preview::render(&gpu, &p, size)?;
        hailfire::app::render::write_png(&out, size, &rgba)?;
        Ok(gpu.adapter_name())
    };
    match run() {
        Ok(adapter) => {
            println!(
                "wrote {} ({}x{}, {adapter}) after {ticks} ticks ({sim_ms:.0} ms): {} bullets, {} enemies{}",
                out.display(),
                size.0,
                size.1,
                p.inst.bullets.len(),
                p.inst.enemies.len(),
                p.inst.boss.as_ref().map_or(String::new(), |b| format!(", boss in phase {}", b.phase + 1))
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("hailfire preview: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn mods_check(paths: &[PathBuf], ticks: u32, verbose: bool) -> ExitCode {
    let report = hailfire::content::validate::check_with(paths, ticks);
    if verbose {
        for l in &report.logs {
            println!("log: {l}");
        }
    }
    for d in &report.diagnostics {
        println!("{d}");
    }
    for m in &report.mods {
        let state = match (m.loaded, m.enabled) {
            (true, _) => "ok",
            (false, false) => "off",
            (false, true) => "refused",
        };
        println!("mod {:<16} {:<8} {:<8} {}", m.id, m.version, state, m.dir);
    }
    let errors = report.errors();
    println!(
        "checked {} mod(s), dry-ran {} emitter(s) for {ticks} ticks each, {} boss(es) through {} phase(s) for {:.0} s each, and {} dungeon(s) (waves, then every boss phase): {} error(s)",
        report.mods.len(),
        report.emitters_run,
        report.bosses_run,
        report.phases_run,
        report.phase_ticks as f64 / hailfire::sim::TICK_RATE as f64,
        report.dungeons_run,
        errors
    );
    if errors > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn bench(quick: bool, net: bool, render: bool) -> ExitCode {
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
    for s in hailfire::bench::scaling(&content, &[10_000, 100_000], 0, quick) {
        println!("(b) stress arena {s}");
    }
    let seeds = if quick { 2 } else { 8 };
    let still = hailfire::bench::mean_survival(&content, false, seeds);
    let drift = hailfire::bench::mean_survival(&content, true, seeds);
    println!("Warden opening phase, mean of {seeds} seeds: stationary player survives {still:.1} s, drifting player {drift:.1} s");
    let secs = if quick { 10.0 } else { 60.0 };
    match hailfire::bench::net_fight(&content, secs, false, 1) {
        Ok(r) => println!("{r}"),
        Err(e) => {
            eprintln!("net bench: {e:#}");
            return ExitCode::FAILURE;
        }
    }
    if render {
        #[cfg(feature = "desktop")]
        println!("{}", hailfire::bench::render_bench(&content, if quick { 20 } else { 120 }));
        #[cfg(not(feature = "desktop"))]
        println!("render bench: this is the server build (no GPU code)");
    }
    if net {
        match hailfire::bench::pattern_costs(&content, if quick { 5.0 } else { 20.0 }) {
            Ok(v) => v.iter().for_each(|p| println!("{p}")),
            Err(e) => {
                eprintln!("pattern bench: {e:#}");
                return ExitCode::FAILURE;
            }
        }
        for every in [1, 3] {
            match hailfire::bench::net_fight(&content, secs.min(30.0), true, every) {
                Ok(r) => println!("{r}"),
                Err(e) => {
                    eprintln!("net bench over ENet: {e:#}");
                    return ExitCode::FAILURE;
                }
            }
        }
    }
    ExitCode::SUCCESS
}

#[cfg(feature = "desktop")]
fn render_music(id: &str, seconds: f32, phase: u8, out: &std::path::Path) -> ExitCode {
    let content = hailfire::content::Content::load_default();
    let defs = &content.defs;
    let music = match id {
        "title" => hailfire::app::music::title_music(),
        "hub" => defs.hub.theme.music.clone(),
        d => match defs.dungeons.get(d) {
            Some(g) => g.theme.music.clone(),
            None => {
                let known: Vec<&str> = defs.dungeons.keys().map(|k| k.as_str()).collect();
                eprintln!("hailfire render: no music '{d}' (title, hub, or a dungeon: {})", known.join(", "));
                return ExitCode::FAILURE;
            }
        },
    };
    if !(1.0..=600.0).contains(&seconds) {
        eprintln!("hailfire render: --seconds must be 1..=600, not {seconds}");
        return ExitCode::FAILURE;
    }
    let rate = hailfire::app::audio::RATE;
    let layers = hailfire::app::music::layers_at(phase);
    let samples = hailfire::app::music::render(&music, layers, seconds, rate);
    match std::fs::write(out, hailfire::app::music::wav(&samples, rate)) {
        Ok(()) => {
            println!(
                "wrote {} ({seconds} s, {layers} layers, {} bpm, {} {:?}, loudness {:.3} RMS)",
                out.display(),
                music.tempo,
                music.key,
                music.mode,
                hailfire::app::music::rms(&samples)
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("hailfire render: {}: {e}", out.display());
            ExitCode::FAILURE
        }
    }
}

/// `hailfire replay`: check, render a frame, or watch.
fn replay(
    file: &std::path::Path,
    check: bool,
    frame: Option<(f64, PathBuf)>,
    size: (u32, u32),
    capture: Option<(f64, PathBuf)>,
    quit_after: Option<f64>,
) -> ExitCode {
    use hailfire::client::replay::{Player, Replay, MAX_FILE};
    // Larger than any replay: refused before it is read.
    if let Ok(m) = std::fs::metadata(file) {
        if m.len() > MAX_FILE as u64 {
            eprintln!(
                "hailfire replay: {}: {}",
                file.display(),
                hailfire::client::replay::ReplayError::TooLarge(m.len() as usize)
            );
            return ExitCode::FAILURE;
        }
    }
    let bytes = match std::fs::read(file) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("hailfire replay: cannot read {}: {e}", file.display());
            return ExitCode::FAILURE;
        }
    };
    let replay = match Replay::decode(&bytes) {
        Ok(r) => std::sync::Arc::new(r),
        Err(e) => {
            eprintln!("hailfire replay: {}: {e}", file.display());
            return ExitCode::FAILURE;
        }
    };
    println!(
        "{}: {:.1} s recorded by {}{}, {} keyframes, content {}",
        file.display(),
        replay.seconds(),
        replay.name,
        if replay.spectator { " (watching)" } else { "" },
        replay.keyframes.len(),
        replay.content.digest.short()
    );
    if check {
        let t = std::time::Instant::now();
        return match Player::new(replay.clone()).check() {
            Ok((n, bullets)) => {
                println!(
                    "check: the re-simulation matches the recording bit for bit at all {n} keyframes ({bullets} bullets at the last), in {:.2} s",
                    t.elapsed().as_secs_f64()
                );
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("check: FAILED: {e}");
                ExitCode::FAILURE
            }
        };
    }
    #[cfg(feature = "desktop")]
    {
        if let Some((at, out)) = frame {
            let gpu = match hailfire::app::render::Gpu::headless() {
                Ok(g) => g,
                Err(e) => {
                    eprintln!("hailfire replay: {e:#}");
                    return ExitCode::FAILURE;
                }
            };
            return match hailfire::app::replay_window::render_at(&gpu, replay, at, size)
                .and_then(|(rgba, what)| hailfire::app::render::write_png(&out, size, &rgba).map(|()| what))
            {
                Ok(what) => {
                    println!("wrote {} ({}x{}) at {at:.1} s: {what}", out.display(), size.0, size.1);
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("hailfire replay: {e:#}");
                    ExitCode::FAILURE
                }
            };
        }
        let title = file.file_name().map_or_else(|| file.display().to_string(), |n| n.to_string_lossy().into_owned());
        let opts = hailfire::app::replay_window::ReplayWindowOptions { capture, quit_after };
        match hailfire::app::replay_window::run(replay, title, opts) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("hailfire replay: {e:#}");
                ExitCode::FAILURE
            }
        }
    }
    #[cfg(not(feature = "desktop"))]
    {
        let _ = (frame, size, capture, quit_after);
        eprintln!(
            "hailfire replay: this is the server build: only --check works here (the desktop build draws replays)"
        );
        ExitCode::from(2)
    }
}
