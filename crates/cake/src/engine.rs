//! The CAKE engine: classification, enqueue with overflow handling and the ACK filter, the
//! shaper, DRR++ dequeue through COBALT, autorate-ingress, and statistics.
//!
//! # DoS notes
//! Every call does bounded work: enqueue hashes one packet, probes at most 16 ways, runs the ACK
//! filter over one flow's queue (when enabled) and drops at most as many packets as needed to get
//! back under the memory limit (each `O(log 8192)`); dequeue visits each flow at most a few times.

use crate::ack_filter;
use crate::cobalt::Verdict;
use crate::config::{AckFilterMode, CakeConfig, DiffservMode, FlowMode};
use crate::diffserv::{dscp_table, tin_order};
use crate::hash::FlowHasher;
use crate::overflow::{FlatId, OverflowHeap};
use crate::overhead::{ewma, Overhead, SizeStats};
use crate::params::{DerivedParams, RateFixed, MAX_TINS};
use crate::slab::Slab;
use crate::stats::{CakeStats, FlowStats, TinStats};
use crate::tin::{qi, Flow, FlowSet, ListId, Tin, NIL, QUEUES};
use qdisc::packet::{self, FlowHeaders, FlowTuple, FlowV4, Headers, NetKind, Packet};
use qdisc::{
    Counter, Dequeue, DropReason, Dropped, Duration, Instant, NoShaper, Qdisc, QdiscStats, Rate,
    Rng,
};

/// The tins: a fixed table of [`MAX_TINS`] of which the first `len` are in use. Indexing masks
/// the index to the table size, so the per-packet `tins[tin]` accesses need no bounds check;
/// callers only ever index with `tin < len` (the classifier and the scheduler hand out no
/// other), so the mask never changes an index.
#[derive(Debug)]
struct Tins {
    /// Inline, not boxed: one pointer less to follow on every per-packet tin access.
    t: [Tin; MAX_TINS],
    len: usize,
}

impl Tins {
    fn new(params: &DerivedParams) -> Self {
        let all: Vec<Tin> = params.tins.iter().map(|p| Tin::new(*p)).collect();
        let t = match all.try_into() {
            Ok(t) => t,
            // `params.tins` has exactly MAX_TINS entries, so the conversion cannot fail.
            Err(_) => unreachable!("params.tins has MAX_TINS entries"),
        };
        Tins {
            t,
            len: params.tin_count.min(MAX_TINS),
        }
    }

    #[inline]
    fn len(&self) -> usize {
        self.len
    }

    #[inline]
    fn get(&self, i: usize) -> Option<&Tin> {
        self.t[..self.len].get(i)
    }

    #[inline]
    fn iter(&self) -> std::slice::Iter<'_, Tin> {
        self.as_slice().iter()
    }

    /// The tins in use, in kernel index order.
    #[inline]
    fn as_slice(&self) -> &[Tin] {
        &self.t[..self.len]
    }

    #[inline]
    fn iter_mut(&mut self) -> std::slice::IterMut<'_, Tin> {
        self.t[..self.len].iter_mut()
    }
}

impl std::ops::Index<usize> for Tins {
    type Output = Tin;
    #[inline(always)]
    fn index(&self, i: usize) -> &Tin {
        &self.t[i % MAX_TINS]
    }
}

impl std::ops::IndexMut<usize> for Tins {
    #[inline(always)]
    fn index_mut(&mut self, i: usize) -> &mut Tin {
        &mut self.t[i % MAX_TINS]
    }
}

/// The tin classifier's tables, fixed by the configuration (the tin count depends only on the
/// diffserv mode, which never changes): built once, so that a packet's tin is one table read.
#[derive(Clone, Copy, Debug)]
struct TinMap {
    /// The kernel tin of each DSCP, already 0 where the table names a tin the mode lacks.
    of_dscp: [u8; 64],
    /// `order[user_index] = kernel index` for the fwmark and priority overrides.
    order: [u8; MAX_TINS],
    /// Tins in use.
    count: usize,
    /// The tin comes from the priority override or the DSCP alone: no washing, no fwmark
    /// mask, not besteffort (the default configurations).
    dscp_only: bool,
}

impl TinMap {
    /// The kernel tin of DSCP `dscp` (its low six bits).
    #[inline(always)]
    fn of_dscp(&self, dscp: u8) -> usize {
        self.of_dscp[dscp as usize & 63] as usize
    }

    fn new(cfg: &CakeConfig) -> Self {
        let mode = cfg.diffserv;
        let count = mode.tin_count();
        let mut of_dscp = *dscp_table(mode);
        for t in &mut of_dscp {
            if usize::from(*t) >= count {
                *t = 0;
            }
        }
        TinMap {
            of_dscp,
            order: *tin_order(mode),
            count,
            dscp_only: !cfg.wash && cfg.fwmark_mask == 0 && mode != DiffservMode::Besteffort,
        }
    }
}

/// Autorate-ingress state.
#[derive(Clone, Copy, Debug, Default)]
struct Autorate {
    avg_packet_interval: u64,
    avg_window_begin: Instant,
    avg_window_bytes: u64,
    avg_peak_bandwidth: u64,
    last_packet_time: Instant,
}

/// A CAKE instance. Create with [`Cake::new`], drive with the [`Qdisc`] methods.
#[derive(Debug)]
pub struct Cake {
    cfg: CakeConfig,
    params: DerivedParams,
    overhead: Overhead,
    tins: Tins,
    slab: Slab,
    heap: OverflowHeap,
    hasher: FlowHasher,
    rng: Rng,
    tin_map: TinMap,
    /// Enqueue takes an IPv4 frame that [`FlowV4::parse`] reads by its fast path: the tin
    /// comes from the DSCP or priority alone (`TinMap::dscp_only`), `nat` is off and the flow
    /// mode hashes flows. Fixed by the configuration, which never changes.
    v4_fast: bool,
    /// `v4_fast`, and the rest of the configuration is the plain one: the identity overhead
    /// (no `overhead`, `mpu` or `atm`; [`Overhead::is_identity`]), no ACK filter and no
    /// autorate-ingress. Enqueue's IPv4 way then continues with its own copy of the rest
    /// (`enqueue_classified::<true>`), which does not test those three settings. Fixed by the
    /// configuration, which never changes.
    v4_plain: bool,
    time_next: Instant,
    failsafe_next: Instant,
    rate_bps: u64,
    buffer_used: u64,
    buffer_max_used: u64,
    /// `min(buffer_max_used, params.buffer_limit)`: an enqueue that leaves `buffer_used` at
    /// or below it neither raises the high-water mark nor exceeds the limit, so it tests only
    /// this (`Cake::buffer_grown` does the rest). Kept where either bound changes.
    buffer_watch: u64,
    qlen: u32,
    /// The tin served last (below `MAX_TINS`).
    cur_tin: u8,
    /// The tins with flows to schedule: bit `i` is set exactly when tin `i` has sparse or bulk
    /// flows ([`Tin::active_flows`] above 0). Set when a flow joins the new list, cleared when
    /// the last one retires; the shaped tin choice visits only these tins.
    active_tins: u8,
    sizes: SizeStats,
    autorate: Autorate,
    /// The qdisc counters, except `enqueued` and `backlog`: those are derived on read
    /// ([`Qdisc::stats`]) from the tins' packet and byte counts, the tins' backlogs and `qlen`,
    /// which every enqueue and dequeue updates anyway.
    stats: QdiscStats,
    seg_buf: Vec<Packet>,
}

