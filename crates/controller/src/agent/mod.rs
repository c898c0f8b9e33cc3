//! [`Agent`]: everything the PURPLE daemon decides, as one sans-IO state machine. The daemon
//! (`purple control`) and the simulator's closed loop (`experiments::c::closed_loop`) are two
//! thin shells around it that only move bytes and time, so every simulated result is a result
//! of the code that ships.
//!
//! The agent owns:
//! - the **probe schedule** across reflectors: `rate_hz` probes per second round-robin over
//!   the `active` reflectors on an exact integer schedule, never one reflector more often than
//!   `min_interval` (etiquette), at most `burst` probes at one wake-up after a stall;
//!   sequence numbers, the table of outstanding probes and loss timeouts;
//! - the **wire formats** ([`crate::wire`]): request bytes stamped from `now` and the wall-clock
//!   anchor the shell gives once ([`crate::wire::WallAnchor`]), reply parsing;
//! - **reply matching and validation** ([`validate`]: echoed send times, consistency, range
//!   against the baseline, clock steps), one-way delay extraction, every discard counted by
//!   reason and logged at a limited rate;
//! - **reflector health and rotation** by the controller's [`crate::reflectors::Pool`] rules
//!   (one mechanism, configured by [`crate::ReflectorParams`]; cake-autorate's 3 offences in
//!   60 s by default, or silence for `dead_after`): an active reflector the pool finds dead or
//!   bad is swapped for the next spare. An offence is a reply discarded as a lie, or a lost
//!   probe *on a clean path*: every probe to the other reflectors sent within one round of it
//!   was answered. Probes lost in a link outage or to a
//!   congested bottleneck are the path's, not the reflectors' (counted as offences, an outage
//!   of a few seconds left every reflector dead for the 60 s window and the controller at its
//!   safe rate). A timestamp reflector that never answered type 13 and lost three in a row falls
//!   back to echo;
//! - the **rate meter** over byte counters (the interface's, or the shaper's own sent bytes
//!   where it reports them), **CAKE's statistics**, and *when* the shell should read them
//!   ([`Agent::reads_due`]: right before each control step by default);
//! - the **actuator's limits** ([`Limiter`]) and the **rate in force** (the shell reports each
//!   attempt to apply; [`crate::Sample::RateInForce`] reaches the law);
//! - the **law**, through [`Engine`] with any [`Law`];
//! - the **delay source** ([`crate::DelaySource`]): the probes, the passive estimate the shell
//!   reads from its own [`crate::passive::PassiveDelay`] ([`Agent::handle_passive`]), or both;
//!   with `passive` alone no probe is sent. Which source is in force per direction is logged
//!   at the first step and whenever it changes and holds for a second
//!   ([`Event::DelaySource`]);
//! - **typed events** for the decision log ([`Event`]), decided by a [`LogPolicy`].
//!
//! It has no clock, no socket, no thread, and allocates nothing per probe in steady state
//! (fixed tables; output queues keep their capacity). Like quinn-proto's `Connection`, it is
//! driven by `handle_*(now, ..)` inputs and drained through `poll_*` outputs. A shell's loop:
//!
//! ```text
//! loop {
//!     wait until agent.poll_timeout() or a socket is readable;  now = clock
//!     for each datagram read:   agent.handle_datagram(now, from, socket, bytes)
//!     let r = agent.reads_due(now);  read what it names;  agent.handle_counter / handle_cake_stats
//!                                                          / handle_passive
//!     agent.handle_timeout(now)
//!     while let Some(t) = agent.poll_transmit()   { send t.bytes() to t.to }
//!     while let Some(s) = agent.poll_rate()       { apply; agent.handle_rate_applied(now, s, result) }
//!     while let Some((t, e)) = agent.poll_event() { log it }
//! }
//! ```
//!
//! `now` must never go backwards between calls (an earlier `now` is taken as the latest seen).

pub mod meter;
pub mod probe;
pub mod validate;

pub use meter::{Limiter, LimiterParams, RateMeter};
pub use probe::{
    Method, ProbeParams, ReflectorSpec, ReflectorStats, ReflectorStatus, SocketKind, Transmit,
    MAX_REQUEST, PENDING,
};
pub use validate::{Discard, ValidationParams};

use crate::config::{check, ConfigError};
use crate::engine::{DelayInForce, Engine, Law};
use crate::passive::PassiveReading;
use crate::purple::Phase;
use crate::reflectors::Health;
use crate::wire::WallAnchor;
use crate::{
    Config, Controller, Decision, DelaySource, Direction, Duration, Instant, PerDir, Rate, Reason,
    ReflectorId, Sample,
};
use probe::{Matched, NoMatch, Prober, Sent};
use std::collections::VecDeque;
use std::net::SocketAddr;
use validate::{Discards, Rejected, Verdict};

/// When the shell reads byte counters and CAKE's statistics for the agent.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReadingParams {
    /// Counters are read this often while CAKE's statistics are off. Default 200 ms. Accepted
    /// 10 ms ..= 10 s.
    pub counter_interval: Duration,
    /// CAKE's statistics are read right before a control step, at most once per this (with a
    /// quarter of it as slack); zero: never. While it is not zero, the counters are read right
    /// before every control step too, so that delivery is measured over the interval the rate
    /// was in force. Default 50 ms (every PURPLE step). Accepted 0 or 10 ms ..= 10 s.
    pub cake_stats_interval: Duration,
    /// After a failed statistics read, none before this much later. Default 1 s. Accepted
    /// 10 ms ..= 60 s.
    pub cake_stats_retry: Duration,
    /// Per direction, whether the shell also reads a counter of what the link delivered
    /// before the shaper ([`Agent::handle_delivered`]): for a download shaped at a router after
    /// the link, the WAN device's received bytes. The throughput the law sees is then, per
    /// interval, the larger of that delivery and the direction's own throughput (CAKE's sent
    /// bytes or the counter): CAKE's sent bytes never exceed our rate, so a link that delivered
    /// more than our rate shows it only there. Meaningless for a shaper in front of the link
    /// (what reaches it there is the senders' demand, not a delivery). Default: neither.
    pub delivered: PerDir<bool>,
}

