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

use crate::config::{check, law_params, ms, Config, ConfigError};
use crate::engine::{DirSignals, Law, Needs, Step};
use crate::{mbit, Direction, Duration, Instant, PerDir, Rate, Reason};

law_params! {
    /// PURPLE-AIMD parameters (published defaults vary; these are the middle of the ranges).
    pub struct AimdParams, "aimd" {
        /// Target queueing delay. Default 10 ms.
        target: Duration = ms(10), ms(1), ms(1_000), "1 ms ..= 1 s";
        /// Tolerance above target. Default 2 ms.
        tolerance: Duration = ms(2), Duration::ZERO, ms(1_000), "0 ..= 1 s";
        /// Critical delay (strong cut). Default 30 ms.
        critical: Duration = ms(30), Duration::ZERO, ms(10_000), "> target + tolerance, <= 10 s";
        /// Multiplicative decrease. Default 0.1.
        beta: f64 = 0.1, 0.001, 0.9, "0.001 ..= 0.9";
        /// Additive increase, bytes/s per second. Default 0.5 Mbit/s per s.
        alpha: u64 = mbit(0.5), 1, 1 << 40, "1 ..= 2^40 bytes/s per s";
        /// Consecutive good samples before increasing. Default 5.
        good_samples: u32 = 5, 1, 1_000, "1 ..= 1000";
        /// Sample interval. Default 100 ms.
        interval: Duration = ms(100), ms(10), ms(10_000), "10 ms ..= 10 s";
        /// Least time between shaper changes. Default 1 s.
        apply_every: Duration = ms(1_000), Duration::ZERO, ms(60_000), "0 ..= 60 s";
        /// Smallest absolute change applied, bytes/s. Default 2.5 Mbit/s.
        min_change: u64 = mbit(2.5), 0, 1 << 40, "0 ..= 2^40 bytes/s";
        /// Smallest relative change applied. Default 0.01.
        min_change_ratio: f64 = 0.01, 0.0, 1.0, "0 ..= 1";
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
        p.check_ranges()?;
        check(
            p.critical > p.target + p.tolerance,
            "aimd.critical",
            p.critical,
            "> target + tolerance, <= 10 s",
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
