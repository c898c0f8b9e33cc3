//! The shaper's download rate read back from the shaper itself while a daemon drives it: from
//! Linux's CAKE over rtnetlink (`TCA_CAKE_BASE_RATE64`, what `tc -j qdisc show` prints as
//! `bandwidth`) or from our bridge's control socket (`stats --json`, the same field). It checks
//! the actuator end to end: what the daemon logged as applied is what the shaper holds.
//!
//! **Owns**: the sampling thread ([`Sampler`]) and the two ways of reading. **Must not**:
//! judge the samples (that is [`crate::analysis::readback_check`]).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use controller::ctl::{parse_stats_directions, Request};
use controller::Direction;

/// How often the shaper is read: a read costs an exec-free system call or a socket round
/// trip, cheap beside the daemon's 20 wake-ups a second even in the reference kernel's guest.
pub const READ_EVERY: Duration = Duration::from_millis(500);

/// Where the download's rate is read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// Linux's CAKE at the root of device `dev` in the namespace whose file is `ns`.
    Netlink {
        /// The namespace file (`/run/netns/NAME`).
        ns: PathBuf,
        /// The download's device there.
        dev: String,
    },
    /// Our bridge's control socket (its ingress is the download).
    Bridge(PathBuf),
}

/// One reading: seconds on the run's clock and the rate the shaper held, Mbit/s (`None`:
/// `unlimited`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReadBack {
    /// Seconds since the run's epoch.
    pub t: f64,
    /// The download's configured rate, Mbit/s.
    pub down_mbit: Option<f64>,
}

/// The read-back samples of one run, and how many reads failed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ReadBacks {
    /// The readings, in time order.
    pub samples: Vec<ReadBack>,
    /// Reads that failed (no answer, no CAKE there, a malformed answer).
    pub errors: usize,
    /// The first failure's text, if any.
    pub first_error: Option<String>,
}

/// A thread reading the shaper every [`READ_EVERY`] until [`Sampler::finish`].
#[derive(Debug)]
pub struct Sampler {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<ReadBacks>,
}

impl Sampler {
    /// Starts reading `source` now, timing samples from `epoch` (the run's). A thread that
    /// cannot enter the namespace or open its socket reports that as its first error and
    /// reads nothing.
    pub fn start(source: Source, epoch: Instant) -> std::io::Result<Sampler> {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let handle = std::thread::Builder::new()
            .name("lab readback".into())
            .spawn(move || sample(source, epoch, &s))?;
        Ok(Sampler { stop, handle })
    }

    /// Stops the thread and returns what it read (empty, with one error, if it panicked).
    pub fn finish(self) -> ReadBacks {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().unwrap_or_else(|_| ReadBacks {
            samples: Vec::new(),
            errors: 1,
            first_error: Some("the read-back thread panicked".into()),
        })
    }
}

/// Why one reading of the shaper failed (kept as text in [`ReadBacks::first_error`]).
#[derive(Debug)]
pub enum ReadError {
    /// The thread could not enter the router's namespace.
    Setns(PathBuf, std::io::Error),
    /// No such device in that namespace.
    Device(String, std::io::Error),
    /// The rtnetlink socket or request failed.
    Netlink(std::io::Error),
    /// The qdisc at the device's root is not a CAKE with a configured rate.
    NotCake,
    /// The bridge's control socket did not answer.
    Bridge(dataplane::ctl::CtlError),
    /// The bridge's `stats --json` answer had no download rate in it.
    BridgeStats(String),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Setns(ns, e) => write!(f, "setns {}: {e}", ns.display()),
            ReadError::Device(dev, e) => write!(f, "{dev}: {e}"),
            ReadError::Netlink(e) => write!(f, "netlink: {e}"),
            ReadError::NotCake => f.write_str("the root qdisc is not a CAKE with a rate"),
            ReadError::Bridge(e) => write!(f, "{e}"),
            ReadError::BridgeStats(why) => write!(f, "bridge stats: {why}"),
        }
    }
}

impl std::error::Error for ReadError {}

