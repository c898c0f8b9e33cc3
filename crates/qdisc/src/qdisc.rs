//! The `Qdisc` trait: the one interface between queue managers and everything that drives them
//! (the simulator, the dataplane, benchmarks).

use crate::packet::{Buffers, Packet};
use crate::time::Instant;

/// Why a packet was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DropReason {
    /// The queue's packet or byte limit (or CAKE's memory limit) was exceeded.
    Overflow,
    /// The AQM (CoDel, PIE, COBALT's CoDel half) dropped it.
    Aqm,
    /// COBALT's BLUE half dropped it (unresponsive flow).
    Blue,
    /// CAKE's ACK filter dropped a redundant ACK.
    AckFilter,
}

impl DropReason {
    /// All reasons, in a fixed order (for tables).
    pub const ALL: [DropReason; 4] = [
        DropReason::Overflow,
        DropReason::Aqm,
        DropReason::Blue,
        DropReason::AckFilter,
    ];

    /// A short lowercase name.
    pub fn name(self) -> &'static str {
        match self {
            DropReason::Overflow => "overflow",
            DropReason::Aqm => "aqm",
            DropReason::Blue => "blue",
            DropReason::AckFilter => "ack_filter",
        }
    }
}

/// A dropped packet, handed back to the caller (who may recycle its buffer).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dropped {
    /// The packet.
    pub packet: Packet,
    /// Why it was dropped.
    pub reason: DropReason,
}

/// What `dequeue` produced.
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use]
pub enum Dequeue {
    /// A packet to transmit now.
    Packet(Packet),
    /// Packets are queued but the shaper holds them: call again at (or after) this instant.
    NotBefore(Instant),
    /// Nothing is queued.
    Empty,
}

/// Packet and byte counters for one drop reason.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counter {
    /// Packets.
    pub packets: u64,
    /// Bytes.
    pub bytes: u64,
}

impl Counter {
    /// Counts one packet of `len` bytes.
    #[inline]
    pub fn add(&mut self, len: u32) {
        self.packets += 1;
        self.bytes += u64::from(len);
    }
}

/// Counters every qdisc keeps. The accounting invariant, checked by the property tests:
/// `enqueued == dequeued + drops (all reasons) + backlog`, for packets and for bytes.
///
/// A GSO super-packet that the qdisc splits counts once per segment in `enqueued`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QdiscStats {
    /// Packets accepted by `enqueue` (including those dropped again at once).
    pub enqueued: Counter,
    /// Packets handed out by `dequeue`.
    pub dequeued: Counter,
    /// Drops by reason, indexed like [`DropReason::ALL`].
    pub drops: [Counter; 4],
    /// Packets and bytes queued now.
    pub backlog: Counter,
    /// Packets marked ECN CE instead of dropped.
    pub ecn_marks: u64,
    /// Times `dequeue` found packets queued but the shaper closed.
    pub overlimits: u64,
}

impl QdiscStats {
    /// Drop counter for `reason`.
    #[inline]
    pub fn drop_counter(&mut self, reason: DropReason) -> &mut Counter {
        &mut self.drops[reason as usize]
    }
    /// Drops of one reason.
    pub fn dropped(&self, reason: DropReason) -> Counter {
        self.drops[reason as usize]
    }
    /// Drops of all reasons.
    pub fn dropped_total(&self) -> Counter {
        let mut c = Counter::default();
        for d in &self.drops {
            c.packets += d.packets;
            c.bytes += d.bytes;
        }
        c
    }
    /// True when every packet and byte is accounted for.
    pub fn is_balanced(&self) -> bool {
        let d = self.dropped_total();
        self.enqueued.packets == self.dequeued.packets + d.packets + self.backlog.packets
            && self.enqueued.bytes == self.dequeued.bytes + d.bytes + self.backlog.bytes
    }
}

/// The error of [`Qdisc::set_rate`] for a qdisc that has no shaper.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NoShaper;

impl std::fmt::Display for NoShaper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("this qdisc has no shaper; put a shaper in front of it")
    }
}
impl std::error::Error for NoShaper {}

/// A queue manager driven by the caller's clock.
///
/// Call [`enqueue`](Qdisc::enqueue) for every arriving packet and [`dequeue`](Qdisc::dequeue)
/// whenever the link can take a packet; after [`Dequeue::NotBefore`] the next useful call is at
/// that instant. `now` must never go backwards between calls. Neither call allocates in steady
/// state: dropped packets go to the caller's `drops` vector, which the caller clears and reuses.
pub trait Qdisc {
    /// Offers `pkt` at `now`. Packets dropped because of it (it, or others to make room, or ACKs
    /// it made redundant) are appended to `drops`.
    fn enqueue(&mut self, now: Instant, pkt: Packet, drops: &mut Vec<Dropped>);

