//! The driver of one run ([`run_one`]): checks the contender's needs, builds the testbed,
//! starts the controller, drives the traffic through the idle and loaded phases, then stops
//! everything and collects the results.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use controller::Direction;
use os::netns::Netns;
use sim::RunSummary;

use crate::results::{self, LabRun, Measured};
use crate::scenario::{self, Contender, FlowKind, Scenario, Test};
use crate::testbed::{kernel_qdisc, kernel_qdisc_stats, start_bridge, start_delay, tc_wire, Topo};
use crate::traffic::{self, Ctx, Meter, Task};
use crate::{
    autorate, control, readback, DelayStage, Error, Fault, LabOpts, RouterStage, BIN, CLIENT,
    ECHO_REFLECTORS, SERVER,
};

/// Runs `test` of `scn` with `contender`, calling `progress(fraction done)` about every 100 ms.
/// Needs root. The namespaces are gone when it returns, whatever happened.
pub fn run_one(
    scn: &Scenario,
    contender: &Contender,
    test: &Test,
    opts: &LabOpts,
    progress: &mut dyn FnMut(f64),
) -> Result<LabRun, Error> {
    if !os::is_root() {
        return Err(Error::NotRoot);
    }
    let (algorithm, delay_source) = match contender.shape {
        scenario::Shape::Controlled {
            algorithm,
            delay_source,
            ..
        } => (Some(algorithm), delay_source),
        _ => (None, "probes"),
    };
    let script = match (contender.shape, &opts.cake_autorate) {
        (scenario::Shape::Script { cake }, Some(co)) => Some((cake, co)),
        (scenario::Shape::Script { .. }, None) => {
            return Err(Error::Unsupported(format!(
                "{} needs a cake-autorate checkout (--cake-autorate DIR)",
                contender.name
            )))
        }
        _ => None,
    };
    if script.is_some() && opts.router == RouterStage::Kernel {
        return Err(Error::Unsupported(format!(
            "{}: runs with our bridge only",
            contender.name
        )));
    }
    let daemon_bin = match (&opts.purple_bin, &opts.delay) {
        (Some(b), _) | (None, DelayStage::Linkem(b)) => Some(b.clone()),
        _ => None,
    };
    if algorithm.is_some() && daemon_bin.is_none() {
        return Err(Error::Unsupported(format!(
            "{} needs the `purple` binary (purple control, purple reflector)",
            contender.name
        )));
    }
    if script.is_some() && daemon_bin.is_none() {
        return Err(Error::Unsupported(format!(
            "{} needs the `purple` binary (its tc shim)",
            contender.name
        )));
    }
    let icmp_apart = opts.faults.contains(&Fault::IcmpApart);
    if icmp_apart && !matches!(opts.delay, DelayStage::Linkem(_)) {
        return Err(Error::Unsupported(
            "fault icmp-apart needs `purple linkem` as the delay stage (it queues ICMP apart)"
                .into(),
        ));
    }
    let t = Topo::build()?;
    for f in &opts.faults {
        match f {
            Fault::NoIcmpEcho => t.server.sysctl("net.ipv4.icmp_echo_ignore_all", "1")?,
            Fault::IcmpApart => {}
        }
    }
    if opts.echo_reflectors {
        for a in ECHO_REFLECTORS {
            t.server
                .ip(&["addr", "add", &format!("{a}/24"), "dev", "s0"])?;
        }
    }
    let (mut delay_proc, delay_stage, delay_started) =
        start_delay(scn, &t, &opts.delay, icmp_apart)?;
    // Our bridge's control socket for a daemon or the script; Linux's CAKE is driven over
    // netlink instead.
    let ctl_sock = (opts.router == RouterStage::Purple
        && (algorithm.is_some() || script.is_some()))
    .then(|| PathBuf::from(format!("/run/purple/{}-router.sock", t.prefix)));
    let bridge = match opts.router {
        RouterStage::Purple => Some(start_bridge(
            &t,
            contender.tc(Direction::Up, scn.up_bit_s()),
            contender.tc(Direction::Down, scn.down_bit_s()),
            ctl_sock.clone(),
            delay_source != "probes",
        )?),
        RouterStage::Kernel => {
            // A daemon probes from the router's own address on r1.
            tc_wire(&t.router, "r0", "r1", Some(control::ROUTER))?;
            // Egress (client -> server) leaves through r1, ingress through r0.
            kernel_qdisc(&t.router, "r1", contender, Direction::Up, scn.up_bit_s())?;
            kernel_qdisc(
                &t.router,
                "r0",
                contender,
                Direction::Down,
                scn.down_bit_s(),
            )?;
            None
        }
    };
    let control_dir = opts.control_dir.clone().unwrap_or_else(|| {
        std::env::temp_dir()
            .join("purple-lab")
            .join(format!("{}-{}", t.prefix, contender.short))
    });
    let echo = opts.echo_reflectors.then_some(&ECHO_REFLECTORS[..]);
    let daemon = match (algorithm, &daemon_bin, &ctl_sock, script) {
        (Some(alg), Some(bin), sock, _) => {
            let actuator = match sock {
                Some(s) => control::Actuator::Bridge(s),
                None => control::Actuator::Netlink,
            };
            let dir = &control_dir;
            let addr = format!("{}/24", control::ROUTER);
            let started = t
                .router
                .ip(&["addr", "add", &addr, "dev", "r1"])
                .map_err(Error::from)
                .and_then(|()| {
                    control::start(
                        scn,
                        alg,
                        delay_source,
                        bin,
                        &t.router,
                        &t.server,
                        actuator,
                        dir,
                        echo,
                    )
                })
                .map(Controller::Daemon);
            match started {
                Ok(d) => Some(d),
                Err(e) => {
                    if let Some((stopper, h)) = bridge {
                        stopper.stop();
                        let _ = h.join();
                    }
                    return Err(e);
                }
            }
        }
        (None, Some(bin), Some(sock), Some((cake, co))) => {
            let addr = format!("{}/24", control::ROUTER);
            let started = t
                .router
                .ip(&["addr", "add", &addr, "dev", "r1"])
                .map_err(Error::from)
                .and_then(|()| {
                    start_script(scn, co, cake, bin, &t.router, sock, &control_dir)
                        .map_err(Error::Autorate)
                });
            match started {
                Ok(d) => Some(d),
                Err(e) => {
                    if let Some((stopper, h)) = bridge {
                        stopper.stop();
                        let _ = h.join();
                    }
                    return Err(e);
                }
            }
        }
        _ => None,
    };
    let ctx = Ctx::new();
    let epoch_wall_s = unix_now_s();
    let watch = crate::host::Watch::start();
    // While a controller drives the shaper, its download rate is read back from the shaper.
    let sampler = match (&daemon, &ctl_sock) {
        (None, _) => None,
        (Some(_), Some(sock)) => Some(readback::Source::Bridge(sock.clone())),
        (Some(_), None) => Some(readback::Source::Netlink {
            ns: t.router.path(),
            dev: "r0".into(),
        }),
    }
    .map(|s| readback::Sampler::start(s, ctx.epoch));
    let r = drive(scn, test, opts, &t, &ctx, progress);
    ctx.stop.store(true, Ordering::Relaxed);
    let host = watch.finish();
    // Before the controller stops (on SIGTERM the daemon sets its safe rate).
    let readbacks = sampler.map(|s| match s {
        Ok(s) => s.finish(),
        Err(e) => readback::ReadBacks {
            errors: 1,
            first_error: Some(format!("the read-back thread: {e}")),
            ..Default::default()
        },
    });
    // The controller goes before the bridge (on SIGTERM the daemon sets the safe rate through
    // it).
    let control = daemon.map(|d| {
        d.finish(epoch_wall_s).map(|mut c| {
            c.readback = readbacks.unwrap_or_default();
            c
        })
    });
    let stats = match bridge {
        Some((stopper, h)) => {
            stopper.stop();
            h.join()
                .map_err(|_| Error::Panicked("the bridge thread".into()))
                .and_then(|r| r)
        }
        None => Ok(serde_json::Value::Array(kernel_qdisc_stats(&t.router)).to_string()),
    };
    if let Some(p) = delay_proc.as_mut() {
        p.stop();
    }
    let (mut summary, meters_out, mut warnings) = r?;
    warnings.extend(host.as_ref().and_then(crate::host::HostLag::warning));
    let control = match control {
        Some(Ok(c)) => {
            if c.actuator_errors > 0 {
                warnings.push(format!(
                    "{}: {} actuator errors (see {})",
                    c.algorithm,
                    c.actuator_errors,
                    c.log.display()
                ));
            }
            Some(c)
        }
        Some(Err(e)) => {
            warnings.push(e.to_string());
            None
        }
        None => None,
    };
    let capacity_down_mbit = match delay_started {
        Some(s) => {
            let off = ctx.epoch.saturating_duration_since(s).as_secs_f64();
            let n = summary.links.first().map_or(0, |l| l.tx_bps.len());
            (0..n)
                .map(|k| {
                    let mid = off + (k as f64 + 0.5) * BIN.as_secs_f64();
                    scn.link.down().at(mid) as f64 / 1e6
                })
                .collect()
        }
        None => Vec::new(),
    };
    match stats {
        Ok(j) => {
            if let Ok(serde_json::Value::Array(a)) = serde_json::from_str(&j) {
                summary.qdiscs = a;
            }
        }
        Err(e) => warnings.push(e.to_string()),
    }
    let induced = meters_out;
    summary.name = format!("{} {} {}", scn.name, test.name, contender.name);
    let namespaces = [&t.client, &t.router, &t.linkem, &t.server]
        .iter()
        .map(|n| n.name().to_string())
        .collect();
    drop(t);
    Ok(LabRun {
        namespaces,
        contender: contender.name.into(),
        test: test.name.into(),
        summary,
        induced,
        delay_stage,
        warnings,
        capacity_down_mbit,
        control,
        host,
    })
}

