//! Who sets CAKE's rate in a closed loop ([`Contender`]), and which registered law
//! ([`controller::LawKind`]) each controller runs.

use super::super::scenario::{Scenario, SlotCapacity};
use controller::{DelaySource, Law, LawKind, LawParams, PurpleParams, SqmAutorateParams};

/// Who sets CAKE's rate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Contender {
    /// No qdisc and no shaper: the radio's droptail buffer holds the queue (the bufferbloat
    /// reference; the matrix's `fifo`, not in section C's tables).
    Fifo,
    /// C1: FQ-CoDel at the radio's egress, no shaping.
    FqCodel,
    /// C2/C3: CAKE at a static rate, Mbit/s `(down, up)`.
    CakeStatic(f64, f64),
    /// C4: PURPLE with the radio's queue metrics (BLUE-like, `controller::QueueMetrics`).
    PurpleRadio,
    /// C5: PURPLE-AIMD, delay only (`controller::Aimd`).
    PurpleAimd,
    /// cake-autorate's algorithm (`controller::CakeAutorate`).
    CakeAutorate,
    /// sqm-autorate's algorithm (`controller::SqmAutorate`).
    SqmAutorate,
    /// CAKE's own `autorate-ingress` after the radio.
    AutorateIngress,
    /// 95% of the true capacity of the current control interval, set at the start of every
    /// [`STEP`](super::STEP) (the upper reference the issue defines: no lookahead beyond the
    /// interval).
    Oracle,
    /// 95% of the true mean capacity of the next 200 ms, set every [`STEP`](super::STEP): an
    /// oracle that also sees the future (only listed for the recorded traces, where it differs
    /// from [`Contender::Oracle`]; on the synthetic series both read the current slot's
    /// rate).
    OracleLookahead,
    /// Our design (`controller::Purple`), without radio metrics.
    Purple,
    /// 95% of the true capacity of the *previous* [`STEP`](super::STEP): a perfect capacity
    /// measurement that, like every real controller's, arrives one interval late. Not in the
    /// tables; it bounds what any measurement-driven law can reach (the p99 a drop's first
    /// interval costs).
    OracleLagged,
    /// A reference for what a law learning the capacity from delivery readings could know at
    /// best: told the previous [`STEP`](super::STEP)'s true capacity only when it was at most
    /// the rate this contender had set (the link was the bottleneck, so its delivery would be
    /// the capacity), and then shaping to 95% of it, as the late oracle does; otherwise told
    /// only that the capacity was above its rate, it raises the rate by this many per cent per
    /// interval. It starts at the controllers' base rate, not at the capacity, and stays in
    /// their configured range as a law does. Not in the tables; the matrix runs it at three
    /// gains (`oracle-censored-5`, `-25`, `-100`).
    OracleCensored(u16),
    /// The saturated oracle (a reference since stop 39): as the censored one, but told the
    /// capacity of the interval just gone only when the radio delivered all of it (at least
    /// [`SATURATED`](super::SATURATED) of it, less one frame), which is exactly when that
    /// interval's delivery *is* the capacity: what a perfect delivery reading can show, no
    /// more (an interval whose capacity carries less than a frame, an outage, passes whatever
    /// was offered). Otherwise it raises its rate by the gain (per cent) per interval. Not in
    /// the tables; the matrix runs it on request (`oracle-saturated-G`), `c_judge` as
    /// `oracle=saturated-G`.
    OracleSaturated(u16),
    /// `purple` with the probes and the passive delay signal (`delay_source = "both"`, the
    /// daemon's default), on scenarios with the shaper at the router.
    PurplePassive,
    /// `purple` with the passive delay signal alone (`delay_source = "passive"`, no probe).
    PurplePassiveOnly,
}

