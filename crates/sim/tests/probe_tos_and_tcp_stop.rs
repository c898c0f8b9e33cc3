//! `Ping::with_tos` (per-DSCP latency probes) and `TcpSenderApp::until` (flows that stop).
#![allow(clippy::unwrap_used)]

use cake::AnyQdisc;
use qdisc::{Duration, Instant};
use sim::{LinkConfig, Ping, Sim, TcpReceiverApp, TcpSenderApp};
use std::net::IpAddr;
use tcpmodel::SenderConfig;

const MBIT: u64 = 1_000_000 / 8;

fn pair(q: Option<AnyQdisc>) -> (Sim, usize, usize, IpAddr, IpAddr) {
    let (a_ip, b_ip): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
    let mut s = Sim::new(1);
    let a = s.add_node(&[a_ip]);
    let b = s.add_node(&[b_ip]);
    // With a qdisc it holds the queue (one-packet transmit buffer); without, a 100-packet
    // droptail buffer does.
    let up = LinkConfig::fixed(10 * MBIT, Duration::from_millis(10));
    let up = match q {
        Some(q) => up.buffer(Some(1), None).qdisc(q),
        None => up.buffer(Some(100), None),
    };
    s.add_link(a, b, up);
    s.add_link(
        b,
        a,
        LinkConfig::fixed(10 * MBIT, Duration::from_millis(10)),
    );
    s.compute_routes();
    (s, a, b, a_ip, b_ip)
}

#[test]
fn ping_with_tos_marks_its_requests_and_still_gets_replies() {
    let (mut s, a, _b, a_ip, b_ip) = pair(None);
    let p = s.add_app(
        a,
        7,
        Instant::ZERO,
        Box::new(Ping::new(a_ip, b_ip, 7, Duration::from_millis(100)).with_tos(46 << 2)),
    );
    s.run_until(Instant::from_secs(1));
    let f = s.flow(p).unwrap();
    assert_eq!(f.endpoints.unwrap().dscp, 46);
    assert!(f.delivered_packets >= 9, "replies: {}", f.delivered_packets);
}

#[test]
fn ef_marked_probe_skips_cakes_best_effort_backlog() {
    // diffserv3 CAKE shaping a link that a bulk TCP flow saturates: the EF probe lands in the
    // Voice tin and sees less delay than an unmarked one on average.
    let cfg = cake::CakeConfig::from_tc_args(&["bandwidth", "10mbit", "diffserv3"]).unwrap();
    let (mut s, a, b, a_ip, b_ip) = pair(Some(AnyQdisc::cake(cfg, 1)));
    let c = SenderConfig::new(a_ip, b_ip, 5000, 5000);
    s.add_app(
        b,
        5000,
        Instant::ZERO,
        Box::new(TcpReceiverApp::for_sender(&c)),
    );
    s.add_app(a, 5000, Instant::ZERO, Box::new(TcpSenderApp::new(c)));
    let be = Box::new(Ping::new(a_ip, b_ip, 8, Duration::from_millis(50)));
    let pb = s.add_app(a, 8, Instant::from_secs(2), be);
    let pe = s.add_app(
        a,
        9,
        Instant::from_secs(2),
        Box::new(Ping::new(a_ip, b_ip, 9, Duration::from_millis(50)).with_tos(46 << 2)),
    );
    s.run_until(Instant::from_secs(10));
    let lb = s.flow(pb).unwrap().latency();
    let le = s.flow(pe).unwrap().latency();
    assert!(le.count > 100 && lb.count > 100);
    assert!(le.mean <= lb.mean, "EF {:?} vs BE {:?}", le.mean, lb.mean);
}

#[test]
fn tcp_sender_until_stops_sending_at_the_stop_time() {
    let (mut s, a, b, a_ip, b_ip) = pair(None);
    let c = SenderConfig::new(a_ip, b_ip, 5000, 5000);
    s.add_app(
        b,
        5000,
        Instant::ZERO,
        Box::new(TcpReceiverApp::for_sender(&c)),
    );
    let tx = s.add_app(
        a,
        5000,
        Instant::ZERO,
        Box::new(TcpSenderApp::new(c).until(Instant::from_secs(3))),
    );
    s.run_until(Instant::from_secs(6));
    let f = s.flow(tx).unwrap();
    let bw = s.bin_width();
    // Busy before the stop, silent once what was in flight has arrived.
    assert!(f.goodput_bps(bw, Instant::from_secs(1), Instant::from_secs(3)) > 8.0 * MBIT as f64);
    assert_eq!(
        f.goodput_bps(bw, Instant::from_secs(4), Instant::from_secs(6)),
        0.0
    );
    assert!(s.app_as::<TcpSenderApp>(tx).unwrap().stopped());
}

#[test]
fn tcp_sender_stopped_before_its_start_never_sends() {
    let (mut s, a, b, a_ip, b_ip) = pair(None);
    let c = SenderConfig::new(a_ip, b_ip, 5000, 5000);
    s.add_app(
        b,
        5000,
        Instant::ZERO,
        Box::new(TcpReceiverApp::for_sender(&c)),
    );
    let tx = s.add_app(
        a,
        5000,
        Instant::from_secs(2),
        Box::new(TcpSenderApp::new(c).until(Instant::from_secs(1))),
    );
    s.run_until(Instant::from_secs(3));
    assert_eq!(s.flow(tx).unwrap().sent_packets, 0);
}
