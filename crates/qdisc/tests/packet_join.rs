//! Rejoining segments into a super-packet: the inverse of GSO segmentation.
mod packet_oracle;

use std::net::IpAddr;

use proptest::prelude::*;
use qdisc::packet::{
    finish_joined, join, joinable, segment, tcp_flags, FrameSpec, Gso, GsoKind, Packet,
};

fn ip(s: &str) -> IpAddr {
    s.parse().expect("address")
}

/// Cuts `p` (given a GSO descriptor of `size`) into its segments.
fn segs(mut p: Packet, kind: GsoKind, size: u16) -> Vec<Packet> {
    p.meta.gso = Some(Gso { kind, size });
    let mut out = Vec::new();
    segment(p, &mut out);
    out
}

/// What a NIC or the kernel does with a partial checksum: sum from `l4` to the end, the field
/// (holding the pseudo-header sum) included, and store the complement.
fn complete_checksum(f: &mut [u8], l4: usize) {
    let mut s: u64 = 0;
    for w in f[l4..].chunks(2) {
        s += u64::from(u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)]));
    }
    while s >> 16 != 0 {
        s = (s & 0xffff) + (s >> 16);
    }
    let c = !(s as u16);
    f[l4 + 16..l4 + 18].copy_from_slice(&c.to_be_bytes());
}

/// Joins every segment onto the first, asserting each join is accepted.
fn join_all(parts: &[Packet], size: u16) -> Vec<u8> {
    let mut sup = parts[0].data.clone();
    for s in &parts[1..] {
        assert!(joinable(&sup, &s.data, size));
        assert!(join(&mut sup, &s.data, size));
    }
    sup
}

fn patterned(spec: &FrameSpec, hdr_end: usize) -> Packet {
    let mut p = spec.packet();
    for (i, b) in p.data[hdr_end..].iter_mut().enumerate() {
        *b = (i % 251) as u8;
    }
    p
}

#[test]
fn segments_of_a_v4_super_packet_join_back_into_it() {
    let flags = tcp_flags::ACK | tcp_flags::PSH | tcp_flags::FIN | tcp_flags::CWR;
    let spec = FrameSpec::tcp(ip("10.0.0.1"), ip("10.0.0.2"), 5000, 80)
        .with_seq_ack(0xffff_f000, 99)
        .with_tcp_flags(flags)
        .with_dscp_ecn(10, 2)
        .with_tcp_options(vec![1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2])
        .with_payload(4000);
    let mut p = patterned(&spec, 66);
    p.data[18..20].copy_from_slice(&0xfffeu16.to_be_bytes()); // IPv4 id wraps mid-way
    let original = p.data.clone();
    let parts = segs(p, GsoKind::TcpV4, 1448);
    assert_eq!(parts.len(), 3);
    let mut sup = join_all(&parts, 1448);
    let j = finish_joined(&mut sup, 1448).expect("a joined TCP frame");
    assert_eq!(
        (j.v6, j.l4_offset, j.hdr_len, j.size, j.cwr),
        (false, 34, 66, 1448, true)
    );
    complete_checksum(&mut sup, 34);
    packet_oracle::assert_checksums_ok(&sup);
    // The original's IPv4 checksum is stale (its id was changed after building it).
    assert_eq!(
        sup[..24],
        original[..24],
        "Ethernet and IPv4 up to its checksum"
    );
    assert_eq!(
        sup[26..50],
        original[26..50],
        "IPv4 addresses and TCP up to its checksum"
    );
    assert_eq!(sup[52..], original[52..], "options and payload");
    // Segmenting the joined frame gives back exactly the segments.
    let again = segs(Packet::new(sup), GsoKind::TcpV4, 1448);
    assert_eq!(
        again.iter().map(|s| &s.data).collect::<Vec<_>>(),
        parts.iter().map(|s| &s.data).collect::<Vec<_>>()
    );
}

#[test]
fn segments_of_a_v6_vlan_super_packet_join_back_into_it() {
    let spec = FrameSpec::tcp(ip("2001:db8::1"), ip("2001:db8::2"), 5000, 80)
        .with_vlan(3)
        .with_seq_ack(1000, 1)
        .with_tcp_flags(tcp_flags::ACK | tcp_flags::PSH)
        .with_payload(3500);
    let p = patterned(&spec, 78);
    let parts = segs(p, GsoKind::TcpV6, 1000);
    assert_eq!(parts.len(), 4);
    let mut sup = join_all(&parts, 1000);
    let j = finish_joined(&mut sup, 1000).expect("joined");
    assert_eq!((j.v6, j.l4_offset, j.hdr_len, j.cwr), (true, 58, 78, false));
    complete_checksum(&mut sup, 58);
    packet_oracle::assert_checksums_ok(&sup);
    let again = segs(Packet::new(sup), GsoKind::TcpV6, 1000);
    assert_eq!(
        again.iter().map(|s| &s.data).collect::<Vec<_>>(),
        parts.iter().map(|s| &s.data).collect::<Vec<_>>()
    );
}

