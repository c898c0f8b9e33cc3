//! `purple demo`: the PURPLE comparison on a variable link (default: the slides' radio; or the
//! user's own link from two mahimahi traces or a link file, `experiments::c::link`).
//!
//! Runs every contender of section C (`experiments::c`) and the one-interval-late oracle in
//! closed loop, prints the slides' table (loaded latency mean, median, min, max, std, plus p95
//! and p99; throughput per direction and the share of capacity), the goal checks and the issue's
//! targets against the late oracle, and writes into `--out` (default `purple-demo/`): per
//! contender a time-series chart of capacity vs shaped rate vs throughput, one chart of every
//! controller's shaped rate against the capacity, the latency CDF of every contender (PNG and
//! SVG each), `results.json` and `index.html`, a report linking them all.

use crate::plots::{cdf_points, file_stem, write_lines, Line};
use experiments::c::closed_loop::LoopResult;
use experiments::c::{
    demo_contenders, goal_claims, labels, late_oracle_claims, link, run_contenders, scenario,
    slides_claims, table,
};
use experiments::{Claim, RunOpts};
use lab::analysis::{self, DemoRow, LOADED_LATENCY_PROBE};
use serde_json::{json, Value};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The link `purple demo` runs on.
#[derive(Clone, Debug, PartialEq)]
pub enum LinkChoice {
    /// A built-in scenario (`experiments::c::scenario::NAMES` or `PASSIVE_NAMES`).
    Scenario(String),
    /// The user's mahimahi traces (`--down-trace`, `--up-trace`).
    Traces {
        /// Download trace.
        down: PathBuf,
        /// Upload trace.
        up: PathBuf,
        /// The radio's buffer, packets (`--buffer-packets`).
        buffer_packets: Option<u32>,
    },
    /// A link file (`--link FILE.toml`).
    File(PathBuf),
}

/// What `purple demo` runs.
#[derive(Clone, Debug, PartialEq)]
pub struct DemoOpts {
    /// The link.
    pub link: LinkChoice,
    /// Seed of the capacity process and the simulator.
    pub seed: u64,
    /// Simulated seconds (`None`: the scenario's length).
    pub seconds: Option<f64>,
    /// Print JSON instead of text.
    pub json: bool,
    /// Where plots, `results.json` and `index.html` go (`None`: write nothing).
    pub out: Option<PathBuf>,
    /// The link deployed as a home router (`--home-router`,
    /// `Scenario::as_home_router`).
    pub home_router: bool,
    /// The link's idle round trip, ms (`--base-rtt-ms`, `Scenario::with_radio_delay`;
    /// `None`: the link's own).
    pub base_rtt_ms: Option<f64>,
}

/// The demo's results: every contender's measurements and the claims checked on them.
#[derive(Debug)]
pub struct Demo {
    /// Scenario name.
    pub scenario: String,
    /// Its description.
    pub description: String,
    /// Simulated seconds.
    pub seconds: f64,
    /// Seed.
    pub seed: u64,
    /// One result per contender, in table order.
    pub results: Vec<LoopResult>,
    /// Each result's row label (`C1`..`C5`, `oracle`, `ours`, `oracle-late`, ...).
    pub labels: Vec<&'static str>,
    /// Whether the slides' figures go beside C1..C5 (the built-in radio only).
    pub slides: bool,
    /// The slides' orderings (radio only) and the goal.
    pub claims: Vec<Claim>,
}

/// The scenario of `link` for `seed` (`seconds` sets a user's link's length).
pub fn link_scenario(
    link: &LinkChoice,
    seed: u64,
    seconds: Option<f64>,
) -> Result<scenario::Scenario, String> {
    match link {
        LinkChoice::Scenario(name) => scenario::scenario(name, seed).ok_or_else(|| {
            format!(
                "unknown scenario {name:?} (known: {}, {})",
                scenario::NAMES.join(", "),
                scenario::PASSIVE_NAMES.join(", ")
            )
        }),
        LinkChoice::Traces {
            down,
            up,
            buffer_packets,
        } => link::from_traces(down, up, *buffer_packets, seconds).map_err(|e| e.to_string()),
        LinkChoice::File(p) => link::from_file(p, seconds).map_err(|e| e.to_string()),
    }
}

