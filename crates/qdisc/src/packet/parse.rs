//! Header parsing: plain offset arithmetic over the frame slice, no allocation.
//!
//! Every read goes through [`slice::get`], so a truncated or malformed frame can never cause an
//! out-of-bounds access; parsing simply stops at the last layer that could be read in full.
//!
//! Layers understood: Ethernet II, any number (up to [`MAX_VLAN_TAGS`]) of 802.1Q / 802.1ad /
//! legacy 0x9100 VLAN tags, PPPoE session (PPP IPv4 / IPv6), ARP, IPv4 (options, fragments),
//! IPv6 (hop-by-hop, routing, fragment, destination options and AH extension headers), 6in4
//! (IPv4 protocol 41 carrying IPv6), and TCP, UDP, UDP-Lite, SCTP and DCCP ports.
//!
//! Outcomes for partial frames: if the link layer cannot be read, the ethertype (or PPP
//! protocol) is not ARP/IPv4/IPv6, or the IP header is truncated or has a bad version / IHL, the
//! result is [`NetKind::Other`] with `network_offset` = frame length and no `ip`. If the IP
//! header is complete but the transport header is not, `ip` is present with ports 0 (ports are
//! read whenever their 4 bytes are present) and `tcp` is `None`. A 6in4 frame whose inner IPv6
//! header is truncated reports the outer IPv4 tuple (protocol 41). Lengths (`ip_len`,
//! `payload_len`) come from the IP length fields and are not checked against the frame length.
use super::{FlowHeaders, FlowIp, FlowTuple, FlowV4, Headers, IpInfo, NetKind, TcpInfo};

/// The most VLAN tags skipped before giving up (a sane bound against tag floods).
pub(crate) const MAX_VLAN_TAGS: usize = 8;
/// The most IPv6 extension headers followed before giving up.
pub(crate) const MAX_IPV6_EXT: usize = 8;

const ETH_HLEN: usize = 14;
const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86DD;
const ETHERTYPE_ARP: u16 = 0x0806;
const ETHERTYPE_VLAN: u16 = 0x8100;
const ETHERTYPE_QINQ: u16 = 0x88A8;
const ETHERTYPE_QINQ_OLD: u16 = 0x9100;
const ETHERTYPE_PPPOE_SESSION: u16 = 0x8864;
const PPP_IPV4: u16 = 0x0021;
const PPP_IPV6: u16 = 0x0057;
/// PPPoE header (6 bytes) plus the PPP protocol field (2 bytes).
const PPPOE_HLEN: usize = 8;

pub(crate) const IPPROTO_HOPOPTS: u8 = 0;
pub(crate) const IPPROTO_TCP: u8 = 6;
pub(crate) const IPPROTO_UDP: u8 = 17;
const IPPROTO_DCCP: u8 = 33;
const IPPROTO_IPV6: u8 = 41;
const IPPROTO_ROUTING: u8 = 43;
const IPPROTO_FRAGMENT: u8 = 44;
const IPPROTO_AH: u8 = 51;
const IPPROTO_DSTOPTS: u8 = 60;
const IPPROTO_SCTP: u8 = 132;
const IPPROTO_UDPLITE: u8 = 136;

/// Reads a big-endian u16 at `off`, or `None` if it is not fully inside `f`.
#[inline(always)]
pub(crate) fn rd16(f: &[u8], off: usize) -> Option<u16> {
    match f.get(off..off.checked_add(2)?) {
        Some(&[a, b]) => Some(u16::from_be_bytes([a, b])),
        _ => None,
    }
}

/// Reads a big-endian u32 at `off`, or `None` if it is not fully inside `f`.
#[inline(always)]
pub(crate) fn rd32(f: &[u8], off: usize) -> Option<u32> {
    match f.get(off..off.checked_add(4)?) {
        Some(&[a, b, c, d]) => Some(u32::from_be_bytes([a, b, c, d])),
        _ => None,
    }
}

#[inline(always)]
fn to_u16(x: usize) -> u16 {
    x.min(u16::MAX as usize) as u16
}

