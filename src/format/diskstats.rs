//! `diskstats.csv.gz`: the raw block-device counters, every sample of the 1 ms sampler
//! (written by `recording::samplers`, which formats rows with itoa into a reused buffer:
//! no allocation per sample; the header comes from here).
//!
//! Columns: `t_ns,device,major,minor` then the 17 counters of [`collectors::diskstats`]
//! in kernel order ([`FIELD_NAMES`]): `reads,reads_merged,sectors_read,read_ms,writes,
//! writes_merged,sectors_written,write_ms,in_flight,io_ms,weighted_io_ms,discards,
//! discards_merged,sectors_discarded,discard_ms,flushes,flush_ms`. Units: sectors are
//! 512 B; `*_ms` are milliseconds and wrap at 2^32; `in_flight` is a gauge, the rest
//! counters since boot. A cell is empty where the kernel prints fewer fields (discards
//! before 4.18, flushes before 5.5). `t_ns` is the sample's instant (not a window). A
//! device's row is written when a counter changed since its previous sample, together
//! with that previous sample if it was not written, and at least once a second: the
//! difference of two consecutive rows is always exact. Gzip, as a series of whole members
//! (one per flush of `recording::writer`, about 5 a second), so
//! `zcat` reads a recording cut by `kill -9` up to its last whole member.

use std::collections::BTreeMap;
use std::path::Path;

pub use collectors::diskstats::{FIELD_NAMES, MAX_FIELDS};

use super::csv::{for_each_line_until, t_ns_cell, Bad, Flow};

pub const FILE: &str = "diskstats.csv.gz";

/// The columns before the counters.
pub const KEY_COLUMNS: [&str; 4] = ["t_ns", "device", "major", "minor"];

/// Every column, in file order.
pub fn columns() -> Vec<&'static str> {
    KEY_COLUMNS
        .iter()
        .chain(FIELD_NAMES.iter())
        .copied()
        .collect()
}

/// The header line (without newline).
pub fn header() -> String {
    columns().join(",")
}

/// The raw rows of one device.
#[derive(Debug, Clone, Default)]
pub struct DiskRows {
    pub name: String,
    pub major: u32,
    pub minor: u32,
    pub t_ns: Vec<u64>,
    /// Counters per row ([`Row::get`]: `None` where the kernel did not print the field).
    pub f: Vec<Row>,
}

/// One row's counters, 8 bytes a field: a missing field (an empty cell) is held as
/// [`Row::NONE`], a value no kernel counter reaches, so a report of an hour's rows takes
/// half the memory `[Option<u64>; MAX_FIELDS]` took (issue 13 item 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Row([u64; MAX_FIELDS]);

impl Default for Row {
    fn default() -> Self {
        Row([Row::NONE; MAX_FIELDS])
    }
}

impl Row {
    /// What a missing field is held as (a cell of `u64::MAX` reads as missing).
    pub const NONE: u64 = u64::MAX;

    /// Field `i`'s counter, `None` where the kernel did not print it (or `i` is past
    /// [`MAX_FIELDS`]).
    #[inline]
    pub fn get(&self, i: usize) -> Option<u64> {
        self.0.get(i).copied().filter(|&v| v != Row::NONE)
    }

    /// Sets field `i` (`None`: missing).
    #[inline]
    pub fn set(&mut self, i: usize, v: Option<u64>) {
        self.0[i] = v.unwrap_or(Row::NONE);
    }

    /// A row from the fields as `Option`s.
    pub fn from_options(f: [Option<u64>; MAX_FIELDS]) -> Row {
        Row(f.map(|v| v.unwrap_or(Row::NONE)))
    }
}

/// One row of diskstats.csv.gz as [`for_each_row`] hands it over (borrowed: nothing is
/// allocated per row).
#[derive(Debug, Clone, Copy)]
pub struct RowRef<'a> {
    /// 1-based line number in the file (for warnings).
    pub line: usize,
    pub t_ns: u64,
    pub device: &'a str,
    pub major: u32,
    pub minor: u32,
    pub f: &'a Row,
}

