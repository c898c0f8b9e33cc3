//! The judge of section C: every contender on every variable link for many seeds, reduced per
//! link to the seed median and the worst seed, with `purple`'s latency-target sweep and the
//! issue's targets against the one-interval-late oracle.
//!
//! A matrix is a list of links ([`MatrixLink`]: a built-in scenario, drawn anew for each seed,
//! or a fixed [`Scenario`] such as a user's traces), seeds, contenders ([`Role`]) and `purple`
//! targets. Every (link, seed, contender) is one [`closed_loop::run`]; the runs are independent
//! and go to `threads` worker threads, and their results are put back in a fixed order, so the
//! numbers depend only on the [`MatrixSpec`], never on the thread count or the scheduling.
//!
//! Per run the matrix keeps ([`SeedMetrics`]): download and upload throughput and their shares
//! of the mean true capacity, and the 50th/95th/99th percentiles of the loaded latency (probe
//! RTT minus the idle RTT) and of the one-way queueing delay per direction (see
//! [`LoopResult::one_way`]). Per link and contender ([`RowResult`]) it reports the
//! median over the seeds (the mean of the two middle values for an even count) and the worst
//! seed of each figure (the lowest throughput and share, the highest latency: each figure's own
//! worst seed).
//!
//! The targets per link ([`targets`]), as [`Claim`]s: `purple`'s seed-median download
//! throughput at least 0.90 of the late oracle's seed median; its seed-median p99 at most the
//! late oracle's + 2 ms; on every seed at least 0.80 of the late oracle's throughput on the same
//! seed; and its target sweep dominating each other contender (some target with at least its
//! seed-median throughput at no more than its seed-median p95).

use super::closed_loop::{self, Contender, LatencyStats, LoopResult, LoopSpec};
use super::scenario::{self, Scenario, SlotCapacity};
use crate::{Claim, Table};
use controller::{Direction, PurpleParams};
use qdisc::{quantile, Duration};
use serde::Serialize;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Seeds the matrix runs by default (1..=10).
pub const DEFAULT_SEEDS: u64 = 10;

/// `purple`'s latency targets swept by default, ms.
pub const DEFAULT_TARGETS_MS: [f64; 8] = [1.0, 2.0, 3.0, 5.0, 8.0, 12.0, 20.0, 30.0];

/// The targets: seed-median throughput fraction of the late oracle's, p99 excess over
/// the late oracle's (ms), worst-seed throughput fraction.
pub const TARGET_FRACTION: f64 = 0.90;
/// See [`TARGET_FRACTION`].
pub const TARGET_P99_EXCESS_MS: f64 = 2.0;
/// See [`TARGET_FRACTION`].
pub const TARGET_WORST_FRACTION: f64 = 0.80;

/// Section C's roles, their ids and their parsing are the one link-level scenario's
/// ([`sim::link_scenario::Role`]), shared with the lab (`purple lab run --link-of NAME
/// --contenders`).
pub use sim::link_scenario::{Role, UnknownRole, CENSORED_GAINS, SATURATED_GAINS};

/// The contender playing `role` on `s` (`None`: the lookahead oracle on a synthetic link, where
/// it would repeat the oracle).
pub fn role_contender(role: Role, s: &Scenario) -> Option<Contender> {
    Some(match role {
        Role::Fifo => Contender::Fifo,
        Role::FqCodel => Contender::FqCodel,
        Role::StaticSafe => Contender::CakeStatic(s.statics()[0].0, s.statics()[0].1),
        Role::StaticOptimistic => Contender::CakeStatic(s.statics()[1].0, s.statics()[1].1),
        Role::PurpleRadio => Contender::PurpleRadio,
        Role::PurpleAimd => Contender::PurpleAimd,
        Role::CakeAutorate => Contender::CakeAutorate,
        Role::SqmAutorate => Contender::SqmAutorate,
        Role::AutorateIngress => Contender::AutorateIngress,
        Role::Purple => Contender::Purple,
        Role::Oracle => Contender::Oracle,
        Role::OracleLate => Contender::OracleLagged,
        Role::OracleLookahead if !s.link.down.capacity.is_series() => Contender::OracleLookahead,
        Role::OracleLookahead => return None,
        Role::OracleCensored(g) => Contender::OracleCensored(g),
        Role::OracleSaturated(g) => Contender::OracleSaturated(g),
    })
}

/// Whether the dominance target compares the sweep with `role`'s contender
/// (cake-autorate, sqm-autorate, PURPLE-AIMD, PURPLE-regular, autorate-ingress, static CAKE).
fn judged_by_sweep(role: Role) -> bool {
    matches!(
        role,
        Role::StaticSafe
            | Role::StaticOptimistic
            | Role::PurpleRadio
            | Role::PurpleAimd
            | Role::CakeAutorate
            | Role::SqmAutorate
            | Role::AutorateIngress
    )
}

