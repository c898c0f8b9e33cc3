//! Header parsing: every supported layer, cross-checked against etherparse where it can parse
//! the frame, and truncated / malformed / random frames that must never panic.
mod packet_oracle;

use std::net::IpAddr;

use etherparse::{NetSlice, SlicedPacket, TransportSlice};
use proptest::prelude::*;
use qdisc::packet::{tcp_flags, FlowTuple, FrameSpec, Headers, NetKind};

fn v4(s: &str) -> IpAddr {
    s.parse().expect("address")
}

fn mapped(a: IpAddr) -> [u8; 16] {
    match a {
        IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
        IpAddr::V6(a) => a.octets(),
    }
}

/// Replaces the ethertype at 12..14 with `prefix` (which ends in its own ethertype) + the old
/// ethertype's payload: used to insert VLAN tags or a PPPoE header.
fn insert_after_macs(frame: &[u8], insert: &[u8]) -> Vec<u8> {
    let mut f = frame[..12].to_vec();
    f.extend_from_slice(insert);
    f.extend_from_slice(&frame[14..]);
    f
}

/// Inserts IPv6 extension headers `exts` (each: next-header placeholder byte then the rest,
/// sized correctly) after the IPv6 header at 14, chaining next-header values.
fn with_ipv6_exts(frame: &[u8], exts: &[(u8, Vec<u8>)]) -> Vec<u8> {
    let ip = 14;
    let mut f = frame[..ip + 40].to_vec();
    let mut next = f[ip + 6];
    let mut chain = Vec::new();
    for (i, (kind, body)) in exts.iter().enumerate().rev() {
        let mut b = body.clone();
        b[0] = next;
        next = *kind;
        chain.push((i, b));
    }
    chain.reverse();
    f[ip + 6] = next;
    let added: usize = chain.iter().map(|(_, b)| b.len()).sum();
    let plen = u16::from_be_bytes([f[ip + 4], f[ip + 5]]) as usize + added;
    f[ip + 4..ip + 6].copy_from_slice(&(plen as u16).to_be_bytes());
    for (_, b) in chain {
        f.extend_from_slice(&b);
    }
    f.extend_from_slice(&frame[ip + 40..]);
    f
}

