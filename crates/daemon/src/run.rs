//! The daemon's event loop: a thin shell around the sans-IO [`Agent`]. It sleeps (poll(2), on
//! the metrics listener alone) until the agent's next timeout, and at each wake-up moves bytes
//! and time only: the datagrams waiting on the probe sockets into the agent (with the kernel's
//! arrival times), the counter and CAKE readings the agent asks for, the agent's probes out of
//! the sockets, its rates into the actuator (and the results back), its events into the
//! decision log. Nothing here decides anything; `--record` writes every input the agent gets,
//! and [`crate::record::replay`] reproduces the log from them.
//!
//! Cost (docs/performance.md): replies do not wake the loop. They wait in their socket, stamped
//! by the kernel on arrival (`SO_TIMESTAMPNS`), until the next wake-up the agent asked for (its
//! next probe or control step, which share one wake-up when they fall together), and are read
//! then, all of a socket's in one `recvmmsg`, in arrival order across sockets, before the
//! readings and the step: the step sees every reply that arrived before it, as when each reply
//! woke the loop, and each delay sample carries its true arrival time. So a wake-up without a
//! log line is one `poll`, one `recvmmsg` per probe socket, one `sendto` per probe due, one
//! `pread` per counter due, and allocates and formats nothing; the metrics text is rendered
//! only when a scraper connects.

use crate::actuator::{self, Actuator};
use crate::capture::Capture;
use crate::clock::{self, Clock};
use crate::config::{ActuatorKind, DaemonConfig, Method, MqttRecord};
use crate::counters::CounterFile;
use crate::log::{JsonLog, Record};
use crate::metrics::{self, Snapshot};
use crate::mqtt::{self, Publisher, Topic};
use crate::probe::{Sockets, Which};
use crate::record::{hex, CakeRec, Input, Recorder};
use controller::agent::{Agent, ReflectorStats, SetRate};
use controller::{Direction, Law, PerDir, Rate};
use os::recv::{RecvBatch, BATCH};
use qdisc::{Duration, Instant};
use rustix::event::{PollFd, PollFlags};
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};

/// Why [`Daemon::run`] returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// SIGHUP: reload the configuration.
    Reload,
    /// SIGTERM / SIGINT, or the time limit: stop.
    Stop,
}

/// The law for `cfg.algorithm` with `cfg.law_params()`, built and validated by the registry
/// ([`controller::LawKind::build`]).
pub fn make_law(cfg: &DaemonConfig) -> io::Result<Box<dyn Law + Send>> {
    cfg.law_params()
        .and_then(|p| cfg.algorithm.build(&p))
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))
}

/// The running daemon.
#[derive(Debug)]
pub struct Daemon {
    cfg: DaemonConfig,
    clock: Clock,
    agent: Agent<Box<dyn Law + Send>>,
    socks: Sockets,
    act: Box<dyn Actuator>,
    counters: PerDir<CounterFile>,
    /// The counters of what the link delivered before each direction's shaper, where
    /// configured (`delivered_interface`).
    delivered: PerDir<Option<CounterFile>>,
    log: JsonLog,
    metrics: Option<metrics::Server>,
    mqtt: Option<Publisher>,
    /// When the next retained MQTT summary is due.
    next_summary: Instant,
    /// The `start` line, published again when an MQTT publisher is attached.
    start: Record,
    recorder: Option<Recorder>,
    /// The passive delay signal's capture, when the delay source uses it and it could start.
    capture: Option<Capture>,
    /// The passive estimate comes from the bridge actuator (`purple bridge --passive`); set
    /// false after its first failure is logged, until a read works again.
    bridge_passive: Option<bool>,
    /// One receive batch per probe socket (allocated once).
    batches: Vec<(Which, RecvBatch)>,
    /// Control steps run.
    pub steps: u64,
    /// Samples fed to the controller.
    pub samples_fed: u64,
}

impl Daemon {
    /// Opens sockets, the actuator, the log and the metrics port per `cfg` (`dry_run`
    /// overrides the actuator), and builds the agent; the first [`Daemon::run`] wake-up probes,
    /// reads and applies the start rates.
    pub fn new(cfg: DaemonConfig, dry_run: bool) -> io::Result<Self> {
        let mut d = Self::with_clock(cfg, dry_run, Clock::new(), None)?;
        d.attach_mqtt(None);
        Ok(d)
    }

