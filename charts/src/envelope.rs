//! Downsampling to pixel columns that keeps every spike.
//!
//! Each column keeps the min, max and mean of the values that fall into it, so the
//! drawn min..max band reaches the exact peak of any single sample. One pass over the
//! input, O(n) time and O(columns) memory; input order does not matter.

/// One pixel column of a downsampled series. Times in seconds, values in the
/// series' unit. A column with no values has `n == 0` and NaN min, max and mean.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Column {
    /// Time at the middle of the column.
    pub(crate) t_mid: f64,
    pub min: f64,
    pub max: f64,
    pub mean: f64,
    /// How many finite values fell into the column.
    pub n: usize,
}

impl Column {
    /// True when no value fell into this column (a gap).
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }
}

/// Splits `[t0, t1]` into `columns` equal columns and summarizes the values in each.
///
/// `t[i]` pairs with `v[i]` (the longer slice's extra elements are ignored). Points
/// with a time outside `[t0, t1]` or a non-finite time or value are skipped (NaN =
/// no value). A point exactly at `t1` goes into the last column.
///
/// Always returns `columns` columns, empty ones included, or nothing when
/// `columns == 0` or `t0..t1` is not a finite, increasing range.
pub fn envelope(t: &[f64], v: &[f64], t0: f64, t1: f64, columns: usize) -> Vec<Column> {
    if columns == 0 || !t0.is_finite() || !t1.is_finite() || t1 <= t0 {
        return Vec::new();
    }
    let mut min = vec![f64::INFINITY; columns];
    let mut max = vec![f64::NEG_INFINITY; columns];
    let mut sum = vec![0.0f64; columns];
    let mut n = vec![0usize; columns];

    let cols_per_s = columns as f64 / (t1 - t0);
    let last = columns - 1;
    for (&ti, &vi) in t.iter().zip(v) {
        // Written as `!(in range)` so NaN times are skipped too.
        if !(ti >= t0 && ti <= t1 && vi.is_finite()) {
            continue;
        }
        let i = (((ti - t0) * cols_per_s) as usize).min(last);
        if vi < min[i] {
            min[i] = vi;
        }
        if vi > max[i] {
            max[i] = vi;
        }
        sum[i] += vi;
        n[i] += 1;
    }

    let width_s = (t1 - t0) / columns as f64;
    (0..columns)
        .map(|i| {
            let t_mid = t0 + (i as f64 + 0.5) * width_s;
            if n[i] == 0 {
                Column {
                    t_mid,
                    min: f64::NAN,
                    max: f64::NAN,
                    mean: f64::NAN,
                    n: 0,
                }
            } else {
                Column {
                    t_mid,
                    min: min[i],
                    max: max[i],
                    mean: sum[i] / n[i] as f64,
                    n: n[i],
                }
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_spike_among_a_million_zeros_keeps_its_exact_max() {
        let n = 1_000_000;
        let t: Vec<f64> = (0..n).map(|i| i as f64 * 0.001).collect();
        let mut v = vec![0.0; n];
        let spike_at = 612_345;
        let peak = 1024.0 * 1024.0 * 1024.0; // 1 GiB/s in bytes/s
        v[spike_at] = peak;

        let cols = envelope(&t, &v, 0.0, t[n - 1], 1500);
        assert_eq!(cols.len(), 1500);
        let (i, hit) = cols
            .iter()
            .enumerate()
            .find(|(_, c)| c.max > 0.0)
            .expect("the spike must survive downsampling");
        assert_eq!(hit.max, peak, "exact peak, not an average");
        assert_eq!(hit.min, 0.0);
        assert!(hit.mean > 0.0 && hit.mean < peak / 100.0, "mean is diluted");
        // The spike sits in the column its time belongs to, and only there.
        let want = (t[spike_at] * (1500.0 / t[n - 1])) as usize;
        assert_eq!(i, want);
        assert_eq!(cols.iter().filter(|c| c.max > 0.0).count(), 1);
        assert_eq!(cols.iter().map(|c| c.n).sum::<usize>(), n);
    }

    #[test]
    fn min_max_mean_and_count_per_column() {
        let t = [0.0, 0.1, 0.2, 1.0, 1.5, 1.9];
        let v = [1.0, 5.0, 3.0, -2.0, 4.0, 10.0];
        let cols = envelope(&t, &v, 0.0, 2.0, 2);
        assert_eq!(cols[0].n, 3);
        assert_eq!((cols[0].min, cols[0].max, cols[0].mean), (1.0, 5.0, 3.0));
        assert_eq!(cols[1].n, 3);
        assert_eq!((cols[1].min, cols[1].max, cols[1].mean), (-2.0, 10.0, 4.0));
        assert_eq!(cols[0].t_mid, 0.5);
        assert_eq!(cols[1].t_mid, 1.5);
    }

    #[test]
    fn nan_values_are_skipped_and_an_all_nan_column_is_empty() {
        let t = [0.0, 0.5, 1.2, 1.7, 2.5];
        let v = [1.0, f64::NAN, f64::NAN, f64::INFINITY, 7.0];
        let cols = envelope(&t, &v, 0.0, 3.0, 3);
        assert_eq!((cols[0].n, cols[0].max), (1, 1.0));
        assert!(cols[1].is_empty());
        assert!(cols[1].mean.is_nan() && cols[1].max.is_nan());
        assert_eq!((cols[2].n, cols[2].min), (1, 7.0));
    }

    #[test]
    fn points_outside_the_range_are_ignored_and_the_end_is_inclusive() {
        let t = [-1.0, 0.0, 10.0, 10.5, f64::NAN];
        let v = [100.0, 1.0, 2.0, 100.0, 100.0];
        let cols = envelope(&t, &v, 0.0, 10.0, 4);
        assert_eq!(cols[0].max, 1.0);
        assert_eq!(cols[3].max, 2.0);
        assert_eq!(cols.iter().map(|c| c.n).sum::<usize>(), 2);
    }

    #[test]
    fn unsorted_input_gives_the_same_columns() {
        let t: Vec<f64> = (0..1000).map(|i| i as f64).collect();
        let v: Vec<f64> = (0..1000).map(|i| ((i * 7919) % 101) as f64).collect();
        let a = envelope(&t, &v, 0.0, 999.0, 37);
        let mut pairs: Vec<(f64, f64)> = t.iter().copied().zip(v.iter().copied()).collect();
        pairs.reverse();
        let (tr, vr): (Vec<f64>, Vec<f64>) = pairs.into_iter().unzip();
        let b = envelope(&tr, &vr, 0.0, 999.0, 37);
        for (x, y) in a.iter().zip(&b) {
            assert_eq!((x.min, x.max, x.n), (y.min, y.max, y.n));
            assert!((x.mean - y.mean).abs() < 1e-9);
        }
    }

    #[test]
    fn degenerate_requests_return_nothing() {
        assert!(envelope(&[1.0], &[1.0], 0.0, 1.0, 0).is_empty());
        assert!(envelope(&[1.0], &[1.0], 1.0, 1.0, 10).is_empty());
        assert!(envelope(&[1.0], &[1.0], 2.0, 1.0, 10).is_empty());
        assert!(envelope(&[1.0], &[1.0], f64::NAN, 1.0, 10).is_empty());
    }
}
