//! DSCP / ECN rewriting and TCP option iteration.
mod packet_oracle;

use std::net::IpAddr;

use proptest::prelude::*;
use qdisc::packet::{mark_ce, set_dscp, FrameSpec, Headers, TcpOption, TcpOptions};

fn ip(s: &str) -> IpAddr {
    s.parse().expect("address")
}

fn specs(tos: u8) -> Vec<FrameSpec> {
    vec![
        FrameSpec::tcp(ip("10.0.0.1"), ip("10.9.8.7"), 1000, 80)
            .with_tos(tos)
            .with_payload(10),
        FrameSpec::udp(ip("172.16.0.1"), ip("10.0.0.2"), 53, 53)
            .with_tos(tos)
            .with_vlan(5),
        FrameSpec::tcp(ip("2001:db8::1"), ip("2001:db8::2"), 1000, 80).with_tos(tos),
        FrameSpec::udp(ip("2001:db8::1"), ip("::1"), 7, 7)
            .with_tos(tos)
            .with_payload(3),
    ]
}

proptest! {
    #[test]
    fn set_dscp_sets_outer_dscp_keeps_ecn_and_checksums(tos in any::<u8>(), dscp in 0u8..64) {
        for spec in specs(tos) {
            let mut f = spec.build();
            let h = Headers::parse(&f);
            prop_assert!(set_dscp(&mut f, &h, dscp));
            let ip = Headers::parse(&f).ip.expect("ip");
            prop_assert_eq!((ip.dscp, ip.ecn), (dscp, tos & 3));
            // The IPv4 header checksum was updated incrementally; etherparse verifies it (and
            // that the transport checksums are untouched).
            packet_oracle::assert_checksums_ok(&f);
            // The result is byte-identical to building with the new TOS directly.
            prop_assert_eq!(f, spec.clone().with_tos((dscp << 2) | (tos & 3)).build());
        }
    }

    #[test]
    fn mark_ce_marks_ect_and_refuses_not_ect(tos in any::<u8>()) {
        for spec in specs(tos) {
            let mut f = spec.build();
            let before = f.clone();
            let h = Headers::parse(&f);
            let ect = tos & 3 != 0;
            prop_assert_eq!(mark_ce(&mut f, &h), ect);
            if ect {
                let ip = Headers::parse(&f).ip.expect("ip");
                prop_assert_eq!((ip.dscp, ip.ecn), (tos >> 2, 3));
                packet_oracle::assert_checksums_ok(&f);
            } else {
                prop_assert_eq!(f, before);
            }
        }
    }
}

#[test]
fn ipv4_checksum_update_handles_the_ffff_edge() {
    // Search a TOS/address combination whose checksum lands on 0x0000/0xffff boundaries by
    // sweeping addresses; the incremental update must agree with a full recomputation.
    for last in 0..=255u8 {
        for tos in [0u8, 0xfc, 0x01, 0xff] {
            let spec = FrameSpec::udp(
                ip("255.255.255.0"),
                ip(&format!("255.255.{last}.255")),
                0,
                0,
            )
            .with_tos(tos);
            let mut f = spec.build();
            let h = Headers::parse(&f);
            assert!(set_dscp(&mut f, &h, 63 - (tos >> 2)));
            packet_oracle::assert_checksums_ok(&f);
        }
    }
}

#[test]
fn ipv6_traffic_class_rewrite_leaves_version_and_flow_label() {
    let mut f = FrameSpec::tcp(ip("2001:db8::1"), ip("2001:db8::2"), 1, 2)
        .with_tos(0x01)
        .build();
    f[14 + 1] |= 0x0a; // flow label bits
    f[14 + 3] = 0x55;
    let h = Headers::parse(&f);
    assert!(set_dscp(&mut f, &h, 0x2e));
    assert_eq!(f[14] >> 4, 6);
    assert_eq!(f[15] & 0x0f, 0x0a);
    assert_eq!(f[17], 0x55);
    assert_eq!((f[14] << 4) | (f[15] >> 4), (0x2e << 2) | 1);
}

#[test]
fn six_in_four_rewrites_the_outer_header_only() {
    let inner = FrameSpec::tcp(ip("2001:db8::1"), ip("2001:db8::2"), 1, 2)
        .with_tos(0xb8)
        .build();
    let mut f = inner[..12].to_vec();
    f.extend_from_slice(&[0x08, 0x00, 0x45, 0x02]);
    f.extend_from_slice(&((20 + inner.len() - 14) as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0, 0x40, 0, 64, 41, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8]);
    f.extend_from_slice(&inner[14..]);
    let h = Headers::parse(&f);
    assert!(mark_ce(&mut f, &h));
    assert!(set_dscp(&mut f, &h, 8));
    assert_eq!(f[15], (8 << 2) | 3);
    assert_eq!(&f[34..], &inner[14..], "inner IPv6 header untouched");
}