impl Cake {
    /// A CAKE instance with configuration `cfg`; all randomness (hash key, quantum dither, BLUE)
    /// is drawn from a generator seeded with `seed`.
    pub fn new(cfg: CakeConfig, seed: u64) -> Self {
        let params = DerivedParams::new(&cfg);
        let mut rng = Rng::new(seed);
        let hasher = FlowHasher::new(&mut rng);
        let tins = Tins::new(&params);
        let tin_map = TinMap::new(&cfg);
        let v4_fast = tin_map.dscp_only && !cfg.nat && cfg.flow_mode.uses_flows();
        let overhead = Overhead::from_config(&cfg);
        let v4_plain = v4_fast
            && overhead.is_identity()
            && cfg.ack_filter == AckFilterMode::None
            && !cfg.autorate;
        let autorate = Autorate {
            avg_peak_bandwidth: cfg.rate_bps,
            ..Autorate::default()
        };
        Cake {
            overhead,
            rate_bps: cfg.rate_bps,
            cfg,
            params,
            tins,
            slab: Slab::new(),
            heap: OverflowHeap::default(),
            hasher,
            rng,
            tin_map,
            v4_fast,
            v4_plain,
            time_next: Instant::ZERO,
            failsafe_next: Instant::ZERO,
            buffer_used: 0,
            buffer_max_used: 0,
            buffer_watch: 0,
            qlen: 0,
            cur_tin: 0,
            active_tins: 0,
            sizes: SizeStats::default(),
            autorate,
            stats: QdiscStats::default(),
            seg_buf: Vec::new(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &CakeConfig {
        &self.cfg
    }

    /// The derived parameters now in force (they change with the rate).
    pub fn params(&self) -> &DerivedParams {
        &self.params
    }

    /// The shaped rate now in force, bytes/s (0 = unlimited).
    pub fn rate(&self) -> u64 {
        self.rate_bps
    }

    /// Re-derives the per-tin parameters for `rate_bps`, keeping every queued packet and all
    /// flow state (the kernel's `cake_reconfigure`).
    fn reconfigure(&mut self, rate_bps: u64) {
        self.rate_bps = rate_bps;
        self.params = DerivedParams::with_rate(&self.cfg, rate_bps);
        self.buffer_watch = self
            .buffer_max_used
            .min(u64::from(self.params.buffer_limit));
        for (tin, p) in self.tins.iter_mut().zip(self.params.tins.iter()) {
            tin.params = *p;
        }
    }

    /// Shapes at `rate_bps` (bytes/s, 0 = unlimited) from now on, changing nothing else: the
    /// global rate and each tin's threshold become those derived for `rate_bps`, while COBALT's
    /// targets and intervals, the quanta and the memory limit stay those of the rate set last
    /// ([`rate`](Self::rate)). A cake_mq shard runs at its share of the configured rate this way
    /// ([`crate::mq`]), as Linux's cake_mq changes only the rate at each sync. Costs one
    /// derivation when the rate differs from the one in force, nothing otherwise; queued packets
    /// and flow state are kept, and packets already scheduled keep their release times.
    pub(crate) fn set_shaper_rate(&mut self, rate_bps: u64) {
        if self.params.rate.bytes_per_sec == rate_bps {
            return;
        }
        let d = DerivedParams::with_rate(&self.cfg, rate_bps);
        self.params.rate = d.rate;
        for (i, (tin, p)) in self.tins.iter_mut().zip(d.tins.iter()).enumerate() {
            tin.params.rate = p.rate;
            self.params.tins[i].rate = p.rate;
        }
    }

    /// The rate the shaper runs at now, bytes/s (0 = unlimited): [`rate`](Self::rate), except
    /// in a cake_mq shard, which runs at its share of it ([`crate::mq`]).
    pub fn shaper_rate(&self) -> u64 {
        self.params.rate.bytes_per_sec
    }

    #[inline]
    fn global_rate(&self) -> &RateFixed {
        &self.params.rate
    }

    /// The kernel tin of a packet: the fwmark, then the priority override, then its DSCP.
    #[inline(always)]
    fn select_tin(&self, pkt: &mut Packet, h: &FlowHeaders) -> usize {
        let map = &self.tin_map;
        if !map.dscp_only {
            return self.select_tin_general(pkt, h);
        }
        let dscp = Self::diffserv(pkt, h, false);
        self.select_tin_dscp(pkt, dscp)
    }

    /// [`Cake::select_tin`] when the tin comes from the priority override or the DSCP alone
    /// (`TinMap::dscp_only`): no washing, no fwmark mask, several tins. `dscp` is the packet's
    /// DSCP as `diffserv` reads it.
    #[inline(always)]
    fn select_tin_dscp(&self, pkt: &Packet, dscp: u8) -> usize {
        let prio = pkt.meta.priority;
        if prio & 0xFFFF != 0 {
            // A priority with a minor number may name a tin: out of line, as most packets
            // carry none.
            return self.select_tin_prio(prio, dscp);
        }
        self.tin_map.of_dscp(dscp)
    }

    /// [`Cake::select_tin_dscp`] for a packet whose priority has a minor number: the tin it
    /// names when its major number is this qdisc's handle and the minor a tin, else the DSCP's.
    #[inline(never)]
    fn select_tin_prio(&self, prio: u32, dscp: u8) -> usize {
        let map = &self.tin_map;
        let minor = (prio & 0xFFFF) as usize;
        if (prio >> 16) as u16 == self.cfg.handle_major && minor > 0 && minor <= map.count {
            return map.order[(minor - 1) % MAX_TINS] as usize;
        }
        map.of_dscp(dscp)
    }

    /// [`Cake::select_tin`] with any configuration (washing, besteffort, a fwmark mask). Out
    /// of line.
    #[inline(never)]
    fn select_tin_general(&self, pkt: &mut Packet, h: &FlowHeaders) -> usize {
        let cfg = &self.cfg;
        let map = &self.tin_map;
        let mut dscp = None;
        if cfg.wash {
            dscp = Some(Self::diffserv(pkt, h, true));
        }
        if cfg.diffserv == DiffservMode::Besteffort {
            return 0;
        }
        let mark = if cfg.fwmark_mask != 0 {
            (pkt.meta.mark & cfg.fwmark_mask) >> cfg.fwmark_mask.trailing_zeros()
        } else {
            0
        };
        if mark != 0 && mark as usize <= map.count {
            return map.order[(mark as usize - 1) % MAX_TINS] as usize;
        }
        let prio = pkt.meta.priority;
        let minor = (prio & 0xFFFF) as usize;
        if (prio >> 16) as u16 == cfg.handle_major && minor > 0 && minor <= map.count {
            return map.order[(minor - 1) % MAX_TINS] as usize;
        }
        let dscp = dscp.unwrap_or_else(|| Self::diffserv(pkt, h, false));
        map.of_dscp(dscp)
    }

    /// Reads the DSCP (ARP counts as 56, other non-IP as 0), clearing it when washing.
    #[inline]
    fn diffserv(pkt: &mut Packet, h: &FlowHeaders, wash: bool) -> u8 {
        match h.kind {
            NetKind::Ipv4 | NetKind::Ipv6 => match &h.ip {
                Some(ip) => {
                    if wash && ip.dscp != 0 {
                        Self::wash(pkt);
                    }
                    ip.dscp
                }
                None => 0,
            },
            NetKind::Arp => 56,
            _ => 0,
        }
    }

    /// Clears the DSCP of an IP packet (`wash`); parses the full headers for the rewrite.
    #[cold]
    fn wash(pkt: &mut Packet) {
        let h = Headers::parse(&pkt.data);
        packet::set_dscp(&mut pkt.data, &h, 0);
    }

    /// Picks the flow queue for a packet in `tin` from the tuple CAKE hashes: the caller's
    /// pre-NAT tuple with `nat`, else the parsed one (`None` for non-IP).
    #[inline(always)]
    fn classify_packet(&mut self, tin: usize, pkt: &Packet, h: &FlowHeaders) -> u16 {
        if self.cfg.nat && pkt.meta.nat.is_some() {
            return self.classify_nat(tin, pkt);
        }
        self.classify(tin, h.ip.as_ref().map(|ip| &ip.tuple))
    }

    /// [`Cake::classify_packet`] with the caller's pre-NAT tuple: out of line, so that the
    /// common path reads its tuple from the parsed headers without choosing between the two.
    #[inline(never)]
    fn classify_nat(&mut self, tin: usize, pkt: &Packet) -> u16 {
        self.classify(tin, pkt.meta.nat.as_ref())
    }

    /// [`Cake::classify_packet`] for a frame read by [`FlowV4::parse`]: its tuple hashed from
    /// the IPv4 addresses as they are (the same hashes as the mapped tuple's). Only with the
    /// `v4_fast` settings: no `nat`, and a flow mode that hashes flows.
    #[inline(always)]
    fn classify_v4(&mut self, tin: usize, v: &FlowV4) -> u16 {
        let mode = self.cfg.flow_mode;
        debug_assert!(self.v4_fast && !self.cfg.nat && mode.uses_flows());
        let hasher = &self.hasher;
        let key = hasher.flow_hash_v4(v);
        self.tins[tin].classify_hashed(key, || hasher.host_hashes_v4(v), mode)
    }

    /// Picks the flow queue for a packet in `tin`.
    #[inline(always)]
    fn classify(&mut self, tin: usize, tuple: Option<&FlowTuple>) -> u16 {
        self.classify_with(
            tin,
            |hasher| tuple.map_or_else(|| hasher.non_ip_flow_hash(), |t| hasher.flow_hash(t)),
            |hasher| tuple.map_or((0, 0), |t| hasher.host_hashes(t)),
        )
    }

    /// Picks the flow queue for a packet in `tin` whose flow hash is `flow_hash` and host
    /// hashes `host_hashes` (each computed only when the flow mode needs it).
    #[inline(always)]
    fn classify_with(
        &mut self,
        tin: usize,
        flow_hash: impl FnOnce(&FlowHasher) -> u32,
        host_hashes: impl Fn(&FlowHasher) -> (u32, u32),
    ) -> u16 {
        let mode = self.cfg.flow_mode;
        if mode == FlowMode::Flowblind {
            return 0;
        }
        let hasher = &self.hasher;
        let host_hashes = || host_hashes(hasher);
        let key = if mode.uses_flows() {
            flow_hash(hasher)
        } else {
            let (src, dst) = host_hashes();
            let mut key = 0;
            if mode.uses_src_host() {
                key ^= src;
            }
            if mode.uses_dst_host() {
                key ^= dst;
            }
            key
        };
        self.tins[tin].classify(key, host_hashes, mode)
    }

    /// Charges `adj_len` to the tin and global shaper clocks (nothing at an unlimited rate).
    #[inline]
    fn advance_shaper(&mut self, tin: usize, adj_len: u32, now: Instant, drop: bool) {
        if self.global_rate().is_unlimited() {
            return;
        }
        self.charge_shaper(tin, adj_len, now, drop);
    }

    /// [`Cake::advance_shaper`] for a caller that has found the rate limited.
    #[inline(always)]
    fn charge_shaper(&mut self, tin: usize, adj_len: u32, now: Instant, drop: bool) {
        debug_assert!(!self.global_rate().is_unlimited());
        let t = &mut self.tins[tin];
        let tin_dur = Duration::from_nanos(t.params.rate.tx_time(adj_len));
        let global = self.params.rate.tx_time(adj_len);
        if t.time_next < now {
            t.time_next += tin_dur;
        } else if t.time_next < now + tin_dur {
            t.time_next = now + tin_dur;
        }
        self.time_next += Duration::from_nanos(global);
        if !drop {
            self.failsafe_next += Duration::from_nanos(global + (global >> 1));
        }
    }

    fn flat(tin: usize, flow: u16) -> FlatId {
        (tin * QUEUES + flow as usize) as FlatId
    }

    /// The overflow heap's step for a packet that joined flow `flow` of tin `tin`: while the
    /// heap is kept (`heap.timeout` not 0, for 65,535 dequeues after an overflow drop), the
    /// flow's entry sifted up after its backlog grew; nothing otherwise.
    #[inline]
    fn heap_up(&mut self, tin: usize, flow: u16) {
        if self.heap.timeout != 0 {
            // The kept heap marked cold: without the hint the compiler computed the backlog
            // closure's tins address (`&self.tins`) on every enqueue and kept it on the stack.
            std::hint::cold_path();
            let tins = &self.tins;
            let backlog = |id: FlatId| flat_backlog(tins, id);
            self.heap.heapify_up_flow(Self::flat(tin, flow), &backlog);
        }
    }

    #[inline]
    fn heap_down(&mut self, tin: usize, flow: u16) {
        if self.heap.timeout != 0 {
            self.heapify_flow(tin, flow);
        }
    }

    /// [`Self::heap_down`]'s step while the heap is kept (for 65,535 dequeues after an
    /// overflow drop, see `drop_fattest`). Out of line and cold: inline, dequeue's loop set up
    /// and spilled the heap's and the tins' addresses for it on every call.
    #[cold]
    #[inline(never)]
    fn heapify_flow(&mut self, tin: usize, flow: u16) {
        let tins = &self.tins;
        let backlog = |id: FlatId| flat_backlog(tins, id);
        self.heap.heapify_flow(Self::flat(tin, flow), &backlog);
    }

    /// The heap's step for a packet that leaves flow `flow` of tin `tin` (dequeue calls it
    /// only while the heap is kept, `heap.timeout` not 0): the flow's entry sifted down after
    /// the unlink shrank its backlog, and one dequeue less before the heap goes stale (the
    /// kernel counts the timeout down once per packet dequeued). Out of line and cold, for
    /// the reasons of [`Self::heapify_flow`].
    #[cold]
    #[inline(never)]
    fn heap_dequeued(&mut self, tin: usize, flow: u16) {
        self.heapify_flow(tin, flow);
        self.heap.timeout -= 1;
    }

    /// Appends a packet to a flow's queue; returns the flow's DRR++ state (unchanged).
    #[inline(always)]
    fn queue_push(
        &mut self,
        tin: usize,
        flow: u16,
        pkt: Packet,
        now: Instant,
        adj_len: u32,
    ) -> FlowSet {
        let len = pkt.len();
        let (i, mem) = self.slab.insert(pkt, len, now, adj_len);
        let f = &mut self.tins[tin].flows[qi(flow)];
        // `tail` is stale while the queue is empty (see `Flow::tail`): `head` decides.
        if f.head == NIL {
            f.head = i;
        } else {
            let tail = f.tail;
            self.slab.get_mut(tail).next = i;
        }
        f.tail = i;
        f.backlog += len;
        let set = f.set;
        self.tins[tin].backlog += u64::from(len);
        self.buffer_used += u64::from(mem);
        self.qlen += 1;
        set
    }

    /// Removes the head packet of a flow queue, updating backlogs.
    #[inline]
    fn queue_pop(&mut self, tin: usize, flow: u16) -> Option<crate::slab::Slot> {
        let t = &mut self.tins[tin];
        let (i, ..) = unlink_head(
            &mut t.flows[qi(flow)],
            &mut t.backlog,
            &self.slab,
            &mut self.buffer_used,
            &mut self.qlen,
        )?;
        Some(self.slab.remove(i))
    }

    /// The counts a packet of `len` bytes (charged `mem`) leaving tin `tin` takes beyond its
    /// flow's backlog, which the caller has taken off already: the tin's backlog, the memory
    /// used and the packet count. The ACK filter's removal calls it; the head's (`unlink_head`)
    /// takes the same counts off with the same [`unaccount`].
    #[inline(always)]
    fn unaccount_beyond_flow(&mut self, tin: usize, len: u32, mem: u32) {
        unaccount(
            &mut self.tins[tin].backlog,
            &mut self.buffer_used,
            &mut self.qlen,
            len,
            mem,
        );
    }

    /// Removes the packet at `pos` (0 = head) of a flow's queue (used by the ACK filter).
    fn queue_remove_at(&mut self, tin: usize, flow: u16, pos: usize) -> Option<crate::slab::Slot> {
        if pos == 0 {
            return self.queue_pop(tin, flow);
        }
        let mut prev = self.tins[tin].flows[qi(flow)].head;
        for _ in 1..pos {
            if prev == NIL {
                return None;
            }
            prev = self.slab.get(prev).next;
        }
        if prev == NIL {
            return None;
        }
        let i = self.slab.get(prev).next;
        if i == NIL {
            return None;
        }
        let slot = self.slab.remove(i);
        self.slab.get_mut(prev).next = slot.next;
        let f = &mut self.tins[tin].flows[qi(flow)];
        if f.tail == i {
            f.tail = prev;
        }
        f.backlog -= slot.pkt.len();
        self.unaccount_beyond_flow(tin, slot.pkt.len(), slot.mem);
        Some(slot)
    }

    fn run_ack_filter(&mut self, tin: usize, flow: u16) -> Option<usize> {
        let f = &self.tins[tin].flows[qi(flow)];
        // Fewer than two packets queued: nothing for the filter to compare.
        if f.head == NIL || self.slab.get(f.head).next == NIL {
            return None;
        }
        let slab = &self.slab;
        let trigger = &slab.get(f.tail).pkt.data;
        let mut cur = f.head;
        let tail = f.tail;
        let queue = std::iter::from_fn(move || {
            if cur == NIL || cur == tail {
                return None;
            }
            let s = slab.get(cur);
            cur = s.next;
            Some(s.pkt.data.as_slice())
        });
        ack_filter::filter(self.cfg.ack_filter, trigger, queue)
    }

    /// Counts a dropped packet under `reason` and hands it back to the caller.
    #[inline]
    fn hand_back(&mut self, packet: Packet, reason: DropReason, drops: &mut Vec<Dropped>) {
        self.stats.drop_counter(reason).add(packet.len());
        drops.push(Dropped { packet, reason });
    }

    /// Drops the head of the fattest queue to relieve memory pressure; returns its flat id.
    fn drop_fattest(&mut self, now: Instant, drops: &mut Vec<Dropped>) -> FlatId {
        if self.heap.timeout == 0 {
            let tins = &self.tins;
            let backlog = |id: FlatId| flat_backlog(tins, id);
            self.heap.rebuild(&backlog);
        }
        self.heap.timeout = 65535;
        let mut id = self.heap.top();
        let (mut tin, mut flow) = (id as usize / QUEUES, (id as usize % QUEUES) as u16);
        let popped = if tin < self.tins.len() {
            self.queue_pop(tin, flow)
        } else {
            None
        };
        let slot = match popped {
            Some(slot) => slot,
            None => {
                // The top flow holds no packet: the heap went stale (rebuild it next time), or
                // every queued packet is zero bytes long, so byte backlogs cannot tell flows
                // apart. Drop from the first flow that holds a packet, so that the caller's
                // loop always makes progress.
                self.heap.timeout = 0;
                let Some((t, f)) = self.first_nonempty_flow() else {
                    return id;
                };
                (tin, flow, id) = (t, f, Self::flat(t, f));
                match self.queue_pop(tin, flow) {
                    Some(slot) => slot,
                    None => return id,
                }
            }
        };
        let t = &mut self.tins[tin];
        if t.flows[qi(flow)].cvars.queue_full(&t.params.cobalt, now) {
            t.unresponsive_flow_count += 1;
        }
        t.flow_drops[qi(flow)] += 1;
        t.dropped += 1;
        if self.cfg.ingress {
            self.advance_shaper(tin, slot.adj_len, now, true);
        }
        self.hand_back(slot.pkt, DropReason::Overflow, drops);
        let tins = &self.tins;
        let backlog = |id: FlatId| flat_backlog(tins, id);
        self.heap.heapify(0, &backlog);
        id
    }

    /// The first (tin, flow) holding a packet, scanning every flow: only for the degenerate
    /// cases of [`Cake::drop_fattest`].
    fn first_nonempty_flow(&self) -> Option<(usize, u16)> {
        self.tins.iter().enumerate().find_map(|(i, t)| {
            t.flows
                .iter()
                .position(|f| f.head != NIL)
                .map(|f| (i, f as u16))
        })
    }

    #[inline]
    fn update_autorate(&mut self, now: Instant, bytes: u64) {
        if !self.cfg.autorate {
            // The window and the packet clock are read only by autorate-ingress, and the
            // configuration never changes: nothing to keep.
            return;
        }
        self.autorate_sample(now, bytes);
    }

    /// One packet's autorate-ingress step: the packet clock and the rate window, and a new
    /// shaped rate at a gap. Out of line (only with `autorate-ingress`).
    #[inline(never)]
    fn autorate_sample(&mut self, now: Instant, bytes: u64) {
        let a = &mut self.autorate;
        a.avg_window_bytes += bytes;
        let interval = (now - a.last_packet_time).as_nanos().min(1_000_000_000);
        let k = if interval > a.avg_packet_interval {
            2
        } else {
            8
        };
        a.avg_packet_interval = ewma64(a.avg_packet_interval, interval, k);
        a.last_packet_time = now;
        if interval > a.avg_packet_interval {
            let window = (now - a.avg_window_begin).as_nanos().max(1);
            let b = (u128::from(a.avg_window_bytes) * 1_000_000_000 / u128::from(window)) as u64;
            let k = if b > a.avg_peak_bandwidth { 2 } else { 8 };
            a.avg_peak_bandwidth = ewma64(a.avg_peak_bandwidth, b, k);
            a.avg_window_bytes = 0;
            a.avg_window_begin = now;
            // The kernel's 250 ms hold-off compares against a reconfiguration time it never
            // records, so it never holds off: reconfigure on every gap.
            let rate = (a.avg_peak_bandwidth * 15) >> 4;
            self.reconfigure(rate);
        }
    }

    /// Splits a GSO super-packet and queues its segments (`split-gso`); returns the bytes
    /// queued. Out of line: most packets are not GSO, and keeping the loop apart keeps the
    /// common enqueue path's registers free.
    #[inline(never)]
    fn enqueue_segments(
        &mut self,
        tin: usize,
        flow: u16,
        pkt: Packet,
        now: Instant,
        net_off: u32,
        bufs: &mut dyn packet::Buffers,
    ) -> u64 {
        let mut added_bytes = 0u64;
        let mut segs = std::mem::take(&mut self.seg_buf);
        packet::segment_with(pkt, &mut segs, bufs);
        for seg in segs.drain(..) {
            let slen = seg.len();
            let adj = self
                .overhead
                .packet_len(&mut self.sizes, slen, net_off, None);
            self.queue_push(tin, flow, seg, now, adj);
            let t = &mut self.tins[tin];
            t.packets += 1;
            t.bytes += u64::from(slen);
            added_bytes += u64::from(slen);
        }
        self.seg_buf = segs;
        added_bytes
    }

    /// Queues `pkt` (adjusted length `adj`) whole, as one packet, and runs the ACK filter when
    /// enabled; returns the bytes this enqueue added net and the flow's DRR++ state (which
    /// neither changes). `PLAIN`: the caller has found the filter off (`Cake::v4_plain`), so it
    /// is not tested.
    #[inline(always)]
    fn enqueue_whole<const PLAIN: bool>(
        &mut self,
        tin: usize,
        flow: u16,
        pkt: Packet,
        now: Instant,
        adj: u32,
        drops: &mut Vec<Dropped>,
    ) -> (u64, FlowSet) {
        let len = pkt.len();
        // The packet and byte counts are updated apart (one before the push, one after), as
        // two scalar adds: side by side the compiler joined them into one 16-byte vector add
        // that takes six instructions.
        self.tins[tin].packets += 1;
        let set = self.queue_push(tin, flow, pkt, now, adj);
        let t = &mut self.tins[tin];
        t.bytes += u64::from(len);
        debug_assert!(!PLAIN || self.cfg.ack_filter == AckFilterMode::None);
        let added = if !PLAIN && self.cfg.ack_filter != AckFilterMode::None {
            self.filter_acks(tin, flow, now, u64::from(len), drops)
        } else {
            u64::from(len)
        };
        (added, set)
    }

    /// Queues a GSO super-packet: its segments with `split-gso`, else whole, charged as its
    /// segments would be. Out of line: most packets are not GSO.
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn enqueue_gso(
        &mut self,
        tin: usize,
        flow: u16,
        pkt: Packet,
        now: Instant,
        net_off: u32,
        drops: &mut Vec<Dropped>,
        bufs: &mut dyn packet::Buffers,
    ) -> u64 {
        if self.cfg.split_gso {
            return self.enqueue_segments(tin, flow, pkt, now, net_off, bufs);
        }
        let gso = pkt
            .meta
            .gso
            .map(|g| (u32::from(g.size), gso_header_len(&pkt.headers())));
        let adj = self
            .overhead
            .packet_len(&mut self.sizes, pkt.len(), net_off, gso);
        self.enqueue_whole::<false>(tin, flow, pkt, now, adj, drops)
            .0
    }

    /// Runs the ACK filter over flow `flow` after a packet of `added` bytes joined it, dropping
    /// the ACK it makes redundant; returns the bytes this enqueue added net. Out of line (only
    /// with `ack-filter`).
    #[inline(never)]
    fn filter_acks(
        &mut self,
        tin: usize,
        flow: u16,
        now: Instant,
        added: u64,
        drops: &mut Vec<Dropped>,
    ) -> u64 {
        let Some(pos) = self.run_ack_filter(tin, flow) else {
            return added;
        };
        let Some(ack) = self.queue_remove_at(tin, flow, pos) else {
            return added;
        };
        self.tins[tin].ack_drops += 1;
        if self.cfg.ingress {
            self.advance_shaper(tin, ack.adj_len, now, true);
        }
        // The bytes this enqueue added net, floored at 0: the dropped ACK can be longer than
        // the one that replaced it (more options, more padding). The kernel's
        // `len -= qdisc_pkt_len(ack)` wraps its u32 there and autorate-ingress counts ~4 GiB
        // (docs/fidelity.md).
        let net = added.saturating_sub(u64::from(ack.pkt.len()));
        self.hand_back(ack.pkt, DropReason::AckFilter, drops);
        net
    }

    /// Drops from the fattest flows until the queued memory is back under the limit; returns
    /// the packets dropped. Out of line: only an overfull queue gets here.
    #[cold]
    #[inline(never)]
    fn drop_overlimit(&mut self, now: Instant, drops: &mut Vec<Dropped>) -> u64 {
        let mut dropped = 0;
        while self.buffer_used > u64::from(self.params.buffer_limit) && self.qlen > 0 {
            dropped += 1;
            self.drop_fattest(now, drops);
        }
        dropped
    }

    fn enqueue_inner(
        &mut self,
        now: Instant,
        mut pkt: Packet,
        drops: &mut Vec<Dropped>,
        bufs: &mut dyn packet::Buffers,
    ) {
        // The common frame (untagged IPv4, TCP or UDP) with the common settings (`v4_fast`)
        // and no priority override to test: read and hashed without building its headers'
        // mapped addresses, its tin the DSCP's. Anything else through the parsed headers (the
        // same tin and flow for such a frame: `select_tin` tests the priority, and the hashes
        // of the mapped tuple equal the IPv4 ones). A priority with a minor number, which may
        // name a tin, is rare: testing it here as part of the guard keeps the common path free
        // of a call, around which the parsed fields were spilled on every packet. Each way
        // continues with its own inlined copy of the rest (`enqueue_classified`): in the common
        // one the network offset is the constant 14, so the offset average's sample is one
        // count (`SizeStats::sample_netoff`), and its values do not meet the other way's where
        // the two would join. With the plain settings (`v4_plain`: the identity overhead, no
        // ACK filter, no autorate) the IPv4 way's copy tests none of the three.
        match FlowV4::parse(&pkt.data) {
            Some(v) if self.v4_fast && pkt.meta.priority & 0xFFFF == 0 => {
                let tin = self.tin_map.of_dscp(v.dscp);
                let flow = self.classify_v4(tin, &v);
                let net_off = u32::from(FlowV4::NETWORK_OFFSET);
                if self.v4_plain {
                    self.enqueue_classified::<true>(now, pkt, tin, flow, net_off, drops, bufs);
                } else {
                    self.enqueue_classified::<false>(now, pkt, tin, flow, net_off, drops, bufs);
                }
            }
            v4 => {
                let h = match v4 {
                    Some(v) => v.headers(),
                    None => FlowHeaders::parse(&pkt.data),
                };
                let tin = self.select_tin(&mut pkt, &h);
                let flow = self.classify_packet(tin, &pkt, &h);
                let net_off = u32::from(h.network_offset);
                self.enqueue_classified::<false>(now, pkt, tin, flow, net_off, drops, bufs);
            }
        }
    }

    /// The rest of an enqueue, once the packet's tin, flow and network offset are known.
    /// Inlined into both ways of [`Cake::enqueue_inner`] (see there), the IPv4 way's twice:
    /// with `PLAIN` (the caller has found `Cake::v4_plain`) the identity overhead, the ACK
    /// filter and autorate-ingress are not tested, as that setting has them all off.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn enqueue_classified<const PLAIN: bool>(
        &mut self,
        now: Instant,
        pkt: Packet,
        tin: usize,
        flow: u16,
        net_off: u32,
        drops: &mut Vec<Dropped>,
        bufs: &mut dyn packet::Buffers,
    ) {
        let len = pkt.len();

        // Ensure the shaper state isn't stale.
        let t = &mut self.tins[tin];
        if t.backlog == 0 {
            if t.time_next < now {
                t.time_next = now;
            }
            if self.qlen == 0 {
                if self.time_next < now {
                    self.time_next = now;
                    self.failsafe_next = now;
                } else if self.time_next > now && self.failsafe_next > now {
                    self.stats.overlimits += 1;
                }
            }
        }
        // The high-water marks (here and the memory's below) are written only when they
        // rise: a compare and a branch, where a conditional move and a store on every packet
        // cost more.
        let t = &mut self.tins[tin];
        if len > t.max_skblen {
            t.max_skblen = len;
        }

        // The flow's DRR++ state, read where the packet is linked behind its flow (queueing
        // does not change it).
        let (added_bytes, set) = if pkt.meta.gso.is_none() {
            let adj = if PLAIN {
                self.overhead
                    .packet_len_identity(&mut self.sizes, len, net_off)
            } else {
                self.overhead.packet_len_own(&mut self.sizes, len, net_off)
            };
            self.enqueue_whole::<PLAIN>(tin, flow, pkt, now, adj, drops)
        } else {
            let added = self.enqueue_gso(tin, flow, pkt, now, net_off, drops, bufs);
            (added, self.tins[tin].flows[qi(flow)].set)
        };
        self.heap_up(tin, flow);
        debug_assert!(!PLAIN || !self.cfg.autorate);
        if !PLAIN {
            self.update_autorate(now, added_bytes);
        }

        // Flow chain: a flow already sparse or bulk stays as it is (most packets); any other
        // moves, out of line.
        debug_assert_eq!(set, self.tins[tin].flows[qi(flow)].set);
        if !matches!(set, FlowSet::Sparse | FlowSet::Bulk) {
            self.flow_wakes(tin, flow, set);
        }

        debug_assert_eq!(
            self.buffer_watch,
            self.buffer_max_used
                .min(u64::from(self.params.buffer_limit))
        );
        if self.buffer_used > self.buffer_watch {
            // Rare once the queue has reached its usual size (see `buffer_grown`); the hint
            // keeps the compiler from arranging enqueue's registers around the call.
            std::hint::cold_path();
            self.buffer_grown(tin, now, drops);
        }
    }

    /// The end of an enqueue that left `buffer_used` above `buffer_watch`: a new high-water
    /// mark, or memory over the limit (then drops from the fattest flows, counted in tin
    /// `tin`). Out of line: once the queue has reached its usual size, rare.
    #[inline(never)]
    fn buffer_grown(&mut self, tin: usize, now: Instant, drops: &mut Vec<Dropped>) {
        let limit = u64::from(self.params.buffer_limit);
        if self.buffer_used > self.buffer_max_used {
            self.buffer_max_used = self.buffer_used;
            self.buffer_watch = self.buffer_max_used.min(limit);
        }
        if self.buffer_used > limit {
            let dropped = self.drop_overlimit(now, drops);
            self.tins[tin].drop_overlimit += dropped;
        }
    }

    /// The DRR++ step of a packet queued in flow `flow` of tin `tin` whose state was `set`,
    /// neither sparse nor bulk: an idle or decaying flow joins the new list as sparse with a
    /// fresh quantum; a sparse flow waiting on the old list becomes bulk. Out of line: most
    /// packets join a flow that is already sparse or bulk.
    #[inline(never)]
    fn flow_wakes(&mut self, tin: usize, flow: u16, set: FlowSet) {
        let mode = self.cfg.flow_mode;
        match set {
            FlowSet::None | FlowSet::Decaying => {
                let t = &mut self.tins[tin];
                if set == FlowSet::Decaying {
                    t.decaying_flow_count -= 1;
                }
                t.move_tail(flow, ListId::New);
                t.set_flow_set(flow, FlowSet::Sparse);
                t.sparse_flow_count += 1;
                self.active_tins |= 1 << tin;
                let q = self.tins[tin].quantum(flow, mode, &mut self.rng);
                self.tins[tin].flows[qi(flow)].deficit = q;
            }
            FlowSet::SparseWait => {
                let t = &mut self.tins[tin];
                t.flows[qi(flow)].set = FlowSet::Bulk;
                t.sparse_flow_count -= 1;
                t.bulk_flow_count += 1;
                t.inc_host_bulk(flow, mode);
            }
            FlowSet::Sparse | FlowSet::Bulk => {}
        }
    }

    /// Picks the tin to serve; `None` when nothing can be sent. `SHAPED` is whether the rate
    /// is limited (the caller's test, see `dequeue_inner`).
    #[inline]
    fn choose_tin<const SHAPED: bool>(&mut self, now: Instant) -> Option<usize> {
        debug_assert_eq!(SHAPED, !self.global_rate().is_unlimited());
        let n = self.tins.len();
        if !SHAPED {
            let mut wrapped = false;
            let mut empty = true;
            let mut b = usize::from(self.cur_tin);
            while self.tins[b].deficit < 0 || self.tins[b].active_flows() == 0 {
                let t = &mut self.tins[b];
                if t.deficit <= 0 {
                    t.deficit += t.params.tin_quantum as i32;
                }
                if t.active_flows() != 0 {
                    empty = false;
                }
                b += 1;
                if b >= n {
                    b = 0;
                    if wrapped {
                        if empty {
                            self.cur_tin = b as u8;
                            return None;
                        }
                    } else {
                        wrapped = true;
                    }
                }
            }
            self.cur_tin = b as u8;
            Some(b)
        } else {
            // The active tins in index order (the kernel scans every tin and skips the idle
            // ones): the one whose clock is due, or due soonest; the last on a tie.
            debug_assert!(self
                .tins
                .iter()
                .enumerate()
                .all(|(i, t)| (t.active_flows() > 0) == (self.active_tins >> i & 1 == 1)));
            // Widened once: on the `u8` the compiler zero-extended it again for
            // `trailing_zeros`.
            let mut active = u32::from(self.active_tins);
            if active == 0 {
                self.cur_tin = 0;
                return None;
            }
            let mut best = active.trailing_zeros() as usize;
            active &= active - 1;
            if active != 0 {
                let mut best_time =
                    self.tins[best].time_next.as_nanos() as i64 - now.as_nanos() as i64;
                while active != 0 {
                    let i = active.trailing_zeros() as usize;
                    active &= active - 1;
                    let dt = self.tins[i].time_next.as_nanos() as i64 - now.as_nanos() as i64;
                    if dt <= 0 || dt <= best_time {
                        best_time = dt;
                        best = i;
                    }
                }
            }
            self.cur_tin = best as u8;
            Some(best)
        }
    }

    /// One DRR++ visit to a flow out of deficit ([`Tin::refill`]). The caller moves it to the
    /// old list's tail.
    #[inline(always)]
    fn refill(&mut self, tin: usize, flow: u16) {
        self.tins[tin].refill(flow, self.cfg.flow_mode, &mut self.rng);
    }

    /// The DRR++ visits that start at `flow`, the head of tin `tin`'s old list, while the new
    /// list is empty and `flow` has no deficit ([`Tin::refill_old_list`]). Returns the flow
    /// the walk stopped at, now the old list's head.
    #[inline(always)]
    fn refill_old_list(&mut self, tin: usize, flow: u16) -> u16 {
        let cfg = &self.cfg;
        self.tins[tin].refill_old_list(flow, || cfg.flow_mode, &mut self.rng)
    }

    /// Handles a flow found empty at dequeue: to the decaying list while COBALT holds state,
    /// else off all lists.
    #[inline(never)]
    fn retire_empty_flow(&mut self, tin: usize, flow: u16, now: Instant) {
        let mode = self.cfg.flow_mode;
        let t = &mut self.tins[tin];
        let params = t.params.cobalt;
        let f = &mut t.flows[qi(flow)];
        if f.cvars.queue_empty(&params, now) {
            t.unresponsive_flow_count = t.unresponsive_flow_count.saturating_sub(1);
        }
        let f = t.flows[qi(flow)];
        if f.cvars.is_active(now) {
            t.move_tail(flow, ListId::Decaying);
            match f.set {
                FlowSet::Bulk => {
                    t.bulk_flow_count -= 1;
                    t.dec_host_bulk(flow, mode);
                    t.decaying_flow_count += 1;
                }
                FlowSet::Sparse | FlowSet::SparseWait => {
                    t.sparse_flow_count -= 1;
                    t.decaying_flow_count += 1;
                }
                _ => {}
            }
            t.flows[qi(flow)].set = FlowSet::Decaying;
        } else {
            t.unlink(flow);
            match f.set {
                FlowSet::Sparse | FlowSet::SparseWait => t.sparse_flow_count -= 1,
                FlowSet::Bulk => {
                    t.bulk_flow_count -= 1;
                    t.dec_host_bulk(flow, mode);
                }
                _ => t.decaying_flow_count -= 1,
            }
            t.set_flow_set(flow, FlowSet::None);
        }
        if self.tins[tin].active_flows() == 0 {
            self.active_tins &= !(1 << tin);
        }
    }

    /// Drops the packet COBALT judged (`verdict`, a drop), in slot `i`, already unlinked from
    /// flow `flow` of tin `tin` (the overflow heap's step for that unlink is taken here);
    /// returns true when the caller must go back to choosing a flow
    /// (ingress mode, where the drop is charged to the shaper and the deficits). Out of line:
    /// most packets pass.
    #[cold]
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn drop_head(
        &mut self,
        tin: usize,
        flow: u16,
        i: u32,
        adj: u32,
        verdict: Verdict,
        now: Instant,
        drops: &mut Vec<Dropped>,
    ) -> bool {
        // The heap's step for the unlink of the dropped packet (see `dequeue_inner`).
        self.heap_down(tin, flow);
        let t = &mut self.tins[tin];
        t.flow_drops[qi(flow)] += 1;
        t.dropped += 1;
        let reason = if verdict == Verdict::DropBlue {
            DropReason::Blue
        } else {
            DropReason::Aqm
        };
        let pkt = self.slab.free(i);
        self.hand_back(pkt, reason, drops);
        if self.cfg.ingress {
            self.advance_shaper(tin, adj, now, true);
            let t = &mut self.tins[tin];
            t.flows[qi(flow)].deficit -= adj as i32;
            t.deficit -= adj as i32;
            return true;
        }
        false
    }

    /// One dequeue. The rate, which only enqueue and the configuration change, is tested once:
    /// each case has its own inlined copy of the dequeue (`dequeue_with`), in which the tin
    /// choice and the shaper's charge test nothing more.
    #[inline(always)]
    fn dequeue_inner(&mut self, now: Instant, drops: &mut Vec<Dropped>) -> Dequeue {
        if self.global_rate().is_unlimited() {
            self.dequeue_with::<false>(now, drops)
        } else {
            self.dequeue_with::<true>(now, drops)
        }
    }

    /// [`Cake::dequeue_inner`] with the rate limited (`SHAPED`) or not, as the caller found it.
    #[inline(always)]
    fn dequeue_with<const SHAPED: bool>(
        &mut self,
        now: Instant,
        drops: &mut Vec<Dropped>,
    ) -> Dequeue {
        // As in the kernel, only the very first pass of a dequeue call prefers the decaying
        // list; `continue 'begin` must not reset this, or an empty decaying flow whose COBALT
        // state is still active is picked, retired to the decaying tail and picked again forever.
        let mut first_flow = true;
        'begin: loop {
            if self.qlen == 0 {
                return Dequeue::Empty;
            }
            // Gated while both clocks are ahead of `now`; the gate is the earlier of the two.
            // The shaper's clock is tested first, alone, and the held case marked cold: a
            // dequeue that finds it due tests nothing else. (Without the hint the compiler
            // evaluates both comparisons on every call, as it did for `a > now && b > now`.)
            if self.time_next > now {
                std::hint::cold_path();
                if self.failsafe_next > now {
                    self.stats.overlimits += 1;
                    return Dequeue::NotBefore(self.time_next.min(self.failsafe_next));
                }
            }
            let Some(tin) = self.choose_tin::<SHAPED>(now) else {
                return Dequeue::Empty;
            };
            'retry: loop {
                let t = &self.tins[tin];
                let mut from_old = false;
                let head = if t.only_old() {
                    // The common case first, in one compare: with the new and the decaying
                    // lists empty, the choice below takes the old list's head whatever
                    // `first_flow` is.
                    from_old = true;
                    t.list_head(ListId::Old)
                } else if first_flow && t.list_head(ListId::Decaying).is_some() {
                    t.list_head(ListId::Decaying)
                } else {
                    t.list_head(ListId::New)
                        .or_else(|| {
                            from_old = true;
                            t.list_head(ListId::Old)
                        })
                        .or_else(|| {
                            from_old = false;
                            t.list_head(ListId::Decaying)
                        })
                };
                let Some(mut flow) = head else {
                    continue 'begin;
                };
                first_flow = false;

                if self.tins[tin].flows[qi(flow)].deficit <= 0 {
                    if from_old {
                        // The head of the old list with the new list empty: the next visits
                        // walk the old list in order. Refill them all at once (see
                        // refill_old_list). The next visit would pick the old list's new head
                        // (the new list is still empty, and the decaying list is preferred
                        // only on the first visit): the flow the walk stopped at, with a
                        // positive deficit. Serve it at once.
                        flow = self.refill_old_list(tin, flow);
                    } else {
                        self.refill(tin, flow);
                        self.tins[tin].move_tail(flow, ListId::Old);
                        continue 'retry;
                    }
                }

                // Retrieve a packet via the AQM. The packet stays in its slab slot until it
                // is handed over (or dropped): it is moved once.
                let (i, adj) = loop {
                    // The flow stays in hand from the unlink to the deficits below.
                    let t = &mut self.tins[tin];
                    let f = &mut t.flows[qi(flow)];
                    let unlinked = unlink_head(
                        f,
                        &mut t.backlog,
                        &self.slab,
                        &mut self.buffer_used,
                        &mut self.qlen,
                    );
                    let Some((i, enqueued, adj)) = unlinked else {
                        self.heap_down(tin, flow);
                        self.retire_empty_flow(tin, flow, now);
                        continue 'begin;
                    };
                    // The heap's step for this unlink comes after COBALT's verdict (which
                    // changes no backlog): with the timeout's count-down for a packet that
                    // leaves, or in `drop_head` for one dropped.
                    // The bulk count (ingress only), read by COBALT only when the sojourn
                    // exceeds the target: most packets skip the test of the mode.
                    let cfg = &self.cfg;
                    let bulk_flow_count = &t.bulk_flow_count;
                    let bulk = || if cfg.ingress { *bulk_flow_count } else { 0 };
                    let params = &t.params.cobalt;
                    let slab = &mut self.slab;
                    let (verdict, marked) = f.cvars.should_drop_with(
                        params,
                        now,
                        enqueued,
                        bulk,
                        &mut self.rng,
                        || {
                            let pkt = &mut slab.get_mut(i).pkt;
                            let h = Headers::parse(&pkt.data);
                            packet::mark_ce(&mut pkt.data, &h)
                        },
                    );
                    let last = f.head == NIL;
                    if !verdict.is_drop() || last {
                        // The packet leaves: its flow's and tin's deficits, the ECN mark count
                        // and the tin's delay averages, through the flow and tin in hand.
                        f.deficit -= adj as i32;
                        t.deficit -= adj as i32;
                        if marked {
                            t.ecn_marks += 1;
                            self.stats.ecn_marks += 1;
                        }
                        let delay = (now - enqueued).as_nanos();
                        t.avge_delay = ewma64(t.avge_delay, delay, 8);
                        t.peak_delay = ewma64(
                            t.peak_delay,
                            delay,
                            if delay > t.peak_delay { 2 } else { 8 },
                        );
                        t.base_delay = ewma64(
                            t.base_delay,
                            delay,
                            if delay < t.base_delay { 2 } else { 8 },
                        );
                        break (i, adj);
                    }
                    if self.drop_head(tin, flow, i, adj, verdict, now, drops) {
                        continue 'retry;
                    }
                };

                // The dequeued packet and byte counts are updated apart (as at enqueue: side by
                // side they compile to one 16-byte vector add of six instructions).
                self.stats.dequeued.packets += 1;
                if SHAPED {
                    self.charge_shaper(tin, adj, now, false);
                }
                // One test per packet while the heap is not kept (most of the time), where
                // the count-down saturated on every dequeue.
                if self.heap.timeout != 0 {
                    self.heap_dequeued(tin, flow);
                }
                let pkt = self.slab.free(i);
                self.stats.dequeued.bytes += u64::from(pkt.len());
                return Dequeue::Packet(pkt);
            }
        }
    }

