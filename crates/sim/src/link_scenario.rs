//! The one link-level scenario: a link ([`LinkDesc`]), how CAKE and its controller are
//! deployed on it ([`Deployment`]) and the bulk load that runs on it ([`Workload`]), and the
//! contenders by role ([`Role`]) that run on it; a link file's `[run]` table ([`Run`]) sets
//! all but the link.
//! Every backend that plays a single variable link takes this type: section C's closed loop (`experiments::c`, whose built-in scenarios and held-out links
//! are `LinkScenario`s built there, `experiments::c::scenario::scenario`) plays any deployment;
//! the namespace lab (`lab::scenario::Scenario::for_link_scenario`) plays the link as a home
//! router only ([`Deployment::HOME_ROUTER`]) and refuses, typed, a scenario deployed otherwise.
//!
//! **What this module owns**: the pair and its pure views and rewrites (the controllers' ranges,
//! the static rates, the deployment's parts, [`LinkScenario::as_home_router`],
//! [`LinkScenario::with_radio_delay`]), and the contenders' roles with their ids (the matrix's
//! and `purple lab run --link-of NAME --contenders`'s, [`Role::id`], [`Role::parse`]); which
//! contender plays a role is each backend's. **What it must not do**: run anything, or sample a
//! capacity the way one backend plays it (section C's 50 ms slots are section C's:
//! `experiments::c::scenario::played`); a backend maps the link and the deployment onto its own
//! topology.

use std::fmt;

use qdisc::{Duration, Rate};
use serde::Serialize;

use crate::deployment::{Deployment, ProbePath, ShaperAt, ThroughputFrom};
use crate::link_file::{LinkDesc, LinkError, RunTable};

/// A variable-link scenario: the link (the one single-link description, [`LinkDesc`]) and how
/// CAKE and the controllers are deployed on it.
#[derive(Clone, Debug)]
pub struct LinkScenario {
    /// The link: its name (`radio`, `step`, `fade`, `fast`, `outage`, `att-lte`, ...), words,
    /// simulated seconds at time scale 1, per direction the capacity as the backend is to play
    /// it (section C's: a synthetic series or a recorded trace), the radio hop's one-way delay,
    /// the controllers' range and the two static CAKE rates of the slides (C2 "safe", C3
    /// "optimistic"), and the radio's droptail buffer (the queue nobody can change).
    pub link: LinkDesc,
    /// Where CAKE sits, where the controllers read throughput and how their probes fare
    /// ([`Deployment`]). [`LinkScenario::new`] gives [`Deployment::SLIDES`]: CAKE in front of
    /// the radio, the radio's delivered bytes, probes queued with the data. With the shaper at
    /// the router the passive delay signal works: a capture at the router's WAN side sees the
    /// radio's queue without the shaper's own.
    pub deployment: Deployment,
    /// The bulk load that runs on the link ([`Workload`]). [`LinkScenario::new`] gives
    /// [`Workload::SECTION_C`].
    pub workload: Workload,
    /// The round trip of the simulated path beyond the link's own delays (its WAN and edge
    /// links). `None` ([`LinkScenario::new`]): the simulator's own, section C's `PATH_RTT`
    /// (8.4 ms). Set by [`LinkScenario::with_path_rtt`]: `purple demo --base-rtt-ms` on a link
    /// file, and the simulator's rows beside a lab run (the lab's measured idle round trip).
    /// The lab does not read it: its path is its veths, bridge and emulator.
    pub path_rtt: Option<Duration>,
    /// The contenders that run on it, by role, in table order. `None` ([`LinkScenario::new`]):
    /// the backend's own set (`purple demo`'s section C contenders and the late oracle, the
    /// matrix's every role, the lab's radio contenders). Set from a link file's `[run]
    /// contenders` ([`Run::apply`]); a command line's `--contenders` takes precedence.
    pub roles: Option<Vec<Role>>,
}

