//! Behaviour tests of the baseline qdiscs: FIFO, CoDel, FQ-CoDel, PIE; and the accounting property
//! test of every one of them and of DualPI2 (whose behaviour tests are in `dualpi2.rs`).

mod common;

use common::{frame, jain, packet, run, FlowSpec, Kind};
use proptest::prelude::*;
use qdisc::codel::{Codel, CodelConfig};
use qdisc::dualpi2::{DualPi2, DualPi2Config, EcnClassifier, StepThreshold};
use qdisc::fifo::{Fifo, FifoConfig};
use qdisc::fq_codel::{FqCodel, FqCodelConfig};
use qdisc::pie::{Pie, PieConfig};
use qdisc::{Dequeue, DropReason, Dropped, Duration, Instant, Packet, Qdisc};

const MS: u64 = 1_000_000;
const SEC: u64 = 1_000_000_000;
const LINK: u64 = 10_000_000;

fn reno(ecn: bool) -> FlowSpec {
    FlowSpec {
        kind: Kind::Reno { ecn },
        size: 1514,
        rtt_ns: 50 * MS,
    }
}

fn cbr(rate_bps: u64, size: usize) -> FlowSpec {
    FlowSpec {
        kind: Kind::Cbr {
            interval_ns: size as u64 * 8 * SEC / rate_bps,
        },
        size,
        rtt_ns: 0,
    }
}

fn pad_packet(len: u32) -> Packet {
    let mut p = Packet::new(Vec::new());
    p.meta.pad = len;
    p
}

// ---------------------------------------------------------------- accounting (all qdiscs)

#[derive(Clone, Debug)]
enum Op {
    /// `ecn`: the ECN field (0 Not-ECT, 1 ECT(1), 2 ECT(0), 3 CE).
    Enqueue {
        flow: u8,
        size: u16,
        ecn: u8,
    },
    Dequeue,
    Advance(u32),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u8..6, 60u16..1515, 0u8..4).prop_map(|(flow, size, ecn)| Op::Enqueue { flow, size, ecn }),
        3 => Just(Op::Dequeue),
        2 => (0u32..30_000_000).prop_map(Op::Advance),
    ]
}

