//! A single-class HTB shaper, as Linux `sch_htb` with one root class (`tc qdisc add ... root
//! handle 1: htb default 1; tc class add ... classid 1:1 htb rate R [ceil C] [burst B]
//! [cburst CB]`) and a child qdisc on that class.
//!
//! The class has two token buckets, kept as Linux keeps them, in nanoseconds of transmission
//! time: `tokens` fill at wall-clock speed up to `buffer` (= `burst` bytes at `rate`), `ctokens`
//! likewise up to `cbuffer` (= `cburst` at `ceil`). The class may send when both are `>= 0`
//! (HTB's `HTB_CAN_SEND` with hysteresis off, Linux's default); sending a packet of `len` bytes
//! then takes `len` at `rate` from `tokens` (and at `ceil` from `ctokens`), which may leave them
//! negative; they never fall to `-60 s` (Linux's `mbuffer`). A root class has no parent to
//! borrow from, so the effective rate is `min(rate, ceil)`.
//!
//! While the class may not send, `dequeue` returns [`Dequeue::NotBefore`] at the instant both
//! buckets are back at zero and leaves the child alone: packets wait *in the child*, so the
//! child's AQM sees their sojourn. Only when the class may send is the child's `dequeue` called
//! (as HTB dequeues its leaf only for a class in its row).
//!
//! After an idle period the buckets are full, so HTB sends a burst: back to back, packets leave
//! while the bytes already sent are at most `burst` (one packet beyond, as the bucket may go
//! negative). CAKE's shaper, by contrast, never bursts.
//!
//! Not modelled: `overhead`, `linklayer`, `mpu` and `mtu` (rate-table) options, hysteresis,
//! `quantum`/`r2q` (irrelevant with one class), and HTB's 64 ns `psched` tick rounding of
//! `buffer`.

use crate::packet::Packet;
use crate::qdisc::{Counter, Dequeue, Dropped, NoShaper, Qdisc, QdiscStats};
use crate::time::Instant;

/// Most negative a bucket may get, and the longest idle time credited (Linux's `mbuffer`).
const MBUFFER_NS: i64 = 60_000_000_000;
/// tc htb's default `mtu`, used in the default burst.
pub const HTB_DEFAULT_MTU: u64 = 1600;
/// The `HZ` tc reads from `/proc/net/psched` on kernels with high-resolution timers.
pub const PSCHED_HZ: u64 = 1_000_000_000;

/// Configuration of [`Htb`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HtbConfig {
    /// Guaranteed rate in bytes per second; 0 = unlimited (the shaper never holds packets).
    pub rate: u64,
    /// Bucket size in bytes at `rate`.
    pub burst: u64,
    /// Ceiling rate in bytes per second (tc's default: `rate`); 0 = same as `rate`.
    pub ceil: u64,
    /// Bucket size in bytes at `ceil`.
    pub cburst: u64,
}

impl HtbConfig {
    /// tc's default burst for `rate` bytes/s: `rate / HZ + mtu` (1600 bytes at any common
    /// rate, since HZ is 10^9 on current kernels).
    pub fn default_burst(rate: u64) -> u64 {
        rate / PSCHED_HZ + HTB_DEFAULT_MTU
    }

    /// `rate` bytes/s with tc's defaults: `ceil = rate`, `burst = cburst =`
    /// [`default_burst`](Self::default_burst).
    pub fn with_rate(rate: u64) -> Self {
        let b = Self::default_burst(rate);
        HtbConfig {
            rate,
            burst: b,
            ceil: rate,
            cburst: b,
        }
    }

    /// `rate` bytes/s with `burst` bytes and `ceil = rate`, as `tc class add ... htb rate R
    /// burst B` sets it: note that tc then leaves `cburst` at its default,
    /// [`default_burst`](Self::default_burst) (1600 bytes), and that bucket limits the burst
    /// too.
    pub fn with_rate_burst(rate: u64, burst: u64) -> Self {
        HtbConfig {
            rate,
            burst,
            ceil: rate,
            cburst: Self::default_burst(rate),
        }
    }
}

/// One token bucket, in nanoseconds of transmission time at its rate.
#[derive(Clone, Copy, Debug)]
struct Bucket {
    /// Bytes per second (0 = unlimited).
    rate: u64,
    /// Size in bytes.
    burst: u64,
    /// `burst` as time at `rate`.
    buffer: i64,
    /// Tokens at the last charge.
    tokens: i64,
}

impl Bucket {
    fn new(rate: u64, burst: u64) -> Self {
        let mut b = Bucket {
            rate,
            burst,
            buffer: 0,
            tokens: 0,
        };
        b.set(rate, burst);
        b.tokens = b.buffer;
        b
    }

    /// Nanoseconds to send `bytes` at the rate (saturating).
    fn l2t(&self, bytes: u64) -> i64 {
        if self.rate == 0 {
            return 0;
        }
        let ns = u128::from(bytes) * 1_000_000_000 / u128::from(self.rate);
        ns.min(i64::MAX as u128) as i64
    }

