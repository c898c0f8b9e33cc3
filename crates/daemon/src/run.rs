//! The daemon's event loop: waits (poll(2)) on the probe sockets and the metrics listener until
//! the next timer (probe, counter reading, control step), feeds samples to the controller,
//! applies its decisions through the actuator and logs them.

use crate::actuator::{self, Actuator, Limiter};
use crate::clock::Clock;
use crate::config::{Algorithm, DaemonConfig};
use crate::counters::RateMeter;
use crate::log::JsonLog;
use crate::metrics::{self, Snapshot};
use crate::probe::{Event, Prober};
use controller::{
    Aimd, AimdParams, CakeAutorate, CakeAutorateParams, Controller, Decision, Direction, Engine,
    PerDir, Purple, Sample, SqmAutorate,
};
use qdisc::{Duration, Instant};
use rustix::event::{PollFd, PollFlags};
use serde_json::{json, Value};
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

/// The controller for `cfg.algorithm`.
pub fn make_controller(cfg: &DaemonConfig) -> io::Result<Box<dyn Controller + Send>> {
    let c = cfg.controller_config();
    let inval = |e: controller::ConfigError| io::Error::new(io::ErrorKind::InvalidInput, e);
    Ok(match cfg.algorithm {
        Algorithm::Purple => Box::new(Engine::new(c, Purple::default()).map_err(inval)?),
        Algorithm::PurpleAimd => {
            Box::new(Engine::new(c, Aimd::new(AimdParams::default())).map_err(inval)?)
        }
        Algorithm::CakeAutorate => Box::new(
            Engine::new(c, CakeAutorate::new(CakeAutorateParams::default())).map_err(inval)?,
        ),
        Algorithm::SqmAutorate => Box::new(Engine::new(c, SqmAutorate::default()).map_err(inval)?),
    })
}

/// Queueing delay over the minimum seen, averaged between log lines (for the log's plots).
#[derive(Debug, Default)]
struct DelayStat {
    min: Vec<[Option<i64>; 2]>,
    sum: [i64; 2],
    n: [u32; 2],
}

impl DelayStat {
    fn add(&mut self, refl: u16, dir: usize, v: i64) {
        let i = usize::from(refl);
        if self.min.len() <= i {
            self.min.resize(i + 1, [None; 2]);
        }
        let m = self.min[i][dir].map_or(v, |m| m.min(v));
        self.min[i][dir] = Some(m);
        self.sum[dir] += v - m;
        self.n[dir] += 1;
    }
    fn on_sample(&mut self, s: &Sample) {
        match *s {
            Sample::Owd {
                reflector,
                dir,
                owd_ns,
                ..
            } => self.add(reflector.0, (dir == Direction::Up).into(), owd_ns),
            Sample::Rtt { reflector, rtt, .. } => {
                let half = (rtt.as_nanos() / 2) as i64;
                self.add(reflector.0, 0, half);
                self.add(reflector.0, 1, half);
            }
            _ => {}
        }
    }
    /// Mean delay over baseline per direction in ms since the last take.
    fn take(&mut self) -> [Option<f64>; 2] {
        let r = [0, 1]
            .map(|d| (self.n[d] > 0).then(|| self.sum[d] as f64 / f64::from(self.n[d]) / 1e6));
        self.sum = [0; 2];
        self.n = [0; 2];
        r
    }
}

/// The running daemon.
#[derive(Debug)]
pub struct Daemon {
    cfg: DaemonConfig,
    clock: Clock,
    ctl: Box<dyn Controller + Send>,
    prober: Prober,
    act: Box<dyn Actuator>,
    limiter: Limiter,
    meters: PerDir<RateMeter>,
    log: JsonLog,
    metrics: Option<metrics::Server>,
    samples: Vec<Sample>,
    next_counter: Instant,
    /// When CAKE's statistics were last read (successfully or not).
    cake_stats_last: Option<Instant>,
    /// The shaper's own sent-bytes counter at the last read, per direction, where it reports
    /// one: throughput then comes from it rather than from the interface counter.
    shaper_sent: PerDir<Option<(Instant, u64)>>,
    /// No statistics read before this (a second after a failed read).
    cake_stats_retry: Instant,
    /// The last CAKE backlog read per direction (bytes), for the log and metrics.
    cake_backlog: PerDir<Option<u64>>,
    /// Whether the current run of failed statistics reads has been logged (cleared by a success).
    cake_stats_failing: bool,
    last_log: Instant,
    throughput: PerDir<u64>,
    delay: DelayStat,
    snap: Snapshot,
    /// Control steps run.
    pub steps: u64,
    /// Samples fed to the controller.
    pub samples_fed: u64,
}

