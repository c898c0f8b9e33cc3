//! The daemon's event loop: a thin shell around the sans-IO [`Agent`]. It waits (poll(2)) on
//! the probe sockets and the metrics listener until the agent's next timeout, and at each
//! wake-up moves bytes and time only: datagrams from the sockets poll reported readable into
//! the agent, the counter and CAKE readings the agent asks for, the agent's probes out of the
//! sockets, its rates into the actuator (and the results back), its events into the decision
//! log. Nothing here decides anything; `--record` writes every input the agent gets, and
//! [`crate::record::replay`] reproduces the log from them.
//!
//! Per wake-up without a log line it allocates nothing and formats nothing: one `poll`, one
//! `recvfrom` per datagram (plus one that finds the readable socket empty), one `sendto` per
//! probe, one `pread` per counter due; the metrics text is rendered only when a scraper
//! connects.

use crate::actuator::{self, Actuator};
use crate::capture::Capture;
use crate::clock::Clock;
use crate::config::{ActuatorKind, Algorithm, DaemonConfig, Method, MqttRecord};
use crate::counters::CounterFile;
use crate::log::{Dir, JsonLog, Record};
use crate::metrics::{self, Snapshot};
use crate::mqtt::{self, Publisher, Topic};
use crate::probe::{Sockets, Which};
use crate::record::{hex, CakeRec, Input, Recorder};
use controller::agent::{Agent, ReflectorStats, SetRate};
use controller::{
    Aimd, AimdParams, CakeAutorate, CakeAutorateParams, Direction, Law, PerDir, Purple, SqmAutorate,
};
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

