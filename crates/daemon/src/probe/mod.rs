//! The probe sockets: ICMP (raw for timestamps and echo, or an unprivileged datagram "ping"
//! socket for echo only) and UDP (v4 and v6, for `purple reflector`s), non-blocking, bound to
//! the controlled device (`SO_BINDTODEVICE`) and/or marked (`SO_MARK`) when configured, so probes
//! leave through the link being controlled. What to send, when, and what a reply means is the
//! agent's (`controller::agent`): this module only moves its bytes.
//!
//! [`echo`] is a blocking ICMP echo client for the lab and the tests; [`udp`] is the
//! `purple reflector` server.

pub mod echo;
pub mod udp;

use crate::config::{Method, ProbeConfig, ReflectorSpec};
use controller::agent::{SocketKind, Transmit};
use os::recv::RecvBatch;
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsFd, BorrowedFd};

/// Which of the probe sockets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Which {
    /// ICMP.
    Icmp,
    /// UDP over IPv4.
    Udp4,
    /// UDP over IPv6.
    Udp6,
}

impl Which {
    /// The agent's socket kind.
    pub fn kind(self) -> SocketKind {
        match self {
            Which::Icmp => SocketKind::Icmp,
            Which::Udp4 | Which::Udp6 => SocketKind::Udp,
        }
    }
}

/// The probe sockets the configured reflectors need.
#[derive(Debug)]
pub struct Sockets {
    icmp: Option<Socket>,
    icmp_raw: bool,
    udp4: Option<UdpSocket>,
    udp6: Option<UdpSocket>,
}

fn prepare(s: &Socket, cfg: &ProbeConfig) -> io::Result<()> {
    s.set_nonblocking(true)?;
    os::enable_rx_timestamps(s.as_fd())?;
    if !cfg.bind_interface.is_empty() {
        s.bind_device(Some(cfg.bind_interface.as_bytes()))?;
    }
    if cfg.fwmark != 0 {
        s.set_mark(cfg.fwmark)?;
    }
    Ok(())
}

/// Opens an ICMP socket: raw (needs CAP_NET_RAW; echo and timestamps) or, failing that, an
/// unprivileged datagram "ping" socket (echo only). Returns the socket and whether it is raw.
fn open_icmp(cfg: &ProbeConfig) -> io::Result<(Socket, bool)> {
    let (s, raw) = match Socket::new(Domain::IPV4, Type::RAW, Some(Protocol::ICMPV4)) {
        Ok(s) => (s, true),
        Err(_) => (
            Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::ICMPV4))?,
            false,
        ),
    };
    prepare(&s, cfg)?;
    Ok((s, raw))
}

fn open_udp(v6: bool, cfg: &ProbeConfig) -> io::Result<UdpSocket> {
    let (d, any): (Domain, SocketAddr) = if v6 {
        (Domain::IPV6, SocketAddr::from(([0u16; 8], 0)))
    } else {
        (Domain::IPV4, SocketAddr::from(([0u8; 4], 0)))
    };
    let s = Socket::new(d, Type::DGRAM, Some(Protocol::UDP))?;
    prepare(&s, cfg)?;
    s.bind(&SockAddr::from(any))?;
    Ok(s.into())
}

impl Sockets {
    /// Opens the sockets that `reflectors` need, configured per `cfg`. Fails if a needed socket
    /// cannot be opened (without CAP_NET_RAW only echo works: the agent then probes timestamp
    /// reflectors with echo).
    pub fn open(cfg: &ProbeConfig, reflectors: &[ReflectorSpec]) -> io::Result<Self> {
        let needs_icmp = reflectors.iter().any(|r| r.method != Method::Udp);
        let (icmp, icmp_raw) = if needs_icmp {
            let (s, raw) = open_icmp(cfg)?;
            (Some(s), raw)
        } else {
            (None, false)
        };
        let udp = |v6: bool| -> io::Result<Option<UdpSocket>> {
            let needed = reflectors
                .iter()
                .any(|r| r.method == Method::Udp && r.addr.is_ipv6() == v6);
            needed.then(|| open_udp(v6, cfg)).transpose()
        };
        Ok(Sockets {
            icmp,
            icmp_raw,
            udp4: udp(false)?,
            udp6: udp(true)?,
        })
    }

