//! End-to-end tests in network namespaces: client — bridge — server over veth pairs (offloads
//! left on), the bridge running in a thread of the test that entered the middle namespace.
//! Skipped (reported as such, never passed) when not root or when namespaces cannot be created
//! (`testkit`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use dataplane::{Bridge, BridgeConfig, BridgeStats, Stopper};
use os::netns::Netns;

fn ns_path(name: &str) -> PathBuf {
    PathBuf::from("/var/run/netns").join(name)
}

/// One topology at a time: the tests measure rates and timing, and on a 2-core machine a
/// 400 Mbit/s transfer in one test would disturb another's shaper.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Three namespaces `<p>c`, `<p>b`, `<p>s` with veths c0—b0 and b1—s0; deleted on drop.
struct Topo {
    prefix: String,
    bridge: Option<(Stopper, JoinHandle<BridgeStats>)>,
    /// Client, middle and server namespaces, deleted when dropped (after the bridge stopped in
    /// `drop`).
    _ns: [Netns; 3],
    /// Held while the topology exists (released after the namespaces were deleted: the last
    /// field).
    _serial: std::sync::MutexGuard<'static, ()>,
}

impl Topo {
    fn c(&self) -> String {
        format!("{}c", self.prefix)
    }
    fn b(&self) -> String {
        format!("{}b", self.prefix)
    }
    fn s(&self) -> String {
        format!("{}s", self.prefix)
    }

    /// Builds the topology, or returns why it cannot.
    fn new() -> Result<Topo, String> {
        if !os::is_root() {
            return Err("not root".into());
        }
        // A test that panicked holding it poisons nothing we rely on.
        let serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let prefix = os::netns::unique_prefix("pt");
        let build = || -> Result<[Netns; 3], os::CommandError> {
            let c = Netns::create(&format!("{prefix}c"))?;
            let b = Netns::create(&format!("{prefix}b"))?;
            let s = Netns::create(&format!("{prefix}s"))?;
            c.veth("c0", &b, "b0")?;
            b.veth("b1", &s, "s0")?;
            c.ip(&["addr", "add", "10.77.0.1/24", "dev", "c0"])?;
            s.ip(&["addr", "add", "10.77.0.2/24", "dev", "s0"])?;
            Ok([c, b, s])
        };
        let ns = build().map_err(|e| e.to_string())?;
        Ok(Topo {
            prefix,
            bridge: None,
            _ns: ns,
            _serial: serial,
        })
    }

    /// Starts the bridge b0 (LAN) — b1 (WAN) in the middle namespace.
    fn start_bridge(&mut self, egress: &str, ingress: &str, ctl: Option<PathBuf>) {
        self.start_bridge_with(egress, ingress, ctl, |_| {});
    }

    /// [`start_bridge`](Self::start_bridge), with `setup` applied to the bridge before it runs.
    fn start_bridge_with(
        &mut self,
        egress: &str,
        ingress: &str,
        ctl: Option<PathBuf>,
        setup: fn(&mut Bridge),
    ) {
        let (tx, rx) = mpsc::channel();
        let cfg = BridgeConfig {
            if_a: "b0".into(),
            if_b: "b1".into(),
            egress: egress.into(),
            ingress: ingress.into(),
            name: self.prefix.clone(),
            ctl_path: ctl,
            ctl_group: None,
            seed: 7,
        };
        let path = ns_path(&self.b());
        let h = thread::spawn(move || {
            os::netns::enter(&path).expect("setns");
            let mut br = Bridge::new(cfg).expect("bridge");
            setup(&mut br);
            tx.send(br.stopper()).unwrap();
            br.run().expect("run");
            br.stats()
        });
        let stopper = rx
            .recv_timeout(Duration::from_secs(5))
            .expect("bridge started");
        self.bridge = Some((stopper, h));
    }

    fn stop_bridge(&mut self) -> BridgeStats {
        let (s, h) = self.bridge.take().expect("bridge running");
        s.stop();
        h.join().expect("bridge thread")
    }
}

impl Drop for Topo {
    fn drop(&mut self) {
        if let Some((s, h)) = self.bridge.take() {
            s.stop();
            let _ = h.join();
        }
    }
}

macro_rules! topo {
    () => {
        Topo::new().expect("the test topology (prerequisites were checked)")
    };
}

