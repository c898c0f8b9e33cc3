//! `purple bench engine`: the criterion benchmark's loop (`cake::bench`) timed without criterion;
//! `purple bench sim`: the simulator workloads of `sim::bench`.

use cake::bench::{BenchQdisc, EngineBench, FLOW_COUNTS};
use qdisc::quantile;
use sim::bench::{SimBench, SimWorkload};
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
    /// This case's cost over pfifo's at the same flow count, measured in the same run: the
    /// median over [`SLICES`] rounds of the ratio of this case's slice to the pfifo slice run
    /// right beside it (so load from elsewhere on the machine mostly cancels).
    pub vs_pfifo: f64,
}

/// Steps between clock reads.
const BATCH: u64 = 4096;

/// Time slices per case (the reported figure is their median).
pub const SLICES: usize = 5;

/// Why `purple bench engine` cannot run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownQdisc(pub String);

impl std::fmt::Display for UnknownQdisc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = BenchQdisc::ALL.iter().map(|k| k.name()).collect();
        write!(
            f,
            "unknown qdisc {:?} (accepted: {})",
            self.0,
            names.join(", ")
        )
    }
}

/// Runs `b` for one slice of `slice` wall-clock time; returns ns per step.
// The CLI is the I/O edge: timing a benchmark is exactly what the wall clock is for.
#[allow(clippy::disallowed_methods)]
fn time_slice(b: &mut EngineBench, slice: Duration) -> f64 {
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
    elapsed.as_nanos() as f64 / steps as f64
}

/// The upper median of `v` (sorted in place); NaN when `v` is empty.
fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    quantile::rounded_rank(v, 0.5).unwrap_or(f64::NAN)
}

/// Runs every (qdisc, flows) case for about `seconds` of wall-clock time each; `qdisc` and
/// `flows`, when given, restrict the cases to that qdisc name and that flow count. At each flow
/// count, pfifo runs as the reference in slices interleaved with every other case's, so each
/// case's [`EngineResult::vs_pfifo`] compares costs measured side by side.
pub fn run_engine(
    seconds: f64,
    qdisc: Option<&str>,
    flows: Option<usize>,
) -> Result<Vec<EngineResult>, UnknownQdisc> {
    let kinds: Vec<BenchQdisc> = match qdisc {
        None => BenchQdisc::ALL.to_vec(),
        Some(name) => match BenchQdisc::ALL.into_iter().find(|k| k.name() == name) {
            Some(k) => vec![k],
            None => return Err(UnknownQdisc(name.to_string())),
        },
    };
    let budget = Duration::from_secs_f64(seconds.clamp(0.001, 3600.0));
    let slice = budget / SLICES as u32;
    let counts: Vec<usize> = match flows {
        Some(n) => vec![n.max(1)],
        None => FLOW_COUNTS.to_vec(),
    };
    let mut out = Vec::new();
    for &flows in &counts {
        let mut reference = EngineBench::new(BenchQdisc::Pfifo, flows);
        let mut cases: Vec<(BenchQdisc, EngineBench)> = kinds
            .iter()
            .filter(|&&k| k != BenchQdisc::Pfifo)
            .map(|&k| (k, EngineBench::new(k, flows)))
            .collect();
        let mut ref_ns = Vec::with_capacity(SLICES);
        let mut case_ns = vec![Vec::with_capacity(SLICES); cases.len()];
        let mut case_ratio = vec![Vec::with_capacity(SLICES); cases.len()];
        for _ in 0..SLICES {
            let r = time_slice(&mut reference, slice);
            ref_ns.push(r);
            for (i, (_, b)) in cases.iter_mut().enumerate() {
                let ns = time_slice(b, slice);
                case_ns[i].push(ns);
                case_ratio[i].push(ns / r.max(1e-9));
            }
        }
        let summarise = |kind: BenchQdisc, b: &EngineBench, ns: &mut [f64], ratio: f64| {
            let ns_per_packet = median(ns);
            EngineResult {
                qdisc: kind.name(),
                flows,
                ns_per_packet,
                min_ns: ns[0],
                max_ns: ns[ns.len() - 1],
                dropped: b.dropped(),
                vs_pfifo: ratio,
            }
        };
        if kinds.contains(&BenchQdisc::Pfifo) {
            out.push(summarise(BenchQdisc::Pfifo, &reference, &mut ref_ns, 1.0));
        }
        for (i, (kind, b)) in cases.iter().enumerate() {
            let ratio = median(&mut case_ratio[i]);
            out.push(summarise(*kind, b, &mut case_ns[i], ratio));
        }
    }
    // Group by qdisc (in `BenchQdisc::ALL` order), then flows, as before.
    out.sort_by_key(|r| {
        (
            BenchQdisc::ALL.iter().position(|k| k.name() == r.qdisc),
            r.flows,
        )
    });
    Ok(out)
}

