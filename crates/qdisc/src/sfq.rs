//! SFQ (Stochastic Fairness Queueing), as Linux `sch_sfq` with tc-sfq(8)'s defaults.
//!
//! Packets are hashed by their 5-tuple (keyed by a seeded perturbation) into `divisor` hash
//! buckets. A bucket in use is bound to one of `flows` flow *slots*; a slot holds at most `depth`
//! packets. Active slots form a ring served round robin; each slot has an *allotment* credit:
//! the scheduler serves the slot after the ring's tail while its allotment is positive, charging
//! each packet's length; a slot whose allotment is used up gets another `quantum` and becomes the
//! tail (so the next slot is served). A slot that becomes active joins the ring at the tail with
//! one quantum; a slot that empties leaves the ring and frees its bucket.
//!
//! Overflow, as Linux: an arrival for a slot already holding `depth` packets is dropped (or, with
//! `headdrop`, the slot's head is dropped and the arrival queued); an arrival that finds no free
//! slot is dropped; when the total exceeds `limit`, one packet is dropped from the tail (head with
//! `headdrop`) of a longest slot, or, when every slot holds one packet, the slot next in the ring
//! loses its packet. All these are [`DropReason::Overflow`].
//!
//! Longest slots are found in O(1) as Linux does: slots are kept on per-depth lists and the
//! greatest non-empty depth is tracked; ties go to the slot that reached that depth last.
//!
//! `perturb` (seconds; 0 = never, the default) re-keys the hash periodically and, as Linux since
//! 3.x, re-hashes the queued packets into new slots (packets that no longer fit are dropped).
//! Perturbation is lazy (sans-IO): it is applied on the first `enqueue`/`dequeue` at or after
//! each due time, once however many periods passed idle.
//!
//! Allotments are counted in units of 8 bytes rounded up, as Linux (`SFQ_ALLOT_SHIFT`).
//!
//! Not implemented: `redflowlimit` and the RED/ECN options (`min`, `max`, `probability`,
//! `ecn`, `harddrop`), and external classifiers (`tc filter`). Non-IP packets share one bucket.

use std::collections::VecDeque;

use crate::packet::{FlowTuple, Headers, Packet};
use crate::qdisc::{Dequeue, DropReason, Dropped, Qdisc, QdiscStats};
use crate::rng::Rng;
use crate::time::{Duration, Instant};

/// Null index of the slot lists.
const NIL: u32 = u32::MAX;
/// Most packets a slot may hold (Linux `SFQ_MAX_DEPTH`).
pub const SFQ_MAX_DEPTH: u32 = 127;
/// Most flow slots (Linux `SFQ_MAX_FLOWS`).
pub const SFQ_MAX_FLOWS: u32 = 65408;
/// Largest hash divisor Linux accepts.
pub const SFQ_MAX_DIVISOR: u32 = 65536;
/// Largest quantum whose allotment (in 8-byte units) fits Linux's 16-bit `allot`.
pub const SFQ_MAX_QUANTUM: u32 = 0x7fff * 8;

/// Configuration of [`Sfq`]. Defaults are Linux's (`tc qdisc add ... sfq`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SfqConfig {
    /// Packet limit over all slots. Default 127. Clamped to `1..=depth * flows`.
    pub limit: u32,
    /// Round-robin quantum in bytes. Default 1514 (the Ethernet MTU with its header).
    /// Clamped to `1..=SFQ_MAX_QUANTUM`.
    pub quantum: u32,
    /// Number of hash buckets; a power of two. Default 1024. A non-power of two is rounded up,
    /// and the value clamped to `1..=65536`.
    pub divisor: u32,
    /// Number of flow slots. Default 128. Clamped to `1..=min(divisor, limit, 65408)`.
    pub flows: u32,
    /// Most packets per slot. Default 127. Clamped to `1..=127`.
    pub depth: u32,
    /// Hash perturbation period; zero (the default) never perturbs.
    pub perturb: Duration,
    /// Drop from the head of a slot instead of the tail. Default off.
    pub headdrop: bool,
}

impl Default for SfqConfig {
    fn default() -> Self {
        SfqConfig {
            limit: SFQ_MAX_DEPTH,
            quantum: crate::FULL_FRAME,
            divisor: 1024,
            flows: 128,
            depth: SFQ_MAX_DEPTH,
            perturb: Duration::ZERO,
            headdrop: false,
        }
    }
}

