//! `purple ctl [--name N | --ctl PATH] stats [--json] | set-bandwidth DIR RATE`: talk to a
//! running bridge over its control socket.

use std::path::PathBuf;

/// Sends `words` (joined by spaces) to the bridge and returns its answer.
pub fn run(name: &str, ctl: Option<PathBuf>, words: &[String]) -> Result<String, String> {
    let path = ctl.unwrap_or_else(|| dataplane::ctl::default_path(name));
    let line = words.join(" ");
    dataplane::ctl::Command::parse(&line)?;
    dataplane::ctl::request(&path, &line)
}