/// How a link is run, beside what it is: a link file's `[run]` table, checked
/// ([`Run::check`]). A key not given is `None`: each backend's own default. A backend applies
/// the deployment, the load and the contenders with [`Run::apply`], and the round trip by its
/// own rule (section C: `experiments::c::link::at_idle_rtt`; the lab, whose path is its own,
/// refuses it).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Run {
    /// `deployment`: [`Deployment::SLIDES`] (`slides`) or [`Deployment::HOME_ROUTER`]
    /// (`home-router`).
    pub deployment: Option<Deployment>,
    /// `downloads`: bulk TCP transfers towards the client, 1 ..= [`MAX_TRANSFERS`].
    pub downloads: Option<u16>,
    /// `uploads`: bulk TCP transfers from the client, 0 ..= [`MAX_TRANSFERS`].
    pub uploads: Option<u16>,
    /// `voip`: VoIP calls from the client ([`Workload::voip`]), 0 ..= [`MAX_TRANSFERS`].
    pub voip: Option<u16>,
    /// `contenders`: the roles to run, in table order, each once (at least one).
    pub roles: Option<Vec<Role>>,
    /// `base_rtt_ms`: the idle round trip asked for, ms (0 < x <= 10,000).
    pub base_rtt_ms: Option<f64>,
}

/// The most bulk transfers a link file's `[run]` asks for in one direction.
pub const MAX_TRANSFERS: u16 = 64;

impl Run {
    /// The `[run]` table `t` checked (`None`: a file without one, every key unset). Fails with
    /// [`LinkError::Option`] naming the key (`[run] deployment`, ...), the value and what is
    /// accepted; the file's reader adds its path.
    pub fn check(t: Option<&RunTable>) -> Result<Run, LinkError> {
        let Some(t) = t else {
            return Ok(Run::default());
        };
        let bad = |option: &'static str, value: String, accepted: String| LinkError::Option {
            option,
            value,
            accepted,
        };
        let deployment = match t.deployment.as_deref() {
            None => None,
            Some("slides") => Some(Deployment::SLIDES),
            Some("home-router") => Some(Deployment::HOME_ROUTER),
            Some(x) => {
                return Err(bad(
                    "[run] deployment",
                    format!("{x:?}"),
                    "\"slides\" (CAKE in front of the radio) or \"home-router\" (the download \
                     shaped at the router after the radio)"
                        .into(),
                ))
            }
        };
        let transfers = |v: Option<u16>, least: u16, key: &'static str| match v {
            Some(n) if !(least..=MAX_TRANSFERS).contains(&n) => Err(bad(
                key,
                n.to_string(),
                format!("{least} ..= {MAX_TRANSFERS}"),
            )),
            v => Ok(v),
        };
        let downloads = transfers(t.downloads, 1, "[run] downloads")?;
        let uploads = transfers(t.uploads, 0, "[run] uploads")?;
        let voip = transfers(t.voip, 0, "[run] voip")?;
        let known = || {
            Role::ALL
                .iter()
                .map(|r| r.id())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let roles = match &t.contenders {
            None => None,
            Some(ids) if ids.is_empty() => {
                return Err(bad(
                    "[run] contenders",
                    "[]".into(),
                    format!("one or more of {}", known()),
                ))
            }
            Some(ids) => {
                let mut roles: Vec<Role> = Vec::with_capacity(ids.len());
                for id in ids {
                    let r = Role::parse(id)
                        .map_err(|_| bad("[run] contenders", format!("{id:?}"), known()))?;
                    if roles.contains(&r) {
                        return Err(bad(
                            "[run] contenders",
                            format!("{id:?} twice"),
                            "each contender once".into(),
                        ));
                    }
                    roles.push(r);
                }
                Some(roles)
            }
        };
        let base_rtt_ms = match t.base_rtt_ms {
            Some(x) if !(x.is_finite() && x > 0.0 && x <= 10_000.0) => {
                return Err(bad(
                    "[run] base_rtt_ms",
                    x.to_string(),
                    "0 < ms <= 10000".into(),
                ))
            }
            x => x,
        };
        Ok(Run {
            deployment,
            downloads,
            uploads,
            voip,
            roles,
            base_rtt_ms,
        })
    }

    /// `base` with the table's `downloads`, `uploads` and `voip` in place of its own counts (a
    /// key the table does not give keeps `base`'s): what [`Run::apply`] sets, and what a
    /// backend with a load of its own (the lab's radio test) runs.
    pub fn workload_over(&self, base: Workload) -> Workload {
        Workload {
            downloads: self.downloads.unwrap_or(base.downloads),
            uploads: self.uploads.unwrap_or(base.uploads),
            voip: self.voip.unwrap_or(base.voip),
        }
    }

    /// `sc` with this run's deployment ([`LinkScenario::as_home_router`] for `home-router`),
    /// bulk load and contenders where given; the round trip is the backend's to apply.
    #[must_use]
    pub fn apply(&self, mut sc: LinkScenario) -> LinkScenario {
        match self.deployment {
            Some(d) if d == Deployment::HOME_ROUTER => sc = sc.as_home_router(),
            Some(d) => sc.deployment = d,
            None => {}
        }
        sc.workload = self.workload_over(sc.workload);
        if let Some(r) = &self.roles {
            sc.roles = Some(r.clone());
        }
        sc
    }
}

