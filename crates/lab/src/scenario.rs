//! The lab's scenarios: the seeds' testbeds (evaluation.md B1, B2 and the PURPLE radio link)
//! with their flows and contenders as tc strings.

use sim::flent::{self, FlentLabels, FlentTest, Role};

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
    /// start rate is the scenario's shaper rate; the daemon's range comes from the link
    /// emulator's capacity ([`Scenario::control_range`]).
    Controlled {
        /// The daemon's `algorithm` option.
        algorithm: &'static str,
        /// CAKE's arguments after the bandwidth.
        cake: &'static str,
        /// The daemon's `delay_source` (`probes`, `passive`, `both`); with the passive signal
        /// the router bridge runs `--passive` and the daemon reads it from there.
        delay_source: &'static str,
    },
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
    /// The tc string of its qdisc for a direction shaped to `rate_bit_s`.
    pub fn tc(&self, rate_bit_s: u64) -> String {
        let kbit = rate_bit_s / 1000;
        match self.shape {
            Shape::Cake(a) | Shape::Controlled { cake: a, .. } | Shape::Script { cake: a } => {
                format!("cake bandwidth {kbit}kbit {a}")
            }
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

/// The link emulator's capacity for the bottleneck-behind-the-shaper or the radio.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Capacity {
    /// Fixed rate each way (bit/s), above the shaper.
    Fixed {
        /// Client → server.
        up_bit_s: u64,
        /// Server → client.
        down_bit_s: u64,
    },
    /// The radio: fixed uplink, a downlink that steps between two rates every `period_s`
    /// (a Mahimahi trace handed to `purple linkem --down-trace`).
    Steps {
        /// Client → server, bit/s.
        up_bit_s: u64,
        /// The two downlink rates, bit/s.
        down_bit_s: [u64; 2],
        /// Seconds each rate lasts.
        period_s: u64,
    },
    /// A recorded link: Mahimahi traces for both directions (handed to `purple linkem
    /// --up-trace/--down-trace`; they loop at their end).
    Trace {
        /// The trace's name in tables.
        name: &'static str,
        /// Client → server trace text.
        up: &'static str,
        /// Server → client trace text.
        down: &'static str,
    },
}

/// The T-Mobile LTE trace (first 60 s, mahimahi; `scenarios/traces/README.md`).
const TM_DOWN: &str = include_str!("../../../scenarios/traces/TMobile-LTE-short-60s.down");
const TM_UP: &str = include_str!("../../../scenarios/traces/TMobile-LTE-short-60s.up");

/// Mahimahi trace bin for rates read from a trace: 100 ms.
const TRACE_BIN_MS: u64 = 100;

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

/// [`trace_bins`] of a built-in trace, computed once.
fn cached_bins(text: &'static str) -> std::sync::Arc<Vec<u64>> {
    use std::sync::{Arc, Mutex, OnceLock};
    type Cache = Mutex<Vec<(usize, Arc<Vec<u64>>)>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let key = text.as_ptr() as usize;
    let cache = CACHE.get_or_init(|| Mutex::new(Vec::new()));
    let mut c = cache.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, b)) = c.iter().find(|(k, _)| *k == key) {
        return Arc::clone(b);
    }
    let b = Arc::new(trace_bins(text));
    c.push((key, Arc::clone(&b)));
    b
}

