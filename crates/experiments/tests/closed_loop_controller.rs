//! The controllers in closed loop (moved from the controller crate, now on
//! `experiments::c::closed_loop`): a 100 Mbit/s radio dropping to 30 Mbit/s and back, CAKE in
//! front of it shaped by the controller, CUBIC bulk flows both ways and timestamp probes with
//! clock offsets and 1 ms resolution. Measures reaction to the drop and recovery.
#![allow(clippy::unwrap_used)]

use controller::{mbit, Rate};
use experiments::c::closed_loop::{run, Contender, LoopResult, LoopSpec, Point};
use experiments::c::scenario::{scenario, slotted, SLOT};

const DROP: f64 = 10.0;
const BACK: f64 = 20.0;

/// 100/30 Mbit/s, down to 30/10 at 10 s, back at 20 s, 35 s.
fn drop_spec(c: Contender) -> LoopSpec {
    let mut sc = scenario("step", 1).unwrap();
    let series = |hi: f64, lo: f64| {
        slotted(
            (0..(35.0 / SLOT.as_secs_f64()) as usize + 1)
                .map(|i| {
                    let t = i as f64 * SLOT.as_secs_f64();
                    mbit(if (DROP..BACK).contains(&t) { lo } else { hi })
                })
                .collect(),
        )
    };
    sc.link.down.capacity = series(100.0, 30.0);
    sc.link.up.capacity = series(30.0, 10.0);
    sc.link.secs = 35.0;
    LoopSpec::new(sc, c, 7)
}

/// Seconds from `from` until `pred` first holds.
fn time_until(r: &LoopResult, from: f64, pred: impl Fn(&Point) -> bool) -> Option<f64> {
    r.series
        .iter()
        .find(|x| x.t >= from && pred(x))
        .map(|x| x.t - from)
}

/// Reaction: the shaper at or below the new capacity and the probes' RTT back under the idle
/// RTT + 15 ms.
fn reaction(r: &LoopResult) -> Option<f64> {
    time_until(r, DROP, |x| {
        x.rate.down <= 30.0 && x.rtt_ms.is_finite() && x.rtt_ms < r.base_rtt_ms() + 15.0
    })
}

#[test]
fn purple_reacts_to_a_capacity_drop_within_2s_and_recovers_within_10s() {
    let r = run(&drop_spec(Contender::Purple)).expect("probe samples");
    let react = reaction(&r);
    let recover = time_until(&r, BACK, |x| x.rate.down >= 80.0);
    eprintln!("purple: reaction {react:?} s, recovery {recover:?} s");
    assert!(react.is_some_and(|s| s <= 2.0), "reaction {react:?}");
    assert!(recover.is_some_and(|s| s <= 10.0), "recovery {recover:?}");
}

#[test]
fn purple_aimd_reacts_within_10s_and_climbs_only_additively_after_capacity_returns() {
    let r = run(&drop_spec(Contender::PurpleAimd)).expect("probe samples");
    let react = reaction(&r);
    assert!(react.is_some_and(|s| s <= 10.0), "reaction {react:?}");
    // Additive increase: 15 s after the capacity returns it has gained something, but is far
    // from the 80 Mbit/s that PURPLE regains in seconds.
    let at = |t: f64| {
        r.series
            .iter()
            .find(|x| x.t >= t)
            .map_or(0.0, |x| x.rate.down)
    };
    let gained = at(34.9) - at(BACK);
    eprintln!("purple-aimd: reaction {react:?} s, gained {gained:.1} Mbit/s in 15 s");
    assert!(gained > 1.0, "gained {gained}");
    assert!(at(34.9) < 80.0, "{}", at(34.9));
}

