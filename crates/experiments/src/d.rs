//! Section D: L4S. DualPI2 (RFC 9332, Linux 6.17's `sch_dualpi2` defaults) against CAKE and
//! FQ-CoDel, each at the egress of one bottleneck shared by classic (CUBIC) and scalable
//! (Prague, ECT(1), accurate ECN) TCP flows.
//!
//! - `D1`: 2 classic + 2 L4S downloads, 40 Mbit/s, 20 ms base RTT, 30 s: throughput per flow
//!   and per class, the queueing delay of each class's data packets, and a latency probe per
//!   class (an ICMP echo marked ECT(1) and one Not-ECT).
//!
//! [`run_mix`] runs one contender on the mix; the tests in `tests/section_d.rs` use it for
//! DualPI2's behaviour under TCP (classic alone, L4S alone, one of each).

use crate::testbed::{Dumbbell, DumbbellSpec, Host, TcpOpts};
use crate::{jain, Claim, Experiment, Report, RunOpts, Table};
use cake::{AnyQdisc, QdiscSpecError};
use qdisc::{quantile, Duration, Instant, Qdisc};
use sim::flent::{self, Role};
use sim::{AppId, Ping, RunSummary};
use tcpmodel::{CcKind, Pacing};

/// The bottleneck's rate, bits per second.
pub const RATE_BIT_S: u64 = 40_000_000;
/// One-way propagation delay of the bottleneck (base RTT twice this).
pub const ONE_WAY: Duration = Duration::from_millis(10);
/// Probe interval.
const PROBE: Duration = Duration::from_millis(100);
/// Bytes of a full data frame (MSS 1448 with timestamps, Ethernet included).
const DATA_FRAME: u64 = qdisc::FULL_FRAME as u64;
/// Edge links of the testbed (its hosts' access links).
const EDGE_BPS: u64 = 1_000_000_000 / 8;
const EDGE_DELAY: Duration = Duration::from_micros(100);

/// The section's experiments.
pub(crate) fn experiments() -> Vec<Experiment> {
    vec![Experiment {
        id: "D1",
        title: "L4S: DualPI2 vs CAKE vs FQ-CoDel, 2 CUBIC + 2 Prague flows, 40 Mbit/s, 20 ms",
        run: d1,
    }]
}

/// The contenders of D1: name and tc string of the qdisc at the bottleneck's egress.
pub const CONTENDERS: [(&str, &str); 3] = [
    ("CAKE", "cake bandwidth 40mbit"),
    ("FQ-CoDel", "fq_codel"),
    ("DualPI2", "dualpi2"),
];

/// One run of [`run_mix`].
#[derive(Clone, Debug, PartialEq)]
pub struct MixSpec {
    /// The bottleneck qdisc in tc syntax.
    pub qdisc: String,
    /// Classic flows: CUBIC, Not-ECT (loss-based, as most of the Internet).
    pub classic: usize,
    /// Scalable flows: Prague with ECN (ECT(1), accurate ECN feedback).
    pub l4s: usize,
    /// Simulated seconds.
    pub seconds: f64,
    /// Seconds skipped before measuring (slow start).
    pub warmup: f64,
    /// Seed of every random decision.
    pub seed: u64,
}

impl MixSpec {
    /// `classic` + `l4s` flows through `qdisc` for `seconds`, measured after a sixth of it.
    pub fn new(qdisc: &str, classic: usize, l4s: usize, seconds: f64, seed: u64) -> Self {
        MixSpec {
            qdisc: qdisc.to_string(),
            classic,
            l4s,
            seconds,
            warmup: seconds / 6.0,
            seed,
        }
    }
}

/// What one class of flows got.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClassFigures {
    /// Wire throughput of each flow over the measured span, Mbit/s.
    pub mbit: Vec<f64>,
    /// Queueing delay of the class's data packets (one-way delay minus the path's base), ms:
    /// mean, median and 99th percentile over the measured span.
    pub delay_mean: f64,
    /// See `delay_mean`.
    pub delay_p50: f64,
    /// See `delay_mean`.
    pub delay_p99: f64,
    /// The class's probe (ECT(1) for L4S, Not-ECT for classic): mean and 99th percentile of
    /// its round trip minus the base RTT, ms.
    pub probe_mean: f64,
    /// See `probe_mean`.
    pub probe_p99: f64,
}