/// Finds the network header: returns (offset, ethertype-like kind) after skipping VLAN tags and
/// PPPoE, or `None` if the link layer could not be read.
#[inline(always)]
fn link_layer(f: &[u8]) -> Option<(usize, u16)> {
    let mut off = ETH_HLEN;
    let mut ethertype = rd16(f, 12)?;
    let mut tags = 0;
    while matches!(
        ethertype,
        ETHERTYPE_VLAN | ETHERTYPE_QINQ | ETHERTYPE_QINQ_OLD
    ) {
        if tags == MAX_VLAN_TAGS {
            return None;
        }
        tags += 1;
        // Tag: TCI (2 bytes) then the next ethertype (2 bytes).
        ethertype = rd16(f, off + 2)?;
        off += 4;
    }
    if ethertype == ETHERTYPE_PPPOE_SESSION {
        // ver/type, code, session id (2), length (2), PPP protocol (2).
        let proto = rd16(f, off + 6)?;
        off += PPPOE_HLEN;
        ethertype = match proto {
            PPP_IPV4 => ETHERTYPE_IPV4,
            PPP_IPV6 => ETHERTYPE_IPV6,
            _ => return None,
        };
    }
    Some((off, ethertype))
}

/// The result of reading one IP header.
struct IpHdr {
    /// DSCP << 2 | ECN.
    tos: u8,
    /// Datagram length by the header's length field(s).
    ip_len: u32,
    /// Offset of the transport header (after options / extension headers).
    l4_off: usize,
    /// The transport protocol (or the last next-header value reached).
    proto: u8,
    /// False for non-first fragments and when the extension chain could not be followed to
    /// a transport header: ports must not be read.
    l4_valid: bool,
    src: [u8; 16],
    dst: [u8; 16],
}

#[inline(always)]
fn mapped_v4(b: [u8; 4]) -> [u8; 16] {
    // ::ffff:a.b.c.d, built as one integer (byte-wise array literals compile to one store per
    // byte on the per-packet path), little-endian so that no byte is swapped: the address is
    // bytes 12..16, the 0xffff bytes 10..12.
    ((u128::from(u32::from_le_bytes(b)) << 96) | (0xffff_u128 << 80)).to_le_bytes()
}

#[inline(always)]
fn addr16(f: &[u8], off: usize) -> Option<[u8; 16]> {
    f.get(off..off + 16)?.try_into().ok()
}

#[inline(always)]
fn ipv4(f: &[u8], off: usize) -> Option<IpHdr> {
    let h: &[u8; 20] = f.get(off..off + 20)?.try_into().ok()?;
    let vihl = h[0];
    if vihl >> 4 != 4 {
        return None;
    }
    let ihl = usize::from(vihl & 0x0f) * 4;
    if ihl < 20 || f.len() < off + ihl {
        return None;
    }
    let frag = u16::from_be_bytes([h[6], h[7]]);
    Some(IpHdr {
        tos: h[1],
        ip_len: u32::from(u16::from_be_bytes([h[2], h[3]])),
        l4_off: off + ihl,
        proto: h[9],
        l4_valid: frag & 0x1fff == 0,
        src: mapped_v4([h[12], h[13], h[14], h[15]]),
        dst: mapped_v4([h[16], h[17], h[18], h[19]]),
    })
}

#[inline(always)]
fn ipv6(f: &[u8], off: usize) -> Option<IpHdr> {
    let h: &[u8; 40] = f.get(off..off + 40)?.try_into().ok()?;
    if h[0] >> 4 != 6 {
        return None;
    }
    let tos = (h[0] << 4) | (h[1] >> 4);
    let payload = u32::from(u16::from_be_bytes([h[4], h[5]]));
    let src = addr16(f, off + 8)?;
    let dst = addr16(f, off + 24)?;
    let mut next = h[6];
    let mut l4 = off + 40;
    let mut l4_valid = true;
    let mut hops = 0;
    loop {
        let len = match next {
            IPPROTO_HOPOPTS | IPPROTO_ROUTING | IPPROTO_DSTOPTS => {
                f.get(l4 + 1).map(|&l| (usize::from(l) + 1) * 8)
            }
            IPPROTO_AH => f.get(l4 + 1).map(|&l| (usize::from(l) + 2) * 4),
            IPPROTO_FRAGMENT => {
                // A non-first fragment has no transport header: take its protocol, no ports.
                match rd16(f, l4 + 2) {
                    Some(fo) if fo >> 3 != 0 => {
                        if let Some(&n) = f.get(l4) {
                            next = n;
                        }
                        l4_valid = false;
                        break;
                    }
                    Some(_) => Some(8),
                    None => None,
                }
            }
            _ => break,
        };
        // The whole extension header must be present before we step over it.
        match len {
            Some(len) if hops < MAX_IPV6_EXT && l4 + len <= f.len() => {
                // Bounds checked above (len >= 8 > 0 means l4 < f.len()).
                next = f.get(l4).copied().unwrap_or(next);
                l4 += len;
                hops += 1;
            }
            _ => {
                l4_valid = false;
                break;
            }
        }
    }
    Some(IpHdr {
        tos,
        ip_len: 40 + payload,
        l4_off: l4,
        proto: next,
        l4_valid,
        src,
        dst,
    })
}