impl Daemon {
    /// Opens sockets, the actuator, the log and the metrics port per `cfg` (`dry_run`
    /// overrides the actuator), and applies the start rates.
    pub fn new(cfg: DaemonConfig, dry_run: bool) -> io::Result<Self> {
        Self::with_clock(cfg, dry_run, Clock::new())
    }

    fn with_clock(cfg: DaemonConfig, dry_run: bool, clock: Clock) -> io::Result<Self> {
        let now = clock.now();
        let prober = Prober::new(&cfg.probe, &cfg.reflectors(), now)?;
        let act = actuator::from_config(&cfg, dry_run)?;
        let mut log = JsonLog::open(&cfg.log.path, cfg.log.max_bytes, cfg.log.keep)?;
        let metrics = match cfg.metrics.port {
            0 => None,
            p => Some(metrics::Server::bind(p)?),
        };
        let dirs = cfg.dirs();
        let meters = PerDir::new(
            RateMeter::new(dirs.down.counter_device(), dirs.down.counter),
            RateMeter::new(dirs.up.counter_device(), dirs.up.counter),
        );
        log.write(&json!({
            "t": now.as_secs_f64(), "event": "start", "algorithm": cfg.algorithm.name(),
            "actuator": act.name(), "icmp_raw": prober.icmp_raw(),
            "wall": clock.wall_us(now) as f64 / 1e6,
            "reflectors": cfg.probe.reflectors,
        }))?;
        Ok(Daemon {
            ctl: make_controller(&cfg)?,
            limiter: Limiter::new(
                Duration::from_millis(cfg.actuator.min_interval_ms),
                cfg.actuator.min_change_percent,
            ),
            cfg,
            clock,
            prober,
            act,
            meters,
            log,
            metrics,
            samples: Vec::with_capacity(64),
            next_counter: now,
            cake_stats_last: None,
            shaper_sent: PerDir::default(),
            cake_stats_retry: now,
            cake_backlog: PerDir::default(),
            cake_stats_failing: false,
            last_log: now,
            throughput: PerDir::default(),
            delay: DelayStat::default(),
            snap: Snapshot::default(),
            steps: 0,
            samples_fed: 0,
        })
    }

