//! The lab's scenarios: the seeds' testbeds (evaluation.md B1, B2 and the PURPLE radio link)
//! with their flows and contenders as tc strings.

use std::path::Path;

use controller::Direction;
use qdisc::Duration;
use sim::deployment::{Deployment, ProbePath};
use sim::flent::{self, FlentLabels, FlentTest, Role};
use sim::link_file::{LinkDesc, LinkRates};
use sim::link_scenario::{LinkScenario, Role as ContenderRole, Run, Workload};
use sim::{Capacity, RatePoint, RateSchedule};

pub use crate::link::{DirCapacity, LabLinkError, Link, BUILT_IN_BUFFER_PACKETS};

/// How a contender's qdisc is built for a direction shaped to a rate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// CAKE shaping itself: `cake bandwidth RATE ARGS`.
    Cake(&'static str),
    /// The seed's HTB in front of a child: `htb rate RATE burst 15k CHILD`.
    Htb(&'static str),
    /// No shaper: the qdisc as given (for the radio, where the link is the bottleneck).
    Bare(&'static str),
    /// CAKE (`cake bandwidth START ARGS`) whose rate a `purple control` daemon in the router
    /// namespace drives, with the daemon's `algorithm` (`purple`, `cake-autorate`, ...). The
    /// CAKE starts at the scenario's shaper rate; the daemon's range and start rate are the
    /// link's rates ([`Scenario::control_range`]).
    Controlled {
        /// The daemon's `algorithm` option.
        algorithm: &'static str,
        /// CAKE's arguments after the bandwidth.
        cake: &'static str,
        /// The daemon's `delay_source` (`probes`, `passive`, `both`); with the passive signal
        /// the router bridge runs `--passive` and the daemon reads it from there.
        delay_source: &'static str,
    },
    /// CAKE with these arguments both ways, and on the download (shaped at the router after
    /// the radio) also `autorate-ingress ingress`: Linux CAKE's own estimate of the capacity
    /// from what arrives, as a home router deploys it on its ingress (sqm-scripts' IFB). The
    /// upload, shaped before the radio where no estimate of it arrives, stays at the static
    /// rate. Both start at the scenario's static rates.
    CakeAutorateIngress(&'static str),
    /// CAKE (`cake bandwidth START ARGS`) whose rate the real cake-autorate script (a checkout
    /// the user gave, [`crate::LabOpts::cake_autorate`]) drives through the tc shim, with the
    /// same range as [`Shape::Controlled`].
    Script {
        /// CAKE's arguments after the bandwidth.
        cake: &'static str,
    },
}

/// How a `purple control` contender probes ([`Scenario::daemon_probe`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DaemonProbe {
    /// UDP timestamps to a `purple reflector` on the server (one-way delays).
    #[default]
    Udp,
    /// ICMP echo to the server, which its kernel answers (unless [`crate::Fault::NoIcmpEcho`]
    /// blocks it).
    Echo,
}

/// A qdisc contender.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Contender {
    /// Name in tables (matches the simulator's experiment tables).
    pub name: &'static str,
    /// Short name for `--qdisc` (`cake`, `fq_codel`, `fifo`).
    pub short: &'static str,
    /// How it is built.
    pub shape: Shape,
}

impl Contender {
    /// The tc string of its qdisc for direction `dir` shaped to `rate_bit_s`.
    pub fn tc(&self, dir: Direction, rate_bit_s: u64) -> String {
        let kbit = rate_bit_s / 1000;
        match self.shape {
            Shape::Cake(a) | Shape::Controlled { cake: a, .. } | Shape::Script { cake: a } => {
                format!("cake bandwidth {kbit}kbit {a}")
            }
            Shape::CakeAutorateIngress(a) => match dir {
                Direction::Down => {
                    format!("cake bandwidth {kbit}kbit {a} autorate-ingress ingress")
                }
                Direction::Up => format!("cake bandwidth {kbit}kbit {a}"),
            },
            Shape::Htb(c) => format!("htb rate {kbit}kbit burst 15k {c}"),
            Shape::Bare(q) => q.to_string(),
        }
    }
}

/// What one flow of a test does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlowKind {
    /// TCP bulk client → server.
    TcpUp,
    /// TCP bulk server → client.
    TcpDown,
    /// UDP ping-pong probe from the client to a reflector on the server.
    UdpPing,
    /// ICMP echo from the client (system `ping`).
    Icmp,
    /// VoIP-like UDP client → server (one-way delay).
    VoipUp,
}

/// A latency probe's identity in a test: what it sends and at which DSCP. A test holds at most
/// one probe of each (checked by the scenarios' tests), so this finds a probe's results
/// ([`crate::LabRun::induced`], [`crate::LabRun::probe_flow`]); its display name
/// ([`ProbeId::label`]) is for tables, JSON and Flent files only.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProbeId {
    /// ICMP echo (system `ping`), best effort.
    Icmp,
    /// The UDP ping-pong probe at this DSCP.
    Udp {
        /// Its DSCP.
        dscp: u8,
    },
}

impl ProbeId {
    /// The best-effort UDP probe (the lab demo's loaded latency).
    pub const UDP_BE: ProbeId = ProbeId::Udp { dscp: 0 };

    /// The probe's name in tables, JSON and Flent files (Flent's series names:
    /// `Ping (ms) ICMP`, `Ping (ms) UDP BE`, ...).
    pub fn label(self) -> String {
        match self {
            ProbeId::Icmp => "Ping (ms) ICMP".to_string(),
            ProbeId::Udp { dscp } => match DSCPS.iter().find(|(_, d)| *d == dscp) {
                Some((n, _)) => format!("Ping (ms) UDP {n}"),
                None => format!("Ping (ms) UDP {dscp}"),
            },
        }
    }
}

/// One flow: a name (flent's where one exists), what it does, and its DSCP.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Flow {
    /// Name in tables, JSON and Flent files.
    pub name: String,
    /// What it does.
    pub kind: FlowKind,
    /// DSCP of its packets.
    pub dscp: u8,
}

impl Flow {
    fn new(name: &str, kind: FlowKind, dscp: u8) -> Flow {
        Flow {
            name: name.to_string(),
            kind,
            dscp,
        }
    }

    /// The probe `id`, named by its [`ProbeId::label`].
    pub fn probe(id: ProbeId) -> Flow {
        match id {
            ProbeId::Icmp => Flow::new(&id.label(), FlowKind::Icmp, 0),
            ProbeId::Udp { dscp } => Flow::new(&id.label(), FlowKind::UdpPing, dscp),
        }
    }

    /// Whether it is a latency probe (ICMP or UDP ping-pong) rather than a load.
    pub fn is_probe(&self) -> bool {
        self.probe_id().is_some()
    }

    /// Which probe it is, if it is one.
    pub fn probe_id(&self) -> Option<ProbeId> {
        match self.kind {
            FlowKind::Icmp => Some(ProbeId::Icmp),
            FlowKind::UdpPing => Some(ProbeId::Udp { dscp: self.dscp }),
            _ => None,
        }
    }
}

/// One test of a scenario (e.g. B1's `upload`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Test {
    /// Name (`upload`, `download`, `bidir`, `rrul`, ...).
    pub name: &'static str,
    /// Its flows (probes included).
    pub flows: Vec<Flow>,
    /// The Flent test whose series its flows are named as, if it is one of Flent's tests
    /// with all its flows (else the nearest is chosen by [`Test::flent_labels`]).
    pub flent: Option<FlentTest>,
}

impl Test {
    /// The Flent test this test's runs are written as, and which flow is which of its series:
    /// [`Test::flent`] with the flows of that test's names, else the nearest test for the
    /// flows' kinds ([`flent::nearest`]; B1's tests are exactly `tcp_upload`, `tcp_download`
    /// and `tcp_bidirectional`, the radio's `rrul_be_nflows`). The load starts `delay_s` into
    /// the run.
    pub fn flent_labels(&self, delay_s: f64) -> FlentLabels {
        let labels = match self.flent {
            Some(t) => FlentLabels::by_name(t, self.flows.iter().map(|f| f.name.as_str())),
            None => {
                let roles: Vec<(&str, Role)> = self
                    .flows
                    .iter()
                    .map(|f| {
                        let r = match f.kind {
                            FlowKind::TcpUp => Role::TcpUpload,
                            FlowKind::TcpDown => Role::TcpDownload,
                            FlowKind::Icmp => Role::IcmpPing,
                            FlowKind::UdpPing => Role::UdpPing,
                            FlowKind::VoipUp => Role::Other,
                        };
                        (f.name.as_str(), r)
                    })
                    .collect();
                flent::nearest(&roles)
            }
        };
        labels.with_delay(delay_s)
    }
}

/// The radio's link as a link file (the simulator reads the same file: `purple demo --link
/// scenarios/links/lab-radio.toml`), with its schedule.
const RADIO_LINK: &str = include_str!("../../../scenarios/links/lab-radio.toml");
const RADIO_LINK_PATH: &str = "scenarios/links/lab-radio.toml";
const RADIO_DOWN: &str = include_str!("../../../scenarios/links/lab-radio.down");

/// The recorded link as a link file (`purple demo --link scenarios/links/tmobile-lte.toml`),
/// with the T-Mobile LTE trace it names (first 60 s, mahimahi; `scenarios/traces/README.md`).
const TMOBILE_LINK: &str = include_str!("../../../scenarios/links/tmobile-lte.toml");
const TMOBILE_LINK_PATH: &str = "scenarios/links/tmobile-lte.toml";
const TM_DOWN: &str = include_str!("../../../scenarios/traces/TMobile-LTE-short-60s.down");
const TM_UP: &str = include_str!("../../../scenarios/traces/TMobile-LTE-short-60s.up");

