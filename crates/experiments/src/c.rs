//! Experiments of evaluation.md section C: the PURPLE slides' variable-capacity radio with CAKE
//! directly in front of it, and further variable links.
//!
//! Ids (each runs every contender on one scenario, see [`closed_loop::Contender::all`]; the
//! slides' configurations C1..C5 are rows of every table):
//! - `C-radio`: the slides' radio (~110-130 Mbit/s with drops below the average); claims the
//!   slides' orderings and the goal for `purple`.
//! - `C-step`, `C-fade`, `C-fast`, `C-outage`: a step drop, a slow fade, fast fluctuation, two
//!   outages.
//! - `C-att-lte`, `C-verizon-lte`, `C-tmobile-lte`: the recorded cellular traces (both
//!   directions) in `scenarios/traces/`.
//!
//! Contenders: C1 FQ-CoDel unshaped, C2/C3 CAKE static (safe / optimistic), C4 PURPLE with radio
//! metrics, C5 PURPLE-AIMD, cake-autorate, sqm-autorate, CAKE `autorate-ingress`, the oracle
//! (95% of the true capacity of the current 50 ms control interval, set at its start; no
//! further lookahead) and `purple` (ours, delay and throughput only); on the cellular traces
//! also `oracle+`, an oracle that sees the mean capacity of the next 200 ms. `purple demo` adds
//! the oracle told the capacity one interval late ([`closed_loop::Contender::OracleLagged`]).
//!
//! [`matrix`] judges every contender on every scenario over many seeds.

pub mod closed_loop;
pub mod link;
pub mod matrix;
pub mod probe;
pub mod scenario;

use crate::{Claim, Experiment, Report, RunOpts, Table};
use closed_loop::{Contender, LoopResult, LoopSpec};
use scenario::Scenario;

/// The section's experiments.
pub(crate) fn experiments() -> Vec<Experiment> {
    vec![
        Experiment {
            id: "C-radio",
            title: "PURPLE slides: ~120 Mbit/s radio with drops, CAKE in front (C1-C5 + others)",
            run: |o| scenario_report("radio", o),
        },
        Experiment {
            id: "C-step",
            title: "Step drop 120 -> 40 -> 120 Mbit/s",
            run: |o| scenario_report("step", o),
        },
        Experiment {
            id: "C-fade",
            title: "Slow fade 120 -> 30 -> 120 Mbit/s",
            run: |o| scenario_report("fade", o),
        },
        Experiment {
            id: "C-fast",
            title: "Fast fluctuation, new rate every 200 ms",
            run: |o| scenario_report("fast", o),
        },
        Experiment {
            id: "C-outage",
            title: "Two outages of 2 s and 5 s",
            run: |o| scenario_report("outage", o),
        },
        Experiment {
            id: "C-att-lte",
            title: "Cellular trace: AT&T LTE driving",
            run: |o| scenario_report("att-lte", o),
        },
        Experiment {
            id: "C-verizon-lte",
            title: "Cellular trace: Verizon LTE",
            run: |o| scenario_report("verizon-lte", o),
        },
        Experiment {
            id: "C-tmobile-lte",
            title: "Cellular trace: T-Mobile LTE",
            run: |o| scenario_report("tmobile-lte", o),
        },
    ]
}

/// The slides' table (loaded latency ms mean, median, min, max, std; Mbit/s) for C1..C5.
pub const SLIDES: [(&str, [f64; 6]); 5] = [
    ("C1", [11.43, 11.10, 0.99, 34.90, 5.64, 123.0]),
    ("C2", [6.13, 5.73, 1.00, 32.50, 3.37, 94.2]),
    ("C3", [10.80, 10.20, 1.02, 36.70, 5.40, 122.0]),
    ("C4", [5.70, 5.47, 0.95, 21.60, 2.97, 105.0]),
    ("C5", [4.10, 4.00, 0.98, 16.70, 1.88, 90.3]),
];

/// Runs every contender of [`Contender::all`] on `scenario` (time-scaled), in parallel threads,
/// in table order.
pub fn run_all(scenario: &Scenario, opts: &RunOpts) -> Vec<LoopResult> {
    run_contenders(scenario, &Contender::all(scenario), opts)
}

/// [`Contender::all`] and the one-interval-late oracle last: what `purple demo` shows.
pub fn demo_contenders(scenario: &Scenario) -> Vec<Contender> {
    let mut v = Contender::all(scenario);
    v.push(Contender::OracleLagged);
    v
}

/// Runs `contenders` on `scenario` (time-scaled) on every available core; results in the order
/// of `contenders`, each depending only on its own run.
pub fn run_contenders(
    scenario: &Scenario,
    contenders: &[Contender],
    opts: &RunOpts,
) -> Vec<LoopResult> {
    let specs: Vec<LoopSpec> = contenders
        .iter()
        .map(|&c| {
            let mut s = LoopSpec::new(scenario.clone(), c, opts.seed);
            s.secs = scenario.secs * opts.time_scale.clamp(0.05, 10.0);
            s.warmup = (5.0 * opts.time_scale.clamp(0.05, 1.0)).min(s.secs / 4.0);
            s
        })
        .collect();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    matrix::parallel(
        specs.len(),
        threads,
        &|i| closed_loop::run(&specs[i]),
        &|_, _| {},
    )
}

