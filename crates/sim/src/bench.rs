//! Fixed simulator workloads behind `cargo bench -p purple-sim` (criterion) and
//! `purple bench sim`, kept here so both measure exactly the same thing.
//!
//! # Method
//! Every workload is a dumbbell: sender host `a` -> router `r` over a 10 Gbit/s, 1 ms access
//! link (fast enough that flow starts and retransmission bursts of 10,000 flows are not dropped
//! there: the bottleneck is the only queue that matters), `r` -> receiver host `b` over the bottleneck (10 ms), and the reverse path `b` -> `r`
//! -> `a` with the same rates and delays (20+ ms base RTT). The workloads differ in the
//! bottleneck and the traffic; see [`SimWorkload`].
//!
//! **Simulated packets** are link transmissions: one packet put on one link's wire counts once,
//! so a data packet crossing access link and bottleneck counts twice and an ACK on the reverse
//! path counts twice too ([`SimBench::link_transmissions`]). **Events** are the simulator's
//! processed events ([`Sim::events_processed`]).
//!
//! The module reads no clock: callers time [`SimBench::advance`] themselves.

use crate::{LinkConfig, Sim, TcpReceiverApp, TcpSenderApp, UdpSource};
use cake::{AnyQdisc, CakeConfig};
use qdisc::{Duration, Instant};
use std::net::{IpAddr, Ipv4Addr};

/// 1 Mbit/s in bytes per second.
const MBIT: u64 = 1_000_000 / 8;

/// A fixed benchmark workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SimWorkload {
    /// Four greedy UDP sources offering 30 Mbit/s each (1500-byte frames) into a 100 Mbit/s
    /// bottleneck with a 1000-packet droptail buffer and no qdisc; 60 s of virtual time by
    /// default.
    UdpDroptail,
    /// The same traffic into a 100 Mbit/s bottleneck with CAKE (default configuration) shaped at
    /// 95 Mbit/s in front of a 100-packet buffer; 60 s of virtual time by default.
    UdpCake,
    /// 50 TCP CUBIC flows with ECN (starting 10 ms apart) through CAKE shaped at 95 Mbit/s on a
    /// 100 Mbit/s bottleneck; 60 s of virtual time by default.
    Tcp50Cake,
    /// 10,000 TCP CUBIC flows with ECN (starting 100 µs apart, so all have started after 1 s)
    /// through CAKE shaped at 950 Mbit/s (64 MB memory limit) on a 1 Gbit/s bottleneck; 3 s of
    /// virtual time by default.
    Tcp10kCake,
}

impl SimWorkload {
    /// Every workload, in the order above.
    pub const ALL: [SimWorkload; 4] = [
        SimWorkload::UdpDroptail,
        SimWorkload::UdpCake,
        SimWorkload::Tcp50Cake,
        SimWorkload::Tcp10kCake,
    ];

    /// Short name (`udp-droptail`, `udp-cake`, `tcp50-cake`, `tcp10k-cake`).
    pub fn name(self) -> &'static str {
        match self {
            SimWorkload::UdpDroptail => "udp-droptail",
            SimWorkload::UdpCake => "udp-cake",
            SimWorkload::Tcp50Cake => "tcp50-cake",
            SimWorkload::Tcp10kCake => "tcp10k-cake",
        }
    }

    /// The workload called `name` (see [`SimWorkload::name`]).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|w| w.name() == name)
    }

    /// Traffic flows (sending applications on host `a`; TCP flows also have a receiver).
    pub fn flows(self) -> usize {
        match self {
            SimWorkload::UdpDroptail | SimWorkload::UdpCake => 4,
            SimWorkload::Tcp50Cake => 50,
            SimWorkload::Tcp10kCake => 10_000,
        }
    }

    /// Virtual time simulated unless the caller asks for another duration.
    pub fn default_duration(self) -> Duration {
        match self {
            SimWorkload::UdpDroptail | SimWorkload::UdpCake => Duration::from_secs(60),
            SimWorkload::Tcp50Cake => Duration::from_secs(60),
            SimWorkload::Tcp10kCake => Duration::from_secs(3),
        }
    }
}

