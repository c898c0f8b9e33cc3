//! [`AnyQdisc`]: CAKE or one of the baselines behind one concrete type, dispatched by `match`
//! (no `Box<dyn Qdisc>`, so calls inline and nothing is allocated for the indirection).

use crate::{Cake, CakeConfig};
use qdisc::codel::{Codel, CodelConfig};
use qdisc::dualpi2::{DualPi2, DualPi2Config, EcnClassifier, StepThreshold};
use qdisc::fifo::{Fifo, FifoConfig};
use qdisc::fq_codel::{FqCodel, FqCodelConfig};
use qdisc::htb::{Htb, HtbConfig};
use qdisc::pie::{Pie, PieConfig};
use qdisc::sfb::{Sfb, SfbConfig};
use qdisc::sfq::{Sfq, SfqConfig};

/// One of the queue managers purple implements.
///
/// `AnyQdisc` implements [`Qdisc`](qdisc::Qdisc) by forwarding every call to the wrapped qdisc, so it behaves
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
    /// SFQ.
    Sfq(Sfq),
    /// SFB (its 2 x 128 bins are 1 KiB inline).
    Sfb(Sfb),
    /// DualPI2 (RFC 9332 DualQ Coupled AQM).
    DualPi2(DualPi2),
    /// An HTB shaper in front of another qdisc (boxed: the type is recursive).
    Htb(Box<Htb<AnyQdisc>>),
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
    /// SFQ with `cfg`; `seed` keys its flow hash and its perturbations.
    pub fn sfq(cfg: SfqConfig, seed: u64) -> Self {
        AnyQdisc::Sfq(Sfq::new(cfg, seed))
    }
    /// SFQ with Linux defaults (127 packets, 1024 buckets, 128 flows, no perturbation).
    pub fn sfq_default(seed: u64) -> Self {
        Self::sfq(SfqConfig::default(), seed)
    }
    /// SFB with `cfg`; `seed` keys its hashes and its marking decisions.
    pub fn sfb(cfg: SfbConfig, seed: u64) -> Self {
        AnyQdisc::Sfb(Sfb::new(cfg, seed))
    }
    /// SFB with tc-sfb(8) defaults (limit 1000 packets).
    pub fn sfb_default(seed: u64) -> Self {
        Self::sfb(SfbConfig::default(), seed)
    }
    /// DualPI2 with `cfg`; `seed` seeds its marking and dropping decisions.
    pub fn dualpi2(cfg: DualPi2Config, seed: u64) -> Self {
        AnyQdisc::DualPi2(DualPi2::new(cfg, seed))
    }
    /// DualPI2 with Linux `sch_dualpi2`'s defaults (see [`DualPi2Config`]).
    pub fn dualpi2_default(seed: u64) -> Self {
        Self::dualpi2(DualPi2Config::default(), seed)
    }
    /// An HTB shaper of `cfg` in front of `child`.
    pub fn htb(cfg: HtbConfig, child: AnyQdisc) -> Self {
        AnyQdisc::Htb(Box::new(Htb::new(cfg, child)))
    }
    /// The wrapped CAKE instance, if this is CAKE (for CAKE-only statistics).
    pub fn as_cake(&self) -> Option<&Cake> {
        match self {
            AnyQdisc::Cake(c) => Some(c),
            _ => None,
        }
    }
    /// The wrapped DualPI2 instance, if this is DualPI2 (for its own statistics), looking
    /// through an HTB shaper in front of it.
    pub fn as_dualpi2(&self) -> Option<&DualPi2> {
        match self {
            AnyQdisc::DualPi2(q) => Some(q),
            AnyQdisc::Htb(h) => h.child().as_dualpi2(),
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
impl From<Sfq> for AnyQdisc {
    fn from(q: Sfq) -> Self {
        AnyQdisc::Sfq(q)
    }
}
impl From<Sfb> for AnyQdisc {
    fn from(q: Sfb) -> Self {
        AnyQdisc::Sfb(q)
    }
}
impl From<DualPi2> for AnyQdisc {
    fn from(q: DualPi2) -> Self {
        AnyQdisc::DualPi2(q)
    }
}
impl From<Htb<AnyQdisc>> for AnyQdisc {
    fn from(q: Htb<AnyQdisc>) -> Self {
        AnyQdisc::Htb(Box::new(q))
    }
}

qdisc::qdisc_by_variants!(AnyQdisc {
    AnyQdisc::Cake,
    AnyQdisc::Fifo,
    AnyQdisc::Codel,
    AnyQdisc::FqCodel,
    AnyQdisc::Pie,
    AnyQdisc::Sfq,
    AnyQdisc::Sfb,
    AnyQdisc::DualPi2,
    AnyQdisc::Htb,
});

/// Why a tc-style qdisc string could not be parsed ([`AnyQdisc::from_tc`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QdiscSpecError(pub String);

impl std::fmt::Display for QdiscSpecError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for QdiscSpecError {}

fn spec_err<T>(m: impl Into<String>) -> Result<T, QdiscSpecError> {
    Err(QdiscSpecError(m.into()))
}

/// The seed of a child qdisc, derived from its parent's so that the two draw different numbers.
const CHILD_SEED: u64 = 0x5DEE_CE66_D1CE_4E5B;

/// The qdisc names [`AnyQdisc::from_tc`] accepts.
pub const QDISC_KINDS: &str = "cake, fq_codel, codel, pie, sfq, sfb, dualpi2, pfifo, bfifo, htb";

/// Reads the options of one qdisc: `(keyword, value)` pairs and bare flags.
struct Opts<'a> {
    kind: &'static str,
    words: &'a [&'a str],
    i: usize,
}

