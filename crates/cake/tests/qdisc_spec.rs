//! The tc-syntax qdisc parser, `AnyQdisc::from_tc`.

use cake::AnyQdisc;
use qdisc::Qdisc;

fn kind(spec: &str) -> &'static str {
    match AnyQdisc::from_tc(spec, 1) {
        Ok(q) => q.kind(),
        Err(e) => panic!("{spec:?}: {e}"),
    }
}

fn error(spec: &str) -> String {
    match AnyQdisc::from_tc(spec, 1) {
        Ok(q) => panic!("{spec:?} parsed as {}", q.kind()),
        Err(e) => e.to_string(),
    }
}

#[test]
fn every_contender_of_the_testbed_parses() {
    assert_eq!(kind("cake bandwidth 20mbit"), "cake");
    assert_eq!(kind("fq_codel"), "fq_codel");
    assert_eq!(kind("codel ecn"), "codel");
    assert_eq!(kind("pie ecn"), "pie");
    assert_eq!(kind("pfifo 1000"), "pfifo");
    assert_eq!(kind("pfifo limit 50"), "pfifo");
    assert_eq!(kind("bfifo 15k"), "bfifo");
    assert_eq!(kind("sfq"), "sfq");
    assert_eq!(
        kind("sfq limit 1000 perturb 10 quantum 1514 divisor 1024 flows 128 depth 127 headdrop"),
        "sfq"
    );
    assert_eq!(kind("sfb"), "sfb");
    assert_eq!(
        kind("sfb limit 100 target 20 max 25 increment 0.0005 decrement 0.00005 penalty_rate 10 penalty_burst 20"),
        "sfb"
    );
    assert_eq!(kind("htb rate 20mbit burst 15k fq_codel"), "htb");
    assert_eq!(kind("htb rate 3mbit burst 15k sfq"), "htb");
}

#[test]
fn htb_wraps_the_named_child_with_the_given_rate_and_burst() {
    let Ok(AnyQdisc::Htb(h)) =
        AnyQdisc::from_tc("htb rate 20mbit burst 15k ceil 30mbit sfq perturb 10", 3)
    else {
        panic!("not htb");
    };
    let c = h.config();
    assert_eq!((c.rate, c.burst, c.ceil), (2_500_000, 15 * 1024, 3_750_000));
    assert_eq!(c.cburst, 1600, "tc's default cburst");
    match h.child() {
        AnyQdisc::Sfq(s) => assert_eq!(s.config().perturb, qdisc::Duration::from_secs(10)),
        other => panic!("child {}", other.kind()),
    }
    let Ok(AnyQdisc::Htb(h)) = AnyQdisc::from_tc("htb rate 1mbit", 3) else {
        panic!("not htb");
    };
    assert_eq!(h.child().kind(), "pfifo");
    assert_eq!(h.config().burst, 1600);
}

#[test]
fn sfq_and_sfb_options_reach_their_configs() {
    let Ok(AnyQdisc::Sfq(s)) = AnyQdisc::from_tc("sfq limit 1000 depth 50 flows 64 divisor 256", 1)
    else {
        panic!("not sfq");
    };
    let c = s.config();
    assert_eq!((c.limit, c.depth, c.flows, c.divisor), (1000, 50, 64, 256));
    let Ok(AnyQdisc::Sfb(s)) = AnyQdisc::from_tc(
        "sfb limit 200 max 30 target 10 increment 0.001 rehash 1000 db 100",
        1,
    ) else {
        panic!("not sfb");
    };
    let c = s.config();
    assert_eq!((c.limit, c.max, c.target, c.increment), (200, 30, 10, 66));
    assert_eq!(c.rehash, qdisc::Duration::from_secs(1));
}

#[test]
fn errors_name_the_bad_option_and_the_accepted_ones() {
    let e = error("sfq bogus 3");
    assert!(e.contains("\"bogus\"") && e.contains("perturb"), "{e}");
    let e = error("sfq divisor 1000");
    assert!(e.contains("divisor") && e.contains("power of two"), "{e}");
    let e = error("sfb increment 2");
    assert!(e.contains("increment"), "{e}");
    let e = error("sfb limit x");
    assert!(e.contains("limit") && e.contains("\"x\""), "{e}");
    let e = error("htb burst 15k fq_codel");
    assert!(e.contains("rate"), "{e}");
    let e = error("htb rate fast fq_codel");
    assert!(e.contains("rate") && e.contains("fast"), "{e}");
    let e = error("htb rate 20mbit nosuch");
    assert!(e.contains("nosuch") && e.contains("sfq"), "{e}");
    let e = error("fq_codel ecn extra");
    assert!(e.contains("extra") && e.contains("accepted"), "{e}");
    let e = error("");
    assert!(e.contains("accepted"), "{e}");
    assert!(error("cake nonsense").contains("cake"));
}

fn dualpi2(spec: &str) -> qdisc::dualpi2::DualPi2Config {
    match AnyQdisc::from_tc(spec, 1) {
        Ok(AnyQdisc::DualPi2(q)) => *q.config(),
        Ok(q) => panic!("{spec:?} parsed as {}", q.kind()),
        Err(e) => panic!("{spec:?}: {e}"),
    }
}

