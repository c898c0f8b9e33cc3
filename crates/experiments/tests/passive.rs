//! The passive delay signal in closed loop (issue 14): the Starlink-like link with the download
//! shaped at the router, where the probes either miss the download's queue (the radio serves
//! ICMP apart from data, reflectors answer echo only) or are all lost. `purple` with the
//! passive signal keeps control: at >= 90% of the throughput it has with answered reflectors and
//! within 5 ms of their p95 (issue 14's p99 bar is reported by `purple sim C-starlink-*`); on the
//! probes alone it does not. Deterministic (seed 1, 60 s simulated per run).
#![allow(clippy::unwrap_used)]

use experiments::c::closed_loop::{run, Contender, LoopResult, LoopSpec};
use experiments::c::passive_claims;
use experiments::c::scenario::{scenario, ShaperAt};

fn run_on(name: &str, c: Contender) -> LoopResult {
    run(&LoopSpec::new(scenario(name, 1).unwrap(), c, 1)).expect("probe samples")
}

/// `C-starlink-*`'s claims from only the runs they compare (the report adds the other
/// contenders for the table).
fn check(name: &str) {
    let runs = [
        Contender::Purple,
        Contender::PurplePassive,
        Contender::PurplePassiveOnly,
    ]
    .map(|c| run_on(name, c));
    let refs = [Contender::Purple, Contender::PurplePassive].map(|c| run_on("starlink-router", c));
    for r in runs.iter().chain(&refs) {
        eprintln!(
            "{:28} p95 {:7.2} p99 {:7.2} mean {:6.2} down {:6.1} of {:6.1}",
            r.name(),
            r.latency().p95,
            r.latency().p99,
            r.latency().mean,
            r.throughput().down,
            r.capacity().down
        );
    }
    let claims = passive_claims(
        scenario(name, 1).unwrap().probe_path(),
        [&runs[0], &runs[1], &runs[2]],
        [&refs[0], &refs[1]],
    );
    assert_eq!(claims.len(), 6);
    // Issue 14's p99 bar is reported, not asserted: on this link p99 is the reconfigurations'
    // outages (the oracle's is 84-104 ms), which a probe more or less inside them moves by tens
    // of ms. Its throughput half is asserted, and every other claim.
    for c in claims.iter().filter(|c| !c.seed.starts_with("issue 14")) {
        assert!(c.pass, "{}: {} ({})", c.seed, c.ours, c.tolerance);
    }
    // The download CAKE at the router is after the radio: the summary reports its link too,
    // with the tc statistics of both CAKEs.
    let s = runs[0].summary();
    let names: Vec<&str> = s.links.iter().map(|k| k.name.as_str()).collect();
    assert_eq!(names, ["radio down", "radio up", "after the radio down"]);
    let with_cake: Vec<&str> = s.qdiscs.iter().filter_map(|q| q["link"].as_str()).collect();
    assert_eq!(with_cake, ["radio up", "after the radio down"]);
    for r in &runs[1..] {
        assert!(
            r.throughput().down >= 0.9 * refs[0].throughput().down,
            "{}: {:.1} vs {:.1} Mbit/s",
            r.name(),
            r.throughput().down,
            refs[0].throughput().down
        );
    }
}

#[test]
fn with_every_probe_lost_the_passive_signal_keeps_the_rate_near_capacity() {
    check("starlink-no-probes");
}

#[test]
fn when_the_probes_miss_the_download_queue_the_passive_signal_sees_it() {
    check("starlink-icmp-apart");
}

#[test]
fn the_passive_contenders_are_listed_only_where_the_shaper_is_at_the_router() {
    let at_router = scenario("starlink-no-probes", 1).unwrap();
    assert!(Contender::all(&at_router).contains(&Contender::PurplePassive));
    let front = scenario("starlink", 1).unwrap();
    assert!(!Contender::all(&front).contains(&Contender::PurplePassive));
    // Run anyway where the shaper is in front of the radio, a passive contender gets no
    // passive feed (its taps would time the shaper's own queue): with every probe lost it has
    // no signal at all, and falls to its safe rate like the probes alone.
    let mut sc = scenario("starlink-no-probes", 1).unwrap();
    sc.deployment.shaper = ShaperAt::Radio;
    let mut s = LoopSpec::new(sc, Contender::PurplePassive, 1);
    s.secs = 10.0;
    s.warmup = 3.0;
    let r = run(&s).expect("probe samples");
    assert!(r.share() < 0.2, "{:.2}", r.share());
}
