//! MQTT export of the decision stream (`[mqtt]` in `purple.toml`): every decision line of the
//! log to `PREFIX/decision`, every phase transition to `PREFIX/transition`, the daemon's other
//! log lines to `PREFIX/event` (each payload exactly the JSON of its log line), a retained
//! summary to `PREFIX/summary`, and a retained `online`/`offline` to `PREFIX/status` (the
//! broker publishes `offline` itself, as our last will, if the daemon dies).
//!
//! # Never in the control loop's way
//!
//! The control loop only calls [`Publisher::publish`], which hands the payload to a bounded
//! queue (`mqtt.queue` messages) without blocking: when the queue is full the message is
//! dropped and counted. One thread of the publisher's own resolves the broker, connects,
//! writes and reads acknowledgements; a broker that is absent, refuses us or stalls costs that
//! thread time, never the loop. While the thread is not connected it discards what it is handed
//! (counted), and retries after a backoff that doubles from 1 s to 60 s. A blocked write, a
//! CONNACK, a PUBACK window or a PINGRESP that takes longer than its limit ends the connection.
//!
//! # Accounting
//!
//! Every message handed to [`Publisher::publish`] is counted once: `published` (QoS 0: written
//! to the connection; QoS 1: acknowledged by the broker), or dropped because the queue was
//! full, because there was no connection, or because the connection ended before the broker
//! acknowledged it (QoS 1). Once [`Publisher::close`] returns `true`, `offered = published +
//! dropped` exactly ([`MqttStats::accounted`]). QoS 1 uses a clean session: messages are not
//! redelivered across connections, so "at least once" holds within one connection.
//!
//! # Why our own client
//!
//! The daemon is a small synchronous program that also ships as a static router binary under
//! 1 MiB (docs/cross-build.md; this module adds 71 KiB to the aarch64 build, DNS resolution
//! included). The maintained Rust clients do not fit it: rumqttc runs on tokio (its blocking
//! client wraps the async event loop), paho-mqtt wraps the Paho C library (a C build, OpenSSL,
//! EPL licence); the encoding-only crates (mqttbytes, mqttrs) would replace only the encoder,
//! not the session, keep-alive and hand-off that are most of this module. A publisher needs
//! seven packet types of MQTT 3.1.1, written here in [`wire`] from the
//! standard and tested byte for byte against it, and against mosquitto's own client and broker
//! (`crates/daemon/tests/mqtt_broker.rs`). No TLS: use a broker on the router or the LAN, or a
//! local bridge (mosquitto's `bridge_*` options) to reach a remote one over TLS.

pub mod wire;

use crate::clock::Clock;
use crate::config::MqttConfig;
use qdisc::{Duration, Instant};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::Arc;
use wire::{Connect, Incoming, Qos, Will};

/// One direction in the retained summary.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DirSummary {
    /// The rate in force, bytes per second (`null` before the first was applied).
    pub rate: Option<u64>,
    /// Latest measured throughput, bytes per second.
    pub throughput: u64,
    /// CAKE's backlog at the latest statistics read, bytes.
    pub cake_backlog: Option<u64>,
    /// The law's phase (PURPLE; `null` for laws without phases).
    pub phase: Option<String>,
}

/// The retained summary on `PREFIX/summary`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// The daemon's time, seconds (as the log's `t`).
    pub t: f64,
    /// Unix time at `t`, seconds.
    pub wall: f64,
    /// The law.
    pub algorithm: String,
    /// Download.
    pub down: DirSummary,
    /// Upload.
    pub up: DirSummary,
    /// Control steps run.
    pub steps: u64,
    /// Rate changes applied.
    pub rate_changes: u64,
    /// Failed attempts to apply a rate.
    pub actuator_errors: u64,
    /// Reflectors probed now.
    pub reflectors_active: usize,
    /// MQTT messages published so far.
    pub mqtt_published: u64,
    /// MQTT messages dropped so far (every cause).
    pub mqtt_dropped: u64,
}

