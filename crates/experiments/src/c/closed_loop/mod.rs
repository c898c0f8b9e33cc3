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
//!
//! One concern a file: `contender` (who sets the rate), `topology` (the simulated
//! network), `shell` (the agent wired to the simulator), `results` (the time series and
//! statistics); this file holds the run's specification and [`run`], whose steps are named
//! functions: build the topology, wire the controller, step the loop, collect the results.

mod contender;
mod results;
mod shell;
mod topology;

pub use contender::Contender;
pub use results::{LatencyStats, LoopResult, NoSamples, Point};
pub use shell::agent_config;
pub use topology::{MIN_PATH_RTT, PATH_RTT};

use super::scenario::{Scenario, SlotCapacity};
use controller::wire::WallAnchor;
use controller::{mbit, Config, Direction, PerDir, PurpleParams, Rate};
use qdisc::{Duration, Instant, Qdisc};
use results::Recorder;
use shell::Shell;
use sim::Capacity;
use topology::Topology;

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
    /// Parameters of [`Contender::Purple`]; `None`: [`LoopSpec::purple_params`].
    pub purple: Option<PurpleParams>,
    /// Keep every control step's decision (both directions, with its reason and the signals
    /// it saw) in [`LoopResult::decisions`], as the daemon's log writes them with
    /// `every_step`. For studying a law; the run's figures do not change. Default false.
    pub record_decisions: bool,
    /// How many control intervals ([`STEP`]) late [`Contender::OracleLagged`] is told the
    /// capacity: 1 is the matrix's reference; larger lags show what a later capacity reading
    /// costs (a law that learns the capacity from the delay alone learns it later). Default 1;
    /// 0 is the oracle told at once.
    pub oracle_lag: u32,
}

impl LoopSpec {
    /// `contender` on `scenario` for its full length, 5 s warm-up, no faults.
    pub fn new(scenario: Scenario, contender: Contender, seed: u64) -> Self {
        LoopSpec {
            secs: scenario.link.secs,
            scenario,
            contender,
            seed,
            warmup: 5.0,
            faults: Vec::new(),
            capacity_noise: 0.15,
            purple: None,
            record_decisions: false,
            oracle_lag: 1,
        }
    }

    /// Round trip of the path beyond the radio hop: the scenario's
    /// ([`sim::link_scenario::LinkScenario::path_rtt`]), else [`PATH_RTT`] (8.4 ms). The WAN
    /// link one way and back takes what the edge links leave of it ([`MIN_PATH_RTT`], 0.4 ms,
    /// at least).
    pub fn path_rtt(&self) -> Duration {
        self.scenario.path_rtt.unwrap_or(PATH_RTT)
    }

    /// The parameters `purple` runs with in section C: the law's defaults, the 2 ms delay
    /// target among them (set here explicitly, so that section C's operating point stays put if
    /// the default moves): the operating point that keeps its mean latency at or below
    /// PURPLE-AIMD's on the slides' radio while delivering about 95% of the oracle's throughput.
    pub fn purple_params(&self) -> PurpleParams {
        self.purple.unwrap_or(PurpleParams {
            target: Duration::from_millis(2),
            ..PurpleParams::default()
        })
    }

    /// The controller configuration used: the scenario's range, base at its start rate
    /// (`LinkRates::start_rate`: 60% of max unless the link chose one), safe = min.
    pub fn config(&self) -> Config {
        let s = &self.scenario;
        let mut c = Config::with_range(
            PerDir::new(s.range_down().0, s.range_up().0),
            PerDir::new(s.range_down().1, s.range_up().1),
        );
        c.base = PerDir::new(s.link.down.rates.start_rate(), s.link.up.rates.start_rate());
        c
    }
}

