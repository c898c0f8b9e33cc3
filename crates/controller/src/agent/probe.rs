//! The agent's probing: the reflector table (active ones first, then spares), the probe
//! schedule, sequence numbers and the table of outstanding probes, loss timeouts, and matching a
//! reply to the probe it answers. Validation of what a matched reply says lives in
//! [`super::validate`]; health and rotation decisions in [`super::Agent`], from the controller's
//! [`crate::reflectors::Pool`].

use crate::config::{check, check_f, ConfigError};
use crate::wire::{icmp, udp, WallAnchor};
use crate::{Duration, Instant, PerDir, ReflectorId};
use std::net::{IpAddr, SocketAddr};

/// Size of the outstanding-probe table (a power of two dividing 2^16, so that the low 16 bits
/// of a sequence number, all an ICMP reply carries, pick its slot).
pub const PENDING: usize = 1024;

/// How a reflector is probed.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Method {
    /// ICMP timestamp request (type 13/14): one-way delays, 1 ms resolution (default); falls
    /// back to echo for a reflector that never answers it.
    #[default]
    Timestamp,
    /// ICMP echo: round-trip time only.
    Echo,
    /// Our UDP timestamp echo (`purple reflector`): one-way delays, µs resolution.
    Udp,
}

impl Method {
    /// The name as written in a configuration (`"timestamp"`, `"echo"`, `"udp"`).
    pub fn name(self) -> &'static str {
        match self {
            Method::Timestamp => "timestamp",
            Method::Echo => "echo",
            Method::Udp => "udp",
        }
    }
}

/// A reflector: how and where to probe it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReflectorSpec {
    /// How to probe it.
    pub method: Method,
    /// Where (port 0 for ICMP).
    pub addr: SocketAddr,
}

impl ReflectorSpec {
    /// Parses a configured reflector: `"1.1.1.1"` (method `default`), `"echo:9.9.9.9"`,
    /// `"timestamp:1.0.0.1"`, `"udp:198.51.100.7:8862"` (port default
    /// [`udp::PORT`]; IPv4 or `[IPv6]`). ICMP reflectors are IPv4 only (ICMPv6 has no timestamp
    /// message). `None` for anything else.
    pub fn parse(s: &str, default: Method) -> Option<ReflectorSpec> {
        let (method, rest) = match s.split_once(':') {
            Some(("udp", r)) => (Method::Udp, r),
            Some(("echo", r)) => (Method::Echo, r),
            Some(("timestamp", r)) => (Method::Timestamp, r),
            _ => (default, s),
        };
        if method == Method::Udp {
            let addr = rest
                .parse::<SocketAddr>()
                .ok()
                .or_else(|| Some(SocketAddr::new(rest.parse().ok()?, udp::PORT)))?;
            Some(ReflectorSpec { method, addr })
        } else {
            match rest.parse::<IpAddr>().ok()? {
                ip @ IpAddr::V4(_) => Some(ReflectorSpec {
                    method,
                    addr: SocketAddr::new(ip, 0),
                }),
                IpAddr::V6(_) => None,
            }
        }
    }

    /// `method:addr` as in the log and the metrics (`timestamp:1.1.1.1`, `udp:10.0.0.1:8862`).
    pub fn label(&self, method: Method) -> String {
        match method {
            Method::Udp => format!("udp:{}", self.addr),
            m => format!("{}:{}", m.name(), self.addr.ip()),
        }
    }
}

/// Probe schedule parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ProbeParams {
    /// Probes per second over all active reflectors. Default 20. Accepted 0.1 ..= 1000.
    pub rate_hz: f64,
    /// Reflectors probed at a time; the rest are spares that replace active reflectors the
    /// pool finds dead or bad. Default 6. Accepted 1 ..= 64 (more than configured: all).
    pub active: usize,
    /// Etiquette: never probe one reflector more often than this. Default 100 ms. Accepted
    /// 0 ..= 60 s.
    pub min_interval: Duration,
    /// A probe with no reply after this is lost. Default 1 s. Accepted 10 ms ..= 10 s.
    pub timeout: Duration,
    /// Most probes sent at one wake-up after a stall (the schedule then restarts from now).
    /// Default 4. Accepted 1 ..= 64.
    pub burst: u32,
}