/// Runs `ops`, checking after each step that the counters balance and match what was handed out.
fn check_accounting(q: &mut dyn Qdisc, ops: &[Op]) -> Result<(), TestCaseError> {
    let mut now = Instant::ZERO;
    let mut drops: Vec<Dropped> = Vec::new();
    let (mut out_pkts, mut out_bytes, mut dropped) = (0u64, 0u64, [0u64; 4]);
    for op in ops {
        match *op {
            Op::Enqueue { flow, size, ecn } => {
                let data = frame(u16::from(flow), usize::from(size), ecn);
                q.enqueue(now, Packet::new(data), &mut drops);
            }
            Op::Dequeue => {
                if let Dequeue::Packet(p) = q.dequeue(now, &mut drops) {
                    out_pkts += 1;
                    out_bytes += u64::from(p.len());
                }
            }
            Op::Advance(ns) => now += Duration::from_nanos(u64::from(ns)),
        }
        for d in drops.drain(..) {
            dropped[d.reason as usize] += 1;
        }
        let s = q.stats();
        prop_assert!(s.is_balanced(), "{s:?}");
        prop_assert_eq!(s.dequeued.packets, out_pkts);
        prop_assert_eq!(s.dequeued.bytes, out_bytes);
        for r in DropReason::ALL {
            prop_assert_eq!(s.dropped(r).packets, dropped[r as usize]);
        }
        prop_assert_eq!(q.backlog(), s.backlog);
    }
    // Draining empties the queue and keeps the balance.
    loop {
        now += Duration::from_millis(1);
        match q.dequeue(now, &mut drops) {
            Dequeue::Packet(_) => {}
            Dequeue::Empty => break,
            Dequeue::NotBefore(_) => prop_assert!(false, "no shaper, no NotBefore"),
        }
    }
    let s = q.stats();
    prop_assert!(s.is_balanced(), "{s:?}");
    prop_assert_eq!(s.backlog.packets, 0);
    prop_assert_eq!(s.backlog.bytes, 0);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn pfifo_accounting_balances_after_random_ops(ops in prop::collection::vec(op(), 1..400)) {
        check_accounting(&mut Fifo::new(FifoConfig::packets(20)), &ops)?;
    }

    #[test]
    fn bfifo_accounting_balances_after_random_ops(ops in prop::collection::vec(op(), 1..400)) {
        check_accounting(&mut Fifo::new(FifoConfig::bytes(20_000)), &ops)?;
    }

    #[test]
    fn codel_accounting_balances_after_random_ops(ops in prop::collection::vec(op(), 1..400), ecn: bool) {
        let cfg = CodelConfig { limit: 30, ecn, ..CodelConfig::default() };
        check_accounting(&mut Codel::new(cfg), &ops)?;
    }

    #[test]
    fn fq_codel_accounting_balances_after_random_ops(
        ops in prop::collection::vec(op(), 1..400), ecn: bool, seed: u64, flows in 1u32..8,
    ) {
        let cfg = FqCodelConfig { limit: 30, flows, drop_batch: 4, ecn, ..FqCodelConfig::default() };
        check_accounting(&mut FqCodel::new(cfg, seed), &ops)?;
    }

    #[test]
    fn pie_accounting_balances_after_random_ops(
        ops in prop::collection::vec(op(), 1..400), ecn: bool, seed: u64,
    ) {
        let cfg = PieConfig { limit: 30, ecn, max_burst: Duration::from_millis(10), ..PieConfig::default() };
        check_accounting(&mut Pie::new(cfg, seed), &ops)?;
    }

    #[test]
    fn dualpi2_accounting_balances_after_random_ops(
        ops in prop::collection::vec(op(), 1..400),
        seed: u64,
        limit in 1u32..40,
        memory_limit in prop::option::of(1u64..40_000),
        target_ms in 0u64..20,
        tupdate_us in 1u64..20_000,
        step in prop_oneof![
            (0u64..3_000).prop_map(|us| StepThreshold::Time(Duration::from_micros(us))),
            (0u32..10).prop_map(StepThreshold::Packets),
        ],
        min_qlen_step in 0u32..4,
        coupling_factor in 0u8..6,
        drop_overload: bool,
        drop_early: bool,
        classic_protection in 0u8..=100,
        any_ect: bool,
    ) {
        let cfg = DualPi2Config {
            limit,
            memory_limit,
            target: Duration::from_millis(target_ms),
            tupdate: Duration::from_micros(tupdate_us),
            // Large gains so that short runs reach every probability regime, overload included.
            alpha: 40.0,
            beta: 400.0,
            step,
            min_qlen_step,
            coupling_factor,
            drop_overload,
            drop_early,
            classic_protection,
            classifier: if any_ect { EcnClassifier::AnyEct } else { EcnClassifier::L4sEct },
            ..DualPi2Config::default()
        };
        let mut q = DualPi2::new(cfg, seed);
        check_accounting(&mut q, &ops)?;
        let (l, c) = (q.l4s_backlog(), q.classic_backlog());
        prop_assert_eq!((l.packets, c.packets, l.bytes, c.bytes), (0, 0, 0, 0));
    }
}

// ---------------------------------------------------------------- FIFO

#[test]
fn pfifo_tail_drops_beyond_packet_limit_and_keeps_order() {
    let mut q = Fifo::new(FifoConfig::packets(3));
    let mut drops = Vec::new();
    for i in 0..5u64 {
        let mut p = pad_packet(100);
        p.meta.tag = i;
        q.enqueue(Instant::ZERO, p, &mut drops);
    }
    assert_eq!(q.kind(), "pfifo");
    let dropped: Vec<u64> = drops.iter().map(|d| d.packet.meta.tag).collect();
    assert_eq!(dropped, [3, 4], "the arrivals beyond the limit are dropped");
    assert!(drops.iter().all(|d| d.reason == DropReason::Overflow));
    let mut order = Vec::new();
    while let Dequeue::Packet(p) = q.dequeue(Instant::ZERO, &mut drops) {
        order.push(p.meta.tag);
    }
    assert_eq!(order, [0, 1, 2]);
    assert_eq!(q.stats().dropped(DropReason::Overflow).packets, 2);
}

#[test]
fn bfifo_admits_up_to_exactly_the_byte_limit() {
    let mut q = Fifo::new(FifoConfig::bytes(1000));
    let mut drops = Vec::new();
    q.enqueue(Instant::ZERO, pad_packet(600), &mut drops);
    q.enqueue(Instant::ZERO, pad_packet(401), &mut drops); // would make 1001
    q.enqueue(Instant::ZERO, pad_packet(400), &mut drops); // makes exactly 1000
    assert_eq!(q.kind(), "bfifo");
    assert_eq!(drops.len(), 1);
    assert_eq!(drops[0].packet.len(), 401);
    assert_eq!(q.backlog().bytes, 1000);
}

