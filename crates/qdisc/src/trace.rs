//! Link capacity traces: mahimahi delivery-opportunity files and a step/ramp rate schedule
//! (shared by the simulator and the link emulator `dataplane::linkem`).

use crate::{Duration, Instant};

/// Bytes one mahimahi delivery opportunity can carry.
pub const MAHIMAHI_MTU: u32 = 1500;

/// Why a trace could not be parsed. Its text names the line (`line 3: not a non-negative
/// integer: "x"`); callers that read a file put the file's path in front.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceError {
    /// 1-based line number (0 when the problem is the whole file).
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for TraceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.line == 0 {
            write!(f, "{}", self.message)
        } else {
            write!(f, "line {}: {}", self.line, self.message)
        }
    }
}
impl std::error::Error for TraceError {}

/// A mahimahi trace: the millisecond offsets of 1500-byte delivery opportunities, looping with a
/// period equal to the last offset (as mahimahi does: the next loop's base is the last value).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MahimahiTrace {
    ms: Vec<u64>,
    period_ms: u64,
}

impl MahimahiTrace {
    /// Parses the ASCII format: one non-negative integer per line (blank lines ignored),
    /// non-decreasing, last value > 0. An error names the first offending line (or, for a file
    /// without an opportunity after 0 ms, says so).
    pub fn parse(text: &str) -> Result<Self, TraceError> {
        let mut ms = Vec::new();
        let mut last_line = 0;
        for (i, line) in text.lines().enumerate() {
            let t = line.trim();
            if t.is_empty() {
                continue;
            }
            let v: u64 = t.parse().map_err(|_| TraceError {
                line: i + 1,
                message: format!("not a non-negative integer: {t:?}"),
            })?;
            if ms.last().is_some_and(|&l| v < l) {
                return Err(TraceError {
                    line: i + 1,
                    message: format!(
                        "offsets must not decrease ({v} after {})",
                        ms.last().copied().unwrap_or(0)
                    ),
                });
            }
            ms.push(v);
            last_line = i + 1;
        }
        match ms.last() {
            None => Err(TraceError {
                line: 0,
                message: "no delivery opportunity (the file holds no offset)".into(),
            }),
            Some(0) => Err(TraceError {
                line: last_line,
                message: "the last offset sets the loop period and must be > 0 ms".into(),
            }),
            Some(_) => Self::from_offsets(ms),
        }
    }

    /// A trace from millisecond offsets (non-decreasing, last > 0).
    pub fn from_offsets(ms: Vec<u64>) -> Result<Self, TraceError> {
        let period_ms = ms.last().copied().unwrap_or(0);
        if period_ms == 0 {
            return Err(TraceError {
                line: 0,
                message: "a trace needs at least one opportunity after 0 ms".into(),
            });
        }
        if ms.windows(2).any(|w| w[1] < w[0]) {
            return Err(TraceError {
                line: 0,
                message: "offsets must not decrease".into(),
            });
        }
        Ok(MahimahiTrace { ms, period_ms })
    }

    /// The loop period.
    pub fn period(&self) -> Duration {
        Duration::from_millis(self.period_ms)
    }

    /// Opportunities per loop.
    pub fn len(&self) -> usize {
        self.ms.len()
    }

    /// Always false (a parsed trace has at least one opportunity).
    pub fn is_empty(&self) -> bool {
        self.ms.is_empty()
    }

    /// The time of opportunity number `k` (counting across loops from 0).
    #[inline]
    pub fn opportunity(&self, k: u64) -> Instant {
        let n = self.ms.len() as u64;
        let lap = k / n;
        let idx = (k % n) as usize;
        Instant::from_millis(lap * self.period_ms + self.ms[idx])
    }

    /// Number of opportunities strictly before `t`.
    pub fn count_before(&self, t: Instant) -> u64 {
        let t_ns = t.as_nanos();
        let period_ns = self.period_ms * 1_000_000;
        let laps = t_ns / period_ns;
        let rest_ns = t_ns % period_ns;
        // Within a lap: opportunities with ms*1e6 < rest_ns.
        let within = self.ms.partition_point(|&m| m * 1_000_000 < rest_ns) as u64;
        // The previous lap's opportunities at its last offset fall exactly on this lap's start:
        // they are not before `t` when `t` is a lap boundary.
        let at_end = if laps > 0 && rest_ns == 0 {
            self.ms
                .iter()
                .rev()
                .take_while(|&&m| m == self.period_ms)
                .count() as u64
        } else {
            0
        };
        laps * self.ms.len() as u64 + within - at_end
    }

