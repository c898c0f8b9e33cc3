//! The netlink path against the real sch_cake: boots the QEMU reference kernel
//! (`../shared/tools/refkernel/run-in-guest.sh`, Debian 6.1 with sch_cake), attaches
//! `cake bandwidth 10mbit` to `lo` and to an IFB device, changes the rate with our
//! `purple-setrate` (the same code as `purple control`'s netlink actuator) and reads it back
//! with `tc -j qdisc show`; and reads CAKE's backlog, drops and ECN marks with
//! `purple-setrate DEV stats` (the daemon's `RTM_GETQDISC` read) beside `tc -s -j`. Reported
//! as skipped (`testkit`) when not root or when the reference kernel or QEMU is not available
//! (`cargo xtask test` installs them; `PURPLE_REFKERNEL=0` skips on purpose); a guest that times
//! out or dies fails. The binary is the host's glibc build:
//! the guest's initramfs carries the host's libc (for tc/ip), and the test copies whatever else
//! `ldd` lists (libgcc_s) next to the binary.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// `run-in-guest.sh` (its presence, QEMU and root were checked by the harness).
fn refkernel() -> PathBuf {
    testkit::refkernel_dir()
        .expect("the harness checked the reference kernel tools")
        .join("run-in-guest.sh")
}

const SCRIPT: &str = r#"#!/bin/sh
set -e
export LD_LIBRARY_PATH=/test/lib
ip link set lo up
tc qdisc add dev lo root cake bandwidth 10mbit
/test/purple-setrate lo 2500000
tc -j qdisc show dev lo
ip link add ifb4wan type ifb
ip link set ifb4wan up
tc qdisc add dev ifb4wan root cake bandwidth 50mbit besteffort
/test/purple-setrate ifb4wan 1000000
tc -j qdisc show dev ifb4wan
tc qdisc del dev ifb4wan root
if /test/purple-setrate ifb4wan 1000000; then echo "NOCAKE-ACCEPTED"; else echo "NOCAKE-REFUSED"; fi
"#;

/// CAKE at 500 kbit/s on an IFB device (no ARP; it discards what CAKE releases, as nothing
/// redirected it there), flooded for 4 s by three pings of 1400 bytes marked ECT(0) (up to 500
/// per second each; about 45 under QEMU TCG, together still twice the rate): a backlog builds and
/// CoDel marks. Our netlink
/// statistics are read mid-flood, and after the rate is raised to 100 Mbit/s (with our netlink
/// rate change) so that the queue drains, each next to `tc -s -j`'s.
const STATS_SCRIPT: &str = r#"#!/bin/sh
set -e
export LD_LIBRARY_PATH=/test/lib
ip link add ifb9 type ifb
ip addr add 10.9.9.1/24 dev ifb9
ip link set ifb9 up
tc qdisc add dev ifb9 root cake bandwidth 500kbit besteffort
for i in 1 2 3; do ping -q -Q 2 -s 1400 -i 0.002 -c 300 -w 4 10.9.9.2 >/dev/null 2>&1 & done
sleep 2
/test/purple-setrate ifb9 stats
tc -s -j qdisc show dev ifb9
wait || true
/test/purple-setrate ifb9 12500000
sleep 1
/test/purple-setrate ifb9 stats
tc -s -j qdisc show dev ifb9
"#;

/// The numbers of a `stats DEV qlen Q backlog B drops D ecn_marks E cake C [sent_bytes S]` line.
fn stats_line(l: &str) -> std::collections::HashMap<String, u64> {
    let w: Vec<&str> = l.split_whitespace().collect();
    w[2..]
        .chunks(2)
        .map(|c| (c[0].to_string(), c[1].parse().unwrap()))
        .collect()
}

