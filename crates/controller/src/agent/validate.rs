//! Reply validation (issue 15: probes that cannot lie). Every reply is matched to the probe it
//! answers ([`super::probe`]), then checked before any delay reaches the controller. The rules,
//! in order (all offsets between the two hosts' clocks cancel in them):
//!
//! 1. **Echo**: the send time the reply echoes must be exactly what we wrote into that
//!    sequence number's request ([`Discard::EchoMismatch`]; a UDP reflector echoing a wrong send
//!    time with the right sequence number gave delays of ~4.5e11 ms before this rule).
//! 2. **Consistency** (one-way methods): the reflector's own processing time, transmit minus
//!    receive stamp, must lie in `[-res, rtt + res]` (`res`: the timestamps' resolution, 1 ms
//!    for ICMP, 2 µs for UDP): no reply can take longer inside the reflector than the whole
//!    round trip ([`Discard::Implausible`]). A reflector inflating one delay without the other
//!    fails this.
//! 3. **Range** against the reflector's baseline (once the controller's pool has one): each
//!    direction's delay above its baseline must lie in `[-(rtt_min + slack), rtt + slack]`:
//!    a one-way queueing delay cannot exceed the round trip it is part of, and a path can get
//!    shorter by at most its whole length ([`Discard::OutOfRange`]). Before a baseline exists,
//!    a reflector's receive stamps must not go backwards by more than `res + slack` between
//!    probes in send order ([`Discard::Backwards`]).
//! 4. **Clock steps**: when both directions leave the range with opposite signs and their sum
//!    still fits the round trip, the reflector's clock stepped (up + S, down - S). Such replies
//!    are discarded as [`Discard::ClockStep`]; after [`ValidationParams::rebase_after`] in a row
//!    agreeing on the shift (within the round trip + slack), the reflector gets a new id in the
//!    pool, so its baselines restart at the new offset (logged `clock-step`): a step is
//!    absorbed within that many replies (at the defaults, 3 replies, about a second at 20
//!    probes/s over 6 reflectors), not after the baseline window.
//!
//! Replies discarded by rules 1-3 count as lost probes (an offence in the pool: a reflector
//! that keeps lying is dead by the pool's rule, 3 in 60 s by default, and rotated out for a
//! spare). Every discard is counted by reason; [`super::Event::Discarded`] reports them at most
//! once per [`ValidationParams::report_every`] per reason (with the count since the last
//! report).

use super::probe::{Check, Matched, Method, Reply};
use crate::config::{check, ConfigError};
use crate::wire::{fold_day_ns, icmp, WallAnchor};
use crate::{Duration, Instant, PerDir};
use std::net::SocketAddr;

/// Reply validation parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ValidationParams {
    /// Tolerance of the range and monotonicity checks beyond the round trip (timestamp
    /// resolution, baseline drift, jitter between the two directions). Default 5 ms. Accepted
    /// 1 ms ..= 1 s.
    pub slack: Duration,
    /// Replies in a row agreeing on a clock step before the reflector is re-based. Default 3.
    /// Accepted 1 ..= 100.
    pub rebase_after: u32,
    /// Discards of one reason are reported (logged) at most this often. Default 10 s. Accepted
    /// 1 s ..= 1 h.
    pub report_every: Duration,
}

impl Default for ValidationParams {
    fn default() -> Self {
        ValidationParams {
            slack: Duration::from_millis(5),
            rebase_after: 3,
            report_every: Duration::from_secs(10),
        }
    }
}

impl ValidationParams {
    /// Bounds check.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check(
            (Duration::from_millis(1)..=Duration::from_secs(1)).contains(&self.slack),
            "validation.slack",
            self.slack,
            "1 ms ..= 1 s",
        )?;
        check(
            (1..=100).contains(&self.rebase_after),
            "validation.rebase_after",
            self.rebase_after,
            "1 ..= 100",
        )?;
        check(
            (Duration::from_secs(1)..=Duration::from_secs(3600)).contains(&self.report_every),
            "validation.report_every",
            self.report_every,
            "1 s ..= 1 h",
        )
    }
}

