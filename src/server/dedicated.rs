//! `hailfire --dedicated`: the server alone, headless (no window, audio or GPU is ever
//! touched), on a fixed 60 Hz clock that sleeps between ticks, logging to stdout and to a
//! file, and stopping cleanly on SIGINT/SIGTERM or after `--exit-after`.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use tracing::{info, warn};

use super::console::Ops;
use super::{Server, ServerConfig};
use crate::content::Content;
use crate::net::secure::{Identity, ServerSecurity};
use crate::net::{EnetTransport, Transport};
use crate::sim::TICK_RATE;

#[derive(Clone, Debug)]
pub struct DedicatedOptions {
    pub bind: SocketAddr,
    pub max_players: usize,
    pub max_spectators: usize,
    /// Where Prometheus metrics are served (None: nowhere).
    pub metrics_bind: Option<std::net::SocketAddr>,
    pub exit_after: Option<f64>,
    pub events_every_ticks: u32,
    /// Extra mod folders (`--mods`, repeatable), each a mod or a folder of mods, loaded on
    /// top of the base content, `mods/` and the user's mods folder.
    pub mods: Vec<std::path::PathBuf>,
    /// Players must give this password to join (None: anyone may).
    pub password: Option<String>,
    /// Reload mods when their files are saved (`--watch-mods`).
    pub watch_mods: bool,
    /// Shown to players and in status answers.
    pub name: String,
    pub motd: String,
    /// Players sending this with an admin command may run it (None: nobody).
    pub admin_password: Option<String>,
    /// Where bans are kept (None: in memory only). The allowlist, the operators, the
    /// names seen and the records live beside it.
    pub ban_list: Option<std::path::PathBuf>,
    /// Admit only the players on the allowlist.
    pub allowlist: bool,
    /// Announce the server on the local network once a second.
    pub lan_announce: bool,
    /// Ask the router to forward the port (UPnP or NAT-PMP), renewed while it runs and
    /// removed when it stops.
    pub upnp: bool,
    /// A relay friends may also join through.
    pub relay: Option<crate::net::relay::RelayLink>,
    /// How often the status line is logged (None: never).
    pub status_every: Option<Duration>,
    /// Threads that tick instances.
    pub threads: usize,
    /// Connections one IP address may hold.
    pub max_sessions_per_address: usize,
    /// Mods whose scripts run in the server's process (`trusted_mods`).
    pub trusted_mods: Vec<String>,
}

/// Reloads the server's mods when a file under them is saved (`--watch-mods`).
pub struct ModReloader {
    /// Watches the mod folders (None: reloads only when asked, by the console's `reload`).
    pub watcher: Option<crate::content::preview::ModWatcher>,
    /// A reload was asked for and has not started yet.
    requested: bool,
    /// The extra mod folders the server was started with.
    pub mods: Vec<std::path::PathBuf>,
    /// Mods turned off or on (host-and-play's Mods menu).
    pub choice: crate::content::Choice,
    /// Mods whose scripts run in the server's process (`trusted_mods`).
    pub trusted: Vec<String>,
    /// Whether players may be asked to rejoin (a dedicated server: yes; host-and-play: no,
    /// the host would be one of them).
    pub allow_rejoin: bool,
    /// A load running on its own thread (the server keeps ticking meanwhile).
    loading: Option<std::sync::mpsc::Receiver<Content>>,
}

impl ModReloader {
    /// Reloads only when asked (`request`), watching nothing.
    pub fn on_request(mods: &[std::path::PathBuf]) -> ModReloader {
        ModReloader {
            watcher: None,
            requested: false,
            mods: mods.to_vec(),
            choice: Default::default(),
            trusted: Vec::new(),
            allow_rejoin: true,
            loading: None,
        }
    }

    /// Reload at the next poll (the console's `reload`).
    pub fn request(&mut self) {
        self.requested = true;
    }

    /// Watches the folders the server loads mods from.
    pub fn new(mods: &[std::path::PathBuf]) -> Result<ModReloader, String> {
        let mut dirs: Vec<std::path::PathBuf> = mods.to_vec();
        for r in crate::content::default_roots() {
            let (crate::content::ModRoot::Mod(p) | crate::content::ModRoot::Folder(p)) = r;
            if p.is_dir() {
                dirs.push(p);
            }
        }
        let watcher = crate::content::preview::ModWatcher::new(&dirs, Duration::from_millis(300))?;
        Ok(ModReloader { watcher: Some(watcher), ..Self::on_request(mods) })
    }

