//! CAKE's configuration: what `tc qdisc add ... cake ARGS` sets. Validated values only; parsing
//! tc's argument syntax lives in [`crate::tc`].

/// DiffServ tin layout (`TCA_CAKE_DIFFSERV_MODE`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum DiffservMode {
    /// Three tins: Bulk, Best Effort, Voice (the default).
    #[default]
    Diffserv3,
    /// Four tins: Bulk, Best Effort, Video, Voice.
    Diffserv4,
    /// Eight tins by DSCP class.
    Diffserv8,
    /// One tin.
    Besteffort,
    /// Eight tins by the legacy IP precedence bits (DSCP >> 3).
    Precedence,
}

impl DiffservMode {
    /// Every mode.
    pub const ALL: [DiffservMode; 5] = [
        DiffservMode::Diffserv3,
        DiffservMode::Diffserv4,
        DiffservMode::Diffserv8,
        DiffservMode::Besteffort,
        DiffservMode::Precedence,
    ];

    /// Number of tins.
    pub fn tin_count(self) -> usize {
        match self {
            DiffservMode::Besteffort => 1,
            DiffservMode::Diffserv3 => 3,
            DiffservMode::Diffserv4 => 4,
            DiffservMode::Diffserv8 | DiffservMode::Precedence => 8,
        }
    }
    /// The netlink enum value.
    pub fn netlink(self) -> u32 {
        match self {
            DiffservMode::Diffserv3 => 0,
            DiffservMode::Diffserv4 => 1,
            DiffservMode::Diffserv8 => 2,
            DiffservMode::Besteffort => 3,
            DiffservMode::Precedence => 4,
        }
    }
}

/// Flow isolation mode (`TCA_CAKE_FLOW_MODE`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum FlowMode {
    /// All traffic in one queue per tin.
    Flowblind,
    /// Fairness among source hosts.
    Srchost,
    /// Fairness among destination hosts.
    Dsthost,
    /// Fairness among host pairs.
    Hosts,
    /// Fairness among 5-tuples.
    Flows,
    /// Flows, with fairness among source hosts first.
    DualSrchost,
    /// Flows, with fairness among destination hosts first.
    DualDsthost,
    /// Flows, with fairness among source and destination hosts (the default).
    #[default]
    TripleIsolate,
}

impl FlowMode {
    /// Every mode.
    pub const ALL: [FlowMode; 8] = [
        FlowMode::Flowblind,
        FlowMode::Srchost,
        FlowMode::Dsthost,
        FlowMode::Hosts,
        FlowMode::Flows,
        FlowMode::DualSrchost,
        FlowMode::DualDsthost,
        FlowMode::TripleIsolate,
    ];

    /// The netlink enum value (without the NAT flag).
    pub fn netlink(self) -> u32 {
        match self {
            FlowMode::Flowblind => 0,
            FlowMode::Srchost => 1,
            FlowMode::Dsthost => 2,
            FlowMode::Hosts => 3,
            FlowMode::Flows => 4,
            FlowMode::DualSrchost => 5,
            FlowMode::DualDsthost => 6,
            FlowMode::TripleIsolate => 7,
        }
    }
    /// Whether the mode keys queues (partly) on the source host.
    pub fn uses_src_host(self) -> bool {
        matches!(self, FlowMode::Srchost | FlowMode::Hosts) || self.dual_src()
    }
    /// Whether the mode keys queues (partly) on the destination host.
    pub fn uses_dst_host(self) -> bool {
        matches!(self, FlowMode::Dsthost | FlowMode::Hosts) || self.dual_dst()
    }
    /// Whether the mode hashes the full 5-tuple.
    pub fn uses_flows(self) -> bool {
        matches!(
            self,
            FlowMode::Flows
                | FlowMode::DualSrchost
                | FlowMode::DualDsthost
                | FlowMode::TripleIsolate
        )
    }
    /// Whether host-load quantum scaling uses source host bulk counts.
    pub fn dual_src(self) -> bool {
        matches!(self, FlowMode::DualSrchost | FlowMode::TripleIsolate)
    }
    /// Whether host-load quantum scaling uses destination host bulk counts.
    pub fn dual_dst(self) -> bool {
        matches!(self, FlowMode::DualDsthost | FlowMode::TripleIsolate)
    }
}

/// Cell framing compensation (`TCA_CAKE_ATM`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum AtmMode {
    /// No framing compensation (`noatm`).
    #[default]
    None,
    /// ATM cells: 48 payload bytes in 53-byte cells.
    Atm,
    /// PTM (VDSL2) 64/65 encoding.
    Ptm,
}

/// ACK filter mode (`TCA_CAKE_ACK_FILTER`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum AckFilterMode {
    /// No filtering (`no-ack-filter`).
    #[default]
    None,
    /// Conservative (`ack-filter`).
    Filter,
    /// Aggressive (`ack-filter-aggressive`).
    Aggressive,
}

/// A complete, validated CAKE configuration.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CakeConfig {
    /// Shaped rate in bytes per second; 0 = unlimited.
    pub rate_bps: u64,
    /// Estimate the rate from arrivals (`autorate-ingress`).
    pub autorate: bool,
    /// Tin layout.
    pub diffserv: DiffservMode,
    /// Flow isolation.
    pub flow_mode: FlowMode,
    /// Hash on pre-NAT addresses.
    pub nat: bool,
    /// Clear DSCP after classifying.
    pub wash: bool,
    /// Ingress mode (drops count against the shaper).
    pub ingress: bool,
    /// ACK filter.
    pub ack_filter: AckFilterMode,
    /// Split GSO super-packets into segments.
    pub split_gso: bool,
    /// Per-packet overhead in bytes (-64..=256), applied when `overhead_set`.
    pub overhead: i32,
    /// True when an overhead was configured (any overhead keyword; false for `raw` or none), so
    /// the MAC header is subtracted before the overhead is added.
    pub overhead_set: bool,
    /// Whether `raw` was given explicitly.
    pub raw: bool,
    /// Cell framing.
    pub atm: AtmMode,
    /// Minimum packet unit after overhead (0..=256).
    pub mpu: u32,
    /// RTT in microseconds (interval).
    pub rtt_us: u64,
    /// AQM target in microseconds.
    pub target_us: u64,
    /// Memory limit in bytes; `None` derives it.
    pub memlimit: Option<u32>,
    /// fwmark mask for tin override (0 = off).
    pub fwmark_mask: u32,
    /// The qdisc handle major number (priority overrides match `major == handle`).
    pub handle_major: u16,
    /// psched MTU: device MTU plus hard header length (1514 on Ethernet).
    pub psched_mtu: u32,
}

impl Default for CakeConfig {
    fn default() -> Self {
        CakeConfig {
            rate_bps: 0,
            autorate: false,
            diffserv: DiffservMode::default(),
            flow_mode: FlowMode::default(),
            nat: false,
            wash: false,
            ingress: false,
            ack_filter: AckFilterMode::None,
            split_gso: true,
            overhead: 0,
            overhead_set: false,
            raw: false,
            atm: AtmMode::None,
            mpu: 0,
            rtt_us: 100_000,
            target_us: 5_000,
            memlimit: None,
            fwmark_mask: 0,
            handle_major: 0x8001,
            psched_mtu: qdisc::FULL_FRAME,
        }
    }
}

impl CakeConfig {
    /// The default configuration shaped at `rate_bps` bytes per second.
    pub fn with_rate(rate_bps: u64) -> Self {
        CakeConfig {
            rate_bps,
            ..CakeConfig::default()
        }
    }
}
