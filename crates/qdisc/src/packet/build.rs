//! Building frames (for tests, benchmarks and the simulator), and the Internet checksum helpers
//! the rewriting and segmentation code share.
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::{tcp_flags, Packet, PacketMeta};

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

/// Source MAC address of built frames (locally administered).
pub const SRC_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
/// Destination MAC address of built frames (locally administered).
pub const DST_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];
/// Least capacity of a frame buffer the builder allocates or grows: the largest header (802.1Q,
/// IPv6, TCP with 40 option bytes: 118 bytes) fits.
const MIN_FRAME_CAPACITY: usize = 128;
/// Most TCP option bytes a header can hold; longer option lists are truncated.
const MAX_TCP_OPTIONS: usize = 40;

impl FrameSpec {
    /// A TCP segment `src:src_port -> dst:dst_port` with ACK set, seq/ack 0, window 65535, no
    /// options, TOS 0, no VLAN and no payload. Adjust with the `with_*` methods.
    pub fn tcp(src: IpAddr, dst: IpAddr, src_port: u16, dst_port: u16) -> Self {
        FrameSpec {
            src,
            dst,
            tos: 0,
            vlan: None,
            l4: L4Spec::Tcp {
                src_port,
                dst_port,
                seq: 0,
                ack: 0,
                flags: tcp_flags::ACK,
                window: 65535,
                options: Vec::new(),
            },
            payload_len: 0,
        }
    }

    /// A UDP datagram `src:src_port -> dst:dst_port` with TOS 0, no VLAN and no payload.
    pub fn udp(src: IpAddr, dst: IpAddr, src_port: u16, dst_port: u16) -> Self {
        FrameSpec {
            src,
            dst,
            tos: 0,
            vlan: None,
            l4: L4Spec::Udp { src_port, dst_port },
            payload_len: 0,
        }
    }

    /// An ICMP (IPv4) or ICMPv6 (IPv6) echo request with TOS 0, no VLAN and no payload.
    pub fn icmp_echo(src: IpAddr, dst: IpAddr, id: u16, seq: u16) -> Self {
        FrameSpec {
            src,
            dst,
            tos: 0,
            vlan: None,
            l4: L4Spec::IcmpEcho { id, seq },
            payload_len: 0,
        }
    }

    /// Sets the payload length.
    #[must_use]
    pub fn with_payload(mut self, payload_len: usize) -> Self {
        self.payload_len = payload_len;
        self
    }

    /// Sets the TOS / traffic class byte (DSCP << 2 | ECN).
    #[must_use]
    pub fn with_tos(mut self, tos: u8) -> Self {
        self.tos = tos;
        self
    }

    /// Sets DSCP (0..=63, masked) and ECN (0..=3, masked).
    #[must_use]
    pub fn with_dscp_ecn(mut self, dscp: u8, ecn: u8) -> Self {
        self.tos = (dscp << 2) | (ecn & 3);
        self
    }

    /// Adds an 802.1Q tag with this VLAN id (12 bits, masked).
    #[must_use]
    pub fn with_vlan(mut self, vlan: u16) -> Self {
        self.vlan = Some(vlan);
        self
    }

    /// Sets the TCP flags (no effect unless this is a TCP spec).
    #[must_use]
    pub fn with_tcp_flags(mut self, new_flags: u16) -> Self {
        if let L4Spec::Tcp { flags, .. } = &mut self.l4 {
            *flags = new_flags;
        }
        self
    }

    /// Sets the TCP sequence and acknowledgement numbers (no effect unless TCP).
    #[must_use]
    pub fn with_seq_ack(mut self, new_seq: u32, new_ack: u32) -> Self {
        if let L4Spec::Tcp { seq, ack, .. } = &mut self.l4 {
            *seq = new_seq;
            *ack = new_ack;
        }
        self
    }

    /// Sets the raw TCP option bytes (no effect unless TCP).
    #[must_use]
    pub fn with_tcp_options(mut self, new_options: Vec<u8>) -> Self {
        if let L4Spec::Tcp { options, .. } = &mut self.l4 {
            *options = new_options;
        }
        self
    }

