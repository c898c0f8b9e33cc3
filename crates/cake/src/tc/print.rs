//! `tc qdisc show` / `tc -s qdisc show` text for cake.

use std::fmt::{self, Write as _};

use qdisc::tc_units::{format_rate, format_size, format_time};

use crate::config::{AckFilterMode, AtmMode, CakeConfig, DiffservMode, FlowMode};
use crate::params::DerivedParams;
use crate::stats::{CakeStats, TinStats};

/// What `tc qdisc show` prints before the options: `qdisc cake HANDLE: root refcnt N`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QdiscHeader {
    /// Handle major number (printed in hex, e.g. `8001:`).
    pub handle_major: u16,
    /// The reference count tc shows (2 for a root qdisc on a single-queue device).
    pub refcnt: u32,
}

impl QdiscHeader {
    /// The header for `cfg`'s handle on a single-queue device (`refcnt 2`).
    pub fn for_config(cfg: &CakeConfig) -> Self {
        QdiscHeader { handle_major: cfg.handle_major, refcnt: 2 }
    }
}

/// tc's name for a diffserv mode.
pub(crate) fn diffserv_name(d: DiffservMode) -> &'static str {
    match d {
        DiffservMode::Diffserv3 => "diffserv3",
        DiffservMode::Diffserv4 => "diffserv4",
        DiffservMode::Diffserv8 => "diffserv8",
        DiffservMode::Besteffort => "besteffort",
        DiffservMode::Precedence => "precedence",
    }
}

/// tc's name for a flow mode.
pub(crate) fn flow_mode_name(f: FlowMode) -> &'static str {
    match f {
        FlowMode::Flowblind => "flowblind",
        FlowMode::Srchost => "srchost",
        FlowMode::Dsthost => "dsthost",
        FlowMode::Hosts => "hosts",
        FlowMode::Flows => "flows",
        FlowMode::DualSrchost => "dual-srchost",
        FlowMode::DualDsthost => "dual-dsthost",
        FlowMode::TripleIsolate => "triple-isolate",
    }
}

/// tc's framing word, or `None` where tc prints none (raw with no framing).
pub(crate) fn atm_name(cfg: &CakeConfig) -> Option<&'static str> {
    match cfg.atm {
        AtmMode::Atm => Some("atm"),
        AtmMode::Ptm => Some("ptm"),
        AtmMode::None if cfg.overhead_set => Some("noatm"),
        AtmMode::None => None,
    }
}

/// The kernel's RTT as reported (µs, u32).
pub(crate) fn rtt_u32(cfg: &CakeConfig) -> u32 {
    u32::try_from(cfg.rtt_us).unwrap_or(u32::MAX)
}

/// The options exactly as `tc qdisc show` prints them for cake, without the trailing space, e.g.
/// `bandwidth 20Mbit diffserv3 triple-isolate nonat nowash no-ack-filter split-gso rtt 100ms raw
/// overhead 0`. Words appear in tc's fixed order; `raw` appears when no overhead is configured.
/// Rates and times are rounded as tc rounds them, so this is for display, not a lossless form.
pub fn options_text(cfg: &CakeConfig) -> String {
    let mut w: Vec<String> = Vec::with_capacity(20);
    if cfg.rate_bps == 0 {
        w.push("bandwidth unlimited".into());
    } else {
        w.push(format!("bandwidth {}", format_rate(cfg.rate_bps)));
    }
    if cfg.autorate {
        w.push("autorate-ingress".into());
    }
    w.push(diffserv_name(cfg.diffserv).into());
    w.push(flow_mode_name(cfg.flow_mode).into());
    w.push(if cfg.nat { "nat" } else { "nonat" }.into());
    w.push(if cfg.wash { "wash" } else { "nowash" }.into());
    if cfg.ingress {
        w.push("ingress".into());
    }
    w.push(
        match cfg.ack_filter {
            AckFilterMode::Aggressive => "ack-filter-aggressive",
            AckFilterMode::Filter => "ack-filter",
            AckFilterMode::None => "no-ack-filter",
        }
        .into(),
    );
    w.push(if cfg.split_gso { "split-gso" } else { "no-split-gso" }.into());
    if cfg.rtt_us != 0 {
        w.push(format!("rtt {}", format_time(rtt_u32(cfg))));
    }
    if !cfg.overhead_set {
        w.push("raw".into());
    }
    if let Some(a) = atm_name(cfg) {
        w.push(a.into());
    }
    w.push(format!("overhead {}", cfg.overhead));
    if cfg.mpu != 0 {
        w.push(format!("mpu {}", cfg.mpu));
    }
    if let Some(m) = cfg.memlimit.filter(|&m| m != 0) {
        w.push(format!("memlimit {}", format_size(m)));
    }
    if cfg.fwmark_mask != 0 {
        w.push(format!("fwmark {:#x}", cfg.fwmark_mask));
    }
    w.join(" ")
}

impl CakeConfig {
    /// The options as `tc qdisc show` prints them (see [`options_text`]).
    pub fn to_tc_args(&self) -> String {
        options_text(self)
    }
}

impl fmt::Display for CakeConfig {
    /// Writes [`options_text`].
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&options_text(self))
    }
}

/// Kernel tin indices in the order tc prints them (the kernel's `tin_order`): diffserv3 Bulk,
/// Best Effort, Voice = 1, 0, 2; diffserv4 Bulk, Best Effort, Video, Voice = 1, 0, 2, 3; other
/// modes in index order.
pub fn user_tin_order(d: DiffservMode) -> &'static [usize] {
    match d {
        DiffservMode::Diffserv3 => &[1, 0, 2],
        DiffservMode::Diffserv4 => &[1, 0, 2, 3],
        DiffservMode::Besteffort => &[0],
        DiffservMode::Diffserv8 | DiffservMode::Precedence => &[0, 1, 2, 3, 4, 5, 6, 7],
    }
}

