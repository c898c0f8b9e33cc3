//! `purple demo cake`: a built-in scenario run through CAKE in virtual time, printed as a per-flow
//! table plus `tc -s qdisc show` output. Synthetic sources (no TCP model: that is the
//! simulator's job): responsive AIMD bulk flows that halve their rate on a drop or CE mark, an
//! unresponsive UDP flood, an EF-marked VoIP stream and a CS1 background flow, from two hosts.

use std::net::{IpAddr, Ipv4Addr};

use cake::{Cake, CakeConfig};
use qdisc::packet::FrameSpec;
use qdisc::{Dequeue, DropReason, Duration, Instant, Packet, Qdisc};
use sim::tally::FlowTally;

/// The CAKE arguments the demo uses when none are given.
pub const DEFAULT_ARGS: &[&str] = &["bandwidth", "20Mbit", "diffserv3", "triple-isolate"];

#[derive(Clone, Copy, Debug)]
enum Behaviour {
    /// Rate-based AIMD: +`incr` bit/s per second, halve on loss or CE (once per `rtt`).
    Aimd {
        rate: f64,
        incr: f64,
        rtt: Duration,
        last_cut: Instant,
    },
    /// Fixed rate, ignores feedback.
    Fixed { rate: f64 },
}

#[derive(Debug)]
struct Source {
    name: &'static str,
    host: &'static str,
    dscp: u8,
    template: Packet,
    behaviour: Behaviour,
    next: Instant,
    start: Instant,
    tally: FlowTally,
}

impl Source {
    #[allow(clippy::too_many_arguments)]
    fn new(
        name: &'static str,
        host: &'static str,
        src: [u8; 4],
        dst: [u8; 4],
        port: u16,
        dscp: u8,
        ecn: u8,
        size: usize,
        behaviour: Behaviour,
        start: Instant,
    ) -> Self {
        let (s, d) = (
            IpAddr::V4(Ipv4Addr::from(src)),
            IpAddr::V4(Ipv4Addr::from(dst)),
        );
        let template = FrameSpec::udp(s, d, port, 5001)
            .with_dscp_ecn(dscp, ecn)
            .with_payload(size.saturating_sub(42))
            .packet_padded();
        Source {
            name,
            host,
            dscp,
            template,
            behaviour,
            next: start,
            start,
            tally: FlowTally::default(),
        }
    }

    fn rate(&self) -> f64 {
        match self.behaviour {
            Behaviour::Aimd { rate, .. } | Behaviour::Fixed { rate } => rate,
        }
    }

    fn congestion(&mut self, now: Instant) {
        if let Behaviour::Aimd {
            rate,
            rtt,
            last_cut,
            ..
        } = &mut self.behaviour
        {
            if now >= *last_cut + *rtt {
                *rate = (*rate / 2.0).max(100_000.0);
                *last_cut = now;
            }
        }
    }

    fn advance(&mut self, dt: Duration) {
        if let Behaviour::Aimd { rate, incr, .. } = &mut self.behaviour {
            *rate += *incr * dt.as_secs_f64();
        }
    }
}

fn tag(idx: usize, at: Instant) -> u64 {
    (at.as_nanos() << 8) | idx as u64
}

fn untag(tag: u64) -> (usize, Instant) {
    ((tag & 0xFF) as usize, Instant::from_nanos(tag >> 8))
}