/// What drives a controlled contender's CAKE during a run.
enum Controller {
    /// `purple control`.
    Daemon(control::Running),
    /// The real cake-autorate through the tc shim.
    Script(autorate::Running, autorate::Shim),
}

impl Controller {
    /// Stops it and returns what it did on the run's clock (`epoch_wall_s`: Unix time of the
    /// run's epoch).
    fn finish(self, epoch_wall_s: f64) -> Result<control::ControlTrace, Error> {
        match self {
            Controller::Daemon(d) => d.finish(epoch_wall_s),
            Controller::Script(mut run, shim) => {
                run.stop();
                let calls = shim.calls();
                Ok(control::ControlTrace {
                    algorithm: "cake-autorate (the real script)".into(),
                    config: run.config.clone(),
                    log: shim.log().to_path_buf(),
                    points: script_points(&calls, epoch_wall_s),
                    actuator_errors: calls.iter().filter(|c| c.error.is_some()).count(),
                    readback: Default::default(),
                })
            }
        }
    }
}

/// The rate trace of the shim's calls (`r0` = download, `r1` = upload, as the lab's bridge
/// shapes them), one point per call, on the run's clock. Before a direction's first call its
/// rate is unknown and the point carries the other's first (both are set at start).
pub(crate) fn script_points(
    calls: &[autorate::ShimCall],
    epoch_wall_s: f64,
) -> Vec<control::ControlPoint> {
    let mbit = |b: u64| b as f64 / 1e6;
    let first = |dev: &str| calls.iter().find(|c| c.dev == dev).map(|c| mbit(c.bit_s));
    let (mut down, mut up) = (first("r0").unwrap_or(0.0), first("r1").unwrap_or(0.0));
    let mut points = Vec::with_capacity(calls.len());
    for c in calls.iter().filter(|c| c.error.is_none()) {
        match c.dev.as_str() {
            "r0" => down = mbit(c.bit_s),
            "r1" => up = mbit(c.bit_s),
            _ => continue,
        }
        points.push(control::ControlPoint {
            t: c.t - epoch_wall_s,
            down_mbit: down,
            up_mbit: up,
            down_throughput_mbit: None,
            down_delay_ms: None,
            // Each successful call set its device's rate.
            down_applied: true,
        });
    }
    points
}

