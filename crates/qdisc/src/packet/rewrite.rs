//! In-place rewriting of DSCP and ECN in the outer IP header.
//!
//! IPv4 header checksums are updated incrementally (RFC 1624, eqn. 3: `HC' = ~(~HC + ~m + m')`)
//! so the cost is constant; IPv6 has no header checksum. Transport checksums do not cover the
//! TOS / traffic class byte and stay valid.
use super::{Headers, NetKind};

/// Rewrites the outer DSCP (masked to 6 bits), keeping ECN and the IPv4 header checksum correct,
/// and returns true. Returns false (and changes nothing) for non-IP frames or when the outer IP
/// header is not inside `frame`. `headers` must come from parsing `frame`.
pub fn set_dscp(frame: &mut [u8], headers: &Headers, dscp: u8) -> bool {
    let Some(ip) = headers.ip else {
        return false;
    };
    let off = usize::from(ip.outer_offset);
    match headers.kind {
        NetKind::Ipv4 => {
            let Some(&tos) = frame.get(off + 1) else {
                return false;
            };
            set_ipv4_tos(frame, off, ((dscp & 0x3f) << 2) | (tos & 3))
        }
        NetKind::Ipv6 => {
            let Some(tc) = ipv6_tc(frame, off) else {
                return false;
            };
            set_ipv6_tc(frame, off, ((dscp & 0x3f) << 2) | (tc & 3))
        }
        NetKind::Arp | NetKind::Other => false,
    }
}

/// Sets ECN CE on an ECN-capable (ECT(0), ECT(1) or already CE) IP packet, keeping the IPv4
/// checksum correct, and returns true. Returns false for Not-ECT and non-IP frames (the caller
/// then drops instead of marking). The ECN field is read from `frame` itself, not `headers`.
pub fn mark_ce(frame: &mut [u8], headers: &Headers) -> bool {
    let Some(ip) = headers.ip else {
        return false;
    };
    let off = usize::from(ip.outer_offset);
    match headers.kind {
        NetKind::Ipv4 => match frame.get(off + 1) {
            Some(&tos) if tos & 3 != 0 => set_ipv4_tos(frame, off, tos | 3),
            _ => false,
        },
        NetKind::Ipv6 => match ipv6_tc(frame, off) {
            Some(tc) if tc & 3 != 0 => set_ipv6_tc(frame, off, tc | 3),
            _ => false,
        },
        NetKind::Arp | NetKind::Other => false,
    }
}

/// Writes the IPv4 TOS byte at `off + 1` and patches the header checksum at `off + 10`.
fn set_ipv4_tos(frame: &mut [u8], off: usize, tos: u8) -> bool {
    let Some(h) = frame.get_mut(off..off + 12) else {
        return false;
    };
    let old_word = u16::from_be_bytes([h[0], h[1]]);
    let new_word = u16::from_be_bytes([h[0], tos]);
    let hc = u16::from_be_bytes([h[10], h[11]]);
    // RFC 1624 eqn. 3 in 32-bit ones-complement arithmetic.
    let mut sum = u32::from(!hc) + u32::from(!old_word) + u32::from(new_word);
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    let new_hc = !(sum as u16);
    h[1] = tos;
    h[10..12].copy_from_slice(&new_hc.to_be_bytes());
    true
}

/// Reads the IPv6 traffic class (split across the first two header bytes).
fn ipv6_tc(frame: &[u8], off: usize) -> Option<u8> {
    match frame.get(off..off + 2) {
        Some(&[a, b]) => Some((a << 4) | (b >> 4)),
        _ => None,
    }
}

fn set_ipv6_tc(frame: &mut [u8], off: usize, tc: u8) -> bool {
    match frame.get_mut(off..off + 2) {
        Some([a, b]) => {
            *a = (*a & 0xf0) | (tc >> 4);
            *b = (*b & 0x0f) | (tc << 4);
            true
        }
        _ => false,
    }
}
