//! A throwaway namespace lab for measuring the dataplane and the link emulator (used by
//! `purple bench dataplane` and the namespace tests): client and server namespaces joined either
//! directly, through a middle namespace where a bridge runs, or routed by the kernel. Needs root
//! and `ip`; everything is deleted when the [`Lab`] is dropped (its namespaces are
//! [`os::netns::Netns`] guards).

use std::fmt;
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use os::netns::{CommandError, Netns};

use crate::{Error, Forwarder, Stopper};

/// Why a namespace lab could not be built or a measurement in it failed.
#[derive(Debug)]
pub enum LabError {
    /// Namespaces need root.
    NotRoot,
    /// An `ip`/`sysctl` command building the lab failed.
    Command(CommandError),
    /// A thread could not enter its namespace.
    Setns {
        /// The namespace's file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// A socket operation of a measurement failed.
    Io {
        /// Which operation (`bind`, `listen`, `connect`, ...).
        what: &'static str,
        /// Why.
        source: io::Error,
    },
    /// A measurement's peer (`what`) did not signal it was ready within 5 s.
    NotStarted(&'static str),
    /// A thread (`what`) panicked.
    Panicked(&'static str),
    /// The bridge or link emulator failed.
    Bridge(Error),
    /// [`Running::stop`] found the bridge stopped already.
    AlreadyStopped,
}

impl fmt::Display for LabError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LabError::NotRoot => write!(f, "not root"),
            LabError::Command(e) => write!(f, "cannot set up the lab: {e}"),
            LabError::Setns { path, source } => write!(f, "setns {}: {source}", path.display()),
            LabError::Io { what, source } => write!(f, "{what}: {source}"),
            LabError::NotStarted(what) => write!(f, "{what} did not start"),
            LabError::Panicked(what) => write!(f, "{what} panicked"),
            LabError::Bridge(e) => write!(f, "{e}"),
            LabError::AlreadyStopped => write!(f, "bridge already stopped"),
        }
    }
}

impl std::error::Error for LabError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            LabError::Command(e) => Some(e),
            LabError::Setns { source, .. } | LabError::Io { source, .. } => Some(source),
            LabError::Bridge(e) => Some(e),
            _ => None,
        }
    }
}

impl From<CommandError> for LabError {
    fn from(e: CommandError) -> Self {
        LabError::Command(e)
    }
}

/// `map_err` for a socket operation `what`.
fn io_err(what: &'static str) -> impl FnOnce(io::Error) -> LabError {
    move |source| LabError::Io { what, source }
}

/// How client and server are joined.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// One veth pair c0—s0 (the reference).
    Direct,
    /// c0—b0 and b1—s0, nothing joining b0 and b1 (a bridge goes there).
    Bridged,
    /// c0—b0 and b1—s0 on two subnets, the middle namespace forwarding IP.
    Routed,
}

/// Namespaces `<prefix>c`, `<prefix>b`, `<prefix>s`; deleted on drop (on every exit path: they
/// are [`Netns`] guards, also removed on SIGINT/SIGTERM once
/// [`os::netns::install_signal_cleanup`] runs).
#[derive(Debug)]
pub struct Lab {
    /// Unique name prefix.
    pub prefix: String,
    /// The server's address as seen by the client.
    pub server: Ipv4Addr,
    /// Client, middle and server namespaces.
    c: Netns,
    b: Netns,
    s: Netns,
}

impl Lab {
    /// Builds the namespaces and links, or says why it cannot.
    pub fn new(shape: Shape) -> Result<Lab, LabError> {
        if !os::is_root() {
            return Err(LabError::NotRoot);
        }
        let routed = shape == Shape::Routed;
        let prefix = os::netns::unique_prefix("pl");
        let [c, b, s] = ['c', 'b', 's'].map(|w| format!("{prefix}{w}"));
        let (c, b, s) = (Netns::create(&c)?, Netns::create(&b)?, Netns::create(&s)?);
        if shape == Shape::Direct {
            c.veth("c0", &s, "s0")?;
        } else {
            c.veth("c0", &b, "b0")?;
            b.veth("b1", &s, "s0")?;
        }
        let (ca, sa) = if routed {
            ("10.79.1.1/24", "10.79.2.1/24")
        } else {
            ("10.79.0.1/24", "10.79.0.2/24")
        };
        c.ip(&["addr", "add", ca, "dev", "c0"])?;
        s.ip(&["addr", "add", sa, "dev", "s0"])?;
        if routed {
            b.ip(&["addr", "add", "10.79.1.2/24", "dev", "b0"])?;
            b.ip(&["addr", "add", "10.79.2.2/24", "dev", "b1"])?;
            c.ip(&["route", "add", "default", "via", "10.79.1.2"])?;
            s.ip(&["route", "add", "default", "via", "10.79.2.2"])?;
            b.sysctl("net.ipv4.ip_forward", "1")?;
        }
        Ok(Lab {
            prefix,
            server: if routed {
                Ipv4Addr::new(10, 79, 2, 1)
            } else {
                Ipv4Addr::new(10, 79, 0, 2)
            },
            c,
            b,
            s,
        })
    }

