//! Measurement analysis of lab runs: pure functions from a measured [`LabRun`] to the figures
//! `purple demo --lab` shows (loaded latency after the warm-up, the mean capacity and the share
//! of it a contender used, how a daemon's shaped rate tracked the capacity).
//!
//! **Owns**: which probe is the loaded latency ([`LOADED_LATENCY_PROBE`]), the warm-up rule
//! ([`warm_up_s`]), and the reductions ([`demo_row`], [`tracking`]). **Must not**: run
//! anything, print, or touch files; the CLI runs the lab and renders these results.

use crate::scenario::{ProbeId, Scenario, Shape};
use crate::LabRun;
use controller::{Direction, PerDir};
use qdisc::quantile;
use sim::tally::LatencyStats;
use sim::LoadedSummary;
use std::fmt;

/// The probe whose RTT is the lab demo's loaded latency: the best-effort UDP ping-pong (one
/// sample every 100 ms).
pub const LOADED_LATENCY_PROBE: ProbeId = ProbeId::UDP_BE;

/// Seconds of load skipped before figures are taken: `min(load_s / 6, 5)` (one rule for the
/// lab and the simulated testbeds of section B, which share it through `sim::tally`).
pub use sim::tally::warm_up_s;

/// Why a run cannot be reduced to the demo's figures.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AnalysisError {
    /// The run's test has no such probe (or its flow is missing from the summary).
    NoProbe {
        /// The probe's label ([`ProbeId::label`]).
        probe: String,
        /// The contender whose run lacks it.
        contender: String,
    },
}

impl fmt::Display for AnalysisError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AnalysisError::NoProbe { probe, contender } => write!(
                f,
                "{contender}: the run has no probe {probe:?} (the loaded latency's probe)"
            ),
        }
    }
}

impl std::error::Error for AnalysisError {}

/// How a daemon's download rate followed the emulator's capacity during the load (the
/// tracking part of the lab demo's [`sim::LoadedSummary`]).
pub use sim::Tracking;

/// How the rate `rate_at(t)` (Mbit/s; `None` before the first decision) followed the capacity
/// `cap_mbit` (one value per bin of `bin_s` seconds, read at each bin's middle) from `load_s`
/// on. `None` when no bin at or after `load_s` had a rate.
///
/// A drop is a bin whose capacity is below the previous bin's (the first bin of the load is
/// not compared with the idle phase); it is followed when the rate is at or below the new
/// capacity in some bin before the capacity changes again, and the reaction time is the number
/// of bins until then times `bin_s`.
pub fn tracking_of(
    cap_mbit: &[f64],
    bin_s: f64,
    load_s: f64,
    rate_at: impl Fn(f64) -> Option<f64>,
) -> Option<Tracking> {
    let mid = |k: usize| (k as f64 + 0.5) * bin_s;
    let from = (0..cap_mbit.len()).position(|k| mid(k) >= load_s)?;
    let (mut sum, mut n, mut below) = (0.0, 0usize, 0usize);
    let mut reactions = Vec::new();
    let mut drops = 0;
    for k in from..cap_mbit.len() {
        let Some(rate) = rate_at(mid(k)) else {
            continue;
        };
        sum += rate;
        n += 1;
        if rate <= cap_mbit[k] + 1e-9 {
            below += 1;
        }
        if k > from && cap_mbit[k] < cap_mbit[k - 1] {
            drops += 1;
            // Until the next capacity change: the first bin whose rate is below the capacity.
            let mut j = k;
            while j < cap_mbit.len() && cap_mbit[j] == cap_mbit[k] {
                if rate_at(mid(j)).is_some_and(|r| r <= cap_mbit[k]) {
                    reactions.push((j - k) as f64 * bin_s);
                    break;
                }
                j += 1;
            }
        }
    }
    if n == 0 {
        return None;
    }
    reactions.sort_by(f64::total_cmp);
    Some(Tracking {
        mean_rate_mbit: sum / n as f64,
        below_capacity: below as f64 / n as f64,
        drops,
        drops_followed: reactions.len(),
        reaction_median_s: quantile::rounded_rank(&reactions, 0.5),
        reaction_max_s: reactions.last().copied(),
    })
}

