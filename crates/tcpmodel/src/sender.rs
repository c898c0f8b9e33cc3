//! The bulk-data sender.

use std::collections::VecDeque;
use std::net::IpAddr;

use qdisc::packet::{tcp_flags, FrameSpec, TcpOption, TcpOptions};
use qdisc::{Duration, Instant, Packet};

use crate::cc::{Cc, CcKind, CongestionControl, RttInfo};
use crate::{ace_of, put_timestamps, set_tcp, ts_now, unwrap_seq, ACE_INIT};

/// Configuration of one bulk TCP flow (sender side; the receiver derives its own from it).
#[derive(Clone, Debug, PartialEq)]
pub struct SenderConfig {
    /// Sender address (data source).
    pub src: IpAddr,
    /// Receiver address.
    pub dst: IpAddr,
    /// Sender port.
    pub src_port: u16,
    /// Receiver port.
    pub dst_port: u16,
    /// Payload bytes per segment (1448 = 1500-byte MTU with the timestamps option).
    pub mss: u32,
    /// Bytes to send, or `None` for an unlimited flow.
    pub bytes_to_send: Option<u64>,
    /// Congestion control algorithm.
    pub cc: CcKind,
    /// Initial window in segments (RFC 6928: 10).
    pub initial_window: u32,
    /// Negotiated ECN. Classic senders use RFC 3168: new data carries ECT(0), ECN-Echo reduces
    /// the window once per window of data, CWR answers it. An L4S sender ([`CcKind::is_l4s`],
    /// Prague) uses accurate ECN instead ([`Self::accurate_ecn`]): every data segment,
    /// retransmissions too, carries ECT(1), and the receiver returns a count of CE marks.
    pub ecn: bool,
    /// DSCP of every packet of the flow (data and ACKs).
    pub dscp: u8,
    /// Pacing, or `None` to send as fast as the window allows.
    pub pacing: Option<Pacing>,
    /// Lower bound of the retransmission timeout (Linux: 200 ms).
    pub min_rto: Duration,
    /// RTO before the first RTT sample (RFC 6298: 1 s).
    pub initial_rto: Duration,
    /// Initial sequence number (the receiver must be built with the same; see
    /// [`crate::TcpReceiver::for_sender`]).
    pub isn: u32,
    /// Copied into [`qdisc::PacketMeta::tag`] of every packet of the flow, both directions (a
    /// flow id for the simulator).
    pub tag: u64,
}

/// Pacing rate = gain * cwnd / srtt, with a larger gain in slow start (Linux: 2.0 and 1.2).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pacing {
    /// Gain while cwnd < ssthresh.
    pub slow_start_gain: f64,
    /// Gain otherwise.
    pub gain: f64,
}

impl Default for Pacing {
    fn default() -> Self {
        Pacing {
            slow_start_gain: 2.0,
            gain: 1.2,
        }
    }
}

impl SenderConfig {
    /// True when the flow uses accurate ECN (AccECN) and the L4S identifier ECT(1): ECN
    /// negotiated by an L4S congestion control. Sender and receiver both follow this.
    pub fn accurate_ecn(&self) -> bool {
        self.ecn && self.cc.is_l4s()
    }

    /// An unlimited NewReno flow without ECN or pacing, MSS 1448, IW 10, ISN 0, tag 0.
    pub fn new(src: IpAddr, dst: IpAddr, src_port: u16, dst_port: u16) -> Self {
        SenderConfig {
            src,
            dst,
            src_port,
            dst_port,
            mss: 1448,
            bytes_to_send: None,
            cc: CcKind::NewReno,
            initial_window: 10,
            ecn: false,
            dscp: 0,
            pacing: None,
            min_rto: Duration::from_millis(200),
            initial_rto: Duration::from_secs(1),
            isn: 0,
            tag: 0,
        }
    }
}

/// Counters of a sender.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SenderStats {
    /// Data segments sent, retransmissions included.
    pub segments_sent: u64,
    /// Retransmitted segments.
    pub retransmits: u64,
    /// Bytes cumulatively acknowledged.
    pub bytes_acked: u64,
    /// Window reductions caused by loss (SACK / duplicate ACKs).
    pub loss_reductions: u64,
    /// Window reductions caused by ECN (ECN-Echo, or a growing accurate-ECN CE counter).
    pub ecn_reductions: u64,
    /// CE-marked segments reported by accurate-ECN feedback (0 for classic ECN senders).
    pub ce_marks: u64,
    /// Retransmission timeouts.
    pub rtos: u64,
    /// ACKs processed.
    pub acks: u64,
}

