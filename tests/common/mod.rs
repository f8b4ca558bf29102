//! Helpers shared by the integration tests (each test file includes this with `mod common;`
//! and uses what it needs).
#![allow(dead_code)]

use hailfire::client::bot::{Brain, Plan};
use hailfire::content::{self, Content, ModRoot};
use hailfire::net::LinkProfile;
use hailfire::server::ServerConfig;
use hailfire::stepper::Stepper;

/// The base game, loaded from the source tree; panics with the diagnostics if it fails.
pub fn base() -> Content {
    let c = content::load(&[ModRoot::Mod(content::content_dir())]);
    assert!(c.base_loaded(), "{:?}", c.diagnostics);
    c
}

/// A file's text, or nothing yet.
pub fn read(p: &std::path::Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

/// Waits (at most `secs`) until the text of `p` satisfies `what`; returns it.
pub fn wait_for(p: &std::path::Path, what: &dyn Fn(&str) -> bool, secs: u64) -> String {
    let start = std::time::Instant::now();
    loop {
        let s = read(p);
        if what(&s) {
            return s;
        }
        assert!(start.elapsed() < std::time::Duration::from_secs(secs), "timed out waiting; log so far:\n{s}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// A UDP port on 127.0.0.1 that was free a moment ago.
pub fn free_port() -> u16 {
    std::net::UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// What one bot's fight over a link looked like, from the server's and the client's side.
#[derive(Debug, Clone)]
pub struct FightReport {
    pub ticks: u32,
    /// Server ticks without a fresh input frame for this player, and the longest run.
    pub coasted: u32,
    pub longest_coast: u32,
    /// Prediction error at reconciliation, px (largest, mean) and corrections past the
    /// snap threshold (rubber-banding).
    pub pred_max: f32,
    pub pred_mean: f64,
    pub snaps: u64,
    pub resyncs: u32,
    pub lead_max: i64,
    pub lead_mean: f64,
    pub lead_target: i64,
    pub late_frames: u64,
    pub redundancy: usize,
    /// The target the controller set from the server's reports (0: it never engaged).
    pub controller_target: i64,
    /// Snapshots the client rebuilt from deltas, and those it could not rebuild.
    pub snapshots: u64,
    pub snapshots_delta: u64,
    pub snapshots_unresolved: u64,
}

impl FightReport {
    pub fn coast_share(&self) -> f64 {
        self.coasted as f64 / self.ticks as f64
    }
}

/// One bot fights in the Warden's Keep for `seconds` over `link` (through the link
/// conditioner, with a fixed seed) and is kept alive; measured from a second after it
/// entered the dungeon.
pub fn fight_over(link: LinkProfile, seconds: u32) -> FightReport {
    let mut st = Stepper::new(base(), ServerConfig::default());
    st.add_client("pilot", link);
    let mut brain = Brain::new(Plan::Dungeon, "warden_keep", 3);
    let entered = st.run_until(
        60 * 30,
        |_, cl| brain.think(cl),
        |st| st.clients[0].view.as_ref().is_some_and(|v| !v.dungeon.is_empty()),
    );
    assert!(entered, "the bot got into the dungeon over {link}");
    let id = st.clients[0].player_id.unwrap();
    for _ in 0..60 {
        st.step(|_, cl| brain.think(cl));
    }
    let p = st.server.world.player(id).unwrap();
    let (c0, s0) = (p.coasted, st.clients[0].stats.clone());
    st.server.world.player_mut(id).unwrap().max_coast_run = 0;
    let (mut lead_max, mut lead_sum, mut pred_max) = (0i64, 0i64, 0f32);
    let ticks = seconds * 60;
    for _ in 0..ticks {
        let before = st.clients[0].stats.pred_err_max;
        st.clients[0].stats.pred_err_max = 0.0;
        st.step(|_, cl| brain.think(cl));
        pred_max = pred_max.max(st.clients[0].stats.pred_err_max);
        st.clients[0].stats.pred_err_max = before.max(st.clients[0].stats.pred_err_max);
        if let Some(p) = st.server.world.player_mut(id) {
            p.hp = 100;
        }
        let lead = st.clients[0].lead();
        lead_max = lead_max.max(lead);
        lead_sum += lead;
    }
    let cl = &st.clients[0];
    let p = st.server.world.player(id).unwrap();
    let n = cl.stats.pred_err_n - s0.pred_err_n;
    FightReport {
        ticks,
        coasted: p.coasted - c0,
        longest_coast: p.max_coast_run,
        pred_max,
        pred_mean: (cl.stats.pred_err_sum - s0.pred_err_sum) / n.max(1) as f64,
        snaps: cl.stats.snaps_over_threshold - s0.snaps_over_threshold,
        resyncs: cl.stats.resyncs - s0.resyncs,
        lead_max,
        lead_mean: lead_sum as f64 / ticks as f64,
        lead_target: cl.target_lead(),
        late_frames: cl.stats.late_frames - s0.late_frames,
        redundancy: cl.redundancy(),
        controller_target: cl.stats.lead_target,
        snapshots: cl.stats.snapshots - s0.snapshots,
        snapshots_delta: cl.stats.snapshots_delta - s0.snapshots_delta,
        snapshots_unresolved: cl.stats.snapshots_unresolved - s0.snapshots_unresolved,
    }
}

const MANIFEST: &str =
    "name = \"Trap\"\nversion = \"1.0.0\"\ngame_version = \">=0.1.0\"\n[dependencies]\nbase = \">=0.1\"\n";

/// Writes mod `id` into `root` with one enemy per emitter (`name`, Lua) and a dungeon
/// `<id>_pit` whose first wave spawns them all at once.
pub fn write_mod(root: &std::path::Path, id: &str, emitters: &[(&str, &str)]) {
    let m = root.join(id);
    std::fs::create_dir_all(m.join("emitters")).unwrap();
    std::fs::write(m.join("mod.toml"), format!("id = \"{id}\"\n{MANIFEST}")).unwrap();
    let mut enemies = String::new();
    let mut spawns = Vec::new();
    for (k, (name, lua)) in emitters.iter().enumerate() {
        std::fs::write(m.join(format!("emitters/{name}.lua")), lua).unwrap();
        enemies.push_str(&format!(
            "[{name}]\nname = \"{name}\"\nhp = 100000\nradius = 12.0\nbehaviour = \"stationary\"\nemitters = [\"{name}\"]\n\n"
        ));
        spawns.push(format!("{{ enemy = \"{name}\", x = {}.0, y = 150.0 }}", 100 + k * 120));
    }
    std::fs::write(m.join("enemies.toml"), enemies).unwrap();
    std::fs::write(
        m.join("dungeons.toml"),
        format!(
            "[{id}_pit]\nname = \"Pit\"\narena = [900.0, 700.0]\nspawn = [450.0, 600.0]\nboss = \"warden\"\nboss_pos = [450.0, 100.0]\nportal = [700.0, 420.0]\n\n[[{id}_pit.waves]]\ndelay = 1\nspawns = [{}]\n",
            spawns.join(", ")
        ),
    )
    .unwrap();
}

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// An Xvfb server of its own for a window test, stopped when dropped.
#[cfg(unix)]
pub struct Xvfb {
    pub child: std::process::Child,
    pub display: String,
}

#[cfg(unix)]
impl Drop for Xvfb {
    fn drop(&mut self) {
        // SIGTERM first: Xvfb then removes its lock and socket, leaving the number clean.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(2) {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Display numbers are picked one test at a time.
static DISPLAY_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[cfg(unix)]
pub fn xvfb() -> Xvfb {
    let _guard = DISPLAY_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    for n in 90..120 {
        // A lock whose server is gone (killed earlier) is stale: clear it and reuse the number.
        let lock = format!("/tmp/.X{n}-lock");
        let pid = std::fs::read_to_string(&lock).ok().and_then(|s| s.trim().parse::<u32>().ok());
        if pid.is_some_and(|p| !Path::new(&format!("/proc/{p}")).exists()) {
            let _ = std::fs::remove_file(&lock);
            let _ = std::fs::remove_file(format!("/tmp/.X11-unix/X{n}"));
        }
        if Path::new(&format!("/tmp/.X11-unix/X{n}")).exists() || Path::new(&lock).exists() {
            continue;
        }
        let display = format!(":{n}");
        let err_path = std::env::temp_dir().join(format!("hailfire-xvfb-{n}-{}.log", std::process::id()));
        let mut child = Command::new("Xvfb")
            .args([display.as_str(), "-screen", "0", "1280x800x24", "-nolisten", "tcp"])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&err_path).map(Stdio::from).unwrap_or_else(|_| Stdio::null()))
            .spawn()
            .expect("Xvfb is needed for the window tests (apt-get install xvfb)");
        // Up: its socket is there. An Xvfb that exits (the number is taken in a way the
        // files above do not show) or is slow past 20 s is passed over for the next number.
        let start = Instant::now();
        let up = loop {
            if Path::new(&format!("/tmp/.X11-unix/X{n}")).exists() {
                break true;
            }
            if matches!(child.try_wait(), Ok(Some(_))) || start.elapsed() > Duration::from_secs(20) {
                let _ = child.kill();
                let _ = child.wait();
                break false;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        if up {
            return Xvfb { child, display };
        }
        let said = std::fs::read_to_string(&err_path).unwrap_or_default();
        eprintln!("Xvfb on {display} did not start, trying the next number: {}", said.trim());
    }
    panic!("no free X display number (90..120)");
}