/// One workload being simulated.
#[derive(Debug)]
pub struct SimBench {
    workload: SimWorkload,
    sim: Sim,
    end: Instant,
    /// Application ids of the flows' senders (UDP sources or TCP senders).
    senders: Vec<usize>,
    /// Application ids of the TCP receivers (empty for UDP workloads).
    receivers: Vec<usize>,
}

/// The sender and receiver addresses.
const A: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
const B: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));

impl SimBench {
    /// Builds `workload` (seed 1) to run for `duration` of virtual time (at least 1 ns).
    pub fn new(workload: SimWorkload, duration: Duration) -> Self {
        let mut sim = Sim::new(1);
        let a = sim.add_node(&[A]);
        let r = sim.add_node(&[IpAddr::V4(Ipv4Addr::new(10, 0, 0, 254))]);
        let b = sim.add_node(&[B]);
        let ms = Duration::from_millis;
        let (rate, shaped, buffer) = match workload {
            SimWorkload::UdpDroptail => (100 * MBIT, None, 1000),
            SimWorkload::UdpCake => (100 * MBIT, Some(95 * MBIT), 100),
            SimWorkload::Tcp50Cake => (100 * MBIT, Some(95 * MBIT), 100),
            SimWorkload::Tcp10kCake => (1000 * MBIT, Some(950 * MBIT), 100),
        };
        let mut bottleneck = LinkConfig::fixed(rate, ms(10)).buffer(Some(buffer), None);
        if let Some(s) = shaped {
            let mut cfg = CakeConfig::with_rate(s);
            if workload == SimWorkload::Tcp10kCake {
                // 10,000 flows keep at least two segments each in flight: give CAKE room for
                // them, so it marks (ECN) rather than overflows and every flow gets through.
                cfg.memlimit = Some(64 << 20);
            }
            bottleneck = bottleneck.qdisc(AnyQdisc::cake(cfg, 1));
        }
        sim.add_link(a, r, LinkConfig::fixed(10_000 * MBIT, ms(1)));
        sim.add_link(r, b, bottleneck);
        sim.add_link(b, r, LinkConfig::fixed(rate, ms(10)));
        sim.add_link(r, a, LinkConfig::fixed(10_000 * MBIT, ms(1)));
        sim.compute_routes();
        let mut senders = Vec::new();
        let mut receivers = Vec::new();
        match workload {
            SimWorkload::UdpDroptail | SimWorkload::UdpCake => {
                for port in 1..=workload.flows() as u16 {
                    let src = UdpSource::greedy(A, B, port, 30 * MBIT);
                    senders.push(sim.add_app(a, port, Instant::ZERO, Box::new(src)));
                }
            }
            SimWorkload::Tcp50Cake | SimWorkload::Tcp10kCake => {
                let gap = if workload == SimWorkload::Tcp50Cake {
                    Duration::from_millis(10)
                } else {
                    Duration::from_micros(100)
                };
                for i in 0..workload.flows() {
                    // At most 10,000 flows: ports 1..=10000 fit in u16.
                    let port = (i + 1) as u16;
                    let start = Instant::ZERO + Duration::from_nanos(gap.as_nanos() * i as u64);
                    let mut cfg = tcpmodel::SenderConfig::new(A, B, port, port);
                    cfg.cc = tcpmodel::cc::CcKind::Cubic;
                    cfg.ecn = true;
                    receivers.push(sim.add_app(
                        b,
                        port,
                        start,
                        Box::new(TcpReceiverApp::for_sender(&cfg)),
                    ));
                    senders.push(sim.add_app(a, port, start, Box::new(TcpSenderApp::new(cfg))));
                }
            }
        }
        SimBench {
            workload,
            sim,
            end: Instant::ZERO + Duration::from_nanos(duration.as_nanos().max(1)),
            senders,
            receivers,
        }
    }

    /// The workload.
    pub fn workload(&self) -> SimWorkload {
        self.workload
    }

    /// Application ids of the flows' senders (UDP sources or TCP senders), one per flow.
    pub fn senders(&self) -> &[usize] {
        &self.senders
    }