impl Default for ProbeParams {
    fn default() -> Self {
        ProbeParams {
            rate_hz: 20.0,
            active: 6,
            min_interval: Duration::from_millis(100),
            timeout: Duration::from_secs(1),
            burst: 4,
        }
    }
}

impl ProbeParams {
    /// Bounds check; errors name the option as in the daemon's `[probe]` section.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check_f(self.rate_hz, 0.1, 1000.0, "probe.rate_hz", "0.1 ..= 1000")?;
        check(
            (1..=64).contains(&self.active),
            "probe.active",
            self.active,
            "1 ..= 64",
        )?;
        check(
            self.min_interval <= Duration::from_secs(60),
            "probe.min_interval_ms",
            self.min_interval,
            "0 ..= 60000",
        )?;
        check(
            (Duration::from_millis(10)..=Duration::from_secs(10)).contains(&self.timeout),
            "probe.timeout_ms",
            self.timeout,
            "10 ..= 10000",
        )?;
        check(
            (1..=64).contains(&self.burst),
            "probe.burst",
            self.burst,
            "1 ..= 64",
        )
    }
}

/// Which socket a datagram goes out of or came in on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SocketKind {
    /// ICMP (raw, or an unprivileged datagram "ping" socket); IPv4.
    Icmp,
    /// UDP, of the destination's family.
    Udp,
}

/// Longest request the agent builds.
pub const MAX_REQUEST: usize = 20;

/// A probe to send now: `bytes()` to `to` out of the `socket` kind. Plain data, no allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transmit {
    /// Destination (port 0 for ICMP).
    pub to: SocketAddr,
    /// Socket kind.
    pub socket: SocketKind,
    /// Identifies the probe for [`super::Agent::handle_send_failed`].
    pub token: u32,
    len: u8,
    data: [u8; MAX_REQUEST],
}

impl Transmit {
    /// The datagram's payload (for ICMP: the ICMP message, no IP header).
    pub fn bytes(&self) -> &[u8] {
        &self.data[..usize::from(self.len).min(MAX_REQUEST)]
    }
}

/// Per-reflector counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReflectorStats {
    /// Probes sent.
    pub sent: u64,
    /// Replies accepted.
    pub answered: u64,
    /// Probes lost (no reply within the timeout, or the send failed).
    pub lost: u64,
    /// Replies matched to a probe but discarded by validation.
    pub discarded: u64,
}

/// A reflector's standing as the agent reports it (metrics, `--status`, tests).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReflectorStatus {
    /// As configured.
    pub spec: ReflectorSpec,
    /// How it is probed now (a timestamp reflector may have fallen back to echo).
    pub method: Method,
    /// Whether it is probed (else a spare).
    pub active: bool,
    /// Its current id in the controller's pool (a new one after each fallback, clock-step
    /// re-base or rotation).
    pub id: ReflectorId,
    /// Counters since start.
    pub stats: ReflectorStats,
}

/// Per-reflector validation state (reset with each new id).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Check {
    /// Smallest round trip of an accepted reply.
    pub rtt_min: Option<Duration>,
    /// The remote receive time (ns, its clock) of the newest accepted probe, with its send time.
    pub last_remote: Option<(Instant, i64)>,
    /// A suspected step of its clock: the shift (ns) and how many replies in a row agreed.
    pub step: Option<(i64, u32)>,
    /// Smallest raw one-way delay per direction (for the log's `delay_ms`).
    pub min_owd: PerDir<Option<i64>>,
}

