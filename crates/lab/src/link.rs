//! The lab's link: what `purple linkem` emulates between the router and the server, per
//! direction a fixed rate, a step/ramp schedule or a recorded mahimahi trace, with a one-way
//! delay and a droptail buffer. A [`Link`] is a [`LinkDesc`] (the one single-link description,
//! `sim::link_file`: from a link file, or written in code for the built-in scenarios) with how
//! the emulator plays each direction ([`Link::from_desc`] checks that it can);
//! [`Link::linkem_args`] is the one place that turns it into `purple linkem`'s options.
//!
//! How the lab plays a schedule: as the mahimahi trace [`mahimahi_of`] writes (one 1500-byte
//! delivery opportunity per line, a millisecond's share of the rate at a time), covering the
//! link's length and looping after it like any trace. The simulator serialises frames at the
//! schedule's rate instead and holds its last rate after the end; within the link's length the
//! capacity is the same. A trace is handed over as its file's text, or, for a trace built in
//! code (section C's recorded links started at a seeded offset), as the text written from it
//! (`MahimahiTrace::to_text`: the same opportunities, so the same capacity in every 100 ms).

use std::path::{Path, PathBuf};

use qdisc::{Duration, Instant};
use sim::link_file::{LinkDesc, LinkError, LinkRates};
use sim::{Capacity as SimCapacity, RatePoint, RateSchedule};

/// Mahimahi trace bin for rates read from a trace: 100 ms.
const TRACE_BIN_MS: u64 = 100;

/// How the link emulator plays one direction of a [`Link`]: a view of the direction's
/// description ([`Link::up`], [`Link::down`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum DirCapacity<'a> {
    /// A fixed rate, bit/s (`purple linkem --up/--down {kbit}kbit`).
    Rate(u64),
    /// A step/ramp schedule played for `loop_s` seconds (the link's) and then again from its
    /// start, written for the emulator as a mahimahi trace ([`mahimahi_of`]).
    Schedule {
        /// The schedule.
        schedule: &'a RateSchedule,
        /// Seconds after which it starts again.
        loop_s: f64,
    },
    /// A recorded mahimahi trace (it loops at its last line, as mahimahi's).
    Trace {
        /// The trace's text, handed to the emulator as is: its file's, or the one written from
        /// a trace built in code.
        text: &'a str,
        /// The bit rate of every 100 ms of it ([`trace_bins`]).
        bins: &'a [u64],
    },
}

impl DirCapacity<'_> {
    /// The capacity (bit/s) `t` seconds after the emulator started: the fixed rate, the
    /// schedule's rate in force (it loops), or a recorded trace's rate over the 100 ms around
    /// `t` (the trace loops).
    pub fn at(&self, t: f64) -> u64 {
        match self {
            DirCapacity::Rate(r) => *r,
            DirCapacity::Schedule {
                schedule, loop_s, ..
            } => {
                let t = t.max(0.0) % loop_s;
                (schedule.rate_at(Instant::from_nanos((t * 1e9) as u64)) * 8.0) as u64
            }
            DirCapacity::Trace { bins, .. } => {
                if bins.is_empty() {
                    return 0;
                }
                let k = (t.max(0.0) * 1000.0 / TRACE_BIN_MS as f64) as usize;
                bins[k % bins.len()]
            }
        }
    }

    /// The lowest and highest capacity, bit/s: a schedule's over its points in its loop, a
    /// trace's over 1 s averages.
    pub fn span(&self) -> (u64, u64) {
        match self {
            DirCapacity::Rate(r) => (*r, *r),
            DirCapacity::Schedule {
                schedule, loop_s, ..
            } => {
                let end = Instant::from_nanos((loop_s * 1e9) as u64);
                let bits = |p: &RatePoint| (p.rate * 8.0) as u64;
                let rates = || {
                    let ps = schedule.points();
                    let n = ps.iter().take_while(|p| p.at < end).count().max(1);
                    ps[..n].iter().map(bits)
                };
                (rates().min().unwrap_or(0), rates().max().unwrap_or(0))
            }
            DirCapacity::Trace { bins, .. } => {
                let per_s = (1000 / TRACE_BIN_MS) as usize;
                let secs: Vec<u64> = bins
                    .chunks_exact(per_s)
                    .map(|c| c.iter().sum::<u64>() / per_s as u64)
                    .collect();
                (
                    secs.iter().copied().min().unwrap_or(0),
                    secs.iter().copied().max().unwrap_or(0),
                )
            }
        }
    }
}

