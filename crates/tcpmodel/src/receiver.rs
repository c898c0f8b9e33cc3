//! The receiver: reassembly bookkeeping (no payload is stored), delayed ACKs, SACK and ECN echo.

use qdisc::packet::{tcp_flags, FrameSpec, TcpOption, TcpOptions};
use qdisc::{Duration, Instant, Packet};

use crate::sender::SenderConfig;
use crate::{ace_flags, put_timestamps, set_tcp, ts_now, unwrap_seq, ACE_INIT};

/// Delayed-ACK timer (Linux's minimum, 40 ms).
pub const DELAYED_ACK: Duration = Duration::from_millis(40);
/// Most out-of-order ranges remembered; further ranges are dropped (their data will be
/// retransmitted), which bounds memory against hostile input.
const MAX_RANGES: usize = 64;
/// SACK blocks per ACK (three fit beside the timestamps option).
const MAX_SACK_BLOCKS: usize = 3;

/// Counters of a receiver.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReceiverStats {
    /// Data segments received (duplicates included).
    pub segments: u64,
    /// Segments that arrived above `rcv_nxt` (out of order).
    pub out_of_order: u64,
    /// Segments entirely below `rcv_nxt` (duplicates / spurious retransmissions).
    pub duplicates: u64,
    /// Segments that arrived with CE marked.
    pub ce_marked: u64,
    /// ACKs sent.
    pub acks_sent: u64,
}

/// A sans-IO TCP receiver for one flow.
///
/// Call [`TcpReceiver::on_segment`] for each arriving data segment, then
/// [`TcpReceiver::poll_transmit`] until `None` (ACKs to send back), then read
/// [`TcpReceiver::poll_timeout`] and call [`TcpReceiver::on_timeout`] when it is reached (the
/// delayed-ACK timer), followed again by `poll_transmit`.
///
/// ACK policy: every second full-sized in-order segment, or 40 ms after the first unacknowledged
/// one; immediately for out-of-order segments, segments that fill a hole, duplicates, and the
/// first CE mark. ACKs carry timestamps (RFC 7323 TS.Recent rules), up to three SACK blocks
/// (the block holding the latest arrival first, RFC 2018), and ECE from a CE mark until a segment
/// with CWR arrives (RFC 3168).
///
/// With accurate ECN ([`SenderConfig::accurate_ecn`]) the receiver instead counts every
/// CE-marked data segment (starting from 5, as AccECN does) and puts the count modulo 8 in the
/// ACE field (AE, CWR, ECE) of every ACK; it acknowledges at once whenever the CE state of
/// arriving data changes (AccECN's change-triggered ACKs), so with at most two segments per ACK
/// the 3-bit counter cannot wrap between ACKs.
#[derive(Debug)]
pub struct TcpReceiver {
    spec: FrameSpec,
    local_port: u16,
    peer_port: u16,
    isn: u32,
    tag: u64,
    mss: u32,
    rcv_nxt: u64,
    /// Disjoint, sorted `[start, end)` ranges received above `rcv_nxt`.
    ranges: Vec<(u64, u64)>,
    /// Start of the most recently received out-of-order segment.
    latest: Option<u64>,
    ts_recent: u32,
    last_ack_sent: u64,
    ece: bool,
    /// Accurate ECN in use.
    accecn: bool,
    /// AccECN's CE packet counter (`ACE_INIT` plus the CE-marked segments received).
    cep: u64,
    /// Whether the previous data segment was CE-marked (for change-triggered ACKs).
    last_ce: bool,
    unacked_segs: u32,
    ack_now: bool,
    delack: Option<Instant>,
    stats: ReceiverStats,
}

impl TcpReceiver {
    /// The receiver matching a sender built from `cfg`: it acknowledges data from
    /// `cfg.src:cfg.src_port` to `cfg.dst:cfg.dst_port` starting at `cfg.isn`, and its ACKs carry
    /// `cfg.dscp` (Not-ECT) and `cfg.tag`.
    pub fn for_sender(cfg: &SenderConfig) -> Self {
        let mut spec =
            FrameSpec::tcp(cfg.dst, cfg.src, cfg.dst_port, cfg.src_port).with_dscp_ecn(cfg.dscp, 0);
        set_tcp(&mut spec, 0, 0, 0, |o| o.reserve(40));
        TcpReceiver {
            spec,
            local_port: cfg.dst_port,
            peer_port: cfg.src_port,
            isn: cfg.isn,
            tag: cfg.tag,
            mss: cfg.mss,
            rcv_nxt: 0,
            ranges: Vec::with_capacity(8),
            latest: None,
            ts_recent: 0,
            last_ack_sent: 0,
            ece: false,
            accecn: cfg.accurate_ecn(),
            cep: u64::from(ACE_INIT),
            last_ce: false,
            unacked_segs: 0,
            ack_now: false,
            delack: None,
            stats: ReceiverStats::default(),
        }
    }

    /// In-order bytes delivered to the application so far (goodput numerator).
    pub fn delivered(&self) -> u64 {
        self.rcv_nxt
    }
    /// The accurate-ECN CE packet counter (starting at 5); unchanged without accurate ECN.
    pub fn ce_counter(&self) -> u64 {
        self.cep
    }
    /// Counters.
    pub fn stats(&self) -> &ReceiverStats {
        &self.stats
    }