#[test]
fn segments_that_segmentation_could_not_have_produced_are_refused() {
    let spec = FrameSpec::tcp(ip("10.0.0.1"), ip("10.0.0.2"), 5000, 80)
        .with_seq_ack(1, 1)
        .with_payload(3 * 1000);
    let parts = segs(spec.packet(), GsoKind::TcpV4, 1000);
    let (a, b, c) = (&parts[0].data, &parts[1].data, &parts[2].data);
    assert!(joinable(a, b, 1000));
    // Out of order, or a gap.
    assert!(!joinable(a, c, 1000));
    assert!(!joinable(b, a, 1000));
    // Another flow.
    let other = segs(
        FrameSpec::tcp(ip("10.0.0.1"), ip("10.0.0.2"), 5001, 80)
            .with_seq_ack(1001, 1)
            .with_payload(1000)
            .packet(),
        GsoKind::TcpV4,
        1000,
    );
    let mut o = other[0].data.clone();
    o[18..20].copy_from_slice(&a[18..20]);
    o[19] = o[19].wrapping_add(1);
    assert!(!joinable(a, &o, 1000));
    // A CE mark on one segment only (ECN bits of the IPv4 TOS byte).
    let mut ce = b.clone();
    ce[15] |= 3;
    assert!(!joinable(a, &ce, 1000));
    // A different ACK number.
    let mut ack = b.clone();
    ack[34 + 11] ^= 1;
    assert!(!joinable(a, &ack, 1000));
    // A wrong IPv4 id.
    let mut id = b.clone();
    id[19] ^= 0x40;
    assert!(!joinable(a, &id, 1000));
    // A different segment size than the frame's.
    assert!(!joinable(a, b, 999));
    assert!(!joinable(a, b, 0));
    // PSH or FIN on the frame ends it; SYN, RST or CWR on the segment.
    for (on_frame, bit) in [
        (true, tcp_flags::PSH),
        (true, tcp_flags::FIN),
        (false, tcp_flags::SYN),
        (false, tcp_flags::RST),
        (false, tcp_flags::CWR),
    ] {
        let (mut x, mut y) = (a.clone(), b.clone());
        if on_frame {
            x[34 + 13] |= bit as u8;
        } else {
            y[34 + 13] |= bit as u8;
        }
        assert!(!joinable(&x, &y, 1000), "flag {bit:#x}");
    }
    // A short segment can only be last.
    let short = segs(
        FrameSpec::tcp(ip("10.0.0.1"), ip("10.0.0.2"), 5000, 80)
            .with_seq_ack(1, 1)
            .with_payload(1500)
            .packet(),
        GsoKind::TcpV4,
        1000,
    );
    let mut sup = short[0].data.clone();
    assert!(join(&mut sup, &short[1].data, 1000));
    let mut next = c.clone();
    next[34 + 4..34 + 8].copy_from_slice(&1501u32.to_be_bytes());
    next[19] = sup[19].wrapping_add(2);
    assert!(!joinable(&sup, &next, 1000));
    // A refused join leaves the frame alone.
    let before = a.clone();
    let mut x = a.clone();
    assert!(!join(&mut x, c, 1000));
    assert_eq!(x, before);
    // Not TCP at all.
    let udp = FrameSpec::udp(ip("10.0.0.1"), ip("10.0.0.2"), 1, 2)
        .with_payload(100)
        .build();
    assert!(!joinable(&udp, &udp, 100));
    assert!(finish_joined(&mut udp.clone(), 100).is_none());
}

#[test]
fn a_join_stops_before_the_ip_length_overflows() {
    let spec = FrameSpec::tcp(ip("10.0.0.1"), ip("10.0.0.2"), 5000, 80)
        .with_seq_ack(1, 1)
        .with_payload(70 * 1000);
    let parts = segs(spec.packet(), GsoKind::TcpV4, 1000);
    assert_eq!(parts.len(), 70);
    let mut sup = parts[0].data.clone();
    let mut joined = 1;
    for s in &parts[1..] {
        if !join(&mut sup, &s.data, 1000) {
            break;
        }
        joined += 1;
    }
    // 20 + 20 + 65 * 1000 fits 65,535; one more would not.
    assert_eq!(joined, 65);
    assert_eq!(u16::from_be_bytes([sup[16], sup[17]]), 40 + 65_000);
}

proptest! {
    /// Any TCP super-packet, segmented and joined back greedily, is one frame again that
    /// segments into the same segments.
    #[test]
    fn segment_then_join_is_the_identity(
        payload in 1usize..20_000,
        size in 200u16..2000,
        v6 in any::<bool>(),
        psh in any::<bool>(),
        cwr in any::<bool>(),
        seq in any::<u32>(),
    ) {
        let (src, dst, kind) = if v6 {
            (ip("2001:db8::1"), ip("2001:db8::2"), GsoKind::TcpV6)
        } else {
            (ip("10.0.0.1"), ip("10.0.0.2"), GsoKind::TcpV4)
        };
        let mut flags = tcp_flags::ACK;
        if psh { flags |= tcp_flags::PSH; }
        if cwr { flags |= tcp_flags::CWR; }
        let spec = FrameSpec::tcp(src, dst, 7, 9)
            .with_seq_ack(seq, 5)
            .with_tcp_flags(flags)
            .with_payload(payload);
        let hdr_end = if v6 { 74 } else { 54 };
        let parts = segs(patterned(&spec, hdr_end), kind, size);
        let sup = join_all(&parts, size);
        let again = segs(Packet::new(sup), kind, size);
        prop_assert_eq!(
            again.iter().map(|s| &s.data).collect::<Vec<_>>(),
            parts.iter().map(|s| &s.data).collect::<Vec<_>>()
        );
    }
}