impl SfqConfig {
    /// The configuration as Linux would apply it (`sfq_change`'s clamping).
    pub fn normalized(mut self) -> Self {
        self.quantum = self.quantum.clamp(1, SFQ_MAX_QUANTUM);
        self.divisor = self
            .divisor
            .clamp(1, SFQ_MAX_DIVISOR)
            .checked_next_power_of_two()
            .unwrap_or(SFQ_MAX_DIVISOR);
        self.depth = self.depth.clamp(1, SFQ_MAX_DEPTH);
        self.flows = self.flows.clamp(1, SFQ_MAX_FLOWS).min(self.divisor);
        self.limit = self.limit.clamp(1, self.depth * self.flows);
        self.flows = self.flows.min(self.limit);
        self
    }
}

/// One flow slot.
#[derive(Debug, Default)]
struct Slot {
    queue: VecDeque<Packet>,
    /// Packets queued (the slot's depth-list index).
    qlen: u32,
    /// Bytes queued.
    backlog: u64,
    /// Allotment in 8-byte units.
    allot: i32,
    /// Next slot in the round-robin ring.
    next: u32,
    /// The hash bucket bound to this slot.
    hash: u32,
    /// Neighbours on the depth list.
    dprev: u32,
    dnext: u32,
}

/// Allotment units of `len` bytes (8-byte units, rounded up).
#[inline]
fn allot_size(len: u32) -> i32 {
    len.div_ceil(8) as i32
}

