//! Small traffic tools run in threads that entered a namespace: TCP bulk sender and receiver
//! (CUBIC per socket, DSCP via `IP_TOS`), UDP ping-pong probes with a reflector, VoIP-like UDP
//! with exact one-way delay (every namespace shares this process's `CLOCK_MONOTONIC`), and ICMP
//! echo with our own client (`daemon::probe::echo`; no system `ping` needed).
//!
//! Every tool counts into a [`Meter`] and stops within ~100 ms of its stop flag.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener, TcpStream, UdpSocket};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::error::{io, Error};

/// What one flow measured, filled by its tool while it runs.
#[derive(Debug, Default)]
pub struct Meter {
    /// Payload bytes delivered to the receiver.
    pub bytes: AtomicU64,
    /// Packets (probes, datagrams) sent.
    pub sent: AtomicU64,
    /// Packets received back (probes) or at the far end (datagrams).
    pub received: AtomicU64,
    /// Latency samples: (ns since the run's epoch when measured, latency ns).
    pub samples: Mutex<Vec<(u64, u64)>>,
}

impl Meter {
    fn sample(&self, at_ns: u64, lat_ns: u64) {
        if let Ok(mut v) = self.samples.lock() {
            v.push((at_ns, lat_ns));
        }
    }
}

/// What every tool of one run shares: the epoch of its timestamps and the stop flag.
#[derive(Clone, Debug)]
pub struct Ctx {
    /// Time zero of the run.
    pub epoch: Instant,
    /// Set to end every tool.
    pub stop: Arc<AtomicBool>,
}

impl Ctx {
    /// A fresh context with epoch now.
    // The lab is I/O at the edge: it measures real time by design.
    #[allow(clippy::disallowed_methods)]
    pub fn new() -> Ctx {
        Ctx {
            epoch: Instant::now(),
            stop: Arc::new(AtomicBool::new(false)),
        }
    }

    fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed) || os::netns::interrupted()
    }
}

impl Default for Ctx {
    fn default() -> Self {
        Ctx::new()
    }
}

/// A tool's thread; its result says why it failed, if it did.
pub type Task = JoinHandle<Result<(), Error>>;

/// Spawns `f` in a thread that first enters the namespace at `ns` (`None`: stay here); waits
/// until `f` reports ready (or fails) so listeners exist before anyone connects.
fn spawn_in<F>(ns: Option<PathBuf>, name: &str, f: F) -> Result<Task, Error>
where
    F: FnOnce(mpsc::Sender<Result<(), Error>>) -> Result<(), Error> + Send + 'static,
{
    let (tx, rx) = mpsc::channel();
    let what = name.to_string();
    let h = std::thread::Builder::new()
        .name(format!("lab {name}"))
        .spawn(move || {
            if let Some(p) = ns {
                if let Err(e) = os::netns::enter(&p) {
                    let what = format!("{what}: setns {}", p.display());
                    let _ = tx.send(Err(Error::StartFailed {
                        what: what.clone(),
                        why: e.to_string(),
                    }));
                    return Err(io(what)(e));
                }
            }
            let r = f(tx.clone());
            if let Err(e) = &r {
                // The task keeps the error; the starter gets its text.
                let _ = tx.send(Err(Error::StartFailed {
                    what: what.clone(),
                    why: e.to_string(),
                }));
            }
            r
        })
        .map_err(io(format!("{name}: cannot spawn a thread")))?;
    match rx.recv_timeout(Duration::from_secs(5)) {
        Ok(Ok(())) => Ok(h),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(Error::NotStarted(name.to_string())),
    }
}

/// A TCP receiver in namespace `ns` listening on `port`: accepts one connection and counts
/// its bytes into `meter` until the stop flag. Returns once listening.
pub fn tcp_sink(
    ctx: &Ctx,
    ns: Option<PathBuf>,
    port: u16,
    dscp: u8,
    meter: Arc<Meter>,
) -> Result<Task, Error> {
    let ctx = ctx.clone();
    spawn_in(ns, &format!("tcp sink :{port}"), move |ready| {
        let l = TcpListener::bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port))
            .map_err(io(format!("listen :{port}")))?;
        l.set_nonblocking(true).map_err(io("socket setup"))?;
        let _ = ready.send(Ok(()));
        let mut s = loop {
            if ctx.stopped() {
                return Ok(());
            }
            match l.accept() {
                Ok((s, _)) => break s,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(5))
                }
                Err(e) => return Err(io(format!("accept :{port}"))(e)),
            }
        };
        s.set_nonblocking(false).map_err(io("socket setup"))?;
        // ACKs carry the flow's mark too.
        let _ = os::set_dscp(&s, dscp);
        s.set_read_timeout(Some(Duration::from_millis(100)))
            .map_err(io("socket setup"))?;
        let mut buf = vec![0u8; 256 * 1024];
        while !ctx.stopped() {
            match s.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    meter.bytes.fetch_add(n as u64, Ordering::Relaxed);
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(e) => return Err(io(format!("read :{port}"))(e)),
            }
        }
        Ok(())
    })
}