impl ClassFigures {
    /// The class's total throughput, Mbit/s.
    pub fn total(&self) -> f64 {
        self.mbit.iter().sum()
    }
    /// The mean per-flow throughput, Mbit/s (0 for an empty class).
    pub fn per_flow(&self) -> f64 {
        if self.mbit.is_empty() {
            0.0
        } else {
            self.total() / self.mbit.len() as f64
        }
    }
}

/// What [`run_mix`] measured.
#[derive(Clone, Debug)]
pub struct MixResult {
    /// The classic flows.
    pub classic: ClassFigures,
    /// The L4S flows.
    pub l4s: ClassFigures,
    /// Bottleneck utilisation over the whole run.
    pub utilisation: f64,
    /// AQM and overflow drops at the bottleneck.
    pub drops: u64,
    /// CE marks at the bottleneck.
    pub marks: u64,
    /// The run, for plots and Flent files.
    pub run: RunSummary,
}

/// Why a mix could not be run or measured.
#[derive(Clone, Debug, PartialEq)]
pub enum MixError {
    /// The qdisc string does not parse.
    Qdisc(QdiscSpecError),
    /// A class or probe delivered nothing in the measured span (named).
    NoSamples(String),
}

impl std::fmt::Display for MixError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MixError::Qdisc(e) => write!(f, "qdisc: {e}"),
            MixError::NoSamples(what) => write!(f, "{what}: no samples in the measured span"),
        }
    }
}
impl std::error::Error for MixError {}

/// Serialisation time of `len` bytes at `bps` bytes per second, in ns (as the simulator rounds).
fn ser_ns(len: u64, bps: u64) -> u64 {
    (len * 1_000_000_000).div_ceil(bps)
}

/// Mean, median and 99th percentile (nearest rank) of `v`, or `None` when empty.
fn stats(v: &mut [f64]) -> Option<(f64, f64, f64)> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some((
        v.iter().sum::<f64>() / n as f64,
        quantile::nearest_rank(v, 0.5)?,
        quantile::nearest_rank(v, 0.99)?,
    ))
}

