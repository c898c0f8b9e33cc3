//! A6: shaper accuracy. CAKE's rate shaper against configured rates of 1, 10 and 100 Mbit/s
//! on a 1 Gbit/s link, with the overhead set to the link's framing (Ethernet: 38 bytes on top
//! of the IP packet); and the departures after an idle period (no token-bucket burst).

use crate::testbed::{Dumbbell, DumbbellSpec};
use crate::{Claim, Report, RunOpts, Table};
use cake::{Cake, CakeConfig};
use qdisc::packet::FrameSpec;
use qdisc::rate::mbit;
use qdisc::{Dequeue, Duration, Instant, Qdisc};
use sim::flent::{self, Role};
use sim::{AppId, RunSummary, Sim, UdpSource};

/// Bytes an Ethernet frame (as the simulator carries it: MAC header, no FCS) occupies on the
/// wire beyond its length: FCS 4 + preamble 8 + inter-frame gap 12.
const WIRE_EXTRA: u64 = 24;
/// Frame sizes of the two greedy flows (full-size and small packets).
const BIG: u32 = qdisc::FULL_FRAME;
const SMALL: u32 = 200;

/// Bytes on the wire (frames plus Ethernet framing) of `app`'s deliveries in bins [a, b).
fn wire_bytes(sim: &Sim, app: AppId, a: usize, b: usize) -> u64 {
    sim.flow(app).map_or(0, |m| {
        m.bins
            .iter()
            .skip(a)
            .take(b - a)
            .map(|x| x.bytes + WIRE_EXTRA * x.packets)
            .sum()
    })
}

/// One rate run: returns (measured wire rate in bit/s, run summary).
fn rate_run(opts: &RunOpts, rate_bit_s: u64, overhead: bool) -> (f64, RunSummary) {
    let dur = super::scaled(opts, 10.0).max(Instant::from_secs(2));
    let warm = Instant::from_secs(1);
    let mut spec = DumbbellSpec::new(8 * mbit(1000.0), 8 * mbit(1000.0), Duration::from_millis(1));
    spec.buffer_packets = 2;
    let bw = format!("{rate_bit_s}bit");
    let args: Vec<&str> = if overhead {
        vec!["bandwidth", &bw, "besteffort", "ethernet"]
    } else {
        vec!["bandwidth", &bw, "besteffort"]
    };
    spec.up_qdisc = Some(super::cake(&args, opts.seed));
    let mut d = Dumbbell::new(spec, opts.seed);
    let (c, s) = (d.clients[0], d.servers[0]);
    // Each source offers more than the shaped rate on its own.
    let offer = rate_bit_s / 8 * 2;
    let big = d.sim.add_app(
        c.node,
        5000,
        Instant::ZERO,
        Box::new(UdpSource::cbr(c.addr, s.addr, 5000, BIG, offer)),
    );
    let small = d.sim.add_app(
        c.node,
        5001,
        Instant::ZERO,
        Box::new(UdpSource::cbr(c.addr, s.addr, 5001, SMALL, offer)),
    );
    d.sim.run_until(dur);
    let w = d.sim.bin_width().as_nanos();
    let (a, b) = (
        (warm.as_nanos() / w) as usize,
        (dur.as_nanos() / w) as usize,
    );
    let bytes = wire_bytes(&d.sim, big, a, b) + wire_bytes(&d.sim, small, a, b);
    let secs = ((b - a) as u64 * w) as f64 / 1e9;
    let label = format!(
        "A6 {} Mbit/s{}",
        rate_bit_s as f64 / 1e6,
        if overhead {
            " ethernet"
        } else {
            " no overhead"
        }
    );
    let run = RunSummary::collect(
        &d.sim,
        &label,
        &[
            (big, "1514 B greedy".into()),
            (small, "200 B greedy".into()),
        ],
        &[(d.up, "up".into())],
        warm,
    )
    // Two UDP floods and no TCP: Flent's udp_flood, the 1514-byte flood as its upload.
    .with_flent(flent::nearest(&[
        ("1514 B greedy", Role::UdpUpload),
        ("200 B greedy", Role::UdpUpload),
    ]));
    (bytes as f64 * 8.0 / secs, run)
}

/// Departure times of `n` back-to-back 1514-byte packets enqueued at 1 s into CAKE at
/// `rate_bit_s`, after one packet at 0 s and an idle second.
fn after_idle(rate_bit_s: u64, n: usize, seed: u64) -> Vec<Instant> {
    let bw = format!("{rate_bit_s}bit");
    let cfg = CakeConfig::from_tc_args(&["bandwidth", &bw, "besteffort"]).unwrap_or_default();
    let mut q = Cake::new(cfg, seed);
    let mut drops = Vec::new();
    let (a, b) = ("10.0.0.1".parse().ok(), "10.0.0.2".parse().ok());
    let (Some(a), Some(b)) = (a, b) else {
        return Vec::new();
    };
    let pkt = || FrameSpec::udp(a, b, 5000, 5000).with_payload(1472).packet();
    q.enqueue(Instant::ZERO, pkt(), &mut drops);
    let _ = q.dequeue(Instant::ZERO, &mut drops);
    let t1 = Instant::from_secs(1);
    for _ in 0..n {
        q.enqueue(t1, pkt(), &mut drops);
    }
    let mut now = t1;
    let mut out = Vec::new();
    // Bounded: each iteration either dequeues or advances time to the shaper's next slot.
    for _ in 0..4 * n {
        match q.dequeue(now, &mut drops) {
            Dequeue::Packet(_) => out.push(now),
            Dequeue::NotBefore(t) => now = t.max(now),
            Dequeue::Empty => break,
        }
    }
    out
}