impl<'a> Opts<'a> {
    fn new(kind: &'static str, words: &'a [&'a str]) -> Self {
        Opts { kind, words, i: 0 }
    }
    fn next_word(&mut self) -> Option<&'a str> {
        let w = self.words.get(self.i).copied();
        self.i += 1;
        w
    }
    fn value(&mut self, key: &str) -> Result<&'a str, QdiscSpecError> {
        match self.next_word() {
            Some(v) => Ok(v),
            None => spec_err(format!("{}: option {key:?} needs a value", self.kind)),
        }
    }
    fn int<T: std::str::FromStr>(&mut self, key: &str, what: &str) -> Result<T, QdiscSpecError> {
        let v = self.value(key)?;
        v.parse()
            .or_else(|_| spec_err(format!("{}: {key} {v:?}: expected {what}", self.kind)))
    }
    fn float(&mut self, key: &str) -> Result<f64, QdiscSpecError> {
        let v = self.value(key)?;
        match v.parse::<f64>() {
            Ok(f) if f.is_finite() && f >= 0.0 => Ok(f),
            _ => spec_err(format!(
                "{}: {key} {v:?}: expected a non-negative number",
                self.kind
            )),
        }
    }
    fn rate(&mut self, key: &str) -> Result<u64, QdiscSpecError> {
        let v = self.value(key)?;
        match qdisc::tc_units::parse_shaper_rate(v) {
            Ok(r) => Ok(r),
            Err(e @ qdisc::tc_units::UnitError::RateOutOfRange(_)) => {
                spec_err(format!("{}: {key} {v:?}: {e}", self.kind))
            }
            Err(e) => spec_err(format!(
                "{}: {key} {v:?}: {e} (tc rate syntax, e.g. 20mbit)",
                self.kind
            )),
        }
    }
    fn size(&mut self, key: &str) -> Result<u32, QdiscSpecError> {
        let v = self.value(key)?;
        qdisc::tc_units::parse_size(v).or_else(|e| {
            spec_err(format!(
                "{}: {key} {v:?}: {e} (tc size syntax, e.g. 15k)",
                self.kind
            ))
        })
    }
    fn time(&mut self, key: &str) -> Result<qdisc::Duration, QdiscSpecError> {
        let v = self.value(key)?;
        qdisc::tc_units::parse_time(v)
            .map(|us| qdisc::Duration::from_micros(u64::from(us)))
            .or_else(|e| {
                spec_err(format!(
                    "{}: {key} {v:?}: {e} (tc time syntax, e.g. 5ms)",
                    self.kind
                ))
            })
    }
    fn unknown<T>(&self, w: &str, accepted: &str) -> Result<T, QdiscSpecError> {
        spec_err(format!(
            "{}: unknown option {w:?} (accepted: {accepted})",
            self.kind
        ))
    }
}