/// The lowest and highest 1 s average rate of a trace, bit/s.
fn trace_span(text: &'static str) -> (u64, u64) {
    let bins = cached_bins(text);
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

impl Capacity {
    /// The link emulator's downlink capacity (bit/s) `t` seconds after it started: the fixed
    /// rate, the step in force (the trace repeats every two periods), or a recorded trace's rate
    /// over the 100 ms around `t` (the trace loops).
    pub fn down_at(&self, t: f64) -> u64 {
        match *self {
            Capacity::Trace { down, .. } => {
                let bins = cached_bins(down);
                if bins.is_empty() {
                    return 0;
                }
                let k = (t.max(0.0) * 1000.0 / TRACE_BIN_MS as f64) as usize;
                bins[k % bins.len()]
            }
            Capacity::Fixed { down_bit_s, .. } => down_bit_s,
            Capacity::Steps {
                down_bit_s,
                period_s,
                ..
            } => {
                let k = (t.max(0.0) / period_s.max(1) as f64) as u64;
                down_bit_s[(k % 2) as usize]
            }
        }
    }

    /// The uplink capacity, bit/s (a trace's highest 1 s rate).
    pub fn up(&self) -> u64 {
        match *self {
            Capacity::Fixed { up_bit_s, .. } | Capacity::Steps { up_bit_s, .. } => up_bit_s,
            Capacity::Trace { up, .. } => trace_span(up).1,
        }
    }

    /// The lowest and highest downlink capacity, bit/s (a trace's over 1 s averages).
    pub fn down_span(&self) -> (u64, u64) {
        match *self {
            Capacity::Trace { down, .. } => trace_span(down),
            Capacity::Fixed { down_bit_s, .. } => (down_bit_s, down_bit_s),
            Capacity::Steps { down_bit_s, .. } => (
                down_bit_s[0].min(down_bit_s[1]),
                down_bit_s[0].max(down_bit_s[1]),
            ),
        }
    }
}

/// A lab scenario.
#[derive(Clone, Debug, PartialEq)]
pub struct Scenario {
    /// Name for `purple lab run NAME`.
    pub name: &'static str,
    /// One line.
    pub title: &'static str,
    /// The simulator experiment with the same testbed (`purple sim report` id), if any.
    pub sim_id: Option<&'static str>,
    /// Shaper rate client → server, bit/s.
    pub up_bit_s: u64,
    /// Shaper rate server → client, bit/s.
    pub down_bit_s: u64,
    /// One-way propagation delay of the link emulator, ms.
    pub one_way_ms: u32,
    /// The link emulator's capacity.
    pub capacity: Capacity,
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
        name: "b1",
        title: "B1: tcp_upload / tcp_download / tcp_bidirectional at 20/3 Mbit/s, 45 ms each way",
        sim_id: Some("B1"),
        up_bit_s: 3_000_000,
        down_bit_s: 20_000_000,
        one_way_ms: 45,
        capacity: Capacity::Fixed {
            up_bit_s: 100_000_000,
            down_bit_s: 100_000_000,
        },
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
        name: "b2",
        title: "B2: RRUL (4 TCP each way on CS0/CS1/CS5/EF + ICMP/UDP probes) at 20/3 Mbit/s",
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
        name: "radio",
        title: "PURPLE radio: downlink stepping 130/80 Mbit/s behind CAKE static 100 Mbit/s",
        sim_id: None,
        up_bit_s: 50_000_000,
        down_bit_s: 100_000_000,
        one_way_ms: 5,
        capacity: Capacity::Steps {
            up_bit_s: 50_000_000,
            down_bit_s: [130_000_000, 80_000_000],
            period_s: 5,
        },
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
            Contender {
                name: "FQ-CoDel, no shaping",
                short: "fq_codel",
                shape: Shape::Bare("fq_codel"),
            },
            Contender {
                name: "pfifo 1000, no shaping",
                short: "fifo",
                shape: Shape::Bare("pfifo limit 1000"),
            },
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
        name: "starlink",
        title: "Starlink-like: downlink stepping 150/60 Mbit/s every 8 s, 15 ms each way, deep \
                queue; daemons probe with ICMP echo",
        sim_id: Some("C-starlink-no-probes"),
        up_bit_s: 20_000_000,
        down_bit_s: 100_000_000,
        one_way_ms: 15,
        capacity: Capacity::Steps {
            up_bit_s: 20_000_000,
            down_bit_s: [150_000_000, 60_000_000],
            period_s: 8,
        },
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

/// The PURPLE radio on a recorded link: the T-Mobile LTE trace both ways.
fn tmobile() -> Scenario {
    Scenario {
        name: "tmobile",
        title: "PURPLE on a recorded link: T-Mobile LTE trace (60 s, ~14 down / 6 up Mbit/s)",
        sim_id: None,
        up_bit_s: 6_000_000,
        down_bit_s: 14_000_000,
        one_way_ms: 20,
        capacity: Capacity::Trace {
            name: "T-Mobile LTE (mahimahi)",
            up: TM_UP,
            down: TM_DOWN,
        },
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

impl Scenario {
    /// The `(download, upload)` rate ranges for a `purple control` contender: download from a
    /// tenth of the highest capacity up to 5% above it, starting at the shaper rate; upload up
    /// to the uplink capacity, starting at 90% of it.
    pub fn control_range(&self) -> (RateRange, RateRange) {
        let (_, hi) = self.capacity.down_span();
        let hi = hi as f64 / 1e6;
        let max = hi * 1.05;
        let down = RateRange {
            min: (hi / 10.0).max(0.1),
            base: (self.down_bit_s as f64 / 1e6).clamp(hi / 10.0, max),
            max,
        };
        let up_cap = self.capacity.up() as f64 / 1e6;
        let up = RateRange {
            min: (up_cap / 10.0).max(0.1),
            base: up_cap * 0.9,
            max: up_cap,
        };
        (down, up)
    }
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
            for c in &s.contenders {
                for rate in [s.up_bit_s, s.down_bit_s] {
                    let tc = c.tc(rate);
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
        assert_eq!(trace_bins(text), vec![1_200_000, 0, 120_000]);
        assert!(trace_bins("").is_empty());
        // The built-in T-Mobile trace: its mean and 1 s span as scenarios/traces/README.md says.
        let t = find("tmobile").expect("tmobile");
        let (lo, hi) = t.capacity.down_span();
        assert!((3_000_000..4_000_000).contains(&lo), "{lo}");
        assert!((31_000_000..32_000_000).contains(&hi), "{hi}");
        let mean: f64 = (0..600)
            .map(|k| t.capacity.down_at(k as f64 * 0.1) as f64)
            .sum::<f64>()
            / 600.0;
        assert!((13.5e6..14.5e6).contains(&mean), "{mean}");
        // It loops: 60 s later the rate is the same.
        assert_eq!(t.capacity.down_at(12.34), t.capacity.down_at(72.34));
        let (down, up) = t.control_range();
        assert!(down.max > 31.0 && up.max > 15.0, "{down:?} {up:?}");
    }

    #[test]
    fn b1_and_b2_use_the_seeds_testbed_and_contender_strings() {
        let b2 = find("B2").expect("b2");
        assert_eq!(
            (b2.up_bit_s, b2.down_bit_s, b2.one_way_ms),
            (3_000_000, 20_000_000, 45)
        );
        assert_eq!(
            CAKE.tc(20_000_000),
            "cake bandwidth 20000kbit diffserv3 triple-isolate"
        );
        assert_eq!(
            FIFO.tc(3_000_000),
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
}
