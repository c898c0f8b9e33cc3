//! The decision log: one [`Record`] per line as JSON, rotated by size (`FILE` → `FILE.1` → ...
//! → `FILE.N`). [`Record`] is the one definition of the log's format: the daemon writes it
//! ([`Record::of_event`] turns the agent's typed events into records), and the lab
//! (`lab::control`) and `purple plot` read it back through [`parse_line`].
//!
//! Backward compatible with the `json!`-written logs before it: the same `event` names and
//! fields (keys are now in declaration order instead of sorted); `privileges`, `reloaded` and
//! `reload-failed` gained the `t` every other line has (read as 0 from older logs); new kinds
//! are `discarded`, `clock-step` and `transition` (a reader older than a kind skips it).

use controller::agent::{DirStep, Discard, Event};
use controller::{Direction, PerDir};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::PathBuf;

/// One direction of a `decision` line.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DirRecord {
    /// Decided rate, bytes per second.
    pub rate: u64,
    /// Whether it was applied at this step.
    pub applied: bool,
    /// Why (the controller's `Reason`, as text).
    pub reason: String,
    /// The rule behind `reason`, by name (`Reason::rule`: `capacity`, `probe`, `standing`,
    /// ...); empty in logs written before it was added (`purple explain` then reads the word
    /// before the reason's first colon).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub rule: String,
    /// Latest measured throughput, bytes per second.
    pub throughput: u64,
    /// CAKE's backlog at the latest statistics read, bytes (`null`: unknown).
    pub cake_backlog: Option<u64>,
    /// Mean queueing delay over each reflector's minimum since the previous line, ms.
    pub delay_ms: Option<f64>,
    /// The passive estimate at the latest reading, ms (absent: none; older logs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub passive_ms: Option<f64>,
    /// Where the law's delay came from: `probes`, `passive`, `both`, `quiet` or `none`
    /// (empty in older logs).
    #[serde(default)]
    pub source: String,
}

impl DirRecord {
    /// The record of one direction of a step.
    pub fn of(d: &DirStep) -> Self {
        DirRecord {
            rate: d.rate.bytes_per_s(),
            applied: d.applied,
            reason: d.reason.to_string(),
            rule: d.reason.rule().to_string(),
            throughput: d.throughput.bytes_per_s(),
            cake_backlog: d.cake_backlog,
            delay_ms: d.delay_ms,
            passive_ms: d.passive_ms,
            source: d.source.name().to_string(),
        }
    }
}

