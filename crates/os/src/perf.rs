//! Counting perf events (`perf_event_open`), for the lab's CPU cost of a controller.

use std::io;

/// `struct perf_event_attr` up to `config1` (PERF_ATTR_SIZE_VER0, 64 bytes): all a counting
/// event needs.
#[repr(C)]
#[derive(Default)]
struct PerfEventAttr {
    kind: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
}

/// `perf_event_attr.inherit`: count the task's future threads and children too.
const PERF_ATTR_INHERIT: u64 = 1 << 1;
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 8;

/// Opens a counting perf event of `kind` (PERF_TYPE_*) and `config` on process `pid` (its
/// main thread), inherited by every thread and child it creates from now on, counting from
/// now on every CPU. Needs CAP_PERFMON or CAP_SYS_ADMIN (root) for another user's process or
/// a tracepoint. Read it with [`perf_read`].
pub fn perf_counter(kind: u32, config: u64, pid: u32) -> io::Result<std::fs::File> {
    use std::os::fd::FromRawFd;
    let attr = PerfEventAttr {
        kind,
        size: std::mem::size_of::<PerfEventAttr>() as u32,
        config,
        flags: PERF_ATTR_INHERIT,
        ..PerfEventAttr::default()
    };
    let pid =
        libc::pid_t::try_from(pid).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: `attr` is a live, initialised perf_event_attr whose `size` field says how many
    // bytes the kernel may read; the other arguments are plain integers.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            &attr as *const PerfEventAttr,
            pid,
            -1 as libc::c_int,
            -1 as libc::c_int,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    let fd = libc::c_int::try_from(fd).map_err(|_| io::Error::from(io::ErrorKind::InvalidData))?;
    // SAFETY: perf_event_open returned a new descriptor that nothing else owns.
    Ok(std::fs::File::from(unsafe {
        std::os::fd::OwnedFd::from_raw_fd(fd)
    }))
}

/// The value of a counting perf event opened by [`perf_counter`]: its own count plus those of
/// every inherited child, living or exited.
pub fn perf_read(f: &std::fs::File) -> io::Result<u64> {
    use std::io::Read;
    let mut b = [0u8; 8];
    let mut r: &std::fs::File = f;
    r.read_exact(&mut b)?;
    Ok(u64::from_ne_bytes(b))
}