/// The link between the router and the server: the link as described ([`LinkDesc`]: name,
/// capacities, length, delays, buffer), checked playable by [`Link::from_desc`]; the emulator
/// plays each direction as its [`DirCapacity`] view ([`Link::up`], [`Link::down`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Link {
    desc: LinkDesc,
    /// What plays the up direction beside its description.
    up_played: Played,
    /// What plays the down direction beside its description.
    down_played: Played,
}

/// What the lab keeps beside one direction's description to play it: for a trace, its 100 ms
/// bins, and its text when the description has none (a trace built in code); empty for a rate
/// or a schedule.
#[derive(Clone, Debug, Default, PartialEq)]
struct Played {
    /// The trace's text written from its capacity (`MahimahiTrace::to_text`), for a trace
    /// without its file's text; `None` otherwise.
    written: Option<String>,
    /// [`trace_bins`] of the trace's text (the file's or the written one).
    bins: Vec<u64>,
}

/// The emulator's buffer in the built-in scenarios: `purple linkem`'s default.
pub const BUILT_IN_BUFFER_PACKETS: u32 = 1000;

/// Why a link cannot be played in the lab.
#[derive(Debug)]
pub enum LabLinkError {
    /// The link file is wrong (it names the file and the key, option or line).
    File(LinkError),
    /// A direction the emulator cannot play: the file, the direction and why.
    Unplayable {
        /// The link file (the link's name for a link written in code).
        path: PathBuf,
        /// `down` or `up`.
        which: &'static str,
        /// Why.
        reason: String,
    },
}

impl std::fmt::Display for LabLinkError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LabLinkError::File(e) => e.fmt(f),
            LabLinkError::Unplayable {
                path,
                which,
                reason,
            } => write!(f, "{}: [{which}]: {reason}", path.display()),
        }
    }
}

impl std::error::Error for LabLinkError {}

impl From<LinkError> for LabLinkError {
    fn from(e: LinkError) -> Self {
        LabLinkError::File(e)
    }
}

impl Link {
    /// A fixed rate each way (bit/s, whole bytes/s) with `one_way` each way, the built-in
    /// buffer and the default length.
    pub fn fixed(up_bit_s: u64, down_bit_s: u64, one_way: Duration) -> Link {
        let desc = LinkDesc::new(
            format!(
                "fixed {}/{} Mbit/s",
                down_bit_s / 1_000_000,
                up_bit_s / 1_000_000
            ),
            "",
            sim::link_file::DEFAULT_SECS,
            BUILT_IN_BUFFER_PACKETS,
            (SimCapacity::Rate(down_bit_s / 8), one_way),
            (SimCapacity::Rate(up_bit_s / 8), one_way),
        );
        Link {
            desc,
            up_played: Played::default(),
            down_played: Played::default(),
        }
    }