/// The link file `text` compiled in from `path`, its trace and schedule files among `files`
/// (each by the name the file gives, with its text), as the lab plays it (1 ms each way where
/// it gives no delay, [`sim::link_file::DEFAULT_DELAY`], as [`Scenario::for_link`]). Fails as [`Link::from_desc`] does, or
/// naming a file the link file names that is not among `files`.
fn compiled_in_link(path: &str, text: &str, files: &[(&str, &str)]) -> Result<Link, LabLinkError> {
    let d = LinkDesc::parse(Path::new(path), text, &|name: &str| {
        files
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, t)| t.to_string())
            .ok_or_else(|| sim::ScenarioError(format!("{name}: not compiled in with {path}")))
    })?;
    Link::from_desc(&d)
}

/// The radio's link, read from the compiled-in `scenarios/links/lab-radio.toml`.
pub fn radio_link() -> Result<Link, LabLinkError> {
    compiled_in_link(
        RADIO_LINK_PATH,
        RADIO_LINK,
        &[("lab-radio.down", RADIO_DOWN)],
    )
}

/// The recorded link of `purple lab run tmobile`, read from the compiled-in
/// `scenarios/links/tmobile-lte.toml` and the two T-Mobile LTE traces it names.
pub fn tmobile_link() -> Result<Link, LabLinkError> {
    compiled_in_link(
        TMOBILE_LINK_PATH,
        TMOBILE_LINK,
        &[
            ("../traces/TMobile-LTE-short-60s.down", TM_DOWN),
            ("../traces/TMobile-LTE-short-60s.up", TM_UP),
        ],
    )
}

/// The rate range (Mbit/s) a daemon is given for one direction.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RateRange {
    /// `min_mbit`.
    pub min: f64,
    /// `base_mbit` (the start rate).
    pub base: f64,
    /// `max_mbit`.
    pub max: f64,
}

/// A lab scenario.
#[derive(Clone, Debug, PartialEq)]
pub struct Scenario {
    /// Name for `purple lab run NAME` (a link file's name for `purple lab run --link FILE`).
    pub name: String,
    /// One line.
    pub title: String,
    /// The simulator experiment with the same testbed (`purple sim report` id), if any.
    pub sim_id: Option<&'static str>,
    /// The link emulator's link: capacities, delays (the netem stage's too) and buffer, and
    /// per direction its rates ([`LinkDesc`]'s `rates`: the static shaper rate `safe`
    /// ([`Scenario::down_bit_s`], [`Scenario::up_bit_s`]) and the daemons' range `lo`..`hi`
    /// and start rate ([`Scenario::control_range`])).
    pub link: Link,
    /// Whether the scenario is meaningless without the link emulator (delay or varying rate).
    pub needs_linkem: bool,
    /// Seconds of load per test at full length (the seed's).
    pub full_seconds: f64,
    /// Its tests.
    pub tests: Vec<Test>,
    /// Its contenders, in table order.
    pub contenders: Vec<Contender>,
    /// How its `purple control` contenders probe.
    pub daemon_probe: DaemonProbe,
}

/// A built-in scenario's link with its rates: static CAKE at `down_bit_s`/`up_bit_s`; the
/// daemons' download range from a tenth of the highest capacity (at least 0.1 Mbit/s) up to
/// 5% above it, starting at the shaper rate (within that range), the upload's up to the
/// uplink's highest capacity, starting at 90% of it.
fn built_in(link: Link, down_bit_s: u64, up_bit_s: u64) -> Link {
    let mbit = |bits: u64| bits as f64 / 1e6;
    let hi = mbit(link.down().span().1);
    let max = hi * 1.05;
    let down = LinkRates {
        lo: (hi / 10.0).max(0.1),
        hi: max,
        safe: mbit(down_bit_s),
        optimistic: max,
        start: Some(mbit(down_bit_s).clamp(hi / 10.0, max)),
    };
    let up_cap = mbit(link.up().span().1);
    let up = LinkRates {
        lo: (up_cap / 10.0).max(0.1),
        hi: up_cap,
        safe: mbit(up_bit_s),
        optimistic: up_cap,
        start: Some(up_cap * 0.9),
    };
    link.with_rates(down, up)
}

/// FQ-CoDel without a shaper (the radio's: the link is the bottleneck), the `fq-codel` role.
pub const FQ_CODEL_UNSHAPED: Contender = Contender {
    name: "FQ-CoDel, no shaping",
    short: "fq_codel",
    shape: Shape::Bare("fq_codel"),
};
/// A 1000-packet FIFO without a shaper (the radio's bufferbloat reference: the emulator's
/// buffer holds the queue), the `fifo` role.
pub const FIFO_UNSHAPED: Contender = Contender {
    name: "pfifo 1000, no shaping",
    short: "fifo",
    shape: Shape::Bare("pfifo limit 1000"),
};
/// CAKE diffserv3 triple-isolate (the seeds' default CAKE).
pub const CAKE: Contender = Contender {
    name: "CAKE",
    short: "cake",
    shape: Shape::Cake("diffserv3 triple-isolate"),
};
/// HTB + FQ-CoDel at defaults (ours).
pub const FQ_CODEL: Contender = Contender {
    name: "HTB+FQ-CoDel",
    short: "fq_codel",
    shape: Shape::Htb("fq_codel"),
};
/// HTB + a 1000-packet tail-drop FIFO (the bufferbloat reference).
pub const FIFO: Contender = Contender {
    name: "HTB+pfifo 1000",
    short: "fifo",
    shape: Shape::Htb("pfifo limit 1000"),
};

const DSCPS: [(&str, u8); 4] = [("BE", 0), ("BK", 8), ("CS5", 40), ("EF", 46)];

fn b1() -> Scenario {
    let probe = || Flow::probe(ProbeId::Icmp);
    let udp = || Flow::probe(ProbeId::UDP_BE);
    let up = || Flow::new("TCP upload", FlowKind::TcpUp, 0);
    let down = || Flow::new("TCP download", FlowKind::TcpDown, 0);
    Scenario {
        name: "b1".into(),
        title: "B1: tcp_upload / tcp_download / tcp_bidirectional at 20/3 Mbit/s, 45 ms each way"
            .into(),
        sim_id: Some("B1"),
        link: built_in(
            Link::fixed(100_000_000, 100_000_000, Duration::from_millis(45)),
            20_000_000,
            3_000_000,
        ),
        needs_linkem: false,
        full_seconds: 60.0,
        tests: vec![
            Test {
                name: "upload",
                flows: vec![probe(), udp(), up()],
                flent: None,
            },
            Test {
                name: "download",
                flows: vec![probe(), udp(), down()],
                flent: None,
            },
            Test {
                name: "bidir",
                flows: vec![probe(), udp(), up(), down()],
                flent: None,
            },
        ],
        contenders: vec![CAKE, FQ_CODEL, FIFO],
        daemon_probe: DaemonProbe::Udp,
    }
}

fn b2() -> Scenario {
    let mut flows = vec![Flow::probe(ProbeId::Icmp)];
    for dscp in [0, 8, 46] {
        flows.push(Flow::probe(ProbeId::Udp { dscp }));
    }
    for (n, d) in DSCPS {
        flows.push(Flow::new(&format!("TCP upload {n}"), FlowKind::TcpUp, d));
    }
    for (n, d) in DSCPS {
        flows.push(Flow::new(
            &format!("TCP download {n}"),
            FlowKind::TcpDown,
            d,
        ));
    }
    Scenario {
        name: "b2".into(),
        title: "B2: RRUL (4 TCP each way on CS0/CS1/CS5/EF + ICMP/UDP probes) at 20/3 Mbit/s"
            .into(),
        sim_id: Some("B2"),
        tests: vec![Test {
            name: "rrul",
            flows,
            flent: Some(FlentTest::Rrul),
        }],
        full_seconds: 30.0,
        ..b1()
    }
}

fn radio() -> Scenario {
    Scenario {
        name: "radio".into(),
        title: "PURPLE radio: downlink stepping 130/80 Mbit/s behind CAKE static 100 Mbit/s".into(),
        sim_id: None,
        // Invariant: the compiled-in file reads and plays (test
        // `the_radio_and_tmobile_are_their_link_files_with_the_linkem_options_they_always_had`).
        link: built_in(
            radio_link().expect("scenarios/links/lab-radio.toml is a playable link"),
            100_000_000,
            50_000_000,
        ),
        needs_linkem: true,
        full_seconds: 60.0,
        tests: vec![Test {
            name: "rrul_voip",
            flows: vec![
                Flow::probe(ProbeId::Icmp),
                Flow::probe(ProbeId::UDP_BE),
                Flow::new("VoIP EF", FlowKind::VoipUp, 46),
                Flow::new("TCP download BE", FlowKind::TcpDown, 0),
                Flow::new("TCP download BE 2", FlowKind::TcpDown, 0),
                Flow::new("TCP upload BE", FlowKind::TcpUp, 0),
            ],
            flent: None,
        }],
        contenders: vec![
            Contender {
                name: "CAKE static 100 Mbit/s",
                short: "cake",
                shape: Shape::Cake("besteffort"),
            },
            FQ_CODEL_UNSHAPED,
            FIFO_UNSHAPED,
            CAKE_PURPLE,
            CAKE_AUTORATE,
        ],
        daemon_probe: DaemonProbe::Udp,
    }
}

