//! `purple sim FILE|NAME`: runs a TOML scenario (format: docs/scenarios.md) or a built-in one
//! and prints per-flow goodput, latency and loss, per-link utilisation and drops, and the
//! qdiscs' statistics; as text, or as one JSON object with `--json`; `--out DIR` also writes
//! `summary.json`, plots and a Flent file.

use crate::{builtin, flent, plots};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::{json, Value};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

/// Options of one `purple sim` run.
#[derive(Clone, Debug, Default)]
pub struct SimOpts {
    /// Print JSON instead of text.
    pub json: bool,
    /// Write summary.json, plots and a Flent file here.
    pub out: Option<PathBuf>,
    /// Override the scenario's seed.
    pub seed: Option<u64>,
    /// No progress bar.
    pub quiet: bool,
}

/// `purple sim --list`: one line per built-in scenario, name and first comment line.
pub fn list() -> String {
    let all = builtin::all();
    let exps = experiments::all();
    let w = all
        .iter()
        .map(|b| b.name.len())
        .chain(exps.iter().map(|e| e.id.len()))
        .max()
        .unwrap_or(0);
    let mut out: String = all
        .iter()
        .map(|b| format!("{:<w$}  {}\n", b.name, b.description()))
        .collect();
    out.push_str("\nexperiments (purple sim ID, or all of them with purple sim report):\n");
    for e in &exps {
        out.push_str(&format!("{:<w$}  {}\n", e.id, e.title));
    }
    out
}

/// A loaded scenario: its name (file stem), text and the directory for relative paths.
struct Source {
    name: String,
    text: String,
    dir: PathBuf,
}

fn load(what: &str) -> Result<Source, String> {
    let path = Path::new(what);
    if path.is_file() {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read scenario {}: {e}", path.display()))?;
        let name = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("scenario")
            .to_string();
        let dir = path.parent().unwrap_or(Path::new(".")).to_path_buf();
        return Ok(Source { name, text, dir });
    }
    if let Some(b) = builtin::find(what) {
        return Ok(Source {
            name: b.name.to_string(),
            text: b.text.to_string(),
            dir: b.dir(),
        });
    }
    let names: Vec<&str> = builtin::all().iter().map(|b| b.name).collect();
    Err(format!(
        "{what}: no such file and no built-in scenario of that name (built in: {})",
        names.join(", ")
    ))
}

