#![allow(clippy::unwrap_used)]
//! The router binary `purple-control` validates configurations like `purple control --check` and
//! names what it does not accept.

use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_purple-control"))
}

#[test]
fn check_accepts_the_packaged_config_and_summarises_it() {
    let cfg = concat!(env!("CARGO_MANIFEST_DIR"), "/../../packaging/purple.toml");
    let out = bin().args(["--check", "--config", cfg]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(
        s.contains(": OK") && s.contains("algorithm purple (defaults)"),
        "{s}"
    );
}

/// Runs `--check` on a configuration file holding `text` (written to a temporary directory
/// named after `tag`, removed afterwards).
fn check_text(tag: &str, text: &str) -> std::process::Output {
    let dir = std::env::temp_dir().join(format!("purple-control-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("purple.toml");
    std::fs::write(&f, text).unwrap();
    let out = bin()
        .args(["--check", "--config", f.to_str().unwrap()])
        .output()
        .unwrap();
    std::fs::remove_dir_all(&dir).ok();
    out
}

#[test]
fn check_names_the_laws_parameters_set_in_its_section() {
    let out = check_text("params", "[purple]\ntarget = 5\n[aimd]\ntarget = 20\n");
    let s = String::from_utf8_lossy(&out.stdout);
    // Only the chosen law's section is summarised.
    assert!(
        s.contains("algorithm purple (target = 5; the rest at their defaults)"),
        "{s}"
    );
}

#[test]
fn check_rejects_a_bad_option_naming_it_and_the_accepted_range() {
    let out = check_text("bad", "[probe]\nrate_hz = 0\n");
    assert!(!out.status.success());
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("rate_hz") && e.contains("accepted"), "{e}");
}

#[test]
fn unknown_arguments_are_refused_with_the_accepted_ones() {
    let out = bin().arg("--bandwidth").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(
        e.contains("--bandwidth") && e.contains("--config FILE"),
        "{e}"
    );
    let out = bin().args(["reflector", "--port", "x"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--port"));
}
