//! `Cake::class_stats`: after real traffic through a 1 Mbit diffserv3 CAKE, the listed classes
//! are exactly the flows on a DRR++ list (holding packets, or empty but still counted sparse or
//! decaying), in the kernel's order with the kernel's class ids, and every value agrees with
//! the engine's own per-flow and per-tin statistics.

#![allow(clippy::unwrap_used)]

mod common;

use cake::tc::{class_stats_text, ClassStats};
use cake::{tin_order, Cake, CakeConfig, DiffservMode};
use common::v4;
use qdisc::packet::{FrameSpec, Packet};
use qdisc::{Dequeue, Instant, Qdisc};

const QUEUES: usize = 1024;

fn pkt(dscp: u8, sport: u16, frame_len: usize) -> Packet {
    FrameSpec::udp(v4(10, 9, 0, 1), v4(10, 9, 0, 2), sport, 9)
        .with_dscp_ecn(dscp, 0)
        .with_payload(frame_len - 42)
        .packet_padded()
}

fn ms(t: u64) -> Instant {
    Instant::from_nanos(t * 1_000_000)
}

/// Runs `until_ms` of traffic (if `send`) with a dequeue pass every millisecond.
fn run(q: &mut Cake, from_ms: u64, until_ms: u64, send: bool) {
    let mut drops = Vec::new();
    for t in from_ms..until_ms {
        let now = ms(t);
        if send {
            // Best Effort: three UDP flows of 2 Mbit/s each (1256-byte frames every 5 ms).
            if t % 5 == 0 {
                for i in 0..3 {
                    q.enqueue(now, pkt(0, 5000 + i, 1256), &mut drops);
                }
            }
            // Bulk (CS1): 1056-byte frames every 20 ms. Voice (EF): 256-byte frames every 50 ms.
            if t % 20 == 0 {
                q.enqueue(now, pkt(8, 6000, 1056), &mut drops);
            }
            if t % 50 == 0 {
                q.enqueue(now, pkt(46, 7000, 256), &mut drops);
            }
        }
        while let Dequeue::Packet(_) = q.dequeue(now, &mut drops) {}
        drops.clear();
    }
}

fn cake_1mbit() -> Cake {
    let cfg = CakeConfig {
        diffserv: DiffservMode::Diffserv3,
        ..CakeConfig::with_rate(125_000)
    };
    Cake::new(cfg, 11)
}

/// Checks every listed class against the engine's own statistics and that the list is exactly
/// the flows counted by the tins (sparse + decaying + bulk), in ascending class-id order.
fn check_consistent(q: &Cake, classes: &[ClassStats], now: Instant) {
    let order = tin_order(q.config().diffserv);
    let stats = q.cake_stats();
    for w in classes.windows(2) {
        assert!(w[0].class_id < w[1].class_id, "not in kernel order: {w:?}");
    }
    for c in classes {
        let kernel_tin = usize::from(order[c.user_tin()]);
        let f = q.flow_stats(kernel_tin, c.queue(), now).unwrap();
        assert_eq!(
            (c.backlog_bytes, c.backlog_packets, c.deficit, c.count),
            (f.backlog, f.qlen, f.deficit, f.count),
            "class {:x}",
            c.class_id
        );
        assert_eq!((c.dropping, c.p_drop), (f.dropping, f.p_drop));
        assert_eq!(i64::from(c.drop_next_us), -f.drop_next_ns / 1_000);
        assert_eq!(i64::from(c.blue_timer_us), f.blue_timer_ns / 1_000);
    }
    let mut listed_packets = 0u64;
    for (user, &k) in order.iter().take(q.tin_count()).enumerate() {
        let k = usize::from(k);
        let t = &stats.tins[k];
        let in_tin: Vec<&ClassStats> = classes.iter().filter(|c| c.user_tin() == user).collect();
        // sp_flows counts sparse and decaying flows; with bk_flows that is every flow on a list.
        assert_eq!(
            in_tin.len() as u32,
            t.sparse_flows + t.bulk_flows,
            "user tin {user}: listed classes vs flows on the DRR++ lists"
        );
        let bytes: u64 = in_tin.iter().map(|c| u64::from(c.backlog_bytes)).sum();
        assert_eq!(bytes, t.backlog_bytes, "user tin {user}: backlog");
        listed_packets += in_tin
            .iter()
            .map(|c| u64::from(c.backlog_packets))
            .sum::<u64>();
        // Every flow holding packets is listed.
        for queue in 0..QUEUES {
            let f = q.flow_stats(k, queue, now).unwrap();
            let id = ClassStats::class_id_for(user, queue);
            if f.qlen > 0 {
                assert!(
                    in_tin.iter().any(|c| c.class_id == id),
                    "flow {queue} of tin {k} holds {} packets but is not listed",
                    f.qlen
                );
            }
        }
    }
    assert_eq!(
        listed_packets,
        q.backlog().packets,
        "listed packets vs qlen"
    );
}

