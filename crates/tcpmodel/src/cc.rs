//! Congestion control: a small trait and four algorithms (NewReno, CUBIC, LEDBAT and the scalable
//! Prague), dispatched through the [`Cc`] enum so the per-ACK path has no vtable and no heap.
//!
//! All windows are in bytes. The sender calls [`CongestionControl::on_ack`] for newly delivered
//! bytes outside a reduction window, [`CongestionControl::on_congestion`] (loss) or
//! [`CongestionControl::on_ce`] (ECN) at most once per window of data, and
//! [`CongestionControl::on_rto`] on a retransmission timeout. Under accurate ECN it also reports
//! every ACK's CE count ([`CongestionControl::on_ecn_feedback`]) and the end of every round trip
//! ([`CongestionControl::on_round`]).

use qdisc::{Duration, Instant};

/// What the sender knows about round-trip times when it calls the controller.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RttInfo {
    /// The sample taken from this ACK, if any.
    pub latest: Option<Duration>,
    /// The smoothed RTT (RFC 6298), once a sample exists.
    pub srtt: Option<Duration>,
    /// The smallest sample seen so far.
    pub min: Option<Duration>,
}

/// A congestion controller. Implementations keep their window in bytes and never panic.
pub trait CongestionControl {
    /// The congestion window in bytes (at least one MSS).
    fn window(&self) -> u64;
    /// The slow-start threshold in bytes (`u64::MAX` before the first reduction).
    fn ssthresh(&self) -> u64;
    /// `acked` bytes were newly delivered (cumulatively or SACKed) at `now`; `pipe` is the number
    /// of bytes in flight before this ACK. Not called inside a reduction (recovery) window.
    fn on_ack(&mut self, now: Instant, acked: u64, rtt: &RttInfo, pipe: u64);
    /// A congestion signal (loss detected by SACK/dupacks, or ECN-Echo). Called at most once per
    /// window of data; the window is reduced before it returns.
    fn on_congestion(&mut self, now: Instant, rtt: &RttInfo, pipe: u64);
    /// The retransmission timer fired: the window collapses to one MSS. `first` is true for the
    /// first timeout of a loss episode; only that one lowers ssthresh (as Linux does), so that
    /// backed-off timeouts during an outage do not shrink it to two segments.
    fn on_rto(&mut self, now: Instant, first: bool);
    /// An ECN congestion signal (ECN-Echo, or a CE counter that grew), at most once per window
    /// of data. The default treats it as a loss, as RFC 3168 asks of classic senders.
    fn on_ce(&mut self, now: Instant, rtt: &RttInfo, pipe: u64) {
        self.on_congestion(now, rtt, pipe);
    }
    /// Accurate-ECN feedback of one ACK, before the ACK is otherwise acted on: `delivered`
    /// segments newly delivered (cumulatively or SACKed), `ce` CE marks newly counted by the
    /// receiver. Only senders that negotiated accurate ECN call it. Default: ignored.
    fn on_ecn_feedback(&mut self, delivered: u64, ce: u64) {
        let _ = (delivered, ce);
    }
    /// A round trip ended: an ACK covered everything sent before the previous round ended.
    /// Default: ignored.
    fn on_round(&mut self, now: Instant) {
        let _ = now;
    }
    /// True for a scalable congestion control: it sizes each ECN reduction by the extent of
    /// marking, so its window keeps growing (as in the fluid model of DCTCP) while a CE-triggered
    /// reduction is outstanding. Classic controllers freeze the window until it ends.
    fn is_scalable(&self) -> bool {
        false
    }
}

/// Which algorithm a sender uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum CcKind {
    /// NewReno (RFC 5681 / RFC 6582 window rules; loss recovery is SACK-based in the sender).
    #[default]
    NewReno,
    /// CUBIC as in Linux (RFC 9438: beta 0.7, C 0.4, fast convergence, TCP-friendly region;
    /// no HyStart).
    Cubic,
    /// LEDBAT (RFC 6817, target 100 ms, gain 1), a less-than-best-effort background sender.
    Ledbat,
    /// Prague, the scalable (L4S) congestion control of RFC 9331's requirements, DCTCP-style:
    /// see [`Prague`]. With ECN its segments carry ECT(1) and its receiver returns accurate ECN
    /// feedback; without ECN it is a classic Reno-like sender.
    Prague,
}

