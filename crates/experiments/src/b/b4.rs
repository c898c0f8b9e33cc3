//! B4: the seed's multi-traffic household workload, in minute-long phases: VoIP throughout;
//! one bulk TCP each way; a BitTorrent-like swarm (20 LEDBAT flows on CS1 each way); then 1, 2
//! and 9 bulk flows; a bulk flow on EF; then everything stops in turn.

use super::common::*;
use crate::testbed::{TcpFlow, TcpOpts};
use crate::{Claim, Report, RunOpts, Table};
use qdisc::Instant;
use std::collections::HashMap;
use tcpmodel::CcKind;

/// Phase names (after the idle baseline).
const PHASES: [&str; 10] = [
    "1 bulk",
    "1 bulk + BT",
    "BT alone",
    "BT + 1 bulk",
    "BT + 2 bulk",
    "BT + 9 bulk",
    "BT + 9 bulk + EF",
    "BT + EF",
    "EF alone",
    "VoIP only",
];

/// Per direction (0 = down, 1 = up) and phase: bulk, BT and EF throughput (Mbit/s).
#[derive(Clone, Debug, Default)]
struct Fig {
    bulk: [[f64; 10]; 2],
    bt: [[f64; 10]; 2],
    ef: [[f64; 10]; 2],
    /// VoIP induced one-way delay over the loaded phases (ms): p99, max; and loss; per
    /// direction.
    voip_p99: [f64; 2],
    voip_max: [f64; 2],
    voip_loss: [f64; 2],
}

impl Fig {
    /// BitTorrent's share of the (bulk + BT) throughput in `phase`, direction `d`.
    fn bt_share(&self, d: usize, phase: usize) -> f64 {
        let t = self.bt[d][phase] + self.bulk[d][phase] + self.ef[d][phase];
        self.bt[d][phase] / t.max(1e-9)
    }
}

fn run_one(
    c: &Contender,
    p: f64,
    base: f64,
    opts: &RunOpts,
) -> Result<(Fig, sim::RunSummary), sim::ScenarioError> {
    let mut net = Net::new(c, 3, opts.seed)?;
    let ph = |k: usize| at(base + k as f64 * p);
    let end = ph(10);
    let (srv_bulk, srv_bt, srv_voip) = (0, 1, 2);
    let voip = [
        net.voip("voip down", false, srv_voip, at(0.0), end),
        net.voip("voip up", true, srv_voip, at(0.0), end),
    ];
    let bulk_o = TcpOpts::default();
    let bt_o = TcpOpts {
        cc: CcKind::Ledbat,
        dscp: 8,
        ..TcpOpts::default()
    };
    let ef_o = TcpOpts {
        dscp: 46,
        ..TcpOpts::default()
    };
    // Flows per direction: (flow, kind 0 bulk / 1 BT / 2 EF).
    let mut flows: [Vec<(TcpFlow, usize)>; 2] = [Vec::new(), Vec::new()];
    for (d, up) in [(0usize, false), (1, true)] {
        let dn = if up { "up" } else { "down" };
        let f = net.tcp(
            &format!("bulk0 {dn}"),
            up,
            srv_bulk,
            ph(0),
            Some(ph(2)),
            bulk_o,
        );
        flows[d].push((f, 0));
        for i in 0..20 {
            let f = net.tcp(&format!("bt{i} {dn}"), up, srv_bt, ph(1), Some(ph(8)), bt_o);
            flows[d].push((f, 1));
        }
        // 1, then 2, then 9 basic bulk flows (cumulative), all stopping at phase 7's end.
        for i in 0..9 {
            let start = match i {
                0 => ph(3),
                1 => ph(4),
                _ => ph(5),
            };
            let f = net.tcp(
                &format!("bulk{} {dn}", i + 1),
                up,
                srv_bulk,
                start,
                Some(ph(7)),
                bulk_o,
            );
            flows[d].push((f, 0));
        }
        let f = net.tcp(&format!("ef {dn}"), up, srv_bulk, ph(6), Some(ph(9)), ef_o);
        flows[d].push((f, 2));
    }
    // Let the last VoIP packets arrive.
    net.d.sim.run_until(end + qdisc::Duration::from_secs(1));
    let mut fig = Fig::default();
    // Skip each phase's first few seconds (start-up transients) when measuring shares.
    let settle = (p / 4.0).min(10.0);
    for d in 0..2 {
        for k in 0..10 {
            let (a, b) = (at(base + k as f64 * p + settle), ph(k + 1));
            for (f, kind) in &flows[d] {
                let g = net.mbit(f.tx, a, b);
                match kind {
                    0 => fig.bulk[d][k] += g,
                    1 => fig.bt[d][k] += g,
                    _ => fig.ef[d][k] += g,
                }
            }
        }
        let s = net.samples_ms(voip[d]);
        let min = s.iter().copied().fold(f64::INFINITY, f64::min);
        // VoIP samples come every 20 ms from t = 0: the loaded phases 1..9.
        let per_s = 50.0;
        let lo = (base * per_s) as usize;
        let hi = ((base + 9.0 * p) * per_s) as usize;
        let loaded: Vec<f64> = s.iter().take(hi).skip(lo).copied().collect();
        let ind = induced(&loaded, min, 0);
        fig.voip_p99[d] = ind.p99;
        fig.voip_max[d] = ind.max;
        fig.voip_loss[d] = net.loss(voip[d]);
    }
    Ok((fig, net.summary(&format!("B4 {}", c.name), Instant::ZERO)))
}

