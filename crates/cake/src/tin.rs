//! One tin: 1024 flow queues with 8-way set-associative tags, per-host bulk counts, the three
//! DRR++ lists (new, old, decaying), the tin shaper clock and the tin's statistics.

use crate::cobalt::CobaltVars;
use crate::config::FlowMode;
use crate::params::TinParams;
use qdisc::{Instant, Rng};

/// Flow queues per tin.
pub const QUEUES: usize = 1024;
/// Ways per set.
pub const SET_WAYS: usize = 8;
/// Sets of the flow table.
const SETS: usize = QUEUES / SET_WAYS;
/// "No packet" in the packet slab's links.
pub const NIL: u32 = u32::MAX;
const NIL16: u16 = u16::MAX;

/// Index of queue (or host slot) `i` in a tin's fixed-size tables. Queue ids are always below
/// [`QUEUES`] (the classifier only hands out such ids), so the mask never changes an index; it
/// lets the compiler drop the bounds check on every per-packet table access.
#[inline(always)]
pub fn qi(i: u16) -> usize {
    usize::from(i) % QUEUES
}

/// A `QUEUES`-long table filled with `v`, allocated directly on the heap.
fn table<T: Clone>(v: T) -> Box<[T; QUEUES]> {
    match vec![v; QUEUES].into_boxed_slice().try_into() {
        Ok(t) => t,
        // The vector has exactly QUEUES elements, so the conversion cannot fail.
        Err(_) => unreachable!("table length is QUEUES"),
    }
}

/// A flow's place in DRR++. Sparse and bulk come first (discriminants 0 and 1), so that
/// enqueue's test of a flow that stays as it is, "sparse or bulk", is one compare of the
/// discriminant below 2 (with `None` first it took a move, an OR and a compare).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FlowSet {
    /// New (sparse) flow.
    Sparse,
    /// Bulk flow.
    Bulk,
    /// Not on any list.
    #[default]
    None,
    /// Empty, in the old list, still counted sparse.
    SparseWait,
    /// Empty, COBALT state still decaying.
    Decaying,
}

/// Which list a flow is on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ListId {
    /// None.
    #[default]
    None,
    /// The new-flows list.
    New,
    /// The old-flows list.
    Old,
    /// The decaying-flows list.
    Decaying,
}

/// One flow queue: the per-packet state of one queue, exactly one cache line (64 bytes,
/// aligned), so that each packet's flow accesses touch one line of the tin's table. The drop
/// count, which only statistics read, lives apart in [`Tin::flow_drops`].
#[derive(Clone, Copy, Debug)]
#[repr(align(64))]
pub struct Flow {
    /// First packet (slab index) or NIL.
    pub head: u32,
    /// Last packet; meaningful only while `head` is not NIL (unlinking the last packet
    /// leaves it as it was, and the next packet queued rewrites it).
    pub tail: u32,
    /// Bytes queued.
    pub backlog: u32,
    /// DRR deficit.
    pub deficit: i32,
    /// DRR++ state. A change to or from [`FlowSet::None`] goes through [`Tin::set_flow_set`].
    pub set: FlowSet,
    /// Source host slot.
    pub srchost: u16,
    /// Destination host slot.
    pub dsthost: u16,
    /// COBALT state.
    pub cvars: CobaltVars,
    list: ListId,
    prev: u16,
    next: u16,
}

impl Default for Flow {
    fn default() -> Self {
        Flow {
            head: NIL,
            tail: NIL,
            backlog: 0,
            deficit: 0,
            set: FlowSet::None,
            srchost: 0,
            dsthost: 0,
            cvars: CobaltVars::default(),
            list: ListId::None,
            prev: NIL16,
            next: NIL16,
        }
    }
}

/// Per-host bulk flow counts and tags, one slot per queue index, as arrays (struct of arrays):
/// the 8 ways of a set are contiguous, so a lookup compares them in one pass.
#[derive(Clone, Debug)]
pub struct Hosts {
    /// Tag (source-host hash) owning each slot as a source.
    pub src_tag: [u32; QUEUES],
    /// Tag owning each slot as a destination.
    pub dst_tag: [u32; QUEUES],
    /// Bulk flows from each slot's source host.
    pub src_bulk: [u16; QUEUES],
    /// Bulk flows to each slot's destination host.
    pub dst_bulk: [u16; QUEUES],
}

