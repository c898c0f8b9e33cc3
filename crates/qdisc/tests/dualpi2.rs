//! Behaviour tests of DualPI2 at the queue level: defaults, classification, the step AQM, the
//! PI2 probabilities, overload, the classic-protection scheduler, limits and GSO splitting. (Its
//! behaviour under TCP, classic CUBIC and scalable Prague, is tested with the TCP model in
//! `crates/experiments/tests/section_d.rs`; its accounting property test is in `baselines.rs`.)

mod common;

use common::{frame, packet, run, FlowSpec, Kind};
use qdisc::dualpi2::{DualPi2, DualPi2Config, EcnClassifier, StepThreshold};
use qdisc::packet::{FrameSpec, Gso, GsoKind};
use qdisc::{Dequeue, DropReason, Dropped, Duration, Instant, Packet, Qdisc};

const MS: u64 = 1_000_000;
const SEC: u64 = 1_000_000_000;
const LINK: u64 = 10_000_000;

const NOT_ECT: u8 = 0;
const ECT1: u8 = 1;
const ECT0: u8 = 2;
const CE: u8 = 3;

fn ecn_of(p: &Packet) -> u8 {
    p.headers().ip.map_or(0xff, |ip| ip.ecn)
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

/// A CBR flow whose frames carry ECN codepoint `ecn`, offered at `rate_bps`, through `q` on a
/// `LINK` for `secs` seconds. The common harness sends its CBR frames Not-ECT, so this drives
/// the queue itself: one packet per interval in, the link drains at its rate. Returns
/// (delivered bytes, sojourn samples in ms after one second, CE marks seen).
fn flood(q: &mut DualPi2, ecn: u8, rate_bps: u64, secs: u64) -> (u64, Vec<f64>, u64) {
    let tmpl = frame(1, 1514, ecn);
    let interval = 1514 * 8 * SEC / rate_bps;
    let tx = 1514 * 8 * SEC / LINK;
    let (mut next_in, mut next_out) = (0u64, 0u64);
    let mut drops = Vec::new();
    let (mut bytes, mut soj, mut marks) = (0u64, Vec::new(), 0u64);
    while next_in.min(next_out) < secs * SEC {
        if next_in <= next_out {
            let t = Instant::from_nanos(next_in);
            q.enqueue(t, packet(&tmpl, 1, t), &mut drops);
            next_in += interval;
        } else {
            let t = Instant::from_nanos(next_out);
            match q.dequeue(t, &mut drops) {
                Dequeue::Packet(p) => {
                    if next_out >= SEC {
                        bytes += u64::from(p.len());
                        soj.push((next_out - (p.meta.tag & ((1 << 48) - 1))) as f64 / 1e6);
                        marks += u64::from(ecn_of(&p) == CE);
                    }
                    next_out += tx;
                }
                _ => next_out = next_in,
            }
        }
    }
    (bytes, soj, marks)
}

/// The upper median of `v` (a test needs samples: none is a failure).
fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    qdisc::quantile::rounded_rank(&v, 0.5).expect("samples")
}

#[test]
fn dualpi2_defaults_are_linux_6_17s() {
    let c = DualPi2Config::default();
    assert_eq!((c.limit, c.memory_limit, c.mtu), (10_000, None, 1514));
    assert_eq!(c.effective_memory_limit(), 10_000 * 2 * 1514);
    assert_eq!(
        (c.target, c.tupdate, c.alpha, c.beta),
        (
            Duration::from_millis(15),
            Duration::from_millis(16),
            0.16,
            3.2
        )
    );
    assert_eq!(c.step, StepThreshold::Time(Duration::from_millis(1)));
    assert_eq!((c.min_qlen_step, c.coupling_factor), (0, 2));
    assert!(c.drop_overload && !c.drop_early && c.split_gso);
    assert_eq!(
        (c.classic_protection, c.classifier),
        (10, EcnClassifier::L4sEct)
    );
    let q = DualPi2::new(c, 1);
    assert_eq!(q.kind(), "dualpi2");
    // The scheduler starts on the L-queue: credit mtu * (10 - 90).
    assert_eq!(q.xstats(Instant::ZERO).credit, -1514 * 80);
}

