//! The event loop, topology, links and routing.

use crate::app::{Application, Outbox, TimerCmd};
use crate::events::{Ev, EventQueue, What};
use crate::metrics::{FlowMetrics, LinkMetrics};
use cake::AnyQdisc;
use qdisc::link::{Capacity, Charge, Departure, Departures, LinkCore};
pub use qdisc::link::{IcmpPolicy, ICMP_APART_LIMIT};
use qdisc::trace::MAHIMAHI_MTU;
use qdisc::{Dequeue, Dropped, Duration, Instant, Packet, Qdisc};
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::net::IpAddr;

/// Index of a host (router or end host) in a [`Sim`].
pub type NodeId = usize;
/// Index of a unidirectional link in a [`Sim`].
pub type LinkId = usize;
/// Index of an application in a [`Sim`]; also the id of the flow it sends.
pub type AppId = usize;

/// The hasher of the simulator's lookup tables (address owners, port bindings): keys are
/// scenario-chosen, not attacker-chosen, so a fixed multiply-rotate hash (as in rustc's FxHash)
/// replaces SipHash on the per-packet path. It is deterministic; no table is ever iterated.
type FastHash = BuildHasherDefault<MulRotHasher>;

/// See [`FastHash`].
#[derive(Clone, Copy, Debug, Default)]
struct MulRotHasher(u64);

impl MulRotHasher {
    #[inline]
    fn mix(&mut self, x: u64) {
        self.0 = (self.0.rotate_left(5) ^ x).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

impl Hasher for MulRotHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.mix(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.mix(u64::from_le_bytes(w) ^ ((rest.len() as u64) << 59));
        }
    }
    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.mix(u64::from(i));
    }
    #[inline]
    fn write_u16(&mut self, i: u16) {
        self.mix(u64::from(i));
    }
    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.mix(u64::from(i));
    }
    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.mix(i);
    }
    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.mix(i as u64);
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

/// Bits of `meta.tag` holding the send time (ns); the bits above hold flow id + 1.
const TAG_TIME_BITS: u32 = 48;
const TAG_TIME_MASK: u64 = (1 << TAG_TIME_BITS) - 1;
/// Most applications whose flows are tracked (the tag's flow field is 16 bits, 0 = untracked).
const MAX_TRACKED_FLOWS: usize = (1 << (64 - TAG_TIME_BITS)) - 1;

/// The send time the simulator stamped on `pkt` when an application sent it, or `None` for a
/// packet the simulator did not stamp. Echo replies keep their request's stamp. Send times are
/// kept modulo 2^48 ns (about 78 hours of virtual time).
#[inline]
pub fn tag_sent_at(pkt: &Packet) -> Option<Instant> {
    let t = pkt.meta.tag;
    (t >> TAG_TIME_BITS != 0).then(|| Instant::from_nanos(t & TAG_TIME_MASK))
}

#[inline]
fn tag_flow(pkt: &Packet) -> Option<usize> {
    let f = (pkt.meta.tag >> TAG_TIME_BITS) as usize;
    f.checked_sub(1)
}

/// Limits of a link's unmanaged droptail buffer (`None` = unlimited).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Buffer {
    /// Most packets queued.
    pub packets: Option<u32>,
    /// Most bytes queued.
    pub bytes: Option<u64>,
}

/// How to build a link.
#[derive(Debug)]
pub struct LinkConfig {
    /// Capacity, run by the one link mechanism, [`qdisc::link::LinkCore`] (its docs give the
    /// semantics), charging whole frames ([`Charge::Frame`]): a packet is serialised at the
    /// rate in force when its transmission starts (a rate below 1 byte/s stalls the link); a
    /// [`Capacity::Trace`]'s opportunities each carry up to 1500 bytes of queued packets (a
    /// packet larger than what is left of an opportunity continues in the next one; a packet
    /// arriving at an opportunity's instant may use it); unused capacity is lost.
    /// [`Capacity::Unlimited`] sends at once.
    pub rate: Capacity,
    /// Propagation delay, added after serialisation.
    pub delay: Duration,
    /// Probability in [0, 1] that a transmitted packet is lost on the wire (seeded per link).
    pub loss: f64,
    /// The droptail buffer in front of the transmitter (the modem/radio queue).
    pub buffer: Buffer,
    /// A qdisc at the egress in front of the buffer. It is dequeued whenever the buffer has room
    /// (fewer packets and bytes than its limits; the packet taken may overshoot the byte limit
    /// by less than one packet), so a small buffer makes the qdisc the bottleneck queue and a
    /// deep one leaves the queue to the buffer unless the qdisc shapes below the rate.
    pub qdisc: Option<AnyQdisc>,
    /// How the buffer treats ICMP (v4 and v6). Default [`IcmpPolicy::Shared`].
    pub icmp: IcmpPolicy,
}

/// Bytes of each frame a tap keeps ([`Sim::add_tap`]).
pub const TAP_SNAP: usize = 128;

/// Where a tap sees a link's packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TapAt {
    /// When a packet enters the link's droptail buffer (after the link's qdisc, if any): what
    /// a packet socket sees of frames a host sends on a device after its egress qdisc.
    Enter,
    /// When a packet reaches the link's far end: what a packet socket sees of frames arriving
    /// on a device.
    Arrive,
}

