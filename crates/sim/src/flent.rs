//! Which of Flent's tests a run is, and which of that test's data series each of its flows is.
//!
//! Flent (2.3) loads a data file only through the test definition its `NAME` names, and draws
//! its canned plots from that test's series names. A [`RunSummary`] carries a [`FlentLabels`]
//! saying which test it reproduces and which flow is which series; `purple-cli` writes the file
//! from it (`crates/cli/src/flent.rs`). Runs that are one of Flent's tests name it exactly
//! (the seeds' B1 is `tcp_upload`, `tcp_download` and `tcp_bidirectional`, B2 is `rrul`, ...);
//! any other run is written as the nearest generic test ([`nearest`]).
//!
//! The test and series names below are Flent's own (its `tests/*.conf`), so that its plots
//! find them; everything else here is ours.

use crate::summary::RunSummary;
use serde::Serialize;

/// One of Flent's tests that a run can be written as.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum FlentTest {
    /// `tcp_upload`: one TCP upload and an ICMP ping.
    TcpUpload,
    /// `tcp_download`: one TCP download and an ICMP ping.
    TcpDownload,
    /// `tcp_bidirectional`: one TCP flow each way and an ICMP ping.
    TcpBidirectional,
    /// `tcp_nup`: `streams` TCP uploads (test parameter `upload_streams`) and an ICMP ping.
    TcpNup {
        /// Number of uploads.
        streams: usize,
    },
    /// `tcp_ndown`: `streams` TCP downloads (test parameter `download_streams`) and an ICMP
    /// ping.
    TcpNdown {
        /// Number of downloads.
        streams: usize,
    },
    /// `rrul`: four TCP flows each way marked BE, BK (CS1), CS5 and EF; UDP probes marked EF,
    /// BK and BE; an ICMP ping.
    Rrul,
    /// `rrul_be`: `rrul` with every flow best effort (four TCP flows each way, three UDP
    /// probes, an ICMP ping).
    RrulBe,
    /// `rrul_50_up`: 50 TCP uploads and one download, three UDP probes, an ICMP ping.
    Rrul50Up,
    /// `rrul_50_down`: 50 TCP downloads and one upload, three UDP probes, an ICMP ping.
    Rrul50Down,
    /// `rrul_be_nflows`: `up` TCP uploads and `down` downloads (test parameters
    /// `upload_streams`, `download_streams`), a UDP probe and an ICMP ping.
    RrulBeNflows {
        /// Number of uploads.
        up: usize,
        /// Number of downloads.
        down: usize,
    },
    /// `udp_flood`: one UDP flood upload and an ICMP ping.
    UdpFlood,
    /// `ping`: an ICMP and a UDP ping, no load.
    Ping,
}

/// What a data series holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Measure {
    /// Goodput in Mbit/s per bin (Flent's `TCP ...` and `UDP upload` series).
    Goodput,
    /// Round-trip (or one-way) latency in ms per bin (Flent's `Ping (ms) ...` series).
    Latency,
}

/// How Flent computes a series from the data series (its `runner` of that name).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Runner {
    /// `sum`: the sum of the inputs' values in each bin.
    Sum,
    /// `average`: their mean.
    Average,
    /// `fairness`: Jain's fairness index of them.
    Fairness,
}

/// A series a test computes from its data series in every bin (e.g. rrul's `TCP upload sum`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Computed {
    /// Flent's name of the series.
    pub name: &'static str,
    /// How it is computed.
    pub runner: Runner,
    /// Its inputs: the test's data series whose names start with this.
    pub over: &'static str,
    /// Its unit as Flent writes it.
    pub units: &'static str,
}

const PING_ICMP: &str = "Ping (ms) ICMP";

