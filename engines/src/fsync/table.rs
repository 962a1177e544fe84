//! The human side of `diskpulse fsync`: the header (where, on what file system and
//! devices, with their write cache) and the table rows, pg_test_fsync's layout with our
//! percentile columns. Pure functions of the results, testable without a disk.

use std::path::{Path, PathBuf};
use std::time::Duration;

use collectors::devices::{DeviceError, Resolver};
use collectors::directio::LatencyNs;
use collectors::fsync::{Group, Kind, Measured, Outcome, TestSpec};

use super::Row;
use format::cli::fmt_duration;

/// What the header says: where, on what, how long.
pub(super) struct Header {
    dir: PathBuf,
    fs_type: Option<String>,
    per_test: Duration,
    cycle: bool,
    /// The devices that hold --dir.
    devices: Vec<HeaderDevice>,
    /// Why there are no devices (tmpfs, ...).
    devices_note: Option<String>,
}

/// A device under --dir as the header shows it.
struct HeaderDevice {
    name: String,
    /// `MAJ:MIN`
    dev: String,
    why: String,
    /// [`SHOWN_ATTRS`] as sysfs prints them.
    attrs: Vec<(String, String)>,
}

/// sysfs queue attributes shown in the header (and JSON) for each device.
const SHOWN_ATTRS: [&str; 3] = ["write_cache", "fua", "rotational"];

impl Header {
    pub(super) fn gather(dir: &Path, per_test: Duration, cycle: bool) -> Header {
        let r = Resolver::default();
        let (devices, devices_note) = match r.for_path(dir) {
            Ok(devs) => (
                devs.iter()
                    .map(|d| {
                        let q = r.queue_info(d);
                        let attrs = SHOWN_ATTRS
                            .iter()
                            .filter_map(|k| {
                                q.attrs
                                    .iter()
                                    .find(|(a, _)| a == k)
                                    .map(|(a, v)| (a.clone(), v.clone()))
                            })
                            .collect();
                        HeaderDevice {
                            name: d.name.clone(),
                            dev: d.num.to_string(),
                            why: d.why.clone(),
                            attrs,
                        }
                    })
                    .collect(),
                None,
            ),
            // Not an error here: tmpfs and ramfs are fair things to time. Say what it is.
            Err(DeviceError::NoBlockDevice {
                path,
                fstype,
                mount_source,
            }) => (
                vec![],
                Some(format!(
                    "{path} is on {fstype} ({mount_source}): no block device behind it"
                )),
            ),
            Err(e) => (vec![], Some(e.to_string())),
        };
        Header {
            dir: dir.to_path_buf(),
            fs_type: collectors::fstype::name_of(dir),
            per_test,
            cycle,
            devices,
            devices_note,
        }
    }

    pub(super) fn text(&self) -> String {
        let mut s = format!(
            "diskpulse fsync in {} ({}): a 16 MiB file filled and fsynced first, {} per test, {}\n",
            self.dir.display(),
            self.fs_type.as_deref().unwrap_or("file system unknown"),
            fmt_duration(self.per_test),
            if self.cycle {
                "writes walking through the file (--cycle)"
            } else {
                "writes at pg_test_fsync's fixed offsets"
            }
        );
        for d in &self.devices {
            let a: Vec<String> = d.attrs.iter().map(|(k, v)| format!("{k}={v}")).collect();
            s += &format!(
                "  {:<10} {:<8} {:<34} {}\n",
                d.name,
                d.dev,
                d.why,
                a.join("  ")
            );
        }
        if let Some(n) = &self.devices_note {
            s += &format!("  no block device: {n}\n");
        }
        s += "pg_test_fsync's sections, rows and units (an op is its writes and its sync; usecs/op is\n\
              the test's time over its ops, as pg's), then per-op latency percentiles in µs; its open_datasync\n\
              and open_sync open with O_DIRECT as pg's do. \"└ sync call\" is the fdatasync/fsync call alone.\n";
        s += &format!(
            "{:<LAT_AT$}{:>8} {:>8} {:>8} {:>8}\n",
            "", "p50", "p99", "p99.9", "max"
        );
        s
    }

    /// The `--json` document: this header, the test file, whether Ctrl-C cut the run
    /// short, and the tests.
    pub(super) fn json(
        &self,
        file: Option<String>,
        interrupted: bool,
        tests: Vec<format::fsync::FsyncTest>,
    ) -> format::fsync::FsyncReport {
        format::fsync::FsyncReport {
            dir: self.dir.display().to_string(),
            fs_type: self.fs_type.clone(),
            file_bytes: collectors::fsync::FILE_BYTES,
            block_bytes: collectors::fsync::XLOG_BLCKSZ,
            secs_per_test: self.per_test.as_secs_f64(),
            offsets: if self.cycle { "cycle" } else { "fixed" }.to_string(),
            devices: self
                .devices
                .iter()
                .map(|d| format::fsync::FsyncDevice {
                    name: d.name.clone(),
                    dev: d.dev.clone(),
                    why: d.why.clone(),
                    attrs: d.attrs.iter().cloned().collect(),
                })
                .collect(),
            devices_note: self.devices_note.clone(),
            file,
            interrupted,
            tests,
        }
    }
}

/// Where the latency columns start: pg's label (8 + 30) and numbers (38).
const LAT_AT: usize = 76;

/// pg_test_fsync's heading of a section: a blank line, its title and its note.
pub(super) fn section_line(g: Group) -> String {
    let note = match g {
        Group::OneWrite | Group::TwoWrites => {
            "(in wal_sync_method preference order, except fdatasync is Linux's default)\n"
        }
        Group::OpenSyncSizes => {
            "(This is designed to compare the cost of writing 16kB in different write\nopen_sync sizes.)\n"
        }
        Group::OtherFd => {
            "(If the times are similar, fsync() can sync data written on a different\ndescriptor.)\n"
        }
        Group::NoSync => "",
    };
    format!("\n{}\n{note}", g.pg_title())
}