fn ipv4_checksum(h: &[u8]) -> u16 {
    let mut s: u32 = 0;
    for w in h.chunks(2) {
        s += u32::from(u16::from_be_bytes([w[0], w[1]]));
    }
    while s >> 16 != 0 {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

/// A 6in4 frame: an IPv4 header (protocol 41, TOS `tos`) wrapped around the IPv6 packet of
/// `inner` (an Ethernet+IPv6 frame).
fn six_in_four(inner: &[u8], tos: u8) -> Vec<u8> {
    let v6 = &inner[14..];
    let mut f = inner[..12].to_vec();
    f.extend_from_slice(&[0x08, 0x00]);
    let total = (20 + v6.len()) as u16;
    let mut h = vec![0x45, tos];
    h.extend_from_slice(&total.to_be_bytes());
    h.extend_from_slice(&[0, 0, 0x40, 0, 64, 41, 0, 0, 192, 0, 2, 1, 192, 0, 2, 2]);
    let c = ipv4_checksum(&h);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&h);
    f.extend_from_slice(v6);
    f
}

fn tcp_v4() -> FrameSpec {
    FrameSpec::tcp(v4("10.0.0.1"), v4("10.0.0.2"), 40000, 443)
}

fn tcp_v6() -> FrameSpec {
    FrameSpec::tcp(v4("2001:db8::1"), v4("2001:db8::2"), 40000, 443)
}

/// Cross-checks our parse of `frame` against etherparse for plain Ethernet/VLAN frames.
fn cross_check(frame: &[u8]) {
    let h = Headers::parse(frame);
    let p = SlicedPacket::from_ethernet(frame).expect("etherparse parses it");
    let ip = h.ip.expect("ip parsed");
    match &p.net {
        Some(NetSlice::Ipv4(s)) => {
            assert_eq!(h.kind, NetKind::Ipv4);
            let hd = s.header();
            assert_eq!(ip.tuple.src, mapped(IpAddr::from(hd.source())));
            assert_eq!(ip.tuple.dst, mapped(IpAddr::from(hd.destination())));
            assert_eq!(ip.tuple.proto, hd.protocol().0);
            assert_eq!(ip.dscp, hd.dcp().value());
            assert_eq!(ip.ecn, hd.ecn().value());
            assert_eq!(ip.ip_len, u32::from(hd.total_len()));
        }
        Some(NetSlice::Ipv6(s)) => {
            assert_eq!(h.kind, NetKind::Ipv6);
            let hd = s.header();
            assert_eq!(ip.tuple.src, hd.source());
            assert_eq!(ip.tuple.dst, hd.destination());
            assert_eq!(ip.dscp << 2 | ip.ecn, hd.traffic_class());
            assert_eq!(ip.ip_len, 40 + u32::from(hd.payload_length()));
        }
        other => panic!("unexpected {other:?}"),
    }
    match &p.transport {
        Some(TransportSlice::Tcp(t)) => {
            let tcp = h.tcp.expect("tcp parsed");
            assert_eq!(ip.tuple.src_port, t.source_port());
            assert_eq!(ip.tuple.dst_port, t.destination_port());
            assert_eq!(tcp.seq, t.sequence_number());
            assert_eq!(tcp.ack, t.acknowledgment_number());
            assert_eq!(usize::from(tcp.header_len), t.header_len());
            assert_eq!(tcp.payload_len as usize, t.payload().len());
            let f = tcp.flags;
            assert_eq!(f & tcp_flags::FIN != 0, t.fin());
            assert_eq!(f & tcp_flags::SYN != 0, t.syn());
            assert_eq!(f & tcp_flags::RST != 0, t.rst());
            assert_eq!(f & tcp_flags::PSH != 0, t.psh());
            assert_eq!(f & tcp_flags::ACK != 0, t.ack());
            assert_eq!(f & tcp_flags::URG != 0, t.urg());
            assert_eq!(f & tcp_flags::ECE != 0, t.ece());
            assert_eq!(f & tcp_flags::CWR != 0, t.cwr());
            assert_eq!(f & tcp_flags::AE != 0, t.ns());
        }
        Some(TransportSlice::Udp(u)) => {
            assert!(h.tcp.is_none());
            assert_eq!(ip.tuple.src_port, u.source_port());
            assert_eq!(ip.tuple.dst_port, u.destination_port());
        }
        Some(TransportSlice::Icmpv4(_)) | Some(TransportSlice::Icmpv6(_)) => {
            assert!(h.tcp.is_none());
            assert_eq!((ip.tuple.src_port, ip.tuple.dst_port), (0, 0));
        }
        other => panic!("unexpected {other:?}"),
    }
}

fn sample_specs() -> Vec<FrameSpec> {
    let mut v = Vec::new();
    for (s, d) in [
        ("10.1.2.3", "192.168.7.9"),
        ("2001:db8::a", "fe80::1234:5678"),
    ] {
        let (s, d) = (v4(s), v4(d));
        v.push(
            FrameSpec::tcp(s, d, 1, 65535)
                .with_payload(1448)
                .with_dscp_ecn(46, 2),
        );
        v.push(
            FrameSpec::tcp(s, d, 5201, 33000)
                .with_tcp_flags(tcp_flags::SYN | tcp_flags::ECE | tcp_flags::CWR | tcp_flags::AE)
                .with_seq_ack(0xdead_beef, 7)
                .with_tcp_options(vec![
                    2, 4, 5, 0xb4, 4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0, 1, 3, 3, 7,
                ]),
        );
        v.push(
            FrameSpec::tcp(s, d, 80, 81)
                .with_tcp_flags(0x1ff)
                .with_vlan(42)
                .with_payload(3),
        );
        v.push(
            FrameSpec::udp(s, d, 53, 5353)
                .with_payload(100)
                .with_tos(0xff),
        );
        v.push(FrameSpec::udp(s, d, 9, 9).with_vlan(4095));
        v.push(
            FrameSpec::icmp_echo(s, d, 77, 3)
                .with_payload(56)
                .with_dscp_ecn(8, 1),
        );
    }
    v
}

#[test]
fn built_frames_parse_identically_to_etherparse_and_have_valid_checksums() {
    for spec in sample_specs() {
        let f = spec.build();
        packet_oracle::assert_checksums_ok(&f);
        cross_check(&f);
        let h = Headers::parse(&f);
        let ip = h.ip.expect("ip");
        assert_eq!(h.network_offset, if spec.vlan.is_some() { 18 } else { 14 });
        assert_eq!(ip.outer_offset, ip.inner_offset);
        assert_eq!(ip.tuple.src, mapped(spec.src));
        assert_eq!(ip.tuple.dst, mapped(spec.dst));
        assert_eq!(ip.dscp << 2 | ip.ecn, spec.tos);
        assert_eq!(ip.ip_len as usize, f.len() - usize::from(h.network_offset));
        if let Some(tcp) = h.tcp {
            assert_eq!(tcp.payload_len as usize, spec.payload_len);
        }
    }
}

#[test]
fn built_ipv4_header_has_ttl_64_and_df() {
    let f = tcp_v4().build();
    assert_eq!(f[14], 0x45);
    assert_eq!(f[14 + 6] & 0x40, 0x40, "DF");
    assert_eq!(f[14 + 8], 64, "TTL");
    let f6 = tcp_v6().build();
    assert_eq!(f6[14 + 7], 64, "hop limit");
}

#[test]
fn tcp_options_are_padded_to_a_multiple_of_four() {
    let f = tcp_v4().with_tcp_options(vec![2, 4, 5, 0xb4, 1]).build();
    let h = Headers::parse(&f);
    assert_eq!(h.tcp.expect("tcp").header_len, 28);
    packet_oracle::assert_checksums_ok(&f);
}

#[test]
fn padded_packet_has_header_only_data_and_the_same_headers() {
    let spec = tcp_v4().with_payload(1000);
    let full = spec.packet();
    let lazy = spec.packet_padded();
    assert_eq!(lazy.meta.pad, 1000);
    assert_eq!(lazy.len(), full.len());
    assert_eq!(lazy.data[..], full.data[..full.data.len() - 1000]);
    assert_eq!(lazy.headers(), full.headers());
    assert_eq!(lazy.headers().tcp.expect("tcp").payload_len, 1000);
}

#[test]
fn mixed_families_take_the_destination_family() {
    let f = FrameSpec::udp(v4("10.0.0.1"), v4("2001:db8::2"), 1, 2).build();
    let h = Headers::parse(&f);
    assert_eq!(h.kind, NetKind::Ipv6);
    assert_eq!(h.ip.expect("ip").tuple.src, mapped(v4("10.0.0.1")));
    packet_oracle::assert_checksums_ok(&f);
}

#[test]
fn qinq_tags_of_any_depth_are_skipped() {
    let base = tcp_v4().with_payload(10).build();
    let want = Headers::parse(&base).ip.expect("ip").tuple;
    for depth in 1..=8usize {
        let mut ins = Vec::new();
        for i in 0..depth {
            let tpid: u16 = if i == 0 {
                0x88a8
            } else if i % 2 == 0 {
                0x9100
            } else {
                0x8100
            };
            ins.extend_from_slice(&tpid.to_be_bytes());
            ins.extend_from_slice(&(i as u16 + 1).to_be_bytes());
        }
        ins.extend_from_slice(&[0x08, 0x00]);
        let f = insert_after_macs(&base, &ins);
        let h = Headers::parse(&f);
        assert_eq!(h.network_offset as usize, 14 + 4 * depth, "depth {depth}");
        assert_eq!(h.ip.expect("ip").tuple, want);
        assert_eq!(h.tcp.expect("tcp").payload_len, 10);
    }
}

#[test]
fn too_many_vlan_tags_is_not_ip() {
    let base = tcp_v4().build();
    let mut ins = Vec::new();
    for _ in 0..9 {
        ins.extend_from_slice(&[0x81, 0x00, 0, 1]);
    }
    ins.extend_from_slice(&[0x08, 0x00]);
    let f = insert_after_macs(&base, &ins);
    let h = Headers::parse(&f);
    assert_eq!(h.kind, NetKind::Other);
    assert!(h.ip.is_none());
    assert_eq!(usize::from(h.network_offset), f.len());
}

fn pppoe(base: &[u8], ppp_proto: u16, vlan: bool) -> Vec<u8> {
    let mut ins = Vec::new();
    if vlan {
        ins.extend_from_slice(&[0x81, 0x00, 0x00, 0x07]);
    }
    ins.extend_from_slice(&[0x88, 0x64, 0x11, 0x00, 0x12, 0x34]);
    let plen = (base.len() - 14 + 2) as u16;
    ins.extend_from_slice(&plen.to_be_bytes());
    ins.extend_from_slice(&ppp_proto.to_be_bytes());
    insert_after_macs(base, &ins)
}

#[test]
fn pppoe_session_ipv4_and_ipv6_are_parsed_after_eight_bytes() {
    for (spec, proto, kind) in [
        (tcp_v4(), 0x0021u16, NetKind::Ipv4),
        (tcp_v6(), 0x0057, NetKind::Ipv6),
    ] {
        let base = spec.with_dscp_ecn(10, 3).with_payload(20).build();
        let want = Headers::parse(&base).ip.expect("ip");
        for vlan in [false, true] {
            let f = pppoe(&base, proto, vlan);
            let h = Headers::parse(&f);
            assert_eq!(h.kind, kind);
            assert_eq!(h.network_offset, if vlan { 26 } else { 22 });
            let ip = h.ip.expect("ip");
            assert_eq!((ip.tuple, ip.dscp, ip.ecn), (want.tuple, 10, 3));
            assert_eq!(h.tcp.expect("tcp").payload_len, 20);
        }
    }
}

#[test]
fn pppoe_with_non_ip_ppp_protocol_is_other() {
    let f = pppoe(&tcp_v4().build(), 0xc021, false); // LCP
    let h = Headers::parse(&f);
    assert_eq!(h.kind, NetKind::Other);
    assert_eq!(usize::from(h.network_offset), f.len());
}

#[test]
fn arp_is_recognised_with_its_network_offset() {
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&[2, 0, 0, 0, 0, 1, 0x08, 0x06]);
    f.extend_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
    f.extend_from_slice(&[0; 20]);
    let h = Headers::parse(&f);
    assert_eq!(h.kind, NetKind::Arp);
    assert_eq!(h.network_offset, 14);
    assert!(h.ip.is_none() && h.tcp.is_none());
}

