//! The controllers in closed loop (moved from the controller crate, now on
//! `experiments::c::closed_loop`): a 100 Mbit/s radio dropping to 30 Mbit/s and back, CAKE in
//! front of it shaped by the controller, CUBIC bulk flows both ways and timestamp probes with
//! clock offsets and 1 ms resolution. Measures reaction to the drop and recovery.
#![allow(clippy::unwrap_used)]

use controller::mbit;
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
    sc.down = series(100.0, 30.0);
    sc.up = series(30.0, 10.0);
    sc.secs = 35.0;
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
        x.rate.down <= 30.0 && x.rtt_ms.is_finite() && x.rtt_ms < r.base_rtt_ms + 15.0
    })
}

#[test]
fn purple_reacts_to_a_capacity_drop_within_2s_and_recovers_within_10s() {
    let r = run(&drop_spec(Contender::Purple));
    let react = reaction(&r);
    let recover = time_until(&r, BACK, |x| x.rate.down >= 80.0);
    eprintln!("purple: reaction {react:?} s, recovery {recover:?} s");
    assert!(react.is_some_and(|s| s <= 2.0), "reaction {react:?}");
    assert!(recover.is_some_and(|s| s <= 10.0), "recovery {recover:?}");
}

#[test]
fn purple_aimd_reacts_within_10s_and_climbs_only_additively_after_capacity_returns() {
    let r = run(&drop_spec(Contender::PurpleAimd));
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
