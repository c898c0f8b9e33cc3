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

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::Duration;

use cake::mq::{self as cmq, Shard, ShardActivity, ShardPeers};
use cake::tc::{stats_json, stats_text, QdiscHeader};
use cake::{AnyQdisc, CakeConfig, CakeStats};
use controller::ctl::{DirNames, RateVerb, Request, Response};
use controller::Direction;
use qdisc::tc_units::format_rate;
use qdisc::{Dequeue, Dropped, Instant, NoShaper, Packet, Qdisc, QdiscStats};
use serde_json::{json, Value};

use crate::bridge::stage::{first_object, on_dev, root_json};
use crate::bridge::{dir_index, io_err, Fanout, JobSender};
use crate::ctl_server::{Access, CtlSocket};
use crate::{
    Bridge, BridgeConfig, BridgeStats, DirStats, Error, Forwarder, LoopOptions, Stage, Stopper,
};
use os::{Epoll, EventFd, SignalFd};

/// The most queues (forwarding threads) a multi-queue bridge runs.
pub const MAX_QUEUES: usize = 64;
/// How long the coordinator waits for every queue's loop to answer a control command.
const REPLY_TIMEOUT: Duration = Duration::from_secs(1);

const TOK_STOP: u64 = 0;
const TOK_SIG: u64 = 1;
const TOK_CTL: u64 = 2;
const TOK_EXIT: u64 = 3;

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

    /// The shard's configuration, with the group's configured rate.
    fn display_config(&self) -> CakeConfig {
        let mut c = self.shard.cake().config().clone();
        c.rate_bps = self.shard.configured_rate();
        c
    }
}

impl Qdisc for SharedShard {
    fn enqueue(&mut self, now: Instant, pkt: Packet, drops: &mut Vec<Dropped>) {
        self.shard.enqueue(now, pkt, drops);
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
    fn set_rate(&mut self, rate: Option<u64>) -> Result<(), NoShaper> {
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
        let cfg = self.display_config();
        let t = stats_text(
            &cfg,
            &self.shard.cake().cake_stats(),
            QdiscHeader::for_config(&cfg),
        );
        let mut t = on_dev(&t, dev);
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
        let cfg = self.display_config();
        let t = stats_json(
            &cfg,
            &self.shard.cake().cake_stats(),
            QdiscHeader::for_config(&cfg),
        );
        let mut v = first_object(&t).unwrap_or_else(|| json!({"kind": "cake"}));
        if let Value::Object(m) = &mut v {
            m.insert("active_queues".into(), json!(self.shard.active_shards()));
            m.insert("share".into(), json!(self.shard.share()));
        }
        v
    }
}

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

impl Qdisc for QueueStage {
    #[inline]
    fn enqueue(&mut self, now: Instant, pkt: Packet, drops: &mut Vec<Dropped>) {
        each!(self, q => q.enqueue(now, pkt, drops))
    }
    #[inline]
    fn dequeue(&mut self, now: Instant, drops: &mut Vec<Dropped>) -> Dequeue {
        each!(self, q => q.dequeue(now, drops))
    }
    fn set_rate(&mut self, rate: Option<u64>) -> Result<(), NoShaper> {
        each!(self, q => q.set_rate(rate))
    }
    fn stats(&self) -> QdiscStats {
        each!(self, q => q.stats())
    }
    fn kind(&self) -> &'static str {
        each!(self, q => q.kind())
    }
    fn shrink(&mut self) -> usize {
        each!(self, q => q.shrink())
    }
}

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
enum DirKind {
    /// A cake_mq group configured with this (its rate follows `set-bandwidth`).
    Mq(CakeConfig),
    /// One instance of this qdisc per queue.
    PerQueue(&'static str),
}

/// Whether `q` shapes to a rate of its own (so that one instance per queue would multiply it).
fn shapes(q: &AnyQdisc) -> bool {
    match q {
        AnyQdisc::Cake(c) => c.rate() != 0 || c.config().autorate,
        AnyQdisc::Htb(_) => true,
        _ => false,
    }
}

/// Parses one direction's qdisc for `queues` queues: its kind and one stage per queue.
fn plan(
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

/// One queue's statistics, as the coordinator gathers them.
#[derive(Debug)]
struct QueueReport {
    dirs: [DirReport; 2],
}

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
fn report(br: &Bridge<QueueStage>) -> QueueReport {
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

/// A forwarding thread's bridge, handed back when its loop ends, and how it ended.
type Finished = (Bridge<QueueStage>, Result<(), Error>);

/// The number of queues to run when none is given: the CPUs this process may use.
pub fn default_queues() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(MAX_QUEUES))
}

impl MqBridge {
    /// Parses both directions' qdiscs for `queues` queues (`cake_mq ARGS` for a shared rate, or
    /// any qdisc of [`AnyQdisc::from_tc`], one instance per queue), opens a pair of packet
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
        let ctl = match &cfg.ctl_path {
            Some(p) => Some(CtlSocket::bind(
                p,
                Access {
                    group: cfg.ctl_group,
                },
            )?),
            None => None,
        };
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

