//! `purple bench sim --versus-ns3`: the same dumbbell in our simulator and in ns-3, measured in
//! one run.
//!
//! Our side is the built-in scenario `ns3-dumbbell` (scenarios/ns3-dumbbell.toml). The ns-3 side
//! is our own C++ program (crates/cli/ns3/dumbbell.cc, embedded in the binary), written to a
//! build directory, compiled with `g++` against the system's ns-3 (Debian's `libns3-dev`, which
//! this command installs with apt-get when it is missing and ns-3 is looked for under `/usr`),
//! and run as a child process that reports its own CPU time. Both count simulated packets the
//! same way: every packet that starts crossing a link, once per link.

use crate::bench::{measure_cpu, SimResult};
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The ns-3 program's source.
const PROGRAM: &str = include_str!("../ns3/dumbbell.cc");

/// The built-in scenario of our side.
pub const SCENARIO: &str = "ns3-dumbbell";

/// ns-3 libraries the program links.
const LIBS: [&str; 6] = [
    "ns3-core",
    "ns3-network",
    "ns3-internet",
    "ns3-point-to-point",
    "ns3-applications",
    "ns3-traffic-control",
];

/// What can keep the ns-3 side from giving a measurement.
#[derive(Debug)]
pub enum Ns3Error {
    /// ns-3's headers or libraries are not under `prefix`.
    NotFound {
        /// Where ns-3 was looked for.
        prefix: PathBuf,
        /// The first file that is missing.
        missing: PathBuf,
        /// Why nothing was installed.
        not_installed: &'static str,
    },
    /// `apt-get` failed.
    Install(String),
    /// A file operation failed.
    Io {
        /// What was being done.
        what: String,
        /// The error.
        error: io::Error,
    },
    /// `g++` failed.
    Build {
        /// The command line.
        command: String,
        /// Its standard error (the end of it).
        stderr: String,
    },
    /// The program failed.
    Run {
        /// Its exit status.
        status: String,
        /// Its standard error (the end of it).
        stderr: String,
    },
    /// The program's output lacks a figure.
    Output(String),
}

impl fmt::Display for Ns3Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Ns3Error::NotFound {
                prefix,
                missing,
                not_installed,
            } => write!(
                f,
                "ns-3 not found under {} (no {}); not installed: {not_installed}. Install \
                 Debian's libns3-dev (apt-get install libns3-dev) or give --ns3-prefix",
                prefix.display(),
                missing.display()
            ),
            Ns3Error::Install(e) => write!(f, "installing ns-3 (libns3-dev) failed: {e}"),
            Ns3Error::Io { what, error } => write!(f, "ns-3: {what}: {error}"),
            Ns3Error::Build { command, stderr } => {
                write!(f, "building the ns-3 program failed: {command}\n{stderr}")
            }
            Ns3Error::Run { status, stderr } => {
                write!(f, "the ns-3 program failed ({status}):\n{stderr}")
            }
            Ns3Error::Output(e) => write!(f, "the ns-3 program's output: {e}"),
        }
    }
}

impl std::error::Error for Ns3Error {}

/// Where ns-3 is installed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ns3Install {
    /// The directory holding `ns3/core-module.h`.
    pub include: PathBuf,
    /// The directory holding `libns3-core.so`.
    pub lib: PathBuf,
    /// ns-3's version from its pkg-config file (`3.37`), or `unknown`.
    pub version: String,
}

/// Looks for ns-3 under `prefix` (`/usr` for Debian's libns3-dev): headers in
/// `PREFIX/include/ns3`, libraries in `PREFIX/lib` or `PREFIX/lib/<multiarch>`.
pub fn find(prefix: &Path) -> Result<Ns3Install, Ns3Error> {
    let not_found = |missing: PathBuf| Ns3Error::NotFound {
        prefix: prefix.to_path_buf(),
        missing,
        not_installed: "",
    };
    let include = prefix.join("include");
    let header = include.join("ns3/core-module.h");
    if !header.is_file() {
        return Err(not_found(header));
    }
    let lib_root = prefix.join("lib");
    let mut lib_dirs = vec![lib_root.clone()];
    if let Ok(rd) = std::fs::read_dir(&lib_root) {
        let mut subs: Vec<PathBuf> = rd
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.is_dir())
            .collect();
        subs.sort();
        lib_dirs.extend(subs);
    }
    let Some(lib) = lib_dirs
        .into_iter()
        .find(|d| d.join("libns3-core.so").exists())
    else {
        return Err(not_found(lib_root.join("libns3-core.so")));
    };
    let version = std::fs::read_to_string(lib.join("pkgconfig/ns3-core.pc"))
        .ok()
        .and_then(|pc| {
            pc.lines()
                .find_map(|l| l.strip_prefix("Version:"))
                .map(|v| v.trim().to_string())
        })
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "unknown".to_string());
    Ok(Ns3Install {
        include,
        lib,
        version,
    })
}

