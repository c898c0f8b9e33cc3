//! Rates: [`Rate`], the type every shaper is set in ([`crate::Qdisc::set_rate`]) and every
//! controller decides in, and [`mbit`], the one conversion from Mbit/s to the bytes per second
//! that [`Rate::from_mbit`] and the engines' own configurations are built on.

use std::fmt;

/// A rate in bytes per second: what a controller decides, a shaper is set to, a link delivers.
/// Bytes, not bits, because every counter it is compared with counts bytes; `Display` shows
/// Mbit/s (10^6 bit/s), as tc and the tables do.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Rate(u64);

impl Rate {
    /// No rate.
    pub const ZERO: Rate = Rate(0);

    /// `b` bytes per second.
    pub const fn from_bytes_per_s(b: u64) -> Rate {
        Rate(b)
    }

    /// `b` bit/s, rounded down to whole bytes per second.
    pub const fn from_bits_per_s(b: u64) -> Rate {
        Rate(b / 8)
    }

    /// `m` Mbit/s, as [`mbit`]: rounded down; negative, infinite or NaN gives zero.
    pub fn from_mbit(m: f64) -> Rate {
        Rate(mbit(m))
    }

    /// `b` bytes per second as a float rate: rounded down; negative or NaN gives zero,
    /// beyond `u64::MAX` saturates (what laws that compute in floats hand back).
    pub fn from_bytes_per_s_f64(b: f64) -> Rate {
        // `as` saturates and maps NaN to 0.
        Rate(b as u64)
    }

    /// Bytes per second.
    pub const fn bytes_per_s(self) -> u64 {
        self.0
    }

    /// Bytes per second as a float (for laws that compute in floats).
    pub fn bytes_per_s_f64(self) -> f64 {
        self.0 as f64
    }

    /// Bit/s (saturating).
    pub const fn bits_per_s(self) -> u64 {
        self.0.saturating_mul(8)
    }

    /// Mbit/s (10^6 bit/s).
    pub fn mbit(self) -> f64 {
        self.0 as f64 * 8e-6
    }
}

/// `rate * k`: `k` times the rate (saturating).
impl std::ops::Mul<u64> for Rate {
    type Output = Rate;
    fn mul(self, k: u64) -> Rate {
        Rate(self.0.saturating_mul(k))
    }
}

/// `rate / k`: the rate divided by `k`, rounded down (`k` = 0 gives zero).
impl std::ops::Div<u64> for Rate {
    type Output = Rate;
    fn div(self, k: u64) -> Rate {
        Rate(self.0.checked_div(k).unwrap_or(0))
    }
}

/// The sum of two rates (saturating).
impl std::ops::Add for Rate {
    type Output = Rate;
    fn add(self, o: Rate) -> Rate {
        Rate(self.0.saturating_add(o.0))
    }
}

/// The difference of two rates, zero at least.
impl std::ops::Sub for Rate {
    type Output = Rate;
    fn sub(self, o: Rate) -> Rate {
        Rate(self.0.saturating_sub(o.0))
    }
}

impl fmt::Display for Rate {
    /// Mbit/s with two decimals: `12.50 Mbit/s`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.2} Mbit/s", self.mbit())
    }
}

/// Bytes per second of `m` Mbit/s (10^6 bit/s), rounded down; negative, infinite or NaN `m`
/// gives 0. Bits per second are `8 * mbit(m)`.
pub fn mbit(m: f64) -> u64 {
    let b = m * 1e6 / 8.0;
    if b.is_finite() && b > 0.0 {
        b as u64
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::{mbit, Rate};

    #[test]
    fn a_rate_is_bytes_per_second_shown_in_mbit() {
        let r = Rate::from_mbit(20.0);
        assert_eq!(r.bytes_per_s(), 2_500_000);
        assert_eq!(r.bits_per_s(), 20_000_000);
        assert_eq!(Rate::from_bits_per_s(20_000_007), r);
        assert_eq!(Rate::from_bytes_per_s(2_500_000), r);
        assert_eq!(Rate::from_bytes_per_s_f64(2_500_000.9), r);
        assert_eq!(Rate::from_bytes_per_s_f64(f64::NAN), Rate::ZERO);
        assert_eq!(Rate::from_bytes_per_s_f64(-1.0), Rate::ZERO);
        assert!((r.mbit() - 20.0).abs() < 1e-12);
        assert_eq!(r.to_string(), "20.00 Mbit/s");
        assert_eq!(Rate::from_bytes_per_s(u64::MAX).bits_per_s(), u64::MAX);
        assert!(Rate::from_mbit(1.0) < r);
        assert_eq!(r * 2 / 4, Rate::from_mbit(10.0));
        assert_eq!(r / 0, Rate::ZERO);
        assert_eq!(r + r - Rate::from_mbit(30.0), Rate::from_mbit(10.0));
        assert_eq!(r - Rate::from_mbit(30.0), Rate::ZERO);
    }

    #[test]
    fn mbit_is_bytes_per_second_rounded_down_and_zero_for_nonsense() {
        assert_eq!(mbit(20.0), 2_500_000);
        assert_eq!(mbit(0.1), 12_500);
        assert_eq!(8 * mbit(1000.0), 1_000_000_000);
        assert_eq!(mbit(0.000_001), 0);
        assert_eq!(mbit(-1.0), 0);
        assert_eq!(mbit(f64::NAN), 0);
        assert_eq!(mbit(f64::INFINITY), 0);
    }
}
