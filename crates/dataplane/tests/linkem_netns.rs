//! The link emulator end to end in network namespaces (client — linkem — server). Skipped (reported as
//! such, never passed) when not root or when namespaces cannot be created (`testkit`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use dataplane::linkem::{Capacity, IcmpPolicy, LinkConfig};
use dataplane::linkem_lab::{Lab, Running, Shape};
use dataplane::BridgeConfig;
use qdisc::quantile::rounded_rank;

fn start(lab: &Lab, up: LinkConfig, down: LinkConfig, ctl: Option<std::path::PathBuf>) -> Running {
    let cfg = BridgeConfig {
        if_a: "b0".into(),
        if_b: "b1".into(),
        egress: String::new(),
        ingress: String::new(),
        name: lab.prefix.clone(),
        ctl_path: ctl,
        ctl_group: None,
        seed: 1,
    };
    lab.start(move || dataplane::linkem::open(cfg, up, down))
        .expect("linkem")
}

macro_rules! lab_or_skip {
    () => {
        Lab::new(Shape::Bridged).expect("the test namespaces (prerequisites were checked)")
    };
}

/// The tests share 2 cores; run one emulator at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn twenty_ms_each_way_gives_a_forty_ms_round_trip() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let lab = lab_or_skip!();
    let d = LinkConfig {
        delay: qdisc::Duration::from_millis(20),
        ..LinkConfig::default()
    };
    let em = start(&lab, d.clone(), d, None);
    let rtts = lab.udp_rtts(7001, 20, Duration::from_millis(20)).unwrap();
    let one_way = lab
        .udp_one_way(7005, 20, Duration::from_millis(20))
        .unwrap();
    em.stop().unwrap();
    assert!(one_way.len() >= 18, "{} datagrams arrived", one_way.len());
    let ow_min = rounded_rank(&one_way, 0.0).expect("samples") as f64 / 1e6;
    eprintln!("one-way through 20 ms: min {ow_min:.2} ms");
    assert!(
        (19.9..=23.0).contains(&ow_min),
        "one-way min {ow_min} ms for a 20 ms link"
    );
    assert!(rtts.len() >= 18, "{} replies", rtts.len());
    let min = rounded_rank(&rtts, 0.0).expect("samples") as f64 / 1e6;
    let p50 = rounded_rank(&rtts, 0.5).expect("samples") as f64 / 1e6;
    eprintln!("RTT through 20 ms + 20 ms: min {min:.2} ms, p50 {p50:.2} ms");
    // The delay is a floor no packet beats, and at least the fastest probe gets it almost
    // exactly. The median only gets a loose bound: on a loaded 2-core machine the userspace
    // emulator's wake-ups slip by milliseconds (CI saw a 48 ms median with other namespace tests
    // running); `purple bench dataplane` measures the added latency properly.
    assert!(
        min >= 39.5,
        "min {min} ms: faster than the configured delay"
    );
    assert!(min <= 43.0, "min {min} ms");
    assert!(p50 <= 60.0, "p50 {p50} ms");
}

fn tcp_at_10mbit_fills_the_buffer_and_set_rate_changes_capacity_live() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let lab = lab_or_skip!();
    let ctl = std::env::temp_dir().join(format!("{}.sock", lab.prefix));
    let up = LinkConfig {
        capacity: Capacity::Rate(1_250_000),
        buffer_packets: Some(200),
        ..LinkConfig::default()
    };
    let em = start(&lab, up, LinkConfig::default(), Some(ctl.clone()));
    let idle = lab.udp_rtts(7002, 10, Duration::from_millis(10)).unwrap();
    // Bulk TCP in the background while pinging: the droptail buffer bloats the RTT.
    let lab = std::sync::Arc::new(lab);
    let l2 = lab.clone();
    let bulk = std::thread::spawn(move || {
        l2.tcp_goodput(
            7003,
            Duration::from_millis(1000),
            Duration::from_millis(2000),
        )
    });
    std::thread::sleep(Duration::from_millis(1200));
    let json = dataplane::ctl::request(&ctl, &"stats --json".parse().unwrap()).unwrap();
    let loaded = lab.udp_rtts(7004, 10, Duration::from_millis(50)).unwrap();
    let g10 = bulk.join().unwrap().unwrap();
    let answer = dataplane::ctl::request(&ctl, &"set-rate up 20Mbit".parse().unwrap()).unwrap();
    assert_eq!(answer, "up rate 20Mbit\n");
    let g20 = lab
        .tcp_goodput(
            7005,
            Duration::from_millis(700),
            Duration::from_millis(1500),
        )
        .unwrap();
    let text = dataplane::ctl::request(&ctl, &"stats".parse().unwrap()).unwrap();
    em.stop().unwrap();
    let (i50, l50) = (
        rounded_rank(&idle, 0.5).expect("samples") as f64 / 1e6,
        rounded_rank(&loaded, 0.5).expect("samples") as f64 / 1e6,
    );
    eprintln!(
        "goodput {:.2} Mbit/s at 10Mbit, {:.2} at 20Mbit; RTT idle {i50:.2} ms, loaded {l50:.2} ms\n{text}",
        g10 / 1e6,
        g20 / 1e6
    );
    // Goodput is capacity × 1448/1500 (IP bytes charged, TCP timestamps on).
    assert!((0.90..=1.0).contains(&(g10 / 10e6)), "{g10}");
    assert!((0.90..=1.0).contains(&(g20 / 20e6)), "{g20}");
    // 200 packets of 1500 bytes at 10 Mbit/s allow 240 ms of queue, but the receiver's
    // autotuned window (rcvbuf grows with the small idle RTT) keeps the standing queue to some
    // tens of milliseconds: bloat is visible, not the full buffer.
    let lmax = rounded_rank(&loaded, 1.0).expect("samples") as f64 / 1e6;
    assert!(
        lmax > i50 + 10.0,
        "no bloat: idle {i50} loaded p50 {l50} max {lmax}"
    );
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let up = &v[0];
    assert_eq!(up["kind"], "linkem");
    assert_eq!(up["purple"]["direction"], "up");
    assert_eq!(up["capacity"], 1_250_000);
    assert!(up["qlen"].is_u64() && up["backlog"].is_u64(), "{up}");
    assert!(up["sojourn_ewma_us"].as_u64().unwrap() > 2_000, "{up}");
    assert!(up["qlen_segments"].is_u64(), "{up}");
    assert!(text.contains("capacity 20Mbit"), "{text}");
}

