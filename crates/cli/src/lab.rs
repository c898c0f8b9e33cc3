//! `purple lab run SCENARIO` (or `--link FILE`, `--link-of NAME`: the radio's test and
//! contenders on a link file's link or on section C's scenario NAME's): the seeds' testbeds in
//! network namespaces with real kernel TCP through our bridge (crate `lab`), reported like `purple sim` (same JSON per run, plots,
//! Flent files) with the simulator's figures for the same experiment and the seed's beside them.
//! `purple lab list` names the scenarios.

use std::io::IsTerminal;
use std::path::PathBuf;

use controller::Direction;
use lab::scenario::{self, Contender, ProbeId, Scenario};
use lab::{DelayStage, LabOpts, LabRun};
use serde_json::{json, Value};
use sim::link_scenario::LinkScenario;

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
    /// Play the link at this share of its capacity (`--scale F`, 0 < F <= 1).
    pub scale: Option<f64>,
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
    /// Only these contenders, by the matrix's role ids (`--contenders purple,fq-codel`; with
    /// `--link-of`), in this order.
    pub contenders: Vec<String>,
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

/// The contenders of `s` playing the roles `ids` (the matrix's ids, `--contenders`), in that
/// order; fails naming an unknown id (and the known ones) or a role the lab cannot play (and
/// why).
fn by_role(s: &Scenario, ids: &[String]) -> Result<Vec<Contender>, String> {
    let roles = ids
        .iter()
        .map(|id| sim::link_scenario::Role::parse(id))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("--contenders: {e}"))?;
    s.contenders_for(&roles)
        .map_err(|e| format!("--contenders: {e}"))
}

/// What `purple lab run` runs.
#[derive(Debug)]
pub enum Which {
    /// A built-in scenario by name (`purple lab list`).
    Name(String),
    /// The radio's test and contenders on the link a link file describes (`--link FILE`).
    Link(PathBuf),
    /// The radio's test and contenders on the link of section C's scenario `name` for `seed`
    /// (`--link-of NAME --seed N`), deployed as a home router if `home_router`
    /// (`--home-router`).
    LinkOf {
        /// The section C scenario (`experiments::c::scenario::scenario`).
        name: String,
        /// Its seed.
        seed: u64,
        /// Play it deployed as a home router (`LinkScenario::as_home_router`).
        home_router: bool,
    },
}

/// The scenario `which` names, built for `seconds` of load (`None`: its full length).
fn scenario_of(which: &Which, seconds: Option<f64>) -> Result<Scenario, String> {
    match which {
        Which::Name(name) => scenario::find(name)
            .ok_or_else(|| format!("unknown lab scenario {name:?} (see `purple lab list`)")),
        Which::Link(file) => link_file(file, seconds),
        Which::LinkOf {
            name,
            seed,
            home_router,
        } => link_of(name, *seed, *home_router),
    }
}

/// The radio's test and contenders on the link of the link file `file`, run as its `[run]`
/// table says (`purple lab run --link`, `purple demo --lab --link`;
/// [`Scenario::for_link_file`]), for `seconds` of load (`None`: its full length). Errors name
/// the file.
pub fn link_file(file: &std::path::Path, seconds: Option<f64>) -> Result<Scenario, String> {
    let (d, run) = sim::link_file::LinkDesc::read_with_run(file).map_err(|e| e.to_string())?;
    Scenario::for_link_file(&d, &run, seconds).map_err(|e| format!("{}: {e}", file.display()))
}

/// Section C's scenario `name` for `seed` in the lab (`purple lab run --link-of`, `purple demo
/// --lab --link-of`): its link with its rates as section C chose them, over its own length (a
/// run's `--seconds` is the load only), its load (section C's TCP downloads, uploads and VoIP
/// calls, `LinkScenario::workload`, beside the radio test's probes) and the radio's
/// contenders, with section C's deployment, or as a home router if `home_router`
/// (`--home-router`, `LinkScenario::as_home_router`; the link's words then say so). The lab
/// plays the scenario only where that deployment is its own
/// ([`lab::scenario::Scenario::for_link_scenario`]). Fails for an unknown name, naming the
/// known ones, and for a deployment the lab cannot play, naming each part that differs and how
/// to play it as a home router.
pub fn link_of(name: &str, seed: u64, home_router: bool) -> Result<Scenario, String> {
    let c = section_c_link(name, seed, home_router)?;
    Scenario::for_link_scenario(&c, None)
        .map(|s| s.with_workload(c.workload))
        .map_err(|e| format!("--link-of {name}: {e}"))
}

/// Section C's scenario `name` at `seed`, deployed as a home router if `home_router`: the
/// link-level scenario `--link-of` hands to both backends (the lab, [`link_of`], and the
/// simulator's rows beside it, [`closed_loop_rows`]).
pub(crate) fn section_c_link(
    name: &str,
    seed: u64,
    home_router: bool,
) -> Result<LinkScenario, String> {
    let c = crate::demo::link_scenario(&crate::demo::LinkChoice::Scenario(name.into()), seed, None)
        .map_err(|e| format!("--link-of: {e}"))?;
    Ok(if home_router { c.as_home_router() } else { c })
}

