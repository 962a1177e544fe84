//! Derived figures: per-interval rates from raw counters, fixed-width windows, peaks,
//! the "UI" average and the burst finder. Pure functions over plain slices.
//!
//! # What counts as a burst
//! A burst must stand out from the device's own baseline, so a steady writer is "steady
//! at X MiB/s, no bursts" however its writes fall on the 10 ms bins:
//! 1. A bin is *busy* above `max(peak bin * peak_fraction, 4 * p25 of bins, floor)`.
//! 2. Busy bins closer than `merge_gap_ns` join one run.
//! 3. The *baseline* is the median rate over whole windows of `baseline_ns` (100 ms):
//!    what the device does most of the time at a scale where a steady writer's own
//!    10 ms jitter (a write every 30 ms, a journal commit) averages out.
//! 4. A run is kept only when its bytes above the baseline (`bytes - baseline *
//!    duration`) exceed `baseline_excess` (1.5) times what the baseline writes in one
//!    `baseline_ns` window. A steady writer's runs are its own rate: dropped. A flush
//!    over a quiet device (baseline 0) is kept whatever its size.
//! 5. Kept runs closer than a quarter of their median spacing are one burst (a flush
//!    that pauses between files).
//! 6. Bursts that together cover more than `max_cover_fraction` (half) of the run are
//!    not bursts: the device was busy all along. None are reported.
//!
//! A period (median time between starts) is stated only with at least 3 bursts (2
//! bursts are one gap, not a rhythm), and its regularity (`period_cv`, `regular`) only
//! with at least 4 (a spread needs more than 2 gaps).
//!
//! Units: times in ns (run clock), bytes, rates in bytes/s unless a name says MiB/s.
//!
//! A counter delta over the interval between two rows `[t_prev, t]` is spread over
//! fixed windows in proportion to overlap, so a window's sum is the bytes the device
//! really did in it (to the sampling resolution), whatever the window width.
//!
//! Long because its tests (from `mod tests` on, a third of the file) hold the burst
//! finder to the streamed one bit for bit; the code is under 560 lines.

use collectors::diskstats::{self as ds, counter_delta, MAX_FIELDS};
use serde::Serialize;

use format::diskstats::DiskRows;
pub use format::units::MIB;

/// A span of run time, `[start_ns, end_ns)` on the run clock.
pub type Span = (u64, u64);

/// A counter's change over one interval between rows (`None`: no value, e.g. a reset).
#[derive(Debug, Clone, Copy)]
pub struct Interval {
    pub t0_ns: u64,
    pub t1_ns: u64,
    pub v: Option<f64>,
}

/// Intervals of counter `field` (multiplied by `scale`, e.g. 512 for sectors).
pub fn intervals(d: &DiskRows, field: usize, scale: f64) -> Vec<Interval> {
    let mut out = Vec::with_capacity(d.t_ns.len());
    for k in 1..d.t_ns.len() {
        let v = match (d.f[k - 1].get(field), d.f[k].get(field)) {
            (Some(a), Some(b)) => counter_delta(field, a, b).map(|x| x as f64 * scale),
            _ => None,
        };
        out.push(Interval {
            t0_ns: d.t_ns[k - 1],
            t1_ns: d.t_ns[k],
            v,
        });
    }
    out
}

/// Sums interval values into windows `[k*w, (k+1)*w)` for `k < n`, spreading each
/// interval over the windows it overlaps in proportion to the overlap.
pub fn window_sums(iv: &[Interval], width_ns: u64, n: usize) -> Vec<f64> {
    let mut out = vec![0.0; n];
    for i in iv {
        let Some(v) = i.v else { continue };
        if v == 0.0 || i.t1_ns <= i.t0_ns {
            continue;
        }
        let span = (i.t1_ns - i.t0_ns) as f64;
        let mut k = (i.t0_ns / width_ns) as usize;
        while k < n {
            let w0 = k as u64 * width_ns;
            let w1 = w0 + width_ns;
            if w0 >= i.t1_ns {
                break;
            }
            let o0 = i.t0_ns.max(w0);
            let o1 = i.t1_ns.min(w1);
            if o1 > o0 {
                out[k] += v * (o1 - o0) as f64 / span;
            }
            k += 1;
        }
    }
    out
}

