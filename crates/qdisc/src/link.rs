//! One link: the capacity type every backend shares ([`Capacity`]), the one mechanism of a link
//! we cannot change (a radio, a modem) — its buffer, transmitter, trace opportunities and loss,
//! [`LinkCore`] — and the sans-IO emulator built on it, like mahimahi's `mm-link` plus
//! `mm-delay` and `mm-loss` ([`LinkModel`]). `purple linkem` runs a [`LinkModel`] per direction
//! inside the bridge's event loop (dataplane's `linkem` module adds only the bridge glue); each
//! of the simulator's links (`sim::Sim`) holds a [`LinkCore`] behind its qdisc and turns its
//! departures into arrival events.
//!
//! A frame offered to a link goes through, in order:
//! 1. **the buffer**: an unmanaged droptail queue of at most `buffer_packets` frames and
//!    `buffer_bytes` bytes waiting (the arriving frame is dropped when it would not fit) — the
//!    radio's queue whose backlog and sojourn time the stats report. ICMP (v4 and v6) follows
//!    the link's [`IcmpPolicy`]: like any frame, in a queue of its own in the same buffer,
//!    served first (a radio whose scheduler keeps pings apart from data, so pings miss the
//!    data's queue), or dropped;
//! 2. **the link**: frames leave the buffer one at a time at the capacity: a fixed rate, a
//!    step/ramp [`RateSchedule`] (the rate when a frame starts is used for all of it; a rate
//!    below 1 byte/s stalls the link), unlimited, or a [`MahimahiTrace`] with mahimahi's
//!    semantics (each trace line is one opportunity to send 1500 bytes; a frame may span
//!    opportunities and several small frames may share one; bytes of an opportunity the queue
//!    cannot use are lost; a frame arriving at an opportunity's instant may use it unless the
//!    link already did). At a rate a frame leaves the buffer when its transmission starts; on a
//!    trace, at the opportunity carrying its last byte; its sojourn ends there;
//! 3. **loss**: a frame the link sends is lost with probability `loss` (seeded RNG), on the
//!    wire: it used the capacity but never arrives;
//! 4. **propagation delay**: each frame arrives `delay` after it finished on the link.
//!
//! **What the link charges** is the one per-backend choice ([`Charge`]). `purple linkem` counts
//! IP bytes (the frame minus its Ethernet/VLAN header), as mahimahi does, since it sees IP
//! packets on a TUN device; a GSO super-packet is not segmented (it leaves whole, and the kernel
//! segments it on send) but is charged as its wire segments: `segments × headers + payload`,
//! sent one segment at a time, so a 64 KiB super-packet takes exactly the time of the ~45
//! frames it becomes. The simulator charges whole frames, Ethernet header included.
//!
//! **Time.** The link computes its schedule from its own virtual times (when each frame arrived
//! and when the previous one finished), not from when it was called, so a late call does not
//! lower the link's rate. `now` must not go backwards.

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
    /// A fixed rate in bytes per second (0 stalls the link).
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

    /// The same capacity at `f` of its rate (0 < `f` <= 1): a rate or a schedule times `f`
    /// (a rate rounded down, at least 1 byte/s unless 0), a trace thinned evenly
    /// ([`MahimahiTrace::scaled`]), unlimited stays unlimited. `None` for `f` outside (0, 1].
    /// For running a link where the machine cannot keep up with it (the reference kernel under
    /// QEMU), with its shape over time kept.
    pub fn scaled(&self, f: f64) -> Option<Capacity> {
        if !(f > 0.0 && f <= 1.0) {
            return None;
        }
        Some(match self {
            Capacity::Unlimited => Capacity::Unlimited,
            Capacity::Rate(0) => Capacity::Rate(0),
            Capacity::Rate(r) => Capacity::Rate(((*r as f64 * f) as u64).max(1)),
            Capacity::Trace(t) => Capacity::Trace(t.scaled(f)?),
            Capacity::Schedule(s) => Capacity::Schedule(s.scaled(f)?),
        })
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
pub const STALL_RECHECK: Duration = Duration::from_millis(1);

/// How a link's buffer treats ICMP (v4 and v6). Every backend's links take it: the simulator's
/// and [`LinkModel`] (`purple linkem --icmp`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum IcmpPolicy {
    /// Like any packet.
    #[default]
    Shared,
    /// A queue of its own, served first: the radio's scheduler treats pings apart from data
    /// (as Starlink users observe: ping stays low while downloads bloat). The queue is in the
    /// same buffer: ICMP waiting there counts against the buffer's limits (data is refused
    /// while they are reached), and an ICMP packet is refused only when the buffer is full and
    /// [`ICMP_APART_LIMIT`] ICMP packets already wait. A frame the link has started sending is
    /// finished first, but a GSO super-packet yields between two of its wire segments.
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

/// What a link charges for a frame: the bytes that cross it and the wire segments they are.
/// The one choice each backend makes for itself (everything else about a link is one
/// mechanism, [`LinkCore`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Charge {
    /// IP bytes per wire segment: the frame less its Ethernet/VLAN header, a GSO super-packet
    /// as the segments it becomes ([`wire_bytes`]). `purple linkem`'s: the Ethernet header of
    /// the frames it forwards does not exist on the radio it emulates, the kernel hands it
    /// super-packets, and mahimahi (whose traces it replays) counts IP packets on a TUN device.
    #[default]
    IpSegments,
    /// The whole frame, Ethernet header included, as one wire segment. The simulator's: its
    /// frames are what crosses its links (it has no GSO), and its published figures were
    /// measured so.
    Frame,
}