/// A topic under the configured prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Topic {
    /// `PREFIX/decision`: decision lines.
    Decision,
    /// `PREFIX/transition`: phase transitions.
    Transition,
    /// `PREFIX/event`: every other log line.
    Event,
    /// `PREFIX/summary`: the retained summary.
    Summary,
    /// `PREFIX/status`: retained `online` / `offline`.
    Status,
}

impl Topic {
    const ALL: [Topic; 5] = [
        Topic::Decision,
        Topic::Transition,
        Topic::Event,
        Topic::Summary,
        Topic::Status,
    ];

    /// The last level of the topic name.
    pub fn suffix(self) -> &'static str {
        match self {
            Topic::Decision => "decision",
            Topic::Transition => "transition",
            Topic::Event => "event",
            Topic::Summary => "summary",
            Topic::Status => "status",
        }
    }

    /// Whether the broker keeps the last message for new subscribers.
    pub fn retained(self) -> bool {
        matches!(self, Topic::Summary | Topic::Status)
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Everything a session needs, from [`MqttConfig`] plus limits (tests shorten them).
#[derive(Clone, Debug, PartialEq)]
pub struct Params {
    /// Broker host name or address.
    pub host: String,
    /// Broker port.
    pub port: u16,
    /// Topic prefix (no trailing `/`).
    pub prefix: String,
    /// Client identifier.
    pub client_id: String,
    /// QoS of every PUBLISH.
    pub qos: Qos,
    /// User name, if any.
    pub username: Option<String>,
    /// Password, if any (only with a user name).
    pub password: Option<String>,
    /// Keep alive.
    pub keepalive: Duration,
    /// Messages the queue holds.
    pub queue: usize,
    /// Limit on connecting, on the CONNACK, on one blocked write, and on a full window of
    /// unacknowledged QoS 1 messages. Default 5 s.
    pub io_timeout: Duration,
    /// First retry delay (doubles per failure up to `backoff_max`). Default 1 s.
    pub backoff_min: Duration,
    /// Longest retry delay. Default 60 s.
    pub backoff_max: Duration,
    /// QoS 1 messages in flight at most. Default 32.
    pub max_inflight: usize,
}

impl Params {
    /// The session parameters of a validated, enabled `[mqtt]` section (`None` when `broker`
    /// is empty).
    pub fn from_config(c: &MqttConfig) -> Option<Params> {
        let (host, port) = c.endpoint()?;
        Some(Params {
            host,
            port,
            prefix: c.topic_prefix.clone(),
            client_id: c.client_id_or_default(),
            qos: if c.qos == 1 {
                Qos::AtLeastOnce
            } else {
                Qos::AtMostOnce
            },
            username: (!c.username.is_empty()).then(|| c.username.clone()),
            password: (!c.username.is_empty() && !c.password.is_empty())
                .then(|| c.password.clone()),
            keepalive: Duration::from_secs(u64::from(c.keepalive_s)),
            queue: c.queue,
            io_timeout: Duration::from_secs(5),
            backoff_min: Duration::from_secs(1),
            backoff_max: Duration::from_secs(60),
            max_inflight: 32,
        })
    }

    fn topic(&self, t: Topic) -> String {
        format!("{}/{}", self.prefix, t.suffix())
    }
}

/// The publisher's counters, as [`Publisher::stats`] reads them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MqttStats {
    /// Messages handed to [`Publisher::publish`].
    pub offered: u64,
    /// Published: written to the connection (QoS 0) or acknowledged (QoS 1).
    pub published: u64,
    /// Dropped because the queue was full (the thread is blocked on a slow broker).
    pub dropped_queue_full: u64,
    /// Dropped because there was no connection (broker absent, refusing, backing off, or the
    /// connection broke while writing it).
    pub dropped_disconnected: u64,
    /// QoS 1 messages written whose acknowledgement never came before the connection ended.
    pub dropped_unacknowledged: u64,
    /// Connected to the broker now.
    pub connected: bool,
    /// Connections the broker accepted.
    pub connections: u64,
    /// Attempts that failed (resolve, connect, CONNACK refused or late).
    pub connect_failures: u64,
}

