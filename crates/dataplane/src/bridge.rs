//! The bridge: two packet sockets, two qdiscs, one event loop.

use std::io;
use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;

use cake::tc::{stats_json, stats_text, QdiscHeader};
use cake::AnyQdisc;
use controller::ctl::{DirNames, RateVerb, Request, Response};
use controller::passive::{PassiveDelay, PassiveParams, ReadingWire, Side};
use controller::Direction;
use qdisc::{Dequeue, Dropped, Instant, Packet, PacketMeta, Qdisc, QdiscStats};
use serde_json::{json, Value};

use crate::ctl_server::{Access, CtlServer, CtlSocket};
use crate::pool::{self, Pool, RX_BUF};
use crate::rejoin::Rejoiner;
use crate::vnet::VnetHdr;
use os::{Epoll, EventFd, PacketSocket, SignalFd, TimerFd, MAX_BATCH, VNET_HDR_LEN};

/// Bytes freed since the allocator last returned memory to the system, above which the bridge
/// asks it to ([`os::release_free_memory`]) once its queues have drained.
const RELEASE_THRESHOLD: usize = 1 << 20;
/// Kernel socket buffer size requested for each packet socket.
const SOCK_BUF: usize = 8 << 20;
/// By default the loop spins (instead of sleeping) this close to the shaper's next release time.
pub const DEFAULT_SPIN_NS: u64 = 25_000;
/// Receive batches per socket per loop iteration, and transmit batches per direction.
const BUDGET: usize = 8;

const TOK_A: u64 = 0;
const TOK_B: u64 = 1;
const TOK_TIMER: u64 = 2;
const TOK_CTL: u64 = 3;
const TOK_STOP: u64 = 4;
const TOK_SIG: u64 = 5;
const TOK_JOBS: u64 = 6;

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
            Some(c) => {
                let mut cfg = c.config().clone();
                cfg.rate_bps = c.rate();
                let t = stats_text(&cfg, &c.cake_stats(), QdiscHeader::for_config(&cfg));
                t.replacen(" root ", &format!(" dev {dev} root "), 1)
            }
            None => {
                let q = self.stats();
                format!(
                    "qdisc {} 0: dev {dev} root refcnt 2\n Sent {} bytes {} pkt (dropped {}, overlimits {} requeues 0)\n backlog {}b {}p requeues 0\n",
                    self.kind(),
                    q.dequeued.bytes,
                    q.dequeued.packets,
                    q.dropped_total().packets,
                    q.overlimits,
                    q.backlog.bytes,
                    q.backlog.packets
                )
            }
        }
    }

    /// `tc -j -s qdisc show`'s object.
    fn stage_json(&self, _dev: &str, _now: Instant) -> Value {
        match self.as_cake() {
            Some(c) => {
                let mut cfg = c.config().clone();
                cfg.rate_bps = c.rate();
                let t = stats_json(&cfg, &c.cake_stats(), QdiscHeader::for_config(&cfg));
                match serde_json::from_str::<Value>(&t) {
                    Ok(Value::Array(mut v)) if !v.is_empty() => v.swap_remove(0),
                    _ => json!({"kind": "cake"}),
                }
            }
            None => {
                let q = self.stats();
                json!({
                    "kind": self.kind(), "handle": "0:", "root": true, "refcnt": 2,
                    "bytes": q.dequeued.bytes, "packets": q.dequeued.packets,
                    "drops": q.dropped_total().packets, "overlimits": q.overlimits,
                    "requeues": 0, "backlog": q.backlog.bytes, "qlen": q.backlog.packets,
                })
            }
        }
    }
}

/// What to build.
#[derive(Clone, Debug)]
pub struct BridgeConfig {
    /// The LAN-side interface.
    pub if_a: String,
    /// The WAN-side interface.
    pub if_b: String,
    /// The egress (A to B) qdisc in tc syntax, e.g. `cake bandwidth 20Mbit nat` (ignored by
    /// [`Bridge::with_stages`]).
    pub egress: String,
    /// The ingress (B to A) qdisc in tc syntax (ignored by [`Bridge::with_stages`]).
    pub ingress: String,
    /// The bridge's name (prefixes error messages).
    pub name: String,
    /// Where to listen for control commands (`None`: no control socket). The socket is created
    /// with mode 0600 (its directory, when created, 0700) and removed when the bridge is dropped;
    /// a stale socket there is replaced, anything else refused (see [`crate::ctl_server`]).
    pub ctl_path: Option<PathBuf>,
    /// Also admit this group (gid) to the control socket, besides root and the bridge's own
    /// user; the socket file is then mode 0660 and owned by the group (its directory, when
    /// created, 0750). See [`crate::ctl_server::lookup_group`].
    pub ctl_group: Option<u32>,
    /// Seed for the qdiscs' randomness.
    pub seed: u64,
}

