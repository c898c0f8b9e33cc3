//! Rate conversions: the one home for turning Mbit/s into the bytes per second every qdisc and
//! controller takes ([`crate::Qdisc::set_rate`]).

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
    use super::mbit;

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
