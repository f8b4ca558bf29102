//! `hailfire soak`: a long run that shows whether a server stays healthy. A dedicated
//! server runs in this process (real ENet on 127.0.0.1, its own thread, the same tick loop
//! as `--dedicated`) and `hailfire bot` processes play on it: most on a clean link, some
//! through the bad link, and a few that join, fight and leave again every interval. Each
//! interval prints the server's memory (this process), the bots' memory (their
//! processes), tick cost mean and max, players, instances, bullets and traffic.
//!
//! It is a benchmark, not a test: run it as long as you like and read the series.

use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use anyhow::Context;

use super::{Server, ServerConfig};
use crate::content::Content;
use crate::net::secure::{Identity, ServerSecurity};
use crate::net::{EnetTransport, Transport};
use crate::sim::TICK_RATE;

#[derive(Clone, Debug)]
pub struct SoakOptions {
    /// Bots in all (long-lived clean, bad-link, and joining-and-leaving).
    pub bots: usize,
    /// Of those, how many play through the bad link (100 ms, 20 ms jitter, 5 % loss).
    pub bad: usize,
    /// Of those, how many join, fight and leave again every interval.
    pub churn: usize,
    pub minutes: f64,
    /// Seconds between report lines.
    pub every_s: f64,
    pub dungeon: String,
    /// Also write the series as CSV here.
    pub csv: Option<std::path::PathBuf>,
}

/// What the server thread reports each interval.
#[derive(Clone, Debug, Default)]
struct Sample {
    ticks: u64,
    mean_ms: f64,
    max_ms: f64,
    players: usize,
    instances: usize,
    bullets: usize,
    /// Wire bytes (sent, received) during the interval.
    sent: u64,
    recv: u64,
}

