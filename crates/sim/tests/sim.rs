//! Behavioural tests of the simulator core.
#![allow(clippy::unwrap_used)]

use cake::{AnyQdisc, CakeConfig};
use qdisc::packet::FrameSpec;
use qdisc::{Duration, Instant};
use sim::{Capacity, LinkConfig, MahimahiTrace, Ping, RateSchedule, Sim, UdpSource};
use std::net::IpAddr;

const MBIT: u64 = 1_000_000 / 8; // bytes per second in one Mbit/s

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// A -> R -> B with a fast access link and the given bottleneck R -> B; reverse B -> R -> A
/// uncongested. Returns (sim, a, b, bottleneck link id).
/// A greedy UDP source from host a (10.0.0.1) to host b (10.0.0.2), port 5000, from time 0.
fn greedy_a_to_b(s: &mut Sim, a: usize, offered_bps: u64) -> usize {
    let src = UdpSource::greedy(ip("10.0.0.1"), ip("10.0.0.2"), 5000, offered_bps);
    s.add_app(a, 5000, Instant::ZERO, Box::new(src))
}

fn dumbbell(seed: u64, bottleneck: LinkConfig, bdelay: Duration) -> (Sim, usize, usize, usize) {
    let mut s = Sim::new(seed);
    let a = s.add_node(&[ip("10.0.0.1"), ip("fd00::1")]);
    let r = s.add_node(&[ip("10.0.0.254")]);
    let b = s.add_node(&[ip("10.0.0.2"), ip("fd00::2")]);
    s.add_link(
        a,
        r,
        LinkConfig::fixed(1000 * MBIT, Duration::from_millis(1)),
    );
    let bl = s.add_link(r, b, bottleneck);
    s.add_link(b, r, LinkConfig::fixed(100 * MBIT, bdelay));
    s.add_link(
        r,
        a,
        LinkConfig::fixed(1000 * MBIT, Duration::from_millis(1)),
    );
    s.compute_routes();
    (s, a, b, bl)
}

#[test]
fn greedy_udp_through_fixed_10mbit_link_gets_10mbit_within_half_percent() {
    let (mut s, a, _b, bl) = dumbbell(
        1,
        LinkConfig::fixed(10 * MBIT, Duration::from_millis(10)).buffer(Some(100), None),
        Duration::from_millis(10),
    );
    let f = greedy_a_to_b(&mut s, a, 12 * MBIT);
    s.run_until(Instant::from_secs(10));
    let m = s.flow(f).unwrap();
    let g = m.goodput_bps(s.bin_width(), Instant::from_secs(1), Instant::from_secs(10));
    let want = (10 * MBIT) as f64;
    assert!((g - want).abs() / want < 0.005, "goodput {g} vs {want}");
    assert!(s.link_utilisation(bl) > 0.99);
    assert!(s.link(bl).unwrap().buffer_drops > 0, "excess is dropped");
}

fn ser(len: u32, rate: u64) -> u64 {
    (u64::from(len) * 1_000_000_000).div_ceil(rate)
}

#[test]
fn ping_rtt_equals_sum_of_propagation_and_serialisation_exactly() {
    for (src, dst) in [("10.0.0.1", "10.0.0.2"), ("fd00::1", "fd00::2")] {
        let (mut s, a, _b, _) = dumbbell(
            2,
            LinkConfig::fixed(10 * MBIT, Duration::from_millis(20)),
            Duration::from_millis(20),
        );
        let p = s.add_app(
            a,
            77,
            Instant::ZERO,
            Box::new(Ping::new(ip(src), ip(dst), 77, Duration::from_secs(1))),
        );
        s.run_until(Instant::from_secs(5));
        let len = FrameSpec::icmp_echo(ip(src), ip(dst), 77, 0)
            .packet_padded()
            .len();
        let want = 2 * (ser(len, 1000 * MBIT) + 1_000_000)
            + ser(len, 10 * MBIT)
            + ser(len, 100 * MBIT)
            + 40_000_000;
        let ping = s.app_as::<Ping>(p).unwrap();
        assert_eq!(ping.rtts.len(), 5, "{src}");
        for r in &ping.rtts {
            assert_eq!(r.as_nanos(), want, "{src}");
        }
        let lat = s.flow(p).unwrap().latency();
        assert_eq!(lat.max.as_nanos(), want);
        assert_eq!(lat.min.as_nanos(), want);
    }
}

