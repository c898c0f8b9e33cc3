//! FQ-CoDel (RFC 8290), as Linux `sch_fq_codel`.
//!
//! Packets are hashed by their 5-tuple (keyed by a seed) into a fixed set of flow queues, each
//! with its own CoDel state ([`CodelVars`], the same control law as [`crate::codel::Codel`]).
//! Flows are served by deficit round robin from two lists: a flow that becomes active joins the
//! tail of the *new* list with one quantum of credit; the scheduler serves the new list first;
//! a flow whose credit is used up gets another quantum and moves to the tail of the *old* list;
//! a new flow found empty moves to the old list (if the old list is non-empty, so that old flows
//! are not starved), otherwise an empty flow leaves the lists.
//!
//! On overflow (packet limit or memory limit) the flow with the largest byte backlog loses
//! packets from its head until half of its backlog is gone or `drop_batch` packets were dropped,
//! and its CoDel `count` grows by the number dropped ([`DropReason::Overflow`]).
//!
//! Storage: flows are a fixed array; packets live in a slab of slots linked by index (per-flow
//! FIFO lists and a free list), so steady-state operation does not allocate.
//!
//! Deviations from Linux: memory use is counted as packet length (Linux counts skb truesize);
//! the "at most one packet left" CoDel test compares the qdisc backlog with the largest packet
//! seen (RFC 8289's maxpacket) rather than the device MTU; non-IP packets share flow 0.

use crate::codel::{CodelParams, CodelQueue, CodelVars};
use crate::packet::{Headers, Packet};
use crate::qdisc::{Dequeue, DropReason, Dropped, Qdisc, QdiscStats};
use crate::rng::Rng;
use crate::time::{Duration, Instant};

/// The null index of the linked lists.
const NIL: u32 = u32::MAX;

/// Configuration of [`FqCodel`]. Defaults are those of RFC 8290 and Linux `sch_fq_codel`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FqCodelConfig {
    /// Number of flow queues (hash buckets). Default 1024. Clamped to 1..=65536.
    pub flows: u32,
    /// DRR quantum in bytes. Default 1514. At least 1.
    pub quantum: u32,
    /// Packet limit over all flows. Default 10240.
    pub limit: u32,
    /// Byte limit over all flows (packet lengths). Default 32 MiB.
    pub memory_limit: u64,
    /// CoDel target. Default 5 ms.
    pub target: Duration,
    /// CoDel interval. Default 100 ms.
    pub interval: Duration,
    /// Mark ECT packets CE instead of dropping them. Default on.
    pub ecn: bool,
    /// Most packets dropped from the fattest flow per overflow. Default 64. At least 1.
    pub drop_batch: u32,
}

impl Default for FqCodelConfig {
    fn default() -> Self {
        FqCodelConfig {
            flows: 1024,
            quantum: crate::FULL_FRAME,
            limit: 10240,
            memory_limit: 32 << 20,
            target: Duration::from_millis(5),
            interval: Duration::from_millis(100),
            ecn: true,
            drop_batch: 64,
        }
    }
}

/// Which scheduling list a flow is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum List {
    None,
    New,
    Old,
}

/// One flow queue.
#[derive(Clone, Copy, Debug)]
struct Flow {
    /// First packet slot (NIL when empty).
    head: u32,
    /// Last packet slot.
    tail: u32,
    /// Next flow on the same scheduling list.
    next: u32,
    /// The list the flow is on.
    list: List,
    /// DRR credit in bytes.
    deficit: i64,
    /// CoDel state.
    cvars: CodelVars,
}

impl Default for Flow {
    fn default() -> Self {
        Flow {
            head: NIL,
            tail: NIL,
            next: NIL,
            list: List::None,
            deficit: 0,
            cvars: CodelVars::new(),
        }
    }
}

/// A packet slot of the slab.
#[derive(Debug)]
struct Slot {
    pkt: Packet,
    enqueued_at: Instant,
    next: u32,
}

/// A FIFO list of flows linked through `Flow::next`.
#[derive(Clone, Copy, Debug)]
struct FlowList {
    head: u32,
    tail: u32,
}

impl FlowList {
    const EMPTY: FlowList = FlowList {
        head: NIL,
        tail: NIL,
    };
}

/// Packet storage: slots linked by index, with a free list.
#[derive(Debug)]
struct Slab {
    slots: Vec<Slot>,
    free: u32,
}

impl Slab {
    fn alloc(&mut self, pkt: Packet, enqueued_at: Instant) -> u32 {
        if self.free != NIL {
            let i = self.free;
            let slot = &mut self.slots[i as usize];
            self.free = slot.next;
            slot.pkt = pkt;
            slot.enqueued_at = enqueued_at;
            slot.next = NIL;
            i
        } else {
            self.slots.push(Slot {
                pkt,
                enqueued_at,
                next: NIL,
            });
            (self.slots.len() - 1) as u32
        }
    }

