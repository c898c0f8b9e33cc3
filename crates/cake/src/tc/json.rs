//! `tc -j -s qdisc show` JSON for cake.

use serde_json::{json, Map, Value};

use super::print::{atm_name, diffserv_name, flow_mode_name, ordered_tins, rtt_u32, QdiscHeader};
use crate::config::{AckFilterMode, CakeConfig};
use crate::stats::CakeStats;

fn u32_sat(v: u64) -> u64 {
    v.min(u64::from(u32::MAX))
}

/// The `options` object tc prints for cake, keys in tc's order.
fn options_json(cfg: &CakeConfig) -> Value {
    let mut o = Map::new();
    if cfg.rate_bps == 0 {
        o.insert("bandwidth".into(), json!("unlimited"));
    } else {
        o.insert("bandwidth".into(), json!(cfg.rate_bps));
    }
    if cfg.autorate {
        o.insert("autorate".into(), json!("autorate-ingress"));
    }
    o.insert("diffserv".into(), json!(diffserv_name(cfg.diffserv)));
    o.insert("flowmode".into(), json!(flow_mode_name(cfg.flow_mode)));
    o.insert("nat".into(), json!(cfg.nat));
    o.insert("wash".into(), json!(cfg.wash));
    o.insert("ingress".into(), json!(cfg.ingress));
    let ack = match cfg.ack_filter {
        AckFilterMode::Aggressive => "aggressive",
        AckFilterMode::Filter => "enabled",
        AckFilterMode::None => "disabled",
    };
    o.insert("ack-filter".into(), json!(ack));
    o.insert("split_gso".into(), json!(cfg.split_gso));
    o.insert("rtt".into(), json!(rtt_u32(cfg)));
    o.insert("raw".into(), json!(!cfg.overhead_set));
    if let Some(a) = atm_name(cfg) {
        o.insert("atm".into(), json!(a));
    }
    o.insert("overhead".into(), json!(cfg.overhead));
    if cfg.mpu != 0 {
        o.insert("mpu".into(), json!(cfg.mpu));
    }
    if let Some(m) = cfg.memlimit.filter(|&m| m != 0) {
        o.insert("memlimit".into(), json!(m));
    }
    let fwmark = if cfg.fwmark_mask == 0 { "0".to_string() } else { format!("{:#x}", cfg.fwmark_mask) };
    o.insert("fwmark".into(), json!(fwmark));
    Value::Object(o)
}

/// Exactly what `tc -j -s qdisc show` prints for a device whose only qdisc is this cake: a
/// one-element JSON array (keys in tc's order, tins in user order) followed by a newline.
pub fn stats_json(cfg: &CakeConfig, stats: &CakeStats, header: QdiscHeader) -> String {
    let q = &stats.qdisc;
    let mut o = Map::new();
    o.insert("kind".into(), json!("cake"));
    o.insert("handle".into(), json!(format!("{:x}:", header.handle_major)));
    o.insert("root".into(), json!(true));
    o.insert("refcnt".into(), json!(header.refcnt));
    o.insert("options".into(), options_json(cfg));
    o.insert("bytes".into(), json!(q.dequeued.bytes));
    o.insert("packets".into(), json!(u32_sat(q.dequeued.packets)));
    o.insert("drops".into(), json!(u32_sat(q.dropped_total().packets)));
    o.insert("overlimits".into(), json!(u32_sat(q.overlimits)));
    o.insert("requeues".into(), json!(0));
    o.insert("backlog".into(), json!(u32_sat(q.backlog.bytes)));
    o.insert("qlen".into(), json!(u32_sat(q.backlog.packets)));
    o.insert("memory_used".into(), json!(u32_sat(stats.memory_used)));
    o.insert("memory_limit".into(), json!(u32_sat(stats.memory_limit)));
    o.insert("capacity_estimate".into(), json!(stats.capacity_estimate));
    o.insert("min_network_size".into(), json!(stats.min_network_size));
    o.insert("max_network_size".into(), json!(stats.max_network_size));
    o.insert("min_adj_size".into(), json!(stats.min_adj_size));
    o.insert("max_adj_size".into(), json!(stats.max_adj_size));
    o.insert("avg_hdr_offset".into(), json!(stats.avg_hdr_offset));
    let tins: Vec<Value> = ordered_tins(cfg, stats)
        .into_iter()
        .map(|t| {
            let mut m = Map::new();
            m.insert("threshold_rate".into(), json!(t.threshold_rate));
            m.insert("sent_bytes".into(), json!(t.bytes));
            m.insert("backlog_bytes".into(), json!(u32_sat(t.backlog_bytes)));
            m.insert("target_us".into(), json!(u32_sat(t.target_us)));
            m.insert("interval_us".into(), json!(u32_sat(t.interval_us)));
            m.insert("peak_delay_us".into(), json!(u32_sat(t.peak_delay_us)));
            m.insert("avg_delay_us".into(), json!(u32_sat(t.avg_delay_us)));
            m.insert("base_delay_us".into(), json!(u32_sat(t.base_delay_us)));
            m.insert("sent_packets".into(), json!(u32_sat(t.packets)));
            m.insert("way_indirect_hits".into(), json!(u32_sat(t.way_indirect_hits)));
            m.insert("way_misses".into(), json!(u32_sat(t.way_misses)));
            m.insert("way_collisions".into(), json!(u32_sat(t.way_collisions)));
            m.insert("drops".into(), json!(u32_sat(t.drops)));
            m.insert("ecn_mark".into(), json!(u32_sat(t.ecn_marks)));
            m.insert("ack_drops".into(), json!(u32_sat(t.ack_drops)));
            m.insert("sparse_flows".into(), json!(t.sparse_flows));
            m.insert("bulk_flows".into(), json!(t.bulk_flows));
            m.insert("unresponsive_flows".into(), json!(t.unresponsive_flows));
            m.insert("max_pkt_len".into(), json!(t.max_pkt_len));
            m.insert("flow_quantum".into(), json!(t.flow_quantum));
            Value::Object(m)
        })
        .collect();
    if !tins.is_empty() {
        o.insert("tins".into(), Value::Array(tins));
    }
    let arr = Value::Array(vec![Value::Object(o)]);
    // Serialising a Value with string keys cannot fail.
    let mut s = serde_json::to_string(&arr).unwrap_or_default();
    s.push('\n');
    s
}
