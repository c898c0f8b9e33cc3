//! Behaviour of the TCP ACK filter (`cake::ack_filter::filter`), rule by rule, against frames
//! built with `qdisc::packet::FrameSpec`.

use std::cell::Cell;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use cake::ack_filter::filter;
use cake::AckFilterMode::{self, Aggressive, Filter};
use proptest::prelude::*;
use qdisc::packet::{tcp_flags as f, FrameSpec};

const A4: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
const B4: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));
const C4: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 3));
const A6: IpAddr = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1));
const B6: IpAddr = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2));

/// A pure ACK 10.0.0.1:1000 -> 10.0.0.2:80 acknowledging `ack`.
fn ack(ack: u32) -> FrameSpec {
    FrameSpec::tcp(A4, B4, 1000, 80).with_seq_ack(1, ack)
}

fn ack6(ack: u32) -> FrameSpec {
    FrameSpec::tcp(A6, B6, 1000, 80).with_seq_ack(1, ack)
}

fn flags(spec: FrameSpec, flags: u16) -> FrameSpec {
    spec.with_tcp_flags(flags)
}

fn opts(spec: FrameSpec, options: Vec<u8>) -> FrameSpec {
    spec.with_tcp_options(options)
}

/// NOP NOP TIMESTAMP(tsval, tsecr).
fn ts(tsval: u32, tsecr: u32) -> Vec<u8> {
    let mut o = vec![1, 1, 8, 10];
    o.extend_from_slice(&tsval.to_be_bytes());
    o.extend_from_slice(&tsecr.to_be_bytes());
    o
}

/// NOP NOP SACK(blocks).
fn sack(blocks: &[(u32, u32)]) -> Vec<u8> {
    let mut o = vec![1, 1, 5, 2 + 8 * blocks.len() as u8];
    for &(l, r) in blocks {
        o.extend_from_slice(&l.to_be_bytes());
        o.extend_from_slice(&r.to_be_bytes());
    }
    o
}

fn run(mode: AckFilterMode, queue: &[Vec<u8>], trigger: &[u8]) -> Option<usize> {
    filter(mode, trigger, queue.iter().map(|v| v.as_slice()))
}

fn build(specs: &[FrameSpec]) -> Vec<Vec<u8>> {
    specs.iter().map(FrameSpec::build).collect()
}

/// Whether `cand` is an eligible (droppable) candidate for `trigger`, checked two ways that must
/// agree: aggressive mode with `cand` alone before the trigger, and conservative mode with two
/// copies of it. (Both assume equal ECE/CWR bits.)
fn droppable(cand: &[u8], trigger: &[u8]) -> bool {
    let aggressive = run(Aggressive, &[cand.to_vec()], trigger);
    let conservative = run(Filter, &[cand.to_vec(), cand.to_vec()], trigger);
    assert_eq!(aggressive, conservative, "modes disagree on eligibility");
    assert!(aggressive.is_none() || aggressive == Some(0));
    aggressive == Some(0)
}

/// Wraps an Ethernet + IPv6 frame into Ethernet + IPv4 (protocol 41) + IPv6: 6in4.
fn six_in_four(v6_frame: &[u8], outer_src: [u8; 4], outer_dst: [u8; 4]) -> Vec<u8> {
    let inner = &v6_frame[14..];
    let total = (20 + inner.len()) as u16;
    let mut ip = vec![0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 41, 0, 0];
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    ip.extend_from_slice(&outer_src);
    ip.extend_from_slice(&outer_dst);
    let mut sum: u32 = ip
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], c[1]])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    ip[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    let mut out = v6_frame[..12].to_vec();
    out.extend_from_slice(&[0x08, 0x00]);
    out.extend_from_slice(&ip);
    out.extend_from_slice(inner);
    out
}

/// Inserts an 8-byte hop-by-hop options header between the IPv6 header and TCP.
fn with_hop_by_hop(v6_frame: &[u8]) -> Vec<u8> {
    let mut out = v6_frame.to_vec();
    let next = out[14 + 6];
    out[14 + 6] = 0; // next header: hop-by-hop
    let plen = u16::from_be_bytes([out[18], out[19]]) + 8;
    out[18..20].copy_from_slice(&plen.to_be_bytes());
    let hbh = [next, 0, 1, 4, 0, 0, 0, 0];
    out.splice(54..54, hbh);
    out
}

