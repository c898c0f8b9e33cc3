//! Shared harness for the CAKE behaviour tests: a virtual-time driver with synthetic sources and a
//! link, plus per-flow accounting.
//!
//! * Sources: [`Kind::Greedy`] (unresponsive, fixed offered rate), [`Kind::Aimd`] (a rate-based
//!   responsive source that halves its rate at most once per RTT on a drop or CE mark, and grows
//!   additively by one MSS per RTT per RTT otherwise) and [`Kind::Ping`] (one packet per
//!   interval, sparse).
//! * The link takes a packet whenever the qdisc hands one out; with [`Sim::link_rate`] set it is
//!   also busy for each packet's serialisation time (needed to see anything in unlimited mode).
//! * Every packet carries `meta.tag = source << 48 | enqueue time (ns)`, so delivery and drop
//!   accounting, and sojourn times, need no side tables.
#![allow(dead_code)]

use cake::Cake;
use qdisc::packet::{FlowTuple, FrameSpec, Headers, Packet};
use qdisc::{Dequeue, Dropped, Duration, Instant, Qdisc, Rng};
use std::net::{IpAddr, Ipv4Addr};

/// An IPv4 address `10.0.a.b` style helper: `v4(a, b, c, d)`.
pub fn v4(a: u8, b: u8, c: u8, d: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(a, b, c, d))
}

/// The 5-tuple of a UDP/TCP flow as [`qdisc::packet::FlowTuple`] (IPv4-mapped addresses).
pub fn tuple(src: IpAddr, dst: IpAddr, proto: u8, sport: u16, dport: u16) -> FlowTuple {
    let map = |a: IpAddr| match a {
        IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
        IpAddr::V6(a) => a.octets(),
    };
    FlowTuple {
        src: map(src),
        dst: map(dst),
        proto,
        src_port: sport,
        dst_port: dport,
    }
}

/// How a source emits packets.
#[derive(Clone, Debug)]
pub enum Kind {
    /// Unresponsive: offers `rate` bytes/s (frame bytes) no matter what.
    Greedy {
        /// Offered rate, bytes/s.
        rate: f64,
    },
    /// Responsive AIMD (rate-based TCP-like).
    Aimd {
        /// Current rate, bytes/s.
        rate: f64,
        /// Floor of the rate, bytes/s.
        min_rate: f64,
        /// Base round-trip time: signals reach the source after it, and it reacts at most once
        /// per RTT.
        rtt: Duration,
        /// When the last reaction happened.
        last_cut: Instant,
        /// A pending congestion signal, due at this instant.
        pending: Option<Instant>,
        /// Reactions so far.
        cuts: u64,
    },
    /// One packet per `interval`.
    Ping {
        /// Packet interval.
        interval: Duration,
    },
}

/// A packet source.
#[derive(Clone, Debug)]
pub struct Source {
    /// The packet it emits (cloned for each emission).
    pub template: Packet,
    /// Emission model.
    pub kind: Kind,
    /// Next emission.
    pub next: Instant,
    /// No emissions at or after this.
    pub stop: Instant,
    /// Relative jitter of the emission interval (0 = strictly periodic; 0.5 = +-50%).
    pub jitter: f64,
}

impl Source {
    /// A greedy source emitting `pkt` at `rate` bytes/s from time 0.
    pub fn greedy(pkt: Packet, rate: f64) -> Self {
        Source {
            template: pkt,
            kind: Kind::Greedy { rate },
            next: Instant::ZERO,
            stop: Instant::MAX,
            jitter: 0.0,
        }
    }

    /// A responsive AIMD source starting at `rate` bytes/s with base RTT `rtt`.
    pub fn aimd(pkt: Packet, rate: f64, rtt: Duration) -> Self {
        Source {
            template: pkt,
            kind: Kind::Aimd {
                rate,
                min_rate: 2.0 * 1514.0 / rtt.as_secs_f64(),
                rtt,
                last_cut: Instant::ZERO,
                pending: None,
                cuts: 0,
            },
            next: Instant::ZERO,
            stop: Instant::MAX,
            jitter: 0.0,
        }
    }

