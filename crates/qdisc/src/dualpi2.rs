//! DualPI2: the DualQ Coupled AQM of RFC 9332 with its PI2 base AQM, as Linux `sch_dualpi2`
//! (merged for Linux 6.17) documents and implements it.
//!
//! **Two queues.** Packets whose ECN field matches the L4S identifier (by default the low bit:
//! ECT(1) and CE, `l4s_ect`; with `any_ect` also ECT(0)) go to the L-queue, everything else
//! (Not-ECT, ECT(0), non-IP) to the C-queue. One packet limit and one memory limit cover both.
//!
//! **One controller, two probabilities.** Every `tupdate` a PI controller moves the base
//! probability `p'` by `alpha * (qdelay - target) + beta * (qdelay - qdelay_old)` (gains in Hz,
//! delays in seconds), where `qdelay` is the larger of the two queues' head sojourn times.
//! Classic packets are dropped (Not-ECT) or CE-marked (ECT(0)) with `p_C = p'^2` (two random
//! rolls against `p'`); L4S packets are CE-marked with the coupled `p_CL = k * p'` (`k` =
//! `coupling_factor`), and in addition by the L-queue's native step AQM: every L4S packet whose
//! sojourn time exceeds `step_thresh` (or, with a threshold in packets, that leaves more than
//! that many packets behind) is marked at dequeue. No AQM signal is applied while less than two
//! MTUs are queued in total. By default the PI2 marks and drops happen at dequeue
//! (`drop_dequeue`); the step marks are always at dequeue.
//!
//! **Overload.** When `k * p'` exceeds 1 the coupling saturates: with `drop_on_overload` (the
//! default) L4S packets then see classic drops (`p'^2`) and are otherwise marked, and ECT(0)
//! classic packets are dropped rather than marked; with `overflow` `p'` is capped at `1/k`, every
//! packet keeps its ECN treatment and the queue grows to the limit (tail drop).
//!
//! **Scheduler.** The kernel's weighted round robin with classic protection, not the RFC's
//! time-shifted FIFO example: a credit counter starts at `mtu * (wc - wl)` (`wc` =
//! `classic_protection` percent, `wl = 100 - wc`); the L-queue is served while it is non-empty
//! and the credit is not positive (or the C-queue is empty). Serving L while C waits adds
//! `wc * len` to the credit, serving C while L waits subtracts `wl * len`, so with both queues
//! backlogged C gets at least `wc / 100` of the bytes (10% by default) and L the rest. The
//! credit resets when both queues are empty. A dropped packet does not change the credit.
//!
//! **Lazy updates.** Sans-IO: there is no timer. On every `enqueue` and `dequeue` the PI update
//! of every `tupdate` tick that fell due since the previous call is applied first, in order; no
//! packet arrived or left between those ticks, so each sees the head sojourn times the kernel's
//! timer would have seen. Ticks run from the first call on. Runs of ticks that cannot change
//! the state (both queues empty and `p'` at 0, or `p'` saturated while the queue keeps aging)
//! are skipped at once.
//!
//! Defaults are the kernel's (`dualpi2_reset_default`, tc-dualpi2(8)): limit 10000 packets,
//! memlimit `limit * 2 * mtu` bytes, target 15 ms, tupdate 16 ms, alpha 0.16 Hz, beta 3.2 Hz,
//! step_thresh 1 ms (time), min_qlen_step 0, coupling_factor 2, drop_on_overload,
//! drop_dequeue, classic_protection 10%, l4s_ect, split_gso.
//!
//! Deviations from Linux, all deliberate: the memory limit counts packet bytes (the kernel
//! counts `skb->truesize`, which is larger, so ours fills later); `p'` is kept as the kernel's
//! 32-bit fraction but the gains in finer fixed point (the kernel stores them in 1/256 Hz, e.g.
//! 41/256 for 0.16); a probability of exactly 0 never marks (the kernel's `random <= p` roll
//! lets one packet in 2^32 through); packets are not classified by `skb->priority` or tc
//! filters (so the kernel's "class 2", L-queue without AQM, does not exist here); limit drops
//! count as [`DropReason::Overflow`] and every AQM drop (PI2 or a Not-ECT packet above the step)
//! as [`DropReason::Aqm`]; the kernel's `overlimits` counter for limit drops is not kept
//! (ours counts shaper stalls only, and DualPI2 has no shaper).

