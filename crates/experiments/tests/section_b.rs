//! Section B of evaluation.md (the CAKE performance report) as simulator runs: every claim of
//! each experiment must hold. Durations are scaled down where the claims still hold, to keep
//! debug test time low; the full-length runs are what `purple sim report` prints.

use experiments::{find, Report, RunOpts};

fn run(id: &str, time_scale: f64) -> Report {
    let e = find(id).unwrap_or_else(|| panic!("experiment {id} exists"));
    let r = (e.run)(&RunOpts {
        seed: 1,
        time_scale,
    });
    println!("{}\n{}", r.id, r.table.to_text());
    for c in &r.claims {
        println!("[{}] {} | {} | {}", c.pass, c.seed, c.ours, c.tolerance);
    }
    for n in &r.notes {
        println!("note: {n}");
    }
    r
}

fn check(r: &Report) {
    assert!(!r.claims.is_empty(), "{}: no claims were checked", r.id);
    assert!(!r.runs.is_empty(), "{}: no runs recorded", r.id);
    assert!(r.all_pass(), "{}", r.failures());
    // Every run says which Flent test it is, with labels that fit it (its Flent file).
    for run in &r.runs {
        if let Err(e) = run.flent_labels() {
            panic!("{}: {e}", r.id);
        }
    }
}

#[test]
fn b1_cake_bidirectional_latency_is_lowest_and_aqm_only_qdiscs_are_far_above() {
    check(&run("B1", 0.5));
}

#[test]
fn b2_rrul_orders_contenders_like_the_kernel_and_cake_keeps_its_diffserv_shares() {
    check(&run("B2", 0.5));
}

#[test]
fn b3_rrul_50_up_cake_keeps_5ms_and_a_faster_single_download_than_fq_codel() {
    check(&run("B3", 0.5));
}

#[test]
fn b4_household_only_cake_deprioritises_the_cs1_swarm_and_voip_is_protected() {
    check(&run("B4", 0.3));
}

#[test]
fn section_b_is_deterministic_for_a_seed() {
    let a = run("B1", 0.2);
    let b = run("B1", 0.2);
    assert_eq!(a.table, b.table);
    assert_eq!(a.claims, b.claims);
    assert_eq!(a.runs, b.runs);
}

#[test]
fn unavailable_contenders_are_reported_as_notes_without_claims() {
    // SFQ and SFB parse only once the shared parser knows them; either way every contender
    // is accounted for: table rows or a "not available" note, never both.
    let r = run("B1", 0.2);
    for name in [
        "HTB+SFQ",
        "HTB+SFB",
        "HTB+FQ-CoDel",
        "HTB+PIE",
        "HTB+CoDel",
        "CAKE",
        "CAKE-Lite",
    ] {
        let in_table = r.table.rows.iter().any(|row| row[0] == name);
        let noted = r
            .notes
            .iter()
            .any(|n| n.starts_with(&format!("{name} not available")));
        assert!(
            in_table != noted,
            "{name}: in table {in_table}, noted {noted}"
        );
        if noted {
            let short = name.trim_start_matches("HTB+");
            assert!(!r.claims.iter().any(|c| c.seed.contains(short)), "{name}");
        }
    }
}
