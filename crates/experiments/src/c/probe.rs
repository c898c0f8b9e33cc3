//! Probes in the closed loop, two kinds:
//!
//! - **The agent's probes** ([`AgentHost`], [`ReflectorHost`]): the bytes the
//!   `controller::agent::Agent` builds (ICMP timestamp requests by default, or our UDP
//!   protocol) travel as real frames through the simulated links, from the client to reflector
//!   hosts that answer like real hosts, from their own clocks (an offset, a step, a lie, or
//!   silence: [`RemoteClock`]). Replies come back as frames, and the loop hands their bytes and
//!   true arrival times to the agent. What the controller sees is what the daemon would see.
//! - **The measurement probes** ([`Prober`], [`Reflector`]): the experimenter's instrument,
//!   the same for every contender, controller or not: a UDP probe to each server every 100 ms
//!   whose round trip is the loaded latency the tables report. Frame layout (IPv4, no VLAN, UDP
//!   payload of [`PAYLOAD`] bytes): payload bytes 0..4 = probe sequence number (big endian),
//!   4..12 = the reflector's receive time in ns (true time).

use controller::agent::{SocketKind, Transmit};
use controller::wire::{icmp, udp, WallAnchor, NS_PER_DAY};
use qdisc::packet::FrameSpec;
use qdisc::{Duration, Instant, Packet};
use sim::{Application, Outbox};
use std::net::{IpAddr, SocketAddr};

/// UDP payload length of probes and replies.
pub const PAYLOAD: usize = 16;
/// Offset of the UDP payload in an IPv4 frame without VLAN (Ethernet 14 + IPv4 20 + UDP 8).
const OFF: usize = 42;
/// The reflector's UDP port.
pub const REFLECTOR_PORT: u16 = 7;

/// One answered probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProbeResult {
    /// Sequence number.
    pub seq: u32,
    /// When the probe left the client.
    pub sent: Instant,
    /// When the reflector received it (and sent the reply), true time.
    pub reflected: Instant,
    /// When the reply reached the client.
    pub received: Instant,
}

/// Sends a probe to one reflector every `interval` and records the answers.
#[derive(Debug, Clone)]
pub struct Prober {
    src: IpAddr,
    dst: IpAddr,
    port: u16,
    interval: Duration,
    /// Send time of every probe, indexed by sequence number.
    pub sent: Vec<Instant>,
    /// Answers, in arrival order.
    pub results: Vec<ProbeResult>,
}

impl Prober {
    /// A prober from `src` (bound to `port`) to the reflector at `dst`.
    pub fn new(src: IpAddr, dst: IpAddr, port: u16, interval: Duration) -> Self {
        Prober {
            src,
            dst,
            port,
            interval: Duration::from_nanos(interval.as_nanos().max(1)),
            sent: Vec::new(),
            results: Vec::new(),
        }
    }

    fn tick(&mut self, now: Instant, out: &mut Outbox) {
        let seq = self.sent.len() as u32;
        let mut p = FrameSpec::udp(self.src, self.dst, self.port, REFLECTOR_PORT)
            .with_payload(PAYLOAD)
            .packet();
        if let Some(b) = p.data.get_mut(OFF..OFF + 4) {
            b.copy_from_slice(&seq.to_be_bytes());
        }
        self.sent.push(now);
        out.send(p);
        out.set_timer(now.saturating_add(self.interval));
    }
}

fn read_u32(p: &Packet, at: usize) -> Option<u32> {
    let b = p.data.get(at..at + 4)?;
    Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

impl Application for Prober {
    fn start(&mut self, now: Instant, out: &mut Outbox) {
        self.tick(now, out);
    }
    fn on_packet(&mut self, now: Instant, pkt: &Packet, _out: &mut Outbox) {
        let Some(seq) = read_u32(pkt, OFF) else {
            return;
        };
        let Some(&sent) = self.sent.get(seq as usize) else {
            return;
        };
        let Some(b) = pkt.data.get(OFF + 4..OFF + 12) else {
            return;
        };
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        self.results.push(ProbeResult {
            seq,
            sent,
            reflected: Instant::from_nanos(u64::from_be_bytes(a)),
            received: now,
        });
    }
    fn on_timer(&mut self, now: Instant, out: &mut Outbox) {
        self.tick(now, out);
    }
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }
}

/// Answers every probe at once with its receive time stamped in.
#[derive(Debug, Clone)]
pub struct Reflector {
    addr: IpAddr,
}

