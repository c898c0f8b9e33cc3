//! Baseline tracking for one reflector and direction: the delay of an empty path, so that
//! `delta = owd - baseline` is the queueing delay.
//!
//! A raw one-way delay from two hosts' clocks is `true_owd + offset + drift * t`. The offset
//! cancels against any minimum. The drift (tens to hundreds of ppm) does not: a plain minimum
//! over a long window lags it (cake-autorate's slow EWMA lags 10 ms at 100 ppm and 10 Hz). So:
//!
//! - samples are grouped in windows of [`BaselineParams::window`]; each window keeps its
//!   minimum (the least-queued sample) and when it was seen;
//! - the drift slope is the Theil-Sen estimate (median of pairwise slopes) over the stored window
//!   minima, so a minority of loaded windows does not bend it; clamped to
//!   ±[`BaselineParams::max_drift_ppm`];
//! - the baseline is the smallest window minimum projected to now along that slope. A sample
//!   below it lowers the baseline at once (fast downward correction); upward movement only
//!   follows the fitted drift (slow upward drift), never a standing queue;
//! - a jump of about ±24 h (ICMP timestamps wrap at midnight UTC) is undone.
//!
//! Memory is fixed (at most [`MAX_WINDOWS`] windows); each update is O(windows), the slope
//! refit at each window end O(windows²).

use crate::config::{check, check_f, ConfigError};
use crate::{Duration, Instant};

/// Most windows kept.
pub const MAX_WINDOWS: usize = 16;

/// One day in nanoseconds (the ICMP timestamp wrap).
const DAY_NS: i64 = 86_400_000_000_000;

/// Baseline parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BaselineParams {
    /// Length of one minimum window. Default 5 s. Accepted 100 ms ..= 10 min.
    pub window: Duration,
    /// Windows remembered (history = `window * windows`). Default 12 (one minute). Accepted
    /// 2 ..= 16.
    pub windows: usize,
    /// Largest believable clock drift between the hosts, ppm. Default 500. Accepted 0 ..= 10000.
    pub max_drift_ppm: f64,
}

impl Default for BaselineParams {
    fn default() -> Self {
        BaselineParams {
            window: Duration::from_secs(5),
            windows: 12,
            max_drift_ppm: 500.0,
        }
    }
}

impl BaselineParams {
    /// Bounds check.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check(
            (Duration::from_millis(100)..=Duration::from_secs(600)).contains(&self.window),
            "baseline.window",
            self.window,
            "100 ms ..= 10 min",
        )?;
        check(
            (2..=MAX_WINDOWS).contains(&self.windows),
            "baseline.windows",
            self.windows,
            "2 ..= 16",
        )?;
        check_f(
            self.max_drift_ppm,
            0.0,
            10_000.0,
            "baseline.max_drift_ppm",
            "0 ..= 10000",
        )
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
struct WinMin {
    start: Instant,
    at: Instant,
    v: i64,
}

/// The baseline of one reflector in one direction. See the module documentation.
#[derive(Clone, Debug)]
pub struct Baseline {
    p: BaselineParams,
    cur: Option<WinMin>,
    /// Completed windows, oldest first; `len` used.
    hist: [WinMin; MAX_WINDOWS],
    len: usize,
    /// Drift, ns per ns.
    slope: f64,
}

impl Baseline {
    /// An empty baseline (no samples yet).
    pub fn new(p: BaselineParams) -> Self {
        Baseline {
            p,
            cur: None,
            hist: [WinMin {
                start: Instant::ZERO,
                at: Instant::ZERO,
                v: 0,
            }; MAX_WINDOWS],
            len: 0,
            slope: 0.0,
        }
    }

    /// The fitted drift in ppm (positive: raw delays grow).
    pub fn drift_ppm(&self) -> f64 {
        self.slope * 1e6
    }

    /// The baseline (raw ns) at `now`, or `None` before the first sample.
    pub fn estimate(&self, now: Instant) -> Option<f64> {
        let proj = |w: &WinMin| {
            let dt = now.as_nanos() as f64 - w.at.as_nanos() as f64;
            w.v as f64 + self.slope * dt
        };
        let mut best: Option<f64> = None;
        for w in self.hist[..self.len].iter().chain(self.cur.as_ref()) {
            let v = proj(w);
            best = Some(best.map_or(v, |b| b.min(v)));
        }
        best
    }