#[test]
fn dualpi2_takes_tc_dualpi2s_options_with_the_kernels_defaults() {
    use qdisc::dualpi2::{DualPi2Config, EcnClassifier, StepThreshold};
    use qdisc::Duration;
    assert_eq!(kind("dualpi2"), "dualpi2");
    assert_eq!(dualpi2("dualpi2"), DualPi2Config::default());
    let c = dualpi2(
        "dualpi2 limit 500 memlimit 1m target 20ms tupdate 10ms alpha 0.2 beta 4 \
         step_thresh 2ms min_qlen_step 3 coupling_factor 3 overflow drop_enqueue any_ect \
         classic_protection 25% no_split_gso",
    );
    assert_eq!((c.limit, c.memory_limit), (500, Some(1 << 20)));
    assert_eq!(
        (c.target, c.tupdate, c.alpha, c.beta),
        (
            Duration::from_millis(20),
            Duration::from_millis(10),
            0.2,
            4.0
        )
    );
    assert_eq!(c.step, StepThreshold::Time(Duration::from_millis(2)));
    assert_eq!((c.min_qlen_step, c.coupling_factor), (3, 3));
    assert!(!c.drop_overload && c.drop_early && !c.split_gso);
    assert_eq!(
        (c.classifier, c.classic_protection),
        (EcnClassifier::AnyEct, 25)
    );
    // A bare step threshold is microseconds, as in tc; packets take a suffix.
    assert_eq!(
        dualpi2("dualpi2 step_thresh 500").step,
        StepThreshold::Time(Duration::from_micros(500))
    );
    for p in ["5p", "5pkt", "5pkts", "5packet", "5packets"] {
        let c = dualpi2(&format!("dualpi2 step_thresh {p}"));
        assert_eq!(c.step, StepThreshold::Packets(5), "{p}");
    }
    assert_eq!(
        dualpi2("dualpi2 classic_protection 40").classic_protection,
        40
    );
    // max_rtt / typical_rtt derive the PI parameters as RFC 9332 appendix A.1 (and tc) do:
    // typical 15 ms = target; tupdate = min(typical, max / 3); alpha = 0.1 tupdate / max^2;
    // beta = 0.3 / max.
    let c = dualpi2("dualpi2 max_rtt 100ms typical_rtt 15ms alpha 9 target 1ms");
    assert_eq!(
        (c.target, c.tupdate),
        (Duration::from_millis(15), Duration::from_millis(15))
    );
    assert!(
        (c.alpha - 0.15).abs() < 1e-9 && (c.beta - 3.0).abs() < 1e-9,
        "{c:?}"
    );
    let c = dualpi2("dualpi2 max_rtt 60ms");
    assert_eq!(
        (c.target, c.tupdate),
        (Duration::from_millis(10), Duration::from_millis(10))
    );
    let c = dualpi2("dualpi2 typical_rtt 1ms");
    assert_eq!(
        (c.target, c.tupdate),
        (Duration::from_millis(1), Duration::from_millis(1))
    );
    assert!((c.beta - 50.0).abs() < 1e-9, "max_rtt = 6 * typical: {c:?}");
}

#[test]
fn dualpi2_errors_name_the_option_and_the_range() {
    for (spec, words) in [
        ("dualpi2 nosuch", &["\"nosuch\"", "step_thresh"][..]),
        (
            "dualpi2 coupling_factor 0",
            &["coupling_factor", "1 to 255"],
        ),
        (
            "dualpi2 coupling_factor 300",
            &["coupling_factor", "1 to 255"],
        ),
        (
            "dualpi2 classic_protection 120",
            &["classic_protection", "0 to 100"],
        ),
        ("dualpi2 step_thresh fast", &["step_thresh", "packet count"]),
        ("dualpi2 step_thresh 5q", &["step_thresh", "packet count"]),
        ("dualpi2 alpha 0.001", &["alpha", "1/256"]),
        ("dualpi2 beta -1", &["beta"]),
        ("dualpi2 limit 0", &["limit", "at least 1"]),
        ("dualpi2 tupdate 0", &["tupdate"]),
        (
            "dualpi2 max_rtt 10ms typical_rtt 20ms",
            &["typical_rtt", "max_rtt"],
        ),
        ("dualpi2 max_rtt 1000s", &["max_rtt", "alpha"]),
        ("dualpi2 target", &["target", "needs a value"]),
    ] {
        let e = error(spec);
        for w in words {
            assert!(e.contains(w), "{spec:?}: {e:?} lacks {w:?}");
        }
    }
}

#[test]
fn dualpi2_parses_as_an_htb_child_and_is_found_through_it() {
    let q = AnyQdisc::from_tc("htb rate 40mbit burst 15k dualpi2 target 10ms", 1).expect("parses");
    assert_eq!(q.kind(), "htb");
    let d = q.as_dualpi2().expect("dualpi2 behind htb");
    assert_eq!(d.config().target, qdisc::Duration::from_millis(10));
    assert!(AnyQdisc::from_tc("fq_codel", 1)
        .expect("parses")
        .as_dualpi2()
        .is_none());
}
