//! The daemon's clock: a monotonic [`qdisc::Instant`] for the controller, and a wall clock for
//! probe timestamps that is anchored to the system's real-time clock once, at start, and then
//! advances with the monotonic clock. Steps of the system clock (NTP, a router that boots in
//! 1970) therefore never show up as delay jumps; only the reflectors' clocks can step, and the
//! controller's per-reflector baseline absorbs those.

use qdisc::Instant;

/// Monotonic and anchored wall time.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    start: std::time::Instant,
    wall_start_us: u64,
}

impl Default for Clock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock {
    /// A clock whose wall time starts at the system's real-time clock now.
    // The daemon is the I/O boundary: it reads the clocks the sans-IO controller is given.
    #[allow(clippy::disallowed_methods)]
    pub fn new() -> Self {
        let wall_start_us = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_micros() as u64)
            .unwrap_or(0);
        Clock {
            start: std::time::Instant::now(),
            wall_start_us,
        }
    }

    /// Monotonic time since the clock was made.
    pub fn now(&self) -> Instant {
        Instant::from_nanos(self.start.elapsed().as_nanos() as u64)
    }

    /// Anchored wall time at monotonic instant `t`, µs since the Unix epoch.
    pub fn wall_us(&self, t: Instant) -> u64 {
        self.wall_start_us + t.as_nanos() / 1_000
    }

    /// Anchored wall time at `t`, ms since midnight UTC (what ICMP timestamps carry).
    pub fn ms_since_midnight(&self, t: Instant) -> u32 {
        ((self.wall_us(t) / 1_000) % MS_PER_DAY as u64) as u32
    }
}

/// Milliseconds in a day.
pub const MS_PER_DAY: u32 = 86_400_000;