    /// The link `d` describes, as the emulator plays it: its capacities (a schedule loops after
    /// the link's seconds; a trace is its file's text, or for a trace built in code the text
    /// written from it, the same opportunities), its buffer and its delays. Fails, naming the
    /// file (or the link) and the direction, for a direction the emulator cannot play (an
    /// unlimited capacity, or a schedule whose mahimahi rendering is empty or ends in more than
    /// a second without capacity).
    pub fn from_desc(d: &LinkDesc) -> Result<Link, LabLinkError> {
        let path = d.path.clone().unwrap_or_else(|| PathBuf::from(&d.name));
        let check = |x: &sim::link_file::DirectionDesc, which: &'static str| {
            let unplayable = |reason: String| LabLinkError::Unplayable {
                path: path.clone(),
                which,
                reason,
            };
            match (&x.capacity, x.text.as_deref()) {
                (SimCapacity::Rate(_), _) => Ok(Played::default()),
                (SimCapacity::Trace(_), Some(text)) => Ok(Played {
                    written: None,
                    bins: trace_bins(text),
                }),
                (SimCapacity::Trace(t), None) => {
                    let text = t.to_text();
                    Ok(Played {
                        bins: trace_bins(&text),
                        written: Some(text),
                    })
                }
                (SimCapacity::Schedule(s), _) => {
                    mahimahi_of(s, d.secs).map_err(|e| unplayable(e.to_string()))?;
                    Ok(Played::default())
                }
                (SimCapacity::Unlimited, _) => Err(unplayable(
                    "an unlimited capacity is not a variable link".into(),
                )),
            }
        };
        Ok(Link {
            down_played: check(&d.down, "down")?,
            up_played: check(&d.up, "up")?,
            desc: d.clone(),
        })
    }

    /// How the emulator plays `x`, one of this link's directions, with what `played` keeps
    /// beside it.
    fn view<'a>(
        &'a self,
        x: &'a sim::link_file::DirectionDesc,
        played: &'a Played,
    ) -> DirCapacity<'a> {
        match &x.capacity {
            SimCapacity::Rate(bytes) => DirCapacity::Rate(bytes.saturating_mul(8)),
            SimCapacity::Schedule(schedule) => DirCapacity::Schedule {
                schedule,
                loop_s: self.desc.secs,
            },
            // Invariant: `from_desc` wrote the text of a trace without one.
            SimCapacity::Trace(_) => DirCapacity::Trace {
                text: x
                    .text
                    .as_deref()
                    .or(played.written.as_deref())
                    .unwrap_or(""),
                bins: &played.bins,
            },
            // Invariant: `from_desc` refuses an unlimited direction and `fixed` builds rates;
            // were one here, it would read as the fastest rate.
            SimCapacity::Unlimited => DirCapacity::Rate(u64::MAX),
        }
    }

    /// The link as described.
    pub fn desc(&self) -> &LinkDesc {
        &self.desc
    }

    /// This link with the controllers' ranges, start rates and static CAKE rates `down` and
    /// `up` ([`LinkDesc::with_rates`]); what the emulator plays is unchanged.
    #[must_use]
    pub fn with_rates(mut self, down: LinkRates, up: LinkRates) -> Link {
        self.desc = self.desc.with_rates(down, up);
        self
    }

    /// Its name in tables (a link file's name, a recorded trace's).
    pub fn name(&self) -> &str {
        &self.desc.name
    }

    /// Client → server, as the emulator plays it.
    pub fn up(&self) -> DirCapacity<'_> {
        self.view(&self.desc.up, &self.up_played)
    }

    /// Server → client, as the emulator plays it.
    pub fn down(&self) -> DirCapacity<'_> {
        self.view(&self.desc.down, &self.down_played)
    }

    /// One-way delay client → server, ms.
    pub fn up_delay_ms(&self) -> f64 {
        self.desc.up.delay.as_millis_f64()
    }

    /// One-way delay server → client, ms.
    pub fn down_delay_ms(&self) -> f64 {
        self.desc.down.delay.as_millis_f64()
    }

    /// The emulator's droptail buffer per direction, packets.
    pub fn buffer_packets(&self) -> u32 {
        self.desc.buffer_packets
    }

    /// The delays in words: `5 ms each way`, or `5 ms up, 20 ms down`.
    pub fn delay_words(&self) -> String {
        let (up, down) = (self.up_delay_ms(), self.down_delay_ms());
        if up == down {
            format!("{up} ms each way")
        } else {
            format!("{up} ms up, {down} ms down")
        }
    }

    /// The downlink's capacity in words for tables: `130/80 Mbit/s every 5 s` (a schedule
    /// alternating two rates), `fixed 100 Mbit/s`, `trace NAME` or `schedule FILE` (`schedule
    /// NAME` for one built in code without words).
    pub fn down_words(&self) -> String {
        match self.down() {
            DirCapacity::Rate(r) => format!("fixed {} Mbit/s", r / 1_000_000),
            DirCapacity::Trace { .. } => format!("trace {}", self.desc.name),
            DirCapacity::Schedule { schedule, loop_s } => {
                let p = period_ns(schedule, (loop_s * 1e9) as u64);
                let ps = schedule.points();
                match ps {
                    [a, b, ..]
                        if !a.ramp
                            && !b.ramp
                            && b.at.as_nanos() * 2 == p
                            && p.is_multiple_of(2_000_000_000) =>
                    {
                        format!(
                            "{}/{} Mbit/s every {} s",
                            (a.rate * 8.0) as u64 / 1_000_000,
                            (b.rate * 8.0) as u64 / 1_000_000,
                            p / 2_000_000_000
                        )
                    }
                    // A schedule built in code without words (section C's series) by the
                    // link's name.
                    _ if self.desc.down.what.is_empty() => {
                        format!("schedule {}", self.desc.name)
                    }
                    _ => format!("schedule {}", self.desc.down.what),
                }
            }
        }
    }

    /// `purple linkem`'s capacity, delay and buffer options for this link, and the trace files
    /// they name with the text to write there first: a direction's trace goes to `up_trace` or
    /// `down_trace`. In order: the up capacity, the down capacity, the delay, the buffer. Fails
    /// for a schedule [`mahimahi_of`] cannot write (a link file's is checked by
    /// [`Link::from_desc`] already).
    #[allow(clippy::type_complexity)]
    pub fn linkem_args(
        &self,
        up_trace: &Path,
        down_trace: &Path,
    ) -> Result<(Vec<String>, Vec<(PathBuf, String)>), TraceRenderError> {
        let mut args = Vec::new();
        let mut files = Vec::new();
        for (c, flag, path) in [
            (self.up(), "up", up_trace),
            (self.down(), "down", down_trace),
        ] {
            let text = match c {
                DirCapacity::Rate(r) => {
                    args.extend([format!("--{flag}"), format!("{}kbit", r / 1000)]);
                    continue;
                }
                DirCapacity::Trace { text, .. } => text.to_string(),
                DirCapacity::Schedule { schedule, loop_s } => mahimahi_of(schedule, loop_s)?,
            };
            args.extend([format!("--{flag}-trace"), path.display().to_string()]);
            files.push((path.to_path_buf(), text));
        }
        let (up, down) = (self.up_delay_ms(), self.down_delay_ms());
        if up == down {
            args.extend(["--delay-ms".into(), up.to_string()]);
        } else {
            args.extend([
                "--up-delay-ms".into(),
                up.to_string(),
                "--down-delay-ms".into(),
                down.to_string(),
            ]);
        }
        args.extend(["--buffer-packets".into(), self.buffer_packets().to_string()]);
        Ok((args, files))
    }
}

