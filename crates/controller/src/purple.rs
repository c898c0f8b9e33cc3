//! PURPLE, our design: a law built from a model of the link, with one main knob (the latency
//! target).
//!
//! # What the law believes about the link
//!
//! The shaper (CAKE, at our rate `R`) sits next to a bottleneck whose capacity `C` changes and
//! whose buffer nobody can change (the radio's). Every control interval `T` (50 ms) the law is
//! told what the link delivered (`d`), how much CAKE holds (its backlog, drops and marks) and the
//! queueing delay the probes saw (`q`, one-way per direction). Three regimes can be told apart:
//!
//! | regime | what is seen | what it says about `C` |
//! |---|---|---|
//! | **capacity-limited** | a queue stands in the bottleneck (`q` above its floor: 1 ms, one frame's serialisation and the link's learnt delay noise) and is not draining, while the link carried load and delivered other than exactly our rate; or, right after a probe, the link delivered less than the probed rate while CAKE still held a deep backlog (2 ms of our rate) | the bottleneck was busy: `C = d`, a *reading* |
//! | **standing queue** | a queue above the floor while the link delivered exactly our rate | `C >= R`, no reading; a queue above the target is drained from `R` |
//! | **rate-limited** | the link kept up with `R` (delivered `R` less one frame and 0.3%) with CAKE backlogged | `C >= R`: only a lower bound |
//! | **demand-limited** | less than `R` delivered, no queue (or a queue falling by more than the floor: the senders backing off from it), no answer to a probe | nothing (the senders want less, TCP has not yet answered a rate increase, which takes a round trip or more, or bulk TCP backed off after a mark) |
//!
//! A reading is exact but late: it describes the interval that just ended, as a perfect
//! capacity measurement one interval late would (the section-C "late oracle"). Above the
//! capacity the bottleneck's queue grows by `(R - C) T` per interval; below it, nothing tells
//! how far below. So the law:
//!
//! - **cuts to the reading** ([`Reason::Capacity`]): `R = C (1 - m - (q - target)+ /
//!   drain_time)`, at least `C / 2`: below what the link delivers by the cruise margin `m` (5% at
//!   small targets, as the late oracle keeps) plus what drains the queue above the target within
//!   `drain_time`;
//! - **follows the capacity's trend** between readings ([`Reason::Trend`]): the running mean of
//!   the log change per interval between successive readings (clipped at 2%, and weighted by
//!   their distance up to 1 s: two readings one interval apart are noise, not a trend) moves
//!   the cruise rate, so a fade neither runs into a queue nor leaves capacity unused;
//! - **drains a standing queue** ([`Reason::Standing`]) from our rate, without a reading;
//! - **probes for more** ([`Reason::Probe`]): once the link has been rate-limited for
//!   `probe_wait` intervals after a reading (fewer on volatile links), `R` rises by `g0 = target /
//!   (2 T)` per interval up to the last reading, lands just `g0` above it, and beyond it each
//!   probe the link absorbs doubles the next (up to `target / T` on a calm link, so one
//!   interval's overshoot adds at most the target; the volatility on a volatile one; or
//!   `probe_max` far below the highest reading of the last 10 s, either after a deep dip (the
//!   last reading below half of it, when an outage or a hand-over's near-outage ended) or on a
//!   link more than 1.5 x `volatile` volatile, whose capacity jumps between levels). Far below a
//!   recent reading the rate goes straight back to
//!   the cruise level under it. A probe's answer (the delivery falling short of it) is a reading;
//! - **holds when the demand is the limit**: a download ending is not a capacity drop;
//! - optionally **cuts on a sudden shortfall** ([`Reason::Shortfall`]; off by default, `sudden =
//!   0`): right after a saturated interval, a delivery below `sudden x R` with CAKE empty is
//!   either the capacity falling (bulk TCP is then clocked by the new capacity and the probes
//!   crossing the filling queue come back late), the downloads ending, or TCP backing off. With
//!   the rule on, the law cuts to the delivery at once and **restores** the rate before the cut
//!   ([`Reason::Restored`]) if the next two intervals show the demand stopped. Off, a capacity
//!   drop is read one interval later from the queue it builds; the rule misreads TCP's own dips
//!   as drops, which costs most where TCP refills slowly (a home router, a long round trip, a
//!   slow link), so it is off (docs/purple.md, "The sudden-shortfall cut, off by default");
//! - treats an interval that delivered nothing on a loaded link with a queue as an **outage**
//!   ([`Reason::Outage`]): the engine then holds the configured minimum.
//!
//! The link's **volatility** (running mean of the clipped absolute log change between successive
//! readings, fading with time) decides how cautious the probes are. On a calm link a rise of
//! capacity is rare and a probe's overshoot is most of the queue there is: probes are small and
//! seldom. On a volatile link (cellular scheduling, satellite hand-overs) one interval's delivery
//! is mostly the scheduler's luck and the capacity often rises by tens of percent from one
//! interval to the next, while its drops cost the same queue whatever the law does: there the
//! capacity estimate blends in the best delivery of the last second's loaded intervals, the delay
//! noise the link makes by itself is learnt (up to `max_noise`) and not drained, and the probes
//! start at once. A single large step (a hand-over, the end of a dip) does not make a link
//! volatile.
//!
//! # The main knob
//!
//! [`PurpleParams::target`] is the queueing delay the law aims for. It sets the drain term, the
//! probe step `g0 = target / (2 T)` (a probe may add about half the target of queue in one
//! interval), the calm-link probe cap `target / T` and the cruise margin
//! (`margin x (1 - target / 50 ms)`), so sweeping it trades latency for throughput
//! (`purple demo --matrix` draws the curve).
//!
//! # Phases
//!
//! The state per direction is one [`Phase`]; every change is recorded as a [`Transition`] with
//! its trigger ([`Purple::take_transitions`]), and every decision carries a [`Reason`] naming
//! the rule. The engine adds the bounds, the stall fallback and the change interval; PURPLE
//! paces its own increases, so the engine's generic hold after a decrease and increase limit are
//! opened ([`Law::safety`]).

use crate::baseline::{Baseline, BaselineParams};
use crate::config::{check, law_params, ms, Config, ConfigError};
use crate::engine::{DirSignals, Law, Needs, Step};
use crate::safety::SafetyParams;
use crate::{Direction, Duration, Instant, PerDir, Rate, Reason, ReflectorId, Sample};

/// Reflectors whose raw samples the fast delay estimate tracks (more are replaced, oldest first).
const FAST_SLOTS: usize = 8;

/// Bytes of one full-size Ethernet frame (serialisation allowances, quantisation).
const MTU: f64 = qdisc::FULL_FRAME as f64;

/// Volatility: the change of one reading counts up to this (|ln| of the ratio).
const VOL_CLIP: f64 = 0.5;
/// Volatility: weight of one reading's change in the running mean.
const VOL_GAIN: f64 = 0.1;
/// Volatility: kept per interval.
const VOL_DECAY: f64 = 0.99;
/// Trend: largest log change per interval believed (2%: a fade, not a step).
const TREND_CLIP: f64 = 0.02;
/// Trend: weight of one reading in the running mean.
const TREND_GAIN: f64 = 0.5;
/// Trend: smaller trends (per interval) and changes are ignored.
const TREND_MIN: f64 = 0.001;
/// Trend: two readings this many intervals apart (1 s) or more count fully; closer ones in
/// proportion.
const TREND_SPAN: u32 = 20;
/// A probe's answer needs CAKE to hold at least this much of our rate at the end of the
/// interval (and `busy_bytes`): a few packets are no evidence that CAKE was the limit.
const DEEP: Duration = Duration::from_millis(2);
/// Weight with which a delay sample below the learnt noise lowers it (see
/// `PurpleParams::noise_rise` for the other side).
const NOISE_FALL: f64 = 0.05;

/// Volatility, in units of `volatile`, above which probes far below the recent high may grow to
/// `probe_max` (where the capacity estimate blends in the best recent delivery at half weight
/// or more). Chosen among 1, 1.5 and 2 at 10 seeds (docs/purple.md, stop 26): at 1 the home
/// router's outage link loses its throughput target, at 2 tmobile-lte gains less.
const FAR_VOLATILITY: f64 = 1.5;

