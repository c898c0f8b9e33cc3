//! The Flent files we write load in the real Flent 2.3: `flent -i FILE -f summary` prints
//! every series we wrote with the mean we wrote, and `flent -i FILE -p PLOT -o X.png` draws the
//! test's canned plot (`all_scaled` for the rrul family, else the test's default plot), for
//! files from `purple sim`, `purple sim report` and `purple lab`. Needs Flent (`testkit::flent`:
//! `cargo xtask test` installs it); the lab test also needs root and network namespaces.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A fresh directory for one test's files (removed by [`Scratch`]'s drop).
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        let d = std::env::temp_dir().join(format!("purple-flent-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Scratch(d)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn purple(args: &[&str]) {
    let out = Command::new(env!("CARGO_BIN_EXE_purple"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "purple {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Every `*.flent.gz` under `dir`, at any depth, sorted.
fn flent_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(flent_files(&p));
        } else if p.to_string_lossy().ends_with(".flent.gz") {
            out.push(p);
        }
    }
    out.sort();
    out
}

/// The file's JSON.
fn load(path: &Path) -> serde_json::Value {
    let mut s = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(path).unwrap())
        .read_to_string(&mut s)
        .unwrap();
    serde_json::from_str(&s).unwrap()
}

/// The plot the check draws for Flent test `name`: `all_scaled` (download, upload, ping) for
/// the rrul family, else the test's default plot (`DEFAULTS['PLOT']` in its .conf).
fn plot_for(name: &str) -> &'static str {
    match name {
        "rrul" | "rrul_be" | "rrul_50_up" | "rrul_50_down" | "rrul_be_nflows" => "all_scaled",
        "ping" => "ping",
        "tcp_upload" | "tcp_download" | "tcp_bidirectional" | "tcp_nup" | "tcp_ndown"
        | "udp_flood" => "totals",
        other => panic!("no plot chosen for Flent test {other:?}"),
    }
}

fn flent(args: &[&str]) -> String {
    let bin = testkit::flent().unwrap();
    let out = Command::new(&bin).args(args).output().unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "flent {args:?} failed: {text}");
    assert!(
        !text.contains("Error") && !text.contains("Traceback"),
        "flent {args:?}: {text}"
    );
    text
}

/// `flent -i FILE -f summary`: each series' mean and number of points, by name.
fn summary(file: &Path) -> BTreeMap<String, (f64, usize)> {
    let text = flent(&["-i", file.to_str().unwrap(), "-f", "summary"]);
    let mut rows = BTreeMap::new();
    for line in text.lines() {
        let Some((name, rest)) = line.split_once(" : ") else {
            continue;
        };
        let cells: Vec<&str> = rest.split_whitespace().collect();
        if let (Some(avg), Some(n)) = (
            cells.first().and_then(|c| c.parse::<f64>().ok()),
            cells.last().and_then(|c| c.parse::<usize>().ok()),
        ) {
            rows.insert(name.trim().to_string(), (avg, n));
        }
    }
    assert!(!rows.is_empty(), "no series in the summary: {text}");
    rows
}

/// Loads `file` in Flent as a summary and as its test's plot, and checks both against what the
/// file holds; returns the Flent test's name and the summary.
fn check(file: &Path, dir: &Path) -> (String, BTreeMap<String, (f64, usize)>) {
    let v = load(file);
    let name = v["metadata"]["NAME"].as_str().unwrap().to_string();
    let rows = summary(file);
    // Every series we wrote, with a value, is listed with the mean of its values (Flent prints
    // two decimals).
    for (series, values) in v["results"].as_object().unwrap() {
        let vals: Vec<f64> = values
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|x| x.as_f64())
            .collect();
        if vals.is_empty() {
            continue;
        }
        let mean = vals.iter().sum::<f64>() / vals.len() as f64;
        let (avg, n) = rows
            .get(series)
            .unwrap_or_else(|| panic!("{}: Flent lists no {series:?}", file.display()));
        assert!(
            (avg - mean).abs() <= 0.006 + mean.abs() * 1e-9,
            "{series}: Flent's mean {avg} vs ours {mean}"
        );
        assert_eq!(*n, vals.len(), "{series}: data points");
    }
    let plot = plot_for(&name);
    let png = dir.join(format!("{name}-{plot}.png"));
    flent(&[
        "-i",
        file.to_str().unwrap(),
        "-p",
        plot,
        "-o",
        png.to_str().unwrap(),
    ]);
    let bytes = std::fs::read(&png).unwrap_or_default();
    assert!(
        bytes.starts_with(b"\x89PNG") && bytes.len() > 20_000,
        "{}: {plot} drew {} bytes",
        file.display(),
        bytes.len()
    );
    (name, rows)
}