#[test]
fn droptail_buffer_bounds_queueing_delay_and_drops_the_excess() {
    let (mut s, a, _b, bl) = dumbbell(
        3,
        LinkConfig::fixed(10 * MBIT, Duration::from_millis(10)).buffer(Some(50), None),
        Duration::from_millis(10),
    );
    let f = greedy_a_to_b(&mut s, a, 20 * MBIT);
    s.run_until(Instant::from_secs(10));
    let m = s.flow(f).unwrap();
    // 50 queued + 1 in service at 1.2 ms each, plus 10 ms + 1 ms propagation + access.
    let bound = 51 * 1_200_000 + 11_000_000 + 20_000;
    let lat = m.latency();
    assert!(lat.max.as_nanos() <= bound, "max {:?}", lat.max);
    assert!(lat.max.as_nanos() > 50 * 1_200_000, "the buffer fills");
    // The link's own view of its queue: sojourn of at most 50 packets ahead at 1.2 ms each.
    let max_sojourn = s
        .link(bl)
        .unwrap()
        .bins
        .iter()
        .map(|b| b.max_sojourn_ns)
        .max();
    let max_sojourn = max_sojourn.unwrap();
    assert!(
        (49 * 1_200_000..=50 * 1_200_000).contains(&max_sojourn),
        "{max_sojourn}"
    );
    let drops = s.link(bl).unwrap().buffer_drops;
    let frac = drops as f64 / m.sent_packets as f64;
    assert!((frac - 0.5).abs() < 0.01, "drop fraction {frac}");
}

#[test]
fn mahimahi_trace_link_delivers_the_traces_average_rate() {
    let text = std::fs::read_to_string("/work/shared/traces/ATT-LTE-driving-2016.down").unwrap();
    let trace = MahimahiTrace::parse(&text).unwrap();
    let end = Instant::from_secs(60);
    let capacity = trace.count_before(end) * 1500;
    let (mut s, a, _b, bl) = dumbbell(
        4,
        LinkConfig::with_rate(Capacity::Trace(trace), Duration::ZERO).buffer(Some(5000), None),
        Duration::from_millis(10),
    );
    let f = greedy_a_to_b(&mut s, a, 60 * MBIT);
    s.run_until(end);
    let delivered = s.flow(f).unwrap().delivered_bytes;
    let rel = (delivered as f64 - capacity as f64).abs() / capacity as f64;
    assert!(rel < 0.005, "delivered {delivered} vs capacity {capacity}");
    assert!(s.link_utilisation(bl) > 0.995);
}

fn cake_vs_droptail(with_cake: bool) -> (f64, sim::LatencySummary) {
    // A deep modem buffer in bytes (1.2 s at 10 Mbit/s): small pings still fit between the
    // greedy flow's full-size frames (1000 spare bytes), so they measure the standing queue.
    let mut cfg =
        LinkConfig::fixed(10 * MBIT, Duration::from_millis(20)).buffer(None, Some(1_501_000));
    if with_cake {
        cfg = cfg.qdisc(AnyQdisc::cake(CakeConfig::with_rate(95 * MBIT / 10), 9));
    }
    let (mut s, a, _b, _) = dumbbell(5, cfg, Duration::from_millis(20));
    let g = greedy_a_to_b(&mut s, a, 20 * MBIT);
    let p = s.add_app(
        a,
        9,
        Instant::from_secs(2),
        Box::new(Ping::new(
            ip("10.0.0.1"),
            ip("10.0.0.2"),
            9,
            Duration::from_millis(100),
        )),
    );
    s.run_until(Instant::from_secs(20));
    let gp = s.flow(g).unwrap().goodput_bps(
        s.bin_width(),
        Instant::from_secs(5),
        Instant::from_secs(20),
    );
    (gp, s.flow(p).unwrap().latency())
}

#[test]
fn cake_shaping_below_the_bottleneck_keeps_ping_latency_low_under_greedy_load() {
    let base_ms = 42.0;
    let (gp_cake, lat_cake) = cake_vs_droptail(true);
    let (gp_tail, lat_tail) = cake_vs_droptail(false);
    // Deep droptail alone: ~1000 x 1.2 ms of queue.
    assert!(lat_tail.count >= 160, "{lat_tail:?}");
    assert!(
        lat_tail.p50.as_millis_f64() > base_ms + 1000.0,
        "{lat_tail:?}"
    );
    // CAKE: the sparse ping sees a few ms at most.
    assert!(
        lat_cake.max.as_millis_f64() < base_ms + 10.0,
        "{lat_cake:?}"
    );
    assert!(lat_cake.count >= 160);
    // The greedy flow still saturates the shaped rate.
    assert!(
        gp_cake > 0.9 * (95 * MBIT / 10) as f64,
        "cake goodput {gp_cake}"
    );
    assert!(
        gp_tail > 0.99 * (10 * MBIT) as f64,
        "droptail goodput {gp_tail}"
    );
}