/// Loaded intervals' deliveries kept for the capacity estimate on a volatile link.
const READINGS: usize = 8;
/// ... if no older than this.
const RECENT: Duration = Duration::from_secs(1);
/// How long the highest reading is remembered as the level to return to.
const HIGH_MEMORY: Duration = Duration::from_secs(10);
/// A reading at most this many intervals old is still the capacity to return to at once.
const RECENT_READING: u32 = 100;

/// Transitions kept until taken (older ones are dropped first).
const MAX_TRANSITIONS: usize = 32;

/// One reflector's latest unsmoothed delay per direction, for the fast delay estimate.
#[derive(Clone, Debug)]
struct FastSlot {
    id: Option<ReflectorId>,
    baseline: PerDir<Baseline>,
    /// (when, delta above the baseline in ns) of the latest sample per direction.
    last: PerDir<Option<(Instant, f64)>>,
}

impl Default for FastSlot {
    fn default() -> Self {
        FastSlot {
            id: None,
            baseline: PerDir::both(Baseline::new(BaselineParams::default())),
            last: PerDir::default(),
        }
    }
}

law_params! {
    /// PURPLE's parameters. [`PurpleParams::target`] is the one to change; the others are the
    /// law's design constants, exposed for experiments.
    pub struct PurpleParams, "purple" {
        /// Control interval. Default 50 ms.
        interval: Duration = ms(50), ms(10), ms(5_000), "10 ms ..= 5 s";
        /// The queueing delay aimed for: the main knob. Larger targets probe harder and cruise
        /// closer to the capacity (more throughput, more delay). Default 2 ms.
        target: Duration = ms(2), Duration::from_micros(200), ms(1_000), "0.2 ms ..= 1 s";
        /// A queue above the target is drained within this time. Default 100 ms.
        drain_time: Duration = ms(100), ms(20), ms(10_000), "20 ms ..= 10 s";
        /// Cruise margin: after a capacity reading the rate goes this fraction below it (what the
        /// late oracle keeps too), so a capacity that declines slowly between readings does not
        /// build a queue before the next reading. Smaller with larger targets: the margin used is
        /// `margin x (1 - target / 50 ms)`, at least 0. Default 0.05.
        margin: f64 = 0.05, 0.0, 0.5, "0 ..= 0.5";
        /// Least first probe gain (the first probe raises the rate by at least this fraction).
        /// Default 0.01.
        probe_min: f64 = 0.01, 0.0, 1.0, "0 ..= 1";
        /// Largest probe gain. Default 0.5.
        probe_max: f64 = 0.5, 0.0, 4.0, "0 ..= 4";
        /// On a steady link, intervals between a capacity reading and the first probe. Fewer on
        /// volatile links (none at `volatile`). Default 20 (1 s).
        probe_wait: u32 = 20, 0, 1_000, "0 ..= 1000";
        /// Volatility (mean absolute log change between successive capacity readings) at which
        /// the link counts as fully volatile: probes start at once, at a gain of at least the
        /// volatility. Default 0.07.
        volatile: f64 = 0.07, 0.001, 10.0, "0.001 ..= 10";
        /// Delay above which a queue counts as standing in the bottleneck (on top of the
        /// serialisation of one frame at the current rate and the link's learnt delay noise).
        /// Default 1 ms (ICMP timestamps have 1 ms resolution).
        queue_floor: Duration = ms(1), Duration::ZERO, ms(1_000), "0 ..= 1 s";
        /// On a fully volatile link the queue above the target drains within `drain_time x (1 +
        /// volatile_drain)`. Default 1.
        volatile_drain: f64 = 1.0, 0.0, 100.0, "0 ..= 100";
        /// On a volatile link, the quantile of the last second's loaded deliveries (and the
        /// reading) that the capacity estimate blends in. Default 1 (the best).
        recent_quantile: f64 = 1.0, 0.0, 1.0, "0 ..= 1";
        /// Largest delay noise learnt on a volatile link (delay seen while the link keeps up with
        /// our rate and CAKE holds the queue: the link's own scheduling, not a queue of ours).
        /// Default 100 ms.
        max_noise: Duration = ms(100), Duration::ZERO, ms(1_000), "0 ..= 1 s";
        /// Weight with which a delay sample above the learnt noise raises it (a sample below
        /// lowers it with weight 0.05): above 0.05 the noise tracks the upper envelope of the
        /// link's own delay variation rather than its mean, so that a sample of that variation is
        /// not read as a queue (and the delivery beside it as the capacity). Default 0.3.
        noise_rise: f64 = 0.3, 0.0, 1.0, "0 ..= 1";
        /// CAKE backlog (bytes) that shows CAKE had more to send than our rate allowed. Default
        /// 3000.
        busy_bytes: u64 = 3_000, 1, 1 << 32, "1 ..= 2^32";
        /// A delivery at least `1 - shortfall` of our rate, less one frame per interval (the
        /// quantisation of one interval's count), counts as keeping up with it. Default 0.003.
        shortfall: f64 = 0.003, 0.0, 0.5, "0 ..= 0.5";
        /// A delivery below `sudden x` our rate right after a saturated interval is a sudden
        /// shortfall: cut at once, restore if the demand stopped. Default 0: the rule is off (a
        /// capacity drop is then read one interval later from the queue it builds; docs/purple.md,
        /// "The sudden-shortfall cut, off by default"). 0.5 was the default before stop 24.
        sudden: f64 = 0.0, 0.0, 1.0, "0 ..= 1";
        /// How long a delay seen without load is not ours to fix, and how long load is
        /// remembered for a capacity reading from the delay alone. Default 1 s.
        busy_memory: Duration = ms(1_000), Duration::ZERO, ms(60_000), "0 ..= 60 s";
        /// Cut per interval on a delay above target when no delivery is known (the daemon without
        /// a throughput signal). Default 0.1.
        beta: f64 = 0.1, 0.01, 0.5, "0.01 ..= 0.5";
        /// Fast delay estimate: the median of the latest unsmoothed per-reflector delays heard
        /// within this window (two reflectors or more); the law acts on the larger of it and the
        /// pool's smoothed consensus. Zero turns it off. Default 100 ms.
        fast_window: Duration = ms(100), Duration::ZERO, ms(1_000), "0 ..= 1 s";
    }
}

/// What the law is doing in one direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// No capacity reading yet: probing up from the base rate.
    Startup,
    /// Just below the last capacity reading, no queue above the target.
    Cruise,
    /// Above the last reading, to find out whether the capacity grew.
    Probe,
    /// A queue above the target stands: below the capacity by enough to drain it.
    Drain,
    /// The senders want less than our rate: the rate is held.
    Idle,
    /// Nothing delivered while a queue stands.
    Outage,
    /// Cut on a sudden shortfall, not yet confirmed by the delay or the delivery.
    Suspect,
}

impl Phase {
    /// Lower-case name, as logged.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Startup => "startup",
            Phase::Cruise => "cruise",
            Phase::Probe => "probe",
            Phase::Drain => "drain",
            Phase::Idle => "idle",
            Phase::Outage => "outage",
            Phase::Suspect => "suspect",
        }
    }
}

/// A change of phase, with what triggered it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Transition {
    /// When.
    pub at: Instant,
    /// Which direction.
    pub dir: Direction,
    /// From.
    pub from: Phase,
    /// To.
    pub to: Phase,
    /// The rule that moved it (as in the decision's reason).
    pub trigger: Reason,
}

/// What one interval showed about the link (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Regime {
    /// The bottleneck was busy: the delivery is the capacity.
    CapacityLimited(f64),
    /// CAKE had more than our rate to send and the link kept up.
    RateLimited,
    /// The senders want less than our rate.
    DemandLimited,
    /// Nothing delivered while a queue stands.
    Outage,
    /// No delivery known: only the delay speaks.
    DelayOnly,
    /// A queue above the target stands while the link keeps up with our rate (no more).
    Standing,
}

