//! Applying rates: Linux CAKE over netlink, `purple bridge` over its control socket, or a dry
//! run that only logs. Which rates to apply, and when, is the agent's business
//! (`controller::agent`, whose `Limiter` holds the actuator's limits); this module only carries
//! them out. Each actuator also reads back its shaper's own statistics
//! ([`Actuator::cake_stats`]: backlog, drops, ECN marks) for the agent.

use crate::config::{ActuatorKind, DaemonConfig};
use crate::netlink::{self, CakeNetlink};
use controller::ctl::{self, Request, Response, ResponseError};
use controller::passive::PassiveReading;
use controller::{Direction, PerDir, Rate};
use std::io::{self, BufRead, Write};

pub use controller::agent::CakeCounters;

/// Something that sets a shaper's rate.
pub trait Actuator: std::fmt::Debug {
    /// Sets `dir`'s rate to `rate`.
    fn set_rate(&mut self, dir: Direction, rate: Rate) -> io::Result<()>;
    /// Short name for logs.
    fn name(&self) -> &'static str;
    /// Reads each direction's CAKE counters now. A direction is `None` when this actuator has
    /// no shaper there to read (the dry run has none anywhere); `Err` when reading failed.
    fn cake_stats(&mut self) -> io::Result<PerDir<Option<CakeCounters>>> {
        Ok(PerDir::both(None))
    }
    /// A reading of the passive delay estimator where the shaper runs one inline (`purple
    /// bridge --passive`); `Ok(None)` for actuators without one.
    fn passive(&mut self) -> io::Result<Option<PassiveReading>> {
        Ok(None)
    }
}

/// Changes the rate of CAKE on each direction's device over rtnetlink.
#[derive(Debug)]
pub struct Netlink {
    nl: CakeNetlink,
    target: PerDir<(u32, u32)>,
}

impl Netlink {
    /// Resolves each direction's device and parent; opens the netlink socket.
    pub fn new(cfg: &DaemonConfig) -> io::Result<Self> {
        let t = |d: &crate::config::DirConfig| -> io::Result<(u32, u32)> {
            let idx = netlink::ifindex(d.iface())
                .map_err(|e| io::Error::new(e.kind(), format!("device {}: {e}", d.iface())))?;
            let parent = crate::config::parse_parent(&d.parent).unwrap_or(netlink::TC_H_ROOT);
            Ok((idx, parent))
        };
        Ok(Netlink {
            nl: CakeNetlink::open()?,
            target: PerDir::new(t(&cfg.download.0)?, t(&cfg.upload.0)?),
        })
    }
}

impl Actuator for Netlink {
    fn set_rate(&mut self, dir: Direction, rate: Rate) -> io::Result<()> {
        let (idx, parent) = self.target[dir];
        self.nl.set_rate(idx, parent, rate.bytes_per_s())
    }
    /// One `RTM_GETQDISC` per direction (see [`CakeNetlink::qdisc_stats`]); a failure in
    /// either direction is an error.
    fn cake_stats(&mut self) -> io::Result<PerDir<Option<CakeCounters>>> {
        let mut out = PerDir::both(None);
        for dir in Direction::ALL {
            let (idx, parent) = self.target[dir];
            let s = self.nl.qdisc_stats(idx, parent)?;
            out[dir] = Some(CakeCounters {
                backlog_bytes: u64::from(s.backlog_bytes),
                drops: u64::from(s.drops),
                ecn_marks: s.ecn_marks,
                // The qdisc's own sent bytes: the agent then measures this direction's
                // throughput from them and reads no interface counter for it.
                sent_bytes: s.sent_bytes,
                // Kernel CAKE reports no bytes arrived (its drops only as packets): a
                // download's delivery comes from the WAN device's counter.
                arrived_bytes: None,
            });
        }
        Ok(out)
    }
    fn name(&self) -> &'static str {
        "netlink"
    }
}

