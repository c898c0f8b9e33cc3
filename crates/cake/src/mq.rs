//! cake_mq: N CAKE shards that share one configured rate, as Linux 7.0's `cake_mq` qdisc runs
//! one CAKE instance per hardware transmit queue.
//!
//! Each shard is a complete CAKE (tins, DRR++ over 1,024 set-associative flow queues with host
//! isolation, COBALT, its own memory limit) for the flows steered to it. What the shards share
//! is the configuration and the rate: every [`SYNC_INTERVAL`] (200 µs, Linux's fixed value) a
//! shard, when it is next dequeued, counts the shards that are *active* and shapes at the
//! configured rate divided by that count. A shard counts itself, and each other shard that holds
//! packets or has handed one out since this shard's previous sync (Linux's rule: its queue
//! length, or its last dequeue time after this shard's last check). Only the shaper's rate
//! changes at a sync: COBALT's targets, the quanta and the memory limit stay those derived from
//! the configured rate, as in Linux. `autorate-ingress` is refused, as Linux refuses it.
//!
//! The sync reads what the other shards publish ([`ShardActivity`]) and nothing else, so shards
//! may run on different threads: the engine is sans-IO and deterministic (the time comes from
//! the caller, the peers' activity through [`ShardPeers`]), and whoever runs the shards decides
//! how activity travels (in one thread, [`CakeMq`] reads the other shards directly; the
//! dataplane publishes it in atomics, one cache line per shard).
//!
//! Where the result differs from one CAKE at the same rate (docs/cake-mq.md has the figures):
//! - flow and host isolation hold among the flows of one shard, not across shards: two hosts
//!   whose flows hash to different shards each get their shard's share, whatever their numbers
//!   of flows;
//! - the rate is split equally among active shards, not by demand: a shard carrying a trickle
//!   (a packet every sync interval is enough) takes a whole share, and the aggregate falls short
//!   of the setting by what that shard leaves unused;
//! - a shard learns that another became active or idle only at its own next sync, so after each
//!   change the aggregate is off by up to one share for up to one sync interval (more for a shard
//!   that is dequeued less often than that);
//! - one active flow, or any number on one shard, gets the whole rate, as with one CAKE.

use crate::hash::FlowHasher;
use crate::params::DerivedParams;
use crate::stats::{CakeStats, TinStats};
use crate::tc::TcError;
use crate::{Cake, CakeConfig};
use qdisc::packet::Buffers;
use qdisc::{
    Counter, Dequeue, Dropped, Duration, Instant, NoShaper, Packet, Qdisc, QdiscStats, Rate, Rng,
};

/// How often a shard recounts the active shards: Linux's fixed 200 µs.
pub const SYNC_INTERVAL: Duration = Duration::from_micros(200);

/// The most shards a [`CakeMq`] may have (Linux allows one per transmit queue, at most 4,096).
pub const MAX_QUEUES: usize = 4096;

/// Why a cake_mq could not be built.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MqError {
    /// The CAKE options did not parse (tc's wording).
    Config(TcError),
    /// `autorate-ingress` was given: Linux refuses it for cake_mq, since each shard would
    /// estimate the rate of its own share of the traffic.
    Autorate,
    /// The number of queues is 0 or above [`MAX_QUEUES`].
    Queues(usize),
}

impl std::fmt::Display for MqError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MqError::Config(e) => write!(f, "{e}"),
            MqError::Autorate => f.write_str(
                "autorate-ingress is not supported by cake_mq (each queue would estimate only its \
                 own share of the link); set the bandwidth, or use cake on one queue",
            ),
            MqError::Queues(n) => write!(f, "cake_mq needs 1 to {MAX_QUEUES} queues (got {n})"),
        }
    }
}

impl std::error::Error for MqError {}

/// The CAKE configuration of `cake_mq ARGS` (every `tc-cake` option except `autorate-ingress`).
pub fn config_from_tc_args(args: &[&str]) -> Result<CakeConfig, MqError> {
    let cfg = CakeConfig::from_tc_args(args).map_err(MqError::Config)?;
    if cfg.autorate {
        return Err(MqError::Autorate);
    }
    Ok(cfg)
}

