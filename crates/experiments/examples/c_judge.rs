//! Development aid for the PURPLE law: runs `purple` (with variants) and the one-interval-late
//! oracle on scenarios x seeds and prints, per scenario, purple's download throughput as a
//! fraction of the late oracle's and its p99 minus the late oracle's (the median and the worst over
//! the seeds of each seed's fraction and difference; the matrix compares seed medians instead).
//!
//! `cargo run --release -p purple-experiments --example c_judge -- radio,step 1..=10 [VARIANT ..]`
//! where a variant is `key=value,...` over any of PURPLE's parameters as the daemon's `[purple]`
//! section names them (durations in ms; `drain` for `drain_time`) or `-` for the defaults, or
//! `contender=i` for `Contender::all`'s i-th contender instead of purple, or `oracle=censored-G`
//! / `oracle=saturated-G` for a reference at a probe gain of G% (`Contender::OracleCensored`,
//! `Contender::OracleSaturated`); `SECS=x` scales
//! the scenario length; `OWD_MS=x` sets the radio hop's one-way delay
//! both ways, `ORACLE_LAG=n` tells the oracle the capacity n intervals late (default 1), `MIN_MBIT=x` sets the controllers' configured minimum rate (both directions), `AT_ROUTER=1` shapes the download at the router after the radio, `FROM_SHAPER=1` measures
//! throughput from CAKE's sent bytes as the daemon does, `PER_SEED=1` prints each seed's
//! figures. Beside the round-trip p99 it prints
//! the one-way p99 per direction minus the late oracle's (`dn99-L`, `up99-L`), and for every
//! variant after the first, paired by seed against the first: on how many seeds its download
//! fraction is higher (`thr>1`) and its p99 lower (`p99<1`), so that a change of the medians
//! that one or two seeds make can be told from one most seeds show. The matrix command (`purple demo --matrix`) is the user-facing version.
use controller::{Direction, PurpleParams};
use experiments::c::closed_loop::{run, Contender, LoopResult, LoopSpec};
use experiments::c::scenario::{scenario, ShaperAt, ThroughputFrom};
use qdisc::Duration;
use std::sync::Mutex;

/// `base` with variant `v` (`key=value,...`, as `[purple]` in the daemon's configuration takes
/// them: durations in ms; `drain` is short for `drain_time`) applied; `contender=i` is read
/// elsewhere. A bad key or value stops the run, naming it.
fn parse(base: PurpleParams, v: &str) -> PurpleParams {
    let mut p = base;
    for kv in v.split(',').filter(|s| s.contains('=')) {
        let (k, x) = kv.split_once('=').unwrap_or(("", ""));
        if k == "contender" || k == "oracle" {
            continue;
        }
        let k = if k == "drain" { "drain_time" } else { k };
        let set = x
            .parse::<f64>()
            .map_err(|e| format!("{k}: {e}"))
            .and_then(|f| p.set(k, f).map_err(|e| e.to_string()));
        if let Err(e) = set {
            eprintln!("c_judge: variant {v:?}: {e}");
            std::process::exit(2);
        }
    }
    p
}

/// The reference variant `v` names (`oracle=censored-G` or `oracle=saturated-G`: that oracle
/// at a probe gain of G% per interval), if any; a malformed one stops the run, naming it.
fn reference(v: &str) -> Option<Contender> {
    let o = v.split(',').find_map(|kv| kv.strip_prefix("oracle="))?;
    let c = o.split_once('-').and_then(|(kind, g)| {
        let g = g.parse::<u16>().ok()?;
        match kind {
            "censored" => Some(Contender::OracleCensored(g)),
            "saturated" => Some(Contender::OracleSaturated(g)),
            _ => None,
        }
    });
    if c.is_none() {
        eprintln!(
            "c_judge: variant {v:?}: oracle: expected censored-G or saturated-G (G: gain, %)"
        );
        std::process::exit(2);
    }
    c
}

