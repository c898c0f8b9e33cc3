//! Closed loop through the simulator: a variable-rate bottleneck with a deep droptail buffer
#![allow(clippy::unwrap_used, clippy::field_reassign_with_default)]
//! (the radio), CAKE in front of it shaped by the controller, CUBIC bulk flows and pings giving
//! one-way delay with a clock offset. Measures reaction to a capacity drop and recovery.

use cake::{AnyQdisc, CakeConfig};
use controller::*;
use experiments::testbed::{Dumbbell, DumbbellSpec, TcpOpts};
use qdisc::Qdisc;
use sim::{LinkRate, Ping};

struct Run {
    /// (time s, shaper rate bytes/s, capacity bytes/s, max ping RTT in the step ms)
    trace: Vec<(f64, u64, u64, f64)>,
}

fn run(c: &mut dyn Controller, cap: impl Fn(f64) -> u64, secs: u64) -> Run {
    let start_rate = mbit(50.0);
    let mut spec = DumbbellSpec::new(100_000_000, 100_000_000, Duration::from_millis(10));
    spec.servers = 3;
    spec.buffer_packets = 1000;
    spec.down_qdisc = Some(AnyQdisc::cake(CakeConfig::with_rate(start_rate), 1));
    let mut tb = Dumbbell::new(spec, 7);
    let client = tb.clients[0];
    let pings: Vec<_> = (0..3u16)
        .map(|i| {
            tb.ping(
                client,
                tb.servers[i as usize],
                100 + i,
                Duration::from_millis(100),
                Instant::from_millis(u64::from(i) * 33),
            )
        })
        .collect();
    for k in 0..4u16 {
        let s = tb.servers[usize::from(k % 3)];
        tb.tcp(
            s,
            client,
            5000 + k,
            Instant::from_millis(500),
            TcpOpts::default(),
        );
    }
    let mut seen = [0usize; 3];
    let mut last_tx = 0u64;
    let step = Duration::from_millis(50);
    let mut t = Instant::ZERO;
    let mut cur_cap = 0;
    let mut trace = Vec::new();
    while t < Instant::from_secs(secs) {
        t += step;
        let c_now = cap(t.as_secs_f64());
        if c_now != cur_cap {
            cur_cap = c_now;
            tb.sim.set_link_rate(tb.down, LinkRate::Fixed(c_now));
        }
        tb.sim.run_until(t);
        let mut max_rtt: f64 = 0.0;
        for (i, &p) in pings.iter().enumerate() {
            let Some(ping) = tb.sim.app_as::<Ping>(p) else {
                continue;
            };
            for rtt in &ping.rtts[seen[i]..] {
                // A remote clock 5 s ahead, 1 ms resolution.
                let owd_ms = (rtt.as_nanos() / 1_000_000) as i64 + 5_000;
                c.on_sample(
                    t,
                    &Sample::Owd {
                        reflector: ReflectorId(i as u16),
                        dir: Direction::Down,
                        sent: t - *rtt,
                        owd_ns: owd_ms * 1_000_000,
                    },
                );
                max_rtt = max_rtt.max(rtt.as_millis_f64());
            }
            seen[i] = ping.rtts.len();
        }
        let tx = tb.sim.link(tb.down).map_or(0, |m| m.tx_bytes);
        c.on_sample(
            t,
            &Sample::Throughput {
                dir: Direction::Down,
                bps: ((tx - last_tx) as f64 / step.as_secs_f64()) as u64,
            },
        );
        last_tx = tx;
        if let Some(q) = tb.sim.qdisc(tb.down) {
            let s = q.stats();
            c.on_sample(
                t,
                &Sample::CakeStats {
                    dir: Direction::Down,
                    backlog_bytes: s.backlog.bytes,
                    drops: s.dropped_total().packets,
                    ecn_marks: s.ecn_marks,
                },
            );
        }
        let d = c.poll(t);
        if d.changed.down {
            if let Some(q) = tb.sim.qdisc_mut(tb.down) {
                let _ = q.set_rate(Some(d.rate.down));
            }
        }
        trace.push((t.as_secs_f64(), d.rate.down, c_now, max_rtt));
    }
    Run { trace }
}

fn cfg() -> Config {
    let mut c = Config::with_range(PerDir::both(mbit(5.0)), PerDir::both(mbit(100.0)));
    c.base = PerDir::both(mbit(50.0));
    c
}

/// 100 Mbit/s, drop to 30 Mbit/s at 20 s, back to 100 Mbit/s at 40 s.
fn capacity(t: f64) -> u64 {
    if (20.0..40.0).contains(&t) {
        mbit(30.0)
    } else {
        mbit(100.0)
    }
}

/// Seconds from `from` until `pred` first holds.
fn time_until(r: &Run, from: f64, pred: impl Fn(&(f64, u64, u64, f64)) -> bool) -> Option<f64> {
    r.trace
        .iter()
        .find(|x| x.0 >= from && pred(x))
        .map(|x| x.0 - from)
}

fn check(name: &str, c: &mut dyn Controller, react_s: f64, recover_s: f64) {
    let r = run(c, capacity, 70);
    // Reaction: shaper at or below the new capacity and the radio queue drained (RTT < base+15 ms).
    let react = time_until(&r, 20.0, |x| x.1 <= mbit(30.0) && x.3 > 0.0 && x.3 < 35.0);
    // Recovery: shaper back to 80 % of the restored capacity.
    let recover = time_until(&r, 40.0, |x| x.1 >= mbit(80.0));
    let before = r
        .trace
        .iter()
        .filter(|x| (15.0..20.0).contains(&x.0))
        .map(|x| x.1)
        .max()
        .unwrap_or(0);
    eprintln!(
        "{name}: rate before drop {:.1} Mbit/s, reaction {react:?} s, recovery {recover:?} s",
        before as f64 * 8e-6
    );
    assert!(
        react.is_some_and(|s| s <= react_s),
        "{name}: reaction {react:?} > {react_s} s"
    );
    assert!(
        recover.is_some_and(|s| s <= recover_s),
        "{name}: recovery {recover:?} > {recover_s} s"
    );
}

#[test]
fn purple_reacts_to_a_capacity_drop_within_2s_and_recovers_within_15s() {
    let mut c = Engine::new(cfg(), Purple::default()).unwrap();
    check("purple", &mut c, 2.0, 15.0);
}

#[test]
fn purple_aimd_reacts_within_10s_and_climbs_additively_after_capacity_returns() {
    let mut c = Engine::new(cfg(), Aimd::default()).unwrap();
    let r = run(&mut c, capacity, 70);
    let react = time_until(&r, 20.0, |x| x.1 <= mbit(30.0) && x.3 > 0.0 && x.3 < 35.0);
    assert!(react.is_some_and(|s| s <= 10.0), "reaction {react:?}");
    // Additive increase (0.5 Mbit/s per s): 30 s after capacity returns it has climbed by
    // roughly 10-15 Mbit/s, far from the 80 Mbit/s that PURPLE regains in seconds.
    let at = |t: f64| r.trace.iter().find(|x| x.0 >= t).map_or(0, |x| x.1);
    let gained = at(69.9) as f64 - at(40.0) as f64;
    eprintln!(
        "purple-aimd: reaction {react:?} s, gained {:.1} Mbit/s in 30 s",
        gained * 8e-6
    );
    assert!(gained >= mbit(5.0) as f64, "gained {gained}");
}