/// Finds ns-3 under `prefix`; when it is missing, `prefix` is `/usr` and `install` is set,
/// installs Debian's `libns3-dev` with apt-get (progress on stderr) and looks again.
pub fn find_or_install(prefix: &Path, install: bool) -> Result<Ns3Install, Ns3Error> {
    match find(prefix) {
        Ok(i) => Ok(i),
        Err(Ns3Error::NotFound {
            prefix: p, missing, ..
        }) => {
            let reason = if !install {
                "--no-install"
            } else if prefix != Path::new("/usr") {
                "apt-get installs under /usr, not under --ns3-prefix"
            } else {
                ""
            };
            if !reason.is_empty() {
                return Err(Ns3Error::NotFound {
                    prefix: p,
                    missing,
                    not_installed: reason,
                });
            }
            eprintln!("ns-3 is missing: installing Debian's libns3-dev with apt-get");
            apt_get(&["update"])?;
            apt_get(&["install", "-y", "libns3-dev"])?;
            find(prefix)
        }
        Err(e) => Err(e),
    }
}

/// Runs `apt-get ARGS` non-interactively, its output going to our stderr.
fn apt_get(args: &[&str]) -> Result<(), Ns3Error> {
    let status = Command::new("apt-get")
        .args(args)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .stdout(std::process::Stdio::from(io::stderr()))
        .status()
        .map_err(|e| Ns3Error::Install(format!("apt-get {}: {e}", args.join(" "))))?;
    if status.success() {
        Ok(())
    } else {
        Err(Ns3Error::Install(format!(
            "apt-get {} exited with {status} (root is needed)",
            args.join(" ")
        )))
    }
}

/// 64-bit FNV-1a of `parts` (names the built program after its inputs).
fn fnv(parts: &[&str]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for &b in p.as_bytes().iter().chain(&[0xff]) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}