/// `purple linkem --icmp apart`: under a bulk upload through a 10 Mbit/s droptail link, UDP
/// round trips sit behind the data queue while ICMP echo, queued apart and served first, does
/// not (what Starlink users see: pings low while transfers bloat).
fn icmp_apart_keeps_pings_out_of_the_bloated_queue() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let lab = lab_or_skip!();
    let up = LinkConfig {
        capacity: Capacity::Rate(1_250_000),
        buffer_packets: Some(200),
        icmp: IcmpPolicy::Apart,
        ..LinkConfig::default()
    };
    let down = LinkConfig {
        icmp: IcmpPolicy::Apart,
        ..LinkConfig::default()
    };
    let em = start(&lab, up, down, None);
    let lab = std::sync::Arc::new(lab);
    let l2 = lab.clone();
    let bulk = std::thread::spawn(move || {
        l2.tcp_goodput(
            7006,
            Duration::from_millis(1000),
            Duration::from_millis(2500),
        )
    });
    std::thread::sleep(Duration::from_millis(1200));
    let dst = lab.server;
    let pings = lab.spawn('c', move || {
        let mut c = daemon::probe::echo::EchoClient::new(dst, 0)?;
        let mut rtts = Vec::new();
        for _ in 0..20 {
            if let Some(r) = c.ping(Duration::from_millis(500))? {
                rtts.push(r.as_nanos() as u64);
            }
            std::thread::sleep(Duration::from_millis(40));
        }
        rtts.sort_unstable();
        Ok::<_, std::io::Error>(rtts)
    });
    let udp = lab.udp_rtts(7007, 20, Duration::from_millis(50)).unwrap();
    let icmp = pings.join().unwrap().unwrap().unwrap();
    let goodput = bulk.join().unwrap().unwrap();
    em.stop().unwrap();
    assert!(icmp.len() >= 15, "{} ICMP replies of 20", icmp.len());
    assert!(udp.len() >= 15, "{} UDP replies of 20", udp.len());
    let ms = |v: &[u64], q| rounded_rank(v, q).expect("samples") as f64 / 1e6;
    let (i50, u50, umax) = (ms(&icmp, 0.5), ms(&udp, 0.5), ms(&udp, 1.0));
    eprintln!(
        "goodput {:.2} Mbit/s; under load ICMP p50 {i50:.2} ms, UDP p50 {u50:.2} max {umax:.2} ms",
        goodput / 1e6
    );
    assert!((0.90..=1.0).contains(&(goodput / 10e6)), "{goodput}");
    assert!(umax > 10.0, "no bloat for UDP: p50 {u50} max {umax} ms");
    assert!(
        i50 < u50 / 2.0,
        "ICMP p50 {i50} ms is not clear of the data queue (UDP p50 {u50} ms)"
    );
}

testkit::harness! {
    [Netns] => {
        icmp_apart_keeps_pings_out_of_the_bloated_queue,
        twenty_ms_each_way_gives_a_forty_ms_round_trip,
        tcp_at_10mbit_fills_the_buffer_and_set_rate_changes_capacity_live,
    },
}
