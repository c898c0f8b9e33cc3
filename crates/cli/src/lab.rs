//! `purple lab run SCENARIO`: the seeds' testbeds in network namespaces with real kernel TCP
//! through our bridge (crate `lab`), reported like `purple sim` (same JSON per run, plots,
//! Flent files) with the simulator's figures for the same experiment and the seed's beside them.
//! `purple lab list` names the scenarios.

use std::io::IsTerminal;
use std::path::PathBuf;

use lab::scenario::{self, Contender, ProbeId, Scenario};
use lab::{DelayStage, LabOpts, LabRun};
use serde_json::{json, Value};

/// Options of `purple lab run`.
#[derive(Debug, Default)]
pub struct LabCmdOpts {
    /// Seconds of load per test (default: the scenario's full length).
    pub seconds: Option<f64>,
    /// Print JSON instead of tables.
    pub json: bool,
    /// Write each run's summary.json, plots and Flent file under DIR/RUN/.
    pub out: Option<PathBuf>,
    /// Run in the reference kernel with Linux's qdiscs instead.
    pub kernel: bool,
    /// Only this contender (`cake`, `fq_codel`, `fifo`, or its table name).
    pub qdisc: Option<String>,
    /// Only this test of the scenario.
    pub test: Option<String>,
    /// Run as the reference kernel's guest: Linux qdiscs via tc and netem (hidden; used by
    /// `--kernel`).
    pub guest: bool,
    /// Skip the simulator comparison.
    pub no_sim: bool,
    /// No progress bar.
    pub quiet: bool,
    /// Faults injected into the testbed (`--fault NAME`).
    pub faults: Vec<lab::Fault>,
    /// A cake-autorate checkout: run the real script beside our port and compare.
    pub cake_autorate: Option<PathBuf>,
}

/// `purple lab list`.
pub fn list() -> String {
    let mut out = String::new();
    for s in scenario::all() {
        let tests: Vec<&str> = s.tests.iter().map(|t| t.name).collect();
        let cs: Vec<&str> = s.contenders.iter().map(|c| c.short).collect();
        out += &format!(
            "{:<6} {} [tests: {}; contenders: {}; {} s per test]\n",
            s.name,
            s.title,
            tests.join(", "),
            cs.join(", "),
            s.full_seconds
        );
    }
    out
}

fn pick(s: &Scenario, q: Option<&str>) -> Result<Vec<Contender>, String> {
    match q {
        None => Ok(s.contenders.clone()),
        Some(q) => s
            .contenders
            .iter()
            .find(|c| c.short.eq_ignore_ascii_case(q) || c.name.eq_ignore_ascii_case(q))
            .map(|c| vec![*c])
            .ok_or_else(|| {
                let names: Vec<&str> = s.contenders.iter().map(|c| c.short).collect();
                format!("unknown contender {q:?} (accepted: {})", names.join(", "))
            }),
    }
}

/// What `purple lab run` runs.
#[derive(Debug)]
pub enum Which {
    /// A built-in scenario by name (`purple lab list`).
    Name(String),
    /// The radio's test and contenders on the link a link file describes (`--link FILE`).
    Link(PathBuf),
}

/// The scenario `which` names, built for `seconds` of load (`None`: its full length).
fn scenario_of(which: &Which, seconds: Option<f64>) -> Result<Scenario, String> {
    match which {
        Which::Name(name) => scenario::find(name)
            .ok_or_else(|| format!("unknown lab scenario {name:?} (see `purple lab list`)")),
        Which::Link(file) => {
            let d = sim::link_file::LinkDesc::read(file).map_err(|e| e.to_string())?;
            Scenario::for_link(&d, seconds).map_err(|e| e.to_string())
        }
    }
}