impl Default for ReadingParams {
    fn default() -> Self {
        ReadingParams {
            counter_interval: Duration::from_millis(200),
            cake_stats_interval: Duration::from_millis(50),
            cake_stats_retry: Duration::from_secs(1),
            delivered: PerDir::both(false),
        }
    }
}

impl ReadingParams {
    /// Bounds check; errors name the option as in the daemon's file.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let ms = Duration::from_millis;
        check(
            (ms(10)..=Duration::from_secs(10)).contains(&self.counter_interval),
            "counter_interval_ms",
            self.counter_interval,
            "10 ..= 10000",
        )?;
        check(
            self.cake_stats_interval == Duration::ZERO
                || (ms(10)..=Duration::from_secs(10)).contains(&self.cake_stats_interval),
            "cake_stats_interval_ms",
            self.cake_stats_interval,
            "0 (off) or 10 ..= 10000",
        )?;
        check(
            (ms(10)..=Duration::from_secs(60)).contains(&self.cake_stats_retry),
            "cake_stats_retry_ms",
            self.cake_stats_retry,
            "10 ..= 60000",
        )
    }

    fn aligned(&self) -> bool {
        self.cake_stats_interval != Duration::ZERO
    }
}

/// Which control steps become [`Event::Decision`]s.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LogPolicy {
    /// Every step (`true`), or only steps that applied a change plus one per `heartbeat`.
    /// Default false.
    pub every_step: bool,
    /// Longest time between two decision events. Default 1 s.
    pub heartbeat: Duration,
}

impl Default for LogPolicy {
    fn default() -> Self {
        LogPolicy {
            every_step: false,
            heartbeat: Duration::from_secs(1),
        }
    }
}

/// Everything an [`Agent`] is configured with (its state lives apart, in the agent).
#[derive(Clone, Debug, PartialEq)]
pub struct AgentConfig {
    /// The controller's configuration (rates, the reflector pool's health rules, baselines,
    /// safety).
    pub controller: Config,
    /// The probe schedule.
    pub probe: ProbeParams,
    /// Reflectors, active ones first (the first `probe.active`), then spares.
    pub reflectors: Vec<ReflectorSpec>,
    /// Whether the shell's ICMP socket is raw (timestamps possible, replies carry our
    /// identifier); otherwise an unprivileged "ping" socket: echo only, identifier rewritten.
    pub icmp_raw: bool,
    /// Our ICMP identifier.
    pub ident: u16,
    /// The wall clock the probes are stamped with.
    pub anchor: WallAnchor,
    /// When counters and CAKE's statistics are read.
    pub readings: ReadingParams,
    /// The actuator's limits.
    pub actuator: LimiterParams,
    /// Reply validation.
    pub validation: ValidationParams,
    /// Which steps are logged.
    pub log: LogPolicy,
}

impl AgentConfig {
    /// A configuration with `controller`, `reflectors` and `anchor`, everything else at its
    /// default (raw ICMP, identifier 0x5055).
    pub fn new(controller: Config, reflectors: Vec<ReflectorSpec>, anchor: WallAnchor) -> Self {
        AgentConfig {
            controller,
            probe: ProbeParams::default(),
            reflectors,
            icmp_raw: true,
            ident: 0x5055,
            anchor,
            readings: ReadingParams::default(),
            actuator: LimiterParams::default(),
            validation: ValidationParams::default(),
            log: LogPolicy::default(),
        }
    }

    /// Checks every option; the error names the first bad one.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check(
            !self.reflectors.is_empty() || self.controller.delay_source == DelaySource::Passive,
            "probe.reflectors",
            "[]",
            "at least one reflector (none only with delay_source = \"passive\")",
        )?;
        self.controller.validate()?;
        self.probe.validate()?;
        self.readings.validate()?;
        self.actuator.validate()?;
        self.validation.validate()
    }
}

/// Which readings the shell should make now, before [`Agent::handle_timeout`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reads {
    /// Read this direction's byte counter ([`Agent::handle_counter`]).
    pub counters: PerDir<bool>,
    /// Read CAKE's statistics of both directions ([`Agent::handle_cake_stats`]).
    pub cake_stats: bool,
    /// Take a reading of the passive estimator, where the shell runs one
    /// ([`Agent::handle_passive`]): right before each control step, when the delay source
    /// uses it.
    pub passive: bool,
    /// Read this direction's delivered-bytes counter ([`Agent::handle_delivered`]), where
    /// [`ReadingParams::delivered`] asks for one: with the direction's throughput reading.
    pub delivered: PerDir<bool>,
}

impl Reads {
    /// Whether anything is to be read.
    pub fn any(&self) -> bool {
        self.counters.down
            || self.counters.up
            || self.cake_stats
            || self.passive
            || self.delivered.down
            || self.delivered.up
    }
}

/// CAKE's own counters for one direction, as the shaper reports them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CakeCounters {
    /// Bytes queued now.
    pub backlog_bytes: u64,
    /// Packets dropped so far (cumulative; a decrease is taken as a reset).
    pub drops: u64,
    /// Packets ECN-marked so far (cumulative; 0 where the shaper does not report marks).
    pub ecn_marks: u64,
    /// Bytes the shaper released so far, as its shaper charges them (`purple bridge`'s
    /// `tx_wire_bytes`), where it reports them. Throughput then comes from this instead of the
    /// interface counter, which counts a GSO super-packet's headers once (about 4% less at a
    /// 1500-byte MTU, read as a standing deficit in the lab).
    pub sent_bytes: Option<u64>,
    /// Bytes that arrived at the shaper so far, in the units of `sent_bytes` (`purple
    /// bridge`'s `rx_wire_bytes`: received frames on the wire, a GRO super-packet as the
    /// segments it carries), where it reports them. For a direction whose delivery is read
    /// beside CAKE's sent bytes ([`ReadingParams::delivered`]) this is that delivery, and no
    /// delivered-bytes counter is read for it ([`Agent::reads_due`]): an interface counter
    /// counts a super-packet's headers once, about 4% less than the shaper charges.
    pub arrived_bytes: Option<u64>,
}

