//! Axis ticks and their labels.
//!
//! Value axes get 3 to 5 ticks on a 1-2-5 step that cover the data (the axis is
//! widened to the ticks), labelled compactly (`1.2k`, `3.4M`). The time axis gets
//! ticks on steps a person counts in (1, 2, 5, 10, 15, 30 s, 1, 2, 5, 10, 15, 30 min,
//! hours), inside the shared range, labelled in seconds below a minute's step and
//! as `m:ss` (or `h:mm:ss`) from there on.

/// Ticks of a value axis: the axis runs from `lo` to `hi`, both multiples of `step`,
/// and `values` are the ticks from `lo` to `hi` inclusive.
#[derive(Debug, Clone, PartialEq)]
pub struct Ticks {
    pub lo: f64,
    pub hi: f64,
    pub step: f64,
    pub values: Vec<f64>,
}

/// The 1-2-5 step sequence, from `start`'s decade upwards.
fn one_two_five(start_exp: i32) -> impl Iterator<Item = f64> {
    (start_exp..).flat_map(|e| [1.0, 2.0, 5.0].map(|m| m * 10f64.powi(e)))
}

/// 3 to 5 nice ticks (1-2-5 steps) whose range covers `[lo, hi]`.
///
/// Non-finite bounds fall back to `[0, 1]`; swapped bounds are swapped back; an
/// empty range (`lo == hi`) is widened around its value.
pub fn nice_ticks(lo: f64, hi: f64) -> Ticks {
    let (mut lo, mut hi) = if lo.is_finite() && hi.is_finite() {
        (lo.min(hi), lo.max(hi))
    } else {
        (0.0, 1.0)
    };
    if hi == lo {
        if lo == 0.0 {
            hi = 1.0;
        } else if lo > 0.0 {
            lo = 0.0;
        } else {
            hi = 0.0;
        }
    }
    let span = hi - lo;
    // Start two decades below the span; each 1-2-5 step grows by at most 2.5x, so the
    // first step giving at most 4 intervals gives at least 2 (3 to 5 ticks).
    let start_exp = span.log10().floor() as i32 - 2;
    let eps = 1e-9;
    for step in one_two_five(start_exp) {
        let i0 = (lo / step + eps).floor();
        let i1 = (hi / step - eps).ceil();
        if i1 - i0 <= 4.0 {
            let (i0, i1) = (i0 as i64, i1 as i64);
            let values = (i0..=i1).map(|i| clean(i as f64 * step, step)).collect();
            return Ticks {
                lo: clean(i0 as f64 * step, step),
                hi: clean(i1 as f64 * step, step),
                step,
                values,
            };
        }
    }
    unreachable!("the 1-2-5 sequence grows without bound")
}

/// Ticks of a logarithmic axis: powers of ten from `floor`'s decade (rounded down) to
/// the first at or above `hi`, every decade while there are at most 6, else every second
/// or more. `step` is left NaN: a log axis labels each tick by itself.
pub(crate) fn log_ticks(floor: f64, hi: f64) -> Ticks {
    let floor = if floor.is_finite() && floor > 0.0 {
        floor
    } else {
        1.0
    };
    let e0 = floor.log10().floor() as i32;
    let top = if hi.is_finite() { hi } else { 0.0 };
    let e1 = (top.max(floor).log10().ceil() as i32).max(e0 + 1);
    let every = ((e1 - e0) as usize).div_ceil(5).max(1) as i32;
    let values = (e0..=e1)
        .filter(|e| (e - e0) % every == 0 || *e == e1)
        .map(|e| 10f64.powi(e))
        .collect();
    Ticks {
        lo: 10f64.powi(e0),
        hi: 10f64.powi(e1),
        step: f64::NAN,
        values,
    }
}

/// Rounds away float noise such as 0.30000000000000004 (to a 1000th of the step).
fn clean(v: f64, step: f64) -> f64 {
    let q = step / 1000.0;
    let r = (v / q).round() * q;
    if r == 0.0 {
        0.0 // no "-0"
    } else {
        r
    }
}