    /// Removes the head packet of `flow`.
    fn pop(&mut self, flow: &mut Flow) -> Option<(Packet, Instant)> {
        if flow.head == NIL {
            return None;
        }
        let i = flow.head;
        let slot = &mut self.slots[i as usize];
        let pkt = std::mem::take(&mut slot.pkt);
        let at = slot.enqueued_at;
        flow.head = slot.next;
        if flow.head == NIL {
            flow.tail = NIL;
        }
        slot.next = self.free;
        self.free = i;
        Some((pkt, at))
    }
}

/// The state one flow's CoDel pulls through.
struct FlowQueue<'a> {
    slab: &'a mut Slab,
    flow: &'a mut Flow,
    flow_backlog: &'a mut u64,
    memory_usage: &'a mut u64,
    stats: &'a mut QdiscStats,
    maxpacket: &'a mut u32,
}

impl CodelQueue for FlowQueue<'_> {
    fn pop(&mut self) -> Option<(Packet, Instant)> {
        let (pkt, at) = self.slab.pop(self.flow)?;
        let len = u64::from(pkt.len());
        *self.flow_backlog -= len;
        *self.memory_usage -= len;
        self.stats.backlog.packets -= 1;
        self.stats.backlog.bytes -= len;
        Some((pkt, at))
    }
    fn backlog_bytes(&self) -> u64 {
        // Linux passes the qdisc-wide backlog here.
        self.stats.backlog.bytes
    }
    fn maxpacket(&mut self) -> &mut u32 {
        self.maxpacket
    }
    fn stats(&mut self) -> &mut QdiscStats {
        self.stats
    }
}

/// The FQ-CoDel qdisc.
#[derive(Debug)]
pub struct FqCodel {
    config: FqCodelConfig,
    params: CodelParams,
    hash_key: [u64; 2],
    flows: Vec<Flow>,
    /// Byte backlog per flow (apart from `flows` so the fattest-flow scan is dense).
    backlogs: Vec<u64>,
    new_flows: FlowList,
    old_flows: FlowList,
    slab: Slab,
    memory_usage: u64,
    maxpacket: u32,
    stats: QdiscStats,
    new_flow_count: u64,
}

impl FqCodel {
    /// An empty FQ-CoDel with `config.flows` flows. `seed` keys the flow hash. Reserves packet
    /// slots for the packet limit (up to 65536) so that steady-state operation does not allocate.
    pub fn new(config: FqCodelConfig, seed: u64) -> Self {
        let mut config = config;
        config.flows = config.flows.clamp(1, 1 << 16);
        config.quantum = config.quantum.max(1);
        config.drop_batch = config.drop_batch.max(1);
        let mut rng = Rng::new(seed);
        let n = config.flows as usize;
        FqCodel {
            params: CodelParams {
                target: config.target,
                interval: config.interval,
                ecn: config.ecn,
            },
            hash_key: [rng.next_u64(), rng.next_u64()],
            flows: vec![Flow::default(); n],
            backlogs: vec![0; n],
            new_flows: FlowList::EMPTY,
            old_flows: FlowList::EMPTY,
            slab: Slab {
                slots: Vec::with_capacity((config.limit as usize).saturating_add(1).min(1 << 16)),
                free: NIL,
            },
            memory_usage: 0,
            maxpacket: 0,
            stats: QdiscStats::default(),
            new_flow_count: 0,
            config,
        }
    }

    /// The configuration (after clamping).
    pub fn config(&self) -> &FqCodelConfig {
        &self.config
    }

    /// The flow index (0..flows) `pkt` is queued in: a keyed hash of its 5-tuple, or 0 for
    /// non-IP packets.
    pub fn classify(&self, pkt: &Packet) -> u32 {
        match Headers::parse(&pkt.data).ip {
            Some(ip) => {
                let h = crate::sfq::keyed_tuple_hash(&ip.tuple, self.hash_key);
                ((u64::from(h) * u64::from(self.config.flows)) >> 32) as u32
            }
            None => 0,
        }
    }

    /// Bytes queued in flow `idx` (0 for an out-of-range index).
    pub fn flow_backlog(&self, idx: u32) -> u64 {
        self.backlogs.get(idx as usize).copied().unwrap_or(0)
    }

    /// How many times a flow became active (joined the new list).
    pub fn new_flow_count(&self) -> u64 {
        self.new_flow_count
    }

    fn push_tail(flows: &mut [Flow], list: &mut FlowList, which: List, f: u32) {
        flows[f as usize].next = NIL;
        flows[f as usize].list = which;
        if list.tail == NIL {
            list.head = f;
        } else {
            flows[list.tail as usize].next = f;
        }
        list.tail = f;
    }

