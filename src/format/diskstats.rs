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

use std::path::Path;

pub use collectors::diskstats::{FIELD_NAMES, MAX_FIELDS};

use super::csv::{for_each_line, t_ns_cell, Bad};

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

/// A device of a diskstats file, in order of first appearance ([`for_each_row`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Device {
    pub name: String,
    pub major: u32,
    pub minor: u32,
}

/// Reads `diskstats.csv.gz` (or a plain `diskstats.csv`) grouped by device, in order of
/// first appearance, with the reading's warnings: every row in memory (144 bytes a row;
/// `report` reads them as a stream with [`for_each_row`] instead). The rules are
/// [`for_each_row`]'s.
pub fn read(p: &Path) -> anyhow::Result<(Vec<DiskRows>, Vec<String>)> {
    let mut disks: Vec<DiskRows> = vec![];
    let (devices, warnings) = for_each_row([p], |k, dev, t, row| {
        if k == disks.len() {
            disks.push(DiskRows {
                name: dev.name.clone(),
                major: dev.major,
                minor: dev.minor,
                ..Default::default()
            });
        }
        disks[k].t_ns.push(t);
        disks[k].f.push(*row);
    })?;
    debug_assert_eq!(devices.len(), disks.len());
    Ok((disks, warnings))
}

/// Streams the rows of diskstats files, one after the other (a recording's one
/// `diskstats.csv.gz` today; its chunks, in order, once it is chunked), calling `f` with
/// each row: the device's index in order of first appearance, the device, `t_ns` and the
/// counters. Nothing is held but the device list. Returns the devices and the reading's
/// warnings.
///
/// Each file's header must be diskstats' own ([`header`]); a damaged row (too few cells,
/// a number that is not one, a `t_ns` past [`super::csv::MAX_T_NS`] or before the
/// device's previous row) is skipped with a warning naming file:line; a file cut off is
/// read up to its last whole row (a warning). Empty, not gzip, another header, or no
/// whole row at all: an error naming the file.
pub fn for_each_row<P: AsRef<Path>>(
    files: impl IntoIterator<Item = P>,
    mut f: impl FnMut(usize, &Device, u64, &Row),
) -> anyhow::Result<(Vec<Device>, Vec<String>)> {
    let mut devices: Vec<Device> = vec![];
    let mut last_t: Vec<u64> = vec![];
    let mut warnings = vec![];
    let want = header();
    let mut first: Option<std::path::PathBuf> = None;
    for p in files {
        let p = p.as_ref();
        first.get_or_insert_with(|| p.to_path_buf());
        let w = for_each_line(p, |n, line| {
            if n == 1 {
                if line != want {
                    return Err(Bad::File(anyhow::anyhow!(
                        "{} line 1: not the diskstats header (want '{want}'); the file is damaged or not diskpulse's",
                        p.display()
                    )));
                }
                return Ok(());
            }
            const CELLS: usize = KEY_COLUMNS.len() + MAX_FIELDS;
            let mut cells = [""; CELLS];
            let mut count = 0;
            for c in line.split(',') {
                if count < CELLS {
                    cells[count] = c;
                }
                count += 1;
            }
            if count != CELLS {
                return Err(Bad::Line(format!("{count} cells, the header has {CELLS}")));
            }
            let t = t_ns_cell(cells[0]).map_err(Bad::Line)?;
            let name = cells[1];
            let (Ok(ma), Ok(mi)) = (cells[2].parse::<u32>(), cells[3].parse::<u32>()) else {
                return Err(Bad::Line(format!(
                    "major:minor '{}:{}' are not numbers",
                    cells[2], cells[3]
                )));
            };
            let mut row = Row::default();
            for (i, v) in cells[KEY_COLUMNS.len()..].iter().enumerate() {
                if v.is_empty() {
                    continue;
                }
                row.set(
                    i,
                    Some(v.parse::<u64>().map_err(|_| {
                        Bad::Line(format!("{} '{v}' is not a counter", FIELD_NAMES[i]))
                    })?),
                );
            }
            let k = match devices.iter().position(|d| d.name == name) {
                Some(k) => {
                    if t < last_t[k] {
                        return Err(Bad::Line(format!(
                            "t_ns {t} is before the device's previous row ({})",
                            last_t[k]
                        )));
                    }
                    k
                }
                None => {
                    devices.push(Device {
                        name: name.to_string(),
                        major: ma,
                        minor: mi,
                    });
                    last_t.push(t);
                    devices.len() - 1
                }
            };
            last_t[k] = t;
            f(k, &devices[k], t, &row);
            Ok(())
        })?;
        warnings.extend(w);
    }
    if devices.is_empty() {
        return Err(anyhow::anyhow!(
            "{} holds no whole row of samples; the recording is damaged or was cut before its first flush",
            first.as_deref().unwrap_or(Path::new("diskstats")).display()
        ));
    }
    warnings.shrink_to_fit();
    Ok((devices, warnings))
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
