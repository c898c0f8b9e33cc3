//! Behaviour tests of the remaining contenders of the seeds' testbed: SFQ, SFB and the HTB
//! shaper.

mod common;

use common::{frame, packet, run, FlowSpec, Kind, ECT0};
use qdisc::codel::{Codel, CodelConfig};
use qdisc::fifo::{Fifo, FifoConfig};
use qdisc::fq_codel::{FqCodel, FqCodelConfig};
use qdisc::htb::{Htb, HtbConfig};
use qdisc::sfb::{Sfb, SfbConfig};
use qdisc::sfq::{Sfq, SfqConfig};
use qdisc::{Counter, Dequeue, DropReason, Dropped, Duration, Instant, Qdisc, Rng};

const MS: u64 = 1_000_000;
const SEC: u64 = 1_000_000_000;
const LINK: u64 = 10_000_000;

fn cbr(rate_bps: u64, size: usize) -> FlowSpec {
    FlowSpec {
        kind: Kind::Cbr {
            interval_ns: size as u64 * 8 * SEC / rate_bps,
        },
        size,
        rtt_ns: 0,
    }
}

fn reno(ecn: bool) -> FlowSpec {
    FlowSpec {
        kind: Kind::Reno { ecn },
        size: 1514,
        rtt_ns: 50 * MS,
    }
}

/// Random enqueues (16 flows, sizes 60..=3000, some ECT) and dequeues with time steps; checks
/// after every operation that the counters match what was handed back.
fn check_accounting(q: &mut dyn Qdisc, seed: u64, ops: usize) {
    let mut rng = Rng::new(seed);
    let mut drops: Vec<Dropped> = Vec::new();
    let (mut dropped, mut dequeued) = ([Counter::default(); 4], Counter::default());
    let mut now = Instant::from_secs(1);
    let templates: Vec<Vec<u8>> = (0..16u16)
        .map(|f| {
            let size = 60 + (rng.next_u32() % 2941) as usize;
            frame(f, size, if f % 3 == 0 { ECT0 } else { 0 })
        })
        .collect();
    for i in 0..ops {
        drops.clear();
        let r = rng.next_u32() % 100;
        if r < 55 {
            let f = rng.next_u32() as usize % templates.len();
            q.enqueue(now, packet(&templates[f], f as u16, now), &mut drops);
        } else {
            now += Duration::from_nanos(u64::from(rng.next_u32() % 2_000_000));
            if r > 97 {
                now += Duration::from_secs(u64::from(rng.next_u32() % 20));
            }
            match q.dequeue(now, &mut drops) {
                Dequeue::Packet(p) => dequeued.add(p.len()),
                Dequeue::NotBefore(t) => assert!(t > now, "op {i}: not-before {t:?} <= {now:?}"),
                Dequeue::Empty => assert_eq!(q.backlog().packets, 0, "op {i}: Empty with backlog"),
            }
        }
        for d in &drops {
            dropped[d.reason as usize].add(d.packet.len());
        }
        let st = q.stats();
        assert!(st.is_balanced(), "op {i}: unbalanced {st:?}");
        assert_eq!(st.dequeued, dequeued, "op {i}");
        for r in DropReason::ALL {
            assert_eq!(st.dropped(r), dropped[r as usize], "op {i}: {r:?}");
        }
        assert_eq!(q.backlog(), st.backlog, "op {i}");
        assert!(st.backlog.packets > 0 || st.backlog.bytes == 0, "op {i}");
    }
}

#[test]
fn every_packet_is_accounted_for_under_random_operations() {
    for seed in 0..6u64 {
        let mut sfq = Sfq::new(SfqConfig::default(), seed);
        check_accounting(&mut sfq, seed, 20_000);
        let small = SfqConfig {
            limit: 20,
            flows: 4,
            depth: 6,
            divisor: 8,
            quantum: 300,
            headdrop: seed % 2 == 0,
            perturb: Duration::from_secs(1),
        };
        let mut sfq = Sfq::new(small, seed);
        check_accounting(&mut sfq, seed, 20_000);
        assert!(sfq.perturbations() > 0);

        let mut sfb = Sfb::new(SfbConfig::default(), seed);
        check_accounting(&mut sfb, seed, 20_000);
        let small = SfbConfig {
            limit: 30,
            max: 6,
            target: 3,
            increment: SfbConfig::prob(0.05),
            rehash: Duration::from_secs(3),
            warmup: Duration::from_secs(1),
            ..SfbConfig::default()
        };
        let mut sfb = Sfb::new(small, seed);
        check_accounting(&mut sfb, seed, 20_000);

        let child = FqCodel::new(
            FqCodelConfig {
                limit: 40,
                ..FqCodelConfig::default()
            },
            seed,
        );
        let mut htb = Htb::new(HtbConfig::with_rate_burst(250_000, 15 * 1024), child);
        check_accounting(&mut htb, seed, 20_000);
        let mut htb = Htb::new(
            HtbConfig::with_rate(1_000_000),
            Sfq::new(SfqConfig::default(), seed),
        );
        check_accounting(&mut htb, seed, 20_000);
    }
}

