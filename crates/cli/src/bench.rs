//! `purple bench engine`: the criterion benchmark's loop (`cake::bench`) timed without criterion.

use cake::bench::{BenchQdisc, EngineBench, FLOW_COUNTS};
use std::time::{Duration, Instant};

/// One measured case.
#[derive(Clone, Debug)]
pub struct EngineResult {
    /// The qdisc's tc name.
    pub qdisc: &'static str,
    /// Concurrently active flows.
    pub flows: usize,
    /// Wall-clock nanoseconds per packet (one enqueue plus one dequeue): the median of
    /// [`SLICES`] equal time slices, so a burst of load from elsewhere on the machine moves it
    /// less than a single long average.
    pub ns_per_packet: f64,
    /// The fastest slice.
    pub min_ns: f64,
    /// The slowest slice.
    pub max_ns: f64,
    /// Packets the qdisc dropped during the measurement (recycled into the standing queue).
    pub dropped: u64,
}

/// Steps between clock reads.
const BATCH: u64 = 4096;

/// Time slices per case (the reported figure is their median).
pub const SLICES: usize = 5;

/// Runs every (qdisc, flows) case for about `seconds` of wall-clock time each; `qdisc` and
/// `flows`, when given, restrict the cases to that qdisc name and that flow count.
// The CLI is the I/O edge: timing a benchmark is exactly what the wall clock is for.
#[allow(clippy::disallowed_methods)]
pub fn run_engine(seconds: f64, qdisc: Option<&str>, flows: Option<usize>) -> Vec<EngineResult> {
    let budget = Duration::from_secs_f64(seconds.clamp(0.001, 3600.0));
    let mut out = Vec::new();
    let counts: Vec<usize> = match flows {
        Some(n) => vec![n.max(1)],
        None => FLOW_COUNTS.to_vec(),
    };
    for kind in BenchQdisc::ALL {
        if qdisc.is_some_and(|q| q != kind.name()) {
            continue;
        }
        for &flows in &counts {
            let mut b = EngineBench::new(kind, flows);
            let slice = budget / SLICES as u32;
            let mut per_slice = Vec::with_capacity(SLICES);
            for _ in 0..SLICES {
                let steps_before = b.steps();
                let start = Instant::now();
                let mut elapsed;
                loop {
                    b.run(BATCH);
                    elapsed = start.elapsed();
                    if elapsed >= slice {
                        break;
                    }
                }
                let steps = (b.steps() - steps_before).max(1);
                per_slice.push(elapsed.as_nanos() as f64 / steps as f64);
            }
            per_slice.sort_by(f64::total_cmp);
            out.push(EngineResult {
                qdisc: kind.name(),
                flows,
                ns_per_packet: per_slice[SLICES / 2],
                min_ns: per_slice[0],
                max_ns: per_slice[SLICES - 1],
                dropped: b.dropped(),
            });
        }
    }
    out
}

/// The results as `{"benchmarks":[{"qdisc":..,"flows":..,"ns_per_packet":..}, ...]}`.
pub fn to_json(results: &[EngineResult]) -> String {
    let list: Vec<serde_json::Value> = results
        .iter()
        .map(|r| {
            serde_json::json!({
                "qdisc": r.qdisc,
                "flows": r.flows,
                "ns_per_packet": (r.ns_per_packet * 100.0).round() / 100.0,
            })
        })
        .collect();
    serde_json::json!({ "benchmarks": list }).to_string()
}

/// The results as a text table.
pub fn to_table(results: &[EngineResult]) -> String {
    let mut s = format!(
        "{:<10} {:>7} {:>10} {:>15} {:>8} {:>10}\n",
        "qdisc", "flows", "ns/packet", "(min..max)", "Mpps", "dropped"
    );
    for r in results {
        s += &format!(
            "{:<10} {:>7} {:>10.1} {:>15} {:>8.2} {:>10}\n",
            r.qdisc,
            r.flows,
            r.ns_per_packet,
            format!("({:.0}..{:.0})", r.min_ns, r.max_ns),
            1_000.0 / r.ns_per_packet,
            r.dropped
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_has_exactly_the_documented_shape() {
        let r = [EngineResult {
            qdisc: "cake",
            flows: 1,
            ns_per_packet: 42.123,
            min_ns: 40.0,
            max_ns: 45.0,
            dropped: 3,
        }];
        assert_eq!(
            to_json(&r),
            r#"{"benchmarks":[{"qdisc":"cake","flows":1,"ns_per_packet":42.12}]}"#
        );
    }
}
