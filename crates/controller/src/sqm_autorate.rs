//! sqm-autorate's algorithm (sqm-autorate Lua; Lochnair/sqm-autorate-rust), ported:
//!
//! - every 0.5 s; per reflector and direction a slow EWMA (135 s half-life) and a fast EWMA
//!   (0.4 s half-life) of the one-way delay; `delta = fast - slow`;
//! - delay statistic = the 3rd smallest delta of the reflectors heard from since the previous
//!   tick (fewer than 3: the largest); threshold 15 ms; high load 0.8;
//! - increase (statistic below threshold, load above 0.8): remember `cur * load` as a safe rate;
//!   `next = cur * (1 + 0.1 * max(0, 1 - cur / max)) + 0.03 * base`;
//! - decrease (statistic above threshold): `next = min(0.9 * cur * load, a random remembered
//!   safe rate)`; the random draw uses a seeded generator;
//! - no fresh data: the minimum rate.

use crate::config::{check, law_params, ms, Config, ConfigError};
use crate::engine::{DirSignals, Law, Needs, Step};
use crate::{Direction, Duration, Instant, PerDir, Rate, Reason, ReflectorId, Sample, Signal};
use qdisc::Rng;

/// Remembered safe rates per direction.
const SAFE_RATES: usize = 20;
/// Most reflectors with their own filters.
const MAX_REFLECTORS: usize = 64;

