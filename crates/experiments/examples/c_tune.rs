//! Runs `purple` with parameter variants on scenarios (development aid): `cargo run --release -p
//! purple-experiments --example c_tune -- radio,step 1.0 [key=value ...]`. Each further argument
//! is one variant: comma-separated `key=value` pairs over the section-C parameters
//! (`target`, `drain`, `holdoff`, `interval` in ms; `gain`, `probe_gain`, `deficit`, `severe`,
//! `jitter_weight`, `beta`, `early`, `noise_limit`, `shortfall`, `past_ceiling`; `fast_window` in ms); `-` is the section-C parameters unchanged.
use controller::PurpleParams;
use experiments::c::closed_loop::{run, Contender, LoopSpec};
use experiments::c::scenario::scenario;
use qdisc::Duration;

fn parse(base: PurpleParams, v: &str) -> PurpleParams {
    let mut p = base;
    for kv in v.split(',').filter(|s| s.contains('=')) {
        let (k, x) = kv.split_once('=').unwrap_or(("", ""));
        let f: f64 = x.parse().unwrap_or(f64::NAN);
        let ms = Duration::from_nanos((f * 1e6) as u64);
        match k {
            "target" => p.target = ms,
            "drain" => p.drain_time = ms,
            "holdoff" => p.decrease_holdoff = ms,
            "interval" => p.interval = ms,
            "gain" => p.gain = f,
            "probe_gain" => p.probe_gain = f,
            "deficit" => p.deficit = f,
            "severe" => p.severe = f,
            "jitter_weight" => p.jitter_weight = f,
            "beta" => p.beta = f,
            "early" => p.early = f,
            "noise_limit" => p.noise_limit = f,
            "fast_window" => p.fast_window = ms,
            "shortfall" => p.shortfall = f,
            "past_ceiling" => p.past_ceiling = f,
            "plateau" => p.plateau = f,
            "plateau_run" => p.plateau_run = f as u32,
            "plateau_cut" => p.plateau_cut = f,
            _ => eprintln!("unknown key {k}"),
        }
    }
    p
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let names = a.get(1).map_or("radio", String::as_str);
    let ts: f64 = a.get(2).and_then(|s| s.parse().ok()).unwrap_or(1.0);
    let mut variants: Vec<String> = a.iter().skip(3).cloned().collect();
    if variants.is_empty() {
        variants.push("-".into());
    }
    // Seed of the scenario and the simulator (env `SEED`, default 1: the documented tables).
    let seed: u64 = std::env::var("SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    for name in names.split(',') {
        let sc = scenario(name, seed).unwrap_or_else(|| std::process::exit(2));
        let mut jobs: Vec<(String, LoopSpec)> = Vec::new();
        let refs: &[Contender] = if std::env::var_os("NOREF").is_some() {
            &[]
        } else {
            &[
                Contender::Oracle,
                Contender::OracleLagged,
                Contender::PurpleAimd,
            ]
        };
        for &c in refs {
            let mut s = LoopSpec::new(sc.clone(), c, seed);
            s.secs = sc.secs * ts;
            jobs.push((c.name(), s));
        }
        for v in &variants {
            let mut s = LoopSpec::new(sc.clone(), Contender::Purple, seed);
            s.secs = sc.secs * ts;
            s.purple = Some(parse(s.purple_params(), v));
            jobs.push((v.clone(), s));
        }
        let out: Vec<_> = std::thread::scope(|scope| {
            let hs: Vec<_> = jobs
                .iter()
                .map(|(n, s)| scope.spawn(move || (n.clone(), run(s))))
                .collect();
            hs.into_iter().filter_map(|h| h.join().ok()).collect()
        });
        for (n, r) in out {
            println!(
                "{name:12} {n:40} mean {:7.2} p99 {:7.2} down {:6.2} up {:6.2} share {:.2}",
                r.latency.mean,
                r.latency.p99,
                r.throughput.down,
                r.throughput.up,
                r.share()
            );
        }
    }
}
