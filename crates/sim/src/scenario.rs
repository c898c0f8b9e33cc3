//! Scenarios as TOML: a topology, applications and a duration, built into a [`Sim`].
//!
//! The file format (every key, with an annotated example) is documented in
//! `docs/scenarios.md` at the repository root, with `purple sim`'s outputs.
//!
//! Routes are shortest paths ([`Sim::compute_routes`]). Relative trace paths are resolved
//! against the directory given to [`Scenario::build`].

use crate::app::{Ping, UdpSource};
use crate::flent::{self, FlentLabels, Role};
use crate::sim::{AppId, LinkConfig, LinkId, NodeId, Sim};
use crate::trace::{MahimahiTrace, RateSchedule};
use cake::AnyQdisc;
use qdisc::link::Capacity;
use qdisc::{Duration, Instant};
use serde::Deserialize;
use std::collections::HashMap;
use std::net::IpAddr;
use std::path::Path;

/// A parsed scenario file (see the module docs for the format).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Seed of every random decision.
    #[serde(default)]
    pub seed: u64,
    /// Simulated seconds.
    pub duration_s: f64,
    /// Time-series bin width in ms.
    #[serde(default = "default_bin_ms")]
    pub bin_ms: f64,
    /// Hosts.
    #[serde(default, rename = "node")]
    pub nodes: Vec<NodeSpec>,
    /// Links.
    #[serde(default, rename = "link")]
    pub links: Vec<LinkSpec>,
    /// Applications.
    #[serde(default, rename = "app")]
    pub apps: Vec<AppSpec>,
}

fn default_bin_ms() -> f64 {
    100.0
}
fn default_buffer_packets() -> u32 {
    1000
}
fn default_size() -> u32 {
    1500
}

/// A host.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeSpec {
    /// Unique name.
    pub name: String,
    /// Its addresses.
    #[serde(default)]
    pub addrs: Vec<IpAddr>,
}

/// A link (and optionally its reverse).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkSpec {
    /// Name in outputs (default `from->to (fwd)`; the reverse of a bidirectional link gets
    /// `NAME (rev)`).
    pub name: Option<String>,
    /// Sending node name.
    pub from: String,
    /// Receiving node name.
    pub to: String,
    /// Fixed rate in tc syntax (`10mbit`).
    pub rate: Option<String>,
    /// Mahimahi trace file.
    pub trace: Option<String>,
    /// Step/ramp schedule file.
    pub schedule: Option<String>,
    /// Propagation delay in ms.
    #[serde(default)]
    pub delay_ms: f64,
    /// Random loss probability.
    #[serde(default)]
    pub loss: f64,
    /// Droptail buffer packets (0 = unlimited).
    #[serde(default = "default_buffer_packets")]
    pub buffer_packets: u32,
    /// Droptail buffer bytes (0 = unlimited).
    #[serde(default)]
    pub buffer_bytes: u64,
    /// Egress qdisc in tc syntax ([`AnyQdisc::from_tc`]): `cake <tc args>`, `fq_codel`, `codel`,
    /// `pie`, `pfifo [N]`, `bfifo N`, `sfq ...`, `sfb ...`, `htb rate R [burst B] CHILD...`.
    pub qdisc: Option<String>,
    /// Also add the reverse link with the same settings.
    #[serde(default)]
    pub bidirectional: bool,
}

/// An application.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AppSpec {
    /// Name in outputs (default `kind@node:port`; a TCP app's receiver gets `NAME (acks)`,
    /// default `tcp-rx@node:port`).
    pub name: Option<String>,
    /// `greedy`, `cbr`, `voip`, `ping` or `tcp`.
    pub kind: String,
    /// Host name.
    pub node: String,
    /// Destination address.
    pub dst: IpAddr,
    /// Port (UDP source and destination port; echo id for ping).
    pub port: u16,
    /// Offered rate for greedy/cbr, tc syntax.
    pub rate: Option<String>,
    /// Frame bytes for greedy/cbr.
    #[serde(default = "default_size")]
    pub size: u32,
    /// Ping interval in ms.
    pub interval_ms: Option<f64>,
    /// Start time in seconds.
    #[serde(default)]
    pub start_s: f64,
    /// Stop time in seconds.
    pub stop_s: Option<f64>,
    /// TCP congestion control: `cubic` (default), `newreno`, `ledbat` or `prague` (scalable, L4S).
    pub cc: Option<String>,
    /// TCP: negotiate ECN. Classic senders send ECT(0) and react to ECN-Echo (RFC 3168); `prague`
    /// sends ECT(1) with accurate ECN feedback. Default: on for `prague`, off otherwise.
    pub ecn: Option<bool>,
    /// TCP: bytes to send (default unlimited).
    pub bytes: Option<u64>,
    /// DSCP of the flow's packets (TCP; UDP sources keep their own defaults).
    pub dscp: Option<u8>,
}