/// Runs the comparison.
pub fn compute(o: &DemoOpts) -> Result<Demo, String> {
    let mut sc = link_scenario(&o.link, o.seed, o.seconds)?;
    if o.home_router {
        sc = sc.as_home_router();
    }
    if let Some(rtt) = o.base_rtt_ms {
        sc = sc.with_radio_delay(link::radio_delay_for_rtt(rtt).map_err(|e| e.to_string())?);
    }
    let secs = o.seconds.unwrap_or(sc.secs);
    if !(1.0..=3600.0).contains(&secs) {
        return Err(format!("--seconds {secs}: accepted 1 ..= 3600"));
    }
    let opts = RunOpts {
        seed: o.seed,
        time_scale: secs / sc.secs,
    };
    let contenders = demo_contenders(&sc);
    let results = run_contenders(&sc, &contenders, &opts).map_err(|e| e.to_string())?;
    let slides = matches!(&o.link, LinkChoice::Scenario(n) if n == "radio");
    let mut claims = if slides {
        slides_claims(&results)
    } else {
        Vec::new()
    };
    claims.extend(goal_claims(&results));
    claims.extend(late_oracle_claims(&results, &contenders));
    Ok(Demo {
        labels: labels(&contenders),
        slides,
        scenario: sc.name,
        description: sc.description,
        seconds: secs,
        seed: o.seed,
        results,
        claims,
    })
}

/// The demo as JSON: `{"scenario","description","seconds","seed","contenders":[{"id","name",
/// "latency_ms":{n,mean,median,min,max,std,p95,p99},"throughput_mbit":{down,up},
/// "capacity_mbit":{down,up},"share"}],"claims":[{seed,ours,tolerance,pass}]}`.
pub fn to_json(d: &Demo) -> Value {
    let contenders: Vec<Value> = d
        .results
        .iter()
        .enumerate()
        .map(|(i, r)| {
            json!({
                "id": d.labels.get(i).copied().unwrap_or(""),
                "name": r.name,
                "latency_ms": r.latency,
                "throughput_mbit": r.throughput,
                "capacity_mbit": r.capacity,
                "share": r.share(),
            })
        })
        .collect();
    json!({
        "scenario": d.scenario,
        "description": d.description,
        "seconds": d.seconds,
        "seed": d.seed,
        "contenders": contenders,
        "claims": d.claims,
    })
}

/// The demo as text: the table and the claims.
pub fn to_text(d: &Demo) -> String {
    let mut s = format!(
        "purple demo: {} ({}), {:.0} s simulated, seed {}\n\
         Loaded latency = probe RTT minus the idle RTT, ms; throughput = delivered by the \
         radio, Mbit/s; share = download / mean capacity.\n\n",
        d.scenario, d.description, d.seconds, d.seed
    );
    s.push_str(&table(&d.results, &d.labels, d.slides).to_text());
    s.push('\n');
    for c in &d.claims {
        let _ = writeln!(
            s,
            "[{}] {}\n       ours: {} (tolerance: {})",
            if c.pass { "PASS" } else { "FAIL" },
            c.seed,
            c.ours,
            c.tolerance
        );
    }
    s
}

