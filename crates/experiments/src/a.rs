//! Experiments of evaluation.md section A: the Piece of CAKE paper (Høiland-Jørgensen, Täht,
//! Morton, 2018), 10 Mbit/s symmetric with 50 ms base RTT unless stated.
//!
//! Each submodule builds one experiment; this module holds what they share (rates, the CAKE
//! contenders as `tc` argument lists, time scaling, share arithmetic).

use crate::testbed::{Dumbbell, DumbbellSpec};
use crate::{Experiment, RunOpts};
use cake::{AnyQdisc, CakeConfig};
use qdisc::{Duration, Instant};
use sim::RunSummary;

mod a1;
mod a2;
mod a3;
mod a4;
mod a5;
mod a6;

/// The section's experiments, in id order.
pub(crate) fn experiments() -> Vec<Experiment> {
    vec![
        Experiment {
            id: "A1",
            title: "Hash collision probability: 8-way set-associative vs direct-mapped (Fig. 1)",
            run: a1::run,
        },
        Experiment {
            id: "A2",
            title: "Host isolation: flows, dsthost, srchost, triple-isolate, FQ-CoDel (Fig. 3)",
            run: a2::run,
        },
        Experiment {
            id: "A3",
            title: "TCP flows on different DSCPs: diffserv3 vs besteffort (Fig. 4)",
            run: a3::run,
        },
        Experiment {
            id: "A4",
            title: "2 Mbit/s EF flow vs 32 bulk TCP flows (Fig. 5)",
            run: a4::run,
        },
        Experiment {
            id: "A5",
            title: "ACK filtering on a 30/1 Mbit/s link (Fig. 6)",
            run: a5::run,
        },
        Experiment {
            id: "A6",
            title: "Shaper accuracy and no burst after idle",
            run: a6::run,
        },
    ]
}

/// CAKE configured by `tc qdisc add ... cake ARGS`. The argument lists are this module's
/// constants; a list tc would reject falls back to CAKE's defaults, which makes the
/// experiment's claims fail visibly rather than panic.
fn cake(args: &[&str], seed: u64) -> AnyQdisc {
    let cfg = CakeConfig::from_tc_args(args).unwrap_or_default();
    AnyQdisc::cake(cfg, seed)
}

/// `s` seconds of the seed's timeline scaled by `opts.time_scale` (at least 1 ms).
fn scaled(opts: &RunOpts, s: f64) -> Instant {
    let ns = (s * opts.time_scale.max(0.0) * 1e9).round().max(1e6);
    Instant::from_nanos(ns as u64)
}

/// The symmetric 10 Mbit/s, 25 ms each way testbed of the paper with `clients` and `servers`,
/// `q` (built per direction) at both bottleneck egresses, and a 2-packet device buffer behind
/// the qdisc (a BQL-like hand-off, so the qdisc holds the queue).
fn paper_testbed(
    clients: usize,
    servers: usize,
    down_bit_s: u64,
    up_bit_s: u64,
    q: &dyn Fn(u64) -> AnyQdisc,
    seed: u64,
) -> Dumbbell {
    let mut spec = DumbbellSpec::new(down_bit_s, up_bit_s, Duration::from_millis(25));
    spec.clients = clients;
    spec.servers = servers;
    spec.buffer_packets = 2;
    spec.down_qdisc = Some(q(down_bit_s));
    spec.up_qdisc = Some(q(up_bit_s));
    Dumbbell::new(spec, seed)
}

/// Goodput (bits/s) of the flow named `name` in `run`, 0 if absent.
fn goodput(run: &RunSummary, name: &str) -> f64 {
    run.flow(name).map_or(0.0, |f| f.goodput_bps)
}

/// `x / sum(x)` for each element (zeros when the sum is 0).
fn shares(x: &[f64]) -> Vec<f64> {
    let s: f64 = x.iter().sum();
    x.iter()
        .map(|v| if s > 0.0 { v / s } else { 0.0 })
        .collect()
}

/// `x` with 3 decimals.
fn f3(x: f64) -> String {
    format!("{x:.3}")
}

/// `x` with 1 decimal.
fn f1(x: f64) -> String {
    format!("{x:.1}")
}