/// Why a matrix could not run.
#[derive(Clone, Debug, PartialEq)]
pub enum MatrixError {
    /// A scenario name that is not built in.
    UnknownScenario(String),
    /// A contender id that is not a [`Role`].
    UnknownContender(String),
    /// No seed, no link or no contender selected.
    Empty(&'static str),
    /// Seconds outside 1..=3600.
    BadSeconds(f64),
    /// A sweep target that is not a positive number of ms (at most 1000).
    BadTarget(f64),
    /// An idle round trip ([`MatrixSpec::base_rtt_ms`]) a link cannot be played at.
    BaseRtt(super::link::LinkError),
    /// A run measured nothing with one of its probes (shorter than its warm-up?).
    NoSamples {
        /// The link.
        scenario: String,
        /// The contender.
        contender: String,
        /// The seed.
        seed: u64,
        /// Which measurement: `round-trip`, `one-way down` or `one-way up`.
        probe: &'static str,
    },
}

impl std::fmt::Display for MatrixError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MatrixError::UnknownScenario(n) => write!(
                f,
                "unknown scenario {n:?} (known: {}; held out: {})",
                scenario::NAMES.join(", "),
                scenario::HOLDOUT_NAMES.join(", ")
            ),
            MatrixError::UnknownContender(n) => {
                let ids: Vec<&str> = Role::ALL.iter().map(|r| r.id()).collect();
                write!(f, "unknown contender {n:?} (known: {})", ids.join(", "))
            }
            MatrixError::Empty(what) => write!(f, "the matrix needs at least one {what}"),
            MatrixError::BadSeconds(s) => write!(f, "--seconds {s}: accepted 1 ..= 3600"),
            MatrixError::BadTarget(t) => {
                write!(f, "purple target {t} ms: accepted a number in (0, 1000]")
            }
            MatrixError::BaseRtt(e) => e.fmt(f),
            MatrixError::NoSamples {
                scenario,
                contender,
                seed,
                probe,
            } => write!(
                f,
                "{scenario}, {contender}, seed {seed}: the {probe} latency probe has no sample \
                 after the warm-up"
            ),
        }
    }
}

impl std::error::Error for MatrixError {}

impl From<UnknownRole> for MatrixError {
    fn from(e: UnknownRole) -> Self {
        MatrixError::UnknownContender(e.0)
    }
}

/// One link of the matrix.
#[derive(Clone, Debug)]
pub enum MatrixLink {
    /// A built-in scenario ([`scenario::NAMES`]), drawn anew for every seed.
    Named(String),
    /// A fixed link (e.g. [`link::from_traces`](super::link::from_traces) on a user's traces); seeds change only the
    /// simulator's and the controllers' randomness.
    Link(Box<Scenario>),
}

impl MatrixLink {
    /// The link's scenario for `seed`, deployed as `spec` says: as a home router when
    /// [`MatrixSpec::home_router`] ([`Scenario::as_home_router`]), with
    /// [`MatrixSpec::base_rtt_ms`] ([`link::at_idle_rtt`](super::link::at_idle_rtt)).
    fn build(&self, seed: u64, spec: &MatrixSpec) -> Result<Scenario, MatrixError> {
        let mut s = match self {
            MatrixLink::Named(n) => scenario::scenario(n, seed)
                .ok_or_else(|| MatrixError::UnknownScenario(n.clone()))?,
            MatrixLink::Link(s) => (**s).clone(),
        };
        if spec.home_router {
            s = s.as_home_router();
        }
        if let Some(rtt) = spec.base_rtt_ms {
            s = super::link::at_idle_rtt(s, rtt).map_err(MatrixError::BaseRtt)?;
        }
        Ok(s)
    }
}

/// What a matrix runs.
#[derive(Clone, Debug)]
pub struct MatrixSpec {
    /// The links, in report order.
    pub links: Vec<MatrixLink>,
    /// The seeds.
    pub seeds: Vec<u64>,
    /// The contenders, in table order (a role a link lacks is left out there), on every link
    /// that does not name its own ([`Scenario::roles`](sim::link_scenario::LinkScenario::roles):
    /// a link file's `[run] contenders`).
    pub roles: Vec<Role>,
    /// `purple`'s targets to sweep, ms (empty: no sweep).
    pub targets_ms: Vec<f64>,
    /// Simulated seconds of every run (`None`: each scenario's own length); the warm-up is 5 s
    /// or a quarter of the run, whichever is shorter.
    pub secs: Option<f64>,
    /// Worker threads (0: `std::thread::available_parallelism`). Results do not depend on it.
    pub threads: usize,
    /// Every link deployed as a home router ([`Scenario::as_home_router`]). Default false:
    /// each scenario's own deployment.
    pub home_router: bool,
    /// Every link at this idle round trip, ms ([`link::at_idle_rtt`](super::link::at_idle_rtt):
    /// a built-in link's radio hop takes what the simulated path leaves, a link file's path
    /// what its delays leave; `purple demo --matrix --base-rtt-ms`). `None` (default): each
    /// link's own.
    pub base_rtt_ms: Option<f64>,
}

