//! `purple explain` end to end: the built binary on a decision log written as `purple control`
//! writes it.
#![allow(clippy::unwrap_used)]

use std::process::Command;

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
