//! The study's answers: what changing one matrix parameter did to the figures a user
//! compares (latency p99s, throughputs, interference ratios), as a ratio with a statement
//! of its noise over the repeats. Written at the top of study.md (and so report.html) and
//! into study.json's `verdicts`.
//!
//! The rule:
//! - For a parameter with values `v0, v1, ...` (the matrix's order), each later value is
//!   compared with the first, **with every other parameter held at one value**: one
//!   verdict per combination of the others, never an average over another varied
//!   parameter ("raid 1 vs 0 at sync 5s", "raid 1 vs 0 at sync always").
//! - Only finished, valid runs count ([`crate::format::study::StudyRun::counts`]).
//! - The ratio is mean(B) / mean(A) over each side's repeats. Its noise is a **Welch 95%
//!   interval** of the ratio: log(mean B / mean A) +- t(0.975, Welch-Satterthwaite df) x
//!   its standard error (the delta method: s^2 / (n mean^2) a side), turned back into a
//!   ratio. The two sides are *distinguishable* when the interval excludes 1.0; with fewer
//!   than 2 repeats on a side there is no interval and the verdict says so. Not a
//!   percentile bootstrap: studies run 2-5 repeats, and a bootstrap of 3 values is far too
//!   narrow (repeats 19.0/21.0/19.7 against 20.5/25.0/22.9 ms, whose ranges overlap, gave
//!   1.04-1.26x, "distinguishable"); the t quantile carries the small-sample width a
//!   bootstrap cannot. See docs/ARCHITECTURE.md.
//! - A figure that does not vary (every valid run within 2% of the others: a scenario's
//!   fixed input, such as msgs/s at a fixed rate) gets no verdict.
//!
//! Units: the figures' own (µs for `_us`, printed as µs, ms or s with 3 significant digits).

use serde::Serialize;

use crate::format::study::{Figures, StudyRun};

/// The figures a verdict is given for, in the order a study's questions usually go:
/// latency first, then throughput, then the interference ratios.
pub const ANSWER_FIGURES: [(&str, &str); 10] = [
    ("probe_write_lat_p99_us", "probe write p99"),
    ("probe_read_lat_p99_us", "probe read p99"),
    ("ack_p99_us", "ack p99"),
    ("fsync_p99_us", "fsync p99"),
    ("msgs_per_s", "msgs/s"),
    ("put_obj_per_s", "put obj/s"),
    ("get_obj_per_s", "get obj/s"),
    ("burst_peak_mib_s", "write burst peak (10 ms)"),
    (
        "probe_write_p99_burst_ratio",
        "probe write p99 inside/outside bursts",
    ),
    ("ack_p99_reread_ratio", "ack p99 during/before re-read"),
];

/// The interval's name on the page.
pub const INTERVAL_NAME: &str = "Welch 95% interval";

/// One answer: `param = b` against `param = a` with `others` held, for one figure.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Verdict {
    pub param: String,
    pub a: String,
    pub b: String,
    /// The other parameters and the value each was held at.
    pub others: Vec<(String, String)>,
    pub figure: String,
    pub mean_a: f64,
    pub mean_b: f64,
    pub n_a: usize,
    pub n_b: usize,
    /// mean_b / mean_a.
    pub ratio: f64,
    /// The bootstrap 95% interval of the ratio (None with fewer than 2 repeats a side).
    pub interval: Option<(f64, f64)>,
    /// The interval excludes 1.0 (None without an interval).
    pub distinguishable: Option<bool>,
    /// The sentence on the page.
    pub line: String,
}

/// A figure's value in words with its unit: µs figures as µs, ms or s, 3 significant digits.
pub fn value_words(key: &str, v: f64) -> String {
    if key.ends_with("_us") {
        if v >= 1e6 {
            format!("{} s", sig3(v / 1e6))
        } else if v >= 1e3 {
            format!("{} ms", sig3(v / 1e3))
        } else {
            format!("{} µs", sig3(v))
        }
    } else if key.ends_with("_mib_s") {
        format!("{} MiB/s", sig3(v))
    } else if key.ends_with("_ratio") {
        format!("{}x", sig3(v))
    } else {
        sig3(v)
    }
}

