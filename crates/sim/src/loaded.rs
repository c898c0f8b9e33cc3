//! [`LoadedSummary`]: the loaded phase of a run with a latency probe on a variable link, per
//! direction. It is the optional part of a [`RunSummary`](crate::RunSummary) that the backends
//! measuring loaded latency fill: section C's closed loop (its tables, `purple demo` and the
//! matrix) and the namespace lab's demo rows (`purple demo --lab`). The simulator's own
//! scenarios (`purple sim`, sections A, B and D) leave it out.
//!
//! What a backend measures that another does not is a typed optional part, never a parallel
//! record: one-way queueing delays ([`OneWayDelay`], the closed loop knows both ends' times) and
//! how a daemon's shaped rate followed the capacity ([`Tracking`], the lab reads the daemon's
//! log).

use crate::tally::LatencyStats;
use controller::{Direction, PerDir};
use serde::Serialize;

/// What a run measured over its loaded phase, after its warm-up: loaded latency (the latency
/// probe's round trip minus the idle one), delivered throughput and mean capacity per direction.
///
/// Each backend keeps its own rules for what it measures (which probe, which warm-up, how it
/// counts delivered bytes); this is only the common form of the result.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct LoadedSummary {
    /// Statistics of [`LoadedSummary::samples_ms`]; `None` when the probe measured nothing
    /// after the warm-up (no sample is not a latency of 0).
    pub latency: Option<LatencyStats>,
    /// Every loaded-latency sample after the warm-up, ms (for CDFs; not serialised).
    #[serde(skip)]
    pub samples_ms: Vec<f64>,
    /// Mean delivered rate per direction after the warm-up, Mbit/s.
    pub throughput_mbit: PerDir<f64>,
    /// Mean true capacity per direction after the warm-up, Mbit/s; `None` where the backend
    /// does not know it (the lab knows only the emulator's download capacity).
    pub capacity_mbit: PerDir<Option<f64>>,
    /// One-way queueing delay per direction (the closed loop's; `None` where the backend
    /// cannot tell the two directions apart).
    pub one_way: Option<PerDir<OneWayDelay>>,
    /// How a daemon's shaped download rate followed the capacity (the lab's daemon
    /// contenders; `None` otherwise).
    pub tracking: Option<Tracking>,
}

impl LoadedSummary {
    /// A summary with nothing measured, for accessors that must return one whatever happens.
    pub const EMPTY: LoadedSummary = LoadedSummary {
        latency: None,
        samples_ms: Vec::new(),
        throughput_mbit: PerDir::new(0.0, 0.0),
        capacity_mbit: PerDir::new(None, None),
        one_way: None,
        tracking: None,
    };

    /// Throughput in direction `d` over its mean capacity; `None` when the capacity is
    /// unknown or not positive, or the ratio is not finite.
    pub fn share(&self, d: Direction) -> Option<f64> {
        let c = self.capacity_mbit[d].filter(|&c| c > 0.0)?;
        Some(self.throughput_mbit[d] / c).filter(|s| s.is_finite())
    }
}

/// One direction's one-way queueing delay after the warm-up, ms: each answered probe's delay in
/// that direction minus the idle one, floored at 0.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OneWayDelay {
    /// The idle one-way delay of a probe, ms (the two directions' add up to the idle round
    /// trip).
    pub base_ms: f64,
    /// Statistics of [`OneWayDelay::samples_ms`].
    pub latency: LatencyStats,
    /// One sample per probe counted in [`LoadedSummary::samples_ms`], ms (not serialised).
    #[serde(skip)]
    pub samples_ms: Vec<f64>,
}

/// How a daemon's download rate followed the emulator's capacity during the load.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Tracking {
    /// Mean shaped download rate, Mbit/s.
    pub mean_rate_mbit: f64,
    /// Share of the load's bins where the shaped rate was at or below the capacity.
    pub below_capacity: f64,
    /// Capacity drops seen during the load.
    pub drops: usize,
    /// Of those, how many the rate went below the new capacity before the next change.
    pub drops_followed: usize,
    /// Upper median of the seconds from a drop until the rate was at or below the new
    /// capacity (`None` when no drop was followed).
    pub reaction_median_s: Option<f64>,
    /// Slowest such reaction, s (`None` when no drop was followed).
    pub reaction_max_s: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn share_is_none_without_a_positive_capacity() {
        let mut l = LoadedSummary {
            throughput_mbit: PerDir::new(30.0, 6.0),
            capacity_mbit: PerDir::new(Some(40.0), None),
            ..LoadedSummary::default()
        };
        assert_eq!(l.share(Direction::Down), Some(0.75));
        assert_eq!(l.share(Direction::Up), None, "unknown capacity");
        l.capacity_mbit.down = Some(0.0);
        assert_eq!(l.share(Direction::Down), None, "no capacity");
        l.capacity_mbit.down = Some(f64::NAN);
        assert_eq!(l.share(Direction::Down), None, "a NaN capacity");
    }

    #[test]
    fn empty_is_the_default() {
        assert_eq!(LoadedSummary::EMPTY, LoadedSummary::default());
    }
}