/// The radio's queue metrics for one direction, where a modem exposes them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RadioReading {
    /// Direction.
    pub dir: Direction,
    /// Bytes queued in the radio.
    pub backlog_bytes: u64,
    /// Packets queued in the radio.
    pub backlog_packets: u32,
    /// Packets the radio dropped so far (cumulative).
    pub drops: u64,
    /// Recent mean sojourn time.
    pub sojourn: Duration,
    /// The radio's own capacity estimate.
    pub capacity: Option<Rate>,
}

/// A rate to apply to a shaper now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SetRate {
    /// Which shaper.
    pub dir: Direction,
    /// The rate.
    pub rate: Rate,
    /// The safe rate on shutdown ([`Agent::handle_shutdown`]), not a control step's.
    pub safe: bool,
}

/// One direction of a logged control step.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DirStep {
    /// The decided rate.
    pub rate: Rate,
    /// Whether it was applied at this step (passed the limiter and the actuator succeeded).
    pub applied: bool,
    /// Why.
    pub reason: Reason,
    /// The latest measured throughput (zero before the first).
    pub throughput: Rate,
    /// CAKE's backlog at the latest statistics read, bytes; `None` when unknown.
    pub cake_backlog: Option<u64>,
    /// Mean queueing delay over each reflector's smallest delay since the previous decision
    /// event, ms; `None` without accepted replies in between.
    pub delay_ms: Option<f64>,
    /// The passive estimate at the latest reading, ms; `None` without one.
    pub passive_ms: Option<f64>,
    /// Where the law's delay came from at this step.
    pub source: DelayInForce,
}

/// Something the agent did that belongs in the decision log.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// A control step (see [`LogPolicy`] for which are reported).
    Decision {
        /// Download.
        down: DirStep,
        /// Upload.
        up: DirStep,
    },
    /// A reflector that never answered ICMP timestamps is now probed with echo.
    FallbackToEcho {
        /// The reflector.
        reflector: SocketAddr,
    },
    /// An active reflector the pool found dead or bad was replaced by a spare.
    Rotated {
        /// Taken out.
        out: SocketAddr,
        /// Put in.
        into: SocketAddr,
    },
    /// A reflector's clock stepped; its baselines restart at the new offset.
    ClockStep {
        /// The reflector.
        reflector: SocketAddr,
        /// The step, ms (positive: its clock jumped ahead).
        shift_ms: f64,
    },
    /// Replies discarded for `reason` (rate-limited: `count` since the previous report).
    Discarded {
        /// Why.
        reason: Discard,
        /// The last reflector (or source address) concerned.
        reflector: Option<SocketAddr>,
        /// Discards since the previous report of this reason.
        count: u64,
        /// Discards of this reason since start.
        total: u64,
    },
    /// Applying a rate failed.
    ActuatorError {
        /// Direction.
        dir: Direction,
        /// The rate.
        rate: Rate,
        /// The shell's message.
        error: String,
    },
    /// Reading CAKE's statistics failed (the first of a run of failures).
    CakeStatsError {
        /// The shell's message.
        error: String,
    },
    /// Reading CAKE's statistics works again.
    CakeStatsOk,
    /// Which delay source is in force per direction: at the first control step, and whenever
    /// it changed and held for a second (the passive estimate comes and goes with the users'
    /// traffic, the probes with the reflectors).
    DelaySource {
        /// The configured source.
        configured: DelaySource,
        /// Download.
        down: DelayInForce,
        /// Upload.
        up: DelayInForce,
    },
    /// The law changed phase in one direction (laws with phases: PURPLE).
    Transition {
        /// Direction.
        dir: Direction,
        /// From.
        from: Phase,
        /// To.
        to: Phase,
        /// The rule that moved it (as in the decision's reason).
        trigger: Reason,
    },
    /// The safe rate was applied on shutdown (`error` if it failed).
    SafeRate {
        /// Direction.
        dir: Direction,
        /// The rate.
        rate: Rate,
        /// The shell's message, on failure.
        error: Option<String>,
    },
}

/// Counters of what the agent did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AgentStats {
    /// Control steps run.
    pub steps: u64,
    /// Samples fed to the controller.
    pub samples_fed: u64,
    /// Rate changes applied successfully.
    pub rate_changes: u64,
    /// Failed attempts to apply.
    pub actuator_errors: u64,
}

#[derive(Clone, Copy, Debug)]
struct StepState {
    decision: Decision,
    pending: PerDir<bool>,
    applied: PerDir<bool>,
}

/// Mean delay over each reflector's minimum, per direction, since the last take.
#[derive(Clone, Copy, Debug, Default)]
struct DelayStat {
    sum_ns: PerDir<f64>,
    n: PerDir<u32>,
}

impl DelayStat {
    fn take(&mut self) -> PerDir<Option<f64>> {
        let f = |d: Direction| (self.n[d] > 0).then(|| self.sum_ns[d] / f64::from(self.n[d]) / 1e6);
        let r = PerDir::new(f(Direction::Down), f(Direction::Up));
        *self = DelayStat::default();
        r
    }
}

/// The agent's outputs, apart from its decisions (so that loss handling can borrow them next
/// to the prober).
#[derive(Debug)]
struct Outputs {
    transmits: VecDeque<Transmit>,
    rates: VecDeque<SetRate>,
    events: VecDeque<(Instant, Event)>,
    stats: AgentStats,
}

