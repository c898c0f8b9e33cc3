//! The few socket options std does not expose: `IP_TOS` and `TCP_CONGESTION`.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::AsRawFd;

fn setsockopt(fd: &impl AsRawFd, level: i32, name: i32, val: &[u8]) -> io::Result<()> {
    // SAFETY: `val` is a live byte slice for the duration of the call and its length is passed
    // alongside; the descriptor is owned by `fd` and open.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            val.as_ptr().cast(),
            val.len() as libc::socklen_t,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Sets the IPv4 TOS byte of `fd`'s packets to `dscp << 2` (ECN bits left to the kernel).
pub fn set_dscp(fd: &impl AsRawFd, dscp: u8) -> io::Result<()> {
    let tos: libc::c_int = i32::from(dscp & 0x3f) << 2;
    setsockopt(fd, libc::IPPROTO_IP, libc::IP_TOS, &tos.to_ne_bytes())
}

/// Sets the congestion control algorithm of TCP socket `fd` (e.g. `cubic`).
pub fn set_congestion(fd: &impl AsRawFd, algo: &str) -> io::Result<()> {
    setsockopt(fd, libc::IPPROTO_TCP, libc::TCP_CONGESTION, algo.as_bytes())
}

/// Sends `SIGTERM` to process `pid` (errors ignored: it may have exited already).
pub fn terminate(pid: u32) {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return;
    };
    // SAFETY: kill(2) with a positive pid of a child we spawned; no memory is passed.
    unsafe {
        libc::kill(pid, libc::SIGTERM);
    }
}
