//! The link emulator: a sans-IO model of a link we cannot change (a radio, a modem), like
//! mahimahi's `mm-link` plus `mm-delay` and `mm-loss`, and the glue that runs one per direction
//! inside the bridge's event loop (`purple linkem IF_A IF_B`).
//!
//! A frame offered to [`LinkModel`] goes through, in order:
//! 1. **loss**: dropped with probability `loss` (seeded RNG), before it reaches the buffer (like
//!    `mm-loss` in front of the link);
//! 2. **the buffer**: an unmanaged droptail queue of at most `buffer_packets` frames and
//!    `buffer_bytes` bytes (the arriving frame is dropped when it would not fit) — the radio's
//!    queue whose backlog and sojourn time the stats report;
//! 3. **the link**: frames leave the buffer one at a time at the capacity: a fixed rate, a
//!    step/ramp [`RateSchedule`] (the rate when a frame starts is used for all of it), unlimited,
//!    or a [`MahimahiTrace`] with mahimahi's semantics (each trace line is one opportunity to send
//!    1500 bytes; a frame may span opportunities and several small frames may share one; bytes of
//!    an opportunity the queue cannot use are lost; frames arriving at an opportunity's instant
//!    wait for the next one);
//! 4. **propagation delay**: each frame is released `delay` after it finished on the link.
//!
//! **What the link charges.** Capacity counts IP bytes (the frame minus its Ethernet/VLAN
//! header), as mahimahi does, since it sees IP packets on a TUN device. A GSO super-packet is not
//! segmented (it leaves whole, and the kernel segments it on send) but is charged as its wire
//! segments: `segments × headers + payload`, so a 64 KiB super-packet takes exactly the time
//! of the ~45 frames it becomes.
//!
//! **Time.** The model computes its schedule from its own virtual times (when each frame arrived
//! and when the previous one finished), not from when it was called, so a late `dequeue` does not
//! lower the link's rate. `now` must not go backwards.

use std::collections::VecDeque;

use controller::ctl::DirNames;
use qdisc::trace::{MahimahiTrace, RateSchedule, TraceError, MAHIMAHI_MTU};
use qdisc::{
    Counter, Dequeue, DropReason, Dropped, Duration, Headers, Instant, NoShaper, Packet, Qdisc,
    QdiscStats, Rng,
};
use serde_json::{json, Value};

use crate::bridge::{Bridge, BridgeConfig, Error, Stage};

/// The default buffer: 1000 packets (and no byte limit).
pub const DEFAULT_BUFFER_PACKETS: u32 = 1000;
/// The window over which a trace's current capacity is measured (opportunities in the next
/// 100 ms), and how long one noisy capacity estimate holds.
pub const CAPACITY_WINDOW: Duration = Duration::from_millis(100);
/// How long the link waits before looking again when the capacity is zero.
const STALL_RECHECK: Duration = Duration::from_millis(1);

/// The link's capacity.
#[derive(Clone, Debug, PartialEq)]
pub enum Capacity {
    /// No serialisation delay at all.
    Unlimited,
    /// A fixed rate in bytes per second (0 stalls the link).
    Rate(u64),
    /// A mahimahi trace (looping), time 0 at the model's origin.
    Trace(MahimahiTrace),
    /// Steps and ramps, time 0 at the model's origin.
    Schedule(RateSchedule),
}

/// What to emulate in one direction.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkConfig {
    /// The capacity.
    pub capacity: Capacity,
    /// One-way propagation delay added after the link.
    pub delay: Duration,
    /// Most frames in the buffer (`None`: no packet limit).
    pub buffer_packets: Option<u32>,
    /// Most bytes (whole frames) in the buffer (`None`: no byte limit).
    pub buffer_bytes: Option<u64>,
    /// Probability in [0, 1] that an arriving frame is lost.
    pub loss: f64,
    /// Seed of the loss and estimate-noise generators.
    pub seed: u64,
    /// Relative noise of the capacity estimate: each estimate is multiplied by `1 + noise × u`,
    /// `u` uniform in [-1, 1), redrawn every [`CAPACITY_WINDOW`].
    pub capacity_noise: f64,
    /// Relative bias of the capacity estimate: multiplied by `1 + bias` (e.g. 0.2 = 20% high).
    pub capacity_bias: f64,
}