impl MatrixSpec {
    /// Every built-in scenario, seeds 1..=`seeds`, every contender, the default sweep.
    pub fn new(seeds: u64) -> Self {
        MatrixSpec {
            links: scenario::NAMES
                .iter()
                .map(|n| MatrixLink::Named(n.to_string()))
                .collect(),
            seeds: (1..=seeds).collect(),
            roles: Role::MATRIX.to_vec(),
            targets_ms: DEFAULT_TARGETS_MS.to_vec(),
            secs: None,
            threads: 0,
            home_router: false,
            base_rtt_ms: None,
        }
    }

    fn check(&self) -> Result<(), MatrixError> {
        if self.links.is_empty() {
            return Err(MatrixError::Empty("scenario"));
        }
        if self.seeds.is_empty() {
            return Err(MatrixError::Empty("seed"));
        }
        if self.roles.is_empty() && self.targets_ms.is_empty() {
            return Err(MatrixError::Empty("contender"));
        }
        if let Some(s) = self.secs.filter(|s| !(1.0..=3600.0).contains(s)) {
            return Err(MatrixError::BadSeconds(s));
        }
        if let Some(&t) = self
            .targets_ms
            .iter()
            .find(|t| !(t.is_finite() && **t > 0.0 && **t <= 1000.0))
        {
            return Err(MatrixError::BadTarget(t));
        }
        for l in &self.links {
            if let MatrixLink::Named(n) = l {
                if !scenario::NAMES.contains(&n.as_str())
                    && !scenario::HOLDOUT_NAMES.contains(&n.as_str())
                {
                    return Err(MatrixError::UnknownScenario(n.clone()));
                }
            }
        }
        Ok(())
    }

    /// The number of closed-loop runs the matrix makes.
    pub fn runs(&self) -> Result<usize, MatrixError> {
        Ok(self.plan()?.iter().map(|p| p.runs().count()).sum::<usize>() * self.seeds.len())
    }

    /// Per link: its rows (resolved on the first seed's scenario; the contenders a link offers
    /// do not depend on the seed).
    fn plan(&self) -> Result<Vec<LinkPlan>, MatrixError> {
        self.check()?;
        let first = self.seeds[0];
        self.links
            .iter()
            .map(|l| {
                let sc = l.build(first, self)?;
                // A link that names its contenders (a link file's `[run] contenders`) runs
                // those; the others run the spec's.
                let roles = sc.roles.as_deref().unwrap_or(&self.roles);
                let mut rows: Vec<Row> = roles
                    .iter()
                    .filter_map(|&r| role_contender(r, &sc).map(|c| Row::Role(r, c)))
                    .collect();
                rows.extend(self.targets_ms.iter().map(|&t| Row::Sweep(t)));
                // A sweep point at purple's own parameters repeats the `purple` row: reuse it.
                let own = LoopSpec::new(sc.clone(), Contender::Purple, first).purple_params();
                let purple_row = rows
                    .iter()
                    .position(|r| *r == Row::Role(Role::Purple, Contender::Purple));
                let same_as = rows
                    .iter()
                    .map(|r| match (r, purple_row) {
                        (Row::Sweep(t), Some(i)) if sweep_params(own, *t) == own => Some(i),
                        _ => None,
                    })
                    .collect();
                Ok(LinkPlan {
                    name: sc.link.name.clone(),
                    description: sc.link.description.clone(),
                    secs: self.secs.unwrap_or(sc.link.secs),
                    rows,
                    same_as,
                })
            })
            .collect()
    }
}

/// One row of a link's table: a contender, or `purple` at one target.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Row {
    Role(Role, Contender),
    Sweep(f64),
}

impl Row {
    fn id(&self) -> String {
        match self {
            Row::Role(r, _) => r.id().to_string(),
            Row::Sweep(t) => format!("purple@{t}ms"),
        }
    }
    fn name(&self) -> String {
        match self {
            Row::Role(_, c) => c.name(),
            Row::Sweep(t) => format!("purple, target {t} ms"),
        }
    }
    fn contender(&self) -> Contender {
        match self {
            Row::Role(_, c) => *c,
            Row::Sweep(_) => Contender::Purple,
        }
    }
}

/// `purple`'s parameters `own` with the target `target_ms`.
fn sweep_params(own: PurpleParams, target_ms: f64) -> PurpleParams {
    PurpleParams {
        target: Duration::from_secs_f64(target_ms / 1e3),
        ..own
    }
}