// ---------------------------------------------------------------------------------------------
// Dropping policy

#[test]
fn conservative_drops_the_oldest_of_two_redundant_pure_acks() {
    let q = build(&[ack(100), ack(200)]);
    assert_eq!(run(Filter, &q, &ack(300).build()), Some(0));
    // A third queued ACK changes nothing: the scan stops at the second eligible one.
    let q = build(&[ack(100), ack(200), ack(250)]);
    assert_eq!(run(Filter, &q, &ack(300).build()), Some(0));
}

#[test]
fn conservative_keeps_a_single_redundant_ack() {
    let q = build(&[ack(100)]);
    assert_eq!(run(Filter, &q, &ack(300).build()), None);
}

#[test]
fn aggressive_drops_a_single_redundant_ack_directly_before_the_trigger() {
    let q = build(&[ack(100)]);
    assert_eq!(run(Aggressive, &q, &ack(300).build()), Some(0));
    // Preceded by other flows' packets: still directly before the trigger.
    let other = FrameSpec::tcp(C4, B4, 1000, 80).with_seq_ack(1, 100);
    let q = build(&[other.clone(), other, ack(100)]);
    assert_eq!(run(Aggressive, &q, &ack(300).build()), Some(2));
}

#[test]
fn aggressive_keeps_a_single_redundant_ack_not_directly_before_the_trigger() {
    let other_flow = FrameSpec::udp(C4, B4, 5000, 5000);
    let q = build(&[ack(100), other_flow]);
    assert_eq!(run(Aggressive, &q, &ack(300).build()), None);
    // Nor when the packet in between is an ineligible segment of the same flow.
    let data = ack(100).with_payload(1000);
    let q = build(&[ack(100), data]);
    assert_eq!(run(Aggressive, &q, &ack(300).build()), None);
}

#[test]
fn aggressive_also_drops_the_oldest_of_two() {
    let q = build(&[ack(100), ack(200)]);
    assert_eq!(run(Aggressive, &q, &ack(300).build()), Some(0));
}

#[test]
fn mode_none_never_filters() {
    let q = build(&[ack(100), ack(200)]);
    assert_eq!(run(AckFilterMode::None, &q, &ack(300).build()), None);
}

#[test]
fn scan_stops_once_the_packet_to_drop_is_known() {
    let q = build(&[ack(100), ack(200), ack(250), ack(260)]);
    let consumed = Cell::new(0);
    let it = q
        .iter()
        .map(|v| v.as_slice())
        .inspect(|_| consumed.set(consumed.get() + 1));
    assert_eq!(filter(Filter, &ack(300).build(), it), Some(0));
    assert_eq!(consumed.get(), 2);
}

// ---------------------------------------------------------------------------------------------
// Cumulative ACK and duplicate ACKs

#[test]
fn duplicate_acks_are_never_filtered() {
    let t = ack(100).build();
    let q = build(&[ack(100), ack(100), ack(100)]);
    assert_eq!(run(Filter, &q, &t), None);
    assert_eq!(run(Aggressive, &q, &t), None);
    // Same with timestamps that advance: the cumulative ACK carries no new information.
    let t = opts(ack(100), ts(50, 7)).build();
    let q = build(&[opts(ack(100), ts(10, 7)), opts(ack(100), ts(20, 7))]);
    assert_eq!(run(Filter, &q, &t), None);
    assert_eq!(run(Aggressive, &q, &t), None);
}

#[test]
fn candidate_acking_more_than_the_trigger_is_kept() {
    assert!(!droppable(&ack(500).build(), &ack(300).build()));
}

#[test]
fn cumulative_ack_comparison_wraps() {
    // u32::MAX - 10 is before 5 in sequence space.
    assert!(droppable(&ack(u32::MAX - 10).build(), &ack(5).build()));
    assert!(!droppable(&ack(5).build(), &ack(u32::MAX - 10).build()));
}

