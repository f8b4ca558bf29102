//! The server's UDP receive path: a large receive buffer, datagrams read in batches
//! (`recvmmsg` on Linux, one `recv_from` at a time elsewhere), the kernel's own count of
//! datagrams it dropped for a full buffer (`SO_RXQ_OVFL`), and waiting for the socket to
//! become readable (so the time between ticks drains the socket instead of sleeping).

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

/// The receive buffer asked for: about a quarter second of a 16 MB/s flood. The system
/// may cap it (Linux: `net.core.rmem_max`; `docs/SERVER.md` says how to raise it).
pub const RECEIVE_BUFFER: usize = 4 << 20;
/// Datagrams read per system call.
pub const BATCH: usize = 32;
/// Bytes kept of each datagram: a sealed ENet datagram is at most ENet's largest MTU plus
/// the 19 bytes of sealing; anything longer is cut and then dropped as garbage.
pub const SLOT: usize = 4096 + 64;

/// One datagram of a batch.
pub struct Datagram {
    pub from: SocketAddr,
    pub len: usize,
    /// Longer than `SLOT` (cut by the kernel): never valid.
    pub truncated: bool,
    /// Where its bytes are in the batch's buffer.
    slot: usize,
}

pub struct Receiver {
    bufs: Vec<u8>,
    pub got: Vec<Datagram>,
    /// What the kernel says it dropped on this socket for a full buffer (since it opened).
    pub kernel_dropped: u64,
}

impl Default for Receiver {
    /// Empty: the buffers are made on first use (taking a receiver out and putting it back
    /// must cost nothing).
    fn default() -> Self {
        Receiver { bufs: Vec::new(), got: Vec::new(), kernel_dropped: 0 }
    }
}

impl Receiver {
    pub fn data(&self, i: usize) -> &[u8] {
        let d = &self.got[i];
        &self.bufs[d.slot * SLOT..d.slot * SLOT + d.len.min(SLOT)]
    }
}

/// Asks for a `RECEIVE_BUFFER`-byte receive buffer (past the system's cap where the
/// process may) and for the kernel's drop counter; returns the size the system granted.
pub fn tune(sock: &UdpSocket) -> usize {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        let fd = sock.as_raw_fd();
        let set = |opt: libc::c_int, v: libc::c_int| unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                opt,
                &v as *const libc::c_int as *const libc::c_void,
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            ) == 0
        };
        if !set(libc::SO_RCVBUFFORCE, RECEIVE_BUFFER as libc::c_int) {
            set(libc::SO_RCVBUF, RECEIVE_BUFFER as libc::c_int);
        }
        set(libc::SO_RXQ_OVFL, 1);
        let mut v: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        let ok = unsafe {
            libc::getsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_RCVBUF,
                &mut v as *mut libc::c_int as *mut libc::c_void,
                &mut len,
            )
        } == 0;
        // Linux reports twice the size asked (half is for its own bookkeeping).
        if ok {
            (v / 2).max(0) as usize
        } else {
            0
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = sock;
        0
    }
}

