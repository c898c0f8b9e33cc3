//! The daemon loop in dry-run mode against reflectors on 127.0.0.1: a `purple reflector` (UDP
//! timestamp echo) thread, and the kernel's own ICMP timestamp/echo replies on loopback.
#![allow(clippy::unwrap_used)]

use daemon::config::Method;
use daemon::{Daemon, DaemonConfig, Exit};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

fn reflector() -> (u16, Arc<AtomicBool>, std::thread::JoinHandle<u64>) {
    let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = s.local_addr().unwrap().port();
    let stop = Arc::new(AtomicBool::new(false));
    let st = stop.clone();
    let h = std::thread::spawn(move || daemon::probe::udp::serve(&s, 1000, &st).unwrap());
    (port, stop, h)
}

#[test]
fn dry_run_loop_probes_loopback_reflectors_and_logs_decisions() {
    let (port, stop_refl, h) = reflector();
    let dir = std::env::temp_dir().join(format!("purple-dry-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let log = dir.join("control.jsonl");
    let text = format!(
        r#"
algorithm = "purple"
[download]
interface = "lo"
counter = "rx"
[upload]
interface = "lo"
[probe]
reflectors = ["udp:127.0.0.1:{port}", "127.0.0.1", "echo:127.0.0.1"]
rate_hz = 20
min_interval_ms = 50
[actuator]
kind = "dry-run"
[log]
path = "{}"
every_step = true
[metrics]
port = 0
[purple]
target = 5
"#,
        log.display()
    );
    let cfg = DaemonConfig::parse(&text).unwrap();
    let mut d = Daemon::new(cfg, false).unwrap();
    let stop = AtomicBool::new(false);
    let reload = AtomicBool::new(false);
    let exit = d
        .run(&stop, &reload, Some(qdisc::Duration::from_secs(3)))
        .unwrap();
    assert_eq!(exit, Exit::Stop);
    d.restore_safe();
    stop_refl.store(true, Ordering::Relaxed);
    let replies = h.join().unwrap();
    assert!(replies >= 10, "udp reflector answered {replies}");

    assert!(d.steps >= 5, "control steps: {}", d.steps);
    let health = d.health();
    for (addr, method, active, st) in &health {
        assert!(*active);
        assert!(st.sent >= 10, "{addr} {method:?} sent {}", st.sent);
        assert!(
            st.answered * 10 >= st.sent * 8,
            "{addr} {method:?}: {} of {} answered",
            st.answered,
            st.sent
        );
    }
    let raw = health.iter().any(|(_, m, _, _)| *m == Method::Timestamp);
    eprintln!("icmp timestamps used: {raw}");

    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["event"], "start");
    // The law's configured parameters are in the start line.
    assert_eq!(
        lines[0]["params"],
        serde_json::json!({"target": 5.0}),
        "{}",
        lines[0]
    );
    let decisions: Vec<_> = lines.iter().filter(|l| l["event"] == "decision").collect();
    assert!(decisions.len() >= 5, "{} decisions", decisions.len());
    assert!(decisions
        .iter()
        .all(|d| d["down"]["rate"].as_u64().unwrap() > 0));
    assert!(
        decisions.iter().any(|d| d["up"]["delay_ms"].is_number()),
        "delays were measured"
    );
    assert_eq!(
        lines.iter().filter(|l| l["event"] == "safe-rate").count(),
        2,
        "SIGTERM path restores both directions"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn reflector_that_stops_answering_is_rotated_out_for_a_spare() {
    let dir = std::env::temp_dir().join(format!("purple-rot-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let log = dir.join("c.jsonl");
    // Nothing listens on UDP port 1 of 127.0.0.1: no reply, ever. 127.0.0.1 (echo) is the spare.
    // Alone, its losses cannot be told from a link outage (no other reflector answers), so the
    // rule that rotates it is silence (`dead_after_ms`).
    let text = format!(
        "[download]\ninterface = \"lo\"\n[upload]\ninterface = \"lo\"\n[probe]\n\
         reflectors = [\"udp:127.0.0.1:1\", \"echo:127.0.0.1\"]\nactive = 1\n\
         rate_hz = 50\nmin_interval_ms = 0\ntimeout_ms = 50\ndead_after_ms = 300\n\
         [actuator]\nkind = \"dry-run\"\n\
         [log]\npath = \"{}\"\n",
        log.display()
    );
    let mut d = Daemon::new(DaemonConfig::parse(&text).unwrap(), false).unwrap();
    let f = AtomicBool::new(false);
    d.run(&f, &f, Some(qdisc::Duration::from_millis(1000)))
        .unwrap();
    let text = std::fs::read_to_string(&log).unwrap();
    let rotated: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v["event"] == "rotated")
        .collect();
    assert_eq!(rotated.len(), 1, "{text}");
    assert_eq!(rotated[0]["out"], "127.0.0.1:1");
    assert_eq!(rotated[0]["in"], "127.0.0.1:0");
    let h = d.health();
    let active: Vec<_> = h.iter().filter(|r| r.2).collect();
    assert_eq!(active.len(), 1);
    assert_eq!(active[0].0.to_string(), "127.0.0.1:0");
    assert!(active[0].3.answered > 0, "the spare answers: {h:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