#[test]
fn sfq_gives_flows_equal_byte_shares_whatever_their_packet_size() {
    let mut q = Sfq::new(SfqConfig::default(), 3);
    // Distinct buckets, so the test measures the scheduler and not a hash collision.
    let buckets: Vec<u32> = (0..4u16)
        .map(|f| q.bucket(&packet(&frame(f, 100, 0), f, Instant::ZERO)))
        .collect();
    for i in 0..4 {
        for j in 0..i {
            assert_ne!(buckets[i], buckets[j]);
        }
    }
    let flows = [
        cbr(6_000_000, 1514),
        cbr(6_000_000, 514),
        cbr(6_000_000, 1000),
        // Allotments count 8-byte units rounded up (as Linux): sizes here are multiples of 8 or
        // large, so the rounding costs under 1.2%.
        cbr(6_000_000, 96),
    ];
    let res = run(&mut q, LINK, &flows, 12 * SEC, 2 * SEC);
    let total: u64 = res.iter().map(|r| r.delivered_bytes).sum();
    for (i, r) in res.iter().enumerate() {
        let share = r.delivered_bytes as f64 / total as f64;
        assert!(
            (share - 0.25).abs() < 0.25 * 0.03,
            "flow {i}: share {share:.4} (all {:?})",
            res.iter().map(|r| r.delivered_bytes).collect::<Vec<_>>()
        );
    }
    assert!(q.stats().is_balanced());
}

#[test]
fn sfq_overflow_drops_from_the_tail_of_the_fattest_flow_and_respects_the_limit() {
    let mut q = Sfq::new(
        SfqConfig {
            limit: 60,
            ..SfqConfig::default()
        },
        9,
    );
    let (fa, fb) = (frame(1, 1000, 0), frame(2, 1000, 0));
    assert_ne!(
        q.bucket(&packet(&fa, 1, Instant::ZERO)),
        q.bucket(&packet(&fb, 2, Instant::ZERO))
    );
    let mut drops = Vec::new();
    let now = Instant::ZERO;
    for i in 0..50u64 {
        let mut p = packet(&fa, 1, now);
        p.meta.tag = i;
        q.enqueue(now, p, &mut drops);
    }
    for i in 0..30u64 {
        let mut p = packet(&fb, 2, now);
        p.meta.tag = 1000 + i;
        q.enqueue(now, p, &mut drops);
        assert!(q.backlog().packets <= 60);
    }
    // 80 offered, 60 kept: the 20 drops are flow A's newest packets (its tail).
    assert_eq!(drops.len(), 20);
    let mut tags: Vec<u64> = drops.iter().map(|d| d.packet.meta.tag).collect();
    tags.sort_unstable();
    assert_eq!(tags, (30..50).collect::<Vec<_>>());
    assert!(drops.iter().all(|d| d.reason == DropReason::Overflow));
    assert_eq!(q.bucket_qlen(&packet(&fa, 1, now)), 30);
    assert_eq!(q.bucket_qlen(&packet(&fb, 2, now)), 30);
}

#[test]
fn sfq_depth_tail_drops_arrivals_and_headdrop_drops_the_oldest() {
    for headdrop in [false, true] {
        let mut q = Sfq::new(
            SfqConfig {
                depth: 10,
                headdrop,
                ..SfqConfig::default()
            },
            1,
        );
        let fa = frame(1, 500, 0);
        let mut drops = Vec::new();
        for i in 0..15u64 {
            let mut p = packet(&fa, 1, Instant::ZERO);
            p.meta.tag = i;
            q.enqueue(Instant::ZERO, p, &mut drops);
        }
        let tags: Vec<u64> = drops.iter().map(|d| d.packet.meta.tag).collect();
        if headdrop {
            assert_eq!(tags, (0..5).collect::<Vec<_>>());
        } else {
            assert_eq!(tags, (10..15).collect::<Vec<_>>());
        }
        assert_eq!(q.backlog().packets, 10);
        let first = match q.dequeue(Instant::ZERO, &mut drops) {
            Dequeue::Packet(p) => p.meta.tag,
            other => panic!("{other:?}"),
        };
        assert_eq!(first, if headdrop { 5 } else { 0 });
    }
}