#[derive(Clone, Debug)]
struct LinkPlan {
    name: String,
    description: String,
    secs: f64,
    rows: Vec<Row>,
    /// Per row: the row whose runs it repeats exactly (a sweep point at purple's own target),
    /// or `None` when it is run.
    same_as: Vec<Option<usize>>,
}

impl LinkPlan {
    /// The indices of the rows that are run.
    fn runs(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.rows.len()).filter(|&i| self.same_as[i].is_none())
    }
}

/// The 50th, 95th and 99th percentiles of a latency, ms.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Tail {
    /// Median.
    pub p50: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
}

impl Tail {
    fn of(l: &LatencyStats) -> Tail {
        Tail {
            p50: l.median,
            p95: l.p95,
            p99: l.p99,
        }
    }
}

/// What one run (one link, contender and seed) measured after its warm-up.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct SeedMetrics {
    /// The seed.
    pub seed: u64,
    /// Download throughput, Mbit/s.
    pub down_mbit: f64,
    /// Upload throughput, Mbit/s.
    pub up_mbit: f64,
    /// Download throughput / mean download capacity.
    pub down_share: f64,
    /// Upload throughput / mean upload capacity.
    pub up_share: f64,
    /// Loaded latency (probe RTT minus the idle RTT), ms.
    pub rtt: Tail,
    /// One-way queueing delay towards the client, ms.
    pub owd_down: Tail,
    /// One-way queueing delay from the client, ms.
    pub owd_up: Tail,
}

impl SeedMetrics {
    fn of(r: &LoopResult, seed: u64) -> SeedMetrics {
        let l = r.loaded();
        // No capacity: NaN (rendered as "-", null in JSON).
        let share = |d| l.share(d).unwrap_or(f64::NAN);
        SeedMetrics {
            seed,
            down_mbit: l.throughput_mbit.down,
            up_mbit: l.throughput_mbit.up,
            down_share: share(Direction::Down),
            up_share: share(Direction::Up),
            rtt: Tail::of(r.latency()),
            owd_down: Tail::of(&r.one_way(Direction::Down).latency),
            owd_up: Tail::of(&r.one_way(Direction::Up).latency),
        }
    }
}

/// One figure of every [`SeedMetrics`] reduced over the seeds (see [`RowResult`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Summary {
    /// Download throughput, Mbit/s.
    pub down_mbit: f64,
    /// Upload throughput, Mbit/s.
    pub up_mbit: f64,
    /// Download share of capacity.
    pub down_share: f64,
    /// Upload share of capacity.
    pub up_share: f64,
    /// Loaded latency (RTT based), ms.
    pub rtt: Tail,
    /// One-way queueing delay down, ms.
    pub owd_down: Tail,
    /// One-way queueing delay up, ms.
    pub owd_up: Tail,
}

impl Summary {
    /// Reduces `seeds` with `f` applied to each figure's values; `higher_is_worse` is true
    /// for latencies (the reduction for "worst" takes the max there and the min elsewhere).
    fn reduce(seeds: &[SeedMetrics], f: &dyn Fn(&[f64], bool) -> f64) -> Summary {
        let get = |g: &dyn Fn(&SeedMetrics) -> f64, lat: bool| {
            let v: Vec<f64> = seeds.iter().map(g).collect();
            f(&v, lat)
        };
        let tail = |g: &dyn Fn(&SeedMetrics) -> Tail| Tail {
            p50: get(&|m| g(m).p50, true),
            p95: get(&|m| g(m).p95, true),
            p99: get(&|m| g(m).p99, true),
        };
        Summary {
            down_mbit: get(&|m| m.down_mbit, false),
            up_mbit: get(&|m| m.up_mbit, false),
            down_share: get(&|m| m.down_share, false),
            up_share: get(&|m| m.up_share, false),
            rtt: tail(&|m| m.rtt),
            owd_down: tail(&|m| m.owd_down),
            owd_up: tail(&|m| m.owd_up),
        }
    }

    fn median_of(seeds: &[SeedMetrics]) -> Summary {
        // A column no seed produced stays NaN (rendered as "-", null in JSON).
        Summary::reduce(seeds, &|v, _| quantile::median(v).unwrap_or(f64::NAN))
    }

    fn worst_of(seeds: &[SeedMetrics]) -> Summary {
        Summary::reduce(seeds, &|v, latency| {
            let it = v.iter().copied().filter(|x| !x.is_nan());
            if latency {
                it.fold(f64::NAN, f64::max)
            } else {
                it.fold(f64::NAN, f64::min)
            }
        })
    }
}

/// One contender (or sweep point) on one link over every seed.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RowResult {
    /// Id: a [`Role::id`], or `purple@Xms` for the sweep.
    pub id: String,
    /// Display name.
    pub name: String,
    /// The sweep's target, ms (`None` for a contender).
    pub target_ms: Option<f64>,
    /// The seed median of every figure.
    pub median: Summary,
    /// The worst seed of every figure (each figure's own worst seed).
    pub worst: Summary,
    /// Every seed's figures, in seed order.
    pub seeds: Vec<SeedMetrics>,
}

