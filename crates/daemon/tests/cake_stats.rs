//! The daemon reads CAKE's statistics through a mock `purple bridge` control socket (one command
//! per connection, like the real one) and feeds them to the controller; a shaper whose
//! statistics cannot be read is logged once and the daemon goes on.
#![allow(clippy::unwrap_used)]

use daemon::{Daemon, DaemonConfig};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

const STATS: &str = r#"[{"kind":"cake","drops":3,"backlog":1200,"qlen":1,"tins":[{"ecn_mark":1}],"purple":{"direction":"egress"}},{"kind":"cake","drops":5,"backlog":30000,"qlen":20,"tins":[{"ecn_mark":2},{"ecn_mark":4}],"purple":{"direction":"ingress"}}]
"#;

/// A mock bridge at `path`: answers `stats --json` with `stats` and `set-bandwidth` with a
/// line; returns the commands it got, in order, once `stop` is set.
fn mock_bridge(
    path: &Path,
    stats: &'static str,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<Vec<String>> {
    mock_bridge_with(path, move || stats.to_string(), stop)
}

/// [`mock_bridge`] whose `stats --json` answer is made afresh for every request.
fn mock_bridge_with(
    path: &Path,
    mut stats: impl FnMut() -> String + Send + 'static,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<Vec<String>> {
    let _ = std::fs::remove_file(path);
    let l = UnixListener::bind(path).unwrap();
    l.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        let mut got = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            let Ok((s, _)) = l.accept() else {
                std::thread::sleep(std::time::Duration::from_millis(1));
                continue;
            };
            s.set_nonblocking(false).unwrap();
            let mut r = BufReader::new(s);
            let mut line = String::new();
            if r.read_line(&mut line).is_err() {
                continue;
            }
            let answer = if line.starts_with("stats --json") {
                stats()
            } else {
                "egress bandwidth 20Mbit\n".to_string()
            };
            let _ = r.get_mut().write_all(answer.as_bytes());
            got.push(line);
        }
        got
    })
}