/// A TCP bulk sender in namespace `ns` to `dst`: CUBIC (`cc`), DSCP `dscp`, writing as fast as
/// the connection takes until the stop flag. Returns once connected.
pub fn tcp_bulk(
    ctx: &Ctx,
    ns: Option<PathBuf>,
    dst: SocketAddr,
    dscp: u8,
    cc: &'static str,
) -> Result<Task, Error> {
    let ctx = ctx.clone();
    spawn_in(ns, &format!("tcp bulk {dst}"), move |ready| {
        let mut s = TcpStream::connect_timeout(&dst, Duration::from_secs(3))
            .map_err(io(format!("connect {dst}")))?;
        os::set_congestion(&s, cc).map_err(io(format!("TCP_CONGESTION {cc}")))?;
        os::set_dscp(&s, dscp).map_err(io("IP_TOS"))?;
        s.set_write_timeout(Some(Duration::from_millis(100)))
            .map_err(io("socket setup"))?;
        let _ = ready.send(Ok(()));
        let buf = vec![0x5au8; 64 * 1024];
        while !ctx.stopped() {
            match s.write(&buf) {
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                // The receiver went away at the end of the run.
                Err(_) if ctx.stopped() => break,
                Err(e) => return Err(io(format!("write {dst}"))(e)),
            }
        }
        let _ = s.shutdown(std::net::Shutdown::Both);
        Ok(())
    })
}

/// A UDP reflector in namespace `ns` on `port`: echoes every datagram back to its sender with
/// DSCP `dscp`, until the stop flag. Returns once bound.
pub fn udp_reflector(ctx: &Ctx, ns: Option<PathBuf>, port: u16, dscp: u8) -> Result<Task, Error> {
    let ctx = ctx.clone();
    spawn_in(ns, &format!("udp reflector :{port}"), move |ready| {
        let s = UdpSocket::bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port))
            .map_err(io(format!("bind udp :{port}")))?;
        os::set_dscp(&s, dscp).map_err(io("IP_TOS"))?;
        s.set_read_timeout(Some(Duration::from_millis(100)))
            .map_err(io("socket setup"))?;
        let _ = ready.send(Ok(()));
        let mut buf = [0u8; 2048];
        while !ctx.stopped() {
            if let Ok((n, from)) = s.recv_from(&mut buf) {
                let _ = s.send_to(&buf[..n], from);
            }
        }
        Ok(())
    })
}

/// A UDP socket on an ephemeral port, connected to `dst`, its packets marked with `dscp`.
fn connected_udp(dst: SocketAddr, dscp: u8) -> Result<UdpSocket, Error> {
    let s = UdpSocket::bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0)).map_err(io("bind"))?;
    s.connect(dst).map_err(io(format!("connect {dst}")))?;
    os::set_dscp(&s, dscp).map_err(io("IP_TOS"))?;
    Ok(s)
}

/// UDP ping-pong from namespace `ns` to a reflector at `dst`: one probe every `interval` with
/// DSCP `dscp`; each reply's round trip goes into `meter` (sent / received count probes).
pub fn udp_ping(
    ctx: &Ctx,
    ns: Option<PathBuf>,
    dst: SocketAddr,
    dscp: u8,
    interval: Duration,
    meter: Arc<Meter>,
) -> Result<Task, Error> {
    let ctx = ctx.clone();
    spawn_in(ns, &format!("udp ping {dst}"), move |ready| {
        let s = connected_udp(dst, dscp)?;
        s.set_read_timeout(Some(Duration::from_millis(5)))
            .map_err(io("socket setup"))?;
        let _ = ready.send(Ok(()));
        let mut next = ctx.now_ns();
        let mut seq = 0u64;
        let mut buf = [0u8; 64];
        while !ctx.stopped() {
            let now = ctx.now_ns();
            if now >= next {
                let mut p = [0u8; 64];
                p[..8].copy_from_slice(&seq.to_be_bytes());
                p[8..16].copy_from_slice(&now.to_be_bytes());
                if s.send(&p).is_ok() {
                    meter.sent.fetch_add(1, Ordering::Relaxed);
                }
                seq += 1;
                next += interval.as_nanos() as u64;
            }
            if let Ok(n) = s.recv(&mut buf) {
                if n >= 16 {
                    let mut t = [0u8; 8];
                    t.copy_from_slice(&buf[8..16]);
                    let sent = u64::from_be_bytes(t);
                    let now = ctx.now_ns();
                    meter.received.fetch_add(1, Ordering::Relaxed);
                    meter.sample(now, now.saturating_sub(sent));
                }
            }
        }
        Ok(())
    })
}

