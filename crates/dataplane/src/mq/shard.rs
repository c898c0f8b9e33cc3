//! The shards of a cake_mq group on different threads: the [`ShardBoard`] on which they publish
//! their activity, and [`SharedShard`], a shard that publishes and reads it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use cake::mq::{Shard, ShardActivity, ShardPeers};
use cake::tc::{stats_json, stats_text, QdiscHeader};
use cake::{CakeConfig, CakeStats};
use qdisc::packet::Buffers;
use qdisc::tc_units::format_rate;
use qdisc::{Dequeue, Dropped, Instant, NoShaper, Packet, Qdisc, QdiscStats};
use serde_json::{json, Value};

use crate::bridge::stage::{cake_tc, first_object, on_dev};
use crate::Stage;

/// One shard's published activity, on a cache line of its own so that a shard's writes do not
/// disturb the others' lines.
#[derive(Debug, Default)]
#[repr(align(64))]
struct Slot {
    backlog: AtomicU64,
    /// The last dequeue's time in ns plus one; 0: never.
    last_dequeue: AtomicU64,
}

/// What the shards of one cake_mq direction publish for each other's syncs: per shard its
/// backlog and the time of its last dequeue. Each slot is written only by the thread running
/// that shard and read by the others when they sync. Relaxed atomics suffice: a sync needs an
/// eventually consistent count of active shards (as Linux's lockless scan of its queues'
/// lengths and last-active times), not an order with any other memory.
#[derive(Debug)]
pub struct ShardBoard {
    slots: Box<[Slot]>,
}

impl ShardBoard {
    /// A board for `shards` shards, all idle.
    pub fn new(shards: usize) -> Arc<ShardBoard> {
        Arc::new(ShardBoard {
            slots: (0..shards).map(|_| Slot::default()).collect(),
        })
    }

    /// The number of shards.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// True for a board of no shard.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Publishes shard `i`'s activity (ignored for an index beyond the board).
    pub fn publish(&self, i: usize, a: ShardActivity) {
        if let Some(s) = self.slots.get(i) {
            s.backlog.store(a.backlog, Ordering::Relaxed);
            let t = a.last_dequeue.map_or(0, |t| t.as_nanos().saturating_add(1));
            s.last_dequeue.store(t, Ordering::Relaxed);
        }
    }

    /// Shard `i`'s activity as last published (idle for an index beyond the board).
    pub fn activity(&self, i: usize) -> ShardActivity {
        let Some(s) = self.slots.get(i) else {
            return ShardActivity::default();
        };
        let t = s.last_dequeue.load(Ordering::Relaxed);
        ShardActivity {
            backlog: s.backlog.load(Ordering::Relaxed),
            last_dequeue: t.checked_sub(1).map(Instant::from_nanos),
        }
    }
}

/// The shards of a board other than `me`.
struct BoardPeers<'a> {
    board: &'a ShardBoard,
    me: usize,
}

impl ShardPeers for BoardPeers<'_> {
    fn for_each_peer(&self, f: &mut dyn FnMut(ShardActivity)) {
        for i in (0..self.board.len()).filter(|&i| i != self.me) {
            f(self.board.activity(i));
        }
    }
}

/// Shard `index` of a cake_mq group whose shards run on different threads: a [`Shard`] that
/// publishes its activity on the group's [`ShardBoard`] after every enqueue and dequeue, and
/// reads the others' from it when it syncs (inside [`dequeue`](Qdisc::dequeue), every 200 µs).
#[derive(Debug)]
pub struct SharedShard {
    shard: Shard,
    board: Arc<ShardBoard>,
    index: usize,
}

impl SharedShard {
    /// `shard` as shard `index` of the group whose board is `board`; `None` when `index` is not
    /// on the board.
    pub fn new(shard: Shard, board: Arc<ShardBoard>, index: usize) -> Option<SharedShard> {
        (index < board.len()).then_some(SharedShard {
            shard,
            board,
            index,
        })
    }

    /// The shard.
    pub fn shard(&self) -> &Shard {
        &self.shard
    }

    /// Its index in the group.
    pub fn index(&self) -> usize {
        self.index
    }

    fn publish(&self) {
        self.board.publish(self.index, self.shard.activity());
    }

    /// `render` (tc's text or JSON) of the shard's statistics, showing the group's configured
    /// rate.
    fn tc<R>(&self, render: fn(&CakeConfig, &CakeStats, QdiscHeader) -> R) -> R {
        cake_tc(self.shard.cake(), self.shard.configured_rate(), render)
    }
}

impl Qdisc for SharedShard {
    fn enqueue(&mut self, now: Instant, pkt: Packet, drops: &mut Vec<Dropped>) {
        self.shard.enqueue(now, pkt, drops);
        self.publish();
    }