impl Default for LinkConfig {
    /// Unlimited, no delay, 1000-packet buffer, no loss, an exact estimate.
    fn default() -> Self {
        LinkConfig {
            capacity: Capacity::Unlimited,
            delay: Duration::ZERO,
            buffer_packets: Some(DEFAULT_BUFFER_PACKETS),
            buffer_bytes: None,
            loss: 0.0,
            seed: 1,
            capacity_noise: 0.0,
            capacity_bias: 0.0,
        }
    }
}

impl Capacity {
    /// Parses a capacity file: a mahimahi trace (one millisecond offset per line), else a
    /// [`RateSchedule`] (`<t_seconds> <step|ramp> <rate>` lines). The error names both attempts.
    pub fn from_trace_text(text: &str) -> Result<Capacity, CapacityFileError> {
        match MahimahiTrace::parse(text) {
            Ok(t) => Ok(Capacity::Trace(t)),
            Err(e1) => match RateSchedule::parse(text) {
                Ok(s) => Ok(Capacity::Schedule(s)),
                Err(e2) => Err(CapacityFileError {
                    mahimahi: e1,
                    schedule: e2,
                }),
            },
        }
    }
}

/// A capacity file that is neither a mahimahi trace nor a rate schedule
/// ([`Capacity::from_trace_text`]); it keeps why each reading failed.
#[derive(Debug)]
pub struct CapacityFileError {
    /// Why it is not a mahimahi trace.
    pub mahimahi: TraceError,
    /// Why it is not a step/ramp schedule.
    pub schedule: TraceError,
}

impl std::fmt::Display for CapacityFileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "neither a mahimahi trace ({}) nor a step/ramp schedule ({})",
            self.mahimahi, self.schedule
        )
    }
}

impl std::error::Error for CapacityFileError {}

/// Opens a link emulator between `cfg.if_a` and `cfg.if_b`: `up` shapes frames from A leaving
/// on B, `down` frames from B leaving on A; traces start now. Run it with [`Bridge::run`]; the
/// control socket answers `stats [--json]` and `set-rate up|down RATE`.
pub fn open(
    cfg: BridgeConfig,
    up: LinkConfig,
    down: LinkConfig,
) -> Result<Bridge<LinkModel>, Error> {
    let now = Instant::from_nanos(os::monotonic_ns());
    Bridge::with_stages(cfg, LinkModel::new(up, now), LinkModel::new(down, now))
}

/// The emulator's own counters (besides the [`QdiscStats`] every qdisc keeps, where random loss
/// appears as [`DropReason::Aqm`] and buffer overflow as [`DropReason::Overflow`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkStats {
    /// Frames and bytes in the buffer now (not counting those propagating).
    pub backlog: Counter,
    /// Wire segments in the buffer now (a GSO super-packet counts as the frames it becomes);
    /// the packet limit applies to this.
    pub backlog_segments: u64,
    /// Frames and bytes that left the link and are propagating.
    pub in_flight: Counter,
    /// Frames dropped because the buffer was full.
    pub buffer_drops: Counter,
    /// Frames lost at random.
    pub loss_drops: Counter,
    /// Frames delivered (after the delay).
    pub tx: Counter,
    /// Time the last frame to leave the buffer spent there (arrival to the end of its
    /// transmission).
    pub last_sojourn: Duration,
    /// Exponentially weighted moving average of that sojourn time (weight 1/8 per frame).
    pub sojourn_ewma: Duration,
}

#[derive(Debug)]
struct Queued {
    pkt: Packet,
    arrival: Instant,
    /// Bytes the link charges for it.
    wire: u32,
    /// Wire segments it stands for.
    segs: u32,
}

#[derive(Debug)]
struct InFlight {
    pkt: Packet,
    release: Instant,
}

