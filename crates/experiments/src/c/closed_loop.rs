//! The closed loop of section C: a variable-capacity radio with a deep droptail buffer (the
//! radio's queue, which nobody can change), CAKE directly in front of it in each direction, bulk
//! TCP both ways, and a controller (or a static setting, or the oracle) driving CAKE's rate.
//!
//! ```text
//!  server0..2 ─┐ 1 Gbit/s      1 Gbit/s, 4 ms        radio, 1 ms               1 Gbit/s
//!              ├─ X ═══════════════════ W ══ down: [CAKE] -> buffer -> C ═════════ client
//!              ┘                          ══ up:   C -> [CAKE] -> buffer -> W
//! ```
//!
//! CAKE is the qdisc of the radio link itself in each direction: the simulator dequeues it
//! whenever the radio's buffer has room, so CAKE's shaper decides how fast the radio queue
//! fills, exactly "CAKE directly behind the bottleneck". For CAKE `autorate-ingress` (which
//! estimates the rate from arrivals and only makes sense after the bottleneck) the radio links
//! have no qdisc and CAKE sits on the links leaving the radio (C -> client, W -> X).
//!
//! **The controller is the daemon's agent.** A contender with a law runs it inside a
//! [`controller::agent::Agent`], the same type `purple control` runs, configured as the daemon
//! is by default (probe timeout 1 s, 100 ms etiquette, CAKE's statistics and the counters read
//! right before every control step, actuator limits 0/0) with 30 probes/s over the three
//! servers. This loop is its shell: it runs the simulator to the agent's next timeout (or the
//! next [`STEP`] of the capacity schedule), hands it the reply frames that reached the client
//! with their true arrival times (bytes in: ICMP timestamp replies stamped by each server's own
//! clock, offset by [`CLOCK_OFFSET_MS`], 1 ms resolution, with the reflector faults applied by
//! the host), the radio's delivered bytes as the interface counter and CAKE's statistics when
//! the agent asks, the radio's queue metrics to PURPLE-regular (C4), injects the agent's probe
//! bytes as frames from the client, and applies the rates it asks for to CAKE. Nothing else
//! reaches the controller.
//!
//! **Scenarios with the shaper at the router** ([`Scenario::shaper_at_router`]): the download
//! CAKE sits on the link from C to the client (ingress shaping after the radio, as on a home
//! router), the upload CAKE stays in front of the uplink radio (the router's egress). There the
//! contenders with the passive delay signal ([`Contender::PurplePassive`],
//! [`Contender::PurplePassiveOnly`]) run a [`controller::passive::PassiveDelay`] in the shell,
//! fed by two simulator taps at C, where the router's WAN device is: frames as they leave the
//! upload CAKE for the radio's buffer, and frames as they arrive from the downlink radio (before
//! the download CAKE), with their true times; its reading goes to the agent before every step.
//! [`Scenario::probe_path`] decides the probes' fate: shared with the data, queued apart from
//! it by the radio and answered with echo only, or lost.
//!
//! Loaded latency is measured for every contender alike by separate UDP probes to the three
//! servers (the experimenter's instrument, [`super::probe::Prober`]), every [`PROBE_INTERVAL`].

use super::probe::{
    agent_datagram, agent_frame, AgentHost, Prober, Reflector, ReflectorHost, RemoteClock,
    REFLECTOR_PORT,
};
use super::scenario::{ProbePath, Scenario, SlotCapacity};
use cake::{AnyQdisc, CakeConfig};
use controller::agent::{
    Agent, AgentConfig, CakeCounters, Method, ProbeParams, RadioReading, ReflectorSpec,
};
use controller::passive::{PassiveDelay, PassiveParams, Side};
use controller::wire::WallAnchor;
use controller::{
    mbit, Aimd, CakeAutorate, Config, Controller, DelaySource, Direction, Law, PerDir, Purple,
    PurpleParams, QueueMetrics, SqmAutorate,
};
use qdisc::{Duration, Instant, Qdisc, Rng};
use serde::Serialize;
use sim::{Capacity, IcmpPolicy, LinkConfig, Sim, TapAt, TcpReceiverApp, TcpSenderApp};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use tcpmodel::{CcKind, Pacing, SenderConfig};

/// The loop's control and measurement step.
pub const STEP: Duration = Duration::from_millis(50);
/// Probe interval per reflector (three reflectors: 30 probes/s in all).
pub const PROBE_INTERVAL: Duration = Duration::from_millis(100);
/// A probe with no answer after this long is reported lost.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(1);
/// Number of reflectors (one per server).
pub const REFLECTORS: usize = 3;
/// Clock offsets of the reflectors relative to the client, ms (the controller must cancel them).
pub const CLOCK_OFFSET_MS: [i64; REFLECTORS] = [5_000, -3_217, 86_000];
/// The agent's ICMP identifier (also the UDP source port of its probes).
pub const IDENT: u16 = 0x5055;
/// True time's wall clock at t = 0 (the agent's anchor): 2023-11-14 10:00 UTC.
pub const WALL: WallAnchor = WallAnchor {
    at: Instant::ZERO,
    wall_us: 1_699_956_000_000_000,
};
const GBIT: u64 = 125_000_000;
const WAN_DELAY: Duration = Duration::from_millis(4);
const EDGE_DELAY: Duration = Duration::from_micros(100);
/// Round-trip propagation of the path without the radio hop (the WAN link and two edge links
/// each way); a scenario's radio delays ([`Scenario::delay_down`], [`Scenario::delay_up`]) add
/// to it.
pub const PATH_RTT: Duration =
    Duration::from_nanos(2 * WAN_DELAY.as_nanos() + 4 * EDGE_DELAY.as_nanos());

