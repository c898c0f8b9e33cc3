//! Both comparisons as JSON (what `--json` prints and `results.json` holds).

use super::{Demo, LabDemo};
use controller::Direction;
use lab::analysis::{self, LOADED_LATENCY_PROBE};
use serde_json::{json, Map, Value};
use sim::LoadedSummary;

/// One contender's loaded-phase figures, the part both comparisons publish alike: `{"name",
/// "latency_ms":{n,mean,median,min,max,std,p95,p99},"throughput_mbit":{down,up},
/// "capacity_mbit":{down,up},"share"}`. What a backend did not measure is `null` (the lab's
/// upload capacity; a latency without samples; the share without a positive capacity).
fn contender_json(name: &str, l: &LoadedSummary) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("name".into(), json!(name));
    m.insert("latency_ms".into(), json!(l.latency));
    m.insert("throughput_mbit".into(), json!(l.throughput_mbit));
    m.insert("capacity_mbit".into(), json!(l.capacity_mbit));
    m.insert("share".into(), json!(l.share(Direction::Down)));
    m
}

/// The demo as JSON: `{"scenario","description","seconds","seed","contenders":[{"id", then
/// `contender_json`'s fields}],"claims":[{seed,ours,tolerance,pass}]}`.
pub fn to_json(d: &Demo) -> Value {
    let contenders: Vec<Value> = d
        .results
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let mut m = Map::new();
            m.insert("id".into(), json!(d.labels.get(i).copied().unwrap_or("")));
            m.extend(contender_json(r.name(), r.loaded()));
            Value::Object(m)
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

/// The lab demo as JSON: `{"scenario","title","seconds","contenders":[{`contender_json`'s
/// fields (`capacity_mbit`'s `up` is `null`: the lab knows only the emulator's download
/// capacity), "tracking","daemon_log","warnings","series":{"t","capacity","shaped_rate",
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
            let mut m = contender_json(&r.run.contender, r.loaded());
            m.insert("tracking".into(), json!(r.loaded().tracking));
            m.insert(
                "daemon_log".into(),
                json!(r.run.control.as_ref().map(|c| c.log.display().to_string())),
            );
            m.insert("warnings".into(), json!(r.run.warnings));
            m.insert(
                "series".into(),
                json!({"t": t, "capacity": r.run.capacity_down_mbit, "shaped_rate": rate,
                    "throughput": thr, "latency_ms": lat}),
            );
            Value::Object(m)
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