/// The sans-IO link emulator for one direction (see the module docs). Implements [`Qdisc`]:
/// `enqueue` offers a frame, `dequeue` returns frames once they have crossed the link and the
/// delay, or [`Dequeue::NotBefore`] the instant the next one will have. No allocation per packet
/// in steady state (the two queues keep their capacity).
#[derive(Debug)]
pub struct LinkModel {
    capacity: Capacity,
    delay: Duration,
    buffer_packets: Option<u32>,
    buffer_bytes: Option<u64>,
    loss: f64,
    seed: u64,
    noise: f64,
    bias: f64,
    origin: Instant,
    last_now: Instant,
    queue: VecDeque<Queued>,
    line: VecDeque<InFlight>,
    /// Rate modes: when the link finished the previous frame.
    link_free: Instant,
    /// Trace mode: index of the next unused opportunity.
    next_opp: u64,
    /// Trace mode: bytes of the head frame already sent.
    head_sent: u32,
    rng: Rng,
    stats: QdiscStats,
    link: LinkStats,
}

/// The bytes the link charges for `pkt`: IP bytes per wire segment (see the module docs).
pub fn wire_bytes(pkt: &Packet) -> u32 {
    wire_and_segments(pkt).0
}

/// The bytes the link charges for `pkt` and the number of wire segments it stands for.
fn wire_and_segments(pkt: &Packet) -> (u32, u32) {
    let h = Headers::parse(&pkt.data);
    let len = pkt.len();
    let l2 = u32::from(h.network_offset).min(len);
    let Some(gso) = pkt.meta.gso.filter(|g| g.size > 0) else {
        return ((len - l2).max(1), 1);
    };
    // End of all headers: TCP's when parsed, else the L4 start from the virtio-net header's
    // checksum start (carried in the tag) plus a UDP header.
    let hdr_end = match h.tcp {
        Some(t) => u32::from(t.offset) + u32::from(t.header_len),
        None => ((pkt.meta.tag >> 32) as u16 as u32 + 8).max(l2),
    }
    .min(len);
    let payload = len - hdr_end;
    let segs = payload.div_ceil(u32::from(gso.size)).max(1);
    let wire = (hdr_end - l2)
        .saturating_mul(segs)
        .saturating_add(payload)
        .max(1);
    (wire, segs)
}

fn add(c: &mut Counter, len: u32) {
    c.add(len);
}

fn sub(c: &mut Counter, len: u32) {
    c.packets = c.packets.saturating_sub(1);
    c.bytes = c.bytes.saturating_sub(u64::from(len));
}

fn tx_time(bytes: u32, rate: f64) -> Duration {
    Duration::from_nanos((f64::from(bytes) * 1e9 / rate).ceil() as u64)
}

impl LinkModel {
    /// A link whose trace or schedule time 0 is `origin`. Out-of-range settings are clamped
    /// (loss to [0, 1], noise and bias to at least -1).
    pub fn new(cfg: LinkConfig, origin: Instant) -> LinkModel {
        let clean = |v: f64| if v.is_finite() { v } else { 0.0 };
        LinkModel {
            capacity: cfg.capacity,
            delay: cfg.delay,
            buffer_packets: cfg.buffer_packets,
            buffer_bytes: cfg.buffer_bytes,
            loss: clean(cfg.loss).clamp(0.0, 1.0),
            seed: cfg.seed,
            noise: clean(cfg.capacity_noise).max(0.0),
            bias: clean(cfg.capacity_bias).max(-1.0),
            origin,
            last_now: origin,
            queue: VecDeque::with_capacity(1024),
            line: VecDeque::with_capacity(1024),
            link_free: origin,
            next_opp: 0,
            head_sent: 0,
            rng: Rng::new(cfg.seed),
            stats: QdiscStats::default(),
            link: LinkStats::default(),
        }
    }

    /// The emulator's counters.
    pub fn link_stats(&self) -> LinkStats {
        self.link
    }

    /// The capacity setting.
    pub fn capacity(&self) -> &Capacity {
        &self.capacity
    }

    /// Replaces the capacity at `now`, keeping queued frames. The head frame restarts its
    /// transmission; a trace or schedule keeps its time origin.
    pub fn set_capacity(&mut self, now: Instant, capacity: Capacity) {
        self.advance(now);
        self.capacity = capacity;
        self.link_free = self.link_free.max(now);
        self.head_sent = 0;
        if let Capacity::Trace(t) = &self.capacity {
            self.next_opp = t.count_before(Instant::from_nanos(self.rel(now).as_nanos() + 1));
        }
    }

    fn rel(&self, t: Instant) -> Duration {
        t.saturating_duration_since(self.origin)
    }

