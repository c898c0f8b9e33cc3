//! The seeds' testbeds: clients behind a bottleneck link to servers, with a qdisc at each
//! direction's egress, and helpers to add the flows the experiments use.
//!
//! ```text
//!  client0 ─┐ 1 Gbit/s, 0.1 ms                      1 Gbit/s, 0.1 ms ┌─ server0
//!  client1 ─┼─ L ══ up: L->R at `up_bps`, `one_way` delay, qdisc ══ R ─┼─ server1
//!  ...     ─┘      down: R->L at `down_bps`, `one_way` delay, qdisc   └─ ...
//! ```
//!
//! The qdisc sits directly at the bottleneck's egress and the link serialises at exactly its
//! rate: this models "a shaper set to the line rate" (the seeds' HTB or CAKE shaper in front of
//! a faster link) without the shaper's own burstiness.

use cake::AnyQdisc;
use qdisc::{Duration, Instant};
use sim::{AppId, LinkConfig, LinkId, NodeId, Ping, Sim, TcpReceiverApp, TcpSenderApp, UdpSource};
use std::net::IpAddr;
use tcpmodel::{CcKind, Pacing, SenderConfig};

/// A host: its node and its address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Host {
    /// The simulator node.
    pub node: NodeId,
    /// Its (only) address.
    pub addr: IpAddr,
}

/// What to build.
#[derive(Debug)]
pub struct DumbbellSpec {
    /// Bottleneck rate towards the clients, bytes per second.
    pub down_bps: u64,
    /// Bottleneck rate towards the servers, bytes per second.
    pub up_bps: u64,
    /// One-way propagation delay of the bottleneck (each direction).
    pub one_way: Duration,
    /// Client hosts (10.0.1.1, 10.0.1.2, ...).
    pub clients: usize,
    /// Server hosts (10.0.2.1, ...).
    pub servers: usize,
    /// Qdisc at the egress towards the clients (`None`: the droptail buffer alone).
    pub down_qdisc: Option<AnyQdisc>,
    /// Qdisc at the egress towards the servers.
    pub up_qdisc: Option<AnyQdisc>,
    /// Droptail buffer of each bottleneck direction, in packets (behind the qdisc).
    pub buffer_packets: u32,
    /// Time-series bin width.
    pub bin: Duration,
}

impl DumbbellSpec {
    /// A symmetric or asymmetric bottleneck with no qdisc, one client and one server, a
    /// 1000-packet buffer and 100 ms bins. Rates in bits per second.
    pub fn new(down_bit_s: u64, up_bit_s: u64, one_way: Duration) -> Self {
        DumbbellSpec {
            down_bps: down_bit_s / 8,
            up_bps: up_bit_s / 8,
            one_way,
            clients: 1,
            servers: 1,
            down_qdisc: None,
            up_qdisc: None,
            buffer_packets: 1000,
            bin: Duration::from_millis(100),
        }
    }
}

/// The built testbed.
#[derive(Debug)]
pub struct Dumbbell {
    /// The simulator (routes computed).
    pub sim: Sim,
    /// Client hosts.
    pub clients: Vec<Host>,
    /// Server hosts.
    pub servers: Vec<Host>,
    /// Bottleneck towards the clients.
    pub down: LinkId,
    /// Bottleneck towards the servers.
    pub up: LinkId,
    /// Round-trip time of a small packet on the idle path (propagation plus serialisation).
    pub base_rtt: Duration,
}

/// Options of one TCP flow.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TcpOpts {
    /// Congestion control.
    pub cc: CcKind,
    /// ECN negotiated.
    pub ecn: bool,
    /// DSCP of its data and ACKs.
    pub dscp: u8,
    /// Pacing (the seeds' endpoints used fq pacing).
    pub pacing: Option<Pacing>,
    /// Bytes to send (`None`: bulk, unlimited).
    pub bytes: Option<u64>,
}

impl Default for TcpOpts {
    /// CUBIC, ECN on, paced, best effort, bulk: the seeds' endpoints.
    fn default() -> Self {
        TcpOpts {
            cc: CcKind::Cubic,
            ecn: true,
            dscp: 0,
            pacing: Some(Pacing::default()),
            bytes: None,
        }
    }
}

/// The two applications of a TCP flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpFlow {
    /// The sender (its flow metrics are the data direction: wire goodput, one-way delay).
    pub tx: AppId,
    /// The receiver (its flow metrics are the ACK direction).
    pub rx: AppId,
}

const GBIT: u64 = 1_000_000_000 / 8;

