//! `tc -s class show` and `tc -j -s class show` for cake, byte for byte against Linux 6.1 +
//! iproute2 6.1 (tests/golden/class/, recorded by tests/golden/class/collect.sh while several
//! flows were backlogged behind a 1 Mbit cake). Each recorded listing is parsed back into
//! `ClassStats` values and printed again; the result must equal the recording exactly.
//! iproute2 6.1 prints text for `tc -j class show` (no JSON support for classes), so both
//! recordings are text.

#![allow(clippy::unwrap_used)]

use std::path::PathBuf;

use cake::tc::{class_stats_json, class_stats_text, ClassStats};
use cake::CakeConfig;

fn read(name: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden/class")
        .join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// tc's printed size (`4168b`, `57Kb`, `2Mb`) in bytes.
fn size(s: &str) -> u32 {
    if let Some(v) = s.strip_suffix("Mb") {
        v.parse::<u32>().unwrap() * 1024 * 1024
    } else if let Some(v) = s.strip_suffix("Kb") {
        v.parse::<u32>().unwrap() * 1024
    } else {
        s.strip_suffix('b').unwrap().parse().unwrap()
    }
}

/// tc's printed time (`-3.2ms`, `851us`, `1.2s`) in µs.
fn time(s: &str) -> i32 {
    let (neg, s) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s),
    };
    let us = if let Some(v) = s.strip_suffix("us") {
        v.parse::<f64>().unwrap()
    } else if let Some(v) = s.strip_suffix("ms") {
        v.parse::<f64>().unwrap() * 1e3
    } else {
        s.strip_suffix('s').unwrap().parse::<f64>().unwrap() * 1e6
    };
    let us = us.round() as i32;
    if neg {
        -us
    } else {
        us
    }
}

/// Parses a `tc -s class show` listing for cake into (handle major, classes).
fn parse(text: &str) -> (u16, Vec<ClassStats>) {
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len() % 4, 0, "four lines per class");
    let mut major = None;
    let mut out = Vec::new();
    for l in lines.chunks(4) {
        let w: Vec<&str> = l[0].split_whitespace().collect();
        assert_eq!(&w[..2], ["class", "cake"], "{}", l[0]);
        let (maj, min) = w[2].split_once(':').unwrap();
        let maj = u16::from_str_radix(maj, 16).unwrap();
        assert_eq!(*major.get_or_insert(maj), maj);
        let mut c = ClassStats {
            class_id: u32::from_str_radix(min, 16).unwrap(),
            ..ClassStats::default()
        };
        let dropped = l[1].trim().strip_prefix("(dropped ").unwrap();
        c.drops = dropped.split(',').next().unwrap().parse().unwrap();
        let b: Vec<&str> = l[2].split_whitespace().collect();
        assert_eq!(b[0], "backlog");
        c.backlog_bytes = size(b[1]);
        c.backlog_packets = b[2].strip_suffix('p').unwrap().parse().unwrap();
        let x: Vec<&str> = l[3].split_whitespace().collect();
        let mut i = 0;
        while i < x.len() {
            match x[i] {
                "deficit" => c.deficit = x[i + 1].parse().unwrap(),
                "count" => c.count = x[i + 1].parse().unwrap(),
                "dropping" => {
                    c.dropping = true;
                    i -= 1;
                }
                "drop_next" => c.drop_next_us = time(x[i + 1]),
                "blue_prob" => c.p_drop = x[i + 1].parse().unwrap(),
                "blue_timer" => c.blue_timer_us = time(x[i + 1]),
                other => panic!("unexpected word {other:?} in {:?}", l[3]),
            }
            i += 2;
        }
        out.push(c);
    }
    (major.unwrap(), out)
}

fn check_case(name: &str) {
    for (file, json) in [
        (format!("{name}.class"), false),
        (format!("{name}.class_j"), true),
    ] {
        let want = read(&file);
        let (major, classes) = parse(&want);
        assert!(!classes.is_empty(), "{file}: no classes recorded");
        let cfg = CakeConfig {
            handle_major: major,
            ..CakeConfig::with_rate(125_000)
        };
        let got = if json {
            class_stats_json(&cfg, &classes)
        } else {
            class_stats_text(&cfg, &classes)
        };
        assert_eq!(got, want, "{file}");
    }
}

#[test]
fn class_text_matches_kernel_while_cobalt_is_dropping() {
    check_case("plain");
}

#[test]
fn class_text_matches_kernel_while_blue_is_engaged() {
    check_case("overflow");
}

#[test]
fn recordings_cover_dropping_blue_and_idle_classes_in_user_tin_order() {
    let (_, plain) = parse(&read("plain.class"));
    let (_, overflow) = parse(&read("overflow.class"));
    let all: Vec<&ClassStats> = plain.iter().chain(overflow.iter()).collect();
    // Both signs of drop_next, BLUE on and off, an empty listed (decaying or waiting) flow.
    assert!(all.iter().any(|c| c.dropping && c.drop_next_us < 0));
    assert!(all.iter().any(|c| c.dropping && c.drop_next_us > 0));
    assert!(all.iter().any(|c| c.p_drop != 0 && c.blue_timer_us > 0));
    assert!(all.iter().any(|c| c.backlog_packets == 0));
    for list in [&plain, &overflow] {
        // Classes come in ascending id order: Bulk (ping CS1), Best Effort (iperf3), Voice (EF).
        assert!(list.windows(2).all(|w| w[0].class_id < w[1].class_id));
        let tins: Vec<usize> = list.iter().map(|c| c.user_tin()).collect();
        assert_eq!(tins.first(), Some(&0));
        assert_eq!(tins.last(), Some(&2));
        assert!(tins.iter().filter(|&&t| t == 1).count() >= 3);
    }
}

#[test]
fn json_listing_is_the_text_listing_in_iproute2_6_1() {
    let cfg = CakeConfig::with_rate(125_000);
    let c = [ClassStats {
        class_id: 0x556,
        drops: 363,
        backlog_bytes: 58_374,
        backlog_packets: 47,
        deficit: -1181,
        count: 364,
        dropping: true,
        drop_next_us: -3_200,
        p_drop: 0,
        blue_timer_us: 0,
    }];
    let text = class_stats_text(&cfg, &c);
    assert_eq!(
        text,
        "class cake 8001:556 parent 8001: \n (dropped 363, overlimits 0 requeues 0) \n \
         backlog 57Kb 47p requeues 0\n  deficit -1181 count 364 dropping drop_next -3.2ms \
         blue_prob 0\n"
    );
    assert_eq!(class_stats_json(&cfg, &c), text);
}
