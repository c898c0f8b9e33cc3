//! The bridge's dataplane counters and the `stats` answers of its control socket.

use controller::Direction;
use qdisc::{Instant, QdiscStats};
use serde_json::{json, Value};

use super::{dir_index, now_ns, Bridge, Dir, Stage};

/// Per-direction dataplane counters. Invariants: `rx_packets == offered + bypassed + truncated`,
/// and `tx_packets + tx_errors + pending == qdisc dequeued packets + bypassed`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DirStats {
    /// Frames received from the input interface.
    pub rx_packets: u64,
    /// Their bytes (Ethernet header on, virtio-net header off).
    pub rx_bytes: u64,
    /// Their bytes on the wire: a received super-packet (GRO) counts as the segments it
    /// carries, headers repeated per segment ([`crate::vnet::wire_len`]), in the units of
    /// `tx_wire_bytes`. On the WAN side this is what the link delivered to us, before the
    /// qdisc: `purple control` compares it with what CAKE sent.
    pub rx_wire_bytes: u64,
    /// Frames handed to the qdisc.
    pub offered: u64,
    /// Frames forwarded unchanged without queueing because their virtio-net header had a GSO
    /// type we cannot express, or they were shorter than an Ethernet header.
    pub bypassed: u64,
    /// Frames longer than a receive slot (cut by the kernel), dropped.
    pub truncated: u64,
    /// Packets the kernel took for sending on the output interface (a super-packet rebuilt from
    /// segments counts as the segments it carries).
    pub tx_packets: u64,
    /// Super-packets rebuilt from segments CAKE cut, sent as one frame each (see
    /// [`crate::rejoin`]).
    pub rejoined: u64,
    /// Their bytes (a super-packet counts once, as handed to the kernel).
    pub tx_bytes: u64,
    /// Their bytes on the wire: Ethernet frames (no preamble or FCS) after the kernel has cut
    /// super-packets into segments, headers repeated per segment (see [`crate::vnet::wire_len`]);
    /// what a shaper charging L2 frame bytes sees.
    pub tx_wire_bytes: u64,
    /// Packets the kernel refused to send (dropped).
    pub tx_errors: u64,
    /// Packets dequeued but not yet taken by the kernel (send buffer full).
    pub pending: u64,
    /// Frames the kernel dropped on the input socket's receive queue (we were too slow).
    pub kernel_drops: u64,
    /// Times the loop dequeued at a release time the shaper had asked for.
    pub shaper_wakeups: u64,
    /// Total nanoseconds those dequeues came after the asked-for time.
    pub shaper_late_ns: u64,
    /// The largest such delay, in nanoseconds.
    pub shaper_late_max_ns: u64,
}

impl DirStats {
    /// Adds `o`'s counters to these (the largest lateness is the larger of the two): the
    /// counters of a multi-queue direction are the sums of its queues'.
    pub fn add(&mut self, o: &DirStats) {
        self.rx_packets += o.rx_packets;
        self.rx_bytes += o.rx_bytes;
        self.rx_wire_bytes += o.rx_wire_bytes;
        self.offered += o.offered;
        self.bypassed += o.bypassed;
        self.truncated += o.truncated;
        self.tx_packets += o.tx_packets;
        self.rejoined += o.rejoined;
        self.tx_bytes += o.tx_bytes;
        self.tx_wire_bytes += o.tx_wire_bytes;
        self.tx_errors += o.tx_errors;
        self.pending += o.pending;
        self.kernel_drops += o.kernel_drops;
        self.shaper_wakeups += o.shaper_wakeups;
        self.shaper_late_ns += o.shaper_late_ns;
        self.shaper_late_max_ns = self.shaper_late_max_ns.max(o.shaper_late_max_ns);
    }

    /// The dataplane line of `stats` text: ` purple NAME: rx ...` (NAME is the direction's).
    pub(crate) fn text_line(&self, name: &str) -> String {
        let s = self;
        format!(
 " purple {}: rx {} pkt {} bytes, tx {} pkt {} bytes ({} rejoined), bypassed {} truncated {} tx_errors {} kernel_drops {} pending {}, shaper wakeups {} late avg {}ns max {}ns\n",
            name,
            s.rx_packets,
            s.rx_bytes,
            s.tx_packets,
            s.tx_bytes,
            s.rejoined,
            s.bypassed,
            s.truncated,
            s.tx_errors,
            s.kernel_drops,
            s.pending,
            s.shaper_wakeups,
            s.shaper_late_ns.checked_div(s.shaper_wakeups).unwrap_or(0),
            s.shaper_late_max_ns
        )
    }

