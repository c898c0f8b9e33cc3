//! `purple explain` end to end: the built binary on a decision log written as `purple control`
//! writes it.
#![allow(clippy::unwrap_used)]

use std::process::Command;

fn purple() -> Command {
    Command::new(env!("CARGO_BIN_EXE_purple"))
}

#[test]
fn explain_reads_a_decision_log_and_refuses_none() {
    let d = |rate: u64, rule: &str| {
        format!(
            r#"{{"rate":{rate},"applied":true,"reason":"{rule}: x","rule":"{rule}","throughput":{rate},"cake_backlog":0,"delay_ms":1.0,"source":"probes"}}"#
        )
    };
    let mut text = String::from(
        r#"{"event":"start","t":0,"algorithm":"purple","actuator":"bridge","icmp_raw":false,"wall":1,"reflectors":[],"min":{"down":625000,"up":250000},"max":{"down":10000000,"up":4000000}}"#,
    );
    text.push('\n');
    for i in 0..10 {
        let t = 1.0 + 0.05 * f64::from(i);
        let up = d(4_000_000, "probe");
        text.push_str(&format!(
            r#"{{"event":"decision","t":{t},"down":{},"up":{up}}}"#,
            d(5_000_000, "capacity")
        ));
        text.push('\n');
    }
    let f = std::env::temp_dir().join(format!("purple-explain-cli-{}.jsonl", std::process::id()));
    std::fs::write(&f, text).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_purple"))
        .args(["explain", f.to_str().unwrap()])
        .output()
        .unwrap();
    std::fs::remove_file(&f).ok();
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(s.contains("10 decisions"), "{s}");
    assert!(
        s.contains("The upload rate sat at its configured maximum (32.00 Mbit/s) for 100.0%"),
        "{s}"
    );
    let none = Command::new(env!("CARGO_BIN_EXE_purple"))
        .arg("explain")
        .output()
        .unwrap();
    assert!(!none.status.success());
}

/// A decision log of `n` steps 50 ms apart, the download cut to its minimum by an outage
/// halfway, written to a temporary file named after `tag`; returns its path.
fn a_log(tag: &str, n: usize) -> std::path::PathBuf {
    use controller::PerDir;
    use daemon::log::{DirRecord, Record};
    let dir = |rate: u64, rule: &str| DirRecord {
        rate,
        applied: true,
        reason: format!("{rule}: ..."),
        rule: rule.into(),
        throughput: rate / 2,
        cake_backlog: Some(0),
        delay_ms: Some(2.0),
        passive_ms: None,
        source: "probes".into(),
    };
    let mut text = serde_json::to_string(&Record::Start {
        t: 0.0,
        algorithm: "purple".into(),
        actuator: "netlink".into(),
        icmp_raw: true,
        wall: 1e9,
        reflectors: vec![],
        params: Default::default(),
        min: Some(PerDir::new(625_000, 250_000)),
        max: Some(PerDir::new(10_000_000, 4_000_000)),
    })
    .unwrap();
    text.push('\n');
    for i in 0..n {
        let down = if i < n / 2 {
            dir(5_000_000, "capacity")
        } else {
            dir(625_000, "outage")
        };
        let r = Record::Decision {
            t: 1.0 + 0.05 * i as f64,
            down,
            up: dir(1_000_000, "hold"),
        };
        text.push_str(&serde_json::to_string(&r).unwrap());
        text.push('\n');
    }
    let f = std::env::temp_dir().join(format!("purple-explain-{tag}-{}.jsonl", std::process::id()));
    std::fs::write(&f, text).unwrap();
    f
}

#[test]
fn explain_says_why_the_rate_sat_at_its_minimum() {
    let log = a_log("text", 20);
    let out = purple()
        .args(["explain", log.to_str().unwrap()])
        .output()
        .unwrap();
    let json = purple()
        .args(["explain", log.to_str().unwrap(), "--from", "1.5", "--json"])
        .output()
        .unwrap();
    std::fs::remove_file(&log).ok();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(
        s.contains("20 decisions from 1.0 to 1.9 s, 50 ms apart; law purple"),
        "{s}"
    );
    assert!(
        s.contains("The download rate sat at its configured minimum (5.00 Mbit/s) for 50.0% of the time. What brought it there: outage (nothing delivered while a queue stood) 100.0%."),
        "{s}"
    );
    assert!(!s.contains("The upload rate sat"), "{s}");
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(v["steps"], 10, "--from 1.5 keeps the last ten");
    assert_eq!(v["dirs"]["down"]["at_min"], 1.0);
}

#[test]
fn explain_names_a_missing_log_and_a_bad_argument() {
    let out = purple()
        .args(["explain", "/nonexistent/purple.jsonl"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("/nonexistent/purple.jsonl"), "{e}");
    let out = purple()
        .args(["explain", "x", "--from", "soon"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("--from") && e.contains("soon"), "{e}");
}