#[test]
fn unknown_ethertype_has_network_offset_equal_to_frame_length() {
    let mut f = tcp_v4().build();
    f[12..14].copy_from_slice(&[0x88, 0xcc]); // LLDP
    let h = Headers::parse(&f);
    assert_eq!(
        h,
        Headers {
            network_offset: f.len() as u16,
            ..Headers::default()
        }
    );
}

#[test]
fn six_in_four_takes_tuple_from_inner_ipv6_and_dscp_from_outer_ipv4() {
    let inner = tcp_v6().with_dscp_ecn(46, 0).with_payload(100).build();
    let want = Headers::parse(&inner).ip.expect("ip").tuple;
    let f = six_in_four(&inner, (10 << 2) | 2);
    let h = Headers::parse(&f);
    assert_eq!(h.kind, NetKind::Ipv4);
    let ip = h.ip.expect("ip");
    assert_eq!(
        (ip.outer_offset, ip.inner_offset, ip.inner_version),
        (14, 34, 6)
    );
    assert_eq!(ip.tuple, want);
    assert_eq!((ip.dscp, ip.ecn), (10, 2));
    assert_eq!(ip.ip_len as usize, f.len() - 14);
    let tcp = h.tcp.expect("tcp");
    assert_eq!(tcp.offset, 74);
    assert_eq!(tcp.payload_len, 100);
}

