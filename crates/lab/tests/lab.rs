//! Short lab runs in network namespaces with real kernel TCP through our bridge. Skipped with a
//! printed reason when not root or when namespaces cannot be created. Without `purple linkem`
//! (set PURPLE_BIN to a `purple` binary that has it) the delay stage is a kernel bridge, so the
//! base RTT is ~0 and only the induced latency is meaningful.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use lab::scenario::{self, Contender};
use lab::{DelayStage, LabOpts, LabRun};

fn stage() -> DelayStage {
    DelayStage::detect(std::env::var_os("PURPLE_BIN").as_deref().map(std::path::Path::new))
}

fn skip_reason() -> Option<String> {
    if !lab::ns::is_root() {
        return Some("not root".into());
    }
    let probe = format!("plab-probe-{}", std::process::id());
    match lab::ns::Netns::create(&probe) {
        Ok(_) => None,
        Err(e) => Some(format!("cannot create network namespaces: {e}")),
    }
}

fn run(scn: &str, test: &str, c: Contender, secs: f64) -> LabRun {
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
    assert!(fi.mean > 10.0 * ci.mean.max(1.0), "FIFO mean {:.1} vs CAKE {:.1}", fi.mean, ci.mean);
    for r in [&cake, &fifo] {
        assert!(
            (2.3..3.1).contains(&r.up_mbit),
            "{}: upload goodput {:.2} Mbit/s at a 3 Mbit/s shaper",
            r.contender,
            r.up_mbit
        );
    }
    assert!(!cake.summary.qdiscs.is_empty(), "bridge stats present");
    assert_eq!(cake.summary.qdiscs[0]["kind"], "cake");
}