#[derive(Clone, Debug)]
pub(crate) struct Refl {
    pub spec: ReflectorSpec,
    pub id: ReflectorId,
    pub method: Method,
    pub last_sent: Option<Instant>,
    pub consecutive_lost: u32,
    pub ts_answered: bool,
    pub stats: ReflectorStats,
    pub check: Check,
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct Pending {
    pub live: bool,
    pub seq: u32,
    pub id: ReflectorId,
    pub method: Method,
    pub sent: Instant,
    /// The send time we wrote into the request (ICMP: ms since midnight; UDP: µs since the
    /// epoch): the reply must echo exactly this.
    pub stamp: u64,
    /// A reply came back (valid or not): the link delivered it.
    pub answered: bool,
}

impl Default for Pending {
    fn default() -> Self {
        Pending {
            live: false,
            seq: 0,
            id: ReflectorId(0),
            method: Method::Echo,
            sent: Instant::ZERO,
            stamp: 0,
            answered: false,
        }
    }
}

/// Why a datagram did not reach validation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NoMatch {
    /// Not a well-formed reply of the protocol.
    Garbage,
    /// Well-formed ICMP that is not an echo or timestamp reply (someone else's traffic on a raw
    /// socket).
    Foreign,
    /// An ICMP reply with another process's identifier.
    WrongId,
    /// No outstanding probe with this sequence number (late, duplicate, or never sent).
    Unmatched,
    /// The sequence number is outstanding but for another reflector's address.
    WrongSource,
}

/// What [`Prober::send_due`] hands out.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Sent {
    /// A probe to send.
    Probe(Transmit),
    /// The probe to reflector `.0` sent at `.1` was pushed out of a full table: lost (`.2`:
    /// whether the reflector is to blame, see [`Prober::blames`]).
    Lost(usize, Instant, bool),
}

/// A reply matched to its probe.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Matched {
    /// Index in the reflector table.
    pub index: usize,
    pub pending: Pending,
    pub reply: Reply,
}

/// A parsed reply.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Reply {
    Icmp(icmp::Reply),
    Udp(udp::Reply),
}

/// The schedule, the reflector table and the outstanding probes.
#[derive(Clone, Debug)]
pub(crate) struct Prober {
    pub p: ProbeParams,
    pub refl: Vec<Refl>,
    pub active: usize,
    pub icmp_raw: bool,
    pub ident: u16,
    cursor: usize,
    /// Probes per 1000 s (the rate in mHz), for an exact integer schedule.
    rate_mhz: u64,
    origin: Instant,
    k: u64,
    pub next_send: Instant,
    next_expire: Instant,
    seq: u32,
    oldest: u32,
    pending: Vec<Pending>,
    next_id: u16,
}

impl Prober {
    pub fn new(
        p: ProbeParams,
        specs: &[ReflectorSpec],
        icmp_raw: bool,
        ident: u16,
        now: Instant,
    ) -> Self {
        let refl: Vec<Refl> = specs
            .iter()
            .enumerate()
            .map(|(i, s)| Refl {
                spec: *s,
                id: ReflectorId(i as u16),
                method: start_method(s, icmp_raw),
                last_sent: None,
                consecutive_lost: 0,
                ts_answered: false,
                stats: ReflectorStats::default(),
                check: Check::default(),
            })
            .collect();
        Prober {
            active: p.active.min(refl.len()),
            next_id: refl.len() as u16,
            refl,
            p,
            icmp_raw,
            ident,
            cursor: 0,
            rate_mhz: ((p.rate_hz * 1000.0).round() as u64).max(1),
            origin: now,
            k: 0,
            next_send: now,
            next_expire: Instant::MAX,
            seq: 0,
            oldest: 0,
            pending: vec![Pending::default(); PENDING],
        }
    }

