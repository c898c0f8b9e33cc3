//! Simulation speed: a 60 s, 100 Mbit/s greedy-UDP run (1500-byte frames offered at 110 Mbit/s
//! through a 100 Mbit/s bottleneck with a 1000-packet droptail buffer, optionally behind CAKE).
//! Prints simulated packets per CPU second. Run with `cargo run --release -p purple-sim
//! --example speed [cake]`.

use cake::{AnyQdisc, CakeConfig};
use qdisc::{Duration, Instant};
use sim::{LinkConfig, Sim, UdpSource};
use std::net::IpAddr;

// Measuring CPU time is the point of this example (outside the sans-IO library).
#[allow(clippy::disallowed_methods)]
fn main() {
    let with_cake = std::env::args().any(|a| a == "cake");
    let mbit = 1_000_000 / 8;
    let a_ip: IpAddr = [10, 0, 0, 1].into();
    let b_ip: IpAddr = [10, 0, 0, 2].into();
    let mut s = Sim::new(1);
    let a = s.add_node(&[a_ip]);
    let r = s.add_node(&[]);
    let b = s.add_node(&[b_ip]);
    s.add_link(
        a,
        r,
        LinkConfig::fixed(1000 * mbit, Duration::from_millis(1)),
    );
    let mut bottleneck = LinkConfig::fixed(100 * mbit, Duration::from_millis(10));
    if with_cake {
        bottleneck = bottleneck.qdisc(AnyQdisc::cake(CakeConfig::with_rate(95 * mbit), 1));
    }
    let bl = s.add_link(r, b, bottleneck);
    s.compute_routes();
    let f = s.add_app(
        a,
        5000,
        Instant::ZERO,
        Box::new(UdpSource::greedy(a_ip, b_ip, 5000, 110 * mbit)),
    );
    let t0 = std::time::Instant::now();
    s.run_until(Instant::from_secs(60));
    let cpu = t0.elapsed().as_secs_f64();
    let m = s
        .flow(f)
        .map(|m| (m.sent_packets, m.delivered_packets))
        .unwrap_or((0, 0));
    let tx = s.link(bl).map_or(0, |l| l.tx_packets);
    println!(
        "{}: sent {} delivered {} bottleneck tx {} events {} in {:.3} s CPU: {:.0} delivered packets/s, {:.0} events/s",
        if with_cake { "cake" } else { "droptail" },
        m.0,
        m.1,
        tx,
        s.events_processed(),
        cpu,
        m.1 as f64 / cpu,
        s.events_processed() as f64 / cpu
    );
}
