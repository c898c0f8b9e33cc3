//! Arbitrary configurations and operation sequences on CAKE and every baseline, DualPI2 included
//! (through `AnyQdisc`), with the accounting invariants of `crates/cake/tests/invariants.rs`
//! checked after every operation (the harness is the same file).
#![no_main]

#[path = "../../crates/cake/tests/common/ops.rs"]
mod ops;

use arbitrary::{Result, Unstructured};
use cake::{AckFilterMode, AnyQdisc, AtmMode, Cake, CakeConfig, DiffservMode, FlowMode};
use libfuzzer_sys::fuzz_target;
use ops::{FrameKind, Harness, Op, PktSpec};
use qdisc::codel::{Codel, CodelConfig};
use qdisc::dualpi2::{DualPi2, DualPi2Config, EcnClassifier, StepThreshold};
use qdisc::fifo::{Fifo, FifoConfig};
use qdisc::fq_codel::{FqCodel, FqCodelConfig};
use qdisc::htb::{Htb, HtbConfig};
use qdisc::pie::{Pie, PieConfig};
use qdisc::sfb::{Sfb, SfbConfig};
use qdisc::sfq::{Sfq, SfqConfig};
use qdisc::Duration;

fn rate(u: &mut Unstructured) -> Result<u64> {
    Ok(match u.int_in_range(0..=3)? {
        0 => 0,
        1 => u.int_in_range(1_000..=200_000)?,
        2 => u.int_in_range(200_000..=20_000_000)?,
        _ => 1_250_000_000,
    })
}

fn cake_config(u: &mut Unstructured) -> Result<CakeConfig> {
    let rtt_us = u.int_in_range(1..=500_000)?;
    Ok(CakeConfig {
        rate_bps: rate(u)?,
        autorate: u.arbitrary()?,
        diffserv: *u.choose(&DiffservMode::ALL)?,
        flow_mode: *u.choose(&FlowMode::ALL)?,
        nat: u.arbitrary()?,
        wash: u.arbitrary()?,
        ingress: u.arbitrary()?,
        ack_filter: *u.choose(&[
            AckFilterMode::None,
            AckFilterMode::Filter,
            AckFilterMode::Aggressive,
        ])?,
        split_gso: u.arbitrary()?,
        overhead: u.int_in_range(-64..=256)?,
        overhead_set: u.arbitrary()?,
        raw: u.arbitrary()?,
        atm: *u.choose(&[AtmMode::None, AtmMode::Atm, AtmMode::Ptm])?,
        mpu: u.int_in_range(0..=256)?,
        rtt_us,
        target_us: u.int_in_range(1..=rtt_us)?,
        memlimit: if u.arbitrary()? {
            Some(u.int_in_range(0..=200_000)?)
        } else {
            None
        },
        fwmark_mask: u.arbitrary()?,
        ..CakeConfig::default()
    })
}

fn baseline(u: &mut Unstructured) -> Result<AnyQdisc> {
    Ok(match u.int_in_range(0..=8)? {
        0 => Fifo::new(FifoConfig::packets(u.int_in_range(1..=64)?)).into(),
        1 => Fifo::new(FifoConfig::bytes(u.int_in_range(0..=60_000)?)).into(),
        2 => Codel::new(CodelConfig {
            limit: u.int_in_range(1..=64)?,
            ecn: u.arbitrary()?,
            target: Duration::from_millis(u.int_in_range(1..=20)?),
            ..CodelConfig::default()
        })
        .into(),
        3 => FqCodel::new(
            FqCodelConfig {
                flows: u.int_in_range(1..=64)?,
                quantum: u.int_in_range(1..=3000)?,
                limit: u.int_in_range(1..=64)?,
                memory_limit: u.int_in_range(0..=60_000)?,
                ecn: u.arbitrary()?,
                drop_batch: u.int_in_range(1..=8)?,
                ..FqCodelConfig::default()
            },
            u.arbitrary()?,
        )
        .into(),
        4 => Sfq::new(
            SfqConfig {
                limit: u.int_in_range(1..=64)?,
                flows: u.int_in_range(1..=16)?,
                depth: u.int_in_range(1..=16)?,
                divisor: u.int_in_range(1..=64)?,
                quantum: u.int_in_range(1..=3000)?,
                headdrop: u.arbitrary()?,
                perturb: Duration::from_millis(u.int_in_range(0..=50)?),
            },
            u.arbitrary()?,
        )
        .into(),
        5 => Sfb::new(
            SfbConfig {
                limit: u.int_in_range(0..=64)?,
                max: u.int_in_range(0..=30)?,
                target: u.int_in_range(0..=30)?,
                increment: u.arbitrary()?,
                decrement: u.arbitrary()?,
                penalty_rate: u.int_in_range(0..=100)?,
                penalty_burst: u.int_in_range(0..=30)?,
                rehash: Duration::from_millis(u.int_in_range(0..=100)?),
                warmup: Duration::from_millis(u.int_in_range(0..=100)?),
            },
            u.arbitrary()?,
        )
        .into(),
        6 => {
            let child = baseline_leaf(u)?;
            Htb::new(
                HtbConfig {
                    rate: rate(u)?,
                    burst: u.int_in_range(0..=60_000)?,
                    ceil: rate(u)?,
                    cburst: u.int_in_range(0..=60_000)?,
                },
                child,
            )
            .into()
        }
        7 => DualPi2::new(
            DualPi2Config {
                limit: u.int_in_range(0..=64)?,
                memory_limit: opt(u, |u| u.int_in_range(0..=60_000))?,
                target: Duration::from_millis(u.int_in_range(0..=30)?),
                tupdate: Duration::from_micros(u.int_in_range(0..=20_000)?),
                alpha: u.int_in_range(0..=100_000)? as f64 / 1000.0,
                beta: u.int_in_range(0..=1_000_000)? as f64 / 1000.0,
                step: if u.arbitrary()? {
                    StepThreshold::Time(Duration::from_micros(u.int_in_range(0..=5_000)?))
                } else {
                    StepThreshold::Packets(u.int_in_range(0..=16)?)
                },
                min_qlen_step: u.int_in_range(0..=8)?,
                coupling_factor: u.arbitrary()?,
                drop_overload: u.arbitrary()?,
                drop_early: u.arbitrary()?,
                classic_protection: u.arbitrary()?,
                classifier: if u.arbitrary()? {
                    EcnClassifier::AnyEct
                } else {
                    EcnClassifier::L4sEct
                },
                split_gso: u.arbitrary()?,
                mtu: u.int_in_range(0..=9000)?,
            },
            u.arbitrary()?,
        )
        .into(),
        _ => Pie::new(
            PieConfig {
                limit: u.int_in_range(1..=64)?,
                ecn: u.arbitrary()?,
                bytemode: u.arbitrary()?,
                target: Duration::from_millis(u.int_in_range(1..=30)?),
                ..PieConfig::default()
            },
            u.arbitrary()?,
        )
        .into(),
    })
}