use std::collections::VecDeque;

use crate::packet::{self, Packet};
use crate::qdisc::{Counter, Dequeue, DropReason, Dropped, Qdisc, QdiscStats};
use crate::rng::Rng;
use crate::time::{Duration, Instant};

/// Probability 1 as the kernel represents `p'`: a 32-bit fraction.
pub const MAX_PROB: u32 = u32::MAX;
/// Fractional bits of the internal PI gains (probability units per nanosecond of delay).
const GAIN_SHIFT: u32 = 16;
/// Packet slots reserved per queue up front; beyond this a queue grows once to its peak.
const PREALLOC: usize = 1024;

/// The L-queue's native AQM threshold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepThreshold {
    /// Mark an L4S packet whose sojourn time exceeds this (default 1 ms).
    Time(Duration),
    /// Mark an L4S packet that leaves more than this many packets in the L-queue behind it.
    Packets(u32),
}

/// Which ECN codepoints go to the L-queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EcnClassifier {
    /// `l4s_ect` (default): ECT(1) and CE, the L4S identifier of RFC 9331.
    L4sEct,
    /// `any_ect`: ECT(1), CE and ECT(0) (e.g. for data-centre DCTCP).
    AnyEct,
}

impl EcnClassifier {
    /// The bits of the ECN field that select the L-queue.
    fn mask(self) -> u8 {
        match self {
            EcnClassifier::L4sEct => 1,
            EcnClassifier::AnyEct => 3,
        }
    }
}

/// Configuration of [`DualPi2`]. Defaults are Linux `sch_dualpi2`'s (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DualPi2Config {
    /// Packets queued in both queues together; arrivals beyond it are tail-dropped. Default
    /// 10000 (at least 1).
    pub limit: u32,
    /// Bytes queued in both queues together, or `None` for the kernel's rule of thumb
    /// `limit * 2 * mtu`.
    pub memory_limit: Option<u64>,
    /// The PI controller's queue delay target. Default 15 ms.
    pub target: Duration,
    /// The PI controller's update period. Default 16 ms (at least 1 ns).
    pub tupdate: Duration,
    /// Integral gain in Hz. Default 0.16.
    pub alpha: f64,
    /// Proportional gain in Hz. Default 3.2.
    pub beta: f64,
    /// The L-queue's step threshold. Default 1 ms of sojourn time.
    pub step: StepThreshold,
    /// The step applies only to packets that found at least this many packets in the L-queue
    /// on arrival. Default 0.
    pub min_qlen_step: u32,
    /// The coupling factor `k` (`p_CL = k * p'`). Default 2 (at least 1).
    pub coupling_factor: u8,
    /// On overload (`k * p' > 1`) drop in both queues (`true`, `drop_on_overload`, default) or
    /// cap `p'` at `1/k` and let the queue overflow (`false`, `overflow`).
    pub drop_overload: bool,
    /// Apply the PI2 marks and drops at enqueue (`true`, `drop_enqueue`) instead of dequeue
    /// (`false`, `drop_dequeue`, default).
    pub drop_early: bool,
    /// The C-queue's guaranteed share of the scheduler, in percent. Default 10 (at most 100).
    pub classic_protection: u8,
    /// What goes to the L-queue. Default [`EcnClassifier::L4sEct`].
    pub classifier: EcnClassifier,
    /// Split GSO super-packets into their segments at enqueue. Default true.
    pub split_gso: bool,
    /// The device MTU in link-layer bytes (the kernel's `psched_mtu`), for the two-MTU minimum
    /// backlog, the scheduler's initial credit and the default memory limit. Default 1514.
    pub mtu: u32,
}

