//! The harness of every purple test that needs something a machine may lack: root, network
//! namespaces, the QEMU reference kernel, Flent, the mosquitto MQTT broker.
//!
//! **What this crate owns**: the prerequisite checks and the skip/fail policy of every such test.
//! **What it must not do**: be a normal (non-dev) dependency of any crate; report a skipped test
//! as passed.
//!
//! A test whose prerequisite is missing is **skipped, never passed**: it is listed as `ignored`
//! in the test output with a `SKIPPED <binary>::<test>: <reason>` line on stderr, and appended to
//! the file named by `$PURPLE_SKIP_LOG` (which `cargo xtask test` sets and summarises at the end
//! of the run as "N skipped: reason"). Under `CI=true` (or `PURPLE_NO_SKIP=1`) a missing
//! prerequisite is a **failure** instead, so a CI machine that lost a tool goes red.
//!
//! A test file using it declares `harness = false` in its crate's `Cargo.toml` and ends with
//! [`harness!`], which lists every test of the file with its prerequisites:
//!
//! ```no_run
//! fn forwards_through_the_bridge() { /* ... */ }
//! fn parses_the_config() { /* ... */ }
//!
//! testkit::harness! {
//!     [Root, Netns] => { forwards_through_the_bridge },
//!     [] => { parses_the_config },
//! }
//! ```
//!
//! Tests are plain `fn()`s that panic on failure, as with `#[test]`. Command-line arguments are
//! those of the standard harness (`--test-threads`, filters, `--exact`, `--list`,
//! `--ignored`: a skipped test run with `--ignored` fails with its reason).

use libtest_mimic::{Arguments, Failed, Trial};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::OnceLock;

/// Something a test needs from the machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Need {
    /// Effective user id 0.
    Root,
    /// Network namespaces can be created and removed (`ip netns add`); implies root.
    Netns,
    /// The QEMU reference kernel: `run-in-guest.sh` (see [`refkernel_dir`]) and
    /// `qemu-system-x86_64` on `PATH`; implies root (its first run installs packages).
    RefKernel,
    /// Flent 2.x (see [`flent`]).
    Flent,
    /// The mosquitto MQTT broker and its clients (`mosquitto`, `mosquitto_sub`,
    /// `mosquitto_pub`, `mosquitto_passwd`; Debian's `mosquitto` and `mosquitto-clients`).
    Mosquitto,
}

/// One test: its name (as printed and filtered), what it needs, and its body (panics on
/// failure).
#[derive(Clone, Copy, Debug)]
pub struct Test {
    /// Name.
    pub name: &'static str,
    /// Prerequisites; all must hold or the test is skipped.
    pub needs: &'static [Need],
    /// The test.
    pub run: fn(),
}

/// Declares `main` for a `harness = false` test file: `[Need, ...] => { test_fn, ... }` groups.
#[macro_export]
macro_rules! harness {
    ($( [$($need:ident),* $(,)?] => { $($test:ident),* $(,)? } ),* $(,)?) => {
        fn main() -> ::std::process::ExitCode {
            let mut tests = ::std::vec::Vec::new();
            $(
                let needs: &'static [$crate::Need] = &[$($crate::Need::$need),*];
                $( tests.push($crate::Test { name: stringify!($test), needs, run: $test }); )*
            )*
            $crate::run(&tests)
        }
    };
}

/// Whether missing prerequisites fail rather than skip: `CI=true` (or `1`), or
/// `PURPLE_NO_SKIP=1`.
pub fn skips_fail() -> bool {
    let on = |k: &str| {
        std::env::var(k)
            .map(|v| matches!(v.as_str(), "1" | "true" | "yes"))
            .unwrap_or(false)
    };
    on("CI") || on("PURPLE_NO_SKIP")
}

