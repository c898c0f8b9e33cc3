//! The agent driven against a deterministic link the way quinn's `Pair` drives a connection:
//! [`Pair`] holds one [`Agent`], a fluid model of a bottleneck per direction with CAKE (a
//! greedy load keeps it backlogged) in front of it, and fake reflectors that answer the agent's
//! real request bytes with real reply bytes from their own clocks, optionally lying. Time jumps
//! to the next wake-up or arrival. Nothing here touches a socket or a clock.

use super::*;
use crate::wire::{icmp, udp, NS_PER_DAY};
use crate::{Aimd, Law, Purple};

fn mbit(m: f64) -> Rate {
    Rate::from_mbit(m)
}
use std::net::{IpAddr, Ipv4Addr};

/// The agent's wall clock: noon UTC of some day, at t = 0.
const ANCHOR: WallAnchor = WallAnchor {
    at: Instant::ZERO,
    wall_us: 1_700_006_400_000_000 + 43_200_000_000,
};

/// How a fake reflector misbehaves.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Fault {
    None,
    /// Never answers.
    Silent,
    /// Answers ICMP echo but not timestamp requests.
    NoTimestamps,
    /// Echoes a send time off by this many µs (UDP) or ms (ICMP), with the right sequence.
    WrongEcho(u64),
    /// Its clock steps by this many ns at this instant.
    StepAt(Instant, i64),
    /// Its receive stamp is this many ns late (inflated up delay, transmit stamp honest).
    InflateRx(i64),
    /// Drops one request in this many (a rate-limited ICMP responder).
    DropOneIn(u32),
}

#[derive(Clone, Copy, Debug)]
struct FakeRefl {
    spec: ReflectorSpec,
    offset_ns: i64,
    fault: Fault,
}

impl FakeRefl {
    fn clock_ns(&self, t: Instant) -> i64 {
        let step = match self.fault {
            Fault::StepAt(at, s) if t >= at => s,
            _ => 0,
        };
        ANCHOR.wall_ns(t) as i64 + self.offset_ns + step
    }

    /// The reply to `req` received at `rx` and sent at `tx` (true times), if it answers.
    fn answer(&self, socket: SocketKind, req: &[u8], rx: Instant, tx: Instant) -> Option<Vec<u8>> {
        let ms = |ns: i64| (ns.rem_euclid(NS_PER_DAY) / 1_000_000) as u32;
        match (self.fault, socket) {
            (Fault::Silent, _) => None,
            // ICMP sequence numbers (bytes 6..8) count all probes: drop by the low bits.
            (Fault::DropOneIn(n), SocketKind::Icmp)
                if u32::from(u16::from_be_bytes([req[6], req[7]])) % (3 * n) < 3 =>
            {
                None
            }
            (_, SocketKind::Icmp) => {
                if self.fault == Fault::NoTimestamps && req[0] == icmp::TIMESTAMP_REQUEST {
                    return None;
                }
                let mut q = req.to_vec();
                if let Fault::WrongEcho(d) = self.fault {
                    let o = u32::from_be_bytes([q[8], q[9], q[10], q[11]]).wrapping_add(d as u32);
                    q[8..12].copy_from_slice(&o.to_be_bytes());
                    q[2..4].copy_from_slice(&[0, 0]);
                    let c = icmp::checksum(&q);
                    q[2..4].copy_from_slice(&c.to_be_bytes());
                }
                let infl = match self.fault {
                    Fault::InflateRx(d) => d,
                    _ => 0,
                };
                icmp::reply_to(&q, ms(self.clock_ns(rx) + infl), ms(self.clock_ns(tx)))
                    .map(|r| r.to_vec())
            }
            (_, SocketKind::Udp) => {
                let (seq, sent) = udp::parse_request(req)?;
                let sent = match self.fault {
                    Fault::WrongEcho(d) => sent.wrapping_add(d),
                    _ => sent,
                };
                let q = udp::request(seq, sent);
                let us = |ns: i64| (ns / 1_000) as u64;
                let infl = match self.fault {
                    Fault::InflateRx(d) => d,
                    _ => 0,
                };
                Some(udp::reply(&q, us(self.clock_ns(rx) + infl), us(self.clock_ns(tx))).to_vec())
            }
        }
    }
}

/// A bottleneck per direction fed by CAKE at the agent's rate, with a greedy load.
#[derive(Clone, Debug)]
struct Fluid {
    cap: fn(Instant) -> PerDir<Rate>,
    rate: PerDir<Rate>,
    queue: PerDir<f64>,
    delivered: PerDir<f64>,
    at: Instant,
    base_owd: Duration,
}

impl Fluid {
    fn advance(&mut self, t: Instant) {
        let dt = t.saturating_duration_since(self.at).as_secs_f64();
        let cap = (self.cap)(self.at);
        for d in Direction::ALL {
            let (r, c) = (self.rate[d].bytes_per_s_f64(), cap[d].bytes_per_s_f64());
            let q0 = self.queue[d];
            let q1 = (q0 + (r - c) * dt).max(0.0);
            self.delivered[d] += r * dt - (q1 - q0);
            self.queue[d] = q1;
        }
        self.at = t;
    }
    fn owd(&self, d: Direction) -> Duration {
        let cap = (self.cap)(self.at)[d].bytes_per_s().max(1) as f64;
        self.base_owd + Duration::from_secs_f64(self.queue[d] / cap)
    }
}

type Dyn = Box<dyn Law>;

struct Pair {
    agent: Agent<Dyn>,
    now: Instant,
    refl: Vec<FakeRefl>,
    /// Replies in flight: arrival, source, socket, bytes.
    flight: Vec<(Instant, SocketAddr, SocketKind, Vec<u8>)>,
    link: Fluid,
    events: Vec<(Instant, Event)>,
    rates: Vec<(Instant, SetRate)>,
    /// Extra datagrams to deliver: arrival, source, socket, bytes.
    inject: Vec<(Instant, SocketAddr, SocketKind, Vec<u8>)>,
    /// Replies that would arrive in this window are lost (a link outage).
    outage: Option<(Instant, Instant)>,
    actuator_fails: bool,
    cake_fails: bool,
    reads: Vec<(Instant, Reads)>,
    /// A passive feed: readings with the fluid link's true queueing delay per direction.
    passive: bool,
}