/// What a shard publishes for the others' syncs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ShardActivity {
    /// Packets queued in the shard.
    pub backlog: u64,
    /// When the shard last handed a packet out (`None`: never).
    pub last_dequeue: Option<Instant>,
}

/// The other shards of a group, as a shard's sync sees them.
pub trait ShardPeers {
    /// Calls `f` once with the activity of each other shard of the group, as last published.
    fn for_each_peer(&self, f: &mut dyn FnMut(ShardActivity));
}

impl ShardPeers for [ShardActivity] {
    fn for_each_peer(&self, f: &mut dyn FnMut(ShardActivity)) {
        self.iter().copied().for_each(f);
    }
}

/// No other shard (a group of one).
impl ShardPeers for () {
    fn for_each_peer(&self, _f: &mut dyn FnMut(ShardActivity)) {}
}

/// One shard of a cake_mq group: a CAKE instance plus its sync state. Drive it like a
/// [`Qdisc`], except that [`dequeue`](Shard::dequeue) also takes the peers, whose activity it
/// reads when a sync is due.
#[derive(Debug)]
pub struct Shard {
    cake: Cake,
    /// The group's configured rate, bytes/s (0 = unlimited).
    configured: u64,
    sync_interval: Duration,
    last_sync: Option<Instant>,
    /// Shards counted active at the last sync, this one included (0 before the first).
    active: u32,
    last_dequeue: Option<Instant>,
}

impl Shard {
    /// A shard of a group configured with `cfg` (its rate is the group's), with randomness
    /// seeded by `seed` (give each shard its own). It shapes at the full rate until its first
    /// sync, at its first dequeue.
    pub fn new(cfg: CakeConfig, seed: u64) -> Result<Shard, MqError> {
        if cfg.autorate {
            return Err(MqError::Autorate);
        }
        Ok(Shard {
            configured: cfg.rate_bps,
            cake: Cake::new(cfg, seed),
            sync_interval: SYNC_INTERVAL,
            last_sync: None,
            active: 0,
            last_dequeue: None,
        })
    }

    /// Changes the sync interval (default [`SYNC_INTERVAL`]); for studying its effect.
    pub fn set_sync_interval(&mut self, d: Duration) {
        self.sync_interval = d;
    }

    /// The CAKE instance (statistics, configuration).
    pub fn cake(&self) -> &Cake {
        &self.cake
    }

    /// The group's configured rate, bytes/s (0 = unlimited).
    pub fn configured_rate(&self) -> u64 {
        self.configured
    }

    /// The rate this shard shapes at now, bytes/s: its share of the configured rate.
    pub fn share(&self) -> u64 {
        self.cake.shaper_rate()
    }

    /// Shards counted active at the last sync, this one included (0 before the first sync);
    /// Linux reports it as `active_queues`.
    pub fn active_shards(&self) -> u32 {
        self.active
    }

    /// What this shard publishes for the others.
    pub fn activity(&self) -> ShardActivity {
        ShardActivity {
            backlog: self.cake.backlog().packets,
            last_dequeue: self.last_dequeue,
        }
    }

    /// Whether a sync is due at `now` (one sync interval after the last, or none yet).
    pub fn sync_due(&self, now: Instant) -> bool {
        match self.last_sync {
            Some(t) => now - t >= self.sync_interval,
            None => true,
        }
    }

    /// Counts the active shards (this one and each peer that holds packets or dequeued since
    /// this shard's previous sync) and shapes at the configured rate divided by that count from
    /// now on. [`dequeue`](Self::dequeue) calls it when due; call it directly to sync at other
    /// times. Visits each peer once; allocates nothing.
    pub fn sync(&mut self, now: Instant, peers: &(impl ShardPeers + ?Sized)) {
        let since = self.last_sync;
        let mut n: u32 = 1;
        peers.for_each_peer(&mut |a| {
            if a.backlog > 0 || a.last_dequeue > since {
                n = n.saturating_add(1);
            }
        });
        self.last_sync = Some(now);
        self.active = n;
        self.apply_share();
    }

    fn apply_share(&mut self) {
        let share = match self.configured {
            0 => 0,
            r => (r / u64::from(self.active.max(1))).max(1),
        };
        self.cake.set_shaper_rate(share);
    }