law_params! {
    /// sqm-autorate's parameters and defaults.
    pub struct SqmAutorateParams, "sqm_autorate" {
        /// Tick. Default 500 ms.
        interval: Duration = ms(500), ms(10), ms(10_000), "10 ms ..= 10 s";
        /// Slow baseline half-life. Default 135 s.
        slow_half_life: Duration = ms(135_000), ms(1_000), ms(3_600_000), "1 s ..= 1 h";
        /// Fast EWMA half-life. Default 0.4 s.
        fast_half_life: Duration = ms(400), ms(10), ms(3_600_000), "10 ms ..= slow_half_life";
        /// Which smallest delta is the statistic (1-based). Default 3.
        rank: usize = 3, 1, 64, "1 ..= 64";
        /// Delay threshold. Default 15 ms.
        threshold: Duration = ms(15), ms(1), ms(1_000), "1 ms ..= 1 s";
        /// High load. Default 0.8.
        high_load: f64 = 0.8, 0.0, 1.0, "0 ..= 1";
        /// Seed of the safe-rate draw. Default 1.
        seed: u64 = 1, 0, u64::MAX, "any whole number";
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct Filt {
    slow: f64,
    fast: f64,
    at: Instant,
    init: bool,
}

#[derive(Clone, Copy, Debug, Default)]
struct Safe {
    rates: [u64; SAFE_RATES],
    n: usize,
    i: usize,
}

/// sqm-autorate. See the module documentation.
#[derive(Clone, Debug)]
pub struct SqmAutorate {
    /// Parameters.
    pub p: SqmAutorateParams,
    filt: Vec<(ReflectorId, PerDir<Filt>)>,
    safe: PerDir<Safe>,
    last_tick: Option<Instant>,
    rng: Rng,
    scratch: Vec<f64>,
}

impl Default for SqmAutorate {
    fn default() -> Self {
        Self::new(SqmAutorateParams::default())
    }
}

impl SqmAutorate {
    /// With parameters `p`.
    pub fn new(p: SqmAutorateParams) -> Self {
        SqmAutorate {
            p,
            filt: Vec::new(),
            safe: PerDir::default(),
            last_tick: None,
            rng: Rng::new(p.seed),
            scratch: Vec::new(),
        }
    }

    fn add(&mut self, now: Instant, id: ReflectorId, dir: Direction, raw_ms: f64) {
        let i = match self.filt.iter().position(|f| f.0 == id) {
            Some(i) => i,
            None if self.filt.len() < MAX_REFLECTORS => {
                self.filt.push((id, PerDir::default()));
                self.filt.len() - 1
            }
            None => return,
        };
        let f = &mut self.filt[i].1[dir];
        if !f.init {
            *f = Filt {
                slow: raw_ms,
                fast: raw_ms,
                at: now,
                init: true,
            };
            return;
        }
        let dt = now.saturating_duration_since(f.at).as_secs_f64();
        let a = |hl: Duration| 1.0 - (-dt / hl.as_secs_f64()).exp2();
        f.slow += a(self.p.slow_half_life) * (raw_ms - f.slow);
        f.fast += a(self.p.fast_half_life) * (raw_ms - f.fast);
        f.at = now;
    }
}

impl Law for SqmAutorate {
    fn name(&self) -> &'static str {
        "sqm-autorate"
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
            p.fast_half_life <= p.slow_half_life,
            "sqm_autorate.fast_half_life",
            p.fast_half_life,
            "10 ms ..= slow_half_life",
        )
    }
    /// Its own windows of per-reflector delays, as sqm-autorate: the probes only.
    fn filters_probes(&self) -> bool {
        true
    }
    fn on_sample(&mut self, now: Instant, s: &Sample) {
        match *s {
            Sample::Owd {
                reflector,
                dir,
                owd_ns,
                ..
            } => self.add(now, reflector, dir, owd_ns as f64 / 1e6),
            Sample::Rtt { reflector, rtt, .. } => {
                let half = rtt.as_millis_f64() / 2.0;
                self.add(now, reflector, Direction::Down, half);
                self.add(now, reflector, Direction::Up, half);
            }
            _ => {}
        }
    }
    fn step(&mut self, now: Instant, dir: Direction, sig: &DirSignals, cfg: &Config) -> Step {
        let since = self
            .last_tick
            .filter(|&t| t < now)
            .unwrap_or(now - self.p.interval);
        if dir == Direction::Up {
            self.last_tick = Some(now);
        }
        self.scratch.clear();
        for (_, f) in &self.filt {
            let f = f[dir];
            if f.init && f.at > since {
                self.scratch.push(f.fast - f.slow);
            }
        }
        let n = self.scratch.len();
        if n == 0 {
            let missing_for = now.saturating_duration_since(since);
            return Step {
                rate: cfg.min[dir],
                reason: Reason::NoSignal {
                    signal: Signal::Delay,
                    missing_for,
                },
            };
        }
        self.scratch.sort_unstable_by(f64::total_cmp);
        let stat = self.scratch[self.p.rank.min(n) - 1];
        let cur = sig.current.bytes_per_s_f64();
        let load = sig.load.unwrap_or(0.0);
        let safe = &mut self.safe[dir];
        if stat < self.p.threshold.as_millis_f64() && load > self.p.high_load {
            safe.rates[safe.i] = (cur * load) as u64;
            safe.i = (safe.i + 1) % SAFE_RATES;
            safe.n = (safe.n + 1).min(SAFE_RATES);
            let max = cfg.max[dir].bytes_per_s_f64();
            let next = cur * (1.0 + 0.1 * (1.0 - cur / max).max(0.0))
                + 0.03 * cfg.base[dir].bytes_per_s_f64();
            Step {
                rate: Rate::from_bytes_per_s_f64(next),
                reason: Reason::Increase,
            }
        } else if stat > self.p.threshold.as_millis_f64() {
            let mut next = 0.9 * cur * load;
            if safe.n > 0 {
                let k = (self.rng.next_u64() % safe.n as u64) as usize;
                next = next.min(safe.rates[k] as f64);
            }
            let delay = Duration::from_secs_f64(stat.max(0.0) / 1e3);
            Step {
                rate: Rate::from_bytes_per_s_f64(next),
                reason: Reason::Decrease { delay },
            }
        } else {
            Step {
                rate: sig.current,
                reason: Reason::Hold,
            }
        }
    }
}