impl CcKind {
    /// Every algorithm, in a fixed order.
    pub const ALL: [CcKind; 4] = [
        CcKind::NewReno,
        CcKind::Cubic,
        CcKind::Ledbat,
        CcKind::Prague,
    ];

    /// The lowercase name scenarios use (`newreno`, `cubic`, `ledbat`, `prague`).
    pub fn name(self) -> &'static str {
        match self {
            CcKind::NewReno => "newreno",
            CcKind::Cubic => "cubic",
            CcKind::Ledbat => "ledbat",
            CcKind::Prague => "prague",
        }
    }

    /// True for an L4S sender: with ECN it marks its packets ECT(1), the L4S identifier, and
    /// needs accurate ECN feedback (a count of CE marks, not RFC 3168's one-bit echo).
    pub fn is_l4s(self) -> bool {
        self == CcKind::Prague
    }
}

/// Enum dispatch over the built-in controllers.
#[derive(Clone, Debug)]
pub enum Cc {
    /// See [`NewReno`].
    NewReno(NewReno),
    /// See [`Cubic`].
    Cubic(Cubic),
    /// See [`Ledbat`].
    Ledbat(Ledbat),
    /// See [`Prague`].
    Prague(Prague),
}

impl Cc {
    /// A controller of `kind` with MSS `mss` bytes and an initial window of `iw` bytes.
    pub fn new(kind: CcKind, mss: u64, iw: u64) -> Cc {
        match kind {
            CcKind::NewReno => Cc::NewReno(NewReno::new(mss, iw)),
            CcKind::Cubic => Cc::Cubic(Cubic::new(mss, iw)),
            CcKind::Ledbat => Cc::Ledbat(Ledbat::new(mss, iw)),
            CcKind::Prague => Cc::Prague(Prague::new(mss, iw)),
        }
    }
}

macro_rules! dispatch {
    ($self:ident, $c:ident => $e:expr) => {
        match $self {
            Cc::NewReno($c) => $e,
            Cc::Cubic($c) => $e,
            Cc::Ledbat($c) => $e,
            Cc::Prague($c) => $e,
        }
    };
}

impl CongestionControl for Cc {
    fn window(&self) -> u64 {
        dispatch!(self, c => c.window())
    }
    fn ssthresh(&self) -> u64 {
        dispatch!(self, c => c.ssthresh())
    }
    fn on_ack(&mut self, now: Instant, acked: u64, rtt: &RttInfo, pipe: u64) {
        dispatch!(self, c => c.on_ack(now, acked, rtt, pipe))
    }
    fn on_congestion(&mut self, now: Instant, rtt: &RttInfo, pipe: u64) {
        dispatch!(self, c => c.on_congestion(now, rtt, pipe))
    }
    fn on_rto(&mut self, now: Instant, first: bool) {
        dispatch!(self, c => c.on_rto(now, first))
    }
    fn on_ce(&mut self, now: Instant, rtt: &RttInfo, pipe: u64) {
        dispatch!(self, c => c.on_ce(now, rtt, pipe))
    }
    fn on_ecn_feedback(&mut self, delivered: u64, ce: u64) {
        dispatch!(self, c => c.on_ecn_feedback(delivered, ce))
    }
    fn on_round(&mut self, now: Instant) {
        dispatch!(self, c => c.on_round(now))
    }
    fn is_scalable(&self) -> bool {
        dispatch!(self, c => c.is_scalable())
    }
}

/// NewReno window rules (RFC 5681): slow start with appropriate byte counting (at most 2 MSS per
/// ACK, RFC 3465), congestion avoidance of one MSS per window of acknowledged bytes, halving on
/// congestion (Linux: `ssthresh = max(cwnd / 2, 2 MSS)`), one MSS after an RTO.
#[derive(Clone, Debug)]
pub struct NewReno {
    mss: u64,
    cwnd: u64,
    ssthresh: u64,
    /// Bytes acknowledged towards the next one-MSS increase in congestion avoidance.
    acked_accum: u64,
}