impl Contender {
    /// Display name (as in the tables).
    pub fn name(&self) -> String {
        match self {
            Contender::Fifo => "FIFO (unshaped)".into(),
            Contender::FqCodel => "FQ-CoDel (unshaped)".into(),
            Contender::CakeStatic(d, u) => format!("CAKE static {d}/{u}M"),
            Contender::PurpleRadio => "PURPLE (radio metrics)".into(),
            Contender::PurpleAimd => "PURPLE-AIMD".into(),
            Contender::CakeAutorate => "cake-autorate".into(),
            Contender::SqmAutorate => "sqm-autorate".into(),
            Contender::AutorateIngress => "CAKE autorate-ingress".into(),
            Contender::Oracle => "oracle (95% of capacity)".into(),
            Contender::OracleLookahead => "oracle, 200 ms lookahead".into(),
            Contender::Purple => "purple (ours)".into(),
            Contender::OracleLagged => "oracle, one interval late".into(),
            Contender::OracleCensored(g) => format!("oracle, censored, +{g}%"),
            Contender::OracleSaturated(g) => format!("oracle, saturated, +{g}%"),
            Contender::PurplePassive => "purple, probes + passive".into(),
            Contender::PurplePassiveOnly => "purple, passive only".into(),
        }
    }

    /// Every contender for scenario `s`, in table order (C1..C5 first; the lookahead oracle last,
    /// on traces only).
    pub fn all(s: &Scenario) -> Vec<Contender> {
        let mut v = vec![
            Contender::FqCodel,
            Contender::CakeStatic(s.statics()[0].0, s.statics()[0].1),
            Contender::CakeStatic(s.statics()[1].0, s.statics()[1].1),
            Contender::PurpleRadio,
            Contender::PurpleAimd,
            Contender::CakeAutorate,
            Contender::SqmAutorate,
            Contender::AutorateIngress,
            Contender::Oracle,
            Contender::Purple,
        ];
        if !s.link.down.capacity.is_series() {
            v.push(Contender::OracleLookahead);
        }
        if s.shaper_at_router() {
            v.extend([Contender::PurplePassive, Contender::PurplePassiveOnly]);
        }
        v
    }

    /// The delay source this contender's agent runs with: passive ones as named, every other
    /// law on the probes alone (as before the passive signal existed).
    pub fn delay_source(&self) -> DelaySource {
        match self {
            Contender::PurplePassive => DelaySource::Both,
            Contender::PurplePassiveOnly => DelaySource::Passive,
            _ => DelaySource::Probes,
        }
    }

    /// Whether this contender is told the true capacity (an oracle).
    pub fn is_oracle(&self) -> bool {
        matches!(
            self,
            Contender::Oracle
                | Contender::OracleLookahead
                | Contender::OracleLagged
                | Contender::OracleCensored(_)
                | Contender::OracleSaturated(_)
        )
    }

    /// The registered law this contender runs in the agent; `None` for the contenders that are
    /// not a law (the FIFO, FQ-CoDel, static CAKE, CAKE's autorate-ingress, the oracles).
    pub fn law_kind(&self) -> Option<LawKind> {
        Some(match self {
            Contender::PurpleRadio => LawKind::PurpleQueue,
            Contender::PurpleAimd => LawKind::PurpleAimd,
            Contender::CakeAutorate => LawKind::CakeAutorate,
            Contender::SqmAutorate => LawKind::SqmAutorate,
            Contender::Purple | Contender::PurplePassive | Contender::PurplePassiveOnly => {
                LawKind::Purple
            }
            Contender::Fifo
            | Contender::FqCodel
            | Contender::CakeStatic(..)
            | Contender::AutorateIngress
            | Contender::Oracle
            | Contender::OracleLookahead
            | Contender::OracleLagged
            | Contender::OracleCensored(_)
            | Contender::OracleSaturated(_) => return None,
        })
    }

    /// The law this contender runs in the agent, built by the registry: every law at its
    /// defaults except `purple`'s parameters `pp` and sqm-autorate's generator seeded with the
    /// run's `seed`. `None` for a contender that is not a law, or parameters the law refuses.
    pub(super) fn law(&self, seed: u64, pp: PurpleParams) -> Option<Box<dyn Law>> {
        let params = LawParams {
            purple: pp,
            sqm_autorate: SqmAutorateParams {
                seed,
                ..SqmAutorateParams::default()
            },
            ..LawParams::default()
        };
        let law: Box<dyn Law> = self.law_kind()?.build(&params).ok()?;
        Some(law)
    }
}
