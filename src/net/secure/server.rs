//! The server's side of the secure layer: stateless cookies, the Noise responder, the
//! password check, sessions with their limits, and sealed data in.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use rusty_enet as enet;
use snow::Builder;

use super::*;

pub(super) struct ServerSession {
    pub(super) keys: Keys,
    pub(super) hash: Vec<u8>,
    /// The client's first handshake message and our answer, to answer a repeat the same.
    pub(super) hello: Vec<u8>,
    pub(super) welcome: Vec<u8>,
    pub(super) confirmed: bool,
    pub(super) created: Instant,
    pub(super) last_seen: Instant,
    pub(super) window: (Instant, u32, u64),
}

/// How a server's secure layer is set up.
#[derive(Clone)]
pub struct ServerSecurity {
    pub identity: Identity,
    /// None: no password.
    pub password: Option<String>,
    /// Most sessions in all (the ENet peer limit plus room for handshakes).
    pub max_sessions: usize,
    /// What status queries are answered with (None: they are not answered). The server
    /// loop keeps it current.
    pub status: Option<StatusBoard>,
}

/// The status a server answers queries with, shared between its loop and its socket.
pub type StatusBoard = std::sync::Arc<std::sync::Mutex<crate::protocol::status::ServerStatus>>;

pub(super) struct ServerSide {
    pub(super) cfg: ServerSecurity,
    pub(super) secret: [u8; 32],
    pub(super) started: Instant,
    pub(super) sessions: HashMap<SocketAddr, ServerSession>,
    pub(super) guesses: HashMap<IpAddr, (Instant, u32)>,
    /// Handshakes started per IP in the current second.
    pub(super) starts: HashMap<IpAddr, (Instant, u32)>,
    /// Status answers sent in the current second (all addresses together), and to each
    /// address (cleared every second; at most `MAX_ANSWERS_PER_SECOND` entries).
    pub(super) answers: (Instant, u32),
    pub(super) answered: HashMap<IpAddr, u32>,
}

impl ServerSide {
    pub(super) fn cookie(&self, addr: SocketAddr, window: u64) -> [u8; 16] {
        let a = addr.to_string();
        let m = mac(&self.secret, &[a.as_bytes(), &window.to_le_bytes()]);
        let mut c = [0u8; 16];
        c.copy_from_slice(&m[..16]);
        c
    }

    pub(super) fn window(&self) -> u64 {
        self.started.elapsed().as_secs() / COOKIE_WINDOW_S
    }

    pub(super) fn cookie_ok(&self, addr: SocketAddr, c: &[u8]) -> bool {
        let w = self.window();
        [w, w.saturating_sub(1)].iter().any(|&w| constant_time_eq(&self.cookie(addr, w), c))
    }
}

/// Whether `ip` has used up its wrong passwords for this minute.
fn guessed_out(guesses: &HashMap<IpAddr, (Instant, u32)>, ip: IpAddr, now: Instant) -> bool {
    guesses
        .get(&ip)
        .is_some_and(|(t, n)| now.duration_since(*t) < Duration::from_secs(60) && *n >= MAX_PASSWORD_GUESSES_PER_MINUTE)
}

