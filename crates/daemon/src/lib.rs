//! `purple control`: the PURPLE daemon for real routers.
//!
//! It probes reflectors ([`probe`]: ICMP timestamps for one-way delays, ICMP echo as the RTT
//! fallback, and our own UDP timestamp echo served by `purple reflector`), reads interface byte
//! counters for achieved throughput ([`counters`]), runs a sans-IO controller from the
//! `controller` crate, and applies its rates ([`actuator`]: Linux CAKE over rtnetlink
//! ([`netlink`]), `purple bridge` over its control socket, or a dry run). Decisions are logged
//! as JSON lines ([`log`]) and exported as Prometheus metrics ([`metrics`]). [`run`] holds the
//! event loop; [`config`] the documented TOML configuration; [`privs`] the privilege drop.

#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod actuator;
pub mod bench;
pub mod clock;
pub mod config;
pub mod counters;
pub mod log;
pub mod metrics;
pub mod netlink;
pub mod privs;
pub mod probe;
pub mod run;
pub mod service;

pub use config::DaemonConfig;
pub use run::{Daemon, Exit};
