//! A small event-driven bottleneck simulator for behaviour tests: sources feed one qdisc, a link
//! of fixed rate dequeues one packet every `len * 8 / rate` seconds of virtual time.
#![allow(dead_code)]

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::{IpAddr, Ipv4Addr};

use qdisc::packet::FrameSpec;
use qdisc::{Dequeue, Dropped, Instant, Packet, Qdisc};

/// ECN codepoint ECT(0).
pub const ECT0: u8 = 2;

/// A UDP frame of `size` bytes on the wire for flow `flow` (distinct 5-tuples per flow).
pub fn frame(flow: u16, size: usize, tos: u8) -> Vec<u8> {
    let src = IpAddr::V4(Ipv4Addr::new(10, 0, (flow >> 8) as u8, flow as u8));
    let dst = IpAddr::V4(Ipv4Addr::new(10, 1, 0, 1));
    let mut spec =
        FrameSpec::udp(src, dst, 10_000 + flow, 5001).with_payload(size.saturating_sub(42));
    spec.tos = tos;
    spec.build()
}

/// A packet of `flow` with the send time in its tag.
pub fn packet(template: &[u8], flow: u16, now: Instant) -> Packet {
    let mut p = Packet::new(template.to_vec());
    p.meta.tag = (u64::from(flow) << 48) | now.as_nanos();
    p
}

fn tag_flow(p: &Packet) -> usize {
    (p.meta.tag >> 48) as usize
}
fn tag_time(p: &Packet) -> Instant {
    Instant::from_nanos(p.meta.tag & ((1 << 48) - 1))
}

/// How a source sends.
#[derive(Clone, Copy, Debug)]
pub enum Kind {
    /// A window-based Reno-like source: slow start, +1 packet per window, halves on a loss or
    /// CE mark (once per window), ACKs arrive one base RTT after transmission.
    Reno { ecn: bool },
    /// An unresponsive constant-rate source, one packet every `interval_ns`.
    Cbr { interval_ns: u64 },
}

/// One source.
#[derive(Clone, Copy, Debug)]
pub struct FlowSpec {
    pub kind: Kind,
    /// Frame size in bytes.
    pub size: usize,
    /// Base round-trip time (Reno) in ns.
    pub rtt_ns: u64,
}

/// What one source saw after warm-up.
#[derive(Clone, Debug, Default)]
pub struct FlowResult {
    pub delivered_bytes: u64,
    pub sojourn_ms: Vec<f64>,
    pub losses: u64,
    pub marks: u64,
}

impl FlowResult {
    pub fn sojourn_percentile(&self, p: f64) -> f64 {
        let mut v = self.sojourn_ms.clone();
        v.sort_by(|a, b| a.total_cmp(b));
        qdisc::quantile::rounded_rank(&v, p).unwrap_or(0.0)
    }
    pub fn mean_sojourn(&self) -> f64 {
        self.sojourn_ms.iter().sum::<f64>() / self.sojourn_ms.len().max(1) as f64
    }
}

/// Jain's fairness index of `x`.
pub fn jain(x: &[f64]) -> f64 {
    let s: f64 = x.iter().sum();
    let s2: f64 = x.iter().map(|v| v * v).sum();
    s * s / (x.len() as f64 * s2)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    LinkFree,
    Ack {
        flow: usize,
        sent: u64,
        marked: bool,
    },
    Loss {
        flow: usize,
        sent: u64,
    },
    CbrSend {
        flow: usize,
    },
}

struct Sched {
    heap: BinaryHeap<Reverse<(u64, u64, Ev)>>,
    seq: u64,
}

impl Sched {
    fn push(&mut self, t: u64, ev: Ev) {
        self.seq += 1;
        self.heap.push(Reverse((t, self.seq, ev)));
    }

    /// Counts dropped packets and tells Reno senders one base RTT later.
    fn losses(
        &mut self,
        drops: &mut Vec<Dropped>,
        flows: &[FlowSpec],
        res: &mut [FlowResult],
        now: u64,
        warmup_ns: u64,
    ) {
        for d in drops.drain(..) {
            let g = tag_flow(&d.packet);
            if now >= warmup_ns {
                res[g].losses += 1;
            }
            if let Kind::Reno { .. } = flows[g].kind {
                let sent = tag_time(&d.packet).as_nanos();
                self.push(now + flows[g].rtt_ns, Ev::Loss { flow: g, sent });
            }
        }
    }
}

struct State {
    cwnd: f64,
    ssthresh: f64,
    inflight: u32,
    last_cut_sent: u64,
    template: Vec<u8>,
}