    /// Offers `pkt` at `now` (see [`Qdisc::enqueue`]).
    pub fn enqueue(&mut self, now: Instant, pkt: Packet, drops: &mut Vec<Dropped>) {
        self.cake.enqueue(now, pkt, drops);
    }

    /// Offers `pkt` at `now`, segments' buffers from `bufs` (see [`Qdisc::enqueue_with`]).
    pub fn enqueue_with(
        &mut self,
        now: Instant,
        pkt: Packet,
        drops: &mut Vec<Dropped>,
        bufs: &mut dyn Buffers,
    ) {
        self.cake.enqueue_with(now, pkt, drops, bufs);
    }

    /// Takes the next packet at `now`, first syncing with `peers` when a sync is due (see
    /// [`Qdisc::dequeue`]).
    pub fn dequeue(
        &mut self,
        now: Instant,
        peers: &(impl ShardPeers + ?Sized),
        drops: &mut Vec<Dropped>,
    ) -> Dequeue {
        if self.sync_due(now) {
            self.sync(now, peers);
        }
        let d = self.cake.dequeue(now, drops);
        if matches!(d, Dequeue::Packet(_)) {
            self.last_dequeue = Some(now);
        }
        d
    }

    /// Sets the group's configured rate (bytes/s, `None` = unlimited) for this shard: CAKE is
    /// reconfigured for it as [`Cake::set_rate`](Qdisc::set_rate) does, then shapes at its
    /// share under the count of the last sync at once (Linux runs every shard at the full new
    /// rate until its next sync). Nothing queued is lost.
    pub fn set_rate(&mut self, rate: Option<Rate>) {
        self.configured = rate.map_or(0, Rate::bytes_per_s);
        // CAKE accepts every rate.
        let _ = self.cake.set_rate(rate);
        if self.active > 0 {
            self.apply_share();
        }
    }

    /// The counters (see [`Qdisc::stats`]).
    pub fn stats(&self) -> QdiscStats {
        self.cake.stats()
    }

    /// Frees storage kept from a larger backlog (see [`Qdisc::shrink`]).
    pub fn shrink(&mut self) -> usize {
        self.cake.shrink()
    }
}

/// The statistics of a cake_mq group configured with `cfg`, from those of its shards: counters
/// summed (packets, bytes, drops, marks, backlog, flows, hash hits, memory used and limit, each
/// shard having its own); per tin the threshold, target and interval derived from the
/// configured rate, the largest of the shards' delay averages and packet lengths; the
/// smallest and largest packet sizes seen by any shard.
pub fn sum_stats(cfg: &CakeConfig, shards: &[CakeStats]) -> CakeStats {
    let params = DerivedParams::new(cfg);
    let mut q = QdiscStats::default();
    let mut out = CakeStats {
        capacity_estimate: cfg.rate_bps,
        min_network_size: u32::MAX,
        min_adj_size: u32::MAX,
        tins: (0..params.tin_count)
            .map(|i| {
                let p = &params.tins[i];
                TinStats {
                    threshold_rate: p.rate.bytes_per_sec,
                    target_us: p.cobalt.target / 1_000,
                    interval_us: p.cobalt.interval / 1_000,
                    flow_quantum: p.flow_quantum,
                    ..TinStats::default()
                }
            })
            .collect(),
        ..CakeStats::default()
    };
    for s in shards {
        add_stats(&mut q, &s.qdisc);
        out.memory_used += s.memory_used;
        out.memory_limit += s.memory_limit;
        if s.min_network_size != 0 {
            out.min_network_size = out.min_network_size.min(s.min_network_size);
        }
        if s.min_adj_size != 0 {
            out.min_adj_size = out.min_adj_size.min(s.min_adj_size);
        }
        out.max_network_size = out.max_network_size.max(s.max_network_size);
        out.max_adj_size = out.max_adj_size.max(s.max_adj_size);
        out.avg_hdr_offset = out.avg_hdr_offset.max(s.avg_hdr_offset);
        for (t, st) in out.tins.iter_mut().zip(&s.tins) {
            t.peak_delay_us = t.peak_delay_us.max(st.peak_delay_us);
            t.avg_delay_us = t.avg_delay_us.max(st.avg_delay_us);
            t.base_delay_us = t.base_delay_us.max(st.base_delay_us);
            t.backlog_bytes += st.backlog_bytes;
            t.packets += st.packets;
            t.bytes += st.bytes;
            t.way_indirect_hits += st.way_indirect_hits;
            t.way_misses += st.way_misses;
            t.way_collisions += st.way_collisions;
            t.drops += st.drops;
            t.ecn_marks += st.ecn_marks;
            t.ack_drops += st.ack_drops;
            t.sparse_flows += st.sparse_flows;
            t.bulk_flows += st.bulk_flows;
            t.unresponsive_flows += st.unresponsive_flows;
            t.max_pkt_len = t.max_pkt_len.max(st.max_pkt_len);
        }
    }
    for m in [&mut out.min_network_size, &mut out.min_adj_size] {
        if *m == u32::MAX {
            *m = 0;
        }
    }
    out.qdisc = q;
    out
}

