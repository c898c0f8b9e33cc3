//! [`RunSummary`]: what one simulation run measured, per flow and per link, in a plain,
//! serialisable form shared by `purple sim`'s table, JSON, plots and Flent files and by the
//! experiment reports.

use crate::flent::{FlentError, FlentLabels};
use crate::loaded::LoadedSummary;
use crate::metrics::{summarize, FlowMetrics, LatencySummary};
use crate::sim::{AppId, LinkId, Sim};
use cake::AnyQdisc;
use qdisc::{Duration, Instant, Qdisc};
use serde::Serialize;
use serde_json::{json, Value};

/// Statistics of `q` as one element of `tc -j -s qdisc show`'s array, plus a `"link"` key with
/// `link`.
///
/// CAKE prints exactly what [`cake::tc::stats_json`] prints (options, tins and all). Other
/// qdiscs print the generic counters under tc's key names: `kind`, `bytes` and `packets`
/// (dequeued), `drops` (all reasons), `overlimits`, `requeues` (always 0), `backlog` (bytes),
/// `qlen` (packets), and `ecn_mark` (CE marks instead of drops). DualPI2 (also behind HTB) adds
/// its xstats under tc-dualpi2's JSON names (`prob`, `delay-c`, `delay-l` in µs, `pkts-in-c`,
/// `pkts-in-l`, `maxq`, `step-mark`, `credit`, `memory-used`, `max-memory-used`,
/// `memory-limit`), with the head delays measured at `now`.
pub fn qdisc_json(q: &AnyQdisc, link: &str, now: Instant) -> Value {
    let mut v = match q.as_cake() {
        Some(c) => {
            let cfg = c.config();
            let text =
                cake::tc::stats_json(cfg, &c.cake_stats(), cake::tc::QdiscHeader::for_config(cfg));
            // stats_json prints a one-element array; fall back to the generic counters if it
            // ever does not parse.
            match serde_json::from_str::<Value>(&text) {
                Ok(Value::Array(mut a)) if a.len() == 1 => a.swap_remove(0),
                _ => generic_qdisc_json(q),
            }
        }
        None => generic_qdisc_json(q),
    };
    if let Value::Object(m) = &mut v {
        m.insert("link".into(), json!(link));
        if let Some(d) = q.as_dualpi2() {
            let x = d.xstats(now);
            for (k, val) in [
                ("prob", json!(x.prob)),
                ("delay-c", json!(x.delay_c.as_micros())),
                ("delay-l", json!(x.delay_l.as_micros())),
                ("pkts-in-c", json!(x.packets_in_c)),
                ("pkts-in-l", json!(x.packets_in_l)),
                ("maxq", json!(x.maxq)),
                ("step-mark", json!(x.step_marks)),
                ("credit", json!(x.credit)),
                ("memory-used", json!(x.memory_used)),
                ("max-memory-used", json!(x.max_memory_used)),
                ("memory-limit", json!(x.memory_limit)),
            ] {
                m.insert(k.into(), val);
            }
        }
    }
    v
}

fn generic_qdisc_json(q: &AnyQdisc) -> Value {
    let s = q.stats();
    json!({
        "kind": q.kind(),
        "bytes": s.dequeued.bytes,
        "packets": s.dequeued.packets,
        "drops": s.dropped_total().packets,
        "overlimits": s.overlimits,
        "requeues": 0,
        "backlog": s.backlog.bytes,
        "qlen": s.backlog.packets,
        "ecn_mark": s.ecn_marks,
    })
}

/// Latency figures in milliseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct LatencyMs {
    /// Mean.
    pub mean: f64,
    /// Median.
    pub p50: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Maximum.
    pub max: f64,
    /// Minimum.
    pub min: f64,
}

impl LatencyMs {
    /// Every figure NaN: stands in for a latency that was not measured where a table needs a
    /// number (NaN prints as such and fails every comparison a claim makes).
    pub const MISSING: LatencyMs = LatencyMs {
        mean: f64::NAN,
        p50: f64::NAN,
        p95: f64::NAN,
        p99: f64::NAN,
        max: f64::NAN,
        min: f64::NAN,
    };

    /// The summary of `samples_ns`, or `None` when there are none.
    pub fn of_samples(samples_ns: &[u64]) -> Option<LatencyMs> {
        (!samples_ns.is_empty()).then(|| summarize(samples_ns).into())
    }
}

impl From<LatencySummary> for LatencyMs {
    fn from(s: LatencySummary) -> Self {
        let ms = |d: Duration| d.as_nanos() as f64 / 1e6;
        LatencyMs {
            mean: ms(s.mean),
            p50: ms(s.p50),
            p95: ms(s.p95),
            p99: ms(s.p99),
            max: ms(s.max),
            min: ms(s.min),
        }
    }
}