/// What went wrong loading or building a scenario.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScenarioError(pub String);

impl std::fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for ScenarioError {}

fn err<T>(m: impl Into<String>) -> Result<T, ScenarioError> {
    Err(ScenarioError(m.into()))
}

fn secs(s: f64, what: &str) -> Result<Duration, ScenarioError> {
    if !(s.is_finite() && s >= 0.0) {
        return err(format!("{what}: not a non-negative number: {s}"));
    }
    Ok(Duration::from_secs_f64(s))
}

fn rate(s: &str) -> Result<u64, ScenarioError> {
    qdisc::tc_units::parse_rate(s).or_else(|e| err(format!("bad rate {s:?}: {e:?}")))
}

/// A link's capacity from the scenario format's keys: exactly one of `rate` (tc syntax,
/// `10mbit`), `trace` (a mahimahi file) or `schedule` (a step/ramp file, [`RateSchedule`]);
/// relative paths resolve against `dir`. Errors name the file and, for a malformed one, the
/// line (`my.down: line 3: not a non-negative integer: "x"`).
pub fn link_capacity(
    rate_key: Option<&str>,
    trace: Option<&str>,
    schedule: Option<&str>,
    dir: &Path,
) -> Result<Capacity, ScenarioError> {
    let read = |t: &str| {
        let p = dir.join(t);
        std::fs::read_to_string(&p).or_else(|e| err(format!("{}: {e}", p.display())))
    };
    link_capacity_read(rate_key, trace, schedule, &read).map(|(c, _)| c)
}

/// [`link_capacity`] with the files read by `read` (given the key's value, it answers the
/// file's text or an error naming the file), also answering the text of the trace or schedule
/// file (`None` for a `rate`). Error messages are [`link_capacity`]'s.
pub fn link_capacity_read(
    rate_key: Option<&str>,
    trace: Option<&str>,
    schedule: Option<&str>,
    read: &dyn Fn(&str) -> Result<String, ScenarioError>,
) -> Result<(Capacity, Option<String>), ScenarioError> {
    match (rate_key, trace, schedule) {
        (Some(r), None, None) => Ok((Capacity::Rate(rate(r)?), None)),
        (None, Some(t), None) => {
            let text = read(t)?;
            let c =
                Capacity::Trace(MahimahiTrace::parse(&text).or_else(|e| err(format!("{t}: {e}")))?);
            Ok((c, Some(text)))
        }
        (None, None, Some(t)) => {
            let text = read(t)?;
            let c = Capacity::Schedule(
                RateSchedule::parse(&text).or_else(|e| err(format!("{t}: {e}")))?,
            );
            Ok((c, Some(text)))
        }
        _ => err("give exactly one of rate, trace, schedule"),
    }
}

/// Builds a qdisc from its tc description (`cake <tc args>`, `fq_codel`, `codel ecn`,
/// `pie ecn`, `pfifo [N]`, `bfifo N`, `sfq limit 1000 perturb 10`, `sfb`,
/// `htb rate 20mbit burst 15k fq_codel`, ...): see [`AnyQdisc::from_tc`] for the full syntax.
pub fn parse_qdisc(spec: &str, seed: u64) -> Result<AnyQdisc, ScenarioError> {
    AnyQdisc::from_tc(spec, seed).or_else(|e| err(format!("qdisc {spec:?}: {e}")))
}

/// A scenario built into a simulator, with names resolved.
#[derive(Debug)]
pub struct Built {
    /// The simulator, at time 0.
    pub sim: Sim,
    /// When to stop.
    pub end: Instant,
    /// Node ids by name.
    pub nodes: HashMap<String, NodeId>,
    /// Link ids, in file order (a bidirectional entry gives forward then reverse).
    pub links: Vec<(String, LinkId)>,
    /// Application ids, in file order, named by their `name` key or `kind@node:port` (a TCP
    /// app contributes its receiver, then its sender).
    pub apps: Vec<(String, AppId)>,
    /// The nearest Flent test for the scenario's flows ([`Scenario::flent_labels`]).
    pub flent: FlentLabels,
}