// ---------------------------------------------------------------------------------------------
// Candidate flags and payload

#[test]
fn ack_with_payload_is_kept() {
    let t = ack(300).build();
    assert!(!droppable(&ack(100).with_payload(1).build(), &t));
    // The payload is judged by the IP length field, even when not materialised in the frame.
    assert!(!droppable(
        &ack(100).with_payload(1400).packet_padded().data,
        &t
    ));
}

#[test]
fn candidates_with_psh_fin_syn_rst_urg_ae_or_reserved_flags_are_kept() {
    let t = ack(300).build();
    for extra in [
        f::PSH,
        f::FIN,
        f::SYN,
        f::RST,
        f::URG,
        f::AE,
        0x200,
        0x400,
        0x800,
    ] {
        let c = flags(ack(100), f::ACK | extra).build();
        assert!(
            !droppable(&c, &t),
            "flag {extra:#x} made the candidate droppable"
        );
    }
}

#[test]
fn candidate_without_ack_flag_is_kept() {
    assert!(!droppable(&flags(ack(100), 0).build(), &ack(300).build()));
}

#[test]
fn ece_and_cwr_do_not_make_a_candidate_ineligible() {
    for bits in [f::ECE, f::CWR, f::ECE | f::CWR] {
        let t = flags(ack(300), f::ACK | bits).build();
        assert!(droppable(&flags(ack(100), f::ACK | bits).build(), &t));
    }
}

// ---------------------------------------------------------------------------------------------
// Options

#[test]
fn mss_ws_sack_perm_fastopen_and_unknown_options_make_a_candidate_ineligible() {
    let t = ack(300).build();
    let bad: [Vec<u8>; 6] = [
        vec![2, 4, 0x05, 0xb4],               // MSS
        vec![1, 3, 3, 7],                     // window scale
        vec![1, 1, 4, 2],                     // SACK permitted
        vec![34, 10, 1, 2, 3, 4, 5, 6, 7, 8], // Fast Open cookie
        vec![254, 4, 0xab, 0xcd],             // experimental
        vec![99, 2, 1, 1],                    // unknown
    ];
    for o in bad {
        let c = opts(ack(100), o.clone()).build();
        assert!(
            !droppable(&c, &t),
            "options {o:?} made the candidate droppable"
        );
    }
}

#[test]
fn nop_eol_and_md5sig_options_are_allowed() {
    let t = ack(300).build();
    let mut md5 = vec![1, 1, 19, 18];
    md5.extend_from_slice(&[0xaa; 16]);
    assert!(droppable(&opts(ack(100), md5).build(), &t));
    assert!(droppable(&opts(ack(100), vec![1, 1, 1, 0]).build(), &t));
}

#[test]
fn options_after_eol_are_not_read() {
    // EOL then MSS: the MSS is never reached.
    let c = opts(ack(100), vec![0, 0, 0, 0, 2, 4, 5, 0xb4]).build();
    assert!(droppable(&c, &ack(300).build()));
}

#[test]
fn option_length_past_the_header_ends_the_walk_without_making_the_candidate_ineligible() {
    // MSS claiming 40 bytes in a 4-byte option area: the kernel stops parsing and may drop.
    let c = opts(ack(100), vec![1, 1, 2, 40]).build();
    assert!(droppable(&c, &ack(300).build()));
    // Length 1 likewise ends the walk.
    let c = opts(ack(100), vec![1, 1, 2, 1]).build();
    assert!(droppable(&c, &ack(300).build()));
}

#[test]
fn timestamp_or_sack_option_of_the_wrong_length_makes_a_candidate_ineligible() {
    let t = opts(ack(300), ts(100, 100)).build();
    let c = opts(ack(100), vec![1, 1, 8, 6, 0, 0, 0, 0]).build();
    assert!(!droppable(&c, &t));
    let t = opts(ack(300), sack(&[(400, 500)])).build();
    let c = opts(ack(100), vec![5, 4, 0, 0]).build();
    assert!(!droppable(&c, &t));
}

