//! Per-window publish statistics and `RUN/load.csv`.
//!
//! ## `load.csv`
//! One row per stats window (100 ms by default), appended and flushed as each window
//! closes, plus one last row for the final, partial window:
//!
//! ```text
//! t_ns,window_ns,published,acked,bytes_acked,errors,ack_lat_p50_us,ack_lat_p90_us,ack_lat_p99_us,ack_lat_p999_us,ack_lat_max_us
//! ```
//! - `t_ns`: the window's end on the run clock (ns since run zero, `CLOCK_MONOTONIC`),
//!   read when the window was closed. Strictly increasing.
//! - `window_ns`: the window's actual length (this `t_ns` minus the previous one, or
//!   minus the load's start for the first row). Rates are `count / window_ns`, never
//!   `count / nominal interval`.
//! - `published`, `acked`, `bytes_acked`, `errors`: counts within this window (not
//!   running totals), so a column's sum is the run's total. `published` counts publish
//!   attempts; an attempt ends as an ack or an error, possibly in a later window.
//! - `ack_lat_*_us`: latency of the acks received in this window, from just before the
//!   publish call to the ack's arrival, in microseconds with one decimal; empty when the
//!   window received no ack. Percentiles come from an HdrHistogram with 3 significant
//!   digits (values are exact to 0.1 %).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use anyhow::Context as _;
use hdrhistogram::Histogram;
use serde::Serialize;

/// The exact header of `load.csv`.
pub const LOAD_CSV_HEADER: &str = "t_ns,window_ns,published,acked,bytes_acked,errors,ack_lat_p50_us,ack_lat_p90_us,ack_lat_p99_us,ack_lat_p999_us,ack_lat_max_us";

/// Highest latency the histograms hold (1 hour, in ns); larger values are clamped.
const HIST_MAX_NS: u64 = 3_600_000_000_000;

/// A latency histogram in nanoseconds, 1 ns .. 1 h, 3 significant digits.
pub fn latency_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, HIST_MAX_NS, 3).expect("static histogram bounds are valid")
}

/// Latency figures in microseconds (`*_us` by the field that holds them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct LatencySummary {
    /// How many latencies were recorded.
    pub count: u64,
    pub min: f64,
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
    pub stddev: f64,
}

impl LatencySummary {
    /// Summarises a histogram of nanoseconds as microseconds (all zero when empty).
    pub fn from_ns_histogram(h: &Histogram<u64>) -> LatencySummary {
        if h.is_empty() {
            return LatencySummary::default();
        }
        let us = |ns: u64| ns as f64 / 1e3;
        LatencySummary {
            count: h.len(),
            min: us(h.min()),
            mean: h.mean() / 1e3,
            p50: us(h.value_at_quantile(0.5)),
            p90: us(h.value_at_quantile(0.9)),
            p99: us(h.value_at_quantile(0.99)),
            p999: us(h.value_at_quantile(0.999)),
            max: us(h.max()),
            stddev: h.stdev() / 1e3,
        }
    }
}

/// Counts of one stats window.
#[derive(Debug, Default, Clone, Copy)]
pub struct WindowCounts {
    pub published: u64,
    pub acked: u64,
    pub bytes_acked: u64,
    pub errors: u64,
}

/// Writes `load.csv`; every row is flushed as it is written (rows come at most every
/// stats window, so nothing waits in a buffer longer than that).
pub struct LoadCsv {
    w: BufWriter<File>,
    line: Vec<u8>,
}

impl LoadCsv {
    /// Creates (truncates) `path` and writes the header.
    pub fn create(path: &Path) -> anyhow::Result<LoadCsv> {
        let f = File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
        let mut w = BufWriter::new(f);
        writeln!(w, "{LOAD_CSV_HEADER}")
            .and_then(|_| w.flush())
            .with_context(|| format!("cannot write {}", path.display()))?;
        Ok(LoadCsv {
            w,
            line: Vec::with_capacity(160),
        })
    }

    /// Appends one row and flushes it.
    pub fn row(
        &mut self,
        t_ns: u64,
        window_ns: u64,
        c: &WindowCounts,
        lat_ns: &Histogram<u64>,
    ) -> std::io::Result<()> {
        self.line.clear();
        format_row(&mut self.line, t_ns, window_ns, c, lat_ns);
        self.w.write_all(&self.line)?;
        self.w.flush()
    }
}

/// Formats one row (with its newline) into `out`.
pub fn format_row(
    out: &mut Vec<u8>,
    t_ns: u64,
    window_ns: u64,
    c: &WindowCounts,
    lat_ns: &Histogram<u64>,
) {
    let mut b = itoa::Buffer::new();
    for (i, v) in [
        t_ns,
        window_ns,
        c.published,
        c.acked,
        c.bytes_acked,
        c.errors,
    ]
    .into_iter()
    .enumerate()
    {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b.format(v).as_bytes());
    }
    let empty = lat_ns.is_empty();
    for q in [Some(0.5), Some(0.9), Some(0.99), Some(0.999), None] {
        out.push(b',');
        if empty {
            continue;
        }
        let ns = match q {
            Some(q) => lat_ns.value_at_quantile(q),
            None => lat_ns.max(),
        };
        push_us_1dp(out, ns, &mut b);
    }
    out.push(b'\n');
}

/// Writes nanoseconds as microseconds with one decimal, rounded half up (1234567 -> 1234.6).
fn push_us_1dp(out: &mut Vec<u8>, ns: u64, b: &mut itoa::Buffer) {
    let tenths = ns.saturating_add(50) / 100;
    out.extend_from_slice(b.format(tenths / 10).as_bytes());
    out.push(b'.');
    out.push(b'0' + (tenths % 10) as u8);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_have_us_with_one_decimal_and_empty_latencies_without_acks() {
        let mut h = latency_histogram();
        let mut out = Vec::new();
        format_row(&mut out, 5, 100, &WindowCounts::default(), &h);
        assert_eq!(String::from_utf8_lossy(&out), "5,100,0,0,0,0,,,,,\n");
        h.record(1_234_567).unwrap();
        out.clear();
        let c = WindowCounts {
            published: 3,
            acked: 1,
            bytes_acked: 128,
            errors: 2,
        };
        format_row(&mut out, 7, 2, &c, &h);
        let s = String::from_utf8_lossy(&out).to_string();
        let f: Vec<&str> = s.trim_end().split(',').collect();
        assert_eq!(f.len(), LOAD_CSV_HEADER.split(',').count());
        assert_eq!(&f[..6], ["7", "2", "3", "1", "128", "2"]);
        // 3 significant digits: 1234567 ns is held as 1234-1235 us.
        let p50: f64 = f[6].parse().unwrap();
        assert!((1234.0..=1235.1).contains(&p50), "{s}");
        assert_eq!(f[6].split('.').nth(1).map(str::len), Some(1), "{s}");
    }

    #[test]
    fn rounding_to_tenths() {
        let mut b = itoa::Buffer::new();
        let mut out = Vec::new();
        for (ns, want) in [
            (0, "0.0"),
            (49, "0.0"),
            (50, "0.1"),
            (999, "1.0"),
            (12_345, "12.3"),
        ] {
            out.clear();
            push_us_1dp(&mut out, ns, &mut b);
            assert_eq!(String::from_utf8_lossy(&out), want, "{ns} ns");
        }
    }
}
