//! A sans-IO model of bulk TCP for the simulator: a [`TcpSender`] and a [`TcpReceiver`] that
//! exchange real Ethernet/IP/TCP frames ([`qdisc::Packet`], payload unmaterialised) and never read
//! a clock: every call takes the caller's `now`.
//!
//! **What this crate owns**: one TCP connection's two ends as sans-IO state machines, with the
//! congestion controls in [`cc`]. **What it must not do**: know about links, routes or the
//! simulator: it only exchanges frames with its caller.
//!
//! Modelled: established connections (no handshake, no FIN), MSS-sized segments, timestamps
//! (TSval in microseconds), SACK-based loss recovery (RFC 6675 scoreboard: IsLost with DupThresh 3,
//! retransmit holes lowest first, one window reduction per window of data), duplicate-ACK fast
//! retransmit when the peer does not SACK, RFC 6298 RTO (min 200 ms, exponential backoff), classic
//! ECN (ECT(0) on new data, ECE -> one reduction per window, CWR), accurate ECN for L4S senders
//! (ECT(1) on every segment; the receiver counts CE-marked segments and returns the count modulo
//! 8 in the ACE field, AE|CWR|ECE, of every ACK, acknowledging at once when the CE state of
//! arriving data changes), optional pacing, and the congestion controllers in [`cc`] (NewReno,
//! CUBIC, LEDBAT, Prague). Not modelled: flow control (the receive window is unlimited), PRR,
//! TLP/RACK, HyStart, window scaling on the wire, the AccECN TCP option (byte counters) and the
//! handshake that negotiates ECN (both ends are configured alike).
//!
//! A simulator drives each flow as follows: deliver every data frame that reaches the receiver to
//! [`TcpReceiver::on_segment`] and every ACK that reaches the sender to [`TcpSender::on_ack`];
//! after each such call, and after each `on_timeout`, drain `poll_transmit(now)` of the same
//! endpoint until `None` and put the frames on the wire; keep each endpoint's `poll_timeout()` in
//! the event queue and call `on_timeout(now)` when it is reached. [`qdisc::PacketMeta::tag`] of
//! every frame of a flow equals [`SenderConfig::tag`], so the simulator can route frames.
#![deny(unsafe_code)]

pub mod cc;
mod receiver;
mod sender;

pub use cc::{CcKind, CongestionControl, RttInfo};
pub use receiver::{ReceiverStats, TcpReceiver, DELAYED_ACK};
pub use sender::{Pacing, SenderConfig, SenderStats, TcpSender};

use qdisc::packet::{tcp_flags, FrameSpec, L4Spec};
use qdisc::Instant;

/// Rewrites the TCP fields of a template in place (its option buffer is reused, so the only
/// allocation per packet is the frame itself).
fn set_tcp(spec: &mut FrameSpec, seq: u32, ack: u32, flags: u16, fill: impl FnOnce(&mut Vec<u8>)) {
    if let L4Spec::Tcp {
        seq: s,
        ack: a,
        flags: f,
        options,
        ..
    } = &mut spec.l4
    {
        *s = seq;
        *a = ack;
        *f = flags;
        options.clear();
        fill(options);
    }
}

/// Appends NOP NOP TS(tsval, tsecr) (12 bytes).
fn put_timestamps(opts: &mut Vec<u8>, tsval: u32, tsecr: u32) {
    opts.extend_from_slice(&[1, 1, 8, 10]);
    opts.extend_from_slice(&tsval.to_be_bytes());
    opts.extend_from_slice(&tsecr.to_be_bytes());
}

/// The initial value of the AccECN CE packet counter (so that the ACE field of an AccECN ACK is
/// never the all-zero pattern of a peer without ECN).
const ACE_INIT: u8 = 5;

/// The ACE field of a TCP header (AE, CWR, ECE as a 3-bit number).
fn ace_of(flags: u16) -> u8 {
    u8::from(flags & tcp_flags::AE != 0) << 2
        | u8::from(flags & tcp_flags::CWR != 0) << 1
        | u8::from(flags & tcp_flags::ECE != 0)
}

/// TCP flags carrying `ace` in the ACE field.
fn ace_flags(ace: u8) -> u16 {
    let mut f = 0;
    if ace & 4 != 0 {
        f |= tcp_flags::AE;
    }
    if ace & 2 != 0 {
        f |= tcp_flags::CWR;
    }
    if ace & 1 != 0 {
        f |= tcp_flags::ECE;
    }
    f
}

/// The timestamp clock: microseconds, truncated to 32 bits (wraps every ~71 minutes; RTTs are
/// computed with wrapping arithmetic).
fn ts_now(now: Instant) -> u32 {
    (now.as_nanos() / 1_000) as u32
}

/// Maps a 32-bit wire sequence number onto the 64-bit offset (from `isn`) nearest to `reference`.
fn unwrap_seq(isn: u32, reference: u64, wire: u32) -> u64 {
    let off = wire.wrapping_sub(isn);
    let diff = off.wrapping_sub(reference as u32) as i32;
    reference.saturating_add_signed(i64::from(diff))
}

#[cfg(test)]
mod netsim;

#[cfg(test)]
mod unit_tests {
    use super::*;

    #[test]
    fn sequence_unwrapping_crosses_the_32_bit_boundary() {
        let isn = 0xffff_fff0;
        assert_eq!(unwrap_seq(isn, 0, isn), 0);
        assert_eq!(unwrap_seq(isn, 0, 0x10), 0x20);
        let r = (1u64 << 32) + 5;
        assert_eq!(unwrap_seq(0, r, 10), (1u64 << 32) + 10);
        assert_eq!(unwrap_seq(0, r, 0xffff_fff0), (1u64 << 32) - 0x10);
        assert_eq!(unwrap_seq(0, 3, 0xffff_fff0), 0, "saturates below zero");
    }
}