/// Runs `purple lab run NAME` or `purple lab run --link FILE`; returns what to print.
pub fn run(which: &Which, o: &LabCmdOpts) -> Result<String, String> {
    let scn = scenario_of(which, o.seconds)?;
    // The reference kernel's guest keeps up with about `KERNEL_TOP_BIT_S` of emulated link:
    // a faster varying link is scaled down for both runs (like for like) unless `--scale`.
    let scale = match o.scale {
        Some(f) => f,
        None if o.kernel && scn.needs_linkem => lab::kernel::kernel_scale(scn.top_bit_s()),
        None => 1.0,
    };
    if o.scale.is_none() && scale != 1.0 && !o.quiet && !o.json {
        eprintln!(
            "--kernel: {} runs at {:.0} Mbit/s at most; both runs play it at x{scale} of its \
             capacity (the reference kernel's guest keeps up with about {} Mbit/s; --scale \
             sets the share)",
            scn.name,
            scn.top_bit_s() as f64 / 1e6,
            lab::kernel::KERNEL_TOP_BIT_S / 1_000_000
        );
    }
    let scn = scn.scaled(scale).map_err(|e| e.to_string())?;
    let mut contenders = if o.contenders.is_empty() {
        pick(&scn, o.qdisc.as_deref())?
    } else {
        by_role(&scn, &o.contenders)?
    };
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
        // A fixed link is netem's delay; a varying one needs this binary's link emulator.
        if !scn.needs_linkem {
            opts.delay = DelayStage::Netem;
        }
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
        let mut args = match which {
            Which::Name(n) => vec![n.clone()],
            Which::LinkOf {
                name,
                seed,
                home_router,
            } => {
                let mut a = vec![
                    "--link-of".into(),
                    name.clone(),
                    "--seed".into(),
                    seed.to_string(),
                ];
                if *home_router {
                    a.push("--home-router".into());
                }
                a
            }
            // `run_in_guest_with` ships the file and names it.
            Which::Link(_) => Vec::new(),
        };
        args.extend(["--seconds".into(), seconds.to_string()]);
        if scale != 1.0 {
            args.extend(["--scale".into(), scale.to_string()]);
        }
        if !o.contenders.is_empty() {
            args.extend(["--contenders".into(), o.contenders.join(",")]);
        }
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
        let link = match which {
            Which::Link(f) => Some(f.as_path()),
            _ => None,
        };
        Some(
            lab::kernel::run_in_guest_with(&exe, &args, link, budget as u64)
                .map_err(|e| e.to_string())?,
        )
    } else {
        None
    };
    let window = LabWindow {
        lead_s: opts.idle_seconds,
        load_s: seconds,
        idle_rtt_ms: lab::analysis::idle_rtt_ms(&runs),
    };
    // A fault the simulator does not model (`--fault`) leaves the closed loop's rows out.
    let sim = match which {
        _ if o.no_sim => None,
        Which::LinkOf { .. } | Which::Link(_) | Which::Name(_) if !o.faults.is_empty() => {
            sim_rows(&scn, &contenders, &tests, seconds)
        }
        Which::LinkOf {
            name,
            seed,
            home_router,
        } => {
            let mut sc = section_c_link(name, *seed, *home_router)?;
            sc.link = sc
                .link
                .scaled(scale, "--scale")
                .map_err(|e| e.to_string())?;
            sc.workload = scn.workload();
            Some(closed_loop_rows(&sc, &contenders, *seed, window)?)
        }
        // A scaled link is simulated as played (its published experiment is not scaled).
        _ if scn.needs_linkem && (scn.sim_id.is_none() || scale != 1.0) => {
            let sc = lab_link_scenario(&scn);
            Some(closed_loop_rows(&sc, &contenders, 1, window)?)
        }
        _ if scale != 1.0 => None,
        _ => sim_rows(&scn, &contenders, &tests, seconds),
    };
    if let Some(dir) = &o.out {
        for r in &runs {
            let d = dir.join(crate::plots::file_stem(&r.summary.name));
            crate::sim_cmd::write_outputs(&r.summary, &run_json(r, opts.idle_seconds), &d)?;
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
            "runs": runs.iter().map(|r| run_json(r, opts.idle_seconds)).collect::<Vec<_>>(),
            "sim": sim.as_ref().map(|t| serde_json::to_value(&t.table).unwrap_or(Value::Null)),
            "sim_title": sim.as_ref().map(|t| t.title.clone()),
            "kernel": kernel,
            "cake_autorate_comparison": laws,
        });
        return Ok(v.to_string() + "\n");
    }
    let mut out = text(&scn, seconds, &runs, opts.idle_seconds, sim.as_ref());
    if let Some(c) = &laws {
        out += &lab::autorate::comparison_text(c);
    }
    if let Some(k) = &kernel {
        out += &kernel_text(&scn, k);
    }
    Ok(out)
}

