//! SFB (Stochastic Fair Blue), as Linux `sch_sfb` with tc-sfb(8)'s defaults.
//!
//! SFB keeps no per-flow state. Each packet's 32-bit flow hash is cut into 8 nibbles, one per
//! *level*; each nibble picks one of 16 *bins* of that level (8 x 16 = 128 bins). A bin is a
//! virtual queue: its `qlen` counts the queued packets that hash to it, and it has a BLUE
//! marking probability `p_mark` (Q0.16 fixed point, 0xFFFF = 1). On every arrival, each of the
//! packet's 8 bins is updated: an empty bin's `p_mark` falls by `decrement`, a bin holding at
//! least `target` (`bin_size`) packets sees its `p_mark` rise by `increment`. The packet's flow
//! then sees `p_min`, the smallest `p_mark` of its bins, and `qlen_min`, the smallest `qlen`:
//!
//! * total queue at `limit` packets: dropped (`queuedrop`, [`DropReason::Overflow`]);
//! * `qlen_min >= max`: dropped (`bucketdrop`, [`DropReason::Overflow`]);
//! * `p_min` = 1 (every bin saturated: an *inelastic* flow): the flow goes through the penalty
//!   box, a token bucket of `penalty_rate` packets per second and `penalty_burst` packets shared
//!   by all inelastic flows; without a token the packet is dropped (`penaltydrop`,
//!   [`DropReason::Blue`]);
//! * otherwise, with probability `p_min`, the packet is CE-marked if ECN-capable, else dropped
//!   (`earlydrop`, [`DropReason::Aqm`]); when `p_min` > 1/2 a part `2 * (p_min - 1/2)` of those
//!   is dropped even if ECN-capable.
//!
//! Accepted packets go to the child, a FIFO of `limit` packets (Linux's default `pfifo` child),
//! which therefore never drops. Dequeue takes the child's head and decrements its bins.
//!
//! Moving hash functions (double buffering): there are two sets of bins, each with its own hash
//! key. Every `rehash` interval the sets swap roles (the retiring set gets a new key but keeps
//! its counters, as Linux); during the last `warmup` before a swap, packets of inelastic flows
//! are also accounted in the standby set, so that it has learnt them when it takes over. The
//! schedule starts at the first `enqueue` (Linux starts it at configuration time) and is checked
//! on each `enqueue`, as Linux does.
//!
//! Linux quirks kept: the penalty box refills only when empty, from the time since its last
//! refill *attempt*, so inelastic arrivals more frequent than one per `1 / penalty_rate` keep it
//! empty after the initial burst; the refill is capped at 10 s of tokens.
//!
//! Deviations: time is in nanoseconds rather than jiffies; the flow hash is purple's keyed
//! 5-tuple hash (non-IP packets share one hash); external classifiers are not supported.

use std::collections::VecDeque;

use crate::codel::mark_packet_ce;
use crate::packet::Packet;
use crate::qdisc::{Dequeue, DropReason, Dropped, Qdisc, QdiscStats};
use crate::rng::Rng;
use crate::sfq::packet_hash;
use crate::time::{Duration, Instant};

/// Probability 1 (almost) in Q0.16 (Linux `SFB_MAX_PROB`).
pub const SFB_MAX_PROB: u16 = 0xFFFF;
/// Levels of bins (Linux `SFB_LEVELS`: 32-bit hash / 4 bits per level).
pub const SFB_LEVELS: usize = 8;
/// Bins per level (Linux `SFB_NUMBUCKETS`).
pub const SFB_NUMBUCKETS: usize = 16;
/// The device queue length Linux uses as the default limit (`txqueuelen`).
pub const DEFAULT_TXQUEUELEN: u32 = 1000;

