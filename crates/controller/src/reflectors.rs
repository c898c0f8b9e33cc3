//! The reflector pool: per-reflector baselines and smoothed deltas, liveness, outlier rejection
//! across reflectors, and hooks to replace dead or lying reflectors.
//!
//! - **Consensus delay** per direction: the median of the smoothed deltas of the healthy
//!   reflectors heard from within [`ReflectorParams::fresh_for`]. One reflector lying (a
//!   congested path of its own, a rate-limited ICMP responder, a broken clock) cannot move a
//!   median of three or more.
//! - **Dead**: no reply for [`ReflectorParams::dead_after`], or
//!   [`ReflectorParams::offence_limit`] lost probes within [`ReflectorParams::offence_window`]
//!   (cake-autorate's rule: 3 in 60 s). A dead reflector that answers again and has served its
//!   offences is healthy again.
//! - **Bad**: its delta differs from the median of the others by more than
//!   [`ReflectorParams::outlier_margin`] at [`ReflectorParams::outlier_strikes`] reviews more
//!   than it agreed. Sticky until [`Pool::remove`] (the caller's replacement hook:
//!   [`Pool::replacements`] lists whom to replace).
//! - **Late** probes (sent more than [`ReflectorParams::max_probe_age`] ago) are ignored;
//!   **reordered** ones (sent before one already seen) still give a valid delay but do not count
//!   as proof of life.
//!
//! Memory is bounded by [`ReflectorParams::max_reflectors`]; samples from further unknown
//! reflectors are ignored.

use qdisc::quantile;

use crate::baseline::{Baseline, BaselineParams};
use crate::config::{check, check_f, ConfigError};
use crate::{Direction, Duration, Instant, PerDir, ReflectorId};

/// Most offences remembered per reflector.
const MAX_OFFENCES: usize = 16;

/// Reflector pool parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReflectorParams {
    /// Most reflectors tracked. Default 16. Accepted 1 ..= 64.
    pub max_reflectors: usize,
    /// Healthy reflectors needed for a delay signal. Default 1. Accepted 1 ..= max_reflectors.
    pub min_reflectors: usize,
    /// A reflector's delta counts only if it answered within this. Default 1 s. Accepted
    /// 10 ms ..= 60 s.
    pub fresh_for: Duration,
    /// No reply for this long: dead. Default 3 s. Accepted 100 ms ..= 10 min.
    pub dead_after: Duration,
    /// Window in which lost probes are counted. Default 60 s. Accepted 1 s ..= 1 h.
    pub offence_window: Duration,
    /// Lost probes within the window that make a reflector dead. Default 3. Accepted
    /// 1 ..= 16.
    pub offence_limit: usize,
    /// Disagreement with the median of the others that counts as a strike. Default 10 ms.
    /// Accepted 1 ms ..= 10 s.
    pub outlier_margin: Duration,
    /// Net strikes that make a reflector bad. Default 20 (one second of 50 ms reviews).
    /// Accepted 1 ..= 100000.
    pub outlier_strikes: u32,
    /// Weight of a new delta in the per-reflector EWMA. Default 0.5. Accepted (0, 1].
    pub delta_alpha: f64,
    /// Replies to probes older than this are ignored. Default 5 s. Accepted 10 ms ..= 60 s.
    pub max_probe_age: Duration,
}

impl Default for ReflectorParams {
    fn default() -> Self {
        ReflectorParams {
            max_reflectors: 16,
            min_reflectors: 1,
            fresh_for: Duration::from_secs(1),
            dead_after: Duration::from_secs(3),
            offence_window: Duration::from_secs(60),
            offence_limit: 3,
            outlier_margin: Duration::from_millis(10),
            outlier_strikes: 20,
            delta_alpha: 0.5,
            max_probe_age: Duration::from_secs(5),
        }
    }
}