    /// Runs one forwarding thread per queue and serves the control socket in the calling thread
    /// until stopped (a [`Stopper`], a signal after [`stop_on_signals`](Self::stop_on_signals))
    /// or until a forwarding thread ends with an error, which is returned. Packets still queued
    /// at the end are discarded; the statistics stay readable.
    pub fn run(&mut self) -> Result<(), Error> {
        let server = match &self.ctl {
            Some(c) => Some(c.serve().map_err(io_err("control socket thread"))?),
            None => None,
        };
        let epoll = Epoll::new().map_err(io_err("epoll"))?;
        let exited = Arc::new(EventFd::new().map_err(io_err("eventfd"))?);
        let add = |fd, tok| {
            epoll
                .add(fd, os::READABLE, tok)
                .map_err(io_err("epoll_ctl"))
        };
        add(self.stop.raw_fd(), TOK_STOP)?;
        add(exited.raw_fd(), TOK_EXIT)?;
        if let Some(s) = &self.signals {
            add(s.raw_fd(), TOK_SIG)?;
        }
        if let Some(s) = &server {
            add(s.wake_fd(), TOK_CTL)?;
        }
        let cpu0 = os::thread_cpu_ns();
        self.run_cpu_ns = 0;
        let mut stoppers = Vec::with_capacity(self.queues);
        let mut handles: Vec<JoinHandle<Finished>> = Vec::with_capacity(self.queues);
        let mut result = Ok(());
        for (i, mut br) in std::mem::take(&mut self.workers).into_iter().enumerate() {
            stoppers.push(br.stopper());
            let (ex, rt) = (Arc::clone(&exited), self.rt_priority);
            let spawned = std::thread::Builder::new()
                .name(format!("purple-q{i}"))
                .spawn(move || {
                    let r = match rt {
                        Some(p) => LoopOptions::set_rt_priority(&mut br, p),
                        None => Ok(()),
                    }
                    .and_then(|()| br.run());
                    ex.signal();
                    (br, r)
                });
            match spawned {
                Ok(h) => handles.push(h),
                Err(e) => {
                    result = Err(io_err(format!("forwarding thread {i}"))(e));
                    break;
                }
            }
        }
        let mut ready = Vec::with_capacity(8);
        while result.is_ok() {
            if let Err(e) = epoll.wait(&mut ready, -1) {
                result = Err(io_err("epoll_wait")(e));
                break;
            }
            if ready
                .iter()
                .any(|&t| matches!(t, TOK_STOP | TOK_SIG | TOK_EXIT))
            {
                break;
            }
            if let Some(s) = &server {
                while let Some(req) = s.next_request() {
                    let answer = self.execute(req.request);
                    req.answer(answer);
                }
            }
        }
        self.stop.clear();
        for s in &stoppers {
            s.stop();
        }
        for h in handles {
            match h.join() {
                Ok((br, r)) => {
                    self.run_cpu_ns += br.run_cpu_ns();
                    self.workers.push(br);
                    if let (Ok(()), Err(e)) = (&result, r) {
                        result = Err(e);
                    }
                }
                Err(_) => {
                    if result.is_ok() {
                        result = Err(Error::Io {
                            what: format!("bridge {}", self.name),
                            err: io::Error::other("a forwarding thread panicked"),
                        });
                    }
                }
            }
        }
        self.run_cpu_ns += os::thread_cpu_ns().saturating_sub(cpu0);
        result
    }

    /// CPU time (ns) the forwarding threads and the coordinator spent in the last
    /// [`run`](Self::run), together.
    pub fn run_cpu_ns(&self) -> u64 {
        self.run_cpu_ns
    }

