//! Replays the packets recorded in tests/golden/traffic/ (sent through a real sch_cake on
//! Linux 6.1 by tests/golden/traffic/collect.sh) through our engine with the same configuration,
//! and compares the resulting `tc -j -s qdisc show` statistics with the kernel's, field by field.
//!
//! The kernel saw exactly these frames on veth0's egress: Ethernet II 02:00:00:00:00:01 ->
//! 02:00:00:00:00:02, IPv4 10.9.0.1 -> 10.9.0.2 without options, then an ICMP echo request or a
//! UDP datagram. TTL, IP ID, DF, ICMP id/seq and ports differ between the kernel's frames and
//! ours; none of them affects classification (DSCP only) or accounting (lengths only) — flow
//! hashing does depend on them, but nothing flow-dependent is compared.
//!
//! Compared: qdisc bytes, packets, drops, overlimits, backlog, qlen, min/max network size,
//! min/max adjusted size, avg_hdr_offset, and per tin: threshold_rate, sent_packets, sent_bytes,
//! backlog_bytes, drops, ecn_mark, ack_drops, max_pkt_len, flow_quantum, target/interval.
//! Not compared (timing- or hash-dependent): delays, way stats, flow counts, memory used,
//! capacity estimate.

#![allow(clippy::unwrap_used)]

use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;

use cake::tc::{stats_json, QdiscHeader};
use cake::{Cake, CakeConfig};
use qdisc::packet::FrameSpec;
use qdisc::{Dequeue, Duration, Instant, Qdisc};
use serde_json::Value;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden/traffic")
}

fn read(name: &str) -> String {
    std::fs::read_to_string(dir().join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// One packet of tests/golden/traffic/traffic.txt.
struct Sent {
    kind: String,
    dscp: u8,
    ecn: u8,
    payload: usize,
    ip_len: usize,
}

fn traffic() -> Vec<Sent> {
    read("traffic.txt")
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(f.len(), 5, "bad traffic line {l:?}");
            Sent {
                kind: f[0].to_string(),
                dscp: f[1].parse().unwrap(),
                ecn: f[2].parse().unwrap(),
                payload: f[3].parse().unwrap(),
                ip_len: f[4].parse().unwrap(),
            }
        })
        .collect()
}

fn cases() -> Vec<(String, Vec<String>)> {
    read("cases.txt")
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let (name, args) = l.split_once('|').unwrap();
            (
                name.to_string(),
                args.split_whitespace().map(String::from).collect(),
            )
        })
        .collect()
}

/// The frame the kernel sent for `s` (same MACs, addresses, lengths, TOS byte).
fn frame(s: &Sent, seq: u16) -> qdisc::packet::Packet {
    let src = IpAddr::V4(Ipv4Addr::new(10, 9, 0, 1));
    let dst = IpAddr::V4(Ipv4Addr::new(10, 9, 0, 2));
    let spec = match s.kind.as_str() {
        "icmp" => FrameSpec::icmp_echo(src, dst, 1, seq),
        "udp" => FrameSpec::udp(src, dst, 40000 + seq, 9),
        k => panic!("unknown kind {k}"),
    };
    let p = spec
        .with_dscp_ecn(s.dscp, s.ecn)
        .with_payload(s.payload)
        .packet();
    assert_eq!(
        p.len() as usize,
        14 + s.ip_len,
        "frame length of {}",
        s.kind
    );
    p
}

/// Runs the recorded traffic through our engine configured like `args`; returns our JSON.
fn replay(args: &[String], header: QdiscHeader) -> Value {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut cfg = CakeConfig::from_tc_args(&args).unwrap();
    cfg.psched_mtu = 1514;
    let mut q = Cake::new(cfg.clone(), 1);
    let mut drops = Vec::new();
    let mut now = Instant::ZERO;
    for (i, s) in traffic().iter().enumerate() {
        // One packet at a time, each leaving before the next arrives, as the pings did.
        now += Duration::from_millis(1);
        q.enqueue(now, frame(s, i as u16), &mut drops);
        match q.dequeue(now, &mut drops) {
            Dequeue::Packet(_) => {}
            other => panic!("packet {i} not dequeued at once: {other:?}"),
        }
    }
    assert!(drops.is_empty(), "we dropped {} packets", drops.len());
    serde_json::from_str(&stats_json(&cfg, &q.cake_stats(), header)).unwrap()
}

