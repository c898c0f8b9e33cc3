//! `cargo xtask test [--no-install] [-- CARGO-TEST-ARGS]`: the README's test command.
//!
//! 1. Installs what the test suite needs and a fresh Debian machine lacks (only as root, and only
//!    what is missing): iproute2; mosquitto and mosquitto-clients (the MQTT export's broker);
//!    fping and ethtool (`purple bench control`'s test);
//!    the QEMU reference kernel with Linux's own sch_cake (through
//!    `shared/tools/refkernel/build-initramfs.sh`, which apt-installs qemu-system-x86, busybox,
//!    iproute2, iperf3 and a few more, and downloads Debian's 6.1 kernel package without
//!    installing it); and, as any user, Flent 2.3 from PyPI into `target/flent-venv`.
//! 2. Runs `cargo test --workspace --no-fail-fast` with `PURPLE_SKIP_LOG` set, so every test skipped for a
//!    missing prerequisite (see the `testkit` crate) is recorded.
//! 3. Prints "N skipped: reason" per reason (or "0 skipped") and exits with the tests' status.
//!
//! Under `CI=true` a skipped test fails instead (testkit), so CI cannot go green without
//! running the kernel-reference, namespace and lab tests.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// The Flent release the file-format tests are checked against.
const FLENT: &str = "flent==2.3.0";
const MATPLOTLIB: &str = "matplotlib";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("test") => test(&args[1..]),
        _ => {
            eprintln!(
                "usage: cargo xtask test [--no-install] [-- CARGO-TEST-ARGS]\n\
                 installs the tests' prerequisites (as root), runs `cargo test --workspace` \
                 and summarises skipped tests"
            );
            ExitCode::from(2)
        }
    }
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("target"))
}

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

fn on_path(prog: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|p| {
        std::env::split_paths(&p)
            .chain(["/usr/sbin", "/sbin"].map(PathBuf::from))
            .any(|d| d.join(prog).is_file())
    })
}

fn step(what: &str) {
    eprintln!("xtask: {what}");
}

/// Runs `cmd`, echoing it; true on success.
fn sh(cmd: &mut Command) -> bool {
    step(&format!("$ {cmd:?}"));
    match cmd.status() {
        Ok(s) => s.success(),
        Err(e) => {
            step(&format!("cannot run {:?}: {e}", cmd.get_program()));
            false
        }
    }
}

fn apt_install(pkgs: &[&str]) -> bool {
    let install = |c: &mut Command| {
        sh(c.env("DEBIAN_FRONTEND", "noninteractive")
            .args(["install", "-y", "-q", "--no-install-recommends"])
            .args(pkgs))
    };
    install(&mut Command::new("apt-get"))
        || (sh(Command::new("apt-get").args(["update", "-q"]))
            && install(&mut Command::new("apt-get")))
}

/// `shared/tools/refkernel`, as the tests look for it (testkit::refkernel_dir).
fn refkernel_dir() -> Option<PathBuf> {
    [
        std::env::var_os("PURPLE_REFKERNEL").map(PathBuf::from),
        Some(workspace().join("../shared/tools/refkernel")),
        Some(PathBuf::from("/work/shared/tools/refkernel")),
    ]
    .into_iter()
    .flatten()
    .find(|d| d.join("build-initramfs.sh").is_file())
}

/// Installs what is missing; returns the Flent binary if it is (now) there.
fn install(allowed: bool) -> Option<PathBuf> {
    let root = is_root();
    if allowed && root {
        if !on_path("ip") {
            apt_install(&["iproute2"]);
        }
        // The MQTT export's test runs Debian's broker and its clients.
        if ![
            "mosquitto",
            "mosquitto_sub",
            "mosquitto_pub",
            "mosquitto_passwd",
        ]
        .iter()
        .all(|p| on_path(p))
        {
            apt_install(&["mosquitto", "mosquitto-clients"]);
        }
        // `purple bench control`'s test: fping (the stand-in for cake-autorate pings with it)
        // and ethtool (threaded NAPI on the bench's veths). The reference kernel's tools
        // install both too, when they are there.
        if !["fping", "ethtool"].iter().all(|p| on_path(p)) {
            apt_install(&["fping", "ethtool"]);
        }
        match refkernel_dir() {
            Some(d) => {
                // Idempotent: installs missing packages (QEMU among them) and builds the cached
                // kernel bundle once.
                if !sh(
                    Command::new(d.join("build-initramfs.sh")).stdout(std::process::Stdio::null())
                ) {
                    step("the reference kernel could not be set up: its tests will fail or skip");
                }
            }
            None => step("shared/tools/refkernel not found: the kernel-reference tests skip"),
        }
    } else if !root {
        step("not root: nothing is installed with apt; tests that need root are skipped");
    }
    let venv = target_dir().join("flent-venv");
    let flent = venv.join("bin/flent");
    if allowed && !flent.is_file() {
        let py = if on_path("python3") {
            "python3"
        } else {
            "python"
        };
        let mut ok = sh(Command::new(py).arg("-m").arg("venv").arg(&venv));
        if !ok && root {
            apt_install(&["python3-venv"]);
            ok = sh(Command::new(py).arg("-m").arg("venv").arg(&venv));
        }
        if ok {
            let pip = venv.join("bin/pip");
            if !sh(Command::new(&pip).args(["install", "-q", FLENT, MATPLOTLIB])) {
                step("Flent could not be installed from PyPI: the Flent tests skip");
            }
        }
    }
    flent.is_file().then_some(flent)
}

fn test(args: &[String]) -> ExitCode {
    let (ours, passthrough) = match args.iter().position(|a| a == "--") {
        Some(i) => (&args[..i], &args[i + 1..]),
        None => (args, &[][..]),
    };
    let allowed = !ours.iter().any(|a| a == "--no-install");
    if let Some(bad) = ours.iter().find(|a| *a != "--no-install") {
        eprintln!("cargo xtask test: unknown option {bad:?} (accepted: --no-install, then -- CARGO-TEST-ARGS)");
        return ExitCode::from(2);
    }
    let flent = install(allowed);
    let log = target_dir().join("test-skips.log");
    let _ = std::fs::create_dir_all(target_dir());
    let _ = std::fs::remove_file(&log);
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(workspace())
        // Every test binary runs even after one fails: the run reports every failure at once.
        .args(["test", "--workspace", "--no-fail-fast"])
        .env("PURPLE_SKIP_LOG", &log);
    if let Some(f) = &flent {
        cmd.env("PURPLE_FLENT", f);
    }
    if !passthrough.is_empty() {
        cmd.args(passthrough);
    }
    let ok = sh(&mut cmd);
    summarise(&log);
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Prints the skipped tests grouped by reason.
fn summarise(log: &Path) {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let mut by_reason: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for l in text.lines() {
        let mut f = l.splitn(3, '\t');
        if let (Some(bin), Some(test), Some(why)) = (f.next(), f.next(), f.next()) {
            by_reason
                .entry(why)
                .or_default()
                .push(format!("{bin}::{test}"));
        }
    }
    let n: usize = by_reason.values().map(Vec::len).sum();
    eprintln!();
    if n == 0 {
        eprintln!("0 skipped");
    }
    for (why, tests) in &by_reason {
        eprintln!("{} skipped: {why}", tests.len());
        for t in tests {
            eprintln!("    {t}");
        }
    }
    if n > 0 {
        eprintln!("{n} skipped in all (prerequisites missing; run as root for `cargo xtask test` to install them)");
    }
}
