//! PURPLE with the radio's queue metrics (regular PURPLE, BLUE-like), as published:
//!
//! each update (1 s), from the radio's backlog and drops and its capacity estimate:
//! - marking probability `p += 0.15` on any backlog or `>= 10` new drops, else `p -= 0.025`
//!   (clamped to [0, 1]); `p` changes at most once per freeze time (1 s);
//! - congested when `p > 0.3`, uncongested again at `p <= 0.1`;
//! - congested: `rate = median tx * (1 - 0.5 p)`, but not below `0.95 * current tx`;
//! - otherwise recover 10 % of the headroom toward `0.80 * median capacity`;
//! - start at `0.75 * capacity`. Medians over a 10-sample window.
//!
//! `tx` is the achieved throughput; `capacity` the radio's estimate. Where the radio gives no
//! capacity estimate the configured maximum stands in for it.

use qdisc::quantile;

use crate::config::{check, law_params, ms, Config, ConfigError};
use crate::engine::{DirSignals, Law, Needs, Step};
use crate::{Direction, Duration, Instant, PerDir, Rate, Reason};

/// Window of samples for the medians.
const WINDOW: usize = 10;

law_params! {
    /// Parameters of regular PURPLE.
    pub struct QueueMetricsParams, "queue" {
        /// Update interval. Default 1 s.
        interval: Duration = ms(1_000), ms(10), ms(60_000), "10 ms ..= 60 s";
        /// Increment of p on backlog or drops. Default 0.15.
        p_inc: f64 = 0.15, 0.0, 1.0, "0 ..= 1";
        /// Decrement of p otherwise. Default 0.025.
        p_dec: f64 = 0.025, 0.0, 1.0, "0 ..= 1";
        /// Least time between changes of p. Default 1 s.
        freeze: Duration = ms(1_000), Duration::ZERO, ms(60_000), "0 ..= 60 s";
        /// New drops that count as congestion. Default 10.
        drop_threshold: u64 = 10, 1, 1_000_000, "1 ..= 10^6";
        /// Backlog (bytes) that counts as congestion. Default 1 (any backlog).
        backlog_threshold: u64 = 1, 1, 1 << 32, "1 ..= 2^32";
        /// Enter congestion above this p. Default 0.3.
        p_enter: f64 = 0.3, 0.0, 1.0, "(p_leave, 1]";
        /// Leave congestion at or below this p. Default 0.1.
        p_leave: f64 = 0.1, 0.0, 1.0, "0 ..= 1";
        /// Recovery target as a fraction of the median capacity. Default 0.8.
        target_fraction: f64 = 0.8, 0.1, 1.0, "0.1 ..= 1";
        /// Fraction of the headroom recovered per update. Default 0.1.
        recover_gain: f64 = 0.1, 0.0, 1.0, "0 ..= 1";
        /// Start rate as a fraction of the capacity. Default 0.75.
        start_fraction: f64 = 0.75, 0.1, 1.0, "0.1 ..= 1";
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct St {
    p: f64,
    congested: bool,
    started: bool,
    last_p: Option<Instant>,
    tx: [u64; WINDOW],
    cap: [u64; WINDOW],
    n: usize,
    i: usize,
}

/// The upper median of the first [`WINDOW`] values of `v` (0 when empty), sorted in a copy on
/// the stack: no allocation per control step.
fn median(v: &[u64]) -> u64 {
    let mut a = [0u64; WINDOW];
    let n = v.len().min(WINDOW);
    a[..n].copy_from_slice(&v[..n]);
    let a = &mut a[..n];
    a.sort_unstable();
    quantile::rounded_rank(a, 0.5).unwrap_or(0)
}

/// Regular PURPLE. See the module documentation.
#[derive(Clone, Debug, Default)]
pub struct QueueMetrics {
    /// Parameters.
    pub p: QueueMetricsParams,
    st: PerDir<St>,
}

impl QueueMetrics {
    /// With parameters `p`.
    pub fn new(p: QueueMetricsParams) -> Self {
        QueueMetrics {
            p,
            st: PerDir::default(),
        }
    }
    /// The marking probability of `dir`.
    pub fn probability(&self, dir: Direction) -> f64 {
        self.st[dir].p
    }
}

impl Law for QueueMetrics {
    fn name(&self) -> &'static str {
        "purple-queue"
    }
    fn interval(&self) -> Duration {
        self.p.interval
    }
    fn needs(&self) -> Needs {
        Needs::RadioQueue
    }
    fn validate(&self) -> Result<(), ConfigError> {
        let p = &self.p;
        p.check_ranges()?;
        check(
            p.p_enter > p.p_leave,
            "queue.p_enter",
            p.p_enter,
            "(p_leave, 1]",
        )
    }
    fn step(&mut self, now: Instant, dir: Direction, sig: &DirSignals, cfg: &Config) -> Step {
        let p = self.p;
        let st = &mut self.st[dir];
        let Some(r) = sig.radio else {
            return Step {
                rate: sig.current,
                reason: Reason::Hold,
            };
        };
        let cap_now = r.capacity.unwrap_or(cfg.max[dir]).bytes_per_s();
        st.tx[st.i] = sig.throughput.map_or(0, Rate::bytes_per_s);
        st.cap[st.i] = cap_now;
        st.i = (st.i + 1) % WINDOW;
        st.n = (st.n + 1).min(WINDOW);
        if !st.started {
            st.started = true;
            let rate = (cap_now as f64 * p.start_fraction) as u64;
            return Step {
                rate: Rate::from_bytes_per_s(rate),
                reason: Reason::Start,
            };
        }
        if st
            .last_p
            .is_none_or(|t| now.saturating_duration_since(t) >= p.freeze)
        {
            st.last_p = Some(now);
            if r.backlog_bytes >= p.backlog_threshold || r.new_drops >= p.drop_threshold {
                st.p = (st.p + p.p_inc).min(1.0);
            } else {
                st.p = (st.p - p.p_dec).max(0.0);
            }
        }
        if st.p > p.p_enter {
            st.congested = true;
        } else if st.p <= p.p_leave {
            st.congested = false;
        }
        let tx_med = median(&st.tx[..st.n]) as f64;
        let cap_med = median(&st.cap[..st.n]) as f64;
        let cur = sig.current.bytes_per_s_f64();
        if st.congested {
            let floor = 0.95 * sig.throughput.map_or(0.0, Rate::bytes_per_s_f64);
            let rate = (tx_med * (1.0 - 0.5 * st.p)).max(floor);
            Step {
                rate: Rate::from_bytes_per_s_f64(rate),
                reason: Reason::Congested { p: st.p },
            }
        } else {
            let target = p.target_fraction * cap_med;
            let rate = cur + p.recover_gain * (target - cur);
            Step {
                rate: Rate::from_bytes_per_s_f64(rate.max(0.0)),
                reason: Reason::Recover,
            }
        }
    }
}
