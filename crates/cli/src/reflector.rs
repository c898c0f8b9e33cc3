//! `purple reflector`: the UDP timestamp echo server for reflectors we run ourselves.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Serves on `bind:port` until SIGTERM/SIGINT; at most `max_pps` replies per second.
pub fn run(bind: &str, port: u16, max_pps: u32) -> Result<String, String> {
    let addr: std::net::IpAddr = bind.parse().map_err(|e| format!("--bind {bind}: {e}"))?;
    let sock = std::net::UdpSocket::bind((addr, port)).map_err(|e| format!("bind: {e}"))?;
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, stop.clone()).map_err(|e| e.to_string())?;
    }
    eprintln!(
        "purple reflector: listening on {}",
        sock.local_addr().map_err(|e| e.to_string())?
    );
    let n = daemon::probe::udp::serve(&sock, max_pps, &stop).map_err(|e| e.to_string())?;
    Ok(format!("purple reflector: {n} replies\n"))
}