impl Default for Hosts {
    fn default() -> Self {
        Hosts {
            src_tag: [0; QUEUES],
            dst_tag: [0; QUEUES],
            src_bulk: [0; QUEUES],
            dst_bulk: [0; QUEUES],
        }
    }
}

/// A DRR++ list: circular and doubly linked through its flows' `prev` and `next` (the head's
/// `prev` is the tail, the tail's `next` the head), so that rotating the list is moving its
/// head. A flow on no list has both links [`NIL16`]. Laid out as its head (`repr(transparent)`,
/// see [`NewDecaying`]).
#[derive(Clone, Copy, Debug)]
#[repr(transparent)]
struct List {
    /// The first flow, or `NIL16` when the list is empty.
    head: u16,
}

impl Default for List {
    fn default() -> Self {
        List { head: NIL16 }
    }
}

/// The new and the decaying lists side by side (`repr(C)`, new first), so that
/// [`Tin::only_old`] reads both heads as one 32-bit word.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C)]
struct NewDecaying {
    new: List,
    decaying: List,
}

/// One tin's state.
#[derive(Clone, Debug)]
pub struct Tin {
    /// Flow queues.
    pub flows: Box<[Flow; QUEUES]>,
    /// Set-associative tags (full flow hashes).
    pub tags: Box<[u32; QUEUES]>,
    /// Host table.
    pub hosts: Box<Hosts>,
    /// Packets dropped from each flow queue (AQM and overflow), by queue.
    pub flow_drops: Box<[u32; QUEUES]>,
    /// The ways in use of each set: bit `k` of `busy[s]` is set exactly when queue
    /// `s * SET_WAYS + k` is on a DRR++ list (its [`Flow::set`] is not [`FlowSet::None`]), so
    /// that the lookup finds a free way without reading the set's 8 flows (8 cache lines).
    /// Kept by [`Tin::set_flow_set`].
    busy: [u8; SETS],
    /// The new and the decaying lists.
    nd: NewDecaying,
    old: List,
    /// Derived parameters.
    pub params: TinParams,
    /// Tin shaper clock.
    pub time_next: Instant,
    /// Tin DRR deficit (unlimited mode).
    pub deficit: i32,
    /// Bytes queued.
    pub backlog: u64,
    /// Flow counts.
    pub sparse_flow_count: u32,
    /// Bulk flows.
    pub bulk_flow_count: u32,
    /// Decaying flows.
    pub decaying_flow_count: u32,
    /// Flows with BLUE engaged.
    pub unresponsive_flow_count: u32,
    /// Delay EWMAs, ns.
    pub avge_delay: u64,
    /// Peak delay EWMA.
    pub peak_delay: u64,
    /// Base delay EWMA.
    pub base_delay: u64,
    /// Counters.
    pub packets: u64,
    /// Bytes enqueued.
    pub bytes: u64,
    /// Indirect hits.
    pub way_hits: u64,
    /// Misses.
    pub way_misses: u64,
    /// Collisions.
    pub way_collisions: u64,
    /// Drops (AQM + overflow).
    pub dropped: u64,
    /// Overflow drops.
    pub drop_overlimit: u64,
    /// ECN marks.
    pub ecn_marks: u64,
    /// ACK filter drops.
    pub ack_drops: u64,
    /// Largest packet length seen.
    pub max_skblen: u32,
}

const _: () = assert!(
    std::mem::size_of::<Flow>() == 64,
    "a flow is one cache line"
);

/// The `SET_WAYS` tags of the set starting at index `outer` (a multiple of `SET_WAYS`).
#[inline(always)]
fn set_of(tags: &[u32; QUEUES], outer: usize) -> &[u32; SET_WAYS] {
    let start = outer % QUEUES;
    match tags[start..].first_chunk::<SET_WAYS>() {
        Some(set) => set,
        // `outer` is a multiple of SET_WAYS below QUEUES, which SET_WAYS divides: a whole set
        // follows it.
        None => unreachable!("a set starts at {start}"),
    }
}