    /// The instant of the `k`-th probe after `origin`.
    fn slot_time(&self, k: u64) -> Instant {
        let ns = u128::from(k) * 1_000_000_000_000 / u128::from(self.rate_mhz);
        self.origin
            .saturating_add(Duration::from_nanos(ns.min(u128::from(u64::MAX)) as u64))
    }

    /// When the prober needs a wake-up: the next send, or loss detection (which may run up to
    /// 50 ms late, so that it shares the send wake-ups).
    pub fn next_wakeup(&self) -> Instant {
        self.next_send
            .min(self.next_expire.saturating_add(Duration::from_millis(50)))
    }

    /// A fresh pool id for reflector `i` (after a fallback, re-base or rotation), never one in
    /// use. Returns the old id.
    pub fn renew_id(&mut self, i: usize) -> ReflectorId {
        let in_use = |id: u16, refl: &[Refl]| refl.iter().any(|r| r.id.0 == id);
        let mut id = self.next_id;
        while in_use(id, &self.refl) {
            id = id.wrapping_add(1);
        }
        self.next_id = id.wrapping_add(1);
        let old = self.refl[i].id;
        self.refl[i].id = ReflectorId(id);
        self.refl[i].check = Check::default();
        self.refl[i].consecutive_lost = 0;
        old
    }

    pub fn index_of(&self, id: ReflectorId) -> Option<usize> {
        self.refl.iter().position(|r| r.id == id)
    }

    /// The time between two probes of one reflector: `active` probes at `rate_hz`.
    fn round(&self) -> Duration {
        let ns = self.active.max(1) as u128 * 1_000_000_000_000 / u128::from(self.rate_mhz);
        Duration::from_nanos(ns.min(u128::from(u64::MAX)) as u64)
    }

    /// Whether the loss of probe `seq` (to reflector `id`, sent at `sent`) is its reflector's
    /// fault: every probe to the *other* reflectors sent within one round before or after it
    /// was answered (and there was at least one), so the path was clean around it and only this
    /// reflector failed. Losses shared by other reflectors (a link outage, a bottleneck so
    /// congested that probes are dropped or come back after the timeout) are the path's; a
    /// lone active reflector's losses cannot be told from the path's either (silence, the
    /// pool's `dead_after`, is what kills it). Judged when `seq` times out; a later probe still
    /// outstanding then counts as unanswered.
    pub fn blames(&self, seq: u32, id: ReflectorId, sent: Instant) -> bool {
        let round = self.round();
        let n = self.active.max(1) as u32;
        let after_sent = self.seq.wrapping_sub(seq);
        let before = (1..=n).map(|j| seq.wrapping_sub(j));
        let after = (1..=n)
            .take_while(|&j| j < after_sent)
            .map(|j| seq.wrapping_add(j));
        let mut any = false;
        for q in before.chain(after) {
            let e = &self.pending[q as usize % PENDING];
            if e.seq != q || e.id == id {
                continue;
            }
            let apart = if e.sent > sent {
                e.sent.saturating_duration_since(sent)
            } else {
                sent.saturating_duration_since(e.sent)
            };
            if apart > round {
                continue;
            }
            if !e.answered {
                return false;
            }
            any = true;
        }
        any
    }

    /// Retires timed-out probes; each is passed to `lost` as `(reflector index, sent, blame)`
    /// (see [`Prober::blames`]).
    pub fn expire(&mut self, now: Instant, lost: &mut impl FnMut(&mut Self, usize, Instant, bool)) {
        if now < self.next_expire {
            return;
        }
        while self.oldest != self.seq {
            let p = self.pending[self.oldest as usize % PENDING];
            if p.live && p.seq == self.oldest {
                if now.saturating_duration_since(p.sent) < self.p.timeout {
                    break;
                }
                self.pending[self.oldest as usize % PENDING].live = false;
                let blame = self.blames(p.seq, p.id, p.sent);
                if let Some(i) = self.index_of(p.id) {
                    lost(self, i, p.sent, blame);
                }
            }
            self.oldest = self.oldest.wrapping_add(1);
        }
        self.next_expire = if self.oldest == self.seq {
            Instant::MAX
        } else {
            let p = self.pending[self.oldest as usize % PENDING];
            p.sent.saturating_add(self.p.timeout)
        };
    }

