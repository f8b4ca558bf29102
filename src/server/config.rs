//! `server.toml`: a dedicated server's settings in one file. Written with every setting,
//! its default and a comment on first run; command-line flags override it; an unknown or
//! mistyped key is an error with file, line and column (the mod files' quality).

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::content::diag::line_col;

/// Every setting of a dedicated server.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct ServerFile {
    pub name: String,
    pub motd: String,
    pub bind: String,
    pub max_players: usize,
    /// Spectators at once (0..=64): peers without a body that watch a player.
    pub max_spectators: usize,
    pub password: String,
    pub event_every: u32,
    pub mods: Vec<PathBuf>,
    /// Mod ids whose scripts run in the server's process (every other mod but the base
    /// game runs in a worker process with a deadline).
    pub trusted_mods: Vec<String>,
    pub watch_mods: bool,
    pub log_level: String,
    pub admin_password: String,
    pub ban_list: PathBuf,
    pub status_every_s: u64,
    /// Threads that tick instances side by side (0: the machine's cores minus one, at
    /// least one).
    pub threads: usize,
    /// Connections one IP address may hold at once (players behind one router).
    pub max_sessions_per_address: usize,
    /// Where Prometheus metrics are served over HTTP (empty: nowhere).
    pub metrics_bind: String,
    /// Admit only the players on `allowlist.toml` (beside the ban list).
    pub allowlist: bool,
    /// Announce the server on the local network (17 bytes a second).
    pub lan_announce: bool,
    /// Ask the router to forward the port (UPnP IGD or NAT-PMP).
    pub upnp: bool,
    /// A relay friends may also join through (`hailfire relay`; empty: none).
    pub relay: String,
    /// Keep this server's address from friends who join by code: the relay introduces
    /// nobody to it, and every such game goes through the relay.
    pub relay_hide_address: bool,
}

impl Default for ServerFile {
    fn default() -> Self {
        ServerFile {
            name: "A Hailfire server".into(),
            motd: String::new(),
            bind: format!("[::]:{}", crate::protocol::DEFAULT_PORT),
            max_players: 16,
            max_spectators: 8,
            password: String::new(),
            event_every: crate::protocol::SNAPSHOT_EVERY_TICKS,
            mods: Vec::new(),
            trusted_mods: Vec::new(),
            watch_mods: false,
            log_level: "info".into(),
            admin_password: String::new(),
            ban_list: PathBuf::from("bans.toml"),
            status_every_s: 300,
            threads: 0,
            max_sessions_per_address: crate::net::secure::DEFAULT_SESSIONS_PER_ADDRESS,
            metrics_bind: String::new(),
            allowlist: false,
            lan_announce: true,
            upnp: false,
            relay: String::new(),
            relay_hide_address: false,
        }
    }
}

/// Most players a server may take (what the transport is set up for).
pub const MAX_PLAYERS: usize = 256;
/// Most spectators a server may take.
pub const MAX_SPECTATORS: usize = 64;