/// One line of the decision log. `t` is the daemon's monotonic time in seconds (the `start`
/// line's `wall` anchors it to Unix time).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
pub enum Record {
    /// The daemon started (or was reloaded).
    Start {
        /// Seconds.
        t: f64,
        /// The law.
        algorithm: String,
        /// The actuator.
        actuator: String,
        /// Whether ICMP uses a raw socket (timestamps possible).
        icmp_raw: bool,
        /// Unix time at `t`, seconds.
        wall: f64,
        /// The configured reflectors.
        reflectors: Vec<String>,
        /// The law's parameters set in its configuration section (`[purple]`, ...), by name;
        /// the rest are at their defaults. Absent when none is set (and in logs written before
        /// stop 25).
        #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
        params: std::collections::BTreeMap<String, f64>,
        /// The configured least rate per direction, bytes per second (absent in older logs).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        min: Option<PerDir<u64>>,
        /// The configured largest rate per direction, bytes per second (absent in older logs).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max: Option<PerDir<u64>>,
    },
    /// A control step.
    Decision {
        /// Seconds.
        t: f64,
        /// Download.
        down: DirRecord,
        /// Upload.
        up: DirRecord,
    },
    /// Which delay source is in force per direction (`probes`, `passive`, `both`, `quiet`,
    /// `none`), under the configured `delay_source`: at the first step and at every change
    /// that held a second.
    DelaySource {
        /// Seconds.
        t: f64,
        /// The configured source (`probes`, `passive`, `both`).
        configured: String,
        /// Download.
        down: String,
        /// Upload.
        up: String,
    },
    /// The passive delay signal's capture at start: on which device, or why not (with
    /// `delay_source = "both"` the probes then carry on alone).
    PassiveCapture {
        /// Seconds.
        t: f64,
        /// `packet socket on DEV`, or `purple bridge` (the bridge measures inline).
        via: String,
        /// Why it could not start.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// A reflector fell back from ICMP timestamps to echo.
    FallbackToEcho {
        /// Seconds.
        t: f64,
        /// Its address.
        reflector: String,
    },
    /// A reflector was replaced by a spare.
    Rotated {
        /// Seconds.
        t: f64,
        /// Taken out.
        out: String,
        /// Put in.
        #[serde(rename = "in")]
        into: String,
    },
    /// A reflector's clock stepped; its baselines restarted.
    ClockStep {
        /// Seconds.
        t: f64,
        /// Its address.
        reflector: String,
        /// The step, ms.
        shift_ms: f64,
    },
    /// Replies discarded (rate-limited report).
    Discarded {
        /// Seconds.
        t: f64,
        /// Why.
        reason: Discard,
        /// The last reflector (or source) concerned.
        reflector: Option<String>,
        /// Since the previous report of this reason.
        count: u64,
        /// Since start.
        total: u64,
    },
    /// Applying a rate failed.
    ActuatorError {
        /// Seconds.
        t: f64,
        /// Direction.
        dir: Direction,
        /// Bytes per second.
        rate: u64,
        /// The actuator's message.
        error: String,
    },
    /// Reading CAKE's statistics failed (first of a run).
    CakeStatsError {
        /// Seconds.
        t: f64,
        /// The actuator.
        actuator: String,
        /// Its message.
        error: String,
    },
    /// Reading CAKE's statistics works again.
    CakeStatsOk {
        /// Seconds.
        t: f64,
    },
    /// The law changed phase in one direction (PURPLE only; the other laws have no phases).
    Transition {
        /// Seconds.
        t: f64,
        /// Direction.
        dir: Direction,
        /// From (`startup`, `cruise`, `probe`, `drain`, `idle`, `outage`, `suspect`).
        from: String,
        /// To.
        to: String,
        /// The rule that moved it (as a decision's `reason`).
        trigger: String,
    },
    /// The safe rate set on exit.
    SafeRate {
        /// Seconds.
        t: f64,
        /// Direction.
        dir: Direction,
        /// Bytes per second.
        rate: u64,
        /// Whether it was applied.
        ok: bool,
        /// The actuator's message on failure.
        error: Option<String>,
    },
    /// The privilege drop (or a warning that none happened).
    Privileges {
        /// Seconds (0 in logs written before it was added).
        #[serde(default)]
        t: f64,
        /// The user switched to.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        user: Option<String>,
        /// Capabilities kept.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        kept: Option<Vec<String>>,
        /// Why none happened.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        warning: Option<String>,
    },
    /// SIGHUP: the configuration was reloaded.
    Reloaded {
        /// Seconds (0 in older logs).
        #[serde(default)]
        t: f64,
    },
    /// SIGHUP: the new configuration was rejected; the running one is kept.
    ReloadFailed {
        /// Seconds (0 in older logs).
        #[serde(default)]
        t: f64,
        /// Why.
        error: String,
    },
}

/// Every `event` name a [`Record`] can have.
pub const EVENTS: [&str; 16] = [
    "start",
    "decision",
    "delay-source",
    "passive-capture",
    "fallback-to-echo",
    "rotated",
    "clock-step",
    "discarded",
    "actuator-error",
    "cake-stats-error",
    "cake-stats-ok",
    "transition",
    "safe-rate",
    "privileges",
    "reloaded",
    "reload-failed",
];

impl Record {
    /// The record of the agent's event `e` that happened at `t` seconds; `actuator` names the
    /// actuator (for `cake-stats-error`).
    pub fn of_event(t: f64, e: &Event, actuator: &str) -> Record {
        let a = |x: &std::net::SocketAddr| x.to_string();
        match e {
            Event::Decision { down, up } => Record::Decision {
                t,
                down: DirRecord::of(down),
                up: DirRecord::of(up),
            },
            Event::DelaySource {
                configured,
                down,
                up,
            } => Record::DelaySource {
                t,
                configured: configured.name().to_string(),
                down: down.name().to_string(),
                up: up.name().to_string(),
            },
            Event::FallbackToEcho { reflector } => Record::FallbackToEcho {
                t,
                reflector: a(reflector),
            },
            Event::Rotated { out, into } => Record::Rotated {
                t,
                out: a(out),
                into: a(into),
            },
            Event::ClockStep {
                reflector,
                shift_ms,
            } => Record::ClockStep {
                t,
                reflector: a(reflector),
                shift_ms: *shift_ms,
            },
            Event::Discarded {
                reason,
                reflector,
                count,
                total,
            } => Record::Discarded {
                t,
                reason: *reason,
                reflector: reflector.as_ref().map(a),
                count: *count,
                total: *total,
            },
            Event::ActuatorError { dir, rate, error } => Record::ActuatorError {
                t,
                dir: *dir,
                rate: rate.bytes_per_s(),
                error: error.clone(),
            },
            Event::CakeStatsError { error } => Record::CakeStatsError {
                t,
                actuator: actuator.to_string(),
                error: error.clone(),
            },
            Event::CakeStatsOk => Record::CakeStatsOk { t },
            Event::Transition {
                dir,
                from,
                to,
                trigger,
            } => Record::Transition {
                t,
                dir: *dir,
                from: from.name().to_string(),
                to: to.name().to_string(),
                trigger: trigger.to_string(),
            },
            Event::SafeRate { dir, rate, error } => Record::SafeRate {
                t,
                dir: *dir,
                rate: rate.bytes_per_s(),
                ok: error.is_none(),
                error: error.clone(),
            },
        }
    }

