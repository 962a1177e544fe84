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
//! - Only finished, valid runs count ([`format::study::StudyRun::counts`]).
//! - The ratio is mean(B) / mean(A) over each side's repeats. Its noise is a **Welch 95%
//!   interval** of the ratio: log(mean B / mean A) +- t(0.975, Welch-Satterthwaite df) x
//!   its standard error (the delta method: s^2 / (n mean^2) a side), turned back into a
//!   ratio. The two sides are *distinguishable* when the interval excludes 1.0; with fewer
//!   than 2 repeats on a side there is no interval and the verdict says so. Not a
//!   percentile bootstrap: studies run 2-5 repeats, and a bootstrap of 3 values is far too
//!   narrow (repeats 19.0/21.0/19.7 against 20.5/25.0/22.9 ms, whose ranges overlap, gave
//!   1.04-1.26x, "distinguishable"); the t quantile carries the small-sample width a
//!   bootstrap cannot. See docs/decisions/0005-a-study-s-verdict-ratio-of-means-with.md.
//! - A figure that does not vary (every valid run within 2% of the others: a scenario's
//!   fixed input, such as msgs/s at a fixed rate) gets no verdict.
//!
//! Units: the figures' own (µs for `_us`, printed as µs, ms or s with 3 significant digits).

use serde::Serialize;

use format::study::{Figures, StudyRun};

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

/// One answer (study.json `verdicts[]`, a type of the format crate's).
pub use format::study::Verdict;

/// One question a study asks: what changing `param` from its first value `a` to each of
/// the others does, every other parameter held. Its answers, and a line for each
/// comparison that could not be made and why ("every run of raid 0 is invalid").
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Question {
    pub param: String,
    pub a: String,
    pub values: Vec<String>,
    /// "raid: 1 against 0", the question's heading on the page.
    pub heading: String,
    pub verdicts: Vec<Verdict>,
    pub unanswered: Vec<String>,
}

/// How a figure is printed: its values divided by `div`, then `unit` ("ms", "s",
/// "MiB/s", "x"; "" for a count or a rate whose title names it).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scale {
    pub div: f64,
    pub unit: &'static str,
}

/// The scale for figure `key` whose largest value is `max`: µs figures in ms, or in s
/// from 1 s (never raw µs); ms figures in s from 1 s.
pub fn scale(key: &str, max: f64) -> Scale {
    let s = |div, unit| Scale { div, unit };
    if key.ends_with("_us") {
        if max >= 1e6 {
            s(1e6, "s")
        } else {
            s(1e3, "ms")
        }
    } else if key.ends_with("_ms") {
        if max >= 1e3 {
            s(1e3, "s")
        } else {
            s(1.0, "ms")
        }
    } else if key.ends_with("_mib_s") || key == "mib_per_s" {
        s(1.0, "MiB/s")
    } else if key.ends_with("_per_s") {
        s(1.0, "")
    } else if key.ends_with("_mib") {
        s(1.0, "MiB")
    } else if key.ends_with("_pct") {
        s(1.0, "%")
    } else if key.ends_with("_s") {
        s(1.0, "s")
    } else if key.ends_with("ratio") || key.ends_with("factor") {
        s(1.0, "x")
    } else {
        s(1.0, "")
    }
}

impl Scale {
    /// The number alone, 3 significant digits ("22.8", "0.153", "1,530").
    pub fn number(&self, v: f64) -> String {
        sig3(v / self.div)
    }
    /// The number and its unit ("22.8 ms", "1.15x", "950").
    pub fn words(&self, v: f64) -> String {
        match self.unit {
            "" => self.number(v),
            "x" | "%" => format!("{}{}", self.number(v), self.unit),
            u => format!("{} {u}", self.number(v)),
        }
    }
    /// Two values in one unit ("22.8 vs 19.9 ms", "1.20x vs 1.05x").
    pub fn pair(&self, a: f64, b: f64) -> String {
        match self.unit {
            "" => format!("{} vs {}", self.number(a), self.number(b)),
            "x" | "%" => format!("{} vs {}", self.words(a), self.words(b)),
            u => format!("{} vs {} {u}", self.number(a), self.number(b)),
        }
    }
}

