//! The bridge: two packet sockets, two qdiscs, one event loop.
//!
//! This module holds the bridge's public types, its construction and its options; the rest
//! lives beside it, one concern a file:
//! - [`stage`]: the [`Stage`] trait (what runs in each direction) and its tc-style rendering
//!   for qdiscs;
//! - `stats`: the dataplane counters ([`DirStats`], [`BridgeStats`]) and the `stats` answers;
//! - `event_loop`: [`Bridge::run`], the forwarding loop (receive, enqueue, dequeue at the
//!   shaper's release times, transmit, timers);
//! - `control`: what reaches the loop from outside it: control socket requests and jobs from
//!   other threads (the multi-queue bridge's coordinator).

mod control;
mod event_loop;
pub(crate) mod stage;
mod stats;

use control::JobInbox;
pub(crate) use control::JobSender;
pub use stage::Stage;
pub use stats::{BridgeStats, DirStats};

use std::io;
use std::os::fd::RawFd;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use cake::AnyQdisc;
use controller::passive::PassiveDelay;
use controller::Direction;
use qdisc::{Dropped, Packet};

use crate::ctl_server::{Access, CtlServer, CtlSocket};
use crate::rejoin::Rejoiner;
use os::{Epoll, EventFd, PacketSocket, SignalFd, TimerFd, MAX_BATCH, VNET_HDR_LEN};
use qdisc::packet::buffers::{Pool, RX_BUF};

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

impl BridgeConfig {
    /// Refuses a bridge between an interface and itself ([`Error::Io`], `InvalidInput`).
    pub(crate) fn check_interfaces(&self) -> Result<(), Error> {
        if self.if_a == self.if_b {
            return Err(Error::Io {
                what: format!("bridge {}", self.name),
                err: io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "the two interfaces must differ",
                ),
            });
        }
        Ok(())
    }

    /// Binds the control socket at [`ctl_path`](Self::ctl_path), admitting
    /// [`ctl_group`](Self::ctl_group); `None` without a path.
    pub(crate) fn bind_ctl(&self) -> Result<Option<CtlSocket>, Error> {
        let access = Access {
            group: self.ctl_group,
        };
        self.ctl_path
            .as_deref()
            .map(|p| CtlSocket::bind(p, access))
            .transpose()
    }
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
    /// A multi-queue bridge's coordinator could not hand a job to queue `queue`: its
    /// forwarding loop has ended.
    QueueGone {
        /// The queue's index.
        queue: usize,
    },
    /// Not every queue of a multi-queue bridge answered its coordinator within `waited`.
    QueueTimeout {
        /// How long the coordinator waited.
        waited: Duration,
    },
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Qdisc(e) | Error::Passive(e) => write!(f, "{e}"),
            Error::Io { what, err } => write!(f, "{what}: {err}"),
            Error::QueueGone { queue } => write!(f, "queue {queue} is not running"),
            Error::QueueTimeout { waited } => write!(
                f,
                "not every queue answered within {} ms",
                waited.as_millis()
            ),
        }
    }
}

impl std::error::Error for Error {}

/// Maps an I/O error of step `what` to [`Error::Io`].
pub(crate) fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> Error {
    let what = what.into();
    move |err| Error::Io { what, err }
}

/// Adds `fd` to `epoll`, to be reported readable under `token`.
pub(crate) fn watch(epoll: &Epoll, fd: RawFd, token: u64) -> Result<(), Error> {
    epoll
        .add(fd, os::READABLE, token)
        .map_err(io_err("epoll_ctl"))
}

/// Starts serving `ctl`, when there is a control socket, in a thread of its own
/// ([`CtlSocket::serve`]); the server stops when dropped.
pub(crate) fn serve_ctl(ctl: Option<&CtlSocket>) -> Result<Option<CtlServer>, Error> {
    ctl.map(|c| c.serve().map_err(io_err("control socket thread")))
        .transpose()
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
        cfg.check_interfaces()?;
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
        cfg.check_interfaces()?;
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
        watch(&epoll, a.raw_fd(), TOK_A)?;
        watch(&epoll, b.raw_fd(), TOK_B)?;
        watch(&epoll, timer.raw_fd(), TOK_TIMER)?;
        watch(&epoll, stop.raw_fd(), TOK_STOP)?;
        let ctl = cfg.bind_ctl()?;
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
        watch(&self.epoll, s.raw_fd(), TOK_SIG)?;
        self.signals = Some(s);
        Ok(())
    }
}

/// The index of `dir` in a bridge's two directions (egress/up first, as the `stats` answers
/// list them).
pub(crate) fn dir_index(dir: Direction) -> usize {
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

/// Implements [`Forwarder`] for a type by its inherent methods of the same names (which
/// callers use without the trait): `forwarder_by_inherent_methods!(MqBridge)`, or with a type
/// parameter `forwarder_by_inherent_methods!(Bridge<Q> where Q: Stage)`.
macro_rules! forwarder_by_inherent_methods {
    ($t:ty $(where $p:ident: $bound:path)?) => {
        impl$(<$p: $bound>)? $crate::Forwarder for $t {
            fn stopper(&self) -> $crate::Stopper {
                <$t>::stopper(self)
            }
            fn run(&mut self) -> Result<(), $crate::Error> {
                <$t>::run(self)
            }
            fn stats_json(&self) -> String {
                <$t>::stats_json(self)
            }
            fn run_cpu_ns(&self) -> u64 {
                <$t>::run_cpu_ns(self)
            }
        }
    };
}
pub(crate) use forwarder_by_inherent_methods;

forwarder_by_inherent_methods!(Bridge<Q> where Q: Stage);

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