fn config(sock: &Path, log: &Path, interval_ms: u64) -> DaemonConfig {
    let text = format!(
        "cake_stats_interval_ms = {interval_ms}\n\
         [download]\ninterface = \"lo\"\n[upload]\ninterface = \"lo\"\n\
         [probe]\nreflectors = [\"udp:127.0.0.1:1\"]\nrate_hz = 5\n\
         [actuator]\nkind = \"bridge\"\nbridge_socket = \"{}\"\n\
         [log]\npath = \"{}\"\nevery_step = true\n",
        sock.display(),
        log.display()
    );
    DaemonConfig::parse(&text).unwrap()
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("purple-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn log_lines(log: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn daemon_reads_bridge_cake_backlog_and_counters_every_step_and_logs_backlog_per_direction() {
    let dir = scratch("cstats");
    let (sock, log) = (dir.join("b.sock"), dir.join("c.jsonl"));
    let stop = Arc::new(AtomicBool::new(false));
    let h = mock_bridge(&sock, STATS, stop.clone());
    let mut d = Daemon::new(config(&sock, &log, 50), false).unwrap();
    let f = AtomicBool::new(false);
    d.run(&f, &f, Some(qdisc::Duration::from_millis(1000)))
        .unwrap();
    stop.store(true, Ordering::Relaxed);
    let got = h.join().unwrap();
    let reads = got.iter().filter(|l| *l == "stats --json\n").count();
    // 1 s at 50 ms: about 20 reads (the first at start); a loaded machine may lose a few.
    assert!((12..=22).contains(&reads), "{reads} stats reads: {got:?}");
    let lines = log_lines(&log);
    let decisions: Vec<_> = lines.iter().filter(|l| l["event"] == "decision").collect();
    assert!(decisions.len() >= 10, "{} decisions", decisions.len());
    let last = decisions.last().unwrap();
    assert_eq!(last["down"]["cake_backlog"], 30000, "{last}");
    assert_eq!(last["up"]["cake_backlog"], 1200, "{last}");
    assert!(lines.iter().all(|l| l["event"] != "cake-stats-error"));
    // The samples reached the controller: at every step two CAKE stats and, with the counters
    // read right before every step too, two throughputs (none on the very first read).
    assert!(
        d.samples_fed >= 4 * (reads as u64 - 1),
        "fed {} over {reads} steps",
        d.samples_fed
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn unreadable_cake_stats_are_logged_once_retried_each_second_and_the_daemon_goes_on() {
    let dir = scratch("cstats-err");
    let (sock, log) = (dir.join("b.sock"), dir.join("c.jsonl"));
    let stop = Arc::new(AtomicBool::new(false));
    let h = mock_bridge(&sock, "error: stats unavailable\n", stop.clone());
    let mut d = Daemon::new(config(&sock, &log, 50), false).unwrap();
    let f = AtomicBool::new(false);
    d.run(&f, &f, Some(qdisc::Duration::from_millis(1500)))
        .unwrap();
    stop.store(true, Ordering::Relaxed);
    let got = h.join().unwrap();
    let reads = got.iter().filter(|l| *l == "stats --json\n").count();
    assert!(
        (1..=2).contains(&reads),
        "retried at most once a second: {reads}"
    );
    assert!(d.steps >= 10, "the loop went on: {} steps", d.steps);
    let lines = log_lines(&log);
    let errors: Vec<_> = lines
        .iter()
        .filter(|l| l["event"] == "cake-stats-error")
        .collect();
    assert_eq!(errors.len(), 1, "logged once");
    assert!(errors[0]["error"]
        .as_str()
        .unwrap()
        .contains("stats unavailable"));
    let decisions: Vec<_> = lines.iter().filter(|l| l["event"] == "decision").collect();
    assert!(decisions
        .iter()
        .all(|l| l["down"]["cake_backlog"].is_null()));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn cake_stats_interval_zero_never_asks_the_shaper() {
    let dir = scratch("cstats-off");
    let (sock, log) = (dir.join("b.sock"), dir.join("c.jsonl"));
    let stop = Arc::new(AtomicBool::new(false));
    let h = mock_bridge(&sock, STATS, stop.clone());
    let mut d = Daemon::new(config(&sock, &log, 0), false).unwrap();
    let f = AtomicBool::new(false);
    d.run(&f, &f, Some(qdisc::Duration::from_millis(400)))
        .unwrap();
    stop.store(true, Ordering::Relaxed);
    let got = h.join().unwrap();
    assert!(got.iter().all(|l| !l.starts_with("stats")), "{got:?}");
    assert!(got.iter().any(|l| l.starts_with("set-bandwidth")));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Runs the daemon for 1 s against a mock bridge whose ingress (download) CAKE reports, per
/// `stats --json` read, `sent` more bytes sent and, where given, `arrived` more bytes arrived,
/// with a backlog; the upload's CAKE reports nothing moving. Returns the median of the
/// download throughputs (B/s) its decisions logged.
fn download_throughput_median(name: &str, sent: u64, arrived: Option<u64>) -> f64 {
    let dir = scratch(name);
    let (sock, log) = (dir.join("b.sock"), dir.join("c.jsonl"));
    let stop = Arc::new(AtomicBool::new(false));
    let (mut tx, mut rx) = (0u64, 0u64);
    let stats = move || {
        tx += sent;
        rx += arrived.unwrap_or(0);
        let rx = arrived.map_or(String::new(), |_| format!(",\"rx_wire_bytes\":{rx}"));
        format!(
            "[{{\"kind\":\"cake\",\"drops\":0,\"backlog\":0,\"purple\":{{\"direction\":\"egress\"}}}},\
             {{\"kind\":\"cake\",\"drops\":0,\"backlog\":9000,\"purple\":{{\"direction\":\"ingress\",\
             \"tx_wire_bytes\":{tx}{rx}}}}}]\n"
        )
    };
    let h = mock_bridge_with(&sock, stats, stop.clone());
    let mut d = Daemon::new(config(&sock, &log, 50), false).unwrap();
    let f = AtomicBool::new(false);
    d.run(&f, &f, Some(qdisc::Duration::from_millis(1000)))
        .unwrap();
    stop.store(true, Ordering::Relaxed);
    h.join().unwrap();
    let mut down: Vec<f64> = log_lines(&log)
        .iter()
        .filter(|l| l["event"] == "decision")
        .filter_map(|l| l["down"]["throughput"].as_f64())
        .filter(|&t| t > 0.0)
        .collect();
    let _ = std::fs::remove_dir_all(&dir);
    down.sort_by(f64::total_cmp);
    assert!(down.len() >= 5, "{down:?}");
    down[down.len() / 2]
}

#[test]
fn download_throughput_comes_from_the_bridges_wire_bytes_when_it_reports_them() {
    // The ingress (download) shaper releases 62,500 bytes between reads (1.25 MB/s at the
    // 50 ms step); the interface (lo) carries almost nothing.
    let median = download_throughput_median("cstats-wire", 62_500, None);
    // 62,500 bytes per step of ~50 ms; wide bounds for a loaded machine's timing.
    assert!(
        (0.5e6..=2.5e6).contains(&median),
        "download throughput {median} B/s is not the shaper's"
    );
}

#[test]
fn download_delivery_comes_from_the_bridges_arrivals_when_it_reports_them() {
    // The shaper releases 62,500 bytes between reads (1.25 MB/s) while 250,000 arrive at it
    // (5 MB/s: the link delivered more than our rate). The delivered interface (the default,
    // the upload's `lo`) carries almost nothing.
    let median = download_throughput_median("cstats-arrived", 62_500, Some(250_000));
    // The arrivals, not the sent bytes nor lo's counter; wide bounds for a loaded machine's
    // timing.
    assert!(
        (2.5e6..=10e6).contains(&median),
        "download throughput {median} B/s is not the bridge's arrivals"
    );
}