/// Runs `tests` as the standard harness would; returns the process's exit code.
pub fn run(tests: &[Test]) -> ExitCode {
    let args = Arguments::from_args();
    // One place decides where the reference kernel is: the tests' child processes (the lab,
    // `purple`) read the same variable.
    if std::env::var_os("PURPLE_REFKERNEL").is_none() {
        if let Some(d) = refkernel_dir() {
            // Before any thread starts: `run` is called first thing in `main`.
            std::env::set_var("PURPLE_REFKERNEL", d);
        }
    }
    let binary = binary_name();
    let fail = skips_fail();
    let trials = tests
        .iter()
        .map(|t| {
            let body = t.run;
            match unmet(t.needs) {
                None => Trial::test(t.name, move || {
                    body();
                    Ok(())
                }),
                Some(why) if fail => Trial::test(t.name, move || {
                    Err(Failed::from(format!(
                        "prerequisite missing and skipping is off (CI=true or \
                         PURPLE_NO_SKIP=1): {why}"
                    )))
                }),
                Some(why) => {
                    if selected(&args, t.name) {
                        record_skip(&binary, t.name, &why);
                    }
                    Trial::test(t.name, move || {
                        Err(Failed::from(format!("skipped test run anyway: {why}")))
                    })
                    .with_ignored_flag(true)
                }
            }
        })
        .collect();
    libtest_mimic::run(&args, trials).exit_code()
}

/// Whether `name` survives the command line's filters (as the harness applies them), so that
/// only the skips of tests that would have run are reported.
fn selected(args: &Arguments, name: &str) -> bool {
    if args.list || args.ignored {
        return false;
    }
    let hit = |f: &str| {
        if args.exact {
            name == f
        } else {
            name.contains(f)
        }
    };
    args.filter.as_deref().is_none_or(hit) && !args.skip.iter().any(|s| hit(s))
}

/// The test binary's name without cargo's hash suffix (`netns-1a2b3c...` -> `netns`).
fn binary_name() -> String {
    let exe = std::env::args().next().unwrap_or_default();
    let stem = Path::new(&exe)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    match stem.rsplit_once('-') {
        Some((base, hash)) if hash.len() == 16 && hash.chars().all(|c| c.is_ascii_hexdigit()) => {
            base.to_string()
        }
        _ => stem,
    }
}

/// Prints the skip on stderr and appends it to `$PURPLE_SKIP_LOG` (one line: binary, test,
/// reason, tab-separated).
fn record_skip(binary: &str, test: &str, why: &str) {
    eprintln!("SKIPPED {binary}::{test}: {why}");
    let Some(path) = std::env::var_os("PURPLE_SKIP_LOG") else {
        return;
    };
    let line = format!("{binary}\t{test}\t{why}\n");
    let r = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut f| f.write_all(line.as_bytes()));
    if let Err(e) = r {
        eprintln!(
            "cannot append to PURPLE_SKIP_LOG {}: {e}",
            Path::new(&path).display()
        );
    }
}

/// Why `needs` do not all hold, or `None` when they do. Each check runs once per process.
pub fn unmet(needs: &[Need]) -> Option<String> {
    needs.iter().find_map(|n| match n {
        Need::Root => root(),
        Need::Netns => root().or_else(|| cached(&NETNS, netns)),
        Need::RefKernel => root().or_else(|| cached(&REFKERNEL, refkernel)),
        Need::Flent => cached(&FLENT, || flent().err().map(|e| e.to_string())),
        Need::Mosquitto => mosquitto(),
    })
}

fn mosquitto() -> Option<String> {
    let missing: Vec<&str> = [
        "mosquitto",
        "mosquitto_sub",
        "mosquitto_pub",
        "mosquitto_passwd",
    ]
    .into_iter()
    .filter(|p| on_path(p).is_none())
    .collect();
    (!missing.is_empty()).then(|| {
        format!(
            "{} not installed (Debian's mosquitto and mosquitto-clients; `cargo xtask test` \
             installs them as root)",
            missing.join(", ")
        )
    })
}

static NETNS: OnceLock<Option<String>> = OnceLock::new();
static REFKERNEL: OnceLock<Option<String>> = OnceLock::new();
static FLENT: OnceLock<Option<String>> = OnceLock::new();

fn cached(cell: &OnceLock<Option<String>>, f: impl FnOnce() -> Option<String>) -> Option<String> {
    cell.get_or_init(f).clone()
}

/// Whether this process runs as root.
pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

fn root() -> Option<String> {
    (!is_root()).then(|| "needs root".to_string())
}