/// Runs the demo for `seconds` of virtual time with CAKE configured by `args`; returns the text
/// to print.
pub fn run(args: &[String], seconds: u64, seed: u64, json: bool) -> Result<String, String> {
    let words: Vec<&str> = if args.is_empty() {
        DEFAULT_ARGS.to_vec()
    } else {
        args.iter().map(String::as_str).collect()
    };
    let cfg = CakeConfig::from_tc_args(&words).map_err(|e| e.to_string())?;
    let mut q = Cake::new(cfg.clone(), seed);
    let rtt = Duration::from_millis(50);
    let aimd = |start_rate: f64| Behaviour::Aimd {
        rate: start_rate,
        incr: 1_000_000.0,
        rtt,
        last_cut: Instant::ZERO,
    };
    let a = [10, 0, 0, 1];
    let b = [10, 0, 0, 2];
    let server = [192, 0, 2, 10];
    let t = Instant::from_secs;
    // Full-size frames (a `u32` widens losslessly into `usize` on every target we build for).
    const FULL: usize = qdisc::FULL_FRAME as usize;
    let mut sources = vec![
        Source::new("bulk-1", "A", a, server, 1001, 0, 2, FULL, aimd(2e6), t(0)),
        Source::new("bulk-2", "A", a, server, 1002, 0, 2, FULL, aimd(2e6), t(0)),
        Source::new("bulk-3", "A", a, server, 1003, 0, 0, FULL, aimd(2e6), t(2)),
        Source::new("bulk-4", "A", a, server, 1004, 0, 0, FULL, aimd(2e6), t(2)),
        Source::new("bulk-B", "B", b, server, 2001, 0, 0, FULL, aimd(2e6), t(0)),
        Source::new(
            "flood-B",
            "B",
            b,
            server,
            2002,
            0,
            0,
            FULL,
            Behaviour::Fixed { rate: 30e6 },
            t(4),
        ),
        Source::new(
            "voip-A",
            "A",
            a,
            server,
            3001,
            46,
            0,
            214,
            Behaviour::Fixed { rate: 85_600.0 },
            t(0),
        ),
        Source::new(
            "backup-B",
            "B",
            b,
            server,
            4001,
            8,
            0,
            FULL,
            aimd(1e6),
            t(0),
        ),
    ];
    let end = Instant::from_secs(seconds);
    let mut now = Instant::ZERO;
    let mut drops = Vec::new();
    let mut next_dequeue = Instant::MAX;
    let mut last_advance = Instant::ZERO;
    while now < end {
        // Arrivals due now.
        for (i, s) in sources.iter_mut().enumerate() {
            while s.next <= now {
                let mut p = s.template.clone();
                p.meta.tag = tag(i, s.next);
                s.tally.sent(p.len());
                let at = s.next;
                let gap = f64::from(p.len()) * 8.0 / s.rate().max(1.0);
                s.next = at + Duration::from_secs_f64(gap);
                q.enqueue(at, p, &mut drops);
                next_dequeue = next_dequeue.min(at);
            }
        }
        let dt = now - last_advance;
        for s in sources.iter_mut() {
            s.advance(dt);
        }
        last_advance = now;
        // The link takes whatever CAKE releases.
        while next_dequeue <= now {
            match q.dequeue(now, &mut drops) {
                Dequeue::Packet(p) => {
                    let (i, at) = untag(p.meta.tag);
                    let s = &mut sources[i];
                    s.tally.delivered(p.len(), now - at);
                    if p.headers().ip.is_some_and(|ip| ip.ecn == 3) {
                        s.tally.marks += 1;
                        s.congestion(now);
                    }
                }
                Dequeue::NotBefore(t) => next_dequeue = t,
                Dequeue::Empty => next_dequeue = Instant::MAX,
            }
        }
        for d in drops.drain(..) {
            let (i, _) = untag(d.packet.meta.tag);
            let s = &mut sources[i];
            s.tally.drops += 1;
            if d.reason != DropReason::AckFilter {
                s.congestion(now);
            }
        }
        let next_arrival = sources.iter().map(|s| s.next).min().unwrap_or(Instant::MAX);
        now = next_arrival.min(next_dequeue).min(end);
    }

    let stats = q.cake_stats();
    if json {
        let header = cake::tc::QdiscHeader::for_config(&cfg);
        return Ok(cake::tc::stats_json(&cfg, &stats, header) + "\n");
    }
    let mut out = String::new();
    out.push_str(&format!(
        "purple demo: {seconds} s of virtual time through `cake {}` (seed {seed})\n\n",
        words.join(" ")
    ));
    out.push_str(&format!(
        "{:<9} {:<4} {:>4} {:>10} {:>10} {:>9} {:>9} {:>9} {:>7} {:>7}\n",
        "flow", "host", "dscp", "offered", "goodput", "delay", "p50", "p99", "drops", "marks"
    ));
    out.push_str(&format!(
        "{:<9} {:<4} {:>4} {:>10} {:>10} {:>9} {:>9} {:>9} {:>7} {:>7}\n",
        "", "", "", "Mbit/s", "Mbit/s", "mean ms", "ms", "ms", "", ""
    ));
    for s in &sources {
        let f = s.tally.figures(end - s.start);
        let delay = match f.delay {
            Some(d) => format!("{:>9.2} {:>9.2} {:>9.2}", d.mean, d.p50, d.p99),
            None => format!("{:>29}", "no samples"),
        };
        out.push_str(&format!(
            "{:<9} {:<4} {:>4} {:>10.2} {:>10.2} {delay} {:>7} {:>7}\n",
            s.name, s.host, s.dscp, f.offered_mbit, f.goodput_mbit, f.drops, f.marks,
        ));
    }
    out.push_str(&format!(
        "\naccounting: enqueued {} = dequeued {} + dropped {} + queued {} -> {}\n\n",
        stats.qdisc.enqueued.packets,
        stats.qdisc.dequeued.packets,
        stats.qdisc.dropped_total().packets,
        stats.qdisc.backlog.packets,
        if stats.qdisc.is_balanced() {
            "balanced"
        } else {
            "UNBALANCED"
        }
    ));
    out.push_str("$ tc -s qdisc show (purple's CAKE, same layout)\n");
    out.push_str(&cake::tc::stats_text(
        &cfg,
        &stats,
        cake::tc::QdiscHeader::for_config(&cfg),
    ));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_identical_output_and_another_seed_differs() {
        let a = run(&[], 5, 7, false).expect("default args are valid");
        let b = run(&[], 5, 7, false).expect("default args are valid");
        let c = run(&[], 5, 8, false).expect("default args are valid");
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn demo_accounts_for_every_packet_and_protects_voip() {
        let out = run(&[], 10, 1, false).expect("default args are valid");
        assert!(out.contains("-> balanced"), "{out}");
        let voip = out
            .lines()
            .find(|l| l.starts_with("voip-A"))
            .expect("voip row");
        let cols: Vec<f64> = voip
            .split_whitespace()
            .filter_map(|w| w.parse().ok())
            .collect();
        // dscp, offered, goodput, mean, p50, p99, drops, marks
        let (p99, drops) = (cols[5], cols[6]);
        assert!(p99 < 5.0, "VoIP p99 {p99} ms beside a flood");
        assert_eq!(drops, 0.0);
    }

    #[test]
    fn a_flow_that_never_started_says_no_samples_not_zero() {
        // The flood starts at 4 s: in a 2 s run it sent nothing.
        let out = run(&[], 2, 1, false).expect("default args are valid");
        let flood = out
            .lines()
            .find(|l| l.starts_with("flood-B"))
            .expect("flood row");
        assert!(flood.contains("no samples"), "{flood}");
        let voip = out
            .lines()
            .find(|l| l.starts_with("voip-A"))
            .expect("voip row");
        assert!(!voip.contains("no samples"), "{voip}");
    }

    #[test]
    fn bad_cake_arguments_are_reported_not_panicked() {
        let err = run(&["diffserv5".to_string()], 1, 1, false).expect_err("must be rejected");
        assert!(err.contains("diffserv5"), "{err}");
    }

    #[test]
    fn json_output_is_tc_json() {
        let out = run(&[], 2, 1, true).expect("default args are valid");
        let v: serde_json::Value = serde_json::from_str(&out).expect("valid JSON");
        assert_eq!(v[0]["kind"], "cake");
        assert!(v[0]["packets"].as_u64().unwrap_or(0) > 0);
    }
}