/// Who sets CAKE's rate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Contender {
    /// C1: FQ-CoDel at the radio's egress, no shaping.
    FqCodel,
    /// C2/C3: CAKE at a static rate, Mbit/s `(down, up)`.
    CakeStatic(f64, f64),
    /// C4: PURPLE with the radio's queue metrics (BLUE-like, `controller::QueueMetrics`).
    PurpleRadio,
    /// C5: PURPLE-AIMD, delay only (`controller::Aimd`).
    PurpleAimd,
    /// cake-autorate's algorithm (`controller::CakeAutorate`).
    CakeAutorate,
    /// sqm-autorate's algorithm (`controller::SqmAutorate`).
    SqmAutorate,
    /// CAKE's own `autorate-ingress` after the radio.
    AutorateIngress,
    /// 95% of the true capacity of the current control interval, set at the start of every
    /// [`STEP`] (the upper reference the issue defines: no lookahead beyond the interval).
    Oracle,
    /// 95% of the true mean capacity of the next 200 ms, set every [`STEP`]: an oracle that also
    /// sees the future (only listed for the recorded traces, where it differs from
    /// [`Contender::Oracle`]; on the synthetic series both read the current slot's rate).
    OracleLookahead,
    /// Our design (`controller::Purple`), without radio metrics.
    Purple,
    /// 95% of the true capacity of the *previous* [`STEP`]: a perfect capacity measurement that,
    /// like every real controller's, arrives one interval late. Not in the tables; it bounds
    /// what any measurement-driven law can reach (the p99 a drop's first interval costs).
    OracleLagged,
    /// `purple` with the probes and the passive delay signal (`delay_source = "both"`, the
    /// daemon's default), on scenarios with the shaper at the router.
    PurplePassive,
    /// `purple` with the passive delay signal alone (`delay_source = "passive"`, no probe).
    PurplePassiveOnly,
}

impl Contender {
    /// Display name (as in the tables).
    pub fn name(&self) -> String {
        match self {
            Contender::FqCodel => "FQ-CoDel (unshaped)".into(),
            Contender::CakeStatic(d, u) => format!("CAKE static {d}/{u}M"),
            Contender::PurpleRadio => "PURPLE (radio metrics)".into(),
            Contender::PurpleAimd => "PURPLE-AIMD".into(),
            Contender::CakeAutorate => "cake-autorate".into(),
            Contender::SqmAutorate => "sqm-autorate".into(),
            Contender::AutorateIngress => "CAKE autorate-ingress".into(),
            Contender::Oracle => "oracle (95% of capacity)".into(),
            Contender::OracleLookahead => "oracle, 200 ms lookahead".into(),
            Contender::Purple => "purple (ours)".into(),
            Contender::OracleLagged => "oracle, one interval late".into(),
            Contender::PurplePassive => "purple, probes + passive".into(),
            Contender::PurplePassiveOnly => "purple, passive only".into(),
        }
    }

    /// Every contender for scenario `s`, in table order (C1..C5 first; the lookahead oracle last,
    /// on traces only).
    pub fn all(s: &Scenario) -> Vec<Contender> {
        let mut v = vec![
            Contender::FqCodel,
            Contender::CakeStatic(s.statics[0].0, s.statics[0].1),
            Contender::CakeStatic(s.statics[1].0, s.statics[1].1),
            Contender::PurpleRadio,
            Contender::PurpleAimd,
            Contender::CakeAutorate,
            Contender::SqmAutorate,
            Contender::AutorateIngress,
            Contender::Oracle,
            Contender::Purple,
        ];
        if !s.down.is_series() {
            v.push(Contender::OracleLookahead);
        }
        if s.shaper_at_router {
            v.extend([Contender::PurplePassive, Contender::PurplePassiveOnly]);
        }
        v
    }

    /// The delay source this contender's agent runs with: passive ones as named, every other
    /// law on the probes alone (as before the passive signal existed).
    pub fn delay_source(&self) -> DelaySource {
        match self {
            Contender::PurplePassive => DelaySource::Both,
            Contender::PurplePassiveOnly => DelaySource::Passive,
            _ => DelaySource::Probes,
        }
    }

    /// Whether this contender is told the true capacity (an oracle).
    pub fn is_oracle(&self) -> bool {
        matches!(
            self,
            Contender::Oracle | Contender::OracleLookahead | Contender::OracleLagged
        )
    }

