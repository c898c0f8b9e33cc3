//! CAKE (Common Applications Kept Enhanced), the Linux `sch_cake` queue manager, as a sans-IO
//! library: time and randomness come from the caller, so runs are deterministic.
//!
//! **What this crate owns**: CAKE ([`Cake`], [`CakeConfig`], tc syntax in and out, `tc -s`
//! text and JSON in [`tc`]), cake_mq's shards ([`mq`]), and [`AnyQdisc`], the one enum that
//! dispatches to CAKE or any baseline (add a qdisc's variant and tc parser there).
//!
//! **What it must not do**: read a clock, touch a socket or file, or draw entropy; allocate per
//! packet in steady state (`tests/no_alloc.rs` checks). docs/architecture.md maps sch_cake.c's
//! functions to ours.
//!
//! ```
//! use cake::{Cake, CakeConfig};
//! use qdisc::packet::FrameSpec;
//! use qdisc::{Dequeue, Instant, Qdisc};
//!
//! // `tc qdisc add dev X root cake bandwidth 20Mbit diffserv4 nat`, seeded for reproducibility.
//! let cfg = CakeConfig::from_tc_args(&["bandwidth", "20Mbit", "diffserv4", "nat"]).unwrap();
//! let mut q = Cake::new(cfg, 42);
//! let mut drops = Vec::new();
//! let (a, b) = ("10.0.0.1".parse().unwrap(), "192.0.2.1".parse().unwrap());
//! for _ in 0..3 {
//!     let pkt = FrameSpec::udp(a, b, 5000, 443).with_payload(1472).packet();
//!     q.enqueue(Instant::ZERO, pkt, &mut drops);
//! }
//! // The first packet leaves at once; the shaper holds the next for the first one's 1514 B
//! // at 20 Mbit/s (400 ns per byte).
//! assert!(matches!(q.dequeue(Instant::ZERO, &mut drops), Dequeue::Packet(_)));
//! assert_eq!(
//!     q.dequeue(Instant::ZERO, &mut drops),
//!     Dequeue::NotBefore(Instant::from_nanos(1514 * 400))
//! );
//! assert!(q.stats().is_balanced());
//! // What `tc -s qdisc show` would print for it:
//! let text = cake::tc::stats_text(&q.config().clone(), &q.cake_stats(),
//!     cake::tc::QdiscHeader::for_config(q.config()));
//! assert!(text.starts_with("qdisc cake 8001: root"));
//! ```
#![deny(unsafe_code)]

pub mod ack_filter;
pub mod any;
pub mod bench;
pub mod cobalt;
pub mod config;
pub mod mq;
pub mod overhead;
pub mod params;
pub mod stats;
pub mod tc;

pub use any::{AnyQdisc, QdiscSpecError};
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
pub use mq::{CakeMq, Shard};
