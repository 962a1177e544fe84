//! `diskpulse fsync` against real file systems and devices: every row on ext4 over a loop
//! device, a cgroup-throttled loop device, O_DIRECT refused (ramfs) and on tmpfs, Ctrl-C
//! mid-run, ENOSPC, fsync.csv inside a recorded run, bad input, and each sync row against
//! the loop device's own flush counters (device.rs). Each test that needs root,
//! a loop device or cgroup v1 blkio says why it skips.

#[path = "../common/mod.rs"]
mod common;
use common::*;

mod device;
mod filesystems;
mod pg_form;
mod pg_rows;
mod run;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// Ids of the rows that open with O_DIRECT.
const DIRECT_ROWS: [&str; 11] = [
    "one_8k.open_datasync",
    "one_8k.direct_fdatasync",
    "one_8k.open_sync",
    "two_8k.open_datasync",
    "two_8k.direct_fdatasync",
    "two_8k.open_sync",
    "open_sync_16k.1x16k",
    "open_sync_16k.2x8k",
    "open_sync_16k.4x4k",
    "open_sync_16k.8x2k",
    "open_sync_16k.16x1k",
];

/// Rows whose op has a separate fdatasync/fsync call.
const SYNC_CALL_ROWS: [&str; 8] = [
    "one_8k.fdatasync",
    "one_8k.direct_fdatasync",
    "one_8k.fsync",
    "two_8k.fdatasync",
    "two_8k.direct_fdatasync",
    "two_8k.fsync",
    "other_fd.write_fsync_close",
    "other_fd.write_close_fsync",
];

fn fsync_json(args: &[&str]) -> (Output, Value) {
    let o = diskpulse()
        .arg("fsync")
        .args(args)
        .arg("--json")
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    });
    (o, v)
}

fn tests_of(v: &Value) -> &Vec<Value> {
    v["tests"].as_array().expect("tests[]")
}

fn row<'a>(v: &'a Value, id: &str) -> &'a Value {
    tests_of(v)
        .iter()
        .find(|t| t["id"] == id)
        .unwrap_or_else(|| panic!("{id} not in {v:#}"))
}

fn leftovers(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(".diskpulse-fsync")
        })
        .collect()
}

/// A row that ran: ops > 0, ops/s, ordered percentiles, the sync call where it has one.
fn assert_ran(t: &Value) {
    let id = t["id"].as_str().unwrap();
    assert_eq!(t["status"], "ok", "{t:#}");
    assert!(t["ops"].as_u64().unwrap() > 0, "{id}: {t:#}");
    assert!(t["ops_per_s"].as_f64().unwrap() > 0.0, "{id}");
    let f = |k: &str| t[k].as_f64().unwrap_or_else(|| panic!("{id}: {k} missing"));
    for p in ["lat", "sync_lat"] {
        if p == "sync_lat" && !SYNC_CALL_ROWS.contains(&id) {
            assert!(t["sync_lat_p50_us"].is_null(), "{id} has no sync call");
            continue;
        }
        let (min, p50, p99, p999, max) = (
            f(&format!("{p}_min_us")),
            f(&format!("{p}_p50_us")),
            f(&format!("{p}_p99_us")),
            f(&format!("{p}_p999_us")),
            f(&format!("{p}_max_us")),
        );
        assert!(
            0.0 < min && min <= p50 && p50 <= p99 && p99 <= p999 && p999 <= max,
            "{id} {p}: {min} {p50} {p99} {p999} {max}"
        );
    }
    if SYNC_CALL_ROWS.contains(&id) {
        assert!(
            f("sync_lat_p50_us") <= f("lat_p50_us") * 1.01,
            "{id}: sync within op"
        );
    }
    // ops/s is ops over the test's span on the run clock (consistency only: device.rs
    // checks ops and ops/s against the device's own flush counters).
    let span_s = (t["t_end_ns"].as_u64().unwrap() - t["t_ns"].as_u64().unwrap()) as f64 / 1e9;
    let rate = t["ops"].as_f64().unwrap() / span_s;
    // (ops_per_s is rounded to a thousandth in the JSON.)
    assert!(
        (rate - f("ops_per_s")).abs() <= 0.0005 + 1e-9 * rate,
        "{id}"
    );
}