    /// A sparse source emitting one `pkt` every `interval`.
    pub fn ping(pkt: Packet, interval: Duration) -> Self {
        Source {
            template: pkt,
            kind: Kind::Ping { interval },
            next: Instant::ZERO,
            stop: Instant::MAX,
            jitter: 0.0,
        }
    }

    /// Sets the start time.
    pub fn starting(mut self, at: Instant) -> Self {
        self.next = at;
        self
    }

    /// Sets the stop time.
    pub fn stopping(mut self, at: Instant) -> Self {
        self.stop = at;
        self
    }

    /// Sets the interval jitter.
    pub fn jittered(mut self, jitter: f64) -> Self {
        self.jitter = jitter;
        self
    }

    fn interval(&mut self, now: Instant) -> f64 {
        let len = f64::from(self.template.len());
        match &mut self.kind {
            Kind::Greedy { rate } => len / *rate,
            Kind::Ping { interval } => interval.as_secs_f64(),
            Kind::Aimd {
                rate,
                min_rate,
                rtt,
                last_cut,
                pending,
                cuts,
            } => {
                if let Some(due) = *pending {
                    if due <= now {
                        *pending = None;
                        *rate = (*rate / 2.0).max(*min_rate);
                        *last_cut = now;
                        *cuts += 1;
                    }
                }
                let rtt_s = rtt.as_secs_f64();
                let gap = len / *rate;
                // Additive increase: one packet per RTT per RTT.
                *rate += len / (rtt_s * rtt_s) * gap;
                gap
            }
        }
    }

    fn signal(&mut self, at: Instant) {
        if let Kind::Aimd {
            rtt,
            last_cut,
            pending,
            ..
        } = &mut self.kind
        {
            // One reaction per RTT, like a TCP that ignores losses within the window it cut.
            if pending.is_none() && at >= *last_cut + *rtt {
                *pending = Some(at + *rtt);
            }
        }
    }

    /// The current rate of an AIMD source (bytes/s).
    pub fn aimd_rate(&self) -> Option<f64> {
        match self.kind {
            Kind::Aimd { rate, .. } => Some(rate),
            _ => None,
        }
    }
}

/// Per-source counters.
#[derive(Clone, Copy, Debug, Default)]
pub struct Acct {
    /// Packets offered.
    pub sent_pkts: u64,
    /// Bytes offered.
    pub sent_bytes: u64,
    /// Packets delivered by the link.
    pub delivered_pkts: u64,
    /// Bytes delivered.
    pub delivered_bytes: u64,
    /// Packets dropped (any reason).
    pub dropped_pkts: u64,
    /// Bytes dropped.
    pub dropped_bytes: u64,
    /// Delivered packets carrying CE.
    pub ce_marks: u64,
    /// Sum of sojourn times of delivered packets, ns.
    pub delay_sum_ns: u128,
    /// Largest sojourn time, ns.
    pub delay_max_ns: u64,
}

impl Acct {
    /// Mean sojourn time of delivered packets.
    pub fn mean_delay(&self) -> Duration {
        if self.delivered_pkts == 0 {
            return Duration::ZERO;
        }
        Duration::from_nanos((self.delay_sum_ns / u128::from(self.delivered_pkts)) as u64)
    }
}

/// One delivered packet, when [`Sim::record`] is on.
#[derive(Clone, Copy, Debug)]
pub struct Delivery {
    /// Dequeue time.
    pub at: Instant,
    /// Frame length.
    pub len: u32,
    /// Source index.
    pub src: usize,
    /// Network header offset of the frame.
    pub net_off: u16,
}