/// Why a datagram was discarded.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Discard {
    /// Not a well-formed reply (truncated, bad checksum, wrong magic or length).
    Garbage,
    /// Well-formed ICMP that is no echo or timestamp reply (other traffic a raw socket sees,
    /// such as the host's own echo requests on loopback). Counted, not logged.
    Foreign,
    /// An ICMP reply carrying another process's identifier.
    WrongId,
    /// No outstanding probe with its sequence number: late (after the timeout), duplicate, or
    /// never sent.
    Unmatched,
    /// The sequence number is outstanding, but for another reflector's address.
    WrongSource,
    /// The echoed send time is not what we sent with that sequence number.
    EchoMismatch,
    /// The reflector's processing time (transmit - receive) is negative or longer than the
    /// round trip.
    Implausible,
    /// A one-way delay outside `[-(rtt_min + slack), rtt + slack]` of its baseline.
    OutOfRange,
    /// Before any baseline: the reflector's clock went backwards.
    Backwards,
    /// The reflector's clock stepped (both directions shifted, opposite signs).
    ClockStep,
}

impl Discard {
    /// Every reason, in counter order.
    pub const ALL: [Discard; 10] = [
        Discard::Garbage,
        Discard::Foreign,
        Discard::WrongId,
        Discard::Unmatched,
        Discard::WrongSource,
        Discard::EchoMismatch,
        Discard::Implausible,
        Discard::OutOfRange,
        Discard::Backwards,
        Discard::ClockStep,
    ];

    /// The name in the log (`"echo-mismatch"`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Discard::Garbage => "garbage",
            Discard::Foreign => "foreign",
            Discard::WrongId => "wrong-id",
            Discard::Unmatched => "unmatched",
            Discard::WrongSource => "wrong-source",
            Discard::EchoMismatch => "echo-mismatch",
            Discard::Implausible => "implausible",
            Discard::OutOfRange => "out-of-range",
            Discard::Backwards => "backwards",
            Discard::ClockStep => "clock-step",
        }
    }

    /// Whether the reflector answered with a lie: the probe counts as lost (an offence).
    pub fn is_offence(self) -> bool {
        matches!(
            self,
            Discard::EchoMismatch | Discard::Implausible | Discard::OutOfRange | Discard::Backwards
        )
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Discards counted by reason, with the rate limit of their reports.
#[derive(Clone, Debug, Default)]
pub(crate) struct Discards {
    pub total: [u64; Discard::ALL.len()],
    unreported: [u64; Discard::ALL.len()],
    last_report: [Option<Instant>; Discard::ALL.len()],
    last_reflector: [Option<SocketAddr>; Discard::ALL.len()],
}

/// A due report: reason, the last reflector it concerned, count since the previous report, and
/// the total.
pub(crate) type Report = (Discard, Option<SocketAddr>, u64, u64);

impl Discards {
    /// Counts one discard; returns the report to log now, if one is due.
    pub fn count(
        &mut self,
        now: Instant,
        reason: Discard,
        reflector: Option<SocketAddr>,
        every: Duration,
    ) -> Option<Report> {
        let i = reason.index();
        self.total[i] += 1;
        self.unreported[i] += 1;
        if reflector.is_some() {
            self.last_reflector[i] = reflector;
        }
        self.due(now, i, every)
    }

    fn due(&mut self, now: Instant, i: usize, every: Duration) -> Option<Report> {
        let reason = Discard::ALL[i];
        if reason == Discard::Foreign || self.unreported[i] == 0 {
            return None;
        }
        if self.last_report[i].is_some_and(|t| now.saturating_duration_since(t) < every) {
            return None;
        }
        self.last_report[i] = Some(now);
        let n = std::mem::take(&mut self.unreported[i]);
        Some((reason, self.last_reflector[i], n, self.total[i]))
    }

    /// Reports held back by the rate limit whose window has passed.
    pub fn flush(&mut self, now: Instant, every: Duration, out: &mut impl FnMut(Report)) {
        for i in 0..Discard::ALL.len() {
            if let Some(r) = self.due(now, i, every) {
                out(r);
            }
        }
    }
}

/// What a valid reply measured.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Verdict {
    /// One-way delays (ns, offset by the clocks' difference) and the round trip.
    Owd {
        up: i64,
        down: i64,
        rtt: Duration,
        /// The reflector's receive stamp, ns on its clock.
        remote: i64,
    },
    /// A round trip (echo).
    Rtt(Duration),
}

