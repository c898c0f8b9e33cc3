//! `purple control` (the daemon), `purple control --check`, and `purple bench control`.

use daemon::{Daemon, DaemonConfig, Exit};
use serde_json::json;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// `purple control --check`: validates `path`; the error names the option and what it accepts.
pub fn check(path: &Path) -> Result<String, String> {
    let c = DaemonConfig::load(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let d = c.dirs();
    Ok(format!(
        "{}: OK\n  algorithm {}\n  download {} {}..{} Mbit/s (base {}, safe {})\n  upload   {} {}..{} Mbit/s (base {}, safe {})\n  {} reflectors, {} active, {} probes/s; actuator {:?}\n",
        path.display(),
        c.algorithm.name(),
        d.down.iface(), d.down.min_mbit, d.down.max(), d.down.base_mbit, d.down.safe(),
        d.up.iface(), d.up.min_mbit, d.up.max(), d.up.base_mbit, d.up.safe(),
        c.probe.reflectors.len(), c.probe.active.min(c.probe.reflectors.len()), c.probe.rate_hz,
        c.actuator.kind,
    ))
}

/// `purple control --config FILE`: runs until SIGTERM/SIGINT (then sets the safe rates and
/// exits); SIGHUP reloads the file (a bad file is logged and the running configuration kept).
pub fn run(path: &Path, dry_run: bool) -> Result<String, String> {
    let mut cfg = DaemonConfig::load(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let stop = Arc::new(AtomicBool::new(false));
    let reload = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, stop.clone()).map_err(|e| e.to_string())?;
    }
    signal_hook::flag::register(signal_hook::consts::SIGHUP, reload.clone())
        .map_err(|e| e.to_string())?;
    let mut d = Daemon::new(cfg.clone(), dry_run).map_err(|e| format!("start: {e}"))?;
    // Sockets are open: drop to the configured user, keeping CAP_NET_RAW and CAP_NET_ADMIN.
    // The process is still single-threaded here (privs::drop_to requires it).
    if !cfg.user.is_empty() {
        daemon::privs::drop_to(&cfg.user).map_err(|e| format!("user {}: {e}", cfg.user))?;
        d.log_event(json!({"event": "privileges", "user": cfg.user,
            "kept": ["CAP_NET_RAW", "CAP_NET_ADMIN"]}));
    } else if daemon::privs::is_root() {
        d.log_event(json!({"event": "privileges", "warning":
            "running as root with all capabilities: set `user` to drop to CAP_NET_RAW + CAP_NET_ADMIN"}));
    }
    loop {
        match d.run(&stop, &reload, None).map_err(|e| e.to_string())? {
            Exit::Stop => {
                d.restore_safe();
                return Ok(String::new());
            }
            Exit::Reload => match DaemonConfig::load(path) {
                Ok(new) => {
                    // The user switch happened once; a changed `user` needs a restart.
                    let new = DaemonConfig {
                        user: cfg.user.clone(),
                        ..new
                    };
                    match d.reload(new.clone(), dry_run) {
                        Ok(()) => {
                            cfg = new;
                            d.log_event(json!({"event": "reloaded"}));
                        }
                        Err(e) => d.log_event(json!({"event": "reload-failed",
                            "error": e.to_string()})),
                    }
                }
                Err(e) => d.log_event(json!({"event": "reload-failed", "error": e.to_string()})),
            },
        }
    }
}

/// `purple bench control`.
pub fn bench(seconds: f64, rate_hz: f64, json_out: bool) -> Result<String, String> {
    let r = daemon::bench::control(seconds, rate_hz).map_err(|e| e.to_string())?;
    if json_out {
        return serde_json::to_string(&r).map_err(|e| e.to_string());
    }
    Ok(format!(
        "purple control, dry run, {:.0} probes/s to 127.0.0.1 (UDP reflector + ICMP), 2 directions\n\
         ran {:.1} s: {} probes, {} replies, {} control steps\n\
         CPU {:.4} s -> {:.2} s per hour = {:.3}% of one core (target < 0.5%)\n",
        r.probes_per_s, r.seconds, r.probes_sent, r.replies, r.steps, r.cpu_s, r.cpu_s_per_hour,
        r.percent_of_core
    ))
}
