use super::*;
use proptest::prelude::*;
use qdisc::packet::FrameSpec;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

const CLIENT: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 168, 1, 10));
const SERVER: IpAddr = IpAddr::V4(Ipv4Addr::new(203, 0, 113, 5));

fn ms(x: u64) -> Instant {
    Instant::from_millis(x)
}

fn us(x: u64) -> Instant {
    Instant::from_micros(x)
}

fn ts_opts(tsval: u32, tsecr: u32) -> Vec<u8> {
    let mut o = vec![1, 1, 8, 10];
    o.extend_from_slice(&tsval.to_be_bytes());
    o.extend_from_slice(&tsecr.to_be_bytes());
    o
}

/// A segment of connection `port` leaving the client towards the server.
fn out(port: u16, tsval: u32, tsecr: u32, payload: usize) -> Vec<u8> {
    FrameSpec::tcp(CLIENT, SERVER, port, 443)
        .with_tcp_options(ts_opts(tsval, tsecr))
        .with_payload(payload)
        .build()
}

/// A segment of connection `port` arriving from the server.
fn inn(port: u16, tsval: u32, tsecr: u32, payload: usize) -> Vec<u8> {
    FrameSpec::tcp(SERVER, CLIENT, 443, port)
        .with_tcp_options(ts_opts(tsval, tsecr))
        .with_payload(payload)
        .build()
}

fn every_sample() -> PassiveDelay {
    PassiveDelay::new(PassiveParams {
        sample: 1,
        ..PassiveParams::default()
    })
    .unwrap()
}

/// A table of one set of 8 ways (the ninth flow replaces one), every timestamp sampled.
fn one_set_of_eight() -> PassiveDelay {
    PassiveDelay::new(PassiveParams {
        max_flows: 8,
        sample: 1,
        ..PassiveParams::default()
    })
    .unwrap()
}

fn q_ms(d: Option<Duration>) -> f64 {
    d.expect("an estimate").as_millis_f64()
}

#[test]
fn a_timestamp_echo_from_the_wan_times_the_wan_round_trip() {
    let mut p = every_sample();
    // Data leaves with TSval 1000 at 0 ms; the server's ACK echoes it at 40 ms.
    p.on_frame(ms(0), Side::ToWan, &out(5000, 1000, 77, 1400));
    p.on_frame(ms(40), Side::FromWan, &inn(5000, 90, 1000, 0));
    assert_eq!(p.stats().wan_samples, 1);
    let r = p.reading(ms(50));
    assert_eq!(
        r.wan_rtt_queue,
        Some(Duration::ZERO),
        "the first sample is the baseline"
    );
    assert_eq!(r.flows.down, 1);
    // 20 ms later in the run the same path takes 60 ms: 20 ms of queue, for both directions
    // (the far clock's tick is not known yet).
    p.on_frame(ms(100), Side::ToWan, &out(5000, 1100, 90, 1400));
    p.on_frame(ms(160), Side::FromWan, &inn(5000, 150, 1100, 0));
    let r = p.reading(ms(170));
    assert_eq!(q_ms(r.wan_rtt_queue), 20.0);
    assert_eq!(q_ms(r.queue.down), 20.0);
    assert_eq!(q_ms(r.queue.up), 20.0);
    assert_eq!(r.one_way, PerDir::both(false));
    // Nothing measured since: no estimate.
    assert_eq!(p.reading(ms(300)).queue, PerDir::both(None));
}

#[test]
fn a_wan_timestamp_echoed_by_the_local_host_times_the_lan_side() {
    let mut p = every_sample();
    p.on_frame(ms(0), Side::FromWan, &inn(5000, 500, 0, 1400));
    p.on_frame(ms(3), Side::ToWan, &out(5000, 7, 500, 0));
    assert_eq!((p.stats().lan_samples, p.stats().wan_samples), (1, 0));
    assert_eq!(p.reading(ms(5)).lan_rtt_queue, Some(Duration::ZERO));
    p.on_frame(ms(10), Side::FromWan, &inn(5000, 510, 7, 1400));
    p.on_frame(ms(18), Side::ToWan, &out(5000, 8, 510, 0));
    let r = p.reading(ms(20));
    assert_eq!(q_ms(r.lan_rtt_queue), 5.0);
    assert_eq!(r.wan_rtt_queue, None, "the LAN side is not the WAN's queue");
}