/// A VoIP-like UDP receiver in namespace `ns` on `port`: records each datagram's one-way
/// delay (exact: sender and receiver share this process's clock) and counts it.
pub fn voip_sink(
    ctx: &Ctx,
    ns: Option<PathBuf>,
    port: u16,
    meter: Arc<Meter>,
) -> Result<Task, Error> {
    let ctx = ctx.clone();
    spawn_in(ns, &format!("voip sink :{port}"), move |ready| {
        let s = UdpSocket::bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port))
            .map_err(io(format!("bind udp :{port}")))?;
        s.set_read_timeout(Some(Duration::from_millis(100)))
            .map_err(io("socket setup"))?;
        let _ = ready.send(Ok(()));
        let mut buf = [0u8; 2048];
        while !ctx.stopped() {
            if let Ok(n) = s.recv(&mut buf) {
                if n >= 16 {
                    let mut t = [0u8; 8];
                    t.copy_from_slice(&buf[8..16]);
                    let sent = u64::from_be_bytes(t);
                    let now = ctx.now_ns();
                    meter.received.fetch_add(1, Ordering::Relaxed);
                    meter.bytes.fetch_add(n as u64, Ordering::Relaxed);
                    meter.sample(now, now.saturating_sub(sent));
                }
            }
        }
        Ok(())
    })
}

/// A VoIP-like UDP source in namespace `ns` to `dst`: `size`-byte datagrams every `interval`
/// (G.711-like: 172 bytes every 20 ms) with DSCP `dscp`; counts `meter.sent`.
pub fn voip_source(
    ctx: &Ctx,
    ns: Option<PathBuf>,
    dst: SocketAddr,
    dscp: u8,
    size: usize,
    interval: Duration,
    meter: Arc<Meter>,
) -> Result<Task, Error> {
    let ctx = ctx.clone();
    spawn_in(ns, &format!("voip {dst}"), move |ready| {
        let s = connected_udp(dst, dscp)?;
        let _ = ready.send(Ok(()));
        let mut p = vec![0u8; size.clamp(16, 1400)];
        let mut next = ctx.now_ns();
        let mut seq = 0u64;
        while !ctx.stopped() {
            let now = ctx.now_ns();
            if now < next {
                std::thread::sleep(Duration::from_nanos((next - now).min(20_000_000)));
                continue;
            }
            p[..8].copy_from_slice(&seq.to_be_bytes());
            p[8..16].copy_from_slice(&now.to_be_bytes());
            if s.send(&p).is_ok() {
                meter.sent.fetch_add(1, Ordering::Relaxed);
            }
            seq += 1;
            next += interval.as_nanos() as u64;
        }
        Ok(())
    })
}

/// ICMP echo from namespace `ns` to `dst` (our own echo client, no system `ping`): one request
/// every `interval` with DSCP `dscp`; each reply's round trip goes into `meter` (sent /
/// received count requests and replies). Fails at start when no ICMP socket can be opened.
pub fn icmp_ping(
    ctx: &Ctx,
    ns: Option<PathBuf>,
    dst: Ipv4Addr,
    dscp: u8,
    interval: Duration,
    meter: Arc<Meter>,
) -> Result<Task, Error> {
    let ctx = ctx.clone();
    spawn_in(ns, &format!("icmp ping {dst}"), move |ready| {
        let mut c =
            daemon::probe::echo::EchoClient::new(dst, dscp << 2).map_err(io("ICMP socket"))?;
        let _ = ready.send(Ok(()));
        // Send times by sequence number (16 bits: at 10 per second that is 109 minutes).
        let mut sent_at = vec![None::<u64>; 1 << 16];
        let mut next = ctx.now_ns();
        while !ctx.stopped() {
            let now = ctx.now_ns();
            if now >= next {
                if let Ok(seq) = c.send() {
                    sent_at[usize::from(seq)] = Some(now);
                    meter.sent.fetch_add(1, Ordering::Relaxed);
                }
                next += interval.as_nanos() as u64;
            }
            let wait = Duration::from_nanos(next.saturating_sub(ctx.now_ns()))
                .clamp(Duration::from_micros(100), Duration::from_millis(5));
            if let Ok(Some(seq)) = c.recv(wait) {
                if let Some(t) = sent_at[usize::from(seq)].take() {
                    let now = ctx.now_ns();
                    meter.received.fetch_add(1, Ordering::Relaxed);
                    meter.sample(now, now.saturating_sub(t));
                }
            }
        }
        Ok(())
    })
}