    /// Adds the raw sample `raw_ns` seen at `now` and returns its delta above the baseline, in
    /// ns (never negative).
    pub fn update(&mut self, now: Instant, raw_ns: i64) -> f64 {
        let mut raw = raw_ns;
        if let Some(b) = self.estimate(now) {
            // Midnight wrap of ms-since-midnight timestamps.
            let d = raw as f64 - b;
            if d > (DAY_NS / 2) as f64 {
                raw = raw.saturating_sub(DAY_NS);
            } else if d < -(DAY_NS / 2) as f64 {
                raw = raw.saturating_add(DAY_NS);
            }
        }
        match &mut self.cur {
            Some(w) if now.saturating_duration_since(w.start) < self.p.window => {
                if raw <= w.v {
                    w.v = raw;
                    w.at = now;
                }
            }
            _ => {
                if let Some(w) = self.cur.take() {
                    self.push(w);
                }
                self.cur = Some(WinMin {
                    start: now,
                    at: now,
                    v: raw,
                });
            }
        }
        let b = self.estimate(now).unwrap_or(raw as f64);
        (raw as f64 - b).max(0.0)
    }

    fn push(&mut self, w: WinMin) {
        let cap = self.p.windows.min(MAX_WINDOWS);
        if self.len == cap {
            self.hist.copy_within(1..cap, 0);
            self.len -= 1;
        }
        self.hist[self.len] = w;
        self.len += 1;
        self.refit();
    }

    /// Theil-Sen slope over the stored minima (pairs at least one window apart).
    fn refit(&mut self) {
        let mut slopes = [0.0f64; MAX_WINDOWS * (MAX_WINDOWS - 1) / 2];
        let mut n = 0;
        let min_dt = self.p.window.as_nanos() as f64 * 0.5;
        for i in 0..self.len {
            for j in i + 1..self.len {
                let (a, b) = (self.hist[i], self.hist[j]);
                let dt = b.at.as_nanos() as f64 - a.at.as_nanos() as f64;
                if dt >= min_dt {
                    slopes[n] = (b.v as f64 - a.v as f64) / dt;
                    n += 1;
                }
            }
        }
        if n < 2 {
            return;
        }
        let s = &mut slopes[..n];
        s.sort_unstable_by(f64::total_cmp);
        let med = if n % 2 == 1 {
            s[n / 2]
        } else {
            (s[n / 2 - 1] + s[n / 2]) / 2.0
        };
        let lim = self.p.max_drift_ppm * 1e-6;
        self.slope = med.clamp(-lim, lim);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constant_offset_cancels() {
        let mut b = Baseline::new(BaselineParams::default());
        let off = -3_600_000_000_000i64; // clocks an hour apart
        for i in 0..100u64 {
            let d = b.update(Instant::from_millis(i * 100), off + 20_000_000);
            assert!(d.abs() < 1.0, "{d}");
        }
        let d = b.update(Instant::from_millis(10_000), off + 25_000_000);
        assert!((d - 5e6).abs() < 1.0);
    }

    #[test]
    fn drift_of_200ppm_is_tracked_within_half_a_millisecond() {
        let mut b = Baseline::new(BaselineParams::default());
        let mut worst: f64 = 0.0;
        for i in 0..3000u64 {
            let t = i * 100_000_000; // 10 Hz for 300 s
            let raw = 7_000_000 + (t as f64 * 200e-6) as i64;
            let d = b.update(Instant::from_nanos(t), raw);
            if i > 1200 {
                worst = worst.max(d);
            }
        }
        assert!(worst < 0.5e6, "worst delta {worst} ns");
        assert!((b.drift_ppm() - 200.0).abs() < 5.0, "{}", b.drift_ppm());
    }

    #[test]
    fn standing_queue_does_not_raise_the_baseline() {
        let mut b = Baseline::new(BaselineParams::default());
        for i in 0..50u64 {
            b.update(Instant::from_millis(i * 100), 10_000_000);
        }
        // 40 s of a 30 ms standing queue.
        let mut d = 0.0;
        for i in 50..450u64 {
            d = b.update(Instant::from_millis(i * 100), 40_000_000);
        }
        assert!((d - 30e6).abs() < 0.1e6, "{d}");
    }

    #[test]
    fn midnight_wrap_is_undone() {
        let mut b = Baseline::new(BaselineParams::default());
        b.update(Instant::from_millis(0), DAY_NS - 5_000_000);
        // 7 ms later by the remote clock, which wrapped to 2 ms after midnight.
        let d = b.update(Instant::from_millis(100), 2_000_000);
        assert!((d - 7e6).abs() < 1.0, "{d}");
    }
}
