//! The client's side of the secure layer: the handshake with retries, pinning the
//! server's key, proving the password, and sealed data in.

use std::net::SocketAddr;
use std::time::Instant;

use snow::{Builder, HandshakeState};

use super::*;

/// How a client checks the server it reaches.
#[derive(Clone, Debug)]
pub struct ClientSecurity {
    /// Where pinned keys live (None: trust any key, for tests and in-process links).
    pub known: Option<KnownServers>,
    /// Accept (and pin) any key that differs from the pinned one (the bot's
    /// `--accept-new-key`).
    pub accept_new_key: bool,
    /// Accept (and pin) exactly this key if it differs from the pinned one: the key the
    /// player was shown and chose to trust.
    pub accept_key: Option<[u8; 32]>,
    pub password: Option<String>,
    /// The name the key is pinned under: the address as the player gave it (`host:port`),
    /// so that a different answer from DNS is not a "first contact". None: the resolved
    /// address.
    pub pin_as: Option<String>,
    /// The player's key pair, proven in the handshake (the server knows the player by
    /// it). None: a fresh key for this connection only (tests, tools, the attack bench).
    pub identity: Option<Identity>,
    /// Joining through a relay: the host's join code there (the server address is then
    /// the relay's).
    pub relay_code: Option<[u8; 6]>,
}

impl ClientSecurity {
    /// Trusts any server key, no password, a fresh player key (tests, in-process links).
    pub fn trusting() -> Self {
        ClientSecurity {
            known: None,
            accept_new_key: false,
            accept_key: None,
            password: None,
            pin_as: None,
            identity: None,
            relay_code: None,
        }
    }
}

pub(super) enum ClientPhase {
    Start,
    /// Asking the relay for the host with our code (with the cookie it gave us to prove
    /// our address; how many times it said it has no such code).
    RelayJoin {
        sent: Instant,
        cookie: [u8; 16],
        unknown: u8,
    },
    /// The relay introduced us to the host: punching towards it (`peer`, its public
    /// address as the relay saw it) until it answers or `until`, then the relay.
    Punch(crate::net::relay::Punching),
    Init {
        sent: Instant,
    },
    Hello {
        hs: Box<HandshakeState>,
        packet: Vec<u8>,
        sent: Instant,
    },
    /// Noise's third message (our key and the password proof) is sent; the packet is
    /// repeated as it is until the server answers.
    Confirm {
        keys: Keys,
        packet: Vec<u8>,
        sent: Instant,
    },
    Ready(Keys),
    Failed,
}

pub(super) struct ClientSide {
    pub(super) cfg: ClientSecurity,
    pub(super) server: SocketAddr,
    /// Where datagrams for `server` really go: the same, or the host's own address once
    /// punching through from a relay's introduction worked.
    pub(super) wire: SocketAddr,
    pub(super) phase: ClientPhase,
    /// ENet datagrams waiting for the session.
    pub(super) queue: VecDeque<Vec<u8>>,
    pub server_key: Option<[u8; 32]>,
    /// The key pair this client proves (the configured one, or one made for this socket).
    pub(super) identity: Identity,
    /// Our own nonce in a relay join: a `Meet` that carries it is the relay's.
    pub(super) relay_nonce: [u8; 16],
}

