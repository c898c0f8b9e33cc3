//! `purple bench control`: the daemon's CPU cost. Runs the real event loop (dry-run actuator,
//! decision log to a temporary file, two directions controlled) against reflectors on
//! 127.0.0.1 (a `purple reflector` thread, and ICMP to 127.0.0.1, which the kernel answers) at
//! 20 probes/s, and measures the loop thread's CPU time (user + system,
//! `CLOCK_THREAD_CPUTIME_ID`), extrapolated to an hour.

use crate::{Daemon, DaemonConfig};
use qdisc::Duration;
use rustix::time::{clock_gettime, ClockId};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// What one run measured.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct ControlBench {
    /// Wall-clock seconds run.
    pub seconds: f64,
    /// Probes per second configured.
    pub probes_per_s: f64,
    /// Probes sent.
    pub probes_sent: u64,
    /// Replies received.
    pub replies: u64,
    /// Control steps run.
    pub steps: u64,
    /// CPU seconds used by the daemon loop's thread.
    pub cpu_s: f64,
    /// The same, extrapolated to one hour.
    pub cpu_s_per_hour: f64,
    /// Percent of one core.
    pub percent_of_core: f64,
    /// CPU seconds of the whole process (includes the reflector thread), for reference.
    pub process_cpu_s: f64,
}

fn secs(t: rustix::time::Timespec) -> f64 {
    t.tv_sec as f64 + t.tv_nsec as f64 / 1e9
}

/// Runs the bench for `seconds` at `rate_hz` probes per second.
#[allow(clippy::disallowed_methods)] // wall-clock duration of the run
pub fn control(seconds: f64, rate_hz: f64) -> std::io::Result<ControlBench> {
    let sock = std::net::UdpSocket::bind("127.0.0.1:0")?;
    let port = sock.local_addr()?.port();
    let stop = Arc::new(AtomicBool::new(false));
    let st = stop.clone();
    let refl = std::thread::spawn(move || crate::probe::udp::serve(&sock, 10_000, &st));
    let log =
        std::env::temp_dir().join(format!("purple-bench-control-{}.jsonl", std::process::id()));
    let text = format!(
        "[download]\ninterface = \"lo\"\ncounter = \"rx\"\n[upload]\ninterface = \"lo\"\n\
         [probe]\nreflectors = [\"udp:127.0.0.1:{port}\", \"127.0.0.1\"]\nrate_hz = {rate_hz}\n\
         min_interval_ms = 0\n[actuator]\nkind = \"dry-run\"\n[log]\npath = \"{}\"\n",
        log.display()
    );
    let cfg = DaemonConfig::parse(&text)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    let mut d = Daemon::new(cfg, true)?;
    let never = AtomicBool::new(false);
    let t0 = clock_gettime(ClockId::ThreadCPUTime);
    let p0 = clock_gettime(ClockId::ProcessCPUTime);
    let w0 = std::time::Instant::now();
    let res = d.run(
        &never,
        &never,
        Some(Duration::from_nanos((seconds * 1e9) as u64)),
    );
    let wall = w0.elapsed().as_secs_f64();
    let cpu = secs(clock_gettime(ClockId::ThreadCPUTime)) - secs(t0);
    let pcpu = secs(clock_gettime(ClockId::ProcessCPUTime)) - secs(p0);
    stop.store(true, Ordering::Relaxed);
    let _ = refl.join();
    let _ = std::fs::remove_file(&log);
    res?;
    let (sent, replies) = d.health().iter().fold((0, 0), |(s, a), (_, _, _, st)| {
        (s + st.sent, a + st.answered)
    });
    if sent == 0 || replies == 0 {
        // A loop that hears no reply does less work: its cost would be a figure about nothing.
        return Err(std::io::Error::other(format!(
            "the bench's reflectors (udp:127.0.0.1:{port} and ICMP echo to 127.0.0.1) answered \
             {replies} of {sent} probes: no cost of the real loop can be reported"
        )));
    }
    let per_hour = cpu / wall.max(1e-9) * 3600.0;
    Ok(ControlBench {
        seconds: wall,
        probes_per_s: rate_hz,
        probes_sent: sent,
        replies,
        steps: d.steps,
        cpu_s: cpu,
        cpu_s_per_hour: per_hour,
        percent_of_core: per_hour / 3600.0 * 100.0,
        process_cpu_s: pcpu,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn bench_runs_the_loop_and_reports_a_small_cpu_share() {
        let r = super::control(1.0, 20.0).unwrap();
        assert!(r.probes_sent >= 15, "{r:?}");
        assert!(r.replies * 10 >= r.probes_sent * 8, "{r:?}");
        assert!(r.steps >= 2, "{r:?}");
        assert!(r.cpu_s > 0.0 && r.percent_of_core < 25.0, "{r:?}");
    }
}
