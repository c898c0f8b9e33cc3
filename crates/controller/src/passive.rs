//! The passive delay signal: queueing delay read from the users' own TCP traffic, with no
//! reflector.
//!
//! A box on the path (the router's WAN device, or `purple bridge`) sees every TCP segment go
//! out towards the WAN and come back. TCP timestamps (RFC 7323) make each segment carry its
//! sender's clock (TSval) and echo the peer's latest one (TSecr), so the box can time a round
//! trip without sending anything, as pping does: when a segment leaves towards the WAN with
//! TSval `v` at `t1`, and the first segment of the same connection arriving from the WAN echoes
//! TSecr `v` at `t2`, then `t2 - t1` is the round trip from the box to the far host and back
//! (the **WAN side**, where the bottleneck's queue is). The same pairing the other way round
//! (a TSval arriving from the WAN, echoed by a segment leaving) times the **LAN side** (the
//! box to the local host and back).
//!
//! # From round trips to a queueing delay per direction
//!
//! - **Baseline per flow**: each connection keeps the smallest sample of the last one to two
//!   [`PassiveParams::baseline_window`]s (two alternating windows); a sample minus that
//!   baseline is the queueing delay it saw. Different servers have different path delays, so
//!   baselines are never shared between connections.
//! - **One way where the far clock's tick is known**: once a connection has shown its far
//!   host's TSval advancing for two seconds, the tick (1 ms on Linux, FreeBSD and macOS, 1 µs
//!   with Linux's `tcp_usec_ts`: any power of ten from 1 Hz to 1 MHz) is known, and each
//!   segment arriving from the WAN gives the **download** one-way delay (arrival minus its
//!   TSval, plus an unknown constant the baseline removes) and each WAN round trip splits at
//!   the far host's TSval into the **upload** part and the download part, as ICMP timestamps
//!   do. Without a known tick, the WAN round trip's queueing delay stands for both directions.
//! - **Robust across flows**: between two readings each flow keeps the *smallest* queueing
//!   delay it saw (delayed ACKs and a far host's scheduling only ever add delay), and a
//!   [`PassiveReading`] is the median of those over the flows that had one. A few flows with
//!   a slow server or a congested path of their own cannot move it.
//!
//! # What is not taken
//!
//! - Only the first segment carrying a given TSval starts a measurement and only the first
//!   echo of it ends one (later segments with the same values were sent later, or echo an
//!   older segment): duplicates, retransmissions carrying an old TSval and reordered segments
//!   are ignored.
//! - A **pure ACK** is only timed if the far host sent something else while it was on its way
//!   (a host with nothing to send echoes an old ACK's TSval whenever it next speaks, seconds
//!   later). Round trips above [`MAX_RTT`] are dropped.
//! - **Sampling**: only segments whose TSval (to start a measurement) or TSecr (to end one)
//!   falls in one of [`PassiveParams::sample`] classes of the timestamp space count, so every
//!   measured pair is still exact (a class is a set of timestamp values, not of packets) while
//!   the work drops to about `2 / sample` of the segments; a capture socket applies the same
//!   test in the kernel ([`PassiveParams::sampled`]) and never wakes up for the rest.
//! - Handshakes (SYN to SYN-ACK, SYN-ACK to ACK) are timed too; one sample per connection
//!   seeds its baseline but is not a queueing delay by itself, so connections without
//!   timestamps (Windows clients by default) add nothing to the estimate.
//!
//! # Bounds
//!
//! Sans-IO: frames and time come from the caller ([`PassiveDelay::on_frame`]); nothing is
//! allocated after [`PassiveDelay::new`] (a fixed table of [`PassiveParams::max_flows`] flows,
//! 8-way set-associative by a seeded hash of the connection's addresses and ports; a new flow
//! in a full set replaces the one heard from least recently), and each frame costs one parse,
//! one hash and O(1) work. A reading ([`PassiveDelay::reading`]) walks the table once.

