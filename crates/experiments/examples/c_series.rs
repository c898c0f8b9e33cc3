//! Prints one contender's time series (development aid): `c_series SCENARIO CONTENDER_INDEX SECS
//! [EVERY_NTH_STEP] [FROM_S]` (index 99: the one-interval-late oracle); `DECISIONS=1` also prints
//! every control step's decision from `FROM_S` on, `SEED=n` picks the seed, `OWD_MS=x` sets the
//! radio hop's one-way delay both ways, `LINK=FILE` plays a link file (scenarios/links/),
//! `DOWNLOADS=n`/`UPLOADS=n` set the bulk TCP, `AT_ROUTER=1` shapes the download at the
//! router, `FROM_SHAPER=1|router` reads throughput as a router's daemon does (sent bytes alone,
//! or beside the WAN device's received bytes).
use experiments::c::closed_loop::{run, Contender, LoopSpec};
use experiments::c::scenario::{scenario, ShaperAt, ThroughputFrom};

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let seed: u64 = std::env::var("SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    // `LINK=FILE`: a link file instead of a built-in scenario (the first argument is then
    // ignored).
    let mut sc = match std::env::var("LINK") {
        Ok(path) => experiments::c::link::from_file(std::path::Path::new(&path), None)
            .unwrap_or_else(|e| {
                eprintln!("{e}");
                std::process::exit(2)
            }),
        Err(_) => scenario(a.get(1).map_or("radio", String::as_str), seed)
            .unwrap_or_else(|| std::process::exit(2)),
    };
    // `AT_ROUTER=1`: the download CAKE at the router after the radio (ingress shaping).
    if std::env::var("AT_ROUTER").is_ok_and(|v| v == "1") {
        sc.deployment.shaper = ShaperAt::Router;
    }
    // `FROM_SHAPER=1`: throughput from CAKE's sent bytes alone (the daemon before stop 31);
    // `FROM_SHAPER=router`: and the router's received bytes for the download, as the daemon
    // reads them now.
    match std::env::var("FROM_SHAPER").as_deref() {
        Ok("1") => sc.deployment.throughput = ThroughputFrom::Shaper,
        Ok("router") => sc.deployment.throughput = ThroughputFrom::Router,
        _ => {}
    }
    // `OWD_MS=x`: the radio hop's one-way delay both ways.
    if let Some(ms) = std::env::var("OWD_MS")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
    {
        let owd = qdisc::Duration::from_nanos((ms * 1e6) as u64);
        sc.link.down.delay = owd;
        sc.link.up.delay = owd;
    }
    // `DOWNLOADS=n`, `UPLOADS=n`: the bulk TCP (section C's: 4 and 2).
    for (var, n) in [
        ("DOWNLOADS", &mut sc.workload.downloads),
        ("UPLOADS", &mut sc.workload.uploads),
    ] {
        if let Some(v) = std::env::var(var).ok().and_then(|s| s.parse().ok()) {
            *n = v;
        }
    }
    let i: usize = a.get(2).and_then(|s| s.parse().ok()).unwrap_or(9);
    let secs: f64 = a
        .get(3)
        .and_then(|s| s.parse().ok())
        .unwrap_or(sc.link.secs);
    // Index 99: the one-interval-late oracle (not in the tables).
    let c = if i == 99 {
        Contender::OracleLagged
    } else {
        Contender::all(&sc)[i]
    };
    let mut s = LoopSpec::new(sc, c, seed);
    s.secs = secs;
    // `DECISIONS=1`: also print every control step's decision (as the daemon logs it).
    s.record_decisions = std::env::var("DECISIONS").is_ok_and(|v| v == "1");
    let r = run(&s).expect("probe samples");
    let nth: usize = a.get(4).and_then(|s| s.parse().ok()).unwrap_or(10);
    let from: f64 = a.get(5).and_then(|s| s.parse().ok()).unwrap_or(0.0);
    for p in r.series.iter().filter(|p| p.t >= from).step_by(nth.max(1)) {
        println!(
            "{:5.1} cap {:6.2}/{:6.2} rate {:6.2}/{:6.2} thr {:6.2}/{:6.2} rtt {:7.1}",
            p.t, p.cap.down, p.cap.up, p.rate.down, p.rate.up, p.thr.down, p.thr.up, p.rtt_ms
        );
    }
    let dir = |d: &controller::agent::DirStep| {
        format!(
            "{:7.2} Mbit/s {:?} thr {:.2} backlog {:?} delay {:?}",
            d.rate.mbit(),
            d.reason,
            d.throughput.mbit(),
            d.cake_backlog,
            d.delay_ms
        )
    };
    for (t, down, up) in r.decisions.iter().filter(|d| d.0 >= from) {
        println!("D {t:6.2} down {} | up {}", dir(down), dir(up));
    }
    println!(
        "{} mean {:.2} p99 {:.2} down {:.2} up {:.2}",
        r.name(),
        r.latency().mean,
        r.latency().p99,
        r.throughput().down,
        r.throughput().up
    );
}
