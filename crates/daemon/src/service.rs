//! The daemon's entry points as a service: validate a configuration ([`check`]), run until
//! signalled ([`run`]), and serve as a UDP reflector ([`reflector`]). Shared by `purple control`
//! / `purple reflector` and the small router binary `purple-control`, so both behave alike.

use crate::log::Record;
use crate::{Daemon, DaemonConfig, Exit};
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// `purple control --check`: validates `path`; the error names the option and what it accepts.
pub fn check(path: &Path) -> Result<String, String> {
    let c = DaemonConfig::load(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let d = c.dirs();
    let m = &c.mqtt;
    let mqtt = match m.endpoint() {
        Some((host, port)) => format!(
            "  mqtt to {host}:{port} as {}, QoS {}: {}\n",
            m.client_id_or_default(),
            m.qos,
            m.records
                .iter()
                .map(|r| format!("{}/{}", m.topic_prefix, r.name()))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        None => String::new(),
    };
    Ok(format!(
        "{}: OK\n  algorithm {}\n  download {} {}..{} Mbit/s (base {}, safe {})\n  upload   {} {}..{} Mbit/s (base {}, safe {})\n  {} reflectors, {} active, {} probes/s; actuator {:?}\n{mqtt}",
        path.display(),
        c.algorithm.name(),
        d.down.iface(), d.down.min_mbit, d.down.max(), d.down.base_mbit, d.down.safe(),
        d.up.iface(), d.up.min_mbit, d.up.max(), d.up.base_mbit, d.up.safe(),
        c.probe.reflectors.len(), c.probe.active.min(c.probe.reflectors.len()), c.probe.rate_hz,
        c.actuator.kind,
    ))
}

/// `purple control --config FILE [--record REC]`: runs until SIGTERM/SIGINT (then sets the safe
/// rates and exits); SIGHUP reloads the file (a bad file is logged and the running
/// configuration kept). With `record`, every input of the agent is written there
/// (`daemon::record`).
pub fn run(path: &Path, dry_run: bool, record: Option<&Path>) -> Result<String, String> {
    let mut cfg = DaemonConfig::load(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let stop = Arc::new(AtomicBool::new(false));
    let reload = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, stop.clone()).map_err(|e| e.to_string())?;
    }
    signal_hook::flag::register(signal_hook::consts::SIGHUP, reload.clone())
        .map_err(|e| e.to_string())?;
    let mut d = match record {
        Some(r) => Daemon::recording(cfg.clone(), dry_run, r),
        None => Daemon::new(cfg.clone(), dry_run),
    }
    .map_err(|e| format!("start: {e}"))?;
    // Sockets are open: drop to the configured user, keeping CAP_NET_RAW and CAP_NET_ADMIN.
    // The process is still single-threaded here (privs::drop_to requires it).
    if !cfg.user.is_empty() {
        crate::privs::drop_to(&cfg.user).map_err(|e| format!("user {}: {e}", cfg.user))?;
        let r = Record::Privileges {
            t: d.t(),
            user: Some(cfg.user.clone()),
            kept: Some(vec!["CAP_NET_RAW".into(), "CAP_NET_ADMIN".into()]),
            warning: None,
        };
        d.log_record(&r);
    } else if crate::privs::is_root() {
        let r = Record::Privileges {
            t: d.t(),
            user: None,
            kept: None,
            warning: Some(
                "running as root with all capabilities: set `user` to drop to CAP_NET_RAW + \
                 CAP_NET_ADMIN"
                    .into(),
            ),
        };
        d.log_record(&r);
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
                            d.log_record(&Record::Reloaded { t: d.t() });
                        }
                        Err(e) => d.log_record(&Record::ReloadFailed {
                            t: d.t(),
                            error: e.to_string(),
                        }),
                    }
                }
                Err(e) => d.log_record(&Record::ReloadFailed {
                    t: d.t(),
                    error: e.to_string(),
                }),
            },
        }
    }
}

/// Serves on `bind:port` until SIGTERM/SIGINT; at most `max_pps` replies per second.
pub fn reflector(bind: &str, port: u16, max_pps: u32) -> Result<String, String> {
    let addr: std::net::IpAddr = bind.parse().map_err(|e| format!("--bind {bind}: {e}"))?;
    let sock = std::net::UdpSocket::bind((addr, port)).map_err(|e| format!("bind: {e}"))?;
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, stop.clone()).map_err(|e| e.to_string())?;
    }
    eprintln!(
        "purple reflector: listening on {}",
        sock.local_addr().map_err(|e| e.to_string())?
    );
    let n = crate::probe::udp::serve(&sock, max_pps, &stop).map_err(|e| e.to_string())?;
    Ok(format!("purple reflector: {n} replies\n"))
}
