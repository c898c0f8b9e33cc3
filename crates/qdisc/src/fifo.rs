//! FIFO with tail drop, as Linux `pfifo` (packet limit) and `bfifo` (byte limit).
//!
//! A packet that would exceed the limit is dropped on arrival ([`DropReason::Overflow`]); nothing
//! else is ever dropped. There is no shaper.

use std::collections::VecDeque;

use crate::packet::Packet;
use crate::qdisc::{Dequeue, DropReason, Dropped, Qdisc, QdiscStats};
use crate::time::Instant;

/// Most packets whose slots are reserved up front (a bfifo limit in bytes says little about the
/// packet count; beyond this the queue grows once to its peak and then reuses its capacity).
const MAX_PREALLOC: usize = 1 << 16;

/// What a FIFO's limit counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FifoLimit {
    /// `pfifo`: at most this many packets queued.
    Packets(u32),
    /// `bfifo`: at most this many bytes queued (a packet is admitted only if the backlog
    /// including it stays within the limit).
    Bytes(u64),
}

/// Configuration of a [`Fifo`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FifoConfig {
    /// The limit. Default: 1000 packets (`pfifo` with Linux's default `txqueuelen`).
    pub limit: FifoLimit,
}

impl Default for FifoConfig {
    fn default() -> Self {
        FifoConfig {
            limit: FifoLimit::Packets(1000),
        }
    }
}

impl FifoConfig {
    /// A `pfifo` of `limit` packets.
    pub fn packets(limit: u32) -> Self {
        FifoConfig {
            limit: FifoLimit::Packets(limit),
        }
    }
    /// A `bfifo` of `limit` bytes.
    pub fn bytes(limit: u64) -> Self {
        FifoConfig {
            limit: FifoLimit::Bytes(limit),
        }
    }
}

/// A tail-drop FIFO queue.
#[derive(Debug)]
pub struct Fifo {
    config: FifoConfig,
    queue: VecDeque<Packet>,
    stats: QdiscStats,
}

impl Fifo {
    /// An empty FIFO. Reserves room for the whole packet limit (or up to 65536 packets for a byte
    /// limit) so that steady-state operation does not allocate.
    pub fn new(config: FifoConfig) -> Self {
        let cap = match config.limit {
            FifoLimit::Packets(n) => n as usize,
            FifoLimit::Bytes(b) => (b / 64) as usize,
        };
        Fifo {
            config,
            queue: VecDeque::with_capacity(cap.min(MAX_PREALLOC)),
            stats: QdiscStats::default(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &FifoConfig {
        &self.config
    }

    fn admits(&self, len: u32) -> bool {
        match self.config.limit {
            FifoLimit::Packets(n) => self.stats.backlog.packets < u64::from(n),
            FifoLimit::Bytes(b) => self.stats.backlog.bytes + u64::from(len) <= b,
        }
    }
}

impl Qdisc for Fifo {
    fn enqueue(&mut self, _now: Instant, pkt: Packet, drops: &mut Vec<Dropped>) {
        let len = pkt.len();
        self.stats.enqueued.add(len);
        if self.admits(len) {
            self.stats.backlog.add(len);
            self.queue.push_back(pkt);
        } else {
            self.stats.drop_counter(DropReason::Overflow).add(len);
            drops.push(Dropped {
                packet: pkt,
                reason: DropReason::Overflow,
            });
        }
    }

    fn dequeue(&mut self, _now: Instant, _drops: &mut Vec<Dropped>) -> Dequeue {
        match self.queue.pop_front() {
            Some(pkt) => {
                let len = pkt.len();
                self.stats.backlog.packets -= 1;
                self.stats.backlog.bytes -= u64::from(len);
                self.stats.dequeued.add(len);
                Dequeue::Packet(pkt)
            }
            None => Dequeue::Empty,
        }
    }

    fn stats(&self) -> QdiscStats {
        self.stats
    }

    fn kind(&self) -> &'static str {
        match self.config.limit {
            FifoLimit::Packets(_) => "pfifo",
            FifoLimit::Bytes(_) => "bfifo",
        }
    }
}