fn write_plots(d: &Demo, dir: &Path) -> Result<Vec<PathBuf>, String> {
    let mut files = Vec::new();
    // Capacity vs shaped rate vs throughput, per contender (download).
    for (i, r) in d.results.iter().enumerate() {
        let pick = |f: &dyn Fn(&experiments::c::closed_loop::Point) -> f64| {
            r.series.iter().map(|p| (p.t, f(p))).collect::<Vec<_>>()
        };
        let lines = vec![
            Line {
                name: "capacity".into(),
                points: pick(&|p| p.cap.down),
                thin: false,
            },
            Line {
                name: "shaped rate".into(),
                points: pick(&|p| p.rate.down),
                thin: false,
            },
            Line {
                name: "throughput".into(),
                points: pick(&|p| p.thr.down),
                thin: true,
            },
        ];
        let stem = format!("{:02}-{}-rates", i + 1, file_stem(&r.name));
        files.extend(write_lines(
            dir,
            &stem,
            &format!("{}: {} download", d.scenario, r.name),
            ("time (s)", "Mbit/s"),
            &lines,
            None,
        )?);
    }
    // Every controller's shaped rate against the capacity.
    let mut lines = Vec::new();
    if let Some(r) = d.results.first() {
        lines.push(Line {
            name: "capacity".into(),
            points: r.series.iter().map(|p| (p.t, p.cap.down)).collect(),
            thin: false,
        });
    }
    for r in &d.results {
        if r.series.iter().any(|p| p.rate.down.is_finite()) && !r.name.starts_with("CAKE static") {
            lines.push(Line {
                name: r.name.clone(),
                points: r.series.iter().map(|p| (p.t, p.rate.down)).collect(),
                thin: true,
            });
        }
    }
    files.extend(write_lines(
        dir,
        "shaped-rates",
        &format!("{}: capacity and shaped rates (download)", d.scenario),
        ("time (s)", "Mbit/s"),
        &lines,
        None,
    )?);
    // Latency CDF.
    let lines: Vec<Line> = d
        .results
        .iter()
        .map(|r| Line {
            name: r.name.clone(),
            points: cdf_points(&r.samples),
            thin: false,
        })
        .collect();
    files.extend(write_lines(
        dir,
        "latency-cdf",
        &format!("{}: loaded latency CDF", d.scenario),
        ("loaded latency (ms)", "fraction of probes"),
        &lines,
        Some((0.0, 1.0)),
    )?);
    Ok(files)
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn html(d: &Demo, pngs: &[String]) -> String {
    let t = table(&d.results, &d.labels, d.slides);
    let mut s = format!(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>purple demo: {sc}</title>\
         <style>body{{font-family:sans-serif;max-width:1100px;margin:auto}}\
         table{{border-collapse:collapse}}td,th{{border:1px solid #999;padding:3px 6px;\
         text-align:right}}.pass{{color:#070}}.fail{{color:#b00}}</style></head><body>\n\
         <h1>purple demo: {sc}</h1>\n<p>{desc}; {secs:.0} s simulated, seed {seed}. Loaded \
         latency = probe RTT minus the idle RTT (ms); throughput delivered by the radio \
         (Mbit/s); share = download / mean capacity.</p>\n<table><tr>",
        sc = esc(&d.scenario),
        desc = esc(&d.description),
        secs = d.seconds,
        seed = d.seed
    );
    for h in &t.headers {
        let _ = write!(s, "<th>{}</th>", esc(h));
    }
    s.push_str("</tr>\n");
    for r in &t.rows {
        s.push_str("<tr>");
        for c in r {
            let _ = write!(s, "<td>{}</td>", esc(c));
        }
        s.push_str("</tr>\n");
    }
    s.push_str("</table>\n<h2>Claims</h2>\n<ul>\n");
    for c in &d.claims {
        let _ = writeln!(
            s,
            "<li class=\"{}\"><b>{}</b> {}<br>ours: {} (tolerance: {})</li>",
            if c.pass { "pass" } else { "fail" },
            if c.pass { "PASS" } else { "FAIL" },
            esc(&c.seed),
            esc(&c.ours),
            esc(&c.tolerance)
        );
    }
    s.push_str("</ul>\n<h2>Plots</h2>\n");
    for p in pngs {
        let _ = writeln!(
            s,
            "<p><img src=\"{0}\" alt=\"{0}\" width=\"1000\"></p>",
            esc(p)
        );
    }
    s.push_str("</body></html>\n");
    s
}

/// Writes plots, `results.json` and `index.html` into `dir`; returns the files written.
pub fn write_out(d: &Demo, dir: &Path) -> Result<Vec<PathBuf>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut files = write_plots(d, dir)?;
    let pngs: Vec<String> = files
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "png"))
        .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect();
    let j = dir.join("results.json");
    let text = serde_json::to_string_pretty(&to_json(d)).map_err(|e| e.to_string())?;
    std::fs::write(&j, text).map_err(|e| format!("{}: {e}", j.display()))?;
    files.push(j);
    let h = dir.join("index.html");
    std::fs::write(&h, html(d, &pngs)).map_err(|e| format!("{}: {e}", h.display()))?;
    files.push(h);
    Ok(files)
}

