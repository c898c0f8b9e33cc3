//! The radio with `purple control` driving **Linux's own sch_cake** over netlink, inside the
//! reference kernel (Debian 6.1 under QEMU TCG, `shared/tools/refkernel/run-in-guest.sh`).
//!
//! Everything runs in the guest, from a shell script ([`guest_script`]) that this binary
//! writes, with the binary itself shipped in by `run-in-guest.sh -i` (as [`crate::kernel`]
//! does):
//!
//! ```text
//! cli c0 ── r0 [rtr] r1 ── l0 [lnk] l1 ── s0 srv
//! 10.79.1.1  CAKE r0 (down)  netem l0: 10 ms, rate HIGH <-> LOW every STEP s  10.79.3.1
//!            CAKE r1 (up)    netem l1: 10 ms, rate UP                  (reflector, iperf3 -s)
//! ```
//!
//! Routed namespaces (no bridge, no mirred). The bottleneck is **netem's rate** on the link
//! namespace's `l0` egress (the downlink), changed in place (`tc qdisc change ... netem rate`)
//! through one long-lived `tc -batch` reading a fifo, so a step costs no exec. The router
//! namespace holds kernel CAKE on both egresses; for a daemon mode `purple control` runs there
//! with actuator `netlink` (download = root CAKE on `r0`, counter `r0` tx; upload = `r1`) and
//! probes `udp:10.79.3.1:8862` (a `purple reflector` on the server) across the emulated link.
//! The load is one `iperf3 -R` download; the latency probe is `ping -i 0.1` from the client.
//! The kernel CAKE's bandwidth is read back with `tc -j qdisc show dev r0` a second before each
//! capacity step and near the end.
//!
//! TCG is slow and, on a shared host, jittery (a guest vCPU waits for a host core): rates are
//! scaled down (default 8 <-> 4 Mbit/s, 2 up) and every figure carries that noise.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use qdisc::quantile;

use crate::control::{parse_log, ControlPoint};
use crate::error::io;
use crate::Error;

/// What to run in the guest.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelControlOpts {
    /// Modes, run one after another in one guest: a daemon algorithm (`"purple"`,
    /// `"cake-autorate"`, `"purple-aimd"`, `"sqm-autorate"`) or `"static"` (CAKE fixed at the
    /// high capacity, no daemon).
    pub modes: Vec<String>,
    /// The downlink's high capacity, Mbit/s (the run starts there). Default 8.
    pub high_mbit: f64,
    /// The downlink's low capacity, Mbit/s. Default 4.
    pub low_mbit: f64,
    /// The uplink's capacity, Mbit/s. Default 2.
    pub up_mbit: f64,
    /// The emulated radio's buffer (netem limit), packets. Default 100.
    pub buffer_packets: u32,
    /// Seconds between capacity steps (whole seconds). Default 6.
    pub step_s: u32,
    /// Seconds idle before the load (ping baseline). Default 3.
    pub idle_s: u32,
    /// Seconds of load (whole seconds). Default 18 (high, low, high).
    pub load_s: u32,
    /// Wall-clock limit for the whole guest run, s. Default 300.
    pub timeout_s: u64,
}

impl Default for KernelControlOpts {
    fn default() -> Self {
        KernelControlOpts {
            modes: vec!["purple".into(), "static".into()],
            high_mbit: 8.0,
            low_mbit: 4.0,
            up_mbit: 2.0,
            buffer_packets: 100,
            step_s: 6,
            idle_s: 3,
            load_s: 18,
            timeout_s: 300,
        }
    }
}

/// Whether `mode` names one of the daemon's laws (`daemon::config::algorithms`, from the
/// registry `controller::laws`): the modes the guest script accepts besides `"static"`.
pub fn is_algorithm(mode: &str) -> bool {
    daemon::config::algorithms()
        .iter()
        .any(|k| k.name() == mode)
}

