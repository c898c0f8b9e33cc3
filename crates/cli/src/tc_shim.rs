//! `purple` started under the name `tc`: the shim that a cake-autorate run finds first on its
//! `PATH` (`lab::autorate::Shim`). It understands what cake-autorate asks of `tc`:
//!
//! - `tc qdisc change root dev DEV cake bandwidth RATE` and the same lines in `tc -force -batch
//!   -`: each is appended to the log (`$PURPLE_TC_SHIM_LOG`) and, when `$PURPLE_TC_SHIM_CTL`
//!   names a bridge's control socket, applied as `purple ctl set-bandwidth DIR RATE`, DIR being
//!   the device's direction in `$PURPLE_TC_SHIM_DEVS` (`DEV=ingress|egress,...`);
//! - `tc qdisc show dev DEV`: prints the qdisc line Linux's `tc` prints for a CAKE with the
//!   arguments in `$PURPLE_TC_SHIM_CAKE` at the device's last rate (cake-autorate reads the
//!   overhead there).
//!
//! Anything else is an error on stderr with exit status 1, as `tc` fails on what it cannot do.

use std::io::Read;
use std::path::PathBuf;

use lab::autorate::{self, ShimCall, TcOp};

/// Whether this process was started as `tc` (a link named `tc` to the `purple` binary).
pub fn invoked_as_tc() -> bool {
    std::env::args_os()
        .next()
        .map(PathBuf::from)
        .and_then(|p| p.file_name().map(|n| n == "tc"))
        .unwrap_or(false)
}

/// Runs the shim on this process's arguments; returns the exit status.
pub fn main() -> i32 {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let ops = match autorate::parse_tc(&args, |f| {
        if f == "-" {
            let mut s = String::new();
            std::io::stdin().read_to_string(&mut s).map(|_| s)
        } else {
            std::fs::read_to_string(f)
        }
    }) {
        Ok(ops) => ops,
        Err(e) => {
            eprintln!("purple tc shim: {e}");
            return 1;
        }
    };
    let mut status = 0;
    for op in ops {
        match op {
            TcOp::SetBandwidth { dev, rate } => {
                if let Err(e) = set_bandwidth(&dev, &rate) {
                    eprintln!("purple tc shim: {e}");
                    status = 1;
                }
            }
            TcOp::Show { dev } => match show(dev.as_deref()) {
                Ok(text) => print!("{text}"),
                Err(e) => {
                    eprintln!("purple tc shim: {e}");
                    status = 1;
                }
            },
        }
    }
    status
}

/// Unix time now, s.
// The shim is an I/O program: it stamps its log with the real-time clock.
#[allow(clippy::disallowed_methods)]
fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// The bridge direction of `dev` from `$PURPLE_TC_SHIM_DEVS`.
fn direction(dev: &str) -> Result<String, String> {
    let map = std::env::var(autorate::SHIM_DEVS).unwrap_or_default();
    map.split(',')
        .filter_map(|kv| kv.split_once('='))
        .find(|(d, _)| *d == dev)
        .map(|(_, dir)| dir.to_string())
        .ok_or_else(|| {
            format!(
                "device {dev} is not in ${} ({map:?}): which bridge direction is it?",
                autorate::SHIM_DEVS
            )
        })
}

/// Records (and applies, with a control socket) one rate change.
fn set_bandwidth(dev: &str, rate: &str) -> Result<(), String> {
    let bytes = qdisc::tc_units::parse_shaper_rate(rate)
        .map_err(|e| format!("bad rate {rate:?} for {dev}: {e}"))?;
    let applied = match std::env::var_os(autorate::SHIM_CTL) {
        None => Ok(()),
        Some(sock) => direction(dev).and_then(|dir| {
            use dataplane::ctl::{DirNames, Request};
            let Some((DirNames::EgressIngress, dir)) = DirNames::parse(&dir) else {
                return Err(format!(
                    "device {dev}: bridge direction {dir:?} in ${} is not egress or ingress",
                    autorate::SHIM_DEVS
                ));
            };
            let request = Request::SetBandwidth {
                dir,
                rate: Some(controller::Rate::from_bytes_per_s(bytes)),
            };
            dataplane::ctl::request(std::path::Path::new(&sock), &request)
                .map(drop)
                .map_err(|e| e.to_string())
        }),
    };
    let call = ShimCall {
        t: unix_now(),
        dev: dev.to_string(),
        bit_s: bytes.saturating_mul(8),
        error: applied.as_ref().err().cloned(),
    };
    if let Some(log) = std::env::var_os(autorate::SHIM_LOG) {
        use std::io::Write;
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .and_then(|mut f| f.write_all(call.to_line().as_bytes()))
            .map_err(|e| format!("log {}: {e}", PathBuf::from(&log).display()))?;
    }
    applied
}

/// `tc qdisc show [dev DEV]`: a fresh CAKE with the shim's arguments at the device's last rate
/// from the log (unlimited before the first).
fn show(dev: Option<&str>) -> Result<String, String> {
    let last = match (dev, std::env::var_os(autorate::SHIM_LOG)) {
        (Some(d), Some(log)) => autorate::read_calls(std::path::Path::new(&log))
            .into_iter()
            .rev()
            .find(|c| c.dev == d)
            .map(|c| c.bit_s),
        _ => None,
    };
    let mut args = vec!["bandwidth".to_string()];
    args.push(match last {
        Some(b) => format!("{}kbit", b / 1000),
        None => "unlimited".into(),
    });
    let cake = std::env::var(autorate::SHIM_CAKE).unwrap_or_default();
    args.extend(cake.split_whitespace().map(String::from));
    let text = crate::cake_config::render(1500, false, &args)?;
    Ok(format!("{}\n", text.lines().next().unwrap_or_default()))
}