impl Default for DualPi2Config {
    fn default() -> Self {
        DualPi2Config {
            limit: 10_000,
            memory_limit: None,
            target: Duration::from_millis(15),
            tupdate: Duration::from_millis(16),
            alpha: 0.16,
            beta: 3.2,
            step: StepThreshold::Time(Duration::from_millis(1)),
            min_qlen_step: 0,
            coupling_factor: 2,
            drop_overload: true,
            drop_early: false,
            classic_protection: 10,
            classifier: EcnClassifier::L4sEct,
            split_gso: true,
            mtu: crate::FULL_FRAME,
        }
    }
}

impl DualPi2Config {
    /// The memory limit in force: [`Self::memory_limit`], or `limit * 2 * mtu`.
    pub fn effective_memory_limit(&self) -> u64 {
        self.memory_limit
            .unwrap_or(u64::from(self.limit) * 2 * u64::from(self.mtu))
    }
}

/// DualPI2's own statistics (what `tc -s qdisc show` prints as its xstats).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct DualPi2Xstats {
    /// The base probability `p'` in [0, 1].
    pub prob: f64,
    /// Sojourn time of the C-queue's head now (zero when empty).
    pub delay_c: Duration,
    /// Sojourn time of the L-queue's head now (zero when empty).
    pub delay_l: Duration,
    /// Packets ever enqueued to the C-queue.
    pub packets_in_c: u64,
    /// Packets ever enqueued to the L-queue.
    pub packets_in_l: u64,
    /// The most packets found queued by an arrival.
    pub maxq: u32,
    /// CE marks applied, PI2 and step together.
    pub ecn_mark: u64,
    /// CE marks applied by the L-queue's step.
    pub step_marks: u64,
    /// The scheduler credit (positive: the C-queue is served next when both wait).
    pub credit: i64,
    /// Bytes queued now.
    pub memory_used: u64,
    /// The most bytes ever queued.
    pub max_memory_used: u64,
    /// The memory limit in force.
    pub memory_limit: u64,
}

impl std::fmt::Display for DualPi2Xstats {
    /// The xstats lines `tc -s qdisc show` prints for dualpi2 (one leading space each).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            " prob {:.6} delay_c {}us delay_l {}us",
            self.prob,
            self.delay_c.as_micros(),
            self.delay_l.as_micros()
        )?;
        writeln!(
            f,
            " pkts_in_c {} pkts_in_l {} maxq {}",
            self.packets_in_c, self.packets_in_l, self.maxq
        )?;
        writeln!(
            f,
            " ecn_mark {} step_mark {}",
            self.ecn_mark, self.step_marks
        )?;
        let next = if self.credit > 0 {
            "C-queue"
        } else {
            "L-queue"
        };
        writeln!(f, " credit {} ({next})", self.credit)?;
        writeln!(
            f,
            " memory_used {} (max {}) of memory limit {}",
            self.memory_used, self.max_memory_used, self.memory_limit
        )
    }
}

/// A queued packet with what DualPI2 remembers about it (the kernel's skb control block).
#[derive(Debug)]
struct Entry {
    pkt: Packet,
    /// Enqueue time.
    ts: Instant,
    /// ECN field at classification (0 Not-ECT, 1 ECT(1), 2 ECT(0), 3 CE).
    ect: u8,
    /// The step threshold applies to it (an L4S packet that found at least `min_qlen_step`).
    apply_step: bool,
}

/// The DualPI2 qdisc.
#[derive(Debug)]
pub struct DualPi2 {
    config: DualPi2Config,
    /// alpha in probability units (`MAX_PROB` = 1) per nanosecond, `<< GAIN_SHIFT`.
    alpha: i128,
    /// beta likewise.
    beta: i128,
    memory_limit: u64,
    /// Scheduler weights (percent) and the credit's reset value.
    wc: i64,
    wl: i64,
    credit_init: i64,
    credit: i64,
    /// The base probability `p'`, `MAX_PROB` = 1.
    prob: u32,
    /// `qdelay` at the previous update.
    last_qdelay: Duration,
    /// When the next update is due (None before the first call).
    next_update: Option<Instant>,
    c: VecDeque<Entry>,
    l: VecDeque<Entry>,
    l_backlog: Counter,
    stats: QdiscStats,
    packets_in_c: u64,
    packets_in_l: u64,
    maxq: u32,
    step_marks: u64,
    max_memory_used: u64,
    rng: Rng,
    /// Reused buffer for GSO segments.
    segs: Vec<Packet>,
}

