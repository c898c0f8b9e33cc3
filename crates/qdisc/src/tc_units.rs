//! tc's units: parsing and printing of rates, times and sizes exactly as iproute2's `tc` (6.1)
//! does it (`get_rate64`, `get_time`, `get_size`, `sprint_rate`, `sprint_time`, `sprint_size`).
//!
//! Shared by every qdisc's tc front end. Parsing follows tc: a leading decimal number (as C's
//! `strtod` reads it: optional sign, digits, fraction, exponent) followed by an optional unit
//! suffix matched case-insensitively. Unlike tc, values that C would convert with undefined
//! behaviour (negative, NaN, infinite, or too large for the target integer) are rejected.

use std::fmt;

/// Why a tc value could not be parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UnitError {
    /// No number at the start of the value.
    NoNumber,
    /// The text after the number is not an accepted unit.
    BadUnit(String),
    /// The number is negative, not finite, or does not fit the target type.
    OutOfRange,
    /// A shaper's rate outside [`MIN_SHAPER_RATE`]..=[`MAX_SHAPER_RATE`] (the value given, in
    /// bytes/s).
    RateOutOfRange(u64),
}

impl fmt::Display for UnitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UnitError::NoNumber => write!(f, "no number"),
            UnitError::BadUnit(u) => write!(f, "unknown unit \"{u}\""),
            UnitError::OutOfRange => write!(f, "value out of range"),
            UnitError::RateOutOfRange(r) => write!(
                f,
                "rate {} is outside the accepted range {} to {}",
                format_rate(*r),
                format_rate(MIN_SHAPER_RATE),
                format_rate(MAX_SHAPER_RATE)
            ),
        }
    }
}

impl std::error::Error for UnitError {}

/// The rate units tc accepts (matched case-insensitively) and their scale in bits per second.
pub const RATE_UNITS: [(&str, f64); 18] = [
    ("bit", 1.),
    ("kibit", 1024.),
    ("kbit", 1000.),
    ("mibit", 1024. * 1024.),
    ("mbit", 1_000_000.),
    ("gibit", 1024. * 1024. * 1024.),
    ("gbit", 1_000_000_000.),
    ("tibit", 1024. * 1024. * 1024. * 1024.),
    ("tbit", 1_000_000_000_000.),
    ("bps", 8.),
    ("kibps", 8. * 1024.),
    ("kbps", 8000.),
    ("mibps", 8. * 1024. * 1024.),
    ("mbps", 8_000_000.),
    ("gibps", 8. * 1024. * 1024. * 1024.),
    ("gbps", 8_000_000_000.),
    ("tibps", 8. * 1024. * 1024. * 1024. * 1024.),
    ("tbps", 8_000_000_000_000.),
];

/// Human description of the rate syntax, for error messages.
pub const RATE_FORMAT: &str = "a number of bits/s with an optional unit: bit, kbit, mbit, gbit, \
tbit, kibit, mibit, gibit, tibit, or bytes/s: bps, kbps, mbps, gbps, tbps, kibps, mibps, gibps, \
tibps (case-insensitive), e.g. 20Mbit";
/// Human description of the time syntax, for error messages.
pub const TIME_FORMAT: &str = "a number of microseconds with an optional unit: s, sec, secs, ms, \
msec, msecs, us, usec, usecs (case-insensitive), e.g. 100ms";
/// Human description of the size syntax, for error messages.
pub const SIZE_FORMAT: &str = "a number of bytes with an optional unit: b, k, kb, m, mb, g, gb \
(x1024), kbit, mbit, gbit (case-insensitive), e.g. 32mb";

/// Splits `s` into the longest leading decimal floating-point number (C `strtod` syntax without
/// hex floats, `inf` or `nan`) and the rest.
fn split_number(s: &str) -> Option<(f64, &str)> {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() && (b[i] == b' ' || (b'\t'..=b'\r').contains(&b[i])) {
        i += 1;
    }
    let start = i;
    if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
        i += 1;
    }
    let int_start = i;
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
    }
    let mut digits = i - int_start;
    if i < b.len() && b[i] == b'.' {
        let frac_start = i + 1;
        let mut j = frac_start;
        while j < b.len() && b[j].is_ascii_digit() {
            j += 1;
        }
        digits += j - frac_start;
        if digits > 0 {
            i = j;
        }
    }
    if digits == 0 {
        return None;
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        let mut j = i + 1;
        if j < b.len() && (b[j] == b'+' || b[j] == b'-') {
            j += 1;
        }
        let exp_start = j;
        while j < b.len() && b[j].is_ascii_digit() {
            j += 1;
        }
        if j > exp_start {
            i = j;
        }
    }
    let v: f64 = s[start..i].parse().ok()?;
    Some((v, &s[i..]))
}

