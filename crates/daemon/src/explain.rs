//! `purple explain LOG...`: what a decision log says about why the rates were what they were.
//! Users of autorate tools ask first why the rate sat low (or high) and whether the controller
//! recovered; the log names the rule behind every decision (`rule`,
//! [`controller::Reason::rule`]) and every phase change, so the answer is a tally.
//!
//! **What this module owns**: reading one or more logs (oldest first, as rotated: `FILE.2
//! FILE.1 FILE`) into an [`Explanation`]: per direction the rate, throughput and delay
//! figures, the time at the configured bounds and the rules that brought the rate to the
//! minimum, every rule's share of the decisions with the cuts it made, the phases' share of
//! the time and the delay sources; the events (reflector rotations, discarded replies,
//! actuator and statistics errors, reloads); and plain findings. **What it must not do**:
//! read a clock, a file or a socket (the callers read the files), or guess the configured
//! range where the log does not say it (logs written before the `start` line carried it).

use std::collections::BTreeMap;
use std::fmt;

use controller::{Direction, PerDir};
use serde::Serialize;

use crate::log::{self, DirRecord, Record};

/// The share of the steps at a bound from which a finding is written.
const AT_MIN_FINDING: f64 = 0.05;
/// The share of the steps held back by the rate-of-change limit from which a finding is written.
const RATE_LIMITED_FINDING: f64 = 0.02;
/// The share of the steps at the maximum from which a finding is written.
const AT_MAX_FINDING: f64 = 0.2;

/// Which part of the logs to explain.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ExplainOpts {
    /// Only decisions at or after this log time, seconds.
    pub from: Option<f64>,
    /// Only decisions at or before this log time, seconds.
    pub to: Option<f64>,
}

/// A log that cannot be explained.
#[derive(Debug, PartialEq)]
pub enum ExplainError {
    /// A line that is not a log line: which log, its line number (from 1), and why.
    Line {
        /// The log's name, as given.
        log: String,
        /// Line number, from 1.
        line: usize,
        /// Why it cannot be read.
        error: log::ParseError,
    },
    /// No `decision` line in the logs (within `--from`/`--to`): nothing to explain.
    NoDecisions,
}

impl fmt::Display for ExplainError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExplainError::Line { log, line, error } => write!(f, "{log}:{line}: {error}"),
            ExplainError::NoDecisions => f.write_str(
                "no decision line to explain (is this a `purple control` log, and do --from/--to \
                 cover its decisions?)",
            ),
        }
    }
}
impl std::error::Error for ExplainError {}

/// Order statistics of one figure over the steps, Mbit/s or ms.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Spread {
    /// Mean.
    pub mean: f64,
    /// 10th percentile (nearest rank).
    pub p10: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
}

impl Spread {
    /// No figure (a direction without decisions, which [`explain`] never returns).
    const NONE: Spread = Spread {
        mean: f64::NAN,
        p10: f64::NAN,
        p50: f64::NAN,
        p90: f64::NAN,
        p99: f64::NAN,
    };

    fn of(mut v: Vec<f64>) -> Option<Spread> {
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let q = |p| qdisc::quantile::nearest_rank(&v, p).unwrap_or(f64::NAN);
        Some(Spread {
            mean: v.iter().sum::<f64>() / v.len() as f64,
            p10: q(0.10),
            p50: q(0.50),
            p90: q(0.90),
            p99: q(0.99),
        })
    }
}

/// One rule's part in a direction's decisions.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RuleTally {
    /// The rule (`capacity`, `probe`, `hold`, ...).
    pub rule: String,
    /// Decisions it made.
    pub steps: usize,
    /// Of them, those that lowered the rate.
    pub cuts: usize,
    /// The rate those cuts removed in all, Mbit/s.
    pub cut_mbit: f64,
    /// Of them, those that raised the rate.
    pub raises: usize,
}