/// Streams the rows of `diskstats.csv.gz` (or a plain `diskstats.csv`) in file order,
/// holding one row at a time: `f` returns [`Flow::Stop`] to stop reading (and
/// decompressing) there. The one function every reader of the raw rows goes through
/// ([`read`], `report::zoom_data`, `diskpulse view`), so the file's layout (one gzip
/// stream today, a sequence of chunk files later) changes here only. Checks as [`read`]
/// (header, damaged rows skipped with a warning naming file:line, a cut-off end read up
/// to its last whole row); returns the warnings and whether a whole row was read.
pub fn for_each_row(
    p: &Path,
    f: impl FnMut(RowRef<'_>) -> Flow,
) -> anyhow::Result<(Vec<String>, bool)> {
    for_each_row_from(p, 0, f)
}

/// [`for_each_row`] for the rows at or after `from_ns`: earlier rows are skipped after
/// reading their `t_ns` (their counters are not parsed), so a reader of a span late in
/// the file spends its time decompressing, not parsing.
pub fn for_each_row_from(
    p: &Path,
    from_ns: u64,
    mut f: impl FnMut(RowRef<'_>) -> Flow,
) -> anyhow::Result<(Vec<String>, bool)> {
    let want = header();
    let mut any = false;
    let warnings = for_each_line_until(p, |n, line| {
        if n == 1 {
            if line != want {
                return Err(Bad::File(anyhow::anyhow!(
                    "{} line 1: not the diskstats header (want '{want}'); the file is damaged or not diskpulse's",
                    p.display()
                )));
            }
            return Ok(Flow::Go);
        }
        let mut cells = line.split(',');
        let (Some(t), Some(name), Some(ma), Some(mi)) =
            (cells.next(), cells.next(), cells.next(), cells.next())
        else {
            return Err(Bad::Line(format!(
                "{} cells, the header has {}",
                line.split(',').count(),
                KEY_COLUMNS.len() + MAX_FIELDS
            )));
        };
        if from_ns > 0 {
            // Only a whole number is a row's time; anything else is checked below.
            if let Ok(t) = t.parse::<u64>() {
                if t < from_ns {
                    any = true;
                    return Ok(Flow::Go);
                }
            }
        }
        let mut row = Row::default();
        let mut k = 0;
        for v in cells {
            if k == MAX_FIELDS {
                k += 1;
                break;
            }
            if !v.is_empty() {
                row.set(
                    k,
                    Some(v.parse::<u64>().map_err(|_| {
                        Bad::Line(format!("{} '{v}' is not a counter", FIELD_NAMES[k]))
                    })?),
                );
            }
            k += 1;
        }
        if k != MAX_FIELDS {
            return Err(Bad::Line(format!(
                "{} cells, the header has {}",
                line.split(',').count(),
                KEY_COLUMNS.len() + MAX_FIELDS
            )));
        }
        let t = t_ns_cell(t).map_err(Bad::Line)?;
        let (Ok(major), Ok(minor)) = (ma.parse::<u32>(), mi.parse::<u32>()) else {
            return Err(Bad::Line(format!(
                "major:minor '{ma}:{mi}' are not numbers"
            )));
        };
        any = true;
        Ok(f(RowRef {
            line: n,
            t_ns: t,
            device: name,
            major,
            minor,
            f: &row,
        }))
    })?;
    Ok((warnings, any))
}

/// Reads `diskstats.csv.gz` (or a plain `diskstats.csv`) grouped by device, in order of
/// first appearance, with the reading's warnings. The header must be diskstats' own
/// ([`header`]); a damaged row (too few cells, a number that is not one, a `t_ns` past
/// [`super::csv::MAX_T_NS`], a `t_ns` before the device's previous row) is skipped with a
/// warning naming file:line; a recording cut off is read up to its last whole row (a
/// warning). Empty, not gzip, another header, or no whole row at all: an error naming the
/// file.
pub fn read(p: &Path) -> anyhow::Result<(Vec<DiskRows>, Vec<String>)> {
    let mut by: BTreeMap<String, DiskRows> = BTreeMap::new();
    let mut order: Vec<String> = vec![];
    let mut back: Vec<String> = vec![];
    let mut back_n = 0usize;
    let (mut warnings, _) = for_each_row(p, |r| {
        let d = match by.get_mut(r.device) {
            Some(d) => d,
            None => {
                order.push(r.device.to_string());
                by.entry(r.device.to_string()).or_insert_with(|| DiskRows {
                    name: r.device.to_string(),
                    major: r.major,
                    minor: r.minor,
                    ..Default::default()
                })
            }
        };
        if let Some(&last) = d.t_ns.last().filter(|&&last| r.t_ns < last) {
            back_n += 1;
            if back.len() < 3 {
                back.push(format!(
                    "{}:{}: t_ns {} is before the device's previous row ({last}); skipped",
                    p.display(),
                    r.line,
                    r.t_ns
                ));
            }
            return Flow::Go;
        }
        d.t_ns.push(r.t_ns);
        d.f.push(*r.f);
        Flow::Go
    })?;
    if back_n > back.len() {
        back.push(format!(
            "{}: {back_n} rows before their device's previous row skipped in all",
            p.display()
        ));
    }
    warnings.extend(back);
    if order.is_empty() {
        return Err(anyhow::anyhow!(
            "{} holds no whole row of samples; the recording is damaged or was cut before its first flush",
            p.display()
        ));
    }
    warnings.shrink_to_fit();
    Ok((
        order.into_iter().filter_map(|n| by.remove(&n)).collect(),
        warnings,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_holds_missing_fields_in_8_bytes_a_field() {
        assert_eq!(std::mem::size_of::<Row>(), 8 * MAX_FIELDS);
        let mut f = [None; MAX_FIELDS];
        f[0] = Some(0);
        f[6] = Some(u64::MAX - 1);
        let r = Row::from_options(f);
        assert_eq!(r.get(0), Some(0));
        assert_eq!(r.get(6), Some(u64::MAX - 1));
        assert_eq!(r.get(1), None);
        assert_eq!(r.get(MAX_FIELDS), None);
        let mut r = Row::default();
        assert!((0..MAX_FIELDS).all(|i| r.get(i).is_none()));
        r.set(3, Some(42));
        r.set(4, None);
        assert_eq!((r.get(3), r.get(4)), (Some(42), None));
    }

    #[test]
    fn empty_cells_read_back_as_missing() {
        let p = std::env::temp_dir().join(format!("streaming-ds-{}.csv", std::process::id()));
        let row = |t: &str, dev: &str| {
            let mut c = vec![t, dev, "7", "0"];
            c.extend(std::iter::repeat_n("", MAX_FIELDS));
            c[KEY_COLUMNS.len()] = "7";
            c[KEY_COLUMNS.len() + 6] = "1000";
            c.join(",")
        };
        let text = format!(
            "{}\n{}\n{}\n",
            header(),
            row("5", "loop0"),
            row("9", "loop0")
        );
        std::fs::write(&p, text).unwrap();
        let (d, w) = read(&p).unwrap();
        std::fs::remove_file(&p).ok();
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].t_ns, vec![5, 9]);
        assert_eq!(d[0].f[1].get(0), Some(7));
        assert_eq!(d[0].f[1].get(6), Some(1000));
        assert_eq!(d[0].f[1].get(1), None);
    }
}
