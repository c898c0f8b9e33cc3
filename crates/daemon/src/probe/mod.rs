//! Probing reflectors: ICMP timestamp requests (one-way delays), ICMP echo (RTT fallback) and
//! our UDP timestamp echo ([`udp`]), turned into [`controller::Sample`]s.
//!
//! The [`Prober`] spreads `rate_hz` probes per second round-robin over the `active`
//! reflectors, never probing one more often than `min_interval` (etiquette). A probe without a
//! reply after `timeout` becomes [`Sample::ProbeLost`]. Health tracking: a timestamp reflector
//! that has never answered a timestamp request and misses three in a row falls back to echo (many
//! anycast hosts and CGNAT paths drop type 13); a reflector that loses three probes within 60 s
//! is rotated out for the next spare (cake-autorate's rule). Sockets are bound to the
//! controlled device (`SO_BINDTODEVICE`) and/or marked (`SO_MARK`) when configured, so probes
//! leave through the link being controlled.
//!
//! Steady state allocates nothing: outstanding probes live in a fixed table indexed by
//! sequence number, and receive buffers are on the stack.

pub mod echo;
pub mod icmp;
pub mod udp;

use crate::clock::Clock;
use crate::config::{Method, ProbeConfig, ReflectorSpec};
use controller::{Direction, ReflectorId, Sample};
use qdisc::{Duration, Instant};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::io::{self, Read};
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::{AsFd, BorrowedFd};

/// Size of the outstanding-probe table (a power of two).
const PENDING: usize = 1024;
/// Losses within this window that get a reflector rotated out.
const OFFENCE_WINDOW: Duration = Duration::from_secs(60);
/// Losses that count as an offence.
const OFFENCES: usize = 3;

/// Something worth logging that the prober did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// A reflector did not answer ICMP timestamps and is now probed with echo.
    FallbackToEcho {
        /// The reflector.
        addr: SocketAddr,
    },
    /// A reflector lost too many probes and was replaced by a spare.
    Rotated {
        /// Taken out.
        out: SocketAddr,
        /// Put in.
        into: SocketAddr,
    },
}

/// Per-reflector health counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Probes sent.
    pub sent: u64,
    /// Replies received.
    pub answered: u64,
    /// Probes lost.
    pub lost: u64,
}

#[derive(Debug)]
struct Refl {
    spec: ReflectorSpec,
    id: ReflectorId,
    method: Method,
    last_sent: Option<Instant>,
    losses: [Option<Instant>; OFFENCES],
    consecutive_lost: u32,
    ts_answered: bool,
    stats: Stats,
}

#[derive(Clone, Copy, Debug, Default)]
struct Pending {
    live: bool,
    seq: u32,
    /// The reflector's id (stable across rotation).
    refl: u16,
    sent: Instant,
}

/// Sends probes and turns replies into samples. See the module documentation.
#[derive(Debug)]
pub struct Prober {
    icmp: Option<Socket>,
    icmp_raw: bool,
    udp4: Option<UdpSocket>,
    udp6: Option<UdpSocket>,
    ident: u16,
    refl: Vec<Refl>,
    active: usize,
    cursor: usize,
    interval: Duration,
    min_interval: Duration,
    timeout: Duration,
    next_send: Instant,
    next_expire: Instant,
    seq: u32,
    pending: Vec<Pending>,
    events: Vec<Event>,
}

fn would_block(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
    )
}

fn prepare(s: &Socket, cfg: &ProbeConfig) -> io::Result<()> {
    s.set_nonblocking(true)?;
    if !cfg.bind_interface.is_empty() {
        s.bind_device(Some(cfg.bind_interface.as_bytes()))?;
    }
    if cfg.fwmark != 0 {
        s.set_mark(cfg.fwmark)?;
    }
    Ok(())
}

/// Opens an ICMP socket: raw (needs CAP_NET_RAW; echo and timestamps) or, failing that, an
/// unprivileged datagram "ping" socket (echo only). Returns the socket and whether it is raw.
fn open_icmp(cfg: &ProbeConfig) -> io::Result<(Socket, bool)> {
    let (s, raw) = match Socket::new(Domain::IPV4, Type::RAW, Some(Protocol::ICMPV4)) {
        Ok(s) => (s, true),
        Err(_) => (
            Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::ICMPV4))?,
            false,
        ),
    };
    prepare(&s, cfg)?;
    Ok((s, raw))
}

fn open_udp(v6: bool, cfg: &ProbeConfig) -> io::Result<UdpSocket> {
    let (d, any): (Domain, SocketAddr) = if v6 {
        (Domain::IPV6, SocketAddr::from(([0u16; 8], 0)))
    } else {
        (Domain::IPV4, SocketAddr::from(([0u8; 4], 0)))
    };
    let s = Socket::new(d, Type::DGRAM, Some(Protocol::UDP))?;
    prepare(&s, cfg)?;
    s.bind(&SockAddr::from(any))?;
    Ok(s.into())
}