/// One direction's figures.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DirExplanation {
    /// The shaper rate decided, Mbit/s.
    pub rate_mbit: Spread,
    /// The throughput measured, Mbit/s.
    pub throughput_mbit: Spread,
    /// The queueing delay the law saw, ms (`None`: no step had one).
    pub delay_ms: Option<Spread>,
    /// The configured minimum and maximum, Mbit/s, from the latest `start` line (`None`: the
    /// log does not say).
    pub range_mbit: Option<(f64, f64)>,
    /// Share of the steps at the configured minimum (`None`: range unknown).
    pub at_min: Option<f64>,
    /// Share of the steps at the configured maximum (`None`: range unknown).
    pub at_max: Option<f64>,
    /// For the steps at the minimum, the rule of the cut that brought the rate there (`start`:
    /// it began there), with its share of those steps, largest first.
    pub at_min_because: Vec<(String, f64)>,
    /// Every rule's decisions, most steps first.
    pub rules: Vec<RuleTally>,
    /// Share of the time in each phase (laws with phases; from the `transition` lines), largest
    /// first.
    pub phases: Vec<(String, f64)>,
    /// Share of the steps per delay source (`probes`, `passive`, `none`, ...), largest first.
    pub sources: Vec<(String, f64)>,
}

/// What the logs say: see the module documentation.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Explanation {
    /// The logs, as given.
    pub logs: Vec<String>,
    /// The law of the latest `start` line, if any.
    pub algorithm: Option<String>,
    /// Decisions explained.
    pub steps: usize,
    /// Log time of the first and the last of them, seconds.
    pub span_s: (f64, f64),
    /// The median time between two decisions, seconds.
    pub step_s: f64,
    /// Per direction.
    pub dirs: PerDir<DirExplanation>,
    /// How many lines of each other kind (`start`, `rotated`, `discarded` counted by the
    /// replies it reports, ...).
    pub events: BTreeMap<String, u64>,
    /// Findings in plain words, the most important first.
    pub findings: Vec<String>,
}

/// The rule of a decision: its `rule` field, or for logs written before it the rule its
/// reason text names ([`controller::Reason::rule_of_text`]; `unknown` for a text no reason
/// writes).
fn rule_of(d: &DirRecord) -> String {
    if !d.rule.is_empty() {
        return d.rule.clone();
    }
    controller::Reason::rule_of_text(&d.reason)
        .unwrap_or("unknown")
        .to_string()
}

/// What a rule means, for the findings.
fn meaning(rule: &str) -> &'static str {
    match rule {
        "outage" => "nothing delivered while a queue stood",
        "no-signal" => "no delay signal (reflectors or passive) for the stall time: the safe rate",
        "capacity" => "the link was the bottleneck: its delivery read as its capacity",
        "standing" => "a queue above the target stood while the link kept up: drained",
        "shortfall" => "a sudden shortfall in delivery",
        "decrease" => "the delay above the law's target",
        "congested" => "the radio's queue congested",
        "trend" => "the capacity's trend between readings",
        "start" => "it started there",
        "rate-limited" => "the rate-of-change limit",
        _ => "",
    }
}

#[derive(Default)]
struct DirAcc {
    rate: Vec<f64>,
    thr: Vec<f64>,
    delay: Vec<f64>,
    at_min: usize,
    at_max: usize,
    known_range: usize,
    range: Option<(f64, f64)>,
    because: BTreeMap<String, usize>,
    rules: BTreeMap<String, RuleTally>,
    sources: BTreeMap<String, usize>,
    prev: Option<f64>,
    /// The rule of the cut that brought the rate to where it is.
    last_cut: Option<String>,
    /// The current phase and since when.
    phase: Option<(String, f64)>,
    /// The first decision's time.
    first_t: Option<f64>,
    phases: BTreeMap<String, f64>,
}

fn mbit(bytes_per_s: u64) -> f64 {
    controller::Rate::from_bytes_per_s(bytes_per_s).mbit()
}

