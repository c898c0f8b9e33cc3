//! Packets as the qdiscs see them: a raw Ethernet frame plus metadata the caller supplies, and a
//! parsed view of its headers.
//!
//! Parsing never panics and never reads out of bounds: a truncated or malformed frame parses to
//! whatever layers could be read in full (at worst [`NetKind::Other`] with no IP header), and is
//! then queued as non-IP traffic.

pub mod buffers;
mod build;
mod gso;
mod join;
mod parse;
mod rewrite;
mod tcp_options;

pub use buffers::{Buffers, Pool, Unpooled};
pub use build::{FrameSpec, L4Spec, DST_MAC, SRC_MAC};
pub use gso::{segment, segment_with};
pub use join::{finish as finish_joined, join, joinable, Joined};
pub use rewrite::{mark_ce, set_dscp};
pub use tcp_options::{TcpOption, TcpOptions};

/// The length of a full-size Ethernet frame, bytes: a 1,500-byte IP packet behind its 14-byte
/// Ethernet header (what Linux's `psched_mtu` gives on an Ethernet device with the usual 1,500-byte
/// MTU). The one home of the number for the qdiscs' defaults (quantum, MTU), the controllers'
/// one-frame allowances and the simulator's full-size data frames.
pub const FULL_FRAME: u32 = 1514;

/// One packet: the frame bytes and the metadata that does not live in them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Packet {
    /// The frame as it would appear on the wire, starting at the Ethernet header.
    pub data: Vec<u8>,
    /// Metadata supplied by the caller.
    pub meta: PacketMeta,
}

/// Metadata carried beside the frame (the parts of a Linux skb that CAKE reads).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PacketMeta {
    /// Firewall mark (skb->mark), used by CAKE's `fwmark` tin override.
    pub mark: u32,
    /// Priority (skb->priority, `major:minor`), used by CAKE's priority tin override.
    pub priority: u32,
    /// The pre-NAT 5-tuple (conntrack's original direction), used by CAKE's `nat` option.
    pub nat: Option<FlowTuple>,
    /// Present when this is a GSO super-packet (e.g. from a virtio-net header).
    pub gso: Option<Gso>,
    /// Payload bytes the caller did not materialise (the simulator uses this to avoid copying
    /// payloads). They count towards [`Packet::len`] but are never read.
    pub pad: u32,
    /// An opaque value for the caller (flow id, sequence number, ...). Never read by a qdisc.
    pub tag: u64,
}

/// Which protocol a GSO super-packet segments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GsoKind {
    /// TCP over IPv4.
    TcpV4,
    /// TCP over IPv6.
    TcpV6,
    /// UDP (USO / UFO).
    Udp,
}

/// A GSO descriptor: the super-packet is cut into segments of `size` payload bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gso {
    /// The segmentation kind.
    pub kind: GsoKind,
    /// Payload bytes per segment (MSS).
    pub size: u16,
}

/// An IP 5-tuple. IPv4 addresses are stored IPv4-mapped (`::ffff:a.b.c.d`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct FlowTuple {
    /// Source address.
    pub src: [u8; 16],
    /// Destination address.
    pub dst: [u8; 16],
    /// Transport protocol number.
    pub proto: u8,
    /// Source port (0 where the protocol has none).
    pub src_port: u16,
    /// Destination port (0 where the protocol has none).
    pub dst_port: u16,
}

/// What the network layer is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NetKind {
    /// Not ARP or IP, or too malformed to tell.
    #[default]
    Other,
    /// ARP.
    Arp,
    /// IPv4 (possibly carrying IPv6, 6in4).
    Ipv4,
    /// IPv6.
    Ipv6,
}

/// The IP layer of a frame.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IpInfo {
    /// Offset of the outer IP header in the frame (DSCP and ECN live there).
    pub outer_offset: u16,
    /// Offset of the innermost IP header (differs from `outer_offset` for 6in4).
    pub inner_offset: u16,
    /// Version of the innermost IP header (6 for 6in4).
    pub inner_version: u8,
    /// The 5-tuple of the innermost IP header and its transport (ports 0 if none or a
    /// non-first fragment).
    pub tuple: FlowTuple,
    /// DSCP of the outer header (0..=63).
    pub dscp: u8,
    /// ECN field of the outer header (0 Not-ECT, 1 ECT(1), 2 ECT(0), 3 CE).
    pub ecn: u8,
    /// Bytes from the outer IP header to the end of the IP datagram, by the header's length field.
    pub ip_len: u32,
}

