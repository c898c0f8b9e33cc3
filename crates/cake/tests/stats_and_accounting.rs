//! `tc -s qdisc` statistics semantics and accounting: delay EWMAs, flow counts, sizes, header
//! offsets, the enqueued = dequeued + dropped + backlog invariant, run-time rate changes,
//! autorate-ingress, ingress drop charging and GSO splitting.

mod common;

use cake::{Cake, CakeConfig, DiffservMode};
use common::{udp, v4, Sim, Source};
use qdisc::packet::{FrameSpec, Gso, GsoKind};
use qdisc::{Dequeue, Duration, Instant, Packet, Qdisc};

const RATE: u64 = 2_500_000; // 20 Mbit: exactly 400 ns per byte

fn besteffort(rate: u64) -> CakeConfig {
    CakeConfig {
        diffserv: DiffservMode::Besteffort,
        ..CakeConfig::with_rate(rate)
    }
}

fn loaded_sim() -> Sim {
    let mut sim = Sim::new(Cake::new(besteffort(RATE), 3));
    for i in 0..2u16 {
        sim.add(Source::greedy(
            udp(v4(10, 0, 0, 1), v4(192, 0, 2, 1), 100 + i, 80, 1514),
            RATE as f64,
        ));
    }
    sim.add(Source::ping(
        FrameSpec::icmp_echo(v4(10, 0, 0, 2), v4(192, 0, 2, 9), 1, 1)
            .with_payload(56)
            .packet(),
        Duration::from_millis(20),
    ));
    sim
}

#[test]
fn delay_ewmas_are_nonzero_after_traffic_and_flow_counts_split_sparse_from_bulk() {
    let mut sim = loaded_sim();
    sim.run_until(Instant::from_millis(2_005));
    let t = sim.q.cake_stats().tins[0];
    assert!(
        t.avg_delay_us > 0 && t.peak_delay_us > 0 && t.base_delay_us > 0,
        "{t:?}"
    );
    assert!(t.peak_delay_us >= t.base_delay_us, "{t:?}");
    // Two backlogged greedy flows are bulk; the ping flow is sparse (or decaying, which tc
    // counts as sparse).
    assert_eq!(t.bulk_flows, 2, "{t:?}");
    assert_eq!(t.sparse_flows, 1, "{t:?}");
    assert_eq!(t.max_pkt_len, 1514);
    // The ping flow's packets waited far less than the bulk flows'.
    let (bulk, ping) = (sim.acct[0].mean_delay(), sim.acct[2].mean_delay());
    assert!(
        ping.saturating_mul(10) < bulk,
        "ping {ping:?} bulk {bulk:?}"
    );
}

#[test]
fn size_stats_track_network_and_adjusted_lengths() {
    // `ethernet`: overhead 38 after removing the MAC header, mpu 84.
    let cfg = CakeConfig {
        overhead_set: true,
        overhead: 38,
        mpu: 84,
        ..besteffort(RATE)
    };
    let mut q = Cake::new(cfg, 1);
    let mut drops = Vec::new();
    for len in [60usize, 1514, 400] {
        q.enqueue(
            Instant::ZERO,
            udp(v4(1, 1, 1, 1), v4(2, 2, 2, 2), 1, 1, len),
            &mut drops,
        );
    }
    let s = q.cake_stats();
    assert_eq!((s.min_network_size, s.max_network_size), (46, 1500));
    assert_eq!((s.min_adj_size, s.max_adj_size), (84, 1538));
    assert_eq!(s.tins[0].max_pkt_len, 1514, "max_len is the frame length");
    assert_eq!(
        s.avg_hdr_offset, 0,
        "three samples of an EWMA with weight 1/256 round to 0"
    );

    // raw: nothing is subtracted, so the "network" size is the frame length (the kernel only
    // strips the MAC header when an overhead is configured).
    let mut q = Cake::new(besteffort(RATE), 1);
    q.enqueue(
        Instant::ZERO,
        udp(v4(1, 1, 1, 1), v4(2, 2, 2, 2), 1, 1, 60),
        &mut drops,
    );
    let s = q.cake_stats();
    assert_eq!((s.min_network_size, s.max_network_size), (60, 60));
    assert_eq!((s.min_adj_size, s.max_adj_size), (60, 60));
}

fn avg_hdr_offset(vlan: bool) -> u32 {
    let mut q = Cake::new(besteffort(0), 1);
    let mut drops = Vec::new();
    let mut spec = FrameSpec::udp(v4(1, 1, 1, 1), v4(2, 2, 2, 2), 1, 1).with_payload(100);
    if vlan {
        spec = spec.with_vlan(7);
    }
    let p = spec.packet();
    for i in 0..3000u64 {
        let now = Instant::from_micros(i);
        q.enqueue(now, p.clone(), &mut drops);
        let _ = q.dequeue(now, &mut drops);
    }
    q.cake_stats().avg_hdr_offset
}