/// The bulk load of a link-level scenario: greedy TCP transfers each way (CUBIC with ECN, as
/// the lab's kernel TCP), started together at the beginning and running to the end. A backend
/// adds its own latency probes beside them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Workload {
    /// Transfers from the servers to the client.
    pub downloads: u16,
    /// Transfers from the client to the servers.
    pub uploads: u16,
    /// Isochronous VoIP calls from the client to the servers, EF-marked, one small frame
    /// every 20 ms for the whole run (the lab's `VoIP EF`: 172 bytes of payload; the
    /// simulator's `UdpSource::voip`: a 200-byte frame): a latency-sensitive flow beside the
    /// bulk load, not load itself.
    pub voip: u16,
}

impl Workload {
    /// Section C's load on every built-in link: four downloads and two uploads, no VoIP.
    pub const SECTION_C: Workload = Workload {
        downloads: 4,
        uploads: 2,
        voip: 0,
    };
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} TCP download{}, {} upload{}",
            self.downloads,
            if self.downloads == 1 { "" } else { "s" },
            self.uploads,
            if self.uploads == 1 { "" } else { "s" }
        )?;
        if self.voip > 0 {
            let s = if self.voip == 1 { "" } else { "s" };
            write!(f, ", {} VoIP call{s}", self.voip)?;
        }
        Ok(())
    }
}

impl LinkScenario {
    /// The slides' deployment ([`Deployment::SLIDES`]: CAKE in front of the radio, the radio's
    /// delivered bytes to the controllers, probes queued with the data) on `link`, taken as it
    /// is (its capacities are played as given).
    pub fn new(link: LinkDesc) -> LinkScenario {
        LinkScenario {
            link,
            deployment: Deployment::SLIDES,
            workload: Workload::SECTION_C,
            path_rtt: None,
            roles: None,
        }
    }

    /// How the agent's probes fare on this link (`deployment.probes`).
    pub fn probe_path(&self) -> ProbePath {
        self.deployment.probes
    }

    /// Whether the download CAKE sits at the router after the radio (ingress shaping, as
    /// sqm-scripts sets it up on a home router) instead of in front of the radio
    /// (`deployment.shaper`).
    pub fn shaper_at_router(&self) -> bool {
        self.deployment.shaper_at_router()
    }

    /// Whether the agent measures throughput from CAKE's own sent bytes, as `purple control`
    /// does from kernel CAKE's or `purple bridge`'s statistics, instead of the radio's
    /// delivered bytes (`deployment.throughput`).
    pub fn throughput_from_shaper(&self) -> bool {
        self.deployment.throughput_from_shaper()
    }

    /// The controllers' download range `(min, max)`.
    pub fn range_down(&self) -> (Rate, Rate) {
        let r = &self.link.down.rates;
        (Rate::from_mbit(r.lo), Rate::from_mbit(r.hi))
    }