    /// The line's time, seconds.
    pub fn t(&self) -> f64 {
        match self {
            Record::Start { t, .. }
            | Record::Decision { t, .. }
            | Record::DelaySource { t, .. }
            | Record::PassiveCapture { t, .. }
            | Record::FallbackToEcho { t, .. }
            | Record::Rotated { t, .. }
            | Record::ClockStep { t, .. }
            | Record::Discarded { t, .. }
            | Record::ActuatorError { t, .. }
            | Record::CakeStatsError { t, .. }
            | Record::CakeStatsOk { t }
            | Record::Transition { t, .. }
            | Record::SafeRate { t, .. }
            | Record::Privileges { t, .. }
            | Record::Reloaded { t }
            | Record::ReloadFailed { t, .. } => *t,
        }
    }

    /// The line's `event` name (one of [`EVENTS`]).
    pub fn event(&self) -> &'static str {
        match self {
            Record::Start { .. } => "start",
            Record::Decision { .. } => "decision",
            Record::DelaySource { .. } => "delay-source",
            Record::PassiveCapture { .. } => "passive-capture",
            Record::FallbackToEcho { .. } => "fallback-to-echo",
            Record::Rotated { .. } => "rotated",
            Record::ClockStep { .. } => "clock-step",
            Record::Discarded { .. } => "discarded",
            Record::ActuatorError { .. } => "actuator-error",
            Record::CakeStatsError { .. } => "cake-stats-error",
            Record::CakeStatsOk { .. } => "cake-stats-ok",
            Record::Transition { .. } => "transition",
            Record::SafeRate { .. } => "safe-rate",
            Record::Privileges { .. } => "privileges",
            Record::Reloaded { .. } => "reloaded",
            Record::ReloadFailed { .. } => "reload-failed",
        }
    }

    /// Whether the agent's events make this kind of line (the rest are the daemon's own).
    pub fn from_agent(&self) -> bool {
        !matches!(
            self,
            Record::Start { .. }
                | Record::PassiveCapture { .. }
                | Record::Privileges { .. }
                | Record::Reloaded { .. }
                | Record::ReloadFailed { .. }
        )
    }
}

/// A line of a decision log that cannot be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ParseError {
    /// Not a JSON object.
    NotJson(String),
    /// A known `event` whose fields do not match its record.
    BadRecord {
        /// The event name.
        event: String,
        /// What is wrong.
        error: String,
    },
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseError::NotJson(e) => write!(f, "not a JSON object: {e}"),
            ParseError::BadRecord { event, error } => write!(f, "bad `{event}` line: {error}"),
        }
    }
}
impl std::error::Error for ParseError {}