/// Runs the demo and returns what to print.
pub fn run(o: &DemoOpts) -> Result<String, String> {
    let d = compute(o)?;
    let written = match &o.out {
        Some(dir) => Some((dir.clone(), write_out(&d, dir)?)),
        None => None,
    };
    if o.json {
        let mut v = to_json(&d);
        if let (Some((dir, files)), Some(m)) = (&written, v.as_object_mut()) {
            m.insert("out".into(), json!(dir.display().to_string()));
            m.insert(
                "files".into(),
                json!(files
                    .iter()
                    .map(|f| f.display().to_string())
                    .collect::<Vec<_>>()),
            );
        }
        return Ok(format!("{v}\n"));
    }
    let mut s = to_text(&d);
    if let Some((dir, files)) = written {
        let _ = writeln!(
            s,
            "\nwrote {} files into {} (open {})",
            files.len(),
            dir.display(),
            dir.join("index.html").display()
        );
    }
    Ok(s)
}

// ---------------------------------------------------------------------------------------------
// `purple demo --lab`: the same comparison in the namespace lab with real kernel TCP.
// ---------------------------------------------------------------------------------------------

/// What `purple demo --lab` runs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LabDemoOpts {
    /// Seconds of load per contender (`None`: 30).
    pub seconds: Option<f64>,
    /// Print JSON instead of text.
    pub json: bool,
    /// Where per-run outputs, the daemon logs, plots and `results.json` go (`None`: nothing
    /// written except the daemon logs, which go to the temporary directory).
    pub out: Option<PathBuf>,
    /// Then run `purple control` on Linux's sch_cake in the reference kernel (QEMU) against
    /// static kernel CAKE, and print that table after the lab's (`--kernel`).
    pub kernel: bool,
    /// The lab scenario (`radio` when empty): one with a link emulator.
    pub scenario: String,
    /// Faults injected into the testbed.
    pub faults: Vec<lab::Fault>,
}

/// The lab demo's results.
#[derive(Debug)]
pub struct LabDemo {
    /// The lab scenario (radio).
    pub scenario: lab::scenario::Scenario,
    /// Seconds of load per contender.
    pub seconds: f64,
    /// Seconds of idle probing before the load.
    pub idle_s: f64,
    /// The rows, in the scenario's contender order.
    pub rows: Vec<DemoRow>,
    /// Faults injected.
    pub faults: Vec<lab::Fault>,
}

