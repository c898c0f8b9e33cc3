//! Reading every waiting datagram of a socket with its source and kernel arrival timestamp in
//! one `recvmmsg` (the daemon's probe sockets and passive capture). Turn timestamps on with
//! [`crate::enable_rx_timestamps`].
//!
//! Why timestamps: the event loop reads replies when it wakes for its own schedule (the next
//! probe or control step), not when each reply arrives, so it wakes a third as often; the
//! kernel's arrival time keeps the delay samples exact (more exact than a wake-up time, which
//! carries the scheduler's latency).

use std::io;
use std::net::{SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsRawFd, BorrowedFd};

/// Most datagrams one [`RecvBatch::recv`] reads.
pub const BATCH: usize = 16;
/// Bytes kept of each datagram (probe replies are under 100 bytes; an ICMP socket also sees
/// other ICMP messages, whose excess is cut off and flagged).
pub const SLOT: usize = 2048;
/// Room for the control messages of one datagram (one `SCM_TIMESTAMPNS`: 16 + 16 bytes), in
/// `u64`s so the buffer is aligned for `cmsghdr`.
const CTRL_WORDS: usize = 8;

/// One datagram read by [`RecvBatch::recv`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Received {
    /// Bytes stored in its slot ([`RecvBatch::get`] gives them), at most [`SLOT`].
    pub len: usize,
    /// Whether the datagram was longer than [`SLOT`] (the rest is lost).
    pub truncated: bool,
    /// Its source (unspecified `0.0.0.0:0` when the kernel gave none).
    pub from: SocketAddr,
    /// The kernel's arrival time on the real-time clock, ns since the Unix epoch (`None` when
    /// the socket has no timestamps on).
    pub rx_realtime_ns: Option<u64>,
}

impl Default for Received {
    fn default() -> Self {
        Received {
            len: 0,
            truncated: false,
            from: SocketAddr::from(([0u8; 4], 0)),
            rx_realtime_ns: None,
        }
    }
}

/// Buffers for reading up to [`BATCH`] datagrams per system call, allocated once (about 33 KiB)
/// and reused: a read allocates nothing.
pub struct RecvBatch {
    bufs: Box<[[u8; SLOT]; BATCH]>,
    addrs: [libc::sockaddr_storage; BATCH],
    ctrl: [[u64; CTRL_WORDS]; BATCH],
    got: [Received; BATCH],
}

impl std::fmt::Debug for RecvBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecvBatch").finish_non_exhaustive()
    }
}

impl Default for RecvBatch {
    fn default() -> Self {
        Self::new()
    }
}

impl RecvBatch {
    /// Empty buffers.
    pub fn new() -> Self {
        RecvBatch {
            bufs: Box::new([[0u8; SLOT]; BATCH]),
            // SAFETY: sockaddr_storage is plain old data; all zeroes is a valid (unspecified)
            // address.
            addrs: unsafe { std::mem::zeroed() },
            ctrl: [[0u64; CTRL_WORDS]; BATCH],
            got: [Received::default(); BATCH],
        }
    }

    /// Reads the datagrams waiting on `fd` without blocking, up to [`BATCH`], in one
    /// `recvmmsg`; returns how many (0 when none waits). Datagram `i` is then
    /// [`RecvBatch::get`]`(i)`. Fewer than [`BATCH`] means the socket was drained at the time
    /// of the call; exactly [`BATCH`] means more may wait.
    pub fn recv(&mut self, fd: BorrowedFd<'_>) -> io::Result<usize> {
        // SAFETY: iovec and mmsghdr are plain old data; all-zero values are valid.
        let mut iov: [libc::iovec; BATCH] = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        let mut msgs: [libc::mmsghdr; BATCH] = unsafe { std::mem::zeroed() };
        for i in 0..BATCH {
            iov[i] = libc::iovec {
                iov_base: self.bufs[i].as_mut_ptr().cast(),
                iov_len: SLOT,
            };
            let h = &mut msgs[i].msg_hdr;
            h.msg_iov = &mut iov[i];
            h.msg_iovlen = 1;
            h.msg_name = (&mut self.addrs[i] as *mut libc::sockaddr_storage).cast();
            h.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            h.msg_control = self.ctrl[i].as_mut_ptr().cast();
            h.msg_controllen = (CTRL_WORDS * 8) as _;
        }
        // SAFETY: every pointer in `msgs` points into `iov`, `self.bufs`, `self.addrs` or
        // `self.ctrl`, all alive and exclusively borrowed for the call, with the lengths given
        // being exactly their sizes; `msgs` holds BATCH initialised entries.
        let r = unsafe {
            libc::recvmmsg(
                fd.as_raw_fd(),
                msgs.as_mut_ptr(),
                BATCH as libc::c_uint,
                libc::MSG_DONTWAIT as _,
                std::ptr::null_mut(),
            )
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(0),
                _ => Err(e),
            };
        }
        let n = (r as usize).min(BATCH);
        for (i, m) in msgs.iter().enumerate().take(n) {
            let h = &m.msg_hdr;
            self.got[i] = Received {
                len: (m.msg_len as usize).min(SLOT),
                truncated: h.msg_flags & libc::MSG_TRUNC != 0,
                from: sockaddr(&self.addrs[i], h.msg_namelen),
                rx_realtime_ns: timestamp(h),
            };
        }
        Ok(n)
    }

    /// Datagram `i` of the last [`RecvBatch::recv`] and its bytes (`i` below the count it
    /// returned; a higher `i` gives a stale or empty slot).
    pub fn get(&self, i: usize) -> (Received, &[u8]) {
        let i = i.min(BATCH - 1);
        let r = self.got[i];
        (r, &self.bufs[i][..r.len])
    }
}