    /// The controllers' upload range `(min, max)`.
    pub fn range_up(&self) -> (Rate, Rate) {
        let r = &self.link.up.rates;
        (Rate::from_mbit(r.lo), Rate::from_mbit(r.hi))
    }

    /// The two static CAKE rates of the slides (C2 "safe" and C3 "optimistic"), Mbit/s
    /// `(down, up)` each.
    pub fn statics(&self) -> [(f64, f64); 2] {
        let (d, u) = (&self.link.down.rates, &self.link.up.rates);
        [(d.safe, u.safe), (d.optimistic, u.optimistic)]
    }

    /// This link deployed as a home router deploys CAKE and its controller (sqm-scripts'
    /// layout, the lab's, `purple control`'s): the download shaped at the router after the
    /// radio ([`LinkScenario::shaper_at_router`]) and the controllers' throughput read from
    /// CAKE's own sent bytes both ways and, for the download, the WAN device's received bytes
    /// beside them ([`ThroughputFrom::Router`]); the probe
    /// path is kept. Where that changes the deployment, the link's description says so; a
    /// scenario deployed so already is returned unchanged.
    #[must_use]
    pub fn as_home_router(mut self) -> LinkScenario {
        if !self.deployment.download_delivered_beside() {
            self.deployment.shaper = ShaperAt::Router;
            self.deployment.throughput = ThroughputFrom::Router;
            self.link.description = format!(
                "{}; deployed as a home router: download shaped at the router after the radio, \
                 throughput read from CAKE's sent bytes both ways and the WAN device's received \
                 bytes",
                self.link.description
            );
        }
        self
    }

    /// This link with the radio hop's one-way propagation delay `one_way` in each direction,
    /// on a backend whose path adds `path_rtt` to the round trip (section C's
    /// `experiments::c::closed_loop::PATH_RTT`), so that the idle round trip is `path_rtt`
    /// plus twice `one_way`. The capacity, buffer and deployment are unchanged; where the delay
    /// changes, the description says the new round trip.
    #[must_use]
    pub fn with_radio_delay(mut self, one_way: Duration, path_rtt: Duration) -> LinkScenario {
        if self.link.down.delay != one_way || self.link.up.delay != one_way {
            self.link.down.delay = one_way;
            self.link.up.delay = one_way;
            let rtt = path_rtt + one_way + one_way;
            self.link.description = format!(
                "{}; idle round trip {:.1} ms",
                self.link.description,
                rtt.as_millis_f64()
            );
        }
        self
    }

    /// This link on a simulated path whose round trip beyond the link's own delays is
    /// `path_rtt` ([`LinkScenario::path_rtt`]), so that the idle round trip is `path_rtt` plus
    /// the link's delays both ways. The link is unchanged; the description says the new round
    /// trip (replacing the words of one set before by this method).
    #[must_use]
    pub fn with_path_rtt(mut self, path_rtt: Duration) -> LinkScenario {
        // A round trip set before (a link file's `[run] base_rtt_ms`, then a command line's)
        // is replaced in the words too.
        if self.path_rtt.is_some() {
            if let Some(i) = self.link.description.rfind("; idle round trip ") {
                self.link.description.truncate(i);
            }
        }
        self.path_rtt = Some(path_rtt);
        let rtt = path_rtt + self.link.down.delay + self.link.up.delay;
        self.link.description = format!(
            "{}; idle round trip {:.1} ms",
            self.link.description,
            rtt.as_millis_f64()
        );
        self
    }
}