/// The TCP layer of a frame.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpInfo {
    /// Offset of the TCP header in the frame.
    pub offset: u16,
    /// TCP header length in bytes (data offset * 4), options included.
    pub header_len: u16,
    /// The 9 flag bits: FIN=0x01 SYN=0x02 RST=0x04 PSH=0x08 ACK=0x10 URG=0x20 ECE=0x40
    /// CWR=0x80 AE(NS)=0x100, plus the three reserved bits as 0x200, 0x400, 0x800.
    pub flags: u16,
    /// Sequence number.
    pub seq: u32,
    /// Acknowledgement number.
    pub ack: u32,
    /// Payload length (from the IP length fields, not the frame length).
    pub payload_len: u32,
}

/// TCP flag bits as in [`TcpInfo::flags`].
pub mod tcp_flags {
    /// FIN
    pub const FIN: u16 = 0x01;
    /// SYN
    pub const SYN: u16 = 0x02;
    /// RST
    pub const RST: u16 = 0x04;
    /// PSH
    pub const PSH: u16 = 0x08;
    /// ACK
    pub const ACK: u16 = 0x10;
    /// URG
    pub const URG: u16 = 0x20;
    /// ECE
    pub const ECE: u16 = 0x40;
    /// CWR
    pub const CWR: u16 = 0x80;
    /// AE (formerly NS)
    pub const AE: u16 = 0x100;
    /// The three reserved bits.
    pub const RESERVED: u16 = 0xE00;
}

/// The parsed headers of a frame: offsets into the frame plus the fields the qdiscs use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Headers {
    /// Bytes before the network header (Ethernet + VLAN tags + PPPoE); CAKE's "network offset".
    /// Equals the frame length when no network header was found.
    pub network_offset: u16,
    /// The network layer.
    pub kind: NetKind,
    /// Present for IPv4 and IPv6 frames whose IP header could be read.
    pub ip: Option<IpInfo>,
    /// Present when the innermost transport is TCP and its header could be read in full.
    pub tcp: Option<TcpInfo>,
}

impl Headers {
    /// Parses `frame` (starting at the Ethernet header). Never panics; see the module docs.
    #[inline]
    pub fn parse(frame: &[u8]) -> Headers {
        // The common case inline (so callers can keep just the fields they read), the rest
        // out of line.
        match parse::parse_fast(frame) {
            Some(h) => h,
            None => parse::parse(frame),
        }
    }
}

/// The part of a frame's [`Headers`] that a flow classifier reads (CAKE's per-packet path):
/// the network offset and kind, and for IP the outer DSCP and the 5-tuple. Parsing it builds
/// nothing else, so it is cheaper than [`Headers::parse`] when the rest is not needed; it
/// always equals `FlowHeaders::from(&Headers::parse(frame))`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowHeaders {
    /// As [`Headers::network_offset`].
    pub network_offset: u16,
    /// As [`Headers::kind`].
    pub kind: NetKind,
    /// Present exactly when [`Headers::ip`] is.
    pub ip: Option<FlowIp>,
}

/// The IP fields of [`FlowHeaders`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowIp {
    /// As [`IpInfo::tuple`].
    pub tuple: FlowTuple,
    /// As [`IpInfo::dscp`].
    pub dscp: u8,
}

impl FlowHeaders {
    /// Parses `frame` (starting at the Ethernet header). Never panics; see the module docs.
    #[inline]
    pub fn parse(frame: &[u8]) -> FlowHeaders {
        match parse::parse_flow_fast(frame) {
            Some(h) => h,
            None => Self::parse_general(frame),
        }
    }

    /// The frames the fast path does not take (VLAN, PPPoE, options, fragments, extension
    /// headers, other protocols): out of line.
    #[cold]
    #[inline(never)]
    fn parse_general(frame: &[u8]) -> FlowHeaders {
        FlowHeaders::from(&parse::parse(frame))
    }
}

