//! CoDel (RFC 8289), as Linux `sch_codel` and the shared `codel_impl.h`.
//!
//! The control law lives in [`CodelVars::dequeue`], which both [`Codel`] (one queue) and
//! [`crate::fq_codel::FqCodel`] (one [`CodelVars`] per flow) use; a queue plugs in through the
//! [`CodelQueue`] trait.
//!
//! Kept from Linux: drops happen at dequeue; the sojourn time must stay above `target` for a whole
//! `interval` before the first drop; no drop while the backlog is at most one maximum-size packet
//! (`maxpacket`, the largest packet seen); on re-entering the dropping state within 16 intervals
//! of the last drop schedule, `count` resumes at `count - lastcount`; the next drop time is
//! `t + interval / sqrt(count)` with the inverse square root kept in Q0.32 fixed point and
//! refined by one Newton step per change of `count` (as Linux, which stores it in Q0.16; here the
//! full 32 bits are kept). Time is in nanoseconds rather than Linux's 1024 ns units.

use std::collections::VecDeque;

use crate::packet::{self, Packet};
use crate::qdisc::{Dequeue, DropReason, Dropped, Qdisc, QdiscStats};
use crate::time::{Duration, Instant};

/// The parameters of the CoDel control law (shared by every queue of a qdisc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CodelParams {
    /// Acceptable standing queue delay.
    pub target: Duration,
    /// Sliding window over which the delay must stay above `target` before dropping; also the
    /// base of the drop spacing.
    pub interval: Duration,
    /// Mark ECN-capable packets CE instead of dropping them.
    pub ecn: bool,
}

impl Default for CodelParams {
    /// RFC 8289: target 5 ms, interval 100 ms, ECN off.
    fn default() -> Self {
        CodelParams {
            target: Duration::from_millis(5),
            interval: Duration::from_millis(100),
            ecn: false,
        }
    }
}

/// A queue the CoDel algorithm pulls packets from.
pub trait CodelQueue {
    /// Removes the head packet and returns it with its enqueue time, updating the queue's backlog
    /// accounting (including `stats().backlog`). `None` when empty.
    fn pop(&mut self) -> Option<(Packet, Instant)>;
    /// Bytes still queued (after the pops so far) that the "at most one packet left" test uses.
    fn backlog_bytes(&self) -> u64;
    /// The largest packet length seen so far (updated by the algorithm).
    fn maxpacket(&mut self) -> &mut u32;
    /// The qdisc counters: AQM drops and ECN marks are counted here.
    fn stats(&mut self) -> &mut QdiscStats;
}

/// The per-queue state of the CoDel control law.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CodelVars {
    /// Drops (or marks) in the current dropping state.
    count: u32,
    /// `count` when the last dropping state was entered.
    lastcount: u32,
    /// In the dropping state.
    dropping: bool,
    /// 1/sqrt(count) in Q0.32.
    rec_inv_sqrt: u32,
    /// When the sojourn time has been above target for a full interval (None: below target).
    first_above_time: Option<Instant>,
    /// When the next drop is due while dropping.
    drop_next: Instant,
    /// Sojourn time of the last dequeued packet.
    ldelay: Duration,
}

impl Default for CodelVars {
    fn default() -> Self {
        CodelVars {
            count: 0,
            lastcount: 0,
            dropping: false,
            rec_inv_sqrt: u32::MAX,
            first_above_time: None,
            drop_next: Instant::ZERO,
            ldelay: Duration::ZERO,
        }
    }
}

/// Sets CE on `pkt` if it is ECN-capable IP; false (unchanged) otherwise.
pub(crate) fn mark_packet_ce(pkt: &mut Packet) -> bool {
    let headers = pkt.headers();
    packet::mark_ce(&mut pkt.data, &headers)
}

/// `t + interval / sqrt(count)`, with `rec_inv_sqrt` = 1/sqrt(count) in Q0.32.
#[inline]
fn control_law(t: Instant, interval: Duration, rec_inv_sqrt: u32) -> Instant {
    let step = (u128::from(interval.as_nanos()) * u128::from(rec_inv_sqrt)) >> 32;
    t + Duration::from_nanos(step as u64)
}

impl CodelVars {
    /// Fresh state: not dropping, count 0.
    pub fn new() -> Self {
        Self::default()
    }

    /// Drops or marks in the current (or last) dropping state.
    pub fn count(&self) -> u32 {
        self.count
    }

    /// True while in the dropping state.
    pub fn is_dropping(&self) -> bool {
        self.dropping
    }

    /// Sojourn time of the last packet dequeued through this state.
    pub fn last_delay(&self) -> Duration {
        self.ldelay
    }

    /// Adds `n` to `count` (FQ-CoDel does this after an overflow batch drop, to strengthen the
    /// signal).
    pub fn add_count(&mut self, n: u32) {
        self.count = self.count.saturating_add(n);
    }

