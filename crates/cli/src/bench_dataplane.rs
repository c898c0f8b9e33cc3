//! `purple bench dataplane [--json] [--seconds S] [--runs N] [--only TEXT] [--queues N]
//! [--mq-bandwidth RATE] [--rt-priority P] [--spin-us US] [--busy-poll-us US] [--batch-us US]
//! [--no-rejoin] [--stats]`: dataplane speed in throwaway namespaces. Rows: direct veth
//! (reference), the bridge unshaped, the bridge with CAKE at 1 Gbit/s (default split-gso, and
//! no-split-gso) and 100 Mbit/s, cake_mq in the multi-queue bridge with 1 and N queues, kernel
//! forwarding through HTB at 1 Gbit/s. Columns: TCP goodput; for shaped rows the wire rate, i.e.
//! the L2 frame bytes per second released on the shaped egress during the measurement window,
//! super-packets counted as the segments they become (what CAKE in raw mode and HTB charge
//! against their rate; read from the bridge's `tx_wire_bytes` over the control socket, or from
//! HTB's `Sent` bytes in `tc -s qdisc`, which count GSO packets the same way), and its ratio to
//! the configured rate; at idle, what the middle adds to direct veth's UDP round trip (p50/p99:
//! two passes, plus the endpoints' wake-ups it causes) and to the one-way delay (p50/p99: one
//! pass, from the sender's `send` to the kernel's arrival timestamp at the receiver); the bridge
//! threads' CPU (cores) per Gbit/s of goodput.
//!
//! The two cake_mq rows (`dataplane::MqBridge`, at `--mq-bandwidth`, default 1 Gbit/s) run one
//! queue and `--queues N` (default: the CPUs this process may use, at least 2), each under 16
//! TCP flows (fanout spreads flows, not packets, over the queues); they add each queue's wire
//! rate and the shards each counted active, and their CPU is that of all forwarding threads and
//! the coordinator together. With `--runs N` every row is measured N times and each column shows
//! the median.
use std::time::Duration;

use dataplane::linkem_lab::{Lab, Shape};
use dataplane::{Bridge, BridgeConfig, MqBridge};
use qdisc::quantile::{median, rounded_rank};

/// The command line.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Seconds of TCP transfer per row.
    #[arg(long, default_value_t = 3.0)]
    pub seconds: f64,
    /// Measure every row this many times and report per-column medians.
    #[arg(long, default_value_t = 1)]
    pub runs: usize,
    /// The bridge loop's options, as `purple bridge` takes them (the client and server stay at
    /// normal priority under `--rt-priority`).
    #[command(flatten)]
    pub tuning: crate::bridge::LoopTuning,
    /// Print each bridge's final `stats --json` to standard error.
    #[arg(long)]
    pub stats: bool,
    /// Run only the rows whose name contains this text (e.g. `cake`); the direct veth row, the
    /// reference for added latency and the unshaped target, always runs.
    #[arg(long)]
    pub only: Option<String>,
    /// Queues (forwarding threads, cake_mq shards) of the multi-queue row (default: the CPUs
    /// this process may use, at least 2).
    #[arg(long, value_parser = clap::value_parser!(u16).range(2..=64))]
    pub queues: Option<u16>,
    /// The cake_mq rows' bandwidth, in tc's syntax (e.g. 200Mbit: below what one core
    /// forwards, the rows show the sync alone).
    #[arg(long, default_value = "1Gbit")]
    pub mq_bandwidth: String,
}

/// TCP flows in the cake_mq rows: enough that fanout's flow hash leaves no queue without one
/// (with 2 queues, all 16 on one queue has probability 2^-15; with 8 flows it is 1/128, which
/// happened in a trial run).
const MQ_FLOWS: usize = 16;

/// What a row runs in the middle.
#[derive(Clone, Debug)]
enum Middle {
    /// Nothing (direct veth) or the kernel (routed HTB).
    None,
    /// One [`Bridge`] with this egress qdisc.
    Bridge(String),
    /// A [`MqBridge`] with this many queues and this egress qdisc.
    Mq(usize, String),
}

