//! Both comparisons as JSON (what `--json` prints and `results.json` holds).

use super::{Demo, LabDemo};
use lab::analysis::{self, LOADED_LATENCY_PROBE};
use serde_json::{json, Value};

/// The demo as JSON: `{"scenario","description","seconds","seed","contenders":[{"id","name",
/// "latency_ms":{n,mean,median,min,max,std,p95,p99},"throughput_mbit":{down,up},
/// "capacity_mbit":{down,up},"share"}],"claims":[{seed,ours,tolerance,pass}]}`.
pub fn to_json(d: &Demo) -> Value {
    let contenders: Vec<Value> = d
        .results
        .iter()
        .enumerate()
        .map(|(i, r)| {
            json!({
                "id": d.labels.get(i).copied().unwrap_or(""),
                "name": r.name(),
                "latency_ms": r.latency(),
                "throughput_mbit": r.throughput(),
                "capacity_mbit": r.capacity(),
                "share": r.share(),
            })
        })
        .collect();
    json!({
        "scenario": d.scenario,
        "description": d.description,
        "seconds": d.seconds,
        "seed": d.seed,
        "contenders": contenders,
        "claims": d.claims,
    })
}

fn nan_null(x: f64) -> Value {
    if x.is_finite() {
        json!(x)
    } else {
        Value::Null
    }
}

/// The lab demo as JSON: `{"scenario","title","seconds","contenders":[{"name","latency_ms":
/// {n,mean,median,min,max,std,p95,p99},"throughput_mbit":{down,up},"capacity_mbit":{down},
/// "share","tracking","daemon_log","warnings","series":{"t","capacity","shaped_rate",
/// "throughput","latency_ms"}}]}` (series per 100 ms bin, Mbit/s; `null` where none).
pub fn lab_json(d: &LabDemo) -> Value {
    let rows: Vec<Value> = d
        .rows
        .iter()
        .map(|r| {
            let t = analysis::bin_ends_s(&r.run);
            let rate: Vec<Value> = t
                .iter()
                .map(|&x| json!(d.shaped_rate(r, x - r.run.summary.bin_s / 2.0)))
                .collect();
            let thr: Vec<Value> = r
                .run
                .summary
                .links
                .get(1)
                .map(|l| l.tx_bps.iter().map(|b| nan_null(b / 1e6)).collect())
                .unwrap_or_default();
            let lat: Vec<Value> = r
                .run
                .probe_flow(LOADED_LATENCY_PROBE)
                .map(|f| f.series.latency_ms.iter().map(|v| json!(v)).collect())
                .unwrap_or_default();
            json!({
                "name": r.run.contender,
                "latency_ms": r.loaded().latency,
                "throughput_mbit": {"down": r.run.down_mbit, "up": r.run.up_mbit},
                "capacity_mbit": {"down": r.loaded().capacity_mbit.down},
                "share": r.share(),
                "tracking": r.loaded().tracking,
                "daemon_log": r.run.control.as_ref().map(|c| c.log.display().to_string()),
                "warnings": r.run.warnings,
                "series": {"t": t, "capacity": r.run.capacity_down_mbit, "shaped_rate": rate,
                    "throughput": thr, "latency_ms": lat},
            })
        })
        .collect();
    json!({
        "scenario": d.scenario.name,
        "title": d.scenario.title,
        "seconds": d.seconds,
        "idle_seconds": d.idle_s,
        "faults": d.fault_names(),
        "probe": LOADED_LATENCY_PROBE.label(),
        "contenders": rows,
        "sim": d.sim.as_ref().map(|t| json!({"title": t.title, "table": t.table})),
    })
}