/// The virtual-time driver.
#[derive(Debug)]
pub struct Sim {
    /// The qdisc under test.
    pub q: Cake,
    /// Virtual time now.
    pub now: Instant,
    /// The sources; a source's index is its id in the accounting.
    pub sources: Vec<Source>,
    /// Per-source accounting (since the last [`Sim::reset_acct`]).
    pub acct: Vec<Acct>,
    /// Link rate in bytes/s (frame bytes); `None` = infinitely fast (the shaper is the
    /// bottleneck).
    pub link_rate: Option<f64>,
    /// Record every delivery in [`Sim::log`].
    pub record: bool,
    /// Deliveries, when recording.
    pub log: Vec<Delivery>,
    /// Largest `memory_used()` seen right after an enqueue.
    pub max_memory_after_enqueue: u64,
    /// The memory limit was exceeded right after some enqueue.
    pub memory_limit_exceeded: bool,
    link_free: Instant,
    wake: Instant,
    drops: Vec<Dropped>,
    rng: Rng,
}

const TAG_TIME_MASK: u64 = (1 << 48) - 1;

impl Sim {
    /// A driver for `q` with no sources.
    pub fn new(q: Cake) -> Self {
        Sim {
            q,
            now: Instant::ZERO,
            sources: Vec::new(),
            acct: Vec::new(),
            link_rate: None,
            record: false,
            log: Vec::new(),
            max_memory_after_enqueue: 0,
            memory_limit_exceeded: false,
            link_free: Instant::ZERO,
            wake: Instant::ZERO,
            drops: Vec::new(),
            rng: Rng::new(0x5eed),
        }
    }

    /// Adds a source; returns its id.
    pub fn add(&mut self, s: Source) -> usize {
        self.sources.push(s);
        self.acct.push(Acct::default());
        self.sources.len() - 1
    }

    /// Clears the accounting (e.g. after a warm-up).
    pub fn reset_acct(&mut self) {
        for a in &mut self.acct {
            *a = Acct::default();
        }
        self.log.clear();
    }

    /// Offers `pkt` from source `src` now (outside the source models).
    pub fn inject(&mut self, src: usize, mut pkt: Packet) {
        pkt.meta.tag = (src as u64) << 48 | (self.now.as_nanos() & TAG_TIME_MASK);
        let a = &mut self.acct[src];
        a.sent_pkts += 1;
        a.sent_bytes += u64::from(pkt.len());
        self.q.enqueue(self.now, pkt, &mut self.drops);
        let mem = self.q.memory_used();
        self.max_memory_after_enqueue = self.max_memory_after_enqueue.max(mem);
        if mem > self.q.cake_stats().memory_limit {
            self.memory_limit_exceeded = true;
        }
        self.account_drops();
        // A new packet may open the gate (e.g. the qdisc was empty).
        self.wake = self.now;
    }

    fn account_drops(&mut self) {
        for d in self.drops.drain(..) {
            let src = (d.packet.meta.tag >> 48) as usize;
            if let Some(a) = self.acct.get_mut(src) {
                a.dropped_pkts += 1;
                a.dropped_bytes += u64::from(d.packet.len());
            }
            if let Some(s) = self.sources.get_mut(src) {
                s.signal(self.now);
            }
        }
    }

    fn deliver(&mut self, p: Packet) {
        let src = (p.meta.tag >> 48) as usize;
        let enq = p.meta.tag & TAG_TIME_MASK;
        let delay = self.now.as_nanos().saturating_sub(enq);
        let aimd = matches!(
            self.sources.get(src).map(|s| &s.kind),
            Some(Kind::Aimd { .. })
        );
        let h = if aimd || self.record {
            Some(Headers::parse(&p.data))
        } else {
            None
        };
        let ce = h.and_then(|h| h.ip).is_some_and(|ip| ip.ecn == 3);
        if let Some(a) = self.acct.get_mut(src) {
            a.delivered_pkts += 1;
            a.delivered_bytes += u64::from(p.len());
            a.delay_sum_ns += u128::from(delay);
            a.delay_max_ns = a.delay_max_ns.max(delay);
            a.ce_marks += u64::from(ce);
        }
        if ce {
            if let Some(s) = self.sources.get_mut(src) {
                s.signal(self.now);
            }
        }
        if self.record {
            self.log.push(Delivery {
                at: self.now,
                len: p.len(),
                src,
                net_off: h.map_or(0, |h| h.network_offset),
            });
        }
        if let Some(r) = self.link_rate {
            self.link_free = self.now + Duration::from_secs_f64(f64::from(p.len()) / r);
        }
    }