/// A Starlink-like link for the passive delay signal (issue 14): a downlink stepping
/// 150/60 Mbit/s every 8 s (a reconfiguration re-drawing the capacity), a 20 Mbit/s uplink,
/// 15 ms each way, the emulator's deep 1000-packet queue (what Starlink's dish buffers). The
/// daemons probe with ICMP echo to the server, which `--fault no-icmp-echo` blocks (as behind
/// some CGNATs and firewalls): then only the passive signal sees the queue. No ICMP latency
/// flow, so the runs with ICMP blocked measure the same UDP probe as the others.
fn starlink() -> Scenario {
    Scenario {
        name: "starlink".into(),
        title: "Starlink-like: downlink stepping 150/60 Mbit/s every 8 s, 15 ms each way, deep \
                queue; daemons probe with ICMP echo"
            .into(),
        sim_id: Some("C-starlink-no-probes"),
        // Invariant: a two-step schedule with capacity throughout plays (test
        // `the_starlink_link_plays_its_two_steps`).
        link: built_in(
            Link::from_desc(&starlink_link()).expect("starlink's two steps play"),
            100_000_000,
            20_000_000,
        ),
        needs_linkem: true,
        full_seconds: 48.0,
        tests: vec![Test {
            name: "download",
            flows: vec![
                Flow::probe(ProbeId::UDP_BE),
                Flow::new("TCP download BE", FlowKind::TcpDown, 0),
                Flow::new("TCP download BE 2", FlowKind::TcpDown, 0),
                Flow::new("TCP upload BE", FlowKind::TcpUp, 0),
            ],
            flent: None,
        }],
        contenders: vec![
            Contender {
                name: "CAKE static 100 Mbit/s",
                short: "cake",
                shape: Shape::Cake("besteffort"),
            },
            CAKE_PURPLE,
            CAKE_PURPLE_PASSIVE,
            CAKE_PURPLE_PASSIVE_ONLY,
            CAKE_AUTORATE,
        ],
        daemon_probe: DaemonProbe::Echo,
    }
}

/// Starlink's link: the downlink stepping 150/60 Mbit/s every 8 s (looping after 16 s), a
/// 20 Mbit/s uplink, 15 ms each way, the emulator's 1000-packet buffer.
fn starlink_link() -> LinkDesc {
    let step = |s: u64, mbit: f64| RatePoint {
        at: qdisc::Instant::from_secs(s),
        rate: mbit * 1e6 / 8.0,
        ramp: false,
    };
    let down = RateSchedule::new(vec![step(0, 150.0), step(8, 60.0)])
        .map_or(Capacity::Rate(1), Capacity::Schedule);
    let one_way = Duration::from_millis(15);
    let mut d = LinkDesc::new(
        "starlink-like",
        "",
        16.0,
        BUILT_IN_BUFFER_PACKETS,
        (down, one_way),
        (Capacity::Rate(20_000_000 / 8), one_way),
    );
    d.down.what = "150/60 Mbit/s every 8 s".into();
    d
}

/// The PURPLE radio on a recorded link: the T-Mobile LTE trace both ways, 20 ms each way, the
/// emulator's 1000-packet buffer (`scenarios/links/tmobile-lte.toml`).
fn tmobile() -> Scenario {
    Scenario {
        name: "tmobile".into(),
        title: "PURPLE on a recorded link: T-Mobile LTE trace (60 s, ~14 down / 6 up Mbit/s)"
            .into(),
        sim_id: None,
        // Invariant: the compiled-in file reads and plays (test
        // `the_radio_and_tmobile_are_their_link_files_with_the_linkem_options_they_always_had`).
        link: built_in(
            tmobile_link().expect("scenarios/links/tmobile-lte.toml is a playable link"),
            14_000_000,
            6_000_000,
        ),
        full_seconds: 60.0,
        // The radio's contenders; static CAKE runs at this scenario's rates, the trace's means.
        contenders: radio()
            .contenders
            .into_iter()
            .map(|c| match c.short {
                "cake" => Contender {
                    name: "CAKE static 14/6 Mbit/s (the means)",
                    ..c
                },
                _ => c,
            })
            .collect(),
        ..radio()
    }
}

/// Bit/s of `mbit` Mbit/s, rounded.
fn bits(mbit: f64) -> u64 {
    (mbit * 1e6).round() as u64
}

/// Where the lab deploys the shaper and its controller, on every scenario: a home router's
/// ([`Deployment::HOME_ROUTER`]). The router's bridge shapes both ways, the download after the
/// link emulator (the radio); a `purple control` daemon reads throughput from the bridge's
/// CAKE statistics and, for the download, the bytes that arrived at its CAKE from the WAN side
/// beside them (the bridge's `rx_wire_bytes`; the device counter of `r1` where a bridge did
/// not report them: [`crate::control::config_toml`]); probes queue with the data and are
/// answered. The lab has no other: a link-level scenario deployed otherwise is refused ([`Scenario::for_link_scenario`],
/// [`LabPlayError::Deployment`]; `purple lab run --link-of NAME` plays section C's scenario
/// only where it is deployed so, or with `--home-router` as one).
///
/// Probe faults are run options ([`crate::Fault`]), not part of this, because neither is one
/// of [`ProbePath`]'s: `--fault icmp-apart` is near
/// [`ProbePath::IcmpApart`] (the emulator serves ICMP first, but the radio's daemons probe with
/// UDP, which it queues with the data) and
/// `--fault no-icmp-echo` near [`ProbePath::Dropped`] (the server ignores echo only: UDP probes
/// are still answered, where section C loses every probe both ways).
pub const DEPLOYMENT: Deployment = Deployment::HOME_ROUTER;

/// Why the lab cannot play a link-level scenario ([`Scenario::for_link_scenario`]).
#[derive(Debug)]
pub enum LabPlayError {
    /// The scenario is deployed otherwise than the lab deploys every link ([`DEPLOYMENT`]).
    /// Its message names each part where the two differ and how to play the link as the lab
    /// can: as a home router ([`LinkScenario::as_home_router`], `--home-router`) where only
    /// the shaper's place or the throughput source differ; a probe path other than the lab's
    /// has no equal in the lab (its `--fault` options are near, see [`DEPLOYMENT`]).
    Deployment {
        /// The link's name.
        link: String,
        /// How the scenario deploys CAKE and its controller.
        scenario: Deployment,
        /// How the lab does ([`DEPLOYMENT`]).
        lab: Deployment,
    },
    /// The link emulator cannot play the link ([`Scenario::for_link`]'s error).
    Link(LabLinkError),
    /// A contender role the lab has no contender for ([`Scenario::contenders_for`]).
    Role {
        /// The role.
        role: ContenderRole,
        /// Why the lab cannot play it.
        why: &'static str,
    },
    /// A link file's `[run] base_rtt_ms` ([`Scenario::for_link_file`]): the lab's round trip
    /// is the link's delays plus its own veths, bridge and emulator, not a simulated path.
    RoundTrip {
        /// The link's name.
        link: String,
    },
}

impl std::fmt::Display for LabPlayError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LabPlayError::Deployment {
                link,
                scenario,
                lab,
            } => {
                write!(
                    f,
                    "{link} is deployed as the lab cannot play it: {} (the lab: {})",
                    scenario.differences(lab).join(", "),
                    lab.differences(scenario).join(", ")
                )?;
                let probes_apart = scenario.probes != lab.probes;
                if scenario.shaper != lab.shaper || scenario.throughput != lab.throughput {
                    write!(
                        f,
                        "; --home-router plays the link as a home router, as the lab deploys \
                         every link{}",
                        if probes_apart {
                            ", but keeps its probe path"
                        } else {
                            ""
                        }
                    )?;
                }
                if probes_apart {
                    write!(
                        f,
                        "; the lab plays no probe path but its own: its --fault icmp-apart and \
                         --fault no-icmp-echo are near \"{}\" and \"{}\" but not equal (the \
                         daemons' UDP probes still queue with the data and are answered)",
                        ProbePath::IcmpApart,
                        ProbePath::Dropped
                    )?;
                }
                Ok(())
            }
            LabPlayError::Link(e) => e.fmt(f),
            LabPlayError::Role { role, why } => {
                let ids: Vec<&str> = LAB_ROLES.iter().map(|r| r.id()).collect();
                write!(
                    f,
                    "the lab cannot play contender {}: {why} (the lab plays {})",
                    role.id(),
                    ids.join(", ")
                )
            }
            LabPlayError::RoundTrip { link } => write!(
                f,
                "{link}'s [run] base_rtt_ms sets the simulator's path only; the lab's round trip \
                 is the link's delays plus its own veths, bridge and emulator (about 0.7 ms): set \
                 [down] and [up] delay_ms instead"
            ),
        }
    }
}

/// The contender roles the lab plays on a link-level scenario ([`Scenario::contenders_for`]),
/// in the matrix's order.
pub const LAB_ROLES: [ContenderRole; 8] = [
    ROLE_CONTENDERS[0].0,
    ROLE_CONTENDERS[1].0,
    ROLE_CONTENDERS[2].0,
    ROLE_CONTENDERS[3].0,
    ROLE_CONTENDERS[4].0,
    ROLE_CONTENDERS[5].0,
    ROLE_CONTENDERS[6].0,
    ROLE_CONTENDERS[7].0,
];

impl std::error::Error for LabPlayError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            LabPlayError::Deployment { .. }
            | LabPlayError::Role { .. }
            | LabPlayError::RoundTrip { .. } => None,
            LabPlayError::Link(e) => Some(e),
        }
    }
}

impl From<LabLinkError> for LabPlayError {
    fn from(e: LabLinkError) -> Self {
        LabPlayError::Link(e)
    }
}

impl Scenario {
    /// This scenario at `f` of its link's capacity (0 < `f` <= 1; `purple lab run --scale`,
    /// and what `--kernel` picks on a link faster than the guest keeps up with): the link
    /// scaled by [`LinkDesc::scaled`] (capacities, static CAKE rates, the daemons' range and
    /// start, the buffer's packets), delays, tests and contenders unchanged (a contender's
    /// name keeps its unscaled rate: the title says the factor, and the name is `NAME-xF`,
    /// so no seed figure is shown beside it). `f` = 1 is this scenario.
    /// Fails, naming `--scale`, for `f` outside (0, 1].
    pub fn scaled(mut self, f: f64) -> Result<Scenario, LabLinkError> {
        if f == 1.0 {
            return Ok(self);
        }
        let d = self.link.desc().clone().scaled(f, "--scale")?;
        self.link = Link::from_desc(&d)?;
        self.title = format!("{} (capacities, rates and buffer x{f})", self.title);
        // Not the scenario the seed published figures for.
        self.name = format!("{}-x{f}", self.name);
        Ok(self)
    }

