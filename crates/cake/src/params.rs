//! What CAKE derives from its configuration: per-tin rates in fixed point, flow quanta, COBALT
//! targets and intervals, tin weights, and the memory limit. Pure functions of [`CakeConfig`],
//! computed once per (re)configuration, never per packet.

use crate::config::{CakeConfig, DiffservMode};

/// Most tins any mode uses.
pub const MAX_TINS: usize = 8;
/// The packet limit that only feeds the memory-limit computation (`sch->limit`).
pub const PACKET_LIMIT: u64 = 10_240;
/// Rates below this (bytes/s) are raised to it.
pub const MIN_RATE: u64 = 64;
/// BLUE's drop-probability increment, Q0.32 (1/256).
pub const BLUE_P_INC: u32 = 1 << 24;
/// BLUE's drop-probability decrement, Q0.32 (1/4096).
pub const BLUE_P_DEC: u32 = 1 << 20;

/// A byte rate as the kernel's fixed-point "nanoseconds per byte": the time to send `len` bytes
/// is `(len * ns) >> shift`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RateFixed {
    /// Rate in bytes per second (0 = unlimited).
    pub bytes_per_sec: u64,
    /// Scaled nanoseconds per byte.
    pub ns: u64,
    /// The scale shift.
    pub shift: u8,
}

impl RateFixed {
    /// Converts a byte rate; 0 means unlimited (zero transmit time).
    pub fn new(bytes_per_sec: u64) -> Self {
        if bytes_per_sec == 0 {
            return RateFixed::default();
        }
        let mut shift: u8 = 34;
        let mut ns = (1_000_000_000u64 << 34) / bytes_per_sec.max(MIN_RATE);
        while ns >> 34 != 0 {
            ns >>= 1;
            shift -= 1;
        }
        RateFixed {
            bytes_per_sec,
            ns,
            shift,
        }
    }

    /// Serialisation time of `len` bytes in nanoseconds.
    #[inline]
    pub fn tx_time(&self, len: u32) -> u64 {
        (u64::from(len) * self.ns) >> self.shift
    }

    /// True when the rate is unlimited.
    #[inline]
    pub fn is_unlimited(&self) -> bool {
        self.ns == 0
    }
}

/// COBALT's parameters for one tin (the kernel's `cobalt_params`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CobaltParams {
    /// CoDel interval, ns.
    pub interval: u64,
    /// CoDel target, ns.
    pub target: u64,
    /// Serialisation time of one MTU at the tin's rate, ns.
    pub mtu_time: u64,
    /// BLUE increment (Q0.32).
    pub p_inc: u32,
    /// BLUE decrement (Q0.32).
    pub p_dec: u32,
}

/// Everything derived for one tin.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TinParams {
    /// The tin's shaper rate ("thresh").
    pub rate: RateFixed,
    /// Per-flow DRR quantum in bytes.
    pub flow_quantum: u32,
    /// Weight in the tin round robin when unlimited.
    pub tin_quantum: u32,
    /// COBALT parameters.
    pub cobalt: CobaltParams,
}

/// Everything CAKE derives from a configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DerivedParams {
    /// Number of tins in use.
    pub tin_count: usize,
    /// Per-tin parameters in kernel index order (only `tin_count` are meaningful).
    pub tins: [TinParams; MAX_TINS],
    /// The global rate (tin 0's, the full bandwidth).
    pub rate: RateFixed,
    /// Memory limit in bytes.
    pub buffer_limit: u32,
}

/// Per-tin flow quantum for a tin rate (`clamp(rate >> 12, 300, 1514)`, 1514 unlimited: 1514 is
/// [`qdisc::FULL_FRAME`]).
pub fn flow_quantum(rate_bps: u64) -> u32 {
    if rate_bps == 0 {
        qdisc::FULL_FRAME
    } else {
        (rate_bps >> 12).clamp(300, u64::from(qdisc::FULL_FRAME)) as u32
    }
}

fn tin_params(rate_bps: u64, mtu: u32, target_ns: u64, rtt_ns: u64, tin_quantum: u32) -> TinParams {
    let rate = RateFixed::new(rate_bps);
    let mtu_time = rate.tx_time(mtu);
    let target = (mtu_time * 3 / 2).max(target_ns);
    let interval = (rtt_ns + target - target_ns).max(target * 2);
    TinParams {
        rate,
        flow_quantum: flow_quantum(rate_bps),
        tin_quantum,
        cobalt: CobaltParams {
            interval,
            target,
            mtu_time,
            p_inc: BLUE_P_INC,
            p_dec: BLUE_P_DEC,
        },
    }
}

impl DerivedParams {
    /// Derives all parameters from `cfg` (with `cfg.rate_bps` as the bandwidth).
    pub fn new(cfg: &CakeConfig) -> Self {
        Self::with_rate(cfg, cfg.rate_bps)
    }