/// One row to measure.
#[derive(Clone, Debug)]
struct Spec {
    name: String,
    shape: Shape,
    middle: Middle,
    configured_bps: Option<f64>,
    flows: usize,
}

/// One measured row.
#[derive(Clone, Debug)]
struct Row {
    name: String,
    flows: usize,
    configured_bps: Option<f64>,
    goodput_bps: f64,
    /// L2 bytes per second released by the shaper (shaped rows only).
    wire_bps: Option<f64>,
    rtt_p50_us: f64,
    rtt_p99_us: f64,
    one_way_p50_us: f64,
    one_way_p99_us: f64,
    cpu_per_gbit: Option<f64>,
    /// Multi-queue rows: each queue's wire rate (bit/s) over the measurement window.
    queue_wire_bps: Vec<f64>,
    /// Multi-queue rows: the shards each queue's shard counted active at its last sync, read at
    /// the end of the window.
    active_queues: Vec<u64>,
}

/// The HTB root's `Sent` bytes on b1 of the middle namespace.
fn htb_sent(lab: &Lab) -> Option<u64> {
    let out = lab
        .output('b', &["tc", "-s", "-j", "qdisc", "show", "dev", "b1"])
        .ok()?;
    let v: serde_json::Value = serde_json::from_str(&out).ok()?;
    v.as_array()?
        .iter()
        .find(|q| q["kind"] == "htb")?
        .get("bytes")?
        .as_u64()
}