/// The last `n` lines of `text`.
fn tail(text: &[u8], n: usize) -> String {
    let s = String::from_utf8_lossy(text);
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Writes the program into `dir` and compiles it (`g++ -O2`) against `ns3`, unless a binary
/// built from the same source against the same ns-3 is already there. Returns the binary.
pub fn build(ns3: &Ns3Install, dir: &Path) -> Result<PathBuf, Ns3Error> {
    let io_err = |what: String| move |error| Ns3Error::Io { what, error };
    std::fs::create_dir_all(dir).map_err(io_err(format!("creating {}", dir.display())))?;
    let key = fnv(&[
        PROGRAM,
        &ns3.version,
        &ns3.include.to_string_lossy(),
        &ns3.lib.to_string_lossy(),
    ]);
    let bin = dir.join(format!("dumbbell-{key:016x}"));
    if bin.is_file() {
        return Ok(bin);
    }
    let src = dir.join("dumbbell.cc");
    std::fs::write(&src, PROGRAM).map_err(io_err(format!("writing {}", src.display())))?;
    let partial = dir.join(format!("dumbbell-{key:016x}.partial"));
    let mut cmd = Command::new("g++");
    cmd.args(["-O2", "-std=c++17", "-o"])
        .arg(&partial)
        .arg(&src)
        .arg(format!("-I{}", ns3.include.display()))
        .arg(format!("-L{}", ns3.lib.display()))
        .arg(format!("-Wl,-rpath,{}", ns3.lib.display()));
    for l in LIBS {
        cmd.arg(format!("-l{l}"));
    }
    let command = format!("{cmd:?}");
    eprintln!("building the ns-3 program (g++, about a minute)");
    let out = cmd.output().map_err(|e| Ns3Error::Build {
        command: command.clone(),
        stderr: e.to_string(),
    })?;
    if !out.status.success() {
        return Err(Ns3Error::Build {
            command,
            stderr: tail(&out.stderr, 30),
        });
    }
    std::fs::rename(&partial, &bin).map_err(io_err(format!("renaming to {}", bin.display())))?;
    Ok(bin)
}

/// What the ns-3 program measured.
#[derive(Clone, Debug, PartialEq)]
pub struct Ns3Result {
    /// ns-3's version.
    pub version: String,
    /// Virtual seconds simulated.
    pub simulated_s: f64,
    /// The process's CPU seconds from the start of `main` to the end of the run.
    pub cpu_s: f64,
    /// CPU seconds of `Simulator::Run` alone.
    pub run_cpu_s: f64,
    /// Packets that began transmission on a link, summed over links.
    pub packets: u64,
    /// Bytes received by the sinks per virtual second.
    pub goodput_bps: f64,
    /// Sinks that received data.
    pub flows_with_progress: usize,
}

impl Ns3Result {
    /// Simulated packets per CPU second.
    pub fn packets_per_cpu_s(&self) -> f64 {
        self.packets as f64 / self.cpu_s.max(1e-9)
    }
}

/// Reads the program's `purple-ns3 key=value ...` line.
pub fn parse_output(text: &str, version: &str) -> Result<Ns3Result, Ns3Error> {
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("purple-ns3 "))
        .ok_or_else(|| Ns3Error::Output(format!("no `purple-ns3` line in {text:?}")))?;
    let get = |key: &str| -> Result<f64, Ns3Error> {
        let v = line
            .split_whitespace()
            .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
            .ok_or_else(|| Ns3Error::Output(format!("no {key} in {line:?}")))?;
        v.parse::<f64>()
            .ok()
            .filter(|x| x.is_finite() && *x >= 0.0)
            .ok_or_else(|| Ns3Error::Output(format!("{key}={v} is not a non-negative number")))
    };
    let cpu_s = get("cpu_s")?;
    if cpu_s <= 0.0 {
        return Err(Ns3Error::Output(format!("cpu_s is 0 in {line:?}")));
    }
    Ok(Ns3Result {
        version: version.to_string(),
        simulated_s: get("sim_s")?,
        cpu_s,
        run_cpu_s: get("run_cpu_s")?,
        packets: get("packets")? as u64,
        goodput_bps: get("goodput_bps")?,
        flows_with_progress: get("flows_with_progress")? as usize,
    })
}

/// Runs the built program for `seconds` of virtual time.
pub fn run(bin: &Path, version: &str, seconds: f64) -> Result<Ns3Result, Ns3Error> {
    let out = Command::new(bin)
        .arg(format!("--seconds={seconds}"))
        .output()
        .map_err(|error| Ns3Error::Io {
            what: format!("running {}", bin.display()),
            error,
        })?;
    if !out.status.success() {
        return Err(Ns3Error::Run {
            status: out.status.to_string(),
            stderr: tail(&out.stderr, 30),
        });
    }
    parse_output(&String::from_utf8_lossy(&out.stdout), version)
}

/// Options of the comparison.
#[derive(Clone, Debug)]
pub struct VersusOpts {
    /// Virtual seconds on both sides.
    pub seconds: f64,
    /// Where ns-3 is looked for.
    pub prefix: PathBuf,
    /// Install libns3-dev when missing (only for prefix `/usr`).
    pub install: bool,
    /// Where the program is built.
    pub build_dir: PathBuf,
}