impl MqttStats {
    /// Every message dropped, for any reason.
    pub fn dropped(&self) -> u64 {
        self.dropped_queue_full + self.dropped_disconnected + self.dropped_unacknowledged
    }

    /// Whether every message offered is published or dropped (holds once the publisher has
    /// closed; before, messages may still be queued or in flight).
    pub fn accounted(&self) -> bool {
        self.offered == self.published + self.dropped()
    }
}

#[derive(Debug, Default)]
struct Counters {
    offered: AtomicU64,
    published: AtomicU64,
    dropped_queue_full: AtomicU64,
    dropped_disconnected: AtomicU64,
    dropped_unacknowledged: AtomicU64,
    connected: AtomicBool,
    connections: AtomicU64,
    connect_failures: AtomicU64,
}

fn add(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

#[derive(Debug)]
enum Msg {
    Publish(Topic, Vec<u8>),
    /// Publish what came before, then `offline`, wait for acknowledgements until `within` has
    /// passed, and disconnect.
    Close(Duration),
}

/// How long a publisher dropped without [`Publisher::close`] (a reload) takes to finish.
const DROP_CLOSE: Duration = Duration::from_secs(1);
/// How long a new session waits for the one it replaces to finish (its `offline` must not land
/// after our `online`).
const HANDOFF_WAIT: Duration = Duration::from_secs(2);

/// A finished session's signal: `recv` returns `Err(Disconnected)` once its thread has ended.
#[derive(Debug)]
pub struct Finished(Receiver<()>);

/// The MQTT publisher: a bounded queue to the session thread. See the module documentation.
#[derive(Debug)]
pub struct Publisher {
    params: Params,
    clock: Clock,
    tx: Option<SyncSender<Msg>>,
    /// The queue's receiving end until [`Publisher::start`] hands it to the thread, and the
    /// session this one replaces.
    pending: Option<(Receiver<Msg>, Option<Finished>)>,
    counters: Arc<Counters>,
    finished: Option<Receiver<()>>,
}

impl Publisher {
    /// A publisher for `params`, reading time from `clock`; `after` is the session this one
    /// replaces (a reload), whose end the new thread awaits (at most 2 s) before connecting.
    /// Starts no thread: messages queue until [`Publisher::start`] (so that the daemon can drop
    /// privileges while it is still single-threaded).
    pub fn new(params: Params, clock: Clock, after: Option<Finished>) -> Self {
        let (tx, rx) = mpsc::sync_channel(params.queue.max(1));
        Publisher {
            params,
            clock,
            tx: Some(tx),
            pending: Some((rx, after)),
            counters: Arc::default(),
            finished: None,
        }
    }

    /// The parameters.
    pub fn params(&self) -> &Params {
        &self.params
    }

    /// Starts the session thread (once; later calls do nothing). It connects at once.
    pub fn start(&mut self) -> io::Result<()> {
        let Some((rx, after)) = self.pending.take() else {
            return Ok(());
        };
        let (done_tx, done_rx) = mpsc::channel::<()>();
        let (p, clock, c) = (self.params.clone(), self.clock, self.counters.clone());
        std::thread::Builder::new()
            .name("purple-mqtt".into())
            .spawn(move || {
                let _done = done_tx;
                if let Some(Finished(prev)) = after {
                    let _ = prev.recv_timeout(std_duration(HANDOFF_WAIT));
                }
                Session::new(p, clock, rx, c).run();
            })?;
        self.finished = Some(done_rx);
        Ok(())
    }

    /// Queues `payload` for `topic`; never blocks. Returns whether it was queued; a message
    /// that was not is counted as dropped (queue full, or the session gone).
    pub fn publish(&self, topic: Topic, payload: Vec<u8>) -> bool {
        let c = &self.counters;
        add(&c.offered, 1);
        let Some(tx) = &self.tx else {
            add(&c.dropped_disconnected, 1);
            return false;
        };
        match tx.try_send(Msg::Publish(topic, payload)) {
            Ok(()) => true,
            Err(TrySendError::Full(_)) => {
                add(&c.dropped_queue_full, 1);
                false
            }
            Err(TrySendError::Disconnected(_)) => {
                add(&c.dropped_disconnected, 1);
                false
            }
        }
    }

    /// The counters now.
    pub fn stats(&self) -> MqttStats {
        let c = &self.counters;
        let r = |a: &AtomicU64| a.load(Ordering::Relaxed);
        MqttStats {
            offered: r(&c.offered),
            published: r(&c.published),
            dropped_queue_full: r(&c.dropped_queue_full),
            dropped_disconnected: r(&c.dropped_disconnected),
            dropped_unacknowledged: r(&c.dropped_unacknowledged),
            connected: c.connected.load(Ordering::Relaxed),
            connections: r(&c.connections),
            connect_failures: r(&c.connect_failures),
        }
    }

    /// Ends the session: what is queued is published (if connected), then `offline` (retained)
    /// and DISCONNECT; QoS 1 acknowledgements are awaited until `within` has passed. Blocks the
    /// caller at most about `within` (plus one blocked write if the queue was full, as the
    /// close request then waits for room for up to `within`). Returns whether the thread
    /// finished in time; later [`Publisher::publish`] calls count as dropped.
    pub fn close(&mut self, within: Duration) -> bool {
        let Some(tx) = self.tx.take() else {
            return self.finished.is_none();
        };
        if self.pending.take().is_some() {
            // Never started: everything queued is dropped unsent.
            let queued = self.stats();
            let lost = queued.offered - queued.dropped();
            add(&self.counters.dropped_disconnected, lost);
            return true;
        }
        let end = self.clock.now().saturating_add(within);
        let mut msg = Msg::Close(within);
        loop {
            match tx.try_send(msg) {
                Ok(()) => break,
                Err(TrySendError::Disconnected(_)) => break,
                Err(TrySendError::Full(m)) => {
                    if self.clock.now() >= end {
                        // The thread is stuck on the broker; dropping `tx` closes it later.
                        return false;
                    }
                    msg = m;
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
            }
        }
        drop(tx);
        let left = end.saturating_duration_since(self.clock.now()) + Duration::from_millis(200);
        match self.finished.take() {
            Some(done) => matches!(
                done.recv_timeout(std_duration(left)),
                Err(RecvTimeoutError::Disconnected)
            ),
            None => true,
        }
    }

    /// Gives up this publisher for a successor (a reload with a changed `[mqtt]`): its session
    /// closes on its own (at most about 1 s) and the returned signal tells the successor when
    /// it has.
    pub fn hand_over(mut self) -> Option<Finished> {
        self.tx = None;
        self.finished.take().map(Finished)
    }
}

fn std_duration(d: Duration) -> std::time::Duration {
    std::time::Duration::from_nanos(d.as_nanos())
}

/// Why a connection ended.
#[derive(Debug)]
enum End {
    /// Closed on request (or the publisher is gone): the thread ends.
    Closed,
    /// Broken: retry after a backoff.
    Broken(SessionError),
}

/// Why connecting to the broker failed, or a connection broke (logged, then retried).
#[derive(Debug)]
pub enum SessionError {
    /// The host name did not resolve.
    Resolve {
        /// The host.
        host: String,
        /// The resolver's error.
        err: io::Error,
    },
    /// The host resolved to no address.
    NoAddress {
        /// The host.
        host: String,
    },
    /// No address accepted the TCP connection (the last one's error).
    Connect {
        /// The last address tried.
        addr: std::net::SocketAddr,
        /// Its error.
        err: io::Error,
    },
    /// A socket option could not be set.
    Socket(io::Error),
    /// A packet could not be encoded.
    Encode(wire::EncodeError),
    /// The broker sent bytes that are not a packet it may send.
    Decode(wire::DecodeError),
    /// The broker refused the connection.
    Refused(wire::ConnackCode),
    /// The broker sent this packet before its CONNACK.
    BeforeConnack(Incoming),
    /// The broker sent a second CONNACK.
    SecondConnack,
    /// No CONNACK within the I/O timeout (s).
    NoConnack(f64),
    /// No PINGRESP within the keep alive (s).
    NoPingresp(f64),
    /// The QoS 1 window stayed full for the I/O timeout.
    Unacknowledged {
        /// Messages in flight.
        count: usize,
        /// The timeout, s.
        timeout_s: f64,
    },
    /// A write blocked for the I/O timeout (s).
    WriteBlocked(f64),
    /// A write failed.
    Write(io::Error),
    /// A read failed.
    Read(io::Error),
    /// The broker closed the connection.
    Closed,
}

impl std::fmt::Display for SessionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SessionError::Resolve { host, err } => write!(f, "cannot resolve {host}: {err}"),
            SessionError::NoAddress { host } => write!(f, "{host} resolves to no address"),
            SessionError::Connect { addr, err } => write!(f, "{addr}: {err}"),
            SessionError::Socket(e) => write!(f, "{e}"),
            SessionError::Encode(e) => write!(f, "{e}"),
            SessionError::Decode(e) => write!(f, "{e}"),
            SessionError::Refused(code) => write!(f, "refused: {code}"),
            SessionError::BeforeConnack(p) => write!(f, "{p:?} before CONNACK"),
            SessionError::SecondConnack => f.write_str("a second CONNACK"),
            SessionError::NoConnack(s) => write!(f, "no CONNACK within {s:.0} s"),
            SessionError::NoPingresp(s) => write!(f, "no PINGRESP within {s:.0} s"),
            SessionError::Unacknowledged { count, timeout_s } => {
                write!(f, "{count} messages unacknowledged for {timeout_s:.0} s")
            }
            SessionError::WriteBlocked(s) => {
                write!(f, "a write blocked for {s:.0} s (broker too slow)")
            }
            SessionError::Write(e) => write!(f, "write: {e}"),
            SessionError::Read(e) => write!(f, "read: {e}"),
            SessionError::Closed => f.write_str("the broker closed the connection"),
        }
    }
}