/// What to emulate in one direction.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkConfig {
    /// The capacity.
    pub capacity: Capacity,
    /// One-way propagation delay added after the link.
    pub delay: Duration,
    /// Most frames (wire segments) waiting in the buffer (`None`: no packet limit).
    pub buffer_packets: Option<u32>,
    /// Most bytes (whole frames) waiting in the buffer (`None`: no byte limit).
    pub buffer_bytes: Option<u64>,
    /// Probability in [0, 1] that a frame the link sends is lost on the wire.
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
    /// What the link charges for a frame.
    pub charge: Charge,
}

impl Default for LinkConfig {
    /// Unlimited, no delay, 1000-packet buffer, no loss, an exact estimate, IP bytes charged.
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
            charge: Charge::IpSegments,
        }
    }
}

/// The emulator's own counters (besides the [`QdiscStats`] every qdisc keeps, where random loss
/// appears as [`DropReason::Aqm`] and buffer overflow as [`DropReason::Overflow`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkStats {
    /// Frames and bytes waiting in the buffer now (not counting the frame on the link or those
    /// propagating).
    pub backlog: Counter,
    /// Wire segments waiting in the buffer now (a GSO super-packet counts as the frames it
    /// becomes); the packet limit applies to this.
    pub backlog_segments: u64,
    /// Frames and bytes that left the buffer (on the link or propagating).
    pub in_flight: Counter,
    /// Frames dropped because the buffer was full.
    pub buffer_drops: Counter,
    /// Frames lost at random on the wire.
    pub loss_drops: Counter,
    /// Frames delivered (after the delay).
    pub tx: Counter,
    /// Time the last frame to leave the buffer spent there (see [`Departure::sojourn`]).
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

/// A frame that left a link's buffer ([`LinkCore::transmit`]).
#[derive(Debug)]
pub struct Departure {
    /// The frame.
    pub pkt: Packet,
    /// When it left the buffer: at a rate, when the link started sending it (its last wire
    /// segment, for a GSO super-packet); on a trace, the opportunity that carried its last byte.
    pub at: Instant,
    /// When it reaches the far end: the end of its transmission plus the delay.
    pub arrival: Instant,
    /// How long it waited in the buffer: `at` less when it entered.
    pub sojourn: Duration,
    /// Link time it took at a rate (zero unlimited and on a trace).
    pub busy: Duration,
    /// Bytes still waiting in the buffer (both queues) once it left.
    pub backlog_bytes: u64,
    /// Wire segments it stood for.
    pub segs: u32,
    /// Lost on the wire: it used the link but never arrives.
    pub lost: bool,
}

/// The caller's side of [`LinkCore::transmit`]: where departures go, and a chance to offer
/// frames as the link frees room.
pub trait Departures {
    /// `d` left the buffer (in the order the link sends).
    fn depart(&mut self, d: Departure);
    /// Called before the link takes each frame and when its buffer has emptied within a trace
    /// opportunity: the caller may [`LinkCore::push`] frames due `now` (the simulator pulls
    /// them from the qdisc in front of the buffer). The default offers none.
    #[inline]
    fn refill(&mut self, _link: &mut LinkCore, _now: Instant) {}
}

