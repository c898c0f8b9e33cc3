//! The namespace lab: the seeds' testbeds built from network namespaces and veth pairs, real
//! kernel TCP (CUBIC per socket, ECN on) and UDP through purple's bridge, with results in the
//! simulator's [`sim::RunSummary`] form so `purple lab run` and `purple sim` report alike.
//!
//! **What this crate owns**: namespace testbeds, traffic tools, and the QEMU reference-kernel
//! runs ([`kernel`]). **What it must not do**: leave a namespace or process
//! behind on any exit path; send traffic outside its namespaces; hold algorithms (the qdiscs,
//! the link model and the controller are the other crates').
//!
//! Topology (one set of namespaces per run, named `plab-<pid>-<n>-<role>`):
//!
//! ```text
//! client c0 ── r0 router r1 ── l0 linkem l1 ── s0 server
//!  10.78.0.1    (purple bridge:   (purple linkem: delay,     10.78.0.2
//!                egress = up,      capacity; or a kernel
//!                ingress = down)   bridge when linkem is absent)
//! ```
//!
//! The router runs [`dataplane::Bridge`] in a thread of this process that entered its
//! namespace; the link emulator is a pluggable stage ([`DelayStage`]). Traffic tools
//! ([`traffic`]) are threads that entered the client or server namespace, so all traffic stays
//! inside the namespaces. Namespaces are deleted when a run ends, on errors, and on
//! SIGINT/SIGTERM ([`os::netns::install_signal_cleanup`]).
//!
//! Measurement: TCP goodput is the receiver's byte count sampled every 100 ms (the steady
//! window skips the first `min(S/6, 5)` s of load); latency probes (system `ping` for ICMP, our
//! UDP ping-pong per DSCP) run from the idle phase on, and induced latency is each loaded sample
//! minus the probe's idle median. VoIP-like UDP measures exact one-way delay (one clock).
//! Beside them every run records how the host kept time ([`host`]): a stalled host delays the
//! probes as a queue would, and a run says so in its warnings.
//!
//! Controllers: a contender's CAKE rates may be driven by `purple control` ([`control`]) or by
//! the real cake-autorate through the tc shim ([`autorate`]), both in the router namespace.
//!
//! Links: what `purple linkem` plays is a [`link::Link`] (per direction a rate, a schedule or a
//! recorded trace, delays, buffer), built in for the scenarios ([`scenario::all`]; the radio's
//! is read from `scenarios/links/lab-radio.toml`) or from a user's link file in the simulator's
//! format ([`scenario::Scenario::for_link`], `purple lab run --link FILE`).
//!
//! Stages: [`RouterStage::Purple`] (our bridge) or [`RouterStage::Kernel`] (Linux qdiscs by
//! `tc`, used inside the reference kernel by [`kernel`]); [`DelayStage::Linkem`] (`purple
//! linkem`, when built in), [`DelayStage::Netem`] (reference kernel) or
//! [`DelayStage::Passthrough`] (no delay: the host kernel has no netem, and until `purple
//! linkem` is merged the base RTT is ~0.2 ms instead of the seeds' 90 ms).

#![cfg_attr(test, allow(clippy::unwrap_used))]
#![forbid(unsafe_code)]

pub mod analysis;
pub mod autorate;
pub mod bench_control;
mod config;
pub mod control;
pub mod cost;
mod driver;
pub mod host;
pub mod kernel;
pub mod link;
pub mod readback;
mod results;
pub mod scenario;
mod testbed;
pub mod traffic;

mod error;
pub use config::{linkem_available, DelayStage, Fault, LabOpts, RouterStage};
pub use driver::run_one;
pub use error::Error;
pub use results::{Induced, LabRun, ProbeLatency};

use std::time::Duration;

