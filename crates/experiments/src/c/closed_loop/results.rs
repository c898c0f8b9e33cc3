//! What a closed loop measured: its time series ([`Point`]), loaded-latency statistics and the
//! run's result ([`LoopResult`]), and the [`Recorder`] that collects them step by step.

use super::super::probe::Prober;
use super::topology::ProbeState;
use super::STEP;
use controller::agent::DirStep;
use controller::{Direction, PerDir};
use qdisc::Instant;
use serde::Serialize;
use sim::{LoadedSummary, OneWayDelay, RunSummary, Sim};

/// One step of the time series.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Point {
    /// Seconds.
    pub t: f64,
    /// True capacity, Mbit/s.
    pub cap: PerDir<f64>,
    /// CAKE's rate, Mbit/s (NaN when unshaped).
    pub rate: PerDir<f64>,
    /// Delivered by the radio during the step, Mbit/s.
    pub thr: PerDir<f64>,
    /// Highest probe RTT answered during the step, ms (NaN if none).
    pub rtt_ms: f64,
}

pub use sim::tally::LatencyStats;

/// A run whose latency probe measured nothing after the warm-up (a run shorter than its
/// warm-up, or a probe path that lost everything): its latency is unknown, not 0.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NoSamples {
    /// The contender.
    pub contender: String,
    /// Which measurement: `round-trip`, `one-way down` or `one-way up`.
    pub probe: &'static str,
}

impl std::fmt::Display for NoSamples {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: the {} latency probe has no sample after the warm-up",
            self.contender, self.probe
        )
    }
}

impl std::error::Error for NoSamples {}

/// What a run measured: the summary every backend reports in ([`RunSummary`]), whose loaded
/// phase ([`RunSummary::loaded`], always filled here) holds the loaded latency, the throughput
/// and mean true capacity per direction and the one-way queueing delays, plus what only the
/// closed loop has: its time series and the controller's decisions.
///
/// Made only by [`run`](super::run), which fails rather than return a run whose latency probe
/// measured nothing ([`NoSamples`]); the accessors read the loaded phase without an `Option`.
#[derive(Clone, Debug, Serialize)]
pub struct LoopResult {
    /// The run in the backends' summary: `name` (the contender), `duration_s`, `bin_s` (one
    /// [`STEP`]), `links` and `qdiscs` as the simulator collects them (the radio down and up,
    /// then the links after it carrying a CAKE, if any), `loaded`. The closed loop collects
    /// no per-flow figures: `flows` is empty.
    summary: RunSummary,
    /// The time series, one point per [`STEP`].
    pub series: Vec<Point>,
    /// Every control step's decision, `(seconds, download, upload)`, when the run was asked
    /// for them ([`LoopSpec::record_decisions`](super::LoopSpec::record_decisions)); empty
    /// otherwise and for contenders that run no law. Not serialised.
    #[serde(skip_serializing)]
    pub decisions: Vec<(f64, DirStep, DirStep)>,
}

impl LoopResult {
    /// The run as the backends' summary.
    pub fn summary(&self) -> &RunSummary {
        &self.summary
    }

    /// The run as the backends' summary, without the series and decisions.
    pub fn into_summary(self) -> RunSummary {
        self.summary
    }

    /// The contender's name.
    pub fn name(&self) -> &str {
        &self.summary.name
    }

    /// The loaded phase after the warm-up.
    pub fn loaded(&self) -> &LoadedSummary {
        self.summary.loaded_or_empty()
    }

    /// Loaded latency after the warm-up (probe RTT minus the idle RTT), ms.
    pub fn latency(&self) -> &LatencyStats {
        self.loaded()
            .latency
            .as_ref()
            .unwrap_or(&LatencyStats::MISSING)
    }

    /// Every loaded-latency sample after the warm-up, ms (for the CDF).
    pub fn samples(&self) -> &[f64] {
        &self.loaded().samples_ms
    }

