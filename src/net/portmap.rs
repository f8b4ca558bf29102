//! Asking the home router to forward the game's UDP port: NAT-PMP (`natpmp`) first, then
//! UPnP IGD (`igd-next`). Host-and-play does it by default, a dedicated server with
//! `--upnp` (or `upnp = true`). On a thread of its own: nothing waits for a router that
//! never answers. A mapping is renewed at half its lease and removed when the mapper is
//! dropped (the server stops); a router that forgets it early gets it asked again.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long a mapping is asked for; it is renewed at half that.
pub const LEASE: Duration = Duration::from_secs(3600);
const DESCRIPTION: &str = "Hailfire";

/// Where the mapper stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Status {
    /// Asking the router.
    Trying,
    /// Friends on the internet join at `external`; `via` says how.
    Mapped { external: SocketAddr, via: &'static str },
    /// No router made a mapping: why, for the player or the operator.
    Failed(String),
}

/// One mapping that worked, and how to renew and remove it.
enum Held {
    Pmp {
        gateway: Ipv4Addr,
        internal_port: u16,
    },
    /// `permanent`: the router takes only mappings without an end (renewed so).
    Upnp {
        gateway: Box<igd_next::Gateway>,
        external_port: u16,
        local: SocketAddr,
        permanent: bool,
    },
}