    /// Everything `tc -s qdisc show` reports for this instance.
    pub fn cake_stats(&self) -> CakeStats {
        let tins = self
            .tins
            .iter()
            .map(|t| TinStats {
                threshold_rate: t.params.rate.bytes_per_sec,
                target_us: t.params.cobalt.target / 1_000,
                interval_us: t.params.cobalt.interval / 1_000,
                peak_delay_us: t.peak_delay / 1_000,
                avg_delay_us: t.avge_delay / 1_000,
                base_delay_us: t.base_delay / 1_000,
                backlog_bytes: t.backlog,
                packets: t.packets,
                bytes: t.bytes,
                way_indirect_hits: t.way_hits,
                way_misses: t.way_misses,
                way_collisions: t.way_collisions,
                drops: t.dropped,
                ecn_marks: t.ecn_marks,
                ack_drops: t.ack_drops,
                sparse_flows: t.sparse_flow_count + t.decaying_flow_count,
                bulk_flows: t.bulk_flow_count,
                unresponsive_flows: t.unresponsive_flow_count,
                max_pkt_len: t.max_skblen,
                flow_quantum: t.params.flow_quantum,
            })
            .collect();
        CakeStats {
            qdisc: self.stats(),
            capacity_estimate: self.autorate.avg_peak_bandwidth,
            memory_used: self.buffer_max_used,
            memory_limit: u64::from(self.params.buffer_limit),
            min_network_size: self.sizes.min_netlen,
            max_network_size: self.sizes.max_netlen,
            min_adj_size: self.sizes.min_adjlen,
            max_adj_size: self.sizes.max_adjlen,
            avg_hdr_offset: self.sizes.avg_netoff(),
            tins,
        }
    }