#[test]
fn only_the_first_segment_with_a_tsval_and_its_first_echo_count() {
    let mut p = every_sample();
    // Two segments share TSval 1000 (the same millisecond): the first one is timed.
    p.on_frame(ms(0), Side::ToWan, &out(5000, 1000, 1, 1400));
    p.on_frame(ms(5), Side::ToWan, &out(5000, 1000, 1, 1400));
    p.on_frame(ms(40), Side::FromWan, &inn(5000, 2, 1000, 0));
    // A later segment echoing the same TSecr is not a new sample.
    p.on_frame(ms(45), Side::FromWan, &inn(5000, 3, 1000, 0));
    assert_eq!(p.stats().wan_samples, 1);
    let _ = p.reading(ms(50));
    // A retransmission carrying an older TSval starts nothing; its echo (an old TSecr) ends
    // nothing.
    p.on_frame(ms(60), Side::ToWan, &out(5000, 999, 3, 1400));
    p.on_frame(ms(200), Side::FromWan, &inn(5000, 4, 999, 0));
    assert_eq!(p.stats().wan_samples, 1);
    assert_eq!(p.reading(ms(210)).wan_rtt_queue, None);
    // The baseline is the 40 ms of the first segment, not 35 ms of the second.
    p.on_frame(ms(300), Side::ToWan, &out(5000, 1300, 4, 1400));
    p.on_frame(ms(340), Side::FromWan, &inn(5000, 5, 1300, 0));
    assert_eq!(p.reading(ms(350)).wan_rtt_queue, Some(Duration::ZERO));
}

#[test]
fn an_echo_that_skips_recorded_timestamps_discards_them() {
    let mut p = every_sample();
    for k in 0..4u32 {
        p.on_frame(ms(u64::from(k)), Side::ToWan, &out(5000, 100 + k, 1, 1400));
    }
    // The far host echoes 102 (delayed ACK of 100..102): 100 and 101 were never echoed.
    p.on_frame(ms(42), Side::FromWan, &inn(5000, 2, 102, 0));
    p.on_frame(ms(43), Side::FromWan, &inn(5000, 3, 103, 0));
    assert_eq!(p.stats().wan_samples, 2);
    let r = p.reading(ms(50));
    assert_eq!(q_ms(r.wan_rtt_queue), 0.0, "40 ms both: the baseline");
}

#[test]
fn timestamps_wrap_around_32_bits() {
    let mut p = every_sample();
    let base = u32::MAX - 2;
    let mut t = 0;
    for k in 0..8u32 {
        let v = base.wrapping_add(k * 10);
        p.on_frame(ms(t), Side::ToWan, &out(5000, v, 1, 1400));
        // 30 ms round trips, then 45 ms from the fifth on (past the wrap).
        let rtt = if k < 4 { 30 } else { 45 };
        p.on_frame(ms(t + rtt), Side::FromWan, &inn(5000, 2, v, 0));
        t += 100;
        if k == 3 {
            let _ = p.reading(ms(t));
        }
    }
    assert_eq!(
        p.stats().wan_samples,
        8,
        "every echo matched across the wrap"
    );
    assert_eq!(q_ms(p.reading(ms(t)).wan_rtt_queue), 15.0);
}

#[test]
fn the_far_clock_wraps_without_a_jump_in_one_way_delay() {
    let mut p = every_sample();
    // Far clock in µs starting just below the wrap; one-way delay constant.
    let s0 = u32::MAX - 1_500_000;
    for k in 0..400u64 {
        let t = ms(k * 10);
        let far = s0.wrapping_add((k * 10_000) as u32);
        p.on_frame(t, Side::FromWan, &inn(5000, far, 0, 1400));
    }
    let r = p.reading(ms(4000));
    assert!(r.one_way.down, "the far tick is known after 2 s: {r:?}");
    assert_eq!(r.queue.down, Some(Duration::ZERO), "{r:?}");
}

#[test]
fn a_pure_ack_is_only_timed_when_the_far_host_kept_talking() {
    let mut p = every_sample();
    // A pure ACK; the server says nothing until it echoes it 3 s later.
    p.on_frame(ms(0), Side::ToWan, &out(5000, 100, 1, 0));
    p.on_frame(ms(3000), Side::FromWan, &inn(5000, 9, 100, 1400));
    assert_eq!((p.stats().wan_samples, p.stats().untimed), (0, 1));
    // A pure ACK while data keeps arriving (a download): timed.
    p.on_frame(ms(3010), Side::ToWan, &out(5000, 200, 9, 0));
    p.on_frame(ms(3020), Side::FromWan, &inn(5000, 10, 100, 1400));
    p.on_frame(ms(3040), Side::FromWan, &inn(5000, 11, 200, 1400));
    assert_eq!(p.stats().wan_samples, 1);
}