/// Reads one log line: `Ok(None)` for a blank line or an `event` this version does not know
/// (written by a newer daemon), an error for anything that is not a log line.
pub fn parse_line(line: &str) -> Result<Option<Record>, ParseError> {
    if line.trim().is_empty() {
        return Ok(None);
    }
    let v: serde_json::Value =
        serde_json::from_str(line).map_err(|e| ParseError::NotJson(e.to_string()))?;
    let event = v
        .get("event")
        .and_then(|e| e.as_str())
        .ok_or_else(|| ParseError::NotJson("no \"event\" field".to_string()))?
        .to_string();
    if !EVENTS.contains(&event.as_str()) {
        return Ok(None);
    }
    serde_json::from_value(v)
        .map(Some)
        .map_err(|e| ParseError::BadRecord {
            event,
            error: e.to_string(),
        })
}

/// A size-rotated JSON-lines writer (or stdout when the path is empty).
#[derive(Debug)]
pub struct JsonLog {
    path: Option<PathBuf>,
    file: Option<io::BufWriter<File>>,
    size: u64,
    max_bytes: u64,
    keep: u32,
    line: Vec<u8>,
}

impl JsonLog {
    /// Opens (appending) `path`, or stdout for `""`.
    pub fn open(path: &str, max_bytes: u64, keep: u32) -> io::Result<Self> {
        let mut l = JsonLog {
            path: (!path.is_empty()).then(|| PathBuf::from(path)),
            file: None,
            size: 0,
            max_bytes,
            keep,
            line: Vec::with_capacity(512),
        };
        l.reopen()?;
        Ok(l)
    }

