//! Safety properties every variant must hold.
#![allow(clippy::unwrap_used, clippy::field_reassign_with_default)]

use controller::*;
use proptest::prelude::*;

fn all(cfg: &Config) -> Vec<Box<dyn Controller>> {
    vec![
        Box::new(Engine::new(cfg.clone(), Aimd::default()).unwrap()),
        Box::new(Engine::new(cfg.clone(), QueueMetrics::default()).unwrap()),
        Box::new(Engine::new(cfg.clone(), CakeAutorate::default()).unwrap()),
        Box::new(Engine::new(cfg.clone(), SqmAutorate::default()).unwrap()),
        Box::new(Engine::new(cfg.clone(), Purple::default()).unwrap()),
    ]
}

fn sample_strategy() -> impl Strategy<Value = (u64, u8, Sample)> {
    let dir = prop_oneof![Just(Direction::Down), Just(Direction::Up)];
    let s = prop_oneof![
        (0u16..6, dir.clone(), any::<i64>(), 0u64..10_000_000_000)
            .prop_map(|(r, dir, owd_ns, back)| (r, dir, owd_ns, back))
            .prop_map(|(r, dir, owd_ns, back)| Sample::Owd {
                reflector: ReflectorId(r),
                dir,
                sent: Instant::from_nanos(back),
                owd_ns
            }),
        (0u16..6, any::<u64>()).prop_map(|(r, n)| Sample::Rtt {
            reflector: ReflectorId(r),
            sent: Instant::ZERO,
            rtt: Duration::from_nanos(n)
        }),
        (0u16..6).prop_map(|r| Sample::ProbeLost {
            reflector: ReflectorId(r),
            sent: Instant::ZERO
        }),
        (dir.clone(), any::<u64>()).prop_map(|(dir, b)| Sample::Throughput {
            dir,
            rate: Rate::from_bytes_per_s(b)
        }),
        (dir.clone(), any::<u64>()).prop_map(|(dir, b)| Sample::RateInForce {
            dir,
            rate: Rate::from_bytes_per_s(b)
        }),
        (dir.clone(), any::<u64>(), any::<u64>(), any::<u64>()).prop_map(|(dir, b, d, e)| {
            Sample::CakeStats {
                dir,
                backlog_bytes: b,
                drops: d,
                ecn_marks: e,
            }
        }),
        (
            dir,
            any::<u64>(),
            any::<u32>(),
            any::<u64>(),
            any::<u64>(),
            proptest::option::of(any::<u64>())
        )
            .prop_map(|(dir, b, p, d, s, c)| Sample::RadioQueue {
                dir,
                backlog_bytes: b,
                backlog_packets: p,
                drops: d,
                sojourn: Duration::from_nanos(s),
                capacity: c.map(Rate::from_bytes_per_s)
            }),
    ];
    (0u64..300_000_000, any::<u8>(), s)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn rate_always_within_min_max_under_random_samples(samples in proptest::collection::vec(sample_strategy(), 1..300)) {
        let cfg = Config::default();
        for mut c in all(&cfg) {
            let mut now = Instant::from_secs(1);
            for (dt, polls, s) in &samples {
                now += Duration::from_nanos(*dt);
                c.on_sample(now, s);
                if polls % 2 == 0 {
                    let d = c.poll(now);
                    for dir in Direction::ALL {
                        prop_assert!(d.rate[dir] >= cfg.min[dir] && d.rate[dir] <= cfg.max[dir], "{} {:?}", c.name(), d);
                    }
                    prop_assert!(c.next_wakeup() > now);
                }
            }
        }
    }
}

