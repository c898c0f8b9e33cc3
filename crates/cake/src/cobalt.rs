//! COBALT: CoDel (with the kernel's Q0.32 inverse-square-root control law) plus BLUE, one
//! instance per flow queue. The state ([`CobaltVars`]) lives in each flow; the parameters
//! ([`CobaltParams`]) are per tin and come from [`crate::params`].
//!
//! CoDel decides at dequeue from the packet's sojourn time; BLUE raises its drop probability only
//! when the queue overflows the memory limit ([`CobaltVars::queue_full`]) and lowers it when the
//! queue drains ([`CobaltVars::queue_empty`]). BLUE never marks, it only drops.

pub use crate::params::CobaltParams;
use qdisc::{Instant, Rng};

/// Counts below this use the precomputed inverse square roots.
const REC_INV_SQRT_CACHE: usize = 16;

/// `floor(2^32 / sqrt(count))` for counts 0..16 (0 and 1 saturate to `u32::MAX`), the values the
/// kernel's Newton iteration converges to.
const INV_SQRT_CACHE: [u32; REC_INV_SQRT_CACHE] = [
    !0,
    !0,
    3_037_000_500,
    2_479_700_525,
    2_147_483_647,
    1_920_767_767,
    1_753_413_056,
    1_623_345_051,
    1_518_500_250,
    1_431_655_765,
    1_358_187_914,
    1_294_981_364,
    1_239_850_263,
    1_191_209_601,
    1_147_878_294,
    1_108_955_788,
];

/// Per-queue COBALT state (the kernel's `cobalt_vars`). Laid out `repr(C)` with `count` and
/// `p_drop` side by side, so that the resting test ([`CobaltVars::should_drop`]) reads both as
/// one 64-bit word.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct CobaltVars {
    /// Next scheduled drop; also used as an activity timeout.
    pub drop_next: Instant,
    /// When BLUE last changed `p_drop`.
    pub blue_timer: Instant,
    /// CoDel drop count.
    pub count: u32,
    /// BLUE drop probability, Q0.32.
    pub p_drop: u32,
    /// `2^32 / sqrt(count)` in Q0.32. Starts at 0, as in the kernel (so the first drop of a fresh
    /// queue is scheduled at once after the sojourn first exceeds the target).
    pub rec_inv_sqrt: u32,
    /// CoDel is in its dropping state.
    pub dropping: bool,
    /// The last packet judged was ECN-marked.
    pub ecn_marked: bool,
}

/// What COBALT decided for one dequeued packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Send it (possibly after an ECN mark; see [`CobaltVars::ecn_marked`]).
    Pass,
    /// CoDel wants it dropped (it was not ECN-capable).
    DropCodel,
    /// BLUE wants it dropped.
    DropBlue,
}

impl Verdict {
    /// True for either drop.
    pub fn is_drop(self) -> bool {
        self != Verdict::Pass
    }
}

/// `t + interval / sqrt(count)`: the kernel truncates `interval` to 32 bits here
/// (`reciprocal_scale`), and so do we, to stay comparable.
#[inline]
fn control(t: Instant, interval: u64, rec_inv_sqrt: u32) -> Instant {
    let scaled = (u64::from(interval as u32) * u64::from(rec_inv_sqrt)) >> 32;
    t + qdisc::Duration::from_nanos(scaled)
}

#[inline]
fn signed_diff(a: Instant, b: Instant) -> i64 {
    a.as_nanos().wrapping_sub(b.as_nanos()) as i64
}

impl CobaltVars {
    fn newton_step(&mut self) {
        let invsqrt = u64::from(self.rec_inv_sqrt);
        let invsqrt2 = (invsqrt * invsqrt) >> 32;
        let mut val = (3u64 << 32).wrapping_sub(u64::from(self.count).wrapping_mul(invsqrt2));
        val >>= 2;
        val = (val.wrapping_mul(invsqrt)) >> (32 - 2 + 1);
        self.rec_inv_sqrt = val as u32;
    }

    fn invsqrt(&mut self) {
        match INV_SQRT_CACHE.get(self.count as usize) {
            Some(&v) => self.rec_inv_sqrt = v,
            None => self.newton_step(),
        }
    }

    /// Called when the queue overflowed the memory limit and lost a packet: BLUE raises
    /// `p_drop` (at most once per `target`), and CoDel enters dropping at once. Returns true when
    /// `p_drop` went from zero to non-zero (the flow became "unresponsive").
    pub fn queue_full(&mut self, p: &CobaltParams, now: Instant) -> bool {
        let mut up = false;
        if signed_diff(now, self.blue_timer) > p.target as i64 {
            up = self.p_drop == 0;
            self.p_drop = self.p_drop.saturating_add(p.p_inc);
            self.blue_timer = now;
        }
        self.dropping = true;
        self.drop_next = now;
        if self.count == 0 {
            self.count = 1;
        }
        up
    }