/// A contender by role, independent of the link (the static rates are each link's own) and of
/// the backend: section C's matrix runs every role (`experiments::c::matrix::role_contender`
/// maps each to its closed-loop contender); the lab plays those it has a contender for
/// (`lab::scenario::Scenario::contenders_for`) and refuses the others, naming the role.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// A FIFO and no shaper: the radio's own droptail buffer is the queue (the bufferbloat
    /// reference every contender is measured against; the lab's `pfifo 1000, no shaping`).
    Fifo,
    /// C1: FQ-CoDel, no shaping.
    FqCodel,
    /// C2: CAKE at the link's safe static rate.
    StaticSafe,
    /// C3: CAKE at the link's optimistic static rate.
    StaticOptimistic,
    /// C4: PURPLE with the radio's queue metrics.
    PurpleRadio,
    /// C5: PURPLE-AIMD.
    PurpleAimd,
    /// cake-autorate's law.
    CakeAutorate,
    /// sqm-autorate's law.
    SqmAutorate,
    /// CAKE `autorate-ingress`.
    AutorateIngress,
    /// Our controller at its section-C parameters.
    Purple,
    /// 95% of the current interval's true capacity.
    Oracle,
    /// 95% of the previous interval's true capacity (section C's `Contender::OracleLagged`).
    OracleLate,
    /// 95% of the next 200 ms (recorded traces only; on synthetic links it equals the oracle).
    OracleLookahead,
    /// The censored oracle (section C's `Contender::OracleCensored`) at this probe gain, per cent: the
    /// reference for what delivery readings could tell a law at best.
    OracleCensored(u16),
    /// The saturated oracle (section C's `Contender::OracleSaturated`) at this probe gain, per
    /// cent: told the capacity only after an interval the radio delivered all of, what a
    /// perfect delivery reading shows. Run on request only (not in [`Role::MATRIX`]).
    OracleSaturated(u16),
}

/// The censored oracle's probe gains the matrix runs, per cent per interval, with their ids.
pub const CENSORED_GAINS: [(u16, &str); 3] = [
    (5, "oracle-censored-5"),
    (25, "oracle-censored-25"),
    (100, "oracle-censored-100"),
];

/// The saturated oracle's probe gains, per cent per interval, with their ids.
pub const SATURATED_GAINS: [(u16, &str); 3] = [
    (5, "oracle-saturated-5"),
    (25, "oracle-saturated-25"),
    (100, "oracle-saturated-100"),
];

impl Role {
    /// Every role, in table order: [`Role::MATRIX`]'s, then the saturated oracle's.
    pub const ALL: [Role; 19] = {
        let mut all = [Role::Fifo; 19];
        let mut i = 0;
        while i < Role::MATRIX.len() {
            all[i] = Role::MATRIX[i];
            i += 1;
        }
        let mut k = 0;
        while k < SATURATED_GAINS.len() {
            all[i + k] = Role::OracleSaturated(SATURATED_GAINS[k].0);
            k += 1;
        }
        all
    };

    /// The roles a matrix runs unless told which: every role but the saturated oracle's (a
    /// development reference, run with `--contenders`).
    pub const MATRIX: [Role; 16] = [
        Role::Fifo,
        Role::FqCodel,
        Role::StaticSafe,
        Role::StaticOptimistic,
        Role::PurpleRadio,
        Role::PurpleAimd,
        Role::CakeAutorate,
        Role::SqmAutorate,
        Role::AutorateIngress,
        Role::Purple,
        Role::Oracle,
        Role::OracleLate,
        Role::OracleLookahead,
        Role::OracleCensored(CENSORED_GAINS[0].0),
        Role::OracleCensored(CENSORED_GAINS[1].0),
        Role::OracleCensored(CENSORED_GAINS[2].0),
    ];

    /// The id used on the command line (`--contenders`) and in JSON.
    pub fn id(self) -> &'static str {
        match self {
            Role::Fifo => "fifo",
            Role::FqCodel => "fq-codel",
            Role::StaticSafe => "static-safe",
            Role::StaticOptimistic => "static-optimistic",
            Role::PurpleRadio => "purple-radio",
            Role::PurpleAimd => "purple-aimd",
            Role::CakeAutorate => "cake-autorate",
            Role::SqmAutorate => "sqm-autorate",
            Role::AutorateIngress => "autorate-ingress",
            Role::Purple => "purple",
            Role::Oracle => "oracle",
            Role::OracleLate => "oracle-late",
            Role::OracleLookahead => "oracle-lookahead",
            Role::OracleCensored(g) => CENSORED_GAINS
                .iter()
                .find(|(x, _)| *x == g)
                .map_or("oracle-censored", |(_, id)| id),
            Role::OracleSaturated(g) => SATURATED_GAINS
                .iter()
                .find(|(x, _)| *x == g)
                .map_or("oracle-saturated", |(_, id)| id),
        }
    }

    /// The role with this id (see [`Role::id`]); an unknown id is refused, naming the known
    /// ones.
    pub fn parse(id: &str) -> Result<Role, UnknownRole> {
        Role::ALL
            .into_iter()
            .find(|r| r.id() == id)
            .ok_or_else(|| UnknownRole(id.to_string()))
    }
}