/// Configuration of [`Sfb`]. Defaults are tc-sfb(8)'s.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SfbConfig {
    /// Packet limit of the whole queue (and of its FIFO child); 0 means the device
    /// `txqueuelen`, 1000. Default 0.
    pub limit: u32,
    /// Bins whose `qlen` all reach this drop the packet. Default 25.
    pub max: u32,
    /// `bin_size`: a bin holding at least this many packets raises its `p_mark`. Default 20.
    pub target: u32,
    /// `p_mark` increment in Q0.16. Default 33 (tc's 0.0005: `(0xFFFF + 1000) / 2000`).
    pub increment: u16,
    /// `p_mark` decrement in Q0.16. Default 3 (tc's 0.00005: `(0xFFFF + 10000) / 20000`).
    pub decrement: u16,
    /// Penalty box rate for inelastic flows, packets per second (0: drop them all). Default 10.
    pub penalty_rate: u32,
    /// Penalty box burst in packets (0: drop them all). Default 20.
    pub penalty_burst: u32,
    /// Interval between hash swaps (zero: never). Default 600 s.
    pub rehash: Duration,
    /// Double-buffering time before each swap (zero: none). Default 60 s.
    pub warmup: Duration,
}

impl Default for SfbConfig {
    fn default() -> Self {
        SfbConfig {
            limit: 0,
            max: 25,
            target: 20,
            increment: ((u32::from(SFB_MAX_PROB) + 1000) / 2000) as u16,
            decrement: ((u32::from(SFB_MAX_PROB) + 10000) / 20000) as u16,
            penalty_rate: 10,
            penalty_burst: 20,
            rehash: Duration::from_secs(600),
            warmup: Duration::from_secs(60),
        }
    }
}

impl SfbConfig {
    /// A probability in [0, 1] as Q0.16 (rounded; out-of-range or NaN values are clamped).
    pub fn prob(p: f64) -> u16 {
        if p.is_nan() {
            return 0;
        }
        (p.clamp(0.0, 1.0) * f64::from(SFB_MAX_PROB)).round() as u16
    }

    /// The packet limit in force (`limit`, or 1000 when 0).
    pub fn effective_limit(&self) -> u32 {
        if self.limit == 0 {
            DEFAULT_TXQUEUELEN
        } else {
            self.limit
        }
    }
}

/// SFB's own counters (tc's `sfb` xstats).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SfbStats {
    /// Packets dropped with probability `p_min` ([`DropReason::Aqm`]).
    pub earlydrop: u64,
    /// Inelastic-flow packets the penalty box refused ([`DropReason::Blue`]).
    pub penaltydrop: u64,
    /// Packets whose bins were all at `max` ([`DropReason::Overflow`]).
    pub bucketdrop: u64,
    /// Packets refused at the total `limit` ([`DropReason::Overflow`]).
    pub queuedrop: u64,
    /// Packets the child dropped (always 0: the child holds `limit` packets).
    pub childdrop: u64,
    /// Packets CE-marked instead of dropped.
    pub marked: u64,
    /// Largest bin `qlen` of the active set now.
    pub maxqlen: u32,
    /// Largest `p_mark` of the active set now (Q0.16).
    pub maxprob: u32,
    /// Mean `p_mark` of the active set now (Q0.16).
    pub avgprob: u32,
}

/// One bin: a virtual queue length and a marking probability.
#[derive(Clone, Copy, Debug, Default)]
struct Bin {
    qlen: u16,
    p_mark: u16,
}

type BinSet = [[Bin; SFB_NUMBUCKETS]; SFB_LEVELS];

/// The SFB qdisc.
#[derive(Debug)]
pub struct Sfb {
    config: SfbConfig,
    limit: u32,
    bins: [BinSet; 2],
    keys: [[u64; 2]; 2],
    /// The active bin set (0 or 1).
    slot: usize,
    double_buffering: bool,
    /// Time of the last swap (None before the first enqueue).
    rehash_time: Option<Instant>,
    tokens_avail: u32,
    token_time: Option<Instant>,
    /// The child FIFO; each packet carries its hash in each bin set (0: not accounted there).
    queue: VecDeque<(Packet, [u32; 2])>,
    rng: Rng,
    stats: QdiscStats,
    xstats: SfbStats,
}

