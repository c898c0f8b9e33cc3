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
    let bad_q = CAKE_DUMBBELL.replace("cake bandwidth 9500kbit besteffort", "wfq");
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

/// TCP flows in a scenario file: two CUBIC flows through CAKE shaping a 10 Mbit/s bottleneck
/// at 9.5 Mbit/s share it fairly, fill it, and a ping beside them sees little queueing delay.
#[test]
fn tcp_flows_through_cake_fill_the_shaped_rate_fairly_with_low_ping_latency() {
    let toml = r#"
seed = 3
duration_s = 20.0
[[node]]
name = "a"
addrs = ["10.0.0.1"]
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
delay_ms = 19.0
buffer_packets = 1000
qdisc = "cake bandwidth 9500kbit besteffort flows"
bidirectional = true
[[app]]
kind = "tcp"
node = "a"
dst = "10.0.0.2"
port = 5001
ecn = true
[[app]]
kind = "tcp"
node = "a"
dst = "10.0.0.2"
port = 5002
cc = "newreno"
[[app]]
kind = "ping"
node = "a"
dst = "10.0.0.2"
port = 7
interval_ms = 100.0
start_s = 5.0
"#;
    let scenario = sim::Scenario::parse(toml).expect("valid scenario");
    let mut built = scenario.build(std::path::Path::new(".")).expect("builds");
    built.sim.run_until(built.end);
    let rx: Vec<u64> = built
        .apps
        .iter()
        .filter(|(name, _)| name.starts_with("tcp-rx"))
        .map(|(_, id)| {
            built
                .sim
                .app_as::<sim::TcpReceiverApp>(*id)
                .expect("receiver")
                .delivered()
        })
        .collect();
    assert_eq!(rx.len(), 2);
    let total_bps = rx.iter().sum::<u64>() as f64 * 8.0 / 20.0;
    // Goodput (TCP payload) of the 9.5 Mbit/s shaped wire rate: at least 85% over the whole run
    // including slow start.
    assert!(
        total_bps > 0.85 * 9.5e6 * 1448.0 / 1514.0,
        "total {total_bps}"
    );
    let share = rx[0] as f64 / (rx[0] + rx[1]) as f64;
    assert!((0.4..=0.6).contains(&share), "share {share}");
    let ping = built
        .apps
        .iter()
        .find(|(n, _)| n.starts_with("ping"))
        .expect("ping")
        .1;
    let lat = built.sim.flow(ping).expect("ping flow").latency();
    // Base RTT 40 ms (+ serialisation); CAKE keeps the queue short.
    assert!(lat.p50.as_millis_f64() < 50.0, "ping p50 {:?}", lat.p50);
    assert!(lat.p99.as_millis_f64() < 60.0, "ping p99 {:?}", lat.p99);
}

/// The nearest Flent test follows the flows seen from the first ping's node: its TCP flows
/// are uploads, TCP flows to it downloads, the rest extra series.
#[test]
fn a_scenario_is_labelled_as_the_nearest_flent_test_seen_from_its_pinging_node() {
    let base = CAKE_DUMBBELL.split("[[app]]").next().unwrap().to_string();
    let app = |kind: &str, node: &str, dst: &str, port: u16, extra: &str| {
        format!("[[app]]\nkind = \"{kind}\"\nnode = \"{node}\"\ndst = \"{dst}\"\nport = {port}\n{extra}\n")
    };
    let built = |apps: &[String]| {
        Scenario::parse(&(base.clone() + &apps.concat()))
            .unwrap()
            .build(Path::new("."))
            .unwrap()
    };
    let ping = app("ping", "a", "10.0.0.2", 9, "");
    let up = app("tcp", "a", "10.0.0.2", 5001, "name = \"up\"");
    let down = app("tcp", "b", "10.0.0.1", 5002, "name = \"down\"");
    let voip = app("voip", "a", "10.0.0.2", 6000, "");
    let b = built(&[ping.clone(), up.clone(), voip.clone()]);
    assert_eq!(b.flent.test, sim::FlentTest::TcpUpload);
    assert_eq!(b.flent.series_of("up"), Some("TCP upload"));
    assert_eq!(b.flent.series_of("ping@a:9"), Some("Ping (ms) ICMP"));
    assert_eq!(b.flent.series_of("up (acks)"), None);
    assert_eq!(b.flent.series_of("voip@a:6000"), None);
    let b = built(&[ping.clone(), down.clone()]);
    assert_eq!(b.flent.test, sim::FlentTest::TcpDownload);
    assert_eq!(b.flent.series_of("down"), Some("TCP download"));
    let up2 = app("tcp", "a", "10.0.0.2", 5003, "");
    let b = built(&[ping, up, up2, down]);
    assert_eq!(
        b.flent.test,
        sim::FlentTest::RrulBeNflows { up: 2, down: 1 }
    );
    assert_eq!(b.flent.series_of("tcp@a:5003"), Some("TCP upload BE::2"));
    let b = built(&[voip]);
    assert_eq!(b.flent.test, sim::FlentTest::Ping);
    assert!(b.flent.series.is_empty());
}

#[test]
fn a_dualpi2_scenario_with_prague_and_cubic_keeps_the_l4s_flow_in_the_shallow_queue() {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/l4s-dualpi2.toml"),
    )
    .unwrap();
    let sc = Scenario::parse(&text).unwrap();
    let prague = sc.apps.iter().find(|a| a.name.as_deref() == Some("prague"));
    assert_eq!(prague.and_then(|a| a.cc.as_deref()), Some("prague"));
    let mut b = sc.build(Path::new(".")).unwrap();
    b.sim.run_until(b.end);
    let flow = |name: &str| {
        let id = b.apps.iter().find(|(n, _)| n == name).unwrap().1;
        b.sim.flow(id).unwrap()
    };
    // One-way delay: 10.1 ms of propagation plus queueing.
    let (cubic, prague) = (flow("cubic").latency(), flow("prague").latency());
    println!("cubic {cubic:?}\nprague {prague:?}");
    assert!(prague.p50.as_millis_f64() < 12.5, "{prague:?}");
    assert!(cubic.p50.as_millis_f64() > 18.0, "{cubic:?}");
    let q = b.sim.qdisc(b.links[2].1).unwrap();
    assert_eq!(qdisc::Qdisc::kind(q), "dualpi2");
    let x = q.as_dualpi2().unwrap().xstats(b.sim.now());
    assert!(x.packets_in_l > 1000 && x.packets_in_c > 1000, "{x:?}");
    assert!(x.step_marks > 0);
    // The tc JSON of the run carries DualPI2's xstats.
    let v = sim::qdisc_json(q, "bottleneck", b.sim.now());
    assert_eq!(v["kind"], "dualpi2");
    assert!(v["pkts-in-l"].as_u64().unwrap() > 1000, "{v}");
    assert!(v["prob"].as_f64().is_some());
}

#[test]
fn an_unknown_congestion_control_names_the_accepted_ones() {
    let bad = CAKE_DUMBBELL.replace("kind = \"greedy\"", "kind = \"tcp\"\ncc = \"bbr\"");
    let e = Scenario::parse(&bad)
        .unwrap()
        .build(Path::new("."))
        .unwrap_err()
        .to_string();
    assert!(e.contains("bbr") && e.contains("prague"), "{e}");
}
