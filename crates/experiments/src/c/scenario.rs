//! The variable-link scenarios of section C: deterministic, seeded capacity processes per
//! direction (the slides' radio, a step drop, a slow fade, fast fluctuation, an outage) and the
//! recorded cellular traces in `scenarios/traces/` (compiled in).

use qdisc::{Duration, Instant, Rng};
use sim::{LinkRate, MahimahiTrace, MAHIMAHI_MTU};

/// Width of one slot of a synthetic capacity series.
pub const SLOT: Duration = Duration::from_millis(50);

/// One direction's capacity over time.
#[derive(Clone, Debug)]
pub enum Capacity {
    /// Piecewise constant: `rates[i]` bytes/s during slot `i` of [`SLOT`]; the last value holds
    /// after the end.
    Series(Vec<u64>),
    /// A recorded mahimahi trace (looping).
    Trace(MahimahiTrace),
}

impl Capacity {
    /// The capacity at `t`, bytes/s: the slot's rate, or for a trace the delivery opportunities
    /// in the [`SLOT`] (50 ms, one control interval) starting at `t`.
    pub fn rate_at(&self, t: Instant) -> u64 {
        self.rate_over(t, SLOT)
    }

    /// The mean capacity over `[t, t + window)`, bytes/s: for a series the rate of `t`'s slot
    /// (the window is ignored: a slot's rate is its instantaneous capacity), for a trace the
    /// delivery opportunities in the window. A zero window reads as one nanosecond.
    pub fn rate_over(&self, t: Instant, window: Duration) -> u64 {
        match self {
            Capacity::Series(v) => {
                let i = (t.as_nanos() / SLOT.as_nanos()) as usize;
                v.get(i).or(v.last()).copied().unwrap_or(1)
            }
            Capacity::Trace(tr) => {
                let w = window.max(Duration::from_nanos(1));
                let n = tr.count_before(t + w) - tr.count_before(t);
                n * u64::from(MAHIMAHI_MTU) * 1_000_000_000 / w.as_nanos()
            }
        }
    }

    /// The link rate to start the simulator with.
    pub fn link_rate(&self) -> LinkRate {
        match self {
            Capacity::Series(_) => LinkRate::Fixed(self.rate_at(Instant::ZERO).max(1)),
            Capacity::Trace(t) => LinkRate::Mahimahi(t.clone()),
        }
    }

    /// Whether the loop must update the link rate every slot (synthetic series).
    pub fn is_series(&self) -> bool {
        matches!(self, Capacity::Series(_))
    }

    /// Mean capacity over `[from, to)` in bytes/s, sampled every 50 ms.
    pub fn mean(&self, from: Instant, to: Instant) -> f64 {
        let mut t = from;
        let (mut s, mut n) = (0.0, 0u64);
        while t < to {
            s += self.rate_at(t) as f64;
            n += 1;
            t += SLOT;
        }
        if n == 0 {
            0.0
        } else {
            s / n as f64
        }
    }
}

/// A variable-link scenario.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// Short name (`radio`, `step`, `fade`, `fast`, `outage`, `att-lte`, ...).
    pub name: &'static str,
    /// One line in words.
    pub description: &'static str,
    /// Simulated seconds at time scale 1.
    pub secs: f64,
    /// Download capacity (towards the client).
    pub down: Capacity,
    /// Upload capacity.
    pub up: Capacity,
    /// The radio's droptail buffer, packets (the queue nobody can change).
    pub radio_buffer: u32,
    /// Controllers' rate range per direction `(min, max)`, bytes/s.
    pub range_down: (u64, u64),
    /// Upload range.
    pub range_up: (u64, u64),
    /// The two static CAKE rates of the slides for this scenario (C2 "safe" and C3
    /// "optimistic"), Mbit/s `(down, up)` each.
    pub statics: [(f64, f64); 2],
}

/// Bytes/s of `m` Mbit/s.
fn mb(m: f64) -> u64 {
    controller::mbit(m)
}

/// The names of the built-in scenarios, the slides' radio first.
pub const NAMES: &[&str] = &[
    "radio",
    "step",
    "fade",
    "fast",
    "outage",
    "att-lte",
    "verizon-lte",
    "tmobile-lte",
];

/// Number of slots in `secs`.
fn slots(secs: f64) -> usize {
    (secs / SLOT.as_secs_f64()).ceil() as usize + 1
}

