//! Parsing tc-cake(8) arguments with tc's exact semantics.

use std::fmt;

use qdisc::tc_units::{self, UnitError};

use crate::config::{AckFilterMode, AtmMode, CakeConfig, DiffservMode, FlowMode};

/// Every word tc 6.1 accepts as a cake argument (value-taking options first).
pub const KEYWORDS: &[&str] = &[
    "bandwidth",
    "rtt",
    "memlimit",
    "fwmark",
    "overhead",
    "mpu",
    "unlimited",
    "autorate-ingress",
    "datacentre",
    "lan",
    "metro",
    "regional",
    "internet",
    "oceanic",
    "satellite",
    "interplanetary",
    "besteffort",
    "precedence",
    "diffserv8",
    "diffserv4",
    "diffserv",
    "diffserv3",
    "flowblind",
    "srchost",
    "dsthost",
    "hosts",
    "flows",
    "dual-srchost",
    "dual-dsthost",
    "triple-isolate",
    "nat",
    "nonat",
    "wash",
    "nowash",
    "split-gso",
    "no-split-gso",
    "ack-filter",
    "ack-filter-aggressive",
    "no-ack-filter",
    "ingress",
    "egress",
    "ptm",
    "atm",
    "noatm",
    "raw",
    "conservative",
    "ipoa-vcmux",
    "ipoa-llcsnap",
    "bridged-vcmux",
    "bridged-llcsnap",
    "pppoa-vcmux",
    "pppoa-llc",
    "pppoe-vcmux",
    "pppoe-llcsnap",
    "pppoe-ptm",
    "bridged-ptm",
    "via-ethernet",
    "ethernet",
    "ether-vlan",
    "docsis",
];

/// tc 6.1's usage text for cake (printed for `help` and after an unknown word).
pub const USAGE: &str = r#"Usage: ... cake [ bandwidth RATE | unlimited* | autorate-ingress ]
                [ rtt TIME | datacentre | lan | metro | regional |
                  internet* | oceanic | satellite | interplanetary ]
                [ besteffort | diffserv8 | diffserv4 | diffserv3* ]
                [ flowblind | srchost | dsthost | hosts | flows |
                  dual-srchost | dual-dsthost | triple-isolate* ]
                [ nat | nonat* ]
                [ wash | nowash* ]
                [ split-gso* | no-split-gso ]
                [ ack-filter | ack-filter-aggressive | no-ack-filter* ]
                [ memlimit LIMIT ]
                [ fwmark MASK ]
                [ ptm | atm | noatm* ] [ overhead N | conservative | raw* ]
                [ mpu N ] [ ingress | egress* ]
                (* marks defaults)"#;

/// RTT presets: (name, target µs, interval µs).
const PRESETS: [(&str, u32, u32); 8] = [
    ("datacentre", 5, 100),
    ("lan", 50, 1_000),
    ("metro", 500, 10_000),
    ("regional", 1_500, 30_000),
    ("internet", 5_000, 100_000),
    ("oceanic", 15_000, 300_000),
    ("satellite", 50_000, 1_000_000),
    ("interplanetary", 50_000_000, 1_000_000_000),
];

/// Why tc would refuse a cake argument list. `Display` starts with tc's own wording.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TcError {
    /// A word that is not a cake keyword (tc: `What is "foo"?`).
    UnknownKeyword {
        /// The word.
        word: String,
    },
    /// An option that takes a value came last (tc: `Command line is not complete.`).
    MissingValue {
        /// The option.
        option: &'static str,
    },
    /// A value that does not parse or is out of range (tc: `Illegal "rtt"` and similar).
    BadValue {
        /// The option.
        option: &'static str,
        /// The value given.
        value: String,
        /// What is accepted.
        expected: &'static str,
    },
    /// Two RTT presets (tc: `duplicate "lan": "metro" is the second value.`).
    DuplicatePreset {
        /// The preset given first.
        first: &'static str,
        /// The preset given second.
        second: String,
    },
    /// `help` was given (tc prints the usage and fails).
    Help,
}

impl fmt::Display for TcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TcError::UnknownKeyword { word } => {
                write!(
                    f,
                    "What is \"{word}\"? cake accepts: {}",
                    KEYWORDS.join(", ")
                )
            }
            TcError::MissingValue { option } => write!(
                f,
                "Command line is not complete. Try option \"help\" (\"{option}\" needs a value)"
            ),
            TcError::BadValue {
                option,
                value,
                expected,
            } => match *option {
                "overhead" | "mpu" => {
                    write!(
                        f,
                        "Illegal \"{option}\", valid range is {expected} (got \"{value}\")"
                    )
                }
                "memlimit" | "fwmark" => write!(
                    f,
                    "Illegal value for \"{option}\": \"{value}\" (expected {expected})"
                ),
                _ => write!(f, "Illegal \"{option}\": \"{value}\" (expected {expected})"),
            },
            TcError::DuplicatePreset { first, second } => {
                write!(
                    f,
                    "duplicate \"{second}\": \"{first}\" is the second value."
                )
            }
            TcError::Help => f.write_str(USAGE),
        }
    }
}