fn addr(i: u8) -> SocketAddr {
    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 2, i)), 0)
}

fn udp_addr(i: u8) -> SocketAddr {
    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 3, i)), udp::PORT)
}

fn steady(_: Instant) -> PerDir<Rate> {
    PerDir::new(mbit(100.0), mbit(30.0))
}

impl Pair {
    fn new(refl: Vec<FakeRefl>, law: Dyn, tweak: impl FnOnce(&mut AgentConfig)) -> Pair {
        let mut cc = Config::with_range(
            PerDir::new(mbit(5.0), mbit(2.0)),
            PerDir::new(mbit(150.0), mbit(50.0)),
        );
        cc.base = PerDir::new(mbit(60.0), mbit(20.0));
        let mut cfg = AgentConfig::new(cc, refl.iter().map(|r| r.spec).collect(), ANCHOR);
        if !refl.is_empty() {
            cfg.probe.active = refl.len();
        }
        tweak(&mut cfg);
        let agent = Agent::new(cfg, law, Instant::ZERO).expect("valid config");
        Pair {
            agent,
            now: Instant::ZERO,
            refl,
            flight: Vec::new(),
            link: Fluid {
                cap: steady,
                rate: PerDir::new(mbit(60.0), mbit(20.0)),
                queue: PerDir::both(0.0),
                delivered: PerDir::both(0.0),
                at: Instant::ZERO,
                base_owd: Duration::from_millis(5),
            },
            events: Vec::new(),
            rates: Vec::new(),
            inject: Vec::new(),
            outage: None,
            actuator_fails: false,
            cake_fails: false,
            reads: Vec::new(),
            passive: false,
        }
    }

    fn run_until(&mut self, end: Instant) {
        let mut spins = 0u32;
        while self.now < end {
            let next_arrival = self
                .flight
                .iter()
                .chain(&self.inject)
                .map(|f| f.0)
                .min()
                .unwrap_or(Instant::MAX);
            let t = self
                .agent
                .poll_timeout()
                .min(next_arrival)
                .min(end)
                .max(self.now);
            spins = if t == self.now { spins + 1 } else { 0 };
            assert!(spins < 100, "the agent keeps asking for {t:?}");
            self.now = t;
            self.link.advance(t);
            // Arrivals up to t, in arrival order, at their own times.
            let mut due: Vec<_> = Vec::new();
            for q in [&mut self.flight, &mut self.inject] {
                let mut k = 0;
                while k < q.len() {
                    if q[k].0 <= t {
                        due.push(q.remove(k));
                    } else {
                        k += 1;
                    }
                }
            }
            due.sort_by_key(|d| d.0);
            for (at, from, socket, bytes) in due {
                self.agent.handle_datagram(at, from, socket, &bytes);
            }
            let r = self.agent.reads_due(t);
            if r.counters.down || r.counters.up || r.cake_stats {
                self.reads.push((t, r));
            }
            for d in Direction::ALL {
                if r.counters[d] {
                    self.agent
                        .handle_counter(t, d, Some(self.link.delivered[d] as u64));
                }
            }
            if r.cake_stats {
                let read = if self.cake_fails {
                    Err("no stats".to_string())
                } else {
                    Ok(PerDir::both(Some(CakeCounters {
                        backlog_bytes: 30_000,
                        ..CakeCounters::default()
                    })))
                };
                self.agent.handle_cake_stats(t, read);
            }
            if r.passive && self.passive {
                let q = |d| {
                    Some(Duration::from_nanos(
                        self.link
                            .owd(d)
                            .as_nanos()
                            .saturating_sub(self.link.base_owd.as_nanos()),
                    ))
                };
                let reading = PassiveReading {
                    queue: PerDir::new(q(Direction::Down), q(Direction::Up)),
                    flows: PerDir::both(4),
                    one_way: PerDir::both(true),
                    ..PassiveReading::default()
                };
                self.agent.handle_passive(t, &reading);
            }
            self.agent.handle_timeout(t);
            self.drain(t);
        }
    }

    fn drain(&mut self, t: Instant) {
        while let Some(tx) = self.agent.poll_transmit() {
            let Some(r) = self.refl.iter().find(|r| r.spec.addr == tx.to) else {
                continue;
            };
            let rx = t + self.link.owd(Direction::Up);
            let back = rx + Duration::from_micros(300);
            if let Some(b) = r.answer(tx.socket, tx.bytes(), rx, back) {
                let arrive = back + self.link.owd(Direction::Down);
                if !self.outage.is_some_and(|(a, b)| (a..b).contains(&arrive)) {
                    self.flight.push((arrive, tx.to, tx.socket, b));
                }
            }
        }
        while let Some(s) = self.agent.poll_rate() {
            let res = if self.actuator_fails {
                Err("netlink: EPERM".to_string())
            } else {
                self.link.rate[s.dir] = s.rate;
                Ok(())
            };
            self.rates.push((t, s));
            self.agent.handle_rate_applied(t, s, res);
        }
        while let Some(e) = self.agent.poll_event() {
            self.events.push(e);
        }
    }

    fn decisions(&self) -> impl Iterator<Item = (Instant, &DirStep, &DirStep)> {
        self.events.iter().filter_map(|(t, e)| match e {
            Event::Decision { down, up } => Some((*t, down, up)),
            _ => None,
        })
    }