#[test]
fn fifo_default_is_pfifo_of_1000_packets() {
    assert_eq!(FifoConfig::default(), FifoConfig::packets(1000));
}

// ---------------------------------------------------------------- CoDel

#[test]
fn codel_keeps_sojourn_near_target_for_a_backing_off_source() {
    let mut q = Codel::new(CodelConfig::default());
    let r = run(&mut q, LINK, &[reno(false)], 30 * SEC, 5 * SEC);
    let median = r[0].sojourn_percentile(0.5);
    let p95 = r[0].sojourn_percentile(0.95);
    let util = r[0].delivered_bytes as f64 * 8.0 / 25.0 / LINK as f64;
    println!(
        "codel: median {median:.2} ms p95 {p95:.2} ms util {util:.3} losses {}",
        r[0].losses
    );
    assert!(r[0].losses > 0, "CoDel must signal");
    assert!(median < 10.0 && p95 < 30.0, "median {median} p95 {p95}");
    assert!(util > 0.8, "link stays busy: {util}");
    assert_eq!(q.stats().dropped(DropReason::Overflow).packets, 0);
    // The same source through a plain FIFO builds a standing queue far above target.
    let mut fifo = Fifo::new(FifoConfig::default());
    let f = run(&mut fifo, LINK, &[reno(false)], 30 * SEC, 5 * SEC);
    assert!(f[0].sojourn_percentile(0.5) > 5.0 * median.max(1.0));
}

#[test]
fn codel_drops_nothing_while_the_queue_stays_under_target() {
    // Bursts of 3 full-size packets every 10 ms: each burst drains in 3.6 ms < 5 ms.
    let mut q = Codel::new(CodelConfig::default());
    let mut drops = Vec::new();
    let tx = 1514 * 8 * SEC / LINK;
    let mut t = 0u64;
    let tmpl = frame(1, 1514, 0);
    let mut delivered = 0;
    while t < 10 * SEC {
        for _ in 0..3 {
            q.enqueue(
                Instant::from_nanos(t),
                packet(&tmpl, 1, Instant::from_nanos(t)),
                &mut drops,
            );
        }
        let mut s = t;
        while let Dequeue::Packet(_) = q.dequeue(Instant::from_nanos(s), &mut drops) {
            s += tx;
            delivered += 1;
        }
        t += 10 * MS;
    }
    assert!(drops.is_empty());
    assert_eq!(delivered, 3000);
    assert_eq!(q.stats().dropped_total().packets, 0);
}

#[test]
fn codel_waits_a_full_interval_above_target_before_the_first_drop() {
    let mut q = Codel::new(CodelConfig::default());
    let mut drops = Vec::new();
    let tmpl = frame(1, 1514, 0);
    for _ in 0..200 {
        q.enqueue(Instant::ZERO, packet(&tmpl, 1, Instant::ZERO), &mut drops);
    }
    // Dequeue one packet per ms starting at 10 ms: over target from the start.
    let mut first_drop = None;
    for ms in 10..200u64 {
        let _ = q.dequeue(Instant::from_millis(ms), &mut drops);
        if !drops.is_empty() && first_drop.is_none() {
            first_drop = Some(ms);
        }
    }
    // Above target first seen at 10 ms, so dropping starts after 110 ms.
    assert_eq!(first_drop, Some(111));
    assert!(drops.iter().all(|d| d.reason == DropReason::Aqm));
}

#[test]
fn codel_marks_ect_packets_instead_of_dropping_when_ecn_enabled() {
    let mut q = Codel::new(CodelConfig {
        ecn: true,
        ..CodelConfig::default()
    });
    let r = run(&mut q, LINK, &[reno(true)], 20 * SEC, 2 * SEC);
    let s = q.stats();
    assert!(s.ecn_marks > 10, "{s:?}");
    assert_eq!(s.dropped_total().packets, 0, "{s:?}");
    assert!(r[0].marks > 0, "the receiver sees CE");
    assert!(r[0].sojourn_percentile(0.5) < 10.0);

    // Not-ECT packets are still dropped with ECN on.
    let mut q = Codel::new(CodelConfig {
        ecn: true,
        ..CodelConfig::default()
    });
    run(&mut q, LINK, &[reno(false)], 20 * SEC, 2 * SEC);
    let s = q.stats();
    assert_eq!(s.ecn_marks, 0);
    assert!(s.dropped(DropReason::Aqm).packets > 10);

    // ECT packets are dropped, not marked, with ECN off.
    let mut q = Codel::new(CodelConfig::default());
    run(&mut q, LINK, &[reno(true)], 20 * SEC, 2 * SEC);
    assert_eq!(q.stats().ecn_marks, 0);
    assert!(q.stats().dropped(DropReason::Aqm).packets > 10);
}