use crate::config::{check, ConfigError};
use crate::{Direction, Duration, Instant, PerDir};
use qdisc::packet::{tcp_flags, Headers, TcpOption, TcpOptions};

/// Ways per set of the flow table.
const WAYS: usize = 8;
/// Outgoing timestamps remembered per flow and side, waiting for their echo.
const RING: usize = 4;
/// Round trips longer than this are not believed (a peer that had nothing to send).
pub const MAX_RTT: Duration = Duration::from_secs(5);
/// A flow silent for this long is free to be replaced without counting as an eviction.
const IDLE: Duration = Duration::from_secs(30);
/// The far host's TSval must have advanced for this long before its tick is inferred.
const TICK_SPAN: Duration = Duration::from_secs(2);
/// The inferred tick rate must lie within this many decades of a power of ten.
const TICK_TOLERANCE: f64 = 0.1;
/// The reference of a far clock is moved forward by this many ticks when it falls this far
/// behind (keeps 32-bit differences unambiguous across the TSval wrap).
const REBASE_TICKS: u32 = 1 << 30;

/// Where the caller saw a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Side {
    /// Leaving the box towards the WAN, after the box's own egress shaper (on Linux: a packet
    /// socket's outgoing frames on the WAN device; in `purple bridge`: transmitted on the WAN
    /// port).
    ToWan,
    /// Arriving at the box from the WAN, before the box's own ingress shaper (a packet
    /// socket's incoming frames on the WAN device; in `purple bridge`: received on the WAN
    /// port).
    FromWan,
}

/// The passive estimator's parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PassiveParams {
    /// Most connections tracked (rounded up to a power of two, at least 8). Default 2048
    /// (about 0.8 MB). Accepted 8 ..= 65536.
    pub max_flows: usize,
    /// One timestamp value in `sample` starts or ends a measurement (see the module
    /// documentation). Default 8. Accepted 1, 2, 4, ... 256.
    pub sample: u32,
    /// Each flow's baseline is its smallest round trip (or one-way delay) over the last one to
    /// two of these. Default 10 s. Accepted 1 s ..= 10 min.
    pub baseline_window: Duration,
    /// Seed of the flow hash (a caller's choice: a different seed per box keeps an outsider
    /// from crafting connections that collide in one set).
    pub seed: u64,
}

impl Default for PassiveParams {
    fn default() -> Self {
        PassiveParams {
            max_flows: 2048,
            sample: 8,
            baseline_window: Duration::from_secs(10),
            seed: 0x7075_7270_6c65,
        }
    }
}

impl PassiveParams {
    /// Bounds check; errors name the option as in the daemon's file.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check(
            (8..=65_536).contains(&self.max_flows),
            "passive.max_flows",
            self.max_flows,
            "8 ..= 65536",
        )?;
        check(
            self.sample.is_power_of_two() && self.sample <= 256,
            "passive.sample",
            self.sample,
            "1, 2, 4, 8, 16, 32, 64, 128 or 256",
        )?;
        check(
            (Duration::from_secs(1)..=Duration::from_secs(600)).contains(&self.baseline_window),
            "passive.baseline_window_s",
            self.baseline_window,
            "1 ..= 600 (seconds)",
        )
    }

    /// Whether a segment with timestamps `(tsval, tsecr)` can start or end a measurement: its
    /// TSval or its TSecr is in the sampled class (the low bits that `sample` masks are zero).
    /// A capture filter that passes only these segments (and SYNs) loses nothing the estimator
    /// would use.
    pub fn sampled(&self, tsval: u32, tsecr: u32) -> bool {
        let mask = self.sample.max(1) - 1;
        tsval & mask == 0 || tsecr & mask == 0
    }
}