/// A gain in Hz as probability units per nanosecond, `<< GAIN_SHIFT`. Non-finite or negative
/// gains count as 0.
fn scale_gain(hz: f64) -> i128 {
    if hz.is_finite() && hz > 0.0 {
        (hz * f64::from(MAX_PROB) / 1e9 * f64::from(1u32 << GAIN_SHIFT)).round() as i128
    } else {
        0
    }
}

impl DualPi2 {
    /// An empty DualPI2 qdisc; `seed` seeds its marking and dropping decisions. Out-of-range
    /// settings are brought into range as the kernel's netlink policy would require them:
    /// `limit`, `coupling_factor` and `tupdate` at least 1 (unit), `classic_protection` at
    /// most 100, `mtu` at least 1.
    pub fn new(mut config: DualPi2Config, seed: u64) -> Self {
        config.limit = config.limit.max(1);
        config.coupling_factor = config.coupling_factor.max(1);
        config.classic_protection = config.classic_protection.min(100);
        config.tupdate = config.tupdate.max(Duration::from_nanos(1));
        config.mtu = config.mtu.max(1);
        let wc = i64::from(config.classic_protection);
        let wl = 100 - wc;
        let credit_init = i64::from(config.mtu) * (wc - wl);
        let slots = (config.limit as usize).min(PREALLOC);
        DualPi2 {
            alpha: scale_gain(config.alpha),
            beta: scale_gain(config.beta),
            memory_limit: config.effective_memory_limit(),
            wc,
            wl,
            credit_init,
            credit: credit_init,
            prob: 0,
            last_qdelay: Duration::ZERO,
            next_update: None,
            c: VecDeque::with_capacity(slots),
            l: VecDeque::with_capacity(slots),
            l_backlog: Counter::default(),
            stats: QdiscStats::default(),
            packets_in_c: 0,
            packets_in_l: 0,
            maxq: 0,
            step_marks: 0,
            max_memory_used: 0,
            rng: Rng::new(seed),
            segs: Vec::new(),
            config,
        }
    }

    /// The configuration (after the range adjustments of [`Self::new`]).
    pub fn config(&self) -> &DualPi2Config {
        &self.config
    }

    /// The base probability `p'` in [0, 1].
    pub fn base_probability(&self) -> f64 {
        f64::from(self.prob) / f64::from(MAX_PROB)
    }

    /// The classic drop/mark probability `p_C = p'^2`.
    pub fn classic_probability(&self) -> f64 {
        self.base_probability().powi(2)
    }

    /// The coupled L4S marking probability `p_CL = min(k * p', 1)`.
    pub fn coupled_probability(&self) -> f64 {
        (f64::from(self.config.coupling_factor) * self.base_probability()).min(1.0)
    }

    /// Packets and bytes in the L-queue now.
    pub fn l4s_backlog(&self) -> Counter {
        self.l_backlog
    }

    /// Packets and bytes in the C-queue now.
    pub fn classic_backlog(&self) -> Counter {
        Counter {
            packets: self.stats.backlog.packets - self.l_backlog.packets,
            bytes: self.stats.backlog.bytes - self.l_backlog.bytes,
        }
    }

    /// DualPI2's own statistics at `now` (head sojourn times are measured at `now`).
    pub fn xstats(&self, now: Instant) -> DualPi2Xstats {
        let head = |q: &VecDeque<Entry>| q.front().map_or(Duration::ZERO, |e| now - e.ts);
        DualPi2Xstats {
            prob: self.base_probability(),
            delay_c: head(&self.c),
            delay_l: head(&self.l),
            packets_in_c: self.packets_in_c,
            packets_in_l: self.packets_in_l,
            maxq: self.maxq,
            ecn_mark: self.stats.ecn_marks,
            step_marks: self.step_marks,
            credit: self.credit,
            memory_used: self.stats.backlog.bytes,
            max_memory_used: self.max_memory_used,
            memory_limit: self.memory_limit,
        }
    }

