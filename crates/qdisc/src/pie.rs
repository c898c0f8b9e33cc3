//! PIE (RFC 8033), as Linux `sch_pie` with its default `dq_rate_estimator` off (queue delay is
//! the sojourn time of the last dequeued packet, from enqueue timestamps).
//!
//! The drop decision is made at enqueue: while the burst allowance lasts nothing is dropped;
//! otherwise a packet is dropped with probability `p`, de-randomised as RFC 8033 section 5.1
//! (`accu_prob`: never drop before the accumulated probability reaches 0.85, always drop once it
//! reaches 8.5). `p` is updated every `tupdate` by
//! `p += alpha * (qdelay - target) + beta * (qdelay - qdelay_old)`, with alpha and beta scaled
//! down when `p` is small (the RFC 8033 auto-tuning table: /2 below 10%, /8 below 1%, ... /2048
//! below 0.0001%), increases capped at 2% once `p` >= 10%, +2% when the delay exceeds 250 ms,
//! and a decay of `p` by 1/64 when the delay was zero for two updates.
//!
//! **Lazy updates.** The API is sans-IO, so there is no timer: on every `enqueue` and `dequeue`
//! PIE first applies every `tupdate` tick that fell due since the previous call, in order. No
//! packet arrived or left between those ticks, so each sees the same backlog and delay the kernel
//! timer would have seen. Ticks are scheduled from the first call onwards (Linux starts its timer
//! at qdisc creation); a run of idle ticks that no longer changes the state is skipped at once.
//!
//! Deviations from Linux: `p` is clamped to `[0, 1]` as RFC 8033 says (Linux lets it exceed 1 up
//! to a 64-bit wrap, which drops the same packets but decays more slowly); time is in
//! nanoseconds rather than 64 ns ticks.

use std::collections::VecDeque;

use crate::codel::mark_packet_ce;
use crate::packet::Packet;
use crate::qdisc::{Dequeue, DropReason, Dropped, Qdisc, QdiscStats};
use crate::rng::Rng;
use crate::time::{Duration, Instant};

/// Probability 1 in the fixed-point representation (as Linux: 56 bits, leaving headroom for the
/// accumulated probability).
const MAX_PROB: u64 = u64::MAX >> 8;

/// Configuration of [`Pie`]. Defaults are those of RFC 8033 and Linux `sch_pie`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PieConfig {
    /// Target queue delay. Default 15 ms.
    pub target: Duration,
    /// Probability update period. Default 15 ms (zero disables updates).
    pub tupdate: Duration,
    /// Weight of the delay error, per second. Default 0.125.
    pub alpha: f64,
    /// Weight of the delay trend, per second. Default 1.25.
    pub beta: f64,
    /// Burst allowance after the queue has been idle. Default 150 ms.
    pub max_burst: Duration,
    /// Packet limit; arrivals beyond it are tail-dropped ([`DropReason::Overflow`]). Default 1000.
    pub limit: u32,
    /// Mark ECT packets CE instead of dropping them while `p` <= 10%. Default off.
    pub ecn: bool,
    /// Scale the drop probability by packet size / MTU. Default off.
    pub bytemode: bool,
    /// The MTU (link-layer bytes) for the "fewer than two packets queued" test and bytemode.
    /// Default 1514.
    pub mtu: u32,
}

impl Default for PieConfig {
    fn default() -> Self {
        PieConfig {
            target: Duration::from_millis(15),
            tupdate: Duration::from_millis(15),
            alpha: 0.125,
            beta: 1.25,
            max_burst: Duration::from_millis(150),
            limit: 1000,
            ecn: false,
            bytemode: false,
            mtu: crate::FULL_FRAME,
        }
    }
}

/// PIE's state variables.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct PieVars {
    /// Current queue delay estimate.
    qdelay: Duration,
    /// The estimate at the previous update.
    qdelay_old: Duration,
    /// Remaining burst allowance.
    burst_time: Duration,
    /// Time of the previous dequeue (None: none since the last reset).
    dq_tstamp: Option<Instant>,
    /// Drop probability, MAX_PROB = 1.
    prob: u64,
    /// Accumulated probability for de-randomisation.
    accu_prob: u64,
}

