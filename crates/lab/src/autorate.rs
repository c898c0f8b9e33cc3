//! Running the real cake-autorate (lynxthecat/cake-autorate, a Bash script) from a checkout the
//! user fetched themselves, next to our daemon: in `purple bench control --cake-autorate DIR`
//! (its cost) and `purple lab run radio --cake-autorate DIR` (its law on real TCP). The
//! project contains none of its code or text; this module writes its configuration file (the
//! option names are its documented interface), starts it, and reads back what it did.
//!
//! Its `tc` calls go to a shim: our `purple` binary started under the name `tc`, placed first
//! on its `PATH` (see [`Shim`]). The shim records every `tc qdisc change ... cake bandwidth
//! RATE` (also inside `tc -batch`) as a [`ShimCall`] line in a log and, when given a bridge's
//! control socket and a device-to-direction map, applies it as `purple ctl set-bandwidth`.
//! `tc qdisc show dev DEV` is answered with what `tc` prints for a CAKE with the shim's
//! configured arguments (cake-autorate reads its overhead from it).
//!
//! What it needs (its installation guide): `bash` and `fping` (its default pinger).
//! [`ensure_prerequisites`] installs the missing ones with `apt-get` (Debian), only when a
//! checkout is given.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::cost::{self, Program, TreeCounters};
use crate::scenario::ProbeId;
use controller::Direction;
use os::netns::{Netns, Proc};

/// Environment of the shim: the file its calls are appended to.
pub const SHIM_LOG: &str = "PURPLE_TC_SHIM_LOG";
/// Environment of the shim: the bridge control socket to apply rates through (absent: record
/// only).
pub const SHIM_CTL: &str = "PURPLE_TC_SHIM_CTL";
/// Environment of the shim: `DEV=ingress|egress,...`, which bridge direction each device's
/// CAKE is.
pub const SHIM_DEVS: &str = "PURPLE_TC_SHIM_DEVS";
/// Environment of the shim: CAKE's arguments after the bandwidth, for `qdisc show`.
pub const SHIM_CAKE: &str = "PURPLE_TC_SHIM_CAKE";

/// Why cake-autorate cannot run.
#[derive(Debug)]
pub enum AutorateError {
    /// The directory is not a cake-autorate checkout.
    NotACheckout(PathBuf),
    /// A program it needs is missing and could not be installed.
    Missing {
        /// The programs.
        programs: Vec<String>,
        /// Why they were not installed.
        why: String,
    },
    /// A file of the run could not be written or read.
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        error: std::io::Error,
    },
    /// Starting or counting it failed.
    Cost(cost::CostError),
    /// It exited right after starting.
    Exited {
        /// Its exit status.
        status: String,
        /// The end of its output and log.
        tail: String,
    },
}

impl std::fmt::Display for AutorateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AutorateError::NotACheckout(d) => write!(
                f,
                "{} is not a cake-autorate checkout (no cake-autorate.sh in it); fetch one with \
                 `git clone https://github.com/lynxthecat/cake-autorate`",
                d.display()
            ),
            AutorateError::Missing { programs, why } => {
                write!(f, "cake-autorate needs {} ({why})", programs.join(" and "))
            }
            AutorateError::Io { path, error } => write!(f, "{}: {error}", path.display()),
            AutorateError::Cost(e) => write!(f, "cake-autorate: {e}"),
            AutorateError::Exited { status, tail } => {
                write!(f, "cake-autorate exited at start ({status}):\n{tail}")
            }
        }
    }
}

impl std::error::Error for AutorateError {}

impl From<cost::CostError> for AutorateError {
    fn from(e: cost::CostError) -> Self {
        AutorateError::Cost(e)
    }
}

/// Why a `tc` invocation is not one the shim handles.
#[derive(Debug)]
pub enum TcShimError {
    /// `qdisc change|replace` of another qdisc than cake.
    NotCake(String),
    /// A cake change without `dev DEV` or `bandwidth RATE`.
    BadChange(String),
    /// Any other command.
    Unhandled(String),
    /// `-batch`/`-b` (the option) with no file.
    BatchNeedsFile(String),
    /// The batch file could not be read.
    BatchFile {
        /// The file (`-`: stdin).
        file: String,
        /// Why.
        source: std::io::Error,
    },
}

