//! Tins and DiffServ: under saturation each tin is held to its threshold, strictly by priority
//! (the shaper serves the highest-priority tin whose own clock is due); an idle tin's share is
//! borrowed by the others; fwmark and priority overrides; wash; weighted tin DRR when unlimited.

mod common;

use cake::{Cake, CakeConfig, DiffservMode};
use common::{v4, Sim, Source};
use qdisc::packet::FrameSpec;
use qdisc::{Dequeue, Instant, Packet, Qdisc};

const RATE: u64 = 2_500_000;

fn pkt(dscp: u8, port: u16) -> Packet {
    FrameSpec::udp(v4(10, 0, 0, 1), v4(192, 0, 2, 1), port, 9)
        .with_payload(1472)
        .with_dscp_ecn(dscp, 0)
        .packet_padded()
}

/// Delivered shares of one greedy source per DSCP (each offering the whole rate).
fn shares(mode: DiffservMode, rate: u64, link: Option<f64>, dscps: &[u8]) -> Vec<f64> {
    let cfg = CakeConfig {
        diffserv: mode,
        ..CakeConfig::with_rate(rate)
    };
    let mut sim = Sim::new(Cake::new(cfg, 9));
    sim.link_rate = link;
    let offered = link.unwrap_or(rate as f64);
    let ids: Vec<usize> = dscps
        .iter()
        .enumerate()
        .map(|(i, &d)| sim.add(Source::greedy(pkt(d, 1000 + i as u16), offered).jittered(0.1)))
        .collect();
    sim.run_until(Instant::from_secs(1));
    sim.reset_acct();
    sim.run_until(Instant::from_secs(5));
    sim.shares(&ids)
}

#[track_caller]
fn close(got: &[f64], want: &[f64], tol: f64) {
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tol,
            "tin source {i}: share {g:.4}, want {w:.4} (all {got:.4?})"
        );
    }
}

#[test]
fn diffserv3_saturated_tins_get_voice_quarter_bulk_sixteenth_and_best_effort_the_rest() {
    // Voice (EF) is served first up to 1/4, Bulk (CS1) next up to 1/16, Best Effort gets what
    // is left: 11/16.
    let got = shares(DiffservMode::Diffserv3, RATE, None, &[8, 0, 46]);
    close(&got, &[1.0 / 16.0, 11.0 / 16.0, 0.25], 0.005);
}

#[test]
fn diffserv4_saturated_tins_are_held_to_their_thresholds() {
    // Voice 1/4, Video 1/2, Bulk 1/16 are each held to their threshold; Best Effort gets 3/16.
    let got = shares(DiffservMode::Diffserv4, RATE, None, &[8, 0, 34, 46]);
    close(&got, &[1.0 / 16.0, 3.0 / 16.0, 0.5, 0.25], 0.005);
}

/// Tin thresholds of diffserv8 / precedence as fractions of the rate (rate * 7/8 per step, in
/// integers as CAKE derives them).
fn eight_tin_expectation() -> Vec<f64> {
    let mut r = RATE;
    let mut th = Vec::new();
    for _ in 0..8 {
        th.push(r as f64 / RATE as f64);
        r = (r * 7) >> 3;
    }
    // Strict priority from tin 7 down: tins 7 and 6 fit (0.393 + 0.449), tin 5 gets the
    // remainder, tins 0..4 get nothing while everything is saturated.
    let mut left = 1.0;
    let mut want = vec![0.0; 8];
    for i in (0..8).rev() {
        want[i] = th[i].min(left);
        left -= want[i];
    }
    want
}

#[test]
fn diffserv8_saturated_tins_are_served_by_priority_up_to_their_thresholds() {
    // DSCPs landing in tins 0..7: LE, CS1, BE, CS3, AF21, CS2, EF, CS6.
    let got = shares(
        DiffservMode::Diffserv8,
        RATE,
        None,
        &[1, 8, 0, 24, 18, 16, 46, 48],
    );
    let want = eight_tin_expectation();
    assert!((want[7] - 0.875f64.powi(7)).abs() < 1e-3 && want[4] == 0.0);
    close(&got, &want, 0.005);
}