    /// Replaces this daemon with one built from `cfg` (SIGHUP), keeping the metrics listener
    /// when its port is unchanged. The controller restarts from `cfg`'s base rates. On error the
    /// running daemon is left as it was.
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
        // The same clock: log times continue across the reload.
        match Daemon::with_clock(c, dry_run, self.clock) {
            Ok(mut nd) => {
                nd.cfg.metrics.port = port;
                if keep.is_some() {
                    nd.metrics = keep;
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

    /// Writes one event line to the log (errors are reported on stderr, never fatal).
    pub fn log_event(&mut self, v: Value) {
        if let Err(e) = self.log.write(&v) {
            eprintln!("purple control: log: {e}");
        }
    }

    fn t(&self, now: Instant) -> f64 {
        now.as_secs_f64()
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
        let first = self.ctl.poll(self.clock.now());
        self.apply(self.clock.now(), &first, true);
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
            let wake = self
                .prober
                .next_wakeup()
                .min(self.ctl.next_wakeup())
                .min(if self.cfg.cake_stats_interval_ms != 0 {
                    Instant::MAX
                } else {
                    self.next_counter
                })
                .min(end.unwrap_or(Instant::MAX));
            let wait_ms = wake
                .saturating_duration_since(now)
                .as_nanos()
                .div_ceil(1_000_000);
            self.wait(wait_ms.min(1000) as i32)?;
            self.work();
        }
    }

    fn wait(&mut self, timeout_ms: i32) -> io::Result<()> {
        let mut fds: Vec<PollFd<'_>> = Vec::with_capacity(4);
        for fd in self.prober.fds() {
            fds.push(PollFd::from_borrowed_fd(fd, PollFlags::IN));
        }
        if let Some(m) = &self.metrics {
            fds.push(PollFd::new(m.listener(), PollFlags::IN));
        }
        match rustix::event::poll(&mut fds, timeout_ms) {
            Ok(_) | Err(rustix::io::Errno::INTR) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Does everything that is due now: reads replies, sends probes, reads counters, runs the
    /// control step, applies and logs its decision, answers metrics requests.
    pub fn work(&mut self) {
        let now = self.clock.now();
        self.samples.clear();
        self.prober.receive(now, &self.clock, &mut self.samples);
        self.prober.tick(now, &self.clock, &mut self.samples);
        // With CAKE's statistics on, the law compares CAKE's backlog with what the link
        // delivered under the rate of the interval just ended (as the simulator does): the
        // counters are then read right before every control step, so the delivery window is
        // exactly that interval.
        let aligned = self.cfg.cake_stats_interval_ms != 0;
        let counter_due = if aligned {
            now >= self.ctl.next_wakeup()
        } else {
            now >= self.next_counter
        };
        if counter_due {
            self.next_counter =
                now.saturating_add(Duration::from_millis(self.cfg.counter_interval_ms));
            for dir in Direction::ALL {
                if self.shaper_sent[dir].is_some() {
                    continue; // measured from the shaper's own bytes (read_cake_stats)
                }
                match self.meters[dir].sample(now) {
                    Ok(Some(bps)) => {
                        self.throughput[dir] = bps;
                        self.samples.push(Sample::Throughput { dir, bps });
                    }
                    Ok(None) => {}
                    Err(_) => {} // a missing device shows as no throughput signal
                }
            }
        }
        if now >= self.ctl.next_wakeup() && self.cake_stats_due(now) {
            self.read_cake_stats(now);
        }
        for i in 0..self.samples.len() {
            let s = self.samples[i];
            self.ctl.on_sample(now, &s);
            self.delay.on_sample(&s);
        }
        self.samples_fed += self.samples.len() as u64;
        let events: Vec<Event> = self.prober.drain_events().collect();
        for e in events {
            let v = match e {
                Event::FallbackToEcho { addr } => {
                    json!({"t": self.t(now), "event": "fallback-to-echo", "reflector": addr.to_string()})
                }
                Event::Rotated { out, into } => json!({"t": self.t(now), "event": "rotated",
                    "out": out.to_string(), "in": into.to_string()}),
            };
            self.log_event(v);
        }
        if now >= self.ctl.next_wakeup() {
            let d = self.ctl.poll(now);
            self.steps += 1;
            self.apply(now, &d, false);
        }
        if let Some(m) = &self.metrics {
            self.snap.rate = [
                self.limiter.current(Direction::Down).unwrap_or(0),
                self.limiter.current(Direction::Up).unwrap_or(0),
            ];
            self.snap.throughput = [self.throughput.down, self.throughput.up];
            self.snap.cake_backlog = [self.cake_backlog.down, self.cake_backlog.up];
            self.snap.reflectors.clear();
            for (a, method, active, st) in self.prober.health() {
                let label = match method {
                    crate::config::Method::Udp => format!("udp:{a}"),
                    crate::config::Method::Echo => format!("echo:{}", a.ip()),
                    crate::config::Method::Timestamp => format!("timestamp:{}", a.ip()),
                };
                self.snap
                    .reflectors
                    .push((label, st.sent, st.answered, st.lost, active));
            }
            m.serve_pending(&metrics::render(&self.snap));
        }
    }

    /// Whether CAKE's statistics should be read before the control step due at `now`: reads
    /// ride on control steps (no wake-up of their own, and the backlog is as fresh as can be
    /// when the law uses it), at most one per `cake_stats_interval_ms` (with a quarter of it as
    /// slack, so that a step a little early does not skip a read), never when it is 0, and not
    /// within a second of a failed read.
    fn cake_stats_due(&self, now: Instant) -> bool {
        let every = self.cfg.cake_stats_interval_ms;
        every != 0
            && now >= self.cake_stats_retry
            && self.cake_stats_last.is_none_or(|l| {
                now.saturating_duration_since(l) >= Duration::from_micros(every.saturating_mul(750))
            })
    }

    /// Reads CAKE's statistics through the actuator and queues one `Sample::CakeStats` per
    /// direction that has them. The first failure of a run of failures is logged
    /// (`cake-stats-error`) and reads are retried at most once a second until one succeeds
    /// (logged as `cake-stats-ok`); meanwhile the controller goes on without CAKE's signals (they
    /// go stale after its `stall_after`).
    fn read_cake_stats(&mut self, now: Instant) {
        self.cake_stats_last = Some(now);
        match self.act.cake_stats() {
            Ok(st) => {
                if self.cake_stats_failing {
                    self.cake_stats_failing = false;
                    let v = json!({"t": self.t(now), "event": "cake-stats-ok"});
                    self.log_event(v);
                }
                for dir in Direction::ALL {
                    self.cake_backlog[dir] = st[dir].map(|c| c.backlog_bytes);
                    let sent = st[dir].and_then(|c| c.sent_bytes);
                    if let (Some(b), Some((t0, b0))) = (sent, self.shaper_sent[dir]) {
                        let dt = now.saturating_duration_since(t0).as_secs_f64();
                        if b >= b0 && dt > 0.0 {
                            let bps = ((b - b0) as f64 / dt) as u64;
                            self.throughput[dir] = bps;
                            self.samples.push(Sample::Throughput { dir, bps });
                        }
                    }
                    self.shaper_sent[dir] = sent.map(|b| (now, b));
                    if let Some(c) = st[dir] {
                        self.samples.push(Sample::CakeStats {
                            dir,
                            backlog_bytes: c.backlog_bytes,
                            drops: c.drops,
                            ecn_marks: c.ecn_marks,
                        });
                    }
                }
            }
            Err(e) => {
                self.cake_stats_retry = now.saturating_add(Duration::from_secs(1));
                self.cake_backlog = PerDir::default();
                self.shaper_sent = PerDir::default();
                if !self.cake_stats_failing {
                    self.cake_stats_failing = true;
                    let v = json!({"t": self.t(now), "event": "cake-stats-error",
                        "actuator": self.act.name(), "error": e.to_string()});
                    self.log_event(v);
                }
            }
        }
    }

    fn apply(&mut self, now: Instant, d: &Decision, force: bool) {
        let mut applied = PerDir::both(false);
        for dir in Direction::ALL {
            let rate = d.rate[dir];
            if self.limiter.should_apply(now, dir, rate, force) {
                match self.act.set_rate(dir, rate) {
                    Ok(()) => {
                        self.limiter.applied(now, dir, rate);
                        applied[dir] = true;
                        self.snap.changes += 1;
                    }
                    Err(e) => {
                        self.snap.actuator_errors += 1;
                        let v = json!({"t": self.t(now), "event": "actuator-error",
                            "dir": dir.name(), "rate": rate, "error": e.to_string()});
                        self.log_event(v);
                    }
                }
            }
        }
        // Tell the controller the rate the shaper really runs at (the limiter may have skipped
        // this decision, or the actuator failed): it compares delivery with that rate.
        for dir in Direction::ALL {
            if let Some(bps) = self.limiter.current(dir) {
                self.ctl.on_sample(now, &Sample::RateInForce { dir, bps });
            }
        }
        let due = self.cfg.log.every_step
            || applied.down
            || applied.up
            || now.saturating_duration_since(self.last_log) >= Duration::from_secs(1);
        if due {
            self.last_log = now;
            let delay = self.delay.take();
            let dir_json = |dir: Direction, i: usize| {
                json!({
                    "rate": d.rate[dir],
                    "applied": applied[dir],
                    "reason": d.reason[dir].to_string(),
                    "throughput": self.throughput[dir],
                    "cake_backlog": self.cake_backlog[dir],
                    "delay_ms": delay[i],
                })
            };
            let v = json!({
                "t": self.t(now),
                "event": "decision",
                "down": dir_json(Direction::Down, 0),
                "up": dir_json(Direction::Up, 1),
            });
            self.log_event(v);
        }
    }

    /// Sets both directions to the configured safe rate (on SIGTERM) and logs it.
    pub fn restore_safe(&mut self) {
        let now = self.clock.now();
        let cc = self.cfg.controller_config();
        for dir in Direction::ALL {
            let r = cc.safe[dir];
            let res = self.act.set_rate(dir, r);
            let v = json!({"t": self.t(now), "event": "safe-rate", "dir": dir.name(), "rate": r,
                "ok": res.is_ok(), "error": res.err().map(|e| e.to_string())});
            self.log_event(v);
        }
    }

    /// The decision log's per-reflector health, for `--status`-style output and tests.
    pub fn health(
        &self,
    ) -> Vec<(
        std::net::SocketAddr,
        crate::config::Method,
        bool,
        crate::probe::Stats,
    )> {
        self.prober.health().collect()
    }

    /// The metrics listener's address, if enabled.
    pub fn metrics_addr(&self) -> Option<std::net::SocketAddr> {
        self.metrics.as_ref().and_then(|m| m.local_addr().ok())
    }
}