/// Runs one closed loop. Deterministic in `spec`. Fails only when a latency probe measured
/// nothing after the warm-up ([`NoSamples`]).
pub fn run(spec: &LoopSpec) -> Result<LoopResult, NoSamples> {
    let sc = &spec.scenario;
    let cfg = spec.config();
    let mut net = Topology::build(spec, &cfg);
    let mut shell = Shell::wire(spec, &cfg, &mut net);
    let mut rec = Recorder::new(
        spec.secs,
        spec.warmup,
        topology::idle_owd_ms(sc, spec.path_rtt()),
    );
    let mut lp = Loop {
        t: Instant::ZERO,
        cur_cap: PerDir::new(0u64, 0u64),
        rate_now: initial_rates(spec, &cfg),
        range: PerDir::new(
            (
                cfg.min.down.bytes_per_s_f64(),
                cfg.max.down.bytes_per_s_f64(),
            ),
            (cfg.min.up.bytes_per_s_f64(), cfg.max.up.bytes_per_s_f64()),
        ),
        last_tx: PerDir::new(0, 0),
    };
    while lp.t < rec.end {
        lp.step(spec, &mut net, shell.as_mut(), &mut rec);
    }
    let (warm, end) = (rec.warm, rec.end);
    let mut r = rec.finish(
        spec.contender.name(),
        PerDir::new(
            sc.link.down.capacity.mean(warm, end),
            sc.link.up.capacity.mean(warm, end),
        ),
        &net.sim,
        &net.named,
        &net.summary_links(),
    )?;
    if let Some(sh) = shell.as_mut() {
        r.decisions = sh.take_decisions();
    }
    Ok(r)
}

/// CAKE's rate at the start, Mbit/s, as the series shows it (NaN when unshaped).
fn initial_rates(spec: &LoopSpec, cfg: &Config) -> PerDir<f64> {
    let mut rate_now = PerDir::new(f64::NAN, f64::NAN);
    for d in Direction::ALL {
        rate_now[d] = match spec.contender {
            Contender::Fifo | Contender::FqCodel => f64::NAN,
            Contender::CakeStatic(dn, u) => {
                if d == Direction::Down {
                    dn
                } else {
                    u
                }
            }
            _ => cfg.base[d].mbit(),
        };
    }
    rate_now
}

/// The share of an interval's capacity the radio must have delivered in it, less one frame
/// (a frame straddling the interval's edge counts where it ends), for the saturated oracle
/// ([`Contender::OracleSaturated`]) to be told that capacity: on a link with a rate, a
/// transmitter busy all the interval but a millisecond; on a recorded trace, every delivery
/// opportunity used.
pub const SATURATED: f64 = 0.98;

/// One full frame, bytes: the slack of [`SATURATED`]'s test.
const FRAME: f64 = qdisc::FULL_FRAME as f64;

/// The loop's state between steps.
struct Loop {
    /// The start of the next step.
    t: Instant,
    /// The rate each radio link was last set to (bytes/s; 0: not yet).
    cur_cap: PerDir<u64>,
    /// CAKE's rate per direction, Mbit/s (NaN when unshaped), for the series.
    rate_now: PerDir<f64>,
    /// The controllers' configured range per direction, bytes/s `(min, max)`: the censored
    /// oracle stays within it as a law does.
    range: PerDir<(f64, f64)>,
    /// The radio links' transmitted bytes at the start of the step (the saturated oracle's
    /// reading).
    last_tx: PerDir<u64>,
}

impl Loop {
    /// One [`STEP`]: the capacity (and an oracle's rate) for the step, the agent's wake-ups
    /// through it, then at its end the measurements, the agent's step and a point of the
    /// series.
    fn step(
        &mut self,
        spec: &LoopSpec,
        net: &mut Topology,
        mut shell: Option<&mut Shell>,
        rec: &mut Recorder,
    ) {
        let t = self.t;
        let caps = self.follow_capacity(spec, net);
        // The agent's wake-ups (probes, loss checks, steps) in the interval; the step at its
        // end follows the measurements below.
        let t_next = t + STEP;
        Self::agent_wakeups(net, shell.as_deref_mut(), t_next, caps, &mut self.rate_now);
        self.t = t_next;
        let t = t_next;
        let now_s = t.as_secs_f64();
        // Measurement probes.
        let max_rtt = rec.read_probes(&net.sim, &mut net.probes);
        // Delivered bytes in the step, for the series and the result.
        let thr = rec.delivered(&net.sim, net.radio, t);
        if let Some(s) = shell {
            s.work(&mut net.sim, t, caps, &mut self.rate_now);
        }
        if let Some(after) = net.ingress {
            for (d, l) in [(Direction::Down, after.down), (Direction::Up, after.up)] {
                self.rate_now[d] = net
                    .sim
                    .qdisc(l)
                    .and_then(|q| q.as_cake())
                    .map_or(f64::NAN, |k| {
                        k.cake_stats().capacity_estimate as f64 * 15.0 / 16.0 * 8e-6
                    });
            }
        }
        rec.push(Point {
            t: now_s,
            cap: PerDir::new(caps.down as f64 * 8e-6, caps.up as f64 * 8e-6),
            rate: self.rate_now,
            thr,
            rtt_ms: max_rtt,
        });
    }

