//! B2: RRUL (4 TCP flows each way on CS0/CS1/CS5/EF, ICMP and per-DSCP latency probes) and
//! RRUL-BE (the same, all CS0), compared with the seed's figures and the kernel measurements
//! of evaluation.md.

use super::common::*;
use crate::testbed::TcpOpts;
use crate::{Claim, Report, RunOpts, Table};
use sim::{FlentLabels, FlentTest};
use std::collections::HashMap;

/// One run's figures.
#[derive(Clone, Debug, Default)]
struct Fig {
    down: f64,
    up: f64,
    icmp: Induced,
    /// Steady peak induced latency of the BE / BK / EF probes (ms).
    udp_peak: [f64; 3],
    /// Download share of each RRUL flow (CS0, CS1, CS5, EF).
    down_share: [f64; 4],
    /// Upload share of each RRUL flow.
    up_share: [f64; 4],
}

/// Kernel-measured figures (evaluation.md, flent rrul 30 s on Linux 6.1): down/up, ICMP
/// induced mean and max, UDP peak BE/BK/EF; and the wiki's peak.
fn seed_row(
    c: &str,
) -> (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
) {
    match c {
        "CAKE" => (
            "17.5-18.1 / 2.4",
            "3.7-4.6",
            "12-22",
            "13-16 / 76-83 / 20-22",
            "CS0 13, EF 22, CS1 70",
        ),
        "CAKE-Lite" => (
            "16.3-17.6 / 2.3",
            "2.2-3.1",
            "10-17",
            "10-11 / 11-13 / 10-14",
            "8",
        ),
        "HTB+FQ-CoDel" => (
            "15.8-17.3 / 2.3-2.5",
            "2.0-4.1",
            "9-21",
            "13-16 / 13-15 / 10-22",
            "33",
        ),
        "HTB+SFQ" => (
            "18.4-19.0 / 1.9-2.5",
            "18-20",
            "27-37",
            "26-40 / 27-41 / 27-40",
            "40",
        ),
        "HTB+SFB" => (
            "5.0-7.6 / 1.9-2.7",
            "46-55",
            "76-94",
            "84-92 / 80-120 / 86-128",
            "200",
        ),
        "HTB+CoDel" => ("15.1-16.3 / 2.0-2.3", "35-39", "68-126", "62-135", "90"),
        "HTB+PIE" => ("13.6-15.4 / 1.5-1.7", "37-46", "90-193", "128-201", ">170"),
        "HTB+pfifo 1000" => (
            "19.0-19.9 / 1.5-1.8",
            "513-743",
            "693-1202",
            "~700-1200",
            "-",
        ),
        _ => ("-", "-", "-", "-", "-"),
    }
}

/// Kernel-measured ICMP induced mean range (ms), for the rough-size claims.
fn kernel_icmp_mean(c: &str) -> Option<(f64, f64)> {
    Some(match c {
        "CAKE" => (3.7, 4.6),
        "CAKE-Lite" => (2.2, 3.1),
        "HTB+FQ-CoDel" => (2.0, 4.1),
        "HTB+SFQ" => (18.0, 20.0),
        "HTB+SFB" => (46.0, 55.0),
        "HTB+CoDel" => (35.0, 39.0),
        "HTB+PIE" => (37.0, 46.0),
        "HTB+pfifo 1000" => (513.0, 743.0),
        _ => return None,
    })
}

