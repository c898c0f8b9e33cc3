//! The passive delay signal in closed loop (issue 14): the Starlink-like link with the download
//! shaped at the router, where the probes either miss the download's queue (the radio serves
//! ICMP apart from data, reflectors answer echo only) or are all lost. `purple` with the
//! passive signal keeps control; on the probes alone it does not.
#![allow(clippy::unwrap_used)]

use experiments::c::closed_loop::{run, Contender, LoopResult, LoopSpec};
use experiments::c::scenario::scenario;

fn spec(name: &str, c: Contender, secs: f64) -> LoopSpec {
    let mut s = LoopSpec::new(scenario(name, 1).unwrap(), c, 1);
    s.secs = secs;
    s.warmup = 3.0;
    s
}

fn show(tag: &str, r: &LoopResult) {
    eprintln!(
        "{tag:22} {:28} mean {:7.2} p99 {:7.2} down {:6.1} of {:6.1} up {:5.1}",
        r.name, r.latency.mean, r.latency.p99, r.throughput.down, r.capacity.down, r.throughput.up
    );
}

#[test]
fn with_every_probe_lost_the_passive_signal_keeps_the_rate_near_capacity() {
    // 26 s: the first two Starlink reconfigurations (12 s and 27 s... the first one).
    let secs = 26.0;
    let reference = run(&spec("starlink-router", Contender::Purple, secs));
    let blind = run(&spec("starlink-no-probes", Contender::Purple, secs));
    let both = run(&spec("starlink-no-probes", Contender::PurplePassive, secs));
    let alone = run(&spec(
        "starlink-no-probes",
        Contender::PurplePassiveOnly,
        secs,
    ));
    for (t, r) in [
        ("reflectors answer", &reference),
        ("no probes", &blind),
        ("no probes", &both),
        ("no probes", &alone),
    ] {
        show(t, r);
    }
    // On the probes alone, no reflector means the safe rate (10 Mbit/s of ~50-250).
    assert!(
        blind.throughput.down < 0.2 * blind.capacity.down,
        "{blind:?}"
    );
    for r in [&both, &alone] {
        // With the passive signal: near the capacity and near the reference's latency.
        assert!(
            r.throughput.down >= 0.9 * reference.throughput.down,
            "{}: {:.1} vs {:.1} Mbit/s",
            r.name,
            r.throughput.down,
            reference.throughput.down
        );
        assert!(
            r.latency.p99 <= reference.latency.p99 + 10.0,
            "{}: p99 {:.1} vs {:.1} ms",
            r.name,
            r.latency.p99,
            reference.latency.p99
        );
    }
}

#[test]
fn when_the_probes_miss_the_download_queue_the_passive_signal_sees_it() {
    let secs = 26.0;
    let probes = run(&spec("starlink-icmp-apart", Contender::Purple, secs));
    let both = run(&spec("starlink-icmp-apart", Contender::PurplePassive, secs));
    show("icmp apart", &probes);
    show("icmp apart", &both);
    // The probes see no queue, so the rate runs above the capacity and the radio bloats.
    assert!(probes.latency.p99 > 50.0, "{probes:?}");
    assert!(both.latency.p99 < 0.5 * probes.latency.p99);
    assert!(both.throughput.down >= 0.7 * both.capacity.down);
}

#[test]
#[ignore]
fn debug_series() {
    for (n, c) in [
        ("starlink-router", Contender::Purple),
        ("starlink-no-probes", Contender::PurplePassiveOnly),
    ] {
        let r = run(&spec(n, c, 26.0));
        show(n, &r);
        for p in &r.series {
            if (p.t > 3.0 && p.t < 4.5) || (p.t > 11.8 && p.t < 14.5) {
                eprintln!("{:5.2} cap {:6.1} rate {:6.1} thr {:6.1} rtt {:6.1} | up cap {:5.1} rate {:5.1} thr {:5.1}", p.t, p.cap.down, p.rate.down, p.thr.down, p.rtt_ms - r.base_rtt_ms, p.cap.up, p.rate.up, p.thr.up);
            }
        }
    }
}