impl FlentTest {
    /// The test's name in Flent (its `NAME` metadata and `tests/NAME.conf`).
    pub fn name(&self) -> &'static str {
        match self {
            FlentTest::TcpUpload => "tcp_upload",
            FlentTest::TcpDownload => "tcp_download",
            FlentTest::TcpBidirectional => "tcp_bidirectional",
            FlentTest::TcpNup { .. } => "tcp_nup",
            FlentTest::TcpNdown { .. } => "tcp_ndown",
            FlentTest::Rrul => "rrul",
            FlentTest::RrulBe => "rrul_be",
            FlentTest::Rrul50Up => "rrul_50_up",
            FlentTest::Rrul50Down => "rrul_50_down",
            FlentTest::RrulBeNflows { .. } => "rrul_be_nflows",
            FlentTest::UdpFlood => "udp_flood",
            FlentTest::Ping => "ping",
        }
    }

    /// Every data series the test measures (not those it computes), by Flent's names.
    pub fn data_series(&self) -> Vec<String> {
        let n = |prefix: &str, k: usize| -> Vec<String> {
            (1..=k).map(|i| format!("{prefix}::{i}")).collect()
        };
        let strs = |v: &[&str]| -> Vec<String> { v.iter().map(|s| s.to_string()).collect() };
        let mut v = match *self {
            FlentTest::TcpUpload => strs(&["TCP upload"]),
            FlentTest::TcpDownload => strs(&["TCP download"]),
            FlentTest::TcpBidirectional => strs(&["TCP download", "TCP upload"]),
            FlentTest::TcpNup { streams } => n("TCP upload", streams),
            FlentTest::TcpNdown { streams } => n("TCP download", streams),
            FlentTest::Rrul => {
                let mut v = Vec::new();
                for dir in ["upload", "download"] {
                    for m in ["BE", "BK", "CS5", "EF"] {
                        v.push(format!("TCP {dir} {m}"));
                    }
                }
                v.extend(strs(&[
                    "Ping (ms) UDP EF",
                    "Ping (ms) UDP BK",
                    "Ping (ms) UDP BE",
                ]));
                v
            }
            FlentTest::RrulBe => {
                let mut v = Vec::new();
                for dir in ["upload", "download"] {
                    v.push(format!("TCP {dir} BE"));
                    for k in 2..=4 {
                        v.push(format!("TCP {dir} BE{k}"));
                    }
                }
                v.extend((1..=3).map(|k| format!("Ping (ms) UDP BE{k}")));
                v
            }
            FlentTest::Rrul50Up | FlentTest::Rrul50Down => {
                let (many, one) = if *self == FlentTest::Rrul50Up {
                    ("upload", "download")
                } else {
                    ("download", "upload")
                };
                let mut v = n(&format!("TCP {many} BE"), 50);
                v.push(format!("TCP {one} BE"));
                v.extend((1..=3).map(|k| format!("Ping (ms) UDP BE{k}")));
                v
            }
            FlentTest::RrulBeNflows { up, down } => {
                let mut v = n("TCP upload BE", up);
                v.extend(n("TCP download BE", down));
                v.push("Ping (ms) UDP BE".into());
                v
            }
            FlentTest::UdpFlood => strs(&["UDP upload"]),
            FlentTest::Ping => strs(&["Ping (ms) UDP"]),
        };
        v.push(PING_ICMP.into());
        v
    }

    /// The series the test computes from its data series, as Flent defines them.
    pub fn computed(&self) -> Vec<Computed> {
        let c = |name, runner, over, units| Computed {
            name,
            runner,
            over,
            units,
        };
        let mbit = "Mbits/s";
        let ping_avg = c("Ping (ms) avg", Runner::Average, "Ping (ms)", "ms");
        match self {
            FlentTest::TcpUpload
            | FlentTest::TcpDownload
            | FlentTest::TcpBidirectional
            | FlentTest::UdpFlood
            | FlentTest::Ping => Vec::new(),
            FlentTest::TcpNup { .. } => vec![
                c("TCP upload avg", Runner::Average, "TCP upload::", mbit),
                c("TCP upload sum", Runner::Sum, "TCP upload::", mbit),
                c(
                    "TCP upload fairness",
                    Runner::Fairness,
                    "TCP upload::",
                    "Idx",
                ),
            ],
            FlentTest::TcpNdown { .. } => vec![
                c("TCP download avg", Runner::Average, "TCP download::", mbit),
                c("TCP download sum", Runner::Sum, "TCP download::", mbit),
                c(
                    "TCP download fairness",
                    Runner::Fairness,
                    "TCP download::",
                    "Idx",
                ),
            ],
            FlentTest::Rrul | FlentTest::RrulBe => vec![
                c("TCP upload avg", Runner::Average, "TCP upload", mbit),
                c("TCP upload sum", Runner::Sum, "TCP upload", mbit),
                c("TCP download avg", Runner::Average, "TCP download", mbit),
                c("TCP download sum", Runner::Sum, "TCP download", mbit),
                c("TCP totals", Runner::Sum, "TCP ", mbit),
                ping_avg,
            ],
            FlentTest::Rrul50Up => vec![
                c("TCP upload avg", Runner::Average, "TCP upload BE::", mbit),
                c("TCP upload sum", Runner::Sum, "TCP upload BE::", mbit),
                c("TCP download avg", Runner::Average, "TCP download", mbit),
                c("TCP download sum", Runner::Sum, "TCP download", mbit),
                ping_avg,
            ],
            FlentTest::Rrul50Down => vec![
                c("TCP upload avg", Runner::Average, "TCP upload", mbit),
                c("TCP upload sum", Runner::Sum, "TCP upload", mbit),
                c(
                    "TCP download avg",
                    Runner::Average,
                    "TCP download BE::",
                    mbit,
                ),
                c("TCP download sum", Runner::Sum, "TCP download BE::", mbit),
                ping_avg,
            ],
            FlentTest::RrulBeNflows { .. } => vec![
                c("TCP upload avg", Runner::Average, "TCP upload BE::", mbit),
                c("TCP upload sum", Runner::Sum, "TCP upload BE::", mbit),
                c(
                    "TCP download avg",
                    Runner::Average,
                    "TCP download BE::",
                    mbit,
                ),
                c("TCP download sum", Runner::Sum, "TCP download BE::", mbit),
                c("TCP totals", Runner::Sum, "TCP ", mbit),
                ping_avg,
            ],
        }
    }

    /// The test parameters its definition reads (`TEST_PARAMETERS` in the file), as Flent's
    /// `--test-parameter NAME=VALUE` would give them.
    pub fn parameters(&self) -> Vec<(&'static str, String)> {
        match *self {
            FlentTest::TcpNup { streams } => vec![("upload_streams", streams.to_string())],
            FlentTest::TcpNdown { streams } => vec![("download_streams", streams.to_string())],
            FlentTest::RrulBeNflows { up, down } => vec![
                ("upload_streams", up.to_string()),
                ("download_streams", down.to_string()),
            ],
            _ => Vec::new(),
        }
    }

    /// The plot Flent draws for this test when none is named (its `DEFAULTS['PLOT']`): the
    /// rrul family's `all_scaled` (download, upload and ping), `totals` for the TCP and UDP
    /// tests, `ping` for `ping`.
    pub fn default_plot(&self) -> &'static str {
        match self {
            FlentTest::Rrul
            | FlentTest::RrulBe
            | FlentTest::Rrul50Up
            | FlentTest::Rrul50Down
            | FlentTest::RrulBeNflows { .. } => "all_scaled",
            FlentTest::Ping => "ping",
            _ => "totals",
        }
    }
}