// ---------------------------------------------------------------- FQ-CoDel

#[test]
fn fq_codel_defaults_follow_rfc_8290() {
    let c = FqCodelConfig::default();
    assert_eq!(
        (c.flows, c.quantum, c.limit, c.memory_limit),
        (1024, 1514, 10240, 32 << 20)
    );
    assert_eq!(
        (c.target, c.interval, c.ecn, c.drop_batch),
        (
            Duration::from_millis(5),
            Duration::from_millis(100),
            true,
            64
        )
    );
}

#[test]
fn fq_codel_gives_equal_throughput_to_equal_greedy_flows() {
    // Unresponsive: four flows each offering half the link.
    let mut q = FqCodel::new(FqCodelConfig::default(), 1);
    let flows: Vec<FlowSpec> = (0..4).map(|_| cbr(LINK / 2, 1514)).collect();
    let r = run(&mut q, LINK, &flows, 10 * SEC, 2 * SEC);
    let tput: Vec<f64> = r.iter().map(|f| f.delivered_bytes as f64).collect();
    let j = jain(&tput);
    println!("fq_codel cbr: {tput:?} jain {j}");
    assert!(j >= 0.99, "{tput:?}");

    // Responsive: four Reno flows.
    let mut q = FqCodel::new(FqCodelConfig::default(), 2);
    let flows: Vec<FlowSpec> = (0..4).map(|_| reno(false)).collect();
    let r = run(&mut q, LINK, &flows, 30 * SEC, 5 * SEC);
    let tput: Vec<f64> = r.iter().map(|f| f.delivered_bytes as f64).collect();
    let j = jain(&tput);
    let total: f64 = tput.iter().sum::<f64>() * 8.0 / 25.0 / LINK as f64;
    println!("fq_codel reno: {tput:?} jain {j} util {total}");
    assert!(j >= 0.99, "{tput:?}");
    assert!(total > 0.9);
}

#[test]
fn fq_codel_sparse_flow_gets_low_delay_against_bulk_flows() {
    let mut flows: Vec<FlowSpec> = (0..4).map(|_| reno(false)).collect();
    flows.push(FlowSpec {
        kind: Kind::Cbr {
            interval_ns: 20 * MS,
        },
        size: 100,
        rtt_ns: 0,
    });
    let mut q = FqCodel::new(FqCodelConfig::default(), 3);
    let r = run(&mut q, LINK, &flows, 30 * SEC, 5 * SEC);
    let sparse = &r[4];
    let bulk_median = r[0].sojourn_percentile(0.5);
    println!(
        "fq_codel sparse: p50 {:.3} p99 {:.3} max {:.3} ms; bulk p50 {bulk_median:.3}",
        sparse.sojourn_percentile(0.5),
        sparse.sojourn_percentile(0.99),
        sparse.sojourn_percentile(1.0)
    );
    assert_eq!(sparse.losses, 0);
    // Waiting at most for the packet on the wire and a few head packets of the new list.
    assert!(
        sparse.sojourn_percentile(0.99) < 2.0,
        "{}",
        sparse.sojourn_percentile(0.99)
    );
    assert!(bulk_median > 2.0 * sparse.sojourn_percentile(0.5));

    // Through CoDel alone, the sparse flow waits behind the bulk queue.
    let mut q = Codel::new(CodelConfig::default());
    let r = run(&mut q, LINK, &flows, 30 * SEC, 5 * SEC);
    assert!(r[4].sojourn_percentile(0.5) > 3.0 * sparse.sojourn_percentile(0.5));
}