/// Runs `flows` through `q` over a link of `rate_bps` for `duration_ns`; statistics count from
/// `warmup_ns`.
pub fn run(
    q: &mut dyn Qdisc,
    rate_bps: u64,
    flows: &[FlowSpec],
    duration_ns: u64,
    warmup_ns: u64,
) -> Vec<FlowResult> {
    let mut sched = Sched {
        heap: BinaryHeap::new(),
        seq: 0,
    };
    let mut st: Vec<State> = flows
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let ecn = matches!(f.kind, Kind::Reno { ecn: true });
            State {
                cwnd: 2.0,
                ssthresh: f64::INFINITY,
                inflight: 0,
                last_cut_sent: 0,
                template: frame(i as u16, f.size, if ecn { ECT0 } else { 0 }),
            }
        })
        .collect();
    let mut res = vec![FlowResult::default(); flows.len()];
    let mut busy = false;
    let mut drops: Vec<Dropped> = Vec::new();
    for (i, f) in flows.iter().enumerate() {
        if let Kind::Cbr { .. } = f.kind {
            sched.push(0, Ev::CbrSend { flow: i });
        }
    }
    let mut to_send: Vec<usize> = (0..flows.len())
        .filter(|&i| matches!(flows[i].kind, Kind::Reno { .. }))
        .collect();
    let mut now = 0u64;
    loop {
        // Reno sources send while the window allows.
        for &i in &to_send {
            while f64::from(st[i].inflight) < st[i].cwnd.floor() {
                st[i].inflight += 1;
                let pkt = packet(&st[i].template, i as u16, Instant::from_nanos(now));
                q.enqueue(Instant::from_nanos(now), pkt, &mut drops);
                sched.losses(&mut drops, flows, &mut res, now, warmup_ns);
                if !busy {
                    busy = true;
                    sched.push(now, Ev::LinkFree);
                }
            }
        }
        to_send.clear();
        let Some(Reverse((t, _, ev))) = sched.heap.pop() else {
            break;
        };
        if t > duration_ns {
            break;
        }
        now = t;
        match ev {
            Ev::LinkFree => match q.dequeue(Instant::from_nanos(now), &mut drops) {
                Dequeue::Packet(p) => {
                    let tx = p.len() as u64 * 8 * 1_000_000_000 / rate_bps;
                    let f = tag_flow(&p);
                    let sent = tag_time(&p).as_nanos();
                    let marked = p.headers().ip.is_some_and(|ip| ip.ecn == 3);
                    if now >= warmup_ns {
                        res[f].delivered_bytes += u64::from(p.len());
                        res[f].sojourn_ms.push((now - sent) as f64 / 1e6);
                        res[f].marks += u64::from(marked);
                    }
                    if let Kind::Reno { .. } = flows[f].kind {
                        sched.push(
                            now + tx + flows[f].rtt_ns,
                            Ev::Ack {
                                flow: f,
                                sent,
                                marked,
                            },
                        );
                    }
                    sched.losses(&mut drops, flows, &mut res, now, warmup_ns);
                    sched.push(now + tx, Ev::LinkFree);
                }
                Dequeue::NotBefore(t) => sched.push(t.as_nanos(), Ev::LinkFree),
                Dequeue::Empty => {
                    sched.losses(&mut drops, flows, &mut res, now, warmup_ns);
                    busy = false;
                }
            },
            Ev::Ack { flow, sent, marked } => {
                let s = &mut st[flow];
                s.inflight -= 1;
                if marked {
                    congestion(s, sent, now);
                } else if s.cwnd < s.ssthresh {
                    s.cwnd += 1.0;
                } else {
                    s.cwnd += 1.0 / s.cwnd;
                }
                to_send.push(flow);
            }
            Ev::Loss { flow, sent } => {
                let s = &mut st[flow];
                s.inflight -= 1;
                congestion(s, sent, now);
                to_send.push(flow);
            }
            Ev::CbrSend { flow } => {
                let Kind::Cbr { interval_ns } = flows[flow].kind else {
                    continue;
                };
                let pkt = packet(&st[flow].template, flow as u16, Instant::from_nanos(now));
                q.enqueue(Instant::from_nanos(now), pkt, &mut drops);
                sched.losses(&mut drops, flows, &mut res, now, warmup_ns);
                if !busy {
                    busy = true;
                    sched.push(now, Ev::LinkFree);
                }
                sched.push(now + interval_ns, Ev::CbrSend { flow });
            }
        }
    }
    res
}

/// Halves the window, once per window of data (signals about packets sent before the last cut
/// are ignored).
fn congestion(s: &mut State, sent: u64, now: u64) {
    if sent >= s.last_cut_sent {
        s.cwnd = (s.cwnd / 2.0).max(2.0);
        s.ssthresh = s.cwnd;
        s.last_cut_sent = now;
    }
}
