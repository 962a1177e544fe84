//! The device's own counters against what `fsync` reports: a row whose op syncs must
//! show at least one cache flush completed on the loop device per op (/proc/diskstats
//! field 16, flushes completed), at the rate the row reports, timed by the test's own
//! clock from the flush counter's changes (not by the program's timestamps); a row that
//! does not sync must not flush per op. So an ops/s that is wrong, or a sync call that
//! never reached the device, fails here.

use super::*;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// (writes completed, flushes completed) of `dev` now, from /proc/diskstats.
fn counters(dev: &str) -> (u64, u64) {
    let s = std::fs::read_to_string("/proc/diskstats").unwrap();
    let f: Vec<&str> = s
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f.get(2) == Some(&dev))
        .unwrap_or_else(|| panic!("{dev} not in /proc/diskstats"));
    assert!(f.len() >= 20, "this kernel has no flush fields: {f:?}");
    (f[7].parse().unwrap(), f[18].parse().unwrap())
}

/// What the device did while one `fsync` ran: counter deltas, and each change of the
/// flush counter seen by a thread polling /proc/diskstats every 200 µs on the test's clock.
struct DeviceRun {
    writes: u64,
    flushes: u64,
    /// (when, flushes completed since the start) at each change.
    flush_changes: Vec<(Instant, u64)>,
}

impl DeviceRun {
    /// Flushes per second between the first and the last change of the flush counter, on
    /// the test's clock (the fill's flush or two at the start count for nothing).
    fn flush_rate(&self) -> f64 {
        let (a, b) = (self.flush_changes[0], *self.flush_changes.last().unwrap());
        (b.1 - a.1) as f64 / (b.0 - a.0).as_secs_f64()
    }
}

fn fsync_watched(dev: &str, args: &[&str]) -> (Value, DeviceRun) {
    let stop = Arc::new(AtomicBool::new(false));
    let (w0, f0) = counters(dev);
    let watcher = {
        let (stop, dev) = (stop.clone(), dev.to_string());
        std::thread::spawn(move || {
            let mut changes = vec![];
            let mut last = f0;
            while !stop.load(Ordering::Relaxed) {
                let (_, f) = counters(&dev);
                if f != last {
                    changes.push((Instant::now(), f - f0));
                    last = f;
                }
                std::thread::sleep(Duration::from_micros(200));
            }
            changes
        })
    };
    let (o, v) = fsync_json(args);
    stop.store(true, Ordering::Relaxed);
    let flush_changes = watcher.join().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (w1, f1) = counters(dev);
    (
        v,
        DeviceRun {
            writes: w1 - w0,
            flushes: f1 - f0,
            flush_changes,
        },
    )
}

#[test]
fn each_sync_op_reaches_the_device_at_the_rate_the_row_reports() {
    if !can_use_loop_devices() {
        return;
    }
    let mut lo = LoopDev::new("1G");
    let m = lo.mount_ext4();
    let wc =
        std::fs::read_to_string(format!("/sys/block/{}/queue/write_cache", lo.name())).unwrap();
    // Without a volatile cache the kernel drops flushes before they are counted.
    assert_eq!(
        wc.trim(),
        "write back",
        "a loop device has a write-back cache"
    );
    let dir = m.to_str().unwrap();
    // (row, flushes per op at most): fdatasync or O_DSYNC over an allocated block is the
    // data write and one cache flush; fsync and O_SYNC may add a journal commit's flush;
    // write+fsync+close in another fd is two syncs.
    let rows = [
        ("one_8k.fdatasync", 1.2),
        ("one_8k.open_datasync_buffered", 1.2),
        ("two_8k.fdatasync", 1.2),
        ("one_8k.fsync", 3.0),
        ("one_8k.open_sync_buffered", 3.0),
        ("other_fd.write_fsync_close", 3.0),
    ];
    // The 16 MiB fill before the row is synced once or twice.
    const FILL_FLUSHES: u64 = 4;
    for (id, per_op_max) in rows {
        let (v, dev) = fsync_watched(
            lo.name(),
            &["--dir", dir, "--only", id, "--secs-per-test", "1s"],
        );
        let t = row(&v, id);
        assert_ran(t);
        let ops = t["ops"].as_u64().unwrap();
        let ops_per_s = t["ops_per_s"].as_f64().unwrap();
        let device_rate = dev.flush_rate();
        eprintln!(
            "{id}: {ops} ops at {ops_per_s:.1}/s; the device: {} writes, {} flushes, {device_rate:.1} flushes/s",
            dev.writes, dev.flushes
        );
        assert!(ops >= 20, "{id}: too few ops to compare: {ops}");
        // Every op's write and sync reached the device.
        assert!(
            dev.writes >= ops,
            "{id}: {} writes for {ops} ops",
            dev.writes
        );
        assert!(
            dev.flushes >= ops,
            "{id}: {} flushes for {ops} ops: a sync did not reach the device",
            dev.flushes
        );
        assert!(
            dev.flushes as f64 <= per_op_max * ops as f64 + FILL_FLUSHES as f64,
            "{id}: {} flushes for {ops} ops: more ops happened than the row counts",
            dev.flushes
        );
        // One flush per op: the device's flush rate is the row's ops/s.
        if per_op_max < 1.5 {
            assert!(
                (device_rate / ops_per_s - 1.0).abs() < 0.1,
                "{id}: the device flushed {device_rate:.1}/s, the row says {ops_per_s:.1} ops/s"
            );
        }
    }
    // A row without a sync call flushes only for the fill, however many ops it does.
    let (v, dev) = fsync_watched(
        lo.name(),
        &[
            "--dir",
            dir,
            "--only",
            "no_sync.write",
            "--secs-per-test",
            "300ms",
        ],
    );
    let ops = row(&v, "no_sync.write")["ops"].as_u64().unwrap();
    eprintln!(
        "no_sync.write: {ops} ops; the device: {} flushes",
        dev.flushes
    );
    assert!(ops > 1000, "{ops}");
    assert!(dev.flushes <= FILL_FLUSHES, "{} flushes", dev.flushes);
    assert!(leftovers(&m).is_empty());
}