/// Runs every radio contender in the lab (root needed).
pub fn compute_lab(
    o: &LabDemoOpts,
    progress: &mut dyn FnMut(&str, f64),
) -> Result<LabDemo, String> {
    if !os::is_root() {
        return Err(
            "purple demo --lab needs root (it builds network namespaces): run it as root, \
                    e.g. `sudo purple demo --lab`"
                .into(),
        );
    }
    let name = if o.scenario.is_empty() {
        "radio"
    } else {
        o.scenario.as_str()
    };
    let scn = lab::scenario::find(name)
        .filter(|s| s.needs_linkem)
        .ok_or_else(|| {
            let names: Vec<&str> = lab::scenario::all()
                .iter()
                .filter(|s| s.needs_linkem)
                .map(|s| s.name)
                .collect();
            format!(
                "purple demo --lab: no lab scenario {name:?} with a variable link (accepted: {})",
                names.join(", ")
            )
        })?;
    let seconds = o.seconds.unwrap_or(30.0);
    if !(5.0..=3600.0).contains(&seconds) {
        return Err(format!("--seconds {seconds}: accepted 5 ..= 3600"));
    }
    let exe = std::env::current_exe().ok();
    let stage = match lab::DelayStage::detect(exe.as_deref()) {
        lab::DelayStage::Passthrough => lab::DelayStage::detect(
            std::env::var_os("PURPLE_LINKEM_BIN")
                .map(PathBuf::from)
                .as_deref(),
        ),
        s => s,
    };
    let lab::DelayStage::Linkem(bin) = &stage else {
        return Err(
            "purple demo --lab needs `purple linkem` (this binary lacks it; set \
                    PURPLE_LINKEM_BIN to a purple binary that has it)"
                .into(),
        );
    };
    let mut opts = lab::LabOpts::new(seconds, stage.clone());
    opts.purple_bin = Some(bin.clone());
    opts.faults = o.faults.clone();
    os::netns::install_signal_cleanup().map_err(|e| format!("signal handler: {e}"))?;
    let test = scn
        .tests
        .first()
        .cloned()
        .ok_or_else(|| format!("the lab's {} has no test", scn.name))?;
    let warm = analysis::warm_up_s(seconds);
    let mut rows = Vec::new();
    for c in &scn.contenders {
        let run_dir = o.out.as_ref().map(|d| {
            d.join(crate::plots::file_stem(&format!(
                "{} {} {}",
                scn.name, test.name, c.name
            )))
        });
        opts.control_dir = run_dir.clone();
        let r = lab::run_one(&scn, c, &test, &opts, &mut |f| progress(c.name, f))
            .map_err(|e| format!("{} {}: {e}", scn.name, c.name))?;
        if let Some(d) = &run_dir {
            crate::sim_cmd::write_outputs(&r.summary, &crate::lab::run_json(&r), d)?;
        }
        rows.push(
            analysis::demo_row(r, opts.idle_seconds, warm)
                .map_err(|e| format!("{} {}: {e}", scn.name, c.name))?,
        );
    }
    Ok(LabDemo {
        scenario: scn,
        seconds,
        idle_s: opts.idle_seconds,
        rows,
        faults: o.faults.clone(),
    })
}

fn nan_null(x: f64) -> Value {
    if x.is_finite() {
        json!(x)
    } else {
        Value::Null
    }
}

/// The lab demo as JSON: `{"scenario","title","seconds","contenders":[{"name","latency_ms":
/// {n,mean,median,min,max,std,p95,p99},"throughput_mbit":{down,up},"capacity_mbit":{down},
/// "share","tracking","daemon_log","warnings","series":{"t","capacity","shaped_rate",
/// "throughput","latency_ms"}}]}` (series per 100 ms bin, Mbit/s; `null` where none).
pub fn lab_json(d: &LabDemo) -> Value {
    let rows: Vec<Value> = d
        .rows
        .iter()
        .map(|r| {
            let t = analysis::bin_ends_s(&r.run);
            let rate: Vec<Value> = t
                .iter()
                .map(|&x| json!(shaped_rate(d, r, x - r.run.summary.bin_s / 2.0)))
                .collect();
            let thr: Vec<Value> = r
                .run
                .summary
                .links
                .get(1)
                .map(|l| l.tx_bps.iter().map(|b| nan_null(b / 1e6)).collect())
                .unwrap_or_default();
            let lat: Vec<Value> = r
                .run
                .probe_flow(LOADED_LATENCY_PROBE)
                .map(|f| f.series.latency_ms.iter().map(|v| json!(v)).collect())
                .unwrap_or_default();
            json!({
                "name": r.run.contender,
                "latency_ms": r.latency,
                "throughput_mbit": {"down": r.run.down_mbit, "up": r.run.up_mbit},
                "capacity_mbit": {"down": r.capacity_down_mbit},
                "share": r.share(),
                "tracking": r.tracking,
                "daemon_log": r.run.control.as_ref().map(|c| c.log.display().to_string()),
                "warnings": r.run.warnings,
                "series": {"t": t, "capacity": r.run.capacity_down_mbit, "shaped_rate": rate,
                    "throughput": thr, "latency_ms": lat},
            })
        })
        .collect();
    json!({
        "scenario": d.scenario.name,
        "title": d.scenario.title,
        "seconds": d.seconds,
        "idle_seconds": d.idle_s,
        "faults": d.faults.iter().filter_map(|f| lab::Fault::ALL.iter().find(|(_, x)| x == f).map(|(n, _)| *n)).collect::<Vec<_>>(),
        "probe": LOADED_LATENCY_PROBE.label(),
        "contenders": rows,
    })
}

