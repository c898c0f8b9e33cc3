//! Per-flow and per-link measurements, with time series for plotting.

use qdisc::{quantile, Duration, Instant};

/// One time-series bin of a flow.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowBin {
    /// Bytes delivered in the bin.
    pub bytes: u64,
    /// Packets delivered in the bin.
    pub packets: u64,
    /// Sum of latency samples (ns) in the bin.
    pub latency_sum_ns: u64,
    /// Largest latency sample (ns) in the bin.
    pub latency_max_ns: u64,
}

/// What the simulator measured for one flow (the packets one application sent).
///
/// Latency is one-way (send to delivery at the destination host), except for [`crate::Ping`]
/// flows where it is the round trip.
#[derive(Clone, Debug, Default)]
pub struct FlowMetrics {
    /// Packets the application sent.
    pub sent_packets: u64,
    /// Bytes the application sent.
    pub sent_bytes: u64,
    /// Packets delivered.
    pub delivered_packets: u64,
    /// Bytes delivered.
    pub delivered_bytes: u64,
    /// First delivery.
    pub first_delivery: Option<Instant>,
    /// Last delivery.
    pub last_delivery: Option<Instant>,
    /// Every latency sample in ns, in delivery order (8 bytes per delivered packet: about
    /// 60 MB for a minute of a saturated 1 Gbit/s path with its ACKs; its capacity exceeds its
    /// length by at most a quarter plus 16, see [`LATENCY_GROWTH_DIV`]).
    pub latencies_ns: Vec<u64>,
    /// RFC 3550 interarrival jitter estimate (ns), updated per delivery.
    pub jitter_ns: f64,
    last_transit_ns: Option<i128>,
    /// Time series, one bin per [`crate::Sim::bin_width`], up to the bin of the last delivery
    /// (capacity at most an eighth plus 8 bins more, see [`BIN_GROWTH_DIV`]).
    pub bins: Vec<FlowBin>,
    /// Addresses, ports and DSCP of the first packet the application sent (`None` until it
    /// sends one, or if that packet was not IP).
    pub endpoints: Option<FlowEndpoints>,
}

/// Who a flow is between, as read from its first packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowEndpoints {
    /// Source address.
    pub src: std::net::IpAddr,
    /// Destination address.
    pub dst: std::net::IpAddr,
    /// IP protocol number (6 TCP, 17 UDP, 1 ICMP, 58 ICMPv6).
    pub proto: u8,
    /// Source port (0 where the protocol has none).
    pub sport: u16,
    /// Destination port (0 where the protocol has none).
    pub dport: u16,
    /// DSCP of the first packet.
    pub dscp: u8,
}

impl FlowEndpoints {
    /// Reads the endpoints of `pkt`, or `None` if it carries no IP header.
    pub fn of(pkt: &qdisc::Packet) -> Option<Self> {
        let ip = pkt.headers().ip?;
        let addr = |a: [u8; 16]| {
            let v6 = std::net::Ipv6Addr::from(a);
            match v6.to_ipv4_mapped() {
                Some(v4) => std::net::IpAddr::V4(v4),
                None => std::net::IpAddr::V6(v6),
            }
        };
        Some(FlowEndpoints {
            src: addr(ip.tuple.src),
            dst: addr(ip.tuple.dst),
            proto: ip.tuple.proto,
            sport: ip.tuple.src_port,
            dport: ip.tuple.dst_port,
            dscp: ip.dscp,
        })
    }
}

/// Latency distribution summary.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LatencySummary {
    /// Samples.
    pub count: usize,
    /// Mean.
    pub mean: Duration,
    /// Median (nearest rank).
    pub p50: Duration,
    /// 95th percentile (nearest rank).
    pub p95: Duration,
    /// 99th percentile (nearest rank).
    pub p99: Duration,
    /// Maximum.
    pub max: Duration,
    /// Minimum.
    pub min: Duration,
}

/// Summarises latency samples (ns); all zero when empty.
pub fn summarize(samples: &[u64]) -> LatencySummary {
    if samples.is_empty() {
        return LatencySummary::default();
    }
    let mut s = samples.to_vec();
    s.sort_unstable();
    let n = s.len();
    // `s` is not empty (checked above), so every rank exists.
    let rank = |p: f64| quantile::nearest_rank(&s, p).unwrap_or(0);
    let sum: u128 = s.iter().map(|&x| u128::from(x)).sum();
    LatencySummary {
        count: n,
        mean: Duration::from_nanos((sum / n as u128) as u64),
        p50: Duration::from_nanos(rank(0.50)),
        p95: Duration::from_nanos(rank(0.95)),
        p99: Duration::from_nanos(rank(0.99)),
        max: Duration::from_nanos(s[n - 1]),
        min: Duration::from_nanos(s[0]),
    }
}

/// A flow's latency-sample vector grows by a quarter of its length (at least 16) when full,
/// instead of doubling: at most 25% unused capacity (plus 16) per flow, at an amortised cost of
/// about four copied samples per sample (large vectors usually grow in place).
pub const LATENCY_GROWTH_DIV: usize = 4;