/// Runs `spec`: one client host (the receiver of every flow and the probes' origin) behind the
/// 40 Mbit/s bottleneck, one server per flow. The qdisc sits at the bottleneck's egress towards
/// the client, with a one-packet transmit buffer behind it (the qdisc holds the queue); the
/// reverse direction (ACKs, probe requests) runs at the same rate without a qdisc.
pub fn run_mix(spec: &MixSpec) -> Result<MixResult, MixError> {
    let q = AnyQdisc::from_tc(&spec.qdisc, spec.seed).map_err(MixError::Qdisc)?;
    let mut d = DumbbellSpec::new(RATE_BIT_S, RATE_BIT_S, ONE_WAY);
    d.servers = (spec.classic + spec.l4s).max(1);
    d.buffer_packets = 1;
    d.down_qdisc = Some(q);
    let mut net = Dumbbell::new(d, spec.seed);
    let client = net.clients[0];
    let servers: Vec<Host> = net.servers.clone();
    let end = Instant::ZERO.saturating_add(Duration::from_secs_f64(spec.seconds));
    let warm = Instant::ZERO.saturating_add(Duration::from_secs_f64(spec.warmup));

    let mut named: Vec<(AppId, String)> = Vec::new();
    let mut roles = Vec::new();
    let mut flows = Vec::new();
    for (i, &server) in servers.iter().enumerate().take(spec.classic + spec.l4s) {
        let l4s = i >= spec.classic;
        let o = TcpOpts {
            cc: if l4s { CcKind::Prague } else { CcKind::Cubic },
            ecn: l4s,
            pacing: Some(Pacing::default()),
            ..TcpOpts::default()
        };
        let f = net.tcp(server, client, 5001 + i as u16, Instant::ZERO, o);
        let name = if l4s {
            format!("prague {}", i - spec.classic + 1)
        } else {
            format!("cubic {}", i + 1)
        };
        named.push((f.tx, name));
        roles.push(Role::TcpDownload);
        flows.push((f.tx, l4s));
    }
    let mut probes = Vec::new();
    for (l4s, id, name) in [
        (true, 7001u16, "ping ECT(1)"),
        (false, 7002, "ping Not-ECT"),
    ] {
        let p = Ping::new(client.addr, servers[0].addr, id, PROBE)
            .with_tos(u8::from(l4s))
            .until(end);
        let a = net.sim.add_app(client.node, id, Instant::ZERO, Box::new(p));
        named.push((a, name.to_string()));
        roles.push(if l4s { Role::IcmpPing } else { Role::Other });
        probes.push((a, l4s, name));
    }
    net.sim.run_until(end);

    let bin = net.sim.bin_width();
    // Data frames: edge, bottleneck and edge serialisation plus propagation.
    let base_owd = ser_ns(DATA_FRAME, EDGE_BPS) * 2
        + ser_ns(DATA_FRAME, RATE_BIT_S / 8)
        + 2 * EDGE_DELAY.as_nanos()
        + ONE_WAY.as_nanos();
    let warm_bin = (warm.as_nanos() / bin.as_nanos().max(1)) as usize;
    let mut class = [ClassFigures::default(), ClassFigures::default()];
    let mut delays: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    for &(app, l4s) in &flows {
        let Some(m) = net.sim.flow(app) else {
            continue;
        };
        let k = usize::from(l4s);
        class[k]
            .mbit
            .push(m.goodput_bps(bin, warm, end) * 8.0 / 1e6);
        // Samples are in delivery order; skip those delivered before the warm-up ended.
        let skip: u64 = m.bins.iter().take(warm_bin).map(|b| b.packets).sum();
        delays[k].extend(
            m.latencies_ns
                .iter()
                .skip(skip as usize)
                .map(|&ns| ns.saturating_sub(base_owd) as f64 / 1e6),
        );
    }
    for (k, name) in [(0, "classic"), (1, "L4S")] {
        let has_flows = if k == 0 { spec.classic } else { spec.l4s } > 0;
        if !has_flows {
            continue;
        }
        let (mean, p50, p99) = stats(&mut delays[k])
            .ok_or_else(|| MixError::NoSamples(format!("{name} data packets")))?;
        class[k].delay_mean = mean;
        class[k].delay_p50 = p50;
        class[k].delay_p99 = p99;
    }
    for (app, l4s, name) in probes {
        let mut s: Vec<f64> = net
            .sim
            .app_as::<Ping>(app)
            .map(|p| {
                let skip = (spec.warmup / PROBE.as_secs_f64()) as usize;
                p.rtts
                    .iter()
                    .skip(skip)
                    .map(|r| r.as_nanos().saturating_sub(net.base_rtt.as_nanos()) as f64 / 1e6)
                    .collect()
            })
            .unwrap_or_default();
        let (mean, _, p99) = stats(&mut s).ok_or_else(|| MixError::NoSamples(name.to_string()))?;
        let c = &mut class[usize::from(l4s)];
        c.probe_mean = mean;
        c.probe_p99 = p99;
    }
    let st = net
        .sim
        .qdisc(net.down)
        .map(|q| q.stats())
        .unwrap_or_default();
    let labels: Vec<(&str, Role)> = named
        .iter()
        .zip(&roles)
        .map(|((_, n), r)| (n.as_str(), *r))
        .collect();
    let run = RunSummary::collect(
        &net.sim,
        &format!("{}c+{}l {}", spec.classic, spec.l4s, spec.qdisc),
        &named,
        &[(net.down, "down".into()), (net.up, "up".into())],
        warm,
    )
    .with_flent(flent::nearest(&labels));
    let [classic, l4s] = class;
    Ok(MixResult {
        classic,
        l4s,
        utilisation: net.sim.link_utilisation(net.down),
        drops: st.dropped_total().packets,
        marks: st.ecn_marks,
        run,
    })
}

/// D1's table cell: "mean / p99".
fn mp(mean: f64, p99: f64) -> String {
    format!("{mean:.1} / {p99:.1}")
}