/// The download rate `r`'s contender shapes to at `t` (s since the run's epoch), Mbit/s
/// ([`analysis::shaped_down_rate_mbit`]).
fn shaped_rate(d: &LabDemo, r: &DemoRow, t: f64) -> Option<f64> {
    analysis::shaped_down_rate_mbit(&d.scenario, &r.run, t)
}

/// The lab demo as text: the slides' table and the shaped-rate tracking.
pub fn lab_text(d: &LabDemo) -> String {
    let mut s = format!(
        "purple demo --lab: {}\n{:.0} s of load per contender after {:.0} s idle; real kernel TCP \
         (CUBIC, ECN) through our bridge and `purple linkem` in network namespaces.\n\
         Loaded latency = UDP probe RTT (every 100 ms) minus its idle median, ms, after the first \
         {:.1} s of load; throughput = TCP goodput, Mbit/s; share = download / mean capacity.\n\n",
        d.scenario.title,
        d.seconds,
        d.idle_s,
        analysis::warm_up_s(d.seconds)
    );
    for f in &d.faults {
        if let Some((name, _)) = lab::Fault::ALL.iter().find(|(_, x)| x == f) {
            s.push_str(&format!("Fault injected: {name}.\n\n"));
        }
    }
    let mut h = vec!["contender"];
    h.extend(experiments::LATENCY_COLUMNS);
    h.extend(["down Mbit/s", "up Mbit/s", "share", "seed (slides)"]);
    let mut t = experiments::Table::new(&h);
    for r in &d.rows {
        let mut row = vec![r.run.contender.clone()];
        match &r.latency {
            Some(l) => row.extend(experiments::latency_cells(l)),
            None => {
                row.push("no samples".into());
                let rest = experiments::LATENCY_COLUMNS.len() - 1;
                row.extend(std::iter::repeat_n("-".to_string(), rest));
            }
        }
        row.extend([
            format!("{:.1}", r.run.down_mbit),
            format!("{:.1}", r.run.up_mbit),
            r.capacity_down_mbit.map_or("-".into(), |c| {
                format!("{:.0}%", 100.0 * r.run.down_mbit / c)
            }),
            lab::scenario::seed_figure(d.scenario.name, &r.run.contender, "").to_string(),
        ]);
        t.row(row);
    }
    s.push_str(&t.to_text());
    let mut tt = experiments::Table::new(&[
        "daemon contender",
        "mean rate",
        "rate <= capacity",
        "drops followed",
        "reaction median s",
        "reaction max s",
        "actuator errors",
    ]);
    let mut any = false;
    for r in &d.rows {
        if let (Some(k), Some(c)) = (&r.tracking, &r.run.control) {
            any = true;
            tt.row(vec![
                r.run.contender.clone(),
                format!("{:.1}", k.mean_rate_mbit),
                format!("{:.0}%", 100.0 * k.below_capacity),
                format!("{}/{}", k.drops_followed, k.drops),
                secs_or_dash(k.reaction_median_s),
                secs_or_dash(k.reaction_max_s),
                c.actuator_errors.to_string(),
            ]);
        }
    }
    if any {
        let _ = write!(
            s,
            "\nShaped-rate tracking (download; capacity steps {}):\n{}",
            match d.scenario.capacity {
                lab::scenario::Capacity::Steps {
                    down_bit_s,
                    period_s,
                    ..
                } => format!(
                    "{}/{} Mbit/s every {period_s} s",
                    down_bit_s[0] / 1_000_000,
                    down_bit_s[1] / 1_000_000
                ),
                lab::scenario::Capacity::Fixed { down_bit_s, .. } => {
                    format!("fixed {} Mbit/s", down_bit_s / 1_000_000)
                }
                lab::scenario::Capacity::Trace { name, .. } => format!("trace {name}"),
            },
            tt.to_text()
        );
    }
    for r in &d.rows {
        for w in &r.run.warnings {
            let _ = writeln!(s, "warning: {}: {w}", r.run.contender);
        }
        if let Some(c) = &r.run.control {
            let _ = writeln!(s, "{}: decision log {}", r.run.contender, c.log.display());
        }
    }
    s
}

