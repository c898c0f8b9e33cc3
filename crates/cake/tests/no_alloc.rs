//! The steady-state benchmark loop must not touch the heap: a counting global allocator counts
//! allocations made by this thread while the loop runs.
#![allow(unsafe_code)] // A GlobalAlloc impl is unsafe by definition; it only forwards to System.

use cake::bench::{BenchQdisc, EngineBench};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Counting;

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

fn note() {
    // `try_with`: thread-locals may be gone during thread teardown. Const-initialised Cells
    // never allocate, so this cannot recurse.
    if COUNTING.try_with(Cell::get).unwrap_or(false) {
        let _ = ALLOCS.try_with(|a| a.set(a.get() + 1));
    }
}

// SAFETY: every method forwards to `System` with the caller's arguments unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note();
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note();
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note();
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations made by `f` on this thread.
fn allocations_during(f: impl FnOnce()) -> u64 {
    ALLOCS.with(|a| a.set(0));
    COUNTING.with(|c| c.set(true));
    f();
    COUNTING.with(|c| c.set(false));
    ALLOCS.with(Cell::get)
}

fn steady_state_allocations(kind: BenchQdisc, flows: usize) -> u64 {
    // `new` builds the packets and runs the warm-up.
    let mut b = EngineBench::new(kind, flows);
    allocations_during(|| b.run(20_000))
}

#[test]
fn counting_allocator_sees_allocations() {
    assert!(allocations_during(|| drop(std::hint::black_box(vec![1u8; 64]))) >= 1);
}

#[test]
fn cake_steady_state_with_1024_flows_does_not_allocate() {
    assert_eq!(steady_state_allocations(BenchQdisc::Cake, 1024), 0);
}

#[test]
fn cake_steady_state_with_1_and_10000_flows_does_not_allocate() {
    assert_eq!(steady_state_allocations(BenchQdisc::Cake, 1), 0);
    assert_eq!(steady_state_allocations(BenchQdisc::Cake, 10_000), 0);
}

#[test]
fn baselines_steady_state_with_1024_flows_do_not_allocate() {
    for kind in BenchQdisc::ALL {
        assert_eq!(steady_state_allocations(kind, 1024), 0, "{}", kind.name());
    }
}

/// cake_mq's syncs (every 200 µs of the caller's time) and rate changes allocate nothing either:
/// 4 shards, 64 flows steered by hash, each dequeued packet offered again, the rate changed
/// every 5,000 packets.
#[test]
fn cake_mq_steady_state_with_syncs_and_rate_changes_does_not_allocate() {
    use cake::CakeMq;
    use qdisc::packet::FrameSpec;
    use qdisc::{Dequeue, Instant, Qdisc};

    let mut mq = CakeMq::new(cake::CakeConfig::with_rate(125_000_000), 4, 1)
        .unwrap_or_else(|e| panic!("{e}"));
    let mut drops = Vec::with_capacity(256);
    for f in 0..64u16 {
        let src = std::net::IpAddr::from([10, 0, (f >> 8) as u8, f as u8]);
        let dst = std::net::IpAddr::from([10, 9, 0, 1]);
        for _ in 0..8 {
            let p = FrameSpec::udp(src, dst, 1000 + f, 80)
                .with_payload(1000)
                .packet();
            mq.enqueue(Instant::ZERO, p, &mut drops);
        }
    }
    let mut now = Instant::ZERO;
    let mut steps = |mq: &mut CakeMq, n: u64| {
        for i in 0..n {
            if i % 5_000 == 4_999 {
                let r = if (i / 5_000) % 2 == 0 {
                    100_000_000
                } else {
                    125_000_000
                };
                let _ = mq.set_rate(Some(qdisc::Rate::from_bytes_per_s(r)));
            }
            match mq.dequeue(now, &mut drops) {
                Dequeue::Packet(p) => mq.enqueue(now, p, &mut drops),
                Dequeue::NotBefore(t) => now = t,
                Dequeue::Empty => panic!("the group ran empty"),
            }
            drops.clear();
        }
    };
    steps(&mut mq, 20_000);
    assert!(mq.shards().iter().all(|s| s.active_shards() == 4));
    assert_eq!(allocations_during(|| steps(&mut mq, 20_000)), 0);
}