impl std::error::Error for TcError {}

/// What one tc command line sends to the kernel: one field per netlink attribute, `None` when tc
/// leaves the attribute out (so a `tc qdisc change` keeps the current value).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TcArgs {
    /// `TCA_CAKE_BASE_RATE64`, bytes/s (0 = unlimited).
    pub rate: Option<u64>,
    /// `TCA_CAKE_DIFFSERV_MODE`.
    pub diffserv: Option<DiffservMode>,
    /// `TCA_CAKE_ATM`.
    pub atm: Option<AtmMode>,
    /// `TCA_CAKE_FLOW_MODE` (without the NAT flag).
    pub flow_mode: Option<FlowMode>,
    /// `TCA_CAKE_OVERHEAD`.
    pub overhead: Option<i32>,
    /// `TCA_CAKE_RAW` present (clears the kernel's overhead flag after `overhead` is applied).
    pub raw: bool,
    /// `TCA_CAKE_MPU`.
    pub mpu: Option<u32>,
    /// `TCA_CAKE_RTT`, µs.
    pub rtt_us: Option<u32>,
    /// `TCA_CAKE_TARGET`, µs.
    pub target_us: Option<u32>,
    /// `TCA_CAKE_AUTORATE`.
    pub autorate: Option<bool>,
    /// `TCA_CAKE_MEMORY`, bytes.
    pub memlimit: Option<u32>,
    /// `TCA_CAKE_NAT`.
    pub nat: Option<bool>,
    /// `TCA_CAKE_WASH`.
    pub wash: Option<bool>,
    /// `TCA_CAKE_SPLIT_GSO`.
    pub split_gso: Option<bool>,
    /// `TCA_CAKE_INGRESS`.
    pub ingress: Option<bool>,
    /// `TCA_CAKE_ACK_FILTER`.
    pub ack_filter: Option<AckFilterMode>,
    /// `TCA_CAKE_FWMARK`.
    pub fwmark: Option<u32>,
}

fn value<'a>(args: &[&'a str], i: &mut usize, option: &'static str) -> Result<&'a str, TcError> {
    *i += 1;
    args.get(*i)
        .copied()
        .ok_or(TcError::MissingValue { option })
}

fn bad(option: &'static str, value: &str, expected: &'static str) -> TcError {
    TcError::BadValue {
        option,
        value: value.to_string(),
        expected,
    }
}

/// C `strtol(s, &p, 10)` requiring the whole string to be consumed.
fn parse_c_long(s: &str) -> Option<i64> {
    // Rust's integer parsing accepts an optional sign like strtol; overflow is out of range.
    s.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c'])
        .parse::<i64>()
        .ok()
}

/// C `strtoul(s, &p, 0)` as tc's `get_u32(.., 0)` uses it: `0x` hex, leading-0 octal, decimal.
fn parse_c_u32(s: &str) -> Option<u32> {
    if s.is_empty() || s.starts_with(['-', '+', ' ']) {
        return None;
    }
    let (digits, radix) = if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        (h, 16)
    } else if s.len() > 1 && s.starts_with('0') {
        (&s[1..], 8)
    } else {
        (s, 10)
    };
    if digits.is_empty() {
        return None;
    }
    u32::from_str_radix(digits, radix).ok()
}

