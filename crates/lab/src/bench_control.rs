//! `purple bench control`: what the daemon costs a router, and, given a cake-autorate checkout,
//! what cake-autorate costs in the same setup, measured in one run the same way.
//!
//! Setup (root; two namespaces named `pbc-<pid>-<n>-{router,refl}`, removed on every exit
//! path): the router namespace has `wan` and `lan`, veth pairs into the reflector namespace,
//! whose `rwan` carries six addresses the kernel answers ICMP on (echo and timestamps): six
//! reflectors, as cake-autorate's default `no_pingers`. Each contender runs alone in the router
//! namespace for a warm-up and then a measured window, probing the six reflectors at the same
//! total rate (20 a second by default: cake-autorate's 6 pingers every 0.3 s; our daemon's
//! `rate_hz`), controlling two directions (download measured on `lan`'s tx counter, upload on
//! `wan`'s), at the same rate ranges (cake-autorate's defaults: 5/20/80 and 5/20/35 Mbit/s).
//! The link is idle. Every veth has threaded NAPI (GRO on, TSO off, `threaded`), so the
//! kernel's work for the reflectors' answers is not charged to the prober. Our daemon runs with
//! its shipped defaults and a dry-run actuator; cake-autorate with its defaults (`fping`,
//! logging on), its sleep function off (so it keeps probing an idle link, as our daemon does),
//! and its `tc` calls recorded by the shim ([`crate::autorate::Shim`]) instead of changing a
//! qdisc.
//!
//! Measured for each over the window, for its whole process tree ([`crate::cost`]): CPU time,
//! system calls and context switches (wake-ups) per second; and on the reflector side the
//! probes it sent and the replies it got per second (the `rwan` packet counters), so a
//! contender that stopped probing cannot pass for a cheap one.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::autorate::{self, Checkout, RatesKbps, ScriptConfig, Shim, ShimCall};
use crate::cost::{self, Counts, Program};
use os::netns::Netns;

/// The reflectors' addresses (in the reflector namespace, on `rwan`).
pub const REFLECTORS: [&str; 6] = [
    "10.79.0.11",
    "10.79.0.12",
    "10.79.0.13",
    "10.79.0.14",
    "10.79.0.15",
    "10.79.0.16",
];
/// The router's address on `wan`.
const ROUTER: &str = "10.79.0.1";

/// How to run the bench.
#[derive(Clone, Debug)]
pub struct BenchOpts {
    /// Measured seconds per contender.
    pub seconds: f64,
    /// Seconds each contender runs before the window opens (start-up excluded).
    pub warmup: f64,
    /// Probes per second, in total over the six reflectors.
    pub rate_hz: f64,
    /// The `purple` binary (runs `purple control`, and is the `tc` shim).
    pub purple_bin: PathBuf,
    /// A cake-autorate checkout to measure beside it.
    pub cake_autorate: Option<Checkout>,
    /// Another `purple` binary whose `purple control` is measured too, the same way (an older
    /// build, for a before/after in one run).
    pub compare: Option<PathBuf>,
    /// Where the configurations and logs go (kept); default: a directory under the
    /// temporary directory, removed after the run.
    pub keep: Option<PathBuf>,
}

/// Why the bench could not measure.
#[derive(Debug)]
pub enum BenchError {
    /// Not root.
    NotRoot,
    /// Bad option.
    Option(String),
    /// Building the namespaces or reading their counters failed.
    Setup(crate::Error),
    /// Counting failed.
    Cost(cost::CostError),
    /// No contender's process could be counted.
    NoCounters,
    /// cake-autorate could not run.
    Autorate(autorate::AutorateError),
    /// A contender's run is not a measurement (it died, or got no replies).
    Run {
        /// Which contender.
        who: String,
        /// What went wrong.
        what: String,
    },
}