/// The bit rate of every 100 ms of a Mahimahi trace (a line per 1500-byte delivery
/// opportunity, at its millisecond offset). Empty for a trace with no lines.
pub fn trace_bins(text: &str) -> Vec<u64> {
    let mut bins: Vec<u64> = Vec::new();
    for ms in text.lines().filter_map(|l| l.trim().parse::<u64>().ok()) {
        let b = (ms / TRACE_BIN_MS) as usize;
        if bins.len() <= b {
            bins.resize(b + 1, 0);
        }
        bins[b] += 1500 * 8 * (1000 / TRACE_BIN_MS);
    }
    bins
}

/// The shortest period (ns) of `s` over `[0, loop_ns)`: the first point time `p` (a step at
/// 0 and `p` dividing `loop_ns`) such that the points of every later `p` repeat the first
/// one's exactly; `loop_ns` if none.
fn period_ns(s: &RateSchedule, loop_ns: u64) -> u64 {
    let ps: Vec<&RatePoint> = s
        .points()
        .iter()
        .filter(|p| p.at.as_nanos() < loop_ns)
        .collect();
    if ps.first().is_none_or(|p| p.at.as_nanos() != 0 || p.ramp) {
        return loop_ns;
    }
    for c in ps.iter().skip(1) {
        let p = c.at.as_nanos();
        if p == 0 || !loop_ns.is_multiple_of(p) {
            continue;
        }
        let cycle: Vec<&&RatePoint> = ps.iter().take_while(|q| q.at.as_nanos() < p).collect();
        let repeats = ps.len().is_multiple_of(cycle.len())
            && ps.chunks(cycle.len()).enumerate().all(|(j, chunk)| {
                chunk.iter().zip(&cycle).all(|(q, first)| {
                    q.at.as_nanos() == first.at.as_nanos() + j as u64 * p
                        && q.rate == first.rate
                        && q.ramp == first.ramp
                })
            })
            && ps.len() / cycle.len() == (loop_ns / p) as usize;
        if repeats {
            return p;
        }
    }
    loop_ns
}

