//! The virtio-net header that precedes every frame on a `PACKET_VNET_HDR` socket, and how it maps
//! to and from a [`Packet`]'s metadata.
//!
//! On receive, the GSO type and size become [`PacketMeta::gso`] (so CAKE can split super-packets)
//! and the whole header is stashed in [`PacketMeta::tag`] (flags, GSO type, GSO size, checksum
//! start and offset: 64 bits exactly). On send the header is rebuilt from the tag:
//! - a packet that still has its GSO descriptor goes out as received: a super-packet the kernel
//!   segments, with `NEEDS_CSUM` and the checksum location carried through;
//! - a packet that arrived as a super-packet but has lost its descriptor is a segment CAKE cut
//!   (whose checksums [`qdisc::packet::segment`] computed in full): it goes out with an empty
//!   header;
//! - a packet that was never a super-packet goes out with its original flags, so a partial
//!   checksum (`NEEDS_CSUM`, common on veth with offloads on) is completed by the kernel.
//!
//! [`Packet`]: qdisc::Packet
//! [`PacketMeta::gso`]: qdisc::PacketMeta::gso
//! [`PacketMeta::tag`]: qdisc::PacketMeta::tag

use qdisc::packet::{Gso, GsoKind};

use os::VNET_HDR_LEN;

/// `VIRTIO_NET_HDR_F_NEEDS_CSUM`: the checksum at `csum_start + csum_offset` is partial.
pub const F_NEEDS_CSUM: u8 = 1;
/// `VIRTIO_NET_HDR_F_DATA_VALID`: the checksum was verified (receive only).
pub const F_DATA_VALID: u8 = 2;
/// `VIRTIO_NET_HDR_GSO_NONE`.
pub const GSO_NONE: u8 = 0;
/// `VIRTIO_NET_HDR_GSO_TCPV4`.
pub const GSO_TCPV4: u8 = 1;
/// `VIRTIO_NET_HDR_GSO_UDP` (UFO: IP fragmentation, not segmentation; we do not parse it).
pub const GSO_UDP: u8 = 3;
/// `VIRTIO_NET_HDR_GSO_TCPV6`.
pub const GSO_TCPV6: u8 = 4;
/// `VIRTIO_NET_HDR_GSO_UDP_L4` (USO).
pub const GSO_UDP_L4: u8 = 5;
/// `VIRTIO_NET_HDR_GSO_ECN`: the super-packet carries CWR and every segment keeps ECN bits.
pub const GSO_ECN: u8 = 0x80;

/// A decoded virtio-net header. Packet sockets use legacy virtio byte order, which is the
/// host's native order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VnetHdr {
    /// `F_*` bits.
    pub flags: u8,
    /// `GSO_*` value, possibly with [`GSO_ECN`].
    pub gso_type: u8,
    /// Length of the headers (a hint; recomputed on send).
    pub hdr_len: u16,
    /// Payload bytes per segment.
    pub gso_size: u16,
    /// Where checksumming starts (from the Ethernet header).
    pub csum_start: u16,
    /// Where the checksum goes, from `csum_start`.
    pub csum_offset: u16,
}

impl VnetHdr {
    /// The header of a TCP super-packet (TSO) for the kernel to segment into `size`-byte
    /// payloads: partial checksum at `csum_start` (the TCP header) + 16, headers `hdr_len`
    /// bytes long, `ecn` when its first segment carries CWR.
    pub fn tso(v6: bool, ecn: bool, size: u16, csum_start: u16, hdr_len: u16) -> VnetHdr {
        VnetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: if v6 { GSO_TCPV6 } else { GSO_TCPV4 } | if ecn { GSO_ECN } else { 0 },
            hdr_len,
            gso_size: size,
            csum_start,
            csum_offset: 16,
        }
    }

    /// Decodes the wire bytes.
    pub fn decode(b: &[u8; VNET_HDR_LEN]) -> VnetHdr {
        let u = |i: usize| u16::from_ne_bytes([b[i], b[i + 1]]);
        VnetHdr {
            flags: b[0],
            gso_type: b[1],
            hdr_len: u(2),
            gso_size: u(4),
            csum_start: u(6),
            csum_offset: u(8),
        }
    }

    /// Encodes to wire bytes.
    pub fn encode(&self) -> [u8; VNET_HDR_LEN] {
        let mut b = [0u8; VNET_HDR_LEN];
        b[0] = self.flags;
        b[1] = self.gso_type;
        b[2..4].copy_from_slice(&self.hdr_len.to_ne_bytes());
        b[4..6].copy_from_slice(&self.gso_size.to_ne_bytes());
        b[6..8].copy_from_slice(&self.csum_start.to_ne_bytes());
        b[8..10].copy_from_slice(&self.csum_offset.to_ne_bytes());
        b
    }

    /// The GSO descriptor for the qdiscs: `Ok(None)` for an ordinary frame, `Err(())` for a GSO
    /// type we cannot express (UFO, or unknown), which the bridge forwards without queueing.
    #[allow(clippy::result_unit_err)]
    pub fn gso(&self) -> Result<Option<Gso>, ()> {
        let kind = match self.gso_type & !GSO_ECN {
            GSO_NONE => return Ok(None),
            GSO_TCPV4 => GsoKind::TcpV4,
            GSO_TCPV6 => GsoKind::TcpV6,
            GSO_UDP_L4 => GsoKind::Udp,
            _ => return Err(()),
        };
        Ok(Some(Gso {
            kind,
            size: self.gso_size,
        }))
    }

    /// Packs everything but `hdr_len` into a [`qdisc::PacketMeta::tag`] value.
    pub fn to_tag(&self) -> u64 {
        u64::from(self.flags)
            | u64::from(self.gso_type) << 8
            | u64::from(self.gso_size) << 16
            | u64::from(self.csum_start) << 32
            | u64::from(self.csum_offset) << 48
    }

    /// Unpacks [`to_tag`](Self::to_tag) (`hdr_len` is 0).
    pub fn from_tag(t: u64) -> VnetHdr {
        VnetHdr {
            flags: t as u8,
            gso_type: (t >> 8) as u8,
            hdr_len: 0,
            gso_size: (t >> 16) as u16,
            csum_start: (t >> 32) as u16,
            csum_offset: (t >> 48) as u16,
        }
    }

    /// The header to send a packet with, given its tag and whether it still has its GSO
    /// descriptor (see the module docs).
    pub fn for_send(tag: u64, has_gso: bool) -> VnetHdr {
        let orig = VnetHdr::from_tag(tag);
        let was_gso = orig.gso_type & !GSO_ECN != GSO_NONE;
        if was_gso && !has_gso {
            // A segment CAKE cut: complete checksums, nothing for the kernel to do.
            return VnetHdr::default();
        }
        let mut h = orig;
        // DATA_VALID means nothing on transmit.
        h.flags &= F_NEEDS_CSUM;
        if h.flags & F_NEEDS_CSUM != 0 {
            h.hdr_len = h.csum_start.saturating_add(h.csum_offset).saturating_add(2);
        }
        h
    }
}