    /// Called when a dequeue finds the queue empty: BLUE lowers `p_drop` (at most once per
    /// `target`), CoDel leaves dropping and decays its count once if due. Returns true when
    /// `p_drop` reached zero (the flow is no longer "unresponsive").
    pub fn queue_empty(&mut self, p: &CobaltParams, now: Instant) -> bool {
        let mut down = false;
        if self.p_drop != 0 && signed_diff(now, self.blue_timer) > p.target as i64 {
            self.p_drop = self.p_drop.saturating_sub(p.p_dec);
            self.blue_timer = now;
            down = self.p_drop == 0;
        }
        self.dropping = false;
        if self.count != 0 && signed_diff(now, self.drop_next) >= 0 {
            self.count -= 1;
            self.invsqrt();
            self.drop_next = control(self.drop_next, p.interval, self.rec_inv_sqrt);
        }
        down
    }

    /// Judges a packet at dequeue. `sojourn_since` is its enqueue time; `bulk_flows` is the tin's
    /// bulk flow count in ingress mode, 0 in egress. `try_mark` is called when CoDel wants to
    /// signal: it must set CE and return true for ECN-capable packets, return false otherwise
    /// (the packet is then dropped). `rng` is drawn only while BLUE is engaged.
    ///
    /// The common case, a flow at rest (sojourn within target, no CoDel count, BLUE off), is
    /// decided first, in a few comparisons; anything else goes through every step
    /// (`CobaltVars::judge`), with the same result either way.
    #[inline(always)]
    pub fn should_drop(
        &mut self,
        p: &CobaltParams,
        now: Instant,
        sojourn_since: Instant,
        bulk_flows: u32,
        rng: &mut Rng,
        try_mark: impl FnOnce() -> bool,
    ) -> Verdict {
        self.should_drop_with(p, now, sojourn_since, || bulk_flows, rng, try_mark)
            .0
    }

    /// [`CobaltVars::should_drop`] with the bulk flow count read by `bulk_flows`, only when
    /// the sojourn exceeds the target (most packets do not). Returns the verdict with the
    /// [`CobaltVars::ecn_marked`] it leaves, so that the caller tests the value in hand (a
    /// constant false for a flow at rest) instead of reading the field back.
    #[inline(always)]
    pub(crate) fn should_drop_with(
        &mut self,
        p: &CobaltParams,
        now: Instant,
        sojourn_since: Instant,
        bulk_flows: impl FnOnce() -> u32,
        rng: &mut Rng,
        try_mark: impl FnOnce() -> bool,
    ) -> (Verdict, bool) {
        let sojourn = now.saturating_duration_since(sojourn_since).as_nanos();
        let over_target = sojourn > p.target
            && sojourn
                > p.mtu_time
                    .saturating_mul(u64::from(bulk_flows()))
                    .saturating_mul(2)
            && sojourn > p.mtu_time.saturating_mul(4);
        // `count` and `p_drop` both 0, tested at once: the word they make (adjacent fields,
        // one load).
        if !over_target && (u64::from(self.count) | u64::from(self.p_drop) << 32) == 0 {
            // What `judge` does here: CoDel leaves (or stays out of) dropping, nothing is due
            // (the count is 0), BLUE is off, and drop_next becomes the activity timeout.
            self.dropping = false;
            self.ecn_marked = false;
            self.drop_next = now + qdisc::Duration::from_nanos(p.interval);
            return (Verdict::Pass, false);
        }
        let verdict = self.judge(p, now, over_target, rng, try_mark);
        (verdict, self.ecn_marked)
    }

    /// [`CobaltVars::should_drop`] past its common case: CoDel's dropping state and schedule,
    /// and BLUE. Inlined as well: at 10,000 flows most packets come here, and a call costs
    /// more than the branch saves.
    #[inline(always)]
    fn judge(
        &mut self,
        p: &CobaltParams,
        now: Instant,
        over_target: bool,
        rng: &mut Rng,
        try_mark: impl FnOnce() -> bool,
    ) -> Verdict {
        let mut schedule = signed_diff(now, self.drop_next);
        let mut next_due = self.count != 0 && schedule >= 0;
        let mut verdict = Verdict::Pass;
        self.ecn_marked = false;

        if over_target {
            if !self.dropping {
                self.dropping = true;
                self.drop_next = control(now, p.interval, self.rec_inv_sqrt);
            }
            if self.count == 0 {
                self.count = 1;
            }
        } else if self.dropping {
            self.dropping = false;
        }

        if next_due && self.dropping {
            self.ecn_marked = try_mark();
            if !self.ecn_marked {
                verdict = Verdict::DropCodel;
            }
            self.count = self.count.saturating_add(1);
            self.invsqrt();
            self.drop_next = control(self.drop_next, p.interval, self.rec_inv_sqrt);
            schedule = signed_diff(now, self.drop_next);
        } else {
            while next_due {
                self.count -= 1;
                self.invsqrt();
                self.drop_next = control(self.drop_next, p.interval, self.rec_inv_sqrt);
                schedule = signed_diff(now, self.drop_next);
                next_due = self.count != 0 && schedule >= 0;
            }
        }

        // BLUE: deliberately drop-only, and only when CoDel did not drop already.
        if self.p_drop != 0 && verdict == Verdict::Pass && rng.next_u32() < self.p_drop {
            verdict = Verdict::DropBlue;
        }

        // drop_next doubles as an activity timeout.
        if self.count == 0 {
            self.drop_next = now + qdisc::Duration::from_nanos(p.interval);
        } else if schedule > 0 && verdict == Verdict::Pass {
            self.drop_next = now;
        }
        verdict
    }