    /// Mean delivered rate per direction after the warm-up, Mbit/s.
    pub fn throughput(&self) -> PerDir<f64> {
        self.loaded().throughput_mbit
    }

    /// Mean true capacity per direction after the warm-up, Mbit/s.
    pub fn capacity(&self) -> PerDir<f64> {
        let c = self.loaded().capacity_mbit;
        PerDir::new(c.down.unwrap_or(f64::NAN), c.up.unwrap_or(f64::NAN))
    }

    /// Download throughput as a share of the mean download capacity (0 without capacity).
    pub fn share(&self) -> f64 {
        self.loaded().share(Direction::Down).unwrap_or(0.0)
    }

    /// One-way queueing delay in direction `d` after the warm-up (each answered probe's true
    /// one-way delay, which the simulator knows, minus the idle one, floored at 0), ms.
    pub fn one_way(&self, d: Direction) -> &OneWayDelay {
        static NONE: OneWayDelay = OneWayDelay {
            base_ms: f64::NAN,
            latency: LatencyStats::MISSING,
            samples_ms: Vec::new(),
        };
        self.loaded().one_way.as_ref().map_or(&NONE, |o| &o[d])
    }

    /// Idle round-trip time of a probe, ms (the two idle one-way delays added).
    pub fn base_rtt_ms(&self) -> f64 {
        self.one_way(Direction::Down).base_ms + self.one_way(Direction::Up).base_ms
    }
}

/// Collects a run's measurements step by step: the loaded-latency and one-way samples of the
/// measurement probes and the radio's delivered bytes after the warm-up, and the time series.
pub(super) struct Recorder {
    /// Measurements count from here on.
    pub(super) warm: Instant,
    /// The run ends here.
    pub(super) end: Instant,
    base_owd_ms: PerDir<f64>,
    base_rtt_ms: f64,
    /// The radio links' sent bytes at the end of the last step.
    last_tx: PerDir<u64>,
    /// Bytes the radio delivered after the warm-up.
    delivered: PerDir<u64>,
    samples: Vec<f64>,
    owd_samples: PerDir<Vec<f64>>,
    series: Vec<Point>,
}

impl Recorder {
    /// A recorder for a run from 0 to `secs` seconds (at least 0.1) measured after `warmup`
    /// seconds, whose probes see the idle one-way delays `base_owd_ms`.
    pub(super) fn new(secs: f64, warmup: f64, base_owd_ms: PerDir<f64>) -> Recorder {
        Recorder {
            warm: Instant::from_nanos((warmup.max(0.0) * 1e9) as u64),
            end: Instant::from_nanos((secs.max(0.1) * 1e9) as u64),
            base_rtt_ms: base_owd_ms.down + base_owd_ms.up,
            base_owd_ms,
            last_tx: PerDir::new(0u64, 0u64),
            delivered: PerDir::new(0u64, 0u64),
            samples: Vec::new(),
            owd_samples: PerDir::new(Vec::new(), Vec::new()),
            series: Vec::new(),
        }
    }

    /// Reads the probes' new results (samples from those received after the warm-up); returns
    /// the highest RTT among them, ms (NaN if none).
    pub(super) fn read_probes(&mut self, sim: &Sim, probes: &mut [ProbeState]) -> f64 {
        let mut max_rtt = f64::NAN;
        for p in probes.iter_mut() {
            let Some(pr) = sim.app_as::<Prober>(p.app) else {
                continue;
            };
            for r in &pr.results[p.seen..] {
                let rtt = r.received.saturating_duration_since(r.sent).as_millis_f64();
                if r.received >= self.warm {
                    self.samples.push((rtt - self.base_rtt_ms).max(0.0));
                    let ms =
                        |a: Instant, b: Instant| b.saturating_duration_since(a).as_millis_f64();
                    self.owd_samples
                        .up
                        .push((ms(r.sent, r.reflected) - self.base_owd_ms.up).max(0.0));
                    self.owd_samples
                        .down
                        .push((ms(r.reflected, r.received) - self.base_owd_ms.down).max(0.0));
                }
                max_rtt = if max_rtt.is_nan() {
                    rtt
                } else {
                    max_rtt.max(rtt)
                };
            }
            p.seen = pr.results.len();
        }
        max_rtt
    }