impl SecureSocket {
    /// Client: moves the handshake on (first packet, retries).
    pub(super) fn client_tick(&mut self) {
        let Side::Client(c) = &mut self.side else { return };
        let server = c.server;
        let now = Instant::now();
        let mut out: Option<Vec<u8>> = None;
        match &mut c.phase {
            // (A client that already reached the host straight starts over there.)
            ClientPhase::Start => match c.cfg.relay_code.filter(|_| c.wire == c.server) {
                Some(code) => {
                    c.phase = ClientPhase::RelayJoin { sent: now, cookie: [0; 16], unknown: 0 };
                    out = Some(crate::net::relay::request_with(
                        crate::net::relay::T_JOIN,
                        &code,
                        &[0; 16],
                        &c.relay_nonce,
                    ));
                }
                None => {
                    c.phase = ClientPhase::Init { sent: now };
                    out = Some(init_packet());
                }
            },
            ClientPhase::RelayJoin { sent, cookie, .. } if now.duration_since(*sent) > RETRY => {
                *sent = now;
                let cookie = *cookie;
                let nonce = c.relay_nonce;
                out = c
                    .cfg
                    .relay_code
                    .map(|code| crate::net::relay::request_with(crate::net::relay::T_JOIN, &code, &cookie, &nonce));
            }
            ClientPhase::Punch(p) if p.over(now) => {
                tracing::info!("the host could not be reached straight (a router in the way allows no punching): playing through the relay");
                c.phase = ClientPhase::Init { sent: now };
                out = Some(init_packet());
            }
            ClientPhase::Punch(p) => {
                p.send_due(&self.inner, now, false);
            }
            ClientPhase::Init { sent } if now.duration_since(*sent) > RETRY => {
                *sent = now;
                out = Some(init_packet());
            }
            ClientPhase::Hello { packet, sent, .. } if now.duration_since(*sent) > RETRY => {
                *sent = now;
                out = Some(packet.clone());
            }
            // The same Confirm again: the server answers a repeat with its answer again.
            ClientPhase::Confirm { packet, sent, .. } if now.duration_since(*sent) > RETRY => {
                *sent = now;
                out = Some(packet.clone());
            }
            _ => {}
        }
        if let Some(p) = out {
            self.raw_send(server, &p);
        }
    }

