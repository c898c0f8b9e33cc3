//! The lab comparison: every contender of a lab scenario with a link emulator, run with real
//! kernel TCP in network namespaces (root needed), each run's outputs kept, and each run
//! reduced to a row by `lab::analysis`.

use super::{LabDemo, LabDemoOpts};
use lab::analysis;
use std::path::PathBuf;

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
    let seconds = o.seconds.unwrap_or(30.0);
    if !(5.0..=3600.0).contains(&seconds) {
        return Err(format!("--seconds {seconds}: accepted 5 ..= 3600"));
    }
    let scn = match (&o.link, &o.link_of) {
        (Some(file), _) => crate::lab::link_file(file, o.seconds)?,
        (None, Some((name, seed))) => crate::lab::link_of(name, *seed, o.home_router)?,
        (None, None) => {
            let name = if o.scenario.is_empty() {
                "radio"
            } else {
                o.scenario.as_str()
            };
            lab::scenario::find(name)
                .filter(|s| s.needs_linkem)
                .ok_or_else(|| {
                    let names: Vec<String> = lab::scenario::all()
                        .into_iter()
                        .filter(|s| s.needs_linkem)
                        .map(|s| s.name)
                        .collect();
                    format!(
                        "purple demo --lab: no lab scenario {name:?} with a variable link \
                         (accepted: {})",
                        names.join(", ")
                    )
                })?
        }
    };
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
            crate::sim_cmd::write_outputs(
                &r.summary,
                &crate::lab::run_json(&r, opts.idle_seconds),
                d,
            )?;
        }
        rows.push(
            analysis::demo_row(r, opts.idle_seconds, warm)
                .map_err(|e| format!("{} {}: {e}", scn.name, c.name))?,
        );
    }
    // The simulator's rows beside the lab's, as `purple lab run` prints them.
    let window = crate::lab::LabWindow {
        lead_s: opts.idle_seconds,
        load_s: seconds,
        idle_rtt_ms: analysis::idle_rtt_ms(rows.iter().map(|r: &analysis::DemoRow| &r.run)),
    };
    // Not with a fault injected: the simulator does not model the lab's faults.
    let sim = match &o.link_of {
        _ if !o.faults.is_empty() => None,
        Some((name, seed)) => {
            let mut sc = crate::lab::section_c_link(name, *seed, o.home_router)?;
            sc.workload = scn.workload();
            Some(crate::lab::closed_loop_rows(
                &sc,
                &scn.contenders,
                *seed,
                window,
            )?)
        }
        None => {
            let sc = crate::lab::lab_link_scenario(&scn);
            Some(crate::lab::closed_loop_rows(
                &sc,
                &scn.contenders,
                1,
                window,
            )?)
        }
    };
    Ok(LabDemo {
        scenario: scn,
        seconds,
        idle_s: opts.idle_seconds,
        rows,
        faults: o.faults.clone(),
        sim,
    })
}
