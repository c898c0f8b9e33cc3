//! CAKE's statistics: everything `tc -s qdisc show` prints for cake. Filled by
//! [`crate::Cake::cake_stats`]; printed by [`crate::tc`] in tc's text and JSON forms.

use qdisc::QdiscStats;

/// Per-tin statistics, in kernel tin index order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TinStats {
    /// The tin's shaper threshold, bytes/s (0 = unlimited).
    pub threshold_rate: u64,
    /// COBALT target, µs.
    pub target_us: u64,
    /// COBALT interval, µs.
    pub interval_us: u64,
    /// Peak delay EWMA, µs.
    pub peak_delay_us: u64,
    /// Average delay EWMA, µs.
    pub avg_delay_us: u64,
    /// Base ("sparse") delay EWMA, µs.
    pub base_delay_us: u64,
    /// Bytes queued in this tin.
    pub backlog_bytes: u64,
    /// Packets enqueued to this tin.
    pub packets: u64,
    /// Bytes enqueued to this tin.
    pub bytes: u64,
    /// Indirect hits in the set-associative hash.
    pub way_indirect_hits: u64,
    /// Misses (new flow found an empty way).
    pub way_misses: u64,
    /// Collisions (no free way).
    pub way_collisions: u64,
    /// Packets dropped (AQM and overflow; not ACK-filter drops).
    pub drops: u64,
    /// Packets marked ECN CE.
    pub ecn_marks: u64,
    /// ACKs dropped by the ACK filter.
    pub ack_drops: u64,
    /// Sparse flows (sparse and decaying).
    pub sparse_flows: u32,
    /// Bulk flows.
    pub bulk_flows: u32,
    /// Unresponsive flows (BLUE engaged).
    pub unresponsive_flows: u32,
    /// Largest adjusted packet length seen.
    pub max_pkt_len: u32,
    /// Per-flow quantum.
    pub flow_quantum: u32,
}

/// Qdisc-level CAKE statistics.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CakeStats {
    /// The generic counters.
    pub qdisc: QdiscStats,
    /// The rate estimate ("capacity estimate"), bytes/s.
    pub capacity_estimate: u64,
    /// Peak memory used, bytes.
    pub memory_used: u64,
    /// Memory limit, bytes.
    pub memory_limit: u64,
    /// Smallest network-layer size seen (0 if none yet).
    pub min_network_size: u32,
    /// Largest network-layer size seen.
    pub max_network_size: u32,
    /// Smallest overhead-adjusted size seen (0 if none yet).
    pub min_adj_size: u32,
    /// Largest overhead-adjusted size seen.
    pub max_adj_size: u32,
    /// Average network header offset.
    pub avg_hdr_offset: u32,
    /// Per-tin statistics, kernel index order; `tins.len()` = tin count.
    pub tins: Vec<TinStats>,
}

/// Per-flow class statistics (`tc -s class show` for a cake flow).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowStats {
    /// DRR deficit, bytes.
    pub deficit: i32,
    /// COBALT count.
    pub count: u32,
    /// COBALT dropping state.
    pub dropping: bool,
    /// Time to next drop, ns (negative if in the past).
    pub drop_next_ns: i64,
    /// BLUE drop probability (Q0.32).
    pub p_drop: u32,
    /// Time since BLUE last changed, ns.
    pub blue_timer_ns: i64,
    /// Packets queued.
    pub qlen: u32,
    /// Bytes queued.
    pub backlog: u32,
}