    /// Per-flow class statistics for flow `flow` (0..1024) of kernel tin `tin`, at `now`.
    pub fn flow_stats(&self, tin: usize, flow: usize, now: Instant) -> Option<FlowStats> {
        let f = self.tins.get(tin)?.flows.get(flow)?;
        Some(FlowStats {
            deficit: f.deficit,
            count: f.cvars.count,
            dropping: f.cvars.dropping,
            drop_next_ns: f.cvars.drop_next.as_nanos() as i64 - now.as_nanos() as i64,
            p_drop: f.cvars.p_drop,
            blue_timer_ns: now.as_nanos() as i64 - f.cvars.blue_timer.as_nanos() as i64,
            qlen: self.slab.chain_len(f.head),
            backlog: f.backlog,
        })
    }

    /// Bytes of memory charged for queued packets now: for each, what its frame pins
    /// ([`Packet::truesize`]: buffer capacity, so a short frame in a large buffer is charged the
    /// buffer) plus its slot, as the kernel charges skb truesize.
    pub fn memory_used(&self) -> u64 {
        self.buffer_used
    }

    /// The number of kernel tins in use.
    pub fn tin_count(&self) -> usize {
        self.tins.len()
    }

    /// The classes `tc -s class show` lists at `now`: every flow on a DRR++ list (holding
    /// packets, or empty and decaying), tins in user order, queues ascending, with the kernel's
    /// class ids and values. Allocates; meant for statistics, not the packet path.
    pub fn class_stats(&self, now: Instant) -> Vec<crate::tc::ClassStats> {
        crate::tc::collect_classes(
            self.tins.as_slice(),
            tin_order(self.cfg.diffserv),
            &self.slab,
            now,
        )
    }
}