#[test]
fn six_in_four_with_truncated_inner_header_falls_back_to_outer_tuple() {
    let inner = tcp_v6().build();
    let f = six_in_four(&inner, 0);
    let f = &f[..14 + 20 + 30];
    let h = Headers::parse(f);
    let ip = h.ip.expect("ip");
    assert_eq!((ip.inner_offset, ip.inner_version), (14, 4));
    assert_eq!(ip.tuple.proto, 41);
    assert_eq!(ip.tuple.src, mapped(v4("192.0.2.1")));
    assert!(h.tcp.is_none());
}

/// An IPv4 frame with `opt_words` 4-byte words of options (NOP-filled) inserted.
fn ipv4_with_options(spec: FrameSpec, opt_words: usize) -> Vec<u8> {
    let base = spec.build();
    let mut f = base[..34].to_vec();
    f[14] = 0x45 + opt_words as u8;
    let total = u16::from_be_bytes([f[16], f[17]]) + 4 * opt_words as u16;
    f[16..18].copy_from_slice(&total.to_be_bytes());
    f.extend(std::iter::repeat_n(1u8, 4 * opt_words));
    f[24..26].copy_from_slice(&[0, 0]);
    let c = ipv4_checksum(&f[14..34 + 4 * opt_words]);
    f[24..26].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&base[34..]);
    f
}

#[test]
fn ipv4_options_move_the_transport_header() {
    for words in 1..=10 {
        let f = ipv4_with_options(tcp_v4().with_payload(7), words);
        cross_check(&f);
        let tcp = Headers::parse(&f).tcp.expect("tcp");
        assert_eq!(usize::from(tcp.offset), 34 + 4 * words);
        assert_eq!(tcp.payload_len, 7);
    }
}

