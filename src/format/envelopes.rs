//! `envelopes.csv.gz`: multi-resolution envelopes of the diskstats rows, written by the
//! recorder while it records (`recording::envelopes`, off the 1 ms sampler thread), so
//! a report or a zoom into hours of 1 ms data need not rescan the raw rows it does not
//! draw. Derived data: `diskstats.csv.gz` stays the source of truth, and every row here
//! equals what its raw rows give (tests/envelopes.rs checks that on a real device).
//!
//! Columns [`HEADER`]: `t_ns,window_ns,device,measure,min,max,mean,count`. One row per
//! window, device and measure that has at least one value in the window; windows of
//! [`LEVELS_NS`] (10 ms, 100 ms, 1 s, 10 s) on the grid of every windowed file (window
//! start, multiples of `window_ns` from the run's zero: `super::window_start`).
//!
//! The values ([`MEASURES`]) come from a device's consecutive diskstats rows `a`, `b`
//! (`dt` = `b.t_ns - a.t_ns`): the rates `read_mib_s`, `write_mib_s` (sectors x 512 B,
//! MiB/s), `read_iops`, `write_iops` (I/Os per s), `util_pct` (`io_ms` change over `dt`,
//! per cent) are values of the interval `(a, b]` and belong to the window holding its
//! end `b.t_ns`; `in_flight` (the gauge, I/Os) is a value of row `b` itself (also of
//! the device's first row). An interval whose counter went back (a reset) gives no value.
//! `min`, `max`: of the values in the window; `count`: how many; `mean`: for the rates
//! the change over the summed duration of those intervals (sum of changes / sum of dt,
//! the true average over the time they cover), for `in_flight` the mean of the values.
//! Since rows are written only when a counter changed (and at least once a second), an
//! idle stretch is one interval, not one per ms: `count` counts rows, not ms.
//!
//! Rows of a window are written when the device's first row past it arrives (and at the
//! end), so levels interleave and a 10 s window comes after its 10 ms ones. Gzip as a
//! series of whole members, like diskstats.csv.gz.

use std::io::Write;
use std::path::Path;

use super::csv::{for_each_line, t_ns_cell, Bad};

pub const FILE: &str = "envelopes.csv.gz";

pub const HEADER: &str = "t_ns,window_ns,device,measure,min,max,mean,count";

/// The window lengths, finest first.
pub const LEVELS_NS: [u64; 4] = [10_000_000, 100_000_000, 1_000_000_000, 10_000_000_000];

/// The measures, in the order rows of one window are written.
pub const MEASURES: [&str; 6] = [
    "read_mib_s",
    "write_mib_s",
    "read_iops",
    "write_iops",
    "in_flight",
    "util_pct",
];

/// Index of `in_flight` in [`MEASURES`] (the one gauge).
pub const M_IN_FLIGHT: usize = 4;

/// One row.
#[derive(Debug, Clone, PartialEq)]
pub struct EnvelopeRow {
    pub t_ns: u64,
    pub window_ns: u64,
    pub device: String,
    pub measure: String,
    pub min: f64,
    pub max: f64,
    pub mean: f64,
    pub count: u64,
}

/// Appends one row (floats in Rust's shortest form that reads back to the same value).
#[allow(clippy::too_many_arguments)]
pub fn put_row(
    buf: &mut Vec<u8>,
    t_ns: u64,
    window_ns: u64,
    device: &str,
    measure: &str,
    min: f64,
    max: f64,
    mean: f64,
    count: u64,
) {
    // Writing to a Vec cannot fail.
    let _ = writeln!(
        buf,
        "{t_ns},{window_ns},{device},{measure},{min},{max},{mean},{count}"
    );
}

/// Reads `envelopes.csv.gz` (or a plain `envelopes.csv`) with the reading's warnings; a
/// damaged row is skipped with a warning naming file:line. Another header: an error.
pub fn read(p: &Path) -> anyhow::Result<(Vec<EnvelopeRow>, Vec<String>)> {
    let mut rows = vec![];
    let warnings = for_each_line(p, |n, line| {
        if n == 1 {
            if line != HEADER {
                return Err(Bad::File(anyhow::anyhow!(
                    "{} line 1: not the envelopes header (want '{HEADER}'); the file is damaged or not diskpulse's",
                    p.display()
                )));
            }
            return Ok(());
        }
        let c: Vec<&str> = line.split(',').collect();
        if c.len() != 8 {
            return Err(Bad::Line(format!("{} cells, the header has 8", c.len())));
        }
        let num = |i: usize| {
            c[i].parse::<f64>()
                .map_err(|_| Bad::Line(format!("'{}' is not a number", c[i])))
        };
        let int = |i: usize| {
            c[i].parse::<u64>()
                .map_err(|_| Bad::Line(format!("'{}' is not a count", c[i])))
        };
        rows.push(EnvelopeRow {
            t_ns: t_ns_cell(c[0]).map_err(Bad::Line)?,
            window_ns: int(1)?,
            device: c[2].to_string(),
            measure: c[3].to_string(),
            min: num(4)?,
            max: num(5)?,
            mean: num(6)?,
            count: int(7)?,
        });
        Ok(())
    })?;
    Ok((rows, warnings))
}