/// The way of `set` holding tag `want`, the first visited from way `inner` on circularly
/// (as the kernel searches a set).
///
/// Within a set a tag other than 0 appears at most once: the flow and host tables write a tag
/// only into a way of a set that does not hold it (or over itself). So for such a tag the
/// first match from `inner` on is the only match, and the ways are compared in index order,
/// which takes fewer instructions than the circular walk; the zeros a table starts with may
/// repeat, so tag 0 is searched circularly. Debug builds check the uniqueness.
#[inline(always)]
fn find_way(set: &[u32; SET_WAYS], inner: usize, want: u32) -> Option<usize> {
    if want != 0 {
        debug_assert!(set.iter().filter(|&&t| t == want).count() <= 1, "{set:?}");
        set.iter().position(|&t| t == want)
    } else {
        (0..SET_WAYS)
            .map(|off| (inner + off) % SET_WAYS)
            .find(|&k| set[k] == want)
    }
}

/// Entries of [`QUANTUM_DIV`]: a power of two above [`QUEUES`], so that a host load indexes
/// it by its low bits.
const QUANTUM_DIVS: usize = 2048;
const _: () = assert!(QUANTUM_DIVS.is_power_of_two() && QUANTUM_DIVS > QUEUES);

/// The host-load quantum divisors: `65535 / min(i, QUEUES)`, and 65535 for 0, the divisor of a
/// load of 1 (the kernel's load is at least 1; [`Tin::host_load`] leaves it 0). A load is a
/// bulk count, which never exceeds [`QUEUES`] (`Tin::inc_host_bulk` clamps it there), and the
/// entries above `QUEUES` repeat `65535 / QUEUES`, so `QUANTUM_DIV[load % QUANTUM_DIVS]` is
/// `65535 / min(load, QUEUES)` for every load below `QUANTUM_DIVS` without a clamp or a bounds
/// check.
static QUANTUM_DIV: [u16; QUANTUM_DIVS] = {
    let mut t = [0u16; QUANTUM_DIVS];
    t[0] = 65535;
    let mut i = 1;
    while i < QUANTUM_DIVS {
        t[i] = (65535 / if i < QUEUES { i } else { QUEUES }) as u16;
        i += 1;
    }
    t
};

#[inline]
fn dsrc(mode: FlowMode) -> bool {
    mode.dual_src()
}
#[inline]
fn ddst(mode: FlowMode) -> bool {
    mode.dual_dst()
}

impl Tin {
    /// A tin with no flows.
    pub fn new(params: TinParams) -> Self {
        Tin {
            flows: table(Flow::default()),
            tags: table(0),
            hosts: Box::default(),
            flow_drops: table(0),
            busy: [0; SETS],
            nd: NewDecaying::default(),
            old: List::default(),
            params,
            time_next: Instant::ZERO,
            deficit: 0,
            backlog: 0,
            sparse_flow_count: 0,
            bulk_flow_count: 0,
            decaying_flow_count: 0,
            unresponsive_flow_count: 0,
            avge_delay: 0,
            peak_delay: 0,
            base_delay: 0,
            packets: 0,
            bytes: 0,
            way_hits: 0,
            way_misses: 0,
            way_collisions: 0,
            dropped: 0,
            drop_overlimit: 0,
            ecn_marks: 0,
            ack_drops: 0,
            max_skblen: 0,
        }
    }

    /// Flows eligible for scheduling (sparse + bulk).
    #[inline]
    pub fn active_flows(&self) -> u32 {
        self.sparse_flow_count + self.bulk_flow_count
    }

    /// Puts flow `i` in DRR++ state `set`. Every change of a flow's state to or from
    /// [`FlowSet::None`] must go through here (it keeps the lookup's busy-way masks); other
    /// changes may write [`Flow::set`] directly.
    #[inline]
    pub fn set_flow_set(&mut self, i: u16, set: FlowSet) {
        let (s, bit) = (qi(i) / SET_WAYS, 1u8 << (qi(i) % SET_WAYS));
        if set == FlowSet::None {
            self.busy[s] &= !bit;
        } else {
            self.busy[s] |= bit;
        }
        self.flows[qi(i)].set = set;
    }