/// Runs `purple lab run NAME` or `purple lab run --link FILE`; returns what to print.
pub fn run(which: &Which, o: &LabCmdOpts) -> Result<String, String> {
    let name = match which {
        Which::Name(n) => n.as_str(),
        Which::Link(_) => "",
    };
    // `radio --kernel --qdisc purple|cake-autorate`: the daemon driving kernel CAKE in the
    // reference kernel (lab::kernel_control), against static kernel CAKE.
    if o.kernel && !o.guest && name == "radio" {
        if let Some(q) = o.qdisc.as_deref() {
            if lab::kernel_control::is_algorithm(q) {
                return kernel_control(&[q.to_string(), "static".into()], o);
            }
        }
    }
    if o.kernel && matches!(which, Which::Link(_)) {
        return Err("--kernel runs the built-in scenarios only, not --link".into());
    }
    let scn = scenario_of(which, o.seconds)?;
    let mut contenders = pick(&scn, o.qdisc.as_deref())?;
    let checkout = match &o.cake_autorate {
        None => None,
        Some(dir) => {
            if o.kernel || o.guest {
                return Err("--cake-autorate runs with our bridge only, not with --kernel".into());
            }
            if !scn.contenders.contains(&scenario::CAKE_AUTORATE) {
                return Err(format!(
                    "--cake-autorate: scenario {} has no cake-autorate contender to compare \
                     with (radio and tmobile have)",
                    scn.name
                ));
            }
            let co = lab::autorate::Checkout::open(dir).map_err(|e| e.to_string())?;
            lab::autorate::ensure_prerequisites().map_err(|e| e.to_string())?;
            if o.qdisc.is_none() {
                contenders = vec![scenario::CAKE_AUTORATE];
            }
            contenders.push(scenario::CAKE_AUTORATE_SCRIPT);
            Some(co)
        }
    };
    let tests: Vec<scenario::Test> = scn
        .tests
        .iter()
        .filter(|t| o.test.as_deref().is_none_or(|n| n == t.name))
        .cloned()
        .collect();
    if tests.is_empty() {
        return Err(format!("scenario {} has no test {:?}", scn.name, o.test));
    }
    let seconds = o.seconds.unwrap_or(scn.full_seconds);
    if !(seconds > 0.0 && seconds <= 3600.0) {
        return Err(format!("--seconds {seconds}: give 0 < S <= 3600"));
    }
    if o.kernel && !lab::kernel::available() {
        return Err(format!(
            "--kernel: the reference kernel tools are not at {} (set PURPLE_REFKERNEL)",
            lab::kernel::refkernel_dir().display()
        ));
    }
    os::netns::install_signal_cleanup().map_err(|e| format!("signal handler: {e}"))?;
    let exe = std::env::current_exe().ok();
    // The link emulator: this binary's `linkem`, else the one of $PURPLE_LINKEM_BIN.
    let stage = match DelayStage::detect(exe.as_deref()) {
        DelayStage::Passthrough => DelayStage::detect(
            std::env::var_os("PURPLE_LINKEM_BIN")
                .map(PathBuf::from)
                .as_deref(),
        ),
        s => s,
    };
    let mut opts = LabOpts::new(seconds, stage);
    opts.faults = o.faults.clone();
    opts.echo_reflectors = checkout.is_some();
    opts.cake_autorate = checkout;
    if o.guest {
        opts.delay = DelayStage::Netem;
        opts.router = lab::RouterStage::Kernel;
    }
    let total = (contenders.len() * tests.len()) as u64;
    let show = !o.quiet && !o.json && std::io::stderr().is_terminal();
    let bar = if show {
        let b = indicatif::ProgressBar::new(total * 1000);
        if let Ok(st) = indicatif::ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {wide_bar} {percent}% {msg}",
        ) {
            b.set_style(st);
        }
        b
    } else {
        indicatif::ProgressBar::hidden()
    };
    let mut runs = Vec::new();
    let mut k = 0u64;
    for c in &contenders {
        for t in &tests {
            bar.set_message(format!("{} {}", c.name, t.name));
            let base = k * 1000;
            let r = lab::run_one(&scn, c, t, &opts, &mut |f| {
                bar.set_position(base + (f * 1000.0) as u64)
            });
            k += 1;
            match r {
                Ok(r) => runs.push(r),
                Err(e) => {
                    bar.finish_and_clear();
                    return Err(format!("{} {} {}: {e}", scn.name, t.name, c.name));
                }
            }
        }
    }
    bar.finish_and_clear();
    let kernel = if o.kernel {
        let exe = exe.ok_or("--kernel: cannot find this binary")?;
        let mut args = vec![
            scn.name.to_string(),
            "--seconds".into(),
            seconds.to_string(),
        ];
        if let Some(q) = &o.qdisc {
            args.extend(["--qdisc".into(), q.clone()]);
        }
        if let Some(t) = &o.test {
            args.extend(["--test".into(), t.clone()]);
        }
        let budget = total as f64 * (seconds + opts.idle_seconds + 5.0) * 2.0 + 120.0;
        if show {
            eprintln!("running the same scenario in the reference kernel (QEMU, TCG)...");
        }
        Some(lab::kernel::run_in_guest(&exe, &args, budget as u64).map_err(|e| e.to_string())?)
    } else {
        None
    };
    let sim = if o.no_sim {
        None
    } else {
        sim_rows(&scn, &contenders, &tests, seconds)
    };
    if let Some(dir) = &o.out {
        for r in &runs {
            let d = dir.join(crate::plots::file_stem(&r.summary.name));
            crate::sim_cmd::write_outputs(&r.summary, &run_json(r), &d)?;
        }
        if !o.json && !o.quiet {
            eprintln!("wrote {} runs to {}", runs.len(), dir.display());
        }
    }
    let laws = match opts.cake_autorate {
        Some(_) => Some(compare_laws(&runs, &opts)?),
        None => None,
    };
    if o.json {
        let v = json!({
            "scenario": scn.name, "seconds": seconds, "backend": "purple",
            "delay_stage": runs.first().map(|r| r.delay_stage.clone()),
            "runs": runs.iter().map(run_json).collect::<Vec<_>>(),
            "sim": sim.as_ref().map(|t| serde_json::to_value(t).unwrap_or(Value::Null)),
            "kernel": kernel,
            "cake_autorate_comparison": laws,
        });
        return Ok(v.to_string() + "\n");
    }
    let mut out = text(&scn, seconds, &runs, sim.as_ref());
    if let Some(c) = &laws {
        out += &lab::autorate::comparison_text(c);
    }
    if let Some(k) = &kernel {
        out += &kernel_text(&scn, k);
    }
    Ok(out)
}