/// Whether `prog` is an executable on `PATH` (or a path to one).
pub fn on_path(prog: &str) -> Option<PathBuf> {
    let p = Path::new(prog);
    if p.components().count() > 1 {
        return p.is_file().then(|| p.to_path_buf());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin"].map(PathBuf::from))
        .map(|d| d.join(prog))
        .find(|c| c.is_file())
}

fn netns() -> Option<String> {
    let Some(ip) = on_path("ip") else {
        return Some("iproute2's `ip` is not installed".into());
    };
    let name = format!("ptk-probe-{}", std::process::id());
    let run = |args: &[&str]| {
        Command::new(&ip)
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
    };
    match run(&["netns", "add", &name]) {
        Ok(o) if o.status.success() => {
            let _ = run(&["netns", "del", &name]);
            None
        }
        Ok(o) => Some(format!(
            "cannot create a network namespace: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Err(e) => Some(format!("cannot run `ip netns add`: {e}")),
    }
}

/// The reference-kernel tools (`run-in-guest.sh`): `$PURPLE_REFKERNEL`, else
/// `shared/tools/refkernel` beside the repository, else `/work/shared/tools/refkernel`.
pub fn refkernel_dir() -> Option<PathBuf> {
    let candidates = [
        std::env::var_os("PURPLE_REFKERNEL").map(PathBuf::from),
        Some(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/tools/refkernel")),
        Some(PathBuf::from("/work/shared/tools/refkernel")),
    ];
    candidates
        .into_iter()
        .flatten()
        .find(|d| d.join("run-in-guest.sh").is_file())
        .map(|d| d.canonicalize().unwrap_or(d))
}

fn refkernel() -> Option<String> {
    if std::env::var("PURPLE_REFKERNEL").as_deref() == Ok("0") {
        return Some("PURPLE_REFKERNEL=0".into());
    }
    if refkernel_dir().is_none() {
        return Some(
            "the reference kernel tools (shared/tools/refkernel/run-in-guest.sh) are not \
             found; set PURPLE_REFKERNEL"
                .into(),
        );
    }
    if on_path("qemu-system-x86_64").is_none() {
        return Some(
            "qemu-system-x86_64 is not installed (`cargo xtask test` installs it as root)".into(),
        );
    }
    None
}

/// Why [`flent`] found no usable Flent.
#[derive(Debug)]
pub enum FlentError {
    /// None of the places holds it.
    NotInstalled,
    /// `flent --version` could not run.
    Run {
        /// The program.
        bin: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// It runs but is not Flent 2.
    NotVersion2 {
        /// The program.
        bin: PathBuf,
        /// What `--version` printed.
        output: String,
    },
}

impl std::fmt::Display for FlentError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FlentError::NotInstalled => write!(
                f,
                "Flent is not installed (`cargo xtask test` installs it from PyPI into \
                 target/flent-venv; or set PURPLE_FLENT)"
            ),
            FlentError::Run { bin, source } => write!(f, "{}: {source}", bin.display()),
            FlentError::NotVersion2 { bin, output } => write!(
                f,
                "{} --version did not report Flent 2: {output}",
                bin.display()
            ),
        }
    }
}

impl std::error::Error for FlentError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            FlentError::Run { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Flent: `$PURPLE_FLENT`, else `target/flent-venv/bin/flent` of this workspace (where `cargo
/// xtask test` installs it), else `flent` on `PATH`; it must report version 2.
pub fn flent() -> Result<PathBuf, FlentError> {
    let candidates = [
        std::env::var_os("PURPLE_FLENT").map(PathBuf::from),
        Some(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/flent-venv/bin/flent")),
        on_path("flent"),
    ];
    let Some(bin) = candidates.into_iter().flatten().find(|p| p.is_file()) else {
        return Err(FlentError::NotInstalled);
    };
    let out = Command::new(&bin)
        .arg("--version")
        .output()
        .map_err(|source| FlentError::Run {
            bin: bin.clone(),
            source,
        })?;
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    if out.status.success() && text.contains("Flent v2.") {
        Ok(bin)
    } else {
        Err(FlentError::NotVersion2 {
            bin,
            output: text.trim().to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_select_as_the_harness_does() {
        let a = Arguments {
            filter: Some("bridge".into()),
            ..Arguments::default()
        };
        assert!(selected(&a, "ping_through_the_bridge"));
        assert!(!selected(&a, "lab_run"));
        let a = Arguments {
            filter: Some("lab".into()),
            exact: true,
            ..Arguments::default()
        };
        assert!(!selected(&a, "lab_run"));
        assert!(selected(&a, "lab"));
        let a = Arguments {
            skip: vec!["slow".into()],
            ..Arguments::default()
        };
        assert!(!selected(&a, "a_slow_one"));
        assert!(selected(&a, "quick"));
    }
}
