//! Flent data files (`*.flent.gz`) of a run, which Flent 2.3 loads with the canned plots of
//! the test the run is (`flent -i FILE -f summary`, `flent -i FILE -p PLOT`).
//!
//! The file is gzip'd JSON: `version` 4, `metadata`, `x_values` (seconds from T0, one per bin),
//! `results` (one series per name, a value or `null` per x) and `raw_values` (each series'
//! non-null values with their times; Flent plots nothing from a file without them). The run's
//! [`sim::FlentLabels`] say which Flent test it is (metadata `NAME`, with the test parameters
//! the test reads) and which flow is which of the test's data series:
//!
//! - every labelled flow under the test's own series name: goodput (Mbit/s per bin) for
//!   `TCP ...` and `UDP upload`, mean latency (ms per bin, `null` where nothing arrived) for
//!   `Ping (ms) ...`;
//! - the series the test computes from those (`TCP upload sum`, `TCP totals`, `Ping (ms) avg`,
//!   `TCP upload fairness`, ...), computed here per bin as Flent computes them;
//! - our own series beside them: `<flow> goodput` for each flow that is not one of the test's
//!   series, `<flow> latency` for each flow that is not one of its latency series (when it has
//!   any sample: the one-way delay of a TCP flow, say), and `<link> tx` (Mbit/s) per link.
//!
//! Times are virtual: T0 is the Unix epoch (in UTC), so the same run gives a byte-identical
//! file.

use flate2::write::GzEncoder;
use flate2::Compression;
use serde_json::{json, Map, Value};
use sim::flent::{measure, Measure, Runner};
use sim::RunSummary;
use std::io::Write;
use std::path::Path;

/// T0 and TIME of every file: the Unix epoch, in UTC (the `Z` stops Flent guessing a time
/// zone from the data's timestamps).
const EPOCH: &str = "1970-01-01T00:00:00.000000Z";

/// Host name in the metadata (Flent prints it in plot footers and probe labels).
const HOST: &str = "purple";

/// One series being written: its name, a value or `None` per bin, and its metadata.
struct Series {
    name: String,
    values: Vec<Option<f64>>,
    meta: Value,
}

/// The Flent JSON document of `run`; an error when the run has no Flent labels or they do not
/// fit it ([`RunSummary::flent_labels`]).
pub fn to_json(run: &RunSummary) -> Result<Value, String> {
    let labels = run
        .flent_labels()
        .map_err(|e| format!("Flent file of {:?}: {e}", run.name))?;
    let test = labels.test;
    let bins = run
        .flows
        .iter()
        .map(|f| f.series.goodput_bps.len().max(f.series.latency_ms.len()))
        .chain(run.links.iter().map(|l| l.tx_bps.len()))
        .max()
        .unwrap_or(0)
        .max((run.duration_s / run.bin_s.max(1e-9)).ceil() as usize);
    let x: Vec<f64> = (0..bins).map(|i| i as f64 * run.bin_s).collect();
    let padded = |v: Vec<Option<f64>>| -> Vec<Option<f64>> {
        let mut v = v;
        v.resize(bins, None);
        v
    };
    let mut data: Vec<Series> = Vec::new();
    let mut extra: Vec<Series> = Vec::new();
    for f in &run.flows {
        let goodput = || padded(f.series.goodput_bps.iter().map(|b| Some(b / 1e6)).collect());
        let latency = || padded(f.series.latency_ms.clone());
        let meta = |units: &str| json!({"UNITS": units, "SRC": f.src, "DST": f.dst, "DSCP": f.dscp, "FLOW": f.name});
        let flent = labels.series_of(&f.name);
        match flent.map(|s| (s, measure(s))) {
            Some((s, Measure::Goodput)) => data.push(Series {
                name: s.to_string(),
                values: goodput(),
                meta: meta("Mbits/s"),
            }),
            Some((s, Measure::Latency)) => data.push(Series {
                name: s.to_string(),
                values: latency(),
                meta: meta("ms"),
            }),
            None => extra.push(Series {
                name: format!("{} goodput", f.name),
                values: goodput(),
                meta: meta("Mbits/s"),
            }),
        }
        let latency_is_flents = flent.is_some_and(|s| measure(s) == Measure::Latency);
        let l = latency();
        if !latency_is_flents && l.iter().any(Option::is_some) {
            extra.push(Series {
                name: format!("{} latency", f.name),
                values: l,
                meta: meta("ms"),
            });
        }
    }
    for l in &run.links {
        extra.push(Series {
            name: format!("{} tx", l.name),
            values: padded(l.tx_bps.iter().map(|b| Some(b / 1e6)).collect()),
            meta: json!({"UNITS": "Mbits/s"}),
        });
    }
    let computed: Vec<Series> = test
        .computed()
        .iter()
        .filter_map(|c| {
            let inputs: Vec<&Series> = data.iter().filter(|s| s.name.starts_with(c.over)).collect();
            if inputs.is_empty() {
                return None;
            }
            let values = (0..bins)
                .map(|k| {
                    let v: Vec<f64> = inputs.iter().filter_map(|s| s.values[k]).collect();
                    compute(c.runner, &v)
                })
                .collect();
            // Flent marks a computed series so its summary prints no median or percentile.
            Some(Series {
                name: c.name.to_string(),
                values,
                meta: json!({"UNITS": c.units, "COMPUTED_LATE": false}),
            })
        })
        .collect();
    let mut results = Map::new();
    let mut raw = Map::new();
    let mut meta = Map::new();
    for s in data.iter().chain(&extra) {
        let points: Vec<Value> = s
            .values
            .iter()
            .zip(&x)
            .filter_map(|(v, t)| v.map(|v| json!({"t": t, "val": v})))
            .collect();
        raw.insert(s.name.clone(), Value::Array(points));
    }
    for s in data.iter().chain(&computed).chain(&extra) {
        results.insert(s.name.clone(), json!(s.values));
        meta.insert(s.name.clone(), s.meta.clone());
    }
    let params: Map<String, Value> = test
        .parameters()
        .into_iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect();
    Ok(json!({
        "version": 4,
        "metadata": {
            "NAME": test.name(),
            "TITLE": run.name,
            "TIME": EPOCH,
            "T0": EPOCH,
            "HOST": HOST,
            "HOSTS": [HOST],
            "LOCAL_HOST": HOST,
            "IP_VERSION": 4,
            "DELAY": labels.delay_s,
            "LENGTH": (run.duration_s - labels.delay_s).max(0.0),
            "TOTAL_LENGTH": run.duration_s,
            "STEP_SIZE": run.bin_s,
            "TEST_PARAMETERS": params,
            "SERIES_META": meta,
            "FAILED_RUNS": 0,
            "QDISCS": run.qdiscs,
        },
        "x_values": x,
        "results": results,
        "raw_values": raw,
    }))
}