/// A figure's value in words with its unit: µs figures as ms or s, 3 significant digits.
pub fn value_words(key: &str, v: f64) -> String {
    scale(key, v.abs()).words(v)
}

/// Three significant digits, no exponent, thousands separated ("22.8", "0.153", "1,530").
pub fn sig3(v: f64) -> String {
    if !v.is_finite() {
        return format::units::NONE.into();
    }
    // Round to 3 significant digits first: 99.96 is "100", not "100.0".
    let v = if v == 0.0 {
        0.0
    } else {
        let f = 10f64.powi(2 - v.abs().log10().floor() as i32);
        (v * f).round() / f
    };
    let a = v.abs();
    let decimals = if a >= 100.0 || a == 0.0 {
        0
    } else {
        (2 - a.log10().floor() as i32).max(0) as usize
    };
    format::units::num(v, decimals)
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

/// Whether a figure's values (over valid runs, or over cells' means) differ: by more than
/// 2% when all are positive, by anything when one is zero or below (0 vs 5 failures). A
/// scenario's fixed input (msgs/s at a fixed rate) does not; a single value does not.
pub fn varies(values: &[f64]) -> bool {
    let (lo, hi) = values
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), v| {
            (l.min(*v), h.max(*v))
        });
    if values.len() < 2 || hi <= lo {
        return false;
    }
    if lo > 0.0 {
        hi / lo > 1.02
    } else {
        true
    }
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

/// The figures of [`ANSWER_FIGURES`] that vary across the valid runs, in that order.
pub fn varying_answer_figures(
    valid: &[(&StudyRun, &Figures)],
) -> Vec<(&'static str, &'static str)> {
    ANSWER_FIGURES
        .into_iter()
        .filter(|(key, _)| {
            varies(
                &valid
                    .iter()
                    .filter_map(|(_, x)| x.get(key))
                    .collect::<Vec<_>>(),
            )
        })
        .collect()
}

/// The verdict of one figure: `b` (values of side B) against `a`.
struct Sides<'a> {
    param: &'a str,
    a0: &'a str,
    b: &'a str,
    others: &'a [(String, String)],
    invalid: (usize, usize),
}

fn verdict(s: &Sides, key: &str, title: &str, a: &[f64], b: &[f64]) -> Option<Verdict> {
    let (mean_a, mean_b) = (mean(a), mean(b));
    if a.is_empty() || b.is_empty() || mean_a <= 0.0 {
        return None;
    }
    let ratio = mean_b / mean_a;
    let interval = ratio_interval(a, b);
    let distinguishable = interval.map(|(l, h)| l > 1.0 || h < 1.0);
    let held = if s.others.is_empty() {
        String::new()
    } else {
        let o: Vec<String> = s.others.iter().map(|(k, v)| format!("{k} {v}")).collect();
        format!(" at {}", o.join(", "))
    };
    let mut repeats = if a.len() == b.len() {
        format!(
            "{} repeat{} each",
            a.len(),
            if a.len() == 1 { "" } else { "s" }
        )
    } else {
        format!("{} and {} repeats", b.len(), a.len())
    };
    let left_out = s.invalid.0 + s.invalid.1;
    if left_out > 0 {
        repeats += &format!(", {left_out} invalid left out");
    }
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
    let sc = scale(key, mean_a.max(mean_b));
    let line = format!(
        "{p} {v}: {title} {r}x {p} {a0}{held} ({pair}, {repeats}; {noise})",
        p = s.param,
        v = s.b,
        a0 = s.a0,
        r = sig3(ratio),
        pair = sc.pair(mean_b, mean_a),
    );
    Some(Verdict {
        param: s.param.to_string(),
        a: s.a0.to_string(),
        b: s.b.to_string(),
        others: s.others.to_vec(),
        figure: key.to_string(),
        mean_a,
        mean_b,
        n_a: a.len(),
        n_b: b.len(),
        invalid_a: s.invalid.0,
        invalid_b: s.invalid.1,
        ratio,
        interval,
        distinguishable,
        line,
    })
}

