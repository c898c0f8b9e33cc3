//! The steady-state enqueue/dequeue loop behind `cargo bench -p purple-cake` (criterion) and
//! `purple bench engine`, kept here so both measure exactly the same thing.
//!
//! # Method
//! All packets are built once by [`EngineBench::new`]: `flows` distinct UDP 5-tuples with frame
//! sizes spread over 64..=1500 bytes. A standing queue of [`standing_packets`] packets is
//! enqueued (spread evenly over the flows, so every flow stays backlogged), then each
//! [`EngineBench::step`] dequeues one packet, advances virtual time by that packet's
//! transmission time at [`BENCH_RATE_BPS`] (so a shaper set to that rate runs on every packet but
//! rarely blocks) and enqueues the same packet again: its flow goes to the back of the schedule
//! while the scheduler moves on to another flow. Packets the qdisc drops are recycled the same
//! way, one per step, so the standing queue refills. Nothing is allocated per step once the
//! qdisc's own storage has reached its steady-state size (`tests/no_alloc.rs` checks this).
//!
//! The module reads no clock: callers time [`EngineBench::run`] themselves.

use crate::any::AnyQdisc;
use crate::CakeConfig;
use qdisc::codel::{Codel, CodelConfig};
use qdisc::dualpi2::{DualPi2, DualPi2Config};
use qdisc::fifo::{Fifo, FifoConfig};
use qdisc::fq_codel::{FqCodel, FqCodelConfig};
use qdisc::packet::FrameSpec;
use qdisc::pie::{Pie, PieConfig};
use qdisc::{Dequeue, Dropped, Duration, Instant, Packet, Qdisc};
use std::net::{IpAddr, Ipv4Addr};

/// The rate the benchmarks shape CAKE to and advance virtual time at: 10 Gbit/s, in bytes/s.
pub const BENCH_RATE_BPS: u64 = 1_250_000_000;

/// The concurrently active flow counts the benchmarks measure.
pub const FLOW_COUNTS: [usize; 3] = [1, 1024, 10_000];

/// Smallest and largest frame sizes used.
const MIN_FRAME: usize = 64;
const MAX_FRAME: usize = 1500;
/// Bytes of Ethernet + IPv4 + UDP headers in a built frame.
const UDP_HEADERS: usize = 42;

/// A qdisc under benchmark.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BenchQdisc {
    /// CAKE, default configuration shaped at [`BENCH_RATE_BPS`].
    Cake,
    /// `pfifo`.
    Pfifo,
    /// `bfifo`.
    Bfifo,
    /// CoDel.
    Codel,
    /// FQ-CoDel.
    FqCodel,
    /// PIE.
    Pie,
    /// DualPI2 (the benchmark's Not-ECT UDP frames all take its classic queue).
    DualPi2,
}

impl BenchQdisc {
    /// Every qdisc, CAKE first.
    pub const ALL: [BenchQdisc; 7] = [
        BenchQdisc::Cake,
        BenchQdisc::Pfifo,
        BenchQdisc::Bfifo,
        BenchQdisc::Codel,
        BenchQdisc::FqCodel,
        BenchQdisc::Pie,
        BenchQdisc::DualPi2,
    ];

