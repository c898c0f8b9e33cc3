//! The publisher against brokers of our own on 127.0.0.1 that behave well, refuse, stay
//! silent, stop reading or stop answering pings; the real broker is in
//! `crates/daemon/tests/mqtt_broker.rs`.

use super::*;
use std::net::TcpListener;
use std::thread::JoinHandle;

/// A packet a client sent, as the test broker parsed it.
#[derive(Clone, Debug, PartialEq)]
enum Got {
    Connect {
        client_id: String,
        flags: u8,
        keepalive: u16,
        will: Option<(String, Vec<u8>)>,
        user: Option<String>,
        password: Option<Vec<u8>>,
    },
    Publish {
        topic: String,
        payload: Vec<u8>,
        qos: u8,
        retain: bool,
        id: Option<u16>,
    },
    Pingreq,
    Disconnect,
}

/// Reads one client packet (blocking); `None` at EOF or on a read error.
fn read_packet(s: &mut TcpStream) -> Option<Got> {
    let mut b = [0u8; 1];
    s.read_exact(&mut b).ok()?;
    let first = b[0];
    let (mut len, mut shift) = (0usize, 0);
    loop {
        s.read_exact(&mut b).ok()?;
        len |= usize::from(b[0] & 0x7F) << shift;
        shift += 7;
        if b[0] & 0x80 == 0 {
            break;
        }
    }
    let mut body = vec![0u8; len];
    s.read_exact(&mut body).ok()?;
    let mut at = 0;
    let mut bytes = |body: &[u8]| {
        let n = usize::from(u16::from_be_bytes([body[at], body[at + 1]]));
        let v = body[at + 2..at + 2 + n].to_vec();
        at += 2 + n;
        v
    };
    let text = |v: Vec<u8>| String::from_utf8(v).unwrap();
    Some(match first >> 4 {
        1 => {
            assert_eq!(text(bytes(&body)), "MQTT");
            assert_eq!(body[6], 4, "protocol level");
            let flags = body[7];
            let keepalive = u16::from_be_bytes([body[8], body[9]]);
            let mut at2 = 10;
            let mut next = || {
                let n = usize::from(u16::from_be_bytes([body[at2], body[at2 + 1]]));
                let v = body[at2 + 2..at2 + 2 + n].to_vec();
                at2 += 2 + n;
                v
            };
            let client_id = text(next());
            let will = (flags & 0x04 != 0).then(|| (text(next()), next()));
            let user = (flags & 0x80 != 0).then(|| text(next()));
            let password = (flags & 0x40 != 0).then(&mut next);
            Got::Connect {
                client_id,
                flags,
                keepalive,
                will,
                user,
                password,
            }
        }
        3 => {
            let qos = (first >> 1) & 3;
            let topic = text(bytes(&body));
            let id = (qos > 0).then(|| {
                let id = u16::from_be_bytes([body[at], body[at + 1]]);
                at += 2;
                id
            });
            Got::Publish {
                topic,
                payload: body[at..].to_vec(),
                qos,
                retain: first & 1 == 1,
                id,
            }
        }
        12 => Got::Pingreq,
        14 => Got::Disconnect,
        t => panic!("unexpected packet type {t} from the client"),
    })
}

/// How the test broker behaves.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Broker {
    /// CONNACK 0, PUBACK every QoS 1 PUBLISH, PINGRESP every PINGREQ.
    Good,
    /// CONNACK with this refusal code, then close.
    Refuse(u8),
    /// CONNACK 0, then never read again.
    StopReading,
    /// Like `Good`, but never answers PINGREQ.
    NoPingresp,
}