impl NewReno {
    /// Initial window `iw` bytes (clamped to at least one MSS).
    pub fn new(mss: u64, iw: u64) -> Self {
        let mss = mss.max(1);
        NewReno {
            mss,
            cwnd: iw.max(mss),
            ssthresh: u64::MAX,
            acked_accum: 0,
        }
    }
}

impl CongestionControl for NewReno {
    fn window(&self) -> u64 {
        self.cwnd
    }
    fn ssthresh(&self) -> u64 {
        self.ssthresh
    }
    fn on_ack(&mut self, _now: Instant, acked: u64, _rtt: &RttInfo, _pipe: u64) {
        if self.cwnd < self.ssthresh {
            self.cwnd += acked.min(2 * self.mss);
        } else {
            self.acked_accum += acked;
            if self.acked_accum >= self.cwnd {
                self.acked_accum -= self.cwnd;
                self.cwnd += self.mss;
            }
        }
    }
    fn on_congestion(&mut self, _now: Instant, _rtt: &RttInfo, _pipe: u64) {
        self.ssthresh = (self.cwnd / 2).max(2 * self.mss);
        self.cwnd = self.ssthresh;
        self.acked_accum = 0;
    }
    fn on_rto(&mut self, _now: Instant, first: bool) {
        if first {
            self.ssthresh = (self.cwnd / 2).max(2 * self.mss);
        }
        self.cwnd = self.mss;
        self.acked_accum = 0;
    }
}

/// CUBIC multiplicative decrease factor (Linux `beta` 717/1024 ~ 0.7).
const CUBIC_BETA: f64 = 0.7;
/// CUBIC scaling constant C (segments / s^3).
const CUBIC_C: f64 = 0.4;

/// CUBIC (RFC 9438 / Linux `tcp_cubic` without HyStart). Window arithmetic is done in segments as
/// `f64`; the target `W(t) = C (t - K)^3 + W_max` uses `t` = time since the epoch plus the minimum
/// RTT (as Linux does), growth per ACK is capped at half a segment per acknowledged segment (the
/// RFC's 1.5x cap), and the TCP-friendly estimate `W_est` grows with `alpha = 3(1-beta)/(1+beta)`.
#[derive(Clone, Debug)]
pub struct Cubic {
    mss: u64,
    /// Window in segments.
    cwnd: f64,
    ssthresh: f64,
    w_max: f64,
    k: f64,
    origin: f64,
    w_est: f64,
    epoch: Option<Instant>,
}

impl Cubic {
    /// Initial window `iw` bytes (clamped to at least one MSS).
    pub fn new(mss: u64, iw: u64) -> Self {
        let mss = mss.max(1);
        Cubic {
            mss,
            cwnd: (iw.max(mss) as f64) / mss as f64,
            ssthresh: f64::INFINITY,
            w_max: 0.0,
            k: 0.0,
            origin: 0.0,
            w_est: 0.0,
            epoch: None,
        }
    }

    fn reduce(&mut self) {
        // Fast convergence: release bandwidth to newer flows when the window stopped short of the
        // previous maximum.
        self.w_max = if self.cwnd < self.w_max {
            self.cwnd * (1.0 + CUBIC_BETA) / 2.0
        } else {
            self.cwnd
        };
        self.ssthresh = (self.cwnd * CUBIC_BETA).max(2.0);
        self.epoch = None;
    }
}

/// A window of `segs` segments of `mss` bytes in bytes (the trait's unit); an infinite window
/// (an unset slow-start threshold) is `u64::MAX`.
fn segments_to_bytes(segs: f64, mss: u64) -> u64 {
    if segs.is_finite() {
        (segs * mss as f64) as u64
    } else {
        u64::MAX
    }
}

