//! The agent under untrusted input: any datagrams from anywhere (garbage, replies from
//! strangers, well-formed replies edited, replayed or with stamps off), counters that wrap or
//! fail, CAKE statistics with any values or errors, failing actuators, any radio and passive
//! readings. The harness (`common/agent_ops.rs`) is the `agent_inputs` fuzz target's too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "common/agent_ops.rs"]
mod agent_ops;

use agent_ops::{Harness, Op, Payload, Source};
use controller::agent::SocketKind;
use proptest::prelude::*;

fn source() -> impl Strategy<Value = Source> {
    prop_oneof![
        4 => any::<u8>().prop_map(Source::Reflector),
        1 => any::<u8>().prop_map(Source::Stranger),
        1 => (any::<u8>(), any::<u16>()).prop_map(|(i, p)| Source::WrongPort(i, p)),
    ]
}

fn payload() -> impl Strategy<Value = Payload> {
    prop_oneof![
        1 => proptest::collection::vec(any::<u8>(), 0..80).prop_map(Payload::Raw),
        3 => (
            0u8..4,
            prop_oneof![Just(0i32), -100_000i32..100_000, any::<i32>()],
            proptest::collection::vec((any::<u16>(), any::<u8>()), 0..3),
            any::<bool>()
        )
            .prop_map(|(back, shift, edits, ip_header)| Payload::Reply {
                back,
                shift,
                edits,
                ip_header
            }),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => prop_oneof![0u32..2_000, 0u32..200_000, Just(5_000_000u32)].prop_map(Op::Advance),
        6 => (
            source(),
            prop_oneof![Just(SocketKind::Icmp), Just(SocketKind::Udp)],
            payload()
        )
            .prop_map(|(source, socket, payload)| Op::Datagram {
                source,
                socket,
                payload
            }),
        1 => (
            any::<bool>(),
            proptest::option::of(prop_oneof![0u64..10_000_000, any::<u64>()])
        )
            .prop_map(|(d, s)| Op::Counter(d, s)),
        1 => proptest::option::of(prop_oneof![0u64..10_000_000, any::<u64>()])
            .prop_map(Op::Delivered),
        1 => proptest::option::of((any::<u64>(), any::<u64>(), any::<u64>(), any::<Option<u64>>(), any::<Option<u64>>()))
            .prop_map(Op::Stats),
        1 => (any::<bool>(), any::<u64>(), any::<u32>(), any::<u64>(), any::<u64>(), any::<Option<u64>>())
            .prop_map(|(d, b, p, dr, s, c)| Op::Radio(d, b, p, dr, s, c)),
        1 => (any::<Option<u64>>(), any::<Option<u64>>(), any::<u32>())
            .prop_map(|(d, u, f)| Op::Passive(d, u, f)),
        1 => any::<u32>().prop_map(Op::SendFailed),
        1 => any::<bool>().prop_map(Op::ActuatorFails),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn any_input_sequence_keeps_the_agents_invariants(
        law in any::<u8>(),
        ops in proptest::collection::vec(op(), 1..200),
    ) {
        let mut h = Harness::new(law);
        for (i, op) in ops.iter().enumerate() {
            if let Err(e) = h.apply(op) {
                prop_assert!(false, "after op {i} {op:?}: {e}");
            }
        }
    }
}

/// The harness reaches the paths that matter: well-formed replies are accepted (not all
/// discarded), and garbage is discarded and reported.
#[test]
fn replies_are_accepted_and_garbage_is_discarded() {
    let mut h = Harness::new(0);
    for _ in 0..200 {
        h.apply(&Op::Advance(10_000)).unwrap();
        for i in 0..4u8 {
            let socket = if i < 2 {
                SocketKind::Icmp
            } else {
                SocketKind::Udp
            };
            h.apply(&Op::Datagram {
                source: Source::Reflector(i),
                socket,
                payload: Payload::Reply {
                    back: 0,
                    shift: 0,
                    edits: Vec::new(),
                    ip_header: false,
                },
            })
            .unwrap();
        }
        h.apply(&Op::Datagram {
            source: Source::Stranger(7),
            socket: SocketKind::Udp,
            payload: Payload::Raw(vec![1, 2, 3]),
        })
        .unwrap();
    }
    h.apply(&Op::Advance(5_000_000)).unwrap();
    assert!(h.discards > 0, "garbage was reported as discarded");
    assert!(
        h.discards < h.datagrams / 2,
        "{} of {} datagrams discarded: the replies should be accepted",
        h.discards,
        h.datagrams
    );
}
