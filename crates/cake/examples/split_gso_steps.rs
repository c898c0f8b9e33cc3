//! Runs a fixed number of steps of CAKE's default `split-gso` path on 64 KiB TCP super-packets,
//! as the dataplane bridge drives it, for instruction counts that do not depend on the clock:
//! under callgrind, the difference between two step counts divided by their difference is the
//! user-space cost of one super-packet (and divided by 45 more, of one segment).
//!
//! One step copies a super-packet of 45 segments of 1,448 bytes (TCP over IPv4 with timestamps,
//! one of 4 flows) into a receive-slot buffer, as the bridge's receive path gets what `recvmmsg`
//! wrote, enqueues it into CAKE shaped at 1 Gbit/s (which cuts it into 45 frames), then
//! dequeues 45 frames, advancing virtual time to each release the shaper asks for, and gives
//! each frame's buffer back as the bridge does once it is sent.
//!
//! `pooled` (the default) does what the bridge does: buffers come from and go back to a
//! [`Pool`], the segments' through [`Qdisc::enqueue_with`]. `unpooled` uses plain
//! [`Qdisc::enqueue`] (each segment allocated at its exact length, every buffer freed after use).
//!
//! `valgrind --tool=callgrind target/release/examples/split_gso_steps 2000 [pooled|unpooled]`

use cake::{Cake, CakeConfig};
use qdisc::packet::buffers::RX_BUF;
use qdisc::packet::{FrameSpec, Gso, GsoKind, Packet, PacketMeta, Pool};
use qdisc::{Dequeue, Instant, Qdisc};

/// Segments per super-packet, and their payload size (MSS).
const SEGS: usize = 45;
const MSS: u16 = 1448;
/// Flows the super-packets rotate over.
const FLOWS: usize = 4;

fn main() {
    let usage = || -> ! {
        eprintln!("usage: split_gso_steps STEPS [pooled|unpooled]");
        std::process::exit(2);
    };
    let args: Vec<String> = std::env::args().collect();
    let Some(Ok(steps)) = args.get(1).map(|s| s.parse::<u64>()) else {
        usage()
    };
    let pooled = match args.get(2).map(String::as_str) {
        None | Some("pooled") => true,
        Some("unpooled") => false,
        Some(_) => usage(),
    };
    let mut pool = Pool::default();
    let templates: Vec<Vec<u8>> = (0..FLOWS as u16)
        .map(|f| {
            FrameSpec::tcp([10, 0, 0, 1].into(), [10, 0, 1, 1].into(), 40_000 + f, 5201)
                .with_tcp_options(vec![1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2])
                .with_payload(SEGS * usize::from(MSS))
                .build()
        })
        .collect();
    let mut cake = Cake::new(CakeConfig::with_rate(125_000_000), 1);
    let mut drops = Vec::new();
    let mut now = Instant::ZERO;
    let (mut sent, mut bytes) = (0u64, 0u64);
    for step in 0..steps {
        let t = &templates[step as usize % FLOWS];
        let mut data = if pooled {
            pool.slot()
        } else {
            Vec::with_capacity(RX_BUF)
        };
        data.extend_from_slice(t);
        let pkt = Packet {
            data,
            meta: PacketMeta {
                gso: Some(Gso {
                    kind: GsoKind::TcpV4,
                    size: MSS,
                }),
                ..PacketMeta::default()
            },
        };
        if pooled {
            cake.enqueue_with(now, pkt, &mut drops, &mut pool);
        } else {
            cake.enqueue(now, pkt, &mut drops);
        }
        let mut got = 0;
        while got < SEGS {
            match cake.dequeue(now, &mut drops) {
                Dequeue::Packet(p) => {
                    got += 1;
                    sent += 1;
                    bytes += p.data.len() as u64;
                    if pooled {
                        pool.put(p.data);
                    } else {
                        drop(p.data);
                    }
                }
                Dequeue::NotBefore(t) => now = t,
                Dequeue::Empty => break,
            }
        }
        for d in drops.drain(..) {
            pool.put(d.packet.data);
        }
    }
    println!(
        "steps {steps} frames sent {sent} bytes {bytes} dropped {} at {} ns",
        cake.stats().dropped_total().packets,
        now.as_nanos()
    );
}
