//! cake-autorate's algorithm (lynxthecat/cake-autorate), ported:
//!
//! - per reflector and direction a baseline EWMA of the one-way delay (RTT/2 when only RTT is
//!   known) that rises with alpha 0.001 and falls with alpha 0.9 per sample; `delta = owd -
//!   baseline`;
//! - a sample is *delayed* if `delta > 30 ms` plus one MTU's serialisation time at the current
//!   rate; *bufferbloat* when 3 of the last 6 samples (all reflectors) are delayed;
//! - every 200 ms, `load = achieved / shaper rate`:
//!   - bufferbloat, at least 300 ms after the previous decrease: multiply by a factor from 0.99
//!     (average delta 30 ms) to 0.75 (>= 60 ms), linear in between;
//!   - else high load (> 75 %): multiply by 1.04 (average delta <= 10 ms) .. 1.0 (30 ms);
//!   - else (low load or idle): drift toward the base rate by x0.99 / x1.01 per second.
//!
//! Stalls (no reply for 10 s -> minimum rate) are the engine's safety rule with
//! `safety.stall_after` (default 2 s; set 10 s for cake-autorate's own timing) and
//! `safe = min`. Reflector offences and replacement are the pool's.

use crate::config::{check, law_params, ms, Config, ConfigError};
use crate::engine::{DirSignals, Law, Needs, Step};
use crate::{Direction, Duration, Instant, PerDir, Rate, Reason, ReflectorId, Sample};

/// Samples in the bufferbloat window.
const WINDOW: usize = 6;
/// Most reflectors with their own baselines.
const MAX_REFLECTORS: usize = 64;

