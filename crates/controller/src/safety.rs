//! The rules every algorithm's output passes through, whatever the algorithm:
//!
//! 1. **Bounds**: the rate is always within the configured `[min, max]`.
//! 2. **Stall**: when the signal the algorithm needs (delay from enough healthy reflectors, or
//!    the radio's queue metrics) has been missing for [`SafetyParams::stall_after`], the rate
//!    moves to the configured safe rate at once, with [`Reason::NoSignal`] saying which signal
//!    and for how long.
//! 3. **Rate of change**: at most one change per [`SafetyParams::min_change_interval`]; no
//!    increase within [`SafetyParams::hold_after_decrease`] of a decrease (the effect of a cut
//!    must show in the delay before we undo it, so a full up/down cycle takes at least
//!    `hold_after_decrease + min_change_interval`); increases at most
//!    [`SafetyParams::max_increase_per_s`] (relative) per second. Decreases are never slowed
//!    beyond the change interval: cutting is the safe direction.

use crate::config::{check, check_f, Config, ConfigError};
use crate::{Direction, Duration, Instant, PerDir, Rate, Reason, Signal};

/// Safety parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SafetyParams {
    /// Missing signal for this long: safe rate. Default 2 s. Accepted 100 ms ..= 10 min.
    pub stall_after: Duration,
    /// Least time between two rate changes. Default 50 ms. Accepted 1 ms ..= 60 s.
    pub min_change_interval: Duration,
    /// No increase this soon after a decrease. Default 500 ms. Accepted 0 ..= 60 s.
    pub hold_after_decrease: Duration,
    /// Largest relative increase per second (1.0: at most doubling per second). Default 1.0.
    /// Accepted 0.001 ..= 100.
    pub max_increase_per_s: f64,
}

impl Default for SafetyParams {
    fn default() -> Self {
        SafetyParams {
            stall_after: Duration::from_secs(2),
            min_change_interval: Duration::from_millis(50),
            hold_after_decrease: Duration::from_millis(500),
            max_increase_per_s: 1.0,
        }
    }
}

impl SafetyParams {
    /// Bounds check.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let ms = Duration::from_millis;
        let s = Duration::from_secs;
        check(
            (ms(100)..=s(600)).contains(&self.stall_after),
            "safety.stall_after",
            self.stall_after,
            "100 ms ..= 10 min",
        )?;
        check(
            (ms(1)..=s(60)).contains(&self.min_change_interval),
            "safety.min_change_interval",
            self.min_change_interval,
            "1 ms ..= 60 s",
        )?;
        check(
            self.hold_after_decrease <= s(60),
            "safety.hold_after_decrease",
            self.hold_after_decrease,
            "0 ..= 60 s",
        )?;
        check_f(
            self.max_increase_per_s,
            0.001,
            100.0,
            "safety.max_increase_per_s",
            "0.001 ..= 100",
        )
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct DirState {
    last_change: Option<Instant>,
    last_decrease: Option<Instant>,
    signal_ok_at: Option<Instant>,
}

/// Safety state for both directions.
#[derive(Clone, Debug)]
pub struct Safety {
    p: SafetyParams,
    start: Instant,
    st: PerDir<DirState>,
}

impl Safety {
    /// Fresh state; `start` is when the controller started (a signal that never came counts
    /// as missing since then).
    pub fn new(p: SafetyParams, start: Instant) -> Self {
        Safety {
            p,
            start,
            st: PerDir::default(),
        }
    }

    /// Records whether `signal` is usable now in `dir`; returns the stall reason when it has
    /// been missing for `stall_after` or longer.
    pub fn stall(
        &mut self,
        now: Instant,
        dir: Direction,
        signal: Signal,
        usable: bool,
    ) -> Option<Reason> {
        let st = &mut self.st[dir];
        if usable {
            st.signal_ok_at = Some(now);
            return None;
        }
        let missing_for = now.saturating_duration_since(st.signal_ok_at.unwrap_or(self.start));
        (missing_for >= self.p.stall_after).then_some(Reason::NoSignal {
            signal,
            missing_for,
        })
    }