fn set_frag(f: &mut [u8], field: u16) {
    f[20..22].copy_from_slice(&field.to_be_bytes());
    f[24..26].copy_from_slice(&[0, 0]);
    let c = ipv4_checksum(&f[14..34]);
    f[24..26].copy_from_slice(&c.to_be_bytes());
}

#[test]
fn ipv4_non_first_fragment_has_no_ports_and_no_tcp() {
    let mut f = tcp_v4().with_payload(64).build();
    set_frag(&mut f, 0x2000 | 185); // MF, offset 1480
    let h = Headers::parse(&f);
    let ip = h.ip.expect("ip");
    assert_eq!(
        (ip.tuple.proto, ip.tuple.src_port, ip.tuple.dst_port),
        (6, 0, 0)
    );
    assert!(h.tcp.is_none());
}

#[test]
fn ipv4_first_fragment_still_has_ports() {
    let mut f = FrameSpec::udp(v4("10.0.0.1"), v4("10.0.0.2"), 7, 8)
        .with_payload(64)
        .build();
    set_frag(&mut f, 0x2000);
    let ip = Headers::parse(&f).ip.expect("ip");
    assert_eq!((ip.tuple.src_port, ip.tuple.dst_port), (7, 8));
}

fn ext(len: usize) -> Vec<u8> {
    let mut b = vec![0u8; len];
    b[1] = (len / 8 - 1) as u8;
    b
}

#[test]
fn ipv6_extension_headers_are_followed_to_the_transport() {
    let base = tcp_v6().with_payload(33).build();
    let want = Headers::parse(&base).ip.expect("ip").tuple;
    let mut ah = vec![0u8; 24];
    ah[1] = 4; // (4 + 2) * 4 = 24 bytes
    let frag_first = vec![0, 0, 0x00, 0x01, 0, 0, 0, 9]; // offset 0, MF
    let exts = vec![
        (0u8, ext(8)),
        (43, ext(24)),
        (44, frag_first),
        (51, ah),
        (60, ext(16)),
    ];
    let f = with_ipv6_exts(&base, &exts);
    let h = Headers::parse(&f);
    let ip = h.ip.expect("ip");
    assert_eq!(ip.tuple, want);
    assert_eq!(ip.ip_len as usize, f.len() - 14);
    let tcp = h.tcp.expect("tcp");
    assert_eq!(usize::from(tcp.offset), 14 + 40 + 8 + 24 + 8 + 24 + 16);
    assert_eq!(tcp.payload_len, 33);
    // etherparse agrees on the addresses and ports of a simpler chain.
    cross_check(&with_ipv6_exts(&base, &[(0, ext(8)), (60, ext(8))]));
}

#[test]
fn ipv6_non_first_fragment_takes_the_fragment_next_header_without_ports() {
    let base = tcp_v6().with_payload(33).build();
    let frag = vec![0, 0, 0x05, 0xc8, 0, 0, 0, 9]; // offset 185 * 8
    let h = Headers::parse(&with_ipv6_exts(&base, &[(44, frag)]));
    let ip = h.ip.expect("ip");
    assert_eq!(
        (ip.tuple.proto, ip.tuple.src_port, ip.tuple.dst_port),
        (6, 0, 0)
    );
    assert!(h.tcp.is_none());
}

#[test]
fn ipv6_stops_at_esp_and_no_next_header() {
    let base = FrameSpec::udp(v4("2001:db8::1"), v4("2001:db8::2"), 1, 2).build();
    for nh in [50u8, 59, 253] {
        let mut f = base.clone();
        f[14 + 6] = nh;
        let h = Headers::parse(&f);
        let ip = h.ip.expect("ip");
        assert_eq!(
            (ip.tuple.proto, ip.tuple.src_port, ip.tuple.dst_port),
            (nh, 0, 0)
        );
    }
}

#[test]
fn ipv6_extension_chain_longer_than_the_limit_is_cut_without_ports() {
    let base = tcp_v6().build();
    let exts: Vec<(u8, Vec<u8>)> = (0..9).map(|_| (60u8, ext(8))).collect();
    let h = Headers::parse(&with_ipv6_exts(&base, &exts));
    let ip = h.ip.expect("ip");
    assert_eq!((ip.tuple.src_port, ip.tuple.dst_port), (0, 0));
    assert!(h.tcp.is_none());
}