impl std::fmt::Display for TcShimError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TcShimError::NotCake(c) => write!(f, "not a cake qdisc: {c}"),
            TcShimError::BadChange(c) => write!(
                f,
                "expected `qdisc change [root] dev DEV cake bandwidth RATE`, got `{c}`"
            ),
            TcShimError::Unhandled(c) => write!(
                f,
                "only `qdisc change ... cake bandwidth RATE` and `qdisc show` are handled, not \
                 `{c}`"
            ),
            TcShimError::BatchNeedsFile(o) => write!(f, "{o} needs a file (or -)"),
            TcShimError::BatchFile { file, source } => write!(f, "batch file {file}: {source}"),
        }
    }
}

impl std::error::Error for TcShimError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            TcShimError::BatchFile { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Why two lab runs cannot be compared by [`compare_laws`].
#[derive(Debug, Clone, PartialEq)]
pub enum CompareError {
    /// The contender's run has no rate trace.
    NoTrace(String),
    /// The run has no capacity series (the comparison needs purple linkem).
    NoCapacity,
    /// No 100 ms bin lies in the window (s).
    EmptyWindow(f64, f64),
}

impl std::fmt::Display for CompareError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CompareError::NoTrace(c) => write!(f, "{c}: no rate trace"),
            CompareError::NoCapacity => {
                write!(f, "no capacity series (the comparison needs purple linkem)")
            }
            CompareError::EmptyWindow(a, b) => write!(f, "no 100 ms bin in the window {a}..{b} s"),
        }
    }
}

impl std::error::Error for CompareError {}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> AutorateError + '_ {
    move |error| AutorateError::Io {
        path: path.to_path_buf(),
        error,
    }
}

/// A cake-autorate checkout (a directory holding `cake-autorate.sh`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checkout {
    dir: PathBuf,
}

impl Checkout {
    /// `dir`, if it holds `cake-autorate.sh` (made absolute).
    pub fn open(dir: &Path) -> Result<Checkout, AutorateError> {
        let dir = std::fs::canonicalize(dir)
            .map_err(|_| AutorateError::NotACheckout(dir.to_path_buf()))?;
        if !dir.join("cake-autorate.sh").is_file() {
            return Err(AutorateError::NotACheckout(dir));
        }
        Ok(Checkout { dir })
    }

    /// Its directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The script.
    pub fn script(&self) -> PathBuf {
        self.dir.join("cake-autorate.sh")
    }
}

/// The Debian packages of the programs cake-autorate needs with its default pinger.
const NEEDS: [(&str, &str); 2] = [("bash", "bash"), ("fping", "fping")];

/// Whether `prog` is an executable file on `PATH` (or in /usr/sbin, /sbin).
fn on_path(prog: &str) -> bool {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin"].map(PathBuf::from))
        .any(|d| d.join(prog).is_file())
}

/// Makes sure `bash` and `fping` are installed, installing the missing ones with `apt-get`
/// (`apt-get update` first) when running as root. Returns what it installed.
pub fn ensure_prerequisites() -> Result<Vec<String>, AutorateError> {
    let missing: Vec<(&str, &str)> = NEEDS.into_iter().filter(|(p, _)| !on_path(p)).collect();
    if missing.is_empty() {
        return Ok(Vec::new());
    }
    let programs: Vec<String> = missing.iter().map(|(p, _)| p.to_string()).collect();
    let fail = |why: String| AutorateError::Missing {
        programs: programs.clone(),
        why,
    };
    if !os::is_root() {
        return Err(fail("not installed, and installing needs root".into()));
    }
    if !on_path("apt-get") {
        return Err(fail("not installed, and apt-get is not available".into()));
    }
    let pkgs: Vec<&str> = missing.iter().map(|(_, p)| *p).collect();
    eprintln!(
        "cake-autorate needs {}: installing with apt-get",
        pkgs.join(", ")
    );
    os::netns::run("apt-get", &["update", "-qq"]).map_err(|e| fail(e.to_string()))?;
    let mut args = vec!["install", "-y", "-qq"];
    args.extend(&pkgs);
    os::netns::run("apt-get", &args).map_err(|e| fail(e.to_string()))?;
    Ok(pkgs.iter().map(|p| p.to_string()).collect())
}

