//! What B1..B4 share: the 20/3 Mbit/s testbed, the contenders as tc strings, flows, probes and
//! induced-latency statistics.

use crate::testbed::{Dumbbell, DumbbellSpec, Host, TcpFlow, TcpOpts};
use crate::RunOpts;
use cake::AnyQdisc;
use qdisc::codel::{Codel, CodelConfig};
use qdisc::pie::{Pie, PieConfig};
use qdisc::{quantile, Duration, Instant};
use sim::flent::{self, Role};
use sim::{AppId, Ping, RunSummary, UdpSource};

/// Downstream rate (bit/s): the seed's Annex-M ADSL2 profile.
pub(crate) const DOWN_BIT_S: u64 = 20_000_000;
/// Upstream rate (bit/s).
pub(crate) const UP_BIT_S: u64 = 3_000_000;
/// One-way delay each way.
pub(crate) const ONE_WAY_MS: u64 = 45;

/// Where the shaping happens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Shaping {
    /// The bottleneck link itself runs at 20/3 Mbit/s with a one-packet transmit buffer and the
    /// bare qdisc at its egress (dequeued whenever the transmitter frees up). CAKE still runs
    /// its own shaper at the same rate. No HTB needed. (Kept for comparison: all claims hold
    /// in this model too.)
    #[allow(dead_code)]
    LinkRate,
    /// As in the seed: a faster link (`link_bit_s` each way) behind an HTB shaper at 20/3
    /// Mbit/s (`htb rate R burst 15k CHILD`); CAKE shapes itself. Needs `htb` in the parser.
    Htb {
        /// Line rate of the link behind the shaper, bit/s.
        link_bit_s: u64,
    },
}

/// The one setting that picks the model (see [`Shaping`]): the seed's testbed, a 100 Mbit/s
/// link behind HTB (or CAKE's own shaper) at 20/3 Mbit/s.
pub(crate) const SHAPING: Shaping = Shaping::Htb {
    link_bit_s: 100_000_000,
};

/// A contender: a name and the qdisc per direction, as tc strings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Contender {
    /// Name in tables ("CAKE", "HTB+FQ-CoDel").
    pub name: &'static str,
    /// CAKE's own arguments after `bandwidth R` (CAKE shapes itself), or `None` for a qdisc
    /// behind HTB.
    cake: Option<&'static str>,
    /// The qdisc (HTB's child) for non-CAKE contenders.
    child: &'static str,
}

/// CAKE in its default configuration (diffserv3, triple-isolate).
pub(crate) const CAKE: Contender = Contender {
    name: "CAKE",
    cake: Some("diffserv3 triple-isolate"),
    child: "",
};
/// CAKE-Lite: no priority queuing, plain flow isolation.
pub(crate) const CAKE_LITE: Contender = Contender {
    name: "CAKE-Lite",
    cake: Some("besteffort flows"),
    child: "",
};
/// HTB + fq_codel at defaults.
pub(crate) const FQ_CODEL: Contender = Contender {
    name: "HTB+FQ-CoDel",
    cake: None,
    child: "fq_codel",
};
/// HTB + SFQ with the limit raised to 1000 (perturb 10 s, as in the seed's kernel).
pub(crate) const SFQ: Contender = Contender {
    name: "HTB+SFQ",
    cake: None,
    child: "sfq limit 1000 perturb 10",
};
/// HTB + PIE, ECN on.
pub(crate) const PIE: Contender = Contender {
    name: "HTB+PIE",
    cake: None,
    child: "pie ecn",
};
/// HTB + CoDel, ECN on.
pub(crate) const CODEL: Contender = Contender {
    name: "HTB+CoDel",
    cake: None,
    child: "codel ecn",
};
/// HTB + SFB at defaults.
pub(crate) const SFB: Contender = Contender {
    name: "HTB+SFB",
    cake: None,
    child: "sfb",
};
/// HTB + a 1000-packet tail-drop FIFO (the bufferbloat reference, B2's measured table).
pub(crate) const PFIFO: Contender = Contender {
    name: "HTB+pfifo 1000",
    cake: None,
    child: "pfifo 1000",
};