impl AnyQdisc {
    /// Builds a qdisc from a tc-style description (what follows `tc qdisc add dev X root`),
    /// seeding its randomness with `seed`:
    ///
    /// * `cake ARGS...` (every `tc-cake` option, [`CakeConfig::from_tc_args`]);
    /// * `fq_codel [limit N] [flows N] [quantum BYTES] [target TIME] [interval TIME]
    ///   [memory_limit BYTES] [ecn|noecn]`;
    /// * `codel [limit N] [target TIME] [interval TIME] [ecn|noecn]`;
    /// * `pie [limit N] [target TIME] [tupdate TIME] [alpha F] [beta F] [ecn|noecn]
    ///   [bytemode|nobytemode]`;
    /// * `pfifo [[limit] N]` (default 1000 packets), `bfifo [[limit] BYTES]` (default 1514000);
    /// * `sfq [limit N] [perturb SECS] [quantum BYTES] [divisor N] [flows N] [depth N]
    ///   [headdrop]` (`redflowlimit` and the RED options are not supported);
    /// * `sfb [limit N] [target N] [max N] [increment F] [decrement F] [penalty_rate PPS]
    ///   [penalty_burst N] [rehash MS] [db MS]`;
    /// * `dualpi2 [limit N] [memlimit BYTES] [target TIME] [tupdate TIME] [alpha F] [beta F]
    ///   [step_thresh TIME|Np] [min_qlen_step N] [coupling_factor N] [drop_on_overload|overflow]
    ///   [drop_enqueue|drop_dequeue] [l4s_ect|any_ect] [classic_protection PERCENT]
    ///   [max_rtt TIME] [typical_rtt TIME] [split_gso|no_split_gso]` (tc-dualpi2(8); `max_rtt`
    ///   / `typical_rtt` derive target, tupdate, alpha and beta as tc does, overriding them);
    /// * `htb rate RATE [burst SIZE] [ceil RATE] [cburst SIZE] [CHILD...]`: an HTB class shaping
    ///   the qdisc `CHILD...` (any of these descriptions; default `pfifo 1000`). `burst` and
    ///   `cburst` default to tc's `rate / HZ + 1600` bytes each (1600 at common rates).
    ///
    /// Sizes, rates and times use tc's unit syntax ([`qdisc::tc_units`]). Errors name the bad
    /// option and the accepted ones.
    pub fn from_tc(spec: &str, seed: u64) -> Result<AnyQdisc, QdiscSpecError> {
        let words: Vec<&str> = spec.split_whitespace().collect();
        Self::from_tc_words(&words, seed)
    }

    /// [`from_tc`](Self::from_tc) on a description already split into words.
    pub fn from_tc_words(words: &[&str], seed: u64) -> Result<AnyQdisc, QdiscSpecError> {
        let Some((&kind, args)) = words.split_first() else {
            return spec_err(format!("empty qdisc description (accepted: {QDISC_KINDS})"));
        };
        match kind {
            "cake" => CakeConfig::from_tc_args(args)
                .map(|c| AnyQdisc::cake(c, seed))
                .or_else(|e| spec_err(format!("cake: {e}"))),
            "fq_codel" => parse_fq_codel(args, seed),
            "codel" => parse_codel(args),
            "pie" => parse_pie(args, seed),
            "pfifo" | "bfifo" => parse_fifo(kind, args),
            "sfq" => parse_sfq(args, seed),
            "sfb" => parse_sfb(args, seed),
            "dualpi2" => parse_dualpi2(args, seed),
            "htb" => parse_htb(args, seed),
            other => spec_err(format!("unknown qdisc {other:?} (accepted: {QDISC_KINDS})")),
        }
    }
}

fn ecn_flag(w: &str) -> Option<bool> {
    match w {
        "ecn" => Some(true),
        "noecn" => Some(false),
        _ => None,
    }
}

