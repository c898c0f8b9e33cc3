//! The probes' wire formats as pure codecs: building request bytes and parsing reply bytes, no
//! sockets, no clock, no allocation, no panic on any input. One home for every user: the
//! [`crate::agent::Agent`] builds and parses with them, the daemon's echo client and `purple
//! reflector` (the UDP server) use them too.
//!
//! - [`icmp`]: ICMP echo (type 8/0) and timestamp (type 13/14) messages.
//! - [`udp`]: our UDP timestamp echo protocol (`purple reflector`).
//! - [`WallAnchor`]: the wall clock the probes are stamped with, anchored once by the caller.

pub mod icmp;
pub mod udp;

use crate::Instant;

/// Milliseconds in a day (ICMP timestamps count milliseconds since midnight UTC).
pub const MS_PER_DAY: u32 = 86_400_000;

/// Nanoseconds in a day.
pub const NS_PER_DAY: i64 = 86_400_000_000_000;

/// A wall clock for probe timestamps: the caller reads its real-time clock once (`wall_us`, µs
/// since the Unix epoch, at monotonic instant `at`), and wall time then advances with the
/// monotonic time it passes in. Steps of the system clock (NTP, a router that boots in 1970)
/// therefore never look like delay; only the reflectors' clocks can step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WallAnchor {
    /// The monotonic instant of the reading.
    pub at: Instant,
    /// The real-time clock at `at`, µs since the Unix epoch.
    pub wall_us: u64,
}

impl WallAnchor {
    /// Wall time at `t`, ns since the Unix epoch (earlier than the anchor: extrapolated back,
    /// saturating at 0).
    pub fn wall_ns(&self, t: Instant) -> u64 {
        let base = self.wall_us.saturating_mul(1_000);
        if t >= self.at {
            base.saturating_add(t.as_nanos() - self.at.as_nanos())
        } else {
            base.saturating_sub(self.at.as_nanos() - t.as_nanos())
        }
    }

    /// Wall time at `t`, µs since the Unix epoch.
    pub fn wall_us(&self, t: Instant) -> u64 {
        self.wall_ns(t) / 1_000
    }

    /// Wall time at `t` in ms since midnight UTC (what ICMP timestamps carry).
    pub fn ms_since_midnight(&self, t: Instant) -> u32 {
        ((self.wall_ns(t) / 1_000_000) % u64::from(MS_PER_DAY)) as u32
    }

    /// Wall time at `t` in ns since midnight UTC.
    pub fn ns_since_midnight(&self, t: Instant) -> i64 {
        (self.wall_ns(t) % NS_PER_DAY as u64) as i64
    }
}

/// Folds a difference of two times-of-day (ns) into `(-12 h, 12 h]`: undoes a midnight wrap.
pub fn fold_day_ns(d: i64) -> i64 {
    let d = d.rem_euclid(NS_PER_DAY);
    if d > NS_PER_DAY / 2 {
        d - NS_PER_DAY
    } else {
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anchor_advances_with_the_monotonic_clock_and_wraps_at_midnight() {
        let day_us = u64::from(MS_PER_DAY) * 1_000;
        // 2 ms before midnight, at t = 5 s.
        let a = WallAnchor {
            at: Instant::from_secs(5),
            wall_us: 19_000 * day_us - 2_000,
        };
        assert_eq!(a.ms_since_midnight(Instant::from_secs(5)), MS_PER_DAY - 2);
        assert_eq!(a.ms_since_midnight(Instant::from_millis(5_003)), 1);
        assert_eq!(
            a.wall_us(Instant::from_millis(5_001)),
            19_000 * day_us - 1_000
        );
        assert_eq!(
            a.wall_us(Instant::from_secs(4)),
            19_000 * day_us - 1_002_000
        );
        assert_eq!(fold_day_ns(NS_PER_DAY - 5), -5);
        assert_eq!(fold_day_ns(-NS_PER_DAY + 7), 7);
        assert_eq!(fold_day_ns(NS_PER_DAY / 2), NS_PER_DAY / 2);
    }
}