/// `s` over `[0, loop_s)` as a mahimahi trace, as the lab has always written its radio's steps:
/// every millisecond adds its share of the rate in force at its start (bits / 12000 per ms, a
/// 1500-byte opportunity each) to an accumulator emptied at every point of the schedule, and
/// each whole opportunity is a line at the end of that millisecond. A schedule repeating itself
/// within the loop (the radio's alternating steps) is written as its shortest period, which the
/// emulator loops the same way. Fails when no opportunity is left or the rendering ends more
/// than a second before the loop does (a trace loops at its last line, so a trailing outage
/// would be lost).
pub fn mahimahi_of(s: &RateSchedule, loop_s: f64) -> Result<String, TraceRenderError> {
    if !(loop_s.is_finite() && loop_s >= 0.001) {
        return Err(TraceRenderError::Loop { seconds: loop_s });
    }
    let loop_ns = (loop_s * 1e9).round() as u64;
    let period_ms = period_ns(s, loop_ns) / 1_000_000;
    let resets: Vec<u64> = s
        .points()
        .iter()
        .map(|p| p.at.as_nanos() / 1_000_000)
        .collect();
    let mut out = String::new();
    let mut last = 0;
    let mut acc = 0.0;
    let mut next = 0;
    for ms in 0..period_ms {
        while next < resets.len() && resets[next] <= ms {
            if resets[next] == ms {
                acc = 0.0;
            }
            next += 1;
        }
        let rate_bits = s.rate_at(Instant::from_millis(ms)) * 8.0;
        acc += rate_bits / (1500.0 * 8.0 * 1000.0);
        while acc >= 1.0 {
            out += &format!("{}\n", ms + 1);
            last = ms + 1;
            acc -= 1.0;
        }
    }
    if out.is_empty() {
        return Err(TraceRenderError::NoCapacity);
    }
    if period_ms - last > 1000 {
        return Err(TraceRenderError::EndsWithoutCapacity {
            ms: period_ms - last,
        });
    }
    Ok(out)
}

/// Why a schedule cannot be written as a mahimahi trace ([`mahimahi_of`]).
#[derive(Clone, Debug, PartialEq)]
pub enum TraceRenderError {
    /// The loop is not a finite length of at least 1 ms.
    Loop {
        /// The loop asked for, s.
        seconds: f64,
    },
    /// The schedule gives no whole 1500-byte opportunity over the loop.
    NoCapacity,
    /// The schedule's last opportunity comes more than a second before the loop ends: a
    /// mahimahi trace loops at its last line, so the trailing outage would be lost.
    EndsWithoutCapacity {
        /// The time from the last opportunity to the end of the loop, ms.
        ms: u64,
    },
}

