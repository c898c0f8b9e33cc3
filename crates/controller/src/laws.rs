//! The registry of control laws: every [`Law`] this crate implements, by [`LawKind`], with its
//! name (as written in configuration files and logs, and as [`Law::name`] returns it) and the
//! one constructor that builds it from its parameters ([`LawKind::build`]).
//!
//! The daemon's `algorithm` option and the simulator's closed loop (section C, `purple demo
//! --matrix`) both choose their law here, so adding a law is one module implementing [`Law`]
//! plus one entry here: a variant of [`LawKind`], its line in [`LawKind::ALL`],
//! [`LawKind::name`] and [`LawKind::build`], and its parameters in [`LawParams`].

use std::fmt;

use crate::config::ConfigError;
use crate::engine::{Law, Needs};
use crate::{
    Aimd, AimdParams, CakeAutorate, CakeAutorateParams, Purple, PurpleParams, QueueMetrics,
    QueueMetricsParams, SqmAutorate, SqmAutorateParams,
};

/// A control law. Serialized as its [`LawKind::name`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LawKind {
    /// Our design ([`Purple`], `"purple"`). The default.
    #[default]
    Purple,
    /// PURPLE-AIMD, delay only ([`Aimd`], `"purple-aimd"`).
    PurpleAimd,
    /// The port of cake-autorate ([`CakeAutorate`], `"cake-autorate"`).
    CakeAutorate,
    /// The port of sqm-autorate ([`SqmAutorate`], `"sqm-autorate"`).
    SqmAutorate,
    /// Regular PURPLE with the radio's queue metrics, BLUE-like ([`QueueMetrics`],
    /// `"purple-queue"`). It needs the radio's metrics ([`Needs::RadioQueue`]), which only the
    /// simulator feeds: see [`LawKind::runs_without_radio`].
    PurpleQueue,
}

/// Every law's parameters, one field per [`LawKind`]; [`LawKind::build`] reads its own.
/// `LawParams::default()` gives every law its documented defaults.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LawParams {
    /// [`LawKind::Purple`]'s.
    pub purple: PurpleParams,
    /// [`LawKind::PurpleAimd`]'s.
    pub aimd: AimdParams,
    /// [`LawKind::CakeAutorate`]'s.
    pub cake_autorate: CakeAutorateParams,
    /// [`LawKind::SqmAutorate`]'s (its random draw is seeded from `seed` here).
    pub sqm_autorate: SqmAutorateParams,
    /// [`LawKind::PurpleQueue`]'s.
    pub purple_queue: QueueMetricsParams,
}

/// A law name that is not accepted: [`LawKind::from_name`]'s error. It names what was given
/// and the names that are accepted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownLaw {
    /// The name given.
    pub given: String,
    /// The laws that were accepted where it was given.
    pub accepted: Vec<LawKind>,
}

impl fmt::Display for UnknownLaw {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown control law {:?} (accepted: {})",
            self.given,
            LawKind::names(&self.accepted)
        )
    }
}
impl std::error::Error for UnknownLaw {}

impl LawKind {
    /// Every law, in the order the daemon's documentation lists them.
    pub const ALL: [LawKind; 5] = [
        LawKind::Purple,
        LawKind::PurpleAimd,
        LawKind::CakeAutorate,
        LawKind::SqmAutorate,
        LawKind::PurpleQueue,
    ];

    /// The name in configuration files and logs; [`Law::name`] of the law
    /// [`LawKind::build`] makes is the same (a unit test checks every kind).
    pub const fn name(self) -> &'static str {
        match self {
            LawKind::Purple => "purple",
            LawKind::PurpleAimd => "purple-aimd",
            LawKind::CakeAutorate => "cake-autorate",
            LawKind::SqmAutorate => "sqm-autorate",
            LawKind::PurpleQueue => "purple-queue",
        }
    }

    /// The law named `name` (exactly as [`LawKind::name`] writes it), among all of them.
    pub fn from_name(name: &str) -> Result<LawKind, UnknownLaw> {
        Self::from_name_among(name, &Self::ALL)
    }

    /// The law named `name` among `accepted` (a shell that runs only some laws, such as the
    /// daemon with [`LawKind::runs_without_radio`]); the error lists `accepted`.
    pub fn from_name_among(name: &str, accepted: &[LawKind]) -> Result<LawKind, UnknownLaw> {
        accepted
            .iter()
            .copied()
            .find(|k| k.name() == name)
            .ok_or_else(|| UnknownLaw {
                given: name.to_string(),
                accepted: accepted.to_vec(),
            })
    }

    /// `kinds`' names quoted, for error messages: `"purple", "purple-aimd" or "sqm-autorate"`.
    pub fn names(kinds: &[LawKind]) -> String {
        let quoted: Vec<String> = kinds.iter().map(|k| format!("{:?}", k.name())).collect();
        one_of(&quoted)
    }

    /// The law of this kind with its parameters from `params`, validated ([`Law::validate`]):
    /// the one place a law is constructed by kind. Errors name the rejected parameter.
    pub fn build(self, params: &LawParams) -> Result<Box<dyn Law + Send>, ConfigError> {
        let law: Box<dyn Law + Send> = match self {
            LawKind::Purple => Box::new(Purple::new(params.purple)),
            LawKind::PurpleAimd => Box::new(Aimd::new(params.aimd)),
            LawKind::CakeAutorate => Box::new(CakeAutorate::new(params.cake_autorate)),
            LawKind::SqmAutorate => Box::new(SqmAutorate::new(params.sqm_autorate)),
            LawKind::PurpleQueue => Box::new(QueueMetrics::new(params.purple_queue)),
        };
        law.validate()?;
        Ok(law)
    }

    /// Whether the law can run without the radio's queue metrics (on the probes, the passive
    /// estimate and the shaper's counters alone): what a shell without a radio feed, such as
    /// the daemon, may offer. Asked of the law itself ([`Law::needs`] at its defaults).
    pub fn runs_without_radio(self) -> bool {
        self.build(&LawParams::default())
            .is_ok_and(|law| law.needs() != Needs::RadioQueue)
    }

    /// Whether the law keeps its own windows of probe delays and so reads the probes only
    /// ([`Law::filters_probes`] of the law at its defaults): such a law cannot run on
    /// `delay_source = "passive"` ([`passive_refusal`]).
    pub fn filters_probes(self) -> bool {
        self.build(&LawParams::default())
            .is_ok_and(|law| law.filters_probes())
    }
}

