//! Clocks and the timerfd.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use crate::fd::{cvt, owned, read_u64};

/// Nanoseconds of `clock`, one that always exists on Linux.
fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer; the callers pass only clocks every Linux has
    // (monotonic, realtime, this thread's CPU time), so the call cannot fail.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

/// Nanoseconds of `CLOCK_MONOTONIC`.
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// CPU time the calling thread has used, in nanoseconds (`CLOCK_THREAD_CPUTIME_ID`).
pub fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// Nanoseconds of `CLOCK_REALTIME`, the clock kernel receive timestamps (`SO_TIMESTAMPNS`) use.
pub fn realtime_ns() -> u64 {
    clock_ns(libc::CLOCK_REALTIME)
}

/// A non-blocking `CLOCK_MONOTONIC` timerfd.
#[derive(Debug)]
pub struct TimerFd {
    fd: OwnedFd,
}

impl TimerFd {
    /// Creates a disarmed timer.
    pub fn new() -> io::Result<TimerFd> {
        // SAFETY: plain timerfd_create(2) call with constant arguments.
        let fd = owned(unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        })?;
        Ok(TimerFd { fd })
    }

    /// The descriptor (for epoll).
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Arms the timer to fire once at monotonic time `at_ns` (0 disarms).
    pub fn set_abs(&self, at_ns: u64) -> io::Result<()> {
        let at = at_ns.max(u64::from(at_ns != 0));
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: (at / 1_000_000_000) as libc::time_t,
                tv_nsec: (at % 1_000_000_000) as libc::c_long,
            },
        };
        // SAFETY: `spec` is a valid itimerspec; the old-value pointer may be null.
        cvt(unsafe {
            libc::timerfd_settime(
                self.fd.as_raw_fd(),
                libc::TFD_TIMER_ABSTIME,
                &spec,
                std::ptr::null_mut(),
            )
        })
        .map(drop)
    }

    /// Reads (and so clears) the expiry count; 0 when it had not fired.
    pub fn clear(&self) -> u64 {
        read_u64(self.fd.as_raw_fd())
    }
}