    fn at_rel(&self, rel: Instant) -> Instant {
        self.origin
            .saturating_add(Duration::from_nanos(rel.as_nanos()))
    }

    /// The true capacity at `now` in bytes per second (`None`: unlimited). For a trace: the
    /// opportunities in the next [`CAPACITY_WINDOW`] × 1500 bytes.
    pub fn capacity_at(&self, now: Instant) -> Option<f64> {
        let rel = self.rel(now);
        match &self.capacity {
            Capacity::Unlimited => None,
            Capacity::Rate(r) => Some(*r as f64),
            Capacity::Schedule(s) => Some(s.rate_at(Instant::from_nanos(rel.as_nanos()))),
            Capacity::Trace(t) => {
                let a = t.count_before(Instant::from_nanos(rel.as_nanos()));
                let b = t.count_before(Instant::from_nanos(
                    rel.as_nanos() + CAPACITY_WINDOW.as_nanos(),
                ));
                Some((b - a) as f64 * f64::from(MAHIMAHI_MTU) / CAPACITY_WINDOW.as_secs_f64())
            }
        }
    }

    /// What the radio would report as its capacity at `now` (like airOS `dl_capacity`): the true
    /// capacity times `1 + bias` times `1 + noise × u`, `u` uniform in [-1, 1) drawn from the seed
    /// and the [`CAPACITY_WINDOW`] `now` falls in (so repeated queries within one window agree).
    /// Never negative; `None` when unlimited.
    pub fn capacity_estimate(&self, now: Instant) -> Option<f64> {
        let c = self.capacity_at(now)?;
        let epoch = self.rel(now).as_nanos() / CAPACITY_WINDOW.as_nanos();
        let u = Rng::new(self.seed ^ epoch.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x5eed).next_f64()
            * 2.0
            - 1.0;
        Some((c * (1.0 + self.bias) * (1.0 + self.noise * u)).max(0.0))
    }

    fn rate_at(&self, t: Instant) -> f64 {
        match &self.capacity {
            Capacity::Rate(r) => *r as f64,
            Capacity::Schedule(s) => s.rate_at(Instant::from_nanos(self.rel(t).as_nanos())),
            Capacity::Unlimited | Capacity::Trace(_) => f64::INFINITY,
        }
    }

    /// Moves the frames the link has finished by `now` from the buffer into the delay line.
    fn advance(&mut self, now: Instant) {
        self.last_now = self.last_now.max(now);
        match &self.capacity {
            Capacity::Unlimited => {
                while let Some(q) = self.queue.pop_front() {
                    let at = q.arrival;
                    self.finish(q, at);
                }
            }
            Capacity::Rate(_) | Capacity::Schedule(_) => {
                while let Some(h) = self.queue.front() {
                    let start = h.arrival.max(self.link_free);
                    let rate = self.rate_at(start);
                    if rate < 1.0 {
                        let resume = start.saturating_add(STALL_RECHECK);
                        if resume > now {
                            break;
                        }
                        self.link_free = resume;
                        continue;
                    }
                    let end = start.saturating_add(tx_time(h.wire, rate));
                    if end > now {
                        break;
                    }
                    self.link_free = end;
                    if let Some(q) = self.queue.pop_front() {
                        self.finish(q, end);
                    }
                }
            }
            Capacity::Trace(_) => {
                // Moved out for the loop (no copy), put back after.
                let cap = std::mem::replace(&mut self.capacity, Capacity::Unlimited);
                if let Capacity::Trace(trace) = &cap {
                    self.advance_trace(trace, now);
                }
                self.capacity = cap;
            }
        }
    }

    fn advance_trace(&mut self, trace: &MahimahiTrace, now: Instant) {
        loop {
            if self.queue.is_empty() {
                let seen = trace.count_before(Instant::from_nanos(
                    self.rel(now).as_nanos().saturating_add(1),
                ));
                self.next_opp = self.next_opp.max(seen);
                break;
            }
            let t = self.at_rel(trace.opportunity(self.next_opp));
            if t > now {
                break;
            }
            let mut bytes = MAHIMAHI_MTU;
            while bytes > 0 {
                let Some(h) = self.queue.front() else { break };
                let take = (h.wire - self.head_sent).min(bytes);
                self.head_sent += take;
                bytes -= take;
                if self.head_sent >= h.wire {
                    self.head_sent = 0;
                    if let Some(q) = self.queue.pop_front() {
                        self.finish(q, t);
                    }
                }
            }
            self.next_opp += 1;
        }
    }