impl Prober {
    /// Opens the sockets that `reflectors` need, configured per `cfg`. Fails if a needed socket
    /// cannot be opened (for ICMP timestamps: without CAP_NET_RAW only echo works, and
    /// timestamp reflectors are probed with echo instead).
    pub fn new(cfg: &ProbeConfig, reflectors: &[ReflectorSpec], now: Instant) -> io::Result<Self> {
        let needs_icmp = reflectors.iter().any(|r| r.method != Method::Udp);
        let (icmp, icmp_raw) = if needs_icmp {
            let (s, raw) = open_icmp(cfg)?;
            (Some(s), raw)
        } else {
            (None, false)
        };
        let udp4 = if reflectors
            .iter()
            .any(|r| r.method == Method::Udp && r.addr.is_ipv4())
        {
            Some(open_udp(false, cfg)?)
        } else {
            None
        };
        let udp6 = if reflectors
            .iter()
            .any(|r| r.method == Method::Udp && r.addr.is_ipv6())
        {
            Some(open_udp(true, cfg)?)
        } else {
            None
        };
        let refl = reflectors
            .iter()
            .enumerate()
            .map(|(i, s)| Refl {
                spec: *s,
                id: ReflectorId(i as u16),
                method: if s.method == Method::Timestamp && !icmp_raw {
                    Method::Echo
                } else {
                    s.method
                },
                last_sent: None,
                losses: [None; OFFENCES],
                consecutive_lost: 0,
                ts_answered: false,
                stats: Stats::default(),
            })
            .collect::<Vec<_>>();
        let interval = Duration::from_nanos((1e9 / cfg.rate_hz.max(0.001)) as u64);
        Ok(Prober {
            icmp,
            icmp_raw,
            udp4,
            udp6,
            ident: (std::process::id() as u16) ^ 0x5055,
            active: cfg.active.min(refl.len()),
            refl,
            cursor: 0,
            interval,
            min_interval: Duration::from_millis(cfg.min_interval_ms),
            timeout: Duration::from_millis(cfg.timeout_ms),
            next_send: now,
            next_expire: now,
            seq: 0,
            pending: vec![Pending::default(); PENDING],
            events: Vec::with_capacity(8),
        })
    }

    /// Whether ICMP goes through a raw socket (timestamps available).
    pub fn icmp_raw(&self) -> bool {
        self.icmp_raw
    }