/// One direction's rates, kbit/s (cake-autorate's `min_/base_/max_*_shaper_rate_kbps`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RatesKbps {
    /// Minimum.
    pub min: u64,
    /// Base (start, and where an idle link returns).
    pub base: u64,
    /// Maximum.
    pub max: u64,
}

impl RatesKbps {
    /// From a lab contender's range in Mbit/s.
    pub fn from_mbit(r: crate::scenario::RateRange) -> RatesKbps {
        let k = |m: f64| (m * 1000.0).round().max(1.0) as u64;
        RatesKbps {
            min: k(r.min),
            base: k(r.base),
            max: k(r.max),
        }
    }
}

/// What a run of cake-autorate is configured with; everything else is its default.
#[derive(Clone, Debug, PartialEq)]
pub struct ScriptConfig {
    /// Download interface (its CAKE's device; the tx counter measures download).
    pub dl_if: String,
    /// Upload interface.
    pub ul_if: String,
    /// Download rates.
    pub down: RatesKbps,
    /// Upload rates.
    pub up: RatesKbps,
    /// Reflectors (all pinged: `no_pingers` is their number).
    pub reflectors: Vec<String>,
    /// Seconds between two pings of one reflector (`reflector_ping_interval_s`; its default
    /// 0.3 s with 6 reflectors is 20 pings a second).
    pub ping_interval_s: f64,
    /// Where its log file goes.
    pub log_dir: PathBuf,
}

/// The configuration file for `c` (cake-autorate's `config.X.sh` syntax). Beside the
/// interfaces, rates and reflectors it sets: the sleep function off (it would stop pinging
/// after 60 s of idle link; our daemon never stops, and the cost must be compared at the same
/// probe rate), reflectors in the given order, the log under `log_dir`, and the idle threshold
/// (`connection_active_thr_kbps`, default 2000) below both minimum rates, as it requires.
pub fn config_text(c: &ScriptConfig) -> String {
    let refl: Vec<String> = c.reflectors.iter().map(|r| format!("\"{r}\"")).collect();
    let active = 2000.min(c.down.min).min(c.up.min);
    format!(
        "# Written by purple for one run.\n\
         dl_if={dl}\nul_if={ul}\n\
         adjust_dl_shaper_rate=1\nadjust_ul_shaper_rate=1\n\
         min_dl_shaper_rate_kbps={dmin}\nbase_dl_shaper_rate_kbps={dbase}\nmax_dl_shaper_rate_kbps={dmax}\n\
         min_ul_shaper_rate_kbps={umin}\nbase_ul_shaper_rate_kbps={ubase}\nmax_ul_shaper_rate_kbps={umax}\n\
         connection_active_thr_kbps={active}\n\
         reflectors=({refl})\n\
         no_pingers={n}\n\
         reflector_ping_interval_s={iv:.3}\n\
         randomize_reflectors=0\n\
         enable_sleep_function=0\n\
         log_file_path_override=\"{log}\"\n",
        dl = c.dl_if,
        ul = c.ul_if,
        dmin = c.down.min,
        dbase = c.down.base,
        dmax = c.down.max,
        umin = c.up.min,
        ubase = c.up.base,
        umax = c.up.max,
        refl = refl.join(" "),
        n = c.reflectors.len(),
        iv = c.ping_interval_s,
        log = c.log_dir.display(),
    )
}

