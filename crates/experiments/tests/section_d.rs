//! Section D (L4S): DualPI2 under TCP, classic CUBIC and scalable Prague flows, and the D1
//! experiment's claims. Durations are shortened where the behaviour is already steady.

use experiments::d::{run_mix, MixResult, MixSpec};
use experiments::{find, RunOpts};

fn mix(qdisc: &str, classic: usize, l4s: usize, seconds: f64) -> MixResult {
    let r = run_mix(&MixSpec::new(qdisc, classic, l4s, seconds, 1))
        .unwrap_or_else(|e| panic!("{qdisc}: {e}"));
    println!(
        "{qdisc} {classic}c+{l4s}l: classic {:?} Mbit/s delay {:.2}/{:.2}/{:.2} ms; L4S {:?} \
         Mbit/s delay {:.2}/{:.2}/{:.2} ms; util {:.3}, drops {}, marks {}",
        r.classic.mbit,
        r.classic.delay_mean,
        r.classic.delay_p50,
        r.classic.delay_p99,
        r.l4s.mbit,
        r.l4s.delay_mean,
        r.l4s.delay_p50,
        r.l4s.delay_p99,
        r.utilisation,
        r.drops,
        r.marks
    );
    r
}

#[test]
fn dualpi2_holds_classic_cubic_near_its_15ms_target() {
    let r = mix("dualpi2", 2, 0, 20.0);
    assert!(
        (7.5..=22.5).contains(&r.classic.delay_mean),
        "classic queue {:.1} ms",
        r.classic.delay_mean
    );
    assert!(r.utilisation >= 0.9, "{}", r.utilisation);
    assert!(r.drops > 0, "Not-ECT classic traffic is dropped");
    // The only CE marks are on the ECT(1) probe's 200 replies (one every 100 ms).
    assert!(r.marks <= 200, "{} marks", r.marks);
}

#[test]
fn dualpi2_holds_scalable_prague_near_its_1ms_step() {
    let r = mix("dualpi2", 0, 2, 20.0);
    assert!(
        r.l4s.delay_mean <= 1.5 && r.l4s.delay_p99 <= 4.0,
        "L4S queue {:.2} ms (p99 {:.2})",
        r.l4s.delay_mean,
        r.l4s.delay_p99
    );
    assert!(r.utilisation >= 0.95, "{}", r.utilisation);
    assert_eq!(r.drops, 0, "ECN, not loss");
    assert!(r.marks > 100);
}

#[test]
fn dualpi2_coupling_gives_one_classic_and_one_scalable_flow_roughly_equal_rates() {
    let r = mix("dualpi2", 1, 1, 30.0);
    let ratio = r.l4s.per_flow() / r.classic.per_flow();
    assert!((0.5..=2.0).contains(&ratio), "Prague / CUBIC = {ratio:.2}");
    assert!(r.l4s.delay_mean < r.classic.delay_mean / 3.0);
    assert!(r.utilisation >= 0.9);
}

#[test]
fn d1_claims_hold() {
    let e = find("D1").expect("D1 is listed");
    let r = (e.run)(&RunOpts {
        seed: 1,
        time_scale: 0.5,
    });
    println!("{}", r.table.to_text());
    for c in &r.claims {
        println!("[{}] {} | {} | {}", c.pass, c.seed, c.ours, c.tolerance);
    }
    for n in &r.notes {
        println!("note: {n}");
    }
    assert!(r.claims.len() >= 6, "{} claims", r.claims.len());
    assert!(r.all_pass(), "{}", r.failures());
    assert_eq!(r.runs.len(), 3);
    for run in &r.runs {
        if let Err(e) = run.flent_labels() {
            panic!("D1: {e}");
        }
    }
}

#[test]
fn a_bad_qdisc_is_an_error_naming_it() {
    let e = run_mix(&MixSpec::new("dualpi2 coupling_factor 0", 1, 1, 1.0, 1))
        .expect_err("coupling_factor 0 is rejected");
    assert!(e.to_string().contains("coupling_factor"), "{e}");
}
