//! `purple demo --matrix` (and `purple sim report --matrix`): every contender on every
//! variable link for many seeds (`experiments::c::matrix`), printed per scenario as seed median
//! and worst seed, with the targets as PASS/FAIL lines; `--out DIR` also writes
//! `results.json`, `report.md` and one latency-vs-throughput plot per scenario (PNG and SVG).

use crate::plots::{file_stem, write_tradeoff, Marker};
use experiments::c::matrix::{self, LinkResult, MatrixLink, MatrixResult, MatrixSpec, Role};
use experiments::c::scenario::Scenario;
use std::fmt::Write as _;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

/// What the matrix runs, from the command line.
#[derive(Clone, Debug, Default)]
pub struct MatrixOpts {
    /// Seeds 1..=N (`None`: [`matrix::DEFAULT_SEEDS`]).
    pub seeds: Option<u64>,
    /// Built-in scenarios (empty: all of them, unless `link` is given).
    pub scenarios: Vec<String>,
    /// A user's link to run as well (first).
    pub link: Option<Scenario>,
    /// Contender ids (empty: all).
    pub contenders: Vec<String>,
    /// `purple`'s sweep, ms (`None`: [`matrix::DEFAULT_TARGETS_MS`]; empty: no sweep).
    pub targets_ms: Option<Vec<f64>>,
    /// Simulated seconds per run (`None`: each scenario's).
    pub seconds: Option<f64>,
    /// Worker threads (`None`: every core).
    pub threads: Option<usize>,
    /// Print JSON.
    pub json: bool,
    /// Write results.json, report.md and plots here.
    pub out: Option<PathBuf>,
    /// No progress on stderr.
    pub quiet: bool,
    /// Every link deployed as a home router (`--home-router`).
    pub home_router: bool,
    /// Every link's idle round trip, ms (`--base-rtt-ms`; `None`: each link's own).
    pub base_rtt_ms: Option<f64>,
}

impl MatrixOpts {
    /// The spec these options describe.
    pub fn spec(&self) -> Result<MatrixSpec, String> {
        let mut s = MatrixSpec::new(self.seeds.unwrap_or(matrix::DEFAULT_SEEDS));
        s.links.clear();
        if let Some(l) = &self.link {
            let mut l = l.clone();
            // `--contenders` takes precedence over a link file's own.
            if !self.contenders.is_empty() {
                l.roles = None;
            }
            s.links.push(MatrixLink::Link(Box::new(l)));
        }
        if !self.scenarios.is_empty() || self.link.is_none() {
            let names: Vec<String> = if self.scenarios.is_empty() {
                experiments::c::scenario::NAMES
                    .iter()
                    .map(|n| n.to_string())
                    .collect()
            } else {
                self.scenarios.clone()
            };
            s.links.extend(names.into_iter().map(MatrixLink::Named));
        }
        if !self.contenders.is_empty() {
            s.roles = self
                .contenders
                .iter()
                .map(|c| Role::parse(c))
                .collect::<Result<_, _>>()
                .map_err(|e| format!("--contenders: {e}"))?;
        }
        if let Some(t) = &self.targets_ms {
            s.targets_ms = t.clone();
        }
        s.secs = self.seconds;
        s.threads = self.threads.unwrap_or(0);
        s.home_router = self.home_router;
        s.base_rtt_ms = self.base_rtt_ms;
        Ok(s)
    }
}

/// Runs the matrix with a progress line on stderr (when it is a terminal and not `quiet`).
pub fn compute(o: &MatrixOpts) -> Result<MatrixResult, String> {
    let spec = o.spec()?;
    let total = spec.runs().map_err(|e| e.to_string())?;
    let show = !o.quiet && !o.json && std::io::stderr().is_terminal();
    #[allow(clippy::disallowed_methods)] // wall time for the progress line only
    let started = std::time::Instant::now();
    let progress = |done: usize, n: usize| {
        if show {
            eprint!(
                "\rmatrix: {done}/{n} runs, {:.0} s",
                started.elapsed().as_secs_f64()
            );
        }
    };
    let r = matrix::run(&spec, &progress).map_err(|e| e.to_string())?;
    if show {
        eprintln!(
            "\rmatrix: {total} runs in {:.0} s on {} threads",
            started.elapsed().as_secs_f64(),
            match spec.threads {
                0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
                t => t,
            }
        );
    }
    Ok(r)
}

/// The matrix as text: per scenario its table (`median/worst` of every figure) and the issue's
/// targets, then the summary.
pub fn text(r: &MatrixResult) -> String {
    let mut s = header(r);
    for l in &r.scenarios {
        let _ = writeln!(
            s,
            "== {} ({}), {:.0} s per run\n",
            l.name, l.description, l.seconds
        );
        s += &l.table().to_text();
        s.push('\n');
        crate::demo::text::write_claims(&mut s, &l.claims, "target");
        s.push('\n');
    }
    s += "== summary: purple against the one-interval-late oracle\n\n";
    s += &r.summary_table().to_text();
    let _ = writeln!(s, "\n{}/{} targets met", r.claims_met, r.claims_total);
    s
}