/// The sampling loop of [`Sampler`].
fn sample(source: Source, epoch: Instant, stop: &AtomicBool) -> ReadBacks {
    let mut out = ReadBacks::default();
    let fail = |out: &mut ReadBacks, e: ReadError| {
        out.errors += 1;
        out.first_error.get_or_insert_with(|| e.to_string());
    };
    let mut reader = match open(&source) {
        Ok(r) => r,
        Err(e) => {
            fail(&mut out, e);
            return out;
        }
    };
    // Times on the run's clock (the lab's clock is read through its epoch).
    let mut next = epoch.elapsed();
    while !stop.load(Ordering::Relaxed) {
        let now = epoch.elapsed();
        if now >= next {
            match reader.read() {
                Ok(bytes_per_s) => out.samples.push(ReadBack {
                    t: now.as_secs_f64(),
                    down_mbit: bytes_per_s.map(|b| controller::Rate::from_bytes_per_s(b).mbit()),
                }),
                Err(e) => fail(&mut out, e),
            }
            next += READ_EVERY;
        }
        std::thread::sleep(next.saturating_sub(epoch.elapsed()).min(READ_EVERY));
    }
    out
}

/// An open way of reading the download's rate.
enum Reader {
    Netlink {
        nl: daemon::netlink::CakeNetlink,
        ifindex: u32,
    },
    Bridge(PathBuf),
}

/// Enters the namespace (this thread only) and opens the socket, or notes the bridge's path.
fn open(source: &Source) -> Result<Reader, ReadError> {
    match source {
        Source::Netlink { ns, dev } => {
            os::netns::enter(ns).map_err(|e| ReadError::Setns(ns.clone(), e))?;
            // By name in this thread's namespace (sysfs would show the lab's own).
            let ifindex = os::if_index(dev).map_err(|e| ReadError::Device(dev.clone(), e))?;
            let nl = daemon::netlink::CakeNetlink::open().map_err(ReadError::Netlink)?;
            Ok(Reader::Netlink { nl, ifindex })
        }
        Source::Bridge(p) => Ok(Reader::Bridge(p.clone())),
    }
}

impl Reader {
    /// The download's rate in bytes per second (`None`: unlimited).
    fn read(&mut self) -> Result<Option<u64>, ReadError> {
        match self {
            Reader::Netlink { nl, ifindex } => {
                let s = nl
                    .qdisc_stats(*ifindex, daemon::netlink::TC_H_ROOT)
                    .map_err(ReadError::Netlink)?;
                match (s.is_cake, s.base_rate_bytes_per_s) {
                    (true, Some(0)) => Ok(None),
                    (true, Some(b)) => Ok(Some(b)),
                    _ => Err(ReadError::NotCake),
                }
            }
            Reader::Bridge(p) => {
                let text = dataplane::ctl::request(p, &Request::Stats { json: true })
                    .map_err(ReadError::Bridge)?;
                bridge_down_rate(&text)
            }
        }
    }
}

/// The download's (the bridge's ingress) rate in bytes per second from the bridge's
/// `stats --json` answer, read through the control protocol's own parser
/// ([`controller::ctl::parse_stats_directions`]) (`None`: unlimited).
pub fn bridge_down_rate(text: &str) -> Result<Option<u64>, ReadError> {
    let bad = ReadError::BridgeStats;
    let dirs = parse_stats_directions(text).map_err(|e| bad(e.to_string()))?;
    let down = dirs[Direction::Down]
        .as_ref()
        .ok_or_else(|| bad("no ingress (download) direction".into()))?;
    match &down["options"]["bandwidth"] {
        serde_json::Value::Number(n) => n
            .as_u64()
            .map(Some)
            .ok_or_else(|| bad(format!("bandwidth {n}"))),
        serde_json::Value::String(s) if s == "unlimited" => Ok(None),
        v => Err(bad(format!("bandwidth {v}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bridges_download_rate_is_its_ingress_bandwidth() {
        let text = r#"[{"kind":"cake","options":{"bandwidth":625000},"purple":{"direction":"egress"}},
            {"kind":"cake","options":{"bandwidth":1000000},"purple":{"direction":"ingress"}}]"#;
        assert_eq!(bridge_down_rate(text).unwrap(), Some(1_000_000));
        let unl = r#"[{"options":{"bandwidth":"unlimited"},"purple":{"direction":"ingress"}}]"#;
        assert_eq!(bridge_down_rate(unl).unwrap(), None);
        let e = bridge_down_rate(r#"[{"purple":{"direction":"egress"}}]"#).unwrap_err();
        assert!(e.to_string().contains("no ingress"), "{e}");
        assert!(bridge_down_rate("not json").is_err());
    }
}