    /// Leaves these mods out of every reload, and never asks players to rejoin (the host
    /// of host-and-play is one of them).
    pub fn for_host(mut self, choice: crate::content::Choice) -> Self {
        self.choice = choice;
        self.allow_rejoin = false;
        self
    }

    fn poll<T: Transport>(&mut self, server: &mut Server<T>) {
        // Loading (and its dry run) happens off the tick thread: fights never stall on it.
        let saved = self.watcher.as_mut().is_some_and(|w| w.poll());
        if (saved || self.requested) && self.loading.is_none() {
            self.requested = false;
            if let Some(w) = self.watcher.as_mut() {
                w.changed_at = None;
            }
            let (tx, rx) = std::sync::mpsc::channel();
            let (mods, choice, trusted) = (self.mods.clone(), self.choice.clone(), self.trusted.clone());
            let spawned = std::thread::Builder::new().name("hailfire-reload".into()).spawn(move || {
                let _ = tx.send(Content::load_chosen(&mods, &choice, &trusted));
            });
            match spawned {
                Ok(_) => self.loading = Some(rx),
                Err(e) => warn!("cannot reload the mods: {e}"),
            }
        }
        let Some(rx) = &self.loading else { return };
        let content = match rx.try_recv() {
            Ok(c) => c,
            Err(std::sync::mpsc::TryRecvError::Empty) => return,
            Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                self.loading = None;
                return;
            }
        };
        self.loading = None;
        match server.reload(&content, self.allow_rejoin) {
            Ok(o) => info!(
                players_updated_live = o.players_updated_live,
                players_asked_to_rejoin = o.players_asked_to_rejoin,
                client_content_changed = o.client_content_changed,
                running_on_old = server.world.instances_on_old_content(),
                "mods reloaded: instances opened from now on use them; running fights finish on the old ones"
            ),
            Err(errors) => {
                for e in &errors {
                    warn!("{e}");
                }
                warn!(
                    errors = errors.len(),
                    "a saved mod does not load: the running content stays (fix it and save again)"
                );
            }
        }
    }
}

/// The fixed-rate loop shared by the dedicated and the listen server.
pub fn run_loop<T: Transport>(
    server: &mut Server<T>,
    stop: &AtomicBool,
    exit_after: Option<f64>,
    mut reload: Option<&mut ModReloader>,
    ops: &mut Ops,
) {
    let period = Duration::from_secs_f64(1.0 / TICK_RATE as f64);
    let start = Instant::now();
    let mut next = start;
    let mut behind_logged = false;
    while !stop.load(Ordering::Relaxed) && !ops.stop_requested {
        if exit_after.is_some_and(|s| start.elapsed().as_secs_f64() >= s) {
            info!("--exit-after reached");
            break;
        }
        let t0 = Instant::now();
        server.tick();
        let cost = t0.elapsed();
        if let Some(r) = reload.as_deref_mut() {
            r.poll(server);
        }
        ops.after_tick(server, cost, reload.as_deref_mut());
        next += period;
        let now = Instant::now();
        if next > now {
            // Reads the socket while it waits: a flood between ticks is drained, not left
            // to overflow the receive buffer.
            server.net.wait(next);
            behind_logged = false;
        } else if now - next > period * 30 {
            // Far behind (the machine stalled): skip ahead instead of racing to catch up.
            if !behind_logged {
                warn!(behind_ms = (now - next).as_millis() as u64, "server fell behind; skipping ahead");
                behind_logged = true;
            }
            next = now;
        }
    }
}

/// How a dedicated server ended: stopped, or asked to be started again (`restart`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    Stopped,
    Restart,
}

