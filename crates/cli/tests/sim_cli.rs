//! `purple sim` end to end: runs the built binary.

use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Output};

fn purple(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_purple"))
        .args(args)
        // Not the repository root: built-ins must work from any directory.
        .current_dir(std::env::temp_dir())
        .output()
        .expect("run purple")
}

fn stdout(o: &Output) -> String {
    assert!(
        o.status.success(),
        "exit {:?}: {}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout.clone()).expect("utf-8")
}

fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("purple-cli-test-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn list_shows_the_builtin_scenarios_with_descriptions() {
    let out = stdout(&purple(&["sim", "--list"]));
    let line = out
        .lines()
        .find(|l| l.starts_with("cake-dumbbell "))
        .unwrap_or_else(|| panic!("no cake-dumbbell in {out}"));
    assert!(line.contains("Mbit/s"), "{line}");
    assert!(
        out.lines().any(|l| l.starts_with("fq-codel-short ")),
        "{out}"
    );
    // The published experiments are listed too, by id.
    for id in ["A2", "B2"] {
        assert!(
            out.lines().any(|l| l.starts_with(&format!("{id} "))),
            "{out}"
        );
    }
}

#[test]
fn json_output_has_the_documented_keys_and_is_deterministic() {
    let a = stdout(&purple(&["sim", "cake-dumbbell", "--json", "--seed", "3"]));
    let b = stdout(&purple(&["sim", "cake-dumbbell", "--json", "--seed", "3"]));
    assert_eq!(a, b, "same seed, same output");
    assert_eq!(a.lines().count(), 1, "exactly one JSON object");
    let v: serde_json::Value = serde_json::from_str(&a).expect("JSON");
    assert_eq!(v["scenario"], "cake-dumbbell");
    assert_eq!(v["seed"], 3);
    assert_eq!(v["duration_s"], 30.0);
    let flows = v["flows"].as_array().expect("flows");
    assert!(flows.len() >= 4);
    for f in flows {
        for k in ["name", "src", "dst", "dscp", "goodput_bps", "loss"] {
            assert!(!f[k].is_null(), "flow lacks {k}: {f}");
        }
        for k in ["mean", "p50", "p95", "p99", "max"] {
            assert!(
                f["latency_ms"][k].is_number(),
                "flow lacks latency {k}: {f}"
            );
        }
    }
    let voip = flows
        .iter()
        .find(|f| f["name"] == "voip@a:6000")
        .expect("voip");
    assert_eq!(voip["dscp"], 46);
    assert_eq!(voip["src"], "10.0.0.1");
    let links = v["links"].as_array().expect("links");
    assert!(links
        .iter()
        .all(|l| l["name"].is_string() && l["utilisation"].is_number()));
    let q = v["qdiscs"].as_array().expect("qdiscs");
    assert!(
        q.iter()
            .any(|q| q["kind"] == "cake" && q["link"] == "r->b (fwd)"),
        "{q:?}"
    );
    let other = stdout(&purple(&["sim", "cake-dumbbell", "--json", "--seed", "4"]));
    assert_ne!(a, other, "the seed changes the run");
}

#[test]
fn named_flows_links_and_baseline_qdisc_stats_use_tc_key_names() {
    let out = stdout(&purple(&["sim", "fq-codel-short", "--json"]));
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    let names: Vec<&str> = v["flows"]
        .as_array()
        .expect("flows")
        .iter()
        .filter_map(|f| f["name"].as_str())
        .collect();
    assert_eq!(names, ["bulk (acks)", "bulk", "flood", "ping"]);
    let q = &v["qdiscs"][0];
    assert_eq!(q["link"], "bottleneck");
    assert_eq!(q["kind"], "fq_codel");
    for k in [
        "bytes",
        "packets",
        "drops",
        "overlimits",
        "requeues",
        "backlog",
        "qlen",
    ] {
        assert!(q[k].is_u64(), "qdisc lacks {k}: {q}");
    }
    // A 30 Mbit/s flood into 20 Mbit/s: FQ-CoDel drops.
    assert!(q["drops"].as_u64().unwrap_or(0) > 0, "{q}");
    assert_eq!(v["qdiscs"][1]["link"], "bottleneck (rev)");
}

#[test]
fn out_writes_summary_png_svg_and_a_flent_file() {
    let dir = temp_dir("out");
    let d = dir.to_str().expect("utf-8 path");
    let text = stdout(&purple(&["sim", "fq-codel-short", "--out", d, "--quiet"]));
    assert!(text.contains("bulk"), "{text}");
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("summary.json")).expect("summary.json"))
            .expect("summary is JSON");
    assert_eq!(summary["scenario"], "fq-codel-short");
    for chart in ["throughput", "latency", "latency-cdf", "shares"] {
        let png = std::fs::read(dir.join(format!("fq-codel-short-{chart}.png"))).expect("png");
        assert!(
            png.len() > 1000 && png.starts_with(b"\x89PNG"),
            "{chart}.png"
        );
        let svg =
            std::fs::read_to_string(dir.join(format!("fq-codel-short-{chart}.svg"))).expect("svg");
        assert!(svg.contains("<svg") && svg.contains("<text"), "{chart}.svg");
    }
    let gz = std::fs::File::open(dir.join("fq-codel-short.flent.gz")).expect("flent.gz");
    let mut s = String::new();
    flate2::read::GzDecoder::new(gz)
        .read_to_string(&mut s)
        .expect("gunzips");
    let f: serde_json::Value = serde_json::from_str(&s).expect("flent JSON");
    assert_eq!(f["version"], 4);
    for k in ["NAME", "TITLE", "T0", "LENGTH", "STEP_SIZE", "SERIES_META"] {
        assert!(!f["metadata"][k].is_null(), "metadata lacks {k}");
    }
    let x = f["x_values"].as_array().expect("x_values");
    assert_eq!(x.len(), 40, "2 s in 50 ms bins");
    // One TCP flow and a ping from the client: Flent's tcp_upload, under Flent's names
    // (crates/cli/tests/flent_real.rs loads it in Flent itself).
    assert_eq!(f["metadata"]["NAME"], "tcp_upload");
    let g = f["results"]["TCP upload"].as_array().expect("TCP upload");
    assert_eq!(g.len(), x.len());
    assert!(g.iter().filter_map(|v| v.as_f64()).sum::<f64>() > 0.0);
    assert!(f["results"]["Ping (ms) ICMP"].is_array());
    assert!(f["results"]["flood goodput"].is_array(), "an extra series");
    assert_eq!(f["metadata"]["SERIES_META"]["TCP upload"]["FLOW"], "bulk");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_toml_file_with_a_seed_override_runs_from_its_path() {
    let dir = temp_dir("file");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let p = dir.join("tiny.toml");
    std::fs::write(
        &p,
        "seed = 9\nduration_s = 1.0\n[[node]]\nname = \"a\"\naddrs = [\"10.0.0.1\"]\n\
         [[node]]\nname = \"b\"\naddrs = [\"10.0.0.2\"]\n\
         [[link]]\nfrom = \"a\"\nto = \"b\"\nrate = \"10mbit\"\ndelay_ms = 5.0\nbidirectional = true\n\
         [[app]]\nkind = \"ping\"\nnode = \"a\"\ndst = \"10.0.0.2\"\nport = 1\ninterval_ms = 100.0\n",
    )
    .expect("write");
    let out = stdout(&purple(&[
        "sim",
        p.to_str().expect("utf-8"),
        "--json",
        "--seed",
        "5",
    ]));
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(v["scenario"], "tiny");
    assert_eq!(v["seed"], 5);
    let rtt = v["flows"][0]["latency_ms"]["p50"].as_f64().expect("p50");
    assert!(
        (10.0..11.0).contains(&rtt),
        "ping RTT {rtt} ms over 2 x 5 ms"
    );
    assert_eq!(v["qdiscs"], serde_json::json!([]));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn unknown_scenarios_and_experiment_ids_fail_with_a_clear_message() {
    let o = purple(&["sim", "no-such-scenario"]);
    assert_eq!(o.status.code(), Some(2));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("no-such-scenario") && e.contains("cake-dumbbell"),
        "{e}"
    );
    let o = purple(&["sim", "report", "--only", "XX"]);
    assert_eq!(o.status.code(), Some(2));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("unknown experiment id \"XX\""), "{e}");
}

#[test]
fn report_prints_a_claims_summary_and_exits_zero() {
    let dir = temp_dir("report");
    let d = dir.to_str().expect("utf-8 path");
    // One cheap experiment (A6, the shaper's accuracy) exercises the whole report path.
    let out = stdout(&purple(&[
        "sim", "report", "--only", "A6", "--out", d, "--quiet",
    ]));
    assert!(out.contains("claims reproduced"), "{out}");
    let md = std::fs::read_to_string(dir.join("report.md")).expect("report.md");
    assert!(md.starts_with("# purple experiment report"), "{md}");
    assert!(md.contains("A6"), "{md}");
    let j = stdout(&purple(&["sim", "report", "--only", "A6", "--json"]));
    let v: serde_json::Value = serde_json::from_str(&j).expect("JSON");
    assert!(v["experiments"].is_array() && v["claims_total"].is_u64());
    assert_eq!(v["experiments"].as_array().map(Vec::len), Some(1), "{v}");
    assert!(v["claims_total"].as_u64() > Some(0), "{v}");
    let _ = std::fs::remove_dir_all(&dir);
}
