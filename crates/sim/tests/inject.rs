//! Driving the simulator from outside: [`Sim::inject`] sends a frame from an application's host
//! now (counted in its flow), [`Sim::app_as_mut`] lets the driver drain what an application
//! received, and ICMP timestamp messages (types 13/14) reach the application bound to their
//! identifier, which answers like a host.
#![allow(clippy::unwrap_used)]

use qdisc::packet::FrameSpec;
use qdisc::{Duration, Instant, Packet};
use sim::{Application, LinkConfig, Outbox, Sim};
use std::net::IpAddr;

const ETH: usize = 14;
const ICMP: usize = ETH + 20;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn checksum(b: &[u8]) -> u16 {
    let mut s: u32 = b
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum();
    while s >> 16 != 0 {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

/// An ICMP timestamp message of `kind` from `src` to `dst`, identifier `id`, stamps `ts`.
fn timestamp(src: &str, dst: &str, kind: u8, id: u16, ts: [u32; 3]) -> Packet {
    let mut p = FrameSpec::icmp_echo(ip(src), ip(dst), id, 1)
        .with_payload(12)
        .packet();
    let m = &mut p.data[ICMP..ICMP + 20];
    m[0] = kind;
    m[2..4].copy_from_slice(&[0, 0]);
    for (k, v) in ts.iter().enumerate() {
        m[8 + 4 * k..12 + 4 * k].copy_from_slice(&v.to_be_bytes());
    }
    let c = checksum(m);
    m[2..4].copy_from_slice(&c.to_be_bytes());
    p
}

/// Records what it receives: (arrival, ICMP type, the three stamps).
#[derive(Debug, Default)]
struct Mailbox {
    got: Vec<(Instant, u8, [u32; 3])>,
}

impl Application for Mailbox {
    fn start(&mut self, _: Instant, _: &mut Outbox) {}
    fn on_packet(&mut self, now: Instant, pkt: &Packet, _: &mut Outbox) {
        let m = &pkt.data[ICMP..];
        let be = |i: usize| u32::from_be_bytes([m[i], m[i + 1], m[i + 2], m[i + 3]]);
        self.got.push((now, m[0], [be(8), be(12), be(16)]));
    }
    fn on_timer(&mut self, _: Instant, _: &mut Outbox) {}
    fn as_any_mut(&mut self) -> Option<&mut dyn std::any::Any> {
        Some(self)
    }
}

/// Answers a timestamp request with its receive time (ms) in both stamps.
#[derive(Debug)]
struct Host {
    addr: &'static str,
}

impl Application for Host {
    fn start(&mut self, _: Instant, _: &mut Outbox) {}
    fn on_packet(&mut self, now: Instant, pkt: &Packet, out: &mut Outbox) {
        let m = &pkt.data[ICMP..];
        if m[0] != 13 {
            return;
        }
        let src = IpAddr::from([pkt.data[26], pkt.data[27], pkt.data[28], pkt.data[29]]);
        let id = u16::from_be_bytes([m[4], m[5]]);
        let orig = u32::from_be_bytes([m[8], m[9], m[10], m[11]]);
        let ms = (now.as_nanos() / 1_000_000) as u32;
        out.send(timestamp(
            self.addr,
            &src.to_string(),
            14,
            id,
            [orig, ms, ms],
        ));
    }
    fn on_timer(&mut self, _: Instant, _: &mut Outbox) {}
}

#[test]
fn an_injected_timestamp_request_is_answered_by_the_app_bound_to_its_identifier() {
    let mut s = Sim::new(1);
    let a = s.add_node(&[ip("10.0.0.1")]);
    let b = s.add_node(&[ip("10.0.0.2")]);
    let rate = 125_000_000; // 1 Gbit/s
    s.add_link(a, b, LinkConfig::fixed(rate, Duration::from_millis(10)));
    s.add_link(b, a, LinkConfig::fixed(rate, Duration::from_millis(10)));
    s.compute_routes();
    let mb = s.add_app(a, 0x5055, Instant::ZERO, Box::new(Mailbox::default()));
    s.add_app(
        b,
        0x5055,
        Instant::ZERO,
        Box::new(Host { addr: "10.0.0.2" }),
    );
    s.run_until(Instant::from_millis(5));
    let req = timestamp("10.0.0.1", "10.0.0.2", 13, 0x5055, [7, 0, 0]);
    let len = req.len();
    assert!(s.inject(mb, req));
    assert!(!s.inject(99, Packet::new(vec![0; 60])), "unknown app");
    s.run_until(Instant::from_millis(100));
    let got = std::mem::take(&mut s.app_as_mut::<Mailbox>(mb).unwrap().got);
    // One hop each way: 10 ms plus the 54-byte frame's serialisation at 1 Gbit/s (432 ns).
    let ser = (u64::from(len) * 1_000_000_000).div_ceil(rate);
    let hop = Duration::from_nanos(10_000_000 + ser);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].0, Instant::from_millis(5) + hop + hop);
    assert_eq!(got[0].1, 14);
    assert_eq!(got[0].2, [7, 15, 15], "received at 15.0004 ms: 15 ms");
    assert!(
        s.app_as_mut::<Mailbox>(mb).unwrap().got.is_empty(),
        "drained"
    );
    assert!(
        s.app_as_mut::<Host>(1).is_none(),
        "Host does not expose itself"
    );
    let f = s.flow(mb).unwrap();
    assert_eq!((f.sent_packets, f.sent_bytes), (1, u64::from(len)));
}
