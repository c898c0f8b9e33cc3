//! The userspace dataplane: `purple bridge IF_A IF_B`, a bump in the wire that forwards every
//! frame between two interfaces through one qdisc per direction.
//!
//! **What this crate owns**: the bridge's event loop over `AF_PACKET` sockets, its buffer pool,
//! GSO rejoin, control socket, the multi-queue bridge ([`mq`]) and the link emulator's glue
//! ([`linkem`]; its model is `qdisc::link`). **What it must not do**: decide rates (it applies what its control socket is
//! told); allocate per packet in steady state; read a client's socket on the forwarding thread;
//! hold algorithms (qdiscs come from `cake`/`qdisc` and stay sans-IO).
//!
//! Design:
//! - I/O: one `AF_PACKET` raw socket per interface with `PACKET_VNET_HDR`, read and written in
//!   batches of up to 64 frames with `recvmmsg`/`sendmmsg` (see [`os::PacketSocket`]). Not mmap rings: with
//!   virtio-net headers the kernel hands us GRO super-packets up to 64 KiB, and ring slots that
//!   size cost more memory than they save in copies; batched syscalls were the variant that could
//!   be made correct (headers, truncation, partial sends) in the time.
//! - Offloads: the virtio-net header is mapped to [`qdisc::PacketMeta::gso`] and back (see
//!   [`vnet`]), so super-packets pass whole (the kernel segments them on send) unless CAKE splits
//!   them (`split-gso`), and partial checksums are completed by the kernel on send.
//! - Time: `CLOCK_MONOTONIC` nanoseconds become [`qdisc::Instant`]s at the edge; the engine stays
//!   sans-IO. The loop sleeps in `epoll_wait` with a timerfd armed (absolute time, timer slack
//!   1 ns) [`DEFAULT_SPIN_NS`] before the shaper's next release time, then spins (non-blocking
//!   `epoll_wait`) until it is due ([`Bridge::set_spin_ns`] changes the spin window). A late
//!   wake-up costs no rate while the queue stays backlogged: CAKE's shaper then releases the
//!   overdue packets together.
//! - Each pass reads only the sockets epoll reported readable.
//! - Cost, measured (`purple bench dataplane`, perf): with `split-gso` at 1 Gbit/s every
//!   super-packet is cut into 1514-byte segments (about 83,000 a second), and the kernel's
//!   per-frame send path, including the receiver's TCP processing that veth runs in the sender's
//!   softirq, was about three quarters of the bridge thread's time; our own code (segmentation,
//!   CAKE, the loop) is a few percent. So a flow's segments that leave in the same batch go to
//!   the kernel as one super-packet again ([`rejoin`]; the same frames on the wire), which
//!   makes the cost fall exactly when the loop falls behind.
//! - One forwarding thread, one epoll set: both packet sockets, the timerfd, a stop eventfd,
//!   (optionally) a signalfd for SIGINT/SIGTERM, and the eventfd through which the control
//!   socket's own thread hands over complete commands ([`ctl_server`]): no client's socket is
//!   ever read on the forwarding path.
//! - More than one core for one link ([`mq`], `purple bridge --queues N`): N such loops, each
//!   with its own pair of packet sockets, the sockets of each interface in one `PACKET_FANOUT`
//!   group that hands each received frame to one loop by flow hash. With `cake_mq ARGS` the
//!   loops run the shards of one cake_mq group ([`cake::mq`]), which share the configured rate
//!   by a lockless sync every 200 µs (docs/cake-mq.md).
//! - No allocation per packet in steady state, and memory bounded by the qdisc's limit: frames
//!   are received into 64 KiB slots and copied into pooled buffers of the smallest size class
//!   that holds them (128 B to 32 KiB); longer ones swap the slot for a pooled one, and the
//!   segments CAKE's `split-gso` cuts from them are built in pooled buffers too
//!   ([`qdisc::Qdisc::enqueue_with`], the pool is [`qdisc::packet::Pool`]). A queued
//!   frame thus pins at most twice its length, and CAKE's `memlimit` charges that buffer
//!   ([`qdisc::Packet::truesize`]). Buffers of sent and dropped packets go back to the pool; once
//!   the queues drain after a burst, the pool and the qdiscs' storage shrink and the memory is
//!   returned to the system.
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
//!     ctl_group: None,
//!     seed: 1,
//! };
//! let mut bridge = Bridge::new(cfg)?;
//! bridge.stop_on_signals()?; // SIGINT/SIGTERM end `run` cleanly
//! bridge.run()?;
//! println!("{}", bridge.stats_text());
//! # Ok::<(), dataplane::Error>(())
//! ```
#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod bridge;
pub mod ctl;
pub mod ctl_server;
pub mod linkem;
pub mod linkem_lab;
pub mod mq;
pub mod rejoin;
pub mod vnet;

pub use bridge::{
    Bridge, BridgeConfig, BridgeStats, DirStats, Error, Forwarder, LoopOptions, Stage, Stopper,
    DEFAULT_SPIN_NS,
};
pub use controller::Direction;
pub use mq::MqBridge;