/// A keyed 32-bit hash of a 5-tuple, shared by FQ-CoDel, SFQ and SFB (not cryptographic; the key
/// stops trivial collisions being chosen from outside without knowing the seed).
pub(crate) fn keyed_tuple_hash(t: &FlowTuple, key: [u64; 2]) -> u32 {
    let word = |b: &[u8]| {
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        u64::from_le_bytes(a)
    };
    let words = [
        word(&t.src[..8]),
        word(&t.src[8..]),
        word(&t.dst[..8]),
        word(&t.dst[8..]),
        u64::from(t.proto) | u64::from(t.src_port) << 8 | u64::from(t.dst_port) << 24,
    ];
    let mut h = key[0];
    for w in words {
        h = (h ^ w).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        h ^= h >> 29;
    }
    h ^= key[1];
    h = (h ^ (h >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    h ^= h >> 31;
    (h >> 32) as u32
}

/// The flow hash of `pkt` under `key` (non-IP packets hash an all-zero tuple).
pub(crate) fn packet_hash(pkt: &Packet, key: [u64; 2]) -> u32 {
    let tuple = Headers::parse(&pkt.data)
        .ip
        .map(|ip| ip.tuple)
        .unwrap_or_default();
    keyed_tuple_hash(&tuple, key)
}

/// The SFQ qdisc.
#[derive(Debug)]
pub struct Sfq {
    config: SfqConfig,
    /// Allotment of one quantum, in 8-byte units.
    scaled_quantum: i32,
    rng: Rng,
    key: [u64; 2],
    /// Hash bucket -> slot index (NIL: unbound).
    ht: Vec<u32>,
    slots: Vec<Slot>,
    /// Head of the list of slots of each depth (0..=depth); depth 0 holds the free slots.
    dep_head: Vec<u32>,
    /// Greatest depth with a slot on it.
    cur_depth: u32,
    /// Tail of the round-robin ring (NIL: no active slot).
    tail: u32,
    next_perturb: Option<Instant>,
    perturb_count: u64,
    /// Scratch list for re-hashing (kept to reuse its capacity).
    rehash_buf: Vec<Packet>,
    stats: QdiscStats,
}

impl Sfq {
    /// An empty SFQ; `config` is clamped as Linux does ([`SfqConfig::normalized`]); `seed` draws
    /// the hash keys (the initial one and those of later perturbations).
    pub fn new(config: SfqConfig, seed: u64) -> Self {
        let config = config.normalized();
        let mut rng = Rng::new(seed);
        let key = [rng.next_u64(), rng.next_u64()];
        let n = config.flows as usize;
        let mut q = Sfq {
            scaled_quantum: allot_size(config.quantum),
            rng,
            key,
            ht: vec![NIL; config.divisor as usize],
            slots: (0..n).map(|_| Slot::default()).collect(),
            dep_head: vec![NIL; config.depth as usize + 1],
            cur_depth: 0,
            tail: NIL,
            next_perturb: None,
            perturb_count: 0,
            rehash_buf: Vec::new(),
            stats: QdiscStats::default(),
            config,
        };
        for x in (0..n as u32).rev() {
            q.slots[x as usize].dprev = NIL;
            q.slots[x as usize].dnext = NIL;
            q.link(x);
        }
        q
    }

    /// The configuration (after clamping).
    pub fn config(&self) -> &SfqConfig {
        &self.config
    }

    /// The hash bucket (0..divisor) `pkt` falls in under the current key.
    pub fn bucket(&self, pkt: &Packet) -> u32 {
        packet_hash(pkt, self.key) & (self.config.divisor - 1)
    }

    /// Packets queued in `pkt`'s bucket now (0 when the bucket has no slot).
    pub fn bucket_qlen(&self, pkt: &Packet) -> u32 {
        match self.ht[self.bucket(pkt) as usize] {
            NIL => 0,
            x => self.slots[x as usize].qlen,
        }
    }

    /// Slots holding packets now.
    pub fn active_flows(&self) -> u32 {
        self.slots.iter().filter(|s| s.qlen > 0).count() as u32
    }

    /// How many times the hash was perturbed.
    pub fn perturbations(&self) -> u64 {
        self.perturb_count
    }

    // --- depth lists -------------------------------------------------------------------------

    fn link(&mut self, x: u32) {
        let d = self.slots[x as usize].qlen as usize;
        let h = self.dep_head[d];
        let s = &mut self.slots[x as usize];
        s.dprev = NIL;
        s.dnext = h;
        if h != NIL {
            self.slots[h as usize].dprev = x;
        }
        self.dep_head[d] = x;
    }

    fn unlink(&mut self, x: u32) {
        let (p, n, d) = {
            let s = &self.slots[x as usize];
            (s.dprev, s.dnext, s.qlen as usize)
        };
        if p == NIL {
            self.dep_head[d] = n;
        } else {
            self.slots[p as usize].dnext = n;
        }
        if n != NIL {
            self.slots[n as usize].dprev = p;
        }
    }

    /// The slot gained a packet: move it one depth list up.
    fn inc(&mut self, x: u32) {
        self.unlink(x);
        let s = &mut self.slots[x as usize];
        s.qlen += 1;
        let d = s.qlen;
        self.link(x);
        if self.cur_depth < d {
            self.cur_depth = d;
        }
    }

    /// The slot lost a packet: move it one depth list down.
    fn dec(&mut self, x: u32) {
        let s = &self.slots[x as usize];
        let alone = s.dprev == NIL && s.dnext == NIL;
        let d = s.qlen;
        self.unlink(x);
        if alone && self.cur_depth == d {
            self.cur_depth -= 1;
        }
        self.slots[x as usize].qlen -= 1;
        self.link(x);
    }

    // --- helpers ----------------------------------------------------------------------------

    fn drop_packet(&mut self, pkt: Packet, drops: &mut Vec<Dropped>) {
        self.stats.drop_counter(DropReason::Overflow).add(pkt.len());
        drops.push(Dropped {
            packet: pkt,
            reason: DropReason::Overflow,
        });
    }

    /// Takes a queued packet out of slot `x` (head or tail), keeping every count right.
    fn take(&mut self, x: u32, from_head: bool) -> Option<Packet> {
        let s = &mut self.slots[x as usize];
        let pkt = if from_head {
            s.queue.pop_front()
        } else {
            s.queue.pop_back()
        }?;
        let len = pkt.len();
        s.backlog -= u64::from(len);
        self.stats.backlog.packets -= 1;
        self.stats.backlog.bytes -= u64::from(len);
        self.dec(x);
        Some(pkt)
    }

    /// Adds `pkt` to slot `x` and, if the slot was idle, to the ring's tail with one quantum.
    fn add(&mut self, x: u32, pkt: Packet) {
        let len = pkt.len();
        let s = &mut self.slots[x as usize];
        s.backlog += u64::from(len);
        s.queue.push_back(pkt);
        self.stats.backlog.add(len);
        self.inc(x);
        if self.slots[x as usize].qlen == 1 {
            if self.tail == NIL {
                self.slots[x as usize].next = x;
            } else {
                let t = self.tail as usize;
                self.slots[x as usize].next = self.slots[t].next;
                self.slots[t].next = x;
            }
            self.tail = x;
            self.slots[x as usize].allot = self.scaled_quantum;
        }
    }

    /// The slot for bucket `h`, binding a free slot if needed (None: no free slot).
    fn slot_for(&mut self, h: u32) -> Option<u32> {
        let x = self.ht[h as usize];
        if x != NIL {
            return Some(x);
        }
        let x = self.dep_head[0];
        if x == NIL {
            return None;
        }
        self.ht[h as usize] = x;
        let s = &mut self.slots[x as usize];
        s.hash = h;
        s.backlog = 0;
        Some(x)
    }

    /// Linux `sfq_drop`: one packet from a longest slot.
    fn drop_one(&mut self, drops: &mut Vec<Dropped>) {
        let d = self.cur_depth;
        if d > 1 {
            let x = self.dep_head[d as usize];
            if let Some(p) = self.take(x, self.config.headdrop) {
                self.drop_packet(p, drops);
            }
        } else if d == 1 && self.tail != NIL {
            // Every slot holds one packet: the slot served next loses it and leaves the ring.
            let t = self.tail as usize;
            let x = self.slots[t].next;
            if x == self.tail {
                self.tail = NIL;
            } else {
                self.slots[t].next = self.slots[x as usize].next;
            }
            let h = self.slots[x as usize].hash;
            self.ht[h as usize] = NIL;
            if let Some(p) = self.take(x, true) {
                self.drop_packet(p, drops);
            }
        }
    }

    /// Applies a due perturbation: a new key, and the queued packets re-hashed.
    fn maybe_perturb(&mut self, now: Instant, drops: &mut Vec<Dropped>) {
        let period = self.config.perturb;
        if period == Duration::ZERO {
            return;
        }
        let Some(next) = self.next_perturb else {
            self.next_perturb = Some(now + period);
            return;
        };
        if now < next {
            return;
        }
        let periods = (now - next).as_nanos() / period.as_nanos() + 1;
        self.next_perturb = Some(next + period.saturating_mul(periods));
        self.key = [self.rng.next_u64(), self.rng.next_u64()];
        self.perturb_count += 1;
        if self.tail != NIL {
            self.rehash(drops);
        }
    }

    /// Linux `sfq_rehash`: empties every slot (in slot order, each head first) and queues the
    /// packets again under the current key.
    fn rehash(&mut self, drops: &mut Vec<Dropped>) {
        let mut buf = std::mem::take(&mut self.rehash_buf);
        for x in 0..self.slots.len() as u32 {
            if self.slots[x as usize].qlen == 0 {
                continue;
            }
            while let Some(p) = self.take(x, true) {
                buf.push(p);
            }
            let h = self.slots[x as usize].hash;
            self.ht[h as usize] = NIL;
        }
        self.tail = NIL;
        for pkt in buf.drain(..) {
            let h = self.bucket(&pkt);
            match self.slot_for(h) {
                Some(x) if self.slots[x as usize].qlen < self.config.depth => self.add(x, pkt),
                _ => self.drop_packet(pkt, drops),
            }
        }
        self.rehash_buf = buf;
    }
}

impl Qdisc for Sfq {
    fn enqueue(&mut self, now: Instant, pkt: Packet, drops: &mut Vec<Dropped>) {
        self.maybe_perturb(now, drops);
        let len = pkt.len();
        self.stats.enqueued.add(len);
        let h = self.bucket(&pkt);
        let Some(x) = self.slot_for(h) else {
            self.drop_packet(pkt, drops);
            return;
        };
        if self.slots[x as usize].qlen >= self.config.depth {
            if !self.config.headdrop {
                self.drop_packet(pkt, drops);
                return;
            }
            // Head drop: the slot keeps its depth and its place in the ring.
            let s = &mut self.slots[x as usize];
            if let Some(head) = s.queue.pop_front() {
                let hl = u64::from(head.len());
                s.backlog = s.backlog - hl + u64::from(len);
                s.queue.push_back(pkt);
                self.stats.backlog.bytes = self.stats.backlog.bytes - hl + u64::from(len);
                self.drop_packet(head, drops);
            }
            return;
        }
        self.add(x, pkt);
        if self.stats.backlog.packets > u64::from(self.config.limit) {
            self.drop_one(drops);
        }
    }

    fn dequeue(&mut self, now: Instant, drops: &mut Vec<Dropped>) -> Dequeue {
        self.maybe_perturb(now, drops);
        if self.tail == NIL {
            return Dequeue::Empty;
        }
        let mut a = self.slots[self.tail as usize].next;
        while self.slots[a as usize].allot <= 0 {
            self.tail = a;
            self.slots[a as usize].allot += self.scaled_quantum;
            a = self.slots[a as usize].next;
        }
        let Some(pkt) = self.take(a, true) else {
            // Unreachable: ring slots are never empty. Repair rather than spin.
            self.tail = NIL;
            return Dequeue::Empty;
        };
        let len = pkt.len();
        self.stats.dequeued.add(len);
        let s = &mut self.slots[a as usize];
        if s.qlen == 0 {
            let next = s.next;
            let h = s.hash;
            self.ht[h as usize] = NIL;
            if next == a {
                self.tail = NIL;
            } else {
                let t = self.tail as usize;
                self.slots[t].next = next;
            }
        } else {
            s.allot -= allot_size(len);
        }
        Dequeue::Packet(pkt)
    }

    fn stats(&self) -> QdiscStats {
        self.stats
    }

    fn kind(&self) -> &'static str {
        "sfq"
    }
}
