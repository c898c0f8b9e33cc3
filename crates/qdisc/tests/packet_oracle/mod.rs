//! An independent oracle for the packet tests: etherparse validates the checksums and fields of
//! frames we build, rewrite and segment.
#![allow(dead_code)]

use etherparse::{NetSlice, SlicedPacket, TransportSlice};

/// Parses `frame` with etherparse and asserts every checksum in it (IPv4 header, TCP, UDP,
/// ICMP, ICMPv6) is correct. Returns the sliced packet for further checks.
pub fn assert_checksums_ok(frame: &[u8]) -> SlicedPacket<'_> {
    let p = SlicedPacket::from_ethernet(frame).expect("etherparse accepts the frame");
    let (v4, v6) = match &p.net {
        Some(NetSlice::Ipv4(ip)) => {
            let h = ip.header();
            assert_eq!(
                h.header_checksum(),
                h.to_header().calc_header_checksum(),
                "IPv4 header checksum"
            );
            (Some((h.source(), h.destination())), None)
        }
        Some(NetSlice::Ipv6(ip)) => {
            let h = ip.header();
            (None, Some((h.source(), h.destination())))
        }
        other => panic!("not IP: {other:?}"),
    };
    match &p.transport {
        Some(TransportSlice::Tcp(t)) => {
            let want = match (v4, v6) {
                (Some((s, d)), _) => t.calc_checksum_ipv4(s, d).expect("fits"),
                (_, Some((s, d))) => t.calc_checksum_ipv6(s, d).expect("fits"),
                _ => unreachable!(),
            };
            assert_eq!(t.checksum(), want, "TCP checksum");
        }
        Some(TransportSlice::Udp(u)) => {
            let h = u.to_header();
            let want = match (v4, v6) {
                (Some((s, d)), _) => h.calc_checksum_ipv4_raw(s, d, u.payload()).expect("fits"),
                (_, Some((s, d))) => h.calc_checksum_ipv6_raw(s, d, u.payload()).expect("fits"),
                _ => unreachable!(),
            };
            assert_eq!(u.checksum(), want, "UDP checksum");
        }
        Some(TransportSlice::Icmpv4(i)) => {
            let h = i.header();
            assert_eq!(
                h.checksum,
                h.icmp_type.calc_checksum(i.payload()),
                "ICMP checksum"
            );
        }
        Some(TransportSlice::Icmpv6(i)) => {
            let (s, d) = v6.expect("ICMPv6 over IPv6");
            assert!(i.is_checksum_valid(s, d), "ICMPv6 checksum");
        }
        other => panic!("unexpected transport {other:?}"),
    }
    p
}
