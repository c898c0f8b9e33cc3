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

use crate::config::{check, check_f, Config, ConfigError};
use crate::engine::{DirSignals, Law, Needs, Step};
use crate::{Direction, Duration, Instant, PerDir, Rate, Reason};

/// Window of samples for the medians.
const WINDOW: usize = 10;

/// Parameters of regular PURPLE.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct QueueMetricsParams {
    /// Update interval. Default 1 s. Accepted 10 ms ..= 60 s.
    pub interval: Duration,
    /// Increment of p on backlog or drops. Default 0.15. Accepted 0 ..= 1.
    pub p_inc: f64,
    /// Decrement of p otherwise. Default 0.025. Accepted 0 ..= 1.
    pub p_dec: f64,
    /// Least time between changes of p. Default 1 s. Accepted 0 ..= 60 s.
    pub freeze: Duration,
    /// New drops that count as congestion. Default 10. Accepted 1 ..= 10^6.
    pub drop_threshold: u64,
    /// Backlog (bytes) that counts as congestion; default 1 ("any backlog"). Accepted 1 ..= 2^32.
    pub backlog_threshold: u64,
    /// Enter congestion above this p. Default 0.3. Accepted (p_leave, 1].
    pub p_enter: f64,
    /// Leave congestion at or below this p. Default 0.1. Accepted 0 ..= 1.
    pub p_leave: f64,
    /// Recovery target as a fraction of the median capacity. Default 0.8. Accepted 0.1 ..= 1.
    pub target_fraction: f64,
    /// Fraction of the headroom recovered per update. Default 0.1. Accepted 0 ..= 1.
    pub recover_gain: f64,
    /// Start rate as a fraction of the capacity. Default 0.75. Accepted 0.1 ..= 1.
    pub start_fraction: f64,
}

impl Default for QueueMetricsParams {
    fn default() -> Self {
        QueueMetricsParams {
            interval: Duration::from_secs(1),
            p_inc: 0.15,
            p_dec: 0.025,
            freeze: Duration::from_secs(1),
            drop_threshold: 10,
            backlog_threshold: 1,
            p_enter: 0.3,
            p_leave: 0.1,
            target_fraction: 0.8,
            recover_gain: 0.1,
            start_fraction: 0.75,
        }
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
        let ms = Duration::from_millis;
        check(
            (ms(10)..=ms(60_000)).contains(&p.interval),
            "queue.interval",
            p.interval,
            "10 ms ..= 60 s",
        )?;
        check_f(p.p_inc, 0.0, 1.0, "queue.p_inc", "0 ..= 1")?;
        check_f(p.p_dec, 0.0, 1.0, "queue.p_dec", "0 ..= 1")?;
        check(
            p.freeze <= ms(60_000),
            "queue.freeze",
            p.freeze,
            "0 ..= 60 s",
        )?;
        check(
            (1..=1_000_000).contains(&p.drop_threshold),
            "queue.drop_threshold",
            p.drop_threshold,
            "1 ..= 10^6",
        )?;
        check(
            (1..=1 << 32).contains(&p.backlog_threshold),
            "queue.backlog_threshold",
            p.backlog_threshold,
            "1 ..= 2^32",
        )?;
        check_f(p.p_leave, 0.0, 1.0, "queue.p_leave", "0 ..= 1")?;
        check(
            p.p_enter.is_finite() && p.p_enter > p.p_leave && p.p_enter <= 1.0,
            "queue.p_enter",
            p.p_enter,
            "(p_leave, 1]",
        )?;
        check_f(
            p.target_fraction,
            0.1,
            1.0,
            "queue.target_fraction",
            "0.1 ..= 1",
        )?;
        check_f(p.recover_gain, 0.0, 1.0, "queue.recover_gain", "0 ..= 1")?;
        check_f(
            p.start_fraction,
            0.1,
            1.0,
            "queue.start_fraction",
            "0.1 ..= 1",
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