#[test]
fn a_full_set_replaces_the_flow_heard_from_least_recently() {
    let mut p = one_set_of_eight();
    for port in 0..8u16 {
        p.on_frame(
            ms(u64::from(port)),
            Side::ToWan,
            &out(6000 + port, 1, 1, 100),
        );
    }
    assert_eq!(p.stats().evictions, 0);
    assert_eq!(p.reading(ms(10)).tracked, 8);
    // Port 6000 (the oldest) is heard from again; a ninth flow replaces 6001.
    p.on_frame(ms(20), Side::ToWan, &out(6000, 2, 1, 100));
    p.on_frame(ms(21), Side::ToWan, &out(7000, 1, 1, 100));
    assert_eq!(p.stats().evictions, 1);
    assert_eq!(p.reading(ms(22)).tracked, 8, "the table never grows");
    // 6000 is still tracked: its echo is timed; 6001 was forgotten: its echo is not.
    p.on_frame(ms(50), Side::FromWan, &inn(6000, 5, 2, 0));
    assert_eq!(p.stats().wan_samples, 1);
    p.on_frame(ms(51), Side::FromWan, &inn(6001, 5, 1, 0));
    assert_eq!(p.stats().wan_samples, 1);
    // (6001 came back as a new flow, replacing the next least recent one.)
    assert_eq!(p.stats().evictions, 2);
    // Flows idle for 30 s are replaced without counting as evictions.
    p.on_frame(ms(40_000), Side::ToWan, &out(8000, 1, 1, 100));
    assert_eq!(p.stats().evictions, 2);
}

#[test]
fn a_flow_replaced_within_a_reading_window_counts_once_and_its_successor_too() {
    let mut p = one_set_of_eight();
    for port in 0..8u16 {
        p.on_frame(
            ms(u64::from(port)),
            Side::ToWan,
            &out(6000 + port, 100, 1, 1400),
        );
    }
    for port in 0..8u16 {
        p.on_frame(
            ms(40 + u64::from(port)),
            Side::FromWan,
            &inn(6000 + port, 5, 100, 0),
        );
    }
    assert_eq!(p.stats().wan_samples, 8);
    // Within the same window 7000 replaces 6000 (heard from last at 40 ms) and is timed.
    p.on_frame(ms(50), Side::ToWan, &out(7000, 100, 1, 1400));
    p.on_frame(ms(80), Side::FromWan, &inn(7000, 5, 100, 0));
    assert_eq!((p.stats().wan_samples, p.stats().evictions), (9, 1));
    let r = p.reading(ms(90));
    assert_eq!((r.flows.down, r.tracked), (8, 8), "{r:?}");
    // The next window starts empty: nothing measured, no estimate.
    let r = p.reading(ms(140));
    assert_eq!((r.flows.down, r.queue.down), (0, None));
    assert_eq!(r.tracked, 8);
    // 30 s later every flow is idle.
    assert_eq!(p.reading(ms(40_000)).tracked, 0);
}

#[test]
fn the_estimate_is_the_median_over_flows_one_slow_server_does_not_move_it() {
    let mut p = every_sample();
    let mut t = 0;
    for round in 0..2u32 {
        for port in 0..5u16 {
            let v = 1000 + round * 100 + u32::from(port);
            p.on_frame(ms(t), Side::ToWan, &out(5000 + port, v, 1, 1400));
            // Round 0: 30 ms everywhere (baselines). Round 1: 8 ms of queue on four flows,
            // and one flow's server takes 500 ms more.
            let rtt = match (round, port) {
                (0, _) => 30,
                (_, 4) => 530,
                _ => 38,
            };
            p.on_frame(
                ms(t + rtt),
                Side::FromWan,
                &inn(5000 + port, 2 + round, v, 0),
            );
        }
        t += 1000;
        let r = p.reading(ms(t));
        assert_eq!(r.flows.down, 5);
        let want = if round == 0 { 0.0 } else { 8.0 };
        assert_eq!(q_ms(r.queue.down), want, "round {round}");
    }
}