/// A TCP bulk transfer client (ns c) → server (ns s) for `secs`; `received` counts bytes at
/// the server as they arrive.
struct Transfer {
    received: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    handles: Vec<JoinHandle<()>>,
}

impl Transfer {
    fn start(t: &Topo, port: u16) -> Transfer {
        let received = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (ready_tx, ready_rx) = mpsc::channel();
        let (sp, rcv, st) = (ns_path(&t.s()), received.clone(), stop.clone());
        let server = thread::spawn(move || {
            os::netns::enter(&sp).expect("setns s");
            let l = TcpListener::bind(("10.77.0.2", port)).expect("bind");
            ready_tx.send(()).unwrap();
            let (mut c, _) = l.accept().expect("accept");
            c.set_read_timeout(Some(Duration::from_millis(200)))
                .unwrap();
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
        });
        ready_rx
            .recv_timeout(Duration::from_secs(5))
            .expect("server ready");
        let (cp, st) = (ns_path(&t.c()), stop.clone());
        let client = thread::spawn(move || {
            os::netns::enter(&cp).expect("setns c");
            let mut s = TcpStream::connect_timeout(
                &(std::net::Ipv4Addr::new(10, 77, 0, 2), port).into(),
                Duration::from_secs(3),
            )
            .expect("connect through the bridge");
            s.set_write_timeout(Some(Duration::from_millis(200)))
                .unwrap();
            let buf = vec![0x5au8; 1 << 16];
            while !st.load(Ordering::Relaxed) {
                let _ = s.write(&buf);
            }
        });
        Transfer {
            received,
            stop,
            handles: vec![server, client],
        }
    }

    /// Goodput in bit/s over the next `d`.
    fn measure(&self, d: Duration) -> f64 {
        let b0 = self.received.load(Ordering::Relaxed);
        let t0 = os::monotonic_ns();
        thread::sleep(d);
        let b1 = self.received.load(Ordering::Relaxed);
        let dt = (os::monotonic_ns() - t0) as f64 / 1e9;
        (b1 - b0) as f64 * 8.0 / dt
    }

    fn finish(self) {
        self.stop.store(true, Ordering::Relaxed);
        for h in self.handles {
            let _ = h.join();
        }
    }
}

/// Whether the server answers ICMP echo from the client (our own echo client, run in a thread
/// inside the client's namespace; no system `ping`).
fn ping(t: &Topo) -> bool {
    let c = ns_path(&t.c());
    thread::spawn(move || {
        os::netns::enter(&c).expect("setns c");
        daemon::probe::echo::reachable(
            std::net::Ipv4Addr::new(10, 77, 0, 2),
            3,
            Duration::from_secs(1),
        )
        .expect("ICMP socket")
    })
    .join()
    .expect("ping thread")
}

fn assert_accounting(s: &BridgeStats) {
    for (d, q) in [(&s.egress, &s.egress_qdisc), (&s.ingress, &s.ingress_qdisc)] {
        assert_eq!(d.rx_packets, d.offered + d.bypassed + d.truncated, "{d:?}");
        assert_eq!(
            d.tx_packets + d.tx_errors + d.pending,
            q.dequeued.packets + d.bypassed,
            "{d:?} {q:?}"
        );
        assert!(q.is_balanced(), "{q:?}");
        assert_eq!(d.tx_errors, 0, "{d:?}");
        assert!(d.tx_wire_bytes >= d.tx_bytes, "{d:?}");
        assert!(d.rx_wire_bytes >= d.rx_bytes, "{d:?}");
    }
}

fn ping_and_unshaped_tcp_pass_through_the_bridge_with_offloads_on() {
    let mut t = topo!();
    // Without the bridge nothing passes (b0 and b1 are not connected).
    assert!(!ping(&t), "ping passed with no bridge running");
    t.start_bridge("pfifo", "pfifo", None);
    assert!(ping(&t), "ping through the bridge failed");
    let x = Transfer::start(&t, 5001);
    thread::sleep(Duration::from_millis(300));
    let bps = x.measure(Duration::from_millis(1500));
    x.finish();
    let s = t.stop_bridge();
    eprintln!(
        "unshaped TCP goodput through the bridge: {:.2} Gbit/s; {s:?}",
        bps / 1e9
    );
    assert!(bps > 200e6, "unshaped TCP only {bps:.0} bit/s");
    assert!(s.egress.rx_packets > 0 && s.ingress.rx_packets > 0);
    assert_accounting(&s);
}