fn shares(m: BTreeMap<String, usize>, of: usize) -> Vec<(String, f64)> {
    let mut v: Vec<(String, f64)> = m
        .into_iter()
        .map(|(k, n)| (k, n as f64 / of.max(1) as f64))
        .collect();
    v.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    v
}

/// Explains the logs `logs` (name and text, oldest first).
///
/// # Errors
/// A line that is not a log line ([`ExplainError::Line`], naming the log and the line), or no
/// decision within `opts` ([`ExplainError::NoDecisions`]).
pub fn explain(logs: &[(String, String)], opts: ExplainOpts) -> Result<Explanation, ExplainError> {
    let mut acc: PerDir<DirAcc> = PerDir::default();
    let mut events: BTreeMap<String, u64> = BTreeMap::new();
    let mut algorithm = None;
    let mut times: Vec<f64> = Vec::new();
    let within = |t: f64| opts.from.is_none_or(|f| t >= f) && opts.to.is_none_or(|e| t <= e);
    for (name, text) in logs {
        for (i, line) in text.lines().enumerate() {
            let rec = log::parse_line(line).map_err(|error| ExplainError::Line {
                log: name.clone(),
                line: i + 1,
                error,
            })?;
            let Some(rec) = rec else { continue };
            match rec {
                Record::Decision { t, down, up } => {
                    if !within(t) {
                        continue;
                    }
                    times.push(t);
                    for (dir, d) in [(Direction::Down, &down), (Direction::Up, &up)] {
                        acc[dir].first_t.get_or_insert(t);
                        step(&mut acc[dir], d);
                    }
                }
                Record::Start {
                    algorithm: a,
                    min,
                    max,
                    ..
                } => {
                    *events.entry("start".into()).or_default() += 1;
                    algorithm = Some(a);
                    for dir in Direction::ALL {
                        acc[dir].range =
                            min.zip(max).map(|(lo, hi)| (mbit(lo[dir]), mbit(hi[dir])));
                    }
                }
                Record::Transition {
                    t, dir, from, to, ..
                } => {
                    let a = &mut acc[dir];
                    // Before its first transition the direction was in `from` since its first
                    // decision.
                    let (was, since) = a.phase.take().unwrap_or((from, a.first_t.unwrap_or(t)));
                    *a.phases.entry(was).or_default() += overlap(since, t, opts);
                    a.phase = Some((to, t));
                }
                Record::Discarded { count, .. } => {
                    *events.entry("discarded replies".into()).or_default() += count;
                }
                other => *events.entry(other.event().to_string()).or_default() += 1,
            }
        }
    }
    if times.is_empty() {
        return Err(ExplainError::NoDecisions);
    }
    let first = times.iter().copied().fold(f64::INFINITY, f64::min);
    let last = times.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let mut gaps: Vec<f64> = times
        .windows(2)
        .map(|w| w[1] - w[0])
        .filter(|g| *g > 0.0)
        .collect();
    gaps.sort_by(f64::total_cmp);
    let step_s = qdisc::quantile::median_sorted(&gaps).unwrap_or(0.0);
    let dirs = PerDir::new(
        finish(std::mem::take(&mut acc.down), last, opts),
        finish(std::mem::take(&mut acc.up), last, opts),
    );
    let findings = findings(&dirs, &events);
    Ok(Explanation {
        logs: logs.iter().map(|(n, _)| n.clone()).collect(),
        algorithm,
        steps: times.len(),
        span_s: (first, last),
        step_s,
        dirs,
        events,
        findings,
    })
}