/// The targets on one link, as figures (see [`targets`]).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct TargetFigures {
    /// `purple`'s seed-median download throughput / the late oracle's.
    pub throughput_fraction: f64,
    /// `purple`'s seed-median p99 minus the late oracle's, ms.
    pub p99_excess_ms: f64,
    /// The lowest over the seeds of `purple`'s download throughput / the late oracle's on the
    /// same seed.
    pub worst_fraction: f64,
    /// The seed of [`TargetFigures::worst_fraction`].
    pub worst_seed: u64,
    /// The reference: the censored oracle at each of [`CENSORED_GAINS`] against the late
    /// oracle (`None` where the matrix did not run it). Where no gain meets both the
    /// throughput and the p99 target, exact delivery readings one interval late with that
    /// probing do not reach the pair either.
    pub censored: [Option<ReferencePoint>; CENSORED_GAINS.len()],
    /// The tighter reference: the saturated oracle at each of [`SATURATED_GAINS`] (told the
    /// capacity only after an interval the link delivered all of), `None` where the matrix did
    /// not run it (it runs on request only).
    pub saturated: [Option<ReferencePoint>; SATURATED_GAINS.len()],
}

/// A reference oracle (censored or saturated) at one probe gain against the late oracle,
/// seed medians.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct ReferencePoint {
    /// Its probe gain, per cent per interval.
    pub gain_pct: u16,
    /// Its download throughput / the late oracle's.
    pub throughput_fraction: f64,
    /// Its p99 minus the late oracle's, ms.
    pub p99_excess_ms: f64,
}

impl ReferencePoint {
    /// Whether it meets both seed-median targets that purple is held to (throughput and p99).
    pub fn meets_both(&self) -> bool {
        self.throughput_fraction >= TARGET_FRACTION && self.p99_excess_ms <= TARGET_P99_EXCESS_MS
    }
}

/// One link's results.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LinkResult {
    /// Scenario name.
    pub name: String,
    /// Its description.
    pub description: String,
    /// Simulated seconds per run.
    pub seconds: f64,
    /// The rows: contenders in table order, then the sweep.
    pub rows: Vec<RowResult>,
    /// The targets as figures (`None` without `purple` or the late oracle).
    pub figures: Option<TargetFigures>,
    /// The targets, PASS or FAIL.
    pub claims: Vec<Claim>,
}

impl LinkResult {
    /// The row with this id.
    pub fn row(&self, id: &str) -> Option<&RowResult> {
        self.rows.iter().find(|r| r.id == id)
    }

    /// The sweep's rows, in target order.
    pub fn sweep(&self) -> impl Iterator<Item = &RowResult> {
        self.rows.iter().filter(|r| r.target_ms.is_some())
    }
}

/// A whole matrix.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MatrixResult {
    /// The seeds.
    pub seeds: Vec<u64>,
    /// The sweep's targets, ms.
    pub targets_ms: Vec<f64>,
    /// One entry per link, in the spec's order.
    pub scenarios: Vec<LinkResult>,
    /// Claims that passed.
    pub claims_met: usize,
    /// Claims in all.
    pub claims_total: usize,
}

/// Runs `f(i)` for every `i < n` on `threads` threads; results in index order.
pub(crate) fn parallel<T: Send>(
    n: usize,
    threads: usize,
    f: &(dyn Fn(usize) -> T + Sync),
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Vec<T> {
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let mut slots: Vec<Option<T>> = (0..n).map(|_| None).collect();
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads.clamp(1, n.max(1)))
            .map(|_| {
                s.spawn(|| {
                    let mut out = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= n {
                            break out;
                        }
                        out.push((i, f(i)));
                        progress(done.fetch_add(1, Ordering::Relaxed) + 1, n);
                    }
                })
            })
            .collect();
        for w in workers {
            match w.join() {
                Ok(out) => {
                    for (i, v) in out {
                        slots[i] = Some(v);
                    }
                }
                // A panicking run is a bug in the simulator or a controller: pass it on.
                Err(e) => std::panic::resume_unwind(e),
            }
        }
    });
    // Every index was taken by exactly one worker, and every worker returned.
    slots.into_iter().flatten().collect()
}