    fn reopen(&mut self) -> io::Result<()> {
        if let Some(p) = &self.path {
            if let Some(dir) = p.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir)?;
            }
            let f = OpenOptions::new().create(true).append(true).open(p)?;
            self.size = f.metadata()?.len();
            self.file = Some(io::BufWriter::new(f));
        }
        Ok(())
    }

    /// Writes `r` as one line and flushes; rotates first if the line would pass `max_bytes`.
    pub fn write(&mut self, r: &Record) -> io::Result<()> {
        self.write_value(r)
    }

    /// Writes any serialisable value as one line (what [`JsonLog::write`] does for records).
    pub fn write_value<T: Serialize>(&mut self, v: &T) -> io::Result<()> {
        self.line.clear();
        serde_json::to_writer(&mut self.line, v)?;
        self.line.push(b'\n');
        if self.path.is_none() {
            let mut o = io::stdout().lock();
            o.write_all(&self.line)?;
            return o.flush();
        }
        if self.size > 0 && self.size + self.line.len() as u64 > self.max_bytes {
            self.rotate()?;
        }
        if let Some(f) = self.file.as_mut() {
            f.write_all(&self.line)?;
            f.flush()?;
            self.size += self.line.len() as u64;
        }
        Ok(())
    }

    /// Rotates now: `FILE.(N-1)` → `FILE.N`, ..., `FILE` → `FILE.1` (with `keep = 0` the file
    /// is truncated), then reopens `FILE`.
    pub fn rotate(&mut self) -> io::Result<()> {
        let Some(p) = self.path.clone() else {
            return Ok(());
        };
        self.file = None;
        let name = |i: u32| PathBuf::from(format!("{}.{i}", p.display()));
        if self.keep == 0 {
            std::fs::remove_file(&p)?;
        } else {
            for i in (1..self.keep).rev() {
                if name(i).exists() {
                    std::fs::rename(name(i), name(i + 1))?;
                }
            }
            std::fs::rename(&p, name(1))?;
        }
        self.reopen()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_rotates_by_size_and_keeps_n_files() {
        let dir = std::env::temp_dir().join(format!("purple-log-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let p = dir.join("c.jsonl");
        let mut l = JsonLog::open(p.to_str().unwrap(), 100, 2).unwrap();
        for i in 0..20 {
            l.write(&Record::ReloadFailed {
                t: f64::from(i),
                error: "xxxxxxxxxxxxxxxxxxxx".into(),
            })
            .unwrap();
        }
        let main = std::fs::read_to_string(&p).unwrap();
        assert!(main.len() <= 100);
        assert!(main
            .lines()
            .all(|l| matches!(parse_line(l), Ok(Some(Record::ReloadFailed { .. })))));
        assert!(dir.join("c.jsonl.1").exists() && dir.join("c.jsonl.2").exists());
        assert!(!dir.join("c.jsonl.3").exists());
        assert!(main.contains("\"t\":19.0"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Directions were written by a log-only `Dir` enum (`"down"`/`"up"`) before the log took
    /// `controller::Direction`: lines the daemon wrote then read, and write back byte for byte.
    #[test]
    fn direction_fields_keep_their_spelling() {
        let lines = [
            r#"{"event":"actuator-error","t":2.1,"dir":"down","rate":1,"error":"x"}"#,
            r#"{"event":"transition","t":4.0,"dir":"up","from":"startup","to":"cruise","trigger":"hold"}"#,
            r#"{"event":"safe-rate","t":3.0,"dir":"up","rate":625000,"ok":true,"error":null}"#,
        ];
        let dirs: Vec<Direction> = lines
            .iter()
            .map(|l| match parse_line(l).unwrap().unwrap() {
                Record::ActuatorError { dir, .. }
                | Record::Transition { dir, .. }
                | Record::SafeRate { dir, .. } => dir,
                r => panic!("{r:?}"),
            })
            .collect();
        assert_eq!(dirs, [Direction::Down, Direction::Up, Direction::Up]);
        for l in lines {
            let r = parse_line(l).unwrap().unwrap();
            assert_eq!(serde_json::to_string(&r).unwrap(), l);
        }
        assert!(matches!(
            parse_line(r#"{"event":"actuator-error","t":1,"dir":"sideways","rate":1,"error":"x"}"#),
            Err(ParseError::BadRecord { .. })
        ));
    }

    /// Lines as the `json!`-based writer before [`Record`] wrote them still read.
    #[test]
    fn old_lines_read_and_unknown_events_are_skipped() {
        let old = [
            r#"{"actuator":"dry-run","algorithm":"purple","event":"start","icmp_raw":true,"reflectors":["1.1.1.1"],"t":0.0001,"wall":1700000000.5}"#,
            r#"{"down":{"applied":true,"cake_backlog":null,"delay_ms":0.25,"rate":2500000,"reason":"start","throughput":0},"event":"decision","t":0.05,"up":{"applied":false,"cake_backlog":1200,"delay_ms":null,"rate":2500000,"reason":"hold","throughput":10}}"#,
            r#"{"event":"rotated","in":"127.0.0.1:0","out":"127.0.0.1:1","t":0.2}"#,
            r#"{"event":"privileges","warning":"running as root"}"#,
            r#"{"event":"reloaded"}"#,
            r#"{"dir":"up","error":null,"event":"safe-rate","ok":true,"rate":625000,"t":3.0}"#,
        ];
        let recs: Vec<Record> = old
            .iter()
            .map(|l| parse_line(l).unwrap().unwrap())
            .collect();
        match &recs[1] {
            Record::Decision { t, down, up } => {
                assert_eq!(*t, 0.05);
                assert_eq!((down.rate, down.delay_ms), (2_500_000, Some(0.25)));
                assert_eq!(up.cake_backlog, Some(1200));
            }
            r => panic!("{r:?}"),
        }
        assert_eq!(
            recs[2],
            Record::Rotated {
                t: 0.2,
                out: "127.0.0.1:1".into(),
                into: "127.0.0.1:0".into()
            }
        );
        assert_eq!(recs[4], Record::Reloaded { t: 0.0 });
        // Each record names the `event` it was read from, one of `EVENTS`.
        for (l, r) in old.iter().zip(&recs) {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            assert_eq!(v["event"], r.event());
            assert!(EVENTS.contains(&r.event()));
        }
        // Written again, a record reads back equal.
        for r in &recs {
            let line = serde_json::to_string(r).unwrap();
            assert_eq!(parse_line(&line).unwrap().as_ref(), Some(r));
        }
        assert_eq!(parse_line(r#"{"event":"from-the-future","t":1}"#), Ok(None));
        assert!(matches!(
            parse_line("nonsense"),
            Err(ParseError::NotJson(_))
        ));
        assert!(matches!(
            parse_line(r#"{"event":"decision","t":"soon"}"#),
            Err(ParseError::BadRecord { .. })
        ));
    }
}