/// Three significant digits, no exponent ("22.8", "0.153", "1530").
fn sig3(v: f64) -> String {
    if !v.is_finite() {
        return "-".into();
    }
    let a = v.abs();
    let decimals = if a >= 100.0 || a == 0.0 {
        0
    } else {
        (2 - a.log10().floor() as i32).max(0) as usize
    };
    crate::units::num(v, decimals)
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

/// t's 0.975 quantile for `df` degrees of freedom (a table, linear in 1/df between rows).
fn t975(df: f64) -> f64 {
    const T: [(f64, f64); 16] = [
        (1.0, 12.706),
        (2.0, 4.303),
        (3.0, 3.182),
        (4.0, 2.776),
        (5.0, 2.571),
        (6.0, 2.447),
        (7.0, 2.365),
        (8.0, 2.306),
        (9.0, 2.262),
        (10.0, 2.228),
        (12.0, 2.179),
        (15.0, 2.131),
        (20.0, 2.086),
        (30.0, 2.042),
        (60.0, 2.000),
        (f64::INFINITY, 1.960),
    ];
    let df = df.max(1.0);
    for w in T.windows(2) {
        let ((d0, t0), (d1, t1)) = (w[0], w[1]);
        if df <= d1 {
            let (x0, x1, x) = (1.0 / d0, 1.0 / d1, 1.0 / df);
            return t0 + (t1 - t0) * (x0 - x) / (x0 - x1);
        }
    }
    1.960
}

/// The Welch 95% interval of mean(b) / mean(a) (see the module); None with fewer than 2
/// values on either side or a mean that is not positive.
pub fn ratio_interval(a: &[f64], b: &[f64]) -> Option<(f64, f64)> {
    if a.len() < 2 || b.len() < 2 {
        return None;
    }
    let (ma, mb) = (mean(a), mean(b));
    if ma <= 0.0 || mb <= 0.0 {
        return None;
    }
    // Each side's variance of log(mean), by the delta method.
    let var_log = |v: &[f64], m: f64| {
        let s2 = v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (v.len() - 1) as f64;
        s2 / (v.len() as f64 * m * m)
    };
    let (va, vb) = (var_log(a, ma), var_log(b, mb));
    let r = mb / ma;
    if va + vb == 0.0 {
        return Some((r, r));
    }
    let df = (va + vb).powi(2) / (va * va / (a.len() - 1) as f64 + vb * vb / (b.len() - 1) as f64);
    let half = t975(df) * (va + vb).sqrt();
    Some(((r.ln() - half).exp(), (r.ln() + half).exp()))
}

/// Every verdict of a study's valid runs; `params` in the matrix's order, each run's
/// parameter values in the order the matrix gave them (the runs' order).
pub fn verdicts(runs: &[(&StudyRun, &Figures)], params: &[String]) -> Vec<Verdict> {
    let mut out = vec![];
    for (key, title) in ANSWER_FIGURES {
        let all: Vec<f64> = runs.iter().filter_map(|(_, x)| x.get(key)).collect();
        let (lo, hi) = all
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), v| {
                (l.min(*v), h.max(*v))
            });
        if all.len() < 2 || !(lo > 0.0 && hi / lo > 1.02) {
            continue;
        }
        for p in params {
            let mut values: Vec<&str> = vec![];
            for (r, _) in runs {
                if !values.contains(&r.param(p)) {
                    values.push(r.param(p));
                }
            }
            if values.len() < 2 {
                continue;
            }
            // The combinations of the other parameters, in the runs' order.
            let others_of = |r: &StudyRun| -> Vec<(String, String)> {
                params
                    .iter()
                    .filter(|q| *q != p)
                    .map(|q| (q.clone(), r.param(q).to_string()))
                    .collect()
            };
            let mut combos: Vec<Vec<(String, String)>> = vec![];
            for (r, _) in runs {
                let o = others_of(r);
                if !combos.contains(&o) {
                    combos.push(o);
                }
            }
            for others in &combos {
                let side = |v: &str| -> Vec<f64> {
                    runs.iter()
                        .filter(|(r, _)| r.param(p) == v && &others_of(r) == others)
                        .filter_map(|(_, x)| x.get(key))
                        .collect()
                };
                let a = side(values[0]);
                if a.is_empty() {
                    continue;
                }
                for v in &values[1..] {
                    let b = side(v);
                    if b.is_empty() {
                        continue;
                    }
                    let (mean_a, mean_b) = (mean(&a), mean(&b));
                    if mean_a <= 0.0 {
                        continue;
                    }
                    let ratio = mean_b / mean_a;
                    let interval = ratio_interval(&a, &b);
                    let distinguishable = interval.map(|(l, h)| l > 1.0 || h < 1.0);
                    let held = if others.is_empty() {
                        String::new()
                    } else {
                        let o: Vec<String> =
                            others.iter().map(|(k, v)| format!("{k} {v}")).collect();
                        format!(" at {}", o.join(", "))
                    };
                    let repeats = if a.len() == b.len() {
                        format!("{} repeats each", a.len())
                    } else {
                        format!("{} and {} repeats", b.len(), a.len())
                    };
                    let noise = match interval {
                        Some((l, h)) => format!(
                            "{INTERVAL_NAME} {}-{}x: {}",
                            sig3(l),
                            sig3(h),
                            if distinguishable == Some(true) {
                                "distinguishable"
                            } else {
                                "not distinguishable"
                            }
                        ),
                        None => "too few repeats for a statement of noise".into(),
                    };
                    let line = format!(
                        "{p} {v} vs {p} {a0}{held}: {title} {r}x ({vb} vs {va}, {repeats}; {noise})",
                        a0 = values[0],
                        r = sig3(ratio),
                        vb = value_words(key, mean_b),
                        va = value_words(key, mean_a),
                    );
                    out.push(Verdict {
                        param: p.clone(),
                        a: values[0].to_string(),
                        b: v.to_string(),
                        others: others.clone(),
                        figure: key.to_string(),
                        mean_a,
                        mean_b,
                        n_a: a.len(),
                        n_b: b.len(),
                        ratio,
                        interval,
                        distinguishable,
                        line,
                    });
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(params: &[(&str, &str)]) -> StudyRun {
        StudyRun {
            params: params
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            status: "ok".into(),
            ..Default::default()
        }
    }

    fn fig(p99_us: f64) -> Figures {
        Figures {
            probe_write_lat_p99_us: Some(p99_us),
            msgs_per_s: Some(1000.0),
            ..Default::default()
        }
    }

    #[test]
    fn overlapping_repeats_are_not_distinguishable_and_separate_ones_are() {
        // raid 1 ~1.15x raid 0 with repeats that overlap.
        let i = ratio_interval(
            &[19_000.0, 21_000.0, 19_700.0],
            &[20_500.0, 25_000.0, 22_900.0],
        )
        .unwrap();
        assert!(i.0 < 1.0 && i.1 > 1.0, "{i:?}");
        assert!(i.0 > 0.8 && i.1 < 1.6, "{i:?}");
        // Tight and apart: 2x.
        let i = ratio_interval(&[10.0, 10.2, 9.9], &[20.0, 20.1, 19.8]).unwrap();
        assert!(i.0 > 1.9 && i.1 < 2.1, "{i:?}");
        assert_eq!(ratio_interval(&[10.0], &[20.0, 21.0]), None);
        // The table: 3 df is 3.182, and it falls towards 1.96.
        assert!((t975(3.0) - 3.182).abs() < 1e-9);
        assert!(t975(11.0) < t975(10.0) && t975(11.0) > t975(12.0));
    }

    #[test]
    fn a_verdict_holds_the_other_parameter_and_skips_a_fixed_input() {
        let mut owned = vec![];
        for (raid, sync, p99s) in [
            ("0", "5s", [10_000.0, 10_500.0, 9_800.0]),
            ("1", "5s", [20_000.0, 21_000.0, 19_500.0]),
            ("0", "always", [50_000.0, 52_000.0, 49_000.0]),
            ("1", "always", [51_000.0, 50_000.0, 53_000.0]),
        ] {
            for p in p99s {
                owned.push((run(&[("raid", raid), ("sync", sync)]), fig(p)));
            }
        }
        let runs: Vec<(&StudyRun, &Figures)> = owned.iter().map(|(r, x)| (r, x)).collect();
        let v = verdicts(&runs, &["raid".into(), "sync".into()]);
        // msgs/s is the same in every run: no verdict for it.
        assert!(
            v.iter().all(|v| v.figure == "probe_write_lat_p99_us"),
            "{v:?}"
        );
        let at = |param: &str, held: &str| {
            v.iter()
                .find(|v| v.param == param && v.others[0].1 == held)
                .unwrap_or_else(|| panic!("{param} at {held}: {v:?}"))
        };
        let r5 = at("raid", "5s");
        assert!((r5.ratio - 2.0).abs() < 0.05, "{r5:?}");
        assert_eq!(r5.distinguishable, Some(true));
        assert!(
            r5.line.starts_with("raid 1 vs raid 0 at sync 5s: probe write p99 2.00x (20.2 ms vs 10.1 ms, 3 repeats each; Welch 95% interval"),
            "{}",
            r5.line
        );
        assert!(r5.line.ends_with(": distinguishable)"), "{}", r5.line);
        let ra = at("raid", "always");
        assert_eq!(ra.distinguishable, Some(false), "{ra:?}");
        assert!(ra.line.ends_with(": not distinguishable)"), "{}", ra.line);
        // Never an average over sync: 4 raid verdicts would be 2 with 2 combos, not 1.
        assert_eq!(v.iter().filter(|v| v.param == "raid").count(), 2);
        assert_eq!(v.iter().filter(|v| v.param == "sync").count(), 2);
    }

    #[test]
    fn one_repeat_a_side_says_there_is_no_statement_of_noise() {
        let owned = [
            (run(&[("raid", "0")]), fig(10_000.0)),
            (run(&[("raid", "1")]), fig(12_000.0)),
        ];
        let runs: Vec<(&StudyRun, &Figures)> = owned.iter().map(|(r, x)| (r, x)).collect();
        let v = verdicts(&runs, &["raid".into()]);
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].distinguishable, None);
        assert!(
            v[0].line.contains("1 repeats each; too few repeats"),
            "{}",
            v[0].line
        );
    }

    #[test]
    fn values_read_in_ms_and_s_with_three_significant_digits() {
        assert_eq!(value_words("ack_p99_us", 4_311_745.0), "4.31 s");
        assert_eq!(value_words("ack_p99_us", 22_800.0), "22.8 ms");
        assert_eq!(value_words("ack_p99_us", 153.4), "153 µs");
        assert_eq!(value_words("probe_write_p99_burst_ratio", 1.153), "1.15x");
    }
}