    fn enqueue_with(
        &mut self,
        now: Instant,
        pkt: Packet,
        drops: &mut Vec<Dropped>,
        bufs: &mut dyn Buffers,
    ) {
        self.shard.enqueue_with(now, pkt, drops, bufs);
        self.publish();
    }

    fn dequeue(&mut self, now: Instant, drops: &mut Vec<Dropped>) -> Dequeue {
        let peers = BoardPeers {
            board: &self.board,
            me: self.index,
        };
        let d = self.shard.dequeue(now, &peers, drops);
        self.publish();
        d
    }

    /// Sets the group's configured rate for this shard (the control socket sets it on every
    /// shard); it shapes at its share at once.
    fn set_rate(&mut self, rate: Option<qdisc::Rate>) -> Result<(), NoShaper> {
        self.shard.set_rate(rate);
        Ok(())
    }

    fn stats(&self) -> QdiscStats {
        self.shard.stats()
    }

    fn kind(&self) -> &'static str {
        "cake"
    }

    fn shrink(&mut self) -> usize {
        self.shard.shrink()
    }
}

impl Stage for SharedShard {
    /// The shard's `tc -s qdisc show` text (with the group's configured rate), then a line with
    /// the shards it counted active at its last sync and the rate it shapes at.
    fn stage_text(&self, dev: &str, _now: Instant) -> String {
        let mut t = on_dev(&self.tc(stats_text), dev);
        // tc ends each qdisc with a blank line: the extra line goes before it.
        if t.ends_with("\n\n") {
            t.pop();
        }
        t.push_str(&format!(
            " active queues {} shaping at {}\n\n",
            self.shard.active_shards(),
            format_rate(self.shard.share())
        ));
        t
    }

    /// The shard's `tc -j -s qdisc show` object plus `active_queues` (Linux's name) and `share`
    /// (bytes/s).
    fn stage_json(&self, _dev: &str, _now: Instant) -> Value {
        let mut v = first_object(&self.tc(stats_json)).unwrap_or_else(|| json!({"kind": "cake"}));
        if let Value::Object(m) = &mut v {
            m.insert("active_queues".into(), json!(self.shard.active_shards()));
            m.insert("share".into(), json!(self.shard.share()));
        }
        v
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use cake::mq as cmq;

    #[test]
    fn the_board_carries_each_shards_activity_and_never_as_never() {
        let b = ShardBoard::new(3);
        assert_eq!(b.activity(1), ShardActivity::default());
        let a = ShardActivity {
            backlog: 7,
            last_dequeue: Some(Instant::ZERO),
        };
        b.publish(1, a);
        assert_eq!(b.activity(1), a);
        assert_eq!(b.activity(0), ShardActivity::default());
        assert_eq!(b.activity(9), ShardActivity::default());
        let mut seen = Vec::new();
        BoardPeers { board: &b, me: 0 }.for_each_peer(&mut |x| seen.push(x));
        assert_eq!(seen, vec![a, ShardActivity::default()]);
    }

    /// the board and shapes at half the rate.
    #[test]
    fn shared_shards_see_each_other_through_the_board() {
        use qdisc::packet::FrameSpec;
        let cfg = cmq::config_from_tc_args(&["bandwidth", "100Mbit", "besteffort"]).unwrap();
        let board = ShardBoard::new(2);
        let mut s: Vec<SharedShard> = (0..2)
            .map(|i| {
                let sh = Shard::new(cfg.clone(), i as u64).unwrap();
                SharedShard::new(sh, Arc::clone(&board), i).unwrap()
            })
            .collect();
        assert!(SharedShard::new(Shard::new(cfg.clone(), 9).unwrap(), board.clone(), 2).is_none());
        let mut drops = Vec::new();
        let pkt = |k: u8| {
            FrameSpec::udp([10, 0, 0, k].into(), [10, 9, 0, 1].into(), 1, 2)
                .with_payload(1000)
                .packet()
        };
        for (i, sh) in s.iter_mut().enumerate() {
            for _ in 0..10 {
                sh.enqueue(Instant::ZERO, pkt(i as u8), &mut drops);
            }
        }
        assert_eq!(board.activity(1).backlog, 10);
        for sh in &mut s {
            assert!(matches!(
                sh.dequeue(Instant::ZERO, &mut drops),
                Dequeue::Packet(_)
            ));
            assert_eq!(sh.shard().active_shards(), 2);
            assert_eq!(sh.shard().share(), 6_250_000);
        }
        assert_eq!(board.activity(0).last_dequeue, Some(Instant::ZERO));
    }
}