/// One `tc` operation the shim understands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TcOp {
    /// `qdisc change|replace [root] dev DEV cake ... bandwidth RATE ...`.
    SetBandwidth {
        /// The device.
        dev: String,
        /// The rate as written (tc syntax, e.g. `12345Kbit`).
        rate: String,
    },
    /// `qdisc show|ls|list [dev DEV]`.
    Show {
        /// The device asked about.
        dev: Option<String>,
    },
}

/// Parses one `tc` command line (the words after `tc` and its options, or one line of a
/// `-batch` file).
pub fn parse_tc_command(words: &[&str]) -> Result<TcOp, TcShimError> {
    let after = |key: &str| {
        words
            .iter()
            .position(|w| *w == key)
            .and_then(|i| words.get(i + 1))
            .map(|s| s.to_string())
    };
    match words {
        ["qdisc", "change" | "replace", ..] => {
            if !words.contains(&"cake") {
                return Err(TcShimError::NotCake(words.join(" ")));
            }
            match (after("dev"), after("bandwidth")) {
                (Some(dev), Some(rate)) => Ok(TcOp::SetBandwidth { dev, rate }),
                _ => Err(TcShimError::BadChange(words.join(" "))),
            }
        }
        ["qdisc", "show" | "ls" | "list", ..] | ["qdisc"] => Ok(TcOp::Show { dev: after("dev") }),
        _ => Err(TcShimError::Unhandled(words.join(" "))),
    }
}

/// Parses a `tc` invocation's arguments: options (`-force`, `-s`, `-j`, ...), then one command,
/// or `-batch FILE` / `-b FILE` whose lines (`batch`: the file's text, `-` being stdin, read
/// by the caller) are commands. Returns the operations in order, or the first error.
pub fn parse_tc(
    args: &[String],
    batch: impl FnOnce(&str) -> std::io::Result<String>,
) -> Result<Vec<TcOp>, TcShimError> {
    let mut i = 0;
    let mut batch_file = None;
    while let Some(a) = args.get(i) {
        if !a.starts_with('-') {
            break;
        }
        if matches!(a.as_str(), "-batch" | "-b") {
            batch_file = Some(
                args.get(i + 1)
                    .ok_or_else(|| TcShimError::BatchNeedsFile(a.clone()))?
                    .clone(),
            );
            i += 1;
        }
        i += 1;
    }
    match batch_file {
        Some(f) => {
            let text = batch(&f).map_err(|source| TcShimError::BatchFile {
                file: f.clone(),
                source,
            })?;
            text.lines()
                .map(|l| l.split_whitespace().collect::<Vec<_>>())
                .filter(|w| !w.is_empty() && !w[0].starts_with('#'))
                .map(|w| parse_tc_command(&w))
                .collect()
        }
        None => {
            let w: Vec<&str> = args[i..].iter().map(String::as_str).collect();
            parse_tc_command(&w).map(|op| vec![op])
        }
    }
}

/// One rate change the shim saw, as a line of its log.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct ShimCall {
    /// Unix time, s.
    pub t: f64,
    /// The device.
    pub dev: String,
    /// The rate, bit/s.
    pub bit_s: u64,
    /// `None` if applied (or only recorded); else why applying it failed.
    pub error: Option<String>,
}

impl ShimCall {
    /// Its log line: `T DEV BIT_S ok` or `T DEV BIT_S error: WHY`.
    pub fn to_line(&self) -> String {
        match &self.error {
            None => format!("{:.6} {} {} ok\n", self.t, self.dev, self.bit_s),
            Some(e) => format!(
                "{:.6} {} {} error: {}\n",
                self.t,
                self.dev,
                self.bit_s,
                e.replace('\n', " ")
            ),
        }
    }

    /// Parses a line written by [`ShimCall::to_line`].
    pub fn parse(line: &str) -> Option<ShimCall> {
        let mut w = line.splitn(4, ' ');
        let t = w.next()?.parse().ok()?;
        let dev = w.next()?.to_string();
        let bit_s = w.next()?.parse().ok()?;
        let rest = w.next()?.trim_end();
        let error = match rest {
            "ok" => None,
            r => Some(r.strip_prefix("error: ").unwrap_or(r).to_string()),
        };
        Some(ShimCall {
            t,
            dev,
            bit_s,
            error,
        })
    }
}