/// The file written on first run: every setting with its default and what it does.
pub fn default_text() -> String {
    let d = ServerFile::default();
    format!(
        "# Hailfire dedicated server settings. Command-line flags override what is here.\n\
         # `hailfire --dedicated --print-config` shows the settings in effect.\n\n\
         # The server's name and message of the day: players see them when they join, and\n\
         # LAN and status queries answer with the name.\n\
         name = \"{}\"\n\
         motd = \"\"\n\n\
         # Address and UDP port to listen on. [::] is every interface, IPv6 and IPv4 (a\n\
         # machine without IPv6 falls back to IPv4); 0.0.0.0 is every IPv4 interface only.\n\
         bind = \"{}\"\n\n\
         # Most players at once (1..={MAX_PLAYERS}).\n\
         max_players = {}\n\n\
         # Most spectators at once (0..={MAX_SPECTATORS}): people watching a player's\n\
         # fights without a body (`hailfire bot --spectate NAME`).\n\
         max_spectators = {}\n\n\
         # Players must give this password to join (empty: anyone may). Keep this file\n\
         # readable only by the server's user if you set one.\n\
         password = \"\"\n\n\
         # Send gameplay events every N ticks (1..=6): 3 sends them with each snapshot.\n\
         event_every = {}\n\n\
         # Extra mod folders (each a mod, or a folder of mods), on top of the base game,\n\
         # mods/ and the user's mods folder.\n\
         mods = []\n\n\
         # Mod ids whose scripts run inside the server's process, as fast as the base game\n\
         # (list only mods you would run as a program). Every other mod's scripts run in a\n\
         # worker process the system limits, killed if it misses its deadline.\n\
         trusted_mods = []\n\n\
         # Reload mods when their files are saved (fights that start after use them).\n\
         watch_mods = false\n\n\
         # Log detail: error, warn, info, debug or trace.\n\
         log_level = \"{}\"\n\n\
         # Players who send this password with an admin command (the in-game console) may\n\
         # kick, ban, say and reload like the server console (empty: nobody may).\n\
         admin_password = \"\"\n\n\
         # The ban list, kept by the console's ban and unban (relative: beside this file).\n\
         ban_list = \"{}\"\n\n\
         # Log a status line (players, instances, tick cost, traffic) every this many\n\
         # seconds (0: never).\n\
         status_every_s = {}\n\n\
         # Threads that tick dungeon instances side by side (0: the machine's cores minus\n\
         # one, at least one). Fights are independent; the result is the same with any number.\n\
         threads = 0\n\n\
         # Connections one IP address may hold at once (1..=256): players behind one home\n\
         # router share an address. Raise it for a LAN party playing on a remote server.\n\
         max_sessions_per_address = {}\n\n\
         # Serve Prometheus metrics at http://ADDRESS/metrics (players, instances, bullets,\n\
         # tick time, traffic, dropped datagrams by reason...), e.g. \"127.0.0.1:9108\".\n\
         # Empty: off. Anyone who can reach it can read it: keep it on 127.0.0.1 or a\n\
         # private network.\n\
         metrics_bind = \"\"\n\n\
         # Admit only the players on allowlist.toml (beside the ban list), kept by the\n\
         # console's `allow NAME` and `disallow NAME`. Players are known by the key their\n\
         # game proves when it joins, not by the name they type. ops.toml (`op NAME`) lists\n\
         # the players whose admin commands need no admin password.\n\
         allowlist = false\n\n\
         # Announce this server on the local network once a second (a 17-byte broadcast),\n\
         # so games on the LAN list it whatever its port. Off for a server on the internet\n\
         # that has no LAN worth telling.\n\
         lan_announce = true\n\n\
         # Ask the router in front of this machine to forward the UDP port (UPnP IGD or\n\
         # NAT-PMP; renewed while the server runs, removed when it stops). For a server at\n\
         # home behind a router; a VPS has no such router.\n\
         upnp = false\n\n\
         # A relay (`hailfire relay`, HOST[:PORT]) friends may also join through, for a\n\
         # server behind carrier-grade NAT that no router can open: the log says the join\n\
         # code, CODE@RELAY. The relay forwards sealed datagrams and can read none.\n\
         relay = \"\"\n\n\
         # By default the relay introduces friends who join by code to this server, so\n\
         # that they can reach it straight (each learns the other's public address). True:\n\
         # introduce nobody; every such game goes through the relay.\n\
         relay_hide_address = false\n",
        d.name,
        d.bind,
        d.max_players,
        d.max_spectators,
        d.event_every,
        d.log_level,
        d.ban_list.display(),
        d.status_every_s,
        d.max_sessions_per_address
    )
}

/// `$HAILFIRE_CONFIG_DIR/server.toml`, else the OS configuration directory's.
pub fn default_path() -> PathBuf {
    if let Ok(d) = std::env::var("HAILFIRE_CONFIG_DIR") {
        return PathBuf::from(d).join("server.toml");
    }
    directories::ProjectDirs::from("", "", "Hailfire")
        .map(|d| d.config_dir().join("server.toml"))
        .unwrap_or_else(|| PathBuf::from("server.toml"))
}

