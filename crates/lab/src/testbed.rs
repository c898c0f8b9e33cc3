//! The testbed of a run: its namespaces and veth pairs ([`Topo`]), the link-emulator hop
//! (`purple linkem`, netem or a kernel bridge), and the router's stage (purple's bridge in a
//! thread, or Linux qdiscs by `tc`).

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use controller::Direction;
use os::netns::{Netns, Proc};

use crate::error::io;
use crate::scenario::{self, Contender, Scenario};
use crate::{DelayStage, Error, CLIENT, SERVER};

/// The namespaces of one run, deleted (in reverse order) on drop.
pub(crate) struct Topo {
    pub(crate) prefix: String,
    pub(crate) client: Netns,
    pub(crate) router: Netns,
    pub(crate) linkem: Netns,
    pub(crate) server: Netns,
}

impl Topo {
    pub(crate) fn build() -> Result<Topo, Error> {
        let prefix = os::netns::unique_prefix("plab");
        let client = Netns::create(&format!("{prefix}-client"))?;
        let router = Netns::create(&format!("{prefix}-router"))?;
        let linkem = Netns::create(&format!("{prefix}-linkem"))?;
        let server = Netns::create(&format!("{prefix}-server"))?;
        client.veth("c0", &router, "r0")?;
        router.veth("r1", &linkem, "l0")?;
        linkem.veth("l1", &server, "s0")?;
        client.ip(&["addr", "add", &format!("{CLIENT}/24"), "dev", "c0"])?;
        server.ip(&["addr", "add", &format!("{SERVER}/24"), "dev", "s0"])?;
        for h in [&client, &server] {
            h.sysctl("net.ipv4.tcp_ecn", "1")?;
            // Let unprivileged datagram ICMP sockets work too (the echo client falls back to
            // one where it may not open a raw socket).
            let _ = h.sysctl("net.ipv4.ping_group_range", "0 2147483647");
        }
        Ok(Topo {
            prefix,
            client,
            router,
            linkem,
            server,
        })
    }
}