    /// The same link observed from `offset` into its loop on: the trace rotated so that its
    /// first delivery opportunity at or after `offset` (modulo the period) falls on a loop
    /// boundary. The period and the opportunities per loop are unchanged, and so is the pattern
    /// of the looping link (each opportunity moves by the same amount modulo the period).
    pub fn starting_at(&self, offset: Duration) -> MahimahiTrace {
        let p = self.period_ms;
        let want = (offset.as_nanos() / 1_000_000) % p;
        // Opportunities at `p` are at 0 ms of the next loop: read offsets modulo the period.
        let mut m: Vec<u64> = self.ms.iter().map(|&x| x % p).collect();
        m.sort_unstable();
        // The new zero: the first opportunity at or after `want` (wrapping to the first one).
        let zero = m.iter().copied().find(|&x| x >= want).unwrap_or(m[0]);
        let mut out: Vec<u64> = m.iter().map(|&x| (x + p - zero) % p).collect();
        out.sort_unstable();
        // Opportunities at the new zero go to the end of the loop (mahimahi's last line is
        // both the period and an opportunity at the start of the next loop).
        let at_zero = out.iter().take_while(|&&x| x == 0).count();
        out.drain(..at_zero);
        out.extend(std::iter::repeat_n(p, at_zero));
        MahimahiTrace {
            ms: out,
            period_ms: p,
        }
    }

    /// The trace in mahimahi's text format: each opportunity's millisecond offset on a line
    /// of its own, in order. For a trace built in code (e.g. [`MahimahiTrace::starting_at`]) a
    /// backend that replays a file (`purple linkem` in the lab) needs it. Guaranteed:
    /// [`MahimahiTrace::parse`] of it is this trace again (same offsets, same period).
    pub fn to_text(&self) -> String {
        let mut out = String::with_capacity(self.ms.len() * 7);
        for m in &self.ms {
            out += &m.to_string();
            out.push('\n');
        }
        out
    }

    /// The same link at `f` of its capacity (0 < `f` <= 1): a share `f` of the opportunities,
    /// spread evenly over the loop (opportunity `i` is kept where the running sum of `f` per
    /// opportunity crosses an integer, aligned so that the last one, which sets the period, is
    /// kept), the period unchanged. `None` for `f` outside (0, 1]. Guaranteed: `ceil(len x f)`
    /// opportunities per loop (at least one), so the mean rate is `f` of this one's to within
    /// one opportunity per loop.
    pub fn scaled(&self, f: f64) -> Option<MahimahiTrace> {
        if !(f > 0.0 && f <= 1.0) {
            return None;
        }
        let n = self.ms.len() as f64;
        // Shift the running sum so that it is whole after the last opportunity.
        let c = (n * f).ceil() - n * f;
        let kept: Vec<u64> = self
            .ms
            .iter()
            .enumerate()
            .filter(|&(i, _)| {
                let i = i as f64;
                ((i + 1.0) * f + c).floor() > (i * f + c).floor()
            })
            .map(|(_, &m)| m)
            .collect();
        Some(MahimahiTrace {
            ms: kept,
            period_ms: self.period_ms,
        })
    }

    /// Mean capacity in bytes per second over one loop.
    pub fn mean_rate(&self) -> f64 {
        self.ms.len() as f64 * f64::from(MAHIMAHI_MTU) / (self.period_ms as f64 / 1000.0)
    }
}

/// One segment of a [`RateSchedule`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RatePoint {
    /// When the segment starts.
    pub at: Instant,
    /// Rate in bytes per second at `at`.
    pub rate: f64,
    /// True: the rate moves linearly from this point's rate to the next point's; false: it holds.
    pub ramp: bool,
}

/// A piecewise rate: steps and linear ramps. Text format, one point per line (`#` comments):
/// `<t_seconds> <step|ramp> <rate>` where rate takes a unit suffix `bit`, `kbit`, `mbit`, `gbit`
/// (bits/s) or `Bps` (bytes/s); e.g. `0 step 10mbit`, `5 ramp 10mbit`, `10 step 2mbit`.
/// `ramp` at a point means "move linearly from here to the next point's rate". Before the first
/// point the first rate holds; after the last point the last rate holds (no looping).
#[derive(Clone, Debug, PartialEq)]
pub struct RateSchedule {
    points: Vec<RatePoint>,
}