/// The results as `{"benchmarks":[{"qdisc":..,"flows":..,"ns_per_packet":..,
/// "vs_pfifo":..}, ...]}`.
pub fn to_json(results: &[EngineResult]) -> String {
    let list: Vec<serde_json::Value> = results
        .iter()
        .map(|r| {
            serde_json::json!({
                "qdisc": r.qdisc,
                "flows": r.flows,
                "ns_per_packet": (r.ns_per_packet * 100.0).round() / 100.0,
                "vs_pfifo": (r.vs_pfifo * 100.0).round() / 100.0,
            })
        })
        .collect();
    serde_json::json!({ "benchmarks": list }).to_string()
}

/// The results as a text table.
pub fn to_table(results: &[EngineResult]) -> String {
    let mut s = format!(
        "{:<10} {:>7} {:>10} {:>15} {:>8} {:>10} {:>8}\n",
        "qdisc", "flows", "ns/packet", "(min..max)", "Mpps", "dropped", "x pfifo"
    );
    for r in results {
        s += &format!(
            "{:<10} {:>7} {:>10.1} {:>15} {:>8.2} {:>10} {:>8.2}\n",
            r.qdisc,
            r.flows,
            r.ns_per_packet,
            format!("({:.0}..{:.0})", r.min_ns, r.max_ns),
            1_000.0 / r.ns_per_packet,
            r.dropped,
            r.vs_pfifo
        );
    }
    s += "x pfifo: cost over pfifo at the same flow count, slices run side by side (median)\n";
    s
}

/// One simulator workload, run once to its end.
#[derive(Clone, Debug)]
pub struct SimResult {
    /// The workload's name.
    pub workload: &'static str,
    /// Its flows.
    pub flows: usize,
    /// Virtual seconds simulated.
    pub simulated_s: f64,
    /// Wall-clock seconds the run took.
    pub wall_s: f64,
    /// CPU seconds the run took (this thread's run time from `/proc/thread-self/schedstat`;
    /// the wall-clock time where that is unavailable).
    pub cpu_s: f64,
    /// Simulated packets: transmissions summed over all links.
    pub packets: u64,
    /// Events processed.
    pub events: u64,
    /// Peak resident memory of the process during the run in KiB (`VmHWM`, reset before the run
    /// through `/proc/self/clear_refs` where the kernel allows it, else the process's peak so
    /// far); `None` where `/proc` is unavailable.
    pub peak_rss_kib: Option<u64>,
    /// Flows that delivered data.
    pub flows_with_progress: usize,
    /// Aggregate goodput in bytes per virtual second.
    pub goodput_bps: f64,
}

impl SimResult {
    /// Simulated packets per CPU second.
    pub fn packets_per_cpu_s(&self) -> f64 {
        self.packets as f64 / self.cpu_s.max(1e-9)
    }
    /// Events per CPU second.
    pub fn events_per_cpu_s(&self) -> f64 {
        self.events as f64 / self.cpu_s.max(1e-9)
    }
    /// Virtual seconds simulated per CPU second.
    pub fn speedup(&self) -> f64 {
        self.simulated_s / self.cpu_s.max(1e-9)
    }
}

/// This thread's CPU time in nanoseconds, if the kernel reports it.
fn thread_cpu_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