/// Before the first of our rows in a section (after pg's): a line saying they are ours.
pub(super) fn ours_heading(done: &[Row], spec: &TestSpec) -> String {
    let prev_is_pg_or_other_group = done
        .last()
        .is_none_or(|r| r.spec.group != spec.group || r.spec.pg_label.is_some());
    if spec.pg_label.is_none() && prev_is_pg_or_other_group {
        "    diskpulse's rows, not in pg_test_fsync:\n".to_string()
    } else {
        String::new()
    }
}

/// After a row: pg's `fsync_writethrough` line follows its `fsync` (n/a on Linux, as pg
/// prints it: no F_FULLFSYNC or _commit).
pub(super) fn after_row(spec: &TestSpec) -> String {
    if spec.id == "fsync" && matches!(spec.group, Group::OneWrite | Group::TwoWrites) {
        format!("{}{:>21}\n", label("fsync_writethrough"), "n/a")
    } else {
        String::new()
    }
}

fn label(name: &str) -> String {
    format!("        {name:<30}")
}

/// pg's row name (our name for a row pg has not) in pg's label column, printed before
/// the test runs.
pub(crate) fn row_label(spec: &TestSpec) -> String {
    label(spec.pg_label.unwrap_or(spec.name))
}

fn us(ns: u64) -> String {
    let v = ns as f64 / 1000.0;
    if v < 100.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.0}")
    }
}

fn lat_cols(l: &LatencyNs) -> String {
    let p = |q| l.at(q).map(us).unwrap_or_default();
    format!(
        "{:>8} {:>8} {:>8} {:>8}",
        p(50.0),
        p(99.0),
        p(99.9),
        us(l.max)
    )
}

/// pg's `%13.3f ops/sec  %6.0f usecs/op` (usecs/op: the test's time over its ops), then
/// our percentiles.
fn measured_cols(m: &Measured) -> String {
    let ops_s = m.ops_per_s();
    let usecs = if ops_s > 0.0 { 1e6 / ops_s } else { f64::NAN };
    format!(
        "{ops_s:13.3} ops/sec  {usecs:6.0} usecs/op{}",
        lat_cols(&m.lat)
    )
}

/// The rest of a row after its label: numbers (and the sync call's line), or why not.
pub(crate) fn row_rest(r: &Row) -> String {
    let sync_line = |m: &Measured, spec: &TestSpec| -> String {
        match &m.sync_lat {
            Some(s) => format!(
                "{:<LAT_AT$}{}\n",
                format!("          └ {} call", sync_name(spec)),
                lat_cols(s)
            ),
            None => String::new(),
        }
    };
    match &r.outcome {
        Outcome::Ran(m) => {
            let cut = if m.cut_short {
                "  (cut short by Ctrl-C)"
            } else {
                ""
            };
            format!("{}{cut}\n{}", measured_cols(m), sync_line(m, &r.spec))
        }
        Outcome::NotAvailable { reason } => format!("{:>21}  {reason}\n", "n/a*"),
        Outcome::Failed { reason, partial } => match partial {
            Some(m) => format!(
                "{}  failed after {} ops: {reason}\n{}",
                measured_cols(m),
                m.ops,
                sync_line(m, &r.spec)
            ),
            None => format!("failed: {reason}\n"),
        },
        Outcome::NotRun => "not run: interrupted\n".to_string(),
    }
}

fn sync_name(spec: &TestSpec) -> &'static str {
    match spec.kind {
        Kind::ThenSync { call, .. } => call.name(),
        _ => "fsync",
    }
}

pub(super) fn footer(rows: &[Row]) -> String {
    let mut s = String::new();
    if rows
        .iter()
        .any(|r| matches!(r.outcome, Outcome::NotAvailable { .. }))
    {
        s += "\n* n/a*: the file system or device refused this way of writing (pg_test_fsync prints n/a* or dies there).\n";
    }
    s
}

#[cfg(test)]
mod tests {
    use super::super::tests::{sample, spec};
    use super::*;

    #[test]
    fn table_rows_say_why_not() {
        let r = Row {
            t_ns: 0,
            t_end_ns: 0,
            spec: spec("one_8k.direct_fdatasync"),
            outcome: Outcome::NotAvailable {
                reason: "EINVAL (Invalid argument): this file system refuses O_DIRECT".into(),
            },
        };
        assert_eq!(
            row_rest(&r),
            "                 n/a*  EINVAL (Invalid argument): this file system refuses O_DIRECT\n"
        );
        let ok = Row {
            t_ns: 0,
            t_end_ns: 0,
            spec: spec("one_8k.fdatasync"),
            outcome: Outcome::Ran(sample(true)),
        };
        // pg's layout: the label in 8 + 30 columns, then `%13.3f ops/sec  %6.0f usecs/op`
        // (1000 ops in 2 s: 500 ops/sec, 2000 usecs/op).
        let line = format!("{}{}", row_label(&ok.spec), row_rest(&ok));
        assert!(
            line.starts_with(
                "        fdatasync                           500.000 ops/sec    2000 usecs/op"
            ),
            "{line}"
        );
        assert!(line.contains("└ fdatasync call"), "{line}");
        assert_eq!(row_label(&ok.spec).chars().count(), 38);
        // The 16 KiB rows carry pg's own labels, leading space and all.
        assert_eq!(
            row_label(&spec("open_sync_16k.2x8k")),
            "         2 *  8kB open_sync writes    "
        );
        assert_eq!(
            after_row(&spec("two_8k.fsync")),
            "        fsync_writethrough                              n/a\n"
        );
    }
}