impl CongestionControl for Cubic {
    fn window(&self) -> u64 {
        segments_to_bytes(self.cwnd, self.mss)
    }
    fn ssthresh(&self) -> u64 {
        segments_to_bytes(self.ssthresh, self.mss)
    }
    fn on_ack(&mut self, now: Instant, acked: u64, rtt: &RttInfo, _pipe: u64) {
        let segs = acked as f64 / self.mss as f64;
        if self.cwnd < self.ssthresh {
            self.cwnd += segs.min(2.0);
            return;
        }
        let epoch = match self.epoch {
            Some(e) => e,
            None => {
                self.epoch = Some(now);
                if self.cwnd < self.w_max {
                    self.k = ((self.w_max - self.cwnd) / CUBIC_C).cbrt();
                    self.origin = self.w_max;
                } else {
                    self.k = 0.0;
                    self.origin = self.cwnd;
                }
                self.w_est = self.cwnd;
                now
            }
        };
        let min_rtt = rtt.min.unwrap_or(Duration::ZERO).as_secs_f64();
        let t = (now - epoch).as_secs_f64() + min_rtt;
        let target = self.origin + CUBIC_C * (t - self.k).powi(3);
        // TCP-friendly region: an AIMD window with the same average throughput as Reno.
        let alpha = 3.0 * (1.0 - CUBIC_BETA) / (1.0 + CUBIC_BETA);
        self.w_est += alpha * segs / self.cwnd;
        let goal = target.max(self.w_est);
        let inc = if goal > self.cwnd {
            ((goal - self.cwnd) / self.cwnd).min(0.5)
        } else {
            // Linux grows very slowly (1 segment per 100 windows) at or above the target.
            0.01 / self.cwnd
        };
        self.cwnd += inc * segs;
    }
    fn on_congestion(&mut self, _now: Instant, _rtt: &RttInfo, _pipe: u64) {
        self.reduce();
        self.cwnd = self.ssthresh;
    }
    fn on_rto(&mut self, _now: Instant, first: bool) {
        if first {
            self.reduce();
        }
        self.epoch = None;
        self.cwnd = 1.0;
    }
}

/// LEDBAT target queueing delay (RFC 6817 says at most 100 ms).
pub const LEDBAT_TARGET: Duration = Duration::from_millis(100);
/// LEDBAT gain (RFC 6817: at most 1).
const LEDBAT_GAIN: f64 = 1.0;
/// LEDBAT minimum window in segments.
const LEDBAT_MIN_CWND: f64 = 2.0;
/// Samples in LEDBAT's current-delay filter (the minimum of the most recent ones is used).
const LEDBAT_FILTER: usize = 4;

/// LEDBAT (RFC 6817). Queueing delay is estimated as the current RTT (the minimum of the last
/// four samples) minus the minimum RTT seen, i.e. the reverse path is assumed uncongested (true in
/// the simulator; a real LEDBAT uses one-way delays). The window moves by
/// `gain * (target - delay) / target` segments per window of acknowledged data, may not exceed the
/// bytes in flight plus one segment, and halves on loss (at most once per window).
#[derive(Clone, Debug)]
pub struct Ledbat {
    mss: u64,
    /// Window in segments.
    cwnd: f64,
    ssthresh: u64,
    recent: [Duration; LEDBAT_FILTER],
    n_recent: usize,
    next_slot: usize,
}

impl Ledbat {
    /// Initial window `iw` bytes (clamped to at least the 2-segment minimum).
    pub fn new(mss: u64, iw: u64) -> Self {
        let mss = mss.max(1);
        Ledbat {
            mss,
            cwnd: (iw as f64 / mss as f64).max(LEDBAT_MIN_CWND),
            ssthresh: u64::MAX,
            recent: [Duration::ZERO; LEDBAT_FILTER],
            n_recent: 0,
            next_slot: 0,
        }
    }

    /// The current queueing-delay estimate, if any RTT sample exists.
    pub fn queueing_delay(&self, rtt: &RttInfo) -> Option<Duration> {
        let base = rtt.min?;
        let current = self.recent[..self.n_recent].iter().min()?;
        Some(*current - base)
    }
}

