//! `purple-setrate DEV RATE [PARENT]`: sets the rate (bytes/s) of the CAKE qdisc at PARENT
//! (default `root`) on DEV over rtnetlink, exactly as `purple control` does. A small binary for
//! the real-kernel test (tests/refkernel.rs) and for trying the netlink path by hand.

use daemon::config::parse_parent;
use daemon::netlink::{ifindex, CakeNetlink};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
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
