//! Prometheus metrics over HTTP: `metrics_bind = "127.0.0.1:9108"` in server.toml (off
//! by default). The format is `prometheus-client`'s (OpenMetrics text, which Prometheus
//! scrapes). The HTTP side is a few lines of std on a thread of its own, one request at a
//! time, each with a 2 s deadline and 8 KiB for its request: it runs inside the game
//! server, and a general HTTP server (tiny_http was tried) keeps a thread and two file
//! handles per open connection with no deadline, so anyone who could reach the port could
//! exhaust the game server's files. The server's loop sets the values (atomics shared with
//! the registry); the HTTP thread only reads them. Only `GET /metrics` is answered;
//! anything else is a 404.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use super::Server;
use crate::net::Transport;

type Labels = Vec<(String, String)>;

/// The values the server's loop keeps current.
pub struct Metrics {
    players: Gauge,
    spectators: Gauge,
    joining: Gauge,
    instances: Gauge,
    bullets: Gauge,
    tick_seconds: Histogram,
    sent_bytes: Counter<u64, AtomicU64>,
    received_bytes: Counter<u64, AtomicU64>,
    dropped: Family<Labels, Counter<u64, AtomicU64>>,
    handshakes: Counter<u64, AtomicU64>,
    refused_passwords: Counter<u64, AtomicU64>,
    content_downloads: Counter<u64, AtomicU64>,
    inputs_dropped: Counter<u64, AtomicU64>,
}

/// Counters are kept as the server's own totals: each update adds what they grew by.
fn catch_up(c: &Counter<u64, AtomicU64>, total: u64) {
    let now = c.get();
    if total > now {
        c.inc_by(total - now);
    }
}

impl Metrics {
    /// Starts serving on `bind`; the handles the loop updates.
    pub fn serve(bind: SocketAddr) -> anyhow::Result<(Metrics, SocketAddr)> {
        let m = Metrics {
            players: Gauge::default(),
            spectators: Gauge::default(),
            joining: Gauge::default(),
            instances: Gauge::default(),
            bullets: Gauge::default(),
            // 0.25 ms .. 64 ms: a tick has 16.7 ms.
            tick_seconds: Histogram::new(exponential_buckets(0.000_25, 2.0, 9)),
            sent_bytes: Counter::default(),
            received_bytes: Counter::default(),
            dropped: Family::default(),
            handshakes: Counter::default(),
            refused_passwords: Counter::default(),
            content_downloads: Counter::default(),
            inputs_dropped: Counter::default(),
        };
        let mut r = Registry::with_prefix("hailfire");
        r.register("players", "Players connected now", m.players.clone());
        r.register("spectators", "Spectators connected now", m.spectators.clone());
        r.register("joining", "Connections greeting or downloading the content", m.joining.clone());
        r.register("instances", "Instances (the hub and every running fight)", m.instances.clone());
        r.register("bullets", "Bullets in flight in every instance", m.bullets.clone());
        r.register("tick_seconds", "Time the server spent on each 60 Hz tick", m.tick_seconds.clone());
        r.register("sent_bytes", "UDP payload bytes sent", m.sent_bytes.clone());
        r.register("received_bytes", "UDP payload bytes received", m.received_bytes.clone());
        r.register("dropped_datagrams", "Datagrams not let through, by reason", m.dropped.clone());
        r.register("handshakes", "Secure handshakes completed", m.handshakes.clone());
        r.register("refused_passwords", "Joins refused for a wrong server password", m.refused_passwords.clone());
        r.register("content_downloads", "Clients that downloaded the server's content", m.content_downloads.clone());
        r.register("inputs_dropped", "Input frames refused (stale, future, flood)", m.inputs_dropped.clone());
        let listener = TcpListener::bind(bind).map_err(|e| anyhow::anyhow!("metrics_bind = {bind}: {e}"))?;
        let addr = listener.local_addr()?;
        std::thread::Builder::new().name("metrics".into()).spawn(move || {
            let mut failing = false;
            for conn in listener.incoming() {
                match conn {
                    Ok(s) => {
                        failing = false;
                        let _ = answer(s, &r);
                    }
                    Err(e) => {
                        // Out of file handles, say: wait and go on, saying so once.
                        if !failing {
                            tracing::warn!("metrics: could not accept a connection: {e}");
                            failing = true;
                        }
                        std::thread::sleep(Duration::from_millis(100));
                    }
                }
            }
        })?;
        Ok((m, addr))
    }