/// `purple lab run radio --kernel --qdisc ALG` (and `purple demo --lab --kernel`): the given
/// modes in the reference kernel with `purple control` on Linux's sch_cake; `--seconds` is the
/// load (default 18, three capacity steps of 6 s); files go to `--out DIR/kernel-control/`, else
/// `$TMPDIR/purple-lab/kernel-control-PID/` (kept).
pub fn kernel_control(modes: &[String], o: &LabCmdOpts) -> Result<String, String> {
    if !lab::kernel::available() {
        return Err(format!(
            "--kernel: the reference kernel tools are not at {} (set PURPLE_REFKERNEL)",
            lab::kernel::refkernel_dir().display()
        ));
    }
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this binary: {e}"))?;
    let mut ko = lab::kernel_control::KernelControlOpts {
        modes: modes.to_vec(),
        ..Default::default()
    };
    if let Some(s) = o.seconds {
        ko.load_s = (s.round().clamp(2.0, 3600.0)) as u32;
        ko.step_s = ko.step_s.min(ko.load_s.saturating_sub(1)).max(1);
    }
    ko.timeout_s = 120 + modes.len() as u64 * (ko.load_s as u64 + ko.idle_s as u64) * 4;
    let dir = match &o.out {
        Some(d) => d.join("kernel-control"),
        None => std::env::temp_dir()
            .join("purple-lab")
            .join(format!("kernel-control-{}", std::process::id())),
    };
    if !o.quiet && !o.json {
        eprintln!(
            "running {} in the reference kernel (QEMU TCG, about {} s)...",
            modes.join(", "),
            20 + modes.len() as u32 * (ko.load_s + ko.idle_s) * 3
        );
    }
    let runs = lab::kernel_control::run(&exe, &ko, &dir).map_err(|e| e.to_string())?;
    if o.json {
        let warm = (ko.step_s as f64 / 3.0).min(2.0);
        let v: Vec<Value> = runs
            .iter()
            .map(|r| {
                let m = lab::kernel_control::summarize(r, ko.load_s as f64, warm);
                json!({
                    "mode": m.mode, "latency_ms": {"mean": m.latency_ms[0],
                    "median": m.latency_ms[1], "p95": m.latency_ms[2], "max": m.latency_ms[3]},
                    "idle_rtt_ms": m.idle_rtt_ms, "download_mbit": m.download_mbit,
                    "mean_rate_mbit": m.mean_rate_mbit,
                    "mean_capacity_mbit": m.mean_capacity_mbit,
                    "reactions_s": m.reactions, "rises": m.rises,
                    "capacity": r.capacity, "readback": r.readback,
                    "actuator_errors": r.actuator_errors,
                    "dir": r.dir.display().to_string(),
                })
            })
            .collect();
        return Ok(json!({"kernel_control": v}).to_string() + "\n");
    }
    Ok(format!(
        "{}\nguest files (decision logs control.jsonl, ping.txt, cap.log, cake.log): {}\n",
        lab::kernel_control::table(&ko, &runs),
        dir.display()
    ))
}

