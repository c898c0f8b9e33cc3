//! Accounting invariants under random configurations and random operation sequences: after
//! every operation, enqueued = dequeued + dropped (by cause) + queued for packets and bytes, the
//! drops handed back match the drop counters, CAKE's memory stays within its limit after every
//! enqueue, and nothing panics. The same for every baseline through `AnyQdisc`.

mod common;

use cake::{AckFilterMode, AnyQdisc, AtmMode, Cake, CakeConfig, DiffservMode, FlowMode};
use common::ops::{FrameKind, Harness, Op, PktSpec};
use proptest::prelude::*;
use qdisc::codel::{Codel, CodelConfig};
use qdisc::dualpi2::{DualPi2, DualPi2Config, EcnClassifier, StepThreshold};
use qdisc::fifo::{Fifo, FifoConfig};
use qdisc::fq_codel::{FqCodel, FqCodelConfig};
use qdisc::pie::{Pie, PieConfig};
use qdisc::{Duration, Qdisc};

fn rate() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(0u64),
        1_000u64..200_000,
        200_000u64..20_000_000,
        Just(1_250_000_000u64),
    ]
}

fn cake_config() -> impl Strategy<Value = CakeConfig> {
    let modes = (
        rate(),
        any::<bool>(),
        prop::sample::select(DiffservMode::ALL.to_vec()),
        prop::sample::select(FlowMode::ALL.to_vec()),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        prop::sample::select(vec![
            AckFilterMode::None,
            AckFilterMode::Filter,
            AckFilterMode::Aggressive,
        ]),
        any::<bool>(),
    );
    let framing = (
        -64i32..=256,
        any::<bool>(),
        any::<bool>(),
        prop::sample::select(vec![AtmMode::None, AtmMode::Atm, AtmMode::Ptm]),
        0u32..=256,
        1u64..500_000,
        1u64..100_000,
        prop_oneof![
            Just(None),
            (0u32..5_000).prop_map(Some),
            (5_000u32..200_000).prop_map(Some)
        ],
        prop::sample::select(vec![0u32, 0xFF, 0xF0, u32::MAX]),
    );
    (modes, framing).prop_map(
        |(
            (rate_bps, autorate, diffserv, flow_mode, nat, wash, ingress, ack_filter, split_gso),
            (overhead, overhead_set, raw, atm, mpu, rtt_us, target_us, memlimit, fwmark_mask),
        )| CakeConfig {
            rate_bps,
            autorate,
            diffserv,
            flow_mode,
            nat,
            wash,
            ingress,
            ack_filter,
            split_gso,
            overhead,
            overhead_set,
            raw,
            atm,
            mpu,
            rtt_us,
            target_us: target_us.min(rtt_us),
            memlimit,
            fwmark_mask,
            ..CakeConfig::default()
        },
    )
}

fn pkt_spec() -> impl Strategy<Value = PktSpec> {
    let head = (
        prop::sample::select(vec![
            FrameKind::Tcp,
            FrameKind::Tcp,
            FrameKind::Udp,
            FrameKind::Icmp,
            FrameKind::Arp,
            FrameKind::Garbage,
        ]),
        any::<bool>(),
        prop::option::weighted(0.1, any::<u16>()),
        0u8..6,
        0u8..6,
        0u16..4,
        0u16..4,
        any::<u8>(),
        prop_oneof![Just(0x10u16), any::<u16>()],
        (0u32..1 << 20, 0u32..1 << 20),
        prop::collection::vec(any::<u8>(), 0..16),
    );
    let tail = (
        prop_oneof![Just(0u16), 0u16..1500, 1500u16..4000],
        prop::option::weighted(0.15, 0u16..80),
        prop::collection::vec(any::<u8>(), 0..80),
        prop_oneof![Just(0u32), any::<u32>()],
        prop_oneof![
            Just(0u32),
            (0u32..10).prop_map(|m| 0x8001_0000 | m),
            any::<u32>()
        ],
        prop::option::weighted(0.15, (0u8..3, prop_oneof![Just(0u16), 1u16..3000])),
        prop_oneof![Just(0u16), 0u16..3000],
        prop::option::weighted(0.2, (any::<u8>(), any::<u16>())),
    );
    (head, tail).prop_map(
        |(
            (kind, v6, vlan, src_host, dst_host, sport, dport, tos, tcp_flags, (seq, ack), opts),
            (payload, truncate, garbage, mark, priority, gso, pad, nat),
        )| PktSpec {
            kind,
            v6,
            vlan,
            src_host,
            dst_host,
            sport,
            dport,
            tos,
            tcp_flags,
            seq,
            ack,
            tcp_options: opts,
            payload,
            truncate,
            garbage,
            mark,
            priority,
            gso,
            pad,
            nat,
        },
    )
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => pkt_spec().prop_map(Op::Enqueue),
        4 => prop_oneof![Just(0u32), 0u32..100_000, 0u32..50_000_000].prop_map(Op::Dequeue),
        1 => prop_oneof![Just(None), rate().prop_map(|r| (r != 0).then_some(r))].prop_map(Op::SetRate),
    ]
}