/// Time series of one flow, one value per bin of [`RunSummary::bin_s`].
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct FlowSeries {
    /// Delivered bits per second in each bin.
    pub goodput_bps: Vec<f64>,
    /// Mean latency (ms) of the packets delivered in each bin; `None` where none was.
    pub latency_ms: Vec<Option<f64>>,
}

/// One flow's results.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct FlowSummary {
    /// Name given by the scenario (or `kind@node:port`).
    pub name: String,
    /// Source address (empty if the flow never sent).
    pub src: String,
    /// Destination address (empty if the flow never sent).
    pub dst: String,
    /// DSCP of its packets.
    pub dscp: u8,
    /// Delivered bits per second over the measurement window.
    pub goodput_bps: f64,
    /// Latency over the whole run (one-way, or round trip for pings); `None` when no packet
    /// of the flow was delivered (no sample: never a latency of 0).
    pub latency_ms: Option<LatencyMs>,
    /// Fraction of sent packets not delivered.
    pub loss: f64,
    /// Time series (not serialised in `purple sim --json`; used by plots and Flent files).
    #[serde(skip)]
    pub series: FlowSeries,
    /// Every latency sample in ms (for CDFs; not serialised).
    #[serde(skip)]
    pub latency_samples_ms: Vec<f64>,
}

/// One link's results.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct LinkSummary {
    /// Name (`from->to` by default).
    pub name: String,
    /// Fraction of its capacity used.
    pub utilisation: f64,
    /// Bits per second put on the wire in each bin (not serialised).
    #[serde(skip)]
    pub tx_bps: Vec<f64>,
}

/// Everything one run measured.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RunSummary {
    /// Label of the run (scenario or contender name).
    pub name: String,
    /// Simulated seconds.
    pub duration_s: f64,
    /// Time-series bin width in seconds.
    pub bin_s: f64,
    /// Per-flow results.
    pub flows: Vec<FlowSummary>,
    /// Per-link results.
    pub links: Vec<LinkSummary>,
    /// Qdisc statistics as tc's JSON prints them (one object per link with a qdisc, with a
    /// `"link"` key naming it).
    pub qdiscs: Vec<serde_json::Value>,
    /// Which of Flent's tests the run is and which flow is which of its series, for Flent
    /// data files (not serialised; `None` until the run's maker labels it).
    #[serde(skip)]
    pub flent: Option<FlentLabels>,
    /// The loaded phase per direction, for backends that measure it (section C's closed loop,
    /// the lab's demo rows); `None` for the simulator's scenarios. Not in `purple sim --json`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loaded: Option<LoadedSummary>,
}

impl FlowSummary {
    /// Summarises `m`, with goodput measured over deliveries in `[from, to)`.
    pub fn from_metrics(
        name: &str,
        m: &FlowMetrics,
        bin: Duration,
        from: Instant,
        to: Instant,
    ) -> Self {
        let bin_s = bin.as_nanos() as f64 / 1e9;
        let (src, dst, dscp) = match m.endpoints {
            Some(e) => (e.src.to_string(), e.dst.to_string(), e.dscp),
            None => (String::new(), String::new(), 0),
        };
        FlowSummary {
            name: name.to_string(),
            src,
            dst,
            dscp,
            goodput_bps: m.goodput_bps(bin, from, to) * 8.0,
            latency_ms: LatencyMs::of_samples(&m.latencies_ns),
            loss: m.loss(),
            series: FlowSeries {
                goodput_bps: m
                    .bins
                    .iter()
                    .map(|b| b.bytes as f64 * 8.0 / bin_s)
                    .collect(),
                latency_ms: m
                    .bins
                    .iter()
                    .map(|b| {
                        (b.packets > 0).then(|| b.latency_sum_ns as f64 / b.packets as f64 / 1e6)
                    })
                    .collect(),
            },
            latency_samples_ms: m.latencies_ns.iter().map(|&n| n as f64 / 1e6).collect(),
        }
    }
}