    /// The law this contender runs in the agent, if it is a controller.
    fn law(&self, seed: u64, pp: PurpleParams) -> Option<Box<dyn Law>> {
        Some(match self {
            Contender::PurpleRadio => Box::new(QueueMetrics::default()),
            Contender::PurpleAimd => Box::new(Aimd::default()),
            Contender::CakeAutorate => Box::new(CakeAutorate::default()),
            Contender::SqmAutorate => Box::new(SqmAutorate::new(controller::SqmAutorateParams {
                seed,
                ..Default::default()
            })),
            Contender::Purple | Contender::PurplePassive | Contender::PurplePassiveOnly => {
                Box::new(Purple::new(pp))
            }
            _ => return None,
        })
    }
}

/// A reflector misbehaving, from `from` seconds of simulated time on (the host does it: the
/// agent sees only the bytes it answers).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Fault {
    /// Reflector `0` stops answering.
    Dead(usize, f64),
    /// Reflector `0` reports a one-way delay (both directions) growing by `2` ms per second.
    Lying(usize, f64, f64),
    /// Reflector `0`'s clock steps by `2` ms at `1` seconds.
    ClockStep(usize, f64, f64),
    /// Reflector `0` answers ICMP echo but no timestamp request.
    EchoOnly(usize),
}

/// One closed-loop run.
#[derive(Clone, Debug)]
pub struct LoopSpec {
    /// The link.
    pub scenario: Scenario,
    /// Who sets the rate.
    pub contender: Contender,
    /// Seed of the simulator and the estimate noise.
    pub seed: u64,
    /// Simulated seconds (defaults to the scenario's).
    pub secs: f64,
    /// Latency and throughput are measured from here (seconds) to the end.
    pub warmup: f64,
    /// Reflector faults.
    pub faults: Vec<Fault>,
    /// Relative noise of the radio's capacity estimate (the slides: often wrong); also, with
    /// probability `noise`, an estimate 40% low. Default 0.15.
    pub capacity_noise: f64,
    /// Overrides the controller configuration (rates, safety); `None`: from the scenario.
    pub config: Option<Config>,
    /// Parameters of [`Contender::Purple`]; `None`: [`LoopSpec::purple_params`].
    pub purple: Option<PurpleParams>,
}

impl LoopSpec {
    /// `contender` on `scenario` for its full length, 5 s warm-up, no faults.
    pub fn new(scenario: Scenario, contender: Contender, seed: u64) -> Self {
        LoopSpec {
            secs: scenario.secs,
            scenario,
            contender,
            seed,
            warmup: 5.0,
            faults: Vec::new(),
            capacity_noise: 0.15,
            config: None,
            purple: None,
        }
    }

    /// The parameters `purple` runs with in section C: the law's defaults except a 2 ms delay
    /// target (5 ms by default): the operating point that keeps its mean latency at or below
    /// PURPLE-AIMD's on the slides' radio while delivering about 95% of the oracle's throughput.
    pub fn purple_params(&self) -> PurpleParams {
        self.purple.unwrap_or(PurpleParams {
            target: Duration::from_millis(2),
            ..PurpleParams::default()
        })
    }

    /// The controller configuration used: the scenario's range, base at 60% of max, safe = min.
    pub fn config(&self) -> Config {
        if let Some(c) = &self.config {
            return c.clone();
        }
        let s = &self.scenario;
        let mut c = Config::with_range(
            PerDir::new(s.range_down.0, s.range_up.0),
            PerDir::new(s.range_down.1, s.range_up.1),
        );
        c.base = PerDir::new(s.range_down.1 * 3 / 5, s.range_up.1 * 3 / 5);
        c
    }
}

/// One step of the time series.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Point {
    /// Seconds.
    pub t: f64,
    /// True capacity, Mbit/s.
    pub cap: PerDir<f64>,
    /// CAKE's rate, Mbit/s (NaN when unshaped).
    pub rate: PerDir<f64>,
    /// Delivered by the radio during the step, Mbit/s.
    pub thr: PerDir<f64>,
    /// Highest probe RTT answered during the step, ms (NaN if none).
    pub rtt_ms: f64,
}

/// Loaded-latency statistics, ms (probe RTT minus the idle base RTT).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct LatencyStats {
    /// Samples.
    pub n: usize,
    /// Mean.
    pub mean: f64,
    /// Median.
    pub median: f64,
    /// Minimum.
    pub min: f64,
    /// Maximum.
    pub max: f64,
    /// Standard deviation.
    pub std: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
}

impl LatencyStats {
    /// Statistics of `v` (ms); all zero for an empty slice.
    pub fn of(v: &[f64]) -> Self {
        if v.is_empty() {
            return LatencyStats::default();
        }
        let mut s = v.to_vec();
        s.sort_by(f64::total_cmp);
        let n = s.len();
        let mean = s.iter().sum::<f64>() / n as f64;
        let var = s.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64;
        let q = |p: f64| s[(((n - 1) as f64) * p).round() as usize];
        LatencyStats {
            n,
            mean,
            median: q(0.5),
            min: s[0],
            max: s[n - 1],
            std: var.sqrt(),
            p95: q(0.95),
            p99: q(0.99),
        }
    }
}

