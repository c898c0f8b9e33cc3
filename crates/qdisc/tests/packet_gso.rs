//! GSO software segmentation.
mod packet_oracle;

use std::net::IpAddr;

use qdisc::packet::{segment, tcp_flags, FrameSpec, Gso, GsoKind, Headers, Packet, PacketMeta};

fn ip(s: &str) -> IpAddr {
    s.parse().expect("address")
}

fn gso(mut p: Packet, kind: GsoKind, size: u16) -> Packet {
    p.meta.gso = Some(Gso { kind, size });
    p.meta.tag = 42;
    p.meta.mark = 7;
    p
}

/// A payload with distinct bytes so misplaced copies are caught.
fn with_pattern(mut p: Packet, hdr_end: usize) -> Packet {
    for (i, b) in p.data[hdr_end..].iter_mut().enumerate() {
        *b = (i % 251) as u8;
    }
    // The transport checksum is now stale; segment() recomputes it for every segment.
    p
}

fn segs(p: Packet) -> Vec<Packet> {
    let mut out = Vec::new();
    segment(p, &mut out);
    out
}

#[test]
fn tcp_v4_super_packet_is_cut_into_mss_segments_with_fixed_headers() {
    let spec = FrameSpec::tcp(ip("10.0.0.1"), ip("10.0.0.2"), 5000, 80)
        .with_seq_ack(0xffff_f000, 99)
        .with_tcp_flags(tcp_flags::ACK | tcp_flags::PSH | tcp_flags::FIN | tcp_flags::CWR)
        .with_tcp_options(vec![1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2])
        .with_payload(4000);
    let mut p = with_pattern(spec.packet(), 14 + 20 + 32);
    p.data[18..20].copy_from_slice(&0xfffeu16.to_be_bytes()); // IPv4 id, to test wrapping
    let original = p.data.clone();
    let out = segs(gso(p, GsoKind::TcpV4, 1448));
    assert_eq!(out.len(), 3);
    let mut payload = Vec::new();
    for (i, s) in out.iter().enumerate() {
        packet_oracle::assert_checksums_ok(&s.data);
        assert_eq!(
            s.meta,
            PacketMeta {
                tag: 42,
                mark: 7,
                ..PacketMeta::default()
            }
        );
        let h = s.headers();
        let tcp = h.tcp.expect("tcp");
        let want_len = if i < 2 { 1448 } else { 4000 - 2 * 1448 };
        assert_eq!(tcp.payload_len, want_len);
        assert_eq!(s.data.len(), 66 + want_len as usize);
        assert_eq!(tcp.seq, 0xffff_f000u32.wrapping_add(1448 * i as u32));
        assert_eq!(tcp.ack, 99);
        let id = u16::from_be_bytes([s.data[18], s.data[19]]);
        assert_eq!(id, 0xfffeu16.wrapping_add(i as u16));
        assert_eq!(tcp.flags & tcp_flags::ACK, tcp_flags::ACK);
        assert_eq!(
            tcp.flags & tcp_flags::CWR != 0,
            i == 0,
            "CWR only on the first"
        );
        assert_eq!(
            tcp.flags & (tcp_flags::FIN | tcp_flags::PSH) != 0,
            i == 2,
            "FIN/PSH last"
        );
        assert_eq!(s.data[..14], original[..14]);
        assert_eq!(
            s.data[14 + 20 + 20..66],
            original[14 + 20 + 20..66],
            "options copied"
        );
        payload.extend_from_slice(&s.data[66..]);
    }
    assert_eq!(payload, original[66..], "payload reassembles in order");
}