impl Reflector {
    /// A reflector at `addr` (bind it to [`REFLECTOR_PORT`]).
    pub fn new(addr: IpAddr) -> Self {
        Reflector { addr }
    }
}

impl Application for Reflector {
    fn start(&mut self, _now: Instant, _out: &mut Outbox) {}
    fn on_packet(&mut self, now: Instant, pkt: &Packet, out: &mut Outbox) {
        // IPv4 source address at 26..30, UDP source port at 34..36.
        let (Some(ip), Some(port)) = (pkt.data.get(26..30), pkt.data.get(34..36)) else {
            return;
        };
        let src = IpAddr::from([ip[0], ip[1], ip[2], ip[3]]);
        let sport = u16::from_be_bytes([port[0], port[1]]);
        let Some(seq) = read_u32(pkt, OFF) else {
            return;
        };
        let mut r = FrameSpec::udp(self.addr, src, REFLECTOR_PORT, sport)
            .with_payload(PAYLOAD)
            .packet();
        if let Some(b) = r.data.get_mut(OFF..OFF + 12) {
            b[..4].copy_from_slice(&seq.to_be_bytes());
            b[4..].copy_from_slice(&now.as_nanos().to_be_bytes());
        }
        out.send(r);
    }
    fn on_timer(&mut self, _now: Instant, _out: &mut Outbox) {}
}

/// Ethernet header length of the simulator's frames (no VLAN).
const ETH: usize = 14;

/// The frame carrying the agent's probe `t` from `src` (UDP source port `port`): an ICMP or UDP
/// datagram whose payload is exactly `t.bytes()`.
pub fn agent_frame(src: IpAddr, port: u16, t: &Transmit) -> Packet {
    let b = t.bytes();
    let (mut p, off) = match t.socket {
        SocketKind::Icmp => (
            FrameSpec::icmp_echo(src, t.to.ip(), 0, 0)
                .with_payload(b.len().saturating_sub(8))
                .packet(),
            ETH + 20,
        ),
        SocketKind::Udp => (
            FrameSpec::udp(src, t.to.ip(), port, t.to.port())
                .with_payload(b.len())
                .packet(),
            ETH + 28,
        ),
    };
    if let Some(d) = p.data.get_mut(off..off + b.len()) {
        d.copy_from_slice(b);
    }
    p
}

/// What a frame that reached the client means to the agent: source, socket kind, and the bytes
/// its socket would return (ICMP: from the IPv4 header on, as a raw socket reads; UDP: the
/// payload). `None` for anything else.
pub fn agent_datagram(frame: &[u8]) -> Option<(SocketAddr, SocketKind, &[u8])> {
    let ip = frame.get(ETH..)?;
    if ip.first()? >> 4 != 4 {
        return None;
    }
    let ihl = usize::from(ip[0] & 0x0f) * 4;
    let src = IpAddr::from([*ip.get(12)?, *ip.get(13)?, *ip.get(14)?, *ip.get(15)?]);
    match *ip.get(9)? {
        1 => Some((SocketAddr::new(src, 0), SocketKind::Icmp, ip)),
        17 => {
            let l4 = ip.get(ihl..)?;
            let sport = u16::from_be_bytes([*l4.first()?, *l4.get(1)?]);
            Some((SocketAddr::new(src, sport), SocketKind::Udp, l4.get(8..)?))
        }
        _ => None,
    }
}

/// The client's end of the agent's probes: keeps every frame it receives, with its arrival
/// time, until the loop drains them ([`AgentHost::drain`]). Bind it to the agent's ICMP
/// identifier (which is also the UDP source port of its probes).
#[derive(Debug, Default)]
pub struct AgentHost {
    bytes: Vec<u8>,
    frames: Vec<(Instant, usize, usize)>,
}

impl AgentHost {
    /// Hands every frame received since the last call to `f` (arrival time, frame), in
    /// arrival order, and forgets them (the buffers keep their capacity).
    pub fn drain(&mut self, mut f: impl FnMut(Instant, &[u8])) {
        for &(t, a, b) in &self.frames {
            f(t, &self.bytes[a..b]);
        }
        self.frames.clear();
        self.bytes.clear();
    }
}

impl Application for AgentHost {
    fn start(&mut self, _now: Instant, _out: &mut Outbox) {}
    fn on_packet(&mut self, now: Instant, pkt: &Packet, _out: &mut Outbox) {
        let a = self.bytes.len();
        self.bytes.extend_from_slice(&pkt.data);
        self.frames.push((now, a, self.bytes.len()));
    }
    fn on_timer(&mut self, _now: Instant, _out: &mut Outbox) {}
    fn as_any_mut(&mut self) -> Option<&mut dyn std::any::Any> {
        Some(self)
    }
}

