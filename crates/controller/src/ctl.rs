//! The control protocol of `purple bridge` and `purple linkem`, as pure codecs: one
//! [`Request`] line per connection to the bridge's Unix socket, answered with one [`Response`]
//! and then end-of-stream. The bridge (the server, in the dataplane crate), the daemon's bridge
//! actuator and `purple ctl` (the clients) all speak it through these types, so the wire text
//! is written in one place and read in one place.
//!
//! Requests ([`Request::parse`] reads them, [`fmt::Display`] writes them):
//! - `stats` and `stats --json` (also `-j`): the bridge's statistics as tc text, or as a JSON
//!   array with one object per direction ([`parse_stats_counters`] reads CAKE's counters from
//!   it);
//! - `set-bandwidth egress|ingress RATE` and `set-rate up|down RATE` (the link emulator's
//!   spelling, which also takes `egress`/`ingress`): RATE in tc syntax within the shapers'
//!   accepted range ([`qdisc::tc_units::parse_shaper_rate`]), or `unlimited`; `egress`/`up` is
//!   upload ([`Direction::Up`]), `ingress`/`down` download;
//! - `passive` (a bridge run with `--passive`): the passive delay estimate since the previous
//!   `passive`, one JSON [`ReadingWire`]; each answer starts a new interval, so only the
//!   controlling daemon should ask.
//!
//! Answers ([`Response::format`] writes them, [`Response::parse`] reads them given the request
//! they answer): `DIR bandwidth|rate RATE` for a rate change, the statistics, the reading, or
//! `error: MESSAGE` for a failure.
//!
//! No I/O here: the socket client is `dataplane::ctl::request` (and the daemon's
//! `actuator::Bridge`), the server `dataplane::ctl_server`.

use std::fmt;

use qdisc::tc_units::{self, UnitError};

use crate::agent::CakeCounters;
use crate::passive::ReadingWire;
use crate::{Direction, PerDir, Rate};

/// How a bridge names its directions in answers and statistics.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DirNames {
    /// `purple bridge`: `egress` (upload) and `ingress` (download).
    EgressIngress,
    /// `purple linkem`: `up` and `down`.
    UpDown,
}

impl DirNames {
    /// The name of `dir` in this spelling.
    pub fn name(self, dir: Direction) -> &'static str {
        match (self, dir) {
            (DirNames::EgressIngress, Direction::Up) => "egress",
            (DirNames::EgressIngress, Direction::Down) => "ingress",
            (DirNames::UpDown, Direction::Up) => "up",
            (DirNames::UpDown, Direction::Down) => "down",
        }
    }

    /// The direction `word` names in either spelling, and that spelling.
    pub fn parse(word: &str) -> Option<(DirNames, Direction)> {
        match word {
            "egress" => Some((DirNames::EgressIngress, Direction::Up)),
            "ingress" => Some((DirNames::EgressIngress, Direction::Down)),
            "up" => Some((DirNames::UpDown, Direction::Up)),
            "down" => Some((DirNames::UpDown, Direction::Down)),
            _ => None,
        }
    }
}

/// The two rate commands, by the word their answer carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RateVerb {
    /// `set-bandwidth`, answered `DIR bandwidth RATE`.
    Bandwidth,
    /// `set-rate`, answered `DIR rate RATE`.
    Rate,
}

impl RateVerb {
    /// `bandwidth` or `rate`.
    pub fn word(self) -> &'static str {
        match self {
            RateVerb::Bandwidth => "bandwidth",
            RateVerb::Rate => "rate",
        }
    }

    /// The command's name: `set-bandwidth` or `set-rate`.
    pub fn command(self) -> &'static str {
        match self {
            RateVerb::Bandwidth => "set-bandwidth",
            RateVerb::Rate => "set-rate",
        }
    }

    /// How this command names directions on the wire.
    fn names(self) -> DirNames {
        match self {
            RateVerb::Bandwidth => DirNames::EgressIngress,
            RateVerb::Rate => DirNames::UpDown,
        }
    }
}

/// One control request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Request {
    /// `stats` (`json`: `stats --json`, tc's JSON instead of text).
    Stats {
        /// JSON output.
        json: bool,
    },
    /// `set-bandwidth egress|ingress RATE`: change one direction's shaped rate.
    SetBandwidth {
        /// The direction (`egress` = [`Direction::Up`]).
        dir: Direction,
        /// The new rate; `None` = unlimited.
        rate: Option<Rate>,
    },
    /// `set-rate up|down RATE`: the same change, as the link emulator spells it.
    SetRate {
        /// The direction (`up` = [`Direction::Up`]).
        dir: Direction,
        /// The new rate; `None` = unlimited.
        rate: Option<Rate>,
    },
    /// `passive`: a reading of the passive delay estimator (and a new interval).
    Passive,
}

