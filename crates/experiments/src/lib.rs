//! The published CAKE experiments of `evaluation.md` (sections A, B and C) and the L4S
//! comparison (section D) as simulator runs.
//!
//! **What this crate owns**: each published experiment as a simulator run with its claims, and
//! section C's closed loop (the simulator's shell around `controller::agent::Agent`) and
//! matrix. **What it must not do**: I/O beyond reading scenario and trace files; decide for the
//! controller (the agent does); change a figure without the change being explained in the docs.
//!
//! Each [`Experiment`] builds its testbed ([`testbed`]), runs every contender the seed compared,
//! and returns a [`Report`]: a table of our figures, the seed's figures beside them, and
//! [`Claim`]s — each a seed statement checked against our numbers with a stated tolerance. The
//! tests assert every claim; `purple sim report` prints them all.
//!
//! Deterministic: an experiment's numbers depend only on [`RunOpts::seed`].
#![deny(unsafe_code)]
#![cfg_attr(test, allow(clippy::unwrap_used))]

mod a;
mod b;
pub mod c;
pub mod d;
pub mod testbed;

use serde::Serialize;
use sim::tally::LatencyStats;
use sim::RunSummary;

/// How to run an experiment.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RunOpts {
    /// Seed of every random decision.
    pub seed: u64,
    /// Multiplies the experiment's simulated duration (1.0 = the seed's length). Tests may use
    /// less where the claim holds on shorter runs; the report always uses 1.0.
    pub time_scale: f64,
}

impl Default for RunOpts {
    fn default() -> Self {
        RunOpts {
            seed: 1,
            time_scale: 1.0,
        }
    }
}

/// The loaded-latency columns of the comparison tables (section C's [`c::table`] and
/// `purple demo --lab`'s), in the order of [`latency_cells`].
pub const LATENCY_COLUMNS: [&str; 7] = ["mean", "median", "min", "max", "std", "p95", "p99"];

/// `l`'s figures as the cells of [`LATENCY_COLUMNS`]: ms to two decimals.
pub fn latency_cells(l: &LatencyStats) -> [String; 7] {
    [l.mean, l.median, l.min, l.max, l.std, l.p95, l.p99].map(|x| format!("{x:.2}"))
}

/// A plain table: a header row and rows of cells, printed as text or Markdown.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Table {
    /// Column headings.
    pub headers: Vec<String>,
    /// Rows (each as long as `headers`).
    pub rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these headings and no rows.
    pub fn new(headers: &[&str]) -> Self {
        Table {
            headers: headers.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    /// Appends a row.
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    fn widths(&self) -> Vec<usize> {
        let mut w: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for r in &self.rows {
            for (i, c) in r.iter().enumerate() {
                if i < w.len() {
                    w[i] = w[i].max(c.chars().count());
                }
            }
        }
        w
    }

    /// Aligned plain text, one line per row.
    pub fn to_text(&self) -> String {
        let w = self.widths();
        let line = |cells: &[String]| {
            let mut s = String::new();
            for (i, c) in cells.iter().enumerate() {
                let width = w.get(i).copied().unwrap_or(0);
                s.push_str(&format!("{c:<width$}  "));
            }
            s.trim_end().to_string() + "\n"
        };
        let mut out = line(&self.headers);
        for r in &self.rows {
            out.push_str(&line(r));
        }
        out
    }

    /// A GitHub-flavoured Markdown table.
    pub fn to_markdown(&self) -> String {
        let mut out = format!("| {} |\n", self.headers.join(" | "));
        out.push_str(&format!("|{}\n", "---|".repeat(self.headers.len())));
        for r in &self.rows {
            out.push_str(&format!("| {} |\n", r.join(" | ")));
        }
        out
    }
}

/// One seed statement checked against our result.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Claim {
    /// What the seed says, in words (e.g. "dsthost: each destination gets 1/4").
    pub seed: String,
    /// What we measured, in words and numbers.
    pub ours: String,
    /// The tolerance the check applies (e.g. "each share within 0.25 +- 0.03").
    pub tolerance: String,
    /// Whether our result satisfies the claim within the tolerance.
    pub pass: bool,
}