/// Runs the matrix. `progress(done, total)` is called after every run (from worker threads).
pub fn run(
    spec: &MatrixSpec,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<MatrixResult, MatrixError> {
    let plan = spec.plan()?;
    // Items: link-major, then seed, then row.
    let mut items = Vec::new();
    for (li, p) in plan.iter().enumerate() {
        for si in 0..spec.seeds.len() {
            for ri in p.runs() {
                items.push((li, si, ri));
            }
        }
    }
    let threads = match spec.threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        t => t,
    };
    let one = |i: usize| -> Result<SeedMetrics, MatrixError> {
        let (li, si, ri) = items[i];
        let (p, seed) = (&plan[li], spec.seeds[si]);
        let row = p.rows[ri];
        let sc = spec.links[li].build(seed, spec)?;
        let mut ls = LoopSpec::new(sc, row.contender(), seed);
        if let Some(secs) = spec.secs {
            ls.secs = secs;
            ls.warmup = 5.0f64.min(secs / 4.0);
        }
        if let Row::Sweep(t) = row {
            ls.purple = Some(sweep_params(ls.purple_params(), t));
        }
        match closed_loop::run(&ls) {
            Ok(r) => Ok(SeedMetrics::of(&r, seed)),
            Err(e) => Err(MatrixError::NoSamples {
                scenario: p.name.clone(),
                contender: e.contender,
                seed,
                probe: e.probe,
            }),
        }
    };
    let results = parallel(items.len(), threads, &one, progress);
    let mut metrics = results.into_iter();
    let mut scenarios = Vec::new();
    for p in &plan {
        // Per seed, per row (the items' order); regroup per row.
        let mut per_row: Vec<Vec<SeedMetrics>> = vec![Vec::new(); p.rows.len()];
        for _ in &spec.seeds {
            for ri in p.runs() {
                match metrics.next() {
                    Some(m) => per_row[ri].push(m?),
                    // `parallel` returns one result per item, in the items' (this) order.
                    None => return Err(MatrixError::Empty("run result")),
                }
            }
        }
        for (ri, same) in p.same_as.iter().enumerate() {
            if let Some(j) = *same {
                per_row[ri] = per_row[j].clone();
            }
        }
        let rows: Vec<RowResult> = p
            .rows
            .iter()
            .zip(per_row)
            .map(|(r, seeds)| RowResult {
                id: r.id(),
                name: r.name(),
                target_ms: match r {
                    Row::Sweep(t) => Some(*t),
                    Row::Role(..) => None,
                },
                median: Summary::median_of(&seeds),
                worst: Summary::worst_of(&seeds),
                seeds,
            })
            .collect();
        let mut l = LinkResult {
            name: p.name.clone(),
            description: p.description.clone(),
            seconds: p.secs,
            rows,
            figures: None,
            claims: Vec::new(),
        };
        let (figures, claims) = targets(&l);
        l.figures = figures;
        l.claims = claims;
        scenarios.push(l);
    }
    let all = scenarios.iter().flat_map(|s| &s.claims);
    Ok(MatrixResult {
        seeds: spec.seeds.clone(),
        targets_ms: spec.targets_ms.clone(),
        claims_met: all.clone().filter(|c| c.pass).count(),
        claims_total: all.count(),
        scenarios,
    })
}