/// Adds `b`'s counters to `a`'s (the counters of a group are the sums of its queues').
pub fn add_stats(a: &mut QdiscStats, b: &QdiscStats) {
    let add = |x: &mut Counter, y: Counter| {
        x.packets += y.packets;
        x.bytes += y.bytes;
    };
    add(&mut a.enqueued, b.enqueued);
    add(&mut a.dequeued, b.dequeued);
    add(&mut a.backlog, b.backlog);
    for (x, &y) in a.drops.iter_mut().zip(&b.drops) {
        add(x, y);
    }
    a.ecn_marks += b.ecn_marks;
    a.overlimits += b.overlimits;
}

/// A whole cake_mq group in one thread: the shards, the steering of packets to them by flow
/// hash, and the syncs, each shard reading the others directly. Implements [`Qdisc`] for a
/// single consumer (the simulator, tests): [`dequeue`](Qdisc::dequeue) serves the shards in
/// turn, as a NIC serves its transmit queues. Where each queue has its own consumer, use
/// [`enqueue_to`](Self::enqueue_to) and [`dequeue_from`](Self::dequeue_from), or [`Shard`]s on
/// their own threads.
#[derive(Debug)]
pub struct CakeMq {
    cfg: CakeConfig,
    shards: Vec<Shard>,
    hasher: FlowHasher,
    /// The shard [`Qdisc::dequeue`] tries first.
    turn: usize,
    stats_scratch: Vec<CakeStats>,
}