/// Every call in the shim log `path` (a missing log: none).
pub fn read_calls(path: &Path) -> Vec<ShimCall> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(ShimCall::parse)
        .collect()
}

/// The `tc` shim for one run: a directory holding `tc`, a link to our binary, to put first on
/// the script's `PATH`, and the log it writes. Removed (with the log) on drop unless kept.
#[derive(Debug)]
pub struct Shim {
    dir: PathBuf,
    log: PathBuf,
    env: Vec<(&'static str, String)>,
}

impl Shim {
    /// A shim in a new directory `dir` (its log `log`), calling `purple_bin` as `tc`; it
    /// applies rates to the bridge at `ctl` with `devs` (`[(device, "ingress"|"egress")]`)
    /// when given, else records only; `qdisc show` renders CAKE with `cake_args`.
    pub fn create(
        dir: &Path,
        log: &Path,
        purple_bin: &Path,
        ctl: Option<(&Path, &[(&str, &str)])>,
        cake_args: &str,
    ) -> Result<Shim, AutorateError> {
        std::fs::create_dir_all(dir).map_err(io_err(dir))?;
        let tc = dir.join("tc");
        let _ = std::fs::remove_file(&tc);
        std::os::unix::fs::symlink(purple_bin, &tc).map_err(io_err(&tc))?;
        let _ = std::fs::remove_file(log);
        let mut env = vec![
            (SHIM_LOG, log.display().to_string()),
            (SHIM_CAKE, cake_args.to_string()),
        ];
        if let Some((sock, devs)) = ctl {
            env.push((SHIM_CTL, sock.display().to_string()));
            let m: Vec<String> = devs.iter().map(|(d, dir)| format!("{d}={dir}")).collect();
            env.push((SHIM_DEVS, m.join(",")));
        }
        Ok(Shim {
            dir: dir.to_path_buf(),
            log: log.to_path_buf(),
            env,
        })
    }

    /// The log of the calls.
    pub fn log(&self) -> &Path {
        &self.log
    }

    /// The calls so far.
    pub fn calls(&self) -> Vec<ShimCall> {
        read_calls(&self.log)
    }

    /// The environment the script runs with: `PATH` with the shim first, and the shim's.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        let path = std::env::var("PATH").unwrap_or_else(|_| "/usr/sbin:/usr/bin:/sbin:/bin".into());
        let mut e = vec![("PATH", format!("{}:{path}", self.dir.display()))];
        e.extend(self.env.iter().cloned());
        e
    }
}

/// A running cake-autorate; stopped (SIGTERM to its process group: it removes its run
/// directory and stops its pinger; SIGKILL after 5 s) on drop.
#[derive(Debug)]
pub struct Running {
    proc: Proc,
    /// Counters of its whole process tree, when started counted.
    pub counters: Option<TreeCounters>,
    /// Its configuration file.
    pub config: PathBuf,
    /// Its log file.
    pub log: PathBuf,
    /// Its stdout and stderr.
    pub output: PathBuf,
    run_dir: PathBuf,
}

/// Run directories cake-autorate makes (and removes on a clean exit).
const RUN_ROOT: &str = "/var/run/cake-autorate";

