//! The multi-queue bridge's statistics: each queue's ([`report`]), and both directions rendered
//! as `tc -s qdisc show` prints a multi-queue root and its children, in text and JSON.

use cake::mq as cmq;
use cake::tc::{stats_json, stats_text, QdiscHeader};
use cake::{CakeConfig, CakeStats};
use controller::Direction;
use qdisc::{Instant, QdiscStats};
use serde_json::{json, Value};

use super::{DirKind, MqBridge, QueueStage};
use crate::bridge::stage::{first_object, on_dev, root_json, root_text};
use crate::{Bridge, DirStats, Stage};

/// One queue's statistics, as the coordinator gathers them.
#[derive(Debug)]
pub(super) struct QueueReport {
    dirs: [DirReport; 2],
}

/// One direction of one queue.
#[derive(Debug)]
struct DirReport {
    name: &'static str,
    dev: String,
    stats: DirStats,
    qdisc: QdiscStats,
    /// For a cake_mq shard: its CAKE statistics.
    cake: Option<CakeStats>,
    text: String,
    json: Value,
    last_tx_error: Option<String>,
}

/// The statistics of one queue's bridge.
pub(super) fn report(br: &Bridge<QueueStage>) -> QueueReport {
    let now = Instant::from_nanos(os::monotonic_ns());
    let st = br.stats();
    let dir = |d: Direction, stats: DirStats, qdisc: QdiscStats| {
        let stage = br.stage(d);
        let dev = br.out_dev(d).to_string();
        DirReport {
            name: stage.dir_names().name(d),
            stats,
            qdisc,
            cake: match stage {
                QueueStage::Shard(s) => Some(s.shard().cake().cake_stats()),
                QueueStage::Qdisc(_) => None,
            },
            text: stage.stage_text(&dev, now),
            json: stage.stage_json(&dev, now),
            last_tx_error: br.last_tx_error(d).map(str::to_string),
            dev,
        }
    };
    QueueReport {
        dirs: [
            dir(Direction::Up, st.egress, st.egress_qdisc),
            dir(Direction::Down, st.ingress, st.ingress_qdisc),
        ],
    }
}

/// `text`'s first line (a root qdisc's `qdisc KIND HANDLE: dev DEV root refcnt N OPTIONS`)
/// rewritten as child `i` of `parent` (`qdisc KIND 0: dev DEV parent PARENT:i+1 OPTIONS`).
fn as_child(text: &str, kind: &str, dev: &str, parent: &str, i: usize) -> String {
    let (first, rest) = text.split_once('\n').unwrap_or((text, ""));
    let options = first
        .split_once(" refcnt ")
        .and_then(|(_, r)| r.split_once(' '))
        .map_or("", |(_, o)| o);
    format!(
        "qdisc {kind} 0: dev {dev} parent {parent}{} {options}\n{rest}",
        i + 1
    )
}

/// One direction across the queues: what the text and the JSON rendering both sum from the
/// queues' reports.
struct DirSum<'a> {
    /// The direction's name (`egress`, `ingress`).
    name: &'static str,
    /// The device its frames leave on.
    dev: &'a str,
    /// Each queue's report of this direction, in queue order.
    queues: Vec<&'a DirReport>,
    /// The dataplane counters summed over the queues.
    counters: DirStats,
    root: Root<'a>,
}

/// The root qdisc of a direction.
enum Root<'a> {
    /// A cake_mq group: its configuration, its shards' CAKE statistics summed, and the root's
    /// header.
    CakeMq {
        cfg: &'a CakeConfig,
        total: CakeStats,
        header: QdiscHeader,
    },
    /// Linux's `mq` over one qdisc per queue: their common counters summed.
    Mq(QdiscStats),
}

impl Root<'_> {
    /// The parent of the children (`HANDLE:` for cake_mq, `:` for mq), before the queue's
    /// minor number.
    fn parent(&self) -> String {
        match self {
            Root::CakeMq { cfg, .. } => format!("{:x}:", cfg.handle_major),
            Root::Mq(_) => ":".to_string(),
        }
    }
}