fn cake_at_20mbit_shapes_tcp_and_set_bandwidth_changes_it_live() {
    let mut t = topo!();
    let ctl = std::env::temp_dir().join(format!("{}.sock", t.prefix));
    t.start_bridge(
        "cake bandwidth 20Mbit besteffort",
        "cake bandwidth 100Mbit besteffort ingress",
        Some(ctl.clone()),
    );
    let x = Transfer::start(&t, 5002);
    thread::sleep(Duration::from_millis(1000));
    let at20 = x.measure(Duration::from_millis(2000));
    let answer = dataplane::ctl::request(&ctl, &"set-bandwidth egress 40Mbit".parse().unwrap())
        .expect("ctl");
    assert_eq!(answer, "egress bandwidth 40Mbit\n");
    thread::sleep(Duration::from_millis(500));
    let at40 = x.measure(Duration::from_millis(2000));
    let json = dataplane::ctl::request(&ctl, &"stats --json".parse().unwrap()).expect("stats");
    let text = dataplane::ctl::request(&ctl, &"stats".parse().unwrap()).expect("stats");
    x.finish();
    let s = t.stop_bridge();
    eprintln!(
        "TCP goodput at 20Mbit: {:.2} Mbit/s, after set-bandwidth 40Mbit: {:.2} Mbit/s\n{text}",
        at20 / 1e6,
        at40 / 1e6
    );
    // Goodput is the shaped rate times payload/frame (1448/1514 = 0.956 with timestamps).
    let ratio20 = at20 / 20e6;
    let ratio40 = at40 / 40e6;
    assert!(
        (0.90..=1.0).contains(&ratio20),
        "at 20Mbit: {at20:.0} bit/s"
    );
    assert!(
        (0.90..=1.0).contains(&ratio40),
        "at 40Mbit: {at40:.0} bit/s"
    );
    let v: serde_json::Value = serde_json::from_str(&json).expect("stats json");
    assert_eq!(v[0]["kind"], "cake");
    assert_eq!(v[0]["dev"], "b1");
    assert_eq!(v[0]["options"]["bandwidth"], 5_000_000);
    assert!(text.contains("qdisc cake 8001: dev b1 root"), "{text}");
    assert!(!ctl.exists(), "control socket left behind");
    assert_accounting(&s);
    assert!(
        s.egress_qdisc.dequeued.packets > s.egress.offered,
        "no GSO splitting seen"
    );
}

/// Segments CAKE cut that leave together go out as rebuilt super-packets, which the kernel
/// accepts and segments back: TCP runs at the shaped rate through them. The bridge dequeues at
/// most every 200 µs (`set_batch_ns`), so each pass releases several segments.
fn rejoined_super_packets_carry_tcp_at_the_shaped_rate() {
    let mut t = topo!();
    t.start_bridge_with("cake bandwidth 400Mbit besteffort", "pfifo", None, |br| {
        br.set_batch_ns(200_000)
    });
    let x = Transfer::start(&t, 5005);
    thread::sleep(Duration::from_millis(700));
    let g = x.measure(Duration::from_millis(1500));
    x.finish();
    let s = t.stop_bridge();
    eprintln!("goodput {:.1} Mbit/s; {:?}", g / 1e6, s.egress);
    assert!(s.egress.rejoined > 0, "nothing rejoined: {:?}", s.egress);
    // At most one shaper-limited pass per 200 µs: several segments per pass.
    assert!(
        s.egress.shaper_wakeups * 3 < s.egress.tx_packets,
        "{:?}",
        s.egress
    );
    // A bad checksum or length in a rebuilt super-packet would stall TCP; a correct one keeps
    // it near the rate (goodput is at most 0.956 of it; wide margin for a loaded machine).
    assert!(g > 0.4 * 400e6, "goodput {g:.0} bit/s");
    assert!(g < 400e6, "goodput {g:.0} bit/s above the shaped rate");
    assert_accounting(&s);
}

