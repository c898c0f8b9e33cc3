//! A throwaway namespace lab for measuring the dataplane and the link emulator (used by
//! `purple bench dataplane` and the namespace tests): client and server namespaces joined either
//! directly, through a middle namespace where a bridge runs, or routed by the kernel. Needs root
//! and `ip`; everything is deleted when the [`Lab`] is dropped.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use crate::{Error, Forwarder, Stopper};

static COUNTER: AtomicUsize = AtomicUsize::new(0);

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

/// Runs `ip args`; true on success.
pub fn ip(args: &[&str]) -> bool {
    Command::new("ip")
        .args(args)
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// True when this process runs as root.
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("Uid:"))
        .is_some_and(|l| l.split_whitespace().nth(1) == Some("0"))
}

/// Namespaces `<prefix>c`, `<prefix>b`, `<prefix>s`; deleted on drop.
#[derive(Debug)]
pub struct Lab {
    /// Unique name prefix.
    pub prefix: String,
    /// The server's address as seen by the client.
    pub server: Ipv4Addr,
}

impl Lab {
    /// Builds the namespaces and links, or says why it cannot.
    pub fn new(shape: Shape) -> Result<Lab, String> {
        if !is_root() {
            return Err("not root".into());
        }
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let routed = shape == Shape::Routed;
        let lab = Lab {
            prefix: format!("pl-{}-{n}", std::process::id()),
            server: if routed {
                Ipv4Addr::new(10, 79, 2, 1)
            } else {
                Ipv4Addr::new(10, 79, 0, 2)
            },
        };
        let (c, b, s) = (lab.ns('c'), lab.ns('b'), lab.ns('s'));
        for ns in [&c, &b, &s] {
            if !ip(&["netns", "add", ns]) {
                return Err(format!("cannot create network namespace {ns}"));
            }
        }
        let mut ok = if shape == Shape::Direct {
            ip(&[
                "-n", &c, "link", "add", "c0", "type", "veth", "peer", "name", "s0", "netns", &s,
            ])
        } else {
            ip(&[
                "-n", &c, "link", "add", "c0", "type", "veth", "peer", "name", "b0", "netns", &b,
            ]) && ip(&[
                "-n", &b, "link", "add", "b1", "type", "veth", "peer", "name", "s0", "netns", &s,
            ])
        };
        let (ca, sa) = if routed {
            ("10.79.1.1/24", "10.79.2.1/24")
        } else {
            ("10.79.0.1/24", "10.79.0.2/24")
        };
        ok = ok
            && ip(&["-n", &c, "addr", "add", ca, "dev", "c0"])
            && ip(&["-n", &s, "addr", "add", sa, "dev", "s0"]);
        let mut devs = vec![(&c, "c0"), (&c, "lo"), (&s, "s0"), (&s, "lo")];
        if shape != Shape::Direct {
            devs.extend([(&b, "b0"), (&b, "b1"), (&b, "lo")]);
        }
        ok = ok
            && devs
                .iter()
                .all(|(ns, d)| ip(&["-n", ns, "link", "set", d, "up"]));
        if routed {
            ok = ok
                && ip(&["-n", &b, "addr", "add", "10.79.1.2/24", "dev", "b0"])
                && ip(&["-n", &b, "addr", "add", "10.79.2.2/24", "dev", "b1"])
                && ip(&["-n", &c, "route", "add", "default", "via", "10.79.1.2"])
                && ip(&["-n", &s, "route", "add", "default", "via", "10.79.2.2"])
                && lab.exec('b', &["sysctl", "-qw", "net.ipv4.ip_forward=1"]);
        }
        if !ok {
            return Err("cannot set up the veth pairs".into());
        }
        Ok(lab)
    }

    /// The name of namespace `which` (`c`, `b` or `s`).
    pub fn ns(&self, which: char) -> String {
        format!("{}{which}", self.prefix)
    }

    /// The path to enter namespace `which` with [`crate::sys::enter_netns`].
    pub fn ns_path(&self, which: char) -> PathBuf {
        PathBuf::from("/var/run/netns").join(self.ns(which))
    }

    /// Runs a command in namespace `which`; true on success.
    pub fn exec(&self, which: char, cmd: &[&str]) -> bool {
        let ns = self.ns(which);
        let mut args = vec!["netns", "exec", ns.as_str()];
        args.extend_from_slice(cmd);
        ip(&args)
    }

    /// Spawns `f` in a thread inside namespace `which`.
    pub fn spawn<T: Send + 'static>(
        &self,
        which: char,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> JoinHandle<Result<T, String>> {
        let p = self.ns_path(which);
        thread::spawn(move || {
            crate::sys::enter_netns(&p).map_err(|e| format!("setns {}: {e}", p.display()))?;
            Ok(f())
        })
    }