/// The estimate at one reading: what the flows saw since the previous reading.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PassiveReading {
    /// Queueing delay per direction: the median over flows of each flow's smallest queueing
    /// delay in the interval (one-way where flows' far clocks are known, else the WAN round
    /// trip's); `None` where no flow gave a sample.
    pub queue: PerDir<Option<Duration>>,
    /// Flows behind each direction's estimate.
    pub flows: PerDir<u32>,
    /// Whether each direction's estimate is one-way (`true`) or the WAN round trip's queueing
    /// delay standing for both directions (`false`).
    pub one_way: PerDir<bool>,
    /// The WAN side's round-trip queueing delay (median over flows), if any.
    pub wan_rtt_queue: Option<Duration>,
    /// The LAN side's round-trip queueing delay (median over flows), if any: the box's own
    /// queues and the local network (Wi-Fi). Reported, not used for control.
    pub lan_rtt_queue: Option<Duration>,
    /// Flows tracked now (heard from within the last 30 s).
    pub tracked: u32,
}

/// A [`PassiveReading`] as it crosses a process boundary: `purple bridge` measures inline and
/// answers its control socket's `passive` command with one as JSON; `purple control` reads it.
/// Delays in ms.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ReadingWire {
    /// Download queueing delay, ms.
    pub down_ms: Option<f64>,
    /// Upload queueing delay, ms.
    pub up_ms: Option<f64>,
    /// Flows behind the download estimate.
    pub flows_down: u32,
    /// Flows behind the upload estimate.
    pub flows_up: u32,
    /// Whether the download estimate is one-way.
    pub one_way_down: bool,
    /// Whether the upload estimate is one-way.
    pub one_way_up: bool,
    /// The WAN side's round-trip queueing delay, ms.
    pub wan_rtt_ms: Option<f64>,
    /// The LAN side's round-trip queueing delay, ms.
    pub lan_rtt_ms: Option<f64>,
    /// Flows tracked.
    pub tracked: u32,
}

impl From<&PassiveReading> for ReadingWire {
    fn from(r: &PassiveReading) -> Self {
        let ms = |d: Option<Duration>| d.map(|d| d.as_millis_f64());
        ReadingWire {
            down_ms: ms(r.queue.down),
            up_ms: ms(r.queue.up),
            flows_down: r.flows.down,
            flows_up: r.flows.up,
            one_way_down: r.one_way.down,
            one_way_up: r.one_way.up,
            wan_rtt_ms: ms(r.wan_rtt_queue),
            lan_rtt_ms: ms(r.lan_rtt_queue),
            tracked: r.tracked,
        }
    }
}

impl From<&ReadingWire> for PassiveReading {
    /// Negative, infinite or NaN delays read as none.
    fn from(w: &ReadingWire) -> Self {
        let d = |ms: Option<f64>| {
            ms.filter(|x| x.is_finite() && *x >= 0.0)
                .map(|x| Duration::from_secs_f64(x / 1e3))
        };
        PassiveReading {
            queue: PerDir::new(d(w.down_ms), d(w.up_ms)),
            flows: PerDir::new(w.flows_down, w.flows_up),
            one_way: PerDir::new(w.one_way_down, w.one_way_up),
            wan_rtt_queue: d(w.wan_rtt_ms),
            lan_rtt_queue: d(w.lan_rtt_ms),
            tracked: w.tracked,
        }
    }
}

/// Counters since [`PassiveDelay::new`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PassiveStats {
    /// Frames given to [`PassiveDelay::on_frame`].
    pub frames: u64,
    /// Of these, TCP segments of IPv4 or IPv6 with a readable header.
    pub tcp: u64,
    /// WAN-side round trips measured (timestamp echoes).
    pub wan_samples: u64,
    /// LAN-side round trips measured.
    pub lan_samples: u64,
    /// One-way download delays measured (far clocks known).
    pub down_samples: u64,
    /// One-way upload delays measured.
    pub up_samples: u64,
    /// Handshakes timed (either side).
    pub handshakes: u64,
    /// Echoes not timed: a pure ACK the far side had no reason to answer promptly, or a round
    /// trip above [`MAX_RTT`].
    pub untimed: u64,
    /// Flows replaced while still active (the table's set was full).
    pub evictions: u64,
}

/// Which per-flow measurement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Metric {
    WanRtt = 0,
    LanRtt = 1,
    Up = 2,
    Down = 3,
}
const METRICS: usize = 4;