    /// [`Daemon::new`] recording every input of the agent to `record` (`--record FILE`).
    pub fn recording(
        cfg: DaemonConfig,
        dry_run: bool,
        record: &std::path::Path,
    ) -> io::Result<Self> {
        let mut d = Self::with_clock(cfg, dry_run, Clock::new(), Some(Recorder::create(record)?))?;
        d.attach_mqtt(None);
        Ok(d)
    }

    fn with_clock(
        cfg: DaemonConfig,
        dry_run: bool,
        clock: Clock,
        mut recorder: Option<Recorder>,
    ) -> io::Result<Self> {
        let now = clock.now();
        let socks = Sockets::open(&cfg.probe, &cfg.reflectors())?;
        let act = actuator::from_config(&cfg, dry_run)?;
        let mut log = JsonLog::open(&cfg.log.path, cfg.log.max_bytes, cfg.log.keep)?;
        let metrics = match cfg.metrics.port {
            0 => None,
            p => Some(metrics::Server::bind(p)?),
        };
        let ident = (std::process::id() as u16) ^ 0x5055;
        let anchor = clock.anchor();
        let acfg = cfg.agent_config(socks.icmp_raw(), ident, anchor);
        let inval = |e: controller::ConfigError| io::Error::new(io::ErrorKind::InvalidInput, e);
        let agent = Agent::new(acfg, make_law(&cfg)?, now).map_err(inval)?;
        if let Some(r) = recorder.as_mut() {
            r.write(&Input::Start {
                t_ns: now.as_nanos(),
                config: Box::new(cfg.clone()),
                icmp_raw: socks.icmp_raw(),
                ident,
                anchor_at_ns: anchor.at.as_nanos(),
                wall_us: anchor.wall_us,
                actuator: act.name().to_string(),
            })?;
        }
        let cc = cfg.controller_config();
        let bytes = |r: PerDir<Rate>| PerDir::new(r.down.bytes_per_s(), r.up.bytes_per_s());
        let start = Record::Start {
            t: now.as_secs_f64(),
            algorithm: cfg.algorithm.name().to_string(),
            actuator: act.name().to_string(),
            icmp_raw: socks.icmp_raw(),
            wall: clock.wall_us(now) as f64 / 1e6,
            reflectors: cfg.probe.reflectors.clone(),
            params: cfg.law_section(cfg.algorithm).clone(),
            min: Some(bytes(cc.min)),
            max: Some(bytes(cc.max)),
        };
        log.write(&start)?;
        let capture = open_capture(&cfg, now, &mut log)?;
        let bridge_passive = (cfg.delay_source().passive()
            && cfg.actuator.kind == ActuatorKind::Bridge)
            .then_some(true);
        let dirs = cfg.dirs();
        let batches = socks.fds().map(|(w, _)| (w, RecvBatch::new())).collect();
        Ok(Daemon {
            counters: PerDir::new(
                CounterFile::new(dirs.down.counter_device(), dirs.down.counter),
                CounterFile::new(dirs.up.counter_device(), dirs.up.counter),
            ),
            delivered: PerDir::new(
                dirs.down
                    .delivered_device()
                    .map(|d| CounterFile::new(d, dirs.down.delivered_counter)),
                dirs.up
                    .delivered_device()
                    .map(|d| CounterFile::new(d, dirs.up.delivered_counter)),
            ),
            cfg,
            clock,
            agent,
            socks,
            act,
            log,
            metrics,
            mqtt: None,
            next_summary: now,
            start,
            recorder,
            capture,
            bridge_passive,
            batches,
            steps: 0,
            samples_fed: 0,
        })
    }

    /// Replaces this daemon with one built from `cfg` (SIGHUP), keeping the metrics listener
    /// when its port is unchanged, the MQTT session when `[mqtt]` is unchanged, and the
    /// recording. The agent restarts from `cfg`'s base rates. On error the running daemon is
    /// left as it was.
    pub fn reload(&mut self, cfg: DaemonConfig, dry_run: bool) -> io::Result<()> {
        let port = cfg.metrics.port;
        let keep = if port == self.cfg.metrics.port {
            self.metrics.take()
        } else {
            None
        };
        let mut c = cfg;
        if keep.is_some() {
            c.metrics.port = 0;
        }
        let rec = self.recorder.take();
        // The same clock: log times continue across the reload.
        match Daemon::with_clock(c, dry_run, self.clock, rec) {
            Ok(mut nd) => {
                nd.cfg.metrics.port = port;
                if keep.is_some() {
                    nd.metrics = keep;
                }
                // The MQTT session goes on when `[mqtt]` is unchanged; otherwise the new one
                // connects once the old one has said `offline`.
                match self.mqtt.take() {
                    Some(m) if nd.cfg.mqtt == self.cfg.mqtt => {
                        nd.mqtt = Some(m);
                        nd.next_summary = self.next_summary;
                        nd.publish(&nd.start.clone());
                    }
                    old => nd.attach_mqtt(old.and_then(Publisher::hand_over)),
                }
                *self = nd;
                Ok(())
            }
            Err(e) => {
                self.metrics = keep;
                Err(e)
            }
        }
    }