/// What a run measured.
#[derive(Clone, Debug, Serialize)]
pub struct LoopResult {
    /// The contender's name.
    pub name: String,
    /// Loaded latency after the warm-up.
    pub latency: LatencyStats,
    /// Mean delivered rate per direction after the warm-up, Mbit/s.
    pub throughput: PerDir<f64>,
    /// Mean true capacity per direction after the warm-up, Mbit/s.
    pub capacity: PerDir<f64>,
    /// Every loaded-latency sample after the warm-up, ms (for the CDF).
    pub samples: Vec<f64>,
    /// One-way queueing delay towards the client after the warm-up, ms: each answered probe's
    /// true reflector-to-client delay (the simulator knows the reflect and receive times)
    /// minus the idle one ([`LoopResult::base_owd_ms`]), floored at 0; one sample per probe
    /// counted in [`LoopResult::samples`].
    pub owd_down_samples: Vec<f64>,
    /// One-way queueing delay from the client (client-to-reflector), ms, as
    /// [`LoopResult::owd_down_samples`].
    pub owd_up_samples: Vec<f64>,
    /// Statistics of [`LoopResult::owd_down_samples`].
    pub owd_down: LatencyStats,
    /// Statistics of [`LoopResult::owd_up_samples`].
    pub owd_up: LatencyStats,
    /// Idle one-way delay of a probe per direction, ms (they add up to `base_rtt_ms`).
    pub base_owd_ms: PerDir<f64>,
    /// The time series, one point per [`STEP`].
    pub series: Vec<Point>,
    /// Idle round-trip time of a probe, ms.
    pub base_rtt_ms: f64,
}

impl LoopResult {
    /// Download throughput as a share of the mean download capacity.
    pub fn share(&self) -> f64 {
        if self.capacity.down > 0.0 {
            self.throughput.down / self.capacity.down
        } else {
            0.0
        }
    }
}

/// A measurement prober and how many of its results were read.
struct ProbeState {
    app: sim::AppId,
    seen: usize,
}

fn addr(net: u8, i: usize) -> IpAddr {
    Ipv4Addr::new(10, 0, net, (i + 1) as u8).into()
}

/// The agent's configuration in the loop: the daemon's defaults (probe timeout 1 s, 100 ms
/// etiquette, CAKE's statistics and counters read right before each step, actuator limits 0/0,
/// reply validation on) with the controller configuration `cfg` and `servers` as ICMP timestamp
/// reflectors, all active, probed [`PROBE_INTERVAL`] apart each (30 probes/s for three).
pub fn agent_config(cfg: Config, servers: &[IpAddr]) -> AgentConfig {
    let refl = servers
        .iter()
        .map(|&a| ReflectorSpec {
            method: Method::Timestamp,
            addr: SocketAddr::new(a, 0),
        })
        .collect::<Vec<_>>();
    let mut c = AgentConfig::new(cfg, refl, WALL);
    c.ident = IDENT;
    c.probe = ProbeParams {
        rate_hz: servers.len() as f64 * 1e9 / PROBE_INTERVAL.as_nanos() as f64,
        active: servers.len(),
        timeout: PROBE_TIMEOUT,
        ..ProbeParams::default()
    };
    c
}

/// Reflector `i`'s clock and faults per `faults`.
fn remote_clock(i: usize, faults: &[Fault]) -> RemoteClock {
    let at = |s: f64| Instant::from_nanos((s.max(0.0) * 1e9) as u64);
    let mut c = RemoteClock {
        wall: WALL,
        offset_ns: CLOCK_OFFSET_MS[i % REFLECTORS] * 1_000_000,
        step: None,
        lie: None,
        dead_from: None,
        echo_only: false,
    };
    for f in faults {
        match *f {
            Fault::Dead(k, from) if k == i => {
                c.dead_from = Some(c.dead_from.map_or(at(from), |d| d.min(at(from))));
            }
            Fault::Lying(k, from, per_s) if k == i => c.lie = Some((at(from), per_s)),
            Fault::ClockStep(k, from, ms) if k == i => {
                c.step = Some((at(from), (ms * 1e6) as i64));
            }
            Fault::EchoOnly(k) if k == i => c.echo_only = true,
            _ => {}
        }
    }
    c
}

/// The radio's queue metrics as a modem would report them (PURPLE-regular only): backlog,
/// drops, mean sojourn since the previous report, and a capacity estimate that is often wrong.
struct RadioFeed {
    rng: Rng,
    /// Relative noise of the capacity estimate (see [`LoopSpec::capacity_noise`]).
    noise: f64,
    /// The first time-series bin not yet reported, per direction.
    bin: PerDir<usize>,
}