/// A broker on 127.0.0.1 serving `conns` connections one after the other; returns its port
/// and, once the last connection ends, every packet of each.
fn broker(kind: Broker, conns: usize) -> (u16, JoinHandle<Vec<Vec<Got>>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let h = std::thread::spawn(move || {
        let mut all = Vec::new();
        for _ in 0..conns {
            let (mut s, _) = l.accept().unwrap();
            s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
                .unwrap();
            let mut got = Vec::new();
            let Some(c) = read_packet(&mut s) else {
                all.push(got);
                continue;
            };
            assert!(matches!(c, Got::Connect { .. }), "{c:?}");
            got.push(c);
            match kind {
                Broker::Refuse(code) => {
                    s.write_all(&[0x20, 2, 0, code]).unwrap();
                    all.push(got);
                    continue;
                }
                Broker::StopReading => {
                    s.write_all(&[0x20, 2, 0, 0]).unwrap();
                    // Hold the connection without reading: the client's writes fill the socket
                    // buffers and block until it gives up (its io_timeout is shorter).
                    std::thread::sleep(std::time::Duration::from_millis(1_500));
                    all.push(got);
                    continue;
                }
                Broker::Good | Broker::NoPingresp => s.write_all(&[0x20, 2, 0, 0]).unwrap(),
            }
            while let Some(p) = read_packet(&mut s) {
                match &p {
                    Got::Publish { id: Some(id), .. } => {
                        let [a, b] = id.to_be_bytes();
                        let _ = s.write_all(&[0x40, 2, a, b]);
                    }
                    Got::Pingreq if kind == Broker::Good => {
                        let _ = s.write_all(&[0xD0, 0]);
                    }
                    _ => {}
                }
                let end = p == Got::Disconnect;
                got.push(p);
                if end {
                    break;
                }
            }
            all.push(got);
        }
        all
    });
    (port, h)
}

fn params(port: u16, qos: Qos) -> Params {
    Params {
        host: "127.0.0.1".into(),
        port,
        prefix: "test/purple".into(),
        client_id: "purple-test".into(),
        qos,
        username: None,
        password: None,
        keepalive: Duration::from_secs(30),
        queue: 64,
        io_timeout: Duration::from_secs(2),
        backoff_min: Duration::from_millis(100),
        backoff_max: Duration::from_millis(400),
        max_inflight: 8,
    }
}

