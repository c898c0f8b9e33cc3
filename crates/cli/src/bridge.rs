//! `purple bridge IF_A IF_B [--egress Q] [--ingress Q] [--name N] [--ctl PATH] [--rt-priority P]`:
//! run the userspace dataplane until SIGINT/SIGTERM.

use std::path::PathBuf;

use dataplane::{Bridge, BridgeConfig};

/// Runs the bridge in this thread until a termination signal (under `SCHED_FIFO` at
/// `rt_priority` if given). Errors are printable.
pub fn run(
    if_a: String,
    if_b: String,
    egress: String,
    ingress: String,
    name: String,
    ctl: Option<PathBuf>,
    rt_priority: Option<i32>,
) -> Result<(), String> {
    let ctl_path = Some(ctl.unwrap_or_else(|| dataplane::ctl::default_path(&name)));
    let cfg = BridgeConfig {
        if_a,
        if_b,
        egress,
        ingress,
        name,
        ctl_path,
        seed: 1,
    };
    let mut bridge = Bridge::new(cfg).map_err(|e| e.to_string())?;
    bridge.stop_on_signals().map_err(|e| e.to_string())?;
    if let Some(p) = rt_priority {
        dataplane::sys::set_realtime(p).map_err(|e| format!("SCHED_FIFO priority {p}: {e}"))?;
    }
    bridge.run().map_err(|e| e.to_string())?;
    eprint!("{}", bridge.stats_text());
    Ok(())
}