#[test]
fn timestamp_newer_than_the_trigger_keeps_the_candidate() {
    let t = opts(ack(300), ts(1000, 500)).build();
    assert!(!droppable(&opts(ack(100), ts(1001, 500)).build(), &t));
    assert!(!droppable(&opts(ack(100), ts(1000, 501)).build(), &t));
    assert!(droppable(&opts(ack(100), ts(1000, 500)).build(), &t));
    assert!(droppable(&opts(ack(100), ts(999, 400)).build(), &t));
}

#[test]
fn timestamp_comparison_wraps() {
    let t = opts(ack(300), ts(10, 10)).build();
    assert!(droppable(
        &opts(ack(100), ts(u32::MAX - 5, u32::MAX - 5)).build(),
        &t
    ));
}

#[test]
fn trigger_without_timestamp_compares_candidates_against_zero() {
    // As in the kernel, a trigger without a timestamp option has TSval = TSecr = 0.
    let t = ack(300).build();
    assert!(droppable(&opts(ack(100), ts(0, 0)).build(), &t));
    assert!(!droppable(&opts(ack(100), ts(5, 0)).build(), &t));
    // 0x8000_0001 is "before" 0 in sequence space.
    assert!(droppable(&opts(ack(100), ts(0x8000_0001, 0)).build(), &t));
}

#[test]
fn trigger_timestamp_is_read_from_its_first_timestamp_option() {
    // First TS option has a bad length (6): the kernel reads TSval = TSecr = 0 and ignores the
    // valid one after it.
    let mut o = vec![8, 6, 0, 0, 0, 0];
    o.extend_from_slice(&ts(1000, 1000));
    let t = opts(ack(300), o).build();
    assert!(!droppable(&opts(ack(100), ts(500, 500)).build(), &t));
    assert!(droppable(&opts(ack(100), ts(0, 0)).build(), &t));
}

#[test]
fn trigger_sack_option_with_a_partial_block_uses_its_whole_blocks() {
    // SACK of length 12: one whole block plus two stray bytes, as the kernel reads it.
    let mut o = vec![1, 1, 5, 12];
    o.extend_from_slice(&150u32.to_be_bytes());
    o.extend_from_slice(&400u32.to_be_bytes());
    o.extend_from_slice(&[0, 0]);
    let t = opts(ack(100), o).build();
    assert!(droppable(&opts(ack(100), sack(&[(200, 300)])).build(), &t));
    assert!(!droppable(&opts(ack(100), sack(&[(200, 500)])).build(), &t));
}

// ---------------------------------------------------------------------------------------------
// SACK

#[test]
fn sack_block_covered_by_the_trigger_is_dropped() {
    let t = opts(ack(100), sack(&[(150, 400)])).build();
    assert!(droppable(&opts(ack(100), sack(&[(200, 300)])).build(), &t));
    // Several candidate blocks each inside some trigger block.
    let t = opts(ack(100), sack(&[(500, 600), (200, 300)])).build();
    let c = opts(ack(100), sack(&[(210, 290), (500, 550)])).build();
    assert!(droppable(&c, &t));
}

#[test]
fn sack_block_not_covered_by_the_trigger_is_kept() {
    let t = opts(ack(300), sack(&[(400, 500)])).build();
    assert!(!droppable(&opts(ack(100), sack(&[(600, 700)])).build(), &t));
    // Partly covered.
    assert!(!droppable(&opts(ack(100), sack(&[(450, 550)])).build(), &t));
    // Covered only by two trigger blocks together, not by one.
    let t = opts(ack(300), sack(&[(400, 450), (450, 500)])).build();
    assert!(!droppable(&opts(ack(100), sack(&[(400, 500)])).build(), &t));
}

#[test]
fn candidate_sack_with_trigger_lacking_sack_is_kept() {
    let t = ack(300).build();
    assert!(!droppable(&opts(ack(100), sack(&[(400, 500)])).build(), &t));
}

#[test]
fn d_sack_candidate_is_kept() {
    // Block below the candidate's own cumulative ACK, even though the trigger covers it.
    let t = opts(ack(300), sack(&[(0, 1000)])).build();
    assert!(!droppable(&opts(ack(200), sack(&[(100, 150)])).build(), &t));
}