/// Errors from building or running a bridge.
#[derive(Debug)]
pub enum Error {
    /// A qdisc specification did not parse.
    Qdisc(String),
    /// The passive delay estimator's parameters are out of range.
    Passive(String),
    /// A system call failed; `what` says which step.
    Io {
        /// The step.
        what: String,
        /// The error.
        err: io::Error,
    },
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Qdisc(e) | Error::Passive(e) => write!(f, "{e}"),
            Error::Io { what, err } => write!(f, "{what}: {err}"),
        }
    }
}

impl std::error::Error for Error {}

fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> Error {
    let what = what.into();
    move |err| Error::Io { what, err }
}

/// Per-direction dataplane counters. Invariants: `rx_packets == offered + bypassed + truncated`,
/// and `tx_packets + tx_errors + pending == qdisc dequeued packets + bypassed`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DirStats {
    /// Frames received from the input interface.
    pub rx_packets: u64,
    /// Their bytes (Ethernet header on, virtio-net header off).
    pub rx_bytes: u64,
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

/// A handle that stops a running [`Bridge`] from any thread.
#[derive(Clone, Debug)]
pub struct Stopper(Arc<EventFd>);

impl Stopper {
    /// A stopper signalling `fd`.
    pub(crate) fn new(fd: Arc<EventFd>) -> Stopper {
        Stopper(fd)
    }

    /// Asks the bridge to stop; [`Bridge::run`] returns soon after.
    pub fn stop(&self) {
        self.0.signal();
    }
}

/// Work another thread hands to a bridge's forwarding loop, run between two of its passes
/// (the multi-queue bridge's coordinator reads statistics and changes rates this way).
pub(crate) type Job<Q> = Box<dyn FnOnce(&mut Bridge<Q>) + Send>;

/// Hands [`Job`]s to one bridge's loop ([`Bridge::job_sender`]).
pub(crate) struct JobSender<Q: Stage> {
    tx: Sender<Job<Q>>,
    wake: Arc<EventFd>,
}

impl<Q: Stage> JobSender<Q> {
    /// Queues `job` and wakes the loop; false when the bridge is gone.
    pub(crate) fn send(&self, job: Job<Q>) -> bool {
        let ok = self.tx.send(job).is_ok();
        self.wake.signal();
        ok
    }
}

impl<Q: Stage> std::fmt::Debug for JobSender<Q> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JobSender")
    }
}

/// The loop's end of a [`JobSender`].
struct JobInbox<Q: Stage> {
    rx: Receiver<Job<Q>>,
    wake: Arc<EventFd>,
}

impl<Q: Stage> std::fmt::Debug for JobInbox<Q> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JobInbox")
    }
}

/// How a bridge's packet sockets share their interfaces with other bridges' (the queues of a
/// multi-queue bridge): not at all, as the first member of a new fanout group per interface,
/// or joining the groups with these ids (interface A's, interface B's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fanout {
    None,
    New,
    Join([u16; 2]),
}

