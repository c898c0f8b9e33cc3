//! Order statistics of samples: quantiles and medians, the one home for them (the simulator's
//! latency percentiles, the experiments' and the lab's figures, the benchmarks' medians, the
//! controllers' medians).
//!
//! Two rank rules are in use, each named for what it computes; a figure keeps the rule it was
//! published with, so changing a caller's rule changes its figures:
//! - [`nearest_rank`]: the smallest sample with at least a fraction `p` of the samples at or
//!   below it (index `ceil(p * n) - 1`), the textbook nearest-rank percentile;
//! - [`rounded_rank`]: the sample at index `round((n - 1) * p)`, rounding half away from zero;
//!   at `p = 0.5` it is the upper median (`sorted[n / 2]`).
//!
//! [`median_sorted`] and [`median`] give the median as the mean of the two middle samples when
//! their count is even.
//!
//! Every function answers `None` for no samples: a figure without samples is not a number.
//! None allocates but [`median`], which sorts a copy.

/// The nearest-rank `p`-quantile of `sorted` (ascending): the sample at index
/// `ceil(p * n) - 1`, with `p` clamped to [0, 1] (`p = 0` gives the minimum). `None` when
/// `sorted` is empty.
pub fn nearest_rank<T: Copy>(sorted: &[T], p: f64) -> Option<T> {
    let n = sorted.len();
    if n == 0 {
        return None;
    }
    let p = p.clamp(0.0, 1.0);
    sorted
        .get(((p * n as f64).ceil() as usize).clamp(1, n) - 1)
        .copied()
}

/// The `p`-quantile of `sorted` (ascending) by rounded index: the sample at index
/// `round((n - 1) * p)`, with `p` clamped to [0, 1]. `rounded_rank(s, 0.5)` is the upper
/// median `s[n / 2]`. `None` when `sorted` is empty.
pub fn rounded_rank<T: Copy>(sorted: &[T], p: f64) -> Option<T> {
    let last = sorted.len().checked_sub(1)?;
    let p = p.clamp(0.0, 1.0);
    sorted.get((last as f64 * p).round() as usize).copied()
}

/// The median of `sorted` (ascending): the middle sample, or the mean of the two middle ones
/// for an even count. `None` when `sorted` is empty.
pub fn median_sorted(sorted: &[f64]) -> Option<f64> {
    let n = sorted.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(sorted[n / 2]),
        _ => Some((sorted[n / 2 - 1] + sorted[n / 2]) / 2.0),
    }
}

/// The median of `values` in any order, NaN values left out ([`median_sorted`] of the rest);
/// `None` when no value is left. Sorts a copy.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut s: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
    s.sort_by(f64::total_cmp);
    median_sorted(&s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_is_the_smallest_sample_covering_p() {
        let s = [10, 20, 30, 40];
        assert_eq!(nearest_rank(&s, 0.0), Some(10));
        assert_eq!(nearest_rank(&s, 0.25), Some(10));
        assert_eq!(nearest_rank(&s, 0.26), Some(20));
        assert_eq!(nearest_rank(&s, 0.5), Some(20));
        assert_eq!(nearest_rank(&s, 0.99), Some(40));
        assert_eq!(nearest_rank(&s, 1.0), Some(40));
        assert_eq!(nearest_rank(&s, 7.0), Some(40));
        assert_eq!(nearest_rank::<u32>(&[], 0.5), None);
        // 100 samples 1..=100: the p99 is 99, the p95 is 95.
        let h: Vec<u64> = (1..=100).collect();
        assert_eq!(nearest_rank(&h, 0.99), Some(99));
        assert_eq!(nearest_rank(&h, 0.95), Some(95));
    }

    #[test]
    fn rounded_rank_rounds_the_index_and_its_half_is_the_upper_median() {
        let s = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(rounded_rank(&s, 0.5), Some(3.0));
        assert_eq!(rounded_rank(&s, 0.0), Some(1.0));
        assert_eq!(rounded_rank(&s, 1.0), Some(4.0));
        assert_eq!(rounded_rank(&s, -1.0), Some(1.0));
        assert_eq!(rounded_rank(&[5u32, 6, 7], 0.5), Some(6));
        assert_eq!(rounded_rank::<f64>(&[], 0.5), None);
        for n in 1..50usize {
            let v: Vec<usize> = (0..n).collect();
            assert_eq!(rounded_rank(&v, 0.5), Some(n / 2), "n = {n}");
        }
        // 0.9 of 11 samples: index round(9.0) = 9.
        let v: Vec<u64> = (0..11).collect();
        assert_eq!(rounded_rank(&v, 0.9), Some(9));
    }

    #[test]
    fn median_averages_the_middle_two_and_skips_nan() {
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[5.0, 1.0, 3.0]), Some(3.0));
        assert_eq!(median(&[f64::NAN, 2.0]), Some(2.0));
        assert_eq!(median(&[f64::NAN]), None);
        assert_eq!(median(&[]), None);
        assert_eq!(median_sorted(&[1.0, 2.0]), Some(1.5));
        assert_eq!(median_sorted(&[]), None);
    }
}