/// The sans-IO PURPLE agent. See the module documentation.
#[derive(Debug)]
pub struct Agent<L: Law> {
    cfg: AgentConfig,
    engine: Engine<L>,
    probes: Prober,
    discards: Discards,
    out: Outputs,
    meters: PerDir<RateMeter>,
    shaper_meters: PerDir<RateMeter>,
    /// The delivered-bytes counters' meters and their latest rate with its reading time.
    delivered_meters: PerDir<RateMeter>,
    delivered: PerDir<Option<(Instant, Rate)>>,
    /// The meters of the shaper's own arrival counts ([`CakeCounters::arrived_bytes`]), and
    /// whether the last statistics read gave them for a direction whose delivery is read.
    arrived_meters: PerDir<RateMeter>,
    arrivals_from_shaper: PerDir<bool>,
    from_shaper: PerDir<bool>,
    throughput: PerDir<Rate>,
    cake_backlog: PerDir<Option<u64>>,
    next_counter: Instant,
    cake_last: Option<Instant>,
    cake_retry: Instant,
    cake_failing: bool,
    limiter: Limiter,
    step: Option<StepState>,
    delay: DelayStat,
    last_log: Option<Instant>,
    latest: Instant,
    /// The latest passive estimate per direction, ms.
    passive_ms: PerDir<Option<f64>>,
    /// The delay sources last logged, and a change not yet logged (since when).
    source_logged: Option<PerDir<DelayInForce>>,
    source_change: Option<(PerDir<DelayInForce>, Instant)>,
}

/// A change of delay source is logged once it has held this long.
const SOURCE_SETTLE: Duration = Duration::from_secs(1);

impl<L: Law> Agent<L> {
    /// An agent with `cfg` and `law` (both validated), starting at `now`: its first
    /// [`Agent::poll_timeout`] is `now` (probe, read, step).
    pub fn new(cfg: AgentConfig, law: L, now: Instant) -> Result<Self, ConfigError> {
        cfg.validate()?;
        let mut cc = cfg.controller.clone();
        // The pool must hold every reflector that can be active, with room for a rotation.
        cc.reflectors.max_reflectors = cc
            .reflectors
            .max_reflectors
            .max((cfg.probe.active + 2).min(64));
        let mut engine = Engine::new(cc, law)?;
        let probes = Prober::new(cfg.probe, &cfg.reflectors, cfg.icmp_raw, cfg.ident, now);
        for r in &probes.refl[..probes.active] {
            engine.pool_mut().track(now, r.id);
        }
        Ok(Agent {
            limiter: Limiter::new(cfg.actuator),
            engine,
            probes,
            discards: Discards::default(),
            out: Outputs {
                transmits: VecDeque::with_capacity(2 * cfg.probe.burst as usize),
                rates: VecDeque::with_capacity(4),
                events: VecDeque::with_capacity(16),
                stats: AgentStats::default(),
            },
            meters: PerDir::default(),
            shaper_meters: PerDir::default(),
            delivered_meters: PerDir::default(),
            delivered: PerDir::both(None),
            arrived_meters: PerDir::default(),
            arrivals_from_shaper: PerDir::both(false),
            from_shaper: PerDir::both(false),
            throughput: PerDir::both(Rate::ZERO),
            cake_backlog: PerDir::both(None),
            next_counter: now,
            cake_last: None,
            cake_retry: now,
            cake_failing: false,
            step: None,
            delay: DelayStat::default(),
            last_log: None,
            latest: now,
            passive_ms: PerDir::both(None),
            source_logged: None,
            source_change: None,
            cfg,
        })
    }

    fn clock(&mut self, now: Instant) -> Instant {
        self.latest = self.latest.max(now);
        self.latest
    }

    // ---- inputs -------------------------------------------------------------------------

    /// A datagram that arrived at `now` from `from` on a `socket` of the kind the agent sends
    /// from (ICMP bytes may start with the IPv4 header, as raw sockets deliver them). Call for
    /// every datagram read, as soon as it is read, with its arrival time. Bounded work; any
    /// bytes are accepted: what is not a valid reply to an outstanding probe is counted as a
    /// discard by reason (and reported at a limited rate), never passed to the controller.
    pub fn handle_datagram(
        &mut self,
        now: Instant,
        from: SocketAddr,
        socket: SocketKind,
        bytes: &[u8],
    ) {
        let now = self.clock(now);
        match self.probes.match_reply(from, socket, bytes) {
            Err(u) => {
                let reason = match u {
                    NoMatch::Garbage => Discard::Garbage,
                    NoMatch::Foreign => Discard::Foreign,
                    NoMatch::WrongId => Discard::WrongId,
                    NoMatch::Unmatched => Discard::Unmatched,
                    NoMatch::WrongSource => Discard::WrongSource,
                };
                self.discard(now, reason, Some(from));
            }
            Ok(m) => self.on_reply(now, m),
        }
    }

    fn on_reply(&mut self, now: Instant, m: Matched) {
        let i = m.index;
        let id = self.probes.refl[i].id;
        let base = match self
            .engine
            .pool()
            .reflectors()
            .iter()
            .find(|r| r.id() == id)
        {
            Some(r) => PerDir::new(
                r.baseline(Direction::Down).estimate(now),
                r.baseline(Direction::Up).estimate(now),
            ),
            None => PerDir::both(None),
        };
        let v = validate::validate(
            &m,
            now,
            &self.cfg.anchor,
            &self.probes.refl[i].check,
            base,
            &self.cfg.validation,
        );
        match v {
            Ok(v) => self.accept(now, i, &m, v),
            Err(Rejected {
                reason: reason @ Discard::ClockStep,
                step: Some((shift, v)),
            }) => {
                let vp = self.cfg.validation;
                let rtt = now.saturating_duration_since(m.pending.sent);
                let tol = (rtt.as_nanos() + vp.slack.as_nanos()).min(i64::MAX as u64) as i64;
                let c = &mut self.probes.refl[i].check;
                let n = match c.step {
                    Some((s, n)) if (shift.saturating_sub(s)).abs() <= tol => n + 1,
                    _ => 1,
                };
                c.step = Some((shift, n));
                if n >= vp.rebase_after {
                    let addr = self.probes.refl[i].spec.addr;
                    let old = self.probes.renew_id(i);
                    self.engine.pool_mut().remove(old);
                    let new = self.probes.refl[i].id;
                    self.engine.pool_mut().track(now, new);
                    self.push_event(
                        now,
                        Event::ClockStep {
                            reflector: addr,
                            shift_ms: shift as f64 / 1e6,
                        },
                    );
                    self.accept(now, i, &m, v);
                } else {
                    self.probes.refl[i].stats.discarded += 1;
                    let addr = self.probes.refl[i].spec.addr;
                    self.discard(now, reason, Some(addr));
                }
            }
            Err(r) => {
                let refl = &mut self.probes.refl[i];
                refl.stats.discarded += 1;
                let addr = refl.spec.addr;
                if r.reason.is_offence() {
                    self.out.stats.samples_fed += 1;
                    self.engine.on_sample(
                        now,
                        &Sample::ProbeLost {
                            reflector: id,
                            sent: m.pending.sent,
                        },
                    );
                }
                self.discard(now, r.reason, Some(addr));
            }
        }
    }