/// One frame a tap saw: when, by which tap ([`Sim::add_tap`]'s index), and its first
/// [`TAP_SNAP`] bytes.
#[derive(Clone, Copy, Debug)]
pub struct TapRecord {
    /// When.
    pub at: Instant,
    /// The tap's index.
    pub tap: usize,
    /// Bytes kept (at most [`TAP_SNAP`]).
    pub len: usize,
    /// The frame's first bytes.
    pub bytes: [u8; TAP_SNAP],
}

impl TapRecord {
    /// The frame bytes kept.
    pub fn frame(&self) -> &[u8] {
        &self.bytes[..self.len.min(TAP_SNAP)]
    }
}

fn tap_record(at: Instant, tap: usize, pkt: &Packet) -> TapRecord {
    let len = pkt.data.len().min(TAP_SNAP);
    let mut bytes = [0u8; TAP_SNAP];
    bytes[..len].copy_from_slice(&pkt.data[..len]);
    TapRecord {
        at,
        tap,
        len,
        bytes,
    }
}

impl LinkConfig {
    /// A fixed-rate link (`rate_bps` bytes per second), `delay` propagation, 1000-packet buffer,
    /// no loss, no qdisc.
    pub fn fixed(rate_bps: u64, delay: Duration) -> Self {
        LinkConfig {
            rate: Capacity::Rate(rate_bps),
            delay,
            loss: 0.0,
            buffer: Buffer {
                packets: Some(1000),
                bytes: None,
            },
            qdisc: None,
            icmp: IcmpPolicy::Shared,
        }
    }
    /// Like [`LinkConfig::fixed`] but with capacity `rate`.
    pub fn with_rate(rate: Capacity, delay: Duration) -> Self {
        LinkConfig {
            rate,
            ..Self::fixed(1, delay)
        }
    }
    /// Sets the random loss probability.
    #[must_use]
    pub fn loss(mut self, p: f64) -> Self {
        self.loss = p;
        self
    }
    /// Sets the droptail buffer limits.
    #[must_use]
    pub fn buffer(mut self, packets: Option<u32>, bytes: Option<u64>) -> Self {
        self.buffer = Buffer { packets, bytes };
        self
    }
    /// Puts `q` at the egress.
    #[must_use]
    pub fn qdisc(mut self, q: AnyQdisc) -> Self {
        self.qdisc = Some(q);
        self
    }
    /// Sets how the buffer treats ICMP ([`IcmpPolicy`]).
    #[must_use]
    pub fn icmp(mut self, policy: IcmpPolicy) -> Self {
        self.icmp = policy;
        self
    }
}

/// A packet on a link's wire.
#[derive(Debug)]
struct InFlight {
    /// When it reaches the far end.
    at: Instant,
    /// The sequence number of its Arrive event (set by [`Sim::pump`]).
    seq: u64,
    pkt: Packet,
}

#[derive(Debug)]
struct Link {
    to: NodeId,
    /// The droptail buffer and the transmitter.
    core: LinkCore,
    /// The qdisc in front, the wire behind, metrics and taps.
    x: LinkExtra,
    wake_at: Option<Instant>,
}

/// What a link has around its [`LinkCore`] (apart from it, so [`Pump`] can borrow it while
/// the core transmits).
#[derive(Debug)]
struct LinkExtra {
    qdisc: Option<AnyQdisc>,
    /// Packets on the wire, in arrival order, each with its arrival time and the sequence
    /// number of its Arrive event; only the head's event is in the event queue.
    pipe: VecDeque<InFlight>,
    metrics: LinkMetrics,
    /// Taps on this link (their indices) and what they saw, not yet drained.
    tap_enter: Option<usize>,
    tap_arrive: Option<usize>,
    tapped: Vec<TapRecord>,
}

/// The simulator's side of [`LinkCore::transmit`] for one link: pulls packets from the qdisc
/// into the buffer while it has room, and puts departures on the wire with their metrics.
struct Pump<'a> {
    x: &'a mut LinkExtra,
    drops: &'a mut Vec<Dropped>,
    pool: &'a mut Vec<Vec<u8>>,
    bin: usize,
    /// Packets put on the wire that will arrive (not lost).
    arrivals: u32,
    /// When the shaper opens next, if it holds packets back (from the last refill).
    qdisc_at: Option<Instant>,
}

impl Departures for Pump<'_> {
    #[inline(always)]
    fn depart(&mut self, d: Departure) {
        let len = u64::from(d.pkt.len());
        let sojourn = d.sojourn.as_nanos();
        let m = &mut self.x.metrics;
        m.busy = Duration::from_nanos(m.busy.as_nanos() + d.busy.as_nanos());
        m.tx_packets += 1;
        m.tx_bytes += len;
        let b = m.bin(self.bin);
        b.tx_bytes += len;
        b.tx_packets += 1;
        b.max_buffer_bytes = b.max_buffer_bytes.max(d.backlog_bytes + len);
        b.sojourn_sum_ns += sojourn;
        b.max_sojourn_ns = b.max_sojourn_ns.max(sojourn);
        if d.lost {
            m.random_losses += 1;
            m.bin(self.bin).drops += 1;
            recycle(self.pool, d.pkt);
            return;
        }
        self.x.pipe.push_back(InFlight {
            at: d.arrival,
            seq: 0,
            pkt: d.pkt,
        });
        self.arrivals += 1;
    }

    #[inline(always)]
    fn refill(&mut self, core: &mut LinkCore, now: Instant) {
        if self.x.qdisc.is_some() {
            self.qdisc_at = feed(self.x, core, now, self.drops, self.pool, self.bin);
        }
    }
}