/// How each controlled run of `runs` (each as [`run_json`] prints it, here, in `purple demo
/// --lab` or in the reference kernel's guest) drove its shaper: its download rate against the
/// link's capacity during the load, its actuator's errors, and the rates read back from the
/// shaper itself against those it applied; under `heading`, with a line for each failed or
/// mismatched read-back. `None` when no run had a controller.
pub(crate) fn controllers_text(runs: &[Value], heading: &str) -> Option<String> {
    let mut t = experiments::Table::new(&[
        "controller",
        "decisions",
        "mean rate Mbit/s",
        "at/below capacity",
        "drops followed",
        "reaction median / max s",
        "actuator errors",
        "read back: applied / read",
    ]);
    let secs = |v: &Value| v.as_f64().map_or("-".to_string(), |x| format!("{x:.1}"));
    for r in runs {
        let rt = &r["rate_trace"];
        if rt.is_null() {
            continue;
        }
        let k = &rt["tracking"];
        let (rate, below, drops, reaction) = if k.is_null() {
            ("-".into(), "-".into(), "-".into(), "-".into())
        } else {
            (
                secs(&k["mean_rate_mbit"]),
                format!(
                    "{:.0}%",
                    k["below_capacity"].as_f64().unwrap_or(f64::NAN) * 100.0
                ),
                format!("{} of {}", k["drops_followed"], k["drops"]),
                format!(
                    "{} / {}",
                    secs(&k["reaction_median_s"]),
                    secs(&k["reaction_max_s"])
                ),
            )
        };
        let rb = &rt["readback"];
        let read = if rb.is_null() {
            "-".to_string()
        } else {
            let mut s = if rb["samples"].as_u64() == Some(0) {
                // Every reading fell before the first applied rate's lag: a count of none is
                // not a check that passed.
                format!("none judged ({} read)", rb["unjudged"])
            } else {
                format!("{} / {}", rb["agree"], rb["samples"])
            };
            if rb["errors"].as_u64().unwrap_or(0) > 0 {
                s += &format!(" ({} failed)", rb["errors"]);
            }
            s
        };
        t.row(vec![
            r["contender"].as_str().unwrap_or("-").into(),
            rt["points"].as_array().map_or(0, Vec::len).to_string(),
            rate,
            below,
            drops,
            reaction,
            rt["actuator_errors"]
                .as_u64()
                .map_or("-".to_string(), |n| n.to_string()),
            read,
        ]);
    }
    if t.rows.is_empty() {
        return None;
    }
    let mut s = format!(
        "\n{heading} (download; reaction: from a capacity drop until the rate is at or below \
         it; read back: the shaper's own rate every {} ms, equal to one the controller applied \
         within the {} s before):\n",
        lab::readback::READ_EVERY.as_millis(),
        lab::analysis::READBACK_LAG_S
    );
    s += &t.to_text();
    for r in runs {
        let rb = &r["rate_trace"]["readback"];
        if let Some(e) = rb["first_error"].as_str() {
            s += &format!(
                "read back: {}: {e}\n",
                r["contender"].as_str().unwrap_or("-")
            );
        }
        if let Some(m) = rb["first_mismatch"].as_array() {
            s += &format!(
                "read back: {}: at {} s the shaper held {}, the controller had applied {} Mbit/s\n",
                r["contender"].as_str().unwrap_or("-"),
                secs(&m[0]),
                m[1].as_f64()
                    .map_or("no rate (unlimited)".to_string(), |x| format!("{x} Mbit/s")),
                m[2]
            );
        }
    }
    Some(s)
}

/// The contenders' table of `runs` (each as [`run_json`] prints it, here or in the reference
/// kernel's guest): goodput each way, the ICMP probe's induced latency, the UDP probes' peaks,
/// and the seed's figure of `scn` where there is one.
fn contenders_table(scn: &Scenario, runs: &[Value]) -> experiments::Table {
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
    for r in runs {
        let c = r["contender"].as_str().unwrap_or("-");
        let test = r["test"].as_str().unwrap_or("-");
        let i = &r["induced_ms"][ProbeId::Icmp.label()];
        // A run during which the host stalled carries a mark in the table itself, not only in
        // the warning below it ([`HOST_MARK_NOTE`]).
        let mark = if host_stalled(r) { " *" } else { "" };
        // BE, BK, EF.
        let udp: Vec<String> = [0, 8, 46]
            .into_iter()
            .map(|dscp| &r["induced_ms"][ProbeId::Udp { dscp }.label()])
            .filter(|v| !v.is_null())
            .map(|v| format!("{:.0}", f(&v["max"])))
            .collect();
        t.row(vec![
            format!("{c}{mark}"),
            test.into(),
            format!("{:.2}", f(&r["up_mbit"])),
            format!("{:.2}", f(&r["down_mbit"])),
            // A scenario without an ICMP probe (starlink) has no such figure: "-", not 0.
            if i.is_null() {
                "-".into()
            } else {
                format!(
                    "{:.1} / {:.1} / {:.1} / {:.1}",
                    f(&i["mean"]),
                    f(&i["p50"]),
                    f(&i["p99"]),
                    f(&i["max"])
                )
            },
            if udp.is_empty() {
                "-".into()
            } else {
                udp.join(" / ")
            },
            scenario::seed_figure(&scn.name, c, test).into(),
        ]);
    }
    t
}

/// The note under a contenders' table with a run marked `*` by [`contenders_table`].
const HOST_MARK_NOTE: &str =
    "*: the host stalled during this run (see its warning): its latency figures include the \
     host's own delays, and under heavy hypervisor steal its throughput is the host's too\n";

/// Whether the host stalled during run `r` (as [`run_json`] prints it): the table marks it.
fn host_stalled(r: &Value) -> bool {
    r["host"]["stalls"].as_u64().unwrap_or(0) > 0
}

/// `HOST_MARK_NOTE` when any of `runs` (as [`run_json`] prints them) is marked.
fn host_mark_note(runs: &[Value]) -> &'static str {
    if runs.iter().any(host_stalled) {
        HOST_MARK_NOTE
    } else {
        ""
    }
}