/// Speaks `purple bridge`'s control protocol ([`controller::ctl`]): one connection per change
/// carrying one [`Request::SetBandwidth`] (`set-bandwidth egress|ingress RATE\n`, RATE in
/// bit/s followed by `bit`), answered by one line (e.g. `ingress bandwidth 20Mbit`; a failure
/// is `error: ...`) and end-of-stream. Upload is the bridge's egress, download its ingress.
///
/// Statistics: one connection carrying `stats --json\n`, answered by a JSON array with one
/// object per direction ([`ctl::parse_stats_counters`]) and end-of-stream.
#[derive(Debug)]
pub struct Bridge {
    path: std::path::PathBuf,
    conn: Option<io::BufReader<std::os::unix::net::UnixStream>>,
}

impl Bridge {
    /// A client for the control socket at `path` (connected lazily).
    pub fn new(path: impl Into<std::path::PathBuf>) -> Self {
        Bridge {
            path: path.into(),
            conn: None,
        }
    }

    /// The request for a change.
    pub fn command(dir: Direction, rate: Rate) -> Request {
        Request::SetBandwidth {
            dir,
            rate: Some(rate),
        }
    }

    fn try_once(&mut self, request: &Request) -> io::Result<()> {
        if self.conn.is_none() {
            let s = std::os::unix::net::UnixStream::connect(&self.path)?;
            s.set_read_timeout(Some(std::time::Duration::from_secs(2)))?;
            self.conn = Some(io::BufReader::new(s));
        }
        let Some(c) = self.conn.as_mut() else {
            return Err(io::Error::new(io::ErrorKind::NotConnected, "no bridge"));
        };
        c.get_mut().write_all(request.line().as_bytes())?;
        let mut reply = String::new();
        let n = c.read_line(&mut reply);
        // The bridge answers one command per connection and then closes it.
        self.conn = None;
        if n? == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "bridge closed",
            ));
        }
        Response::parse_ok(request, &reply)
            .map(drop)
            .map_err(answer_error)
    }
}

/// How long a statistics read may wait for the bridge (the event loop blocks meanwhile).
const BRIDGE_STATS_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(250);

impl Bridge {
    /// Sends one request on a fresh connection and reads the answer to end-of-stream.
    fn ask(&self, request: &Request) -> io::Result<String> {
        let mut s = std::os::unix::net::UnixStream::connect(&self.path)?;
        s.set_read_timeout(Some(BRIDGE_STATS_TIMEOUT))?;
        s.set_write_timeout(Some(BRIDGE_STATS_TIMEOUT))?;
        s.write_all(request.line().as_bytes())?;
        let mut text = String::new();
        io::Read::read_to_string(&mut s, &mut text)?;
        Ok(text)
    }
}

/// An answer the protocol refuses to read as an I/O error: the bridge's own `error: ...` as
/// [`io::ErrorKind::Other`] (so that [`Bridge`] does not retry it), a malformed one as
/// [`io::ErrorKind::InvalidData`].
fn answer_error(e: ResponseError) -> io::Error {
    match e {
        ResponseError::Refused(_) => io::Error::other(e),
        ResponseError::Malformed { .. } => io::Error::new(io::ErrorKind::InvalidData, e),
    }
}

/// Parses `purple bridge`'s answer to `passive`: one JSON object
/// ([`controller::passive::ReadingWire`]). Errors: an `error: ...` answer (a bridge run
/// without `--passive`), or not that object.
pub fn parse_bridge_passive(text: &str) -> io::Result<PassiveReading> {
    match Response::parse_ok(&Request::Passive, text).map_err(answer_error)? {
        Response::Passive(w) => Ok(PassiveReading::from(&w)),
        other => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("bridge passive: not a reading: {other:?}"),
        )),
    }
}

/// Parses `purple bridge`'s `stats --json` answer ([`ctl::parse_stats_counters`]).
pub fn parse_bridge_stats(text: &str) -> io::Result<PerDir<Option<CakeCounters>>> {
    ctl::parse_stats_counters(text).map_err(answer_error)
}

