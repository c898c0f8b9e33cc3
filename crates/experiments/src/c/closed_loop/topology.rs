//! The simulated network of a closed loop: three servers behind the WAN link, the radio hop
//! in each direction with CAKE where the contender puts it, the client, the bulk TCP flows and
//! the measurement probes (see the module diagram in [`super`]).

use super::super::probe::{Prober, Reflector, REFLECTOR_PORT};
use super::super::scenario::{ProbePath, Scenario, SlotCapacity};
use super::{Contender, LoopSpec, PROBE_INTERVAL, REFLECTORS};
use cake::{AnyQdisc, CakeConfig};
use controller::{mbit, Config, Direction, PerDir, Rate};
use qdisc::{Duration, Instant};
use sim::link_scenario::Workload;
use sim::{Capacity, IcmpPolicy, LinkConfig, Sim, TcpReceiverApp, TcpSenderApp};
use std::net::{IpAddr, Ipv4Addr};
use tcpmodel::{CcKind, Pacing, SenderConfig};

pub(super) const GBIT: u64 = 125_000_000;
const WAN_DELAY: Duration = Duration::from_millis(4);
const EDGE_DELAY: Duration = Duration::from_micros(100);
/// Round-trip propagation of the path without the radio hop (the WAN link and two edge links
/// each way); a scenario's radio delays (each direction's `delay` in [`Scenario::link`]) add
/// to it.
pub const PATH_RTT: Duration =
    Duration::from_nanos(2 * WAN_DELAY.as_nanos() + 4 * EDGE_DELAY.as_nanos());

/// The shortest round trip of the path beyond the radio hop: its four edge links, with no
/// WAN delay.
pub const MIN_PATH_RTT: Duration = Duration::from_nanos(4 * EDGE_DELAY.as_nanos());

/// The WAN link's one-way delay on a path whose round trip beyond the radio hop is
/// `path_rtt` ([`LoopSpec::path_rtt`]): what the edge links leave of it ([`MIN_PATH_RTT`]),
/// halved (zero where they take it all). [`PATH_RTT`] gives `WAN_DELAY`.
fn wan_delay(path_rtt: Duration) -> Duration {
    Duration::from_nanos(path_rtt.as_nanos().saturating_sub(MIN_PATH_RTT.as_nanos()) / 2)
}

/// A measurement prober and how many of its results were read.
pub(super) struct ProbeState {
    pub(super) app: sim::AppId,
    pub(super) seen: usize,
}

/// The built network: the simulator and the handles the loop drives and reads.
pub(super) struct Topology {
    pub(super) sim: Sim,
    /// The client's node and address.
    pub(super) client: (usize, IpAddr),
    /// Each server's node and address (server `i` is reflector `i`).
    pub(super) servers: Vec<(usize, IpAddr)>,
    /// The radio links (capacity, delivery, queue metrics).
    pub(super) radio: PerDir<sim::LinkId>,
    /// The links whose CAKE sets the rate (the radio links, or with the shaper at the router
    /// the download one after the radio).
    pub(super) shaped: PerDir<sim::LinkId>,
    /// For CAKE `autorate-ingress`: the links after the radio whose CAKE estimates the rate.
    pub(super) ingress: Option<PerDir<sim::LinkId>>,
    /// The measurement probes, one per server.
    pub(super) probes: Vec<ProbeState>,
    /// The run's flows by their sending application, named for its summary: the bulk TCP
    /// (`TCP download 1`, ..., `TCP upload 1`, ...), the VoIP calls (`VoIP 1`, ...) and the
    /// probes (`probe 1`, ...).
    pub(super) named: Vec<(sim::AppId, String)>,
}

fn addr(net: u8, i: usize) -> IpAddr {
    Ipv4Addr::new(10, 0, net, (i + 1) as u8).into()
}