/// The row labels of `contenders` (in [`Contender::all`] order): the slides' C1..C5 (the first
/// static CAKE is C2, the second C3, even where a link's two static rates are equal), `oracle`,
/// `ours`, `oracle+` (the lookahead oracle), `oracle-late` (one interval late), empty for the
/// others.
pub fn labels(contenders: &[Contender]) -> Vec<&'static str> {
    let mut statics = 0;
    contenders
        .iter()
        .map(|c| match c {
            Contender::FqCodel => "C1",
            Contender::CakeStatic(..) => {
                statics += 1;
                match statics {
                    1 => "C2",
                    2 => "C3",
                    _ => "",
                }
            }
            Contender::PurpleRadio => "C4",
            Contender::PurpleAimd => "C5",
            Contender::Oracle => "oracle",
            Contender::Purple => "ours",
            Contender::OracleLookahead => "oracle+",
            Contender::OracleLagged => "oracle-late",
            _ => "",
        })
        .collect()
}

/// The two single-seed targets against the one-interval-late oracle (purple's download
/// throughput at least 0.90 of the late oracle's, p99 at most its + 2 ms), when `contenders`
/// (the order of `results`) has both `purple` and the late oracle; none otherwise.
pub fn late_oracle_claims(results: &[LoopResult], contenders: &[Contender]) -> Vec<Claim> {
    let find = |c: Contender| {
        contenders
            .iter()
            .position(|&x| x == c)
            .and_then(|i| results.get(i))
    };
    match (find(Contender::Purple), find(Contender::OracleLagged)) {
        (Some(p), Some(o)) => vec![
            matrix::throughput_claim("", p.throughput.down, o.throughput.down),
            matrix::p99_claim("", p.latency.p99, o.latency.p99),
        ],
        _ => Vec::new(),
    }
}

/// The comparison table of `results` with their row `labels` (as from [`run_all`] and
/// [`labels`]); slide figures beside C1..C5 when `slides`.
pub fn table(results: &[LoopResult], labels: &[&str], slides: bool) -> Table {
    let mut h = vec![
        "id",
        "contender",
        "mean",
        "median",
        "min",
        "max",
        "std",
        "p95",
        "p99",
        "down Mbit/s",
        "up Mbit/s",
        "share",
    ];
    if slides {
        h.extend(["slides mean/median/max ms", "slides Mbit/s"]);
    }
    let mut t = Table::new(&h);
    for (i, r) in results.iter().enumerate() {
        let l = &r.latency;
        let f2 = |x: f64| format!("{x:.2}");
        let mut row = vec![
            labels.get(i).copied().unwrap_or("").to_string(),
            r.name.clone(),
            f2(l.mean),
            f2(l.median),
            f2(l.min),
            f2(l.max),
            f2(l.std),
            f2(l.p95),
            f2(l.p99),
            format!("{:.1}", r.throughput.down),
            format!("{:.1}", r.throughput.up),
            format!("{:.2}", r.share()),
        ];
        if slides {
            match SLIDES.get(i) {
                Some((_, s)) => {
                    row.push(format!("{:.2} / {:.2} / {:.2}", s[0], s[1], s[3]));
                    row.push(format!("{:.1}", s[5]));
                }
                None => row.extend([String::new(), String::new()]),
            }
        }
        t.row(row);
    }
    t
}

/// Index of each contender in [`Contender::all`] order.
pub mod idx {
    /// C1 FQ-CoDel.
    pub const FQ: usize = 0;
    /// C2 CAKE static (safe).
    pub const SAFE: usize = 1;
    /// C3 CAKE static (optimistic).
    pub const OPT: usize = 2;
    /// C4 PURPLE radio metrics.
    pub const RADIO: usize = 3;
    /// C5 PURPLE-AIMD.
    pub const AIMD: usize = 4;
    /// cake-autorate.
    pub const CAKE_AUTORATE: usize = 5;
    /// sqm-autorate.
    pub const SQM: usize = 6;
    /// autorate-ingress.
    pub const INGRESS: usize = 7;
    /// Oracle.
    pub const ORACLE: usize = 8;
    /// Ours.
    pub const OURS: usize = 9;
    /// The oracle with 200 ms lookahead (trace scenarios only).
    pub const ORACLE_LOOKAHEAD: usize = 10;
}