fn step(a: &mut DirAcc, d: &DirRecord) {
    let rate = mbit(d.rate);
    let rule = rule_of(d);
    a.rate.push(rate);
    a.thr.push(mbit(d.throughput));
    if let Some(x) = d.delay_ms {
        a.delay.push(x);
    }
    let source = if d.source.is_empty() {
        "unknown".to_string()
    } else {
        d.source.clone()
    };
    *a.sources.entry(source).or_default() += 1;
    let tally = a.rules.entry(rule.clone()).or_insert_with(|| RuleTally {
        rule: rule.clone(),
        steps: 0,
        cuts: 0,
        cut_mbit: 0.0,
        raises: 0,
    });
    tally.steps += 1;
    match a.prev {
        Some(p) if rate < p => {
            tally.cuts += 1;
            tally.cut_mbit += p - rate;
            a.last_cut = Some(rule.clone());
        }
        Some(p) if rate > p => tally.raises += 1,
        None => a.last_cut = Some("start".into()),
        _ => {}
    }
    a.prev = Some(rate);
    if let Some((lo, hi)) = a.range {
        a.known_range += 1;
        // Rates are whole bytes per second: a bound is met within one byte's worth.
        let eps = 8.0 / 1e6;
        if rate <= lo + eps {
            a.at_min += 1;
            let why = a.last_cut.clone().unwrap_or_else(|| "start".into());
            *a.because.entry(why).or_default() += 1;
        }
        if rate >= hi - eps {
            a.at_max += 1;
        }
    }
}

/// The seconds of `[a, b]` within the window of `opts`.
fn overlap(a: f64, b: f64, opts: ExplainOpts) -> f64 {
    let lo = a.max(opts.from.unwrap_or(f64::NEG_INFINITY));
    let hi = b.min(opts.to.unwrap_or(f64::INFINITY));
    (hi - lo).max(0.0)
}

fn finish(mut a: DirAcc, last: f64, opts: ExplainOpts) -> DirExplanation {
    if let Some((p, since)) = a.phase.take() {
        *a.phases.entry(p).or_default() += overlap(since, last, opts);
    }
    let n = a.rate.len();
    let phase_total: f64 = a.phases.values().sum();
    let mut phases: Vec<(String, f64)> = a
        .phases
        .into_iter()
        .filter(|(_, s)| *s > 0.0)
        .map(|(k, s)| (k, s / phase_total))
        .collect();
    phases.sort_by(|x, y| y.1.total_cmp(&x.1).then_with(|| x.0.cmp(&y.0)));
    let mut rules: Vec<RuleTally> = a.rules.into_values().collect();
    rules.sort_by(|x, y| y.steps.cmp(&x.steps).then_with(|| x.rule.cmp(&y.rule)));
    let known = a.known_range;
    DirExplanation {
        // Every decision line has both directions and `explain` refuses logs without one.
        rate_mbit: Spread::of(a.rate).unwrap_or(Spread::NONE),
        throughput_mbit: Spread::of(a.thr).unwrap_or(Spread::NONE),
        delay_ms: Spread::of(a.delay),
        range_mbit: a.range,
        at_min: (known > 0).then(|| a.at_min as f64 / known as f64),
        at_max: (known > 0).then(|| a.at_max as f64 / known as f64),
        at_min_because: shares(a.because, a.at_min),
        rules,
        phases,
        sources: shares(a.sources, n),
    }
}

fn pct(x: f64) -> String {
    format!("{:.1}%", 100.0 * x)
}