/// A minimum over the last one to two windows (two alternating buckets).
#[derive(Clone, Copy, Debug)]
struct WinMin {
    cur: i64,
    prev: i64,
    start: Instant,
}

impl WinMin {
    const EMPTY: WinMin = WinMin {
        cur: i64::MAX,
        prev: i64::MAX,
        start: Instant::ZERO,
    };

    /// Adds `v` at `now`; returns the baseline (the minimum, `v` included).
    fn update(&mut self, now: Instant, v: i64, window: Duration) -> i64 {
        if self.cur == i64::MAX && self.prev == i64::MAX {
            self.start = now;
        } else if now.saturating_duration_since(self.start) >= window {
            // A whole window without samples forgets the older one too.
            self.prev = if now.saturating_duration_since(self.start) >= window.saturating_mul(2) {
                i64::MAX
            } else {
                self.cur
            };
            self.cur = i64::MAX;
            self.start = now;
        }
        self.cur = self.cur.min(v);
        self.cur.min(self.prev)
    }
}

/// A timestamp seen on one side, waiting for its echo from the other.
#[derive(Clone, Copy, Debug, Default)]
struct Pending {
    ts: u32,
    at: Instant,
    /// A pure ACK (no payload, SYN or FIN): only timed if the peer spoke meanwhile.
    pure: bool,
}

/// A small FIFO of [`Pending`] (oldest first).
#[derive(Clone, Copy, Debug, Default)]
struct Ring {
    e: [Pending; RING],
    head: u8,
    len: u8,
}

impl Ring {
    /// No timestamp waiting.
    const EMPTY: Ring = Ring {
        e: [Pending {
            ts: 0,
            at: Instant::ZERO,
            pure: false,
        }; RING],
        head: 0,
        len: 0,
    };

    fn front(&self) -> Option<Pending> {
        (self.len > 0).then(|| self.e[usize::from(self.head)])
    }
    fn pop(&mut self) {
        if self.len > 0 {
            self.head = (self.head + 1) % RING as u8;
            self.len -= 1;
        }
    }
    fn push(&mut self, p: Pending) -> bool {
        if usize::from(self.len) == RING {
            return false;
        }
        let i = (usize::from(self.head) + usize::from(self.len)) % RING;
        self.e[i] = p;
        self.len += 1;
        true
    }
}

/// `a` is earlier than `b` in 32-bit timestamp space.
fn ts_before(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

/// The far host's TSval clock.
#[derive(Clone, Copy, Debug, Default)]
struct FarClock {
    /// The reference: (local time, TSval) of a segment from the far host.
    reference: Option<(Instant, u32)>,
    /// Nanoseconds per tick, once inferred.
    ns_per_tick: Option<u64>,
}

impl FarClock {
    /// Sees TSval `ts` arriving at `now`; infers the tick once the span allows.
    fn observe(&mut self, now: Instant, ts: u32) {
        let Some((t0, s0)) = self.reference else {
            self.reference = Some((now, ts));
            return;
        };
        let ticks = ts.wrapping_sub(s0) as i32;
        if let Some(npt) = self.ns_per_tick {
            if ticks > REBASE_TICKS as i32 {
                // Move the reference along the far clock: the raw delays stay continuous.
                let dt = Duration::from_nanos(u64::from(REBASE_TICKS).saturating_mul(npt));
                self.reference = Some((t0.saturating_add(dt), s0.wrapping_add(REBASE_TICKS)));
            }
            return;
        }
        let span = now.saturating_duration_since(t0);
        if span < TICK_SPAN || ticks <= 0 {
            if ticks < 0 && span >= TICK_SPAN {
                // The far clock went backwards (a new TSval offset): start again.
                self.reference = Some((now, ts));
            }
            return;
        }
        let rate = f64::from(ticks) / span.as_secs_f64();
        let decades = rate.log10();
        let k = decades.round();
        if (decades - k).abs() <= TICK_TOLERANCE && (0.0..=6.0).contains(&k) {
            self.ns_per_tick = Some(10u64.pow(9 - k as u32));
        } else if span >= TICK_SPAN.saturating_mul(10) {
            // Not a clock we understand (or a long idle gap): try again from here.
            self.reference = Some((now, ts));
        }
    }

    /// The far time of TSval `ts` minus the local time `at`, in ns, up to a constant offset
    /// (the reference's): the raw one-way delay from here to there is `-this`.
    fn offset_ns(&self, ts: u32, at: Instant) -> Option<i64> {
        let ((t0, s0), npt) = (self.reference?, self.ns_per_tick?);
        let far = i64::from(ts.wrapping_sub(s0) as i32).saturating_mul(npt as i64);
        let local = at.as_nanos() as i64 - t0.as_nanos() as i64;
        Some(far - local)
    }
}

/// A connection, by its LAN-side and WAN-side endpoints.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Key {
    lan: [u8; 16],
    wan: [u8; 16],
    lan_port: u16,
    wan_port: u16,
}

