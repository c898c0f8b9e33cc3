//! Operation sequences on a qdisc and the accounting invariants checked after every operation.
//! Shared by the property test (`tests/invariants.rs`) and the `qdisc_ops` fuzz target (which
//! includes this file by path), so both check exactly the same things.
#![allow(dead_code)]

use cake::AnyQdisc;
use qdisc::packet::{FlowTuple, FrameSpec, Gso, GsoKind};
use qdisc::{Counter, Dequeue, DropReason, Dropped, Duration, Instant, Packet, Qdisc};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// What kind of frame to build.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameKind {
    /// TCP over IPv4/IPv6.
    Tcp,
    /// UDP over IPv4/IPv6.
    Udp,
    /// ICMP echo.
    Icmp,
    /// ARP request.
    Arp,
    /// Random bytes.
    Garbage,
}

/// A frame and its metadata, described compactly enough to generate.
#[derive(Clone, Debug)]
pub struct PktSpec {
    pub kind: FrameKind,
    pub v6: bool,
    pub vlan: Option<u16>,
    pub src_host: u8,
    pub dst_host: u8,
    pub sport: u16,
    pub dport: u16,
    pub tos: u8,
    pub tcp_flags: u16,
    pub seq: u32,
    pub ack: u32,
    pub tcp_options: Vec<u8>,
    pub payload: u16,
    /// Cut the frame to this many bytes (if shorter).
    pub truncate: Option<u16>,
    pub garbage: Vec<u8>,
    pub mark: u32,
    pub priority: u32,
    /// GSO kind (0 TCPv4, 1 TCPv6, 2 UDP) and size.
    pub gso: Option<(u8, u16)>,
    pub pad: u16,
    pub nat: Option<(u8, u16)>,
}

fn addr(v6: bool, host: u8) -> IpAddr {
    if v6 {
        IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, u16::from(host)))
    } else {
        IpAddr::V4(Ipv4Addr::new(10, 0, 0, host))
    }
}

impl PktSpec {
    /// Builds the packet.
    pub fn build(&self) -> Packet {
        let (src, dst) = (addr(self.v6, self.src_host), addr(self.v6, self.dst_host));
        let payload = usize::from(self.payload);
        let mut data = match self.kind {
            FrameKind::Tcp => {
                let mut f = FrameSpec::tcp(src, dst, self.sport, self.dport)
                    .with_tcp_flags(self.tcp_flags)
                    .with_seq_ack(self.seq, self.ack)
                    .with_tcp_options(self.tcp_options.clone())
                    .with_tos(self.tos)
                    .with_payload(payload);
                if let Some(v) = self.vlan {
                    f = f.with_vlan(v);
                }
                f.build()
            }
            FrameKind::Udp => {
                let mut f = FrameSpec::udp(src, dst, self.sport, self.dport)
                    .with_tos(self.tos)
                    .with_payload(payload);
                if let Some(v) = self.vlan {
                    f = f.with_vlan(v);
                }
                f.build()
            }
            FrameKind::Icmp => FrameSpec::icmp_echo(src, dst, self.sport, self.dport)
                .with_tos(self.tos)
                .with_payload(payload)
                .build(),
            FrameKind::Arp => {
                let mut d = vec![0xFF; 6];
                d.extend_from_slice(&[2, 0, 0, 0, 0, self.src_host]);
                d.extend_from_slice(&[0x08, 0x06, 0, 1, 0x08, 0, 6, 4, 0, 1]);
                d.extend_from_slice(&[2, 0, 0, 0, 0, self.src_host, 10, 0, 0, self.src_host]);
                d.extend_from_slice(&[0; 6]);
                d.extend_from_slice(&[10, 0, 0, self.dst_host]);
                d
            }
            FrameKind::Garbage => self.garbage.clone(),
        };
        if let Some(t) = self.truncate {
            data.truncate(usize::from(t));
        }
        let mut p = Packet::new(data);
        p.meta.mark = self.mark;
        p.meta.priority = self.priority;
        p.meta.pad = u32::from(self.pad);
        p.meta.gso = self.gso.map(|(k, size)| Gso {
            kind: match k % 3 {
                0 => GsoKind::TcpV4,
                1 => GsoKind::TcpV6,
                _ => GsoKind::Udp,
            },
            size,
        });
        p.meta.nat = self.nat.map(|(h, port)| FlowTuple {
            src: [h; 16],
            dst: [!h; 16],
            proto: 6,
            src_port: port,
            dst_port: 80,
        });
        p
    }
}

/// One operation.
#[derive(Clone, Debug)]
pub enum Op {
    /// Enqueue a packet at the current time.
    Enqueue(PktSpec),
    /// Advance time by this many nanoseconds, then dequeue once.
    Dequeue(u32),
    /// Change the shaped rate (bytes/s, None = unlimited).
    SetRate(Option<u64>),
}