impl Actuator for Bridge {
    fn cake_stats(&mut self) -> io::Result<PerDir<Option<CakeCounters>>> {
        parse_bridge_stats(&self.ask(&Request::Stats { json: true })?)
    }
    fn passive(&mut self) -> io::Result<Option<PassiveReading>> {
        parse_bridge_passive(&self.ask(&Request::Passive)?).map(Some)
    }
    fn set_rate(&mut self, dir: Direction, rate: Rate) -> io::Result<()> {
        let request = Self::command(dir, rate);
        match self.try_once(&request) {
            Err(e) if e.kind() != io::ErrorKind::Other => {
                self.conn = None;
                self.try_once(&request)
            }
            r => r,
        }
    }
    fn name(&self) -> &'static str {
        "bridge"
    }
}

/// Changes nothing; the decision log shows what would have been set.
#[derive(Debug, Default)]
pub struct DryRun {
    /// Every call, in order (for tests and `purple bench control`).
    pub calls: u64,
}

impl Actuator for DryRun {
    fn set_rate(&mut self, _dir: Direction, _rate: Rate) -> io::Result<()> {
        self.calls += 1;
        Ok(())
    }
    fn name(&self) -> &'static str {
        "dry-run"
    }
}

/// The configured actuator (`dry_run` overrides the file).
pub fn from_config(cfg: &DaemonConfig, dry_run: bool) -> io::Result<Box<dyn Actuator>> {
    Ok(match (dry_run, cfg.actuator.kind) {
        (true, _) | (_, ActuatorKind::DryRun) => Box::new(DryRun::default()),
        (_, ActuatorKind::Netlink) => Box::new(Netlink::new(cfg)?),
        (_, ActuatorKind::Bridge) => Box::new(Bridge::new(&cfg.actuator.bridge_socket)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use controller::passive::ReadingWire;

    #[test]
    fn bridge_commands_use_bits_per_second() {
        assert_eq!(
            Bridge::command(Direction::Up, Rate::from_bytes_per_s(1_250_000)).line(),
            "set-bandwidth egress 10000000bit\n"
        );
        assert!(Bridge::command(Direction::Down, Rate::from_bytes_per_s(1))
            .line()
            .starts_with("set-bandwidth ingress 8bit"));
    }

    #[test]
    fn bridge_client_speaks_the_line_protocol() {
        let dir = std::env::temp_dir().join(format!("purple-bridge-{}", std::process::id()));
        let _ = std::fs::remove_file(&dir);
        let l = std::os::unix::net::UnixListener::bind(&dir).unwrap();
        // Like `purple bridge`: one command per connection, one answer, then end-of-stream.
        let h = std::thread::spawn(move || {
            let mut lines = Vec::new();
            for reply in ["ingress bandwidth 20Mbit\n", "error: nope\n"] {
                let (s, _) = l.accept().unwrap();
                let mut r = io::BufReader::new(s);
                let mut line = String::new();
                r.read_line(&mut line).unwrap();
                lines.push(line);
                r.get_mut().write_all(reply.as_bytes()).unwrap();
            }
            lines
        });
        let mut b = Bridge::new(&dir);
        b.set_rate(Direction::Down, Rate::from_bytes_per_s(2_500_000))
            .unwrap();
        assert!(b
            .set_rate(Direction::Up, Rate::from_bytes_per_s(1))
            .is_err());
        let lines = h.join().unwrap();
        assert_eq!(lines[0], "set-bandwidth ingress 20000000bit\n");
        let _ = std::fs::remove_file(&dir);
    }

    /// What `purple bridge --egress "cake ..." --ingress "cake ..."` answers to `stats --json`
    /// (abridged: tc's keys that matter plus the `purple` object), egress first.
    const BRIDGE_STATS: &str = r#"[{"kind":"cake","handle":"0:","root":true,"bytes":123,"packets":4,"drops":7,"overlimits":0,"requeues":0,"backlog":4542,"qlen":3,"tins":[{"sent_bytes":1,"drops":5,"ecn_mark":2},{"sent_bytes":0,"drops":2,"ecn_mark":9}],"dev":"wan0","purple":{"direction":"egress","rx_packets":4}},{"kind":"cake","handle":"0:","root":true,"drops":0,"backlog":0,"qlen":0,"tins":[{"ecn_mark":0}],"dev":"lan0","purple":{"direction":"ingress","tx_wire_bytes":9000}}]
"#;

    /// The protocol's reading of statistics is `controller::ctl`'s (tested there); here, how
    /// its failures reach the agent.
    #[test]
    fn bridge_stats_errors_are_io_errors_of_their_kind() {
        let s = parse_bridge_stats(BRIDGE_STATS).unwrap();
        assert_eq!(
            (s.up.map(|c| c.ecn_marks), s.down.map(|c| c.sent_bytes)),
            (Some(11), Some(Some(9000)))
        );
        let e = parse_bridge_stats("error: unknown command").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::Other);
        assert!(
            e.to_string().contains("bridge: error: unknown command"),
            "{e}"
        );
        for bad in ["{\"backlog\": 1}", "egress bandwidth 20Mbit"] {
            let e = parse_bridge_stats(bad).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{bad}: {e}");
        }
    }

    #[test]
    fn bridge_client_reads_stats_over_one_connection_per_command() {
        let dir = std::env::temp_dir().join(format!("purple-bridge-st-{}", std::process::id()));
        let _ = std::fs::remove_file(&dir);
        let l = std::os::unix::net::UnixListener::bind(&dir).unwrap();
        let h = std::thread::spawn(move || {
            let mut lines = Vec::new();
            for _ in 0..2 {
                let (s, _) = l.accept().unwrap();
                let mut r = io::BufReader::new(s);
                let mut line = String::new();
                r.read_line(&mut line).unwrap();
                let reply = if lines.is_empty() {
                    BRIDGE_STATS
                } else {
                    "error: no\n"
                };
                lines.push(line);
                r.get_mut().write_all(reply.as_bytes()).unwrap();
                // End-of-stream: the connection drops here.
            }
            lines
        });
        let mut b = Bridge::new(&dir);
        let s = b.cake_stats().unwrap();
        assert_eq!(s.up.map(|c| c.backlog_bytes), Some(4542));
        assert!(b.cake_stats().is_err(), "an error answer is an error");
        let lines = h.join().unwrap();
        assert_eq!(lines, ["stats --json\n", "stats --json\n"]);
        let _ = std::fs::remove_file(&dir);
        // Nobody listening: an error, not a hang.
        assert!(Bridge::new(&dir).cake_stats().is_err());
    }

    #[test]
    fn bridge_passive_answers_parse_and_errors_name_the_bridge() {
        let w = ReadingWire {
            down_ms: Some(12.5),
            up_ms: None,
            flows_down: 3,
            one_way_down: true,
            tracked: 7,
            ..ReadingWire::default()
        };
        let text = serde_json::to_string(&w).unwrap() + "\n";
        let r = parse_bridge_passive(&text).unwrap();
        assert_eq!(r.queue.down, Some(qdisc::Duration::from_micros(12_500)));
        assert_eq!((r.queue.up, r.flows.down, r.tracked), (None, 3, 7));
        let e = parse_bridge_passive("error: the passive delay estimate is off\n").unwrap_err();
        assert!(e.to_string().contains("bridge: error"), "{e}");
        assert!(parse_bridge_passive("[1,2]").is_err());
    }

    #[test]
    fn dry_run_has_no_stats_to_read() {
        let s = DryRun::default().cake_stats().unwrap();
        assert_eq!((s.up, s.down), (None, None));
    }
}