/// A rejected reply: why, and for a suspected clock step what it measured and the shift.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Rejected {
    pub reason: Discard,
    /// For [`Discard::ClockStep`]: the shift (ns) and the measurement, valid at the new offset.
    pub step: Option<(i64, Verdict)>,
}

fn reject(reason: Discard) -> Rejected {
    Rejected { reason, step: None }
}

fn clamp_i64(v: i128) -> i64 {
    v.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
}

/// Checks the matched reply `m` that arrived at `arrival`. `base` is the pool's baseline of its
/// reflector per direction (raw ns) at `arrival`, where it has one.
pub(crate) fn validate(
    m: &Matched,
    arrival: Instant,
    anchor: &WallAnchor,
    st: &Check,
    base: PerDir<Option<f64>>,
    vp: &ValidationParams,
) -> Result<Verdict, Rejected> {
    let p = &m.pending;
    let rtt = arrival.saturating_duration_since(p.sent);
    let rtt_ns = rtt.as_nanos().min(i64::MAX as u64) as i64;
    let (up, down, remote, res, wraps) = match m.reply {
        Reply::Icmp(r) if p.method == Method::Echo => {
            if u64::from(r.originate) != p.stamp {
                return Err(reject(Discard::EchoMismatch));
            }
            return Ok(Verdict::Rtt(rtt));
        }
        Reply::Icmp(r) => {
            if u64::from(r.originate) != p.stamp {
                return Err(reject(Discard::EchoMismatch));
            }
            let rx = icmp::remote_ns(r.receive);
            let tx = icmp::remote_ns(r.transmit);
            let res = 1_000_000;
            let proc = fold_day_ns(tx - rx);
            if proc < -res || proc > rtt_ns + res {
                return Err(reject(Discard::Implausible));
            }
            let up = fold_day_ns(rx - anchor.ns_since_midnight(p.sent));
            let down = fold_day_ns(anchor.ns_since_midnight(arrival) - tx);
            (up, down, rx, res, true)
        }
        Reply::Udp(r) => {
            if r.sent_us != p.stamp {
                return Err(reject(Discard::EchoMismatch));
            }
            let res = 2_000;
            let proc = (i128::from(r.xmit_us) - i128::from(r.recv_us)) * 1_000;
            if proc < -i128::from(res) || proc > i128::from(rtt_ns) + i128::from(res) {
                return Err(reject(Discard::Implausible));
            }
            let rx = i128::from(r.recv_us) * 1_000;
            let tx = i128::from(r.xmit_us) * 1_000;
            let up = clamp_i64(rx - i128::from(anchor.wall_ns(p.sent)));
            let down = clamp_i64(i128::from(anchor.wall_ns(arrival)) - tx);
            (up, down, clamp_i64(rx), res, false)
        }
    };
    let v = Verdict::Owd {
        up,
        down,
        rtt,
        remote,
    };
    let slack = vp.slack.as_nanos().min(i64::MAX as u64 / 4) as i64;
    if let (Some(bu), Some(bd)) = (base.up, base.down) {
        let rel = |raw: i64, b: f64| -> i64 {
            let d = (raw as f64 - b).clamp(-9.0e18, 9.0e18) as i64;
            if wraps {
                fold_day_ns(d)
            } else {
                d
            }
        };
        let (du, dd) = (rel(up, bu), rel(down, bd));
        let rtt_min = st.rtt_min.map_or(rtt_ns, |d| d.as_nanos() as i64);
        let hi = rtt_ns.saturating_add(slack);
        let lo = -(rtt_min.saturating_add(slack));
        let fits = |d: i64| (lo..=hi).contains(&d);
        if fits(du) && fits(dd) {
            return Ok(v);
        }
        let opposite = (du > hi && dd < lo) || (du < lo && dd > hi);
        if opposite && du.saturating_add(dd).abs() <= hi {
            return Err(Rejected {
                reason: Discard::ClockStep,
                step: Some((du, v)),
            });
        }
        return Err(reject(Discard::OutOfRange));
    }
    if let Some((last_sent, last_remote)) = st.last_remote {
        let back = if wraps {
            fold_day_ns(remote - last_remote)
        } else {
            remote.saturating_sub(last_remote)
        };
        if p.sent > last_sent && back < -(res + slack) {
            return Err(reject(Discard::Backwards));
        }
    }
    Ok(v)
}
