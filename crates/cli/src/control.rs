//! `purple control` (the daemon), `purple control --check`, and `purple bench control`.
//! The daemon's service code lives in `daemon::service`, shared with the `purple-control` binary;
//! the bench in `lab::bench_control`.

pub use daemon::service::{check, run};

/// The options of `purple bench control`.
#[derive(Debug)]
pub struct BenchArgs {
    /// Measured seconds per contender.
    pub seconds: f64,
    /// Warm-up seconds.
    pub warmup: f64,
    /// Probes per second.
    pub rate_hz: f64,
    /// A cake-autorate checkout.
    pub cake_autorate: Option<std::path::PathBuf>,
    /// Keep the files here.
    pub keep: Option<std::path::PathBuf>,
    /// Another purple binary to measure.
    pub compare: Option<std::path::PathBuf>,
}

/// `purple bench control` (see `lab::bench_control`).
pub fn bench(a: BenchArgs, json_out: bool) -> Result<String, String> {
    let purple_bin = std::env::current_exe().map_err(|e| format!("this binary's path: {e}"))?;
    let cake_autorate = a
        .cake_autorate
        .as_deref()
        .map(lab::autorate::Checkout::open)
        .transpose()
        .map_err(|e| e.to_string())?;
    if let Some(c) = &a.compare {
        if !c.is_file() {
            return Err(format!("--compare {}: no such binary", c.display()));
        }
    }
    os::netns::install_signal_cleanup().map_err(|e| e.to_string())?;
    let o = lab::bench_control::BenchOpts {
        seconds: a.seconds,
        warmup: a.warmup,
        rate_hz: a.rate_hz,
        purple_bin,
        cake_autorate,
        compare: a.compare,
        keep: a.keep,
    };
    let r = lab::bench_control::run(&o).map_err(|e| e.to_string())?;
    if json_out {
        return serde_json::to_string(&r)
            .map(|s| s + "\n")
            .map_err(|e| e.to_string());
    }
    Ok(lab::bench_control::table(&r))
}

/// `purple bench control --passive`: the passive capture's CPU at each flow count.
pub fn bench_passive(
    seconds: f64,
    flows: &[usize],
    pps: f64,
    sample: u32,
    json_out: bool,
) -> Result<String, String> {
    let rows =
        daemon::bench_passive::passive(seconds, flows, pps, sample).map_err(|e| e.to_string())?;
    if json_out {
        return serde_json::to_string(&rows).map_err(|e| e.to_string());
    }
    let mut s = format!(
        "purple control, dry run, delay_source = \"passive\": the capture of a WAN device carrying \
         bulk TCP downloads with timestamps ({pps:.0} segments/s offered: data in, ACKs out), \
         passive.sample = {sample}, {seconds:.0} s per run; \"without\": the same traffic, delay_source = \"probes\"\n\n\
         | flows | offered pkt/s | captured pkt/s | lost | round trips/s | tracked | daemon % core | without | µs per captured frame | process % core | without |\n\
         |---|---|---|---|---|---|---|---|---|---|---|\n"
    );
    for r in &rows {
        s.push_str(&format!(
            "| {} | {:.0} | {:.0} | {} | {:.0} | {} | {:.2} | {:.2} | {:.2} | {:.1} | {:.1} |\n",
            r.flows,
            r.offered_pps,
            r.captured_pps,
            r.lost,
            r.samples_per_s,
            r.tracked,
            r.daemon_percent,
            r.daemon_percent_without,
            r.us_per_frame,
            r.process_percent,
            r.process_percent_without
        ));
    }
    Ok(s)
}
