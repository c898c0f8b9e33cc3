//! Helpers shared by the wrappers: errno conversion, descriptor ownership, socket options.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

/// A system call's `int` result: negative means `errno` holds the error.
pub(crate) fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// Takes ownership of the descriptor a creating system call returned (or its error).
pub(crate) fn owned(fd: libc::c_int) -> io::Result<OwnedFd> {
    let fd = cvt(fd)?;
    // SAFETY: `fd` was just returned by a successful system call that creates a descriptor, so
    // it is open and owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `setsockopt(fd, level, name, &v, sizeof v)` for an `int` option.
pub(crate) fn setsockopt_int(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    v: libc::c_int,
) -> io::Result<()> {
    setsockopt_bytes(fd, level, name, &v.to_ne_bytes())
}

/// `setsockopt(fd, level, name, val, len)` for an option given as bytes.
pub(crate) fn setsockopt_bytes(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    val: &[u8],
) -> io::Result<()> {
    // SAFETY: `val` is a live byte slice for the duration of the call and its exact length is
    // passed alongside; the kernel only reads it.
    cvt(unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            val.as_ptr().cast(),
            val.len() as libc::socklen_t,
        )
    })
    .map(drop)
}

/// Reads the 8-byte counter of a timerfd or eventfd; 0 when nothing was there.
pub(crate) fn read_u64(fd: RawFd) -> u64 {
    let mut v = 0u64;
    // SAFETY: reads at most 8 bytes into `v`, which is 8 bytes long.
    let r = unsafe { libc::read(fd, (&mut v as *mut u64).cast(), 8) };
    if r == 8 {
        v
    } else {
        0
    }
}