fn measure(spec: &Spec, a: &Args) -> Result<Row, String> {
    let (name, shape, configured_bps) = (spec.name.as_str(), spec.shape, spec.configured_bps);
    let (secs, stats, tuning) = (a.seconds, a.stats, a.tuning);
    let lab = Lab::new(shape).map_err(|e| e.to_string())?;
    if shape == Shape::Routed {
        lab.exec(
            'b',
            &[
                "tc", "qdisc", "add", "dev", "b1", "root", "handle", "1:", "htb", "default", "1",
            ],
        )
        .and_then(|()| {
            lab.exec(
                'b',
                &[
                    "tc", "class", "add", "dev", "b1", "parent", "1:", "classid", "1:1", "htb",
                    "rate", "1gbit", "ceil", "1gbit",
                ],
            )
        })
        .map_err(|e| format!("tc htb failed: {e}"))?;
    }
    let ctl = std::env::temp_dir().join(format!("{}.sock", lab.prefix));
    let bridge_cfg = |q: &str| BridgeConfig {
        if_a: "b0".into(),
        if_b: "b1".into(),
        egress: q.into(),
        ingress: "pfifo".into(),
        name: lab.prefix.clone(),
        ctl_path: Some(ctl.clone()),
        ctl_group: None,
        seed: 1,
    };
    let running = match &spec.middle {
        Middle::None => None,
        Middle::Bridge(q) => {
            let cfg = bridge_cfg(q);
            Some(
                lab.start(move || {
                    let mut br = Bridge::new(cfg)?;
                    tuning.apply(&mut br)?;
                    Ok(br)
                })
                .map_err(|e| e.to_string())?,
            )
        }
        Middle::Mq(n, q) => {
            let (cfg, n) = (bridge_cfg(q), *n);
            Some(
                lab.start(move || {
                    let mut br = MqBridge::new(cfg, n)?;
                    tuning.apply(&mut br)?;
                    Ok(br)
                })
                .map_err(|e| e.to_string())?,
            )
        }
    };
    let rtts = lab
        .udp_rtts(7100, 500, Duration::from_millis(2))
        .map_err(|e| e.to_string())?;
    let one_way = lab
        .udp_one_way(7102, 500, Duration::from_millis(2))
        .map_err(|e| e.to_string())?;
    // A probe with no samples is an error naming it, never a latency of 0.
    let us = |v: &[u64], q: f64, probe: &str| {
        rounded_rank(v, q)
            .map(|ns| ns as f64 / 1e3)
            .ok_or_else(|| format!("{name}: the {probe} probe got no replies (500 sent)"))
    };
    let (rtt_p50_us, rtt_p99_us) = (
        us(&rtts, 0.5, "UDP round-trip")?,
        us(&rtts, 0.99, "UDP round-trip")?,
    );
    let (one_way_p50_us, one_way_p99_us) = (
        us(&one_way, 0.5, "UDP one-way")?,
        us(&one_way, 0.99, "UDP one-way")?,
    );
    let d = Duration::from_secs_f64(secs.clamp(0.5, 60.0));
    // Each sample: the egress's wire bytes in all and per queue, and when they were read.
    let mut samples: Vec<(Vec<u64>, u64)> = Vec::new();
    let mut sample = || -> Option<(u64, u64)> {
        configured_bps?;
        let t0 = os::monotonic_ns();
        let (bytes, per_queue) = if running.is_some() {
            let stats = dataplane::ctl::Request::Stats { json: true };
            let answer = dataplane::ctl::request(&ctl, &stats).ok()?;
            let v: serde_json::Value = serde_json::from_str(&answer).ok()?;
            let per_queue = v[0]["queues"].as_array().map_or(Vec::new(), |qs| {
                qs.iter()
                    .filter_map(|q| q["purple"]["tx_wire_bytes"].as_u64())
                    .collect()
            });
            (v[0]["purple"]["tx_wire_bytes"].as_u64()?, per_queue)
        } else {
            (htb_sent(&lab)?, Vec::new())
        };
        let t1 = os::monotonic_ns();
        let at = t0 + (t1 - t0) / 2;
        samples.push((per_queue, at));
        Some((bytes, at))
    };
    let (g, wire) = lab
        .tcp_goodput_sampled(7101, spec.flows, Duration::from_millis(500), d, &mut sample)
        .map_err(|e| e.to_string())?;
    let queue_wire_bps = match samples.as_slice() {
        [(q0, t0), (q1, t1)] if q0.len() == q1.len() && t1 > t0 => q0
            .iter()
            .zip(q1)
            .map(|(a, b)| b.saturating_sub(*a) as f64 * 8.0 / ((t1 - t0) as f64 / 1e9))
            .collect(),
        _ => Vec::new(),
    };
    let cpu = match running {
        Some(r) => {
            let (st, c) = r.stop().map_err(|e| e.to_string())?;
            if stats {
                eprintln!("{name}: {st}");
            }
            Some((c, st))
        }
        None => None,
    };
    let active_queues = cpu.as_ref().map_or(Vec::new(), |(_, st)| {
        serde_json::from_str::<serde_json::Value>(st)
            .ok()
            .and_then(|v| {
                v[0]["queues"].as_array().map(|qs| {
                    qs.iter()
                        .filter_map(|q| q["active_queues"].as_u64())
                        .collect()
                })
            })
            .unwrap_or_default()
    });
    // The bridge's CPU over the whole row (mostly the transfer: warm-up plus measurement; the
    // idle round trips before it cost little).
    let busy_s = d.as_secs_f64() + 0.5;
    Ok(Row {
        name: name.to_string(),
        flows: spec.flows,
        configured_bps,
        goodput_bps: g,
        wire_bps: wire,
        rtt_p50_us,
        rtt_p99_us,
        one_way_p50_us,
        one_way_p99_us,
        cpu_per_gbit: cpu.map(|(c, _)| (c as f64 / 1e9 / busy_s) / (g / 1e9).max(1e-9)),
        queue_wire_bps,
        active_queues,
    })
}

