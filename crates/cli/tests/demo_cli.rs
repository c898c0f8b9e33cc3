//! `purple demo` end to end: the PURPLE comparison as JSON, its files, and the old CAKE demo
//! still reachable as `purple demo cake`.

use std::process::{Command, Output};

fn purple(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_purple"))
        .args(args)
        .current_dir(std::env::temp_dir())
        .output()
        .expect("run purple")
}

fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "exit {:?}: {}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout.clone()).expect("utf-8")
}

#[test]
fn demo_json_parses_and_lists_every_contender_with_latency_and_throughput() {
    let dir = std::env::temp_dir().join(format!("purple-demo-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let d = dir.to_str().expect("utf-8 path");
    let out = ok(&purple(&["demo", "--json", "--seconds", "4", "--out", d]));
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(v["scenario"], "radio");
    let c = v["contenders"].as_array().expect("contenders");
    assert_eq!(c.len(), 10);
    for x in c {
        for k in ["mean", "median", "min", "max", "std", "p95", "p99"] {
            assert!(x["latency_ms"][k].is_f64(), "{k} in {x}");
        }
        assert!(
            x["throughput_mbit"]["down"]
                .as_f64()
                .is_some_and(|t| t > 0.0),
            "{x}"
        );
    }
    assert!(c.iter().any(|x| x["name"] == "purple (ours)"));
    assert!(v["claims"].as_array().is_some_and(|a| !a.is_empty()));
    for f in [
        "index.html",
        "results.json",
        "latency-cdf.png",
        "shaped-rates.svg",
    ] {
        assert!(dir.join(f).is_file(), "{f} missing");
    }
    let html = std::fs::read_to_string(dir.join("index.html")).expect("html");
    assert!(html.contains("<table>") && html.contains("latency-cdf.png"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn demo_rejects_an_unknown_scenario_and_keeps_the_cake_demo() {
    let o = purple(&["demo", "--scenario", "nope", "--no-out"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown scenario"));
    let out = ok(&purple(&["demo", "cake", "--seconds", "2"]));
    assert!(out.contains("qdisc cake"), "{out}");
}