#[test]
fn precedence_saturated_tins_are_served_by_priority_up_to_their_thresholds() {
    let dscps: Vec<u8> = (0..8).map(|p| p << 3).collect();
    let got = shares(DiffservMode::Precedence, RATE, None, &dscps);
    close(&got, &eight_tin_expectation(), 0.005);
}

/// Delivered rate of lone greedy sources with these DSCPs under diffserv3.
fn lone_rate(dscps: &[u8]) -> Vec<f64> {
    let mut sim = Sim::new(Cake::new(CakeConfig::with_rate(RATE), 1));
    let ids: Vec<usize> = dscps
        .iter()
        .enumerate()
        .map(|(i, &d)| sim.add(Source::greedy(pkt(d, 7 + i as u16), RATE as f64)))
        .collect();
    sim.run_until(Instant::from_secs(1));
    sim.reset_acct();
    sim.run_until(Instant::from_secs(3));
    ids.iter()
        .map(|&i| sim.acct[i].delivered_bytes as f64 / 2.0)
        .collect()
}

#[test]
fn a_lone_bulk_flow_borrows_the_full_rate() {
    let r = lone_rate(&[8]);
    common::assert_rel(r[0], RATE as f64, 0.002, "lone Bulk rate");
}

#[test]
fn a_lone_voice_flow_borrows_the_full_rate_and_shares_only_its_threshold_with_best_effort() {
    let r = lone_rate(&[46]);
    common::assert_rel(r[0], RATE as f64, 0.002, "lone Voice rate");
    let r = lone_rate(&[46, 0]);
    common::assert_rel(r[0], RATE as f64 / 4.0, 0.01, "Voice next to Best Effort");
    common::assert_rel(r[1], RATE as f64 * 0.75, 0.01, "Best Effort next to Voice");
}

/// The kernel tin each packet lands in, in a fresh instance.
fn tin_of(cfg: &CakeConfig, p: Packet) -> usize {
    let mut q = Cake::new(cfg.clone(), 1);
    let mut drops = Vec::new();
    q.enqueue(Instant::ZERO, p, &mut drops);
    let s = q.cake_stats();
    let tins: Vec<usize> = (0..s.tins.len())
        .filter(|&i| s.tins[i].packets == 1)
        .collect();
    assert_eq!(tins.len(), 1);
    tins[0]
}

#[test]
fn fwmark_selects_the_tin_in_user_order_and_overrides_dscp_and_priority() {
    let cfg = CakeConfig {
        fwmark_mask: 0xf0,
        ..CakeConfig::with_rate(RATE)
    };
    let with = |dscp: u8, mark: u32, prio: u32| {
        let mut p = pkt(dscp, 1);
        p.meta.mark = mark;
        p.meta.priority = prio;
        tin_of(&cfg, p)
    };
    // diffserv3 user order: 1 = Bulk (kernel 1), 2 = Best Effort (0), 3 = Voice (2).
    assert_eq!(with(46, 0x10, 0), 1, "mark 1 -> Bulk despite EF");
    assert_eq!(with(8, 0x20, 0), 0, "mark 2 -> Best Effort despite CS1");
    assert_eq!(with(0, 0x30, 0), 2, "mark 3 -> Voice");
    assert_eq!(with(0, 0x3f, 0), 2, "bits outside the mask are ignored");
    assert_eq!(with(46, 0x40, 0), 2, "mark 4 > tin count: DSCP decides");
    assert_eq!(with(0, 0x10, 0x8001_0003), 1, "fwmark beats priority");
}

#[test]
fn priority_major_equal_to_the_handle_selects_the_tin_by_minor() {
    let cfg = CakeConfig::with_rate(RATE);
    let with = |dscp: u8, prio: u32| {
        let mut p = pkt(dscp, 1);
        p.meta.priority = prio;
        tin_of(&cfg, p)
    };
    assert_eq!(with(0, 0x8001_0003), 2, "8001:3 -> Voice");
    assert_eq!(with(46, 0x8001_0001), 1, "8001:1 -> Bulk despite EF");
    assert_eq!(with(8, 0x8001_0002), 0, "8001:2 -> Best Effort despite CS1");
    assert_eq!(with(46, 0x8002_0001), 2, "other major: DSCP decides");
    assert_eq!(with(46, 0x8001_0000), 2, "minor 0: DSCP decides");
    assert_eq!(with(8, 0x8001_0004), 1, "minor > tin count: DSCP decides");
    // fwmark off (mask 0): a mark means nothing.
    let mut p = pkt(46, 1);
    p.meta.mark = 1;
    assert_eq!(tin_of(&cfg, p), 2);
}