#[test]
fn class_stats_lists_exactly_the_backlogged_and_decaying_flows_with_kernel_ids() {
    let mut q = cake_1mbit();
    run(&mut q, 0, 3_000, true);
    let now = ms(2_999);
    let classes = q.class_stats(now);
    check_consistent(&q, &classes, now);

    // Three Best Effort flows (user tin 1), backlogged and under COBALT control.
    let be: Vec<&ClassStats> = classes.iter().filter(|c| c.user_tin() == 1).collect();
    assert_eq!(be.len(), 3, "{classes:?}");
    for c in &be {
        assert!((1025..=2048).contains(&c.class_id));
        assert!(c.backlog_packets > 0 && c.drops > 0 && c.count > 0, "{c:?}");
    }
    // The Bulk flow is listed under 1..=1024 and the Voice flow under 2049..=3072.
    assert_eq!(classes.iter().filter(|c| c.user_tin() == 0).count(), 1);
    assert!(classes.iter().any(|c| (2049..=3072).contains(&c.class_id)));
    assert!(classes.iter().all(|c| c.user_tin() < 3));

    // The printed form has four lines per class, the ids in hex.
    let text = class_stats_text(q.config(), &classes);
    assert_eq!(text.lines().count(), 4 * classes.len());
    let first = format!("class cake 8001:{:x} parent 8001: ", classes[0].class_id);
    assert!(text.starts_with(&first), "{text}");
}

#[test]
fn drained_flows_with_cobalt_state_stay_listed_as_decaying_and_hold_nothing() {
    let mut q = cake_1mbit();
    run(&mut q, 0, 2_000, true);
    // Stop sending; let the shaper drain everything.
    run(&mut q, 2_000, 12_000, false);
    assert_eq!(q.backlog().packets, 0);
    let now = ms(11_999);
    let classes = q.class_stats(now);
    check_consistent(&q, &classes, now);
    assert!(classes
        .iter()
        .all(|c| c.backlog_bytes == 0 && c.backlog_packets == 0));
    // The Best Effort flows were dropping hard: their COBALT state keeps them on the decaying
    // list (the kernel only retires decaying flows when a dequeue pass visits them).
    let be: Vec<&ClassStats> = classes.iter().filter(|c| c.user_tin() == 1).collect();
    assert_eq!(be.len(), 3, "{classes:?}");
    assert!(be.iter().all(|c| c.count > 0 && c.drops > 0), "{be:?}");
    // Kernel tin 0 is Best Effort: its three empty flows are decaying (counted in sp_flows).
    let t = q.cake_stats().tins[0];
    assert_eq!((t.sparse_flows, t.bulk_flows), (3, 0));
    // The last flow to empty stays on the old list until a dequeue pass visits it, and dequeue
    // stops once nothing is queued (as in the kernel): here the slow Bulk tin's flow, still
    // counted bulk and listed as class 1..=1024.
    assert_eq!(q.cake_stats().tins[1].bulk_flows, 1);
    assert_eq!(classes.iter().filter(|c| c.user_tin() == 0).count(), 1);
}

#[test]
fn fresh_cake_has_no_classes() {
    let q = cake_1mbit();
    assert!(q.class_stats(ms(1)).is_empty());
    assert_eq!(class_stats_text(q.config(), &[]), "");
}
