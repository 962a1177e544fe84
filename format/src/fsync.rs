//! `fsync.csv`: `diskpulse fsync` run inside a recording, one row per test as it ends.
//! Rows are spans, not windows: `t_ns` is the first op's start and `t_end_ns` the last
//! op's end, on the run clock.
//!
//! Columns: `t_ns`, `t_end_ns`, `test` (id, e.g. `one_8k.fdatasync`), `status` (`ok`,
//! `n/a`, `failed`, `not_run`), `ops`, `secs`, `ops_per_s`, `lat_min_us`, `lat_mean_us`,
//! `lat_p50_us`, `lat_p99_us`, `lat_p999_us`, `lat_max_us` (per op: writes + sync, µs),
//! `sync_lat_min_us` .. `sync_lat_max_us` (the fdatasync/fsync call alone; empty for ops
//! without one), `reason` (n/a or failure, "cut short by Ctrl-C"; quoted when it holds a
//! comma). Numbers are empty where the test did not run.

use std::path::Path;

use super::csv::{line, read_rows, t_ns_cell, Cells};

pub const FILE: &str = "fsync.csv";

/// The header: every column, in file order (the one list writers and readers use).
pub const HEADER: &str = "t_ns,t_end_ns,test,status,ops,secs,ops_per_s,lat_min_us,lat_mean_us,lat_p50_us,lat_p99_us,lat_p999_us,lat_max_us,sync_lat_min_us,sync_lat_mean_us,sync_lat_p50_us,sync_lat_p99_us,sync_lat_p999_us,sync_lat_max_us,reason";

/// The columns of [`HEADER`].
pub fn columns() -> Vec<&'static str> {
    HEADER.split(',').collect()
}

/// A latency distribution, µs, in column order.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LatUs {
    pub min: f64,
    pub mean: f64,
    pub p50: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
}

impl LatUs {
    fn cells(l: Option<&LatUs>) -> [String; 6] {
        match l {
            Some(l) => [l.min, l.mean, l.p50, l.p99, l.p999, l.max].map(|v| format!("{v:.3}")),
            None => Default::default(),
        }
    }
    fn read(c: &Cells, prefix: &str) -> Option<LatUs> {
        let x = |q: &str| c.f64(&format!("{prefix}_{q}_us"));
        Some(LatUs {
            min: x("min")?,
            mean: x("mean")?,
            p50: x("p50")?,
            p99: x("p99")?,
            p999: x("p999")?,
            max: x("max")?,
        })
    }
}

/// What a test measured (absent for tests that did not run).
#[derive(Debug, Clone, PartialEq)]
pub struct Measured {
    pub ops: u64,
    pub secs: f64,
    pub ops_per_s: f64,
    pub lat: LatUs,
    /// The sync call alone; `None` for ops without one.
    pub sync_lat: Option<LatUs>,
}

/// One row of `fsync.csv`.
#[derive(Debug, Clone, PartialEq)]
pub struct FsyncRow {
    pub t_ns: u64,
    pub t_end_ns: u64,
    pub test: String,
    pub status: String,
    pub measured: Option<Measured>,
    pub reason: String,
}

impl FsyncRow {
    /// The row as a CSV line, with its newline.
    pub fn to_line(&self) -> String {
        let mut cells = vec![
            self.t_ns.to_string(),
            self.t_end_ns.to_string(),
            self.test.clone(),
            self.status.clone(),
        ];
        match &self.measured {
            Some(m) => {
                cells.push(m.ops.to_string());
                cells.push(format!("{:.6}", m.secs));
                cells.push(format!("{:.3}", m.ops_per_s));
            }
            None => cells.extend([String::new(), String::new(), String::new()]),
        }
        cells.extend(LatUs::cells(self.measured.as_ref().map(|m| &m.lat)));
        cells.extend(LatUs::cells(
            self.measured.as_ref().and_then(|m| m.sync_lat.as_ref()),
        ));
        cells.push(self.reason.clone());
        line(&cells)
    }

    /// Per-op latency, µs (NaN where the test did not run).
    pub fn lat(&self, f: impl Fn(&LatUs) -> f64) -> f64 {
        self.measured
            .as_ref()
            .map(|m| f(&m.lat))
            .unwrap_or(f64::NAN)
    }

    /// The sync call's latency, µs (NaN for tests without one).
    pub fn sync_lat(&self, f: impl Fn(&LatUs) -> f64) -> f64 {
        self.measured
            .as_ref()
            .and_then(|m| m.sync_lat.as_ref())
            .map(f)
            .unwrap_or(f64::NAN)
    }
}