/// Pulls packets from the link's qdisc into the buffer while it has room (showing each to an
/// `Enter` tap). Returns when the shaper opens next, if it holds packets back.
fn feed(
    x: &mut LinkExtra,
    core: &mut LinkCore,
    now: Instant,
    drops: &mut Vec<Dropped>,
    pool: &mut Vec<Vec<u8>>,
    bin: usize,
) -> Option<Instant> {
    let LinkExtra {
        qdisc: Some(q),
        metrics,
        tap_enter,
        tapped,
        ..
    } = x
    else {
        return None;
    };
    while core.has_room() {
        drops.clear();
        let d = q.dequeue(now, drops);
        let n = drops.len() as u64;
        if n > 0 {
            metrics.qdisc_drops += n;
            metrics.bin(bin).drops += n;
            for d in drops.drain(..) {
                recycle(pool, d.packet);
            }
        }
        match d {
            Dequeue::Packet(p) => {
                if let Some(t) = *tap_enter {
                    tapped.push(tap_record(now, t, &p));
                }
                core.push(now, p);
            }
            // Never ask to be woken at the current instant again (that would spin).
            Dequeue::NotBefore(t) => {
                return Some(t.max(now.saturating_add(Duration::from_nanos(1))))
            }
            Dequeue::Empty => return None,
        }
    }
    None
}

/// An application and its single timer.
///
/// Timers are re-armed on nearly every call (a TCP sender moves its RTO on every ACK), so pushing
/// a heap entry per re-arm would fill the heap with stale entries. Instead the logical timer
/// `(at, seq)` takes its sequence number when set (so event order is exactly as if it had been
/// pushed then), and at most one physical entry is kept in front of it: a new entry is pushed
/// only when the timer moves earlier than `queued`; when an entry at `queued` pops without being
/// the logical timer, the logical timer is pushed with its original `(at, seq)` key. Since that
/// key is never smaller than the popped one, it sorts exactly where it would have been.
#[derive(Debug)]
struct AppSlot {
    node: NodeId,
    app: Box<dyn Application>,
    /// The pending timer's `(instant, sequence number)`, if any.
    timer: Option<(Instant, u64)>,
    /// The instant of the earliest physical timer entry in the heap for this app, if any.
    queued: Option<Instant>,
}

/// Bytes held by a [`Sim`]'s own state, from [`Sim::memory`]. Structural: sizes of the
/// simulator's records times the capacities of its vectors and tables. Not included: heap memory
/// owned by applications (e.g. a TCP sender's scoreboard) and qdiscs, and the frames of packets
/// queued in qdiscs, buffers or on the wire.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SimMemory {
    /// Fixed per-flow records: flow metrics, application slots (with each application's own
    /// struct, shallow) and the port-binding table.
    pub flows: usize,
    /// Per-flow heap data: latency samples and time series ([`FlowMetrics::heap_bytes`]).
    pub flow_heap: usize,
    /// The event queue.
    pub events: usize,
    /// Links (records, buffer and pipe slots, time series) and the routing table.
    pub links: usize,
    /// Recycled frame buffers.
    pub pool: usize,
}

impl SimMemory {
    /// The sum of all parts.
    pub fn total(&self) -> usize {
        self.flows + self.flow_heap + self.events + self.links + self.pool
    }
}

/// The simulator: topology, applications, event queue and metrics.
#[derive(Debug)]
pub struct Sim {
    now: Instant,
    seq: u64,
    seed: u64,
    events: u64,
    queue: EventQueue,
    node_count: usize,
    owner: HashMap<IpAddr, NodeId, FastHash>,
    /// `routes[node][dst_node]`: the next link.
    routes: Vec<Vec<Option<LinkId>>>,
    links: Vec<Link>,
    link_from: Vec<NodeId>,
    apps: Vec<AppSlot>,
    bind: HashMap<(NodeId, u16), AppId, FastHash>,
    flows: Vec<FlowMetrics>,
    outbox: Outbox,
    drops: Vec<Dropped>,
    /// Recycled frame buffers (see [`Outbox::packet_from`]).
    pool: Vec<Vec<u8>>,
    bin_width: Duration,
    /// The time-series bin of `[bin_start, bin_end)` ns is `bin_idx` (saves a division per
    /// packet; an empty range forces a recomputation).
    bin_start: u64,
    bin_end: u64,
    bin_idx: usize,
    /// Packets that reached their host but no bound application (still counted as delivered).
    pub unbound_deliveries: u64,
    /// Packets dropped for lack of a route, an unknown destination, or a loopback destination.
    pub unroutable: u64,
    /// Taps added ([`Sim::add_tap`]) and the merge buffer of [`Sim::drain_taps`].
    taps: usize,
    tap_scratch: Vec<TapRecord>,
}