    fn discards(&self, reason: Discard) -> Vec<(Instant, u64)> {
        self.events
            .iter()
            .filter_map(|(t, e)| match e {
                Event::Discarded {
                    reason: r, count, ..
                } if *r == reason => Some((*t, *count)),
                _ => None,
            })
            .collect()
    }
}

fn ts(i: u8, offset_ms: i64, fault: Fault) -> FakeRefl {
    FakeRefl {
        spec: ReflectorSpec {
            method: Method::Timestamp,
            addr: addr(i),
        },
        offset_ns: offset_ms * 1_000_000,
        fault,
    }
}

fn udp_refl(i: u8, offset_ms: i64, fault: Fault) -> FakeRefl {
    FakeRefl {
        spec: ReflectorSpec {
            method: Method::Udp,
            addr: udp_addr(i),
        },
        offset_ns: offset_ms * 1_000_000,
        fault,
    }
}

fn purple() -> Dyn {
    Box::new(Purple::default())
}

fn three_honest() -> Vec<FakeRefl> {
    vec![
        ts(1, 5_000, Fault::None),
        ts(2, -3_217, Fault::None),
        udp_refl(3, 86_000, Fault::None),
    ]
}

#[test]
fn pair_probes_round_robin_and_steps_every_interval() {
    let mut p = Pair::new(three_honest(), purple(), |c| c.log.every_step = true);
    p.run_until(Instant::from_secs(10));
    let st: Vec<_> = p.agent.reflectors().collect();
    for r in &st {
        // 20 probes/s over 3 reflectors for 10 s.
        assert!((65..=68).contains(&r.stats.sent), "{r:?}");
        assert!(r.stats.answered + 1 >= r.stats.sent, "{r:?}");
        assert_eq!(r.stats.discarded, 0, "{r:?}");
        assert_eq!(r.method, r.spec.method);
    }
    // One step per 50 ms (0 to 10 s inclusive), each logged with every_step.
    assert_eq!(p.agent.stats().steps, 201);
    let steps: Vec<Instant> = p.decisions().map(|d| d.0).collect();
    assert_eq!(steps.len(), 201);
    for w in steps.windows(2) {
        assert_eq!(
            w[1].saturating_duration_since(w[0]),
            Duration::from_millis(50)
        );
    }
    // The counters were asked for right before every step, CAKE's statistics too.
    assert_eq!(p.reads.len(), 201, "{:?}", &p.reads[..3]);
    assert!(p.reads.iter().all(|(_, r)| r.cake_stats && r.counters.down));
    // Delays reached the controller: the pool has a consensus for each direction.
    let now = p.now;
    let mut pool = p.agent.engine().pool().clone();
    assert!(pool.consensus(now, Direction::Down).is_some());
    assert!(pool.consensus(now, Direction::Up).is_some());
    assert_eq!(
        Discard::ALL
            .iter()
            .map(|&d| p.agent.discarded(d))
            .sum::<u64>(),
        0
    );
}

fn cap_drop(t: Instant) -> PerDir<Rate> {
    if (Instant::from_secs(10)..Instant::from_secs(20)).contains(&t) {
        PerDir::new(mbit(40.0), mbit(10.0))
    } else {
        PerDir::new(mbit(100.0), mbit(30.0))
    }
}

#[test]
fn pair_on_a_fluid_link_tracks_a_capacity_drop_and_its_return() {
    for (name, law) in [
        ("purple", purple()),
        ("aimd", Box::new(Aimd::default()) as Dyn),
    ] {
        let mut p = Pair::new(three_honest(), law, |c| c.log.every_step = true);
        p.link.cap = cap_drop;
        p.run_until(Instant::from_secs(30));
        let rate_at = |t: f64| {
            p.decisions()
                .filter(|d| d.0.as_secs_f64() <= t)
                .last()
                .map_or(0.0, |d| d.1.rate.bytes_per_s_f64())
                * 8e-6
        };
        let (before, during, after) = (rate_at(9.9), rate_at(14.0), rate_at(29.9));
        eprintln!("{name}: {before:.1} -> {during:.1} -> {after:.1} Mbit/s");
        assert!(before > 50.0 && before < 105.0, "{name} before {before}");
        assert!(during <= 42.0, "{name} during the drop {during}");
        // Within 4 s of the drop the queue it left is below 50 ms.
        let q = p
            .decisions()
            .filter(|d| d.0.as_secs_f64() > 14.0 && d.0.as_secs_f64() < 20.0)
            .filter_map(|d| d.1.delay_ms)
            .fold(0.0f64, f64::max);
        assert!(q < 50.0, "{name}: {q} ms");
        if name == "purple" {
            assert!(after > 70.0, "{name} after {after}");
        }
    }
}

/// PURPLE's phase changes reach the shell as events, in order, each before the decision of
/// its step, chained (each starts where the previous one of its direction ended) and agreeing
/// with the law's phase; a law without phases makes none.
#[test]
fn purples_phase_changes_are_events_chained_per_direction() {
    let mut p = Pair::new(three_honest(), purple(), |c| c.log.every_step = true);
    p.link.cap = cap_drop;
    p.run_until(Instant::from_secs(30));
    let tr: Vec<(Instant, Direction, Phase, Phase)> = p
        .events
        .iter()
        .filter_map(|(t, e)| match e {
            Event::Transition { dir, from, to, .. } => Some((*t, *dir, *from, *to)),
            _ => None,
        })
        .collect();
    let per_s = tr.len() as f64 / 30.0;
    eprintln!("{} transitions in 30 s ({per_s:.1}/s)", tr.len());
    assert!(!tr.is_empty());
    for dir in Direction::ALL {
        let mine: Vec<_> = tr.iter().filter(|x| x.1 == dir).collect();
        assert_eq!(mine[0].2, Phase::Startup, "{dir:?} starts in startup");
        for w in mine.windows(2) {
            assert_eq!(w[0].3, w[1].2, "{dir:?}: {w:?}");
            assert!(w[0].0 <= w[1].0);
        }
        assert_eq!(
            Some(mine.last().unwrap().3),
            p.agent.engine().law().phase(dir),
            "{dir:?}"
        );
    }
    // Each transition comes right before a decision of the same instant (its step).
    for (i, (t, e)) in p.events.iter().enumerate() {
        if matches!(e, Event::Transition { .. }) {
            let next = p.events[i + 1..]
                .iter()
                .find(|(_, e)| !matches!(e, Event::Transition { .. }));
            assert!(
                matches!(next, Some((t2, Event::Decision { .. })) if t2 == t),
                "{next:?}"
            );
        }
    }
    let mut p = Pair::new(three_honest(), Box::new(Aimd::default()), |_| {});
    p.run_until(Instant::from_secs(5));
    assert!(!p
        .events
        .iter()
        .any(|(_, e)| matches!(e, Event::Transition { .. })));
}

