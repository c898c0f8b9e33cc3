//! A user's own variable link for section C: a mahimahi trace per direction (as `purple linkem`
//! reads them), or a small TOML file in the simulator's vocabulary (docs/scenarios.md):
//!
//! ```toml
//! name = "my-lte"          # optional (default: the file's stem)
//! duration_s = 60.0        # optional (default 60)
//! buffer_packets = 300     # the radio's droptail buffer, both directions (default 300)
//!
//! [down]
//! trace = "my-lte.down"    # a mahimahi file; or `rate = "100mbit"`, or
//! delay_ms = 10.0          #   `schedule = "down.txt"` (step/ramp); delay: the radio hop's
//!                          #   one-way propagation (default 1 ms)
//! [up]
//! rate = "20mbit"
//! ```
//!
//! Relative paths resolve against the TOML file's directory. Either way the result is a
//! [`Scenario`] from [`Scenario::for_link`]: every contender runs on it in the usual closed loop.

use super::closed_loop::PATH_RTT;
use super::scenario::{Capacity, Scenario, SlotCapacity, RADIO_DELAY};
use qdisc::Duration;
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// The radio buffer of a user's link unless given (as the built-in recorded traces).
pub const DEFAULT_BUFFER_PACKETS: u32 = 300;
/// Simulated seconds on a user's link unless given.
pub const DEFAULT_SECS: f64 = 60.0;

/// Why a user's link could not be built.
#[derive(Clone, Debug, PartialEq)]
pub enum LinkError {
    /// A file could not be read.
    Read {
        /// The file.
        path: PathBuf,
        /// The system's reason.
        reason: String,
    },
    /// A trace or schedule file is malformed; the message names the file and the line.
    Capacity(String),
    /// The TOML file is malformed (the message names the key or line).
    Toml {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// An option's value is out of range.
    Option {
        /// The option (`--seconds`, `buffer_packets`, ...).
        option: &'static str,
        /// The value given.
        value: String,
        /// What is accepted.
        accepted: String,
    },
}

impl std::fmt::Display for LinkError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LinkError::Read { path, reason } => write!(f, "{}: {reason}", path.display()),
            LinkError::Capacity(m) => f.write_str(m),
            LinkError::Toml { path, reason } => write!(f, "{}: {reason}", path.display()),
            LinkError::Option {
                option,
                value,
                accepted,
            } => write!(f, "{option} {value}: accepted {accepted}"),
        }
    }
}

impl std::error::Error for LinkError {}

/// One direction of a link file: exactly one of `rate`, `trace`, `schedule` (as a simulator
/// `[[link]]`), and the radio hop's one-way delay.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DirectionSpec {
    /// Fixed rate in tc syntax (`20mbit`).
    pub rate: Option<String>,
    /// Mahimahi trace file.
    pub trace: Option<String>,
    /// Step/ramp schedule file.
    pub schedule: Option<String>,
    /// One-way propagation delay of the radio hop, ms (default 1).
    pub delay_ms: Option<f64>,
}

/// A link file (see the module docs).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkFile {
    /// Name in outputs.
    pub name: Option<String>,
    /// Simulated seconds.
    pub duration_s: Option<f64>,
    /// The radio's droptail buffer in packets.
    pub buffer_packets: Option<u32>,
    /// Towards the client.
    pub down: DirectionSpec,
    /// From the client.
    pub up: DirectionSpec,
}

fn check_secs(secs: f64, option: &'static str) -> Result<f64, LinkError> {
    if (1.0..=3600.0).contains(&secs) {
        Ok(secs)
    } else {
        Err(LinkError::Option {
            option,
            value: secs.to_string(),
            accepted: "1 ..= 3600 seconds".into(),
        })
    }
}

fn check_buffer(n: u32, option: &'static str) -> Result<u32, LinkError> {
    if (1..=100_000).contains(&n) {
        Ok(n)
    } else {
        Err(LinkError::Option {
            option,
            value: n.to_string(),
            accepted: "1 ..= 100000 packets".into(),
        })
    }
}

fn delay(ms: f64, option: &'static str) -> Result<Duration, LinkError> {
    if ms.is_finite() && (0.0..=10_000.0).contains(&ms) {
        Ok(Duration::from_secs_f64(ms / 1e3))
    } else {
        Err(LinkError::Option {
            option,
            value: ms.to_string(),
            accepted: "0 ..= 10000 ms".into(),
        })
    }
}

/// The capacity from one direction's keys, files relative to `dir`.
fn capacity(
    rate: Option<&str>,
    trace: Option<&str>,
    schedule: Option<&str>,
    dir: &Path,
    secs: f64,
) -> Result<Capacity, LinkError> {
    let r = sim::link_capacity(rate, trace, schedule, dir)
        .map_err(|e| LinkError::Capacity(e.to_string()))?;
    Ok(r.sampled(secs))
}

/// Mean capacity of `c` over `secs` in words.
fn mean_words(c: &Capacity, secs: f64) -> String {
    let r = c.rates_per_second(secs);
    format!("{:.1}", r.iter().sum::<f64>() / r.len().max(1) as f64)
}

