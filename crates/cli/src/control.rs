//! `purple control` (the daemon), `purple control --check`, and `purple bench control`.
//! The daemon's service code lives in `daemon::service`, shared with the `purple-control` binary.

pub use daemon::service::{check, run};

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