/// Highest rate (per second) over windows of `width_ns`, among windows that lie wholly
/// inside the recording.
pub(crate) fn peak_rate(iv: &[Interval], width_ns: u64, duration_ns: u64) -> f64 {
    let n = (duration_ns / width_ns) as usize;
    if n == 0 {
        return f64::NAN;
    }
    let sums = window_sums(iv, width_ns, n);
    sums.iter().cloned().fold(0.0, f64::max) / (width_ns as f64 / 1e9)
}

/// What an array UI shows: averages over windows of `width_ns`.
#[derive(Debug, Clone, Serialize)]
pub struct UiAverage {
    pub window_s: f64,
    /// Whole windows in the run (0: the run is shorter, `max_bytes_per_s` is the run mean).
    pub windows: usize,
    /// The highest window average: the highest point the UI graph would show.
    pub(crate) max_bytes_per_s: f64,
    /// Per window (start_s, bytes/s), for the overlay line.
    pub series: Vec<(f64, f64)>,
}

pub fn ui_average(iv: &[Interval], width_ns: u64, duration_ns: u64) -> UiAverage {
    let n = (duration_ns / width_ns) as usize;
    ui_from_sums(
        &window_sums(iv, width_ns, n),
        width_ns,
        duration_ns,
        total(iv),
    )
}

/// [`ui_average`] from the window sums of whole windows (`duration_ns / width_ns` of
/// them) and the total (the run mean when the run is shorter than one window).
pub(crate) fn ui_from_sums(sums: &[f64], width_ns: u64, duration_ns: u64, total: f64) -> UiAverage {
    let n = (duration_ns / width_ns) as usize;
    let w_s = width_ns as f64 / 1e9;
    if n == 0 {
        let r = total / (duration_ns.max(1) as f64 / 1e9);
        return UiAverage {
            window_s: w_s,
            windows: 0,
            max_bytes_per_s: r,
            series: vec![(0.0, r)],
        };
    }
    let sums = &sums[..n];
    let series: Vec<(f64, f64)> = sums
        .iter()
        .enumerate()
        .map(|(k, s)| (k as f64 * w_s, s / w_s))
        .collect();
    let max = series.iter().map(|x| x.1).fold(0.0, f64::max);
    UiAverage {
        window_s: w_s,
        windows: n,
        max_bytes_per_s: max,
        series,
    }
}

pub use format::summary::{Burst, Bursts};

/// Burst finder tuning.
#[derive(Debug, Clone, Copy)]
pub struct BurstParams {
    pub bin_ns: u64,
    /// Busy runs separated by a quiet gap shorter than this are one burst.
    merge_gap_ns: u64,
    /// A bin is busy above max(peak * this, 4 * p25 of bins, floor).
    peak_fraction: f64,
    floor_bytes_per_s: f64,
    /// The baseline is the median rate over whole windows of this width.
    baseline_ns: u64,
    /// A burst's bytes above the baseline must exceed this many baseline windows' bytes.
    baseline_excess: f64,
    /// Bursts covering more than this share of the run are a steady writer: none.
    max_cover_fraction: f64,
}

impl Default for BurstParams {
    fn default() -> Self {
        BurstParams {
            bin_ns: 10_000_000,
            merge_gap_ns: 100_000_000,
            peak_fraction: 0.1,
            floor_bytes_per_s: 1024.0 * 1024.0,
            baseline_ns: 100_000_000,
            baseline_excess: 1.5,
            max_cover_fraction: 0.5,
        }
    }
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[i]
}