    /// The qdisc's tc name.
    pub fn name(self) -> &'static str {
        match self {
            BenchQdisc::Cake => "cake",
            BenchQdisc::Pfifo => "pfifo",
            BenchQdisc::Bfifo => "bfifo",
            BenchQdisc::Codel => "codel",
            BenchQdisc::FqCodel => "fq_codel",
            BenchQdisc::Pie => "pie",
            BenchQdisc::DualPi2 => "dualpi2",
        }
    }

    /// The qdisc with its default configuration, except that packet and byte limits are raised
    /// to at least twice `standing` packets (of up to 1500 bytes) so that the standing queue
    /// itself never overflows. CAKE's derived memory limit at 10 Gbit/s is already ample.
    pub fn build(self, standing: usize, seed: u64) -> AnyQdisc {
        let limit = u32::try_from(standing.saturating_mul(2)).unwrap_or(u32::MAX);
        match self {
            BenchQdisc::Cake => AnyQdisc::cake(CakeConfig::with_rate(BENCH_RATE_BPS), seed),
            BenchQdisc::Pfifo => Fifo::new(FifoConfig::packets(limit.max(1000))).into(),
            BenchQdisc::Bfifo => {
                Fifo::new(FifoConfig::bytes(u64::from(limit) * MAX_FRAME as u64)).into()
            }
            BenchQdisc::Codel => Codel::new(CodelConfig {
                limit: limit.max(1000),
                ..CodelConfig::default()
            })
            .into(),
            BenchQdisc::FqCodel => FqCodel::new(
                FqCodelConfig {
                    limit: limit.max(10_240),
                    ..FqCodelConfig::default()
                },
                seed,
            )
            .into(),
            BenchQdisc::Pie => Pie::new(
                PieConfig {
                    limit: limit.max(1000),
                    ..PieConfig::default()
                },
                seed,
            )
            .into(),
            BenchQdisc::DualPi2 => DualPi2::new(
                DualPi2Config {
                    limit: limit.max(10_000),
                    ..DualPi2Config::default()
                },
                seed,
            )
            .into(),
        }
    }
}

/// Packets in the standing queue for `flows` active flows: two per flow, at least 64 and at most
/// 10,000 (one per flow at 10,000 flows).
pub fn standing_packets(flows: usize) -> usize {
    flows.saturating_mul(2).clamp(64, 10_000).max(flows)
}

/// Frame size of packet `k` of flow `flow`: deterministic, spread over 64..=1500 bytes.
fn frame_size(flow: usize, k: usize) -> usize {
    let span = MAX_FRAME - MIN_FRAME + 1;
    MIN_FRAME
        + (flow
            .wrapping_mul(7919)
            .wrapping_add(k.wrapping_mul(104_729)))
            % span
}

/// The UDP frame of packet `k` of flow `flow`. Every flow has its own source and destination
/// host (and source port), so CAKE's triple-isolate host fairness leaves each flow a full
/// quantum. (With one shared destination, 1,024 bulk flows cut each flow's DRR quantum to
/// 1514/1024 bytes, and dequeue spends its time refilling deficits: that is CAKE's real
/// behaviour, but not the per-packet cost this benchmark is after.)
pub fn bench_frame(flow: usize, k: usize) -> Packet {
    let f = flow as u32;
    let (hi, lo) = (((f >> 8) & 0xFF) as u8, (f & 0xFF) as u8);
    let src = IpAddr::V4(Ipv4Addr::new(10, 1, hi, lo));
    let dst = IpAddr::V4(Ipv4Addr::new(10, 2, hi, lo));
    let sport = 1024u16.wrapping_add((f % 60_000) as u16);
    FrameSpec::udp(src, dst, sport, 5001)
        .with_payload(frame_size(flow, k) - UDP_HEADERS)
        .packet()
}

/// Transmission time of `len` bytes at [`BENCH_RATE_BPS`], rounded up.
#[inline]
fn tx_time(len: u32) -> Duration {
    // 10 Gbit/s = 0.8 ns per byte.
    Duration::from_nanos((u64::from(len) * 4).div_ceil(5))
}

/// One benchmark case: a qdisc holding a standing queue over `flows` flows. See the module docs.
#[derive(Debug)]
pub struct EngineBench {
    kind: BenchQdisc,
    flows: usize,
    q: AnyQdisc,
    now: Instant,
    drops: Vec<Dropped>,
    pending: Vec<Packet>,
    steps: u64,
    dropped: u64,
    blocked: u64,
}

