//! Timestamp probes for the closed loop: a UDP prober at the client and a reflector at each
//! server, together doing what ICMP timestamp requests (type 13/14) do: the reply carries the
//! reflector's receive time, so the prober learns both one-way delays.
//!
//! Frame layout (IPv4, no VLAN, UDP payload of [`PAYLOAD`] bytes): payload bytes 0..4 = probe
//! sequence number (big endian), 4..12 = the reflector's receive time in ns (its true clock:
//! the loop adds each reflector's clock offset and 1 ms resolution when it turns a result into a
//! [`controller::Sample`]).

use qdisc::packet::FrameSpec;
use qdisc::{Duration, Instant, Packet};
use sim::{Application, Outbox};
use std::net::IpAddr;

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