fn lossy_run(seed: u64) -> (Vec<u64>, u64, u64) {
    let (mut s, a, _b, bl) = dumbbell(
        seed,
        LinkConfig::fixed(10 * MBIT, Duration::from_millis(10)).loss(0.1),
        Duration::from_millis(10),
    );
    let f = s.add_app(
        a,
        5000,
        Instant::ZERO,
        Box::new(UdpSource::cbr(
            ip("10.0.0.1"),
            ip("10.0.0.2"),
            5000,
            1000,
            8 * MBIT,
        )),
    );
    s.run_until(Instant::from_secs(20));
    let m = s.flow(f).unwrap();
    (
        m.latencies_ns.clone(),
        m.sent_packets,
        s.link(bl).unwrap().random_losses,
    )
}

#[test]
fn same_seed_gives_identical_metrics_and_another_seed_differs() {
    let x = lossy_run(42);
    let y = lossy_run(42);
    assert_eq!(x, y);
    let z = lossy_run(43);
    assert_ne!(x.0.len(), 0);
    assert_ne!(x, z);
}

#[test]
fn random_loss_rate_matches_the_configured_probability() {
    let (lat, sent, lost) = lossy_run(7);
    let p = lost as f64 / sent as f64;
    // 20 000 packets: 3 sigma is 0.0064.
    assert!((p - 0.1).abs() < 0.0065, "loss {p}");
    let in_flight = sent - lat.len() as u64 - lost;
    assert!(
        in_flight <= 15,
        "only packets in flight are unaccounted: {in_flight}"
    );
}

#[test]
fn voip_on_an_idle_path_has_constant_delay_no_jitter_no_loss() {
    let (mut s, a, _b, _) = dumbbell(
        8,
        LinkConfig::fixed(10 * MBIT, Duration::from_millis(15)),
        Duration::from_millis(15),
    );
    let v = s.add_app(
        a,
        4000,
        Instant::ZERO,
        Box::new(UdpSource::voip(ip("10.0.0.1"), ip("10.0.0.2"), 4000)),
    );
    s.run_until(Instant::from_millis(10_019));
    let m = s.flow(v).unwrap();
    assert_eq!(m.sent_packets, 501);
    assert_eq!(m.delivered_packets, 501);
    assert_eq!(m.loss(), 0.0);
    assert_eq!(m.jitter_ns, 0.0);
    let want = ser(200, 1000 * MBIT) + ser(200, 10 * MBIT) + 16_000_000;
    assert_eq!(m.latency().p99.as_nanos(), want);
}

#[test]
fn mahimahi_trace_loops_at_its_last_value_and_counts_opportunities() {
    let t = MahimahiTrace::parse("0\n0\n5\n10\n").unwrap();
    assert_eq!(t.opportunity(0), Instant::ZERO);
    assert_eq!(t.opportunity(3), Instant::from_millis(10));
    assert_eq!(t.opportunity(4), Instant::from_millis(10));
    assert_eq!(t.opportunity(6), Instant::from_millis(15));
    assert_eq!(t.count_before(Instant::from_millis(10)), 3);
    assert_eq!(t.count_before(Instant::from_millis(11)), 6);
    assert!(MahimahiTrace::parse("5\n3\n").is_err());
    assert!(MahimahiTrace::parse("0\n").is_err());
    assert!(MahimahiTrace::parse("x\n").is_err());
}

#[test]
fn rate_schedule_steps_and_ramps() {
    let s = RateSchedule::parse("# demo\n0 step 10mbit\n5 ramp 10mbit\n10 step 20mbit\n").unwrap();
    assert_eq!(s.rate_at(Instant::from_secs(1)), (10 * MBIT) as f64);
    assert_eq!(s.rate_at(Instant::from_millis(7500)), (15 * MBIT) as f64);
    assert_eq!(s.rate_at(Instant::from_secs(30)), (20 * MBIT) as f64);
    assert!(RateSchedule::parse("0 jump 1mbit").is_err());
    assert!(RateSchedule::parse("").is_err());
}