    /// Debug builds: checks that the busy-way mask of the set starting at queue `outer` matches
    /// its flows' states.
    #[inline]
    fn debug_check_busy(&self, outer: usize) {
        if cfg!(debug_assertions) {
            let mask = (0..SET_WAYS).fold(0u8, |m, k| {
                m | (u8::from(self.flows[(outer + k) % QUEUES].set != FlowSet::None) << k)
            });
            debug_assert_eq!(self.busy[outer / SET_WAYS % SETS], mask, "set {outer}");
        }
    }

    fn list_mut(&mut self, id: ListId) -> Option<&mut List> {
        match id {
            ListId::None => None,
            ListId::New => Some(&mut self.nd.new),
            ListId::Old => Some(&mut self.old),
            ListId::Decaying => Some(&mut self.nd.decaying),
        }
    }

    /// Removes flow `i` from whatever list it is on.
    pub fn unlink(&mut self, i: u16) {
        let Flow {
            list, prev, next, ..
        } = self.flows[qi(i)];
        if list == ListId::None {
            return;
        }
        let head = if next == i {
            // The only flow on its list.
            NIL16
        } else {
            self.flows[qi(prev)].next = next;
            self.flows[qi(next)].prev = prev;
            next
        };
        if let Some(l) = self.list_mut(list) {
            if l.head == i {
                l.head = head;
            }
        }
        let f = &mut self.flows[qi(i)];
        f.list = ListId::None;
        f.prev = NIL16;
        f.next = NIL16;
    }

    /// Moves flow `i` to the tail of list `to`.
    pub fn move_tail(&mut self, i: u16, to: ListId) {
        self.unlink(i);
        let Some(l) = self.list_mut(to) else { return };
        let head = l.head;
        let (prev, next) = if head == NIL16 {
            l.head = i;
            (i, i)
        } else {
            // Behind the tail, that is just before the head.
            let tail = self.flows[qi(head)].prev;
            self.flows[qi(tail)].next = i;
            self.flows[qi(head)].prev = i;
            (tail, head)
        };
        let f = &mut self.flows[qi(i)];
        f.list = to;
        f.prev = prev;
        f.next = next;
    }

    /// The flow after `i` on its list, wrapping from the tail to the head (so a list is walked
    /// in the circular order in which DRR++ visits it when every visited flow moves to the
    /// tail); `i` itself when it is on no list.
    #[cfg(test)]
    pub fn next_circular(&self, i: u16) -> u16 {
        let f = &self.flows[qi(i)];
        if f.list == ListId::None {
            i
        } else {
            f.next
        }
    }

    /// Makes `i` (a flow on the old list) the old list's head by rotating the list: the flows
    /// before it move, in order, behind the tail. The same order as moving each of them to the
    /// tail one after the other; the list being circular, the head just moves.
    #[inline]
    pub fn rotate_old_to(&mut self, i: u16) {
        debug_assert_eq!(self.flows[qi(i)].list, ListId::Old);
        self.old.head = i;
    }

    /// True when the new and the decaying lists are both empty (then a dequeue serves the
    /// old list's head, if any).
    #[inline(always)]
    pub fn only_old(&self) -> bool {
        // Both heads NIL16 (all ones) exactly when the word they make is all ones: one
        // 32-bit load and compare (the compiler joins the two adjacent loads).
        (u32::from(self.nd.new.head) | u32::from(self.nd.decaying.head) << 16) == u32::MAX
    }

    /// The head of list `id`, if any.
    #[inline]
    pub fn list_head(&self, id: ListId) -> Option<u16> {
        let h = match id {
            ListId::None => NIL16,
            ListId::New => self.nd.new.head,
            ListId::Old => self.old.head,
            ListId::Decaying => self.nd.decaying.head,
        };
        (h != NIL16).then_some(h)
    }

    /// Raises the bulk counts of flow `i`'s hosts (dual modes only), clamped at 1024.
    pub fn inc_host_bulk(&mut self, i: u16, mode: FlowMode) {
        let f = self.flows[qi(i)];
        if dsrc(mode) {
            let c = &mut self.hosts.src_bulk[qi(f.srchost)];
            if (*c as usize) < QUEUES {
                *c += 1;
            }
        }
        if ddst(mode) {
            let c = &mut self.hosts.dst_bulk[qi(f.dsthost)];
            if (*c as usize) < QUEUES {
                *c += 1;
            }
        }
    }

