//! The system-call floor of `purple bench control`: a loop that makes, per wake-up, the same
//! system calls as the daemon's dry run on an idle link (sleep in `poll` until the next 1/rate
//! deadline, send one ICMP timestamp request to the next reflector, read the replies waiting
//! with one `recvmmsg`, read the two byte counters) and nothing else: no agent, no law, no log.
//! What it costs is what the operating system charges for this schedule of calls on this
//! machine, so the daemon's cost above it is ours and a target below it cannot be met by any
//! program that probes and reads counters at this rate.
//!
//! Run by `purple bench control` in the router namespace beside the daemon (the hidden
//! `purple bench control-floor`); measured the same way (perf events on its process tree).

use crate::config::Counter;
use crate::counters::CounterFile;
use controller::wire::icmp;
use os::recv::RecvBatch;
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::os::fd::AsFd;

/// Runs the loop: `rate_hz` wake-ups a second, each sending one probe to the next of
/// `reflectors` (round robin), reading the replies waiting and reading every counter of
/// `counters` (device, which counter). Returns after `seconds` (`None`: runs until killed) or
/// on an error opening the socket. Needs CAP_NET_RAW (a raw ICMP socket, as the daemon's).
pub fn run(
    rate_hz: f64,
    reflectors: &[Ipv4Addr],
    counters: &[(String, Counter)],
    seconds: Option<f64>,
) -> io::Result<()> {
    if reflectors.is_empty() || !(rate_hz > 0.0 && rate_hz <= 1000.0) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the floor loop needs a reflector and a rate in 0 ..= 1000 Hz",
        ));
    }
    let s = Socket::new(Domain::IPV4, Type::RAW, Some(Protocol::ICMPV4))?;
    s.set_nonblocking(true)?;
    os::enable_rx_timestamps(s.as_fd())?;
    let to: Vec<SockAddr> = reflectors
        .iter()
        .map(|&a| SockAddr::from(SocketAddr::from((a, 0))))
        .collect();
    let mut files: Vec<CounterFile> = counters
        .iter()
        .map(|(dev, c)| CounterFile::new(dev, *c))
        .collect();
    let mut batch = RecvBatch::new();
    let period_ns = (1e9 / rate_hz) as u64;
    let start = os::monotonic_ns();
    let end = seconds.map(|s| start + (s * 1e9) as u64);
    let mut next = start;
    let mut seq: u16 = 0;
    loop {
        let now = os::monotonic_ns();
        if end.is_some_and(|e| now >= e) {
            return Ok(());
        }
        if now < next {
            let ms = (next - now).div_ceil(1_000_000);
            let ms = i32::try_from(ms).unwrap_or(i32::MAX);
            // Interrupted or woken early: the deadline is checked again.
            let _ = rustix::event::poll(&mut [], ms);
            continue;
        }
        next += period_ns;
        let probe = icmp::request(icmp::TIMESTAMP_REQUEST, 0x7f10, seq, 0);
        let _ = s.send_to(&probe, &to[usize::from(seq) % to.len()]);
        seq = seq.wrapping_add(1);
        let _ = batch.recv(s.as_fd());
        for f in &mut files {
            let _ = f.read();
        }
    }
}