/// One link's buffer and transmitter: the mechanism every backend runs. [`LinkModel`] (`purple
/// linkem`) wraps it with a delay line and counters; the simulator's links hold one behind
/// their qdisc and turn departures into arrival events.
///
/// - A frame enters the buffer when [`LinkCore::offer`]ed (or [`LinkCore::push`]ed) at its
///   arrival instant; ICMP follows the [`IcmpPolicy`]. The limits count the frames waiting
///   (not the one on the link), by their [`Charge`].
/// - [`LinkCore::transmit`] at `now` sends, in virtual time, every frame the link can take by
///   `now` (a late call does not lower the rate). At a rate a frame leaves the buffer when its
///   transmission starts (at the rate in force then; a super-packet one wire segment at a
///   time) and reaches the far end when it ends plus the delay. On a trace each opportunity
///   carries up to 1500 bytes; a frame leaves at the opportunity carrying its last byte; a
///   frame that arrives at an opportunity's instant may use it unless the link used that
///   opportunity before the frame arrived (it does when it is called at that instant with
///   frames waiting); opportunities the empty buffer cannot use are lost. A rate below 1
///   byte/s stalls the link, which looks again every [`STALL_RECHECK`].
/// - A frame the link sends is lost on the wire with probability `loss` (seeded).
#[derive(Debug)]
pub struct LinkCore {
    capacity: Capacity,
    /// The rate of a nonzero [`Capacity::Rate`], else 0: the per-frame path's shortcut.
    fixed: u64,
    charge: Charge,
    delay: Duration,
    buffer_packets: Option<u32>,
    buffer_bytes: Option<u64>,
    loss: f64,
    icmp: IcmpPolicy,
    origin: Instant,
    queue: VecDeque<Queued>,
    /// [`IcmpPolicy::Apart`]: the ICMP queue, served before `queue`.
    icmp_queue: VecDeque<Queued>,
    /// Bytes (whole frames) and wire segments in both queues (what the limits apply to).
    buffered_bytes: u64,
    buffered_segs: u64,
    /// Rate modes: when the link is free (the end of what it has sent).
    link_free: Instant,
    /// Rate modes: link time spent on the data head's wire segments sent so far.
    head_busy: u64,
    /// Trace mode: index of the next unused opportunity.
    next_opp: u64,
    /// Bytes of the data head already sent (wire segments at a rate, opportunities' bytes on a
    /// trace).
    head_sent: u32,
    /// Trace mode: bytes of the ICMP queue's head frame already sent.
    icmp_sent: u32,
    rng: Rng,
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

/// `LinkCore::fixed`: the rate of a nonzero [`Capacity::Rate`], else 0.
fn fixed_rate(c: &Capacity) -> u64 {
    match c {
        Capacity::Rate(r) => *r,
        _ => 0,
    }
}

fn add(c: &mut Counter, len: u32) {
    c.add(len);
}

fn sub(c: &mut Counter, len: u32) {
    c.packets = c.packets.saturating_sub(1);
    c.bytes = c.bytes.saturating_sub(u64::from(len));
}

impl LinkCore {
    /// A link whose trace or schedule time 0 is `origin`, its loss drawn from `cfg.seed`.
    /// Out-of-range settings are clamped (loss to [0, 1], a non-finite loss to 0). The estimate
    /// settings (`capacity_noise`, `capacity_bias`) are [`LinkModel`]'s.
    pub fn new(cfg: LinkConfig, origin: Instant) -> LinkCore {
        let loss = if cfg.loss.is_finite() { cfg.loss } else { 0.0 };
        LinkCore {
            fixed: fixed_rate(&cfg.capacity),
            capacity: cfg.capacity,
            charge: cfg.charge,
            delay: cfg.delay,
            buffer_packets: cfg.buffer_packets,
            buffer_bytes: cfg.buffer_bytes,
            loss: loss.clamp(0.0, 1.0),
            icmp: cfg.icmp,
            origin,
            queue: VecDeque::new(),
            icmp_queue: VecDeque::new(),
            buffered_bytes: 0,
            buffered_segs: 0,
            link_free: origin,
            head_busy: 0,
            next_opp: 0,
            head_sent: 0,
            icmp_sent: 0,
            rng: Rng::new(cfg.seed),
        }
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

    /// The probability that a frame sent is lost (after clamping to [0, 1]).
    pub fn loss(&self) -> f64 {
        self.loss
    }

    /// How the buffer treats ICMP.
    pub fn icmp_policy(&self) -> IcmpPolicy {
        self.icmp
    }

    /// What the link charges for a frame.
    pub fn charge(&self) -> Charge {
        self.charge
    }

    /// The link's time origin (a trace's or schedule's time 0).
    pub fn origin(&self) -> Instant {
        self.origin
    }

    /// Frames and bytes waiting in the buffer (both queues).
    pub fn backlog(&self) -> Counter {
        Counter {
            packets: (self.queue.len() + self.icmp_queue.len()) as u64,
            bytes: self.buffered_bytes,
        }
    }

    /// Wire segments waiting in the buffer (both queues).
    pub fn backlog_segments(&self) -> u64 {
        self.buffered_segs
    }

    /// Heap bytes the buffer's queues hold (their capacities).
    pub fn heap_bytes(&self) -> usize {
        (self.queue.capacity() + self.icmp_queue.capacity()) * std::mem::size_of::<Queued>()
    }

    /// Reserves room for `n` more waiting frames (no allocation until then).
    pub fn reserve(&mut self, n: usize) {
        self.queue.reserve(n);
    }

    /// Whether the ICMP policy drops `pkt` on entry ([`IcmpPolicy::Blocked`]).
    #[inline]
    pub fn blocks(&self, pkt: &Packet) -> bool {
        self.icmp == IcmpPolicy::Blocked && is_icmp(pkt)
    }

    /// Whether the buffer (both queues) is below both its limits (a frame taken now may
    /// overshoot the byte limit by less than one frame). For a caller with a queue of its own
    /// in front that [`LinkCore::push`]es while this holds.
    #[inline]
    pub fn has_room(&self) -> bool {
        self.buffer_packets
            .is_none_or(|p| self.buffered_segs < u64::from(p))
            && self.buffer_bytes.is_none_or(|b| self.buffered_bytes < b)
    }

    /// Whether [`LinkCore::offer`] would take `pkt` now: not blocked ICMP, and the buffer
    /// within both limits with it, or (ICMP apart) fewer than [`ICMP_APART_LIMIT`] ICMP
    /// packets waiting.
    #[inline]
    pub fn admits(&self, pkt: &Packet) -> bool {
        let apart = self.icmp != IcmpPolicy::Shared && is_icmp(pkt);
        if apart && self.icmp == IcmpPolicy::Blocked {
            return false;
        }
        let segs = match self.charge {
            Charge::IpSegments if !apart => wire_and_segments(pkt).1,
            _ => 1,
        };
        let fits = self
            .buffer_packets
            .is_none_or(|l| self.buffered_segs + u64::from(segs) <= u64::from(l))
            && self
                .buffer_bytes
                .is_none_or(|l| self.buffered_bytes + u64::from(pkt.len()) <= l);
        fits || (apart && self.icmp_queue.len() < ICMP_APART_LIMIT)
    }

    /// Offers `pkt`, arriving at `now`, to the buffer; gives it back when the buffer refuses it
    /// ([`LinkCore::admits`]). Frames leaving at `now` make room only if
    /// [`LinkCore::transmit`] ran at `now` first.
    #[inline]
    pub fn offer(&mut self, now: Instant, pkt: Packet) -> Result<(), Packet> {
        if !self.admits(&pkt) {
            return Err(pkt);
        }
        self.push(now, pkt);
        Ok(())
    }

    /// Puts `pkt`, arriving at `now`, into the buffer whatever its limits and ICMP policy say
    /// (ICMP apart still goes to its own queue): for a caller that checked
    /// [`LinkCore::has_room`] or [`LinkCore::admits`].
    #[inline(always)]
    pub fn push(&mut self, now: Instant, pkt: Packet) {
        if let Capacity::Trace(tr) = &self.capacity {
            if self.is_empty() {
                // Opportunities before `now` found nothing to send: lost.
                let seen = tr.count_before(self.rel_instant(now));
                self.next_opp = self.next_opp.max(seen);
            }
        }
        let (wire, segs) = match self.charge {
            Charge::Frame => (pkt.len(), 1),
            Charge::IpSegments => wire_and_segments(&pkt),
        };
        let len = u64::from(pkt.len());
        let q = Queued {
            pkt,
            arrival: now,
            wire,
            segs,
        };
        self.buffered_bytes += len;
        self.buffered_segs += u64::from(segs);
        if self.icmp == IcmpPolicy::Apart && is_icmp(&q.pkt) {
            self.icmp_queue.push_back(q);
        } else {
            self.queue.push_back(q);
        }
    }

    /// Replaces the capacity at `now`, keeping waiting frames; a frame already on the link
    /// finishes as it started, a partly sent one restarts, a trace or schedule keeps its time
    /// origin. Call [`LinkCore::transmit`] at `now` first.
    pub fn set_capacity(&mut self, now: Instant, capacity: Capacity) {
        self.fixed = fixed_rate(&capacity);
        self.capacity = capacity;
        self.link_free = self.link_free.max(now);
        self.head_sent = 0;
        self.head_busy = 0;
        self.icmp_sent = 0;
        if let Capacity::Trace(t) = &self.capacity {
            self.next_opp = t.count_before(self.rel_instant(now));
        }
    }

    #[inline]
    fn rel_instant(&self, t: Instant) -> Instant {
        Instant::from_nanos(t.saturating_duration_since(self.origin).as_nanos())
    }

    #[inline]
    fn at_rel(&self, rel: Instant) -> Instant {
        self.origin
            .saturating_add(Duration::from_nanos(rel.as_nanos()))
    }

    #[inline]
    fn is_empty(&self) -> bool {
        self.queue.is_empty() && self.icmp_queue.is_empty()
    }

    /// How long `bytes` take on the link when they start at `start`; `None` while the rate is
    /// below 1 byte/s (the link stalls and looks again after [`STALL_RECHECK`]).
    #[inline]
    fn serialisation(&self, bytes: u32, start: Instant) -> Option<Duration> {
        if self.fixed != 0 {
            return Some(Duration::from_nanos(serialisation_nanos(bytes, self.fixed)));
        }
        match &self.capacity {
            Capacity::Rate(0) => None,
            Capacity::Rate(r) => Some(Duration::from_nanos(serialisation_nanos(bytes, *r))),
            Capacity::Schedule(s) => {
                let rate = s.rate_at(self.rel_instant(start));
                (rate >= 1.0)
                    .then(|| Duration::from_nanos((f64::from(bytes) * 1e9 / rate).ceil() as u64))
            }
            Capacity::Unlimited | Capacity::Trace(_) => Some(Duration::ZERO),
        }
    }

    /// Sends everything the link can send by `now` (see [`LinkCore`]), handing each frame that
    /// leaves the buffer to `out` in order, and lets `out` refill the buffer as it goes. Returns
    /// when the link takes its next frame (or wire segment) from the buffer if nothing else
    /// arrives: the instant to call it again (`None`: the buffer is empty; a stalled link gives
    /// the instant it looks again). Bounded: each iteration sends a frame (or a wire segment)
    /// or uses an opportunity that is due, or returns. `now` must not go backwards.
    #[inline]
    #[must_use]
    pub fn transmit(&mut self, now: Instant, out: &mut impl Departures) -> Option<Instant> {
        if self.fixed == 0 && matches!(self.capacity, Capacity::Trace(_)) {
            self.transmit_trace(now, out)
        } else {
            self.transmit_rate(now, out)
        }
    }

    #[inline]
    fn transmit_rate(&mut self, now: Instant, out: &mut impl Departures) -> Option<Instant> {
        loop {
            out.refill(self, now);
            // The head that goes next: ICMP's if it arrived by the time the data head (or its
            // next wire segment) could start.
            let (icmp, h) = match (self.icmp_queue.front(), self.queue.front()) {
                (None, None) => return None,
                (None, Some(d)) => (false, d),
                (Some(i), None) => (true, i),
                (Some(i), Some(d)) => {
                    if i.arrival <= d.arrival.max(self.link_free) {
                        (true, i)
                    } else {
                        (false, d)
                    }
                }
            };
            let start = h.arrival.max(self.link_free);
            if start > now {
                return Some(start);
            }
            let (wire, segs) = (h.wire, h.segs);
            // The next wire segment: the whole frame unless it is a super-packet.
            let whole = icmp || segs <= 1;
            let bytes = if whole {
                wire
            } else {
                (self.head_sent + wire.div_ceil(segs)).min(wire) - self.head_sent
            };
            let Some(tx) = self.serialisation(bytes, start) else {
                let resume = start.saturating_add(STALL_RECHECK);
                if resume > now {
                    return Some(resume);
                }
                self.link_free = resume;
                continue;
            };
            let end = start.saturating_add(tx);
            self.link_free = end;
            let busy = if whole {
                tx
            } else {
                self.head_busy += tx.as_nanos();
                if self.head_sent + bytes < wire {
                    self.head_sent += bytes;
                    continue;
                }
                self.head_sent = 0;
                Duration::from_nanos(std::mem::take(&mut self.head_busy))
            };
            self.depart(icmp, start, end, busy, out);
        }
    }

    #[inline]
    fn transmit_trace(&mut self, now: Instant, out: &mut impl Departures) -> Option<Instant> {
        loop {
            out.refill(self, now);
            if self.is_empty() {
                return None;
            }
            let Capacity::Trace(tr) = &self.capacity else {
                return None;
            };
            let t = self.at_rel(tr.opportunity(self.next_opp));
            if t > now {
                return Some(t);
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
                    self.depart(icmp, t, t, Duration::ZERO, out);
                    if self.is_empty() {
                        out.refill(self, now);
                    }
                }
            }
            self.next_opp += 1;
        }
    }

