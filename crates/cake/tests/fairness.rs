//! DRR++ fairness: N equal greedy flows through one shaper get equal shares (Jain's index at
//! least 0.99), in `flows` and `triple-isolate` modes.

mod common;

use cake::{Cake, CakeConfig, DiffservMode, FlowMode};
use common::{jain, udp, v4, Sim, Source};
use qdisc::Instant;

fn jain_for(n: usize, mode: FlowMode) -> f64 {
    let rate = 2_500_000u64; // 20 Mbit
    let cfg = CakeConfig {
        flow_mode: mode,
        diffserv: DiffservMode::Besteffort,
        ..CakeConfig::with_rate(rate)
    };
    let mut sim = Sim::new(Cake::new(cfg, n as u64));
    // Each flow offers twice its fair share; sources on four hosts talk to one server.
    let offered = 2.0 * rate as f64 / n as f64;
    let ids: Vec<usize> = (0..n)
        .map(|i| {
            let p = udp(
                v4(10, 0, 0, 1 + (i % 4) as u8),
                v4(192, 0, 2, 1),
                10_000 + i as u16,
                443,
                1514,
            );
            sim.add(Source::greedy(p, offered).jittered(0.2))
        })
        .collect();
    sim.run_until(Instant::from_secs(1));
    sim.reset_acct();
    sim.run_until(Instant::from_secs(4));
    let x: Vec<f64> = ids
        .iter()
        .map(|&i| sim.acct[i].delivered_bytes as f64)
        .collect();
    let total: f64 = x.iter().sum();
    common::assert_rel(total, 3.0 * rate as f64, 0.01, "link fully used");
    jain(&x)
}

#[test]
fn equal_greedy_flows_get_jain_index_above_0_99_in_flows_mode() {
    for n in [2, 8, 64] {
        let j = jain_for(n, FlowMode::Flows);
        assert!(j >= 0.99, "flows mode, {n} flows: Jain {j}");
    }
}

#[test]
fn equal_greedy_flows_get_jain_index_above_0_99_in_triple_isolate_mode() {
    for n in [2, 8, 64] {
        let j = jain_for(n, FlowMode::TripleIsolate);
        assert!(j >= 0.99, "triple-isolate, {n} flows: Jain {j}");
    }
}

#[test]
fn jain_index_detects_unfairness() {
    // The metric itself: one flow with everything is 1/n.
    assert!((jain(&[1.0, 0.0, 0.0, 0.0]) - 0.25).abs() < 1e-12);
    assert!((jain(&[3.0, 3.0, 3.0]) - 1.0).abs() < 1e-12);
}