    /// Derives all parameters from `cfg` with the bandwidth replaced by `rate_bps` (autorate and
    /// run-time rate changes use this).
    pub fn with_rate(cfg: &CakeConfig, rate_bps: u64) -> Self {
        let mtu = cfg.psched_mtu;
        let target_ns = cfg.target_us * 1_000;
        let rtt_ns = cfg.rtt_us * 1_000;
        let mk = |r: u64, q: u32| tin_params(r, mtu, target_ns, rtt_ns, q);
        let mut tins = [TinParams::default(); MAX_TINS];
        let tin_count = cfg.diffserv.tin_count();
        match cfg.diffserv {
            DiffservMode::Besteffort => tins[0] = mk(rate_bps, 65535),
            DiffservMode::Diffserv3 => {
                tins[0] = mk(rate_bps, 1024);
                tins[1] = mk(rate_bps >> 4, 1024 >> 4);
                tins[2] = mk(rate_bps >> 2, 1024 >> 2);
            }
            DiffservMode::Diffserv4 => {
                tins[0] = mk(rate_bps, 1024);
                tins[1] = mk(rate_bps >> 4, 1024 >> 4);
                tins[2] = mk(rate_bps >> 1, 1024 >> 1);
                tins[3] = mk(rate_bps >> 2, 1024 >> 2);
            }
            DiffservMode::Diffserv8 | DiffservMode::Precedence => {
                let (mut r, mut q) = (rate_bps, 256u32);
                for tin in tins.iter_mut() {
                    *tin = mk(r, q.max(1));
                    // u64 arithmetic wraps in the kernel too (only reachable with absurd rates).
                    r = r.wrapping_mul(7) >> 3;
                    q = (q * 7) >> 3;
                }
            }
        }
        // Unused tins keep the first tin's MTU time (the kernel does the same).
        let mtu_time = tins[0].cobalt.mtu_time;
        for tin in tins.iter_mut().skip(tin_count) {
            *tin = TinParams::default();
            tin.cobalt.mtu_time = mtu_time;
        }
        let buffer_limit = buffer_limit(cfg, rate_bps);
        DerivedParams {
            tin_count,
            tins,
            rate: tins[0].rate,
            buffer_limit,
        }
    }
}

/// The memory limit: memlimit if set, else from rate x interval (at least 4 MiB), capped at
/// `max(10240 * psched_mtu, memlimit)`.
pub fn buffer_limit(cfg: &CakeConfig, rate_bps: u64) -> u32 {
    let config_limit = u64::from(cfg.memlimit.unwrap_or(0));
    let limit: u64 = if config_limit != 0 {
        config_limit
    } else if rate_bps != 0 {
        let t = rate_bps.saturating_mul(cfg.rtt_us) / 250_000;
        t.max(4 << 20).min(u64::from(u32::MAX))
    } else {
        u64::from(u32::MAX)
    };
    let cap = (PACKET_LIMIT * u64::from(cfg.psched_mtu)).max(config_limit);
    limit.min(cap).min(u64::from(u32::MAX)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn twenty_mbit_is_exactly_400ns_per_byte() {
        let r = RateFixed::new(2_500_000);
        assert_eq!(r.tx_time(1), 400);
        assert_eq!(r.tx_time(1514), 605_600);
    }

    #[test]
    fn defaults_match_the_kernel_for_20mbit_and_unlimited() {
        let d = DerivedParams::new(&CakeConfig::with_rate(2_500_000));
        assert_eq!(d.buffer_limit, 4_194_304);
        assert_eq!(
            [
                d.tins[0].flow_quantum,
                d.tins[1].flow_quantum,
                d.tins[2].flow_quantum
            ],
            [610, 300, 300]
        );
        assert_eq!(d.tins[0].cobalt.target, 5_000_000);
        assert_eq!(d.tins[0].cobalt.interval, 100_000_000);
        // Bulk tin at 1.25 Mbit: mtu_time = 1514 * 6400 ns = 9.69 ms, target = 14.5 ms.
        assert_eq!(d.tins[1].cobalt.target, 14_534_400);
        assert_eq!(d.tins[1].cobalt.interval, 109_534_400);
        let u = DerivedParams::new(&CakeConfig::default());
        assert_eq!(u.buffer_limit, 15_503_360);
        assert_eq!(u.tins[0].flow_quantum, 1514);
        let h = DerivedParams::new(&CakeConfig::with_rate(12_500_000));
        assert_eq!(h.buffer_limit, 5_000_000);
    }

    #[test]
    fn diffserv8_tin_quanta_follow_seven_eighths() {
        let cfg = CakeConfig {
            diffserv: DiffservMode::Diffserv8,
            ..CakeConfig::default()
        };
        let d = DerivedParams::new(&cfg);
        let q: Vec<u32> = d.tins.iter().map(|t| t.tin_quantum).collect();
        assert_eq!(q, vec![256, 224, 196, 171, 149, 130, 113, 98]);
    }
}
