//! Sans-IO bandwidth controllers for CAKE on variable-rate links, and the agent that runs them.
//!
//! **What this crate owns**: every decision PURPLE makes, as code that both the daemon
//! (`purple control`) and the simulator's closed loop run: [`agent::Agent`] (probe schedule,
//! the probes' bytes, reply matching and validation, reflector health and rotation, the rate
//! meter, CAKE's statistics, the actuator's limits and the rate in force, the law, and typed
//! log events), the controllers it drives, and the wire formats ([`wire`], and the bridge's
//! control protocol, [`ctl`]).
//!
//! **What it must not do**: read a clock (clippy bans `Instant::now` and `SystemTime::now`
//! here; time comes from the caller as [`qdisc::Instant`], wall time as a
//! [`wire::WallAnchor`] given once), touch a socket, file or process, start a thread, or draw
//! entropy (sqm-autorate's generator is seeded by the caller). Shells move bytes and time; they
//! decide nothing.
//!
//! A controller is fed timestamped [`Sample`]s (one-way delay or RTT per reflector, achieved
//! throughput, CAKE's statistics, optionally the radio's queue metrics and capacity estimate)
//! through [`Controller::on_sample`], and returns a [`Decision`] (a shaper rate per
//! [`Direction`] and the [`Reason`] for it) from [`Controller::poll`]. [`Controller::next_wakeup`]
//! says when `poll` must be called next.
//!
//! Layout (mechanism apart from policy):
//! - [`agent`]: [`agent::Agent`], the sans-IO state machine around an [`Engine`]: inputs are
//!   timestamped events (reply bytes, counter readings, CAKE statistics, actuator results),
//!   outputs `poll_transmit`, `poll_rate`, `poll_event`, `poll_timeout`.
//! - [`wire`]: ICMP echo/timestamp and our UDP timestamp protocol as pure codecs.
//! - [`ctl`]: the control protocol of `purple bridge`/`purple linkem` (requests, answers and
//!   their errors) as pure codecs, shared by the bridge, the daemon and `purple ctl`.
//! - [`baseline`]: per-reflector, per-direction baseline tracking that cancels clock offset and
//!   drift between hosts (windowed minimum plus a robust drift slope).
//! - [`reflectors`]: the reflector pool: liveness (lost, late, reordered probes), outlier
//!   rejection across reflectors (median of per-reflector deltas), dead / lying reflectors and
//!   replacement hooks (the agent rotates by its verdicts).
//! - [`safety`]: the rules every algorithm's output passes through: `[min, max]` clamps, stall
//!   detection moving to a configured safe rate with a reason, and a rate-of-change limit.
//! - One module per algorithm ([`Law`] implementations): [`aimd`] (PURPLE-AIMD),
//!   [`queue_metrics`] (PURPLE with radio metrics, BLUE-like), [`cake_autorate`],
//!   [`sqm_autorate`] and [`purple`] (our design).
//! - [`laws`]: the registry of those laws, [`LawKind`]: each law's name (the daemon's
//!   `algorithm` option, the logs' `law`), and the one constructor, [`LawKind::build`], that
//!   the daemon and the simulator's closed loop both build their law with. A new law is one
//!   module plus one entry there.
//! - [`engine`]: [`Engine`], which glues the signal front end, one law and the safety rules into
//!   a [`Controller`].
//!
//! Every rate the controllers are configured in, decide, measure and report is a [`Rate`]
//! (bytes per second, shown in Mbit/s; `Rate::from_mbit` converts from Mbit/s), the type
//! [`qdisc::Qdisc::set_rate`] takes too.
//!
//! ```
//! use controller::{Controller, Direction, Engine, Purple, Rate, Sample, ReflectorId, Config};
//! use qdisc::{Duration, Instant};
//! let mut c = Engine::new(Config::default(), Purple::default()).unwrap();
//! let t = Instant::from_millis(100);
//! c.on_sample(t, &Sample::Owd { reflector: ReflectorId(1), dir: Direction::Down,
//!     sent: Instant::from_millis(90), owd_ns: 10_000_000 });
//! let d = c.poll(t);
//! assert!(d.rate.down >= Config::default().min.down && d.rate.down <= Rate::from_mbit(80.0));
//! assert!(c.next_wakeup() > t);
//! ```
#![deny(unsafe_code)]
#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod agent;
pub mod aimd;
pub mod baseline;
pub mod cake_autorate;
pub mod config;
pub mod ctl;
pub mod engine;
pub mod laws;
pub mod passive;
pub mod purple;
pub mod queue_metrics;
pub mod reflectors;
pub mod safety;
pub mod sqm_autorate;
pub mod wire;