impl std::fmt::Display for BenchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BenchError::NotRoot => write!(
                f,
                "purple bench control needs root (it builds network namespaces and counts \
                 system calls with perf events)"
            ),
            BenchError::Option(e) => write!(f, "{e}"),
            BenchError::Setup(e) => write!(f, "setting up the namespaces: {e}"),
            BenchError::Cost(e) => write!(f, "{e}"),
            BenchError::NoCounters => write!(f, "setting up the namespaces: no counters"),
            BenchError::Autorate(e) => write!(f, "{e}"),
            BenchError::Run { who, what } => write!(f, "{who}: {what}"),
        }
    }
}

impl std::error::Error for BenchError {}

impl From<cost::CostError> for BenchError {
    fn from(e: cost::CostError) -> Self {
        BenchError::Cost(e)
    }
}

impl From<autorate::AutorateError> for BenchError {
    fn from(e: autorate::AutorateError) -> Self {
        BenchError::Autorate(e)
    }
}

/// One contender's figures over the window.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Side {
    /// Its name.
    pub name: String,
    /// Seconds measured.
    pub seconds: f64,
    /// What the counters counted over the window.
    pub counts: Counts,
    /// CPU seconds per hour.
    pub cpu_s_per_hour: f64,
    /// Percent of one core.
    pub percent_of_core: f64,
    /// System calls per second.
    pub syscalls_per_s: f64,
    /// Context switches (wake-ups) per second.
    pub wakeups_per_s: f64,
    /// Packets the reflectors received per second (its probes).
    pub probes_per_s: f64,
    /// Packets the reflectors sent per second (the replies).
    pub replies_per_s: f64,
    /// Rate changes over the whole run, start-up included (the daemon's decisions that applied
    /// a rate; cake-autorate's `tc` calls).
    pub rate_changes: usize,
    /// Its configuration and log files (kept with `--keep`).
    pub files: Vec<PathBuf>,
}

/// cake-autorate's figures over ours.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Ratio {
    /// CPU.
    pub cpu: f64,
    /// System calls.
    pub syscalls: f64,
    /// Wake-ups.
    pub wakeups: f64,
}

/// What the bench measured.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct BenchReport {
    /// Probes per second configured.
    pub rate_hz: f64,
    /// Warm-up seconds.
    pub warmup_s: f64,
    /// Our daemon.
    pub purple: Side,
    /// The system-call floor (`daemon::bench_floor`): the same calls per wake-up as our
    /// daemon's dry run, with no logic; what the machine charges for the schedule alone.
    pub floor: Side,
    /// The daemon of the `compare` binary, when given.
    pub compare: Option<Side>,
    /// That binary.
    pub compare_bin: Option<PathBuf>,
    /// cake-autorate, when a checkout was given.
    pub cake_autorate: Option<Side>,
    /// cake-autorate over purple.
    pub ratio: Option<Ratio>,
    /// Every `tc` call cake-autorate made (the whole run, start-up included).
    pub tc_calls: Vec<ShimCall>,
    /// Packages installed for cake-autorate.
    pub installed: Vec<String>,
}

/// The two namespaces, deleted on drop.
struct Topo {
    router: Netns,
    refl: Netns,
}

fn topo() -> Result<Topo, crate::Error> {
    let prefix = os::netns::unique_prefix("pbc");
    let router = Netns::create(&format!("{prefix}-router"))?;
    let refl = Netns::create(&format!("{prefix}-refl"))?;
    for ns in [&router, &refl] {
        // No IPv6 chatter (router solicitations) on the counted links.
        for k in ["all", "default"] {
            let _ = ns.sysctl(&format!("net.ipv6.conf.{k}.disable_ipv6"), "1");
        }
    }
    router.veth("wan", &refl, "rwan")?;
    router.veth("lan", &refl, "rlan")?;
    // The kernel's work for a packet crossing a veth (the reflector answering, a reply
    // reaching a socket) runs, by default, in the sender's system call, so a prober would pay
    // for its reflectors. Threaded NAPI on every veth moves it to kernel threads, as a NIC's
    // receive work is on a router: each contender pays for its own sends and receives only.
    for (ns, devs) in [(&router, ["wan", "lan"]), (&refl, ["rwan", "rlan"])] {
        for d in devs {
            threaded_napi(ns, d)?;
        }
    }
    router.ip(&["addr", "add", &format!("{ROUTER}/24"), "dev", "wan"])?;
    for a in REFLECTORS {
        refl.ip(&["addr", "add", &format!("{a}/24"), "dev", "rwan"])?;
    }
    Ok(Topo { router, refl })
}

