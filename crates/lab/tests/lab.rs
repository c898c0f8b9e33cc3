//! Short lab runs in network namespaces with real kernel TCP through our bridge. Skipped with a
//! printed reason when not root or when namespaces cannot be created. Without `purple linkem`
//! (set PURPLE_LINKEM_BIN to a `purple` binary that has it) the delay stage is a kernel bridge, so the
//! base RTT is ~0 and only the induced latency is meaningful.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use lab::scenario::{self, Contender};
use lab::{DelayStage, LabOpts, LabRun};

fn stage() -> DelayStage {
    DelayStage::detect(
        std::env::var_os("PURPLE_LINKEM_BIN")
            .as_deref()
            .map(std::path::Path::new),
    )
}

fn skip_reason() -> Option<String> {
    if !lab::ns::is_root() {
        return Some("not root".into());
    }
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let probe = format!("plab-probe-{}-{n}", std::process::id());
    match lab::ns::Netns::create(&probe) {
        Ok(_) => None,
        Err(e) => Some(format!("cannot create network namespaces: {e}")),
    }
}

/// Runs are serialised: parallel runs would share two cores and disturb each other's timing.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn run(scn: &str, test: &str, c: Contender, secs: f64) -> LabRun {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let s = scenario::find(scn).unwrap();
    let t = s.tests.iter().find(|t| t.name == test).unwrap().clone();
    let opts = LabOpts::new(secs, stage());
    let r = lab::run_one(&s, &c, &t, &opts, &mut |_| {}).unwrap();
    eprintln!(
        "{} {}: up {:.2} down {:.2} Mbit/s; ICMP induced {:?}; warnings {:?}",
        r.contender,
        r.test,
        r.up_mbit,
        r.down_mbit,
        r.induced("Ping (ms) ICMP"),
        r.warnings
    );
    r
}

#[test]
fn b1_upload_cake_induces_far_less_latency_than_fifo_at_full_goodput() {
    if let Some(why) = skip_reason() {
        eprintln!("skipped: {why}");
        return;
    }
    let cake = run("b1", "upload", scenario::CAKE, 5.0);
    let fifo = run("b1", "upload", scenario::FIFO, 5.0);
    let ci = cake.induced("Ping (ms) ICMP").unwrap();
    let fi = fifo.induced("Ping (ms) ICMP").unwrap();
    // 3 Mbit/s uplink: CUBIC fills pfifo's 1000 packets (seconds of queue); CAKE keeps the
    // ping's own flow empty.
    assert!(ci.p99 < 30.0, "CAKE induced p99 {:.1} ms", ci.p99);
    assert!(
        fi.mean > 10.0 * ci.mean.max(1.0),
        "FIFO mean {:.1} vs CAKE {:.1}",
        fi.mean,
        ci.mean
    );
    // Goodput near the shaper; with linkem's 90 ms RTT a 5 s CUBIC flow under CAKE's ECN
    // marks reaches ~2.3 of 3 Mbit/s (the simulator: 2.8 over 10 s).
    for r in [&cake, &fifo] {
        assert!(
            (2.0..3.1).contains(&r.up_mbit),
            "{}: upload goodput {:.2} Mbit/s at a 3 Mbit/s shaper",
            r.contender,
            r.up_mbit
        );
    }
    assert!(!cake.summary.qdiscs.is_empty(), "bridge stats present");
    assert_eq!(cake.summary.qdiscs[0]["kind"], "cake");
}

#[test]
fn b2_rrul_cake_keeps_icmp_induced_latency_within_the_seed_figures_and_fills_both_links() {
    if let Some(why) = skip_reason() {
        eprintln!("skipped: {why}");
        return;
    }
    let r = run("b2", "rrul", scenario::CAKE, 10.0);
    let icmp = r.induced("Ping (ms) ICMP").unwrap();
    // The seed's kernel CAKE: ICMP induced mean 3.7-4.6 ms, max 12-22 ms (with 45 ms each way;
    // our margin covers a loaded 2-core host).
    assert!(icmp.mean < 10.0, "ICMP induced mean {:.1} ms", icmp.mean);
    assert!(icmp.p99 < 40.0, "ICMP induced p99 {:.1} ms", icmp.p99);
    assert!(
        (14.0..20.5).contains(&r.down_mbit),
        "down {:.2} Mbit/s",
        r.down_mbit
    );
    assert!(
        (1.8..3.1).contains(&r.up_mbit),
        "up {:.2} Mbit/s",
        r.up_mbit
    );
    // diffserv3: CS1 (bulk tin) gets the least of the downlink.
    let g = |n: &str| r.summary.flow(n).unwrap().goodput_bps;
    assert!(
        g("TCP download BK") < g("TCP download BE"),
        "BK {} vs BE {}",
        g("TCP download BK"),
        g("TCP download BE")
    );
    assert_eq!(r.summary.flows.len(), 12, "4 probes + 8 TCP flows");
    assert!(r
        .summary
        .flows
        .iter()
        .all(|f| !f.series.goodput_bps.is_empty()));
}

#[test]
fn a_run_leaves_none_of_its_namespaces_behind() {
    if let Some(why) = skip_reason() {
        eprintln!("skipped: {why}");
        return;
    }
    let r = run("b1", "download", scenario::FQ_CODEL, 2.0);
    assert_eq!(r.namespaces.len(), 4);
    let out = std::process::Command::new("ip")
        .args(["netns", "list"])
        .output()
        .unwrap();
    let list = String::from_utf8_lossy(&out.stdout);
    for n in &r.namespaces {
        assert!(
            !list
                .lines()
                .any(|l| l.split_whitespace().next() == Some(n.as_str())),
            "{n} left behind: {list}"
        );
    }
}

#[test]
fn with_linkem_the_base_rtt_is_the_scenarios_90_ms() {
    if let Some(why) = skip_reason() {
        eprintln!("skipped: {why}");
        return;
    }
    if !matches!(stage(), DelayStage::Linkem(_)) {
        eprintln!(
            "skipped: needs `purple linkem` (set PURPLE_LINKEM_BIN to a purple binary that has it)"
        );
        return;
    }
    let r = run("b1", "download", scenario::CAKE, 5.0);
    let i = r.induced("Ping (ms) ICMP").unwrap();
    assert!(
        (88.0..96.0).contains(&i.base_ms),
        "base RTT {:.1} ms",
        i.base_ms
    );
    assert!(i.max < 30.0, "CAKE download induced peak {:.1} ms", i.max);
}