fn parse_fq_codel(args: &[&str], seed: u64) -> Result<AnyQdisc, QdiscSpecError> {
    const ACCEPTED: &str = "limit, flows, quantum, target, interval, memory_limit, ecn, noecn";
    let mut c = FqCodelConfig::default();
    let mut o = Opts::new("fq_codel", args);
    while let Some(w) = o.next_word() {
        match w {
            "limit" => c.limit = o.int(w, "a packet count")?,
            "flows" => c.flows = o.int(w, "a flow count")?,
            "quantum" => c.quantum = o.size(w)?,
            "target" => c.target = o.time(w)?,
            "interval" => c.interval = o.time(w)?,
            "memory_limit" => c.memory_limit = u64::from(o.size(w)?),
            _ => match ecn_flag(w) {
                Some(e) => c.ecn = e,
                None => return o.unknown(w, ACCEPTED),
            },
        }
    }
    Ok(FqCodel::new(c, seed).into())
}

fn parse_codel(args: &[&str]) -> Result<AnyQdisc, QdiscSpecError> {
    const ACCEPTED: &str = "limit, target, interval, ecn, noecn";
    let mut c = CodelConfig::default();
    let mut o = Opts::new("codel", args);
    while let Some(w) = o.next_word() {
        match w {
            "limit" => c.limit = o.int(w, "a packet count")?,
            "target" => c.target = o.time(w)?,
            "interval" => c.interval = o.time(w)?,
            _ => match ecn_flag(w) {
                Some(e) => c.ecn = e,
                None => return o.unknown(w, ACCEPTED),
            },
        }
    }
    Ok(Codel::new(c).into())
}

fn parse_pie(args: &[&str], seed: u64) -> Result<AnyQdisc, QdiscSpecError> {
    const ACCEPTED: &str = "limit, target, tupdate, alpha, beta, ecn, noecn, bytemode, nobytemode";
    let mut c = PieConfig::default();
    let mut o = Opts::new("pie", args);
    while let Some(w) = o.next_word() {
        match w {
            "limit" => c.limit = o.int(w, "a packet count")?,
            "target" => c.target = o.time(w)?,
            "tupdate" => c.tupdate = o.time(w)?,
            "alpha" => c.alpha = o.float(w)?,
            "beta" => c.beta = o.float(w)?,
            "bytemode" => c.bytemode = true,
            "nobytemode" => c.bytemode = false,
            _ => match ecn_flag(w) {
                Some(e) => c.ecn = e,
                None => return o.unknown(w, ACCEPTED),
            },
        }
    }
    Ok(Pie::new(c, seed).into())
}

fn parse_fifo(kind: &str, args: &[&str]) -> Result<AnyQdisc, QdiscSpecError> {
    let name: &'static str = if kind == "pfifo" { "pfifo" } else { "bfifo" };
    let mut o = Opts::new(name, args);
    let mut limit: Option<u64> = None;
    while let Some(w) = o.next_word() {
        let v = if w == "limit" {
            o.value(w)?
        } else if limit.is_none() && w.starts_with(|c: char| c.is_ascii_digit()) {
            w
        } else {
            return o.unknown(w, "limit (or a bare limit)");
        };
        let n = if name == "pfifo" {
            v.parse::<u32>().map(u64::from).ok()
        } else {
            qdisc::tc_units::parse_size(v).map(u64::from).ok()
        };
        match n {
            Some(n) => limit = Some(n),
            None => {
                return spec_err(format!(
                    "{name}: limit {v:?}: expected {}",
                    if name == "pfifo" {
                        "a packet count"
                    } else {
                        "a size in bytes"
                    }
                ))
            }
        }
    }
    Ok(match (name, limit) {
        ("pfifo", None) => AnyQdisc::pfifo_default(),
        ("pfifo", Some(n)) => AnyQdisc::pfifo(n as u32),
        (_, n) => AnyQdisc::bfifo(n.unwrap_or(1000 * u64::from(qdisc::FULL_FRAME))),
    })
}