    /// Sends the probes that are due (at most `burst`), passing each to `out` as
    /// [`Sent::Probe`]. A probe whose table slot is still taken by an unanswered one retires
    /// that one as lost ([`Sent::Lost`]).
    pub fn send_due(
        &mut self,
        now: Instant,
        anchor: &WallAnchor,
        out: &mut impl FnMut(&mut Self, Sent),
    ) {
        if self.k == 0 {
            // The schedule starts at the first send, the instant the shell first calls in: the
            // same instant the engine's first control step runs, so probes and steps of equal
            // periods fall on the same wake-ups.
            self.origin = now;
        }
        let mut budget = self.p.burst;
        while now >= self.next_send && budget > 0 {
            budget -= 1;
            self.send_one(now, anchor, out);
            self.k += 1;
            self.next_send = self.slot_time(self.k);
        }
        if now >= self.next_send {
            // Behind after a stall: skip the slots missed, keeping to the schedule's grid (in
            // phase with the control steps).
            let ns = u128::from(now.saturating_duration_since(self.origin).as_nanos());
            self.k = (ns * u128::from(self.rate_mhz) / 1_000_000_000_000) as u64 + 1;
            while self.slot_time(self.k) <= now {
                self.k += 1;
            }
            self.next_send = self.slot_time(self.k);
        }
    }

    fn send_one(
        &mut self,
        now: Instant,
        anchor: &WallAnchor,
        out: &mut impl FnMut(&mut Self, Sent),
    ) {
        let n = self.active;
        for k in 0..n {
            let i = (self.cursor + k) % n;
            if self.refl[i]
                .last_sent
                .is_some_and(|t| now.saturating_duration_since(t) < self.p.min_interval)
            {
                continue;
            }
            self.cursor = (i + 1) % n;
            let seq = self.seq;
            if self.seq.wrapping_sub(self.oldest) as usize >= PENDING {
                // The table is full: the oldest outstanding probe is counted lost.
                let p = self.pending[self.oldest as usize % PENDING];
                self.pending[self.oldest as usize % PENDING].live = false;
                let blame = self.blames(p.seq, p.id, p.sent);
                self.oldest = self.oldest.wrapping_add(1);
                if p.live {
                    if let Some(j) = self.index_of(p.id) {
                        out(self, Sent::Lost(j, p.sent, blame));
                    }
                }
            }
            self.seq = self.seq.wrapping_add(1);
            let r = &mut self.refl[i];
            let (socket, stamp, data) = match r.method {
                Method::Udp => {
                    let us = anchor.wall_us(now);
                    (SocketKind::Udp, us, udp::request(seq, us))
                }
                m => {
                    let kind = if m == Method::Timestamp {
                        icmp::TIMESTAMP_REQUEST
                    } else {
                        icmp::ECHO_REQUEST
                    };
                    let ms = anchor.ms_since_midnight(now);
                    (
                        SocketKind::Icmp,
                        u64::from(ms),
                        icmp::request(kind, self.ident, seq as u16, ms),
                    )
                }
            };
            r.last_sent = Some(now);
            r.stats.sent += 1;
            self.pending[seq as usize % PENDING] = Pending {
                live: true,
                seq,
                id: r.id,
                method: r.method,
                sent: now,
                stamp,
                answered: false,
            };
            self.next_expire = self.next_expire.min(now.saturating_add(self.p.timeout));
            let t = Transmit {
                to: r.spec.addr,
                socket,
                token: seq,
                len: data.len() as u8,
                data,
            };
            out(self, Sent::Probe(t));
            return;
        }
    }