impl CongestionControl for Ledbat {
    fn window(&self) -> u64 {
        segments_to_bytes(self.cwnd, self.mss)
    }
    fn ssthresh(&self) -> u64 {
        self.ssthresh
    }
    fn on_ack(&mut self, _now: Instant, acked: u64, rtt: &RttInfo, pipe: u64) {
        if let Some(s) = rtt.latest {
            self.recent[self.next_slot] = s;
            self.next_slot = (self.next_slot + 1) % LEDBAT_FILTER;
            self.n_recent = (self.n_recent + 1).min(LEDBAT_FILTER);
        }
        let Some(delay) = self.queueing_delay(rtt) else {
            return;
        };
        let target = LEDBAT_TARGET.as_secs_f64();
        let off_target = (target - delay.as_secs_f64()) / target;
        let segs = acked as f64 / self.mss as f64;
        self.cwnd += LEDBAT_GAIN * off_target * segs / self.cwnd;
        // RFC 6817: cwnd <= flightsize + ALLOWED_INCREASE * MSS.
        let cap = pipe as f64 / self.mss as f64 + 1.0;
        self.cwnd = self.cwnd.min(cap.max(LEDBAT_MIN_CWND)).max(LEDBAT_MIN_CWND);
    }
    fn on_congestion(&mut self, _now: Instant, _rtt: &RttInfo, _pipe: u64) {
        self.cwnd = (self.cwnd / 2.0).max(LEDBAT_MIN_CWND);
        self.ssthresh = self.window();
    }
    fn on_rto(&mut self, _now: Instant, first: bool) {
        if first {
            self.ssthresh = self.window() / 2;
        }
        self.cwnd = 1.0;
    }
}

/// Gain of Prague's (and DCTCP's) marking-fraction EWMA: 1/16.
pub const PRAGUE_G: f64 = 1.0 / 16.0;
/// Prague's smallest window in segments.
const PRAGUE_MIN_CWND: f64 = 2.0;
/// Prague's RTT-independence target: flows with a shorter smoothed RTT grow as if their RTT
/// were this long (the reference implementation's `prague_rtt_target`).
pub const PRAGUE_RTT_TARGET: Duration = Duration::from_millis(25);
/// Round trips after slow start before Prague becomes RTT-independent (the reference
/// implementation's `prague_rtt_transition`).
pub const PRAGUE_RTT_TRANSITION: u32 = 500;

/// Prague, modelled as the DCTCP-like core that RFC 9331's scalable senders share:
///
/// * **Feedback.** Accurate ECN: the sender learns how many of its segments were CE-marked (not
///   RFC 3168's sticky one-bit echo), through [`CongestionControl::on_ecn_feedback`].
/// * **alpha.** At the end of every round trip, `alpha += g * (F - alpha)` with `g` = 1/16 and
///   `F` the fraction of the round's delivered segments that were CE-marked. `alpha` starts at
///   1, so the first mark halves the window like a classic slow-start exit.
/// * **Response.** On the first CE mark of a window (at most once per round trip) the window
///   shrinks to `cwnd * (1 - alpha / 2)`, at least 2 segments, and ssthresh follows it; the
///   window keeps growing meanwhile ([`CongestionControl::is_scalable`]).
/// * **Growth.** Slow start (up to 2 segments per ACK) below ssthresh, then one segment per
///   round trip (Reno's additive increase), counting only the acknowledged segments that were
///   not CE-marked (the reference implementation's "unsaturated" increase).
/// * **RTT independence** (the reference's default `RTT_CONTROL_RATE`): after
///   [`PRAGUE_RTT_TRANSITION`] round trips out of slow start, a flow whose smoothed RTT is
///   below [`PRAGUE_RTT_TARGET`] scales its additive increase by `(srtt / target)^2`, growing
///   by one segment per 25 ms of rate as a 25 ms flow would.
/// * **Classic fallback.** A loss halves the window (at least 2 segments); an RTO collapses it
///   to one segment, as Reno.
///
/// Not modelled: the reference's limit of one alpha update and one CE reduction per target RTT
/// in RTT-independent mode (here both happen once per round trip), its fractional window
/// below 2 segments, its classic-ECN-AQM detection, and its own pacing and burst sizing (the
/// sender's ordinary pacing applies if configured).
#[derive(Clone, Debug)]
pub struct Prague {
    mss: u64,
    /// Window in segments.
    cwnd: f64,
    /// Slow-start threshold in segments (infinite before the first reduction).
    ssthresh: f64,
    alpha: f64,
    /// Segments delivered and CE marks counted in the current round.
    round_delivered: u64,
    round_ce: u64,
    /// CE marks reported with the ACK being processed (not counted for growth).
    ack_ce: u64,
    /// Round trips completed out of slow start.
    ca_rounds: u32,
}