/// Why a request line was refused. Its `Display` is the bridge's answer after `error: `.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RequestError {
    /// Not a command of the protocol (or the wrong number of words).
    Unknown {
        /// The line as received.
        line: String,
    },
    /// A rate command named no direction it accepts.
    BadDirection {
        /// Which command.
        verb: RateVerb,
        /// The word given.
        word: String,
    },
    /// A rate that is not tc syntax, not `unlimited`, or outside the shapers' range.
    BadRate {
        /// The word given.
        word: String,
        /// What is wrong with it.
        err: UnitError,
    },
}

impl fmt::Display for RequestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequestError::Unknown { line } => write!(
                f,
                "unknown command {line:?} (stats [--json] | set-bandwidth egress|ingress RATE \
                 | set-rate up|down RATE | passive)"
            ),
            RequestError::BadDirection { verb, word } => {
                let accepted = match verb {
                    RateVerb::Bandwidth => "egress or ingress",
                    RateVerb::Rate => "up or down",
                };
                write!(f, "bad direction {word:?} ({accepted})")
            }
            RequestError::BadRate { word, err } => match err {
                UnitError::RateOutOfRange(_) => {
                    write!(f, "bad rate {word:?}: {err} (or unlimited)")
                }
                _ => write!(
                    f,
                    "bad rate {word:?}: {err}: expected {} or unlimited",
                    tc_units::RATE_FORMAT
                ),
            },
        }
    }
}

impl std::error::Error for RequestError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RequestError::BadRate { err, .. } => Some(err),
            _ => None,
        }
    }
}

/// `unlimited`, or a rate in tc syntax within the shapers' accepted range.
fn parse_rate_word(word: &str) -> Result<Option<Rate>, RequestError> {
    if word == "unlimited" {
        return Ok(None);
    }
    tc_units::parse_shaper_rate(word)
        .map(|b| Some(Rate::from_bytes_per_s(b)))
        .map_err(|err| RequestError::BadRate {
            word: word.to_string(),
            err,
        })
}

/// A request's rate as it is written: bits per second (exact), or `unlimited`.
struct RateWord(Option<Rate>);

impl fmt::Display for RateWord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            // Saturating: a rate beyond 2^61 B/s is out of the shapers' range anyway, and
            // reads back as an error rather than as a small rate.
            Some(r) => write!(f, "{}bit", r.bits_per_s()),
            None => f.write_str("unlimited"),
        }
    }
}

impl Request {
    /// Parses one request line (surrounding whitespace and the newline ignored).
    pub fn parse(line: &str) -> Result<Request, RequestError> {
        let w: Vec<&str> = line.split_whitespace().collect();
        let set = |verb: RateVerb, d: &str, r: &str| {
            let dir = match (verb, DirNames::parse(d)) {
                (RateVerb::Bandwidth, Some((DirNames::EgressIngress, dir))) => dir,
                (RateVerb::Rate, Some((_, dir))) => dir,
                _ => {
                    return Err(RequestError::BadDirection {
                        verb,
                        word: d.to_string(),
                    })
                }
            };
            let rate = parse_rate_word(r)?;
            Ok(match verb {
                RateVerb::Bandwidth => Request::SetBandwidth { dir, rate },
                RateVerb::Rate => Request::SetRate { dir, rate },
            })
        };
        match w.as_slice() {
            ["stats"] => Ok(Request::Stats { json: false }),
            ["stats", "--json"] | ["stats", "-j"] => Ok(Request::Stats { json: true }),
            ["passive"] => Ok(Request::Passive),
            ["set-bandwidth", d, r] => set(RateVerb::Bandwidth, d, r),
            ["set-rate", d, r] => set(RateVerb::Rate, d, r),
            _ => Err(RequestError::Unknown {
                line: line.to_string(),
            }),
        }
    }

    /// The request's line with its newline, as a client sends it.
    pub fn line(&self) -> String {
        format!("{self}\n")
    }
}

impl std::str::FromStr for Request {
    type Err = RequestError;
    fn from_str(s: &str) -> Result<Request, RequestError> {
        Request::parse(s)
    }
}