#[test]
fn sfq_defaults_are_linux_defaults() {
    let c = SfqConfig::default();
    assert_eq!(
        (c.limit, c.quantum, c.divisor, c.flows, c.depth, c.perturb, c.headdrop),
        (127, 1514, 1024, 128, 127, Duration::ZERO, false)
    );
    // Linux clamps flows to the limit and the limit to depth * flows.
    let n = SfqConfig { limit: 10, ..c }.normalized();
    assert_eq!((n.limit, n.flows), (10, 10));
    let n = SfqConfig {
        limit: 100_000,
        depth: 5,
        flows: 8,
        ..c
    }
    .normalized();
    assert_eq!(n.limit, 40);
}

#[test]
fn sfb_signals_an_unresponsive_flood_hard_while_a_sparse_flow_keeps_low_loss() {
    let mut q = Sfb::new(SfbConfig::default(), 5);
    let flows = [cbr(50_000_000, 1514), cbr(200_000, 200)];
    let res = run(&mut q, LINK, &flows, 20 * SEC, 10 * SEC);
    let flood = packet(&frame(0, 1514, 0), 0, Instant::ZERO);
    let sparse = packet(&frame(1, 200, 0), 1, Instant::ZERO);
    // The flood's bins settle where its accepted rate matches the link: p ~ 1 - 10/50.
    let pf = q.mark_probability(&flood);
    assert!(pf > 0.7, "flood p_min {pf}");
    assert!(q.mark_probability(&sparse) < 0.01);
    let sent = res[1].delivered_bytes / 200 + res[1].losses;
    let loss = res[1].losses as f64 / sent as f64;
    assert!(loss < 0.01, "sparse loss {loss} ({:?})", res[1].losses);
    let xs = q.sfb_stats();
    assert!(xs.earlydrop > 0, "{xs:?}");
    assert!(q.stats().is_balanced());
}

#[test]
fn sfb_penalty_box_passes_a_saturated_flow_at_penalty_burst_then_penalty_rate() {
    let cfg = SfbConfig {
        target: 1,
        max: 1000,
        increment: SfbConfig::prob(1.0),
        ..SfbConfig::default()
    };
    let mut q = Sfb::new(cfg, 4);
    let t = frame(1, 1000, 0);
    let mut drops = Vec::new();
    let t0 = Instant::from_secs(1);
    // First arrival: bins empty, p stays 0, accepted. Every later one finds p_min = 1.
    for _ in 0..100 {
        q.enqueue(t0, packet(&t, 1, t0), &mut drops);
    }
    assert_eq!(q.mark_probability(&packet(&t, 1, t0)), 1.0);
    assert_eq!(q.backlog().packets, 1 + 20, "one plus penalty_burst");
    assert_eq!(q.sfb_stats().penaltydrop, 79);
    assert!(drops.iter().all(|d| d.reason == DropReason::Blue));
    // A second later the box holds 10 tokens (10 pps).
    let t1 = t0 + Duration::from_secs(1);
    for _ in 0..30 {
        q.enqueue(t1, packet(&t, 1, t1), &mut drops);
    }
    assert_eq!(q.backlog().packets, 21 + 10);
    // Linux quirk kept: arrivals closer than 1/penalty_rate restart the refill clock, so a
    // steady 20 pps inelastic flow gets nothing more through.
    let before = q.backlog().packets;
    for k in 1..=40u64 {
        let now = t1 + Duration::from_millis(50 * k);
        q.enqueue(now, packet(&t, 1, now), &mut drops);
    }
    assert_eq!(q.backlog().packets, before);
    assert!(q.stats().is_balanced());
}