fn parse_sfq(args: &[&str], seed: u64) -> Result<AnyQdisc, QdiscSpecError> {
    const ACCEPTED: &str = "limit, perturb, quantum, divisor, flows, depth, headdrop";
    let mut c = SfqConfig::default();
    let mut o = Opts::new("sfq", args);
    while let Some(w) = o.next_word() {
        match w {
            "limit" => c.limit = o.int(w, "a packet count")?,
            "perturb" => c.perturb = qdisc::Duration::from_secs(o.int(w, "whole seconds")?),
            "quantum" => c.quantum = o.size(w)?,
            "divisor" => {
                let d: u32 = o.int(w, "a power of two up to 65536")?;
                if !d.is_power_of_two() || d > qdisc::sfq::SFQ_MAX_DIVISOR {
                    return spec_err(format!(
                        "sfq: divisor {d}: expected a power of two up to 65536"
                    ));
                }
                c.divisor = d;
            }
            "flows" => c.flows = o.int(w, "a flow count")?,
            "depth" => c.depth = o.int(w, "a packet count")?,
            "headdrop" => c.headdrop = true,
            "redflowlimit" | "min" | "max" | "probability" | "ecn" | "harddrop" => {
                return spec_err(format!(
                    "sfq: option {w:?} (RED) is not supported (accepted: {ACCEPTED})"
                ))
            }
            _ => return o.unknown(w, ACCEPTED),
        }
    }
    if c.limit == 0 {
        c.limit = SfqConfig::default().limit;
    }
    if c.flows == 0 {
        c.flows = SfqConfig::default().flows;
    }
    if c.depth == 0 {
        c.depth = SfqConfig::default().depth;
    }
    if c.quantum == 0 {
        c.quantum = SfqConfig::default().quantum;
    }
    if c.quantum > qdisc::sfq::SFQ_MAX_QUANTUM {
        return spec_err(format!(
            "sfq: quantum {}: at most {} bytes",
            c.quantum,
            qdisc::sfq::SFQ_MAX_QUANTUM
        ));
    }
    Ok(Sfq::new(c, seed).into())
}

fn parse_sfb(args: &[&str], seed: u64) -> Result<AnyQdisc, QdiscSpecError> {
    const ACCEPTED: &str =
        "limit, target, max, increment, decrement, penalty_rate, penalty_burst, rehash, db";
    let mut c = SfbConfig::default();
    let mut o = Opts::new("sfb", args);
    while let Some(w) = o.next_word() {
        match w {
            "limit" => c.limit = o.int(w, "a packet count")?,
            "target" => c.target = o.int(w, "a packet count")?,
            "max" => c.max = o.int(w, "a packet count")?,
            "increment" | "decrement" => {
                let f = o.float(w)?;
                if f > 1.0 {
                    return spec_err(format!("sfb: {w} {f}: must be between 0 and 1"));
                }
                let p = SfbConfig::prob(f);
                if w == "increment" {
                    c.increment = p;
                } else {
                    c.decrement = p;
                }
            }
            "penalty_rate" => c.penalty_rate = o.int(w, "packets per second")?,
            "penalty_burst" => c.penalty_burst = o.int(w, "a packet count")?,
            "rehash" => c.rehash = qdisc::Duration::from_millis(o.int(w, "milliseconds")?),
            "db" => c.warmup = qdisc::Duration::from_millis(o.int(w, "milliseconds")?),
            _ => return o.unknown(w, ACCEPTED),
        }
    }
    Ok(Sfb::new(c, seed).into())
}

fn parse_htb(args: &[&str], seed: u64) -> Result<AnyQdisc, QdiscSpecError> {
    let mut o = Opts::new("htb", args);
    let (mut rate, mut burst, mut ceil, mut cburst) = (None, None, None, None);
    let mut child_at = args.len();
    while let Some(w) = o.next_word() {
        match w {
            "rate" => rate = Some(o.rate(w)?),
            "ceil" => ceil = Some(o.rate(w)?),
            "burst" | "buffer" | "maxburst" => burst = Some(u64::from(o.size(w)?)),
            "cburst" | "cbuffer" | "cmaxburst" => cburst = Some(u64::from(o.size(w)?)),
            _ => {
                child_at = o.i - 1;
                break;
            }
        }
    }
    let Some(rate) = rate else {
        return spec_err(format!(
            "htb: \"rate RATE\" is required (htb rate RATE [burst SIZE] [ceil RATE] \
             [cburst SIZE] [CHILD...]; child one of {QDISC_KINDS})"
        ));
    };
    let ceil = ceil.unwrap_or(rate);
    let cfg = HtbConfig {
        rate,
        burst: burst.unwrap_or_else(|| HtbConfig::default_burst(rate)),
        ceil,
        cburst: cburst.unwrap_or_else(|| HtbConfig::default_burst(ceil)),
    };
    let child_words = &args[child_at..];
    let child = if child_words.is_empty() {
        AnyQdisc::pfifo_default()
    } else {
        AnyQdisc::from_tc_words(child_words, seed ^ CHILD_SEED)
            .or_else(|e| spec_err(format!("htb child: {e}")))?
    };
    Ok(AnyQdisc::htb(cfg, child))
}