/// Starts cake-autorate from `co` in namespace `ns` with configuration `cfg` written to
/// `work/config.ID.sh` (ID unique per run), its `tc` calls going to `shim`, counted from its
/// first instruction when `syscall_tp` is given ([`cost::syscall_tracepoint`]). Fails if it
/// exits within the first second (with the end of its output and log).
pub fn start(
    co: &Checkout,
    ns: &Netns,
    cfg: &ScriptConfig,
    shim: &Shim,
    work: &Path,
    syscall_tp: Option<u64>,
) -> Result<Running, AutorateError> {
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let id = format!("purple{}x{n}", std::process::id());
    std::fs::create_dir_all(work).map_err(io_err(work))?;
    std::fs::create_dir_all(&cfg.log_dir).map_err(io_err(&cfg.log_dir))?;
    let config = work.join(format!("config.{id}.sh"));
    std::fs::write(&config, config_text(cfg)).map_err(io_err(&config))?;
    let output = work.join(format!("cake-autorate.{id}.out"));
    let script = co.script().display().to_string();
    let conf = config.display().to_string();
    let mut env = shim.env();
    env.push((
        "CAKE_AUTORATE_SCRIPT_PREFIX",
        co.dir().display().to_string(),
    ));
    env.push(("CAKE_AUTORATE_CONFIG_PREFIX", work.display().to_string()));
    let program = Program {
        what: "cake-autorate",
        prog: "bash",
        args: &[&script, &conf],
        env: &env,
        output: Some(&output),
    };
    let (mut proc, counters) =
        cost::spawn_counted(ns, &program, Duration::from_secs(5), syscall_tp)?;
    let log = cfg.log_dir.join(format!("cake-autorate.{id}.log"));
    std::thread::sleep(Duration::from_secs(1));
    if let Some(status) = proc.exited() {
        let tail = |p: &Path| {
            let t = std::fs::read_to_string(p).unwrap_or_default();
            let lines: Vec<&str> = t.lines().collect();
            lines[lines.len().saturating_sub(15)..].join("\n")
        };
        return Err(AutorateError::Exited {
            status,
            tail: format!("{}\n{}", tail(&output), tail(&log)),
        });
    }
    Ok(Running {
        proc,
        counters,
        config,
        log,
        output,
        run_dir: Path::new(RUN_ROOT).join(&id),
    })
}

impl Running {
    /// Whether it is still running.
    pub fn alive(&mut self) -> bool {
        self.proc.exited().is_none()
    }

    /// Stops it and removes its run directory if it left one.
    pub fn stop(&mut self) {
        self.proc.stop();
        let _ = std::fs::remove_dir_all(&self.run_dir);
        let _ = std::fs::remove_dir(RUN_ROOT);
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop();
    }
}

/// One law's figures in [`LawComparison`].
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct LawRow {
    /// The contender.
    pub contender: String,
    /// Download goodput, Mbit/s.
    pub down_mbit: f64,
    /// Upload goodput, Mbit/s.
    pub up_mbit: f64,
    /// Induced latency p99 of the ICMP probe, ms.
    pub icmp_p99_ms: Option<f64>,
    /// Induced latency p99 of the UDP probe, ms.
    pub udp_p99_ms: Option<f64>,
    /// Mean download rate it set over the window, Mbit/s.
    pub mean_down_rate_mbit: f64,
    /// The same over the link's mean capacity in the window.
    pub rate_over_capacity: f64,
    /// Download rate changes in the window.
    pub down_changes: usize,
}

/// The real cake-autorate beside our port of its law, on the same lab scenario.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct LawComparison {
    /// The window compared, seconds on the runs' clock.
    pub window_s: (f64, f64),
    /// Our port, then the real script.
    pub rows: [LawRow; 2],
    /// Mean of |script's download rate - port's| over the window's 100 ms bins, Mbit/s.
    pub mean_abs_diff_mbit: f64,
    /// Mean of (script's - port's), Mbit/s (positive: the script shapes higher).
    pub mean_diff_mbit: f64,
    /// Share of bins where the two rates are within 10% of the link's capacity of each other.
    pub share_within_10pct: f64,
}

