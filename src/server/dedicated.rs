//! `hailfire --dedicated`: the server alone, headless (no window, audio or GPU is ever
//! touched), on a fixed 60 Hz clock that sleeps between ticks, logging to stdout and to a
//! file, and stopping cleanly on SIGINT/SIGTERM or after `--exit-after`.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use tracing::{info, warn};

use super::{Server, ServerConfig};
use crate::content::Content;
use crate::net::secure::{Identity, ServerSecurity};
use crate::net::{EnetTransport, Transport};
use crate::sim::TICK_RATE;

#[derive(Clone, Debug)]
pub struct DedicatedOptions {
    pub bind: SocketAddr,
    pub max_players: usize,
    pub exit_after: Option<f64>,
    pub events_every_ticks: u32,
    /// Extra mod folders (`--mods`, repeatable), each a mod or a folder of mods, loaded on
    /// top of the base content, `mods/` and the user's mods folder.
    pub mods: Vec<std::path::PathBuf>,
    /// Players must give this password to join (None: anyone may).
    pub password: Option<String>,
}

/// The fixed-rate loop shared by the dedicated and the listen server.
pub fn run_loop<T: Transport>(server: &mut Server<T>, stop: &AtomicBool, exit_after: Option<f64>) {
    let period = Duration::from_secs_f64(1.0 / TICK_RATE as f64);
    let start = Instant::now();
    let mut next = start;
    let mut behind_logged = false;
    while !stop.load(Ordering::Relaxed) {
        if exit_after.is_some_and(|s| start.elapsed().as_secs_f64() >= s) {
            info!("--exit-after reached");
            break;
        }
        server.tick();
        next += period;
        let now = Instant::now();
        if next > now {
            std::thread::sleep(next - now);
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

pub fn run(opts: DedicatedOptions) -> anyhow::Result<()> {
    for m in &opts.mods {
        if !m.is_dir() {
            bail!("--mods {}: no such folder", m.display());
        }
    }
    let content = Content::load_configured(&opts.mods, &[]);
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
    let security = ServerSecurity { identity, password: opts.password.clone(), max_sessions: 0 };
    let net = EnetTransport::listen_secure(opts.bind, opts.max_players, security)
        .with_context(|| format!("cannot listen on {} (is another server using the port?)", opts.bind))?;
    let addr = net.local_addr()?;
    let config = ServerConfig {
        max_players: opts.max_players,
        events_every_ticks: opts.events_every_ticks,
        ..Default::default()
    };
    let mut server = Server::new(&content, net, config);
    info!(
        digest = %server.content.digest.short(),
        bytes = server.content.encoded.len(),
        "client-side content: sent to players whose game differs"
    );
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    ctrlc::set_handler(move || s.store(true, Ordering::Relaxed)).context("installing the signal handler")?;
    info!(%addr, max_players = opts.max_players, "dedicated server listening");
    println!("hailfire dedicated server listening on {addr}");
    run_loop(&mut server, &stop, opts.exit_after);
    info!(players = server.connected_players(), tick = server.world.tick, "stopping: disconnecting everyone");
    server.shutdown();
    std::thread::sleep(Duration::from_millis(100));
    server.shutdown();
    info!("server stopped cleanly");
    Ok(())
}