/// The PIE qdisc.
#[derive(Debug)]
pub struct Pie {
    config: PieConfig,
    /// alpha in probability units per nanosecond of delay error.
    alpha: u64,
    /// beta in probability units per nanosecond of delay change.
    beta: u64,
    vars: PieVars,
    queue: VecDeque<(Packet, Instant)>,
    stats: QdiscStats,
    rng: Rng,
    /// When the next probability update is due (None before the first call).
    next_update: Option<Instant>,
}

impl Pie {
    /// An empty PIE queue; `seed` seeds its random drop decisions. Reserves room for `limit`
    /// packets (up to 65536). Negative or non-finite alpha/beta are taken as 0.
    pub fn new(config: PieConfig, seed: u64) -> Self {
        let per_ns = MAX_PROB as f64 / 1e9;
        let scale = |w: f64| {
            if w.is_finite() && w > 0.0 {
                (w * per_ns) as u64
            } else {
                0
            }
        };
        Pie {
            alpha: scale(config.alpha),
            beta: scale(config.beta),
            vars: PieVars {
                qdelay: Duration::ZERO,
                qdelay_old: Duration::ZERO,
                burst_time: config.max_burst,
                dq_tstamp: None,
                prob: 0,
                accu_prob: 0,
            },
            queue: VecDeque::with_capacity((config.limit as usize).min(1 << 16)),
            stats: QdiscStats::default(),
            rng: Rng::new(seed),
            next_update: None,
            config,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &PieConfig {
        &self.config
    }

    /// The current drop probability in [0, 1].
    pub fn drop_probability(&self) -> f64 {
        self.vars.prob as f64 / MAX_PROB as f64
    }

    /// The current queue delay estimate (sojourn time of the last dequeued packet; zero if the
    /// queue was left empty).
    pub fn queue_delay(&self) -> Duration {
        self.vars.qdelay
    }

    /// The remaining burst allowance.
    pub fn burst_allowance(&self) -> Duration {
        self.vars.burst_time
    }

    /// Restarts the measurement cycle (Linux `pie_vars_init`).
    fn reset_cycle(&mut self) {
        self.vars.burst_time = self.config.max_burst;
        self.vars.dq_tstamp = None;
        self.vars.accu_prob = 0;
    }

    /// Applies every update tick due at or before `now`.
    fn run_updates(&mut self, now: Instant) {
        let tupdate = self.config.tupdate.as_nanos();
        let Some(mut next) = self.next_update else {
            self.next_update = Some(now + self.config.tupdate);
            return;
        };
        if tupdate == 0 {
            return;
        }
        while next <= now {
            let before = self.vars;
            self.calculate_probability();
            next += self.config.tupdate;
            if self.vars == before && next <= now {
                // Same inputs, same state: the remaining ticks change nothing.
                let remaining = (now - next).as_nanos() / tupdate + 1;
                next += Duration::from_nanos(remaining.saturating_mul(tupdate));
            }
        }
        self.next_update = Some(next);
    }

    /// One probability update (Linux `pie_calculate_probability`, timestamp mode).
    fn calculate_probability(&mut self) {
        let backlog = self.stats.backlog.bytes;
        let qdelay = self.vars.qdelay;
        let qdelay_old = self.vars.qdelay_old;
        let target = self.config.target;
        // A zero delay with a non-empty queue means a tiny backlog: don't decay this round.
        let mut update_prob = !(qdelay == Duration::ZERO && backlog != 0);

        let (mut alpha, mut beta) = (self.alpha, self.beta);
        if self.vars.prob < MAX_PROB / 10 {
            alpha >>= 1;
            beta >>= 1;
            let mut power = 100u64;
            while self.vars.prob < MAX_PROB / power && power <= 1_000_000 {
                alpha >>= 2;
                beta >>= 2;
                power *= 10;
            }
        }
        let ns = |d: Duration| i128::from(d.as_nanos());
        let mut delta = i128::from(alpha) * (ns(qdelay) - ns(target))
            + i128::from(beta) * (ns(qdelay) - ns(qdelay_old));

        // Increase in steps of at most 2% once p >= 10%.
        let two_pct = i128::from(MAX_PROB / 50);
        if delta > two_pct && self.vars.prob >= MAX_PROB / 10 {
            delta = i128::from(MAX_PROB / 100 * 2);
        }
        // Non-linear boost for very high delays.
        if qdelay > Duration::from_millis(250) {
            delta += two_pct;
        }
        let p = i128::from(self.vars.prob) + delta;
        self.vars.prob = if p >= i128::from(MAX_PROB) {
            // Saturated: skip the decay below.
            update_prob = false;
            MAX_PROB
        } else if p <= 0 {
            0
        } else {
            p as u64
        };

        // Decay quickly when the delay was zero for two updates.
        if qdelay == Duration::ZERO && qdelay_old == Duration::ZERO && update_prob {
            self.vars.prob -= self.vars.prob / 64;
        }

        let half = Duration::from_nanos(target.as_nanos() / 2);
        if qdelay < half && qdelay_old < half && self.vars.prob == 0 {
            self.reset_cycle();
        }
        self.vars.qdelay_old = qdelay;
    }

    /// Whether to drop (or mark) an arriving packet of `len` bytes (Linux `pie_drop_early`).
    fn drop_early(&mut self, len: u32) -> bool {
        let v = &mut self.vars;
        if v.burst_time > Duration::ZERO {
            return false;
        }
        let half = Duration::from_nanos(self.config.target.as_nanos() / 2);
        if v.qdelay < half && v.prob < MAX_PROB / 5 {
            return false;
        }
        let mtu = self.config.mtu.max(1);
        if self.stats.backlog.bytes < 2 * u64::from(mtu) {
            return false;
        }
        let local_prob = if self.config.bytemode && len <= mtu {
            u64::from(len) * (v.prob / u64::from(mtu))
        } else {
            v.prob
        };
        if local_prob == 0 {
            v.accu_prob = 0;
        } else {
            v.accu_prob = v.accu_prob.saturating_add(local_prob);
        }
        if v.accu_prob < MAX_PROB / 100 * 85 {
            return false;
        }
        if v.accu_prob >= MAX_PROB / 2 * 17 {
            return true;
        }
        if (self.rng.next_u64() >> 8) < local_prob {
            v.accu_prob = 0;
            return true;
        }
        false
    }
}

impl Qdisc for Pie {
    fn enqueue(&mut self, now: Instant, mut pkt: Packet, drops: &mut Vec<Dropped>) {
        self.run_updates(now);
        let len = pkt.len();
        self.stats.enqueued.add(len);
        let reason = if self.stats.backlog.packets >= u64::from(self.config.limit) {
            Some(DropReason::Overflow)
        } else if !self.drop_early(len) {
            None
        } else if self.config.ecn && self.vars.prob <= MAX_PROB / 10 && mark_packet_ce(&mut pkt) {
            self.stats.ecn_marks += 1;
            None
        } else {
            Some(DropReason::Aqm)
        };
        match reason {
            None => {
                self.stats.backlog.add(len);
                self.queue.push_back((pkt, now));
            }
            Some(reason) => {
                self.vars.accu_prob = 0;
                self.stats.drop_counter(reason).add(len);
                drops.push(Dropped {
                    packet: pkt,
                    reason,
                });
            }
        }
    }

    fn dequeue(&mut self, now: Instant, _drops: &mut Vec<Dropped>) -> Dequeue {
        self.run_updates(now);
        let Some((pkt, enqueued_at)) = self.queue.pop_front() else {
            return Dequeue::Empty;
        };
        let len = pkt.len();
        self.stats.backlog.packets -= 1;
        self.stats.backlog.bytes -= u64::from(len);
        self.stats.dequeued.add(len);

        // Linux pie_process_dequeue, timestamp mode.
        let v = &mut self.vars;
        v.qdelay = now - enqueued_at;
        let dtime = v.dq_tstamp.map_or(Duration::ZERO, |t| now - t);
        v.dq_tstamp = Some(now);
        if self.stats.backlog.bytes == 0 {
            v.qdelay = Duration::ZERO;
        }
        if dtime > Duration::ZERO {
            v.burst_time = v.burst_time - dtime;
        }
        Dequeue::Packet(pkt)
    }

    fn stats(&self) -> QdiscStats {
        self.stats
    }

    fn kind(&self) -> &'static str {
        "pie"
    }
}