impl Claim {
    /// A claim; `pass` is the caller's check.
    pub fn new(
        seed: impl Into<String>,
        ours: impl Into<String>,
        tolerance: impl Into<String>,
        pass: bool,
    ) -> Self {
        Claim {
            seed: seed.into(),
            ours: ours.into(),
            tolerance: tolerance.into(),
            pass,
        }
    }
}

/// What one experiment produced.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Report {
    /// Experiment id ("A2").
    pub id: String,
    /// Title.
    pub title: String,
    /// The testbed in words (rates, delays, flows, duration).
    pub setup: String,
    /// Our figures per contender, with the seed's figures in their own columns.
    pub table: Table,
    /// Every seed claim and whether we reproduce it.
    pub claims: Vec<Claim>,
    /// The raw runs (one per contender and test), for plots and Flent files.
    #[serde(skip)]
    pub runs: Vec<RunSummary>,
    /// Notes on differences and model limits.
    pub notes: Vec<String>,
}

impl Report {
    /// Whether every claim passed.
    pub fn all_pass(&self) -> bool {
        self.claims.iter().all(|c| c.pass)
    }

    /// The claims that failed, as text (empty when all pass); tests print this on failure.
    pub fn failures(&self) -> String {
        self.claims
            .iter()
            .filter(|c| !c.pass)
            .map(|c| {
                format!(
                    "{}: seed says {:?}; ours {:?} (tolerance {})\n",
                    self.id, c.seed, c.ours, c.tolerance
                )
            })
            .collect()
    }
}

/// A built-in experiment.
#[derive(Clone, Copy, Debug)]
pub struct Experiment {
    /// Id as in evaluation.md ("A1".."A6", "B1".."B4"; section C by scenario: "C-radio",
    /// "C-step", ..., see [`c`]; "D1" for L4S, see [`d`]).
    pub id: &'static str,
    /// One-line title.
    pub title: &'static str,
    /// Runs it. Deterministic in `opts`.
    pub run: fn(&RunOpts) -> Report,
}

/// Every built-in experiment, A before B before C before D, in id order.
pub fn all() -> Vec<Experiment> {
    let mut v = a::experiments();
    v.extend(b::experiments());
    v.extend(c::experiments());
    v.extend(d::experiments());
    v
}

/// The experiment with this id (case-insensitive).
pub fn find(id: &str) -> Option<Experiment> {
    all().into_iter().find(|e| e.id.eq_ignore_ascii_case(id))
}

/// Flent's name for a flow of DSCP `dscp` in its `rrul` test (`TCP upload BK`, `Ping (ms)
/// UDP EF`): BE, BK (CS1), CS5 or EF; `None` for the other code points.
pub(crate) fn rrul_mark(dscp: u8) -> Option<&'static str> {
    match dscp {
        0 => Some("BE"),
        8 => Some("BK"),
        40 => Some("CS5"),
        46 => Some("EF"),
        _ => None,
    }
}

/// Jain's fairness index of `x`: 1 when all equal, 1/n when one takes everything; 0 for an
/// empty or all-zero input.
pub fn jain(x: &[f64]) -> f64 {
    let s: f64 = x.iter().sum();
    let s2: f64 = x.iter().map(|v| v * v).sum();
    if x.is_empty() || s2 == 0.0 {
        return 0.0;
    }
    s * s / (x.len() as f64 * s2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jain_is_one_for_equal_shares_and_one_over_n_for_a_monopoly() {
        assert!((jain(&[3.0, 3.0, 3.0]) - 1.0).abs() < 1e-12);
        assert!((jain(&[1.0, 0.0, 0.0, 0.0]) - 0.25).abs() < 1e-12);
        assert_eq!(jain(&[]), 0.0);
    }

    #[test]
    fn markdown_table_has_a_separator_row_per_column() {
        let mut t = Table::new(&["a", "b"]);
        t.row(vec!["1".into(), "2".into()]);
        assert_eq!(t.to_markdown(), "| a | b |\n|---|---|\n| 1 | 2 |\n");
        assert_eq!(t.to_text(), "a  b\n1  2\n");
    }

    #[test]
    fn experiment_ids_are_unique() {
        let ids: Vec<_> = all().iter().map(|e| e.id).collect();
        let mut d = ids.clone();
        d.sort_unstable();
        d.dedup();
        assert_eq!(d.len(), ids.len());
    }
}
