//! Prints section C's comparison table for one scenario: `cargo run --release -p
//! purple-experiments --example c_table -- radio [time_scale] [seed] [md]`.
fn main() {
    let a: Vec<String> = std::env::args().collect();
    let name = a.get(1).map_or("radio", String::as_str);
    let ts = a.get(2).and_then(|s| s.parse().ok()).unwrap_or(1.0);
    let seed = a.get(3).and_then(|s| s.parse().ok()).unwrap_or(1);
    let r = experiments::c::scenario_report(
        name,
        &experiments::RunOpts {
            seed,
            time_scale: ts,
        },
    );
    if a.get(4).is_some_and(|m| m == "md") {
        println!("### {}: {}\n\n{}\n", r.id, r.title, r.setup);
        print!("{}", r.table.to_markdown());
        println!();
    } else {
        print!("{}", r.table.to_text());
    }
    for c in &r.claims {
        println!(
            "[{}] {} -- {}",
            if c.pass { "PASS" } else { "FAIL" },
            c.seed,
            c.ours
        );
    }
}