    fn accept(&mut self, now: Instant, i: usize, m: &Matched, v: Verdict) {
        let sent = m.pending.sent;
        let r = &mut self.probes.refl[i];
        let id = r.id;
        r.stats.answered += 1;
        r.consecutive_lost = 0;
        r.check.step = None;
        match v {
            Verdict::Owd {
                up,
                down,
                rtt,
                remote,
            } => {
                if m.pending.method == Method::Timestamp {
                    r.ts_answered = true;
                }
                r.check.rtt_min = Some(r.check.rtt_min.map_or(rtt, |x| x.min(rtt)));
                if r.check.last_remote.is_none_or(|(t, _)| sent > t) {
                    r.check.last_remote = Some((sent, remote));
                }
                for (dir, owd_ns) in [(Direction::Up, up), (Direction::Down, down)] {
                    let min = r.check.min_owd[dir].map_or(owd_ns, |x| x.min(owd_ns));
                    r.check.min_owd[dir] = Some(min);
                    self.delay.sum_ns[dir] += (owd_ns - min) as f64;
                    self.delay.n[dir] += 1;
                    self.out.stats.samples_fed += 1;
                    self.engine.on_sample(
                        now,
                        &Sample::Owd {
                            reflector: id,
                            dir,
                            sent,
                            owd_ns,
                        },
                    );
                }
            }
            Verdict::Rtt(rtt) => {
                r.check.rtt_min = Some(r.check.rtt_min.map_or(rtt, |x| x.min(rtt)));
                let half = (rtt.as_nanos() / 2).min(i64::MAX as u64) as i64;
                for dir in Direction::ALL {
                    let min = r.check.min_owd[dir].map_or(half, |x| x.min(half));
                    r.check.min_owd[dir] = Some(min);
                    self.delay.sum_ns[dir] += (half - min) as f64;
                    self.delay.n[dir] += 1;
                }
                self.out.stats.samples_fed += 1;
                self.engine.on_sample(
                    now,
                    &Sample::Rtt {
                        reflector: id,
                        sent,
                        rtt,
                    },
                );
            }
        }
    }

    fn discard(&mut self, now: Instant, reason: Discard, from: Option<SocketAddr>) {
        let every = self.cfg.validation.report_every;
        if let Some((reason, reflector, count, total)) =
            self.discards.count(now, reason, from, every)
        {
            self.push_event(
                now,
                Event::Discarded {
                    reason,
                    reflector,
                    count,
                    total,
                },
            );
        }
    }

    fn push_event(&mut self, now: Instant, e: Event) {
        self.out.events.push_back((now, e));
    }

    /// The send of the probe `token` ([`Transmit::token`]) failed (no route, link down): it is
    /// lost at once. Call right after a failed send.
    pub fn handle_send_failed(&mut self, now: Instant, token: u32) {
        let now = self.clock(now);
        if let Some((i, sent)) = self.probes.take_token(token) {
            // No route: the link's failure, not the reflector's.
            let (pr, engine, out) = (&mut self.probes, &mut self.engine, &mut self.out);
            on_lost(pr, engine, out, now, i, sent, false);
        }
    }

    /// Which readings to make now. Call at every wake-up before [`Agent::handle_timeout`]; read
    /// what it names and report with [`Agent::handle_counter`] and
    /// [`Agent::handle_cake_stats`] at the same `now`, a delivered-bytes counter
    /// ([`Agent::handle_delivered`]) before both. With CAKE's statistics on, all are
    /// asked for right before each control step; otherwise counters every
    /// `readings.counter_interval` (and a direction whose throughput comes from the shaper's
    /// own sent bytes needs no counter).
    #[must_use]
    pub fn reads_due(&self, now: Instant) -> Reads {
        let now = now.max(self.latest);
        let rp = &self.cfg.readings;
        if rp.aligned() {
            let step = now >= self.engine.next_wakeup();
            Reads {
                passive: step && self.cfg.controller.delay_source.passive(),
                counters: PerDir::new(step && !self.from_shaper.down, step && !self.from_shaper.up),
                delivered: PerDir::new(
                    step && rp.delivered.down && !self.arrivals_from_shaper.down,
                    step && rp.delivered.up && !self.arrivals_from_shaper.up,
                ),
                cake_stats: step
                    && now >= self.cake_retry
                    && self.cake_last.is_none_or(|l| {
                        now.saturating_duration_since(l).as_nanos()
                            >= rp.cake_stats_interval.as_nanos() / 4 * 3
                    }),
            }
        } else {
            let c = now >= self.next_counter;
            Reads {
                counters: PerDir::both(c),
                delivered: PerDir::new(c && rp.delivered.down, c && rp.delivered.up),
                cake_stats: false,
                passive: now >= self.engine.next_wakeup()
                    && self.cfg.controller.delay_source.passive(),
            }
        }
    }

    /// A reading of `dir`'s cumulative delivered-bytes counter ([`ReadingParams::delivered`])
    /// made at `now` (`None`: the read failed; the throughput is then the direction's own
    /// alone). Call for each direction [`Agent::reads_due`] names, before that direction's
    /// [`Agent::handle_counter`] or [`Agent::handle_cake_stats`] at the same `now`: the rate
    /// it measures counts only for the throughput reading made at the same instant.
    pub fn handle_delivered(&mut self, now: Instant, dir: Direction, bytes: Option<u64>) {
        let now = self.clock(now);
        self.delivered[dir] = match bytes {
            Some(b) => self.delivered_meters[dir].update(now, b).map(|r| (now, r)),
            None => {
                self.delivered_meters[dir].reset();
                None
            }
        };
    }