#[derive(Debug)]
struct Dir<Q> {
    dir: Direction,
    qdisc: Q,
    /// Socket index (0 = A, 1 = B) frames leave on.
    tx: usize,
    pending: Vec<Packet>,
    pending_hdrs: Vec<[u8; VNET_HDR_LEN]>,
    /// How many dequeued packets each pending frame carries (more than 1: rejoined).
    pending_segs: Vec<u32>,
    sent: usize,
    /// Monotonic ns at which the qdisc wants `dequeue` again.
    next: Option<u64>,
    /// The release time from the qdisc's last `NotBefore`, until it is served.
    shaper_deadline: Option<u64>,
    /// After a dequeue pass stopped by the shaper, no new pass before this time (monotonic ns;
    /// see [`Bridge::set_batch_ns`]); 0 when the last pass emptied the queue.
    hold_until: u64,
    stats: DirStats,
    last_tx_error: Option<String>,
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

#[derive(Debug)]
struct RxSlots {
    hdrs: [[u8; VNET_HDR_LEN]; MAX_BATCH],
    bufs: Vec<Vec<u8>>,
    trunc: [bool; MAX_BATCH],
}

/// A running-or-ready bridge between two interfaces, running a [`Stage`] per direction
/// (by default a qdisc parsed from tc syntax).
#[derive(Debug)]
pub struct Bridge<Q: Stage = AnyQdisc> {
    cfg: BridgeConfig,
    socks: [PacketSocket; 2],
    /// dirs[0] = egress (rx A, tx B), dirs[1] = ingress (rx B, tx A).
    dirs: [Dir<Q>; 2],
    epoll: Epoll,
    timer: TimerFd,
    stop: Arc<EventFd>,
    signals: Option<SignalFd>,
    ctl: Option<CtlSocket>,
    rx: RxSlots,
    pool: Pool,
    /// Frames were enqueued since the memory was last trimmed (see
    /// [`release_memory`](Self::release_memory)).
    queued_since_trim: bool,
    /// Bytes freed (pool buffers, qdisc storage) since memory was last returned to the system.
    freed_since_release: usize,
    drops: Vec<Dropped>,
    interest: [u32; 2],
    /// The absolute time the timerfd is armed for (0: not armed).
    armed_at: u64,
    /// Spin instead of sleeping when the next release time is this close (ns).
    spin_ns: u64,
    /// Least time between two shaper-limited dequeue passes of a direction (ns); 0: none.
    batch_ns: u64,
    /// After a frame arrives, keep polling (no sleep) this long (ns); 0: off.
    busy_poll_ns: u64,
    /// Monotonic ns until which the loop keeps polling.
    busy_until: u64,
    /// Rebuild super-packets from segments leaving together (default on).
    rejoin: bool,
    rejoiner: Rejoiner,
    /// The passive delay estimator ([`Bridge::set_passive`]): frames received on the WAN side
    /// (B) and frames sent out of it, at their receive and send times.
    passive: Option<PassiveDelay>,
    /// Jobs from another thread ([`Bridge::job_sender`]).
    jobs: Option<JobInbox<Q>>,
    /// CPU time this bridge's thread spent in the last [`run`](Bridge::run), ns.
    run_cpu_ns: u64,
}

fn now_ns() -> u64 {
    os::monotonic_ns()
}

/// True when a qdisc asked to be dequeued at or before now.
fn due(next: Option<u64>) -> bool {
    match next {
        Some(t) => t <= now_ns(),
        None => false,
    }
}

impl Bridge {
    /// Parses the qdiscs, opens both interfaces (promiscuous, virtio-net headers) and the control
    /// socket. Nothing is forwarded until [`run`](Self::run).
    pub fn new(cfg: BridgeConfig) -> Result<Bridge, Error> {
        let q = |spec: &str, seed: u64| {
            if spec.split_whitespace().next() == Some("cake_mq") {
                return Err(Error::Qdisc(format!(
                    "bridge {}: qdisc {spec:?}: cake_mq runs one CAKE per queue, each in its own \
                     forwarding thread: use the multi-queue bridge (dataplane::MqBridge, \
                     `purple bridge --queues N`)",
                    cfg.name
                )));
            }
            AnyQdisc::from_tc(spec, seed)
                .map_err(|e| Error::Qdisc(format!("bridge {}: qdisc {spec:?}: {e}", cfg.name)))
        };
        if cfg.if_a == cfg.if_b {
            return Err(Error::Io {
                what: format!("bridge {}", cfg.name),
                err: io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "the two interfaces must differ",
                ),
            });
        }
        let egress = q(&cfg.egress, cfg.seed)?;
        let ingress = q(&cfg.ingress, cfg.seed.wrapping_add(1))?;
        Bridge::with_stages(cfg, egress, ingress)
    }
}

impl<Q: Stage> Bridge<Q> {
    /// Opens both interfaces (promiscuous, virtio-net headers) and the control socket, to run
    /// `egress` (A to B) and `ingress` (B to A); `cfg.egress` and `cfg.ingress` are not used.
    /// Nothing is forwarded until [`run`](Self::run).
    pub fn with_stages(cfg: BridgeConfig, egress: Q, ingress: Q) -> Result<Bridge<Q>, Error> {
        Self::open(cfg, egress, ingress, Fanout::None).map(|(b, _)| b)
    }

