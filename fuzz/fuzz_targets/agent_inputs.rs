//! The agent (everything `purple control` decides) under untrusted input: datagrams from
//! anywhere (garbage, strangers, well-formed replies edited or replayed), counters that wrap or
//! fail, CAKE statistics and radio/passive readings with any values, failing actuators; the
//! invariants of `crates/controller/tests/agent_inputs.rs` checked after every input (the
//! harness is the same file).
#![no_main]

#[path = "../../crates/controller/tests/common/agent_ops.rs"]
mod agent_ops;

use agent_ops::{Harness, Op, Payload, Source};
use arbitrary::{Result, Unstructured};
use controller::agent::SocketKind;
use libfuzzer_sys::fuzz_target;

fn source(u: &mut Unstructured) -> Result<Source> {
    Ok(match u.int_in_range(0..=5)? {
        0..=3 => Source::Reflector(u.arbitrary()?),
        4 => Source::Stranger(u.arbitrary()?),
        _ => Source::WrongPort(u.arbitrary()?, u.arbitrary()?),
    })
}

fn payload(u: &mut Unstructured) -> Result<Payload> {
    Ok(if u.ratio(1, 4)? {
        let n = u.int_in_range(0..=96)?;
        Payload::Raw(u.bytes(n)?.to_vec())
    } else {
        let edits = u.int_in_range(0..=3)?;
        Payload::Reply {
            back: u.int_in_range(0..=7)?,
            shift: match u.int_in_range(0..=2)? {
                0 => 0,
                1 => u.int_in_range(-100_000..=100_000)?,
                _ => u.arbitrary()?,
            },
            edits: (0..edits)
                .map(|_| Ok((u.arbitrary()?, u.arbitrary()?)))
                .collect::<Result<Vec<_>>>()?,
            ip_header: u.arbitrary()?,
        }
    })
}

fn op(u: &mut Unstructured) -> Result<Op> {
    Ok(match u.int_in_range(0..=16)? {
        0..=5 => Op::Advance(match u.int_in_range(0..=2)? {
            0 => u.int_in_range(0..=2_000)?,
            1 => u.int_in_range(0..=200_000)?,
            _ => 5_000_000,
        }),
        6..=10 => Op::Datagram {
            source: source(u)?,
            socket: if u.arbitrary()? {
                SocketKind::Icmp
            } else {
                SocketKind::Udp
            },
            payload: payload(u)?,
        },
        11 => Op::Counter(u.arbitrary()?, u.arbitrary()?),
        12 => Op::Stats(u.arbitrary()?),
        13 => Op::Radio(
            u.arbitrary()?,
            u.arbitrary()?,
            u.arbitrary()?,
            u.arbitrary()?,
            u.arbitrary()?,
            u.arbitrary()?,
        ),
        14 => Op::Passive(u.arbitrary()?, u.arbitrary()?, u.arbitrary()?),
        15 => Op::Delivered(u.arbitrary()?),
        _ => {
            if u.arbitrary()? {
                Op::SendFailed(u.arbitrary()?)
            } else {
                Op::ActuatorFails(u.arbitrary()?)
            }
        }
    })
}

fn run(u: &mut Unstructured) -> Result<()> {
    let mut h = Harness::new(u.arbitrary()?);
    let mut i = 0;
    while !u.is_empty() && i < 512 {
        let op = op(u)?;
        if let Err(e) = h.apply(&op) {
            panic!("after op {i} {op:?}: {e}");
        }
        i += 1;
    }
    Ok(())
}

fuzz_target!(|data: &[u8]| {
    let _ = run(&mut Unstructured::new(data));
});