pub use aimd::{Aimd, AimdParams};
pub use baseline::{Baseline, BaselineParams};
pub use cake_autorate::{CakeAutorate, CakeAutorateParams};
pub use config::{Config, ConfigError, DelaySource, ParamInfo};
pub use engine::{DelayInForce, DirSignals, Engine, Law, Needs, RadioView, Step};
pub use laws::{LawKind, LawParams, UnknownLaw};
pub use purple::{Phase, Purple, PurpleParams, Transition};
pub use queue_metrics::{QueueMetrics, QueueMetricsParams};
pub use reflectors::{Health, Pool, ReflectorParams};
pub use safety::SafetyParams;
pub use sqm_autorate::{SqmAutorate, SqmAutorateParams};

pub use qdisc::{Duration, Instant};

use std::fmt;
use std::ops::{Index, IndexMut};

/// Bytes per second of `m` Mbit/s: [`qdisc::rate::mbit`], re-exported because every
/// controller parameter is given this way.
pub use qdisc::rate::mbit;
/// A rate in bytes per second: what the controllers decide and are configured in.
pub use qdisc::Rate;

/// A traffic direction as seen from the shaping box: the workspace's one direction type (the
/// bridge's `egress` is [`Direction::Up`], its `ingress` [`Direction::Down`]; see
/// [`ctl::DirNames`]). Serialized as `"down"`/`"up"` (the daemon's decision log).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// Towards the user (download, ingress shaping).
    Down,
    /// Away from the user (upload, egress shaping).
    Up,
}

impl Direction {
    /// Both directions, download first.
    pub const ALL: [Direction; 2] = [Direction::Down, Direction::Up];

    /// `"down"` or `"up"`.
    pub fn name(self) -> &'static str {
        match self {
            Direction::Down => "down",
            Direction::Up => "up",
        }
    }
}

/// One value per direction. Serialized as `{"down": .., "up": ..}`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PerDir<T> {
    /// Download.
    pub down: T,
    /// Upload.
    pub up: T,
}

impl<T> PerDir<T> {
    /// `down` and `up`.
    pub const fn new(down: T, up: T) -> Self {
        PerDir { down, up }
    }
}

impl<T: Clone> PerDir<T> {
    /// The same value for both directions.
    pub fn both(v: T) -> Self {
        PerDir {
            down: v.clone(),
            up: v,
        }
    }
}

impl<T> Index<Direction> for PerDir<T> {
    type Output = T;
    fn index(&self, d: Direction) -> &T {
        match d {
            Direction::Down => &self.down,
            Direction::Up => &self.up,
        }
    }
}
impl<T> IndexMut<Direction> for PerDir<T> {
    fn index_mut(&mut self, d: Direction) -> &mut T {
        match d {
            Direction::Down => &mut self.down,
            Direction::Up => &mut self.up,
        }
    }
}

/// A reflector (a host that answers our probes), named by the caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ReflectorId(pub u16);

