//! The files both comparisons write into `--out`: per contender a chart of capacity vs shaped
//! rate vs throughput, one chart of every controller's shaped rate against the capacity, the
//! latency CDF of every contender (PNG and SVG each), `results.json`, and for the simulated
//! comparison `index.html`, a report linking them all.

use super::json::{lab_json, to_json};
use super::{Demo, LabDemo};
use crate::plots::{cdf_points, file_stem, write_lines, Line};
use experiments::c::table;
use lab::analysis;
use serde_json::Value;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// A time series: (seconds, value) points.
type Series = Vec<(f64, f64)>;

/// Writes the `i`-th contender's (from 0) chart of capacity, shaped rate and throughput
/// (download, Mbit/s) as `NN-NAME-rates.{png,svg}`; returns the files written.
fn write_rates(
    dir: &Path,
    i: usize,
    name: &str,
    title: &str,
    [cap, rate, thr]: [Series; 3],
) -> Result<Vec<PathBuf>, String> {
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
    let stem = format!("{:02}-{}-rates", i + 1, file_stem(name));
    write_lines(dir, &stem, title, ("time (s)", "Mbit/s"), &lines, None)
}

/// Writes the chart of the capacity and every controller's shaped rate, `lines`, as
/// `shaped-rates.{png,svg}`; returns the files written.
fn write_shaped_rates(dir: &Path, title: &str, lines: &[Line]) -> Result<Vec<PathBuf>, String> {
    write_lines(
        dir,
        "shaped-rates",
        title,
        ("time (s)", "Mbit/s"),
        lines,
        None,
    )
}

/// Writes the loaded latency CDF of each (contender, samples in ms) as
/// `latency-cdf.{png,svg}`; returns the files written.
fn write_latency_cdf<'a>(
    dir: &Path,
    title: &str,
    samples: impl Iterator<Item = (&'a str, &'a [f64])>,
) -> Result<Vec<PathBuf>, String> {
    let lines: Vec<Line> = samples
        .map(|(name, s)| Line {
            name: name.to_string(),
            points: cdf_points(s),
            thin: false,
        })
        .collect();
    write_lines(
        dir,
        "latency-cdf",
        title,
        ("loaded latency (ms)", "fraction of probes"),
        &lines,
        Some((0.0, 1.0)),
    )
}

/// Writes `v` as `results.json` in `dir`; returns its path.
fn write_results_json(dir: &Path, v: &Value) -> Result<PathBuf, String> {
    let j = dir.join("results.json");
    let text = serde_json::to_string_pretty(v).map_err(|e| e.to_string())?;
    std::fs::write(&j, text).map_err(|e| format!("{}: {e}", j.display()))?;
    Ok(j)
}

fn write_plots(d: &Demo, dir: &Path) -> Result<Vec<PathBuf>, String> {
    let mut files = Vec::new();
    // Capacity vs shaped rate vs throughput, per contender (download).
    for (i, r) in d.results.iter().enumerate() {
        let pick = |f: &dyn Fn(&experiments::c::closed_loop::Point) -> f64| {
            r.series.iter().map(|p| (p.t, f(p))).collect::<Vec<_>>()
        };
        files.extend(write_rates(
            dir,
            i,
            r.name(),
            &format!("{}: {} download", d.scenario, r.name()),
            [
                pick(&|p| p.cap.down),
                pick(&|p| p.rate.down),
                pick(&|p| p.thr.down),
            ],
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
        if r.series.iter().any(|p| p.rate.down.is_finite()) && !r.name().starts_with("CAKE static")
        {
            lines.push(Line {
                name: r.name().to_string(),
                points: r.series.iter().map(|p| (p.t, p.rate.down)).collect(),
                thin: true,
            });
        }
    }
    files.extend(write_shaped_rates(
        dir,
        &format!("{}: capacity and shaped rates (download)", d.scenario),
        &lines,
    )?);
    files.extend(write_latency_cdf(
        dir,
        &format!("{}: loaded latency CDF", d.scenario),
        d.results.iter().map(|r| (r.name(), r.samples())),
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
    files.push(write_results_json(dir, &to_json(d))?);
    let h = dir.join("index.html");
    std::fs::write(&h, html(d, &pngs)).map_err(|e| format!("{}: {e}", h.display()))?;
    files.push(h);
    Ok(files)
}

fn write_lab_plots(d: &LabDemo, dir: &Path) -> Result<Vec<PathBuf>, String> {
    let mut files = Vec::new();
    let mut all_rates = Vec::new();
    for (i, r) in d.rows.iter().enumerate() {
        let t = analysis::bin_ends_s(&r.run);
        let half = r.run.summary.bin_s / 2.0;
        let cap: Series = t
            .iter()
            .zip(&r.run.capacity_down_mbit)
            .map(|(&x, &c)| (x - half, c))
            .collect();
        let rate: Series = t
            .iter()
            .map(|&x| (x - half, d.shaped_rate(r, x - half).unwrap_or(f64::NAN)))
            .collect();
        let thr: Series = r
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
        files.extend(write_rates(
            dir,
            i,
            &r.run.contender,
            &format!("lab {}: {} download", d.scenario.name, r.run.contender),
            [cap, rate, thr],
        )?);
    }
    files.extend(write_shaped_rates(
        dir,
        &format!(
            "lab {}: capacity and the daemons' shaped rates (download)",
            d.scenario.name
        ),
        &all_rates,
    )?);
    files.extend(write_latency_cdf(
        dir,
        &format!("lab {}: loaded latency CDF (UDP probe)", d.scenario.name),
        d.rows
            .iter()
            .map(|r| (r.run.contender.as_str(), r.loaded().samples_ms.as_slice())),
    )?);
    Ok(files)
}

/// Writes the lab's plots and `results.json` into `dir` (the per-run outputs and daemon logs
/// are already in its subdirectories); returns the files written.
pub fn write_lab_out(d: &LabDemo, dir: &Path) -> Result<Vec<PathBuf>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut files = write_lab_plots(d, dir)?;
    files.push(write_results_json(dir, &lab_json(d))?);
    Ok(files)
}