impl SecureSocket {
    pub(super) fn server_packet(
        &mut self,
        from: SocketAddr,
        data: &[u8],
        out: &mut [u8; enet::MTU_MAX],
    ) -> Option<usize> {
        let Side::Server(s) = &mut self.side else { return None };
        let now = Instant::now();
        let Some(&kind) = data.first() else {
            self.stats.dropped += 1;
            return None;
        };
        match kind_of(kind) {
            crate::protocol::status::T_QUERY => {
                use crate::protocol::status::{read_query, MAX_ANSWERS_PER_ADDRESS, MAX_ANSWERS_PER_SECOND};
                // Stateless, no larger than the query, and few per second in all: useless
                // for amplification or reflection.
                let (Some(nonce), Some(board)) = (read_query(data), s.cfg.status.as_ref()) else {
                    self.stats.dropped += 1;
                    return None;
                };
                if now.duration_since(s.answers.0) >= Duration::from_secs(1) {
                    s.answers = (now, 0);
                    s.answered.clear();
                }
                let from_ip = s.answered.entry(from.ip()).or_insert(0);
                if s.answers.1 >= MAX_ANSWERS_PER_SECOND || *from_ip >= MAX_ANSWERS_PER_ADDRESS {
                    self.stats.dropped += 1;
                    return None;
                }
                *from_ip += 1;
                s.answers.1 += 1;
                let answer = board.lock().map(|st| st.answer(nonce)).ok()?;
                self.raw_send(from, &answer);
                None
            }
            T_INIT if data.len() == INIT_LEN => {
                // Stateless: the answer is a MAC, no larger than the request.
                let mut p = vec![T_COOKIE, SECURE_VERSION];
                p.extend_from_slice(&s.cookie(from, s.window()));
                self.stats.cookies_sent += 1;
                self.raw_send(from, &p);
                None
            }
            T_HELLO if data.len() == HELLO_LEN && data[1] == SECURE_VERSION => {
                if !s.cookie_ok(from, &data[2..18]) {
                    self.stats.dropped += 1;
                    return None;
                }
                if let Some(existing) = s.sessions.get(&from) {
                    if existing.confirmed {
                        self.stats.dropped += 1;
                        return None;
                    }
                    // A repeated Hello (our Welcome was lost or is late): the same answer.
                    if existing.hello[..] == data[18..50] {
                        let w = existing.welcome.clone();
                        self.raw_send(from, &w);
                        return None;
                    }
                }
                // Handshakes in progress per IP (players behind one address may all be
                // connected; only unconfirmed sessions count), Diffie-Hellmans per IP per
                // second, and addresses that guessed wrong too often.
                let per_ip =
                    s.sessions.iter().filter(|(a, x)| a.ip() == from.ip() && **a != from && !x.confirmed).count();
                let blocked = guessed_out(&s.guesses, from.ip(), now);
                let st = s.starts.entry(from.ip()).or_insert((now, 0));
                if now.duration_since(st.0) >= Duration::from_secs(1) {
                    *st = (now, 0);
                }
                st.1 += 1;
                let too_fast = st.1 > MAX_HANDSHAKES_PER_IP_PER_SECOND;
                if per_ip >= MAX_SESSIONS_PER_IP || s.sessions.len() >= s.cfg.max_sessions || blocked || too_fast {
                    self.stats.dropped += 1;
                    return None;
                }
                let params = NOISE.parse().ok()?;
                let mut hs = Builder::new(params).local_private_key(&s.cfg.identity.private).build_responder().ok()?;
                let mut payload = [0u8; 64];
                if hs.read_message(&data[18..50], &mut payload).is_err() {
                    self.stats.dropped += 1;
                    return None;
                }
                let mut m2 = [0u8; 256];
                let n = hs.write_message(&[], &mut m2).ok()?;
                let hash = hs.get_handshake_hash().to_vec();
                let transport = hs.into_stateless_transport_mode().ok()?;
                let mut p = vec![T_WELCOME];
                p.extend_from_slice(&m2[..n]);
                s.sessions.insert(
                    from,
                    ServerSession {
                        keys: Keys { transport, send_nonce: 0, replay: Replay::default() },
                        hash,
                        hello: data[18..50].to_vec(),
                        welcome: p.clone(),
                        confirmed: false,
                        created: now,
                        last_seen: now,
                        window: (now, 0, 0),
                    },
                );
                self.stats.handshakes += 1;
                self.raw_send(from, &p);
                None
            }
            T_CONFIRM => {
                let Some(sess) = s.sessions.get_mut(&from) else {
                    self.stats.dropped += 1;
                    return None;
                };
                let mut buf = [0u8; 64];
                let Ok(n) = sess.keys.open(data, &mut buf) else {
                    self.stats.dropped += 1;
                    return None;
                };
                let want = mac(&password_key(s.cfg.password.as_deref().unwrap_or("")), &[&sess.hash]);
                let good = n == 32 && constant_time_eq(&buf[..32], &want);
                if sess.confirmed && !good {
                    // Already in: a bad repeat changes nothing.
                    self.stats.dropped += 1;
                    return None;
                }
                let good = good && !guessed_out(&s.guesses, from.ip(), now);
                let reply = if good {
                    sess.confirmed = true;
                    sess.last_seen = now;
                    sess.keys.seal(T_ACCEPT, &[])
                } else {
                    let why = if s.cfg.password.is_some() {
                        "wrong password"
                    } else {
                        "this server has no password; join without one"
                    };
                    let p = sess.keys.seal(T_REFUSE, why.as_bytes());
                    s.sessions.remove(&from);
                    let g = s.guesses.entry(from.ip()).or_insert((now, 0));
                    if now.duration_since(g.0) > Duration::from_secs(60) {
                        *g = (now, 0);
                    }
                    g.1 += 1;
                    self.stats.refused_passwords += 1;
                    tracing::info!(address = %from.ip(), "refused a join: wrong password");
                    p
                };
                if let Some(p) = reply {
                    self.raw_send(from, &p);
                }
                None
            }
            T_DATA => {
                let Some(sess) = s.sessions.get_mut(&from).filter(|x| x.confirmed) else {
                    self.stats.dropped += 1;
                    return None;
                };
                match sess.keys.open(data, out) {
                    Ok(n) => {
                        sess.last_seen = now;
                        // Rate limits over one-second windows.
                        if now.duration_since(sess.window.0) >= Duration::from_secs(1) {
                            sess.window = (now, 0, 0);
                        }
                        sess.window.1 += 1;
                        sess.window.2 += data.len() as u64;
                        if sess.window.1 > MAX_PACKETS_PER_SECOND || sess.window.2 > MAX_BYTES_PER_SECOND {
                            s.sessions.remove(&from);
                            self.stats.rate_limited += 1;
                            tracing::warn!(peer = %from, "cut off: over the per-peer rate limit");
                            return None;
                        }
                        Some(n)
                    }
                    Err(d) => self.stats.count(d),
                }
            }
            _ => self.stats.count(Drop::Bad),
        }
    }

    pub(super) fn server_expire(&mut self) {
        let Side::Server(s) = &mut self.side else { return };
        let now = Instant::now();
        s.sessions.retain(|_, x| {
            if x.confirmed {
                now.duration_since(x.last_seen) < SESSION_IDLE
            } else {
                now.duration_since(x.created) < HANDSHAKE_DEADLINE
            }
        });
        s.guesses.retain(|_, (t, _)| now.duration_since(*t) < Duration::from_secs(60));
        s.starts.retain(|_, (t, _)| now.duration_since(*t) < Duration::from_secs(1));
        self.stats.sessions = s.sessions.len();
    }
}