    /// [`with_stages`](Self::with_stages), the packet sockets sharing their interfaces as
    /// `fanout` says; returns the bridge and the ids of its fanout groups (interface A's,
    /// interface B's; zeros without fanout).
    pub(crate) fn open(
        cfg: BridgeConfig,
        egress: Q,
        ingress: Q,
        fanout: Fanout,
    ) -> Result<(Bridge<Q>, [u16; 2]), Error> {
        if cfg.if_a == cfg.if_b {
            return Err(Error::Io {
                what: format!("bridge {}", cfg.name),
                err: io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "the two interfaces must differ",
                ),
            });
        }
        let a = PacketSocket::open(&cfg.if_a, SOCK_BUF)
            .map_err(io_err(format!("open {}", cfg.if_a)))?;
        let b = PacketSocket::open(&cfg.if_b, SOCK_BUF)
            .map_err(io_err(format!("open {}", cfg.if_b)))?;
        let mut groups = [0u16; 2];
        for (i, (sock, ifname)) in [(&a, &cfg.if_a), (&b, &cfg.if_b)].into_iter().enumerate() {
            let what = || format!("PACKET_FANOUT on {ifname}");
            match fanout {
                Fanout::None => {}
                Fanout::New => groups[i] = sock.fanout_new().map_err(io_err(what()))?,
                Fanout::Join(ids) => {
                    sock.fanout_join(ids[i]).map_err(io_err(what()))?;
                    groups[i] = ids[i];
                }
            }
        }
        let epoll = Epoll::new().map_err(io_err("epoll"))?;
        let timer = TimerFd::new().map_err(io_err("timerfd"))?;
        let stop = Arc::new(EventFd::new().map_err(io_err("eventfd"))?);
        let add = |fd, tok| {
            epoll
                .add(fd, os::READABLE, tok)
                .map_err(io_err("epoll_ctl"))
        };
        add(a.raw_fd(), TOK_A)?;
        add(b.raw_fd(), TOK_B)?;
        add(timer.raw_fd(), TOK_TIMER)?;
        add(stop.raw_fd(), TOK_STOP)?;
        let ctl = match &cfg.ctl_path {
            Some(p) => Some(CtlSocket::bind(
                p,
                Access {
                    group: cfg.ctl_group,
                },
            )?),
            None => None,
        };
        let dir = |d, qdisc: Q, tx| Dir {
            dir: d,
            qdisc,
            tx,
            pending: Vec::with_capacity(MAX_BATCH * BUDGET),
            pending_hdrs: Vec::with_capacity(MAX_BATCH * BUDGET),
            pending_segs: Vec::with_capacity(MAX_BATCH * BUDGET),
            sent: 0,
            next: None,
            shaper_deadline: None,
            hold_until: 0,
            stats: DirStats::default(),
            last_tx_error: None,
        };
        let bridge = Bridge {
            socks: [a, b],
            dirs: [
                dir(Direction::Up, egress, 1),
                dir(Direction::Down, ingress, 0),
            ],
            epoll,
            timer,
            stop,
            signals: None,
            ctl,
            rx: RxSlots {
                hdrs: [[0; VNET_HDR_LEN]; MAX_BATCH],
                bufs: (0..MAX_BATCH).map(|_| Vec::with_capacity(RX_BUF)).collect(),
                trunc: [false; MAX_BATCH],
            },
            pool: Pool::default(),
            queued_since_trim: false,
            freed_since_release: 0,
            drops: Vec::with_capacity(64),
            interest: [os::READABLE; 2],
            armed_at: 0,
            spin_ns: DEFAULT_SPIN_NS,
            batch_ns: 0,
            busy_poll_ns: 0,
            busy_until: 0,
            rejoin: true,
            rejoiner: Rejoiner::default(),
            passive: None,
            jobs: None,
            run_cpu_ns: 0,
            cfg,
        };
        Ok((bridge, groups))
    }

    /// A sender through which another thread hands jobs to this bridge's loop, which runs them
    /// between two passes while [`run`](Self::run) runs (the jobs wait otherwise). One per
    /// bridge: a second call replaces the first sender's channel.
    pub(crate) fn job_sender(&mut self) -> Result<JobSender<Q>, Error> {
        let wake = Arc::new(EventFd::new().map_err(io_err("eventfd"))?);
        if let Some(old) = self.jobs.take() {
            let _ = self.epoll.delete(old.wake.raw_fd());
        }
        self.epoll
            .add(wake.raw_fd(), os::READABLE, TOK_JOBS)
            .map_err(io_err("epoll_ctl"))?;
        let (tx, rx) = mpsc::channel();
        self.jobs = Some(JobInbox {
            rx,
            wake: Arc::clone(&wake),
        });
        Ok(JobSender { tx, wake })
    }

    /// Runs the jobs waiting in the inbox.
    fn run_jobs(&mut self) {
        let Some(inbox) = self.jobs.take() else {
            return;
        };
        inbox.wake.clear();
        while let Ok(job) = inbox.rx.try_recv() {
            job(self);
        }
        self.jobs = Some(inbox);
    }

    /// CPU time (ns) the thread that ran the last [`run`](Self::run) spent in it.
    pub fn run_cpu_ns(&self) -> u64 {
        self.run_cpu_ns
    }

    /// How close (ns) to the shaper's next release time the loop stops sleeping and spins
    /// (polls without blocking) until it is due; [`DEFAULT_SPIN_NS`] unless set. Larger values
    /// serve release times more punctually at the cost of CPU; 0 never spins (the timer alone
    /// wakes the loop, late by the machine's wake-up latency, which costs no rate as long as the
    /// queue stays backlogged: CAKE's shaper then releases the overdue packets together).
    pub fn set_spin_ns(&mut self, ns: u64) {
        self.spin_ns = ns;
    }

    /// While a direction's shaper is the limit (the queue backlogged), dequeue at most once per
    /// `ns` (0, the default: at every release time): each pass then releases the packets that
    /// fell due since the last, back to back, and a flow's split-gso segments among them go out
    /// as one super-packet ([`set_rejoin`](Self::set_rejoin)). The rate is unchanged (CAKE's
    /// shaper keeps its schedule and releases overdue packets together); the cost is up to `ns`
    /// of extra delay and bursts of `ns` worth of the shaped rate. A packet arriving at an empty
    /// queue is not held. At 1 Gbit/s, 50 µs batches about four 1514-byte segments per pass; at
    /// 20 Mbit/s (600 µs per segment) it changes nothing.
    pub fn set_batch_ns(&mut self, ns: u64) {
        self.batch_ns = ns;
    }

    /// After frames arrive, keep polling the sockets without sleeping for `ns` (0, the default:
    /// off), like the kernel's socket busy polling: a reply that comes back within that window
    /// (a ping's echo, a TCP ACK) is forwarded without the wake-up latency of a sleeping thread,
    /// at the cost of up to `ns` of CPU per burst of arrivals.
    pub fn set_busy_poll_ns(&mut self, ns: u64) {
        self.busy_poll_ns = ns;
    }

    /// Whether segments of one flow that CAKE cut from super-packets (`split-gso`) and that
    /// leave in the same batch go to the kernel as one super-packet again (default: on). The
    /// frames on the wire are the same either way; see [`crate::rejoin`].
    pub fn set_rejoin(&mut self, on: bool) {
        self.rejoin = on;
    }

    /// A handle to stop [`run`](Self::run) from another thread.
    pub fn stopper(&self) -> Stopper {
        Stopper(Arc::clone(&self.stop))
    }

    /// Makes SIGINT and SIGTERM stop the bridge cleanly. Blocks both signals in the calling
    /// thread, so call it before spawning threads that should inherit that.
    pub fn stop_on_signals(&mut self) -> Result<(), Error> {
        let s = SignalFd::termination().map_err(io_err("signalfd"))?;
        self.epoll
            .add(s.raw_fd(), os::READABLE, TOK_SIG)
            .map_err(io_err("epoll_ctl"))?;
        self.signals = Some(s);
        Ok(())
    }

    /// Counters of both directions.
    pub fn stats(&self) -> BridgeStats {
        BridgeStats {
            egress: self.dirs[0].snapshot(),
            ingress: self.dirs[1].snapshot(),
            egress_qdisc: self.dirs[0].qdisc.stats(),
            ingress_qdisc: self.dirs[1].qdisc.stats(),
        }
    }

    /// Forwards frames until stopped (a [`Stopper`], or a signal after
    /// [`stop_on_signals`](Self::stop_on_signals)). Packets still queued at that point are
    /// discarded. Errors only for failures of the event machinery itself; send and receive
    /// problems on single frames are counted instead. The control socket is served, by a
    /// thread of its own, while this runs.
    pub fn run(&mut self) -> Result<(), Error> {
        let server = match &self.ctl {
            Some(c) => Some(c.serve().map_err(io_err("control socket thread"))?),
            None => None,
        };
        if let Some(s) = &server {
            self.epoll
                .add(s.wake_fd(), os::READABLE, TOK_CTL)
                .map_err(io_err("epoll_ctl"))?;
        }
        let cpu0 = os::thread_cpu_ns();
        let r = self.forward(server.as_ref());
        self.run_cpu_ns = os::thread_cpu_ns().saturating_sub(cpu0);
        if let Some(s) = &server {
            let _ = self.epoll.delete(s.wake_fd());
        }
        r
    }

    /// The forwarding loop of [`run`](Self::run).
    fn forward(&mut self, ctl: Option<&CtlServer>) -> Result<(), Error> {
        os::tight_timer_slack();
        let mut ready = Vec::with_capacity(16);
        loop {
            let timeout = self.arm_timer()?;
            self.epoll
                .wait(&mut ready, timeout)
                .map_err(io_err("epoll_wait"))?;
            // Read only the sockets epoll reported (level-triggered: one left with data after
            // its budget is reported again at once), saving two empty `recvmmsg` calls on
            // every pass of the loop, which spins while a release time is close.
            let mut readable = [false; 2];
            for &t in &ready {
                match t {
                    TOK_A => readable[0] = true,
                    TOK_B => readable[1] = true,
                    TOK_STOP | TOK_SIG => {
                        self.stop.clear();
                        self.refresh_kernel_drops();
                        return Ok(());
                    }
                    TOK_TIMER => {
                        self.timer.clear();
                        self.armed_at = 0;
                    }
                    TOK_CTL => {
                        if let Some(c) = ctl {
                            self.serve_ctl(c);
                        }
                    }
                    TOK_JOBS => self.run_jobs(),
                    _ => {}
                }
            }
            for (s, _) in readable.iter().enumerate().filter(|(_, &r)| r) {
                self.receive(s)?;
            }
            for d in 0..2 {
                self.transmit(d);
            }
            self.update_interest()?;
            if self.queued_since_trim && self.drained() {
                self.release_memory();
            }
        }
    }

    /// True when neither direction holds a packet (queued or waiting to be sent).
    fn drained(&self) -> bool {
        self.dirs
            .iter()
            .all(|d| d.pending.is_empty() && d.qdisc.backlog().packets == 0)
    }

    /// After the queues drained: frees the pool's buffers above its low-water mark and the
    /// qdiscs' storage kept from the burst, and once a megabyte or more was freed since the
    /// last time, returns it to the system, so that a flood's memory does not stay with the
    /// process. Costs nothing when there is nothing to free; after a flood, one walk of the
    /// allocator's heaps (while the queues are empty).
    fn release_memory(&mut self) {
        self.queued_since_trim = false;
        self.pool.trim(pool::LOW_WATER);
        // What trim freed, and the buffers the pool freed instead of keeping while busy.
        let mut freed = self.pool.take_freed();
        for d in &mut self.dirs {
            freed += d.qdisc.shrink();
        }
        self.freed_since_release += freed;
        if self.freed_since_release >= RELEASE_THRESHOLD {
            os::release_free_memory();
            self.freed_since_release = 0;
        }
    }

    /// Arms the timer for the earliest shaper deadline; returns the epoll timeout (0 = spin).
    fn arm_timer(&mut self) -> Result<i32, Error> {
        let deadline = self
            .dirs
            .iter()
            .filter(|d| d.pending.is_empty())
            .filter_map(|d| d.next)
            .min();
        let now = now_ns();
        let idle = if now < self.busy_until { 0 } else { -1 };
        let Some(at) = deadline else {
            return Ok(idle);
        };
        if at <= now.saturating_add(self.spin_ns) {
            return Ok(0);
        }
        let wake = at - self.spin_ns;
        if wake != self.armed_at {
            self.timer
                .set_abs(wake)
                .map_err(io_err("timerfd_settime"))?;
            self.armed_at = wake;
        }
        Ok(idle)
    }

    fn receive(&mut self, s: usize) -> Result<(), Error> {
        // Socket A feeds egress (dirs[0]), socket B ingress (dirs[1]).
        let d = &mut self.dirs[s];
        // Frames arriving from the WAN, before the ingress qdisc, go to the passive estimator.
        let mut passive = if s == 1 { self.passive.as_mut() } else { None };
        for _ in 0..BUDGET {
            let n = match self.socks[s].recv_batch(
                &mut self.rx.hdrs,
                &mut self.rx.bufs,
                &mut self.rx.trunc,
            ) {
                Ok(n) => n,
                Err(e) if e.raw_os_error() == Some(libc::ENETDOWN) => 0,
                Err(e) => return Err(io_err("recvmmsg")(e)),
            };
            if n == 0 {
                break;
            }
            let now = Instant::from_nanos(now_ns());
            self.queued_since_trim = true;
            if self.busy_poll_ns > 0 {
                self.busy_until = now.as_nanos().saturating_add(self.busy_poll_ns);
            }
            for k in 0..n {
                let len = self.rx.bufs[k].len();
                d.stats.rx_packets += 1;
                d.stats.rx_bytes += len as u64;
                if self.rx.trunc[k] {
                    d.stats.truncated += 1;
                    self.rx.bufs[k].clear();
                    continue;
                }
                if let Some(p) = passive.as_deref_mut() {
                    p.on_frame(now, Side::FromWan, &self.rx.bufs[k]);
                }
                let h = VnetHdr::decode(&self.rx.hdrs[k]);
                // Into a buffer sized to the frame (at most twice its length), or, for frames
                // beyond the largest class, the receive slot's own buffer (see `pool`).
                let data = match self.pool.for_frame(len) {
                    Some(mut v) => {
                        v.extend_from_slice(&self.rx.bufs[k]);
                        self.rx.bufs[k].clear();
                        v
                    }
                    None => {
                        let fresh = self.pool.slot();
                        std::mem::replace(&mut self.rx.bufs[k], fresh)
                    }
                };
                let gso = match h.gso() {
                    Ok(g) if len >= 14 => g,
                    _ => {
                        // Forward unchanged, unqueued, with the header as received.
                        d.stats.bypassed += 1;
                        let mut out = h;
                        out.flags &= crate::vnet::F_NEEDS_CSUM;
                        d.pending_hdrs.push(out.encode());
                        d.pending_segs.push(1);
                        d.pending.push(Packet::new(data));
                        continue;
                    }
                };
                let pkt = Packet {
                    data,
                    meta: PacketMeta {
                        gso,
                        tag: h.to_tag(),
                        ..PacketMeta::default()
                    },
                };
                d.stats.offered += 1;
                d.qdisc.enqueue(now, pkt, &mut self.drops);
                for dr in self.drops.drain(..) {
                    self.pool.put(dr.packet.data);
                }
            }
            // The qdisc may now release earlier than it said before (not before the batch hold).
            d.next = Some(now.as_nanos().max(d.hold_until));
            if n < MAX_BATCH {
                break;
            }
        }
        Ok(())
    }

    fn transmit(&mut self, i: usize) {
        let batch_ns = self.batch_ns;
        let d = &mut self.dirs[i];
        let sock = &self.socks[d.tx];
        // Frames leaving on the WAN side, after the egress qdisc, go to the passive estimator.
        let mut passive = if d.tx == 1 {
            self.passive.as_mut()
        } else {
            None
        };
        for _ in 0..BUDGET {
            if d.pending.len() == d.sent {
                if !due(d.next) && d.pending.is_empty() {
                    return;
                }
                // Fill a batch from the qdisc.
                let now = Instant::from_nanos(now_ns());
                if let Some(t) = d.shaper_deadline.take() {
                    if t <= now.as_nanos() {
                        let late = now.as_nanos() - t;
                        d.stats.shaper_wakeups += 1;
                        d.stats.shaper_late_ns += late;
                        d.stats.shaper_late_max_ns = d.stats.shaper_late_max_ns.max(late);
                    } else {
                        d.shaper_deadline = Some(t);
                    }
                }
                d.next = None;
                let base = d.pending.len();
                while d.pending.len() < MAX_BATCH {
                    match d.qdisc.dequeue(now, &mut self.drops) {
                        Dequeue::Packet(p) => d.pending.push(p),
                        Dequeue::NotBefore(t) => {
                            d.hold_until = now.as_nanos().saturating_add(batch_ns);
                            d.next = Some(t.as_nanos().max(d.hold_until));
                            d.shaper_deadline = Some(t.as_nanos());
                            break;
                        }
                        Dequeue::Empty => {
                            d.hold_until = 0;
                            break;
                        }
                    }
                }
                let full = d.pending.len() == MAX_BATCH;
                self.rejoiner.run(
                    self.rejoin,
                    &mut d.pending,
                    base,
                    &mut d.pending_hdrs,
                    &mut d.pending_segs,
                    &mut self.pool,
                );
                for dr in self.drops.drain(..) {
                    self.pool.put(dr.packet.data);
                }
                if full && d.next.is_none() {
                    // Possibly more ready: come back at once.
                    d.next = Some(now.as_nanos());
                }
            }
            // Flush.
            while d.sent < d.pending.len() {
                let start = d.sent;
                let n = (d.pending.len() - start).min(MAX_BATCH);
                let (hdrs, pkts) = (&d.pending_hdrs, &d.pending);
                match sock.send_batch(n, |k| (&hdrs[start + k], &pkts[start + k].data)) {
                    Ok(0) => break,
                    Ok(m) => {
                        if let Some(est) = passive.as_deref_mut() {
                            let now = Instant::from_nanos(now_ns());
                            for p in &d.pending[start..start + m] {
                                est.on_frame(now, Side::ToWan, &p.data);
                            }
                        }
                        for ((p, h), &n) in d.pending[start..start + m]
                            .iter()
                            .zip(&d.pending_hdrs[start..start + m])
                            .zip(&d.pending_segs[start..start + m])
                        {
                            d.stats.tx_packets += u64::from(n);
                            d.stats.rejoined += u64::from(n > 1);
                            d.stats.tx_bytes += p.data.len() as u64;
                            d.stats.tx_wire_bytes +=
                                crate::vnet::wire_len(&VnetHdr::decode(h), &p.data);
                        }
                        d.sent += m;
                    }
                    Err(e) => {
                        d.stats.tx_errors += u64::from(d.pending_segs[start]);
                        d.last_tx_error = Some(e.to_string());
                        d.sent += 1;
                    }
                }
            }
            if d.sent < d.pending.len() {
                // Send buffer full: wait for EPOLLOUT.
                return;
            }
            for p in d.pending.drain(..) {
                self.pool.put(p.data);
            }
            d.pending_hdrs.clear();
            d.pending_segs.clear();
            d.sent = 0;
            if !due(d.next) {
                return;
            }
        }
    }

    fn update_interest(&mut self) -> Result<(), Error> {
        for s in 0..2 {
            // Socket s is the output of the direction whose tx == s.
            let blocked = self
                .dirs
                .iter()
                .any(|d| d.tx == s && d.sent < d.pending.len());
            let want = os::READABLE | if blocked { os::WRITABLE } else { 0 };
            if want != self.interest[s] {
                self.epoll
                    .modify(self.socks[s].raw_fd(), want, s as u64)
                    .map_err(io_err("epoll_ctl"))?;
                self.interest[s] = want;
            }
        }
        Ok(())
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

    /// Carries out the commands the control thread has waiting (called when its eventfd turns
    /// readable); each costs one command's work here, never a client's socket I/O.
    fn serve_ctl(&mut self, ctl: &CtlServer) {
        while let Some(req) = ctl.next_request() {
            let answer = self.execute(req.request);
            req.answer(answer);
        }
    }

    /// Carries out one control request and answers it.
    fn execute(&mut self, request: Request) -> Response {
        match request {
            Request::Stats { json } => {
                self.refresh_kernel_drops();
                if json {
                    Response::StatsJson(self.stats_json())
                } else {
                    Response::StatsText(self.stats_text())
                }
            }
            Request::SetBandwidth { dir, rate } => self.set_rate(dir, rate, RateVerb::Bandwidth),
            Request::SetRate { dir, rate } => self.set_rate(dir, rate, RateVerb::Rate),
            Request::Passive => match self.passive.as_mut() {
                Some(p) => {
                    let r = p.reading(Instant::from_nanos(now_ns()));
                    Response::Passive(ReadingWire::from(&r))
                }
                None => Response::Error(
                    "the passive delay estimate is off (purple bridge --passive)".to_string(),
                ),
            },
        }
    }

    /// Runs the passive delay estimator on the WAN side (interface B: frames received there
    /// before the ingress qdisc, frames sent there after the egress qdisc), answering the
    /// control socket's `passive` command; `None` stops it. Costs one header parse and a flow
    /// table lookup per frame on B.
    pub fn set_passive(&mut self, p: Option<PassiveParams>) -> Result<(), Error> {
        self.passive =
            match p {
                Some(p) => Some(PassiveDelay::new(p).map_err(|e| {
                    Error::Passive(format!("bridge {}: passive: {e}", self.cfg.name))
                })?),
                None => None,
            };
        Ok(())
    }

    /// Applies a `set-bandwidth`/`set-rate` request; returns the answer.
    pub(crate) fn set_rate(
        &mut self,
        dir: Direction,
        rate: Option<u64>,
        verb: RateVerb,
    ) -> Response {
        let d = &mut self.dirs[dir_index(dir)];
        match d.qdisc.set_rate(rate) {
            Ok(()) => {
                // Re-evaluate the release time under the new rate.
                d.next = Some(now_ns());
                Response::RateSet {
                    dir,
                    names: d.qdisc.dir_names(),
                    verb,
                    rate,
                }
            }
            Err(e) => Response::Error(format!(
                "{} qdisc {}: {e}",
                DirNames::EgressIngress.name(dir),
                d.qdisc.kind()
            )),
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

fn dir_index(dir: Direction) -> usize {
    match dir {
        Direction::Up => 0,
        Direction::Down => 1,
    }
}

/// A dataplane that forwards frames until stopped: [`Bridge`] (one forwarding thread) or
/// [`MqBridge`](crate::MqBridge) (one per queue).
pub trait Forwarder {
    /// A handle to stop [`run`](Self::run) from another thread.
    fn stopper(&self) -> Stopper;
    /// Forwards until stopped (see [`Bridge::run`]).
    fn run(&mut self) -> Result<(), Error>;
    /// Statistics as `stats --json` answers them.
    fn stats_json(&self) -> String;
    /// CPU time (ns) the forwarding threads spent in the last [`run`](Self::run), together.
    fn run_cpu_ns(&self) -> u64;
}

impl<Q: Stage> Forwarder for Bridge<Q> {
    fn stopper(&self) -> Stopper {
        Bridge::stopper(self)
    }
    fn run(&mut self) -> Result<(), Error> {
        Bridge::run(self)
    }
    fn stats_json(&self) -> String {
        Bridge::stats_json(self)
    }
    fn run_cpu_ns(&self) -> u64 {
        Bridge::run_cpu_ns(self)
    }
}

/// The forwarding loop's timing and batching options, for [`Bridge`] and
/// [`MqBridge`](crate::MqBridge) alike (each method is documented on [`Bridge`]'s of the same
/// name).
pub trait LoopOptions {
    /// [`Bridge::set_spin_ns`].
    fn set_spin_ns(&mut self, ns: u64);
    /// [`Bridge::set_batch_ns`].
    fn set_batch_ns(&mut self, ns: u64);
    /// [`Bridge::set_busy_poll_ns`].
    fn set_busy_poll_ns(&mut self, ns: u64);
    /// [`Bridge::set_rejoin`].
    fn set_rejoin(&mut self, on: bool);
    /// Runs the forwarding under `SCHED_FIFO` at `priority` ([`os::set_realtime`]): for a
    /// [`Bridge`] the calling thread, at once (call it from the thread that will run it); for a
    /// multi-queue bridge each forwarding thread, when it starts.
    fn set_rt_priority(&mut self, priority: i32) -> Result<(), Error>;
}

impl<Q: Stage> LoopOptions for Bridge<Q> {
    fn set_spin_ns(&mut self, ns: u64) {
        Bridge::set_spin_ns(self, ns);
    }
    fn set_batch_ns(&mut self, ns: u64) {
        Bridge::set_batch_ns(self, ns);
    }
    fn set_busy_poll_ns(&mut self, ns: u64) {
        Bridge::set_busy_poll_ns(self, ns);
    }
    fn set_rejoin(&mut self, on: bool) {
        Bridge::set_rejoin(self, on);
    }
    fn set_rt_priority(&mut self, priority: i32) -> Result<(), Error> {
        os::set_realtime(priority).map_err(|err| Error::Io {
            what: format!("SCHED_FIFO priority {priority}"),
            err,
        })
    }
}