/// A non-HTB baseline (the child of an HTB in the fuzzer).
fn baseline_leaf(u: &mut Unstructured) -> Result<AnyQdisc> {
    Ok(match baseline(u)? {
        AnyQdisc::Htb(_) => Fifo::new(FifoConfig::packets(u.int_in_range(1..=64)?)).into(),
        q => q,
    })
}

fn opt<T>(
    u: &mut Unstructured,
    f: impl FnOnce(&mut Unstructured) -> Result<T>,
) -> Result<Option<T>> {
    Ok(if u.ratio(1, 6)? { Some(f(u)?) } else { None })
}

fn pkt(u: &mut Unstructured) -> Result<PktSpec> {
    let opts_len = u.int_in_range(0..=16)?;
    let garbage_len = u.int_in_range(0..=96)?;
    Ok(PktSpec {
        kind: *u.choose(&[
            FrameKind::Tcp,
            FrameKind::Tcp,
            FrameKind::Udp,
            FrameKind::Icmp,
            FrameKind::Arp,
            FrameKind::Garbage,
        ])?,
        v6: u.arbitrary()?,
        vlan: opt(u, |u| u.arbitrary())?,
        src_host: u.int_in_range(0..=5)?,
        dst_host: u.int_in_range(0..=5)?,
        sport: u.int_in_range(0..=3)?,
        dport: u.int_in_range(0..=3)?,
        tos: u.arbitrary()?,
        tcp_flags: if u.arbitrary()? { 0x10 } else { u.arbitrary()? },
        seq: u.int_in_range(0..=1 << 20)?,
        ack: u.int_in_range(0..=1 << 20)?,
        tcp_options: u.bytes(opts_len)?.to_vec(),
        payload: u.int_in_range(0..=4000)?,
        truncate: opt(u, |u| u.int_in_range(0..=80))?,
        garbage: u.bytes(garbage_len)?.to_vec(),
        mark: u.arbitrary()?,
        priority: if u.arbitrary()? {
            0x8001_0000 | u.int_in_range(0..=9)?
        } else {
            u.arbitrary()?
        },
        gso: opt(u, |u| {
            Ok((u.int_in_range(0..=2)?, u.int_in_range(0..=3000)?))
        })?,
        pad: u.int_in_range(0..=3000)?,
        nat: opt(u, |u| u.arbitrary())?,
    })
}

fn op(u: &mut Unstructured) -> Result<Op> {
    Ok(match u.int_in_range(0..=10)? {
        0..=5 => Op::Enqueue(pkt(u)?),
        6..=9 => Op::Dequeue(match u.int_in_range(0..=2)? {
            0 => 0,
            1 => u.int_in_range(0..=100_000)?,
            _ => u.int_in_range(0..=50_000_000)?,
        }),
        _ => Op::SetRate(if u.arbitrary()? {
            None
        } else {
            Some(rate(u)?.max(1))
        }),
    })
}

fn run(u: &mut Unstructured) -> Result<()> {
    let q = if u.arbitrary()? {
        let cfg = cake_config(u)?;
        Cake::new(cfg, u.arbitrary()?).into()
    } else {
        baseline(u)?
    };
    let mut h = Harness::new(q);
    let mut i = 0;
    while !u.is_empty() && i < 256 {
        let op = op(u)?;
        if let Err(e) = h.apply(&op) {
            panic!("after op {i} {op:?}: {e}");
        }
        i += 1;
    }
    if let Err(e) = h.drain() {
        panic!("drain: {e}");
    }
    Ok(())
}

fuzz_target!(|data: &[u8]| {
    let _ = run(&mut Unstructured::new(data));
});