/// A measurement, fed to [`Controller::on_sample`] at the instant it was made (`now`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Sample {
    /// A one-way delay: `owd_ns` = remote (or local) receive timestamp minus send timestamp, in
    /// nanoseconds, of a probe sent at local time `sent`. The two clocks may differ by any
    /// offset and drift slowly (the baseline cancels both); ICMP timestamps give 1 ms
    /// resolution and wrap at midnight (a jump of about ±24 h is undone). For
    /// [`Direction::Up`] it is the reflector's receive time minus our send time; for
    /// [`Direction::Down`] our receive time (`now`) minus the reflector's transmit time.
    Owd {
        /// Who answered.
        reflector: ReflectorId,
        /// Which path the delay was measured on.
        dir: Direction,
        /// When the probe left (local clock): orders probes, detects reordering and age.
        sent: Instant,
        /// Receive minus send time, clocks of two hosts (may be negative).
        owd_ns: i64,
    },
    /// A round-trip time, for reflectors that answer no timestamp requests: half of it is
    /// counted for each direction.
    Rtt {
        /// Who answered.
        reflector: ReflectorId,
        /// When the probe left (local clock).
        sent: Instant,
        /// The round trip.
        rtt: Duration,
    },
    /// The probe sent at `sent` to `reflector` is considered lost (no reply within the prober's
    /// timeout).
    ProbeLost {
        /// Who did not answer.
        reflector: ReflectorId,
        /// When the probe left.
        sent: Instant,
    },
    /// Achieved throughput in `dir` over the last measurement interval.
    Throughput {
        /// Direction.
        dir: Direction,
        /// What was delivered.
        rate: Rate,
    },
    /// CAKE's own statistics for the shaper of `dir`.
    CakeStats {
        /// Direction.
        dir: Direction,
        /// Bytes queued in CAKE now.
        backlog_bytes: u64,
        /// Packets dropped so far (cumulative counter).
        drops: u64,
        /// Packets ECN-marked so far (cumulative counter).
        ecn_marks: u64,
    },
    /// The radio's (bottleneck's) queue metrics for `dir`, where the firmware exposes them.
    RadioQueue {
        /// Direction.
        dir: Direction,
        /// Bytes queued in the radio now.
        backlog_bytes: u64,
        /// Packets queued in the radio now.
        backlog_packets: u32,
        /// Packets the radio dropped so far (cumulative counter).
        drops: u64,
        /// Recent queue sojourn time (mean over the radio's reporting interval).
        sojourn: Duration,
        /// The radio's own capacity estimate (often wrong; never trusted blindly).
        capacity: Option<Rate>,
    },
    /// The passive estimator's reading for `dir` ([`passive::PassiveReading`]): the queueing
    /// delay the users' TCP connections saw since the previous reading (`None`: no connection
    /// gave a sample), over `flows` connections. Feed one per control step while a passive
    /// feed runs, empty readings included: a fresh empty reading on a nearly idle link means
    /// "no queue", not "no signal". Used per [`Config::delay_source`].
    Passive {
        /// Direction.
        dir: Direction,
        /// The estimate.
        queue: Option<Duration>,
        /// Connections behind it.
        flows: u32,
    },
    /// The rate the shaper of `dir` actually runs at, reported by whoever applies decisions
    /// when it did not apply the latest one (an actuator that skips small or too frequent
    /// changes, or failed). Throughput is then compared with this rate, not the decided one:
    /// a link delivering the rate in force is not short of capacity. Report it after every
    /// attempt to apply; without reports the decided rate is taken to be in force.
    RateInForce {
        /// Direction.
        dir: Direction,
        /// The shaper's rate.
        rate: Rate,
    },
}