#[test]
fn non_ip_frames_are_not_rewritten() {
    let mut f = FrameSpec::tcp(ip("10.0.0.1"), ip("10.0.0.2"), 1, 2)
        .with_tos(3)
        .build();
    f[12..14].copy_from_slice(&[0x08, 0x06]);
    f.truncate(14); // ARP with nothing after the header: not even ARP
    let before = f.clone();
    let h = Headers::parse(&f);
    assert!(!set_dscp(&mut f, &h, 10));
    assert!(!mark_ce(&mut f, &h));
    assert_eq!(f, before);
}

#[test]
fn rewrite_with_headers_of_a_longer_frame_does_not_panic() {
    let long = FrameSpec::tcp(ip("10.0.0.1"), ip("10.0.0.2"), 1, 2)
        .with_tos(3)
        .build();
    let h = Headers::parse(&long);
    for n in 0..20 {
        let mut short = long[..n].to_vec();
        assert!(!set_dscp(&mut short, &h, 1));
        assert!(!mark_ce(&mut short, &h));
    }
}

fn options_of(opts: Vec<u8>) -> Vec<TcpOption> {
    let f = FrameSpec::tcp(ip("10.0.0.1"), ip("10.0.0.2"), 1, 2)
        .with_tcp_options(opts)
        .build();
    let tcp = Headers::parse(&f).tcp.expect("tcp");
    TcpOptions::new(&f, &tcp).collect()
}

#[test]
fn tcp_options_iterates_all_known_kinds() {
    let mut o = vec![1, 2, 4, 0x05, 0xb4, 3, 3, 7, 4, 2, 8, 10];
    o.extend_from_slice(&0x0102_0304u32.to_be_bytes());
    o.extend_from_slice(&0x0506_0708u32.to_be_bytes());
    o.extend_from_slice(&[19, 4, 0, 0, 34, 2, 99, 3, 0]);
    assert_eq!(
        options_of(o),
        vec![
            TcpOption::Nop,
            TcpOption::Mss(1460),
            TcpOption::WindowScale(7),
            TcpOption::SackPermitted,
            TcpOption::Timestamp {
                tsval: 0x0102_0304,
                tsecr: 0x0506_0708
            },
            TcpOption::Md5Sig,
            TcpOption::FastOpen,
            TcpOption::Unknown(99),
            TcpOption::Eol,
        ]
    );
}

#[test]
fn sack_with_one_to_four_blocks() {
    for n in 1..=4u32 {
        let mut o = vec![1, 1, 5, (2 + 8 * n) as u8];
        for i in 0..n {
            o.extend_from_slice(&(i * 100).to_be_bytes());
            o.extend_from_slice(&(i * 100 + 50).to_be_bytes());
        }
        let got = options_of(o);
        let TcpOption::Sack { blocks, n: got_n } = got[2] else {
            panic!("{got:?}")
        };
        assert_eq!(u32::from(got_n), n);
        for (i, b) in blocks.iter().enumerate().take(n as usize) {
            assert_eq!(*b, (i as u32 * 100, i as u32 * 100 + 50));
        }
        assert!(blocks[n as usize..].iter().all(|&b| b == (0, 0)));
    }
}

#[test]
fn eol_ends_the_option_list() {
    assert_eq!(options_of(vec![0, 2, 4, 5, 0xb4]), vec![TcpOption::Eol]);
}

#[test]
fn bad_lengths_yield_malformed_then_stop() {
    for bad in [
        vec![2, 3, 0, 1, 1, 1],                   // MSS length 3
        vec![8, 9, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1], // timestamp length 9
        vec![5, 9, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1], // SACK length 9
        vec![1, 77, 1],                           // length byte 1
        vec![1, 77, 40],                          // runs past the header
        vec![1, 1, 1, 77],                        // missing length byte
    ] {
        let got = options_of(bad.clone());
        assert_eq!(
            got.last(),
            Some(&TcpOption::Malformed),
            "{bad:?} -> {got:?}"
        );
        assert_eq!(
            got.iter().filter(|o| **o == TcpOption::Malformed).count(),
            1
        );
    }
}

#[test]
fn options_out_of_bounds_are_empty() {
    let f = FrameSpec::tcp(ip("10.0.0.1"), ip("10.0.0.2"), 1, 2)
        .with_tcp_options(vec![2, 4, 5, 0xb4])
        .build();
    let tcp = Headers::parse(&f).tcp.expect("tcp");
    assert_eq!(TcpOptions::new(&f[..f.len() - 1], &tcp).count(), 0);
}

proptest! {
    #[test]
    fn option_iteration_terminates_on_random_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..40)) {
        let n = TcpOptions::from_bytes(&bytes).count();
        prop_assert!(n <= bytes.len());
    }
}