    /// The frame `q` left the link at `end`: into the delay line.
    fn finish(&mut self, q: Queued, end: Instant) {
        let len = q.pkt.len();
        sub(&mut self.link.backlog, len);
        self.link.backlog_segments = self.link.backlog_segments.saturating_sub(u64::from(q.segs));
        add(&mut self.link.in_flight, len);
        let s = end.saturating_duration_since(q.arrival);
        self.link.last_sojourn = s;
        let e = self.link.sojourn_ewma.as_nanos();
        self.link.sojourn_ewma = Duration::from_nanos(e - e / 8 + s.as_nanos() / 8);
        self.line.push_back(InFlight {
            pkt: q.pkt,
            release: end.saturating_add(self.delay),
        });
    }

    /// When the head of the buffer will have finished on the link (`None`: buffer empty).
    fn head_end(&self) -> Option<Instant> {
        let h = self.queue.front()?;
        Some(match &self.capacity {
            Capacity::Unlimited => h.arrival,
            Capacity::Rate(_) | Capacity::Schedule(_) => {
                let start = h.arrival.max(self.link_free);
                let rate = self.rate_at(start);
                if rate < 1.0 {
                    start.saturating_add(STALL_RECHECK)
                } else {
                    start.saturating_add(tx_time(h.wire, rate))
                }
            }
            Capacity::Trace(t) => {
                let left = h.wire.saturating_sub(self.head_sent).max(1);
                let n = u64::from(left.div_ceil(MAHIMAHI_MTU));
                self.at_rel(t.opportunity(self.next_opp + n - 1))
            }
        })
    }

    /// The earliest instant `dequeue` can return a frame, given what is queued now (`None`:
    /// nothing queued or propagating). For a rate-0 link it is the next time the link looks again.
    pub fn next_departure(&self) -> Option<Instant> {
        match (self.line.front(), self.head_end()) {
            (Some(f), _) => Some(f.release),
            (None, Some(e)) => Some(e.saturating_add(self.delay)),
            (None, None) => None,
        }
    }

    /// Counts a dropped arriving frame.
    fn drop_arrival(&mut self, pkt: Packet, reason: DropReason, drops: &mut Vec<Dropped>) {
        let len = pkt.len();
        self.stats.drop_counter(reason).add(len);
        match reason {
            DropReason::Overflow => self.link.buffer_drops.add(len),
            _ => self.link.loss_drops.add(len),
        }
        drops.push(Dropped {
            packet: pkt,
            reason,
        });
    }
}

impl Qdisc for LinkModel {
    fn enqueue(&mut self, now: Instant, pkt: Packet, drops: &mut Vec<Dropped>) {
        self.advance(now);
        let len = pkt.len();
        self.stats.enqueued.add(len);
        if self.loss > 0.0 && self.rng.next_f64() < self.loss {
            return self.drop_arrival(pkt, DropReason::Aqm, drops);
        }
        let (wire, segs) = wire_and_segments(&pkt);
        let full_p = self
            .buffer_packets
            .is_some_and(|l| self.link.backlog_segments + u64::from(segs) > u64::from(l));
        let full_b = self
            .buffer_bytes
            .is_some_and(|l| self.link.backlog.bytes + u64::from(len) > l);
        if full_p || full_b {
            return self.drop_arrival(pkt, DropReason::Overflow, drops);
        }
        self.link.backlog_segments += u64::from(segs);
        self.stats.backlog.add(len);
        self.link.backlog.add(len);
        self.queue.push_back(Queued {
            pkt,
            arrival: now,
            wire,
            segs,
        });
    }

    fn dequeue(&mut self, now: Instant, _drops: &mut Vec<Dropped>) -> Dequeue {
        self.advance(now);
        if self.line.front().is_some_and(|f| f.release <= now) {
            if let Some(f) = self.line.pop_front() {
                let len = f.pkt.len();
                sub(&mut self.stats.backlog, len);
                sub(&mut self.link.in_flight, len);
                self.stats.dequeued.add(len);
                self.link.tx.add(len);
                return Dequeue::Packet(f.pkt);
            }
        }
        match self.next_departure() {
            Some(t) => {
                self.stats.overlimits += 1;
                Dequeue::NotBefore(t)
            }
            None => Dequeue::Empty,
        }
    }