/// Unlinks the head packet of flow `f`, if it holds one, and takes it off the counts: the
/// flow's backlog, its tin's (`tin_backlog`), the memory used and the packet count. The packet
/// stays in its slab slot: the caller must [`Slab::free`] (or [`Slab::remove`]) slot `i` before
/// the next enqueue (dequeue takes the packet out only once, when it hands it over). Returns
/// the slot `i` with the packet's enqueue time and adjusted length, read from the slot in the
/// same access. Takes the flow and the counts apart, not `&mut Cake`, so that dequeue goes on
/// with the flow in hand: derived again from the tin after the stores to the counts, the
/// compiler read the tin's table address back.
#[inline(always)]
fn unlink_head(
    f: &mut Flow,
    tin_backlog: &mut u64,
    slab: &Slab,
    buffer_used: &mut u64,
    qlen: &mut u32,
) -> Option<(u32, Instant, u32)> {
    if f.head == NIL {
        return None;
    }
    let i = f.head;
    let slot = slab.get(i);
    // Emptied, the queue keeps its stale `tail` (see `Flow::tail`).
    f.head = slot.next;
    // The length stored with the packet (see `Slot::len`).
    debug_assert_eq!(slot.len, slot.pkt.len());
    let (len, mem, enqueued, adj) = (slot.len, slot.mem, slot.enqueued, slot.adj_len);
    f.backlog -= len;
    unaccount(tin_backlog, buffer_used, qlen, len, mem);
    Some((i, enqueued, adj))
}

