//! The MQTT export against Debian's mosquitto:
//!
//! - our CONNECT and PUBLISH are byte for byte what `mosquitto_pub` sends for the same fields
//!   (its packets caught by a listener of ours on 127.0.0.1);
//! - in a fresh network namespace, a real `purple-control --dry-run` starts while no broker is
//!   there, then mosquitto (with a password file) comes up; the daemon reconnects after its
//!   backoff and `mosquitto_sub` receives its decision, transition and event lines intact and
//!   in order, the same text as the log's, and the retained `status` and `summary` are there
//!   after it exits.
//!
//! Skipped (a failure under CI=true) without mosquitto, root or namespaces (`testkit`). The
//! namespace, its processes and the files are removed on every exit path (guards' `Drop`).
// The test's own timeouts read the wall clock.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use daemon::log::{parse_line, Record};
use daemon::mqtt::wire::{self, Connect, Qos, Will};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Reads one MQTT packet as raw bytes (fixed header included).
fn raw_packet(s: &mut std::net::TcpStream) -> Vec<u8> {
    let mut p = vec![0u8; 1];
    s.read_exact(&mut p).unwrap();
    let mut len = 0usize;
    for i in 0..4 {
        let mut b = [0u8; 1];
        s.read_exact(&mut b).unwrap();
        p.push(b[0]);
        len |= usize::from(b[0] & 0x7F) << (7 * i);
        if b[0] & 0x80 == 0 {
            break;
        }
    }
    let at = p.len();
    p.resize(at + len, 0);
    s.read_exact(&mut p[at..]).unwrap();
    p
}

fn our_connect_and_publish_are_byte_for_byte_what_mosquitto_pub_sends() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port().to_string();
    let mut child = Command::new("mosquitto_pub")
        .args([
            "-h",
            "127.0.0.1",
            "-p",
            &port,
            "-V",
            "mqttv311",
            "-i",
            "purple-ref",
        ])
        .args(["-k", "30", "-u", "router", "-P", "s3cret"])
        .args(["--will-topic", "purple/status", "--will-payload", "offline"])
        .args(["--will-qos", "1", "--will-retain"])
        .args([
            "-q",
            "1",
            "-r",
            "-t",
            "purple/decision",
            "-m",
            "{\"t\":1.5}",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (mut s, _) = l.accept().unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let theirs_connect = raw_packet(&mut s);
    s.write_all(&[0x20, 2, 0, 0]).unwrap();
    let theirs_publish = raw_packet(&mut s);
    let id = u16::from_be_bytes([theirs_publish[2 + 2 + 15], theirs_publish[2 + 2 + 15 + 1]]);
    s.write_all(&[0x40, 2, (id >> 8) as u8, id as u8]).unwrap();
    let theirs_disconnect = raw_packet(&mut s);
    let status = child.wait().unwrap();
    assert!(status.success(), "mosquitto_pub: {status}");

    let mut ours = Vec::new();
    wire::connect(
        &mut ours,
        &Connect {
            client_id: "purple-ref",
            keepalive_s: 30,
            clean_session: true,
            will: Some(Will {
                topic: "purple/status",
                message: b"offline",
                qos: Qos::AtLeastOnce,
                retain: true,
            }),
            username: Some("router"),
            password: Some(b"s3cret"),
        },
    )
    .unwrap();
    assert_eq!(ours, theirs_connect, "CONNECT");
    ours.clear();
    wire::publish(
        &mut ours,
        "purple/decision",
        b"{\"t\":1.5}",
        Qos::AtLeastOnce,
        true,
        id,
    )
    .unwrap();
    assert_eq!(ours, theirs_publish, "PUBLISH");
    ours.clear();
    wire::disconnect(&mut ours);
    assert_eq!(ours, theirs_disconnect, "DISCONNECT");
}

/// A network namespace with loopback up, the processes started in it, and a scratch directory;
/// all removed on drop (children: SIGTERM, then SIGKILL after 2 s).
struct Ns {
    name: String,
    dir: PathBuf,
    children: Vec<Child>,
}

impl Ns {
    fn new(tag: &str) -> Ns {
        let name = format!("pmq-{}-{tag}", std::process::id());
        let dir = std::env::temp_dir().join(&name);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let ok = |args: &[&str]| Command::new("ip").args(args).status().unwrap().success();
        // Guard first: a failure below still removes what was made.
        let ns = Ns {
            name: name.clone(),
            dir,
            children: Vec::new(),
        };
        assert!(ok(&["netns", "add", &name]), "ip netns add {name}");
        assert!(ok(&["-n", &name, "link", "set", "lo", "up"]));
        ns
    }

    fn cmd(&self, prog: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name, prog])
            .stdin(Stdio::null());
        c
    }

    /// Starts `c` (a [`Ns::cmd`]) with its stdout to `out` (or nowhere); returns its index.
    fn spawn(&mut self, mut c: Command, out: Option<&Path>) -> usize {
        match out {
            Some(p) => c.stdout(std::fs::File::create(p).unwrap()),
            None => c.stdout(Stdio::null()),
        };
        self.children.push(c.stderr(Stdio::null()).spawn().unwrap());
        self.children.len() - 1
    }

    fn terminate(&mut self, i: usize) -> Option<std::process::ExitStatus> {
        let c = &mut self.children[i];
        if let Ok(Some(s)) = c.try_wait() {
            return Some(s);
        }
        let pid = rustix::process::Pid::from_child(c);
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::Term);
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(5) {
            if let Ok(Some(s)) = c.try_wait() {
                return Some(s);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = c.kill();
        let _ = c.wait();
        None
    }
}

