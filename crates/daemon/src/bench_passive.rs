//! `purple bench control --passive`: the CPU cost of the passive delay signal's capture, at a
//! given number of TCP flows. Needs root (network namespaces, raw and packet sockets).
//!
//! Two throwaway network namespaces joined by a veth pair stand for a router's WAN device
//! (`pa`, in the first) and the internet (the second). Two generator threads replay bulk
//! downloads over `flows` connections with TCP timestamps, as the kernel would carry them:
//! "servers" in the second namespace send data segments (TSval from their own 1 kHz clock,
//! TSecr echoing what the client said three segments earlier, as with a window in flight),
//! which arrive on `pa`; the "client" in the first namespace ACKs every second segment
//! (likewise), which leave on `pa`.
//! Frames carry link addresses nobody owns, so neither kernel answers or forwards them: the
//! only work they cause is the capture's. The real daemon loop (dry run, `delay_source =
//! "passive"`, no reflector) runs in a thread in the first namespace and captures `pa`.
//!
//! Measured per run: the daemon thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`: its syscalls,
//! parsing and the estimator), the frames it read and the round trips it timed; and the whole
//! process's CPU time with and without the capture (a second run with `delay_source =
//! "probes"`, probing 127.0.0.1 inside the namespace), whose difference beyond the daemon
//! thread's is the kernel's share (the filter runs for every frame on every device, in the
//! sending threads' context).

use crate::{Daemon, DaemonConfig};
use qdisc::packet::FrameSpec;
use qdisc::Duration;
use rustix::time::{clock_gettime, ClockId};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::io;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

/// What one flow count measured.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct PassiveBench {
    /// Connections replayed.
    pub flows: usize,
    /// The capture's `passive.sample`.
    pub sample: u32,
    /// Segments per second offered on the WAN device (data in + ACKs out).
    pub offered_pps: f64,
    /// Frames the capture read per second (those the kernel filter passed).
    pub captured_pps: f64,
    /// Frames the kernel dropped because a capture ring was full (none while the daemon keeps
    /// up).
    pub lost: u64,
    /// WAN-side round trips timed per second.
    pub samples_per_s: f64,
    /// Connections the estimator tracked at the end.
    pub tracked: u32,
    /// The daemon thread's CPU, percent of one core, with the capture.
    pub daemon_percent: f64,
    /// The same with `delay_source = "probes"` (no capture), same traffic.
    pub daemon_percent_without: f64,
    /// The daemon thread's CPU per captured frame, µs (the capture's added cost).
    pub us_per_frame: f64,
    /// The whole process (generators included) with the capture, percent of one core.
    pub process_percent: f64,
    /// The same without the capture.
    pub process_percent_without: f64,
}

fn secs(t: rustix::time::Timespec) -> f64 {
    t.tv_sec as f64 + t.tv_nsec as f64 / 1e9
}

/// The two namespaces (`os::netns::Netns` guards: removed on drop, whatever happened).
struct Netns {
    a: String,
    b: String,
    _guards: [os::netns::Netns; 2],
}

impl Netns {
    fn new() -> io::Result<Netns> {
        Self::build().map_err(io::Error::other)
    }

    fn build() -> Result<Netns, os::CommandError> {
        let p = os::netns::unique_prefix("pbench");
        let a = os::netns::Netns::create(&format!("{p}-a"))?;
        let b = os::netns::Netns::create(&format!("{p}-b"))?;
        a.veth("pa", &b, "pb")?;
        a.ip(&["addr", "add", "10.99.0.1/24", "dev", "pa"])?;
        b.ip(&["addr", "add", "10.99.0.2/24", "dev", "pb"])?;
        // Link addresses nobody owns: the frames cross the veth and are dropped unseen.
        a.ip(&[
            "neigh",
            "add",
            "10.99.0.3",
            "lladdr",
            "02:00:00:00:00:03",
            "dev",
            "pa",
            "nud",
            "permanent",
        ])?;
        b.ip(&[
            "neigh",
            "add",
            "10.99.0.1",
            "lladdr",
            "02:00:00:00:00:01",
            "dev",
            "pb",
            "nud",
            "permanent",
        ])?;
        Ok(Netns {
            a: a.name().to_string(),
            b: b.name().to_string(),
            _guards: [a, b],
        })
    }
}

