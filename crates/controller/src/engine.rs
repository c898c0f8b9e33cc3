//! [`Engine`]: the signal front end (reflector pool, throughput, CAKE and radio statistics),
//! one control [`Law`] and the [`crate::safety`] rules, together a [`Controller`].

use crate::config::{Config, ConfigError};
use crate::purple::{Phase, Transition};
use crate::reflectors::{Health, Pool};
use crate::safety::{Safety, SafetyParams};
use crate::{Controller, Decision, Direction, Duration, Instant, PerDir, Reason, Sample, Signal};

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
    /// The radio's capacity estimate, bytes per second.
    pub capacity_bps: Option<u64>,
}

/// Everything a law sees for one direction at a control step. Stale inputs (older than
/// `safety.stall_after`) are `None`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DirSignals {
    /// The current shaper rate (the last decision), bytes per second: what a law's next rate
    /// builds on.
    pub current: u64,
    /// The rate the shaper runs at now, bytes per second: `current` unless the caller reported
    /// another with [`Sample::RateInForce`]. What throughput is
    /// compared with.
    pub in_force: u64,
    /// Consensus queueing delay of the reflector pool.
    pub delay: Option<Duration>,
    /// Reflectors behind `delay`.
    pub reflectors: usize,
    /// Achieved throughput, bytes per second.
    pub throughput: Option<u64>,
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
    /// Proposed rate, bytes per second (the engine clamps and rate-limits it).
    pub rate: u64,
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

#[derive(Clone, Copy, Debug, Default)]
struct Inputs {
    throughput: Option<(Instant, u64)>,
    cake: Option<(Instant, u64)>,
    cake_drops: u64,
    cake_drops_seen: u64,
    radio: Option<(Instant, RadioView)>,
    radio_drops: u64,
    radio_drops_seen: u64,
    in_force: Option<u64>,
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
}

impl<L: Law> Engine<L> {
    /// A controller with `cfg` and `law`, both validated; starts at `cfg.base`.
    pub fn new(cfg: Config, law: L) -> Result<Self, ConfigError> {
        cfg.validate()?;
        law.validate()?;
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
    /// The law's oldest phase change not yet taken ([`Law::take_transition`]); call after
    /// every [`Controller::poll`] until `None` to see them all.
    pub fn take_transition(&mut self) -> Option<Transition> {
        self.law.take_transition()
    }

    fn signals(&mut self, now: Instant, dir: Direction) -> DirSignals {
        let fresh = self.cfg.safety.stall_after;
        let ok = |t: Instant| now.saturating_duration_since(t) < fresh;
        let cons = self.pool.consensus(now, dir);
        let inp = &mut self.inputs[dir];
        let cur = self.last.rate[dir];
        let in_force = inp.in_force.unwrap_or(cur);
        let throughput = inp.throughput.filter(|x| ok(x.0)).map(|x| x.1);
        let cake_new = inp.cake_drops.saturating_sub(inp.cake_drops_seen);
        inp.cake_drops_seen = inp.cake_drops;
        let radio_new = inp.radio_drops.saturating_sub(inp.radio_drops_seen);
        inp.radio_drops_seen = inp.radio_drops;
        DirSignals {
            current: cur,
            in_force,
            delay: cons.map(|c| c.delay),
            reflectors: cons.map_or(0, |c| c.used),
            throughput,
            load: throughput.map(|t| t as f64 / in_force.max(1) as f64),
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
                pass = self.pool.health(reflector, now) == Some(Health::Good);
            }
            Sample::Rtt {
                reflector,
                sent,
                rtt,
            } => {
                self.pool.on_rtt(now, reflector, sent, rtt);
                pass = self.pool.health(reflector, now) == Some(Health::Good);
            }
            Sample::ProbeLost { reflector, .. } => self.pool.on_lost(now, reflector),
            Sample::Throughput { dir, bps } => self.inputs[dir].throughput = Some((now, bps)),
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
                capacity_bps,
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
                        capacity_bps,
                    },
                ));
            }
            Sample::RateInForce { dir, bps } => self.inputs[dir].in_force = Some(bps),
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
                Some(why) => safety.limit(now, dir, &self.cfg, cur, self.cfg.safe[dir], why, true),
                None => {
                    let st = self.law.step(now, dir, &sig, &self.cfg);
                    safety.limit(now, dir, &self.cfg, cur, st.rate, st.reason, false)
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

    fn radio(dir: Direction) -> Sample {
        Sample::RadioQueue {
            dir,
            backlog_bytes: 0,
            backlog_packets: 0,
            drops: 0,
            sojourn: Duration::ZERO,
            capacity_bps: None,
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
        e.on_sample(t, &Sample::Throughput { dir, bps: base / 2 });
        let _ = e.poll(t);
        let s = e.law().seen.expect("stepped");
        assert_eq!((s.current, s.in_force), (base, base));
        assert_eq!(s.load, Some((base / 2) as f64 / base as f64));
        // The actuator reports the shaper still at half the decided rate.
        let t = t + Duration::from_millis(50);
        for dir in Direction::ALL {
            e.on_sample(t, &radio(dir));
        }
        e.on_sample(t, &Sample::Throughput { dir, bps: base / 2 });
        e.on_sample(t, &Sample::RateInForce { dir, bps: base / 2 });
        let _ = e.poll(t);
        let s = e.law().seen.expect("stepped");
        assert_eq!((s.current, s.in_force), (base, base / 2));
        assert_eq!(s.load, Some(1.0));
    }
}