/// Formats a tick value compactly: `950`, `1.2k`, `3.4M`, `2G`, `0.25`, `-1.5k`.
///
/// `step` is the distance between neighbouring ticks; it decides how many decimals
/// are needed to tell them apart. Trailing zeros are dropped.
pub fn format_compact(v: f64, step: f64) -> String {
    if !v.is_finite() {
        return String::new();
    }
    if v == 0.0 {
        return "0".to_string();
    }
    const SUFFIXES: [(f64, &str); 5] =
        [(1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")];
    let a = v.abs();
    let (scale, suffix) = SUFFIXES
        .iter()
        .copied()
        // 999.5 rounds to "1k", not "1000"
        .find(|(s, _)| a >= *s * 0.9995)
        .unwrap_or((1.0, ""));
    let step = if step.is_finite() && step > 0.0 {
        step
    } else {
        a / 10.0
    };
    let decimals = (-(step / scale).log10()).ceil().clamp(0.0, 6.0) as usize;
    let mut s = format!("{:.*}", decimals, v / scale);
    if s.contains('.') {
        while s.ends_with('0') {
            s.pop();
        }
        if s.ends_with('.') {
            s.pop();
        }
    }
    if s == "-0" {
        s = "0".to_string();
    }
    s.push_str(suffix);
    s
}

/// Tick steps for the time axis, in seconds.
fn time_steps() -> impl Iterator<Item = f64> {
    const HUMAN: [f64; 16] = [
        1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 900.0, 1800.0, 3600.0, 7200.0,
        10800.0, 21600.0,
    ];
    let sub_second = one_two_five(-3).take_while(|s| *s < 0.99);
    let days = one_two_five(0).map(|d| d * 43200.0);
    sub_second.chain(HUMAN).chain(days)
}

/// Ticks for the time axis: multiples of a human step inside `[t0, t1]`, at most
/// `max_ticks` of them (at least 2 is used). Returns the step and the ticks.
pub(crate) fn time_ticks(t0: f64, t1: f64, max_ticks: usize) -> (f64, Vec<f64>) {
    if !(t0.is_finite() && t1.is_finite() && t1 > t0) {
        return (1.0, Vec::new());
    }
    let max_ticks = max_ticks.max(2) as f64;
    for step in time_steps() {
        let i0 = (t0 / step - 1e-9).ceil();
        let i1 = (t1 / step + 1e-9).floor();
        if i1 - i0 + 1.0 <= max_ticks {
            let ticks = (i0 as i64..=i1 as i64)
                .map(|i| clean(i as f64 * step, step))
                .collect();
            return (step, ticks);
        }
    }
    unreachable!("time steps grow without bound")
}

/// Labels a time tick (seconds since run start) given the tick step: plain seconds
/// for steps under a minute (`0.25`, `15`, `90`), else `m:ss`, or `h:mm:ss` once the
/// range passes an hour.
pub(crate) fn format_time_s(t: f64, step: f64) -> String {
    if !t.is_finite() {
        return String::new();
    }
    if step < 60.0 {
        let decimals = if step >= 1.0 {
            0
        } else {
            (-step.log10()).ceil().clamp(0.0, 3.0) as usize
        };
        let s = format!("{:.*}", decimals, t);
        return if s.trim_start_matches(['-', '0', '.']).is_empty() {
            "0".to_string()
        } else {
            s
        };
    }
    let sign = if t < 0.0 { "-" } else { "" };
    let total = t.abs().round() as u64;
    let (h, m, s) = (total / 3600, (total / 60) % 60, total % 60);
    if h > 0 {
        format!("{sign}{h}:{m:02}:{s:02}")
    } else {
        format!("{sign}{m}:{s:02}")
    }
}

/// The time axis's title for a given tick step (the unit its labels are in).
pub(crate) fn time_axis_title(step: f64, t1: f64) -> &'static str {
    if step < 60.0 {
        "time since run start (s)"
    } else if t1 >= 3600.0 {
        "time since run start (h:mm:ss)"
    } else {
        "time since run start (m:ss)"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_one_two_five(step: f64) -> bool {
        let m = step / 10f64.powf(step.log10().floor());
        [1.0, 2.0, 5.0, 10.0].iter().any(|x| (m - x).abs() < 1e-9)
    }

    #[test]
    fn nice_ticks_are_3_to_5_one_two_five_steps_covering_the_range() {
        // A deterministic spread of ranges: tiny, huge, negative, straddling zero.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 11) as f64 / (1u64 << 53) as f64
        };
        for _ in 0..20_000 {
            let mag = 10f64.powf(next() * 24.0 - 9.0);
            let a = (next() - 0.3) * mag;
            let b = a + next() * mag + mag * 1e-6;
            let t = nice_ticks(a, b);
            assert!(
                (3..=5).contains(&t.values.len()),
                "{a}..{b}: {} ticks {:?}",
                t.values.len(),
                t.values
            );
            assert!(is_one_two_five(t.step), "{a}..{b}: step {}", t.step);
            let slack = t.step * 1e-6;
            assert!(t.lo <= a + slack && t.hi >= b - slack, "{a}..{b}: {t:?}");
            assert_eq!(t.values[0], t.lo);
            assert_eq!(*t.values.last().unwrap(), t.hi);
            for w in t.values.windows(2) {
                assert!((w[1] - w[0] - t.step).abs() <= t.step * 1e-6);
            }
        }
    }

    #[test]
    fn nice_ticks_known_cases() {
        assert_eq!(nice_ticks(0.0, 1.0).values, vec![0.0, 0.5, 1.0]);
        assert_eq!(
            nice_ticks(0.0, 1024.0).values,
            vec![0.0, 500.0, 1000.0, 1500.0]
        );
        assert_eq!(nice_ticks(0.0, 7.3).values, vec![0.0, 2.0, 4.0, 6.0, 8.0]);
        assert_eq!(
            nice_ticks(-3.0, 3.0).values,
            vec![-4.0, -2.0, 0.0, 2.0, 4.0]
        );
        assert_eq!(nice_ticks(0.0, 0.3).values, vec![0.0, 0.1, 0.2, 0.3]);
        // Degenerate and broken ranges still give an axis.
        assert_eq!(nice_ticks(0.0, 0.0).values, vec![0.0, 0.5, 1.0]);
        assert_eq!(nice_ticks(5.0, 5.0).values, vec![0.0, 2.0, 4.0, 6.0]);
        assert_eq!(nice_ticks(f64::NAN, 3.0).values, vec![0.0, 0.5, 1.0]);
        assert_eq!(nice_ticks(10.0, 0.0).values, nice_ticks(0.0, 10.0).values);
    }

    #[test]
    fn compact_labels() {
        assert_eq!(format_compact(0.0, 200.0), "0");
        assert_eq!(format_compact(400.0, 200.0), "400");
        assert_eq!(format_compact(1000.0, 200.0), "1k");
        assert_eq!(format_compact(1200.0, 200.0), "1.2k");
        assert_eq!(format_compact(3.4e6, 2e5), "3.4M");
        assert_eq!(format_compact(2e9, 5e8), "2G");
        assert_eq!(format_compact(2.5e9, 5e8), "2.5G");
        assert_eq!(format_compact(1.5e12, 5e11), "1.5T");
        assert_eq!(format_compact(0.25, 0.05), "0.25");
        assert_eq!(format_compact(0.3, 0.1), "0.3");
        assert_eq!(format_compact(-1500.0, 500.0), "-1.5k");
        assert_eq!(format_compact(15000.0, 5000.0), "15k");
        assert_eq!(format_compact(0.002, 0.001), "0.002");
    }

    #[test]
    fn every_tick_label_is_distinct() {
        for (a, b) in [(0.0, 1234.0), (0.0, 0.07), (990.0, 1010.0), (0.0, 3.3e9)] {
            let t = nice_ticks(a, b);
            let labels: Vec<String> = t
                .values
                .iter()
                .map(|v| format_compact(*v, t.step))
                .collect();
            let mut dedup = labels.clone();
            dedup.dedup();
            assert_eq!(labels, dedup, "{a}..{b}");
        }
    }

    #[test]
    fn time_ticks_use_human_steps_inside_the_range() {
        let (step, ticks) = time_ticks(0.0, 600.0, 16);
        assert_eq!(step, 60.0);
        assert_eq!(ticks.len(), 11);
        assert_eq!((ticks[0], ticks[10]), (0.0, 600.0));

        let (step, ticks) = time_ticks(12.3, 47.0, 10);
        assert_eq!(step, 5.0);
        assert_eq!(ticks.first(), Some(&15.0));
        assert_eq!(ticks.last(), Some(&45.0));

        let (step, ticks) = time_ticks(0.0, 0.8, 10);
        assert_eq!(step, 0.1);
        assert_eq!(ticks.len(), 9);

        for (t0, t1, max) in [(0.0, 1.0, 5), (3.0, 7200.0, 12), (0.0, 2e6, 8)] {
            let (_, ticks) = time_ticks(t0, t1, max);
            assert!(!ticks.is_empty() && ticks.len() <= max, "{t0}..{t1}");
            assert!(ticks.iter().all(|t| *t >= t0 && *t <= t1));
        }
        assert!(time_ticks(5.0, 5.0, 10).1.is_empty());
    }

    #[test]
    fn time_labels() {
        assert_eq!(format_time_s(0.0, 60.0), "0:00");
        assert_eq!(format_time_s(90.0, 30.0), "90");
        assert_eq!(format_time_s(540.0, 60.0), "9:00");
        assert_eq!(format_time_s(3900.0, 300.0), "1:05:00");
        assert_eq!(format_time_s(0.25, 0.05), "0.25");
        assert_eq!(format_time_s(0.0, 0.05), "0");
        assert_eq!(format_time_s(15.0, 5.0), "15");
    }
}