fn seed_text(c: &str) -> &'static str {
    match c {
        "CAKE" => "deprioritises BT both ways; VoIP loss 0, no measurable delay",
        "CAKE-Lite" | "HTB+FQ-CoDel" => {
            "BT gets per-flow equal share; VoIP loss 0, negligible delay"
        }
        "HTB+PIE" => "BT competes per flow; VoIP delay varies >100 ms, steady loss",
        "HTB+CoDel" => "download gaps; multi-second VoIP dropouts",
        "HTB+SFB" => "VoIP spikes to 150 ms, early loss",
        "HTB+SFQ" => "chaotic BT; VoIP no loss, +10 ms",
        _ => "-",
    }
}

pub(crate) fn run(opts: &RunOpts) -> Report {
    let p = scaled(opts, 60.0, 8.0);
    let base = scaled(opts, 10.0, 2.0);
    let mut table = Table::new(&[
        "contender",
        "dir",
        "BT share: 1 bulk+BT / +1 / +2 / +9 bulk",
        "BT alone Mbit/s",
        "EF Mbit/s (with 9 bulk)",
        "VoIP induced p99 / max ms",
        "VoIP loss %",
        "seed",
    ]);
    let mut runs = Vec::new();
    let mut notes = Vec::new();
    let mut figs: HashMap<&str, Fig> = HashMap::new();
    let contenders: Vec<Contender> = ALL.iter().copied().filter(|c| *c != PFIFO).collect();
    for c in &contenders {
        match run_one(c, p, base, opts) {
            Ok((f, s)) => {
                for (d, dn) in [(0, "down"), (1, "up")] {
                    table.row(vec![
                        c.name.into(),
                        dn.into(),
                        [1, 3, 4, 5]
                            .iter()
                            .map(|&k| format!("{:.2}", f.bt_share(d, k)))
                            .collect::<Vec<_>>()
                            .join(" / "),
                        format!("{:.2}", f.bt[d][2]),
                        format!("{:.2}", f.ef[d][6]),
                        format!("{:.1} / {:.1}", f.voip_p99[d], f.voip_max[d]),
                        format!("{:.2}", f.voip_loss[d] * 100.0),
                        if d == 0 { seed_text(c.name) } else { "" }.into(),
                    ]);
                }
                figs.insert(c.name, f);
                runs.push(s);
            }
            Err(e) => notes.push(unavailable_note(c, &e)),
        }
    }
    let mut claims = Vec::new();
    let rate = [20.0, 3.0];
    if let Some(f) = figs.get("CAKE") {
        claims.push(Claim::new(
            "CAKE diffserv3 deprioritises the CS1 swarm in both directions",
            format!(
                "BT share with 1 bulk flow: down {:.2}, up {:.2}; with 9: down {:.2}, up {:.2}",
                f.bt_share(0, 1),
                f.bt_share(1, 1),
                f.bt_share(0, 5),
                f.bt_share(1, 5)
            ),
            "BT share <= 0.25 each way with 1, 2 and 9 bulk flows",
            [1, 3, 4, 5]
                .iter()
                .all(|&k| f.bt_share(0, k) <= 0.25 && f.bt_share(1, k) <= 0.25),
        ));
        claims.push(Claim::new(
            "CAKE: the swarm is not starved when uncontended",
            format!(
                "BT alone: down {:.1}, up {:.2} Mbit/s",
                f.bt[0][2], f.bt[1][2]
            ),
            ">= 60% of the link each way",
            f.bt[0][2] >= 0.6 * rate[0] && f.bt[1][2] >= 0.6 * rate[1],
        ));
    }
    let cake_bt = figs
        .get("CAKE")
        .map(|f| f.bt_share(0, 1).max(f.bt_share(1, 1)));
    for name in ["HTB+FQ-CoDel", "CAKE-Lite"] {
        if let Some(f) = figs.get(name) {
            let lo = f.bt_share(0, 1).min(f.bt_share(1, 1));
            claims.push(Claim::new(
                format!("{name} gives the swarm per-flow equal share (excessive bandwidth to BitTorrent)"),
                format!(
                    "BT share with 1 bulk flow: down {:.2}, up {:.2} (CAKE: {:.2} at most)",
                    f.bt_share(0, 1),
                    f.bt_share(1, 1),
                    cake_bt.unwrap_or(f64::NAN)
                ),
                "BT share >= 0.45 each way (at least the bulk flow's), and above CAKE's",
                lo >= 0.45 && cake_bt.is_none_or(|c| lo > c),
            ));
        }
    }
    for name in ["CAKE", "CAKE-Lite", "HTB+FQ-CoDel"] {
        if let Some(f) = figs.get(name) {
            claims.push(Claim::new(
                format!("{name} protects VoIP downstream: loss 0, negligible induced delay"),
                format!(
                    "loss {:.2}%, p99 {:.1} ms, max {:.1} ms",
                    f.voip_loss[0] * 100.0,
                    f.voip_p99[0],
                    f.voip_max[0]
                ),
                "loss <= 0.1%, p99 induced <= 10 ms",
                f.voip_loss[0] <= 0.001 && f.voip_p99[0] <= 10.0,
            ));
        }
    }
    for name in ["CAKE", "CAKE-Lite"] {
        if let Some(f) = figs.get(name) {
            claims.push(Claim::new(
                format!("{name} protects VoIP upstream: (near) zero loss"),
                format!(
                    "loss {:.2}%, p99 {:.1} ms",
                    f.voip_loss[1] * 100.0,
                    f.voip_p99[1]
                ),
                "loss <= 0.2% (delay: see notes)",
                f.voip_loss[1] <= 0.002,
            ));
        }
    }
    if let (Some(pie), Some(cake)) = (figs.get("HTB+PIE"), figs.get("CAKE")) {
        claims.push(Claim::new(
            "PIE (no flow isolation) lets VoIP delay vary by tens to 100+ ms",
            format!(
                "PIE VoIP max {:.0} / {:.0} ms vs CAKE {:.1} / {:.1} ms (down / up)",
                pie.voip_max[0], pie.voip_max[1], cake.voip_max[0], cake.voip_max[1]
            ),
            "PIE's larger max >= 30 ms and >= 3x CAKE's",
            pie.voip_max[0].max(pie.voip_max[1]) >= 30.0
                && pie.voip_max[0].max(pie.voip_max[1])
                    >= 3.0 * cake.voip_max[0].max(cake.voip_max[1]),
        ));
    }
    if let (Some(q), Some(c), Some(l)) = (
        figs.get("HTB+FQ-CoDel"),
        figs.get("CAKE"),
        figs.get("CAKE-Lite"),
    ) {
        let down_p99 = [q, c, l].iter().map(|f| f.voip_p99[0]).fold(0.0, f64::max);
        notes.push(format!(
            "Upstream VoIP delay over phases 1-9 (a difference to the seed's negligible delay): \
             FQ-CoDel p99 {:.1} ms, max {:.1} ms, loss {:.2}%; CAKE diffserv3 p99 {:.1} ms, max \
             {:.1} ms; CAKE-Lite p99 {:.1} ms, max {:.1} ms. On the 3 Mbit/s uplink a 200-byte \
             packet every 20 ms never lets its queue leave the old-flows list, so it waits in \
             the DRR round of the 22-31 backlogged flows (~4 ms per MTU) under FQ-CoDel; under \
             CAKE diffserv3, triple-isolate scales the VoIP flow's quantum by the client \
             host's bulk flows (10 in the 9-bulk phases), below one VoIP packet. Downstream \
             the three keep VoIP p99 at or below {down_p99:.1} ms.",
            q.voip_p99[1],
            q.voip_max[1],
            q.voip_loss[1] * 100.0,
            c.voip_p99[1],
            c.voip_max[1],
            l.voip_p99[1],
            l.voip_max[1],
        ));
    }
    if let (Some(q), Some(l)) = (figs.get("HTB+FQ-CoDel"), figs.get("CAKE-Lite")) {
        notes.push(format!(
            "FQ-CoDel's downstream swarm share with one bulk flow ({:.2}) is below the 20/21 \
             per-flow share: the LEDBAT swarm reaches {:.1} of {:.0} Mbit/s uncontended under \
             FQ-CoDel here (CoDel marks each of 20 paced flows at its 5 ms target), against \
             {:.1} Mbit/s under CAKE-Lite (share {:.2}).",
            q.bt_share(0, 1),
            q.bt[0][2],
            rate[0],
            l.bt[0][2],
            l.bt_share(0, 1)
        ));
    }
    if let Some(f) = figs.get("HTB+SFQ") {
        notes.push(format!(
            "HTB+SFQ: VoIP upstream p99 {:.0} ms, max {:.0} ms, loss {:.2}% (the seed: no loss, a \
             steady +10 ms): upstream carries the 30 download flows' ACK streams besides 30 \
             uploads, so the VoIP flow's 80 kbit/s exceeds its per-flow share of 3 Mbit/s and \
             its SFQ bucket (no AQM, limit 1000) grows; downstream p99 {:.0} ms.",
            f.voip_p99[1],
            f.voip_max[1],
            f.voip_loss[1] * 100.0,
            f.voip_p99[0]
        ));
    }
    let mut aqm = Vec::new();
    if let Some(f) = figs.get("HTB+CoDel") {
        aqm.push(format!(
            "HTB+CoDel: the downstream LEDBAT swarm gets {:.2} Mbit/s uncontended; upstream \
             VoIP loses {:.1}% with up to {:.0} ms delay; the seed also saw CoDel fail in this \
             test (gaps in the download data, multi-second VoIP dropouts) but did not explain \
             it",
            f.bt[0][2],
            f.voip_loss[1] * 100.0,
            f.voip_max[1]
        ));
    }
    for (name, seed) in [
        ("HTB+PIE", ">100 ms swings, steady loss"),
        ("HTB+SFB", "spikes to 150 ms, early loss"),
    ] {
        if let Some(f) = figs.get(name) {
            aqm.push(format!(
                "{name}: VoIP delay up to {:.0} / {:.0} ms down / up, loss {:.2}% / {:.1}% \
                 (seed: {seed})",
                f.voip_max[0],
                f.voip_max[1],
                f.voip_loss[0] * 100.0,
                f.voip_loss[1] * 100.0
            ));
        }
    }
    if !aqm.is_empty() {
        notes.push(format!("{}.", aqm.join(". ")));
    }
    notes.push(format!(
        "Model: {SHAPING:?}; phases of {p:.0} s after a {base:.0} s baseline (the seed: 60 s \
         and 10 s); shares and throughputs skip each phase's first {:.0} s; BT share = BT / \
         (BT + bulk + EF); VoIP induced = one-way delay minus its idle minimum, over phases 1-9. \
         VoIP is unmarked (CS0) as in the seed; the swarm is 20 LEDBAT flows (RFC 6817, 100 ms \
         target) on CS1 each way from a second server host; bulk and EF from a third.",
        (p / 4.0).min(10.0)
    ));
    Report {
        id: "B4".into(),
        title: "Household multi-traffic workload".into(),
        setup: format!(
            "20/3 Mbit/s, 45 ms each way; VoIP (200 B / 20 ms) each way throughout; phases \
             of {p:.0} s: {}.",
            PHASES.join(", ")
        ),
        table,
        claims,
        runs,
        notes,
    }
}
