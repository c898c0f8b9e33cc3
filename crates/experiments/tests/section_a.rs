//! Section A of evaluation.md (the Piece of CAKE paper): every experiment's claims hold.

use experiments::{find, Report, RunOpts};

/// Runs experiment `id` at `time_scale` and prints its table and claims.
fn run(id: &str, time_scale: f64) -> Report {
    let e = find(id).unwrap_or_else(|| panic!("experiment {id} is registered"));
    let r = (e.run)(&RunOpts {
        seed: 1,
        time_scale,
    });
    println!("{} {}\n{}", r.id, r.title, r.table.to_text());
    for c in &r.claims {
        println!(
            "[{}] {} | ours: {} | tol: {}",
            if c.pass { "ok" } else { "FAIL" },
            c.seed,
            c.ours,
            c.tolerance
        );
    }
    r
}

fn assert_all_pass(r: &Report) {
    assert!(!r.claims.is_empty(), "{} checks at least one claim", r.id);
    assert!(r.all_pass(), "{}", r.failures());
    // Every run says which Flent test it is, with labels that fit it (its Flent file).
    for run in &r.runs {
        if let Err(e) = run.flent_labels() {
            panic!("{}: {e}", r.id);
        }
    }
}

#[test]
fn a1_set_associative_hash_collides_far_less_than_a_plain_hash() {
    let r = run("A1", 0.3);
    assert_all_pass(&r);
}

#[test]
fn a2_host_isolation_modes_give_the_papers_shares() {
    let r = run("A2", 0.5);
    assert_eq!(r.runs.len(), 5, "one run per contender");
    assert_all_pass(&r);
}

#[test]
fn a3_diffserv3_deprioritises_cs1_and_caps_voice_while_besteffort_is_equal() {
    let r = run("A3", 0.5);
    assert_all_pass(&r);
}

#[test]
fn a4_only_diffserv_cake_keeps_the_ef_flow_latency_flat() {
    let r = run("A4", 1.0);
    assert_all_pass(&r);
}

#[test]
fn a5_ack_filter_raises_goodput_on_asymmetric_links() {
    let r = run("A5", 0.5);
    assert_all_pass(&r);
}

#[test]
fn a6_shaper_is_accurate_to_a_tenth_of_a_percent_without_burst_after_idle() {
    let r = run("A6", 0.3);
    assert_all_pass(&r);
}

#[test]
fn section_a_tables_are_deterministic_for_a_seed() {
    let opts = RunOpts {
        seed: 7,
        time_scale: 0.1,
    };
    for id in ["A2", "A6"] {
        let e = find(id).unwrap_or_else(|| panic!("experiment {id} is registered"));
        let (x, y) = ((e.run)(&opts), (e.run)(&opts));
        assert_eq!(x.table, y.table, "{id}");
        assert_eq!(x.claims, y.claims, "{id}");
    }
}