#[test]
fn tcp_v6_super_packet_segments_with_payload_length_and_vlan() {
    let spec = FrameSpec::tcp(ip("2001:db8::1"), ip("2001:db8::2"), 5000, 80)
        .with_vlan(3)
        .with_seq_ack(1000, 1)
        .with_payload(3000);
    let p = with_pattern(spec.packet(), 18 + 40 + 20);
    let original = p.data.clone();
    let out = segs(gso(p, GsoKind::TcpV6, 1000));
    assert_eq!(out.len(), 3);
    for (i, s) in out.iter().enumerate() {
        packet_oracle::assert_checksums_ok(&s.data);
        let h = s.headers();
        assert_eq!(h.network_offset, 18);
        assert_eq!(h.ip.expect("ip").ip_len, 40 + 20 + 1000);
        assert_eq!(h.tcp.expect("tcp").seq, 1000 + 1000 * i as u32);
        assert_eq!(s.data[78..], original[78 + 1000 * i..78 + 1000 * (i + 1)]);
    }
}

#[test]
fn udp_super_packet_becomes_complete_datagrams() {
    for (src, dst) in [("10.0.0.1", "10.0.0.2"), ("2001:db8::1", "2001:db8::2")] {
        let p = FrameSpec::udp(ip(src), ip(dst), 443, 50000)
            .with_payload(2500)
            .packet();
        let out = segs(gso(p, GsoKind::Udp, 1200));
        let lens: Vec<usize> = out.iter().map(|s| s.data.len()).collect();
        let hdr = if src.contains(':') {
            14 + 40 + 8
        } else {
            14 + 20 + 8
        };
        assert_eq!(lens, vec![hdr + 1200, hdr + 1200, hdr + 100]);
        for s in &out {
            let p = packet_oracle::assert_checksums_ok(&s.data);
            match p.transport {
                Some(etherparse::TransportSlice::Udp(u)) => {
                    assert_eq!(usize::from(u.length()), s.data.len() - hdr + 8);
                }
                other => panic!("{other:?}"),
            }
        }
    }
}

#[test]
fn padded_super_packet_splits_pad_across_segments() {
    // 100 materialised payload bytes, 2900 more as pad: 3000 in all, MSS 1000.
    let spec = FrameSpec::tcp(ip("10.0.0.1"), ip("10.0.0.2"), 1, 2).with_payload(100);
    let mut p = spec.packet();
    p.meta.pad = 2900;
    let total_len = p.len();
    let out = segs(gso(p, GsoKind::TcpV4, 1000));
    assert_eq!(out.len(), 3);
    assert_eq!(out.iter().map(|s| s.len()).sum::<u32>(), total_len + 2 * 54);
    assert_eq!(out[0].data.len(), 54 + 100);
    assert_eq!(out[0].meta.pad, 900);
    for s in &out[1..] {
        assert_eq!((s.data.len(), s.meta.pad), (54, 1000));
    }
    for s in &out {
        assert_eq!(s.headers().tcp.expect("tcp").payload_len, 1000);
        // The checksum equals that of the materialised segment (pad counts as zeros).
        let mut full = s.data.clone();
        full.resize(s.data.len() + s.meta.pad as usize, 0);
        packet_oracle::assert_checksums_ok(&full);
    }
}

#[test]
fn fully_padded_udp_super_packet_segments_without_copying() {
    let p = FrameSpec::udp(ip("10.0.0.1"), ip("10.0.0.2"), 1, 2)
        .with_payload(3000)
        .packet_padded();
    let out = segs(gso(p, GsoKind::Udp, 1472));
    let pads: Vec<u32> = out.iter().map(|s| s.meta.pad).collect();
    assert_eq!(pads, vec![1472, 1472, 56]);
    assert!(out.iter().all(|s| s.data.len() == 42));
}

#[test]
fn packets_that_cannot_be_segmented_are_passed_through_unchanged() {
    let v4 = FrameSpec::tcp(ip("10.0.0.1"), ip("10.0.0.2"), 1, 2)
        .with_payload(3000)
        .packet();
    let udp = FrameSpec::udp(ip("10.0.0.1"), ip("10.0.0.2"), 1, 2)
        .with_payload(3000)
        .packet();
    let cases = vec![
        v4.clone(),                            // no GSO descriptor
        gso(v4.clone(), GsoKind::TcpV4, 0),    // size 0
        gso(v4.clone(), GsoKind::TcpV6, 1000), // wrong family
        gso(v4.clone(), GsoKind::Udp, 1000),   // wrong protocol
        gso(udp.clone(), GsoKind::TcpV4, 1000),
        gso(Packet::new(vec![1, 2, 3]), GsoKind::TcpV4, 1000), // not IP
    ];
    for p in cases {
        assert_eq!(segs(p.clone()), vec![p]);
    }
}