    /// Sets the radio links to the capacity of the step starting now (on a series, when it
    /// changed) and, for an oracle, CAKE's rate from it; returns the capacity (bytes/s).
    fn follow_capacity(&mut self, spec: &LoopSpec, net: &mut Topology) -> PerDir<u64> {
        let (sc, t) = (&spec.scenario, self.t);
        let caps = PerDir::new(
            sc.link.down.capacity.rate_at(t),
            sc.link.up.capacity.rate_at(t),
        );
        for d in Direction::ALL {
            let capd = if d == Direction::Down {
                &sc.link.down.capacity
            } else {
                &sc.link.up.capacity
            };
            if capd.is_series() && caps[d] != self.cur_cap[d] {
                net.sim
                    .set_link_rate(net.radio[d], Capacity::Rate(caps[d].max(1)));
                self.cur_cap[d] = caps[d];
            }
            if spec.contender.is_oracle() {
                let late = |lag: u32| {
                    capd.rate_over(
                        Instant::from_nanos(
                            t.as_nanos()
                                .saturating_sub(STEP.as_nanos() * u64::from(lag)),
                        ),
                        STEP,
                    )
                };
                let r = match spec.contender {
                    Contender::OracleLookahead => {
                        capd.rate_over(t, Duration::from_millis(200)) * 95 / 100
                    }
                    Contender::OracleLagged => late(spec.oracle_lag) * 95 / 100,
                    Contender::OracleCensored(g) => {
                        // The rate in force in the interval that just ended, bytes/s.
                        let set = self.rate_now[d] * 1e6 / 8.0;
                        let c = late(1) as f64;
                        let (lo, hi) = self.range[d];
                        let r = if c > set {
                            // Not the bottleneck: the capacity is only known to be above.
                            set * (1.0 + f64::from(g) / 100.0)
                        } else {
                            c * 0.95
                        };
                        // Within the range as the agent keeps a law (min first, then max;
                        // unlike `clamp`, this cannot panic on a range given upside down).
                        r.max(lo).min(hi) as u64
                    }
                    Contender::OracleSaturated(g) => {
                        let set = self.rate_now[d] * 1e6 / 8.0;
                        // What the radio delivered during the interval that just ended, against
                        // what its capacity could carry in it.
                        let tx = net.sim.link(net.radio[d]).map_or(0, |m| m.tx_bytes);
                        let sent = tx.saturating_sub(self.last_tx[d]) as f64;
                        self.last_tx[d] = tx;
                        let c = late(1) as f64;
                        let (lo, hi) = self.range[d];
                        let saturated =
                            t > Instant::ZERO && sent + FRAME >= SATURATED * c * STEP.as_secs_f64();
                        let r = if saturated {
                            c * 0.95
                        } else {
                            set * (1.0 + f64::from(g) / 100.0)
                        };
                        r.max(lo).min(hi) as u64
                    }
                    _ => caps[d] * 95 / 100,
                };
                if let Some(q) = net.sim.qdisc_mut(net.shaped[d]) {
                    let _ = q.set_rate(Some(Rate::from_bytes_per_s(r.max(mbit(0.1)))));
                }
                self.rate_now[d] = r as f64 * 8e-6;
            }
        }
        caps
    }

    /// Runs the simulator to `t_next`, stopping at each of the agent's wake-ups before it to
    /// hand it the frames that arrived and let it work (without a controller: straight to
    /// `t_next`); the frames that arrived by `t_next` are handed over too.
    fn agent_wakeups(
        net: &mut Topology,
        mut shell: Option<&mut Shell>,
        t_next: Instant,
        caps: PerDir<u64>,
        rate_now: &mut PerDir<f64>,
    ) {
        let sim = &mut net.sim;
        let mut floor = Instant::ZERO;
        loop {
            let wake = shell
                .as_deref()
                .map_or(t_next, |s| s.next_wake(sim.now(), floor, t_next));
            sim.run_until(wake);
            let Some(s) = shell.as_deref_mut() else {
                break;
            };
            s.arrivals(sim);
            if wake >= t_next {
                break;
            }
            s.work(sim, wake, caps, rate_now);
            floor = wake + Duration::from_nanos(1);
        }
    }
}