/// Compares `port` (our `cake-autorate` law in `purple control`) with `script` (the real
/// script) over `[from_s, to_s)` of their runs: goodput, probes' p99, and the download rate
/// each set, sampled at the middle of every 100 ms bin (the rate in force then: the last
/// change before). Errors when a run has no rate trace or no capacity series, or the window
/// holds no bin (a comparison with no samples is no comparison).
pub fn compare_laws(
    port: &crate::LabRun,
    script: &crate::LabRun,
    from_s: f64,
    to_s: f64,
) -> Result<LawComparison, CompareError> {
    fn trace(r: &crate::LabRun) -> Result<&crate::control::ControlTrace, CompareError> {
        r.control
            .as_ref()
            .filter(|c| !c.points.is_empty())
            .ok_or_else(|| CompareError::NoTrace(r.contender.clone()))
    }
    let (tp, ts) = (trace(port)?, trace(script)?);
    let bin = port.summary.bin_s;
    let caps = &port.capacity_down_mbit;
    if caps.is_empty() || bin.is_nan() || bin <= 0.0 {
        return Err(CompareError::NoCapacity);
    }
    let bins: Vec<(f64, f64)> = caps
        .iter()
        .enumerate()
        .map(|(k, &c)| ((k as f64 + 0.5) * bin, c))
        .filter(|(t, _)| *t >= from_s && *t < to_s)
        .collect();
    if bins.is_empty() {
        return Err(CompareError::EmptyWindow(from_s, to_s));
    }
    let n = bins.len() as f64;
    let at = |tr: &crate::control::ControlTrace, t: f64| tr.down_rate_at(t).unwrap_or(0.0);
    let (mut abs, mut diff, mut within) = (0.0, 0.0, 0usize);
    for &(t, cap) in &bins {
        let d = at(ts, t) - at(tp, t);
        abs += d.abs();
        diff += d;
        if d.abs() <= 0.1 * cap {
            within += 1;
        }
    }
    let cap_mean = bins.iter().map(|b| b.1).sum::<f64>() / n;
    let row = |r: &crate::LabRun, tr: &crate::control::ControlTrace| {
        let mean = bins.iter().map(|&(t, _)| at(tr, t)).sum::<f64>() / n;
        let mut changes = 0;
        let mut last = tr.down_rate_at(from_s);
        for p in tr.points.iter().filter(|p| p.t >= from_s && p.t < to_s) {
            if last.is_some_and(|l: f64| (l - p.down_mbit).abs() > 1e-9) {
                changes += 1;
            }
            last = Some(p.down_mbit);
        }
        LawRow {
            contender: r.contender.clone(),
            down_mbit: r.goodput_mbit(Direction::Down),
            up_mbit: r.goodput_mbit(Direction::Up),
            icmp_p99_ms: r.induced(ProbeId::Icmp).map(|i| i.p99),
            udp_p99_ms: r.induced(ProbeId::UDP_BE).map(|i| i.p99),
            mean_down_rate_mbit: mean,
            rate_over_capacity: mean / cap_mean,
            down_changes: changes,
        }
    };
    Ok(LawComparison {
        window_s: (from_s, to_s),
        rows: [row(port, tp), row(script, ts)],
        mean_abs_diff_mbit: abs / n,
        mean_diff_mbit: diff / n,
        share_within_10pct: within as f64 / n,
    })
}