pub(super) fn run(opts: &RunOpts) -> Report {
    let mut table = Table::new(&[
        "configured",
        "overhead",
        "measured wire rate Mbit/s",
        "error",
        "seed",
    ]);
    let mut claims = Vec::new();
    let mut runs = Vec::new();
    let mut worst: f64 = 0.0;
    let mut errs = Vec::new();
    for r in [1.0, 10.0, 100.0] {
        let rate = 8 * mbit(r);
        let (m, run) = rate_run(opts, rate, true);
        let err = m / rate as f64 - 1.0;
        worst = worst.max(err.abs());
        errs.push(format!("{r} Mbit/s: {:+.3}%", err * 100.0));
        table.row(vec![
            format!("{r} Mbit/s"),
            "ethernet (38, mpu 84)".into(),
            format!("{:.4}", m / 1e6),
            format!("{:+.3}%", err * 100.0),
            "within 0.1%".into(),
        ]);
        runs.push(run);
    }
    let (m_no, run_no) = rate_run(opts, 8 * mbit(10.0), false);
    let err_no = m_no / (8 * mbit(10.0)) as f64 - 1.0;
    table.row(vec![
        "10 Mbit/s".into(),
        "none (frame length)".into(),
        format!("{:.4}", m_no / 1e6),
        format!("{:+.3}%", err_no * 100.0),
        "overhead must be set".into(),
    ]);
    runs.push(run_no);
    claims.push(Claim::new(
        "the shaper holds the rate within 0.1% of the configured rate when the overhead is set right",
        errs.join("; "),
        "|measured wire rate / configured - 1| <= 0.1% at 1, 10 and 100 Mbit/s",
        worst <= 0.001,
    ));
    claims.push(Claim::new(
        "without the right overhead the real wire rate exceeds the configured rate (why the overhead matters)",
        format!("no overhead at 10 Mbit/s: {:+.2}%", err_no * 100.0),
        "wire rate > configured + 1% (mixed 1514 B and 200 B frames carry 24 B framing each)",
        err_no > 0.01,
    ));
    let n = 4;
    let deps = after_idle(8 * mbit(10.0), n, opts.seed);
    let ideal_ns = 1514.0 * 8.0 / 10e6 * 1e9;
    let gaps: Vec<f64> = deps
        .windows(2)
        .map(|w| (w[1].as_nanos() - w[0].as_nanos()) as f64)
        .collect();
    let worst_gap = gaps
        .iter()
        .map(|g| (g / ideal_ns - 1.0).abs())
        .fold(0.0, f64::max);
    let min_gap = gaps.iter().copied().fold(f64::INFINITY, f64::min);
    table.row(vec![
        "10 Mbit/s after 1 s idle".into(),
        "none".into(),
        format!(
            "{} packets, gaps {:.4}..{:.4} ms (ideal {:.4})",
            deps.len(),
            min_gap / 1e6,
            gaps.iter().copied().fold(0.0, f64::max) / 1e6,
            ideal_ns / 1e6
        ),
        format!("{:.3}%", worst_gap * 100.0),
        "no burst (a 15 kB token bucket sends all 4 back to back)".into(),
    ]);
    claims.push(Claim::new(
        "no burst after idle: unlike a token bucket, the first packets after an idle period leave at the shaped rate",
        format!(
            "{} packets after 1 s idle; smallest gap {:.4} ms vs {:.4} ms ideal (worst deviation {:.3}%)",
            deps.len(),
            min_gap / 1e6,
            ideal_ns / 1e6,
            worst_gap * 100.0
        ),
        "all 4 packets leave; every gap within 1% of one 1514-byte serialisation time at 10 Mbit/s",
        deps.len() == n && worst_gap <= 0.01,
    ));
    Report {
        id: "A6".into(),
        title: "Shaper accuracy and no burst after idle".into(),
        setup: "CAKE `bandwidth R besteffort ethernet` (overhead 38 on the IP length, mpu 84) at the egress of a \
                1 Gbit/s link, R = 1, 10, 100 Mbit/s, fed by two greedy UDP flows (1514-byte and 200-byte \
                frames, each offered at 2R); the wire rate counts each delivered frame plus 24 bytes of Ethernet \
                framing (FCS, preamble, inter-frame gap), measured after 1 s. The same at 10 Mbit/s without the \
                overhead. Burst after idle: CAKE at 10 Mbit/s driven directly, one packet at 0 s, four 1514-byte \
                packets at 1 s, departure times read from the shaper."
            .into(),
        table,
        claims,
        runs,
        notes: vec![
            "The simulator's links serialise frame bytes; Ethernet's per-frame framing is added in the \
             measurement, which is what CAKE's `ethernet` keyword compensates for."
                .into(),
            "The after-idle burst is 4 packets (3.6 ms of queue at 10 Mbit/s): a longer burst crosses COBALT's \
             5 ms target, and COBALT (like the kernel's, whose rec_inv_sqrt starts at 0) drops the second \
             over-target packet at once, which would hide a departure."
                .into(),
        ],
    }
}