#[test]
fn fq_codel_overflow_drops_from_the_fattest_flows_head_in_a_batch() {
    let cfg = FqCodelConfig {
        limit: 20,
        drop_batch: 64,
        ..FqCodelConfig::default()
    };
    let mut q = FqCodel::new(cfg, 9);
    let fat = frame(1, 1000, 0);
    let thin = frame(2, 1000, 0);
    assert_ne!(
        q.classify(&Packet::new(fat.clone())),
        q.classify(&Packet::new(thin.clone()))
    );
    let mut drops = Vec::new();
    for i in 0..3u64 {
        let mut p = Packet::new(thin.clone());
        p.meta.tag = 1000 + i;
        q.enqueue(Instant::ZERO, p, &mut drops);
    }
    for i in 0..18u64 {
        let mut p = Packet::new(fat.clone());
        p.meta.tag = i;
        q.enqueue(Instant::ZERO, p, &mut drops);
    }
    // The 21st packet overflowed: half of the fat flow's 18 packets go, from its head.
    let tags: Vec<u64> = drops.iter().map(|d| d.packet.meta.tag).collect();
    assert_eq!(tags, (0..9).collect::<Vec<_>>());
    assert!(drops.iter().all(|d| d.reason == DropReason::Overflow));
    assert_eq!(q.backlog().packets, 12);
    assert!(q.stats().is_balanced());
}

#[test]
fn fq_codel_overflow_batch_is_capped_by_drop_batch() {
    let cfg = FqCodelConfig {
        limit: 100,
        drop_batch: 4,
        ..FqCodelConfig::default()
    };
    let mut q = FqCodel::new(cfg, 9);
    let fat = frame(1, 1000, 0);
    let mut drops = Vec::new();
    for _ in 0..101 {
        q.enqueue(Instant::ZERO, Packet::new(fat.clone()), &mut drops);
    }
    assert_eq!(drops.len(), 4);
    assert_eq!(q.backlog().packets, 97);
}

#[test]
fn fq_codel_new_flow_is_served_before_old_flows() {
    let mut q = FqCodel::new(FqCodelConfig::default(), 5);
    let mut drops = Vec::new();
    let bulk = frame(1, 1514, 0);
    for _ in 0..10 {
        q.enqueue(Instant::ZERO, packet(&bulk, 1, Instant::ZERO), &mut drops);
    }
    // Serve the bulk flow past its first quantum, so it sits on the old list.
    for _ in 0..2 {
        let _ = q.dequeue(Instant::ZERO, &mut drops);
    }
    q.enqueue(
        Instant::ZERO,
        packet(&frame(2, 100, 0), 2, Instant::ZERO),
        &mut drops,
    );
    match q.dequeue(Instant::ZERO, &mut drops) {
        Dequeue::Packet(p) => assert_eq!(p.meta.tag >> 48, 2),
        other => panic!("{other:?}"),
    }
}

// ---------------------------------------------------------------- PIE

#[test]
fn pie_holds_delay_near_target_for_a_responsive_source() {
    let mut q = Pie::new(PieConfig::default(), 7);
    let flows: Vec<FlowSpec> = (0..2).map(|_| reno(false)).collect();
    let r = run(&mut q, LINK, &flows, 40 * SEC, 10 * SEC);
    let all: Vec<f64> = r
        .iter()
        .flat_map(|f| f.sojourn_ms.iter().copied())
        .collect();
    let mean = all.iter().sum::<f64>() / all.len() as f64;
    let util = r.iter().map(|f| f.delivered_bytes).sum::<u64>() as f64 * 8.0 / 30.0 / LINK as f64;
    println!(
        "pie: mean delay {mean:.2} ms util {util:.3} p {}",
        q.drop_probability()
    );
    assert!((5.0..=30.0).contains(&mean), "mean {mean}");
    assert!(util > 0.85, "{util}");
    assert!(q.stats().dropped(DropReason::Aqm).packets > 0);
    assert_eq!(q.stats().dropped(DropReason::Overflow).packets, 0);
}

#[test]
fn pie_drop_probability_rises_for_an_unresponsive_source() {
    let mut q = Pie::new(PieConfig::default(), 8);
    // Twice the link rate: about half the packets must go.
    let r = run(&mut q, LINK, &[cbr(2 * LINK, 1514)], 10 * SEC, 5 * SEC);
    let p = q.drop_probability();
    let s = q.stats();
    println!(
        "pie cbr: p {p} delay {:?} {s:?} p50 {}",
        q.queue_delay(),
        r[0].sojourn_percentile(0.5)
    );
    assert!(p > 0.3, "p = {p}");
    assert!(s.dropped(DropReason::Aqm).packets > s.dropped(DropReason::Overflow).packets);
    // The queue is held well below the limit's 1.2 s of delay.
    assert!(r[0].sojourn_percentile(0.5) < 100.0);
}