/// The slides' radio: a mean around `mean` Mbit/s wandering within about +-8% (AR(1), 0.5 s
/// correlation), with drops below the average (every ~6 s on average, to 50-85% of the mean for
/// 0.3-2.5 s).
fn radio_series(mean: f64, secs: f64, rng: &mut Rng) -> Vec<u64> {
    let n = slots(secs);
    let mut v = Vec::with_capacity(n);
    let mut x = 0.0f64;
    let mut dip_left = 0usize;
    let mut dip_depth = 1.0;
    for _ in 0..n {
        // AR(1) with uniform innovations; stationary sd ~ 0.05.
        x = 0.9 * x + 0.04 * (rng.next_f64() * 2.0 - 1.0);
        if dip_left == 0 && rng.next_f64() < SLOT.as_secs_f64() / 6.0 {
            dip_left = 6 + (rng.next_f64() * 44.0) as usize;
            dip_depth = 0.5 + 0.35 * rng.next_f64();
        }
        let f = if dip_left > 0 {
            dip_left -= 1;
            dip_depth
        } else {
            1.0
        };
        v.push(mb(mean * (1.0 + x.clamp(-0.08, 0.08)) * f));
    }
    v
}

fn series(secs: f64, f: impl Fn(f64) -> f64) -> Vec<u64> {
    (0..slots(secs))
        .map(|i| mb(f(i as f64 * SLOT.as_secs_f64())))
        .collect()
}

fn trace(text: &str) -> Capacity {
    match MahimahiTrace::parse(text) {
        Ok(t) => Capacity::Trace(t),
        // The compiled-in traces parse (tested); an unparsable one becomes a 1 Mbit/s link.
        Err(_) => Capacity::Series(vec![mb(1.0)]),
    }
}

const ATT_DOWN: &str = include_str!("../../../../scenarios/traces/ATT-LTE-driving-2016.down");
const ATT_UP: &str = include_str!("../../../../scenarios/traces/ATT-LTE-driving-2016.up");
const VZ_DOWN: &str = include_str!("../../../../scenarios/traces/Verizon-LTE-short.down");
const VZ_UP: &str = include_str!("../../../../scenarios/traces/Verizon-LTE-short.up");
const TM_DOWN: &str = include_str!("../../../../scenarios/traces/TMobile-LTE-short-60s.down");
const TM_UP: &str = include_str!("../../../../scenarios/traces/TMobile-LTE-short-60s.up");