    /// New rate and burst; the tokens (time) are kept, as `tc class change` does.
    fn set(&mut self, rate: u64, burst: u64) {
        self.rate = rate;
        self.burst = burst;
        self.buffer = self.l2t(burst);
    }

    /// Tokens after `diff` ns more of filling.
    fn peek(&self, diff: i64) -> i64 {
        self.tokens.saturating_add(diff).min(self.buffer)
    }

    /// Charges `len` bytes after `diff` ns of filling (Linux `htb_accnt_tokens`).
    fn charge(&mut self, diff: i64, len: u64) {
        let t = self.peek(diff).saturating_sub(self.l2t(len));
        self.tokens = t.max(1 - MBUFFER_NS);
    }
}

/// A single-class HTB shaper in front of the child qdisc `Q`.
#[derive(Debug)]
pub struct Htb<Q: Qdisc> {
    child: Q,
    rate: Bucket,
    ceil: Bucket,
    /// Time of the last charge (None: never charged; buckets full).
    t_c: Option<Instant>,
    overlimits: u64,
}

impl<Q: Qdisc> Htb<Q> {
    /// A shaper of `config` in front of `child`, with full buckets. A `ceil` of 0 means
    /// `rate`.
    pub fn new(config: HtbConfig, child: Q) -> Self {
        let ceil = if config.ceil == 0 {
            config.rate
        } else {
            config.ceil
        };
        Htb {
            child,
            rate: Bucket::new(config.rate, config.burst),
            ceil: Bucket::new(ceil, config.cburst),
            t_c: None,
            overlimits: 0,
        }
    }

    /// The configuration in force (after any [`Qdisc::set_rate`]).
    pub fn config(&self) -> HtbConfig {
        HtbConfig {
            rate: self.rate.rate,
            burst: self.rate.burst,
            ceil: self.ceil.rate,
            cburst: self.ceil.burst,
        }
    }

    /// The child qdisc.
    pub fn child(&self) -> &Q {
        &self.child
    }

    /// The child qdisc, mutably.
    pub fn child_mut(&mut self) -> &mut Q {
        &mut self.child
    }

    /// Elapsed filling time at `now`, capped like Linux's `min(now - t_c, mbuffer)`.
    fn diff(&self, now: Instant) -> i64 {
        match self.t_c {
            Some(t) => (now - t).as_nanos().min(MBUFFER_NS as u64) as i64,
            None => MBUFFER_NS,
        }
    }

    /// The tokens of the rate bucket at `now`, in bytes at `rate` (negative: in debt).
    pub fn tokens_bytes(&self, now: Instant) -> i64 {
        let t = self.rate.peek(self.diff(now));
        (i128::from(t) * i128::from(self.rate.rate) / 1_000_000_000) as i64
    }

    /// How long after `now` the class may send again (0: it may now).
    fn wait(&self, now: Instant) -> u64 {
        let diff = self.diff(now);
        let mut w = 0i64;
        if self.rate.rate > 0 {
            w = w.max(-self.rate.peek(diff));
        }
        if self.ceil.rate > 0 {
            w = w.max(-self.ceil.peek(diff));
        }
        w.max(0) as u64
    }
}

impl<Q: Qdisc> Qdisc for Htb<Q> {
    fn enqueue(&mut self, now: Instant, pkt: Packet, drops: &mut Vec<Dropped>) {
        self.child.enqueue(now, pkt, drops);
    }

    fn dequeue(&mut self, now: Instant, drops: &mut Vec<Dropped>) -> Dequeue {
        if self.child.backlog().packets == 0 {
            return Dequeue::Empty;
        }
        let wait = self.wait(now);
        if wait > 0 {
            self.overlimits += 1;
            return Dequeue::NotBefore(now + crate::time::Duration::from_nanos(wait));
        }
        let out = self.child.dequeue(now, drops);
        if let Dequeue::Packet(p) = &out {
            let diff = self.diff(now);
            let len = u64::from(p.len());
            if self.rate.rate > 0 {
                self.rate.charge(diff, len);
            }
            if self.ceil.rate > 0 {
                self.ceil.charge(diff, len);
            }
            self.t_c = Some(now);
        }
        out
    }

    /// Sets `rate` and `ceil` to `rate` bytes/s (`None`: unlimited), keeping the bursts in
    /// bytes and the buckets' tokens (as `tc class change ... rate R ceil R`).
    fn set_rate(&mut self, rate: Option<crate::Rate>) -> Result<(), NoShaper> {
        let r = rate.map_or(0, crate::Rate::bytes_per_s);
        let (b, cb) = (self.rate.burst, self.ceil.burst);
        self.rate.set(r, b);
        self.ceil.set(r, cb);
        Ok(())
    }

    fn stats(&self) -> QdiscStats {
        let mut s = self.child.stats();
        s.overlimits += self.overlimits;
        s
    }

    fn backlog(&self) -> Counter {
        self.child.backlog()
    }

    fn kind(&self) -> &'static str {
        "htb"
    }
}