/// A step threshold in packets as tc-dualpi2 writes it: a count with a `p`, `pkt`, `pkts`,
/// `packet` or `packets` suffix.
fn packets_suffix(v: &str) -> Option<u32> {
    let digits = v.find(|c: char| !c.is_ascii_digit())?;
    let (n, unit) = v.split_at(digits);
    if n.is_empty() || !["p", "pkt", "pkts", "packet", "packets"].contains(&unit) {
        return None;
    }
    n.parse().ok()
}

/// The kernel's alpha/beta resolution (1/256 Hz) and range ((2^23 - 1) Hz).
const ALPHA_BETA_MIN: f64 = 1.0 / 256.0;
const ALPHA_BETA_MAX: f64 = 8_388_607.0;

fn parse_dualpi2(args: &[&str], seed: u64) -> Result<AnyQdisc, QdiscSpecError> {
    const ACCEPTED: &str = "limit, memlimit, target, tupdate, alpha, beta, step_thresh, \
        min_qlen_step, coupling_factor, drop_on_overload, overflow, drop_enqueue, drop_dequeue, \
        l4s_ect, any_ect, classic_protection, max_rtt, typical_rtt, split_gso, no_split_gso";
    let mut c = DualPi2Config::default();
    let mut o = Opts::new("dualpi2", args);
    let (mut max_rtt, mut typical_rtt) = (None, None);
    while let Some(w) = o.next_word() {
        match w {
            "limit" => {
                c.limit = o.int(w, "a packet count")?;
                if c.limit == 0 {
                    return spec_err("dualpi2: limit 0: at least 1 packet");
                }
            }
            "memlimit" => {
                let m = o.size(w)?;
                if m == 0 {
                    return spec_err("dualpi2: memlimit 0: at least 1 byte");
                }
                c.memory_limit = Some(u64::from(m));
            }
            "target" => c.target = o.time(w)?,
            "tupdate" => {
                c.tupdate = o.time(w)?;
                if c.tupdate == qdisc::Duration::ZERO {
                    return spec_err("dualpi2: tupdate 0: at least 1us");
                }
            }
            "alpha" | "beta" => {
                let f = o.float(w)?;
                if !(ALPHA_BETA_MIN..=ALPHA_BETA_MAX).contains(&f) {
                    return spec_err(format!(
                        "dualpi2: {w} {f}: expected {ALPHA_BETA_MIN} to {ALPHA_BETA_MAX} Hz \
                         (the kernel's resolution is 1/256 Hz)"
                    ));
                }
                if w == "alpha" {
                    c.alpha = f;
                } else {
                    c.beta = f;
                }
            }
            "step_thresh" => {
                let v = o.value(w)?;
                c.step = match qdisc::tc_units::parse_time(v) {
                    Ok(us) => StepThreshold::Time(qdisc::Duration::from_micros(u64::from(us))),
                    Err(_) => match packets_suffix(v) {
                        Some(n) => StepThreshold::Packets(n),
                        None => {
                            return spec_err(format!(
                                "dualpi2: step_thresh {v:?}: expected a time (1ms) or a packet \
                                 count (5p, 5pkts, 5packets)"
                            ))
                        }
                    },
                };
            }
            "min_qlen_step" => c.min_qlen_step = o.int(w, "a packet count")?,
            "coupling_factor" => {
                let k: u8 = o.int(w, "an integer from 1 to 255")?;
                if k == 0 {
                    return spec_err("dualpi2: coupling_factor 0: expected 1 to 255");
                }
                c.coupling_factor = k;
            }
            "drop_on_overload" => c.drop_overload = true,
            "overflow" => c.drop_overload = false,
            "drop_enqueue" => c.drop_early = true,
            "drop_dequeue" => c.drop_early = false,
            "l4s_ect" => c.classifier = EcnClassifier::L4sEct,
            "any_ect" => c.classifier = EcnClassifier::AnyEct,
            "classic_protection" => {
                let v = o.value(w)?;
                let pct = v
                    .strip_suffix('%')
                    .unwrap_or(v)
                    .parse::<f64>()
                    .ok()
                    .filter(|p| (0.0..=100.0).contains(p));
                match pct {
                    Some(p) => c.classic_protection = p.round() as u8,
                    None => {
                        return spec_err(format!(
                            "dualpi2: classic_protection {v:?}: expected a percentage from 0 \
                             to 100"
                        ))
                    }
                }
            }
            "max_rtt" => max_rtt = Some(o.time(w)?),
            "typical_rtt" => typical_rtt = Some(o.time(w)?),
            "split_gso" => c.split_gso = true,
            "no_split_gso" => c.split_gso = false,
            _ => return o.unknown(w, ACCEPTED),
        }
    }
    let nonzero = |d: Option<qdisc::Duration>| d.filter(|d| *d > qdisc::Duration::ZERO);
    if let Some((max, typ)) = dualpi2_rtts(nonzero(max_rtt), nonzero(typical_rtt))? {
        // RFC 9332 appendix A.1's stable gains, as tc-dualpi2 derives them.
        let us = |d: qdisc::Duration| d.as_micros().max(1);
        let tupdate = us(typ).min(us(max) / 3).max(1);
        let max_s = us(max) as f64 / 1e6;
        c.target = typ;
        c.tupdate = qdisc::Duration::from_micros(tupdate);
        c.alpha = 0.1 * (tupdate as f64 / 1e6) / (max_s * max_s);
        c.beta = 0.3 / max_s;
        if c.beta > ALPHA_BETA_MAX || c.alpha < ALPHA_BETA_MIN || c.beta < ALPHA_BETA_MIN {
            return spec_err(format!(
                "dualpi2: max_rtt {max:?} gives alpha {:.6} and beta {:.6}, outside {} to {} Hz",
                c.alpha, c.beta, ALPHA_BETA_MIN, ALPHA_BETA_MAX
            ));
        }
    }
    Ok(DualPi2::new(c, seed).into())
}

