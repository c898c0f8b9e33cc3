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