impl KernelControlOpts {
    /// Checks the options; the error says which is wrong.
    pub fn validate(&self) -> Result<(), Error> {
        let bad = |why: &str| Err(Error::Option(why.to_string()));
        if self.modes.is_empty() {
            return bad("no modes to run");
        }
        for m in &self.modes {
            if m != "static" && !is_algorithm(m) {
                let names: Vec<&str> = daemon::config::algorithms()
                    .iter()
                    .map(|k| k.name())
                    .collect();
                return Err(Error::Option(format!(
                    "unknown mode {m:?} (accepted: static, {})",
                    names.join(", ")
                )));
            }
        }
        let ok = |x: f64| x.is_finite() && (0.1..=1000.0).contains(&x);
        if !(ok(self.high_mbit) && ok(self.low_mbit) && ok(self.up_mbit)) {
            return bad("capacities must be 0.1 ..= 1000 Mbit/s");
        }
        if self.low_mbit >= self.high_mbit {
            return bad("the low capacity must be below the high one");
        }
        if self.step_s == 0 || self.load_s <= self.step_s || self.load_s > 3600 {
            return bad("give 0 < step_s < load_s <= 3600");
        }
        if !(2..=100_000).contains(&self.buffer_packets) {
            return bad("buffer_packets: 2 ..= 100000");
        }
        Ok(())
    }

    /// The daemon's download range (min, base, max), Mbit/s: a tenth of the high capacity,
    /// three quarters of it, and 5% above it (as the userspace lab's radio).
    pub fn down_range(&self) -> (f64, f64, f64) {
        (
            self.high_mbit / 10.0,
            self.high_mbit * 0.75,
            self.high_mbit * 1.05,
        )
    }

    /// The daemon's upload range (min, base, max), Mbit/s: a fifth, 80%, the capacity.
    pub fn up_range(&self) -> (f64, f64, f64) {
        (self.up_mbit / 5.0, self.up_mbit * 0.8, self.up_mbit)
    }
}

/// A rate for the shell and TOML: at most 3 decimals, no trailing zeros.
fn num(x: f64) -> String {
    let s = format!("{x:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// The guest script: the parameters as shell variables, then `kernel_control.sh`.
pub fn guest_script(o: &KernelControlOpts) -> String {
    let (dmin, dbase, dmax) = o.down_range();
    let (umin, ubase, umax) = o.up_range();
    format!(
        "#!/bin/sh\nMODES=\"{}\" HI={} LO={} UP={} BUF={} STEP={} IDLE={} LOAD={} \
         DMIN={} DBASE={} DMAX={} UMIN={} UBASE={} UMAX={}\n{}",
        o.modes.join(" "),
        num(o.high_mbit),
        num(o.low_mbit),
        num(o.up_mbit),
        o.buffer_packets,
        o.step_s,
        o.idle_s,
        o.load_s,
        num(dmin),
        num(dbase),
        num(dmax),
        num(umin),
        num(ubase),
        num(umax),
        include_str!("kernel_control.sh"),
    )
}

/// One mode's measurements, on the run's clock (0 = the load starts).
#[derive(Clone, Debug, PartialEq)]
pub struct ModeRun {
    /// `"static"` or the daemon's algorithm.
    pub mode: String,
    /// Capacity changes: (t, downlink Mbit/s), the first at the start of the idle phase. A
    /// change's time is when the `tc -batch` request was written (it applies within
    /// milliseconds).
    pub capacity: Vec<(f64, f64)>,
    /// The kernel CAKE's bandwidth on `r0` read back with `tc -j qdisc show`: (t, Mbit/s).
    pub readback: Vec<(f64, f64)>,
    /// The daemon's decisions (empty for `"static"`).
    pub decisions: Vec<ControlPoint>,
    /// `actuator-error` lines in the daemon's log.
    pub actuator_errors: usize,
    /// Ping RTTs: (t, ms).
    pub ping: Vec<(f64, f64)>,
    /// iperf3's download goodput, Mbit/s (NaN when iperf3 failed).
    pub download_mbit: f64,
    /// The mode's output directory (kept).
    pub dir: PathBuf,
}

impl ModeRun {
    /// The capacity in force at `t`, Mbit/s.
    pub fn capacity_at(&self, t: f64) -> f64 {
        let k = self.capacity.partition_point(|c| c.0 <= t);
        self.capacity[k
            .saturating_sub(1)
            .min(self.capacity.len().saturating_sub(1))]
        .1
    }

    /// The download rate in force at `t`: the daemon's last decision at or before `t`, or for
    /// `"static"` the last read-back value; `None` before any.
    pub fn rate_at(&self, t: f64) -> Option<f64> {
        if self.decisions.is_empty() {
            let k = self.readback.partition_point(|r| r.0 <= t);
            return k
                .checked_sub(1)
                .map(|i| self.readback[i].1)
                .or(self.readback.first().map(|r| r.1));
        }
        let k = self.decisions.partition_point(|p| p.t <= t);
        k.checked_sub(1).map(|i| self.decisions[i].down_mbit)
    }
}

fn parse_pairs(text: &str, epoch: f64) -> Vec<(f64, f64)> {
    text.lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let t = it.next()?.parse::<f64>().ok()?;
            let v = it.next()?.parse::<f64>().ok()?;
            Some((t - epoch, v))
        })
        .collect()
}