const QDISC_FIELDS: &[&str] = &[
    "bytes",
    "packets",
    "drops",
    "overlimits",
    "requeues",
    "backlog",
    "qlen",
    "min_network_size",
    "max_network_size",
    "min_adj_size",
    "max_adj_size",
    "avg_hdr_offset",
];

const TIN_FIELDS: &[&str] = &[
    "threshold_rate",
    "sent_packets",
    "sent_bytes",
    "backlog_bytes",
    "target_us",
    "interval_us",
    "drops",
    "ecn_mark",
    "ack_drops",
    "max_pkt_len",
    "flow_quantum",
];

/// Field-by-field differences between our JSON and the kernel's for one case.
fn differences(name: &str, ours: &Value, theirs: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let (o, t) = (&ours[0], &theirs[0]);
    if o["options"] != t["options"] {
        out.push(format!(
            "{name} options: ours {} kernel {}",
            o["options"], t["options"]
        ));
    }
    for f in QDISC_FIELDS {
        if o[f] != t[f] || t[f].is_null() {
            out.push(format!("{name} {f}: ours {} kernel {}", o[f], t[f]));
        }
    }
    let (ot, tt) = (o["tins"].as_array().unwrap(), t["tins"].as_array().unwrap());
    if ot.len() != tt.len() {
        out.push(format!("{name}: {} tins, kernel {}", ot.len(), tt.len()));
    }
    for (i, (a, b)) in ot.iter().zip(tt).enumerate() {
        for f in TIN_FIELDS {
            if a[f] != b[f] || b[f].is_null() {
                out.push(format!("{name} tin {i} {f}: ours {} kernel {}", a[f], b[f]));
            }
        }
    }
    out
}

#[test]
fn recorded_traffic_is_what_the_kernel_counted() {
    // Guards the recording itself: nothing but our packets crossed the qdisc (no ARP/ND/MLD).
    let t = traffic();
    let bytes: u64 = t.iter().map(|s| 14 + s.ip_len as u64).sum();
    let dscps: std::collections::BTreeSet<u8> = t.iter().map(|s| s.dscp).collect();
    assert_eq!(dscps.len(), 64, "every DSCP is exercised");
    for (name, _) in cases() {
        let k: Value = serde_json::from_str(&read(&format!("{name}.json"))).unwrap();
        assert_eq!(k[0]["packets"], t.len() as u64, "{name}");
        assert_eq!(k[0]["bytes"], bytes, "{name}");
        assert_eq!(k[0]["drops"], 0, "{name}");
    }
}

#[test]
fn stats_after_traffic_match_the_kernel_field_by_field_for_every_case() {
    let cs = cases();
    assert!(cs.len() >= 15, "only {} cases", cs.len());
    let mut failures = Vec::new();
    for (name, args) in &cs {
        let theirs: Value = serde_json::from_str(&read(&format!("{name}.json"))).unwrap();
        let header = QdiscHeader {
            handle_major: 0x8001,
            refcnt: theirs[0]["refcnt"].as_u64().unwrap() as u32,
        };
        let ours = replay(args, header);
        failures.extend(differences(name, &ours, &theirs));
    }
    assert!(
        failures.is_empty(),
        "{} differences:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn comparison_detects_a_one_unit_change_in_any_compared_field() {
    // The comparison is not vacuous: nudging any compared kernel value by one is reported.
    let (name, args) = cases().into_iter().find(|(n, _)| n == "diffserv4").unwrap();
    let theirs: Value = serde_json::from_str(&read(&format!("{name}.json"))).unwrap();
    let header = QdiscHeader {
        handle_major: 0x8001,
        refcnt: theirs[0]["refcnt"].as_u64().unwrap() as u32,
    };
    let ours = replay(&args, header);
    assert!(differences(&name, &ours, &theirs).is_empty());
    for f in QDISC_FIELDS {
        let mut t = theirs.clone();
        t[0][f] = Value::from(t[0][f].as_u64().unwrap() + 1);
        assert_eq!(differences(&name, &ours, &t).len(), 1, "{f}");
    }
    for tin in 0..4 {
        for f in TIN_FIELDS {
            let mut t = theirs.clone();
            t[0]["tins"][tin][f] = Value::from(t[0]["tins"][tin][f].as_u64().unwrap() + 1);
            assert_eq!(differences(&name, &ours, &t).len(), 1, "tin {tin} {f}");
        }
    }
}