    /// Processes one data segment arriving at `now`. Non-TCP packets, other ports and segments
    /// without payload are ignored. Afterwards call [`Self::poll_transmit`] until `None`.
    pub fn on_segment(&mut self, now: Instant, pkt: &Packet) {
        let h = pkt.headers();
        let (Some(tcp), Some(ip)) = (h.tcp, h.ip) else {
            return;
        };
        if ip.tuple.src_port != self.peer_port || ip.tuple.dst_port != self.local_port {
            return;
        }
        let len = u64::from(tcp.payload_len);
        if len == 0 {
            return;
        }
        self.stats.segments += 1;
        let start = unwrap_seq(self.isn, self.rcv_nxt, tcp.seq);
        let end = start + len;

        let ce = ip.ecn == 3;
        if ce {
            self.stats.ce_marked += 1;
        }
        if self.accecn {
            self.cep += u64::from(ce);
            if ce != self.last_ce {
                self.ack_now = true;
            }
            self.last_ce = ce;
        } else {
            if tcp.flags & tcp_flags::CWR != 0 {
                self.ece = false;
            }
            if ce {
                if !self.ece {
                    self.ack_now = true;
                }
                self.ece = true;
            }
        }
        if start <= self.last_ack_sent {
            for opt in TcpOptions::new(&pkt.data, &tcp) {
                if let TcpOption::Timestamp { tsval, .. } = opt {
                    self.ts_recent = tsval;
                }
            }
        }

        if end <= self.rcv_nxt {
            self.stats.duplicates += 1;
            self.ack_now = true;
        } else if start <= self.rcv_nxt {
            let had_holes = !self.ranges.is_empty();
            self.rcv_nxt = end;
            let mut merged = 0;
            for &(s, e) in &self.ranges {
                if s > self.rcv_nxt {
                    break;
                }
                self.rcv_nxt = self.rcv_nxt.max(e);
                merged += 1;
            }
            self.ranges.drain(..merged);
            if had_holes {
                self.ack_now = true;
            } else {
                self.unacked_segs += 1;
                if self.unacked_segs >= 2 || tcp.payload_len < self.mss {
                    self.ack_now = true;
                } else if self.delack.is_none() {
                    self.delack = Some(now + DELAYED_ACK);
                }
            }
        } else {
            self.stats.out_of_order += 1;
            self.insert_range(start, end);
            self.latest = Some(start);
            self.ack_now = true;
        }
    }

    fn insert_range(&mut self, start: u64, end: u64) {
        let i = self.ranges.partition_point(|&(_, e)| e < start);
        let mut j = i;
        let (mut s, mut e) = (start, end);
        while let Some(&(rs, re)) = self.ranges.get(j) {
            if rs > e {
                break;
            }
            s = s.min(rs);
            e = e.max(re);
            j += 1;
        }
        if i == j && self.ranges.len() >= MAX_RANGES {
            return;
        }
        self.ranges.splice(i..j, std::iter::once((s, e)));
    }

    /// Handles the delayed-ACK timer at `now` (earlier calls do nothing). Afterwards call
    /// [`Self::poll_transmit`].
    pub fn on_timeout(&mut self, now: Instant) {
        if self.delack.is_some_and(|d| now >= d) {
            self.delack = None;
            self.ack_now = true;
        }
    }

    /// When [`Self::on_timeout`] must be called next (the delayed-ACK timer), if pending.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.delack
    }

    /// The ACK to send now, if one is due. Call until `None`.
    #[must_use]
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Packet> {
        self.poll_transmit_in(now, Vec::new)
    }

    /// [`Self::poll_transmit`], building the ACK in the buffer `buf` returns (called only when
    /// an ACK is sent), so a caller that recycles frame buffers sends without allocating.
    #[must_use]
    pub fn poll_transmit_in(
        &mut self,
        now: Instant,
        buf: impl FnOnce() -> Vec<u8>,
    ) -> Option<Packet> {
        if !self.ack_now {
            return None;
        }
        self.ack_now = false;
        self.unacked_segs = 0;
        self.delack = None;
        self.last_ack_sent = self.rcv_nxt;
        self.stats.acks_sent += 1;

        // SACK blocks: the one holding the latest out-of-order arrival first (RFC 2018), then
        // the highest others.
        let mut blocks = [(0u64, 0u64); MAX_SACK_BLOCKS];
        let mut n = 0;
        let first = self
            .latest
            .and_then(|l| self.ranges.iter().find(|&&(s, e)| s <= l && l < e).copied());
        if let Some(b) = first {
            blocks[0] = b;
            n = 1;
        }
        for &b in self.ranges.iter().rev() {
            if n == MAX_SACK_BLOCKS {
                break;
            }
            if Some(b) != first {
                blocks[n] = b;
                n += 1;
            }
        }
        let mut flags = tcp_flags::ACK;
        if self.accecn {
            flags |= ace_flags((self.cep & 7) as u8);
        } else if self.ece {
            flags |= tcp_flags::ECE;
        }
        let ack = self.isn.wrapping_add(self.rcv_nxt as u32);
        let (isn, tsval, tsecr) = (self.isn, ts_now(now), self.ts_recent);
        set_tcp(&mut self.spec, 0, ack, flags, |o| {
            put_timestamps(o, tsval, tsecr);
            if n > 0 {
                o.extend_from_slice(&[1, 1, 5, 2 + 8 * n as u8]);
                for &(s, e) in &blocks[..n] {
                    o.extend_from_slice(&isn.wrapping_add(s as u32).to_be_bytes());
                    o.extend_from_slice(&isn.wrapping_add(e as u32).to_be_bytes());
                }
            }
        });
        // The spec has no payload: the padded frame is the whole frame.
        let mut p = self.spec.packet_padded_in(buf());
        p.meta.tag = self.tag;
        Some(p)
    }
}