const CLIENT: &str = "10.78.0.1";
const SERVER: &str = "10.78.0.2";
/// Six more addresses of the server that the kernel answers ICMP echo on: the reflectors of
/// the real cake-autorate (its default is six pingers) and, beside it, of our daemon
/// ([`LabOpts::echo_reflectors`]).
pub const ECHO_REFLECTORS: [&str; 6] = [
    "10.78.0.20",
    "10.78.0.21",
    "10.78.0.22",
    "10.78.0.23",
    "10.78.0.24",
    "10.78.0.25",
];
/// Sampling period of goodput and of the series (the brief's 100 ms).
const BIN: Duration = Duration::from_millis(100);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::script_points;
    use crate::results::latency_ms;
    use crate::scenario::ProbeId;
    use sim::RunSummary;
    use std::path::PathBuf;

    #[test]
    fn the_steps_trace_delivers_each_rate_for_its_period() {
        let s = sim::RateSchedule::parse("0 step 120mbit\n2 step 60mbit\n").expect("parses");
        let text = crate::link::mahimahi_of(&s, 4.0).expect("renders");
        let ms: Vec<u64> = text.lines().map(|l| l.parse().expect("ms")).collect();
        assert!(ms.windows(2).all(|w| w[0] <= w[1]), "non-decreasing");
        let first = ms.iter().filter(|&&t| t <= 2000).count() as f64;
        let second = ms.iter().filter(|&&t| t > 2000).count() as f64;
        // 120 Mbit/s for 2 s = 20,000 packets of 1500 bytes; 60 Mbit/s half that.
        assert!((first - 20_000.0).abs() <= 1.0, "{first}");
        assert!((second - 10_000.0).abs() <= 1.0, "{second}");
        assert_eq!(ms.last().copied(), Some(4000));
    }

    #[test]
    fn the_scripts_tc_calls_become_a_rate_trace_on_the_runs_clock() {
        let call = |t: f64, dev: &str, bit_s: u64, error: Option<&str>| autorate::ShimCall {
            t,
            dev: dev.into(),
            bit_s,
            error: error.map(String::from),
        };
        let calls = [
            call(1000.5, "r0", 100_000_000, None),
            call(1000.5, "r1", 45_000_000, None),
            call(1002.0, "r0", 90_000_000, None),
            call(1002.5, "r0", 1, Some("refused")),
            call(1003.0, "eth9", 5, None),
            call(1004.0, "r1", 40_000_000, None),
        ];
        let p = script_points(&calls, 1000.0);
        let got: Vec<(f64, f64, f64)> = p.iter().map(|p| (p.t, p.down_mbit, p.up_mbit)).collect();
        assert_eq!(
            got,
            vec![
                (0.5, 100.0, 45.0),
                (0.5, 100.0, 45.0),
                (2.0, 90.0, 45.0),
                (4.0, 90.0, 40.0)
            ]
        );
        assert!(p.iter().all(|p| p.down_throughput_mbit.is_none()));
    }

    /// A lab run with only what the comparison reads: goodput, a probe's p99, the capacity
    /// series and a download rate trace `(t, Mbit/s)`.
    fn run_with(name: &str, down: f64, p99: f64, caps: Vec<f64>, rates: &[(f64, f64)]) -> LabRun {
        LabRun {
            contender: name.into(),
            test: "rrul_voip".into(),
            summary: RunSummary {
                name: name.into(),
                duration_s: 10.0,
                bin_s: 0.1,
                flows: Vec::new(),
                links: Vec::new(),
                qdiscs: Vec::new(),
                flent: None,
                loaded: Some(sim::LoadedSummary {
                    throughput_mbit: controller::PerDir::new(down, 30.0),
                    ..sim::LoadedSummary::default()
                }),
            },
            induced: vec![ProbeLatency {
                id: ProbeId::Icmp,
                name: ProbeId::Icmp.label(),
                flow: 0,
                induced: Induced {
                    p99,
                    ..Induced::default()
                },
            }],
            delay_stage: String::new(),
            warnings: Vec::new(),
            namespaces: Vec::new(),
            capacity_down_mbit: caps,
            control: Some(control::ControlTrace {
                algorithm: name.into(),
                config: PathBuf::new(),
                log: PathBuf::new(),
                points: rates
                    .iter()
                    .map(|&(t, r)| control::ControlPoint {
                        t,
                        down_mbit: r,
                        up_mbit: 40.0,
                        down_throughput_mbit: None,
                        down_delay_ms: None,
                        down_applied: true,
                    })
                    .collect(),
                actuator_errors: 0,
                readback: Default::default(),
            }),
            host: None,
        }
    }

    #[test]
    fn two_laws_rate_traces_are_compared_bin_by_bin_over_the_window() {
        // 4 s of 100 Mbit/s capacity; the port holds 100, the script 100 then 80 from 2 s.
        let caps = vec![100.0; 40];
        let port = run_with("port", 95.0, 10.0, caps.clone(), &[(0.0, 100.0)]);
        let script = run_with(
            "script",
            90.0,
            30.0,
            caps,
            &[(0.0, 100.0), (2.0, 80.0), (3.0, 80.0)],
        );
        let c = autorate::compare_laws(&port, &script, 1.0, 3.0).expect("comparable");
        // Bins 1.05 .. 2.95: 10 at 0 difference, 10 at -20.
        assert!((c.mean_diff_mbit + 10.0).abs() < 1e-9, "{c:?}");
        assert!((c.mean_abs_diff_mbit - 10.0).abs() < 1e-9, "{c:?}");
        assert!((c.share_within_10pct - 0.5).abs() < 1e-9, "{c:?}");
        assert!((c.rows[1].mean_down_rate_mbit - 90.0).abs() < 1e-9);
        assert!((c.rows[1].rate_over_capacity - 0.9).abs() < 1e-9);
        assert_eq!((c.rows[0].down_changes, c.rows[1].down_changes), (0, 1));
        assert_eq!(c.rows[1].icmp_p99_ms, Some(30.0));
        assert_eq!(c.rows[1].udp_p99_ms, None);
        // No bin in the window, or no trace: an error, not a comparison of nothing.
        assert!(autorate::compare_laws(&port, &script, 5.0, 6.0).is_err());
        let mut bare = script.clone();
        bare.control = None;
        assert!(autorate::compare_laws(&port, &bare, 1.0, 3.0).is_err());
    }

    #[test]
    fn latency_summary_of_known_samples() {
        let l = latency_ms(&[4.0, 1.0, 3.0, 2.0]).expect("four samples");
        assert_eq!((l.min, l.p50, l.max), (1.0, 2.0, 4.0));
        assert!((l.mean - 2.5).abs() < 1e-9);
        assert_eq!(latency_ms(&[]), None, "no samples, no latency");
    }
}
