//! `purple sim report`: runs the built-in experiments (`experiments::all()`, or those chosen
//! with `--only`) and prints each one's title, setup, table and claims, then how many claims
//! were reproduced; `--out DIR` also writes `report.md` and, per experiment, a folder with the
//! plots and a Flent file of each of its runs. `--matrix` then runs the matrix
//! ([`crate::matrix`]) and adds its section (plots and results.json in `DIR/matrix/`).

use crate::{flent, matrix, plots};
use experiments::{Experiment, Report, RunOpts};
use serde_json::json;
use std::fmt::Write as _;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

/// Options of `purple sim report`.
#[derive(Clone, Debug, Default)]
pub struct ReportOpts {
    /// Write report.md and per-experiment folders here.
    pub out: Option<PathBuf>,
    /// Only these experiment ids (case-insensitive); empty = all.
    pub only: Vec<String>,
    /// Seed (default 1).
    pub seed: Option<u64>,
    /// Print JSON instead of text.
    pub json: bool,
    /// No progress lines on stderr.
    pub quiet: bool,
    /// Also run the matrix with these options (`--matrix`).
    pub matrix: Option<matrix::MatrixOpts>,
}

/// The experiments `only` selects (all when empty), or an error naming an unknown id.
pub fn select(all: Vec<Experiment>, only: &[String]) -> Result<Vec<Experiment>, String> {
    if only.is_empty() {
        return Ok(all);
    }
    let known: Vec<&str> = all.iter().map(|e| e.id).collect();
    let mut out = Vec::new();
    for id in only {
        match all.iter().find(|e| e.id.eq_ignore_ascii_case(id)) {
            Some(e) => out.push(*e),
            None => {
                return Err(format!(
                    "unknown experiment id {id:?} (known: {})",
                    if known.is_empty() {
                        "none built in yet".to_string()
                    } else {
                        known.join(", ")
                    }
                ))
            }
        }
    }
    Ok(out)
}

/// Runs the report; returns what to print.
pub fn run(opts: &ReportOpts) -> Result<String, String> {
    let chosen = select(experiments::all(), &opts.only)?;
    let ro = RunOpts {
        seed: opts.seed.unwrap_or(1),
        time_scale: 1.0,
    };
    let progress = !opts.quiet && !opts.json && std::io::stderr().is_terminal();
    let mut reports = Vec::new();
    for (i, e) in chosen.iter().enumerate() {
        if progress {
            eprintln!("[{}/{}] {} {}", i + 1, chosen.len(), e.id, e.title);
        }
        reports.push((e.run)(&ro));
    }
    let mx = match &opts.matrix {
        Some(m) => {
            if progress {
                eprintln!("[matrix] every contender on every variable link, many seeds");
            }
            let m = matrix::MatrixOpts {
                quiet: opts.quiet || opts.json,
                ..m.clone()
            };
            Some(matrix::compute(&m)?)
        }
        None => None,
    };
    if let Some(dir) = &opts.out {
        write_dir(&reports, dir, ro.seed)?;
        if let Some(r) = &mx {
            let sub = dir.join("matrix");
            matrix::write_out(r, &sub)?;
            let md = dir.join("report.md");
            let mut m = std::fs::read_to_string(&md)
                .map_err(|e| format!("cannot read {}: {e}", md.display()))?;
            // The plots live in matrix/: point the section's images there.
            m += "\n";
            m += &matrix::markdown(r, true).replace("](tradeoff-", "](matrix/tradeoff-");
            std::fs::write(&md, m).map_err(|e| format!("cannot write {}: {e}", md.display()))?;
        }
        if progress {
            eprintln!("wrote {}", dir.join("report.md").display());
        }
    }
    let (pass, total) = count(&reports);
    if opts.json {
        let mut v = json!({"seed": ro.seed, "experiments": reports,
            "claims_reproduced": pass, "claims_total": total});
        if let (Some(r), Some(o)) = (&mx, v.as_object_mut()) {
            o.insert(
                "matrix".into(),
                serde_json::to_value(r).map_err(|e| e.to_string())?,
            );
        }
        return Ok(v.to_string() + "\n");
    }
    let mut t = text(&reports, ro.seed);
    if let Some(r) = &mx {
        t += "\n";
        t += &matrix::text(r);
    }
    Ok(t)
}

fn count(reports: &[Report]) -> (usize, usize) {
    let claims = reports.iter().flat_map(|r| &r.claims);
    (claims.clone().filter(|c| c.pass).count(), claims.count())
}