    /// Lowers the bulk counts of flow `i`'s hosts (dual modes only), floored at 0.
    #[inline(always)]
    pub fn dec_host_bulk(&mut self, i: u16, mode: FlowMode) {
        let f = self.flows[qi(i)];
        if dsrc(mode) {
            let c = &mut self.hosts.src_bulk[qi(f.srchost)];
            *c = c.saturating_sub(1);
        }
        if ddst(mode) {
            let c = &mut self.hosts.dst_bulk[qi(f.dsthost)];
            *c = c.saturating_sub(1);
        }
    }

    /// The host load of flow `i`: the larger bulk count of its hosts that the mode isolates,
    /// 0 when both are 0 (which [`QUANTUM_DIV`] treats as a load of 1: its entries 0 and 1
    /// are both 65535, so the refill needs no `max` with 1).
    ///
    /// Both counts are read whatever the mode: a tin is driven with one flow mode, and a count
    /// of a direction the mode does not isolate is always 0 (only [`Tin::inc_host_bulk`] raises
    /// a count, and only in the directions the mode isolates), so it cannot raise the maximum.
    /// This spares the refill its tests of the mode. Debug builds check the zeros.
    #[inline]
    pub fn host_load(&self, i: u16, mode: FlowMode) -> u16 {
        let f = &self.flows[qi(i)];
        let src = self.hosts.src_bulk[qi(f.srchost)];
        let dst = self.hosts.dst_bulk[qi(f.dsthost)];
        debug_assert!(
            dsrc(mode) || src == 0,
            "source bulk count {src} in {mode:?}"
        );
        debug_assert!(
            ddst(mode) || dst == 0,
            "destination bulk count {dst} in {mode:?}"
        );
        src.max(dst)
    }

    /// The quantum of one DRR++ refill of flow `i`: the tin's flow quantum scaled down by the
    /// flow's host load, plus a random dither of up to one byte (one draw of `rng`).
    #[inline(always)]
    pub fn quantum(&self, i: u16, mode: FlowMode, rng: &mut Rng) -> i32 {
        let load = usize::from(self.host_load(i, mode));
        let dither = u64::from(rng.next_u32() >> 16);
        let div = u64::from(QUANTUM_DIV[load % QUANTUM_DIVS]);
        ((u64::from(self.params.flow_quantum) * div + dither) >> 16) as i32
    }

    /// One DRR++ visit to flow `i`, out of deficit: a sparse flow with packets becomes bulk
    /// (one with none waits as sparse-wait), then the flow gets one more quantum
    /// ([`Tin::quantum`], from the host load after that step). The caller moves it (to the old
    /// list's tail, or along the rotation).
    #[inline(always)]
    pub fn refill(&mut self, i: u16, mode: FlowMode, rng: &mut Rng) {
        if self.flows[qi(i)].set == FlowSet::Sparse {
            self.sparse_visited(i, mode);
        }
        let q = self.quantum(i, mode, rng);
        self.flows[qi(i)].deficit += q;
    }

    /// [`Tin::refill`]'s step for a sparse flow: bulk when it has packets, else sparse-wait.
    /// Out of line: most visits are to bulk flows.
    #[inline(never)]
    fn sparse_visited(&mut self, i: u16, mode: FlowMode) {
        let f = &mut self.flows[qi(i)];
        if f.head != NIL {
            f.set = FlowSet::Bulk;
            self.sparse_flow_count -= 1;
            self.bulk_flow_count += 1;
            self.inc_host_bulk(i, mode);
        } else {
            f.set = FlowSet::SparseWait;
        }
    }

