//! `purple control --record FILE`: every input the daemon hands its agent (each `handle_*` call
//! with its time and bytes, and what the agent was built from), as JSON lines, and
//! [`replay`], which feeds them to a fresh agent. Because the agent is deterministic and the
//! daemon decides nothing itself, the replay's events equal the daemon's decision log line for
//! line: the proof that the shell only moves bytes and time (`tests/replay.rs`).

use crate::config::DaemonConfig;
use crate::log::Record;
use controller::agent::{Agent, CakeCounters, SetRate, SocketKind};
use controller::passive::PassiveReading;
use controller::wire::WallAnchor;
use controller::{Direction, Law, PerDir, Rate};
use qdisc::Instant;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::io::{self, BufRead, Write};
use std::net::SocketAddr;

/// CAKE's counters of one direction, as recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CakeRec {
    /// Backlog, bytes.
    pub backlog_bytes: u64,
    /// Drops.
    pub drops: u64,
    /// ECN marks.
    pub ecn_marks: u64,
    /// Shaper's sent bytes.
    pub sent_bytes: Option<u64>,
    /// Bytes that arrived at the shaper (absent in recordings made before stop 32).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arrived_bytes: Option<u64>,
}

impl From<CakeCounters> for CakeRec {
    fn from(c: CakeCounters) -> Self {
        CakeRec {
            backlog_bytes: c.backlog_bytes,
            drops: c.drops,
            ecn_marks: c.ecn_marks,
            sent_bytes: c.sent_bytes,
            arrived_bytes: c.arrived_bytes,
        }
    }
}

impl From<CakeRec> for CakeCounters {
    fn from(c: CakeRec) -> Self {
        CakeCounters {
            backlog_bytes: c.backlog_bytes,
            drops: c.drops,
            ecn_marks: c.ecn_marks,
            sent_bytes: c.sent_bytes,
            arrived_bytes: c.arrived_bytes,
        }
    }
}

/// One input to the agent. Times are the daemon's monotonic nanoseconds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "input", rename_all = "kebab-case")]
pub enum Input {
    /// The agent was built (first line; again after a reload).
    Start {
        /// When.
        t_ns: u64,
        /// The configuration it was built from.
        config: Box<DaemonConfig>,
        /// Whether ICMP went through a raw socket.
        icmp_raw: bool,
        /// The ICMP identifier.
        ident: u16,
        /// The wall-clock anchor: monotonic ns ...
        anchor_at_ns: u64,
        /// ... and Unix µs there.
        wall_us: u64,
        /// The actuator's name.
        actuator: String,
    },
    /// `handle_datagram`.
    Datagram {
        /// Arrival.
        t_ns: u64,
        /// Source.
        from: SocketAddr,
        /// Socket kind.
        socket: SocketKind,
        /// The bytes, hex.
        hex: String,
    },
    /// `handle_send_failed`.
    SendFailed {
        /// When.
        t_ns: u64,
        /// The probe's token.
        token: u32,
    },
    /// `handle_counter`.
    Counter {
        /// When.
        t_ns: u64,
        /// Direction.
        dir: Direction,
        /// The reading (`null`: failed).
        bytes: Option<u64>,
    },
    /// `handle_delivered`.
    Delivered {
        /// When.
        t_ns: u64,
        /// Direction.
        dir: Direction,
        /// The reading (`null`: failed).
        bytes: Option<u64>,
    },
    /// `handle_cake_stats`.
    CakeStats {
        /// When.
        t_ns: u64,
        /// Download, upload (when the read worked).
        ok: Option<[Option<CakeRec>; 2]>,
        /// The error (when it failed).
        error: Option<String>,
    },
    /// `handle_timeout`.
    Timeout {
        /// When.
        t_ns: u64,
    },
    /// `handle_rate_applied`.
    RateApplied {
        /// When.
        t_ns: u64,
        /// Direction.
        dir: Direction,
        /// Bytes per second.
        bps: u64,
        /// A shutdown's safe rate.
        safe: bool,
        /// The actuator's error.
        error: Option<String>,
    },
    /// `handle_shutdown`.
    Shutdown {
        /// When.
        t_ns: u64,
    },
    /// `handle_passive` (the fields the agent reads).
    Passive {
        /// When.
        t_ns: u64,
        /// Queueing delay estimate, ns: download, upload.
        queue_ns: [Option<u64>; 2],
        /// Connections behind each.
        flows: [u32; 2],
    },
}