/// The scenario called `name` (see [`NAMES`]), its random capacity process drawn from `seed`.
pub fn scenario(name: &str, seed: u64) -> Option<Scenario> {
    let mut rng = Rng::new(seed ^ 0xc0ff_ee00);
    let radio_ranges = ((mb(5.0), mb(150.0)), (mb(2.0), mb(50.0)));
    let statics_radio = [(100.0, 33.0), (150.0, 50.0)];
    let s = match name {
        "radio" => {
            let secs = 30.0;
            Scenario {
                name: "radio",
                description: "the slides' point-to-point radio: ~110-130 Mbit/s down, ~40 up, \
                              with drops below the average",
                secs,
                down: Capacity::Series(radio_series(120.0, secs, &mut rng)),
                up: Capacity::Series(radio_series(40.0, secs, &mut rng)),
                radio_buffer: 150,
                range_down: radio_ranges.0,
                range_up: radio_ranges.1,
                statics: statics_radio,
            }
        }
        "step" => Scenario {
            name: "step",
            description: "120/40 Mbit/s, a step drop to 40/15 at 15 s, back at 30 s",
            secs: 45.0,
            down: Capacity::Series(series(45.0, |t| {
                if (15.0..30.0).contains(&t) {
                    40.0
                } else {
                    120.0
                }
            })),
            up: Capacity::Series(series(45.0, |t| {
                if (15.0..30.0).contains(&t) {
                    15.0
                } else {
                    40.0
                }
            })),
            radio_buffer: 150,
            range_down: radio_ranges.0,
            range_up: radio_ranges.1,
            statics: statics_radio,
        },
        "fade" => Scenario {
            name: "fade",
            description: "slow fade: 120 -> 30 -> 120 Mbit/s down (40 -> 10 up) over 30 s, twice",
            secs: 60.0,
            down: Capacity::Series(series(60.0, |t| {
                75.0 + 45.0 * (t * std::f64::consts::TAU / 30.0).cos()
            })),
            up: Capacity::Series(series(60.0, |t| {
                25.0 + 15.0 * (t * std::f64::consts::TAU / 30.0).cos()
            })),
            radio_buffer: 150,
            range_down: radio_ranges.0,
            range_up: radio_ranges.1,
            statics: statics_radio,
        },
        "fast" => {
            let secs = 40.0;
            let mut d = Vec::new();
            let mut u = Vec::new();
            let (mut cd, mut cu) = (120.0, 40.0);
            for i in 0..slots(secs) {
                if i % 4 == 0 {
                    cd = 50.0 + 80.0 * rng.next_f64();
                    cu = 15.0 + 30.0 * rng.next_f64();
                }
                d.push(mb(cd));
                u.push(mb(cu));
            }
            Scenario {
                name: "fast",
                description: "fast fluctuation: a new rate every 200 ms, uniform in 50-130 \
                              Mbit/s down, 15-45 up",
                secs,
                down: Capacity::Series(d),
                up: Capacity::Series(u),
                radio_buffer: 150,
                range_down: radio_ranges.0,
                range_up: radio_ranges.1,
                statics: statics_radio,
            }
        }
        "outage" => Scenario {
            name: "outage",
            description: "120/40 Mbit/s with two outages (0.5 Mbit/s) of 2 s at 12 s and 5 s at \
                          25 s",
            secs: 45.0,
            down: Capacity::Series(series(45.0, |t| {
                if (12.0..14.0).contains(&t) || (25.0..30.0).contains(&t) {
                    0.5
                } else {
                    120.0
                }
            })),
            up: Capacity::Series(series(45.0, |t| {
                if (12.0..14.0).contains(&t) || (25.0..30.0).contains(&t) {
                    0.5
                } else {
                    40.0
                }
            })),
            radio_buffer: 150,
            range_down: radio_ranges.0,
            range_up: radio_ranges.1,
            statics: statics_radio,
        },
        "att-lte" => Scenario {
            name: "att-lte",
            description: "AT&T LTE while driving (mahimahi trace), mean 4.6 down / 1.9 up Mbit/s",
            secs: 60.0,
            down: trace(ATT_DOWN),
            up: trace(ATT_UP),
            radio_buffer: 300,
            range_down: (mb(0.5), mb(12.0)),
            range_up: (mb(0.3), mb(5.0)),
            statics: [(3.7, 1.6), (10.0, 3.8)],
        },
        "verizon-lte" => Scenario {
            name: "verizon-lte",
            description: "Verizon LTE (mahimahi trace), mean 5.0 down / 5.9 up Mbit/s",
            secs: 60.0,
            down: trace(VZ_DOWN),
            up: trace(VZ_UP),
            radio_buffer: 300,
            range_down: (mb(0.5), mb(12.0)),
            range_up: (mb(0.5), mb(12.0)),
            statics: [(4.3, 5.7), (9.8, 10.6)],
        },
        "tmobile-lte" => Scenario {
            name: "tmobile-lte",
            description: "T-Mobile LTE (first 60 s of the mahimahi trace), ~17 down / 13 up \
                          Mbit/s",
            secs: 60.0,
            down: trace(TM_DOWN),
            up: trace(TM_UP),
            radio_buffer: 300,
            range_down: (mb(1.0), mb(35.0)),
            range_up: (mb(1.0), mb(30.0)),
            statics: [(13.8, 11.7), (29.3, 25.4)],
        },
        _ => return None,
    };
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_named_scenario_builds_and_traces_parse() {
        for n in NAMES {
            let s = scenario(n, 1).unwrap_or_else(|| panic!("{n}"));
            let m = s.down.mean(Instant::ZERO, Instant::from_secs(20));
            assert!(m > 100_000.0, "{n}: mean {m}");
        }
        assert!(scenario("nope", 1).is_none());
    }

    #[test]
    fn radio_capacity_averages_about_120_mbit_with_dips_below_100() {
        let s = scenario("radio", 3).unwrap();
        let m = s.down.mean(Instant::ZERO, Instant::from_secs(30)) * 8e-6;
        assert!((105.0..125.0).contains(&m), "{m}");
        let low = (0..600)
            .map(|i| s.down.rate_at(Instant::from_millis(i * 50)))
            .min()
            .unwrap_or(0) as f64
            * 8e-6;
        assert!(low < 100.0, "{low}");
    }
}