impl std::fmt::Display for TraceRenderError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TraceRenderError::Loop { seconds } => write!(f, "a loop of {seconds} s"),
            TraceRenderError::NoCapacity => {
                f.write_str("the schedule gives no capacity to write as a mahimahi trace")
            }
            TraceRenderError::EndsWithoutCapacity { ms } => write!(
                f,
                "the schedule ends in {ms} ms without capacity, which a looping mahimahi trace \
                 cannot keep (it loops at its last opportunity)"
            ),
        }
    }
}

impl std::error::Error for TraceRenderError {}

/// How the lab wrote the radio's and starlink's two alternating steps before links were
/// described by files (crates/lab/src/testbed.rs `write_steps_trace`): the reference the
/// schedule's rendering must reproduce byte for byte.
#[cfg(test)]
pub(crate) fn legacy_steps_trace(rates: [u64; 2], period_s: u64) -> String {
    let mut out = String::new();
    let mut t0 = 0u64;
    for r in rates {
        let per_ms = r as f64 / (1500.0 * 8.0 * 1000.0);
        let mut acc = 0.0;
        for ms in 0..period_s * 1000 {
            acc += per_ms;
            while acc >= 1.0 {
                out += &format!("{}\n", t0 + ms + 1);
                acc -= 1.0;
            }
        }
        t0 += period_s * 1000;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schedule(text: &str) -> RateSchedule {
        RateSchedule::parse(text).expect("schedule")
    }

    #[test]
    fn alternating_steps_render_as_the_legacy_trace_of_one_period() {
        // Over one period, and over six: the repeating schedule is written as one period.
        let one = schedule("0 step 130mbit\n5 step 80mbit\n");
        assert_eq!(
            mahimahi_of(&one, 10.0).expect("renders"),
            legacy_steps_trace([130_000_000, 80_000_000], 5)
        );
        let six: String = (0..12)
            .map(|k| format!("{} step {}mbit\n", 5 * k, [130, 80][k % 2]))
            .collect();
        let six = schedule(&six);
        assert_eq!(
            mahimahi_of(&six, 60.0).expect("renders"),
            legacy_steps_trace([130_000_000, 80_000_000], 5)
        );
        assert_eq!(period_ns(&six, 60_000_000_000), 10_000_000_000);
        // Odd rates too (accumulator rounding), and starlink's.
        assert_eq!(
            mahimahi_of(&schedule("0 step 7.3mbit\n3 step 1.1mbit\n"), 6.0).expect("renders"),
            legacy_steps_trace([7_300_000, 1_100_000], 3)
        );
        assert_eq!(
            mahimahi_of(&schedule("0 step 150mbit\n8 step 60mbit\n"), 16.0).expect("renders"),
            legacy_steps_trace([150_000_000, 60_000_000], 8)
        );
    }

    #[test]
    fn a_schedule_that_does_not_repeat_is_written_over_its_whole_loop() {
        // 12 Mbit/s is one opportunity per ms; 6 Mbit/s one per 2 ms.
        let s = schedule("0 step 12mbit\n1 step 6mbit\n");
        let text = mahimahi_of(&s, 3.0).expect("renders");
        let ms: Vec<u64> = text.lines().map(|l| l.parse().expect("ms")).collect();
        assert_eq!(ms.len(), 1000 + 1000);
        assert_eq!(ms[..3], [1, 2, 3]);
        assert_eq!(ms[1000..1003], [1002, 1004, 1006]);
        assert_eq!(ms.last(), Some(&3000));
        // A ramp: from 0 to 24 Mbit/s over 1 s, 12 Mbit/s on average.
        let r = schedule("0 ramp 0bit\n1 step 24mbit\n");
        let n = mahimahi_of(&r, 1.5).expect("renders").lines().count();
        assert!((998..=1001).contains(&(n - 1000)), "{n}");
        // Nothing to write, or an outage at the end, is refused.
        assert_eq!(
            mahimahi_of(&schedule("0 step 0bit\n"), 5.0),
            Err(TraceRenderError::NoCapacity)
        );
        let e = mahimahi_of(&schedule("0 step 12mbit\n2 step 0bit\n"), 5.0).expect_err("outage");
        assert_eq!(e, TraceRenderError::EndsWithoutCapacity { ms: 3000 });
        assert!(e.to_string().contains("3000 ms without capacity"), "{e}");
        assert!(matches!(
            mahimahi_of(&r, f64::NAN),
            Err(TraceRenderError::Loop { seconds }) if seconds.is_nan()
        ));
    }

    #[test]
    fn a_link_file_becomes_linkem_options() {
        let files = |name: &str| match name {
            "d.txt" => Ok("0 step 20mbit\n2 step 10mbit\n".to_string()),
            "u.trace" => Ok("1\n2\n3\n".to_string()),
            _ => Err(sim::ScenarioError(format!("{name}: no such file"))),
        };
        let d = LinkDesc::parse(
            Path::new("x/two.toml"),
            "duration_s = 4\nbuffer_packets = 250\n[down]\nschedule = \"d.txt\"\ndelay_ms = \
             7.5\n[up]\ntrace = \"u.trace\"\n",
            &files,
        )
        .expect("parses");
        let l = Link::from_desc(&d).expect("plays");
        assert_eq!((l.up_delay_ms(), l.down_delay_ms()), (1.0, 7.5));
        assert_eq!(l.desc(), &d);
        assert_eq!(l.delay_words(), "1 ms up, 7.5 ms down");
        assert_eq!(l.down_words(), "20/10 Mbit/s every 2 s");
        assert_eq!(l.down().span(), (10_000_000, 20_000_000));
        assert_eq!(
            (l.down().at(1.0), l.down().at(3.0), l.down().at(5.0)),
            (20_000_000, 10_000_000, 20_000_000)
        );
        let (args, files) = l
            .linkem_args(Path::new("/t/up"), Path::new("/t/down"))
            .expect("writes");
        assert_eq!(
            args,
            [
                "--up-trace",
                "/t/up",
                "--down-trace",
                "/t/down",
                "--up-delay-ms",
                "1",
                "--down-delay-ms",
                "7.5",
                "--buffer-packets",
                "250"
            ]
        );
        assert_eq!(files[0], (PathBuf::from("/t/up"), "1\n2\n3\n".to_string()));
        assert_eq!(files[1].1, legacy_steps_trace([20_000_000, 10_000_000], 2));
        // A fixed link is two rates.
        let (args, files) = Link::fixed(3_000_000, 20_000_000, Duration::from_millis(45))
            .linkem_args(Path::new("/t/up"), Path::new("/t/down"))
            .expect("writes");
        assert_eq!(
            args.join(" "),
            "--up 3000kbit --down 20000kbit --delay-ms 45 --buffer-packets 1000"
        );
        assert!(files.is_empty());
        // A schedule the emulator cannot loop names the file and the direction.
        let d = LinkDesc::parse(
            Path::new("x/out.toml"),
            "duration_s = 10\n[down]\nschedule = \"d2.txt\"\n[up]\nrate = \"1mbit\"\n",
            &|_: &str| Ok("0 step 10mbit\n1 step 0bit\n".to_string()),
        )
        .expect("parses");
        let e = Link::from_desc(&d).expect_err("outage").to_string();
        assert!(
            e.starts_with("x/out.toml: [down]: the schedule ends in 9000 ms"),
            "{e}"
        );
        // A trace built in code is handed over as the text written from it; an unlimited link
        // is no variable one.
        let trace = sim::MahimahiTrace::parse("1\n2\n3\n").expect("trace");
        let coded = LinkDesc::new(
            "coded",
            "",
            3.0,
            100,
            (SimCapacity::Trace(trace), Duration::from_millis(1)),
            (SimCapacity::Unlimited, Duration::from_millis(1)),
        );
        let mut played = coded.clone();
        played.up.capacity = SimCapacity::Rate(1000);
        let l = Link::from_desc(&played).expect("a trace built in code plays");
        assert_eq!(l.desc(), &played);
        let (args, files) = l
            .linkem_args(Path::new("/t/up"), Path::new("/t/down"))
            .expect("writes");
        assert_eq!(
            args.join(" "),
            "--up 8kbit --down-trace /t/down --delay-ms 1 --buffer-packets 100"
        );
        assert_eq!(files, [(PathBuf::from("/t/down"), "1\n2\n3\n".to_string())]);
        let mut coded = coded;
        coded.down.capacity = SimCapacity::Rate(1000);
        let e = Link::from_desc(&coded).expect_err("unlimited").to_string();
        assert_eq!(
            e,
            "coded: [up]: an unlimited capacity is not a variable link"
        );
    }

    const TM_DOWN: &str = include_str!("../../../scenarios/traces/TMobile-LTE-short-60s.down");

    #[test]
    fn a_trace_built_in_code_plays_its_capacity_in_every_100_ms() {
        // A recorded trace started at an offset (as section C's seeds play one), with no file
        // text: the emulator gets the text written from it, whose opportunities are the
        // capacity's in every 100 ms bin of the loop.
        let whole = sim::MahimahiTrace::parse(TM_DOWN).expect("trace");
        for offset_ms in [0, 12_345, 59_999] {
            // As section C does: the recording as is at offset 0.
            let t = if offset_ms == 0 {
                whole.clone()
            } else {
                whole.starting_at(Duration::from_millis(offset_ms))
            };
            let capacity = SimCapacity::Trace(t.clone());
            let d = LinkDesc::new(
                "tm-at-offset",
                "",
                60.0,
                300,
                (capacity.clone(), Duration::from_millis(1)),
                (SimCapacity::Rate(1_000_000), Duration::from_millis(1)),
            );
            let l = Link::from_desc(&d).expect("plays");
            let DirCapacity::Trace { text, bins } = l.down() else {
                panic!("{:?}", l.down())
            };
            assert_eq!(sim::MahimahiTrace::parse(text).as_ref(), Ok(&t));
            let period_ms = t.period().as_nanos() / 1_000_000;
            assert_eq!(bins.len() as u64, period_ms.div_ceil(TRACE_BIN_MS));
            // Every whole bin of the loop (a last partial one is the loop's end, where the
            // capacity goes on into the next loop; the lab's known 100 ms wrap, docs/lab.md).
            for (k, &b) in bins
                .iter()
                .enumerate()
                .take((period_ms / TRACE_BIN_MS) as usize)
            {
                let from = qdisc::Instant::from_millis(k as u64 * TRACE_BIN_MS);
                let want = capacity
                    .rate_in(from, Duration::from_millis(TRACE_BIN_MS))
                    .expect("a trace has a rate")
                    * 8.0;
                assert_eq!(b as f64, want, "offset {offset_ms} ms, bin {k}");
            }
            // What is written is the trace at its offset, not the recording from its start.
            assert_eq!(
                offset_ms == 0,
                text == whole.to_text(),
                "offset {offset_ms}"
            );
            let (args, files) = l
                .linkem_args(Path::new("/t/up"), Path::new("/t/down"))
                .expect("writes");
            assert!(args.join(" ").contains("--down-trace /t/down"), "{args:?}");
            assert_eq!(files[0].1, text);
        }
    }
}