/// `cake.log` lines (`WALL JSON`) as (t, Mbit/s) of the first CAKE's bandwidth.
pub fn parse_readback(text: &str, epoch: f64) -> Vec<(f64, f64)> {
    text.lines()
        .filter_map(|l| {
            let (t, j) = l.split_once(' ')?;
            let t = t.parse::<f64>().ok()?;
            let v: serde_json::Value = serde_json::from_str(j).ok()?;
            let q = v.as_array()?.iter().find(|q| q["kind"] == "cake")?;
            let bw = q["options"]["bandwidth"].as_f64()?;
            Some((t - epoch, bw * 8.0 / 1e6))
        })
        .collect()
}

/// `ping -D` output as (t, RTT ms).
pub fn parse_ping(text: &str, epoch: f64) -> Vec<(f64, f64)> {
    text.lines()
        .filter_map(|l| {
            let t = l
                .strip_prefix('[')?
                .split(']')
                .next()?
                .parse::<f64>()
                .ok()?;
            let r = l.split("time=").nth(1)?.split_whitespace().next()?;
            Some((t - epoch, r.parse::<f64>().ok()?))
        })
        .collect()
}

/// Reads one mode's directory (`/out/MODE` of the guest).
pub fn read_mode(mode: &str, dir: &Path) -> Result<ModeRun, Error> {
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap_or_default();
    let epoch: f64 = read("epoch")
        .trim()
        .parse()
        .map_err(|_| Error::GuestOutput {
            dir: dir.to_path_buf(),
            missing: "no epoch (the guest run did not start)",
        })?;
    let capacity = parse_pairs(&read("cap.log"), epoch);
    if capacity.is_empty() {
        return Err(Error::GuestOutput {
            dir: dir.to_path_buf(),
            missing: "no capacity log",
        });
    }
    let (decisions, actuator_errors) = parse_log(&read("control.jsonl"), epoch);
    let iperf: serde_json::Value = serde_json::from_str(&read("iperf.json")).unwrap_or_default();
    Ok(ModeRun {
        mode: mode.to_string(),
        capacity,
        readback: parse_readback(&read("cake.log"), epoch),
        decisions,
        actuator_errors,
        ping: parse_ping(&read("ping.txt"), epoch),
        download_mbit: iperf["end"]["sum_received"]["bits_per_second"]
            .as_f64()
            .map_or(f64::NAN, |b| b / 1e6),
        dir: dir.to_path_buf(),
    })
}

