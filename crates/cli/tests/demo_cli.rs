//! `purple demo` end to end: the PURPLE comparison as JSON, its files, and the old CAKE demo
//! still reachable as `purple demo cake`; the matrix on a tiny selection; the comparison on a
//! user's own traces, and a broken trace named with its line.

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
    assert_eq!(c.len(), 11);
    assert_eq!(c[10]["name"], "oracle, one interval late");
    assert_eq!(c[10]["id"], "oracle-late");
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

fn temp_dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("purple-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

#[test]
fn demo_matrix_on_a_tiny_selection_prints_medians_and_worst_seeds_and_json_fields() {
    let dir = temp_dir("matrix-test");
    let d = dir.to_str().expect("utf-8 path");
    let args = [
        "demo",
        "--matrix",
        "--seeds",
        "2",
        "--scenarios",
        "step,att-lte",
        "--contenders",
        "purple,oracle-late,cake-autorate",
        "--targets",
        "2,8",
        "--seconds",
        "6",
    ];
    let out = ok(&purple(&[&args[..], &["--json", "--out", d]].concat()));
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(v["seeds"], serde_json::json!([1, 2]));
    let sc = v["scenarios"].as_array().expect("scenarios");
    assert_eq!(sc.len(), 2);
    assert_eq!(sc[0]["name"], "step");
    for s in sc {
        let rows = s["rows"].as_array().expect("rows");
        let ids: Vec<&str> = rows.iter().filter_map(|r| r["id"].as_str()).collect();
        assert_eq!(
            ids,
            [
                "purple",
                "oracle-late",
                "cake-autorate",
                "purple@2ms",
                "purple@8ms"
            ]
        );
        for r in rows {
            for which in ["median", "worst"] {
                for k in ["down_share", "up_share", "down_mbit"] {
                    assert!(r[which][k].is_f64(), "{which}.{k} in {r}");
                }
                for k in ["rtt", "owd_down", "owd_up"] {
                    for p in ["p50", "p95", "p99"] {
                        assert!(r[which][k][p].is_f64(), "{which}.{k}.{p} in {r}");
                    }
                }
            }
            assert_eq!(r["seeds"].as_array().map(Vec::len), Some(2));
        }
        assert_eq!(s["claims"].as_array().map(Vec::len), Some(4));
        assert!(s["figures"]["throughput_fraction"].is_f64());
    }
    for f in [
        "results.json",
        "report.md",
        "tradeoff-step.png",
        "tradeoff-att-lte.svg",
    ] {
        assert!(dir.join("matrix").join(f).is_file(), "{f} missing");
    }
    let _ = std::fs::remove_dir_all(&dir);
    // The text: one table per scenario with median/worst cells, PASS/FAIL lines, a summary.
    let text = ok(&purple(&[&args[..], &["--no-out"]].concat()));
    assert!(text.contains("median/worst"), "{text}");
    assert!(
        text.contains("== step") && text.contains("== att-lte"),
        "{text}"
    );
    assert!(text.contains("one-interval-late oracle's"), "{text}");
    assert!(text.contains("[PASS]") || text.contains("[FAIL]"), "{text}");
    assert!(text.contains("targets met"), "{text}");
}

/// A mahimahi trace of `per_ms` opportunities every millisecond for `ms` milliseconds.
fn trace(per_ms: usize, ms: usize) -> String {
    (1..=ms)
        .flat_map(|t| std::iter::repeat_n(format!("{t}\n"), per_ms))
        .collect()
}

#[test]
fn demo_runs_on_a_users_traces_with_every_contender_and_names_a_broken_line() {
    let dir = temp_dir("user-trace-test");
    // 12 and 2.4 Mbit/s (one or, every fifth ms, one 1500-byte opportunity per ms).
    std::fs::write(dir.join("u.down"), trace(1, 2000)).expect("write");
    let up: String = (1..=2000)
        .filter(|t| t % 5 == 0)
        .map(|t| format!("{t}\n"))
        .collect();
    std::fs::write(dir.join("u.up"), up).expect("write");
    let p = |f: &str| dir.join(f).to_string_lossy().into_owned();
    let out = ok(&purple(&[
        "demo",
        "--down-trace",
        &p("u.down"),
        "--up-trace",
        &p("u.up"),
        "--buffer-packets",
        "100",
        "--seconds",
        "6",
        "--json",
        "--no-out",
    ]));
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    let c = v["contenders"].as_array().expect("contenders");
    let names: Vec<&str> = c.iter().filter_map(|x| x["name"].as_str()).collect();
    for n in [
        "purple (ours)",
        "oracle (95% of capacity)",
        "oracle, one interval late",
        "cake-autorate",
        "FQ-CoDel (unshaped)",
    ] {
        assert!(names.contains(&n), "{n} missing from {names:?}");
    }
    // Every contender of the built-in trace scenarios plus the late oracle.
    assert_eq!(c.len(), 12, "{names:?}");
    for x in c {
        assert!(x["latency_ms"]["p99"].is_f64(), "{x}");
        let down = x["throughput_mbit"]["down"].as_f64().unwrap_or(0.0);
        assert!(down > 0.5 && down < 12.5, "{x}");
    }
    std::fs::write(dir.join("bad.down"), "1\n2x\n3\n").expect("write");
    let o = purple(&[
        "demo",
        "--down-trace",
        &p("bad.down"),
        "--up-trace",
        &p("u.up"),
        "--no-out",
    ]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("bad.down: line 2"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `purple demo --json --no-out --seconds 6` with `args`, as JSON.
fn demo_json(args: &[&str]) -> serde_json::Value {
    let mut a = vec!["demo", "--json", "--no-out", "--seconds", "6"];
    a.extend_from_slice(args);
    serde_json::from_str(&ok(&purple(&a))).expect("JSON")
}

/// `--home-router` deploys any link as `tmobile-lte-router` deploys `tmobile-lte`: the same
/// figures for every contender, and not the figures of the scenario's own deployment.
#[test]
fn home_router_deploys_a_link_as_the_router_scenario_does() {
    let flag = demo_json(&["--scenario", "tmobile-lte", "--home-router"]);
    let named = demo_json(&["--scenario", "tmobile-lte-router"]);
    let own = demo_json(&["--scenario", "tmobile-lte"]);
    assert_eq!(flag["contenders"], named["contenders"]);
    assert_ne!(flag["contenders"], own["contenders"]);
    assert!(
        flag["description"]
            .as_str()
            .is_some_and(|d| d.contains("deployed as a home router")),
        "{}",
        flag["description"]
    );
    // The lab is a router already: the flag is refused there but with --link-of (section C's
    // scenario deployed as one), naming the options.
    let o = purple(&["demo", "--lab", "--home-router"]);
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("--lab") && e.contains("--home-router"), "{e}");
}

/// A one-seed, 4 s matrix of purple alone on `step`, with `extra` options, as JSON.
fn small_matrix(extra: &[&str]) -> serde_json::Value {
    small_matrix_on("step", extra)
}

/// A one-seed, 4 s matrix of purple alone on `scenario`, with `extra` options, as JSON.
fn small_matrix_on(scenario: &str, extra: &[&str]) -> serde_json::Value {
    let mut a = vec![
        "demo",
        "--matrix",
        "--seeds",
        "1",
        "--scenarios",
        scenario,
        "--contenders",
        "purple",
        "--targets",
        "none",
        "--seconds",
        "4",
        "--json",
        "--no-out",
    ];
    a.extend_from_slice(extra);
    serde_json::from_str(&ok(&purple(&a))).expect("JSON")
}

/// `--holdout` runs the held-out links (and only them), in their order; with `--scenarios` it is
/// refused; a held-out name is accepted by `--scenarios` and an unknown one is refused naming
/// the held-out links too.
#[test]
fn matrix_holdout_runs_the_held_out_links_only() {
    let v: serde_json::Value = serde_json::from_str(&ok(&purple(&[
        "demo",
        "--matrix",
        "--holdout",
        "--seeds",
        "1",
        "--contenders",
        "purple",
        "--targets",
        "none",
        "--seconds",
        "2",
        "--json",
        "--no-out",
    ])))
    .expect("JSON");
    let names: Vec<&str> = v["scenarios"]
        .as_array()
        .expect("scenarios")
        .iter()
        .filter_map(|s| s["name"].as_str())
        .collect();
    assert_eq!(
        names,
        ["wisp", "lte-walk", "mmwave", "cable-evening", "wifi"]
    );
    let one = small_matrix_on("wifi", &[]);
    assert_eq!(one["scenarios"][0]["name"], "wifi");
    let o = purple(&["demo", "--matrix", "--holdout", "--scenarios", "step"]);
    assert!(!o.status.success());
    let o = purple(&["demo", "--matrix", "--scenarios", "nope", "--no-out"]);
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("held out: wisp"), "{e}");
}

/// `--home-router` with `--matrix` deploys every link that way: its description says so and
/// purple's figures are not those of the scenario's own deployment.
#[test]
fn matrix_home_router_deploys_every_link_as_a_router() {
    let (router, own) = (small_matrix(&["--home-router"]), small_matrix(&[]));
    let d = router["scenarios"][0]["description"].as_str().unwrap_or("");
    assert!(d.contains("deployed as a home router"), "{d}");
    assert_ne!(router["scenarios"][0]["rows"], own["scenarios"][0]["rows"]);
}

/// `--base-rtt-ms` sets the idle round trip of a built-in link (the radio hop's delay each way):
/// the scenario's own 10.4 ms changes nothing, a longer one says so in the description and
/// changes the figures, a shorter one shortens the simulated path, one below the radio's own
/// delays and the path's edge links is refused naming the option and the accepted range, and
/// with `--matrix` every link gets it. A link file keeps its delays and the path takes the
/// rest.
#[test]
fn base_rtt_sets_a_built_in_links_round_trip() {
    let own = demo_json(&["--scenario", "step"]);
    let same = demo_json(&["--scenario", "step", "--base-rtt-ms", "10.4"]);
    let long = demo_json(&["--scenario", "step", "--base-rtt-ms", "48.4"]);
    assert_eq!(own["contenders"], same["contenders"]);
    assert_eq!(own["description"], same["description"]);
    assert_ne!(own["contenders"], long["contenders"]);
    let d = long["description"].as_str().unwrap_or("");
    assert!(d.ends_with("idle round trip 48.4 ms"), "{d}");
    let short = demo_json(&["--scenario", "step", "--base-rtt-ms", "5"]);
    let d = short["description"].as_str().unwrap_or("");
    assert!(d.ends_with("idle round trip 5.0 ms"), "{d}");
    assert_ne!(own["contenders"], short["contenders"]);
    let o = purple(&["demo", "--no-out", "--base-rtt-ms", "2"]);
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("--base-rtt-ms 2: accepted 2.4 ..="), "{e}");
    let file = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scenarios/links/lab-radio.toml"
    );
    let lab = demo_json(&["--link", file, "--base-rtt-ms", "10.8"]);
    let d = lab["description"].as_str().unwrap_or("");
    assert!(d.ends_with("idle round trip 10.8 ms"), "{d}");
    let o = purple(&["demo", "--no-out", "--link", file, "--base-rtt-ms", "10"]);
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("--base-rtt-ms 10: accepted 10.4 ..="), "{e}");
    let m = small_matrix(&["--base-rtt-ms", "48.4"]);
    let d = m["scenarios"][0]["description"].as_str().unwrap_or("");
    assert!(d.contains("idle round trip 48.4 ms"), "{d}");
}

