//! A blocking ICMP echo client (what `ping` does), for the lab's ICMP latency probe and for tests
//! that check a path carries ICMP: no system `ping` is needed. One socket per client: raw where
//! the process may open one, else an unprivileged datagram ICMP socket (Linux's "ping" socket,
//! allowed by `net.ipv4.ping_group_range`).

use controller::wire::icmp::{self, ECHO_REPLY, ECHO_REQUEST};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::io::{self, Read};
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

/// Sends echo requests to one host and waits for their replies.
#[derive(Debug)]
pub struct EchoClient {
    sock: Socket,
    raw: bool,
    id: u16,
    seq: u16,
}

impl EchoClient {
    /// A client for `dst` whose requests carry IP TOS byte `tos` (DSCP << 2). Fails when neither
    /// a raw nor a datagram ICMP socket may be opened.
    pub fn new(dst: Ipv4Addr, tos: u8) -> io::Result<Self> {
        let (sock, raw) = match Socket::new(Domain::IPV4, Type::RAW, Some(Protocol::ICMPV4)) {
            Ok(s) => (s, true),
            Err(_) => (
                Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::ICMPV4))?,
                false,
            ),
        };
        if tos != 0 {
            sock.set_tos(u32::from(tos))?;
        }
        // Connected: the kernel passes up only what comes from `dst`.
        sock.connect(&SockAddr::from(SocketAddr::from((dst, 0))))?;
        Ok(EchoClient {
            sock,
            raw,
            id: (std::process::id() as u16) ^ 0x5ec0,
            seq: 0,
        })
    }

    /// Sends the next echo request; returns its sequence number.
    pub fn send(&mut self) -> io::Result<u16> {
        self.seq = self.seq.wrapping_add(1);
        let req = icmp::request(ECHO_REQUEST, self.id, self.seq, 0);
        self.sock.send(&req)?;
        Ok(self.seq)
    }

    /// Waits up to `timeout` for an echo reply to one of this client's requests and returns its
    /// sequence number, or `None` when nothing came in time. Other ICMP messages and malformed
    /// ones are skipped. The caller matches the sequence number with its send time.
    // An I/O shell: it reads the monotonic clock to bound the wait.
    #[allow(clippy::disallowed_methods)]
    pub fn recv(&mut self, timeout: Duration) -> io::Result<Option<u16>> {
        let start = std::time::Instant::now();
        let mut buf = [0u8; 1500];
        loop {
            let left = timeout.saturating_sub(start.elapsed());
            if left.is_zero() {
                return Ok(None);
            }
            self.sock.set_read_timeout(Some(left))?;
            let n = match (&self.sock).read(&mut buf) {
                Ok(n) => n,
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock
                            | io::ErrorKind::TimedOut
                            | io::ErrorKind::Interrupted
                    ) =>
                {
                    continue
                }
                Err(e) => return Err(e),
            };
            let Some(r) = icmp::parse_reply(&buf[..n]) else {
                continue;
            };
            // Datagram ICMP sockets rewrite the identifier (and pass up only their own
            // replies); raw ones see every echo reply from `dst`.
            if r.kind == ECHO_REPLY && (!self.raw || r.id == self.id) {
                return Ok(Some(r.seq));
            }
        }
    }

    /// Sends one echo request and waits up to `timeout` for its reply: `Ok(Some(rtt))`, or
    /// `Ok(None)` when it did not come in time (replies to earlier requests are skipped).
    // An I/O shell: it reads the monotonic clock to time the round trip.
    #[allow(clippy::disallowed_methods)]
    pub fn ping(&mut self, timeout: Duration) -> io::Result<Option<Duration>> {
        let start = std::time::Instant::now();
        let seq = self.send()?;
        loop {
            let left = timeout.saturating_sub(start.elapsed());
            match self.recv(left)? {
                Some(s) if s == seq => return Ok(Some(start.elapsed())),
                Some(_) => continue,
                None => return Ok(None),
            }
        }
    }
}

/// Whether `dst` answers an ICMP echo within `timeout` in any of `tries` attempts (from this
/// thread's network namespace).
pub fn reachable(dst: Ipv4Addr, tries: u32, timeout: Duration) -> io::Result<bool> {
    let mut c = EchoClient::new(dst, 0)?;
    for _ in 0..tries {
        if c.ping(timeout)?.is_some() {
            return Ok(true);
        }
    }
    Ok(false)
}
