//! Host isolation, the CAKE paper's Fig. 3 setup: sources A and B, destinations A..D, flows
//! A->A, A->B, 2x A->C, B->C, B->D, all greedy. The expected share of each flow follows from the
//! algorithm for every flow mode:
//!
//! * flowblind: one FIFO, shares follow the offered load (all equal here): 1/6 each.
//! * srchost: one queue per source host, 1/2 each; inside a queue, shares follow the offered
//!   load: A's four flows 1/8 each, B's two 1/4 each.
//! * dsthost: one queue per destination, 1/4 each; the three flows to C share 1/4: 1/12 each.
//! * hosts: one queue per (src, dst) pair: five pairs, 1/5 each; the two A->C flows 1/10 each.
//! * flows: 1/6 each.
//! * dual-srchost: per-flow queues, quantum divided by the source's bulk flow count (A: 4,
//!   B: 2): A's flows 1/8 each, B's 1/4 each (each source gets 1/2).
//! * dual-dsthost: quantum divided by the destination's bulk count (A 1, B 1, C 3, D 1): 1/4,
//!   1/4, 1/12, 1/12, 1/12, 1/4.
//! * triple-isolate: quantum divided by max(source count, destination count): A's four flows
//!   by 4, B->C by max(2, 3) = 3, B->D by 2; shares are the weights 1/4, 1/4, 1/4, 1/4, 1/3, 1/2
//!   normalised by their sum 11/6: 3/22, 3/22, 3/22, 3/22, 2/11, 3/11 (the paper's Fig. 3).

mod common;

use cake::{Cake, CakeConfig, DiffservMode, FlowMode};
use common::{tuple, udp, v4, Sim, Source};
use qdisc::Instant;

const RATE: u64 = 2_500_000;

fn fig3_shares(mode: FlowMode) -> Vec<f64> {
    let cfg = CakeConfig {
        flow_mode: mode,
        diffserv: DiffservMode::Besteffort,
        ..CakeConfig::with_rate(RATE)
    };
    let mut sim = Sim::new(Cake::new(cfg, 42));
    let (sa, sb) = (v4(10, 0, 0, 1), v4(10, 0, 0, 2));
    let d = |i: u8| v4(192, 0, 2, i);
    let flows = [
        (sa, d(1)),
        (sa, d(2)),
        (sa, d(3)),
        (sa, d(3)),
        (sb, d(3)),
        (sb, d(4)),
    ];
    // Each flow offers half the link: more than any flow's share in any mode.
    let ids: Vec<usize> = flows
        .iter()
        .enumerate()
        .map(|(i, &(s, dst))| {
            let p = udp(s, dst, 20_000 + i as u16, 5001, 1514);
            sim.add(Source::greedy(p, RATE as f64 / 2.0).jittered(0.2))
        })
        .collect();
    sim.run_until(Instant::from_secs(2));
    sim.reset_acct();
    sim.run_until(Instant::from_secs(8));
    sim.shares(&ids)
}

/// Checks the shares of one mode. `queues` lists the flows that share one queue in this mode
/// (flows not listed have a queue of their own).
///
/// CAKE's scheduler decides each *queue's* share, so that is held to 5%. How flows sharing one
/// FIFO queue split it is not up to the scheduler: it follows the offered load only on average,
/// the rest depends on which packets the AQM happens to drop (here 80% of such a queue's
/// arrivals are dropped, so the split carries a few percent of noise). Those individual flows
/// are held to 12%; the aggregate of their queue still to 5%.
fn check(mode: FlowMode, want: [f64; 6], queues: &[&[usize]]) {
    let got = fig3_shares(mode);
    let shared = |i: usize| queues.iter().any(|q| q.contains(&i));
    for (i, (g, w)) in got.iter().zip(want.iter()).enumerate() {
        let tol = if shared(i) { 0.12 } else { 0.05 };
        assert!(
            (g - w).abs() <= tol * w,
            "{mode:?}: flow {i} share {g:.4}, expected {w:.4} (all: {got:.4?})"
        );
    }
    for q in queues {
        let g: f64 = q.iter().map(|&i| got[i]).sum();
        let w: f64 = q.iter().map(|&i| want[i]).sum();
        assert!(
            (g - w).abs() <= 0.05 * w,
            "{mode:?}: queue {q:?} share {g:.4}, expected {w:.4} (all: {got:.4?})"
        );
    }
}