impl fmt::Display for Request {
    /// The request line without its newline; rates in bits per second (`30000000bit`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Request::Stats { json: false } => f.write_str("stats"),
            Request::Stats { json: true } => f.write_str("stats --json"),
            Request::Passive => f.write_str("passive"),
            Request::SetBandwidth { dir, rate } => {
                let verb = RateVerb::Bandwidth;
                let d = verb.names().name(dir);
                write!(f, "{} {d} {}", verb.command(), RateWord(rate))
            }
            Request::SetRate { dir, rate } => {
                let verb = RateVerb::Rate;
                let d = verb.names().name(dir);
                write!(f, "{} {d} {}", verb.command(), RateWord(rate))
            }
        }
    }
}

/// One answer of the bridge.
#[derive(Clone, Debug, PartialEq)]
pub enum Response {
    /// A rate change carried out: `DIR bandwidth|rate RATE` (RATE as tc prints it, which
    /// rounds down to three significant figures above 1 Mbit/s, or `unlimited`).
    RateSet {
        /// The direction changed.
        dir: Direction,
        /// How the bridge names it.
        names: DirNames,
        /// Which command was answered.
        verb: RateVerb,
        /// The rate in force; `None` = unlimited.
        rate: Option<Rate>,
    },
    /// The answer to `stats`: tc-style text, written and read as it is.
    StatsText(String),
    /// The answer to `stats --json`: a JSON array with one object per direction, written and
    /// read as it is (read CAKE's counters from it with [`parse_stats_counters`]).
    StatsJson(String),
    /// The answer to `passive`.
    Passive(ReadingWire),
    /// A failure: `error: MESSAGE`.
    Error(String),
}

/// Why an answer could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ResponseError {
    /// The bridge answered `error: MESSAGE` (the message).
    Refused(String),
    /// The answer is not what the request gets.
    Malformed {
        /// What the answer should have been.
        expected: &'static str,
        /// What was wrong, where a decoder says more.
        detail: String,
        /// The answer (its first line, up to 80 characters).
        answer: String,
    },
}

impl ResponseError {
    fn malformed(expected: &'static str, detail: impl fmt::Display, answer: &str) -> Self {
        let first = answer.lines().next().unwrap_or("");
        ResponseError::Malformed {
            expected,
            detail: detail.to_string(),
            answer: first.chars().take(80).collect(),
        }
    }
}