/// `max_rtt` and `typical_rtt` with the missing one derived as tc does (`max = 6 * typical`);
/// `None` when neither was given.
fn dualpi2_rtts(
    max: Option<qdisc::Duration>,
    typ: Option<qdisc::Duration>,
) -> Result<Option<(qdisc::Duration, qdisc::Duration)>, QdiscSpecError> {
    const TYP_TO_MAX: u64 = 6;
    Ok(match (max, typ) {
        (None, None) => None,
        (Some(m), None) => Some((
            m,
            qdisc::Duration::from_micros((m.as_micros() / TYP_TO_MAX).max(1)),
        )),
        (None, Some(t)) => Some((t.saturating_mul(TYP_TO_MAX), t)),
        (Some(m), Some(t)) if t > m => {
            return spec_err(format!(
                "dualpi2: typical_rtt {t:?} must not exceed max_rtt {m:?}"
            ))
        }
        (Some(m), Some(t)) => Some((m, t)),
    })
}

#[cfg(test)]
mod layout_tests {
    use super::*;

    /// `AnyQdisc` keeps its variant in a tag of its own beside CAKE, not in a niche of one of
    /// CAKE's fields (the compiler picks a niche for some sizes of `Cake`): each dispatch then
    /// reads the tag with one load. With the niche layout the engine benchmark's dispatches
    /// decode it, 7 instructions more per packet for pfifo and about 3 for CAKE
    /// (docs/performance.md, ninth round).
    #[test]
    fn the_variant_is_a_tag_of_its_own() {
        assert!(std::mem::size_of::<AnyQdisc>() > std::mem::size_of::<Cake>());
    }
}