#[test]
fn flowblind_shares_follow_offered_load() {
    check(FlowMode::Flowblind, [1.0 / 6.0; 6], &[&[0, 1, 2, 3, 4, 5]]);
}

#[test]
fn srchost_gives_each_source_host_half() {
    check(
        FlowMode::Srchost,
        [1.0 / 8.0, 1.0 / 8.0, 1.0 / 8.0, 1.0 / 8.0, 0.25, 0.25],
        &[&[0, 1, 2, 3], &[4, 5]],
    );
}

#[test]
fn dsthost_gives_each_destination_host_a_quarter() {
    check(
        FlowMode::Dsthost,
        [0.25, 0.25, 1.0 / 12.0, 1.0 / 12.0, 1.0 / 12.0, 0.25],
        &[&[2, 3, 4]],
    );
}

#[test]
fn hosts_gives_each_host_pair_a_fifth() {
    check(FlowMode::Hosts, [0.2, 0.2, 0.1, 0.1, 0.2, 0.2], &[&[2, 3]]);
}

#[test]
fn flows_gives_each_flow_a_sixth() {
    check(FlowMode::Flows, [1.0 / 6.0; 6], &[]);
}

#[test]
fn dual_srchost_gives_each_source_host_half_split_among_its_flows() {
    check(
        FlowMode::DualSrchost,
        [1.0 / 8.0, 1.0 / 8.0, 1.0 / 8.0, 1.0 / 8.0, 0.25, 0.25],
        &[],
    );
}

#[test]
fn dual_dsthost_gives_each_destination_host_a_quarter_split_among_its_flows() {
    check(
        FlowMode::DualDsthost,
        [0.25, 0.25, 1.0 / 12.0, 1.0 / 12.0, 1.0 / 12.0, 0.25],
        &[],
    );
}

#[test]
fn triple_isolate_scales_each_flow_by_its_busiest_host_as_in_paper_fig3() {
    let a = 3.0 / 22.0;
    check(
        FlowMode::TripleIsolate,
        [a, a, a, a, 2.0 / 11.0, 3.0 / 11.0],
        &[],
    );
}

/// Two LAN hosts behind a NAT (both leave with the router's address 203.0.113.1): host 1 runs
/// four flows, host 2 one, all to one server, in dual-srchost mode. Returns host 2's share.
fn nat_host2_share(nat: bool) -> f64 {
    let cfg = CakeConfig {
        flow_mode: FlowMode::DualSrchost,
        diffserv: DiffservMode::Besteffort,
        nat,
        ..CakeConfig::with_rate(RATE)
    };
    let mut sim = Sim::new(Cake::new(cfg, 5));
    let public = v4(203, 0, 113, 1);
    let server = v4(198, 51, 100, 7);
    let mut ids = Vec::new();
    for i in 0..5u16 {
        let lan = if i < 4 {
            v4(192, 168, 1, 10)
        } else {
            v4(192, 168, 1, 20)
        };
        let nat_port = 40_000 + i;
        let mut p = udp(public, server, nat_port, 443, 1514);
        p.meta.nat = Some(tuple(lan, server, 17, 5000 + i, 443));
        ids.push(sim.add(Source::greedy(p, RATE as f64 / 2.0).jittered(0.2)));
    }
    sim.run_until(Instant::from_secs(2));
    sim.reset_acct();
    sim.run_until(Instant::from_secs(6));
    sim.shares(&ids)[4]
}

#[test]
fn nat_hosts_behind_one_address_are_isolated_only_with_nat_on() {
    // Without nat all five flows seem to come from one host: 1/5 each.
    let off = nat_host2_share(false);
    assert!((off - 0.2).abs() <= 0.05 * 0.2, "nonat: host 2 share {off}");
    // With nat the pre-NAT addresses separate the hosts: host 2's single flow gets 1/2.
    let on = nat_host2_share(true);
    assert!((on - 0.5).abs() <= 0.05 * 0.5, "nat: host 2 share {on}");
}