/// A flow's time series grows by an eighth of its length (at least 8 bins) past the last bin
/// written: at most 12.5% unused capacity (plus 8 bins) per flow. With 10,000 flows and 100 ms
/// bins, doubling would waste up to as much memory as the series itself.
pub const BIN_GROWTH_DIV: usize = 8;

impl FlowMetrics {
    #[inline]
    pub(crate) fn record_delivery(&mut self, now: Instant, sent: Instant, bytes: u32, bin: usize) {
        let lat = now.as_nanos().saturating_sub(sent.as_nanos());
        self.delivered_packets += 1;
        self.delivered_bytes += u64::from(bytes);
        self.first_delivery.get_or_insert(now);
        self.last_delivery = Some(now);
        if self.latencies_ns.len() == self.latencies_ns.capacity() {
            let extra = (self.latencies_ns.len() / LATENCY_GROWTH_DIV).max(16);
            self.latencies_ns.reserve_exact(extra);
        }
        self.latencies_ns.push(lat);
        let transit = i128::from(lat);
        if let Some(prev) = self.last_transit_ns {
            let d = (transit - prev).abs() as f64;
            self.jitter_ns += (d - self.jitter_ns) / 16.0;
        }
        self.last_transit_ns = Some(transit);
        if self.bins.len() <= bin {
            if self.bins.capacity() <= bin {
                let extra = (bin / BIN_GROWTH_DIV).max(8);
                self.bins.reserve_exact(bin + 1 + extra - self.bins.len());
            }
            self.bins.resize(bin + 1, FlowBin::default());
        }
        let b = &mut self.bins[bin];
        b.bytes += u64::from(bytes);
        b.packets += 1;
        b.latency_sum_ns += lat;
        b.latency_max_ns = b.latency_max_ns.max(lat);
    }

    /// Latency summary of all samples.
    pub fn latency(&self) -> LatencySummary {
        summarize(&self.latencies_ns)
    }

    /// Delivered bytes per second over `[from, to)` of delivery time, from the time series
    /// (bin-granular: whole bins whose start lies in the window).
    pub fn goodput_bps(&self, bin_width: Duration, from: Instant, to: Instant) -> f64 {
        let w = bin_width.as_nanos().max(1);
        let a = (from.as_nanos() / w) as usize;
        let b = (to.as_nanos() / w) as usize;
        if b <= a {
            return 0.0;
        }
        let bytes: u64 = self.bins.iter().skip(a).take(b - a).map(|x| x.bytes).sum();
        bytes as f64 / ((b - a) as f64 * w as f64 / 1e9)
    }

    /// Packets sent but not delivered, as a fraction of those sent (packets still in flight
    /// count as lost).
    pub fn loss(&self) -> f64 {
        if self.sent_packets == 0 {
            return 0.0;
        }
        1.0 - self.delivered_packets as f64 / self.sent_packets as f64
    }
}

/// One time-series bin of a link.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkBin {
    /// Bytes put on the wire in the bin.
    pub tx_bytes: u64,
    /// Packets dropped (buffer, qdisc and random loss) in the bin.
    pub drops: u64,
    /// Largest droptail-buffer backlog (bytes) seen at a transmission in the bin.
    pub max_buffer_bytes: u64,
    /// Sum of the buffer sojourn times (ns) of the packets transmitted in the bin (divide by the
    /// packets transmitted for the mean): the modem/radio queue delay a controller can read.
    pub sojourn_sum_ns: u64,
    /// Largest buffer sojourn time (ns) of a packet transmitted in the bin.
    pub max_sojourn_ns: u64,
    /// Packets put on the wire in the bin.
    pub tx_packets: u64,
}

/// Counters of one link.
#[derive(Clone, Debug, Default)]
pub struct LinkMetrics {
    /// Packets put on the wire (including those then lost at random).
    pub tx_packets: u64,
    /// Bytes put on the wire.
    pub tx_bytes: u64,
    /// Time the transmitter was busy (fixed/scheduled-rate links).
    pub busy: Duration,
    /// Packets the droptail buffer refused.
    pub buffer_drops: u64,
    /// Packets the qdisc dropped (all reasons).
    pub qdisc_drops: u64,
    /// Packets lost at random on the wire.
    pub random_losses: u64,
    /// Packets with no route or an unknown destination.
    pub unroutable: u64,
    /// Time series, one bin per [`crate::Sim::bin_width`].
    pub bins: Vec<LinkBin>,
}

impl LinkMetrics {
    #[inline]
    pub(crate) fn bin(&mut self, i: usize) -> &mut LinkBin {
        if self.bins.len() <= i {
            self.bins.resize(i + 1, LinkBin::default());
        }
        &mut self.bins[i]
    }

    /// Fraction of `elapsed` the transmitter was busy (fixed-rate links).
    pub fn utilisation(&self, elapsed: Duration) -> f64 {
        if elapsed.as_nanos() == 0 {
            return 0.0;
        }
        self.busy.as_nanos() as f64 / elapsed.as_nanos() as f64
    }
}

impl FlowMetrics {
    /// Heap bytes this flow's metrics hold (capacity of the latency samples and the time
    /// series), not counting the struct itself.
    pub fn heap_bytes(&self) -> usize {
        self.latencies_ns.capacity() * std::mem::size_of::<u64>()
            + self.bins.capacity() * std::mem::size_of::<FlowBin>()
    }
}