    /// Runs `cmd` in namespace `which`; its standard output when it succeeded.
    pub fn output(&self, which: char, cmd: &[&str]) -> Option<String> {
        let ns = self.ns(which);
        let o = Command::new("ip")
            .args(["netns", "exec", ns.as_str()])
            .args(cmd)
            .output()
            .ok()?;
        o.status
            .success()
            .then(|| String::from_utf8_lossy(&o.stdout).into_owned())
    }

    /// A TCP bulk transfer client → server for `d` (after `warmup`); returns goodput in bit/s.
    pub fn tcp_goodput(&self, port: u16, warmup: Duration, d: Duration) -> Result<f64, String> {
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
    ) -> Result<(f64, Option<f64>), String> {
        let flows = flows.max(1);
        let received = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (ready_tx, ready_rx) = mpsc::channel();
        let (rcv, st) = (received.clone(), stop.clone());
        let server = self.spawn('s', move || {
            let l = TcpListener::bind(("0.0.0.0", port)).map_err(|e| e.to_string())?;
            let _ = ready_tx.send(());
            // Polled, so that a client that never connects cannot hold the server forever.
            l.set_nonblocking(true).map_err(|e| e.to_string())?;
            let mut readers = Vec::with_capacity(flows);
            while readers.len() < flows && !st.load(Ordering::Relaxed) {
                let mut c = match l.accept() {
                    Ok((c, _)) => c,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        thread::sleep(Duration::from_millis(2));
                        continue;
                    }
                    Err(e) => return Err(e.to_string()),
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
            Ok::<(), String>(())
        });
        ready_rx
            .recv_timeout(Duration::from_secs(5))
            .map_err(|_| "server did not start".to_string())?;
        let addr = SocketAddr::from((self.server, port));
        let clients: Vec<_> = (0..flows)
            .map(|_| {
                let st = stop.clone();
                self.spawn('c', move || {
                    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(3))
                        .map_err(|e| format!("connect: {e}"))?;
                    let _ = s.set_write_timeout(Some(Duration::from_millis(200)));
                    let buf = vec![0x5au8; 1 << 16];
                    while !st.load(Ordering::Relaxed) {
                        let _ = s.write(&buf);
                    }
                    Ok::<(), String>(())
                })
            })
            .collect();
        thread::sleep(warmup);
        let s0 = sample();
        let b0 = received.load(Ordering::Relaxed);
        let t0 = crate::sys::monotonic_ns();
        thread::sleep(d);
        let b1 = received.load(Ordering::Relaxed);
        let dt = (crate::sys::monotonic_ns() - t0) as f64 / 1e9;
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
            let r = c.join().map_err(|_| "client panicked".to_string());
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
    pub fn udp_rtts(&self, port: u16, count: usize, gap: Duration) -> Result<Vec<u64>, String> {
        let stop = Arc::new(AtomicBool::new(false));
        let (ready_tx, ready_rx) = mpsc::channel();
        let st = stop.clone();
        let server = self.spawn('s', move || {
            let s = UdpSocket::bind(("0.0.0.0", port)).map_err(|e| e.to_string())?;
            let _ = s.set_read_timeout(Some(Duration::from_millis(100)));
            let _ = ready_tx.send(());
            let mut buf = [0u8; 256];
            while !st.load(Ordering::Relaxed) {
                if let Ok((n, from)) = s.recv_from(&mut buf) {
                    let _ = s.send_to(&buf[..n], from);
                }
            }
            Ok::<(), String>(())
        });
        ready_rx
            .recv_timeout(Duration::from_secs(5))
            .map_err(|_| "echo server did not start".to_string())?;
        let addr = SocketAddr::from((self.server, port));
        let client = self.spawn('c', move || {
            let s = UdpSocket::bind(("0.0.0.0", 0)).map_err(|e| e.to_string())?;
            let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
            let mut rtts = Vec::with_capacity(count);
            let mut buf = [0u8; 256];
            for i in 0..count as u64 {
                let mut msg = [0u8; 64];
                msg[..8].copy_from_slice(&i.to_le_bytes());
                let t0 = crate::sys::monotonic_ns();
                if s.send_to(&msg, addr).is_err() {
                    continue;
                }
                while let Ok(n) = s.recv(&mut buf) {
                    if n >= 8 && buf[..8] == msg[..8] {
                        rtts.push(crate::sys::monotonic_ns() - t0);
                        break;
                    }
                }
                thread::sleep(gap);
            }
            rtts.sort_unstable();
            Ok::<Vec<u64>, String>(rtts)
        });
        let r = client.join().map_err(|_| "ping client panicked")?;
        stop.store(true, Ordering::Relaxed);
        let _ = server.join();
        r?
    }

    /// One-way delays (ns, sorted) of `count` small UDP datagrams sent client → server `gap`
    /// apart: from just before the client's `send` to the kernel's arrival timestamp at the
    /// server (`SO_TIMESTAMPNS`, taken before the server thread wakes), both on the machine's one
    /// `CLOCK_REALTIME`. Unlike a round trip this counts one pass through the middle, and none of
    /// the endpoints' wake-ups.
    pub fn udp_one_way(&self, port: u16, count: usize, gap: Duration) -> Result<Vec<u64>, String> {
        let stop = Arc::new(AtomicBool::new(false));
        let (ready_tx, ready_rx) = mpsc::channel();
        let st = stop.clone();
        let server = self.spawn('s', move || {
            use std::os::fd::AsRawFd;
            let s = UdpSocket::bind(("0.0.0.0", port)).map_err(|e| e.to_string())?;
            crate::sys::enable_rx_timestamps(s.as_raw_fd()).map_err(|e| e.to_string())?;
            let _ = s.set_read_timeout(Some(Duration::from_millis(100)));
            let _ = ready_tx.send(());
            let mut delays = Vec::with_capacity(count);
            let mut buf = [0u8; 256];
            while !st.load(Ordering::Relaxed) {
                if let Ok((n, Some(rx))) = crate::sys::recv_timestamped(s.as_raw_fd(), &mut buf) {
                    if n >= 8 {
                        let mut t = [0u8; 8];
                        t.copy_from_slice(&buf[..8]);
                        delays.push(rx.saturating_sub(u64::from_le_bytes(t)));
                    }
                }
            }
            delays.sort_unstable();
            Ok::<Vec<u64>, String>(delays)
        });
        ready_rx
            .recv_timeout(Duration::from_secs(5))
            .map_err(|_| "one-way receiver did not start".to_string())?;
        let addr = SocketAddr::from((self.server, port));
        let client = self.spawn('c', move || {
            let s = UdpSocket::bind(("0.0.0.0", 0)).map_err(|e| e.to_string())?;
            for _ in 0..count {
                let mut msg = [0u8; 64];
                msg[..8].copy_from_slice(&crate::sys::realtime_ns().to_le_bytes());
                let _ = s.send_to(&msg, addr);
                thread::sleep(gap);
            }
            Ok::<(), String>(())
        });
        // Each join: the thread panicked, or could not enter its namespace, or its own error.
        let sent = client
            .join()
            .map_err(|_| "one-way sender panicked".to_string());
        thread::sleep(Duration::from_millis(50));
        stop.store(true, Ordering::Relaxed);
        let got = server
            .join()
            .map_err(|_| "one-way receiver panicked".to_string());
        sent???;
        got??
    }
}

/// A stopped bridge's final `stats --json` text and its forwarding threads' CPU nanoseconds, or
/// why it failed.
type StatsAndCpu = Result<(String, u64), String>;

/// A bridge (or link emulator) running in a thread of the middle namespace; stopped when
/// dropped (a test that fails midway leaves no forwarding thread behind).
#[derive(Debug)]
pub struct Running {
    stopper: Stopper,
    handle: Option<JoinHandle<Result<StatsAndCpu, String>>>,
}

impl Running {
    /// Stops it; returns its final `stats --json` text and the CPU nanoseconds its forwarding
    /// threads used ([`Forwarder::run_cpu_ns`]).
    pub fn stop(mut self) -> Result<(String, u64), String> {
        self.stopper.stop();
        match self.handle.take() {
            Some(h) => h.join().map_err(|_| "bridge thread panicked")??,
            None => Err("bridge already stopped".into()),
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
    ) -> Result<Running, String> {
        let (tx, rx) = mpsc::channel();
        let handle = self.spawn('b', move || {
            let mut br = make().map_err(|e| e.to_string())?;
            let _ = tx.send(br.stopper());
            br.run().map_err(|e| e.to_string())?;
            Ok::<(String, u64), String>((br.stats_json(), br.run_cpu_ns()))
        });
        match rx.recv_timeout(Duration::from_secs(5)) {
            Ok(stopper) => Ok(Running {
                stopper,
                handle: Some(handle),
            }),
            Err(_) => Err(match handle.join() {
                Ok(Ok(Err(e))) | Ok(Err(e)) => e,
                _ => "bridge did not start".into(),
            }),
        }
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        for w in ['c', 'b', 's'] {
            ip(&["netns", "del", &self.ns(w)]);
        }
    }
}
