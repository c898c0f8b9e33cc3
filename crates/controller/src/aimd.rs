//! PURPLE-AIMD (delay only), as published by wine-group/purple:
//!
//! every sample interval (0.1 s), with `latency` the consensus queueing delay:
//! - `latency >= critical` (30 ms): `C = C * (1 - beta)`;
//! - `latency > target + tolerance`: `C = C * (1 - beta / 2)`;
//! - otherwise a good sample; after `good_samples` (5) consecutive good samples:
//!   `C = C + alpha * dt` (alpha in bytes/s per second, dt since the last increase).
//!
//! The internal `C` moves every sample; the shaper is changed at most once per `apply_every`
//! (1 s) and only if `C` differs from the applied rate by at least `min_change` (2.5 Mbit/s) or
//! `min_change_ratio` (1 %). PURPLE's code measured ICMP RTT against the target; here the
//! latency is the one-way queueing delay above the baseline, as the slides ask (Polus).

use crate::config::{check, check_f, settable_params, Config, ConfigError};
use crate::engine::{DirSignals, Law, Needs, Step};
use crate::{mbit, Direction, Duration, Instant, PerDir, Rate, Reason};

/// PURPLE-AIMD parameters (published defaults vary; these are the middle of the ranges).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AimdParams {
    /// Target queueing delay. Default 10 ms. Accepted 1 ms ..= 1 s.
    pub target: Duration,
    /// Tolerance above target. Default 2 ms. Accepted 0 ..= 1 s.
    pub tolerance: Duration,
    /// Critical delay (strong cut). Default 30 ms. Accepted > target + tolerance, <= 10 s.
    pub critical: Duration,
    /// Multiplicative decrease. Default 0.1. Accepted 0.001 ..= 0.9.
    pub beta: f64,
    /// Additive increase, bytes/s per second. Default 0.5 Mbit/s per s. Accepted 1 ..= 2^40.
    pub alpha: u64,
    /// Consecutive good samples before increasing. Default 5. Accepted 1 ..= 1000.
    pub good_samples: u32,
    /// Sample interval. Default 100 ms. Accepted 10 ms ..= 10 s.
    pub interval: Duration,
    /// Least time between shaper changes. Default 1 s. Accepted 0 ..= 60 s.
    pub apply_every: Duration,
    /// Smallest absolute change applied, bytes/s. Default 2.5 Mbit/s.
    pub min_change: u64,
    /// Smallest relative change applied. Default 0.01. Accepted 0 ..= 1.
    pub min_change_ratio: f64,
}

settable_params!(
    AimdParams,
    "aimd",
    [
        target,
        tolerance,
        critical,
        beta,
        alpha,
        good_samples,
        interval,
        apply_every,
        min_change,
        min_change_ratio
    ]
);

impl Default for AimdParams {
    fn default() -> Self {
        AimdParams {
            target: Duration::from_millis(10),
            tolerance: Duration::from_millis(2),
            critical: Duration::from_millis(30),
            beta: 0.1,
            alpha: mbit(0.5),
            good_samples: 5,
            interval: Duration::from_millis(100),
            apply_every: Duration::from_secs(1),
            min_change: mbit(2.5),
            min_change_ratio: 0.01,
        }
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct St {
    c: f64,
    good: u32,
    last_inc: Option<Instant>,
    last_apply: Option<Instant>,
}

/// PURPLE-AIMD. See the module documentation.
#[derive(Clone, Debug, Default)]
pub struct Aimd {
    /// Parameters.
    pub p: AimdParams,
    st: PerDir<St>,
}

impl Aimd {
    /// With parameters `p`.
    pub fn new(p: AimdParams) -> Self {
        Aimd {
            p,
            st: PerDir::default(),
        }
    }
}

impl Law for Aimd {
    fn name(&self) -> &'static str {
        "purple-aimd"
    }
    fn interval(&self) -> Duration {
        self.p.interval
    }
    fn needs(&self) -> Needs {
        Needs::Delay
    }
    fn validate(&self) -> Result<(), ConfigError> {
        let p = &self.p;
        let ms = Duration::from_millis;
        check(
            (ms(1)..=ms(1000)).contains(&p.target),
            "aimd.target",
            p.target,
            "1 ms ..= 1 s",
        )?;
        check(
            p.tolerance <= ms(1000),
            "aimd.tolerance",
            p.tolerance,
            "0 ..= 1 s",
        )?;
        check(
            p.critical > p.target + p.tolerance && p.critical <= ms(10_000),
            "aimd.critical",
            p.critical,
            "> target + tolerance, <= 10 s",
        )?;
        check_f(p.beta, 0.001, 0.9, "aimd.beta", "0.001 ..= 0.9")?;
        check(
            (1..=1 << 40).contains(&p.alpha),
            "aimd.alpha",
            p.alpha,
            "1 ..= 2^40 bytes/s per s",
        )?;
        check(
            (1..=1000).contains(&p.good_samples),
            "aimd.good_samples",
            p.good_samples,
            "1 ..= 1000",
        )?;
        check(
            (ms(10)..=ms(10_000)).contains(&p.interval),
            "aimd.interval",
            p.interval,
            "10 ms ..= 10 s",
        )?;
        check(
            p.apply_every <= ms(60_000),
            "aimd.apply_every",
            p.apply_every,
            "0 ..= 60 s",
        )?;
        check(
            p.min_change <= 1 << 40,
            "aimd.min_change",
            p.min_change,
            "0 ..= 2^40 bytes/s",
        )?;
        check_f(
            p.min_change_ratio,
            0.0,
            1.0,
            "aimd.min_change_ratio",
            "0 ..= 1",
        )
    }
    fn step(&mut self, now: Instant, dir: Direction, sig: &DirSignals, cfg: &Config) -> Step {
        let p = self.p;
        let st = &mut self.st[dir];
        if st.c <= 0.0 {
            st.c = sig.current.bytes_per_s_f64();
        }
        let lat = sig.delay.unwrap_or(Duration::ZERO);
        let mut reason = Reason::Hold;
        if lat >= p.critical {
            st.c *= 1.0 - p.beta;
            st.good = 0;
            reason = Reason::Decrease { delay: lat };
        } else if lat > p.target + p.tolerance {
            st.c *= 1.0 - p.beta / 2.0;
            st.good = 0;
            reason = Reason::Decrease { delay: lat };
        } else {
            st.good += 1;
            if st.good >= p.good_samples {
                let dt = st
                    .last_inc
                    .map_or(p.interval, |t| now.saturating_duration_since(t));
                st.c += p.alpha as f64 * dt.as_secs_f64().min(10.0);
                st.last_inc = Some(now);
                reason = Reason::Increase;
            }
        }
        if reason != Reason::Increase {
            st.last_inc = None;
        }
        st.c = st.c.clamp(
            cfg.min[dir].bytes_per_s_f64(),
            cfg.max[dir].bytes_per_s_f64(),
        );
        let c = st.c as u64;
        let diff = c.abs_diff(sig.current.bytes_per_s());
        let big = diff >= p.min_change
            || diff as f64 >= p.min_change_ratio * sig.current.bytes_per_s_f64();
        let due = st
            .last_apply
            .is_none_or(|t| now.saturating_duration_since(t) >= p.apply_every);
        if diff > 0 && big && due {
            st.last_apply = Some(now);
            Step {
                rate: Rate::from_bytes_per_s(c),
                reason,
            }
        } else {
            Step {
                rate: sig.current,
                reason: Reason::Hold,
            }
        }
    }
}