/// Converts a non-negative finite `v` to an integer no larger than `max`, truncating like C.
fn to_int(v: f64, max: u64) -> Result<u64, UnitError> {
    if !v.is_finite() || v < 0.0 || v >= max as f64 + 1.0 {
        return Err(UnitError::OutOfRange);
    }
    // In range by the check above; `as` truncates toward zero like C's conversion.
    Ok((v as u64).min(max))
}

/// Parses a rate like tc's `get_rate64`: a bare number is bits/s; the result is bytes/s,
/// truncated (`100bit` = 12 B/s).
pub fn parse_rate(s: &str) -> Result<u64, UnitError> {
    let (mut v, rest) = split_number(s).ok_or(UnitError::NoNumber)?;
    if !rest.is_empty() {
        let (_, scale) = RATE_UNITS
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(rest))
            .ok_or_else(|| UnitError::BadUnit(rest.to_string()))?;
        v *= scale;
    }
    to_int(v / 8.0, u64::MAX)
}

/// The slowest rate a shaper accepts, bytes/s: 64 B/s (512 bit/s), CAKE's own floor (the
/// kernel's `MIN_RATE`: CAKE times slower rates as 64 B/s). A rate below it would not be the rate
/// in force, and one that truncates to 0 B/s (`1bit`) would turn shaping off.
pub const MIN_SHAPER_RATE: u64 = 64;
/// The fastest rate a shaper accepts, bytes/s: 10 Tbit/s, beyond any link a shaper is put in
/// front of (larger values are typing errors, and above 2^61 B/s the bit rate no longer fits in
/// 64 bits).
pub const MAX_SHAPER_RATE: u64 = 1_250_000_000_000;

/// [`MIN_SHAPER_RATE`] to [`MAX_SHAPER_RATE`] as tc prints rates, for error messages.
pub const SHAPER_RATE_RANGE: &str = "a rate from 512bit to 10Tbit";

/// Checks a shaper's rate (bytes/s) against [`MIN_SHAPER_RATE`]..=[`MAX_SHAPER_RATE`].
pub fn check_shaper_rate(bytes_per_sec: u64) -> Result<u64, UnitError> {
    if (MIN_SHAPER_RATE..=MAX_SHAPER_RATE).contains(&bytes_per_sec) {
        Ok(bytes_per_sec)
    } else {
        Err(UnitError::RateOutOfRange(bytes_per_sec))
    }
}

/// Parses a shaper's rate: [`parse_rate`], then [`check_shaper_rate`]. Every rate a shaper is
/// set to from text goes through this (tc's `bandwidth`, `purple ctl set-bandwidth`, the
/// control socket, `purple linkem --up/--down`), so no spelling can turn shaping off or print
/// a rate other than the one in force.
pub fn parse_shaper_rate(s: &str) -> Result<u64, UnitError> {
    check_shaper_rate(parse_rate(s)?)
}

/// True when `s` is a rate whose number is exactly zero (`0`, `0bit`, `0.0mbit`): tc-cake's
/// spelling of "no limit", unlike a non-zero rate that truncates to 0 B/s (`1bit`).
pub fn is_zero_rate(s: &str) -> bool {
    matches!(split_number(s), Some((v, _)) if v == 0.0) && parse_rate(s) == Ok(0)
}

/// Parses a time like tc's `get_time`: a bare number is microseconds; the result is µs,
/// truncated. tc 6.1 has no `ns` unit.
pub fn parse_time(s: &str) -> Result<u32, UnitError> {
    let (mut v, rest) = split_number(s).ok_or(UnitError::NoNumber)?;
    if !rest.is_empty() {
        let r = rest.to_ascii_lowercase();
        v *= match r.as_str() {
            "s" | "sec" | "secs" => 1_000_000.0,
            "ms" | "msec" | "msecs" => 1_000.0,
            "us" | "usec" | "usecs" => 1.0,
            _ => return Err(UnitError::BadUnit(rest.to_string())),
        };
    }
    to_int(v, u64::from(u32::MAX)).map(|t| t as u32)
}