impl Prague {
    /// Initial window `iw` bytes (clamped to at least one MSS).
    pub fn new(mss: u64, iw: u64) -> Self {
        let mss = mss.max(1);
        Prague {
            mss,
            cwnd: (iw.max(mss) as f64) / mss as f64,
            ssthresh: f64::INFINITY,
            alpha: 1.0,
            round_delivered: 0,
            round_ce: 0,
            ack_ce: 0,
            ca_rounds: 0,
        }
    }

    /// The factor on the additive increase for smoothed RTT `srtt` (1 until RTT independence
    /// starts, and for flows at or above the target RTT).
    pub fn rtt_scaling(&self, srtt: Option<Duration>) -> f64 {
        match srtt {
            Some(r) if self.ca_rounds >= PRAGUE_RTT_TRANSITION && r < PRAGUE_RTT_TARGET => {
                (r.as_secs_f64() / PRAGUE_RTT_TARGET.as_secs_f64()).powi(2)
            }
            _ => 1.0,
        }
    }

    /// The current estimate of the marked fraction, in [0, 1].
    pub fn alpha(&self) -> f64 {
        self.alpha
    }
}

impl CongestionControl for Prague {
    fn window(&self) -> u64 {
        segments_to_bytes(self.cwnd, self.mss)
    }
    fn ssthresh(&self) -> u64 {
        segments_to_bytes(self.ssthresh, self.mss)
    }
    fn on_ack(&mut self, _now: Instant, acked: u64, rtt: &RttInfo, _pipe: u64) {
        let ce = std::mem::take(&mut self.ack_ce) as f64;
        let segs = (acked as f64 / self.mss as f64 - ce).max(0.0);
        if self.cwnd < self.ssthresh {
            self.cwnd += segs.min(2.0);
        } else {
            self.cwnd += segs / self.cwnd * self.rtt_scaling(rtt.srtt);
        }
    }
    fn on_congestion(&mut self, _now: Instant, _rtt: &RttInfo, _pipe: u64) {
        self.ack_ce = 0;
        self.cwnd = (self.cwnd / 2.0).max(PRAGUE_MIN_CWND);
        self.ssthresh = self.cwnd;
    }
    fn on_rto(&mut self, _now: Instant, first: bool) {
        if first {
            self.ssthresh = (self.cwnd / 2.0).max(PRAGUE_MIN_CWND);
        }
        self.cwnd = 1.0;
    }
    fn on_ce(&mut self, _now: Instant, _rtt: &RttInfo, _pipe: u64) {
        self.ack_ce = 0;
        self.cwnd = (self.cwnd * (1.0 - self.alpha / 2.0)).max(PRAGUE_MIN_CWND);
        self.ssthresh = self.cwnd;
    }
    fn on_ecn_feedback(&mut self, delivered: u64, ce: u64) {
        self.round_delivered += delivered;
        self.round_ce += ce;
        self.ack_ce = ce;
    }
    fn on_round(&mut self, _now: Instant) {
        if self.cwnd >= self.ssthresh {
            self.ca_rounds = self.ca_rounds.saturating_add(1);
        }
        if self.round_delivered > 0 {
            let f = (self.round_ce as f64 / self.round_delivered as f64).min(1.0);
            self.alpha += PRAGUE_G * (f - self.alpha);
        }
        self.round_delivered = 0;
        self.round_ce = 0;
    }
    fn is_scalable(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prague_grows_on_unmarked_segments_only_and_scales_growth_to_a_25ms_rtt() {
        let now = Instant::ZERO;
        let mut p = Prague::new(1000, 10_000);
        p.on_congestion(now, &RttInfo::default(), 0);
        assert_eq!(p.window(), 5_000);
        let rtt = RttInfo {
            srtt: Some(Duration::from_millis(10)),
            ..RttInfo::default()
        };
        // Five segments acknowledged, two of them CE-marked: + 3/5 of a segment.
        p.on_ecn_feedback(5, 2);
        p.on_ack(now, 5_000, &rtt, 0);
        assert_eq!(p.window(), 5_600);
        // RTT independence starts after PRAGUE_RTT_TRANSITION rounds out of slow start.
        assert_eq!(p.rtt_scaling(rtt.srtt), 1.0);
        for _ in 0..PRAGUE_RTT_TRANSITION {
            p.on_round(now);
        }
        assert!((p.rtt_scaling(rtt.srtt) - 0.16).abs() < 1e-12, "(10/25)^2");
        assert_eq!(p.rtt_scaling(Some(Duration::from_millis(30))), 1.0);
        let w = p.window();
        p.on_ack(now, 5_600, &rtt, 0);
        assert_eq!(p.window() - w, 160, "one segment per window, times 0.16");
    }

    #[test]
    fn prague_alpha_follows_the_marked_fraction_and_sizes_the_reduction() {
        let rtt = RttInfo::default();
        let mut p = Prague::new(1000, 100_000);
        // The first mark halves (alpha starts at 1).
        p.on_ce(Instant::ZERO, &rtt, 0);
        assert_eq!(p.window(), 50_000);
        // Rounds with 10% of segments marked: alpha converges on 0.1.
        for _ in 0..200 {
            p.on_ecn_feedback(50, 5);
            p.on_round(Instant::ZERO);
        }
        assert!((p.alpha() - 0.1).abs() < 1e-3, "alpha {}", p.alpha());
        p.on_ce(Instant::ZERO, &rtt, 0);
        let near = |w: u64, want: u64| w.abs_diff(want) <= 10;
        assert!(
            near(p.window(), 47_500),
            "a 10% marked fraction costs 5% of the window: {}",
            p.window()
        );
        // One unmarked round decays alpha by 1/16.
        p.on_ecn_feedback(50, 0);
        p.on_round(Instant::ZERO);
        assert!((p.alpha() - 0.1 * 15.0 / 16.0).abs() < 1e-3);
        // A loss halves, as Reno.
        p.on_congestion(Instant::ZERO, &rtt, 0);
        assert!(near(p.window(), 23_750), "{}", p.window());
        assert!(p.is_scalable() && !Cubic::new(1000, 1000).is_scalable());
    }

    #[test]
    fn newreno_halves_and_cubic_keeps_seventy_percent() {
        let rtt = RttInfo::default();
        let mut r = NewReno::new(1000, 100_000);
        r.on_congestion(Instant::ZERO, &rtt, 0);
        assert_eq!(r.window(), 50_000);
        let mut c = Cubic::new(1000, 100_000);
        c.on_congestion(Instant::ZERO, &rtt, 0);
        assert_eq!(c.window(), 70_000);
    }

    #[test]
    fn cubic_returns_to_wmax_after_k_seconds() {
        let mss = 1000;
        let mut c = Cubic::new(mss, 100 * mss);
        let rtt = RttInfo {
            min: Some(Duration::from_millis(100)),
            ..RttInfo::default()
        };
        c.on_congestion(Instant::ZERO, &rtt, 0);
        // K = cbrt(100 * 0.3 / 0.4) ~ 4.2 s; feed a window of ACKs every RTT (100 ms, long
        // enough that the TCP-friendly estimate stays below the cubic curve).
        let mut now = Instant::ZERO;
        while now < Instant::from_millis(4_000) {
            now += Duration::from_millis(100);
            let w = c.window();
            c.on_ack(now, w, &rtt, w);
        }
        let w = c.window() as f64 / mss as f64;
        assert!((90.0..101.0).contains(&w), "cwnd {w} segments after 4 s");
        // Past K the window grows beyond W_max (convex region).
        while now < Instant::from_millis(8_000) {
            now += Duration::from_millis(100);
            let w = c.window();
            c.on_ack(now, w, &rtt, w);
        }
        assert!(c.window() > 110 * mss, "cwnd {} after 8 s", c.window());
    }
}