/// Per-column medians over runs of the same row.
fn median_row(runs: &[Row]) -> Row {
    let col =
        |f: &dyn Fn(&Row) -> Option<f64>| median(&runs.iter().filter_map(f).collect::<Vec<f64>>());
    let queues = runs[0].queue_wire_bps.len();
    Row {
        name: runs[0].name.clone(),
        flows: runs[0].flows,
        configured_bps: runs[0].configured_bps,
        goodput_bps: col(&|r| Some(r.goodput_bps)).unwrap_or(0.0),
        wire_bps: col(&|r| r.wire_bps),
        rtt_p50_us: col(&|r| Some(r.rtt_p50_us)).unwrap_or(0.0),
        rtt_p99_us: col(&|r| Some(r.rtt_p99_us)).unwrap_or(0.0),
        one_way_p50_us: col(&|r| Some(r.one_way_p50_us)).unwrap_or(0.0),
        one_way_p99_us: col(&|r| Some(r.one_way_p99_us)).unwrap_or(0.0),
        cpu_per_gbit: col(&|r| r.cpu_per_gbit),
        queue_wire_bps: (0..queues)
            .filter_map(|i| col(&|r| r.queue_wire_bps.get(i).copied()))
            .collect(),
        // The last run's counts (they are read, not measured).
        active_queues: runs.last().map_or(Vec::new(), |r| r.active_queues.clone()),
    }
}