/// The text report: per experiment its title, setup, table, claims and notes, then the
/// summary line `N/M claims reproduced`.
pub fn text(reports: &[Report], seed: u64) -> String {
    let mut out = String::new();
    for r in reports {
        let _ = writeln!(out, "== {} {}\n", r.id, r.title);
        let _ = writeln!(out, "{}\n", r.setup);
        out += &r.table.to_text();
        out.push('\n');
        for c in &r.claims {
            let _ = writeln!(
                out,
                "{}  seed: {}  ours: {}  ({})",
                if c.pass { "PASS" } else { "FAIL" },
                c.seed,
                c.ours,
                c.tolerance
            );
        }
        for n in &r.notes {
            let _ = writeln!(out, "note: {n}");
        }
        out.push('\n');
    }
    let (pass, total) = count(reports);
    let failed: Vec<&str> = reports
        .iter()
        .filter(|r| !r.all_pass())
        .map(|r| r.id.as_str())
        .collect();
    let _ = write!(out, "{pass}/{total} claims reproduced (seed {seed})");
    if !failed.is_empty() {
        let _ = write!(out, "; FAILURES in {}", failed.join(", "));
    }
    out.push('\n');
    out
}

/// Escapes `|` so a cell does not break a Markdown table row.
fn md(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// Writes `report.md` and per experiment `<ID>/` with every run's plots and Flent file.
fn write_dir(reports: &[Report], dir: &Path, seed: u64) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let (pass, total) = count(reports);
    let mut m = format!(
        "# purple experiment report\n\nSeed {seed}. **{pass}/{total} claims reproduced.**\n\n"
    );
    m += "| experiment | claim (seed) | ours | tolerance | result |\n|---|---|---|---|---|\n";
    for r in reports {
        for c in &r.claims {
            let _ = writeln!(
                m,
                "| [{id}](#{anchor}) {t} | {s} | {o} | {tol} | {res} |",
                id = r.id,
                anchor = r.id.to_lowercase(),
                t = md(&r.title),
                s = md(&c.seed),
                o = md(&c.ours),
                tol = md(&c.tolerance),
                res = if c.pass { "PASS" } else { "**FAIL**" }
            );
        }
    }
    for r in reports {
        let _ = writeln!(
            m,
            "\n<a id=\"{}\"></a>\n## {} {}\n",
            r.id.to_lowercase(),
            r.id,
            r.title
        );
        let _ = writeln!(m, "{}\n", r.setup);
        m += &r.table.to_markdown();
        m.push('\n');
        crate::demo::text::write_claims_md(&mut m, &r.claims, "tolerance");
        if !r.notes.is_empty() {
            m += "\nNotes:\n\n";
            for n in &r.notes {
                let _ = writeln!(m, "- {n}");
            }
        }
        let sub = plots::file_stem(&r.id);
        let edir = dir.join(&sub);
        if !r.runs.is_empty() {
            std::fs::create_dir_all(&edir)
                .map_err(|e| format!("cannot create {}: {e}", edir.display()))?;
            m += "\nRuns:\n\n";
        }
        for (i, run) in r.runs.iter().enumerate() {
            // Index prefix keeps runs with equal names apart.
            let stem = format!("{i:02}-{}", plots::file_stem(&run.name));
            plots::write_all(run, &edir, &stem)?;
            flent::write(run, &edir.join(format!("{stem}.flent.gz")))?;
            let links: Vec<String> = plots::Chart::ALL
                .iter()
                .map(|c| format!("[{s}]({sub}/{stem}-{s}.png)", s = c.suffix()))
                .collect();
            let _ = writeln!(
                m,
                "- {}: {} ([svg]({sub}/{stem}-throughput.svg), [flent]({sub}/{stem}.flent.gz))",
                md(&run.name),
                links.join(", ")
            );
        }
    }
    let p = dir.join("report.md");
    std::fs::write(&p, m).map_err(|e| format!("cannot write {}: {e}", p.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use experiments::{Claim, Table};

    fn fake(_: &RunOpts) -> Report {
        Report::default()
    }

    #[test]
    fn select_rejects_an_unknown_id_and_matches_case_insensitively() {
        let all = vec![Experiment {
            id: "A1",
            title: "t",
            run: fake,
        }];
        assert_eq!(select(all.clone(), &["a1".into()]).map(|v| v.len()), Ok(1));
        let e = select(all, &["XX".into()]).expect_err("unknown");
        assert!(e.contains("XX") && e.contains("A1"), "{e}");
    }

    #[test]
    fn text_marks_failures_and_counts_reproduced_claims() {
        let r = Report {
            id: "A9".into(),
            title: "demo".into(),
            setup: "s".into(),
            table: Table::new(&["x"]),
            claims: vec![
                Claim::new("a", "b", "c", true),
                Claim::new("d", "e", "f", false),
            ],
            ..Report::default()
        };
        let t = text(&[r], 1);
        assert!(t.contains("PASS  seed: a  ours: b  (c)"), "{t}");
        assert!(t.contains("FAIL  seed: d  ours: e  (f)"), "{t}");
        assert!(
            t.contains("1/2 claims reproduced") && t.contains("FAILURES in A9"),
            "{t}"
        );
    }
}
