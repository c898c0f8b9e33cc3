//! Prints the result digest ([`sim::bench::SimBench::fingerprint`]) of every benchmark workload
//! over a short run, to check that a change to the simulator leaves results bit-identical:
//! `cargo run --release -p purple-sim --example fingerprint`, before and after.

use qdisc::Duration;
use sim::bench::{SimBench, SimWorkload};

fn main() {
    for w in SimWorkload::ALL {
        let secs = match w {
            SimWorkload::Tcp10kCake => 2,
            _ => 5,
        };
        let mut b = SimBench::new(w, Duration::from_secs(secs));
        b.run_to_end();
        println!(
            "{:<13} {:016x} packets {} events {}",
            w.name(),
            b.fingerprint(),
            b.link_transmissions(),
            b.events()
        );
    }
}