/// Finds bursts in per-bin byte sums (bins of `p.bin_ns`, starting at t = 0).
///
/// The rule is the module doc's ("What counts as a burst").
pub fn find_bursts(bins: &[f64], p: &BurstParams) -> Bursts {
    let bin_s = p.bin_ns as f64 / 1e9;
    let rates: Vec<f64> = bins.iter().map(|b| b / bin_s).collect();
    let mut sorted = rates.clone();
    sorted.sort_by(|a, b| a.total_cmp(b));
    let peak = sorted.last().copied().unwrap_or(0.0);
    let threshold = (peak * p.peak_fraction)
        .max(4.0 * percentile(&sorted, 0.25))
        .max(p.floor_bytes_per_s);
    let gap_bins = (p.merge_gap_ns / p.bin_ns) as usize;
    let mut list: Vec<Burst> = vec![];
    let mut cur: Option<(usize, usize)> = None; // first, last busy bin
    let close = |a: usize, b: usize, list: &mut Vec<Burst>| {
        let bytes: f64 = bins[a..=b].iter().sum();
        let pk = rates[a..=b].iter().cloned().fold(0.0, f64::max);
        list.push(Burst {
            start_s: a as f64 * bin_s,
            duration_ms: (b - a + 1) as f64 * bin_s * 1e3,
            bytes,
            peak_mib_s: pk / MIB,
        });
    };
    for (k, &r) in rates.iter().enumerate() {
        if r > threshold && peak > 0.0 {
            cur = match cur {
                Some((a, b)) if k - b <= gap_bins + 1 => Some((a, k)),
                Some((a, b)) => {
                    close(a, b, &mut list);
                    Some((k, k))
                }
                None => Some((k, k)),
            };
        }
    }
    if let Some((a, b)) = cur {
        close(a, b, &mut list);
    }
    let total: f64 = bins.iter().sum();
    let baseline = baseline_rate(|| bins.iter().copied(), p);
    finish_bursts(list, total, threshold, baseline, bins.len(), p)
}

/// Rates (bytes/s) over whole windows of `p.baseline_ns` (at least one bin), summed
/// from the bins in order; a cut last window is left out.
fn window_rates_of<I: Iterator<Item = f64>>(bins: I, p: &BurstParams) -> impl Iterator<Item = f64> {
    let m = (p.baseline_ns / p.bin_ns).max(1) as usize;
    let w_s = m as f64 * p.bin_ns as f64 / 1e9;
    let mut bins = bins;
    std::iter::from_fn(move || {
        let mut sum = 0.0;
        for _ in 0..m {
            sum += bins.next()?;
        }
        Some(sum / w_s)
    })
}

/// The baseline rate (bytes/s): the median (the lower one of an even count) of
/// [`window_rates_of`]; 0 with no whole window.
fn baseline_rate<I: Iterator<Item = f64>>(bins: impl Fn() -> I, p: &BurstParams) -> f64 {
    let w = || window_rates_of(bins(), p);
    let n = w().count();
    if n == 0 {
        return 0.0;
    }
    select_total_order(w, (n - 1) / 2).unwrap_or(0.0).max(0.0)
}

/// The `i`th smallest of `n` values in [`f64::total_cmp`]'s order (what `sorted[i]` is
/// after sorting them), by a radix selection over the values' 64 bits 16 at a time: four
/// reads of `values`, 512 KiB of counts, whatever `n`.
fn select_total_order<I: Iterator<Item = f64>>(values: impl Fn() -> I, i: usize) -> Option<f64> {
    // total_cmp's order as unsigned keys (the same mapping it uses).
    let key = |x: f64| {
        let b = x.to_bits();
        if b >> 63 == 1 {
            !b
        } else {
            b | 1 << 63
        }
    };
    let mut prefix = 0u64;
    let mut rank = i;
    let mut counts = vec![0u64; 1 << 16];
    for digit in 0..4u32 {
        let shift = 48 - 16 * digit;
        counts.iter_mut().for_each(|c| *c = 0);
        for x in values() {
            let k = key(x);
            // Keys whose higher digits are the prefix found so far (none for the first).
            if k >> shift >> 16 == prefix >> shift >> 16 {
                counts[((k >> shift) & 0xffff) as usize] += 1;
            }
        }
        let mut d = None;
        for (j, &c) in counts.iter().enumerate() {
            if (rank as u64) < c {
                d = Some(j as u64);
                break;
            }
            rank -= c as usize;
        }
        prefix |= d? << shift;
    }
    // The key back to the value.
    let b = if prefix >> 63 == 1 {
        prefix & !(1 << 63)
    } else {
        !prefix
    };
    Some(f64::from_bits(b))
}