/// The seed's seven contenders in its order, then pfifo.
pub(crate) const ALL: [Contender; 8] = [SFQ, PIE, CODEL, SFB, FQ_CODEL, CAKE_LITE, CAKE, PFIFO];

impl Contender {
    /// The tc string of the qdisc at the egress of a direction shaped to `rate_bit_s`.
    pub(crate) fn tc(&self, rate_bit_s: u64, shaping: Shaping) -> String {
        let kbit = rate_bit_s / 1000;
        match (self.cake, shaping) {
            (Some(args), _) => format!("cake bandwidth {kbit}kbit {args}"),
            (None, Shaping::LinkRate) => self.child.to_string(),
            (None, Shaping::Htb { .. }) => format!("htb rate {kbit}kbit burst 15k {}", self.child),
        }
    }
}

/// Builds the qdisc of tc string `spec`. `codel ecn` and `pie ecn` are built here (the shared
/// parser ignores their arguments today); everything else goes to [`sim::parse_qdisc`].
pub(crate) fn qdisc_of(spec: &str, seed: u64) -> Result<AnyQdisc, sim::ScenarioError> {
    let words: Vec<&str> = spec.split_whitespace().collect();
    match words.as_slice() {
        ["codel", "ecn"] => Ok(AnyQdisc::Codel(Codel::new(CodelConfig {
            ecn: true,
            ..CodelConfig::default()
        }))),
        ["pie", "ecn"] => Ok(AnyQdisc::Pie(Pie::new(
            PieConfig {
                ecn: true,
                ..PieConfig::default()
            },
            seed,
        ))),
        _ => sim::parse_qdisc(spec, seed),
    }
}

/// Why a contender could not be built (its tc string does not parse here).
pub(crate) fn unavailable_note(c: &Contender, why: &dyn std::fmt::Display) -> String {
    format!(
        "{} not available: {} (its row is empty and its claims are skipped)",
        c.name, why
    )
}

/// The testbed of one run: one client (the home side, host A) behind the 20/3 Mbit/s
/// bottleneck, `servers` hosts on the far side (B, C, D), ports handed out in order.
#[derive(Debug)]
pub(crate) struct Net {
    /// The dumbbell.
    pub d: Dumbbell,
    /// The home host.
    pub client: Host,
    next_port: u16,
    /// Flows to put in the run summary.
    pub named: Vec<(AppId, String)>,
    /// What each of `named` is, seen from the client, for the summary's Flent labels.
    roles: Vec<Role>,
}

impl Net {
    /// The testbed with contender `c` at both bottleneck egresses; `Err` when its tc string
    /// does not parse.
    pub(crate) fn new(c: &Contender, servers: usize, seed: u64) -> Result<Net, sim::ScenarioError> {
        let down = qdisc_of(&c.tc(DOWN_BIT_S, SHAPING), seed)?;
        let up = qdisc_of(&c.tc(UP_BIT_S, SHAPING), seed ^ 0x5555)?;
        let one_way = Duration::from_millis(ONE_WAY_MS);
        let mut spec = match SHAPING {
            Shaping::LinkRate => {
                let mut s = DumbbellSpec::new(DOWN_BIT_S, UP_BIT_S, one_way);
                // The qdisc decides; the transmitter holds at most the next packet.
                s.buffer_packets = 1;
                s
            }
            Shaping::Htb { link_bit_s } => DumbbellSpec::new(link_bit_s, link_bit_s, one_way),
        };
        spec.servers = servers.max(1);
        spec.down_qdisc = Some(down);
        spec.up_qdisc = Some(up);
        let d = Dumbbell::new(spec, seed);
        let client = d.clients[0];
        Ok(Net {
            d,
            client,
            next_port: 5000,
            named: Vec::new(),
            roles: Vec::new(),
        })
    }

    fn port(&mut self) -> u16 {
        self.next_port = self.next_port.wrapping_add(1);
        self.next_port
    }

    /// A TCP flow between the client and server `srv`: upload when `up`, else download;
    /// from `start` until `stop`.
    pub(crate) fn tcp(
        &mut self,
        name: &str,
        up: bool,
        srv: usize,
        start: Instant,
        stop: Option<Instant>,
        o: TcpOpts,
    ) -> TcpFlow {
        let s = self.server(srv);
        let (from, to) = if up {
            (self.client, s)
        } else {
            (s, self.client)
        };
        let port = self.port();
        let f = self.d.tcp_until(from, to, port, start, stop, o);
        self.named.push((f.tx, name.to_string()));
        self.roles.push(if up {
            Role::TcpUpload
        } else {
            Role::TcpDownload
        });
        f
    }