#[test]
fn sfb_marks_ect_packets_where_it_drops_non_ect_ones() {
    let cfg = SfbConfig {
        target: 1,
        max: 1000,
        increment: SfbConfig::prob(0.04),
        ..SfbConfig::default()
    };
    let mut outcome = Vec::new();
    for tos in [ECT0, 0] {
        let mut q = Sfb::new(cfg, 11);
        let t = frame(1, 1000, tos);
        let mut drops = Vec::new();
        // While p_min stays <= 1/2 (the first ~13 arrivals), a hit marks ECT and drops non-ECT.
        for _ in 0..12 {
            q.enqueue(Instant::ZERO, packet(&t, 1, Instant::ZERO), &mut drops);
        }
        outcome.push((q.sfb_stats(), q.stats()));
        assert!(drops.iter().all(|d| d.reason == DropReason::Aqm));
    }
    let (ect, ect_st) = outcome[0];
    let (plain, plain_st) = outcome[1];
    assert!(ect.marked > 0, "{ect:?}");
    assert_eq!(ect.earlydrop, 0);
    assert_eq!(ect_st.ecn_marks, ect.marked);
    assert_eq!(plain.marked, 0);
    assert_eq!(plain.earlydrop, ect.marked, "same seed, same decisions");
    assert_eq!(plain_st.dropped(DropReason::Aqm).packets, plain.earlydrop);
}

#[test]
fn sfb_marks_a_responsive_ecn_flow_instead_of_dropping_it() {
    let mut q = Sfb::new(SfbConfig::default(), 2);
    let res = run(&mut q, LINK, &[reno(true)], 20 * SEC, 2 * SEC);
    let xs = q.sfb_stats();
    assert!(xs.marked > 0 && res[0].marks > 0, "{xs:?}");
    assert_eq!(xs.penaltydrop, 0, "{xs:?}");
    assert!(res[0].delivered_bytes > 0);
}

#[test]
fn sfb_defaults_are_tc_defaults() {
    let c = SfbConfig::default();
    assert_eq!(c.effective_limit(), 1000);
    assert_eq!(
        (c.max, c.target, c.penalty_rate, c.penalty_burst),
        (25, 20, 10, 20)
    );
    assert_eq!((c.increment, c.decrement), (33, 3));
    assert_eq!(c.rehash, Duration::from_secs(600));
    assert_eq!(c.warmup, Duration::from_secs(60));
    assert_eq!(SfbConfig::prob(0.0005), 33);
}

/// Dequeues from `q` as fast as it allows from `start` to `end`, with at least `keep` packets
/// queued; returns the bytes sent.
fn drive_backlogged(q: &mut dyn Qdisc, start: Instant, end: Instant, keep: u64) -> u64 {
    let t = frame(1, 1514, 0);
    let mut drops = Vec::new();
    let mut now = start;
    let mut sent = 0u64;
    while now < end {
        while q.backlog().packets < keep {
            q.enqueue(now, packet(&t, 1, now), &mut drops);
        }
        match q.dequeue(now, &mut drops) {
            Dequeue::Packet(p) => sent += u64::from(p.len()),
            Dequeue::NotBefore(t) => {
                assert!(t > now);
                now = t;
            }
            Dequeue::Empty => panic!("backlogged shaper returned Empty"),
        }
    }
    sent
}

fn fifo() -> Fifo {
    Fifo::new(FifoConfig::packets(10_000))
}

#[test]
fn htb_shapes_a_backlog_to_its_rate_within_half_a_percent() {
    for rate in [2_500_000u64, 375_000, 12_500_000] {
        let mut q = Htb::new(HtbConfig::with_rate_burst(rate, 15 * 1024), fifo());
        let sent = drive_backlogged(&mut q, Instant::ZERO, Instant::from_secs(10), 20);
        let expect = rate as f64 * 10.0;
        let err = (sent as f64 - expect).abs() / expect;
        assert!(err < 0.005, "rate {rate}: sent {sent}, err {err}");
        assert!(q.stats().overlimits > 0);
    }
}

#[test]
fn htb_sends_at_most_its_burst_after_idle() {
    let rate = 2_500_000;
    // cburst = burst: the burst after idle is `burst` bytes plus at most the packet that
    // crosses it (the bucket may go negative by one packet).
    let cfg = HtbConfig {
        cburst: 15 * 1024,
        ..HtbConfig::with_rate_burst(rate, 15 * 1024)
    };
    for (cfg, limit) in [
        (cfg, 15 * 1024u64),
        // As tc sets it up from `rate R burst 15k`: cburst stays at 1600 bytes and caps the burst.
        (HtbConfig::with_rate_burst(rate, 15 * 1024), 1600),
    ] {
        let mut q = Htb::new(cfg, fifo());
        let mut drops = Vec::new();
        // Busy for a second, drained, then idle for two seconds.
        drive_backlogged(&mut q, Instant::ZERO, Instant::from_secs(1), 5);
        let mut now = Instant::from_secs(1);
        loop {
            match q.dequeue(now, &mut drops) {
                Dequeue::Packet(_) => {}
                Dequeue::NotBefore(t) => now = t,
                Dequeue::Empty => break,
            }
        }
        let t0 = now + Duration::from_secs(2);
        let t = frame(1, 1514, 0);
        for _ in 0..40 {
            q.enqueue(t0, packet(&t, 1, t0), &mut drops);
        }
        let mut burst = 0u64;
        let last = loop {
            match q.dequeue(t0, &mut drops) {
                Dequeue::Packet(p) => burst += u64::from(p.len()),
                other => break other,
            }
        };
        assert!(matches!(last, Dequeue::NotBefore(_)), "{last:?}");
        assert!(
            burst > limit && burst - 1514 <= limit,
            "burst {burst} limit {limit}"
        );
    }
}