#[test]
fn no_signal_moves_every_variant_to_the_safe_rate_and_says_why() {
    let mut cfg = Config::default();
    cfg.safe = PerDir::new(Rate::from_mbit(7.0), Rate::from_mbit(6.0));
    for mut c in all(&cfg) {
        let t0 = Instant::from_secs(1);
        // Some signal at first, then silence.
        c.on_sample(
            t0,
            &Sample::Owd {
                reflector: ReflectorId(1),
                dir: Direction::Down,
                sent: t0,
                owd_ns: 3_000_000,
            },
        );
        let mut t = t0;
        let mut last = c.poll(t);
        while t < t0 + Duration::from_secs(4) {
            t = c.next_wakeup();
            last = c.poll(t);
        }
        assert_eq!(
            last.rate,
            PerDir::new(Rate::from_mbit(7.0), Rate::from_mbit(6.0)),
            "{}",
            c.name()
        );
        for dir in Direction::ALL {
            match last.reason[dir] {
                Reason::NoSignal { missing_for, .. } => {
                    assert!(missing_for >= Duration::from_secs(2))
                }
                r => panic!("{}: {r:?}", c.name()),
            }
        }
    }
}

/// Feeds `n` reflectors with a queueing delay `q` (ms) on top of per-reflector offsets and
/// drift, 1 ms resolution, every 100 ms, from `from` to `to` seconds; throughput = the rate.
#[allow(clippy::too_many_arguments)]
fn feed(c: &mut dyn Controller, from: u64, to: u64, q: impl Fn(u16, u64) -> Option<i64>, n: u16) {
    let mut t = Instant::from_secs(from);
    let end = Instant::from_secs(to);
    while t < end {
        for r in 0..n {
            let ms = t.as_nanos() / 1_000_000;
            let Some(qms) = q(r, ms) else { continue };
            let offset = (i64::from(r) - 2) * 3_600_000; // clocks hours apart
            let drift = (ms as f64 * 100e-6 * f64::from(r)) as i64; // up to 400 ppm
            for dir in Direction::ALL {
                let owd_ms = offset + drift + 10 + qms; // whole ms
                c.on_sample(
                    t,
                    &Sample::Owd {
                        reflector: ReflectorId(r),
                        dir,
                        sent: t,
                        owd_ns: owd_ms * 1_000_000,
                    },
                );
            }
        }
        let d = c.poll(t);
        for dir in Direction::ALL {
            c.on_sample(
                t,
                &Sample::Throughput {
                    dir,
                    rate: d.rate[dir],
                },
            );
            c.on_sample(
                t,
                &Sample::CakeStats {
                    dir,
                    backlog_bytes: 10_000,
                    drops: 0,
                    ecn_marks: 0,
                },
            );
        }
        t += Duration::from_millis(50);
    }
}

#[test]
fn clock_offset_and_drift_between_hosts_are_cancelled() {
    // Hours of offset and up to 400 ppm drift, no queueing: PURPLE must keep growing to max.
    let mut c = Engine::new(Config::default(), Purple::default()).unwrap();
    feed(&mut c, 1, 120, |_, _| Some(0), 5);
    assert_eq!(
        c.decision().rate.down,
        Config::default().max.down,
        "{:?}",
        c.decision()
    );
    for r in c.pool().reflectors() {
        let d = r.delta(Direction::Down).unwrap().1;
        assert!(
            d <= Duration::from_millis(1),
            "reflector {:?} delta {d:?}",
            r.id()
        );
    }
}

#[test]
fn dead_reflector_is_ignored_and_lying_one_rejected() {
    let mut c = Engine::new(Config::default(), Purple::default()).unwrap();
    // Reflector 0 dies at 10 s; reflector 4 lies (+200 ms) from 10 s.
    feed(
        &mut c,
        1,
        60,
        |r, ms| match r {
            0 if ms > 10_000 => None,
            4 if ms > 10_000 => Some(200),
            _ => Some(0),
        },
        5,
    );
    let now = Instant::from_secs(60);
    assert_eq!(c.pool().health(ReflectorId(0), now), Some(Health::Dead));
    assert_eq!(c.pool().health(ReflectorId(4), now), Some(Health::Bad));
    assert_eq!(
        c.decision().rate.down,
        Config::default().max.down,
        "{:?}",
        c.decision()
    );
    // All reflectors but one fail: a single healthy one still steers.
    feed(&mut c, 60, 70, |r, _| (r == 1).then_some(40), 5);
    assert!(
        c.decision().rate.down < Config::default().max.down / 2,
        "{:?}",
        c.decision()
    );
}