#[test]
fn scheduled_rate_link_follows_its_steps() {
    let sched = RateSchedule::parse("0 step 10mbit\n10 step 2mbit\n").unwrap();
    let (mut s, a, _b, _) = dumbbell(
        9,
        LinkConfig::with_rate(Capacity::Schedule(sched), Duration::from_millis(5)),
        Duration::from_millis(5),
    );
    let f = greedy_a_to_b(&mut s, a, 20 * MBIT);
    s.run_until(Instant::from_secs(20));
    let m = s.flow(f).unwrap();
    let w = s.bin_width();
    let hi = m.goodput_bps(w, Instant::from_secs(1), Instant::from_secs(9));
    let lo = m.goodput_bps(w, Instant::from_secs(12), Instant::from_secs(20));
    assert!((hi / (10 * MBIT) as f64 - 1.0).abs() < 0.01, "{hi}");
    assert!((lo / (2 * MBIT) as f64 - 1.0).abs() < 0.01, "{lo}");
}

/// A UDP echo server: answers every datagram to its sender (what a TCP receiver's ACK path looks
/// like to the simulator).
#[derive(Debug)]
struct Echo;
impl sim::Application for Echo {
    fn start(&mut self, _now: Instant, _out: &mut sim::Outbox) {}
    fn on_packet(&mut self, _now: Instant, pkt: &qdisc::Packet, out: &mut sim::Outbox) {
        let ip = pkt.headers().ip.unwrap();
        let t = ip.tuple;
        let (src, dst) = if ip.inner_version == 4 {
            let s: [u8; 4] = t.src[12..].try_into().unwrap();
            let d: [u8; 4] = t.dst[12..].try_into().unwrap();
            (IpAddr::from(s), IpAddr::from(d))
        } else {
            (IpAddr::from(t.src), IpAddr::from(t.dst))
        };
        out.send(FrameSpec::udp(dst, src, t.dst_port, t.src_port).packet_padded());
    }
    fn on_timer(&mut self, _now: Instant, _out: &mut sim::Outbox) {}
}

/// Sends one datagram at start and one per timer; a reply re-arms the timer 1 ms later, a
/// second timer set in the same call replaces the first.
#[derive(Debug, Default)]
struct Client {
    replies: Vec<Instant>,
    timers: Vec<Instant>,
}
impl sim::Application for Client {
    fn start(&mut self, _now: Instant, out: &mut sim::Outbox) {
        out.send(FrameSpec::udp(ip("10.0.0.1"), ip("10.0.0.2"), 6000, 7).packet_padded());
    }
    fn on_packet(&mut self, now: Instant, _pkt: &qdisc::Packet, out: &mut sim::Outbox) {
        self.replies.push(now);
        out.set_timer(now.saturating_add(Duration::from_secs(10)));
        out.set_timer(now.saturating_add(Duration::from_millis(1)));
    }
    fn on_timer(&mut self, now: Instant, out: &mut sim::Outbox) {
        self.timers.push(now);
        if self.timers.len() < 3 {
            out.send(FrameSpec::udp(ip("10.0.0.1"), ip("10.0.0.2"), 6000, 7).packet_padded());
        }
    }
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }
}

#[test]
fn applications_reply_to_packets_and_a_new_timer_replaces_the_old() {
    let (mut s, a, b, _) = dumbbell(
        10,
        LinkConfig::fixed(10 * MBIT, Duration::from_millis(10)),
        Duration::from_millis(10),
    );
    s.add_app(b, 7, Instant::ZERO, Box::new(Echo));
    let c = s.add_app(a, 6000, Instant::ZERO, Box::new(Client::default()));
    s.run_until(Instant::from_secs(60));
    let cl = s.app_as::<Client>(c).unwrap();
    assert_eq!(cl.replies.len(), 3, "start + two timer-driven requests");
    // Each timer fired 1 ms after its reply; the replaced 10 s timers never fired.
    assert_eq!(cl.timers.len(), 3);
    for (r, t) in cl.replies.iter().zip(&cl.timers) {
        assert_eq!(t.as_nanos() - r.as_nanos(), 1_000_000);
    }
    assert_eq!(s.unbound_deliveries, 0);
    assert_eq!(s.unroutable, 0);
}