#[test]
fn same_ack_needs_the_trigger_to_sack_more_bytes() {
    // Same cumulative ACK, same SACK: a duplicate, kept.
    let t = opts(ack(100), sack(&[(200, 300)])).build();
    assert!(!droppable(&opts(ack(100), sack(&[(200, 300)])).build(), &t));
    // Same cumulative ACK, trigger SACKs more: the candidate is redundant.
    let t = opts(ack(100), sack(&[(200, 300), (400, 500)])).build();
    assert!(droppable(&opts(ack(100), sack(&[(200, 300)])).build(), &t));
    // Candidate without SACK, trigger with SACK at the same cumulative ACK: redundant.
    assert!(droppable(&ack(100).build(), &t));
    // A larger cumulative ACK with the same SACK is enough.
    let t = opts(ack(150), sack(&[(200, 300)])).build();
    assert!(droppable(&opts(ack(100), sack(&[(200, 300)])).build(), &t));
}

#[test]
fn empty_sack_option_counts_as_no_sack() {
    // SACK with length 2 (no blocks) passes the 2 + 8n length rule and carries nothing.
    let c = opts(ack(100), vec![1, 1, 5, 2]).build();
    assert!(droppable(&c, &ack(300).build()));
    assert!(!droppable(&c, &ack(100).build()));
}

// ---------------------------------------------------------------------------------------------
// ECE / CWR

#[test]
fn aggressive_keeps_a_single_ack_whose_ece_cwr_differ_from_the_trigger() {
    let q = build(&[flags(ack(100), f::ACK | f::ECE)]);
    assert_eq!(run(Aggressive, &q, &ack(300).build()), None);
    let q = build(&[ack(100)]);
    assert_eq!(
        run(Aggressive, &q, &flags(ack(300), f::ACK | f::CWR).build()),
        None
    );
}

#[test]
fn conservative_ignores_the_triggers_ece_cwr() {
    let q = build(&[
        flags(ack(100), f::ACK | f::ECE),
        flags(ack(200), f::ACK | f::ECE),
    ]);
    assert_eq!(run(Filter, &q, &ack(300).build()), Some(0));
}

#[test]
fn ece_cwr_change_forgets_the_saved_ack() {
    // 100 is saved; 200 has ECE set, so 100 is forgotten and 200 saved; 250 (ECE) drops 200.
    let ece = |a| flags(ack(a), f::ACK | f::ECE);
    let q = build(&[ack(100), ece(200), ece(250)]);
    assert_eq!(run(Filter, &q, &ack(300).build()), Some(1));
    // Two eligible ACKs with different ECE/CWR never make a conservative drop.
    let q = build(&[ack(100), flags(ack(200), f::ACK | f::CWR)]);
    assert_eq!(run(Filter, &q, &ack(300).build()), None);
}

#[test]
fn ece_cwr_change_on_an_ineligible_same_flow_packet_forgets_the_saved_ack() {
    // The data segment is never droppable but its ECE bit still resets the saved ACK.
    let data_ece = flags(ack(100), f::ACK | f::PSH | f::ECE).with_payload(100);
    let q = build(&[ack(100), data_ece, ack(200)]);
    assert_eq!(run(Filter, &q, &ack(300).build()), None);
    // Aggressive: 200 is now the single saved ACK, directly before the trigger.
    assert_eq!(run(Aggressive, &q, &ack(300).build()), Some(2));
}

#[test]
fn ece_cwr_of_other_flows_do_not_matter() {
    let other = flags(
        FrameSpec::tcp(C4, B4, 1000, 80).with_seq_ack(1, 100),
        f::ACK | f::ECE,
    );
    let q = build(&[ack(100), other, ack(200)]);
    assert_eq!(run(Filter, &q, &ack(300).build()), Some(0));
}

// ---------------------------------------------------------------------------------------------
// Flow matching