#[test]
fn udp_reflector_echoing_a_wrong_send_time_is_discarded_and_rotated_out() {
    // Active: the liar; spare: an honest reflector.
    let refl = vec![
        udp_refl(1, 0, Fault::WrongEcho(450_000_000_000)),
        udp_refl(2, 0, Fault::None),
    ];
    let mut p = Pair::new(refl, purple(), |c| {
        c.probe.active = 1;
        c.log.every_step = true;
    });
    p.run_until(Instant::from_secs(5));
    assert!(p.agent.discarded(Discard::EchoMismatch) >= 3);
    let rot: Vec<_> = p
        .events
        .iter()
        .filter_map(|(t, e)| match e {
            Event::Rotated { out, into } => Some((*t, *out, *into)),
            _ => None,
        })
        .collect();
    assert_eq!(rot.len(), 1, "{rot:?}");
    assert_eq!((rot[0].1, rot[0].2), (udp_addr(1), udp_addr(2)));
    assert!(
        rot[0].0 < Instant::from_secs(2),
        "rotated at {:?}",
        rot[0].0
    );
    // Reported in the log, once (rate-limited), naming the liar.
    let d: Vec<_> = p
        .events
        .iter()
        .filter(|(_, e)| {
            matches!(
                e,
                Event::Discarded {
                    reason: Discard::EchoMismatch,
                    ..
                }
            )
        })
        .collect();
    assert_eq!(d.len(), 1, "{d:?}");
    assert!(matches!(d[0].1, Event::Discarded { reflector: Some(a), .. } if a == udp_addr(1)));
    // No delay from the liar ever reached the log (it would read as ~4.5e11 ms).
    assert!(p
        .decisions()
        .all(|(_, dn, up)| dn.delay_ms.unwrap_or(0.0) < 50.0 && up.delay_ms.unwrap_or(0.0) < 50.0));
    // The rate was not driven to the minimum.
    let last = p.decisions().last().expect("decisions").1.rate;
    assert!(last > mbit(50.0), "{last}");
}

#[test]
fn a_reflector_inflating_one_delay_is_implausible_and_outvoted() {
    let mut refl = three_honest();
    refl[1].fault = Fault::InflateRx(400_000_000);
    let mut p = Pair::new(refl, purple(), |c| c.log.every_step = true);
    p.run_until(Instant::from_secs(6));
    assert!(p.agent.discarded(Discard::Implausible) >= 30);
    let liar = p.agent.reflectors().nth(1).expect("three");
    assert_eq!(liar.stats.answered, 0, "{liar:?}");
    // Its discards were offences: the pool holds it dead.
    let h = p.agent.engine().pool().health(liar.id, p.now);
    assert_eq!(h, Some(Health::Dead));
    assert!(p
        .decisions()
        .all(|(_, _, up)| up.delay_ms.unwrap_or(0.0) < 50.0));
}

#[test]
fn a_one_hour_clock_step_on_the_only_reflector_is_absorbed_within_three_replies() {
    for r in [
        udp_refl(
            1,
            0,
            Fault::StepAt(Instant::from_secs(20), 3_600_000_000_000),
        ),
        ts(
            1,
            0,
            Fault::StepAt(Instant::from_secs(20), 3_600_000_000_000),
        ),
        ts(
            1,
            0,
            Fault::StepAt(Instant::from_secs(20), -3_600_000_000_000),
        ),
    ] {
        let mut p = Pair::new(vec![r], purple(), |c| c.log.every_step = true);
        p.run_until(Instant::from_secs(40));
        let steps: Vec<_> = p
            .events
            .iter()
            .filter_map(|(t, e)| match e {
                Event::ClockStep { shift_ms, .. } => Some((*t, *shift_ms)),
                _ => None,
            })
            .collect();
        assert_eq!(steps.len(), 1, "{r:?}: {steps:?}");
        let (at, shift) = steps[0];
        // Three replies at 20 probes/s to one reflector with 100 ms etiquette: ~300 ms.
        assert!(at < Instant::from_millis(20_400), "re-based at {at:?}");
        let want = if matches!(r.fault, Fault::StepAt(_, s) if s > 0) {
            3.6e6
        } else {
            -3.6e6
        };
        assert!((shift - want).abs() < 100.0, "{shift}");
        assert_eq!(p.agent.discarded(Discard::ClockStep), 2);
        // The rate never went near the minimum and no decision saw the step as delay.
        let before = p
            .decisions()
            .filter(|d| d.0 < Instant::from_secs(20))
            .last()
            .expect("d")
            .2
            .rate;
        for (t, dn, up) in p.decisions().filter(|d| d.0 >= Instant::from_secs(20)) {
            assert!(
                up.rate >= before * 7 / 10,
                "{r:?} at {t:?}: {} vs {before}",
                up.rate
            );
            assert!(up.delay_ms.unwrap_or(0.0) < 50.0 && dn.delay_ms.unwrap_or(0.0) < 50.0);
        }
    }
}