law_params! {
    /// cake-autorate's parameters and defaults.
    pub struct CakeAutorateParams, "cake_autorate" {
        /// Control interval. Default 200 ms.
        interval: Duration = ms(200), ms(10), ms(10_000), "10 ms ..= 10 s";
        /// Baseline EWMA alpha when the delay rises. Default 0.001.
        alpha_baseline_increase: f64 = 0.001, f64::MIN_POSITIVE, 1.0, "(0, 1]";
        /// Baseline EWMA alpha when the delay falls. Default 0.9.
        alpha_baseline_decrease: f64 = 0.9, f64::MIN_POSITIVE, 1.0, "(0, 1]";
        /// Delta above which a sample is delayed. Default 30 ms.
        delay_threshold: Duration = ms(30), ms(1), ms(1_000), "1 ms ..= 1 s";
        /// Delayed samples of the last 6 that mean bufferbloat. Default 3.
        bufferbloat_detection_thr: usize = 3, 1, WINDOW, "1 ..= 6";
        /// Load above which the link counts as highly loaded. Default 0.75.
        high_load_thr: f64 = 0.75, 0.0, 1.0, "0 ..= 1";
        /// Average delta of the mildest decrease. Default 30 ms.
        avg_delta_low: Duration = ms(30), Duration::ZERO, ms(10_000), "0 ..= 10 s";
        /// Average delta of the strongest decrease. Default 60 ms.
        avg_delta_high: Duration = ms(60), Duration::ZERO, ms(10_000), "> avg_delta_low, <= 10 s";
        /// Mildest decrease factor. Default 0.99.
        adjust_down_min: f64 = 0.99, f64::MIN_POSITIVE, 1.0, "(0, 1]";
        /// Strongest decrease factor. Default 0.75.
        adjust_down_max: f64 = 0.75, f64::MIN_POSITIVE, 1.0, "(0, adjust_down_min]";
        /// Largest increase factor (delta <= 10 ms). Default 1.04.
        adjust_up_max: f64 = 1.04, 1.0, 2.0, "1 ..= 2";
        /// Delta up to which the full increase applies. Default 10 ms.
        increase_full_delta: Duration = ms(10), Duration::ZERO, ms(1_000), "< delay_threshold";
        /// Least time between decreases. Default 300 ms.
        decrease_refractory: Duration = ms(300), Duration::ZERO, ms(10_000), "0 ..= 10 s";
        /// Drift toward base per second when lightly loaded (0.01: x0.99 / x1.01). Default
        /// 0.01.
        drift_per_s: f64 = 0.01, 0.0, 0.5, "0 ..= 0.5";
        /// MTU whose serialisation time is added to the thresholds, bytes. Default 1500.
        mtu: u32 = 1_500, 576, 65_535, "576 ..= 65535";
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct Win {
    delayed: [bool; WINDOW],
    delta_ms: [f64; WINDOW],
    n: usize,
    i: usize,
    rate: u64,
    last_decrease: Option<Instant>,
}

/// cake-autorate. See the module documentation.
#[derive(Clone, Debug, Default)]
pub struct CakeAutorate {
    /// Parameters.
    pub p: CakeAutorateParams,
    baselines: Vec<(ReflectorId, PerDir<Option<f64>>)>,
    win: PerDir<Win>,
}

impl CakeAutorate {
    /// With parameters `p`.
    pub fn new(p: CakeAutorateParams) -> Self {
        CakeAutorate {
            p,
            baselines: Vec::new(),
            win: PerDir::default(),
        }
    }

    fn ser_ms(&self, dir: Direction) -> f64 {
        let r = self.win[dir].rate;
        if r == 0 {
            0.0
        } else {
            f64::from(self.p.mtu) * 1e3 / r as f64
        }
    }

    fn add(&mut self, id: ReflectorId, dir: Direction, raw_ms: f64) {
        let i = match self.baselines.iter().position(|b| b.0 == id) {
            Some(i) => i,
            None if self.baselines.len() < MAX_REFLECTORS => {
                self.baselines.push((id, PerDir::default()));
                self.baselines.len() - 1
            }
            None => return,
        };
        let b = &mut self.baselines[i].1[dir];
        let base = match *b {
            None => raw_ms,
            Some(prev) => {
                let a = if raw_ms >= prev {
                    self.p.alpha_baseline_increase
                } else {
                    self.p.alpha_baseline_decrease
                };
                prev + a * (raw_ms - prev)
            }
        };
        *b = Some(base);
        let delta = raw_ms - base;
        let thr = self.p.delay_threshold.as_millis_f64() + self.ser_ms(dir);
        let w = &mut self.win[dir];
        w.delayed[w.i] = delta > thr;
        w.delta_ms[w.i] = delta;
        w.i = (w.i + 1) % WINDOW;
        w.n = (w.n + 1).min(WINDOW);
    }
}

fn lerp(x: f64, x0: f64, x1: f64, y0: f64, y1: f64) -> f64 {
    if x <= x0 {
        y0
    } else if x >= x1 {
        y1
    } else {
        y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    }
}

impl Law for CakeAutorate {
    fn name(&self) -> &'static str {
        "cake-autorate"
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
            p.avg_delta_high > p.avg_delta_low,
            "cake_autorate.avg_delta_high",
            p.avg_delta_high,
            "> avg_delta_low, <= 10 s",
        )?;
        check(
            p.adjust_down_max <= p.adjust_down_min,
            "cake_autorate.adjust_down_max",
            p.adjust_down_max,
            "(0, adjust_down_min]",
        )?;
        check(
            p.increase_full_delta < p.delay_threshold,
            "cake_autorate.increase_full_delta",
            p.increase_full_delta,
            "< delay_threshold",
        )
    }
    /// Its own windows of per-reflector delays, as cake-autorate: the probes only.
    fn filters_probes(&self) -> bool {
        true
    }
    fn on_sample(&mut self, _now: Instant, s: &Sample) {
        match *s {
            Sample::Owd {
                reflector,
                dir,
                owd_ns,
                ..
            } => self.add(reflector, dir, owd_ns as f64 / 1e6),
            Sample::Rtt { reflector, rtt, .. } => {
                let half = rtt.as_millis_f64() / 2.0;
                self.add(reflector, Direction::Down, half);
                self.add(reflector, Direction::Up, half);
            }
            _ => {}
        }
    }
    fn step(&mut self, now: Instant, dir: Direction, sig: &DirSignals, cfg: &Config) -> Step {
        let p = self.p;
        let ser = self.ser_ms(dir);
        let w = &mut self.win[dir];
        w.rate = sig.current.bytes_per_s();
        let n = w.n.max(1);
        let delayed = w.delayed[..w.n].iter().filter(|&&d| d).count();
        let avg = w.delta_ms[..w.n].iter().sum::<f64>() / n as f64;
        let cur = sig.current.bytes_per_s_f64();
        let load = sig.load.unwrap_or(0.0);
        if delayed >= p.bufferbloat_detection_thr {
            if w.last_decrease
                .is_none_or(|t| now.saturating_duration_since(t) >= p.decrease_refractory)
            {
                w.last_decrease = Some(now);
                let f = lerp(
                    avg,
                    p.avg_delta_low.as_millis_f64() + ser,
                    p.avg_delta_high.as_millis_f64() + ser,
                    p.adjust_down_min,
                    p.adjust_down_max,
                );
                let delay = Duration::from_secs_f64(avg.max(0.0) / 1e3);
                return Step {
                    rate: Rate::from_bytes_per_s_f64(cur * f),
                    reason: Reason::Decrease { delay },
                };
            }
            return Step {
                rate: sig.current,
                reason: Reason::Hold,
            };
        }
        if load > p.high_load_thr {
            let f = lerp(
                avg,
                p.increase_full_delta.as_millis_f64() + ser,
                p.delay_threshold.as_millis_f64() + ser,
                p.adjust_up_max,
                1.0,
            );
            return Step {
                rate: Rate::from_bytes_per_s_f64((cur * f).ceil()),
                reason: Reason::Increase,
            };
        }
        let dt = p.interval.as_secs_f64();
        let base = cfg.base[dir].bytes_per_s_f64();
        let rate = if cur > base {
            (cur * (1.0 - p.drift_per_s).powf(dt)).max(base)
        } else {
            (cur * (1.0 + p.drift_per_s).powf(dt)).min(base)
        };
        Step {
            rate: Rate::from_bytes_per_s_f64(rate),
            reason: Reason::DriftToBase,
        }
    }
}
