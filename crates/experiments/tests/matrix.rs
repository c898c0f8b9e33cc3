//! The section-C matrix (`experiments::c::matrix`) on a tiny selection: medians and worst seeds
//! that match the runs, the targets computed from them, the sweep point at purple's own
//! target reusing purple's runs, and results independent of the thread count; and a user's own
//! link (`experiments::c::link`) from traces and from a link file, with errors naming the file
//! and the line.
#![allow(clippy::unwrap_used)]

use experiments::c::link;
use experiments::c::matrix::{self, MatrixLink, MatrixSpec, Role};
use std::path::PathBuf;

/// 2 links x 2 seeds, three contenders and a two-point sweep (2 ms is purple's own target), 6 s.
fn tiny(threads: usize) -> MatrixSpec {
    let mut s = MatrixSpec::new(2);
    s.links = vec![
        MatrixLink::Named("step".into()),
        MatrixLink::Named("att-lte".into()),
    ];
    s.roles = vec![Role::Purple, Role::OracleLate, Role::CakeAutorate];
    s.targets_ms = vec![2.0, 8.0];
    s.secs = Some(6.0);
    s.threads = threads;
    s
}

#[test]
fn the_matrix_reports_seed_medians_worst_seeds_and_the_targets() {
    let spec = tiny(0);
    // Purple's own target is not run twice: 3 contenders + 1 sweep point per seed and link.
    assert_eq!(spec.runs().unwrap(), 2 * 2 * 4);
    let r = matrix::run(&spec, &|_, _| {}).unwrap();
    assert_eq!(r.seeds, vec![1, 2]);
    assert_eq!(r.scenarios.len(), 2);
    for l in &r.scenarios {
        let ids: Vec<&str> = l.rows.iter().map(|x| x.id.as_str()).collect();
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
        for row in &l.rows {
            assert_eq!(row.seeds.iter().map(|m| m.seed).collect::<Vec<_>>(), [1, 2]);
            let (a, b) = (&row.seeds[0], &row.seeds[1]);
            // Two seeds: the median is their mean, the worst the lower share / higher latency.
            assert!((row.median.down_mbit - (a.down_mbit + b.down_mbit) / 2.0).abs() < 1e-9);
            assert_eq!(row.worst.down_share, a.down_share.min(b.down_share));
            assert_eq!(row.worst.up_share, a.up_share.min(b.up_share));
            assert_eq!(row.worst.rtt.p99, a.rtt.p99.max(b.rtt.p99));
            assert_eq!(row.worst.owd_down.p95, a.owd_down.p95.max(b.owd_down.p95));
            assert_eq!(row.worst.owd_up.p50, a.owd_up.p50.max(b.owd_up.p50));
            for m in &row.seeds {
                assert!(m.down_mbit > 0.0 && m.down_share > 0.0 && m.down_share < 1.2);
                assert!(m.rtt.p50 <= m.rtt.p95 && m.rtt.p95 <= m.rtt.p99);
                assert!(m.owd_down.p99 >= 0.0 && m.owd_up.p99 >= 0.0);
            }
        }
        let purple = l.row("purple").unwrap();
        assert_eq!(l.row("purple@2ms").unwrap().seeds, purple.seeds);
        assert_ne!(l.row("purple@8ms").unwrap().seeds, purple.seeds);
        // The targets: three against the late oracle, then the sweep's dominance.
        let late = l.row("oracle-late").unwrap();
        let f = l.figures.unwrap();
        assert!(
            (f.throughput_fraction - purple.median.down_mbit / late.median.down_mbit).abs() < 1e-12
        );
        assert!((f.p99_excess_ms - (purple.median.rtt.p99 - late.median.rtt.p99)).abs() < 1e-12);
        let per_seed: Vec<f64> = purple
            .seeds
            .iter()
            .zip(&late.seeds)
            .map(|(p, o)| p.down_mbit / o.down_mbit)
            .collect();
        assert_eq!(f.worst_fraction, per_seed[0].min(per_seed[1]));
        assert_eq!(l.claims.len(), 4);
        assert_eq!(l.claims[0].pass, f.throughput_fraction >= 0.90);
        assert_eq!(l.claims[1].pass, f.p99_excess_ms <= 2.0);
        assert_eq!(l.claims[2].pass, f.worst_fraction >= 0.80);
        let cake = l.row("cake-autorate").unwrap();
        let dominated = l
            .rows
            .iter()
            .filter(|x| x.id.starts_with("purple"))
            .any(|s| {
                s.median.down_mbit >= cake.median.down_mbit
                    && s.median.rtt.p95 <= cake.median.rtt.p95
            });
        assert_eq!(l.claims[3].pass, dominated);
        // The table: one line per row, median/worst cells.
        let t = l.table();
        assert_eq!(t.rows.len(), 5);
        assert!(t.rows[0][1].contains('/'), "{:?}", t.rows[0]);
    }
    assert_eq!(r.claims_total, 8);
    assert_eq!(
        r.claims_met,
        r.scenarios
            .iter()
            .flat_map(|l| &l.claims)
            .filter(|c| c.pass)
            .count()
    );
    // The JSON carries what the CLI prints.
    let v = serde_json::to_value(&r).unwrap();
    let row = &v["scenarios"][0]["rows"][0];
    for k in ["down_share", "up_share", "down_mbit"] {
        assert!(row["median"][k].is_f64() && row["worst"][k].is_f64(), "{k}");
    }
    for k in ["rtt", "owd_down", "owd_up"] {
        for p in ["p50", "p95", "p99"] {
            assert!(row["median"][k][p].is_f64(), "{k}.{p}");
        }
    }
}