    /// The DRR++ visits that start at `i`, the head of the old list, while the new list is
    /// empty and `i` has no deficit: each visit to a flow without deficit refills it
    /// ([`Tin::refill`]: the sparse-to-bulk step and one quantum with its random dither) and
    /// moves it to the tail, so the visits walk the old list in circular order until they reach
    /// a flow with a positive deficit. Here the flows are refilled in that same order and the
    /// moves are done at the end as one rotation of the list ([`Tin::rotate_old_to`]), which
    /// leaves every list, deficit, count and random draw exactly as the visits one by one would
    /// (with 1,000 bulk flows sharing a host, a packet costs dozens of visits).
    ///
    /// Returns the flow the walk stopped at, now the old list's head. `mode` gives the flow
    /// mode, read only for a sparse flow's step (most visits are to bulk flows).
    #[inline(always)]
    pub fn refill_old_list(&mut self, i: u16, mode: impl Fn() -> FlowMode, rng: &mut Rng) -> u16 {
        debug_assert_eq!(self.old.head, i, "the walk starts at the old list's head");
        let mut q = qi(i);
        loop {
            debug_assert_eq!(self.flows[q].list, ListId::Old);
            if self.flows[q].set == FlowSet::Sparse {
                self.sparse_visited(q as u16, mode());
            }
            // The rest of `Tin::refill`. The host load reads the mode only in its debug
            // checks (see `Tin::host_load`): release builds read it for sparse flows alone.
            let quantum = self.quantum(q as u16, mode(), rng);
            self.flows[q].deficit += quantum;
            // The list is circular: the tail's next is the head.
            q = qi(self.flows[q].next);
            if self.flows[q].deficit > 0 {
                let i = q as u16;
                self.rotate_old_to(i);
                return i;
            }
        }
    }

    /// Maps a packet to a flow queue with the 8-way set-associative lookup, allocating host
    /// slots for dual modes. `flow_hash` is the queue key (the 5-tuple hash, or the host hashes
    /// combined for host modes); `host_hashes` yields (source, destination) host hashes and is
    /// called only when host slots must be (re)allocated. Updates the way statistics.
    #[inline(always)]
    pub fn classify(
        &mut self,
        flow_hash: u32,
        host_hashes: impl FnOnce() -> (u32, u32),
        mode: FlowMode,
    ) -> u16 {
        if mode == FlowMode::Flowblind {
            return 0;
        }
        self.classify_hashed(flow_hash, host_hashes, mode)
    }

    /// [`Tin::classify`] for a flow mode other than [`FlowMode::Flowblind`] (which the caller
    /// has ruled out).
    #[inline(always)]
    pub fn classify_hashed(
        &mut self,
        flow_hash: u32,
        host_hashes: impl FnOnce() -> (u32, u32),
        mode: FlowMode,
    ) -> u16 {
        debug_assert!(mode != FlowMode::Flowblind);
        let reduced = flow_hash as usize % QUEUES;
        // The direct way: its flow's line is read anyway when the packet is queued.
        // (The kernel also counts these direct hits, but reports them nowhere; neither do we,
        // so they are not counted.)
        if self.tags[reduced] == flow_hash && self.flows[reduced].set != FlowSet::None {
            return reduced as u16;
        }
        let inner = reduced % SET_WAYS;
        let outer = reduced - inner;
        let busy = self.busy[reduced / SET_WAYS % SETS];
        self.debug_check_busy(outer);
        // The ways are visited from `inner` on, circularly: first for the tag, then for a free
        // queue; with neither, the collision takes way `inner`.
        let (k, allocate) = match find_way(set_of(&self.tags, outer), inner, flow_hash) {
            Some(k) => {
                if k != inner {
                    self.way_hits += 1;
                }
                (k, busy & (1 << k) == 0)
            }
            None => {
                // The free ways rotated so that bit 0 is way `inner`: the lowest set bit
                // is the first free way visited from `inner` on.
                let free = (!busy).rotate_right(inner as u32);
                if free != 0 {
                    self.way_misses += 1;
                    ((inner + free.trailing_zeros() as usize) % SET_WAYS, true)
                } else {
                    // No free way: accept the collision in the original slot.
                    self.way_collisions += 1;
                    if self.flows[(outer + inner) % QUEUES].set == FlowSet::Bulk {
                        self.dec_host_bulk((outer + inner) as u16, mode);
                    }
                    (inner, true)
                }
            }
        };
        let idx = (outer + k) % QUEUES;
        self.tags[idx] = flow_hash;
        if allocate && (dsrc(mode) || ddst(mode)) {
            self.allocate_hosts(idx, host_hashes, mode);
        }
        idx as u16
    }

