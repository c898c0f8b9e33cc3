//! Flent data files (`*.flent.gz`) of a simulator run, so `flent -i FILE` can load our runs:
//! gzip'd JSON with `version` 4, `metadata`, `x_values` (seconds from T0, one per bin) and
//! `results` (one series per name, a value or `null` per x), plus `raw_values`.
//!
//! Series: `<flow> goodput` (Mbit/s per bin) and `<flow> latency` (mean ms per bin, `null`
//! where nothing was delivered) for every flow, `<link> tx` (Mbit/s) for every link. Times are
//! virtual: T0 is the Unix epoch, so the same run gives a byte-identical file.

use flate2::write::GzEncoder;
use flate2::Compression;
use serde_json::{json, Map, Value};
use sim::RunSummary;
use std::io::Write;
use std::path::Path;

/// The Flent JSON document of `run`.
pub fn to_json(run: &RunSummary) -> Value {
    let bins = run
        .flows
        .iter()
        .map(|f| f.series.goodput_bps.len().max(f.series.latency_ms.len()))
        .chain(run.links.iter().map(|l| l.tx_bps.len()))
        .max()
        .unwrap_or(0)
        .max((run.duration_s / run.bin_s.max(1e-9)).ceil() as usize);
    let x: Vec<f64> = (0..bins).map(|i| i as f64 * run.bin_s).collect();
    let mut results = Map::new();
    let mut meta = Map::new();
    let pad = |v: Vec<Value>| -> Value {
        let mut v = v;
        v.resize(bins, Value::Null);
        Value::Array(v)
    };
    for f in &run.flows {
        let g = format!("{} goodput", f.name);
        results.insert(
            g.clone(),
            pad(f
                .series
                .goodput_bps
                .iter()
                .map(|b| json!(b / 1e6))
                .collect()),
        );
        meta.insert(
            g,
            json!({"UNITS": "Mbits/s", "SRC": f.src, "DST": f.dst, "DSCP": f.dscp}),
        );
        let l = format!("{} latency", f.name);
        results.insert(
            l.clone(),
            pad(f.series.latency_ms.iter().map(|v| json!(v)).collect()),
        );
        meta.insert(
            l,
            json!({"UNITS": "ms", "SRC": f.src, "DST": f.dst, "DSCP": f.dscp}),
        );
    }
    for l in &run.links {
        let n = format!("{} tx", l.name);
        results.insert(
            n.clone(),
            pad(l.tx_bps.iter().map(|b| json!(b / 1e6)).collect()),
        );
        meta.insert(n, json!({"UNITS": "Mbits/s"}));
    }
    json!({
        "version": 4,
        "metadata": {
            "NAME": "purple-sim",
            "TITLE": run.name,
            "TIME": "1970-01-01T00:00:00.000000",
            "T0": "1970-01-01T00:00:00.000000",
            "HOST": "purple-sim",
            "HOSTS": ["purple-sim"],
            "LOCAL_HOST": "purple-sim",
            "LENGTH": run.duration_s,
            "TOTAL_LENGTH": run.duration_s,
            "STEP_SIZE": run.bin_s,
            "SERIES_META": meta,
            "FAILED_RUNS": 0,
            "QDISCS": run.qdiscs,
        },
        "x_values": x,
        "results": results,
        "raw_values": {},
    })
}

/// Writes [`to_json`] of `run`, gzip'd, to `path`.
pub fn write(run: &RunSummary, path: &Path) -> Result<(), String> {
    let f = std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut gz = GzEncoder::new(f, Compression::default());
    gz.write_all(to_json(run).to_string().as_bytes())
        .and_then(|()| gz.finish().map(|_| ()))
        .map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sim::{FlowSeries, FlowSummary};

    #[test]
    fn every_series_has_one_value_per_x_and_gaps_are_null() {
        let run = RunSummary {
            name: "t".into(),
            duration_s: 0.3,
            bin_s: 0.1,
            flows: vec![FlowSummary {
                name: "f".into(),
                series: FlowSeries {
                    goodput_bps: vec![1e6],
                    latency_ms: vec![None, Some(2.0)],
                },
                ..FlowSummary::default()
            }],
            ..RunSummary::default()
        };
        let v = to_json(&run);
        assert_eq!(v["x_values"].as_array().map(Vec::len), Some(3));
        assert_eq!(v["results"]["f goodput"], json!([1.0, null, null]));
        assert_eq!(v["results"]["f latency"], json!([null, 2.0, null]));
        assert_eq!(v["metadata"]["SERIES_META"]["f latency"]["UNITS"], "ms");
    }
}