fn wait_until(what: &str, secs: u64, mut f: impl FnMut() -> bool) {
    let clock = Clock::new();
    while !f() {
        assert!(
            clock.now() < Instant::from_secs(secs),
            "timed out waiting for {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

fn publishes(got: &[Got]) -> Vec<(String, Vec<u8>, bool)> {
    got.iter()
        .filter_map(|g| match g {
            Got::Publish {
                topic,
                payload,
                retain,
                ..
            } => Some((topic.clone(), payload.clone(), *retain)),
            _ => None,
        })
        .collect()
}

fn in_order_delivery(qos: Qos) {
    let (port, h) = broker(Broker::Good, 1);
    let mut p = Publisher::new(params(port, qos), Clock::new(), None);
    p.start().unwrap();
    wait_until("the connection", 5, || p.stats().connected);
    let n = 200;
    for i in 0..n {
        // Paced within the queue's room: none may be dropped here.
        while p.stats().offered - p.stats().published >= 32 {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert!(p.publish(Topic::Decision, format!("{{\"i\":{i}}}").into_bytes()));
    }
    assert!(p.publish(Topic::Summary, b"{}".to_vec()));
    assert!(p.close(Duration::from_secs(2)), "closed in time");
    let st = p.stats();
    assert_eq!((st.published, st.dropped()), (n + 1, 0), "{st:?}");
    assert!(st.accounted());
    let conns = h.join().unwrap();
    assert_eq!(conns.len(), 1);
    let got = &conns[0];
    match &got[0] {
        Got::Connect {
            client_id,
            flags,
            keepalive,
            will,
            user,
            password,
        } => {
            assert_eq!(client_id, "purple-test");
            // Clean session, will flag and retained will, the will at our QoS.
            let qbits = if qos == Qos::AtLeastOnce { 0x08 } else { 0 };
            assert_eq!(*flags, 0x26 | qbits);
            assert_eq!(*keepalive, 30);
            assert_eq!(
                will.as_ref().unwrap(),
                &("test/purple/status".to_string(), b"offline".to_vec())
            );
            assert_eq!((user, password), (&None, &None));
        }
        g => panic!("{g:?}"),
    }
    assert_eq!(got.last(), Some(&Got::Disconnect));
    let pubs = publishes(got);
    assert_eq!(
        pubs[0],
        ("test/purple/status".into(), b"online".to_vec(), true)
    );
    assert_eq!(
        pubs.last().unwrap(),
        &("test/purple/status".into(), b"offline".to_vec(), true)
    );
    let decisions: Vec<String> = pubs
        .iter()
        .filter(|(t, _, retain)| t == "test/purple/decision" && !retain)
        .map(|(_, p, _)| String::from_utf8(p.clone()).unwrap())
        .collect();
    let want: Vec<String> = (0..n).map(|i| format!("{{\"i\":{i}}}")).collect();
    assert_eq!(decisions, want);
    assert!(pubs.contains(&("test/purple/summary".into(), b"{}".to_vec(), true)));
    if qos == Qos::AtLeastOnce {
        let ids: Vec<u16> = got
            .iter()
            .filter_map(|g| match g {
                Got::Publish { id, qos, .. } => {
                    assert_eq!(*qos, 1);
                    *id
                }
                _ => None,
            })
            .collect();
        assert_eq!(ids.len(), pubs.len());
        assert!(ids.iter().all(|&i| i != 0));
    }
}

#[test]
fn qos0_messages_arrive_whole_and_in_order_then_offline_and_disconnect() {
    in_order_delivery(Qos::AtMostOnce);
}

#[test]
fn qos1_messages_are_counted_once_acknowledged() {
    in_order_delivery(Qos::AtLeastOnce);
}

#[test]
fn user_name_and_password_go_in_the_connect() {
    let (port, h) = broker(Broker::Good, 1);
    let mut pa = params(port, Qos::AtMostOnce);
    pa.username = Some("router".into());
    pa.password = Some("s3cret".into());
    let mut p = Publisher::new(pa, Clock::new(), None);
    p.start().unwrap();
    wait_until("the connection", 5, || p.stats().connected);
    assert!(p.close(Duration::from_secs(1)));
    match &h.join().unwrap()[0][0] {
        Got::Connect {
            flags,
            user,
            password,
            ..
        } => {
            assert_eq!(flags & 0xC0, 0xC0);
            assert_eq!(user.as_deref(), Some("router"));
            assert_eq!(password.as_deref(), Some(&b"s3cret"[..]));
        }
        g => panic!("{g:?}"),
    }
}

/// Nothing listens: every message is dropped as `disconnected`, the thread keeps retrying with
/// a growing backoff, and publishing costs the caller nothing.
#[test]
fn an_absent_broker_drops_and_counts_everything() {
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut p = Publisher::new(params(port, Qos::AtMostOnce), Clock::new(), None);
    p.start().unwrap();
    let clock = Clock::new();
    for i in 0..500u32 {
        p.publish(Topic::Decision, i.to_be_bytes().to_vec());
        std::thread::sleep(std::time::Duration::from_micros(500));
    }
    let took = clock.now();
    wait_until("two failed attempts", 5, || p.stats().connect_failures >= 2);
    assert!(p.close(Duration::from_secs(1)));
    let st = p.stats();
    assert_eq!(st.published, 0);
    assert_eq!(st.connections, 0);
    assert_eq!(st.offered, 500);
    assert!(st.accounted(), "{st:?}");
    assert!(st.dropped_disconnected > 0, "{st:?}");
    // 500 sleeps of 0.5 ms: the publishing itself added (almost) nothing.
    assert!(took < Instant::from_millis(2_000), "{took:?}");
}

/// A broker that accepts the TCP connection but never answers the CONNACK holds the thread for
/// `io_timeout`; meanwhile `publish` returns at once and the overflow is counted.
#[test]
fn a_silent_broker_never_blocks_publish() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let mut pa = params(port, Qos::AtMostOnce);
    pa.queue = 16;
    let mut p = Publisher::new(pa, Clock::new(), None);
    p.start().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(100));
    let clock = Clock::new();
    let mut slowest = Duration::ZERO;
    for i in 0..2_000u32 {
        let t = clock.now();
        p.publish(Topic::Decision, i.to_be_bytes().to_vec());
        slowest = slowest.max(clock.now().saturating_duration_since(t));
    }
    let took = clock.now().saturating_duration_since(Instant::ZERO);
    let st = p.stats();
    assert_eq!(st.dropped_queue_full, 2_000 - 16, "{st:?}");
    assert!(!st.connected);
    // The thread waits up to 2 s for the CONNACK; 2,000 calls took a small part of that.
    assert!(took < Duration::from_millis(500), "{took:?}");
    assert!(slowest < Duration::from_millis(100), "{slowest:?}");
    // The close waits at most its bound although the thread is still stuck.
    let t = clock.now();
    let _ = p.close(Duration::from_millis(200));
    assert!(clock.now().saturating_duration_since(t) < Duration::from_millis(1_000));
    drop(l);
}

/// A broker that stops reading: the thread's write blocks, the queue fills, `publish` drops
/// and counts, and after `io_timeout` the connection is given up and retried.
#[test]
fn a_broker_that_stops_reading_is_given_up_and_drops_are_counted() {
    let (port, h) = broker(Broker::StopReading, 2);
    let mut pa = params(port, Qos::AtMostOnce);
    pa.queue = 16;
    pa.io_timeout = Duration::from_millis(500);
    let mut p = Publisher::new(pa, Clock::new(), None);
    p.start().unwrap();
    wait_until("the connection", 5, || p.stats().connected);
    let clock = Clock::new();
    let big = vec![b'x'; 64 * 1024];
    let mut slowest = Duration::ZERO;
    for _ in 0..400 {
        let t = clock.now();
        p.publish(Topic::Decision, big.clone());
        slowest = slowest.max(clock.now().saturating_duration_since(t));
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    assert!(slowest < Duration::from_millis(100), "{slowest:?}");
    wait_until("a second connection", 10, || p.stats().connections >= 2);
    let _ = p.close(Duration::from_millis(500));
    let st = p.stats();
    assert!(st.dropped_queue_full > 0, "{st:?}");
    assert!(st.published < 400, "{st:?}");
    assert!(st.accounted(), "{st:?}");
    drop(p);
    let _ = h.join();
}

#[test]
fn a_refused_connect_is_a_failure_and_is_retried() {
    let (port, h) = broker(Broker::Refuse(5), 2);
    let mut p = Publisher::new(params(port, Qos::AtLeastOnce), Clock::new(), None);
    p.start().unwrap();
    wait_until("two refusals", 5, || p.stats().connect_failures >= 2);
    p.publish(Topic::Decision, b"x".to_vec());
    assert!(p.close(Duration::from_secs(1)));
    let st = p.stats();
    assert_eq!((st.connections, st.published), (0, 0));
    assert!(st.accounted(), "{st:?}");
    assert_eq!(h.join().unwrap().len(), 2);
}

/// Idle, the publisher pings; a broker that stops answering pings is given up after the keep
/// alive and reconnected to.
#[test]
fn keep_alive_pings_and_a_silent_broker_is_reconnected() {
    let (port, h) = broker(Broker::Good, 1);
    let mut pa = params(port, Qos::AtMostOnce);
    pa.keepalive = Duration::from_millis(300);
    let mut p = Publisher::new(pa.clone(), Clock::new(), None);
    p.start().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(800));
    assert_eq!(p.stats().connections, 1, "pings answered: one connection");
    assert!(p.close(Duration::from_secs(1)));
    let got = &h.join().unwrap()[0];
    let pings = got.iter().filter(|g| **g == Got::Pingreq).count();
    assert!(pings >= 2, "{pings} pings in 0.8 s with a 0.3 s keep alive");

    let (port, h) = broker(Broker::NoPingresp, 2);
    pa.port = port;
    let mut p = Publisher::new(pa, Clock::new(), None);
    p.start().unwrap();
    wait_until("a reconnection", 5, || p.stats().connections >= 2);
    let _ = p.close(Duration::from_millis(500));
    drop(p);
    let _ = h.join();
}

/// A successor waits for the session it replaces, so `offline` never lands after `online`.
#[test]
fn a_replacing_session_connects_after_the_old_one_said_offline() {
    let (port, h) = broker(Broker::Good, 2);
    let mut old = Publisher::new(params(port, Qos::AtMostOnce), Clock::new(), None);
    old.start().unwrap();
    wait_until("the connection", 5, || old.stats().connected);
    let mut new = Publisher::new(params(port, Qos::AtMostOnce), Clock::new(), old.hand_over());
    new.start().unwrap();
    wait_until("the new connection", 5, || new.stats().connected);
    assert!(new.close(Duration::from_secs(1)));
    let conns = h.join().unwrap();
    let last = |g: &[Got]| publishes(g).last().cloned().unwrap();
    assert_eq!(last(&conns[0]).1, b"offline");
    assert_eq!(publishes(&conns[1])[0].1, b"online");
}

#[test]
fn publishing_before_start_queues_and_a_publisher_never_started_accounts_all() {
    let mut p = Publisher::new(params(1, Qos::AtMostOnce), Clock::new(), None);
    for _ in 0..70 {
        p.publish(Topic::Event, b"{}".to_vec());
    }
    assert_eq!(p.stats().dropped_queue_full, 6);
    assert!(p.close(Duration::from_millis(10)));
    let st = p.stats();
    assert!(st.accounted(), "{st:?}");
    assert!(!p.publish(Topic::Event, b"{}".to_vec()));
    assert!(p.stats().accounted());
}