fn netlink_stats_read_real_sch_cake_backlog_drops_and_ecn_marks() {
    let stdout = run_guest(&refkernel(), STATS_SCRIPT, "stats");
    let ours: Vec<_> = stdout
        .lines()
        .filter(|l| l.starts_with("stats ifb9"))
        .map(stats_line)
        .collect();
    let tcs: Vec<serde_json::Value> = stdout
        .lines()
        .filter(|l| l.starts_with('['))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!((ours.len(), tcs.len()), (2, 2), "{stdout}");
    assert_eq!(ours[0]["cake"], 1);
    // Mid-flood: a standing queue (tc read it a moment later; both non-zero).
    assert!(ours[0]["backlog"] > 0 && ours[0]["qlen"] > 0, "{stdout}");
    assert!(tcs[0][0]["backlog"].as_u64().unwrap() > 0, "{stdout}");
    // Drained: the same counters as tc's, exactly.
    let t = &tcs[1][0];
    let tc_ecn: u64 = t["tins"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["ecn_mark"].as_u64().unwrap())
        .sum();
    assert_eq!(ours[1]["backlog"], 0, "{stdout}");
    assert_eq!(ours[1]["drops"], t["drops"].as_u64().unwrap(), "{stdout}");
    assert_eq!(ours[1]["ecn_marks"], tc_ecn, "{stdout}");
    // The bytes the qdisc sent (the throughput the agent measures from them), as tc's.
    assert_eq!(
        ours[1]["sent_bytes"],
        t["bytes"].as_u64().unwrap(),
        "{stdout}"
    );
    assert!(ours[1]["sent_bytes"] > 0, "{stdout}");
    assert!(
        ours[1]["ecn_marks"] + ours[1]["drops"] > 0,
        "CoDel acted on the flood: {stdout}"
    );
}

/// Runs `script` in the reference kernel with `purple-setrate` (and the libraries it needs)
/// under /test; its stdout. A guest that times out or dies fails the test.
fn run_guest(runner: &Path, script: &str, tag: &str) -> String {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_purple-setrate"));
    let dir = std::env::temp_dir().join(format!("purple-refk-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("in/lib")).unwrap();
    std::fs::copy(&bin, dir.join("in/purple-setrate")).unwrap();
    let ldd = Command::new("ldd").arg(&bin).output().unwrap();
    for line in String::from_utf8_lossy(&ldd.stdout).lines() {
        if let Some(path) = line
            .split("=>")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
        {
            let p = Path::new(path);
            if p.exists() {
                std::fs::copy(p, dir.join("in/lib").join(p.file_name().unwrap())).unwrap();
            }
        }
    }
    let sp = dir.join("script.sh");
    std::fs::write(&sp, script).unwrap();
    let out = Command::new(runner)
        .args(["-t", "240", "-i"])
        .arg(dir.join("in"))
        .arg(&sp)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        out.status.success(),
        "guest script failed (rc {:?}; 124: timed out, 125: the guest died):\n{stdout}\n{stderr}",
        out.status.code()
    );
    stdout
}

fn netlink_set_rate_changes_real_sch_cake_bandwidth() {
    let stdout = run_guest(&refkernel(), SCRIPT, "rate");
    let jsons: Vec<serde_json::Value> = stdout
        .lines()
        .filter(|l| l.starts_with('['))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(jsons.len(), 2, "{stdout}");
    let bw = |v: &serde_json::Value| v[0]["options"]["bandwidth"].as_u64();
    assert_eq!(jsons[0][0]["kind"], "cake");
    assert_eq!(bw(&jsons[0]), Some(2_500_000), "lo: {stdout}");
    assert_eq!(bw(&jsons[1]), Some(1_000_000), "ifb: {stdout}");
    assert_eq!(
        jsons[1][0]["options"]["diffserv"], "besteffort",
        "other options untouched: {stdout}"
    );
    assert!(stdout.contains("NOCAKE-REFUSED"), "{stdout}");
}

testkit::harness! {
    [RefKernel] => { netlink_stats_read_real_sch_cake_backlog_drops_and_ecn_marks, netlink_set_rate_changes_real_sch_cake_bandwidth },
}