/// One tracked connection.
#[derive(Clone, Copy, Debug)]
struct Flow {
    key: Key,
    used: bool,
    last_seen: Instant,
    /// The last segment from the WAN, and towards it (for the pure-ACK rule).
    last_from_wan: Option<Instant>,
    last_to_wan: Option<Instant>,
    /// TSvals sent towards the WAN, waiting for the far host's echo (WAN round trips).
    out: Ring,
    /// TSvals arrived from the WAN, waiting for the local host's echo (LAN round trips).
    inn: Ring,
    last_out_ts: Option<u32>,
    last_in_ts: Option<u32>,
    /// A SYN or SYN-ACK sent towards the WAN (or arrived from it), waiting for the answer.
    hs_out: Option<Instant>,
    hs_in: Option<Instant>,
    far: FarClock,
    base: [WinMin; METRICS],
    /// Smallest queueing delay (ns) per metric in the reading window `epoch`.
    win: [i64; METRICS],
    epoch: u32,
}

impl Flow {
    const EMPTY: Flow = Flow {
        key: Key {
            lan: [0; 16],
            wan: [0; 16],
            lan_port: 0,
            wan_port: 0,
        },
        used: false,
        last_seen: Instant::ZERO,
        last_from_wan: None,
        last_to_wan: None,
        out: Ring::EMPTY,
        inn: Ring::EMPTY,
        last_out_ts: None,
        last_in_ts: None,
        hs_out: None,
        hs_in: None,
        far: FarClock {
            reference: None,
            ns_per_tick: None,
        },
        base: [WinMin::EMPTY; METRICS],
        win: [i64::MAX; METRICS],
        epoch: 0,
    };

    fn fresh(key: Key, now: Instant) -> Flow {
        Flow {
            key,
            used: true,
            last_seen: now,
            ..Flow::EMPTY
        }
    }
}

/// What one segment says, parsed.
#[derive(Clone, Copy, Debug)]
struct Segment {
    key: Key,
    flags: u16,
    payload: u32,
    ts: Option<(u32, u32)>,
}

/// The passive delay estimator. See the module documentation.
#[derive(Debug)]
pub struct PassiveDelay {
    p: PassiveParams,
    flows: Vec<Flow>,
    sets: usize,
    epoch: u32,
    stats: PassiveStats,
    /// Scratch for medians (capacity = the table's size: no allocation at a reading).
    scratch: Vec<i64>,
    /// The slots that took a sample in the current reading window, each once (capacity = the
    /// table's size): a reading visits these, not the whole table, so an idle link costs
    /// nothing and a busy one what its flows cost.
    touched: Vec<u32>,
    /// When each slot was last heard from (ns of [`Instant`]; 0: free), apart from the table so
    /// that counting the tracked flows reads 8 bytes a slot rather than a whole flow.
    seen: Vec<u64>,
}