    /// True while the state has not decayed to rest (the flow stays on the decaying list).
    pub fn is_active(&self, now: Instant) -> bool {
        self.p_drop != 0 || self.count != 0 || now < self.drop_next
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use qdisc::Duration;

    fn params() -> CobaltParams {
        CobaltParams {
            interval: 100_000_000,
            target: 5_000_000,
            mtu_time: 121_120,
            p_inc: 1 << 24,
            p_dec: 1 << 20,
        }
    }

    #[test]
    fn newton_step_converges_to_the_cached_inverse_square_roots() {
        // Iterating Newton from the cached value at 15 gives ~2^32/sqrt(16) at 16.
        let mut v = CobaltVars {
            count: 16,
            rec_inv_sqrt: INV_SQRT_CACHE[15],
            ..Default::default()
        };
        for _ in 0..4 {
            v.newton_step();
        }
        let exact = (4_294_967_296.0f64 / 4.0) as i64;
        assert!(
            (i64::from(v.rec_inv_sqrt) - exact).abs() < exact / 1000,
            "{}",
            v.rec_inv_sqrt
        );
    }

    #[test]
    fn no_drop_below_target_and_drops_space_out_by_inverse_sqrt() {
        let p = params();
        let mut v = CobaltVars::default();
        let mut rng = Rng::new(1);
        let t0 = Instant::from_secs(1);
        // Below target: never drops.
        for i in 0..100 {
            let now = t0 + Duration::from_millis(i);
            let d = v.should_drop(&p, now, now - Duration::from_millis(1), 0, &mut rng, || {
                false
            });
            assert_eq!(d, Verdict::Pass);
        }
        // Persistently 20 ms of sojourn: drops come, with shrinking gaps.
        let mut drops = Vec::new();
        for i in 0..2000u64 {
            let now = t0 + Duration::from_millis(200 + i);
            let d = v.should_drop(
                &p,
                now,
                now - Duration::from_millis(20),
                0,
                &mut rng,
                || false,
            );
            if d.is_drop() {
                drops.push(i);
            }
        }
        assert!(drops.len() > 10);
        let gaps: Vec<u64> = drops.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(gaps[1] > gaps[gaps.len() - 1], "gaps shrink: {gaps:?}");
        // The first drop comes at once (rec_inv_sqrt starts at 0, as in the kernel); the next
        // after interval / sqrt(2) ~ 70 ms, then interval / sqrt(3) ~ 58 ms.
        assert_eq!(&gaps[..2], &[70, 58], "{gaps:?}");
    }

    #[test]
    fn ecn_capable_packets_are_marked_not_dropped() {
        let p = params();
        let mut v = CobaltVars::default();
        let mut rng = Rng::new(1);
        let mut marks = 0;
        for i in 0..1000u64 {
            let now = Instant::from_millis(i);
            let d = v.should_drop(
                &p,
                now,
                now - Duration::from_millis(30),
                0,
                &mut rng,
                || true,
            );
            assert_eq!(d, Verdict::Pass);
            marks += usize::from(v.ecn_marked);
        }
        assert!(marks > 5);
    }

    #[test]
    fn blue_rises_on_overflow_and_decays_when_empty() {
        let p = params();
        let mut v = CobaltVars::default();
        assert!(v.queue_full(&p, Instant::from_millis(10)));
        assert_eq!(v.p_drop, 1 << 24);
        // Within target: no further increase.
        assert!(!v.queue_full(&p, Instant::from_millis(12)));
        assert_eq!(v.p_drop, 1 << 24);
        v.queue_full(&p, Instant::from_millis(20));
        assert_eq!(v.p_drop, 2 << 24);
        let mut t = 20;
        let mut steps = 0;
        while v.p_drop > 0 {
            t += 6;
            v.queue_empty(&p, Instant::from_millis(t));
            steps += 1;
        }
        assert_eq!(steps, 32, "2/256 decays in 1/4096 steps");
    }
}