/// The lab's radio as a link file (`scenarios/links/lab-radio.toml`, the reference for the
/// lab's target in docs/purple.md) loads and runs: its capacity after the 6 s run's 1.5 s
/// warm-up is the schedule's (3.5 s at 130 Mbit/s, 1 s at 80) and the fixed 50 Mbit/s uplink,
/// both static rates sit at 130/50, and the late oracle is listed.
#[test]
fn the_lab_radio_link_file_runs_with_every_contender() {
    let file = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scenarios/links/lab-radio.toml"
    );
    let d = demo_json(&["--link", file]);
    let c = d["contenders"].as_array().expect("contenders");
    let cap = &c[0]["capacity_mbit"];
    let down = cap["down"].as_f64().expect("down capacity");
    assert!((down - (130.0 * 3.5 + 80.0) / 4.5).abs() < 0.1, "{cap}");
    assert_eq!(cap["up"].as_f64(), Some(50.0), "{cap}");
    let names: Vec<&str> = c.iter().filter_map(|x| x["name"].as_str()).collect();
    assert_eq!(
        names
            .iter()
            .filter(|n| n.starts_with("CAKE static 130/50"))
            .count(),
        2,
        "{names:?}"
    );
    assert!(names.contains(&"oracle, one interval late"), "{names:?}");
}