/// Parses a size like tc's `get_size`: a bare number is bytes; `k`/`kb`, `m`/`mb`, `g`/`gb` are
/// powers of 1024; `kbit`, `mbit`, `gbit` are 1024-based bits. The result is bytes, truncated.
pub fn parse_size(s: &str) -> Result<u32, UnitError> {
    let (mut v, rest) = split_number(s).ok_or(UnitError::NoNumber)?;
    if !rest.is_empty() {
        let r = rest.to_ascii_lowercase();
        v *= match r.as_str() {
            "b" => 1.0,
            "k" | "kb" => 1024.0,
            "m" | "mb" => 1024.0 * 1024.0,
            "g" | "gb" => 1024.0 * 1024.0 * 1024.0,
            "kbit" => 1024.0 / 8.0,
            "mbit" => 1024.0 * 1024.0 / 8.0,
            "gbit" => 1024.0 * 1024.0 * 1024.0 / 8.0,
            _ => return Err(UnitError::BadUnit(rest.to_string())),
        };
    }
    to_int(v, u64::from(u32::MAX)).map(|t| t as u32)
}

/// Formats a rate given in bytes/s like tc's `sprint_rate` (SI units): `20Mbit`, `1250Kbit`,
/// `12345Kbit` (truncated), `0bit`.
pub fn format_rate(bytes_per_sec: u64) -> String {
    const UNITS: [&str; 5] = ["", "K", "M", "G", "T"];
    // In u128: bytes/s above 2^61 would wrap in 64 bits (tc's own sprint_rate wraps there).
    let mut rate = u128::from(bytes_per_sec) * 8;
    let mut i = 0;
    while i < UNITS.len() - 1 {
        // `is_multiple_of` is newer than the workspace's rust-version (1.80).
        #[allow(clippy::manual_is_multiple_of)]
        let inexact = rate % 1000 != 0;
        if rate < 1000 || (inexact && rate < 1_000_000) {
            break;
        }
        rate /= 1000;
        i += 1;
    }
    format!("{rate}{}bit", UNITS[i])
}

/// Formats a time given in µs like tc's `sprint_time`: `%.3gs`, `%.3gms`, or `%uus`
/// (`5ms`, `14.5ms`, `110ms`, `1e+03s`, `300us`).
pub fn format_time(us: u32) -> String {
    let t = f64::from(us);
    if us >= 1_000_000 {
        format!("{}s", format_g(t / 1_000_000.0, 3))
    } else if us >= 1_000 {
        format!("{}ms", format_g(t / 1_000.0, 3))
    } else {
        format!("{us}us")
    }
}

/// Formats a byte count like tc's `sprint_size`: whole MiB (within 1 KiB) as `%gMb`, whole KiB
/// (within 16 B) as `%gKb`, else `%ub` (`4Mb`, `15140Kb`, `50000000b`).
pub fn format_size(bytes: u32) -> String {
    const MB: f64 = 1024.0 * 1024.0;
    let sz = f64::from(bytes);
    if bytes >= 1024 * 1024 && (MB * (sz / MB).round_ties_even() - sz).abs() < 1024.0 {
        format!("{}Mb", format_g((sz / MB).round_ties_even(), 6))
    } else if bytes >= 1024 && (1024.0 * (sz / 1024.0).round_ties_even() - sz).abs() < 16.0 {
        format!("{}Kb", format_g((sz / 1024.0).round_ties_even(), 6))
    } else {
        format!("{bytes}b")
    }
}

/// C's `printf("%.*g", precision, v)` for finite `v`: `precision` significant digits, trailing
/// zeros removed, scientific notation (`1e+03`) when the exponent is below -4 or at least
/// `precision`.
pub fn format_g(v: f64, precision: usize) -> String {
    let p = precision.max(1);
    if v == 0.0 {
        return "0".to_string();
    }
    if !v.is_finite() {
        return if v.is_nan() {
            "nan".into()
        } else if v > 0.0 {
            "inf".into()
        } else {
            "-inf".into()
        };
    }
    let sci = format!("{:.*e}", p - 1, v);
    let (mant, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if exp < -4 || exp >= p as i32 {
        let mant = strip_zeros(mant);
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mant}e{sign}{:02}", exp.unsigned_abs())
    } else {
        let decimals = (p as i32 - 1 - exp).max(0) as usize;
        strip_zeros(&format!("{v:.decimals$}")).to_string()
    }
}