/// Our side: the built-in scenario for `seconds` of virtual time, timed in this thread's CPU
/// time (building the topology included, as on the ns-3 side).
pub fn run_ours(seconds: f64) -> Result<SimResult, String> {
    let b = crate::builtin::find(SCENARIO)
        .ok_or_else(|| format!("built-in scenario {SCENARIO} is missing"))?;
    let mut sc = sim::Scenario::parse(b.text).map_err(|e| e.to_string())?;
    sc.duration_s = seconds;
    let flows = sc.apps.len();
    let (built, m) = measure_cpu(|| {
        let mut built = sc.build(&b.dir()).map_err(|e| e.to_string())?;
        built.sim.run_until(built.end);
        Ok::<_, String>(built)
    });
    let built = built?;
    let receivers: Vec<&sim::TcpReceiverApp> = built
        .apps
        .iter()
        .filter_map(|&(_, id)| built.sim.app_as::<sim::TcpReceiverApp>(id))
        .collect();
    let secs = built
        .sim
        .now()
        .saturating_duration_since(qdisc::Instant::ZERO)
        .as_secs_f64();
    Ok(SimResult {
        workload: SCENARIO,
        flows,
        simulated_s: secs,
        wall_s: m.wall_s,
        cpu_s: m.cpu_s,
        packets: built.sim.link_transmissions(),
        events: built.sim.events_processed(),
        peak_rss_kib: m.peak_rss_kib,
        flows_with_progress: receivers.iter().filter(|r| r.delivered() > 0).count(),
        goodput_bps: receivers.iter().map(|r| r.delivered() as f64).sum::<f64>() / secs.max(1e-9),
    })
}

/// The ns-3 side: find (or install), build, run.
pub fn run_ns3(o: &VersusOpts) -> Result<Ns3Result, Ns3Error> {
    let ns3 = find_or_install(&o.prefix, o.install)?;
    let bin = build(&ns3, &o.build_dir)?;
    run(&bin, &ns3.version, o.seconds)
}

/// Both sides as a text table and the ratios; `ns3` may be missing (its error is printed by
/// the caller).
pub fn to_table(ours: &SimResult, ns3: Option<&Ns3Result>) -> String {
    let mut s = format!(
        "dumbbell: {} CUBIC flows, 1 Gbit/s 1 ms access, 100 Mbit/s 10 ms FQ-CoDel bottleneck, \
         {:.0} s simulated; both sides in this run\n",
        ours.flows, ours.simulated_s
    );
    s += &format!(
        "{:<12} {:>9} {:>11} {:>12} {:>14} {:>9}\n",
        "simulator", "cpu_s", "packets", "pkts/cpu_s", "goodput_Mbit/s", "progress"
    );
    s += &format!(
        "{:<12} {:>9.3} {:>11} {:>12.0} {:>14.2} {:>9}\n",
        "purple",
        ours.cpu_s,
        ours.packets,
        ours.packets_per_cpu_s(),
        ours.goodput_bps * 8.0 / 1e6,
        ours.flows_with_progress
    );
    if let Some(n) = ns3 {
        s += &format!(
            "{:<12} {:>9.3} {:>11} {:>12.0} {:>14.2} {:>9}\n",
            format!("ns-3 {}", n.version),
            n.cpu_s,
            n.packets,
            n.packets_per_cpu_s(),
            n.goodput_bps * 8.0 / 1e6,
            n.flows_with_progress
        );
        s += &format!(
            "ns-3 CPU time / purple CPU time: {:.1}x; packets per CPU second, purple / ns-3: \
             {:.1}x (ns-3's Simulator::Run alone: {:.3} s)\n",
            n.cpu_s / ours.cpu_s.max(1e-9),
            ours.packets_per_cpu_s() / n.packets_per_cpu_s().max(1e-9),
            n.run_cpu_s
        );
    }
    s += "cpu_s includes building the topology; packets = transmissions summed over links\n";
    s
}

