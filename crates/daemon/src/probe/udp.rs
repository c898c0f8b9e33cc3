//! `purple reflector`: the UDP timestamp echo server (I/O side). The protocol's codec lives in
//! [`controller::wire::udp`], the one home shared with the agent that sends the requests.

pub use controller::wire::udp::{
    parse_reply, parse_request, reply, request, Reply, REPLY_LEN, REQUEST_LEN,
};
use std::io;
use std::net::{SocketAddr, UdpSocket};

// The reflector is an I/O program: it timestamps with the real-time clock.
#[allow(clippy::disallowed_methods)]
fn wall_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

/// `purple reflector`: answers requests on `sock` until `stop` is set (checked at least every
/// 200 ms), at most `max_pps` replies per second in total (a token bucket; excess requests are
/// dropped, a polite reflector is not a load generator). Returns the number of replies sent.
#[allow(clippy::disallowed_methods)] // token bucket timing (I/O side)
pub fn serve(
    sock: &UdpSocket,
    max_pps: u32,
    stop: &std::sync::atomic::AtomicBool,
) -> io::Result<u64> {
    sock.set_read_timeout(Some(std::time::Duration::from_millis(200)))?;
    let mut buf = [0u8; 64];
    let mut sent = 0u64;
    let cap = f64::from(max_pps.max(1));
    let mut tokens = cap;
    let mut last = std::time::Instant::now();
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        let (n, from): (usize, SocketAddr) = match sock.recv_from(&mut buf) {
            Ok(x) => x,
            Err(e)
                if e.kind() == io::ErrorKind::WouldBlock
                    || e.kind() == io::ErrorKind::TimedOut
                    || e.kind() == io::ErrorKind::Interrupted =>
            {
                continue
            }
            Err(e) => return Err(e),
        };
        let recv_us = wall_us();
        let now = std::time::Instant::now();
        tokens = (tokens + now.duration_since(last).as_secs_f64() * cap).min(cap);
        last = now;
        let Some(req) = buf.get(..n).filter(|b| parse_request(b).is_some()) else {
            continue;
        };
        if tokens < 1.0 {
            continue;
        }
        tokens -= 1.0;
        let mut r = [0u8; REQUEST_LEN];
        r.copy_from_slice(req);
        // A send error (unreachable peer) must not stop the reflector.
        if sock.send_to(&reply(&r, recv_us, wall_us()), from).is_ok() {
            sent += 1;
        }
    }
    Ok(sent)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    #[test]
    fn reflector_answers_on_loopback_with_timestamps_in_order() {
        let server = UdpSocket::bind("127.0.0.1:0").unwrap();
        let addr = server.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let s2 = stop.clone();
        let h = std::thread::spawn(move || serve(&server, 1000, &s2).unwrap());
        let c = UdpSocket::bind("127.0.0.1:0").unwrap();
        c.set_read_timeout(Some(std::time::Duration::from_secs(2)))
            .unwrap();
        c.send_to(b"garbage", addr).unwrap();
        for seq in 0..3 {
            let t0 = wall_us();
            c.send_to(&request(seq, t0), addr).unwrap();
            let mut b = [0u8; 64];
            let n = c.recv(&mut b).unwrap();
            let t1 = wall_us();
            let r = parse_reply(&b[..n]).unwrap();
            assert_eq!((r.seq, r.sent_us), (seq, t0));
            assert!(t0 <= r.recv_us && r.recv_us <= r.xmit_us && r.xmit_us <= t1);
        }
        stop.store(true, Ordering::Relaxed);
        assert_eq!(h.join().unwrap(), 3, "garbage is not answered");
    }
}
