//! Socket options and single-datagram reads the standard library does not offer: kernel receive
//! timestamps, DSCP, TCP congestion control, peer credentials.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};

use crate::fd::{cvt, setsockopt_bytes, setsockopt_int};

/// Asks the kernel to stamp every datagram `fd` receives with its arrival time
/// (`SO_TIMESTAMPNS`: the real-time clock in ns, taken in the receive path, before the reading
/// thread wakes up), read with [`recv_timestamped`] or [`crate::recv::RecvBatch::recv`].
pub fn enable_rx_timestamps(fd: BorrowedFd<'_>) -> io::Result<()> {
    setsockopt_int(fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1)
}

/// Receives one datagram into `buf` (blocking per the socket's settings); returns its length and
/// its kernel arrival time in `CLOCK_REALTIME` nanoseconds when the socket has
/// [`enable_rx_timestamps`] (else `None`).
pub fn recv_timestamped(fd: RawFd, buf: &mut [u8]) -> io::Result<(usize, Option<u64>)> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // Room for one `struct timespec` control message, 8-aligned.
    let mut cbuf = [0u64; 8];
    // SAFETY: msghdr is plain old data; all-zero is a valid value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&cbuf) as _;
    // SAFETY: `iov` points at `buf`, `msg_control` at `cbuf`, both writable and alive for the
    // call, with their exact sizes given.
    let n = unsafe { libc::recvmsg(fd, &mut msg, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut stamp = None;
    // SAFETY: the CMSG_* macros walk the control buffer the kernel filled, bounded by
    // `msg_controllen`; a timestamp message's data is a `timespec`, read unaligned.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                let ts: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                stamp = Some((ts.tv_sec as u64) * 1_000_000_000 + ts.tv_nsec as u64);
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok((n as usize, stamp))
}

/// Who is at the other end of a connected Unix socket, as the kernel recorded it when the peer
/// connected (`SO_PEERCRED`, `SO_PEERGROUPS`): it cannot be forged by the peer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerCred {
    /// Process id.
    pub pid: i32,
    /// Effective user id.
    pub uid: u32,
    /// Effective group id.
    pub gid: u32,
    /// Supplementary groups (empty where the kernel cannot tell, before Linux 4.13).
    pub groups: Vec<u32>,
}

/// The credentials of the peer of the connected Unix socket `fd`.
pub fn peer_credentials(fd: RawFd) -> io::Result<PeerCred> {
    let mut c = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `c` and `len` live for the call and `len` is `c`'s exact size.
    cvt(unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut c as *mut libc::ucred).cast(),
            &mut len,
        )
    })?;
    let mut groups = vec![0 as libc::gid_t; 64];
    let mut glen = (groups.len() * std::mem::size_of::<libc::gid_t>()) as libc::socklen_t;
    // SAFETY: `groups` has room for `glen` bytes and lives for the call; on success the kernel
    // sets `glen` to the bytes written (ERANGE if more than 64 groups: then none are used).
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_PEERGROUPS,
            groups.as_mut_ptr().cast(),
            &mut glen,
        )
    };
    let n = if r == 0 {
        glen as usize / std::mem::size_of::<libc::gid_t>()
    } else {
        0
    };
    groups.truncate(n.min(64));
    Ok(PeerCred {
        pid: c.pid,
        uid: c.uid,
        gid: c.gid,
        groups,
    })
}

/// Sets the IPv4 TOS byte of `fd`'s packets to `dscp << 2` (ECN bits left to the kernel).
pub fn set_dscp(fd: &impl AsRawFd, dscp: u8) -> io::Result<()> {
    let tos: libc::c_int = i32::from(dscp & 0x3f) << 2;
    setsockopt_bytes(
        fd.as_raw_fd(),
        libc::IPPROTO_IP,
        libc::IP_TOS,
        &tos.to_ne_bytes(),
    )
}

/// Sets the congestion control algorithm of TCP socket `fd` (e.g. `cubic`).
pub fn set_congestion(fd: &impl AsRawFd, algo: &str) -> io::Result<()> {
    setsockopt_bytes(
        fd.as_raw_fd(),
        libc::IPPROTO_TCP,
        libc::TCP_CONGESTION,
        algo.as_bytes(),
    )
}
