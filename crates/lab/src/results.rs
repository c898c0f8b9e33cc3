//! What a lab run measured ([`LabRun`], [`Induced`], [`ProbeLatency`]), and how the samples of
//! its flows become the simulator's [`sim::RunSummary`] (goodput, latency, series, induced
//! latency of the probes).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use controller::{Direction, PerDir};
use qdisc::quantile::nearest_rank;
use sim::{FlowSeries, FlowSummary, LatencyMs, LinkSummary, LoadedSummary, RunSummary};

use crate::scenario::{FlowKind, ProbeId, Scenario, Test};
use crate::traffic::Meter;
use crate::{control, Error, LabOpts, BIN, CLIENT, SERVER};

/// Induced latency of one probe flow: its loaded samples minus the idle median (ms).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Induced {
    /// Idle median RTT (the base).
    pub base_ms: f64,
    /// Mean induced.
    pub mean: f64,
    /// Median induced.
    pub p50: f64,
    /// 99th percentile induced.
    pub p99: f64,
    /// Peak induced.
    pub max: f64,
}

/// One probe's results in a run.
#[derive(Clone, Debug, PartialEq)]
pub struct ProbeLatency {
    /// Which probe.
    pub id: ProbeId,
    /// Its name in tables (its [`ProbeId::label`]).
    pub name: String,
    /// Its flow's index in the run's [`RunSummary::flows`].
    pub flow: usize,
    /// Its induced latency.
    pub induced: Induced,
}

/// One lab run: a contender in a test.
#[derive(Clone, Debug)]
pub struct LabRun {
    /// Contender name.
    pub contender: String,
    /// Test name.
    pub test: String,
    /// What it measured (`name` is `<scenario> <test> <contender>`). Its `loaded` part holds
    /// at least the loaded phase's goodput per direction ([`LabRun::goodput_mbit`]).
    pub summary: RunSummary,
    /// Induced latency per probe flow, in the test's order.
    pub induced: Vec<ProbeLatency>,
    /// What the delay stage was (for notes).
    pub delay_stage: String,
    /// Problems that did not stop the run (a tool's error).
    pub warnings: Vec<String>,
    /// The namespaces it used (all deleted by the time the run is returned).
    pub namespaces: Vec<String>,
    /// The link emulator's downlink capacity per 100 ms bin of the series (Mbit/s, at each
    /// bin's middle, aligned with the summary's series to within the emulator's start-up time,
    /// tens of ms); empty without `purple linkem`.
    pub capacity_down_mbit: Vec<f64>,
    /// What the `purple control` daemon did, for the controlled contenders.
    pub control: Option<control::ControlTrace>,
    /// How the host kept time during the run's traffic (`None`: the watcher did not run).
    pub host: Option<crate::host::HostLag>,
}

impl LabRun {
    /// Goodput in direction `d` over the loaded phase after its warm-up, Mbit/s: the sum over
    /// the test's TCP flows in that direction (`Down`: server to client), as the summary's
    /// `loaded` part holds it (0 where a run built elsewhere left that part out).
    pub fn goodput_mbit(&self, d: Direction) -> f64 {
        self.summary.loaded_or_empty().throughput_mbit[d]
    }

    /// The induced latency of probe `id` (`None`: the test has no such probe).
    pub fn induced(&self, id: ProbeId) -> Option<Induced> {
        self.induced.iter().find(|p| p.id == id).map(|p| p.induced)
    }

    /// The flow summary (samples and series) of probe `id`.
    pub fn probe_flow(&self, id: ProbeId) -> Option<&FlowSummary> {
        let p = self.induced.iter().find(|p| p.id == id)?;
        self.summary.flows.get(p.flow)
    }
}

/// The latency figures of `samples_ms`; `None` without samples (never zeros).
pub(crate) fn latency_ms(samples_ms: &[f64]) -> Option<LatencyMs> {
    let mut s = samples_ms.to_vec();
    s.sort_by(f64::total_cmp);
    if s.is_empty() {
        return None;
    }
    Some(LatencyMs {
        mean: s.iter().sum::<f64>() / s.len() as f64,
        p50: nearest_rank(&s, 0.5)?,
        p95: nearest_rank(&s, 0.95)?,
        p99: nearest_rank(&s, 0.99)?,
        max: s[s.len() - 1],
        min: s[0],
    })
}

/// The probes' induced latency, and the mean upload and download goodput over the steady
/// window (Mbit/s).
pub(crate) type Measured = Vec<ProbeLatency>;