/// Runs every row; returns the table or JSON.
pub fn run(a: &Args) -> Result<String, String> {
    let n = a
        .queues
        .map_or(dataplane::mq::default_queues().max(2), usize::from);
    let spec = |name: &str, shape, middle, rate: Option<f64>, flows| Spec {
        name: name.to_string(),
        shape,
        middle,
        configured_bps: rate,
        flows,
    };
    let mq_bps = qdisc::tc_units::parse_shaper_rate(&a.mq_bandwidth)
        .map_err(|e| format!("--mq-bandwidth {}: {e}", a.mq_bandwidth))? as f64
        * 8.0;
    let mq_rate = qdisc::tc_units::format_rate((mq_bps / 8.0) as u64);
    let cake_mq = format!("cake_mq bandwidth {mq_rate} besteffort");
    let bridge = |q: &str| Middle::Bridge(q.to_string());
    let rows = [
        spec("direct veth", Shape::Direct, Middle::None, None, 1),
        spec("bridge unshaped", Shape::Bridged, bridge("pfifo"), None, 1),
        spec(
            "bridge cake 1Gbit",
            Shape::Bridged,
            bridge("cake bandwidth 1Gbit besteffort"),
            Some(1e9),
            1,
        ),
        spec(
            "cake 1Gbit nosplit",
            Shape::Bridged,
            bridge("cake bandwidth 1Gbit besteffort no-split-gso"),
            Some(1e9),
            1,
        ),
        spec(
            "bridge cake 100Mbit",
            Shape::Bridged,
            bridge("cake bandwidth 100Mbit besteffort"),
            Some(1e8),
            1,
        ),
        spec(
            &format!("cake_mq {mq_rate} 1 queue"),
            Shape::Bridged,
            Middle::Mq(1, cake_mq.clone()),
            Some(mq_bps),
            MQ_FLOWS,
        ),
        spec(
            &format!("cake_mq {mq_rate} {n} queues"),
            Shape::Bridged,
            Middle::Mq(n, cake_mq),
            Some(mq_bps),
            MQ_FLOWS,
        ),
        spec(
            "kernel htb 1Gbit",
            Shape::Routed,
            Middle::None,
            Some(1e9),
            1,
        ),
    ];
    let rows: Vec<Spec> = rows
        .into_iter()
        .enumerate()
        .filter(|(i, r)| *i == 0 || a.only.as_ref().is_none_or(|o| r.name.contains(o.as_str())))
        .map(|(_, r)| r)
        .collect();
    let mut all: Vec<Vec<Row>> = vec![Vec::new(); rows.len()];
    for _ in 0..a.runs.max(1) {
        for (i, r) in rows.iter().enumerate() {
            all[i].push(measure(r, a)?);
        }
    }
    let out: Vec<Row> = all.iter().map(|r| median_row(r)).collect();
    let d = &out[0];
    let of_rate = |r: &Row| match (r.wire_bps, r.configured_bps) {
        (Some(w), Some(c)) => Some(w / c),
        _ => None,
    };
    if a.json {
        let v: Vec<serde_json::Value> = out
            .iter()
            .map(|r| {
                serde_json::json!({
                    "row": r.name, "goodput_gbps": r.goodput_bps / 1e9,
                    "configured_gbps": r.configured_bps.map(|c| c / 1e9),
                    "wire_gbps": r.wire_bps.map(|w| w / 1e9),
                    "wire_of_rate": of_rate(r),
                    "of_direct": r.goodput_bps / d.goodput_bps.max(1.0),
                    "rtt_p50_us": r.rtt_p50_us, "rtt_p99_us": r.rtt_p99_us,
                    "added_p50_us": r.rtt_p50_us - d.rtt_p50_us,
                    "added_p99_us": r.rtt_p99_us - d.rtt_p99_us,
                    "one_way_p50_us": r.one_way_p50_us, "one_way_p99_us": r.one_way_p99_us,
                    "added_one_way_p50_us": r.one_way_p50_us - d.one_way_p50_us,
                    "added_one_way_p99_us": r.one_way_p99_us - d.one_way_p99_us,
                    "cpu_per_gbps": r.cpu_per_gbit,
                    "flows": r.flows,
                    "queue_wire_gbps": (!r.queue_wire_bps.is_empty())
                        .then(|| r.queue_wire_bps.iter().map(|w| w / 1e9).collect::<Vec<_>>()),
                    "active_queues": (!r.active_queues.is_empty()).then_some(&r.active_queues),
                })
            })
            .collect();
        return Ok(format!(
            "{}\n",
            serde_json::json!({ "runs": a.runs.max(1), "dataplane": v })
        ));
    }
    let mut t = format!(
        "{:<23} {:>8} {:>7} {:>8} {:>8} {:>9} {:>9} {:>9} {:>9} {:>10}\n",
        "row",
        "goodput",
        "of dir",
        "wire",
        "of rate",
        "rtt+ p50",
        "rtt+ p99",
        "1way+ p50",
        "1way+ p99",
        "cpu/Gbps"
    );
    for r in &out {
        t.push_str(&format!(
            "{:<23} {:>8.3} {:>7.3} {:>8} {:>8} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>10}\n",
            r.name,
            r.goodput_bps / 1e9,
            r.goodput_bps / d.goodput_bps.max(1.0),
            r.wire_bps.map_or("-".into(), |w| format!("{:.3}", w / 1e9)),
            of_rate(r).map_or("-".into(), |x| format!("{x:.4}")),
            r.rtt_p50_us - d.rtt_p50_us,
            r.rtt_p99_us - d.rtt_p99_us,
            r.one_way_p50_us - d.one_way_p50_us,
            r.one_way_p99_us - d.one_way_p99_us,
            r.cpu_per_gbit.map_or("-".into(), |c| format!("{c:.3}")),
        ));
    }
    for r in out.iter().filter(|r| !r.queue_wire_bps.is_empty()) {
        let total: f64 = r.queue_wire_bps.iter().sum::<f64>().max(1.0);
        let list = |f: &dyn Fn(f64) -> String| {
            r.queue_wire_bps
                .iter()
                .map(|&w| f(w))
                .collect::<Vec<_>>()
                .join(" / ")
        };
        t.push_str(&format!(
            "{}: {} TCP flows; wire per queue {} Gbit/s ({} of the total); shards counted \
             active at the end: {}\n",
            r.name,
            r.flows,
            list(&|w| format!("{:.3}", w / 1e9)),
            list(&|w| format!("{:.3}", w / total)),
            r.active_queues
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(" / ")
        ));
    }
    t.push_str(&format!(
        "(Gbit/s; wire = L2 bytes/s the shaper released; rtt+ / 1way+ = µs added at idle to \
         direct veth's UDP round trip (p50 {:.1}, p99 {:.1}) / one-way delay (p50 {:.1}, p99 \
         {:.1}); cpu = bridge threads' cores per Gbit/s of goodput; medians of {} run(s))\n",
        d.rtt_p50_us,
        d.rtt_p99_us,
        d.one_way_p50_us,
        d.one_way_p99_us,
        a.runs.max(1)
    ));
    Ok(t)
}