    /// One tick's cost (every tick).
    pub fn tick(&self, cost: Duration) {
        self.tick_seconds.observe(cost.as_secs_f64());
    }

    /// Everything else (about once a second).
    pub fn update<T: Transport>(&self, server: &Server<T>) {
        self.players.set(server.connected_players() as i64);
        self.spectators.set(server.watching() as i64);
        self.joining.set(server.joining() as i64);
        self.instances.set(server.world.instances.len() as i64);
        self.bullets.set(server.world.instances.values().map(|i| i.bullets.len()).sum::<usize>() as i64);
        catch_up(&self.content_downloads, server.stats.content_transfers);
        catch_up(&self.inputs_dropped, server.stats.inputs_dropped);
        if let Some((sent, received)) = server.net.wire_totals() {
            catch_up(&self.sent_bytes, sent);
            catch_up(&self.received_bytes, received);
        }
        if let Some(s) = server.net.security() {
            catch_up(&self.handshakes, s.handshakes);
            catch_up(&self.refused_passwords, s.refused_passwords);
            for (reason, n) in [
                ("garbage", s.garbage),
                ("no_session", s.no_session),
                ("unopened", s.unopened),
                ("enet_refused", s.enet_refused),
                ("extra_peers", s.extra_peers),
                ("status_over_budget", s.status_dropped),
                ("busy", s.busy),
                ("replayed", s.replayed),
                ("kernel", s.kernel_dropped),
                ("backlog", s.backlog),
                ("evicted_handshake", s.evicted),
                ("idle_session", s.idle_dropped),
                ("cut_for_memory", s.cut_for_memory),
                ("rate_limited", s.rate_limited),
            ] {
                catch_up(&self.dropped.get_or_create(&vec![("reason".to_string(), reason.to_string())]), n);
            }
        }
    }
}

/// The longest request read, and how long a connection may take in all.
const MAX_REQUEST: usize = 8 * 1024;
const DEADLINE: Duration = Duration::from_secs(2);

/// One request on one connection, then close.
fn answer(mut s: TcpStream, r: &Registry) -> std::io::Result<()> {
    let start = Instant::now();
    s.set_read_timeout(Some(DEADLINE))?;
    s.set_write_timeout(Some(DEADLINE))?;
    let mut req = Vec::with_capacity(512);
    let mut chunk = [0u8; 1024];
    while !req.windows(4).any(|w| w == b"\r\n\r\n") && req.len() < MAX_REQUEST && start.elapsed() < DEADLINE {
        let n = s.read(&mut chunk)?;
        if n == 0 {
            break;
        }
        req.extend_from_slice(&chunk[..n]);
    }
    let line = req.split(|b| *b == b'\n').next().unwrap_or_default();
    let path = line.strip_prefix(b"GET ").and_then(|rest| rest.split(|b| *b == b' ').next()).unwrap_or_default();
    let page = path == b"/metrics" || path.starts_with(b"/metrics?");
    let (status, kind, body) = if page {
        let mut body = String::new();
        if encode(&mut body, r).is_err() {
            body.clear();
        }
        ("200 OK", "application/openmetrics-text; version=1.0.0; charset=utf-8", body)
    } else {
        ("404 Not Found", "text/plain; charset=utf-8", "not found: try GET /metrics\n".to_string())
    };
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes())?;
    s.write_all(body.as_bytes())?;
    s.flush()
}