    /// Retires the outstanding probe `token` (its send failed); returns its reflector index and
    /// send time.
    pub fn take_token(&mut self, token: u32) -> Option<(usize, Instant)> {
        let slot = &mut self.pending[token as usize % PENDING];
        if !slot.live || slot.seq != token {
            return None;
        }
        slot.live = false;
        let (id, sent) = (slot.id, slot.sent);
        Some((self.index_of(id)?, sent))
    }

    /// Matches a datagram to its outstanding probe and retires it.
    pub fn match_reply(
        &mut self,
        from: SocketAddr,
        socket: SocketKind,
        bytes: &[u8],
    ) -> Result<Matched, NoMatch> {
        let (slot, reply) = match socket {
            SocketKind::Icmp => {
                let Some(r) = icmp::parse_reply(bytes) else {
                    return Err(if icmp_well_formed(bytes) {
                        NoMatch::Foreign
                    } else {
                        NoMatch::Garbage
                    });
                };
                if self.icmp_raw && r.id != self.ident {
                    return Err(NoMatch::WrongId);
                }
                let slot = usize::from(r.seq) % PENDING;
                let p = self.pending[slot];
                if !p.live || p.seq as u16 != r.seq {
                    return Err(NoMatch::Unmatched);
                }
                let want = if r.kind == icmp::TIMESTAMP_REPLY {
                    Method::Timestamp
                } else {
                    Method::Echo
                };
                if p.method != want {
                    return Err(NoMatch::Unmatched);
                }
                (slot, Reply::Icmp(r))
            }
            SocketKind::Udp => {
                let Some(r) = udp::parse_reply(bytes) else {
                    return Err(NoMatch::Garbage);
                };
                let slot = r.seq as usize % PENDING;
                let p = self.pending[slot];
                if !p.live || p.seq != r.seq || p.method != Method::Udp {
                    return Err(NoMatch::Unmatched);
                }
                (slot, Reply::Udp(r))
            }
        };
        let p = self.pending[slot];
        let Some(index) = self.index_of(p.id) else {
            // Its reflector was re-based, fell back or rotated since: a stale probe.
            self.pending[slot].live = false;
            return Err(NoMatch::Unmatched);
        };
        let addr = self.refl[index].spec.addr;
        let ok = match socket {
            SocketKind::Icmp => from.ip() == addr.ip(),
            SocketKind::Udp => from == addr,
        };
        if !ok {
            return Err(NoMatch::WrongSource);
        }
        self.pending[slot].live = false;
        self.pending[slot].answered = true;
        Ok(Matched {
            index,
            pending: p,
            reply,
        })
    }

    /// Swaps active reflector `i` with the first spare; the one taken out goes to the back of
    /// the spares with its method reset. Returns `(out, in)` addresses, or `None` without
    /// spares.
    pub fn rotate(&mut self, i: usize) -> Option<(SocketAddr, SocketAddr)> {
        if i >= self.active || self.refl.len() <= self.active {
            return None;
        }
        let spare = self.refl.remove(self.active);
        let mut bad = std::mem::replace(&mut self.refl[i], spare);
        bad.method = start_method(&bad.spec, self.icmp_raw);
        bad.ts_answered = false;
        bad.consecutive_lost = 0;
        bad.last_sent = None;
        let pair = (bad.spec.addr, self.refl[i].spec.addr);
        self.refl.push(bad);
        Some(pair)
    }
}

/// The method a reflector starts with: timestamps need a raw ICMP socket, else echo.
fn start_method(s: &ReflectorSpec, icmp_raw: bool) -> Method {
    match s.method {
        Method::Timestamp if !icmp_raw => Method::Echo,
        m => m,
    }
}