/// Boots the reference kernel and runs every mode of `o` with `purple_bin` as the daemon,
/// reflector and nothing else; the guest's files are kept under `out_dir` (one directory per
/// mode). Returns the runs in `o.modes` order, or why not (with the end of the guest's output).
pub fn run(
    purple_bin: &Path,
    o: &KernelControlOpts,
    out_dir: &Path,
) -> Result<Vec<ModeRun>, Error> {
    o.validate()?;
    let runner = crate::kernel::refkernel_dir().join("run-in-guest.sh");
    if !runner.is_file() {
        return Err(Error::NoRefKernel(crate::kernel::refkernel_dir()));
    }
    let tmp = std::env::temp_dir().join(format!("plab-kctl-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let ind = tmp.join("in");
    crate::kernel::ship_binary(purple_bin, &ind)?;
    let script = tmp.join("script.sh");
    std::fs::write(&script, guest_script(o)).map_err(io("write the script"))?;
    std::fs::create_dir_all(out_dir).map_err(io(format!("create {}", out_dir.display())))?;
    let out = Command::new(&runner)
        .arg("-o")
        .arg(out_dir)
        .arg("-i")
        .arg(&ind)
        .arg("-t")
        .arg(o.timeout_s.to_string())
        .arg(&script)
        .env(
            "REFKERNEL_APPEND",
            // The TSC clocksource: under TCG every HPET read is an emulated MMIO access, and
            // the daemon, reflector and ping read the clock per packet.
            std::env::var("REFKERNEL_APPEND")
                .unwrap_or_else(|_| "tsc=reliable clocksource=tsc".into()),
        )
        .stdin(Stdio::null())
        .output()
        .map_err(io(format!("run {}", runner.display())));
    let _ = std::fs::remove_dir_all(&tmp);
    let out = out?;
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::write(out_dir.join("guest.log"), &log);
    if !out.status.success() {
        let lines: Vec<&str> = log.lines().collect();
        return Err(Error::GuestFailed {
            status: out.status.to_string(),
            tail: lines[lines.len().saturating_sub(15)..].join("\n"),
        });
    }
    o.modes
        .iter()
        .map(|m| read_mode(m, &out_dir.join(m)))
        .collect()
}

/// One mode reduced to the report's figures.
#[derive(Clone, Debug, PartialEq)]
pub struct ModeSummary {
    /// The mode.
    pub mode: String,
    /// Idle RTT (median before the load), ms.
    pub idle_rtt_ms: f64,
    /// Loaded latency = RTT minus the idle median, after the first `warm_s` of load: mean,
    /// median, p95, max (ms). NaN without samples.
    pub latency_ms: [f64; 4],
    /// iperf3 download, Mbit/s.
    pub download_mbit: f64,
    /// Mean download rate set over the load (100 ms bins), Mbit/s.
    pub mean_rate_mbit: f64,
    /// Mean capacity over the load, Mbit/s.
    pub mean_capacity_mbit: f64,
    /// Per capacity drop: seconds until the rate in force (the daemon's decisions, else the
    /// read-backs) was at or below the new capacity (`None`: not before the next step). 0 when it already was (printed "already below").
    pub reactions: Vec<Option<f64>>,
    /// Per capacity rise: the rate in force at the rise and the highest rate before the next
    /// step (or the end), Mbit/s.
    pub rises: Vec<(f64, f64)>,
}

/// The upper median of `v` (sorted in place); NaN when empty.
fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    quantile::rounded_rank(v, 0.5).unwrap_or(f64::NAN)
}

/// Reduces a mode's run (`load_s` seconds of load; the first `warm_s` of load are left out of
/// the latency figures).
pub fn summarize(r: &ModeRun, load_s: f64, warm_s: f64) -> ModeSummary {
    let idle = median(
        &mut r
            .ping
            .iter()
            .filter(|p| p.0 < 0.0)
            .map(|p| p.1)
            .collect::<Vec<_>>(),
    );
    let mut lat: Vec<f64> = r
        .ping
        .iter()
        .filter(|p| p.0 >= warm_s && p.0 <= load_s)
        .map(|p| (p.1 - idle).max(0.0))
        .collect();
    let mean = if lat.is_empty() {
        f64::NAN
    } else {
        lat.iter().sum::<f64>() / lat.len() as f64
    };
    let med = median(&mut lat);
    let pick = |q: f64| {
        lat.get(((lat.len() as f64 * q) as usize).min(lat.len().saturating_sub(1)))
            .copied()
            .unwrap_or(f64::NAN)
    };
    let bins: Vec<f64> = (0..(load_s * 10.0) as usize)
        .map(|i| i as f64 / 10.0 + 0.05)
        .collect();
    let rates: Vec<f64> = bins.iter().filter_map(|&t| r.rate_at(t)).collect();
    let mean_rate = if rates.is_empty() {
        f64::NAN
    } else {
        rates.iter().sum::<f64>() / rates.len() as f64
    };
    let mean_cap = bins.iter().map(|&t| r.capacity_at(t)).sum::<f64>() / bins.len().max(1) as f64;
    let mut reactions = Vec::new();
    let mut rises = Vec::new();
    for (i, w) in r.capacity.windows(2).enumerate() {
        let (t, c) = w[1];
        if t < 0.0 || t > load_s {
            continue;
        }
        let end = r.capacity.get(i + 2).map_or(load_s, |n| n.0);
        if c < w[0].1 {
            let reaction = if r.rate_at(t).is_some_and(|x| x <= c) {
                Some(0.0)
            } else if r.decisions.is_empty() {
                r.readback
                    .iter()
                    .find(|b| b.0 > t && b.0 < end && b.1 <= c)
                    .map(|b| b.0 - t)
            } else {
                r.decisions
                    .iter()
                    .find(|p| p.t > t && p.t < end && p.down_mbit <= c)
                    .map(|p| p.t - t)
            };
            reactions.push(reaction);
        } else {
            let at = r.rate_at(t).unwrap_or(f64::NAN);
            let best = r
                .decisions
                .iter()
                .filter(|p| p.t > t && p.t < end)
                .map(|p| p.down_mbit)
                .chain(
                    r.readback
                        .iter()
                        .filter(|b| b.0 > t && b.0 < end)
                        .map(|b| b.1),
                )
                .fold(at, f64::max);
            rises.push((at, best));
        }
    }
    ModeSummary {
        mode: r.mode.clone(),
        idle_rtt_ms: idle,
        latency_ms: [
            mean,
            med,
            pick(0.95),
            lat.last().copied().unwrap_or(f64::NAN),
        ],
        download_mbit: r.download_mbit,
        mean_rate_mbit: mean_rate,
        mean_capacity_mbit: mean_cap,
        reactions,
        rises,
    }
}

fn f(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.2}")
    } else {
        "-".into()
    }
}