/// Retransmission timeout ceiling (RFC 6298 allows >= 60 s).
const MAX_RTO: Duration = Duration::from_secs(60);
/// Duplicate-ACK threshold (RFC 5681 / 6675).
const DUP_THRESH: u64 = 3;

/// One segment on the retransmission queue.
#[derive(Clone, Copy, Debug)]
struct Seg {
    start: u64,
    len: u32,
    sent: Instant,
    sacked: bool,
    lost: bool,
    /// Retransmitted since it was last marked lost (counts in the pipe again).
    retx: bool,
    /// Ever retransmitted (Karn: no ACK-timing RTT sample from it).
    ever_retx: bool,
}

impl Seg {
    fn end(&self) -> u64 {
        self.start + u64::from(self.len)
    }
    fn in_pipe(&self) -> bool {
        !self.sacked && (!self.lost || self.retx)
    }
}

/// A sans-IO TCP sender for one bulk flow, starting in the established state (no handshake).
///
/// Driving it (all calls take the caller's `now`, which must not go backwards):
/// 1. After [`TcpSender::new`] and after every [`TcpSender::on_ack`] or
///    [`TcpSender::on_timeout`], call [`TcpSender::poll_transmit`] until it returns `None` and put
///    the packets on the wire.
/// 2. Then read [`TcpSender::poll_timeout`] and call [`TcpSender::on_timeout`] when that instant
///    is reached (earlier calls are harmless), followed by step 1.
///
/// Sequence space is tracked in 64 bits internally and mapped onto 32-bit wire numbers with the
/// ISN. The receive window is not modelled (the receiver has unlimited buffer).
#[derive(Debug)]
pub struct TcpSender {
    cfg: SenderConfig,
    spec: FrameSpec,
    mss: u64,
    cc: Cc,
    /// Unacknowledged segments, in sequence order, contiguous from `snd_una`.
    segs: VecDeque<Seg>,
    snd_una: u64,
    snd_nxt: u64,
    /// Bytes in flight (RFC 6675 `pipe`).
    pipe: u64,
    /// No new window reduction until `snd_una` reaches this (one reduction per window).
    recover: u64,
    /// The current reduction window was opened by an RTO: the window slow-starts through it
    /// (as in Linux's Loss state) instead of staying frozen as in fast recovery.
    recover_after_rto: bool,
    /// The current reduction window was opened by ECN: a scalable controller keeps growing.
    recover_after_ce: bool,
    /// Accurate ECN in use ([`SenderConfig::accurate_ecn`]).
    accecn: bool,
    /// The last ACE value (the receiver's CE counter modulo 8) seen; AccECN starts it at 5.
    ace: u8,
    /// The current round trip ends when `snd_una` reaches this.
    round_end: u64,
    /// Lowest sequence that may hold a lost, not yet retransmitted segment.
    retx_hint: u64,
    dupacks: u64,
    peer_sacks: bool,
    send_cwr: bool,
    // RTT estimation (RFC 6298).
    srtt: Option<Duration>,
    rttvar: Duration,
    min_rtt: Option<Duration>,
    backoff: u32,
    rto_deadline: Option<Instant>,
    // Pacing.
    next_send: Instant,
    pacing_blocked: bool,
    stats: SenderStats,
}