/// Starts the real cake-autorate from `co` in the router namespace: both directions of the
/// router's bridge (its control socket `sock`: download = ingress on `r0`, upload = egress on
/// `r1`) through the tc shim (`purple_bin` as `tc`), the daemon contenders' rate ranges, the
/// server's six [`ECHO_REFLECTORS`] pinged every 0.3 s each (its defaults: 20 pings a second).
fn start_script(
    scn: &Scenario,
    co: &autorate::Checkout,
    cake: &str,
    purple_bin: &Path,
    router: &Netns,
    sock: &Path,
    dir: &Path,
) -> Result<Controller, autorate::AutorateError> {
    let (down, up) = scn.control_range();
    let shim = autorate::Shim::create(
        &dir.join("shim"),
        &dir.join("tc-calls.log"),
        purple_bin,
        Some((sock, &[("r0", "ingress"), ("r1", "egress")])),
        cake,
    )?;
    let cfg = autorate::ScriptConfig {
        dl_if: "r0".into(),
        ul_if: "r1".into(),
        down: autorate::RatesKbps::from_mbit(down),
        up: autorate::RatesKbps::from_mbit(up),
        reflectors: ECHO_REFLECTORS.iter().map(|s| s.to_string()).collect(),
        ping_interval_s: 0.3,
        log_dir: dir.to_path_buf(),
    };
    let run = autorate::start(co, router, &cfg, &shim, dir, None)?;
    Ok(Controller::Script(run, shim))
}