fn malformed_and_non_ip_frames_are_forwarded_unchanged() {
    let mut t = topo!();
    t.start_bridge("cake bandwidth 50Mbit", "cake bandwidth 50Mbit", None);
    // An IPv4 frame whose header is cut short, a frame with an unknown EtherType, and an IPv6
    // frame claiming TCP with a truncated TCP header.
    let mut frames: Vec<Vec<u8>> = Vec::new();
    let mac = |f: &mut Vec<u8>, ethertype: u16| {
        f.extend_from_slice(&[0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01]);
        f.extend_from_slice(&ethertype.to_be_bytes());
    };
    let mut f = Vec::new();
    mac(&mut f, 0x0800);
    f.extend_from_slice(&[0x45, 0, 0, 200, 0xde, 0xad]);
    frames.push(f);
    let mut f = Vec::new();
    mac(&mut f, 0x88b5);
    f.extend((0..100u8).map(|i| i.wrapping_mul(37)));
    frames.push(f);
    let mut f = Vec::new();
    mac(&mut f, 0x86dd);
    f.extend_from_slice(&[0x60, 0, 0, 0, 0, 40, 6, 64]);
    f.extend_from_slice(&[0xfd; 32]);
    f.extend_from_slice(&[0xbe, 0xef, 0, 80]);
    frames.push(f);

    let (sp, want) = (ns_path(&t.s()), frames.clone());
    let (ready_tx, ready_rx) = mpsc::channel();
    let rx = thread::spawn(move || {
        os::netns::enter(&sp).unwrap();
        let sock = os::PacketSocket::open("s0", 1 << 20).unwrap();
        ready_tx.send(()).unwrap();
        let mut hdrs = [[0u8; 10]; 8];
        let mut bufs: Vec<Vec<u8>> = (0..8).map(|_| Vec::with_capacity(70_000)).collect();
        let mut trunc = [false; 8];
        let mut seen = vec![false; want.len()];
        let end = os::monotonic_ns() + 3_000_000_000;
        while os::monotonic_ns() < end && !seen.iter().all(|&s| s) {
            let n = sock.recv_batch(&mut hdrs, &mut bufs, &mut trunc).unwrap();
            for b in &bufs[..n] {
                for (i, w) in want.iter().enumerate() {
                    // veth pads short frames to 60 bytes.
                    if b.len() >= w.len() && &b[..w.len()] == w.as_slice() {
                        seen[i] = true;
                    }
                }
            }
            if n == 0 {
                thread::sleep(Duration::from_millis(5));
            }
        }
        seen
    });
    ready_rx.recv_timeout(Duration::from_secs(5)).unwrap();
    let cp = ns_path(&t.c());
    let tx = thread::spawn(move || {
        os::netns::enter(&cp).unwrap();
        let sock = os::PacketSocket::open("c0", 1 << 20).unwrap();
        let hdr = [0u8; 10];
        for f in &frames {
            assert_eq!(sock.send_batch(1, |_| (&hdr, f.as_slice())).unwrap(), 1);
        }
    });
    tx.join().unwrap();
    let seen = rx.join().unwrap();
    let s = t.stop_bridge();
    assert_eq!(seen, vec![true; 3], "{s:?}");
    assert_accounting(&s);
}

fn cake_no_split_gso_sends_super_packets_whole_and_still_shapes() {
    let mut t = topo!();
    t.start_bridge(
        "cake bandwidth 50Mbit besteffort no-split-gso",
        "pfifo",
        None,
    );
    let x = Transfer::start(&t, 5004);
    thread::sleep(Duration::from_millis(800));
    let bps = x.measure(Duration::from_millis(1500));
    x.finish();
    let s = t.stop_bridge();
    eprintln!(
        "no-split-gso at 50Mbit: {:.2} Mbit/s; {:?}",
        bps / 1e6,
        s.egress
    );
    // Nothing was split: one packet out per packet in, and some of them were super-packets
    // (more bytes per packet than the 1514-byte MTU frame).
    assert_eq!(s.egress_qdisc.enqueued.packets, s.egress.offered);
    assert!(
        s.egress.tx_bytes / s.egress.tx_packets.max(1) > 1514,
        "{:?}",
        s.egress
    );
    assert!((0.85..=1.0).contains(&(bps / 50e6)), "{bps:.0} bit/s");
    // On the wire the kernel repeats the headers on every segment (66 bytes per 1448 of
    // payload for IPv4 TCP with timestamps): the wire count exceeds the bytes handed over,
    // by less than a tenth.
    let (wire, handed) = (s.egress.tx_wire_bytes as f64, s.egress.tx_bytes as f64);
    assert!(
        wire > handed * 1.01 && wire < handed * 1.1,
        "{:?}",
        s.egress
    );
    // The same frames arrived as they left: received in the same wire units, they are at
    // least what was sent (the rest is still queued), by the same margin over the bytes read.
    let (rx_wire, read) = (s.egress.rx_wire_bytes as f64, s.egress.rx_bytes as f64);
    assert!(
        rx_wire >= wire && rx_wire > read * 1.01 && rx_wire < read * 1.1,
        "{:?}",
        s.egress
    );
    assert_accounting(&s);
}