impl std::error::Error for SessionError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SessionError::Resolve { err, .. }
            | SessionError::Connect { err, .. }
            | SessionError::Socket(err)
            | SessionError::Write(err)
            | SessionError::Read(err) => Some(err),
            SessionError::Encode(e) => Some(e),
            SessionError::Decode(e) => Some(e),
            _ => None,
        }
    }
}

/// A QoS 1 PUBLISH awaiting its PUBACK.
#[derive(Clone, Copy, Debug)]
struct InFlight {
    id: u16,
    /// Counted in the statistics (our own `online`/`offline` are not).
    counted: bool,
}

/// One connection to the broker.
#[derive(Debug)]
struct Conn {
    s: TcpStream,
    inbuf: Vec<u8>,
    out: Vec<u8>,
    inflight: VecDeque<InFlight>,
    next_id: u16,
    last_out: Instant,
    last_in: Instant,
    ping_sent: Option<Instant>,
}

/// The session thread's state.
#[derive(Debug)]
struct Session {
    p: Params,
    clock: Clock,
    rx: Receiver<Msg>,
    c: Arc<Counters>,
    topics: [String; 5],
}

impl Session {
    fn new(p: Params, clock: Clock, rx: Receiver<Msg>, c: Arc<Counters>) -> Self {
        let topics = Topic::ALL.map(|t| p.topic(t));
        Session {
            p,
            clock,
            rx,
            c,
            topics,
        }
    }

