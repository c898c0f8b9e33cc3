//! A deterministic discrete-event network simulator for purple's qdiscs.
//!
//! **What this crate owns**: the simulator ([`Sim`]: nodes, links, routes, applications,
//! metrics), TOML scenarios ([`Scenario`]), [`RunSummary`] (the JSON every backend reports in,
//! docs/scenarios.md, with the loaded phase of the closed loop and the lab's demo rows as its
//! optional [`LoadedSummary`]), Flent files ([`flent`]) and the one link-level scenario
//! ([`link_scenario::LinkScenario`]: a [`link_file::LinkDesc`] and its [`deployment`], which
//! section C's closed loop and the lab play). **What it must not do**: read a clock or
//! draw unseeded entropy; decide what a controller decides (closed loops run the
//! `controller` crate's agent from outside, as `experiments::c::closed_loop` does).
//!
//! Sans-IO: virtual time only ([`qdisc::Instant`], nanoseconds), every random decision drawn from
//! generators seeded by the scenario, no wall clock. The same scenario and seed give bit-identical
//! metrics.
//!
//! Model: hosts ([`Sim::add_node`]) with IPv4/IPv6 addresses, unidirectional links
//! ([`Sim::add_link`], [`LinkConfig`]) with a [`Capacity`] (fixed, unlimited, mahimahi trace or step/ramp schedule),
//! propagation delay, random loss, a droptail buffer (the modem/radio queue) and an optional
//! qdisc ([`cake::AnyQdisc`]) at the egress in front of that buffer; static routes
//! ([`Sim::add_route`], or [`Sim::compute_routes`] for shortest paths); and applications
//! ([`Application`]) at hosts. Metrics are kept per flow (= per sending application) and per link.
//! [`Scenario`] builds all of this from a TOML file.
//!
//! ```
//! use qdisc::{Duration, Instant};
//! use sim::{LinkConfig, Ping, Sim, UdpSource};
//! let (a_ip, b_ip) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
//! let mut s = Sim::new(1);
//! let a = s.add_node(&[a_ip]);
//! let b = s.add_node(&[b_ip]);
//! let mbit = 1_000_000 / 8; // bytes per second
//! s.add_link(a, b, LinkConfig::fixed(10 * mbit, Duration::from_millis(20)).buffer(Some(100), None));
//! s.add_link(b, a, LinkConfig::fixed(10 * mbit, Duration::from_millis(20)));
//! s.compute_routes();
//! let bulk = s.add_app(a, 5000, Instant::ZERO, Box::new(UdpSource::greedy(a_ip, b_ip, 5000, 12 * mbit)));
//! let ping = s.add_app(a, 1, Instant::ZERO, Box::new(Ping::new(a_ip, b_ip, 1, Duration::from_millis(100))));
//! s.run_until(Instant::from_secs(5));
//! let g = s.flow(bulk).unwrap().goodput_bps(s.bin_width(), Instant::from_secs(1), Instant::from_secs(5));
//! assert!((g / (10 * mbit) as f64 - 1.0).abs() < 0.01);
//! // The 100-packet buffer adds up to 120 ms to the 40 ms base RTT.
//! assert!(s.flow(ping).unwrap().latency().max < Duration::from_millis(165));
//! ```
#![deny(unsafe_code)]

mod app;
pub mod bench;
pub mod deployment;
mod events;
pub mod flent;
pub mod link_file;
pub mod link_scenario;
mod loaded;
mod metrics;
mod scenario;
mod sim;
mod summary;
pub mod tally;
mod tcp_app;
/// Link capacity traces (moved to [`qdisc::trace`] so the dataplane can share them).
pub use qdisc::trace;

pub use app::{Application, Outbox, Ping, UdpSource};
pub use flent::{FlentLabels, FlentTest};
pub use loaded::{LoadedSummary, OneWayDelay, Tracking};
pub use metrics::{
    summarize, FlowBin, FlowEndpoints, FlowMetrics, LatencySummary, LinkBin, LinkMetrics,
    BIN_GROWTH_DIV, LATENCY_GROWTH_DIV,
};
/// A link's capacity: the one type every backend shares ([`qdisc::link`]).
pub use qdisc::link::Capacity;
pub use scenario::{
    link_capacity, link_capacity_read, parse_qdisc, AppSpec, Built, LinkSpec, NodeSpec, Scenario,
    ScenarioError,
};
pub use sim::{
    tag_sent_at, AppId, Buffer, IcmpPolicy, LinkConfig, LinkId, NodeId, Sim, SimMemory, TapAt,
    TapRecord, ICMP_APART_LIMIT, TAP_SNAP,
};
pub use summary::{qdisc_json, FlowSeries, FlowSummary, LatencyMs, LinkSummary, RunSummary};
pub use tcp_app::{TcpReceiverApp, TcpSenderApp};
pub use trace::{MahimahiTrace, RatePoint, RateSchedule, TraceError, MAHIMAHI_MTU};