/// The upper median of `v`; NaN when empty.
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    qdisc::quantile::rounded_rank(&v, 0.5).unwrap_or(f64::NAN)
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let names: Vec<String> = a
        .get(1)
        .map_or("radio", String::as_str)
        .split(',')
        .map(String::from)
        .collect();
    let (s0, s1) = a
        .get(2)
        .and_then(|s| s.split_once("..="))
        .and_then(|(x, y)| Some((x.parse::<u64>().ok()?, y.parse::<u64>().ok()?)))
        .unwrap_or((1, 3));
    let mut variants: Vec<String> = a.iter().skip(3).cloned().collect();
    if variants.is_empty() {
        variants.push("-".into());
    }
    let scale: f64 = std::env::var("SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1.0);
    // `OWD_MS=x`: the radio hop's one-way delay both ways (a longer round trip than the
    // scenario's own).
    let owd: Option<Duration> = std::env::var("OWD_MS")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .map(|ms| Duration::from_nanos((ms * 1e6) as u64));
    // `MIN_MBIT=x`: the controllers' configured minimum rate, both directions.
    let min_mbit: Option<f64> = std::env::var("MIN_MBIT")
        .ok()
        .and_then(|s| s.parse::<f64>().ok());
    // `AT_ROUTER=1`: the download CAKE at the router after the radio (ingress shaping).
    let at_router = std::env::var("AT_ROUTER").is_ok_and(|v| v == "1");
    // `FROM_SHAPER=1`: throughput from CAKE's sent bytes alone (the daemon before stop 31);
    // `FROM_SHAPER=router`: and the router's received bytes for the download, as the daemon
    // reads them now (`ThroughputFrom::Router`).
    let from_shaper = std::env::var("FROM_SHAPER")
        .ok()
        .and_then(|v| match v.as_str() {
            "1" => Some(ThroughputFrom::Shaper),
            "router" => Some(ThroughputFrom::Router),
            _ => None,
        });
    // `ORACLE_LAG=n`: the late oracle is told the capacity n intervals late (default 1).
    let oracle_lag: u32 = std::env::var("ORACLE_LAG")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    // `PER_SEED=1`: each seed's fraction and p99 difference too.
    let per_seed = std::env::var("PER_SEED").is_ok_and(|v| v == "1");
    // Jobs: (scenario, seed, variant index or None for the late oracle).
    let mut jobs = Vec::new();
    for n in &names {
        for seed in s0..=s1 {
            jobs.push((n.clone(), seed, None));
            for k in 0..variants.len() {
                jobs.push((n.clone(), seed, Some(k)));
            }
        }
    }
    let results: Mutex<Vec<Option<LoopResult>>> = Mutex::new(vec![None; jobs.len()]);
    let next = Mutex::new(0usize);
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    std::thread::scope(|sc| {
        for _ in 0..threads {
            sc.spawn(|| loop {
                let i = {
                    let mut g = next.lock().unwrap_or_else(|e| e.into_inner());
                    let i = *g;
                    *g += 1;
                    i
                };
                let Some((name, seed, var)) = jobs.get(i) else {
                    return;
                };
                // A name ending in `.toml` is a link file (scenarios/links/); the seed then
                // varies only the traffic.
                // A file that does not load stops the run with its error (naming the file and
                // the key), not as an unknown scenario.
                let file = name.ends_with(".toml").then(|| {
                    experiments::c::link::from_file(std::path::Path::new(name), None)
                        .unwrap_or_else(|e| {
                            eprintln!("c_judge: {e}");
                            std::process::exit(2)
                        })
                });
                let Some(mut s) = file.or_else(|| scenario(name, *seed)) else {
                    eprintln!("unknown scenario {name}");
                    return;
                };
                if at_router {
                    s.deployment.shaper = ShaperAt::Router;
                }
                if let Some(t) = from_shaper {
                    s.deployment.throughput = t;
                }
                if let Some(owd) = owd {
                    s.link.down.delay = owd;
                    s.link.up.delay = owd;
                }
                if let Some(m) = min_mbit {
                    s.link.down.rates.lo = m;
                    s.link.up.rates.lo = m;
                }
                // A variant `contender=i` runs `Contender::all`'s i-th contender instead of purple.
                let pick = var.and_then(|k| {
                    variants[k]
                        .split(',')
                        .find_map(|kv| kv.strip_prefix("contender="))
                        .and_then(|i| i.parse::<usize>().ok())
                });
                let oracle = var.and_then(|k| reference(&variants[k]));
                let c = match (var, pick) {
                    _ if oracle.is_some() => oracle.unwrap_or(Contender::Purple),
                    (Some(_), Some(i)) => Contender::all(&s)
                        .get(i)
                        .cloned()
                        .unwrap_or(Contender::Purple),
                    (Some(_), None) => Contender::Purple,
                    (None, _) => Contender::OracleLagged,
                };
                let mut spec = LoopSpec::new(s.clone(), c, *seed);
                spec.secs = s.link.secs * scale;
                spec.oracle_lag = oracle_lag;
                if let Some(k) = var {
                    spec.purple = Some(parse(spec.purple_params(), &variants[*k]));
                }
                let r = run(&spec).expect("probe samples");
                results.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(r);
            });
        }
    });
    let results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    println!(
        "{:12} {:24} {:>6} {:>6} {:>7} {:>7} {:>7} {:>7} {:>6} {:>7} {:>7} {:>7} {:>8} {:>6} {:>6}",
        "scenario",
        "variant",
        "thr/L",
        "worst",
        "p99",
        "p99-L",
        "worstd",
        "mean",
        "up/L",
        "dn99-L",
        "up99-L",
        "Mbit/s",
        "L Mbit/s",
        "thr>1",
        "p99<1"
    );
    for n in &names {
        // The first variant's per-seed fraction and p99 difference, for the paired counts.
        let mut first: Option<(Vec<f64>, Vec<f64>)> = None;
        for (k, v) in variants.iter().enumerate() {
            let (mut fr, mut dp, mut p99, mut mean, mut up) =
                (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
            // One-way p99 per direction minus the late oracle's.
            let (mut odn, mut oup) = (Vec::new(), Vec::new());
            // Download Mbit/s of purple and of the late oracle.
            let (mut mp, mut ml) = (Vec::new(), Vec::new());
            for seed in s0..=s1 {
                let find = |var: Option<usize>| {
                    jobs.iter()
                        .position(|j| &j.0 == n && j.1 == seed && j.2 == var)
                        .and_then(|i| results[i].as_ref())
                };
                let (Some(l), Some(p)) = (find(None), find(Some(k))) else {
                    continue;
                };
                fr.push(p.throughput().down / l.throughput().down);
                up.push(p.throughput().up / l.throughput().up);
                dp.push(p.latency().p99 - l.latency().p99);
                p99.push(p.latency().p99);
                mean.push(p.latency().mean);
                odn.push(
                    p.one_way(Direction::Down).latency.p99 - l.one_way(Direction::Down).latency.p99,
                );
                oup.push(
                    p.one_way(Direction::Up).latency.p99 - l.one_way(Direction::Up).latency.p99,
                );
                mp.push(p.throughput().down);
                ml.push(l.throughput().down);
                if per_seed {
                    println!(
                        "  {n} {v} seed {seed}: thr/L {:.3} p99-L {:.2} ms",
                        p.throughput().down / l.throughput().down,
                        p.latency().p99 - l.latency().p99
                    );
                }
            }
            let worst = fr.iter().copied().fold(f64::INFINITY, f64::min);
            let worst_d = dp.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let paired = |mine: &[f64], theirs: &[f64], better: fn(f64, f64) -> bool| {
                let wins = mine.iter().zip(theirs).filter(|(a, b)| better(**a, **b));
                format!("{}/{}", wins.count(), mine.len().min(theirs.len()))
            };
            let (thr_wins, p99_wins) = match &first {
                Some((f0, d0)) => (paired(&fr, f0, |a, b| a > b), paired(&dp, d0, |a, b| a < b)),
                None => ("-".to_string(), "-".to_string()),
            };
            if first.is_none() {
                first = Some((fr.clone(), dp.clone()));
            }
            println!(
                "{n:12} {v:24} {:6.3} {:6.3} {:7.2} {:7.2} {:7.2} {:7.2} {:6.3} {:7.2} {:7.2} {:7.2} {:8.2} {:>6} {:>6}",
                median(fr),
                worst,
                median(p99),
                median(dp),
                worst_d,
                median(mean),
                median(up),
                median(odn),
                median(oup),
                median(mp),
                median(ml),
                thr_wins,
                p99_wins
            );
        }
    }
}