/// How the `purple control` daemon's download rate followed the emulator's capacity from
/// `load_s` (s since the run's epoch) on; `None` for a contender without the daemon, without
/// the emulator's capacity series, or without any decision during the load.
pub fn tracking(run: &LabRun, load_s: f64) -> Option<Tracking> {
    let c = run.control.as_ref()?;
    tracking_of(&run.capacity_down_mbit, run.summary.bin_s, load_s, |t| {
        c.down_rate_at(t)
    })
}

/// How long after a decision the shaper may still hold the one before it: the daemon logs a
/// step and applies it in the same wake-up, and the read-back thread's clock and the log's
/// anchor differ by milliseconds; a second covers a stalled guest too.
pub const READBACK_LAG_S: f64 = 1.0;

/// Whether the rates read back from the shaper are ones its controller applied
/// ([`readback_check`]).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct ReadBackCheck {
    /// Readings taken [`READBACK_LAG_S`] or more after the controller's first applied
    /// download rate (before that the shaper may still hold the rate the testbed started it
    /// at, which no log line names).
    pub samples: usize,
    /// Readings taken before that, not judged.
    pub unjudged: usize,
    /// Of those judged, how many equal (within 0.5%) a download rate the controller applied and that
    /// was in force at some time in the [`READBACK_LAG_S`] before the reading.
    pub agree: usize,
    /// Reads that failed.
    pub errors: usize,
    /// The first failure, if any.
    pub first_error: Option<String>,
    /// The first reading that agreed with no applied rate: (seconds on the run's clock, Mbit/s
    /// read (`None`: unlimited), Mbit/s applied then).
    pub first_mismatch: Option<(f64, Option<f64>, f64)>,
}

/// Checks the controller's read-back samples against the download rates it applied
/// ([`crate::control::ControlTrace::points`] with `down_applied`). `None` when nothing read the shaper back.
pub fn readback_check(c: &crate::control::ControlTrace) -> Option<ReadBackCheck> {
    let rb = &c.readback;
    if rb.samples.is_empty() && rb.errors == 0 {
        return None;
    }
    let applied: Vec<(f64, f64)> = c
        .points
        .iter()
        .filter(|p| p.down_applied)
        .map(|p| (p.t, p.down_mbit))
        .collect();
    let mut out = ReadBackCheck {
        errors: rb.errors,
        first_error: rb.first_error.clone(),
        ..Default::default()
    };
    let same = |a: f64, b: f64| (a - b).abs() <= 0.005 * b.abs() + 1e-9;
    let Some(&(first, _)) = applied.first() else {
        out.unjudged = rb.samples.len();
        return Some(out);
    };
    out.unjudged = rb
        .samples
        .iter()
        .filter(|s| s.t < first + READBACK_LAG_S)
        .count();
    for s in rb.samples.iter().filter(|s| s.t >= first + READBACK_LAG_S) {
        // The applied rate in force at the window's start, and every one applied in it (a
        // few ms beyond the reading too: the two clocks are anchored apart).
        let from = applied.partition_point(|p| p.0 <= s.t - READBACK_LAG_S);
        let to = applied.partition_point(|p| p.0 <= s.t + 0.05);
        out.samples += 1;
        let window = &applied[from.saturating_sub(1)..to];
        match s.down_mbit {
            Some(r) if window.iter().any(|p| same(r, p.1)) => out.agree += 1,
            read => {
                // `window` is not empty: the first applied rate is at or before the lag.
                if let (None, Some(last)) = (out.first_mismatch, window.last()) {
                    out.first_mismatch = Some((s.t, read, last.1));
                }
            }
        }
    }
    Some(out)
}

/// Loaded latency, ms: each probe RTT of `rtt_ms` after the first `skip` minus the idle base
/// `base_ms`, floored at 0.
pub fn loaded_latency_ms(rtt_ms: &[f64], base_ms: f64, skip: usize) -> Vec<f64> {
    rtt_ms
        .iter()
        .skip(skip)
        .map(|l| (l - base_ms).max(0.0))
        .collect()
}

