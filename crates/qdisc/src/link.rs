//! One link: the capacity type every backend shares ([`Capacity`]) and the sans-IO model of a
//! link we cannot change (a radio, a modem), like mahimahi's `mm-link` plus `mm-delay` and
//! `mm-loss` ([`LinkModel`]). `purple linkem` runs one per direction inside the bridge's event
//! loop (dataplane's `linkem` module adds only the bridge glue); the simulator's links take
//! their capacity from the same [`Capacity`] (see "The simulator's links" below).
//!
//! A frame offered to [`LinkModel`] goes through, in order:
//! 1. **loss**: dropped with probability `loss` (seeded RNG), before it reaches the buffer (like
//!    `mm-loss` in front of the link);
//! 2. **the buffer**: an unmanaged droptail queue of at most `buffer_packets` frames and
//!    `buffer_bytes` bytes (the arriving frame is dropped when it would not fit) — the radio's
//!    queue whose backlog and sojourn time the stats report. ICMP (v4 and v6) follows the
//!    link's [`IcmpPolicy`]: like any frame, in a queue of its own served first (a radio whose
//!    scheduler keeps pings apart from data, so pings miss the data's queue), or dropped;
//! 3. **the link**: frames leave the buffer one at a time at the capacity: a fixed rate, a
//!    step/ramp [`RateSchedule`] (the rate when a frame starts is used for all of it), unlimited,
//!    or a [`MahimahiTrace`] with mahimahi's semantics (each trace line is one opportunity to send
//!    1500 bytes; a frame may span opportunities and several small frames may share one; bytes of
//!    an opportunity the queue cannot use are lost; frames arriving at an opportunity's instant
//!    wait for the next one);
//! 4. **propagation delay**: each frame is released `delay` after it finished on the link.
//!
//! **What the link charges.** Capacity counts IP bytes (the frame minus its Ethernet/VLAN
//! header), as mahimahi does, since it sees IP packets on a TUN device. A GSO super-packet is not
//! segmented (it leaves whole, and the kernel segments it on send) but is charged as its wire
//! segments: `segments × headers + payload`, so a 64 KiB super-packet takes exactly the time
//! of the ~45 frames it becomes.
//!
//! **Time.** The model computes its schedule from its own virtual times (when each frame arrived
//! and when the previous one finished), not from when it was called, so a late `dequeue` does not
//! lower the link's rate. `now` must not go backwards.
//!
//! **The simulator's links** (`sim::Sim`) read the same [`Capacity`] but keep their own
//! per-packet path, whose semantics differ from [`LinkModel`]'s in ways every published
//! simulator figure depends on: they charge whole frames (Ethernet header included), lose
//! packets on the wire after serialisation (not before the buffer), let a packet arriving at a
//! trace opportunity's instant use it, serialise a [`Capacity::Rate`] of 0 at 1 byte/s and a
//! schedule below 1000 bytes/s at 1000 bytes/s (instead of stalling), put a qdisc and an ICMP
//! queue in front of the buffer, and measure sojourn to the start of transmission. See
//! docs/architecture.md.

use std::collections::VecDeque;

use crate::trace::{MahimahiTrace, RateSchedule, TraceError, MAHIMAHI_MTU};
use crate::{
    Counter, Dequeue, DropReason, Dropped, Duration, Headers, Instant, NoShaper, Packet, Qdisc,
    QdiscStats, Rng,
};

/// Nanoseconds to serialise `bytes` at a fixed `rate` in bytes per second (0 reads as 1),
/// rounded up; exact (integer arithmetic). Every backend's [`Capacity::Rate`] uses it.
#[inline]
pub fn serialisation_nanos(bytes: u32, rate: u64) -> u64 {
    ((u128::from(bytes) * 1_000_000_000).div_ceil(u128::from(rate.max(1)))) as u64
}

/// A link's capacity over time, in bytes per second; times are relative to the link's origin
/// (the simulator's time 0, or when `purple linkem` started).
#[derive(Clone, Debug, PartialEq)]
pub enum Capacity {
    /// No serialisation delay at all.
    Unlimited,
    /// A fixed rate in bytes per second (0 stalls a [`LinkModel`]; the simulator serialises it
    /// at 1 byte/s).
    Rate(u64),
    /// A mahimahi trace (looping): each line is one opportunity to send
    /// [`MAHIMAHI_MTU`] bytes; capacity an empty queue cannot use is lost.
    Trace(MahimahiTrace),
    /// Steps and ramps; a frame is serialised at the rate in force when it starts.
    Schedule(RateSchedule),
}

/// Why a capacity file was refused by [`Capacity::from_trace_text`]: it is neither format.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CapacityFileError {
    /// Why it is not a mahimahi trace.
    pub mahimahi: TraceError,
    /// Why it is not a step/ramp schedule.
    pub schedule: TraceError,
}

impl std::fmt::Display for CapacityFileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "neither a mahimahi trace ({}) nor a step/ramp schedule ({})",
            self.mahimahi, self.schedule
        )
    }
}

impl std::error::Error for CapacityFileError {}

impl Capacity {
    /// Parses a capacity file: a mahimahi trace (one millisecond offset per line), else a
    /// [`RateSchedule`] (`<t_seconds> <step|ramp> <rate>` lines). The error names both attempts.
    pub fn from_trace_text(text: &str) -> Result<Capacity, CapacityFileError> {
        match MahimahiTrace::parse(text) {
            Ok(t) => Ok(Capacity::Trace(t)),
            Err(mahimahi) => match RateSchedule::parse(text) {
                Ok(s) => Ok(Capacity::Schedule(s)),
                Err(schedule) => Err(CapacityFileError { mahimahi, schedule }),
            },
        }
    }

    /// The capacity around `t` (relative to the link's origin) in bytes per second; `None` when
    /// unlimited. A rate or schedule gives its instantaneous rate (the window is ignored); a
    /// trace the bytes its opportunities in `[t, t + window)` carry, per second (rounded down;
    /// a zero window reads as one nanosecond).
    pub fn rate_in(&self, t: Instant, window: Duration) -> Option<f64> {
        match self {
            Capacity::Unlimited => None,
            Capacity::Rate(r) => Some(*r as f64),
            Capacity::Schedule(s) => Some(s.rate_at(t)),
            Capacity::Trace(tr) => {
                let w = window.as_nanos().max(1);
                let n =
                    tr.count_before(t.saturating_add(Duration::from_nanos(w))) - tr.count_before(t);
                let bps = u128::from(n) * u128::from(MAHIMAHI_MTU) * 1_000_000_000 / u128::from(w);
                Some(bps as f64)
            }
        }
    }

    /// The variant's name in stats: `unlimited`, `rate`, `trace` or `schedule`.
    pub fn mode(&self) -> &'static str {
        match self {
            Capacity::Unlimited => "unlimited",
            Capacity::Rate(_) => "rate",
            Capacity::Trace(_) => "trace",
            Capacity::Schedule(_) => "schedule",
        }
    }
}

