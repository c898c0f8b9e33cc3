//! A variable link described once for every backend: the link file (`purple demo --link
//! FILE.toml`, `purple demo --matrix --link`, `purple lab run --link`, `purple demo --lab
//! --link`; docs/scenarios.md):
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
//!
//! [run]                    # optional: how the link is run, beside what it is
//! deployment = "home-router"   # or "slides" (default: the backend's own)
//! downloads = 2            # bulk TCP each way (default: the backend's own load)
//! uploads = 1
//! voip = 1                 # VoIP calls from the client, EF, 20 ms (default: the backend's)
//! contenders = ["static-safe", "cake-autorate", "purple", "oracle-late"]
//! base_rtt_ms = 30.0       # the simulated path's idle round trip (the simulator's only)
//! ```
//!
//! Relative paths resolve against the TOML file's directory. [`LinkDesc::read`] checks the file
//! and reads its capacities. [`LinkDesc`] is the one single-link description: a file parses
//! into it and section C's built-in scenarios are written as one in code, and every backend
//! builds its run from it (a [`LinkScenario`](crate::link_scenario::LinkScenario) pairs one with
//! its deployment; section C's closed loop plays one: `experiments::c::link::from_file`; the namespace lab's `lab::link::Link` holds one:
//! `lab::scenario::Scenario::for_link`, for a link file or for section C's scenarios' links,
//! `purple lab run --link-of NAME`). [`derived_rates`] is the one rule a link's static
//! shaper rates and controller range come from when not chosen by hand.

use crate::scenario::{link_capacity_read, ScenarioError};
use qdisc::link::Capacity;
use qdisc::{quantile, Duration, Instant, Rate};
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// The radio buffer of a link unless given (as the built-in recorded traces).
pub const DEFAULT_BUFFER_PACKETS: u32 = 300;
/// Seconds of a link unless given.
pub const DEFAULT_SECS: f64 = 60.0;
/// The radio hop's one-way delay of a link file's direction that gives none: section C's
/// built-in radio hop (`experiments::c::scenario::RADIO_DELAY`), which the lab plays too.
pub const DEFAULT_DELAY: Duration = Duration::from_millis(1);

/// Why a link could not be built.
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
    /// A key's value in a link file is out of range.
    Key {
        /// The file.
        path: PathBuf,
        /// The key (`buffer_packets`, `duration_s`, `[down] delay_ms`, ...).
        key: &'static str,
        /// The value given.
        value: String,
        /// What is accepted.
        accepted: String,
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
            LinkError::Key {
                path,
                key,
                value,
                accepted,
            } => write!(f, "{}: {key} {value}: accepted {accepted}", path.display()),
        }
    }
}

impl std::error::Error for LinkError {}

/// An out-of-range [`LinkError::Option`] as the key of the file at `path` that gave it.
fn in_file(path: &Path, e: LinkError) -> LinkError {
    match e {
        LinkError::Option {
            option,
            value,
            accepted,
        } => LinkError::Key {
            path: path.to_path_buf(),
            key: option,
            value,
            accepted,
        },
        e => e,
    }
}

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
    /// One-way propagation delay of the radio hop, ms (default: the backend's).
    pub delay_ms: Option<f64>,
}

/// A link file as written (see the module docs).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkFile {
    /// Name in outputs.
    pub name: Option<String>,
    /// Seconds of the link.
    pub duration_s: Option<f64>,
    /// The radio's droptail buffer in packets.
    pub buffer_packets: Option<u32>,
    /// Towards the client.
    pub down: DirectionSpec,
    /// From the client.
    pub up: DirectionSpec,
    /// How to run the link (checked into a
    /// [`Run`](crate::link_scenario::Run) by [`LinkDesc::read_with_run`]).
    pub run: Option<RunTable>,
}

/// A link file's optional `[run]` table as written: how the link is run, beside what it is.
/// Every key is optional; a backend takes its own default for a key not given.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RunTable {
    /// Where CAKE and its controller sit: `slides` or `home-router`.
    pub deployment: Option<String>,
    /// Bulk TCP transfers towards the client.
    pub downloads: Option<u16>,
    /// Bulk TCP transfers from the client.
    pub uploads: Option<u16>,
    /// VoIP calls from the client.
    pub voip: Option<u16>,
    /// The contenders to run, by the ids of `purple demo --matrix --contenders`, in table
    /// order.
    pub contenders: Option<Vec<String>>,
    /// The idle round trip of the simulated path, ms (as `purple demo --base-rtt-ms`).
    pub base_rtt_ms: Option<f64>,
}