/// Gives veth `dev` in `ns` its own NAPI kernel thread: GRO on and TSO off (a veth receives
/// through NAPI only then) with ethtool, then `threaded` in sysfs.
fn threaded_napi(ns: &Netns, dev: &str) -> Result<(), crate::Error> {
    ns.exec("ethtool", &["-K", dev, "gro", "on", "tso", "off"])
        .map_err(|e| {
            crate::Error::Unsupported(format!("{e} (ethtool is needed: apt-get install ethtool)"))
        })?;
    Ok(ns.exec(
        "sh",
        &["-c", &format!("echo 1 > /sys/class/net/{dev}/threaded")],
    )?)
}

/// Packets received and sent by `dev` in `ns` (`ip -s -j link`).
fn packets(ns: &Netns, dev: &str) -> Result<(u64, u64), crate::Error> {
    let o = std::process::Command::new("ip")
        .args(["-n", ns.name(), "-s", "-j", "link", "show", "dev", dev])
        .output()
        .map_err(crate::error::io("ip"))?;
    let v: serde_json::Value =
        serde_json::from_slice(&o.stdout).map_err(|e| crate::Error::Output {
            command: format!("ip -s -j link show dev {dev}"),
            why: e.to_string(),
        })?;
    let s = &v[0]["stats64"];
    match (s["rx"]["packets"].as_u64(), s["tx"]["packets"].as_u64()) {
        (Some(rx), Some(tx)) => Ok((rx, tx)),
        _ => Err(crate::Error::Output {
            command: format!("ip -s -j link show dev {dev}"),
            why: format!("no packet counters in {v}"),
        }),
    }
}

/// Our daemon's configuration for the bench: shipped defaults, the six reflectors, the two
/// interfaces, a dry-run actuator, the log in `log`.
fn daemon_config(rate_hz: f64, log: &Path) -> String {
    let refl: Vec<String> = REFLECTORS.iter().map(|a| format!("\"{a}\"")).collect();
    format!(
        "# Written by purple bench control.\n\
         [download]\ninterface = \"lan\"\ncounter = \"tx\"\n\
         [upload]\ninterface = \"wan\"\ncounter = \"tx\"\n\
         [probe]\nreflectors = [{}]\nrate_hz = {rate_hz}\n\
         [actuator]\nkind = \"dry-run\"\n\
         [log]\npath = \"{}\"\n",
        refl.join(", "),
        log.display()
    )
}

/// Runs one contender's window: waits `warmup`, reads the counters and the reflector's
/// packets, waits `seconds`, reads them again.
fn window(
    t: &Topo,
    counters: &cost::TreeCounters,
    o: &BenchOpts,
    alive: &mut dyn FnMut() -> bool,
    who: &str,
) -> Result<(Counts, (u64, u64), f64), BenchError> {
    let setup = BenchError::Setup;
    std::thread::sleep(Duration::from_secs_f64(o.warmup));
    let c0 = counters.read()?;
    let p0 = packets(&t.refl, "rwan").map_err(setup)?;
    #[allow(clippy::disallowed_methods)] // the bench measures wall time
    let w0 = std::time::Instant::now();
    let end = Duration::from_secs_f64(o.seconds);
    while w0.elapsed() < end {
        if os::netns::interrupted() {
            return Err(BenchError::Run {
                who: who.into(),
                what: "interrupted".into(),
            });
        }
        std::thread::sleep((end.saturating_sub(w0.elapsed())).min(Duration::from_millis(200)));
    }
    let c1 = counters.read()?;
    let wall = w0.elapsed().as_secs_f64();
    let p1 = packets(&t.refl, "rwan").map_err(BenchError::Setup)?;
    if !alive() {
        return Err(BenchError::Run {
            who: who.into(),
            what: "exited during the measurement".into(),
        });
    }
    Ok((
        c1.since(&c0),
        (p1.0.saturating_sub(p0.0), p1.1.saturating_sub(p0.1)),
        wall,
    ))
}