#[test]
fn ect1_and_ce_take_the_l_queue_and_everything_else_the_c_queue() {
    let mut q = DualPi2::new(DualPi2Config::default(), 1);
    let mut drops = Vec::new();
    for ecn in [NOT_ECT, ECT1, ECT0, CE] {
        q.enqueue(Instant::ZERO, Packet::new(frame(1, 500, ecn)), &mut drops);
    }
    // A frame that is not IP.
    q.enqueue(Instant::ZERO, Packet::new(vec![0xab; 80]), &mut drops);
    assert!(drops.is_empty());
    assert_eq!(
        (q.l4s_backlog().packets, q.classic_backlog().packets),
        (2, 3)
    );
    let x = q.xstats(Instant::ZERO);
    assert_eq!((x.packets_in_l, x.packets_in_c), (2, 3));
    // any_ect adds ECT(0) to the L-queue.
    let mut q = DualPi2::new(
        DualPi2Config {
            classifier: EcnClassifier::AnyEct,
            ..DualPi2Config::default()
        },
        1,
    );
    for ecn in [NOT_ECT, ECT1, ECT0, CE] {
        q.enqueue(Instant::ZERO, Packet::new(frame(1, 500, ecn)), &mut drops);
    }
    assert_eq!(
        (q.l4s_backlog().packets, q.classic_backlog().packets),
        (3, 1)
    );
}