fn write_lab_plots(d: &LabDemo, dir: &Path) -> Result<Vec<PathBuf>, String> {
    let mut files = Vec::new();
    let mut all_rates = Vec::new();
    for (i, r) in d.rows.iter().enumerate() {
        let t = analysis::bin_ends_s(&r.run);
        let half = r.run.summary.bin_s / 2.0;
        let cap: Vec<(f64, f64)> = t
            .iter()
            .zip(&r.run.capacity_down_mbit)
            .map(|(&x, &c)| (x - half, c))
            .collect();
        let rate: Vec<(f64, f64)> = t
            .iter()
            .map(|&x| (x - half, shaped_rate(d, r, x - half).unwrap_or(f64::NAN)))
            .collect();
        let thr: Vec<(f64, f64)> = r
            .run
            .summary
            .links
            .get(1)
            .map(|l| {
                t.iter()
                    .zip(&l.tx_bps)
                    .map(|(&x, b)| (x - half, b / 1e6))
                    .collect()
            })
            .unwrap_or_default();
        if i == 0 {
            all_rates.push(Line {
                name: "capacity".into(),
                points: cap.clone(),
                thin: false,
            });
        }
        if r.run.control.is_some() {
            all_rates.push(Line {
                name: r.run.contender.clone(),
                points: rate.clone(),
                thin: true,
            });
        }
        let lines = vec![
            Line {
                name: "capacity".into(),
                points: cap,
                thin: false,
            },
            Line {
                name: "shaped rate".into(),
                points: rate,
                thin: false,
            },
            Line {
                name: "throughput".into(),
                points: thr,
                thin: true,
            },
        ];
        let stem = format!("{:02}-{}-rates", i + 1, file_stem(&r.run.contender));
        files.extend(write_lines(
            dir,
            &stem,
            &format!("lab {}: {} download", d.scenario.name, r.run.contender),
            ("time (s)", "Mbit/s"),
            &lines,
            None,
        )?);
    }
    files.extend(write_lines(
        dir,
        "shaped-rates",
        &format!(
            "lab {}: capacity and the daemons' shaped rates (download)",
            d.scenario.name
        ),
        ("time (s)", "Mbit/s"),
        &all_rates,
        None,
    )?);
    let lines: Vec<Line> = d
        .rows
        .iter()
        .map(|r| Line {
            name: r.run.contender.clone(),
            points: cdf_points(&r.samples),
            thin: false,
        })
        .collect();
    files.extend(write_lines(
        dir,
        "latency-cdf",
        &format!("lab {}: loaded latency CDF (UDP probe)", d.scenario.name),
        ("loaded latency (ms)", "fraction of probes"),
        &lines,
        Some((0.0, 1.0)),
    )?);
    Ok(files)
}