pub fn run(opts: DedicatedOptions) -> anyhow::Result<Ended> {
    for m in &opts.mods {
        if !m.is_dir() {
            bail!("--mods {}: no such folder", m.display());
        }
    }
    let content = Content::load_configured_trusting(&opts.mods, &[], &opts.trusted_mods);
    for d in &content.diagnostics {
        warn!("{d}");
    }
    if !content.base_loaded() {
        bail!("the base game content did not load (see the errors above); run `hailfire mods check`");
    }
    if let Some(e) = &content.client_refusal {
        bail!("players' games would refuse this server's content: {e}; run `hailfire mods check`");
    }
    for m in content.mods.iter().filter(|m| m.loaded) {
        info!(id = %m.id, version = %m.version, dir = %m.dir, "mod loaded");
    }
    let key_path = Identity::default_path().context("no data directory for the server's key")?;
    let identity = Identity::load_or_create(&key_path)
        .with_context(|| format!("reading or creating the server's key at {}", key_path.display()))?;
    info!(fingerprint = %identity.fingerprint(), key = %key_path.display(), "server identity (players pin it on first join)");
    println!("server key fingerprint: {}", identity.fingerprint());
    if opts.password.is_some() {
        info!("joining needs the server password");
    }
    let board: crate::net::secure::StatusBoard =
        std::sync::Arc::new(std::sync::Mutex::new(crate::protocol::status::ServerStatus {
            protocol: crate::protocol::PROTOCOL_VERSION,
            max_players: opts.max_players.min(u16::MAX as usize) as u16,
            port: opts.bind.port(),
            password: opts.password.is_some(),
            key: identity.public[..8].try_into().expect("8 bytes"),
            name: opts.name.clone(),
            motd: opts.motd.clone(),
            ..Default::default()
        }));
    let key8: [u8; 8] = identity.public[..8].try_into().expect("8 bytes");
    let security = ServerSecurity {
        password: opts.password.clone(),
        per_address: opts.max_sessions_per_address,
        status: Some(board.clone()),
        relay: opts.relay,
        ..ServerSecurity::new(identity)
    };
    let net =
        EnetTransport::listen_secure(opts.bind, super::peer_limit(opts.max_players) + opts.max_spectators, security)
            .map_err(|e| {
                let why = match e.kind() {
                    std::io::ErrorKind::AddrInUse => "the port is in use (another server on this machine?)".to_string(),
                    std::io::ErrorKind::AddrNotAvailable => {
                        "this machine has no such address (use [::] or 0.0.0.0 for every interface)".to_string()
                    }
                    std::io::ErrorKind::PermissionDenied => {
                        "permission denied (ports below 1024 need privileges)".to_string()
                    }
                    _ => e.to_string(),
                };
                anyhow::anyhow!("cannot listen on {}: {why}", opts.bind)
            })?;
    let addr = net.local_addr()?;
    if let Ok(mut b) = board.lock() {
        b.port = addr.port();
    }
    let config = ServerConfig {
        max_players: opts.max_players,
        max_spectators: opts.max_spectators,
        events_every_ticks: opts.events_every_ticks,
        name: opts.name.clone(),
        motd: opts.motd.clone(),
        admin_password: opts.admin_password.clone(),
        allowlist: opts.allowlist,
        threads: opts.threads,
        trusted_mods: opts.trusted_mods.clone(),
        ..Default::default()
    };
    let mut server = Server::new(&content, net, config);
    if let Some(path) = &opts.ban_list {
        server.bans = super::bans::BanList::load(path).map_err(anyhow::Error::msg)?;
        info!(bans = server.bans.bans.len(), file = %path.display(), "ban list");
        // Records live beside the bans.
        let at = path.parent().map_or_else(|| "records.toml".into(), |d| d.join("records.toml"));
        let (records, err) = super::records::Records::load(&at);
        if let Some(e) = err {
            warn!("{e}");
        }
        info!(dungeons = records.dungeons.len(), file = %at.display(), "records");
        server.records = records;
        use super::keylist::{KeyList, ALLOWLIST_HEADER, KNOWN_HEADER, OPS_HEADER};
        let beside = |name: &str| path.parent().map_or_else(|| name.into(), |d| d.join(name));
        server.allowlist = KeyList::load(&beside("allowlist.toml"), ALLOWLIST_HEADER).map_err(anyhow::Error::msg)?;
        server.ops = KeyList::load(&beside("ops.toml"), OPS_HEADER).map_err(anyhow::Error::msg)?;
        // The names seen are the server's own memory: a damaged file is set aside, not fatal.
        let known = beside("known_players.toml");
        server.known = KeyList::load(&known, KNOWN_HEADER).unwrap_or_else(|e| {
            warn!("{e}; starting a new list (the old one is kept as known_players.toml.bad)");
            let _ = std::fs::rename(&known, known.with_extension("toml.bad"));
            let mut fresh = KeyList::in_memory(KNOWN_HEADER);
            fresh.path = Some(known.clone());
            fresh
        });
        info!(
            allowlist = %if opts.allowlist { "on" } else { "off" },
            allowed = server.allowlist.entries.len(),
            operators = server.ops.entries.len(),
            names_seen = server.known.entries.len(),
            "players by key"
        );
    }
    info!(
        digest = %server.content.digest.short(),
        bytes = server.content.encoded.len(),
        "client-side content: sent to players whose game differs"
    );
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    ctrlc::set_handler(move || s.store(true, Ordering::Relaxed)).context("installing the signal handler")?;
    info!(%addr, max_players = opts.max_players, sim_threads = opts.threads, "dedicated server listening");
    println!("hailfire dedicated server listening on {addr}");
    let mut reloader = if opts.watch_mods {
        match ModReloader::new(&opts.mods) {
            Ok(r) => {
                info!("watching the mod folders: a saved mod reloads for the fights that start after it");
                r
            }
            Err(e) => {
                warn!("--watch-mods: {e}");
                ModReloader::on_request(&opts.mods)
            }
        }
    } else {
        ModReloader::on_request(&opts.mods)
    };
    reloader.trusted = opts.trusted_mods.clone();
    if !opts.trusted_mods.is_empty() {
        info!(mods = ?opts.trusted_mods, "trusted mods: their scripts run in this process");
    }
    println!("type `help` for the console's commands");
    // Held until the server stops: dropping it removes the mapping.
    let _mapper = opts.upnp.then(|| {
        info!(port = addr.port(), "asking the router to forward the port (upnp)");
        crate::net::portmap::PortMapper::start(addr.port())
    });
    let announcer = opts.lan_announce.then(|| {
        let a = crate::net::announce::Announcer::new(opts.bind, addr.port(), key8);
        info!(to = ?a.targets(), "announcing this server on the local network once a second (lan_announce)");
        a
    });
    let mut ops = Ops::new(opts.status_every).with_stdin().with_board(board).with_announcer(announcer);
    // The local admin channel (`hailfire console`), owner-only, in the data folder.
    #[cfg(unix)]
    if let Some(path) = super::admin_socket::default_path() {
        match ops.listen_socket(&path) {
            Ok(()) => info!(socket = %path.display(), "admin socket: attach with `hailfire console`"),
            Err(e) => warn!("admin socket: {e}"),
        }
    }
    if let Some(dir) = crate::crash::data_dir() {
        let identity = Identity::generate()?;
        server.own_keys.push(identity.public);
        ops = ops.with_recording(super::recorder::RecordSetup {
            addr: super::recorder::local_addr_for(addr),
            password: opts.password.clone(),
            content: server.content.clone(),
            dir: dir.join("replays"),
            identity,
        });
    }
    if let Some(bind) = opts.metrics_bind {
        let (metrics, addr) = super::metrics::Metrics::serve(bind)?;
        info!(url = %format!("http://{addr}/metrics"), "serving Prometheus metrics");
        ops = ops.with_metrics(metrics);
    }
    run_loop(&mut server, &stop, opts.exit_after, Some(&mut reloader), &mut ops);
    if ops.recordings.running() > 0 {
        info!(recordings = ops.recordings.running(), "stopping: writing the recordings");
    }
    ops.recordings.finish();
    info!(players = server.connected_players(), tick = server.world.tick, "stopping: disconnecting everyone");
    server.shutdown();
    std::thread::sleep(Duration::from_millis(100));
    server.shutdown();
    if ops.restart_requested {
        info!(exit_status = crate::server::console::RESTART_EXIT_CODE, "server stopped cleanly, to be started again");
        return Ok(Ended::Restart);
    }
    info!("server stopped cleanly");
    Ok(Ended::Stopped)
}