fn side(
    name: &str,
    c: Counts,
    pk: (u64, u64),
    wall: f64,
    changes: usize,
    files: Vec<PathBuf>,
) -> Side {
    let per_s = |x: u64| x as f64 / wall.max(1e-9);
    let cpu_s = c.cpu_ns as f64 / 1e9;
    Side {
        name: name.into(),
        seconds: wall,
        counts: c,
        cpu_s_per_hour: cpu_s / wall.max(1e-9) * 3600.0,
        percent_of_core: cpu_s / wall.max(1e-9) * 100.0,
        syscalls_per_s: per_s(c.syscalls),
        wakeups_per_s: per_s(c.switches),
        probes_per_s: per_s(pk.0),
        replies_per_s: per_s(pk.1),
        rate_changes: changes,
        files,
    }
}

/// Decision lines of the daemon's log, those with a delay sample, and those that applied a
/// change.
fn daemon_log_counts(log: &Path) -> (usize, usize, usize) {
    use daemon::log::{parse_line, Record};
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let (mut n, mut with_delay, mut applied) = (0, 0, 0);
    for l in text.lines() {
        if let Ok(Some(Record::Decision { down, up, .. })) = parse_line(l) {
            n += 1;
            if down.delay_ms.is_some() || up.delay_ms.is_some() {
                with_delay += 1;
            }
            if down.applied || up.applied {
                applied += 1;
            }
        }
    }
    (n, with_delay, applied)
}

/// Starts `prog` in the router namespace behind the counters' gate, measures its window and
/// stops it: what it cost, the reflectors' packets and the seconds measured.
fn run_counted(
    t: &Topo,
    o: &BenchOpts,
    tp: u64,
    prog: &Program<'_>,
) -> Result<(Counts, (u64, u64), f64), BenchError> {
    let (mut d, counters) = cost::spawn_counted(&t.router, prog, Duration::from_secs(2), Some(tp))?;
    let counters = counters.ok_or(BenchError::NoCounters)?;
    let r = window(t, &counters, o, &mut || d.exited().is_none(), prog.what);
    d.stop();
    r
}

/// Runs `bin control` (our daemon) in the router namespace and measures its window; its
/// configuration, log and output go to `work`.
fn measure_daemon(
    t: &Topo,
    o: &BenchOpts,
    work: &Path,
    tp: u64,
    bin: &Path,
    name: &str,
) -> Result<Side, BenchError> {
    std::fs::create_dir_all(work)
        .map_err(|e| BenchError::Setup(crate::error::io(work.display().to_string())(e)))?;
    let conf = work.join("purple.toml");
    let log = work.join("purple.jsonl");
    let out = work.join("purple.out");
    std::fs::write(&conf, daemon_config(o.rate_hz, &log))
        .map_err(|e| BenchError::Setup(crate::error::io(conf.display().to_string())(e)))?;
    let bin = bin.display().to_string();
    let conf_s = conf.display().to_string();
    let prog = Program {
        what: name,
        prog: &bin,
        args: &["control", "--config", &conf_s],
        env: &[],
        output: Some(&out),
    };
    let (c, pk, wall) = run_counted(t, o, tp, &prog)?;
    let (lines, with_delay, applied) = daemon_log_counts(&log);
    if pk.1 == 0 || with_delay == 0 {
        return Err(BenchError::Run {
            who: name.into(),
            what: format!(
                "the reflectors answered {} of {} probes and {with_delay} of {lines} decision \
                 lines carry a delay sample: no cost of the real loop can be reported (its \
                 output: {})",
                pk.1,
                pk.0,
                out.display()
            ),
        });
    }
    Ok(side(name, c, pk, wall, applied, vec![conf, log, out]))
}