/// The study's questions, one per matrix parameter with 2+ values (in the matrix's
/// order), each answered from the valid runs of `runs` (every finished run; invalid ones
/// are counted and left out), every other parameter held. `params` in the matrix's
/// order; each run's values in the order the matrix gave them (the runs' order).
pub fn questions(runs: &[(&StudyRun, &Figures)], params: &[String]) -> Vec<Question> {
    let valid: Vec<(&StudyRun, &Figures)> =
        runs.iter().filter(|(r, _)| r.counts()).copied().collect();
    let figures = varying_answer_figures(&valid);
    let mut out = vec![];
    for p in params {
        let mut values: Vec<String> = vec![];
        for (r, _) in runs {
            if !values.iter().any(|v| v == r.param(p)) {
                values.push(r.param(p).to_string());
            }
        }
        if values.len() < 2 {
            continue;
        }
        let others_of = |r: &StudyRun| -> Vec<(String, String)> {
            params
                .iter()
                .filter(|q| *q != p)
                .map(|q| (q.clone(), r.param(q).to_string()))
                .collect()
        };
        // The combinations of the other parameters, in the runs' order.
        let mut combos: Vec<Vec<(String, String)>> = vec![];
        for (r, _) in runs {
            let o = others_of(r);
            if !combos.contains(&o) {
                combos.push(o);
            }
        }
        let a0 = values[0].clone();
        let mut q = Question {
            param: p.clone(),
            a: a0.clone(),
            values: values.clone(),
            heading: format!("{p}: {} against {a0}", values[1..].join(", ")),
            verdicts: vec![],
            unanswered: vec![],
        };
        for others in &combos {
            let side_runs = |v: &str| -> Vec<&(&StudyRun, &Figures)> {
                runs.iter()
                    .filter(|(r, _)| r.param(p) == v && &others_of(r) == others)
                    .collect()
            };
            let held = if others.is_empty() {
                String::new()
            } else {
                let o: Vec<String> = others.iter().map(|(k, v)| format!("{k} {v}")).collect();
                format!(" at {}", o.join(", "))
            };
            let ra = side_runs(&a0);
            for v in &values[1..] {
                let rb = side_runs(v);
                let no_valid = |side: &[&(&StudyRun, &Figures)], val: &str| -> Option<String> {
                    if side.iter().any(|(r, _)| r.counts()) {
                        None
                    } else if side.is_empty() {
                        Some(format!("no run of {p} {val} finished"))
                    } else {
                        Some(format!(
                            "every run of {p} {val} is invalid (see Invalid runs)"
                        ))
                    }
                };
                let why: Vec<String> = [no_valid(&ra, &a0), no_valid(&rb, v)]
                    .into_iter()
                    .flatten()
                    .collect();
                if !why.is_empty() {
                    q.unanswered.push(format!(
                        "{p} {v} against {p} {a0}{held}: no answer: {}",
                        why.join("; ")
                    ));
                    continue;
                }
                let invalid = |side: &[&(&StudyRun, &Figures)]| {
                    side.iter().filter(|(r, _)| !r.counts()).count()
                };
                let sides = Sides {
                    param: p,
                    a0: &a0,
                    b: v,
                    others,
                    invalid: (invalid(&ra), invalid(&rb)),
                };
                let vals = |side: &[&(&StudyRun, &Figures)], key: &str| -> Vec<f64> {
                    side.iter()
                        .filter(|(r, _)| r.counts())
                        .filter_map(|(_, x)| x.get(key))
                        .collect()
                };
                for (key, title) in &figures {
                    if let Some(vd) = verdict(&sides, key, title, &vals(&ra, key), &vals(&rb, key))
                    {
                        q.verdicts.push(vd);
                    }
                }
            }
        }
        if q.verdicts.is_empty() && q.unanswered.is_empty() {
            q.unanswered.push(format!(
                "{p}: no answer: no figure compared (probe write/read p99, ack p99, fsync p99, msgs/s, obj/s, burst peak, the interference ratios) differs by more than 2% across the valid runs"
            ));
        }
        out.push(q);
    }
    out
}

