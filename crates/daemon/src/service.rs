//! The daemon's entry points as a service: validate a configuration ([`check`]), run until
//! signalled ([`run`]), and serve as a UDP reflector ([`reflector`]). Shared by `purple control`
//! / `purple reflector` and the small router binary `purple-control`, so both behave alike.

use crate::config::CheckError;
use crate::log::Record;
use crate::{Daemon, DaemonConfig, Exit};
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Why a service entry point could not start, or stopped.
#[derive(Debug)]
pub enum ServiceError {
    /// The configuration file is invalid (the error names the option).
    Config {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        err: CheckError,
    },
    /// The signal handlers could not be installed.
    Signals(io::Error),
    /// The daemon could not start (a socket, device or log file).
    Start(io::Error),
    /// Switching to the configured user failed.
    User {
        /// The user.
        user: String,
        /// Why.
        err: io::Error,
    },
    /// The daemon's event loop failed.
    Run(io::Error),
    /// `--bind` is not an IP address.
    BadBind {
        /// What was given.
        bind: String,
        /// The parser's error.
        err: std::net::AddrParseError,
    },
    /// The reflector's socket could not be bound.
    Bind(io::Error),
    /// The reflector failed while serving.
    Serve(io::Error),
    /// A log given to `explain` could not be read.
    ReadLog {
        /// The file.
        path: PathBuf,
        /// Why.
        err: io::Error,
    },
    /// The logs given to `explain` cannot be explained (a bad line, no decision).
    Explain(crate::explain::ExplainError),
}

impl fmt::Display for ServiceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServiceError::Config { path, err } => write!(f, "{}: {err}", path.display()),
            ServiceError::Signals(e) | ServiceError::Run(e) | ServiceError::Serve(e) => {
                write!(f, "{e}")
            }
            ServiceError::Start(e) => write!(f, "start: {e}"),
            ServiceError::User { user, err } => write!(f, "user {user}: {err}"),
            ServiceError::BadBind { bind, err } => write!(f, "--bind {bind}: {err}"),
            ServiceError::Bind(e) => write!(f, "bind: {e}"),
            ServiceError::ReadLog { path, err } => write!(f, "{}: {err}", path.display()),
            ServiceError::Explain(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for ServiceError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ServiceError::Config { err, .. } => Some(err),
            ServiceError::Signals(e)
            | ServiceError::Start(e)
            | ServiceError::User { err: e, .. }
            | ServiceError::Run(e)
            | ServiceError::Bind(e)
            | ServiceError::Serve(e)
            | ServiceError::ReadLog { err: e, .. } => Some(e),
            ServiceError::BadBind { err, .. } => Some(err),
            ServiceError::Explain(e) => Some(e),
        }
    }
}

fn load(path: &Path) -> Result<DaemonConfig, ServiceError> {
    DaemonConfig::load(path).map_err(|err| ServiceError::Config {
        path: path.to_path_buf(),
        err,
    })
}

/// `purple control --check`: validates `path`; the error names the option and what it accepts.
pub fn check(path: &Path) -> Result<String, ServiceError> {
    let c = load(path)?;
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
    // The law's parameters set in its section; the rest are at their defaults.
    let set: Vec<String> = c
        .law_section(c.algorithm)
        .iter()
        .map(|(k, v)| format!("{k} = {v}"))
        .collect();
    let params = if set.is_empty() {
        "(defaults)".to_string()
    } else {
        format!("({}; the rest at their defaults)", set.join(", "))
    };
    Ok(format!(
        "{}: OK\n  algorithm {} {params}\n  download {} {}..{} Mbit/s (base {}, safe {})\n  upload   {} {}..{} Mbit/s (base {}, safe {})\n  {} reflectors, {} active, {} probes/s; actuator {:?}\n{mqtt}",
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
pub fn run(path: &Path, dry_run: bool, record: Option<&Path>) -> Result<String, ServiceError> {
    let mut cfg = load(path)?;
    let stop = Arc::new(AtomicBool::new(false));
    let reload = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, stop.clone()).map_err(ServiceError::Signals)?;
    }
    signal_hook::flag::register(signal_hook::consts::SIGHUP, reload.clone())
        .map_err(ServiceError::Signals)?;
    let mut d = match record {
        Some(r) => Daemon::recording(cfg.clone(), dry_run, r),
        None => Daemon::new(cfg.clone(), dry_run),
    }
    .map_err(ServiceError::Start)?;
    // Sockets are open: drop to the configured user, keeping CAP_NET_RAW and CAP_NET_ADMIN.
    // The process is still single-threaded here (privs::drop_to requires it).
    if !cfg.user.is_empty() {
        crate::privs::drop_to(&cfg.user).map_err(|err| ServiceError::User {
            user: cfg.user.clone(),
            err,
        })?;
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
        match d.run(&stop, &reload, None).map_err(ServiceError::Run)? {
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

/// `explain LOG...`: reads the decision logs `logs` (oldest first, as rotated: `FILE.2 FILE.1
/// FILE`) and says why the rates were what they were ([`crate::explain`]): the text, or with
/// `json` one JSON object.
///
/// # Errors
/// A log that cannot be read ([`ServiceError::ReadLog`], naming it) or explained
/// ([`ServiceError::Explain`]: a bad line, named with its log and number, or no decision).
pub fn explain(
    logs: &[PathBuf],
    opts: crate::explain::ExplainOpts,
    json: bool,
) -> Result<String, ServiceError> {
    let mut texts = Vec::with_capacity(logs.len());
    for path in logs {
        let text = std::fs::read_to_string(path).map_err(|err| ServiceError::ReadLog {
            path: path.clone(),
            err,
        })?;
        texts.push((path.display().to_string(), text));
    }
    let e = crate::explain::explain(&texts, opts).map_err(ServiceError::Explain)?;
    Ok(if json {
        serde_json::to_string_pretty(&e).unwrap_or_default() + "\n"
    } else {
        e.to_string()
    })
}

/// Serves on `bind:port` until SIGTERM/SIGINT; at most `max_pps` replies per second.
pub fn reflector(bind: &str, port: u16, max_pps: u32) -> Result<String, ServiceError> {
    let addr: std::net::IpAddr = bind.parse().map_err(|err| ServiceError::BadBind {
        bind: bind.to_string(),
        err,
    })?;
    let sock = std::net::UdpSocket::bind((addr, port)).map_err(ServiceError::Bind)?;
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, stop.clone()).map_err(ServiceError::Signals)?;
    }
    eprintln!(
        "purple reflector: listening on {}",
        sock.local_addr().map_err(ServiceError::Bind)?
    );
    let n = crate::probe::udp::serve(&sock, max_pps, &stop).map_err(ServiceError::Serve)?;
    Ok(format!("purple reflector: {n} replies\n"))
}
