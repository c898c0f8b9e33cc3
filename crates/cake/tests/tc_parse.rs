//! Semantics of tc-cake argument parsing (beyond the golden replays).

#![allow(clippy::unwrap_used)]

use cake::tc::{TcArgs, TcError};
use cake::{AckFilterMode, AtmMode, CakeConfig, DiffservMode, FlowMode};

fn cfg(s: &str) -> CakeConfig {
    let args: Vec<&str> = s.split_whitespace().collect();
    CakeConfig::from_tc_args(&args).unwrap()
}

fn err(s: &str) -> TcError {
    let args: Vec<&str> = s.split_whitespace().collect();
    CakeConfig::from_tc_args(&args).unwrap_err()
}

#[test]
fn no_arguments_give_the_kernel_defaults() {
    assert_eq!(cfg(""), CakeConfig::default());
    assert_eq!(
        CakeConfig::default().to_tc_args(),
        "bandwidth unlimited diffserv3 triple-isolate nonat nowash no-ack-filter split-gso \
         rtt 100ms raw overhead 0"
    );
}

#[test]
fn overhead_keywords_accumulate_in_argument_order() {
    let c = cfg("overhead 20 pppoe-ptm ether-vlan");
    assert_eq!(
        (c.overhead, c.atm, c.overhead_set),
        (54, AtmMode::Ptm, true)
    );
    // `overhead N` sets, so it discards what came before.
    assert_eq!(cfg("ethernet overhead 20").overhead, 20);
    assert_eq!(cfg("ethernet overhead 20").mpu, 84);
    // conservative sets 48 and ATM framing.
    let c = cfg("pppoe-vcmux conservative");
    assert_eq!((c.overhead, c.atm), (48, AtmMode::Atm));
}

#[test]
fn raw_keeps_the_mac_header_even_with_later_additions() {
    let c = cfg("ethernet raw ether-vlan");
    assert!(!c.overhead_set);
    assert!(c.raw);
    assert_eq!((c.overhead, c.mpu, c.atm), (4, 84, AtmMode::None));
    assert_eq!(
        c.to_tc_args().split(" rtt 100ms ").nth(1),
        Some("raw overhead 4 mpu 84")
    );
}

#[test]
fn docsis_clears_framing_and_ethernet_keeps_it() {
    assert_eq!(cfg("atm docsis").atm, AtmMode::None);
    assert_eq!(cfg("atm ethernet").atm, AtmMode::Atm);
    assert_eq!(cfg("docsis").mpu, 64);
}

#[test]
fn bandwidth_after_autorate_turns_autorate_off() {
    assert!(!cfg("autorate-ingress bandwidth 20Mbit").autorate);
    let c = cfg("bandwidth 20Mbit autorate-ingress");
    assert!(c.autorate);
    assert_eq!(c.rate_bps, 2_500_000);
    assert_eq!(cfg("bandwidth 20Mbit unlimited").rate_bps, 0);
}

#[test]
fn rtt_sets_target_to_a_twentieth_and_presets_set_both() {
    let c = cfg("rtt 50ms");
    assert_eq!((c.rtt_us, c.target_us), (50_000, 2_500));
    let c = cfg("rtt 0");
    assert_eq!((c.rtt_us, c.target_us), (100_000, 1));
    let c = cfg("rtt 10us");
    assert_eq!((c.rtt_us, c.target_us), (10, 1));
    let c = cfg("interplanetary");
    assert_eq!((c.rtt_us, c.target_us), (1_000_000_000, 50_000_000));
    let c = cfg("satellite rtt 40ms");
    assert_eq!((c.rtt_us, c.target_us), (40_000, 2_000));
}

#[test]
fn a_second_preset_is_an_error_like_tc() {
    assert_eq!(
        err("lan metro"),
        TcError::DuplicatePreset {
            first: "lan",
            second: "metro".into()
        }
    );
}

#[test]
fn later_words_win_within_each_family() {
    let c = cfg(
        "diffserv8 besteffort flows hosts nat nonat wash ack-filter no-ack-filter ingress egress",
    );
    assert_eq!(c.diffserv, DiffservMode::Besteffort);
    assert_eq!(c.flow_mode, FlowMode::Hosts);
    assert!(!c.nat && c.wash && !c.ingress);
    assert_eq!(c.ack_filter, AckFilterMode::None);
    assert_eq!(cfg("diffserv").diffserv, DiffservMode::Diffserv4);
}

