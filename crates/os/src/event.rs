//! epoll, eventfd and signalfd.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use crate::fd::{cvt, owned, read_u64};

/// A non-blocking eventfd, used to ask a running bridge to stop from another thread.
#[derive(Debug)]
pub struct EventFd {
    fd: OwnedFd,
}

impl EventFd {
    /// Creates one with count 0.
    pub fn new() -> io::Result<EventFd> {
        // SAFETY: plain eventfd(2) call with constant arguments.
        let fd = owned(unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) })?;
        Ok(EventFd { fd })
    }

    /// The descriptor (for epoll).
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Adds 1 to the count (wakes pollers).
    pub fn signal(&self) {
        let v = 1u64;
        // SAFETY: writes exactly the 8 bytes of `v`.
        unsafe { libc::write(self.fd.as_raw_fd(), (&v as *const u64).cast(), 8) };
    }

    /// Reads and clears the count.
    pub fn clear(&self) -> u64 {
        read_u64(self.fd.as_raw_fd())
    }
}

/// A signalfd for SIGINT and SIGTERM. Creating it blocks both signals in the calling thread
/// (threads spawned afterwards inherit the mask), so they are only delivered through it.
#[derive(Debug)]
pub struct SignalFd {
    fd: OwnedFd,
}

impl SignalFd {
    /// Blocks SIGINT and SIGTERM in this thread and returns a descriptor that reads them.
    pub fn termination() -> io::Result<SignalFd> {
        // SAFETY: sigset_t is plain data; sigemptyset initialises it before use, and the
        // pointers passed live for each call.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGINT);
            libc::sigaddset(&mut set, libc::SIGTERM);
            let r = libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
            if r != 0 {
                return Err(io::Error::from_raw_os_error(r));
            }
            let fd = owned(libc::signalfd(
                -1,
                &set,
                libc::SFD_NONBLOCK | libc::SFD_CLOEXEC,
            ))?;
            Ok(SignalFd { fd })
        }
    }

    /// The descriptor (for epoll).
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// An epoll instance whose events carry a `u64` token.
#[derive(Debug)]
pub struct Epoll {
    fd: OwnedFd,
}

/// Readable (`EPOLLIN`).
pub const READABLE: u32 = libc::EPOLLIN as u32;
/// Writable (`EPOLLOUT`).
pub const WRITABLE: u32 = libc::EPOLLOUT as u32;

impl Epoll {
    /// Creates an empty epoll set.
    pub fn new() -> io::Result<Epoll> {
        // SAFETY: plain epoll_create1(2) call.
        let fd = owned(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        Ok(Epoll { fd })
    }

    fn ctl(&self, op: libc::c_int, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event { events, u64: token };
        // SAFETY: `ev` is a valid epoll_event living for the call.
        cvt(unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), op, fd, &mut ev) }).map(drop)
    }

    /// Watches `fd` for `events` (level-triggered), reporting `token`.
    pub fn add(&self, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_ADD, fd, events, token)
    }

    /// Changes the events watched on `fd`.
    pub fn modify(&self, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_MOD, fd, events, token)
    }

    /// Stops watching `fd`.
    pub fn delete(&self, fd: RawFd) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_DEL, fd, 0, 0)
    }

    /// Waits up to `timeout_ms` (-1 forever, 0 poll) and stores the ready tokens in `out`
    /// (cleared first). EINTR is an empty result.
    pub fn wait(&self, out: &mut Vec<u64>, timeout_ms: i32) -> io::Result<()> {
        out.clear();
        const N: usize = 16;
        let mut evs = [libc::epoll_event { events: 0, u64: 0 }; N];
        // SAFETY: `evs` has room for N events and outlives the call.
        let r = unsafe {
            libc::epoll_wait(
                self.fd.as_raw_fd(),
                evs.as_mut_ptr(),
                N as libc::c_int,
                timeout_ms,
            )
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted {
                Ok(())
            } else {
                Err(e)
            };
        }
        for ev in evs.iter().take(r as usize) {
            let t = ev.u64;
            out.push(t);
        }
        Ok(())
    }
}