#[test]
fn within_an_interval_each_flow_counts_its_smallest_delay() {
    let mut p = every_sample();
    p.on_frame(ms(0), Side::ToWan, &out(5000, 10, 1, 1400));
    p.on_frame(ms(30), Side::FromWan, &inn(5000, 2, 10, 0));
    let _ = p.reading(ms(40));
    // A delayed ACK adds 40 ms to one sample; the other in the interval sees 3 ms of queue.
    p.on_frame(ms(100), Side::ToWan, &out(5000, 20, 2, 1400));
    p.on_frame(ms(101), Side::ToWan, &out(5000, 21, 2, 1400));
    p.on_frame(ms(134), Side::FromWan, &inn(5000, 3, 21, 0));
    p.on_frame(ms(200), Side::ToWan, &out(5000, 30, 3, 1400));
    p.on_frame(ms(270), Side::FromWan, &inn(5000, 4, 30, 0));
    let r = p.reading(ms(280));
    assert_eq!(q_ms(r.wan_rtt_queue), 3.0);
}

/// Drives one bulk download through a bottleneck in each direction: the far host's clock
/// ticks in µs (offset by 1 h), `down_q(t)` and `up_q(t)` are the queueing delays (ms) its
/// data meets going down and the client's ACKs meet going up; 10 ms of propagation each way.
/// Returns the reading of the last 500 ms.
fn download(
    p: &mut PassiveDelay,
    secs: u64,
    down_q: impl Fn(u64) -> u64,
    up_q: impl Fn(u64) -> u64,
) -> PassiveReading {
    let far = |t_us: u64| (t_us + 3_600_000_000) as u32;
    // Every millisecond the server sends a segment echoing the latest ACK that reached it, and
    // the client ACKs it on arrival.
    let mut acks: Vec<(u64, u32)> = Vec::new(); // (arrival at server µs, client TSval)
    let mut events: Vec<(u64, Side, Vec<u8>)> = Vec::new();
    for k in 0..secs * 1000 {
        let send = k * 1000;
        let echo = acks.iter().rev().find(|a| a.0 <= send).map_or(0, |a| a.1);
        let arrive = send + 10_000 + down_q(send / 1000) * 1000;
        events.push((arrive, Side::FromWan, inn(5000, far(send), echo, 1400)));
        // The client's ACK leaves the box on arrival (the LAN is instant here).
        let tsval = (arrive / 1000) as u32 + 17;
        events.push((arrive, Side::ToWan, out(5000, tsval, far(send), 0)));
        let at_server = arrive + 10_000 + up_q(arrive / 1000) * 1000;
        acks.push((at_server, tsval));
    }
    events.sort_by_key(|e| e.0);
    let last = secs * 1_000_000 - 500_000;
    let mut read = false;
    for (t, side, f) in &events {
        if *t >= last && !read {
            let _ = p.reading(us(last));
            read = true;
        }
        p.on_frame(us(*t), *side, f);
    }
    p.reading(us(secs * 1_000_000 + 40_000))
}

#[test]
fn with_a_known_far_clock_download_and_upload_queues_are_told_apart() {
    let mut p = every_sample();
    // 3 s without queues (baselines, the far tick learnt), then 25 ms in the download only.
    let r = download(&mut p, 6, |t| if t >= 3000 { 25 } else { 0 }, |_| 0);
    assert!(r.one_way.down && r.one_way.up, "{r:?}");
    assert!((24.0..=26.0).contains(&q_ms(r.queue.down)), "{r:?}");
    assert!(q_ms(r.queue.up) <= 1.0, "{r:?}");
    assert!((24.0..=26.0).contains(&q_ms(r.wan_rtt_queue)), "{r:?}");
    // And the other way round.
    let mut p = every_sample();
    let r = download(&mut p, 6, |_| 0, |t| if t >= 3000 { 15 } else { 0 });
    assert!(q_ms(r.queue.down) <= 1.0, "{r:?}");
    assert!((14.0..=16.0).contains(&q_ms(r.queue.up)), "{r:?}");
}

#[test]
fn sampling_keeps_every_measurement_exact_and_drops_the_rest() {
    let mut p = PassiveDelay::new(PassiveParams {
        sample: 8,
        ..PassiveParams::default()
    })
    .unwrap();
    let pp = *p.params();
    assert!(pp.sampled(16, 3) && pp.sampled(3, 24) && !pp.sampled(3, 5));
    // TSval 9 is not in the class: no measurement. TSval 16 is.
    p.on_frame(ms(0), Side::ToWan, &out(5000, 9, 1, 1400));
    p.on_frame(ms(1), Side::ToWan, &out(5000, 16, 1, 1400));
    p.on_frame(ms(30), Side::FromWan, &inn(5000, 3, 9, 0));
    assert_eq!(p.stats().wan_samples, 0);
    p.on_frame(ms(31), Side::FromWan, &inn(5000, 5, 16, 0));
    assert_eq!(p.stats().wan_samples, 1);
    assert_eq!(p.reading(ms(40)).wan_rtt_queue, Some(Duration::ZERO));
}

