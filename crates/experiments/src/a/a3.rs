//! A3: RRUL with each TCP flow on a different DSCP (paper Fig. 4): 4 TCP up + 4 TCP down on
//! BE, CS1, CS5, EF plus an ICMP ping, CAKE diffserv3 vs besteffort, 10 Mbit/s symmetric.

use super::{f1, f3, goodput, paper_testbed, scaled, shares};
use crate::testbed::{ms, TcpOpts};
use crate::{jain, Claim, Report, RunOpts, Table};
use qdisc::rate::mbit;
use qdisc::{Duration, Instant};
use sim::{FlentLabels, FlentTest, RunSummary};

/// (name, DSCP) of the four flows per direction.
const MARKS: [(&str, u8); 4] = [("BE", 0), ("CS1", 8), ("CS5", 40), ("EF", 46)];
/// Absolute tolerance on shares.
const TOL: f64 = 0.03;

/// Flent's `rrul` series of each flow: four TCP flows each way marked as rrul's, and the ICMP
/// ping (the paper's test has no UDP probes).
fn flent_labels() -> FlentLabels {
    let mut s: Vec<(String, String)> = Vec::new();
    for (m, dscp) in MARKS {
        let mark = crate::rrul_mark(dscp).unwrap_or("BE");
        s.push((format!("up {m}"), format!("TCP upload {mark}")));
        s.push((format!("down {m}"), format!("TCP download {mark}")));
    }
    s.push(("ping".into(), "Ping (ms) ICMP".into()));
    FlentLabels::new(FlentTest::Rrul, s)
}

pub(super) fn run(opts: &RunOpts) -> Report {
    let dur = scaled(opts, 60.0);
    let warm = scaled(opts, 10.0);
    let mut table = Table::new(&[
        "contender",
        "dir",
        "BE",
        "CS1",
        "CS5",
        "EF",
        "Jain",
        "Mbit/s",
        "ping induced p50/p99 ms",
        "seed (Fig. 4)",
    ]);
    let mut claims = Vec::new();
    let mut runs = Vec::new();
    for (ci, mode) in ["besteffort", "diffserv3"].iter().enumerate() {
        let seed = opts.seed.wrapping_add(ci as u64);
        let q = |bit_s: u64| {
            let bw = format!("{bit_s}bit");
            super::cake(&["bandwidth", &bw, mode], seed)
        };
        let mut d = paper_testbed(1, 1, 8 * mbit(10.0), 8 * mbit(10.0), &q, seed);
        let (c, s) = (d.clients[0], d.servers[0]);
        let mut names = Vec::new();
        for (i, (m, dscp)) in MARKS.iter().enumerate() {
            let o = TcpOpts {
                dscp: *dscp,
                ..TcpOpts::default()
            };
            let up = d.tcp(c, s, 5001 + i as u16, Instant::ZERO, o);
            let down = d.tcp(s, c, 6001 + i as u16, Instant::ZERO, o);
            names.push((up.tx, format!("up {m}")));
            names.push((down.tx, format!("down {m}")));
        }
        let p = d.ping(c, s, 1, Duration::from_millis(100), Instant::ZERO);
        names.push((p, "ping".into()));
        d.sim.run_until(dur);
        let run = RunSummary::collect(
            &d.sim,
            &format!("A3 {mode}"),
            &names,
            &[(d.up, "up".into()), (d.down, "down".into())],
            warm,
        )
        .with_flent(flent_labels());
        let base = ms(d.base_rtt);
        // No ping sample: NaN figures (which fail every claim), never zeros.
        let ping = run
            .flow("ping")
            .and_then(|f| f.latency_ms)
            .unwrap_or(sim::LatencyMs::MISSING);
        let ping_txt = format!("{:.1} / {:.1}", ping.p50 - base, ping.p99 - base);
        for dir in ["up", "down"] {
            let g: Vec<f64> = MARKS
                .iter()
                .map(|(m, _)| goodput(&run, &format!("{dir} {m}")))
                .collect();
            let sh = shares(&g);
            let j = jain(&g);
            let seed_fig = if *mode == "besteffort" {
                "equal shares"
            } else {
                "BE most; CS1 ~1/16; CS5+EF <= 1/4"
            };
            let mut row = vec![mode.to_string(), dir.to_string()];
            row.extend(sh.iter().map(|&x| f3(x)));
            row.push(f3(j));
            row.push(f1(g.iter().sum::<f64>() / 1e6));
            row.push(ping_txt.clone());
            row.push(seed_fig.into());
            table.row(row);
            let list = format!(
                "BE {:.3}, CS1 {:.3}, CS5 {:.3}, EF {:.3}",
                sh[0], sh[1], sh[2], sh[3]
            );
            if *mode == "besteffort" {
                let worst = sh.iter().map(|x| (x - 0.25).abs()).fold(0.0, f64::max);
                claims.push(Claim::new(
                    format!("besteffort ({dir}): all four flows get the same share"),
                    format!("{list}; Jain {j:.3}"),
                    format!("each share within 0.25 +- {TOL}, Jain >= 0.98"),
                    worst <= TOL && j >= 0.98,
                ));
            } else {
                claims.push(Claim::new(
                    format!(
                        "diffserv3 ({dir}): the background (CS1) flow is deprioritised to ~1/16"
                    ),
                    list.clone(),
                    format!("CS1 share within 1/16 +- {TOL}"),
                    (sh[1] - 1.0 / 16.0).abs() <= TOL,
                ));
                claims.push(Claim::new(
                    format!("diffserv3 ({dir}): the high-priority flows are held to the Voice tin's 1/4 when congested"),
                    list.clone(),
                    format!("EF (Voice tin) share <= 0.25 + {TOL}; CS5 maps to Best Effort in diffserv3 (see notes), so it is checked with BE"),
                    sh[3] <= 0.25 + TOL,
                ));
                claims.push(Claim::new(
                    format!("diffserv3 ({dir}): the best-effort flow gets the most"),
                    list.clone(),
                    "BE share >= EF and >= CS1 shares, BE within 0.05 of CS5 (same tin), and the Best Effort tin (BE + CS5) >= 0.55",
                    sh[0] >= sh[3] && sh[0] >= sh[1] && (sh[0] - sh[2]).abs() <= 0.05 && sh[0] + sh[2] >= 0.55,
                ));
            }
        }
        runs.push(run);
    }
    Report {
        id: "A3".into(),
        title: "TCP flows on different DSCPs: diffserv3 vs besteffort (Fig. 4)".into(),
        setup: format!(
            "10 Mbit/s symmetric, 25 ms each way. RRUL-like: 4 TCP CUBIC flows up and 4 down between one \
             client and one server, marked BE (0), CS1 (8), CS5 (40) and EF (46) (data and ACKs), plus an ICMP \
             ping every 100 ms. CAKE `bandwidth 10Mbit besteffort` or `... diffserv3` (triple-isolate) at both \
             egresses. {:.0} s; shares of each direction's total goodput from {:.0} s.",
            dur.as_nanos() as f64 / 1e9,
            warm.as_nanos() as f64 / 1e9
        ),
        table,
        claims,
        runs,
        notes: vec![
            "CAKE's diffserv3 table (kernel and cake-spec) puts CS5 in Best Effort, not Voice: only EF, VA, CS6, CS7 \
             and 4 reach Voice. So our CS5 flow shares the Best Effort tin with the BE flow and gets about as much as \
             BE; the paper's text groups CS5 with EF as high priority. The Voice-tin limit is checked on EF alone."
                .into(),
            "Fig. 4 gives bar heights only; the seed column states its shape.".into(),
        ],
    }
}