#[test]
fn super_packet_smaller_than_mss_becomes_one_fixed_segment() {
    let p = FrameSpec::tcp(ip("10.0.0.1"), ip("10.0.0.2"), 1, 2)
        .with_tcp_flags(tcp_flags::ACK | tcp_flags::FIN | tcp_flags::CWR)
        .with_payload(500)
        .packet();
    let out = segs(gso(p.clone(), GsoKind::TcpV4, 1448));
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].data, p.data);
    assert_eq!(out[0].meta.gso, None);
}

#[test]
fn ipv4_lengths_of_super_packets_over_64k_are_fixed_per_segment() {
    // The builder saturates the super-packet's IPv4 total length at 65535; segmentation
    // computes each segment's length from the bytes actually present.
    let p = FrameSpec::tcp(ip("10.0.0.1"), ip("10.0.0.2"), 1, 2)
        .with_payload(70_000)
        .packet();
    let out = segs(gso(p, GsoKind::TcpV4, 1448));
    assert_eq!(out.len(), 70_000usize.div_ceil(1448));
    let mut seen = 0u32;
    for s in &out {
        packet_oracle::assert_checksums_ok(&s.data);
        let h = s.headers();
        assert_eq!(h.ip.expect("ip").ip_len as usize, s.data.len() - 14);
        assert_eq!(h.tcp.expect("tcp").seq, seen);
        seen += h.tcp.expect("tcp").payload_len;
    }
    assert_eq!(seen, 70_000);
    assert_eq!(
        Headers::parse(&out[0].data).tcp.expect("tcp").payload_len,
        1448
    );
}

/// Cutting into pooled buffers gives the same segments as exact allocations (bytes and
/// metadata), takes each segment's buffer from the pool, and gives the super-packet's buffer
/// back to it; a packet that is not cut keeps its buffer and takes none.
#[test]
fn segments_cut_into_pooled_buffers_equal_exact_ones_and_the_super_packet_is_recycled() {
    use qdisc::packet::{segment_with, Buffers, Pool};
    let spec = FrameSpec::tcp(ip("10.0.0.1"), ip("10.0.0.2"), 5000, 80)
        .with_tcp_options(vec![1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2])
        .with_payload(10 * 1448 + 100);
    let mut pool = Pool::default();
    // A pooled super-packet buffer, and one earlier segment-sized buffer to be reused.
    let len = spec.build().len();
    let mut buf = pool.take(len);
    buf.extend_from_slice(&spec.build());
    let super_ptr = buf.as_ptr();
    let reused = pool.take(66 + 1448);
    let reused_ptr = reused.as_ptr();
    pool.recycle(reused);
    let p = gso(with_pattern(Packet::new(buf), 66), GsoKind::TcpV4, 1448);
    let exact = segs(p.clone());
    let mut pooled = Vec::new();
    segment_with(p, &mut pooled, &mut pool);
    assert_eq!(pooled.len(), 11);
    for (a, b) in pooled.iter().zip(&exact) {
        assert_eq!((&a.data, a.meta), (&b.data, b.meta));
        assert_eq!(b.data.capacity(), b.data.len(), "exact allocation");
        assert!(a.data.capacity() >= a.data.len() && a.data.capacity() <= 2 * a.data.len());
    }
    assert!(
        pooled.iter().any(|s| s.data.as_ptr() == reused_ptr),
        "the free segment buffer was not reused"
    );
    let again = pool.take(len);
    assert_eq!(
        again.as_ptr(),
        super_ptr,
        "super-packet buffer not recycled"
    );

    let plain = FrameSpec::udp(ip("10.0.0.1"), ip("10.0.0.2"), 1, 2).packet();
    let mut out = Vec::new();
    segment_with(plain.clone(), &mut out, &mut pool);
    assert_eq!(out, vec![plain]);
}