impl Sim {
    /// An empty simulation at time 0. `seed` seeds every link's loss generator (each link gets
    /// its own stream, so adding a link does not change another's losses). Time-series bins are
    /// 100 ms wide.
    pub fn new(seed: u64) -> Self {
        Sim {
            now: Instant::ZERO,
            seq: 0,
            seed,
            events: 0,
            queue: EventQueue::default(),
            node_count: 0,
            owner: HashMap::default(),
            routes: Vec::new(),
            links: Vec::new(),
            link_from: Vec::new(),
            apps: Vec::new(),
            bind: HashMap::default(),
            flows: Vec::new(),
            outbox: Outbox::default(),
            drops: Vec::new(),
            pool: Vec::new(),
            bin_width: Duration::from_millis(100),
            bin_start: 0,
            bin_end: 0,
            bin_idx: 0,
            unbound_deliveries: 0,
            unroutable: 0,
            taps: 0,
            tap_scratch: Vec::new(),
        }
    }

    /// Sets the time-series bin width (before running; at least 1 ns).
    pub fn set_bin_width(&mut self, w: Duration) {
        self.bin_width = Duration::from_nanos(w.as_nanos().max(1));
        self.bin_end = 0;
    }

    /// The time-series bin width.
    pub fn bin_width(&self) -> Duration {
        self.bin_width
    }

    /// Current virtual time.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// Events processed so far.
    pub fn events_processed(&self) -> u64 {
        self.events
    }

    /// Adds a host owning `addrs` (IPv4 and/or IPv6). An address already owned by another host
    /// is moved to this one.
    pub fn add_node(&mut self, addrs: &[IpAddr]) -> NodeId {
        let id = self.node_count;
        self.node_count += 1;
        for &a in addrs {
            self.owner.insert(a, id);
        }
        for r in &mut self.routes {
            r.push(None);
        }
        self.routes.push(vec![None; self.node_count]);
        id
    }

    /// Adds a unidirectional link `from -> to`. Out-of-range node ids are clamped to the last
    /// node (add nodes first).
    pub fn add_link(&mut self, from: NodeId, to: NodeId, cfg: LinkConfig) -> LinkId {
        let last = self.node_count.saturating_sub(1);
        let id = self.links.len();
        let core = LinkCore::new(
            qdisc::link::LinkConfig {
                capacity: cfg.rate,
                delay: cfg.delay,
                buffer_packets: cfg.buffer.packets,
                buffer_bytes: cfg.buffer.bytes,
                loss: cfg.loss,
                seed: self.seed ^ (id as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15),
                icmp: cfg.icmp,
                charge: Charge::Frame,
                ..qdisc::link::LinkConfig::default()
            },
            Instant::ZERO,
        );
        self.links.push(Link {
            to: to.min(last),
            core,
            x: LinkExtra {
                qdisc: cfg.qdisc,
                pipe: VecDeque::new(),
                metrics: LinkMetrics::default(),
                tap_enter: None,
                tap_arrive: None,
                tapped: Vec::new(),
            },
            wake_at: None,
        });
        self.link_from.push(from.min(last));
        id
    }

    /// Routes packets at `node` destined to any address of `dst` over `link` (which should start
    /// at `node`). Ignored for out-of-range ids.
    pub fn add_route(&mut self, node: NodeId, dst: NodeId, link: LinkId) {
        if link < self.links.len() {
            if let Some(slot) = self.routes.get_mut(node).and_then(|r| r.get_mut(dst)) {
                *slot = Some(link);
            }
        }
    }

    /// Fills every missing route with a shortest path (fewest hops; ties go to the lower link
    /// id). Explicit routes are kept.
    pub fn compute_routes(&mut self) {
        let n = self.node_count;
        for dst in 0..n {
            // BFS backwards from dst: next[u] = first link on a shortest path u -> dst.
            let mut dist = vec![usize::MAX; n];
            let mut next: Vec<Option<LinkId>> = vec![None; n];
            dist[dst] = 0;
            let mut q = VecDeque::from([dst]);
            while let Some(v) = q.pop_front() {
                for (l, link) in self.links.iter().enumerate() {
                    let u = self.link_from[l];
                    // Links added before any node exist point at node 0 that may not exist.
                    if u < n && link.to == v && dist[u] == usize::MAX {
                        dist[u] = dist[v] + 1;
                        next[u] = Some(l);
                        q.push_back(u);
                    }
                }
            }
            for (row, nx) in self.routes.iter_mut().zip(next) {
                if row[dst].is_none() {
                    row[dst] = nx;
                }
            }
        }
    }

    /// Adds `app` at `node`, receiving packets whose destination port (UDP/TCP) or echo id (ICMP
    /// echo reply) is `port`, started at `start` (not before the current time). Its sent packets
    /// form flow number = the returned id (flows beyond 65535 apps are not tracked). A second
    /// application bound to the same node and port takes the binding over.
    pub fn add_app(
        &mut self,
        node: NodeId,
        port: u16,
        start: Instant,
        app: Box<dyn Application>,
    ) -> AppId {
        let id = self.apps.len();
        self.apps.push(AppSlot {
            node,
            app,
            timer: None,
            queued: None,
        });
        self.flows.push(FlowMetrics::default());
        self.bind.insert((node, port), id);
        self.push(start.max(self.now), What::Start(id as u32));
        id
    }