/// Resident memory of a process, in KiB (Linux: /proc; elsewhere none).
pub fn rss_kib(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = s.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn server_thread(
    content: Content,
    every: Duration,
    stop: Arc<AtomicBool>,
    ready: mpsc::Sender<anyhow::Result<u16>>,
    samples: mpsc::Sender<Sample>,
) {
    let security = match Identity::generate() {
        Ok(identity) => ServerSecurity::new(identity),
        Err(e) => {
            let _ = ready.send(Err(e.into()));
            return;
        }
    };
    let net =
        match EnetTransport::listen_secure("127.0.0.1:0".parse().expect("valid"), super::peer_limit(256), security) {
            Ok(n) => n,
            Err(e) => {
                let _ = ready.send(Err(e.into()));
                return;
            }
        };
    let port = net.local_addr().map(|a| a.port()).unwrap_or(0);
    let mut server = Server::new(&content, net, ServerConfig { max_players: 256, ..Default::default() });
    let _ = ready.send(Ok(port));
    let period = Duration::from_secs_f64(1.0 / TICK_RATE as f64);
    let mut next = Instant::now();
    let mut since = Instant::now();
    let (mut n, mut sum, mut max) = (0u64, 0.0f64, 0.0f64);
    let mut last_wire = (0u64, 0u64);
    while !stop.load(Ordering::Relaxed) {
        let t0 = Instant::now();
        server.tick();
        let ms = t0.elapsed().as_secs_f64() * 1000.0;
        n += 1;
        sum += ms;
        max = max.max(ms);
        if since.elapsed() >= every {
            let wire = server.net.wire_totals().unwrap_or_default();
            let _ = samples.send(Sample {
                ticks: n,
                mean_ms: sum / n.max(1) as f64,
                max_ms: max,
                players: server.connected_players(),
                instances: server.world.instances.len(),
                bullets: server.world.instances.values().map(|i| i.bullets.len()).sum(),
                sent: wire.0 - last_wire.0,
                recv: wire.1 - last_wire.1,
            });
            last_wire = wire;
            since = Instant::now();
            (n, sum, max) = (0, 0.0, 0.0);
        }
        next += period;
        let now = Instant::now();
        if next > now {
            std::thread::sleep(next - now);
        } else if now - next > period * 30 {
            next = now;
        }
    }
    server.shutdown();
    std::thread::sleep(Duration::from_millis(100));
    server.shutdown();
}

/// A bot process that is killed if the soak ends early (an error, a panic).
struct Bot(Child);

impl Drop for Bot {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Stops the server thread and removes the soak's folder however the soak ends.
struct Cleanup {
    stop: Arc<AtomicBool>,
    data: std::path::PathBuf,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = std::fs::remove_dir_all(&self.data);
    }
}

/// Runs the soak; prints a line per interval and a summary. Fails if the server cannot
/// start or a bot process cannot be started.
pub fn run(opts: &SoakOptions) -> anyhow::Result<()> {
    let content = Content::load_default();
    anyhow::ensure!(content.base_loaded(), "the base game content did not load; run `hailfire mods check`");
    let every = Duration::from_secs_f64(opts.every_s.max(1.0));
    let stop = Arc::new(AtomicBool::new(false));
    let (ready_tx, ready_rx) = mpsc::channel();
    let (sample_tx, sample_rx) = mpsc::channel();
    let s2 = stop.clone();
    let server = std::thread::Builder::new()
        .name("hailfire-soak-server".into())
        .spawn(move || server_thread(content, every, s2, ready_tx, sample_tx))
        .context("starting the server thread")?;
    let port = ready_rx.recv().context("the server thread ended early")??;
    let exe = std::env::current_exe().context("finding this program")?;
    let data = std::env::temp_dir().join(format!("hailfire-soak-{}", std::process::id()));
    std::fs::create_dir_all(&data)?;
    let _cleanup = Cleanup { stop: stop.clone(), data: data.clone() };
    let total_s = opts.minutes * 60.0;
    let spawned = std::cell::Cell::new(0usize);
    let bot = |count: usize, seconds: f64, link: &str, name: &str| -> anyhow::Result<Bot> {
        spawned.set(spawned.get() + 1);
        let out = std::fs::File::create(data.join(format!("bot-{}.txt", spawned.get())))?;
        Command::new(&exe)
            .args(["bot", "--join", &format!("127.0.0.1:{port}"), "--plan", "dungeon", "--dungeon", &opts.dungeon])
            .args(["--count", &count.to_string(), "--seconds", &format!("{seconds:.0}"), "--link", link])
            .args(["--name", name, "--no-cache", "--accept-new-key"])
            .env("HAILFIRE_DATA_DIR", &data)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(Stdio::null())
            .spawn()
            .map(Bot)
            .context("starting a bot process")
    };
    let bad = opts.bad.min(opts.bots);
    let churn = opts.churn.min(opts.bots - bad);
    let clean = opts.bots - bad - churn;
    let start = Instant::now();
    let mut long_lived = Vec::new();
    // In processes of at most 8 bots, 2 s apart: players do not all arrive in the same
    // second, and one address may start only so many handshakes a second (32 bots from one
    // process at once: 4 did not get in within the 8 s join timeout).
    let mut left = clean;
    let mut group = 0;
    while left > 0 {
        let n = left.min(8);
        if group > 0 {
            std::thread::sleep(Duration::from_secs(2));
        }
        long_lived.push(bot(n, total_s - 2.0 * group as f64, "clean", &format!("soak{}", group + 1))?);
        left -= n;
        group += 1;
    }
    if bad > 0 {
        long_lived.push(bot(bad, total_s, "bad", "soakbad")?);
    }
    let mut churners: Vec<Bot> = Vec::new();
    let mut csv = String::from(
        "minute,server_rss_mib,bot_rss_mib,tick_mean_ms,tick_max_ms,players,instances,bullets,down_kbs,up_kbs\n",
    );
    println!(
        "soak: {} bots ({clean} clean, {bad} on the bad link, {churn} joining and leaving every {:.0} s) for {:.1} min on 127.0.0.1:{port}",
        opts.bots, opts.every_s, opts.minutes
    );
    println!(
        "{:>7} {:>11} {:>9} {:>11} {:>10} {:>7} {:>9} {:>7} {:>16}",
        "minute",
        "server RSS",
        "bots RSS",
        "tick mean",
        "tick max",
        "players",
        "instances",
        "bullets",
        "traffic out/in"
    );
    let me = std::process::id();
    let (mut first_rss, mut last_rss) = (None, 0u64);
    while start.elapsed().as_secs_f64() < total_s {
        if churn > 0 {
            churners.retain_mut(|c| c.0.try_wait().ok().flatten().is_none());
            if churners.is_empty() {
                churners.push(bot(churn, opts.every_s * 0.8, "clean", "churn")?);
            }
        }
        let Ok(s) = sample_rx.recv_timeout(every + Duration::from_secs(5)) else {
            anyhow::bail!("the server thread stopped reporting");
        };
        let server_rss = rss_kib(me).unwrap_or(0);
        let bots_rss: u64 = long_lived.iter().chain(churners.iter()).filter_map(|c| rss_kib(c.0.id())).sum();
        first_rss.get_or_insert(server_rss);
        last_rss = server_rss;
        let secs = every.as_secs_f64();
        let minute = start.elapsed().as_secs_f64() / 60.0;
        println!(
            "{minute:>7.1} {:>8.1} MiB {:>5.1} MiB {:>8.3} ms {:>7.2} ms {:>7} {:>9} {:>7} {:>6.1}/{:<5.1} KB/s",
            server_rss as f64 / 1024.0,
            bots_rss as f64 / 1024.0,
            s.mean_ms,
            s.max_ms,
            s.players,
            s.instances,
            s.bullets,
            s.sent as f64 / secs / 1000.0,
            s.recv as f64 / secs / 1000.0,
        );
        csv.push_str(&format!(
            "{minute:.2},{:.2},{:.2},{:.4},{:.3},{},{},{},{:.2},{:.2}\n",
            server_rss as f64 / 1024.0,
            bots_rss as f64 / 1024.0,
            s.mean_ms,
            s.max_ms,
            s.players,
            s.instances,
            s.bullets,
            s.sent as f64 / secs / 1000.0,
            s.recv as f64 / secs / 1000.0
        ));
        let _ = s.ticks;
    }
    // The bots end by themselves (their time is up), then the server stops.
    let deadline = Instant::now() + every + Duration::from_secs(20);
    for mut c in long_lived.into_iter().chain(churners) {
        while c.0.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    stop.store(true, Ordering::Relaxed);
    let _ = server.join();
    let mut problems = Vec::new();
    let mut reports = 0;
    for i in 1..=spawned.get() {
        let text = std::fs::read_to_string(data.join(format!("bot-{i}.txt"))).unwrap_or_default();
        reports += text.lines().filter(|l| l.contains("| prediction error")).count();
        problems.extend(text.lines().filter(|l| l.contains("FAILED")).map(str::to_string));
    }
    let failed = problems.len();
    println!("bot reports: {reports}, with problems: {failed}");
    for p in problems.iter().take(10) {
        println!("  {p}");
    }
    if let Some(path) = &opts.csv {
        std::fs::write(path, csv).with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(f) = first_rss {
        println!(
            "server RSS {:.1} MiB at the first report, {:.1} MiB at the last ({:+.1} MiB){}",
            f as f64 / 1024.0,
            last_rss as f64 / 1024.0,
            (last_rss as f64 - f as f64) / 1024.0,
            if failed > 0 { format!("; {failed} bot process(es) reported problems") } else { String::new() }
        );
    }
    Ok(())
}