#[test]
fn garbage_wrong_id_and_wrong_source_replies_are_counted_and_reported_at_a_limited_rate() {
    let mut p = Pair::new(three_honest(), purple(), |_| {});
    for k in 0..100u64 {
        let at = Instant::from_millis(100 + k * 50);
        p.inject
            .push((at, addr(1), SocketKind::Icmp, vec![0x45, 1, 2, 3]));
        let mut other = icmp::request(icmp::ECHO_REQUEST, 0x1111, k as u16, 0);
        other[0] = icmp::ECHO_REPLY;
        other[2..4].copy_from_slice(&[0, 0]);
        let c = icmp::checksum(&other);
        other[2..4].copy_from_slice(&c.to_be_bytes());
        p.inject
            .push((at, addr(9), SocketKind::Icmp, other.to_vec()));
        p.inject
            .push((at, udp_addr(9), SocketKind::Udp, b"not a reply".to_vec()));
    }
    p.run_until(Instant::from_secs(12));
    assert_eq!(p.agent.discarded(Discard::WrongId), 100);
    assert_eq!(p.agent.discarded(Discard::Garbage), 200);
    // Reported at once, then at most once per 10 s, with the count since the last report.
    let g = p.discards(Discard::Garbage);
    assert_eq!(g.len(), 2, "{g:?}");
    assert_eq!(g[0], (Instant::from_millis(100), 1));
    assert_eq!(g.iter().map(|x| x.1).sum::<u64>(), 200);
    assert!(g[1].0 >= Instant::from_millis(10_100));
    // A reply to a real probe, but from another address.
    let mut p = Pair::new(vec![ts(1, 0, Fault::None)], purple(), |_| {});
    p.run_until(Instant::from_millis(1));
    let mut q = p.flight.clone();
    for f in &mut q {
        f.1 = addr(8);
    }
    p.flight = q;
    p.run_until(Instant::from_secs(1));
    assert_eq!(p.agent.discarded(Discard::WrongSource), 1);
}

#[test]
fn a_timestamp_reflector_that_never_answers_type_13_falls_back_to_echo() {
    let mut p = Pair::new(
        vec![ts(1, 0, Fault::NoTimestamps), ts(2, 0, Fault::None)],
        purple(),
        |_| {},
    );
    p.run_until(Instant::from_secs(8));
    let fb: Vec<_> = p
        .events
        .iter()
        .filter(|(_, e)| matches!(e, Event::FallbackToEcho { reflector } if *reflector == addr(1)))
        .collect();
    assert_eq!(fb.len(), 1);
    let r = p.agent.reflectors().next().expect("two");
    assert_eq!(r.method, Method::Echo);
    assert!(r.stats.answered > 20, "{r:?}");
    // Falling back is not a rotation, and its losses were forgiven with the new id.
    assert!(p
        .events
        .iter()
        .all(|(_, e)| !matches!(e, Event::Rotated { .. })));
    assert_eq!(
        p.agent.engine().pool().health(r.id, p.now),
        Some(Health::Good)
    );
}

#[test]
fn actuator_failures_keep_the_rate_in_force_and_are_logged() {
    let mut p = Pair::new(three_honest(), purple(), |c| c.log.every_step = true);
    p.run_until(Instant::from_secs(2));
    let in_force = p.agent.rate_in_force(Direction::Down).expect("applied");
    p.actuator_fails = true;
    p.run_until(Instant::from_secs(4));
    assert_eq!(p.agent.rate_in_force(Direction::Down), Some(in_force));
    let errs = p
        .events
        .iter()
        .filter(|(_, e)| matches!(e, Event::ActuatorError { .. }))
        .count() as u64;
    assert!(errs > 0);
    assert_eq!(errs, p.agent.stats().actuator_errors);
    let failed: Vec<_> = p
        .decisions()
        .filter(|d| d.0 > Instant::from_secs(2))
        .collect();
    assert!(failed.iter().all(|d| !d.1.applied && !d.2.applied));
}

#[test]
fn the_actuator_limits_hold_changes_back_and_the_law_sees_the_rate_in_force() {
    let mut p = Pair::new(three_honest(), purple(), |c| {
        c.actuator.min_interval = Duration::from_millis(500);
        c.log.every_step = true;
    });
    p.link.cap = cap_drop;
    p.run_until(Instant::from_secs(16));
    for dir in Direction::ALL {
        let times: Vec<Instant> = p
            .rates
            .iter()
            .filter(|(_, s)| s.dir == dir)
            .map(|(t, _)| *t)
            .collect();
        assert!(times.len() >= 3);
        for w in times.windows(2) {
            assert!(w[1].saturating_duration_since(w[0]) >= Duration::from_millis(500));
        }
    }
    assert!(p.decisions().any(|d| !d.1.applied));
}

#[test]
fn cake_stats_failures_are_logged_once_retried_each_second_and_recovery_is_logged() {
    let mut p = Pair::new(three_honest(), purple(), |_| {});
    p.cake_fails = true;
    p.run_until(Instant::from_millis(2_520));
    let asked: Vec<Instant> = p
        .reads
        .iter()
        .filter(|(_, r)| r.cake_stats)
        .map(|(t, _)| *t)
        .collect();
    assert_eq!(
        asked,
        vec![Instant::ZERO, Instant::from_secs(1), Instant::from_secs(2)]
    );
    p.cake_fails = false;
    p.run_until(Instant::from_secs(4));
    let kinds: Vec<&Event> = p
        .events
        .iter()
        .map(|(_, e)| e)
        .filter(|e| matches!(e, Event::CakeStatsError { .. } | Event::CakeStatsOk))
        .collect();
    assert_eq!(kinds.len(), 2, "{kinds:?}");
    assert!(matches!(kinds[0], Event::CakeStatsError { error } if error == "no stats"));
    assert_eq!(kinds[1], &Event::CakeStatsOk);
    assert_eq!(p.agent.cake_backlog(Direction::Down), Some(30_000));
}

