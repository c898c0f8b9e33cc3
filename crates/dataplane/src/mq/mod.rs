//! The multi-queue bridge (`purple bridge --queues N`): N forwarding threads, one per queue,
//! each a [`Bridge`] with its own pair of packet sockets. The sockets of each interface form a
//! fanout group (`PACKET_FANOUT_HASH`, see [`os::PacketSocket::fanout_new`]) that hands each
//! received frame to one thread by flow hash, so a flow stays on one queue, and both of its
//! directions on the same one.
//!
//! What queue i runs in each direction:
//! - for `cake_mq ARGS`, shard i of one cake_mq group ([`cake::mq`]): the shards share the
//!   configured rate, each syncing every 200 µs with what the others publish on a
//!   [`ShardBoard`] (atomics, one cache line per shard, written by its own thread only);
//! - for any other qdisc, an instance of its own, as Linux's `mq` gives each hardware queue a
//!   qdisc. A shaping qdisc (CAKE with a bandwidth, HTB) is refused with more than one queue:
//!   each queue would shape at the full rate.
//!
//! The thread calling [`MqBridge::run`] coordinates: it serves the control socket (statistics
//! gathered from every queue, whose loops answer between two passes; `set-bandwidth` applied to
//! every shard), stops the forwarding threads on [`Stopper::stop`] or a signal, and ends the
//! run, returning the first error, when any of them ends.
//!
//! The module, one concern a file:
//! - this file: [`MqBridge`]'s construction, options and statistics (its public API);
//! - `shard`: [`ShardBoard`] and [`SharedShard`], a cake_mq shard on a thread of its own;
//! - `stage`: [`QueueStage`] (what a queue runs in a direction) and how a direction's qdisc
//!   becomes one stage per queue, refusing shapers that would multiply the rate;
//! - `report`: each queue's statistics and their `tc -s qdisc show`-style rendering, text and
//!   JSON, as a multi-queue root and its children;
//! - `coordinator`: [`MqBridge::run`], the forwarding threads and the control socket served
//!   by handing jobs to their loops.

mod coordinator;
mod report;
mod shard;
mod stage;

pub use shard::{ShardBoard, SharedShard};
pub use stage::QueueStage;

use std::sync::Arc;

use cake::mq as cmq;
use controller::Direction;
use qdisc::QdiscStats;

use crate::bridge::{forwarder_by_inherent_methods, io_err, Fanout, JobSender};
use crate::ctl_server::CtlSocket;
use crate::{Bridge, BridgeConfig, BridgeStats, DirStats, Error, LoopOptions, Stopper};
use os::{EventFd, SignalFd};
use report::{report, QueueReport};
use stage::{plan, DirKind};

/// The most queues (forwarding threads) a multi-queue bridge runs.
pub const MAX_QUEUES: usize = 64;

/// A multi-queue bridge: one forwarding thread per queue (see the [module](self) documentation).
/// Build with [`MqBridge::new`], run with [`run`](MqBridge::run).
///
/// ```no_run
/// use dataplane::{BridgeConfig, MqBridge};
///
/// let cfg = BridgeConfig {
///     if_a: "lan0".into(),
///     if_b: "wan0".into(),
///     egress: "cake_mq bandwidth 1Gbit nat".into(),
///     ingress: "cake_mq bandwidth 1Gbit ingress".into(),
///     name: "home".into(),
///     ctl_path: Some(dataplane::ctl::default_path("home")),
///     ctl_group: None,
///     seed: 1,
/// };
/// let mut bridge = MqBridge::new(cfg, 4)?; // 4 threads, 4 shards per direction
/// bridge.stop_on_signals()?;
/// bridge.run()?;
/// println!("{}", bridge.stats_text());
/// # Ok::<(), dataplane::Error>(())
/// ```
#[derive(Debug)]
pub struct MqBridge {
    name: String,
    queues: usize,
    kinds: [DirKind; 2],
    /// The queues' bridges; empty while they run in their threads.
    workers: Vec<Bridge<QueueStage>>,
    senders: Vec<JobSender<QueueStage>>,
    ctl: Option<CtlSocket>,
    stop: Arc<EventFd>,
    signals: Option<SignalFd>,
    rt_priority: Option<i32>,
    run_cpu_ns: u64,
}

/// The number of queues to run when none is given: the CPUs this process may use.
pub fn default_queues() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(MAX_QUEUES))
}