/// The default buffer: 1000 packets (and no byte limit).
pub const DEFAULT_BUFFER_PACKETS: u32 = 1000;
/// The window over which a trace's current capacity is measured (opportunities in the next
/// 100 ms), and how long one noisy capacity estimate holds.
pub const CAPACITY_WINDOW: Duration = Duration::from_millis(100);
/// How long the link waits before looking again when the capacity is zero.
const STALL_RECHECK: Duration = Duration::from_millis(1);

/// How a link's buffer treats ICMP (v4 and v6). Every backend's links take it: the simulator's
/// and [`LinkModel`] (`purple linkem --icmp`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum IcmpPolicy {
    /// Like any packet.
    #[default]
    Shared,
    /// A queue of its own, served first: the radio's scheduler treats pings apart from data
    /// (as Starlink users observe: ping stays low while downloads bloat). Up to
    /// [`ICMP_APART_LIMIT`] ICMP packets wait there, whatever the data queue holds. A frame the
    /// link has started sending is finished first, but a GSO super-packet yields between two of
    /// its wire segments (the simulator's links, which have no GSO, only finish the frame).
    Apart,
    /// Dropped on entry (counted as buffer drops): ICMP blocked on the path.
    Blocked,
}

impl IcmpPolicy {
    /// Every policy with its command-line name.
    pub const ALL: [(&'static str, IcmpPolicy); 3] = [
        ("shared", IcmpPolicy::Shared),
        ("apart", IcmpPolicy::Apart),
        ("blocked", IcmpPolicy::Blocked),
    ];

    /// Its command-line name.
    pub fn name(self) -> &'static str {
        match self {
            IcmpPolicy::Shared => "shared",
            IcmpPolicy::Apart => "apart",
            IcmpPolicy::Blocked => "blocked",
        }
    }

    /// The policy called `name`, or an error naming the accepted ones.
    pub fn parse(name: &str) -> Result<IcmpPolicy, UnknownIcmpPolicy> {
        IcmpPolicy::ALL
            .iter()
            .find(|(n, _)| *n == name)
            .map(|&(_, p)| p)
            .ok_or_else(|| UnknownIcmpPolicy(name.to_string()))
    }
}

/// A name that is not an [`IcmpPolicy`]'s.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownIcmpPolicy(pub String);

impl std::fmt::Display for UnknownIcmpPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "unknown ICMP policy {:?} (accepted: ", self.0)?;
        for (i, (n, _)) in IcmpPolicy::ALL.iter().enumerate() {
            write!(f, "{}{n}", if i == 0 { "" } else { ", " })?;
        }
        write!(f, ")")
    }
}

impl std::error::Error for UnknownIcmpPolicy {}

/// Most ICMP packets waiting in a link's own ICMP queue ([`IcmpPolicy::Apart`]).
pub const ICMP_APART_LIMIT: usize = 64;

/// Whether `pkt` is ICMP or ICMPv6 (what [`IcmpPolicy`] applies to).
#[inline]
pub fn is_icmp(pkt: &Packet) -> bool {
    matches!(pkt.headers().ip.map(|i| i.tuple.proto), Some(1 | 58))
}

/// What to emulate in one direction.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkConfig {
    /// The capacity.
    pub capacity: Capacity,
    /// One-way propagation delay added after the link.
    pub delay: Duration,
    /// Most frames in the buffer (`None`: no packet limit).
    pub buffer_packets: Option<u32>,
    /// Most bytes (whole frames) in the buffer (`None`: no byte limit).
    pub buffer_bytes: Option<u64>,
    /// Probability in [0, 1] that an arriving frame is lost.
    pub loss: f64,
    /// Seed of the loss and estimate-noise generators.
    pub seed: u64,
    /// Relative noise of the capacity estimate: each estimate is multiplied by `1 + noise × u`,
    /// `u` uniform in [-1, 1), redrawn every [`CAPACITY_WINDOW`].
    pub capacity_noise: f64,
    /// Relative bias of the capacity estimate: multiplied by `1 + bias` (e.g. 0.2 = 20% high).
    pub capacity_bias: f64,
    /// How the buffer treats ICMP.
    pub icmp: IcmpPolicy,
}

impl Default for LinkConfig {
    /// Unlimited, no delay, 1000-packet buffer, no loss, an exact estimate.
    fn default() -> Self {
        LinkConfig {
            capacity: Capacity::Unlimited,
            delay: Duration::ZERO,
            buffer_packets: Some(DEFAULT_BUFFER_PACKETS),
            buffer_bytes: None,
            loss: 0.0,
            seed: 1,
            capacity_noise: 0.0,
            capacity_bias: 0.0,
            icmp: IcmpPolicy::Shared,
        }
    }
}

/// The emulator's own counters (besides the [`QdiscStats`] every qdisc keeps, where random loss
/// appears as [`DropReason::Aqm`] and buffer overflow as [`DropReason::Overflow`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkStats {
    /// Frames and bytes in the buffer now (not counting those propagating).
    pub backlog: Counter,
    /// Wire segments in the buffer now (a GSO super-packet counts as the frames it becomes);
    /// the packet limit applies to this.
    pub backlog_segments: u64,
    /// Frames and bytes that left the link and are propagating.
    pub in_flight: Counter,
    /// Frames dropped because the buffer was full.
    pub buffer_drops: Counter,
    /// Frames lost at random.
    pub loss_drops: Counter,
    /// Frames delivered (after the delay).
    pub tx: Counter,
    /// Time the last frame to leave the buffer spent there (arrival to the end of its
    /// transmission).
    pub last_sojourn: Duration,
    /// Exponentially weighted moving average of that sojourn time (weight 1/8 per frame).
    pub sojourn_ewma: Duration,
}

#[derive(Debug)]
struct Queued {
    pkt: Packet,
    arrival: Instant,
    /// Bytes the link charges for it.
    wire: u32,
    /// Wire segments it stands for.
    segs: u32,
}

#[derive(Debug)]
struct InFlight {
    pkt: Packet,
    release: Instant,
}

/// The sans-IO link emulator for one direction (see the module docs). Implements [`Qdisc`]:
/// `enqueue` offers a frame, `dequeue` returns frames once they have crossed the link and the
/// delay, or [`Dequeue::NotBefore`] the instant the next one will have. No allocation per packet
/// in steady state (the two queues keep their capacity).
#[derive(Debug)]
pub struct LinkModel {
    capacity: Capacity,
    delay: Duration,
    buffer_packets: Option<u32>,
    buffer_bytes: Option<u64>,
    loss: f64,
    seed: u64,
    noise: f64,
    bias: f64,
    origin: Instant,
    last_now: Instant,
    queue: VecDeque<Queued>,
    icmp: IcmpPolicy,
    /// [`IcmpPolicy::Apart`]: the ICMP queue, served before `queue`.
    icmp_queue: VecDeque<Queued>,
    line: VecDeque<InFlight>,
    /// Rate modes: when the link finished the previous frame.
    link_free: Instant,
    /// Trace mode: index of the next unused opportunity.
    next_opp: u64,
    /// Trace mode: bytes of the head frame already sent.
    head_sent: u32,
    /// Trace mode: bytes of the ICMP queue's head frame already sent.
    icmp_sent: u32,
    /// Frames, bytes and wire segments in the ICMP queue (part of the backlog, not of the
    /// data queue's limits).
    icmp_backlog: Counter,
    rng: Rng,
    stats: QdiscStats,
    link: LinkStats,
}

