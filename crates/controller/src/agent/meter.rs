//! The agent's arithmetic over the shell's readings: achieved throughput from cumulative byte
//! counters ([`RateMeter`]) and the actuator's limits ([`Limiter`]).

use crate::config::{check, check_f, ConfigError};
use crate::{Direction, Duration, Instant, PerDir, Rate};

/// Turns successive readings of a cumulative byte counter into a [`Rate`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RateMeter {
    last: Option<(Instant, u64)>,
}

impl RateMeter {
    /// Feeds a reading `bytes` made at `now`; returns the rate since the previous reading (none
    /// on the first reading, at the same instant, or when the counter went backwards: a device
    /// reset or re-creation, which restarts the count).
    pub fn update(&mut self, now: Instant, bytes: u64) -> Option<Rate> {
        let prev = self.last.replace((now, bytes));
        let (t0, b0) = prev?;
        let dt = now.saturating_duration_since(t0).as_nanos();
        if dt == 0 || bytes < b0 {
            return None;
        }
        Some(Rate::from_bytes_per_s(
            ((bytes - b0) as u128 * 1_000_000_000 / u128::from(dt)).min(u128::from(u64::MAX))
                as u64,
        ))
    }

    /// Forgets the previous reading (the next one starts a new count).
    pub fn reset(&mut self) {
        self.last = None;
    }
}

/// The actuator's limits.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LimiterParams {
    /// At most one change per direction per this. Default 0: the controllers pace their own
    /// changes. Accepted 0 ..= 60 s.
    pub min_interval: Duration,
    /// Changes smaller than this percentage of the applied rate are skipped. Default 0.
    /// Accepted 0 ..= 50.
    pub min_change_percent: f64,
}

impl Default for LimiterParams {
    fn default() -> Self {
        LimiterParams {
            min_interval: Duration::ZERO,
            min_change_percent: 0.0,
        }
    }
}

impl LimiterParams {
    /// Bounds check; errors name the option as in the daemon's `[actuator]` section.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check(
            self.min_interval <= Duration::from_secs(60),
            "actuator.min_interval_ms",
            self.min_interval,
            "0 ..= 60000",
        )?;
        check_f(
            self.min_change_percent,
            0.0,
            50.0,
            "actuator.min_change_percent",
            "0 ..= 50",
        )
    }
}

/// Rate-limits changes per direction and skips tiny ones; remembers the rate in force.
#[derive(Clone, Debug)]
pub struct Limiter {
    min_interval: Duration,
    min_change: f64,
    applied: PerDir<Option<(Instant, Rate)>>,
}

impl Limiter {
    /// A limiter with `p`'s limits and nothing applied yet.
    pub fn new(p: LimiterParams) -> Self {
        Limiter {
            min_interval: p.min_interval,
            min_change: p.min_change_percent / 100.0,
            applied: PerDir::default(),
        }
    }

    /// Whether `rate` should be applied to `dir` at `now`. `force` (the safe rate on exit)
    /// bypasses both limits; the first setting always passes; the rate in force is never
    /// applied again.
    pub fn should_apply(&self, now: Instant, dir: Direction, rate: Rate, force: bool) -> bool {
        match self.applied[dir] {
            None => true,
            Some((_, r)) if r == rate => false,
            _ if force => true,
            Some((t, r)) => {
                now.saturating_duration_since(t) >= self.min_interval
                    && (rate.bytes_per_s_f64() - r.bytes_per_s_f64()).abs()
                        >= self.min_change * r.bytes_per_s_f64()
            }
        }
    }

    /// Records that `rate` was applied to `dir` at `now`.
    pub fn applied(&mut self, now: Instant, dir: Direction, rate: Rate) {
        self.applied[dir] = Some((now, rate));
    }

    /// The rate in force in `dir` (the last applied), if any was.
    pub fn current(&self, dir: Direction) -> Option<Rate> {
        self.applied[dir].map(|(_, r)| r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(x: u64) -> Rate {
        Rate::from_bytes_per_s(x)
    }

    #[test]
    fn rate_is_bytes_over_elapsed_time_and_resets_are_skipped() {
        let mut m = RateMeter::default();
        assert_eq!(m.update(Instant::from_millis(0), 1000), None);
        assert_eq!(
            m.update(Instant::from_millis(200), 201_000),
            Some(b(1_000_000))
        );
        assert_eq!(m.update(Instant::from_millis(400), 5), None);
        assert_eq!(
            m.update(Instant::from_millis(600), 100_005),
            Some(b(500_000))
        );
        assert_eq!(
            m.update(Instant::from_millis(600), 100_006),
            None,
            "no time"
        );
    }

    #[test]
    fn limiter_skips_tiny_and_too_frequent_changes() {
        let mut l = Limiter::new(LimiterParams {
            min_interval: Duration::from_millis(200),
            min_change_percent: 1.0,
        });
        let t0 = Instant::from_secs(1);
        assert!(l.should_apply(t0, Direction::Up, b(1_000_000), false));
        l.applied(t0, Direction::Up, b(1_000_000));
        let t1 = Instant::from_millis(1300);
        assert!(
            !l.should_apply(t1, Direction::Up, b(1_005_000), false),
            "0.5% is tiny"
        );
        assert!(l.should_apply(t1, Direction::Up, b(1_020_000), false));
        let t2 = Instant::from_millis(1100);
        assert!(
            !l.should_apply(t2, Direction::Up, b(900_000), false),
            "too soon"
        );
        assert!(
            l.should_apply(t2, Direction::Up, b(900_000), true),
            "forced"
        );
        assert!(
            l.should_apply(t2, Direction::Down, b(5), false),
            "other direction"
        );
        assert_eq!(l.current(Direction::Up), Some(b(1_000_000)));
    }
}