/// Runs operations on a qdisc and checks the invariants after each.
#[derive(Debug)]
pub struct Harness {
    pub q: AnyQdisc,
    pub now: Instant,
    drops: Vec<Dropped>,
    dropped: [Counter; 4],
    dequeued: Counter,
}

impl Harness {
    /// A harness around `q` at time 1 s.
    pub fn new(q: AnyQdisc) -> Self {
        Harness {
            q,
            now: Instant::from_secs(1),
            drops: Vec::new(),
            dropped: [Counter::default(); 4],
            dequeued: Counter::default(),
        }
    }

    /// Applies `op` and checks every invariant; the error says which one broke.
    pub fn apply(&mut self, op: &Op) -> Result<(), String> {
        self.drops.clear();
        match op {
            Op::Enqueue(spec) => {
                let pkt = spec.build();
                self.q.enqueue(self.now, pkt, &mut self.drops);
                if let Some(c) = self.q.as_cake() {
                    let limit = c.cake_stats().memory_limit;
                    if c.memory_used() > limit {
                        return Err(format!("memory {} > limit {limit}", c.memory_used()));
                    }
                }
            }
            Op::Dequeue(dt) => {
                self.now += Duration::from_nanos(u64::from(*dt));
                if let Dequeue::Packet(p) = self.q.dequeue(self.now, &mut self.drops) {
                    self.dequeued.add(p.len());
                }
            }
            Op::SetRate(r) => {
                let _ = self.q.set_rate(r.map(qdisc::Rate::from_bytes_per_s));
            }
        }
        for d in &self.drops {
            self.dropped[d.reason as usize].add(d.packet.len());
        }
        self.check()
    }

    /// The invariants.
    pub fn check(&self) -> Result<(), String> {
        let st = self.q.stats();
        if !st.is_balanced() {
            return Err(format!("unbalanced: {st:?}"));
        }
        for r in DropReason::ALL {
            if st.dropped(r) != self.dropped[r as usize] {
                return Err(format!(
                    "{} drops: counter {:?}, returned {:?}",
                    r.name(),
                    st.dropped(r),
                    self.dropped[r as usize]
                ));
            }
        }
        if st.dequeued != self.dequeued {
            return Err(format!(
                "dequeued: counter {:?}, returned {:?}",
                st.dequeued, self.dequeued
            ));
        }
        if self.q.backlog() != st.backlog {
            return Err("backlog() disagrees with stats()".into());
        }
        if st.backlog.packets == 0 && st.backlog.bytes != 0 {
            return Err(format!("empty queue holds bytes: {st:?}"));
        }
        if let Some(c) = self.q.as_cake() {
            // Autorate-ingress's estimate is an EWMA, starting at the configured rate, of
            // samples each at most the bytes enqueued so far per nanosecond (its window is at
            // least 1 ns long), so it can never exceed the larger of the two.
            let bound = c
                .config()
                .rate_bps
                .max(st.enqueued.bytes.saturating_mul(1_000_000_000));
            let est = c.cake_stats().capacity_estimate;
            if est > bound {
                return Err(format!(
                    "capacity estimate {est} B/s above {bound} (enqueued {:?})",
                    st.enqueued
                ));
            }
        }
        Ok(())
    }

    /// Dequeues until empty (advancing time to each "not before"), checking as it goes.
    pub fn drain(&mut self) -> Result<(), String> {
        // Each call either sends a packet, drops some, or moves time to a "not before" after
        // which the next call sends: twice the backlog plus slack bounds a correct qdisc.
        let bound = self.q.stats().backlog.packets.saturating_mul(2) + 10_000;
        for _ in 0..bound {
            self.drops.clear();
            match self.q.dequeue(self.now, &mut self.drops) {
                Dequeue::Packet(p) => self.dequeued.add(p.len()),
                Dequeue::NotBefore(t) => {
                    if t <= self.now {
                        return Err(format!("not-before {t:?} is not after now {:?}", self.now));
                    }
                    self.now = t;
                }
                Dequeue::Empty => {
                    for d in &self.drops {
                        self.dropped[d.reason as usize].add(d.packet.len());
                    }
                    self.check()?;
                    let st = self.q.stats();
                    return if st.backlog.packets == 0 {
                        Ok(())
                    } else {
                        Err(format!("Empty with backlog {:?}", st.backlog))
                    };
                }
            }
            for d in &self.drops {
                self.dropped[d.reason as usize].add(d.packet.len());
            }
            self.check()?;
        }
        Err("drain did not finish".into())
    }
}