/// The bytes the link charges for `pkt`: IP bytes per wire segment (see the module docs).
pub fn wire_bytes(pkt: &Packet) -> u32 {
    wire_and_segments(pkt).0
}

/// The bytes the link charges for `pkt` and the number of wire segments it stands for.
fn wire_and_segments(pkt: &Packet) -> (u32, u32) {
    let h = Headers::parse(&pkt.data);
    let len = pkt.len();
    let l2 = u32::from(h.network_offset).min(len);
    let Some(gso) = pkt.meta.gso.filter(|g| g.size > 0) else {
        return ((len - l2).max(1), 1);
    };
    // End of all headers: TCP's when parsed, else the L4 start from the virtio-net header's
    // checksum start (carried in the tag) plus a UDP header.
    let hdr_end = match h.tcp {
        Some(t) => u32::from(t.offset) + u32::from(t.header_len),
        None => ((pkt.meta.tag >> 32) as u16 as u32 + 8).max(l2),
    }
    .min(len);
    let payload = len - hdr_end;
    let segs = payload.div_ceil(u32::from(gso.size)).max(1);
    let wire = (hdr_end - l2)
        .saturating_mul(segs)
        .saturating_add(payload)
        .max(1);
    (wire, segs)
}

fn add(c: &mut Counter, len: u32) {
    c.add(len);
}

fn sub(c: &mut Counter, len: u32) {
    c.packets = c.packets.saturating_sub(1);
    c.bytes = c.bytes.saturating_sub(u64::from(len));
}

impl LinkModel {
    /// A link whose trace or schedule time 0 is `origin`. Out-of-range settings are clamped
    /// (loss to [0, 1], noise and bias to at least -1).
    pub fn new(cfg: LinkConfig, origin: Instant) -> LinkModel {
        let clean = |v: f64| if v.is_finite() { v } else { 0.0 };
        LinkModel {
            capacity: cfg.capacity,
            delay: cfg.delay,
            buffer_packets: cfg.buffer_packets,
            buffer_bytes: cfg.buffer_bytes,
            loss: clean(cfg.loss).clamp(0.0, 1.0),
            seed: cfg.seed,
            noise: clean(cfg.capacity_noise).max(0.0),
            bias: clean(cfg.capacity_bias).max(-1.0),
            origin,
            last_now: origin,
            queue: VecDeque::with_capacity(1024),
            icmp: cfg.icmp,
            icmp_queue: VecDeque::new(),
            line: VecDeque::with_capacity(1024),
            link_free: origin,
            next_opp: 0,
            head_sent: 0,
            icmp_sent: 0,
            icmp_backlog: Counter::default(),
            rng: Rng::new(cfg.seed),
            stats: QdiscStats::default(),
            link: LinkStats::default(),
        }
    }

    /// The emulator's counters.
    pub fn link_stats(&self) -> LinkStats {
        self.link
    }

    /// The capacity setting.
    pub fn capacity(&self) -> &Capacity {
        &self.capacity
    }

    /// The propagation delay added after the link.
    pub fn delay(&self) -> Duration {
        self.delay
    }

    /// The buffer's limits: most frames (wire segments) and most bytes (`None`: no limit).
    pub fn buffer_limits(&self) -> (Option<u32>, Option<u64>) {
        (self.buffer_packets, self.buffer_bytes)
    }

    /// The probability that an arriving frame is lost (after clamping to [0, 1]).
    pub fn loss(&self) -> f64 {
        self.loss
    }

    /// How the buffer treats ICMP.
    pub fn icmp_policy(&self) -> IcmpPolicy {
        self.icmp
    }

    /// Replaces the capacity at `now`, keeping queued frames. The head frame restarts its
    /// transmission; a trace or schedule keeps its time origin.
    pub fn set_capacity(&mut self, now: Instant, capacity: Capacity) {
        self.advance(now);
        self.capacity = capacity;
        self.link_free = self.link_free.max(now);
        self.head_sent = 0;
        self.icmp_sent = 0;
        if let Capacity::Trace(t) = &self.capacity {
            self.next_opp = t.count_before(Instant::from_nanos(self.rel(now).as_nanos() + 1));
        }
    }

    fn rel(&self, t: Instant) -> Duration {
        t.saturating_duration_since(self.origin)
    }

    fn at_rel(&self, rel: Instant) -> Instant {
        self.origin
            .saturating_add(Duration::from_nanos(rel.as_nanos()))
    }

    /// The true capacity at `now` in bytes per second (`None`: unlimited). For a trace: the
    /// opportunities in the next [`CAPACITY_WINDOW`] × 1500 bytes ([`Capacity::rate_in`]).
    pub fn capacity_at(&self, now: Instant) -> Option<f64> {
        let rel = Instant::from_nanos(self.rel(now).as_nanos());
        self.capacity.rate_in(rel, CAPACITY_WINDOW)
    }

    /// What the radio would report as its capacity at `now` (like airOS `dl_capacity`): the true
    /// capacity times `1 + bias` times `1 + noise × u`, `u` uniform in [-1, 1) drawn from the seed
    /// and the [`CAPACITY_WINDOW`] `now` falls in (so repeated queries within one window agree).
    /// Never negative; `None` when unlimited.
    pub fn capacity_estimate(&self, now: Instant) -> Option<f64> {
        let c = self.capacity_at(now)?;
        let epoch = self.rel(now).as_nanos() / CAPACITY_WINDOW.as_nanos();
        let u = Rng::new(self.seed ^ epoch.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x5eed).next_f64()
            * 2.0
            - 1.0;
        Some((c * (1.0 + self.bias) * (1.0 + self.noise * u)).max(0.0))
    }

    /// How long `bytes` take on the link when they start at `start`; `None` while the rate is
    /// below 1 byte/s (the link stalls and looks again after [`STALL_RECHECK`]).
    fn serialisation(&self, bytes: u32, start: Instant) -> Option<Duration> {
        match &self.capacity {
            Capacity::Rate(0) => None,
            Capacity::Rate(r) => Some(Duration::from_nanos(serialisation_nanos(bytes, *r))),
            Capacity::Schedule(s) => {
                let rate = s.rate_at(Instant::from_nanos(self.rel(start).as_nanos()));
                (rate >= 1.0)
                    .then(|| Duration::from_nanos((f64::from(bytes) * 1e9 / rate).ceil() as u64))
            }
            Capacity::Unlimited | Capacity::Trace(_) => Some(Duration::ZERO),
        }
    }