/// The seed of shard `i` of a group seeded with `seed`.
pub fn shard_seed(seed: u64, i: usize) -> u64 {
    seed ^ (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

impl CakeMq {
    /// A group of `queues` shards configured with `cfg`; all randomness (the steering key and
    /// each shard's, see [`shard_seed`]) drawn from `seed`.
    pub fn new(cfg: CakeConfig, queues: usize, seed: u64) -> Result<CakeMq, MqError> {
        if queues == 0 || queues > MAX_QUEUES {
            return Err(MqError::Queues(queues));
        }
        let shards = (0..queues)
            .map(|i| Shard::new(cfg.clone(), shard_seed(seed, i)))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(CakeMq {
            hasher: FlowHasher::new(&mut Rng::new(seed)),
            cfg,
            shards,
            turn: 0,
            stats_scratch: Vec::new(),
        })
    }

    /// `cake_mq ARGS` (tc-cake options, see [`config_from_tc_args`]) with `queues` shards.
    pub fn from_tc_args(args: &[&str], queues: usize, seed: u64) -> Result<CakeMq, MqError> {
        Self::new(config_from_tc_args(args)?, queues, seed)
    }

    /// The configuration shared by the shards (with the configured rate).
    pub fn config(&self) -> &CakeConfig {
        &self.cfg
    }

    /// The shards.
    pub fn shards(&self) -> &[Shard] {
        &self.shards
    }

    /// Changes every shard's sync interval (default [`SYNC_INTERVAL`]).
    pub fn set_sync_interval(&mut self, d: Duration) {
        for s in &mut self.shards {
            s.set_sync_interval(d);
        }
    }

    /// The shard [`Qdisc::enqueue`] steers `pkt` to: its flow hash (both directions of a flow
    /// alike) modulo the number of shards; packets that are not IP go to shard 0.
    pub fn shard_for(&self, pkt: &Packet) -> usize {
        let h = pkt.headers();
        match h.ip {
            Some(ip) => self.hasher.flow_hash(&ip.tuple) as usize % self.shards.len(),
            None => 0,
        }
    }

    /// Offers `pkt` to shard `shard` (taken modulo the number of shards) at `now`.
    pub fn enqueue_to(
        &mut self,
        shard: usize,
        now: Instant,
        pkt: Packet,
        drops: &mut Vec<Dropped>,
    ) {
        let n = self.shards.len();
        self.shards[shard % n].enqueue(now, pkt, drops);
    }

    /// Dequeues from shard `shard` (modulo the number of shards) at `now`, syncing it with the
    /// others first when due.
    pub fn dequeue_from(
        &mut self,
        shard: usize,
        now: Instant,
        drops: &mut Vec<Dropped>,
    ) -> Dequeue {
        let i = shard % self.shards.len();
        let (before, rest) = self.shards.split_at_mut(i);
        let (me, after) = rest.split_at_mut(1);
        let peers = Peers {
            before: &*before,
            after: &*after,
        };
        me[0].dequeue(now, &peers, drops)
    }

    /// Everything `tc -s qdisc show` reports for the group, summed over the shards
    /// ([`sum_stats`]). Allocates; for statistics, not the packet path.
    pub fn cake_stats(&mut self) -> CakeStats {
        self.stats_scratch.clear();
        self.stats_scratch
            .extend(self.shards.iter().map(|s| s.cake.cake_stats()));
        sum_stats(&self.cfg, &self.stats_scratch)
    }
}

/// The shards around the one being synced.
struct Peers<'a> {
    before: &'a [Shard],
    after: &'a [Shard],
}

impl ShardPeers for Peers<'_> {
    fn for_each_peer(&self, f: &mut dyn FnMut(ShardActivity)) {
        for s in self.before.iter().chain(self.after) {
            f(s.activity());
        }
    }
}

impl Qdisc for CakeMq {
    /// Steers `pkt` to its shard ([`CakeMq::shard_for`]).
    fn enqueue(&mut self, now: Instant, pkt: Packet, drops: &mut Vec<Dropped>) {
        let i = self.shard_for(&pkt);
        self.shards[i].enqueue(now, pkt, drops);
    }

    /// As `enqueue`, segments' buffers from `bufs`.
    fn enqueue_with(
        &mut self,
        now: Instant,
        pkt: Packet,
        drops: &mut Vec<Dropped>,
        bufs: &mut dyn Buffers,
    ) {
        let i = self.shard_for(&pkt);
        self.shards[i].enqueue_with(now, pkt, drops, bufs);
    }

    /// Serves the shards in turn, starting after the one that sent last: the first packet any
    /// shard releases at `now`, else the earliest release time among them.
    fn dequeue(&mut self, now: Instant, drops: &mut Vec<Dropped>) -> Dequeue {
        let n = self.shards.len();
        let mut earliest: Option<Instant> = None;
        for k in 0..n {
            let i = (self.turn + k) % n;
            if self.shards[i].cake.backlog().packets == 0 {
                continue;
            }
            match self.dequeue_from(i, now, drops) {
                Dequeue::Packet(p) => {
                    self.turn = (i + 1) % n;
                    return Dequeue::Packet(p);
                }
                Dequeue::NotBefore(t) => earliest = Some(earliest.map_or(t, |e| e.min(t))),
                Dequeue::Empty => {}
            }
        }
        earliest.map_or(Dequeue::Empty, Dequeue::NotBefore)
    }

    fn set_rate(&mut self, rate: Option<Rate>) -> Result<(), NoShaper> {
        self.cfg.rate_bps = rate.map_or(0, Rate::bytes_per_s);
        for s in &mut self.shards {
            s.set_rate(rate);
        }
        Ok(())
    }

    fn stats(&self) -> QdiscStats {
        let mut q = QdiscStats::default();
        for s in &self.shards {
            add_stats(&mut q, &s.stats());
        }
        q
    }

    fn kind(&self) -> &'static str {
        "cake_mq"
    }

    fn shrink(&mut self) -> usize {
        self.shards.iter_mut().map(Shard::shrink).sum()
    }
}