impl Topology {
    /// Builds the network of `spec` with controller configuration `cfg` (CAKE's initial
    /// rates), its bulk TCP flows and its measurement probes, in a simulator seeded with
    /// `spec.seed`.
    pub(super) fn build(spec: &LoopSpec, cfg: &Config) -> Topology {
        let sc = &spec.scenario;
        let seed = spec.seed;
        let mut sim = Sim::new(seed);
        sim.set_bin_width(super::STEP);
        let x = sim.add_node(&[]);
        let w = sim.add_node(&[]);
        let c = sim.add_node(&[]);
        let client_addr = addr(1, 0);
        let client = sim.add_node(&[client_addr]);
        let servers: Vec<(usize, IpAddr)> = (0..REFLECTORS)
            .map(|i| {
                let a = addr(2, i);
                let n = sim.add_node(&[a]);
                sim.add_link(n, x, LinkConfig::fixed(GBIT, EDGE_DELAY));
                sim.add_link(x, n, LinkConfig::fixed(GBIT, EDGE_DELAY));
                (n, a)
            })
            .collect();
        let ingress = spec.contender == Contender::AutorateIngress;
        let cake_at = |rate: u64, s: u64| AnyQdisc::cake(CakeConfig::with_rate(rate.max(1)), s);
        let initial = |d: Direction| -> Option<AnyQdisc> {
            match spec.contender {
                Contender::FqCodel => Some(AnyQdisc::fq_codel_default(seed)),
                Contender::Fifo | Contender::AutorateIngress => None,
                Contender::CakeStatic(dn, up) => Some(cake_at(
                    mbit(if d == Direction::Down { dn } else { up }),
                    seed,
                )),
                Contender::Oracle | Contender::OracleLookahead | Contender::OracleLagged => {
                    let cap = if d == Direction::Down {
                        &sc.link.down.capacity
                    } else {
                        &sc.link.up.capacity
                    };
                    Some(cake_at(cap.rate_at(Instant::ZERO) * 95 / 100, seed))
                }
                _ => Some(cake_at(cfg.base[d].bytes_per_s(), seed)),
            }
        };
        let ingress_cake = |max: Rate| {
            let bw = format!("{}bit", max.bits_per_s());
            let cfg = CakeConfig::from_tc_args(&["bandwidth", &bw, "autorate-ingress", "ingress"])
                .unwrap_or_else(|_| CakeConfig::with_rate(max.bytes_per_s()));
            AnyQdisc::cake(cfg, seed)
        };
        let wan = |sim: &mut Sim, a, b, q: Option<AnyQdisc>| {
            let mut l = LinkConfig::fixed(GBIT, wan_delay(spec.path_rtt()));
            if let Some(q) = q {
                l = l.buffer(Some(2), None).qdisc(q);
            }
            sim.add_link(a, b, l)
        };
        wan(&mut sim, x, w, None);
        let up_after = wan(&mut sim, w, x, ingress.then(|| ingress_cake(cfg.max.up)));
        let radio = |sim: &mut Sim, a, b, d: Direction| {
            let cap = if d == Direction::Down {
                &sc.link.down.capacity
            } else {
                &sc.link.up.capacity
            };
            let delay = if d == Direction::Down {
                sc.link.down.delay
            } else {
                sc.link.up.delay
            };
            let mut l = LinkConfig::with_rate(cap.link_rate(), delay)
                .buffer(Some(sc.link.buffer_packets), None);
            l = l.icmp(match sc.probe_path() {
                ProbePath::Shared => IcmpPolicy::Shared,
                ProbePath::IcmpApart => IcmpPolicy::Apart,
                ProbePath::Dropped => IcmpPolicy::Blocked,
            });
            let at_router = sc.shaper_at_router() && d == Direction::Down;
            if let Some(q) = initial(d).filter(|_| !at_router) {
                l = l.qdisc(q);
            }
            sim.add_link(a, b, l)
        };
        let down = radio(&mut sim, w, c, Direction::Down);
        let up = radio(&mut sim, c, w, Direction::Up);
        let mut edge = LinkConfig::fixed(GBIT, EDGE_DELAY);
        if ingress {
            edge = edge.buffer(Some(2), None).qdisc(ingress_cake(cfg.max.down));
        } else if sc.shaper_at_router() {
            if let Some(q) = initial(Direction::Down) {
                edge = edge.buffer(Some(2), None).qdisc(q);
            }
        }
        let down_after = sim.add_link(c, client, edge);
        sim.add_link(client, c, LinkConfig::fixed(GBIT, EDGE_DELAY));
        sim.compute_routes();
        let radio_links = PerDir::new(down, up);
        let shaped = if sc.shaper_at_router() {
            PerDir::new(down_after, up)
        } else {
            radio_links
        };
        let mut net = Topology {
            sim,
            client: (client, client_addr),
            servers,
            radio: radio_links,
            shaped,
            ingress: ingress.then(|| PerDir::new(down_after, up_after)),
            probes: Vec::new(),
            named: Vec::new(),
        };
        net.add_bulk_tcp(spec.scenario.workload);
        net.add_probes();
        net
    }