    /// The head of the ICMP queue (`icmp`) or of the data queue leaves the buffer at `at`, its
    /// transmission ending at `end`: drawn for loss and handed to `out`.
    #[inline(always)]
    fn depart(
        &mut self,
        icmp: bool,
        at: Instant,
        end: Instant,
        busy: Duration,
        out: &mut impl Departures,
    ) {
        let q = if icmp {
            let Some(q) = self.icmp_queue.pop_front() else {
                return;
            };
            q
        } else {
            let Some(q) = self.queue.pop_front() else {
                return;
            };
            q
        };
        self.buffered_bytes -= u64::from(q.pkt.len());
        self.buffered_segs -= u64::from(q.segs);
        let lost = self.loss > 0.0 && self.rng.next_f64() < self.loss;
        out.depart(Departure {
            at,
            arrival: end.saturating_add(self.delay),
            sojourn: at.saturating_duration_since(q.arrival),
            busy,
            backlog_bytes: self.buffered_bytes,
            segs: q.segs,
            lost,
            pkt: q.pkt,
        });
    }

    /// Which queue's head the link sends next (`true`: the ICMP queue's; `None`: both empty).
    /// ICMP goes first unless the data head started first: `on_trace`, it is partly sent and
    /// not at one of its wire segments' boundaries; at a rate, the link could start it (or its
    /// next wire segment) before the ICMP head arrived.
    #[inline]
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

