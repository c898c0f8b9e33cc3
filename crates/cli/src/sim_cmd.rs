//! `purple sim FILE`: runs a TOML scenario (format: crates/sim/src/scenario.rs) and prints
//! per-application goodput, latency and loss, and per-link utilisation and drops.

use std::path::Path;

/// One application's results.
struct Row {
    name: String,
    goodput_bps: f64,
    latency: Option<sim::LatencySummary>,
    loss: f64,
}

/// Runs the scenario at `path`; returns the text (or JSON) to print.
pub fn run(path: &Path, json: bool) -> Result<String, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read scenario {}: {e}", path.display()))?;
    let scenario = sim::Scenario::parse(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut built = scenario
        .build(dir)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    built.sim.run_until(built.end);
    let secs = built.end.as_secs_f64().max(1e-9);
    let rows: Vec<Row> = built
        .apps
        .iter()
        .map(|(name, id)| {
            let flow = built.sim.flow(*id);
            let tcp_rx = built.sim.app_as::<sim::TcpReceiverApp>(*id);
            let goodput_bps = match tcp_rx {
                // TCP: in-order payload delivered (retransmissions not double counted).
                Some(rx) => rx.delivered() as f64 * 8.0 / secs,
                None => flow.map_or(0.0, |f| f.delivered_bytes as f64 * 8.0 / secs),
            };
            let latency = flow
                .filter(|f| !f.latencies_ns.is_empty())
                .map(|f| f.latency());
            Row {
                name: name.clone(),
                goodput_bps,
                latency,
                loss: flow.map_or(0.0, |f| f.loss()),
            }
        })
        .collect();
    let ms = |d: qdisc::Duration| d.as_millis_f64();
    if json {
        let flows: Vec<serde_json::Value> = rows
            .iter()
            .map(|r| {
                let lat = r.latency.as_ref().map(|l| {
                    serde_json::json!({"mean": ms(l.mean), "p50": ms(l.p50), "p95": ms(l.p95),
                        "p99": ms(l.p99), "max": ms(l.max)})
                });
                serde_json::json!({"name": r.name, "goodput_bps": r.goodput_bps,
                    "latency_ms": lat, "loss": r.loss})
            })
            .collect();
        let links: Vec<serde_json::Value> = built
            .links
            .iter()
            .map(|(name, id)| {
                serde_json::json!({"name": name, "utilisation": built.sim.link_utilisation(*id)})
            })
            .collect();
        return Ok(serde_json::json!({"flows": flows, "links": links}).to_string() + "\n");
    }
    let mut out = format!("{} s simulated from {}\n\n", secs, path.display());
    out += &format!(
        "{:<22} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7}\n",
        "application", "Mbit/s", "mean ms", "p50", "p95", "p99", "max", "loss"
    );
    for r in &rows {
        let (mean, p50, p95, p99, max) = r.latency.as_ref().map_or(
            (
                "-".to_string(),
                "-".to_string(),
                "-".to_string(),
                "-".to_string(),
                "-".to_string(),
            ),
            |l| {
                let f = |d| format!("{:.2}", ms(d));
                (f(l.mean), f(l.p50), f(l.p95), f(l.p99), f(l.max))
            },
        );
        out += &format!(
            "{:<22} {:>10.3} {:>9} {:>9} {:>9} {:>9} {:>9} {:>6.2}%\n",
            r.name,
            r.goodput_bps / 1e6,
            mean,
            p50,
            p95,
            p99,
            max,
            r.loss * 100.0
        );
    }
    out += &format!(
        "\n{:<28} {:>11} {:>12} {:>11} {:>11}\n",
        "link", "utilisation", "buffer drops", "qdisc drops", "random loss"
    );
    for (name, id) in &built.links {
        if let Some(m) = built.sim.link(*id) {
            out += &format!(
                "{:<28} {:>10.1}% {:>12} {:>11} {:>11}\n",
                name,
                built.sim.link_utilisation(*id) * 100.0,
                m.buffer_drops,
                m.qdisc_drops,
                m.random_losses
            );
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_example_scenario_runs_and_cake_keeps_ping_near_the_base_rtt() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/cake-dumbbell.toml");
        let out = run(&path, true).expect("example scenario runs");
        let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
        let flows = v["flows"].as_array().expect("flows");
        let ping = flows
            .iter()
            .find(|f| f["name"] == "ping@a:7")
            .expect("ping row");
        let p99 = ping["latency_ms"]["p99"].as_f64().expect("p99");
        assert!(p99 < 50.0, "ping p99 {p99} ms with CAKE (base RTT 40 ms)");
        let tcp: f64 = flows
            .iter()
            .filter(|f| f["name"].as_str().is_some_and(|n| n.starts_with("tcp-rx")))
            .map(|f| f["goodput_bps"].as_f64().unwrap_or(0.0))
            .sum();
        assert!(tcp > 8.0e6, "TCP goodput {tcp}");
    }

    #[test]
    fn a_missing_file_is_an_error_not_a_panic() {
        assert!(run(Path::new("/nonexistent/x.toml"), false).is_err());
    }
}