fn baseline() -> impl Strategy<Value = AnyQdisc> {
    prop_oneof![
        (1u32..50).prop_map(|l| Fifo::new(FifoConfig::packets(l)).into()),
        (0u64..60_000).prop_map(|l| Fifo::new(FifoConfig::bytes(l)).into()),
        (1u32..50, any::<bool>(), 1u64..20).prop_map(|(limit, ecn, ms)| Codel::new(CodelConfig {
            limit,
            ecn,
            target: Duration::from_millis(ms),
            ..CodelConfig::default()
        })
        .into()),
        (
            1u32..64,
            1u32..3000,
            1u32..50,
            0u64..60_000,
            any::<bool>(),
            1u32..8
        )
            .prop_map(|(flows, quantum, limit, memory_limit, ecn, drop_batch)| {
                FqCodel::new(
                    FqCodelConfig {
                        flows,
                        quantum,
                        limit,
                        memory_limit,
                        ecn,
                        drop_batch,
                        ..FqCodelConfig::default()
                    },
                    7,
                )
                .into()
            }),
        (1u32..50, any::<bool>(), any::<bool>(), 1u64..30).prop_map(
            |(limit, ecn, bytemode, ms)| Pie::new(
                PieConfig {
                    limit,
                    ecn,
                    bytemode,
                    target: Duration::from_millis(ms),
                    ..PieConfig::default()
                },
                9
            )
            .into()
        ),
        (
            (1u32..50, prop::option::of(0u64..60_000), 0u64..20, 0u8..5),
            (
                any::<bool>(),
                any::<bool>(),
                0u8..=100,
                any::<bool>(),
                any::<bool>()
            ),
            prop_oneof![
                (0u64..3_000).prop_map(|us| StepThreshold::Time(Duration::from_micros(us))),
                (0u32..8).prop_map(StepThreshold::Packets),
            ],
        )
            .prop_map(
                |(
                    (limit, memory_limit, ms, coupling_factor),
                    (drop_overload, drop_early, classic_protection, any_ect, split_gso),
                    step,
                )| DualPi2::new(
                    DualPi2Config {
                        limit,
                        memory_limit,
                        target: Duration::from_millis(ms),
                        // Gains large enough that short sequences reach overload too.
                        alpha: 50.0,
                        beta: 500.0,
                        coupling_factor,
                        drop_overload,
                        drop_early,
                        classic_protection,
                        classifier: if any_ect {
                            EcnClassifier::AnyEct
                        } else {
                            EcnClassifier::L4sEct
                        },
                        split_gso,
                        step,
                        ..DualPi2Config::default()
                    },
                    11
                )
                .into()
            ),
    ]
}

fn run(q: AnyQdisc, ops: &[Op]) -> Result<(), TestCaseError> {
    let mut h = Harness::new(q);
    for (i, op) in ops.iter().enumerate() {
        h.apply(op)
            .map_err(|e| TestCaseError::fail(format!("after op {i} {op:?}: {e}")))?;
    }
    // Make sure the drain terminates: a tiny shaped rate could take very long in virtual time,
    // but every dequeue step moves at least one packet or time forward.
    h.drain()
        .map_err(|e| TestCaseError::fail(format!("drain: {e}")))?;
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn cake_accounting_balances_after_every_op(
        cfg in cake_config(),
        seed in any::<u64>(),
        ops in prop::collection::vec(op(), 1..120),
    ) {
        run(Cake::new(cfg, seed).into(), &ops)?;
    }

    #[test]
    fn baselines_accounting_balances_after_every_op(
        q in baseline(),
        ops in prop::collection::vec(op(), 1..120),
    ) {
        run(q, &ops)?;
    }
}

#[test]
fn cake_with_tiny_memlimit_stays_within_it_under_a_burst() {
    let cfg = CakeConfig {
        memlimit: Some(3_000),
        ..CakeConfig::with_rate(1_000)
    };
    let mut h = Harness::new(Cake::new(cfg, 1).into());
    for i in 0..200u16 {
        let spec = PktSpec {
            kind: FrameKind::Udp,
            v6: i % 2 == 0,
            vlan: None,
            src_host: (i % 5) as u8,
            dst_host: 1,
            sport: i,
            dport: 53,
            tos: 0,
            tcp_flags: 0,
            seq: 0,
            ack: 0,
            tcp_options: vec![],
            payload: 1000,
            truncate: None,
            garbage: vec![],
            mark: 0,
            priority: 0,
            gso: None,
            pad: 0,
            nat: None,
        };
        if let Err(e) = h.apply(&Op::Enqueue(spec)) {
            panic!("enqueue {i}: {e}");
        }
    }
    let st = h.q.stats();
    assert!(st.dropped(qdisc::DropReason::Overflow).packets > 0);
    if let Err(e) = h.drain() {
        panic!("{e}");
    }
}