#[test]
fn packets_of_other_flows_in_the_same_queue_are_ignored() {
    let t = ack(300).build();
    let others = [
        FrameSpec::tcp(A4, B4, 1001, 80).with_seq_ack(1, 100), // source port
        FrameSpec::tcp(A4, B4, 1000, 81).with_seq_ack(1, 100), // destination port
        FrameSpec::tcp(C4, B4, 1000, 80).with_seq_ack(1, 100), // source address
        FrameSpec::tcp(A4, C4, 1000, 80).with_seq_ack(1, 100), // destination address
        FrameSpec::tcp(B4, A4, 80, 1000).with_seq_ack(1, 100), // reverse direction
        FrameSpec::udp(A4, B4, 1000, 80),                      // not TCP
    ];
    for o in &others {
        assert_eq!(
            run(Filter, &build(&[o.clone(), o.clone()]), &t),
            None,
            "{o:?}"
        );
        assert_eq!(
            run(Aggressive, &build(std::slice::from_ref(o)), &t),
            None,
            "{o:?}"
        );
    }
    let mut q = build(&others);
    q.insert(2, ack(100).build());
    q.push(ack(200).build());
    assert_eq!(run(Filter, &q, &t), Some(2));
}

#[test]
fn ipv4_mapped_ipv6_addresses_are_a_different_flow_from_ipv4() {
    let a = IpAddr::V6(Ipv4Addr::new(10, 0, 0, 1).to_ipv6_mapped());
    let b = IpAddr::V6(Ipv4Addr::new(10, 0, 0, 2).to_ipv6_mapped());
    let t = FrameSpec::tcp(a, b, 1000, 80).with_seq_ack(1, 300).build();
    let q = build(&[ack(100), ack(200)]);
    assert_eq!(run(Filter, &q, &t), None);
}

#[test]
fn vlan_tagged_frames_are_filtered() {
    let q = build(&[ack(100).with_vlan(7), ack(200).with_vlan(7)]);
    assert_eq!(run(Filter, &q, &ack(300).with_vlan(7).build()), Some(0));
}

#[test]
fn ipv6_acks_are_filtered() {
    let q = build(&[ack6(100), ack6(200)]);
    assert_eq!(run(Filter, &q, &ack6(300).build()), Some(0));
    let q = build(&[ack6(100)]);
    assert_eq!(run(Aggressive, &q, &ack6(300).build()), Some(0));
    let t = opts(ack6(100), sack(&[(200, 400)])).build();
    assert!(droppable(&opts(ack6(100), sack(&[(200, 300)])).build(), &t));
    assert!(!droppable(
        &opts(ack6(100), sack(&[(200, 500)])).build(),
        &t
    ));
}

#[test]
fn six_in_four_acks_are_filtered_by_their_inner_headers() {
    let wrap = |s: FrameSpec| six_in_four(&s.build(), [192, 0, 2, 1], [192, 0, 2, 2]);
    let q = vec![wrap(ack6(100)), wrap(ack6(200))];
    assert_eq!(run(Filter, &q, &wrap(ack6(300))), Some(0));
    assert_eq!(run(Aggressive, &q[..1], &wrap(ack6(300))), Some(0));
    // Payload is judged by the inner IPv6 payload length.
    let q = vec![wrap(ack6(100).with_payload(10))];
    assert_eq!(run(Aggressive, &q, &wrap(ack6(300))), None);
    // The outer addresses are not part of the flow (the kernel compares the inner ones): a
    // native IPv6 trigger with the same inner tuple matches tunnelled candidates.
    let q = vec![wrap(ack6(100)), wrap(ack6(200))];
    assert_eq!(run(Filter, &q, &ack6(300).build()), Some(0));
    // A different inner source is a different flow.
    let other = FrameSpec::tcp(B6, B6, 1000, 80).with_seq_ack(1, 100);
    let q = vec![wrap(other.clone()), wrap(other)];
    assert_eq!(run(Filter, &q, &wrap(ack6(300))), None);
}

#[test]
fn ipv6_extension_headers_before_tcp_are_not_followed() {
    // The kernel's ACK filter reads TCP only directly after the IPv6 header.
    let t = ack6(300).build();
    let c = with_hop_by_hop(&ack6(100).build());
    assert!(!droppable(&c, &t));
    let q = build(&[ack6(100), ack6(200)]);
    assert_eq!(run(Filter, &q, &with_hop_by_hop(&t)), None);
}