    fn pop_head(flows: &mut [Flow], list: &mut FlowList) {
        let f = list.head;
        if f == NIL {
            return;
        }
        list.head = flows[f as usize].next;
        if list.head == NIL {
            list.tail = NIL;
        }
        flows[f as usize].next = NIL;
        flows[f as usize].list = List::None;
    }

    /// Drops from the head of the fattest flow until half its backlog or `drop_batch` packets
    /// are gone (Linux `fq_codel_drop`).
    fn drop_from_fattest(&mut self, drops: &mut Vec<Dropped>) {
        let mut idx = 0usize;
        let mut max = 0u64;
        for (i, &b) in self.backlogs.iter().enumerate() {
            if b > max {
                max = b;
                idx = i;
            }
        }
        let threshold = max / 2;
        let flow = &mut self.flows[idx];
        let mut len = 0u64;
        let mut n = 0u32;
        while let Some((pkt, _)) = self.slab.pop(flow) {
            let l = pkt.len();
            len += u64::from(l);
            n += 1;
            self.stats.drop_counter(DropReason::Overflow).add(l);
            self.stats.backlog.packets -= 1;
            self.stats.backlog.bytes -= u64::from(l);
            drops.push(Dropped {
                packet: pkt,
                reason: DropReason::Overflow,
            });
            if n >= self.config.drop_batch || len >= threshold {
                break;
            }
        }
        flow.cvars.add_count(n);
        self.backlogs[idx] -= len;
        self.memory_usage -= len;
    }
}

impl Qdisc for FqCodel {
    fn enqueue(&mut self, now: Instant, pkt: Packet, drops: &mut Vec<Dropped>) {
        let idx = self.classify(&pkt);
        let len = pkt.len();
        self.stats.enqueued.add(len);
        self.stats.backlog.add(len);
        self.backlogs[idx as usize] += u64::from(len);
        self.memory_usage += u64::from(len);
        let slot = self.slab.alloc(pkt, now);
        let flow = &mut self.flows[idx as usize];
        if flow.tail == NIL {
            flow.head = slot;
        } else {
            self.slab.slots[flow.tail as usize].next = slot;
        }
        flow.tail = slot;
        if flow.list == List::None {
            flow.deficit = i64::from(self.config.quantum);
            Self::push_tail(&mut self.flows, &mut self.new_flows, List::New, idx);
            self.new_flow_count += 1;
        }
        if self.stats.backlog.packets > u64::from(self.config.limit)
            || self.memory_usage > self.config.memory_limit
        {
            self.drop_from_fattest(drops);
        }
    }

    fn dequeue(&mut self, now: Instant, drops: &mut Vec<Dropped>) -> Dequeue {
        loop {
            let (which, f) = if self.new_flows.head != NIL {
                (List::New, self.new_flows.head)
            } else if self.old_flows.head != NIL {
                (List::Old, self.old_flows.head)
            } else {
                return Dequeue::Empty;
            };
            let fi = f as usize;
            let head_list = match which {
                List::New => &mut self.new_flows,
                _ => &mut self.old_flows,
            };
            if self.flows[fi].deficit <= 0 {
                self.flows[fi].deficit += i64::from(self.config.quantum);
                Self::pop_head(&mut self.flows, head_list);
                Self::push_tail(&mut self.flows, &mut self.old_flows, List::Old, f);
                continue;
            }
            let mut cvars = self.flows[fi].cvars;
            let mut q = FlowQueue {
                slab: &mut self.slab,
                flow: &mut self.flows[fi],
                flow_backlog: &mut self.backlogs[fi],
                memory_usage: &mut self.memory_usage,
                stats: &mut self.stats,
                maxpacket: &mut self.maxpacket,
            };
            let out = cvars.dequeue(&self.params, now, &mut q, drops);
            self.flows[fi].cvars = cvars;
            match out {
                Some(pkt) => {
                    let len = pkt.len();
                    self.flows[fi].deficit -= i64::from(len);
                    self.stats.dequeued.add(len);
                    return Dequeue::Packet(pkt);
                }
                None => {
                    // Force a pass through the old flows to prevent starvation.
                    if which == List::New && self.old_flows.head != NIL {
                        Self::pop_head(&mut self.flows, &mut self.new_flows);
                        Self::push_tail(&mut self.flows, &mut self.old_flows, List::Old, f);
                    } else {
                        let list = match which {
                            List::New => &mut self.new_flows,
                            _ => &mut self.old_flows,
                        };
                        Self::pop_head(&mut self.flows, list);
                    }
                }
            }
        }
    }

    fn stats(&self) -> QdiscStats {
        self.stats
    }

    fn kind(&self) -> &'static str {
        "fq_codel"
    }
}