/// The radio hop's one-way delay, each way, that gives the simulated path an idle round trip of
/// `base_rtt_ms` (`purple demo --base-rtt-ms`, on any link: apply it with
/// [`Scenario::with_radio_delay`]). Accepted: the rest of the simulated path's [`PATH_RTT`]
/// (8.4 ms) to 20 s above it; the built-in scenarios' own round trip is 10.4 ms.
pub fn radio_delay_for_rtt(base_rtt_ms: f64) -> Result<Duration, LinkError> {
    let path = PATH_RTT.as_millis_f64();
    if !(base_rtt_ms.is_finite() && base_rtt_ms >= path && base_rtt_ms <= path + 20_000.0) {
        return Err(LinkError::Option {
            option: "--base-rtt-ms",
            value: base_rtt_ms.to_string(),
            accepted: format!(
                "{path} ..= {} ms (the simulated path without the radio hop has {path})",
                path + 20_000.0
            ),
        });
    }
    Ok(Duration::from_secs_f64((base_rtt_ms - path) / 2e3))
}

/// A user's link from two mahimahi traces (`purple demo --down-trace F --up-trace F`): the
/// radio buffer `buffer_packets` (default [`DEFAULT_BUFFER_PACKETS`]), `secs` simulated seconds
/// (default [`DEFAULT_SECS`]) and the built-in scenarios' radio hop ([`RADIO_DELAY`] each way;
/// another round trip: [`radio_delay_for_rtt`]).
pub fn from_traces(
    down: &Path,
    up: &Path,
    buffer_packets: Option<u32>,
    secs: Option<f64>,
) -> Result<Scenario, LinkError> {
    let secs = check_secs(secs.unwrap_or(DEFAULT_SECS), "--seconds")?;
    let buffer = check_buffer(
        buffer_packets.unwrap_or(DEFAULT_BUFFER_PACKETS),
        "--buffer-packets",
    )?;
    let radio = RADIO_DELAY;
    let here = Path::new("");
    let d = capacity(None, Some(&down.to_string_lossy()), None, here, secs)?;
    let u = capacity(None, Some(&up.to_string_lossy()), None, here, secs)?;
    let description = format!(
        "your link: down {} (mean {} Mbit/s), up {} (mean {} Mbit/s), {buffer}-packet radio \
         buffer",
        down.display(),
        mean_words(&d, secs),
        up.display(),
        mean_words(&u, secs)
    );
    Ok(Scenario::for_link(
        "user-traces",
        description,
        secs,
        d,
        u,
        buffer,
        radio,
        radio,
    ))
}

/// A user's link from a link file (`purple demo --link FILE.toml`); `secs` overrides its
/// `duration_s`.
pub fn from_file(path: &Path, secs: Option<f64>) -> Result<Scenario, LinkError> {
    let text = std::fs::read_to_string(path).map_err(|e| LinkError::Read {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })?;
    let f: LinkFile = toml::from_str(&text).map_err(|e| LinkError::Toml {
        path: path.to_path_buf(),
        reason: e.to_string().trim_end().to_string(),
    })?;
    let secs = match secs {
        Some(s) => check_secs(s, "--seconds")?,
        None => check_secs(f.duration_s.unwrap_or(DEFAULT_SECS), "duration_s")?,
    };
    let buffer = check_buffer(
        f.buffer_packets.unwrap_or(DEFAULT_BUFFER_PACKETS),
        "buffer_packets",
    )?;
    let dir = path.parent().unwrap_or(Path::new(""));
    let dir_cap = |d: &DirectionSpec, which: &str| {
        capacity(
            d.rate.as_deref(),
            d.trace.as_deref(),
            d.schedule.as_deref(),
            dir,
            secs,
        )
        .map_err(|e| match e {
            LinkError::Capacity(m) => {
                LinkError::Capacity(format!("{}: [{which}]: {m}", path.display()))
            }
            e => e,
        })
    };
    let (down, up) = (dir_cap(&f.down, "down")?, dir_cap(&f.up, "up")?);
    let name = f.name.clone().unwrap_or_else(|| {
        path.file_stem()
            .map_or("user-link".into(), |s| s.to_string_lossy().into_owned())
    });
    let words = |d: &DirectionSpec, c: &Capacity| {
        let what = match (&d.rate, &d.trace, &d.schedule) {
            (Some(r), _, _) => r.clone(),
            (_, Some(t), _) => t.clone(),
            (_, _, Some(s)) => s.clone(),
            _ => String::new(),
        };
        format!("{what} (mean {} Mbit/s)", mean_words(c, secs))
    };
    let description = format!(
        "{}: down {}, up {}, {buffer}-packet radio buffer",
        path.display(),
        words(&f.down, &down),
        words(&f.up, &up)
    );
    let ms = |d: &DirectionSpec, o| d.delay_ms.map_or(Ok(RADIO_DELAY), |x| delay(x, o));
    Ok(Scenario::for_link(
        name,
        description,
        secs,
        down,
        up,
        buffer,
        ms(&f.down, "[down] delay_ms")?,
        ms(&f.up, "[up] delay_ms")?,
    ))
}