    /// Writes one line to the log (errors are reported on stderr, never fatal), and publishes
    /// it over MQTT when `[mqtt]` asks for its kind.
    pub fn log_record(&mut self, r: &Record) {
        if let Err(e) = self.log.write(r) {
            eprintln!("purple control: log: {e}");
        }
        self.publish(r);
    }

    /// Makes the MQTT publisher `[mqtt]` asks for (none when it is off), replacing the session
    /// `after` once that has finished, and queues the `start` line. Its thread starts with the
    /// first [`Daemon::run`], after the privilege drop.
    fn attach_mqtt(&mut self, after: Option<mqtt::Finished>) {
        self.mqtt =
            mqtt::Params::from_config(&self.cfg.mqtt).map(|p| Publisher::new(p, self.clock, after));
        self.publish(&self.start.clone());
    }

    /// Hands `r` to the MQTT publisher if its kind is published: the same JSON as its log line.
    /// Never blocks (see [`crate::mqtt`]).
    fn publish(&mut self, r: &Record) {
        let Some(m) = &self.mqtt else {
            return;
        };
        let (kind, topic) = match r {
            Record::Decision { .. } => (MqttRecord::Decision, Topic::Decision),
            Record::Transition { .. } => (MqttRecord::Transition, Topic::Transition),
            _ => (MqttRecord::Event, Topic::Event),
        };
        if !self.cfg.mqtt.wants(kind) {
            return;
        }
        match serde_json::to_vec(r) {
            Ok(v) => {
                m.publish(topic, v);
            }
            Err(e) => eprintln!("purple control: mqtt: {e}"),
        }
    }

    /// Publishes the retained summary when it is due.
    fn publish_summary(&mut self, now: Instant) {
        let Some(m) = &self.mqtt else {
            return;
        };
        if now < self.next_summary || !self.cfg.mqtt.wants(MqttRecord::Summary) {
            return;
        }
        self.next_summary =
            now.saturating_add(Duration::from_secs(self.cfg.mqtt.summary_interval_s));
        let a = &self.agent;
        let law = a.engine().law();
        let dir = |d: Direction| mqtt::DirSummary {
            rate: a.rate_in_force(d).map(Rate::bytes_per_s),
            throughput: a.throughput(d).bytes_per_s(),
            cake_backlog: a.cake_backlog(d),
            phase: law.phase(d).map(|p| p.name().to_string()),
        };
        let st = a.stats();
        let ms = m.stats();
        let s = mqtt::Summary {
            t: now.as_secs_f64(),
            wall: self.clock.wall_us(now) as f64 / 1e6,
            algorithm: self.cfg.algorithm.name().to_string(),
            down: dir(Direction::Down),
            up: dir(Direction::Up),
            steps: st.steps,
            rate_changes: st.rate_changes,
            actuator_errors: st.actuator_errors,
            reflectors_active: a.reflectors().filter(|r| r.active).count(),
            mqtt_published: ms.published,
            mqtt_dropped: ms.dropped(),
        };
        match serde_json::to_vec(&s) {
            Ok(v) => {
                m.publish(Topic::Summary, v);
            }
            Err(e) => eprintln!("purple control: mqtt: {e}"),
        }
    }

    /// The daemon's time now, seconds (the log's `t`).
    pub fn t(&self) -> f64 {
        self.clock.now().as_secs_f64()
    }

    fn record(&mut self, i: impl FnOnce() -> Input) {
        record_to(&mut self.recorder, i);
    }