    /// Builds the frame with correct length fields and checksums. If `src` and `dst` are of
    /// different families, `dst` is taken as the family (an IPv4 `src` becomes IPv4-mapped; an
    /// IPv6 `src` that is not IPv4-mapped becomes 0.0.0.0).
    ///
    /// Layout: Ethernet II (MACs [`SRC_MAC`] -> [`DST_MAC`]), an optional 802.1Q tag, IPv4
    /// (IHL 5, id 0, DF, TTL 64) or IPv6 (flow label 0, hop limit 64), the transport header
    /// (TCP options padded with EOL bytes to a multiple of 4, at most 40 bytes), then
    /// `payload_len` zero bytes. No Ethernet padding to 60 bytes is added. IP length fields
    /// saturate at 65535 for oversized (GSO super-packet) payloads.
    pub fn build(&self) -> Vec<u8> {
        self.build_frame(true)
    }

    /// [`Self::build`] wrapped in a [`Packet`] with default metadata.
    pub fn packet(&self) -> Packet {
        Packet::new(self.build())
    }

    /// Like [`Self::packet`] but the payload is not materialised: the frame holds only the
    /// headers and `meta.pad` is `payload_len`. Length fields and checksums are exactly those of
    /// [`Self::build`] (the payload is zeros, which do not change a checksum).
    pub fn packet_padded(&self) -> Packet {
        self.packet_padded_in(Vec::new())
    }

    /// [`Self::packet_padded`] written into `buf` (cleared first), so a caller that recycles
    /// frame buffers builds packets without allocating.
    pub fn packet_padded_in(&self, mut buf: Vec<u8>) -> Packet {
        buf.clear();
        self.build_frame_into(&mut buf, false);
        let pad = u32::try_from(self.payload_len).unwrap_or(u32::MAX);
        Packet {
            data: buf,
            meta: PacketMeta {
                pad,
                ..PacketMeta::default()
            },
        }
    }

    fn build_frame(&self, materialise: bool) -> Vec<u8> {
        let mut f = Vec::new();
        self.build_frame_into(&mut f, materialise);
        f
    }