    /// The shaper's cumulative arrival count for `dir` read at `now` (`None`: not reported,
    /// or the read failed). Where `dir`'s delivery is read ([`ReadingParams::delivered`]) it
    /// is that delivery, in place of the counter's; when it stops being reported, the counter
    /// is read again from the next step, over a fresh meter.
    fn take_arrivals(&mut self, now: Instant, dir: Direction, arrived: Option<u64>) {
        match arrived {
            Some(a) if self.cfg.readings.delivered[dir] => {
                self.arrivals_from_shaper[dir] = true;
                self.delivered[dir] = self.arrived_meters[dir].update(now, a).map(|r| (now, r));
            }
            _ if self.arrivals_from_shaper[dir] => {
                self.arrivals_from_shaper[dir] = false;
                self.arrived_meters[dir].reset();
                self.delivered_meters[dir].reset();
                self.delivered[dir] = None;
            }
            _ => {}
        }
    }

    /// `rate`, the throughput of `dir` measured at `now`, or the link's delivery over the same
    /// interval where that was more (read at the same instant; taken once).
    fn with_delivered(&mut self, now: Instant, dir: Direction, rate: Rate) -> Rate {
        match self.delivered[dir].take() {
            Some((at, d)) if at == now => rate.max(d),
            _ => rate,
        }
    }

    /// A reading of `dir`'s cumulative byte counter made at `now` (`None`: the read failed; the
    /// throughput signal then goes stale). Call for each direction [`Agent::reads_due`] names.
    pub fn handle_counter(&mut self, now: Instant, dir: Direction, bytes: Option<u64>) {
        let now = self.clock(now);
        self.next_counter = now.saturating_add(self.cfg.readings.counter_interval);
        if let Some(b) = bytes {
            if let Some(rate) = self.meters[dir].update(now, b) {
                let rate = self.with_delivered(now, dir, rate);
                self.throughput[dir] = rate;
                self.feed(now, Sample::Throughput { dir, rate });
            }
        }
    }

    /// CAKE's statistics read at `now`: per direction the shaper's counters (`None` where there
    /// is no shaper to read), or the shell's own error for the read (any type that displays;
    /// the agent keeps only its message, for the log). Call when [`Agent::reads_due`] asks.
    /// The first failure of a run is logged ([`Event::CakeStatsError`]) and reads pause for
    /// `readings.cake_stats_retry`; the first success after is logged too.
    pub fn handle_cake_stats<E: std::fmt::Display>(
        &mut self,
        now: Instant,
        read: Result<PerDir<Option<CakeCounters>>, E>,
    ) {
        let now = self.clock(now);
        self.cake_last = Some(now);
        match read {
            Ok(st) => {
                if self.cake_failing {
                    self.cake_failing = false;
                    self.push_event(now, Event::CakeStatsOk);
                }
                for dir in Direction::ALL {
                    self.cake_backlog[dir] = st[dir].map(|c| c.backlog_bytes);
                    self.take_arrivals(now, dir, st[dir].and_then(|c| c.arrived_bytes));
                    match st[dir].and_then(|c| c.sent_bytes) {
                        Some(b) => {
                            self.from_shaper[dir] = true;
                            if let Some(rate) = self.shaper_meters[dir].update(now, b) {
                                let rate = self.with_delivered(now, dir, rate);
                                self.throughput[dir] = rate;
                                self.feed(now, Sample::Throughput { dir, rate });
                            }
                        }
                        None => {
                            self.from_shaper[dir] = false;
                            self.shaper_meters[dir].reset();
                        }
                    }
                    if let Some(c) = st[dir] {
                        self.feed(
                            now,
                            Sample::CakeStats {
                                dir,
                                backlog_bytes: c.backlog_bytes,
                                drops: c.drops,
                                ecn_marks: c.ecn_marks,
                            },
                        );
                    }
                }
            }
            Err(error) => {
                self.cake_retry = now.saturating_add(self.cfg.readings.cake_stats_retry);
                self.cake_backlog = PerDir::both(None);
                for dir in Direction::ALL {
                    self.take_arrivals(now, dir, None);
                    self.from_shaper[dir] = false;
                    self.shaper_meters[dir].reset();
                }
                if !self.cake_failing {
                    self.cake_failing = true;
                    let error = error.to_string();
                    self.push_event(now, Event::CakeStatsError { error });
                }
            }
        }
    }

    /// A reading of the shell's passive estimator
    /// ([`crate::passive::PassiveDelay::reading`]) taken at `now`. Call when
    /// [`Agent::reads_due`] asks (`passive`), empty readings included: they tell the engine
    /// the feed runs (see [`Sample::Passive`]).
    pub fn handle_passive(&mut self, now: Instant, r: &PassiveReading) {
        let now = self.clock(now);
        for dir in Direction::ALL {
            self.passive_ms[dir] = r.queue[dir].map(|q| q.as_millis_f64());
            self.feed(
                now,
                Sample::Passive {
                    dir,
                    queue: r.queue[dir],
                    flows: r.flows[dir],
                },
            );
        }
    }

    /// The radio's queue metrics, where a modem exposes them (PURPLE with radio metrics).
    pub fn handle_radio(&mut self, now: Instant, r: RadioReading) {
        let now = self.clock(now);
        self.feed(
            now,
            Sample::RadioQueue {
                dir: r.dir,
                backlog_bytes: r.backlog_bytes,
                backlog_packets: r.backlog_packets,
                drops: r.drops,
                sojourn: r.sojourn,
                capacity: r.capacity,
            },
        );
    }

    fn feed(&mut self, now: Instant, s: Sample) {
        self.out.stats.samples_fed += 1;
        self.engine.on_sample(now, &s);
    }