impl Input {
    /// The record of a passive reading handed to the agent at `t_ns`.
    pub fn passive(t_ns: u64, r: &PassiveReading) -> Input {
        let q = |d: Direction| r.queue[d].map(|q| q.as_nanos());
        Input::Passive {
            t_ns,
            queue_ns: [q(Direction::Down), q(Direction::Up)],
            flows: [r.flows.down, r.flows.up],
        }
    }
}

/// Lower-case hex of `b`.
pub fn hex(b: &[u8]) -> String {
    const H: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(b.len() * 2);
    for x in b {
        s.push(char::from(H[usize::from(x >> 4)]));
        s.push(char::from(H[usize::from(x & 15)]));
    }
    s
}

/// The bytes of hex text `s` (`None` if it is not hex).
pub fn unhex(s: &str) -> Option<Vec<u8>> {
    let d = |c: u8| (c as char).to_digit(16).map(|v| v as u8);
    let b = s.as_bytes();
    if b.len() & 1 != 0 {
        return None;
    }
    b.chunks(2)
        .map(|p| Some(d(p[0])? << 4 | d(p[1])?))
        .collect()
}

/// Writes inputs as JSON lines (buffered; flushed by [`Recorder::flush`] and on drop).
#[derive(Debug)]
pub struct Recorder {
    out: io::BufWriter<std::fs::File>,
}

impl Recorder {
    /// Creates (truncates) `path`.
    pub fn create(path: &std::path::Path) -> io::Result<Self> {
        Ok(Recorder {
            out: io::BufWriter::new(std::fs::File::create(path)?),
        })
    }

    /// Appends one input.
    pub fn write(&mut self, i: &Input) -> io::Result<()> {
        serde_json::to_writer(&mut self.out, i)?;
        self.out.write_all(b"\n")
    }

    /// Flushes buffered lines to the file.
    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

/// Why a recording cannot be replayed.
#[derive(Debug)]
pub enum ReplayError {
    /// Reading the file failed.
    Io(io::Error),
    /// Line `line` is not an input.
    Parse {
        /// 1-based.
        line: usize,
        /// What is wrong.
        error: String,
    },
    /// The recording does not start with a `start` input, or its configuration is rejected.
    Start(String),
    /// The fresh agent asked for another rate than the daemon applied: the runs diverged.
    Diverged {
        /// 1-based line.
        line: usize,
        /// What the replayed agent asked for.
        replayed: Option<SetRate>,
    },
}

impl fmt::Display for ReplayError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReplayError::Io(e) => write!(f, "reading the recording: {e}"),
            ReplayError::Parse { line, error } => write!(f, "line {line}: {error}"),
            ReplayError::Start(e) => write!(f, "start: {e}"),
            ReplayError::Diverged { line, replayed } => write!(
                f,
                "line {line}: the replayed agent asked for {replayed:?}, not the recorded rate"
            ),
        }
    }
}
impl std::error::Error for ReplayError {}