fn run_one(
    c: &Contender,
    be: bool,
    dur: f64,
    warm: f64,
    opts: &RunOpts,
) -> Result<(Fig, sim::RunSummary), sim::ScenarioError> {
    let mut net = Net::new(c, 1, opts.seed)?;
    let end = at(dur);
    let icmp = net.ping("icmp", 0, 0, PROBE, at(0.0), end);
    let probes: Vec<_> = [(0u8, "udp BE"), (8, "udp BK"), (46, "udp EF")]
        .iter()
        .map(|&(d, n)| net.ping(n, 0, if be { 0 } else { d }, PROBE, at(0.0), end))
        .collect();
    let mut downs = Vec::new();
    let mut ups = Vec::new();
    for (dscp, name) in RRUL_DSCPS {
        let o = TcpOpts {
            dscp: if be { 0 } else { dscp },
            ..TcpOpts::default()
        };
        downs.push(net.tcp(&format!("down {name}"), false, 0, at(0.0), None, o));
        ups.push(net.tcp(&format!("up {name}"), true, 0, at(0.0), None, o));
    }
    net.d.sim.run_until(end);
    let base = net.base_rtt_ms();
    let skip = (warm / PROBE.as_nanos() as f64 * 1e9) as usize;
    let (w0, w1) = (at(warm), end);
    let dg: Vec<f64> = downs.iter().map(|f| net.mbit(f.tx, w0, w1)).collect();
    let ug: Vec<f64> = ups.iter().map(|f| net.mbit(f.tx, w0, w1)).collect();
    let (dt, ut): (f64, f64) = (dg.iter().sum(), ug.iter().sum());
    let mut fig = Fig {
        down: dt,
        up: ut,
        icmp: induced(&net.samples_ms(icmp), base, skip),
        ..Fig::default()
    };
    for (i, p) in probes.iter().enumerate() {
        fig.udp_peak[i] = induced(&net.samples_ms(*p), base, skip).max;
    }
    for i in 0..4 {
        fig.down_share[i] = dg[i] / dt.max(1e-9);
        fig.up_share[i] = ug[i] / ut.max(1e-9);
    }
    let name = format!("B2 {} {}", if be { "rrul_be" } else { "rrul" }, c.name);
    Ok((fig, net.summary(&name, w0).with_flent(flent_labels(be))))
}

/// Flent's series of each flow of [`run_one`]: `rrul` names the TCP flows and UDP probes by
/// their marking, `rrul_be` (every flow best effort) numbers them. Our per-DSCP probes are
/// ICMP echoes written as Flent's UDP probes (both are sparse flows at their DSCP).
pub(crate) fn flent_labels(be: bool) -> FlentLabels {
    let mut s: Vec<(String, String)> = vec![("icmp".into(), "Ping (ms) ICMP".into())];
    for (k, (dscp, name)) in RRUL_DSCPS.iter().enumerate() {
        let mark = if be {
            if k == 0 {
                "BE".to_string()
            } else {
                format!("BE{}", k + 1)
            }
        } else {
            crate::rrul_mark(*dscp).unwrap_or("BE").to_string()
        };
        s.push((format!("down {name}"), format!("TCP download {mark}")));
        s.push((format!("up {name}"), format!("TCP upload {mark}")));
    }
    for (k, m) in ["BE", "BK", "EF"].iter().enumerate() {
        let series = if be {
            format!("Ping (ms) UDP BE{}", k + 1)
        } else {
            format!("Ping (ms) UDP {m}")
        };
        s.push((format!("udp {m}"), series));
    }
    let test = if be {
        FlentTest::RrulBe
    } else {
        FlentTest::Rrul
    };
    FlentLabels::new(test, s)
}

fn shares(s: &[f64; 4]) -> String {
    s.iter()
        .map(|x| format!("{x:.2}"))
        .collect::<Vec<_>>()
        .join("/")
}