/// Runs the system-call floor (`purple bench control-floor`, `daemon::bench_floor`) in the
/// router namespace at the daemon's rate, against the same reflectors and counters, and
/// measures its window the same way.
fn measure_floor(t: &Topo, o: &BenchOpts, work: &Path, tp: u64) -> Result<Side, BenchError> {
    let name = "system-call floor";
    let out = work.join("floor.out");
    let bin = o.purple_bin.display().to_string();
    let rate = o.rate_hz.to_string();
    let refl = REFLECTORS.join(",");
    let prog = Program {
        what: name,
        prog: &bin,
        args: &[
            "bench",
            "control-floor",
            "--rate",
            &rate,
            "--reflectors",
            &refl,
            "--tx-counters",
            "lan,wan",
        ],
        env: &[],
        output: Some(&out),
    };
    let (c, pk, wall) = run_counted(t, o, tp, &prog)?;
    if pk.1 == 0 {
        return Err(BenchError::Run {
            who: name.into(),
            what: format!(
                "the reflectors answered none of its {} probes (its output: {})",
                pk.0,
                out.display()
            ),
        });
    }
    Ok(side(name, c, pk, wall, 0, vec![out]))
}

/// Runs the bench (see the module doc).
pub fn run(o: &BenchOpts) -> Result<BenchReport, BenchError> {
    if !os::is_root() {
        return Err(BenchError::NotRoot);
    }
    if !(o.seconds >= 1.0 && o.warmup >= 0.5 && (1.0..=1000.0).contains(&o.rate_hz)) {
        return Err(BenchError::Option(format!(
            "--seconds must be >= 1 (got {}), --warmup >= 0.5 (got {}), --rate 1 ..= 1000 (got {})",
            o.seconds, o.warmup, o.rate_hz
        )));
    }
    let installed = match &o.cake_autorate {
        Some(_) => autorate::ensure_prerequisites()?,
        None => Vec::new(),
    };
    let tp = cost::syscall_tracepoint()?;
    let (work, remove_work) = match &o.keep {
        Some(d) => (d.clone(), false),
        None => (
            std::env::temp_dir().join(format!("purple-bench-control-{}", std::process::id())),
            true,
        ),
    };
    std::fs::create_dir_all(&work)
        .map_err(|e| BenchError::Setup(crate::error::io(work.display().to_string())(e)))?;
    let r = run_in(o, &work, tp, installed);
    if remove_work {
        let _ = std::fs::remove_dir_all(&work);
    }
    r
}

fn run_in(
    o: &BenchOpts,
    work: &Path,
    tp: u64,
    installed: Vec<String>,
) -> Result<BenchReport, BenchError> {
    let t = topo().map_err(BenchError::Setup)?;
    let purple = measure_daemon(&t, o, work, tp, &o.purple_bin, "purple control")?;
    let floor = measure_floor(&t, o, work, tp)?;
    let compare = match &o.compare {
        Some(bin) => Some(measure_daemon(
            &t,
            o,
            &work.join("compare"),
            tp,
            bin,
            "--compare binary",
        )?),
        None => None,
    };
    // cake-autorate.
    let mut tc_calls = Vec::new();
    let cake = match &o.cake_autorate {
        None => None,
        Some(co) => {
            let shim = Shim::create(
                &work.join("shim"),
                &work.join("tc-calls.log"),
                &o.purple_bin,
                None,
                "besteffort noatm overhead 0",
            )?;
            let cfg = ScriptConfig {
                dl_if: "lan".into(),
                ul_if: "wan".into(),
                down: RatesKbps {
                    min: 5000,
                    base: 20000,
                    max: 80000,
                },
                up: RatesKbps {
                    min: 5000,
                    base: 20000,
                    max: 35000,
                },
                reflectors: REFLECTORS.iter().map(|s| s.to_string()).collect(),
                ping_interval_s: REFLECTORS.len() as f64 / o.rate_hz,
                log_dir: work.join("cake-autorate-log"),
            };
            let mut run = autorate::start(co, &t.router, &cfg, &shim, work, Some(tp))?;
            let counters = run.counters.take().ok_or(BenchError::NoCounters)?;
            let res = window(&t, &counters, o, &mut || run.alive(), "cake-autorate");
            run.stop();
            let (c, pk, wall) = res?;
            tc_calls = shim.calls();
            let changes = tc_calls.len();
            if pk.1 == 0 {
                return Err(BenchError::Run {
                    who: "cake-autorate".into(),
                    what: format!(
                        "the reflectors answered none of its {} probes (its output: {})",
                        pk.0,
                        run.output.display()
                    ),
                });
            }
            let files = vec![
                run.config.clone(),
                run.log.clone(),
                run.output.clone(),
                shim.log().to_path_buf(),
            ];
            Some(side("cake-autorate", c, pk, wall, changes, files))
        }
    };
    let ratio = cake.as_ref().map(|k| {
        let r = |a: f64, b: f64| if b > 0.0 { a / b } else { f64::INFINITY };
        Ratio {
            cpu: r(k.percent_of_core, purple.percent_of_core),
            syscalls: r(k.syscalls_per_s, purple.syscalls_per_s),
            wakeups: r(k.wakeups_per_s, purple.wakeups_per_s),
        }
    });
    Ok(BenchReport {
        rate_hz: o.rate_hz,
        warmup_s: o.warmup,
        purple,
        floor,
        compare,
        compare_bin: o.compare.clone(),
        cake_autorate: cake,
        ratio,
        tc_calls,
        installed,
    })
}

