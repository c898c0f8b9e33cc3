//! `purple lab` end to end: JSON in `purple sim`'s per-run form, namespaces removed on SIGTERM,
//! and the same B2 run in the QEMU reference kernel with Linux's own CAKE. Tests whose
//! prerequisites are missing (root, namespaces, QEMU) are reported as skipped (`testkit`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn namespaces_of(pid: u32) -> Vec<String> {
    let out = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let prefix = format!("plab-{pid}-");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with(&prefix))
        .map(|l| l.to_string())
        .collect()
}

fn lab_list_names_the_three_scenarios() {
    let out = Command::new(env!("CARGO_BIN_EXE_purple"))
        .args(["lab", "list"])
        .output()
        .unwrap();
    let s = String::from_utf8_lossy(&out.stdout);
    for n in ["b1 ", "b2 ", "radio "] {
        assert!(s.lines().any(|l| l.starts_with(n)), "{s}");
    }
}

/// A link file the lab cannot read is refused before any namespace exists, naming the file and
/// the option or line; `--link` and a scenario name exclude each other, and a share outside
/// (0, 1] is refused naming `--scale`.
fn lab_run_link_errors_name_the_file_and_the_option() {
    let dir = std::env::temp_dir().join(format!("purple-lab-link-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.toml");
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_purple"))
            .args(["lab", "run"])
            .args(args)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let cases = [
        (
            "buffer_packets = 0\n[down]\nrate = \"10mbit\"\n[up]\nrate = \"2mbit\"\n",
            format!(
                "{}: buffer_packets 0: accepted 1 ..= 100000 packets",
                bad.display()
            ),
        ),
        (
            "[down]\nschedule = \"missing.down\"\n[up]\nrate = \"2mbit\"\n",
            format!(
                "{}: [down]: {}",
                bad.display(),
                dir.join("missing.down").display()
            ),
        ),
        (
            "[down]\nrate = \"10mbit\"\nburst = 3\n[up]\nrate = \"2mbit\"\n",
            format!("{}: TOML parse error at line 3", bad.display()),
        ),
    ];
    for (text, want) in cases {
        std::fs::write(&bad, text).unwrap();
        let (code, err) = run(&["--link", bad.to_str().unwrap(), "--no-sim"]);
        assert_eq!(code, Some(2), "{err}");
        assert!(err.contains(&want), "{text:?}: {err}");
    }
    std::fs::write(&bad, "[down]\nrate = \"10mbit\"\n[up]\nrate = \"2mbit\"\n").unwrap();
    let (code, err) = run(&["radio", "--link", bad.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("cannot be used with"), "{err}");
    for f in ["0", "1.5", "-1"] {
        let scale = format!("--scale={f}");
        let (code, err) = run(&["--link", bad.to_str().unwrap(), &scale, "--no-sim"]);
        assert_eq!(code, Some(2), "{err}");
        assert!(
            err.contains(&format!("--scale {f}: accepted 0 < f <= 1")),
            "{f}: {err}"
        );
    }
    // Section C's links: an unknown name is refused naming the known ones, a lab scenario's
    // name or a link file excludes it, and the reference kernel takes none of them.
    let (code, err) = run(&["--link-of", "nope", "--no-sim"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("--link-of: unknown scenario \"nope\" (known: radio, step"),
        "{err}"
    );
    for args in [
        &["radio", "--link-of", "att-lte"][..],
        &["--link", bad.to_str().unwrap(), "--link-of", "att-lte"],
    ] {
        let (code, err) = run(args);
        assert_eq!(code, Some(2), "{err}");
        assert!(err.contains("cannot be used with"), "{args:?}: {err}");
    }
    let (code, err) = run(&["--seed", "2"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--link-of <NAME>"), "{err}");
    let (code, err) = run(&["--home-router"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--link-of <NAME>"), "{err}");
    let (code, err) = run(&["radio", "--home-router"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("cannot be used with"), "{err}");
    // A section C scenario deployed otherwise than the lab (a home router) is refused before
    // any namespace exists, naming each part and the flag that deploys it as a home router.
    let (code, err) = run(&["--link-of", "att-lte", "--no-sim"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(
            "--link-of att-lte: att-lte is deployed as the lab cannot play it: download shaped \
             in front of the radio, throughput read from the radio's delivered bytes (the lab: \
             download shaped at the router after the radio, throughput read from CAKE's sent \
             bytes and, for a download shaped at the router, the WAN device's received bytes); \
             --home-router plays the link as a home router"
        ),
        "{err}"
    );
    // Contenders by the matrix's role ids: a role the lab cannot play is refused naming it, an
    // unknown id naming the known ones, both before any namespace exists.
    let (code, err) = run(&[
        "--link-of",
        "radio",
        "--home-router",
        "--contenders",
        "purple,oracle-late",
        "--no-sim",
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(
            "--contenders: the lab cannot play contender oracle-late: an oracle reads the link's \
             true capacity"
        ),
        "{err}"
    );
    let (code, err) = run(&[
        "--link-of",
        "tmobile-lte-router",
        "--contenders",
        "nope",
        "--no-sim",
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(
            "--contenders: unknown contender \"nope\" (known: fifo, fq-codel, static-safe"
        ),
        "{err}"
    );
    // A built-in scenario takes them too; one without that contender refuses it by name.
    let (code, err) = run(&["b1", "--contenders", "purple", "--no-sim"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(
            "--contenders: the lab cannot play contender purple: this lab scenario has no such \
             contender"
        ),
        "{err}"
    );
    // `purple demo --lab --link-of`: with --lab only, and not with a lab scenario or a file.
    let demo = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_purple"))
            .arg("demo")
            .args(args)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, err) = demo(&["--link-of", "att-lte"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--lab"), "{err}");
    let (code, err) = demo(&["--lab", "--home-router"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("--home-router with --lab: only with --link-of NAME"),
        "{err}"
    );
    for args in [
        &["--lab", "--link-of", "att-lte", "--scenario", "starlink"][..],
        &[
            "--lab",
            "--link-of",
            "att-lte",
            "--link",
            bad.to_str().unwrap(),
        ],
    ] {
        let (code, err) = demo(args);
        assert_eq!(code, Some(2), "{err}");
        assert!(err.contains("cannot be used with"), "{args:?}: {err}");
    }
    // The reference kernel plays section C's links as the lab does: deployed as a home router.
    let (code, err) = run(&["--link-of", "att-lte", "--kernel"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--home-router"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Lab runs are serialised: two at once share 2 cores and starve each other's bridges.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn lab_json_has_one_sim_style_summary_per_run_with_our_bridge_stats() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let out = Command::new(env!("CARGO_BIN_EXE_purple"))
        .args([
            "lab",
            "run",
            "b1",
            "--seconds",
            "2",
            "--qdisc",
            "cake",
            "--test",
            "download",
            "--no-sim",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1);
    let r = &runs[0];
    for k in ["scenario", "seed", "duration_s", "flows", "links", "qdiscs"] {
        assert!(!r[k].is_null(), "missing {k}: {r}");
    }
    let dl = r["flows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "TCP download")
        .unwrap();
    // Traffic crossed the bridge and CAKE held its 20 Mbit/s: the lower bound is loose because
    // a 2 s run on a loaded 2-core machine can starve the userspace bridge (seen in CI at
    // 1.9 Mbit/s while other lab runs shared the cores); speed belongs in `purple bench`.
    let g = dl["goodput_bps"].as_f64().unwrap();
    assert!(g > 0.3e6 && g < 20.4e6, "{dl}");
    assert_eq!(r["qdiscs"][0]["kind"], "cake");
}

fn sigterm_stops_the_run_and_removes_its_namespaces() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut child = Command::new(env!("CARGO_BIN_EXE_purple"))
        .args([
            "lab",
            "run",
            "b1",
            "--seconds",
            "60",
            "--qdisc",
            "cake",
            "--test",
            "upload",
            "--no-sim",
            "--quiet",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let t0 = Instant::now();
    while namespaces_of(pid).len() < 4 && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(namespaces_of(pid).len(), 4, "the run built its namespaces");
    std::thread::sleep(Duration::from_millis(1500));
    let p = rustix::process::Pid::from_raw(pid as i32).expect("a child's pid is positive");
    rustix::process::kill_process(p, rustix::process::Signal::Term).unwrap();
    let t1 = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            t1.elapsed() < Duration::from_secs(10),
            "still running 10 s after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(!status.success(), "an interrupted run is an error");
    assert!(
        namespaces_of(pid).is_empty(),
        "left: {:?}",
        namespaces_of(pid)
    );
}

/// A latency probe that gets no answer is an error naming the probe, never a latency: with the
/// server ignoring ICMP echo, the run fails and says which probe produced nothing.
fn a_blocked_icmp_probe_is_an_error_naming_it_not_a_latency() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let out = Command::new(env!("CARGO_BIN_EXE_purple"))
        .args([
            "lab",
            "run",
            "b1",
            "--seconds",
            "2",
            "--qdisc",
            "cake",
            "--test",
            "upload",
            "--no-sim",
            "--json",
            "--fault",
            "no-icmp-echo",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "a run without ICMP replies succeeded: {err}"
    );
    assert!(
        err.contains("\"Ping (ms) ICMP\"") && err.contains("produced no"),
        "the error does not name the probe: {err}"
    );
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("induced"),
        "a latency was printed"
    );
}

/// The kernel reference (~45 s: boots Linux 6.1 under QEMU TCG).
fn kernel_reference_runs_the_same_b2_in_the_guest_with_linux_cake() {
    let out = Command::new(env!("CARGO_BIN_EXE_purple"))
        .args([
            "lab",
            "run",
            "b2",
            "--seconds",
            "8",
            "--qdisc",
            "cake",
            "--no-sim",
            "--kernel",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let k = &v["kernel"]["runs"][0];
    assert_eq!(k["contender"], "CAKE");
    // Linux's own cake, kernel qdisc stats via `tc -s -j`.
    assert!(
        k["qdiscs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|q| q["kind"] == "cake"),
        "{}",
        k["qdiscs"]
    );
    // netem's 45 ms each way is in the guest's base RTT.
    let base = k["induced_ms"]["Ping (ms) ICMP"]["base_ms"]
        .as_f64()
        .unwrap();
    assert!((88.0..110.0).contains(&base), "guest base RTT {base} ms");
    assert!(k["down_mbit"].as_f64().unwrap() > 2.0);
}

/// The reference kernel on a varying link of the user's (~30 s): the file and its schedule
/// travel into the guest, `purple linkem` plays it there, the daemon drives Linux's CAKE over
/// netlink as it drives our bridge's on the host, and a link faster than the guest keeps up
/// with is played at a round share of its capacity in both runs.
fn kernel_reference_plays_a_link_file_with_linkem_in_the_guest_scaled_to_what_it_keeps_up_with() {
    let dir = std::env::temp_dir().join(format!("purple-lab-kernel-link-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("two.down"), "0 step 40mbit\n3 step 20mbit\n").unwrap();
    let file = dir.join("two.toml");
    std::fs::write(
        &file,
        "duration_s = 6\n[down]\nschedule = \"two.down\"\ndelay_ms = 5\n\
         [up]\nrate = \"10mbit\"\ndelay_ms = 5\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_purple"))
        .args(["lab", "run", "--link"])
        .arg(&file)
        .args([
            "--kernel",
            "--qdisc",
            "purple",
            "--seconds",
            "6",
            "--no-sim",
            "--json",
        ])
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // 40 Mbit/s at most: both runs play it at x0.2 (8 then 4 Mbit/s down, 2 up).
    assert_eq!(v["scenario"], "two-x0.2");
    let k = &v["kernel"];
    assert_eq!(k["scenario"], "two-x0.2");
    assert!(
        k["delay_stage"].as_str().unwrap().contains("purple linkem"),
        "{}",
        k["delay_stage"]
    );
    let kr = &k["runs"][0];
    assert!(
        kr["qdiscs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|q| q["kind"] == "cake"),
        "{}",
        kr["qdiscs"]
    );
    for (who, r) in [("host", &v["runs"][0]), ("guest", kr)] {
        assert_eq!(r["contender"], "CAKE + PURPLE (purple control)", "{who}");
        let down = r["down_mbit"].as_f64().unwrap();
        assert!((1.0..8.2).contains(&down), "{who}: {down} Mbit/s down");
        let up = r["up_mbit"].as_f64().unwrap();
        // The TCG guest's upload starves when the host is busy (0.17 and 0.26 Mbit/s seen at
        // stop 38 beside other work); there only that it flowed.
        let up_min = if who == "host" { 0.3 } else { 0.1 };
        assert!((up_min..2.1).contains(&up), "{who}: {up} Mbit/s up");
        // The daemon decided and its actuator applied: the download's rate moved within the
        // scaled range, with no actuator error (a warning would name it).
        let pts = r["rate_trace"]["points"].as_array().unwrap();
        let downs: Vec<f64> = pts
            .iter()
            .map(|p| p["down_mbit"].as_f64().unwrap())
            .collect();
        assert!(downs.len() > 50, "{who}: {} decisions", downs.len());
        let (lo, hi) = downs
            .iter()
            .fold((f64::MAX, 0.0f64), |(l, h), &x| (l.min(x), h.max(x)));
        // The range tops at 1.2 x the 90th percentile, 48 Mbit/s, x0.2.
        assert!(lo < hi && hi <= 9.61, "{who}: {lo}..{hi} Mbit/s");
        // The shaper itself held the rates the daemon applied: its own rate, read back twice
        // a second (Linux's CAKE over netlink in the guest, our bridge's control socket on
        // the host), each time equal to one applied within the second before.
        let rb = &r["rate_trace"]["readback"];
        let read = rb["samples"].as_u64().unwrap();
        assert!(read >= 8, "{who}: {read} read-backs: {rb}");
        assert_eq!(rb["errors"], 0, "{who}: {rb}");
        assert_eq!(rb["agree"].as_u64(), Some(read), "{who}: {rb}");
        // On the host the capacity dropped during the load (8 -> 4 Mbit/s at 3 s of the link,
        // x0.2) and the daemon's rate went to or below the new capacity before it rose again.
        // In the TCG guest only that the tracking was measured: where the drop falls on the
        // guest's clock depends on how long linkem took to start there (one CI run saw it
        // before the load, another the daemon hovering just above the new 4 Mbit/s under 38%
        // hypervisor steal), which says more of the guest's timing than of the law.
        let k = &r["rate_trace"]["tracking"];
        assert!(k["mean_rate_mbit"].as_f64().is_some(), "{who}: {k}");
        if who == "host" {
            assert!(k["drops"].as_u64().unwrap() >= 1, "{who}: {k}");
            assert!(k["drops_followed"].as_u64().unwrap() >= 1, "{who}: {k}");
        }
        // (A stalled host is a warning too, and says nothing about the actuator.)
        assert!(
            !r["warnings"]
                .as_array()
                .unwrap()
                .iter()
                .any(|w| w.as_str().unwrap().contains("actuator")),
            "{who}: {}",
            r["warnings"]
        );
    }
    // Linux's CAKE was left at a rate the daemon set, not the static start (8 Mbit/s, the
    // scaled link's median), read back by `tc -s -j`.
    let set: Vec<u64> = kr["qdiscs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|q| q["kind"] == "cake")
        .filter_map(|q| q["options"]["bandwidth"].as_u64())
        .collect();
    assert!(!set.is_empty() && !set.contains(&1_000_000), "{set:?}");
}

testkit::harness! {
    [] => { lab_list_names_the_three_scenarios, lab_run_link_errors_name_the_file_and_the_option },
    [Netns] => {
        lab_json_has_one_sim_style_summary_per_run_with_our_bridge_stats,
        sigterm_stops_the_run_and_removes_its_namespaces,
        a_blocked_icmp_probe_is_an_error_naming_it_not_a_latency,
    },
    [Netns, RefKernel] => {
        kernel_reference_runs_the_same_b2_in_the_guest_with_linux_cake,
        kernel_reference_plays_a_link_file_with_linkem_in_the_guest_scaled_to_what_it_keeps_up_with,
    },
}