impl ServerFile {
    /// The simulation threads to use: `threads`, or for 0 the machine's cores minus one
    /// (one left for the network and the console), at least one; never more than the
    /// machine's cores (more would only preempt each other, and a script's resume has a
    /// wall-clock limit).
    pub fn sim_threads(&self) -> usize {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        match self.threads {
            0 => cores.saturating_sub(1).max(1),
            n => n.min(cores),
        }
    }

    /// Parses `text` (from `file`); the error names the file, line and column and what to fix.
    pub fn parse(text: &str, file: &str) -> Result<ServerFile, String> {
        let f: ServerFile = toml::from_str(text).map_err(|e| {
            let at = e.span().map(|s| line_col(text, s.start));
            let (l, c) = at.unwrap_or((1, 1));
            format!("{file}:{l}:{c}: {}", e.message().trim())
        })?;
        f.check().map_err(|e| format!("{file}: {e}"))?;
        Ok(f)
    }

    /// The values a server can use, or what is wrong.
    pub fn check(&self) -> Result<(), String> {
        if !(1..=MAX_PLAYERS).contains(&self.max_players) {
            return Err(format!("max_players must be 1..={MAX_PLAYERS}, not {}", self.max_players));
        }
        if !self.metrics_bind.is_empty() && self.metrics_bind.parse::<std::net::SocketAddr>().is_err() {
            return Err(format!(
                "metrics_bind must be an address and a port, like \"127.0.0.1:9108\", not {:?}",
                self.metrics_bind
            ));
        }
        if self.max_spectators > MAX_SPECTATORS {
            return Err(format!("max_spectators must be 0..={MAX_SPECTATORS}, not {}", self.max_spectators));
        }
        use crate::protocol::messages::{MAX_ADMIN_PASSWORD, MAX_MOTD, MAX_SERVER_NAME};
        for (key, value, max) in [
            ("name", &self.name, MAX_SERVER_NAME),
            ("motd", &self.motd, MAX_MOTD),
            ("admin_password", &self.admin_password, MAX_ADMIN_PASSWORD),
        ] {
            if value.len() > max {
                return Err(format!("{key} is {} bytes long; at most {max}", value.len()));
            }
        }
        if !(1..=MAX_PLAYERS).contains(&self.max_sessions_per_address) {
            return Err(format!(
                "max_sessions_per_address must be 1..={MAX_PLAYERS}, not {}",
                self.max_sessions_per_address
            ));
        }
        if self.threads > 256 {
            return Err(format!("threads must be 0 (automatic) ..= 256, not {}", self.threads));
        }
        if let Some(bad) = self.trusted_mods.iter().find(|m| !crate::content::manifest::Manifest::id_is_valid(m)) {
            return Err(format!("trusted_mods: '{bad}' is not a mod id (lowercase letters, digits and _)"));
        }
        if !(1..=6).contains(&self.event_every) {
            return Err(format!("event_every must be 1..=6, not {}", self.event_every));
        }
        if !["error", "warn", "info", "debug", "trace"].contains(&self.log_level.as_str()) {
            return Err(format!("log_level must be error, warn, info, debug or trace, not '{}'", self.log_level));
        }
        Ok(())
    }

    /// Reads `path`, writing the default file there first when it does not exist (and
    /// `create` is true).
    pub fn load_or_create(path: &Path, create: bool) -> Result<ServerFile, String> {
        if !path.exists() {
            if !create {
                return Err(format!("{}: no such file", path.display()));
            }
            // Owner-only (it may hold passwords), and whole or not at all: a full disk
            // must not leave an empty file that every later start reads as the defaults.
            super::keylist::write_private(path, &default_text())
                .map_err(|e| format!("{e} (the server's first-run settings; nothing was written)"))?;
            return Ok(ServerFile::default());
        }
        let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        if text.trim().is_empty() {
            return Err(format!(
                "{} is empty (a write that failed, on a full disk?): delete it and the default settings are \
                 written again, or fill it in",
                path.display()
            ));
        }
        Self::parse(&text, &path.display().to_string())
    }

