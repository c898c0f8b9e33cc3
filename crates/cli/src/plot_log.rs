//! `purple plot LOG --out DIR`: the decision log of `purple control` as the simulator's plots.
//! Each direction becomes two "flows" of a [`sim::RunSummary`]: its achieved throughput (with
//! the measured queueing delay as latency) and its shaper rate, binned per second.

use daemon::log::{parse_line, DirRecord, Record};
use sim::{FlowSeries, FlowSummary, RunSummary};
use std::path::{Path, PathBuf};

/// Bin width, seconds.
const BIN_S: f64 = 1.0;

/// Builds the summary from the log's JSON-lines text, read through its typed records
/// ([`daemon::log::Record`]; lines that are not decisions are skipped, a line that is not a log
/// record is an error naming it).
pub fn summary_from_log(name: &str, text: &str) -> Result<RunSummary, String> {
    let mut rows: Vec<(f64, DirRecord, DirRecord)> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        match parse_line(line).map_err(|e| format!("line {}: {e}", i + 1))? {
            Some(Record::Decision { t, down, up }) => rows.push((t, down, up)),
            _ => continue,
        }
    }
    if rows.is_empty() {
        return Err("no decision lines in the log".to_string());
    }
    let t0 = rows.iter().map(|r| r.0).fold(f64::INFINITY, f64::min);
    let t1 = rows.iter().map(|r| r.0).fold(f64::NEG_INFINITY, f64::max);
    let bins = (((t1 - t0) / BIN_S).floor() as usize + 1).min(10_000_000);
    let mut flows = Vec::new();
    for dir in ["down", "up"] {
        // (sum, n) per bin for throughput, rate and delay.
        let mut tp = vec![(0.0, 0u32); bins];
        let mut rate = vec![(0.0, 0u32); bins];
        let mut delay = vec![(0.0, 0u32); bins];
        let mut samples = Vec::new();
        for (t, down, up) in &rows {
            let b = (((t - t0) / BIN_S) as usize).min(bins - 1);
            let d = if dir == "down" { down } else { up };
            tp[b].0 += d.throughput as f64 * 8.0;
            tp[b].1 += 1;
            rate[b].0 += d.rate as f64 * 8.0;
            rate[b].1 += 1;
            if let Some(x) = d.delay_ms {
                delay[b].0 += x;
                delay[b].1 += 1;
                samples.push(x);
            }
        }
        let mean = |v: &[(f64, u32)]| -> Vec<Option<f64>> {
            v.iter()
                .map(|&(s, n)| (n > 0).then(|| s / f64::from(n)))
                .collect()
        };
        let fill = |v: Vec<Option<f64>>| -> Vec<f64> {
            let mut last = 0.0;
            v.into_iter()
                .map(|x| {
                    last = x.unwrap_or(last);
                    last
                })
                .collect()
        };
        let tp_s = fill(mean(&tp));
        let avg = tp_s.iter().sum::<f64>() / tp_s.len() as f64;
        flows.push(FlowSummary {
            name: format!("{dir} throughput"),
            goodput_bps: avg,
            series: FlowSeries {
                goodput_bps: tp_s,
                latency_ms: mean(&delay),
            },
            latency_samples_ms: samples,
            ..FlowSummary::default()
        });
        let rate_s = fill(mean(&rate));
        flows.push(FlowSummary {
            name: format!("{dir} shaper rate"),
            goodput_bps: rate_s.iter().sum::<f64>() / rate_s.len() as f64,
            series: FlowSeries {
                latency_ms: vec![None; rate_s.len()],
                goodput_bps: rate_s,
            },
            ..FlowSummary::default()
        });
    }
    Ok(RunSummary {
        name: name.to_string(),
        duration_s: t1 - t0,
        bin_s: BIN_S,
        flows,
        ..RunSummary::default()
    })
}

/// Reads `log` (and nothing else; rotated parts are separate files) and writes the plots.
pub fn run(log: &Path, out: &Path) -> Result<String, String> {
    let text = std::fs::read_to_string(log).map_err(|e| format!("{}: {e}", log.display()))?;
    let stem = crate::plots::file_stem(
        &log.file_stem()
            .map(|s| s.to_string_lossy().to_string())
            .unwrap_or_default(),
    );
    let summary = summary_from_log(&stem, &text)?;
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    let files: Vec<PathBuf> = crate::plots::write_all(&summary, out, &stem)?;
    Ok(files.iter().map(|p| format!("{}\n", p.display())).collect())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn log_becomes_binned_throughput_rate_and_delay_series() {
        let d = |rate: u64, throughput: u64, delay_ms: Option<f64>| DirRecord {
            rate,
            applied: false,
            reason: "hold".into(),
            rule: "hold".into(),
            throughput,
            cake_backlog: None,
            delay_ms,
            passive_ms: None,
            source: "probes".into(),
        };
        let mut text = String::from("{\"t\":0,\"event\":\"reloaded\"}\n");
        for i in 0..30 {
            let r = Record::Decision {
                t: i as f64 * 0.1,
                down: d(2_500_000, 1_250_000, Some(f64::from(i % 3))),
                up: d(1_000_000, 0, None),
            };
            text.push_str(&serde_json::to_string(&r).unwrap());
            text.push('\n');
        }
        let s = summary_from_log("x", &text).unwrap();
        assert_eq!(s.flows.len(), 4);
        assert_eq!(s.flows[0].series.goodput_bps.len(), 3);
        assert_eq!(s.flows[0].series.goodput_bps[0], 10_000_000.0);
        assert_eq!(s.flows[1].series.goodput_bps[2], 20_000_000.0);
        assert_eq!(s.flows[0].series.latency_ms[0], Some(0.9));
        assert_eq!(s.flows[2].series.latency_ms[0], None);
        let dir = std::env::temp_dir().join(format!("purple-plotlog-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let files = crate::plots::write_all(&s, &dir, "x").unwrap();
        assert!(files.iter().all(|f| f.exists()));
        let _ = std::fs::remove_dir_all(&dir);
        assert!(summary_from_log("x", "{\"event\":\"reloaded\"}").is_err());
        let e = summary_from_log("x", &format!("{text}garbage\n")).unwrap_err();
        assert!(e.starts_with("line 32:"), "{e}");
    }
}
