//! The calling process and thread (identity, scheduling, memory) and signals to children.

use std::io;

use crate::fd::cvt;

/// Sets this thread's timer slack to 1 ns so timers fire when asked, not up to 50 µs later.
pub fn tight_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK takes an integer argument and only affects this thread.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
}

/// Puts the calling thread under `SCHED_FIFO` at `priority` (1..=99), so the shaper's release
/// times are served within microseconds even on a busy machine. The loop sleeps between release
/// times, but at saturation it runs continuously: the kernel's RT throttling (by default 95% of
/// each second) is what keeps other work alive then.
pub fn set_realtime(priority: i32) -> io::Result<()> {
    let p = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: `p` is a valid sched_param for the call; pid 0 is the calling thread.
    cvt(unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) }).map(drop)
}

/// The calling process's effective user id.
pub fn effective_uid() -> u32 {
    // SAFETY: geteuid(2) cannot fail and touches no memory.
    unsafe { libc::geteuid() }
}

/// Whether the process runs with effective uid 0 (root: namespaces, packet sockets, qdiscs).
pub fn is_root() -> bool {
    effective_uid() == 0
}

/// Hands memory the allocator holds but no longer uses back to the system (glibc's
/// `malloc_trim(0)`: the top of each heap and whole free pages inside them); a no-op on other C
/// libraries. Walks the heaps: call after freeing much, never per packet.
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only inspects and releases the allocator's own free memory.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// The signals purple sends to the processes it started.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signal {
    /// `SIGTERM`: asks to stop (our own tools stop cleanly on it).
    Term,
    /// `SIGKILL`: stops at once.
    Kill,
}

impl Signal {
    fn raw(self) -> libc::c_int {
        match self {
            Signal::Term => libc::SIGTERM,
            Signal::Kill => libc::SIGKILL,
        }
    }
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

/// Sends `sig` to every process of process group `pgid` (errors ignored: the group may be gone
/// already). Groups 0 and 1 (our own, init's) are refused.
pub fn signal_group(pgid: u32, sig: Signal) {
    let Ok(pgid) = libc::pid_t::try_from(pgid) else {
        return;
    };
    if pgid <= 1 {
        return;
    }
    // SAFETY: kill(2) with a negative pid (a process group we created with a child as its
    // leader); no memory is passed.
    unsafe {
        libc::kill(-pgid, sig.raw());
    }
}