    /// Runs until a signal flag is set or `limit` passes (`None`: forever). `stop` and `reload`
    /// are set by the signal handlers (the flags are cleared when seen).
    pub fn run(
        &mut self,
        stop: &AtomicBool,
        reload: &AtomicBool,
        limit: Option<Duration>,
    ) -> io::Result<Exit> {
        let end = limit.map(|l| self.clock.now().saturating_add(l));
        if let Some(m) = &mut self.mqtt {
            if let Err(e) = m.start() {
                eprintln!("purple control: mqtt: cannot start the publisher thread: {e}");
                self.mqtt = None;
            }
        }
        loop {
            if stop.swap(false, Ordering::Relaxed) {
                return Ok(Exit::Stop);
            }
            if reload.swap(false, Ordering::Relaxed) {
                return Ok(Exit::Reload);
            }
            let now = self.clock.now();
            if end.is_some_and(|e| now >= e) {
                return Ok(Exit::Stop);
            }
            let wake = self.agent.poll_timeout().min(end.unwrap_or(Instant::MAX));
            let wait_ms = wake
                .saturating_duration_since(now)
                .as_nanos()
                .div_ceil(1_000_000);
            let metrics_ready = self.wait(wait_ms.min(1000) as i32)?;
            self.work(metrics_ready);
        }
    }