/// `items` as a list for a message: `a`, `a or b`, `a, b or c`; `(none)` for none.
fn one_of(items: &[String]) -> String {
    match items.split_last() {
        None => "(none)".to_string(),
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
    }
}

/// What `delay_source` accepts when the law reads the probes only, for the refusal of
/// `delay_source = "passive"` with such a law (the engine's, [`crate::Engine::new`], and the
/// daemon's configuration check): `"probes" or "both" with algorithm cake-autorate or
/// sqm-autorate (they read the probes only)`, naming every law of [`LawKind::ALL`] whose
/// [`LawKind::filters_probes`] holds, in that order. Built once; the same text every call.
pub fn passive_refusal() -> &'static str {
    static TEXT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TEXT.get_or_init(|| {
        let laws: Vec<String> = LawKind::ALL
            .into_iter()
            .filter(|k| k.filters_probes())
            .map(|k| k.name().to_string())
            .collect();
        let they = if laws.len() == 1 {
            "it reads"
        } else {
            "they read"
        };
        format!(
            "\"probes\" or \"both\" with algorithm {} ({they} the probes only)",
            one_of(&laws)
        )
    })
}

impl fmt::Display for LawKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for LawKind {
    type Err = UnknownLaw;
    fn from_str(s: &str) -> Result<Self, UnknownLaw> {
        LawKind::from_name(s)
    }
}

impl serde::Serialize for LawKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for LawKind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        LawKind::from_name(&name).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_round_trips_through_its_name_and_builds_the_law_of_that_name() {
        for k in LawKind::ALL {
            assert_eq!(LawKind::from_name(k.name()), Ok(k));
            assert_eq!(k.name().parse::<LawKind>(), Ok(k));
            let law = k.build(&LawParams::default()).unwrap();
            assert_eq!(law.name(), k.name(), "{k:?}");
            let json = serde_json::to_string(&k).unwrap();
            assert_eq!(json, format!("{:?}", k.name()));
            assert_eq!(serde_json::from_str::<LawKind>(&json).unwrap(), k);
        }
        let mut names: Vec<&str> = LawKind::ALL.iter().map(|k| k.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), LawKind::ALL.len(), "names are unique");
    }

    #[test]
    fn an_unknown_name_is_refused_with_the_accepted_ones() {
        let e = LawKind::from_name("blue").unwrap_err();
        assert_eq!(e.given, "blue");
        assert_eq!(e.accepted, LawKind::ALL.to_vec());
        assert_eq!(
            e.to_string(),
            "unknown control law \"blue\" (accepted: \"purple\", \"purple-aimd\", \
             \"cake-autorate\", \"sqm-autorate\" or \"purple-queue\")"
        );
        let some = [LawKind::Purple, LawKind::CakeAutorate];
        let e = LawKind::from_name_among("purple-queue", &some).unwrap_err();
        assert_eq!(e.accepted, some.to_vec());
        assert!(e
            .to_string()
            .ends_with("(accepted: \"purple\" or \"cake-autorate\")"));
        assert!(
            serde_json::from_str::<LawKind>("\"Purple\"").is_err(),
            "names are exact"
        );
    }

    #[test]
    fn only_the_radio_law_needs_the_radio() {
        for k in LawKind::ALL {
            assert_eq!(k.runs_without_radio(), k != LawKind::PurpleQueue, "{k:?}");
        }
    }

    #[test]
    fn the_passive_refusal_names_the_laws_that_read_the_probes_only() {
        let text = passive_refusal();
        assert_eq!(
            text,
            "\"probes\" or \"both\" with algorithm cake-autorate or sqm-autorate (they read \
             the probes only)"
        );
        // Each law is named there exactly when it filters the probes itself.
        let words: Vec<&str> = text.split([' ', ',', '(', ')']).collect();
        for k in LawKind::ALL {
            let law = k.build(&LawParams::default()).unwrap();
            assert_eq!(k.filters_probes(), law.filters_probes(), "{k:?}");
            assert_eq!(
                words.contains(&k.name()),
                k.filters_probes(),
                "{k:?}: {text}"
            );
        }
        assert!(std::ptr::eq(text, passive_refusal()), "built once");
        assert_eq!(one_of(&[]), "(none)");
        assert_eq!(one_of(&["a".into()]), "a");
        assert_eq!(one_of(&["a".into(), "b".into(), "c".into()]), "a, b or c");
    }

    #[test]
    fn build_uses_the_given_parameters_and_refuses_invalid_ones() {
        let mut p = LawParams::default();
        p.purple.target = crate::Duration::from_millis(2);
        let law = LawKind::Purple.build(&p).unwrap();
        assert_eq!(law.name(), "purple");
        p.aimd.interval = crate::Duration::ZERO;
        assert!(LawKind::PurpleAimd.build(&p).is_err());
        assert!(
            LawKind::Purple.build(&p).is_ok(),
            "only the kind's own parameters count"
        );
    }
}