impl TcpSender {
    /// A sender in the established state at `now`.
    pub fn new(cfg: SenderConfig, now: Instant) -> Self {
        let mss = u64::from(cfg.mss.max(1));
        let cc = Cc::new(cfg.cc, mss, mss * u64::from(cfg.initial_window.max(1)));
        let mut spec = FrameSpec::tcp(cfg.src, cfg.dst, cfg.src_port, cfg.dst_port);
        set_tcp(&mut spec, 0, 0, 0, |o| o.reserve(12));
        TcpSender {
            spec,
            mss,
            cc,
            segs: VecDeque::new(),
            snd_una: 0,
            snd_nxt: 0,
            pipe: 0,
            recover: 0,
            recover_after_rto: false,
            recover_after_ce: false,
            accecn: cfg.accurate_ecn(),
            ace: ACE_INIT,
            // The first round trip is the initial window.
            round_end: mss * u64::from(cfg.initial_window.max(1)),
            retx_hint: u64::MAX,
            dupacks: 0,
            peer_sacks: false,
            send_cwr: false,
            srtt: None,
            rttvar: Duration::ZERO,
            min_rtt: None,
            backoff: 0,
            rto_deadline: None,
            next_send: now,
            pacing_blocked: false,
            stats: SenderStats::default(),
            cfg,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &SenderConfig {
        &self.cfg
    }
    /// Counters.
    pub fn stats(&self) -> &SenderStats {
        &self.stats
    }
    /// The congestion window in bytes.
    pub fn cwnd(&self) -> u64 {
        self.cc.window()
    }
    /// The slow-start threshold in bytes (`u64::MAX` before the first reduction).
    pub fn ssthresh(&self) -> u64 {
        self.cc.ssthresh()
    }
    /// Bytes in flight (RFC 6675 pipe).
    pub fn in_flight(&self) -> u64 {
        self.pipe
    }
    /// The smoothed RTT, once measured.
    pub fn srtt(&self) -> Option<Duration> {
        self.srtt
    }
    /// The smallest RTT sample so far.
    pub fn min_rtt(&self) -> Option<Duration> {
        self.min_rtt
    }
    /// The current retransmission timeout (backoff included).
    pub fn rto(&self) -> Duration {
        let base = match self.srtt {
            Some(s) => (s + self.rttvar.saturating_mul(4)).max(self.cfg.min_rto),
            None => self.cfg.initial_rto,
        };
        base.saturating_mul(1u64 << self.backoff.min(16))
            .min(MAX_RTO)
    }
    /// True once a limited flow has had all its bytes acknowledged.
    pub fn is_finished(&self) -> bool {
        self.cfg.bytes_to_send.is_some_and(|n| self.snd_una >= n)
    }
    /// Bytes cumulatively acknowledged so far.
    pub fn bytes_acked(&self) -> u64 {
        self.snd_una
    }

    fn rtt_info(&self, latest: Option<Duration>) -> RttInfo {
        RttInfo {
            latest,
            srtt: self.srtt,
            min: self.min_rtt,
        }
    }

    fn in_recovery(&self) -> bool {
        self.snd_una < self.recover
    }

    /// Index of the segment starting at or after `seq` (segments are MSS-sized except the very
    /// last of a limited flow, so this is arithmetic).
    fn index_at_or_after(&self, seq: u64) -> usize {
        // Relative to the first queued segment, which may start below `snd_una` if an ACK ended
        // inside it.
        let base = self.segs.front().map_or(self.snd_una, |s| s.start);
        let off = seq.saturating_sub(base);
        off.div_ceil(self.mss) as usize
    }

    fn add_rtt_sample(&mut self, rtt: Duration) {
        self.min_rtt = Some(self.min_rtt.map_or(rtt, |m| m.min(rtt)));
        match self.srtt {
            None => {
                self.srtt = Some(rtt);
                self.rttvar = Duration::from_nanos(rtt.as_nanos() / 2);
            }
            Some(srtt) => {
                let err = srtt.as_nanos().abs_diff(rtt.as_nanos());
                self.rttvar = Duration::from_nanos((3 * self.rttvar.as_nanos() + err) / 4);
                self.srtt = Some(Duration::from_nanos(
                    (7 * srtt.as_nanos() + rtt.as_nanos()) / 8,
                ));
            }
        }
    }

    /// Processes one ACK from the receiver at `now`: cumulative ACK, SACK blocks, the timestamp
    /// echo (RTT sample) and ECN-Echo. Packets that are not TCP ACKs with this flow's ports, or
    /// whose acknowledgement number lies outside `[snd_una, snd_nxt]`, are ignored. Afterwards call [`Self::poll_transmit`] until `None`.
    pub fn on_ack(&mut self, now: Instant, pkt: &Packet) {
        let h = pkt.headers();
        let (Some(tcp), Some(ip)) = (h.tcp, h.ip) else {
            return;
        };
        if tcp.flags & tcp_flags::ACK == 0
            || ip.tuple.src_port != self.cfg.dst_port
            || ip.tuple.dst_port != self.cfg.src_port
        {
            return;
        }
        let ack = unwrap_seq(self.cfg.isn, self.snd_una, tcp.ack);
        if ack < self.snd_una || ack > self.snd_nxt {
            return;
        }
        self.stats.acks += 1;
        let pipe_before = self.pipe;
        let mut delivered = 0u64;
        let mut karn_sample = None;
        let advanced = ack > self.snd_una;
        if advanced {
            while let Some(s) = self.segs.front() {
                if s.end() > ack {
                    break;
                }
                if s.in_pipe() {
                    self.pipe -= u64::from(s.len);
                }
                if !s.sacked {
                    delivered += u64::from(s.len);
                }
                if !s.ever_retx {
                    karn_sample = Some(now - s.sent);
                }
                self.segs.pop_front();
            }
            self.stats.bytes_acked += ack - self.snd_una;
            self.snd_una = ack;
            self.dupacks = 0;
            self.backoff = 0;
        }

        // SACK blocks and the timestamp echo.
        let mut tsecr = None;
        let mut new_sack = false;
        for opt in TcpOptions::new(&pkt.data, &tcp) {
            match opt {
                TcpOption::Timestamp { tsecr: e, .. } => tsecr = Some(e),
                TcpOption::Sack { blocks, n } => {
                    self.peer_sacks = true;
                    for &(l, r) in blocks.iter().take(usize::from(n)) {
                        let l = unwrap_seq(self.cfg.isn, self.snd_una, l).max(self.snd_una);
                        let r = unwrap_seq(self.cfg.isn, self.snd_una, r).min(self.snd_nxt);
                        let mut i = self.index_at_or_after(l);
                        while let Some(s) = self.segs.get_mut(i) {
                            if s.end() > r {
                                break;
                            }
                            if !s.sacked {
                                if s.in_pipe() {
                                    self.pipe -= u64::from(s.len);
                                }
                                s.sacked = true;
                                delivered += u64::from(s.len);
                                new_sack = true;
                            }
                            i += 1;
                        }
                    }
                }
                _ => {}
            }
        }
        if !advanced && !new_sack && pipe_before > 0 && tcp.payload_len == 0 {
            self.dupacks += 1;
        }

        // RTT samples only from ACKs that advance the left edge (as Linux): a SACK-only ACK
        // echoes the timestamp of the segment before the hole and would overestimate.
        let mut sample = None;
        if advanced {
            sample = match tsecr {
                Some(e) if e != 0 => Some(Duration::from_micros(u64::from(
                    ts_now(now).wrapping_sub(e),
                ))),
                _ => karn_sample,
            };
            if let Some(s) = sample {
                self.add_rtt_sample(s);
            }
        }

        // Loss detection.
        let mut lost_now = false;
        if new_sack {
            lost_now |= self.mark_lost_by_sack();
        } else if !self.peer_sacks && self.dupacks == DUP_THRESH {
            if let Some(s) = self.segs.front_mut() {
                if !s.lost && !s.sacked {
                    if s.in_pipe() {
                        self.pipe -= u64::from(s.len);
                    }
                    s.lost = true;
                    s.retx = false;
                    self.retx_hint = self.retx_hint.min(s.start);
                    lost_now = true;
                }
            }
        }

        // ECN feedback: accurate ECN's CE counter, or RFC 3168's echo.
        let ece = if self.accecn {
            let ce = self.accecn_feedback(tcp.flags, delivered);
            self.cc.on_ecn_feedback(delivered.div_ceil(self.mss), ce);
            ce > 0
        } else {
            self.cfg.ecn && tcp.flags & tcp_flags::ECE != 0
        };
        if advanced && self.snd_una >= self.round_end {
            self.cc.on_round(now);
            self.round_end = self.snd_nxt;
        }

        let rtt = self.rtt_info(sample);
        if (lost_now || ece) && !self.in_recovery() {
            if lost_now {
                self.cc.on_congestion(now, &rtt, pipe_before);
                self.stats.loss_reductions += 1;
            } else {
                self.cc.on_ce(now, &rtt, pipe_before);
                self.stats.ecn_reductions += 1;
            }
            self.recover = self.snd_nxt;
            self.recover_after_rto = false;
            self.recover_after_ce = !lost_now;
            if self.cfg.ecn && !self.accecn {
                self.send_cwr = true;
            }
        } else if delivered > 0
            && (!self.in_recovery()
                || self.recover_after_rto
                || (self.recover_after_ce && self.cc.is_scalable()))
        {
            self.cc.on_ack(now, delivered, &rtt, pipe_before);
        }

        if advanced {
            self.rto_deadline = if self.snd_una == self.snd_nxt {
                None
            } else {
                Some(now + self.rto())
            };
        }
    }

    /// Reads the ACE field of an accurate-ECN ACK that newly delivered `delivered` bytes and
    /// returns the number of new CE marks it reports. The 3-bit counter is ambiguous once eight
    /// or more segments are delivered by one ACK; then the sender assumes as many wraps as the
    /// delivered segments allow (the conservative reading AccECN recommends without its option).
    fn accecn_feedback(&mut self, flags: u16, delivered: u64) -> u64 {
        let ace = ace_of(flags);
        let mut ce = u64::from(ace.wrapping_sub(self.ace) & 7);
        self.ace = ace;
        let pkts = delivered.div_ceil(self.mss);
        if pkts >= 8 && ce < pkts {
            ce = pkts - ((pkts - ce) & 7);
        }
        self.stats.ce_marks += ce;
        ce
    }

    /// RFC 6675 IsLost: a segment is lost when more than (DupThresh - 1) * MSS bytes above it are
    /// SACKed. Returns true if a segment was newly marked.
    fn mark_lost_by_sack(&mut self) -> bool {
        let mut sacked_above = 0u64;
        let mut marked = false;
        let limit = (DUP_THRESH - 1) * self.mss;
        for s in self.segs.iter_mut().rev() {
            if s.sacked {
                sacked_above += u64::from(s.len);
            } else if sacked_above > limit {
                if s.lost {
                    // Everything below was examined when this one was marked.
                    break;
                }
                if s.in_pipe() {
                    self.pipe -= u64::from(s.len);
                }
                s.lost = true;
                s.retx = false;
                self.retx_hint = self.retx_hint.min(s.start);
                marked = true;
            }
        }
        marked
    }

    /// Handles timers at `now`: the retransmission timeout (RFC 6298: every unSACKed segment is
    /// marked lost, the window collapses to one MSS, the timer backs off) and the pacing clock.
    /// Call when [`Self::poll_timeout`] is reached; earlier calls do nothing. Afterwards call
    /// [`Self::poll_transmit`] until `None`.
    pub fn on_timeout(&mut self, now: Instant) {
        self.pacing_blocked = false;
        let Some(deadline) = self.rto_deadline else {
            return;
        };
        if now < deadline {
            return;
        }
        if self.segs.is_empty() {
            // Nothing outstanding (cannot happen with consistent ACKs): disarm, never spin.
            self.rto_deadline = None;
            return;
        }
        self.stats.rtos += 1;
        self.cc.on_rto(now, self.backoff == 0);
        for s in self.segs.iter_mut() {
            if !s.sacked {
                if s.in_pipe() {
                    self.pipe -= u64::from(s.len);
                }
                s.lost = true;
                s.retx = false;
            }
        }
        self.retx_hint = self.snd_una;
        self.recover = self.snd_nxt;
        self.recover_after_rto = true;
        self.recover_after_ce = false;
        self.dupacks = 0;
        self.backoff = self.backoff.saturating_add(1);
        self.rto_deadline = Some(now + self.rto());
    }

    /// The next instant at which [`Self::on_timeout`] must be called (RTO or pacing release), or
    /// `None` if no timer is pending.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        let pace = self.pacing_blocked.then_some(self.next_send);
        match (self.rto_deadline, pace) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The next data segment to send at `now`, if the window (and the pacing clock) allow:
    /// lost segments first (lowest sequence first), then new data. Call repeatedly until `None`.
    #[must_use]
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Packet> {
        self.poll_transmit_in(now, Vec::new)
    }

    /// [`Self::poll_transmit`], building the segment in the buffer `buf` returns (called only
    /// when a segment is sent), so a caller that recycles frame buffers sends without
    /// allocating.
    #[must_use]
    pub fn poll_transmit_in(
        &mut self,
        now: Instant,
        buf: impl FnOnce() -> Vec<u8>,
    ) -> Option<Packet> {
        let cwnd = self.cc.window();
        // A lost segment to retransmit?
        let mut retx_idx = None;
        if self.retx_hint < self.snd_nxt {
            let mut i = self.index_at_or_after(self.retx_hint.max(self.snd_una));
            while let Some(s) = self.segs.get(i) {
                if s.lost && !s.retx && !s.sacked {
                    retx_idx = Some(i);
                    break;
                }
                i += 1;
            }
            match retx_idx {
                Some(i) => self.retx_hint = self.segs[i].start,
                None => self.retx_hint = u64::MAX,
            }
        }
        let len = match retx_idx {
            Some(i) => u64::from(self.segs[i].len),
            None => {
                let remaining = self
                    .cfg
                    .bytes_to_send
                    .map_or(u64::MAX, |n| n.saturating_sub(self.snd_nxt));
                remaining.min(self.mss)
            }
        };
        if len == 0 {
            return None;
        }
        if self.pipe > 0 && self.pipe + len > cwnd {
            return None;
        }
        if self.cfg.pacing.is_some() && now < self.next_send {
            self.pacing_blocked = true;
            return None;
        }
        self.pacing_blocked = false;
        let (start, retx) = match retx_idx {
            Some(i) => {
                let s = &mut self.segs[i];
                s.retx = true;
                s.ever_retx = true;
                s.sent = now;
                self.stats.retransmits += 1;
                (s.start, true)
            }
            None => {
                let start = self.snd_nxt;
                self.segs.push_back(Seg {
                    start,
                    len: len as u32,
                    sent: now,
                    sacked: false,
                    lost: false,
                    retx: false,
                    ever_retx: false,
                });
                self.snd_nxt += len;
                (start, false)
            }
        };
        self.pipe += len;
        self.stats.segments_sent += 1;
        if self.rto_deadline.is_none() {
            self.rto_deadline = Some(now + self.rto());
        }
        if let (Some(p), Some(srtt)) = (self.cfg.pacing, self.srtt) {
            let gain = if cwnd < self.cc.ssthresh() {
                p.slow_start_gain
            } else {
                p.gain
            };
            let rate = gain * cwnd as f64 / srtt.as_secs_f64().max(1e-9);
            let gap = Duration::from_secs_f64(len as f64 / rate.max(1.0));
            self.next_send = self.next_send.max(now) + gap;
        }
        Some(self.build(now, start, len, retx, buf()))
    }

    fn build(&mut self, now: Instant, start: u64, len: u64, retx: bool, buf: Vec<u8>) -> Packet {
        let mut flags = tcp_flags::ACK | tcp_flags::PSH;
        if self.send_cwr && !retx {
            flags |= tcp_flags::CWR;
            self.send_cwr = false;
        }
        // RFC 3168 6.1.5: classic retransmissions are not ECN-capable; accurate ECN keeps the
        // L4S identifier ECT(1) on every segment.
        let ecn = if self.accecn {
            1
        } else if self.cfg.ecn && !retx {
            2
        } else {
            0
        };
        let seq = self.cfg.isn.wrapping_add(start as u32);
        set_tcp(&mut self.spec, seq, 0, flags, |o| {
            put_timestamps(o, ts_now(now), 0)
        });
        self.spec.tos = (self.cfg.dscp << 2) | ecn;
        self.spec.payload_len = len as usize;
        let mut p = self.spec.packet_padded_in(buf);
        p.meta.tag = self.cfg.tag;
        p
    }

    /// Test hook: checks the scoreboard's invariants (contiguous segments, exact pipe).
    #[cfg(test)]
    pub(crate) fn check_invariants(&self) {
        let mut pipe = 0;
        let mut next = self.segs.front().map_or(self.snd_una, |s| s.start);
        assert!(next <= self.snd_una);
        for s in &self.segs {
            assert_eq!(s.start, next, "segments contiguous");
            next = s.end();
            if s.in_pipe() {
                pipe += u64::from(s.len);
            }
        }
        assert_eq!(next, self.snd_nxt.max(self.snd_una));
        assert_eq!(pipe, self.pipe, "pipe accounting");
    }
}