// ---------------------------------------------------------------------------------------------
// Triggers

#[test]
fn non_tcp_trigger_returns_none() {
    let q = build(&[ack(100), ack(200)]);
    assert_eq!(
        run(Filter, &q, &FrameSpec::udp(A4, B4, 1000, 80).build()),
        None
    );
    assert_eq!(
        run(Filter, &q, &FrameSpec::icmp_echo(A4, B4, 1, 1).build()),
        None
    );
    assert_eq!(run(Filter, &q, &[]), None);
    assert_eq!(run(Filter, &q, &[0u8; 64]), None);
}

#[test]
fn trigger_needs_ack_set_and_syn_clear() {
    let q = build(&[ack(100), ack(200)]);
    assert_eq!(
        run(Filter, &q, &flags(ack(300), f::SYN | f::ACK).build()),
        None
    );
    assert_eq!(run(Filter, &q, &flags(ack(300), f::PSH).build()), None);
    // Any other flags, and a payload, are fine on the trigger.
    for extra in [f::PSH, f::FIN, f::RST, f::URG] {
        assert_eq!(
            run(Filter, &q, &flags(ack(300), f::ACK | extra).build()),
            Some(0)
        );
    }
    assert_eq!(
        run(Filter, &q, &ack(300).with_payload(1000).build()),
        Some(0)
    );
    assert_eq!(
        run(Filter, &q, &opts(ack(300), vec![2, 4, 5, 0xb4]).build()),
        Some(0)
    );
}

#[test]
fn empty_queue_returns_none() {
    assert_eq!(run(Aggressive, &[], &ack(300).build()), None);
}

// ---------------------------------------------------------------------------------------------
// Robustness

#[test]
fn truncated_frames_never_panic_and_are_not_dropped() {
    let full = opts(ack(100), sack(&[(200, 300)])).build();
    let t = opts(ack(300), sack(&[(150, 400)])).build();
    for len in 0..full.len() {
        let c = full[..len].to_vec();
        let _ = run(Aggressive, &[c.clone(), c.clone()], &t);
        let _ = run(Aggressive, std::slice::from_ref(&c), &full[..len]);
    }
    // Cut inside the TCP options: the header is incomplete, so it is not TCP at all.
    let cut = full[..full.len() - 2].to_vec();
    assert_eq!(run(Aggressive, &[cut], &t), None);
}

fn mutate(base: &[u8], edits: &[(usize, u8)], cut: usize) -> Vec<u8> {
    let mut v = base.to_vec();
    for &(i, b) in edits {
        if !v.is_empty() {
            let n = v.len();
            v[i % n] = b;
        }
    }
    v.truncate(cut.min(v.len()));
    v
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(
        trigger in proptest::collection::vec(any::<u8>(), 0..120),
        queue in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..120), 0..6),
    ) {
        for mode in [Filter, Aggressive] {
            if let Some(p) = run(mode, &queue, &trigger) {
                prop_assert!(p < queue.len());
            }
        }
    }

    #[test]
    fn mutated_acks_never_panic_and_positions_are_in_range(
        edits in proptest::collection::vec((0usize..200, any::<u8>()), 0..6),
        cuts in proptest::collection::vec(0usize..200, 4),
        acks in proptest::collection::vec(any::<u32>(), 4),
        six in any::<bool>(),
    ) {
        let base = |a: u32| {
            let s = if six { ack6(a) } else { ack(a) };
            opts(s, [ts(a, a), sack(&[(a, a.wrapping_add(100))])].concat()).build()
        };
        let queue: Vec<Vec<u8>> = (0..3).map(|i| mutate(&base(acks[i]), &edits, cuts[i])).collect();
        let trigger = mutate(&base(acks[3]), &edits[..edits.len() / 2], cuts[3]);
        for mode in [Filter, Aggressive] {
            if let Some(p) = run(mode, &queue, &trigger) {
                prop_assert!(p < queue.len());
            }
        }
    }
}