/// The tins of `stats` in user order (any tin the mode expects but `stats` lacks is skipped).
pub(crate) fn ordered_tins<'a>(cfg: &CakeConfig, stats: &'a CakeStats) -> Vec<&'a TinStats> {
    user_tin_order(cfg.diffserv).iter().filter_map(|&i| stats.tins.get(i)).collect()
}

fn u32_sat(v: u64) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

impl CakeStats {
    /// The statistics of a freshly attached cake with configuration `cfg`: all counters zero,
    /// memory limit, capacity estimate (the configured rate), per-tin thresholds, targets,
    /// intervals and quanta from [`DerivedParams`], and the kernel's untouched size extremes
    /// (min 65535, max 0).
    pub fn fresh(cfg: &CakeConfig) -> CakeStats {
        let p = DerivedParams::new(cfg);
        let tins = p.tins[..p.tin_count]
            .iter()
            .map(|t| TinStats {
                threshold_rate: t.rate.bytes_per_sec,
                target_us: t.cobalt.target / 1_000,
                interval_us: t.cobalt.interval / 1_000,
                flow_quantum: t.flow_quantum,
                ..TinStats::default()
            })
            .collect();
        CakeStats {
            capacity_estimate: cfg.rate_bps,
            memory_limit: u64::from(p.buffer_limit),
            min_network_size: 65_535,
            min_adj_size: 65_535,
            tins,
            ..CakeStats::default()
        }
    }
}

/// Same as [`CakeStats::fresh`].
pub fn fresh_stats(cfg: &CakeConfig) -> CakeStats {
    CakeStats::fresh(cfg)
}

/// Exactly what `tc -s qdisc show` prints for one cake qdisc: the header line with the options,
/// the generic counters, cake's qdisc statistics and the per-tin table in user order, ending
/// with the blank line tc prints after each qdisc.
pub fn stats_text(cfg: &CakeConfig, stats: &CakeStats, header: QdiscHeader) -> String {
    let mut s = String::with_capacity(2048);
    let q = &stats.qdisc;
    let drops = q.dropped_total().packets;
    // Writing to a String cannot fail.
    let _ = writeln!(
        s,
        "qdisc cake {:x}: root refcnt {} {} ",
        header.handle_major,
        header.refcnt,
        options_text(cfg)
    );
    let _ = writeln!(
        s,
        " Sent {} bytes {} pkt (dropped {}, overlimits {} requeues 0) ",
        q.dequeued.bytes, q.dequeued.packets, drops, q.overlimits
    );
    let _ = writeln!(
        s,
        " backlog {} {}p requeues 0",
        format_size(u32_sat(q.backlog.bytes)),
        q.backlog.packets
    );
    let _ = writeln!(
        s,
        " memory used: {} of {}",
        format_size(u32_sat(stats.memory_used)),
        format_size(u32_sat(stats.memory_limit))
    );
    let _ = writeln!(s, " capacity estimate: {}", format_rate(stats.capacity_estimate));
    let _ = writeln!(
        s,
        " min/max network layer size: {:>12} /{:>8}",
        stats.min_network_size, stats.max_network_size
    );
    let _ = writeln!(
        s,
        " min/max overhead-adjusted size: {:>8} /{:>8}",
        stats.min_adj_size, stats.max_adj_size
    );
    let _ = writeln!(s, " average network hdr offset: {:>12}\n", stats.avg_hdr_offset);
    let tins = ordered_tins(cfg, stats);
    if !tins.is_empty() {
        match tins.len() {
            3 => s.push_str("                   Bulk  Best Effort        Voice\n"),
            4 => s.push_str("                   Bulk  Best Effort        Video        Voice\n"),
            n => {
                s.push_str("          ");
                for i in 0..n {
                    let _ = write!(s, "        Tin {i}");
                }
                s.push('\n');
            }
        }
        let mut row = |name: &str, f: &dyn Fn(&TinStats) -> String| {
            s.push_str(name);
            for t in &tins {
                let _ = write!(s, " {:>12}", f(t));
            }
            s.push('\n');
        };
        row("  thresh  ", &|t| format_rate(t.threshold_rate));
        row("  target  ", &|t| format_time(u32_sat(t.target_us)));
        row("  interval", &|t| format_time(u32_sat(t.interval_us)));
        row("  pk_delay", &|t| format_time(u32_sat(t.peak_delay_us)));
        row("  av_delay", &|t| format_time(u32_sat(t.avg_delay_us)));
        row("  sp_delay", &|t| format_time(u32_sat(t.base_delay_us)));
        row("  backlog ", &|t| format_size(u32_sat(t.backlog_bytes)));
        row("  pkts    ", &|t| u32_sat(t.packets).to_string());
        row("  bytes   ", &|t| t.bytes.to_string());
        row("  way_inds", &|t| u32_sat(t.way_indirect_hits).to_string());
        row("  way_miss", &|t| u32_sat(t.way_misses).to_string());
        row("  way_cols", &|t| u32_sat(t.way_collisions).to_string());
        row("  drops   ", &|t| u32_sat(t.drops).to_string());
        row("  marks   ", &|t| u32_sat(t.ecn_marks).to_string());
        row("  ack_drop", &|t| u32_sat(t.ack_drops).to_string());
        row("  sp_flows", &|t| t.sparse_flows.to_string());
        row("  bk_flows", &|t| t.bulk_flows.to_string());
        row("  un_flows", &|t| t.unresponsive_flows.to_string());
        row("  max_len ", &|t| t.max_pkt_len.to_string());
        row("  quantum ", &|t| t.flow_quantum.to_string());
    }
    s.push('\n');
    s
}