#[test]
fn avg_hdr_offset_is_14_for_ethernet_and_18_with_a_vlan_tag() {
    assert_eq!(avg_hdr_offset(false), 14);
    assert_eq!(avg_hdr_offset(true), 18);
}

#[test]
fn accounting_balances_through_overflow_aqm_ecn_and_gso() {
    let cfg = CakeConfig {
        memlimit: Some(200_000),
        ..CakeConfig::with_rate(RATE)
    };
    let mut sim = Sim::new(Cake::new(cfg, 8));
    sim.add(Source::greedy(
        udp(v4(10, 0, 0, 1), v4(192, 0, 2, 1), 1, 2, 1514),
        1.5 * RATE as f64,
    ));
    let ect = FrameSpec::tcp(v4(10, 0, 0, 3), v4(192, 0, 2, 1), 3, 4)
        .with_payload(1000)
        .with_dscp_ecn(46, 2)
        .packet();
    sim.add(Source::greedy(ect, 0.5 * RATE as f64));
    let mut gso = FrameSpec::tcp(v4(10, 0, 0, 4), v4(192, 0, 2, 1), 5, 6)
        .with_payload(8 * 1448)
        .packet();
    gso.meta.gso = Some(Gso {
        kind: GsoKind::TcpV4,
        size: 1448,
    });
    sim.add(Source::greedy(gso, 0.3 * RATE as f64).jittered(0.5));
    for step in 1..=30 {
        sim.run_until(Instant::from_millis(100 * step));
        assert!(
            sim.q.stats().is_balanced(),
            "at {step}: {:?}",
            sim.q.stats()
        );
    }
    let s = sim.q.stats();
    assert!(s.dropped_total().packets > 0 && s.ecn_marks > 0, "{s:?}");
    // The driver's own view: offered = delivered + dropped + still queued, in bytes (GSO
    // super-packets are split, so packet counts differ but bytes are preserved).
    let offered: u64 = sim.acct.iter().map(|a| a.sent_bytes).sum();
    let delivered: u64 = sim.acct.iter().map(|a| a.delivered_bytes).sum();
    let dropped: u64 = sim.acct.iter().map(|a| a.dropped_bytes).sum();
    let gso_hdr_extra = s.enqueued.bytes - offered;
    assert_eq!(
        s.enqueued.bytes,
        delivered + dropped + s.backlog.bytes,
        "qdisc bytes in = out"
    );
    // Splitting replicates the 54 header bytes for every segment after the first.
    assert_eq!(gso_hdr_extra % 54, 0, "{gso_hdr_extra}");
}

fn drain(q: &mut Cake, mut now: Instant) -> Vec<(Instant, Packet)> {
    let mut drops = Vec::new();
    let mut out = Vec::new();
    loop {
        match q.dequeue(now, &mut drops) {
            Dequeue::Packet(p) => out.push((now, p)),
            Dequeue::NotBefore(t) => now = t,
            Dequeue::Empty => return out,
        }
    }
}

#[test]
fn set_rate_at_run_time_keeps_queued_packets_and_applies_the_new_rate() {
    // A long target keeps COBALT out of the way: the 50 packets wait up to 60 ms.
    let cfg = CakeConfig {
        target_us: 1_000_000,
        rtt_us: 2_000_000,
        ..besteffort(125_000) // 1 Mbit
    };
    let mut q = Cake::new(cfg, 1);
    let mut drops = Vec::new();
    for i in 0..50u16 {
        q.enqueue(
            Instant::ZERO,
            udp(v4(10, 0, 0, 1), v4(192, 0, 2, 1), 1 + i % 5, 2, 1514),
            &mut drops,
        );
    }
    assert_eq!(q.backlog().packets, 50);
    q.set_rate(Some(qdisc::Rate::from_bytes_per_s(1_250_000)))
        .expect("cake has a shaper"); // 10 Mbit
    assert_eq!(q.backlog().packets, 50, "no packet lost on reconfiguration");
    assert_eq!(q.rate(), 1_250_000);
    let out = drain(&mut q, Instant::ZERO);
    assert_eq!(out.len(), 50);
    assert!(drops.is_empty());
    // 10 Mbit = 800 ns per byte.
    for w in out.windows(2) {
        assert_eq!(w[1].0 - w[0].0, Duration::from_nanos(1514 * 800));
    }
    // And to unlimited: everything leaves at once.
    for _ in 0..10 {
        q.enqueue(
            Instant::from_secs(1),
            udp(v4(10, 0, 0, 1), v4(192, 0, 2, 1), 1, 2, 1514),
            &mut drops,
        );
    }
    q.set_rate(None).expect("cake has a shaper");
    let out = drain(&mut q, Instant::from_secs(1));
    assert_eq!(out.len(), 10);
    assert!(out.iter().all(|(t, _)| *t == Instant::from_secs(1)));
}