    pub(super) fn client_packet(&mut self, from: SocketAddr, data: &[u8], out: &mut [u8]) -> Option<usize> {
        let Side::Client(c) = &mut self.side else { return None };
        // The host, answering our punches: it is reachable straight, at the address it
        // answered from; the handshake starts there (the same handshake, the same pinned key).
        if let ClientPhase::Punch(p) = &c.phase {
            let heard = crate::net::relay::read_punch(data).is_some_and(|t| constant_time_eq(&t, &p.token));
            if heard && crate::net::relay::same_ip(p.peer, from) {
                tracing::info!(host = %from, "reached the host straight (punched through): the relay carries nothing more");
                c.wire = from;
                c.phase = ClientPhase::Init { sent: Instant::now() };
                let server = c.server;
                self.raw_send(server, &init_packet());
                return None;
            }
        }
        if from != c.server || data.is_empty() {
            self.stats.dropped += 1;
            return None;
        }
        let now = Instant::now();
        if let ClientPhase::RelayJoin { cookie, unknown, .. } = &mut c.phase {
            use crate::net::relay::{code_text, read_answer, read_cookie, request_with, T_FULL, T_JOIN, T_JOINED};
            let code = c.cfg.relay_code?;
            if let Some(k) = read_cookie(data) {
                // Our address proven: join again at once, with the cookie.
                *cookie = k;
                let nonce = c.relay_nonce;
                self.raw_send(from, &request_with(T_JOIN, &code, &k, &nonce));
                return None;
            }
            // Joined, with the host's address to punch towards (proven the relay's by our
            // own nonce, which we sent to the relay alone). An address we would not punch
            // (this machine's loopback, seen from a relay elsewhere): joined all the same,
            // through the relay.
            if let Some(proof) = crate::net::relay::meet_proof(data) {
                if !constant_time_eq(&proof, &c.relay_nonce) {
                    self.stats.count(Drop::Bad);
                    return None;
                }
                let usable = crate::net::relay::read_meet(data).filter(|m| crate::net::relay::may_punch(m.2, from));
                match usable {
                    Some((_, token, peer)) => {
                        let mut p = crate::net::relay::Punching::new(peer, token, now);
                        p.send_due(&self.inner, now, true);
                        if let Side::Client(c) = &mut self.side {
                            c.phase = ClientPhase::Punch(p);
                        }
                    }
                    None => {
                        c.phase = ClientPhase::Init { sent: now };
                        self.raw_send(from, &init_packet());
                    }
                }
                return None;
            }
            match read_answer(data) {
                Some((T_JOINED, got)) if got == code => {
                    c.phase = ClientPhase::Init { sent: now };
                    self.raw_send(from, &init_packet());
                }
                Some((T_FULL, got)) if got == code => {
                    self.fail(format!("the relay at {from} has no room for another player now; try again later"));
                }
                // Said three times (one forged answer must not end an honest join).
                Some((_, got)) if got == code => {
                    *unknown += 1;
                    if *unknown >= 3 {
                        let code = code_text(&code);
                        self.fail(format!(
                            "the relay at {from} has no game with the code {code} (the host may have stopped, or the code is mistyped)"
                        ));
                    }
                }
                _ => {
                    self.stats.count(Drop::Bad);
                }
            }
            return None;
        }
        match (kind_of(data[0]), &mut c.phase) {
            (T_COOKIE, ClientPhase::Init { .. }) if data.len() == 18 => {
                if data[1] != SECURE_VERSION {
                    let v = data[1];
                    self.fail(format!(
                        "the server speaks secure-session version {v}, this game {SECURE_VERSION}: update the game"
                    ));
                    return None;
                }
                let private = c.identity.private.clone();
                let (hs, p) = hello_packet(&data[2..18], &private, None)?;
                c.phase = ClientPhase::Hello { hs: Box::new(hs), packet: p.clone(), sent: now };
                self.raw_send(from, &p);
                None
            }
            // The server has no room for us; the cookie we sent proves the answer is its.
            (T_BUSY, ClientPhase::Hello { packet, .. })
                if data.len() == BUSY_LEN
                    && data[1] == SECURE_VERSION
                    && constant_time_eq(&data[3..19], &packet[2..18]) =>
            {
                let why = match data[2] {
                    server::BUSY_ADDRESS => "the server already has as many connections from your address as it allows \
                         (its max_sessions_per_address); close another game on your network or ask the host to raise it"
                        .to_string(),
                    _ => "the server is full or under attack: it has no room for another connection right now; try again in a minute"
                        .to_string(),
                };
                self.fail(why);
                None
            }
            (T_WELCOME, ClientPhase::Hello { .. }) => {
                let ClientPhase::Hello { mut hs, .. } = std::mem::replace(&mut c.phase, ClientPhase::Failed) else {
                    return None;
                };
                let mut payload = [0u8; 64];
                if hs.read_message(&data[1..], &mut payload).is_err() {
                    // Forged or damaged: start over rather than give up (a spoofed packet
                    // must not be able to end an honest join).
                    self.stats.dropped += 1;
                    if let Side::Client(c) = &mut self.side {
                        c.phase = ClientPhase::Start;
                    }
                    return None;
                }
                let mut key = [0u8; 32];
                key.copy_from_slice(hs.get_remote_static()?);
                c.server_key = Some(key);
                let hash = hs.get_handshake_hash().to_vec();
                if let Some(known) = &c.cfg.known {
                    let addr = c.cfg.pin_as.clone().unwrap_or_else(|| c.server.to_string());
                    match known.check(&addr, &key, c.cfg.accept_new_key || c.cfg.accept_key == Some(key)) {
                        Ok(Pin::Changed { pinned }) => {
                            let why = format!(
                                "the server at {addr} presented a different key (fingerprint {}) from the one pinned for it ({pinned}). \
                                 If its owner changed it, accept the new key (the Join page's 'Trust the new key', or the bot's --accept-new-key); otherwise someone may be impersonating it",
                                fingerprint(&key)
                            );
                            self.fail(why);
                            return None;
                        }
                        Ok(Pin::New) => {
                            tracing::info!(server = %addr, fingerprint = %fingerprint(&key), "pinned the server's key on first contact")
                        }
                        Ok(Pin::Replaced) => tracing::info!(
                            server = %addr,
                            fingerprint = %fingerprint(&key),
                            "trusted the server's new key, as asked"
                        ),
                        Ok(Pin::Match) => {}
                        Err(e) => tracing::warn!("could not record the server's key: {e}"),
                    }
                }
                let proof = mac(&password_key(c.cfg.password.as_deref().unwrap_or("")), &[&hash]);
                let p = confirm_packet(&mut hs, &proof)?;
                let transport = hs.into_stateless_transport_mode().ok()?;
                let keys = Keys { transport, send_nonce: 0, replay: Replay::default() };
                c.phase = ClientPhase::Confirm { keys, packet: p.clone(), sent: now };
                self.raw_send(from, &p);
                None
            }
            (T_ACCEPT | T_REFUSE, ClientPhase::Confirm { keys, .. }) => {
                let kind = data[0];
                let mut buf = [0u8; 256];
                match keys.open(data, &mut buf) {
                    Ok(n) if kind == T_REFUSE => {
                        let why = match buf[..n] {
                            [server::REFUSE_WRONG_PASSWORD] => "wrong password",
                            [server::REFUSE_NO_PASSWORD] => "this server has no password; join without one",
                            [server::REFUSE_TOO_MANY_GUESSES] => {
                                "too many wrong passwords from your network lately; wait a minute and try again"
                            }
                            _ => "for a reason this version of the game does not know",
                        };
                        self.fail(format!("the server refused us: {why}"));
                    }
                    Ok(_) => {
                        let ClientPhase::Confirm { keys, .. } = std::mem::replace(&mut c.phase, ClientPhase::Failed)
                        else {
                            return None;
                        };
                        c.phase = ClientPhase::Ready(keys);
                        let queued: Vec<Vec<u8>> = c.queue.drain(..).collect();
                        for d in queued {
                            self.seal_and_send(from, &d);
                        }
                    }
                    Err(_) => self.stats.dropped += 1,
                }
                None
            }
            (T_DATA, ClientPhase::Ready(keys)) => match keys.open(data, out) {
                Ok(n) => Some(n),
                Err(d) => self.stats.count(d),
            },
            _ => self.stats.count(Drop::Bad),
        }
    }
}

