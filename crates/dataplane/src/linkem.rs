//! `purple linkem IF_A IF_B`: the sans-IO link model [`qdisc::link::LinkModel`] (a link we cannot
//! change, like mahimahi's `mm-link` plus `mm-delay` and `mm-loss`; see that module for its
//! semantics) run once per direction inside the bridge's event loop. This module adds only the
//! glue: [`open`] and the [`Stage`] impl (stats text and JSON for the control socket).

use controller::ctl::DirNames;
use qdisc::Instant;
use serde_json::{json, Value};

pub use qdisc::link::{
    wire_bytes, Capacity, CapacityFileError, Charge, IcmpPolicy, LinkConfig, LinkModel, LinkStats,
    CAPACITY_WINDOW, DEFAULT_BUFFER_PACKETS,
};

use crate::bridge::{Bridge, BridgeConfig, Error, Stage};

/// Opens a link emulator between `cfg.if_a` and `cfg.if_b`: `up` shapes frames from A leaving
/// on B, `down` frames from B leaving on A; traces start now. Run it with [`Bridge::run`]; the
/// control socket answers `stats [--json]` and `set-rate up|down RATE`.
pub fn open(
    cfg: BridgeConfig,
    up: LinkConfig,
    down: LinkConfig,
) -> Result<Bridge<LinkModel>, Error> {
    let now = Instant::from_nanos(os::monotonic_ns());
    Bridge::with_stages(cfg, LinkModel::new(up, now), LinkModel::new(down, now))
}

fn rate_str(r: Option<f64>) -> String {
    r.map_or("unlimited".into(), |r| {
        qdisc::tc_units::format_rate(r.round() as u64)
    })
}

impl Stage for LinkModel {
    fn dir_names(&self) -> DirNames {
        DirNames::UpDown
    }

    fn stage_text(&self, dev: &str, now: Instant) -> String {
        let l = self.link_stats();
        format!(
            "linkem dev {dev}: capacity {} estimate {} delay {}us buffer {}{}\n \
             backlog {}b {}p in_flight {}p sojourn last {}us ewma {}us\n \
             sent {} bytes {} pkt, dropped buffer {} loss {}\n",
            rate_str(self.capacity_at(now)),
            rate_str(self.capacity_estimate(now)),
            self.delay().as_micros(),
            match self.buffer_limits() {
                (Some(p), Some(b)) => format!("{p}p {b}b"),
                (Some(p), None) => format!("{p}p"),
                (None, Some(b)) => format!("{b}b"),
                (None, None) => "unlimited".into(),
            },
            match self.icmp_policy() {
                IcmpPolicy::Shared => String::new(),
                p => format!(" icmp {}", p.name()),
            },
            l.backlog.bytes,
            l.backlog.packets,
            l.in_flight.packets,
            l.last_sojourn.as_micros(),
            l.sojourn_ewma.as_micros(),
            l.tx.bytes,
            l.tx.packets,
            l.buffer_drops.packets,
            l.loss_drops.packets,
        )
    }

    fn stage_json(&self, _dev: &str, now: Instant) -> Value {
        let l = self.link_stats();
        let bps = |r: Option<f64>| r.map(|r| r.round() as u64);
        json!({
            "kind": "linkem",
            "capacity": bps(self.capacity_at(now)),
            "capacity_estimate": bps(self.capacity_estimate(now)),
            "capacity_mode": self.capacity().mode(),
            "delay_us": self.delay().as_micros(),
            "buffer_packets": self.buffer_limits().0,
            "buffer_bytes": self.buffer_limits().1,
            "loss": self.loss(),
            "icmp": self.icmp_policy().name(),
            "backlog": l.backlog.bytes,
            "qlen": l.backlog.packets,
            "qlen_segments": l.backlog_segments,
            "in_flight": l.in_flight.packets,
            "sojourn_us": l.last_sojourn.as_micros(),
            "sojourn_ewma_us": l.sojourn_ewma.as_micros(),
            "drops_buffer": l.buffer_drops.packets,
            "drops_loss": l.loss_drops.packets,
            "tx_bytes": l.tx.bytes,
            "tx_packets": l.tx.packets,
        })
    }
}
