//! Untrusted input sequences for the agent and the invariants checked after every one. Anyone
//! on the path (or anywhere, for a router's public address) can send datagrams to the daemon's
//! probe sockets, and the kernel's counters and CAKE's statistics can wrap, reset or fail; the
//! agent must take any of it without panicking, keep every rate it asks for within the
//! configured range, and never ask to be woken at a time already past. Shared by the property
//! test (`tests/agent_inputs.rs`) and the `agent_inputs` fuzz target (which includes this file
//! by path), so both check exactly the same things.
#![allow(dead_code)]

use controller::agent::{Agent, AgentConfig, CakeCounters, Event, ReflectorSpec, SocketKind};
use controller::agent::{Method, RadioReading};
use controller::passive::PassiveReading;
use controller::wire::{icmp, udp, WallAnchor};
use controller::{Config, Direction, Duration, Instant, LawKind, LawParams, PerDir, Rate};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// Where a datagram comes from.
#[derive(Clone, Copy, Debug)]
pub enum Source {
    /// Reflector `i % REFLECTORS` (its address and, for UDP, its port).
    Reflector(u8),
    /// An address the agent never probed.
    Stranger(u8),
    /// A reflector's address with another port.
    WrongPort(u8, u16),
}

/// What a datagram holds.
#[derive(Clone, Debug)]
pub enum Payload {
    /// Any bytes.
    Raw(Vec<u8>),
    /// A well-formed reply to the `back`-th most recent probe sent to that source (if any),
    /// its stamps shifted by `shift` (ms for ICMP, µs for UDP), then with `edits` applied
    /// (position modulo the length, byte XORed), optionally behind a 20-byte IPv4 header as
    /// raw ICMP sockets deliver replies.
    Reply {
        back: u8,
        shift: i32,
        edits: Vec<(u16, u8)>,
        ip_header: bool,
    },
}

/// CAKE's counters as one statistics read reports them, both directions alike: backlog bytes,
/// drops, ECN marks, sent bytes and arrived bytes.
pub type StatsOp = (u64, u64, u64, Option<u64>, Option<u64>);

/// One input.
#[derive(Clone, Debug)]
pub enum Op {
    /// Time passes (µs): readings due are answered, then the timeout is handled.
    Advance(u32),
    /// A datagram arrives now.
    Datagram {
        source: Source,
        socket: SocketKind,
        payload: Payload,
    },
    /// The next counter readings of a direction add this many bytes (wrapping: a counter reset
    /// or a 32-bit wrap), or fail.
    Counter(bool, Option<u64>),
    /// The next readings of the download's delivered-bytes counter (read beside CAKE's sent
    /// bytes) add this many bytes (wrapping), or fail.
    Delivered(Option<u64>),
    /// The next CAKE statistics read: these counters, or an error.
    Stats(Option<StatsOp>),
    /// A radio reading (the simulator's radio metrics), any values.
    Radio(bool, u64, u32, u64, u64, Option<u64>),
    /// A passive reading, any queue values.
    Passive(Option<u64>, Option<u64>, u32),
    /// A send failed for this token.
    SendFailed(u32),
    /// From now on the actuator fails (true) or works.
    ActuatorFails(bool),
}

/// Reflectors in the pool: two ICMP, two UDP.
pub const REFLECTORS: usize = 4;

/// The agent with its surroundings: a clock, the counters, the probes it sent.
pub struct Harness {
    agent: Agent<Box<dyn controller::Law + Send>>,
    now: Instant,
    specs: Vec<ReflectorSpec>,
    anchor: WallAnchor,
    counters: PerDir<Option<u64>>,
    counter_step: PerDir<Option<u64>>,
    /// The download's delivered-bytes counter and what each reading adds (`None`: it fails).
    delivered: Option<u64>,
    delivered_step: Option<u64>,
    stats: Option<StatsOp>,
    actuator_fails: bool,
    /// Probes sent per reflector, latest last (at most 8 kept).
    sent: Vec<Vec<(SocketKind, Vec<u8>)>>,
    min: PerDir<Rate>,
    max: PerDir<Rate>,
    /// Datagrams handed to the agent, and discards it reported.
    pub datagrams: u64,
    pub discards: u64,
}

fn spec(i: usize) -> ReflectorSpec {
    let ip = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1 + i as u8));
    if i < 2 {
        ReflectorSpec {
            method: if i == 0 {
                Method::Timestamp
            } else {
                Method::Echo
            },
            addr: SocketAddr::new(ip, 0),
        }
    } else {
        ReflectorSpec {
            method: Method::Udp,
            addr: SocketAddr::new(ip, udp::PORT),
        }
    }
}