    /// Application ids of the TCP receivers, in the order of [`SimBench::senders`] (empty for
    /// UDP workloads).
    pub fn receivers(&self) -> &[usize] {
        &self.receivers
    }

    /// The simulation (for its metrics).
    pub fn sim(&self) -> &Sim {
        &self.sim
    }

    /// Runs up to `dt` more virtual time, never past the end. Returns false once the end is
    /// reached (nothing more to run).
    pub fn advance(&mut self, dt: Duration) -> bool {
        let to = self.sim.now().saturating_add(dt).min(self.end);
        self.sim.run_until(to);
        self.sim.now() < self.end
    }

    /// Runs to the end.
    pub fn run_to_end(&mut self) {
        self.sim.run_until(self.end);
    }

    /// Virtual time simulated so far.
    pub fn simulated(&self) -> Duration {
        self.sim.now().saturating_duration_since(Instant::ZERO)
    }

    /// Simulated packets so far: transmissions summed over every link (see the module docs).
    pub fn link_transmissions(&self) -> u64 {
        self.sim.link_transmissions()
    }

    /// Events processed so far.
    pub fn events(&self) -> u64 {
        self.sim.events_processed()
    }

    /// Flows that have delivered at least one byte: TCP flows whose receiver has in-order data,
    /// UDP flows with a delivered packet.
    pub fn flows_with_progress(&self) -> usize {
        if self.receivers.is_empty() {
            self.senders
                .iter()
                .filter(|&&s| self.sim.flow(s).is_some_and(|f| f.delivered_packets > 0))
                .count()
        } else {
            self.receivers
                .iter()
                .filter(|&&r| {
                    self.sim
                        .app_as::<TcpReceiverApp>(r)
                        .is_some_and(|rx| rx.delivered() > 0)
                })
                .count()
        }
    }

    /// Goodput of the whole workload so far in bytes per second of virtual time (bytes delivered
    /// by the flows' senders, retransmissions included for TCP).
    pub fn goodput_bps(&self) -> f64 {
        let bytes: u64 = self
            .senders
            .iter()
            .filter_map(|&s| self.sim.flow(s))
            .map(|f| f.delivered_bytes)
            .sum();
        let secs = self.simulated().as_secs_f64();
        if secs > 0.0 {
            bytes as f64 / secs
        } else {
            0.0
        }
    }

    /// A 64-bit FNV-1a digest of every measurement so far: each flow's counters, latency samples
    /// and time series, and each link's counters and time series. Equal runs give equal digests;
    /// an optimisation of the simulator that changes any result changes it (with overwhelming
    /// probability).
    pub fn fingerprint(&self) -> u64 {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        let mut eat = |x: u64| {
            for b in x.to_le_bytes() {
                h ^= u64::from(b);
                h = h.wrapping_mul(0x0000_0100_0000_01b3);
            }
        };
        for a in 0..self.sim.app_count() {
            let Some(f) = self.sim.flow(a) else { continue };
            eat(f.sent_packets);
            eat(f.sent_bytes);
            eat(f.delivered_packets);
            eat(f.delivered_bytes);
            eat(f.jitter_ns.to_bits());
            eat(f.last_delivery.map_or(0, |t| t.as_nanos()));
            eat(f.latencies_ns.len() as u64);
            f.latencies_ns.iter().for_each(|&x| eat(x));
            for b in &f.bins {
                eat(b.bytes);
                eat(b.packets);
                eat(b.latency_sum_ns);
                eat(b.latency_max_ns);
            }
        }
        for l in 0..self.sim.link_count() {
            let Some(m) = self.sim.link(l) else { continue };
            eat(m.tx_packets);
            eat(m.tx_bytes);
            eat(m.busy.as_nanos());
            eat(m.buffer_drops);
            eat(m.qdisc_drops);
            eat(m.random_losses);
            for b in &m.bins {
                eat(b.tx_bytes);
                eat(b.drops);
                eat(b.max_buffer_bytes);
                eat(b.sojourn_sum_ns);
                eat(b.max_sojourn_ns);
                eat(b.tx_packets);
            }
        }
        h
    }
}