/// The bytes `frame` (sent with header `h`) occupies on the wire once the kernel has cut it into
/// segments: Ethernet frames without preamble or FCS, the headers repeated on every segment, as
/// Linux's `qdisc_pkt_len` counts a GSO packet. A frame without GSO, or whose headers cannot be
/// located from `h` (no partial checksum to say where the transport header starts), counts as
/// its own length. Never panics; O(1).
pub fn wire_len(h: &VnetHdr, frame: &[u8]) -> u64 {
    let len = frame.len() as u64;
    let kind = h.gso_type & !GSO_ECN;
    if kind == GSO_NONE || h.gso_size == 0 || h.flags & F_NEEDS_CSUM == 0 {
        return len;
    }
    let l4 = usize::from(h.csum_start);
    let hdr = match kind {
        GSO_TCPV4 | GSO_TCPV6 => match frame.get(l4 + 12) {
            Some(&off) => l4 + usize::from(off >> 4) * 4,
            None => return len,
        },
        _ => l4 + 8,
    } as u64;
    if hdr >= len {
        return len;
    }
    let segs = (len - hdr).div_ceil(u64::from(h.gso_size));
    len + segs.saturating_sub(1) * hdr
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips_through_wire_bytes_and_tag() {
        let h = VnetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: GSO_TCPV6 | GSO_ECN,
            hdr_len: 86,
            gso_size: 1428,
            csum_start: 54,
            csum_offset: 16,
        };
        assert_eq!(VnetHdr::decode(&h.encode()), h);
        let back = VnetHdr::from_tag(h.to_tag());
        assert_eq!(back, VnetHdr { hdr_len: 0, ..h });
        assert_eq!(
            h.gso(),
            Ok(Some(Gso {
                kind: GsoKind::TcpV6,
                size: 1428
            }))
        );
    }

    #[test]
    fn wire_len_repeats_the_headers_on_every_segment_of_a_super_packet() {
        // Ethernet 14 + IPv4 20 + TCP 32 = 66 bytes of headers, 3 x 1448 bytes of payload.
        let mut f = vec![0u8; 66 + 3 * 1448];
        f[34 + 12] = 8 << 4;
        let h = VnetHdr::tso(false, false, 1448, 34, 0);
        assert_eq!(wire_len(&h, &f), 3 * 1514);
        // A short last segment.
        f.truncate(66 + 2 * 1448 + 100);
        assert_eq!(wire_len(&h, &f), 2 * 1514 + 166);
        // No GSO, or a header that does not fit: the frame's own length.
        let plain = VnetHdr {
            gso_type: GSO_NONE,
            ..h
        };
        assert_eq!(wire_len(&plain, &f), f.len() as u64);
        assert_eq!(wire_len(&h, &f[..40]), 40);
    }

    #[test]
    fn split_segments_lose_the_header_but_partial_checksums_keep_it() {
        let sup = VnetHdr::tso(false, false, 1448, 34, 0);
        assert_eq!(VnetHdr::for_send(sup.to_tag(), false), VnetHdr::default());
        let kept = VnetHdr::for_send(sup.to_tag(), true);
        assert_eq!(
            (kept.gso_type, kept.gso_size, kept.hdr_len),
            (GSO_TCPV4, 1448, 52)
        );
        let small = VnetHdr {
            flags: F_NEEDS_CSUM | F_DATA_VALID,
            csum_start: 34,
            csum_offset: 16,
            ..VnetHdr::default()
        };
        let s = VnetHdr::for_send(small.to_tag(), false);
        assert_eq!(
            (s.flags, s.csum_start, s.csum_offset),
            (F_NEEDS_CSUM, 34, 16)
        );
        assert_eq!(
            VnetHdr {
                gso_type: GSO_UDP,
                ..small
            }
            .gso(),
            Err(())
        );
    }
}