    /// Sleeps up to `timeout_ms`, or until a metrics scraper connects (then returns `true`).
    /// The probe sockets are not waited on: their replies are read at the next wake-up.
    fn wait(&mut self, timeout_ms: i32) -> io::Result<bool> {
        let r = match &self.metrics {
            Some(m) => {
                let mut fd = [PollFd::new(m.listener(), PollFlags::IN)];
                let r = rustix::event::poll(&mut fd, timeout_ms);
                r.map(|_| !fd[0].revents().is_empty())
            }
            None => rustix::event::poll(&mut [], timeout_ms).map(|_| false),
        };
        match r {
            Ok(m) => Ok(m),
            Err(rustix::io::Errno::INTR) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Does everything due now: moves the waiting datagrams into the agent, makes the readings
    /// it asks for, lets it act, sends its probes, applies its rates, logs its events, answers
    /// a metrics scraper.
    fn work(&mut self, metrics_ready: bool) {
        let now = self.clock.now();
        self.drain_sockets(now);
        if let Some(c) = self.capture.as_mut() {
            c.drain(now, self.clock.realtime_ns());
        }
        let reads = self.agent.reads_due(now);
        // The link's delivery first: the agent pairs it with the throughput read next.
        for dir in Direction::ALL {
            if reads.delivered[dir] {
                let v = self.delivered[dir].as_mut().and_then(|c| c.read().ok());
                self.record(|| Input::Delivered {
                    t_ns: now.as_nanos(),
                    dir,
                    bytes: v,
                });
                self.agent.handle_delivered(now, dir, v);
            }
        }
        for dir in Direction::ALL {
            if reads.counters[dir] {
                let v = self.counters[dir].read().ok();
                self.record(|| Input::Counter {
                    t_ns: now.as_nanos(),
                    dir,
                    bytes: v,
                });
                self.agent.handle_counter(now, dir, v);
            }
        }
        if reads.cake_stats {
            let read = self.act.cake_stats();
            self.record(|| match &read {
                Ok(st) => Input::CakeStats {
                    t_ns: now.as_nanos(),
                    ok: Some([st.down.map(CakeRec::from), st.up.map(CakeRec::from)]),
                    error: None,
                },
                Err(e) => Input::CakeStats {
                    t_ns: now.as_nanos(),
                    ok: None,
                    error: Some(e.to_string()),
                },
            });
            self.agent.handle_cake_stats(now, read);
        }
        if reads.passive {
            let r = match (self.capture.as_mut(), self.bridge_passive) {
                (Some(c), _) => Some(c.estimator().reading(now)),
                (None, Some(ok)) => match self.act.passive() {
                    Ok(r) => {
                        self.bridge_passive = Some(true);
                        r
                    }
                    Err(e) => {
                        if ok {
                            self.bridge_passive = Some(false);
                            self.log_record(&Record::PassiveCapture {
                                t: now.as_secs_f64(),
                                via: "purple bridge".to_string(),
                                error: Some(e.to_string()),
                            });
                        }
                        None
                    }
                },
                (None, None) => None,
            };
            if let Some(r) = r {
                self.record(|| Input::passive(now.as_nanos(), &r));
                self.agent.handle_passive(now, &r);
            }
        }
        self.record(|| Input::Timeout {
            t_ns: now.as_nanos(),
        });
        self.agent.handle_timeout(now);
        self.drain_agent(now);
        self.publish_summary(now);
        if metrics_ready {
            self.serve_metrics();
        }
    }

    /// Reads every datagram waiting on the probe sockets (one `recvmmsg` per socket, again
    /// while one comes back full, at most [`MAX_ROUNDS`] times: a flood of foreign ICMP cannot
    /// hold the loop) and gives them to the agent in arrival order, each at its arrival time
    /// ([`clock::arrival`] of the kernel's stamp; never after `now`).
    fn drain_sockets(&mut self, now: Instant) {
        let real = self.clock.realtime_ns();
        let Daemon {
            socks,
            batches,
            agent,
            recorder,
            ..
        } = self;
        for _ in 0..MAX_ROUNDS {
            let mut count = [0usize; MAX_SOCKETS];
            let mut full = false;
            for (k, (w, b)) in batches.iter_mut().enumerate().take(MAX_SOCKETS) {
                // An error (an ICMP error queued on a UDP socket) is cleared by reporting it:
                // the datagrams behind it are read by a second call.
                count[k] = socks
                    .recv_batch(*w, b)
                    .or_else(|_| socks.recv_batch(*w, b))
                    .unwrap_or(0);
                full |= count[k] == BATCH;
            }
            let mut next = [0usize; MAX_SOCKETS];
            loop {
                let mut first: Option<(usize, Instant)> = None;
                for (k, (_, b)) in batches.iter().enumerate().take(MAX_SOCKETS) {
                    if next[k] < count[k] {
                        let at = clock::arrival(now, real, b.get(next[k]).0.rx_realtime_ns);
                        if first.is_none_or(|(_, t)| at < t) {
                            first = Some((k, at));
                        }
                    }
                }
                let Some((k, at)) = first else {
                    break;
                };
                let (w, b) = &batches[k];
                let (r, bytes) = b.get(next[k]);
                next[k] += 1;
                if recorder.is_some() {
                    let h = hex(bytes);
                    record_to(recorder, || Input::Datagram {
                        t_ns: at.as_nanos(),
                        from: r.from,
                        socket: w.kind(),
                        hex: h,
                    });
                }
                agent.handle_datagram(at, r.from, w.kind(), bytes);
            }
            if !full {
                break;
            }
        }
    }

    /// Sends the agent's probes, applies its rates and logs its events.
    fn drain_agent(&mut self, now: Instant) {
        while let Some(t) = self.agent.poll_transmit() {
            if self.socks.send(&t).is_err() {
                // No route, link down: the probe is lost at once.
                self.record(|| Input::SendFailed {
                    t_ns: now.as_nanos(),
                    token: t.token,
                });
                self.agent.handle_send_failed(now, t.token);
            }
        }
        while let Some(s) = self.agent.poll_rate() {
            self.apply(now, s);
        }
        while let Some((t, e)) = self.agent.poll_event() {
            let r = Record::of_event(t.as_secs_f64(), &e, self.act.name());
            self.log_record(&r);
        }
        let st = self.agent.stats();
        self.steps = st.steps;
        self.samples_fed = st.samples_fed;
        if let Some(r) = self.recorder.as_mut() {
            let _ = r.flush();
        }
    }

    fn apply(&mut self, now: Instant, s: SetRate) {
        let res = self.act.set_rate(s.dir, s.rate);
        self.record(|| Input::RateApplied {
            t_ns: now.as_nanos(),
            dir: s.dir,
            bps: s.rate.bytes_per_s(),
            safe: s.safe,
            error: res.as_ref().err().map(ToString::to_string),
        });
        self.agent.handle_rate_applied(now, s, res);
    }

    fn serve_metrics(&mut self) {
        let Some(m) = &self.metrics else {
            return;
        };
        let st = self.agent.stats();
        let snap = Snapshot {
            rate: Direction::ALL.map(|d| self.agent.rate_in_force(d).map_or(0, Rate::bytes_per_s)),
            throughput: Direction::ALL.map(|d| self.agent.throughput(d).bytes_per_s()),
            cake_backlog: Direction::ALL.map(|d| self.agent.cake_backlog(d)),
            changes: st.rate_changes,
            actuator_errors: st.actuator_errors,
            mqtt: self.mqtt.as_ref().map(Publisher::stats),
            reflectors: self
                .agent
                .reflectors()
                .map(|r| {
                    let s = r.stats;
                    (r.spec.label(r.method), s.sent, s.answered, s.lost, r.active)
                })
                .collect(),
        };
        m.serve_pending(&metrics::render(&snap));
    }

    /// Sets both directions to the configured safe rate (on SIGTERM) and logs it, then closes
    /// the MQTT session: what is queued is published, a last summary, then `offline`; this
    /// waits at most [`MQTT_CLOSE`] for it.
    pub fn restore_safe(&mut self) {
        let now = self.clock.now();
        self.record(|| Input::Shutdown {
            t_ns: now.as_nanos(),
        });
        self.agent.handle_shutdown(now);
        self.drain_agent(now);
        // The retained summary ends with the state the daemon left.
        self.next_summary = now;
        self.publish_summary(now);
        if let Some(m) = &mut self.mqtt {
            if !m.close(MQTT_CLOSE) {
                eprintln!(
                    "purple control: mqtt: the broker did not take the last messages in time"
                );
            }
        }
    }

    /// The MQTT publisher's counters, if `[mqtt]` is on.
    pub fn mqtt_stats(&self) -> Option<mqtt::MqttStats> {
        self.mqtt.as_ref().map(Publisher::stats)
    }

    /// Per-reflector health: address, current method, whether active, counters.
    pub fn health(&self) -> Vec<(std::net::SocketAddr, Method, bool, ReflectorStats)> {
        self.agent
            .reflectors()
            .map(|r| (r.spec.addr, r.method, r.active, r.stats))
            .collect()
    }

    /// The passive capture's counters now; `None` without a capture. Asks the kernel for its
    /// drops (two system calls).
    pub fn passive_counters(&mut self) -> Option<PassiveCounters> {
        let now = self.clock.now();
        let c = self.capture.as_mut()?;
        let frames = c.frames;
        let lost = c.lost();
        let e = c.estimator();
        Some(PassiveCounters {
            frames,
            lost,
            stats: e.stats(),
            tracked: e.tracked(now),
        })
    }

    /// The agent (its decisions, discards, reflectors).
    pub fn agent(&self) -> &Agent<Box<dyn Law + Send>> {
        &self.agent
    }

    /// The metrics listener's address, if enabled.
    pub fn metrics_addr(&self) -> Option<std::net::SocketAddr> {
        self.metrics.as_ref().and_then(|m| m.local_addr().ok())
    }
}

/// What the passive capture counted since the daemon started ([`Daemon::passive_counters`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct PassiveCounters {
    /// Frames read from the capture's rings.
    pub frames: u64,
    /// Frames the kernel dropped because a ring was full.
    pub lost: u64,
    /// The estimator's counters.
    pub stats: controller::passive::PassiveStats,
    /// Connections the estimator tracks now.
    pub tracked: u32,
}

/// Most `recvmmsg` rounds per wake-up (each reads up to [`BATCH`] datagrams per socket).
const MAX_ROUNDS: usize = 8;
/// Most probe sockets (ICMP, UDP over IPv4 and over IPv6).
const MAX_SOCKETS: usize = 3;

/// How long [`Daemon::restore_safe`] waits for the MQTT session to finish.
pub const MQTT_CLOSE: Duration = Duration::from_secs(1);

/// Opens the passive capture when the delay source uses it and the shaper is the kernel's
/// (a bridge measures inline), and logs where it runs or why it could not start. Fails only
/// with `delay_source = "passive"` (nothing to control on otherwise).
fn open_capture(
    cfg: &DaemonConfig,
    now: Instant,
    log: &mut JsonLog,
) -> io::Result<Option<Capture>> {
    let src = cfg.delay_source();
    if !src.passive() {
        return Ok(None);
    }
    if cfg.actuator.kind == ActuatorKind::Bridge {
        log.write(&Record::PassiveCapture {
            t: now.as_secs_f64(),
            via: "purple bridge".to_string(),
            error: None,
        })?;
        return Ok(None);
    }
    let dev = cfg.passive_device();
    let (capture, error) = match Capture::open(dev, cfg.passive_params()) {
        Ok(c) => (Some(c), None),
        Err(e) => (None, Some(e.to_string())),
    };
    log.write(&Record::PassiveCapture {
        t: now.as_secs_f64(),
        via: format!("packet socket on {dev}"),
        error: error.clone(),
    })?;
    match (error, src) {
        (Some(e), controller::DelaySource::Passive) => Err(io::Error::other(format!(
            "delay_source = \"passive\": the capture on {dev} cannot start: {e}"
        ))),
        _ => Ok(capture),
    }
}

/// Writes input `i` to the recording, if one is kept; a failed write is reported and ends the
/// recording (the daemon goes on).
fn record_to(recorder: &mut Option<Recorder>, i: impl FnOnce() -> Input) {
    if let Some(r) = recorder.as_mut() {
        if let Err(e) = r.write(&i()) {
            eprintln!("purple control: record: {e}");
            *recorder = None;
        }
    }
}
