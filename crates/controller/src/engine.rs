//! [`Engine`]: the signal front end (reflector pool, throughput, CAKE and radio statistics),
//! one control [`Law`] and the [`crate::safety`] rules, together a [`Controller`].

use crate::config::{check, Config, ConfigError};
use crate::purple::{Phase, Transition};
use crate::reflectors::{Health, Pool};
use crate::safety::{Safety, SafetyParams};
use crate::{
    Controller, Decision, Direction, Duration, Instant, PerDir, Rate, Reason, Sample, Signal,
};

/// What a law needs to run; without it the engine moves to the safe rate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Needs {
    /// Delay from enough healthy reflectors.
    Delay,
    /// The radio's queue metrics.
    RadioQueue,
    /// Either (the law can work from either signal).
    DelayOrRadio,
}

/// The radio's queue as last reported.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RadioView {
    /// Bytes queued.
    pub backlog_bytes: u64,
    /// Packets queued.
    pub backlog_packets: u32,
    /// Drops since the previous control step.
    pub new_drops: u64,
    /// Recent sojourn time.
    pub sojourn: Duration,
    /// The radio's capacity estimate.
    pub capacity: Option<Rate>,
}

/// Everything a law sees for one direction at a control step. Stale inputs (older than
/// `safety.stall_after`) are `None`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DirSignals {
    /// The current shaper rate (the last decision): what a law's next rate builds on.
    pub current: Rate,
    /// The rate the shaper runs at now: `current` unless the caller reported another with
    /// [`Sample::RateInForce`]. What throughput is compared with.
    pub in_force: Rate,
    /// Consensus queueing delay of the reflector pool.
    pub delay: Option<Duration>,
    /// Reflectors behind `delay`.
    pub reflectors: usize,
    /// Achieved throughput.
    pub throughput: Option<Rate>,
    /// `throughput / in_force`.
    pub load: Option<f64>,
    /// CAKE's backlog in bytes.
    pub cake_backlog: Option<u64>,
    /// CAKE's drops plus ECN marks since the previous step.
    pub cake_new_drops: u64,
    /// The radio's queue.
    pub radio: Option<RadioView>,
}

/// What a law proposes for one direction.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Step {
    /// Proposed rate (the engine clamps and rate-limits it).
    pub rate: Rate,
    /// Why.
    pub reason: Reason,
}

/// A control algorithm: policy only; signal processing and safety live in the [`Engine`].
pub trait Law: std::fmt::Debug {
    /// Short name.
    fn name(&self) -> &'static str;
    /// Time between control steps.
    fn interval(&self) -> Duration;
    /// The signal it cannot work without.
    fn needs(&self) -> Needs;
    /// Checks the law's own parameters.
    fn validate(&self) -> Result<(), ConfigError>;
    /// Sees every sample first (ports that keep their own filters use this). Samples of dead or
    /// bad reflectors are not passed on.
    fn on_sample(&mut self, now: Instant, sample: &Sample) {
        let _ = (now, sample);
    }
    /// Whether the law measures the delay with its own filters of the probes' samples
    /// ([`Sample::Owd`], [`Sample::Rtt`] through [`Law::on_sample`]) instead of
    /// [`DirSignals::delay`] (the ports of cake-autorate and sqm-autorate). Such a law reads the
    /// probes only: it is passed every probe sample whatever [`Config::delay_source`], and
    /// [`DelaySource::Passive`](crate::DelaySource::Passive) is refused for it. Default false.
    fn filters_probes(&self) -> bool {
        false
    }
    /// The safety rules this law runs under, given the configured ones. A law that paces its
    /// own increases (waits after a cut, bounded probes) may loosen the generic
    /// rate-of-change limits, which would otherwise throttle it twice; bounds, the stall
    /// fallback and the change interval always apply.
    fn safety(&self, configured: SafetyParams) -> SafetyParams {
        configured
    }
    /// One control step for `dir`.
    fn step(&mut self, now: Instant, dir: Direction, sig: &DirSignals, cfg: &Config) -> Step;
    /// The phase `dir` is in, for a law that has phases (PURPLE); `None` for the others.
    fn phase(&self, dir: Direction) -> Option<Phase> {
        let _ = dir;
        None
    }
    /// The oldest phase change not yet taken, for a law that has phases (PURPLE). The
    /// [`Engine`] takes them after every step ([`Engine::take_transition`]).
    fn take_transition(&mut self) -> Option<Transition> {
        None
    }
}

