//! `purple bridge IF_A IF_B [--egress Q] [--ingress Q] [--queues N] [--name N] [--ctl PATH]
//! [--ctl-group G] [--rt-priority P] [--spin-us US] [--busy-poll-us US] [--batch-us US]
//! [--no-rejoin]`: run the userspace dataplane until SIGINT/SIGTERM.

use std::path::PathBuf;

use dataplane::{Bridge, BridgeConfig, LoopOptions, MqBridge};

/// The command line.
#[derive(clap::Args, Debug)]
pub struct BridgeArgs {
    /// LAN-side interface.
    pub if_a: String,
    /// WAN-side interface.
    pub if_b: String,
    /// Qdisc for IF_A -> IF_B in tc syntax, e.g. "cake bandwidth 20Mbit nat", or with
    /// --queues, "cake_mq bandwidth 1Gbit nat" (one rate shared by the queues).
    #[arg(long, default_value = "pfifo")]
    pub egress: String,
    /// Qdisc for IF_B -> IF_A in tc syntax, e.g. "cake bandwidth 100Mbit ingress".
    #[arg(long, default_value = "pfifo")]
    pub ingress: String,
    /// Forwarding threads (1-64), each with its own sockets; each interface's frames are spread
    /// over them by flow hash (PACKET_FANOUT). A "cake_mq ARGS" direction runs one CAKE shard
    /// per queue sharing the configured rate (docs/cake-mq.md); any other qdisc runs one
    /// instance per queue, and a shaper (cake with a bandwidth, htb) is refused above one
    /// queue. Default 1 (one thread); "cake_mq" with the default runs one shard.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub queues: u16,
    /// Bridge name (control socket /run/purple/NAME.sock).
    #[arg(long, default_value = "purple")]
    pub name: String,
    /// Control socket path (overrides --name). A stale socket there is replaced; anything else
    /// (a file, a link, a running bridge's socket) is an error.
    #[arg(long)]
    pub ctl: Option<PathBuf>,
    /// Also let this group (name or gid) use the control socket (default: root and the user
    /// running the bridge only); e.g. the group of the user `purple control` runs as. The
    /// socket's directory must let the group in: a missing one is created 0750 for the group,
    /// an existing one is left as it is.
    #[arg(long, value_name = "GROUP")]
    pub ctl_group: Option<String>,
    /// How the forwarding loop runs.
    #[command(flatten)]
    pub tuning: LoopTuning,
}

/// The forwarding loop's timing and batching options (`purple bridge`, `purple bench
/// dataplane`).
#[derive(clap::Args, Clone, Copy, Debug, Default)]
pub struct LoopTuning {
    /// Run the forwarding loop under SCHED_FIFO at this priority (1-99) so the shaper's
    /// timing holds on a busy machine.
    #[arg(long)]
    pub rt_priority: Option<i32>,
    /// Spin instead of sleeping this close (µs) to the shaper's next release time (default 25).
    #[arg(long)]
    pub spin_us: Option<f64>,
    /// After frames arrive keep polling this long (µs) before sleeping (default 0: off); a
    /// reply arriving within it skips a wake-up.
    #[arg(long)]
    pub busy_poll_us: Option<f64>,
    /// While a shaper is the limit, dequeue at most once per this many µs (default 0: at every
    /// release time): packets due in between leave together, so split-gso segments rejoin and
    /// the CPU cost per Gbit/s falls, for up to this much extra delay. Useful at 1 Gbit/s and
    /// up; at tens of Mbit/s release times are further apart than any sensible value.
    #[arg(long)]
    pub batch_us: Option<f64>,
    /// Send every segment CAKE cut from a super-packet as its own frame, instead of rejoining a
    /// flow's segments that leave together (the frames on the wire are the same; this only
    /// costs more CPU).
    #[arg(long)]
    pub no_rejoin: bool,
}

impl LoopTuning {
    /// Applies the options to `bridge` (a [`Bridge`] or a [`MqBridge`]); `--rt-priority` puts
    /// a [`Bridge`]'s calling thread (the one that will run it) under `SCHED_FIFO` at once, and
    /// each of a [`MqBridge`]'s forwarding threads when it starts.
    pub fn apply(&self, bridge: &mut impl LoopOptions) -> Result<(), dataplane::Error> {
        let ns = |us: f64| (us.max(0.0) * 1e3) as u64;
        if let Some(us) = self.spin_us {
            bridge.set_spin_ns(ns(us));
        }
        if let Some(us) = self.busy_poll_us {
            bridge.set_busy_poll_ns(ns(us));
        }
        if let Some(us) = self.batch_us {
            bridge.set_batch_ns(ns(us));
        }
        bridge.set_rejoin(!self.no_rejoin);
        if let Some(p) = self.rt_priority {
            bridge.set_rt_priority(p)?;
        }
        Ok(())
    }
}

/// Whether a direction's qdisc `spec` is a cake_mq group.
fn is_cake_mq(spec: &str) -> bool {
    spec.split_whitespace().next() == Some("cake_mq")
}

/// A seed from the system's random source: CAKE's flow-hash key derives from it, and a key
/// known in advance would let a sender pick flows that collide in the same queue.
fn os_seed() -> Result<u64, String> {
    use std::io::Read;
    let mut b = [0u8; 8];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .map_err(|e| format!("cannot read /dev/urandom for the hash key: {e}"))?;
    Ok(u64::from_le_bytes(b))
}

/// Runs the bridge in this thread until a termination signal (under `SCHED_FIFO` at
/// `rt_priority` if given). Errors are printable.
pub fn run(a: BridgeArgs) -> Result<(), String> {
    let ctl_path = Some(
        a.ctl
            .unwrap_or_else(|| dataplane::ctl::default_path(&a.name)),
    );
    let ctl_group = match &a.ctl_group {
        Some(g) => Some(
            dataplane::ctl_server::lookup_group(g).map_err(|e| format!("--ctl-group {g}: {e}"))?,
        ),
        None => None,
    };
    let cfg = BridgeConfig {
        if_a: a.if_a,
        if_b: a.if_b,
        egress: a.egress,
        ingress: a.ingress,
        name: a.name,
        ctl_path,
        ctl_group,
        seed: os_seed()?,
    };
    let queues = usize::from(a.queues);
    if queues > 1 || is_cake_mq(&cfg.egress) || is_cake_mq(&cfg.ingress) {
        let mut bridge = MqBridge::new(cfg, queues).map_err(|e| e.to_string())?;
        bridge.stop_on_signals().map_err(|e| e.to_string())?;
        a.tuning.apply(&mut bridge).map_err(|e| e.to_string())?;
        bridge.run().map_err(|e| e.to_string())?;
        eprint!("{}", bridge.stats_text());
    } else {
        let mut bridge = Bridge::new(cfg).map_err(|e| e.to_string())?;
        bridge.stop_on_signals().map_err(|e| e.to_string())?;
        a.tuning.apply(&mut bridge).map_err(|e| e.to_string())?;
        bridge.run().map_err(|e| e.to_string())?;
        eprint!("{}", bridge.stats_text());
    }
    Ok(())
}