/// One direction of a link ([`LinkDesc`]).
#[derive(Clone, Debug, PartialEq)]
pub struct DirectionDesc {
    /// What it is in words: a file's rate (`50mbit`) or the name of its trace or schedule
    /// file as written; empty for a link built in code unless its builder names it.
    pub what: String,
    /// The capacity (a file's `rate` or `schedule` as given, not sampled; section C's closed
    /// loop holds it sampled, see `experiments::c::scenario::played`).
    pub capacity: Capacity,
    /// The trace's or schedule's text as the file gives it, for a backend that replays the
    /// file itself (the lab hands a trace to `purple linkem`); `None` for a rate and for a link
    /// built in code.
    pub text: Option<String>,
    /// The radio hop's one-way propagation delay (a file's `delay_ms`, checked 0 ..= 10 s;
    /// [`DEFAULT_DELAY`] where it gives none).
    pub delay: Duration,
    /// The controllers' rate range and the two static CAKE rates for this direction: derived
    /// from the capacity over the link's seconds by [`derived_rates`], or chosen by hand for a
    /// built-in link ([`LinkDesc::with_rates`]).
    pub rates: LinkRates,
}

/// One link, described once for every backend: its name, words, length, per direction the
/// capacity, the radio hop's one-way delay, the controllers' range and the static CAKE rates,
/// and the radio's droptail buffer.
///
/// Who builds it: a link file ([`LinkDesc::read`], [`LinkDesc::parse`]; `purple demo --link`,
/// `purple lab run --link`, the lab's compiled-in `radio` and `tmobile` links), section C's
/// built-in and held-out scenarios in code ([`LinkDesc::new`], `experiments::c::scenario`),
/// a user's two traces (`experiments::c::link::from_traces`) and the lab's links written in
/// code (`lab::link::Link::fixed`, its `starlink`). Who runs it: section C's closed loop holds
/// one in its `Scenario` (with the deployment: where CAKE sits, what the probes see); the
/// namespace lab's `lab::link::Link` holds one with how `purple linkem` plays it.
///
/// Guaranteed for one read from a file: `secs` in 1 ..= 3600, `buffer_packets` in
/// 1 ..= 100000, each delay in 0 ..= 10 s, and the rates derived over `secs`.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkDesc {
    /// The link file it was read from (in messages and descriptions); `None` for a link built
    /// in code.
    pub path: Option<PathBuf>,
    /// Its name: a file's `name` key, else the file's stem.
    pub name: String,
    /// One line in words (a file's: its path, each direction's capacity and mean, its buffer).
    pub description: String,
    /// Seconds of the link: a run's length, and where a schedule loops in the lab (a file's
    /// `duration_s`, default [`DEFAULT_SECS`]; a command line's `--seconds` through
    /// [`LinkDesc::with_secs`]).
    pub secs: f64,
    /// The radio's droptail buffer, packets, both directions (a file's default
    /// [`DEFAULT_BUFFER_PACKETS`]).
    pub buffer_packets: u32,
    /// Towards the client.
    pub down: DirectionDesc,
    /// From the client.
    pub up: DirectionDesc,
}