    /// Sets a fixed capacity (`None`: unlimited), replacing a trace or schedule, from the last
    /// instant the model saw.
    fn set_rate(&mut self, rate: Option<u64>) -> Result<(), NoShaper> {
        let cap = rate.map_or(Capacity::Unlimited, Capacity::Rate);
        self.set_capacity(self.last_now, cap);
        Ok(())
    }

    fn stats(&self) -> QdiscStats {
        self.stats
    }

    fn kind(&self) -> &'static str {
        "linkem"
    }
}

fn rate_str(r: Option<f64>) -> String {
    r.map_or("unlimited".into(), |r| {
        qdisc::tc_units::format_rate(r.round() as u64)
    })
}

impl Stage for LinkModel {
    fn dir_names(&self) -> DirNames {
        DirNames::UpDown
    }

    fn stage_text(&self, dev: &str, now: Instant) -> String {
        let l = &self.link;
        format!(
            "linkem dev {dev}: capacity {} estimate {} delay {}us buffer {}\n \
             backlog {}b {}p in_flight {}p sojourn last {}us ewma {}us\n \
             sent {} bytes {} pkt, dropped buffer {} loss {}\n",
            rate_str(self.capacity_at(now)),
            rate_str(self.capacity_estimate(now)),
            self.delay.as_micros(),
            match (self.buffer_packets, self.buffer_bytes) {
                (Some(p), Some(b)) => format!("{p}p {b}b"),
                (Some(p), None) => format!("{p}p"),
                (None, Some(b)) => format!("{b}b"),
                (None, None) => "unlimited".into(),
            },
            l.backlog.bytes,
            l.backlog.packets,
            l.in_flight.packets,
            l.last_sojourn.as_micros(),
            l.sojourn_ewma.as_micros(),
            l.tx.bytes,
            l.tx.packets,
            l.buffer_drops.packets,
            l.loss_drops.packets,
        )
    }