/// The reference kernel's runs (its `--json` output) as a table like ours.
fn kernel_text(scn: &Scenario, k: &Value) -> String {
    let runs = k["runs"].as_array().map(Vec::as_slice).unwrap_or_default();
    let t = contenders_table(scn, runs);
    let mut s = format!(
        "\nreference kernel (Linux 6.1 under QEMU TCG; Linux's qdiscs via tc; {}):\n{}{}",
        k["delay_stage"].as_str().unwrap_or("-"),
        t.to_text(),
        host_mark_note(runs)
    );
    let runs = k["runs"].as_array().map(Vec::as_slice).unwrap_or_default();
    if let Some(d) = controllers_text(runs, "reference kernel's controllers") {
        s += &d;
    }
    s
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

/// One run as `purple sim --json` prints a run, plus contender, test and induced latency; a
/// controlled run's `rate_trace` also carries how its download rate tracked the capacity from
/// the load's start at `load_at_s` on the run's clock (`tracking`), and whether the rates read
/// back from the shaper were ones it applied (`readback`).
pub fn run_json(r: &LabRun, load_at_s: f64) -> Value {
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
        m.insert("up_mbit".into(), json!(r.goodput_mbit(Direction::Up)));
        m.insert("down_mbit".into(), json!(r.goodput_mbit(Direction::Down)));
        m.insert("delay_stage".into(), json!(r.delay_stage));
        m.insert("warnings".into(), json!(r.warnings));
        if let Some(h) = &r.host {
            m.insert(
                "host".into(),
                json!({"stalls": h.stalls, "max_ms": h.max_ms, "p99_ms": h.p99_ms,
                    "steal_share": h.steal_share}),
            );
        }
        if let Some(c) = &r.control {
            let pts: Vec<Value> = c
                .points
                .iter()
                .map(|p| json!({"t": p.t, "down_mbit": p.down_mbit, "up_mbit": p.up_mbit}))
                .collect();
            m.insert(
                "rate_trace".into(),
                json!({"controller": c.algorithm, "log": c.log, "points": pts,
                    "actuator_errors": c.actuator_errors,
                    "tracking": lab::analysis::tracking(r, load_at_s),
                    "readback": lab::analysis::readback_check(c)}),
            );
        }
    }
    v
}

/// The simulator's figures printed beside the lab's: what they are, and the table.
#[derive(Debug)]
pub(crate) struct SimRows {
    /// The line above the table (and `sim_title` in the JSON).
    pub(crate) title: String,
    /// The rows.
    pub(crate) table: experiments::Table,
}

/// `purple lab run`'s simulator rows for a lab scenario on a variable link (one with the link
/// emulator and no section B or C experiment of its own: radio, tmobile, `--link FILE`,
/// `--link-of NAME`): section C's closed loop on the same link-level scenario `sc` (the same
/// link, deployment and bulk TCP as the lab's test, [`Scenario::workload`]; `seed`), measured over the lab's window of the link (`window`: from
/// the load's start after the lab's warm-up to its end; the simulator's bulk TCP starts with
/// the link; past the link's length the lab loops the link, and the simulator loops a trace
/// but holds a schedule's last rate), with the controllers configured from `sc`'s link rates
/// (range and start rate, as the lab's daemons are), for the role each lab contender in `cs` plays ([`scenario::role_of`]; those playing
/// none, such as b1's shaped HTB+pfifo, have no row) and the one-interval-late oracle as the reference.
/// Latency is the simulator's probe's loaded round trip minus the path's idle one
/// ([`experiments::c::closed_loop::LoopResult::latency`]), as the lab's "induced" figures are.
/// Fails only when a run measured no latency sample, naming the contender and the probe.
pub(crate) fn closed_loop_rows(
    sc: &LinkScenario,
    cs: &[Contender],
    seed: u64,
    window: LabWindow,
) -> Result<SimRows, String> {
    use experiments::c::closed_loop::{self, LoopSpec};
    use experiments::c::matrix::{role_contender, Role};
    let mut roles: Vec<Role> = Vec::new();
    for r in cs
        .iter()
        .filter_map(scenario::role_of)
        .chain([Role::OracleLate])
    {
        if !roles.contains(&r) {
            roles.push(r);
        }
    }
    let plays: Vec<(Role, closed_loop::Contender)> = roles
        .iter()
        .filter_map(|&r| Some((r, role_contender(r, sc)?)))
        .collect();
    // The lab's window of the link: its load starts after its idle probing and is measured
    // after its warm-up (`lab::analysis::warm_up_s`).
    let warm = window.lead_s + lab::analysis::warm_up_s(window.load_s);
    let end = window.lead_s + window.load_s;
    // The path beyond the link's delays that gives the lab's idle round trip.
    let links_ms = (sc.link.down.delay + sc.link.up.delay).as_millis_f64();
    let path = window
        .idle_rtt_ms
        .map(|rtt| qdisc::Duration::from_secs_f64((rtt - links_ms).max(0.0) / 1e3));
    let mut sc = sc.clone();
    sc.path_rtt = path;
    let specs: Vec<LoopSpec> = plays
        .iter()
        .map(|&(_, c)| {
            let mut spec = LoopSpec::new(sc.clone(), c, seed);
            spec.secs = end;
            spec.warmup = warm;
            spec
        })
        .collect();
    let results = experiments::c::run_specs(&specs).map_err(|e| e.to_string())?;
    let mut t = experiments::Table::new(&[
        "contender",
        "role",
        "up Mbit/s",
        "down Mbit/s",
        "down share",
        "induced mean / p50 / p99 / peak ms",
        "idle RTT ms",
    ]);
    for ((role, _), r) in plays.iter().zip(&results) {
        let l = r.latency();
        let thr = r.throughput();
        t.row(vec![
            r.name().to_string(),
            role.id().to_string(),
            format!("{:.2}", thr.up),
            format!("{:.2}", thr.down),
            format!("{:.3}", r.share()),
            format!(
                "{:.1} / {:.1} / {:.1} / {:.1}",
                l.mean, l.median, l.p99, l.max
            ),
            format!("{:.1}", r.base_rtt_ms()),
        ]);
    }
    let path_words = match window.idle_rtt_ms {
        Some(rtt) => format!("its path set to the lab's idle round trip of {rtt:.1} ms"),
        None => "its path's idle round trip its own, the lab measured none".to_string(),
    };
    Ok(SimRows {
        title: format!(
            "simulator (section C's closed loop on the same link and deployment with {}, seed \
             {seed}, measured over the lab's window of the link, {warm:.1} to {end:.1} s; \
             {path_words}):",
            sc.workload
        ),
        table: t,
    })
}