    /// The settings in effect, as a file (the password hidden).
    pub fn effective_text(&self) -> String {
        let mut shown = self.clone();
        if !shown.password.is_empty() {
            shown.password = "(set)".into();
        }
        if !shown.admin_password.is_empty() {
            shown.admin_password = "(set)".into();
        }
        let mods: Vec<String> = shown.mods.iter().map(|m| format!("\"{}\"", m.display())).collect();
        format!(
            "name = {:?}\nmotd = {:?}\nbind = {:?}\nmax_players = {}\nmax_spectators = {}\npassword = {:?}\nevent_every = {}\nmods = [{}]\ntrusted_mods = {:?}\nwatch_mods = {}\nlog_level = {:?}\nadmin_password = {:?}\nban_list = {:?}\nstatus_every_s = {}\nthreads = {}\nmax_sessions_per_address = {}\nmetrics_bind = {:?}\nallowlist = {}\nlan_announce = {}\nupnp = {}\nrelay = {:?}\nrelay_hide_address = {}\n",
            shown.name,
            shown.motd,
            shown.bind,
            shown.max_players,
            shown.max_spectators,
            shown.password,
            shown.event_every,
            mods.join(", "),
            shown.trusted_mods,
            shown.watch_mods,
            shown.log_level,
            shown.admin_password,
            shown.ban_list.display().to_string(),
            shown.status_every_s,
            shown.threads,
            shown.max_sessions_per_address,
            shown.metrics_bind,
            shown.allowlist,
            shown.lan_announce,
            shown.upnp,
            shown.relay,
            shown.relay_hide_address,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_file_parses_to_the_defaults() {
        assert_eq!(ServerFile::parse(&default_text(), "server.toml").unwrap(), ServerFile::default());
    }

    #[test]
    fn mistakes_are_errors_at_their_line() {
        let e = ServerFile::parse("name = \"x\"\n\nmax_player = 4\n", "server.toml").unwrap_err();
        assert!(e.starts_with("server.toml:3:1:") && e.contains("unknown field `max_player`"), "{e}");
        let e = ServerFile::parse("max_players = \"many\"\n", "s.toml").unwrap_err();
        assert!(e.starts_with("s.toml:1:"), "{e}");
        let e = ServerFile::parse("max_players = 0\n", "s.toml").unwrap_err();
        assert!(e.contains("max_players must be 1..=256"), "{e}");
        let e = ServerFile::parse("log_level = \"loud\"\n", "s.toml").unwrap_err();
        assert!(e.contains("log_level"), "{e}");
        let e = ServerFile::parse("max_sessions_per_address = 0\n", "s.toml").unwrap_err();
        assert!(e.contains("max_sessions_per_address must be 1..=256"), "{e}");
        let f = ServerFile::parse("max_sessions_per_address = 32\n", "s.toml").unwrap();
        assert_eq!(f.max_sessions_per_address, 32, "a LAN party's setting");
    }

    #[test]
    fn trusted_mods_must_be_mod_ids_and_survive_print_config() {
        let e = ServerFile::parse("trusted_mods = [\"My Mod\"]\n", "s.toml").unwrap_err();
        assert!(e.contains("trusted_mods: 'My Mod' is not a mod id"), "{e}");
        let f = ServerFile::parse("trusted_mods = [\"spin\"]\n", "s.toml").unwrap();
        assert_eq!(f.trusted_mods, vec!["spin".to_string()]);
        assert_eq!(ServerFile::parse(&f.effective_text(), "shown").unwrap(), f);
    }

    #[test]
    fn the_password_is_never_shown() {
        let f = ServerFile { password: "hunter2".into(), ..Default::default() };
        assert!(!f.effective_text().contains("hunter2") && f.effective_text().contains("(set)"));
        let f = ServerFile { admin_password: "swordfish".into(), ..Default::default() };
        assert!(!f.effective_text().contains("swordfish"));
        // What --print-config shows is itself a valid file with the same settings.
        let g = ServerFile {
            name: "Zoë's \"den\"".into(),
            status_every_s: 60,
            max_sessions_per_address: 9,
            ..Default::default()
        };
        assert_eq!(ServerFile::parse(&g.effective_text(), "shown").unwrap(), g);
    }
}