    /// Appends the frame to `out`: the headers are written into a stack buffer at fixed offsets
    /// and appended at once (this runs for every segment the simulator's TCP sends).
    fn build_frame_into(&self, out: &mut Vec<u8>, materialise: bool) {
        let (src, dst): (IpAddr, IpAddr) = match (self.src, self.dst) {
            (IpAddr::V6(s), IpAddr::V4(d)) => (
                IpAddr::V4(s.to_ipv4_mapped().unwrap_or(Ipv4Addr::UNSPECIFIED)),
                IpAddr::V4(d),
            ),
            (IpAddr::V4(s), IpAddr::V6(d)) => (IpAddr::V6(s.to_ipv6_mapped()), IpAddr::V6(d)),
            pair => pair,
        };
        let v6 = dst.is_ipv6();
        let options: &[u8] = match &self.l4 {
            L4Spec::Tcp { options, .. } => &options[..options.len().min(MAX_TCP_OPTIONS)],
            _ => &[],
        };
        let l4_hlen = match self.l4 {
            L4Spec::Tcp { .. } => 20 + options.len().div_ceil(4) * 4,
            L4Spec::Udp { .. } | L4Spec::IcmpEcho { .. } => 8,
        };
        let ip_hlen = if v6 { 40 } else { 20 };
        let l2 = if self.vlan.is_some() { 18 } else { 14 };
        let l4_len = l4_hlen + self.payload_len;
        let body = if materialise { self.payload_len } else { 0 };
        // Largest header: 18 (802.1Q) + 40 (IPv6) + 60 (TCP with 40 option bytes).
        let mut h = [0u8; 18 + 40 + 60];
        h[0..6].copy_from_slice(&DST_MAC);
        h[6..12].copy_from_slice(&SRC_MAC);
        if let Some(vlan) = self.vlan {
            h[12..14].copy_from_slice(&0x8100u16.to_be_bytes());
            h[14..16].copy_from_slice(&(vlan & 0x0fff).to_be_bytes());
        }
        let proto = match (&self.l4, v6) {
            (L4Spec::Tcp { .. }, _) => 6u8,
            (L4Spec::Udp { .. }, _) => 17,
            (L4Spec::IcmpEcho { .. }, false) => 1,
            (L4Spec::IcmpEcho { .. }, true) => 58,
        };
        let sat16 = |x: usize| x.min(usize::from(u16::MAX)) as u16;
        let ip_off = l2;
        match (src, dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                h[ip_off - 2..ip_off].copy_from_slice(&0x0800u16.to_be_bytes());
                let ip = &mut h[ip_off..ip_off + 20];
                ip[0] = 0x45;
                ip[1] = self.tos;
                ip[2..4].copy_from_slice(&sat16(20 + l4_len).to_be_bytes());
                ip[6] = 0x40;
                ip[8] = 64;
                ip[9] = proto;
                ip[12..16].copy_from_slice(&s.octets());
                ip[16..20].copy_from_slice(&d.octets());
                let c = checksum(0, ip);
                ip[10..12].copy_from_slice(&c.to_be_bytes());
            }
            (s, d) => {
                let s = as_v6(s);
                let d = as_v6(d);
                h[ip_off - 2..ip_off].copy_from_slice(&0x86DDu16.to_be_bytes());
                let ip = &mut h[ip_off..ip_off + 40];
                ip[0] = 0x60 | (self.tos >> 4);
                ip[1] = self.tos << 4;
                ip[4..6].copy_from_slice(&sat16(l4_len).to_be_bytes());
                ip[6] = proto;
                ip[7] = 64;
                ip[8..24].copy_from_slice(&s.octets());
                ip[24..40].copy_from_slice(&d.octets());
            }
        }
        let l4_off = ip_off + ip_hlen;
        let l4 = &mut h[l4_off..l4_off + l4_hlen];
        match &self.l4 {
            L4Spec::Tcp {
                src_port,
                dst_port,
                seq,
                ack,
                flags,
                window,
                ..
            } => {
                l4[0..2].copy_from_slice(&src_port.to_be_bytes());
                l4[2..4].copy_from_slice(&dst_port.to_be_bytes());
                l4[4..8].copy_from_slice(&seq.to_be_bytes());
                l4[8..12].copy_from_slice(&ack.to_be_bytes());
                let doff = (l4_hlen as u16 / 4) << 12;
                l4[12..14].copy_from_slice(&(doff | (flags & 0x0fff)).to_be_bytes());
                l4[14..16].copy_from_slice(&window.to_be_bytes());
                l4[20..20 + options.len()].copy_from_slice(options);
            }
            L4Spec::Udp { src_port, dst_port } => {
                l4[0..2].copy_from_slice(&src_port.to_be_bytes());
                l4[2..4].copy_from_slice(&dst_port.to_be_bytes());
                l4[4..6].copy_from_slice(&sat16(l4_len).to_be_bytes());
            }
            L4Spec::IcmpEcho { id, seq } => {
                l4[0] = if v6 { 128 } else { 8 };
                l4[4..6].copy_from_slice(&id.to_be_bytes());
                l4[6..8].copy_from_slice(&seq.to_be_bytes());
            }
        }
        // Checksum over the transport header (payload is zeros) plus the pseudo header (none for
        // ICMPv4).
        let pseudo = if proto == 1 {
            0
        } else {
            pseudo_header_sum(&h, ip_off, v6, proto, l4_len as u64)
        };
        let mut c = checksum(pseudo, &h[l4_off..l4_off + l4_hlen]);
        if proto == 17 && c == 0 {
            c = 0xffff;
        }
        let at = match proto {
            6 => l4_off + 16,
            17 => l4_off + 6,
            _ => l4_off + 2,
        };
        h[at..at + 2].copy_from_slice(&c.to_be_bytes());
        let hdr_len = l4_off + l4_hlen;
        // At least MIN_FRAME_CAPACITY: a recycled buffer then holds any header-only frame
        // without reallocating, whatever frame it carried before.
        let need = out.len() + hdr_len + body;
        if out.capacity() < need {
            out.reserve_exact(need.max(MIN_FRAME_CAPACITY) - out.len());
        }
        out.extend_from_slice(&h[..hdr_len]);
        out.resize(out.len() + body, 0);
    }
}

fn as_v6(a: IpAddr) -> Ipv6Addr {
    match a {
        IpAddr::V4(a) => a.to_ipv6_mapped(),
        IpAddr::V6(a) => a,
    }
}