impl Harness {
    /// PURPLE (`law` 0) or another registered law (`law` indexes `LawKind::ALL`), probing four
    /// reflectors, download 5..150 Mbit/s, upload 2..50.
    pub fn new(law: u8) -> Harness {
        let min = PerDir::new(Rate::from_mbit(5.0), Rate::from_mbit(2.0));
        let max = PerDir::new(Rate::from_mbit(150.0), Rate::from_mbit(50.0));
        let mut cc = Config::with_range(min, max);
        cc.base = PerDir::new(Rate::from_mbit(60.0), Rate::from_mbit(20.0));
        let specs: Vec<ReflectorSpec> = (0..REFLECTORS).map(spec).collect();
        let anchor = WallAnchor {
            at: Instant::ZERO,
            wall_us: 1_700_000_000_000_000,
        };
        let mut cfg = AgentConfig::new(cc, specs.clone(), anchor);
        cfg.probe.active = REFLECTORS;
        // The download reads the link's delivery beside its throughput, as the daemon does.
        cfg.readings.delivered = PerDir::new(true, false);
        let kinds: Vec<LawKind> = LawKind::ALL
            .iter()
            .copied()
            .filter(|k| k.runs_without_radio())
            .collect();
        let kind = kinds[usize::from(law) % kinds.len()];
        let built = kind
            .build(&LawParams::default())
            .expect("the default parameters are valid");
        let agent = Agent::new(cfg, built, Instant::ZERO).expect("a valid configuration");
        Harness {
            agent,
            now: Instant::ZERO,
            specs,
            anchor,
            counters: PerDir::both(Some(0)),
            counter_step: PerDir::both(Some(1_000_000)),
            delivered: Some(0),
            delivered_step: Some(1_200_000),
            stats: Some((30_000, 0, 0, None, None)),
            actuator_fails: false,
            sent: vec![Vec::new(); REFLECTORS],
            min,
            max,
            datagrams: 0,
            discards: 0,
        }
    }

    fn address(&self, s: Source, socket: SocketKind) -> SocketAddr {
        match s {
            Source::Reflector(i) => {
                let a = self.specs[usize::from(i) % REFLECTORS].addr;
                match socket {
                    SocketKind::Icmp => SocketAddr::new(a.ip(), 0),
                    SocketKind::Udp => SocketAddr::new(a.ip(), udp::PORT),
                }
            }
            Source::Stranger(i) => SocketAddr::new(
                IpAddr::V4(Ipv4Addr::new(203, 0, 113, i)),
                if socket == SocketKind::Udp {
                    udp::PORT
                } else {
                    0
                },
            ),
            Source::WrongPort(i, p) => {
                SocketAddr::new(self.specs[usize::from(i) % REFLECTORS].addr.ip(), p)
            }
        }
    }

    fn reply(&self, s: Source, socket: SocketKind, back: u8, shift: i32) -> Option<Vec<u8>> {
        let i = match s {
            Source::Reflector(i) | Source::WrongPort(i, _) => usize::from(i) % REFLECTORS,
            Source::Stranger(_) => return None,
        };
        let sent = &self.sent[i];
        let (kind, req) = sent
            .iter()
            .rev()
            .nth(usize::from(back) % sent.len().max(1))?;
        if *kind != socket {
            return None;
        }
        let wall_us = self.anchor.wall_us(self.now) as i64;
        match socket {
            SocketKind::Icmp => {
                let ms = ((wall_us / 1_000 + i64::from(shift)).rem_euclid(86_400_000)) as u32;
                icmp::reply_to(req, ms, ms).map(|r| r.to_vec())
            }
            SocketKind::Udp => {
                let req: &[u8; udp::REQUEST_LEN] = req.as_slice().try_into().ok()?;
                let us = (wall_us + i64::from(shift)).max(0) as u64;
                Some(udp::reply(req, us, us).to_vec())
            }
        }
    }

