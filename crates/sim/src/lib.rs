//! A deterministic discrete-event network simulator for purple's qdiscs.
//!
//! Sans-IO: virtual time only ([`qdisc::Instant`], nanoseconds), every random decision drawn from
//! generators seeded by the scenario, no wall clock. The same scenario and seed give bit-identical
//! metrics.
//!
//! Model: hosts ([`Sim::add_node`]) with IPv4/IPv6 addresses, unidirectional links
//! ([`Sim::add_link`], [`LinkConfig`]) with a rate (fixed, mahimahi trace or step/ramp schedule),
//! propagation delay, random loss, a droptail buffer (the modem/radio queue) and an optional
//! qdisc ([`cake::AnyQdisc`]) at the egress in front of that buffer; static routes
//! ([`Sim::add_route`], or [`Sim::compute_routes`] for shortest paths); and applications
//! ([`Application`]) at hosts. Metrics are kept per flow (= per sending application) and per link.
#![deny(unsafe_code)]

mod app;
mod metrics;
mod scenario;
mod sim;
mod trace;

pub use app::{Application, Outbox, Ping, UdpSource};
pub use metrics::{summarize, FlowBin, FlowMetrics, LatencySummary, LinkBin, LinkMetrics};
pub use scenario::{parse_qdisc, AppSpec, Built, LinkSpec, NodeSpec, Scenario, ScenarioError};
pub use sim::{tag_sent_at, AppId, Buffer, LinkConfig, LinkId, LinkRate, NodeId, Sim};
pub use trace::{MahimahiTrace, RatePoint, RateSchedule, TraceError, MAHIMAHI_MTU};
