#![allow(clippy::unwrap_used)]
//! The router binary `purple-control` validates configurations like `purple control --check` and
//! names what it does not accept.

use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_purple-control"))
}

#[test]
fn check_accepts_the_packaged_config_and_summarises_it() {
    let cfg = concat!(env!("CARGO_MANIFEST_DIR"), "/../../packaging/purple.toml");
    let out = bin().args(["--check", "--config", cfg]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(
        s.contains(": OK") && s.contains("algorithm purple (defaults)"),
        "{s}"
    );
}

/// Runs `--check` on a configuration file holding `text` (written to a temporary directory
/// named after `tag`, removed afterwards).
fn check_text(tag: &str, text: &str) -> std::process::Output {
    let dir = std::env::temp_dir().join(format!("purple-control-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("purple.toml");
    std::fs::write(&f, text).unwrap();
    let out = bin()
        .args(["--check", "--config", f.to_str().unwrap()])
        .output()
        .unwrap();
    std::fs::remove_dir_all(&dir).ok();
    out
}

#[test]
fn check_names_the_laws_parameters_set_in_its_section() {
    let out = check_text("params", "[purple]\ntarget = 5\n[aimd]\ntarget = 20\n");
    let s = String::from_utf8_lossy(&out.stdout);
    // Only the chosen law's section is summarised.
    assert!(
        s.contains("algorithm purple (target = 5; the rest at their defaults)"),
        "{s}"
    );
}

#[test]
fn check_rejects_a_bad_option_naming_it_and_the_accepted_range() {
    let out = check_text("bad", "[probe]\nrate_hz = 0\n");
    assert!(!out.status.success());
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("rate_hz") && e.contains("accepted"), "{e}");
}

#[test]
fn unknown_arguments_are_refused_with_the_accepted_ones() {
    let out = bin().arg("--bandwidth").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(
        e.contains("--bandwidth") && e.contains("--config FILE"),
        "{e}"
    );
    let out = bin().args(["reflector", "--port", "x"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--port"));
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
    let out = bin()
        .args(["explain", log.to_str().unwrap()])
        .output()
        .unwrap();
    let json = bin()
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
    let out = bin()
        .args(["explain", "/nonexistent/purple.jsonl"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("/nonexistent/purple.jsonl"), "{e}");
    let out = bin().args(["explain"]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("explain needs a log file"));
    let out = bin()
        .args(["explain", "x", "--from", "soon"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("--from \"soon\""));
}