/// Where a lab run's load lies on its link's timeline, for [`closed_loop_rows`]: the link
/// starts with the testbed, the load after `lead_s` of idle probing, for `load_s`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LabWindow {
    /// Seconds of idle probing before the load (`LabOpts::idle_seconds`).
    pub(crate) lead_s: f64,
    /// Seconds of load (`--seconds`).
    pub(crate) load_s: f64,
    /// The lab's idle round trip, ms (`lab::analysis::idle_rtt_ms` of its runs): the
    /// simulator's path beyond the link's delays is set so that its idle round trip is the
    /// same (at least its edge links' 0.4 ms). `None`: the simulator's own path (8.4 ms).
    pub(crate) idle_rtt_ms: Option<f64>,
}

/// A lab scenario's link as the simulator plays it, for [`closed_loop_rows`]: the lab's
/// link-level scenario ([`Scenario::link_scenario`]: its link with its rates, deployed as the
/// lab deploys every link) with the link sampled as section C samples a link
/// (`experiments::c::scenario::played`). Static CAKE runs at the lab's static rates and the
/// controllers are configured as the lab configures its daemons, because both read the same
/// `LinkRates` ([`Scenario::control_range`], the closed loop's `LoopSpec::config`); the bulk
/// TCP is the lab's test's ([`Scenario::workload`]).
pub(crate) fn lab_link_scenario(scn: &Scenario) -> LinkScenario {
    let lab = scn.link_scenario();
    let mut sc = experiments::c::scenario::played(lab.link);
    sc.deployment = lab.deployment;
    sc.workload = lab.workload;
    sc
}

/// The simulator's rows for these contenders and tests (same experiment, same testbed).
fn sim_rows(
    scn: &Scenario,
    cs: &[Contender],
    tests: &[scenario::Test],
    seconds: f64,
) -> Option<SimRows> {
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
    Some(SimRows {
        title: format!("simulator (purple sim report {id}, same testbed, {seconds} s):"),
        table: t,
    })
}