/// Runs `built` to its end in slices of 1% of the duration, showing a progress bar on stderr
/// once the run has taken more than a second of wall time (never when `show` is false).
fn run_with_progress(built: &mut sim::Built, show: bool) {
    let end = built.end.as_nanos();
    let steps = 100u64;
    let bar = ProgressBar::with_draw_target(Some(steps), ProgressDrawTarget::hidden());
    if let Ok(style) = ProgressStyle::with_template(
        "{msg} [{bar:40}] {percent:>3}% ({elapsed} elapsed, ETA {eta})",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message("simulating");
    // Wall time only decides when the bar appears; it never touches the simulation.
    #[allow(clippy::disallowed_methods)]
    let started = std::time::Instant::now();
    let mut visible = false;
    for i in 1..=steps {
        // Slice ends rounded so the last one is exactly `end`.
        let t = (u128::from(end) * u128::from(i) / u128::from(steps)) as u64;
        built.sim.run_until(qdisc::Instant::from_nanos(t));
        if show && !visible && started.elapsed() > std::time::Duration::from_secs(1) {
            bar.set_draw_target(ProgressDrawTarget::stderr());
            visible = true;
        }
        bar.set_position(i);
    }
    bar.finish_and_clear();
}

/// Everything a run produced: the summary and its JSON.
pub struct Outcome {
    /// What the run measured.
    pub summary: sim::RunSummary,
    /// The `--json` object.
    pub json: Value,
    /// The seed used.
    pub seed: u64,
}

/// Builds and runs the scenario named or stored at `what`.
fn simulate(what: &str, opts: &SimOpts) -> Result<(Source, sim::Built, Outcome), String> {
    let src = load(what)?;
    let mut scenario = sim::Scenario::parse(&src.text).map_err(|e| format!("{what}: {e}"))?;
    if let Some(s) = opts.seed {
        scenario.seed = s;
    }
    let mut built = scenario
        .build(&src.dir)
        .map_err(|e| format!("{what}: {e}"))?;
    let show = !opts.quiet && !opts.json && std::io::stderr().is_terminal();
    run_with_progress(&mut built, show);
    let flows: Vec<(sim::AppId, String)> =
        built.apps.iter().map(|(n, id)| (*id, n.clone())).collect();
    let links: Vec<(sim::LinkId, String)> =
        built.links.iter().map(|(n, id)| (*id, n.clone())).collect();
    let summary =
        sim::RunSummary::collect(&built.sim, &src.name, &flows, &links, qdisc::Instant::ZERO)
            .with_flent(built.flent.clone());
    let json = summary_json(&summary, scenario.seed);
    Ok((
        src,
        built,
        Outcome {
            summary,
            json,
            seed: scenario.seed,
        },
    ))
}

/// The `--json` object of a run: `{"scenario","seed","duration_s","flows","links","qdiscs"}`.
pub fn summary_json(s: &sim::RunSummary, seed: u64) -> Value {
    let flows: Vec<Value> = s
        .flows
        .iter()
        .map(|f| {
            // No sample: `null`, never a latency of 0.
            let lat = f.latency_ms.map(
                |l| json!({"mean": l.mean, "p50": l.p50, "p95": l.p95, "p99": l.p99, "max": l.max}),
            );
            json!({"name": f.name, "src": f.src, "dst": f.dst, "dscp": f.dscp,
                "goodput_bps": f.goodput_bps,
                "latency_ms": lat,
                "loss": f.loss})
        })
        .collect();
    let links: Vec<Value> = s
        .links
        .iter()
        .map(|l| json!({"name": l.name, "utilisation": l.utilisation}))
        .collect();
    json!({"scenario": s.name, "seed": seed, "duration_s": s.duration_s, "flows": flows,
        "links": links, "qdiscs": s.qdiscs})
}

/// Writes `summary.json`, the plots and `<name>.flent.gz` of `run` into `dir` (created if
/// missing); returns the files written.
pub fn write_outputs(
    run: &sim::RunSummary,
    json: &Value,
    dir: &Path,
) -> Result<Vec<PathBuf>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let mut files = Vec::new();
    let p = dir.join("summary.json");
    std::fs::write(&p, json.to_string() + "\n")
        .map_err(|e| format!("cannot write {}: {e}", p.display()))?;
    files.push(p);
    files.extend(plots::write_all(run, dir, &plots::file_stem(&run.name))?);
    let p = dir.join(format!("{}.flent.gz", plots::file_stem(&run.name)));
    flent::write(run, &p)?;
    files.push(p);
    Ok(files)
}

/// Runs `purple sim WHAT`; returns the text (or JSON) to print.
pub fn run(what: &str, opts: &SimOpts) -> Result<String, String> {
    let (src, built, o) = simulate(what, opts)?;
    if let Some(dir) = &opts.out {
        let files = write_outputs(&o.summary, &o.json, dir)?;
        if !opts.json && !opts.quiet {
            eprintln!("wrote {} files to {}", files.len(), dir.display());
        }
    }
    if opts.json {
        return Ok(o.json.to_string() + "\n");
    }
    Ok(text(&src, &built, &o))
}