/// The goal for `purple` as two claims: (1) latency no worse than PURPLE-AIMD's (mean
/// within +0.5 ms) while delivering at least PURPLE-regular's throughput (within 2%); (2) within
/// 10% of the oracle's throughput with p99 within 5 ms of the oracle's.
pub fn goal_claims(r: &[LoopResult]) -> Vec<Claim> {
    let (Some(o), Some(a), Some(q), Some(x)) = (
        r.get(idx::OURS),
        r.get(idx::AIMD),
        r.get(idx::RADIO),
        r.get(idx::ORACLE),
    ) else {
        return Vec::new();
    };
    vec![
        Claim::new(
            "goal: purple's latency no worse than PURPLE-AIMD's and throughput at least \
             PURPLE-regular's",
            format!(
                "purple mean {:.2} ms, {:.1} Mbit/s; AIMD mean {:.2} ms; PURPLE-regular {:.1} \
                 Mbit/s",
                o.latency.mean, o.throughput.down, a.latency.mean, q.throughput.down
            ),
            "mean <= AIMD + 0.5 ms and down >= 0.98 x PURPLE-regular",
            o.latency.mean <= a.latency.mean + 0.5 && o.throughput.down >= 0.98 * q.throughput.down,
        ),
        Claim::new(
            "goal: purple within 10% of the oracle's throughput, p99 within 5 ms of the \
             oracle's",
            format!(
                "purple {:.1} Mbit/s, p99 {:.2} ms; oracle {:.1} Mbit/s, p99 {:.2} ms",
                o.throughput.down, o.latency.p99, x.throughput.down, x.latency.p99
            ),
            "down >= 0.9 x oracle and p99 <= oracle + 5 ms",
            o.throughput.down >= 0.9 * x.throughput.down && o.latency.p99 <= x.latency.p99 + 5.0,
        ),
    ]
}

/// The slides' orderings on the radio scenario.
pub fn slides_claims(r: &[LoopResult]) -> Vec<Claim> {
    let g = |i: usize| r.get(i);
    let (Some(fq), Some(safe), Some(opt), Some(rad), Some(aimd)) = (
        g(idx::FQ),
        g(idx::SAFE),
        g(idx::OPT),
        g(idx::RADIO),
        g(idx::AIMD),
    ) else {
        return Vec::new();
    };
    let slides_min = [fq, safe, opt, rad]
        .iter()
        .map(|x| x.latency.mean)
        .fold(f64::INFINITY, f64::min);
    vec![
        Claim::new(
            "C1 FQ-CoDel without shaping is bloated (the radio's queue fills)",
            format!(
                "FQ-CoDel mean {:.2} ms vs CAKE static safe {:.2} ms",
                fq.latency.mean, safe.latency.mean
            ),
            "FQ-CoDel mean >= 1.5 x C2's",
            fq.latency.mean >= 1.5 * safe.latency.mean,
        ),
        Claim::new(
            "C2 (safe static rate) has lower latency but less throughput than C3 (optimistic)",
            format!(
                "C2 {:.2} ms {:.1} Mbit/s; C3 {:.2} ms {:.1} Mbit/s",
                safe.latency.mean, safe.throughput.down, opt.latency.mean, opt.throughput.down
            ),
            "strictly, on the mean and the download throughput",
            safe.latency.mean < opt.latency.mean && safe.throughput.down < opt.throughput.down,
        ),
        Claim::new(
            "PURPLE-AIMD has the lowest latency of the slides' set (C1-C5)",
            format!(
                "AIMD mean {:.2} ms; lowest of the others {:.2} ms",
                aimd.latency.mean, slides_min
            ),
            "AIMD mean <= every other C1-C4 mean + 0.5 ms",
            aimd.latency.mean <= slides_min + 0.5,
        ),
        Claim::new(
            "regular PURPLE (radio metrics) delivers more throughput than PURPLE-AIMD",
            format!(
                "PURPLE {:.1} Mbit/s vs AIMD {:.1} Mbit/s",
                rad.throughput.down, aimd.throughput.down
            ),
            "strictly more",
            rad.throughput.down > aimd.throughput.down,
        ),
    ]
}

/// Runs `name` and builds its report (table, slides' claims on `radio`, the goal's claims).
pub fn scenario_report(name: &str, opts: &RunOpts) -> Report {
    let Some(sc) = scenario::scenario(name, opts.seed) else {
        return Report {
            id: format!("C-{name}"),
            title: "unknown scenario".into(),
            ..Report::default()
        };
    };
    let results = run_all(&sc, opts);
    let radio = name == "radio";
    let mut claims = if radio {
        slides_claims(&results)
    } else {
        Vec::new()
    };
    claims.extend(goal_claims(&results));
    Report {
        id: format!("C-{name}"),
        title: sc.description.to_string(),
        setup: format!(
            "{}; radio buffer {} packets; CAKE in front of the radio per direction; 4 CUBIC+ECN \
             downloads, 2 uploads; probes to 3 reflectors every 100 ms each (OWD, 1 ms \
             resolution, clock offsets); {:.0} s simulated, measured after warm-up; loaded \
             latency = probe RTT - idle RTT (ms)",
            sc.description,
            sc.radio_buffer,
            sc.secs * opts.time_scale
        ),
        table: table(&results, &labels(&Contender::all(&sc)), radio),
        claims,
        runs: Vec::new(),
        notes: vec![
            "Claims that fail are findings, reported as measured.".into(),
            "CAKE autorate-ingress sits after the radio (it estimates from arrivals); its \
             rate column is its capacity estimate x 15/16."
                .into(),
        ],
    }
}
