//! Taps (what a packet socket on a device would see, with the simulator's times) and a radio
//! that queues ICMP apart from data.
#![allow(clippy::unwrap_used)]

use qdisc::{Duration, Instant};
use sim::{IcmpPolicy, LinkConfig, Ping, Sim, TapAt, UdpSource};
use std::net::IpAddr;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// a ── 10 Mbit/s, 5 ms, 200-packet buffer ──> b (and back at 1 Gbit/s); a UDP flood at
/// 12 Mbit/s from a to b fills the buffer; a ping from a to b every 100 ms. Returns the
/// ping's median RTT, ms.
fn flooded_ping(policy: IcmpPolicy) -> Option<f64> {
    let mut sim = Sim::new(1);
    let (a_ip, b_ip) = (ip("10.0.0.1"), ip("10.0.0.2"));
    let a = sim.add_node(&[a_ip]);
    let b = sim.add_node(&[b_ip]);
    let mut slow = LinkConfig::fixed(1_250_000, Duration::from_millis(5)).buffer(Some(200), None);
    slow = slow.icmp(policy);
    sim.add_link(a, b, slow);
    sim.add_link(
        b,
        a,
        LinkConfig::fixed(125_000_000, Duration::from_millis(5)),
    );
    sim.compute_routes();
    sim.add_app(
        a,
        9,
        Instant::ZERO,
        Box::new(UdpSource::greedy(a_ip, b_ip, 9, 1_500_000)),
    );
    let ping = sim.add_app(
        a,
        77,
        Instant::from_millis(500),
        Box::new(Ping::new(a_ip, b_ip, 77, Duration::from_millis(100))),
    );
    sim.run_until(Instant::from_secs(5));
    let mut rtts: Vec<f64> = sim
        .app_as::<Ping>(ping)
        .unwrap()
        .rtts
        .iter()
        .map(|d| d.as_millis_f64())
        .collect();
    rtts.sort_by(f64::total_cmp);
    rtts.get(rtts.len() / 2)
        .copied()
        .filter(|_| rtts.len() >= 30)
}

#[test]
fn a_radio_that_queues_icmp_apart_hides_the_data_queue_from_pings() {
    let shared = flooded_ping(IcmpPolicy::Shared).unwrap();
    let apart = flooded_ping(IcmpPolicy::Apart).unwrap();
    // Blocked: no reply at all.
    assert_eq!(flooded_ping(IcmpPolicy::Blocked), None);
    // 200 packets of 1500 bytes at 10 Mbit/s: 240 ms of queue in front of a shared ping.
    assert!(shared > 200.0, "shared {shared}");
    assert!(apart < 12.0, "apart {apart}");
}

#[test]
fn taps_see_frames_entering_a_buffer_and_arriving_at_the_far_end_in_time_order() {
    let mut sim = Sim::new(1);
    let (a_ip, b_ip) = (ip("10.0.0.1"), ip("10.0.0.2"));
    let a = sim.add_node(&[a_ip]);
    let b = sim.add_node(&[b_ip]);
    // 1 Mbit/s, 10 ms: a 1514-byte frame takes 12.112 ms to send.
    let ab = sim.add_link(a, b, LinkConfig::fixed(125_000, Duration::from_millis(10)));
    let ba = sim.add_link(b, a, LinkConfig::fixed(125_000, Duration::from_millis(10)));
    sim.compute_routes();
    let enter = sim.add_tap(ab, TapAt::Enter).unwrap();
    let arrive = sim.add_tap(ab, TapAt::Arrive).unwrap();
    assert_eq!((enter, arrive), (0, 1));
    assert!(sim.add_tap(ba + 5, TapAt::Enter).is_none());
    let src = UdpSource::cbr(a_ip, b_ip, 9, 1514, 12_500).until(Instant::from_millis(2500));
    sim.add_app(a, 9, Instant::from_millis(1), Box::new(src));
    sim.run_until(Instant::from_secs(3));
    let mut seen: Vec<(Instant, usize, usize)> = Vec::new();
    sim.drain_taps(|r| seen.push((r.at, r.tap, r.frame().len())));
    // 12.5 kB/s of 1514-byte frames: about 8 a second, each seen twice.
    let entered: Vec<Instant> = seen.iter().filter(|s| s.1 == 0).map(|s| s.0).collect();
    let arrived: Vec<Instant> = seen.iter().filter(|s| s.1 == 1).map(|s| s.0).collect();
    assert!(entered.len() >= 15, "{}", entered.len());
    assert_eq!(entered.len(), arrived.len());
    for (e, a) in entered.iter().zip(&arrived) {
        let d = a.saturating_duration_since(*e);
        assert_eq!(
            d,
            Duration::from_nanos(12_112_000 + 10_000_000),
            "idle link"
        );
    }
    assert!(seen.windows(2).all(|w| w[0].0 <= w[1].0), "time order");
    // The simulator materialises headers only (payloads are padding): all of them are kept.
    assert!(
        seen.iter().all(|s| (42..=sim::TAP_SNAP).contains(&s.2)),
        "headers kept"
    );
    let mut again = 0;
    sim.drain_taps(|_| again += 1);
    assert_eq!(again, 0, "drained");
}