/// The IP layer of the common case (see [`parse_fast`]), before any result is built.
struct FastIp {
    kind: NetKind,
    tos: u8,
    ip_len: u32,
    proto: u8,
    /// Offset of the transport header.
    l4: usize,
    src: [u8; 16],
    dst: [u8; 16],
    src_port: u16,
    dst_port: u16,
}

/// The common case's network and transport ports: an untagged Ethernet II frame with an
/// option-less, unfragmented IPv4 header, or an IPv6 header without extension headers,
/// carrying TCP or UDP with both ports present. `None` for anything else.
#[inline(always)]
fn fast_ip(f: &[u8]) -> Option<FastIp> {
    let eth: &[u8; ETH_HLEN] = f.get(..ETH_HLEN)?.try_into().ok()?;
    let (kind, tos, ip_len, proto, l4, src, dst) = match u16::from_be_bytes([eth[12], eth[13]]) {
        ETHERTYPE_IPV4 => {
            // IPv4 header (20 bytes, IHL 5) plus the two ports.
            let h: &[u8; 24] = f.get(ETH_HLEN..ETH_HLEN + 24)?.try_into().ok()?;
            let frag = u16::from_be_bytes([h[6], h[7]]);
            if h[0] != 0x45 || frag & 0x1fff != 0 {
                return None;
            }
            (
                NetKind::Ipv4,
                h[1],
                u32::from(u16::from_be_bytes([h[2], h[3]])),
                h[9],
                ETH_HLEN + 20,
                mapped_v4([h[12], h[13], h[14], h[15]]),
                mapped_v4([h[16], h[17], h[18], h[19]]),
            )
        }
        ETHERTYPE_IPV6 => {
            // IPv6 header (40 bytes) plus the two ports.
            let h: &[u8; 44] = f.get(ETH_HLEN..ETH_HLEN + 44)?.try_into().ok()?;
            if h[0] >> 4 != 6 {
                return None;
            }
            let mut src = [0u8; 16];
            let mut dst = [0u8; 16];
            src.copy_from_slice(&h[8..24]);
            dst.copy_from_slice(&h[24..40]);
            (
                NetKind::Ipv6,
                (h[0] << 4) | (h[1] >> 4),
                40 + u32::from(u16::from_be_bytes([h[4], h[5]])),
                h[6],
                ETH_HLEN + 40,
                src,
                dst,
            )
        }
        _ => return None,
    };
    if proto != IPPROTO_TCP && proto != IPPROTO_UDP {
        return None;
    }
    let p: &[u8; 4] = f.get(l4..l4 + 4)?.try_into().ok()?;
    Some(FastIp {
        kind,
        tos,
        ip_len,
        proto,
        l4,
        src,
        dst,
        src_port: u16::from_be_bytes([p[0], p[1]]),
        dst_port: u16::from_be_bytes([p[2], p[3]]),
    })
}

/// The common case ([`fast_ip`]), parsed without the general machinery. `None` sends the frame
/// to [`parse`], which gives the same result for frames this accepts (the tests check that).
#[inline(always)]
pub(super) fn parse_fast(f: &[u8]) -> Option<Headers> {
    let ip = fast_ip(f)?;
    let tcp = if ip.proto == IPPROTO_TCP {
        tcp_header(f, ip.l4, ETH_HLEN, ip.ip_len)
    } else {
        None
    };
    Some(Headers {
        network_offset: ETH_HLEN as u16,
        kind: ip.kind,
        ip: Some(IpInfo {
            outer_offset: ETH_HLEN as u16,
            inner_offset: ETH_HLEN as u16,
            inner_version: if ip.kind == NetKind::Ipv4 { 4 } else { 6 },
            tuple: FlowTuple {
                src: ip.src,
                dst: ip.dst,
                proto: ip.proto,
                src_port: ip.src_port,
                dst_port: ip.dst_port,
            },
            dscp: ip.tos >> 2,
            ecn: ip.tos & 3,
            ip_len: ip.ip_len,
        }),
        tcp,
    })
}