/// Both sides as one JSON object: `{"purple":{..},"ns3":{..}|null,"ns3_error":".."|null,
/// "cpu_ratio":..|null,"packets_per_cpu_ratio":..|null}`.
pub fn to_json(ours: &SimResult, ns3: Result<&Ns3Result, &Ns3Error>) -> String {
    let r3 = |x: f64| (x * 1000.0).round() / 1000.0;
    // CPU seconds to the microsecond: a short run takes well under a millisecond, and a
    // measured time must not print as 0.
    let r6 = |x: f64| (x * 1e6).round() / 1e6;
    let side = |cpu: f64, packets: u64, goodput: f64, progress: usize, sim_s: f64| {
        serde_json::json!({
            "simulated_s": r3(sim_s),
            "cpu_s": r6(cpu),
            "packets": packets,
            "packets_per_cpu_s": (packets as f64 / cpu.max(1e-9)).round(),
            "goodput_mbit": r3(goodput * 8.0 / 1e6),
            "flows_with_progress": progress,
        })
    };
    let purple = side(
        ours.cpu_s,
        ours.packets,
        ours.goodput_bps,
        ours.flows_with_progress,
        ours.simulated_s,
    );
    let v = match ns3 {
        Ok(n) => {
            let mut j = side(
                n.cpu_s,
                n.packets,
                n.goodput_bps,
                n.flows_with_progress,
                n.simulated_s,
            );
            j["version"] = serde_json::json!(n.version);
            j["run_cpu_s"] = serde_json::json!(r3(n.run_cpu_s));
            serde_json::json!({
                "purple": purple,
                "ns3": j,
                "ns3_error": null,
                "cpu_ratio": r3(n.cpu_s / ours.cpu_s.max(1e-9)),
                "packets_per_cpu_ratio":
                    r3(ours.packets_per_cpu_s() / n.packets_per_cpu_s().max(1e-9)),
            })
        }
        Err(e) => serde_json::json!({
            "purple": purple,
            "ns3": null,
            "ns3_error": e.to_string(),
            "cpu_ratio": null,
            "packets_per_cpu_ratio": null,
        }),
    };
    v.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_programs_line_is_read_and_a_missing_figure_is_an_error() {
        let r = parse_output(
            "noise\npurple-ns3 sim_s=60.000000 cpu_s=16.25 run_cpu_s=16.1 packets=1234567 \
             goodput_bps=11800000.5 flows_with_progress=50\n",
            "3.37",
        )
        .expect("parses");
        assert_eq!(r.packets, 1_234_567);
        assert_eq!(r.flows_with_progress, 50);
        assert!((r.cpu_s - 16.25).abs() < 1e-12);
        assert!((r.packets_per_cpu_s() - 1_234_567.0 / 16.25).abs() < 1e-6);
        let e = parse_output("purple-ns3 sim_s=1 cpu_s=2 packets=3", "3.37").expect_err("an error");
        assert!(e.to_string().contains("run_cpu_s"), "{e}");
        let e = parse_output(
            "purple-ns3 sim_s=1 cpu_s=0 run_cpu_s=0 packets=3 goodput_bps=1 \
             flows_with_progress=1",
            "3.37",
        )
        .expect_err("an error");
        assert!(e.to_string().contains("cpu_s is 0"), "{e}");
        assert!(parse_output("", "3.37").is_err());
    }

    #[test]
    fn ns3_is_not_found_under_an_empty_prefix_and_nothing_is_installed_there() {
        let dir = std::env::temp_dir().join(format!("purple-ns3-none-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let e = find_or_install(&dir, true).expect_err("an error");
        let msg = e.to_string();
        assert!(msg.contains("ns-3 not found"), "{msg}");
        assert!(msg.contains("libns3-dev"), "{msg}");
        assert!(msg.contains("not under --ns3-prefix"), "{msg}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_fake_install_is_found_with_its_version() {
        let dir = std::env::temp_dir().join(format!("purple-ns3-fake-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let lib = dir.join("lib/x86_64-linux-gnu");
        std::fs::create_dir_all(dir.join("include/ns3")).expect("dirs");
        std::fs::create_dir_all(lib.join("pkgconfig")).expect("dirs");
        std::fs::write(dir.join("include/ns3/core-module.h"), "").expect("write");
        // Headers alone are not enough: the library is looked for too.
        assert!(matches!(find(&dir), Err(Ns3Error::NotFound { .. })));
        std::fs::write(lib.join("libns3-core.so"), "").expect("write");
        std::fs::write(
            lib.join("pkgconfig/ns3-core.pc"),
            "Name: ns3-core\nVersion: 3.37\n",
        )
        .expect("write");
        let i = find(&dir).expect("found");
        assert_eq!(i.lib, lib);
        assert_eq!(i.include, dir.join("include"));
        assert_eq!(i.version, "3.37");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