impl PassiveDelay {
    /// An estimator with `p` (validated). Allocates its whole flow table now.
    pub fn new(p: PassiveParams) -> Result<Self, ConfigError> {
        p.validate()?;
        let n = p.max_flows.next_power_of_two().max(WAYS);
        Ok(PassiveDelay {
            p,
            flows: vec![Flow::EMPTY; n],
            sets: n / WAYS,
            epoch: 1,
            stats: PassiveStats::default(),
            scratch: Vec::with_capacity(n),
            touched: Vec::with_capacity(n),
            seen: vec![0; n],
        })
    }

    /// The parameters.
    pub fn params(&self) -> &PassiveParams {
        &self.p
    }

    /// Counters since creation.
    pub fn stats(&self) -> PassiveStats {
        self.stats
    }

    /// Flows heard from within the last 30 s at `now`.
    pub fn tracked(&self, now: Instant) -> u32 {
        let now = now.as_nanos();
        let idle = IDLE.as_nanos();
        self.seen
            .iter()
            .filter(|&&t| t != 0 && now.saturating_sub(t) < idle)
            .count() as u32
    }

    /// Sees the Ethernet frame `frame` (only its headers are read: a capture may cut it after
    /// the TCP options) on `side` at `now`. Call for every frame on the WAN side, in the order
    /// seen, with times that never go backwards. Anything that is not a TCP segment over IPv4
    /// or IPv6 is ignored; malformed frames are ignored. Bounded work, never panics.
    pub fn on_frame(&mut self, now: Instant, side: Side, frame: &[u8]) {
        self.stats.frames += 1;
        let Some(seg) = parse(frame, side) else {
            return;
        };
        self.stats.tcp += 1;
        self.on_segment(now, side, &seg);
    }