/// A contender id that is no [`Role`]'s ([`Role::parse`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownRole(pub String);

impl fmt::Display for UnknownRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ids: Vec<&str> = Role::ALL.iter().map(|r| r.id()).collect();
        write!(
            f,
            "unknown contender {:?} (known: {})",
            self.0,
            ids.join(", ")
        )
    }
}

impl std::error::Error for UnknownRole {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Capacity;

    fn link() -> LinkDesc {
        LinkDesc::new(
            "t",
            "a test link",
            10.0,
            100,
            (Capacity::Rate(1_250_000), Duration::from_millis(1)),
            (Capacity::Rate(250_000), Duration::from_millis(1)),
        )
    }

    #[test]
    fn as_home_router_changes_the_shaper_and_throughput_only_and_says_so_once() {
        let s = LinkScenario {
            deployment: Deployment {
                probes: ProbePath::Dropped,
                ..Deployment::SLIDES
            },
            ..LinkScenario::new(link())
        };
        let r = s.clone().as_home_router();
        assert_eq!(
            r.deployment,
            Deployment {
                probes: ProbePath::Dropped,
                ..Deployment::HOME_ROUTER
            }
        );
        assert!(r
            .link
            .description
            .starts_with("a test link; deployed as a home router"));
        let again = r.clone().as_home_router();
        assert_eq!(again.link.description, r.link.description);
        assert_eq!(s.link.down.rates, r.link.down.rates);
    }

    #[test]
    fn with_radio_delay_sets_both_directions_and_names_the_round_trip() {
        let s = LinkScenario::new(link());
        let d = s
            .clone()
            .with_radio_delay(Duration::from_millis(5), Duration::from_micros(8_400));
        assert_eq!(d.link.down.delay, Duration::from_millis(5));
        assert_eq!(d.link.up.delay, Duration::from_millis(5));
        assert!(
            d.link.description.ends_with("; idle round trip 18.4 ms"),
            "{}",
            d.link.description
        );
        let same = s
            .clone()
            .with_radio_delay(s.link.down.delay, Duration::ZERO);
        assert_eq!(same.link.description, s.link.description);
    }

    /// A link file's text with `run` as its `[run]` table, parsed.
    fn with_run(run: &str) -> Result<(LinkDesc, Run), LinkError> {
        let text = format!("[down]\nrate = \"20mbit\"\n[up]\nrate = \"5mbit\"\n{run}");
        LinkDesc::parse(std::path::Path::new("t.toml"), &text, &|_| {
            unreachable!("no files")
        })?;
        LinkDesc::parse_with_run(std::path::Path::new("t.toml"), &text, &|_| {
            unreachable!("no files")
        })
    }

