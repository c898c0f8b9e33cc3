//! Software segmentation of GSO super-packets.
//!
//! Semantics (matching what Linux's `skb_gso_segment` produces for TSO/USO packets):
//! - The super-packet's transport payload (every byte after the TCP/UDP header, plus
//!   `meta.pad` unmaterialised bytes) is cut into chunks of `gso.size` bytes; the last may be
//!   shorter.
//! - Each segment gets a copy of the Ethernet/VLAN/PPPoE and IP headers and the transport
//!   header. IPv4: total length, id (+1 per segment, wrapping) and header checksum fixed.
//!   IPv6: payload length fixed. TCP: sequence number advanced by the bytes before it; FIN and
//!   PSH kept only on the last segment, CWR only on the first; checksum recomputed. UDP (USO):
//!   every segment is a complete datagram with its own length and checksum.
//! - `meta.pad` is treated as virtual zero bytes *after* the materialised payload: a segment
//!   copies the materialised bytes that fall in its range and carries the rest as its own
//!   `meta.pad`. Zeros do not change a ones-complement sum, so checksums stay exact.
//! - Output packets keep the input's metadata except `gso` (None) and `pad`.
//!
//! A packet is appended unchanged if it has no GSO descriptor, `gso.size` is 0, the kind does
//! not match the headers (TcpV4 needs TCP over IPv4, TcpV6 TCP over IPv6, Udp UDP over either),
//! it is tunnelled (6in4) or an IP fragment, or a segment would not fit the IP length fields.
use super::buffers::{Buffers, Unpooled};
use super::build::{checksum, pseudo_header_sum, sum_words};
use super::parse::{IPPROTO_TCP, IPPROTO_UDP};
use super::{tcp_flags, GsoKind, Headers, NetKind, Packet, PacketMeta};

/// Cuts a GSO super-packet into wire-sized segments appended to `out` (fixing IP lengths, IPv4
/// ids and checksums, TCP sequence numbers, flags and checksums). A packet without a GSO
/// descriptor, or one that cannot be segmented, is appended unchanged. Each segment's buffer
/// is allocated at exactly its length ([`Unpooled`]). See the module docs.
pub fn segment(pkt: Packet, out: &mut Vec<Packet>) {
    segment_with(pkt, out, &mut Unpooled);
}

/// As [`segment`], with each segment's buffer taken from `bufs` (one [`Buffers::take`] per
/// segment, for exactly the bytes it holds) and the super-packet's buffer, once cut, given back
/// to it ([`Buffers::recycle`]). A packet appended unchanged keeps its buffer. The segments'
/// bytes are the same whatever `bufs` is; only their buffers' capacities (their
/// [`truesize`](Packet::truesize)) depend on it.
pub fn segment_with(pkt: Packet, out: &mut Vec<Packet>, bufs: &mut (impl Buffers + ?Sized)) {
    match plan(&pkt) {
        Some(plan) => {
            emit(&pkt, &plan, out, bufs);
            bufs.recycle(pkt.data);
        }
        None => out.push(pkt),
    }
}

/// What segmentation needs to know about a super-packet.
struct Plan {
    ip_off: usize,
    v6: bool,
    l4_off: usize,
    /// Offset of the first payload byte (= end of all headers).
    hdr_end: usize,
    tcp: bool,
    size: usize,
}

fn plan(pkt: &Packet) -> Option<Plan> {
    let gso = pkt.meta.gso?;
    if gso.size == 0 {
        return None;
    }
    let h = Headers::parse(&pkt.data);
    let ip = h.ip?;
    if ip.outer_offset != ip.inner_offset {
        return None;
    }
    let v6 = h.kind == NetKind::Ipv6;
    let ip_off = usize::from(ip.outer_offset);
    let (tcp, l4_off, l4_len) = match (gso.kind, h.tcp) {
        (GsoKind::TcpV4, Some(t)) if h.kind == NetKind::Ipv4 => {
            (true, usize::from(t.offset), usize::from(t.header_len))
        }
        (GsoKind::TcpV6, Some(t)) if v6 => (true, usize::from(t.offset), usize::from(t.header_len)),
        (GsoKind::Udp, None) if ip.tuple.proto == IPPROTO_UDP => {
            // The parser does not record the UDP header offset: find it again.
            let off = udp_offset(&pkt.data, ip_off, v6)?;
            (false, off, 8)
        }
        _ => return None,
    };
    if ip.tuple.proto != if tcp { IPPROTO_TCP } else { IPPROTO_UDP } {
        return None;
    }
    if !v6 {
        // Refuse IPv4 fragments (MF set or non-zero offset).
        let frag = u16::from_be_bytes([*pkt.data.get(ip_off + 6)?, *pkt.data.get(ip_off + 7)?]);
        if frag & 0x3fff != 0 {
            return None;
        }
    }
    let hdr_end = l4_off + l4_len;
    if hdr_end > pkt.data.len() {
        return None;
    }
    let size = usize::from(gso.size);
    // The IP length fields must hold a full segment.
    let ip_field = if v6 {
        hdr_end - ip_off - 40
    } else {
        hdr_end - ip_off
    };
    if ip_field + size > usize::from(u16::MAX) {
        return None;
    }
    Some(Plan {
        ip_off,
        v6,
        l4_off,
        hdr_end,
        tcp,
        size,
    })
}

