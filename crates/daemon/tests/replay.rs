//! The daemon is a shell that decides nothing: a real `purple-control` (dry-run actuator,
//! probing a `purple reflector` and the kernel's ICMP on 127.0.0.1 for a few seconds, stopped
//! with SIGTERM) records every input of its agent (`--record`); a fresh agent fed those inputs
//! off-line (`daemon::record::replay`, the way the simulator drives it) produces the daemon's
//! decision log line for line: the same decisions, reasons, rates, delays and events at the
//! same times.
#![allow(clippy::unwrap_used)]

use daemon::log::{parse_line, Record};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

#[test]
fn a_replayed_recording_reproduces_the_daemons_decision_log_step_by_step() {
    let dir = std::env::temp_dir().join(format!("purple-replay-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (cfg, log, rec) = (dir.join("c.toml"), dir.join("c.jsonl"), dir.join("c.rec"));
    let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = s.local_addr().unwrap().port();
    let stop = Arc::new(AtomicBool::new(false));
    let st = stop.clone();
    let refl = std::thread::spawn(move || daemon::probe::udp::serve(&s, 1000, &st).unwrap());
    std::fs::write(
        &cfg,
        format!(
            "[download]\ninterface = \"lo\"\ncounter = \"rx\"\n[upload]\ninterface = \"lo\"\n\
             [probe]\nreflectors = [\"udp:127.0.0.1:{port}\", \"127.0.0.1\", \"echo:127.0.0.1\"]\n\
             rate_hz = 20\nmin_interval_ms = 50\n[actuator]\nkind = \"dry-run\"\n\
             [log]\npath = \"{}\"\nevery_step = true\n",
            log.display()
        ),
    )
    .unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_purple-control"))
        .args(["--config", cfg.to_str().unwrap(), "--dry-run", "--record"])
        .arg(&rec)
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_secs(3));
    rustix::process::kill_process(
        rustix::process::Pid::from_child(&child),
        rustix::process::Signal::Term,
    )
    .unwrap();
    let status = child.wait().unwrap();
    stop.store(true, Ordering::Relaxed);
    let replies = refl.join().unwrap();
    assert!(status.success(), "{status}");
    assert!(replies >= 10, "the reflector answered {replies}");

    let logged: Vec<Record> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .filter_map(|l| parse_line(l).unwrap())
        .filter(Record::from_agent)
        .collect();
    let text = std::fs::read(&rec).unwrap();
    let replayed = daemon::record::replay(&text[..]).unwrap();

    let decisions = |v: &[Record]| {
        v.iter()
            .filter(|r| matches!(r, Record::Decision { .. }))
            .count()
    };
    // About 60 steps of 50 ms, every one logged, and the exit's two safe rates.
    assert!(decisions(&logged) >= 40, "{} decisions", decisions(&logged));
    assert_eq!(
        logged
            .iter()
            .filter(|r| matches!(r, Record::SafeRate { ok: true, .. }))
            .count(),
        2
    );
    assert!(
        logged.iter().any(|r| matches!(
            r,
            Record::Decision { up, .. } if up.delay_ms.is_some()
        )),
        "delays were measured"
    );
    for (i, (a, b)) in logged.iter().zip(&replayed).enumerate() {
        assert_eq!(a, b, "line {i} differs");
    }
    assert_eq!(logged.len(), replayed.len());
    let _ = std::fs::remove_dir_all(&dir);
}