impl MqBridge {
    /// Each direction with any queue, egress first, summed over `reports`.
    fn dir_sums<'a>(&'a self, reports: &'a [QueueReport]) -> Vec<DirSum<'a>> {
        let mut out = Vec::with_capacity(2);
        for d in 0..2 {
            let queues: Vec<&DirReport> = reports.iter().map(|r| &r.dirs[d]).collect();
            let Some(first) = queues.first() else {
                continue;
            };
            let (name, dev) = (first.name, first.dev.as_str());
            let mut counters = DirStats::default();
            queues.iter().for_each(|r| counters.add(&r.stats));
            let root = match &self.kinds[d] {
                DirKind::Mq(cfg) => {
                    let shards: Vec<CakeStats> =
                        queues.iter().filter_map(|r| r.cake.clone()).collect();
                    Root::CakeMq {
                        cfg,
                        total: cmq::sum_stats(cfg, &shards),
                        header: QdiscHeader {
                            handle_major: cfg.handle_major,
                            refcnt: self.queues as u32 + 1,
                        },
                    }
                }
                DirKind::PerQueue(_) => {
                    let mut q = QdiscStats::default();
                    queues.iter().for_each(|r| cmq::add_stats(&mut q, &r.qdisc));
                    Root::Mq(q)
                }
            };
            out.push(DirSum {
                name,
                dev,
                queues,
                counters,
                root,
            });
        }
        out
    }

    /// [`stats_text`](Self::stats_text) of `reports`.
    pub(super) fn format_text(&self, reports: &[QueueReport]) -> String {
        let mut out = String::new();
        for s in self.dir_sums(reports) {
            let (name, dev) = (s.name, s.dev);
            match &s.root {
                Root::CakeMq { cfg, total, header } => {
                    let t = stats_text(cfg, total, *header);
                    out.push_str(&on_dev(
                        &t.replacen("qdisc cake ", "qdisc cake_mq ", 1),
                        dev,
                    ));
                }
                Root::Mq(q) => {
                    out.push_str(&root_text("mq", dev, self.queues + 1, q));
                    out.push('\n');
                }
            }
            let parent = s.root.parent();
            for (i, r) in s.queues.iter().enumerate() {
                let kind = r.json["kind"].as_str().unwrap_or("qdisc");
                out.push_str(&as_child(&r.text, kind, dev, &parent, i));
                out.push_str(&r.stats.text_line(&format!("{name} queue {i}")));
            }
            out.push_str(&s.counters.text_line(name));
        }
        out
    }

    /// [`stats_json`](Self::stats_json) of `reports`.
    pub(super) fn format_json(&self, reports: &[QueueReport]) -> String {
        let mut arr = Vec::new();
        for s in self.dir_sums(reports) {
            let (name, dev) = (s.name, s.dev);
            let mut root = match &s.root {
                Root::CakeMq { cfg, total, header } => {
                    let mut v =
                        first_object(&stats_json(cfg, total, *header)).unwrap_or_else(|| json!({}));
                    if let Value::Object(m) = &mut v {
                        m.insert("kind".into(), json!("cake_mq"));
                    }
                    v
                }
                Root::Mq(q) => root_json("mq", self.queues + 1, q),
            };
            let parent = s.root.parent();
            let queues: Vec<Value> = s
                .queues
                .iter()
                .enumerate()
                .map(|(i, r)| {
                    let mut v = r.json.clone();
                    if let Value::Object(m) = &mut v {
                        m.remove("root");
                        m.insert("handle".into(), json!("0:"));
                        m.insert("parent".into(), json!(format!("{parent}{}", i + 1)));
                        m.insert(
                            "purple".into(),
                            r.stats
                                .json(&format!("{name} queue {i}"), r.last_tx_error.as_deref()),
                        );
                    }
                    v
                })
                .collect();
            let err = s.queues.iter().find_map(|r| r.last_tx_error.as_deref());
            if let Value::Object(m) = &mut root {
                m.insert("dev".into(), json!(dev));
                m.insert("purple".into(), s.counters.json(name, err));
                m.insert("queues".into(), Value::Array(queues));
            }
            arr.push(root);
        }
        let mut out = Value::Array(arr).to_string();
        out.push('\n');
        out
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::sync::Arc;

    use os::EventFd;

    use super::*;
    use crate::mq::stage::plan;

    /// A two-queue bridge (not running) whose egress is a cake_mq group and ingress fq_codel
    /// per queue, with reports of a few packets through each queue.
    fn two_queues_with_traffic() -> (MqBridge, Vec<QueueReport>) {
        use qdisc::packet::FrameSpec;
        use qdisc::Qdisc;
        let (ek, egress) = plan("t", "cake_mq bandwidth 100Mbit besteffort", 2, 1).unwrap();
        let (ik, ingress) = plan("t", "fq_codel", 2, 2).unwrap();
        let now = Instant::ZERO;
        let mut drops = Vec::new();
        let mut reports = Vec::new();
        for (i, (mut e, mut g)) in egress.into_iter().zip(ingress).enumerate() {
            for k in 0..3 + i {
                let pkt = || {
                    FrameSpec::udp([10, 0, 0, k as u8].into(), [10, 9, 0, 1].into(), 1, 2)
                        .with_payload(1000)
                        .packet()
                };
                e.enqueue(now, pkt(), &mut drops);
                g.enqueue(now, pkt(), &mut drops);
            }
            let _ = e.dequeue(now, &mut drops);
            let _ = g.dequeue(now, &mut drops);
            let dir = |name: &'static str, dev: &str, s: &QueueStage, n: u64| DirReport {
                name,
                dev: dev.to_string(),
                stats: DirStats {
                    rx_packets: n,
                    rx_bytes: 1042 * n,
                    offered: n,
                    tx_packets: 1,
                    tx_bytes: 1042,
                    tx_wire_bytes: 1042,
                    ..DirStats::default()
                },
                qdisc: s.stats(),
                cake: match s {
                    QueueStage::Shard(x) => Some(x.shard().cake().cake_stats()),
                    QueueStage::Qdisc(_) => None,
                },
                text: s.stage_text(dev, now),
                json: s.stage_json(dev, now),
                last_tx_error: (i == 1).then(|| "No buffer space available".to_string()),
            };
            let n = 3 + i as u64;
            reports.push(QueueReport {
                dirs: [dir("egress", "b1", &e, n), dir("ingress", "b0", &g, n)],
            });
        }
        let br = MqBridge {
            name: "t".into(),
            queues: 2,
            kinds: [ek, ik],
            workers: Vec::new(),
            senders: Vec::new(),
            ctl: None,
            stop: Arc::new(EventFd::new().unwrap()),
            signals: None,
            rt_priority: None,
            run_cpu_ns: 0,
        };
        (br, reports)
    }