/// One-way latencies (ns) of UDP datagrams sent c -> s through the bridge every millisecond
/// while `during` runs: the send time travels in the payload (CLOCK_REALTIME), the arrival time
/// is the kernel's receive timestamp, so neither thread's wake-up delay counts. Returns the
/// latencies of the datagrams sent in the `warm` seconds before `during` started ("quiet") and
/// of those sent while it ran.
fn latencies_around(t: &Topo, port: u16, warm: f64, during: impl FnOnce()) -> (Vec<u64>, Vec<u64>) {
    let stop = Arc::new(AtomicBool::new(false));
    let (ready_tx, ready_rx) = mpsc::channel();
    let (sp, st) = (ns_path(&t.s()), stop.clone());
    let rx = thread::spawn(move || {
        os::netns::enter(&sp).unwrap();
        let sock = std::net::UdpSocket::bind(("10.77.0.2", port)).unwrap();
        sock.set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        use std::os::fd::{AsFd, AsRawFd};
        os::enable_rx_timestamps(sock.as_fd()).unwrap();
        ready_tx.send(()).unwrap();
        let mut out = Vec::new();
        let mut buf = [0u8; 64];
        while !st.load(Ordering::Relaxed) {
            if let Ok((16, Some(at))) = os::recv_timestamped(sock.as_raw_fd(), &mut buf) {
                let sent = u64::from_be_bytes(buf[..8].try_into().unwrap());
                let phase = u64::from_be_bytes(buf[8..16].try_into().unwrap());
                out.push((phase, at.saturating_sub(sent)));
            }
        }
        out
    });
    ready_rx.recv_timeout(Duration::from_secs(5)).unwrap();
    let phase = Arc::new(AtomicU64::new(0));
    let (cp, st, ph) = (ns_path(&t.c()), stop.clone(), phase.clone());
    let tx = thread::spawn(move || {
        os::netns::enter(&cp).unwrap();
        let sock = std::net::UdpSocket::bind("10.77.0.1:0").unwrap();
        let mut sent = 0u64;
        while !st.load(Ordering::Relaxed) {
            let mut p = [0u8; 16];
            p[..8].copy_from_slice(&os::realtime_ns().to_be_bytes());
            p[8..].copy_from_slice(&ph.load(Ordering::Relaxed).to_be_bytes());
            if sock.send_to(&p, ("10.77.0.2", port)).is_ok() {
                sent += 1;
            }
            thread::sleep(Duration::from_millis(1));
        }
        sent
    });
    // The first datagrams wait for ARP: they belong to no phase.
    thread::sleep(Duration::from_millis(300));
    phase.store(1, Ordering::Relaxed);
    thread::sleep(Duration::from_secs_f64(warm));
    phase.store(2, Ordering::Relaxed);
    during();
    phase.store(3, Ordering::Relaxed);
    thread::sleep(Duration::from_millis(200));
    stop.store(true, Ordering::Relaxed);
    let sent = tx.join().unwrap();
    let got = rx.join().unwrap();
    assert!(
        got.len() as u64 * 10 >= sent * 9,
        "received {} of {sent}",
        got.len()
    );
    let of = |p| {
        got.iter()
            .filter(|(ph, _)| *ph == p)
            .map(|&(_, l)| l)
            .collect()
    };
    (of(1), of(2))
}

fn pct(v: &[u64], q: f64) -> u64 {
    let mut s = v.to_vec();
    s.sort_unstable();
    s[((s.len() - 1) as f64 * q) as usize]
}