/// Recording the decisions (a tool for studying a law) keeps one per control step, each with
/// the signals the law saw, and changes none of the run's figures.
#[test]
fn recording_decisions_keeps_every_step_and_changes_nothing() {
    let mut spec = drop_spec(Contender::Purple);
    spec.secs = 12.0;
    let plain = run(&spec).expect("probe samples");
    spec.record_decisions = true;
    let rec = run(&spec).expect("probe samples");
    assert!(plain.decisions.is_empty());
    assert_eq!(
        serde_json::to_string(&plain).unwrap(),
        serde_json::to_string(&rec).unwrap()
    );
    // The samples are not serialised: compared apart.
    assert_eq!(plain.samples(), rec.samples());
    for d in controller::Direction::ALL {
        assert_eq!(plain.one_way(d).samples_ms, rec.one_way(d).samples_ms);
    }
    // The result is the backends' summary, its loaded part what the accessors read.
    let s = plain.summary();
    let l = s
        .loaded
        .as_ref()
        .expect("the closed loop fills its loaded part");
    assert_eq!(
        (s.name.as_str(), s.duration_s, s.bin_s),
        (plain.name(), 12.0, 0.05)
    );
    // Its flows: section C's four downloads and two uploads, then the probes, each with its
    // goodput from the warm-up on; the downloads' goodput is the radio's delivery less the
    // headers and the probes.
    let names: Vec<&str> = s.flows.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(
        names[..6],
        [
            "TCP download 1",
            "TCP download 2",
            "TCP download 3",
            "TCP download 4",
            "TCP upload 1",
            "TCP upload 2"
        ]
    );
    assert!(names.len() > 6 && names[6..].iter().all(|n| n.starts_with("probe ")));
    let down: f64 = s.flows[..4].iter().map(|f| f.goodput_bps).sum::<f64>() * 1e-6;
    let radio = plain.throughput().down;
    eprintln!("downloads' goodput {down:.2} Mbit/s, radio's delivery {radio:.2}");
    assert!(down > 0.9 * radio && down <= radio, "{down} vs {radio}");
    assert!(s.flows.iter().all(|f| f.latency_samples_ms.is_empty()));
    assert_eq!(l.latency.as_ref(), Some(plain.latency()));
    assert!(plain.latency().n > 0 && plain.latency().p99 >= plain.latency().median);
    assert_eq!(l.samples_ms.len(), plain.latency().n);
    let one_way = l.one_way.as_ref().expect("one-way delays");
    assert_eq!(
        plain.base_rtt_ms(),
        one_way.down.base_ms + one_way.up.base_ms
    );
    assert!(plain.base_rtt_ms() > 0.0);
    assert!(
        plain.share() > 0.1 && plain.share() <= 1.0,
        "{}",
        plain.share()
    );
    // The radio both ways, as the simulator reports links, each with its CAKE's tc statistics.
    let names: Vec<&str> = s.links.iter().map(|k| k.name.as_str()).collect();
    assert_eq!(names, ["radio down", "radio up"]);
    for k in &s.links {
        assert!(
            k.utilisation > 0.1 && k.utilisation <= 1.0,
            "{}",
            k.utilisation
        );
        assert_eq!(k.tx_bps.len(), plain.series.len());
    }
    let kinds: Vec<(&str, &str)> = s
        .qdiscs
        .iter()
        .map(|q| {
            (
                q["link"].as_str().unwrap_or(""),
                q["kind"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(kinds, [("radio down", "cake"), ("radio up", "cake")]);
    // A step every 50 ms from 0 to 12 s: 240, give or take the first and the last.
    let n = rec.decisions.len();
    assert!((238..=242).contains(&n), "{n} decisions");
    assert!(rec.decisions.windows(2).all(|w| w[1].0 > w[0].0));
    // After the drop to 30 Mbit/s at 10 s the law acts on what it saw: some decision after
    // the drop sets the download below 40 Mbit/s, with a delay or a throughput behind it.
    let cut = rec
        .decisions
        .iter()
        .find(|(t, d, _)| *t > DROP && d.rate.mbit() < 40.0)
        .unwrap_or_else(|| panic!("no cut after the drop: {:?}", &rec.decisions[200..]));
    assert!(
        cut.1.delay_ms.is_some() || cut.1.throughput > Rate::ZERO,
        "{cut:?}"
    );
}

/// The censored oracle (the matrix's reference for what delivery readings can tell a law) is
/// told the previous interval's capacity only when that capacity was at most the rate it had
/// set, and then shapes to 95% of it; otherwise it raises its rate by its gain; always within
/// the controllers' range.
#[test]
fn the_censored_oracle_is_told_the_capacity_only_when_the_link_was_the_bottleneck() {
    let spec = drop_spec(Contender::OracleCensored(25));
    let cfg = spec.config();
    let r = run(&spec).expect("probe samples");
    let (mut told, mut probed) = (0, 0);
    for w in r.series.windows(2) {
        let (a, b) = (&w[0], &w[1]);
        for (cap, set, next, lo, hi) in [
            (
                a.cap.down,
                a.rate.down,
                b.rate.down,
                cfg.min.down,
                cfg.max.down,
            ),
            (a.cap.up, a.rate.up, b.rate.up, cfg.min.up, cfg.max.up),
        ] {
            let want = if cap > set {
                probed += 1;
                set * 1.25
            } else {
                told += 1;
                cap * 0.95
            }
            .clamp(lo.mbit(), hi.mbit());
            assert!(
                (next - want).abs() <= 1e-4 * want,
                "t {}: capacity {cap}, set {set}, next {next}, want {want}",
                b.t
            );
        }
    }
    assert!(told > 100 && probed > 100, "told {told}, probed {probed}");
}

/// The saturated oracle (the tighter reference: what a perfect delivery reading shows) is told
/// the previous interval's capacity only when the radio was busy for all of it, so only after
/// an interval that delivered (about) the capacity; then it shapes to 95% of it, and otherwise
/// raises its rate by its gain, within the controllers' range. Unlike the censored oracle it is
/// not told in an interval whose capacity was below its rate but which the senders did not fill.
#[test]
fn the_saturated_oracle_is_told_the_capacity_only_after_an_interval_the_link_was_busy() {
    let spec = drop_spec(Contender::OracleSaturated(25));
    let cfg = spec.config();
    let r = run(&spec).expect("probe samples");
    let (mut told, mut probed, mut unfilled) = (0, 0, 0);
    for w in r.series.windows(2) {
        let (a, b) = (&w[0], &w[1]);
        for (cap, set, thr, next, lo, hi) in [
            (
                a.cap.down,
                a.rate.down,
                a.thr.down,
                b.rate.down,
                cfg.min.down,
                cfg.max.down,
            ),
            (
                a.cap.up, a.rate.up, a.thr.up, b.rate.up, cfg.min.up, cfg.max.up,
            ),
        ] {
            let told_rate = (cap * 0.95).clamp(lo.mbit(), hi.mbit());
            let probe_rate = (set * 1.25).clamp(lo.mbit(), hi.mbit());
            let close = |want: f64| (next - want).abs() <= 1e-4 * want;
            if close(told_rate) && !close(probe_rate) {
                told += 1;
                assert!(
                    thr >= 0.95 * cap,
                    "t {}: told after delivering {thr} of {cap} Mbit/s",
                    b.t
                );
            } else {
                assert!(
                    close(probe_rate),
                    "t {}: capacity {cap}, set {set}, next {next}",
                    b.t
                );
                probed += 1;
                if cap <= set && thr < 0.9 * cap {
                    unfilled += 1;
                }
            }
        }
    }
    assert!(told > 100 && probed > 100, "told {told}, probed {probed}");
    assert!(
        unfilled > 0,
        "no interval below its rate that the senders left unfilled"
    );
}
