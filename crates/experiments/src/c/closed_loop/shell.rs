//! The shell around the daemon's agent: the reflector hosts answering its probes, the frames
//! and readings it is handed and the rates it sets, all through the simulator.

use super::super::probe::{agent_datagram, agent_frame, AgentHost, ReflectorHost, RemoteClock};
use super::super::scenario::ProbePath;
use super::topology::Topology;
use super::{
    Contender, Fault, LoopSpec, CLOCK_OFFSET_MS, IDENT, PROBE_INTERVAL, PROBE_TIMEOUT, REFLECTORS,
    WALL,
};
use controller::agent::{
    Agent, AgentConfig, CakeCounters, DirStep, Event, Method, ProbeParams, RadioReading,
    ReflectorSpec,
};
use controller::passive::{PassiveDelay, PassiveParams, Side};
use controller::{Config, Controller, Direction, Law, PerDir, Rate};
use qdisc::{Duration, Instant, Qdisc, Rng};
use sim::{Sim, TapAt};
use std::net::{IpAddr, SocketAddr};

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
pub(super) struct Shell {
    agent: Agent<Box<dyn Law>>,
    /// The client's [`AgentHost`].
    host: sim::AppId,
    client: IpAddr,
    /// The links whose CAKE the agent drives (and whose sent bytes are its counter).
    links: PerDir<sim::LinkId>,
    /// The radio links (their queue metrics).
    radio_links: PerDir<sim::LinkId>,
    /// Throughput from CAKE's sent bytes ([`Scenario::throughput_from_shaper`]).
    from_shaper: bool,
    /// The decisions kept ([`LoopSpec::record_decisions`]); `None`: not kept.
    decisions: Option<Vec<(f64, DirStep, DirStep)>>,
    radio: Option<RadioFeed>,
    /// The passive delay signal: the estimator the taps feed (tap 0: leaving the router for
    /// the WAN; tap 1: arriving from it).
    passive: Option<PassiveDelay>,
}

impl Shell {
    /// Wires the agent of `spec`'s contender into `net` (controller configuration `cfg`): the
    /// reflector hosts on the servers (with the scenario's probe path and `spec.faults`), the
    /// agent's host on the client, the radio feed for PURPLE-regular and the passive taps.
    /// `None` for a contender that runs no law (or whose agent does not start).
    pub(super) fn wire(spec: &LoopSpec, cfg: &Config, net: &mut Topology) -> Option<Shell> {
        let sc = &spec.scenario;
        let seed = spec.seed;
        let server_addrs: Vec<IpAddr> = net.servers.iter().map(|s| s.1).collect();
        let mut faults = spec.faults.clone();
        for k in 0..REFLECTORS {
            match sc.probe_path() {
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
        let sim = &mut net.sim;
        spec.contender
            .law(seed, spec.purple_params())
            .and_then(|law| {
                let mut ac = agent_config(agent_cfg, &server_addrs);
                // Recording wants every step, as the daemon's log with `every_step`.
                ac.log.every_step |= spec.record_decisions;
                ac.readings.delivered.down = sc.deployment.download_delivered_beside();
                Agent::new(ac, law, Instant::ZERO).ok()
            })
            .map(|agent| {
                for (i, &(n, a)) in net.servers.iter().enumerate() {
                    let host = ReflectorHost::new(a, remote_clock(i, &faults));
                    sim.add_app(n, IDENT, Instant::ZERO, Box::new(host));
                }
                let (client, client_addr) = net.client;
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
                let links = net.radio;
                let passive = (spec.contender.delay_source().passive() && sc.shaper_at_router())
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
                    links: net.shaped,
                    radio_links: links,
                    from_shaper: sc.throughput_from_shaper(),
                    decisions: spec.record_decisions.then(Vec::new),
                    radio,
                    passive,
                }
            })
    }

    /// The decisions kept so far (empty unless [`LoopSpec::record_decisions`]); leaves none.
    pub(super) fn take_decisions(&mut self) -> Vec<(f64, DirStep, DirStep)> {
        self.decisions.take().unwrap_or_default()
    }

    /// The time of the agent's next wake-up: its own timeout, not before `now` and `floor`
    /// (just after the last wake-up), not after `until`.
    pub(super) fn next_wake(&self, now: Instant, floor: Instant, until: Instant) -> Instant {
        self.agent.poll_timeout().max(now).max(floor).min(until)
    }

    /// Hands the agent every frame that reached the client, at its arrival time.
    pub(super) fn arrivals(&mut self, sim: &mut Sim) {
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
                    capacity: Some(Rate::from_bytes_per_s_f64(est)),
                },
            );
        }
    }

    /// One wake-up of the agent at `w` (the capacity now is `caps`): the radio's metrics and the
    /// readings it asks for before a step (the radio's delivered bytes as the interface
    /// counter, CAKE's statistics), its timeout, its probes injected as frames from the client,
    /// its rates applied to CAKE (`rate_now` in Mbit/s).
    pub(super) fn work(
        &mut self,
        sim: &mut Sim,
        w: Instant,
        caps: PerDir<u64>,
        rate_now: &mut PerDir<f64>,
    ) {
        if w >= self.agent.engine().next_wakeup() {
            self.radio(sim, w, caps);
        }
        let a = &mut self.agent;
        let r = a.reads_due(w);
        // The radio's delivered bytes are what the router's WAN device receives.
        for d in Direction::ALL {
            if r.delivered[d] {
                a.handle_delivered(w, d, sim.link(self.radio_links[d]).map(|m| m.tx_bytes));
            }
        }
        for d in Direction::ALL {
            if r.counters[d] {
                a.handle_counter(w, d, sim.link(self.links[d]).map(|m| m.tx_bytes));
            }
        }
        if r.cake_stats {
            let from_shaper = self.from_shaper;
            let cake = |l: sim::LinkId| {
                sim.qdisc(l).map(|q| {
                    let s = q.stats();
                    CakeCounters {
                        backlog_bytes: s.backlog.bytes,
                        drops: s.dropped_total().packets,
                        ecn_marks: s.ecn_marks,
                        sent_bytes: from_shaper.then_some(s.dequeued.bytes),
                        // Kernel CAKE's statistics, as the daemon reads them: no arrivals (the
                        // router's delivery is the WAN device's counter above).
                        arrived_bytes: None,
                    }
                })
            };
            let st = PerDir::new(cake(self.links.down), cake(self.links.up));
            a.handle_cake_stats(w, Ok::<_, std::convert::Infallible>(st));
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
                    .set_rate(Some(s.rate))
                    .map_err(|_| "the qdisc has no shaper".to_string()),
                None => Err("no qdisc on the radio link".to_string()),
            };
            if res.is_ok() {
                rate_now[s.dir] = s.rate.mbit();
            }
            a.handle_rate_applied(w, s, res);
        }
        while let Some((at, e)) = a.poll_event() {
            if let (Some(v), Event::Decision { down, up }) = (self.decisions.as_mut(), e) {
                v.push((at.as_secs_f64(), down, up));
            }
        }
    }
}