/// [`find_bursts`] over bins read as a stream, any number of times (`bins()` starts them
/// again): memory does not grow with the number of bins (the radix selection's counts and
/// the bursts found). The same arithmetic in the same order, so the same figures to the
/// bit (tested against [`find_bursts`]).
pub(crate) fn find_bursts_streamed<I: Iterator<Item = f64>>(
    bins: impl Fn() -> I,
    p: &BurstParams,
) -> Bursts {
    let bin_s = p.bin_ns as f64 / 1e9;
    let rates = || bins().map(move |b| b / bin_s);
    let n = rates().count();
    let q = |q: f64| -> f64 {
        if n == 0 {
            return 0.0;
        }
        let i = ((n - 1) as f64 * q).round() as usize;
        select_total_order(rates, i).unwrap_or(0.0)
    };
    let peak = q(1.0);
    let threshold = (peak * p.peak_fraction)
        .max(4.0 * q(0.25))
        .max(p.floor_bytes_per_s);
    let gap_bins = (p.merge_gap_ns / p.bin_ns) as usize;
    let mut list: Vec<Burst> = vec![];
    let close = |a: usize, b: usize, bytes: f64, pk: f64, list: &mut Vec<Burst>| {
        list.push(Burst {
            start_s: a as f64 * bin_s,
            duration_ms: (b - a + 1) as f64 * bin_s * 1e3,
            bytes,
            peak_mib_s: pk / MIB,
        });
    };
    // The burst being grown: first and last busy bin, the sum and maximum from its first
    // bin on (as `bins[a..=k].iter().sum()` and the fold of `find_bursts` add them) and
    // their values at its last busy bin.
    let mut cur: Option<(usize, usize)> = None;
    let (mut sum, mut pk) = (0.0, 0.0);
    let (mut sum_b, mut pk_b) = (0.0, 0.0);
    let mut total = std::iter::empty::<f64>().sum::<f64>();
    for (k, b) in bins().enumerate() {
        total += b;
        let r = b / bin_s;
        let busy = r > threshold && peak > 0.0;
        match cur {
            Some((a, last)) if k - last <= gap_bins + 1 => {
                sum += b;
                pk = f64::max(pk, r);
                if busy {
                    cur = Some((a, k));
                    (sum_b, pk_b) = (sum, pk);
                }
            }
            Some((a, last)) if busy => {
                close(a, last, sum_b, pk_b, &mut list);
                cur = None;
            }
            _ => {}
        }
        if busy && cur.is_none() {
            sum = std::iter::empty::<f64>().sum::<f64>() + b;
            pk = f64::max(0.0, r);
            (sum_b, pk_b) = (sum, pk);
            cur = Some((k, k));
        }
    }
    if let Some((a, b)) = cur {
        close(a, b, sum_b, pk_b, &mut list);
    }
    let baseline = baseline_rate(&bins, p);
    finish_bursts(list, total, threshold, baseline, n, p)
}

/// The rest of the burst finder, from the busy runs found over `n_bins` bins: runs that
/// do not stand out from the `baseline` (bytes/s) dropped, clusters joined, a steady
/// writer's cover-all bursts dropped, the period (steps 4 to 6 of the module doc).
fn finish_bursts(
    list: Vec<Burst>,
    total: f64,
    threshold: f64,
    baseline: f64,
    n_bins: usize,
    p: &BurstParams,
) -> Bursts {
    let bin_s = p.bin_ns as f64 / 1e9;
    let window_bytes = baseline * (p.baseline_ns.max(p.bin_ns) as f64 / 1e9);
    let mut list: Vec<Burst> = list
        .into_iter()
        .filter(|b| b.bytes - baseline * b.duration_ms / 1e3 > p.baseline_excess * window_bytes)
        .collect();
    // Clusters closer than a quarter of the typical spacing between bursts are one burst
    // (a flush that pauses briefly between files), so the period is not halved by them.
    for _ in 0..3 {
        let Some(p) = median(&start_gaps(&list)) else {
            break;
        };
        let merged = merge_close(&list, p / 4.0);
        if merged.len() == list.len() {
            break;
        }
        list = merged;
    }
    let covered_s: f64 = list.iter().map(|b| b.duration_ms / 1e3).sum();
    if covered_s > p.max_cover_fraction * n_bins as f64 * bin_s {
        list.clear();
    }
    let in_bursts: f64 = list.iter().map(|b| b.bytes).sum();
    let g = start_gaps(&list);
    let n = list.len();
    let period_s = median(&g).filter(|_| n >= MIN_BURSTS_FOR_PERIOD);
    let period_cv = (n >= MIN_BURSTS_FOR_REGULARITY).then(|| {
        let mean = g.iter().sum::<f64>() / g.len() as f64;
        let var = g.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / g.len() as f64;
        if mean > 0.0 {
            var.sqrt() / mean
        } else {
            0.0
        }
    });
    Bursts {
        bin_ms: bin_s * 1e3,
        threshold_mib_s: threshold / MIB,
        count: n,
        period_s,
        period_cv,
        regular: period_cv.is_some_and(|c| c < 0.25),
        mean_bytes: (n > 0).then(|| in_bursts / n as f64),
        mean_duration_ms: (n > 0)
            .then(|| list.iter().map(|b| b.duration_ms).sum::<f64>() / n as f64),
        share_of_bytes: if total > 0.0 { in_bursts / total } else { 0.0 },
        list,
    }
}