/// Feeds the inputs recorded in `text` to a fresh agent per `start` input, exactly as the
/// daemon did, and returns the log records of the agent's events (every `start` begins a new
/// agent, as a reload does).
pub fn replay(text: impl BufRead) -> Result<Vec<Record>, ReplayError> {
    let mut agent: Option<(Agent<Box<dyn Law + Send>>, String)> = None;
    let mut out = Vec::new();
    let ns = Instant::from_nanos;
    for (k, line) in text.lines().enumerate() {
        let line = line.map_err(ReplayError::Io)?;
        if line.trim().is_empty() {
            continue;
        }
        let input: Input = serde_json::from_str(&line).map_err(|e| ReplayError::Parse {
            line: k + 1,
            error: e.to_string(),
        })?;
        if let Input::Start {
            t_ns,
            config,
            icmp_raw,
            ident,
            anchor_at_ns,
            wall_us,
            actuator,
        } = &input
        {
            let anchor = WallAnchor {
                at: ns(*anchor_at_ns),
                wall_us: *wall_us,
            };
            let law =
                crate::run::make_law(config).map_err(|e| ReplayError::Start(e.to_string()))?;
            let a = Agent::new(
                config.agent_config(*icmp_raw, *ident, anchor),
                law,
                ns(*t_ns),
            )
            .map_err(|e| ReplayError::Start(e.to_string()))?;
            agent = Some((a, actuator.clone()));
            continue;
        }
        let Some((a, actuator)) = agent.as_mut() else {
            return Err(ReplayError::Start("no start input first".to_string()));
        };
        match input {
            Input::Start { .. } => {}
            Input::Datagram {
                t_ns,
                from,
                socket,
                hex,
            } => {
                let b = unhex(&hex).ok_or_else(|| ReplayError::Parse {
                    line: k + 1,
                    error: "bytes are not hex".to_string(),
                })?;
                a.handle_datagram(ns(t_ns), from, socket, &b);
            }
            Input::SendFailed { t_ns, token } => a.handle_send_failed(ns(t_ns), token),
            Input::Counter { t_ns, dir, bytes } => a.handle_counter(ns(t_ns), dir, bytes),
            Input::Delivered { t_ns, dir, bytes } => a.handle_delivered(ns(t_ns), dir, bytes),
            Input::CakeStats { t_ns, ok, error } => {
                let read = match (ok, error) {
                    (Some([d, u]), _) => Ok(PerDir::new(d.map(Into::into), u.map(Into::into))),
                    (None, e) => Err(e.unwrap_or_default()),
                };
                a.handle_cake_stats(ns(t_ns), read);
            }
            Input::Timeout { t_ns } => a.handle_timeout(ns(t_ns)),
            Input::Shutdown { t_ns } => a.handle_shutdown(ns(t_ns)),
            Input::Passive {
                t_ns,
                queue_ns,
                flows,
            } => {
                let q = |v: Option<u64>| v.map(qdisc::Duration::from_nanos);
                let r = PassiveReading {
                    queue: PerDir::new(q(queue_ns[0]), q(queue_ns[1])),
                    flows: PerDir::new(flows[0], flows[1]),
                    ..PassiveReading::default()
                };
                a.handle_passive(ns(t_ns), &r);
            }
            Input::RateApplied {
                t_ns,
                dir,
                bps,
                safe,
                error,
            } => {
                let want = SetRate {
                    dir,
                    rate: Rate::from_bytes_per_s(bps),
                    safe,
                };
                let got = a.poll_rate();
                if got != Some(want) {
                    return Err(ReplayError::Diverged {
                        line: k + 1,
                        replayed: got,
                    });
                }
                a.handle_rate_applied(ns(t_ns), want, error.map_or(Ok(()), Err));
            }
        }
        while a.poll_transmit().is_some() {}
        while let Some((t, e)) = a.poll_event() {
            out.push(Record::of_event(t.as_secs_f64(), &e, actuator));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips() {
        let b = [0u8, 1, 0xab, 0xff, 0x10];
        assert_eq!(hex(&b), "0001abff10");
        assert_eq!(unhex(&hex(&b)).unwrap(), b);
        assert_eq!(unhex("abc"), None);
        assert_eq!(unhex("zz"), None);
    }

    #[test]
    fn a_delivered_reading_is_one_line_that_reads_back() {
        for bytes in [Some(123_456_789_u64), None] {
            let i = Input::Delivered {
                t_ns: 50_000_000,
                dir: Direction::Down,
                bytes,
            };
            let line = serde_json::to_string(&i).unwrap();
            assert!(line.contains("\"input\":\"delivered\""), "{line}");
            assert_eq!(serde_json::from_str::<Input>(&line).unwrap(), i);
        }
    }

    #[test]
    fn cake_statistics_carry_the_arrivals_and_older_lines_without_them_read_back() {
        let rec = |arrived_bytes| CakeRec {
            backlog_bytes: 3_000,
            drops: 2,
            ecn_marks: 1,
            sent_bytes: Some(625_000),
            arrived_bytes,
        };
        let i = Input::CakeStats {
            t_ns: 50_000_000,
            ok: Some([Some(rec(Some(750_000))), None]),
            error: None,
        };
        let line = serde_json::to_string(&i).unwrap();
        assert!(line.contains("\"arrived_bytes\":750000"), "{line}");
        assert_eq!(serde_json::from_str::<Input>(&line).unwrap(), i);
        assert_eq!(
            CakeCounters::from(rec(Some(750_000))).arrived_bytes,
            Some(750_000)
        );
        // A recording made before the field existed: no key, read as not reported.
        let old = line.replace(",\"arrived_bytes\":750000", "");
        assert!(!old.contains("arrived"), "{old}");
        let Input::CakeStats { ok, .. } = serde_json::from_str::<Input>(&old).unwrap() else {
            panic!("{old}")
        };
        assert_eq!(ok, Some([Some(rec(None)), None]));
    }
}