/// The comparison as text.
pub fn comparison_text(c: &LawComparison) -> String {
    let ms = |v: Option<f64>| v.map_or("-".into(), |x| format!("{x:.1}"));
    let mut s = format!(
        "\ncake-autorate, the real script vs our port of its law (same probes: 6 ICMP echo \
         reflectors, 20/s; window {:.1}-{:.1} s):\n{:<42} {:>9} {:>7} {:>9} {:>9} {:>10} {:>9} {:>8}\n",
        c.window_s.0,
        c.window_s.1,
        "",
        "down Mb/s",
        "up Mb/s",
        "ICMP p99",
        "UDP p99",
        "mean rate",
        "rate/cap",
        "changes"
    );
    for r in &c.rows {
        s += &format!(
            "{:<42} {:>9.1} {:>7.1} {:>9} {:>9} {:>10.1} {:>9.2} {:>8}\n",
            r.contender,
            r.down_mbit,
            r.up_mbit,
            ms(r.icmp_p99_ms),
            ms(r.udp_p99_ms),
            r.mean_down_rate_mbit,
            r.rate_over_capacity,
            r.down_changes
        );
    }
    s += &format!(
        "download rate traces: script - port = {:+.1} Mbit/s on average, |difference| {:.1} \
         Mbit/s; within 10% of capacity of each other in {:.0}% of the 100 ms bins\n",
        c.mean_diff_mbit,
        c.mean_abs_diff_mbit,
        100.0 * c.share_within_10pct
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn single_and_batch_tc_calls_parse_to_rate_changes() {
        let one = parse_tc(
            &words("qdisc change root dev wan cake bandwidth 12345Kbit"),
            |_| unreachable!(),
        )
        .unwrap();
        assert_eq!(
            one,
            vec![TcOp::SetBandwidth {
                dev: "wan".into(),
                rate: "12345Kbit".into()
            }]
        );
        let batch = parse_tc(&words("-force -batch -"), |f| {
            assert_eq!(f, "-");
            Ok("qdisc change root dev ifb-wan cake bandwidth 2000Kbit\n\nqdisc change root dev wan cake bandwidth 3000Kbit\n".into())
        })
        .unwrap();
        assert_eq!(batch.len(), 2);
        assert_eq!(
            batch[1],
            TcOp::SetBandwidth {
                dev: "wan".into(),
                rate: "3000Kbit".into()
            }
        );
        assert_eq!(
            parse_tc(&words("qdisc show dev wan"), |_| unreachable!()).unwrap(),
            vec![TcOp::Show {
                dev: Some("wan".into())
            }]
        );
    }

    #[test]
    fn other_tc_calls_are_errors_naming_what_is_handled() {
        let e = parse_tc(&words("filter add dev wan"), |_| unreachable!()).unwrap_err();
        assert!(e.to_string().contains("only `qdisc change"), "{e}");
        let e = parse_tc(
            &words("qdisc change root dev wan fq_codel"),
            |_| unreachable!(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("not a cake qdisc"), "{e}");
        let e = parse_tc(&words("qdisc change root dev wan cake"), |_| unreachable!()).unwrap_err();
        assert!(e.to_string().contains("bandwidth RATE"), "{e}");
        assert!(parse_tc(&words("-batch"), |_| unreachable!()).is_err());
    }

    #[test]
    fn shim_log_lines_round_trip() {
        for c in [
            ShimCall {
                t: 1700000000.25,
                dev: "r0".into(),
                bit_s: 12_345_000,
                error: None,
            },
            ShimCall {
                t: 1.5,
                dev: "r1".into(),
                bit_s: 1,
                error: Some("cannot connect to /run/x.sock: refused".into()),
            },
        ] {
            let l = c.to_line();
            assert_eq!(ShimCall::parse(&l), Some(c), "{l}");
        }
        assert_eq!(ShimCall::parse("garbage"), None);
    }

    #[test]
    fn the_config_sets_rates_reflectors_and_keeps_pinging_when_idle() {
        let t = config_text(&ScriptConfig {
            dl_if: "lan".into(),
            ul_if: "wan".into(),
            down: RatesKbps {
                min: 1500,
                base: 20000,
                max: 80000,
            },
            up: RatesKbps {
                min: 5000,
                base: 20000,
                max: 35000,
            },
            reflectors: vec!["10.0.0.1".into(), "10.0.0.2".into()],
            ping_interval_s: 0.1,
            log_dir: "/tmp/x".into(),
        });
        for want in [
            "dl_if=lan\n",
            "ul_if=wan\n",
            "min_dl_shaper_rate_kbps=1500\n",
            "max_ul_shaper_rate_kbps=35000\n",
            "reflectors=(\"10.0.0.1\" \"10.0.0.2\")\n",
            "no_pingers=2\n",
            "reflector_ping_interval_s=0.100\n",
            "enable_sleep_function=0\n",
            // Below the 1500 kbit/s download minimum, as cake-autorate requires.
            "connection_active_thr_kbps=1500\n",
            "log_file_path_override=\"/tmp/x\"\n",
        ] {
            assert!(t.contains(want), "{want:?} missing in:\n{t}");
        }
    }
}