/// Adds `data` to a ones-complement accumulator as big-endian 16-bit words (an odd trailing byte
/// is padded with zero). The accumulator is folded by [`checksum`]; what is added is congruent
/// modulo 2^16 - 1 to the sum of the words, and zero only when every byte is.
///
/// Blocks of [`BLOCK`] bytes are summed as native-endian 32-bit words (no byte swaps, which lets
/// the compiler vectorise the loop) and their folded sum is then byte-swapped into big-endian
/// order: the ones-complement sum does not depend on byte order (RFC 1071, 2.B). The rest goes
/// four bytes at a time as big-endian 32-bit words: since 2^16 = 1 modulo 2^16 - 1, that is the
/// same ones-complement sum as two 16-bit words, once folded.
#[inline]
pub(crate) fn sum_words(mut acc: u64, data: &[u8]) -> u64 {
    let mut blocks = data.chunks_exact(BLOCK);
    if data.len() >= BLOCK {
        let mut native = 0u64;
        for b in &mut blocks {
            for w in b.chunks_exact(4) {
                native += u64::from(u32::from_ne_bytes([w[0], w[1], w[2], w[3]]));
            }
        }
        // At most 2^32 - 1 per word and 16 words per block: no overflow below 2^28 blocks
        // (4 GiB), far beyond any frame.
        acc += u64::from(u16::from_be(fold(native)));
    }
    let rest = blocks.remainder();
    let mut chunks = rest.chunks_exact(4);
    for w in &mut chunks {
        acc += u64::from(u32::from_be_bytes([w[0], w[1], w[2], w[3]]));
    }
    match *chunks.remainder() {
        [a, b, c] => acc + u64::from(u16::from_be_bytes([a, b])) + (u64::from(c) << 8),
        [a, b] => acc + u64::from(u16::from_be_bytes([a, b])),
        [a] => acc + (u64::from(a) << 8),
        _ => acc,
    }
}

/// Bytes [`sum_words`] sums per block in native byte order.
const BLOCK: usize = 64;

/// Folds a ones-complement accumulator to 16 bits (end-around carries); zero only for zero.
#[inline]
fn fold(mut s: u64) -> u16 {
    while s >> 16 != 0 {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

/// The Internet checksum (RFC 1071) of `data` with an initial accumulator `acc`: the ones
/// complement of the folded ones-complement sum.
#[inline]
pub(crate) fn checksum(acc: u64, data: &[u8]) -> u16 {
    !fold(sum_words(acc, data))
}

/// The unfolded sum of the TCP/UDP pseudo header for the IP header at `ip_off` (addresses read
/// from the frame; 0 if they are out of bounds) with transport length `l4_len`.
#[inline]
pub(crate) fn pseudo_header_sum(f: &[u8], ip_off: usize, v6: bool, proto: u8, l4_len: u64) -> u64 {
    let addrs = if v6 {
        f.get(ip_off + 8..ip_off + 40)
    } else {
        f.get(ip_off + 12..ip_off + 20)
    };
    let acc = sum_words(0, addrs.unwrap_or(&[]));
    acc + u64::from(proto) + (l4_len & 0xffff) + (l4_len >> 16)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 1071 the slow way: big-endian 16-bit words, folded at the end.
    fn reference(acc: u64, data: &[u8]) -> u16 {
        let mut s = acc;
        for w in data.chunks(2) {
            s += u64::from(u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)]));
        }
        !fold(s)
    }

    /// The block-wise native-endian sum gives exactly the checksum of the 16-bit reference, at
    /// every length around the block size, for patterned, all-zero and all-0xff data (where
    /// 0x0000 and 0xffff would differ), with and without an initial accumulator.
    #[test]
    fn checksum_equals_the_16_bit_reference() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let random: Vec<u8> = (0..600)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        for data in [random, vec![0; 600], vec![0xff; 600]] {
            for len in (0..200).chain([511, 512, 513, 599, 600]) {
                for acc in [0, 1, 0xffff, 0x1_2345_6789] {
                    assert_eq!(
                        checksum(acc, &data[..len]),
                        reference(acc, &data[..len]),
                        "len {len} acc {acc:#x} first {:#x}",
                        data[0]
                    );
                }
            }
        }
    }
}