    /// Applies the bounds and the rate-of-change limit to the algorithm's proposal for `dir`.
    /// `forced` (the safe rate on a stall) skips the rate-of-change limit but not the bounds.
    #[allow(clippy::too_many_arguments)]
    pub fn limit(
        &mut self,
        now: Instant,
        dir: Direction,
        cfg: &Config,
        cur: Rate,
        proposed: Rate,
        reason: Reason,
        forced: bool,
    ) -> (Rate, Reason) {
        let (lo, hi) = (cfg.min[dir], cfg.max[dir].max(cfg.min[dir]));
        // A proposal outside the bounds keeps the law's reason: the rule that asked (an outage
        // asks for nothing, a probe for more than `max`) is what the log must name, and the
        // rate at a bound shows the clamp.
        let mut rate = proposed.clamp(lo, hi);
        let mut why = reason;
        let st = &mut self.st[dir];
        if rate != cur && !forced {
            let since = st.last_change.map(|t| now.saturating_duration_since(t));
            if since.is_some_and(|d| d < self.p.min_change_interval) {
                return (cur.clamp(lo, hi), Reason::RateLimited);
            }
            if rate > cur {
                if st
                    .last_decrease
                    .is_some_and(|t| now.saturating_duration_since(t) < self.p.hold_after_decrease)
                {
                    return (cur.clamp(lo, hi), Reason::RateLimited);
                }
                let dt = since.map_or(1.0, |d| d.as_secs_f64().min(1.0));
                let cap = cur.bytes_per_s_f64() * (1.0 + self.p.max_increase_per_s * dt);
                let cap = Rate::from_bytes_per_s_f64(cap.min(hi.bytes_per_s_f64())).max(cur);
                if rate > cap {
                    rate = cap;
                    why = Reason::RateLimited;
                }
            }
        }
        let rate = rate.clamp(lo, hi);
        if rate != cur {
            st.last_change = Some(now);
            if rate < cur {
                st.last_decrease = Some(now);
            }
        }
        (rate, why)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mbit(m: f64) -> Rate {
        Rate::from_mbit(m)
    }

    #[test]
    fn a_proposal_outside_the_bounds_is_clamped_and_keeps_the_laws_reason() {
        let cfg = Config::default();
        let mut s = Safety::new(SafetyParams::default(), Instant::ZERO);
        let d = Direction::Down;
        let t = Instant::from_secs(1);
        let (r, why) = s.limit(t, d, &cfg, mbit(20.0), Rate::ZERO, Reason::Outage, false);
        assert_eq!((r, why), (cfg.min[d], Reason::Outage));
    }

    #[test]
    fn no_increase_right_after_a_decrease() {
        let cfg = Config::default();
        let mut s = Safety::new(SafetyParams::default(), Instant::ZERO);
        let d = Direction::Down;
        let t = Instant::from_secs(1);
        let (r, _) = s.limit(t, d, &cfg, mbit(20.0), mbit(10.0), Reason::Hold, false);
        assert_eq!(r, mbit(10.0));
        let t2 = t + Duration::from_millis(300);
        let (r2, why) = s.limit(t2, d, &cfg, r, mbit(15.0), Reason::Increase, false);
        assert_eq!((r2, why), (mbit(10.0), Reason::RateLimited));
        let t3 = t + Duration::from_millis(600);
        let (r3, _) = s.limit(t3, d, &cfg, r, mbit(15.0), Reason::Increase, false);
        assert_eq!(r3, mbit(15.0));
    }

    #[test]
    fn stall_reports_after_stall_after() {
        let mut s = Safety::new(SafetyParams::default(), Instant::ZERO);
        let d = Direction::Up;
        assert!(s
            .stall(Instant::from_secs(1), d, Signal::Delay, true)
            .is_none());
        assert!(s
            .stall(Instant::from_millis(2900), d, Signal::Delay, false)
            .is_none());
        let r = s.stall(Instant::from_secs(3), d, Signal::Delay, false);
        assert_eq!(
            r,
            Some(Reason::NoSignal {
                signal: Signal::Delay,
                missing_for: Duration::from_secs(2)
            })
        );
    }
}
