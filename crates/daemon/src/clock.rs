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

    /// Anchored wall time at monotonic instant `t`, µs since the Unix epoch.
    pub fn wall_us(&self, t: Instant) -> u64 {
        self.anchor.wall_us(t)
    }

    /// Anchored wall time at `t`, ms since midnight UTC (what ICMP timestamps carry).
    pub fn ms_since_midnight(&self, t: Instant) -> u32 {
        self.anchor.ms_since_midnight(t)
    }
}