/// A boxed law is a law (the daemon and the simulator choose theirs at run time). Every method
/// is forwarded, the provided ones too (a default here would silently replace the law's own).
impl<L: Law + ?Sized> Law for Box<L> {
    fn name(&self) -> &'static str {
        (**self).name()
    }
    fn interval(&self) -> Duration {
        (**self).interval()
    }
    fn needs(&self) -> Needs {
        (**self).needs()
    }
    fn validate(&self) -> Result<(), ConfigError> {
        (**self).validate()
    }
    fn on_sample(&mut self, now: Instant, sample: &Sample) {
        (**self).on_sample(now, sample)
    }
    fn filters_probes(&self) -> bool {
        (**self).filters_probes()
    }
    fn safety(&self, configured: SafetyParams) -> SafetyParams {
        (**self).safety(configured)
    }
    fn step(&mut self, now: Instant, dir: Direction, sig: &DirSignals, cfg: &Config) -> Step {
        (**self).step(now, dir, sig, cfg)
    }
    fn phase(&self, dir: Direction) -> Option<Phase> {
        (**self).phase(dir)
    }
    fn take_transition(&mut self) -> Option<Transition> {
        (**self).take_transition()
    }
}

/// Where a direction's delay signal came from at a control step.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum DelayInForce {
    /// No delay signal.
    #[default]
    None,
    /// The probes alone.
    Probes,
    /// The passive estimate alone.
    Passive,
    /// Both are fresh: the passive estimate is used, the probes stand by.
    Both,
    /// No probe signal and no TCP sample, but the passive feed runs and the link is nearly
    /// idle (carries less than [`PASSIVE_QUIET_LOAD`] of the rate): taken as no queue.
    Quiet,
}

impl DelayInForce {
    /// The name in logs.
    pub fn name(self) -> &'static str {
        match self {
            DelayInForce::None => "none",
            DelayInForce::Probes => "probes",
            DelayInForce::Passive => "passive",
            DelayInForce::Both => "both",
            DelayInForce::Quiet => "quiet",
        }
    }
}

/// With the passive feed running and no TCP sample, a link carrying less than this share of
/// the rate in force is taken to have no queue (it cannot be building one of ours), so that a
/// passive-only controller does not fall to its safe rate whenever the users are idle.
pub const PASSIVE_QUIET_LOAD: f64 = 0.2;

#[derive(Clone, Copy, Debug, Default)]
struct Inputs {
    throughput: Option<(Instant, Rate)>,
    cake: Option<(Instant, u64)>,
    cake_drops: u64,
    cake_drops_seen: u64,
    radio: Option<(Instant, RadioView)>,
    radio_drops: u64,
    radio_drops_seen: u64,
    in_force: Option<Rate>,
    /// The last passive reading (even an empty one), and the last one with an estimate.
    passive_read: Option<Instant>,
    passive: Option<(Instant, Duration)>,
}

/// A [`Controller`] made of the signal front end, the law `L` and the safety rules.
#[derive(Debug)]
pub struct Engine<L: Law> {
    cfg: Config,
    law: L,
    pool: Pool,
    safety: Option<Safety>,
    inputs: PerDir<Inputs>,
    last: Decision,
    next: Instant,
    latest: Instant,
    delay_in_force: PerDir<DelayInForce>,
}