    #[inline]
    fn front(&self, icmp: bool) -> Option<&Queued> {
        if icmp {
            self.icmp_queue.front()
        } else {
            self.queue.front()
        }
    }

    /// When the next frame to leave the buffer will have finished on the link, if nothing else
    /// arrives (`None`: the buffer is empty).
    pub fn next_end(&self) -> Option<Instant> {
        let on_trace = matches!(self.capacity, Capacity::Trace(_));
        let icmp = self.pick(on_trace)?;
        let h = self.front(icmp)?;
        Some(match &self.capacity {
            Capacity::Unlimited => h.arrival.max(self.link_free),
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
}

#[derive(Debug)]
struct InFlight {
    pkt: Packet,
    release: Instant,
}

/// The sans-IO link emulator for one direction (see the module docs): a [`LinkCore`] with a
/// delay line, counters and a capacity estimate. Implements [`Qdisc`]: `enqueue` offers a
/// frame, `dequeue` returns frames once they have crossed the link and the delay, or
/// [`Dequeue::NotBefore`] the instant the next one will have. No allocation per packet in
/// steady state (the queues keep their capacity).
#[derive(Debug)]
pub struct LinkModel {
    core: LinkCore,
    seed: u64,
    noise: f64,
    bias: f64,
    last_now: Instant,
    line: VecDeque<InFlight>,
    /// Frames lost on the wire since the last `enqueue`/`dequeue` (handed out there).
    lost: Vec<Dropped>,
    stats: QdiscStats,
    link: LinkStats,
}

/// [`LinkModel`]'s side of [`LinkCore::transmit`]: the delay line and the counters.
struct Line<'a> {
    line: &'a mut VecDeque<InFlight>,
    lost: &'a mut Vec<Dropped>,
    stats: &'a mut QdiscStats,
    link: &'a mut LinkStats,
}

impl Departures for Line<'_> {
    fn depart(&mut self, d: Departure) {
        let len = d.pkt.len();
        let s = d.sojourn;
        self.link.last_sojourn = s;
        let e = self.link.sojourn_ewma.as_nanos();
        self.link.sojourn_ewma = Duration::from_nanos(e - e / 8 + s.as_nanos() / 8);
        if d.lost {
            sub(&mut self.stats.backlog, len);
            self.stats.drop_counter(DropReason::Aqm).add(len);
            self.link.loss_drops.add(len);
            self.lost.push(Dropped {
                packet: d.pkt,
                reason: DropReason::Aqm,
            });
            return;
        }
        add(&mut self.link.in_flight, len);
        self.line.push_back(InFlight {
            pkt: d.pkt,
            release: d.arrival,
        });
    }
}

impl LinkModel {
    /// A link whose trace or schedule time 0 is `origin`. Out-of-range settings are clamped
    /// (loss to [0, 1], noise and bias to at least -1).
    pub fn new(cfg: LinkConfig, origin: Instant) -> LinkModel {
        let clean = |v: f64| if v.is_finite() { v } else { 0.0 };
        let (seed, noise, bias) = (
            cfg.seed,
            clean(cfg.capacity_noise).max(0.0),
            clean(cfg.capacity_bias).max(-1.0),
        );
        let mut core = LinkCore::new(cfg, origin);
        core.reserve(1024);
        LinkModel {
            core,
            seed,
            noise,
            bias,
            last_now: origin,
            line: VecDeque::with_capacity(1024),
            lost: Vec::new(),
            stats: QdiscStats::default(),
            link: LinkStats::default(),
        }
    }

