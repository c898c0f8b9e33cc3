//! `purple bench dataplane [--json] [--seconds S]`: dataplane speed in throwaway namespaces.
//! Rows: direct veth (reference), the bridge unshaped, the bridge with CAKE at 1 Gbit/s and
//! 100 Mbit/s, kernel forwarding through HTB at 1 Gbit/s; TCP goodput, idle UDP round trip
//! (p50/p99) and the bridge thread's CPU per Gbit/s.

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
}

/// One measured row.
#[derive(Clone, Debug)]
struct Row {
    name: &'static str,
    configured_bps: Option<f64>,
    goodput_bps: f64,
    rtt_p50_us: f64,
    rtt_p99_us: f64,
    cpu_s_per_gbit: Option<f64>,
}

fn measure(
    name: &'static str,
    shape: Shape,
    qdisc: Option<&'static str>,
    configured_bps: Option<f64>,
    secs: f64,
) -> Result<Row, String> {
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
    let running = match qdisc {
        Some(q) => {
            let cfg = BridgeConfig {
                if_a: "b0".into(),
                if_b: "b1".into(),
                egress: q.into(),
                ingress: "pfifo".into(),
                name: lab.prefix.clone(),
                ctl_path: None,
                seed: 1,
            };
            Some(lab.start(move || Bridge::new(cfg))?)
        }
        None => None,
    };
    let rtts = lab.udp_rtts(7100, 500, Duration::from_millis(2))?;
    let cpu0 = 0u64;
    let d = Duration::from_secs_f64(secs.clamp(0.5, 60.0));
    let g = lab.tcp_goodput(7101, Duration::from_millis(500), d)?;
    let cpu = match running {
        Some(r) => Some(r.stop()?.1 - cpu0),
        None => None,
    };
    // The bridge's CPU over the whole row (mostly the transfer: warm-up plus measurement).
    let busy_s = d.as_secs_f64() + 0.5;
    Ok(Row {
        name,
        configured_bps,
        goodput_bps: g,
        rtt_p50_us: quantile(&rtts, 0.5) as f64 / 1e3,
        rtt_p99_us: quantile(&rtts, 0.99) as f64 / 1e3,
        cpu_s_per_gbit: cpu.map(|c| (c as f64 / 1e9 / busy_s) / (g / 1e9).max(1e-9)),
    })
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
            "bridge cake 100Mbit",
            Shape::Bridged,
            Some("cake bandwidth 100Mbit besteffort"),
            Some(1e8),
        ),
        ("kernel htb 1Gbit", Shape::Routed, None, Some(1e9)),
    ];
    let mut out = Vec::new();
    for (name, shape, q, rate) in rows {
        out.push(measure(name, shape, q, rate, a.seconds)?);
    }
    let base = out[0].rtt_p99_us;
    let base50 = out[0].rtt_p50_us;
    if a.json {
        let v: Vec<serde_json::Value> = out
            .iter()
            .map(|r| {
                serde_json::json!({
                    "row": r.name, "goodput_gbps": r.goodput_bps / 1e9,
                    "configured_gbps": r.configured_bps.map(|c| c / 1e9),
                    "rtt_p50_us": r.rtt_p50_us, "rtt_p99_us": r.rtt_p99_us,
                    "added_p50_us": r.rtt_p50_us - base50, "added_p99_us": r.rtt_p99_us - base,
                    "cpu_s_per_gbit": r.cpu_s_per_gbit,
                })
            })
            .collect();
        return Ok(format!("{}\n", serde_json::json!({ "dataplane": v })));
    }
    let mut t = format!(
        "{:<22} {:>10} {:>9} {:>10} {:>10} {:>11} {:>11} {:>12}\n",
        "row",
        "Gbit/s",
        "of rate",
        "rtt p50us",
        "rtt p99us",
        "added p50",
        "added p99",
        "cpu s/Gbit"
    );
    for r in &out {
        t.push_str(&format!(
            "{:<22} {:>10.3} {:>9} {:>10.1} {:>10.1} {:>11.1} {:>11.1} {:>12}\n",
            r.name,
            r.goodput_bps / 1e9,
            r.configured_bps
                .map_or("-".into(), |c| format!("{:.3}", r.goodput_bps / c)),
            r.rtt_p50_us,
            r.rtt_p99_us,
            r.rtt_p50_us - base50,
            r.rtt_p99_us - base,
            r.cpu_s_per_gbit.map_or("-".into(), |c| format!("{c:.3}")),
        ));
    }
    Ok(t)
}