/// What series `name` of a Flent test holds: latency for `Ping (ms) ...`, goodput otherwise.
pub fn measure(name: &str) -> Measure {
    if name.starts_with("Ping (ms)") {
        Measure::Latency
    } else {
        Measure::Goodput
    }
}

/// A run's Flent test and the test's data series each of its flows is.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FlentLabels {
    /// The test.
    pub test: FlentTest,
    /// Seconds from the run's start to the start of its load (Flent's `DELAY`: probes run
    /// from 0, the load from here); 0 for the simulator's runs.
    pub delay_s: f64,
    /// `(flow, series)`: our flow's name and the test's data series it is. Flows not listed
    /// are written beside them under their own names.
    pub series: Vec<(String, String)>,
}

/// A [`FlentLabels`] that does not fit its run or its test.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FlentError {
    /// The run carries no label.
    Unlabelled {
        /// The run.
        run: String,
    },
    /// A series the test does not define.
    UnknownSeries {
        /// The test's name.
        test: &'static str,
        /// The series.
        series: String,
    },
    /// Two flows labelled as the same series.
    DuplicateSeries {
        /// The series.
        series: String,
    },
    /// A labelled flow the run does not have.
    NoSuchFlow {
        /// The run.
        run: String,
        /// The flow.
        flow: String,
    },
}