/// Why a direction's rate is what it is.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Reason {
    /// The initial rate, before the first control step.
    Start,
    /// No change was needed.
    Hold,
    /// Raised: delay low and the link loaded.
    Increase,
    /// Lowered because of the measured queueing delay (the delay is given).
    Decrease {
        /// The delay statistic that triggered it.
        delay: Duration,
    },
    /// Lowered because the radio's queue metrics show congestion (BLUE-like probability).
    Congested {
        /// The marking probability.
        p: f64,
    },
    /// Raised toward the radio's (sanity-checked) capacity while uncongested.
    Recover,
    /// Lightly loaded: drifting toward the base rate.
    DriftToBase,
    /// No usable signal: moved to the configured safe rate.
    NoSignal {
        /// Which signal is missing.
        signal: Signal,
        /// For how long it has been missing (or since start if it never came).
        missing_for: Duration,
    },
    /// Raised back to the rate before a cut that the link did not confirm: after a sudden
    /// drop in delivery the delay stayed low and the link went nearly idle, so the demand
    /// stopped, not the capacity.
    Restored,
    /// PURPLE: the link was the bottleneck during the last interval (a queue stood in it, or
    /// CAKE was backlogged yet the link delivered less than our rate), so its delivery is its
    /// capacity: the rate goes just below it, less what drains the queue above the target.
    Capacity {
        /// The capacity read from the delivery.
        capacity: Rate,
        /// The queueing delay seen.
        queue: Duration,
    },
    /// PURPLE: raised above the last capacity reading to find out whether the capacity grew
    /// (CAKE had more to send and the link kept up).
    Probe {
        /// The relative increase.
        gain: f64,
    },
    /// PURPLE: right after a saturated interval the link delivered far less than our rate
    /// with CAKE empty: a capacity drop whose queue the probes have not crossed yet, or the
    /// senders stopping. Cut to the delivery now; restored if the demand stopped.
    Shortfall {
        /// What the link delivered.
        delivered: Rate,
    },
    /// PURPLE: nothing delivered on a loaded link while a queue stands: an outage.
    Outage,
    /// PURPLE: a queue above the target stands while the link delivers exactly our rate: the
    /// capacity is at least our rate (no reading); lowered by what drains the excess.
    Standing {
        /// The queueing delay seen.
        queue: Duration,
    },
    /// PURPLE: between readings, following the capacity's trend (a fade) from the last reading.
    Trend {
        /// The capacity the trend predicts now.
        capacity: Rate,
    },
    /// The algorithm asked for a change that the rate-of-change limit holds back.
    RateLimited,
}

/// A signal the controller depends on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signal {
    /// Delay measurements from at least `min_reflectors` healthy reflectors, or the passive
    /// estimate (per [`Config::delay_source`]).
    Delay,
    /// The radio's queue metrics.
    RadioQueue,
    /// Achieved throughput.
    Throughput,
}

impl Reason {
    /// The rule's name, one per variant, without its figures: what a decision log's `rule`
    /// field holds and what `purple explain` counts by (`capacity`, `probe`, `standing`,
    /// `outage`, `no-signal`, ...). Stable across releases: readers of old logs rely on it.
    pub fn rule(&self) -> &'static str {
        match self {
            Reason::Start => "start",
            Reason::Hold => "hold",
            Reason::Increase => "increase",
            Reason::Decrease { .. } => "decrease",
            Reason::Congested { .. } => "congested",
            Reason::Recover => "recover",
            Reason::DriftToBase => "drift-to-base",
            Reason::NoSignal { .. } => "no-signal",
            Reason::Restored => "restored",
            Reason::Capacity { .. } => "capacity",
            Reason::Probe { .. } => "probe",
            Reason::Shortfall { .. } => "shortfall",
            Reason::Outage => "outage",
            Reason::Standing { .. } => "standing",
            Reason::Trend { .. } => "trend",
            Reason::RateLimited => "rate-limited",
        }
    }

    /// The rule of a reason given as its text (what [`fmt::Display`] writes: decision logs
    /// written before the rule had a field of its own), or `None` for a text no reason writes.
    /// `clamped` is the rule of `clamped to [min, max]`, which decisions outside the range read
    /// before stop 29 (a clamped rate now keeps the reason of the rule that asked for it).
    pub fn rule_of_text(text: &str) -> Option<&'static str> {
        let head = text.split(':').next().unwrap_or("").trim();
        Some(match head {
            "start" => "start",
            "hold" => "hold",
            "increase" if text.contains("recovering") => "recover",
            "increase" => "increase",
            "decrease" if text.contains("radio congested") => "congested",
            "decrease" => "decrease",
            "drift to base rate" => "drift-to-base",
            "safe rate" => "no-signal",
            "restored" => "restored",
            "capacity" => "capacity",
            "probe" => "probe",
            "shortfall" => "shortfall",
            "outage" => "outage",
            "standing queue" => "standing",
            "trend" => "trend",
            "change held back by the rate-of-change limit" => "rate-limited",
            "clamped to [min, max]" => "clamped",
            _ => return None,
        })
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::Start => f.write_str("start"),
            Reason::Hold => f.write_str("hold"),
            Reason::Increase => f.write_str("increase: delay low, link loaded"),
            Reason::Decrease { delay } => write!(f, "decrease: delay {delay:?}"),
            Reason::Congested { p } => write!(f, "decrease: radio congested (p = {p:.2})"),
            Reason::Recover => f.write_str("increase: recovering toward radio capacity"),
            Reason::DriftToBase => f.write_str("drift to base rate: lightly loaded"),
            Reason::NoSignal {
                signal,
                missing_for,
            } => write!(f, "safe rate: no {signal:?} signal for {missing_for:?}"),
            Reason::Restored => {
                f.write_str("restored: the demand stopped, not the capacity (delay stayed low)")
            }
            Reason::Capacity { capacity, queue } => write!(
                f,
                "capacity: the link delivered {capacity} with {queue:?} of queue"
            ),
            Reason::Probe { gain } => write!(f, "probe: +{:.1}% (the link kept up)", gain * 100.0),
            Reason::Shortfall { delivered } => write!(
                f,
                "shortfall: {delivered} delivered after a saturated interval"
            ),
            Reason::Outage => f.write_str("outage: nothing delivered while a queue stands"),
            Reason::Standing { queue } => write!(
                f,
                "standing queue: {queue:?} while the link keeps up with our rate"
            ),
            Reason::Trend { capacity } => {
                write!(f, "trend: the capacity's trend predicts {capacity}")
            }
            Reason::RateLimited => f.write_str("change held back by the rate-of-change limit"),
        }
    }
}