    /// Whether ICMP goes through a raw socket (timestamps available).
    pub fn icmp_raw(&self) -> bool {
        self.icmp_raw
    }

    /// The sockets to wait on for readability.
    pub fn fds(&self) -> impl Iterator<Item = (Which, BorrowedFd<'_>)> {
        self.icmp
            .as_ref()
            .map(|s| (Which::Icmp, s.as_fd()))
            .into_iter()
            .chain(self.udp4.as_ref().map(|s| (Which::Udp4, s.as_fd())))
            .chain(self.udp6.as_ref().map(|s| (Which::Udp6, s.as_fd())))
    }

    /// Sends the agent's probe `t` (one `sendto`).
    pub fn send(&self, t: &Transmit) -> io::Result<()> {
        let none = || io::Error::new(io::ErrorKind::NotConnected, "no socket for this probe");
        match t.socket {
            SocketKind::Icmp => {
                let s = self.icmp.as_ref().ok_or_else(none)?;
                s.send_to(t.bytes(), &SockAddr::from(t.to)).map(|_| ())
            }
            SocketKind::Udp => {
                let s = if t.to.is_ipv4() {
                    &self.udp4
                } else {
                    &self.udp6
                };
                let s = s.as_ref().ok_or_else(none)?;
                s.send_to(t.bytes(), t.to).map(|_| ())
            }
        }
    }

    /// Reads the datagrams waiting on socket `w` into `batch` (one `recvmmsg`, at most
    /// [`os::recv::BATCH`], each with its kernel arrival time); returns how many. 0 when none waits
    /// or the socket is not open; an error is the socket's (an ICMP error queued on a UDP
    /// socket: port unreachable).
    pub fn recv_batch(&self, w: Which, batch: &mut RecvBatch) -> io::Result<usize> {
        let fd = match w {
            Which::Icmp => self.icmp.as_ref().map(|s| s.as_fd()),
            Which::Udp4 => self.udp4.as_ref().map(|s| s.as_fd()),
            Which::Udp6 => self.udp6.as_ref().map(|s| s.as_fd()),
        };
        match fd {
            Some(fd) => batch.recv(fd),
            None => Ok(0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn udp_socket_sends_the_agents_bytes_and_reads_the_reply_with_its_source() {
        let server = UdpSocket::bind("127.0.0.1:0").unwrap();
        let addr = server.local_addr().unwrap();
        let spec = ReflectorSpec {
            method: Method::Udp,
            addr,
        };
        let s = Sockets::open(&ProbeConfig::default(), &[spec]).unwrap();
        assert!(s.fds().all(|(w, _)| w == Which::Udp4));
        let mut buf = [0u8; 64];
        let mut batch = RecvBatch::new();
        assert_eq!(
            s.recv_batch(Which::Udp4, &mut batch).unwrap(),
            0,
            "nothing yet"
        );
        let req = controller::wire::udp::request(0, 1);
        let cfg = controller::agent::AgentConfig::new(
            controller::Config::default(),
            vec![spec],
            controller::wire::WallAnchor {
                at: qdisc::Instant::ZERO,
                wall_us: 1,
            },
        );
        let mut a =
            controller::agent::Agent::new(cfg, controller::Aimd::default(), qdisc::Instant::ZERO)
                .unwrap();
        a.handle_timeout(qdisc::Instant::ZERO);
        let t = a.poll_transmit().unwrap();
        assert_eq!(t.bytes(), req.as_slice());
        s.send(&t).unwrap();
        let (n, from) = server.recv_from(&mut buf).unwrap();
        assert_eq!(&buf[..n], req.as_slice());
        server.send_to(b"pong", from).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert_eq!(s.recv_batch(Which::Udp4, &mut batch).unwrap(), 1);
        let (r, bytes) = batch.get(0);
        assert_eq!((bytes, r.from), (&b"pong"[..], addr));
        assert!(
            r.rx_realtime_ns.is_some(),
            "probe sockets carry arrival times"
        );
    }
}