    /// Metrics of the flow sent by application `app`.
    pub fn flow(&self, app: AppId) -> Option<&FlowMetrics> {
        self.flows.get(app)
    }

    /// Links added so far (ids are `0..link_count()`).
    pub fn link_count(&self) -> usize {
        self.links.len()
    }

    /// Applications added so far (ids are `0..app_count()`).
    pub fn app_count(&self) -> usize {
        self.apps.len()
    }

    /// Events waiting in the event queue (including superseded timer entries).
    pub fn pending_events(&self) -> usize {
        self.queue.len()
    }

    /// What the simulator's own state occupies, structurally (element sizes times capacities;
    /// see [`SimMemory`]).
    pub fn memory(&self) -> SimMemory {
        let flows = self.flows.capacity() * std::mem::size_of::<FlowMetrics>()
            + self.apps.capacity() * std::mem::size_of::<AppSlot>()
            + self
                .apps
                .iter()
                .map(|a| std::mem::size_of_val(a.app.as_ref()))
                .sum::<usize>()
            + self.bind.capacity() * std::mem::size_of::<((NodeId, u16), AppId)>();
        let flow_heap = self.flows.iter().map(FlowMetrics::heap_bytes).sum();
        let links = self
            .links
            .iter()
            .map(|l| {
                std::mem::size_of::<Link>()
                    + l.core.heap_bytes()
                    + l.x.pipe.capacity() * std::mem::size_of::<InFlight>()
                    + l.x.metrics.bins.capacity() * std::mem::size_of::<crate::metrics::LinkBin>()
            })
            .sum::<usize>()
            + self.routes.iter().map(|r| r.capacity() * 16).sum::<usize>();
        SimMemory {
            flows,
            flow_heap,
            events: self.queue.memory(),
            links,
            pool: self.pool.iter().map(Vec::capacity).sum::<usize>()
                + self.pool.capacity() * std::mem::size_of::<Vec<u8>>(),
        }
    }

    /// Packets put on a wire so far, summed over every link: a packet crossing three links
    /// counts three times (the "simulated packets" of the benchmarks).
    pub fn link_transmissions(&self) -> u64 {
        self.links.iter().map(|l| l.x.metrics.tx_packets).sum()
    }

    /// Metrics of `link`.
    pub fn link(&self, link: LinkId) -> Option<&LinkMetrics> {
        self.links.get(link).map(|l| &l.x.metrics)
    }

    /// The qdisc at `link`'s egress.
    pub fn qdisc(&self, link: LinkId) -> Option<&AnyQdisc> {
        self.links.get(link).and_then(|l| l.x.qdisc.as_ref())
    }

    /// The qdisc at `link`'s egress, mutable (e.g. to change its shaped rate mid-run).
    pub fn qdisc_mut(&mut self, link: LinkId) -> Option<&mut AnyQdisc> {
        self.links.get_mut(link).and_then(|l| l.x.qdisc.as_mut())
    }

    /// Replaces `link`'s capacity from now on (a packet being serialised finishes at the old
    /// rate). Returns false for an unknown link.
    pub fn set_link_rate(&mut self, link: LinkId, rate: Capacity) -> bool {
        let now = self.now;
        let Some(l) = self.links.get_mut(link) else {
            return false;
        };
        l.core.set_capacity(now, rate);
        self.pump(link);
        true
    }

    /// Adds a tap on `link` at `at` (one tap per link and point; a second replaces the first)
    /// and returns its index (taps are numbered from 0 in the order added). What it sees is
    /// kept until [`Sim::drain_taps`]. Returns `None` for an unknown link.
    pub fn add_tap(&mut self, link: LinkId, at: TapAt) -> Option<usize> {
        let n = self.taps;
        let l = self.links.get_mut(link)?;
        match at {
            TapAt::Enter => l.x.tap_enter = Some(n),
            TapAt::Arrive => l.x.tap_arrive = Some(n),
        }
        self.taps += 1;
        Some(n)
    }

    /// Hands every frame the taps saw since the last call to `f`, in time order (frames of
    /// different taps at the same instant: in the order the taps were added), and forgets
    /// them.
    pub fn drain_taps(&mut self, mut f: impl FnMut(&TapRecord)) {
        let mut all: Vec<TapRecord> = std::mem::take(&mut self.tap_scratch);
        all.clear();
        for l in &mut self.links {
            all.append(&mut l.x.tapped);
        }
        all.sort_by_key(|r| (r.at, r.tap));
        for r in &all {
            f(r);
        }
        all.clear();
        self.tap_scratch = all;
    }

    /// Packets and bytes in `link`'s droptail buffer now.
    pub fn buffer_backlog(&self, link: LinkId) -> Option<(usize, u64)> {
        self.links.get(link).map(|l| {
            let b = l.core.backlog();
            (b.packets as usize, b.bytes)
        })
    }