impl EngineBench {
    /// Builds the packets and the qdisc, enqueues the standing queue and runs a warm-up of three
    /// times the standing queue's length, so that the qdisc's storage has reached its
    /// steady-state size. `flows` is at least 1.
    pub fn new(kind: BenchQdisc, flows: usize) -> Self {
        let flows = flows.max(1);
        let standing = standing_packets(flows);
        let mut b = EngineBench {
            kind,
            flows,
            q: kind.build(standing, 0x5EED),
            now: Instant::from_secs(1),
            drops: Vec::with_capacity(standing),
            pending: Vec::with_capacity(standing),
            steps: 0,
            dropped: 0,
            blocked: 0,
        };
        // Interleave the flows so that each flow's packets are spread over the queue.
        for k in 0..standing.div_ceil(flows) {
            for flow in 0..flows {
                if k * flows + flow < standing {
                    b.q.enqueue(b.now, bench_frame(flow, k), &mut b.drops);
                }
            }
        }
        b.recycle_drops();
        b.run(3 * standing as u64);
        b.steps = 0;
        b.dropped = 0;
        b.blocked = 0;
        b
    }

    fn recycle_drops(&mut self) {
        if !self.drops.is_empty() {
            self.dropped += self.drops.len() as u64;
            for d in self.drops.drain(..) {
                // `pending` has capacity for every packet in existence: no allocation.
                self.pending.push(d.packet);
            }
        }
    }

    /// One packet out and one packet in (plus one recycled drop, if any). See the module docs.
    #[inline]
    pub fn step(&mut self) {
        loop {
            match self.q.dequeue(self.now, &mut self.drops) {
                Dequeue::Packet(p) => {
                    self.now += tx_time(p.len());
                    self.q.enqueue(self.now, p, &mut self.drops);
                    break;
                }
                Dequeue::NotBefore(t) => {
                    self.blocked += 1;
                    self.now = t.max(self.now + Duration::from_nanos(1));
                }
                Dequeue::Empty => match self.pending.pop() {
                    Some(p) => self.q.enqueue(self.now, p, &mut self.drops),
                    None => break,
                },
            }
        }
        self.steps += 1;
        self.recycle_drops();
        if let Some(p) = self.pending.pop() {
            self.q.enqueue(self.now, p, &mut self.drops);
            self.recycle_drops();
        }
    }

    /// Runs `n` steps.
    pub fn run(&mut self, n: u64) {
        for _ in 0..n {
            self.step();
        }
    }

    /// The qdisc under test.
    pub fn kind(&self) -> BenchQdisc {
        self.kind
    }
    /// Active flows.
    pub fn flows(&self) -> usize {
        self.flows
    }
    /// The qdisc itself.
    pub fn qdisc(&self) -> &AnyQdisc {
        &self.q
    }
    /// Steps run since the warm-up.
    pub fn steps(&self) -> u64 {
        self.steps
    }
    /// Packets the qdisc dropped (and the loop recycled) since the warm-up.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }
    /// Dequeues the shaper answered with "not before" since the warm-up.
    pub fn blocked(&self) -> u64 {
        self.blocked
    }
    /// The virtual time now.
    pub fn now(&self) -> Instant {
        self.now
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standing_queue_stays_full_and_accounting_balances() {
        for kind in BenchQdisc::ALL {
            let mut b = EngineBench::new(kind, 1024);
            b.run(5_000);
            let st = b.qdisc().stats();
            assert!(st.is_balanced(), "{kind:?}");
            let queued = st.backlog.packets + b.pending.len() as u64;
            assert_eq!(queued, standing_packets(1024) as u64, "{kind:?}");
            assert_eq!(b.steps(), 5_000);
        }
    }

    #[test]
    fn cake_shaper_advances_with_virtual_time_and_rarely_blocks() {
        let mut b = EngineBench::new(BenchQdisc::Cake, 1024);
        let t0 = b.now();
        b.run(10_000);
        assert!(b.now() > t0);
        assert!(b.blocked() < 10_000 / 2, "blocked {}", b.blocked());
        // Hash collisions merge a few of the 1,024 flows, so COBALT may drop the odd packet.
        assert!(b.dropped() < 100, "dropped {}", b.dropped());
    }

    #[test]
    fn frames_span_64_to_1500_bytes_with_distinct_tuples() {
        let a = bench_frame(0, 0);
        let b = bench_frame(1, 0);
        assert_ne!(a.headers().ip, b.headers().ip);
        for f in 0..3000 {
            let len = bench_frame(f, 0).len() as usize;
            assert!((MIN_FRAME..=MAX_FRAME).contains(&len), "{len}");
        }
    }
}
