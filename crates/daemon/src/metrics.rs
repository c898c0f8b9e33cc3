//! Prometheus metrics: a text exposition rendered from the daemon's state, served by a tiny
//! non-blocking HTTP responder on 127.0.0.1 (every request gets the metrics).

use std::fmt::Write as _;
use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};

/// The values exported.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Snapshot {
    /// Shaper rate per direction (down, up), bytes/s.
    pub rate: [u64; 2],
    /// Achieved throughput per direction, bytes/s.
    pub throughput: [u64; 2],
    /// CAKE's backlog per direction (down, up), bytes, as last read; `None` when not read.
    pub cake_backlog: [Option<u64>; 2],
    /// Rate changes applied.
    pub changes: u64,
    /// Actuator errors.
    pub actuator_errors: u64,
    /// Per reflector: address, sent, answered, lost, active.
    pub reflectors: Vec<(String, u64, u64, u64, bool)>,
}

/// Renders `s` in the Prometheus text format.
pub fn render(s: &Snapshot) -> String {
    let mut o = String::with_capacity(1024);
    let _ = writeln!(
        o,
        "# HELP purple_rate_bytes Shaper rate in bytes per second."
    );
    let _ = writeln!(o, "# TYPE purple_rate_bytes gauge");
    for (i, d) in ["down", "up"].iter().enumerate() {
        let _ = writeln!(o, "purple_rate_bytes{{direction=\"{d}\"}} {}", s.rate[i]);
    }
    let _ = writeln!(
        o,
        "# HELP purple_throughput_bytes Achieved throughput in bytes per second."
    );
    let _ = writeln!(o, "# TYPE purple_throughput_bytes gauge");
    for (i, d) in ["down", "up"].iter().enumerate() {
        let _ = writeln!(
            o,
            "purple_throughput_bytes{{direction=\"{d}\"}} {}",
            s.throughput[i]
        );
    }
    if s.cake_backlog.iter().any(Option::is_some) {
        let _ = writeln!(
            o,
            "# HELP purple_cake_backlog_bytes Bytes queued in CAKE at the last statistics read."
        );
        let _ = writeln!(o, "# TYPE purple_cake_backlog_bytes gauge");
        for (i, d) in ["down", "up"].iter().enumerate() {
            if let Some(b) = s.cake_backlog[i] {
                let _ = writeln!(o, "purple_cake_backlog_bytes{{direction=\"{d}\"}} {b}");
            }
        }
    }
    let _ = writeln!(o, "# TYPE purple_rate_changes_total counter");
    let _ = writeln!(o, "purple_rate_changes_total {}", s.changes);
    let _ = writeln!(o, "# TYPE purple_actuator_errors_total counter");
    let _ = writeln!(o, "purple_actuator_errors_total {}", s.actuator_errors);
    let _ = writeln!(o, "# TYPE purple_probes_sent_total counter");
    for (a, sent, _, _, _) in &s.reflectors {
        let _ = writeln!(o, "purple_probes_sent_total{{reflector=\"{a}\"}} {sent}");
    }
    let _ = writeln!(o, "# TYPE purple_probes_answered_total counter");
    for (a, _, ans, _, _) in &s.reflectors {
        let _ = writeln!(o, "purple_probes_answered_total{{reflector=\"{a}\"}} {ans}");
    }
    let _ = writeln!(o, "# TYPE purple_probes_lost_total counter");
    for (a, _, _, lost, _) in &s.reflectors {
        let _ = writeln!(o, "purple_probes_lost_total{{reflector=\"{a}\"}} {lost}");
    }
    let _ = writeln!(o, "# TYPE purple_reflector_active gauge");
    for (a, _, _, _, act) in &s.reflectors {
        let _ = writeln!(
            o,
            "purple_reflector_active{{reflector=\"{a}\"}} {}",
            u8::from(*act)
        );
    }
    o
}

/// The metrics listener.
#[derive(Debug)]
pub struct Server {
    listener: TcpListener,
}

impl Server {
    /// Listens on 127.0.0.1:`port` (non-blocking; 0 picks a free port).
    pub fn bind(port: u16) -> io::Result<Self> {
        let listener = TcpListener::bind(("127.0.0.1", port))?;
        listener.set_nonblocking(true)?;
        Ok(Server { listener })
    }

    /// The bound address.
    pub fn local_addr(&self) -> io::Result<std::net::SocketAddr> {
        self.listener.local_addr()
    }

    /// The listening socket, to wait on.
    pub fn listener(&self) -> &TcpListener {
        &self.listener
    }

    /// Answers every pending connection with `body` (HTTP/1.0, then closes).
    pub fn serve_pending(&self, body: &str) {
        while let Ok((s, _)) = self.listener.accept() {
            let _ = respond(s, body);
        }
    }
}

fn respond(mut s: TcpStream, body: &str) -> io::Result<()> {
    s.set_nonblocking(false)?;
    s.set_read_timeout(Some(std::time::Duration::from_millis(200)))?;
    s.set_write_timeout(Some(std::time::Duration::from_millis(500)))?;
    let mut req = [0u8; 1024];
    let _ = s.read(&mut req);
    write!(
        s,
        "HTTP/1.0 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cake_backlog_gauge_is_exported_only_for_directions_that_were_read() {
        assert!(!render(&Snapshot::default()).contains("purple_cake_backlog_bytes"));
        let r = render(&Snapshot {
            cake_backlog: [Some(30_000), None],
            ..Snapshot::default()
        });
        assert!(r.contains("purple_cake_backlog_bytes{direction=\"down\"} 30000"));
        assert!(!r.contains("purple_cake_backlog_bytes{direction=\"up\"}"));
    }

    #[test]
    fn metrics_are_served_over_http_in_text_format() {
        let srv = Server::bind(0).unwrap();
        let addr = srv.local_addr().unwrap();
        let snap = Snapshot {
            rate: [2_500_000, 1_000_000],
            reflectors: vec![("1.1.1.1".into(), 10, 9, 1, true)],
            ..Snapshot::default()
        };
        let body = render(&snap);
        let h = std::thread::spawn(move || {
            let mut c = TcpStream::connect(addr).unwrap();
            c.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").unwrap();
            let mut s = String::new();
            c.read_to_string(&mut s).unwrap();
            s
        });
        let mut reply = None;
        for _ in 0..200 {
            std::thread::sleep(std::time::Duration::from_millis(5));
            srv.serve_pending(&body);
            if h.is_finished() {
                reply = Some(h.join().unwrap());
                break;
            }
        }
        let reply = reply.unwrap();
        assert!(reply.starts_with("HTTP/1.0 200 OK"));
        assert!(reply.contains("purple_rate_bytes{direction=\"down\"} 2500000"));
        assert!(reply.contains("purple_probes_lost_total{reflector=\"1.1.1.1\"} 1"));
    }
}