    /// An ICMP latency probe (marked `dscp`, replies too) from the client to server `srv`
    /// every `interval` over `[start, stop)`.
    pub(crate) fn ping(
        &mut self,
        name: &str,
        srv: usize,
        dscp: u8,
        interval: Duration,
        start: Instant,
        stop: Instant,
    ) -> AppId {
        let s = self.server(srv);
        let id = self.port();
        let p = Ping::new(self.client.addr, s.addr, id, interval)
            .with_tos(dscp << 2)
            .until(stop);
        let a = self.d.sim.add_app(self.client.node, id, start, Box::new(p));
        self.named.push((a, name.to_string()));
        self.roles.push(Role::IcmpPing);
        a
    }

    /// Isochronous VoIP (200-byte frames every 20 ms, unmarked) over `[start, stop)`: upload
    /// when `up`.
    pub(crate) fn voip(
        &mut self,
        name: &str,
        up: bool,
        srv: usize,
        start: Instant,
        stop: Instant,
    ) -> AppId {
        let s = self.server(srv);
        let (from, to) = if up {
            (self.client, s)
        } else {
            (s, self.client)
        };
        let port = self.port();
        let u = UdpSource::voip(from.addr, to.addr, port)
            .with_tos(0)
            .until(stop);
        let a = self.d.sim.add_app(from.node, port, start, Box::new(u));
        self.named.push((a, name.to_string()));
        self.roles.push(Role::Other);
        a
    }

    fn server(&self, i: usize) -> Host {
        let n = self.d.servers.len();
        self.d.servers[i.min(n - 1)]
    }

    /// Idle round-trip time of a probe, ms.
    pub(crate) fn base_rtt_ms(&self) -> f64 {
        crate::testbed::ms(self.d.base_rtt)
    }

    /// Wire goodput (Mbit/s of Ethernet frames delivered) of flow `app` over `[from, to)`.
    pub(crate) fn mbit(&self, app: AppId, from: Instant, to: Instant) -> f64 {
        self.d.sim.flow(app).map_or(0.0, |f| {
            f.goodput_bps(self.d.sim.bin_width(), from, to) * 8.0 / 1e6
        })
    }

    /// Latency samples of `app` in ms (delivery order).
    pub(crate) fn samples_ms(&self, app: AppId) -> Vec<f64> {
        self.d.sim.flow(app).map_or(Vec::new(), |f| {
            f.latencies_ns.iter().map(|&n| n as f64 / 1e6).collect()
        })
    }

    /// Loss fraction of flow `app`.
    pub(crate) fn loss(&self, app: AppId) -> f64 {
        self.d.sim.flow(app).map_or(0.0, |f| f.loss())
    }

    /// The run summary (every named flow, both bottleneck directions), labelled as the
    /// nearest Flent test for its flows ([`flent::nearest`]: B1's runs are exactly
    /// `tcp_upload`, `tcp_download` and `tcp_bidirectional`); runs that are another of Flent's
    /// tests relabel it ([`RunSummary::with_flent`]).
    pub(crate) fn summary(&self, name: &str, from: Instant) -> RunSummary {
        let roles: Vec<(&str, Role)> = self
            .named
            .iter()
            .zip(&self.roles)
            .map(|((_, n), r)| (n.as_str(), *r))
            .collect();
        RunSummary::collect(
            &self.d.sim,
            name,
            &self.named,
            &[(self.d.down, "down".into()), (self.d.up, "up".into())],
            from,
        )
        .with_flent(flent::nearest(&roles))
    }
}

/// Induced latency statistics (ms) of probe samples.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Induced {
    /// Mean over the steady window.
    pub mean: f64,
    /// Median over the steady window.
    pub p50: f64,
    /// 95th percentile over the steady window.
    pub p95: f64,
    /// 99th percentile over the steady window.
    pub p99: f64,
    /// Maximum over the steady window.
    pub max: f64,
    /// Maximum over the whole load, startup included.
    pub max_all: f64,
}

