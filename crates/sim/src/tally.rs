//! Per-flow tallies of a virtual-time run driven outside the simulator's event loop (the
//! synthetic sources of `purple demo cake`, which feed a qdisc directly), and the figures they
//! reduce to: offered load, goodput, queueing delay, drops and marks.
//!
//! Call [`FlowTally::sent`] for each packet a flow offers and [`FlowTally::delivered`] for each
//! one the qdisc releases, count drops and marks in its fields, then read
//! [`FlowTally::figures`] once the run ends. Delay percentiles use
//! [`qdisc::quantile::rounded_rank`] on microsecond samples.

use qdisc::{quantile, Duration};
use serde::Serialize;

/// What one flow sent, delivered and waited, as a run goes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FlowTally {
    /// Bytes offered to the qdisc.
    pub sent_bytes: u64,
    /// Bytes the qdisc released.
    pub delivered_bytes: u64,
    /// Packets dropped (every cause).
    pub drops: u64,
    /// Packets released with a CE mark.
    pub marks: u64,
    /// Sojourn of each released packet, µs (saturating at `u32::MAX`).
    pub delays_us: Vec<u32>,
}

/// Queueing-delay figures of one flow, ms.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DelayMs {
    /// Mean.
    pub mean: f64,
    /// Median (rounded rank).
    pub p50: f64,
    /// 99th percentile (rounded rank).
    pub p99: f64,
}

/// What one flow's tally reduces to.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FlowFigures {
    /// Offered load over the flow's active time, Mbit/s.
    pub offered_mbit: f64,
    /// Goodput over the flow's active time, Mbit/s.
    pub goodput_mbit: f64,
    /// Queueing delay; `None` when no packet was released (no sample).
    pub delay: Option<DelayMs>,
    /// Packets dropped.
    pub drops: u64,
    /// Packets CE-marked.
    pub marks: u64,
}

impl FlowTally {
    /// Counts a packet of `bytes` offered to the qdisc.
    pub fn sent(&mut self, bytes: u32) {
        self.sent_bytes += u64::from(bytes);
    }

    /// Counts a packet of `bytes` released after waiting `sojourn`.
    pub fn delivered(&mut self, bytes: u32, sojourn: Duration) {
        self.delivered_bytes += u64::from(bytes);
        self.delays_us
            .push(u32::try_from(sojourn.as_nanos() / 1000).unwrap_or(u32::MAX));
    }

    /// The flow's figures over `active` (from its start to the run's end; a zero span counts
    /// as 1 ns, so the rates stay finite).
    pub fn figures(&self, active: Duration) -> FlowFigures {
        let active_s = active.as_secs_f64().max(1e-9);
        let mut d = self.delays_us.clone();
        d.sort_unstable();
        let ms = |us: u32| f64::from(us) / 1000.0;
        let delay = match (
            quantile::rounded_rank(&d, 0.5),
            quantile::rounded_rank(&d, 0.99),
        ) {
            (Some(p50), Some(p99)) => Some(DelayMs {
                mean: d.iter().map(|&x| f64::from(x)).sum::<f64>() / d.len() as f64 / 1000.0,
                p50: ms(p50),
                p99: ms(p99),
            }),
            _ => None,
        };
        FlowFigures {
            offered_mbit: self.sent_bytes as f64 * 8.0 / active_s / 1e6,
            goodput_mbit: self.delivered_bytes as f64 * 8.0 / active_s / 1e6,
            delay,
            drops: self.drops,
            marks: self.marks,
        }
    }
}

/// Seconds of load skipped before a run's figures are taken: `min(load_s / 6, 5)`. The lab's
/// runs (`lab::analysis`) and section B's simulated testbeds use it alike.
pub fn warm_up_s(load_s: f64) -> f64 {
    (load_s / 6.0).min(5.0)
}

/// Loaded-latency statistics, ms (probe RTT minus the idle base RTT).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct LatencyStats {
    /// Samples.
    pub n: usize,
    /// Mean.
    pub mean: f64,
    /// Median.
    pub median: f64,
    /// Minimum.
    pub min: f64,
    /// Maximum.
    pub max: f64,
    /// Standard deviation.
    pub std: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
}

impl LatencyStats {
    /// No sample, every figure NaN: stands in where a table needs a number for a latency that
    /// was not measured (NaN prints as such and fails every comparison a claim makes).
    pub const MISSING: LatencyStats = LatencyStats {
        n: 0,
        mean: f64::NAN,
        median: f64::NAN,
        min: f64::NAN,
        max: f64::NAN,
        std: f64::NAN,
        p95: f64::NAN,
        p99: f64::NAN,
    };

    /// Statistics of `v` (ms); `None` for an empty slice (no sample is not a latency of 0).
    pub fn of(v: &[f64]) -> Option<Self> {
        if v.is_empty() {
            return None;
        }
        let mut s = v.to_vec();
        s.sort_by(f64::total_cmp);
        let n = s.len();
        let mean = s.iter().sum::<f64>() / n as f64;
        let var = s.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64;
        let q = |p: f64| s[(((n - 1) as f64) * p).round() as usize];
        Some(LatencyStats {
            n,
            mean,
            median: q(0.5),
            min: s[0],
            max: s[n - 1],
            std: var.sqrt(),
            p95: q(0.95),
            p99: q(0.99),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_of_a_small_tally() {
        let mut t = FlowTally::default();
        for _ in 0..4 {
            t.sent(1250);
        }
        // Released out of order: the percentiles sort.
        t.delivered(1250, Duration::from_micros(4000));
        t.delivered(1250, Duration::from_micros(1000));
        t.delivered(1250, Duration::from_micros(2500));
        t.drops = 1;
        t.marks = 2;
        let f = t.figures(Duration::from_millis(10));
        // 5000 bytes in 10 ms = 4 Mbit/s offered; 3750 bytes = 3 Mbit/s delivered.
        assert!((f.offered_mbit - 4.0).abs() < 1e-12, "{f:?}");
        assert!((f.goodput_mbit - 3.0).abs() < 1e-12, "{f:?}");
        let d = f.delay.expect("three samples");
        assert!((d.mean - 2.5).abs() < 1e-12, "{d:?}");
        assert_eq!(d.p50, 2.5);
        assert_eq!(d.p99, 4.0);
        assert_eq!((f.drops, f.marks), (1, 2));
    }

    #[test]
    fn latency_statistics_need_a_sample() {
        assert_eq!(LatencyStats::of(&[]), None);
        let l = LatencyStats::of(&[3.0, 1.0, 2.0]).expect("three samples");
        assert_eq!((l.n, l.min, l.median, l.max), (3, 1.0, 2.0, 3.0));
        assert!((l.mean - 2.0).abs() < 1e-12, "{l:?}");
    }

    #[test]
    fn a_flow_without_a_released_packet_has_no_delay_figures() {
        let mut t = FlowTally::default();
        t.sent(1500);
        t.drops = 1;
        let f = t.figures(Duration::from_secs(1));
        assert_eq!(f.delay, None);
        assert_eq!(f.goodput_mbit, 0.0);
        assert!((f.offered_mbit - 0.012).abs() < 1e-12, "{f:?}");
    }

    #[test]
    fn sojourn_is_kept_in_whole_microseconds_and_saturates() {
        let mut t = FlowTally::default();
        t.delivered(100, Duration::from_nanos(1999));
        t.delivered(100, Duration::from_secs(5000));
        assert_eq!(t.delays_us, vec![1, u32::MAX]);
        assert_eq!(t.delivered_bytes, 200);
    }
}