    /// Namespace `which` (`c`, `b` or `s`; anything else is `s`).
    fn netns(&self, which: char) -> &Netns {
        match which {
            'c' => &self.c,
            'b' => &self.b,
            _ => &self.s,
        }
    }

    /// The name of namespace `which` (`c`, `b` or `s`).
    pub fn ns(&self, which: char) -> String {
        self.netns(which).name().to_string()
    }

    /// The path to enter namespace `which` with [`os::netns::enter`].
    pub fn ns_path(&self, which: char) -> PathBuf {
        self.netns(which).path()
    }

    /// Runs `PROG ARGS` (`cmd`) in namespace `which`.
    pub fn exec(&self, which: char, cmd: &[&str]) -> Result<(), CommandError> {
        let (prog, args) = cmd.split_first().unwrap_or((&"true", &[]));
        self.netns(which).exec(prog, args)
    }

    /// Spawns `f` in a thread inside namespace `which`.
    pub fn spawn<T: Send + 'static>(
        &self,
        which: char,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> JoinHandle<Result<T, LabError>> {
        let path = self.ns_path(which);
        thread::spawn(move || {
            os::netns::enter(&path).map_err(|source| LabError::Setns { path, source })?;
            Ok(f())
        })
    }

    /// Runs `PROG ARGS` (`cmd`) in namespace `which`; its standard output when it succeeded.
    pub fn output(&self, which: char, cmd: &[&str]) -> Result<String, CommandError> {
        let (prog, args) = cmd.split_first().unwrap_or((&"true", &[]));
        self.netns(which).output(prog, args)
    }

    /// A TCP bulk transfer client → server for `d` (after `warmup`); returns goodput in bit/s.
    pub fn tcp_goodput(&self, port: u16, warmup: Duration, d: Duration) -> Result<f64, LabError> {
        self.tcp_goodput_sampled(port, 1, warmup, d, &mut || None)
            .map(|(g, _)| g)
    }