/// The source address the kernel wrote (`len` bytes of `ss`).
fn sockaddr(ss: &libc::sockaddr_storage, len: libc::socklen_t) -> SocketAddr {
    let len = len as usize;
    match libc::c_int::from(ss.ss_family) {
        libc::AF_INET if len >= std::mem::size_of::<libc::sockaddr_in>() => {
            // SAFETY: the family says the storage holds a sockaddr_in, which it is large and
            // aligned enough for.
            let a = unsafe { &*(ss as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
            SocketAddr::V4(SocketAddrV4::new(
                u32::from_be(a.sin_addr.s_addr).into(),
                u16::from_be(a.sin_port),
            ))
        }
        libc::AF_INET6 if len >= std::mem::size_of::<libc::sockaddr_in6>() => {
            // SAFETY: as above, for sockaddr_in6.
            let a = unsafe { &*(ss as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>() };
            SocketAddr::V6(SocketAddrV6::new(
                a.sin6_addr.s6_addr.into(),
                u16::from_be(a.sin6_port),
                u32::from_be(a.sin6_flowinfo),
                a.sin6_scope_id,
            ))
        }
        _ => SocketAddr::from(([0u8; 4], 0)),
    }
}

/// The `SCM_TIMESTAMPNS` control message of `h`, ns since the Unix epoch.
fn timestamp(h: &libc::msghdr) -> Option<u64> {
    // SAFETY: `h` is a message header the kernel just filled: msg_control points at our
    // control buffer (still alive) and msg_controllen says how much of it holds messages, which
    // is what CMSG_FIRSTHDR / CMSG_NXTHDR walk, never past that length.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(h);
        while !c.is_null() {
            let cm = &*c;
            let want = libc::CMSG_LEN(std::mem::size_of::<libc::timespec>() as u32) as usize;
            if cm.cmsg_level == libc::SOL_SOCKET
                && cm.cmsg_type == libc::SCM_TIMESTAMPNS
                && cm.cmsg_len as usize >= want
            {
                let ts: libc::timespec =
                    std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<libc::timespec>());
                let s = u64::try_from(ts.tv_sec).ok()?;
                let ns = u64::try_from(ts.tv_nsec).ok()?;
                return Some(s.saturating_mul(1_000_000_000).saturating_add(ns));
            }
            c = libc::CMSG_NXTHDR(h, c);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::enable_rx_timestamps;
    use std::net::UdpSocket;
    use std::os::fd::AsFd;

    #[test]
    fn reads_a_burst_in_one_call_with_sources_and_kernel_timestamps() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        enable_rx_timestamps(rx.as_fd()).unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut b = RecvBatch::new();
        assert_eq!(b.recv(rx.as_fd()).unwrap(), 0, "nothing waits yet");
        #[allow(clippy::disallowed_methods)] // the test compares with the kernel's clock
        let before = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64;
        for k in 0..3u8 {
            tx.send_to(&[k; 5], rx.local_addr().unwrap()).unwrap();
        }
        let big = vec![7u8; SLOT + 100];
        tx.send_to(&big, rx.local_addr().unwrap()).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert_eq!(b.recv(rx.as_fd()).unwrap(), 4);
        let mut last = before;
        for k in 0..3u8 {
            let (r, bytes) = b.get(usize::from(k));
            assert_eq!(bytes, &[k; 5]);
            assert_eq!(r.from, tx.local_addr().unwrap());
            assert!(!r.truncated);
            let t = r.rx_realtime_ns.expect("timestamps are on");
            assert!(t >= last, "arrival order and after the send: {t} < {last}");
            last = t;
        }
        let (r, bytes) = b.get(3);
        assert!(r.truncated && bytes.len() == SLOT);
        assert_eq!(b.recv(rx.as_fd()).unwrap(), 0, "drained");
    }

    #[test]
    fn without_timestamps_on_the_arrival_time_is_none() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.send_to(b"x", rx.local_addr().unwrap()).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let mut b = RecvBatch::new();
        assert_eq!(b.recv(rx.as_fd()).unwrap(), 1);
        assert_eq!(b.get(0).0.rx_realtime_ns, None);
    }
}