impl ReflectorParams {
    /// Bounds check.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let ms = Duration::from_millis;
        let s = Duration::from_secs;
        check(
            (1..=64).contains(&self.max_reflectors),
            "reflectors.max_reflectors",
            self.max_reflectors,
            "1 ..= 64",
        )?;
        check(
            (1..=self.max_reflectors).contains(&self.min_reflectors),
            "reflectors.min_reflectors",
            self.min_reflectors,
            "1 ..= max_reflectors",
        )?;
        check(
            (ms(10)..=s(60)).contains(&self.fresh_for),
            "reflectors.fresh_for",
            self.fresh_for,
            "10 ms ..= 60 s",
        )?;
        check(
            (ms(100)..=s(600)).contains(&self.dead_after),
            "reflectors.dead_after",
            self.dead_after,
            "100 ms ..= 10 min",
        )?;
        check(
            (s(1)..=s(3600)).contains(&self.offence_window),
            "reflectors.offence_window",
            self.offence_window,
            "1 s ..= 1 h",
        )?;
        check(
            (1..=MAX_OFFENCES).contains(&self.offence_limit),
            "reflectors.offence_limit",
            self.offence_limit,
            "1 ..= 16",
        )?;
        check(
            (ms(1)..=s(10)).contains(&self.outlier_margin),
            "reflectors.outlier_margin",
            self.outlier_margin,
            "1 ms ..= 10 s",
        )?;
        check(
            (1..=100_000).contains(&self.outlier_strikes),
            "reflectors.outlier_strikes",
            self.outlier_strikes,
            "1 ..= 100000",
        )?;
        check_f(
            self.delta_alpha,
            f64::MIN_POSITIVE,
            1.0,
            "reflectors.delta_alpha",
            "(0, 1]",
        )?;
        check(
            (ms(10)..=s(60)).contains(&self.max_probe_age),
            "reflectors.max_probe_age",
            self.max_probe_age,
            "10 ms ..= 60 s",
        )
    }
}

/// A reflector's standing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Health {
    /// Answering and agreeing with the others.
    Good,
    /// Not answering (see the module documentation).
    Dead,
    /// Answering with delays the others contradict: replace it.
    Bad,
}

#[derive(Clone, Copy, Debug)]
struct Delta {
    at: Instant,
    ewma_ns: f64,
}

/// One reflector's state.
#[derive(Clone, Debug)]
pub struct Reflector {
    id: ReflectorId,
    added: Instant,
    baseline: PerDir<Baseline>,
    delta: PerDir<Option<Delta>>,
    last_reply: Option<Instant>,
    newest_sent: Option<Instant>,
    offences: [Instant; MAX_OFFENCES],
    n_offences: usize,
    strikes: u32,
    bad: bool,
    /// Replies ignored because their probe was too old.
    pub late: u64,
    /// Replies to probes sent before one already answered.
    pub reordered: u64,
}

impl Reflector {
    /// The caller's id.
    pub fn id(&self) -> ReflectorId {
        self.id
    }
    /// The baseline of direction `dir`.
    pub fn baseline(&self, dir: Direction) -> &Baseline {
        &self.baseline[dir]
    }
    /// The smoothed queueing delay in `dir` and when it was last updated.
    pub fn delta(&self, dir: Direction) -> Option<(Instant, Duration)> {
        self.delta[dir].map(|d| (d.at, Duration::from_nanos(d.ewma_ns.max(0.0) as u64)))
    }
}

/// The consensus of the pool for one direction.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Consensus {
    /// Median queueing delay of the fresh healthy reflectors.
    pub delay: Duration,
    /// How many reflectors it was taken over.
    pub used: usize,
}

/// The reflector pool. See the module documentation.
#[derive(Clone, Debug)]
pub struct Pool {
    p: ReflectorParams,
    bp: BaselineParams,
    refl: Vec<Reflector>,
    /// Scratch for medians (no allocation after the pool is full).
    scratch: Vec<f64>,
}

impl Pool {
    /// An empty pool.
    pub fn new(p: ReflectorParams, bp: BaselineParams) -> Self {
        Pool {
            p,
            bp,
            refl: Vec::new(),
            scratch: Vec::new(),
        }
    }

    /// The reflectors known.
    pub fn reflectors(&self) -> &[Reflector] {
        &self.refl
    }

    /// Removes `id` (after replacing it with a new reflector, which is added on its first
    /// sample). Returns whether it was known.
    pub fn remove(&mut self, id: ReflectorId) -> bool {
        let n = self.refl.len();
        self.refl.retain(|r| r.id != id);
        n != self.refl.len()
    }