impl MqBridge {
    /// Parses both directions' qdiscs for `queues` queues (`cake_mq ARGS` for a shared rate, or
    /// any qdisc of [`AnyQdisc::from_tc`](cake::AnyQdisc::from_tc), one instance per queue), opens a pair of packet
    /// sockets per queue in one fanout group per interface, and binds the control socket.
    /// Nothing is forwarded until [`run`](Self::run).
    pub fn new(cfg: BridgeConfig, queues: usize) -> Result<MqBridge, Error> {
        if !(1..=MAX_QUEUES).contains(&queues) {
            return Err(Error::Qdisc(format!(
                "bridge {}: {queues} queues: 1 to {MAX_QUEUES} accepted",
                cfg.name
            )));
        }
        let (ek, egress) = plan(&cfg.name, &cfg.egress, queues, cfg.seed)?;
        let (ik, ingress) = plan(&cfg.name, &cfg.ingress, queues, cfg.seed.wrapping_add(1))?;
        let mut workers = Vec::with_capacity(queues);
        let mut senders = Vec::with_capacity(queues);
        let mut groups: Option<[u16; 2]> = None;
        for (i, (e, g)) in egress.into_iter().zip(ingress).enumerate() {
            let wcfg = BridgeConfig {
                name: format!("{} queue {i}", cfg.name),
                ctl_path: None,
                ctl_group: None,
                ..cfg.clone()
            };
            let fanout = match (queues, groups) {
                (1, _) => Fanout::None,
                (_, None) => Fanout::New,
                (_, Some(ids)) => Fanout::Join(ids),
            };
            let (mut br, ids) = Bridge::open(wcfg, e, g, fanout)?;
            groups.get_or_insert(ids);
            senders.push(br.job_sender()?);
            workers.push(br);
        }
        let ctl = cfg.bind_ctl()?;
        Ok(MqBridge {
            name: cfg.name,
            queues,
            kinds: [ek, ik],
            workers,
            senders,
            ctl,
            stop: Arc::new(EventFd::new().map_err(io_err("eventfd"))?),
            signals: None,
            rt_priority: None,
            run_cpu_ns: 0,
        })
    }

    /// The number of queues (forwarding threads).
    pub fn queues(&self) -> usize {
        self.queues
    }

    /// A handle to stop [`run`](Self::run) from another thread.
    pub fn stopper(&self) -> Stopper {
        Stopper::new(Arc::clone(&self.stop))
    }

    /// Makes SIGINT and SIGTERM stop the bridge cleanly. Blocks both signals in the calling
    /// thread (the forwarding threads inherit that), so call it from the thread that will call
    /// [`run`](Self::run).
    pub fn stop_on_signals(&mut self) -> Result<(), Error> {
        self.signals = Some(SignalFd::termination().map_err(io_err("signalfd"))?);
        Ok(())
    }

    /// CPU time (ns) the forwarding threads and the coordinator spent in the last
    /// [`run`](Self::run), together.
    pub fn run_cpu_ns(&self) -> u64 {
        self.run_cpu_ns
    }

    fn reports(&self) -> Vec<QueueReport> {
        self.workers.iter().map(report).collect()
    }

    /// Statistics summed over the queues (per-queue counters: [`queue_stats`](Self::queue_stats)).
    /// Read them while the bridge is not running (before or after [`run`](Self::run)); while it
    /// runs, the control socket's `stats` answers.
    pub fn stats(&self) -> BridgeStats {
        let mut s = BridgeStats {
            egress: DirStats::default(),
            ingress: DirStats::default(),
            egress_qdisc: QdiscStats::default(),
            ingress_qdisc: QdiscStats::default(),
        };
        for q in self.queue_stats() {
            s.egress.add(&q.egress);
            s.ingress.add(&q.ingress);
            cmq::add_stats(&mut s.egress_qdisc, &q.egress_qdisc);
            cmq::add_stats(&mut s.ingress_qdisc, &q.ingress_qdisc);
        }
        s
    }

    /// Each queue's counters, in queue order (empty while running: see [`stats`](Self::stats)).
    pub fn queue_stats(&self) -> Vec<BridgeStats> {
        self.workers.iter().map(Bridge::stats).collect()
    }

    /// Queue `queue`'s stage in `dir` (`None` beyond the queues, or while running).
    pub fn stage(&self, queue: usize, dir: Direction) -> Option<&QueueStage> {
        self.workers.get(queue).map(|b| b.stage(dir))
    }

    /// Both directions' statistics as `tc -s qdisc show` prints a multi-queue root and its
    /// children (`cake_mq` summed over its shards, or `mq`), each queue followed by its
    /// dataplane line and each direction by the summed one. While not running (as
    /// [`stats`](Self::stats)).
    pub fn stats_text(&self) -> String {
        self.format_text(&self.reports())
    }

    /// JSON: an array with one object per direction, egress first: the summed root (`cake_mq`
    /// with tc's cake keys, or `mq`), `dev`, the summed `purple` dataplane counters, and
    /// `queues`: each queue's own object with its `parent`, `purple` counters, and for cake_mq
    /// shards `active_queues` and `share`. While not running (as [`stats`](Self::stats)).
    pub fn stats_json(&self) -> String {
        self.format_json(&self.reports())
    }
}

forwarder_by_inherent_methods!(MqBridge);

impl LoopOptions for MqBridge {
    fn set_spin_ns(&mut self, ns: u64) {
        self.workers.iter_mut().for_each(|b| b.set_spin_ns(ns));
    }
    fn set_batch_ns(&mut self, ns: u64) {
        self.workers.iter_mut().for_each(|b| b.set_batch_ns(ns));
    }
    fn set_busy_poll_ns(&mut self, ns: u64) {
        self.workers.iter_mut().for_each(|b| b.set_busy_poll_ns(ns));
    }
    fn set_rejoin(&mut self, on: bool) {
        self.workers.iter_mut().for_each(|b| b.set_rejoin(on));
    }
    /// Stored: each forwarding thread puts itself under `SCHED_FIFO` when it starts (an error
    /// then ends the run).
    fn set_rt_priority(&mut self, priority: i32) -> Result<(), Error> {
        self.rt_priority = Some(priority);
        Ok(())
    }
}