/// The agent and the simulator's parts it is wired to.
struct Shell {
    agent: Agent<Box<dyn Law>>,
    /// The client's [`AgentHost`].
    host: sim::AppId,
    client: IpAddr,
    /// The links whose CAKE the agent drives (and whose sent bytes are its counter).
    links: PerDir<sim::LinkId>,
    /// The radio links (their queue metrics).
    radio_links: PerDir<sim::LinkId>,
    radio: Option<RadioFeed>,
    /// The passive delay signal: the estimator the taps feed (tap 0: leaving the router for
    /// the WAN; tap 1: arriving from it).
    passive: Option<PassiveDelay>,
}

impl Shell {
    /// Hands the agent every frame that reached the client, at its arrival time.
    fn arrivals(&mut self, sim: &mut Sim) {
        let Some(h) = sim.app_as_mut::<AgentHost>(self.host) else {
            return;
        };
        let a = &mut self.agent;
        h.drain(|t, frame| {
            if let Some((from, kind, bytes)) = agent_datagram(frame) {
                a.handle_datagram(t, from, kind, bytes);
            }
        });
        if let Some(p) = self.passive.as_mut() {
            sim.drain_taps(|r| {
                let side = if r.tap == 0 {
                    Side::ToWan
                } else {
                    Side::FromWan
                };
                p.on_frame(r.at, side, r.frame());
            });
        }
    }

    /// Right before a control step: the radio's queue metrics, for a law that reads them.
    fn radio(&mut self, sim: &Sim, w: Instant, caps: PerDir<u64>) {
        let Some(f) = self.radio.as_mut() else {
            return;
        };
        for d in Direction::ALL {
            let l = self.radio_links[d];
            let (drops, soj) = match sim.link(l) {
                Some(m) => {
                    let from = f.bin[d].min(m.bins.len());
                    let (mut ss, mut np) = (0u64, 0u64);
                    for b in &m.bins[from..] {
                        ss += b.sojourn_sum_ns;
                        np += b.tx_packets;
                    }
                    f.bin[d] = m.bins.len().saturating_sub(1);
                    (m.buffer_drops, ss.checked_div(np).unwrap_or(0))
                }
                None => (0, 0),
            };
            let (pk, by) = sim.buffer_backlog(l).unwrap_or((0, 0));
            let mut est = caps[d] as f64 * (1.0 + f.noise * (f.rng.next_f64() * 2.0 - 1.0));
            if f.rng.next_f64() < f.noise {
                est *= 0.6;
            }
            self.agent.handle_radio(
                w,
                RadioReading {
                    dir: d,
                    backlog_bytes: by,
                    backlog_packets: pk as u32,
                    drops,
                    sojourn: Duration::from_nanos(soj),
                    capacity_bps: Some(est as u64),
                },
            );
        }
    }

    /// One wake-up of the agent at `w` (the capacity now is `caps`): the radio's metrics and the
    /// readings it asks for before a step (the radio's delivered bytes as the interface
    /// counter, CAKE's statistics), its timeout, its probes injected as frames from the client,
    /// its rates applied to CAKE (`rate_now` in Mbit/s).
    fn work(&mut self, sim: &mut Sim, w: Instant, caps: PerDir<u64>, rate_now: &mut PerDir<f64>) {
        if w >= self.agent.engine().next_wakeup() {
            self.radio(sim, w, caps);
        }
        let a = &mut self.agent;
        let r = a.reads_due(w);
        for d in Direction::ALL {
            if r.counters[d] {
                a.handle_counter(w, d, sim.link(self.links[d]).map(|m| m.tx_bytes));
            }
        }
        if r.cake_stats {
            let cake = |l: sim::LinkId| {
                sim.qdisc(l).map(|q| {
                    let s = q.stats();
                    CakeCounters {
                        backlog_bytes: s.backlog.bytes,
                        drops: s.dropped_total().packets,
                        ecn_marks: s.ecn_marks,
                        sent_bytes: None,
                    }
                })
            };
            let st = PerDir::new(cake(self.links.down), cake(self.links.up));
            a.handle_cake_stats(w, Ok(st));
        }
        if r.passive {
            if let Some(p) = self.passive.as_mut() {
                a.handle_passive(w, &p.reading(w));
            }
        }
        a.handle_timeout(w);
        while let Some(t) = a.poll_transmit() {
            sim.inject(self.host, agent_frame(self.client, IDENT, &t));
        }
        while let Some(s) = a.poll_rate() {
            let res = match sim.qdisc_mut(self.links[s.dir]) {
                Some(q) => q
                    .set_rate(Some(s.bps))
                    .map_err(|_| "the qdisc has no shaper".to_string()),
                None => Err("no qdisc on the radio link".to_string()),
            };
            if res.is_ok() {
                rate_now[s.dir] = s.bps as f64 * 8e-6;
            }
            a.handle_rate_applied(w, s, res);
        }
        while a.poll_event().is_some() {}
    }
}