    /// Application `app` as its concrete type, if it exposes itself
    /// ([`Application::as_any`]).
    pub fn app_as<T: 'static>(&self, app: AppId) -> Option<&T> {
        self.apps.get(app)?.app.as_any()?.downcast_ref::<T>()
    }

    /// Application `app` as its concrete type, mutable, if it exposes itself
    /// ([`Application::as_any_mut`]).
    pub fn app_as_mut<T: 'static>(&mut self, app: AppId) -> Option<&mut T> {
        self.apps
            .get_mut(app)?
            .app
            .as_any_mut()?
            .downcast_mut::<T>()
    }

    /// Sends `pkt` (a full Ethernet frame) from application `app`'s host now, as if the
    /// application had sent it: it counts in `app`'s flow and is routed by its destination.
    /// For a driver outside the simulation (a sans-IO agent whose bytes travel as real frames).
    /// Returns false (and drops the frame) for an unknown `app`.
    pub fn inject(&mut self, app: AppId, mut pkt: Packet) -> bool {
        let Some(slot) = self.apps.get(app) else {
            return false;
        };
        let node = slot.node;
        let flow_tag = if app < MAX_TRACKED_FLOWS {
            (app as u64 + 1) << TAG_TIME_BITS
        } else {
            0
        };
        pkt.meta.tag = flow_tag | (self.now.as_nanos() & TAG_TIME_MASK);
        let f = &mut self.flows[app];
        if f.sent_packets == 0 {
            f.endpoints = crate::metrics::FlowEndpoints::of(&pkt);
        }
        f.sent_packets += 1;
        f.sent_bytes += u64::from(pkt.len());
        self.forward(node, pkt);
        true
    }

    /// Fraction of capacity used up to now: busy time over elapsed time for fixed and scheduled
    /// links; bytes sent over bytes offered by the opportunities so far for trace links; 0 for
    /// an unlimited link (it is never busy).
    pub fn link_utilisation(&self, link: LinkId) -> f64 {
        let Some(l) = self.links.get(link) else {
            return 0.0;
        };
        match l.core.capacity() {
            Capacity::Trace(t) => {
                let cap = t.count_before(self.now) * u64::from(MAHIMAHI_MTU);
                if cap == 0 {
                    0.0
                } else {
                    l.x.metrics.tx_bytes as f64 / cap as f64
                }
            }
            _ => {
                l.x.metrics
                    .utilisation(self.now.saturating_duration_since(Instant::ZERO))
            }
        }
    }

    /// Processes every event up to and including `t`, then sets the clock to `t` (if later).
    pub fn run_until(&mut self, t: Instant) {
        while let Some(ev) = self.queue.pop_due(t) {
            self.now = ev.at;
            self.events += 1;
            match ev.what {
                What::Arrive(l) => self.arrive(l as usize),
                What::Wake(l) => {
                    let link = &mut self.links[l as usize];
                    if link.wake_at == Some(ev.at) {
                        link.wake_at = None;
                    }
                    self.pump(l as usize);
                }
                What::Timer(a) => {
                    let slot = &mut self.apps[a as usize];
                    if slot.queued == Some(ev.at) {
                        slot.queued = None;
                    }
                    if slot.timer == Some((ev.at, ev.seq)) {
                        slot.timer = None;
                        self.call_app(a as usize, |app, now, out| app.on_timer(now, out));
                    } else if let (Some((at, seq)), None) = (slot.timer, slot.queued) {
                        // The logical timer moved later: queue it under its original key.
                        slot.queued = Some(at);
                        self.queue.push(Ev {
                            at,
                            seq,
                            what: What::Timer(a),
                        });
                    }
                }
                What::Start(a) => self.call_app(a as usize, |app, now, out| app.start(now, out)),
            }
        }
        self.now = self.now.max(t);
    }

    #[inline]
    fn push(&mut self, at: Instant, what: What) {
        self.seq += 1;
        self.queue.push(Ev {
            at,
            seq: self.seq,
            what,
        });
    }

    #[inline]
    fn bin(&mut self) -> usize {
        let t = self.now.as_nanos();
        if t < self.bin_start || t >= self.bin_end {
            let w = self.bin_width.as_nanos();
            let i = t / w;
            self.bin_start = i * w;
            self.bin_end = self.bin_start.saturating_add(w);
            self.bin_idx = i as usize;
        }
        self.bin_idx
    }

    fn call_app(&mut self, a: usize, f: impl FnOnce(&mut dyn Application, Instant, &mut Outbox)) {
        let mut out = std::mem::take(&mut self.outbox);
        out.timer = TimerCmd::Keep;
        let now = self.now;
        std::mem::swap(&mut out.pool, &mut self.pool);
        f(self.apps[a].app.as_mut(), now, &mut out);
        std::mem::swap(&mut out.pool, &mut self.pool);
        match out.timer {
            TimerCmd::Keep => {}
            TimerCmd::Set(at) => {
                let at = at.max(now);
                self.seq += 1;
                let seq = self.seq;
                let slot = &mut self.apps[a];
                slot.timer = Some((at, seq));
                if slot.queued.is_none_or(|q| q > at) {
                    slot.queued = Some(at);
                    self.queue.push(Ev {
                        at,
                        seq,
                        what: What::Timer(a as u32),
                    });
                }
            }
            TimerCmd::Cancel => self.apps[a].timer = None,
        }
        let node = self.apps[a].node;
        let flow_tag = if a < MAX_TRACKED_FLOWS {
            (a as u64 + 1) << TAG_TIME_BITS
        } else {
            0
        };
        for mut pkt in out.packets.drain(..) {
            pkt.meta.tag = flow_tag | (now.as_nanos() & TAG_TIME_MASK);
            let f = &mut self.flows[a];
            if f.sent_packets == 0 {
                f.endpoints = crate::metrics::FlowEndpoints::of(&pkt);
            }
            f.sent_packets += 1;
            f.sent_bytes += u64::from(pkt.len());
            self.forward(node, pkt);
        }
        self.outbox = out;
    }

    /// Sends `pkt` from `node` towards its destination.
    fn forward(&mut self, node: NodeId, pkt: Packet) {
        let dst = pkt
            .headers()
            .ip
            .and_then(|ip| owner_of(&self.owner, &pkt, ip.outer_offset as usize));
        self.forward_to(node, dst, pkt);
    }

    /// Sends `pkt`, destined to host `dst` (`None`: unknown), from `node`.
    #[inline]
    fn forward_to(&mut self, node: NodeId, dst: Option<NodeId>, pkt: Packet) {
        let link = dst.and_then(|d| {
            self.routes
                .get(node)
                .and_then(|r| r.get(d).copied().flatten())
        });
        match link {
            Some(l) if dst != Some(node) => self.enqueue(l, pkt),
            // No route, unknown destination, or a loopback (not modelled).
            _ => {
                self.unroutable += 1;
                recycle(&mut self.pool, pkt);
            }
        }
    }

    /// Offers `pkt` to link `l` (qdisc, else droptail buffer), then lets the link work.
    fn enqueue(&mut self, l: usize, pkt: Packet) {
        let now = self.now;
        let bin = self.bin();
        let link = &mut self.links[l];
        if link.core.blocks(&pkt) {
            link.x.metrics.buffer_drops += 1;
            link.x.metrics.bin(bin).drops += 1;
            recycle(&mut self.pool, pkt);
            return;
        }
        if let Some(q) = link.x.qdisc.as_mut() {
            self.drops.clear();
            q.enqueue(now, pkt, &mut self.drops);
            let n = self.drops.len() as u64;
            if n > 0 {
                link.x.metrics.qdisc_drops += n;
                link.x.metrics.bin(bin).drops += n;
                for d in self.drops.drain(..) {
                    recycle(&mut self.pool, d.packet);
                }
            }
        } else if link.core.admits(&pkt) {
            if let Some(t) = link.x.tap_enter {
                link.x.tapped.push(tap_record(now, t, &pkt));
            }
            link.core.push(now, pkt);
        } else {
            link.x.metrics.buffer_drops += 1;
            link.x.metrics.bin(bin).drops += 1;
            recycle(&mut self.pool, pkt);
        }
        self.pump(l);
    }

    /// Moves packets qdisc -> buffer -> wire as far as time allows, and schedules the next wake.
    fn pump(&mut self, l: usize) {
        let now = self.now;
        let bin = self.bin();
        let link = &mut self.links[l];
        let mut pump = Pump {
            x: &mut link.x,
            drops: &mut self.drops,
            pool: &mut self.pool,
            bin,
            arrivals: 0,
            qdisc_at: None,
        };
        let send_at = link.core.transmit(now, &mut pump);
        let (arrivals, qdisc_at) = (pump.arrivals, pump.qdisc_at);
        // The pipe is FIFO in arrival time; each Arrive event pops its front. Every packet gets
        // its event's sequence number now, in order, but only the head's event is queued: the
        // next one is queued when the head arrives, under the key it got here. Keys grow along
        // the pipe, so events pop in exactly the order they would if all were queued now, and
        // the event queue holds one entry per busy link instead of one per packet on a wire.
        let plen = self.links[l].x.pipe.len();
        for i in plen - arrivals as usize..plen {
            self.seq += 1;
            self.links[l].x.pipe[i].seq = self.seq;
        }
        if arrivals > 0 && plen == arrivals as usize {
            let head = &self.links[l].x.pipe[0];
            let ev = Ev {
                at: head.at,
                seq: head.seq,
                what: What::Arrive(l as u32),
            };
            self.queue.push(ev);
        }
        // Next wake: when the link takes its next packet (if packets wait in the buffer), or
        // when the shaper opens (if the buffer has room).
        let link = &self.links[l];
        let mut wake = send_at;
        if link.core.has_room() {
            if let Some(t) = qdisc_at {
                wake = Some(wake.map_or(t, |w| w.min(t)));
            }
        }
        if let Some(w) = wake {
            let w = w.max(now);
            if link.wake_at.is_none_or(|p| p > w) {
                self.links[l].wake_at = Some(w);
                self.push(w, What::Wake(l as u32));
            }
        }
    }

    /// A packet finished crossing link `l`.
    fn arrive(&mut self, l: usize) {
        let Some(InFlight { pkt, .. }) = self.links[l].x.pipe.pop_front() else {
            return;
        };
        if let Some(next) = self.links[l].x.pipe.front() {
            let ev = Ev {
                at: next.at,
                seq: next.seq,
                what: What::Arrive(l as u32),
            };
            self.queue.push(ev);
        }
        if let Some(t) = self.links[l].x.tap_arrive {
            let r = tap_record(self.now, t, &pkt);
            self.links[l].x.tapped.push(r);
        }
        let node = self.links[l].to;
        let Some(ip) = pkt.headers().ip else {
            self.unroutable += 1;
            recycle(&mut self.pool, pkt);
            return;
        };
        let off = usize::from(ip.outer_offset);
        let dst = owner_of(&self.owner, &pkt, off);
        if dst == Some(node) {
            self.deliver(node, pkt, off, ip.tuple.proto, ip.tuple.dst_port);
        } else {
            self.forward_to(node, dst, pkt);
        }
    }

    /// `pkt` reached its destination host `node`.
    fn deliver(&mut self, node: NodeId, mut pkt: Packet, off: usize, proto: u8, dport: u16) {
        let port = match proto {
            1 | 58 => match icmp_echo(&mut pkt.data, off) {
                // A host answers echo requests; the reply keeps the request's stamp.
                Some((true, _)) => {
                    self.forward(node, pkt);
                    return;
                }
                Some((false, id)) => Some(id),
                None => None,
            },
            _ => Some(dport),
        };
        if let (Some(f), Some(sent)) = (tag_flow(&pkt), tag_sent_at(&pkt)) {
            let bin = self.bin();
            let now = self.now;
            if let Some(m) = self.flows.get_mut(f) {
                m.record_delivery(now, sent, pkt.len(), bin);
            }
        }
        match port.and_then(|p| self.bind.get(&(node, p)).copied()) {
            Some(a) => self.call_app(a, |app, now, out| app.on_packet(now, &pkt, out)),
            None => self.unbound_deliveries += 1,
        }
        recycle(&mut self.pool, pkt);
    }
}