#[derive(Clone, Copy, Debug)]
struct DirState {
    phase: Phase,
    /// The last capacity reading, bytes/s.
    capacity: Option<f64>,
    /// The deliveries of the last loaded intervals with their times (a ring), for the
    /// estimate on volatile links.
    readings: [(Instant, f64); READINGS],
    /// Readings stored (saturates at `READINGS`), and the next slot.
    n_readings: usize,
    /// Intervals since the last reading.
    since_reading: u32,
    /// The highest reading of the last `HIGH_MEMORY`, and when: the level a capacity that
    /// dipped (or went out) is likely to come back to.
    high: Option<(Instant, f64)>,
    /// Trend: running mean of the log change of the capacity per interval between successive
    /// readings (clipped at +-TREND_CLIP).
    trend: f64,
    /// Volatility: running mean (weight 0.1) of |ln| of the ratio of successive readings,
    /// each clipped at 0.5.
    volatility: f64,
    /// Probes absorbed in a row (the next gain doubles with each).
    probes: u32,
    /// The rate the last probe asked for: counted as absorbed once it is in force (the
    /// engine's safety rules may hold an increase back for a while).
    asked: Option<f64>,
    /// The previous interval saturated our rate.
    saturated: bool,
    /// When the link last carried load.
    last_busy: Option<Instant>,
    /// The delay noise floor learnt while the link keeps up without a queue building, s.
    noise: f64,
    /// A sudden-shortfall cut awaiting confirmation: when, and the rate before it.
    suspect: Option<(Instant, Rate)>,
    /// The delay seen in the previous interval, s.
    last_q: f64,
}

impl Default for DirState {
    fn default() -> Self {
        DirState {
            phase: Phase::Startup,
            capacity: None,
            readings: [(Instant::ZERO, 0.0); READINGS],
            n_readings: 0,
            since_reading: 0,
            high: None,
            trend: 0.0,
            volatility: 0.0,
            probes: 0,
            asked: None,
            saturated: false,
            last_busy: None,
            noise: 0.0,
            suspect: None,
            last_q: 0.0,
        }
    }
}

/// PURPLE. See the module documentation.
#[derive(Clone, Debug)]
pub struct Purple {
    /// Parameters.
    pub p: PurpleParams,
    st: PerDir<DirState>,
    fast: [FastSlot; FAST_SLOTS],
    transitions: Vec<Transition>,
}

impl Default for Purple {
    fn default() -> Self {
        Purple::new(PurpleParams::default())
    }
}

impl Purple {
    /// With parameters `p`.
    pub fn new(p: PurpleParams) -> Self {
        Purple {
            p,
            st: PerDir::default(),
            fast: Default::default(),
            transitions: Vec::with_capacity(MAX_TRANSITIONS),
        }
    }

    /// The current phase of `dir`.
    pub fn phase(&self, dir: Direction) -> Phase {
        self.st[dir].phase
    }

    /// The last capacity reading of `dir`, bytes per second.
    pub fn capacity(&self, dir: Direction) -> Option<u64> {
        self.st[dir].capacity.map(|c| c as u64)
    }

    /// The measured volatility of `dir` (mean absolute log change between readings).
    pub fn volatility(&self, dir: Direction) -> f64 {
        self.st[dir].volatility
    }

    /// Takes the phase changes since the last call, oldest first (at most 32 are kept between
    /// calls; call it after every poll to see them all).
    pub fn take_transitions(&mut self) -> std::vec::Drain<'_, Transition> {
        self.transitions.drain(..)
    }

    fn set_phase(&mut self, now: Instant, dir: Direction, to: Phase, trigger: Reason) {
        let from = self.st[dir].phase;
        if from == to {
            return;
        }
        self.st[dir].phase = to;
        if self.transitions.len() >= MAX_TRANSITIONS {
            self.transitions.remove(0);
        }
        self.transitions.push(Transition {
            at: now,
            dir,
            from,
            to,
            trigger,
        });
    }

    /// The fast delay estimate of `dir` at `now`: the median of the latest unsmoothed delays of
    /// the reflectors heard from within `fresh`; `None` with fewer than two such reflectors.
    /// Allocation-free.
    fn fast_delay(&self, now: Instant, dir: Direction, fresh: Duration) -> Option<Duration> {
        let mut v = [0.0f64; FAST_SLOTS];
        let mut n = 0;
        for s in &self.fast {
            if let Some((at, d)) = s.last[dir] {
                if now.saturating_duration_since(at) <= fresh {
                    v[n] = d;
                    n += 1;
                }
            }
        }
        if n < 2 {
            return None;
        }
        let v = &mut v[..n];
        v.sort_by(f64::total_cmp);
        // Lower median for an even count (the conservative choice for a cut decision).
        let m = v[(n - 1) / 2];
        Some(Duration::from_nanos(m.max(0.0) as u64))
    }
}

/// The first probe gain at volatility `vol`: `target / (2 T)`, at least `probe_min`, and at
/// least the volatility itself on a volatile link; at most `probe_max`.
fn first_gain(p: &PurpleParams, vol: f64) -> f64 {
    let from_target = p.target.as_secs_f64() / (2.0 * p.interval.as_secs_f64());
    from_target.max(p.probe_min).max(vol).min(p.probe_max)
}

/// The largest probe gain at volatility `vol`: a probe that overshoots by `g` adds `g T` of
/// queue in one interval, so on a calm link the gain stays within the target's worth
/// (`target / T`: one interval's overshoot adds at most the target); on a volatile link it may reach the volatility (capacity swings that large
/// are common there, and a cautious search leaves them unused); never above `probe_max`.
fn gain_cap(p: &PurpleParams, vol: f64) -> f64 {
    let from_target = p.target.as_secs_f64() / p.interval.as_secs_f64();
    from_target.max(vol).min(p.probe_max)
}

/// The cruise margin below a reading at the configured target.
fn margin(p: &PurpleParams) -> f64 {
    p.margin * (1.0 - p.target.as_secs_f64() / 0.05).max(0.0)
}

/// Intervals to wait after a reading before probing, at volatility `vol`.
fn probe_wait(p: &PurpleParams, vol: f64) -> u32 {
    let f = (1.0 - vol / p.volatile).clamp(0.0, 1.0);
    (f64::from(p.probe_wait) * f).round() as u32
}