    /// Runs `f` on every queue's bridge and returns the results in queue order: directly when
    /// the bridge is not running, else as jobs in each forwarding loop (between two of its
    /// passes), waiting at most [`REPLY_TIMEOUT`] for all of them.
    fn gather<T: Send + 'static>(
        &mut self,
        f: impl Fn(&mut Bridge<QueueStage>) -> T + Clone + Send + 'static,
    ) -> Result<Vec<T>, String> {
        if !self.workers.is_empty() {
            return Ok(self.workers.iter_mut().map(f).collect());
        }
        let (tx, rx) = mpsc::channel();
        for (i, s) in self.senders.iter().enumerate() {
            let (tx, f) = (tx.clone(), f.clone());
            if !s.send(Box::new(move |br| {
                let _ = tx.send((i, f(br)));
            })) {
                return Err(format!("queue {i} is not running"));
            }
        }
        drop(tx);
        let mut out: Vec<Option<T>> = (0..self.senders.len()).map(|_| None).collect();
        let end = os::monotonic_ns() + REPLY_TIMEOUT.as_nanos() as u64;
        for _ in 0..out.len() {
            let left = Duration::from_nanos(end.saturating_sub(os::monotonic_ns()));
            match rx.recv_timeout(left) {
                Ok((i, v)) => out[i] = Some(v),
                Err(_) => {
                    return Err(format!(
                        "not every queue answered within {} ms",
                        REPLY_TIMEOUT.as_millis()
                    ))
                }
            }
        }
        Ok(out.into_iter().flatten().collect())
    }

    /// Carries out one control request and answers it.
    fn execute(&mut self, request: Request) -> Response {
        match request {
            Request::Stats { json } => {
                let reports = self.gather(|br| {
                    br.refresh_kernel_drops();
                    report(br)
                });
                match reports {
                    Ok(r) if json => Response::StatsJson(self.format_json(&r)),
                    Ok(r) => Response::StatsText(self.format_text(&r)),
                    Err(e) => Response::Error(e),
                }
            }
            Request::SetBandwidth { dir, rate } => self.set_rate(dir, rate, RateVerb::Bandwidth),
            Request::SetRate { dir, rate } => self.set_rate(dir, rate, RateVerb::Rate),
            Request::Passive => Response::Error(
                "the passive delay estimate runs on the single-queue bridge only (purple bridge \
                 --passive without --queues)"
                    .to_string(),
            ),
        }
    }

