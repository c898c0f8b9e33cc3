//! CAKE (Common Applications Kept Enhanced), the Linux `sch_cake` queue manager, as a sans-IO
//! library: time and randomness come from the caller, so runs are deterministic.
#![deny(unsafe_code)]

pub mod ack_filter;
pub mod any;
pub mod bench;
pub mod cobalt;
pub mod config;
pub mod overhead;
pub mod params;
pub mod stats;
pub mod tc;

pub use any::AnyQdisc;
pub use config::{AckFilterMode, AtmMode, CakeConfig, DiffservMode, FlowMode};
pub use params::DerivedParams;
pub use stats::{CakeStats, FlowStats, TinStats};

mod diffserv;
mod engine;
mod hash;
mod overflow;
mod slab;
mod tin;

pub use diffserv::{tin_names, tin_order};
pub use engine::Cake;
