//! `purple bench control` end to end (root, network namespaces): our daemon measured by the
//! inherited perf counters, and a stand-in for cake-autorate run the way a real checkout is
//! (its config sourced, `fping` probing six reflectors at 20 a second, its `tc` calls going to
//! purple's tc shim). The real cake-autorate is never part of the test suite: it is fetched by
//! the user, and `purple bench control --cake-autorate DIR` is the benchmark that runs it
//! (docs/performance.md).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::Command;

const PURPLE: &str = env!("CARGO_BIN_EXE_purple");

/// A directory holding a `cake-autorate.sh` that does what the bench relies on the real one
/// doing: reads its configuration (argument 1), asks `tc` for its qdisc, changes the rates
/// once alone and once in a batch, and pings its reflectors with fping until SIGTERM.
fn stand_in(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("purple-fake-autorate-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(
        d.join("cake-autorate.sh"),
        r#"#!/usr/bin/env bash
. "$1"
tc qdisc change root dev "$dl_if" cake bandwidth 12345Kbit
printf 'qdisc change root dev %s cake bandwidth 2000Kbit\nqdisc change root dev %s cake bandwidth 3000Kbit\n' "$dl_if" "$ul_if" | tc -force -batch -
tc qdisc show dev "$dl_if" > "$log_file_path_override/show.txt"
fping --loop --period 300 --quiet "${reflectors[@]}" 2>/dev/null &
trap 'kill $! 2>/dev/null; exit 0' TERM
wait
"#,
    )
    .unwrap();
    d
}

fn bench_counts_the_daemon_and_a_script_the_same_way_and_records_its_tc_calls() {
    let fake = stand_in("bench");
    let keep = fake.join("keep");
    let o = Command::new(PURPLE)
        .args([
            "bench",
            "control",
            "--seconds",
            "2",
            "--warmup",
            "1",
            "--json",
        ])
        .arg("--cake-autorate")
        .arg(&fake)
        .arg("--keep")
        .arg(&keep)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: serde_json::Value = serde_json::from_str(&out).expect("one JSON object");
    let f = |k: &str, f: &str| v[k][f].as_f64().unwrap_or(f64::NAN);
    for who in ["purple", "floor", "cake_autorate"] {
        // Both probe the six reflectors at 20 a second, and get the answers.
        let probes = f(who, "probes_per_s");
        assert!(
            (15.0..=26.0).contains(&probes),
            "{who}: {probes} probes/s in {v}"
        );
        assert!(f(who, "replies_per_s") >= probes * 0.8, "{who}: {v}");
        assert!(v[who]["counts"]["cpu_ns"].as_u64().unwrap() > 0, "{v}");
        assert!(f(who, "syscalls_per_s") > 1.0, "{who}: {v}");
        assert!(f(who, "wakeups_per_s") > 1.0, "{who}: {v}");
    }
    // Our daemon wakes once per probe and step (20 a second) and makes a few calls per wake-up.
    let w = f("purple", "wakeups_per_s");
    assert!((10.0..=45.0).contains(&w), "{w} wake-ups/s: {v}");
    let s = f("purple", "syscalls_per_s");
    assert!(
        s >= 2.0 * w && s <= 12.0 * w,
        "{s} system calls/s at {w} wake-ups/s"
    );
    // The floor makes the daemon's calls per wake-up (sleep, send, receive, two counters)
    // with nothing else: as many wake-ups, and as many calls within a few a second.
    let fw = f("floor", "wakeups_per_s");
    assert!((10.0..=45.0).contains(&fw), "floor: {fw} wake-ups/s: {v}");
    let fs = f("floor", "syscalls_per_s");
    assert!(
        (fs - s).abs() <= 0.25 * s,
        "floor {fs} against the daemon's {s} system calls/s"
    );
    // The ratios are the two rows' figures over each other.
    let r = v["ratio"]["cpu"].as_f64().unwrap();
    let want = f("cake_autorate", "percent_of_core") / f("purple", "percent_of_core");
    assert!(
        (r - want).abs() <= 1e-9 * want.abs().max(1.0),
        "{r} vs {want}"
    );
    // Every tc call went to the shim, in order, with its device and rate.
    let calls: Vec<(String, u64)> = v["tc_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["dev"].as_str().unwrap().to_string(),
                c["bit_s"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        calls,
        vec![
            ("lan".to_string(), 12_345_000),
            ("lan".to_string(), 2_000_000),
            ("wan".to_string(), 3_000_000)
        ]
    );
    assert_eq!(v["cake_autorate"]["rate_changes"], 3);
    // `tc qdisc show` answered as tc does for CAKE, at the device's rate in force.
    let show = std::fs::read_to_string(keep.join("cake-autorate-log/show.txt")).unwrap();
    assert!(show.starts_with("qdisc cake "), "{show}");
    assert!(
        show.contains("bandwidth 2Mbit") && show.contains("noatm overhead 0"),
        "{show}"
    );
    let _ = std::fs::remove_dir_all(&fake);
}

fn a_directory_without_cake_autorate_is_refused_before_anything_runs() {
    let d = std::env::temp_dir().join(format!("purple-not-autorate-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    let o = Command::new(PURPLE)
        .args(["bench", "control", "--cake-autorate"])
        .arg(&d)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("is not a cake-autorate checkout"), "{err}");
    let _ = std::fs::remove_dir_all(&d);
}

testkit::harness! {
    [Root, Netns] => { bench_counts_the_daemon_and_a_script_the_same_way_and_records_its_tc_calls },
    [] => { a_directory_without_cake_autorate_is_refused_before_anything_runs },
}
