//! Runs a fixed number of steps of the engine benchmark's loop (`cake::bench`), for instruction
//! counts that do not depend on the clock: under callgrind, the difference between two step
//! counts divided by their difference is the cost of one enqueue + dequeue.
//!
//! `valgrind --tool=callgrind target/release/examples/engine_steps cake 1024 200000`

use cake::bench::{BenchQdisc, EngineBench};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage =
        "usage: engine_steps QDISC FLOWS STEPS (QDISC: cake, pfifo, bfifo, codel, fq_codel, pie)";
    let (Some(q), Some(flows), Some(steps)) = (args.get(1), args.get(2), args.get(3)) else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let Some(kind) = BenchQdisc::ALL.into_iter().find(|k| k.name() == q) else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let (Ok(flows), Ok(steps)) = (flows.parse::<usize>(), steps.parse::<u64>()) else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let mut b = EngineBench::new(kind, flows);
    b.run(steps);
    println!(
        "{} flows {} steps {} dropped {} blocked {}",
        kind.name(),
        b.flows(),
        b.steps(),
        b.dropped(),
        b.blocked()
    );
}