fn text(
    scn: &Scenario,
    seconds: f64,
    runs: &[LabRun],
    load_at_s: f64,
    sim: Option<&SimRows>,
) -> String {
    let mut out = format!(
        "{}\nlab: real kernel TCP (CUBIC, ECN) through purple's bridge; {} s load per test; \
         delay stage: {}\n\n",
        scn.title,
        seconds,
        runs.first().map_or("-", |r| r.delay_stage.as_str())
    );
    let js: Vec<Value> = runs.iter().map(|r| run_json(r, load_at_s)).collect();
    out += &contenders_table(scn, &js).to_text();
    out += host_mark_note(&js);
    for r in runs {
        for w in &r.warnings {
            out += &format!("warning: {} {}: {w}\n", r.contender, r.test);
        }
    }
    if let Some(d) = controllers_text(&js, "controllers") {
        out += &d;
    }
    if let Some(s) = sim {
        out += &format!("\n{}\n", s.title);
        out += &s.table.to_text();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use experiments::c::scenario as c;
    use lab::link::{trace_bins, DirCapacity};
    use qdisc::{Duration, Instant};

    /// One opportunity of a mahimahi trace in a 100 ms bin, bit/s.
    const OPPORTUNITY_BIT_S: f64 = 1500.0 * 8.0 * 10.0;

    #[test]
    fn the_controllers_table_shows_tracking_and_read_back_and_names_a_mismatch() {
        let runs = [
            json!({"contender": "CAKE static", "test": "t"}),
            json!({"contender": "CAKE + PURPLE", "test": "t", "rate_trace": {
                "points": [{}, {}, {}], "actuator_errors": 0,
                "tracking": {"mean_rate_mbit": 9.46, "below_capacity": 0.855, "drops": 2,
                    "drops_followed": 2, "reaction_median_s": 0.1, "reaction_max_s": 0.3},
                "readback": {"samples": 45, "agree": 44, "errors": 1,
                    "first_error": "netlink: timed out",
                    "first_mismatch": [12.5, 8.0, 6.5]}}}),
        ];
        let t = controllers_text(&runs, "controllers").expect("one controlled run");
        assert!(t.starts_with("\ncontrollers (download;"), "{t}");
        let row = t
            .lines()
            .find(|l| l.starts_with("CAKE + PURPLE"))
            .expect("its row");
        for cell in [
            "3",
            "9.5",
            "86%",
            "2 of 2",
            "0.1 / 0.3",
            "44 / 45 (1 failed)",
        ] {
            assert!(row.contains(cell), "{cell:?} in {row}");
        }
        assert!(
            !t.contains("CAKE static"),
            "no row without a controller: {t}"
        );
        assert!(
            t.contains("read back: CAKE + PURPLE: netlink: timed out"),
            "{t}"
        );
        assert!(
            t.contains("at 12.5 s the shaper held 8 Mbit/s, the controller had applied 6.5 Mbit/s"),
            "{t}"
        );
        // Readings that all fell in the unjudged first second say so, not "0 / 0".
        let early = [json!({"contender": "c", "rate_trace": {"points": [{}],
            "readback": {"samples": 0, "unjudged": 2, "agree": 0, "errors": 0}}})];
        let t = controllers_text(&early, "c").expect("a controlled run");
        assert!(
            t.contains("none judged (2 read)") && !t.contains("0 / 0"),
            "{t}"
        );
        // Without any controller there is no table; a run without tracking shows dashes.
        assert_eq!(controllers_text(&runs[..1], "controllers"), None);
        let bare = [json!({"contender": "x", "rate_trace": {"points": []}})];
        let t = controllers_text(&bare, "c").expect("a controlled run");
        let row = t.lines().last().unwrap_or_default();
        assert!(row.starts_with('x') && !row.contains("null"), "{t}");
        assert_eq!(
            row.split_whitespace().filter(|c| *c == "-").count(),
            6,
            "{row}"
        );
    }

    #[test]
    fn a_run_during_which_the_host_stalled_is_marked_in_the_table_itself() {
        let scn = scenario::find("radio").expect("radio");
        let run = |c: &str, stalls: u64| {
            json!({"contender": c, "test": "rrul_voip", "up_mbit": 1.0, "down_mbit": 9.0,
                "induced_ms": {}, "host": {"stalls": stalls, "max_ms": 40.0}})
        };
        let runs = [run("quiet", 0), run("stalled", 3)];
        let t = contenders_table(&scn, &runs).to_text();
        let row = |c: &str| t.lines().find(|l| l.starts_with(c)).unwrap_or_default();
        assert!(row("stalled").starts_with("stalled *"), "{t}");
        assert!(!row("quiet").contains('*'), "{t}");
        assert_eq!(host_mark_note(&runs), HOST_MARK_NOTE);
        assert_eq!(host_mark_note(&runs[..1]), "");
    }

    #[test]
    fn a_probe_the_scenario_does_not_run_is_a_dash_in_the_kernel_table_not_zero() {
        let scn = scenario::find("starlink").expect("starlink");
        let k = json!({"delay_stage": "purple linkem", "runs": [{
            "contender": "CAKE + PURPLE (purple control)", "test": "download",
            "up_mbit": 1.36, "down_mbit": 5.96,
            "induced_ms": {"Ping (ms) UDP BE": {"mean": 9.0, "p50": 8.0, "p99": 30.0, "max": 67.0}},
        }]});
        let t = kernel_text(&scn, &k);
        let row = t
            .lines()
            .find(|l| l.starts_with("CAKE + PURPLE"))
            .expect("its row");
        assert!(!row.contains("0.0 / 0.0"), "{row}");
        assert!(row.contains(" - ") && row.contains(" 67 "), "{row}");
    }

    /// `--link-of NAME` (and `--home-router`) as `purple lab run` builds it.
    fn link_of_scenario(name: &str, seed: u64, home_router: bool) -> Result<Scenario, String> {
        let which = Which::LinkOf {
            name: name.into(),
            seed,
            home_router,
        };
        scenario_of(&which, None)
    }

    #[test]
    fn link_of_plays_section_cs_load_beside_the_radio_tests_probes() {
        let c = section_c_link("wisp", 1, true).expect("wisp");
        let s = link_of("wisp", 1, true).expect("played");
        assert_eq!(s.workload(), c.workload);
        assert_eq!((c.workload.downloads, c.workload.uploads), (4, 2));
        // The probes stay the radio test's, first.
        let radio = scenario::find("radio").expect("radio");
        let probes = |s: &Scenario| -> Vec<String> {
            s.tests[0]
                .flows
                .iter()
                .filter(|f| {
                    matches!(
                        f.kind,
                        scenario::FlowKind::Icmp | scenario::FlowKind::UdpPing
                    )
                })
                .map(|f| f.name.to_string())
                .collect()
        };
        assert_eq!(probes(&s), probes(&radio));
        assert!(!probes(&s).is_empty());
    }

    #[test]
    fn link_of_prints_the_simulators_rows_for_the_roles_the_lab_played_and_the_late_oracle() {
        let mut sc = section_c_link("wisp", 2, true).expect("wisp");
        // With the radio test's load (a link file without `[run]` plays it; `--link-of` now
        // plays section C's): the rows run whatever load the lab ran.
        sc.workload = sim::link_scenario::Workload {
            downloads: 2,
            uploads: 1,
            voip: 1,
        };
        let cs = [
            scenario::CAKE_PURPLE,
            scenario::FIFO,
            scenario::FQ_CODEL_UNSHAPED,
            scenario::FIFO_UNSHAPED,
            scenario::CAKE_PURPLE,
        ];
        let window = LabWindow {
            lead_s: 1.0,
            load_s: 6.0,
            idle_rtt_ms: None,
        };
        let rows = closed_loop_rows(&sc, &cs, 2, window).expect("measured");
        assert!(
            rows.title.contains(
                "with 2 TCP downloads, 1 upload, 1 VoIP call, seed 2, measured over the lab's \
                 window of the link, 2.0 to 7.0 s; its path's idle round trip its own, the lab \
                 measured none"
            ),
            "{}",
            rows.title
        );
        // b1's shaped HTB+pfifo plays no role, the radio's unshaped pfifo the FIFO; a role is
        // run once; the late oracle closes the table.
        let roles: Vec<&str> = rows.table.rows.iter().map(|r| r[1].as_str()).collect();
        assert_eq!(roles, ["purple", "fq-codel", "fifo", "oracle-late"]);
        // The rows are section C's closed loop on this scenario: the same figures as a run of
        // its purple contender on it, deployed as a home router.
        assert!(sc.shaper_at_router() && sc.throughput_from_shaper());
        let mut spec = experiments::c::closed_loop::LoopSpec::new(
            sc.clone(),
            experiments::c::closed_loop::Contender::Purple,
            2,
        );
        spec.secs = 7.0;
        spec.warmup = 2.0;
        let own = [experiments::c::closed_loop::run(&spec).expect("measured")];
        let purple = &rows.table.rows[0];
        assert_eq!(purple[3], format!("{:.2}", own[0].throughput().down));
        assert_eq!(purple[4], format!("{:.3}", own[0].share()));
        let l = own[0].latency();
        assert_eq!(
            purple[5],
            format!(
                "{:.1} / {:.1} / {:.1} / {:.1}",
                l.mean, l.median, l.p99, l.max
            )
        );
        // Unshaped FQ-CoDel and the FIFO fill the radio's 300-packet buffer: more delay than
        // the oracle.
        let p99 = |row: &Vec<String>| -> f64 {
            row[5]
                .split(" / ")
                .nth(2)
                .and_then(|x| x.parse().ok())
                .expect("p99")
        };
        for unshaped in [1, 2] {
            assert!(
                p99(&rows.table.rows[unshaped]) > p99(&rows.table.rows[3]),
                "{:?}",
                rows.table.rows
            );
        }
    }

    #[test]
    fn a_lab_scenario_is_simulated_with_the_labs_link_rates_daemon_range_and_deployment() {
        let scn = scenario::find("radio").expect("radio");
        let sc = lab_link_scenario(&scn);
        let config = experiments::c::closed_loop::LoopSpec::new(
            sc.clone(),
            experiments::c::closed_loop::Contender::Purple,
            1,
        )
        .config();
        assert_eq!(sc.deployment, scenario::DEPLOYMENT);
        assert_eq!(sc.link.name, scn.link.desc().name);
        // The lab's bulk TCP (rrul_voip: two downloads, one upload), not section C's 4 and 2.
        assert_eq!(
            sc.workload,
            sim::link_scenario::Workload {
                downloads: 2,
                uploads: 1,
                voip: 1
            }
        );
        // Static CAKE at the lab's static rates, the controllers as the lab's daemons.
        assert_eq!(
            sc.statics()[0],
            (scn.down_bit_s() as f64 / 1e6, scn.up_bit_s() as f64 / 1e6)
        );
        let (down, up) = scn.control_range();
        let mbit = |r: controller::Rate| r.mbit();
        assert!(
            (mbit(config.min.down) - down.min).abs() < 1e-6,
            "{config:?}"
        );
        assert!(
            (mbit(config.base.down) - down.base).abs() < 1e-6,
            "{config:?}"
        );
        assert!(
            (mbit(config.max.down) - down.max).abs() < 1e-6,
            "{config:?}"
        );
        assert!((mbit(config.base.up) - up.base).abs() < 1e-6, "{config:?}");
        assert!((mbit(config.max.up) - up.max).abs() < 1e-6, "{config:?}");
        // The rows: static CAKE at those rates, purple, and the late oracle; b1's shaped
        // HTB+pfifo has none.
        let cs = [scenario::CAKE, scenario::CAKE_PURPLE, scenario::FIFO];
        // At the lab's idle round trip: the link's 5 ms each way and 0.7 ms of the lab's own.
        let window = LabWindow {
            lead_s: 1.0,
            load_s: 4.0,
            idle_rtt_ms: Some(10.7),
        };
        let rows = closed_loop_rows(&sc, &cs, 1, window).expect("measured");
        assert!(
            rows.title
                .contains("its path set to the lab's idle round trip of 10.7 ms"),
            "{}",
            rows.title
        );
        for row in &rows.table.rows {
            assert_eq!(row[6], "10.7", "{row:?}");
        }
        let roles: Vec<&str> = rows.table.rows.iter().map(|r| r[1].as_str()).collect();
        assert_eq!(roles, ["static-safe", "purple", "oracle-late"]);
        assert_eq!(rows.table.rows[0][0], "CAKE static 100/50M");
        // The static CAKE shapes the download to its 100 Mbit/s on a 130/80 Mbit/s link (within
        // the measurement window's edges).
        let down: f64 = rows.table.rows[0][3].parse().expect("Mbit/s");
        assert!((70.0..=101.0).contains(&down), "{down}");
    }

    #[test]
    fn link_of_refuses_a_deployment_the_lab_cannot_play_naming_each_part() {
        let refused = |name: &str, home_router: bool| {
            link_of_scenario(name, 1, home_router).expect_err("refused by the lab")
        };
        assert_eq!(
            refused("radio", false),
            "--link-of radio: radio is deployed as the lab cannot play it: download shaped in \
             front of the radio, throughput read from the radio's delivered bytes (the lab: \
             download shaped at the router after the radio, throughput read from CAKE's sent \
             bytes and, for a download shaped at the router, the WAN device's received bytes); \
             --home-router plays the link as a home router, as the lab deploys every link"
        );
        let e = refused("starlink-no-probes", false);
        assert!(
            e.starts_with(
                "--link-of starlink-no-probes: starlink-no-probes is deployed as the lab cannot \
                 play it: throughput read from the radio's delivered bytes, every probe lost \
                 (the lab: throughput read from CAKE's sent bytes and, for a download shaped at \
                 the router, the WAN device's received bytes, probes queued with the data and \
                 answered); --home-router plays the link as a home router, as the lab \
                 deploys every link, but keeps its probe path; the lab plays no probe path but \
                 its own: its --fault icmp-apart and --fault no-icmp-echo are near"
            ),
            "{e}"
        );
        // As a home router the probe path is all that differs, and still refused.
        let e = refused("starlink-icmp-apart", true);
        assert!(
            e.contains("deployed as the lab cannot play it: ICMP served apart from data")
                && !e.contains("--home-router"),
            "{e}"
        );
        // Deployed as the lab deploys: it plays with or without the flag, the same.
        let router = link_of_scenario("tmobile-lte-router", 1, false).expect("a home router");
        let flagged = link_of_scenario("tmobile-lte-router", 1, true).expect("a home router");
        assert_eq!(router.title, flagged.title);
        assert_eq!(router.link, flagged.link);
        // With the flag a link deployed otherwise plays, its words saying how.
        let radio = link_of_scenario("radio", 1, true).expect("radio as a home router");
        assert!(
            radio.title.contains("deployed as a home router"),
            "{}",
            radio.title
        );
    }

    #[test]
    fn every_section_c_link_plays_in_the_lab_with_its_capacity_every_100_ms() {
        let names = c::NAMES
            .iter()
            .chain(c::PASSIVE_NAMES)
            .chain(c::HOLDOUT_NAMES);
        for name in names {
            for seed in [1, 2] {
                let own = c::scenario(name, seed).expect("a section C scenario");
                let which = |home_router| Which::LinkOf {
                    name: name.to_string(),
                    seed,
                    home_router,
                };
                // The lab plays a scenario deployed as it deploys (a home router) and refuses
                // any other; `--home-router` deploys it so, keeping its probe path.
                let plain = scenario_of(&which(false), Some(7.0));
                assert_eq!(
                    plain.is_ok(),
                    own.deployment == lab::scenario::DEPLOYMENT,
                    "{name}: {:?}",
                    plain.as_ref().map(|s| &s.title)
                );
                let want = own.as_home_router();
                let played = scenario_of(&which(true), Some(7.0));
                if want.probe_path() != lab::scenario::DEPLOYMENT.probes {
                    let e = played.expect_err("a probe path the lab has not");
                    assert!(e.contains(&want.probe_path().to_string()), "{name}: {e}");
                    continue;
                }
                // `--seconds` is the load only: the link and its rates stay the section's.
                let s = played.expect("plays in the lab as a home router");
                if let Ok(p) = plain {
                    assert_eq!((&p.title, &p.link), (&s.title, &s.link), "{name}");
                }
                let d = s.link.desc();
                assert_eq!(d, &want.link, "{name} {seed}");
                assert_eq!(s.name, *name);
                assert_eq!(s.full_seconds, want.link.secs);
                assert_eq!(s.deployment(), want.deployment);
                let words = s.link.down_words();
                assert!(words.ends_with(&format!(" {name}")), "{name}: {words}");
                let (down, up) = s.control_range();
                let bits = |m: f64| (m * 1e6).round() as u64;
                assert_eq!(
                    (s.down_bit_s(), s.up_bit_s()),
                    (bits(d.down.rates.safe), bits(d.up.rates.safe))
                );
                assert_eq!((down.min, down.max), (d.down.rates.lo, d.down.rates.hi));
                assert_eq!((up.min, up.max), (d.up.rates.lo, d.up.rates.hi));
                // What `purple linkem` is handed: per 100 ms, a trace's opportunities exactly
                // (every whole bin of its loop); a series' rate to within the two
                // opportunities its 50 ms slots' rounding leaves out.
                let dir = std::path::Path::new("/t");
                let (args, files) = s
                    .link
                    .linkem_args(&dir.join("up"), &dir.join("down"))
                    .expect("writes");
                assert!(
                    args.windows(2)
                        .any(|w| w[0] == "--buffer-packets"
                            && w[1] == d.buffer_packets.to_string()),
                    "{args:?}"
                );
                for (which, played, capacity) in [
                    ("up", s.link.up(), &d.up.capacity),
                    ("down", s.link.down(), &d.down.capacity),
                ] {
                    let (_, text) = files
                        .iter()
                        .find(|(p, _)| p.ends_with(which))
                        .unwrap_or_else(|| panic!("{name} {seed} {which}: a trace"));
                    let bins = trace_bins(text);
                    let whole = match played {
                        DirCapacity::Trace { bins: b, .. } => {
                            assert_eq!(b, bins.as_slice(), "{name} {seed} {which}");
                            let sim::Capacity::Trace(t) = capacity else {
                                panic!("{name} {seed} {which}: {capacity:?}")
                            };
                            (t.period().as_nanos() / 100_000_000) as usize
                        }
                        DirCapacity::Schedule { loop_s, .. } => (loop_s * 10.0) as usize,
                        DirCapacity::Rate(_) => panic!("{name} {seed} {which}: a rate"),
                    };
                    assert!(whole >= 10 && bins.len() >= whole, "{name} {seed} {which}");
                    for (k, &b) in bins.iter().enumerate().take(whole) {
                        let from = Instant::from_millis(k as u64 * 100);
                        let exact = match capacity {
                            sim::Capacity::Schedule(sch) => {
                                (0..100)
                                    .map(|ms| sch.rate_at(from + Duration::from_millis(ms)))
                                    .sum::<f64>()
                                    * 8.0
                                    / 100.0
                            }
                            c => c.rate_in(from, Duration::from_millis(100)).expect("rate") * 8.0,
                        };
                        // A schedule's millisecond is written at its end (its last one in the
                        // next bin, the previous bin's last in this one), and each 50 ms slot
                        // drops its fraction of an opportunity.
                        let tolerance = match capacity {
                            sim::Capacity::Schedule(sch) => {
                                let edge = [from.saturating_sub(Duration::from_millis(1)), from]
                                    .iter()
                                    .chain(&[from + Duration::from_millis(99)])
                                    .map(|&t| sch.rate_at(t) * 8.0 / 1000.0)
                                    .fold(0.0, f64::max);
                                (2.0 * OPPORTUNITY_BIT_S + 1.0) + edge * 10.0
                            }
                            _ => 0.0,
                        };
                        assert!(
                            (b as f64 - exact).abs() <= tolerance,
                            "{name} {seed} {which} bin {k}: {b} bit/s played, {exact} given"
                        );
                    }
                }
            }
        }
    }
}