impl Sfb {
    /// An empty SFB; `seed` draws the hash keys and the marking decisions. Reserves room for
    /// the packet limit (up to 65536 packets) so that steady-state operation does not allocate.
    pub fn new(config: SfbConfig, seed: u64) -> Self {
        let mut rng = Rng::new(seed);
        let keys = [
            [rng.next_u64(), rng.next_u64()],
            [rng.next_u64(), rng.next_u64()],
        ];
        let limit = config.effective_limit();
        Sfb {
            limit,
            bins: [[[Bin::default(); SFB_NUMBUCKETS]; SFB_LEVELS]; 2],
            keys,
            slot: 0,
            double_buffering: false,
            rehash_time: None,
            tokens_avail: config.penalty_burst,
            token_time: None,
            queue: VecDeque::with_capacity((limit as usize).min(1 << 16)),
            rng,
            stats: QdiscStats::default(),
            xstats: SfbStats::default(),
            config,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &SfbConfig {
        &self.config
    }

    /// SFB's counters, with the bin summary of the active set computed now.
    pub fn sfb_stats(&self) -> SfbStats {
        let mut s = self.xstats;
        let mut total = 0u64;
        for b in self.bins[self.slot].iter().flatten() {
            s.maxqlen = s.maxqlen.max(u32::from(b.qlen));
            s.maxprob = s.maxprob.max(u32::from(b.p_mark));
            total += u64::from(b.p_mark);
        }
        s.avgprob = (total / (SFB_LEVELS * SFB_NUMBUCKETS) as u64) as u32;
        s
    }

    /// The hash of `pkt` in bin set `slot` (never 0: 0 means "not accounted").
    fn hash(&self, pkt: &Packet, slot: usize) -> u32 {
        packet_hash(pkt, self.keys[slot]).max(1)
    }

    /// `p_min` for `pkt`'s flow in the active set, in [0, 1] (1 = treated as inelastic).
    pub fn mark_probability(&self, pkt: &Packet) -> f64 {
        let mut h = self.hash(pkt, self.slot);
        let mut p = SFB_MAX_PROB;
        for level in &self.bins[self.slot] {
            p = p.min(level[(h & 0xF) as usize].p_mark);
            h >>= 4;
        }
        f64::from(p) / f64::from(SFB_MAX_PROB)
    }

    /// The smallest bin `qlen` of `pkt`'s flow in the active set.
    pub fn flow_qlen(&self, pkt: &Packet) -> u32 {
        let mut h = self.hash(pkt, self.slot);
        let mut q = u16::MAX;
        for level in &self.bins[self.slot] {
            q = q.min(level[(h & 0xF) as usize].qlen);
            h >>= 4;
        }
        u32::from(q)
    }

    /// Updates the probabilities of the bins of `hash` in set `slot`; returns
    /// `(qlen_min, p_min)`.
    fn update_bins(&mut self, slot: usize, mut hash: u32) -> (u16, u16) {
        let (inc, dec, target) = (
            self.config.increment,
            self.config.decrement,
            self.config.target,
        );
        let mut qmin = u16::MAX;
        let mut pmin = u16::MAX;
        for level in self.bins[slot].iter_mut() {
            let b = &mut level[(hash & 0xF) as usize];
            hash >>= 4;
            if b.qlen == 0 {
                b.p_mark = b.p_mark.saturating_sub(dec);
            } else if u32::from(b.qlen) >= target {
                b.p_mark = b.p_mark.saturating_add(inc);
            }
            qmin = qmin.min(b.qlen);
            pmin = pmin.min(b.p_mark);
        }
        (qmin, pmin)
    }

    fn adjust_qlen(&mut self, hashes: [u32; 2], up: bool) {
        for (slot, &h) in hashes.iter().enumerate() {
            if h == 0 {
                continue;
            }
            let mut h = h;
            for level in self.bins[slot].iter_mut() {
                let b = &mut level[(h & 0xF) as usize];
                h >>= 4;
                b.qlen = if up {
                    b.qlen.saturating_add(1)
                } else {
                    b.qlen.saturating_sub(1)
                };
            }
        }
    }

    /// The penalty box (Linux `sfb_rate_limit`): true when the packet must be dropped.
    fn rate_limited(&mut self, now: Instant) -> bool {
        let (rate, burst) = (self.config.penalty_rate, self.config.penalty_burst);
        if rate == 0 || burst == 0 {
            return true;
        }
        if self.tokens_avail < 1 {
            let last = self.token_time.unwrap_or(now);
            let age = (now - last).as_nanos().min(10_000_000_000);
            let tokens = u128::from(age) * u128::from(rate) / 1_000_000_000;
            self.tokens_avail = tokens.min(u128::from(burst)) as u32;
            self.token_time = Some(now);
            if self.tokens_avail < 1 {
                return true;
            }
        }
        self.tokens_avail -= 1;
        false
    }

    fn drop_packet(&mut self, pkt: Packet, reason: DropReason, drops: &mut Vec<Dropped>) {
        self.stats.drop_counter(reason).add(pkt.len());
        drops.push(Dropped {
            packet: pkt,
            reason,
        });
    }

    /// Swaps bin sets or starts double buffering when due (Linux: on each enqueue).
    fn hash_schedule(&mut self, now: Instant) {
        let start = *self.rehash_time.get_or_insert(now);
        self.token_time.get_or_insert(now);
        if self.config.rehash == Duration::ZERO {
            return;
        }
        let limit = start + self.config.rehash;
        if now > limit {
            // The retiring set gets a new key (its counters stay, as Linux).
            self.keys[self.slot] = [self.rng.next_u64(), self.rng.next_u64()];
            self.slot ^= 1;
            self.double_buffering = false;
            self.rehash_time = Some(now);
        } else if !self.double_buffering
            && self.config.warmup > Duration::ZERO
            && now > limit - self.config.warmup
        {
            self.double_buffering = true;
        }
    }
}

impl Qdisc for Sfb {
    fn enqueue(&mut self, now: Instant, mut pkt: Packet, drops: &mut Vec<Dropped>) {
        let len = pkt.len();
        self.stats.enqueued.add(len);
        if self.stats.backlog.packets >= u64::from(self.limit) {
            self.stats.overlimits += 1;
            self.xstats.queuedrop += 1;
            self.drop_packet(pkt, DropReason::Overflow, drops);
            return;
        }
        self.hash_schedule(now);
        let slot = self.slot;
        let mut hashes = [0u32; 2];
        hashes[slot] = self.hash(&pkt, slot);
        let (qmin, pmin) = self.update_bins(slot, hashes[slot]);
        let other = slot ^ 1;

        if u32::from(qmin) >= self.config.max {
            self.stats.overlimits += 1;
            self.xstats.bucketdrop += 1;
            self.drop_packet(pkt, DropReason::Overflow, drops);
            return;
        }
        if pmin == SFB_MAX_PROB {
            // Inelastic flow.
            if self.double_buffering {
                hashes[other] = self.hash(&pkt, other);
                self.update_bins(other, hashes[other]);
            }
            if self.rate_limited(now) {
                self.stats.overlimits += 1;
                self.xstats.penaltydrop += 1;
                self.drop_packet(pkt, DropReason::Blue, drops);
                return;
            }
        } else {
            let r = (self.rng.next_u32() & u32::from(SFB_MAX_PROB)) as u16;
            if r < pmin {
                let half = SFB_MAX_PROB / 2;
                let must_drop = pmin > half && u32::from(r) < u32::from(pmin - half) * 2;
                if !must_drop && mark_packet_ce(&mut pkt) {
                    self.xstats.marked += 1;
                    self.stats.ecn_marks += 1;
                } else {
                    self.xstats.earlydrop += 1;
                    self.drop_packet(pkt, DropReason::Aqm, drops);
                    return;
                }
            }
        }
        self.stats.backlog.add(len);
        self.adjust_qlen(hashes, true);
        self.queue.push_back((pkt, hashes));
    }

    fn dequeue(&mut self, _now: Instant, _drops: &mut Vec<Dropped>) -> Dequeue {
        let Some((pkt, hashes)) = self.queue.pop_front() else {
            return Dequeue::Empty;
        };
        let len = pkt.len();
        self.stats.backlog.packets -= 1;
        self.stats.backlog.bytes -= u64::from(len);
        self.stats.dequeued.add(len);
        self.adjust_qlen(hashes, false);
        Dequeue::Packet(pkt)
    }

    fn stats(&self) -> QdiscStats {
        self.stats
    }

    fn kind(&self) -> &'static str {
        "sfb"
    }
}