#[test]
fn counters_on_their_own_timer_when_cake_stats_are_off() {
    let mut p = Pair::new(three_honest(), purple(), |c| {
        c.readings.cake_stats_interval = Duration::ZERO;
    });
    p.run_until(Instant::from_millis(1_010));
    let t: Vec<Instant> = p.reads.iter().map(|r| r.0).collect();
    assert_eq!(
        t,
        (0..=5)
            .map(|k| Instant::from_millis(k * 200))
            .collect::<Vec<_>>()
    );
    assert!(p.reads.iter().all(|(_, r)| !r.cake_stats));
    assert!(p.agent.throughput(Direction::Down) > mbit(50.0));
}

#[test]
fn shutdown_applies_the_safe_rates_past_the_limiter() {
    let mut p = Pair::new(three_honest(), purple(), |c| {
        c.actuator.min_interval = Duration::from_secs(60);
    });
    p.run_until(Instant::from_secs(1));
    p.agent.handle_shutdown(p.now);
    p.drain(p.now);
    let safe: Vec<_> = p
        .events
        .iter()
        .filter_map(|(_, e)| match e {
            Event::SafeRate { dir, rate, error } => Some((*dir, *rate, error.clone())),
            _ => None,
        })
        .collect();
    let cfg = p.agent.config().controller.safe;
    assert_eq!(
        safe,
        vec![
            (Direction::Down, cfg.down, None),
            (Direction::Up, cfg.up, None)
        ]
    );
    assert_eq!(p.agent.rate_in_force(Direction::Up), Some(cfg.up));
}

#[test]
fn silent_active_reflector_is_rotated_for_a_spare_by_the_pools_rule() {
    let refl = vec![ts(1, 0, Fault::Silent), ts(2, 0, Fault::None)];
    let mut p = Pair::new(refl, purple(), |c| {
        c.probe.active = 1;
        c.probe.min_interval = Duration::ZERO;
        c.probe.timeout = Duration::from_millis(50);
        c.probe.rate_hz = 50.0;
        // Alone, its losses cannot be told from an outage: silence is the rule that kills it.
        c.controller.reflectors.dead_after = Duration::from_millis(300);
    });
    p.run_until(Instant::from_secs(1));
    let rot: Vec<_> = p
        .events
        .iter()
        .filter(|(_, e)| matches!(e, Event::Rotated { .. }))
        .collect();
    assert_eq!(rot.len(), 1);
    let st: Vec<_> = p.agent.reflectors().collect();
    assert!(st[0].active && st[0].spec.addr == addr(2) && st[0].stats.answered > 10);
    assert!(!st[1].active && st[1].stats.lost >= 3);
    // Fell back to echo first (never answered type 13), then rotated: the fallback's losses
    // did not count twice.
    assert!(p
        .events
        .iter()
        .any(|(_, e)| matches!(e, Event::FallbackToEcho { .. })));
}

#[test]
fn same_inputs_same_outputs() {
    let run = || {
        let mut p = Pair::new(three_honest(), purple(), |c| c.log.every_step = true);
        p.link.cap = cap_drop;
        p.run_until(Instant::from_secs(15));
        p.events
    };
    assert_eq!(run(), run());
}

#[test]
fn probes_lost_in_a_link_outage_are_not_offences_but_a_silent_reflector_is_dead() {
    let mut refl = three_honest();
    refl[2].fault = Fault::Silent;
    let mut p = Pair::new(refl, purple(), |c| c.log.every_step = true);
    p.outage = Some((Instant::from_secs(5), Instant::from_secs(9)));
    p.run_until(Instant::from_secs(12));
    let st: Vec<_> = p.agent.reflectors().collect();
    let health = |i: usize| p.agent.engine().pool().health(st[i].id, p.now);
    // The outage cost every reflector probes, but the two honest ones are good again right
    // after it (one offence at most each: a probe in flight at its onset).
    assert!(st[0].stats.lost >= 10 && st[1].stats.lost >= 10, "{st:?}");
    assert_eq!(
        (health(0), health(1)),
        (Some(Health::Good), Some(Health::Good))
    );
    // The silent one lost its probes while the others answered: dead.
    assert_eq!(health(2), Some(Health::Dead));
    // Signal within a second of the outage's end, not after the 60 s offence window.
    let back = p
        .decisions()
        .find(|d| d.0 > Instant::from_secs(9) && d.1.delay_ms.is_some())
        .map(|d| d.0);
    assert!(back.is_some_and(|t| t < Instant::from_secs(10)), "{back:?}");
    let last = p.decisions().last().expect("decisions");
    assert!(
        !matches!(last.1.reason, Reason::NoSignal { .. }),
        "{:?}",
        last.1.reason
    );
}

#[test]
fn a_reflector_that_drops_probes_on_a_clean_path_is_dead_by_three_offences() {
    let mut refl = three_honest();
    refl[0].fault = Fault::DropOneIn(5);
    let mut p = Pair::new(refl, purple(), |_| {});
    p.run_until(Instant::from_secs(10));
    let st: Vec<_> = p.agent.reflectors().collect();
    assert!(
        st[0].stats.lost >= 3 && st[0].stats.answered > 20,
        "{:?}",
        st[0]
    );
    let h = |i: usize| p.agent.engine().pool().health(st[i].id, p.now);
    // It answers, but it lost three probes in 60 s while the others answered theirs.
    assert_eq!(h(0), Some(Health::Dead));
    assert_eq!((h(1), h(2)), (Some(Health::Good), Some(Health::Good)));
}

fn silent_three() -> Vec<FakeRefl> {
    (1..=3).map(|i| ts(i, 0, Fault::Silent)).collect()
}

fn sources(p: &Pair) -> Vec<(Instant, DelaySource, DelayInForce, DelayInForce)> {
    p.events
        .iter()
        .filter_map(|(t, e)| match e {
            Event::DelaySource {
                configured,
                down,
                up,
            } => Some((*t, *configured, *down, *up)),
            _ => None,
        })
        .collect()
}