/// What the controller wants now.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Decision {
    /// Shaper rate per direction; always within the configured `[min, max]`.
    pub rate: PerDir<Rate>,
    /// Why, per direction.
    pub reason: PerDir<Reason>,
    /// Whether the rate changed at this poll (apply it to the shaper when true).
    pub changed: PerDir<bool>,
}

/// A bandwidth controller. Sans-IO: it never reads a clock; `now` must not go backwards between
/// calls (an earlier `now` is treated as the latest seen).
pub trait Controller: fmt::Debug {
    /// Feeds one measurement made at `now`. Bounded work (O(reflectors)); never panics on any
    /// input.
    fn on_sample(&mut self, now: Instant, sample: &Sample);
    /// Runs the control step if it is due (`now >= next_wakeup()`) and returns the current
    /// decision; calling early returns the current rates with `changed` false.
    #[must_use]
    fn poll(&mut self, now: Instant) -> Decision;
    /// When [`Controller::poll`] must be called next.
    #[must_use]
    fn next_wakeup(&self) -> Instant;
    /// The algorithm's short name (`"purple"`, `"purple-aimd"`, ...).
    fn name(&self) -> &'static str;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_has_a_rule_name_of_its_own_that_its_text_reads_back_as() {
        let d = Duration::from_millis(3);
        let r = Rate::from_mbit(10.0);
        let all = [
            Reason::Start,
            Reason::Hold,
            Reason::Increase,
            Reason::Decrease { delay: d },
            Reason::Congested { p: 0.5 },
            Reason::Recover,
            Reason::DriftToBase,
            Reason::NoSignal {
                signal: Signal::Delay,
                missing_for: d,
            },
            Reason::Restored,
            Reason::Capacity {
                capacity: r,
                queue: d,
            },
            Reason::Probe { gain: 0.1 },
            Reason::Shortfall { delivered: r },
            Reason::Outage,
            Reason::Standing { queue: d },
            Reason::Trend { capacity: r },
            Reason::RateLimited,
        ];
        for r in &all {
            assert_eq!(Reason::rule_of_text(&r.to_string()), Some(r.rule()), "{r}");
        }
        assert_eq!(
            Reason::rule_of_text("clamped to [min, max]"),
            Some("clamped")
        );
        assert_eq!(Reason::rule_of_text("no such reason"), None);
        let mut names: Vec<&str> = all.iter().map(Reason::rule).collect();
        assert!(names
            .iter()
            .all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_lowercase() || b == b'-')));
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), all.len());
    }
}