    /// Reflectors to replace: dead or bad at `now`.
    pub fn replacements(&self, now: Instant) -> impl Iterator<Item = (ReflectorId, Health)> + '_ {
        self.refl.iter().filter_map(move |r| {
            let h = self.health_of(r, now);
            (h != Health::Good).then_some((r.id, h))
        })
    }

    /// The standing of `id` at `now` (`None` if unknown).
    pub fn health(&self, id: ReflectorId, now: Instant) -> Option<Health> {
        self.refl
            .iter()
            .find(|r| r.id == id)
            .map(|r| self.health_of(r, now))
    }

    fn health_of(&self, r: &Reflector, now: Instant) -> Health {
        if r.bad {
            return Health::Bad;
        }
        let since = r.last_reply.unwrap_or(r.added);
        let recent = r.offences[..r.n_offences]
            .iter()
            .filter(|&&t| now.saturating_duration_since(t) < self.p.offence_window)
            .count();
        if now.saturating_duration_since(since) >= self.p.dead_after
            || recent >= self.p.offence_limit
        {
            Health::Dead
        } else {
            Health::Good
        }
    }

    fn slot(&mut self, id: ReflectorId, now: Instant) -> Option<&mut Reflector> {
        let i = match self.refl.iter().position(|r| r.id == id) {
            Some(i) => i,
            None if self.refl.len() < self.p.max_reflectors => {
                self.refl.push(Reflector {
                    id,
                    added: now,
                    baseline: PerDir::both(Baseline::new(self.bp)),
                    delta: PerDir::both(None),
                    last_reply: None,
                    newest_sent: None,
                    offences: [Instant::ZERO; MAX_OFFENCES],
                    n_offences: 0,
                    strikes: 0,
                    bad: false,
                    late: 0,
                    reordered: 0,
                });
                self.refl.len() - 1
            }
            None => return None,
        };
        self.refl.get_mut(i)
    }

    /// Starts tracking `id` at `now` (a reflector that begins to be probed), without a sample:
    /// if it never answers it is dead after [`ReflectorParams::dead_after`]. Returns false when
    /// the pool is full. Known reflectors are left as they are.
    pub fn track(&mut self, now: Instant, id: ReflectorId) -> bool {
        self.slot(id, now).is_some()
    }

    /// Records a reply to the probe sent at `sent`; returns false when the reply is ignored
    /// (too late, or the pool is full).
    fn reply(&mut self, now: Instant, id: ReflectorId, sent: Instant) -> bool {
        let max_age = self.p.max_probe_age;
        let Some(r) = self.slot(id, now) else {
            return false;
        };
        if now.saturating_duration_since(sent) > max_age {
            r.late += 1;
            return false;
        }
        if r.newest_sent.is_some_and(|n| sent < n) {
            r.reordered += 1;
        } else {
            r.newest_sent = Some(sent);
            r.last_reply = Some(now);
        }
        true
    }

    fn add_delay(&mut self, now: Instant, id: ReflectorId, dir: Direction, raw_ns: i64) {
        let alpha = self.p.delta_alpha;
        if let Some(r) = self.slot(id, now) {
            let d = r.baseline[dir].update(now, raw_ns);
            let e = match r.delta[dir] {
                Some(p) => p.ewma_ns + alpha * (d - p.ewma_ns),
                None => d,
            };
            r.delta[dir] = Some(Delta {
                at: now,
                ewma_ns: e,
            });
        }
    }

    /// A one-way delay sample.
    pub fn on_owd(
        &mut self,
        now: Instant,
        id: ReflectorId,
        dir: Direction,
        sent: Instant,
        owd_ns: i64,
    ) {
        if self.reply(now, id, sent) {
            self.add_delay(now, id, dir, owd_ns);
        }
    }

    /// A round-trip sample: half of it for each direction.
    pub fn on_rtt(&mut self, now: Instant, id: ReflectorId, sent: Instant, rtt: Duration) {
        if self.reply(now, id, sent) {
            let half = (rtt.as_nanos() / 2).min(i64::MAX as u64) as i64;
            self.add_delay(now, id, Direction::Down, half);
            self.add_delay(now, id, Direction::Up, half);
        }
    }

    /// A lost probe: an offence.
    pub fn on_lost(&mut self, now: Instant, id: ReflectorId) {
        if let Some(r) = self.slot(id, now) {
            if r.n_offences == MAX_OFFENCES {
                r.offences.copy_within(1.., 0);
                r.n_offences -= 1;
            }
            r.offences[r.n_offences] = now;
            r.n_offences += 1;
        }
    }

    /// Periodic review (each control step): counts strikes against reflectors that disagree
    /// with the median of the others (needs three or more fresh healthy reflectors).
    pub fn review(&mut self, now: Instant) {
        let margin = self.p.outlier_margin.as_nanos() as f64;
        for dir in Direction::ALL {
            let Some(m) = self.median(now, dir) else {
                continue;
            };
            if m.used < 3 {
                continue;
            }
            let med = m.delay.as_nanos() as f64;
            for i in 0..self.refl.len() {
                if self.health_of(&self.refl[i], now) != Health::Good {
                    continue;
                }
                let r = &mut self.refl[i];
                let Some(d) = r.delta[dir]
                    .filter(|d| now.saturating_duration_since(d.at) <= self.p.fresh_for)
                else {
                    continue;
                };
                if (d.ewma_ns - med).abs() > margin {
                    r.strikes += 1;
                    if r.strikes >= self.p.outlier_strikes {
                        r.bad = true;
                    }
                } else {
                    r.strikes = r.strikes.saturating_sub(1);
                }
            }
        }
    }

    fn median(&mut self, now: Instant, dir: Direction) -> Option<Consensus> {
        self.scratch.clear();
        for r in &self.refl {
            if self.health_of(r, now) != Health::Good {
                continue;
            }
            if let Some(d) = r.delta[dir] {
                if now.saturating_duration_since(d.at) <= self.p.fresh_for {
                    self.scratch.push(d.ewma_ns);
                }
            }
        }
        let n = self.scratch.len();
        self.scratch.sort_unstable_by(f64::total_cmp);
        let med = quantile::median_sorted(&self.scratch)?;
        Some(Consensus {
            delay: Duration::from_nanos(med.max(0.0) as u64),
            used: n,
        })
    }

    /// The consensus queueing delay in `dir` at `now`, or `None` when fewer than
    /// `min_reflectors` healthy reflectors answered recently.
    pub fn consensus(&mut self, now: Instant, dir: Direction) -> Option<Consensus> {
        self.median(now, dir)
            .filter(|c| c.used >= self.p.min_reflectors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool() -> Pool {
        Pool::new(ReflectorParams::default(), BaselineParams::default())
    }

    #[test]
    fn median_ignores_one_liar_and_marks_it_bad() {
        let mut p = pool();
        for i in 0..100u64 {
            let t = Instant::from_millis(i * 50);
            for id in 0..4u16 {
                let q = if id == 3 && i > 20 {
                    80_000_000
                } else {
                    2_000_000
                };
                p.on_owd(
                    t,
                    ReflectorId(id),
                    Direction::Down,
                    t,
                    1_000_000 * i64::from(id) + q,
                );
            }
            p.review(t);
            let c = p.consensus(t, Direction::Down).unwrap();
            assert!(c.delay < Duration::from_millis(1), "{c:?} at {i}");
        }
        let t = Instant::from_millis(99 * 50);
        assert_eq!(p.health(ReflectorId(3), t), Some(Health::Bad));
        assert_eq!(p.health(ReflectorId(0), t), Some(Health::Good));
        assert_eq!(
            p.replacements(t).collect::<Vec<_>>(),
            vec![(ReflectorId(3), Health::Bad)]
        );
        assert!(p.remove(ReflectorId(3)));
    }

    #[test]
    fn silent_reflector_is_dead_and_three_losses_kill() {
        let mut p = pool();
        let t0 = Instant::from_secs(1);
        p.on_owd(t0, ReflectorId(1), Direction::Up, t0, 5);
        p.on_owd(t0, ReflectorId(2), Direction::Up, t0, 5);
        assert_eq!(
            p.health(ReflectorId(1), t0 + Duration::from_secs(2)),
            Some(Health::Good)
        );
        assert_eq!(
            p.health(ReflectorId(1), t0 + Duration::from_secs(3)),
            Some(Health::Dead)
        );
        for k in 0..3 {
            p.on_lost(t0 + Duration::from_millis(k * 100), ReflectorId(2));
        }
        assert_eq!(
            p.health(ReflectorId(2), t0 + Duration::from_millis(400)),
            Some(Health::Dead)
        );
        assert_eq!(
            p.health(ReflectorId(2), t0 + Duration::from_secs(61)),
            Some(Health::Dead)
        ); // silent too
    }

    #[test]
    fn a_tracked_reflector_that_never_answers_is_dead_after_dead_after() {
        let mut p = pool();
        let t0 = Instant::from_secs(1);
        assert!(p.track(t0, ReflectorId(7)));
        assert_eq!(p.health(ReflectorId(7), t0), Some(Health::Good));
        let dead = t0 + ReflectorParams::default().dead_after;
        assert_eq!(p.health(ReflectorId(7), dead), Some(Health::Dead));
        // Tracking again changes nothing; an answer revives it.
        assert!(p.track(dead, ReflectorId(7)));
        p.on_rtt(dead, ReflectorId(7), dead, Duration::from_millis(5));
        assert_eq!(p.health(ReflectorId(7), dead), Some(Health::Good));
    }

    #[test]
    fn late_probes_ignored_and_reordered_counted() {
        let mut p = pool();
        let t = Instant::from_secs(10);
        p.on_owd(t, ReflectorId(1), Direction::Down, Instant::from_secs(1), 5);
        assert_eq!(p.reflectors()[0].late, 1);
        assert!(p.consensus(t, Direction::Down).is_none());
        p.on_owd(
            t,
            ReflectorId(1),
            Direction::Down,
            t - Duration::from_millis(10),
            5,
        );
        p.on_owd(
            t,
            ReflectorId(1),
            Direction::Down,
            t - Duration::from_millis(20),
            5,
        );
        assert_eq!(p.reflectors()[0].reordered, 1);
        assert!(p.consensus(t, Direction::Down).is_some());
    }
}