    /// Applies `set-bandwidth` (or `set-rate`) to every queue of `dir`.
    fn set_rate(&mut self, dir: Direction, rate: Option<u64>, verb: RateVerb) -> Response {
        let d = dir_index(dir);
        // A qdisc that can shape (cake, htb) would shape each of its instances at the rate; one
        // that cannot answers with its own error below.
        if let (DirKind::PerQueue(kind @ ("cake" | "htb")), true) =
            (&self.kinds[d], self.queues > 1)
        {
            return Response::Error(format!(
                "{} qdisc {kind} runs one instance per queue ({} queues): a rate would shape \
                 each queue at it; use cake_mq to share one rate",
                DirNames::EgressIngress.name(dir),
                self.queues
            ));
        }
        match self.gather(move |br| br.set_rate(dir, rate, verb)) {
            Ok(answers) => {
                if let Some(e) = answers.iter().find(|a| matches!(a, Response::Error(_))) {
                    return e.clone();
                }
                if let DirKind::Mq(c) = &mut self.kinds[d] {
                    c.rate_bps = rate.unwrap_or(0);
                }
                // Every queue answers alike; there is at least one queue.
                answers
                    .into_iter()
                    .next()
                    .unwrap_or_else(|| Response::Error("no queue answered".to_string()))
            }
            Err(e) => Response::Error(e),
        }
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

    fn format_text(&self, reports: &[QueueReport]) -> String {
        let mut out = String::new();
        for d in 0..2 {
            let rs: Vec<&DirReport> = reports.iter().map(|r| &r.dirs[d]).collect();
            let Some(first) = rs.first() else {
                continue;
            };
            let (name, dev) = (first.name, first.dev.as_str());
            let mut sum = DirStats::default();
            rs.iter().for_each(|r| sum.add(&r.stats));
            let parent = match &self.kinds[d] {
                DirKind::Mq(cfg) => {
                    let shards: Vec<CakeStats> = rs.iter().filter_map(|r| r.cake.clone()).collect();
                    let total = cmq::sum_stats(cfg, &shards);
                    let header = QdiscHeader {
                        handle_major: cfg.handle_major,
                        refcnt: self.queues as u32 + 1,
                    };
                    let t = stats_text(cfg, &total, header);
                    out.push_str(&t.replacen("qdisc cake ", "qdisc cake_mq ", 1).replacen(
                        " root ",
                        &format!(" dev {dev} root "),
                        1,
                    ));
                    format!("{:x}:", cfg.handle_major)
                }
                DirKind::PerQueue(_) => {
                    let mut q = QdiscStats::default();
                    rs.iter().for_each(|r| cmq::add_stats(&mut q, &r.qdisc));
                    out.push_str(&format!(
                        "qdisc mq 0: dev {dev} root refcnt {}\n Sent {} bytes {} pkt (dropped {}, \
                         overlimits {} requeues 0)\n backlog {}b {}p requeues 0\n\n",
                        self.queues + 1,
                        q.dequeued.bytes,
                        q.dequeued.packets,
                        q.dropped_total().packets,
                        q.overlimits,
                        q.backlog.bytes,
                        q.backlog.packets
                    ));
                    ":".to_string()
                }
            };
            for (i, r) in rs.iter().enumerate() {
                let kind = r.json["kind"].as_str().unwrap_or("qdisc");
                out.push_str(&as_child(&r.text, kind, dev, &parent, i));
                out.push_str(&r.stats.text_line(&format!("{name} queue {i}")));
            }
            out.push_str(&sum.text_line(name));
        }
        out
    }

    fn format_json(&self, reports: &[QueueReport]) -> String {
        let mut arr = Vec::new();
        for d in 0..2 {
            let rs: Vec<&DirReport> = reports.iter().map(|r| &r.dirs[d]).collect();
            let Some(first) = rs.first() else {
                continue;
            };
            let (name, dev) = (first.name, first.dev.as_str());
            let mut sum = DirStats::default();
            rs.iter().for_each(|r| sum.add(&r.stats));
            let (mut root, parent) = match &self.kinds[d] {
                DirKind::Mq(cfg) => {
                    let shards: Vec<CakeStats> = rs.iter().filter_map(|r| r.cake.clone()).collect();
                    let total = cmq::sum_stats(cfg, &shards);
                    let header = QdiscHeader {
                        handle_major: cfg.handle_major,
                        refcnt: self.queues as u32 + 1,
                    };
                    let mut v =
                        first_object(&stats_json(cfg, &total, header)).unwrap_or_else(|| json!({}));
                    if let Value::Object(m) = &mut v {
                        m.insert("kind".into(), json!("cake_mq"));
                    }
                    (v, format!("{:x}:", cfg.handle_major))
                }
                DirKind::PerQueue(_) => {
                    let mut q = QdiscStats::default();
                    rs.iter().for_each(|r| cmq::add_stats(&mut q, &r.qdisc));
                    let v = root_json("mq", self.queues + 1, &q);
                    (v, ":".to_string())
                }
            };
            let queues: Vec<Value> = rs
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
            let err = rs.iter().find_map(|r| r.last_tx_error.as_deref());
            if let Value::Object(m) = &mut root {
                m.insert("dev".into(), json!(dev));
                m.insert("purple".into(), sum.json(name, err));
                m.insert("queues".into(), Value::Array(queues));
            }
            arr.push(root);
        }
        let mut out = Value::Array(arr).to_string();
        out.push('\n');
        out
    }
}

impl Forwarder for MqBridge {
    fn stopper(&self) -> Stopper {
        MqBridge::stopper(self)
    }
    fn run(&mut self) -> Result<(), Error> {
        MqBridge::run(self)
    }
    fn stats_json(&self) -> String {
        MqBridge::stats_json(self)
    }
    fn run_cpu_ns(&self) -> u64 {
        MqBridge::run_cpu_ns(self)
    }
}

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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

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

    #[test]
    fn a_root_qdisc_line_becomes_a_child_line() {
        let t = "qdisc cake 8001: dev b1 root refcnt 2 bandwidth 1Gbit besteffort \n Sent 0\n";
        assert_eq!(
            as_child(t, "cake", "b1", "8001:", 1),
            "qdisc cake 0: dev b1 parent 8001:2 bandwidth 1Gbit besteffort \n Sent 0\n"
        );
    }

    /// Two shards on one board, stepped alternately in one thread: each sees the other through
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
