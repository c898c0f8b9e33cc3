//! `purple-setrate DEV RATE [PARENT]`: sets the rate (bytes/s) of the CAKE qdisc at PARENT
//! (default `root`) on DEV over rtnetlink, exactly as `purple control` does. A small binary for
//! the real-kernel test (tests/refkernel.rs) and for trying the netlink path by hand.
//!
//! `purple-setrate DEV stats [PARENT]` instead reads that qdisc's statistics over rtnetlink, as
//! `purple control` does every `cake_stats_interval_ms`, and prints one line:
//! `stats DEV qlen Q backlog BYTES drops D ecn_marks E cake 0|1`.

use daemon::config::parse_parent;
use daemon::netlink::{ifindex, CakeNetlink};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.get(1).map(String::as_str) == Some("stats") {
        stats(&args);
    }
    let (Some(dev), Some(rate)) = (
        args.first(),
        args.get(1).and_then(|r| r.parse::<u64>().ok()),
    ) else {
        eprintln!("usage: purple-setrate DEV RATE_BYTES_PER_S [PARENT]");
        std::process::exit(2);
    };
    let Some(parent) = parse_parent(args.get(2).map_or("root", |s| s.as_str())) else {
        eprintln!("bad parent (\"root\" or \"MAJOR:MINOR\")");
        std::process::exit(2);
    };
    let res = ifindex(dev)
        .and_then(|i| CakeNetlink::open().map(|nl| (i, nl)))
        .and_then(|(i, mut nl)| nl.set_rate(i, parent, rate));
    match res {
        Ok(()) => println!("ok {dev} {rate}"),
        Err(e) => {
            eprintln!("purple-setrate {dev}: {e}");
            std::process::exit(1);
        }
    }
}

/// `purple-setrate DEV stats [PARENT]`: prints the qdisc's statistics and exits.
fn stats(args: &[String]) -> ! {
    let dev = args.first().map_or("", String::as_str);
    let Some(parent) = parse_parent(args.get(2).map_or("root", |s| s.as_str())) else {
        eprintln!("bad parent (\"root\" or \"MAJOR:MINOR\")");
        std::process::exit(2);
    };
    let res = ifindex(dev)
        .and_then(|i| CakeNetlink::open().map(|nl| (i, nl)))
        .and_then(|(i, mut nl)| nl.qdisc_stats(i, parent));
    match res {
        Ok(s) => {
            // `sent_bytes` last, and only when the kernel gave it.
            let sent = s
                .sent_bytes
                .map_or(String::new(), |b| format!(" sent_bytes {b}"));
            println!(
                "stats {dev} qlen {} backlog {} drops {} ecn_marks {} cake {}{sent}",
                s.qlen,
                s.backlog_bytes,
                s.drops,
                s.ecn_marks,
                u8::from(s.is_cake)
            );
            std::process::exit(0)
        }
        Err(e) => {
            eprintln!("purple-setrate {dev} stats: {e}");
            std::process::exit(1)
        }
    }
}
