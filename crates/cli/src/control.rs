//! `purple control` (the daemon), `purple control --check`, and `purple bench control`.
//! The daemon's service code lives in `daemon::service`, shared with the `purple-control` binary;
//! the bench in `lab::bench_control`.

pub use daemon::service::{check, run};

/// `purple bench control` (see `lab::bench_control`).
pub fn bench(
    seconds: f64,
    warmup: f64,
    rate_hz: f64,
    cake_autorate: Option<&std::path::Path>,
    keep: Option<std::path::PathBuf>,
    json_out: bool,
) -> Result<String, String> {
    let purple_bin = std::env::current_exe().map_err(|e| format!("this binary's path: {e}"))?;
    let cake_autorate = cake_autorate
        .map(lab::autorate::Checkout::open)
        .transpose()
        .map_err(|e| e.to_string())?;
    lab::ns::install_signal_cleanup().map_err(|e| e.to_string())?;
    let o = lab::bench_control::BenchOpts {
        seconds,
        warmup,
        rate_hz,
        purple_bin,
        cake_autorate,
        keep,
    };
    let r = lab::bench_control::run(&o).map_err(|e| e.to_string())?;
    if json_out {
        return serde_json::to_string(&r)
            .map(|s| s + "\n")
            .map_err(|e| e.to_string());
    }
    Ok(lab::bench_control::table(&r))
}