/// Most recycled frame buffers kept.
const POOL_MAX: usize = 4096;

/// Keeps `pkt`'s frame buffer for reuse (bounded).
#[inline]
fn recycle(pool: &mut Vec<Vec<u8>>, pkt: Packet) {
    if pool.len() < POOL_MAX && pkt.data.capacity() <= 2048 {
        pool.push(pkt.data);
    }
}

/// The host owning `pkt`'s destination address (IP header at `off`).
#[inline]
fn owner_of(owner: &HashMap<IpAddr, NodeId, FastHash>, pkt: &Packet, off: usize) -> Option<NodeId> {
    let d = &pkt.data;
    let addr: IpAddr = match d.get(off)? >> 4 {
        4 => {
            let b: [u8; 4] = d.get(off + 16..off + 20)?.try_into().ok()?;
            IpAddr::from(b)
        }
        6 => {
            let b: [u8; 16] = d.get(off + 24..off + 40)?.try_into().ok()?;
            IpAddr::from(b)
        }
        _ => return None,
    };
    owner.get(&addr).copied()
}

/// For an ICMP/ICMPv6 echo (IP header at `off`, no IPv6 extension headers): `(true, id)` for a
/// request, which is turned into the reply in place (addresses swapped, type changed, checksum
/// updated incrementally per RFC 1624); `(false, id)` for a reply, and for an ICMPv4 timestamp
/// request or reply (types 13/14, which carry an identifier at the same place: delivered to the
/// application bound to it, which answers like a host would); `None` otherwise.
/// Whether `pkt` is ICMP or ICMPv6.
fn icmp_echo(d: &mut [u8], off: usize) -> Option<(bool, u16)> {
    let v = d.get(off)? >> 4;
    let (l4, req, rep, a, alen) = match v {
        4 if *d.get(off + 9)? == 1 => (off + usize::from(d[off] & 0xf) * 4, 8u8, 0u8, off + 12, 4),
        6 if *d.get(off + 6)? == 58 => (off + 40, 128, 129, off + 8, 16),
        _ => return None,
    };
    let hdr = d.get(l4..l4 + 8)?;
    let id = u16::from_be_bytes([hdr[4], hdr[5]]);
    let ty = hdr[0];
    if ty == rep || (v == 4 && (ty == 13 || ty == 14)) {
        return Some((false, id));
    }
    if ty != req {
        return None;
    }
    // Swapping source and destination changes neither the IPv4 header checksum nor the ICMPv6
    // pseudo-header sum.
    for i in 0..alen {
        d.swap(a + i, a + alen + i);
    }
    let old = u16::from_be_bytes([d[l4], d[l4 + 1]]);
    d[l4] = rep;
    let new = u16::from_be_bytes([d[l4], d[l4 + 1]]);
    let hc = u16::from_be_bytes([d[l4 + 2], d[l4 + 3]]);
    let mut sum = u32::from(!hc) + u32::from(!old) + u32::from(new);
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    let hc2 = !(sum as u16);
    d[l4 + 2..l4 + 4].copy_from_slice(&hc2.to_be_bytes());
    Some((true, id))
}