#[test]
fn pie_lets_a_burst_through_within_the_burst_allowance() {
    let mut q = Pie::new(PieConfig::default(), 1);
    let mut drops = Vec::new();
    let tmpl = frame(1, 1514, 0);
    // 100 packets drain in 121 ms at 10 Mbit/s, inside the 150 ms allowance.
    for _ in 0..100 {
        q.enqueue(Instant::ZERO, packet(&tmpl, 1, Instant::ZERO), &mut drops);
    }
    let tx = 1514 * 8 * SEC / LINK;
    let mut t = 0;
    while let Dequeue::Packet(_) = q.dequeue(Instant::from_nanos(t), &mut drops) {
        t += tx;
    }
    assert!(drops.is_empty());
    assert_eq!(q.stats().dequeued.packets, 100);
}

#[test]
fn pie_marks_instead_of_dropping_when_ecn_enabled_and_probability_low() {
    let flows: Vec<FlowSpec> = (0..2).map(|_| reno(true)).collect();
    let mut marking = Pie::new(
        PieConfig {
            ecn: true,
            ..PieConfig::default()
        },
        4,
    );
    let r = run(&mut marking, LINK, &flows, 40 * SEC, 10 * SEC);
    let mut dropping = Pie::new(PieConfig::default(), 4);
    run(&mut dropping, LINK, &flows, 40 * SEC, 10 * SEC);
    let (m, d) = (marking.stats(), dropping.stats());
    println!(
        "pie ecn: marks {} drops {:?}; without ecn drops {:?}",
        m.ecn_marks, m.drops, d.drops
    );
    // After slow start (p stays below 10%) the ECN flows see marks and no losses.
    assert!(
        r.iter().all(|f| f.losses == 0 && f.marks > 0),
        "{:?}",
        r.iter().map(|f| (f.losses, f.marks)).collect::<Vec<_>>()
    );
    assert_eq!(d.ecn_marks, 0);
    assert!(d.dropped(DropReason::Aqm).packets > 0);
}

/// Feeds `q` one packet per ms from `start` for up to `ms` ms, each dequeued 50 ms after it
/// arrived (sojourn 50 ms, ten times the target). With `until_drop`, stops after the step that
/// dropped a packet. Returns the time after the last step.
fn codel_standing_queue(
    q: &mut Codel,
    start: u64,
    ms: u64,
    until_drop: bool,
    drops: &mut Vec<Dropped>,
) -> u64 {
    let tmpl = frame(1, 1514, 0);
    for k in 0..ms {
        let t = Instant::from_millis(start + k);
        q.enqueue(t, packet(&tmpl, 1, t), drops);
        if k >= 50 {
            let before = drops.len();
            let _ = q.dequeue(t, drops);
            if until_drop && drops.len() > before {
                return start + k + 1;
            }
        }
    }
    start + ms
}

fn codel_drain(q: &mut Codel, at: u64, drops: &mut Vec<Dropped>) {
    while let Dequeue::Packet(_) = q.dequeue(Instant::from_millis(at), drops) {}
    assert!(!q.vars().is_dropping());
}

#[test]
fn codel_reentering_soon_resumes_count_at_count_minus_lastcount() {
    let mut q = Codel::new(CodelConfig::default());
    let mut drops = Vec::new();
    let end = codel_standing_queue(&mut q, 0, 1000, false, &mut drops);
    assert!(q.vars().is_dropping());
    codel_drain(&mut q, end, &mut drops);
    let c1 = q.vars().count();
    assert!(c1 > 3, "count {c1}");
    // Re-enter well within 16 intervals: count resumes at c1 - lastcount (lastcount was 1).
    codel_standing_queue(&mut q, end + 10, 1000, true, &mut drops);
    assert!(q.vars().is_dropping());
    assert_eq!(q.vars().count(), c1 - 1);
}

#[test]
fn codel_reentering_after_16_intervals_restarts_count_at_one() {
    let mut q = Codel::new(CodelConfig::default());
    let mut drops = Vec::new();
    let end = codel_standing_queue(&mut q, 0, 1000, false, &mut drops);
    assert!(q.vars().count() > 3);
    codel_drain(&mut q, end, &mut drops);
    codel_standing_queue(&mut q, end + 2000, 1000, true, &mut drops);
    assert!(q.vars().is_dropping());
    assert_eq!(q.vars().count(), 1);
}