/// Issue 15, item 3: the control socket used to be served inside the forwarding loop with a
/// 50 ms read timeout and up to 512 reads, so a client sending one byte every 40 ms, or 60
/// connections saying nothing, stopped forwarding for seconds. Now the socket has its own
/// thread: with such clients running for 2 s, the 99th percentile of the forwarded datagrams'
/// one-way latency stays within a millisecond of what it is without them (measured: 0.05 ms
/// both ways), and none is held anywhere near a silent client's 50 ms.
fn trickling_and_silent_control_clients_do_not_delay_forwarding() {
    let mut t = topo!();
    let ctl = std::env::temp_dir().join(format!("{}.sock", t.prefix));
    t.start_bridge("pfifo", "pfifo", Some(ctl.clone()));
    let answered = Arc::new(AtomicU64::new(0));
    let (quiet, attacked) = latencies_around(&t, 5010, 1.0, || {
        let end = os::monotonic_ns() + 2_000_000_000;
        // 60 connections that say nothing, held open.
        let silent: Vec<_> = (0..60)
            .map(|_| std::os::unix::net::UnixStream::connect(&ctl).unwrap())
            .collect();
        // One that trickles its commands a byte every 40 ms, again and again.
        let (c, n) = (ctl.clone(), answered.clone());
        let trickle = thread::spawn(move || {
            while os::monotonic_ns() < end {
                let Ok(mut s) = std::os::unix::net::UnixStream::connect(&c) else {
                    continue;
                };
                for b in b"stats\n" {
                    let _ = s.write_all(&[*b]);
                    thread::sleep(Duration::from_millis(40));
                }
                let mut answer = String::new();
                if s.read_to_string(&mut answer).is_ok() && answer.starts_with("qdisc pfifo") {
                    n.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
        trickle.join().unwrap();
        drop(silent);
    });
    let s = t.stop_bridge();
    let ms = |ns: u64| ns as f64 / 1e6;
    eprintln!(
        "one-way latency, quiet: p50 {:.3} p99 {:.3} max {:.3} ms ({} datagrams); with the bad \
         clients: p50 {:.3} p99 {:.3} max {:.3} ms ({}); trickled commands answered: {}",
        ms(pct(&quiet, 0.5)),
        ms(pct(&quiet, 0.99)),
        ms(pct(&quiet, 1.0)),
        quiet.len(),
        ms(pct(&attacked, 0.5)),
        ms(pct(&attacked, 0.99)),
        ms(pct(&attacked, 1.0)),
        attacked.len(),
        answered.load(Ordering::Relaxed)
    );
    assert!(quiet.len() > 100 && attacked.len() > 200);
    assert!(
        answered.load(Ordering::Relaxed) >= 2,
        "the trickling client got no answer"
    );
    assert!(
        pct(&attacked, 0.99) <= pct(&quiet, 0.99) + 1_000_000,
        "p99 {} ns with the bad clients, {} ns without",
        pct(&attacked, 0.99),
        pct(&quiet, 0.99)
    );
    // The old loop held forwarding 50 ms per silent client, 3 s for the 60. The bound on the
    // largest delay is loose because single spikes of up to 20 ms also occur without the
    // clients on a loaded shared machine (other processes); the p99 above is the real test.
    assert!(
        pct(&attacked, 1.0) < 50_000_000,
        "max {} ns with the bad clients, {} ns without",
        pct(&attacked, 1.0),
        pct(&quiet, 1.0)
    );
    assert_accounting(&s);
}

/// `--passive`: the bridge times the TCP timestamps of the frames on its WAN side. An upload
/// through CAKE at 20 Mbit/s keeps a queue in the bridge's own egress CAKE: the WAN side's
/// round trip (timed after that queue) shows none of it, the LAN side's (a server ACK's TSval
/// arriving, echoed by a data segment that waited in CAKE) shows it.
fn passive_estimate_times_the_wan_side_without_the_bridges_own_queue() {
    let mut t = topo!();
    let ctl = std::env::temp_dir().join(format!("{}.sock", t.prefix));
    t.start_bridge_with(
        "cake bandwidth 20Mbit besteffort",
        "pfifo",
        Some(ctl.clone()),
        |br| {
            br.set_passive(Some(controller::passive::PassiveParams::default()))
                .expect("passive");
        },
    );
    let x = Transfer::start(&t, 5007);
    thread::sleep(Duration::from_millis(1500));
    let first = dataplane::ctl::request(&ctl, &"passive".parse().unwrap()).expect("passive");
    thread::sleep(Duration::from_millis(1000));
    let second = dataplane::ctl::request(&ctl, &"passive".parse().unwrap()).expect("passive");
    x.finish();
    t.stop_bridge();
    eprintln!("passive readings:\n{first}{second}");
    let w: controller::passive::ReadingWire = serde_json::from_str(&second).expect("a reading");
    assert!(w.tracked >= 1, "{w:?}");
    let wan = w.wan_rtt_ms.expect("WAN round trips timed");
    let lan = w.lan_rtt_ms.expect("LAN round trips timed");
    assert!(
        wan < 2.0,
        "the bridge's own queue leaked into the WAN side: {w:?}"
    );
    assert!(
        lan > wan + 1.0,
        "CAKE's queue not seen on the LAN side: {w:?}"
    );
}

fn a_bridge_without_passive_says_so() {
    let mut t = topo!();
    let ctl = std::env::temp_dir().join(format!("{}.sock", t.prefix));
    t.start_bridge("pfifo", "pfifo", Some(ctl.clone()));
    let e = dataplane::ctl::request(&ctl, &"passive".parse().unwrap()).unwrap_err();
    assert!(e.to_string().contains("--passive"), "{e}");
    t.stop_bridge();
}

/// cake_mq on two queues (`MqBridge`, `purple bridge --queues 2`) with real TCP: 16 flows
/// through "cake_mq bandwidth 200Mbit", spread over the two forwarding threads by
/// `PACKET_FANOUT`'s flow hash. Each shard counts both active and shapes at half the rate; the
/// aggregate wire rate holds the setting within 3% (the sim-time tests in crates/cake/tests/mq.rs
/// hold 1%; here real TCP on a shared 2-core host leaves a shard's share unused at moments, which
/// cake_mq does not give to the other); each queue carries half of it within 10 points;
/// `set-bandwidth` reaches every shard; every packet is accounted for in every queue.
fn cake_mq_on_two_queues_holds_the_aggregate_and_splits_it_across_active_shards() {
    use dataplane::linkem_lab::{Lab, Shape};
    use dataplane::MqBridge;

    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let lab = Lab::new(Shape::Bridged).expect("the test namespaces (prerequisites were checked)");
    let ctl = std::env::temp_dir().join(format!("{}.sock", lab.prefix));
    let cfg = BridgeConfig {
        if_a: "b0".into(),
        if_b: "b1".into(),
        egress: "cake_mq bandwidth 200Mbit besteffort".into(),
        ingress: "pfifo".into(),
        name: lab.prefix.clone(),
        ctl_path: Some(ctl.clone()),
        ctl_group: None,
        seed: 3,
    };
    /// Stops the bridge if the test fails before it does.
    struct StopOnDrop(Stopper);
    impl Drop for StopOnDrop {
        fn drop(&mut self) {
            self.0.stop();
        }
    }
    let (tx, rx) = mpsc::channel();
    let h = lab.spawn('b', move || {
        let mut br = MqBridge::new(cfg, 2).expect("multi-queue bridge");
        tx.send(br.stopper()).unwrap();
        br.run().expect("run");
        (br.stats(), br.queue_stats(), br.stats_text())
    });
    let stop = StopOnDrop(
        rx.recv_timeout(Duration::from_secs(5))
            .expect("bridge started"),
    );
    // Each sample: the egress's wire bytes per queue, its JSON, and when it was read.
    let mut samples: Vec<(Vec<u64>, serde_json::Value, u64)> = Vec::new();
    let mut sample = || {
        let answer = dataplane::ctl::request(&ctl, &"stats --json".parse().unwrap()).ok()?;
        let at = os::monotonic_ns();
        let v: serde_json::Value = serde_json::from_str(&answer).ok()?;
        let per_queue: Vec<u64> = v[0]["queues"]
            .as_array()?
            .iter()
            .filter_map(|q| q["purple"]["tx_wire_bytes"].as_u64())
            .collect();
        let total = v[0]["purple"]["tx_wire_bytes"].as_u64()?;
        samples.push((per_queue, v, at));
        Some((total, at))
    };
    let (goodput, wire) = lab
        .tcp_goodput_sampled(
            5007,
            16,
            Duration::from_millis(800),
            Duration::from_millis(2000),
            &mut sample,
        )
        .expect("16 TCP flows through the bridge");
    let answer = dataplane::ctl::request(&ctl, &"set-bandwidth egress 100Mbit".parse().unwrap())
        .expect("ctl");
    let after = dataplane::ctl::request(&ctl, &"stats --json".parse().unwrap()).expect("stats");
    stop.0.stop();
    let (sum, queues, text) = h.join().expect("bridge thread").expect("setns");
    let wire = wire.expect("both stats samples");
    eprintln!(
        "cake_mq 200Mbit on 2 queues, 16 TCP flows: goodput {:.1} Mbit/s, wire {:.2} Mbit/s\n{text}",
        goodput / 1e6,
        wire / 1e6
    );
    assert_eq!(samples.len(), 2);
    let ((q0, v0, t0), (q1, v1, t1)) = (&samples[0], &samples[1]);
    let secs = (t1 - t0) as f64 / 1e9;
    let per_queue: Vec<f64> = q0
        .iter()
        .zip(q1)
        .map(|(a, b)| (b - a) as f64 * 8.0 / secs)
        .collect();
    eprintln!(
        "wire per queue (Mbit/s): {:?}",
        per_queue.iter().map(|w| w / 1e6).collect::<Vec<_>>()
    );
    // The summed root and two children, each shard shaping at its share.
    for v in [v0, v1] {
        assert_eq!(v[0]["kind"], "cake_mq", "{v}");
        assert_eq!(v[0]["options"]["bandwidth"], 25_000_000, "{v}");
        let qs = v[0]["queues"].as_array().expect("queues");
        assert_eq!(qs.len(), 2, "{v}");
        for q in qs {
            assert_eq!(q["active_queues"], 2, "{v}");
            assert_eq!(q["share"], 12_500_000, "{v}");
        }
    }
    let err = wire / 200e6 - 1.0;
    assert!(
        err.abs() < 0.03,
        "aggregate wire rate {wire:.0} bit/s: {:+.2}%",
        err * 100.0
    );
    for (i, w) in per_queue.iter().enumerate() {
        let part = w / wire;
        assert!(
            (0.4..=0.6).contains(&part),
            "queue {i}: {part:.3} of the wire bytes"
        );
    }
    assert_eq!(answer, "egress bandwidth 100Mbit\n");
    let v: serde_json::Value = serde_json::from_str(&after).expect("stats json");
    assert_eq!(v[0]["options"]["bandwidth"], 12_500_000, "{v}");
    assert!(
        v[0]["queues"]
            .as_array()
            .expect("queues")
            .iter()
            .all(|q| q["share"] == 6_250_000 || q["share"] == 12_500_000),
        "{v}"
    );
    assert!(
        text.contains("qdisc cake_mq 8001: dev b1 root refcnt 3 bandwidth 100Mbit"),
        "{text}"
    );
    assert!(
        text.contains("qdisc cake 0: dev b1 parent 8001:2 bandwidth 100Mbit"),
        "{text}"
    );
    assert!(!ctl.exists(), "control socket left behind");
    assert_eq!(queues.len(), 2);
    for q in &queues {
        assert!(q.egress.tx_packets > 0, "a queue sent nothing: {q:?}");
        assert_accounting(q);
    }
    assert_accounting(&sum);
}

testkit::harness! {
    [Netns] => {
        passive_estimate_times_the_wan_side_without_the_bridges_own_queue,
        a_bridge_without_passive_says_so,
        ping_and_unshaped_tcp_pass_through_the_bridge_with_offloads_on,
        cake_at_20mbit_shapes_tcp_and_set_bandwidth_changes_it_live,
        rejoined_super_packets_carry_tcp_at_the_shaped_rate,
        malformed_and_non_ip_frames_are_forwarded_unchanged,
        cake_no_split_gso_sends_super_packets_whole_and_still_shapes,
        trickling_and_silent_control_clients_do_not_delay_forwarding,
        cake_mq_on_two_queues_holds_the_aggregate_and_splits_it_across_active_shards,
    },
}