#[test]
fn a_priority_minor_number_that_names_no_tin_leaves_tin_and_flow_as_they_are() {
    // Enqueue reads an IPv4 frame by its fast path only when the priority has no minor number;
    // the others take the parsed headers. Both must pick the same tin and flow queue.
    let classes = |prio: u32| {
        let mut q = Cake::new(CakeConfig::with_rate(RATE), 7);
        let mut drops = Vec::new();
        for i in 0..200u16 {
            let mut p = pkt([0, 8, 46][usize::from(i % 3)], 2000 + i);
            p.meta.priority = prio;
            q.enqueue(Instant::ZERO, p, &mut drops);
        }
        let c: Vec<(u32, u32)> = q
            .class_stats(Instant::ZERO)
            .iter()
            .map(|c| (c.class_id, c.backlog_packets))
            .collect();
        c
    };
    let plain = classes(0);
    assert!(plain.len() > 100, "{} classes", plain.len());
    // Another major number, and a minor beyond the tin count: the DSCP decides either way.
    assert_eq!(classes(0x8002_0001), plain);
    assert_eq!(classes(0x8001_0004), plain);
}

fn first_dequeued(cfg: CakeConfig, p: Packet) -> (Packet, usize) {
    let mut q = Cake::new(cfg, 1);
    let mut drops = Vec::new();
    q.enqueue(Instant::ZERO, p, &mut drops);
    let s = q.cake_stats();
    let tin = (0..s.tins.len()).find(|&i| s.tins[i].packets == 1);
    match q.dequeue(Instant::ZERO, &mut drops) {
        Dequeue::Packet(p) => (p, tin.unwrap_or(usize::MAX)),
        other => panic!("expected a packet, got {other:?}"),
    }
}

#[test]
fn wash_clears_dscp_but_classification_still_used_it() {
    let ef_ect0 = FrameSpec::udp(v4(10, 0, 0, 1), v4(192, 0, 2, 1), 1, 2)
        .with_payload(100)
        .with_dscp_ecn(46, 2)
        .packet();
    let washed = CakeConfig {
        wash: true,
        ..CakeConfig::with_rate(RATE)
    };
    let (out, tin) = first_dequeued(washed, ef_ect0.clone());
    assert_eq!(tin, 2, "classified as Voice from the original DSCP");
    let ip = out.headers().ip.expect("ip");
    assert_eq!((ip.dscp, ip.ecn), (0, 2), "DSCP cleared, ECN kept");

    let (out, tin) = first_dequeued(CakeConfig::with_rate(RATE), ef_ect0.clone());
    assert_eq!(tin, 2);
    assert_eq!(out.headers().ip.expect("ip").dscp, 46, "nowash keeps DSCP");

    // besteffort still washes.
    let be = CakeConfig {
        wash: true,
        diffserv: DiffservMode::Besteffort,
        ..CakeConfig::with_rate(RATE)
    };
    let (out, _) = first_dequeued(be, ef_ect0);
    assert_eq!(out.headers().ip.expect("ip").dscp, 0);
}

#[test]
fn unlimited_mode_shares_a_bottleneck_by_weighted_tin_drr() {
    // No shaper: the tins take turns by their tin quanta (diffserv3: BE 1024, Bulk 64,
    // Voice 256) in front of a 20 Mbit link.
    let got = shares(DiffservMode::Diffserv3, 0, Some(RATE as f64), &[8, 0, 46]);
    let sum = 1024.0 + 64.0 + 256.0;
    close(&got, &[64.0 / sum, 1024.0 / sum, 256.0 / sum], 0.01);
}