    fn run(mut self) {
        let mut backoff = self.p.backoff_min;
        let name = format!("{}:{}", self.p.host, self.p.port);
        loop {
            match self.open() {
                Ok(mut conn) => {
                    self.c.connected.store(true, Ordering::Relaxed);
                    add(&self.c.connections, 1);
                    eprintln!("purple control: mqtt: connected to {name}");
                    backoff = self.p.backoff_min;
                    let end = self.serve(&mut conn);
                    self.c.connected.store(false, Ordering::Relaxed);
                    let unacked = conn.inflight.iter().filter(|f| f.counted).count();
                    add(&self.c.dropped_unacknowledged, unacked as u64);
                    match end {
                        End::Closed => return,
                        End::Broken(e) => eprintln!(
                            "purple control: mqtt: connection to {name} lost: {e}; \
                             reconnecting in {:.0} s",
                            backoff.as_secs_f64()
                        ),
                    }
                }
                Err(e) => {
                    add(&self.c.connect_failures, 1);
                    eprintln!(
                        "purple control: mqtt: cannot connect to {name}: {e}; retrying in {:.0} s",
                        backoff.as_secs_f64()
                    );
                }
            }
            if self.discard_for(backoff) {
                return;
            }
            backoff = backoff.saturating_mul(2).min(self.p.backoff_max);
        }
    }