/// Starts the delay stage in the linkem namespace.
pub(crate) fn start_delay(
    scn: &Scenario,
    t: &Topo,
    stage: &DelayStage,
    icmp_apart: bool,
) -> Result<(Option<Proc>, String, Option<std::time::Instant>), Error> {
    match stage {
        DelayStage::Passthrough => {
            if scn.needs_linkem {
                return Err(Error::Unsupported(format!(
                    "scenario {} needs `purple linkem` (the link emulator), which this build lacks",
                    scn.name
                )));
            }
            kernel_bridge(&t.linkem, "l0", "l1")?;
            Ok((
                None,
                "kernel bridge (no delay: purple linkem absent)".into(),
                None,
            ))
        }
        DelayStage::Netem => {
            if scn.needs_linkem {
                return Err(Error::Unsupported(format!(
                    "scenario {} needs a varying capacity, which the netem stage does not model",
                    scn.name
                )));
            }
            let l = &t.linkem;
            tc_wire(l, "l0", "l1", None)?;
            // l0's egress goes towards the client (down), l1's towards the server (up).
            for (dev, ms) in [
                ("l0", scn.link.down_delay_ms()),
                ("l1", scn.link.up_delay_ms()),
            ] {
                let d = format!("{ms}ms");
                l.exec(
                    "tc",
                    &[
                        "qdisc", "add", "dev", dev, "root", "netem", "delay", &d, "limit", "10000",
                    ],
                )?;
            }
            Ok((
                None,
                format!("kernel netem, {}", scn.link.delay_words()),
                None,
            ))
        }
        DelayStage::Linkem(bin) => {
            let name = format!("{}-linkem", t.prefix);
            let ctl = format!("/run/purple/{name}.sock");
            let ctl_path = ctl.clone();
            let mut args: Vec<String> = vec!["linkem".into(), "l0".into(), "l1".into()];
            let trace = std::env::temp_dir().join(format!("{name}.down.trace"));
            let up_trace = std::env::temp_dir().join(format!("{name}.up.trace"));
            let (link_args, files) = scn
                .link
                .linkem_args(&up_trace, &trace)
                .map_err(|e| Error::Unsupported(format!("scenario {}: {e}", scn.name)))?;
            for (p, text) in &files {
                std::fs::write(p, text).map_err(io(format!("write {}", p.display())))?;
            }
            args.extend(link_args);
            args.extend([
                "--name".into(),
                name.clone(),
                "--ctl".into(),
                ctl.clone(),
                "--seed".into(),
                "1".into(),
            ]);
            if icmp_apart {
                args.extend(["--icmp".into(), "apart".into()]);
            }
            let a: Vec<&str> = args.iter().map(String::as_str).collect();
            let bin = bin.display().to_string();
            // The lab is the I/O boundary: its clock anchors the emulator's trace.
            #[allow(clippy::disallowed_methods)]
            let started = std::time::Instant::now();
            let mut p = t.linkem.spawn(&bin, &a, true)?;
            std::thread::sleep(Duration::from_millis(300));
            // Once its control socket exists the emulator has read its traces (it parses its
            // options first): remove them then, or leave them if it is slower than 5 s.
            for _ in 0..50 {
                if Path::new(&ctl_path).exists() {
                    for f in [&trace, &up_trace] {
                        let _ = std::fs::remove_file(f);
                    }
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            if let Some(s) = p.exited() {
                return Err(Error::Exited {
                    what: format!("purple {}", a.join(" ")),
                    status: s,
                });
            }
            Ok((
                Some(p),
                format!(
                    "purple linkem, {}{}",
                    scn.link.delay_words(),
                    if icmp_apart {
                        ", ICMP queued apart"
                    } else {
                        ""
                    }
                ),
                Some(started),
            ))
        }
    }
}

/// Joins `a` and `b` with a kernel bridge `br0` in `ns`.
pub(crate) fn kernel_bridge(ns: &Netns, a: &str, b: &str) -> Result<(), Error> {
    ns.ip(&["link", "add", "br0", "type", "bridge"])?;
    ns.ip(&["link", "set", a, "master", "br0"])?;
    ns.ip(&["link", "set", b, "master", "br0"])?;
    Ok(ns.ip(&["link", "set", "br0", "up"])?)
}

/// Joins `a` and `b` in `ns` with tc: everything arriving on one is redirected out of the
/// other (`ingress` + `matchall` + `mirred egress redirect`), so it passes the egress qdisc
/// there. For kernels without the bridge module (the reference guest). With `local`, an
/// address of `ns` on `b` (where a daemon probes from) receives too: IPv4 to it passes to the
/// stack instead of being redirected (a `u32` match without an action: the guest kernel loads
/// no `act_gact`), and ARP arriving on `b` is mirrored to `a` and passed as well (the stack
/// answers for `local`, the hosts behind `a` for theirs); filters at priorities 1 and 2,
/// before the redirect. Nothing else changes: no other packet matches them.
pub(crate) fn tc_wire(ns: &Netns, a: &str, b: &str, local: Option<&str>) -> Result<(), Error> {
    for (from, to) in [(a, b), (b, a)] {
        ns.exec(
            "tc",
            &["qdisc", "add", "dev", from, "handle", "ffff:", "ingress"],
        )?;
        ns.exec(
            "tc",
            &[
                "filter", "add", "dev", from, "parent", "ffff:", "matchall", "action", "mirred",
                "egress", "redirect", "dev", to,
            ],
        )?;
    }
    if let Some(addr) = local {
        let dst = format!("{addr}/32");
        ns.exec(
            "tc",
            &[
                "filter", "add", "dev", b, "parent", "ffff:", "prio", "1", "protocol", "ip", "u32",
                "match", "ip", "dst", &dst, "flowid", "ffff:1",
            ],
        )?;
        ns.exec(
            "tc",
            &[
                "filter", "add", "dev", b, "parent", "ffff:", "prio", "2", "protocol", "arp",
                "matchall", "action", "mirred", "egress", "mirror", "dev", a,
            ],
        )?;
    }
    Ok(())
}

/// Puts the contender's qdisc for direction `dir` shaped to `rate_bit_s` on `dev` with Linux's
/// tc: CAKE as is (with `autorate-ingress ingress` on the download for
/// [`scenario::Shape::CakeAutorateIngress`]), the seed's HTB (`htb default 1`, class `rate R
/// burst 15k`, the child under it), or the bare qdisc.
pub(crate) fn kernel_qdisc(
    ns: &Netns,
    dev: &str,
    c: &Contender,
    dir: Direction,
    rate_bit_s: u64,
) -> Result<(), Error> {
    let rate = format!("{}kbit", rate_bit_s / 1000);
    let tc = |args: &[&str]| ns.exec("tc", args);
    match c.shape {
        scenario::Shape::Cake(_)
        | scenario::Shape::CakeAutorateIngress(_)
        | scenario::Shape::Controlled { .. }
        | scenario::Shape::Script { .. } => {
            // The same words as the bridge is given (`Contender::tc`).
            let line = c.tc(dir, rate_bit_s);
            let mut v = vec!["qdisc", "add", "dev", dev, "root"];
            v.extend(line.split_whitespace());
            Ok(tc(&v)?)
        }
        scenario::Shape::Htb(child) => {
            tc(&[
                "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "1",
            ])?;
            tc(&[
                "class", "add", "dev", dev, "parent", "1:", "classid", "1:1", "htb", "rate", &rate,
                "burst", "15k",
            ])?;
            let mut v = vec!["qdisc", "add", "dev", dev, "parent", "1:1", "handle", "10:"];
            v.extend(child.split_whitespace());
            Ok(tc(&v)?)
        }
        scenario::Shape::Bare(q) => {
            let mut v = vec!["qdisc", "add", "dev", dev, "root"];
            v.extend(q.split_whitespace());
            Ok(tc(&v)?)
        }
    }
}

/// `tc -s -j qdisc show` of `ns` (kernel router), as JSON values.
pub(crate) fn kernel_qdisc_stats(ns: &Netns) -> Vec<serde_json::Value> {
    let o = std::process::Command::new("ip")
        .args([
            "netns",
            "exec",
            ns.name(),
            "tc",
            "-s",
            "-j",
            "qdisc",
            "show",
        ])
        .output();
    match o.ok().and_then(|o| serde_json::from_slice(&o.stdout).ok()) {
        Some(serde_json::Value::Array(a)) => a,
        _ => Vec::new(),
    }
}

pub(crate) type BridgeHandle = (
    dataplane::Stopper,
    std::thread::JoinHandle<Result<String, Error>>,
);

/// Starts our bridge in the router namespace; the thread returns the bridge's stats JSON.
pub(crate) fn start_bridge(
    t: &Topo,
    egress: String,
    ingress: String,
    ctl_path: Option<PathBuf>,
    passive: bool,
) -> Result<BridgeHandle, Error> {
    let cfg = dataplane::BridgeConfig {
        if_a: "r0".into(),
        if_b: "r1".into(),
        egress,
        ingress,
        name: format!("{}-router", t.prefix),
        ctl_path,
        ctl_group: None,
        seed: 1,
    };
    let path = t.router.path();
    let (tx, rx) = mpsc::channel();
    let h = std::thread::Builder::new()
        .name("lab bridge".into())
        .spawn(move || {
            // A failure before the bridge runs goes to the starter (the thread's own result is
            // then never read).
            if let Err(source) = os::netns::enter(&path) {
                let _ = tx.send(Err(Error::Io {
                    what: "router setns".into(),
                    source,
                }));
                return Ok(String::new());
            }
            let mut br = match dataplane::Bridge::new(cfg) {
                Ok(b) => b,
                Err(e) => {
                    let _ = tx.send(Err(Error::Bridge(e)));
                    return Ok(String::new());
                }
            };
            if passive {
                let p = controller::passive::PassiveParams::default();
                if let Err(e) = br.set_passive(Some(p)) {
                    let _ = tx.send(Err(Error::Bridge(e)));
                    return Ok(String::new());
                }
            }
            let _ = tx.send(Ok(br.stopper()));
            br.run()?;
            Ok(br.stats_json())
        })
        .map_err(io("cannot spawn the bridge thread"))?;
    match rx.recv_timeout(Duration::from_secs(5)) {
        Ok(Ok(s)) => Ok((s, h)),
        Ok(Err(e)) => {
            let _ = h.join();
            Err(e)
        }
        Err(_) => Err(Error::NotStarted("the bridge".into())),
    }
}