/// Waits until the socket has something to read, or `timeout` passes.
pub fn wait_readable(sock: &UdpSocket, timeout: Duration) {
    #[cfg(unix)]
    {
        use std::os::fd::AsRawFd;
        let mut p = libc::pollfd { fd: sock.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        let ms = timeout.as_micros().div_ceil(1000).min(i32::MAX as u128) as libc::c_int;
        unsafe {
            libc::poll(&mut p, 1, ms);
        }
    }
    #[cfg(not(unix))]
    {
        let _ = sock;
        std::thread::sleep(timeout.min(Duration::from_millis(1)));
    }
}

/// Reads up to `BATCH` datagrams without blocking into `r.got`; an empty batch when there
/// are none.
pub fn receive(sock: &UdpSocket, r: &mut Receiver) -> io::Result<()> {
    r.got.clear();
    if r.bufs.len() < SLOT * BATCH {
        r.bufs = vec![0; SLOT * BATCH];
    }
    #[cfg(target_os = "linux")]
    {
        receive_linux(sock, r)
    }
    #[cfg(not(target_os = "linux"))]
    {
        for i in 0..BATCH {
            match sock.recv_from(&mut r.bufs[i * SLOT..(i + 1) * SLOT]) {
                Ok((n, from)) => r.got.push(Datagram { from, len: n, truncated: n >= SLOT, slot: i }),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::ConnectionReset => continue,
                Err(e) if r.got.is_empty() => return Err(e),
                Err(_) => break,
            }
        }
        Ok(())
    }
}

#[cfg(target_os = "linux")]
fn receive_linux(sock: &UdpSocket, r: &mut Receiver) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // Ancillary data is read through `cmsghdr` pointers: its buffer must be aligned as one.
    #[repr(C, align(8))]
    struct Control([u8; 64]);
    let mut names: [libc::sockaddr_storage; BATCH] = unsafe { std::mem::zeroed() };
    let mut control: [Control; BATCH] = std::array::from_fn(|_| Control([0; 64]));
    let mut iov: [libc::iovec; BATCH] = unsafe { std::mem::zeroed() };
    let mut msgs: [libc::mmsghdr; BATCH] = unsafe { std::mem::zeroed() };
    // One pointer into the buffers, offset for each slot (no re-borrow per slot).
    let base = r.bufs.as_mut_ptr();
    for i in 0..BATCH {
        // SAFETY: `bufs` holds BATCH slots of SLOT bytes (checked by the caller).
        iov[i] = libc::iovec { iov_base: unsafe { base.add(i * SLOT) } as *mut libc::c_void, iov_len: SLOT };
        let h = &mut msgs[i].msg_hdr;
        h.msg_name = &mut names[i] as *mut libc::sockaddr_storage as *mut libc::c_void;
        h.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        h.msg_iov = &mut iov[i];
        h.msg_iovlen = 1;
        h.msg_control = control[i].0.as_mut_ptr() as *mut libc::c_void;
        h.msg_controllen = std::mem::size_of::<Control>() as _;
    }
    let n = unsafe {
        libc::recvmmsg(
            sock.as_raw_fd(),
            msgs.as_mut_ptr(),
            BATCH as libc::c_uint,
            libc::MSG_DONTWAIT,
            std::ptr::null_mut(),
        )
    };
    if n < 0 {
        let e = io::Error::last_os_error();
        return match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::ConnectionRefused | io::ErrorKind::ConnectionReset => Ok(()),
            _ => Err(e),
        };
    }
    for i in 0..n as usize {
        let h = &msgs[i].msg_hdr;
        // The drop counter rides as ancillary data on each datagram.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(h);
            while !c.is_null() {
                if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SO_RXQ_OVFL {
                    let v = std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const u32);
                    r.kernel_dropped = v as u64;
                }
                c = libc::CMSG_NXTHDR(h, c);
            }
        }
        let Some(from) = to_addr(&names[i]) else { continue };
        let len = msgs[i].msg_len as usize;
        r.got.push(Datagram { from, len, truncated: h.msg_flags & libc::MSG_TRUNC != 0, slot: i });
    }
    Ok(())
}

#[cfg(target_os = "linux")]
fn to_addr(s: &libc::sockaddr_storage) -> Option<SocketAddr> {
    use std::net::{Ipv4Addr, Ipv6Addr, SocketAddrV4, SocketAddrV6};
    match s.ss_family as libc::c_int {
        libc::AF_INET => {
            let a = unsafe { &*(s as *const libc::sockaddr_storage as *const libc::sockaddr_in) };
            Some(SocketAddr::V4(SocketAddrV4::new(
                Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr)),
                u16::from_be(a.sin_port),
            )))
        }
        libc::AF_INET6 => {
            let a = unsafe { &*(s as *const libc::sockaddr_storage as *const libc::sockaddr_in6) };
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(a.sin6_addr.s6_addr),
                u16::from_be(a.sin6_port),
                a.sin6_flowinfo,
                a.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_carry_each_datagram_with_its_sender_and_cut_the_oversized() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        rx.set_nonblocking(true).unwrap();
        tune(&rx);
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let to = rx.local_addr().unwrap();
        for k in 0..40u8 {
            tx.send_to(&vec![k; 10 + k as usize], to).unwrap();
        }
        tx.send_to(&vec![1u8; SLOT + 100], to).unwrap();
        let mut r = Receiver::default();
        let mut seen = Vec::new();
        for _ in 0..100 {
            receive(&rx, &mut r).unwrap();
            for i in 0..r.got.len() {
                assert_eq!(r.got[i].from, tx.local_addr().unwrap());
                seen.push((r.data(i).to_vec(), r.got[i].truncated));
            }
            if seen.len() == 41 {
                break;
            }
            wait_readable(&rx, Duration::from_millis(10));
        }
        assert_eq!(seen.len(), 41);
        for (k, (d, cut)) in seen[..40].iter().enumerate() {
            assert_eq!(d, &vec![k as u8; 10 + k], "datagram {k}");
            assert!(!cut);
        }
        assert!(seen[40].1, "an oversized datagram is marked cut");
        receive(&rx, &mut r).unwrap();
        assert!(r.got.is_empty(), "nothing left: an empty batch, not an error");
    }
}