    /// The `purple` object of `stats --json` for direction `name`.
    pub(crate) fn json(&self, name: &str, last_tx_error: Option<&str>) -> Value {
        let s = self;
        json!({
            "direction": name,
            "rx_packets": s.rx_packets, "rx_bytes": s.rx_bytes,
            "rx_wire_bytes": s.rx_wire_bytes,
            "offered": s.offered, "bypassed": s.bypassed, "truncated": s.truncated,
            "tx_packets": s.tx_packets, "tx_bytes": s.tx_bytes,
            "tx_wire_bytes": s.tx_wire_bytes, "rejoined": s.rejoined,
            "tx_errors": s.tx_errors, "pending": s.pending,
            "kernel_drops": s.kernel_drops,
            "shaper_wakeups": s.shaper_wakeups,
            "shaper_late_ns": s.shaper_late_ns,
            "shaper_late_max_ns": s.shaper_late_max_ns,
            "last_tx_error": last_tx_error,
        })
    }
}

/// A snapshot of both directions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BridgeStats {
    /// A to B.
    pub egress: DirStats,
    /// B to A.
    pub ingress: DirStats,
    /// The egress qdisc's counters.
    pub egress_qdisc: QdiscStats,
    /// The ingress qdisc's counters.
    pub ingress_qdisc: QdiscStats,
}

impl<Q> Dir<Q> {
    /// The counters, with `pending` as of now.
    fn snapshot(&self) -> DirStats {
        DirStats {
            pending: self.pending_segs[self.sent..]
                .iter()
                .map(|&n| u64::from(n))
                .sum(),
            ..self.stats
        }
    }
}

impl<Q: Stage> Bridge<Q> {
    /// Counters of both directions.
    pub fn stats(&self) -> BridgeStats {
        BridgeStats {
            egress: self.dirs[0].snapshot(),
            ingress: self.dirs[1].snapshot(),
            egress_qdisc: self.dirs[0].qdisc.stats(),
            ingress_qdisc: self.dirs[1].qdisc.stats(),
        }
    }

    /// Adds the frames the kernel dropped on the input sockets since the last call to the
    /// counters.
    pub(crate) fn refresh_kernel_drops(&mut self) {
        for s in 0..2 {
            if let Ok(n) = self.socks[s].take_kernel_drops() {
                self.dirs[s].stats.kernel_drops += n;
            }
        }
    }

    fn dev(&self, d: &Dir<Q>) -> &str {
        if d.tx == 0 {
            &self.cfg.if_a
        } else {
            &self.cfg.if_b
        }
    }

    /// The stage of `dir` (to read its own statistics).
    pub fn stage(&self, dir: Direction) -> &Q {
        &self.dirs[dir_index(dir)].qdisc
    }

    /// The interface `dir`'s frames leave on.
    pub(crate) fn out_dev(&self, dir: Direction) -> &str {
        self.dev(&self.dirs[dir_index(dir)])
    }

    /// The text of `dir`'s last send error, if any.
    pub(crate) fn last_tx_error(&self, dir: Direction) -> Option<&str> {
        self.dirs[dir_index(dir)].last_tx_error.as_deref()
    }

    /// Each direction's statistics (`tc -s qdisc show`-style text for qdiscs), each followed by a
    /// dataplane line.
    pub fn stats_text(&self) -> String {
        let now = Instant::from_nanos(now_ns());
        let mut out = String::new();
        for d in &self.dirs {
            out.push_str(&d.qdisc.stage_text(self.dev(d), now));
            out.push_str(&d.snapshot().text_line(d.qdisc.dir_names().name(d.dir)));
        }
        out
    }

    /// JSON: an array with one object per direction (egress/up first), each the stage's object
    /// (`tc -j -s qdisc show`'s for qdiscs) plus `dev` and a `purple` object of dataplane
    /// counters.
    pub fn stats_json(&self) -> String {
        let now = Instant::from_nanos(now_ns());
        let mut arr = Vec::new();
        for d in &self.dirs {
            let mut obj = d.qdisc.stage_json(self.dev(d), now);
            if let Value::Object(m) = &mut obj {
                m.insert("dev".into(), json!(self.dev(d)));
                m.insert(
                    "purple".into(),
                    d.snapshot()
                        .json(d.qdisc.dir_names().name(d.dir), d.last_tx_error.as_deref()),
                );
            }
            arr.push(obj);
        }
        let mut out = Value::Array(arr).to_string();
        out.push('\n');
        out
    }
}