/// Resets the process's peak RSS (`VmHWM`) to its current RSS; false where not allowed.
fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// The process's peak RSS in KiB.
fn peak_rss_kib() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// What [`measure_cpu`] measured.
#[derive(Clone, Copy, Debug)]
pub struct CpuMeasure {
    /// This thread's CPU seconds (the wall-clock time where the kernel does not report it).
    pub cpu_s: f64,
    /// Wall-clock seconds.
    pub wall_s: f64,
    /// Peak resident memory of the process during the call in KiB (see
    /// [`SimResult::peak_rss_kib`]).
    pub peak_rss_kib: Option<u64>,
}

/// Runs `f`, timing it in this thread's CPU time and wall-clock time, with the process's peak
/// memory reset before it where the kernel allows.
// The CLI is the I/O edge: timing a benchmark is exactly what the wall clock is for.
#[allow(clippy::disallowed_methods)]
pub fn measure_cpu<T>(f: impl FnOnce() -> T) -> (T, CpuMeasure) {
    reset_peak_rss();
    let cpu0 = thread_cpu_ns();
    let start = Instant::now();
    let out = f();
    let wall = start.elapsed().as_secs_f64();
    let cpu = match (cpu0, thread_cpu_ns()) {
        (Some(a), Some(z)) if z > a => (z - a) as f64 / 1e9,
        _ => wall,
    };
    let m = CpuMeasure {
        cpu_s: cpu,
        wall_s: wall,
        peak_rss_kib: peak_rss_kib(),
    };
    (out, m)
}

/// Runs each workload of `sim::bench` (or only `only`) once to its end: for `seconds` of
/// virtual time when given, else each workload's default duration.
pub fn run_sim(seconds: Option<f64>, only: Option<SimWorkload>) -> Vec<SimResult> {
    let mut out = Vec::new();
    for w in SimWorkload::ALL {
        if only.is_some_and(|o| o != w) {
            continue;
        }
        let dur = match seconds {
            Some(s) => qdisc::Duration::from_secs_f64(s.clamp(1e-6, 86_400.0)),
            None => w.default_duration(),
        };
        let (b, m) = measure_cpu(|| {
            let mut b = SimBench::new(w, dur);
            b.run_to_end();
            b
        });
        out.push(SimResult {
            workload: w.name(),
            flows: w.flows(),
            simulated_s: b.simulated().as_secs_f64(),
            wall_s: m.wall_s,
            cpu_s: m.cpu_s,
            packets: b.link_transmissions(),
            events: b.events(),
            peak_rss_kib: m.peak_rss_kib,
            flows_with_progress: b.flows_with_progress(),
            goodput_bps: b.goodput_bps(),
        });
    }
    out
}

/// The results as `{"benchmarks":[{"workload":..,"flows":..,"simulated_s":..,"cpu_s":..,
/// "wall_s":..,"packets":..,"packets_per_cpu_s":..,"events":..,"events_per_cpu_s":..,
/// "sim_per_cpu":..,"peak_rss_kib":..,"flows_with_progress":..,"goodput_mbit":..}, ...]}`.
pub fn sim_to_json(results: &[SimResult]) -> String {
    let r3 = |x: f64| (x * 1000.0).round() / 1000.0;
    let list: Vec<serde_json::Value> = results
        .iter()
        .map(|r| {
            serde_json::json!({
                "workload": r.workload,
                "flows": r.flows,
                "simulated_s": r3(r.simulated_s),
                "cpu_s": r3(r.cpu_s),
                "wall_s": r3(r.wall_s),
                "packets": r.packets,
                "packets_per_cpu_s": r.packets_per_cpu_s().round(),
                "events": r.events,
                "events_per_cpu_s": r.events_per_cpu_s().round(),
                "sim_per_cpu": r3(r.speedup()),
                "peak_rss_kib": r.peak_rss_kib,
                "flows_with_progress": r.flows_with_progress,
                "goodput_mbit": r3(r.goodput_bps * 8.0 / 1e6),
            })
        })
        .collect();
    serde_json::json!({ "benchmarks": list }).to_string()
}