/// A link file's `[run]` table is the experiment: `purple demo --link` runs exactly its
/// contenders in its order, deployed and loaded as it says, at its round trip (the same figures
/// as the command line's `--home-router` and `--base-rtt-ms` give); `--base-rtt-ms` takes
/// precedence over the file's; a bad key names the file and the key.
#[test]
fn a_link_files_run_table_runs_its_contenders_deployment_and_round_trip() {
    let dir = std::env::temp_dir().join(format!("purple-run-table-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let link =
        "[down]\nrate = \"40mbit\"\ndelay_ms = 5.0\n[up]\nrate = \"10mbit\"\ndelay_ms = 5.0\n";
    let write = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).expect("write");
        p.to_str().expect("utf-8").to_string()
    };
    let plain = write("plain.toml", link);
    let run = write(
        "run.toml",
        &format!(
            "{link}[run]\ndeployment = \"home-router\"\ncontenders = [\"purple\", \
             \"oracle-late\"]\nbase_rtt_ms = 30.0\n"
        ),
    );
    let v = demo_json(&["--link", &run]);
    let c = v["contenders"].as_array().expect("contenders");
    let ids: Vec<&str> = c.iter().filter_map(|x| x["id"].as_str()).collect();
    assert_eq!(ids, ["ours", "oracle-late"]);
    let flags = demo_json(&["--link", &plain, "--home-router", "--base-rtt-ms", "30"]);
    let fc = flags["contenders"].as_array().expect("contenders");
    // Without [run]: section C's, the two passive ones at a router, the late oracle.
    assert_eq!(fc.len(), 13);
    let pick = |cs: &[serde_json::Value], id: &str| {
        cs.iter().find(|x| x["id"] == id).cloned().expect("listed")
    };
    for id in ["ours", "oracle-late"] {
        assert_eq!(pick(c, id), pick(fc, id), "{id}");
    }
    let d = v["description"].as_str().unwrap_or("");
    assert!(d.ends_with("idle round trip 30.0 ms"), "{d}");
    let over = demo_json(&["--link", &run, "--base-rtt-ms", "12"]);
    let d = over["description"].as_str().unwrap_or("");
    assert!(d.ends_with("idle round trip 12.0 ms"), "{d}");
    assert_eq!(d.matches("idle round trip").count(), 1, "{d}");
    let bad = write("bad.toml", &format!("{link}[run]\ndownloads = 0\n"));
    let o = purple(&["demo", "--no-out", "--link", &bad]);
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("bad.toml: [run] downloads 0: accepted 1 ..= 64"),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
