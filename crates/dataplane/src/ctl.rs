//! The control protocol: one command line per connection to the bridge's Unix socket, answered
//! with text and then end-of-stream. An answer starting with `error: ` is a failure.
//!
//! Commands: `stats`, `stats --json`, `set-bandwidth egress|ingress RATE` (tc rate syntax, or
//! `unlimited`), `set-rate up|down RATE` (the link emulator's spelling; `up` = egress,
//! `down` = ingress), and `passive` (a bridge run with `--passive`: the passive delay
//! estimate since the previous `passive`, one JSON object,
//! `controller::passive::ReadingWire`; each answer starts a new interval, so only the
//! controlling daemon should ask).

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Which direction of the bridge.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// From the first interface (LAN) out of the second (WAN).
    Egress,
    /// From the second interface (WAN) out of the first (LAN).
    Ingress,
}

impl Direction {
    /// `egress` or `ingress`.
    pub fn name(self) -> &'static str {
        match self {
            Direction::Egress => "egress",
            Direction::Ingress => "ingress",
        }
    }
}

/// A parsed control command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Command {
    /// Print statistics (`json`: tc's JSON instead of text).
    Stats {
        /// JSON output.
        json: bool,
    },
    /// Change one direction's shaped rate (bytes/s; `None` = unlimited).
    SetBandwidth {
        /// The direction.
        dir: Direction,
        /// The new rate in bytes per second.
        rate: Option<u64>,
    },
    /// `set-rate up|down RATE`: the same change, as the link emulator spells it (answered
    /// `up rate RATE`).
    SetRate {
        /// The direction (`up` = egress).
        dir: Direction,
        /// The new rate in bytes per second.
        rate: Option<u64>,
    },
    /// `passive`: a reading of the passive delay estimator (and a new interval).
    Passive,
}

/// `unlimited`, or a rate in tc syntax within the shapers' accepted range
/// ([`qdisc::tc_units::parse_shaper_rate`]).
fn parse_rate_word(r: &str) -> Result<Option<u64>, String> {
    if r == "unlimited" {
        Ok(None)
    } else {
        qdisc::tc_units::parse_shaper_rate(r)
            .map(Some)
            .map_err(|e| match e {
                qdisc::tc_units::UnitError::RateOutOfRange(_) => {
                    format!("bad rate {r:?}: {e} (or unlimited)")
                }
                _ => format!(
                    "bad rate {r:?}: {e}: expected {} or unlimited",
                    qdisc::tc_units::RATE_FORMAT
                ),
            })
    }
}

impl Command {
    /// Parses one command line. Errors are human-readable.
    pub fn parse(line: &str) -> Result<Command, String> {
        let w: Vec<&str> = line.split_whitespace().collect();
        match w.as_slice() {
            ["stats"] => Ok(Command::Stats { json: false }),
            ["stats", "--json"] | ["stats", "-j"] => Ok(Command::Stats { json: true }),
            ["passive"] => Ok(Command::Passive),
            ["set-bandwidth", d, r] => {
                let dir = match *d {
                    "egress" => Direction::Egress,
                    "ingress" => Direction::Ingress,
                    _ => return Err(format!("bad direction {d:?} (egress or ingress)")),
                };
                Ok(Command::SetBandwidth {
                    dir,
                    rate: parse_rate_word(r)?,
                })
            }
            ["set-rate", d, r] => {
                let dir = match *d {
                    "up" | "egress" => Direction::Egress,
                    "down" | "ingress" => Direction::Ingress,
                    _ => return Err(format!("bad direction {d:?} (up or down)")),
                };
                Ok(Command::SetRate {
                    dir,
                    rate: parse_rate_word(r)?,
                })
            }
            _ => Err(format!(
                "unknown command {line:?} (stats [--json] | set-bandwidth egress|ingress RATE | set-rate up|down RATE | passive)"
            )),
        }
    }
}

/// The socket path for bridge `name`: `/run/purple/<name>.sock`.
pub fn default_path(name: &str) -> PathBuf {
    Path::new("/run/purple").join(format!("{name}.sock"))
}

/// Sends `command` to the bridge listening at `path` and returns its answer (`Err` for a
/// connection failure or an `error: ` answer).
pub fn request(path: &Path, command: &str) -> Result<String, String> {
    let mut s = UnixStream::connect(path)
        .map_err(|e| format!("cannot connect to {}: {e}", path.display()))?;
    let io = |e: std::io::Error| format!("{}: {e}", path.display());
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(io)?;
    s.write_all(command.trim_end().as_bytes()).map_err(io)?;
    s.write_all(b"\n").map_err(io)?;
    let mut out = String::new();
    s.read_to_string(&mut out).map_err(io)?;
    match out.strip_prefix("error: ") {
        Some(e) => Err(e.trim_end().to_string()),
        None => Ok(out),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn commands_parse_and_rates_are_bytes_per_second() {
        assert_eq!(
            Command::parse("stats\n"),
            Ok(Command::Stats { json: false })
        );
        assert_eq!(
            Command::parse("stats --json"),
            Ok(Command::Stats { json: true })
        );
        assert_eq!(
            Command::parse("set-bandwidth egress 30Mbit"),
            Ok(Command::SetBandwidth {
                dir: Direction::Egress,
                rate: Some(3_750_000)
            })
        );
        assert_eq!(
            Command::parse("set-bandwidth ingress unlimited"),
            Ok(Command::SetBandwidth {
                dir: Direction::Ingress,
                rate: None
            })
        );
        assert!(Command::parse("set-bandwidth sideways 1Mbit").is_err());
        assert!(Command::parse("set-bandwidth egress fast").is_err());
        assert!(Command::parse("reboot").is_err());
        assert_eq!(
            Command::parse("set-rate down 10Mbit"),
            Ok(Command::SetRate {
                dir: Direction::Ingress,
                rate: Some(1_250_000)
            })
        );
        assert!(Command::parse("set-rate left 1Mbit").is_err());
    }

    /// Issue 15, item 5: `1bit` used to parse as 0 B/s, which the shaper reads as unlimited;
    /// a rate beyond 2^61 B/s printed as 0bit. Both are refused, naming the accepted range.
    #[test]
    fn rates_that_would_turn_shaping_off_or_overflow_are_refused() {
        for r in ["1bit", "0.0001kbit", "0", "18446744073709551615bit"] {
            for cmd in [
                format!("set-bandwidth egress {r}"),
                format!("set-rate down {r}"),
            ] {
                let e = Command::parse(&cmd).unwrap_err();
                assert!(e.contains("accepted range 512bit to 10Tbit"), "{cmd}: {e}");
            }
        }
        let e = Command::parse("set-bandwidth egress fast").unwrap_err();
        assert!(e.contains("unlimited") && e.contains("20Mbit"), "{e}");
    }
}