    /// The larger head sojourn time of the two queues at `at`.
    fn qdelay(&self, at: Instant) -> Duration {
        let head = |q: &VecDeque<Entry>| q.front().map_or(Duration::ZERO, |e| at - e.ts);
        head(&self.c).max(head(&self.l))
    }

    /// The highest value `p'` may take.
    fn prob_cap(&self) -> u32 {
        if self.config.drop_overload {
            MAX_PROB
        } else {
            MAX_PROB / u32::from(self.config.coupling_factor)
        }
    }

    /// Applies every PI update tick due at or before `now`.
    fn run_updates(&mut self, now: Instant) {
        let tupdate = self.config.tupdate;
        let Some(mut next) = self.next_update else {
            self.next_update = Some(now.saturating_add(tupdate));
            return;
        };
        while next <= now {
            self.update_probability(next);
            next = next.saturating_add(tupdate);
            // (At the end of time `next` saturates: one update per call, never a spin.)
            if next > now || next == Instant::MAX {
                break;
            }
            // Ticks that cannot change the state are skipped: nothing moves between calls.
            let idle = self.c.is_empty() && self.l.is_empty();
            let remaining = (now - next).as_nanos() / tupdate.as_nanos();
            let last = next.saturating_add(tupdate.saturating_mul(remaining));
            if idle && self.prob == 0 && self.last_qdelay == Duration::ZERO {
                next = last.saturating_add(tupdate);
            } else if !idle
                && self.prob == self.prob_cap()
                && self.last_qdelay >= self.config.target
            {
                // The queue only ages until `now`, so every later delta is positive: p' stays
                // at its cap and the last tick's delay is what remains.
                self.last_qdelay = self.qdelay(last);
                next = last.saturating_add(tupdate);
            }
        }
        self.next_update = Some(next);
    }

    /// One PI update at `at` (the kernel's `calculate_probability`).
    fn update_probability(&mut self, at: Instant) {
        let qdelay = self.qdelay(at);
        let ns = |d: Duration| i128::from(d.as_nanos());
        let delta = (ns(qdelay) - ns(self.config.target)) * self.alpha
            + (ns(qdelay) - ns(self.last_qdelay)) * self.beta;
        self.last_qdelay = qdelay;
        let p = i128::from(self.prob) + (delta >> GAIN_SHIFT);
        self.prob = p.clamp(0, i128::from(self.prob_cap())) as u32;
    }

    /// True with probability `p / MAX_PROB` (never for 0).
    #[inline]
    fn roll(&mut self, p: u32) -> bool {
        p != 0 && self.rng.next_u32() <= p
    }

    /// CE-marks `pkt` (counted as an ECN mark); false when it is not ECN-capable.
    fn mark(&mut self, pkt: &mut Packet) -> bool {
        let h = pkt.headers();
        let marked = packet::mark_ce(&mut pkt.data, &h);
        if marked {
            self.stats.ecn_marks += 1;
        }
        marked
    }

    /// The PI2 decision for a packet (the kernel's `must_drop`): true to drop it; an
    /// ECN-capable packet may be CE-marked instead.
    fn must_drop(&mut self, e: &mut Entry, l4s: bool) -> bool {
        if self.stats.backlog.bytes < 2 * u64::from(self.config.mtu) {
            return false;
        }
        let prob = self.prob;
        let local_l = u64::from(prob) * u64::from(self.config.coupling_factor);
        let overload = local_l > u64::from(MAX_PROB);
        if !l4s {
            if self.roll(prob) && self.roll(prob) {
                if overload || e.ect == 0 {
                    return true;
                }
                self.mark(&mut e.pkt);
            }
            return false;
        }
        if overload {
            if self.config.drop_overload && self.roll(prob) && self.roll(prob) {
                return true;
            }
            self.mark(&mut e.pkt);
            return false;
        }
        // Not overloaded: local_l fits in 32 bits.
        if self.roll(local_l as u32) {
            if e.ect == 0 {
                return true;
            }
            self.mark(&mut e.pkt);
        }
        false
    }