/// The UDP header offset of an unfragmented UDP datagram (IPv6: following the extension chain
/// the same way the parser does, which guarantees the header is in bounds when ports parsed).
fn udp_offset(f: &[u8], ip_off: usize, v6: bool) -> Option<usize> {
    if !v6 {
        return Some(ip_off + usize::from(f.get(ip_off)? & 0x0f) * 4);
    }
    let mut next = *f.get(ip_off + 6)?;
    let mut off = ip_off + 40;
    for _ in 0..super::parse::MAX_IPV6_EXT {
        let len = match next {
            0 | 43 | 60 => (usize::from(*f.get(off + 1)?) + 1) * 8,
            51 => (usize::from(*f.get(off + 1)?) + 2) * 4,
            44 => return None,
            IPPROTO_UDP => return Some(off),
            _ => return None,
        };
        next = *f.get(off)?;
        off += len;
    }
    (next == IPPROTO_UDP).then_some(off)
}

/// Emits the segments. Invariant (checked by [`plan`]): `p.hdr_end <= pkt.data.len()`, and the
/// IP header at `p.ip_off` and transport header at `p.l4_off` lie inside `..p.hdr_end` (the parser
/// read them in full), so the fixed-offset indexing below is in bounds.
fn emit(pkt: &Packet, p: &Plan, out: &mut Vec<Packet>, bufs: &mut (impl Buffers + ?Sized)) {
    let data = &pkt.data;
    let materialised = data.len() - p.hdr_end;
    let total = materialised + pkt.meta.pad as usize;
    // At least one segment, even for an empty payload (it keeps its flags).
    let n = total.div_ceil(p.size).max(1);
    let hdr = &data[..p.hdr_end];
    let ipv4_id = if p.v6 {
        0
    } else {
        u16::from_be_bytes([data[p.ip_off + 4], data[p.ip_off + 5]])
    };
    let (seq0, flags0) = if p.tcp {
        (
            u32::from_be_bytes([
                data[p.l4_off + 4],
                data[p.l4_off + 5],
                data[p.l4_off + 6],
                data[p.l4_off + 7],
            ]),
            data[p.l4_off + 13],
        )
    } else {
        (0, 0)
    };
    out.reserve(n);
    for i in 0..n {
        let start = i * p.size;
        let seg_len = p.size.min(total - start.min(total));
        let copy_end = (start + seg_len).min(materialised);
        let copy_start = start.min(copy_end);
        let copied = copy_end - copy_start;
        let mut f = bufs.take(p.hdr_end + copied);
        f.clear();
        f.extend_from_slice(hdr);
        f.extend_from_slice(&data[p.hdr_end + copy_start..p.hdr_end + copy_end]);
        let l4_len = p.hdr_end - p.l4_off + seg_len;

        // IP header.
        if p.v6 {
            let plen = (p.hdr_end - p.ip_off - 40 + seg_len) as u16;
            f[p.ip_off + 4..p.ip_off + 6].copy_from_slice(&plen.to_be_bytes());
        } else {
            let tot = (p.hdr_end - p.ip_off + seg_len) as u16;
            f[p.ip_off + 2..p.ip_off + 4].copy_from_slice(&tot.to_be_bytes());
            let id = ipv4_id.wrapping_add(i as u16);
            f[p.ip_off + 4..p.ip_off + 6].copy_from_slice(&id.to_be_bytes());
            let ihl = usize::from(f[p.ip_off] & 0x0f) * 4;
            f[p.ip_off + 10..p.ip_off + 12].copy_from_slice(&[0, 0]);
            let c = checksum(0, &f[p.ip_off..p.ip_off + ihl]);
            f[p.ip_off + 10..p.ip_off + 12].copy_from_slice(&c.to_be_bytes());
        }

        // Transport header.
        let l4 = p.l4_off;
        let csum_at = if p.tcp {
            let seq = seq0.wrapping_add(start as u32);
            f[l4 + 4..l4 + 8].copy_from_slice(&seq.to_be_bytes());
            let mut fl = flags0;
            if i + 1 != n {
                fl &= !((tcp_flags::FIN | tcp_flags::PSH) as u8);
            }
            if i != 0 {
                fl &= !(tcp_flags::CWR as u8);
            }
            f[l4 + 13] = fl;
            l4 + 16
        } else {
            f[l4 + 4..l4 + 6].copy_from_slice(&(l4_len as u16).to_be_bytes());
            l4 + 6
        };
        f[csum_at..csum_at + 2].copy_from_slice(&[0, 0]);
        let proto = if p.tcp { IPPROTO_TCP } else { IPPROTO_UDP };
        let pseudo = pseudo_header_sum(&f, p.ip_off, p.v6, proto, l4_len as u64);
        let mut c = checksum(sum_words(pseudo, &f[l4..p.hdr_end]), &f[p.hdr_end..]);
        if !p.tcp && c == 0 {
            c = 0xffff;
        }
        f[csum_at..csum_at + 2].copy_from_slice(&c.to_be_bytes());

        let pad = (seg_len - copied) as u32;
        out.push(Packet {
            data: f,
            meta: PacketMeta {
                gso: None,
                pad,
                ..pkt.meta
            },
        });
    }
}