impl<L: Law> Engine<L> {
    /// A controller with `cfg` and `law`, both validated; starts at `cfg.base`.
    pub fn new(cfg: Config, law: L) -> Result<Self, ConfigError> {
        cfg.validate()?;
        law.validate()?;
        check(
            !(law.filters_probes() && cfg.delay_source == crate::DelaySource::Passive),
            "delay_source",
            "passive",
            crate::laws::passive_refusal(),
        )?;
        let pool = Pool::new(cfg.reflectors, cfg.baseline);
        Ok(Engine {
            last: Decision {
                rate: cfg.base,
                reason: PerDir::both(Reason::Start),
                changed: PerDir::both(true),
            },
            cfg,
            law,
            pool,
            safety: None,
            inputs: PerDir::default(),
            next: Instant::ZERO,
            latest: Instant::ZERO,
            delay_in_force: PerDir::default(),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.cfg
    }
    /// The law.
    pub fn law(&self) -> &L {
        &self.law
    }
    /// The reflector pool (health, baselines, replacement list).
    pub fn pool(&self) -> &Pool {
        &self.pool
    }
    /// The reflector pool, mutable (to remove a replaced reflector).
    pub fn pool_mut(&mut self) -> &mut Pool {
        &mut self.pool
    }
    /// The last decision.
    pub fn decision(&self) -> &Decision {
        &self.last
    }
    /// Where `dir`'s delay signal came from at the last control step.
    pub fn delay_in_force(&self, dir: Direction) -> DelayInForce {
        self.delay_in_force[dir]
    }
    /// The law's oldest phase change not yet taken ([`Law::take_transition`]); call after
    /// every [`Controller::poll`] until `None` to see them all.
    pub fn take_transition(&mut self) -> Option<Transition> {
        self.law.take_transition()
    }

    /// Whether `dir` has a passive estimate younger than `reflectors.fresh_for` that the
    /// delay source uses.
    fn passive_fresh(&self, now: Instant, dir: Direction) -> bool {
        self.cfg.delay_source.passive()
            && self.inputs[dir]
                .passive
                .is_some_and(|x| now.saturating_duration_since(x.0) < self.cfg.reflectors.fresh_for)
    }

    fn signals(&mut self, now: Instant, dir: Direction) -> DirSignals {
        let fresh = self.cfg.safety.stall_after;
        let ok = |t: Instant| now.saturating_duration_since(t) < fresh;
        let src = self.cfg.delay_source;
        let cons = self.pool.consensus(now, dir).filter(|_| src.probes());
        let young = |t: Instant| now.saturating_duration_since(t) < self.cfg.reflectors.fresh_for;
        let inp = &mut self.inputs[dir];
        let cur = self.last.rate[dir];
        let in_force = inp.in_force.unwrap_or(cur);
        let throughput = inp.throughput.filter(|x| ok(x.0)).map(|x| x.1);
        let load = throughput.map(|t| t.bytes_per_s_f64() / in_force.bytes_per_s().max(1) as f64);
        let passive = inp
            .passive
            .filter(|x| src.passive() && young(x.0))
            .map(|x| x.1);
        let probe = cons.map(|c| c.delay);
        // `both`: a fresh passive estimate wins (the users' own packets' queue; the probes'
        // samples are not passed to the law meanwhile, see `on_sample`).
        let (delay, why) = match (probe, passive) {
            (Some(_), Some(b)) => (Some(b), DelayInForce::Both),
            (Some(a), None) => (Some(a), DelayInForce::Probes),
            (None, Some(b)) => (Some(b), DelayInForce::Passive),
            (None, None) => {
                let feed = src.passive() && inp.passive_read.is_some_and(young);
                if feed && load.is_some_and(|l| l < PASSIVE_QUIET_LOAD) {
                    (Some(Duration::ZERO), DelayInForce::Quiet)
                } else {
                    (None, DelayInForce::None)
                }
            }
        };
        self.delay_in_force[dir] = why;
        let cake_new = inp.cake_drops.saturating_sub(inp.cake_drops_seen);
        inp.cake_drops_seen = inp.cake_drops;
        let radio_new = inp.radio_drops.saturating_sub(inp.radio_drops_seen);
        inp.radio_drops_seen = inp.radio_drops;
        DirSignals {
            current: cur,
            in_force,
            delay,
            reflectors: cons.map_or(0, |c| c.used),
            throughput,
            load,
            cake_backlog: inp.cake.filter(|x| ok(x.0)).map(|x| x.1),
            cake_new_drops: cake_new,
            radio: inp.radio.filter(|x| ok(x.0)).map(|(_, r)| RadioView {
                new_drops: radio_new,
                ..r
            }),
        }
    }
}

impl<L: Law> Controller for Engine<L> {
    fn on_sample(&mut self, now: Instant, sample: &Sample) {
        let now = now.max(self.latest);
        self.latest = now;
        if self.safety.is_none() {
            self.safety = Some(Safety::new(self.law.safety(self.cfg.safety), now));
            self.next = now;
        }
        let mut pass = true;
        match *sample {
            Sample::Owd {
                reflector,
                dir,
                sent,
                owd_ns,
            } => {
                self.pool.on_owd(now, reflector, dir, sent, owd_ns);
                pass = self.cfg.delay_source.probes()
                    && (self.law.filters_probes() || !self.passive_fresh(now, dir))
                    && self.pool.health(reflector, now) == Some(Health::Good);
            }
            Sample::Rtt {
                reflector,
                sent,
                rtt,
            } => {
                self.pool.on_rtt(now, reflector, sent, rtt);
                pass = self.cfg.delay_source.probes()
                    && (self.law.filters_probes()
                        || !Direction::ALL.iter().all(|&d| self.passive_fresh(now, d)))
                    && self.pool.health(reflector, now) == Some(Health::Good);
            }
            Sample::ProbeLost { reflector, .. } => self.pool.on_lost(now, reflector),
            Sample::Throughput { dir, rate } => self.inputs[dir].throughput = Some((now, rate)),
            Sample::CakeStats {
                dir,
                backlog_bytes,
                drops,
                ecn_marks,
            } => {
                let inp = &mut self.inputs[dir];
                let total = drops.saturating_add(ecn_marks);
                if inp.cake.is_none() || total < inp.cake_drops {
                    // First report, or the counters were reset: start counting from here.
                    inp.cake_drops_seen = total;
                }
                inp.cake_drops = total;
                inp.cake = Some((now, backlog_bytes));
            }
            Sample::RadioQueue {
                dir,
                backlog_bytes,
                backlog_packets,
                drops,
                sojourn,
                capacity,
            } => {
                let inp = &mut self.inputs[dir];
                if inp.radio.is_none() || drops < inp.radio_drops {
                    inp.radio_drops_seen = drops;
                }
                inp.radio_drops = drops;
                inp.radio = Some((
                    now,
                    RadioView {
                        backlog_bytes,
                        backlog_packets,
                        new_drops: 0,
                        sojourn,
                        capacity,
                    },
                ));
            }
            Sample::RateInForce { dir, rate } => self.inputs[dir].in_force = Some(rate),
            Sample::Passive { dir, queue, .. } => {
                let inp = &mut self.inputs[dir];
                inp.passive_read = Some(now);
                if let Some(q) = queue {
                    inp.passive = Some((now, q));
                }
            }
        }
        if pass {
            self.law.on_sample(now, sample);
        }
    }

    fn poll(&mut self, now: Instant) -> Decision {
        let now = now.max(self.latest);
        self.latest = now;
        if self.safety.is_none() {
            self.safety = Some(Safety::new(self.law.safety(self.cfg.safety), now));
            self.next = now;
        }
        if now < self.next {
            return Decision {
                changed: PerDir::both(false),
                ..self.last
            };
        }
        // Steps keep to a grid (the first step plus whole intervals) rather than drifting by
        // each wake-up's lateness, so a shell's steps stay in phase with the probe schedule and
        // share its wake-ups; after a stall the steps missed are skipped, not made up.
        let iv = self.law.interval().as_nanos().max(1);
        let behind = now.saturating_duration_since(self.next).as_nanos();
        // The grid point this step belongs to: the safety rules space the rate's changes by
        // it, not by the wake-up, so a late wake-up followed by an on-time one is still one
        // interval apart (a shell's wake-ups jitter by a fraction of a millisecond; the
        // simulator's do not, and a change spacing equal to the law's interval then held back
        // one change in ten in the daemon and none in the simulator).
        let slot = self.next + Duration::from_nanos((behind / iv).saturating_mul(iv));
        self.next += Duration::from_nanos((behind / iv + 1).saturating_mul(iv));
        self.pool.review(now);
        let mut d = Decision {
            changed: PerDir::both(false),
            ..self.last
        };
        for dir in Direction::ALL {
            let sig = self.signals(now, dir);
            let (signal, usable) = match self.law.needs() {
                Needs::Delay => (Signal::Delay, sig.delay.is_some()),
                Needs::RadioQueue => (Signal::RadioQueue, sig.radio.is_some()),
                Needs::DelayOrRadio => (Signal::Delay, sig.delay.is_some() || sig.radio.is_some()),
            };
            let cur = self.last.rate[dir];
            let Some(safety) = self.safety.as_mut() else {
                continue;
            };
            let (rate, why) = match safety.stall(now, dir, signal, usable) {
                Some(why) => safety.limit(slot, dir, &self.cfg, cur, self.cfg.safe[dir], why, true),
                None => {
                    let st = self.law.step(now, dir, &sig, &self.cfg);
                    safety.limit(slot, dir, &self.cfg, cur, st.rate, st.reason, false)
                }
            };
            d.rate[dir] = rate;
            d.reason[dir] = why;
            d.changed[dir] = rate != cur;
        }
        self.last = d;
        d
    }

    fn next_wakeup(&self) -> Instant {
        self.next
    }

    fn name(&self) -> &'static str {
        self.law.name()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DelaySource, ReflectorId};

    /// A law that holds its rate and remembers what it was shown.
    #[derive(Debug, Default)]
    struct Spy {
        seen: Option<DirSignals>,
    }

    impl Law for Spy {
        fn name(&self) -> &'static str {
            "spy"
        }
        fn interval(&self) -> Duration {
            Duration::from_millis(50)
        }
        fn needs(&self) -> Needs {
            Needs::RadioQueue
        }
        fn validate(&self) -> Result<(), ConfigError> {
            Ok(())
        }
        fn step(&mut self, _: Instant, dir: Direction, sig: &DirSignals, _: &Config) -> Step {
            if dir == Direction::Down {
                self.seen = Some(*sig);
            }
            Step {
                rate: sig.current,
                reason: Reason::Hold,
            }
        }
    }