    #[test]
    fn both_directions_render_as_a_multi_queue_root_and_its_children() {
        let (br, r) = two_queues_with_traffic();
        let t = br.format_text(&r);
        for line in [
            "qdisc cake_mq 8001: dev b1 root refcnt 3 bandwidth 100Mbit besteffort ",
            "qdisc cake 0: dev b1 parent 8001:1 bandwidth 100Mbit besteffort ",
            "qdisc cake 0: dev b1 parent 8001:2 bandwidth 100Mbit besteffort ",
            " active queues 2 shaping at 50Mbit\n",
            " purple egress queue 1: rx 4 pkt 4168 bytes, tx 1 pkt",
            " purple egress: rx 7 pkt 7294 bytes, tx 2 pkt 2084 bytes",
            "qdisc mq 0: dev b0 root refcnt 3\n Sent 2084 bytes 2 pkt (dropped 0, overlimits 0 \
             requeues 0)\n backlog 5210b 5p requeues 0\n\nqdisc fq_codel 0: dev b0 parent :1 ",
            "qdisc fq_codel 0: dev b0 parent :2 ",
            " purple ingress: rx 7 pkt 7294 bytes",
        ] {
            assert!(t.contains(line), "{line:?} not in\n{t}");
        }
        let v: Value = serde_json::from_str(&br.format_json(&r)).unwrap();
        let (e, i) = (&v[0], &v[1]);
        assert_eq!(
            (&e["kind"], &e["dev"], &e["qlen"]),
            (&json!("cake_mq"), &json!("b1"), &json!(5))
        );
        assert_eq!(e["purple"]["rx_packets"], 7);
        assert_eq!(e["purple"]["last_tx_error"], "No buffer space available");
        assert_eq!(e["queues"][1]["parent"], "8001:2");
        assert_eq!(e["queues"][1]["handle"], "0:");
        assert!(e["queues"][1].get("root").is_none(), "{e}");
        assert_eq!(e["queues"][1]["share"], 6_250_000);
        assert_eq!(e["queues"][0]["purple"]["direction"], "egress queue 0");
        assert_eq!(
            (&i["kind"], &i["refcnt"], &i["qlen"]),
            (&json!("mq"), &json!(3), &json!(5))
        );
        assert_eq!(i["queues"][0]["kind"], "fq_codel");
        assert_eq!(i["queues"][0]["parent"], ":1");
    }

    #[test]
    fn a_root_qdisc_line_becomes_a_child_line() {
        let t = "qdisc cake 8001: dev b1 root refcnt 2 bandwidth 1Gbit besteffort \n Sent 0\n";
        assert_eq!(
            as_child(t, "cake", "b1", "8001:", 1),
            "qdisc cake 0: dev b1 parent 8001:2 bandwidth 1Gbit besteffort \n Sent 0\n"
        );
    }
}
