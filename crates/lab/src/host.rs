//! How well the host kept time during a run ([`HostLag`]): the lab's latency is real time, and
//! on a shared or loaded machine the bridge, the emulator or a probe can be descheduled for
//! tens of ms. That lands in the probes' samples as if a queue had held the packets, so a run
//! reports what its host did beside what it measured.
//!
//! A watcher thread sleeps [`TICK`] at a time and records how late each wake-up came; the
//! hypervisor's steal time (`/proc/stat`, where the kernel reports it) is read at both ends.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use qdisc::quantile::nearest_rank;

/// The watcher's sleep.
pub const TICK: Duration = Duration::from_millis(2);

/// A wake-up later than this is a stall a probe could have seen (ms). The lab's probes send
/// every 100 ms or faster and its induced-latency figures are a few ms under CAKE.
pub const STALL_MS: f64 = 10.0;

/// What the host did to the run's timing.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct HostLag {
    /// Wake-ups recorded.
    pub ticks: usize,
    /// The latest wake-up past its [`TICK`] (ms).
    pub max_ms: f64,
    /// The 99th percentile lateness (ms).
    pub p99_ms: f64,
    /// Wake-ups later than [`STALL_MS`].
    pub stalls: usize,
    /// Share of the CPUs' time the hypervisor took (steal), where `/proc/stat` reports it.
    pub steal_share: Option<f64>,
}

impl HostLag {
    /// A warning for the run's notes when the host stalled, `None` when it kept time.
    pub fn warning(&self) -> Option<String> {
        (self.stalls > 0).then(|| {
            let steal = self
                .steal_share
                .map(|s| format!("; hypervisor steal {:.1}% of CPU time", 100.0 * s))
                .unwrap_or_default();
            format!(
                "the host stalled {} times over {STALL_MS} ms (worst {:.1} ms, p99 {:.1} ms of \
                 a {} ms sleep{steal}): latency samples include the host's own delays",
                self.stalls,
                self.max_ms,
                self.p99_ms,
                TICK.as_millis(),
            )
        })
    }
}

/// A running watcher; [`Watch::finish`] stops it and returns what it saw.
#[derive(Debug)]
pub struct Watch {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Vec<f64>>>,
    steal0: Option<(u64, u64)>,
}

impl Watch {
    /// Starts watching. Call just before the run's traffic starts.
    // The watcher measures the wall clock itself: what it reports is how late real time ran.
    #[allow(clippy::disallowed_methods)]
    pub fn start() -> Watch {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("host-watch".into())
            .spawn(move || {
                let mut late = Vec::new();
                while !flag.load(Ordering::Relaxed) {
                    let t = Instant::now();
                    std::thread::sleep(TICK);
                    let over = t.elapsed().saturating_sub(TICK);
                    late.push(over.as_secs_f64() * 1e3);
                }
                late
            })
            .ok();
        Watch {
            stop,
            thread,
            steal0: steal(),
        }
    }

    /// Stops the watcher; `None` if its thread could not start, panicked or never woke.
    pub fn finish(mut self) -> Option<HostLag> {
        self.stop.store(true, Ordering::Relaxed);
        let mut late = self.thread.take()?.join().ok()?;
        let steal_share = match (self.steal0, steal()) {
            (Some((s0, t0)), Some((s1, t1))) if t1 > t0 => {
                Some(s1.saturating_sub(s0) as f64 / (t1 - t0) as f64)
            }
            _ => None,
        };
        late.sort_by(f64::total_cmp);
        Some(HostLag {
            ticks: late.len(),
            max_ms: *late.last()?,
            p99_ms: nearest_rank(&late, 0.99)?,
            stalls: late.iter().filter(|&&l| l > STALL_MS).count(),
            steal_share,
        })
    }
}

/// `(steal, total)` jiffies of all CPUs from `/proc/stat`, if it reports steal.
fn steal() -> Option<(u64, u64)> {
    let s = std::fs::read_to_string("/proc/stat").ok()?;
    parse_cpu_line(s.lines().next()?)
}

/// `cpu  user nice system idle iowait irq softirq steal ...` → `(steal, sum of the eight)`.
fn parse_cpu_line(line: &str) -> Option<(u64, u64)> {
    let mut f = line.split_whitespace();
    if f.next()? != "cpu" {
        return None;
    }
    let v: Vec<u64> = f.take(8).map(|x| x.parse().ok()).collect::<Option<_>>()?;
    (v.len() == 8).then(|| (v[7], v.iter().sum()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_line_gives_steal_and_total() {
        assert_eq!(parse_cpu_line("cpu  10 0 5 80 1 0 2 2 0 0"), Some((2, 100)));
        assert_eq!(parse_cpu_line("cpu0 10 0 5 80 1 0 2 2"), None);
        assert_eq!(parse_cpu_line("cpu  10 0 5"), None);
    }

    #[test]
    fn a_quiet_watch_records_ticks_and_a_stall_is_a_warning() {
        let w = Watch::start();
        std::thread::sleep(Duration::from_millis(50));
        let lag = w.finish().expect("the watcher ran");
        assert!(lag.ticks >= 5, "{lag:?}");
        assert!(lag.max_ms >= lag.p99_ms, "{lag:?}");
        let stalled = HostLag {
            stalls: 2,
            max_ms: 70.0,
            ..lag
        };
        let w = stalled.warning().expect("a stall warns");
        assert!(
            w.contains("stalled 2 times") && w.contains("70.0 ms"),
            "{w}"
        );
        let quiet = HostLag { stalls: 0, ..lag };
        assert_eq!(quiet.warning(), None);
    }
}