    /// A law that loosens the safety rules and names itself.
    #[derive(Debug)]
    struct Loose;

    impl Law for Loose {
        fn name(&self) -> &'static str {
            "loose"
        }
        fn interval(&self) -> Duration {
            Duration::from_millis(70)
        }
        fn needs(&self) -> Needs {
            Needs::Delay
        }
        fn validate(&self) -> Result<(), ConfigError> {
            Ok(())
        }
        fn safety(&self, mut c: SafetyParams) -> SafetyParams {
            c.max_increase_per_s = 42.0;
            c
        }
        fn step(&mut self, _: Instant, _: Direction, sig: &DirSignals, _: &Config) -> Step {
            Step {
                rate: sig.current,
                reason: Reason::Hold,
            }
        }
    }

    #[test]
    fn a_boxed_law_forwards_every_method_including_the_provided_ones() {
        let b: Box<dyn Law> = Box::new(Loose);
        let d = SafetyParams::default();
        assert_eq!(b.safety(d), Loose.safety(d));
        assert_ne!(b.safety(d), d, "not the trait's default");
        assert_eq!(
            (b.name(), b.interval()),
            ("loose", Duration::from_millis(70))
        );
        assert_eq!(b.needs(), Needs::Delay);
    }

    #[test]
    fn steps_keep_to_their_grid_through_late_wake_ups_and_stalls() {
        let mut e = Engine::new(Config::default(), Spy::default()).expect("valid");
        let ms = |m: u64| Instant::from_nanos(m * 1_000_000);
        let _ = e.poll(ms(1000));
        assert_eq!(e.next_wakeup(), ms(1050));
        // Two late wake-ups: the next deadline stays on the grid, not 50 ms after each.
        let _ = e.poll(ms(1053));
        assert_eq!(e.next_wakeup(), ms(1100));
        let _ = e.poll(ms(1101));
        assert_eq!(e.next_wakeup(), ms(1150));
        // A stall of several intervals: the missed steps are skipped, the grid kept.
        let _ = e.poll(ms(1337));
        assert_eq!(e.next_wakeup(), ms(1350));
        // An early call does not step.
        let before = e.next_wakeup();
        let _ = e.poll(ms(1340));
        assert_eq!(e.next_wakeup(), before);
    }

    /// A law that asks for a different rate at every step.
    #[derive(Debug, Default)]
    struct Restless {
        steps: u64,
    }

    impl Law for Restless {
        fn name(&self) -> &'static str {
            "restless"
        }
        fn interval(&self) -> Duration {
            Duration::from_millis(50)
        }
        fn needs(&self) -> Needs {
            Needs::RadioQueue
        }
        fn validate(&self) -> Result<(), ConfigError> {
            Ok(())
        }
        fn safety(&self, c: SafetyParams) -> SafetyParams {
            SafetyParams {
                hold_after_decrease: Duration::ZERO,
                max_increase_per_s: 100.0,
                ..c
            }
        }
        fn step(&mut self, _: Instant, dir: Direction, sig: &DirSignals, _: &Config) -> Step {
            if dir == Direction::Down {
                self.steps += 1;
            }
            let k = if self.steps.is_multiple_of(2) {
                0.9
            } else {
                1.0 / 0.9
            };
            Step {
                rate: Rate::from_bytes_per_s_f64(sig.current.bytes_per_s_f64() * k),
                reason: Reason::Hold,
            }
        }
    }

    #[test]
    fn a_late_wake_up_does_not_hold_back_the_next_steps_change() {
        // The default change spacing (50 ms) equals the law's interval: steps on the grid are
        // one interval apart even when a wake-up comes late and the next one on time.
        let cfg = Config::default();
        assert_eq!(cfg.safety.min_change_interval, Duration::from_millis(50));
        let mut e = Engine::new(cfg, Restless::default()).expect("valid");
        let us = |u: u64| Instant::from_nanos(u * 1_000);
        let mut held = 0;
        for k in 0..40u64 {
            // Every other wake-up 0.6 ms late, as a shell's poll timeouts make them.
            let t = us(1_000_000 + k * 50_000 + if k % 2 == 1 { 600 } else { 0 });
            for dir in Direction::ALL {
                e.on_sample(t, &radio(dir));
            }
            let d = e.poll(t);
            held += usize::from(d.reason[Direction::Down] == Reason::RateLimited);
            assert!(k == 0 || d.changed[Direction::Down], "step {k}: {d:?}");
        }
        assert_eq!(held, 0);
    }

    fn radio(dir: Direction) -> Sample {
        Sample::RadioQueue {
            dir,
            backlog_bytes: 0,
            backlog_packets: 0,
            drops: 0,
            sojourn: Duration::ZERO,
            capacity: None,
        }
    }

    #[test]
    fn load_is_delivery_over_the_rate_in_force_once_one_is_reported() {
        let cfg = Config::default();
        let base = cfg.base[Direction::Down];
        let mut e = Engine::new(cfg, Spy::default()).expect("valid");
        let t = Instant::from_secs(1);
        for dir in Direction::ALL {
            e.on_sample(t, &radio(dir));
        }
        let dir = Direction::Down;
        e.on_sample(
            t,
            &Sample::Throughput {
                dir,
                rate: base / 2,
            },
        );
        let _ = e.poll(t);
        let s = e.law().seen.expect("stepped");
        assert_eq!((s.current, s.in_force), (base, base));
        assert_eq!(
            s.load,
            Some((base / 2).bytes_per_s_f64() / base.bytes_per_s_f64())
        );
        // The actuator reports the shaper still at half the decided rate.
        let t = t + Duration::from_millis(50);
        for dir in Direction::ALL {
            e.on_sample(t, &radio(dir));
        }
        e.on_sample(
            t,
            &Sample::Throughput {
                dir,
                rate: base / 2,
            },
        );
        e.on_sample(
            t,
            &Sample::RateInForce {
                dir,
                rate: base / 2,
            },
        );
        let _ = e.poll(t);
        let s = e.law().seen.expect("stepped");
        assert_eq!((s.current, s.in_force), (base, base / 2));
        assert_eq!(s.load, Some(1.0));
    }

    fn passive(dir: Direction, ms: Option<u64>) -> Sample {
        Sample::Passive {
            dir,
            queue: ms.map(Duration::from_millis),
            flows: 3,
        }
    }

    /// One control step at `t` after a probe delay of `probe_ms` (one-way, both directions,
    /// from reflector 1), a passive reading and a throughput; returns what the law saw for the
    /// download and where its delay came from.
    fn step_with(
        e: &mut Engine<Spy>,
        t: Instant,
        probe_ms: Option<i64>,
        passive_ms: Option<Option<u64>>,
        thr: Rate,
    ) -> (DirSignals, DelayInForce) {
        for dir in Direction::ALL {
            e.on_sample(t, &radio(dir));
            if let Some(p) = probe_ms {
                let owd_ns = 1_000_000_000 + p * 1_000_000;
                let sent = t - Duration::from_millis(5);
                let reflector = ReflectorId(1);
                e.on_sample(
                    t,
                    &Sample::Owd {
                        reflector,
                        dir,
                        sent,
                        owd_ns,
                    },
                );
            }
            if let Some(q) = passive_ms {
                e.on_sample(t, &passive(dir, q));
            }
            e.on_sample(t, &Sample::Throughput { dir, rate: thr });
        }
        let _ = e.poll(t);
        (
            e.law().seen.expect("stepped"),
            e.delay_in_force(Direction::Down),
        )
    }

    fn engine(src: DelaySource) -> Engine<Spy> {
        let cfg = Config {
            delay_source: src,
            ..Config::default()
        };
        Engine::new(cfg, Spy::default()).expect("valid")
    }

    #[test]
    fn both_prefers_a_fresh_passive_estimate_and_falls_back_to_the_probes() {
        let mut e = engine(DelaySource::Both);
        let busy = Config::default().base.down;
        let ms = Duration::from_millis;
        // The baseline: probes at 0 ms of queue.
        let t = Instant::from_secs(1);
        let _ = step_with(&mut e, t, Some(0), None, busy);
        let t = t + ms(50);
        let (s, why) = step_with(&mut e, t, Some(0), Some(Some(12)), busy);
        assert_eq!((s.delay, why), (Some(ms(12)), DelayInForce::Both));
        // The passive estimate is the users' own packets' queue: it is used even below the
        // probes' (a probe path with a queue of its own, a lying reflector).
        let t = t + ms(50);
        let (s, why) = step_with(&mut e, t, Some(20), Some(Some(2)), busy);
        assert_eq!((s.delay, why), (Some(ms(2)), DelayInForce::Both));
        // The reflectors fall silent (ICMP blocked): the passive estimate carries on.
        let t = t + ms(1100);
        let (s, why) = step_with(&mut e, t, None, Some(Some(7)), busy);
        assert_eq!((s.delay, why), (Some(ms(7)), DelayInForce::Passive));
        // And without any passive feed it is the probes alone, as before.
        let mut e = engine(DelaySource::Both);
        let t = Instant::from_secs(1);
        let _ = step_with(&mut e, t, Some(0), None, busy);
        let (s, why) = step_with(&mut e, t + ms(50), Some(3), None, busy);
        // (The pool smooths each reflector's delay: half of the 3 ms step so far.)
        assert_eq!(
            (s.delay, why),
            (Some(Duration::from_micros(1500)), DelayInForce::Probes)
        );
    }

    #[test]
    fn each_source_alone_ignores_the_other() {
        let busy = Config::default().base.down;
        let ms = Duration::from_millis;
        let mut e = engine(DelaySource::Probes);
        let t = Instant::from_secs(1);
        let _ = step_with(&mut e, t, Some(0), Some(Some(30)), busy);
        let (s, why) = step_with(&mut e, t + ms(50), Some(2), Some(Some(30)), busy);
        assert_eq!((s.delay, why), (Some(ms(1)), DelayInForce::Probes));
        let mut e = engine(DelaySource::Passive);
        let _ = step_with(&mut e, t, Some(0), Some(Some(4)), busy);
        let (s, why) = step_with(&mut e, t + ms(50), Some(20), Some(Some(4)), busy);
        assert_eq!((s.delay, why), (Some(ms(4)), DelayInForce::Passive));
        assert_eq!(s.reflectors, 0, "probes do not count");
    }

    #[test]
    fn an_empty_passive_reading_is_no_queue_only_on_a_nearly_idle_link() {
        let base = Config::default().base.down;
        let ms = Duration::from_millis;
        let mut e = engine(DelaySource::Passive);
        let t = Instant::from_secs(1);
        let (s, why) = step_with(&mut e, t, None, Some(None), base / 100);
        assert_eq!((s.delay, why), (Some(Duration::ZERO), DelayInForce::Quiet));
        // Loaded and still no TCP sample (QUIC, say): no signal; the stall rule then applies.
        let (s, why) = step_with(&mut e, t + ms(50), None, Some(None), base);
        assert_eq!((s.delay, why), (None, DelayInForce::None));
        // No passive feed at all: no signal either, however idle.
        let mut e = engine(DelaySource::Passive);
        let (s, _) = step_with(&mut e, t, None, None, Rate::ZERO);
        assert_eq!(s.delay, None);
    }

    /// A law with its own probe filters that counts the probe samples it is given.
    #[derive(Debug, Default)]
    struct Counter {
        own: bool,
        probe_samples: usize,
    }

    impl Law for Counter {
        fn name(&self) -> &'static str {
            "counter"
        }
        fn interval(&self) -> Duration {
            Duration::from_millis(50)
        }
        fn needs(&self) -> Needs {
            Needs::Delay
        }
        fn validate(&self) -> Result<(), ConfigError> {
            Ok(())
        }
        fn on_sample(&mut self, _: Instant, s: &Sample) {
            if matches!(s, Sample::Owd { .. } | Sample::Rtt { .. }) {
                self.probe_samples += 1;
            }
        }
        fn filters_probes(&self) -> bool {
            self.own
        }
        fn step(&mut self, _: Instant, _: Direction, sig: &DirSignals, _: &Config) -> Step {
            Step {
                rate: sig.current,
                reason: Reason::Hold,
            }
        }
    }

    #[test]
    fn laws_with_their_own_probe_filters_keep_the_probes_and_refuse_passive_alone() {
        let cake_autorate = crate::CakeAutorate::default();
        assert!(cake_autorate.filters_probes() && crate::SqmAutorate::default().filters_probes());
        let cfg = Config {
            delay_source: DelaySource::Passive,
            ..Config::default()
        };
        let err = Engine::new(cfg, cake_autorate).unwrap_err();
        assert_eq!(err.option, "delay_source");
        assert_eq!(err.accepted, crate::laws::passive_refusal());
        assert!(err.accepted.contains("cake-autorate"), "{err}");
        // With a fresh passive estimate under `both`, a law with its own filters still gets
        // every probe sample; one reading the engine's delay does not (the passive estimate is
        // in force).
        for own in [true, false] {
            let law = Counter {
                own,
                probe_samples: 0,
            };
            let mut e = Engine::new(Config::default(), law).expect("valid");
            let t = Instant::from_secs(1);
            for dir in Direction::ALL {
                e.on_sample(t, &passive(dir, Some(5)));
                e.on_sample(
                    t,
                    &Sample::Owd {
                        reflector: ReflectorId(1),
                        dir,
                        sent: t - Duration::from_millis(5),
                        owd_ns: 5_000_000,
                    },
                );
            }
            assert_eq!(e.law().probe_samples, if own { 2 } else { 0 }, "own {own}");
        }
    }
}