pub struct PortMapper {
    status: Arc<Mutex<Status>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl PortMapper {
    /// Starts asking for `port` (UDP) to be forwarded to this machine.
    pub fn start(port: u16) -> PortMapper {
        let status = Arc::new(Mutex::new(Status::Trying));
        let stop = Arc::new(AtomicBool::new(false));
        let (s2, stop2) = (status.clone(), stop.clone());
        let thread =
            std::thread::Builder::new().name("hailfire-portmap".into()).spawn(move || run(port, &s2, &stop2)).ok();
        PortMapper { status, stop, thread }
    }

    pub fn status(&self) -> Status {
        self.status.lock().map(|s| s.clone()).unwrap_or(Status::Trying)
    }

    /// Waits (at most `limit`) for the first answer: mapped or failed.
    pub fn wait(&self, limit: Duration) -> Status {
        let start = Instant::now();
        loop {
            let s = self.status();
            if s != Status::Trying || start.elapsed() >= limit {
                return s;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for PortMapper {
    /// Removes the mapping before the server goes: waits for that at most two seconds (a
    /// router still being asked is left to finish on its own: the thread removes what it
    /// got as soon as it has it, if the program is still running).
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let Some(t) = self.thread.take() else { return };
        let start = Instant::now();
        while !t.is_finished() && start.elapsed() < Duration::from_secs(2) {
            std::thread::sleep(Duration::from_millis(20));
        }
        if t.is_finished() {
            let _ = t.join();
        }
    }
}

fn set(status: &Mutex<Status>, s: Status) {
    if let Ok(mut g) = status.lock() {
        *g = s;
    }
}

fn run(port: u16, status: &Mutex<Status>, stop: &AtomicBool) {
    let mut held = None;
    let mut renew_at = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        if Instant::now() >= renew_at {
            let was_mapped = held.is_some();
            match map(port, held.as_ref(), stop) {
                Ok((h, external, via)) => {
                    if !was_mapped {
                        tracing::info!(%external, via, "the router forwards UDP port {port} to this machine: friends on the internet join at {external}");
                    }
                    set(status, Status::Mapped { external, via });
                    held = Some(h);
                    renew_at = Instant::now() + LEASE / 2;
                }
                Err(why) => {
                    tracing::info!("no port mapping: {why}");
                    set(status, Status::Failed(why));
                    held = None;
                    // A router that comes back later (rebooting) is asked again.
                    renew_at = Instant::now() + Duration::from_secs(120);
                }
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    if let Some(h) = held {
        unmap(&h);
    }
}

/// NAT-PMP, then UPnP; renewing `held`'s kind first when there is one.
fn map(port: u16, held: Option<&Held>, stop: &AtomicBool) -> Result<(Held, SocketAddr, &'static str), String> {
    let pmp_first = !matches!(held, Some(Held::Upnp { .. }));
    // A renewal asks for the outside port it has (a port first given instead of ours).
    let (want, permanent) = match held {
        Some(Held::Upnp { external_port, permanent, .. }) => (*external_port, *permanent),
        _ => (port, false),
    };
    let mut why = Vec::new();
    for pmp in if pmp_first { [true, false] } else { [false, true] } {
        if stop.load(Ordering::Relaxed) {
            return Err("stopped".into());
        }
        let r = if pmp { map_pmp(port) } else { map_upnp(port, want, permanent, stop) };
        match r {
            Ok(x) => return Ok(x),
            Err(e) => why.push(e),
        }
    }
    Err(format!(
        "no router answered ({}); friends outside your network need UDP port {port} forwarded to this machine by hand",
        why.join("; ")
    ))
}

fn map_pmp(port: u16) -> Result<(Held, SocketAddr, &'static str), String> {
    let gateway = natpmp::get_default_gateway().map_err(|e| format!("NAT-PMP: no default gateway ({e:?})"))?;
    let ask = |send: &dyn Fn(&mut natpmp::Natpmp) -> natpmp::Result<()>| -> Result<natpmp::Response, String> {
        let mut n = natpmp::Natpmp::new_with(gateway).map_err(|e| format!("NAT-PMP: {e:?}"))?;
        send(&mut n).map_err(|e| format!("NAT-PMP: {e:?}"))?;
        let start = Instant::now();
        loop {
            match n.read_response_or_retry() {
                Ok(r) => return Ok(r),
                Err(natpmp::Error::NATPMP_TRYAGAIN) if start.elapsed() < Duration::from_secs(2) => {
                    std::thread::sleep(Duration::from_millis(25))
                }
                Err(natpmp::Error::NATPMP_TRYAGAIN) => return Err(format!("NAT-PMP: {gateway} did not answer")),
                Err(e) => return Err(format!("NAT-PMP: {e:?}")),
            }
        }
    };
    let public = match ask(&|n| n.send_public_address_request())? {
        natpmp::Response::Gateway(g) => *g.public_address(),
        _ => return Err("NAT-PMP: an answer that was not the public address".into()),
    };
    let lease = LEASE.as_secs() as u32;
    let external_port = match ask(&|n| n.send_port_mapping_request(natpmp::Protocol::UDP, port, port, lease))? {
        natpmp::Response::UDP(m) if m.private_port() == port => m.public_port(),
        _ => return Err("NAT-PMP: an answer that was not our mapping".into()),
    };
    let external = SocketAddr::from((public, external_port));
    warn_if_not_public(external);
    Ok((Held::Pmp { gateway, internal_port: port }, external, "NAT-PMP"))
}

fn map_upnp(
    port: u16,
    want: u16,
    permanent: bool,
    stop: &AtomicBool,
) -> Result<(Held, SocketAddr, &'static str), String> {
    let mut opts = igd_next::SearchOptions::default();
    opts.timeout = Some(Duration::from_secs(3));
    opts.single_search_timeout = Some(Duration::from_secs(3));
    let gateway = igd_next::search_gateway(opts).map_err(|e| format!("UPnP: {e}"))?;
    // Our address on the router's network: the one we reach it from.
    let local_ip = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0))
        .and_then(|s| s.connect(gateway.addr).and_then(|_| s.local_addr()))
        .map(|a| a.ip())
        .map_err(|e| format!("UPnP: cannot tell this machine's address on {}: {e}", gateway.addr))?;
    let local = SocketAddr::new(local_ip, port);
    let public = gateway.get_external_ip().map_err(|e| format!("UPnP: {e}"))?;
    // The search takes seconds: a server that stopped meanwhile asks for nothing.
    if stop.load(Ordering::Relaxed) {
        return Err("stopped".into());
    }
    let add = |lease: u32| -> Result<u16, (bool, String)> {
        use igd_next::{AddAnyPortError, AddPortError};
        match gateway.add_port(igd_next::PortMappingProtocol::UDP, want, local, lease, DESCRIPTION) {
            Ok(()) => Ok(want),
            Err(AddPortError::OnlyPermanentLeasesSupported) => Err((true, String::new())),
            // The port is taken on the router (another machine's game): any other.
            Err(_) => match gateway.add_any_port(igd_next::PortMappingProtocol::UDP, local, lease, DESCRIPTION) {
                Ok(p) => Ok(p),
                Err(AddAnyPortError::OnlyPermanentLeasesSupported) => Err((true, String::new())),
                Err(e) => Err((false, format!("UPnP: {e}"))),
            },
        }
    };
    let refused = |(_, e): (bool, String)| if e.is_empty() { "UPnP: the router refused every lease".into() } else { e };
    let (external_port, permanent) = match add(if permanent { 0 } else { LEASE.as_secs() as u32 }) {
        Ok(p) => (p, permanent),
        // Some routers take only mappings without an end (UPnP error 725): one of those,
        // which this game removes when it stops (and renews all the same).
        Err((true, _)) if !permanent => {
            let p = add(0).map_err(refused)?;
            tracing::info!("the router gives only permanent UPnP mappings: this one is removed when the game stops");
            (p, true)
        }
        Err(e) => return Err(refused(e)),
    };
    let external = SocketAddr::new(public, external_port);
    warn_if_not_public(external);
    Ok((Held::Upnp { gateway: Box::new(gateway), external_port, local, permanent }, external, "UPnP"))
}

/// Whether friends on the internet could reach `ip`: not a private, shared (carrier-grade
/// NAT, 100.64.0.0/10), link-local or otherwise local address.
pub fn is_public(ip: IpAddr) -> bool {
    match ip.to_canonical() {
        IpAddr::V4(a) => {
            let shared = a.octets()[0] == 100 && (a.octets()[1] & 0xc0) == 64;
            !(a.is_private() || a.is_loopback() || a.is_link_local() || a.is_unspecified() || shared)
        }
        IpAddr::V6(a) => !(a.is_loopback() || a.is_unspecified() || (a.segments()[0] & 0xfe00) == 0xfc00),
    }
}

fn warn_if_not_public(external: SocketAddr) {
    if !is_public(external.ip()) {
        // A router behind another NAT (carrier-grade): the mapping helps nobody outside.
        tracing::warn!(%external, "the router's own outside address is not a public one: it is behind another NAT, and friends on the internet cannot reach this machine through it (a relay can: see SERVER.md)");
    }
}

fn unmap(h: &Held) {
    match h {
        Held::Pmp { gateway, internal_port } => {
            // Our port with a lifetime of 0 removes it (RFC 6886).
            if let Ok(mut n) = natpmp::Natpmp::new_with(*gateway) {
                if n.send_port_mapping_request(natpmp::Protocol::UDP, *internal_port, 0, 0).is_ok() {
                    let start = Instant::now();
                    while start.elapsed() < Duration::from_secs(1) {
                        match n.read_response_or_retry() {
                            Err(natpmp::Error::NATPMP_TRYAGAIN) => std::thread::sleep(Duration::from_millis(25)),
                            _ => break,
                        }
                    }
                }
            }
            tracing::info!("removed the NAT-PMP port mapping");
        }
        Held::Upnp { gateway, external_port, local, .. } => {
            match gateway.remove_port(igd_next::PortMappingProtocol::UDP, *external_port) {
                Ok(()) => tracing::info!(%local, "removed the UPnP port mapping"),
                Err(e) => tracing::warn!("could not remove the UPnP port mapping: {e}"),
            }
        }
    }
}