    /// Discards what arrives for `d` (counted); true if the publisher closed meanwhile.
    fn discard_for(&mut self, d: Duration) -> bool {
        let end = self.clock.now().saturating_add(d);
        loop {
            let left = end.saturating_duration_since(self.clock.now());
            if left == Duration::ZERO {
                return false;
            }
            match self.rx.recv_timeout(std_duration(left)) {
                Ok(Msg::Publish(..)) => add(&self.c.dropped_disconnected, 1),
                Ok(Msg::Close(_)) | Err(RecvTimeoutError::Disconnected) => return true,
                Err(RecvTimeoutError::Timeout) => return false,
            }
        }
    }

    /// Resolves, connects, sends CONNECT and awaits an accepting CONNACK, then publishes
    /// `online` (retained).
    fn open(&mut self) -> Result<Conn, SessionError> {
        let p = &self.p;
        let t = std_duration(p.io_timeout);
        let addrs =
            (p.host.as_str(), p.port)
                .to_socket_addrs()
                .map_err(|err| SessionError::Resolve {
                    host: p.host.clone(),
                    err,
                })?;
        let mut last = SessionError::NoAddress {
            host: p.host.clone(),
        };
        let mut stream = None;
        for addr in addrs {
            match TcpStream::connect_timeout(&addr, t) {
                Ok(s) => {
                    stream = Some(s);
                    break;
                }
                Err(err) => last = SessionError::Connect { addr, err },
            }
        }
        let s = stream.ok_or(last)?;
        let io = SessionError::Socket;
        s.set_nodelay(true).map_err(io)?;
        s.set_write_timeout(Some(t)).map_err(io)?;
        s.set_read_timeout(Some(t)).map_err(io)?;
        let now = self.clock.now();
        let mut conn = Conn {
            s,
            inbuf: Vec::with_capacity(64),
            out: Vec::with_capacity(1024),
            inflight: VecDeque::new(),
            next_id: 0,
            last_out: now,
            last_in: now,
            ping_sent: None,
        };
        let keepalive_s = u16::try_from(p.keepalive.as_nanos() / 1_000_000_000).unwrap_or(u16::MAX);
        let status = &self.topics[Topic::Status.index()];
        wire::connect(
            &mut conn.out,
            &Connect {
                client_id: &p.client_id,
                keepalive_s,
                clean_session: true,
                will: Some(Will {
                    topic: status,
                    message: b"offline",
                    qos: p.qos,
                    retain: true,
                }),
                username: p.username.as_deref(),
                password: p.password.as_deref().map(str::as_bytes),
            },
        )
        .map_err(SessionError::Encode)?;
        self.flush(&mut conn)?;
        // The CONNACK is the first packet (3.2): wait for it, blocking up to io_timeout.
        let deadline = self.clock.now().saturating_add(p.io_timeout);
        loop {
            if let Some((pk, n)) = wire::decode(&conn.inbuf).map_err(SessionError::Decode)? {
                conn.inbuf.drain(..n);
                match pk {
                    Incoming::Connack {
                        code: wire::ConnackCode::Accepted,
                        ..
                    } => break,
                    Incoming::Connack { code, .. } => return Err(SessionError::Refused(code)),
                    other => return Err(SessionError::BeforeConnack(other)),
                }
            }
            if self.clock.now() >= deadline {
                return Err(SessionError::NoConnack(p.io_timeout.as_secs_f64()));
            }
            self.fill(&mut conn, true)?;
        }
        conn.last_in = self.clock.now();
        self.send(&mut conn, Topic::Status, b"online", false)?;
        Ok(conn)
    }