#[test]
fn unknown_words_are_named_with_the_accepted_list() {
    let e = err("bandwidth 20Mbit diffserv5");
    assert_eq!(
        e,
        TcError::UnknownKeyword {
            word: "diffserv5".into()
        }
    );
    let msg = e.to_string();
    assert!(msg.starts_with("What is \"diffserv5\"?"));
    assert!(msg.contains("diffserv4") && msg.contains("ack-filter-aggressive"));
}

#[test]
fn bad_values_name_the_option_and_the_accepted_range() {
    let msg = err("overhead 257").to_string();
    assert!(
        msg.contains("\"overhead\"") && msg.contains("-64 to 256"),
        "{msg}"
    );
    let msg = err("mpu -1").to_string();
    assert!(msg.contains("0 to 256"), "{msg}");
    let msg = err("bandwidth 20Mbits").to_string();
    assert!(
        msg.contains("\"bandwidth\"") && msg.contains("kbit"),
        "{msg}"
    );
    assert_eq!(
        err("memlimit"),
        TcError::MissingValue { option: "memlimit" }
    );
    assert!(matches!(
        err("fwmark 0xg"),
        TcError::BadValue {
            option: "fwmark",
            ..
        }
    ));
    assert_eq!(err("help"), TcError::Help);
}

#[test]
fn fwmark_accepts_c_integer_bases() {
    assert_eq!(cfg("fwmark 0xff").fwmark_mask, 255);
    assert_eq!(cfg("fwmark 010").fwmark_mask, 8);
    assert_eq!(cfg("fwmark 7").fwmark_mask, 7);
}

#[test]
fn change_only_touches_the_options_given() {
    let mut c = cfg("bandwidth 20Mbit diffserv4 ethernet");
    c.apply_tc_args(&["bandwidth", "30Mbit"]).unwrap();
    assert_eq!(c.rate_bps, 3_750_000);
    assert_eq!(
        (c.diffserv, c.overhead, c.mpu),
        (DiffservMode::Diffserv4, 38, 84)
    );
    let before = c.clone();
    assert!(c.apply_tc_args(&["bandwidth", "x"]).is_err());
    assert_eq!(c, before);
    // What tc would send for an empty change: nothing.
    assert_eq!(TcArgs::parse(&[]).unwrap(), TcArgs::default());
}

/// Found by the tc_config fuzz target: a rate near u64::MAX in diffserv8 overflowed the 7/8
/// tin-rate step. The kernel's u64 arithmetic wraps; so does ours, without panicking.
#[test]
fn absurd_bandwidth_in_diffserv8_does_not_panic() {
    let args = [
        "diffserv8",
        "dsthost",
        "bandwidth",
        "00072072000000040000004",
    ];
    // 72,072,000,000,040,000,004 bit/s fits in u64 bytes/s and tc accepts it; we refuse it as
    // absurd (above 10Tbit), but an engine configured with it directly must not panic either.
    assert!(matches!(
        CakeConfig::from_tc_args(&args),
        Err(TcError::BadValue {
            option: "bandwidth",
            ..
        })
    ));
    let cfg = CakeConfig {
        rate_bps: 9_009_000_000_005_000_000,
        ..CakeConfig::from_tc_args(&args[..2]).unwrap()
    };
    let stats = cake::CakeStats::fresh(&cfg);
    assert_eq!(stats.tins.len(), 8);
    let _ = cake::Cake::new(cfg, 1);
}

/// Issue 15, item 5: `bandwidth 1bit` parsed as 0 B/s, which CAKE reads as unlimited, and a
/// bandwidth beyond 2^61 B/s printed as 0bit. Both are refused with the accepted range.
#[test]
fn bandwidths_that_would_turn_shaping_off_or_overflow_are_refused() {
    for bw in ["1bit", "0.0001kbit", "100bit", "18446744073709551615bit"] {
        let msg = err(&format!("bandwidth {bw}")).to_string();
        assert!(
            msg.contains("\"bandwidth\"") && msg.contains("a rate from 512bit to 10Tbit"),
            "{bw}: {msg}"
        );
    }
    assert_eq!(cfg("bandwidth 512bit").rate_bps, 64);
    assert_eq!(cfg("bandwidth 1tbit").rate_bps, 125_000_000_000);
    // Turning shaping off is spelled `unlimited`, or (as in tc) an exact 0.
    assert_eq!(cfg("bandwidth 20Mbit unlimited").rate_bps, 0);
    assert_eq!(cfg("bandwidth 0").rate_bps, 0);
    // Every other qdisc's rates go through the same check.
    let e = cake::AnyQdisc::from_tc("htb rate 1bit", 1)
        .unwrap_err()
        .to_string();
    assert!(e.contains("512bit to 10Tbit"), "{e}");
}