/// One step of CAKE's default `split-gso` path as the dataplane bridge drives it: a 64 KiB TCP
/// super-packet (45 segments of 1,448 bytes, one of 4 flows) copied into a receive-slot buffer,
/// enqueued (CAKE cuts it into 45 frames), and 45 frames dequeued at 1 Gbit/s, each frame's
/// buffer given back once "sent". With `pool`, buffers come from and go back to it and the
/// segments' through `enqueue_with`; without, plain `enqueue`.
struct SplitGso {
    cake: cake::Cake,
    templates: Vec<Vec<u8>>,
    pool: qdisc::packet::Pool,
    drops: Vec<qdisc::Dropped>,
    now: qdisc::Instant,
    step: usize,
    sent: u64,
}

impl SplitGso {
    const SEGS: usize = 45;

    fn new() -> Self {
        use qdisc::packet::FrameSpec;
        let templates = (0..4u16)
            .map(|f| {
                FrameSpec::tcp([10, 0, 0, 1].into(), [10, 0, 1, 1].into(), 40_000 + f, 5201)
                    .with_tcp_options(vec![1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2])
                    .with_payload(Self::SEGS * 1448)
                    .build()
            })
            .collect();
        SplitGso {
            cake: cake::Cake::new(cake::CakeConfig::with_rate(125_000_000), 1),
            templates,
            pool: qdisc::packet::Pool::default(),
            drops: Vec::with_capacity(256),
            now: qdisc::Instant::ZERO,
            step: 0,
            sent: 0,
        }
    }

    fn run(&mut self, steps: usize, pooled: bool) {
        use qdisc::packet::{Gso, GsoKind, Packet, PacketMeta};
        use qdisc::{Dequeue, Qdisc};
        for _ in 0..steps {
            let mut data = self.pool.slot();
            data.extend_from_slice(&self.templates[self.step % self.templates.len()]);
            self.step += 1;
            let pkt = Packet {
                data,
                meta: PacketMeta {
                    gso: Some(Gso {
                        kind: GsoKind::TcpV4,
                        size: 1448,
                    }),
                    ..PacketMeta::default()
                },
            };
            if pooled {
                self.cake
                    .enqueue_with(self.now, pkt, &mut self.drops, &mut self.pool);
            } else {
                self.cake.enqueue(self.now, pkt, &mut self.drops);
            }
            let mut got = 0;
            while got < Self::SEGS {
                match self.cake.dequeue(self.now, &mut self.drops) {
                    Dequeue::Packet(p) => {
                        got += 1;
                        self.sent += 1;
                        self.pool.put(p.data);
                    }
                    Dequeue::NotBefore(t) => self.now = t,
                    Dequeue::Empty => panic!("the queue ran empty"),
                }
            }
            for d in self.drops.drain(..) {
                self.pool.put(d.packet.data);
            }
        }
    }
}

/// Split-gso of super-packets into pooled buffers (`Qdisc::enqueue_with`, as the bridge does)
/// allocates nothing once the pool and CAKE's storage are warm: no buffer per segment, and the
/// super-packet's buffer goes back to the pool. The same loop through plain `enqueue` allocates
/// every segment (so the count can fail).
#[test]
fn cake_split_gso_into_pooled_buffers_does_not_allocate() {
    let mut pooled = SplitGso::new();
    pooled.run(50, true);
    assert_eq!(allocations_during(|| pooled.run(200, true)), 0);
    assert_eq!(pooled.sent, 250 * SplitGso::SEGS as u64);
    assert_eq!(qdisc::Qdisc::stats(&pooled.cake).dropped_total().packets, 0);

    let mut unpooled = SplitGso::new();
    unpooled.run(50, false);
    let n = allocations_during(|| unpooled.run(200, false));
    assert!(n >= 200 * SplitGso::SEGS as u64, "{n} allocations");
}
