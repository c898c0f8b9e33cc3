//! Rejoining TCP segments into a GSO super-packet: the inverse of [`segment`](super::segment).
//!
//! A dataplane that lets CAKE split super-packets (`split-gso`) hands the kernel one frame per
//! segment, and the kernel's per-frame work then dominates. Segments of one flow that leave
//! together (dequeued in the same batch, so released at the same instant) can go out as one
//! super-packet again, which the kernel (or the NIC) cuts into exactly the frames they were:
//! same bytes on the wire, same pacing, a fraction of the work.
//!
//! [`join`] appends a segment to a frame when, and only when, segmenting the result would give
//! back the two inputs:
//! - both are TCP over IPv4 or IPv6 (not tunnelled, not IP fragments) with identical Ethernet,
//!   IP and TCP headers except for the fields segmentation rewrites (IP lengths, IPv4 id and
//!   header checksum, TCP sequence number, flags and checksum); so DSCP, ECN (a CE mark),
//!   options (timestamps) and the ACK number must match;
//! - the segment continues the frame: its sequence number follows the frame's last byte and its
//!   IPv4 id is the frame's id plus the number of segments the frame holds;
//! - the frame's payload is a whole number of `size`-byte segments, the segment's payload is
//!   1..=`size` bytes, and the joined IP length still fits 16 bits;
//! - flags follow segmentation's rule: the frame carries no FIN, PSH, SYN, RST or URG (those
//!   end a super-packet or never are in one), the segment no CWR, SYN, RST or URG, and apart
//!   from PSH/FIN (last segment) and CWR (first) their flags are equal.
//!
//! [`finish`] then prepares the joined frame for a GSO send: IPv4 header checksum, and the TCP
//! checksum field set to the folded pseudo-header sum (Linux's `CHECKSUM_PARTIAL` convention),
//! and returns where its headers lie, for the virtio-net header.
use super::build::{checksum, pseudo_header_sum};
use super::parse::IPPROTO_TCP;
use super::{tcp_flags, Headers, NetKind};

/// Where a joined super-packet's headers lie and how to segment it, for an offload descriptor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Joined {
    /// True for TCP over IPv6.
    pub v6: bool,
    /// Offset of the TCP header (where checksumming starts).
    pub l4_offset: u16,
    /// Length of all headers (Ethernet to the end of TCP options).
    pub hdr_len: u16,
    /// Payload bytes per segment.
    pub size: u16,
    /// True when the first segment carries CWR (Linux's `SKB_GSO_TCP_ECN`).
    pub cwr: bool,
}

/// What [`join`] and [`finish`] read from a frame's headers.
struct Tcp {
    v6: bool,
    ip_off: usize,
    l4_off: usize,
    hdr_end: usize,
    flags: u8,
    seq: u32,
    payload: usize,
}

fn tcp_of(f: &[u8]) -> Option<Tcp> {
    let h = Headers::parse(f);
    let ip = h.ip?;
    let t = h.tcp?;
    if ip.outer_offset != ip.inner_offset || ip.tuple.proto != IPPROTO_TCP {
        return None;
    }
    let v6 = h.kind == NetKind::Ipv6;
    let ip_off = usize::from(ip.outer_offset);
    let l4_off = usize::from(t.offset);
    let hdr_end = l4_off + usize::from(t.header_len);
    let payload = t.payload_len as usize;
    // No Ethernet padding or trailing bytes: the frame is exactly its IP datagram.
    if f.len() != hdr_end + payload {
        return None;
    }
    if v6 {
        // The TCP header must follow the fixed header (no extension headers to keep in step).
        if l4_off != ip_off + 40 {
            return None;
        }
    } else {
        let frag = u16::from_be_bytes([f[ip_off + 6], f[ip_off + 7]]);
        if frag & 0x3fff != 0 {
            return None;
        }
    }
    Some(Tcp {
        v6,
        ip_off,
        l4_off,
        hdr_end,
        flags: t.flags as u8,
        seq: t.seq,
        payload,
    })
}

/// The IPv4 id at `ip_off`.
fn ipv4_id(f: &[u8], ip_off: usize) -> u16 {
    u16::from_be_bytes([f[ip_off + 4], f[ip_off + 5]])
}

/// True when segment `seg` may be appended to frame `sup` (see the module docs). Pure; never
/// panics.
pub fn joinable(sup: &[u8], seg: &[u8], size: u16) -> bool {
    plan(sup, seg, size).is_some()
}