#[test]
fn handshakes_are_timed_but_are_no_queue_estimate() {
    let mut p = every_sample();
    let syn = FrameSpec::tcp(CLIENT, SERVER, 5000, 443)
        .with_tcp_flags(tcp_flags::SYN)
        .build();
    let syn_ack = FrameSpec::tcp(SERVER, CLIENT, 443, 5000)
        .with_tcp_flags(tcp_flags::SYN | tcp_flags::ACK)
        .build();
    let ack = FrameSpec::tcp(CLIENT, SERVER, 5000, 443).build();
    p.on_frame(ms(0), Side::ToWan, &syn);
    p.on_frame(ms(35), Side::FromWan, &syn_ack);
    p.on_frame(ms(36), Side::ToWan, &ack);
    assert_eq!(
        p.stats().handshakes,
        2,
        "WAN (SYN, SYN-ACK) and LAN (SYN-ACK, ACK)"
    );
    let r = p.reading(ms(40));
    assert_eq!((r.queue.down, r.tracked), (None, 1));
    // A retransmitted SYN makes the handshake ambiguous: not timed.
    let syn2 = FrameSpec::tcp(CLIENT, SERVER, 5001, 443)
        .with_tcp_flags(tcp_flags::SYN)
        .build();
    let syn_ack2 = FrameSpec::tcp(SERVER, CLIENT, 443, 5001)
        .with_tcp_flags(tcp_flags::SYN | tcp_flags::ACK)
        .build();
    p.on_frame(ms(100), Side::ToWan, &syn2);
    p.on_frame(ms(1100), Side::ToWan, &syn2);
    p.on_frame(ms(1130), Side::FromWan, &syn_ack2);
    assert_eq!(p.stats().handshakes, 2);
}

#[test]
fn ipv6_segments_are_timed_too() {
    let c = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, 10));
    let s = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 2, 0, 0, 0, 0, 5));
    let mut p = every_sample();
    let o = FrameSpec::tcp(c, s, 5000, 443)
        .with_tcp_options(ts_opts(100, 1))
        .with_payload(1000)
        .build();
    let i = FrameSpec::tcp(s, c, 443, 5000)
        .with_tcp_options(ts_opts(7, 100))
        .build();
    p.on_frame(ms(0), Side::ToWan, &o);
    p.on_frame(ms(25), Side::FromWan, &i);
    assert_eq!(p.stats().wan_samples, 1);
}

#[test]
fn frames_cut_after_the_tcp_options_are_enough() {
    let mut p = every_sample();
    let mut o = out(5000, 100, 1, 1400);
    o.truncate(14 + 20 + 32);
    let mut i = inn(5000, 3, 100, 1400);
    i.truncate(14 + 20 + 32);
    p.on_frame(ms(0), Side::ToWan, &o);
    p.on_frame(ms(20), Side::FromWan, &i);
    assert_eq!(p.stats().wan_samples, 1);
}

#[test]
fn params_are_checked_by_name() {
    let bad = |f: fn(&mut PassiveParams)| {
        let mut p = PassiveParams::default();
        f(&mut p);
        PassiveDelay::new(p).unwrap_err().option
    };
    assert_eq!(bad(|p| p.sample = 3), "passive.sample");
    assert_eq!(bad(|p| p.max_flows = 4), "passive.max_flows");
    assert_eq!(
        bad(|p| p.baseline_window = Duration::from_millis(10)),
        "passive.baseline_window_s"
    );
    assert!(PassiveParams::default().validate().is_ok());
}

proptest! {
    #[test]
    fn any_bytes_on_either_side_are_harmless(
        frames in proptest::collection::vec(
            (any::<bool>(), proptest::collection::vec(any::<u8>(), 0..120)), 0..64)
    ) {
        let mut p = PassiveDelay::new(PassiveParams { max_flows: 8, sample: 1,
            ..PassiveParams::default() }).unwrap();
        for (k, (to_wan, mut f)) in frames.into_iter().enumerate() {
            // Half of them made to look like IPv4 TCP with the timestamps option.
            if k % 2 == 0 && f.len() >= 60 {
                f[12] = 0x08; f[13] = 0x00; f[14] = 0x45; f[23] = 6; f[46] = 0x80;
                f[54] = 1; f[55] = 1; f[56] = 8; f[57] = 10;
            }
            let side = if to_wan { Side::ToWan } else { Side::FromWan };
            p.on_frame(ms(k as u64), side, &f);
        }
        let r = p.reading(ms(1000));
        prop_assert!(r.tracked <= 8);
    }
}