    /// Does what is due at `now`: retires lost probes, sends due probes, rotates reflectors the
    /// pool finds dead or bad, runs the control step when due (its rate changes come out of
    /// [`Agent::poll_rate`]) and reports discards held back by the rate limit. Call when
    /// [`Agent::poll_timeout`] passes (early calls are harmless), after the datagrams and
    /// readings of this wake-up. Bounded work.
    pub fn handle_timeout(&mut self, now: Instant) {
        let now = self.clock(now);
        if self.probing() {
            let (probes, engine, out) = (&mut self.probes, &mut self.engine, &mut self.out);
            probes.expire(now, &mut |pr, i, sent, blame| {
                on_lost(pr, engine, out, now, i, sent, blame)
            });
            let anchor = self.cfg.anchor;
            let (probes, engine, out) = (&mut self.probes, &mut self.engine, &mut self.out);
            probes.send_due(now, &anchor, &mut |pr, s| match s {
                Sent::Probe(t) => out.transmits.push_back(t),
                Sent::Lost(i, sent, blame) => on_lost(pr, engine, out, now, i, sent, blame),
            });
            self.review_reflectors(now);
        }
        if now >= self.engine.next_wakeup() {
            self.run_step(now);
        }
        let every = self.cfg.validation.report_every;
        let events = &mut self.out.events;
        self.discards
            .flush(now, every, &mut |(reason, reflector, count, total)| {
                events.push_back((
                    now,
                    Event::Discarded {
                        reason,
                        reflector,
                        count,
                        total,
                    },
                ))
            });
    }

    /// Whether probes are sent (every delay source but `passive` alone).
    fn probing(&self) -> bool {
        self.cfg.controller.delay_source.probes()
    }

    /// Logs the delay sources in force: at the first step, then each change that held for
    /// [`SOURCE_SETTLE`].
    fn review_source(&mut self, now: Instant) {
        let cur = PerDir::new(
            self.engine.delay_in_force(Direction::Down),
            self.engine.delay_in_force(Direction::Up),
        );
        let due = match (self.source_logged, self.source_change) {
            (None, _) => true,
            (Some(l), _) if l == cur => {
                self.source_change = None;
                false
            }
            (Some(_), Some((c, since))) if c == cur => {
                now.saturating_duration_since(since) >= SOURCE_SETTLE
            }
            (Some(_), _) => {
                self.source_change = Some((cur, now));
                false
            }
        };
        if due {
            self.source_logged = Some(cur);
            self.source_change = None;
            self.push_event(
                now,
                Event::DelaySource {
                    configured: self.cfg.controller.delay_source,
                    down: cur.down,
                    up: cur.up,
                },
            );
        }
    }

    /// Swaps active reflectors the pool finds dead or bad for spares.
    fn review_reflectors(&mut self, now: Instant) {
        let pr = &mut self.probes;
        if pr.refl.len() <= pr.active {
            return;
        }
        for i in 0..pr.active {
            let id = pr.refl[i].id;
            if !matches!(
                self.engine.pool().health(id, now),
                Some(Health::Dead | Health::Bad)
            ) {
                continue;
            }
            self.engine.pool_mut().remove(id);
            if let Some((out, into)) = pr.rotate(i) {
                let last = pr.refl.len() - 1;
                pr.renew_id(last);
                self.engine.pool_mut().track(now, pr.refl[i].id);
                self.out
                    .events
                    .push_back((now, Event::Rotated { out, into }));
            }
        }
    }

    fn run_step(&mut self, now: Instant) {
        if let Some(prev) = self.step.take() {
            // The shell did not report every apply of the previous step: log it as it stands.
            self.finish_step(now, prev);
        }
        let d = self.engine.poll(now);
        self.out.stats.steps += 1;
        while let Some(t) = self.engine.take_transition() {
            let e = Event::Transition {
                dir: t.dir,
                from: t.from,
                to: t.to,
                trigger: t.trigger,
            };
            self.push_event(t.at, e);
        }
        self.review_source(now);
        let mut st = StepState {
            decision: d,
            pending: PerDir::both(false),
            applied: PerDir::both(false),
        };
        for dir in Direction::ALL {
            if self.limiter.should_apply(now, dir, d.rate[dir], false) {
                self.out.rates.push_back(SetRate {
                    dir,
                    rate: d.rate[dir],
                    safe: false,
                });
                st.pending[dir] = true;
            }
        }
        if st.pending.down || st.pending.up {
            self.step = Some(st);
        } else {
            self.finish_step(now, st);
        }
    }

    /// Tells the law the rates in force and logs the step if due.
    fn finish_step(&mut self, now: Instant, st: StepState) {
        for dir in Direction::ALL {
            if let Some(rate) = self.limiter.current(dir) {
                self.feed(now, Sample::RateInForce { dir, rate });
            }
        }
        let lp = self.cfg.log;
        let due = lp.every_step
            || st.applied.down
            || st.applied.up
            || self
                .last_log
                .is_none_or(|t| now.saturating_duration_since(t) >= lp.heartbeat);
        if !due {
            return;
        }
        self.last_log = Some(now);
        let delay = self.delay.take();
        let d = &st.decision;
        let dir_step = |dir: Direction| DirStep {
            rate: d.rate[dir],
            applied: st.applied[dir],
            reason: d.reason[dir],
            throughput: self.throughput[dir],
            cake_backlog: self.cake_backlog[dir],
            delay_ms: delay[dir],
            passive_ms: self.passive_ms[dir],
            source: self.engine.delay_in_force(dir),
        };
        let e = Event::Decision {
            down: dir_step(Direction::Down),
            up: dir_step(Direction::Up),
        };
        self.push_event(now, e);
    }