    /// Applies one input, then checks the invariants; the error says which failed.
    pub fn apply(&mut self, op: &Op) -> Result<(), String> {
        match op {
            Op::Advance(us) => {
                self.now += Duration::from_micros(u64::from(*us));
                self.readings();
                self.agent.handle_timeout(self.now);
            }
            Op::Datagram {
                source,
                socket,
                payload,
            } => {
                let from = self.address(*source, *socket);
                let bytes = match payload {
                    Payload::Raw(b) => b.clone(),
                    Payload::Reply {
                        back,
                        shift,
                        edits,
                        ip_header,
                    } => {
                        let Some(mut b) = self.reply(*source, *socket, *back, *shift) else {
                            return self.drain();
                        };
                        for &(at, x) in edits {
                            let n = b.len();
                            if n > 0 {
                                b[usize::from(at) % n] ^= x;
                            }
                        }
                        if *ip_header {
                            let mut h = vec![0x45, 0, 0, 0, 0, 0, 0, 0, 64, 1, 0, 0];
                            h.extend_from_slice(&[192, 0, 2, 1, 10, 0, 0, 1]);
                            h.extend_from_slice(&b);
                            b = h;
                        }
                        b
                    }
                };
                self.datagrams += 1;
                self.agent.handle_datagram(self.now, from, *socket, &bytes);
            }
            Op::Counter(down, step) => {
                let d = if *down {
                    Direction::Down
                } else {
                    Direction::Up
                };
                self.counter_step[d] = *step;
            }
            Op::Delivered(step) => self.delivered_step = *step,
            Op::Stats(s) => self.stats = *s,
            Op::Radio(down, backlog, packets, drops, sojourn_us, cap) => {
                let r = RadioReading {
                    dir: if *down {
                        Direction::Down
                    } else {
                        Direction::Up
                    },
                    backlog_bytes: *backlog,
                    backlog_packets: *packets,
                    drops: *drops,
                    sojourn: Duration::from_micros(*sojourn_us % (1 << 40)),
                    capacity: cap.map(Rate::from_bytes_per_s),
                };
                self.agent.handle_radio(self.now, r);
            }
            Op::Passive(down, up, flows) => {
                let q = |x: &Option<u64>| x.map(|n| Duration::from_micros(n % (1 << 40)));
                let r = PassiveReading {
                    queue: PerDir::new(q(down), q(up)),
                    flows: PerDir::both(*flows),
                    one_way: PerDir::both(true),
                    ..PassiveReading::default()
                };
                self.agent.handle_passive(self.now, &r);
            }
            Op::SendFailed(token) => self.agent.handle_send_failed(self.now, *token),
            Op::ActuatorFails(f) => self.actuator_fails = *f,
        }
        self.drain()
    }

    /// Answers the readings due now from the harness's counters and statistics.
    fn readings(&mut self) {
        let r = self.agent.reads_due(self.now);
        for d in Direction::ALL {
            if r.delivered[d] {
                let v = match (self.delivered, self.delivered_step) {
                    (Some(c), Some(s)) => Some(c.wrapping_add(s)),
                    _ => None,
                };
                if v.is_some() {
                    self.delivered = v;
                }
                self.agent.handle_delivered(self.now, d, v);
            }
        }
        for d in Direction::ALL {
            if r.counters[d] {
                let v = match (self.counters[d], self.counter_step[d]) {
                    (Some(c), Some(s)) => Some(c.wrapping_add(s)),
                    _ => None,
                };
                if v.is_some() {
                    self.counters[d] = v;
                }
                self.agent.handle_counter(self.now, d, v);
            }
        }
        if r.cake_stats {
            let read = match self.stats {
                Some((backlog, drops, marks, sent, arrived)) => {
                    Ok(PerDir::both(Some(CakeCounters {
                        backlog_bytes: backlog,
                        drops,
                        ecn_marks: marks,
                        sent_bytes: sent,
                        arrived_bytes: arrived,
                    })))
                }
                None => Err("no statistics"),
            };
            self.agent.handle_cake_stats(self.now, read);
        }
    }

    /// Takes every output and checks the invariants.
    fn drain(&mut self) -> Result<(), String> {
        self.outputs()?;
        // Woken at its deadline with its readings answered, the agent moves the deadline on:
        // it never asks for a time already handled.
        let mut tries = 0;
        while self.agent.poll_timeout() <= self.now {
            tries += 1;
            if tries > 3 {
                return Err(format!(
                    "asks to be woken at {:?}, not after now {:?}, after handling it",
                    self.agent.poll_timeout(),
                    self.now
                ));
            }
            self.readings();
            self.agent.handle_timeout(self.now);
            self.outputs()?;
        }
        Ok(())
    }

    /// Takes every output: remembers the probes sent, applies the rates (checked against the
    /// range), counts the discards reported.
    fn outputs(&mut self) -> Result<(), String> {
        while let Some(tx) = self.agent.poll_transmit() {
            let Some(i) = self.specs.iter().position(|s| s.addr.ip() == tx.to.ip()) else {
                return Err(format!("a probe to {} (not a reflector)", tx.to));
            };
            let q = &mut self.sent[i];
            if q.len() == 8 {
                q.remove(0);
            }
            q.push((tx.socket, tx.bytes().to_vec()));
        }
        while let Some(s) = self.agent.poll_rate() {
            if s.rate < self.min[s.dir] || s.rate > self.max[s.dir] {
                return Err(format!(
                    "{:?} rate {} outside {}..={}",
                    s.dir, s.rate, self.min[s.dir], self.max[s.dir]
                ));
            }
            let res = if self.actuator_fails {
                Err("EPERM")
            } else {
                Ok(())
            };
            self.agent.handle_rate_applied(self.now, s, res);
        }
        while let Some((t, e)) = self.agent.poll_event() {
            if t > self.now {
                return Err(format!("an event stamped {t:?} after now {:?}", self.now));
            }
            if let Event::Discarded { count, .. } = e {
                self.discards += count;
            }
        }
        if self.discards > self.datagrams {
            return Err(format!(
                "{} discards reported for {} datagrams",
                self.discards, self.datagrams
            ));
        }
        Ok(())
    }
}
