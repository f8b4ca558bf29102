//! Host and play: the server runs on its own thread in this process, listening on ENet for
//! friends and on an in-process pipe for the host, who is just another peer.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;

use anyhow::Context;

use super::dedicated::run_loop;
use super::{Server, ServerConfig};
use crate::content::Content;
use crate::net::secure::{Identity, ServerSecurity};
use crate::net::{EnetTransport, LocalListener, Multi, Transport};

pub struct ListenServer {
    /// Where friends connect.
    pub addr: SocketAddr,
    /// How the host's own client connects.
    pub local: LocalListener,
    /// The fingerprint of the key friends' games pin for this host.
    pub fingerprint: String,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    commands: mpsc::Sender<String>,
    /// The host's pause (the menu asks; the server says whether it paused).
    pub pause: super::PauseSwitch,
    /// Asks the router to forward the port (None: not asked for, or hosting on loopback).
    pub mapper: Option<crate::net::portmap::PortMapper>,
    /// The relay friends may also join through, and the code it gave.
    pub relay: Option<crate::net::relay::RelayLink>,
}

impl ListenServer {
    pub fn start(content: Content, bind: SocketAddr, config: ServerConfig) -> anyhow::Result<ListenServer> {
        Self::start_watching(content, bind, config, None)
    }

    /// [`start`](Self::start), reloading saved mods (with `watch`'s choice of mods)
    /// for the fights that start after a save, as `--dedicated --watch-mods` does.
    pub fn start_watching(
        content: Content,
        bind: SocketAddr,
        config: ServerConfig,
        watch: Option<crate::content::Choice>,
    ) -> anyhow::Result<ListenServer> {
        // Friends' games would refuse content that fails their validator: say so now.
        if let Some(e) = &content.client_refusal {
            anyhow::bail!("players' games would refuse the mods you host: {e}");
        }
        let local = LocalListener::new();
        let stop = Arc::new(AtomicBool::new(false));
        // The same identity as a dedicated server on this machine: friends pin it once.
        let identity = match Identity::default_path().map(|p| Identity::load_or_create(&p)) {
            Some(Ok(id)) => id,
            _ => Identity::generate().context("making a key pair for this host")?,
        };
        let fingerprint = identity.fingerprint();
        // Friends on the LAN find the host through the status query (the Join menu's list).
        let board: crate::net::secure::StatusBoard =
            Arc::new(std::sync::Mutex::new(crate::protocol::status::ServerStatus {
                protocol: crate::protocol::PROTOCOL_VERSION,
                max_players: config.max_players.min(u16::MAX as usize) as u16,
                port: bind.port(),
                password: false,
                key: identity.public[..8].try_into().expect("8 bytes"),
                name: config.name.clone(),
                motd: config.motd.clone(),
                ..Default::default()
            }));
        let key8: [u8; 8] = identity.public[..8].try_into().expect("8 bytes");
        let config_announce = config.lan_announce;
        let relay = config.relay.clone();
        let security =
            ServerSecurity { status: Some(board.clone()), relay: relay.clone(), ..ServerSecurity::new(identity) };
        let (tx, rx) = mpsc::channel();
        let (commands, cmd_rx) = mpsc::channel();
        let ban_list = config.ban_list.clone();
        let (l2, s2) = (local.clone(), stop.clone());
        let pause = super::PauseSwitch::default();
        let p2 = pause.clone();
        let thread = std::thread::Builder::new()
            .name("hailfire-server".into())
            .spawn(move || {
                // The ENet host is not Send: it is made on the thread that runs it.
                let enet = match EnetTransport::listen_secure(
                    bind,
                    super::peer_limit(config.max_players) + config.max_spectators,
                    security,
                ) {
                    Ok(e) => e,
                    Err(e) => {
                        let _ = tx.send(Err(e));
                        return;
                    }
                };
                let local_addr = enet.local_addr();
                let port = local_addr.as_ref().map(|a| a.port()).ok();
                if let (Ok(a), Ok(mut b)) = (&local_addr, board.lock()) {
                    b.port = a.port();
                }
                let _ = tx.send(local_addr);
                let parts: Vec<Box<dyn Transport>> = vec![Box::new(enet), Box::new(l2.server())];
                let mut server = Server::new(&content, Multi::new(parts), config);
                server.pause = Some(p2);
                if let Some(path) = &ban_list {
                    match super::bans::BanList::load(path) {
                        Ok(b) => server.bans = b,
                        Err(e) => tracing::warn!("the ban list is unreadable, so nobody is banned: {e}"),
                    }
                }
                let mut reloader = watch.and_then(|choice| match super::dedicated::ModReloader::new(&[]) {
                    Ok(r) => Some(r.for_host(choice)),
                    Err(e) => {
                        tracing::warn!("watching mods: {e}");
                        None
                    }
                });
                let announcer = match (port, config_announce) {
                    (Some(p), true) => Some(crate::net::announce::Announcer::new(bind, p, key8)),
                    _ => None,
                };
                let mut ops = super::console::Ops::new(Some(std::time::Duration::from_secs(300)))
                    .with_commands(cmd_rx)
                    .with_board(board)
                    .with_announcer(announcer);
                run_loop(&mut server, &s2, None, reloader.as_mut(), &mut ops);
                server.shutdown();
            })
            .context("starting the server thread")?;
        let addr =
            rx.recv().context("the server thread ended early")?.with_context(|| format!("cannot listen on {bind}"))?;
        Ok(ListenServer { addr, local, fingerprint, stop, thread: Some(thread), commands, pause, mapper: None, relay })
    }

    /// Asks the server to pause (the host's menu is open) or to go on.
    pub fn ask_pause(&self, on: bool) {
        self.pause.asked.store(on, Ordering::Relaxed);
    }

    /// Whether the world is paused now (only while the host plays alone, and never once
    /// the server's thread has ended).
    pub fn paused(&self) -> bool {
        self.pause.paused.load(Ordering::Relaxed) && self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }

    /// Runs a console command on the server (the host's kick and ban from the roster).
    pub fn command(&self, line: &str) {
        let _ = self.commands.send(line.to_string());
    }

    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        // The router forgets the port with the game.
        self.mapper = None;
    }

    /// Asks the router in front of this machine to forward the port (not for a host on
    /// loopback, whom nobody outside could reach anyway).
    pub fn map_port(&mut self) {
        if !self.addr.ip().to_canonical().is_loopback() && self.mapper.is_none() {
            self.mapper = Some(crate::net::portmap::PortMapper::start(self.addr.port()));
        }
    }
}

impl Drop for ListenServer {
    fn drop(&mut self) {
        self.stop();
    }
}