    /// Publishes what arrives until the publisher closes (`End::Closed`) or the connection
    /// breaks.
    fn serve(&mut self, conn: &mut Conn) -> End {
        loop {
            let now = self.clock.now();
            if let Err(e) = self.keep_alive(conn, now) {
                return End::Broken(e);
            }
            let wait = self.next_wake(conn, now);
            let m = self.rx.recv_timeout(std_duration(wait));
            let r = match m {
                Ok(Msg::Publish(t, payload)) => {
                    let r = self.send(conn, t, &payload, true);
                    if r.is_err() {
                        // Not written whole: it never reached the broker as a message.
                        add(&self.c.dropped_disconnected, 1);
                    }
                    r
                }
                Ok(Msg::Close(within)) => return self.close(conn, within),
                Err(RecvTimeoutError::Disconnected) => return self.close(conn, DROP_CLOSE),
                Err(RecvTimeoutError::Timeout) => Ok(()),
            };
            if let Err(e) = r.and_then(|()| self.read(conn, false)) {
                return End::Broken(e);
            }
        }
    }

    /// How long the thread may sleep on the queue: until a PINGREQ is due, a PINGRESP is
    /// late, or (with QoS 1 messages in flight) 50 ms, to collect their PUBACKs.
    fn next_wake(&self, conn: &Conn, now: Instant) -> Duration {
        let ka = self.p.keepalive;
        let mut at = conn
            .last_out
            .saturating_add(half(ka))
            .min(conn.last_in.saturating_add(ka));
        if let Some(t) = conn.ping_sent {
            at = at.min(t.saturating_add(ka));
        }
        let mut wait = at.saturating_duration_since(now);
        if !conn.inflight.is_empty() {
            wait = wait.min(Duration::from_millis(50));
        }
        wait.max(Duration::from_millis(1))
    }

    /// Sends PINGREQ when nothing went out for half the keep alive or nothing came in for a
    /// whole one; a PINGRESP not back within the keep alive breaks the connection.
    fn keep_alive(&mut self, conn: &mut Conn, now: Instant) -> Result<(), SessionError> {
        let ka = self.p.keepalive;
        if let Some(t) = conn.ping_sent {
            if now.saturating_duration_since(t) >= ka {
                return Err(SessionError::NoPingresp(ka.as_secs_f64()));
            }
            return Ok(());
        }
        if now.saturating_duration_since(conn.last_out) >= half(ka)
            || now.saturating_duration_since(conn.last_in) >= ka
        {
            wire::pingreq(&mut conn.out);
            self.flush(conn)?;
            conn.ping_sent = Some(now);
        }
        Ok(())
    }

    /// Writes one PUBLISH (waiting for room in the QoS 1 window first). `counted`: one of the
    /// caller's messages (counted as published when written, QoS 0, or acknowledged, QoS 1).
    fn send(
        &mut self,
        conn: &mut Conn,
        t: Topic,
        payload: &[u8],
        counted: bool,
    ) -> Result<(), SessionError> {
        let qos = self.p.qos;
        let mut id = 0;
        if qos == Qos::AtLeastOnce {
            let deadline = self.clock.now().saturating_add(self.p.io_timeout);
            while conn.inflight.len() >= self.p.max_inflight {
                if self.clock.now() >= deadline {
                    return Err(SessionError::Unacknowledged {
                        count: conn.inflight.len(),
                        timeout_s: self.p.io_timeout.as_secs_f64(),
                    });
                }
                self.read(conn, true)?;
            }
            conn.next_id = conn.next_id.checked_add(1).unwrap_or(1);
            id = conn.next_id;
        }
        wire::publish(
            &mut conn.out,
            &self.topics[t.index()],
            payload,
            qos,
            t.retained(),
            id,
        )
        .map_err(SessionError::Encode)?;
        self.flush(conn)?;
        if qos == Qos::AtLeastOnce {
            conn.inflight.push_back(InFlight { id, counted });
        } else if counted {
            add(&self.c.published, 1);
        }
        Ok(())
    }