    /// Lets the link take packets while the qdisc allows it.
    fn pump(&mut self) {
        while self.link_free <= self.now {
            let d = self.q.dequeue(self.now, &mut self.drops);
            self.account_drops();
            match d {
                Dequeue::Packet(p) => self.deliver(p),
                Dequeue::NotBefore(t) => {
                    self.wake = t.max(self.now + Duration::from_nanos(1));
                    return;
                }
                Dequeue::Empty => {
                    self.wake = Instant::MAX;
                    return;
                }
            }
        }
        // The link is busy: come back when it frees up.
        self.wake = self.link_free;
    }

    /// Runs until `end` (exclusive): emissions and dequeues at instants before `end`.
    pub fn run_until(&mut self, end: Instant) {
        loop {
            if self.wake <= self.now {
                self.pump();
            }
            let next_src = self
                .sources
                .iter()
                .filter(|s| s.next < s.stop)
                .map(|s| s.next)
                .min()
                .unwrap_or(Instant::MAX);
            let t = next_src.min(self.wake);
            if t >= end {
                self.now = end;
                return;
            }
            self.now = t;
            for i in 0..self.sources.len() {
                while self.sources[i].next <= self.now
                    && self.sources[i].next < self.sources[i].stop
                {
                    let pkt = self.sources[i].template.clone();
                    self.inject(i, pkt);
                    let now = self.now;
                    let s = &mut self.sources[i];
                    let gap = s.interval(now);
                    let j = if s.jitter > 0.0 {
                        1.0 + s.jitter * (2.0 * self.rng.next_f64() - 1.0)
                    } else {
                        1.0
                    };
                    let step = Duration::from_secs_f64(gap * j).max(Duration::from_nanos(1));
                    s.next += step;
                }
            }
        }
    }

    /// Delivered-byte shares of the given sources (fractions summing to 1 over them).
    pub fn shares(&self, ids: &[usize]) -> Vec<f64> {
        let total: u64 = ids.iter().map(|&i| self.acct[i].delivered_bytes).sum();
        ids.iter()
            .map(|&i| self.acct[i].delivered_bytes as f64 / total.max(1) as f64)
            .collect()
    }
}

/// Jain's fairness index of `x`: `(sum x)^2 / (n * sum x^2)`; 1 = perfectly fair.
pub fn jain(x: &[f64]) -> f64 {
    let s: f64 = x.iter().sum();
    let s2: f64 = x.iter().map(|v| v * v).sum();
    if s2 == 0.0 {
        return 1.0;
    }
    s * s / (x.len() as f64 * s2)
}

/// A UDP packet `src:sport -> dst:dport` whose Ethernet frame is `frame_len` bytes (>= 42),
/// with the payload left unmaterialised.
pub fn udp(src: IpAddr, dst: IpAddr, sport: u16, dport: u16, frame_len: usize) -> Packet {
    FrameSpec::udp(src, dst, sport, dport)
        .with_payload(frame_len.saturating_sub(42))
        .packet_padded()
}

/// Asserts `|got - want| <= tol * want`, with a message.
#[track_caller]
pub fn assert_rel(got: f64, want: f64, tol: f64, what: &str) {
    assert!(
        (got - want).abs() <= tol * want.abs(),
        "{what}: got {got}, want {want} (+-{:.3}%)",
        tol * 100.0
    );
}
pub mod ops;