/// The report as the text `purple bench control` prints.
pub fn table(r: &BenchReport) -> String {
    let mut s = format!(
        "purple bench control: alone in a network namespace, each contender probes 6 kernel \
         ICMP reflectors behind a veth at {:.0} probes/s in total and controls two directions \
         (idle link); counted by perf events over its whole process tree for {:.0} s after {:.0} s \
         of warm-up\n",
        r.rate_hz, r.purple.seconds, r.warmup_s
    );
    s += &format!(
        "{:<22} {:>9} {:>8} {:>11} {:>10} {:>9} {:>10} {:>8}\n",
        "", "CPU s/h", "% core", "syscalls/s", "wakeups/s", "probes/s", "replies/s", "changes"
    );
    for k in [&r.purple, &r.floor]
        .into_iter()
        .chain(r.compare.as_ref())
        .chain(r.cake_autorate.as_ref())
    {
        s += &format!(
            "{:<22} {:>9.2} {:>8.3} {:>11.1} {:>10.1} {:>9.1} {:>10.1} {:>8}\n",
            k.name,
            k.cpu_s_per_hour,
            k.percent_of_core,
            k.syscalls_per_s,
            k.wakeups_per_s,
            k.probes_per_s,
            k.replies_per_s,
            k.rate_changes
        );
    }
    if let Some(x) = &r.ratio {
        s += &format!(
            "{:<22} {:>9} {:>7.1}x {:>10.1}x {:>9.1}x\n",
            "cake-autorate / purple", "", x.cpu, x.syscalls, x.wakeups
        );
    }
    if let (Some(_), Some(bin)) = (&r.compare, &r.compare_bin) {
        s += &format!("--compare binary: {}\n", bin.display());
    }
    let met = |b: bool| if b { "met" } else { "NOT met" };
    s += &format!(
        "target: purple control <= 0.10% of one core at 20 probes/s: {} ({:.3}%)",
        met(r.purple.percent_of_core <= 0.10),
        r.purple.percent_of_core
    );
    s += &format!(
        "; the system-call floor alone: {:.3}% (purple's logic above it: {:.3}%)",
        r.floor.percent_of_core,
        r.purple.percent_of_core - r.floor.percent_of_core
    );
    if let Some(x) = &r.ratio {
        s += &format!(
            "; >= 10x below cake-autorate: {} ({:.1}x)",
            met(x.cpu >= 10.0),
            x.cpu
        );
    }
    s.push('\n');
    if !r.installed.is_empty() {
        s += &format!("installed for cake-autorate: {}\n", r.installed.join(", "));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_daemon_config_probes_the_six_reflectors_with_a_dry_run() {
        let t = daemon_config(20.0, Path::new("/tmp/l.jsonl"));
        let cfg = daemon::DaemonConfig::parse(&t).expect("a valid daemon configuration");
        assert_eq!(cfg.probe.reflectors.len(), 6);
        assert!(t.contains("kind = \"dry-run\""));
        assert!(t.contains("rate_hz = 20"));
    }
}