fn header(r: &MatrixResult) -> String {
    let sweep = if r.targets_ms.is_empty() {
        "no sweep of purple's target".to_string()
    } else {
        format!(
            "purple's sweep: targets {} ms",
            r.targets_ms
                .iter()
                .map(|t| t.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    format!(
        "matrix: seeds {}; {sweep}.\n\
         Each cell is median/worst over the seeds (worst: the lowest throughput or share, the \
         highest latency, each figure's own worst seed). Shares: delivered / mean true \
         capacity. RTT: loaded latency = probe RTT minus the idle RTT, ms. down/up: one-way \
         queueing delay per direction (true send, reflect and receive times minus the idle \
         one-way delay), ms.\n\n",
        seeds_words(&r.seeds),
    )
}

fn seeds_words(seeds: &[u64]) -> String {
    match (seeds.first(), seeds.last()) {
        (Some(a), Some(b)) if seeds.len() > 2 && (b - a) as usize + 1 == seeds.len() => {
            format!("{a}-{b}")
        }
        _ => seeds
            .iter()
            .map(|s| s.to_string())
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// The matrix as Markdown (report.md): the summary, then per scenario its plot, table and
/// targets.
pub fn markdown(r: &MatrixResult, plots: bool) -> String {
    let mut m = String::from("## The matrix: every contender, every link, many seeds\n\n");
    m += &header(r);
    m += &r.summary_table().to_markdown();
    let _ = writeln!(
        m,
        "\n**{}/{} targets met.**\n",
        r.claims_met, r.claims_total
    );
    for l in &r.scenarios {
        let _ = writeln!(
            m,
            "### {}\n\n{}; {:.0} s per run.\n",
            l.name, l.description, l.seconds
        );
        if plots {
            let stem = plot_stem(l);
            let _ = writeln!(m, "![{0}]({stem}.png) ([svg]({stem}.svg))\n", l.name);
        }
        m += &l.table().to_markdown();
        m.push('\n');
        crate::demo::text::write_claims_md(&mut m, &l.claims, "target");
        m.push('\n');
    }
    m
}

fn plot_stem(l: &LinkResult) -> String {
    format!("tradeoff-{}", file_stem(&l.name))
}

/// Writes one latency-vs-throughput plot per scenario into `dir`: every contender at its seed
/// medians (loaded-latency p95, download share of capacity) with its worst seed hollow at the
/// end of a whisker, oracles as triangles, and purple's sweep as a labelled curve.
pub fn write_plots(r: &MatrixResult, dir: &Path) -> Result<Vec<PathBuf>, String> {
    let mut files = Vec::new();
    for l in &r.scenarios {
        let markers: Vec<Marker> = l
            .rows
            .iter()
            .filter(|x| x.target_ms.is_none())
            .map(|x| Marker {
                name: x.name.clone(),
                median: (x.median.rtt.p95, x.median.down_share),
                worst: Some((x.worst.rtt.p95, x.worst.down_share)),
                reference: x.id.starts_with("oracle"),
            })
            .collect();
        let curve: Vec<(f64, f64, String)> = l
            .sweep()
            .filter_map(|x| {
                x.target_ms
                    .map(|t| (x.median.rtt.p95, x.median.down_share, format!(" {t}")))
            })
            .collect();
        files.extend(write_tradeoff(
            dir,
            &plot_stem(l),
            &format!(
                "{}: latency vs throughput, median of {} seeds (hollow: worst seed)",
                l.name,
                r.seeds.len()
            ),
            (
                "loaded latency p95, ms (probe RTT - idle RTT; log scale)",
                "download throughput / capacity",
            ),
            &markers,
            ("purple, target sweep (ms)", &curve),
        )?);
    }
    Ok(files)
}

/// Writes `results.json`, `report.md` and the plots into `dir`; returns the files written.
pub fn write_out(r: &MatrixResult, dir: &Path) -> Result<Vec<PathBuf>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut files = write_plots(r, dir)?;
    let j = dir.join("results.json");
    let text = serde_json::to_string_pretty(r).map_err(|e| e.to_string())?;
    std::fs::write(&j, text).map_err(|e| format!("{}: {e}", j.display()))?;
    files.push(j);
    let md = dir.join("report.md");
    let body = format!("# purple matrix\n\n{}", markdown(r, true));
    std::fs::write(&md, body).map_err(|e| format!("{}: {e}", md.display()))?;
    files.push(md);
    Ok(files)
}

/// Runs `purple demo --matrix` and returns what to print.
pub fn run(o: &MatrixOpts) -> Result<String, String> {
    let r = compute(o)?;
    let written = match &o.out {
        Some(dir) => Some((dir.clone(), write_out(&r, dir)?)),
        None => None,
    };
    if o.json {
        let mut v = serde_json::to_value(&r).map_err(|e| e.to_string())?;
        if let (Some((dir, _)), Some(m)) = (&written, v.as_object_mut()) {
            m.insert("out".into(), dir.display().to_string().into());
        }
        return Ok(format!("{v}\n"));
    }
    let mut s = text(&r);
    if let Some((dir, files)) = written {
        let _ = writeln!(
            s,
            "\nwrote {} files into {} (report.md, results.json, one plot per scenario)",
            files.len(),
            dir.display()
        );
    }
    Ok(s)
}