/// Fewer bursts than this have no period (`period_s` None).
const MIN_BURSTS_FOR_PERIOD: usize = 3;
/// Fewer bursts than this have no regularity figure (`period_cv` None, not `regular`).
pub(crate) const MIN_BURSTS_FOR_REGULARITY: usize = 4;

/// Times between consecutive burst starts, s.
fn start_gaps(list: &[Burst]) -> Vec<f64> {
    list.windows(2)
        .map(|w| w[1].start_s - w[0].start_s)
        .collect()
}

fn median(v: &[f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let mut g = v.to_vec();
    g.sort_by(|a, b| a.total_cmp(b));
    let n = g.len();
    Some(if n % 2 == 1 {
        g[n / 2]
    } else {
        (g[n / 2 - 1] + g[n / 2]) / 2.0
    })
}

/// Joins bursts whose quiet gap (end to next start) is shorter than `gap_s`.
fn merge_close(list: &[Burst], gap_s: f64) -> Vec<Burst> {
    let mut out: Vec<Burst> = Vec::with_capacity(list.len());
    for b in list {
        if let Some(last) = out.last_mut() {
            let end = last.start_s + last.duration_ms / 1e3;
            if b.start_s - end < gap_s {
                let new_end = b.start_s + b.duration_ms / 1e3;
                last.duration_ms = (new_end - last.start_s) * 1e3;
                last.bytes += b.bytes;
                last.peak_mib_s = last.peak_mib_s.max(b.peak_mib_s);
                continue;
            }
        }
        out.push(b.clone());
    }
    out
}

/// Sector fields -> bytes.
pub(crate) const SECTOR_BYTES: f64 = 512.0;

/// The fields a device report derives, with their scale.
pub fn write_bytes(d: &DiskRows) -> Vec<Interval> {
    intervals(d, ds::F_SECTORS_WRITTEN, SECTOR_BYTES)
}
pub fn read_bytes(d: &DiskRows) -> Vec<Interval> {
    intervals(d, ds::F_SECTORS_READ, SECTOR_BYTES)
}

/// Total of an interval series (None values skipped).
pub fn total(iv: &[Interval]) -> f64 {
    iv.iter().filter_map(|i| i.v).sum()
}

/// Whether any row of the device has this field.
pub fn has_field(d: &DiskRows, field: usize) -> bool {
    field < MAX_FIELDS && d.f.iter().any(|r| r.get(field).is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bins of every kind the finder meets: quiet, steady, periodic bursts with pauses
    /// inside, bursts longer than the merge gap, ties, -0.0, tiny and huge values.
    fn bins_like(seed: u64, n: usize) -> Vec<f64> {
        let mut x = seed | 1;
        let mut rnd = move |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % m
        };
        let kind = rnd(5);
        (0..n)
            .map(|k| match kind {
                0 => 0.0,
                1 => [0.0, -0.0, 1e-300, 5e5][rnd(4) as usize],
                2 => {
                    let p = k % (400 + rnd(3) as usize);
                    if p < 6 || (p > 8 && p < 10) {
                        8e6 + rnd(1000) as f64
                    } else {
                        (rnd(100) * 40) as f64
                    }
                }
                3 => {
                    if (k / 50) % 7 == 0 {
                        1e7 * (1.0 + rnd(9) as f64 / 7.0)
                    } else {
                        rnd(3) as f64 * 4096.0
                    }
                }
                _ => rnd(1 << 40) as f64 / 3.0,
            })
            .collect()
    }

    #[test]
    fn the_streamed_burst_finder_is_the_in_memory_one_to_the_bit() {
        let p = BurstParams::default();
        let (mut found, mut regular) = (0, 0);
        for seed in 0..60u64 {
            for n in [0usize, 1, 2, 3, 17, 1000, 25_000] {
                let bins = bins_like(seed * 7919 + n as u64, n);
                let a = find_bursts(&bins, &p);
                let b = find_bursts_streamed(|| bins.iter().copied(), &p);
                let j = |b: &Bursts| serde_json::to_string(b).unwrap();
                assert_eq!(j(&a), j(&b), "seed {seed}, {n} bins");
                assert_eq!(a.threshold_mib_s.to_bits(), b.threshold_mib_s.to_bits());
                for (x, y) in a.list.iter().zip(&b.list) {
                    assert_eq!(x.bytes.to_bits(), y.bytes.to_bits());
                    assert_eq!(x.peak_mib_s.to_bits(), y.peak_mib_s.to_bits());
                }
                found += a.count;
                regular += usize::from(a.regular);
            }
        }
        // The cases hold bursts, periodic ones among them.
        assert!(
            found > 100 && regular > 5,
            "{found} bursts, {regular} regular"
        );
    }

    #[test]
    fn radix_selection_is_the_sorted_order() {
        let v = [
            3.0,
            -0.0,
            0.0,
            -1.5,
            f64::INFINITY,
            1e-310,
            -1e300,
            3.0,
            2.5,
        ];
        let mut s = v.to_vec();
        s.sort_by(|a, b| a.total_cmp(b));
        for (i, want) in s.iter().enumerate() {
            let got = select_total_order(|| v.iter().copied(), i).unwrap();
            assert_eq!(got.to_bits(), want.to_bits(), "rank {i}");
        }
        assert!(select_total_order(|| v.iter().copied(), v.len()).is_none());
    }

    fn iv(t0: u64, t1: u64, v: f64) -> Interval {
        Interval {
            t0_ns: t0,
            t1_ns: t1,
            v: Some(v),
        }
    }

    #[test]
    fn window_sums_split_by_overlap() {
        let s = window_sums(&[iv(5, 15, 100.0), iv(15, 20, 50.0)], 10, 2);
        assert_eq!(s, vec![50.0, 100.0]);
    }

    #[test]
    fn none_values_are_skipped() {
        let x = [Interval {
            t0_ns: 0,
            t1_ns: 10,
            v: None,
        }];
        assert_eq!(window_sums(&x, 10, 1), vec![0.0]);
    }

    #[test]
    fn finds_known_bursts_and_their_period() {
        // 60 s of 10 ms bins: baseline 10 KiB per bin, bursts of 5 bins x 10 MiB every 5 s.
        let mut bins = vec![10.0 * 1024.0; 6000];
        for k in 0..12 {
            for j in 0..5 {
                bins[k * 500 + 100 + j] = 10.0 * MIB;
            }
        }
        let b = find_bursts(&bins, &BurstParams::default());
        assert_eq!(b.count, 12);
        assert!((b.period_s.unwrap() - 5.0).abs() < 1e-9);
        assert!(b.regular);
        assert!((b.list[0].start_s - 1.0).abs() < 1e-9);
        assert!((b.list[0].duration_ms - 50.0).abs() < 1e-9);
        assert!((b.list[0].bytes - 50.0 * MIB).abs() < 1.0);
        assert!((b.list[0].peak_mib_s - 1000.0).abs() < 1e-6);
    }

    #[test]
    fn steady_stream_has_no_bursts() {
        let bins: Vec<f64> = (0..3000)
            .map(|i| MIB * (1.0 + 0.3 * ((i * 7919) % 13) as f64 / 13.0))
            .collect();
        let b = find_bursts(&bins, &BurstParams::default());
        assert_eq!(b.count, 0, "{b:?}");
        assert!(!b.regular);
    }

    /// 20 s of 10 ms bins: a quiet device with `n` flushes of 5 bins x 10 MiB, every 3 s
    /// but for a jitter on the later ones (so the spacing has a spread).
    fn flushes(n: usize) -> Vec<f64> {
        let mut bins = vec![0.0; 2000];
        for k in 0..n {
            let at = 100 + k * 300 + [0, 0, 40, 0, 90, 10][k % 6];
            for j in 0..5 {
                bins[at + j] = 10.0 * MIB;
            }
        }
        bins
    }

    #[test]
    fn a_steady_writer_whose_writes_fall_on_some_bins_only_has_no_bursts() {
        // 20 s of 16 KiB on every 3rd and 4th bin plus a 256 KiB commit every 50 ms: two
        // bins in five are empty (p25 = 0) and the commits are busy bins 50 ms apart all
        // run long, which the old finder called one 20 s burst.
        let bins: Vec<f64> = (0..2000)
            .map(|k| {
                let small = if k % 3 == 0 || k % 4 == 0 { 16.0 } else { 0.0 };
                let commit = if k % 5 == 0 { 256.0 } else { 0.0 };
                (small + commit) * 1024.0
            })
            .collect();
        for b in [
            find_bursts(&bins, &BurstParams::default()),
            find_bursts_streamed(|| bins.iter().copied(), &BurstParams::default()),
        ] {
            assert_eq!(b.count, 0, "{b:?}");
            assert!(b.list.is_empty() && b.period_s.is_none() && !b.regular);
            assert_eq!(b.share_of_bytes, 0.0);
        }
    }

    #[test]
    fn a_steady_writer_with_noise_has_no_bursts() {
        // 50 MiB/s with +-40% noise per bin, and one bin in 40 at 6x: its own jitter.
        let bins: Vec<f64> = (0..3000)
            .map(|i| {
                let noise = 0.6 + 0.8 * ((i * 7919) % 17) as f64 / 17.0;
                let spike = if i % 40 == 7 { 6.0 } else { 1.0 };
                50.0 * MIB * 0.01 * noise * spike
            })
            .collect();
        let b = find_bursts(&bins, &BurstParams::default());
        assert_eq!(b.count, 0, "{:?}", b.list);
    }

    #[test]
    fn two_bursts_have_no_period() {
        let b = find_bursts(&flushes(2), &BurstParams::default());
        assert_eq!(b.count, 2, "{:?}", b.list);
        assert_eq!((b.period_s, b.period_cv, b.regular), (None, None, false));
    }

    #[test]
    fn three_bursts_have_a_period_but_no_regularity() {
        let b = find_bursts(&flushes(3), &BurstParams::default());
        assert_eq!(b.count, 3, "{:?}", b.list);
        // Gaps 3.0 s and 3.4 s: the median of the two.
        assert!((b.period_s.unwrap() - 3.2).abs() < 1e-9, "{b:?}");
        assert_eq!((b.period_cv, b.regular), (None, false));
    }

    #[test]
    fn four_bursts_have_a_period_and_a_regularity() {
        let b = find_bursts(&flushes(4), &BurstParams::default());
        assert_eq!(b.count, 4, "{:?}", b.list);
        assert!(b.period_s.is_some());
        // Gaps 3.0, 3.4, 2.6 s: cv 0.109.
        let cv = b.period_cv.unwrap();
        assert!((cv - 0.1089).abs() < 1e-3, "cv {cv}");
        assert!(b.regular);
    }

    #[test]
    fn a_split_flush_is_one_burst() {
        // Bursts every 5 s; the first flush pauses for 300 ms half-way.
        let mut bins = vec![0.0; 2500];
        for k in [100usize, 130, 600, 1100, 1600, 2100] {
            for j in 0..5 {
                bins[k + j] = 10.0 * MIB;
            }
        }
        let b = find_bursts(&bins, &BurstParams::default());
        assert_eq!(b.count, 5, "{:?}", b.list);
        assert!((b.period_s.unwrap() - 5.0).abs() < 1e-9);
        assert!((b.list[0].duration_ms - 350.0).abs() < 1e-6);
        assert!(b.regular);
    }

    #[test]
    fn close_busy_bins_merge() {
        let mut bins = vec![0.0; 1000];
        bins[100] = 10.0 * MIB;
        bins[105] = 10.0 * MIB; // 40 ms gap: same burst
        bins[300] = 10.0 * MIB; // far: a second burst
        let b = find_bursts(&bins, &BurstParams::default());
        assert_eq!(b.count, 2);
        assert!((b.list[0].duration_ms - 60.0).abs() < 1e-9);
    }

    #[test]
    fn ui_average_takes_the_highest_window() {
        let x = [iv(0, 10, 100.0), iv(10, 20, 300.0)];
        let u = ui_average(&x, 10, 20);
        assert_eq!(u.windows, 2);
        assert!((u.max_bytes_per_s - 300.0 * 1e8).abs() < 1.0);
    }
}