/// `secs` if in 1 ..= 3600, else the error naming `option`.
pub fn check_secs(secs: f64, option: &'static str) -> Result<f64, LinkError> {
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

/// `n` if in 1 ..= 100000 packets, else the error naming `option`.
pub fn check_buffer(n: u32, option: &'static str) -> Result<u32, LinkError> {
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

impl DirectionDesc {
    /// A direction built in code: `capacity` with the radio hop's one-way `delay`, no words
    /// and no file text, its rates derived over `secs` by [`derived_rates`].
    pub fn new(capacity: Capacity, delay: Duration, secs: f64) -> DirectionDesc {
        DirectionDesc {
            what: String::new(),
            rates: derived_rates(&per_second_mbit(&capacity, secs)),
            capacity,
            text: None,
            delay,
        }
    }
}

impl LinkDesc {
    /// A link built in code (section C's scenarios, the lab's links written in code): its
    /// `(capacity, one-way delay)` each way, the controllers' ranges and static CAKE rates
    /// derived from the capacities over `secs` by [`derived_rates`] (the rule a user's link
    /// gets; a built-in link that chose its own replaces them with [`LinkDesc::with_rates`]).
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        secs: f64,
        buffer_packets: u32,
        (down, down_delay): (Capacity, Duration),
        (up, up_delay): (Capacity, Duration),
    ) -> LinkDesc {
        LinkDesc {
            path: None,
            name: name.into(),
            description: description.into(),
            secs,
            buffer_packets,
            down: DirectionDesc::new(down, down_delay, secs),
            up: DirectionDesc::new(up, up_delay, secs),
        }
    }

    /// This link with the controllers' ranges and static CAKE rates chosen by hand (the
    /// built-in scenarios') instead of derived.
    #[must_use]
    pub fn with_rates(mut self, down: LinkRates, up: LinkRates) -> LinkDesc {
        self.down.rates = down;
        self.up.rates = up;
        self
    }

    /// Reads and checks the link file at `path` (its trace and schedule files relative to its
    /// directory). Errors name the file and the key, option or line.
    /// The file's `[run]` table, if any, is not read (see [`LinkDesc::read_with_run`]).
    pub fn read(path: &Path) -> Result<LinkDesc, LinkError> {
        Ok(LinkDesc::read_with_run(path)?.0)
    }

    /// Reads and checks the link file at `path` as [`LinkDesc::read`] does, and its `[run]`
    /// table ([`Run`](crate::link_scenario::Run); empty if the file has none). Errors name the
    /// file and the key.
    pub fn read_with_run(path: &Path) -> Result<(LinkDesc, crate::link_scenario::Run), LinkError> {
        let text = std::fs::read_to_string(path).map_err(|e| LinkError::Read {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        let dir = path.parent().unwrap_or(Path::new(""));
        LinkDesc::parse_with_run(path, &text, &|t: &str| {
            let p = dir.join(t);
            std::fs::read_to_string(&p).map_err(|e| ScenarioError(format!("{}: {e}", p.display())))
        })
    }

    /// Checks the link file `text` (named `path` in messages), reading its trace and schedule
    /// files with `read` (given the key's value, the file's text or an error naming it): for
    /// a link compiled in, whose files are compiled in too. A direction without `delay_ms`
    /// gets [`DEFAULT_DELAY`]; the rates are derived over the file's `duration_s`.
    /// The file's `[run]` table, if any, is not read (see [`LinkDesc::parse_with_run`]).
    pub fn parse(
        path: &Path,
        text: &str,
        read: &dyn Fn(&str) -> Result<String, ScenarioError>,
    ) -> Result<LinkDesc, LinkError> {
        Ok(LinkDesc::parse_with_run(path, text, read)?.0)
    }

    /// [`LinkDesc::parse`], and the file's `[run]` table checked
    /// ([`Run::check`](crate::link_scenario::Run::check); empty if the file has none).
    pub fn parse_with_run(
        path: &Path,
        text: &str,
        read: &dyn Fn(&str) -> Result<String, ScenarioError>,
    ) -> Result<(LinkDesc, crate::link_scenario::Run), LinkError> {
        let f: LinkFile = toml::from_str(text).map_err(|e| LinkError::Toml {
            path: path.to_path_buf(),
            reason: e.to_string().trim_end().to_string(),
        })?;
        let buffer_packets = check_buffer(
            f.buffer_packets.unwrap_or(DEFAULT_BUFFER_PACKETS),
            "buffer_packets",
        )
        .map_err(|e| in_file(path, e))?;
        let dir = |d: &DirectionSpec, which: &str, delay_key: &'static str| {
            let (capacity, text) = link_capacity_read(
                d.rate.as_deref(),
                d.trace.as_deref(),
                d.schedule.as_deref(),
                read,
            )
            .map_err(|e| LinkError::Capacity(format!("{}: [{which}]: {e}", path.display())))?;
            let what = match (&d.rate, &d.trace, &d.schedule) {
                (Some(r), _, _) => r.clone(),
                (_, Some(t), _) => t.clone(),
                (_, _, Some(s)) => s.clone(),
                _ => String::new(),
            };
            let delay = d
                .delay_ms
                .map(|x| delay(x, delay_key))
                .transpose()
                .map_err(|e| in_file(path, e))?
                .unwrap_or(DEFAULT_DELAY);
            Ok::<_, LinkError>((what, capacity, text, delay))
        };
        let down = dir(&f.down, "down", "[down] delay_ms")?;
        let up = dir(&f.up, "up", "[up] delay_ms")?;
        let secs = check_secs(f.duration_s.unwrap_or(DEFAULT_SECS), "duration_s")
            .map_err(|e| in_file(path, e))?;
        let name = f.name.clone().unwrap_or_else(|| {
            path.file_stem()
                .map_or("user-link".into(), |s| s.to_string_lossy().into_owned())
        });
        let direction = |(what, capacity, text, delay)| DirectionDesc {
            what,
            text,
            ..DirectionDesc::new(capacity, delay, secs)
        };
        let mut d = LinkDesc {
            path: Some(path.to_path_buf()),
            name,
            description: String::new(),
            secs,
            buffer_packets,
            down: direction(down),
            up: direction(up),
        };
        d.description = d.file_words();
        let run = crate::link_scenario::Run::check(f.run.as_ref()).map_err(|e| in_file(path, e))?;
        Ok((d, run))
    }

    /// The words of a link read from a file over its `secs`: the file, each direction's
    /// capacity as given and its mean, the buffer.
    fn file_words(&self) -> String {
        let mean = |c: &Capacity| format!("{:.1}", mean_mbit(c, self.secs));
        format!(
            "{}: down {} (mean {} Mbit/s), up {} (mean {} Mbit/s), {}-packet radio buffer",
            self.path.as_deref().unwrap_or(Path::new("")).display(),
            self.down.what,
            mean(&self.down.capacity),
            self.up.what,
            mean(&self.up.capacity),
            self.buffer_packets
        )
    }

    /// The link's seconds: `over` (a command line's `--seconds`, checked 1 ..= 3600, the error
    /// naming it) if given, else [`LinkDesc::secs`].
    pub fn secs(&self, over: Option<f64>) -> Result<f64, LinkError> {
        match over {
            Some(s) => check_secs(s, "--seconds"),
            None => Ok(self.secs),
        }
    }

    /// This link over `over` seconds (a command line's `--seconds`; `None`: unchanged): its
    /// rates derived again over the new length by [`derived_rates`] (hand-chosen ones are not
    /// kept) and, for a link read from a file, its words too (the means over the new length).
    pub fn with_secs(mut self, over: Option<f64>) -> Result<LinkDesc, LinkError> {
        let Some(s) = over else { return Ok(self) };
        self.secs = check_secs(s, "--seconds")?;
        for d in [&mut self.down, &mut self.up] {
            d.rates = derived_rates(&per_second_mbit(&d.capacity, self.secs));
        }
        if self.path.is_some() {
            self.description = self.file_words();
        }
        Ok(self)
    }

    /// This link at `f` of its capacity (0 < `f` <= 1), for a machine that cannot keep up with
    /// it (the reference kernel under QEMU): each direction's capacity scaled
    /// ([`Capacity::scaled`]: a trace thinned evenly, a schedule's rates times `f`), its rates
    /// (range, static CAKE rates, start) times `f`, the buffer in packets times `f` (rounded, at
    /// least 1: the same time at the scaled rate), the delays and the length unchanged. A
    /// file's text is dropped (a backend writes the scaled trace's own, as for a trace built in
    /// code), and the description says the factor. `f` = 1 is this link. Errors name `option`.
    pub fn scaled(mut self, f: f64, option: &'static str) -> Result<LinkDesc, LinkError> {
        if f == 1.0 {
            return Ok(self);
        }
        let bad = || LinkError::Option {
            option,
            value: f.to_string(),
            accepted: "0 < f <= 1".into(),
        };
        for d in [&mut self.down, &mut self.up] {
            d.capacity = d.capacity.scaled(f).ok_or_else(bad)?;
            d.text = None;
            d.rates = d.rates.scaled(f);
        }
        self.buffer_packets = ((f64::from(self.buffer_packets) * f).round() as u32).max(1);
        self.description = format!("{} (capacities x{f})", self.description);
        Ok(self)
    }
}

impl LinkRates {
    /// Every rate times `f`.
    #[must_use]
    pub fn scaled(&self, f: f64) -> LinkRates {
        LinkRates {
            lo: self.lo * f,
            hi: self.hi * f,
            safe: self.safe * f,
            optimistic: self.optimistic * f,
            start: self.start.map(|s| s * f),
        }
    }
}

/// The mean capacity of every whole second in `[0, secs)` (at least one), Mbit/s, as section C
/// reads a link over `secs` seconds (slot by slot after `SlotCapacity::sampled`, which a test
/// of experiments holds equal): a rate or schedule sampled at the start of every
/// 50 ms (at least 1 byte/s, whole bytes/s), a trace's opportunities in the second.
pub fn per_second_mbit(c: &Capacity, secs: f64) -> Vec<f64> {
    const SLOT: Duration = Duration::from_millis(50);
    (0..secs.floor().max(1.0) as u64)
        .map(|k| {
            let from = Instant::from_secs(k);
            match c {
                Capacity::Trace(_) | Capacity::Unlimited => {
                    c.rate_in(from, Duration::from_secs(1))
                        .map_or(u64::MAX, |r| r as u64) as f64
                        * 8e-6
                }
                Capacity::Rate(r) => (*r).max(1) as f64 * 8e-6,
                Capacity::Schedule(s) => {
                    let to = Instant::from_secs(k + 1);
                    let mut t = from;
                    let (mut sum, mut n) = (0.0, 0u64);
                    while t < to {
                        sum += s.rate_at(t).max(1.0) as u64 as f64;
                        n += 1;
                        t += SLOT;
                    }
                    sum / n as f64 * 8e-6
                }
            }
        })
        .collect()
}

/// The mean of [`per_second_mbit`] (0 for no second), Mbit/s: a link's mean capacity in its
/// words.
pub fn mean_mbit(c: &Capacity, secs: f64) -> f64 {
    let r = per_second_mbit(c, secs);
    r.iter().sum::<f64>() / r.len().max(1) as f64
}

/// One direction's controller range and static CAKE rates, Mbit/s: derived from its
/// per-second capacities by [`derived_rates`] (the bounds below are that rule's), or chosen by
/// hand for a built-in link.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinkRates {
    /// The controllers' lowest rate: a tenth of the mean (at least 0.1, at most half of `hi`).
    pub lo: f64,
    /// The controllers' highest rate: 1.2 × the 90th percentile (at least 0.2).
    pub hi: f64,
    /// The "safe" static CAKE rate (section C's C2): the median per-second capacity, to 0.1
    /// (at least 0.1).
    pub safe: f64,
    /// The "optimistic" static CAKE rate (section C's C3): the 90th percentile, to 0.1 (at
    /// least 0.1).
    pub optimistic: f64,
    /// The controllers' start rate where the link's builder chose one (the lab's built-in
    /// scenarios: their static rate, or 90% of the uplink); `None` for the rule every
    /// backend applies otherwise, 60% of `hi` ([`LinkRates::start_rate`]).
    pub start: Option<f64>,
}

impl LinkRates {
    /// The controllers' start rate: `start` if chosen, else 60% of `hi` (computed on `hi` as
    /// a [`Rate`], `Rate::from_mbit(hi) * 3 / 5`). Section C's closed loop and the lab's
    /// daemons both start here.
    pub fn start_rate(&self) -> Rate {
        match self.start {
            Some(s) => Rate::from_mbit(s),
            None => Rate::from_mbit(self.hi) * 3 / 5,
        }
    }
}

fn percentile(v: &[f64], p: f64) -> f64 {
    let mut s: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    s.sort_by(f64::total_cmp);
    quantile::rounded_rank(&s, p).unwrap_or(f64::NAN)
}

/// The one rule a variable link's static shaper rates and controller range come from, given
/// its per-second capacities ([`per_second_mbit`]): every [`LinkDesc`] built by
/// [`LinkDesc::new`], [`LinkDesc::parse`] or [`LinkDesc::with_secs`] (section C's held-out
/// links and a user's, the lab's link files) unless its builder chose them by hand.
pub fn derived_rates(per_second_mbit: &[f64]) -> LinkRates {
    let r = per_second_mbit;
    let mean = r.iter().sum::<f64>() / r.len().max(1) as f64;
    let (p50, p90) = (percentile(r, 0.5), percentile(r, 0.9));
    let round = |x: f64| (x * 10.0).round() / 10.0;
    let hi = (1.2 * p90).max(0.2);
    let lo = (0.1 * mean).clamp(0.1, hi / 2.0);
    LinkRates {
        lo,
        hi,
        safe: round(p50).max(0.1),
        optimistic: round(p90).max(0.1),
        start: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RADIO: &str = include_str!("../../../scenarios/links/lab-radio.toml");
    const RADIO_DOWN: &str = include_str!("../../../scenarios/links/lab-radio.down");

    fn files(name: &str) -> Result<String, ScenarioError> {
        match name {
            "lab-radio.down" => Ok(RADIO_DOWN.to_string()),
            "two.down" => Ok("0 step 20mbit\n3 step 10mbit\n".to_string()),
            _ => Err(ScenarioError(format!("{name}: no such file"))),
        }
    }

    #[test]
    fn the_lab_radio_file_reads_as_the_lab_radio() {
        let d = LinkDesc::parse(Path::new("lab-radio.toml"), RADIO, &files).expect("parses");
        assert_eq!(d.name, "lab-radio");
        assert_eq!(d.buffer_packets, 1000);
        assert_eq!(d.secs(None), Ok(60.0));
        assert_eq!(d.secs(Some(20.0)), Ok(20.0));
        assert_eq!(d.path.as_deref(), Some(Path::new("lab-radio.toml")));
        assert_eq!(
            d.description,
            "lab-radio.toml: down lab-radio.down (mean 105.0 Mbit/s), up 50mbit (mean 50.0 \
             Mbit/s), 1000-packet radio buffer"
        );
        assert_eq!(d.up.capacity, Capacity::Rate(6_250_000));
        assert_eq!(d.up.text, None);
        assert_eq!(d.down.what, "lab-radio.down");
        assert_eq!(d.down.text.as_deref(), Some(RADIO_DOWN));
        let Capacity::Schedule(s) = &d.down.capacity else {
            panic!("{:?}", d.down.capacity)
        };
        assert_eq!(s.rate_at(Instant::from_secs(2)), 16_250_000.0);
        assert_eq!(s.rate_at(Instant::from_secs(7)), 10_000_000.0);
        for dir in [&d.down, &d.up] {
            assert_eq!(dir.delay, Duration::from_millis(5));
        }
        // Its per-second capacity alternates 130/80 every 5 s: median 130 (rounded rank of 60
        // values), 90th percentile 130, a tenth of the mean 105 at the bottom.
        let r = per_second_mbit(&d.down.capacity, 60.0);
        assert_eq!(r.len(), 60);
        assert!(
            (r[0] - 130.0).abs() < 1e-9 && (r[5] - 80.0).abs() < 1e-9,
            "{r:?}"
        );
        let k = derived_rates(&r);
        assert!(
            (k.hi - 156.0).abs() < 1e-9 && (k.lo - 10.5).abs() < 1e-9,
            "{k:?}"
        );
        assert_eq!((k.safe, k.optimistic), (130.0, 130.0));
        // The file's rates are the rule's over its length; over another, derived again.
        assert_eq!(d.down.rates, k);
        let short = d.clone().with_secs(Some(7.0)).expect("7 s");
        assert_eq!(short.secs, 7.0);
        assert!(
            (short.down.rates.lo - 11.57).abs() < 0.01,
            "{:?}",
            short.down.rates
        );
        assert!(
            short.description.contains("(mean 115.7 Mbit/s)"),
            "{}",
            short.description
        );
        assert_eq!(d.clone().with_secs(None), Ok(d.clone()));
    }

    #[test]
    fn a_scaled_link_keeps_its_shape_and_delays_at_a_share_of_its_rates() {
        let d = LinkDesc::parse(Path::new("lab-radio.toml"), RADIO, &files).expect("parses");
        let s = d.clone().scaled(0.1, "--scale").expect("0.1");
        let Capacity::Schedule(sch) = &s.down.capacity else {
            panic!("{:?}", s.down.capacity)
        };
        assert_eq!(sch.rate_at(Instant::from_secs(2)), 1_625_000.0);
        assert_eq!(sch.rate_at(Instant::from_secs(7)), 1_000_000.0);
        assert_eq!(s.up.capacity, Capacity::Rate(625_000));
        assert_eq!(
            s.down.text, None,
            "the file's text is not the scaled link's"
        );
        assert!((s.down.rates.hi - 15.6).abs() < 1e-9, "{:?}", s.down.rates);
        assert!(
            (s.down.rates.safe - 13.0).abs() < 1e-9,
            "{:?}",
            s.down.rates
        );
        assert_eq!(s.buffer_packets, 100);
        assert_eq!(
            (s.down.delay, s.up.delay, s.secs),
            (d.down.delay, d.up.delay, d.secs)
        );
        assert!(
            s.description.ends_with("(capacities x0.1)"),
            "{}",
            s.description
        );
        assert_eq!(d.clone().scaled(1.0, "--scale"), Ok(d.clone()));
        let e = d.scaled(1.5, "--scale").expect_err("above 1");
        assert!(e.to_string().contains("--scale"), "{e}");
    }

    #[test]
    fn errors_name_the_file_and_the_key_option_or_line() {
        let p = Path::new("my.toml");
        let e = |text: &str| {
            LinkDesc::parse(p, text, &files)
                .expect_err(text)
                .to_string()
        };
        let m = e("[down]\nrate = \"10mbit\"\n[up]\nrate = \"x\"\n");
        assert!(m.starts_with("my.toml: [up]: bad rate \"x\""), "{m}");
        let m = e("[down]\nschedule = \"nope.down\"\n[up]\nrate = \"1mbit\"\n");
        assert_eq!(m, "my.toml: [down]: nope.down: no such file");
        let m = e("[down]\nrate = \"1mbit\"\ntrace = \"two.down\"\n[up]\nrate = \"1mbit\"\n");
        assert_eq!(
            m,
            "my.toml: [down]: give exactly one of rate, trace, schedule"
        );
        // A schedule given as a trace names the file and its line.
        let m = e("[down]\ntrace = \"two.down\"\n[up]\nrate = \"1mbit\"\n");
        assert!(m.starts_with("my.toml: [down]: two.down: line 1"), "{m}");
        let m = e("buffer_packets = 0\n[down]\nrate = \"1mbit\"\n[up]\nrate = \"1mbit\"\n");
        assert_eq!(
            m,
            "my.toml: buffer_packets 0: accepted 1 ..= 100000 packets"
        );
        let m = e("[down]\nrate = \"1mbit\"\ndelay_ms = -1.0\n[up]\nrate = \"1mbit\"\n");
        assert_eq!(m, "my.toml: [down] delay_ms -1: accepted 0 ..= 10000 ms");
        let m = e("[down]\nrate = \"1mbit\"\nspeed = 3\n[up]\nrate = \"1mbit\"\n");
        assert!(m.starts_with("my.toml: TOML parse error at line 3"), "{m}");
        assert!(m.contains("speed"), "{m}");
        let m = e("duration_s = 0.5\n[down]\nschedule = \"two.down\"\n[up]\nrate = \"2mbit\"\n");
        assert_eq!(m, "my.toml: duration_s 0.5: accepted 1 ..= 3600 seconds");
        let d = LinkDesc::parse(
            p,
            "[down]\nschedule = \"two.down\"\n[up]\nrate = \"2mbit\"\n",
            &files,
        )
        .expect("parses");
        assert_eq!(d.name, "my");
        assert_eq!(
            (d.secs, d.buffer_packets),
            (DEFAULT_SECS, DEFAULT_BUFFER_PACKETS)
        );
        assert_eq!((d.down.delay, d.up.delay), (DEFAULT_DELAY, DEFAULT_DELAY));
        assert_eq!(
            d.secs(Some(5000.0)).expect_err("5000 s").to_string(),
            "--seconds 5000: accepted 1 ..= 3600 seconds"
        );
        assert_eq!(
            d.with_secs(Some(0.5)).expect_err("0.5 s").to_string(),
            "--seconds 0.5: accepted 1 ..= 3600 seconds"
        );
    }
}
