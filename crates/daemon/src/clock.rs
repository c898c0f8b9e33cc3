//! The daemon's clock: a monotonic [`qdisc::Instant`] for the agent, and the wall-clock anchor
//! ([`WallAnchor`]) its probe timestamps are made from: the system's real-time clock read once,
//! at start, then advanced by the monotonic clock. Steps of the system clock (NTP, a router that
//! boots in 1970) therefore never show up as delay jumps; only the reflectors' clocks can step,
//! and the agent's reply validation absorbs those.

use controller::wire::WallAnchor;
use qdisc::Instant;

/// Monotonic time and the anchored wall time.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    start: std::time::Instant,
    anchor: WallAnchor,
}

impl Default for Clock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock {
    /// A clock whose wall time starts at the system's real-time clock now.
    // The daemon is the I/O boundary: it reads the clocks the sans-IO agent is given.
    #[allow(clippy::disallowed_methods)]
    pub fn new() -> Self {
        let wall_us = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_micros() as u64)
            .unwrap_or(0);
        Clock {
            start: std::time::Instant::now(),
            anchor: WallAnchor {
                at: Instant::ZERO,
                wall_us,
            },
        }
    }

    /// Monotonic time since the clock was made.
    pub fn now(&self) -> Instant {
        Instant::from_nanos(self.start.elapsed().as_nanos() as u64)
    }

    /// The wall-clock anchor (the real-time clock at [`Instant::ZERO`] of [`Clock::now`]).
    pub fn anchor(&self) -> WallAnchor {
        self.anchor
    }

    /// The system's real-time clock now, ns since the Unix epoch: what the kernel's receive
    /// timestamps are on. Read once per wake-up, next to [`Clock::now`], to place arrivals
    /// with [`arrival`].
    // The daemon is the I/O boundary: it reads the clocks the sans-IO agent is given.
    #[allow(clippy::disallowed_methods)]
    pub fn realtime_ns(&self) -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0)
    }

    /// Anchored wall time at monotonic instant `t`, µs since the Unix epoch.
    pub fn wall_us(&self, t: Instant) -> u64 {
        self.anchor.wall_us(t)
    }

    /// Anchored wall time at `t`, ms since midnight UTC (what ICMP timestamps carry).
    pub fn ms_since_midnight(&self, t: Instant) -> u32 {
        self.anchor.ms_since_midnight(t)
    }
}

/// When a datagram arrived, on the monotonic clock: `now` (monotonic) minus its age on the
/// real-time clock (`real_now_ns`, read with `now`, less the kernel's stamp `rx_ns`). Without a
/// stamp, or with one the real-time clock makes implausible (in the future, or older than
/// 10 s: the clock was stepped between the arrival and now), the arrival is taken as `now`.
/// Never after `now`.
pub fn arrival(now: Instant, real_now_ns: u64, rx_ns: Option<u64>) -> Instant {
    const MAX_AGE_NS: u64 = 10_000_000_000;
    match rx_ns.and_then(|rx| real_now_ns.checked_sub(rx)) {
        Some(age) if age <= MAX_AGE_NS => Instant::from_nanos(now.as_nanos().saturating_sub(age)),
        _ => now,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrival_is_now_less_the_stamps_age_and_falls_back_to_now() {
        let now = Instant::from_nanos(5_000_000_000);
        let real = 1_700_000_000_000_000_000;
        assert_eq!(
            arrival(now, real, Some(real - 3_000_000)),
            Instant::from_nanos(4_997_000_000),
            "3 ms old"
        );
        assert_eq!(arrival(now, real, None), now, "no stamp");
        assert_eq!(
            arrival(now, real, Some(real + 1)),
            now,
            "stamp in the future"
        );
        assert_eq!(
            arrival(now, real, Some(real - 11_000_000_000)),
            now,
            "older than 10 s: a clock step"
        );
        assert_eq!(
            arrival(Instant::from_nanos(1_000), real, Some(real - 5_000)),
            Instant::ZERO,
            "never before the clock's start"
        );
    }
}