    /// The L-queue's step AQM at dequeue: true to drop (a Not-ECT packet above the step).
    fn step(&mut self, e: &mut Entry, now: Instant) -> bool {
        if !e.apply_step {
            return false;
        }
        let above = match self.config.step {
            StepThreshold::Time(t) => now - e.ts > t,
            StepThreshold::Packets(n) => self.l.len() as u64 > u64::from(n),
        };
        if !above {
            return false;
        }
        if e.ect == 0 {
            return true;
        }
        if self.mark(&mut e.pkt) {
            self.step_marks += 1;
        }
        false
    }

    fn drop(&mut self, pkt: Packet, reason: DropReason, drops: &mut Vec<Dropped>) {
        self.stats.drop_counter(reason).add(pkt.len());
        drops.push(Dropped {
            packet: pkt,
            reason,
        });
    }

    /// Enqueues one (already segmented) packet.
    fn enqueue_one(&mut self, now: Instant, pkt: Packet, drops: &mut Vec<Dropped>) {
        let len = pkt.len();
        self.stats.enqueued.add(len);
        let ect = pkt.headers().ip.map_or(0, |ip| ip.ecn & 3);
        let l4s = ect & self.config.classifier.mask() != 0;
        if self.stats.backlog.packets >= u64::from(self.config.limit)
            || self.stats.backlog.bytes + u64::from(len) > self.memory_limit
        {
            self.drop(pkt, DropReason::Overflow, drops);
            return;
        }
        let mut e = Entry {
            pkt,
            ts: now,
            ect,
            apply_step: l4s && self.l.len() as u64 >= u64::from(self.config.min_qlen_step),
        };
        if self.config.drop_early && self.must_drop(&mut e, l4s) {
            self.drop(e.pkt, DropReason::Aqm, drops);
            return;
        }
        self.maxq = self
            .maxq
            .max(u32::try_from(self.stats.backlog.packets).unwrap_or(u32::MAX));
        self.stats.backlog.add(len);
        self.max_memory_used = self.max_memory_used.max(self.stats.backlog.bytes);
        if l4s {
            self.packets_in_l += 1;
            self.l_backlog.add(len);
            self.l.push_back(e);
        } else {
            self.packets_in_c += 1;
            self.c.push_back(e);
        }
    }
}

impl Qdisc for DualPi2 {
    fn enqueue(&mut self, now: Instant, pkt: Packet, drops: &mut Vec<Dropped>) {
        self.enqueue_with(now, pkt, drops, &mut packet::Unpooled);
    }

    fn enqueue_with(
        &mut self,
        now: Instant,
        pkt: Packet,
        drops: &mut Vec<Dropped>,
        bufs: &mut dyn packet::Buffers,
    ) {
        self.run_updates(now);
        if self.config.split_gso && pkt.meta.gso.is_some() {
            let mut segs = std::mem::take(&mut self.segs);
            packet::segment_with(pkt, &mut segs, bufs);
            for seg in segs.drain(..) {
                self.enqueue_one(now, seg, drops);
            }
            self.segs = segs;
        } else {
            self.enqueue_one(now, pkt, drops);
        }
    }

    fn dequeue(&mut self, now: Instant, drops: &mut Vec<Dropped>) -> Dequeue {
        self.run_updates(now);
        // Each pass removes one packet, so this ends within the backlog.
        loop {
            let (c_len, l_len) = (self.c.len(), self.l.len());
            let from_l = l_len > 0 && (c_len == 0 || self.credit <= 0);
            let popped = if from_l {
                self.l.pop_front()
            } else {
                self.c.pop_front()
            };
            let Some(mut e) = popped else {
                self.credit = self.credit_init;
                return Dequeue::Empty;
            };
            let len = e.pkt.len();
            let credit_change = if from_l {
                self.l_backlog.packets -= 1;
                self.l_backlog.bytes -= u64::from(len);
                if c_len > 0 {
                    self.wc * i64::from(len)
                } else {
                    0
                }
            } else if l_len > 0 {
                -self.wl * i64::from(len)
            } else {
                0
            };
            self.stats.backlog.packets -= 1;
            self.stats.backlog.bytes -= u64::from(len);
            if !self.config.drop_early && self.must_drop(&mut e, from_l) {
                self.drop(e.pkt, DropReason::Aqm, drops);
                continue;
            }
            if from_l && self.step(&mut e, now) {
                self.drop(e.pkt, DropReason::Aqm, drops);
                continue;
            }
            self.credit += credit_change;
            self.stats.dequeued.add(len);
            return Dequeue::Packet(e.pkt);
        }
    }