    /// [`tcp_goodput`](Self::tcp_goodput) with `flows` parallel connections (at least one; their
    /// goodputs summed), also calling `sample` right at the start and the end of the
    /// measurement window; it reads a byte counter (e.g. what a shaper released) and returns it
    /// with the monotonic time in ns it was read at. Returns the goodput and, when both samples
    /// were taken, the counter's rate in bit/s between the two reads.
    pub fn tcp_goodput_sampled(
        &self,
        port: u16,
        flows: usize,
        warmup: Duration,
        d: Duration,
        sample: &mut dyn FnMut() -> Option<(u64, u64)>,
    ) -> Result<(f64, Option<f64>), LabError> {
        let flows = flows.max(1);
        let received = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (ready_tx, ready_rx) = mpsc::channel();
        let (rcv, st) = (received.clone(), stop.clone());
        let server = self.spawn('s', move || {
            let l = TcpListener::bind(("0.0.0.0", port)).map_err(io_err("listen"))?;
            let _ = ready_tx.send(());
            // Polled, so that a client that never connects cannot hold the server forever.
            l.set_nonblocking(true).map_err(io_err("listen"))?;
            let mut readers = Vec::with_capacity(flows);
            while readers.len() < flows && !st.load(Ordering::Relaxed) {
                let mut c = match l.accept() {
                    Ok((c, _)) => c,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        thread::sleep(Duration::from_millis(2));
                        continue;
                    }
                    Err(e) => return Err(io_err("accept")(e)),
                };
                let _ = c.set_nonblocking(false);
                let _ = c.set_read_timeout(Some(Duration::from_millis(200)));
                let (rcv, st) = (rcv.clone(), st.clone());
                readers.push(thread::spawn(move || {
                    let mut buf = vec![0u8; 1 << 16];
                    while !st.load(Ordering::Relaxed) {
                        match c.read(&mut buf) {
                            Ok(0) => break,
                            Ok(n) => {
                                rcv.fetch_add(n as u64, Ordering::Relaxed);
                            }
                            Err(_) => continue,
                        }
                    }
                }));
            }
            for r in readers {
                let _ = r.join();
            }
            Ok::<(), LabError>(())
        });
        ready_rx
            .recv_timeout(Duration::from_secs(5))
            .map_err(|_| LabError::NotStarted("server"))?;
        let addr = SocketAddr::from((self.server, port));
        let clients: Vec<_> = (0..flows)
            .map(|_| {
                let st = stop.clone();
                self.spawn('c', move || {
                    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(3))
                        .map_err(io_err("connect"))?;
                    let _ = s.set_write_timeout(Some(Duration::from_millis(200)));
                    let buf = vec![0x5au8; 1 << 16];
                    while !st.load(Ordering::Relaxed) {
                        let _ = s.write(&buf);
                    }
                    Ok::<(), LabError>(())
                })
            })
            .collect();
        thread::sleep(warmup);
        let s0 = sample();
        let b0 = received.load(Ordering::Relaxed);
        let t0 = os::monotonic_ns();
        thread::sleep(d);
        let b1 = received.load(Ordering::Relaxed);
        let dt = (os::monotonic_ns() - t0) as f64 / 1e9;
        let s1 = sample();
        let sampled = match (s0, s1) {
            (Some((a, ta)), Some((b, tb))) if tb > ta => {
                Some(b.saturating_sub(a) as f64 * 8.0 / ((tb - ta) as f64 / 1e9))
            }
            _ => None,
        };
        stop.store(true, Ordering::Relaxed);
        let mut first_err = Ok(());
        for c in clients {
            let r = c.join().map_err(|_| LabError::Panicked("client"));
            if let (Ok(()), Err(e)) = (&first_err, r.and_then(|r| r).and_then(|r| r)) {
                first_err = Err(e);
            }
        }
        let _ = server.join();
        first_err?;
        Ok(((b1 - b0) as f64 * 8.0 / dt, sampled))
    }

    /// `count` UDP ping-pongs (64-byte payload, one every `gap`) client → server echo; returns
    /// the round-trip times in nanoseconds, sorted (lost ones left out).
    pub fn udp_rtts(&self, port: u16, count: usize, gap: Duration) -> Result<Vec<u64>, LabError> {
        let stop = Arc::new(AtomicBool::new(false));
        let (ready_tx, ready_rx) = mpsc::channel();
        let st = stop.clone();
        let server = self.spawn('s', move || {
            let s = UdpSocket::bind(("0.0.0.0", port)).map_err(io_err("bind"))?;
            let _ = s.set_read_timeout(Some(Duration::from_millis(100)));
            let _ = ready_tx.send(());
            let mut buf = [0u8; 256];
            while !st.load(Ordering::Relaxed) {
                if let Ok((n, from)) = s.recv_from(&mut buf) {
                    let _ = s.send_to(&buf[..n], from);
                }
            }
            Ok::<(), LabError>(())
        });
        ready_rx
            .recv_timeout(Duration::from_secs(5))
            .map_err(|_| LabError::NotStarted("echo server"))?;
        let addr = SocketAddr::from((self.server, port));
        let client = self.spawn('c', move || {
            let s = UdpSocket::bind(("0.0.0.0", 0)).map_err(io_err("bind"))?;
            let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
            let mut rtts = Vec::with_capacity(count);
            let mut buf = [0u8; 256];
            for i in 0..count as u64 {
                let mut msg = [0u8; 64];
                msg[..8].copy_from_slice(&i.to_le_bytes());
                let t0 = os::monotonic_ns();
                if s.send_to(&msg, addr).is_err() {
                    continue;
                }
                while let Ok(n) = s.recv(&mut buf) {
                    if n >= 8 && buf[..8] == msg[..8] {
                        rtts.push(os::monotonic_ns() - t0);
                        break;
                    }
                }
                thread::sleep(gap);
            }
            rtts.sort_unstable();
            Ok::<Vec<u64>, LabError>(rtts)
        });
        let r = client
            .join()
            .map_err(|_| LabError::Panicked("ping client"))?;
        stop.store(true, Ordering::Relaxed);
        let _ = server.join();
        r?
    }

    /// One-way delays (ns, sorted) of `count` small UDP datagrams sent client → server `gap`
    /// apart: from just before the client's `send` to the kernel's arrival timestamp at the
    /// server (`SO_TIMESTAMPNS`, taken before the server thread wakes), both on the machine's one
    /// `CLOCK_REALTIME`. Unlike a round trip this counts one pass through the middle, and none of
    /// the endpoints' wake-ups.
    pub fn udp_one_way(
        &self,
        port: u16,
        count: usize,
        gap: Duration,
    ) -> Result<Vec<u64>, LabError> {
        let stop = Arc::new(AtomicBool::new(false));
        let (ready_tx, ready_rx) = mpsc::channel();
        let st = stop.clone();
        let server = self.spawn('s', move || {
            use std::os::fd::{AsFd, AsRawFd};
            let s = UdpSocket::bind(("0.0.0.0", port)).map_err(io_err("bind"))?;
            os::enable_rx_timestamps(s.as_fd()).map_err(io_err("SO_TIMESTAMPNS"))?;
            let _ = s.set_read_timeout(Some(Duration::from_millis(100)));
            let _ = ready_tx.send(());
            let mut delays = Vec::with_capacity(count);
            let mut buf = [0u8; 256];
            while !st.load(Ordering::Relaxed) {
                if let Ok((n, Some(rx))) = os::recv_timestamped(s.as_raw_fd(), &mut buf) {
                    if n >= 8 {
                        let mut t = [0u8; 8];
                        t.copy_from_slice(&buf[..8]);
                        delays.push(rx.saturating_sub(u64::from_le_bytes(t)));
                    }
                }
            }
            delays.sort_unstable();
            Ok::<Vec<u64>, LabError>(delays)
        });
        ready_rx
            .recv_timeout(Duration::from_secs(5))
            .map_err(|_| LabError::NotStarted("one-way receiver"))?;
        let addr = SocketAddr::from((self.server, port));
        let client = self.spawn('c', move || {
            let s = UdpSocket::bind(("0.0.0.0", 0)).map_err(io_err("bind"))?;
            for _ in 0..count {
                let mut msg = [0u8; 64];
                msg[..8].copy_from_slice(&os::realtime_ns().to_le_bytes());
                let _ = s.send_to(&msg, addr);
                thread::sleep(gap);
            }
            Ok::<(), LabError>(())
        });
        // Each join: the thread panicked, or could not enter its namespace, or its own error.
        let sent = client
            .join()
            .map_err(|_| LabError::Panicked("one-way sender"));
        thread::sleep(Duration::from_millis(50));
        stop.store(true, Ordering::Relaxed);
        let got = server
            .join()
            .map_err(|_| LabError::Panicked("one-way receiver"));
        sent???;
        got??
    }
}