/// Moves the calling thread into namespace `name`.
fn enter(name: &str) -> io::Result<()> {
    os::netns::enter(&std::path::Path::new("/var/run/netns").join(name))
}

const CLIENT: Ipv4Addr = Ipv4Addr::new(10, 99, 0, 1);
const SERVER: Ipv4Addr = Ipv4Addr::new(10, 99, 0, 3);
/// Offsets of TSval and TSecr from the IP header (20 bytes), TCP header (20), NOP NOP 8 10.
const TSVAL: usize = 44;
const TSECR: usize = 48;

/// One side's segments, one template per flow (IP packets: the raw socket adds no header).
fn templates(flows: usize, server: bool, payload: usize) -> Vec<Vec<u8>> {
    (0..flows)
        .map(|f| {
            let port = 20_000 + f as u16;
            let spec = if server {
                FrameSpec::tcp(SERVER.into(), CLIENT.into(), 443, port)
            } else {
                FrameSpec::tcp(CLIENT.into(), SERVER.into(), port, 443)
            };
            let frame = spec
                .with_tcp_options(vec![1, 1, 8, 10, 0, 0, 0, 0, 0, 0, 0, 0])
                .with_payload(payload)
                .build();
            frame[14..].to_vec()
        })
        .collect()
}

/// Replays one side until `stop`: `pps` segments a second round-robin over the flows, TSval
/// from a 1 kHz clock (offset per flow, as Linux randomises it), TSecr the peer's latest.
#[allow(clippy::too_many_arguments)]
fn generate(
    ns: String,
    server: bool,
    flows: usize,
    pps: f64,
    mine: Arc<Vec<AtomicU32>>,
    peer: Arc<Vec<AtomicU32>>,
    stop: Arc<AtomicBool>,
    sent: Arc<AtomicU64>,
) -> io::Result<()> {
    enter(&ns)?;
    let s = Socket::new(
        Domain::IPV4,
        Type::RAW,
        Some(Protocol::from(libc::IPPROTO_RAW)),
    )?;
    let dst: SockAddr = SocketAddrV4::new(if server { CLIENT } else { SERVER }, 0).into();
    let mut pkts = templates(flows, server, if server { 1448 } else { 0 });
    // What each flow's peer said at our last four sends: we echo the oldest, as a sender with
    // a window in flight echoes an ACK that left a round trip ago.
    let mut heard = vec![[0u32; 4]; flows];
    let t0 = clock_gettime(ClockId::Monotonic);
    let mut k = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let now = secs(clock_gettime(ClockId::Monotonic)) - secs(t0);
        let due = (now * pps) as u64;
        while k < due {
            let f = (k % flows as u64) as usize;
            let ts = (now * 1000.0) as u32 + (f as u32).wrapping_mul(7919);
            mine[f].store(ts, Ordering::Relaxed);
            let p = &mut pkts[f];
            p[TSVAL..TSVAL + 4].copy_from_slice(&ts.to_be_bytes());
            let h = &mut heard[f];
            h.rotate_left(1);
            h[3] = peer[f].load(Ordering::Relaxed);
            let echo = h[0];
            p[TSECR..TSECR + 4].copy_from_slice(&echo.to_be_bytes());
            if s.send_to(p, &dst).is_ok() {
                sent.fetch_add(1, Ordering::Relaxed);
            }
            k += 1;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    Ok(())
}

/// One daemon run of `seconds` in namespace `ns` under the traffic already flowing; returns
/// (daemon thread CPU s, wall s, frames read, WAN samples, tracked).
#[allow(clippy::disallowed_methods)] // wall-clock duration of the run
fn daemon_run(
    ns: &str,
    seconds: f64,
    passive: bool,
    sample: u32,
) -> io::Result<(f64, f64, crate::PassiveCounters)> {
    let ns = ns.to_string();
    std::thread::spawn(move || {
        enter(&ns)?;
        let log = std::env::temp_dir().join(format!(
            "purple-bench-passive-{}-{passive}.jsonl",
            std::process::id()
        ));
        let source = if passive {
            "delay_source = \"passive\"\n[probe]\nreflectors = []\n"
        } else {
            "delay_source = \"probes\"\n[probe]\nreflectors = [\"echo:127.0.0.1\"]\n"
        };
        let text = format!(
            "{source}[download]\ninterface = \"pa\"\ncounter = \"rx\"\n[upload]\ninterface = \
             \"pa\"\n[passive]\ninterface = \"pa\"\nsample = {sample}\n[actuator]\nkind = \"dry-run\"\n[log]\n\
             path = \"{}\"\n",
            log.display()
        );
        let cfg = DaemonConfig::parse(&text)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let mut d = Daemon::new(cfg, true)?;
        let never = AtomicBool::new(false);
        let t0 = clock_gettime(ClockId::ThreadCPUTime);
        let w0 = std::time::Instant::now();
        let res = d.run(
            &never,
            &never,
            Some(Duration::from_nanos((seconds * 1e9) as u64)),
        );
        let wall = w0.elapsed().as_secs_f64();
        let cpu = secs(clock_gettime(ClockId::ThreadCPUTime)) - secs(t0);
        let _ = std::fs::remove_file(&log);
        res?;
        Ok((cpu, wall, d.passive_counters().unwrap_or_default()))
    })
    .join()
    .map_err(|_| io::Error::other("the daemon thread panicked"))?
}

/// Runs the bench at each flow count of `flows`, `seconds` per run (two runs per count), with
/// `pps` segments a second offered in all (two thirds data arriving, one third ACKs leaving)
/// and the capture's `passive.sample`.
pub fn passive(
    seconds: f64,
    flows: &[usize],
    pps: f64,
    sample: u32,
) -> io::Result<Vec<PassiveBench>> {
    if !os::is_root() {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            "purple bench control --passive needs root (network namespaces, raw and packet \
             sockets)",
        ));
    }
    let mut out = Vec::new();
    for &n in flows {
        let n = n.max(1);
        let ns = Netns::new()?;
        let stop = Arc::new(AtomicBool::new(false));
        let sent = Arc::new(AtomicU64::new(0));
        let client: Arc<Vec<AtomicU32>> = Arc::new((0..n).map(|_| AtomicU32::new(0)).collect());
        let server: Arc<Vec<AtomicU32>> = Arc::new((0..n).map(|_| AtomicU32::new(0)).collect());
        let spawn = |srv: bool| {
            let (nsn, mine, peer) = if srv {
                (ns.b.clone(), server.clone(), client.clone())
            } else {
                (ns.a.clone(), client.clone(), server.clone())
            };
            let rate = if srv { pps * 2.0 / 3.0 } else { pps / 3.0 };
            let (st, se) = (stop.clone(), sent.clone());
            std::thread::spawn(move || generate(nsn, srv, n, rate, mine, peer, st, se))
        };
        let gens = [spawn(true), spawn(false)];
        let p0 = secs(clock_gettime(ClockId::ProcessCPUTime));
        let s0 = sent.load(Ordering::Relaxed);
        let with = daemon_run(&ns.a, seconds, true, sample);
        let p1 = secs(clock_gettime(ClockId::ProcessCPUTime));
        let s1 = sent.load(Ordering::Relaxed);
        let without = daemon_run(&ns.a, seconds, false, sample);
        let p2 = secs(clock_gettime(ClockId::ProcessCPUTime));
        stop.store(true, Ordering::Relaxed);
        for g in gens {
            g.join()
                .map_err(|_| io::Error::other("a generator panicked"))??;
        }
        let (cpu, wall, counters) = with?;
        let (cpu0, wall0, _) = without?;
        let (frames, samples, tracked) = (
            counters.frames,
            counters.stats.wan_samples,
            counters.tracked,
        );
        if frames == 0 || samples == 0 {
            // A capture that saw nothing costs nothing: no figure about nothing.
            return Err(io::Error::other(format!(
                "the capture on pa read {frames} frames and timed {samples} round trips at \
                 {n} flows: no cost can be reported"
            )));
        }
        let pct = |c: f64, w: f64| c / w.max(1e-9) * 100.0;
        out.push(PassiveBench {
            flows: n,
            sample,
            offered_pps: (s1 - s0) as f64 / wall.max(1e-9),
            captured_pps: frames as f64 / wall.max(1e-9),
            lost: counters.lost,
            samples_per_s: samples as f64 / wall.max(1e-9),
            tracked,
            daemon_percent: pct(cpu, wall),
            daemon_percent_without: pct(cpu0, wall0),
            us_per_frame: (cpu - cpu0 * wall / wall0.max(1e-9)).max(0.0) / frames as f64 * 1e6,
            process_percent: pct(p1 - p0, wall),
            process_percent_without: pct(p2 - p1, wall0),
        });
    }
    Ok(out)
}
