//! Achieved throughput from interface byte counters
//! (`/sys/class/net/IF/statistics/{rx,tx}_bytes`).

use crate::config::Counter;
use qdisc::Instant;
use std::io;

/// Reads one counter and turns successive readings into bytes per second.
#[derive(Debug)]
pub struct RateMeter {
    path: String,
    file: Option<std::fs::File>,
    last: Option<(Instant, u64)>,
}

impl RateMeter {
    /// A meter for `counter` of device `dev`.
    pub fn new(dev: &str, counter: Counter) -> Self {
        let name = match counter {
            Counter::Tx => "tx_bytes",
            Counter::Rx => "rx_bytes",
        };
        RateMeter {
            path: format!("/sys/class/net/{dev}/statistics/{name}"),
            file: None,
            last: None,
        }
    }

    /// Reads the counter at `now`; returns the rate since the previous reading (none on the
    /// first reading, or when the counter went backwards: a device reset or re-creation).
    pub fn sample(&mut self, now: Instant) -> io::Result<Option<u64>> {
        // The file stays open and is re-read from offset 0 (sysfs regenerates it per read);
        // it is reopened after an error (the device may have been re-created).
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
        let v: u64 = std::str::from_utf8(&buf[..n])
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "bad counter"))?;
        Ok(self.update(now, v))
    }

    /// Feeds a reading `bytes` made at `now` (what [`RateMeter::sample`] does after reading).
    pub fn update(&mut self, now: Instant, bytes: u64) -> Option<u64> {
        let prev = self.last.replace((now, bytes));
        let (t0, b0) = prev?;
        let dt = now.saturating_duration_since(t0).as_nanos();
        if dt == 0 || bytes < b0 {
            return None;
        }
        Some(((bytes - b0) as u128 * 1_000_000_000 / dt as u128) as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_is_bytes_over_elapsed_time_and_resets_are_skipped() {
        let mut m = RateMeter::new("lo", Counter::Tx);
        assert_eq!(m.update(Instant::from_millis(0), 1000), None);
        assert_eq!(
            m.update(Instant::from_millis(200), 201_000),
            Some(1_000_000)
        );
        assert_eq!(m.update(Instant::from_millis(400), 5), None);
        assert_eq!(m.update(Instant::from_millis(600), 100_005), Some(500_000));
    }

    #[test]
    fn loopback_counter_is_readable() {
        let mut m = RateMeter::new("lo", Counter::Rx);
        assert!(m.sample(Instant::from_millis(1)).unwrap().is_none());
        assert!(m.sample(Instant::from_millis(2)).unwrap().is_some());
    }
}