#[test]
fn htb_not_before_is_when_the_tokens_are_back_at_zero() {
    let rate = 2_500_000; // 400 ns per byte
    let mut q = Htb::new(
        HtbConfig {
            rate,
            burst: 0,
            ceil: rate,
            cburst: 0,
        },
        fifo(),
    );
    let t = frame(1, 1514, 0);
    let mut drops = Vec::new();
    let t0 = Instant::from_secs(1);
    for _ in 0..4 {
        q.enqueue(t0, packet(&t, 1, t0), &mut drops);
    }
    assert!(matches!(q.dequeue(t0, &mut drops), Dequeue::Packet(_)));
    let t1 = t0 + Duration::from_nanos(1514 * 400);
    assert_eq!(q.dequeue(t0, &mut drops), Dequeue::NotBefore(t1));
    assert_eq!(
        q.dequeue(t1 - Duration::from_nanos(1), &mut drops),
        Dequeue::NotBefore(t1)
    );
    assert!(matches!(q.dequeue(t1, &mut drops), Dequeue::Packet(_)));
    // Late by 100 µs: the debt is counted from the late send (no credit, as burst is 0).
    let late = t1 + Duration::from_micros(700);
    assert!(matches!(q.dequeue(late, &mut drops), Dequeue::Packet(_)));
    assert_eq!(
        q.dequeue(late, &mut drops),
        Dequeue::NotBefore(late + Duration::from_nanos(1514 * 400))
    );
    let t3 = late + Duration::from_nanos(1514 * 400);
    assert!(matches!(q.dequeue(t3, &mut drops), Dequeue::Packet(_)));
    assert_eq!(q.dequeue(t3, &mut drops), Dequeue::Empty);
}

#[test]
fn htb_set_rate_applies_live() {
    let mut q = Htb::new(HtbConfig::with_rate_burst(2_500_000, 15 * 1024), fifo());
    drive_backlogged(&mut q, Instant::ZERO, Instant::from_secs(5), 20);
    q.set_rate(Some(qdisc::Rate::from_bytes_per_s(1_250_000)))
        .expect("htb has a shaper");
    assert_eq!(q.config().rate, 1_250_000);
    assert_eq!(q.config().ceil, 1_250_000);
    let sent = drive_backlogged(&mut q, Instant::from_secs(5), Instant::from_secs(10), 20);
    let err = (sent as f64 - 1_250_000.0 * 5.0).abs() / (1_250_000.0 * 5.0);
    assert!(err < 0.005, "sent {sent} err {err}");
    // Unlimited: everything leaves at once.
    q.set_rate(None).expect("htb has a shaper");
    let mut drops = Vec::new();
    let now = Instant::from_secs(10);
    let n = q.backlog().packets;
    for _ in 0..n {
        assert!(matches!(q.dequeue(now, &mut drops), Dequeue::Packet(_)));
    }
    assert_eq!(q.dequeue(now, &mut drops), Dequeue::Empty);
}

#[test]
fn htb_child_aqm_sees_the_sojourn_of_packets_held_by_the_shaper() {
    let child = Codel::new(CodelConfig {
        ecn: false,
        ..CodelConfig::default()
    });
    let mut q = Htb::new(HtbConfig::with_rate_burst(1_250_000, 15 * 1024), child);
    // 20 Mbit/s offered into a 10 Mbit/s shaper behind a fast link: CoDel must act.
    let res = run(
        &mut q,
        100_000_000,
        &[cbr(20_000_000, 1514)],
        10 * SEC,
        2 * SEC,
    );
    let st = q.stats();
    assert!(st.dropped(DropReason::Aqm).packets > 100, "{st:?}");
    let rate = res[0].delivered_bytes as f64 * 8.0 / 8.0;
    assert!((rate - 10_000_000.0).abs() < 0.01 * 10_000_000.0, "{rate}");
}