impl RunSummary {
    /// Collects the named flows and links of `sim` after a run that ended at `sim.now()`;
    /// goodput is measured over `[from, sim.now())`. Unknown ids are skipped. `qdiscs` is
    /// filled for every named link that has a qdisc, in `links` order ([`qdisc_json`]).
    pub fn collect(
        sim: &Sim,
        name: &str,
        flows: &[(AppId, String)],
        links: &[(LinkId, String)],
        from: Instant,
    ) -> Self {
        let bin = sim.bin_width();
        let bin_s = bin.as_nanos() as f64 / 1e9;
        let to = sim.now();
        RunSummary {
            name: name.to_string(),
            duration_s: to.as_nanos() as f64 / 1e9,
            bin_s,
            flows: flows
                .iter()
                .filter_map(|(id, n)| {
                    Some(FlowSummary::from_metrics(n, sim.flow(*id)?, bin, from, to))
                })
                .collect(),
            links: links
                .iter()
                .filter_map(|(id, n)| {
                    let m = sim.link(*id)?;
                    Some(LinkSummary {
                        name: n.clone(),
                        utilisation: sim.link_utilisation(*id),
                        tx_bps: m
                            .bins
                            .iter()
                            .map(|b| b.tx_bytes as f64 * 8.0 / bin_s)
                            .collect(),
                    })
                })
                .collect(),
            qdiscs: links
                .iter()
                .filter_map(|(id, n)| Some(qdisc_json(sim.qdisc(*id)?, n, to)))
                .collect(),
            flent: None,
            loaded: None,
        }
    }

    /// The same run labelled as `labels` (see [`crate::flent`]).
    pub fn with_flent(mut self, labels: FlentLabels) -> Self {
        self.flent = Some(labels);
        self
    }

    /// The run's Flent labels, checked against its flows ([`FlentLabels::check`]); an error
    /// when it has none or they do not fit.
    pub fn flent_labels(&self) -> Result<&FlentLabels, FlentError> {
        let l = self.flent.as_ref().ok_or_else(|| FlentError::Unlabelled {
            run: self.name.clone(),
        })?;
        l.check(self)?;
        Ok(l)
    }

    /// The loaded phase ([`RunSummary::loaded`]), or [`LoadedSummary::EMPTY`] (nothing
    /// measured) for a run without one. For results whose maker always fills it (section C's
    /// closed loop, the lab demo's rows), so their readers need no `Option`.
    pub fn loaded_or_empty(&self) -> &LoadedSummary {
        static EMPTY: LoadedSummary = LoadedSummary::EMPTY;
        self.loaded.as_ref().unwrap_or(&EMPTY)
    }

    /// The flow named `name`.
    pub fn flow(&self, name: &str) -> Option<&FlowSummary> {
        self.flows.iter().find(|f| f.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{LinkConfig, UdpSource};

    #[test]
    fn collect_reports_each_qdisc_once_in_link_order_with_tc_keys_and_the_link_name() {
        let a_ip = "10.0.0.1".parse().expect("ip");
        let b_ip = "10.0.0.2".parse().expect("ip");
        let mut s = Sim::new(1);
        let a = s.add_node(&[a_ip]);
        let b = s.add_node(&[b_ip]);
        let d = Duration::from_millis(5);
        let fwd = s.add_link(
            a,
            b,
            LinkConfig::fixed(1_250_000, d)
                .buffer(Some(2), None)
                .qdisc(AnyQdisc::pfifo(20)),
        );
        let plain = s.add_link(b, a, LinkConfig::fixed(1_250_000, d));
        let cake = s.add_link(
            a,
            b,
            LinkConfig::fixed(1_250_000, d).qdisc(AnyQdisc::cake_default(1)),
        );
        s.compute_routes();
        let app = s.add_app(
            a,
            9,
            Instant::ZERO,
            Box::new(UdpSource::greedy(a_ip, b_ip, 9, 2_500_000)),
        );
        s.run_until(Instant::from_secs(1));
        let r = RunSummary::collect(
            &s,
            "t",
            &[(app, "flood".into())],
            &[
                (fwd, "fwd".into()),
                (plain, "plain".into()),
                (cake, "cake".into()),
            ],
            Instant::ZERO,
        );
        assert_eq!(r.links.len(), 3);
        assert_eq!(r.qdiscs.len(), 2, "the plain link has no qdisc");
        let q = &r.qdiscs[0];
        assert_eq!(q["link"], "fwd");
        assert_eq!(q["kind"], "pfifo");
        // 2x overload into a 20-packet FIFO: tail drops.
        assert!(q["drops"].as_u64().unwrap_or(0) > 100, "{q}");
        assert!(q["packets"].as_u64().unwrap_or(0) > 500, "{q}");
        for k in ["bytes", "overlimits", "requeues", "backlog", "qlen"] {
            assert!(q[k].is_u64(), "{k} missing: {q}");
        }
        assert_eq!(r.qdiscs[1]["link"], "cake");
        assert_eq!(r.qdiscs[1]["kind"], "cake");
        assert!(r.qdiscs[1]["tins"].is_array(), "{}", r.qdiscs[1]);
    }
}