/// The law for `cfg.algorithm`, with its default parameters.
pub fn make_law(cfg: &DaemonConfig) -> io::Result<Box<dyn Law + Send>> {
    let law: Box<dyn Law + Send> = match cfg.algorithm {
        Algorithm::Purple => Box::new(Purple::default()),
        Algorithm::PurpleAimd => Box::new(Aimd::new(AimdParams::default())),
        Algorithm::CakeAutorate => Box::new(CakeAutorate::new(CakeAutorateParams::default())),
        Algorithm::SqmAutorate => Box::new(SqmAutorate::default()),
    };
    law.validate()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    Ok(law)
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
    buf: Box<[u8; 2048]>,
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
        let start = Record::Start {
            t: now.as_secs_f64(),
            algorithm: cfg.algorithm.name().to_string(),
            actuator: act.name().to_string(),
            icmp_raw: socks.icmp_raw(),
            wall: clock.wall_us(now) as f64 / 1e6,
            reflectors: cfg.probe.reflectors.clone(),
        };
        log.write(&start)?;
        let capture = open_capture(&cfg, now, &mut log)?;
        let bridge_passive = (cfg.delay_source().passive()
            && cfg.actuator.kind == ActuatorKind::Bridge)
            .then_some(true);
        let dirs = cfg.dirs();
        Ok(Daemon {
            counters: PerDir::new(
                CounterFile::new(dirs.down.counter_device(), dirs.down.counter),
                CounterFile::new(dirs.up.counter_device(), dirs.up.counter),
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
            buf: Box::new([0u8; 2048]),
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
            rate: a.rate_in_force(d),
            throughput: a.throughput(d),
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
        if let Some(r) = self.recorder.as_mut() {
            if let Err(e) = r.write(&i()) {
                eprintln!("purple control: record: {e}");
                self.recorder = None;
            }
        }
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
            let ready = self.wait(wait_ms.min(1000) as i32)?;
            self.work(ready);
        }
    }

    /// Waits up to `timeout_ms` for a readable socket; returns which are readable (probe
    /// sockets in [`Sockets::fds`] order, then the metrics listener).
    fn wait(&mut self, timeout_ms: i32) -> io::Result<Ready> {
        // At most 3 probe sockets, the listener and the two capture sockets: a fixed array,
        // no allocation per wake-up.
        let mut slots: [Option<(std::os::fd::BorrowedFd<'_>, Slot)>; 6] = [None; 6];
        let mut n = 0;
        for (w, fd) in self.socks.fds() {
            slots[n] = Some((fd, Slot::Probe(w)));
            n += 1;
        }
        if let Some(m) = &self.metrics {
            slots[n] = Some((std::os::fd::AsFd::as_fd(m.listener()), Slot::Metrics));
            n += 1;
        }
        if let Some(c) = &self.capture {
            for (k, fd) in c.fds().into_iter().enumerate() {
                slots[n] = Some((fd, Slot::Capture(k)));
                n += 1;
            }
        }
        let mut ready = Ready::default();
        let Some((filler, _)) = slots[0] else {
            // No socket at all (cannot happen: a configuration has a reflector): just sleep.
            let _ = rustix::event::poll(&mut [], timeout_ms);
            return Ok(ready);
        };
        let mut list = slots.map(|s| match s {
            Some((fd, _)) => PollFd::from_borrowed_fd(fd, PollFlags::IN),
            None => PollFd::from_borrowed_fd(filler, PollFlags::empty()),
        });
        match rustix::event::poll(&mut list[..n], timeout_ms) {
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => return Ok(ready),
            Err(e) => return Err(e.into()),
        }
        for (k, fd) in list[..n].iter().enumerate() {
            if fd.revents().is_empty() {
                continue;
            }
            match slots[k].map(|s| s.1) {
                Some(Slot::Probe(w)) => ready.probes[k] = Some(w),
                Some(Slot::Metrics) => ready.metrics = true,
                Some(Slot::Capture(i)) => ready.capture[i & 1] = true,
                None => {}
            }
        }
        Ok(ready)
    }

    /// Does everything due now: moves the datagrams of the readable sockets into the agent,
    /// makes the readings it asks for, lets it act, sends its probes, applies its rates, logs
    /// its events, answers a metrics scraper.
    fn work(&mut self, ready: Ready) {
        let now = self.clock.now();
        for w in ready.probes.into_iter().flatten() {
            self.drain_socket(now, w);
        }
        if ready.capture.iter().any(|&r| r) {
            if let Some(c) = self.capture.as_mut() {
                c.drain(now, ready.capture);
            }
        }
        let reads = self.agent.reads_due(now);
        for dir in Direction::ALL {
            if reads.counters[dir] {
                let v = self.counters[dir].read().ok();
                self.record(|| Input::Counter {
                    t_ns: now.as_nanos(),
                    dir: dir.into(),
                    bytes: v,
                });
                self.agent.handle_counter(now, dir, v);
            }
        }
        if reads.cake_stats {
            let read = self.act.cake_stats().map_err(|e| e.to_string());
            self.record(|| match &read {
                Ok(st) => Input::CakeStats {
                    t_ns: now.as_nanos(),
                    ok: Some([st.down.map(CakeRec::from), st.up.map(CakeRec::from)]),
                    error: None,
                },
                Err(e) => Input::CakeStats {
                    t_ns: now.as_nanos(),
                    ok: None,
                    error: Some(e.clone()),
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
        if ready.metrics {
            self.serve_metrics();
        }
    }

    /// Reads every datagram waiting on socket `w` into the agent.
    fn drain_socket(&mut self, now: Instant, w: Which) {
        loop {
            let (n, from) = match self.socks.recv(w, &mut self.buf[..]) {
                Ok(Some(x)) => x,
                Ok(None) => break,
                // An ICMP error queued on a UDP socket (port unreachable): nothing to read.
                Err(_) => break,
            };
            if self.recorder.is_some() {
                let h = hex(&self.buf[..n]);
                self.record(|| Input::Datagram {
                    t_ns: now.as_nanos(),
                    from,
                    socket: w.kind(),
                    hex: h,
                });
            }
            self.agent
                .handle_datagram(now, from, w.kind(), &self.buf[..n]);
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
        let res = self.act.set_rate(s.dir, s.bps).map_err(|e| e.to_string());
        self.record(|| Input::RateApplied {
            t_ns: now.as_nanos(),
            dir: Dir::from(s.dir),
            bps: s.bps,
            safe: s.safe,
            error: res.as_ref().err().cloned(),
        });
        self.agent.handle_rate_applied(now, s, res);
    }

    fn serve_metrics(&mut self) {
        let Some(m) = &self.metrics else {
            return;
        };
        let st = self.agent.stats();
        let snap = Snapshot {
            rate: Direction::ALL.map(|d| self.agent.rate_in_force(d).unwrap_or(0)),
            throughput: Direction::ALL.map(|d| self.agent.throughput(d)),
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

    /// The passive capture's frames read, its estimator's counters and the flows it tracks
    /// now; `None` without a capture.
    pub fn passive_counters(&mut self) -> Option<(u64, controller::passive::PassiveStats, u32)> {
        let now = self.clock.now();
        let c = self.capture.as_mut()?;
        let frames = c.frames;
        let e = c.estimator();
        Some((frames, e.stats(), e.tracked(now)))
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

/// How long [`Daemon::restore_safe`] waits for the MQTT session to finish.
pub const MQTT_CLOSE: Duration = Duration::from_secs(1);

/// Which sockets poll found readable.
#[derive(Clone, Copy, Debug, Default)]
struct Ready {
    probes: [Option<Which>; 6],
    metrics: bool,
    /// The capture's sockets (outgoing, incoming).
    capture: [bool; 2],
}

/// What a polled socket is.
#[derive(Clone, Copy, Debug)]
enum Slot {
    Probe(Which),
    Metrics,
    Capture(usize),
}

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