/// Reads `fsync.csv` by its header; empty when the run has none. A row cut off by a
/// crash (no newline, or too few cells) is left out.
pub fn read(dir: &Path) -> anyhow::Result<Vec<FsyncRow>> {
    let mut rows = vec![];
    read_rows(&dir.join(FILE), &["t_ns", "t_end_ns", "test"], |c| {
        let t_ns = t_ns_cell(c.str("t_ns"))?;
        let t_end_ns = t_ns_cell(c.str("t_end_ns"))?;
        let measured = match (c.u64("ops"), LatUs::read(c, "lat")) {
            (Some(ops), Some(lat)) => Some(Measured {
                ops,
                secs: c.f64("secs").unwrap_or(f64::NAN),
                ops_per_s: c.f64("ops_per_s").unwrap_or(f64::NAN),
                lat,
                sync_lat: LatUs::read(c, "sync_lat"),
            }),
            _ => None,
        };
        rows.push(FsyncRow {
            t_ns,
            t_end_ns,
            test: c.str("test").to_string(),
            status: c.str("status").to_string(),
            measured,
            reason: c.str("reason").to_string(),
        });
        Ok(())
    })?;
    Ok(rows)
}

/// `diskpulse fsync --json`: where the tests ran (the header) and one entry per test
/// with the same field names as fsync.csv, plus what the test does. Printed through a
/// `serde_json::Value`, so every object's keys come out sorted (declared so here too).
#[derive(Debug, Clone, serde::Serialize, PartialEq)]
pub struct FsyncReport {
    /// pg_test_fsync's XLOG_BLCKSZ, bytes.
    pub block_bytes: usize,
    /// The devices that hold `dir`.
    pub devices: Vec<FsyncDevice>,
    /// Why there are no devices (tmpfs, ...).
    pub devices_note: Option<String>,
    pub dir: String,
    /// The test file (its path); `None` when none was made.
    pub file: Option<String>,
    pub file_bytes: usize,
    pub fs_type: Option<String>,
    pub interrupted: bool,
    /// `cycle` or `fixed`.
    pub offsets: String,
    pub secs_per_test: f64,
    pub tests: Vec<FsyncTest>,
}

/// A device under `--dir`: name, `MAJ:MIN`, why it is there, and its shown sysfs queue
/// attributes (`write_cache`, `fua`, `rotational`) as sysfs prints them, as fields.
#[derive(Debug, Clone, serde::Serialize, PartialEq)]
pub struct FsyncDevice {
    #[serde(flatten)]
    pub attrs: std::collections::BTreeMap<String, String>,
    pub dev: String,
    pub name: String,
    pub why: String,
}

/// One test: what it does, its status and span on the run clock, and (when it ran) its
/// rate and latencies, µs rounded to the ns (`lat_*`: per op; `sync_lat_*`: the sync
/// call alone).
#[derive(Debug, Clone, Default, serde::Serialize, PartialEq)]
pub struct FsyncTest {
    pub cut_short: bool,
    pub group: String,
    pub how: String,
    pub id: String,
    pub lat_max_us: Option<f64>,
    pub lat_mean_us: Option<f64>,
    pub lat_min_us: Option<f64>,
    pub lat_p50_us: Option<f64>,
    pub lat_p999_us: Option<f64>,
    pub lat_p99_us: Option<f64>,
    pub name: String,
    pub ops: Option<u64>,
    pub ops_per_s: Option<f64>,
    pub pg_section: String,
    pub pg_test_fsync: Option<String>,
    pub reason: Option<String>,
    pub secs: Option<f64>,
    pub status: String,
    pub sync_lat_max_us: Option<f64>,
    pub sync_lat_mean_us: Option<f64>,
    pub sync_lat_min_us: Option<f64>,
    pub sync_lat_p50_us: Option<f64>,
    pub sync_lat_p999_us: Option<f64>,
    pub sync_lat_p99_us: Option<f64>,
    pub t_end_ns: u64,
    pub t_ns: u64,
    pub write_bytes: usize,
    pub writes_per_op: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_read_back_by_header_without_a_cut_off_tail() {
        let d = tempfile::tempdir().unwrap();
        let lat = LatUs {
            min: 1.0,
            mean: 2.0,
            p50: 3.0,
            p99: 4.0,
            p999: 5.0,
            max: 6.0,
        };
        let ok = FsyncRow {
            t_ns: 100,
            t_end_ns: 2000,
            test: "one_8k.fdatasync".into(),
            status: "ok".into(),
            measured: Some(Measured {
                ops: 500,
                secs: 1.0,
                ops_per_s: 500.0,
                lat,
                sync_lat: Some(lat),
            }),
            reason: String::new(),
        };
        let na = FsyncRow {
            t_ns: 2000,
            t_end_ns: 2000,
            test: "one_8k.open_direct".into(),
            status: "n/a".into(),
            measured: None,
            reason: "O_DIRECT refused, EINVAL".into(),
        };
        let text = format!("{}\n{}{}3000,4000,two", HEADER, ok.to_line(), na.to_line());
        std::fs::write(d.path().join(FILE), text).unwrap();
        let r = read(d.path()).unwrap();
        assert_eq!(r, vec![ok, na]);
        assert!(r[1].lat(|l| l.p50).is_nan());
        assert!(read(&d.path().join("none")).unwrap().is_empty());
    }
}