/// Found by the `qdisc_ops` fuzz target: with only zero-length packets queued, every flow's byte
/// backlog is 0, the fattest-flow heap pointed at an empty flow, and the memory-limit loop in
/// enqueue spun forever.
#[test]
fn cake_memlimit_overflow_with_zero_length_packets_terminates() {
    let cfg = CakeConfig {
        memlimit: Some(500),
        ..CakeConfig::default()
    };
    let mut q = Cake::new(cfg, 3);
    let mut drops = Vec::new();
    for i in 0..50u64 {
        let mut p = qdisc::Packet::new(Vec::new());
        p.meta.tag = i;
        q.enqueue(qdisc::Instant::ZERO, p, &mut drops);
        assert!(q.memory_used() <= 500);
    }
    let st = q.stats();
    assert!(st.is_balanced());
    assert_eq!(
        st.dropped(qdisc::DropReason::Overflow).packets,
        drops.len() as u64
    );
    assert!(!drops.is_empty());
}

/// A pure ACK 10.0.0.1:1 -> 10.0.0.2:2 acknowledging `ack` (`udp`: a UDP datagram of another
/// flow instead), padded by `pad` bytes (the padding counts in the packet's length, as a short
/// frame's Ethernet padding does).
fn small(ack: u32, pad: u16, udp: bool) -> PktSpec {
    PktSpec {
        kind: if udp { FrameKind::Udp } else { FrameKind::Tcp },
        v6: false,
        vlan: None,
        src_host: 1,
        dst_host: 2,
        sport: 1,
        dport: if udp { 3 } else { 2 },
        tos: 0,
        tcp_flags: 0x10,
        seq: 1,
        ack,
        tcp_options: vec![],
        payload: 0,
        truncate: None,
        garbage: vec![],
        mark: 0,
        priority: 0,
        gso: None,
        pad,
        nat: None,
    }
}

/// Found by the `qdisc_ops` fuzz target (issue 15, item 1): the ACK filter removed a queued
/// ACK longer than the ACK just added, and enqueue's "bytes added" underflowed: a panic in
/// debug builds; in release the wrapped value (about 2^64) entered autorate-ingress's byte
/// window whenever a sample had reset it since the longer ACK arrived, and the next sample
/// read it as the link's capacity. The sequence: long ACKs queued, a sample, a short ACK.
#[test]
fn ack_filter_dropping_a_longer_queued_ack_does_not_underflow() {
    for (mode, long_acks) in [(AckFilterMode::Aggressive, 1), (AckFilterMode::Filter, 2)] {
        let cfg = CakeConfig {
            ack_filter: mode,
            autorate: true,
            ..CakeConfig::with_rate(1_250_000)
        };
        let mut h = Harness::new(Cake::new(cfg, 1).into());
        let mut ops = vec![Op::Enqueue(small(0, 0, true))];
        for k in 0..long_acks {
            ops.push(Op::Enqueue(small(1_000 + k, 500, false)));
        }
        ops.extend([
            // 2 s later (a gap: autorate samples and resets its byte window) the UDP datagram
            // leaves and another arrives; then a short ACK makes the filter drop a long one.
            Op::Dequeue(2_000_000_000),
            Op::Enqueue(small(0, 0, true)),
            Op::Enqueue(small(3_000, 0, false)),
            // The next sample reads the window.
            Op::Dequeue(2_000_000_000),
            Op::Enqueue(small(0, 0, true)),
        ]);
        for (i, op) in ops.iter().enumerate() {
            if let Err(e) = h.apply(op) {
                panic!("{mode:?}: after op {i} {op:?}: {e}");
            }
        }
        let c = h.q.as_cake().expect("cake");
        let st = c.cake_stats();
        assert!(
            st.tins.iter().map(|t| t.ack_drops).sum::<u64>() >= 1,
            "{mode:?}: the filter dropped no ACK: {st:?}"
        );
        // A few hundred bytes in 2 s: never anything near 2^64 bytes/s.
        assert!(
            st.capacity_estimate < 1_000_000_000,
            "{mode:?}: capacity estimate {}",
            st.capacity_estimate
        );
        if let Err(e) = h.drain() {
            panic!("{mode:?}: drain: {e}");
        }
    }
}