impl std::fmt::Display for FlentError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FlentError::Unlabelled { run } => {
                write!(f, "run {run:?} does not say which Flent test it is")
            }
            FlentError::UnknownSeries { test, series } => {
                write!(f, "Flent's {test} test has no data series {series:?}")
            }
            FlentError::DuplicateSeries { series } => {
                write!(f, "two flows are labelled as Flent series {series:?}")
            }
            FlentError::NoSuchFlow { run, flow } => {
                write!(
                    f,
                    "run {run:?} has no flow {flow:?} to write as a Flent series"
                )
            }
        }
    }
}

impl std::error::Error for FlentError {}

impl FlentLabels {
    /// `test` with `series` (`(flow, Flent series)` pairs) and the load starting at 0.
    pub fn new<F: Into<String>, S: Into<String>>(
        test: FlentTest,
        series: impl IntoIterator<Item = (F, S)>,
    ) -> Self {
        FlentLabels {
            test,
            delay_s: 0.0,
            series: series
                .into_iter()
                .map(|(f, s)| (f.into(), s.into()))
                .collect(),
        }
    }

    /// `test` for flows named exactly as the test's data series (those that are; the others
    /// stay extra series).
    pub fn by_name<'a>(test: FlentTest, flows: impl IntoIterator<Item = &'a str>) -> Self {
        let known = test.data_series();
        FlentLabels::new(
            test,
            flows
                .into_iter()
                .filter(|f| known.iter().any(|k| k == f))
                .map(|f| (f, f)),
        )
    }

    /// The same labels with the load starting `delay_s` seconds into the run.
    pub fn with_delay(mut self, delay_s: f64) -> Self {
        self.delay_s = delay_s;
        self
    }

    /// The Flent series of flow `flow`, if it is one.
    pub fn series_of(&self, flow: &str) -> Option<&str> {
        self.series
            .iter()
            .find(|(f, _)| f == flow)
            .map(|(_, s)| s.as_str())
    }

    /// Whether every label names a data series of the test, once, and a flow of `run`.
    pub fn check(&self, run: &RunSummary) -> Result<(), FlentError> {
        let known = self.test.data_series();
        for (i, (flow, series)) in self.series.iter().enumerate() {
            if !known.contains(series) {
                return Err(FlentError::UnknownSeries {
                    test: self.test.name(),
                    series: series.clone(),
                });
            }
            if self.series[..i].iter().any(|(_, s)| s == series) {
                return Err(FlentError::DuplicateSeries {
                    series: series.clone(),
                });
            }
            if run.flow(flow).is_none() {
                return Err(FlentError::NoSuchFlow {
                    run: run.name.clone(),
                    flow: flow.clone(),
                });
            }
        }
        Ok(())
    }
}

/// What a flow does, seen from the host Flent would run on (the client), for [`nearest`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// A TCP flow from the client.
    TcpUpload,
    /// A TCP flow to the client.
    TcpDownload,
    /// An ICMP ping from the client.
    IcmpPing,
    /// A UDP round-trip probe from the client.
    UdpPing,
    /// A UDP flood (greedy or CBR) from the client.
    UdpUpload,
    /// Anything else (ACK flows, VoIP, flows between other hosts): an extra series.
    Other,
}