/// The client's `Hello` for `cookie`, and the handshake it starts with the player's static
/// key `private`. `ephemeral`: a fixed ephemeral key (the worked example in
/// `docs/PROTOCOL.md` only; None draws a fresh one).
pub(super) fn hello_packet(
    cookie: &[u8],
    private: &[u8],
    ephemeral: Option<&[u8]>,
) -> Option<(HandshakeState, Vec<u8>)> {
    let params = NOISE.parse().ok()?;
    let b = Builder::new(params).local_private_key(private);
    let b = match ephemeral {
        Some(e) => b.fixed_ephemeral_key_for_testing_only(e),
        None => b,
    };
    let mut hs = b.build_initiator().ok()?;
    let mut m1 = [0u8; 64];
    let n = hs.write_message(&[], &mut m1).ok()?;
    let mut p = vec![T_HELLO, SECURE_VERSION];
    p.extend_from_slice(cookie);
    p.extend_from_slice(&m1[..n]);
    p.resize(HELLO_LEN, 0);
    Some((hs, p))
}

/// The client's `Confirm`: Noise's third message, which carries the player's static key
/// and, as its payload, the password proof.
pub(super) fn confirm_packet(hs: &mut HandshakeState, proof: &[u8; 32]) -> Option<Vec<u8>> {
    let mut m3 = [0u8; 128];
    let n = hs.write_message(proof, &mut m3).ok()?;
    let mut p = vec![T_CONFIRM];
    p.extend_from_slice(&m3[..n]);
    Some(p)
}

pub(super) fn init_packet() -> Vec<u8> {
    let mut p = vec![T_INIT, SECURE_VERSION];
    p.resize(INIT_LEN, 0);
    p
}