impl TcArgs {
    /// Parses cake's arguments (everything after `cake`) exactly as tc 6.1 does: later words win,
    /// `+=` overhead keywords accumulate onto the current value, `bandwidth` cancels an earlier
    /// `autorate-ingress`, `rtt T` sets the target to T/20 (at least 1 µs), a second preset is an
    /// error, `raw` sets overhead 0 and no framing and keeps the MAC header.
    pub fn parse(args: &[&str]) -> Result<TcArgs, TcError> {
        let mut out = TcArgs::default();
        let mut bandwidth: u64 = 0;
        let mut unlimited = false;
        let mut preset_set: Option<&'static str> = None;
        let mut interval: u32 = 0;
        let mut target: u32 = 0;
        let mut overhead: i32 = 0;
        let mut overhead_set = false;
        let mut mpu: u32 = 0;
        let mut memlimit: u32 = 0;
        let mut i = 0;
        while i < args.len() {
            let w = args[i];
            let mut add = |oh: i32, atm: Option<AtmMode>| {
                overhead = overhead.saturating_add(oh);
                overhead_set = true;
                if atm.is_some() {
                    out.atm = atm;
                }
            };
            match w {
                "bandwidth" => {
                    let v = value(args, &mut i, "bandwidth")?;
                    // An exact 0 means no limit, as in tc. Unlike tc, other rates outside
                    // CAKE's floor..10Tbit are refused: tc takes `1bit` as 0 B/s, which turns
                    // shaping off (docs/fidelity.md).
                    bandwidth = if tc_units::is_zero_rate(v) {
                        0
                    } else {
                        tc_units::parse_shaper_rate(v).map_err(|e| match e {
                            tc_units::UnitError::RateOutOfRange(_) => {
                                bad("bandwidth", v, tc_units::SHAPER_RATE_RANGE)
                            }
                            _ => bad("bandwidth", v, tc_units::RATE_FORMAT),
                        })?
                    };
                    unlimited = false;
                    out.autorate = Some(false);
                }
                "unlimited" => {
                    bandwidth = 0;
                    unlimited = true;
                    out.autorate = Some(false);
                }
                "autorate-ingress" => out.autorate = Some(true),
                "rtt" => {
                    let v = value(args, &mut i, "rtt")?;
                    interval = tc_units::parse_time(v)
                        .map_err(|_| bad("rtt", v, tc_units::TIME_FORMAT))?;
                    target = (interval / 20).max(1);
                }
                "besteffort" => out.diffserv = Some(DiffservMode::Besteffort),
                "precedence" => out.diffserv = Some(DiffservMode::Precedence),
                "diffserv8" => out.diffserv = Some(DiffservMode::Diffserv8),
                "diffserv4" | "diffserv" => out.diffserv = Some(DiffservMode::Diffserv4),
                "diffserv3" => out.diffserv = Some(DiffservMode::Diffserv3),
                "nowash" => out.wash = Some(false),
                "wash" => out.wash = Some(true),
                "split-gso" => out.split_gso = Some(true),
                "no-split-gso" => out.split_gso = Some(false),
                "flowblind" => out.flow_mode = Some(FlowMode::Flowblind),
                "srchost" => out.flow_mode = Some(FlowMode::Srchost),
                "dsthost" => out.flow_mode = Some(FlowMode::Dsthost),
                "hosts" => out.flow_mode = Some(FlowMode::Hosts),
                "flows" => out.flow_mode = Some(FlowMode::Flows),
                "dual-srchost" => out.flow_mode = Some(FlowMode::DualSrchost),
                "dual-dsthost" => out.flow_mode = Some(FlowMode::DualDsthost),
                "triple-isolate" => out.flow_mode = Some(FlowMode::TripleIsolate),
                "nat" => out.nat = Some(true),
                "nonat" => out.nat = Some(false),
                "ptm" => out.atm = Some(AtmMode::Ptm),
                "atm" => out.atm = Some(AtmMode::Atm),
                "noatm" => out.atm = Some(AtmMode::None),
                "raw" => {
                    out.atm = Some(AtmMode::None);
                    overhead = 0;
                    overhead_set = true;
                    out.raw = true;
                }
                "conservative" => {
                    out.atm = Some(AtmMode::Atm);
                    overhead = 48;
                    overhead_set = true;
                }
                "ipoa-vcmux" => add(8, Some(AtmMode::Atm)),
                "ipoa-llcsnap" => add(16, Some(AtmMode::Atm)),
                "bridged-vcmux" => add(24, Some(AtmMode::Atm)),
                "bridged-llcsnap" => add(32, Some(AtmMode::Atm)),
                "pppoa-vcmux" => add(10, Some(AtmMode::Atm)),
                "pppoa-llc" => add(14, Some(AtmMode::Atm)),
                "pppoe-vcmux" => add(32, Some(AtmMode::Atm)),
                "pppoe-llcsnap" => add(40, Some(AtmMode::Atm)),
                "pppoe-ptm" => add(30, Some(AtmMode::Ptm)),
                "bridged-ptm" => add(22, Some(AtmMode::Ptm)),
                "via-ethernet" => {}
                "ethernet" => {
                    add(38, None);
                    mpu = 84;
                }
                "ether-vlan" => add(4, None),
                "docsis" => {
                    add(18, Some(AtmMode::None));
                    mpu = 64;
                }
                "overhead" => {
                    let v = value(args, &mut i, "overhead")?;
                    overhead = parse_c_long(v)
                        .filter(|n| (-64..=256).contains(n))
                        .ok_or_else(|| bad("overhead", v, "-64 to 256"))?
                        as i32;
                    overhead_set = true;
                }
                "mpu" => {
                    let v = value(args, &mut i, "mpu")?;
                    mpu = parse_c_long(v)
                        .filter(|n| (0..=256).contains(n))
                        .ok_or_else(|| bad("mpu", v, "0 to 256"))? as u32;
                }
                "ingress" => out.ingress = Some(true),
                "egress" => out.ingress = Some(false),
                "no-ack-filter" => out.ack_filter = Some(AckFilterMode::None),
                "ack-filter" => out.ack_filter = Some(AckFilterMode::Filter),
                "ack-filter-aggressive" => out.ack_filter = Some(AckFilterMode::Aggressive),
                "memlimit" => {
                    let v = value(args, &mut i, "memlimit")?;
                    memlimit = tc_units::parse_size(v)
                        .map_err(|_: UnitError| bad("memlimit", v, tc_units::SIZE_FORMAT))?;
                }
                "fwmark" => {
                    let v = value(args, &mut i, "fwmark")?;
                    out.fwmark = Some(parse_c_u32(v).ok_or_else(|| {
                        bad("fwmark", v, "a 32-bit mask: decimal, 0x hex or 0 octal")
                    })?);
                }
                "help" => return Err(TcError::Help),
                _ => {
                    if let Some(&(name, t, iv)) = PRESETS.iter().find(|p| p.0 == w) {
                        if let Some(first) = preset_set {
                            return Err(TcError::DuplicatePreset {
                                first,
                                second: w.to_string(),
                            });
                        }
                        preset_set = Some(name);
                        target = t;
                        interval = iv;
                    } else {
                        return Err(TcError::UnknownKeyword {
                            word: w.to_string(),
                        });
                    }
                }
            }
            i += 1;
        }
        if bandwidth != 0 || unlimited {
            out.rate = Some(bandwidth);
        }
        if overhead_set {
            out.overhead = Some(overhead);
        }
        if mpu > 0 {
            out.mpu = Some(mpu);
        }
        if interval != 0 {
            out.rtt_us = Some(interval);
        }
        if target != 0 {
            out.target_us = Some(target);
        }
        if memlimit != 0 {
            out.memlimit = Some(memlimit);
        }
        Ok(out)
    }