    /// The emulator's counters.
    pub fn link_stats(&self) -> LinkStats {
        let mut l = self.link;
        l.backlog = self.core.backlog();
        l.backlog_segments = self.core.backlog_segments();
        l
    }

    /// The link it runs.
    pub fn core(&self) -> &LinkCore {
        &self.core
    }

    /// The capacity setting.
    pub fn capacity(&self) -> &Capacity {
        self.core.capacity()
    }

    /// The propagation delay added after the link.
    pub fn delay(&self) -> Duration {
        self.core.delay()
    }

    /// The buffer's limits: most frames (wire segments) and most bytes (`None`: no limit).
    pub fn buffer_limits(&self) -> (Option<u32>, Option<u64>) {
        self.core.buffer_limits()
    }

    /// The probability that a frame sent is lost (after clamping to [0, 1]).
    pub fn loss(&self) -> f64 {
        self.core.loss()
    }

    /// How the buffer treats ICMP.
    pub fn icmp_policy(&self) -> IcmpPolicy {
        self.core.icmp_policy()
    }

    /// Replaces the capacity at `now`, keeping queued frames ([`LinkCore::set_capacity`]).
    pub fn set_capacity(&mut self, now: Instant, capacity: Capacity) {
        self.advance(now);
        self.core.set_capacity(now, capacity);
    }

    fn rel(&self, t: Instant) -> Duration {
        t.saturating_duration_since(self.core.origin())
    }

    /// The true capacity at `now` in bytes per second (`None`: unlimited). For a trace: the
    /// opportunities in the next [`CAPACITY_WINDOW`] × 1500 bytes ([`Capacity::rate_in`]).
    pub fn capacity_at(&self, now: Instant) -> Option<f64> {
        let rel = Instant::from_nanos(self.rel(now).as_nanos());
        self.core.capacity().rate_in(rel, CAPACITY_WINDOW)
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

    /// Moves the frames that left the buffer by `now` into the delay line.
    fn advance(&mut self, now: Instant) {
        self.last_now = self.last_now.max(now);
        let mut line = Line {
            line: &mut self.line,
            lost: &mut self.lost,
            stats: &mut self.stats,
            link: &mut self.link,
        };
        // `next_departure` works from the state it leaves.
        let _ = self.core.transmit(now, &mut line);
    }

    /// The earliest instant `dequeue` can return a frame, given what is queued now (`None`:
    /// nothing queued or propagating). For a stalled link it is the next time the link looks
    /// again.
    pub fn next_departure(&self) -> Option<Instant> {
        match (self.line.front(), self.core.next_end()) {
            (Some(f), _) => Some(f.release),
            (None, Some(e)) => Some(e.saturating_add(self.core.delay())),
            (None, None) => None,
        }
    }
}

impl Qdisc for LinkModel {
    fn enqueue(&mut self, now: Instant, pkt: Packet, drops: &mut Vec<Dropped>) {
        self.advance(now);
        drops.append(&mut self.lost);
        let len = pkt.len();
        self.stats.enqueued.add(len);
        match self.core.offer(now, pkt) {
            Ok(()) => self.stats.backlog.add(len),
            Err(pkt) => {
                self.stats.drop_counter(DropReason::Overflow).add(len);
                self.link.buffer_drops.add(len);
                drops.push(Dropped {
                    packet: pkt,
                    reason: DropReason::Overflow,
                });
            }
        }
    }