impl Dumbbell {
    /// Builds the topology of `spec`.
    pub fn new(spec: DumbbellSpec, seed: u64) -> Self {
        let mut sim = Sim::new(seed);
        sim.set_bin_width(spec.bin);
        let l = sim.add_node(&[]);
        let r = sim.add_node(&[]);
        let edge = Duration::from_micros(100);
        let host = |sim: &mut Sim, net: u8, i: usize, router: NodeId| {
            let addr: IpAddr = std::net::Ipv4Addr::new(10, 0, net, (i + 1) as u8).into();
            let node = sim.add_node(&[addr]);
            sim.add_link(node, router, LinkConfig::fixed(GBIT, edge));
            sim.add_link(router, node, LinkConfig::fixed(GBIT, edge));
            Host { node, addr }
        };
        let clients = (0..spec.clients).map(|i| host(&mut sim, 1, i, l)).collect();
        let servers = (0..spec.servers).map(|i| host(&mut sim, 2, i, r)).collect();
        let bottleneck = |bps: u64, q: Option<AnyQdisc>| {
            let mut c =
                LinkConfig::fixed(bps, spec.one_way).buffer(Some(spec.buffer_packets), None);
            if let Some(q) = q {
                c = c.qdisc(q);
            }
            c
        };
        let up = sim.add_link(l, r, bottleneck(spec.up_bps, spec.up_qdisc));
        let down = sim.add_link(r, l, bottleneck(spec.down_bps, spec.down_qdisc));
        sim.compute_routes();
        // An 84-byte echo frame (Ethernet + IPv4 + ICMP + padding to 64 bytes of payload) is
        // serialised on both bottleneck directions and four edge links.
        let ser = |bps: u64| Duration::from_nanos(84 * 1_000_000_000 / bps.max(1));
        let base_rtt = Duration::from_nanos(
            2 * spec.one_way.as_nanos()
                + 4 * edge.as_nanos()
                + ser(spec.up_bps).as_nanos()
                + ser(spec.down_bps).as_nanos()
                + 4 * ser(GBIT).as_nanos(),
        );
        Dumbbell {
            sim,
            clients,
            servers,
            down,
            up,
            base_rtt,
        }
    }

    /// Adds a TCP flow from `from` to `to` on `port` (sender and receiver both bound to it),
    /// starting at `start`.
    pub fn tcp(&mut self, from: Host, to: Host, port: u16, start: Instant, o: TcpOpts) -> TcpFlow {
        let mut cfg = SenderConfig::new(from.addr, to.addr, port, port);
        cfg.cc = o.cc;
        cfg.ecn = o.ecn;
        cfg.dscp = o.dscp;
        cfg.pacing = o.pacing;
        cfg.bytes_to_send = o.bytes;
        let rx = self.sim.add_app(
            to.node,
            port,
            start,
            Box::new(TcpReceiverApp::for_sender(&cfg)),
        );
        let tx = self
            .sim
            .add_app(from.node, port, start, Box::new(TcpSenderApp::new(cfg)));
        TcpFlow { tx, rx }
    }

    /// Like [`Dumbbell::tcp`], but the sender aborts at `stop` (when `Some`): it sends nothing
    /// more from then on (see [`TcpSenderApp::until`]).
    #[allow(clippy::too_many_arguments)]
    pub fn tcp_until(
        &mut self,
        from: Host,
        to: Host,
        port: u16,
        start: Instant,
        stop: Option<Instant>,
        o: TcpOpts,
    ) -> TcpFlow {
        let mut cfg = SenderConfig::new(from.addr, to.addr, port, port);
        cfg.cc = o.cc;
        cfg.ecn = o.ecn;
        cfg.dscp = o.dscp;
        cfg.pacing = o.pacing;
        cfg.bytes_to_send = o.bytes;
        let rx = self.sim.add_app(
            to.node,
            port,
            start,
            Box::new(TcpReceiverApp::for_sender(&cfg)),
        );
        let mut app = TcpSenderApp::new(cfg);
        if let Some(s) = stop {
            app = app.until(s);
        }
        let tx = self.sim.add_app(from.node, port, start, Box::new(app));
        TcpFlow { tx, rx }
    }

    /// Adds an ICMP ping marked with DSCP `dscp` (requests and replies) from `from` to `to`
    /// every `interval` from `start` (echo id = `id`): a per-DSCP latency probe.
    pub fn ping_dscp(
        &mut self,
        from: Host,
        to: Host,
        id: u16,
        dscp: u8,
        interval: Duration,
        start: Instant,
    ) -> AppId {
        self.sim.add_app(
            from.node,
            id,
            start,
            Box::new(Ping::new(from.addr, to.addr, id, interval).with_tos(dscp << 2)),
        )
    }

    /// Adds an ICMP ping from `from` to `to` every `interval` from `start` (echo id = `id`).
    pub fn ping(
        &mut self,
        from: Host,
        to: Host,
        id: u16,
        interval: Duration,
        start: Instant,
    ) -> AppId {
        self.sim.add_app(
            from.node,
            id,
            start,
            Box::new(Ping::new(from.addr, to.addr, id, interval)),
        )
    }

    /// Adds a UDP constant-bit-rate flow of `frame_len`-byte frames at `rate_bit_s` with DSCP
    /// `dscp`, from `start` to `stop`.
    #[allow(clippy::too_many_arguments)]
    pub fn cbr(
        &mut self,
        from: Host,
        to: Host,
        port: u16,
        frame_len: u32,
        rate_bit_s: u64,
        dscp: u8,
        start: Instant,
        stop: Option<Instant>,
    ) -> AppId {
        let mut u =
            UdpSource::cbr(from.addr, to.addr, port, frame_len, rate_bit_s / 8).with_tos(dscp << 2);
        if let Some(s) = stop {
            u = u.until(s);
        }
        self.sim.add_app(from.node, port, start, Box::new(u))
    }
}

/// `d` in milliseconds.
pub fn ms(d: Duration) -> f64 {
    d.as_nanos() as f64 / 1e6
}
