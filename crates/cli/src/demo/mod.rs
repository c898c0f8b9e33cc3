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
//!
//! `purple demo --lab` runs the same comparison in the namespace lab with real kernel TCP.
//!
//! This module holds both commands' options and results and the two entry points, [`run`] and
//! [`run_lab`], which compute, write the files and say what to print. Each step has its own
//! file: `sim` (the simulated comparison), `lab` (the lab's), `text` and `json` (what is
//! printed, for both), `out` (the files in `--out`, for both).

mod json;
mod lab;
mod out;
mod sim;
pub(crate) mod text;

pub use sim::link_scenario;

use ::lab::analysis::{self, DemoRow};
use experiments::c::closed_loop::LoopResult;
use experiments::Claim;
use serde_json::json;
use std::fmt::Write as _;
use std::path::PathBuf;

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
    /// Then run the same link with PURPLE, cake-autorate and static CAKE on our bridge and on
    /// Linux's sch_cake in the reference kernel (QEMU), as `purple lab run --kernel` does, and
    /// print those tables after the lab's (`--kernel`).
    pub kernel: bool,
    /// The lab scenario (`radio` when empty): one with a link emulator.
    pub scenario: String,
    /// A link file to run the radio's contenders on instead of a lab scenario (`--link`).
    pub link: Option<PathBuf>,
    /// Section C's scenario whose link to run the radio's contenders on instead, and its seed
    /// (`--link-of NAME --seed N`).
    pub link_of: Option<(String, u64)>,
    /// With `link_of`: the scenario deployed as a home router (`--home-router`), where section
    /// C deploys it otherwise (the lab refuses it then).
    pub home_router: bool,
    /// Faults injected into the testbed.
    pub faults: Vec<::lab::Fault>,
}

/// The lab demo's results.
#[derive(Debug)]
pub struct LabDemo {
    /// The lab scenario (radio).
    pub scenario: ::lab::scenario::Scenario,
    /// Seconds of load per contender.
    pub seconds: f64,
    /// Seconds of idle probing before the load.
    pub idle_s: f64,
    /// The rows, in the scenario's contender order.
    pub rows: Vec<DemoRow>,
    /// Faults injected.
    pub faults: Vec<::lab::Fault>,
    /// The simulator's rows for the same link, deployment and contenders' roles, measured over
    /// the lab's window of the link (as `purple lab run` prints them); `None` with a fault
    /// injected, which the simulator does not model.
    pub sim: Option<crate::lab::SimRows>,
}

impl LabDemo {
    /// The command-line names of the faults injected, in injection order.
    fn fault_names(&self) -> Vec<&'static str> {
        self.faults.iter().map(|f| f.name()).collect()
    }

    /// The download rate `r`'s contender shapes to at `t` (s since the run's epoch), Mbit/s
    /// ([`analysis::shaped_down_rate_mbit`]).
    fn shaped_rate(&self, r: &DemoRow, t: f64) -> Option<f64> {
        analysis::shaped_down_rate_mbit(&self.scenario, &r.run, t)
    }
}

/// Runs the demo and returns what to print.
pub fn run(o: &DemoOpts) -> Result<String, String> {
    let d = sim::compute(o)?;
    let written = match &o.out {
        Some(dir) => Some((dir.clone(), out::write_out(&d, dir)?)),
        None => None,
    };
    if o.json {
        let mut v = json::to_json(&d);
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
    let mut s = text::to_text(&d);
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

/// Runs `purple demo --lab` and returns what to print.
pub fn run_lab(o: &LabDemoOpts) -> Result<String, String> {
    use std::io::IsTerminal;
    let show = !o.json && std::io::stderr().is_terminal();
    let mut last = String::new();
    let d = lab::compute_lab(o, &mut |name, f| {
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
        files = out::write_lab_out(&d, dir)?;
    }
    if o.json {
        let mut v = json::lab_json(&d);
        if let (Some(dir), Some(m)) = (&o.out, v.as_object_mut()) {
            m.insert("out".into(), json!(dir.display().to_string()));
        }
        return Ok(format!("{v}\n"));
    }
    let mut s = text::lab_text(&d);
    if o.kernel {
        // The same link with the two daemons and static CAKE, on our bridge and on Linux's
        // qdiscs in the reference kernel (`purple lab run ... --kernel`), both at the share
        // of the link the guest keeps up with.
        let which = match (&o.link, &o.link_of) {
            (Some(f), _) => crate::lab::Which::Link(f.clone()),
            (None, Some((name, seed))) => crate::lab::Which::LinkOf {
                name: name.clone(),
                seed: *seed,
                home_router: o.home_router,
            },
            (None, None) => crate::lab::Which::Name(if o.scenario.is_empty() {
                "radio".into()
            } else {
                o.scenario.clone()
            }),
        };
        let ko = crate::lab::LabCmdOpts {
            seconds: o.seconds,
            out: o.out.as_ref().map(|d| d.join("kernel")),
            kernel: true,
            no_sim: true,
            quiet: !show,
            contenders: ["purple", "cake-autorate", "static-safe"]
                .map(String::from)
                .to_vec(),
            ..Default::default()
        };
        s += "\n";
        s += &crate::lab::run(&which, &ko)?;
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