/// The targets on one link: three against the late oracle (needs the `purple` and
/// `oracle-late` rows) and the sweep's dominance (needs the sweep).
pub fn targets(l: &LinkResult) -> (Option<TargetFigures>, Vec<Claim>) {
    let mut claims = Vec::new();
    let mut figures = None;
    if let (Some(p), Some(o)) = (l.row(Role::Purple.id()), l.row(Role::OracleLate.id())) {
        let frac = p.median.down_mbit / o.median.down_mbit;
        let excess = p.median.rtt.p99 - o.median.rtt.p99;
        let (worst_seed, worst) = p
            .seeds
            .iter()
            .zip(&o.seeds)
            .map(|(a, b)| (a.seed, a.down_mbit / b.down_mbit))
            .fold((0, f64::INFINITY), |w, x| if x.1 < w.1 { x } else { w });
        let point = |role: Role, g: u16| {
            l.row(role.id()).map(|c| ReferencePoint {
                gain_pct: g,
                throughput_fraction: c.median.down_mbit / o.median.down_mbit,
                p99_excess_ms: c.median.rtt.p99 - o.median.rtt.p99,
            })
        };
        let censored = CENSORED_GAINS.map(|(g, _)| point(Role::OracleCensored(g), g));
        let saturated = SATURATED_GAINS.map(|(g, _)| point(Role::OracleSaturated(g), g));
        figures = Some(TargetFigures {
            throughput_fraction: frac,
            p99_excess_ms: excess,
            worst_fraction: worst,
            worst_seed,
            censored,
            saturated,
        });
        claims.push(throughput_claim(
            "seed-median",
            p.median.down_mbit,
            o.median.down_mbit,
        ));
        claims.push(p99_claim("seed-median", p.median.rtt.p99, o.median.rtt.p99));
        claims.push(Claim::new(
            "issue 16: on its worst seed purple delivers >= 0.80 x the late oracle's download \
             throughput (same seed)",
            format!("{worst:.2} (seed {worst_seed})"),
            format!(">= {TARGET_WORST_FRACTION:.2}"),
            worst >= TARGET_WORST_FRACTION,
        ));
    }
    let sweep: Vec<&RowResult> = l
        .sweep()
        .chain(l.row(Role::Purple.id()))
        .collect::<Vec<_>>();
    if l.sweep().next().is_some() {
        let judged: Vec<&RowResult> = l
            .rows
            .iter()
            .filter(|r| r.target_ms.is_none() && Role::parse(&r.id).is_ok_and(judged_by_sweep))
            .collect();
        if !judged.is_empty() {
            // `s` has at least `c`'s seed-median download throughput at no more than its p95.
            let dominates = |s: &RowResult, c: &RowResult| {
                s.median.down_mbit >= c.median.down_mbit && s.median.rtt.p95 <= c.median.rtt.p95
            };
            let beaten: Vec<&RowResult> = judged
                .iter()
                .copied()
                .filter(|c| !sweep.iter().any(|s| dominates(s, c)))
                .collect();
            // The reference: those the late oracle's own point does not dominate either (a
            // measurement one interval late does not reach their p95 at their throughput).
            let out_of_reach: Vec<&str> = l
                .row(Role::OracleLate.id())
                .map(|o| {
                    beaten
                        .iter()
                        .filter(|c| !dominates(o, c))
                        .map(|c| c.name.as_str())
                        .collect()
                })
                .unwrap_or_default();
            let reference = if out_of_reach.is_empty() {
                String::new()
            } else {
                format!(
                    " (the late oracle's own point does not dominate {} either)",
                    out_of_reach.join(", ")
                )
            };
            claims.push(Claim::new(
                "issue 16: purple's target sweep dominates every other contender (some target \
                 gives at least its seed-median download throughput at no more than its p95)",
                if beaten.is_empty() {
                    format!("all {} dominated", judged.len())
                } else {
                    format!(
                        "{} of {} dominated; not: {}{reference}",
                        judged.len() - beaten.len(),
                        judged.len(),
                        beaten
                            .iter()
                            .map(|c| c.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                },
                "every one",
                beaten.is_empty(),
            ));
        }
    }
    (figures, claims)
}

/// "purple's" and the scope of a figure ("seed-median"), if any.
fn whose(scope: &str) -> String {
    if scope.is_empty() {
        "purple's".into()
    } else {
        format!("purple's {scope}")
    }
}

/// The throughput target: `purple`'s download throughput (Mbit/s) at least
/// [`TARGET_FRACTION`] of the late oracle's; `scope` says which figure (`seed-median`, `seed 1`).
pub fn throughput_claim(scope: &str, purple: f64, late: f64) -> Claim {
    let frac = purple / late;
    Claim::new(
        format!(
            "issue 16: {} download throughput >= {TARGET_FRACTION:.2} x the one-interval-late \
             oracle's",
            whose(scope)
        ),
        format!("{frac:.2} (purple {purple:.1} Mbit/s, late oracle {late:.1})"),
        format!(">= {TARGET_FRACTION:.2}"),
        frac >= TARGET_FRACTION,
    )
}

/// The latency target: `purple`'s loaded-latency p99 at most the late oracle's +
/// [`TARGET_P99_EXCESS_MS`]; `scope` as for [`throughput_claim`].
pub fn p99_claim(scope: &str, purple: f64, late: f64) -> Claim {
    let excess = purple - late;
    Claim::new(
        format!(
            "issue 16: {} loaded-latency p99 <= the late oracle's + {TARGET_P99_EXCESS_MS} ms",
            whose(scope)
        ),
        format!("{excess:+.1} ms (purple {purple:.1} ms, late oracle {late:.1} ms)"),
        format!("<= +{TARGET_P99_EXCESS_MS:.1} ms"),
        excess <= TARGET_P99_EXCESS_MS,
    )
}

/// A reference oracle's points for the summary table: `0.78 -71 | 0.98 -46*` (`-` for a
/// gain the matrix did not run; `*` where it meets both targets).
fn reference_cell(points: &[Option<ReferencePoint>]) -> String {
    points
        .iter()
        .map(|p| match p {
            Some(p) => format!(
                "{} {:+.0}{}",
                frac(p.throughput_fraction),
                p.p99_excess_ms,
                if p.meets_both() { "*" } else { "" }
            ),
            None => "-".into(),
        })
        .collect::<Vec<_>>()
        .join(" | ")
}

/// A latency for a table: 2 decimals below 10 ms, 1 below 100, none above.
fn ms(x: f64) -> String {
    if !x.is_finite() {
        "n/a".into()
    } else if x < 10.0 {
        format!("{x:.2}")
    } else if x < 100.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.0}")
    }
}

fn frac(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.2}")
    } else {
        "n/a".into()
    }
}