/// Takes a packet of `len` bytes (charged `mem`) that left a flow's queue off the counts
/// beyond its flow's backlog: its tin's backlog, the memory used and the packet count. The one
/// place every removal's accounting goes through ([`unlink_head`], the ACK filter's removal).
#[inline(always)]
fn unaccount(tin_backlog: &mut u64, buffer_used: &mut u64, qlen: &mut u32, len: u32, mem: u32) {
    *tin_backlog -= u64::from(len);
    *buffer_used -= u64::from(mem);
    *qlen -= 1;
}

fn flat_backlog(tins: &Tins, id: FlatId) -> u32 {
    let (tin, flow) = (id as usize / QUEUES, id as usize % QUEUES);
    tins.get(tin).map_or(0, |t| t.flows[flow].backlog)
}

/// Header length of a GSO super-packet's segments (up to the transport payload).
fn gso_header_len(h: &Headers) -> u32 {
    match (h.tcp, h.ip) {
        (Some(tcp), _) => u32::from(tcp.offset) + u32::from(tcp.header_len),
        (None, Some(ip)) => {
            // UDP: the IP datagram minus the UDP payload is not known here; approximate with
            // the inner IP header (fixed part) plus the 8-byte UDP header.
            let ip_hdr = if ip.inner_version == 6 { 40 } else { 20 };
            u32::from(ip.inner_offset) + ip_hdr + 8
        }
        _ => u32::from(h.network_offset),
    }
}

