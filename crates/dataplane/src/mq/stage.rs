//! What each queue of a multi-queue bridge runs ([`QueueStage`]), and how a direction's qdisc
//! specification becomes one stage per queue ([`plan`]).

use std::sync::Arc;

use cake::mq::{self as cmq, Shard};
use cake::{AnyQdisc, CakeConfig};
use qdisc::{Instant, Qdisc};
use serde_json::Value;

use super::{ShardBoard, SharedShard};
use crate::{Error, Stage};

/// What one queue of a multi-queue bridge runs in one direction.
#[derive(Debug)]
pub enum QueueStage {
    /// A shard of a cake_mq group.
    Shard(SharedShard),
    /// A qdisc of its own.
    Qdisc(AnyQdisc),
}

macro_rules! each {
    ($self:expr, $q:ident => $body:expr) => {
        match $self {
            QueueStage::Shard($q) => $body,
            QueueStage::Qdisc($q) => $body,
        }
    };
}

qdisc::qdisc_by_variants!(QueueStage {
    QueueStage::Shard,
    QueueStage::Qdisc,
});

impl Stage for QueueStage {
    fn stage_text(&self, dev: &str, now: Instant) -> String {
        each!(self, q => q.stage_text(dev, now))
    }
    fn stage_json(&self, dev: &str, now: Instant) -> Value {
        each!(self, q => q.stage_json(dev, now))
    }
}

/// What a direction of a multi-queue bridge runs.
#[derive(Clone, Debug)]
pub(super) enum DirKind {
    /// A cake_mq group configured with this (its rate follows `set-bandwidth`).
    Mq(CakeConfig),
    /// One instance of this qdisc per queue.
    PerQueue(&'static str),
}

/// Whether `q` shapes to a rate of its own (so that one instance per queue would multiply it).
pub(super) fn shapes(q: &AnyQdisc) -> bool {
    match q {
        AnyQdisc::Cake(c) => c.rate() != 0 || c.config().autorate,
        AnyQdisc::Htb(_) => true,
        _ => false,
    }
}

/// Parses one direction's qdisc for `queues` queues: its kind and one stage per queue.
pub(super) fn plan(
    name: &str,
    spec: &str,
    queues: usize,
    seed: u64,
) -> Result<(DirKind, Vec<QueueStage>), Error> {
    let words: Vec<&str> = spec.split_whitespace().collect();
    let err = |m: String| Error::Qdisc(format!("bridge {name}: qdisc {spec:?}: {m}"));
    if words.first() == Some(&"cake_mq") {
        let cfg =
            cmq::config_from_tc_args(&words[1..]).map_err(|e| err(format!("cake_mq: {e}")))?;
        let board = ShardBoard::new(queues);
        let mut stages = Vec::with_capacity(queues);
        for i in 0..queues {
            let shard = Shard::new(cfg.clone(), cmq::shard_seed(seed, i))
                .map_err(|e| err(format!("cake_mq: {e}")))?;
            // `i < queues`, the board's size.
            let s = SharedShard::new(shard, Arc::clone(&board), i)
                .ok_or_else(|| err(format!("shard {i} is not on its board")))?;
            stages.push(QueueStage::Shard(s));
        }
        return Ok((DirKind::Mq(cfg), stages));
    }
    let stages = (0..queues)
        .map(|i| AnyQdisc::from_tc_words(&words, cmq::shard_seed(seed, i)))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| err(e.to_string()))?;
    let kind = stages.first().map_or("pfifo", |q| q.kind());
    if queues > 1 && stages.first().is_some_and(shapes) {
        return Err(err(format!(
            "with {queues} queues, each queue would run this {kind} shaper at the full rate \
             ({queues} times the rate in all); use cake_mq to share one rate among the queues \
             (e.g. \"cake_mq {}\"), or one queue",
            words.get(1..).map_or(String::new(), |w| w.join(" "))
        )));
    }
    Ok((
        DirKind::PerQueue(kind),
        stages.into_iter().map(QueueStage::Qdisc).collect(),
    ))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn shaping_qdiscs_are_refused_on_more_than_one_queue_and_cake_mq_parses() {
        let e = plan("t", "cake bandwidth 100Mbit", 2, 1)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("use cake_mq") && e.contains("cake_mq bandwidth 100Mbit"),
            "{e}"
        );
        assert!(plan("t", "htb rate 10mbit", 2, 1).is_err());
        assert!(plan("t", "cake bandwidth 100Mbit", 1, 1).is_ok());
        let (k, s) = plan("t", "fq_codel", 3, 1).unwrap();
        assert!(matches!(k, DirKind::PerQueue("fq_codel")) && s.len() == 3);
        let (k, s) = plan("t", "cake_mq bandwidth 200Mbit besteffort", 2, 1).unwrap();
        assert!(matches!(k, DirKind::Mq(ref c) if c.rate_bps == 25_000_000));
        assert!(matches!(&s[1], QueueStage::Shard(x) if x.index() == 1));
        let e = plan("t", "cake_mq bandwidth 1Gbit autorate-ingress", 2, 1)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("autorate-ingress is not supported by cake_mq"),
            "{e}"
        );
        let e = plan("t", "cake_mq bandwith 1Gbit", 2, 1)
            .unwrap_err()
            .to_string();
        assert!(e.contains("What is \"bandwith\""), "{e}");
    }
}
