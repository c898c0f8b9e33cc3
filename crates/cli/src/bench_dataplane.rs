//! `purple bench dataplane [--json] [--seconds S] [--runs N] [--only TEXT] [--rt-priority P]
//! [--spin-us US] [--busy-poll-us US] [--batch-us US] [--no-rejoin] [--stats]`: dataplane speed in
//! throwaway namespaces. Rows: direct veth (reference), the bridge unshaped, the bridge with CAKE
//! at 1 Gbit/s (default split-gso, and no-split-gso) and 100 Mbit/s, kernel forwarding through
//! HTB at 1 Gbit/s. Columns: TCP goodput; for shaped rows the wire rate, i.e. the L2 frame bytes
//! per second released on the shaped egress during the measurement window, super-packets counted
//! as the segments they become (what CAKE in raw mode and HTB charge against their rate; read
//! from the bridge's `tx_wire_bytes` over the control socket, or from HTB's `Sent` bytes in
//! `tc -s qdisc`, which count GSO packets the same way), and its ratio to the configured rate; at
//! idle, what the middle adds to direct veth's UDP round trip (p50/p99: two passes, plus the
//! endpoints' wake-ups it causes) and to the one-way delay (p50/p99: one pass, from the sender's
//! `send` to the kernel's arrival timestamp at the receiver); the bridge thread's CPU (cores) per
//! Gbit/s of goodput. With `--runs N` every row is measured N times and each column shows the
//! median.

use std::time::Duration;

use dataplane::linkem_lab::{quantile, Lab, Shape};
use dataplane::{Bridge, BridgeConfig};

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
}

/// One measured row.
#[derive(Clone, Debug)]
struct Row {
    name: &'static str,
    configured_bps: Option<f64>,
    goodput_bps: f64,
    /// L2 bytes per second released by the shaper (shaped rows only).
    wire_bps: Option<f64>,
    rtt_p50_us: f64,
    rtt_p99_us: f64,
    one_way_p50_us: f64,
    one_way_p99_us: f64,
    cpu_per_gbit: Option<f64>,
}

/// The HTB root's `Sent` bytes on b1 of the middle namespace.
fn htb_sent(lab: &Lab) -> Option<u64> {
    let out = lab.output('b', &["tc", "-s", "-j", "qdisc", "show", "dev", "b1"])?;
    let v: serde_json::Value = serde_json::from_str(&out).ok()?;
    v.as_array()?
        .iter()
        .find(|q| q["kind"] == "htb")?
        .get("bytes")?
        .as_u64()
}