#[test]
fn with_every_reflector_silent_the_passive_signal_keeps_control() {
    // The reflectors never answer (ICMP blocked); the passive feed reports the link's queue.
    let mut p = Pair::new(silent_three(), purple(), |c| c.log.every_step = true);
    p.passive = true;
    p.link.cap = cap_drop;
    p.run_until(Instant::from_secs(30));
    let rate_at = |t: f64| {
        p.decisions()
            .filter(|d| d.0.as_secs_f64() <= t)
            .last()
            .map_or(0.0, |d| d.1.rate.bytes_per_s_f64())
            * 8e-6
    };
    let (before, during, after) = (rate_at(9.9), rate_at(14.0), rate_at(29.9));
    assert!(before > 50.0 && before < 105.0, "before {before}");
    assert!(during <= 42.0, "during the drop {during}");
    assert!(after > 70.0, "after {after}");
    assert!(
        p.decisions()
            .all(|d| !matches!(d.1.reason, Reason::NoSignal { .. })),
        "never at the safe rate for lack of a signal"
    );
    assert!(p
        .decisions()
        .skip(5)
        .all(|d| d.1.source == DelayInForce::Passive));
    // The log says which source is in force, once (the reflectors never answered).
    let s = sources(&p);
    assert_eq!(s.len(), 1, "{s:?}");
    assert_eq!(s[0].1, DelaySource::Both);
    assert_eq!(
        (s[0].2, s[0].3),
        (DelayInForce::Passive, DelayInForce::Passive)
    );

    // Without the passive feed the same silence ends at the safe rate.
    let mut p = Pair::new(silent_three(), purple(), |c| c.log.every_step = true);
    p.run_until(Instant::from_secs(5));
    assert!(p
        .decisions()
        .last()
        .is_some_and(|d| matches!(d.1.reason, Reason::NoSignal { .. })));
}

#[test]
fn the_log_records_when_the_reflectors_fall_silent_and_the_passive_signal_takes_over() {
    // Honest reflectors answering until 10 s, then blocked (an outage of the replies only).
    let mut p = Pair::new(three_honest(), purple(), |_| {});
    p.passive = true;
    p.outage = Some((Instant::from_secs(10), Instant::MAX));
    p.run_until(Instant::from_secs(20));
    let s: Vec<_> = sources(&p)
        .iter()
        .map(|x| (x.0.as_secs_f64(), x.2))
        .collect();
    // At the first step no reply is back yet; both from the first replies on; the passive
    // estimate alone once the pool's freshness (1 s) ran out and the change held a second.
    assert_eq!(s.len(), 3, "{s:?}");
    assert_eq!((s[0].0, s[0].1), (0.0, DelayInForce::Passive));
    assert_eq!(s[1].1, DelayInForce::Both);
    assert!(s[1].0 < 1.5, "{s:?}");
    assert_eq!(s[2].1, DelayInForce::Passive);
    assert!((11.0..=12.5).contains(&s[2].0), "{s:?}");
}

#[test]
fn passive_alone_sends_no_probe_and_needs_no_reflector() {
    let mut p = Pair::new(Vec::new(), purple(), |c| {
        c.controller.delay_source = DelaySource::Passive;
        c.log.every_step = true;
    });
    p.passive = true;
    p.run_until(Instant::from_secs(5));
    assert_eq!(p.agent.reflectors().count(), 0);
    assert!(p.agent.stats().steps >= 90, "{:?}", p.agent.stats());
    assert!(p
        .decisions()
        .last()
        .is_some_and(|d| d.1.passive_ms.is_some()));
    assert_eq!(sources(&p)[0].1, DelaySource::Passive);
    // Reflectors may not be empty with the probes in use; the error says so.
    let cfg = AgentConfig::new(Config::default(), Vec::new(), ANCHOR);
    let e = Agent::new(cfg, purple(), Instant::ZERO).unwrap_err();
    assert_eq!(e.option, "probe.reflectors");
    assert!(e.accepted.contains("passive"), "{e}");
}

#[test]
fn probes_and_steps_of_equal_periods_share_wake_ups_through_lateness_and_a_stall() {
    // A shell that calls in 3 ms after making the agent, wakes 0.7 ms late every time, and
    // stalls for 333 ms once: 20 probes/s and PURPLE's 50 ms step still need one wake-up each.
    let specs: Vec<ReflectorSpec> = (1..=6).map(|i| ts(i, 0, Fault::None).spec).collect();
    let cfg = AgentConfig::new(Config::default(), specs, ANCHOR);
    let mut a = Agent::new(cfg, purple(), Instant::ZERO).expect("valid");
    let mut now = Instant::from_nanos(3_000_000);
    let (mut wakes, mut probes) = (0u32, 0u32);
    while now < Instant::from_secs(10) {
        a.handle_timeout(now);
        wakes += 1;
        while a.poll_transmit().is_some() {
            probes += 1;
        }
        while let Some(s) = a.poll_rate() {
            a.handle_rate_applied(now, s, Ok::<(), String>(()));
        }
        while a.poll_event().is_some() {}
        let late = if wakes == 100 { 333_000_000 } else { 700_000 };
        now = a.poll_timeout().max(now) + Duration::from_nanos(late);
    }
    let steps = a.stats().steps as u32;
    // 10 s at 20/s, less the slots the stall skipped (a burst of 4 probes makes up some).
    assert!((190..=200).contains(&steps), "{steps} steps");
    assert!((190..=200).contains(&probes), "{probes} probes");
    assert!(
        wakes <= steps + 2,
        "{wakes} wake-ups for {steps} steps and {probes} probes"
    );
}