fn strip_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn rates_parse_like_get_rate64() {
        assert_eq!(parse_rate("20Mbit"), Ok(2_500_000));
        assert_eq!(parse_rate("20MBIT"), Ok(2_500_000));
        assert_eq!(parse_rate("1000000"), Ok(125_000));
        assert_eq!(parse_rate("1500kbps"), Ok(1_500_000));
        assert_eq!(parse_rate("10Mibit"), Ok(1_310_720));
        assert_eq!(parse_rate("100bit"), Ok(12));
        assert_eq!(parse_rate("1.5mbit"), Ok(187_500));
        assert_eq!(parse_rate("foo"), Err(UnitError::NoNumber));
        assert_eq!(parse_rate("10xbit"), Err(UnitError::BadUnit("xbit".into())));
        assert_eq!(parse_rate("-1mbit"), Err(UnitError::OutOfRange));
    }

    /// Issue 15, item 5: rates that truncate to 0 B/s (which a shaper reads as "unlimited"),
    /// rates below CAKE's floor, and absurd ones are refused with the accepted range named.
    #[test]
    fn shaper_rates_outside_the_accepted_range_are_refused_with_the_range() {
        for bad in [
            "1bit",
            "0.0001kbit",
            "0",
            "511bit",
            "18446744073709551615bit",
            "11tbit",
        ] {
            let e = parse_shaper_rate(bad).unwrap_err();
            assert!(matches!(e, UnitError::RateOutOfRange(_)), "{bad}: {e:?}");
            assert!(
                e.to_string().contains("accepted range 512bit to 10Tbit"),
                "{bad}: {e}"
            );
        }
        assert!(is_zero_rate("0") && is_zero_rate("0.0mbit"));
        assert!(!is_zero_rate("1bit") && !is_zero_rate("0xbit") && !is_zero_rate("fast"));
        assert_eq!(parse_shaper_rate("512bit"), Ok(64));
        assert_eq!(parse_shaper_rate("10tbit"), Ok(MAX_SHAPER_RATE));
        assert_eq!(parse_shaper_rate("20Mbit"), Ok(2_500_000));
        assert_eq!(parse_shaper_rate("fast"), Err(UnitError::NoNumber));
        assert_eq!(
            SHAPER_RATE_RANGE,
            format!(
                "a rate from {} to {}",
                format_rate(MIN_SHAPER_RATE),
                format_rate(MAX_SHAPER_RATE)
            )
        );
        // The error prints the rate given, not a wrapped one.
        let e = parse_shaper_rate("18446744073709551615bit").unwrap_err();
        assert!(e.to_string().starts_with("rate 18446744"), "{e}");
    }

    #[test]
    fn times_and_sizes_parse_like_tc() {
        assert_eq!(parse_time("100ms"), Ok(100_000));
        assert_eq!(parse_time("300"), Ok(300));
        assert_eq!(parse_time("0.5s"), Ok(500_000));
        assert_eq!(parse_time("5000USEC"), Ok(5_000));
        assert!(matches!(parse_time("1000ns"), Err(UnitError::BadUnit(_))));
        assert_eq!(parse_time("5000s"), Err(UnitError::OutOfRange));
        assert_eq!(parse_size("32mb"), Ok(32 << 20));
        assert_eq!(parse_size("64k"), Ok(65_536));
        assert_eq!(parse_size("8kbit"), Ok(1024));
        assert_eq!(parse_size("100000"), Ok(100_000));
        assert!(parse_size("10q").is_err());
    }

    #[test]
    fn printing_matches_tc_output() {
        assert_eq!(format_rate(156_250), "1250Kbit");
        assert_eq!(format_rate(125_000_000), "1Gbit");
        assert_eq!(format_rate(7_812_500), "62500Kbit");
        assert_eq!(format_rate(1_543_209), "12345Kbit");
        assert_eq!(format_rate(39_062), "312496bit");
        assert_eq!(format_rate(0), "0bit");
        // tc wraps above 2^61 B/s; we print the value.
        assert_eq!(format_rate(u64::MAX / 8 + 1), "18446744Tbit");
        assert_eq!(format_time(5_000), "5ms");
        assert_eq!(format_time(14_534), "14.5ms");
        assert_eq!(format_time(109_534), "110ms");
        assert_eq!(format_time(1_000_000_000), "1e+03s");
        assert_eq!(format_time(999_500), "1e+03ms");
        assert_eq!(format_time(0), "0us");
        assert_eq!(format_size(15_503_360), "15140Kb");
        assert_eq!(format_size(4_194_304), "4Mb");
        assert_eq!(format_size(50_000_000), "50000000b");
        assert_eq!(format_size(u32::MAX), "4096Mb");
        assert_eq!(format_size(1_000_001 * 1024), "1e+06Kb");
        assert_eq!(format_g(0.000_012_3, 3), "1.23e-05");
    }
}
