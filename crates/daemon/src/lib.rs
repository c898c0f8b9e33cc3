//! `purple control`: the PURPLE daemon for real routers, a thin shell around the sans-IO
//! `controller::agent::Agent`, which decides everything (probe schedule and bytes, reply
//! validation, reflector rotation, rate meter, actuator limits, the law); the simulator's
//! closed loop runs the same agent.
//!
//! **What this crate owns**: the I/O around the agent (sockets, counters, actuators, log,
//! metrics, MQTT, record/replay, config, privileges). **What it must not do**: decide anything
//! (a rule added here is a rule the simulator does not test: put it in `controller`); block the
//! loop on a slow consumer (MQTT has its own thread).
//!
//! The shell moves bytes and time: probe sockets ([`probe`]: ICMP raw or "ping", UDP for
//! `purple reflector`), interface byte counters ([`counters`]), the actuator ([`actuator`]:
//! Linux CAKE over rtnetlink ([`netlink`]), `purple bridge` over its control socket, or a dry
//! run, with CAKE's statistics read back), the decision log ([`log`]: the typed [`log::Record`]
//! shared with the lab and `purple plot`), Prometheus metrics ([`metrics`]), the MQTT export
//! of the same records ([`mqtt`], on a thread of its own that never holds up the loop), and
//! `--record`/[`record::replay`]. [`run`] holds the event loop; [`config`] the documented TOML
//! configuration; [`privs`] the privilege drop; [`explain`] reads the decision log back and says
//! why the rates were what they were (`purple explain`; not linked into the router binary `purple-control`, where reading the
//! log back would add about 170 KiB, a sixth of its size).

#![cfg_attr(test, allow(clippy::unwrap_used))]
#![forbid(unsafe_code)]

pub mod actuator;
pub mod bench_floor;
pub mod bench_passive;
pub mod capture;
pub mod clock;
pub mod config;
pub mod counters;
pub mod explain;
pub mod log;
pub mod metrics;
pub mod mqtt;
pub mod netlink;
pub use os::privs;
pub mod probe;
pub mod record;
pub mod run;
pub mod service;

pub use config::DaemonConfig;
pub use run::{Daemon, Exit, PassiveCounters};
