//! How a shaper and its controller are deployed on a link: where CAKE sits, where the
//! controller reads throughput, and how its probes fare. One type for every link-level
//! scenario ([`LinkScenario::deployment`](crate::link_scenario::LinkScenario::deployment)),
//! whichever backend plays it: section C's closed loop (any of the combinations) and the lab
//! (`lab::scenario::Scenario::deployment`, always [`Deployment::HOME_ROUTER`]; it refuses a
//! scenario deployed otherwise).
//!
//! Pure data: nothing here runs a link. Each backend maps the parts onto its own topology;
//! [`Deployment::differences`] names, in words, where two deployments part, for a backend that
//! refuses a scenario deployed otherwise than it can play (`purple lab run --link-of`).

use std::fmt;

/// Where the download CAKE sits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ShaperAt {
    /// In front of the radio, as a controller on the radio itself would shape (the slides').
    #[default]
    Radio,
    /// At the router after the radio (ingress shaping, as sqm-scripts sets it up on a home
    /// router, and as the lab's bridge shapes). The passive delay signal needs this: a capture
    /// at the router's WAN side must see the radio's queue without the shaper's own.
    Router,
}

/// Where the controller reads the throughput it compares with its rate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ThroughputFrom {
    /// The radio's delivered bytes (what a controller on the radio itself sees).
    #[default]
    Radio,
    /// CAKE's own sent bytes both ways, as `purple control` reads kernel CAKE's or `purple
    /// bridge`'s statistics, alone (what `purple control` read at a router before stop 31).
    Shaper,
    /// What `purple control` reads at a router: CAKE's own sent bytes both ways and, for a
    /// download shaped at the router after the radio, the bytes the router's WAN device
    /// received beside them (the radio's delivery); per interval the larger of the two
    /// (`controller::agent::ReadingParams::delivered`). CAKE's sent bytes never exceed our
    /// rate, so a radio that delivered more than our rate shows it only in the received bytes.
    Router,
}

/// How the controller's probes fare on the link.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ProbePath {
    /// Probes queue with the data, and the reflectors answer them.
    #[default]
    Shared,
    /// The radio queues ICMP apart from data and serves it first (both directions), and the
    /// reflectors answer ICMP echo only (timestamp requests get no reply, as behind
    /// Starlink's CGNAT): ICMP probes do not see the download bloat.
    IcmpApart,
    /// Every probe is lost: the radio drops ICMP both ways and the reflectors are silent (ICMP
    /// blocked, no UDP reflector reachable).
    Dropped,
}

/// Where the shaper sits, where throughput is read and how probes fare. The default is the
/// slides' deployment ([`Deployment::SLIDES`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Deployment {
    /// Where the download CAKE sits (the upload CAKE is always in front of the radio's uplink).
    pub shaper: ShaperAt,
    /// Where the controller reads throughput.
    pub throughput: ThroughputFrom,
    /// How the probes fare.
    pub probes: ProbePath,
}

impl Deployment {
    /// The slides' deployment: CAKE in front of the radio, the radio's delivered bytes to the
    /// controller, probes queued with the data and answered.
    pub const SLIDES: Deployment = Deployment {
        shaper: ShaperAt::Radio,
        throughput: ThroughputFrom::Radio,
        probes: ProbePath::Shared,
    };

    /// A home router's deployment (sqm-scripts' layout, `purple control`'s, the lab's): the
    /// download shaped at the router after the radio, throughput from CAKE's sent bytes and the
    /// WAN device's received bytes ([`ThroughputFrom::Router`]), probes queued with the data
    /// and answered.
    pub const HOME_ROUTER: Deployment = Deployment {
        shaper: ShaperAt::Router,
        throughput: ThroughputFrom::Router,
        probes: ProbePath::Shared,
    };

    /// Whether the download CAKE sits at the router after the radio.
    pub fn shaper_at_router(&self) -> bool {
        self.shaper == ShaperAt::Router
    }

    /// Whether the controller reads throughput from CAKE's sent bytes (alone or beside the
    /// router's received bytes).
    pub fn throughput_from_shaper(&self) -> bool {
        matches!(
            self.throughput,
            ThroughputFrom::Shaper | ThroughputFrom::Router
        )
    }

    /// Whether the controller also reads the download's delivery before the shaper (the
    /// router's WAN device's received bytes): a download shaped at the router, throughput as
    /// [`ThroughputFrom::Router`] reads it.
    pub fn download_delivered_beside(&self) -> bool {
        self.shaper == ShaperAt::Router && self.throughput == ThroughputFrom::Router
    }

    /// Each part where `self` differs from `other`, in words naming `self`'s choice (empty when
    /// the two are the same), in the order shaper, throughput, probes.
    pub fn differences(&self, other: &Deployment) -> Vec<String> {
        let mut out = Vec::new();
        if self.shaper != other.shaper {
            out.push(self.shaper.to_string());
        }
        if self.throughput != other.throughput {
            out.push(self.throughput.to_string());
        }
        if self.probes != other.probes {
            out.push(self.probes.to_string());
        }
        out
    }
}

impl fmt::Display for ShaperAt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ShaperAt::Radio => "download shaped in front of the radio",
            ShaperAt::Router => "download shaped at the router after the radio",
        })
    }
}

impl fmt::Display for ThroughputFrom {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ThroughputFrom::Radio => "throughput read from the radio's delivered bytes",
            ThroughputFrom::Shaper => "throughput read from CAKE's sent bytes alone",
            ThroughputFrom::Router => {
                "throughput read from CAKE's sent bytes and, for a download shaped at the router, \
                 the WAN device's received bytes"
            }
        })
    }
}

impl fmt::Display for ProbePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ProbePath::Shared => "probes queued with the data and answered",
            ProbePath::IcmpApart => "ICMP served apart from data, reflectors answering echo only",
            ProbePath::Dropped => "every probe lost",
        })
    }
}

impl fmt::Display for Deployment {
    /// The three parts in words, separated by "; ".
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}; {}; {}", self.shaper, self.throughput, self.probes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_is_the_slides_and_differences_name_each_part() {
        assert_eq!(Deployment::default(), Deployment::SLIDES);
        assert!(Deployment::SLIDES
            .differences(&Deployment::SLIDES)
            .is_empty());
        let d = Deployment::SLIDES.differences(&Deployment::HOME_ROUTER);
        assert_eq!(
            d,
            [
                "download shaped in front of the radio",
                "throughput read from the radio's delivered bytes"
            ]
        );
        let no_probes = Deployment {
            probes: ProbePath::Dropped,
            ..Deployment::HOME_ROUTER
        };
        assert_eq!(
            no_probes.differences(&Deployment::HOME_ROUTER),
            ["every probe lost"]
        );
        assert!(no_probes.shaper_at_router() && no_probes.throughput_from_shaper());
        assert!(!Deployment::SLIDES.shaper_at_router());
    }
}