/// The mean of `cap_mbit` from bin `from` on; `None` when no bin is left or the mean is not
/// finite.
pub fn mean_capacity_mbit(cap_mbit: &[f64], from: usize) -> Option<f64> {
    let steady = cap_mbit.get(from..).filter(|s| !s.is_empty())?;
    Some(steady.iter().sum::<f64>() / steady.len() as f64).filter(|m| m.is_finite())
}

/// The lab's idle round trip, ms: the median over `runs` of [`LOADED_LATENCY_PROBE`]'s idle
/// median (its induced latency's base); `None` when no run measured one. What a simulator
/// run beside the lab's sets its path to ([`LabRun::induced`]).
pub fn idle_rtt_ms<'a>(runs: impl IntoIterator<Item = &'a LabRun>) -> Option<f64> {
    let v: Vec<f64> = runs
        .into_iter()
        .filter_map(|r| r.induced(LOADED_LATENCY_PROBE))
        .map(|i| i.base_ms)
        .filter(|b| b.is_finite() && *b > 0.0)
        .collect();
    quantile::median(&v)
}

/// One contender of the lab demo, reduced to the slides' figures: its run, whose summary
/// carries them as its loaded phase ([`sim::RunSummary::loaded`], filled by [`demo_row`]).
#[derive(Debug)]
pub struct DemoRow {
    /// The run as measured; [`demo_row`] fills its summary's `loaded` part: the loaded latency
    /// ([`LOADED_LATENCY_PROBE`]'s RTT minus its idle median) after the warm-up (`None` when
    /// the probe had no sample after it) and its samples, the TCP goodput per direction, the
    /// mean downlink capacity over the steady window (`None` without the emulator; the upload
    /// capacity is not known) and, for the daemon contenders, the shaped-rate tracking.
    pub run: LabRun,
}

impl DemoRow {
    /// The run's loaded phase (nothing measured for a row not made by [`demo_row`]).
    pub fn loaded(&self) -> &LoadedSummary {
        self.run.summary.loaded_or_empty()
    }

    /// Download goodput over the mean capacity (`None` without a capacity, or when the ratio
    /// is not finite).
    pub fn share(&self) -> Option<f64> {
        self.loaded().share(Direction::Down)
    }
}

/// Reduces one lab run to the demo's figures: `idle_s` seconds of idle probing came before the
/// load, and the first `warm_s` seconds of load are skipped (the probe sends every 100 ms).
/// Fails when the run has no [`LOADED_LATENCY_PROBE`].
pub fn demo_row(mut run: LabRun, idle_s: f64, warm_s: f64) -> Result<DemoRow, AnalysisError> {
    let no_probe = || AnalysisError::NoProbe {
        probe: LOADED_LATENCY_PROBE.label(),
        contender: run.contender.clone(),
    };
    let base = run
        .induced(LOADED_LATENCY_PROBE)
        .ok_or_else(no_probe)?
        .base_ms;
    let flow = run.probe_flow(LOADED_LATENCY_PROBE).ok_or_else(no_probe)?;
    let skip = (warm_s * 10.0).round() as usize;
    let samples = loaded_latency_ms(&flow.latency_samples_ms, base, skip);
    let from = ((idle_s + warm_s) / run.summary.bin_s).round() as usize;
    let capacity_down_mbit = mean_capacity_mbit(&run.capacity_down_mbit, from);
    let tracking = tracking(&run, idle_s);
    let throughput_mbit = PerDir::new(
        run.goodput_mbit(Direction::Down),
        run.goodput_mbit(Direction::Up),
    );
    run.summary.loaded = Some(LoadedSummary {
        latency: LatencyStats::of(&samples),
        samples_ms: samples,
        throughput_mbit,
        capacity_mbit: PerDir::new(capacity_down_mbit, None),
        one_way: None,
        tracking,
    });
    Ok(DemoRow { run })
}

/// The times (s since the run's epoch) of the ends of the capacity series' bins, the x axis of
/// a run's series.
pub fn bin_ends_s(run: &LabRun) -> Vec<f64> {
    let n = run.capacity_down_mbit.len();
    (0..n).map(|k| (k + 1) as f64 * run.summary.bin_s).collect()
}