    /// The highest capacity either way over the link's loop, bit/s (what a machine running
    /// it must keep up with).
    pub fn top_bit_s(&self) -> u64 {
        self.link.down().span().1.max(self.link.up().span().1)
    }

    /// Where this scenario deploys the shaper and its controller: always [`DEPLOYMENT`].
    pub fn deployment(&self) -> Deployment {
        DEPLOYMENT
    }

    /// This scenario's link and deployment as one link-level scenario (what the simulator
    /// plays beside a lab run: `purple lab run`'s simulator rows): its link with its rates, and
    /// the lab's deployment.
    pub fn link_scenario(&self) -> LinkScenario {
        LinkScenario {
            link: self.link.desc().clone(),
            deployment: self.deployment(),
            workload: self.workload(),
            path_rtt: None,
            roles: Some(self.roles()),
        }
    }

    /// The roles its contenders play ([`role_of`]), each once, in table order (a contender
    /// that plays none is left out).
    pub fn roles(&self) -> Vec<ContenderRole> {
        let mut v: Vec<ContenderRole> = Vec::new();
        for r in self.contenders.iter().filter_map(role_of) {
            if !v.contains(&r) {
                v.push(r);
            }
        }
        v
    }

    /// This scenario with its first test's (the radio contenders') load replaced by `w`'s
    /// VoIP calls and transfers (named as the radio's: `VoIP EF`, `VoIP EF 2`, ..., `TCP
    /// download BE`, `TCP download BE 2`, ...); its probes are kept, before them.
    #[must_use]
    pub fn with_workload(mut self, w: Workload) -> Scenario {
        if let Some(t) = self.tests.first_mut() {
            t.flows.retain(|f| {
                !matches!(
                    f.kind,
                    FlowKind::TcpDown | FlowKind::TcpUp | FlowKind::VoipUp
                )
            });
            let numbered = |base: String, k: u16| match k {
                0 => base,
                k => format!("{base} {}", k + 1),
            };
            t.flows.extend(
                (0..w.voip)
                    .map(|k| Flow::new(&numbered("VoIP EF".into(), k), FlowKind::VoipUp, 46)),
            );
            let name = |what: &str, k: u16| numbered(format!("TCP {what} BE"), k);
            t.flows.extend(
                (0..w.downloads).map(|k| Flow::new(&name("download", k), FlowKind::TcpDown, 0)),
            );
            t.flows
                .extend((0..w.uploads).map(|k| Flow::new(&name("upload", k), FlowKind::TcpUp, 0)));
        }
        self
    }

    /// The load of its first test (the one the radio's contenders run), as a link-level
    /// scenario's [`Workload`]: its TCP downloads and uploads and its VoIP calls (its probe
    /// flows are each backend's own).
    pub fn workload(&self) -> Workload {
        let count = |kind: FlowKind| {
            self.tests.first().map_or(0, |t| {
                t.flows.iter().filter(|f| f.kind == kind).count() as u16
            })
        };
        Workload {
            downloads: count(FlowKind::TcpDown),
            uploads: count(FlowKind::TcpUp),
            voip: count(FlowKind::VoipUp),
        }
    }

    /// The static shaper rate server → client, bit/s: the link's download `safe` rate.
    pub fn down_bit_s(&self) -> u64 {
        bits(self.link.desc().down.rates.safe)
    }

    /// The static shaper rate client → server, bit/s: the link's upload `safe` rate.
    pub fn up_bit_s(&self) -> u64 {
        bits(self.link.desc().up.rates.safe)
    }

    /// The `(download, upload)` rate ranges for a `purple control` contender: the link's
    /// rates each way, from `lo` to `hi`, starting at [`LinkRates::start_rate`] (a built-in
    /// scenario's as its builder chose them (`built_in`), a link's as [`Scenario::for_link`] did).
    pub fn control_range(&self) -> (RateRange, RateRange) {
        let range = |k: &LinkRates| RateRange {
            min: k.lo,
            base: k.start_rate().mbit(),
            max: k.hi,
        };
        let d = self.link.desc();
        (range(&d.down.rates), range(&d.up.rates))
    }

    /// The radio's testbed on the link `d` describes (`purple lab run --link FILE`, `purple
    /// demo --lab --link FILE`; `purple lab run --link-of NAME` for section C's scenario NAME's
    /// link, built in code): `purple linkem` plays its capacities (a trace built in code as the
    /// text written from it), delays (a link file's are 1 ms each way where it gives none,
    /// [`sim::link_file::DEFAULT_DELAY`], as the simulator's radio hop) and buffer; the radio's
    /// test and contenders run on it. The shaper rates and the daemons' range are the link's
    /// own ([`LinkDesc`]'s `rates`: a link file's derived by the simulator's rule,
    /// `sim::link_file::derived_rates`, a built-in link's as its builder chose them), over
    /// `seconds` if given (derived again over that length, as [`LinkDesc::with_secs`]): static
    /// CAKE at the `safe` rate each way (a file's median per-second capacity), the daemons from
    /// `lo` to `hi` (a file's: a tenth of the mean to 1.2 × the 90th percentile), starting at
    /// 60% of that top (as section C's controllers). A run at full length is the link's
    /// seconds.
    pub fn for_link(d: &LinkDesc, seconds: Option<f64>) -> Result<Scenario, LabLinkError> {
        let over = d.clone().with_secs(seconds)?;
        let (down, up) = (over.down.rates, over.up.rates);
        let link = Link::from_desc(d)?.with_rates(down, up);
        let radio = radio();
        let (title, static_name) = match &d.path {
            Some(path) => (
                format!(
                    "link {}: down {}, up {}, {}, {}-packet buffer; CAKE static {}/{} Mbit/s (the \
                     median)",
                    path.display(),
                    d.down.what,
                    d.up.what,
                    link.delay_words(),
                    link.buffer_packets(),
                    down.safe,
                    up.safe
                ),
                "CAKE static, the median capacity",
            ),
            None => (
                format!(
                    "link {} ({}): {}, {}-packet buffer; CAKE static {}/{} Mbit/s (its safe \
                     rates)",
                    d.name,
                    d.description,
                    link.delay_words(),
                    link.buffer_packets(),
                    down.safe,
                    up.safe
                ),
                "CAKE static, the link's safe rate",
            ),
        };
        Ok(Scenario {
            name: link.name().to_string(),
            title,
            sim_id: None,
            link,
            needs_linkem: true,
            full_seconds: d.secs,
            contenders: radio
                .contenders
                .iter()
                .map(|c| match c.short {
                    "cake" => Contender {
                        name: static_name,
                        ..*c
                    },
                    _ => *c,
                })
                .collect(),
            ..radio
        })
    }

    /// [`Scenario::for_link`] on a link-level scenario's link (`purple lab run --link-of
    /// NAME`, `purple demo --lab --link-of NAME`: section C's scenario NAME), when the
    /// scenario is deployed as the lab deploys every link ([`DEPLOYMENT`]). Fails, before
    /// building anything, with [`LabPlayError::Deployment`] for a scenario deployed otherwise
    /// (the lab plays one deployment only; [`LinkScenario::as_home_router`] deploys a link so
    /// where its probe path is the lab's), and with [`LabPlayError::Link`] where
    /// [`Scenario::for_link`] fails.
    pub fn for_link_scenario(
        sc: &LinkScenario,
        seconds: Option<f64>,
    ) -> Result<Scenario, LabPlayError> {
        if sc.deployment != DEPLOYMENT {
            return Err(LabPlayError::Deployment {
                link: sc.link.name.clone(),
                scenario: sc.deployment,
                lab: DEPLOYMENT,
            });
        }
        Ok(Scenario::for_link(&sc.link, seconds)?)
    }

    /// The radio's test and contenders on a link file's link `d`, run as its `[run]` table
    /// says (`purple lab run --link FILE`, `purple demo --lab --link FILE`): a deployment
    /// other than the lab's is refused as [`Scenario::for_link_scenario`] refuses it;
    /// `downloads`, `uploads` and `voip` replace the radio test's load
    /// ([`Scenario::with_workload`]; a key not given keeps the radio test's count); `contenders` are played as
    /// [`Scenario::contenders_for`] plays them, in that order, but for the oracles, which are
    /// left to the simulator's rows (a file naming only oracles, or a role the lab cannot play,
    /// is refused, naming it); `base_rtt_ms` is refused ([`LabPlayError::RoundTrip`]). A file
    /// without `[run]` gives what [`Scenario::for_link`] gives.
    pub fn for_link_file(
        d: &LinkDesc,
        run: &Run,
        seconds: Option<f64>,
    ) -> Result<Scenario, LabPlayError> {
        if run.base_rtt_ms.is_some() {
            return Err(LabPlayError::RoundTrip {
                link: d.name.clone(),
            });
        }
        let sc = run.apply(LinkScenario {
            deployment: DEPLOYMENT,
            ..LinkScenario::new(d.clone())
        });
        let mut s = Scenario::for_link_scenario(&sc, seconds)?;
        if run.downloads.is_some() || run.uploads.is_some() || run.voip.is_some() {
            let w = run.workload_over(s.workload());
            s = s.with_workload(w);
        }
        if let Some(roles) = &run.roles {
            // The oracles are the simulator's references (its rows beside a lab run show the
            // late oracle): a file written for both backends names them, and the lab leaves
            // them out; a file naming only oracles is refused as `contenders_for` refuses one.
            let real: Vec<ContenderRole> =
                roles.iter().copied().filter(|r| !is_oracle(*r)).collect();
            // (An empty list, which `Run::check` never gives, keeps the radio's contenders.)
            match (real.is_empty(), roles.first()) {
                (true, Some(&first)) => return Err(role_refused(first)),
                (true, None) => {}
                (false, _) => s.contenders = s.contenders_for(&real)?,
            }
        }
        Ok(s)
    }