    fn stats(&self) -> QdiscStats {
        self.stats
    }

    fn kind(&self) -> &'static str {
        "dualpi2"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gains_match_the_kernels_scaling_within_its_resolution() {
        // The kernel stores 0.16 Hz as 41/256 and scales it to MAX_PROB * 41/256 / 1e9 per ns.
        let ours = scale_gain(0.16) as f64 / f64::from(1u32 << GAIN_SHIFT);
        let kernel = f64::from(MAX_PROB) * 41.0 / 256.0 / 1e9;
        assert!((ours / kernel - 1.0).abs() < 0.005, "{ours} vs {kernel}");
        assert_eq!(scale_gain(-1.0), 0);
        assert_eq!(scale_gain(f64::NAN), 0);
    }

    #[test]
    fn skipped_update_ticks_leave_the_state_every_tick_would() {
        let aged = |q: &mut DualPi2| {
            q.c.push_back(Entry {
                pkt: Packet::default(),
                ts: Instant::ZERO,
                ect: 0,
                apply_step: false,
            })
        };
        let overflow = DualPi2Config {
            drop_overload: false,
            ..DualPi2Config::default()
        };
        let slow = DualPi2Config {
            target: Duration::from_secs(30),
            ..DualPi2Config::default()
        };
        // (config, a packet aging in the C-queue, initial p')
        let cases = [
            (DualPi2Config::default(), true, 0),
            (overflow, true, 0),
            (slow, true, 0),
            (DualPi2Config::default(), false, MAX_PROB / 3),
        ];
        for (cfg, with_packet, p0) in cases {
            let mut lazy = DualPi2::new(cfg, 1);
            let mut timer = DualPi2::new(cfg, 1);
            for q in [&mut lazy, &mut timer] {
                if with_packet {
                    aged(q);
                }
                q.prob = p0;
            }
            lazy.run_updates(Instant::ZERO);
            let end = Instant::from_secs(100);
            lazy.run_updates(end);
            let mut t = Instant::ZERO + cfg.tupdate;
            while t <= end {
                timer.update_probability(t);
                t += cfg.tupdate;
            }
            assert_eq!(
                (lazy.prob, lazy.last_qdelay, lazy.next_update),
                (timer.prob, timer.last_qdelay, Some(t)),
                "{cfg:?} packet {with_packet}"
            );
        }
    }

    #[test]
    fn updates_at_the_end_of_time_terminate() {
        let mut q = DualPi2::new(DualPi2Config::default(), 1);
        let mut drops = Vec::new();
        q.enqueue(
            Instant::MAX.saturating_sub(Duration::from_millis(1)),
            Packet::default(),
            &mut drops,
        );
        for _ in 0..3 {
            let _ = q.dequeue(Instant::MAX, &mut drops);
        }
        assert!(q.stats().is_balanced());
    }

    #[test]
    fn one_update_moves_p_by_alpha_times_the_delay_error_plus_beta_times_its_change() {
        let mut q = DualPi2::new(DualPi2Config::default(), 1);
        // A C-queue head 25 ms old at the update: error +10 ms, change +25 ms.
        q.c.push_back(Entry {
            pkt: Packet::default(),
            ts: Instant::ZERO,
            ect: 0,
            apply_step: false,
        });
        q.update_probability(Instant::from_millis(25));
        let expect = 0.16 * 0.010 + 3.2 * 0.025;
        assert!(
            (q.base_probability() - expect).abs() < 1e-6,
            "{} vs {expect}",
            q.base_probability()
        );
        assert_eq!(q.last_qdelay, Duration::from_millis(25));
    }
}