fn d1(opts: &RunOpts) -> Report {
    let seconds = (30.0 * opts.time_scale).max(10.0);
    let mut table = Table::new(&[
        "qdisc",
        "CUBIC Mbit/s (each)",
        "Prague Mbit/s (each)",
        "L4S share",
        "Jain (4 flows)",
        "classic delay ms mean / p99",
        "L4S delay ms mean / p99",
        "probe Not-ECT ms mean / p99",
        "probe ECT(1) ms mean / p99",
        "util",
        "drops",
        "CE marks",
    ]);
    let mut results = Vec::new();
    let mut notes = Vec::new();
    let mut runs = Vec::new();
    for (name, tc) in CONTENDERS {
        match run_mix(&MixSpec::new(tc, 2, 2, seconds, opts.seed)) {
            Ok(r) => {
                let all: Vec<f64> = r.classic.mbit.iter().chain(&r.l4s.mbit).copied().collect();
                let each = |v: &[f64]| {
                    v.iter()
                        .map(|x| format!("{x:.1}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                table.row(vec![
                    format!("{name} ({tc})"),
                    each(&r.classic.mbit),
                    each(&r.l4s.mbit),
                    format!("{:.2}", r.l4s.total() / (r.l4s.total() + r.classic.total())),
                    format!("{:.3}", jain(&all)),
                    mp(r.classic.delay_mean, r.classic.delay_p99),
                    mp(r.l4s.delay_mean, r.l4s.delay_p99),
                    mp(r.classic.probe_mean, r.classic.probe_p99),
                    mp(r.l4s.probe_mean, r.l4s.probe_p99),
                    format!("{:.3}", r.utilisation),
                    r.drops.to_string(),
                    r.marks.to_string(),
                ]);
                let mut run = r.run.clone();
                run.name = format!("D1 {name}");
                runs.push(run);
                results.push((name, r));
            }
            Err(e) => notes.push(format!("{name} ({tc}) could not run: {e}")),
        }
    }
    let get = |n: &str| results.iter().find(|(x, _)| *x == n).map(|(_, r)| r);
    let mut claims = Vec::new();
    if let Some(r) = get("DualPI2") {
        claims.push(Claim::new(
            "DualPI2: the L4S queue stays near its 1 ms step threshold",
            format!(
                "L4S data queueing delay mean {:.2} ms, p99 {:.2} ms",
                r.l4s.delay_mean, r.l4s.delay_p99
            ),
            "mean <= 2 ms and p99 <= 5 ms",
            r.l4s.delay_mean <= 2.0 && r.l4s.delay_p99 <= 5.0,
        ));
        claims.push(Claim::new(
            "DualPI2: the classic queue sits near PI2's 15 ms target",
            format!(
                "classic data queueing delay mean {:.1} ms (p50 {:.1}, p99 {:.1})",
                r.classic.delay_mean, r.classic.delay_p50, r.classic.delay_p99
            ),
            "mean within 15 ms +- 50% (7.5..22.5 ms)",
            (7.5..=22.5).contains(&r.classic.delay_mean),
        ));
        let ratio = r.l4s.per_flow() / r.classic.per_flow().max(1e-9);
        claims.push(Claim::new(
            "DualPI2 (RFC 9332): the coupled AQMs pool the capacity with roughly equivalent \
             throughput per flow, Scalable or Classic",
            format!(
                "per-flow Prague {:.1} vs CUBIC {:.1} Mbit/s: ratio {ratio:.2}",
                r.l4s.per_flow(),
                r.classic.per_flow()
            ),
            "ratio within a factor of 2 of 1 (0.5..2)",
            (0.5..=2.0).contains(&ratio),
        ));
        // Windows = rate x RTT, the RTT being the base plus the class's own queue.
        let base = 2.0 * ONE_WAY.as_millis_f64();
        let window = ratio * (base + r.l4s.delay_mean) / (base + r.classic.delay_mean);
        claims.push(Claim::new(
            "DualPI2 (RFC 9332): k = 2 makes a scalable flow's window (2 / p_CL = 1 / p') about \
             a Reno-friendly flow's (1.22 / sqrt(p_C) = 1.22 / p') at the same base RTT",
            format!("Prague / CUBIC window (rate x (20 ms + own queue delay)) ratio {window:.2}"),
            "within 0.67..1.5",
            (0.67..=1.5).contains(&window),
        ));
        claims.push(Claim::new(
            "DualPI2: a probe marked ECT(1) shares the L-queue's low delay; a Not-ECT probe \
             waits in the classic queue",
            format!(
                "ECT(1) probe {:.2} ms, Not-ECT probe {:.1} ms (mean)",
                r.l4s.probe_mean, r.classic.probe_mean
            ),
            "ECT(1) mean <= 2 ms and Not-ECT mean >= 3x it and >= 5 ms",
            r.l4s.probe_mean <= 2.0
                && r.classic.probe_mean >= 3.0 * r.l4s.probe_mean
                && r.classic.probe_mean >= 5.0,
        ));
    }
    for n in ["CAKE", "FQ-CoDel"] {
        if let Some(r) = get(n) {
            claims.push(Claim::new(
                format!(
                    "{n}: no L4S-specific queue, so ECT(1) flows get no lower delay than classic \
                     ones (CoDel marks them at its 5 ms target like any ECN flow)"
                ),
                format!(
                    "L4S data delay mean {:.1} ms vs classic {:.1} ms",
                    r.l4s.delay_mean, r.classic.delay_mean
                ),
                "L4S mean >= classic mean",
                r.l4s.delay_mean >= r.classic.delay_mean,
            ));
            let all: Vec<f64> = r.classic.mbit.iter().chain(&r.l4s.mbit).copied().collect();
            let share = r.l4s.total() / (r.l4s.total() + r.classic.total()).max(1e-9);
            claims.push(Claim::new(
                format!("{n}: flow queuing isolates flows whatever their ECN class"),
                format!(
                    "Jain {:.3} over the 4 flows; L4S share {share:.2}",
                    jain(&all)
                ),
                "Jain >= 0.95 and L4S share within 0.5 +- 0.1",
                jain(&all) >= 0.95 && (share - 0.5).abs() <= 0.1,
            ));
        }
    }
    if results.len() == CONTENDERS.len() {
        let worst = results
            .iter()
            .map(|(_, r)| r.utilisation)
            .fold(f64::INFINITY, f64::min);
        claims.push(Claim::new(
            "every contender keeps the bottleneck busy",
            format!("lowest utilisation {worst:.3}"),
            ">= 0.9 for each",
            worst >= 0.9,
        ));
    }
    notes.push(
        "Queueing delay is each data packet's one-way delay minus the path's base (propagation \
         and serialisation of a full frame), pooled per class over the measured span; the probes \
         are ICMP echoes every 100 ms whose replies cross the bottleneck, RTT minus the idle \
         RTT."
            .into(),
    );
    notes.push(
        "CAKE and FQ-CoDel have no L4S-specific treatment here: they see ECT(1) as ECN-capable \
         and mark it CE by CoDel's 5 ms / 100 ms law (Linux fq_codel's optional ce_threshold for \
         ECT(1) is not modelled)."
            .into(),
    );
    Report {
        id: "D1".into(),
        title: "L4S: DualPI2 vs CAKE vs FQ-CoDel with mixed classic and scalable flows".into(),
        setup: format!(
            "One 40 Mbit/s bottleneck, 10 ms each way (20 ms base RTT), the qdisc at its egress \
             with a one-packet transmit buffer; 2 CUBIC flows (Not-ECT) and 2 Prague flows \
             (ECT(1), accurate ECN), all paced, one server each, downloads to one client; ICMP \
             probes every 100 ms marked ECT(1) and Not-ECT. {seconds:.0} s, measured after \
             {:.0} s. DualPI2 at Linux 6.17's defaults (target 15 ms, tupdate 16 ms, alpha 0.16, \
             beta 3.2, step 1 ms, k = 2, classic protection 10%, drop on overload).",
            seconds / 6.0
        ),
        table,
        claims,
        runs,
        notes,
    }
}