    /// Counts the bytes `radio` delivered in the step ending at `t` (towards the result after
    /// the warm-up); returns the step's delivered rate, Mbit/s.
    pub(super) fn delivered(
        &mut self,
        sim: &Sim,
        radio: PerDir<sim::LinkId>,
        t: Instant,
    ) -> PerDir<f64> {
        let mut thr = PerDir::default();
        for d in Direction::ALL {
            let tx = sim.link(radio[d]).map_or(0, |m| m.tx_bytes);
            let bytes = tx - self.last_tx[d].min(tx);
            self.last_tx[d] = tx;
            if t > self.warm {
                self.delivered[d] += bytes;
            }
            thr[d] = (bytes as f64 / STEP.as_secs_f64()) as u64 as f64 * 8e-6;
        }
        thr
    }

    /// Adds a step to the time series.
    pub(super) fn push(&mut self, p: Point) {
        self.series.push(p);
    }

    /// The result of contender `name` on a link whose mean capacity after the warm-up was
    /// `capacity` (bytes/s), once `sim` has run to the end; the summary reports `flows` (the
    /// bulk TCP and the probes, goodput from the warm-up on; their per-packet latency samples
    /// are not kept) and `links` as the
    /// simulator's summaries do ([`RunSummary::collect`]: utilisation over the whole run,
    /// each [`STEP`]'s sent bits per second, the tc statistics of the links with a qdisc).
    /// [`NoSamples`] when a latency probe (round trip or one way) measured nothing after the
    /// warm-up.
    pub(super) fn finish(
        self,
        name: String,
        capacity: PerDir<f64>,
        sim: &Sim,
        flows: &[(sim::AppId, String)],
        links: &[(sim::LinkId, String)],
    ) -> Result<LoopResult, NoSamples> {
        let (warm, end) = (self.warm, self.end);
        let span = (end.as_secs_f64() - warm.as_secs_f64()).max(1e-3);
        let delivered = self.delivered;
        let owd_samples = self.owd_samples;
        let stats = |v: &[f64], probe: &'static str| {
            LatencyStats::of(v).ok_or_else(|| NoSamples {
                contender: name.clone(),
                probe,
            })
        };
        let latency = stats(&self.samples, "round-trip")?;
        let owd_down = stats(&owd_samples.down, "one-way down")?;
        let owd_up = stats(&owd_samples.up, "one-way up")?;
        let throughput = PerDir::new(
            delivered.down as f64 * 8e-6 / span,
            delivered.up as f64 * 8e-6 / span,
        );
        let capacity = PerDir::new(capacity.down * 8e-6, capacity.up * 8e-6);
        let base_owd_ms = self.base_owd_ms;
        let one_way = |d: Direction, latency: LatencyStats, samples_ms: Vec<f64>| OneWayDelay {
            base_ms: base_owd_ms[d],
            latency,
            samples_ms,
        };
        let loaded = LoadedSummary {
            latency: Some(latency),
            samples_ms: self.samples,
            throughput_mbit: throughput,
            capacity_mbit: PerDir::new(Some(capacity.down), Some(capacity.up)),
            one_way: Some(PerDir::new(
                one_way(Direction::Down, owd_down, owd_samples.down),
                one_way(Direction::Up, owd_up, owd_samples.up),
            )),
            tracking: None,
        };
        let mut summary = RunSummary::collect(sim, &name, flows, links, warm);
        // A flow's every latency sample stays in the simulator: a matrix holds thousands of
        // results, and the loaded phase's own samples are what its figures are made of.
        for f in &mut summary.flows {
            f.latency_samples_ms = Vec::new();
        }
        summary.loaded = Some(loaded);
        Ok(LoopResult {
            summary,
            series: self.series,
            decisions: Vec::new(),
        })
    }
}