/// The nearest Flent test for flows of these roles, with the flows it has series for:
///
/// | uploads / downloads | test |
/// |---|---|
/// | 1 / 0, 0 / 1, 1 / 1 | `tcp_upload`, `tcp_download`, `tcp_bidirectional` |
/// | N / 0, 0 / N | `tcp_nup`, `tcp_ndown` with N streams |
/// | N / M otherwise | `rrul_be_nflows` with N up and M down |
/// | none, a UDP flood | `udp_flood` |
/// | none | `ping` |
///
/// TCP flows become the test's streams in the order given; the first ICMP ping is
/// `Ping (ms) ICMP`; the first UDP probe is the test's UDP probe where it has one
/// (`rrul_be_nflows`, `ping`); everything else stays an extra series.
pub fn nearest(flows: &[(&str, Role)]) -> FlentLabels {
    let of = |r: Role| -> Vec<&str> {
        flows
            .iter()
            .filter(|(_, x)| *x == r)
            .map(|(n, _)| *n)
            .collect()
    };
    let (ups, downs) = (of(Role::TcpUpload), of(Role::TcpDownload));
    let floods = of(Role::UdpUpload);
    let numbered = |prefix: &str, v: &[&str]| -> Vec<(String, String)> {
        v.iter()
            .enumerate()
            .map(|(i, f)| (f.to_string(), format!("{prefix}::{}", i + 1)))
            .collect()
    };
    let (test, mut series, udp_probe): (FlentTest, Vec<(String, String)>, Option<&str>) =
        match (ups.len(), downs.len()) {
            (1, 0) => (
                FlentTest::TcpUpload,
                vec![(ups[0].into(), "TCP upload".into())],
                None,
            ),
            (0, 1) => (
                FlentTest::TcpDownload,
                vec![(downs[0].into(), "TCP download".into())],
                None,
            ),
            (1, 1) => (
                FlentTest::TcpBidirectional,
                vec![
                    (ups[0].into(), "TCP upload".into()),
                    (downs[0].into(), "TCP download".into()),
                ],
                None,
            ),
            (n, 0) if n > 0 => (
                FlentTest::TcpNup { streams: n },
                numbered("TCP upload", &ups),
                None,
            ),
            (0, n) if n > 0 => (
                FlentTest::TcpNdown { streams: n },
                numbered("TCP download", &downs),
                None,
            ),
            (0, 0) if !floods.is_empty() => (
                FlentTest::UdpFlood,
                vec![(floods[0].into(), "UDP upload".into())],
                None,
            ),
            (0, 0) => (FlentTest::Ping, Vec::new(), Some("Ping (ms) UDP")),
            (up, down) => {
                let mut s = numbered("TCP upload BE", &ups);
                s.extend(numbered("TCP download BE", &downs));
                (
                    FlentTest::RrulBeNflows { up, down },
                    s,
                    Some("Ping (ms) UDP BE"),
                )
            }
        };
    if let Some(p) = of(Role::IcmpPing).first() {
        series.push((p.to_string(), PING_ICMP.into()));
    }
    if let (Some(name), Some(p)) = (udp_probe, of(Role::UdpPing).first()) {
        series.push((p.to_string(), name.into()));
    }
    FlentLabels::new(test, series)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::summary::FlowSummary;

    fn run_with(flows: &[&str]) -> RunSummary {
        RunSummary {
            name: "r".into(),
            flows: flows
                .iter()
                .map(|n| FlowSummary {
                    name: n.to_string(),
                    ..FlowSummary::default()
                })
                .collect(),
            ..RunSummary::default()
        }
    }

    #[test]
    fn rrul_defines_flents_twelve_data_series_and_its_aggregates() {
        let d = FlentTest::Rrul.data_series();
        assert_eq!(d.len(), 12);
        for s in [
            "TCP upload BK",
            "TCP download CS5",
            "Ping (ms) UDP EF",
            "Ping (ms) ICMP",
        ] {
            assert!(d.iter().any(|x| x == s), "{s}");
        }
        let c: Vec<&str> = FlentTest::Rrul.computed().iter().map(|c| c.name).collect();
        assert_eq!(
            c,
            [
                "TCP upload avg",
                "TCP upload sum",
                "TCP download avg",
                "TCP download sum",
                "TCP totals",
                "Ping (ms) avg"
            ]
        );
        assert_eq!(FlentTest::Rrul.default_plot(), "all_scaled");
        assert_eq!(FlentTest::TcpUpload.default_plot(), "totals");
    }

    #[test]
    fn duplicated_streams_are_numbered_from_one_and_their_count_is_a_parameter() {
        let d = FlentTest::Rrul50Up.data_series();
        assert!(d.contains(&"TCP upload BE::1".to_string()));
        assert!(d.contains(&"TCP upload BE::50".to_string()));
        assert!(!d.contains(&"TCP upload BE::51".to_string()));
        assert!(d.contains(&"TCP download BE".to_string()));
        assert_eq!(
            FlentTest::TcpNup { streams: 3 }.parameters(),
            vec![("upload_streams", "3".to_string())]
        );
    }

    #[test]
    fn nearest_picks_flents_single_flow_tests_then_the_n_flow_ones() {
        use Role::*;
        let l = nearest(&[("p", IcmpPing), ("u", TcpUpload), ("a", Other)]);
        assert_eq!(l.test, FlentTest::TcpUpload);
        assert_eq!(l.series_of("u"), Some("TCP upload"));
        assert_eq!(l.series_of("p"), Some("Ping (ms) ICMP"));
        assert_eq!(l.series_of("a"), None);
        let l = nearest(&[("u", TcpUpload), ("d", TcpDownload)]);
        assert_eq!(l.test, FlentTest::TcpBidirectional);
        let l = nearest(&[("u1", TcpUpload), ("u2", TcpUpload), ("q", UdpPing)]);
        assert_eq!(l.test, FlentTest::TcpNup { streams: 2 });
        assert_eq!(l.series_of("u2"), Some("TCP upload::2"));
        assert_eq!(l.series_of("q"), None, "tcp_nup has no UDP probe");
        let l = nearest(&[
            ("u", TcpUpload),
            ("d1", TcpDownload),
            ("d2", TcpDownload),
            ("q", UdpPing),
        ]);
        assert_eq!(l.test, FlentTest::RrulBeNflows { up: 1, down: 2 });
        assert_eq!(l.series_of("d2"), Some("TCP download BE::2"));
        assert_eq!(l.series_of("q"), Some("Ping (ms) UDP BE"));
        assert_eq!(nearest(&[("f", UdpUpload)]).test, FlentTest::UdpFlood);
        assert_eq!(nearest(&[("p", IcmpPing)]).test, FlentTest::Ping);
        // Every choice labels only series its test defines.
        for l in [
            nearest(&[("u", TcpUpload), ("d", TcpDownload), ("q", UdpPing)]),
            nearest(&[("f", UdpUpload), ("p", IcmpPing)]),
            nearest(&[("q", UdpPing), ("p", IcmpPing)]),
        ] {
            let flows: Vec<&str> = l.series.iter().map(|(f, _)| f.as_str()).collect();
            assert_eq!(l.check(&run_with(&flows)), Ok(()), "{l:?}");
        }
    }

    #[test]
    fn check_names_a_series_the_test_lacks_a_duplicate_and_a_missing_flow() {
        let run = run_with(&["a", "b"]);
        let bad = FlentLabels::new(FlentTest::TcpUpload, [("a", "TCP download")]);
        assert!(matches!(
            bad.check(&run),
            Err(FlentError::UnknownSeries { .. })
        ));
        let dup = FlentLabels::new(
            FlentTest::TcpUpload,
            [("a", "TCP upload"), ("b", "TCP upload")],
        );
        assert!(matches!(
            dup.check(&run),
            Err(FlentError::DuplicateSeries { .. })
        ));
        let gone = FlentLabels::new(FlentTest::TcpUpload, [("c", "TCP upload")]);
        let e = gone.check(&run).expect_err("no flow c");
        assert!(e.to_string().contains("\"c\""), "{e}");
        let by = FlentLabels::by_name(FlentTest::Rrul, ["TCP upload BE", "VoIP EF"]);
        assert_eq!(
            by.series,
            vec![("TCP upload BE".into(), "TCP upload BE".into())]
        );
    }
}