/// Asserts the summary has `series` with a mean within `range`.
fn within(rows: &BTreeMap<String, (f64, usize)>, series: &str, range: std::ops::Range<f64>) {
    let (avg, _) = rows
        .get(series)
        .unwrap_or_else(|| panic!("no {series:?} in {rows:?}"));
    assert!(range.contains(avg), "{series}: {avg} not in {range:?}");
}

/// `purple sim fq-codel-short` (a TCP upload, a flood and a ping through 20 Mbit/s) is
/// Flent's `tcp_upload`.
fn a_builtin_scenario_loads_as_flents_tcp_upload() {
    let d = Scratch::new("sim");
    purple(&[
        "sim",
        "fq-codel-short",
        "--out",
        d.0.to_str().unwrap(),
        "--quiet",
    ]);
    let files = flent_files(&d.0);
    assert_eq!(files.len(), 1);
    let (name, rows) = check(&files[0], &d.0);
    assert_eq!(name, "tcp_upload");
    within(&rows, "TCP upload", 0.5..20.5);
    // 10 ms each way; FQ-CoDel's queue behind a 30 Mbit/s flood adds up to seconds.
    within(&rows, "Ping (ms) ICMP", 20.0..3000.0);
    within(&rows, "flood goodput", 1.0..20.5);
    within(&rows, "bottleneck tx", 15.0..20.5);
}

/// `purple sim report --only A3,B1`: A3 is `rrul` (with its computed totals), B1's runs are
/// `tcp_upload`, `tcp_download` and `tcp_bidirectional` (CAKE's are checked).
fn report_files_load_as_flents_rrul_and_tcp_tests() {
    let d = Scratch::new("report");
    purple(&[
        "sim",
        "report",
        "--only",
        "A3,B1",
        "--out",
        d.0.to_str().unwrap(),
        "--quiet",
    ]);
    let files = flent_files(&d.0);
    let pick = |part: &str| {
        files
            .iter()
            .find(|f| f.to_string_lossy().contains(part))
            .unwrap_or_else(|| panic!("no file with {part:?} in {files:?}"))
    };
    let (name, rows) = check(pick("A3_diffserv3"), &d.0);
    assert_eq!(name, "rrul");
    for dir in ["upload", "download"] {
        for m in ["BE", "BK", "CS5", "EF"] {
            within(&rows, &format!("TCP {dir} {m}"), 0.1..10.1);
        }
        within(&rows, &format!("TCP {dir} sum"), 8.0..10.1);
    }
    within(&rows, "TCP totals", 16.0..20.2);
    // 50 ms base RTT.
    within(&rows, "Ping (ms) ICMP", 49.0..120.0);
    within(&rows, "Ping (ms) avg", 49.0..120.0);
    let (name, rows) = check(pick("B1_CAKE_upload"), &d.0);
    assert_eq!(name, "tcp_upload");
    within(&rows, "TCP upload", 2.0..3.1);
    // 45 ms each way: a 90 ms base RTT; CAKE adds a few ms.
    within(&rows, "Ping (ms) ICMP", 89.0..110.0);
    let (name, rows) = check(pick("B1_CAKE_download"), &d.0);
    assert_eq!(name, "tcp_download");
    within(&rows, "TCP download", 10.0..20.1);
    let (name, rows) = check(pick("B1_CAKE_bidir"), &d.0);
    assert_eq!(name, "tcp_bidirectional");
    within(&rows, "TCP upload", 1.5..3.1);
    within(&rows, "TCP download", 8.0..20.1);
    within(&rows, "Ping (ms) ICMP", 89.0..120.0);
}

/// `purple lab run b2` (real kernel TCP through our bridge, 2 s) is Flent's `rrul`.
fn a_lab_run_loads_as_flents_rrul() {
    let d = Scratch::new("lab");
    purple(&[
        "lab",
        "run",
        "b2",
        "--seconds",
        "2",
        "--qdisc",
        "cake",
        "--no-sim",
        "--quiet",
        "--out",
        d.0.to_str().unwrap(),
    ]);
    let files = flent_files(&d.0);
    assert_eq!(files.len(), 1, "{files:?}");
    let (name, rows) = check(&files[0], &d.0);
    assert_eq!(name, "rrul");
    // Loose bounds: a 2 s run on a loaded 2-core machine can starve the userspace bridge.
    within(&rows, "TCP download sum", 0.05..20.5);
    within(&rows, "TCP upload sum", 0.01..3.2);
    within(&rows, "Ping (ms) ICMP", 89.0..2000.0);
    for p in ["Ping (ms) UDP BE", "Ping (ms) UDP BK", "Ping (ms) UDP EF"] {
        within(&rows, p, 89.0..2000.0);
    }
}

testkit::harness! {
    [Flent] => {
        a_builtin_scenario_loads_as_flents_tcp_upload,
        report_files_load_as_flents_rrul_and_tcp_tests,
    },
    [Netns, Flent] => { a_lab_run_loads_as_flents_rrul },
}