/// The common case ([`fast_ip`]) as [`FlowHeaders`], building nothing else. `None` sends the
/// frame to [`parse`] (the result is then the same subset of its [`Headers`]; the tests check
/// that).
#[inline(always)]
pub(super) fn parse_flow_fast(f: &[u8]) -> Option<FlowHeaders> {
    let ip = fast_ip(f)?;
    Some(FlowHeaders {
        network_offset: ETH_HLEN as u16,
        kind: ip.kind,
        ip: Some(FlowIp {
            tuple: FlowTuple {
                src: ip.src,
                dst: ip.dst,
                proto: ip.proto,
                src_port: ip.src_port,
                dst_port: ip.dst_port,
            },
            dscp: ip.tos >> 2,
        }),
    })
}

/// [`FlowV4::parse`]: the IPv4 case of [`fast_ip`], read without building the mapped
/// addresses. `None` for every frame that is not that case.
#[inline(always)]
pub(super) fn parse_flow_v4(f: &[u8]) -> Option<FlowV4> {
    // Ethernet, the IPv4 header (20 bytes, IHL 5) and the two ports.
    let h: &[u8; ETH_HLEN + 24] = f.get(..ETH_HLEN + 24)?.try_into().ok()?;
    if u16::from_be_bytes([h[12], h[13]]) != ETHERTYPE_IPV4 {
        return None;
    }
    let ip = &h[ETH_HLEN..];
    let frag = u16::from_be_bytes([ip[6], ip[7]]);
    if ip[0] != 0x45 || frag & 0x1fff != 0 {
        return None;
    }
    let proto = ip[9];
    if proto != IPPROTO_TCP && proto != IPPROTO_UDP {
        return None;
    }
    Some(FlowV4 {
        src: [ip[12], ip[13], ip[14], ip[15]],
        dst: [ip[16], ip[17], ip[18], ip[19]],
        ports: [ip[20], ip[21], ip[22], ip[23]],
        proto,
        dscp: ip[1] >> 2,
    })
}

/// Parses a frame; see the module docs.
pub(super) fn parse(f: &[u8]) -> Headers {
    let none = Headers {
        network_offset: to_u16(f.len()),
        ..Headers::default()
    };
    let Some((noff, ethertype)) = link_layer(f) else {
        return none;
    };
    let outer = match ethertype {
        ETHERTYPE_IPV4 => ipv4(f, noff),
        ETHERTYPE_IPV6 => ipv6(f, noff),
        ETHERTYPE_ARP if noff < f.len() => {
            return Headers {
                network_offset: to_u16(noff),
                kind: NetKind::Arp,
                ..none
            };
        }
        _ => return none,
    };
    let Some(outer) = outer else {
        return none;
    };
    let kind = if ethertype == ETHERTYPE_IPV4 {
        NetKind::Ipv4
    } else {
        NetKind::Ipv6
    };
    let tos = outer.tos;
    let ip_len = outer.ip_len;

    // 6in4: the tuple comes from the inner IPv6 header when it can be read.
    let (inner_off, inner_version, inner) =
        if kind == NetKind::Ipv4 && outer.proto == IPPROTO_IPV6 && outer.l4_valid {
            match ipv6(f, outer.l4_off) {
                Some(inner) => (outer.l4_off, 6, inner),
                None => (noff, 4, outer),
            }
        } else {
            (noff, if kind == NetKind::Ipv4 { 4 } else { 6 }, outer)
        };

    let mut tuple = FlowTuple {
        src: inner.src,
        dst: inner.dst,
        proto: inner.proto,
        src_port: 0,
        dst_port: 0,
    };
    let mut tcp = None;
    let t = inner.l4_off;
    if inner.l4_valid {
        match inner.proto {
            IPPROTO_TCP | IPPROTO_UDP | IPPROTO_UDPLITE | IPPROTO_SCTP | IPPROTO_DCCP => {
                if let (Some(sp), Some(dp)) = (rd16(f, t), rd16(f, t + 2)) {
                    tuple.src_port = sp;
                    tuple.dst_port = dp;
                }
            }
            _ => {}
        }
        if inner.proto == IPPROTO_TCP {
            tcp = tcp_header(f, t, inner_off, inner.ip_len);
        }
    }

    Headers {
        network_offset: to_u16(noff),
        kind,
        ip: Some(IpInfo {
            outer_offset: to_u16(noff),
            inner_offset: to_u16(inner_off),
            inner_version,
            tuple,
            dscp: tos >> 2,
            ecn: tos & 3,
            ip_len,
        }),
        tcp,
    }
}