    fn stage_json(&self, _dev: &str, now: Instant) -> Value {
        let l = &self.link;
        let bps = |r: Option<f64>| r.map(|r| r.round() as u64);
        json!({
            "kind": "linkem",
            "capacity": bps(self.capacity_at(now)),
            "capacity_estimate": bps(self.capacity_estimate(now)),
            "capacity_mode": match &self.capacity {
                Capacity::Unlimited => "unlimited",
                Capacity::Rate(_) => "rate",
                Capacity::Trace(_) => "trace",
                Capacity::Schedule(_) => "schedule",
            },
            "delay_us": self.delay.as_micros(),
            "buffer_packets": self.buffer_packets,
            "buffer_bytes": self.buffer_bytes,
            "loss": self.loss,
            "backlog": l.backlog.bytes,
            "qlen": l.backlog.packets,
            "qlen_segments": l.backlog_segments,
            "in_flight": l.in_flight.packets,
            "sojourn_us": l.last_sojourn.as_micros(),
            "sojourn_ewma_us": l.sojourn_ewma.as_micros(),
            "drops_buffer": l.buffer_drops.packets,
            "drops_loss": l.loss_drops.packets,
            "tx_bytes": l.tx.bytes,
            "tx_packets": l.tx.packets,
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use qdisc::packet::FrameSpec;
    use std::net::{IpAddr, Ipv4Addr};

    /// A UDP frame of `ip_len` IP bytes (frame = ip_len + 14).
    fn frame(ip_len: usize) -> Packet {
        let a = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
        let b = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));
        let p = FrameSpec::udp(a, b, 1, 2)
            .with_payload(ip_len - 28)
            .packet();
        assert_eq!(wire_bytes(&p), ip_len as u32);
        p
    }

    fn link(cfg: LinkConfig) -> LinkModel {
        LinkModel::new(cfg, Instant::ZERO)
    }

    /// Drives the model: frames offered at `arrivals` (ns), dequeued at every asked-for time;
    /// returns the delivery times in ns.
    fn run(m: &mut LinkModel, arrivals: &[(u64, usize)]) -> Vec<u64> {
        let mut drops = Vec::new();
        let mut out = Vec::new();
        let mut i = 0;
        let mut now = 0u64;
        loop {
            while i < arrivals.len() && arrivals[i].0 <= now {
                m.enqueue(
                    Instant::from_nanos(arrivals[i].0),
                    frame(arrivals[i].1),
                    &mut drops,
                );
                i += 1;
            }
            let next_arrival = arrivals.get(i).map(|a| a.0);
            match m.dequeue(Instant::from_nanos(now), &mut drops) {
                Dequeue::Packet(_) => {
                    out.push(now);
                    continue;
                }
                Dequeue::NotBefore(t) => {
                    now = next_arrival.map_or(t.as_nanos(), |a| a.min(t.as_nanos()));
                }
                Dequeue::Empty => match next_arrival {
                    Some(a) => now = a,
                    None => return out,
                },
            }
        }
    }

    #[test]
    fn fixed_rate_serialises_back_to_back_frames_at_the_capacity() {
        // 1,250,000 B/s: 1500 IP bytes take 1.2 ms.
        let mut m = link(LinkConfig {
            capacity: Capacity::Rate(1_250_000),
            ..LinkConfig::default()
        });
        let t = run(
            &mut m,
            &[(0, 1500), (0, 1500), (0, 1500), (10_000_000, 500)],
        );
        assert_eq!(t, vec![1_200_000, 2_400_000, 3_600_000, 10_400_000]);
        let s = m.link_stats();
        assert_eq!(
            (s.tx.packets, s.backlog.packets, s.in_flight.packets),
            (4, 0, 0)
        );
        assert_eq!(s.last_sojourn, Duration::from_micros(400));
        assert!(m.stats().is_balanced());
    }

    #[test]
    fn delay_is_added_after_the_link_and_late_calls_do_not_lower_the_rate() {
        let mut m = link(LinkConfig {
            capacity: Capacity::Rate(1_250_000),
            delay: Duration::from_millis(20),
            ..LinkConfig::default()
        });
        let mut drops = Vec::new();
        for _ in 0..3 {
            m.enqueue(Instant::ZERO, frame(1500), &mut drops);
        }
        assert_eq!(
            m.dequeue(Instant::ZERO, &mut drops),
            Dequeue::NotBefore(Instant::from_nanos(21_200_000))
        );
        // Called very late: all three are due, in order, at once.
        let late = Instant::from_millis(100);
        for _ in 0..3 {
            assert!(matches!(m.dequeue(late, &mut drops), Dequeue::Packet(_)));
        }
        assert_eq!(m.dequeue(late, &mut drops), Dequeue::Empty);
        assert_eq!(m.link_stats().last_sojourn, Duration::from_micros(3600));
    }

    #[test]
    fn mahimahi_trace_gives_one_1500_byte_opportunity_per_line_and_loses_unused_ones() {
        // Opportunities at 1, 2, 2, 5 ms, looping every 5 ms.
        let trace = MahimahiTrace::from_offsets(vec![1, 2, 2, 5]).unwrap();
        let mut m = link(LinkConfig {
            capacity: Capacity::Trace(trace),
            ..LinkConfig::default()
        });
        // Idle until 3 ms: the opportunities at 1 and 2 ms are lost. Three full frames and two
        // small ones at 3 ms: 5 ms (frame 1), 6 ms (frame 2), 7 ms has two opportunities: frame
        // 3 takes one, the two 700-byte frames share the other.
        let ms = 1_000_000;
        let t = run(
            &mut m,
            &[
                (3 * ms, 1500),
                (3 * ms, 1500),
                (3 * ms, 1500),
                (3 * ms, 700),
                (3 * ms, 700),
            ],
        );
        assert_eq!(t, vec![5 * ms, 6 * ms, 7 * ms, 7 * ms, 7 * ms]);
        // A frame arriving exactly at an opportunity waits for the next one (10 ms), and a
        // 2000-byte frame spans two opportunities (11 and 12 ms).
        let t = run(&mut m, &[(10 * ms, 2000)]);
        assert_eq!(t, vec![12 * ms]);
        // Capacity over [0, 100 ms): 4 opportunities per 5 ms, less the one at 100 ms.
        assert_eq!(m.capacity_at(Instant::ZERO), Some(79.0 * 1500.0 * 10.0));
    }

    #[test]
    fn gso_super_packets_are_charged_per_wire_segment() {
        let a = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
        let b = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));
        let mut p = FrameSpec::tcp(a, b, 1, 2).with_payload(14_480).packet();
        let hdrs = p.data.len() as u32 - 14_480 - 14;
        p.meta.gso = Some(qdisc::packet::Gso {
            kind: qdisc::packet::GsoKind::TcpV4,
            size: 1448,
        });
        assert_eq!(wire_bytes(&p), 10 * (hdrs + 1448));
    }

    #[test]
    fn buffer_limits_drop_arrivals_beyond_packets_or_bytes() {
        let mut drops = Vec::new();
        let mut m = link(LinkConfig {
            capacity: Capacity::Rate(1000),
            buffer_packets: Some(5),
            ..LinkConfig::default()
        });
        for _ in 0..8 {
            m.enqueue(Instant::ZERO, frame(100), &mut drops);
        }
        assert_eq!(drops.len(), 3);
        assert!(drops.iter().all(|d| d.reason == DropReason::Overflow));
        assert_eq!(m.link_stats().backlog.packets, 5);
        assert_eq!(m.link_stats().buffer_drops.packets, 3);
        let mut m = link(LinkConfig {
            capacity: Capacity::Rate(1000),
            buffer_packets: None,
            buffer_bytes: Some(3 * 114 + 50),
            ..LinkConfig::default()
        });
        drops.clear();
        for _ in 0..5 {
            m.enqueue(Instant::ZERO, frame(100), &mut drops);
        }
        assert_eq!((m.link_stats().backlog.packets, drops.len()), (3, 2));
        assert!(m.stats().is_balanced());
    }

    #[test]
    fn loss_rate_matches_the_setting_and_is_seeded() {
        let lost = |seed| {
            let mut m = link(LinkConfig {
                loss: 0.1,
                seed,
                buffer_packets: None,
                ..LinkConfig::default()
            });
            let mut drops = Vec::new();
            for i in 0..20_000 {
                m.enqueue(Instant::from_micros(i), frame(100), &mut drops);
                while let Dequeue::Packet(_) = m.dequeue(Instant::from_micros(i), &mut drops) {}
            }
            assert!(m.stats().is_balanced());
            assert_eq!(m.link_stats().loss_drops.packets, drops.len() as u64);
            m.link_stats().loss_drops.packets
        };
        let a = lost(1);
        assert!((1800..=2200).contains(&a), "{a}");
        assert_eq!(a, lost(1));
        assert_ne!(a, lost(2));
    }

    #[test]
    fn set_rate_applies_to_queued_frames_and_estimate_has_bias_and_bounded_noise() {
        let mut m = link(LinkConfig {
            capacity: Capacity::Rate(1_250_000),
            capacity_bias: 0.2,
            capacity_noise: 0.1,
            ..LinkConfig::default()
        });
        let mut drops = Vec::new();
        m.enqueue(Instant::ZERO, frame(1500), &mut drops);
        m.enqueue(Instant::ZERO, frame(1500), &mut drops);
        assert!(matches!(
            m.dequeue(Instant::from_nanos(1_200_000), &mut drops),
            Dequeue::Packet(_)
        ));
        m.set_rate(Some(2_500_000)).unwrap();
        assert_eq!(
            m.dequeue(Instant::from_nanos(1_200_000), &mut drops),
            Dequeue::NotBefore(Instant::from_nanos(1_800_000))
        );
        for k in 0..50 {
            let e = m.capacity_estimate(Instant::from_millis(k * 100)).unwrap();
            let r = e / (2_500_000.0 * 1.2);
            assert!((0.9..=1.1).contains(&r), "{r}");
        }
        let e0 = m.capacity_estimate(Instant::from_millis(0)).unwrap();
        assert_eq!(e0, m.capacity_estimate(Instant::from_millis(99)).unwrap());
        m.set_rate(None).unwrap();
        assert_eq!(m.capacity_estimate(Instant::ZERO), None);
    }
}
