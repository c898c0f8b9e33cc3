//! `purple ctl [--name N | --ctl PATH] stats [--json] | set-bandwidth DIR RATE`: talk to a
//! running bridge over its control socket.

use std::path::PathBuf;

/// Sends `words` (joined by spaces: one [`dataplane::ctl::Request`]) to the bridge and returns
/// its answer as the bridge wrote it.
pub fn run(name: &str, ctl: Option<PathBuf>, words: &[String]) -> Result<String, String> {
    let path = ctl.unwrap_or_else(|| dataplane::ctl::default_path(name));
    let request = dataplane::ctl::Request::parse(&words.join(" ")).map_err(|e| e.to_string())?;
    dataplane::ctl::request(&path, &request).map_err(|e| e.to_string())
}
