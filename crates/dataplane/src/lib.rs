//! The userspace dataplane: `purple bridge IF_A IF_B`, a bump in the wire that forwards every
//! frame between two interfaces through one qdisc per direction.
//!
//! Design:
//! - I/O: one `AF_PACKET` raw socket per interface with `PACKET_VNET_HDR`, read and written in
//!   batches of up to 64 frames with `recvmmsg`/`sendmmsg` (see [`sys`]). Not mmap rings: with
//!   virtio-net headers the kernel hands us GRO super-packets up to 64 KiB, and ring slots that
//!   size cost more memory than they save in copies; batched syscalls were the variant that could
//!   be made correct (headers, truncation, partial sends) in the time.
//! - Offloads: the virtio-net header is mapped to [`qdisc::PacketMeta::gso`] and back (see
//!   [`vnet`]), so super-packets pass whole (the kernel segments them on send) unless CAKE splits
//!   them (`split-gso`), and partial checksums are completed by the kernel on send.
//! - Time: `CLOCK_MONOTONIC` nanoseconds become [`qdisc::Instant`]s at the edge; the engine stays
//!   sans-IO. The loop sleeps in `epoll_wait` with a timerfd armed a little before the shaper's
//!   next release time (timer slack 1 ns), then spins the last few microseconds.
//! - One thread, one epoll set: both packet sockets, the timerfd, the control socket, a stop
//!   eventfd and (optionally) a signalfd for SIGINT/SIGTERM.
//! - No allocation per packet in steady state: frames are received into 64 KiB slots; small
//!   ones are copied into pooled buffers, large ones swap the slot for a pooled one; buffers of
//!   sent and dropped packets go back to the pools.
//!
//! ```no_run
//! use dataplane::{Bridge, BridgeConfig};
//!
//! let cfg = BridgeConfig {
//!     if_a: "lan0".into(),
//!     if_b: "wan0".into(),
//!     egress: "cake bandwidth 20Mbit nat".into(),
//!     ingress: "cake bandwidth 100Mbit ingress".into(),
//!     name: "home".into(),
//!     ctl_path: Some(dataplane::ctl::default_path("home")),
//!     seed: 1,
//! };
//! let mut bridge = Bridge::new(cfg)?;
//! bridge.stop_on_signals()?; // SIGINT/SIGTERM end `run` cleanly
//! bridge.run()?;
//! println!("{}", bridge.stats_text());
//! # Ok::<(), dataplane::Error>(())
//! ```
#![warn(missing_docs)]

mod bridge;
pub mod ctl;
pub mod linkem;
pub mod linkem_lab;
pub mod sys;
pub mod vnet;

pub use bridge::{
    Bridge, BridgeConfig, BridgeStats, DirStats, Error, Stage, Stopper, DEFAULT_SPIN_NS,
};
pub use ctl::Direction;