fn measure(
    name: &'static str,
    shape: Shape,
    qdisc: Option<&'static str>,
    configured_bps: Option<f64>,
    a: &Args,
) -> Result<Row, String> {
    let (secs, stats, tuning) = (a.seconds, a.stats, a.tuning);
    let lab = Lab::new(shape)?;
    if shape == Shape::Routed
        && !(lab.exec(
            'b',
            &[
                "tc", "qdisc", "add", "dev", "b1", "root", "handle", "1:", "htb", "default", "1",
            ],
        ) && lab.exec(
            'b',
            &[
                "tc", "class", "add", "dev", "b1", "parent", "1:", "classid", "1:1", "htb", "rate",
                "1gbit", "ceil", "1gbit",
            ],
        ))
    {
        return Err("tc htb failed".into());
    }
    let ctl = std::env::temp_dir().join(format!("{}.sock", lab.prefix));
    let running = match qdisc {
        Some(q) => {
            let cfg = BridgeConfig {
                if_a: "b0".into(),
                if_b: "b1".into(),
                egress: q.into(),
                ingress: "pfifo".into(),
                name: lab.prefix.clone(),
                ctl_path: Some(ctl.clone()),
                ctl_group: None,
                seed: 1,
            };
            Some(lab.start(move || {
                let mut br = Bridge::new(cfg)?;
                tuning.apply(&mut br)?;
                Ok(br)
            })?)
        }
        None => None,
    };
    let rtts = lab.udp_rtts(7100, 500, Duration::from_millis(2))?;
    let one_way = lab.udp_one_way(7102, 500, Duration::from_millis(2))?;
    // A probe with no samples is an error naming it, never a latency of 0.
    let us = |v: &[u64], q: f64, probe: &str| {
        quantile(v, q)
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
    let mut sample = || -> Option<(u64, u64)> {
        configured_bps?;
        let t0 = dataplane::sys::monotonic_ns();
        let bytes = if running.is_some() {
            let answer = dataplane::ctl::request(&ctl, "stats --json").ok()?;
            let v: serde_json::Value = serde_json::from_str(&answer).ok()?;
            v[0]["purple"]["tx_wire_bytes"].as_u64()?
        } else {
            htb_sent(&lab)?
        };
        let t1 = dataplane::sys::monotonic_ns();
        Some((bytes, t0 + (t1 - t0) / 2))
    };
    let (g, wire) = lab.tcp_goodput_sampled(7101, Duration::from_millis(500), d, &mut sample)?;
    let cpu = match running {
        Some(r) => {
            let (st, c) = r.stop()?;
            if stats {
                eprintln!("{name}: {st}");
            }
            Some(c)
        }
        None => None,
    };
    // The bridge's CPU over the whole row (mostly the transfer: warm-up plus measurement; the
    // idle round trips before it cost little).
    let busy_s = d.as_secs_f64() + 0.5;
    Ok(Row {
        name,
        configured_bps,
        goodput_bps: g,
        wire_bps: wire,
        rtt_p50_us,
        rtt_p99_us,
        one_way_p50_us,
        one_way_p99_us,
        cpu_per_gbit: cpu.map(|c| (c as f64 / 1e9 / busy_s) / (g / 1e9).max(1e-9)),
    })
}

/// The median of `v` (NaN-free values), `None` when empty.
fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// Per-column medians over runs of the same row.
fn median_row(runs: &[Row]) -> Row {
    let col = |f: &dyn Fn(&Row) -> Option<f64>| median(runs.iter().filter_map(f).collect());
    Row {
        name: runs[0].name,
        configured_bps: runs[0].configured_bps,
        goodput_bps: col(&|r| Some(r.goodput_bps)).unwrap_or(0.0),
        wire_bps: col(&|r| r.wire_bps),
        rtt_p50_us: col(&|r| Some(r.rtt_p50_us)).unwrap_or(0.0),
        rtt_p99_us: col(&|r| Some(r.rtt_p99_us)).unwrap_or(0.0),
        one_way_p50_us: col(&|r| Some(r.one_way_p50_us)).unwrap_or(0.0),
        one_way_p99_us: col(&|r| Some(r.one_way_p99_us)).unwrap_or(0.0),
        cpu_per_gbit: col(&|r| r.cpu_per_gbit),
    }
}

/// Runs every row; returns the table or JSON.
pub fn run(a: &Args) -> Result<String, String> {
    let rows = [
        ("direct veth", Shape::Direct, None, None),
        ("bridge unshaped", Shape::Bridged, Some("pfifo"), None),
        (
            "bridge cake 1Gbit",
            Shape::Bridged,
            Some("cake bandwidth 1Gbit besteffort"),
            Some(1e9),
        ),
        (
            "cake 1Gbit nosplit",
            Shape::Bridged,
            Some("cake bandwidth 1Gbit besteffort no-split-gso"),
            Some(1e9),
        ),
        (
            "bridge cake 100Mbit",
            Shape::Bridged,
            Some("cake bandwidth 100Mbit besteffort"),
            Some(1e8),
        ),
        ("kernel htb 1Gbit", Shape::Routed, None, Some(1e9)),
    ];
    let rows: Vec<_> = rows
        .into_iter()
        .enumerate()
        .filter(|(i, (name, ..))| {
            *i == 0 || a.only.as_ref().is_none_or(|o| name.contains(o.as_str()))
        })
        .map(|(_, r)| r)
        .collect();
    let mut all: Vec<Vec<Row>> = vec![Vec::new(); rows.len()];
    for _ in 0..a.runs.max(1) {
        for (i, &(name, shape, q, rate)) in rows.iter().enumerate() {
            all[i].push(measure(name, shape, q, rate, a)?);
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
                })
            })
            .collect();
        return Ok(format!(
            "{}\n",
            serde_json::json!({ "runs": a.runs.max(1), "dataplane": v })
        ));
    }
    let mut t = format!(
        "{:<20} {:>8} {:>7} {:>8} {:>8} {:>9} {:>9} {:>9} {:>9} {:>10}\n",
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
            "{:<20} {:>8.3} {:>7.3} {:>8} {:>8} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>10}\n",
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
    t.push_str(&format!(
        "(Gbit/s; wire = L2 bytes/s the shaper released; rtt+ / 1way+ = µs added at idle to \
         direct veth's UDP round trip (p50 {:.1}, p99 {:.1}) / one-way delay (p50 {:.1}, p99 \
         {:.1}); cpu = bridge thread cores per Gbit/s of goodput; medians of {} run(s))\n",
        d.rtt_p50_us,
        d.rtt_p99_us,
        d.one_way_p50_us,
        d.one_way_p99_us,
        a.runs.max(1)
    ));
    Ok(t)
}