fn text(src: &Source, built: &sim::Built, o: &Outcome) -> String {
    let s = &o.summary;
    let mut out = format!(
        "{}: {} s simulated, seed {}\n\n",
        src.name, s.duration_s, o.seed
    );
    let w = s
        .flows
        .iter()
        .map(|f| f.name.chars().count())
        .max()
        .unwrap_or(0)
        .max(4);
    out += &format!(
        "{:<w$} {:>4} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7}\n",
        "flow", "dscp", "Mbit/s", "mean ms", "p50", "p95", "p99", "max", "loss"
    );
    for f in &s.flows {
        // A flow with no delivered packet has no latency: dashes, not zeros.
        let lat = match f.latency_ms {
            Some(l) => format!(
                "{:>9.2} {:>9.2} {:>9.2} {:>9.2} {:>9.2}",
                l.mean, l.p50, l.p95, l.p99, l.max
            ),
            None => format!("{:>9} {:>9} {:>9} {:>9} {:>9}", "-", "-", "-", "-", "-"),
        };
        out += &format!(
            "{:<w$} {:>4} {:>10.3} {lat} {:>6.2}%\n",
            f.name,
            f.dscp,
            f.goodput_bps / 1e6,
            f.loss * 100.0
        );
    }
    let w = built
        .links
        .iter()
        .map(|(n, _)| n.chars().count())
        .max()
        .unwrap_or(0)
        .max(4);
    out += &format!(
        "\n{:<w$} {:>11} {:>12} {:>11} {:>11}\n",
        "link", "utilisation", "buffer drops", "qdisc drops", "random loss"
    );
    for (name, id) in &built.links {
        if let Some(m) = built.sim.link(*id) {
            out += &format!(
                "{:<w$} {:>10.1}% {:>12} {:>11} {:>11}\n",
                name,
                built.sim.link_utilisation(*id) * 100.0,
                m.buffer_drops,
                m.qdisc_drops,
                m.random_losses
            );
        }
    }
    for (name, id) in &built.links {
        if let Some(c) = built.sim.qdisc(*id).and_then(|q| q.as_cake()) {
            let cfg = c.config();
            out += &format!("\n{name}:\n");
            out +=
                &cake::tc::stats_text(cfg, &c.cake_stats(), cake::tc::QdiscHeader::for_config(cfg));
        }
        if let Some(d) = built.sim.qdisc(*id).and_then(|q| q.as_dualpi2()) {
            out += &format!("\n{name}: dualpi2\n{}", d.xstats(built.sim.now()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_example_scenario_runs_and_cake_keeps_ping_near_the_base_rtt() {
        let opts = SimOpts {
            json: true,
            quiet: true,
            ..SimOpts::default()
        };
        let out = run("cake-dumbbell", &opts).expect("example scenario runs");
        let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
        let flows = v["flows"].as_array().expect("flows");
        let ping = flows
            .iter()
            .find(|f| f["name"] == "ping@a:7")
            .expect("ping row");
        let p99 = ping["latency_ms"]["p99"].as_f64().expect("p99");
        assert!(p99 < 50.0, "ping p99 {p99} ms with CAKE (base RTT 40 ms)");
        let tcp: f64 = flows
            .iter()
            .filter(|f| f["name"].as_str().is_some_and(|n| n.starts_with("tcp@")))
            .map(|f| f["goodput_bps"].as_f64().unwrap_or(0.0))
            .sum();
        assert!(tcp > 8.0e6, "TCP goodput {tcp}");
        let q = v["qdiscs"].as_array().expect("qdiscs");
        assert_eq!(q.len(), 2, "cake on r->b both ways");
        assert_eq!(q[0]["kind"], "cake");
        assert_eq!(q[0]["link"], "r->b (fwd)");
        assert!(q[0]["packets"].as_u64().unwrap_or(0) > 10_000);
    }

    #[test]
    fn a_missing_file_is_an_error_not_a_panic() {
        let e = run("/nonexistent/x.toml", &SimOpts::default()).expect_err("missing");
        assert!(e.contains("no such file"), "{e}");
    }

    #[test]
    fn list_names_every_builtin_with_its_description() {
        let l = list();
        assert!(l.lines().any(|x| x.starts_with("cake-dumbbell ")), "{l}");
    }
}