impl Law for Purple {
    fn name(&self) -> &'static str {
        "purple"
    }
    fn interval(&self) -> Duration {
        self.p.interval
    }
    fn needs(&self) -> Needs {
        Needs::DelayOrRadio
    }
    fn validate(&self) -> Result<(), ConfigError> {
        self.p.check_ranges()?;
        check(
            self.p.probe_min <= self.p.probe_max,
            "purple.probe_min",
            self.p.probe_min,
            "0 ..= probe_max",
        )
    }
    /// PURPLE paces its own increases (no probe within `probe_wait` of a reading, gains that
    /// double only while the link absorbs them, at most `probe_max` per interval), so the
    /// engine's generic increase limits are opened to what the law can ask: no hold after a
    /// decrease, and `probe_max` per interval. The generic defaults (a 500 ms hold, +100% per
    /// second) would throttle a capacity that came back after a dip or an outage to +5% per
    /// interval: seconds to recover a tenfold drop that the late oracle recovers in one.
    fn safety(&self, configured: SafetyParams) -> SafetyParams {
        SafetyParams {
            hold_after_decrease: Duration::ZERO,
            max_increase_per_s: (self.p.probe_max / self.p.interval.as_secs_f64())
                .clamp(0.001, 100.0),
            ..configured
        }
    }
    fn phase(&self, dir: Direction) -> Option<Phase> {
        Some(self.st[dir].phase)
    }
    fn take_transition(&mut self) -> Option<Transition> {
        (!self.transitions.is_empty()).then(|| self.transitions.remove(0))
    }
    fn on_sample(&mut self, now: Instant, sample: &Sample) {
        let Sample::Owd {
            reflector,
            dir,
            owd_ns,
            ..
        } = *sample
        else {
            return;
        };
        let i = match self.fast.iter().position(|s| s.id == Some(reflector)) {
            Some(i) => i,
            None => {
                // A new reflector takes a free slot or the one heard from least recently.
                let age = |s: &FastSlot| {
                    let t = |d: Direction| s.last[d].map_or(Instant::ZERO, |(t, _)| t);
                    t(Direction::Down).max(t(Direction::Up))
                };
                let i = (0..FAST_SLOTS)
                    .min_by_key(|&i| (self.fast[i].id.is_some(), age(&self.fast[i])))
                    .unwrap_or(0);
                self.fast[i] = FastSlot {
                    id: Some(reflector),
                    ..FastSlot::default()
                };
                i
            }
        };
        let s = &mut self.fast[i];
        let d = s.baseline[dir].update(now, owd_ns);
        s.last[dir] = Some((now, d));
    }

    fn step(&mut self, now: Instant, dir: Direction, sig: &DirSignals, _cfg: &Config) -> Step {
        let p = self.p;
        let t_s = p.interval.as_secs_f64();
        // The delay: the larger of the smoothed consensus, the fast estimate and (where the
        // radio reports it) the radio's own sojourn time.
        let fast = if p.fast_window == Duration::ZERO {
            None
        } else {
            self.fast_delay(now, dir, p.fast_window)
        };
        let q = [sig.delay, fast, sig.radio.map(|r| r.sojourn)]
            .into_iter()
            .flatten()
            .max()
            .unwrap_or(Duration::ZERO)
            .as_secs_f64();
        let cur = sig.current.bytes_per_s_f64();
        // What the link saw during the interval: the rate in force (the decided one unless the
        // actuator did not apply it). New rates build on it too.
        let r = (sig.in_force.bytes_per_s_f64()).max(1.0);
        let target = p.target.as_secs_f64();
        // A probe may wait behind a frame in the bottleneck even with no queue to speak of: at
        // low rates that is a delay the law cannot remove (24 ms at 0.5 Mbit/s).
        let serial = (MTU / r).min(1.0);
        let d = sig.throughput.map(Rate::bytes_per_s_f64);
        let backlogged =
            sig.cake_backlog.is_some_and(|b| b >= p.busy_bytes) || sig.cake_new_drops > 0;
        let eps = p.shortfall + MTU / (r * t_s);
        let keeps_up = d.is_some_and(|d| d >= r * (1.0 - eps));
        let st = &mut self.st[dir];
        if backlogged || d.is_some_and(|d| d >= 0.5 * r) {
            st.last_busy = Some(now);
        }
        let busy = st
            .last_busy
            .is_some_and(|b| now.saturating_duration_since(b) <= p.busy_memory);
        let floor = p.queue_floor.as_secs_f64() + serial + st.noise;
        let queue = q > floor;
        // A probe is an experiment: right after one, a shortfall while CAKE still held a
        // deep backlog (it was sending at our rate, so the link took less than it was given)
        // is its answer: the capacity is below the probed rate. A shortfall with CAKE empty is
        // no reading: bulk TCP answers a rate increase only a round trip or more later (on a
        // 35 ms path it has barely begun within one 50 ms interval), and the backlog is sampled
        // once per interval while TCP's own dips (a flow backing off after a mark) leave CAKE
        // partly empty within it.
        let probing = st.asked.is_some_and(|a| r >= 0.999 * a);
        // CAKE held more than `DEEP` of our rate's worth at the end of the interval (or dropped):
        // it was the one limiting the senders then, not the senders themselves.
        let deep = sig
            .cake_backlog
            .is_some_and(|b| b as f64 >= (p.busy_bytes as f64).max(r * DEEP.as_secs_f64()))
            || sig.cake_new_drops > 0;
        // A queue that fell by more than the floor since the last interval while the link
        // delivered less than our rate is draining: the bottleneck had spare capacity, and its
        // delivery is the senders' (backing off from the queue), not the capacity.
        let falling =
            q < st.last_q - p.queue_floor.as_secs_f64() && !keeps_up && d.is_some_and(|d| d < r);
        st.last_q = q;
        let regime = match d {
            None => Regime::DelayOnly,
            Some(d) if d <= 0.0 && queue && busy => Regime::Outage,
            // The link kept up with our rate (and no more) under a queue: a queue that stands
            // at our rate says nothing new about the capacity (it is at least our rate and the
            // queue is neither growing nor draining fast); only its size above the target
            // matters.
            Some(d) if busy && queue && keeps_up && d <= r * (1.0 + eps) => {
                if q > target {
                    Regime::Standing
                } else {
                    Regime::RateLimited
                }
            }
            Some(d) if busy && ((queue && !falling) || (probing && deep && !keeps_up)) => {
                Regime::CapacityLimited(d)
            }
            Some(_) if keeps_up && (backlogged || sig.cake_backlog.is_none()) => {
                Regime::RateLimited
            }
            Some(_) => Regime::DemandLimited,
        };
        // Delay noise: learnt only while the link keeps up at our rate with CAKE holding the
        // queue (no queue can be building in the bottleneck then), slowly, and only below the
        // target (a learnt noise above it would hide a real queue). It rises faster than it
        // falls (`noise_rise` against `NOISE_FALL`), so it follows the top of the link's own
        // variation: compared with its mean, every other noise sample would look like a queue.
        // On a volatile link the delay varies without any queue of ours (a cellular scheduler
        // leaves the link silent for tens of ms), so there the noise may grow up to
        // `max_noise`; on a calm link only up to the target.
        if regime == Regime::RateLimited && backlogged {
            let v = (st.volatility / p.volatile).min(1.0);
            let cap = target + v * (p.max_noise.as_secs_f64() - target).max(0.0);
            let x = (q - p.queue_floor.as_secs_f64()).clamp(0.0, cap);
            let a = if x > st.noise {
                p.noise_rise
            } else {
                NOISE_FALL
            };
            st.noise += a * (x - st.noise);
        }
        if let (Some(d), true) = (d, backlogged || keeps_up || queue) {
            if busy {
                st.readings[st.n_readings % READINGS] = (now, d);
                st.n_readings += 1;
            }
        }
        let was_saturated = st.saturated;
        st.saturated = keeps_up;
        st.since_reading = st.since_reading.saturating_add(1);
        // Volatility also fades with time (halving in about 3.5 s at 50 ms): one event is
        // forgotten on a link that stays calm, however rarely it gives readings.
        st.volatility *= VOL_DECAY;
        // A sudden-shortfall cut is confirmed by a queue or by delivery near the new rate, and
        // refuted by two intervals of a nearly idle link with no queue: the demand stopped.
        if let Some((at, before)) = st.suspect {
            let confirmed = queue || backlogged || d.is_some_and(|d| d >= 0.5 * cur);
            let age = now.saturating_duration_since(at);
            if confirmed || age > p.busy_memory {
                st.suspect = None;
            } else if age.as_nanos() >= 2 * p.interval.as_nanos() {
                st.suspect = None;
                let reason = Reason::Restored;
                self.set_phase(now, dir, Phase::Idle, reason);
                return Step {
                    rate: before,
                    reason,
                };
            }
        }
        let st = &mut self.st[dir];
        match regime {
            Regime::Outage => {
                st.capacity = Some(0.0);
                st.since_reading = 0;
                st.probes = 0;
                st.asked = None;
                let reason = Reason::Outage;
                self.set_phase(now, dir, Phase::Outage, reason);
                // The engine clamps to the configured minimum.
                Step {
                    rate: Rate::ZERO,
                    reason,
                }
            }
            Regime::CapacityLimited(c) => {
                if let Some(prev) = st.capacity {
                    // Clipped: one large step (a hand-over, the end of a dip) is one event, not
                    // a volatile link; volatility is frequent change.
                    let l = ((c + MTU) / (prev + MTU)).ln();
                    st.volatility += VOL_GAIN * (l.abs().min(VOL_CLIP) - st.volatility);
                    // The trend per interval since the previous reading (a fade): the cruise
                    // rate follows it between readings instead of waiting for probes.
                    let per =
                        (l / f64::from(st.since_reading.max(1))).clamp(-TREND_CLIP, TREND_CLIP);
                    // Weighted by the span between the two readings: two readings one interval
                    // apart are the same moment seen twice (their ratio is noise, not a trend).
                    let w = (f64::from(st.since_reading) / f64::from(TREND_SPAN)).min(1.0);
                    st.trend += TREND_GAIN * w * (per - st.trend);
                }
                st.capacity = Some(c);
                if st
                    .high
                    .is_none_or(|(t, h)| c >= h || now.saturating_duration_since(t) > HIGH_MEMORY)
                {
                    st.high = Some((now, c));
                }
                st.since_reading = 0;
                st.probes = 0;
                st.asked = None;
                // On a calm link the reading is the capacity. On a volatile one a single
                // interval's delivery is mostly the scheduler's luck: the estimate blends in the
                // best delivery of the last second's loaded intervals: not at all at `volatile`,
                // fully at twice that (one large step, such as a hand-over, leaves a link calm).
                let n = st.n_readings.min(READINGS);
                let mut recent = [0.0f64; READINGS + 1];
                let mut k = 0;
                for &(t, x) in &st.readings[..n] {
                    if now.saturating_duration_since(t) <= RECENT {
                        recent[k] = x;
                        k += 1;
                    }
                }
                recent[k] = c;
                k += 1;
                let recent = &mut recent[..k];
                recent.sort_by(f64::total_cmp);
                let best = recent[((k - 1) as f64 * p.recent_quantile).round() as usize];
                let w = ((st.volatility - p.volatile) / p.volatile).clamp(0.0, 1.0);
                let c = (1.0 - w) * c + w * best;
                let m = margin(&p);
                // The queue above the target (and, on a volatile link, above the delay noise
                // the link makes by itself) is drained within `drain_time`.
                let excess = (q - target - w * st.noise).max(0.0);
                // A volatile link's scheduler leaves its buffer full for a while after every
                // silence: drained more slowly there, or each silence costs the next burst.
                let drain = excess / (p.drain_time.as_secs_f64() * (1.0 + p.volatile_drain * w));
                // Never below half the reading in one step: a queue that large is an outage's
                // leftover, drained over a few intervals rather than by starving the link.
                let rate = (c * (1.0 - m - drain)).max(0.5 * c);
                let reason = Reason::Capacity {
                    capacity: Rate::from_bytes_per_s_f64(c),
                    queue: Duration::from_secs_f64(q),
                };
                let phase = if excess > 0.0 {
                    Phase::Drain
                } else {
                    Phase::Cruise
                };
                self.set_phase(now, dir, phase, reason);
                Step {
                    rate: Rate::from_bytes_per_s_f64(rate),
                    reason,
                }
            }
            Regime::DemandLimited => {
                st.probes = 0;
                st.asked = None;
                let sudden = was_saturated
                    && sig.cake_backlog.is_some()
                    && d.is_some_and(|d| d > 0.0 && d < p.sudden * r);
                if let (true, Some(d)) = (sudden, d) {
                    // The ACK clock may already run at a new, lower capacity while the probes
                    // crossing the filling queue are still on their way: cut now, confirm later.
                    st.suspect = Some((now, sig.current));
                    let m = margin(&p);
                    let reason = Reason::Shortfall {
                        delivered: Rate::from_bytes_per_s_f64(d),
                    };
                    self.set_phase(now, dir, Phase::Suspect, reason);
                    return Step {
                        rate: Rate::from_bytes_per_s_f64(d * (1.0 - m)),
                        reason,
                    };
                }
                let reason = Reason::Hold;
                self.set_phase(now, dir, Phase::Idle, reason);
                Step {
                    rate: sig.current,
                    reason,
                }
            }
            Regime::RateLimited => {
                let vol = st.volatility;
                let startup = st.capacity.is_none();
                if !startup && st.since_reading <= probe_wait(&p, vol) {
                    // Between readings the cruise rate follows the capacity's trend (a fade up or
                    // down), so it neither falls behind a rising link nor runs into a falling one.
                    if let Some(c) = st.capacity {
                        let k = f64::from(st.since_reading);
                        let cruise = c * (st.trend * k).exp() * (1.0 - margin(&p));
                        if st.trend.abs() > TREND_MIN && (cruise - cur).abs() > TREND_MIN * cur {
                            let reason = Reason::Trend {
                                capacity: Rate::from_bytes_per_s_f64(cruise / (1.0 - margin(&p))),
                            };
                            self.set_phase(now, dir, Phase::Cruise, reason);
                            return Step {
                                rate: Rate::from_bytes_per_s_f64(cruise),
                                reason,
                            };
                        }
                    }
                    let reason = Reason::Hold;
                    self.set_phase(now, dir, Phase::Cruise, reason);
                    return Step {
                        rate: sig.current,
                        reason,
                    };
                }
                let st = &mut self.st[dir];
                let g0 = first_gain(&p, vol);
                let m = margin(&p);
                let base = cur.max(r);
                let absorbed = st.asked.is_some_and(|a| r >= 0.999 * a);
                let asked = match st.capacity {
                    // Far below a recent reading (the rate was cut on a shortfall, or held while
                    // the demand was low): straight back to the cruise level under it.
                    Some(c) if base < c * (1.0 - 2.0 * m) && st.since_reading <= RECENT_READING => {
                        st.probes = 0;
                        c * (1.0 - m)
                    }
                    // Up to the last reading: steps of `g0`, and the step that would cross the
                    // reading lands just `g0` above it, so a capacity that has not changed costs
                    // one interval of `g0 T` queue to confirm.
                    Some(c) if base < c * (1.0 + 0.5 * g0) => {
                        st.probes = 0;
                        let next = base * (1.0 + g0);
                        if next > c {
                            c * (1.0 + g0)
                        } else {
                            next
                        }
                    }
                    // Above it and absorbed: the capacity has grown by an unknown amount; each
                    // absorbed probe doubles the next (up to the cap).
                    _ => {
                        if absorbed {
                            st.probes = st.probes.saturating_add(1);
                        }
                        // Far below a recent high (a dip or an outage ended), the capacity is
                        // likely to return there: probes may grow to `probe_max`. Only after a
                        // deep dip (the last reading below half that high: an outage, a
                        // hand-over's near-outage), or on a link volatile enough that its
                        // capacity estimate blends in the best recent delivery at least half
                        // (`FAR_VOLATILITY`): its capacity jumps between levels rather than
                        // fading. A fade's readings follow the capacity down and the rise back
                        // is gradual; there the calm-link cap keeps one overshoot within the
                        // target.
                        let far = st.high.is_some_and(|(_, h)| {
                            base < h * (1.0 - 2.0 * m)
                                && (vol > FAR_VOLATILITY * p.volatile
                                    || st.capacity.is_none_or(|c| c < 0.5 * h))
                        });
                        let cap = if far { p.probe_max } else { gain_cap(&p, vol) };
                        let g = (g0 * f64::from(1u32 << st.probes.min(16))).min(cap);
                        base * (1.0 + g)
                    }
                }
                .max(r + 1.0);
                let g = asked / base - 1.0;
                st.asked = Some(asked);
                let reason = Reason::Probe { gain: g };
                let phase = if startup {
                    Phase::Startup
                } else {
                    Phase::Probe
                };
                self.set_phase(now, dir, phase, reason);
                Step {
                    rate: Rate::from_bytes_per_s_f64(asked),
                    reason,
                }
            }
            Regime::Standing => {
                // Below our rate by what drains the queue above the target within
                // `drain_time` (at most half of it in one step); no capacity reading is taken.
                let drain = ((q - target) / p.drain_time.as_secs_f64()).clamp(0.0, 0.5);
                let reason = Reason::Standing {
                    queue: Duration::from_secs_f64(q),
                };
                self.set_phase(now, dir, Phase::Drain, reason);
                Step {
                    rate: Rate::from_bytes_per_s_f64(r * (1.0 - drain)),
                    reason,
                }
            }
            Regime::DelayOnly => {
                // Without a delivery reading only the delay speaks: a multiplicative cut in
                // proportion to the excess, otherwise hold (no evidence of demand to grow on).
                if q > target + serial && busy {
                    let x = ((q - target) / target.max(1e-3)).min(1.0);
                    let reason = Reason::Decrease {
                        delay: Duration::from_secs_f64(q),
                    };
                    self.set_phase(now, dir, Phase::Drain, reason);
                    Step {
                        rate: Rate::from_bytes_per_s_f64(cur * (1.0 - p.beta * x)),
                        reason,
                    }
                } else {
                    Step {
                        rate: sig.current,
                        reason: Reason::Hold,
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sig(current: u64, delay_ms: u64, thr: u64, backlog: u64) -> DirSignals {
        DirSignals {
            current: Rate::from_bytes_per_s(current),
            in_force: Rate::from_bytes_per_s(current),
            delay: Some(Duration::from_millis(delay_ms)),
            reflectors: 3,
            throughput: Some(Rate::from_bytes_per_s(thr)),
            load: Some(thr as f64 / current as f64),
            cake_backlog: Some(backlog),
            cake_new_drops: 0,
            radio: None,
        }
    }

    fn at(ms: u64) -> Instant {
        Instant::ZERO + Duration::from_millis(ms)
    }

    /// The law with the sudden-shortfall cut on, at its old default (0.5).
    fn with_sudden_cut() -> Purple {
        Purple::new(PurpleParams {
            sudden: 0.5,
            ..PurpleParams::default()
        })
    }

    /// Ten saturated intervals of the downlink at 10 MB/s (delivered = rate, no queue), ending at
    /// 450 ms.
    fn saturate(law: &mut Purple, cfg: &Config) {
        for i in 0..10 {
            law.step(
                at(i * 50),
                Direction::Down,
                &sig(10_000_000, 0, 10_000_000, 0),
                cfg,
            );
        }
    }

    #[test]
    fn by_default_a_sudden_shortfall_without_a_queue_holds_the_rate() {
        let mut law = Purple::default();
        let cfg = Config::default();
        saturate(&mut law, &cfg);
        // The downloads end (or TCP backs off): a fraction delivered, no queue, CAKE empty.
        for i in 0..3 {
            let s = law.step(
                at(500 + i * 50),
                Direction::Down,
                &sig(10_000_000, 0, 1_500_000, 0),
                &cfg,
            );
            assert!(!matches!(s.reason, Reason::Shortfall { .. }), "{s:?}");
            assert_eq!(s.rate.bytes_per_s(), 10_000_000, "{s:?}");
        }
    }

    /// Steps the downlink through `n` intervals from `t0` ms, the link delivering `cap` at most
    /// while CAKE stays backlogged (bulk TCP); returns the last step and the time after it.
    fn run_link(law: &mut Purple, cfg: &Config, t0: u64, n: u64, start: u64, cap: u64) -> Step {
        let mut rate = start;
        let mut last = Step {
            rate: Rate::from_bytes_per_s(rate),
            reason: Reason::Start,
        };
        for i in 0..n {
            let thr = rate.min(cap);
            // Above the capacity the bottleneck's queue shows in the delay.
            let delay = if rate > cap { 3 } else { 0 };
            last = law.step(
                at(t0 + i * 50),
                Direction::Down,
                &sig(rate, delay, thr, 50_000),
                cfg,
            );
            rate = last.rate.clamp(cfg.min.down, cfg.max.down).bytes_per_s();
        }
        last
    }

    #[test]
    fn the_learnt_delay_noise_follows_the_top_of_the_links_own_variation_not_its_mean() {
        // The link keeps up with our rate (whatever the law sets), CAKE backlogged, while its
        // own scheduling makes the delay alternate between 1 and 2 ms (0 and 1 ms above the 1 ms floor): the noise
        // learnt is near the top (1 ms), where its mean (0.5 ms) would have every other
        // sample read as a queue.
        let learnt = |rise: f64| {
            let mut law = Purple::new(PurpleParams {
                noise_rise: rise,
                ..PurpleParams::default()
            });
            let cfg = Config::default();
            let mut rate = 10_000_000;
            for i in 0..400 {
                let s = law.step(
                    at(i * 50),
                    Direction::Down,
                    &sig(rate, 1 + i % 2, rate, 50_000),
                    &cfg,
                );
                rate = s.rate.clamp(cfg.min.down, cfg.max.down).bytes_per_s();
            }
            law.st[Direction::Down].noise * 1e3
        };
        let top = learnt(PurpleParams::default().noise_rise);
        assert!((0.8..=1.0).contains(&top), "{top} ms");
        let mean = learnt(NOISE_FALL);
        assert!((0.4..=0.6).contains(&mean), "{mean} ms");
    }

    #[test]
    fn a_capacity_reading_cuts_just_below_the_delivered_rate_in_one_step() {
        let mut law = Purple::default();
        let cfg = Config::default();
        // A queue stands and the link delivers half our rate: the delivery is the capacity.
        let s = law.step(
            at(0),
            Direction::Down,
            &sig(10_000_000, 2, 5_000_000, 80_000),
            &cfg,
        );
        assert!(matches!(s.reason, Reason::Capacity { .. }), "{s:?}");
        assert!(
            s.rate.bytes_per_s() < 5_000_000 && s.rate.bytes_per_s() >= 4_500_000,
            "{s:?}"
        );
        assert_eq!(law.capacity(Direction::Down), Some(5_000_000));
        assert_eq!(law.phase(Direction::Down), Phase::Cruise);
    }

    #[test]
    fn a_shortfall_with_cake_backlogged_but_no_queue_and_no_probe_is_no_reading() {
        let mut law = Purple::default();
        let cfg = Config::default();
        // Bulk TCP backing off after a mark leaves CAKE partly empty within the interval: the
        // backlog sampled at its end says nothing about the capacity.
        let s = law.step(
            at(0),
            Direction::Down,
            &sig(10_000_000, 0, 8_500_000, 80_000),
            &cfg,
        );
        assert_eq!((s.rate.bytes_per_s(), s.reason), (10_000_000, Reason::Hold));
        assert_eq!(law.capacity(Direction::Down), None);
    }

    #[test]
    fn a_shortfall_right_after_a_probe_is_its_answer() {
        let mut law = Purple::default();
        let cfg = Config::default();
        // Startup: the link keeps up, so the law probes.
        let s = law.step(
            at(0),
            Direction::Down,
            &sig(5_000_000, 0, 5_000_000, 50_000),
            &cfg,
        );
        assert!(matches!(s.reason, Reason::Probe { .. }), "{s:?}");
        let probed = s.rate.bytes_per_s();
        // The probe is in force and the link delivers less with CAKE empty and no queue: bulk
        // TCP has not answered the increase yet (it takes a round trip or more). No reading:
        // the probed rate is held.
        let mut other = law.clone();
        let s = other.step(at(50), Direction::Down, &sig(probed, 0, 5_000_000, 0), &cfg);
        assert_eq!(
            (s.rate.bytes_per_s(), s.reason),
            (probed, Reason::Hold),
            "{s:?}"
        );
        assert_eq!(other.capacity(Direction::Down), None);
        // With CAKE still holding a deep backlog (it sent our rate and the link took less) the
        // shortfall is the probe's answer: the capacity is below it.
        let s = law.step(
            at(50),
            Direction::Down,
            &sig(probed, 0, 5_000_000, 50_000),
            &cfg,
        );
        assert!(matches!(s.reason, Reason::Capacity { .. }), "{s:?}");
        assert_eq!(law.capacity(Direction::Down), Some(5_000_000));
        // A few packets in CAKE are no such evidence.
        let s = other.step(
            at(100),
            Direction::Down,
            &sig(probed, 0, 5_000_000, 3_100),
            &cfg,
        );
        assert_ne!(
            s.reason,
            Reason::Capacity {
                capacity: Rate::from_bytes_per_s(5_000_000),
                queue: Duration::ZERO
            }
        );
        assert_eq!(other.capacity(Direction::Down), None);
    }

    #[test]
    fn a_queue_standing_at_our_rate_is_drained_from_it_without_a_reading() {
        let mut law = Purple::default();
        let cfg = Config::default();
        // 6 ms of queue while the link delivers exactly our rate: the capacity is at least
        // our rate; only the 4 ms above the target are drained, from our rate.
        let s = law.step(
            at(0),
            Direction::Down,
            &sig(10_000_000, 6, 10_000_000, 80_000),
            &cfg,
        );
        assert!(matches!(s.reason, Reason::Standing { .. }), "{s:?}");
        assert_eq!(
            s.rate.bytes_per_s(),
            9_600_000,
            "4 ms / 100 ms below our rate"
        );
        assert_eq!(law.capacity(Direction::Down), None);
        assert_eq!(law.phase(Direction::Down), Phase::Drain);
    }

    #[test]
    fn a_draining_queue_with_less_delivered_is_the_senders_not_the_capacity() {
        let mut law = Purple::default();
        let cfg = Config::default();
        law.step(
            at(0),
            Direction::Down,
            &sig(10_000_000, 8, 10_000_000, 80_000),
            &cfg,
        );
        // The queue fell from 8 to 5 ms while the link delivered 70% of our rate with CAKE
        // empty: the bottleneck had room to drain it; the senders backed off.
        let s = law.step(
            at(50),
            Direction::Down,
            &sig(10_000_000, 5, 7_000_000, 0),
            &cfg,
        );
        assert_eq!(law.capacity(Direction::Down), None, "{s:?}");
        assert!(s.rate.bytes_per_s() >= 10_000_000 * 96 / 100, "{s:?}");
        // The same delivery under a queue that is not falling is a reading.
        let s = law.step(
            at(100),
            Direction::Down,
            &sig(10_000_000, 5, 7_000_000, 0),
            &cfg,
        );
        assert!(matches!(s.reason, Reason::Capacity { .. }), "{s:?}");
        assert_eq!(law.capacity(Direction::Down), Some(7_000_000));
    }

    #[test]
    fn a_queue_above_target_is_drained_within_the_drain_time() {
        let mut law = Purple::default();
        let cfg = Config::default();
        // 12 ms of queue on a link delivering 9.7 of our 10 MB/s: below the delivery by the
        // margin plus 10 ms / 100 ms.
        let s = law.step(
            at(0),
            Direction::Down,
            &sig(10_000_000, 12, 9_700_000, 50_000),
            &cfg,
        );
        assert!(matches!(s.reason, Reason::Capacity { .. }), "{s:?}");
        assert!(s.rate.bytes_per_s() < (9_700_000.0 * 0.9) as u64, "{s:?}");
        assert_eq!(law.phase(Direction::Down), Phase::Drain);
    }

    #[test]
    fn the_rate_finds_a_capacity_that_grew_and_settles_just_below_it() {
        let mut law = Purple::default();
        let cfg = Config::default();
        // Settle at 2.5 MB/s, then the capacity doubles (the configured maximum is 10 MB/s).
        run_link(&mut law, &cfg, 0, 40, 2_500_000, 2_500_000);
        let s = run_link(&mut law, &cfg, 2000, 60, 2_500_000, 5_000_000);
        assert!(
            (4_250_000..=5_250_000).contains(&s.rate.bytes_per_s()),
            "after 3 s the rate is {} for a 5 MB/s capacity",
            s.rate.bytes_per_s()
        );
    }

    #[test]
    fn probes_double_their_gain_while_the_link_absorbs_them() {
        let mut law = Purple::default();
        let cfg = Config::default();
        let mut gains = Vec::new();
        let mut rate = 2_000_000u64;
        for i in 0..5 {
            let s = law.step(
                at(i * 50),
                Direction::Down,
                &sig(rate, 0, rate, 50_000),
                &cfg,
            );
            if let Reason::Probe { gain } = s.reason {
                gains.push(gain);
            }
            rate = s.rate.bytes_per_s();
        }
        assert_eq!(gains.len(), 5, "startup probes every interval");
        // Doubling up to the calm-link cap, the target's worth per interval.
        let cap = gain_cap(&law.p, 0.0);
        for w in gains.windows(2) {
            let want = (2.0 * w[0]).min(cap);
            assert!((w[1] - want).abs() < 1e-6, "{gains:?}");
        }
        assert!((gains[4] - cap).abs() < 1e-6, "{gains:?}");
        assert_eq!(law.phase(Direction::Down), Phase::Startup);
    }

    #[test]
    fn on_a_volatile_link_probes_far_below_the_recent_high_may_grow_to_probe_max() {
        // Capacity readings (a queue, CAKE backlogged, our rate above the delivery): one at 7 MB/s,
        // then the link jumping between 5 and 4 MB/s every interval (volatile), ending at 4
        // MB/s: far below the recent high but not a deep dip (above half of it).
        let mut law = Purple::default();
        let cfg = Config::default();
        let reading = |law: &mut Purple, ms: u64, thr: u64| {
            law.step(
                at(ms),
                Direction::Down,
                &sig(9_000_000, 3, thr, 50_000),
                &cfg,
            )
        };
        reading(&mut law, 0, 7_000_000);
        let mut t = 50;
        for k in 0..21 {
            reading(&mut law, t, if k % 2 == 0 { 4_000_000 } else { 5_000_000 });
            t += 50;
        }
        let mut rate = reading(&mut law, t, 4_000_000).rate.bytes_per_s();
        t += 50;
        let vol = law.volatility(Direction::Down);
        assert!(vol > FAR_VOLATILITY * law.p.volatile, "volatility {vol}");
        let cap = gain_cap(&law.p, vol);
        assert!(cap < law.p.probe_max, "cap {cap}");
        // The link now keeps up with whatever the law sets.
        let mut gains = Vec::new();
        for i in 0..6 {
            let s = law.step(
                at(t + i * 50),
                Direction::Down,
                &sig(rate, 0, rate, 50_000),
                &cfg,
            );
            if let Reason::Probe { gain } = s.reason {
                gains.push(gain);
            }
            rate = s.rate.clamp(cfg.min.down, cfg.max.down).bytes_per_s();
        }
        // The first probe lands just above the last reading; beyond it the probes double past
        // the volatile link's cap (to which they were held before stop 26) while the rate is
        // still far below the recent high.
        assert!(
            gains.len() > 2 && gains[1..].iter().any(|&g| g > 1.5 * cap),
            "gains {gains:?}, cap {cap}"
        );
        assert!(
            gains.iter().all(|&g| g <= law.p.probe_max + 1e-9),
            "{gains:?}"
        );
    }

    #[test]
    fn a_shortfall_without_backlog_or_queue_is_demand_not_a_cut() {
        let mut law = Purple::default();
        let cfg = Config::default();
        let s = law.step(
            at(0),
            Direction::Down,
            &sig(10_000_000, 0, 4_000_000, 0),
            &cfg,
        );
        assert_eq!((s.rate.bytes_per_s(), s.reason), (10_000_000, Reason::Hold));
        assert_eq!(law.phase(Direction::Down), Phase::Idle);
    }

    #[test]
    fn a_delay_spike_on_an_idle_link_is_not_a_capacity_reading() {
        let mut law = Purple::default();
        let cfg = Config::default();
        // Idle (a few kB/s of probes and ACKs, CAKE empty), then a 20 ms jitter spike.
        let s = law.step(at(0), Direction::Down, &sig(10_000_000, 20, 2_000, 0), &cfg);
        assert_eq!(s.rate.bytes_per_s(), 10_000_000, "{s:?}");
        let s = law.step(at(50), Direction::Down, &sig(10_000_000, 20, 0, 0), &cfg);
        assert_eq!(
            s.rate.bytes_per_s(),
            10_000_000,
            "an idle link is no outage: {s:?}"
        );
    }

    #[test]
    fn a_loaded_link_whose_delivery_falls_with_a_queue_is_cut_to_the_delivery() {
        let mut law = Purple::default();
        let cfg = Config::default();
        // Loaded at our 10 MB/s (CAKE empty: the senders' windows just fill it), then the
        // capacity drops: 3 MB/s delivered, the queue shows.
        saturate(&mut law, &cfg);
        let s = law.step(
            at(500),
            Direction::Down,
            &sig(10_000_000, 20, 3_000_000, 0),
            &cfg,
        );
        assert!(matches!(s.reason, Reason::Capacity { .. }), "{s:?}");
        assert!(
            s.rate.bytes_per_s() <= 3_000_000,
            "only cut to {}",
            s.rate.bytes_per_s()
        );
    }

    #[test]
    fn nothing_delivered_while_a_queue_stands_on_a_loaded_link_is_an_outage() {
        let mut law = Purple::default();
        let cfg = Config::default();
        law.step(
            at(0),
            Direction::Down,
            &sig(10_000_000, 0, 10_000_000, 50_000),
            &cfg,
        );
        let s = law.step(
            at(50),
            Direction::Down,
            &sig(10_000_000, 40, 0, 50_000),
            &cfg,
        );
        assert_eq!(s.reason, Reason::Outage);
        assert_eq!(law.phase(Direction::Down), Phase::Outage);
    }

    #[test]
    fn a_download_ending_is_not_a_capacity_drop_the_rate_comes_back() {
        let mut law = with_sudden_cut();
        let cfg = Config::default();
        // Saturated at our 10 MB/s, then the downloads end: almost nothing delivered, delay low.
        saturate(&mut law, &cfg);
        let s = law.step(
            at(500),
            Direction::Down,
            &sig(10_000_000, 0, 1_500_000, 0),
            &cfg,
        );
        assert!(matches!(s.reason, Reason::Shortfall { .. }), "{s:?}");
        assert!(s.rate.bytes_per_s() < 1_500_000, "{s:?}");
        let mut last = s;
        for i in 1..=3 {
            last = law.step(
                at(500 + i * 50),
                Direction::Down,
                &sig(last.rate.bytes_per_s(), 0, 2_000, 0),
                &cfg,
            );
            if last.reason == Reason::Restored {
                break;
            }
        }
        assert_eq!(
            (last.reason, last.rate.bytes_per_s()),
            (Reason::Restored, 10_000_000)
        );
    }

    #[test]
    fn a_capacity_drop_confirmed_by_delivery_keeps_the_cut() {
        let mut law = with_sudden_cut();
        let cfg = Config::default();
        saturate(&mut law, &cfg);
        let s = law.step(
            at(500),
            Direction::Down,
            &sig(10_000_000, 0, 4_000_000, 0),
            &cfg,
        );
        assert!(matches!(s.reason, Reason::Shortfall { .. }), "{s:?}");
        assert!(s.rate.bytes_per_s() < 4_000_000, "{s:?}");
        // The link delivers the new capacity, about the cut rate: the drop was real.
        let mut rate = s.rate.bytes_per_s();
        for i in 1..=10 {
            let d = law.step(
                at(500 + i * 50),
                Direction::Down,
                &sig(rate, 0, rate, 0),
                &cfg,
            );
            assert_ne!(d.reason, Reason::Restored, "step {i}: {d:?}");
            rate = d.rate.bytes_per_s();
        }
        assert!(rate < 5_500_000, "{rate}");
    }

    #[test]
    fn without_cakes_backlog_a_shortfall_alone_does_not_cut() {
        let mut law = Purple::default();
        let cfg = Config::default();
        let blind = |rate: u64, delay: u64, thr: u64| DirSignals {
            cake_backlog: None,
            ..sig(rate, delay, thr, 0)
        };
        for i in 0..10 {
            law.step(
                at(i * 50),
                Direction::Down,
                &blind(10_000_000, 0, 10_000_000),
                &cfg,
            );
        }
        let s = law.step(
            at(500),
            Direction::Down,
            &blind(10_000_000, 0, 5_000_000),
            &cfg,
        );
        assert_eq!(s.rate.bytes_per_s(), 10_000_000, "{s:?}");
        // With a queue it is a reading.
        let s = law.step(
            at(550),
            Direction::Down,
            &blind(10_000_000, 8, 5_000_000),
            &cfg,
        );
        assert!(matches!(s.reason, Reason::Capacity { .. }), "{s:?}");
    }

    #[test]
    fn delivery_is_compared_with_the_rate_in_force_not_the_decided_one() {
        let cfg = Config::default();
        // Decided 12.5 MB/s, but the actuator kept the shaper at 10 MB/s; the link delivers
        // those 10 MB/s with CAKE backlogged and no queue: rate-limited, not a reading.
        let held = DirSignals {
            in_force: Rate::from_bytes_per_s(10_000_000),
            ..sig(12_500_000, 0, 10_000_000, 50_000)
        };
        let mut law = Purple::default();
        let s = law.step(at(0), Direction::Down, &held, &cfg);
        assert!(matches!(s.reason, Reason::Probe { .. }), "{s:?}");
        assert!(s.rate.bytes_per_s() > 12_500_000, "{s:?}");
        // The same delivery against a rate in force of 12.5 MB/s with a queue is a reading.
        let mut law = Purple::default();
        let s = law.step(
            at(0),
            Direction::Down,
            &sig(12_500_000, 3, 10_000_000, 50_000),
            &cfg,
        );
        assert!(matches!(s.reason, Reason::Capacity { .. }), "{s:?}");
    }

    #[test]
    fn transitions_are_recorded_with_their_trigger() {
        let mut law = Purple::default();
        let cfg = Config::default();
        law.step(
            at(0),
            Direction::Down,
            &sig(10_000_000, 2, 5_000_000, 80_000),
            &cfg,
        );
        let t: Vec<Transition> = law.take_transitions().collect();
        assert_eq!(t.len(), 1);
        assert_eq!((t[0].from, t[0].to), (Phase::Startup, Phase::Cruise));
        assert!(matches!(t[0].trigger, Reason::Capacity { .. }));
        assert_eq!(law.take_transitions().count(), 0);
    }

    #[test]
    fn every_parameter_is_validated_and_documented() {
        assert!(Purple::default().validate().is_ok());
        for bad in [
            PurpleParams {
                target: Duration::ZERO,
                ..PurpleParams::default()
            },
            PurpleParams {
                probe_min: 0.9,
                probe_max: 0.5,
                ..PurpleParams::default()
            },
            PurpleParams {
                shortfall: f64::NAN,
                ..PurpleParams::default()
            },
        ] {
            assert!(Purple::new(bad).validate().is_err(), "{bad:?}");
        }
        assert!(PurpleParams::OPTIONS
            .iter()
            .all(|o| o.name.starts_with("purple.") && !o.doc.is_empty()));
        assert!(PurpleParams::OPTIONS
            .iter()
            .any(|o| o.name == "purple.target"));
    }

    fn owd(law: &mut Purple, ms: u64, id: u16, dir: Direction, owd_ms: i64) {
        law.on_sample(
            at(ms),
            &Sample::Owd {
                reflector: ReflectorId(id),
                dir,
                sent: at(ms.saturating_sub(5)),
                owd_ns: owd_ms * 1_000_000,
            },
        );
    }

    #[test]
    fn fast_delay_is_the_median_of_fresh_unsmoothed_reflector_delays() {
        let mut law = Purple::default();
        let w = Duration::from_millis(100);
        // Baselines (clock offsets 5000, -3000, 86000 ms): three idle samples each.
        for k in 0..3u64 {
            owd(&mut law, k * 10, 1, Direction::Down, 5_010);
            owd(&mut law, k * 10 + 1, 2, Direction::Down, -2_990);
            owd(&mut law, k * 10 + 2, 3, Direction::Down, 86_010);
        }
        // A queue of 8 ms on two reflectors, 1 ms on the third: the median is 8 ms at once.
        owd(&mut law, 200, 1, Direction::Down, 5_018);
        owd(&mut law, 210, 2, Direction::Down, -2_982);
        owd(&mut law, 220, 3, Direction::Down, 86_011);
        assert_eq!(
            law.fast_delay(at(230), Direction::Down, w),
            Some(Duration::from_millis(8))
        );
        // Stale samples do not count; one fresh reflector is not enough.
        owd(&mut law, 400, 1, Direction::Down, 5_030);
        assert_eq!(law.fast_delay(at(420), Direction::Down, w), None);
        assert_eq!(law.fast_delay(at(230), Direction::Up, w), None);
    }
}