/// The capacity estimate after `secs` of a 10 Mbit constant-rate source, starting from a
/// configured rate of `start` bytes/s.
fn autorate_estimate(start: u64, secs: u64) -> (f64, f64) {
    let cfg = CakeConfig {
        autorate: true,
        ingress: true,
        ..besteffort(start)
    };
    let mut sim = Sim::new(Cake::new(cfg, 1));
    // Constant rate with 2% timing noise, as real clocks have: the estimator samples at
    // arrival gaps (an inter-arrival time above its running average), and a perfectly periodic
    // stream stops producing gaps once that average has settled exactly.
    sim.add(
        Source::greedy(udp(v4(10, 0, 0, 1), v4(192, 0, 2, 1), 1, 2, 1514), ARRIVAL).jittered(0.02),
    );
    sim.run_until(Instant::from_secs(secs));
    (
        sim.q.cake_stats().capacity_estimate as f64,
        sim.q.rate() as f64,
    )
}

const ARRIVAL: f64 = 1_250_000.0;

#[test]
fn autorate_ingress_estimate_converges_to_the_arrival_rate_from_below() {
    // Configured at 1 Mbit: the estimate rises fast (EWMA weight 1/4 upwards).
    let (est, rate) = autorate_estimate(125_000, 3);
    common::assert_rel(est, ARRIVAL, 0.10, "capacity estimate");
    common::assert_rel(rate, est * 15.0 / 16.0, 0.01, "shaper at 15/16 of it");
}

#[test]
fn autorate_ingress_estimate_converges_to_the_arrival_rate_from_above() {
    // Configured at 20 Mbit: the estimate falls slowly (weight 1/256 per gap sample).
    let (est, rate) = autorate_estimate(2_500_000, 8);
    common::assert_rel(est, ARRIVAL, 0.10, "capacity estimate");
    common::assert_rel(rate, est * 15.0 / 16.0, 0.01, "shaper at 15/16 of it");
}

/// (delivered bytes, dropped bytes) over 10 s of an unresponsive flow at 1.2x the rate.
fn overload(ingress: bool) -> (f64, f64) {
    let cfg = CakeConfig {
        ingress,
        ..besteffort(RATE)
    };
    let mut sim = Sim::new(Cake::new(cfg, 6));
    sim.add(
        Source::greedy(
            udp(v4(10, 0, 0, 1), v4(192, 0, 2, 1), 1, 2, 1514),
            1.2 * RATE as f64,
        )
        .jittered(0.2),
    );
    sim.run_until(Instant::from_secs(2));
    sim.reset_acct();
    sim.run_until(Instant::from_secs(12));
    (
        sim.acct[0].delivered_bytes as f64 / 10.0,
        sim.acct[0].dropped_bytes as f64 / 10.0,
    )
}

#[test]
fn ingress_mode_charges_dropped_packets_against_the_shaper() {
    // Egress: drops cost nothing, the link carries the full rate.
    let (delivered, dropped) = overload(false);
    assert!(dropped > 0.0);
    common::assert_rel(delivered, RATE as f64, 0.005, "egress delivered");
    // Ingress: every drop (AQM or overflow) is charged to the shaper clock as if sent. With an
    // unresponsive 1.2x overload the charges exceed the rate, the main clock runs ahead of real
    // time, and only the failsafe clock (1.5x the transmit time per packet actually sent)
    // still lets packets out: delivery falls to at most 2/3 of the rate.
    let (delivered, dropped) = overload(true);
    assert!(dropped > 0.25 * RATE as f64, "dropped {dropped}");
    assert!(
        delivered <= RATE as f64 / 1.5 * 1.01,
        "ingress delivered {delivered} above the failsafe pace"
    );
    assert!(
        delivered >= 0.5 * RATE as f64,
        "ingress delivered {delivered}"
    );
}

fn gso_packet() -> Packet {
    let mut p = FrameSpec::tcp(v4(10, 0, 0, 1), v4(192, 0, 2, 1), 1000, 80)
        .with_payload(10 * 1448)
        .packet();
    p.meta.gso = Some(Gso {
        kind: GsoKind::TcpV4,
        size: 1448,
    });
    p
}