/// A PURPLE agent (download 5-150 Mbit/s, upload 2-50) whose download's delivery is read
/// beside CAKE's sent bytes ([`ReadingParams::delivered`]).
fn delivered_agent() -> Agent<Dyn> {
    let cc = Config::with_range(
        PerDir::new(mbit(5.0), mbit(2.0)),
        PerDir::new(mbit(150.0), mbit(50.0)),
    );
    let mut cfg = AgentConfig::new(cc, three_honest().iter().map(|r| r.spec).collect(), ANCHOR);
    cfg.readings.delivered.down = true;
    Agent::new(cfg, purple(), Instant::ZERO).expect("valid config")
}

/// An agent whose download reads a delivered-bytes counter beside CAKE's sent bytes, fed by
/// hand: `(delivered, sent)` cumulative bytes at 0, 50 and 100 ms, each direction's reads made
/// at one instant per step as a shell makes them.
fn delivered_beside(steps: &[(Option<u64>, u64)], delivered_at_step: bool) -> Vec<Rate> {
    let mut a = delivered_agent();
    let mut out = Vec::new();
    for (k, &(delivered, sent)) in steps.iter().enumerate() {
        let t = Instant::from_millis(50 * k as u64);
        let r = a.reads_due(t);
        assert!(r.delivered.down && !r.delivered.up, "{r:?}");
        // Made a microsecond early: not the same reading as the throughput's.
        let at = if delivered_at_step {
            t
        } else {
            Instant::from_nanos(t.as_nanos().saturating_sub(1_000))
        };
        a.handle_delivered(at, Direction::Down, delivered);
        let cake = |b: u64| CakeCounters {
            sent_bytes: Some(b),
            ..CakeCounters::default()
        };
        let st = PerDir::new(Some(cake(sent)), Some(cake(0)));
        a.handle_cake_stats(t, Ok::<_, std::convert::Infallible>(st));
        a.handle_timeout(t);
        out.push(a.throughput(Direction::Down));
    }
    out
}

#[test]
fn the_links_delivery_above_cakes_sent_bytes_is_the_throughput_and_below_it_is_not() {
    // 50 ms steps: 625,000 bytes is 100 Mbit/s.
    let got = delivered_beside(
        &[
            (Some(0), 0),
            // The link delivered 120 Mbit/s while CAKE sent 100: the delivery counts.
            (Some(750_000), 625_000),
            // The link delivered 80 while CAKE sent 100 (draining its backlog): CAKE's counts.
            (Some(1_250_000), 1_250_000),
        ],
        true,
    );
    assert_eq!(got[1], Rate::from_bytes_per_s(15_000_000));
    assert_eq!(got[2], Rate::from_bytes_per_s(12_500_000));
}

#[test]
fn a_failed_or_stale_delivered_reading_leaves_cakes_sent_bytes_alone() {
    let failed = delivered_beside(
        &[(Some(0), 0), (None, 625_000), (Some(2_000_000), 1_250_000)],
        true,
    );
    assert_eq!(failed[1], Rate::from_bytes_per_s(12_500_000));
    // After a failed read the meter starts again: no rate from it at the next step.
    assert_eq!(failed[2], Rate::from_bytes_per_s(12_500_000));
    let stale = delivered_beside(&[(Some(0), 0), (Some(750_000), 625_000)], false);
    assert_eq!(stale[1], Rate::from_bytes_per_s(12_500_000));
}

/// The same agent fed by a shaper that reports its arrivals (`purple bridge`'s
/// `rx_wire_bytes`): `(arrived, sent)` cumulative bytes per 50 ms step. Returns, per step,
/// whether the agent asked for the delivered-bytes counter and the download's throughput.
fn arrivals_beside(steps: &[(Option<u64>, u64)]) -> Vec<(bool, Rate)> {
    let mut a = delivered_agent();
    let mut out = Vec::new();
    for (k, &(arrived, sent)) in steps.iter().enumerate() {
        let t = Instant::from_millis(50 * k as u64);
        let r = a.reads_due(t);
        assert!(r.cake_stats && !r.delivered.up, "{r:?}");
        let st = PerDir::new(
            Some(CakeCounters {
                sent_bytes: Some(sent),
                arrived_bytes: arrived,
                ..CakeCounters::default()
            }),
            // The upload reports arrivals too, but its delivery is not read: ignored.
            Some(CakeCounters {
                sent_bytes: Some(0),
                arrived_bytes: Some(10_000_000 * k as u64),
                ..CakeCounters::default()
            }),
        );
        a.handle_cake_stats(t, Ok::<_, std::convert::Infallible>(st));
        a.handle_timeout(t);
        // The upload's throughput is its sent bytes alone (none), whatever arrived.
        assert_eq!(a.throughput(Direction::Up), Rate::ZERO, "step {k}");
        out.push((r.delivered.down, a.throughput(Direction::Down)));
    }
    out
}

#[test]
fn a_shaper_that_reports_its_arrivals_replaces_the_delivered_counter() {
    // 625,000 bytes per 50 ms is 100 Mbit/s.
    let got = arrivals_beside(&[
        (Some(0), 0),
        // 120 Mbit/s arrived while CAKE sent 100: the arrivals count, and from now on no
        // counter is asked for.
        (Some(750_000), 625_000),
        // 80 arrived while CAKE sent 100 (draining its backlog): CAKE's sent bytes count.
        (Some(1_250_000), 1_250_000),
        // The shaper stops reporting arrivals: CAKE's sent bytes alone, and the counter is
        // asked for again from the next step.
        (None, 1_875_000),
        (None, 2_500_000),
    ]);
    let asked: Vec<bool> = got.iter().map(|g| g.0).collect();
    assert_eq!(asked, [true, false, false, false, true]);
    assert_eq!(got[1].1, Rate::from_bytes_per_s(15_000_000));
    assert_eq!(got[2].1, Rate::from_bytes_per_s(12_500_000));
    assert_eq!(got[3].1, Rate::from_bytes_per_s(12_500_000));
}