/// Seconds since the Unix epoch now (the decision log's `wall` is on this clock).
// The lab is the I/O boundary: it reads the clocks.
#[allow(clippy::disallowed_methods)]
fn unix_now_s() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// What [`drive`] returns: the summary (without its name and qdiscs), the probes' induced
/// latency with the mean upload and download goodput (Mbit/s), and warnings.
type Drive = (RunSummary, Measured, Vec<String>);

/// Starts the flows, samples them, stops them; builds the summary.
fn drive(
    scn: &Scenario,
    test: &Test,
    opts: &LabOpts,
    t: &Topo,
    ctx: &Ctx,
    progress: &mut dyn FnMut(f64),
) -> Result<Drive, Error> {
    let ends = Ends {
        client: Some(t.client.path()),
        server: Some(t.server.path()),
    };
    let meters: Vec<Arc<Meter>> = test
        .flows
        .iter()
        .map(|_| Arc::new(Meter::default()))
        .collect();
    let mut tasks: Vec<Task> = Vec::new();
    // Probes first (they measure the idle base RTT).
    start_probes(test, ctx, &ends, &meters, &mut tasks)?;
    let bins = run_phases(test, opts, ctx, &ends, &meters, &mut tasks, progress)?;
    ctx.stop.store(true, Ordering::Relaxed);
    let warnings = join(tasks);
    let (summary, measured) = results::summarise(scn, test, opts, &meters, &bins)?;
    Ok((summary, measured, warnings))
}

/// The namespaces the traffic tools enter: the client's and the server's.
struct Ends {
    client: Option<PathBuf>,
    server: Option<PathBuf>,
}

/// The server's address at `port`.
fn server(port: u16) -> SocketAddr {
    SocketAddr::new(SERVER.parse().expect_ip(), port)
}

/// The client's address at `port`.
fn client(port: u16) -> SocketAddr {
    SocketAddr::new(CLIENT.parse().expect_ip(), port)
}

/// Starts the latency probes of `test` (UDP ping-pong and ICMP ping, from the client), each
/// flow `i` counting into `meters[i]`.
fn start_probes(
    test: &Test,
    ctx: &Ctx,
    ends: &Ends,
    meters: &[Arc<Meter>],
    tasks: &mut Vec<Task>,
) -> Result<(), Error> {
    let (cns, sns) = (&ends.client, &ends.server);
    for (i, f) in test.flows.iter().enumerate() {
        let port = 6000 + i as u16;
        match f.kind {
            FlowKind::UdpPing => {
                tasks.push(traffic::udp_reflector(ctx, sns.clone(), port, f.dscp)?);
                tasks.push(traffic::udp_ping(
                    ctx,
                    cns.clone(),
                    server(port),
                    f.dscp,
                    Duration::from_millis(100),
                    meters[i].clone(),
                )?);
            }
            FlowKind::Icmp => {
                tasks.push(traffic::icmp_ping(
                    ctx,
                    cns.clone(),
                    SERVER.parse().unwrap_or(std::net::Ipv4Addr::LOCALHOST),
                    f.dscp,
                    Duration::from_millis(100),
                    meters[i].clone(),
                )?);
            }
            _ => {}
        }
    }
    Ok(())
}