#[test]
fn tcp_flags_include_ae_and_reserved_bits() {
    let mut f = tcp_v4().build();
    f[14 + 20 + 12] |= 0x0f; // reserved bits + AE
    f[14 + 20 + 13] = 0xff;
    assert_eq!(Headers::parse(&f).tcp.expect("tcp").flags, 0xfff);
}

#[test]
fn ethernet_padding_does_not_count_as_tcp_payload() {
    let mut f = tcp_v4().build(); // 54 bytes
    f.resize(60, 0);
    let h = Headers::parse(&f);
    assert_eq!(h.tcp.expect("tcp").payload_len, 0);
    assert_eq!(h.ip.expect("ip").ip_len, 40);
}

#[test]
fn tcp_with_bad_data_offset_keeps_ports_but_has_no_tcp_info() {
    let mut f = tcp_v4().build();
    f[14 + 20 + 12] = 0x40; // data offset 4 (< 5)
    let h = Headers::parse(&f);
    assert_eq!(h.ip.expect("ip").tuple.dst_port, 443);
    assert!(h.tcp.is_none());
    f[14 + 20 + 12] = 0xf0; // 60 bytes, past the end
    assert!(Headers::parse(&f).tcp.is_none());
}

#[test]
fn wrong_ip_version_is_other() {
    let mut f = tcp_v4().build();
    f[14] = 0x65;
    assert_eq!(Headers::parse(&f).kind, NetKind::Other);
    let mut f = tcp_v4().build();
    f[14] = 0x44; // IHL 4
    assert!(Headers::parse(&f).ip.is_none());
}

fn complex_frames() -> Vec<Vec<u8>> {
    let mut ah = vec![0u8; 16];
    ah[1] = 2;
    let v6 = tcp_v6()
        .with_tcp_options(vec![1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2])
        .with_payload(5);
    vec![
        with_ipv6_exts(&pppoe(&v6.build(), 0x0057, true), &[]),
        insert_after_macs(
            &with_ipv6_exts(&v6.build(), &[(0, ext(8)), (51, ah), (44, vec![0; 8])]),
            &[0x88, 0xa8, 0, 1, 0x81, 0, 0, 2, 0x86, 0xdd],
        ),
        six_in_four(&v6.build(), 3),
        pppoe(
            &ipv4_with_options(tcp_v4().with_payload(3), 3),
            0x0021,
            false,
        ),
    ]
}

#[test]
fn every_prefix_of_complex_frames_parses_to_a_consistent_subset() {
    for full in complex_frames() {
        let whole = Headers::parse(&full);
        assert!(whole.tcp.is_some(), "the full frame parses through to TCP");
        for n in 0..=full.len() {
            let h = Headers::parse(&full[..n]);
            assert!(usize::from(h.network_offset) <= n);
            if let Some(ip) = h.ip {
                assert_eq!(ip.outer_offset, whole.ip.expect("ip").outer_offset);
                assert_eq!(
                    (ip.dscp, ip.ecn),
                    (whole.ip.expect("ip").dscp, whole.ip.expect("ip").ecn)
                );
            }
            if let Some(tcp) = h.tcp {
                assert!(usize::from(tcp.offset + tcp.header_len) <= n);
                assert_eq!(h.ip.expect("ip").tuple, whole.ip.expect("ip").tuple);
                assert_eq!(
                    (tcp.seq, tcp.flags),
                    (whole.tcp.expect("t").seq, whole.tcp.expect("t").flags)
                );
            }
        }
    }
}

proptest! {
    #[test]
    fn parse_never_panics_on_random_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let h = Headers::parse(&bytes);
        prop_assert!(usize::from(h.network_offset) <= bytes.len());
    }

    #[test]
    fn parse_never_panics_on_mutated_frames(
        which in 0usize..4,
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..8),
        cut in any::<usize>(),
    ) {
        let mut f = complex_frames().swap_remove(which);
        for (at, v) in flips {
            let i = at % f.len();
            f[i] = v;
        }
        let n = cut % (f.len() + 1);
        let h = Headers::parse(&f[..n]);
        if let Some(t) = h.tcp {
            prop_assert!(usize::from(t.offset) + usize::from(t.header_len) <= n);
        }
    }
}

#[test]
fn flow_tuple_of_ipv4_is_ipv4_mapped() {
    let ip = Headers::parse(&tcp_v4().build()).ip.expect("ip");
    assert_eq!(
        ip.tuple,
        FlowTuple {
            src: mapped(v4("10.0.0.1")),
            dst: mapped(v4("10.0.0.2")),
            proto: 6,
            src_port: 40000,
            dst_port: 443
        }
    );
}