/// The reference kernel's runs (its `--json` output) as a table like ours.
fn kernel_text(scn: &Scenario, k: &Value) -> String {
    let mut t = experiments::Table::new(&[
        "contender",
        "test",
        "up Mbit/s",
        "down Mbit/s",
        "ICMP induced mean / p50 / p99 / peak ms",
        "UDP peak BE / BK / EF ms",
        "seed",
    ]);
    let f = |v: &Value| v.as_f64().unwrap_or(0.0);
    for r in k["runs"].as_array().map(Vec::as_slice).unwrap_or_default() {
        let c = r["contender"].as_str().unwrap_or("-");
        let test = r["test"].as_str().unwrap_or("-");
        let i = &r["induced_ms"]["Ping (ms) ICMP"];
        let udp: Vec<String> = ["BE", "BK", "EF"]
            .iter()
            .map(|d| &r["induced_ms"][format!("Ping (ms) UDP {d}")])
            .filter(|v| !v.is_null())
            .map(|v| format!("{:.0}", f(&v["max"])))
            .collect();
        t.row(vec![
            c.into(),
            test.into(),
            format!("{:.2}", f(&r["up_mbit"])),
            format!("{:.2}", f(&r["down_mbit"])),
            format!(
                "{:.1} / {:.1} / {:.1} / {:.1}",
                f(&i["mean"]),
                f(&i["p50"]),
                f(&i["p99"]),
                f(&i["max"])
            ),
            if udp.is_empty() {
                "-".into()
            } else {
                udp.join(" / ")
            },
            scenario::seed_figure(&scn.name, c, test).into(),
        ]);
    }
    format!(
        "\nreference kernel (Linux 6.1 under QEMU TCG; Linux's qdiscs via tc; {}):\n{}",
        k["delay_stage"].as_str().unwrap_or("-"),
        t.to_text()
    )
}

/// The real cake-autorate's run beside our port's, over the steady part of the load (the
/// goodput window: from `min(S/6, 5)` s into the load to its end).
fn compare_laws(runs: &[LabRun], opts: &LabOpts) -> Result<lab::autorate::LawComparison, String> {
    let find = |c: &Contender| {
        runs.iter()
            .find(|r| r.contender == c.name)
            .ok_or_else(|| format!("no run of {}", c.name))
    };
    let port = find(&scenario::CAKE_AUTORATE)?;
    let script = find(&scenario::CAKE_AUTORATE_SCRIPT)?;
    let from = opts.idle_seconds + lab::analysis::warm_up_s(opts.seconds);
    lab::autorate::compare_laws(port, script, from, opts.idle_seconds + opts.seconds)
        .map_err(|e| e.to_string())
}