/// The flow fields of the most common frame, read straight from its bytes: an untagged
/// Ethernet II frame with an option-less, unfragmented IPv4 header carrying TCP or UDP (both
/// ports present). A flow classifier that hashes the IPv4 addresses as they are can skip
/// building the IPv4-mapped [`FlowTuple`]; [`FlowV4::headers`] gives the [`FlowHeaders`] of the
/// same frame, which [`FlowHeaders::parse`] returns for it too (the tests check that).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowV4 {
    /// Source address, in frame (network) byte order.
    pub src: [u8; 4],
    /// Destination address, in frame byte order.
    pub dst: [u8; 4],
    /// The transport header's first four bytes, in frame byte order: the source port, then
    /// the destination port ([`FlowV4::src_port`], [`FlowV4::dst_port`]). Kept as they are
    /// so that a hash of both ports reads them as one big-endian word.
    pub ports: [u8; 4],
    /// Transport protocol number: TCP (6) or UDP (17).
    pub proto: u8,
    /// The DSCP (the ToS byte's upper six bits).
    pub dscp: u8,
}

impl FlowV4 {
    /// The network offset of every frame [`FlowV4::parse`] accepts: an untagged Ethernet header.
    pub const NETWORK_OFFSET: u16 = 14;

    /// Reads `frame` when it is the common case described above; `None` for any other frame
    /// (parse those with [`FlowHeaders::parse`]). Never panics.
    #[inline(always)]
    pub fn parse(frame: &[u8]) -> Option<FlowV4> {
        parse::parse_flow_v4(frame)
    }

    /// The source port: the upper half of [`FlowV4::ports_word`]. Both ports are read from
    /// that word, so that every use reads the four bytes as one (with the halves read apart,
    /// the compiler split the word into two 16-bit loads for CAKE's IPv4 path as well, and
    /// joined them again with a shift and an OR).
    #[inline]
    pub fn src_port(&self) -> u16 {
        (self.ports_word() >> 16) as u16
    }

    /// The destination port: the lower half of [`FlowV4::ports_word`] (see
    /// [`FlowV4::src_port`]).
    #[inline]
    pub fn dst_port(&self) -> u16 {
        self.ports_word() as u16
    }

    /// Both ports as one word, the source port in the upper half:
    /// `u32::from(src_port) << 16 | u32::from(dst_port)`.
    #[inline]
    pub fn ports_word(&self) -> u32 {
        u32::from_be_bytes(self.ports)
    }

    /// The same frame's [`FlowHeaders`]: the addresses IPv4-mapped.
    pub fn headers(&self) -> FlowHeaders {
        let mapped = |a: [u8; 4]| {
            let mut m = [0u8; 16];
            m[10] = 0xff;
            m[11] = 0xff;
            m[12..].copy_from_slice(&a);
            m
        };
        FlowHeaders {
            network_offset: Self::NETWORK_OFFSET,
            kind: NetKind::Ipv4,
            ip: Some(FlowIp {
                tuple: FlowTuple {
                    src: mapped(self.src),
                    dst: mapped(self.dst),
                    proto: self.proto,
                    src_port: self.src_port(),
                    dst_port: self.dst_port(),
                },
                dscp: self.dscp,
            }),
        }
    }
}

impl From<&Headers> for FlowHeaders {
    fn from(h: &Headers) -> FlowHeaders {
        FlowHeaders {
            network_offset: h.network_offset,
            kind: h.kind,
            ip: h.ip.map(|ip| FlowIp {
                tuple: ip.tuple,
                dscp: ip.dscp,
            }),
        }
    }
}

impl Packet {
    /// A packet with default metadata.
    pub fn new(data: Vec<u8>) -> Self {
        Packet {
            data,
            meta: PacketMeta::default(),
        }
    }

    /// Length in bytes as a qdisc counts it (frame bytes plus unmaterialised `pad`).
    #[inline]
    pub fn len(&self) -> u32 {
        (self.data.len() as u32).saturating_add(self.meta.pad)
    }

    /// Bytes of memory this packet pins while queued, as Linux's skb `truesize` counts them:
    /// its frame buffer's capacity (at least its length; a 60-byte frame in a 2 KiB buffer pins
    /// 2 KiB) plus the unmaterialised `pad`. Saturates at `u32::MAX`.
    #[inline]
    pub fn truesize(&self) -> u32 {
        u32::try_from(self.data.capacity())
            .unwrap_or(u32::MAX)
            .saturating_add(self.meta.pad)
    }

    /// True for a zero-length packet.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Parses this packet's headers.
    #[inline]
    pub fn headers(&self) -> Headers {
        Headers::parse(&self.data)
    }
}
