//! Scenario files build the topology they describe.
#![allow(clippy::unwrap_used)]

use qdisc::Instant;
use sim::Scenario;
use std::path::Path;

const CAKE_DUMBBELL: &str = r#"
seed = 1
duration_s = 20.0

[[node]]
name = "a"
addrs = ["10.0.0.1", "fd00::1"]
[[node]]
name = "r"
[[node]]
name = "b"
addrs = ["10.0.0.2"]

[[link]]
from = "a"
to = "r"
rate = "1gbit"
delay_ms = 1.0
bidirectional = true
[[link]]
from = "r"
to = "b"
rate = "10mbit"
delay_ms = 20.0
buffer_packets = 1000
qdisc = "cake bandwidth 9500kbit besteffort"
bidirectional = true

[[app]]
kind = "greedy"
node = "a"
dst = "10.0.0.2"
port = 5000
rate = "20mbit"
[[app]]
kind = "ping"
node = "a"
dst = "10.0.0.2"
port = 9
interval_ms = 100.0
start_s = 2.0
"#;

#[test]
fn toml_scenario_builds_and_runs_the_described_cake_dumbbell() {
    let sc = Scenario::parse(CAKE_DUMBBELL).unwrap();
    let mut b = sc.build(Path::new(".")).unwrap();
    assert_eq!(b.links.len(), 4);
    assert_eq!(b.apps.len(), 2);
    b.sim.run_until(b.end);
    let (greedy, ping) = (b.apps[0].1, b.apps[1].1);
    let w = b.sim.bin_width();
    let g =
        b.sim
            .flow(greedy)
            .unwrap()
            .goodput_bps(w, Instant::from_secs(5), Instant::from_secs(20));
    assert!(g > 0.9 * 9_500_000.0 / 8.0 && g < 9_500_000.0 / 8.0, "{g}");
    let lat = b.sim.flow(ping).unwrap().latency();
    // Base RTT 2 x (1 + 20) ms; CAKE keeps the sparse ping's added delay small.
    assert!(lat.count > 150);
    assert!(lat.max.as_millis_f64() < 52.0, "{lat:?}");
}

#[test]
fn scenario_errors_name_the_problem() {
    let bad_node = CAKE_DUMBBELL.replace("from = \"r\"", "from = \"x\"");
    let e = Scenario::parse(&bad_node)
        .unwrap()
        .build(Path::new("."))
        .unwrap_err();
    assert!(e.0.contains("unknown node \"x\""), "{e}");
    let bad_q = CAKE_DUMBBELL.replace("cake bandwidth 9500kbit besteffort", "sfq");
    let e = Scenario::parse(&bad_q)
        .unwrap()
        .build(Path::new("."))
        .unwrap_err();
    assert!(e.0.contains("unknown qdisc"), "{e}");
    let bad_cake = CAKE_DUMBBELL.replace("besteffort", "bogus");
    assert!(Scenario::parse(&bad_cake)
        .unwrap()
        .build(Path::new("."))
        .is_err());
    assert!(Scenario::parse("duration_s = 1\nfoo = 2\n").is_err());
    let trace = CAKE_DUMBBELL.replace("rate = \"10mbit\"", "trace = \"missing.down\"");
    let e = Scenario::parse(&trace)
        .unwrap()
        .build(Path::new("."))
        .unwrap_err();
    assert!(e.0.contains("missing.down"), "{e}");
}

#[test]
fn scenario_trace_links_load_mahimahi_files_relative_to_the_scenario() {
    let sc = CAKE_DUMBBELL
        .replace("rate = \"10mbit\"", "trace = \"ATT-LTE-driving-2016.down\"")
        .replace("qdisc = \"cake bandwidth 9500kbit besteffort\"", "")
        .replace("rate = \"20mbit\"", "rate = \"100mbit\"");
    let mut b = Scenario::parse(&sc)
        .unwrap()
        .build(Path::new("/work/shared/traces"))
        .unwrap();
    b.sim.run_until(b.end);
    let u = b.sim.link_utilisation(b.links[2].1);
    assert!(u > 0.99, "{u}");
}