    /// Moves the frames the link has finished by `now` from the buffer into the delay line.
    fn advance(&mut self, now: Instant) {
        self.last_now = self.last_now.max(now);
        match &self.capacity {
            Capacity::Unlimited => {
                while let Some(icmp) = self.pick(false) {
                    if let Some(q) = self.pop(icmp) {
                        let at = q.arrival;
                        self.finish(q, at);
                    }
                }
            }
            Capacity::Rate(_) | Capacity::Schedule(_) => {
                while let Some(icmp) = self.pick(false) {
                    if !icmp && self.yield_at_segment() {
                        continue;
                    }
                    let Some(h) = self.front(icmp) else { break };
                    let left = if icmp {
                        h.wire
                    } else {
                        h.wire - self.head_sent
                    };
                    let start = h.arrival.max(self.link_free);
                    let Some(tx) = self.serialisation(left, start) else {
                        let resume = start.saturating_add(STALL_RECHECK);
                        if resume > now {
                            break;
                        }
                        self.link_free = resume;
                        continue;
                    };
                    let end = start.saturating_add(tx);
                    if end > now {
                        break;
                    }
                    self.link_free = end;
                    if !icmp {
                        self.head_sent = 0;
                    }
                    if let Some(q) = self.pop(icmp) {
                        self.finish(q, end);
                    }
                }
            }
            Capacity::Trace(_) => {
                // Moved out for the loop (no copy), put back after.
                let cap = std::mem::replace(&mut self.capacity, Capacity::Unlimited);
                if let Capacity::Trace(trace) = &cap {
                    self.advance_trace(trace, now);
                }
                self.capacity = cap;
            }
        }
    }

    fn advance_trace(&mut self, trace: &MahimahiTrace, now: Instant) {
        loop {
            if self.queue.is_empty() && self.icmp_queue.is_empty() {
                let seen = trace.count_before(Instant::from_nanos(
                    self.rel(now).as_nanos().saturating_add(1),
                ));
                self.next_opp = self.next_opp.max(seen);
                break;
            }
            let t = self.at_rel(trace.opportunity(self.next_opp));
            if t > now {
                break;
            }
            let mut bytes = MAHIMAHI_MTU;
            while bytes > 0 {
                let Some(icmp) = self.pick(true) else { break };
                let Some((wire, segs)) = self.front(icmp).map(|h| (h.wire, h.segs)) else {
                    break;
                };
                let sent = if icmp { self.icmp_sent } else { self.head_sent };
                // With ICMP waiting, a data head goes one wire segment at a time (ICMP may go
                // between two).
                let to_send = if icmp || self.icmp_queue.is_empty() {
                    wire - sent
                } else {
                    let seg = wire.div_ceil(segs);
                    ((sent / seg + 1) * seg).min(wire) - sent
                };
                let take = to_send.min(bytes);
                let sent = sent + take;
                bytes -= take;
                let done = sent >= wire;
                let kept = if done { 0 } else { sent };
                if icmp {
                    self.icmp_sent = kept;
                } else {
                    self.head_sent = kept;
                }
                if done {
                    if let Some(q) = self.pop(icmp) {
                        self.finish(q, t);
                    }
                }
            }
            self.next_opp += 1;
        }
    }

    /// At a rate, with an ICMP head waiting that arrived while the data head (a GSO
    /// super-packet) is on the link: stops the data head at the first segment boundary after
    /// that arrival, so the ICMP frame goes between two of its wire segments, as it would on a
    /// link that sends segments; `true` when it did (the ICMP head is then next). A single
    /// segment is never cut.
    fn yield_at_segment(&mut self) -> bool {
        let (Some(i), Some(d)) = (self.icmp_queue.front(), self.queue.front()) else {
            return false;
        };
        let start = d.arrival.max(self.link_free);
        if d.segs < 2 || i.arrival <= start {
            return false;
        }
        let rate = match &self.capacity {
            Capacity::Rate(r) => *r as f64,
            Capacity::Schedule(s) => s.rate_at(Instant::from_nanos(self.rel(start).as_nanos())),
            Capacity::Unlimited | Capacity::Trace(_) => return false,
        };
        if rate < 1.0 {
            return false;
        }
        let elapsed = (i.arrival - start).as_nanos() as f64;
        let sent = u64::from(self.head_sent) + (elapsed * rate / 1e9) as u64;
        let seg = u64::from(d.wire.div_ceil(d.segs));
        let boundary = sent.div_ceil(seg) * seg;
        if boundary >= u64::from(d.wire) {
            return false;
        }
        // `boundary` < `d.wire`, a u32.
        let boundary = boundary as u32;
        let (wire, arrival) = (d.wire, i.arrival);
        let Some(tx) = self.serialisation(boundary - self.head_sent, start) else {
            return false;
        };
        debug_assert!(boundary < wire);
        self.head_sent = boundary;
        // Not before the ICMP frame is there (rounding), so it is picked next.
        self.link_free = start.saturating_add(tx).max(arrival);
        true
    }

    /// Which queue's head the link sends next (`true`: the ICMP queue's; `None`: both empty).
    /// ICMP goes first unless the data head started first: `on_trace`, it is partly sent and
    /// not at one of its wire segments' boundaries; otherwise, the link could start it before
    /// the ICMP head arrived (and [`LinkModel::yield_at_segment`] did not cut it).
    fn pick(&self, on_trace: bool) -> Option<bool> {
        let (Some(i), Some(d)) = (self.icmp_queue.front(), self.queue.front()) else {
            return match (self.icmp_queue.is_empty(), self.queue.is_empty()) {
                (true, true) => None,
                (icmp_empty, _) => Some(!icmp_empty),
            };
        };
        Some(if on_trace {
            // Between two of the data head's wire segments, or before it.
            self.icmp_sent > 0 || self.head_sent.is_multiple_of(d.wire.div_ceil(d.segs))
        } else {
            i.arrival <= d.arrival.max(self.link_free)
        })
    }

    fn front(&self, icmp: bool) -> Option<&Queued> {
        if icmp {
            self.icmp_queue.front()
        } else {
            self.queue.front()
        }
    }

    fn pop(&mut self, icmp: bool) -> Option<Queued> {
        if icmp {
            let q = self.icmp_queue.pop_front()?;
            sub(&mut self.icmp_backlog, q.pkt.len());
            Some(q)
        } else {
            self.queue.pop_front()
        }
    }

    /// The frame `q` left the link at `end`: into the delay line.
    fn finish(&mut self, q: Queued, end: Instant) {
        let len = q.pkt.len();
        sub(&mut self.link.backlog, len);
        self.link.backlog_segments = self.link.backlog_segments.saturating_sub(u64::from(q.segs));
        add(&mut self.link.in_flight, len);
        let s = end.saturating_duration_since(q.arrival);
        self.link.last_sojourn = s;
        let e = self.link.sojourn_ewma.as_nanos();
        self.link.sojourn_ewma = Duration::from_nanos(e - e / 8 + s.as_nanos() / 8);
        self.line.push_back(InFlight {
            pkt: q.pkt,
            release: end.saturating_add(self.delay),
        });
    }

