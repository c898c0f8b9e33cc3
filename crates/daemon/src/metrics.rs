//! Prometheus metrics: a text exposition rendered from the daemon's state, served by a tiny
//! HTTP responder on 127.0.0.1 (every request gets the metrics). The daemon's loop only accepts
//! connections; a thread of the server's own reads each request and writes the answer, so a
//! slow or silent client (any local user can connect) never holds up the control loop.

use std::fmt::Write as _;
use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc::{self, SyncSender};
use std::sync::{Arc, OnceLock};

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
    /// The MQTT publisher's counters, when `[mqtt]` is on.
    pub mqtt: Option<crate::mqtt::MqttStats>,
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
    if let Some(m) = &s.mqtt {
        render_mqtt(&mut o, m);
    }
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

fn render_mqtt(o: &mut String, m: &crate::mqtt::MqttStats) {
    let _ = writeln!(
        o,
        "# HELP purple_mqtt_published_total MQTT messages published (QoS 1: acknowledged)."
    );
    let _ = writeln!(o, "# TYPE purple_mqtt_published_total counter");
    let _ = writeln!(o, "purple_mqtt_published_total {}", m.published);
    let _ = writeln!(
        o,
        "# HELP purple_mqtt_dropped_total MQTT messages dropped, by cause."
    );
    let _ = writeln!(o, "# TYPE purple_mqtt_dropped_total counter");
    for (reason, n) in [
        ("queue-full", m.dropped_queue_full),
        ("disconnected", m.dropped_disconnected),
        ("unacknowledged", m.dropped_unacknowledged),
    ] {
        let _ = writeln!(o, "purple_mqtt_dropped_total{{reason=\"{reason}\"}} {n}");
    }
    let _ = writeln!(o, "# TYPE purple_mqtt_connected gauge");
    let _ = writeln!(o, "purple_mqtt_connected {}", u8::from(m.connected));
    let _ = writeln!(o, "# TYPE purple_mqtt_connections_total counter");
    let _ = writeln!(o, "purple_mqtt_connections_total {}", m.connections);
    let _ = writeln!(o, "# TYPE purple_mqtt_connect_failures_total counter");
    let _ = writeln!(
        o,
        "purple_mqtt_connect_failures_total {}",
        m.connect_failures
    );
}

/// Connections accepted but not yet answered, at most; more are closed unanswered.
const MAX_WAITING: usize = 8;

/// The metrics listener.
#[derive(Debug)]
pub struct Server {
    listener: TcpListener,
    /// Hands accepted connections to the responder thread (started by the first
    /// [`Server::serve_pending`], so that it runs with the privileges the daemon dropped to).
    responder: OnceLock<SyncSender<(TcpStream, Arc<str>)>>,
}

impl Server {
    /// Listens on 127.0.0.1:`port` (non-blocking; 0 picks a free port). Starts no thread.
    pub fn bind(port: u16) -> io::Result<Self> {
        let listener = TcpListener::bind(("127.0.0.1", port))?;
        listener.set_nonblocking(true)?;
        Ok(Server {
            listener,
            responder: OnceLock::new(),
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> io::Result<std::net::SocketAddr> {
        self.listener.local_addr()
    }

    /// The listening socket, to wait on.
    pub fn listener(&self) -> &TcpListener {
        &self.listener
    }

    /// Accepts every pending connection and queues it to be answered with `body` (HTTP/1.0,
    /// then closed) by the responder thread; never blocks. Beyond `MAX_WAITING` (8) unanswered
    /// connections (clients slower than 0.7 s each), new ones are closed unanswered. The first
    /// call starts the thread, which ends once the server is dropped and its queue is done.
    pub fn serve_pending(&self, body: &str) {
        let mut shared: Option<Arc<str>> = None;
        while let Ok((s, _)) = self.listener.accept() {
            let Some(tx) = self.responder() else { return };
            let body = shared.get_or_insert_with(|| Arc::from(body)).clone();
            // A full queue (or a responder gone) closes the connection unanswered.
            let _ = tx.try_send((s, body));
        }
    }

    fn responder(&self) -> Option<&SyncSender<(TcpStream, Arc<str>)>> {
        if let Some(tx) = self.responder.get() {
            return Some(tx);
        }
        let (tx, rx) = mpsc::sync_channel::<(TcpStream, Arc<str>)>(MAX_WAITING);
        std::thread::Builder::new()
            .name("purple-metrics".into())
            .spawn(move || {
                for (s, body) in rx {
                    let _ = respond(s, &body);
                }
            })
            .ok()?;
        let _ = self.responder.set(tx);
        self.responder.get()
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
#[allow(clippy::unwrap_used, clippy::expect_used)]
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
    fn mqtt_counters_are_exported_by_cause_only_when_mqtt_is_on() {
        assert!(!render(&Snapshot::default()).contains("purple_mqtt"));
        let r = render(&Snapshot {
            mqtt: Some(crate::mqtt::MqttStats {
                offered: 10,
                published: 6,
                dropped_queue_full: 1,
                dropped_disconnected: 2,
                dropped_unacknowledged: 1,
                connected: true,
                connections: 3,
                connect_failures: 4,
            }),
            ..Snapshot::default()
        });
        for line in [
            "purple_mqtt_published_total 6",
            "purple_mqtt_dropped_total{reason=\"queue-full\"} 1",
            "purple_mqtt_dropped_total{reason=\"disconnected\"} 2",
            "purple_mqtt_dropped_total{reason=\"unacknowledged\"} 1",
            "purple_mqtt_connected 1",
            "purple_mqtt_connections_total 3",
            "purple_mqtt_connect_failures_total 4",
        ] {
            assert!(r.lines().any(|l| l == line), "{line} missing:\n{r}");
        }
    }

    /// A local user's silent connections used to hold the daemon's loop 200 ms each (the
    /// blocking read happened in `serve_pending`); now they cost it nothing, and a real client
    /// after them is still answered.
    #[test]
    fn silent_clients_do_not_hold_up_serve_pending() {
        let srv = Server::bind(0).unwrap();
        let addr = srv.local_addr().unwrap();
        let silent: Vec<TcpStream> = (0..5).map(|_| TcpStream::connect(addr).unwrap()).collect();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let clock = crate::clock::Clock::new();
        let t0 = clock.now();
        srv.serve_pending("x 1\n");
        let took = clock.now() - t0;
        assert!(took < qdisc::Duration::from_millis(50), "{took:?}");
        let h = std::thread::spawn(move || {
            let mut c = TcpStream::connect(addr).unwrap();
            c.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
            let mut s = String::new();
            c.read_to_string(&mut s).unwrap();
            s
        });
        let mut reply = None;
        for _ in 0..400 {
            std::thread::sleep(std::time::Duration::from_millis(5));
            srv.serve_pending("x 1\n");
            if h.is_finished() {
                reply = Some(h.join().unwrap());
                break;
            }
        }
        drop(silent);
        assert!(reply.expect("answered").ends_with("x 1\n"));
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