/// The report: per mode the loaded latency, download and rate figures, then per mode the
/// capacity steps with the rates read back from the kernel.
pub fn table(o: &KernelControlOpts, runs: &[ModeRun]) -> String {
    let warm = (o.step_s as f64 / 3.0).min(2.0);
    let mut s = format!(
        "reference kernel (Linux 6.1 sch_cake under QEMU TCG), purple control over netlink:\n\
         downlink netem rate {} <-> {} Mbit/s every {} s (buffer {} packets), uplink {} Mbit/s, \
         10 ms each way; one iperf3 download for {} s after {} s idle; ping every 100 ms \
         (latency = RTT - idle median, after the first {warm:.0} s of load). Rates scaled down \
         for TCG.\n\n",
        o.high_mbit, o.low_mbit, o.step_s, o.buffer_packets, o.up_mbit, o.load_s, o.idle_s
    );
    s += &format!(
        "{:<16} {:>7} {:>7} {:>7} {:>7} {:>8} {:>10} {:>10} {:>9}  {}\n",
        "mode",
        "mean",
        "median",
        "p95",
        "max",
        "idle RTT",
        "down Mbit/s",
        "mean rate",
        "mean cap",
        "reaction to drops (s) / rises (rate at -> max)"
    );
    for r in runs {
        let m = summarize(r, o.load_s as f64, warm);
        let re: Vec<String> = m
            .reactions
            .iter()
            .map(|x| match x {
                None => "none".into(),
                Some(x) if *x == 0.0 => "already below".into(),
                Some(x) => f(*x),
            })
            .collect();
        let ri: Vec<String> = m
            .rises
            .iter()
            .map(|(a, b)| format!("{}->{}", f(*a), f(*b)))
            .collect();
        s += &format!(
            "{:<16} {:>7} {:>7} {:>7} {:>7} {:>8} {:>11} {:>10} {:>9}  drops [{}] rises [{}]\n",
            m.mode,
            f(m.latency_ms[0]),
            f(m.latency_ms[1]),
            f(m.latency_ms[2]),
            f(m.latency_ms[3]),
            f(m.idle_rtt_ms),
            f(m.download_mbit),
            f(m.mean_rate_mbit),
            f(m.mean_capacity_mbit),
            re.join(", "),
            ri.join(", ")
        );
    }
    s += "\nkernel CAKE bandwidth read back with `tc -j qdisc show dev r0` (t s: Mbit/s; \
          capacity in force):\n";
    for r in runs {
        let rb: Vec<String> = r
            .readback
            .iter()
            .map(|(t, v)| format!("{t:.1}: {} (cap {})", f(*v), r.capacity_at(*t)))
            .collect();
        s += &format!(
            "{:<16} {}{}\n",
            r.mode,
            rb.join(", "),
            if r.actuator_errors > 0 {
                format!("; {} actuator errors", r.actuator_errors)
            } else {
                String::new()
            }
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_with(decisions: &[(f64, f64)]) -> ModeRun {
        ModeRun {
            mode: "purple".into(),
            capacity: vec![(-3.0, 8.0), (6.0, 4.0), (12.0, 8.0)],
            readback: vec![(5.0, 6.0), (11.0, 3.5), (17.0, 7.0)],
            decisions: decisions
                .iter()
                .map(|&(t, r)| ControlPoint {
                    t,
                    down_mbit: r,
                    up_mbit: 1.0,
                    down_throughput_mbit: None,
                    down_delay_ms: None,
                })
                .collect(),
            actuator_errors: 0,
            ping: vec![(-2.0, 20.0), (-1.0, 22.0), (3.0, 30.0), (8.0, 40.0)],
            download_mbit: 5.0,
            dir: PathBuf::new(),
        }
    }

    #[test]
    fn reaction_is_the_time_until_the_rate_is_at_or_below_the_new_capacity() {
        let r = run_with(&[(0.0, 6.0), (6.5, 5.0), (7.25, 3.9), (13.0, 7.5)]);
        let m = summarize(&r, 18.0, 2.0);
        assert_eq!(m.reactions.len(), 1);
        assert!(
            (m.reactions[0].unwrap_or(f64::NAN) - 1.25).abs() < 1e-9,
            "{m:?}"
        );
        assert_eq!(m.rises, vec![(3.9, 7.5)]);
        assert!((m.idle_rtt_ms - 22.0).abs() < 1e-9);
        assert_eq!(m.latency_ms[1], 18.0);
        assert!((m.mean_capacity_mbit - (12.0 * 8.0 + 6.0 * 4.0) / 18.0).abs() < 0.05);
    }

    #[test]
    fn a_drop_never_followed_counts_as_none() {
        let r = run_with(&[(0.0, 6.0), (7.0, 5.0)]);
        assert_eq!(summarize(&r, 18.0, 2.0).reactions, vec![None]);
    }

    #[test]
    fn guest_logs_parse_on_the_load_clock() {
        let cake = "100.5 [{\"kind\":\"cake\",\"options\":{\"bandwidth\":500000}}]\n\
                    garbage\n101.5 []\n";
        assert_eq!(parse_readback(cake, 100.0), vec![(0.5, 4.0)]);
        let ping = "PING x\n[101.25] 64 bytes from 10.79.3.1: icmp_seq=1 ttl=62 time=21.5 ms\n";
        assert_eq!(parse_ping(ping, 100.0), vec![(1.25, 21.5)]);
        assert_eq!(
            parse_pairs("99 8\n106 4\nx y\n", 100.0),
            vec![(-1.0, 8.0), (6.0, 4.0)]
        );
    }

    #[test]
    fn the_script_carries_the_parameters_and_rejects_unknown_modes() {
        let o = KernelControlOpts::default();
        let s = guest_script(&o);
        assert!(s.starts_with("#!/bin/sh\nMODES=\"purple static\" HI=8 LO=4 UP=2 BUF=100"));
        assert!(s.contains("DMIN=0.8 DBASE=6 DMAX=8.4"), "{}", &s[..200]);
        assert!(s.contains("kind = \"netlink\""));
        let bad = KernelControlOpts {
            modes: vec!["purple; rm -rf /".into()],
            ..o.clone()
        };
        let e = bad.validate().unwrap_err().to_string();
        assert!(
            e.contains("(accepted: static, purple, purple-aimd, cake-autorate, sqm-autorate)"),
            "{e}"
        );
        assert!(is_algorithm("sqm-autorate") && !is_algorithm("purple-queue"));
        let inverted = KernelControlOpts { low_mbit: 9.0, ..o };
        assert!(inverted.validate().is_err());
    }
}