#[test]
fn cake_shares_a_fan_in_bottleneck_equally_between_two_greedy_flows() {
    let mut s = Sim::new(11);
    let a1 = s.add_node(&[ip("10.0.1.1")]);
    let a2 = s.add_node(&[ip("10.0.2.1")]);
    let r = s.add_node(&[]);
    let b = s.add_node(&[ip("10.0.0.2")]);
    s.add_link(
        a1,
        r,
        LinkConfig::fixed(100 * MBIT, Duration::from_millis(1)),
    );
    s.add_link(
        a2,
        r,
        LinkConfig::fixed(100 * MBIT, Duration::from_millis(3)),
    );
    s.add_link(
        r,
        b,
        LinkConfig::fixed(10 * MBIT, Duration::from_millis(10))
            .buffer(Some(2), None)
            .qdisc(AnyQdisc::cake(CakeConfig::with_rate(0), 3)),
    );
    s.compute_routes();
    let f1 = s.add_app(
        a1,
        1,
        Instant::ZERO,
        Box::new(UdpSource::greedy(
            ip("10.0.1.1"),
            ip("10.0.0.2"),
            1,
            30 * MBIT,
        )),
    );
    let f2 = s.add_app(
        a2,
        2,
        Instant::ZERO,
        Box::new(UdpSource::greedy(
            ip("10.0.2.1"),
            ip("10.0.0.2"),
            2,
            8 * MBIT,
        )),
    );
    s.run_until(Instant::from_secs(10));
    let w = s.bin_width();
    let g1 = s
        .flow(f1)
        .unwrap()
        .goodput_bps(w, Instant::from_secs(2), Instant::from_secs(10));
    let g2 = s
        .flow(f2)
        .unwrap()
        .goodput_bps(w, Instant::from_secs(2), Instant::from_secs(10));
    let half = (5 * MBIT) as f64;
    assert!((g1 / half - 1.0).abs() < 0.02, "{g1}");
    assert!((g2 / half - 1.0).abs() < 0.02, "{g2}");
}

#[test]
fn degenerate_topologies_drop_packets_as_unroutable_instead_of_panicking() {
    let mut s = Sim::new(0);
    s.add_link(0, 0, LinkConfig::fixed(MBIT, Duration::ZERO));
    s.compute_routes();
    let a = s.add_node(&[ip("10.0.0.1")]);
    s.compute_routes();
    // No link leads to 10.0.0.9 (unknown) and none from node 7 (no such node).
    s.add_app(
        a,
        1,
        Instant::ZERO,
        Box::new(UdpSource::cbr(ip("10.0.0.1"), ip("10.0.0.9"), 1, 100, MBIT)),
    );
    s.add_app(
        7,
        2,
        Instant::ZERO,
        Box::new(UdpSource::cbr(ip("10.0.0.1"), ip("10.0.0.1"), 2, 100, MBIT)),
    );
    s.run_until(Instant::from_millis(10));
    assert!(s.unroutable >= 20, "{}", s.unroutable);
}

#[test]
fn changing_a_link_rate_mid_run_changes_its_throughput() {
    let (mut s, a, _b, bl) = dumbbell(
        12,
        LinkConfig::fixed(10 * MBIT, Duration::from_millis(5)),
        Duration::from_millis(5),
    );
    let f = greedy_a_to_b(&mut s, a, 20 * MBIT);
    s.run_until(Instant::from_secs(5));
    assert!(s.set_link_rate(bl, Capacity::Rate(4 * MBIT)));
    assert!(!s.set_link_rate(99, Capacity::Rate(4 * MBIT)));
    s.run_until(Instant::from_secs(10));
    let m = s.flow(f).unwrap();
    let w = s.bin_width();
    let lo = m.goodput_bps(w, Instant::from_secs(6), Instant::from_secs(10));
    assert!((lo / (4 * MBIT) as f64 - 1.0).abs() < 0.01, "{lo}");
}

#[test]
fn an_unlimited_link_adds_only_its_delay() {
    let (mut s, a, _b, bl) = dumbbell(
        3,
        LinkConfig::with_rate(Capacity::Unlimited, Duration::from_millis(10)).buffer(Some(2), None),
        Duration::from_millis(10),
    );
    let f = greedy_a_to_b(&mut s, a, 300 * MBIT);
    s.run_until(Instant::from_secs(2));
    let m = s.flow(f).unwrap();
    let g = m.goodput_bps(
        s.bin_width(),
        Instant::from_millis(500),
        Instant::from_secs(2),
    );
    let want = (300 * MBIT) as f64;
    assert!((g - want).abs() / want < 0.01, "goodput {g} vs {want}");
    // Nothing waits in the two-packet buffer, so nothing is dropped, and every packet takes
    // the two links' serialisation and delays: 1 ms + 10 ms and a 1000 Mbit/s hop.
    assert_eq!(s.link(bl).unwrap().buffer_drops, 0);
    assert_eq!(s.buffer_backlog(bl), Some((0, 0)));
    let lat = m.latency();
    assert!(lat.p99 < Duration::from_micros(11_050), "{lat:?}");
    assert!(lat.min >= Duration::from_millis(11), "{lat:?}");
}