    fn hash(&self, k: &Key) -> u64 {
        let mut h = self.p.seed ^ 0x9e37_79b9_7f4a_7c15;
        let mut mix = |x: u64| {
            h = (h ^ x).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29);
        };
        for c in k.lan.chunks_exact(8).chain(k.wan.chunks_exact(8)) {
            let mut b = [0u8; 8];
            b.copy_from_slice(c);
            mix(u64::from_le_bytes(b));
        }
        mix(u64::from(k.lan_port) << 16 | u64::from(k.wan_port));
        h ^ (h >> 32)
    }

    /// The slot of `key`, creating it (in a free way, else the least recently heard one of
    /// its set) when `create`.
    fn slot(&mut self, now: Instant, key: &Key, create: bool) -> Option<usize> {
        let set = (self.hash(key) as usize) & (self.sets - 1);
        let ways = set * WAYS..(set + 1) * WAYS;
        let mut victim = ways.start;
        for i in ways {
            let f = &self.flows[i];
            if f.used && f.key == *key {
                return Some(i);
            }
            let v = &self.flows[victim];
            if v.used && (!f.used || f.last_seen < v.last_seen) {
                victim = i;
            }
        }
        if !create {
            return None;
        }
        let v = &self.flows[victim];
        if v.used && now.saturating_duration_since(v.last_seen) < IDLE {
            self.stats.evictions += 1;
        }
        // A slot already listed in this reading window stays listed once: the new flow keeps
        // the window's epoch with no sample yet.
        let listed = self.flows[victim].epoch == self.epoch;
        self.flows[victim] = Flow::fresh(*key, now);
        if listed {
            self.flows[victim].epoch = self.epoch;
        }
        Some(victim)
    }

    fn on_segment(&mut self, now: Instant, side: Side, seg: &Segment) {
        let syn = seg.flags & tcp_flags::SYN != 0;
        let ack = seg.flags & tcp_flags::ACK != 0;
        let sampled = match seg.ts {
            Some((v, e)) => self.p.sampled(v, e),
            None => false,
        };
        // Only connections that can give a sample are tracked: handshakes, and segments with
        // timestamps in the sampled classes.
        let Some(i) = self.slot(now, &seg.key, syn || sampled) else {
            return;
        };
        let window = self.p.baseline_window;
        let epoch = self.epoch;
        let sample_mask = self.p.sample.max(1) - 1;
        let pure = seg.payload == 0 && seg.flags & (tcp_flags::SYN | tcp_flags::FIN) == 0;
        let mut stats = self.stats;
        self.seen[i] = now.as_nanos().max(1);
        let f = &mut self.flows[i];
        f.last_seen = now;
        if f.epoch != epoch {
            f.win = [i64::MAX; METRICS];
            f.epoch = epoch;
            // Each slot once per window (`slot` keeps a replaced flow's listing), so this never
            // grows past the table's size: no allocation.
            self.touched.push(i as u32);
        }
        let sample = |f: &mut Flow, m: Metric, raw: i64, queue: bool| {
            let b = f.base[m as usize].update(now, raw, window);
            if queue {
                let q = raw.saturating_sub(b).max(0);
                f.win[m as usize] = f.win[m as usize].min(q);
            }
        };
        // The handshake: a SYN (or SYN-ACK) answered from the other side.
        let (mine, theirs) = match side {
            Side::ToWan => (f.hs_out, f.hs_in),
            Side::FromWan => (f.hs_in, f.hs_out),
        };
        let mut theirs_after = theirs;
        if let Some(t) = theirs {
            theirs_after = None;
            if ack {
                stats.handshakes += 1;
                let rtt = now.saturating_duration_since(t);
                if rtt <= MAX_RTT {
                    let m = match side {
                        Side::FromWan => Metric::WanRtt,
                        Side::ToWan => Metric::LanRtt,
                    };
                    sample(f, m, rtt.as_nanos() as i64, false);
                }
            }
        }
        // A second SYN before the answer is a retransmission: its answer is ambiguous.
        let mine_after = match (syn, mine) {
            (true, None) => Some(now),
            (true, Some(_)) => None,
            (false, m) => m,
        };
        match side {
            Side::ToWan => (f.hs_out, f.hs_in) = (mine_after, theirs_after),
            Side::FromWan => (f.hs_in, f.hs_out) = (mine_after, theirs_after),
        }
        if let Some((tsval, tsecr)) = seg.ts {
            let (waiting, last_ts) = match side {
                Side::ToWan => (&mut f.inn, &mut f.last_out_ts),
                Side::FromWan => (&mut f.out, &mut f.last_in_ts),
            };
            // 1. The echo: ends a measurement started on the other side.
            let mut matched = None;
            if ack && tsecr & sample_mask == 0 {
                while let Some(p) = waiting.front() {
                    if ts_before(p.ts, tsecr) {
                        waiting.pop(); // never echoed exactly: superseded
                    } else if p.ts == tsecr {
                        waiting.pop();
                        matched = Some(p);
                        break;
                    } else {
                        break; // an older echo: already taken or never recorded
                    }
                }
            }
            // Drop entries nobody will echo any more.
            while let Some(p) = waiting.front() {
                if now.saturating_duration_since(p.at) > MAX_RTT {
                    waiting.pop();
                } else {
                    break;
                }
            }
            // 2. A new TSval: starts a measurement (first segment with it only).
            let new = last_ts.is_none_or(|l| ts_before(l, tsval));
            if new {
                *last_ts = Some(tsval);
            }
            let record = new && tsval & sample_mask == 0;
            if let Some(p) = matched {
                let spoke = match side {
                    // The peer (the side that echoed) spoke after the timed segment left,
                    // before this echo.
                    Side::FromWan => f.last_from_wan.is_some_and(|t| t > p.at),
                    Side::ToWan => f.last_to_wan.is_some_and(|t| t > p.at),
                };
                let rtt = now.saturating_duration_since(p.at);
                if (p.pure && !spoke) || rtt > MAX_RTT {
                    stats.untimed += 1;
                } else {
                    match side {
                        Side::FromWan => {
                            stats.wan_samples += 1;
                            sample(f, Metric::WanRtt, rtt.as_nanos() as i64, true);
                            // The split at the far host's clock: up = far(tsval) - sent.
                            if let Some(off) = f.far.offset_ns(tsval, p.at) {
                                stats.up_samples += 1;
                                sample(f, Metric::Up, off, true);
                            }
                        }
                        Side::ToWan => {
                            stats.lan_samples += 1;
                            sample(f, Metric::LanRtt, rtt.as_nanos() as i64, true);
                        }
                    }
                }
            }
            if side == Side::FromWan && new {
                f.far.observe(now, tsval);
                if record {
                    // Download one-way: arrival minus the far host's send time.
                    if let Some(off) = f.far.offset_ns(tsval, now) {
                        stats.down_samples += 1;
                        sample(f, Metric::Down, off.saturating_neg(), true);
                    }
                }
            }
            if record {
                let ring = match side {
                    Side::ToWan => &mut f.out,
                    Side::FromWan => &mut f.inn,
                };
                let _ = ring.push(Pending {
                    ts: tsval,
                    at: now,
                    pure,
                });
            }
        }
        match side {
            Side::ToWan => f.last_to_wan = Some(now),
            Side::FromWan => f.last_from_wan = Some(now),
        }
        self.stats = stats;
    }

    /// The estimate over the interval since the previous reading (or since creation), and a
    /// new interval starts. Call once per control step, right before it. Walks the flow table
    /// once; allocates nothing.
    #[must_use]
    pub fn reading(&mut self, now: Instant) -> PassiveReading {
        let epoch = self.epoch;
        self.epoch = self.epoch.wrapping_add(1).max(1);
        let mut r = PassiveReading {
            tracked: self.tracked(now),
            ..PassiveReading::default()
        };
        let wan = self.median(epoch, Metric::WanRtt);
        r.wan_rtt_queue = wan.map(|x| x.0);
        r.lan_rtt_queue = self.median(epoch, Metric::LanRtt).map(|x| x.0);
        for (dir, m) in [(Direction::Down, Metric::Down), (Direction::Up, Metric::Up)] {
            let (q, n, one_way) = match self.median(epoch, m) {
                Some((q, n)) => (Some(q), n, true),
                None => match wan {
                    Some((q, n)) => (Some(q), n, false),
                    None => (None, 0, false),
                },
            };
            r.queue[dir] = q;
            r.flows[dir] = n;
            r.one_way[dir] = one_way;
        }
        self.touched.clear();
        r
    }

    /// The median of the flows' window minima of `m` in `epoch`, and how many flows had one.
    fn median(&mut self, epoch: u32, m: Metric) -> Option<(Duration, u32)> {
        self.scratch.clear();
        for &i in &self.touched {
            let f = &self.flows[i as usize];
            if f.used && f.epoch == epoch && f.win[m as usize] != i64::MAX {
                self.scratch.push(f.win[m as usize]);
            }
        }
        let n = self.scratch.len();
        if n == 0 {
            return None;
        }
        // Lower median for an even count (the conservative choice for a cut).
        let (_, &mut v, _) = self.scratch.select_nth_unstable((n - 1) / 2);
        Some((Duration::from_nanos(v.max(0) as u64), n as u32))
    }
}

/// Reads the connection, flags, payload length and timestamps of a TCP segment.
fn parse(frame: &[u8], side: Side) -> Option<Segment> {
    let h = Headers::parse(frame);
    let (ip, tcp) = (h.ip?, h.tcp?);
    let t = ip.tuple;
    let key = match side {
        Side::ToWan => Key {
            lan: t.src,
            wan: t.dst,
            lan_port: t.src_port,
            wan_port: t.dst_port,
        },
        Side::FromWan => Key {
            lan: t.dst,
            wan: t.src,
            lan_port: t.dst_port,
            wan_port: t.src_port,
        },
    };
    let ts = TcpOptions::new(frame, &tcp).find_map(|o| match o {
        TcpOption::Timestamp { tsval, tsecr } => Some((tsval, tsecr)),
        _ => None,
    });
    Some(Segment {
        key,
        flags: tcp.flags,
        payload: tcp.payload_len,
        ts,
    })
}

#[cfg(test)]
mod tests;