fn findings(dirs: &PerDir<DirExplanation>, events: &BTreeMap<String, u64>) -> Vec<String> {
    let mut out = Vec::new();
    for dir in Direction::ALL {
        let d = &dirs[dir];
        let name = match dir {
            Direction::Down => "download",
            Direction::Up => "upload",
        };
        if let (Some(share), Some((lo, hi))) = (d.at_min, d.range_mbit) {
            if share >= AT_MIN_FINDING {
                let why: Vec<String> = d
                    .at_min_because
                    .iter()
                    .map(|(r, s)| {
                        let m = meaning(r);
                        if m.is_empty() {
                            format!("{r} {}", pct(*s))
                        } else {
                            format!("{r} ({m}) {}", pct(*s))
                        }
                    })
                    .collect();
                out.push(format!(
                    "The {name} rate sat at its configured minimum ({lo:.2} Mbit/s) for {} of the \
                     time. What brought it there: {}.",
                    pct(share),
                    why.join(", ")
                ));
            }
            if d.at_max.is_some_and(|s| s >= AT_MAX_FINDING) {
                out.push(format!(
                    "The {name} rate sat at its configured maximum ({hi:.2} Mbit/s) for {} of \
                     the time: if the link carries more, raise the maximum.",
                    pct(d.at_max.unwrap_or(0.0))
                ));
            }
        }
        if let Some(r) = d.rules.iter().find(|r| r.rule == "no-signal") {
            let n: usize = d.rules.iter().map(|r| r.steps).sum();
            out.push(format!(
                "The {name} ran at the safe rate for want of a delay signal in {} of the steps \
                 ({} steps): check that the reflectors answer (rotations and discarded replies \
                 below) or that the passive capture sees TCP traffic.",
                pct(r.steps as f64 / n.max(1) as f64),
                r.steps
            ));
        }
        let n: usize = d.rules.iter().map(|r| r.steps).sum();
        if let Some(r) = d.rules.iter().find(|r| r.rule == "rate-limited") {
            let share = r.steps as f64 / n.max(1) as f64;
            if share >= RATE_LIMITED_FINDING {
                out.push(format!(
                    "The {name}'s change was held back by the rate-of-change limit in {} of the                      steps ({} steps; the `safety` rules: the change spacing, the hold after a                      decrease, the largest increase per second): the law's rate was not in force.",
                    pct(share),
                    r.steps
                ));
            }
        }
        if d.range_mbit.is_none() {
            out.push(format!(
                "The log does not say the {name}'s configured range (its `start` line predates \
                 it): the time at the bounds is not counted."
            ));
        }
    }
    let count = |k: &str| events.get(k).copied().unwrap_or(0);
    if count("actuator-error") > 0 {
        out.push(format!(
            "{} rate changes could not be applied (actuator-error lines): the shaper kept its \
             previous rate.",
            count("actuator-error")
        ));
    }
    if count("cake-stats-error") > 0 {
        out.push(format!(
            "Reading CAKE's statistics failed {} time(s) (cake-stats-error lines): the law ran \
             without CAKE's backlog meanwhile.",
            count("cake-stats-error")
        ));
    }
    if count("rotated") > 0 || count("fallback-to-echo") > 0 {
        out.push(format!(
            "Reflectors were replaced {} time(s) and fell back from timestamps to echo {} \
             time(s).",
            count("rotated"),
            count("fallback-to-echo")
        ));
    }
    if count("reload-failed") > 0 {
        out.push(format!(
            "{} reload(s) were refused (reload-failed lines): the running configuration was kept.",
            count("reload-failed")
        ));
    }
    if out.is_empty() {
        out.push(
            "Nothing unusual: the rates stayed off their bounds, every step had a delay signal and \
             every change was applied."
                .to_string(),
        );
    }
    out
}