/// Every verdict of every question, in the questions' order (study.json `verdicts`).
pub fn verdicts(runs: &[(&StudyRun, &Figures)], params: &[String]) -> Vec<Verdict> {
    questions(runs, params)
        .into_iter()
        .flat_map(|q| q.verdicts)
        .collect()
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
            r5.line.starts_with("raid 1: probe write p99 2.00x raid 0 at sync 5s (20.2 vs 10.1 ms, 3 repeats each; Welch 95% interval"),
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
            v[0].line
                .contains("(12.0 vs 10.0 ms, 1 repeat each; too few repeats"),
            "{}",
            v[0].line
        );
    }

    #[test]
    fn an_invalid_run_is_left_out_and_said_and_a_side_with_none_valid_has_no_answer() {
        let bad = |mut r: StudyRun| {
            r.invalid = Some("phase 1 probe fell behind its rate".into());
            r
        };
        let mut owned = vec![];
        for (sync, raid, p99, invalid) in [
            ("5s", "0", 10_000.0, false),
            ("5s", "0", 10_200.0, false),
            ("5s", "1", 20_000.0, false),
            ("5s", "1", 20_400.0, false),
            // 80 ms while behind its rate: would make the ratio 4.7x if it counted.
            ("5s", "1", 80_000.0, true),
            ("always", "0", 50_000.0, true),
            ("always", "1", 51_000.0, false),
        ] {
            let r = run(&[("sync", sync), ("raid", raid)]);
            owned.push((if invalid { bad(r) } else { r }, fig(p99)));
        }
        let runs: Vec<(&StudyRun, &Figures)> = owned.iter().map(|(r, x)| (r, x)).collect();
        let q = questions(&runs, &["sync".into(), "raid".into()]);
        let raid = q.iter().find(|q| q.param == "raid").unwrap();
        assert_eq!(raid.heading, "raid: 1 against 0");
        assert_eq!(raid.verdicts.len(), 1, "{raid:?}");
        let v = &raid.verdicts[0];
        assert!((v.ratio - 2.0).abs() < 0.01, "{v:?}");
        assert_eq!((v.n_a, v.n_b, v.invalid_b), (2, 2, 1));
        assert!(
            v.line
                .contains("(20.2 vs 10.1 ms, 2 repeats each, 1 invalid left out;"),
            "{}",
            v.line
        );
        assert_eq!(
            raid.unanswered,
            vec!["raid 1 against raid 0 at sync always: no answer: every run of raid 0 is invalid (see Invalid runs)".to_string()]
        );
    }

    #[test]
    fn values_read_in_ms_and_s_with_three_significant_digits() {
        assert_eq!(value_words("ack_p99_us", 4_311_745.0), "4.31 s");
        assert_eq!(value_words("ack_p99_us", 22_800.0), "22.8 ms");
        assert_eq!(value_words("ack_p99_us", 153.4), "0.153 ms");
        assert_eq!(value_words("ack_p99_us", 99_960.0), "100 ms");
        assert_eq!(value_words("msgs_per_s", 1534.0), "1,530");
        assert_eq!(
            scale("ack_p99_us", 2e6).pair(2_340_000.0, 512_000.0),
            "2.34 vs 0.512 s"
        );
        assert_eq!(value_words("probe_write_p99_burst_ratio", 1.153), "1.15x");
    }
}
