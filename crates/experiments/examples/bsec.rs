fn main() {
    let id = std::env::args().nth(1).unwrap_or("B1".into());
    let ts: f64 = std::env::args().nth(2).and_then(|s| s.parse().ok()).unwrap_or(1.0);
    let e = experiments::find(&id).unwrap();
    let t = std::time::Instant::now();
    let r = (e.run)(&experiments::RunOpts { seed: 1, time_scale: ts });
    println!("{}", r.table.to_text());
    for c in &r.claims { println!("[{}] {} | {} | {}", if c.pass {"ok"} else {"FAIL"}, c.seed, c.ours, c.tolerance); }
    for n in &r.notes { println!("note: {n}"); }
    println!("cpu {:?}", t.elapsed());
}