/// Starts the load of `test` (bulk TCP both ways, VoIP-like UDP up), each flow `i` counting
/// into `meters[i]`.
fn start_load(
    test: &Test,
    opts: &LabOpts,
    ctx: &Ctx,
    ends: &Ends,
    meters: &[Arc<Meter>],
    tasks: &mut Vec<Task>,
) -> Result<(), Error> {
    let (cns, sns) = (&ends.client, &ends.server);
    for (i, f) in test.flows.iter().enumerate() {
        let port = 5000 + i as u16;
        let m = meters[i].clone();
        match f.kind {
            FlowKind::TcpUp => {
                tasks.push(traffic::tcp_sink(ctx, sns.clone(), port, f.dscp, m)?);
                tasks.push(traffic::tcp_bulk(
                    ctx,
                    cns.clone(),
                    server(port),
                    f.dscp,
                    opts.cc,
                )?);
            }
            FlowKind::TcpDown => {
                tasks.push(traffic::tcp_sink(ctx, cns.clone(), port, f.dscp, m)?);
                tasks.push(traffic::tcp_bulk(
                    ctx,
                    sns.clone(),
                    client(port),
                    f.dscp,
                    opts.cc,
                )?);
            }
            FlowKind::VoipUp => {
                tasks.push(traffic::voip_sink(ctx, sns.clone(), port, m.clone())?);
                tasks.push(traffic::voip_source(
                    ctx,
                    cns.clone(),
                    server(port),
                    f.dscp,
                    172,
                    Duration::from_millis(20),
                    m,
                )?);
            }
            _ => {}
        }
    }
    Ok(())
}

/// Runs the idle phase (`opts.idle_seconds`, probes only), starts the load, runs the loaded
/// phase (`opts.seconds`), reading every meter's byte count each [`BIN`] (one vector per
/// flow) and reporting progress. Returns early on SIGINT/SIGTERM.
fn run_phases(
    test: &Test,
    opts: &LabOpts,
    ctx: &Ctx,
    ends: &Ends,
    meters: &[Arc<Meter>],
    tasks: &mut Vec<Task>,
    progress: &mut dyn FnMut(f64),
) -> Result<Vec<Vec<u64>>, Error> {
    let total = opts.idle_seconds + opts.seconds;
    let start = ctx.epoch;
    let mut bins: Vec<Vec<u64>> = vec![Vec::new(); test.flows.len()];
    let mut next = BIN;
    let mut load_started = false;
    let load_at = Duration::from_secs_f64(opts.idle_seconds);
    let end = Duration::from_secs_f64(total);
    loop {
        if os::netns::interrupted() {
            return Err(Error::Interrupted);
        }
        let now = start.elapsed();
        if !load_started && now >= load_at {
            load_started = true;
            start_load(test, opts, ctx, ends, meters, tasks)?;
        }
        if now >= next {
            for (i, m) in meters.iter().enumerate() {
                bins[i].push(m.bytes.load(Ordering::Relaxed));
            }
            next += BIN;
            progress((now.as_secs_f64() / total).min(1.0));
        }
        if now >= end {
            break;
        }
        std::thread::sleep((next.saturating_sub(start.elapsed())).min(BIN));
    }
    Ok(bins)
}

/// Waits for the traffic threads (after `ctx.stop` is set); their errors become warnings.
fn join(tasks: Vec<Task>) -> Vec<String> {
    let mut warnings = Vec::new();
    for h in tasks {
        match h.join() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => warnings.push(e.to_string()),
            Err(_) => warnings.push("a traffic thread panicked".into()),
        }
    }
    warnings
}
/// Parses a constant address (the lab's own literals).
trait ExpectIp {
    fn expect_ip(self) -> std::net::IpAddr;
}

impl ExpectIp for Result<std::net::IpAddr, std::net::AddrParseError> {
    fn expect_ip(self) -> std::net::IpAddr {
        // The inputs are the constants CLIENT and SERVER, which parse; fall back to loopback
        // rather than panic if they ever do not.
        self.unwrap_or(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST))
    }
}