pub(crate) fn run(opts: &RunOpts) -> Report {
    let dur = scaled(opts, 60.0, 15.0);
    let warm = sim::tally::warm_up_s(dur);
    let mut table = Table::new(&[
        "contender",
        "test",
        "down / up Mbit/s",
        "ICMP induced mean / p50 / p95 / p99 / peak ms",
        "peak incl. start ms",
        "UDP peak BE / BK / EF ms",
        "down shares CS0/CS1/CS5/EF",
        "Jain down / up",
        "kernel down / up",
        "kernel ICMP mean",
        "kernel ICMP max",
        "kernel UDP peak BE / BK / EF",
        "wiki peak ms",
    ]);
    let mut runs = Vec::new();
    let mut notes = Vec::new();
    let mut figs: HashMap<(&str, bool), Fig> = HashMap::new();
    for c in &ALL {
        for be in [false, true] {
            match run_one(c, be, dur, warm, opts) {
                Ok((f, s)) => {
                    let k = seed_row(c.name);
                    let t = if be { "rrul_be" } else { "rrul" };
                    table.row(vec![
                        c.name.into(),
                        t.into(),
                        format!("{:.1} / {:.2}", f.down, f.up),
                        lat5(&f.icmp),
                        f1(f.icmp.max_all),
                        format!(
                            "{:.0} / {:.0} / {:.0}",
                            f.udp_peak[0], f.udp_peak[1], f.udp_peak[2]
                        ),
                        shares(&f.down_share),
                        format!(
                            "{:.3} / {:.3}",
                            crate::jain(&f.down_share),
                            crate::jain(&f.up_share)
                        ),
                        if be { "-".into() } else { k.0.into() },
                        if be { "-".into() } else { k.1.into() },
                        if be { "-".into() } else { k.2.into() },
                        if be { "-".into() } else { k.3.into() },
                        if be { "-".into() } else { k.4.into() },
                    ]);
                    figs.insert((c.name, be), f);
                    runs.push(s);
                }
                Err(e) => {
                    notes.push(unavailable_note(c, &e));
                    break;
                }
            }
        }
    }
    let mut claims = Vec::new();
    let rr = |c: &str| figs.get(&(c, false)).cloned();
    // Ordering of the ICMP steady peak induced latency (the wiki's figures are peaks):
    // pfifo >> PIE/CoDel/SFB > SFQ > FQ-CoDel ~ Lite ~ CAKE.
    let groups: [&[&str]; 4] = [
        &["HTB+pfifo 1000"],
        &["HTB+PIE", "HTB+CoDel", "HTB+SFB"],
        &["HTB+SFQ"],
        &["HTB+FQ-CoDel", "CAKE-Lite", "CAKE"],
    ];
    let present: Vec<Vec<(&str, f64)>> = groups
        .iter()
        .map(|g| {
            g.iter()
                .filter_map(|n| rr(n).map(|f| (*n, f.icmp.max)))
                .collect::<Vec<_>>()
        })
        .filter(|g: &Vec<(&str, f64)>| !g.is_empty())
        .collect();
    for w in present.windows(2) {
        let hi = w[0].iter().map(|x| x.1).fold(f64::INFINITY, f64::min);
        let lo = w[1].iter().map(|x| x.1).fold(0.0, f64::max);
        let names = |g: &[(&str, f64)]| {
            g.iter()
                .map(|(n, v)| format!("{n} {v:.1}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        claims.push(Claim::new(
            "RRUL peak induced latency ordering: pfifo >> PIE (>170) / CoDel (90) / SFB (200) > SFQ (40) > FQ-CoDel (33) ~ CAKE-Lite (8) ~ CAKE (13-22)",
            format!("[{}] above [{}] (ms)", names(&w[0]), names(&w[1])),
            "every contender of the higher group above every one of the lower group",
            hi > lo,
        ));
    }
    // Rough sizes against the kernel ranges.
    for c in &ALL {
        if c.name == SFB.name {
            // Not reproduced (see notes): no rough-size claim.
            continue;
        }
        if let (Some(f), Some((lo, hi))) = (rr(c.name), kernel_icmp_mean(c.name)) {
            let (a, b) = if hi < 10.0 {
                (0.0, 10.0)
            } else {
                (lo / 3.0, hi * 3.0)
            };
            claims.push(Claim::new(
                format!("{}: RRUL ICMP induced mean {lo}-{hi} ms (kernel)", c.name),
                format!("{:.1} ms", f.icmp.mean),
                format!("within [{a:.0}, {b:.0}] ms (a factor 3 of the kernel range; < 10 ms for the FQ group)"),
                f.icmp.mean >= a && f.icmp.mean <= b,
            ));
        }
    }
    if let Some(f) = rr("CAKE") {
        claims.push(Claim::new(
            "CAKE diffserv3: CS1 (Bulk tin) gets ~1/16 of the download",
            format!(
                "CS1 share {:.3} down, {:.3} up",
                f.down_share[1], f.up_share[1]
            ),
            "CS1 share <= 0.12 each way",
            f.down_share[1] <= 0.12 && f.up_share[1] <= 0.12,
        ));
        claims.push(Claim::new(
            "CAKE diffserv3: EF (Voice tin) held to at most 1/4 when congested",
            format!(
                "EF share {:.3} down, {:.3} up",
                f.down_share[3], f.up_share[3]
            ),
            "EF share <= 0.30 each way",
            f.down_share[3] <= 0.30 && f.up_share[3] <= 0.30,
        ));
        claims.push(Claim::new(
            "CAKE diffserv3: CS0 + CS5 (Best Effort tin) share the rest (~11/16)",
            format!(
                "CS0+CS5 share {:.3} down",
                f.down_share[0] + f.down_share[2]
            ),
            ">= 0.55",
            f.down_share[0] + f.down_share[2] >= 0.55,
        ));
        claims.push(Claim::new(
            "CAKE diffserv3: the CS1 probe sees the most delay (70 ms; kernel 76-83 vs BE 13-16)",
            format!(
                "UDP peak BE {:.1}, BK {:.1}, EF {:.1} ms",
                f.udp_peak[0], f.udp_peak[1], f.udp_peak[2]
            ),
            "BK peak > BE peak",
            f.udp_peak[1] > f.udp_peak[0],
        ));
        claims.push(Claim::new(
            "CAKE keeps RRUL throughput high (kernel 17.5-18.1 / 2.4 Mbit/s)",
            format!("{:.1} / {:.2} Mbit/s (wire)", f.down, f.up),
            "down >= 16, up >= 2.4 Mbit/s",
            f.down >= 16.0 && f.up >= 2.4,
        ));
    }
    if let (Some(l), Some(q)) = (
        figs.get(&("CAKE-Lite", true)),
        figs.get(&("HTB+FQ-CoDel", true)),
    ) {
        claims.push(Claim::new(
            "RRUL-BE: CAKE-Lite at least as good as FQ-CoDel (8 vs 33 ms peak)",
            format!(
                "ICMP p99 CAKE-Lite {:.1} vs FQ-CoDel {:.1} ms",
                l.icmp.p99, q.icmp.p99
            ),
            "CAKE-Lite p99 <= FQ-CoDel p99 + 2 ms",
            l.icmp.p99 <= q.icmp.p99 + 2.0,
        ));
    }
    // Pairs whose kernel ICMP mean ranges do not overlap: does our mean keep their order?
    let mut inverted = Vec::new();
    for x in &ALL {
        for y in &ALL {
            if let (Some(fx), Some(fy), Some((_, xhi)), Some((ylo, _))) = (
                rr(x.name),
                rr(y.name),
                kernel_icmp_mean(x.name),
                kernel_icmp_mean(y.name),
            ) {
                if xhi < ylo && fx.icmp.mean >= fy.icmp.mean {
                    inverted.push(format!(
                        "{} {:.1} ms is not below {} {:.1} ms",
                        x.name, fx.icmp.mean, y.name, fy.icmp.mean
                    ));
                }
            }
        }
    }
    notes.push(if inverted.is_empty() {
        "Ordering by ICMP induced mean: every pair of contenders whose kernel ranges do not \
         overlap keeps the kernel's order here."
            .into()
    } else {
        format!(
            "Ordering by ICMP induced mean differs from the kernel table: {}; the ordering \
             claim uses the steady peak, which the wiki reports.",
            inverted.join("; ")
        )
    });
    if let Some(b) = rr("HTB+SFB") {
        notes.push(format!(
            "SFB: ICMP induced mean {:.1} ms ({:.1}-{:.1}x below the kernel's 46-55), with a skewed \
             distribution (p50 {:.1}, p99 {:.1} ms); SFB has no rough-size claim because the \
             model's SFB departs from the seed in B1 and B3. Its throughput ({:.1} / {:.2} \
             Mbit/s) is as poor as the kernel's 5.0-7.6 / 1.9-2.7.",
            b.icmp.mean,
            46.0 / b.icmp.mean.max(1e-9),
            55.0 / b.icmp.mean.max(1e-9),
            b.icmp.p50,
            b.icmp.p99,
            b.down,
            b.up
        ));
    }
    let mut diffs = Vec::new();
    if let Some(p) = rr(PFIFO.name) {
        // The uplink FIFO's capacity in time: 1000 full-size frames at the uplink rate.
        let fifo_s = 1000.0 * f64::from(qdisc::FULL_FRAME) * 8.0 / UP_BIT_S as f64;
        diffs.push(format!(
            "pfifo 1000 induces {:.2} s mean (kernel 0.51-0.74 s) and its download gets {:.1} \
             Mbit/s (kernel 19-20): the 1000-packet FIFO on the uplink holds up to {fifo_s:.1} \
             s and the downloads' ACKs wait in it; the model's CUBIC has no HyStart and no \
             TCP-small-queues, so it fills the FIFO further",
            p.icmp.mean / 1000.0,
            p.down
        ));
    }
    if let (Some(p), Some(c)) = (rr(PIE.name), rr(CODEL.name)) {
        let kept = rr(SFQ.name).is_none_or(|s| p.icmp.max > s.icmp.max && c.icmp.max > s.icmp.max)
            && rr(PFIFO.name).is_none_or(|f| p.icmp.max < f.icmp.max && c.icmp.max < f.icmp.max);
        diffs.push(format!(
            "PIE and CoDel induce less than in the kernel (mean {:.1} / {:.1} ms vs 37-46 / \
             35-39) {} the steady-peak ordering (between pfifo and SFQ)",
            p.icmp.mean,
            c.icmp.mean,
            if kept {
                "but keep their place in"
            } else {
                "and leave their place in"
            }
        ));
    }
    if let Some(c) = rr("CAKE") {
        let bk = c.udp_peak[1];
        let rel = if bk > 83.0 {
            "above"
        } else if bk < 76.0 {
            "below"
        } else {
            "within"
        };
        diffs.push(format!(
            "CAKE's CS1 probe peak ({bk:.1} ms) is {rel} the kernel's 76-83"
        ));
    }
    // The DSCP-blind contenders should give the same figures with and without DSCP marks.
    let same: Vec<&str> = ALL
        .iter()
        .filter(|c| {
            matches!((figs.get(&(c.name, false)), figs.get(&(c.name, true))),
                (Some(a), Some(b)) if a.icmp == b.icmp && a.down == b.down && a.up == b.up)
        })
        .map(|c| c.name)
        .collect();
    if !same.is_empty() {
        diffs.push(format!(
            "RRUL and RRUL-BE rows are identical for {} (same seeds; only the DSCP bits differ)",
            same.join(", ")
        ));
    }
    if !diffs.is_empty() {
        notes.push(format!(
            "Differences to the kernel table: {}.",
            diffs.join(". ")
        ));
    }
    if let (Some(l), Some(q)) = (
        figs.get(&("CAKE-Lite", true)),
        figs.get(&("HTB+FQ-CoDel", true)),
    ) {
        if l.icmp.max >= q.icmp.max / 2.0 {
            notes.push(format!(
                "RRUL-BE: CAKE-Lite's steady peak {:.1} ms vs FQ-CoDel's {:.1} ms; the wiki's gap \
                 (8 vs 33 ms) does not reproduce, and the claim only checks that CAKE-Lite is \
                 no worse.",
                l.icmp.max, q.icmp.max
            ));
        }
    }
    notes.push(format!(
        "Model: {SHAPING:?}. UDP latency probes are ICMP echoes marked with the DSCP (requests \
         and replies), one every 50 ms; throughput is wire goodput over the steady window \
         (after {warm:.0} s). Kernel columns: evaluation.md's measurement (30 s runs)."
    ));
    Report {
        id: "B2".into(),
        title: "RRUL and RRUL-BE".into(),
        setup: format!(
            "20/3 Mbit/s, 45 ms each way; 4 TCP flows down and 4 up (CS0, CS1, CS5, EF; all \
             CS0 for RRUL-BE), CUBIC, ECN, paced; ICMP probe and BE/BK/EF probes every 50 ms; \
             {dur:.0} s."
        ),
        table,
        claims,
        runs,
        notes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rrul_and_rrul_be_label_every_flow_as_one_of_their_twelve_series() {
        for (be, test) in [(false, FlentTest::Rrul), (true, FlentTest::RrulBe)] {
            let l = flent_labels(be);
            assert_eq!(l.test, test);
            let mut ours: Vec<&str> = l.series.iter().map(|(_, s)| s.as_str()).collect();
            ours.sort_unstable();
            let mut flents = test.data_series();
            flents.sort();
            assert_eq!(ours, flents, "every series once");
        }
        assert_eq!(
            flent_labels(false).series_of("down CS1"),
            Some("TCP download BK")
        );
        assert_eq!(
            flent_labels(true).series_of("udp EF"),
            Some("Ping (ms) UDP BE3")
        );
    }
}
