//! The sans-IO core of purple: time values, packet views, the [`Qdisc`] trait, and the baseline
//! queue managers CAKE is compared against (FIFO, CoDel, FQ-CoDel, PIE, SFQ, SFB, DualPI2, and an
//! HTB shaper to put in front of them).
//!
//! **What this crate owns**: the types every other crate shares ([`Instant`], [`Duration`],
//! [`Rng`], [`Packet`] and its parser, the [`Qdisc`] trait with [`Dequeue`] and the drop
//! causes, tc's unit syntax, capacity traces, the link [`Capacity`](link::Capacity) and the sans-IO
//! link model [`link::LinkModel`]), the baseline qdiscs, and small shared
//! mechanisms: order statistics ([`quantile`]) and rate conversions ([`rate`]).
//!
//! **What it must not do**: read a clock, touch a socket or file, or draw entropy (time and
//! seeds come from the caller); depend on any other purple crate (it is the bottom of the graph).
#![deny(unsafe_code)]

pub mod codel;
pub mod dualpi2;
pub mod fifo;
pub mod fq_codel;
pub mod htb;
pub mod link;
pub mod packet;
pub mod pie;
pub mod qdisc;
pub mod quantile;
pub mod rate;
pub mod rng;
pub mod sfb;
pub mod sfq;
pub mod tc_units;
pub mod time;
pub mod trace;

pub use packet::{Headers, Packet, PacketMeta, FULL_FRAME};
pub use qdisc::{Counter, Dequeue, DropReason, Dropped, NoShaper, Qdisc, QdiscStats};
pub use rate::Rate;
pub use rng::Rng;
pub use time::{Duration, Instant};
