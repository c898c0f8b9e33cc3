//! Embeds every `scenarios/*.toml` of the repository as a built-in scenario of `purple sim`
//! (name = file stem): writes `$OUT_DIR/builtin_scenarios.rs`, a slice of
//! `(name, absolute path, include_str!(path))` sorted by name.

use std::fmt::Write as _;
use std::path::PathBuf;

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default());
    let dir = manifest.join("../../scenarios");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut entries: Vec<(String, PathBuf)> = Vec::new();
    if let Ok(rd) = std::fs::read_dir(&dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.extension().and_then(|x| x.to_str()) == Some("toml") {
                if let Some(stem) = p.file_stem().and_then(|s| s.to_str()) {
                    let abs = p.canonicalize().unwrap_or(p.clone());
                    println!("cargo:rerun-if-changed={}", abs.display());
                    entries.push((stem.to_string(), abs));
                }
            }
        }
    }
    entries.sort();
    let mut out = String::from("&[\n");
    for (name, path) in &entries {
        let _ = writeln!(
            out,
            "    ({name:?}, {p:?}, include_str!({p:?})),",
            p = path.display().to_string()
        );
    }
    out.push_str("]\n");
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").unwrap_or_default());
    if let Err(e) = std::fs::write(out_dir.join("builtin_scenarios.rs"), out) {
        panic!("cannot write builtin_scenarios.rs: {e}");
    }
}