    /// The result of applying `set` (from [`Agent::poll_rate`]) at `now`: `Err` with the
    /// actuator's own error (any type that displays; the agent keeps only its message, for the
    /// log) when it failed. Call once for every [`SetRate`] polled, right after applying it. A
    /// failure is logged ([`Event::ActuatorError`]); the rate in force then stays the previous
    /// one, and the law is told so.
    pub fn handle_rate_applied<E: std::fmt::Display>(
        &mut self,
        now: Instant,
        set: SetRate,
        result: Result<(), E>,
    ) {
        let now = self.clock(now);
        let result = result.map_err(|e| e.to_string());
        let ok = result.is_ok();
        if set.safe {
            if ok {
                self.limiter.applied(now, set.dir, set.rate);
            }
            self.push_event(
                now,
                Event::SafeRate {
                    dir: set.dir,
                    rate: set.rate,
                    error: result.err(),
                },
            );
            return;
        }
        match result {
            Ok(()) => {
                self.limiter.applied(now, set.dir, set.rate);
                self.out.stats.rate_changes += 1;
            }
            Err(error) => {
                self.out.stats.actuator_errors += 1;
                self.push_event(
                    now,
                    Event::ActuatorError {
                        dir: set.dir,
                        rate: set.rate,
                        error,
                    },
                );
            }
        }
        let Some(mut st) = self.step.take() else {
            return;
        };
        if st.pending[set.dir] {
            st.pending[set.dir] = false;
            st.applied[set.dir] = ok;
        }
        if st.pending.down || st.pending.up {
            self.step = Some(st);
        } else {
            self.finish_step(now, st);
        }
    }

    /// The shell is stopping (SIGTERM): [`Agent::poll_rate`] then yields each direction's safe
    /// rate (`safe: true`, past the limiter); report the results as for any rate, and each
    /// becomes an [`Event::SafeRate`].
    pub fn handle_shutdown(&mut self, now: Instant) {
        let _ = self.clock(now);
        for dir in Direction::ALL {
            self.out.rates.push_back(SetRate {
                dir,
                rate: self.cfg.controller.safe[dir],
                safe: true,
            });
        }
    }

    // ---- outputs ------------------------------------------------------------------------

    /// The next probe to send, if any. Call after every `handle_*` until `None`, and send each
    /// at once (a failed send: [`Agent::handle_send_failed`]). The probes' send times are the
    /// `now` of the [`Agent::handle_timeout`] that made them.
    #[must_use]
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.out.transmits.pop_front()
    }

    /// The next rate to apply, if any. Call after [`Agent::handle_timeout`] (and
    /// [`Agent::handle_shutdown`]) until `None`; apply each and report it with
    /// [`Agent::handle_rate_applied`].
    #[must_use]
    pub fn poll_rate(&mut self) -> Option<SetRate> {
        self.out.rates.pop_front()
    }

    /// The next event for the log, with the instant it happened. Call after the rates were
    /// reported, until `None`.
    #[must_use]
    pub fn poll_event(&mut self) -> Option<(Instant, Event)> {
        self.out.events.pop_front()
    }

    /// When [`Agent::handle_timeout`] must be called next (it may be called earlier): the next
    /// probe, loss check (up to 50 ms late, sharing probe wake-ups), control step, or counter
    /// reading. Never later than needed; may be in the past.
    #[must_use]
    pub fn poll_timeout(&self) -> Instant {
        let mut t = self.engine.next_wakeup();
        if self.probing() {
            t = t.min(self.probes.next_wakeup());
        }
        if !self.cfg.readings.aligned() {
            t = t.min(self.next_counter);
        }
        t
    }

    // ---- state --------------------------------------------------------------------------

    /// The configuration.
    pub fn config(&self) -> &AgentConfig {
        &self.cfg
    }
    /// The controller (its pool, decision, law).
    pub fn engine(&self) -> &Engine<L> {
        &self.engine
    }
    /// The latest decision.
    pub fn decision(&self) -> &Decision {
        self.engine.decision()
    }
    /// The rate in force in `dir` (the last one applied), if any was.
    pub fn rate_in_force(&self, dir: Direction) -> Option<Rate> {
        self.limiter.current(dir)
    }
    /// The latest measured throughput in `dir` (zero before the first).
    pub fn throughput(&self, dir: Direction) -> Rate {
        self.throughput[dir]
    }
    /// CAKE's backlog in `dir` at the latest statistics read.
    pub fn cake_backlog(&self, dir: Direction) -> Option<u64> {
        self.cake_backlog[dir]
    }
    /// Counters of steps, samples, changes and errors.
    pub fn stats(&self) -> AgentStats {
        self.out.stats
    }
    /// Replies discarded for `reason` since start.
    pub fn discarded(&self, reason: Discard) -> u64 {
        self.discards.total[reason as usize]
    }
    /// Every reflector: spec, current method, active or spare, pool id, counters.
    pub fn reflectors(&self) -> impl Iterator<Item = ReflectorStatus> + '_ {
        let active = self.probes.active;
        self.probes
            .refl
            .iter()
            .enumerate()
            .map(move |(i, r)| ReflectorStatus {
                spec: r.spec,
                method: r.method,
                active: i < active,
                id: r.id,
                stats: r.stats,
            })
    }
    /// The pool id of the reflector at `addr`, if configured.
    pub fn reflector_id(&self, addr: SocketAddr) -> Option<ReflectorId> {
        self.probes
            .refl
            .iter()
            .find(|r| r.spec.addr == addr)
            .map(|r| r.id)
    }
}

/// A probe to reflector `i` sent at `sent` is lost (timeout or failed send): an offence in the
/// pool when `blame` (the path was clean around it, `Prober::blames`), and after three in a row without
/// any timestamp answer, the fall-back to echo.
fn on_lost<L: Law>(
    pr: &mut Prober,
    engine: &mut Engine<L>,
    out: &mut Outputs,
    now: Instant,
    i: usize,
    sent: Instant,
    blame: bool,
) {
    let Some(r) = pr.refl.get_mut(i) else {
        return;
    };
    r.stats.lost += 1;
    r.consecutive_lost += 1;
    if blame {
        out.stats.samples_fed += 1;
        engine.on_sample(
            now,
            &Sample::ProbeLost {
                reflector: r.id,
                sent,
            },
        );
    }
    if r.method == Method::Timestamp && !r.ts_answered && r.consecutive_lost >= 3 {
        r.method = Method::Echo;
        let addr = r.spec.addr;
        let old = pr.renew_id(i);
        engine.pool_mut().remove(old);
        engine.pool_mut().track(now, pr.refl[i].id);
        out.events
            .push_back((now, Event::FallbackToEcho { reflector: addr }));
    }
}

#[cfg(test)]
mod tests;