    /// As [`Qdisc::enqueue`], for a caller that pools its frame buffers: a qdisc that cuts GSO
    /// super-packets (CAKE's and DualPI2's `split-gso`) takes the segments' buffers from `bufs`
    /// and gives the super-packet's back to it (see [`segment_with`](crate::packet::segment_with)), so that
    /// segmenting allocates nothing once the pool is warm; the caller returns each segment's
    /// buffer to its pool when it is sent or dropped, as it does any frame's. Queueing decisions
    /// are those of `enqueue` except that a memory limit sees the segments' buffer capacities
    /// ([`Packet::truesize`]). The default ignores `bufs` and calls `enqueue`.
    fn enqueue_with(
        &mut self,
        now: Instant,
        pkt: Packet,
        drops: &mut Vec<Dropped>,
        bufs: &mut dyn Buffers,
    ) {
        let _ = bufs;
        self.enqueue(now, pkt, drops);
    }

    /// Takes the next packet to send at `now`. Packets the AQM drops on the way are appended to
    /// `drops`.
    fn dequeue(&mut self, now: Instant, drops: &mut Vec<Dropped>) -> Dequeue;

    /// Changes the shaped rate (`None` = unlimited) without losing queued packets. Qdiscs
    /// without a shaper return [`NoShaper`].
    fn set_rate(&mut self, rate: Option<crate::Rate>) -> Result<(), NoShaper> {
        let _ = rate;
        Err(NoShaper)
    }

    /// The counters.
    fn stats(&self) -> QdiscStats;

    /// Packets and bytes queued now.
    fn backlog(&self) -> Counter {
        self.stats().backlog
    }

    /// The qdisc's tc name (`cake`, `fq_codel`, ...).
    fn kind(&self) -> &'static str;

    /// Frees storage kept from a backlog larger than the one queued now (the packet store
    /// grows to the largest backlog seen and is reused, so that steady state allocates nothing);
    /// returns the bytes freed (0 when there was nothing to free: then nothing is allocated or
    /// freed). Call when the queue has drained after a burst, never on the per-packet path;
    /// queued packets and all state are kept. The default frees nothing.
    fn shrink(&mut self) -> usize {
        0
    }
}

/// Implements [`Qdisc`] for an enum whose every variant holds one qdisc (or a box of one), each
/// method forwarded to the variant's: the one home of enum dispatch over qdiscs
/// (`cake::AnyQdisc`, the dataplane's per-queue stages). `qdisc_by_variants!(Enum { Enum::A,
/// Enum::B })`. A variant's own defaults (`enqueue_with`, `set_rate`, `backlog`, `shrink`) are
/// the ones that run, so the enum behaves exactly as the qdisc it holds.
#[macro_export]
macro_rules! qdisc_by_variants {
    ($ty:ty { $($v:path),+ $(,)? }) => {
        impl $crate::Qdisc for $ty {
            #[inline]
            fn enqueue(
                &mut self,
                now: $crate::Instant,
                pkt: $crate::Packet,
                drops: &mut Vec<$crate::Dropped>,
            ) {
                match self { $($v(q) => q.enqueue(now, pkt, drops)),+ }
            }
            #[inline]
            fn enqueue_with(
                &mut self,
                now: $crate::Instant,
                pkt: $crate::Packet,
                drops: &mut Vec<$crate::Dropped>,
                bufs: &mut dyn $crate::packet::Buffers,
            ) {
                match self { $($v(q) => q.enqueue_with(now, pkt, drops, bufs)),+ }
            }
            #[inline]
            fn dequeue(
                &mut self,
                now: $crate::Instant,
                drops: &mut Vec<$crate::Dropped>,
            ) -> $crate::Dequeue {
                match self { $($v(q) => q.dequeue(now, drops)),+ }
            }
            fn set_rate(&mut self, rate: Option<$crate::Rate>) -> Result<(), $crate::NoShaper> {
                match self { $($v(q) => q.set_rate(rate)),+ }
            }
            fn stats(&self) -> $crate::QdiscStats {
                match self { $($v(q) => q.stats()),+ }
            }
            fn backlog(&self) -> $crate::Counter {
                match self { $($v(q) => q.backlog()),+ }
            }
            fn kind(&self) -> &'static str {
                match self { $($v(q) => q.kind()),+ }
            }
            fn shrink(&mut self) -> usize {
                match self { $($v(q) => q.shrink()),+ }
            }
        }
    };
}