#[test]
fn gso_super_packets_are_split_by_default_and_shaped_per_segment() {
    let mut q = Cake::new(besteffort(RATE), 1);
    let mut drops = Vec::new();
    q.enqueue(Instant::ZERO, gso_packet(), &mut drops);
    assert_eq!(q.backlog().packets, 10);
    assert_eq!(q.stats().enqueued.packets, 10);
    assert_eq!(q.cake_stats().tins[0].packets, 10);
    let out = drain(&mut q, Instant::ZERO);
    assert_eq!(out.len(), 10);
    for (i, (t, p)) in out.iter().enumerate() {
        assert_eq!(p.len(), 54 + 1448);
        assert_eq!(*t, Instant::from_nanos(i as u64 * 1502 * 400));
    }
    assert!(q.stats().is_balanced());
}

#[test]
fn no_split_gso_keeps_the_super_packet_and_charges_every_segments_headers() {
    let cfg = CakeConfig {
        split_gso: false,
        ..besteffort(RATE)
    };
    let mut q = Cake::new(cfg, 1);
    let mut drops = Vec::new();
    q.enqueue(Instant::ZERO, gso_packet(), &mut drops);
    q.enqueue(
        Instant::ZERO,
        udp(v4(10, 0, 0, 1), v4(192, 0, 2, 1), 1000, 80, 100),
        &mut drops,
    );
    assert_eq!(q.backlog().packets, 2);
    let out = drain(&mut q, Instant::ZERO);
    assert_eq!(out.len(), 2);
    assert_eq!(out[0].1.len(), 54 + 10 * 1448, "delivered whole");
    // Charged as ten 1502-byte segments (15020 bytes), not as its 14534 frame bytes.
    assert_eq!(out[1].0, Instant::from_nanos(10 * 1502 * 400));
}

/// A UDP frame of `len` bytes (10.0.0.1:`sport` -> 192.0.2.1:80) in a buffer of `cap` bytes.
fn frame_in_buffer(sport: u16, len: usize, cap: usize) -> Packet {
    let f = FrameSpec::udp(v4(10, 0, 0, 1), v4(192, 0, 2, 1), sport, 80)
        .with_payload(len - 42)
        .build();
    let mut data = Vec::with_capacity(cap);
    data.extend_from_slice(&f);
    Packet::new(data)
}

/// Issue 15, item 2: the memory limit charges what a queued frame pins (its buffer's capacity,
/// as Linux charges skb truesize), not its length, so short frames in large buffers cannot
/// hold many times the limit.
#[test]
fn the_memory_limit_charges_the_buffer_a_short_frame_pins() {
    let limit = 1_000_000u32;
    let cfg = CakeConfig {
        memlimit: Some(limit),
        ..besteffort(125_000)
    };
    for cap in [64usize, 2_048, 65_792] {
        let mut q = Cake::new(cfg.clone(), 1);
        let mut drops = Vec::new();
        for i in 0..10_000u16 {
            q.enqueue(Instant::ZERO, frame_in_buffer(i, 60, cap), &mut drops);
            assert!(q.memory_used() <= u64::from(limit));
        }
        let queued = q.stats().backlog.packets;
        // Each queued frame is charged at least its buffer: at most limit / cap of them fit.
        let charge = cap.max(60) as u64;
        assert!(
            queued * charge <= u64::from(limit),
            "cap {cap}: {queued} queued"
        );
        // ... and at most the buffer plus our slot: the limit is filled, not left unused.
        let slot = charge + 256;
        assert!(
            queued * slot + slot > u64::from(limit),
            "cap {cap}: {queued} queued"
        );
        assert!(!drops.is_empty(), "cap {cap}: nothing dropped");
    }
}

/// After a burst drains, `shrink` releases the packet slots the burst needed (the slab keeps
/// only a small reserve), keeps the engine working, and is a no-op while packets are queued.
#[test]
fn shrink_after_a_drained_burst_releases_slots_and_keeps_working() {
    let mut q = Cake::new(besteffort(0), 1);
    let mut drops = Vec::new();
    for i in 0..20_000u16 {
        q.enqueue(Instant::ZERO, frame_in_buffer(i, 60, 64), &mut drops);
    }
    assert_eq!(q.shrink(), 0, "shrank with 20,000 packets queued");
    let out = drain(&mut q, Instant::ZERO);
    assert_eq!(out.len(), 20_000);
    let freed = q.shrink();
    // 20,000 slots (at least 64 bytes each) grew the slab far beyond the 1,024 it keeps.
    assert!(freed >= 18_000 * 64, "freed {freed}");
    assert_eq!(q.shrink(), 0, "a second shrink freed more");
    for i in 0..3u16 {
        q.enqueue(Instant::ZERO, frame_in_buffer(i, 100, 128), &mut drops);
    }
    assert_eq!(drain(&mut q, Instant::ZERO).len(), 3);
    assert!(q.stats().is_balanced());
}