impl fmt::Display for ResponseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResponseError::Refused(m) => write!(f, "bridge: error: {m}"),
            ResponseError::Malformed {
                expected,
                detail,
                answer,
            } => {
                write!(f, "bridge answer {answer:?} is not {expected}")?;
                if !detail.is_empty() {
                    write!(f, ": {detail}")?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for ResponseError {}

/// The prefix of a failure's answer.
const ERROR_PREFIX: &str = "error:";

impl Response {
    /// The answer as the bridge writes it (ending in a newline, except statistics text, which
    /// is written as it is).
    pub fn format(&self) -> String {
        match self {
            Response::RateSet {
                dir,
                names,
                verb,
                rate,
            } => {
                let r = rate.map_or("unlimited".to_string(), |r| {
                    tc_units::format_rate(r.bytes_per_s())
                });
                format!("{} {} {r}\n", names.name(*dir), verb.word())
            }
            Response::StatsText(t) | Response::StatsJson(t) => t.clone(),
            Response::Passive(w) => match serde_json::to_string(w) {
                Ok(mut s) => {
                    s.push('\n');
                    s
                }
                Err(e) => format!("{ERROR_PREFIX} passive: {e}\n"),
            },
            Response::Error(m) => format!("{ERROR_PREFIX} {m}\n"),
        }
    }

    /// Reads the answer `text` to `request`. An `error: ...` answer is [`Response::Error`]
    /// (use [`Response::parse_ok`] to have it as an error); anything else that is not what
    /// `request` gets is [`ResponseError::Malformed`].
    pub fn parse(request: &Request, text: &str) -> Result<Response, ResponseError> {
        if let Some(m) = refusal(text) {
            return Ok(Response::Error(m));
        }
        match *request {
            Request::Stats { json: false } => Ok(Response::StatsText(text.to_string())),
            Request::Stats { json: true } => {
                serde_json::from_str::<Vec<serde_json::Value>>(text)
                    .map_err(|e| ResponseError::malformed("a JSON array of directions", e, text))?;
                Ok(Response::StatsJson(text.to_string()))
            }
            Request::Passive => serde_json::from_str::<ReadingWire>(text.trim())
                .map(Response::Passive)
                .map_err(|e| ResponseError::malformed("a passive reading", e, text)),
            Request::SetBandwidth { .. } | Request::SetRate { .. } => {
                const EXPECTED: &str = "DIR bandwidth|rate RATE";
                let bad = |detail: &str| ResponseError::malformed(EXPECTED, detail, text);
                let [d, v, r] = text.split_whitespace().collect::<Vec<_>>()[..] else {
                    return Err(bad("three words expected"));
                };
                let (names, dir) = DirNames::parse(d).ok_or_else(|| bad("unknown direction"))?;
                let verb = match v {
                    "bandwidth" => RateVerb::Bandwidth,
                    "rate" => RateVerb::Rate,
                    _ => return Err(bad("unknown verb")),
                };
                let rate = match r {
                    "unlimited" => None,
                    r => Some(Rate::from_bytes_per_s(
                        tc_units::parse_rate(r)
                            .map_err(|e| ResponseError::malformed(EXPECTED, e, text))?,
                    )),
                };
                Ok(Response::RateSet {
                    dir,
                    names,
                    verb,
                    rate,
                })
            }
        }
    }

    /// [`Response::parse`], with an `error: ...` answer as [`ResponseError::Refused`].
    pub fn parse_ok(request: &Request, text: &str) -> Result<Response, ResponseError> {
        match Response::parse(request, text)? {
            Response::Error(m) => Err(ResponseError::Refused(m)),
            r => Ok(r),
        }
    }
}

/// The message of an `error: MESSAGE` answer (any request's), or `None` for any other answer.
/// Cheaper than [`Response::parse`] where only failure matters.
pub fn refusal(text: &str) -> Option<String> {
    text.trim_start()
        .strip_prefix(ERROR_PREFIX)
        .map(|m| m.trim().to_string())
}

/// The per-direction objects of a `stats --json` answer: a JSON array whose objects name their
/// direction in `purple.direction`, in either spelling ([`DirNames`]); a direction no object
/// names is `None`, objects naming none are skipped. What each holds is tc's JSON for its
/// stage (e.g. `options.bandwidth`, bytes per second, for CAKE) plus the bridge's `purple`
/// part. Errors: an `error: ...` answer, not JSON, not an array.
pub fn parse_stats_directions(
    text: &str,
) -> Result<PerDir<Option<serde_json::Value>>, ResponseError> {
    let Response::StatsJson(t) = Response::parse_ok(&Request::Stats { json: true }, text)? else {
        return Err(ResponseError::malformed(
            "a JSON array of directions",
            "",
            text,
        ));
    };
    let arr: Vec<serde_json::Value> = serde_json::from_str(&t)
        .map_err(|e| ResponseError::malformed("a JSON array of directions", e, text))?;
    let mut out = PerDir::both(None);
    for o in arr {
        if let Some((_, dir)) = o["purple"]["direction"].as_str().and_then(DirNames::parse) {
            out[dir] = Some(o);
        }
    }
    Ok(out)
}

/// Reads CAKE's counters from a `stats --json` answer ([`parse_stats_directions`]): a JSON array of per-direction objects,
/// each with a `purple.direction` naming its direction in either spelling ([`DirNames`]), and,
/// where the stage is a qdisc, tc's `"backlog"` (bytes) and `"drops"` (packets), for CAKE
/// `"tins"` each with `"ecn_mark"` (summed), and the bridge's `purple.tx_wire_bytes` (sent)
/// and `purple.rx_wire_bytes` (arrived). A direction whose object lacks `"backlog"` (a stage
/// that is no qdisc) is `None`: unknown, not an empty queue. Errors: an `error: ...` answer,
/// not JSON, not an array.
pub fn parse_stats_counters(text: &str) -> Result<PerDir<Option<CakeCounters>>, ResponseError> {
    let objects = parse_stats_directions(text)?;
    let mut out = PerDir::both(None);
    for dir in Direction::ALL {
        let Some(o) = &objects[dir] else {
            continue;
        };
        let Some(backlog) = o["backlog"].as_u64() else {
            continue;
        };
        let ecn = o["tins"]
            .as_array()
            .map_or(0, |t| t.iter().filter_map(|x| x["ecn_mark"].as_u64()).sum());
        out[dir] = Some(CakeCounters {
            backlog_bytes: backlog,
            drops: o["drops"].as_u64().unwrap_or(0),
            ecn_marks: ecn,
            sent_bytes: o["purple"]["tx_wire_bytes"].as_u64(),
            arrived_bytes: o["purple"]["rx_wire_bytes"].as_u64(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