    /// When the head of the buffer will have finished on the link (`None`: buffer empty).
    fn head_end(&self) -> Option<Instant> {
        let on_trace = matches!(self.capacity, Capacity::Trace(_));
        let icmp = self.pick(on_trace)?;
        let h = self.front(icmp)?;
        Some(match &self.capacity {
            Capacity::Unlimited => h.arrival,
            Capacity::Rate(_) | Capacity::Schedule(_) => {
                let start = h.arrival.max(self.link_free);
                let left = if icmp {
                    h.wire
                } else {
                    h.wire - self.head_sent
                };
                start.saturating_add(self.serialisation(left, start).unwrap_or(STALL_RECHECK))
            }
            Capacity::Trace(t) => {
                let left = match (icmp, self.icmp_queue.front()) {
                    (true, _) => h.wire.saturating_sub(self.icmp_sent),
                    // The ICMP head goes at the data head's next segment boundary, if it has
                    // another.
                    (false, Some(i)) => {
                        let seg = h.wire.div_ceil(h.segs);
                        let to_boundary = ((self.head_sent / seg + 1) * seg).min(h.wire);
                        to_boundary - self.head_sent + if to_boundary < h.wire { i.wire } else { 0 }
                    }
                    (false, None) => h.wire.saturating_sub(self.head_sent),
                }
                .max(1);
                let n = u64::from(left.div_ceil(MAHIMAHI_MTU));
                self.at_rel(t.opportunity(self.next_opp + n - 1))
            }
        })
    }

    /// The earliest instant `dequeue` can return a frame, given what is queued now (`None`:
    /// nothing queued or propagating). For a rate-0 link it is the next time the link looks again.
    pub fn next_departure(&self) -> Option<Instant> {
        match (self.line.front(), self.head_end()) {
            (Some(f), _) => Some(f.release),
            (None, Some(e)) => Some(e.saturating_add(self.delay)),
            (None, None) => None,
        }
    }

    /// Counts a dropped arriving frame.
    fn drop_arrival(&mut self, pkt: Packet, reason: DropReason, drops: &mut Vec<Dropped>) {
        let len = pkt.len();
        self.stats.drop_counter(reason).add(len);
        match reason {
            DropReason::Overflow => self.link.buffer_drops.add(len),
            _ => self.link.loss_drops.add(len),
        }
        drops.push(Dropped {
            packet: pkt,
            reason,
        });
    }
}

impl Qdisc for LinkModel {
    fn enqueue(&mut self, now: Instant, pkt: Packet, drops: &mut Vec<Dropped>) {
        self.advance(now);
        let len = pkt.len();
        self.stats.enqueued.add(len);
        if self.loss > 0.0 && self.rng.next_f64() < self.loss {
            return self.drop_arrival(pkt, DropReason::Aqm, drops);
        }
        let icmp = self.icmp != IcmpPolicy::Shared && is_icmp(&pkt);
        if icmp && self.icmp == IcmpPolicy::Blocked {
            return self.drop_arrival(pkt, DropReason::Overflow, drops);
        }
        let (wire, segs) = wire_and_segments(&pkt);
        // Apart, ICMP has its own queue and limit, whatever the data queue holds.
        let full = if icmp {
            self.icmp_queue.len() >= ICMP_APART_LIMIT
        } else {
            let full_p = self.buffer_packets.is_some_and(|l| {
                self.link.backlog_segments - self.icmp_backlog.packets + u64::from(segs)
                    > u64::from(l)
            });
            let full_b = self.buffer_bytes.is_some_and(|l| {
                self.link.backlog.bytes - self.icmp_backlog.bytes + u64::from(len) > l
            });
            full_p || full_b
        };
        if full {
            return self.drop_arrival(pkt, DropReason::Overflow, drops);
        }
        self.link.backlog_segments += u64::from(segs);
        self.stats.backlog.add(len);
        self.link.backlog.add(len);
        let q = Queued {
            pkt,
            arrival: now,
            wire,
            segs,
        };
        if icmp {
            self.icmp_backlog.add(len);
            self.icmp_queue.push_back(q);
        } else {
            self.queue.push_back(q);
        }
    }

    fn dequeue(&mut self, now: Instant, _drops: &mut Vec<Dropped>) -> Dequeue {
        self.advance(now);
        if self.line.front().is_some_and(|f| f.release <= now) {
            if let Some(f) = self.line.pop_front() {
                let len = f.pkt.len();
                sub(&mut self.stats.backlog, len);
                sub(&mut self.link.in_flight, len);
                self.stats.dequeued.add(len);
                self.link.tx.add(len);
                return Dequeue::Packet(f.pkt);
            }
        }
        match self.next_departure() {
            Some(t) => {
                self.stats.overlimits += 1;
                Dequeue::NotBefore(t)
            }
            None => Dequeue::Empty,
        }
    }

    /// Sets a fixed capacity (`None`: unlimited), replacing a trace or schedule, from the last
    /// instant the model saw.
    fn set_rate(&mut self, rate: Option<crate::Rate>) -> Result<(), NoShaper> {
        let cap = rate.map_or(Capacity::Unlimited, |r| Capacity::Rate(r.bytes_per_s()));
        self.set_capacity(self.last_now, cap);
        Ok(())
    }

    fn stats(&self) -> QdiscStats {
        self.stats
    }

    fn kind(&self) -> &'static str {
        "linkem"
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::packet::FrameSpec;
    use std::net::{IpAddr, Ipv4Addr};

