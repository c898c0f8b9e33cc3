//! Runs `purple` with parameter variants on one scenario (development aid): `cargo run -p
//! purple-experiments --example c_tune -- radio 0.5`
use controller::PurpleParams;
use experiments::c::closed_loop::{run, Contender, LoopSpec};
use experiments::c::scenario::scenario;
use qdisc::Duration;

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let name = a.get(1).map_or("radio", String::as_str);
    let ts: f64 = a.get(2).and_then(|s| s.parse().ok()).unwrap_or(1.0);
    let sc = scenario(name, 1).unwrap_or_else(|| std::process::exit(2));
    let ms = Duration::from_millis;
    let d = PurpleParams::default();
    let variants = [
        ("default", d),
        ("target 3", PurpleParams { target: ms(3), ..d }),
        (
            "target 20",
            PurpleParams {
                target: ms(20),
                ..d
            },
        ),
        (
            "target 3 probe 0.002",
            PurpleParams {
                target: ms(3),
                probe_gain: 0.002,
                ..d
            },
        ),
        (
            "target 3 gain .02",
            PurpleParams {
                target: ms(3),
                gain: 0.02,
                ..d
            },
        ),
    ];
    for (n, p) in variants {
        let mut s = LoopSpec::new(sc.clone(), Contender::Purple, 1);
        s.secs = sc.secs * ts;
        s.purple = Some(p);
        let r = run(&s);
        println!(
            "{n:24} mean {:6.2} p99 {:6.2} max {:6.2} down {:6.1} share {:.2}",
            r.latency.mean,
            r.latency.p99,
            r.latency.max,
            r.throughput.down,
            r.share()
        );
    }
}