    fn dequeue(&mut self, now: Instant, drops: &mut Vec<Dropped>) -> Dequeue {
        self.advance(now);
        drops.append(&mut self.lost);
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
    fn icmp_apart_enters_a_full_buffer_and_counts_in_it_and_blocked_icmp_is_dropped() {
        let mut m = link(LinkConfig {
            capacity: Capacity::Rate(1_250_000),
            buffer_packets: Some(2),
            icmp: IcmpPolicy::Apart,
            ..LinkConfig::default()
        });
        let mut drops = Vec::new();
        // The first data frame starts at once; two wait and fill the buffer; the third is
        // dropped, the pings are not.
        for _ in 0..4 {
            m.enqueue(Instant::ZERO, frame(1500), &mut drops);
        }
        for _ in 0..3 {
            m.enqueue(Instant::ZERO, ping(), &mut drops);
        }
        assert_eq!(drops.len(), 1, "the fourth data frame only");
        assert!(!is_icmp(&drops[0].packet));
        assert_eq!(m.link_stats().backlog.packets, 5);
        // While the pings wait, they hold the buffer: data is refused until they have gone.
        m.enqueue(Instant::ZERO, frame(1500), &mut drops);
        assert_eq!(drops.len(), 2);
        let t = Instant::from_nanos(1_200_000 + 3 * 67_200);
        while let Dequeue::Packet(_) = m.dequeue(t, &mut drops) {}
        assert_eq!(
            m.link_stats().backlog.packets,
            1,
            "a data frame on the link, one waits"
        );
        m.enqueue(t, frame(1500), &mut drops);
        assert_eq!(drops.len(), 2);
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
        let t = run(&mut m, &[(0, 1500), (0, 1500), (0, 1500)]);
        assert_eq!(t, vec![1_200_000, 2_400_000, 3_600_000]);
        // The third waited in the buffer until its transmission started.
        assert_eq!(m.link_stats().last_sojourn, Duration::from_micros(2400));
        let t = run(&mut m, &[(10_000_000, 500)]);
        assert_eq!(t, vec![10_400_000]);
        let s = m.link_stats();
        assert_eq!(
            (s.tx.packets, s.backlog.packets, s.in_flight.packets),
            (4, 0, 0)
        );
        assert_eq!(
            s.last_sojourn,
            Duration::ZERO,
            "an idle link starts it at once"
        );
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
        assert_eq!(m.link_stats().last_sojourn, Duration::from_micros(2400));
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
        // A frame arriving exactly at an opportunity (10 ms) the link has not used may use it,
        // and a 2000-byte frame spans two opportunities (10 and 11 ms).
        let t = run(&mut m, &[(10 * ms, 2000)]);
        assert_eq!(t, vec![11 * ms]);
        // Two more arriving at 12 ms after the link sent a frame in that instant's first
        // opportunity: the first used opportunity is gone, the second (also at 12 ms) and
        // 15 ms's carry them.
        let mut drops = Vec::new();
        m.enqueue(Instant::from_millis(12), frame(1500), &mut drops);
        assert!(matches!(
            m.dequeue(Instant::from_millis(12), &mut drops),
            Dequeue::Packet(_)
        ));
        m.enqueue(Instant::from_millis(12), frame(1500), &mut drops);
        m.enqueue(Instant::from_millis(12), frame(1500), &mut drops);
        let t = run(&mut m, &[]);
        assert_eq!(t, vec![12 * ms, 15 * ms]);
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
        // The first frame starts at once (it leaves the buffer); five wait; two are dropped.
        for _ in 0..8 {
            m.enqueue(Instant::ZERO, frame(100), &mut drops);
        }
        assert_eq!(drops.len(), 2);
        assert!(drops.iter().all(|d| d.reason == DropReason::Overflow));
        assert_eq!(m.link_stats().backlog.packets, 5);
        assert_eq!(m.link_stats().buffer_drops.packets, 2);
        assert_eq!(m.link_stats().in_flight.packets, 1);
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
        assert_eq!((m.link_stats().backlog.packets, drops.len()), (3, 1));
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
    fn set_rate_applies_to_waiting_frames_and_estimate_has_bias_and_bounded_noise() {
        let mut m = link(LinkConfig {
            capacity: Capacity::Rate(1_250_000),
            capacity_bias: 0.2,
            capacity_noise: 0.1,
            ..LinkConfig::default()
        });
        let mut drops = Vec::new();
        for _ in 0..3 {
            m.enqueue(Instant::ZERO, frame(1500), &mut drops);
        }
        assert!(matches!(
            m.dequeue(Instant::from_nanos(1_200_000), &mut drops),
            Dequeue::Packet(_)
        ));
        m.set_rate(Some(crate::Rate::from_bytes_per_s(2_500_000)))
            .unwrap();
        // The second frame started at 1.2 ms and finishes at the old rate; the third, still
        // waiting, takes 0.6 ms at the new one.
        assert_eq!(
            m.dequeue(Instant::from_nanos(1_200_000), &mut drops),
            Dequeue::NotBefore(Instant::from_nanos(2_400_000))
        );
        assert!(matches!(
            m.dequeue(Instant::from_nanos(2_400_000), &mut drops),
            Dequeue::Packet(_)
        ));
        assert_eq!(
            m.dequeue(Instant::from_nanos(2_400_000), &mut drops),
            Dequeue::NotBefore(Instant::from_nanos(3_000_000))
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

    /// Each departure's (left the buffer, arrives, lost, busy) in ns.
    #[derive(Default)]
    struct Collect {
        out: Vec<(u64, u64, bool, u64)>,
        /// Frames the driver pushes when the buffer has room.
        refill: Vec<Packet>,
    }

    impl Departures for Collect {
        fn depart(&mut self, d: Departure) {
            self.out.push((
                d.at.as_nanos(),
                d.arrival.as_nanos(),
                d.lost,
                d.busy.as_nanos(),
            ));
        }
        fn refill(&mut self, link: &mut LinkCore, now: Instant) {
            while link.has_room() {
                let Some(p) = self.refill.pop() else { break };
                link.push(now, p);
            }
        }
    }

    #[test]
    fn charged_as_whole_frames_a_lost_frame_still_uses_the_link() {
        // 1,514,000 B/s: a 1514-byte frame (1500 IP bytes) takes 1 ms when whole frames are
        // charged.
        let mut c = LinkCore::new(
            LinkConfig {
                capacity: Capacity::Rate(1_514_000),
                delay: Duration::from_millis(5),
                buffer_packets: Some(3),
                loss: 1.0,
                charge: Charge::Frame,
                ..LinkConfig::default()
            },
            Instant::ZERO,
        );
        let refused = (0..5)
            .filter(|_| c.offer(Instant::ZERO, frame(1500)).is_err())
            .count();
        assert_eq!(refused, 2, "three wait, nothing sent yet");
        let mut out = Collect::default();
        assert_eq!(c.transmit(Instant::from_millis(10), &mut out), None);
        let ms = 1_000_000;
        assert_eq!(
            out.out,
            vec![
                (0, 6 * ms, true, ms),
                (ms, 7 * ms, true, ms),
                (2 * ms, 8 * ms, true, ms)
            ]
        );
        assert_eq!(c.backlog(), Counter::default());
    }

    #[test]
    fn a_driver_refills_the_buffer_within_a_trace_opportunity() {
        // One opportunity at 1 ms: a 500-byte frame waits; the driver's 700-byte frame, pulled
        // when the buffer empties, shares the opportunity; its 600-byte one does not fit what
        // is left and goes at 2 ms.
        let mut c = LinkCore::new(
            LinkConfig {
                capacity: Capacity::Trace(MahimahiTrace::from_offsets(vec![1, 2]).unwrap()),
                buffer_packets: Some(1),
                charge: Charge::Frame,
                ..LinkConfig::default()
            },
            Instant::ZERO,
        );
        c.offer(Instant::ZERO, frame(486)).unwrap();
        let mut out = Collect {
            refill: vec![frame(586), frame(686)],
            ..Collect::default()
        };
        let ms = 1_000_000;
        assert_eq!(
            c.transmit(Instant::ZERO, &mut out),
            Some(Instant::from_millis(1))
        );
        assert!(out.out.is_empty());
        assert_eq!(
            c.transmit(Instant::from_millis(1), &mut out),
            Some(Instant::from_millis(2))
        );
        assert_eq!(out.out, vec![(ms, ms, false, 0), (ms, ms, false, 0)]);
        assert_eq!(c.backlog().bytes, 600, "pulled at 1 ms, waits");
        assert_eq!(c.transmit(Instant::from_millis(2), &mut out), None);
        assert_eq!(out.out.len(), 3);
        assert_eq!(out.out[2].0, 2 * ms);
    }

    #[test]
    fn a_frame_offered_to_an_idle_trace_link_waits_for_the_next_opportunity() {
        // Opportunities every millisecond. Idle until 5.5 ms (the caller never transmitted):
        // the opportunities before then are lost, not used by the late frame; one at exactly
        // 7 ms may use the 7 ms opportunity.
        let mut c = LinkCore::new(
            LinkConfig {
                capacity: Capacity::Trace(MahimahiTrace::from_offsets((1..=10).collect()).unwrap()),
                charge: Charge::Frame,
                ..LinkConfig::default()
            },
            Instant::ZERO,
        );
        let mut out = Collect::default();
        c.offer(Instant::from_micros(5500), frame(100)).unwrap();
        assert_eq!(
            c.transmit(Instant::from_micros(5500), &mut out),
            Some(Instant::from_millis(6))
        );
        assert!(out.out.is_empty());
        assert_eq!(c.transmit(Instant::from_millis(6), &mut out), None);
        c.offer(Instant::from_millis(7), frame(100)).unwrap();
        assert_eq!(c.transmit(Instant::from_millis(7), &mut out), None);
        let at: Vec<u64> = out.out.iter().map(|d| d.0 / 1_000_000).collect();
        assert_eq!(at, vec![6, 7]);
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