    /// The links a run's summary reports, named: the radio both ways (`radio down`, `radio
    /// up`), then the links after it whose CAKE shapes or estimates the rate (the router's
    /// download CAKE, CAKE `autorate-ingress`: `after the radio down`/`up`) where there are.
    pub(super) fn summary_links(&self) -> Vec<(sim::LinkId, String)> {
        let mut v: Vec<(sim::LinkId, String)> = Direction::ALL
            .iter()
            .map(|&d| (self.radio[d], format!("radio {}", d.name())))
            .collect();
        let mut after = |id: sim::LinkId, d: Direction| {
            if !v.iter().any(|(l, _)| *l == id) {
                v.push((id, format!("after the radio {}", d.name())));
            }
        };
        for d in Direction::ALL {
            after(self.shaped[d], d);
        }
        if let Some(i) = self.ingress {
            for d in Direction::ALL {
                after(i[d], d);
            }
        }
        v
    }

    /// Bulk TCP: the scenario's downloads (servers -> client) and uploads (section C's: 4 and
    /// 2), spread over the servers; at most 1,000 each way (ports 5000.. and 6000..); and its
    /// VoIP calls (section C's: none), client -> servers (ports 7000..).
    fn add_bulk_tcp(&mut self, w: Workload) {
        let tcp = |sim: &mut Sim, from: (usize, IpAddr), to: (usize, IpAddr), port: u16| {
            let mut s = SenderConfig::new(from.1, to.1, port, port);
            s.cc = CcKind::Cubic;
            s.ecn = true;
            s.pacing = Some(Pacing::default());
            let start = Instant::from_millis(200 + u64::from(port % 7) * 50);
            sim.add_app(to.0, port, start, Box::new(TcpReceiverApp::for_sender(&s)));
            sim.add_app(from.0, port, start, Box::new(TcpSenderApp::new(s)))
        };
        for k in 0..w.downloads.min(1000) {
            let id = tcp(
                &mut self.sim,
                self.servers[usize::from(k) % REFLECTORS],
                self.client,
                5000 + k,
            );
            self.named.push((id, format!("TCP download {}", k + 1)));
        }
        for k in 0..w.uploads.min(1000) {
            let id = tcp(
                &mut self.sim,
                self.client,
                self.servers[usize::from(k) % REFLECTORS],
                6000 + k,
            );
            self.named.push((id, format!("TCP upload {}", k + 1)));
        }
        // VoIP calls from the client, EF-marked, from the start (ports 7000..).
        for k in 0..w.voip.min(1000) {
            let (node, addr) = self.client;
            let to = self.servers[usize::from(k) % REFLECTORS].1;
            let port = 7000 + k;
            let id = self.sim.add_app(
                node,
                port,
                Instant::from_millis(100 + u64::from(k % 7) * 3),
                Box::new(sim::UdpSource::voip(addr, to, port)),
            );
            self.named.push((id, format!("VoIP {}", k + 1)));
        }
    }

    /// The measurement probes (every contender alike): a UDP reflector on each server and a
    /// prober towards it on the client, started a third of [`PROBE_INTERVAL`] apart.
    fn add_probes(&mut self) {
        let (client, client_addr) = self.client;
        let sim = &mut self.sim;
        self.probes = self
            .servers
            .iter()
            .enumerate()
            .map(|(i, &(n, a))| {
                sim.add_app(
                    n,
                    REFLECTOR_PORT,
                    Instant::ZERO,
                    Box::new(Reflector::new(a)),
                );
                let port = 100 + i as u16;
                let start = Instant::from_millis(i as u64 * PROBE_INTERVAL.as_nanos() / 3_000_000);
                let app = sim.add_app(
                    client,
                    port,
                    start,
                    Box::new(Prober::new(client_addr, a, port, PROBE_INTERVAL)),
                );
                ProbeState { app, seen: 0 }
            })
            .collect();
        let probes = self.probes.iter().enumerate();
        self.named
            .extend(probes.map(|(i, p)| (p.app, format!("probe {}", i + 1))));
    }
}

/// Idle one-way delay of a 58-byte probe per direction, ms: propagation plus serialisation on
/// every hop (per direction: the radio hop, the WAN link, two edge links, three of them at
/// 1 Gbit/s), on a path of round trip `path_rtt` beyond the radio hop.
pub(super) fn idle_owd_ms(sc: &Scenario, path_rtt: Duration) -> PerDir<f64> {
    let wan = wan_delay(path_rtt);
    let ser = |bps: f64| 58.0 / bps * 1e3;
    let one_way = |radio: Duration, cap: &Capacity| {
        radio.as_millis_f64()
            + wan.as_millis_f64()
            + 2.0 * EDGE_DELAY.as_millis_f64()
            + 3.0 * ser(GBIT as f64)
            + ser(cap.mean(Instant::ZERO, Instant::from_secs(1)).max(1.0))
    };
    PerDir::new(
        one_way(sc.link.down.delay, &sc.link.down.capacity),
        one_way(sc.link.up.delay, &sc.link.up.capacity),
    )
}