    /// The contenders playing `roles` on this scenario, in the order given (`purple lab run
    /// --link-of NAME --contenders ID,...`, the matrix's ids): `fq-codel` its FQ-CoDel without
    /// shaping, `static-safe` its static CAKE (a link-level scenario's at the link's safe
    /// rates, [`Scenario::for_link`]), `purple`, `purple-aimd`, `cake-autorate` and
    /// `sqm-autorate` the `purple control` daemons with those laws ([`LAB_ROLES`]; the second
    /// and fourth only on request, where the testbed runs the daemon), `autorate-ingress`
    /// CAKE's own autorate on the download ([`CAKE_AUTORATE_INGRESS`], on request, on every
    /// scenario). Fails with [`LabPlayError::Role`], naming the first role it cannot play and
    /// why: the oracles (they read the link's true capacity), `purple-radio` (the radio's queue
    /// metrics) and `static-optimistic` (a second static rate); also a role of [`LAB_ROLES`]
    /// whose contender this scenario lacks (b1, b2).
    pub fn contenders_for(&self, roles: &[ContenderRole]) -> Result<Vec<Contender>, LabPlayError> {
        roles
            .iter()
            .map(|&role| {
                let short = match ROLE_CONTENDERS.iter().find(|(r, _)| *r == role) {
                    Some((_, short)) => *short,
                    None => return Err(role_refused(role)),
                };
                let daemons = self.contenders.contains(&CAKE_PURPLE);
                self.contenders
                    .iter()
                    .chain(ON_REQUEST.iter().filter(|_| daemons))
                    .chain(&QDISCS_ON_REQUEST)
                    .find(|c| plays(role, short, c))
                    .copied()
                    .ok_or(LabPlayError::Role {
                        role,
                        why: "this lab scenario has no such contender",
                    })
            })
            .collect()
    }
}

/// The lab's contender for each role of [`LAB_ROLES`], by its short name
/// ([`Contender::short`]): the one table both [`Scenario::contenders_for`] and [`role_of`]
/// read.
const ROLE_CONTENDERS: [(ContenderRole, &str); 8] = [
    (ContenderRole::Fifo, "fifo"),
    (ContenderRole::FqCodel, "fq_codel"),
    (ContenderRole::StaticSafe, "cake"),
    (ContenderRole::PurpleAimd, "purple-aimd"),
    (ContenderRole::CakeAutorate, "cake-autorate"),
    (ContenderRole::SqmAutorate, "sqm-autorate"),
    (ContenderRole::AutorateIngress, "autorate-ingress"),
    (ContenderRole::Purple, "purple"),
];

/// `purple control` contenders no scenario lists (its runs stay as they were), which a scenario
/// whose testbed runs the daemon (it lists [`CAKE_PURPLE`]) plays when asked for their roles
/// ([`Scenario::contenders_for`]).
const ON_REQUEST: [Contender; 2] = [CAKE_PURPLE_AIMD, CAKE_SQM_AUTORATE];

/// Qdisc contenders no scenario lists, which every scenario plays when asked for their roles
/// ([`Scenario::contenders_for`]).
const QDISCS_ON_REQUEST: [Contender; 1] = [CAKE_AUTORATE_INGRESS];

/// The role the lab's contender `c` plays (the matrix's vocabulary, [`LAB_ROLES`]), or `None`
/// for a contender that plays none (the seed's shaped HTB+pfifo and HTB+FQ-CoDel, the
/// passive-delay daemons, the real cake-autorate script). `purple lab run --link-of` runs the simulator's contender for each beside the
/// lab's.
pub fn role_of(c: &Contender) -> Option<ContenderRole> {
    ROLE_CONTENDERS
        .iter()
        .find(|(r, short)| plays(*r, short, c))
        .map(|(r, _)| *r)
}

/// Whether contender `c` plays `role`, whose contender is called `short` in
/// [`ROLE_CONTENDERS`]: the name matches and, for the two unshaped roles (`fifo`,
/// `fq-codel`), the qdisc shapes nothing (the seed's HTB+pfifo and HTB+FQ-CoDel of b1 and b2
/// shape at a rate, so they play neither).
fn plays(role: ContenderRole, short: &str, c: &Contender) -> bool {
    c.short == short
        && (!matches!(role, ContenderRole::Fifo | ContenderRole::FqCodel)
            || matches!(c.shape, Shape::Bare(_)))
}

/// Whether `role` is an oracle (told the link's true capacity): no lab contender plays one.
fn is_oracle(role: ContenderRole) -> bool {
    matches!(
        role,
        ContenderRole::Oracle
            | ContenderRole::OracleLate
            | ContenderRole::OracleLookahead
            | ContenderRole::OracleCensored(_)
            | ContenderRole::OracleSaturated(_)
    )
}

/// Why the lab plays no contender for `role` (one outside [`LAB_ROLES`]).
fn role_refused(role: ContenderRole) -> LabPlayError {
    let why = match role {
        ContenderRole::PurpleRadio => "it reads the radio's queue, which no daemon in the lab sees",
        ContenderRole::StaticOptimistic => {
            "the lab's static CAKE runs at the link's safe rates only"
        }
        ContenderRole::Oracle
        | ContenderRole::OracleLate
        | ContenderRole::OracleLookahead
        | ContenderRole::OracleCensored(_)
        | ContenderRole::OracleSaturated(_) => {
            "an oracle reads the link's true capacity, which no real controller can"
        }
        ContenderRole::Fifo
        | ContenderRole::FqCodel
        | ContenderRole::StaticSafe
        | ContenderRole::PurpleAimd
        | ContenderRole::CakeAutorate
        | ContenderRole::SqmAutorate
        | ContenderRole::AutorateIngress
        | ContenderRole::Purple => "this lab scenario has no such contender",
    };
    LabPlayError::Role { role, why }
}

/// CAKE driven by `purple control` with the PURPLE law (the radio's own contender).
pub const CAKE_PURPLE: Contender = Contender {
    name: "CAKE + PURPLE (purple control)",
    short: "purple",
    shape: Shape::Controlled {
        algorithm: "purple",
        cake: "besteffort",
        delay_source: "probes",
    },
};

/// CAKE driven by `purple control` with the PURPLE law on the probes and the passive delay
/// signal (`delay_source = "both"`; the router bridge measures it inline).
pub const CAKE_PURPLE_PASSIVE: Contender = Contender {
    name: "CAKE + PURPLE, probes + passive",
    short: "purple-passive",
    shape: Shape::Controlled {
        algorithm: "purple",
        cake: "besteffort",
        delay_source: "both",
    },
};

/// CAKE driven by `purple control` with the PURPLE law on the passive delay signal alone.
pub const CAKE_PURPLE_PASSIVE_ONLY: Contender = Contender {
    name: "CAKE + PURPLE, passive only",
    short: "purple-passive-only",
    shape: Shape::Controlled {
        algorithm: "purple",
        cake: "besteffort",
        delay_source: "passive",
    },
};

/// CAKE driven by `purple control` with the cake-autorate port.
pub const CAKE_AUTORATE: Contender = Contender {
    name: "CAKE + cake-autorate (purple control)",
    short: "cake-autorate",
    shape: Shape::Controlled {
        algorithm: "cake-autorate",
        cake: "besteffort",
        delay_source: "probes",
    },
};

/// CAKE driven by `purple control` with the PURPLE-AIMD law (the slides' AIMD on the probes'
/// delay), played on request by role ([`Scenario::contenders_for`]).
pub const CAKE_PURPLE_AIMD: Contender = Contender {
    name: "CAKE + PURPLE-AIMD (purple control)",
    short: "purple-aimd",
    shape: Shape::Controlled {
        algorithm: "purple-aimd",
        cake: "besteffort",
        delay_source: "probes",
    },
};

/// CAKE driven by `purple control` with our port of sqm-autorate's law, played on request by
/// role ([`Scenario::contenders_for`]).
pub const CAKE_SQM_AUTORATE: Contender = Contender {
    name: "CAKE + sqm-autorate (purple control)",
    short: "sqm-autorate",
    shape: Shape::Controlled {
        algorithm: "sqm-autorate",
        cake: "besteffort",
        delay_source: "probes",
    },
};

/// CAKE's own `autorate-ingress` on the download (the role `autorate-ingress`), besteffort as
/// the radio's static CAKE; played on request only ([`Scenario::contenders_for`]).
pub const CAKE_AUTORATE_INGRESS: Contender = Contender {
    name: "CAKE autorate-ingress (download)",
    short: "autorate-ingress",
    shape: Shape::CakeAutorateIngress("besteffort"),
};

/// CAKE driven by the real cake-autorate script through the tc shim (only with a checkout:
/// `purple lab run radio --cake-autorate DIR`), beside [`CAKE_AUTORATE`], our port of its law.
pub const CAKE_AUTORATE_SCRIPT: Contender = Contender {
    name: "CAKE + cake-autorate (the real script)",
    short: "cake-autorate.sh",
    shape: Shape::Script { cake: "besteffort" },
};

/// Every built-in scenario.
pub fn all() -> Vec<Scenario> {
    vec![b1(), b2(), radio(), tmobile(), starlink()]
}

/// The scenario called `name` (case-insensitive).
pub fn find(name: &str) -> Option<Scenario> {
    all()
        .into_iter()
        .find(|s| s.name.eq_ignore_ascii_case(name))
}