/// Runs `purple demo --lab` and returns what to print.
pub fn run_lab(o: &LabDemoOpts) -> Result<String, String> {
    use std::io::IsTerminal;
    let show = !o.json && std::io::stderr().is_terminal();
    let mut last = String::new();
    let d = compute_lab(o, &mut |name, f| {
        if show {
            let line = format!("{name}: {:3.0}%", f * 100.0);
            if line != last {
                eprint!("\r{line}   ");
                last = line;
            }
        }
    })?;
    if show {
        eprintln!();
    }
    let mut files = Vec::new();
    if let Some(dir) = &o.out {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        files = write_lab_plots(&d, dir)?;
        let j = dir.join("results.json");
        let text = serde_json::to_string_pretty(&lab_json(&d)).map_err(|e| e.to_string())?;
        std::fs::write(&j, text).map_err(|e| format!("{}: {e}", j.display()))?;
        files.push(j);
    }
    if o.json {
        let mut v = lab_json(&d);
        if let (Some(dir), Some(m)) = (&o.out, v.as_object_mut()) {
            m.insert("out".into(), json!(dir.display().to_string()));
        }
        return Ok(format!("{v}\n"));
    }
    let mut s = lab_text(&d);
    if o.kernel {
        let ko = crate::lab::LabCmdOpts {
            out: o.out.clone(),
            quiet: !show,
            ..Default::default()
        };
        s += "\n";
        s += &crate::lab::kernel_control(
            &["purple".into(), "cake-autorate".into(), "static".into()],
            &ko,
        )?;
    }
    if let Some(dir) = &o.out {
        let _ = writeln!(
            s,
            "\nwrote {} files into {} (per-run outputs and daemon logs in its subdirectories)",
            files.len(),
            dir.display()
        );
    }
    Ok(s)
}

/// A reaction time with one decimal, or "-" when there was none (no drop followed).
fn secs_or_dash(s: Option<f64>) -> String {
    s.map_or_else(|| "-".to_string(), |s| format!("{s:.1}"))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use sim::tally::LatencyStats;

    /// A lab demo of two contenders, the second without a loaded-latency sample.
    fn two_rows() -> LabDemo {
        let row = |contender: &str, samples: &[f64]| DemoRow {
            run: lab::LabRun {
                contender: contender.into(),
                test: "radio".into(),
                summary: sim::RunSummary::default(),
                induced: Vec::new(),
                up_mbit: 31.25,
                down_mbit: 96.5,
                delay_stage: String::new(),
                warnings: Vec::new(),
                namespaces: Vec::new(),
                capacity_down_mbit: Vec::new(),
                control: None,
            },
            latency: LatencyStats::of(samples),
            samples: samples.to_vec(),
            capacity_down_mbit: Some(120.0),
            tracking: None,
        };
        LabDemo {
            scenario: lab::scenario::find("radio").unwrap(),
            seconds: 30.0,
            idle_s: 5.0,
            rows: vec![
                row("CAKE static", &[1.0, 2.5, 4.0, 8.25]),
                row("silent", &[]),
            ],
            faults: Vec::new(),
        }
    }

    /// The latency columns come from `experiments::LATENCY_COLUMNS`; a contender without a
    /// sample says so in the first and fills the rest with "-", keeping every column aligned.
    #[test]
    fn the_lab_table_keeps_its_columns_for_a_contender_without_samples() {
        let text = lab_text(&two_rows());
        let lines: Vec<&str> = text.lines().collect();
        let header = lines
            .iter()
            .position(|l| l.starts_with("contender"))
            .unwrap();
        let cells = |l: &str| {
            l.split("  ")
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .map(str::to_string)
                .collect::<Vec<_>>()
        };
        let h = cells(lines[header]);
        assert_eq!(h[1..8], experiments::LATENCY_COLUMNS);
        assert_eq!(
            cells(lines[header + 1]),
            [
                "CAKE static",
                "3.94",
                "4.00",
                "1.00",
                "8.25",
                "2.71",
                "8.25",
                "8.25",
                "96.5",
                "31.2",
                "80%",
                "-"
            ]
        );
        let silent = cells(lines[header + 2]);
        assert_eq!(silent.len(), h.len(), "{silent:?}");
        assert_eq!(silent[1..8], ["no samples", "-", "-", "-", "-", "-", "-"]);
    }
}