/// Checks the rules and returns the frame's and the segment's parsed headers.
fn plan(sup: &[u8], seg: &[u8], size: u16) -> Option<(Tcp, Tcp)> {
    let size = usize::from(size);
    if size == 0 {
        return None;
    }
    let a = tcp_of(sup)?;
    let b = tcp_of(seg)?;
    if a.v6 != b.v6 || a.ip_off != b.ip_off || a.l4_off != b.l4_off || a.hdr_end != b.hdr_end {
        return None;
    }
    if a.payload == 0 || a.payload % size != 0 || b.payload == 0 || b.payload > size {
        return None;
    }
    let ends = (tcp_flags::FIN | tcp_flags::PSH | tcp_flags::SYN | tcp_flags::RST) as u8;
    let never = (tcp_flags::SYN | tcp_flags::RST | tcp_flags::URG) as u8;
    if a.flags & (ends | tcp_flags::URG as u8) != 0 || b.flags & (never | tcp_flags::CWR as u8) != 0
    {
        return None;
    }
    let last_only = (tcp_flags::FIN | tcp_flags::PSH) as u8;
    if a.flags & !(tcp_flags::CWR as u8) != b.flags & !last_only {
        return None;
    }
    if b.seq != a.seq.wrapping_add(a.payload as u32) {
        return None;
    }
    let segments = a.payload / size;
    if !a.v6 && ipv4_id(seg, b.ip_off) != ipv4_id(sup, a.ip_off).wrapping_add(segments as u16) {
        return None;
    }
    // The joined IP length field must fit.
    let ip_field = if a.v6 {
        a.hdr_end - a.ip_off - 40
    } else {
        a.hdr_end - a.ip_off
    };
    if ip_field + a.payload + b.payload > usize::from(u16::MAX) {
        return None;
    }
    // Headers equal but for the fields segmentation rewrites.
    let (ip, l4) = (a.ip_off, a.l4_off);
    let skip = |i: usize| {
        let ip_fields = if a.v6 {
            (ip + 4..ip + 6).contains(&i)
        } else {
            (ip + 2..ip + 6).contains(&i) || (ip + 10..ip + 12).contains(&i)
        };
        ip_fields
            || (l4 + 4..l4 + 8).contains(&i)
            || i == l4 + 13
            || (l4 + 16..l4 + 18).contains(&i)
    };
    let same = sup[..a.hdr_end]
        .iter()
        .zip(&seg[..a.hdr_end])
        .enumerate()
        .all(|(i, (x, y))| x == y || skip(i));
    same.then_some((a, b))
}

/// Appends segment `seg`'s payload to frame `sup` when [`joinable`] says it may, fixing `sup`'s
/// IP length and carrying the segment's PSH/FIN; returns whether it did (`sup` is unchanged
/// otherwise). `sup`'s checksums are stale until [`finish`].
pub fn join(sup: &mut Vec<u8>, seg: &[u8], size: u16) -> bool {
    let Some((a, b)) = plan(sup, seg, size) else {
        return false;
    };
    sup.extend_from_slice(&seg[b.hdr_end..]);
    let payload = a.payload + b.payload;
    // In bounds: `plan` parsed both headers in full, and checked that the length fits.
    if a.v6 {
        let plen = (a.hdr_end - a.ip_off - 40 + payload) as u16;
        sup[a.ip_off + 4..a.ip_off + 6].copy_from_slice(&plen.to_be_bytes());
    } else {
        let tot = (a.hdr_end - a.ip_off + payload) as u16;
        sup[a.ip_off + 2..a.ip_off + 4].copy_from_slice(&tot.to_be_bytes());
    }
    sup[a.l4_off + 13] |= b.flags & (tcp_flags::FIN | tcp_flags::PSH) as u8;
    true
}

/// Prepares a frame built by [`join`] for a GSO send (IPv4 header checksum; TCP checksum field
/// holding the folded pseudo-header sum, to be completed per segment) and says where its
/// headers lie. `None` (frame unchanged) when it is not a TCP frame [`join`] could have built.
pub fn finish(f: &mut [u8], size: u16) -> Option<Joined> {
    let t = tcp_of(f)?;
    let joined = Joined {
        v6: t.v6,
        l4_offset: u16::try_from(t.l4_off).ok()?,
        hdr_len: u16::try_from(t.hdr_end).ok()?,
        size,
        cwr: t.flags & tcp_flags::CWR as u8 != 0,
    };
    if !t.v6 {
        let ihl = usize::from(f[t.ip_off] & 0x0f) * 4;
        f[t.ip_off + 10..t.ip_off + 12].copy_from_slice(&[0, 0]);
        let c = checksum(0, &f[t.ip_off..t.ip_off + ihl]);
        f[t.ip_off + 10..t.ip_off + 12].copy_from_slice(&c.to_be_bytes());
    }
    let l4_len = (t.hdr_end - t.l4_off + t.payload) as u64;
    // checksum() complements the folded sum; the partial checksum is the folded sum itself.
    let partial = !checksum(
        pseudo_header_sum(f, t.ip_off, t.v6, IPPROTO_TCP, l4_len),
        &[],
    );
    f[t.l4_off + 16..t.l4_off + 18].copy_from_slice(&partial.to_be_bytes());
    Some(joined)
}