fn parse_rate(s: &str) -> Option<f64> {
    let lower = s.to_ascii_lowercase();
    let (num, mult) = if let Some(n) = lower.strip_suffix("gbit") {
        (n, 1e9 / 8.0)
    } else if let Some(n) = lower.strip_suffix("mbit") {
        (n, 1e6 / 8.0)
    } else if let Some(n) = lower.strip_suffix("kbit") {
        (n, 1e3 / 8.0)
    } else if let Some(n) = lower.strip_suffix("bit") {
        (n, 1.0 / 8.0)
    } else if let Some(n) = lower.strip_suffix("bps") {
        (n, 1.0)
    } else {
        return None;
    };
    let v: f64 = num.trim().parse().ok()?;
    (v.is_finite() && v >= 0.0).then_some(v * mult)
}

impl RateSchedule {
    /// Parses the text format (see the type docs).
    pub fn parse(text: &str) -> Result<Self, TraceError> {
        let mut points: Vec<RatePoint> = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let t = line.split('#').next().unwrap_or("").trim();
            if t.is_empty() {
                continue;
            }
            let err = |m: &str| TraceError {
                line: i + 1,
                message: m.to_string(),
            };
            let f: Vec<&str> = t.split_whitespace().collect();
            if f.len() != 3 {
                return Err(err("expected `<t_seconds> <step|ramp> <rate>`"));
            }
            let secs: f64 = f[0].parse().map_err(|_| err("bad time"))?;
            if !(secs.is_finite() && secs >= 0.0) {
                return Err(err("bad time"));
            }
            let ramp = match f[1] {
                "step" => false,
                "ramp" => true,
                _ => return Err(err("expected `step` or `ramp`")),
            };
            let rate = parse_rate(f[2]).ok_or_else(|| err("bad rate (e.g. 10mbit, 1250000Bps)"))?;
            let at = Instant::ZERO.saturating_add(Duration::from_secs_f64(secs));
            if points.last().is_some_and(|p| at < p.at) {
                return Err(err("times must not decrease"));
            }
            points.push(RatePoint { at, rate, ramp });
        }
        Self::new(points).ok_or(TraceError {
            line: 0,
            message: "a schedule needs at least one point".into(),
        })
    }

    /// A schedule from points (sorted by time); `None` when empty.
    pub fn new(points: Vec<RatePoint>) -> Option<Self> {
        (!points.is_empty()).then_some(RateSchedule { points })
    }

    /// The same schedule at `f` of its rates (`f` > 0 and finite); `None` otherwise.
    pub fn scaled(&self, f: f64) -> Option<RateSchedule> {
        (f > 0.0 && f.is_finite()).then(|| RateSchedule {
            points: self
                .points
                .iter()
                .map(|p| RatePoint {
                    rate: p.rate * f,
                    ..*p
                })
                .collect(),
        })
    }

    /// Its points, in time order (at least one).
    pub fn points(&self) -> &[RatePoint] {
        &self.points
    }

    /// The rate in bytes per second at `t`.
    pub fn rate_at(&self, t: Instant) -> f64 {
        let i = self.points.partition_point(|p| p.at <= t);
        if i == 0 {
            return self.points[0].rate;
        }
        let p = self.points[i - 1];
        match self.points.get(i) {
            Some(n) if p.ramp && n.at > p.at => {
                let f = (t.as_nanos() - p.at.as_nanos()) as f64
                    / (n.at.as_nanos() - p.at.as_nanos()) as f64;
                p.rate + (n.rate - p.rate) * f
            }
            _ => p.rate,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_broken_trace_names_its_line() {
        let e = MahimahiTrace::parse("1\n2\n\nx3\n4\n").expect_err("not a number");
        assert_eq!(e.line, 4);
        assert_eq!(e.to_string(), "line 4: not a non-negative integer: \"x3\"");
        let e = MahimahiTrace::parse("5\n7\n6\n").expect_err("decreasing");
        assert_eq!(e.line, 3);
        assert!(e.to_string().contains("6 after 7"), "{e}");
        let e = MahimahiTrace::parse("0\n0\n\n").expect_err("period 0");
        assert_eq!(e.line, 2);
        let e = MahimahiTrace::parse("\n \n").expect_err("empty");
        assert_eq!(e.line, 0);
        assert!(!e.to_string().contains("line"), "{e}");
    }

    #[test]
    fn a_scaled_trace_keeps_its_period_and_an_even_share_of_its_opportunities() {
        // 1,000 opportunities in a 100 ms loop, bunched in the first half (a burst, then
        // silence): a tenth keeps 100 of them, the period, and the bunching.
        let ms: Vec<u64> = (0..1000u64).map(|i| i / 20).chain([100]).collect();
        let t = MahimahiTrace::from_offsets(ms).expect("a valid trace");
        let s = t.scaled(0.1).expect("0.1 is in range");
        assert_eq!(s.period(), t.period());
        assert_eq!(s.len(), (t.len() as f64 * 0.1).ceil() as usize);
        assert_eq!(s.ms.last(), Some(&100), "the period's line is kept");
        assert!(s.ms[..s.len() - 1].iter().all(|&m| m < 50), "{:?}", s.ms);
        // Evenly: every 10 ms of the burst keeps 20 opportunities of its 200.
        for k in 0..5 {
            let n = s.ms.iter().filter(|&&m| m / 10 == k).count();
            assert!((19..=21).contains(&n), "{k}: {n}");
        }
        assert!((s.mean_rate() / t.mean_rate() - 0.1).abs() < 0.002);
        assert_eq!(t.scaled(1.0), Some(t.clone()));
        for bad in [0.0, -0.5, 1.5, f64::NAN] {
            assert_eq!(t.scaled(bad), None, "{bad}");
        }
        // Never empty: one opportunity a loop at least.
        assert_eq!(t.scaled(1e-9).map(|s| s.len()), Some(1));
    }

    #[test]
    fn a_scaled_schedule_keeps_its_times_and_ramps() {
        let s = RateSchedule::parse("0 step 10mbit\n5 ramp 20mbit\n10 step 0bit\n")
            .expect("a valid schedule");
        let h = s.scaled(0.25).expect("in range");
        for (a, b) in s.points().iter().zip(h.points()) {
            assert_eq!((a.at, a.ramp), (b.at, b.ramp));
            assert_eq!(b.rate, a.rate * 0.25);
        }
        assert_eq!(s.scaled(0.0), None);
    }

    #[test]
    fn a_trace_written_as_text_parses_back_to_itself() {
        let t = MahimahiTrace::parse("0\n3\n3\n7\n10\n").expect("a valid trace");
        assert_eq!(t.to_text(), "0\n3\n3\n7\n10\n");
        for off in [0, 1, 4, 9, 23] {
            let r = t.starting_at(Duration::from_millis(off));
            assert_eq!(
                MahimahiTrace::parse(&r.to_text()),
                Ok(r.clone()),
                "offset {off}"
            );
        }
    }

    /// Opportunities in `[from, to)` ms of a looping trace.
    fn count(t: &MahimahiTrace, from: u64, to: u64) -> u64 {
        t.count_before(Instant::from_millis(to)) - t.count_before(Instant::from_millis(from))
    }

    #[test]
    fn a_trace_started_at_an_offset_is_the_same_link_shifted() {
        // Loop of 10 ms: two opportunities at 0 (steady state: 0 and the previous loop's 10),
        // one at 3, one at 7.
        let t = MahimahiTrace::parse("0\n3\n7\n10\n").expect("a valid trace");
        let r = t.starting_at(Duration::from_millis(5));
        assert_eq!(r.period(), t.period());
        assert_eq!(r.len(), t.len());
        // From the second loop on, every 1 ms window of `r` at k holds what `t` holds at k + 7.
        for k in 10..40 {
            assert_eq!(count(&r, k, k + 1), count(&t, k + 7, k + 8), "ms {k}");
        }
        // An offset beyond the period wraps; one past the last opportunity wraps to the first.
        assert_eq!(t.starting_at(Duration::from_millis(25)), r);
        let w = t.starting_at(Duration::from_millis(8));
        for k in 10..40 {
            assert_eq!(count(&w, k, k + 1), count(&t, k, k + 1), "ms {k}");
        }
    }
}
