//! `purple bench sim --versus-ns3` end to end, without ns-3: our side runs and the missing ns-3
//! side is a clear error (exit status 2), never a silent zero. (With ns-3 installed, the same
//! command prints both sides; that needs apt and a minute of CPU, so it is a benchmark, not a
//! test.)

use std::process::{Command, Output};

fn purple(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_purple"))
        .args(args)
        .current_dir(std::env::temp_dir())
        .output()
        .expect("run purple")
}

/// An empty directory to give as `--ns3-prefix` (no ns-3 there; apt-get is never run for a
/// prefix other than /usr).
fn empty_prefix(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("purple-bench-cli-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

#[test]
fn versus_ns3_without_ns3_prints_our_side_and_names_what_is_missing() {
    let prefix = empty_prefix("table");
    let p = prefix.to_string_lossy();
    let o = purple(&[
        "bench",
        "sim",
        "--versus-ns3",
        "--seconds",
        "1",
        "--ns3-prefix",
        &p,
    ]);
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "stdout: {out}\nstderr: {err}");
    let row = out
        .lines()
        .find(|l| l.starts_with("purple "))
        .unwrap_or_else(|| panic!("no purple row in {out}"));
    let cols: Vec<&str> = row.split_whitespace().collect();
    let packets: u64 = cols[2].parse().expect("packets column");
    let progress: usize = cols[5].parse().expect("progress column");
    assert!(packets > 1000, "{row}");
    assert_eq!(
        progress, 50,
        "every flow (the last starts at 0.49 s) delivers within 1 s: {row}"
    );
    assert!(!out.contains("ns-3 3."), "no ns-3 row without ns-3: {out}");
    assert!(err.contains("ns-3 not found"), "{err}");
    assert!(err.contains("libns3-dev"), "{err}");
    assert!(err.contains("not under --ns3-prefix"), "{err}");
    let _ = std::fs::remove_dir_all(&prefix);
}

#[test]
fn versus_ns3_json_without_ns3_carries_the_error_and_no_ratio() {
    let prefix = empty_prefix("json");
    let p = prefix.to_string_lossy();
    let o = purple(&[
        "bench",
        "sim",
        "--versus-ns3",
        "--json",
        "--no-install",
        "--seconds",
        "0.2",
        "--ns3-prefix",
        &p,
    ]);
    assert_eq!(o.status.code(), Some(2));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("one JSON object");
    assert!(
        v["purple"]["packets"].as_u64().is_some_and(|n| n > 0),
        "{v}"
    );
    assert!(
        v["purple"]["cpu_s"].as_f64().is_some_and(|c| c > 0.0),
        "{v}"
    );
    assert!(v["ns3"].is_null(), "{v}");
    assert!(v["cpu_ratio"].is_null(), "{v}");
    let e = v["ns3_error"].as_str().expect("an error string");
    assert!(e.contains("--no-install"), "{e}");
    let _ = std::fs::remove_dir_all(&prefix);
}

#[test]
fn versus_ns3_options_need_versus_ns3() {
    let o = purple(&["bench", "sim", "--no-install"]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--versus-ns3"), "{err}");
}