    /// Applies these attributes to `cfg` the way the kernel's `cake_change` does: only attributes
    /// present change anything; `overhead` sets the value and the "overhead configured" flag,
    /// `raw` then clears the flag; rtt and target are raised to at least 1 µs.
    pub fn apply(&self, cfg: &mut CakeConfig) {
        if let Some(r) = self.rate {
            cfg.rate_bps = r;
        }
        if let Some(d) = self.diffserv {
            cfg.diffserv = d;
        }
        if let Some(a) = self.atm {
            cfg.atm = a;
        }
        if let Some(f) = self.flow_mode {
            cfg.flow_mode = f;
        }
        if let Some(n) = self.nat {
            cfg.nat = n;
        }
        if let Some(o) = self.overhead {
            cfg.overhead = o;
            cfg.overhead_set = true;
            cfg.raw = false;
        }
        if self.raw {
            cfg.overhead_set = false;
            cfg.raw = true;
        }
        if let Some(m) = self.mpu {
            cfg.mpu = m;
        }
        if let Some(r) = self.rtt_us {
            cfg.rtt_us = u64::from(r.max(1));
        }
        if let Some(t) = self.target_us {
            cfg.target_us = u64::from(t.max(1));
        }
        if let Some(a) = self.autorate {
            cfg.autorate = a;
        }
        if let Some(m) = self.memlimit {
            cfg.memlimit = Some(m);
        }
        if let Some(w) = self.wash {
            cfg.wash = w;
        }
        if let Some(s) = self.split_gso {
            cfg.split_gso = s;
        }
        if let Some(i) = self.ingress {
            cfg.ingress = i;
        }
        if let Some(a) = self.ack_filter {
            cfg.ack_filter = a;
        }
        if let Some(f) = self.fwmark {
            cfg.fwmark_mask = f;
        }
    }
}

impl CakeConfig {
    /// The configuration of a fresh `tc qdisc add ... cake ARGS` (defaults, then `args` applied
    /// as the kernel applies tc's attributes). `psched_mtu` and `handle_major` keep their
    /// defaults (1514, 0x8001); set them afterwards for another device.
    pub fn from_tc_args(args: &[&str]) -> Result<CakeConfig, TcError> {
        let mut cfg = CakeConfig::default();
        TcArgs::parse(args)?.apply(&mut cfg);
        Ok(cfg)
    }

    /// `tc qdisc change ... cake ARGS`: applies `args` on top of this configuration, leaving
    /// every option not mentioned as it is. On error nothing changes.
    pub fn apply_tc_args(&mut self, args: &[&str]) -> Result<(), TcError> {
        TcArgs::parse(args)?.apply(self);
        Ok(())
    }
}