impl Scenario {
    /// The nearest of Flent's tests for these sending flows (`(flow name, its app)`, in file
    /// order), by [`flent::nearest`]. The Flent client is the node of the first `ping` app
    /// (else of the first `tcp`, else of the first `greedy`/`cbr` app): its TCP flows are
    /// uploads, TCP flows to it downloads, its first ping the ICMP ping, its first UDP flood
    /// `udp_flood`'s upload. Everything else (ACKs, VoIP, flows between other nodes) is an
    /// extra series.
    pub fn flent_labels(&self, senders: &[(String, &AppSpec)]) -> FlentLabels {
        let first = |k: &[&str]| {
            senders
                .iter()
                .find(|(_, a)| k.contains(&a.kind.as_str()))
                .map(|(_, a)| a.node.as_str())
        };
        let client = first(&["ping"])
            .or_else(|| first(&["tcp"]))
            .or_else(|| first(&["greedy", "cbr"]));
        let to_client = |a: &AppSpec| {
            self.nodes
                .iter()
                .any(|n| Some(n.name.as_str()) == client && n.addrs.contains(&a.dst))
        };
        let roles: Vec<(&str, Role)> = senders
            .iter()
            .map(|(name, a)| {
                let from_client = Some(a.node.as_str()) == client;
                let role = match a.kind.as_str() {
                    "tcp" if from_client => Role::TcpUpload,
                    "tcp" if to_client(a) => Role::TcpDownload,
                    "ping" if from_client => Role::IcmpPing,
                    "greedy" | "cbr" if from_client => Role::UdpUpload,
                    _ => Role::Other,
                };
                (name.as_str(), role)
            })
            .collect();
        flent::nearest(&roles)
    }

    /// Parses TOML text.
    pub fn parse(text: &str) -> Result<Self, ScenarioError> {
        toml::from_str(text).or_else(|e| err(format!("scenario: {e}")))
    }

