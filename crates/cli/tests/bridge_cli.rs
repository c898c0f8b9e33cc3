//! `purple bridge` and `purple ctl` as processes: the bridge runs under `ip netns exec` between
//! two veth pairs, `purple ctl` talks to it, SIGTERM stops it cleanly. Reported as skipped (`testkit`)
//! when not root or when namespaces cannot be created.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Child, Command, Output};
use std::thread;
use std::time::Duration;

const PURPLE: &str = env!("CARGO_BIN_EXE_purple");

fn ip(args: &[&str]) -> bool {
    Command::new("ip")
        .args(args)
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// Namespaces `<p>c`, `<p>b`, `<p>s` joined by veths c0—b0 and b1—s0, and the bridge process;
/// both cleaned up on drop.
struct Topo {
    p: String,
    bridge: Option<Child>,
}

impl Drop for Topo {
    fn drop(&mut self) {
        if let Some(mut c) = self.bridge.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        for n in ["c", "b", "s"] {
            ip(&["netns", "del", &format!("{}{n}", self.p)]);
        }
    }
}

fn topo() -> Result<Topo, String> {
    let t = Topo {
        p: format!("pc-{}-", std::process::id()),
        bridge: None,
    };
    let (c, b, s) = (
        format!("{}c", t.p),
        format!("{}b", t.p),
        format!("{}s", t.p),
    );
    for n in [&c, &b, &s] {
        if !ip(&["netns", "add", n]) {
            return Err(format!("cannot create network namespace {n}"));
        }
    }
    let ok = ip(&[
        "-n", &c, "link", "add", "c0", "type", "veth", "peer", "name", "b0", "netns", &b,
    ]) && ip(&[
        "-n", &b, "link", "add", "b1", "type", "veth", "peer", "name", "s0", "netns", &s,
    ]) && ip(&["-n", &c, "addr", "add", "10.79.0.1/24", "dev", "c0"])
        && ip(&["-n", &s, "addr", "add", "10.79.0.2/24", "dev", "s0"])
        && [(&c, "c0"), (&b, "b0"), (&b, "b1"), (&s, "s0")]
            .iter()
            .all(|(n, d)| ip(&["-n", n, "link", "set", d, "up"]));
    if ok {
        Ok(t)
    } else {
        Err("cannot set up veth pairs".into())
    }
}

fn ctl(sock: &str, args: &[&str]) -> Output {
    Command::new(PURPLE)
        .args(["ctl", "--ctl", sock])
        .args(args)
        .output()
        .unwrap()
}

fn bridge_process_answers_ctl_and_exits_cleanly_on_sigterm() {
    let mut t = topo().expect("the test topology (prerequisites were checked)");
    let sock = std::env::temp_dir()
        .join(format!("{}ctl.sock", t.p))
        .display()
        .to_string();
    let child = Command::new("ip")
        .args([
            "netns",
            "exec",
            &format!("{}b", t.p),
            PURPLE,
            "bridge",
            "b0",
            "b1",
        ])
        .args([
            "--egress",
            "cake bandwidth 20Mbit",
            "--ingress",
            "fq_codel",
            "--ctl",
            &sock,
        ])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    t.bridge = Some(child);
    let mut up = false;
    for _ in 0..100 {
        if std::path::Path::new(&sock).exists() {
            up = true;
            break;
        }
        thread::sleep(Duration::from_millis(50));
    }
    assert!(up, "control socket never appeared");
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&sock).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600);
    // ICMP echo through the bridge, from a thread inside the client namespace (our own echo
    // client: no system `ping`).
    let cns = std::path::PathBuf::from(format!("/var/run/netns/{}c", t.p));
    let answered = thread::spawn(move || {
        dataplane::sys::enter_netns(&cns).expect("setns");
        daemon::probe::echo::reachable(
            std::net::Ipv4Addr::new(10, 79, 0, 2),
            3,
            Duration::from_secs(1),
        )
        .expect("ICMP socket")
    })
    .join()
    .unwrap();
    assert!(answered, "ICMP echo through `purple bridge` got no reply");

    let o = ctl(&sock, &["set-bandwidth", "egress", "30Mbit"]);
    assert!(o.status.success());
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "egress bandwidth 30Mbit\n"
    );
    let o = ctl(&sock, &["set-bandwidth", "ingress", "30Mbit"]);
    assert!(
        !o.status.success(),
        "fq_codel has no shaper, yet set-bandwidth succeeded"
    );
    let o = ctl(&sock, &["stats"]);
    let text = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(
        text.contains("qdisc cake 8001: dev b1 root refcnt 2 bandwidth 30Mbit"),
        "{text}"
    );
    assert!(text.contains("qdisc fq_codel 0: dev b0 root"), "{text}");
    let o = ctl(&sock, &["stats", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v[0]["purple"]["rx_packets"].as_u64().unwrap() >= 2, "{v}");

    // SIGTERM to the bridge (the child of `ip netns exec`, which execs it: same pid).
    let p = rustix::process::Pid::from_raw(pid as i32).expect("a child's pid is positive");
    rustix::process::kill_process(p, rustix::process::Signal::Term).unwrap();
    let mut child = t.bridge.take().unwrap();
    let mut exited = None;
    for _ in 0..100 {
        if let Some(st) = child.try_wait().unwrap() {
            exited = Some(st);
            break;
        }
        thread::sleep(Duration::from_millis(20));
    }
    let st = exited.expect("bridge did not exit within 2 s of SIGTERM");
    assert!(st.success(), "{st:?}");
    assert!(
        !std::path::Path::new(&sock).exists(),
        "control socket left behind"
    );
}

testkit::harness! {
    [Netns] => { bridge_process_answers_ctl_and_exits_cleanly_on_sigterm },
}