    /// The sockets to wait on for readability.
    pub fn fds(&self) -> impl Iterator<Item = BorrowedFd<'_>> {
        self.icmp
            .as_ref()
            .map(|s| s.as_fd())
            .into_iter()
            .chain(self.udp4.as_ref().map(|s| s.as_fd()))
            .chain(self.udp6.as_ref().map(|s| s.as_fd()))
    }

    /// When [`Prober::tick`] must run next.
    pub fn next_wakeup(&self) -> Instant {
        // Loss detection may run up to 50 ms late, so that it shares the send wake-ups.
        self.next_send
            .min(self.next_expire.saturating_add(Duration::from_millis(50)))
    }

    /// Takes the events since the last call.
    pub fn drain_events(&mut self) -> std::vec::Drain<'_, Event> {
        self.events.drain(..)
    }

    /// Per-reflector health: address, current method, whether active, counters.
    pub fn health(&self) -> impl Iterator<Item = (SocketAddr, Method, bool, Stats)> + '_ {
        self.refl
            .iter()
            .enumerate()
            .map(move |(i, r)| (r.spec.addr, r.method, i < self.active, r.stats))
    }

    /// Sends the probes that are due and expires lost ones (pushing [`Sample::ProbeLost`] to
    /// `out`). `clock` gives probe timestamps for `now`.
    pub fn tick(&mut self, now: Instant, clock: &Clock, out: &mut Vec<Sample>) {
        if now >= self.next_expire {
            self.expire(now, out);
        }
        let mut budget = 4; // never burst more than a few probes after a stall
        while now >= self.next_send && budget > 0 {
            budget -= 1;
            self.send_one(now, clock, out);
            self.next_send = self.next_send.saturating_add(self.interval);
        }
        if now >= self.next_send {
            self.next_send = now.saturating_add(self.interval);
        }
    }

    fn send_one(&mut self, now: Instant, clock: &Clock, out: &mut Vec<Sample>) {
        let n = self.active;
        for k in 0..n {
            let i = (self.cursor + k) % n;
            let r = &self.refl[i];
            if r.last_sent
                .is_some_and(|t| now.saturating_duration_since(t) < self.min_interval)
            {
                continue;
            }
            self.cursor = (i + 1) % n;
            let seq = self.seq;
            self.seq = self.seq.wrapping_add(1);
            let ok = self.transmit(i, seq, now, clock);
            let slot = &mut self.pending[seq as usize % PENDING];
            if slot.live {
                // Overwritten before its timeout: the table is full, count it lost.
                let (id, sent) = (slot.refl, slot.sent);
                slot.live = false;
                if let Some(j) = self.index_of(id) {
                    self.lost(j, now, sent, out);
                }
            }
            if ok {
                self.next_expire = self.next_expire.min(now.saturating_add(self.timeout));
                self.pending[seq as usize % PENDING] = Pending {
                    live: true,
                    seq,
                    refl: self.refl[i].id.0,
                    sent: now,
                };
            }
            let r = &mut self.refl[i];
            r.last_sent = Some(now);
            r.stats.sent += 1;
            if !ok {
                // No route, link down: lost at once (and counts toward rotation).
                self.lost(i, now, now, out);
            }
            return;
        }
    }

    fn transmit(&self, i: usize, seq: u32, now: Instant, clock: &Clock) -> bool {
        let r = &self.refl[i];
        let res = match r.method {
            Method::Udp => {
                let pkt = udp::request(seq, clock.wall_us(now));
                let s = if r.spec.addr.is_ipv4() {
                    &self.udp4
                } else {
                    &self.udp6
                };
                s.as_ref().map(|s| s.send_to(&pkt, r.spec.addr).map(|_| ()))
            }
            m => {
                let kind = if m == Method::Timestamp {
                    icmp::TIMESTAMP_REQUEST
                } else {
                    icmp::ECHO_REQUEST
                };
                let pkt = icmp::request(kind, self.ident, seq as u16, clock.ms_since_midnight(now));
                self.icmp
                    .as_ref()
                    .map(|s| s.send_to(&pkt, &SockAddr::from(r.spec.addr)).map(|_| ()))
            }
        };
        // A send error (no route, link down) is treated like a lost probe.
        matches!(res, Some(Ok(())))
    }

    /// Retires timed-out probes and sets `next_expire` to the next deadline.
    fn expire(&mut self, now: Instant, out: &mut Vec<Sample>) {
        let mut next = Instant::MAX;
        for k in 0..PENDING {
            let p = self.pending[k];
            if p.live && now.saturating_duration_since(p.sent) < self.timeout {
                next = next.min(p.sent.saturating_add(self.timeout));
            } else if p.live {
                self.pending[k].live = false;
                if let Some(i) = self.index_of(p.refl) {
                    self.lost(i, now, p.sent, out);
                }
            }
        }
        self.next_expire = next;
    }

    fn lost(&mut self, i: usize, now: Instant, sent: Instant, out: &mut Vec<Sample>) {
        let Some(r) = self.refl.get_mut(i) else {
            return;
        };
        r.stats.lost += 1;
        r.consecutive_lost += 1;
        out.push(Sample::ProbeLost {
            reflector: r.id,
            sent,
        });
        if r.method == Method::Timestamp && !r.ts_answered && r.consecutive_lost >= 3 {
            r.method = Method::Echo;
            r.consecutive_lost = 0;
            r.losses = [None; OFFENCES];
            self.events
                .push(Event::FallbackToEcho { addr: r.spec.addr });
            return;
        }
        r.losses.rotate_left(1);
        r.losses[OFFENCES - 1] = Some(now);
        let offence = r
            .losses
            .iter()
            .all(|t| t.is_some_and(|t| now.saturating_duration_since(t) <= OFFENCE_WINDOW));
        if offence && i < self.active && self.refl.len() > self.active {
            // Swap with the first spare; the offender goes to the back of the spares.
            let spare = self.refl.remove(self.active);
            let mut bad = std::mem::replace(&mut self.refl[i], spare);
            self.events.push(Event::Rotated {
                out: bad.spec.addr,
                into: self.refl[i].spec.addr,
            });
            bad.losses = [None; OFFENCES];
            bad.consecutive_lost = 0;
            bad.method = if bad.spec.method == Method::Timestamp && self.icmp_raw {
                Method::Timestamp
            } else if bad.spec.method == Method::Udp {
                Method::Udp
            } else {
                Method::Echo
            };
            bad.ts_answered = false;
            self.refl.push(bad);
        }
    }

    fn index_of(&self, id: u16) -> Option<usize> {
        self.refl.iter().position(|r| r.id.0 == id)
    }

    /// Reads every waiting reply on the prober's sockets, pushing samples to `out`.
    pub fn receive(&mut self, now: Instant, clock: &Clock, out: &mut Vec<Sample>) {
        let mut buf = [0u8; 1500];
        while let Some(s) = self.icmp.as_ref() {
            let n = match (&*s).read(&mut buf) {
                Ok(n) => n,
                Err(e) if would_block(&e) => break,
                Err(_) => break,
            };
            let src = if self.icmp_raw && n >= 20 {
                Some(IpAddr::from([buf[12], buf[13], buf[14], buf[15]]))
            } else {
                None
            };
            if let Some(r) = icmp::parse_reply(&buf[..n]) {
                if self.icmp_raw && r.id != self.ident {
                    continue;
                }
                self.on_icmp(now, clock, src, &r, out);
            }
        }
        for v6 in [false, true] {
            loop {
                let s = if v6 { &self.udp6 } else { &self.udp4 };
                let Some(s) = s.as_ref() else { break };
                let (n, from) = match s.recv_from(&mut buf) {
                    Ok(x) => x,
                    Err(e) if would_block(&e) => break,
                    Err(_) => break,
                };
                if let Some(r) = udp::parse_reply(&buf[..n]) {
                    self.on_udp(now, clock, from, &r, out);
                }
            }
        }
    }

    /// Finds and retires the pending probe `seq` (full or low 16 bits) from `src`.
    fn take(&mut self, seq: u32, bits16: bool, src: Option<IpAddr>) -> Option<(usize, Instant)> {
        let idx = if bits16 {
            // The newest live entry whose low 16 bits match.
            (0..PENDING).find(|&k| {
                let p = &self.pending[k];
                p.live && p.seq as u16 == seq as u16
            })?
        } else {
            seq as usize % PENDING
        };
        let p = self.pending[idx];
        if !p.live || (!bits16 && p.seq != seq) {
            return None;
        }
        let i = self.index_of(p.refl)?;
        let r = &self.refl[i];
        if src.is_some_and(|ip| ip != r.spec.addr.ip()) {
            return None;
        }
        self.pending[idx].live = false;
        Some((i, p.sent))
    }

    fn on_icmp(
        &mut self,
        now: Instant,
        clock: &Clock,
        src: Option<IpAddr>,
        r: &icmp::Reply,
        out: &mut Vec<Sample>,
    ) {
        let Some((i, sent)) = self.take(u32::from(r.seq), true, src) else {
            return;
        };
        let refl = &mut self.refl[i];
        refl.stats.answered += 1;
        refl.consecutive_lost = 0;
        let id = refl.id;
        if r.kind == icmp::TIMESTAMP_REPLY {
            refl.ts_answered = true;
            let (up, down) = icmp::owd_ms(r, clock.ms_since_midnight(now));
            for (dir, ms) in [(Direction::Up, up), (Direction::Down, down)] {
                out.push(Sample::Owd {
                    reflector: id,
                    dir,
                    sent,
                    owd_ns: ms * 1_000_000,
                });
            }
        } else {
            out.push(Sample::Rtt {
                reflector: id,
                sent,
                rtt: now.saturating_duration_since(sent),
            });
        }
    }

    fn on_udp(
        &mut self,
        now: Instant,
        clock: &Clock,
        from: SocketAddr,
        r: &udp::Reply,
        out: &mut Vec<Sample>,
    ) {
        let Some((i, sent)) = self.take(r.seq, false, Some(from.ip())) else {
            return;
        };
        let refl = &mut self.refl[i];
        refl.stats.answered += 1;
        refl.consecutive_lost = 0;
        let (up, down) = r.owd_ns(clock.wall_us(now));
        for (dir, owd_ns) in [(Direction::Up, up), (Direction::Down, down)] {
            out.push(Sample::Owd {
                reflector: refl.id,
                dir,
                sent,
                owd_ns,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamp_reflector_never_answering_falls_back_to_echo_after_three_losses() {
        let cfg = ProbeConfig::default();
        let specs = [
            ReflectorSpec::parse("timestamp:127.0.0.1", Method::Timestamp).unwrap(),
            ReflectorSpec::parse("echo:127.0.0.1", Method::Timestamp).unwrap(),
        ];
        let mut p = Prober::new(&cfg, &specs, Instant::ZERO).unwrap();
        if !p.icmp_raw() {
            eprintln!("SKIPPED: no raw ICMP socket (needs CAP_NET_RAW)");
            return;
        }
        let mut out = Vec::new();
        for k in 1..=3 {
            p.lost(0, Instant::from_secs(k), Instant::from_secs(k), &mut out);
        }
        assert_eq!(out.len(), 3, "each loss is a ProbeLost sample");
        assert_eq!(p.refl[0].method, Method::Echo);
        let ev: Vec<_> = p.drain_events().collect();
        assert_eq!(
            ev,
            vec![Event::FallbackToEcho {
                addr: specs[0].addr
            }]
        );
        // Only 2 active slots and no spare: further losses do not rotate anything.
        for k in 4..=6 {
            p.lost(0, Instant::from_secs(k), Instant::from_secs(k), &mut out);
        }
        assert_eq!(p.drain_events().count(), 0);
    }
}