/// One run as `purple sim --json` prints a run, plus contender, test and induced latency.
pub fn run_json(r: &LabRun) -> Value {
    let mut v = crate::sim_cmd::summary_json(&r.summary, 1);
    if let Value::Object(m) = &mut v {
        m.insert("contender".into(), json!(r.contender));
        m.insert("test".into(), json!(r.test));
        let ind: serde_json::Map<String, Value> = r
            .induced
            .iter()
            .map(|p| {
                let i = &p.induced;
                (
                    p.name.clone(),
                    json!({"base_ms": i.base_ms, "mean": i.mean, "p50": i.p50, "p99": i.p99,
                        "max": i.max}),
                )
            })
            .collect();
        m.insert("induced_ms".into(), Value::Object(ind));
        m.insert("up_mbit".into(), json!(r.up_mbit));
        m.insert("down_mbit".into(), json!(r.down_mbit));
        m.insert("delay_stage".into(), json!(r.delay_stage));
        m.insert("warnings".into(), json!(r.warnings));
        if let Some(c) = &r.control {
            let pts: Vec<Value> = c
                .points
                .iter()
                .map(|p| json!({"t": p.t, "down_mbit": p.down_mbit, "up_mbit": p.up_mbit}))
                .collect();
            m.insert(
                "rate_trace".into(),
                json!({"controller": c.algorithm, "log": c.log, "points": pts}),
            );
        }
    }
    v
}

/// The simulator's rows for these contenders and tests (same experiment, same testbed).
fn sim_rows(
    scn: &Scenario,
    cs: &[Contender],
    tests: &[scenario::Test],
    seconds: f64,
) -> Option<experiments::Table> {
    let id = scn.sim_id?;
    let e = experiments::find(id)?;
    let rep = (e.run)(&experiments::RunOpts {
        seed: 1,
        time_scale: seconds / scn.full_seconds,
    });
    let mut t = experiments::Table::new(&[]);
    t.headers = rep.table.headers.clone();
    for row in &rep.table.rows {
        let c_ok = cs.iter().any(|c| row.first().is_some_and(|n| n == c.name));
        let t_ok = tests
            .iter()
            .any(|x| row.get(1).is_some_and(|n| n == x.name));
        if c_ok && t_ok {
            t.row(row.clone());
        }
    }
    Some(t)
}

fn text(scn: &Scenario, seconds: f64, runs: &[LabRun], sim: Option<&experiments::Table>) -> String {
    let mut out = format!(
        "{}\nlab: real kernel TCP (CUBIC, ECN) through purple's bridge; {} s load per test; \
         delay stage: {}\n\n",
        scn.title,
        seconds,
        runs.first().map_or("-", |r| r.delay_stage.as_str())
    );
    let mut t = experiments::Table::new(&[
        "contender",
        "test",
        "up Mbit/s",
        "down Mbit/s",
        "ICMP induced mean / p50 / p99 / peak ms",
        "UDP peak BE / BK / EF ms",
        "seed",
    ]);
    for r in runs {
        let i = r.induced(ProbeId::Icmp).unwrap_or_default();
        // BE, BK, EF.
        let udp: Vec<String> = [0, 8, 46]
            .into_iter()
            .filter_map(|dscp| r.induced(ProbeId::Udp { dscp }))
            .map(|i| format!("{:.0}", i.max))
            .collect();
        t.row(vec![
            r.contender.clone(),
            r.test.clone(),
            format!("{:.2}", r.up_mbit),
            format!("{:.2}", r.down_mbit),
            format!("{:.1} / {:.1} / {:.1} / {:.1}", i.mean, i.p50, i.p99, i.max),
            if udp.is_empty() {
                "-".into()
            } else {
                udp.join(" / ")
            },
            scenario::seed_figure(&scn.name, &r.contender, &r.test).into(),
        ]);
    }
    out += &t.to_text();
    for r in runs {
        for w in &r.warnings {
            out += &format!("warning: {} {}: {w}\n", r.contender, r.test);
        }
    }
    if let Some(s) = sim {
        out += &format!(
            "\nsimulator (purple sim report {}, same testbed, {} s):\n",
            scn.sim_id.unwrap_or("-"),
            seconds
        );
        out += &s.to_text();
    }
    out
}
