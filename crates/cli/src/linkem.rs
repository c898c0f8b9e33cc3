//! `purple linkem IF_A IF_B [--up RATE | --up-trace FILE] [--down RATE | --down-trace FILE]
//! [--delay-ms D] [--up-delay-ms D] [--down-delay-ms D] [--buffer-packets N] [--buffer-bytes B]
//! [--loss P] [--name N] [--ctl PATH] [--seed N] [--capacity-noise F] [--capacity-bias F]
//! [--icmp shared|apart|blocked]`:
//! a link emulator (like mahimahi's mm-link) as a bridge, until SIGINT/SIGTERM.

use std::path::PathBuf;

use dataplane::linkem::{Capacity, Charge, IcmpPolicy, LinkConfig};
use dataplane::BridgeConfig;
use qdisc::Duration;

/// The command line of `purple linkem`. "up" is IF_A to IF_B, "down" IF_B to IF_A.
#[derive(clap::Args, Debug)]
pub struct LinkemArgs {
    /// First interface (frames from it go "up").
    pub if_a: String,
    /// Second interface (frames from it go "down").
    pub if_b: String,
    /// Up capacity in tc syntax (e.g. 10Mbit); omitted: unlimited.
    #[arg(long, conflicts_with = "up_trace")]
    pub up: Option<String>,
    /// Up capacity from a mahimahi trace or a step/ramp schedule file.
    #[arg(long)]
    pub up_trace: Option<PathBuf>,
    /// Down capacity in tc syntax; omitted: unlimited.
    #[arg(long, conflicts_with = "down_trace")]
    pub down: Option<String>,
    /// Down capacity from a mahimahi trace or a step/ramp schedule file.
    #[arg(long)]
    pub down_trace: Option<PathBuf>,
    /// One-way propagation delay in both directions, milliseconds.
    #[arg(long, default_value_t = 0.0)]
    pub delay_ms: f64,
    /// Up delay (overrides --delay-ms).
    #[arg(long)]
    pub up_delay_ms: Option<f64>,
    /// Down delay (overrides --delay-ms).
    #[arg(long)]
    pub down_delay_ms: Option<f64>,
    /// Droptail buffer limit in packets waiting (not counting the one on the link), per
    /// direction (default 1000 unless only --buffer-bytes is given).
    #[arg(long)]
    pub buffer_packets: Option<u32>,
    /// Droptail buffer limit in bytes waiting, per direction.
    #[arg(long)]
    pub buffer_bytes: Option<u64>,
    /// Random loss probability in [0, 1] of a frame the link sends (lost on the wire, after
    /// using the capacity), per direction.
    #[arg(long, default_value_t = 0.0)]
    pub loss: f64,
    /// Name (control socket /run/purple/NAME.sock).
    #[arg(long, default_value = "linkem")]
    pub name: String,
    /// Control socket path (overrides --name).
    #[arg(long)]
    pub ctl: Option<PathBuf>,
    /// Seed for loss and estimate noise.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Relative noise of the reported capacity estimate (0.1 = +-10%).
    #[arg(long, default_value_t = 0.0)]
    pub capacity_noise: f64,
    /// Relative bias of the reported capacity estimate (0.2 = 20% high).
    #[arg(long, default_value_t = 0.0)]
    pub capacity_bias: f64,
    /// How both directions' buffers treat ICMP: `shared` (like any packet), `apart` (a queue
    /// of its own served first, so pings miss the data's queue, as on Starlink) or `blocked`.
    #[arg(long, default_value = "shared")]
    pub icmp: String,
}

fn capacity(rate: &Option<String>, trace: &Option<PathBuf>) -> Result<Capacity, String> {
    if let Some(p) = trace {
        let text =
            std::fs::read_to_string(p).map_err(|e| format!("cannot read {}: {e}", p.display()))?;
        return Capacity::from_trace_text(&text).map_err(|e| format!("{}: {e}", p.display()));
    }
    match rate.as_deref() {
        None | Some("unlimited") => Ok(Capacity::Unlimited),
        Some(r) => qdisc::tc_units::parse_shaper_rate(r)
            .map(Capacity::Rate)
            .map_err(|e| format!("bad rate {r:?}: {e}")),
    }
}

fn delay(ms: f64) -> Result<Duration, String> {
    if ms.is_finite() && (0.0..=1e7).contains(&ms) {
        Ok(Duration::from_secs_f64(ms / 1000.0))
    } else {
        Err(format!("bad delay {ms} ms"))
    }
}

/// The two directions' configurations from the command line.
pub fn configs(a: &LinkemArgs) -> Result<(LinkConfig, LinkConfig), String> {
    if !(0.0..=1.0).contains(&a.loss) {
        return Err(format!("--loss {} is not a probability", a.loss));
    }
    let buffer_packets = match (a.buffer_packets, a.buffer_bytes) {
        (None, Some(_)) => None,
        (p, _) => Some(p.unwrap_or(dataplane::linkem::DEFAULT_BUFFER_PACKETS)),
    };
    let icmp = IcmpPolicy::parse(&a.icmp).map_err(|e| format!("--icmp: {e}"))?;
    let base = |capacity, d| LinkConfig {
        capacity,
        delay: d,
        buffer_packets,
        buffer_bytes: a.buffer_bytes,
        loss: a.loss,
        seed: a.seed,
        capacity_noise: a.capacity_noise,
        capacity_bias: a.capacity_bias,
        icmp,
        charge: Charge::IpSegments,
    };
    let up = base(
        capacity(&a.up, &a.up_trace)?,
        delay(a.up_delay_ms.unwrap_or(a.delay_ms))?,
    );
    let mut down = base(
        capacity(&a.down, &a.down_trace)?,
        delay(a.down_delay_ms.unwrap_or(a.delay_ms))?,
    );
    down.seed = a.seed.wrapping_add(1);
    Ok((up, down))
}

/// Runs the emulator in this thread until a termination signal; prints its statistics then.
pub fn run(a: LinkemArgs) -> Result<(), String> {
    let (up, down) = configs(&a)?;
    let ctl_path = Some(
        a.ctl
            .clone()
            .unwrap_or_else(|| dataplane::ctl::default_path(&a.name)),
    );
    let cfg = BridgeConfig {
        if_a: a.if_a,
        if_b: a.if_b,
        egress: String::new(),
        ingress: String::new(),
        name: a.name,
        ctl_path,
        ctl_group: None,
        seed: a.seed,
    };
    let mut em = dataplane::linkem::open(cfg, up, down).map_err(|e| e.to_string())?;
    em.stop_on_signals().map_err(|e| e.to_string())?;
    em.run().map_err(|e| e.to_string())?;
    eprint!("{}", em.stats_text());
    Ok(())
}
