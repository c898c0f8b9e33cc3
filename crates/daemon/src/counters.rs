//! Byte counters for achieved throughput (`/sys/class/net/IF/statistics/{rx,tx}_bytes`): the
//! reading only; the agent (`controller::agent::RateMeter`) turns readings into rates.

use crate::config::Counter;
use std::io;

/// One interface byte counter, kept open and re-read from offset 0 (sysfs regenerates it per
/// read); reopened after an error (the device may have been re-created).
#[derive(Debug)]
pub struct CounterFile {
    path: String,
    file: Option<std::fs::File>,
}

impl CounterFile {
    /// The file of `counter` of device `dev`.
    pub fn new(dev: &str, counter: Counter) -> Self {
        let name = match counter {
            Counter::Tx => "tx_bytes",
            Counter::Rx => "rx_bytes",
        };
        CounterFile {
            path: format!("/sys/class/net/{dev}/statistics/{name}"),
            file: None,
        }
    }

    /// Reads the counter now (one `pread`; no allocation).
    pub fn read(&mut self) -> io::Result<u64> {
        use std::os::unix::fs::FileExt;
        if self.file.is_none() {
            self.file = Some(std::fs::File::open(&self.path)?);
        }
        let mut buf = [0u8; 32];
        let n = match self.file.as_ref().map(|f| f.read_at(&mut buf, 0)) {
            Some(Ok(n)) => n,
            Some(Err(e)) => {
                self.file = None;
                return Err(e);
            }
            None => 0,
        };
        std::str::from_utf8(&buf[..n])
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "bad counter"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_counter_is_readable_and_grows() {
        let mut m = CounterFile::new("lo", Counter::Rx);
        let a = m.read().unwrap();
        let _ =
            std::net::UdpSocket::bind("127.0.0.1:0").and_then(|s| s.send_to(b"x", "127.0.0.1:9"));
        assert!(m.read().unwrap() >= a);
        assert!(CounterFile::new("no-such-dev0", Counter::Rx)
            .read()
            .is_err());
    }
}