impl LinkResult {
    /// The link's table: per row `median/worst` of every figure.
    pub fn table(&self) -> Table {
        let mut t = Table::new(&[
            "contender",
            "down share",
            "up share",
            "down Mbit/s",
            "RTT p50",
            "RTT p95",
            "RTT p99",
            "down p50",
            "down p95",
            "down p99",
            "up p50",
            "up p95",
            "up p99",
        ]);
        for r in &self.rows {
            let (m, w) = (&r.median, &r.worst);
            let pair = |a: String, b: String| format!("{a}/{b}");
            let mbit = |x: f64| format!("{x:.1}");
            let tails = |a: &Tail, b: &Tail| {
                vec![
                    pair(ms(a.p50), ms(b.p50)),
                    pair(ms(a.p95), ms(b.p95)),
                    pair(ms(a.p99), ms(b.p99)),
                ]
            };
            let mut row = vec![
                r.name.clone(),
                pair(frac(m.down_share), frac(w.down_share)),
                pair(frac(m.up_share), frac(w.up_share)),
                pair(mbit(m.down_mbit), mbit(w.down_mbit)),
            ];
            row.extend(tails(&m.rtt, &w.rtt));
            row.extend(tails(&m.owd_down, &w.owd_down));
            row.extend(tails(&m.owd_up, &w.owd_up));
            t.row(row);
        }
        t
    }
}

impl MatrixResult {
    /// One line per link: the targets as figures and how many of its claims hold.
    /// The saturated oracle's column appears only where the matrix ran it (on request).
    pub fn summary_table(&self) -> Table {
        let saturated = self
            .scenarios
            .iter()
            .filter_map(|s| s.figures)
            .any(|f| f.saturated.iter().any(Option::is_some));
        let mut headers = vec![
            "scenario",
            "purple / late oracle (down, median)",
            "p99 - late oracle's (ms)",
            "worst seed fraction",
            "targets met",
            "censored oracle +5/25/100%: fraction, p99 - (*: meets both)",
        ];
        if saturated {
            headers.push("saturated oracle +5/25/100%");
        }
        let mut t = Table::new(&headers);
        for s in &self.scenarios {
            let (a, b, c, d, e) = match s.figures {
                Some(f) => (
                    frac(f.throughput_fraction),
                    format!("{:+.1}", f.p99_excess_ms),
                    format!("{} (seed {})", frac(f.worst_fraction), f.worst_seed),
                    reference_cell(&f.censored),
                    reference_cell(&f.saturated),
                ),
                None => ("-".into(), "-".into(), "-".into(), "-".into(), "-".into()),
            };
            let met = s.claims.iter().filter(|c| c.pass).count();
            let mut row = vec![
                s.name.clone(),
                a,
                b,
                c,
                format!("{met}/{}", s.claims.len()),
                d,
            ];
            if saturated {
                row.push(e);
            }
            t.row(row);
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_round_trip_through_their_ids_and_unknown_ones_are_named() {
        for r in Role::ALL {
            assert_eq!(Role::parse(r.id()), Ok(r));
        }
        let e = Role::parse("oracle-early").expect_err("unknown");
        let t = e.to_string();
        assert!(
            t.contains("oracle-early") && t.contains("oracle-late"),
            "{t}"
        );
    }

    #[test]
    fn the_censored_reference_meets_both_targets_only_at_both_bounds() {
        let p = |f: f64, e: f64| ReferencePoint {
            gain_pct: 25,
            throughput_fraction: f,
            p99_excess_ms: e,
        };
        assert!(p(TARGET_FRACTION, TARGET_P99_EXCESS_MS).meets_both());
        assert!(!p(TARGET_FRACTION - 0.01, -50.0).meets_both());
        assert!(!p(1.2, TARGET_P99_EXCESS_MS + 0.1).meets_both());
        let cell = reference_cell(&[Some(p(0.47, -89.0)), None, Some(p(0.98, -46.0))]);
        assert_eq!(cell, "0.47 -89 | - | 0.98 -46*");
    }

    #[test]
    fn the_parallel_runner_keeps_the_order_whatever_the_threads() {
        let f = |i: usize| i * i;
        let want: Vec<usize> = (0..37).map(f).collect();
        for t in [1, 2, 5, 64] {
            assert_eq!(parallel(37, t, &f, &|_, _| {}), want);
        }
    }

    #[test]
    fn a_bad_spec_is_refused_naming_what_is_wrong() {
        let mut s = MatrixSpec::new(2);
        s.links = vec![MatrixLink::Named("moon".into())];
        assert!(matches!(s.runs(), Err(MatrixError::UnknownScenario(n)) if n == "moon"));
        let mut s = MatrixSpec::new(2);
        s.targets_ms = vec![5.0, -1.0];
        assert_eq!(s.runs(), Err(MatrixError::BadTarget(-1.0)));
        let mut s = MatrixSpec::new(0);
        s.secs = Some(10.0);
        assert_eq!(s.runs(), Err(MatrixError::Empty("seed")));
    }
}