    #[test]
    fn a_link_files_run_table_sets_deployment_load_and_contenders_and_names_a_bad_key() {
        let (d, none) = with_run("").expect("no [run]");
        assert_eq!(none, Run::default());
        let plain = none.apply(LinkScenario::new(d.clone()));
        assert_eq!(
            (plain.deployment, plain.workload, plain.roles.clone()),
            (Deployment::SLIDES, Workload::SECTION_C, None)
        );
        let (_, run) = with_run(
            "[run]\ndeployment = \"home-router\"\ndownloads = 2\nuploads = 0\n\
             contenders = [\"purple\", \"oracle-late\", \"fifo\"]\nbase_rtt_ms = 30.0\n",
        )
        .expect("parses");
        assert_eq!(run.base_rtt_ms, Some(30.0));
        let sc = run.apply(LinkScenario::new(d.clone()));
        assert_eq!(sc.deployment, Deployment::HOME_ROUTER);
        assert!(sc.link.description.contains("deployed as a home router"));
        assert_eq!(
            sc.workload,
            Workload {
                downloads: 2,
                uploads: 0,
                voip: 0
            }
        );
        assert_eq!(
            sc.roles,
            Some(vec![Role::Purple, Role::OracleLate, Role::Fifo])
        );
        assert_eq!(
            sc.path_rtt, None,
            "the round trip is the backend's to apply"
        );
        // One key alone changes only itself.
        let (_, run) = with_run("[run]\nuploads = 3\n").expect("parses");
        let sc = run.apply(LinkScenario::new(d.clone()));
        assert_eq!((sc.workload.downloads, sc.workload.uploads), (4, 3));
        let (_, run) = with_run("[run]\nvoip = 2\n").expect("parses");
        let sc = run.apply(LinkScenario::new(d));
        assert_eq!(sc.workload.voip, 2);
        assert_eq!(
            sc.workload.to_string(),
            "4 TCP downloads, 2 uploads, 2 VoIP calls"
        );
        assert_eq!(sc.deployment, Deployment::SLIDES);
        // Each bad value names its key, the value and what is accepted, in the file.
        for (run, words) in [
            (
                "deployment = \"router\"",
                "t.toml: [run] deployment \"router\": accepted \"slides\"",
            ),
            (
                "downloads = 0",
                "t.toml: [run] downloads 0: accepted 1 ..= 64",
            ),
            (
                "uploads = 65",
                "t.toml: [run] uploads 65: accepted 0 ..= 64",
            ),
            (
                "contenders = []",
                "t.toml: [run] contenders []: accepted one or more of fifo, ",
            ),
            (
                "contenders = [\"purple\", \"nope\"]",
                "t.toml: [run] contenders \"nope\": accepted fifo, fq-codel, ",
            ),
            (
                "contenders = [\"purple\", \"purple\"]",
                "[run] contenders \"purple\" twice: accepted each contender once",
            ),
            (
                "base_rtt_ms = -1.0",
                "t.toml: [run] base_rtt_ms -1: accepted 0 < ms <= 10000",
            ),
        ] {
            let e = with_run(&format!("[run]\n{run}\n"))
                .expect_err(run)
                .to_string();
            assert!(e.starts_with(words) || e.contains(words), "{run}: {e}");
        }
        // An unknown key in the table is refused by name.
        let e = with_run("[run]\ndownload = 2\n")
            .expect_err("typo")
            .to_string();
        assert!(e.contains("download") && e.contains("t.toml"), "{e}");
    }

    #[test]
    fn the_matrix_runs_every_role_but_the_saturated_oracle_unless_told() {
        let left: Vec<Role> = Role::ALL
            .into_iter()
            .filter(|r| !Role::MATRIX.contains(r))
            .collect();
        assert_eq!(
            left,
            SATURATED_GAINS
                .map(|(g, _)| Role::OracleSaturated(g))
                .to_vec()
        );
        assert!(Role::MATRIX.iter().all(|r| Role::ALL.contains(r)));
        assert_eq!(
            Role::parse("oracle-saturated-25"),
            Ok(Role::OracleSaturated(25))
        );
    }

    #[test]
    fn every_role_parses_from_its_id_and_an_unknown_id_names_the_known_ones() {
        for r in Role::ALL {
            assert_eq!(Role::parse(r.id()), Ok(r));
        }
        let ids: std::collections::BTreeSet<&str> = Role::ALL.iter().map(|r| r.id()).collect();
        assert_eq!(ids.len(), Role::ALL.len(), "ids are unique");
        let e = Role::parse("nope").expect_err("unknown");
        assert!(
            e.to_string()
                .starts_with("unknown contender \"nope\" (known: fifo, fq-codel, static-safe, "),
            "{e}"
        );
    }
}