impl fmt::Display for Explanation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "purple explain: {} ({} decisions from {:.1} to {:.1} s, {:.0} ms apart; law {})",
            self.logs.join(", "),
            self.steps,
            self.span_s.0,
            self.span_s.1,
            self.step_s * 1e3,
            self.algorithm.as_deref().unwrap_or("not logged")
        )?;
        writeln!(f)?;
        let (d, u) = (&self.dirs.down, &self.dirs.up);
        let row = |f: &mut fmt::Formatter<'_>, what: &str, a: String, b: String| {
            writeln!(f, "{what:<36} {a:<28} {b}")
        };
        row(f, "", "download".into(), "upload".into())?;
        let spread = |s: &Spread| format!("{:.2} / {:.2} / {:.2}", s.mean, s.p10, s.p90);
        row(
            f,
            "rate Mbit/s, mean / p10 / p90",
            spread(&d.rate_mbit),
            spread(&u.rate_mbit),
        )?;
        row(
            f,
            "throughput Mbit/s, mean / p10 / p90",
            spread(&d.throughput_mbit),
            spread(&u.throughput_mbit),
        )?;
        let delay = |s: &Option<Spread>| {
            s.map_or("no samples".to_string(), |s| {
                format!("{:.1} / {:.1} / {:.1}", s.p50, s.p90, s.p99)
            })
        };
        row(
            f,
            "delay seen ms, p50 / p90 / p99",
            delay(&d.delay_ms),
            delay(&u.delay_ms),
        )?;
        let bound = |share: Option<f64>, v: Option<f64>| match (share, v) {
            (Some(s), Some(v)) => format!("{} ({v:.2} Mbit/s)", pct(s)),
            _ => "unknown".to_string(),
        };
        row(
            f,
            "at the configured minimum",
            bound(d.at_min, d.range_mbit.map(|r| r.0)),
            bound(u.at_min, u.range_mbit.map(|r| r.0)),
        )?;
        row(
            f,
            "at the configured maximum",
            bound(d.at_max, d.range_mbit.map(|r| r.1)),
            bound(u.at_max, u.range_mbit.map(|r| r.1)),
        )?;
        let list = |v: &[(String, f64)]| {
            if v.is_empty() {
                "-".to_string()
            } else {
                v.iter()
                    .map(|(k, s)| format!("{k} {}", pct(*s)))
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        };
        row(f, "delay source", list(&d.sources), list(&u.sources))?;
        for (name, x) in [("download", d), ("upload", u)] {
            writeln!(f)?;
            writeln!(
                f,
                "{name}: decisions by rule (share of steps; cuts, the rate they removed; raises)"
            )?;
            let n: usize = x.rules.iter().map(|r| r.steps).sum();
            for r in &x.rules {
                writeln!(
                    f,
                    "  {:<14} {:>6}  cuts {:>6} ({:.1} Mbit/s)  raises {:>6}",
                    r.rule,
                    pct(r.steps as f64 / n.max(1) as f64),
                    r.cuts,
                    r.cut_mbit,
                    r.raises
                )?;
            }
            if !x.phases.is_empty() {
                writeln!(f, "{name}: phases (share of the time): {}", list(&x.phases))?;
            }
        }
        writeln!(f)?;
        let ev: Vec<String> = self
            .events
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        writeln!(
            f,
            "other lines: {}",
            if ev.is_empty() {
                "none".to_string()
            } else {
                ev.join(", ")
            }
        )?;
        writeln!(f)?;
        writeln!(f, "findings:")?;
        for x in &self.findings {
            writeln!(f, "- {x}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use controller::{Direction, PerDir};

    const MBIT: u64 = 125_000;

    fn dir(rate_mbit: u64, rule: &str, source: &str) -> DirRecord {
        DirRecord {
            rate: rate_mbit * MBIT,
            applied: true,
            reason: format!("{rule}: ..."),
            rule: rule.into(),
            throughput: rate_mbit * MBIT * 9 / 10,
            cake_backlog: Some(0),
            delay_ms: Some(1.0),
            passive_ms: None,
            source: source.into(),
        }
    }

    fn line(r: &Record) -> String {
        serde_json::to_string(r).unwrap() + "\n"
    }

    /// A log: start (range 5..80 down, 2..20 up), 10 capacity steps at 40, a no-signal cut to
    /// the minimum held 3 steps, a probe, 2 capacity steps, an outage cut to the minimum held 5
    /// steps: 21 decisions, 8 of them at the download's minimum.
    fn a_log() -> String {
        let mut text = line(&Record::Start {
            t: 0.0,
            algorithm: "purple".into(),
            actuator: "netlink".into(),
            icmp_raw: true,
            wall: 1e9,
            reflectors: vec![],
            params: Default::default(),
            min: Some(PerDir::new(5 * MBIT, 2 * MBIT)),
            max: Some(PerDir::new(80 * MBIT, 20 * MBIT)),
        });
        let mut t = 1.0;
        let mut push = |text: &mut String, down: DirRecord| {
            text.push_str(&line(&Record::Decision {
                t,
                down,
                up: dir(10, "hold", "probes"),
            }));
            t += 0.05;
        };
        for _ in 0..10 {
            push(&mut text, dir(40, "capacity", "probes"));
        }
        for _ in 0..3 {
            push(&mut text, dir(5, "no-signal", "none"));
        }
        push(&mut text, dir(20, "probe", "probes"));
        for _ in 0..2 {
            push(&mut text, dir(30, "capacity", "probes"));
        }
        for _ in 0..5 {
            push(&mut text, dir(5, "outage", "probes"));
        }
        text.push_str(&line(&Record::Transition {
            t: 1.5,
            dir: Direction::Down,
            from: "cruise".into(),
            to: "outage".into(),
            trigger: "outage".into(),
        }));
        text.push_str(&line(&Record::ActuatorError {
            t: 1.6,
            dir: Direction::Down,
            rate: 5 * MBIT,
            error: "netlink: EPERM".into(),
        }));
        text.push_str(&line(&Record::Rotated {
            t: 1.7,
            out: "9.9.9.9".into(),
            into: "1.1.1.1".into(),
        }));
        text
    }

    #[test]
    fn time_at_the_minimum_is_put_down_to_the_cut_that_brought_the_rate_there() {
        let e = explain(&[("a.log".into(), a_log())], ExplainOpts::default()).unwrap();
        assert_eq!(e.steps, 21);
        assert_eq!(e.algorithm.as_deref(), Some("purple"));
        assert!((e.step_s - 0.05).abs() < 1e-9, "{}", e.step_s);
        let d = &e.dirs.down;
        assert_eq!(d.range_mbit, Some((5.0, 80.0)));
        assert!((d.at_min.unwrap() - 8.0 / 21.0).abs() < 1e-9);
        assert_eq!(d.at_max, Some(0.0));
        let because: BTreeMap<String, f64> = d.at_min_because.iter().cloned().collect();
        assert!((because["outage"] - 5.0 / 8.0).abs() < 1e-9, "{because:?}");
        assert!(
            (because["no-signal"] - 3.0 / 8.0).abs() < 1e-9,
            "{because:?}"
        );
        // Rules: steps, cuts and the rate they removed, raises.
        let rule = |r: &str| d.rules.iter().find(|x| x.rule == r).unwrap().clone();
        let cap = rule("capacity");
        assert_eq!((cap.steps, cap.cuts, cap.raises), (12, 0, 1));
        let out = rule("outage");
        assert_eq!((out.steps, out.cuts), (5, 1));
        assert!((out.cut_mbit - 25.0).abs() < 1e-9);
        let ns = rule("no-signal");
        assert_eq!((ns.steps, ns.cuts), (3, 1));
        assert!((ns.cut_mbit - 35.0).abs() < 1e-9);
        assert_eq!(d.rules[0].rule, "capacity", "most steps first");
        // Sources: 3 of 21 steps without a delay signal.
        let none = d.sources.iter().find(|(s, _)| s == "none").unwrap().1;
        assert!((none - 3.0 / 21.0).abs() < 1e-9);
        // Phases: cruise from the first decision (1.0) to the transition (1.5), then outage to
        // the last decision (2.0).
        let ph: BTreeMap<String, f64> = d.phases.iter().cloned().collect();
        assert!(
            (ph["cruise"] - 0.5).abs() < 1e-6 && (ph["outage"] - 0.5).abs() < 1e-6,
            "{ph:?}"
        );
        // The upload never moved: held, never at a bound.
        assert_eq!(e.dirs.up.at_min, Some(0.0));
        assert!(e.dirs.up.at_min_because.is_empty());
        // Events and findings.
        assert_eq!(e.events["actuator-error"], 1);
        assert_eq!(e.events["rotated"], 1);
        assert_eq!(e.events["start"], 1);
        let f = e.findings.join("\n");
        assert!(
            f.contains("download rate sat at its configured minimum (5.00 Mbit/s) for 38.1%"),
            "{f}"
        );
        assert!(
            f.contains("outage (nothing delivered while a queue stood) 62.5%"),
            "{f}"
        );
        assert!(
            f.contains("safe rate for want of a delay signal in 14.3%"),
            "{f}"
        );
        assert!(f.contains("1 rate changes could not be applied"), "{f}");
        assert!(f.contains("replaced 1 time(s)"), "{f}");
        assert!(!f.contains("upload rate sat"), "{f}");
        // The text names the same figures; the JSON carries them.
        let text = e.to_string();
        assert!(text.contains("38.1% (5.00 Mbit/s)"), "{text}");
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(v["dirs"]["down"]["rules"][0]["rule"], "capacity");
    }

    #[test]
    fn changes_held_back_by_the_rate_of_change_limit_are_a_finding() {
        let mut text = a_log();
        for k in 0..3 {
            text.push_str(&line(&Record::Decision {
                t: 3.0 + 0.05 * f64::from(k),
                down: dir(5, "rate-limited", "probes"),
                up: dir(10, "hold", "probes"),
            }));
        }
        let e = explain(&[("a.log".into(), text)], ExplainOpts::default()).unwrap();
        let f = e.findings.join("\n");
        assert!(
            f.contains("download's change was held back by the rate-of-change limit in 12.5%"),
            "{f}"
        );
        let e = explain(&[("a.log".into(), a_log())], ExplainOpts::default()).unwrap();
        assert!(!e.findings.join("\n").contains("rate-of-change"));
    }

    #[test]
    fn a_window_explains_only_its_decisions() {
        let o = ExplainOpts {
            from: Some(1.52),
            to: None,
        };
        let e = explain(&[("a.log".into(), a_log())], o).unwrap();
        // Decisions at 1.00, 1.05, ...: from 1.55 on, the last two no-signal steps, the probe,
        // the two capacity steps and the outage's five.
        assert_eq!(e.steps, 10);
        assert!((e.span_s.0 - 1.55).abs() < 1e-9, "{:?}", e.span_s);
        let ph: BTreeMap<String, f64> = e.dirs.down.phases.iter().cloned().collect();
        assert_eq!(ph.keys().collect::<Vec<_>>(), vec!["outage"]);
        let o = ExplainOpts {
            from: Some(10.0),
            to: None,
        };
        assert_eq!(
            explain(&[("a.log".into(), a_log())], o),
            Err(ExplainError::NoDecisions)
        );
    }

    #[test]
    fn old_logs_without_the_rule_or_the_range_are_read_from_the_reason_and_say_so() {
        let old = r#"{"event":"start","t":0,"algorithm":"purple","actuator":"netlink","icmp_raw":true,"wall":1,"reflectors":[]}
{"event":"decision","t":1,"down":{"rate":625000,"applied":true,"reason":"clamped to [min, max]","throughput":0,"cake_backlog":null,"delay_ms":null},"up":{"rate":250000,"applied":true,"reason":"safe rate: no Delay signal for 2s","throughput":0,"cake_backlog":null,"delay_ms":null}}
"#;
        let e = explain(&[("old.log".into(), old.into())], ExplainOpts::default()).unwrap();
        assert_eq!(e.dirs.down.rules[0].rule, "clamped");
        assert_eq!(e.dirs.up.rules[0].rule, "no-signal");
        assert_eq!(e.dirs.down.at_min, None);
        assert!(e.dirs.down.delay_ms.is_none());
        assert!(e
            .findings
            .iter()
            .any(|f| f.contains("does not say the download's configured range")));
        assert!(e.to_string().contains("no samples"));
    }

    #[test]
    fn a_line_that_is_not_a_log_line_is_named_with_its_log_and_number() {
        let text = format!("{}garbage\n", a_log());
        let e = explain(
            &[("x.log.1".into(), a_log()), ("x.log".into(), text)],
            ExplainOpts::default(),
        )
        .unwrap_err();
        assert!(
            matches!(&e, ExplainError::Line { log, line: 26, .. } if log == "x.log"),
            "{e}"
        );
        assert!(
            e.to_string().starts_with("x.log:26: not a JSON object"),
            "{e}"
        );
    }
}
