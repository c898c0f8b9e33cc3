//! The MQTT export never holds up the control loop: with the broker absent (nothing listens)
//! or silent (the TCP connection is accepted, the CONNACK never comes), the dry-run daemon
//! steps every 50 ms as usual, every decision is still logged, the messages are dropped and
//! counted, and the shutdown is bounded. The real broker is in `mqtt_broker.rs`.
#![allow(clippy::unwrap_used)]

use daemon::log::{parse_line, Record};
use daemon::{Daemon, DaemonConfig};
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Runs a dry-run daemon for `secs` with `[mqtt] broker = "127.0.0.1:PORT"`; returns its log's
/// decision times, its steps, its MQTT counters after the shutdown, and how long
/// `restore_safe` (which closes the MQTT session) took.
fn run_with_broker(
    port: u16,
    secs: u64,
    tag: &str,
) -> (Vec<f64>, u64, daemon::mqtt::MqttStats, f64) {
    let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let refl = s.local_addr().unwrap().port();
    let stop = Arc::new(AtomicBool::new(false));
    let st = stop.clone();
    let h = std::thread::spawn(move || daemon::probe::udp::serve(&s, 1000, &st).unwrap());
    let dir = std::env::temp_dir().join(format!("purple-mqtt-loop-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let log = dir.join("c.jsonl");
    let text = format!(
        "[download]\ninterface = \"lo\"\ncounter = \"rx\"\n[upload]\ninterface = \"lo\"\n\
         [probe]\nreflectors = [\"udp:127.0.0.1:{refl}\"]\nrate_hz = 20\nmin_interval_ms = 50\n\
         [actuator]\nkind = \"dry-run\"\n[log]\npath = \"{}\"\nevery_step = true\n\
         [mqtt]\nbroker = \"127.0.0.1:{port}\"\nqos = 1\nqueue = 16\n\
         records = [\"decision\", \"transition\", \"summary\", \"event\"]\n",
        log.display()
    );
    let mut d = Daemon::new(DaemonConfig::parse(&text).unwrap(), false).unwrap();
    let (no, no2) = (AtomicBool::new(false), AtomicBool::new(false));
    d.run(&no, &no2, Some(qdisc::Duration::from_secs(secs)))
        .unwrap();
    let clock = daemon::clock::Clock::new();
    d.restore_safe();
    let close_s = clock.now().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    h.join().unwrap();
    let ts: Vec<f64> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .filter_map(|l| match parse_line(l).unwrap() {
            Some(Record::Decision { t, .. }) => Some(t),
            _ => None,
        })
        .collect();
    let _ = std::fs::remove_dir_all(&dir);
    (ts, d.steps, d.mqtt_stats().unwrap(), close_s)
}

fn assert_loop_unaffected(ts: &[f64], steps: u64, secs: u64) {
    // PURPLE steps every 50 ms: 20 a second. A publish that waited for the broker would stall
    // a step for the 5 s connect/CONNACK limit.
    assert!(steps >= secs * 20 * 7 / 10, "{steps} steps in {secs} s");
    assert_eq!(
        ts.len() as u64,
        steps,
        "every step logged (every_step = true)"
    );
    let gap = ts.windows(2).map(|w| w[1] - w[0]).fold(0.0, f64::max);
    assert!(
        gap < 0.5,
        "the longest gap between decisions was {gap:.3} s"
    );
}

#[test]
fn an_absent_broker_leaves_the_loop_alone_and_every_message_is_counted_as_dropped() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let (ts, steps, st, close_s) = run_with_broker(port, 2, "absent");
    assert_loop_unaffected(&ts, steps, 2);
    assert_eq!((st.published, st.connections), (0, 0), "{st:?}");
    assert!(st.connect_failures >= 1, "{st:?}");
    // Decisions, the start line and the two safe-rate lines at least, all dropped.
    assert!(st.offered >= steps + 3, "{st:?}");
    assert!(st.accounted(), "{st:?}");
    assert!(close_s < 1.5, "the shutdown took {close_s:.2} s");
}

#[test]
fn a_broker_that_never_answers_the_connect_leaves_the_loop_alone() {
    // Accepted by the kernel (backlog), never read: the publisher thread waits for a CONNACK.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let (ts, steps, st, close_s) = run_with_broker(port, 2, "silent");
    assert_loop_unaffected(&ts, steps, 2);
    assert_eq!(st.published, 0, "{st:?}");
    // The 16-message queue overflowed while the thread waited: the loop dropped, not waited.
    assert!(
        st.dropped_queue_full >= steps - 16,
        "{st:?} after {steps} steps"
    );
    // The thread is still waiting for the CONNACK: the close gives up after its bound.
    assert!(close_s < 2.0, "the shutdown took {close_s:.2} s");
    drop(l);
}

/// SIGHUP keeps the MQTT session when `[mqtt]` is unchanged (its counters go on) and replaces
/// it when `[mqtt]` changed (a fresh publisher, counting from zero).
#[test]
fn a_reload_keeps_the_session_only_when_the_mqtt_section_is_unchanged() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = std::env::temp_dir().join(format!("purple-mqtt-reload-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let cfg = |prefix: &str| {
        DaemonConfig::parse(&format!(
            "[download]\ninterface = \"lo\"\n[upload]\ninterface = \"lo\"\n\
             [probe]\nreflectors = [\"udp:127.0.0.1:9\"]\n[actuator]\nkind = \"dry-run\"\n\
             [log]\npath = \"{}\"\nevery_step = true\n\
             [mqtt]\nbroker = \"127.0.0.1:{port}\"\ntopic_prefix = \"{prefix}\"\n",
            dir.join("c.jsonl").display()
        ))
        .unwrap()
    };
    let mut d = Daemon::new(cfg("a"), false).unwrap();
    let (no, no2) = (AtomicBool::new(false), AtomicBool::new(false));
    let run = |d: &mut Daemon| {
        d.run(&no, &no2, Some(qdisc::Duration::from_millis(300)))
            .unwrap()
    };
    run(&mut d);
    let before = d.mqtt_stats().unwrap().offered;
    assert!(before >= 5, "{before}");
    d.reload(cfg("a"), false).unwrap();
    run(&mut d);
    let kept = d.mqtt_stats().unwrap().offered;
    assert!(
        kept > before + 5,
        "the same publisher counts on: {before} -> {kept}"
    );
    d.reload(cfg("b"), false).unwrap();
    let fresh = d.mqtt_stats().unwrap().offered;
    assert_eq!(
        fresh, 0,
        "a new publisher (the start line is not a decision)"
    );
    run(&mut d);
    assert!(d.mqtt_stats().unwrap().offered >= 5);
    d.restore_safe();
    assert!(d.mqtt_stats().unwrap().accounted());
    let _ = std::fs::remove_dir_all(&dir);
}
