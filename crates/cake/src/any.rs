//! [`AnyQdisc`]: CAKE or one of the baselines behind one concrete type, dispatched by `match`
//! (no `Box<dyn Qdisc>`, so calls inline and nothing is allocated for the indirection).

use crate::{Cake, CakeConfig};
use qdisc::codel::{Codel, CodelConfig};
use qdisc::fifo::{Fifo, FifoConfig};
use qdisc::fq_codel::{FqCodel, FqCodelConfig};
use qdisc::pie::{Pie, PieConfig};
use qdisc::{Counter, Dequeue, Dropped, Instant, NoShaper, Packet, Qdisc, QdiscStats};

/// One of the queue managers purple implements.
///
/// `AnyQdisc` implements [`Qdisc`] by forwarding every call to the wrapped qdisc, so it behaves
/// exactly like it (same drops, same statistics, same `kind()`).
// CAKE is ~1 KiB inline; an AnyQdisc is built once and driven in place, so keeping it unboxed
// saves a pointer chase per packet at the cost of a larger (rarely moved) value.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum AnyQdisc {
    /// CAKE.
    Cake(Cake),
    /// `pfifo` or `bfifo` (tail-drop FIFO).
    Fifo(Fifo),
    /// CoDel.
    Codel(Codel),
    /// FQ-CoDel.
    FqCodel(FqCodel),
    /// PIE.
    Pie(Pie),
}

impl AnyQdisc {
    /// CAKE with configuration `cfg`, randomness seeded by `seed`.
    pub fn cake(cfg: CakeConfig, seed: u64) -> Self {
        AnyQdisc::Cake(Cake::new(cfg, seed))
    }
    /// CAKE with the default configuration (unlimited rate, diffserv3, triple-isolate).
    pub fn cake_default(seed: u64) -> Self {
        Self::cake(CakeConfig::default(), seed)
    }
    /// `pfifo` with Linux's default limit (1000 packets).
    pub fn pfifo_default() -> Self {
        AnyQdisc::Fifo(Fifo::new(FifoConfig::default()))
    }
    /// `pfifo` holding at most `limit` packets.
    pub fn pfifo(limit: u32) -> Self {
        AnyQdisc::Fifo(Fifo::new(FifoConfig::packets(limit)))
    }
    /// `bfifo` holding at most `limit` bytes.
    pub fn bfifo(limit: u64) -> Self {
        AnyQdisc::Fifo(Fifo::new(FifoConfig::bytes(limit)))
    }
    /// CoDel with RFC 8289 / Linux defaults.
    pub fn codel_default() -> Self {
        AnyQdisc::Codel(Codel::new(CodelConfig::default()))
    }
    /// FQ-CoDel with RFC 8290 / Linux defaults; `seed` keys its flow hash.
    pub fn fq_codel_default(seed: u64) -> Self {
        AnyQdisc::FqCodel(FqCodel::new(FqCodelConfig::default(), seed))
    }
    /// PIE with RFC 8033 / Linux defaults; `seed` seeds its drop decisions.
    pub fn pie_default(seed: u64) -> Self {
        AnyQdisc::Pie(Pie::new(PieConfig::default(), seed))
    }
    /// The wrapped CAKE instance, if this is CAKE (for CAKE-only statistics).
    pub fn as_cake(&self) -> Option<&Cake> {
        match self {
            AnyQdisc::Cake(c) => Some(c),
            _ => None,
        }
    }
}

impl From<Cake> for AnyQdisc {
    fn from(q: Cake) -> Self {
        AnyQdisc::Cake(q)
    }
}
impl From<Fifo> for AnyQdisc {
    fn from(q: Fifo) -> Self {
        AnyQdisc::Fifo(q)
    }
}
impl From<Codel> for AnyQdisc {
    fn from(q: Codel) -> Self {
        AnyQdisc::Codel(q)
    }
}
impl From<FqCodel> for AnyQdisc {
    fn from(q: FqCodel) -> Self {
        AnyQdisc::FqCodel(q)
    }
}
impl From<Pie> for AnyQdisc {
    fn from(q: Pie) -> Self {
        AnyQdisc::Pie(q)
    }
}

/// Expands `$body` once per variant with `$q` bound to the inner qdisc.
macro_rules! dispatch {
    ($self:expr, $q:ident => $body:expr) => {
        match $self {
            AnyQdisc::Cake($q) => $body,
            AnyQdisc::Fifo($q) => $body,
            AnyQdisc::Codel($q) => $body,
            AnyQdisc::FqCodel($q) => $body,
            AnyQdisc::Pie($q) => $body,
        }
    };
}

impl Qdisc for AnyQdisc {
    #[inline]
    fn enqueue(&mut self, now: Instant, pkt: Packet, drops: &mut Vec<Dropped>) {
        dispatch!(self, q => q.enqueue(now, pkt, drops))
    }
    #[inline]
    fn dequeue(&mut self, now: Instant, drops: &mut Vec<Dropped>) -> Dequeue {
        dispatch!(self, q => q.dequeue(now, drops))
    }
    fn set_rate(&mut self, rate: Option<u64>) -> Result<(), NoShaper> {
        dispatch!(self, q => q.set_rate(rate))
    }
    fn stats(&self) -> QdiscStats {
        dispatch!(self, q => q.stats())
    }
    fn backlog(&self) -> Counter {
        dispatch!(self, q => q.backlog())
    }
    fn kind(&self) -> &'static str {
        dispatch!(self, q => q.kind())
    }
}