    /// Builds the simulator; relative trace/schedule paths are resolved against `dir`.
    pub fn build(&self, dir: &Path) -> Result<Built, ScenarioError> {
        let mut sim = Sim::new(self.seed);
        sim.set_bin_width(secs(self.bin_ms / 1000.0, "bin_ms")?);
        let mut nodes = HashMap::new();
        for n in &self.nodes {
            if nodes
                .insert(n.name.clone(), sim.add_node(&n.addrs))
                .is_some()
            {
                return err(format!("duplicate node {:?}", n.name));
            }
        }
        let node = |name: &str| -> Result<NodeId, ScenarioError> {
            nodes
                .get(name)
                .copied()
                .ok_or_else(|| ScenarioError(format!("unknown node {name:?}")))
        };
        let mut links = Vec::new();
        for (i, l) in self.links.iter().enumerate() {
            let (from, to) = (node(&l.from)?, node(&l.to)?);
            let dirs: &[(NodeId, NodeId, &str)] = if l.bidirectional {
                &[(from, to, "fwd"), (to, from, "rev")]
            } else {
                &[(from, to, "fwd")]
            };
            for (k, &(a, b, d)) in dirs.iter().enumerate() {
                let link_rate = link_capacity(
                    l.rate.as_deref(),
                    l.trace.as_deref(),
                    l.schedule.as_deref(),
                    dir,
                )
                .map_err(|e| ScenarioError(format!("link {i}: {e}")))?;
                if !(0.0..=1.0).contains(&l.loss) {
                    return err(format!("link {i}: loss must be in [0, 1]"));
                }
                let mut cfg =
                    LinkConfig::with_rate(link_rate, secs(l.delay_ms / 1000.0, "delay_ms")?)
                        .loss(l.loss)
                        .buffer(
                            (l.buffer_packets > 0).then_some(l.buffer_packets),
                            (l.buffer_bytes > 0).then_some(l.buffer_bytes),
                        );
                if let Some(q) = &l.qdisc {
                    let qseed =
                        self.seed ^ ((i * 2 + k) as u64 + 1).wrapping_mul(0xD6E8_FEB8_6659_FD93);
                    cfg = cfg.qdisc(parse_qdisc(q, qseed)?);
                }
                let id = sim.add_link(a, b, cfg);
                let name = match (&l.name, d) {
                    (Some(n), "fwd") => n.clone(),
                    (Some(n), _) => format!("{n} ({d})"),
                    (None, _) => {
                        format!("{}->{} ({d})", self.nodes[a].name, self.nodes[b].name)
                    }
                };
                links.push((name, id));
            }
        }
        sim.compute_routes();
        let mut apps = Vec::new();
        // Each app's sending flow, by name, for the Flent labels.
        let mut senders: Vec<(String, &AppSpec)> = Vec::new();
        for a in &self.apps {
            let n = node(&a.node)?;
            let src = self.nodes[n]
                .addrs
                .iter()
                .copied()
                .find(|x| x.is_ipv4() == a.dst.is_ipv4())
                .ok_or_else(|| {
                    ScenarioError(format!(
                        "node {:?} has no address of the family of {}",
                        a.node, a.dst
                    ))
                })?;
            let start = Instant::ZERO.saturating_add(secs(a.start_s, "start_s")?);
            let stop = match a.stop_s {
                Some(s) => Some(Instant::ZERO.saturating_add(secs(s, "stop_s")?)),
                None => None,
            };
            let need_rate = || match &a.rate {
                Some(r) => rate(r),
                None => err(format!("app {}: needs a rate", a.kind)),
            };
            let app: Box<dyn crate::Application> = match a.kind.as_str() {
                "greedy" | "cbr" => {
                    let mut s = UdpSource::cbr(src, a.dst, a.port, a.size, need_rate()?);
                    if let Some(t) = stop {
                        s = s.until(t);
                    }
                    Box::new(s)
                }
                "voip" => {
                    let mut s = UdpSource::voip(src, a.dst, a.port);
                    if let Some(t) = stop {
                        s = s.until(t);
                    }
                    Box::new(s)
                }
                "ping" => {
                    let iv = secs(a.interval_ms.unwrap_or(1000.0) / 1000.0, "interval_ms")?;
                    let mut p = Ping::new(src, a.dst, a.port, iv);
                    if let Some(t) = stop {
                        p = p.until(t);
                    }
                    Box::new(p)
                }
                "tcp" => {
                    let mut cfg = tcpmodel::SenderConfig::new(src, a.dst, a.port, a.port);
                    cfg.cc = match a.cc.as_deref().unwrap_or("cubic") {
                        "cubic" => tcpmodel::cc::CcKind::Cubic,
                        "newreno" | "reno" => tcpmodel::cc::CcKind::NewReno,
                        "ledbat" => tcpmodel::cc::CcKind::Ledbat,
                        "prague" => tcpmodel::cc::CcKind::Prague,
                        other => {
                            return err(format!(
                                "app tcp: unknown cc {other:?} (accepted: cubic, newreno, ledbat, \
                                 prague)"
                            ))
                        }
                    };
                    cfg.ecn = a.ecn.unwrap_or(cfg.cc.is_l4s());
                    cfg.bytes_to_send = a.bytes;
                    if let Some(d) = a.dscp {
                        cfg.dscp = d;
                    }
                    let dst_node = self
                        .nodes
                        .iter()
                        .position(|x| x.addrs.contains(&a.dst))
                        .ok_or_else(|| {
                            ScenarioError(format!("app tcp: no node has address {}", a.dst))
                        })?;
                    let dst_id = node(&self.nodes[dst_node].name)?;
                    let rx = crate::TcpReceiverApp::for_sender(&cfg);
                    let rx_id = sim.add_app(dst_id, a.port, start, Box::new(rx));
                    let rx_name = match &a.name {
                        Some(n) => format!("{n} (acks)"),
                        None => format!("tcp-rx@{}:{}", self.nodes[dst_node].name, a.port),
                    };
                    apps.push((rx_name, rx_id));
                    Box::new(crate::TcpSenderApp::new(cfg))
                }
                k => {
                    return err(format!(
                        "unknown app kind {k:?} (accepted: greedy, cbr, voip, ping, tcp)"
                    ))
                }
            };
            let id = sim.add_app(n, a.port, start, app);
            let name = a
                .name
                .clone()
                .unwrap_or_else(|| format!("{}@{}:{}", a.kind, a.node, a.port));
            senders.push((name.clone(), a));
            apps.push((name, id));
        }
        let flent = self.flent_labels(&senders);
        Ok(Built {
            sim,
            end: Instant::ZERO.saturating_add(secs(self.duration_s, "duration_s")?),
            nodes,
            links,
            apps,
            flent,
        })
    }
}