/// The results as a text table.
pub fn sim_to_table(results: &[SimResult]) -> String {
    let mut s = format!(
        "{:<13} {:>6} {:>7} {:>7} {:>7} {:>11} {:>11} {:>11} {:>8} {:>9} {:>9} {:>8}\n",
        "workload",
        "flows",
        "sim_s",
        "cpu_s",
        "wall_s",
        "packets",
        "pkts/cpu_s",
        "events/s",
        "sim/cpu",
        "peak_MiB",
        "progress",
        "Mbit/s"
    );
    for r in results {
        s += &format!(
            "{:<13} {:>6} {:>7.2} {:>7.3} {:>7.3} {:>11} {:>11.0} {:>11.0} {:>8.2} {:>9} {:>9} {:>8.1}\n",
            r.workload,
            r.flows,
            r.simulated_s,
            r.cpu_s,
            r.wall_s,
            r.packets,
            r.packets_per_cpu_s(),
            r.events_per_cpu_s(),
            r.speedup(),
            r.peak_rss_kib
                .map_or("-".to_string(), |k| format!("{:.1}", k as f64 / 1024.0)),
            r.flows_with_progress,
            r.goodput_bps * 8.0 / 1e6
        );
    }
    s += "packets = transmissions summed over all links (a packet crossing two links counts twice)\n";
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sim_json_has_exactly_the_documented_keys() {
        let r = [SimResult {
            workload: "udp-cake",
            flows: 4,
            simulated_s: 1.0,
            wall_s: 0.5,
            cpu_s: 0.25,
            packets: 1000,
            events: 3000,
            peak_rss_kib: Some(2048),
            flows_with_progress: 4,
            goodput_bps: 1.25e6,
        }];
        assert_eq!(
            sim_to_json(&r),
            r#"{"benchmarks":[{"workload":"udp-cake","flows":4,"simulated_s":1.0,"cpu_s":0.25,"wall_s":0.5,"packets":1000,"packets_per_cpu_s":4000.0,"events":3000,"events_per_cpu_s":12000.0,"sim_per_cpu":4.0,"peak_rss_kib":2048,"flows_with_progress":4,"goodput_mbit":10.0}]}"#
        );
    }

    #[test]
    fn tiny_sim_run_moves_packets_for_every_workload_but_the_10k_one() {
        let r = run_sim(Some(0.05), Some(SimWorkload::UdpCake));
        assert_eq!(r.len(), 1);
        assert!(r[0].packets > 100, "{:?}", r[0]);
        assert!(r[0].events >= r[0].packets);
        assert_eq!(r[0].flows_with_progress, 4);
    }

    #[test]
    fn json_has_exactly_the_documented_shape() {
        let r = [EngineResult {
            qdisc: "cake",
            flows: 1,
            ns_per_packet: 42.123,
            min_ns: 40.0,
            max_ns: 45.0,
            dropped: 3,
            vs_pfifo: 2.345,
        }];
        assert_eq!(
            to_json(&r),
            r#"{"benchmarks":[{"qdisc":"cake","flows":1,"ns_per_packet":42.12,"vs_pfifo":2.35}]}"#
        );
    }

    #[test]
    fn engine_run_measures_pfifo_beside_the_chosen_qdisc() {
        let r = run_engine(0.01, Some("codel"), Some(16)).expect("known qdisc");
        assert_eq!(r.len(), 1, "{r:?}");
        assert_eq!((r[0].qdisc, r[0].flows), ("codel", 16));
        assert!(r[0].ns_per_packet > 0.0 && r[0].vs_pfifo > 0.0, "{r:?}");
        let both = run_engine(0.01, None, Some(4)).expect("all qdiscs");
        let names: Vec<&str> = both.iter().map(|r| r.qdisc).collect();
        assert_eq!(
            names,
            ["cake", "pfifo", "bfifo", "codel", "fq_codel", "pie", "dualpi2"]
        );
        let pfifo = &both[1];
        assert_eq!(pfifo.vs_pfifo, 1.0);
        let e = run_engine(0.01, Some("sfq2"), None).expect_err("unknown qdisc");
        assert!(e.to_string().contains("accepted: cake, pfifo"), "{e}");
    }
}
