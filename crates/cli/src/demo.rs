//! `purple demo`: the PURPLE comparison on a variable link (default: the slides' radio).
//!
//! Runs every contender of section C (`experiments::c`) in closed loop, prints the slides' table
//! (loaded latency mean, median, min, max, std, plus p95 and p99; throughput per direction and
//! the share of capacity) and the goal checks, and writes into `--out` (default
//! `purple-demo/`): per contender a time-series chart of capacity vs shaped rate vs throughput,
//! one chart of every controller's shaped rate against the capacity, the latency CDF of every
//! contender (PNG and SVG each), `results.json` and `index.html`, a report linking them all.

use crate::plots::{cdf_points, file_stem, write_lines, Line};
use experiments::c::closed_loop::LoopResult;
use experiments::c::{goal_claims, label, run_all, scenario, slides_claims, table};
use experiments::{Claim, RunOpts};
use serde_json::{json, Value};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// What `purple demo` runs.
#[derive(Clone, Debug, PartialEq)]
pub struct DemoOpts {
    /// Scenario name (`experiments::c::scenario::NAMES`).
    pub scenario: String,
    /// Seed of the capacity process and the simulator.
    pub seed: u64,
    /// Simulated seconds (`None`: the scenario's length).
    pub seconds: Option<f64>,
    /// Print JSON instead of text.
    pub json: bool,
    /// Where plots, `results.json` and `index.html` go (`None`: write nothing).
    pub out: Option<PathBuf>,
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
    /// The slides' orderings (radio only) and the goal.
    pub claims: Vec<Claim>,
}

/// Runs the comparison.
pub fn compute(o: &DemoOpts) -> Result<Demo, String> {
    let sc = scenario::scenario(&o.scenario, o.seed).ok_or_else(|| {
        format!(
            "unknown scenario {:?} (known: {})",
            o.scenario,
            scenario::NAMES.join(", ")
        )
    })?;
    let secs = o.seconds.unwrap_or(sc.secs);
    if !(1.0..=3600.0).contains(&secs) {
        return Err(format!("--seconds {secs}: accepted 1 ..= 3600"));
    }
    let opts = RunOpts {
        seed: o.seed,
        time_scale: secs / sc.secs,
    };
    let results = run_all(&sc, &opts);
    let mut claims = if sc.name == "radio" {
        slides_claims(&results)
    } else {
        Vec::new()
    };
    claims.extend(goal_claims(&results));
    Ok(Demo {
        scenario: sc.name.to_string(),
        description: sc.description.to_string(),
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
                "id": label(i),
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
    s.push_str(&table(&d.results, d.scenario == "radio").to_text());
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
    let t = table(&d.results, d.scenario == "radio");
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