impl Drop for Ns {
    fn drop(&mut self) {
        for c in &mut self.children {
            if let Ok(None) = c.try_wait() {
                let pid = rustix::process::Pid::from_child(c);
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::Term);
            }
        }
        let t = Instant::now();
        for c in &mut self.children {
            while matches!(c.try_wait(), Ok(None)) && t.elapsed() < Duration::from_secs(2) {
                std::thread::sleep(Duration::from_millis(10));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn wait_for(what: &str, limit: Duration, mut f: impl FnMut() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(
            t.elapsed() < limit,
            "timed out after {limit:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `(topic, payload)` per line `mosquitto_sub -v` printed.
fn received(path: &Path) -> Vec<(String, String)> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(t, p)| (t.to_string(), p.to_string()))
        .collect()
}

const USER: [&str; 4] = ["-u", "purple", "-P", "s3cret"];

fn decisions_reach_a_real_broker_intact_and_in_order() {
    let mut ns = Ns::new("a");
    let dir = ns.dir.clone();
    let bin = env!("CARGO_BIN_EXE_purple-control");
    let (log, cfg) = (dir.join("control.jsonl"), dir.join("purple.toml"));
    std::fs::write(
        &cfg,
        format!(
            "[download]\ninterface = \"lo\"\ncounter = \"rx\"\n[upload]\ninterface = \"lo\"\n\
             [probe]\nreflectors = [\"udp:127.0.0.1:8862\"]\nrate_hz = 20\nmin_interval_ms = 50\n\
             [actuator]\nkind = \"dry-run\"\n[log]\npath = \"{}\"\nevery_step = true\n\
             [mqtt]\nbroker = \"127.0.0.1:1883\"\ntopic_prefix = \"purple/test\"\n\
             client_id = \"purple-it\"\nqos = 1\nusername = \"purple\"\npassword = \"s3cret\"\n\
             keepalive_s = 5\nrecords = [\"decision\", \"transition\", \"summary\", \"event\"]\n\
             summary_interval_s = 1\n",
            log.display()
        ),
    )
    .unwrap();
    let mut refl = ns.cmd(bin);
    refl.args(["reflector", "--bind", "127.0.0.1", "--port", "8862"]);
    ns.spawn(refl, None);
    // The daemon starts while no broker listens: its publisher fails, drops and backs off.
    let mut d = ns.cmd(bin);
    d.args(["--config", cfg.to_str().unwrap(), "--dry-run"]);
    let daemon = ns.spawn(d, None);
    let decisions_logged = || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("\"event\":\"decision\""))
            .count()
    };
    wait_for(
        "decisions without a broker",
        Duration::from_secs(10),
        || decisions_logged() >= 5,
    );

    let passwd = dir.join("passwd");
    assert!(Command::new("mosquitto_passwd")
        .args(["-b", "-c", passwd.to_str().unwrap(), "purple", "s3cret"])
        .status()
        .unwrap()
        .success());
    let conf = dir.join("mosquitto.conf");
    std::fs::write(
        &conf,
        format!(
            "listener 1883 127.0.0.1\nallow_anonymous false\npassword_file {}\n\
             persistence false\nuser root\n",
            passwd.display()
        ),
    )
    .unwrap();
    let mut m = ns.cmd("mosquitto");
    m.args(["-c", conf.to_str().unwrap()]);
    ns.spawn(m, None);
    let sub_out = dir.join("sub.txt");
    let mut sub = ns.cmd("mosquitto_sub");
    sub.args(["-h", "127.0.0.1", "-V", "mqttv311", "-q", "1", "-v"])
        .args(USER)
        .args(["-t", "purple/test/#"]);
    let mut sub_started = false;
    // The subscriber is ready once a marker published after it started comes through.
    wait_for(
        "the broker and the subscriber",
        Duration::from_secs(10),
        || {
            if !sub_started {
                let up = ns
                    .cmd("mosquitto_pub")
                    .args(["-h", "127.0.0.1", "-t", "purple/probe", "-m", "x"])
                    .args(USER)
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status()
                    .is_ok_and(|s| s.success());
                if up {
                    ns.spawn(sub.clone_for_spawn(), Some(&sub_out));
                    sub_started = true;
                }
                return false;
            }
            let _ = ns
                .cmd("mosquitto_pub")
                .args(["-h", "127.0.0.1", "-t", "purple/test/ready", "-m", "1"])
                .args(USER)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
            received(&sub_out)
                .iter()
                .any(|(t, _)| t == "purple/test/ready")
        },
    );
    // The daemon reconnects after its backoff (1 s, then 2 s, ...) and publishes.
    wait_for("decisions over MQTT", Duration::from_secs(15), || {
        received(&sub_out)
            .iter()
            .filter(|(t, _)| t == "purple/test/decision")
            .count()
            >= 20
    });
    let status = ns.terminate(daemon).expect("the daemon stops on SIGTERM");
    assert!(status.success(), "purple-control: {status}");
    // What the broker had for us is out once the retained status reads "offline".
    wait_for("the offline status", Duration::from_secs(5), || {
        received(&sub_out)
            .iter()
            .any(|(t, p)| t == "purple/test/status" && p == "offline")
    });

    let lines: Vec<String> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    let of = |want: fn(&Record) -> bool| -> Vec<String> {
        lines
            .iter()
            .filter(|l| parse_line(l).unwrap().as_ref().is_some_and(want))
            .cloned()
            .collect()
    };
    let got = received(&sub_out);
    let on = |topic: &str| -> Vec<String> {
        got.iter()
            .filter(|(t, _)| t == topic)
            .map(|(_, p)| p.clone())
            .collect()
    };
    // Decisions: from the first one the subscriber saw, every later line of the log, the same
    // text, in the same order.
    let logged = of(|r| matches!(r, Record::Decision { .. }));
    let heard = on("purple/test/decision");
    assert!(heard.len() >= 20, "{} decisions heard", heard.len());
    let first = logged
        .iter()
        .position(|l| *l == heard[0])
        .expect("the first decision heard is a line of the log");
    assert!(first >= 5, "the first 5 decisions came before the broker");
    assert_eq!(
        &logged[first..],
        &heard[..],
        "decisions: a gap, a change or a reordering"
    );
    // Transitions and other events likewise (the start line came before the broker): those of
    // the steps after the first decision heard all arrive.
    let t0 = parse_line(&heard[0]).unwrap().unwrap().t();
    let after = |v: Vec<String>| -> Vec<String> {
        v.into_iter()
            .filter(|l| parse_line(l).unwrap().unwrap().t() > t0)
            .collect()
    };
    let heard_tr = on("purple/test/transition");
    let logged_tr = after(of(|r| matches!(r, Record::Transition { .. })));
    assert!(
        heard_tr.ends_with(&logged_tr),
        "transitions:\n{heard_tr:?}\nvs the log's\n{logged_tr:?}"
    );
    let heard_ev = on("purple/test/event");
    let safe = of(|r| matches!(r, Record::SafeRate { .. }));
    assert_eq!(safe.len(), 2);
    assert!(heard_ev.ends_with(&safe), "events: {heard_ev:?}");
    let st = on("purple/test/status");
    assert_eq!(st.first().map(String::as_str), Some("online"));
    assert_eq!(st.last().map(String::as_str), Some("offline"));

    // Retained for a subscriber that comes later: the summary written at the shutdown (after
    // the safe rates) and "offline".
    let retained = |topic: &str| -> String {
        let o = ns
            .cmd("mosquitto_sub")
            .args(["-h", "127.0.0.1", "-C", "1", "-W", "3", "-t", topic])
            .args(USER)
            .output()
            .unwrap();
        String::from_utf8(o.stdout).unwrap().trim().to_string()
    };
    assert_eq!(retained("purple/test/status"), "offline");
    let s: daemon::mqtt::Summary = serde_json::from_str(&retained("purple/test/summary")).unwrap();
    assert_eq!(s.algorithm, "purple");
    assert!(s.steps >= 20 && s.mqtt_published >= 20, "{s:?}");
    assert!(
        s.mqtt_dropped >= 5,
        "the lines before the broker are counted: {s:?}"
    );
    assert!(s.down.phase.is_some(), "PURPLE reports its phase: {s:?}");
}

/// `Command` is not `Clone`; the subscriber's is rebuilt from its parts.
trait CloneForSpawn {
    fn clone_for_spawn(&self) -> Command;
}

impl CloneForSpawn for Command {
    fn clone_for_spawn(&self) -> Command {
        let mut c = Command::new(self.get_program());
        c.args(self.get_args()).stdin(Stdio::null());
        c
    }
}

testkit::harness! {
    [Mosquitto] => { our_connect_and_publish_are_byte_for_byte_what_mosquitto_pub_sends },
    [Netns, Mosquitto] => { decisions_reach_a_real_broker_intact_and_in_order },
}
