//! Built-in scenarios: every `scenarios/*.toml` of the repository, embedded at build time (see
//! build.rs), so `purple sim cake-dumbbell` works from any directory.

use std::path::{Path, PathBuf};

/// One embedded scenario.
#[derive(Clone, Copy, Debug)]
pub struct Builtin {
    /// File stem (`cake-dumbbell`).
    pub name: &'static str,
    /// Where the file was when the binary was built; relative trace and schedule paths of the
    /// scenario resolve against its directory.
    pub path: &'static str,
    /// The TOML text.
    pub text: &'static str,
}

const TABLE: &[(&str, &str, &str)] = include!(concat!(env!("OUT_DIR"), "/builtin_scenarios.rs"));

/// Every built-in scenario, sorted by name.
pub fn all() -> Vec<Builtin> {
    TABLE
        .iter()
        .map(|&(name, path, text)| Builtin { name, path, text })
        .collect()
}

/// The built-in scenario called `name`.
pub fn find(name: &str) -> Option<Builtin> {
    all().into_iter().find(|b| b.name == name)
}

impl Builtin {
    /// The first comment line of the file, without the `#` (empty if it has none).
    pub fn description(&self) -> &'static str {
        self.text
            .lines()
            .map(str::trim)
            .find(|l| l.starts_with('#'))
            .map(|l| l.trim_start_matches('#').trim())
            .unwrap_or("")
    }

    /// The directory relative trace paths resolve against: the repository's `scenarios/` as
    /// of build time. If the binary runs where that directory no longer exists, a scenario
    /// with a relative trace fails to build with the missing path in its error.
    pub fn dir(&self) -> PathBuf {
        Path::new(self.path)
            .parent()
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_repository_scenarios_are_embedded_with_a_description() {
        let b = find("cake-dumbbell").expect("cake-dumbbell is built in");
        assert!(b.text.contains("[[link]]"));
        assert!(!b.description().is_empty());
        assert!(find("no-such-scenario").is_none());
    }
}
