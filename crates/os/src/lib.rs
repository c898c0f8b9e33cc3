//! Every system call purple's I/O crates make, as small safe wrappers over `libc` (and `rustix`
//! where it covers the call).
//!
//! **What this crate owns**: the only `unsafe` code of the I/O crates (`dataplane`, `daemon`,
//! `lab` carry `#![forbid(unsafe_code)]`): `AF_PACKET` sockets with virtio-net headers and
//! batched `recvmmsg`/`sendmmsg` ([`PacketSocket`]), epoll, timerfd, eventfd and signalfd
//! ([`Epoll`], [`TimerFd`], [`EventFd`], [`SignalFd`]), the clocks, socket options (receive
//! timestamps, DSCP, TCP congestion control, peer credentials), batched datagram reads with
//! kernel timestamps ([`recv::RecvBatch`]), a packet socket's receive ring ([`ring::RxRing`]), signals to children, perf counters ([`perf`]), the
//! privilege drop ([`privs`]) and network namespaces ([`netns`]: the one [`netns::Netns`] type
//! and `setns`). Every `unsafe` block states the invariant that makes it sound (`// SAFETY:`).
//! **What it must not do**: hold policy (what to forward, which rate, when to probe): callers
//! decide, this crate only performs the call and reports the kernel's answer.

#![cfg_attr(test, allow(clippy::unwrap_used))]
#![allow(unsafe_code)]
#![warn(clippy::undocumented_unsafe_blocks)]

mod event;
mod fd;
pub mod netns;
mod packet;
pub mod perf;
pub mod privs;
mod process;
pub mod recv;
pub mod ring;
mod sock;
mod time;

pub use event::{Epoll, EventFd, SignalFd, READABLE, WRITABLE};
pub use netns::CommandError;
pub use packet::{bind_to_interface, if_index, PacketSocket, MAX_BATCH, VNET_HDR_LEN};
pub use process::{
    effective_uid, is_root, release_free_memory, set_realtime, signal_group, terminate,
    tight_timer_slack, Signal,
};
pub use sock::{
    enable_rx_timestamps, peer_credentials, recv_timestamped, set_congestion, set_dscp, PeerCred,
};
pub use time::{monotonic_ns, realtime_ns, thread_cpu_ns, TimerFd};
