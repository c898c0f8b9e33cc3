//! A lab run's configuration: the stages of the router and the link-emulator hop
//! ([`RouterStage`], [`DelayStage`]), the options ([`LabOpts`]) and the faults to inject
//! ([`Fault`]).

use std::path::{Path, PathBuf};

use crate::{autorate, Error};

/// The link-emulator hop between router and server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DelayStage {
    /// `purple linkem` (this binary) with the scenario's delay and capacity.
    Linkem(PathBuf),
    /// A kernel bridge: no delay, no capacity limit (for when linkem is absent).
    Passthrough,
    /// A kernel bridge with `netem delay D limit 10000` on both ports (the reference kernel,
    /// which has netem; fixed-capacity scenarios only).
    Netem,
}

/// What shapes traffic in the router namespace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RouterStage {
    /// Our bridge ([`dataplane::Bridge`]) with the contender's qdiscs.
    Purple,
    /// A kernel bridge with Linux's own qdiscs set by `tc` (sch_cake, fq_codel, htb, pfifo);
    /// only where the kernel has them (the reference kernel guest).
    Kernel,
}

impl DelayStage {
    /// `Linkem(bin)` when `bin linkem --help` succeeds, else `Passthrough`.
    pub fn detect(purple_bin: Option<&Path>) -> DelayStage {
        match purple_bin {
            Some(b) if linkem_available(b) => DelayStage::Linkem(b.to_path_buf()),
            _ => DelayStage::Passthrough,
        }
    }
}

/// Whether `purple_bin linkem --help` succeeds (the link emulator is built in).
pub fn linkem_available(purple_bin: &Path) -> bool {
    std::process::Command::new(purple_bin)
        .args(["linkem", "--help"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// How to run.
#[derive(Clone, Debug)]
pub struct LabOpts {
    /// Seconds of load per test.
    pub seconds: f64,
    /// Seconds of idle probing before the load (the base RTT).
    pub idle_seconds: f64,
    /// The link-emulator stage.
    pub delay: DelayStage,
    /// Congestion control set on every TCP socket.
    pub cc: &'static str,
    /// The router stage.
    pub router: RouterStage,
    /// The `purple` binary that runs `purple control` and `purple reflector` for the
    /// controlled contenders (`None`: the link emulator's binary, if that is `purple linkem`).
    pub purple_bin: Option<PathBuf>,
    /// Where a controlled contender's daemon configuration and decision log go (`None`: a
    /// directory `purple-lab/<run>` under the system's temporary directory, kept after the run).
    pub control_dir: Option<PathBuf>,
    /// Faults injected into the testbed (none by default).
    pub faults: Vec<Fault>,
    /// The cake-autorate checkout that [`crate::scenario::CAKE_AUTORATE_SCRIPT`] runs.
    pub cake_autorate: Option<autorate::Checkout>,
    /// The daemon contenders probe the server's six [`ECHO_REFLECTORS`](crate::ECHO_REFLECTORS) with ICMP echo, as the
    /// real cake-autorate does, instead of the `purple reflector` with UDP timestamps (so the
    /// two see the same signal when compared).
    pub echo_reflectors: bool,
}

/// A fault injected into the testbed, to check that what depends on it fails loudly.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The server ignores ICMP echo requests (`net.ipv4.icmp_echo_ignore_all`), as hosts
    /// behind some firewalls and CGNATs do: the ICMP latency probe gets no reply, and a run with
    /// an ICMP probe fails naming it rather than reporting a latency; on a scenario whose
    /// daemons probe with ICMP echo (`starlink`), every daemon probe is lost.
    NoIcmpEcho,
    /// The link emulator queues ICMP apart from data and serves it first (`purple linkem
    /// --icmp apart`), as Starlink users observe: ICMP echo probes see no bloat while downloads
    /// do. Needs the `purple linkem` delay stage.
    IcmpApart,
}

impl Fault {
    /// Every fault.
    pub const ALL: [Fault; 2] = [Fault::NoIcmpEcho, Fault::IcmpApart];

    /// The fault's command-line name (what [`Fault::parse`] accepts for it).
    pub fn name(self) -> &'static str {
        match self {
            Fault::NoIcmpEcho => "no-icmp-echo",
            Fault::IcmpApart => "icmp-apart",
        }
    }

    /// The fault called `name`, or an error naming the accepted ones.
    pub fn parse(name: &str) -> Result<Fault, Error> {
        Fault::ALL
            .into_iter()
            .find(|f| f.name() == name)
            .ok_or_else(|| {
                let names: Vec<&str> = Fault::ALL.iter().map(|f| f.name()).collect();
                Error::Unsupported(format!(
                    "unknown fault {name:?} (accepted: {})",
                    names.join(", ")
                ))
            })
    }
}

impl LabOpts {
    /// `seconds` of load, 2 s idle (1 s for runs under 10 s), the given stage, CUBIC.
    pub fn new(seconds: f64, delay: DelayStage) -> LabOpts {
        LabOpts {
            seconds,
            idle_seconds: if seconds < 10.0 { 1.0 } else { 2.0 },
            delay,
            cc: "cubic",
            router: RouterStage::Purple,
            purple_bin: None,
            control_dir: None,
            faults: Vec::new(),
            cake_autorate: None,
            echo_reflectors: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_fault_parses_from_its_name_and_a_bad_one_names_the_accepted() {
        for f in Fault::ALL {
            assert_eq!(Fault::parse(f.name()).ok(), Some(f));
        }
        let err = Fault::parse("no-icmp").err().map(|e| e.to_string());
        let err = err.unwrap_or_default();
        assert!(
            err.contains("no-icmp-echo") && err.contains("icmp-apart"),
            "{err}"
        );
    }
}