    /// One Newton step of 1/sqrt(count) in Q0.32: x' = x * (3 - count * x^2) / 2.
    #[inline]
    fn newton_step(&mut self) {
        let x = u64::from(self.rec_inv_sqrt);
        let x2 = (x * x) >> 32;
        let v = (3u64 << 32).saturating_sub(u64::from(self.count).saturating_mul(x2)) >> 2;
        // v < 3 * 2^30 and x < 2^32, so v * x < 3 * 2^62 fits.
        let next = (v * x) >> 31;
        self.rec_inv_sqrt = next.min(u64::from(u32::MAX)) as u32;
    }

    /// Whether the head packet `head` (already popped) is over target long enough to drop.
    fn should_drop<Q: CodelQueue>(
        &mut self,
        head: Option<&(Packet, Instant)>,
        params: &CodelParams,
        queue: &mut Q,
        now: Instant,
    ) -> bool {
        let Some((pkt, enqueued_at)) = head else {
            self.first_above_time = None;
            return false;
        };
        self.ldelay = now - *enqueued_at;
        let maxpacket = queue.maxpacket();
        if pkt.len() > *maxpacket {
            *maxpacket = pkt.len();
        }
        let maxpacket = u64::from(*maxpacket);
        if self.ldelay < params.target || queue.backlog_bytes() <= maxpacket {
            // Went below target: stay below for at least an interval before dropping again.
            self.first_above_time = None;
            return false;
        }
        match self.first_above_time {
            None => {
                self.first_above_time = Some(now + params.interval);
                false
            }
            Some(t) => now > t,
        }
    }

    /// Drops `pkt` as an AQM drop.
    fn drop_packet<Q: CodelQueue>(queue: &mut Q, pkt: Packet, drops: &mut Vec<Dropped>) {
        queue.stats().drop_counter(DropReason::Aqm).add(pkt.len());
        drops.push(Dropped {
            packet: pkt,
            reason: DropReason::Aqm,
        });
    }

    /// Dequeues the next packet to send from `queue` at `now`, dropping (or, with ECN, marking)
    /// according to the CoDel control law. Dropped packets are counted in `queue.stats()` as
    /// [`DropReason::Aqm`] and appended to `drops`; the returned packet is not yet counted as
    /// dequeued (the caller does that). Bounded work: at most one pop per packet queued.
    pub fn dequeue<Q: CodelQueue>(
        &mut self,
        params: &CodelParams,
        now: Instant,
        queue: &mut Q,
        drops: &mut Vec<Dropped>,
    ) -> Option<Packet> {
        let Some(mut head) = queue.pop() else {
            self.dropping = false;
            return None;
        };
        let drop = self.should_drop(Some(&head), params, queue, now);
        if self.dropping {
            if !drop {
                self.dropping = false;
            } else {
                while self.dropping && now >= self.drop_next {
                    self.count = self.count.saturating_add(1);
                    self.newton_step();
                    if params.ecn && mark_packet_ce(&mut head.0) {
                        queue.stats().ecn_marks += 1;
                        self.drop_next =
                            control_law(self.drop_next, params.interval, self.rec_inv_sqrt);
                        return Some(head.0);
                    }
                    Self::drop_packet(queue, head.0, drops);
                    match queue.pop() {
                        Some(next) => {
                            head = next;
                            if self.should_drop(Some(&head), params, queue, now) {
                                self.drop_next =
                                    control_law(self.drop_next, params.interval, self.rec_inv_sqrt);
                            } else {
                                self.dropping = false;
                            }
                        }
                        None => {
                            self.should_drop(None, params, queue, now);
                            self.dropping = false;
                            return None;
                        }
                    }
                }
            }
            Some(head.0)
        } else if drop {
            let out = if params.ecn && mark_packet_ce(&mut head.0) {
                queue.stats().ecn_marks += 1;
                Some(head.0)
            } else {
                Self::drop_packet(queue, head.0, drops);
                let next = queue.pop();
                // Evaluated for its side effects on first_above_time and ldelay, as Linux does.
                self.should_drop(next.as_ref(), params, queue, now);
                next.map(|(p, _)| p)
            };
            self.dropping = true;
            // If we were dropping recently, resume at a count near the last one.
            let delta = self.count.wrapping_sub(self.lastcount);
            let since_next = i128::from(now.as_nanos()) - i128::from(self.drop_next.as_nanos());
            let window = 16 * i128::from(params.interval.as_nanos());
            if delta > 1 && since_next < window {
                self.count = delta;
                self.newton_step();
            } else {
                self.count = 1;
                self.rec_inv_sqrt = u32::MAX;
            }
            self.lastcount = self.count;
            self.drop_next = control_law(now, params.interval, self.rec_inv_sqrt);
            out
        } else {
            Some(head.0)
        }
    }
}