    /// A UDP frame of `ip_len` IP bytes (frame = ip_len + 14).
    fn frame(ip_len: usize) -> Packet {
        let a = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
        let b = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));
        let p = FrameSpec::udp(a, b, 1, 2)
            .with_payload(ip_len - 28)
            .packet();
        assert_eq!(wire_bytes(&p), ip_len as u32);
        p
    }

    fn link(cfg: LinkConfig) -> LinkModel {
        LinkModel::new(cfg, Instant::ZERO)
    }

    /// Drives the model: frames offered at `arrivals` (ns), dequeued at every asked-for time;
    /// returns the delivery times in ns.
    fn run(m: &mut LinkModel, arrivals: &[(u64, usize)]) -> Vec<u64> {
        let frames = arrivals.iter().map(|&(t, len)| (t, frame(len))).collect();
        run_frames(m, frames).into_iter().map(|(t, _)| t).collect()
    }

    /// [`run`] with given frames; returns each delivery's time in ns and the frame.
    fn run_frames(m: &mut LinkModel, arrivals: Vec<(u64, Packet)>) -> Vec<(u64, Packet)> {
        let mut drops = Vec::new();
        let mut out = Vec::new();
        let mut arrivals = arrivals.into_iter().peekable();
        let mut now = 0u64;
        loop {
            while let Some((t, p)) = arrivals.next_if(|a| a.0 <= now) {
                m.enqueue(Instant::from_nanos(t), p, &mut drops);
            }
            let next_arrival = arrivals.peek().map(|a| a.0);
            match m.dequeue(Instant::from_nanos(now), &mut drops) {
                Dequeue::Packet(p) => {
                    out.push((now, p));
                    continue;
                }
                Dequeue::NotBefore(t) => {
                    now = next_arrival.map_or(t.as_nanos(), |a| a.min(t.as_nanos()));
                }
                Dequeue::Empty => match next_arrival {
                    Some(a) => now = a,
                    None => return out,
                },
            }
        }
    }

    /// Each delivery's time and whether it was ICMP.
    fn kinds(out: Vec<(u64, Packet)>) -> Vec<(u64, bool)> {
        out.into_iter().map(|(t, p)| (t, is_icmp(&p))).collect()
    }

    /// An ICMP echo request of 84 IP bytes (a default ping).
    fn ping() -> Packet {
        let a = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
        let b = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));
        FrameSpec::icmp_echo(a, b, 7, 1).with_payload(56).packet()
    }

    /// Ten 1500-byte data frames at 0 and a ping at 0.5 ms on a link of `capacity` with
    /// `icmp`; the ping's delivery time in ns (`None`: it never arrived) and the model.
    fn ping_behind_data(capacity: Capacity, icmp: IcmpPolicy) -> (Option<u64>, LinkModel) {
        let mut m = link(LinkConfig {
            capacity,
            icmp,
            ..LinkConfig::default()
        });
        let mut arrivals: Vec<(u64, Packet)> = (0..10).map(|_| (0, frame(1500))).collect();
        arrivals.push((500_000, ping()));
        let out = kinds(run_frames(&mut m, arrivals));
        assert_eq!(out.iter().filter(|o| !o.1).count(), 10, "every data frame");
        (out.iter().find(|o| o.1).map(|o| o.0), m)
    }

    #[test]
    fn icmp_apart_overtakes_the_data_queue_but_not_the_frame_on_the_link() {
        // 1500 bytes take 1.2 ms, the 84-byte ping 67.2 us.
        let rate = Capacity::Rate(1_250_000);
        let (shared, _) = ping_behind_data(rate.clone(), IcmpPolicy::Shared);
        assert_eq!(shared, Some(12_000_000 + 67_200), "behind all ten");
        let (apart, m) = ping_behind_data(rate, IcmpPolicy::Apart);
        assert_eq!(
            apart,
            Some(1_200_000 + 67_200),
            "behind the frame being sent only"
        );
        let st = m.stats();
        assert_eq!(st.enqueued.packets, 11);
        assert_eq!(st.dequeued.packets, 11);
        assert_eq!(st.backlog.packets, 0);
        // A trace: one 1500-byte opportunity per ms. The ping (arriving at 0.5 ms) shares the
        // first opportunity with the first data frame; shared, it waits for all ten.
        let trace = || Capacity::Trace(MahimahiTrace::from_offsets((1..=20).collect()).unwrap());
        let (shared, _) = ping_behind_data(trace(), IcmpPolicy::Shared);
        assert_eq!(shared, Some(11_000_000));
        let (apart, _) = ping_behind_data(trace(), IcmpPolicy::Apart);
        assert_eq!(apart, Some(1_000_000));
        // Unlimited: nothing waits.
        let (apart, _) = ping_behind_data(Capacity::Unlimited, IcmpPolicy::Apart);
        assert_eq!(apart, Some(500_000));
    }

    #[test]
    fn icmp_apart_waits_for_a_frame_partly_sent_over_trace_opportunities() {
        let mut m = link(LinkConfig {
            capacity: Capacity::Trace(MahimahiTrace::from_offsets((1..=20).collect()).unwrap()),
            icmp: IcmpPolicy::Apart,
            ..LinkConfig::default()
        });
        // A 1000-byte frame and a 1500-byte one at 0: the 1 ms opportunity sends the first
        // and 500 bytes of the second. A ping at 1.5 ms waits for the second's last 1000
        // bytes (2 ms's opportunity, which it then shares).
        let out = kinds(run_frames(
            &mut m,
            vec![(0, frame(1000)), (0, frame(1500)), (1_500_000, ping())],
        ));
        assert_eq!(
            out,
            vec![(1_000_000, false), (2_000_000, false), (2_000_000, true)]
        );
    }

    #[test]
    fn icmp_apart_goes_between_the_wire_segments_of_a_gso_super_packet() {
        let a = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
        let b = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));
        let mut sup = FrameSpec::tcp(a, b, 1, 2).with_payload(14_480).packet();
        sup.meta.gso = Some(crate::packet::Gso {
            kind: crate::packet::GsoKind::TcpV4,
            size: 1448,
        });
        let seg = u64::from(wire_bytes(&sup)) / 10;
        let go = |capacity, at| {
            let mut m = link(LinkConfig {
                capacity,
                icmp: IcmpPolicy::Apart,
                ..LinkConfig::default()
            });
            kinds(run_frames(&mut m, vec![(0, sup.clone()), (at, ping())]))
        };
        // 1,250,000 B/s (800 ns a byte): a ping at 0.5 ms goes after the first segment.
        let out = go(Capacity::Rate(1_250_000), 500_000);
        let ping_at = seg * 800 + 84 * 800;
        assert_eq!(
            out,
            vec![(ping_at, true), (10 * seg * 800 + 84 * 800, false)]
        );
        // A trace of one 1500-byte opportunity per ms: a ping at 1.5 ms waits for the second
        // segment to end in the 2 ms opportunity, sends its first bytes there and the rest at
        // 3 ms; the super-packet's last bytes still fit the 10 ms opportunity.
        let trace = || Capacity::Trace(MahimahiTrace::from_offsets((1..=20).collect()).unwrap());
        assert_eq!(seg, 1488, "the arithmetic below");
        let out = go(trace(), 1_500_000);
        assert_eq!(out, vec![(3_000_000, true), (10_000_000, false)]);
    }

    proptest::proptest! {
        /// Whatever the mix of frames, GSO super-packets and pings, and whatever the capacity,
        /// every frame offered is delivered or dropped (and counted), each queue stays FIFO,
        /// and the model never stalls or loops.
        #[test]
        fn icmp_apart_loses_nothing_and_keeps_each_queue_in_order(
            arrivals in proptest::collection::vec((0u64..20_000_000, 0u8..4), 1..60),
            cap in 0u8..4,
            limit in 1u32..30,
        ) {
            let capacity = match cap {
                0 => Capacity::Rate(1_250_000),
                1 => Capacity::Trace(MahimahiTrace::from_offsets(vec![1, 1, 3, 4, 4, 4, 9]).unwrap()),
                2 => Capacity::Unlimited,
                _ => Capacity::from_trace_text("0 step 8mbit\n0.01 ramp 1mbit\n").unwrap(),
            };
            let mut m = link(LinkConfig {
                capacity,
                buffer_packets: Some(limit),
                icmp: IcmpPolicy::Apart,
                ..LinkConfig::default()
            });
            let a = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
            let b = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));
            let mut sorted = arrivals.clone();
            sorted.sort_by_key(|x| x.0);
            let frames: Vec<(u64, Packet)> = sorted
                .iter()
                .enumerate()
                .map(|(n, &(t, kind))| {
                    let n = n as u16;
                    let p = match kind {
                        0 => FrameSpec::icmp_echo(a, b, 7, n).with_payload(56).packet(),
                        1 => FrameSpec::udp(a, b, n, 2).with_payload(1472).packet(),
                        2 => FrameSpec::udp(a, b, n, 2).with_payload(10).packet(),
                        _ => {
                            let mut p = FrameSpec::tcp(a, b, n, 2).with_payload(5000).packet();
                            p.meta.gso = Some(crate::packet::Gso {
                                kind: crate::packet::GsoKind::TcpV4,
                                size: 1448,
                            });
                            p
                        }
                    };
                    (t, p)
                })
                .collect();
            // Each frame's identity: its index (ICMP sequence number or source port).
            let id = |p: &Packet| {
                let d = &p.data;
                let l4 = 14 + 20;
                u16::from_be_bytes(if is_icmp(p) { [d[l4 + 6], d[l4 + 7]] } else { [d[l4], d[l4 + 1]] })
            };
            let offered = frames.len() as u64;
            let out = run_frames(&mut m, frames);
            for icmp in [true, false] {
                let ids: Vec<u16> = out.iter().filter(|o| is_icmp(&o.1) == icmp).map(|o| id(&o.1)).collect();
                proptest::prop_assert!(ids.windows(2).all(|w| w[0] < w[1]), "out of order: {:?}", ids);
            }
            let mut st = m.stats();
            proptest::prop_assert_eq!(st.enqueued.packets, offered);
            proptest::prop_assert_eq!(
                st.dequeued.packets + st.drop_counter(DropReason::Overflow).packets,
                offered
            );
            proptest::prop_assert_eq!(out.len() as u64, st.dequeued.packets);
            proptest::prop_assert_eq!(st.backlog.packets, 0);
            proptest::prop_assert!(out.windows(2).all(|w| w[0].0 <= w[1].0));
        }
    }

    #[test]
    fn icmp_apart_does_not_use_the_data_queue_limit_and_blocked_icmp_is_dropped() {
        let mut m = link(LinkConfig {
            capacity: Capacity::Rate(1_250_000),
            buffer_packets: Some(2),
            icmp: IcmpPolicy::Apart,
            ..LinkConfig::default()
        });
        let mut drops = Vec::new();
        for _ in 0..3 {
            m.enqueue(Instant::ZERO, ping(), &mut drops);
        }
        for _ in 0..3 {
            m.enqueue(Instant::ZERO, frame(1500), &mut drops);
        }
        assert_eq!(drops.len(), 1, "the third data frame only");
        assert!(!is_icmp(&drops[0].packet));
        assert_eq!(m.link_stats().backlog.packets, 5);
        let (blocked, m) = ping_behind_data(Capacity::Rate(1_250_000), IcmpPolicy::Blocked);
        assert_eq!(blocked, None);
        assert_eq!(m.link_stats().buffer_drops.packets, 1);
        assert_eq!(m.stats().drop_counter(DropReason::Overflow).packets, 1);
    }

    #[test]
    fn icmp_policies_parse_by_name_and_errors_name_the_accepted_ones() {
        for (n, p) in IcmpPolicy::ALL {
            assert_eq!(IcmpPolicy::parse(n), Ok(p));
            assert_eq!(p.name(), n);
        }
        let e = IcmpPolicy::parse("apartt").unwrap_err().to_string();
        assert!(
            e.contains("\"apartt\"") && e.contains("shared, apart, blocked"),
            "{e}"
        );
    }

    #[test]
    fn fixed_rate_serialises_back_to_back_frames_at_the_capacity() {
        // 1,250,000 B/s: 1500 IP bytes take 1.2 ms.
        let mut m = link(LinkConfig {
            capacity: Capacity::Rate(1_250_000),
            ..LinkConfig::default()
        });
        let t = run(
            &mut m,
            &[(0, 1500), (0, 1500), (0, 1500), (10_000_000, 500)],
        );
        assert_eq!(t, vec![1_200_000, 2_400_000, 3_600_000, 10_400_000]);
        let s = m.link_stats();
        assert_eq!(
            (s.tx.packets, s.backlog.packets, s.in_flight.packets),
            (4, 0, 0)
        );
        assert_eq!(s.last_sojourn, Duration::from_micros(400));
        assert!(m.stats().is_balanced());
    }

    #[test]
    fn delay_is_added_after_the_link_and_late_calls_do_not_lower_the_rate() {
        let mut m = link(LinkConfig {
            capacity: Capacity::Rate(1_250_000),
            delay: Duration::from_millis(20),
            ..LinkConfig::default()
        });
        let mut drops = Vec::new();
        for _ in 0..3 {
            m.enqueue(Instant::ZERO, frame(1500), &mut drops);
        }
        assert_eq!(
            m.dequeue(Instant::ZERO, &mut drops),
            Dequeue::NotBefore(Instant::from_nanos(21_200_000))
        );
        // Called very late: all three are due, in order, at once.
        let late = Instant::from_millis(100);
        for _ in 0..3 {
            assert!(matches!(m.dequeue(late, &mut drops), Dequeue::Packet(_)));
        }
        assert_eq!(m.dequeue(late, &mut drops), Dequeue::Empty);
        assert_eq!(m.link_stats().last_sojourn, Duration::from_micros(3600));
    }

    #[test]
    fn mahimahi_trace_gives_one_1500_byte_opportunity_per_line_and_loses_unused_ones() {
        // Opportunities at 1, 2, 2, 5 ms, looping every 5 ms.
        let trace = MahimahiTrace::from_offsets(vec![1, 2, 2, 5]).unwrap();
        let mut m = link(LinkConfig {
            capacity: Capacity::Trace(trace),
            ..LinkConfig::default()
        });
        // Idle until 3 ms: the opportunities at 1 and 2 ms are lost. Three full frames and two
        // small ones at 3 ms: 5 ms (frame 1), 6 ms (frame 2), 7 ms has two opportunities: frame
        // 3 takes one, the two 700-byte frames share the other.
        let ms = 1_000_000;
        let t = run(
            &mut m,
            &[
                (3 * ms, 1500),
                (3 * ms, 1500),
                (3 * ms, 1500),
                (3 * ms, 700),
                (3 * ms, 700),
            ],
        );
        assert_eq!(t, vec![5 * ms, 6 * ms, 7 * ms, 7 * ms, 7 * ms]);
        // A frame arriving exactly at an opportunity waits for the next one (10 ms), and a
        // 2000-byte frame spans two opportunities (11 and 12 ms).
        let t = run(&mut m, &[(10 * ms, 2000)]);
        assert_eq!(t, vec![12 * ms]);
        // Capacity over [0, 100 ms): 4 opportunities per 5 ms, less the one at 100 ms.
        assert_eq!(m.capacity_at(Instant::ZERO), Some(79.0 * 1500.0 * 10.0));
    }

    #[test]
    fn gso_super_packets_are_charged_per_wire_segment() {
        let a = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
        let b = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));
        let mut p = FrameSpec::tcp(a, b, 1, 2).with_payload(14_480).packet();
        let hdrs = p.data.len() as u32 - 14_480 - 14;
        p.meta.gso = Some(crate::packet::Gso {
            kind: crate::packet::GsoKind::TcpV4,
            size: 1448,
        });
        assert_eq!(wire_bytes(&p), 10 * (hdrs + 1448));
    }

    #[test]
    fn buffer_limits_drop_arrivals_beyond_packets_or_bytes() {
        let mut drops = Vec::new();
        let mut m = link(LinkConfig {
            capacity: Capacity::Rate(1000),
            buffer_packets: Some(5),
            ..LinkConfig::default()
        });
        for _ in 0..8 {
            m.enqueue(Instant::ZERO, frame(100), &mut drops);
        }
        assert_eq!(drops.len(), 3);
        assert!(drops.iter().all(|d| d.reason == DropReason::Overflow));
        assert_eq!(m.link_stats().backlog.packets, 5);
        assert_eq!(m.link_stats().buffer_drops.packets, 3);
        let mut m = link(LinkConfig {
            capacity: Capacity::Rate(1000),
            buffer_packets: None,
            buffer_bytes: Some(3 * 114 + 50),
            ..LinkConfig::default()
        });
        drops.clear();
        for _ in 0..5 {
            m.enqueue(Instant::ZERO, frame(100), &mut drops);
        }
        assert_eq!((m.link_stats().backlog.packets, drops.len()), (3, 2));
        assert!(m.stats().is_balanced());
    }

    #[test]
    fn loss_rate_matches_the_setting_and_is_seeded() {
        let lost = |seed| {
            let mut m = link(LinkConfig {
                loss: 0.1,
                seed,
                buffer_packets: None,
                ..LinkConfig::default()
            });
            let mut drops = Vec::new();
            for i in 0..20_000 {
                m.enqueue(Instant::from_micros(i), frame(100), &mut drops);
                while let Dequeue::Packet(_) = m.dequeue(Instant::from_micros(i), &mut drops) {}
            }
            assert!(m.stats().is_balanced());
            assert_eq!(m.link_stats().loss_drops.packets, drops.len() as u64);
            m.link_stats().loss_drops.packets
        };
        let a = lost(1);
        assert!((1800..=2200).contains(&a), "{a}");
        assert_eq!(a, lost(1));
        assert_ne!(a, lost(2));
    }

    #[test]
    fn set_rate_applies_to_queued_frames_and_estimate_has_bias_and_bounded_noise() {
        let mut m = link(LinkConfig {
            capacity: Capacity::Rate(1_250_000),
            capacity_bias: 0.2,
            capacity_noise: 0.1,
            ..LinkConfig::default()
        });
        let mut drops = Vec::new();
        m.enqueue(Instant::ZERO, frame(1500), &mut drops);
        m.enqueue(Instant::ZERO, frame(1500), &mut drops);
        assert!(matches!(
            m.dequeue(Instant::from_nanos(1_200_000), &mut drops),
            Dequeue::Packet(_)
        ));
        m.set_rate(Some(crate::Rate::from_bytes_per_s(2_500_000)))
            .unwrap();
        assert_eq!(
            m.dequeue(Instant::from_nanos(1_200_000), &mut drops),
            Dequeue::NotBefore(Instant::from_nanos(1_800_000))
        );
        for k in 0..50 {
            let e = m.capacity_estimate(Instant::from_millis(k * 100)).unwrap();
            let r = e / (2_500_000.0 * 1.2);
            assert!((0.9..=1.1).contains(&r), "{r}");
        }
        let e0 = m.capacity_estimate(Instant::from_millis(0)).unwrap();
        assert_eq!(e0, m.capacity_estimate(Instant::from_millis(99)).unwrap());
        m.set_rate(None).unwrap();
        assert_eq!(m.capacity_estimate(Instant::ZERO), None);
    }

    #[test]
    fn a_capacity_file_is_a_trace_else_a_schedule_and_the_error_names_both() {
        let t = Capacity::from_trace_text("1\n2\n5\n").unwrap();
        assert_eq!(t.mode(), "trace");
        let s = Capacity::from_trace_text("0 step 8mbit\n10 ramp 8mbit\n20 step 16mbit\n").unwrap();
        assert_eq!(s.mode(), "schedule");
        assert_eq!(
            s.rate_in(Instant::from_secs(15), CAPACITY_WINDOW),
            Some(1.5e6)
        );
        let e = Capacity::from_trace_text("fast\n").unwrap_err();
        assert_eq!(e.mahimahi.line, 1);
        assert_eq!(e.schedule.line, 1);
        let m = e.to_string();
        assert!(
            m.starts_with("neither a mahimahi trace (line 1: ")
                && m.contains("step/ramp schedule (line 1: "),
            "{m}"
        );
    }

    #[test]
    fn rate_in_reads_each_kind_of_capacity() {
        let w = Duration::from_millis(50);
        assert_eq!(Capacity::Unlimited.rate_in(Instant::ZERO, w), None);
        assert_eq!(
            Capacity::Rate(7).rate_in(Instant::from_secs(3), w),
            Some(7.0)
        );
        // 4 opportunities per 5 ms: [5, 55) ms holds 40 of them, 60,000 bytes in 50 ms.
        let t = Capacity::Trace(MahimahiTrace::from_offsets(vec![1, 2, 2, 5]).unwrap());
        assert_eq!(t.rate_in(Instant::from_millis(5), w), Some(1_200_000.0));
        // A zero window reads as 1 ns: the opportunity at 10 ms is in [10 ms, 10 ms + 1 ns).
        assert_eq!(
            t.rate_in(Instant::from_millis(10), Duration::ZERO),
            Some(1500.0 * 1e9)
        );
    }

    #[test]
    fn serialisation_is_exact_and_rounds_up() {
        assert_eq!(serialisation_nanos(1500, 1_250_000), 1_200_000);
        assert_eq!(serialisation_nanos(1, 3), 333_333_334);
        // 0 reads as 1 byte/s.
        assert_eq!(serialisation_nanos(2, 0), 2_000_000_000);
        // 1e9 * 1514 / 12_500_001 = 121119.99...: rounded up.
        assert_eq!(serialisation_nanos(1514, 12_500_001), 121_120);
    }

    #[test]
    fn a_zero_rate_stalls_the_link_until_the_rate_returns() {
        let mut m = link(LinkConfig {
            capacity: Capacity::Rate(0),
            ..LinkConfig::default()
        });
        let mut drops = Vec::new();
        m.enqueue(Instant::ZERO, frame(1500), &mut drops);
        // Stalled: it looks again every millisecond and sends nothing.
        assert_eq!(
            m.dequeue(Instant::from_millis(5), &mut drops),
            Dequeue::NotBefore(Instant::from_millis(6))
        );
        m.set_capacity(Instant::from_millis(5), Capacity::Rate(1_500_000));
        // The frame starts when the rate returns (5 ms) and takes 1 ms.
        assert_eq!(
            m.dequeue(Instant::from_millis(5), &mut drops),
            Dequeue::NotBefore(Instant::from_millis(6))
        );
        assert!(matches!(
            m.dequeue(Instant::from_millis(6), &mut drops),
            Dequeue::Packet(_)
        ));
        assert!(m.stats().is_balanced());
    }
}