    /// Writes `conn.out` whole (blocking up to `io_timeout`).
    fn flush(&self, conn: &mut Conn) -> Result<(), SessionError> {
        let r = conn.s.write_all(&conn.out);
        conn.out.clear();
        match r {
            Ok(()) => {
                conn.last_out = self.clock.now();
                Ok(())
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                Err(SessionError::WriteBlocked(self.p.io_timeout.as_secs_f64()))
            }
            Err(e) => Err(SessionError::Write(e)),
        }
    }

    /// Reads what the broker sent and handles every whole packet: without waiting
    /// (`block = false`), or waiting up to `io_timeout` for at least one byte.
    fn read(&self, conn: &mut Conn, block: bool) -> Result<(), SessionError> {
        self.fill(conn, block)?;
        while let Some((pk, n)) = wire::decode(&conn.inbuf).map_err(SessionError::Decode)? {
            conn.inbuf.drain(..n);
            match pk {
                Incoming::Puback(id) => {
                    if let Some(i) = conn.inflight.iter().position(|f| f.id == id) {
                        if conn.inflight.remove(i).is_some_and(|f| f.counted) {
                            add(&self.c.published, 1);
                        }
                    }
                }
                Incoming::Pingresp => conn.ping_sent = None,
                Incoming::Connack { .. } => return Err(SessionError::SecondConnack),
            }
        }
        Ok(())
    }

    /// Appends what the broker sent to `conn.inbuf`: all there is without waiting (`block =
    /// false`), or what one read returns within `io_timeout` (nothing if none came).
    fn fill(&self, conn: &mut Conn, block: bool) -> Result<(), SessionError> {
        let mut buf = [0u8; 512];
        loop {
            let n = if block {
                match conn.s.read(&mut buf) {
                    Ok(n) => n,
                    Err(e)
                        if matches!(
                            e.kind(),
                            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                        ) =>
                    {
                        return Ok(());
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(SessionError::Read(e)),
                }
            } else {
                match rustix::net::recv(&conn.s, &mut buf, rustix::net::RecvFlags::DONTWAIT) {
                    Ok(n) => n,
                    Err(rustix::io::Errno::AGAIN) => break,
                    Err(rustix::io::Errno::INTR) => continue,
                    Err(e) => return Err(SessionError::Read(e.into())),
                }
            };
            if n == 0 {
                return Err(SessionError::Closed);
            }
            conn.inbuf.extend_from_slice(&buf[..n]);
            conn.last_in = self.clock.now();
            if block {
                break;
            }
        }
        Ok(())
    }

    /// Publishes `offline` (retained), awaits the acknowledgements still due until `within`
    /// has passed, and sends DISCONNECT (so the broker does not publish the will).
    fn close(&mut self, conn: &mut Conn, within: Duration) -> End {
        let end = self.clock.now().saturating_add(within);
        if self.send(conn, Topic::Status, b"offline", false).is_err() {
            return End::Closed;
        }
        while !conn.inflight.is_empty() && self.clock.now() < end {
            let left = end.saturating_duration_since(self.clock.now());
            let _ = conn
                .s
                .set_read_timeout(Some(std_duration(left.max(Duration::from_millis(1)))));
            if self.read(conn, true).is_err() {
                return End::Closed;
            }
        }
        wire::disconnect(&mut conn.out);
        let _ = self.flush(conn);
        let _ = conn.s.shutdown(Shutdown::Both);
        End::Closed
    }
}

fn half(d: Duration) -> Duration {
    Duration::from_nanos(d.as_nanos() / 2)
}

#[cfg(test)]
mod tests;