/// Configuration of a [`Codel`] qdisc. Defaults are those of RFC 8289 and Linux `sch_codel`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CodelConfig {
    /// Target queue delay. Default 5 ms.
    pub target: Duration,
    /// Interval. Default 100 ms.
    pub interval: Duration,
    /// Packet limit; arrivals beyond it are tail-dropped ([`DropReason::Overflow`]). Default 1000.
    pub limit: u32,
    /// Mark ECT packets CE instead of dropping them. Default off.
    pub ecn: bool,
}

impl Default for CodelConfig {
    fn default() -> Self {
        CodelConfig {
            target: Duration::from_millis(5),
            interval: Duration::from_millis(100),
            limit: 1000,
            ecn: false,
        }
    }
}

impl CodelConfig {
    /// The control-law parameters of this configuration.
    pub fn params(&self) -> CodelParams {
        CodelParams {
            target: self.target,
            interval: self.interval,
            ecn: self.ecn,
        }
    }
}

/// The packet queue of [`Codel`] seen through [`CodelQueue`].
struct SingleQueue<'a> {
    queue: &'a mut VecDeque<(Packet, Instant)>,
    stats: &'a mut QdiscStats,
    maxpacket: &'a mut u32,
}

impl CodelQueue for SingleQueue<'_> {
    fn pop(&mut self) -> Option<(Packet, Instant)> {
        let item = self.queue.pop_front()?;
        self.stats.backlog.packets -= 1;
        self.stats.backlog.bytes -= u64::from(item.0.len());
        Some(item)
    }
    fn backlog_bytes(&self) -> u64 {
        self.stats.backlog.bytes
    }
    fn maxpacket(&mut self) -> &mut u32 {
        self.maxpacket
    }
    fn stats(&mut self) -> &mut QdiscStats {
        self.stats
    }
}

/// The CoDel qdisc: one FIFO managed by the CoDel control law.
#[derive(Debug)]
pub struct Codel {
    config: CodelConfig,
    params: CodelParams,
    vars: CodelVars,
    queue: VecDeque<(Packet, Instant)>,
    stats: QdiscStats,
    maxpacket: u32,
}

impl Codel {
    /// An empty CoDel queue with room reserved for `limit` packets (up to 65536).
    pub fn new(config: CodelConfig) -> Self {
        Codel {
            config,
            params: config.params(),
            vars: CodelVars::new(),
            queue: VecDeque::with_capacity((config.limit as usize).min(1 << 16)),
            stats: QdiscStats::default(),
            maxpacket: 0,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &CodelConfig {
        &self.config
    }

    /// The control-law state.
    pub fn vars(&self) -> &CodelVars {
        &self.vars
    }

    /// The largest packet seen so far.
    pub fn maxpacket(&self) -> u32 {
        self.maxpacket
    }
}

impl Qdisc for Codel {
    fn enqueue(&mut self, now: Instant, pkt: Packet, drops: &mut Vec<Dropped>) {
        let len = pkt.len();
        self.stats.enqueued.add(len);
        if self.stats.backlog.packets < u64::from(self.config.limit) {
            self.stats.backlog.add(len);
            self.queue.push_back((pkt, now));
        } else {
            self.stats.drop_counter(DropReason::Overflow).add(len);
            drops.push(Dropped {
                packet: pkt,
                reason: DropReason::Overflow,
            });
        }
    }

    fn dequeue(&mut self, now: Instant, drops: &mut Vec<Dropped>) -> Dequeue {
        let mut q = SingleQueue {
            queue: &mut self.queue,
            stats: &mut self.stats,
            maxpacket: &mut self.maxpacket,
        };
        match self.vars.dequeue(&self.params, now, &mut q, drops) {
            Some(pkt) => {
                self.stats.dequeued.add(pkt.len());
                Dequeue::Packet(pkt)
            }
            None => Dequeue::Empty,
        }
    }

    fn stats(&self) -> QdiscStats {
        self.stats
    }

    fn kind(&self) -> &'static str {
        "codel"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newton_steps_track_inverse_sqrt() {
        let mut v = CodelVars::new();
        v.count = 1;
        for count in 2..2000u32 {
            v.count = count;
            v.newton_step();
            let exact = 1.0 / f64::from(count).sqrt();
            let got = f64::from(v.rec_inv_sqrt) / 4_294_967_296.0;
            // Linux's one-step-per-increment estimate lags at small counts, then converges.
            if count > 50 {
                assert!(
                    (got - exact).abs() / exact < 0.01,
                    "count {count}: {got} vs {exact}"
                );
            }
        }
    }

    #[test]
    fn control_law_spaces_drops_by_interval_over_sqrt_count() {
        let t = Instant::from_secs(1);
        let next = control_law(t, Duration::from_millis(100), u32::MAX / 2);
        let d = (next - t).as_nanos();
        assert!((49_999_000..=50_000_000).contains(&d), "{d}");
    }
}