/// Builds the summary of a run of `test` on `scn` from its flows' meters and the byte counts
/// read every [`BIN`] (`bins[i]` for flow `i`): goodput over the steady window (the loaded
/// phase after `min(seconds / 6, 5)` s), latency of the loaded samples, the series, the
/// links' utilisation, and each probe's induced latency (loaded samples minus its idle
/// median). Returns it with the probes' induced latency and the mean upload and download
/// goodput (Mbit/s). A flow with too few bins, or a probe with no idle or no loaded sample, is
/// an error naming it.
pub(crate) fn summarise(
    scn: &Scenario,
    test: &Test,
    opts: &LabOpts,
    meters: &[Arc<Meter>],
    bins: &[Vec<u64>],
) -> Result<(RunSummary, Measured), Error> {
    let total = opts.idle_seconds + opts.seconds;
    let load_at = Duration::from_secs_f64(opts.idle_seconds);
    let bin_s = BIN.as_secs_f64();
    let warm = crate::analysis::warm_up_s(opts.seconds);
    let from_bin = ((opts.idle_seconds + warm) / bin_s).round() as usize;
    let load_ns = load_at.as_nanos() as u64;
    let mut flows = Vec::new();
    let mut induced = Vec::new();
    let (mut up, mut down) = (0.0, 0.0);
    let nbins = bins.first().map_or(0, Vec::len);
    let mut up_series = vec![0.0; nbins];
    let mut down_series = vec![0.0; nbins];
    for (i, f) in test.flows.iter().enumerate() {
        let m = &meters[i];
        let b = &bins[i];
        let series_bps: Vec<f64> = (0..b.len())
            .map(|k| {
                let prev = if k == 0 { 0 } else { b[k - 1] };
                b[k].saturating_sub(prev) as f64 * 8.0 / bin_s
            })
            .collect();
        if b.len() <= from_bin + 1 {
            return Err(Error::NoGoodput {
                flow: f.name.clone(),
                bins: b.len(),
                bin_s,
                from_bin,
            });
        }
        let last = b.len() - 1;
        let goodput_bps = (b[last] - b[from_bin]) as f64 * 8.0 / ((last - from_bin) as f64 * bin_s);
        match f.kind {
            FlowKind::TcpUp => {
                up += goodput_bps;
                up_series
                    .iter_mut()
                    .zip(&series_bps)
                    .for_each(|(a, b)| *a += b);
            }
            FlowKind::TcpDown => {
                down += goodput_bps;
                down_series
                    .iter_mut()
                    .zip(&series_bps)
                    .for_each(|(a, b)| *a += b);
            }
            _ => {}
        }
        let samples: Vec<(u64, u64)> = m.samples.lock().map(|v| v.clone()).unwrap_or_default();
        let mut lat_bins: Vec<(f64, u32)> = vec![(0.0, 0); nbins];
        for &(at, l) in &samples {
            let k = (at as f64 / 1e9 / bin_s) as usize;
            if let Some(slot) = lat_bins.get_mut(k) {
                slot.0 += l as f64 / 1e6;
                slot.1 += 1;
            }
        }
        let loaded: Vec<f64> = samples
            .iter()
            .filter(|(at, _)| *at >= load_ns)
            .map(|(_, l)| *l as f64 / 1e6)
            .collect();
        if let Some(id) = f.probe_id() {
            let (sent, recv) = (
                m.sent.load(Ordering::Relaxed),
                m.received.load(Ordering::Relaxed),
            );
            let idle_n = samples.iter().filter(|(at, _)| *at < load_ns).count();
            if idle_n == 0 || loaded.is_empty() {
                return Err(Error::NoLatency {
                    probe: f.name.clone(),
                    phase: if idle_n == 0 { "idle" } else { "loaded" },
                    sent,
                    received: recv,
                });
            }
            let mut idle: Vec<f64> = samples
                .iter()
                .filter(|(at, _)| *at < load_ns)
                .map(|(_, l)| *l as f64 / 1e6)
                .collect();
            idle.sort_by(f64::total_cmp);
            // `idle` holds `idle_n` > 0 samples (checked above).
            let base = nearest_rank(&idle, 0.5).unwrap_or(0.0);
            let ind: Vec<f64> = loaded.iter().map(|l| (l - base).max(0.0)).collect();
            // `ind` has one entry per loaded sample, and there is at least one (checked above).
            let Some(s) = latency_ms(&ind) else {
                return Err(Error::NoLatency {
                    probe: f.name.clone(),
                    phase: "loaded",
                    sent,
                    received: recv,
                });
            };
            induced.push(ProbeLatency {
                id,
                name: f.name.clone(),
                // The flow's summary is pushed below, at this index.
                flow: flows.len(),
                induced: Induced {
                    base_ms: base,
                    mean: s.mean,
                    p50: s.p50,
                    p99: s.p99,
                    max: s.max,
                },
            });
        }
        let sent = m.sent.load(Ordering::Relaxed);
        let recv = m.received.load(Ordering::Relaxed);
        let loss = if sent > 0 && recv <= sent {
            1.0 - recv as f64 / sent as f64
        } else {
            0.0
        };
        let (src, dst) = match f.kind {
            FlowKind::TcpDown => (SERVER, CLIENT),
            _ => (CLIENT, SERVER),
        };
        flows.push(FlowSummary {
            name: f.name.clone(),
            src: src.into(),
            dst: dst.into(),
            dscp: f.dscp,
            goodput_bps,
            latency_ms: latency_ms(&loaded),
            loss,
            series: FlowSeries {
                goodput_bps: series_bps,
                latency_ms: lat_bins
                    .iter()
                    .map(|(s, n)| (*n > 0).then(|| s / f64::from(*n)))
                    .collect(),
            },
            latency_samples_ms: loaded,
        });
    }
    let links = vec![
        LinkSummary {
            name: "client->server (egress)".into(),
            utilisation: up / scn.up_bit_s() as f64,
            tx_bps: up_series,
        },
        LinkSummary {
            name: "server->client (ingress)".into(),
            utilisation: down / scn.down_bit_s() as f64,
            tx_bps: down_series,
        },
    ];
    let summary = RunSummary {
        name: String::new(),
        duration_s: total,
        bin_s,
        flows,
        links,
        qdiscs: Vec::new(),
        // Probes run from 0, the load from the end of the idle period.
        flent: Some(test.flent_labels(opts.idle_seconds)),
        // The loaded phase's goodput per direction (TCP flows, after the warm-up); the
        // demo's reduction fills in the rest (`analysis::demo_row`).
        loaded: Some(LoadedSummary {
            throughput_mbit: PerDir::new(down / 1e6, up / 1e6),
            ..LoadedSummary::EMPTY
        }),
    };
    Ok((summary, induced))
}
