//! Both comparisons as text: the slides' table, the claims, and for the lab the shaped-rate
//! tracking, the warnings and where each daemon's decision log is.

use super::{Demo, LabDemo};
use experiments::c::table;
use lab::analysis;
use std::fmt::Write as _;

/// Appends each claim as a `[PASS]`/`[FAIL]` line with what we measured under it; `bound` names
/// the claim's limit in the text (`tolerance` for the demo, `target` for the matrix).
pub(crate) fn write_claims(s: &mut String, claims: &[experiments::Claim], bound: &str) {
    for c in claims {
        let _ = writeln!(
            s,
            "[{}] {}\n       ours: {} ({bound}: {})",
            if c.pass { "PASS" } else { "FAIL" },
            c.seed,
            c.ours,
            c.tolerance
        );
    }
}

/// Appends each claim as a Markdown list item (`- PASS: ...` or `- **FAIL**: ...`) with what we
/// measured; `bound` names the claim's limit (`tolerance` or `target`). `|` and newlines in the
/// texts are escaped, so an item never breaks the page.
pub(crate) fn write_claims_md(s: &mut String, claims: &[experiments::Claim], bound: &str) {
    let md = |t: &str| t.replace('|', "\\|").replace('\n', " ");
    for c in claims {
        let _ = writeln!(
            s,
            "- {}: {}; ours: {} ({bound}: {})",
            if c.pass { "PASS" } else { "**FAIL**" },
            md(&c.seed),
            md(&c.ours),
            md(&c.tolerance)
        );
    }
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
    write_claims(&mut s, &d.claims, "tolerance");
    s
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
    for name in d.fault_names() {
        s.push_str(&format!("Fault injected: {name}.\n\n"));
    }
    let mut h = vec!["contender"];
    h.extend(experiments::LATENCY_COLUMNS);
    h.extend(["down Mbit/s", "up Mbit/s", "share", "seed (slides)"]);
    let mut t = experiments::Table::new(&h);
    for r in &d.rows {
        let mut row = vec![r.run.contender.clone()];
        match &r.loaded().latency {
            Some(l) => row.extend(experiments::latency_cells(l)),
            None => {
                row.push("no samples".into());
                let rest = experiments::LATENCY_COLUMNS.len() - 1;
                row.extend(std::iter::repeat_n("-".to_string(), rest));
            }
        }
        row.extend([
            format!("{:.1}", r.loaded().throughput_mbit.down),
            format!("{:.1}", r.loaded().throughput_mbit.up),
            r.share()
                .map_or("-".into(), |s| format!("{:.0}%", 100.0 * s)),
            lab::scenario::seed_figure(&d.scenario.name, &r.run.contender, "").to_string(),
        ]);
        t.row(row);
    }
    s.push_str(&t.to_text());
    let runs: Vec<serde_json::Value> = d
        .rows
        .iter()
        .map(|r| crate::lab::run_json(&r.run, d.idle_s))
        .collect();
    let heading = format!(
        "Shaped-rate tracking, capacity steps {}",
        d.scenario.link.down_words()
    );
    if let Some(t) = crate::lab::controllers_text(&runs, &heading) {
        s.push_str(&t);
    }
    if let Some(sim) = &d.sim {
        let _ = write!(s, "\n{}\n{}", sim.title, sim.table.to_text());
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use lab::analysis::DemoRow;
    use sim::tally::LatencyStats;

    /// A lab demo of two contenders, the second without a loaded-latency sample.
    fn two_rows() -> LabDemo {
        let row = |contender: &str, samples: &[f64]| DemoRow {
            run: lab::LabRun {
                contender: contender.into(),
                test: "radio".into(),
                summary: sim::RunSummary {
                    loaded: Some(sim::LoadedSummary {
                        latency: LatencyStats::of(samples),
                        samples_ms: samples.to_vec(),
                        throughput_mbit: controller::PerDir::new(96.5, 31.25),
                        capacity_mbit: controller::PerDir::new(Some(120.0), None),
                        ..sim::LoadedSummary::default()
                    }),
                    ..sim::RunSummary::default()
                },
                induced: Vec::new(),
                delay_stage: String::new(),
                warnings: Vec::new(),
                namespaces: Vec::new(),
                capacity_down_mbit: Vec::new(),
                control: None,
                host: None,
            },
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
            sim: None,
        }
    }

    /// The simulator's rows come after the lab's table, under their own title; the JSON
    /// carries both.
    #[test]
    fn the_lab_demo_prints_the_simulators_rows_after_its_own() {
        let mut d = two_rows();
        assert!(!lab_text(&d).contains("simulator ("));
        let mut t = experiments::Table::new(&["contender", "role"]);
        t.row(vec!["purple (ours)".into(), "purple".into()]);
        d.sim = Some(crate::lab::SimRows {
            title: "simulator (the same link):".into(),
            table: t,
        });
        let text = lab_text(&d);
        let lab_row = text.find("CAKE static").unwrap();
        let title = text.find("\nsimulator (the same link):\n").unwrap();
        assert!(lab_row < title, "{text}");
        assert!(text[title..].contains("purple (ours)"), "{text}");
        let j = super::super::json::lab_json(&d);
        assert_eq!(j["sim"]["title"], "simulator (the same link):");
        assert_eq!(j["sim"]["table"]["rows"][0][1], "purple");
    }

    /// The lab's JSON publishes each contender's loaded-phase figures in the simulator demo's
    /// form (one renderer, `contender_json`): throughput and capacity both ways, `null` for the
    /// upload capacity the lab does not know and for a latency without samples, and the share
    /// of the download capacity; the table's throughput and share cells read the same part.
    #[test]
    fn the_lab_json_and_table_read_the_runs_loaded_part_as_the_simulators_demo_does() {
        let d = two_rows();
        let j = super::super::json::lab_json(&d);
        let c = &j["contenders"];
        assert_eq!(c[0]["name"], "CAKE static");
        assert_eq!(c[0]["throughput_mbit"]["down"], 96.5);
        assert_eq!(c[0]["throughput_mbit"]["up"], 31.25);
        assert_eq!(c[0]["capacity_mbit"]["down"], 120.0);
        assert!(c[0]["capacity_mbit"]["up"].is_null(), "{c}");
        let share = c[0]["share"].as_f64().unwrap();
        assert!((share - 96.5 / 120.0).abs() < 1e-12, "{share}");
        assert_eq!(c[0]["latency_ms"]["n"], 4);
        assert!(c[1]["latency_ms"].is_null(), "{c}");
        let text = lab_text(&d);
        let row = text.lines().find(|l| l.starts_with("CAKE static")).unwrap();
        assert!(
            row.contains("96.5") && row.contains("31.2") && row.contains("80%"),
            "{row}"
        );
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