    /// Gives queue `idx` (newly allocated) its host slots. Out of line: only a packet that
    /// starts a queue gets here, and the host hashes and set searches would otherwise crowd
    /// the per-packet lookup.
    #[inline(never)]
    fn allocate_hosts(
        &mut self,
        idx: usize,
        host_hashes: impl FnOnce() -> (u32, u32),
        mode: FlowMode,
    ) {
        let (src_host, dst_host) = host_hashes();
        if dsrc(mode) {
            self.flows[idx % QUEUES].srchost = self.host_slot(src_host, true);
        }
        if ddst(mode) {
            self.flows[idx % QUEUES].dsthost = self.host_slot(dst_host, false);
        }
    }

    /// The host slot for host hash `hash` in the source (`src`) or destination table, claiming
    /// one when the hash has none. Inlined into [`Tin::allocate_hosts`], its only caller (two
    /// calls per allocation, which at 10,000 flows is every packet).
    #[inline(always)]
    fn host_slot(&mut self, hash: u32, src: bool) -> u16 {
        let idx = hash as usize % QUEUES;
        let inner = idx % SET_WAYS;
        let outer = idx - inner;
        let h = &mut *self.hosts;
        let (tags, bulk) = if src {
            (&mut h.src_tag, &h.src_bulk)
        } else {
            (&mut h.dst_tag, &h.dst_bulk)
        };
        // The ways from `inner` on, circularly: the slot with this tag, else the first slot
        // without bulk flows, else way `inner`.
        if let Some(k) = find_way(set_of(tags, outer), inner, hash) {
            return (outer + k) as u16;
        }
        let counts = &bulk[outer..outer + SET_WAYS];
        let k = (0..SET_WAYS)
            .map(|off| (inner + off) % SET_WAYS)
            .find(|&k| counts[k] == 0)
            .unwrap_or(inner);
        tags[(outer + k) % QUEUES] = hash;
        (outer + k) as u16
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::CakeConfig;
    use crate::params::DerivedParams;

    /// The old list from its head, checking the links both ways.
    fn order(t: &Tin) -> Vec<u16> {
        let mut v = Vec::new();
        let head = t.old.head;
        let mut i = head;
        while i != NIL16 {
            v.push(i);
            assert!(v.len() <= QUEUES, "cycle");
            let next = t.flows[qi(i)].next;
            assert_eq!(t.flows[qi(next)].prev, i);
            i = if next == head { NIL16 } else { next };
        }
        v
    }

    #[test]
    fn rotating_the_old_list_equals_moving_each_flow_to_the_tail() {
        let params = DerivedParams::new(&CakeConfig::with_rate(1_000_000));
        for n in 1..6u16 {
            for k in 0..n {
                let mut a = Tin::new(params.tins[0]);
                for i in 0..n {
                    a.move_tail(10 + i, ListId::Old);
                }
                let mut b = a.clone();
                for _ in 0..k {
                    let h = b.old.head;
                    b.move_tail(h, ListId::Old);
                }
                a.rotate_old_to(10 + k);
                assert_eq!(order(&a), order(&b), "n {n} k {k}");
                assert_eq!(a.old.head, b.old.head);
                for i in 0..n {
                    let (fa, fb) = (&a.flows[qi(10 + i)], &b.flows[qi(10 + i)]);
                    assert_eq!((fa.prev, fa.next, fa.list), (fb.prev, fb.next, fb.list));
                }
                // Walking circularly from the head visits every flow once, then the head.
                let mut i = a.old.head;
                for _ in 0..n {
                    i = a.next_circular(i);
                }
                assert_eq!(i, a.old.head);
            }
        }
    }

    #[test]
    fn quantum_divisors_are_65535_over_the_clamped_load() {
        for load in 0..QUANTUM_DIVS {
            let want = if load == 0 {
                65535
            } else {
                (65535 / load.min(QUEUES)) as u16
            };
            assert_eq!(QUANTUM_DIV[load % QUANTUM_DIVS], want, "load {load}");
        }
    }
}
