//! What a bridge runs in each direction ([`Stage`]), and the tc-style rendering of a qdisc's
//! statistics that the single- and multi-queue bridges share.

use cake::tc::{stats_json, stats_text, QdiscHeader};
use cake::{AnyQdisc, Cake, CakeConfig, CakeStats};
use controller::ctl::DirNames;
use qdisc::{Instant, Qdisc, QdiscStats};
use serde_json::{json, Value};

/// What a bridge runs in each direction: a queue driven like a qdisc (frames in with
/// `enqueue`, out with `dequeue` at the release times it asks for) that also renders its own
/// statistics for the control socket. Implemented by [`AnyQdisc`] (`purple bridge`) and
/// [`LinkModel`](crate::linkem::LinkModel) (`purple linkem`).
pub trait Stage: Qdisc {
    /// How this stage names its directions in answers and statistics (`egress`/`ingress` by
    /// default).
    fn dir_names(&self) -> DirNames {
        DirNames::EgressIngress
    }
    /// Text statistics for this direction, whose frames leave on `dev`, at `now`.
    fn stage_text(&self, dev: &str, now: Instant) -> String;
    /// A JSON object of statistics for this direction (the bridge adds `dev` and `purple`).
    fn stage_json(&self, dev: &str, now: Instant) -> Value;
}

impl Stage for AnyQdisc {
    /// `tc -s qdisc show` text.
    fn stage_text(&self, dev: &str, _now: Instant) -> String {
        match self.as_cake() {
            Some(c) => on_dev(&cake_tc(c, c.rate(), stats_text), dev),
            None => root_text(self.kind(), dev, 2, &self.stats()),
        }
    }

    /// `tc -j -s qdisc show`'s object.
    fn stage_json(&self, _dev: &str, _now: Instant) -> Value {
        match self.as_cake() {
            Some(c) => first_object(&cake_tc(c, c.rate(), stats_json))
                .unwrap_or_else(|| json!({"kind": "cake"})),
            None => root_json(self.kind(), 2, &self.stats()),
        }
    }
}

/// `render` (tc's [`stats_text`] or [`stats_json`]) of `cake`'s statistics, its configuration
/// showing `rate_bps` as the bandwidth (the rate it shapes at, or a cake_mq group's).
pub(crate) fn cake_tc<R>(
    cake: &Cake,
    rate_bps: u64,
    render: fn(&CakeConfig, &CakeStats, QdiscHeader) -> R,
) -> R {
    let mut cfg = cake.config().clone();
    cfg.rate_bps = rate_bps;
    render(&cfg, &cake.cake_stats(), QdiscHeader::for_config(&cfg))
}

/// `tc -s qdisc show` text (which names no device) with ` dev DEV` put before its first
/// ` root `, as tc prints a qdisc of that device.
pub(crate) fn on_dev(text: &str, dev: &str) -> String {
    text.replacen(" root ", &format!(" dev {dev} root "), 1)
}

/// The first object of `tc -j -s qdisc show` output (a JSON array), or `None` when `json` is
/// not such an array.
pub(crate) fn first_object(json: &str) -> Option<Value> {
    match serde_json::from_str::<Value>(json) {
        Ok(Value::Array(mut v)) if !v.is_empty() => Some(v.swap_remove(0)),
        _ => None,
    }
}

/// `tc -s qdisc show`'s text for a root qdisc of `kind` on `dev` with no statistics of its own
/// beyond the common counters `q`, handle `0:` and reference count `refcnt` (three lines, no
/// blank line after them).
pub(crate) fn root_text(kind: &str, dev: &str, refcnt: usize, q: &QdiscStats) -> String {
    format!(
        "qdisc {kind} 0: dev {dev} root refcnt {refcnt}\n Sent {} bytes {} pkt (dropped {}, \
         overlimits {} requeues 0)\n backlog {}b {}p requeues 0\n",
        q.dequeued.bytes,
        q.dequeued.packets,
        q.dropped_total().packets,
        q.overlimits,
        q.backlog.bytes,
        q.backlog.packets
    )
}

/// `tc -j -s qdisc show`'s object for a root qdisc of `kind` with no statistics of its own
/// beyond the common counters `q`, handle `0:` and reference count `refcnt`.
pub(crate) fn root_json(kind: &str, refcnt: usize, q: &QdiscStats) -> Value {
    json!({
        "kind": kind, "handle": "0:", "root": true, "refcnt": refcnt,
        "bytes": q.dequeued.bytes, "packets": q.dequeued.packets,
        "drops": q.dropped_total().packets, "overlimits": q.overlimits,
        "requeues": 0, "backlog": q.backlog.bytes, "qlen": q.backlog.packets,
    })
}