/// Whether `buf` (with or without an IPv4 header) is an ICMP message with a valid checksum.
fn icmp_well_formed(buf: &[u8]) -> bool {
    let icmp = match buf.first() {
        Some(b) if b >> 4 == 4 => {
            let ihl = usize::from(b & 0x0F) * 4;
            if ihl < 20 || buf.get(9) != Some(&1) {
                return false;
            }
            buf.get(ihl..).unwrap_or(&[])
        }
        _ => buf,
    };
    icmp.len() >= 8 && icmp::checksum(icmp) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reflector_specs_parse_methods_and_ports() {
        let m = Method::Timestamp;
        let r = ReflectorSpec::parse("udp:127.0.0.1", m).unwrap();
        assert_eq!((r.method, r.addr.port()), (Method::Udp, udp::PORT));
        let r = ReflectorSpec::parse("udp:[::1]:9000", m).unwrap();
        assert_eq!(r.addr.port(), 9000);
        assert_eq!(
            ReflectorSpec::parse("echo:9.9.9.9", m).unwrap().method,
            Method::Echo
        );
        assert_eq!(
            ReflectorSpec::parse("9.9.9.9", m).unwrap().method,
            Method::Timestamp
        );
        assert!(ReflectorSpec::parse("::1", m).is_none());
        assert_eq!(r.label(Method::Udp), "udp:[::1]:9000");
    }

    #[test]
    fn schedule_is_exact_and_round_robin_respects_the_etiquette() {
        let specs: Vec<ReflectorSpec> = (1..=3)
            .map(|i| ReflectorSpec::parse(&format!("10.0.0.{i}"), Method::Timestamp).unwrap())
            .collect();
        let p = ProbeParams {
            rate_hz: 30.0,
            active: 3,
            ..ProbeParams::default()
        };
        let mut pr = Prober::new(p, &specs, true, 7, Instant::ZERO);
        let anchor = WallAnchor {
            at: Instant::ZERO,
            wall_us: 0,
        };
        let mut sent = Vec::new();
        let mut t = Instant::ZERO;
        while t < Instant::from_secs(1) {
            pr.send_due(t, &anchor, &mut |_: &mut Prober, s: Sent| {
                if let Sent::Probe(tx) = s {
                    sent.push((t, tx.to))
                }
            });
            t = pr.next_send;
        }
        // 30 probes in a second, each reflector every 100 ms exactly (100 ms etiquette).
        assert_eq!(sent.len(), 30);
        for w in sent.windows(4) {
            assert_eq!(w[0].1, w[3].1);
            assert_eq!(
                w[3].0.saturating_duration_since(w[0].0),
                Duration::from_millis(100)
            );
        }
    }

    #[test]
    fn the_schedule_starts_at_the_first_send_and_keeps_its_grid_after_a_stall() {
        let specs = [ReflectorSpec::parse("10.0.0.1", Method::Echo).unwrap()];
        let p = ProbeParams {
            rate_hz: 20.0,
            active: 1,
            min_interval: Duration::ZERO,
            ..ProbeParams::default()
        };
        let ms = |m: u64| Instant::from_nanos(m * 1_000_000);
        // Made at 0, first called at 7 ms: the grid is 7, 57, 107, ...
        let mut pr = Prober::new(p, &specs, true, 7, Instant::ZERO);
        let anchor = WallAnchor {
            at: Instant::ZERO,
            wall_us: 0,
        };
        let mut n = 0;
        let mut count = |_: &mut Prober, s: Sent| {
            if matches!(s, Sent::Probe(_)) {
                n += 1;
            }
        };
        pr.send_due(ms(7), &anchor, &mut count);
        assert_eq!(pr.next_send, ms(57));
        // A late wake-up keeps the grid.
        pr.send_due(ms(60), &anchor, &mut count);
        assert_eq!(pr.next_send, ms(107));
        // A stall far past the burst: a burst goes out, the rest is skipped, the grid is kept.
        pr.send_due(ms(1_000), &anchor, &mut count);
        assert_eq!(pr.next_send, ms(1_007));
        assert_eq!(n, 2 + p.burst as usize);
    }
}