#[test]
fn the_matrix_does_not_depend_on_the_thread_count() {
    let one = matrix::run(&tiny(1), &|_, _| {}).unwrap();
    let three = matrix::run(&tiny(3), &|_, _| {}).unwrap();
    assert_eq!(
        serde_json::to_string(&one).unwrap(),
        serde_json::to_string(&three).unwrap()
    );
}

/// A directory of one test's files, removed with everything in it when the test ends (passing
/// or failing).
struct TempDir(PathBuf);

impl TempDir {
    fn new(test: &str) -> TempDir {
        let dir =
            std::env::temp_dir().join(format!("purple-link-test-{}-{test}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    /// Writes `text` to the file `name` in the directory.
    fn file(&self, name: &str, text: &str) -> PathBuf {
        let p = self.0.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A mahimahi trace of `mbit` Mbit/s for `secs` seconds (1500-byte opportunities).
fn trace(mbit: f64, secs: u64) -> String {
    let per_ms = mbit * 1e6 / 8.0 / 1500.0 / 1000.0;
    let mut s = String::new();
    let mut owed = 0.0;
    for ms in 1..=secs * 1000 {
        owed += per_ms;
        while owed >= 1.0 {
            s += &format!("{ms}\n");
            owed -= 1.0;
        }
    }
    s
}

#[test]
fn a_users_traces_make_a_link_and_a_broken_one_names_the_file_and_line() {
    let tmp = TempDir::new("traces");
    let temp = |name: &str, text: &str| tmp.file(name, text);
    let down = temp("ok.down", &trace(12.0, 10));
    let up = temp("ok.up", &trace(3.0, 10));
    let sc = link::from_traces(&down, &up, Some(120), Some(20.0))
        .unwrap()
        .with_radio_delay(
            link::radio_delay_for_rtt(30.0).unwrap(),
            experiments::c::closed_loop::PATH_RTT,
        );
    assert_eq!((sc.link.secs, sc.link.buffer_packets), (20.0, 120));
    // 12 Mbit/s throughout: both static rates 12 (still labelled C2 and C3), the range up to
    // 1.2 x that.
    assert_eq!((sc.statics()[0].0, sc.statics()[1].0), (12.0, 12.0));
    let labels = experiments::c::labels(&experiments::c::demo_contenders(&sc));
    assert_eq!(labels[..3], ["C1", "C2", "C3"]);
    assert_eq!(labels.last(), Some(&"oracle-late"));
    assert!((sc.range_down().1.mbit() - 14.4).abs() < 100.0 * 8e-6);
    let rtt = experiments::c::closed_loop::PATH_RTT + sc.link.down.delay + sc.link.up.delay;
    assert!((rtt.as_millis_f64() - 30.0).abs() < 0.01, "{rtt:?}");
    assert!(
        sc.link.description.ends_with("idle round trip 30.0 ms"),
        "{}",
        sc.link.description
    );
    let bad = temp("bad.down", "1\n2\nthree\n4\n");
    let e = link::from_traces(&bad, &up, None, None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("bad.down") && e.contains("line 3"), "{e}");
    let e = link::radio_delay_for_rtt(2.0).unwrap_err().to_string();
    assert!(e.contains("--base-rtt-ms") && e.contains("8.4"), "{e}");
}

#[test]
fn a_link_file_uses_the_simulators_vocabulary_and_names_its_errors() {
    let tmp = TempDir::new("link-file");
    let temp = |name: &str, text: &str| tmp.file(name, text);
    temp("f.down", &trace(20.0, 5));
    temp("steps", "0 step 4mbit\n5 step 1mbit\n");
    let f = temp(
        "mine.toml",
        "duration_s = 10.0\nbuffer_packets = 200\n[down]\ntrace = \"f.down\"\ndelay_ms = 12.0\n\
         [up]\nschedule = \"steps\"\n",
    );
    let sc = link::from_file(&f, None).unwrap();
    assert_eq!(
        (sc.link.name.as_str(), sc.link.secs, sc.link.buffer_packets),
        ("mine", 10.0, 200)
    );
    assert_eq!(sc.link.down.delay.as_millis_f64(), 12.0);
    assert_eq!(sc.statics()[1].1, 4.0);
    // Relative trace paths resolve against the file; a broken trace names itself and its line.
    temp("b.down", "5\n7\n6\n");
    let f = temp(
        "broken.toml",
        "[down]\ntrace = \"b.down\"\n[up]\nrate = \"5mbit\"\n",
    );
    let e = link::from_file(&f, None).unwrap_err().to_string();
    assert!(e.contains("b.down: line 3") && e.contains("[down]"), "{e}");
    let f = temp(
        "typo.toml",
        "[down]\nrat = \"5mbit\"\n[up]\nrate = \"5mbit\"\n",
    );
    let e = link::from_file(&f, None).unwrap_err().to_string();
    assert!(e.contains("typo.toml") && e.contains("rat"), "{e}");
    let f = temp(
        "two.toml",
        "[down]\nrate = \"5mbit\"\ntrace = \"f.down\"\n[up]\nrate = \"1mbit\"\n",
    );
    let e = link::from_file(&f, None).unwrap_err().to_string();
    assert!(e.contains("exactly one of rate, trace, schedule"), "{e}");
}

#[test]
fn a_link_files_run_table_is_the_scenario_each_simulated_backend_runs() {
    use sim::deployment::Deployment;
    let tmp = TempDir::new("link-run");
    let f = tmp.file(
        "run.toml",
        "duration_s = 10.0\n[down]\nrate = \"20mbit\"\ndelay_ms = 5.0\n[up]\nrate = \"5mbit\"\n\
         delay_ms = 5.0\n[run]\ndeployment = \"home-router\"\ndownloads = 2\nuploads = 1\n\
         contenders = [\"static-safe\", \"purple\", \"oracle-late\"]\nbase_rtt_ms = 30.0\n",
    );
    let sc = link::from_file(&f, None).unwrap();
    assert_eq!(sc.deployment, Deployment::HOME_ROUTER);
    assert_eq!((sc.workload.downloads, sc.workload.uploads), (2, 1));
    assert_eq!(
        sc.roles,
        Some(vec![Role::StaticSafe, Role::Purple, Role::OracleLate])
    );
    // The round trip by section C's rule for a file: its delays kept, the path the rest.
    assert_eq!(sc.path_rtt.unwrap().as_millis_f64(), 20.0);
    assert!(
        sc.link.description.ends_with("; idle round trip 30.0 ms"),
        "{}",
        sc.link.description
    );
    // A command line's round trip replaces the file's, in the words too.
    let again = link::at_idle_rtt(sc.clone(), 12.0).unwrap();
    assert_eq!(again.path_rtt.unwrap().as_millis_f64(), 2.0);
    assert_eq!(again.link.description.matches("idle round trip").count(), 1);
    // `purple demo` runs the file's contenders, in its order.
    let cs = experiments::c::demo_contenders(&sc);
    assert_eq!(
        cs.iter().map(|c| c.name()).collect::<Vec<_>>(),
        [
            matrix::role_contender(Role::StaticSafe, &sc)
                .unwrap()
                .name(),
            matrix::role_contender(Role::Purple, &sc).unwrap().name(),
            matrix::role_contender(Role::OracleLate, &sc)
                .unwrap()
                .name(),
        ]
    );
    // The matrix runs them on that link, and the spec's contenders on the others.
    let mut spec = MatrixSpec::new(1);
    spec.links = vec![
        MatrixLink::Link(Box::new(sc.clone())),
        MatrixLink::Named("step".into()),
    ];
    spec.roles = vec![Role::Purple];
    spec.targets_ms = Vec::new();
    assert_eq!(spec.runs().unwrap(), 3 + 1);
    // VoIP calls from the file run beside the bulk load, with the flows' figures.
    let f = tmp.file(
        "voip.toml",
        "duration_s = 6.0\n[down]\nrate = \"20mbit\"\n[up]\nrate = \"5mbit\"\n\
         [run]\ndownloads = 1\nuploads = 1\nvoip = 2\n",
    );
    let sc = link::from_file(&f, None).unwrap();
    assert_eq!(sc.workload.voip, 2);
    let mut spec = experiments::c::closed_loop::LoopSpec::new(
        sc,
        experiments::c::closed_loop::Contender::Purple,
        1,
    );
    spec.secs = 6.0;
    spec.warmup = 1.5;
    let r = experiments::c::closed_loop::run(&spec).unwrap();
    let flows = &r.summary().flows;
    let names: Vec<&str> = flows.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(
        names[..4],
        ["TCP download 1", "TCP upload 1", "VoIP 1", "VoIP 2"]
    );
    for v in &flows[2..4] {
        // A 200-byte frame every 20 ms is 80 kbit/s.
        assert!(
            (v.goodput_bps - 80_000.0).abs() < 8_000.0,
            "{}",
            v.goodput_bps
        );
        assert_eq!(v.dscp, 46);
        let l = v.latency_ms.as_ref().expect("delivered");
        assert!(l.p99 < 100.0, "{}", l.p99);
    }
    // Out of range, the file's round trip names the key and the file.
    let f = tmp.file(
        "short.toml",
        "[down]\nrate = \"20mbit\"\ndelay_ms = 5.0\n[up]\nrate = \"5mbit\"\n\
         [run]\nbase_rtt_ms = 3.0\n",
    );
    let e = link::from_file(&f, None).unwrap_err().to_string();
    assert!(
        e.contains("short.toml: [run] base_rtt_ms 3: accepted 6.4 ..= "),
        "{e}"
    );
}

/// The saturated oracle runs only on request; when it does, the summary gains its column with
/// its points against the late oracle, and without it the summary has no such column.
#[test]
fn the_saturated_reference_runs_on_request_and_gets_its_own_summary_column() {
    assert!(!MatrixSpec::new(1).roles.contains(&Role::OracleSaturated(5)));
    let mut spec = MatrixSpec::new(1);
    spec.links = vec![MatrixLink::Named("fast".into())];
    spec.roles = vec![Role::Purple, Role::OracleLate, Role::OracleSaturated(5)];
    spec.targets_ms = vec![];
    spec.secs = Some(6.0);
    let r = matrix::run(&spec, &|_, _| {}).unwrap();
    let f = r.scenarios[0]
        .figures
        .expect("purple and the late oracle ran");
    let p = f.saturated[0].expect("the +5% point");
    assert_eq!(p.gain_pct, 5);
    assert!(p.throughput_fraction > 0.0 && p.p99_excess_ms.is_finite());
    assert!(f.saturated[1].is_none() && f.censored.iter().all(Option::is_none));
    let text = r.summary_table().to_text();
    assert!(text.contains("saturated oracle +5/25/100%"), "{text}");
    let row = text.lines().find(|l| l.starts_with("fast")).unwrap();
    assert!(row.trim_end().ends_with("| - | -"), "{row}");
    spec.roles.pop();
    let r = matrix::run(&spec, &|_, _| {}).unwrap();
    assert!(!r.summary_table().to_text().contains("saturated"));
}
