//! Where a worker's scripts were last: a page of memory the worker and the server share.
//! The worker writes the emitter it is resuming and the last `file:line` its instruction
//! hook saw; after a worker is killed (or dies) the server reads them, so the log can name
//! the line a script was on when it hung inside C, where no answer could say it.
//! Linux only (a `memfd`); elsewhere the page does not exist and reports say less.

use std::sync::atomic::{AtomicPtr, Ordering};

/// Bytes of the page: [u16 emitter length][u16 position length][emitter][position].
pub const PAGE: usize = 4096;
const FIELD: usize = 1024;

/// The worker's mapping of the page (null in the server and in workers without one).
static PAGE_PTR: AtomicPtr<u8> = AtomicPtr::new(std::ptr::null_mut());

fn put(base: *mut u8, slot: usize, s: &str) {
    let n = s.len().min(FIELD);
    // SAFETY: `base` maps PAGE bytes; slot 0 writes [4, 4 + FIELD), slot 1 writes
    // [4 + FIELD, 4 + 2 * FIELD), both inside the page.
    unsafe {
        std::ptr::copy_nonoverlapping(s.as_ptr(), base.add(4 + slot * FIELD), n);
        std::ptr::copy_nonoverlapping((n as u16).to_le_bytes().as_ptr(), base.add(slot * 2), 2);
    }
}

/// Whether this process notes positions (a worker with its page).
pub fn attached() -> bool {
    !PAGE_PTR.load(Ordering::Relaxed).is_null()
}

/// Notes the emitter about to be resumed (worker only; nothing otherwise).
pub fn note_emitter(name: &str) {
    let p = PAGE_PTR.load(Ordering::Relaxed);
    if !p.is_null() {
        put(p, 0, name);
        put(p, 1, "");
    }
}

/// Notes where the running script is (`file:line`; worker only).
pub fn note_pos(pos: &str) {
    let p = PAGE_PTR.load(Ordering::Relaxed);
    if !p.is_null() {
        put(p, 1, pos);
    }
}

/// Reads (emitter, position) from a page.
pub fn read(page: &[u8]) -> (String, String) {
    let field = |slot: usize| {
        let n = u16::from_le_bytes([page[slot * 2], page[slot * 2 + 1]]) as usize;
        let start = 4 + slot * FIELD;
        String::from_utf8_lossy(&page[start..start + n.min(FIELD)]).into_owned()
    };
    (field(0), field(1))
}

/// The server's side: a shared page to hand to one worker as its fd 3.
#[cfg(target_os = "linux")]
pub struct Page {
    pub fd: std::os::fd::OwnedFd,
    ptr: *mut u8,
}

// SAFETY: the mapping is only read through `snapshot`, after the worker is dead or when a
// torn read would cost nothing but a garbled position in a log line.
#[cfg(target_os = "linux")]
unsafe impl Send for Page {}

#[cfg(target_os = "linux")]
impl Page {
    pub fn new() -> Option<Page> {
        use std::os::fd::FromRawFd;
        // SAFETY: plain system calls on a descriptor this function owns.
        unsafe {
            let fd = libc::memfd_create(c"hailfire-worker".as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING);
            if fd < 0 {
                return None;
            }
            let fd = std::os::fd::OwnedFd::from_raw_fd(fd);
            use std::os::fd::AsRawFd;
            if libc::ftruncate(fd.as_raw_fd(), PAGE as libc::off_t) != 0 {
                return None;
            }
            // Its size is fixed: a worker cannot shrink it under the server's mapping
            // (reading past the end would be a SIGBUS in the server).
            let seals = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL;
            if libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, seals) != 0 {
                return None;
            }
            let p = libc::mmap(
                std::ptr::null_mut(),
                PAGE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            );
            if p == libc::MAP_FAILED {
                return None;
            }
            Some(Page { fd, ptr: p as *mut u8 })
        }
    }

    pub fn snapshot(&self) -> (String, String) {
        let mut copy = [0u8; PAGE];
        // SAFETY: the mapping is PAGE bytes long and lives as long as self.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr, copy.as_mut_ptr(), PAGE) };
        read(&copy)
    }
}

#[cfg(target_os = "linux")]
impl Drop for Page {
    fn drop(&mut self) {
        // SAFETY: unmapping what `new` mapped.
        unsafe { libc::munmap(self.ptr as *mut libc::c_void, PAGE) };
    }
}

/// The worker's side: maps the page handed to it as fd 3, if there is one.
#[cfg(target_os = "linux")]
pub fn attach() -> bool {
    // SAFETY: fd 3 is the page the server handed over (or not open: mmap fails).
    unsafe {
        let p = libc::mmap(std::ptr::null_mut(), PAGE, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, 3, 0);
        if p == libc::MAP_FAILED {
            return false;
        }
        libc::close(3);
        PAGE_PTR.store(p as *mut u8, Ordering::Relaxed);
    }
    true
}

#[cfg(not(target_os = "linux"))]
pub fn attach() -> bool {
    false
}