/// Runs one closed loop. Deterministic in `spec`.
pub fn run(spec: &LoopSpec) -> LoopResult {
    let sc = &spec.scenario;
    let cfg = spec.config();
    let seed = spec.seed;
    let mut sim = Sim::new(seed);
    sim.set_bin_width(STEP);
    let x = sim.add_node(&[]);
    let w = sim.add_node(&[]);
    let c = sim.add_node(&[]);
    let client_addr = addr(1, 0);
    let client = sim.add_node(&[client_addr]);
    let servers: Vec<(usize, IpAddr)> = (0..REFLECTORS)
        .map(|i| {
            let a = addr(2, i);
            let n = sim.add_node(&[a]);
            sim.add_link(n, x, LinkConfig::fixed(GBIT, EDGE_DELAY));
            sim.add_link(x, n, LinkConfig::fixed(GBIT, EDGE_DELAY));
            (n, a)
        })
        .collect();
    let ingress = spec.contender == Contender::AutorateIngress;
    let cake_at = |rate: u64, s: u64| AnyQdisc::cake(CakeConfig::with_rate(rate.max(1)), s);
    let initial = |d: Direction| -> Option<AnyQdisc> {
        match spec.contender {
            Contender::FqCodel => Some(AnyQdisc::fq_codel_default(seed)),
            Contender::AutorateIngress => None,
            Contender::CakeStatic(dn, up) => Some(cake_at(
                mbit(if d == Direction::Down { dn } else { up }),
                seed,
            )),
            Contender::Oracle | Contender::OracleLookahead | Contender::OracleLagged => {
                let cap = if d == Direction::Down {
                    &sc.down
                } else {
                    &sc.up
                };
                Some(cake_at(cap.rate_at(Instant::ZERO) * 95 / 100, seed))
            }
            _ => Some(cake_at(cfg.base[d], seed)),
        }
    };
    let ingress_cake = |max: u64| {
        let bw = format!("{}bit", max * 8);
        let cfg = CakeConfig::from_tc_args(&["bandwidth", &bw, "autorate-ingress", "ingress"])
            .unwrap_or_else(|_| CakeConfig::with_rate(max));
        AnyQdisc::cake(cfg, seed)
    };
    let wan = |sim: &mut Sim, a, b, q: Option<AnyQdisc>| {
        let mut l = LinkConfig::fixed(GBIT, WAN_DELAY);
        if let Some(q) = q {
            l = l.buffer(Some(2), None).qdisc(q);
        }
        sim.add_link(a, b, l)
    };
    wan(&mut sim, x, w, None);
    let up_after = wan(&mut sim, w, x, ingress.then(|| ingress_cake(cfg.max.up)));
    let radio = |sim: &mut Sim, a, b, d: Direction| {
        let cap = if d == Direction::Down {
            &sc.down
        } else {
            &sc.up
        };
        let delay = if d == Direction::Down {
            sc.delay_down
        } else {
            sc.delay_up
        };
        let mut l =
            LinkConfig::with_rate(cap.link_rate(), delay).buffer(Some(sc.radio_buffer), None);
        l = l.icmp(match sc.probe_path {
            ProbePath::Shared => IcmpPolicy::Shared,
            ProbePath::IcmpApart => IcmpPolicy::Apart,
            ProbePath::Dropped => IcmpPolicy::Blocked,
        });
        let at_router = sc.shaper_at_router && d == Direction::Down;
        if let Some(q) = initial(d).filter(|_| !at_router) {
            l = l.qdisc(q);
        }
        sim.add_link(a, b, l)
    };
    let down = radio(&mut sim, w, c, Direction::Down);
    let up = radio(&mut sim, c, w, Direction::Up);
    let mut edge = LinkConfig::fixed(GBIT, EDGE_DELAY);
    if ingress {
        edge = edge.buffer(Some(2), None).qdisc(ingress_cake(cfg.max.down));
    } else if sc.shaper_at_router {
        if let Some(q) = initial(Direction::Down) {
            edge = edge.buffer(Some(2), None).qdisc(q);
        }
    }
    let down_after = sim.add_link(c, client, edge);
    sim.add_link(client, c, LinkConfig::fixed(GBIT, EDGE_DELAY));
    sim.compute_routes();
    // The radio links (capacity, delivery, queue metrics) and the shaped ones (CAKE).
    let links = PerDir::new(down, up);
    let shaped = if sc.shaper_at_router {
        PerDir::new(down_after, up)
    } else {
        links
    };

    // Bulk TCP: 4 downloads (servers -> client), 2 uploads.
    let tcp = |sim: &mut Sim, from: (usize, IpAddr), to: (usize, IpAddr), port: u16| {
        let mut s = SenderConfig::new(from.1, to.1, port, port);
        s.cc = CcKind::Cubic;
        s.ecn = true;
        s.pacing = Some(Pacing::default());
        let start = Instant::from_millis(200 + u64::from(port % 7) * 50);
        sim.add_app(to.0, port, start, Box::new(TcpReceiverApp::for_sender(&s)));
        sim.add_app(from.0, port, start, Box::new(TcpSenderApp::new(s)));
    };
    for k in 0..4u16 {
        tcp(
            &mut sim,
            servers[usize::from(k) % REFLECTORS],
            (client, client_addr),
            5000 + k,
        );
    }
    for k in 0..2u16 {
        tcp(
            &mut sim,
            (client, client_addr),
            servers[usize::from(k) % REFLECTORS],
            6000 + k,
        );
    }
    // The measurement probes (every contender alike).
    let mut probes: Vec<ProbeState> = servers
        .iter()
        .enumerate()
        .map(|(i, &(n, a))| {
            sim.add_app(
                n,
                REFLECTOR_PORT,
                Instant::ZERO,
                Box::new(Reflector::new(a)),
            );
            let port = 100 + i as u16;
            let start = Instant::from_millis(i as u64 * PROBE_INTERVAL.as_nanos() / 3_000_000);
            let app = sim.add_app(
                client,
                port,
                start,
                Box::new(Prober::new(client_addr, a, port, PROBE_INTERVAL)),
            );
            ProbeState { app, seen: 0 }
        })
        .collect();

    // Idle RTT of a 58-byte probe: propagation plus serialisation on every hop, both ways
    // (per direction: the radio hop, the WAN link, two edge links, three of them at 1 Gbit/s).
    let ser = |bps: f64| 58.0 / bps * 1e3;
    let one_way = |radio: Duration, cap: &Capacity| {
        radio.as_millis_f64()
            + WAN_DELAY.as_millis_f64()
            + 2.0 * EDGE_DELAY.as_millis_f64()
            + 3.0 * ser(GBIT as f64)
            + ser(cap.mean(Instant::ZERO, Instant::from_secs(1)).max(1.0))
    };
    let base_owd_ms = PerDir::new(
        one_way(sc.delay_down, &sc.down),
        one_way(sc.delay_up, &sc.up),
    );
    let base_rtt_ms = base_owd_ms.down + base_owd_ms.up;

    // The controller: the daemon's agent, with reflector hosts answering its probes.
    let server_addrs: Vec<IpAddr> = servers.iter().map(|s| s.1).collect();
    let mut faults = spec.faults.clone();
    for k in 0..REFLECTORS {
        match sc.probe_path {
            ProbePath::Shared => {}
            ProbePath::IcmpApart => faults.push(Fault::EchoOnly(k)),
            // The radio drops ICMP; UDP reflectors would be silent too.
            ProbePath::Dropped => faults.push(Fault::Dead(k, 0.0)),
        }
    }
    let agent_cfg = Config {
        delay_source: spec.contender.delay_source(),
        ..cfg.clone()
    };
    let mut shell: Option<Shell> = spec
        .contender
        .law(seed, spec.purple_params())
        .and_then(|law| Agent::new(agent_config(agent_cfg, &server_addrs), law, Instant::ZERO).ok())
        .map(|agent| {
            for (i, &(n, a)) in servers.iter().enumerate() {
                let host = ReflectorHost::new(a, remote_clock(i, &faults));
                sim.add_app(n, IDENT, Instant::ZERO, Box::new(host));
            }
            let host = sim.add_app(client, IDENT, Instant::ZERO, Box::<AgentHost>::default());
            // Only PURPLE-regular (C4) reads the radio's queue metrics; everyone else does
            // without.
            let radio = (spec.contender == Contender::PurpleRadio).then(|| RadioFeed {
                rng: Rng::new(seed ^ 0x5eed_cafe),
                noise: spec.capacity_noise.clamp(0.0, 1.0),
                bin: PerDir::new(0, 0),
            });
            // The passive signal: taps where the router's WAN device is (at C), when the
            // download shaper is at the router (elsewhere they would time its queue too).
            let passive = (spec.contender.delay_source().passive() && sc.shaper_at_router)
                .then(|| {
                    let _ = sim.add_tap(links.up, TapAt::Enter);
                    let _ = sim.add_tap(links.down, TapAt::Arrive);
                    PassiveDelay::new(PassiveParams {
                        seed,
                        ..PassiveParams::default()
                    })
                    .ok()
                })
                .flatten();
            Shell {
                agent,
                host,
                client: client_addr,
                links: shaped,
                radio_links: links,
                radio,
                passive,
            }
        });
    let end = Instant::from_nanos((spec.secs.max(0.1) * 1e9) as u64);
    let warm = Instant::from_nanos((spec.warmup.max(0.0) * 1e9) as u64);
    let mut t = Instant::ZERO;
    let mut last_tx = PerDir::new(0u64, 0u64);
    let mut cur_cap = PerDir::new(0u64, 0u64);
    let mut rate_now = PerDir::new(f64::NAN, f64::NAN);
    for d in Direction::ALL {
        rate_now[d] = match spec.contender {
            Contender::FqCodel => f64::NAN,
            Contender::CakeStatic(dn, u) => {
                if d == Direction::Down {
                    dn
                } else {
                    u
                }
            }
            _ => cfg.base[d] as f64 * 8e-6,
        };
    }
    let mut series = Vec::new();
    let mut samples = Vec::new();
    let mut owd_samples = PerDir::new(Vec::new(), Vec::new());
    let mut delivered = PerDir::new(0u64, 0u64);
    while t < end {
        let caps = PerDir::new(sc.down.rate_at(t), sc.up.rate_at(t));
        for d in Direction::ALL {
            let capd = if d == Direction::Down {
                &sc.down
            } else {
                &sc.up
            };
            if capd.is_series() && caps[d] != cur_cap[d] {
                sim.set_link_rate(links[d], Capacity::Rate(caps[d].max(1)));
                cur_cap[d] = caps[d];
            }
            if spec.contender.is_oracle() {
                let r = match spec.contender {
                    Contender::OracleLookahead => capd.rate_over(t, Duration::from_millis(200)),
                    Contender::OracleLagged => capd.rate_over(
                        Instant::from_nanos(t.as_nanos().saturating_sub(STEP.as_nanos())),
                        STEP,
                    ),
                    _ => caps[d],
                } * 95
                    / 100;
                if let Some(q) = sim.qdisc_mut(shaped[d]) {
                    let _ = q.set_rate(Some(r.max(mbit(0.1))));
                }
                rate_now[d] = r as f64 * 8e-6;
            }
        }
        // The agent's wake-ups (probes, loss checks, steps) in the interval; the step at its
        // end follows the measurements below.
        let t_next = t + STEP;
        let mut floor = Instant::ZERO;
        loop {
            let wake = shell.as_ref().map_or(t_next, |s| {
                s.agent.poll_timeout().max(sim.now()).max(floor).min(t_next)
            });
            sim.run_until(wake);
            let Some(s) = shell.as_mut() else {
                break;
            };
            s.arrivals(&mut sim);
            if wake >= t_next {
                break;
            }
            s.work(&mut sim, wake, caps, &mut rate_now);
            floor = wake + Duration::from_nanos(1);
        }
        t = t_next;
        let now_s = t.as_secs_f64();
        // Measurement probes.
        let mut max_rtt = f64::NAN;
        for p in probes.iter_mut() {
            let Some(pr) = sim.app_as::<Prober>(p.app) else {
                continue;
            };
            for r in &pr.results[p.seen..] {
                let rtt = r.received.saturating_duration_since(r.sent).as_millis_f64();
                if r.received >= warm {
                    samples.push((rtt - base_rtt_ms).max(0.0));
                    let ms =
                        |a: Instant, b: Instant| b.saturating_duration_since(a).as_millis_f64();
                    owd_samples
                        .up
                        .push((ms(r.sent, r.reflected) - base_owd_ms.up).max(0.0));
                    owd_samples
                        .down
                        .push((ms(r.reflected, r.received) - base_owd_ms.down).max(0.0));
                }
                max_rtt = if max_rtt.is_nan() {
                    rtt
                } else {
                    max_rtt.max(rtt)
                };
            }
            p.seen = pr.results.len();
        }
        // Delivered bytes in the step, for the series and the result.
        let mut thr = PerDir::default();
        for d in Direction::ALL {
            let tx = sim.link(links[d]).map_or(0, |m| m.tx_bytes);
            let bytes = tx - last_tx[d].min(tx);
            last_tx[d] = tx;
            if t > warm {
                delivered[d] += bytes;
            }
            thr[d] = (bytes as f64 / STEP.as_secs_f64()) as u64 as f64 * 8e-6;
        }
        if let Some(s) = shell.as_mut() {
            s.work(&mut sim, t, caps, &mut rate_now);
        }
        if ingress {
            for (d, l) in [(Direction::Down, down_after), (Direction::Up, up_after)] {
                rate_now[d] = sim
                    .qdisc(l)
                    .and_then(|q| q.as_cake())
                    .map_or(f64::NAN, |k| {
                        k.cake_stats().capacity_estimate as f64 * 15.0 / 16.0 * 8e-6
                    });
            }
        }
        series.push(Point {
            t: now_s,
            cap: PerDir::new(caps.down as f64 * 8e-6, caps.up as f64 * 8e-6),
            rate: rate_now,
            thr,
            rtt_ms: max_rtt,
        });
    }
    let span = (end.as_secs_f64() - warm.as_secs_f64()).max(1e-3);
    LoopResult {
        name: spec.contender.name(),
        latency: LatencyStats::of(&samples),
        throughput: PerDir::new(
            delivered.down as f64 * 8e-6 / span,
            delivered.up as f64 * 8e-6 / span,
        ),
        capacity: PerDir::new(sc.down.mean(warm, end) * 8e-6, sc.up.mean(warm, end) * 8e-6),
        samples,
        owd_down: LatencyStats::of(&owd_samples.down),
        owd_up: LatencyStats::of(&owd_samples.up),
        owd_down_samples: owd_samples.down,
        owd_up_samples: owd_samples.up,
        base_owd_ms,
        series,
        base_rtt_ms,
    }
}
