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
         | flows | offered pkt/s | captured pkt/s | round trips/s | tracked | daemon % core | without | µs per captured frame | process % core | without |\n\
         |---|---|---|---|---|---|---|---|---|---|\n"
    );
    for r in &rows {
        s.push_str(&format!(
            "| {} | {:.0} | {:.0} | {:.0} | {} | {:.2} | {:.2} | {:.2} | {:.1} | {:.1} |\n",
            r.flows,
            r.offered_pps,
            r.captured_pps,
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
