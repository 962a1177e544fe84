//! Every row on real file systems and devices: ext4 over a loop device, a cgroup-throttled
//! loop device, O_DIRECT refused (ramfs, a 4 KiB-sector device) and tmpfs.

use super::*;

#[test]
fn every_row_runs_on_ext4_over_a_loop_device() {
    if !can_use_loop_devices() {
        return;
    }
    let mut lo = LoopDev::new("1G");
    let m = lo.mount_ext4();
    let (o, v) = fsync_json(&["--dir", m.to_str().unwrap(), "--secs-per-test", "100ms"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let tests = tests_of(&v);
    assert_eq!(tests.len(), 22);
    for t in tests {
        assert_ran(t);
        assert!(!t["cut_short"].as_bool().unwrap());
    }
    // pg_test_fsync's rows are labelled; fsync_writethrough (not on Linux) is not a row.
    let pg: Vec<&str> = tests
        .iter()
        .filter_map(|t| t["pg_test_fsync"].as_str())
        .collect();
    assert_eq!(pg.len(), 16, "{pg:?}");
    // Tests run one after another on the run clock.
    for w in tests.windows(2) {
        assert!(w[0]["t_end_ns"].as_u64() <= w[1]["t_ns"].as_u64());
    }
    // The header: the loop device that holds the dir, with its write cache as sysfs says.
    assert_eq!(v["fs_type"], "ext2/3/4");
    assert_eq!(v["file_bytes"], 16 << 20);
    let loopdev = v["devices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == lo.name())
        .unwrap_or_else(|| panic!("{} not in {:#}", lo.name(), v["devices"]));
    let wc =
        std::fs::read_to_string(format!("/sys/block/{}/queue/write_cache", lo.name())).unwrap();
    assert_eq!(loopdev["write_cache"], wc.trim());
    let file = v["file"].as_str().unwrap();
    assert!(file.starts_with(m.to_str().unwrap()));
    assert!(!Path::new(file).exists(), "test file left behind");
    assert!(leftovers(&m).is_empty());

    // The human table: a row per test (the label of each), numbers, n/a nowhere.
    let o = diskpulse()
        .args([
            "fsync",
            "--dir",
            m.to_str().unwrap(),
            "--secs-per-test",
            "20ms",
        ])
        .output()
        .unwrap();
    assert!(o.status.success());
    let text = String::from_utf8_lossy(&o.stdout);
    for t in tests {
        // pg's row name where the row is pg's, ours otherwise.
        let name = t["pg_test_fsync"]
            .as_str()
            .unwrap_or_else(|| t["name"].as_str().unwrap());
        assert!(
            text.contains(&format!("  {name} ")),
            "{name} missing:\n{text}"
        );
    }
    assert!(text.contains(&format!("  {} ", lo.name())), "{text}");
    assert!(text.contains("write_cache="), "{text}");
    // Nothing refused (pg's fsync_writethrough line is n/a on Linux, without the star).
    assert!(!text.contains("n/a*"), "{text}");
    let sync_lines = text
        .lines()
        .filter(|l| l.trim_start().starts_with("└ "))
        .count();
    assert_eq!(sync_lines, SYNC_CALL_ROWS.len(), "{text}");
    assert!(leftovers(&m).is_empty());
}

#[test]
fn a_throttled_loop_device_caps_o_dsync_and_fdatasync() {
    if !can_use_loop_devices() {
        return;
    }
    let _lock = cgroup::lock();
    let Some(h) = cgroup::hierarchy() else {
        return;
    };
    let mut lo = LoopDev::new("1G");
    let m = lo.mount_ext4();
    let majmin = std::fs::read_to_string(format!("/sys/block/{}/dev", lo.name()))
        .unwrap()
        .trim()
        .to_string();
    let only = "one_8k.open_datasync_buffered,one_8k.fdatasync";
    let args = ["--dir", m.to_str().unwrap(), "--only", only];

    let (o, free) = fsync_json(&[&args[..], &["--secs-per-test", "1s"]].concat());
    assert!(o.status.success());

    // Low enough to sit far below what even a busy host disk gives unthrottled.
    const CAP_IOPS: f64 = 40.0;
    let cg = cgroup::Throttled::new(&h, lo.name(), CAP_IOPS as u32);
    let bin = env!("CARGO_BIN_EXE_diskpulse");
    let o = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "echo $$ > {}/cgroup.procs; exec {bin} fsync --dir {} --only {only} --secs-per-test 3s --json",
            cg.dir.display(),
            m.display()
        ))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let slow: Value = serde_json::from_slice(&o.stdout).unwrap();
    // Write I/Os the cgroup submitted to the loop device (the 16 MiB fill's few included).
    let ios = cg.writes_charged() as f64;
    let ops: f64 = tests_of(&slow)
        .iter()
        .map(|t| t["ops"].as_f64().unwrap())
        .sum();
    let ios_per_op = ios / ops;
    eprintln!(
        "cap {CAP_IOPS} write IOPS on {majmin}: {ios} throttled write I/Os for {ops} ops ({ios_per_op:.2} per op)"
    );
    for id in ["one_8k.open_datasync_buffered", "one_8k.fdatasync"] {
        let f = row(&free, id)["ops_per_s"].as_f64().unwrap();
        let s = row(&slow, id)["ops_per_s"].as_f64().unwrap();
        eprintln!(
            "{id}: {f:.0} ops/s free, {s:.1} ops/s under the cap ({:.1} I/Os per second)",
            s * ios_per_op
        );
        // An op is at least one write I/O, so the cap bounds ops/s. On ext4 an op that
        // overwrites a block with O_DSYNC/fdatasync is the data write and a cache flush, and
        // the cgroup counts both: ops/s sits near cap / I/Os per op, and the device does
        // I/Os at the cap. The count also holds the fill's writes, made before the timed
        // seconds, which the per-op figure spreads over the ops: up to a quarter above the cap
        // (CI saw 44.3 of 40 with 2.11 I/Os per op), while an unthrottled row is 50x above.
        assert!(s <= CAP_IOPS * 1.05, "{id}: {s} ops/s above the cap");
        let iops = s * ios_per_op;
        assert!(
            (0.75 * CAP_IOPS..=1.25 * CAP_IOPS).contains(&iops),
            "{id}: {iops:.1} I/Os per second, not near the cap of {CAP_IOPS}"
        );
        assert!(f >= 5.0 * s, "{id}: unthrottled {f} not far above {s}");
    }
    assert!(leftovers(&m).is_empty());
}

#[test]
fn o_direct_refused_by_ramfs_is_na_and_the_other_rows_run() {
    if !need_root("mounting ramfs") {
        return;
    }
    let d = tempfile::tempdir_in("/var/tmp").unwrap();
    let m = d.path().join("ramfs");
    std::fs::create_dir(&m).unwrap();
    sh("mount", &["-t", "ramfs", "ramfs", m.to_str().unwrap()]);
    struct Unmount(PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(&self.0).status();
        }
    }
    let _u = Unmount(m.clone());
    let (o, v) = fsync_json(&["--dir", m.to_str().unwrap(), "--secs-per-test", "50ms"]);
    assert!(o.status.success(), "n/a is not a failure");
    assert_eq!(tests_of(&v).len(), 22);
    for t in tests_of(&v) {
        let id = t["id"].as_str().unwrap();
        if DIRECT_ROWS.contains(&id) {
            assert_eq!(t["status"], "n/a", "{t:#}");
            assert!(t["reason"].as_str().unwrap().contains("EINVAL"), "{t:#}");
            assert!(t["ops"].is_null());
        } else {
            assert_ran(t);
        }
    }
    assert_eq!(v["fs_type"], "ramfs");
    assert!(v["devices"].as_array().unwrap().is_empty());
    assert!(
        v["devices_note"].as_str().unwrap().contains("ramfs"),
        "{v:#}"
    );
    assert!(leftovers(&m).is_empty());
    // The table says n/a with the reason on the row.
    let o = diskpulse()
        .args([
            "fsync",
            "--dir",
            m.to_str().unwrap(),
            "--secs-per-test",
            "20ms",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    let na = text.lines().filter(|l| l.contains("n/a*  EINVAL")).count();
    assert_eq!(na, DIRECT_ROWS.len(), "{text}");
}

#[test]
fn small_o_direct_writes_on_a_4k_sector_device_are_na_and_the_others_run() {
    if !can_use_loop_devices() {
        return;
    }
    // A loop device with 4 KiB logical blocks, as a 4Kn disk has; LoopDev's Drop cleans up.
    let image = PathBuf::from(format!(
        "/var/tmp/diskpulse-test-4k-{}.img",
        std::process::id()
    ));
    sh("truncate", &["-s", "256M", image.to_str().unwrap()]);
    let dev = sh(
        "losetup",
        &[
            "-f",
            "--show",
            "--sector-size",
            "4096",
            image.to_str().unwrap(),
        ],
    );
    let mut lo = LoopDev {
        image,
        dev,
        mount: None,
    };
    let lbs = std::fs::read_to_string(format!("/sys/block/{}/queue/logical_block_size", lo.name()))
        .unwrap();
    assert_eq!(lbs.trim(), "4096");
    let m = lo.mount_ext4();
    let (o, v) = fsync_json(&[
        "--dir",
        m.to_str().unwrap(),
        "--secs-per-test",
        "50ms",
        "--only",
        "open_sync_16k",
    ]);
    assert!(o.status.success());
    for t in tests_of(&v) {
        let bytes = t["write_bytes"].as_u64().unwrap();
        if bytes < 4096 {
            assert_eq!(t["status"], "n/a", "{t:#}");
            let why = t["reason"].as_str().unwrap();
            assert!(
                why.starts_with("EINVAL") && why.contains(&format!("{bytes}-byte O_DIRECT write")),
                "{why}"
            );
        } else {
            assert_ran(t);
        }
    }
    assert!(leftovers(&m).is_empty());
}

/// Whether the kernel lets this file system open files with O_DIRECT (tmpfs does since 6.6).
fn o_direct_ok(dir: &Path) -> bool {
    use std::os::unix::fs::OpenOptionsExt;
    let p = dir.join("o_direct_probe");
    let r = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .custom_flags(libc::O_DIRECT)
        .open(&p);
    let _ = std::fs::remove_file(&p);
    match r {
        Ok(_) => true,
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => false,
        Err(e) => panic!("probing O_DIRECT in {}: {e}", dir.display()),
    }
}

#[test]
fn on_tmpfs_the_o_direct_rows_follow_the_kernel_and_the_rest_run() {
    let shm = Path::new("/dev/shm");
    if !shm.is_dir() {
        skip("no /dev/shm (a tmpfs at /dev/shm)");
        return;
    }
    let d = tempfile::tempdir_in(shm).unwrap();
    let direct = o_direct_ok(d.path());
    eprintln!(
        "tmpfs {} O_DIRECT on this kernel",
        if direct { "accepts" } else { "refuses" }
    );
    let (o, v) = fsync_json(&[
        "--dir",
        d.path().to_str().unwrap(),
        "--secs-per-test",
        "50ms",
    ]);
    assert!(o.status.success());
    for t in tests_of(&v) {
        let id = t["id"].as_str().unwrap();
        if DIRECT_ROWS.contains(&id) && !direct {
            assert_eq!(t["status"], "n/a", "{t:#}");
            assert!(t["reason"].as_str().unwrap().starts_with("EINVAL"), "{t:#}");
        } else {
            assert_ran(t);
        }
    }
    assert_eq!(v["fs_type"], "tmpfs");
    assert!(v["devices_note"].as_str().unwrap().contains("tmpfs"));
    assert!(leftovers(d.path()).is_empty());
}