#[inline]
fn ewma64(avg: u64, sample: u64, shift: u32) -> u64 {
    avg - (avg >> shift) + (sample >> shift)
}

// Keep the 32-bit EWMA helper referenced from one place.
const _: fn(u32, u32, u32) -> u32 = ewma;

impl Qdisc for Cake {
    fn enqueue(&mut self, now: Instant, pkt: Packet, drops: &mut Vec<Dropped>) {
        self.enqueue_inner(now, pkt, drops, &mut packet::Unpooled);
    }

    fn enqueue_with(
        &mut self,
        now: Instant,
        pkt: Packet,
        drops: &mut Vec<Dropped>,
        bufs: &mut dyn packet::Buffers,
    ) {
        self.enqueue_inner(now, pkt, drops, bufs);
    }

    /// Inlined into its callers (`AnyQdisc`'s dispatch, cake_mq's shards): the dispatch then
    /// shares dequeue's stack frame instead of setting up its own around a call.
    #[inline(always)]
    fn dequeue(&mut self, now: Instant, drops: &mut Vec<Dropped>) -> Dequeue {
        self.dequeue_inner(now, drops)
    }

    fn set_rate(&mut self, rate: Option<Rate>) -> Result<(), NoShaper> {
        self.reconfigure(rate.map_or(0, Rate::bytes_per_s));
        Ok(())
    }

    fn stats(&self) -> QdiscStats {
        // Every packet (GSO segment) enqueued is counted in its tin's `packets` and `bytes`, with
        // the length the backlog is charged: the sums are the qdisc's `enqueued`.
        let mut enqueued = Counter::default();
        for t in self.tins.iter() {
            enqueued.packets += t.packets;
            enqueued.bytes += t.bytes;
        }
        QdiscStats {
            enqueued,
            backlog: self.backlog(),
            ..self.stats
        }
    }

    fn backlog(&self) -> Counter {
        Counter {
            packets: u64::from(self.qlen),
            bytes: self.tins.iter().map(|t| t.backlog).sum(),
        }
    }

    fn kind(&self) -> &'static str {
        "cake"
    }

    /// Releases the packet slots kept from a larger backlog, once the queue is empty (a no-op
    /// while packets are queued).
    fn shrink(&mut self) -> usize {
        if self.qlen == 0 {
            self.slab.shrink_empty()
        } else {
            0
        }
    }
}

#[allow(dead_code)]
const _MAX_TINS_FITS_FLAT_ID: () = assert!(MAX_TINS * QUEUES <= u16::MAX as usize + 1);