/// Induced latency of `samples` (ms) above `base` (ms); the steady window skips the first
/// `skip` samples (the startup: samples come one per probe interval from the load's start).
pub(crate) fn induced(samples: &[f64], base: f64, skip: usize) -> Induced {
    let all: Vec<f64> = samples.iter().map(|s| (s - base).max(0.0)).collect();
    let max_all = all.iter().copied().fold(0.0, f64::max);
    let mut w: Vec<f64> = all.iter().skip(skip).copied().collect();
    if w.is_empty() {
        // No steady samples: only the startup peak is known.
        return Induced {
            max_all,
            ..Induced::default()
        };
    }
    w.sort_by(f64::total_cmp);
    let n = w.len();
    // `w` is not empty (checked above), so every rank exists.
    let rank = |p: f64| quantile::nearest_rank(&w, p).unwrap_or(0.0);
    Induced {
        mean: w.iter().sum::<f64>() / n as f64,
        p50: rank(0.50),
        p95: rank(0.95),
        p99: rank(0.99),
        max: w[n - 1],
        max_all,
    }
}

/// Seconds scaled by `opts.time_scale` (at least `min_s`).
pub(crate) fn scaled(opts: &RunOpts, s: f64, min_s: f64) -> f64 {
    (s * opts.time_scale).max(min_s)
}

/// `s` seconds as an instant.
pub(crate) fn at(s: f64) -> Instant {
    Instant::from_nanos((s * 1e9) as u64)
}

/// "mean / p50 / p95 / p99 / max" of `i`, one decimal each.
pub(crate) fn lat5(i: &Induced) -> String {
    format!(
        "{:.1} / {:.1} / {:.1} / {:.1} / {:.1}",
        i.mean, i.p50, i.p95, i.p99, i.max
    )
}

/// One decimal.
pub(crate) fn f1(x: f64) -> String {
    format!("{x:.1}")
}

/// The DSCPs of RRUL's four flows per direction: CS0 (BE), CS1 (BK), CS5, EF.
pub(crate) const RRUL_DSCPS: [(u8, &str); 4] = [(0, "CS0"), (8, "CS1"), (40, "CS5"), (46, "EF")];

/// Probe interval of every latency probe (flent's ping runs at 0.2 s by default; finer here
/// so short peaks show).
pub(crate) const PROBE: Duration = Duration::from_millis(50);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contenders_are_tc_strings_per_direction_in_both_shaping_models() {
        assert_eq!(FQ_CODEL.tc(20_000_000, Shaping::LinkRate), "fq_codel");
        assert_eq!(
            FQ_CODEL.tc(
                3_000_000,
                Shaping::Htb {
                    link_bit_s: 100_000_000
                }
            ),
            "htb rate 3000kbit burst 15k fq_codel"
        );
        assert_eq!(
            CAKE.tc(20_000_000, Shaping::LinkRate),
            "cake bandwidth 20000kbit diffserv3 triple-isolate"
        );
        assert_eq!(
            CAKE_LITE.tc(
                3_000_000,
                Shaping::Htb {
                    link_bit_s: 100_000_000
                }
            ),
            "cake bandwidth 3000kbit besteffort flows"
        );
    }

    #[test]
    fn codel_and_pie_contenders_get_ecn_and_unknown_qdiscs_are_errors() {
        let Ok(AnyQdisc::Codel(c)) = qdisc_of("codel ecn", 1) else {
            panic!("codel ecn builds CoDel");
        };
        assert!(c.config().ecn);
        let Ok(AnyQdisc::Pie(p)) = qdisc_of("pie ecn", 1) else {
            panic!("pie ecn builds PIE");
        };
        assert!(p.config().ecn);
        assert!(qdisc_of("no_such_qdisc", 1).is_err());
    }

    #[test]
    fn induced_latency_subtracts_the_base_and_skips_the_startup() {
        let s = [100.0, 500.0, 91.0, 95.0, 101.0];
        let i = induced(&s, 91.0, 2);
        assert_eq!(i.max, 10.0);
        assert_eq!(i.max_all, 409.0);
        assert!((i.mean - (0.0 + 4.0 + 10.0) / 3.0).abs() < 1e-9);
    }
}