/// One bin of a computed series from its inputs' values there (`None` where none has one, and
/// for the fairness of all-zero values, as Flent leaves them).
fn compute(runner: Runner, v: &[f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let sum: f64 = v.iter().sum();
    match runner {
        Runner::Sum => Some(sum),
        Runner::Average => Some(sum / v.len() as f64),
        Runner::Fairness => {
            let sq: f64 = v.iter().map(|x| x * x).sum();
            (sq > 0.0).then(|| sum * sum / (v.len() as f64 * sq))
        }
    }
}

/// Writes [`to_json`] of `run`, gzip'd, to `path`.
pub fn write(run: &RunSummary, path: &Path) -> Result<(), String> {
    let doc = to_json(run)?;
    let f = std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut gz = GzEncoder::new(f, Compression::default());
    gz.write_all(doc.to_string().as_bytes())
        .and_then(|()| gz.finish().map(|_| ()))
        .map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sim::flent::{self, Role};
    use sim::{FlentLabels, FlentTest, FlowSeries, FlowSummary, LinkSummary};

    fn flow(name: &str, goodput_bps: Vec<f64>, latency_ms: Vec<Option<f64>>) -> FlowSummary {
        FlowSummary {
            name: name.into(),
            series: FlowSeries {
                goodput_bps,
                latency_ms,
            },
            ..FlowSummary::default()
        }
    }

    fn run(flows: Vec<FlowSummary>, labels: FlentLabels) -> RunSummary {
        RunSummary {
            name: "t".into(),
            duration_s: 0.3,
            bin_s: 0.1,
            flows,
            links: vec![LinkSummary {
                name: "up".into(),
                utilisation: 0.5,
                tx_bps: vec![2e6, 2e6, 2e6],
            }],
            ..RunSummary::default()
        }
        .with_flent(labels)
    }

    #[test]
    fn labelled_flows_take_flents_names_and_every_series_has_one_value_per_x() {
        let r = run(
            vec![
                flow("bulk", vec![1e6], vec![None, Some(20.0)]),
                flow("ping", vec![1e3; 3], vec![Some(40.0), None, Some(42.0)]),
                flow("voip", vec![8e4; 3], vec![Some(5.0); 3]),
            ],
            flent::nearest(&[
                ("bulk", Role::TcpUpload),
                ("ping", Role::IcmpPing),
                ("voip", Role::Other),
            ]),
        );
        let v = to_json(&r).expect("labelled");
        assert_eq!(v["metadata"]["NAME"], "tcp_upload");
        assert_eq!(v["x_values"].as_array().map(Vec::len), Some(3));
        let res = &v["results"];
        assert_eq!(res["TCP upload"], json!([1.0, null, null]));
        assert_eq!(res["Ping (ms) ICMP"], json!([40.0, null, 42.0]));
        // A TCP flow's one-way delay stays beside Flent's series; a ping has no goodput series.
        assert_eq!(res["bulk latency"], json!([null, 20.0, null]));
        assert!(res.get("ping goodput").is_none() && res.get("ping latency").is_none());
        assert_eq!(res["voip goodput"], json!([0.08, 0.08, 0.08]));
        assert_eq!(res["up tx"], json!([2.0, 2.0, 2.0]));
        let meta = &v["metadata"]["SERIES_META"];
        assert_eq!(meta["Ping (ms) ICMP"]["UNITS"], "ms");
        assert_eq!(meta["TCP upload"]["FLOW"], "bulk");
        // Raw values: the non-null points with their times (Flent plots nothing without them).
        let raw = v["raw_values"]["Ping (ms) ICMP"].as_array().expect("raw");
        assert_eq!(raw.len(), 2);
        assert_eq!(raw[1]["val"], 42.0);
        assert!((raw[1]["t"].as_f64().unwrap_or(0.0) - 0.2).abs() < 1e-9);
        assert_eq!(v["metadata"]["T0"], EPOCH);
    }

    #[test]
    fn aggregates_are_computed_per_bin_as_flent_does_and_parameters_written() {
        let r = run(
            vec![
                flow("a", vec![1e6, 3e6, 0.0], vec![]),
                flow("b", vec![3e6, 0.0, 0.0], vec![]),
            ],
            flent::nearest(&[("a", Role::TcpUpload), ("b", Role::TcpUpload)]),
        );
        let v = to_json(&r).expect("labelled");
        assert_eq!(v["metadata"]["NAME"], "tcp_nup");
        assert_eq!(v["metadata"]["TEST_PARAMETERS"]["upload_streams"], "2");
        let res = &v["results"];
        assert_eq!(res["TCP upload::2"], json!([3.0, 0.0, 0.0]));
        assert_eq!(res["TCP upload sum"], json!([4.0, 3.0, 0.0]));
        assert_eq!(res["TCP upload avg"], json!([2.0, 1.5, 0.0]));
        // Jain's index: (1+3)^2 / (2 * 10) = 0.8; one flow alone 0.5; nothing sent: none.
        assert_eq!(res["TCP upload fairness"], json!([0.8, 0.5, null]));
        assert_eq!(
            v["metadata"]["SERIES_META"]["TCP upload fairness"]["UNITS"],
            "Idx"
        );
        assert!(v["raw_values"].get("TCP upload sum").is_none());
    }

    #[test]
    fn rrul_aggregates_cover_only_the_tests_data_series_and_skip_missing_ones() {
        let labels = FlentLabels::new(
            FlentTest::Rrul,
            [
                ("u", "TCP upload BE"),
                ("d", "TCP download EF"),
                ("p", "Ping (ms) ICMP"),
            ],
        )
        .with_delay(0.1);
        let r = run(
            vec![
                flow("u", vec![1e6; 3], vec![Some(9.0); 3]),
                flow("d", vec![2e6; 3], vec![]),
                flow("p", vec![], vec![Some(30.0); 3]),
            ],
            labels,
        );
        let v = to_json(&r).expect("labelled");
        let res = &v["results"];
        assert_eq!(res["TCP totals"], json!([3.0, 3.0, 3.0]));
        assert_eq!(res["TCP upload sum"], json!([1.0, 1.0, 1.0]));
        // `u latency` starts with neither prefix, so it is no input of `Ping (ms) avg`.
        assert_eq!(res["Ping (ms) avg"], json!([30.0, 30.0, 30.0]));
        assert_eq!(v["metadata"]["DELAY"], 0.1);
        assert!((v["metadata"]["LENGTH"].as_f64().unwrap_or(0.0) - 0.2).abs() < 1e-9);
    }

    #[test]
    fn a_run_without_labels_or_with_labels_that_do_not_fit_is_an_error() {
        let mut r = run(
            vec![flow("a", vec![1e6], vec![])],
            FlentLabels::new(FlentTest::Ping, Vec::<(String, String)>::new()),
        );
        r.flent = None;
        let e = to_json(&r).expect_err("unlabelled");
        assert!(e.contains("does not say which Flent test"), "{e}");
        let r = r.with_flent(FlentLabels::new(
            FlentTest::TcpUpload,
            [("zz", "TCP upload")],
        ));
        let e = to_json(&r).expect_err("no such flow");
        assert!(e.contains("\"zz\""), "{e}");
    }
}