/// Reads the TCP header at `t`; `ip_off`/`ip_len` describe the innermost IP datagram.
#[inline(always)]
fn tcp_header(f: &[u8], t: usize, ip_off: usize, ip_len: u32) -> Option<TcpInfo> {
    let h: &[u8; 20] = f.get(t..t + 20)?.try_into().ok()?;
    let doff_flags = u16::from_be_bytes([h[12], h[13]]);
    let header_len = usize::from(doff_flags >> 12) * 4;
    if header_len < 20 || f.len() < t + header_len {
        return None;
    }
    let datagram_end = ip_off as u64 + u64::from(ip_len);
    let payload_len = datagram_end.saturating_sub((t + header_len) as u64);
    Some(TcpInfo {
        offset: to_u16(t),
        header_len: header_len as u16,
        flags: doff_flags & 0x0fff,
        seq: u32::from_be_bytes([h[4], h[5], h[6], h[7]]),
        ack: u32::from_be_bytes([h[8], h[9], h[10], h[11]]),
        payload_len: payload_len.min(u64::from(u32::MAX)) as u32,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::FrameSpec;
    use crate::Rng;
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

    #[test]
    fn mapped_v4_is_the_ipv4_mapped_ipv6_address() {
        let mut rng = Rng::new(7);
        let fixed = [
            [0; 4],
            [255; 4],
            [10, 1, 2, 3],
            [192, 168, 0, 1],
            [1, 0, 0, 0],
        ];
        let random = (0..1000).map(|_| rng.next_u32().to_be_bytes());
        for a in fixed.into_iter().chain(random) {
            assert_eq!(
                mapped_v4(a),
                Ipv4Addr::from(a).to_ipv6_mapped().octets(),
                "{a:?}"
            );
        }
    }

    fn frames() -> Vec<Vec<u8>> {
        let v4 = |a| IpAddr::V4(Ipv4Addr::new(10, 0, 0, a));
        let v6 = |a| IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, a));
        let mut out = Vec::new();
        for (s, d) in [(v4(1), v4(2)), (v6(1), v6(2))] {
            for spec in [
                FrameSpec::tcp(s, d, 1000, 80),
                FrameSpec::udp(s, d, 5000, 53),
                FrameSpec::icmp_echo(s, d, 7, 9),
            ] {
                out.push(spec.clone().build());
                out.push(spec.clone().with_payload(100).with_dscp_ecn(46, 1).build());
                out.push(spec.clone().with_vlan(5).build());
                out.push(spec.clone().with_tcp_options(vec![1, 1, 1, 1]).build());
            }
        }
        out
    }

    /// `FlowV4::parse` takes exactly the IPv4 frames of the flow fast path, with the same
    /// headers; returns whether it took `f`.
    fn check_flow_v4(f: &[u8]) -> bool {
        let v4 = parse_flow_v4(f);
        assert_eq!(
            v4.map(|v| v.headers()),
            parse_flow_fast(f).filter(|h| h.kind == NetKind::Ipv4),
            "{f:?}"
        );
        if let Some(v) = v4 {
            assert_eq!(v.headers(), FlowHeaders::from(&parse(f)), "{f:?}");
        }
        v4.is_some()
    }

    #[test]
    fn fast_path_agrees_with_the_general_parser_on_valid_truncated_and_mutated_frames() {
        let mut rng = Rng::new(42);
        let mut fast_hits = 0;
        let mut v4_hits = 0;
        for frame in frames() {
            for cut in 0..=frame.len() {
                let f = &frame[..cut];
                if let Some(h) = parse_fast(f) {
                    fast_hits += 1;
                    assert_eq!(h, parse(f), "{f:?}");
                }
                assert_eq!(
                    parse_flow_fast(f),
                    parse_fast(f).map(|h| FlowHeaders::from(&h)),
                    "{f:?}"
                );
                assert_eq!(FlowHeaders::parse(f), FlowHeaders::from(&parse(f)), "{f:?}");
                check_flow_v4(f);
            }
            for _ in 0..2000 {
                let mut f = frame.clone();
                for _ in 0..1 + rng.next_u32() % 3 {
                    let i = rng.next_u32() as usize % f.len().min(80);
                    f[i] = rng.next_u32() as u8;
                }
                if let Some(h) = parse_fast(&f) {
                    fast_hits += 1;
                    assert_eq!(h, parse(&f), "{f:?}");
                }
                assert_eq!(
                    FlowHeaders::parse(&f),
                    FlowHeaders::from(&parse(&f)),
                    "{f:?}"
                );
                v4_hits += usize::from(check_flow_v4(&f));
            }
        }
        assert!(fast_hits > 1000, "the fast path is taken: {fast_hits}");
        assert!(v4_hits > 1000, "the IPv4 path is taken: {v4_hits}");
    }
}