/// The seed's figure for `contender` in `test` of `scenario`, as text ("-" where none).
pub fn seed_figure(scenario: &str, contender: &str, test: &str) -> &'static str {
    match (scenario, contender, test) {
        ("b1", "HTB+FQ-CoDel", "upload") => "peak 6",
        ("b1", "HTB+FQ-CoDel", "download") => "peak ~1",
        ("b1", "HTB+FQ-CoDel", "bidir") => "peak 20",
        ("b1", "CAKE", "upload") => "peak ~6",
        ("b1", "CAKE", "download") => "peak ~1",
        ("b1", "CAKE", "bidir") => "peak 5",
        ("b2", "CAKE", _) => "ICMP mean 3.7-4.6, max 12-22; 17.5-18.1/2.4 Mbit/s",
        ("b2", "HTB+FQ-CoDel", _) => "ICMP mean 2.0-4.1, max 9-21; 15.8-17.3/2.3-2.5",
        ("b2", "HTB+pfifo 1000", _) => "ICMP mean 513-743, max 693-1202; 19.0-19.9/1.5-1.8",
        ("radio", "CAKE static 100 Mbit/s", _) => "C2: 6.13/5.73/32.5 ms, 94.2 Mbit/s",
        ("radio", "FQ-CoDel, no shaping", _) => "C1: 11.43/11.10/34.9 ms, 123 Mbit/s",
        _ => "-",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A probe is found by its id, so no test may hold two probes with one id; its name is
    /// its id's label (what tables and the Flent files have always called it).
    #[test]
    fn probes_have_one_id_each_per_test_and_are_named_by_it() {
        for s in all() {
            for t in &s.tests {
                let ids: Vec<ProbeId> = t.flows.iter().filter_map(Flow::probe_id).collect();
                let mut distinct = ids.clone();
                distinct.sort_by_key(|id| format!("{id:?}"));
                distinct.dedup();
                assert_eq!(distinct.len(), ids.len(), "{} {}: {ids:?}", s.name, t.name);
                for f in t.flows.iter().filter(|f| f.is_probe()) {
                    let id = f.probe_id().unwrap();
                    assert_eq!(f.name, id.label(), "{} {}", s.name, t.name);
                    assert_eq!(&Flow::probe(id), f);
                }
            }
        }
        assert_eq!(ProbeId::UDP_BE.label(), "Ping (ms) UDP BE");
        assert_eq!(ProbeId::Udp { dscp: 46 }.label(), "Ping (ms) UDP EF");
        assert_eq!(ProbeId::Icmp.label(), "Ping (ms) ICMP");
        assert_eq!(Flow::new("VoIP EF", FlowKind::VoipUp, 46).probe_id(), None);
    }

    #[test]
    fn every_contender_of_every_scenario_builds_as_one_of_our_qdiscs_both_ways() {
        for s in all() {
            for c in s.contenders.iter().chain(&QDISCS_ON_REQUEST) {
                for (dir, rate) in [
                    (Direction::Up, s.up_bit_s()),
                    (Direction::Down, s.down_bit_s()),
                ] {
                    let tc = c.tc(dir, rate);
                    assert!(
                        cake::AnyQdisc::from_tc(&tc, 1).is_ok(),
                        "{} {}: {tc:?} does not parse",
                        s.name,
                        c.name
                    );
                }
            }
        }
    }

    #[test]
    fn trace_capacity_reads_rates_from_the_mahimahi_lines() {
        // 10 opportunities in the first 100 ms (1.2 Mbit/s), none in the next, 1 in the third.
        let text = "1\n1\n2\n3\n4\n5\n50\n60\n70\n99\n250\n";
        assert_eq!(crate::link::trace_bins(text), vec![1_200_000, 0, 120_000]);
        assert!(crate::link::trace_bins("").is_empty());
        // The built-in T-Mobile trace: its mean and 1 s span as scenarios/traces/README.md says.
        let t = find("tmobile").expect("tmobile");
        let (lo, hi) = t.link.down().span();
        assert!((3_000_000..4_000_000).contains(&lo), "{lo}");
        assert!((31_000_000..32_000_000).contains(&hi), "{hi}");
        let mean: f64 = (0..600)
            .map(|k| t.link.down().at(k as f64 * 0.1) as f64)
            .sum::<f64>()
            / 600.0;
        assert!((13.5e6..14.5e6).contains(&mean), "{mean}");
        // It loops: 60 s later the rate is the same.
        assert_eq!(t.link.down().at(12.34), t.link.down().at(72.34));
        let (down, up) = t.control_range();
        assert!(down.max > 31.0 && up.max > 15.0, "{down:?} {up:?}");
    }

    #[test]
    fn b1_and_b2_use_the_seeds_testbed_and_contender_strings() {
        let b2 = find("B2").expect("b2");
        assert_eq!(
            (b2.up_bit_s(), b2.down_bit_s(), b2.link.down_delay_ms()),
            (3_000_000, 20_000_000, 45.0)
        );
        assert_eq!(
            CAKE.tc(Direction::Down, 20_000_000),
            "cake bandwidth 20000kbit diffserv3 triple-isolate"
        );
        assert_eq!(
            FIFO.tc(Direction::Up, 3_000_000),
            "htb rate 3000kbit burst 15k pfifo limit 1000"
        );
        let rrul = &b2.tests[0].flows;
        let tcp: Vec<u8> = rrul
            .iter()
            .filter(|f| f.kind == FlowKind::TcpDown)
            .map(|f| f.dscp)
            .collect();
        assert_eq!(tcp, vec![0, 8, 40, 46], "RRUL's CS0/CS1/CS5/EF downloads");
        assert_eq!(find("b1").expect("b1").tests.len(), 3);
        assert!(find("nope").is_none());
    }

    #[test]
    fn every_test_is_written_as_a_flent_test_its_flows_fit() {
        let b1 = find("b1").expect("b1");
        let tests: Vec<&str> = b1
            .tests
            .iter()
            .map(|t| t.flent_labels(0.0).test.name())
            .collect();
        assert_eq!(tests, ["tcp_upload", "tcp_download", "tcp_bidirectional"]);
        let rrul = find("b2").expect("b2").tests[0].flent_labels(1.0);
        assert_eq!(rrul.test, FlentTest::Rrul);
        assert_eq!(rrul.delay_s, 1.0);
        // Every rrul flow of the lab is one of rrul's twelve series.
        assert_eq!(rrul.series.len(), 12);
        let radio = find("radio").expect("radio").tests[0].flent_labels(0.0);
        assert_eq!(radio.test, FlentTest::RrulBeNflows { up: 1, down: 2 });
        assert_eq!(
            radio.series_of("TCP download BE 2"),
            Some("TCP download BE::2")
        );
        assert_eq!(radio.series_of("VoIP EF"), None, "an extra series");
        for s in all() {
            for t in &s.tests {
                let l = t.flent_labels(0.0);
                let known = l.test.data_series();
                for (flow, series) in &l.series {
                    assert!(known.contains(series), "{} {}: {series}", s.name, t.name);
                    assert!(t.flows.iter().any(|f| &f.name == flow), "{flow}");
                }
            }
        }
    }

    /// `purple linkem`'s options and trace text for a scenario's link, as a string (the trace
    /// files named `UP` and `DOWN`).
    fn linkem(s: &Scenario) -> (String, Vec<(std::path::PathBuf, String)>) {
        let (args, files) = s
            .link
            .linkem_args(Path::new("UP"), Path::new("DOWN"))
            .expect("plays");
        (args.join(" "), files)
    }

    #[test]
    fn a_scaled_scenario_plays_its_link_at_that_share_with_its_rates_and_buffer() {
        let radio = find("radio").expect("radio");
        assert_eq!(radio.top_bit_s(), 130_000_000);
        let s = radio.clone().scaled(0.1).expect("0.1");
        assert_eq!(s.name, "radio-x0.1", "not the scenario the seed published");
        assert!(
            s.title.ends_with("(capacities, rates and buffer x0.1)"),
            "{}",
            s.title
        );
        let (args, files) = linkem(&s);
        assert_eq!(
            args,
            "--up 5000kbit --down-trace DOWN --delay-ms 5 --buffer-packets 100"
        );
        // 13 then 8 Mbit/s every 5 s (the trace written from the scaled schedule).
        for (t, bits) in [(0.05, 13_000_000), (5.05, 8_000_000)] {
            assert_eq!(s.link.down().at(t), bits, "{t}");
        }
        assert_eq!(files.len(), 1);
        assert_eq!((s.down_bit_s(), s.up_bit_s()), (10_000_000, 5_000_000));
        let (down, up) = s.control_range();
        assert!((down.max - 13.65).abs() < 1e-9 && (up.base - 4.5).abs() < 1e-9);
        assert_eq!(
            (s.tests.clone(), s.contenders.clone()),
            (radio.tests.clone(), radio.contenders.clone())
        );
        assert_eq!(radio.clone().scaled(1.0).expect("1"), radio);
        let e = radio.scaled(0.0).expect_err("0 is no share");
        assert!(
            e.to_string().contains("--scale 0: accepted 0 < f <= 1"),
            "{e}"
        );
    }

    #[test]
    fn the_radio_and_tmobile_are_their_link_files_with_the_linkem_options_they_always_had() {
        let radio = find("radio").expect("radio");
        // What `start_delay` handed `purple linkem` for `Capacity::Steps { up 50 Mbit/s, down
        // [130, 80] Mbit/s, period 5 s }`, 5 ms, 1000 packets.
        let (args, files) = linkem(&radio);
        assert_eq!(
            args,
            "--up 50000kbit --down-trace DOWN --delay-ms 5 --buffer-packets 1000"
        );
        assert_eq!(files.len(), 1);
        assert_eq!(files[0].0, Path::new("DOWN"));
        assert!(
            files[0].1 == crate::link::legacy_steps_trace([130_000_000, 80_000_000], 5),
            "the radio's trace text changed"
        );
        // The capacity series and ranges read the same steps: 130 then 80 every 5 s, looping.
        for (t, bits) in [
            (0.05, 130),
            (4.95, 130),
            (5.05, 80),
            (9.95, 80),
            (10.05, 130),
        ] {
            assert_eq!(radio.link.down().at(t), bits * 1_000_000, "{t}");
            assert_eq!(radio.link.down().at(t + 60.0), bits * 1_000_000, "{t}");
        }
        assert_eq!(radio.link.down_words(), "130/80 Mbit/s every 5 s");
        assert_eq!(radio.link.delay_words(), "5 ms each way");
        let (down, up) = radio.control_range();
        assert_eq!((down.min, down.base, down.max), (13.0, 100.0, 136.5));
        assert_eq!((up.min, up.base, up.max), (5.0, 45.0, 50.0));
        // Starlink's steps too.
        let (args, files) = linkem(&find("starlink").expect("starlink"));
        assert_eq!(
            args,
            "--up 20000kbit --down-trace DOWN --delay-ms 15 --buffer-packets 1000"
        );
        assert!(files[0].1 == crate::link::legacy_steps_trace([150_000_000, 60_000_000], 8));
        // The recorded link, read from scenarios/links/tmobile-lte.toml, hands its traces as
        // they are with the options the lab always gave it (values taken before it was a file).
        let tmobile = find("tmobile").expect("tmobile");
        let (args, files) = linkem(&tmobile);
        assert_eq!(
            args,
            "--up-trace UP --down-trace DOWN --delay-ms 20 --buffer-packets 1000"
        );
        assert_eq!(files.len(), 2);
        assert_eq!(
            (files[0].0.as_path(), files[1].0.as_path()),
            (Path::new("UP"), Path::new("DOWN"))
        );
        assert!(
            files[0].1 == TM_UP && files[1].1 == TM_DOWN,
            "the traces' text changed"
        );
        // The two files as they were compiled in: bytes, lines and FNV-1a 64 of each.
        let fnv = |t: &str| {
            t.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
                (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
            })
        };
        let shape = |t: &str| (t.len(), t.lines().count(), fnv(t));
        assert_eq!(shape(&files[0].1), (185_576, 31_758, 0x5f0f_a0b1_c8c4_d50f));
        assert_eq!(shape(&files[1].1), (395_391, 69_905, 0x90cf_00fa_6a18_7390));
        // The link the code built before, but for its name (now the file's): the two traces as
        // recorded, 20 ms each way, the built-in buffer.
        assert_eq!(tmobile.link.name(), "lab-tmobile-lte");
        for (c, text) in [(tmobile.link.up(), TM_UP), (tmobile.link.down(), TM_DOWN)] {
            let bins = crate::link::trace_bins(text);
            assert_eq!(c, DirCapacity::Trace { text, bins: &bins });
        }
        assert_eq!(
            (
                tmobile.link.up_delay_ms(),
                tmobile.link.down_delay_ms(),
                tmobile.link.buffer_packets()
            ),
            (20.0, 20.0, BUILT_IN_BUFFER_PACKETS)
        );
        // And so the same capacity spans, daemon ranges and words.
        assert_eq!(tmobile.link.down().span(), (3_552_000, 31_560_000));
        assert_eq!(tmobile.link.up().span(), (612_000, 15_552_000));
        let (down, up) = tmobile.control_range();
        assert!((down.min - 3.156).abs() < 1e-9, "{down:?}");
        assert_eq!((down.base, down.max), (14.0, 31.56 * 1.05));
        assert!((up.min - 1.5552).abs() < 1e-9, "{up:?}");
        // The start rates are whole bytes per second (`LinkRates::start_rate`).
        assert!((up.base - 15.552 * 0.9).abs() < 1e-5, "{up:?}");
        assert_eq!(up.max, 15.552);
        assert_eq!(
            (tmobile.down_bit_s(), tmobile.up_bit_s()),
            (14_000_000, 6_000_000)
        );
        assert_eq!(tmobile.link.delay_words(), "20 ms each way");
        assert_eq!(tmobile.link.down_words(), "trace lab-tmobile-lte");
        // The fixed links hand their rates.
        let (args, files) = linkem(&find("b1").expect("b1"));
        assert_eq!(
            args,
            "--up 100000kbit --down 100000kbit --delay-ms 45 --buffer-packets 1000"
        );
        assert!(files.is_empty());
    }

    /// What the emulator is told of a link: its name, capacities, delays and buffer.
    fn played(l: &Link) -> (String, DirCapacity<'_>, DirCapacity<'_>, f64, f64, u32) {
        (
            l.name().to_string(),
            l.up(),
            l.down(),
            l.up_delay_ms(),
            l.down_delay_ms(),
            l.buffer_packets(),
        )
    }

    #[test]
    fn a_lab_scenario_is_a_link_scenario_with_its_tests_bulk_tcp_as_workload() {
        let radio = find("radio").expect("radio");
        let sc = radio.link_scenario();
        assert_eq!(sc.deployment, DEPLOYMENT);
        assert_eq!(&sc.link, radio.link.desc());
        assert_eq!(
            sc.workload,
            Workload {
                downloads: 2,
                uploads: 1,
                voip: 1
            }
        );
        assert_eq!(
            sc.workload.to_string(),
            "2 TCP downloads, 1 upload, 1 VoIP call"
        );
        // b1's first test is its upload.
        assert_eq!(
            find("b1").expect("b1").workload(),
            Workload {
                downloads: 0,
                uploads: 1,
                voip: 0
            }
        );
    }

    #[test]
    fn a_link_files_run_table_sets_the_labs_load_and_contenders_and_what_it_cannot_play_is_refused()
    {
        let file = |run: &str| {
            LinkDesc::parse_with_run(
                Path::new("mine.toml"),
                &format!(
                    "duration_s = 20.0\n[down]\nrate = \"40mbit\"\ndelay_ms = 5.0\n[up]\n\
                     rate = \"10mbit\"\n{run}"
                ),
                &|_| unreachable!("no files"),
            )
            .expect("parses")
        };
        // Without `[run]`: what `for_link` gives.
        let (d, run) = file("");
        let plain = Scenario::for_link_file(&d, &run, None).expect("plays");
        assert_eq!(plain, Scenario::for_link(&d, None).expect("plays"));
        // The load and the contenders as the file says, the probes and VoIP kept.
        let (d, run) = file(
            "[run]\ndeployment = \"home-router\"\ndownloads = 3\nuploads = 0\nvoip = 2\n\
             contenders = [\"purple\", \"static-safe\"]\n",
        );
        let s = Scenario::for_link_file(&d, &run, None).expect("plays");
        assert_eq!(
            s.workload(),
            Workload {
                downloads: 3,
                uploads: 0,
                voip: 2
            }
        );
        let names: Vec<&str> = s.tests[0].flows.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(
            names[2..],
            [
                "VoIP EF",
                "VoIP EF 2",
                "TCP download BE",
                "TCP download BE 2",
                "TCP download BE 3"
            ]
        );
        assert_eq!(names.len(), 7, "{names:?}");
        assert_eq!(
            s.contenders.iter().map(|c| c.short).collect::<Vec<_>>(),
            ["purple", "cake"]
        );
        let sc = s.link_scenario();
        assert_eq!(
            sc.roles,
            Some(vec![ContenderRole::Purple, ContenderRole::StaticSafe])
        );
        assert_eq!(sc.workload, s.workload());
        // What the lab cannot play is refused, naming it.
        let refused = |run: &str| {
            let (d, run) = file(run);
            Scenario::for_link_file(&d, &run, None)
                .expect_err("refused")
                .to_string()
        };
        let e = refused("[run]\ndeployment = \"slides\"\n");
        assert!(
            e.contains("mine is deployed as the lab cannot play it"),
            "{e}"
        );
        let (d, run) = file("[run]\ncontenders = [\"purple\", \"oracle-late\"]\n");
        let s = Scenario::for_link_file(&d, &run, None).expect("the oracle left out");
        assert_eq!(
            s.contenders.iter().map(|c| c.short).collect::<Vec<_>>(),
            ["purple"]
        );
        let e = refused("[run]\ncontenders = [\"oracle-late\"]\n");
        assert!(e.contains("cannot play contender oracle-late"), "{e}");
        let e = refused("[run]\ncontenders = [\"purple\", \"purple-radio\"]\n");
        assert!(e.contains("cannot play contender purple-radio"), "{e}");
        let e = refused("[run]\nbase_rtt_ms = 30.0\n");
        assert!(
            e.starts_with("mine's [run] base_rtt_ms sets the simulator's path only"),
            "{e}"
        );
    }

    #[test]
    fn the_starlink_link_plays_its_two_steps() {
        let l = Link::from_desc(&starlink_link()).expect("plays");
        assert_eq!(l.down().span(), (60_000_000, 150_000_000));
        assert_eq!(
            (l.down().at(1.0), l.down().at(9.0)),
            (150_000_000, 60_000_000)
        );
        assert_eq!(l.down().at(17.0), 150_000_000, "it loops after 16 s");
        assert_eq!(l.up(), DirCapacity::Rate(20_000_000));
        assert_eq!(l.delay_words(), "15 ms each way");
        assert_eq!(l.down_words(), "150/60 Mbit/s every 8 s");
        assert_eq!(
            played(&find("starlink").expect("starlink").link),
            played(&l)
        );
    }

    #[test]
    fn the_link_files_on_disk_are_the_compiled_in_links() {
        for (file, scenario) in [("lab-radio.toml", "radio"), ("tmobile-lte.toml", "tmobile")] {
            let path = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../scenarios/links")
                .join(file);
            let d = LinkDesc::read(&path).expect("reads");
            let built_in = find(scenario).expect("scenario").link;
            assert_eq!(
                played(&Link::from_desc(&d).expect("plays")),
                played(&built_in),
                "{file}"
            );
            let s = Scenario::for_link(&d, None).expect("plays");
            assert_eq!(played(&s.link), played(&built_in), "{file}");
            // The same link but for where it was read from (and so its words) and its rates
            // (the file's by the simulator's rule, the built-in scenario's chosen by hand).
            let desc = LinkDesc {
                path: d.path.clone(),
                description: d.description.clone(),
                ..built_in.desc().clone()
            }
            .with_rates(s.link.desc().down.rates, s.link.desc().up.rates);
            assert_eq!(&desc, s.link.desc(), "{file}");
            if scenario == "tmobile" {
                // `purple lab run --link` on it takes the simulator's rule, not `tmobile`'s
                // (static CAKE at the means, 14/6): static CAKE at the median 1 s rates,
                // the daemons from a tenth of the mean to 1.2 x the 90th percentile.
                assert_eq!((s.down_bit_s(), s.up_bit_s()), (13_400_000, 6_800_000));
                let (down, up) = s.control_range();
                let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
                // The start, 60% of the top, is whole bytes per second
                // (`LinkRates::start_rate`, as section C's closed loop starts).
                let near = |a: f64, b: f64| (a - b).abs() < 1e-5;
                assert!(
                    close(down.min, 1.39822) && near(down.base, 18.2736) && close(down.max, 30.456),
                    "{down:?}"
                );
                assert!(
                    close(up.min, 0.63516) && near(up.base, 6.84288) && close(up.max, 11.4048),
                    "{up:?}"
                );
            }
        }
    }

    #[test]
    fn a_link_file_runs_the_radios_test_and_contenders_at_the_simulators_rates() {
        let path = Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../scenarios/links/lab-radio.toml"
        ));
        let d = LinkDesc::read(path).expect("reads");
        let s = Scenario::for_link(&d, None).expect("plays");
        let radio = find("radio").expect("radio");
        // The same link as the built-in radio.
        assert_eq!(played(&s.link), played(&radio.link));
        assert_eq!(s.name, "lab-radio");
        assert_eq!(s.full_seconds, 60.0);
        assert_eq!(s.tests, radio.tests);
        let shorts: Vec<&str> = s.contenders.iter().map(|c| c.short).collect();
        assert_eq!(
            shorts,
            ["cake", "fq_codel", "fifo", "purple", "cake-autorate"]
        );
        // The simulator's rule over 60 s of 130/80: up fixed at 50 (static 50, range 5 to 60,
        // from 36), down static at the median (30 s of each: the rounded rank is 130) and
        // range 10.5 to 156 from 93.6.
        assert_eq!((s.down_bit_s(), s.up_bit_s()), (130_000_000, 50_000_000));
        let (down, up) = s.control_range();
        assert!(
            (down.min - 10.5).abs() < 1e-9 && (down.max - 156.0).abs() < 1e-9,
            "{down:?}"
        );
        assert!((down.base - 93.6).abs() < 1e-9, "{down:?}");
        assert!(
            (up.min - 5.0).abs() < 1e-9 && (up.max - 60.0).abs() < 1e-9,
            "{up:?}"
        );
        assert!(s.title.contains("lab-radio.down"), "{}", s.title);
        // --seconds changes the window the rates come from, not the link.
        let short = Scenario::for_link(&d, Some(5.0)).expect("plays");
        assert!((short.control_range().0.min - 13.0).abs() < 1e-9);
        assert_eq!(played(&short.link), played(&s.link));
        assert!(Scenario::for_link(&d, Some(0.5)).is_err());
    }

    #[test]
    fn a_link_scenario_deployed_otherwise_is_refused_naming_each_part_and_plays_as_a_home_router() {
        // The radio's link as code builds one (section C's links have no file).
        let d = LinkDesc {
            path: None,
            ..radio_link().expect("plays").desc().clone()
        };
        let slides = LinkScenario::new(d);
        let e = Scenario::for_link_scenario(&slides, None).expect_err("deployed as the slides");
        assert!(
            matches!(
                e,
                LabPlayError::Deployment { scenario, lab, .. }
                    if scenario == Deployment::SLIDES && lab == DEPLOYMENT
            ),
            "{e:?}"
        );
        let words = e.to_string();
        for part in Deployment::SLIDES
            .differences(&DEPLOYMENT)
            .iter()
            .chain(&DEPLOYMENT.differences(&Deployment::SLIDES))
        {
            assert!(words.contains(part.as_str()), "{part}: {words}");
        }
        assert!(
            words.starts_with("lab-radio is deployed as the lab cannot play it: "),
            "{words}"
        );
        assert!(
            words.contains("--home-router plays the link as a home router"),
            "{words}"
        );
        assert!(!words.contains("--fault"), "{words}");
        // As a home router it plays: the link as `for_link` plays it, its words saying how.
        let router = slides.clone().as_home_router();
        let s = Scenario::for_link_scenario(&router, Some(5.0)).expect("a home router plays");
        let plain = Scenario::for_link(&router.link, Some(5.0)).expect("plays");
        assert_eq!(s.link, plain.link);
        assert_eq!(s.title, plain.title);
        assert_eq!(s.control_range(), plain.control_range());
        assert!(s.title.contains("deployed as a home router"), "{}", s.title);
        // A probe path the lab has not stays refused as a home router, naming it and the
        // faults that are near it.
        let no_probes = LinkScenario {
            deployment: Deployment {
                probes: ProbePath::Dropped,
                ..Deployment::SLIDES
            },
            ..slides
        };
        let words = Scenario::for_link_scenario(&no_probes, None)
            .expect_err("probes lost")
            .to_string();
        assert!(words.contains("but keeps its probe path"), "{words}");
        let words = Scenario::for_link_scenario(&no_probes.as_home_router(), None)
            .expect_err("probes lost as a home router too")
            .to_string();
        assert!(
            words.starts_with(
                "lab-radio is deployed as the lab cannot play it: every probe lost (the lab: probes \
                 queued with the data and answered); the lab plays no probe path but its own: \
                 its --fault icmp-apart and --fault no-icmp-echo are near"
            ),
            "{words}"
        );
        assert!(!words.contains("--home-router"), "{words}");
    }

    #[test]
    fn contenders_by_role_map_to_the_labs_and_a_role_it_cannot_play_is_refused_naming_it() {
        let d = LinkDesc {
            path: None,
            ..radio_link().expect("plays").desc().clone()
        };
        let s = Scenario::for_link_scenario(&LinkScenario::new(d).as_home_router(), None)
            .expect("plays");
        let roles = [
            ContenderRole::Purple,
            ContenderRole::FqCodel,
            ContenderRole::StaticSafe,
            ContenderRole::SqmAutorate,
            ContenderRole::CakeAutorate,
            ContenderRole::PurpleAimd,
            ContenderRole::AutorateIngress,
            ContenderRole::Fifo,
        ];
        let cs = s.contenders_for(&roles).expect("the lab's roles");
        let shorts: Vec<&str> = cs.iter().map(|c| c.short).collect();
        assert_eq!(
            shorts,
            [
                "purple",
                "fq_codel",
                "cake",
                "sqm-autorate",
                "cake-autorate",
                "purple-aimd",
                "autorate-ingress",
                "fifo"
            ]
        );
        // The FIFO role is the radio's pfifo without a shaper.
        assert_eq!(cs[7].shape, Shape::Bare("pfifo limit 1000"));
        // CAKE's own autorate on the download (after the radio), static on the upload (before
        // it), both from the link's safe rates.
        assert_eq!(
            cs[6].tc(Direction::Down, s.down_bit_s()),
            format!(
                "cake bandwidth {}kbit besteffort autorate-ingress ingress",
                s.down_bit_s() / 1000
            )
        );
        assert_eq!(
            cs[6].tc(Direction::Up, s.up_bit_s()),
            format!("cake bandwidth {}kbit besteffort", s.up_bit_s() / 1000)
        );
        assert!(all().iter().all(|x| !x.contenders.contains(&cs[6])));
        assert_eq!(cs[0], CAKE_PURPLE);
        assert_eq!(cs[2].name, "CAKE static, the link's safe rate");
        // The two daemons on request run the daemon's laws of those names, which the daemon
        // accepts; no scenario lists them, so its runs are as before.
        for (c, law) in [(cs[3], "sqm-autorate"), (cs[5], "purple-aimd")] {
            assert!(
                matches!(c.shape, Shape::Controlled { algorithm, .. } if algorithm == law),
                "{c:?}"
            );
            assert!(
                daemon::config::algorithms().iter().any(|k| k.name() == law),
                "{law}"
            );
            assert!(all().iter().all(|x| !x.contenders.contains(&c)), "{law}");
        }
        let mut sorted = roles;
        sorted.sort_by_key(|r| ContenderRole::ALL.iter().position(|x| x == r));
        assert_eq!(sorted, LAB_ROLES);
        // Each contender names the role it plays back; the others play none.
        for (c, role) in cs.iter().zip(roles) {
            assert_eq!(role_of(c), Some(role), "{}", c.short);
        }
        for c in s.contenders.iter().filter(|c| !cs.contains(c)) {
            assert_eq!(role_of(c), None, "{}", c.short);
        }
        // b1's and b2's HTB+pfifo and HTB+FQ-CoDel shape at a rate: they play neither unshaped
        // role, although their short names are those roles' contenders'.
        assert_eq!(role_of(&FIFO), None);
        assert_eq!(role_of(&FQ_CODEL), None);
        // Every other role is refused, naming it.
        for role in ContenderRole::ALL.iter().filter(|r| !LAB_ROLES.contains(r)) {
            let e = s
                .contenders_for(&[ContenderRole::Purple, *role])
                .expect_err("not the lab's");
            assert!(
                matches!(e, LabPlayError::Role { role: r, .. } if r == *role),
                "{e:?}"
            );
            let words = e.to_string();
            assert!(
                words.starts_with(&format!("the lab cannot play contender {}: ", role.id()))
                    && words.ends_with(
                        "(the lab plays fifo, fq-codel, static-safe, purple-aimd, cake-autorate, \
                         sqm-autorate, autorate-ingress, purple)"
                    ),
                "{words}"
            );
        }
        // A lab scenario without the contender refuses the role too.
        let b1 = find("b1").expect("b1");
        let e = b1
            .contenders_for(&[ContenderRole::Purple])
            .expect_err("b1 has no daemon");
        assert!(e.to_string().contains("has no such contender"), "{e}");
        // Nor its shaped FIFO or FQ-CoDel as the unshaped roles.
        for role in [ContenderRole::Fifo, ContenderRole::FqCodel] {
            let e = b1.contenders_for(&[role]).expect_err("b1 shapes them");
            assert!(e.to_string().contains("has no such contender"), "{e}");
        }
        // Nor does b1 play the daemons on request: its testbed runs none.
        let e = b1
            .contenders_for(&[ContenderRole::PurpleAimd])
            .expect_err("b1 has no daemon");
        assert!(e.to_string().contains("has no such contender"), "{e}");
    }
}