/// A stopped bridge's final `stats --json` text and its forwarding threads' CPU nanoseconds, or
/// why it failed.
type StatsAndCpu = Result<(String, u64), LabError>;

/// A bridge (or link emulator) running in a thread of the middle namespace; stopped when
/// dropped (a test that fails midway leaves no forwarding thread behind).
#[derive(Debug)]
pub struct Running {
    stopper: Stopper,
    handle: Option<JoinHandle<Result<StatsAndCpu, LabError>>>,
}

impl Running {
    /// Stops it; returns its final `stats --json` text and the CPU nanoseconds its forwarding
    /// threads used ([`Forwarder::run_cpu_ns`]).
    pub fn stop(mut self) -> Result<(String, u64), LabError> {
        self.stopper.stop();
        match self.handle.take() {
            Some(h) => h
                .join()
                .map_err(|_| LabError::Panicked("bridge thread"))??,
            None => Err(LabError::AlreadyStopped),
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(h) = self.handle.take() {
            self.stopper.stop();
            let _ = h.join();
        }
    }
}

impl Lab {
    /// Builds a dataplane with `make` inside the middle namespace (its interfaces are b0 and
    /// b1: a [`Bridge`](crate::Bridge), a [`MqBridge`](crate::MqBridge), the link emulator) and
    /// runs it until [`Running::stop`].
    pub fn start<F: Forwarder>(
        &self,
        make: impl FnOnce() -> Result<F, Error> + Send + 'static,
    ) -> Result<Running, LabError> {
        let (tx, rx) = mpsc::channel();
        let handle = self.spawn('b', move || {
            let mut br = make().map_err(LabError::Bridge)?;
            let _ = tx.send(br.stopper());
            br.run().map_err(LabError::Bridge)?;
            Ok::<(String, u64), LabError>((br.stats_json(), br.run_cpu_ns()))
        });
        match rx.recv_timeout(Duration::from_secs(5)) {
            Ok(stopper) => Ok(Running {
                stopper,
                handle: Some(handle),
            }),
            Err(_) => Err(match handle.join() {
                Ok(Ok(Err(e))) | Ok(Err(e)) => e,
                _ => LabError::NotStarted("bridge"),
            }),
        }
    }
}