#[test]
fn the_step_marks_l4s_packets_above_1ms_of_sojourn_and_nothing_else() {
    let mut q = DualPi2::new(DualPi2Config::default(), 1);
    let mut drops = Vec::new();
    for _ in 0..3 {
        q.enqueue(Instant::ZERO, Packet::new(frame(1, 1514, ECT1)), &mut drops);
        q.enqueue(Instant::ZERO, Packet::new(frame(2, 1514, ECT0)), &mut drops);
    }
    let mut out = Vec::new();
    for us in [900, 1000, 1001, 1500, 2000, 2500] {
        match q.dequeue(Instant::from_micros(us), &mut drops) {
            Dequeue::Packet(p) => out.push((us, ecn_of(&p))),
            other => panic!("{other:?}"),
        }
    }
    // p' is still 0 (no update yet): only the step marks. The L-queue goes first: the credit
    // starts at 1514 * (10 - 90) and three L packets add only 3 * 10 * 1514.
    assert_eq!(
        out,
        [
            (900, ECT1),
            (1000, ECT1),
            (1001, CE),
            (1500, ECT0),
            (2000, ECT0),
            (2500, ECT0)
        ]
    );
    assert!(drops.is_empty());
    let x = q.xstats(Instant::from_micros(2500));
    assert_eq!((x.step_marks, x.ecn_mark), (1, 1));
    assert_eq!(q.stats().ecn_marks, 1);

    // In packets: a packet that leaves more than 2 behind is marked.
    let mut q = DualPi2::new(
        DualPi2Config {
            step: StepThreshold::Packets(2),
            ..DualPi2Config::default()
        },
        1,
    );
    for _ in 0..5 {
        q.enqueue(Instant::ZERO, Packet::new(frame(1, 100, ECT1)), &mut drops);
    }
    let marks: Vec<bool> = (0..5)
        .map(|_| match q.dequeue(Instant::ZERO, &mut drops) {
            Dequeue::Packet(p) => ecn_of(&p) == CE,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(marks, [true, true, false, false, false]);

    // min_qlen_step: only packets that found at least that many in the L-queue are stepped.
    let mut q = DualPi2::new(
        DualPi2Config {
            min_qlen_step: 2,
            ..DualPi2Config::default()
        },
        1,
    );
    for _ in 0..4 {
        q.enqueue(Instant::ZERO, Packet::new(frame(1, 100, ECT1)), &mut drops);
    }
    let marks: Vec<bool> = (0..4)
        .map(|_| match q.dequeue(Instant::from_millis(5), &mut drops) {
            Dequeue::Packet(p) => ecn_of(&p) == CE,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(marks, [false, false, true, true]);
}

#[test]
fn classic_protection_gives_the_c_queue_its_share_of_bytes_when_both_are_backlogged() {
    for (pct, want_c) in [(10u8, 0.10), (50, 0.50), (0, 0.0), (100, 1.0)] {
        let mut q = DualPi2::new(
            DualPi2Config {
                classic_protection: pct,
                ..DualPi2Config::default()
            },
            1,
        );
        let mut drops = Vec::new();
        for _ in 0..2000 {
            q.enqueue(Instant::ZERO, Packet::new(frame(1, 1000, ECT1)), &mut drops);
            q.enqueue(
                Instant::ZERO,
                Packet::new(frame(2, 1000, NOT_ECT)),
                &mut drops,
            );
        }
        // 1000 dequeues at time 0 (no sojourn, p' = 0: nothing is marked or dropped).
        let mut c = 0;
        for _ in 0..1000 {
            match q.dequeue(Instant::ZERO, &mut drops) {
                Dequeue::Packet(p) => c += u32::from(ecn_of(&p) == NOT_ECT),
                other => panic!("{other:?}"),
            }
        }
        let share = f64::from(c) / 1000.0;
        assert!(
            (share - want_c).abs() <= 0.01,
            "classic_protection {pct}: C share {share}"
        );
        assert!(drops.is_empty());
    }
}

#[test]
fn an_unresponsive_classic_flood_raises_p_until_the_classic_drops_match_its_excess() {
    // Not-ECT at twice the link rate: half must go, so p_C = p'^2 settles near 0.5.
    let mut q = DualPi2::new(DualPi2Config::default(), 3);
    let (bytes, soj, marks) = flood(&mut q, NOT_ECT, 2 * LINK, 20);
    let st = q.stats();
    let aqm = st.dropped(DropReason::Aqm).packets;
    let frac = aqm as f64 / st.enqueued.packets as f64;
    println!(
        "classic flood: p' {:.3} p_C {:.3}, AQM drop fraction {frac:.3}, median sojourn {:.1} ms",
        q.base_probability(),
        q.classic_probability(),
        median(&soj)
    );
    assert_eq!(marks, 0);
    assert_eq!(
        st.dropped(DropReason::Overflow).packets,
        0,
        "the AQM, not the limit"
    );
    assert!((0.4..0.6).contains(&frac), "drop fraction {frac}");
    assert!((q.classic_probability() - 0.5).abs() < 0.15);
    // The PI controller holds the queue near its 15 ms target.
    assert!((5.0..30.0).contains(&median(&soj)), "{}", median(&soj));
    assert!(
        bytes as f64 * 8.0 / 19.0 > 0.95 * LINK as f64,
        "link stays full"
    );
}

#[test]
fn responsive_ecn_classic_flows_are_marked_not_dropped() {
    let reno = |ecn| FlowSpec {
        kind: Kind::Reno { ecn },
        size: 1514,
        rtt_ns: 50 * MS,
    };
    let mut q = DualPi2::new(DualPi2Config::default(), 4);
    let r = run(&mut q, LINK, &[reno(true), reno(true)], 40 * SEC, 10 * SEC);
    let st = q.stats();
    println!("ecn classic: {st:?} p' {}", q.base_probability());
    assert!(st.ecn_marks > 10);
    assert_eq!(st.dropped_total().packets, 0, "{st:?}");
    assert!(r.iter().all(|f| f.losses == 0 && f.marks > 0));
    let mean = r.iter().map(|f| f.mean_sojourn()).sum::<f64>() / 2.0;
    assert!((5.0..30.0).contains(&mean), "classic queue {mean:.1} ms");

    let mut q = DualPi2::new(DualPi2Config::default(), 4);
    run(
        &mut q,
        LINK,
        &[reno(false), reno(false)],
        40 * SEC,
        10 * SEC,
    );
    let st = q.stats();
    assert_eq!(st.ecn_marks, 0, "Not-ECT packets are dropped");
    assert!(st.dropped(DropReason::Aqm).packets > 10, "{st:?}");
}

#[test]
fn overload_drops_in_both_queues_by_default_and_overflows_with_overflow() {
    // An unresponsive ECT(1) flood at twice the link rate.
    let mut q = DualPi2::new(DualPi2Config::default(), 5);
    let (_, soj, marks) = flood(&mut q, ECT1, 2 * LINK, 10);
    let st = q.stats();
    println!(
        "drop_on_overload: p' {:.3}, {st:?}, median sojourn {:.2} ms",
        q.base_probability(),
        median(&soj)
    );
    assert!(q.coupled_probability() >= 1.0, "k * p' saturates");
    assert!(st.dropped(DropReason::Aqm).packets > st.enqueued.packets / 3);
    assert_eq!(st.dropped(DropReason::Overflow).packets, 0);
    assert!(marks > 0, "what is not dropped is marked");
    assert!(median(&soj) < 30.0, "the L-queue's delay stays bounded");

    let mut q = DualPi2::new(
        DualPi2Config {
            drop_overload: false,
            limit: 1000,
            ..DualPi2Config::default()
        },
        5,
    );
    let (_, soj, _) = flood(&mut q, ECT1, 2 * LINK, 10);
    let st = q.stats();
    println!(
        "overflow: p' {:.3}, {st:?}, median sojourn {:.1} ms",
        q.base_probability(),
        median(&soj)
    );
    assert!(q.base_probability() <= 0.5 + 1e-9, "p' capped at 1/k");
    assert_eq!(
        st.dropped(DropReason::Aqm).packets,
        0,
        "ECN kept: no AQM drops"
    );
    assert!(st.dropped(DropReason::Overflow).packets > st.enqueued.packets / 3);
    // 1000 packets at 10 Mbit/s: the tail-drop queue holds about 1.2 s.
    assert!(median(&soj) > 1000.0, "{}", median(&soj));
}

#[test]
fn drop_enqueue_takes_the_aqm_decision_on_arrival() {
    let mut q = DualPi2::new(
        DualPi2Config {
            drop_early: true,
            ..DualPi2Config::default()
        },
        6,
    );
    let mut drops: Vec<Dropped> = Vec::new();
    let tmpl = frame(1, 1514, NOT_ECT);
    let tx = 1514 * 8 * SEC / LINK;
    let (mut at_enqueue, mut at_dequeue) = (0, 0);
    // Twice the link rate for 10 s.
    let mut t = 0;
    while t < 10 * SEC {
        let now = Instant::from_nanos(t);
        for _ in 0..2 {
            q.enqueue(now, packet(&tmpl, 1, now), &mut drops);
            at_enqueue += drops.len();
            drops.clear();
        }
        let _ = q.dequeue(now, &mut drops);
        at_dequeue += drops.len();
        drops.clear();
        t += tx;
    }
    assert!(
        at_enqueue > 1000 && at_dequeue == 0,
        "{at_enqueue} / {at_dequeue}"
    );
    assert!(q.stats().is_balanced());
}

#[test]
fn the_packet_and_memory_limits_tail_drop_as_overflow() {
    let mut q = DualPi2::new(
        DualPi2Config {
            limit: 5,
            ..DualPi2Config::default()
        },
        1,
    );
    let mut drops = Vec::new();
    for _ in 0..8 {
        q.enqueue(Instant::ZERO, Packet::new(frame(1, 1000, ECT1)), &mut drops);
    }
    assert_eq!(drops.len(), 3);
    assert!(drops.iter().all(|d| d.reason == DropReason::Overflow));
    let mut q = DualPi2::new(
        DualPi2Config {
            memory_limit: Some(2500),
            ..DualPi2Config::default()
        },
        1,
    );
    drops.clear();
    for _ in 0..4 {
        q.enqueue(
            Instant::ZERO,
            Packet::new(frame(1, 1000, NOT_ECT)),
            &mut drops,
        );
    }
    assert_eq!((drops.len(), q.backlog().packets), (2, 2));
    assert_eq!(q.xstats(Instant::ZERO).max_memory_used, 2000);
}

#[test]
fn gso_super_packets_are_split_unless_no_split_gso() {
    let gso = || {
        let mut p = FrameSpec::tcp(
            "10.0.0.1".parse().expect("literal"),
            "10.0.0.2".parse().expect("literal"),
            1,
            2,
        )
        .with_dscp_ecn(0, ECT1)
        .with_payload(4 * 1448)
        .packet();
        p.meta.gso = Some(Gso {
            kind: GsoKind::TcpV4,
            size: 1448,
        });
        p
    };
    let mut drops = Vec::new();
    let mut q = DualPi2::new(DualPi2Config::default(), 1);
    q.enqueue(Instant::ZERO, gso(), &mut drops);
    assert_eq!(
        (q.stats().enqueued.packets, q.l4s_backlog().packets),
        (4, 4)
    );
    let mut q = DualPi2::new(
        DualPi2Config {
            split_gso: false,
            ..DualPi2Config::default()
        },
        1,
    );
    q.enqueue(Instant::ZERO, gso(), &mut drops);
    assert_eq!(
        (q.stats().enqueued.packets, q.l4s_backlog().packets),
        (1, 1)
    );
}

#[test]
fn same_seed_same_decisions() {
    let go = |seed| {
        let mut q = DualPi2::new(DualPi2Config::default(), seed);
        let r = flood(&mut q, NOT_ECT, 2 * LINK, 3);
        (r.0, q.stats())
    };
    assert_eq!(go(9), go(9));
    assert_ne!(go(9).1, go(10).1);
}

#[test]
fn dualpi2_is_what_the_common_harness_sees_as_a_qdisc() {
    // Through the shared harness: an unresponsive Not-ECT CBR at 1.5x the link.
    let mut q = DualPi2::new(DualPi2Config::default(), 2);
    let r = run(&mut q, LINK, &[cbr(LINK * 3 / 2, 1514)], 10 * SEC, 2 * SEC);
    assert!(r[0].losses > 0);
    assert!(q.stats().is_balanced());
}
