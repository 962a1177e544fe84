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

use super::csv::{for_each_line_until, t_ns_cell, Bad, Flow};

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

/// Which rows [`for_each`] hands over: one level (`window_ns`, one of [`LEVELS_NS`]; 0:
/// every level), windows overlapping `[t0_ns, t1_ns)`, optionally one device, and the
/// measures whose bit (`1 << index in [`MEASURES`]`) is set in `measures`.
#[derive(Debug, Clone)]
pub struct Query {
    pub window_ns: u64,
    pub t0_ns: u64,
    pub t1_ns: u64,
    pub device: Option<String>,
    pub measures: u32,
}

impl Query {
    /// Every row of the file.
    pub fn all() -> Query {
        Query {
            window_ns: 0,
            t0_ns: 0,
            t1_ns: u64::MAX,
            device: None,
            measures: u32::MAX,
        }
    }
}

/// One row as [`for_each`] hands it over (borrowed: nothing allocated per row).
#[derive(Debug, Clone, Copy)]
pub struct RowRef<'a> {
    pub t_ns: u64,
    pub window_ns: u64,
    pub device: &'a str,
    /// Index in [`MEASURES`].
    pub measure: usize,
    pub min: f64,
    pub max: f64,
    pub mean: f64,
    pub count: u64,
}

/// How long after its window's end a window's row can come: rows are written when the
/// device's first row past the window arrives, and every device has a row at least once
/// a second; 2 s more for rows of devices handed over in one batch.
const LATE_NS: u64 = 3_000_000_000;

/// Streams the rows `q` asks for, one at a time (the file is never held): a reader of
/// one level of a time span reads what it needs and stops once every later row must lie
/// past the span (windows are written in time order, each within [`LATE_NS`] after its
/// end). Checks as [`read`]; a measure not in [`MEASURES`] is a damaged row.
///
/// `p` a run's `envelopes.csv.gz` of a chunked recording (`record --chunk`): its closed
/// chunks `chunks/envelopes.NNNNNN.csv.gz` are read first, in order, then `p`: the rows
/// as the writer wrote them, one stream.
pub fn for_each(p: &Path, q: &Query, mut f: impl FnMut(RowRef<'_>)) -> anyhow::Result<Vec<String>> {
    // A row whose window ends past this was written after every row q wants.
    let stop_ns = q
        .t1_ns
        .saturating_add(q.window_ns.max(LEVELS_NS[LEVELS_NS.len() - 1]))
        .saturating_add(LATE_NS);
    let files = match (p.file_name(), p.parent()) {
        (Some(n), Some(dir)) if n == FILE => super::csv::chunked_files(dir, FILE),
        _ => vec![],
    };
    let files = if files.is_empty() {
        vec![p.to_path_buf()]
    } else {
        files
    };
    let mut warnings = vec![];
    let mut stopped = false;
    for file in &files {
        warnings.extend(for_each_in(file, q, stop_ns, &mut stopped, &mut f)?);
        if stopped {
            break;
        }
    }
    Ok(warnings)
}

/// [`for_each`] over one file; `stopped` set when a row lies past what `q` wants.
fn for_each_in(
    p: &Path,
    q: &Query,
    stop_ns: u64,
    stopped: &mut bool,
    mut f: impl FnMut(RowRef<'_>),
) -> anyhow::Result<Vec<String>> {
    for_each_line_until(p, |n, line| {
        if n == 1 {
            if line != HEADER {
                return Err(Bad::File(anyhow::anyhow!(
                    "{} line 1: not the envelopes header (want '{HEADER}'); the file is damaged or not diskpulse's",
                    p.display()
                )));
            }
            return Ok(Flow::Go);
        }
        let mut c = line.split(',');
        let mut cell = || c.next().unwrap_or("");
        let (t, w, dev, m) = (cell(), cell(), cell(), cell());
        let (mn, mx, mean, count) = (cell(), cell(), cell(), cell());
        if count.is_empty() || c.next().is_some() {
            return Err(Bad::Line(format!(
                "{} cells, the header has 8",
                line.split(',').count()
            )));
        }
        let t_ns = t_ns_cell(t).map_err(Bad::Line)?;
        let window_ns = w
            .parse::<u64>()
            .map_err(|_| Bad::Line(format!("'{w}' is not a count")))?;
        if t_ns.saturating_add(window_ns) > stop_ns {
            *stopped = true;
            return Ok(Flow::Stop);
        }
        if (q.window_ns != 0 && window_ns != q.window_ns)
            || t_ns >= q.t1_ns
            || t_ns.saturating_add(window_ns) <= q.t0_ns
            || q.device.as_deref().is_some_and(|d| d != dev)
        {
            return Ok(Flow::Go);
        }
        let Some(measure) = MEASURES.iter().position(|x| *x == m) else {
            return Err(Bad::Line(format!("'{m}' is not a measure")));
        };
        if q.measures & (1 << measure) == 0 {
            return Ok(Flow::Go);
        }
        let num = |x: &str| {
            x.parse::<f64>()
                .map_err(|_| Bad::Line(format!("'{x}' is not a number")))
        };
        f(RowRef {
            t_ns,
            window_ns,
            device: dev,
            measure,
            min: num(mn)?,
            max: num(mx)?,
            mean: num(mean)?,
            count: count
                .parse::<u64>()
                .map_err(|_| Bad::Line(format!("'{count}' is not a count")))?,
        });
        Ok(Flow::Go)
    })
}

/// Reads every row of `envelopes.csv.gz` (or a plain `envelopes.csv`) with the reading's
/// warnings (tests compare it with the raw rows; readers of a span use [`for_each`]); a
/// damaged row is skipped with a warning naming file:line. Another header: an error.
pub fn read(p: &Path) -> anyhow::Result<(Vec<EnvelopeRow>, Vec<String>)> {
    let mut rows = vec![];
    let warnings = for_each(p, &Query::all(), |r| {
        rows.push(EnvelopeRow {
            t_ns: r.t_ns,
            window_ns: r.window_ns,
            device: r.device.to_string(),
            measure: MEASURES[r.measure].to_string(),
            min: r.min,
            max: r.max,
            mean: r.mean,
            count: r.count,
        })
    })?;
    Ok((rows, warnings))
}