/// A reflector host's clock and faults: `wall` is true time's Unix clock (the agent's anchor);
/// the host's clock is that plus `offset_ns`, plus `step` from its instant on; from `lie.0` its
/// replies add `lie.1` ms per second since then to both one-way delays (receive stamp late,
/// transmit stamp early); from `dead_from` it answers nothing.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RemoteClock {
    /// True time's wall clock.
    pub wall: WallAnchor,
    /// The host's clock offset, ns.
    pub offset_ns: i64,
    /// A step of its clock: from this instant, by this many ns.
    pub step: Option<(Instant, i64)>,
    /// Lying from this instant, growing by this many ms per second.
    pub lie: Option<(Instant, f64)>,
    /// Silent from this instant.
    pub dead_from: Option<Instant>,
}

impl RemoteClock {
    /// The host's clock at true time `t`, ns since the epoch.
    pub fn ns(&self, t: Instant) -> i64 {
        let step = match self.step {
            Some((at, s)) if t >= at => s,
            _ => 0,
        };
        (self.wall.wall_ns(t) as i64)
            .saturating_add(self.offset_ns)
            .saturating_add(step)
    }

    fn lie_ns(&self, t: Instant) -> i64 {
        match self.lie {
            Some((from, per_s)) if t >= from => {
                (t.saturating_duration_since(from).as_secs_f64() * per_s * 1e6) as i64
            }
            _ => 0,
        }
    }
}

/// A host that answers the agent's probes like a real one: ICMP timestamp requests (bind it to
/// the agent's ICMP identifier; echo requests the simulator answers itself) and, bound to
/// [`udp::PORT`], our UDP timestamp requests, stamping from its own [`RemoteClock`].
#[derive(Debug, Clone)]
pub struct ReflectorHost {
    addr: IpAddr,
    clock: RemoteClock,
}

impl ReflectorHost {
    /// A host at `addr` with `clock`.
    pub fn new(addr: IpAddr, clock: RemoteClock) -> Self {
        ReflectorHost { addr, clock }
    }
}

impl Application for ReflectorHost {
    fn start(&mut self, _now: Instant, _out: &mut Outbox) {}
    fn on_packet(&mut self, now: Instant, pkt: &Packet, out: &mut Outbox) {
        if self.clock.dead_from.is_some_and(|t| now >= t) {
            return;
        }
        let Some((from, socket, bytes)) = agent_datagram(&pkt.data) else {
            return;
        };
        let lie = self.clock.lie_ns(now);
        let rx = self.clock.ns(now).saturating_add(lie);
        let tx = self.clock.ns(now).saturating_sub(lie);
        let reply = match socket {
            SocketKind::Icmp => {
                let ihl = usize::from(bytes[0] & 0x0f) * 4;
                let ms = |ns: i64| (ns.rem_euclid(NS_PER_DAY) / 1_000_000) as u32;
                let Some(r) = bytes
                    .get(ihl..)
                    .and_then(|m| icmp::reply_to(m, ms(rx), ms(tx)))
                else {
                    return;
                };
                let mut p = FrameSpec::icmp_echo(self.addr, from.ip(), 0, 0)
                    .with_payload(r.len() - 8)
                    .packet();
                if let Some(d) = p.data.get_mut(ETH + 20..ETH + 20 + r.len()) {
                    d.copy_from_slice(&r);
                }
                p
            }
            SocketKind::Udp => {
                let Some(q) = bytes
                    .get(..udp::REQUEST_LEN)
                    .filter(|_| udp::parse_request(bytes).is_some())
                    .and_then(|b| <[u8; udp::REQUEST_LEN]>::try_from(b).ok())
                else {
                    return;
                };
                let us = |ns: i64| (ns.max(0) / 1_000) as u64;
                let r = udp::reply(&q, us(rx), us(tx));
                let mut p = FrameSpec::udp(self.addr, from.ip(), udp::PORT, from.port())
                    .with_payload(r.len())
                    .packet();
                if let Some(d) = p.data.get_mut(ETH + 28..ETH + 28 + r.len()) {
                    d.copy_from_slice(&r);
                }
                p
            }
        };
        out.send(reply);
    }
    fn on_timer(&mut self, _now: Instant, _out: &mut Outbox) {}
}