/// The download rate `run`'s contender of `scenario` shapes to at `t` (s since the run's
/// epoch), Mbit/s: the daemon's decision in force, or a static CAKE's configured rate; `None`
/// when unshaped or before the daemon's first decision.
pub fn shaped_down_rate_mbit(scenario: &Scenario, run: &LabRun, t: f64) -> Option<f64> {
    if let Some(c) = &run.control {
        return c.down_rate_at(t);
    }
    let c = scenario
        .contenders
        .iter()
        .find(|c| c.name == run.contender)?;
    matches!(c.shape, Shape::Cake(_)).then(|| scenario.down_bit_s() as f64 / 1e6)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Capacity 10, 10, 4, 4, 4, 10, 10, 2, 2 (bins of 1 s); the rate passed as bin values.
    fn rate_from(bins: &'static [Option<f64>]) -> impl Fn(f64) -> Option<f64> {
        move |t| bins.get(t as usize).copied().flatten()
    }

    /// A run of the loaded-latency probe: 5 samples in the warm-up, then 10, 20, 30 ms over
    /// its idle median of 20 ms; capacity 100 Mbit/s for 2 s, then 50.
    fn probed_run(control: Option<crate::control::ControlTrace>) -> LabRun {
        let mut samples = vec![90.0; 5];
        samples.extend([30.0, 40.0, 50.0]);
        let mut caps = vec![100.0; 20];
        caps.extend([50.0; 20]);
        LabRun {
            contender: "x".into(),
            test: "radio".into(),
            summary: sim::RunSummary {
                bin_s: 0.1,
                flows: vec![sim::FlowSummary {
                    latency_samples_ms: samples,
                    ..sim::FlowSummary::default()
                }],
                loaded: Some(sim::LoadedSummary {
                    throughput_mbit: PerDir::new(45.0, 30.0),
                    ..sim::LoadedSummary::default()
                }),
                ..sim::RunSummary::default()
            },
            induced: vec![crate::ProbeLatency {
                id: LOADED_LATENCY_PROBE,
                name: LOADED_LATENCY_PROBE.label(),
                flow: 0,
                induced: crate::Induced {
                    base_ms: 20.0,
                    ..crate::Induced::default()
                },
            }],
            delay_stage: String::new(),
            warnings: Vec::new(),
            namespaces: Vec::new(),
            capacity_down_mbit: caps,
            control,
            host: None,
        }
    }

    #[test]
    fn demo_row_fills_the_summarys_loaded_part() {
        // 1 s idle, 0.5 s warm-up: 5 samples skipped, capacity from bin 15 (5 x 100, 20 x 50).
        let row = demo_row(probed_run(None), 1.0, 0.5).expect("has the probe");
        let l = row.loaded();
        assert_eq!(row.run.summary.loaded.as_ref(), Some(l));
        assert_eq!(l.samples_ms, [10.0, 20.0, 30.0]);
        let lat = l.latency.expect("samples");
        assert_eq!((lat.n, lat.mean, lat.max), (3, 20.0, 30.0));
        assert_eq!(l.throughput_mbit, PerDir::new(45.0, 30.0));
        assert_eq!(l.capacity_mbit, PerDir::new(Some(60.0), None));
        assert_eq!(row.share(), Some(0.75));
        assert!(l.one_way.is_none() && l.tracking.is_none());
        // Every sample in the warm-up: no latency, the rest still measured.
        let row = demo_row(probed_run(None), 1.0, 1.0).expect("has the probe");
        assert_eq!(row.loaded().latency, None);
        assert_eq!(row.share(), Some(45.0 / 50.0));
    }

    #[test]
    fn the_labs_idle_round_trip_is_the_median_of_its_runs_probe_bases() {
        let at = |base_ms: f64| {
            let mut r = probed_run(None);
            r.induced[0].induced.base_ms = base_ms;
            r
        };
        let runs = [at(10.0), at(12.0), at(11.0)];
        assert_eq!(idle_rtt_ms(&runs), Some(11.0));
        // A run without the probe, or without an idle sample (base 0), does not count.
        let mut none = probed_run(None);
        none.induced.clear();
        let runs = [at(10.0), none, at(0.0), at(12.0)];
        assert_eq!(idle_rtt_ms(&runs), Some(11.0));
        assert_eq!(idle_rtt_ms(&runs[1..3]), None);
    }

    const CAP: [f64; 9] = [10.0, 10.0, 4.0, 4.0, 4.0, 10.0, 10.0, 2.0, 2.0];

    #[test]
    fn tracking_counts_drops_reactions_and_bins_below_capacity() {
        // Drop at bin 2 (followed one bin later), drop at bin 7 (never followed).
        const RATE: [Option<f64>; 9] = [
            Some(9.0),
            Some(9.0),
            Some(8.0),
            Some(3.0),
            Some(3.0),
            Some(9.0),
            Some(9.0),
            Some(5.0),
            Some(5.0),
        ];
        let t = tracking_of(&CAP, 1.0, 0.0, rate_from(&RATE)).expect("rates exist");
        assert_eq!(t.drops, 2);
        assert_eq!(t.drops_followed, 1);
        assert_eq!(t.reaction_median_s, Some(1.0));
        assert_eq!(t.reaction_max_s, Some(1.0));
        // At or below: bins 0, 1, 3, 4, 5, 6 of 9.
        assert!((t.below_capacity - 6.0 / 9.0).abs() < 1e-12, "{t:?}");
        assert!((t.mean_rate_mbit - 60.0 / 9.0).abs() < 1e-12, "{t:?}");
    }

    #[test]
    fn tracking_starts_at_the_load_and_skips_bins_without_a_decision() {
        // The load starts at 2.5 s: bins 2.. (mid >= 2.5 is bin 2); bin 2 is not a drop
        // because the first bin of the load is not compared with the one before it.
        const RATE: [Option<f64>; 9] = [
            None,
            None,
            None,
            Some(4.0),
            Some(4.0),
            Some(4.0),
            Some(4.0),
            Some(4.0),
            Some(2.0),
        ];
        let t = tracking_of(&CAP, 1.0, 2.5, rate_from(&RATE)).expect("rates exist");
        assert_eq!(t.drops, 1, "{t:?}");
        assert_eq!(t.drops_followed, 1);
        assert_eq!(t.reaction_median_s, Some(1.0));
        assert!((t.mean_rate_mbit - 22.0 / 6.0).abs() < 1e-12, "{t:?}");
        assert!((t.below_capacity - 5.0 / 6.0).abs() < 1e-12, "{t:?}");
    }

    #[test]
    fn tracking_without_any_decision_or_after_the_series_is_none() {
        assert_eq!(tracking_of(&CAP, 1.0, 0.0, |_| None), None);
        assert_eq!(tracking_of(&CAP, 1.0, 100.0, |_| Some(1.0)), None);
    }

    /// A trace whose download decisions are `(t, Mbit/s, applied)`, read back as `reads`.
    fn trace(
        decisions: &[(f64, f64, bool)],
        reads: &[(f64, Option<f64>)],
        errors: usize,
    ) -> crate::control::ControlTrace {
        crate::control::ControlTrace {
            algorithm: "purple".into(),
            config: Default::default(),
            log: Default::default(),
            points: decisions
                .iter()
                .map(|&(t, r, applied)| crate::control::ControlPoint {
                    t,
                    down_mbit: r,
                    up_mbit: 1.0,
                    down_throughput_mbit: None,
                    down_delay_ms: None,
                    down_applied: applied,
                })
                .collect(),
            actuator_errors: 0,
            readback: crate::readback::ReadBacks {
                samples: reads
                    .iter()
                    .map(|&(t, down_mbit)| crate::readback::ReadBack { t, down_mbit })
                    .collect(),
                errors,
                first_error: (errors > 0).then(|| "netlink: no answer".into()),
            },
        }
    }

    #[test]
    fn a_read_back_agrees_with_an_applied_rate_in_force_within_the_lag() {
        // Applied 8 at 0 s, 6 at 2 s; 7 at 3 s decided but not applied (within the limits).
        let d = [(0.0, 8.0, true), (2.0, 6.0, true), (3.0, 7.0, false)];
        let c = trace(
            &d,
            &[
                (-0.5, Some(10.0)), // before any applied rate: not counted
                (0.5, Some(10.0)),  // the testbed's start rate, still in force: not counted
                (1.0, Some(8.0)),
                (2.5, Some(8.0)), // the old rate, 0.5 s after the change: within the lag
                (3.5, Some(6.0)), // the applied rate holds; 7 was never sent
                (4.0, Some(8.0)), // 2 s after 8 went out of force: a mismatch
                (5.0, None),      // unlimited: never a decision
            ],
            0,
        );
        let k = readback_check(&c).unwrap();
        assert_eq!((k.samples, k.agree, k.errors), (5, 3, 0));
        assert_eq!(k.unjudged, 2);
        assert_eq!(k.first_mismatch, Some((4.0, Some(8.0), 6.0)));
        // Readings only within the first second: none judged, and counted as such.
        let early = readback_check(&trace(&d, &[(0.2, Some(10.0)), (0.7, Some(8.0))], 0)).unwrap();
        assert_eq!((early.samples, early.unjudged, early.agree), (0, 2, 0));
        // An unlimited shaper is a mismatch too, and says so.
        let u = readback_check(&trace(&d, &[(1.0, None)], 0)).unwrap();
        assert_eq!(
            (u.samples, u.agree, u.first_mismatch),
            (1, 0, Some((1.0, None, 8.0)))
        );
        // Nothing read: no check; only failures: a check with its errors.
        assert_eq!(readback_check(&trace(&d, &[], 0)), None);
        let f = readback_check(&trace(&d, &[], 2)).unwrap();
        assert_eq!((f.samples, f.errors), (0, 2));
        assert_eq!(f.first_error.as_deref(), Some("netlink: no answer"));
    }

    #[test]
    fn reaction_median_is_the_upper_median() {
        // Drops at bins 1 and 3 (each 2 bins long), followed after 0 and 1 bins.
        let cap = [8.0, 4.0, 4.0, 8.0, 2.0, 2.0];
        let rate = [
            Some(8.0),
            Some(4.0),
            Some(4.0),
            Some(8.0),
            Some(3.0),
            Some(2.0),
        ];
        let t = tracking_of(&cap, 0.5, 0.0, |t| rate[(t / 0.5) as usize]).expect("rates");
        assert_eq!((t.drops, t.drops_followed), (2, 2));
        assert_eq!(t.reaction_median_s, Some(0.5));
        assert_eq!(t.reaction_max_s, Some(0.5));
        let cap = [8.0, 4.0, 4.0, 4.0, 8.0, 2.0];
        let rate = [
            Some(8.0),
            Some(6.0),
            Some(5.0),
            Some(4.0),
            Some(8.0),
            Some(2.0),
        ];
        let t = tracking_of(&cap, 0.5, 0.0, |t| rate[(t / 0.5) as usize]).expect("rates");
        // Reactions 1.0 s and 0 s: the upper median is 1.0.
        assert_eq!(t.reaction_median_s, Some(1.0));
        assert_eq!(t.reaction_max_s, Some(1.0));
    }

    #[test]
    fn loaded_latency_skips_the_warm_up_and_floors_at_zero() {
        let v = loaded_latency_ms(&[50.0, 60.0, 45.0, 70.5], 48.0, 1);
        assert_eq!(v, vec![12.0, 0.0, 22.5]);
        assert!(loaded_latency_ms(&[50.0], 48.0, 3).is_empty());
    }

    #[test]
    fn mean_capacity_is_over_the_steady_window_and_none_without_one() {
        assert_eq!(mean_capacity_mbit(&[100.0, 10.0, 20.0], 1), Some(15.0));
        assert_eq!(mean_capacity_mbit(&[100.0, 10.0], 2), None);
        assert_eq!(mean_capacity_mbit(&[], 0), None);
        assert_eq!(mean_capacity_mbit(&[1.0], 5), None);
    }

    #[test]
    fn warm_up_is_a_sixth_of_the_load_at_most_five_seconds() {
        assert_eq!(warm_up_s(12.0), 2.0);
        assert_eq!(warm_up_s(60.0), 5.0);
    }

    #[test]
    fn the_missing_probe_error_names_the_probe() {
        let e = AnalysisError::NoProbe {
            probe: LOADED_LATENCY_PROBE.label(),
            contender: "CAKE".into(),
        };
        assert!(e.to_string().contains("Ping (ms) UDP BE"), "{e}");
    }
}
