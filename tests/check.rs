//! `diskpulse check` against real loop devices, ext4 and btrfs mounts, and a real `dd`
//! writing during the check. Tests that need root or tools say why and skip.

mod common;
use common::*;

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

fn check(args: &[&str]) -> Output {
    diskpulse().arg("check").args(args).output().unwrap()
}

/// Runs check with --json and parses stdout.
fn check_json(args: &[&str]) -> (serde_json::Value, i32) {
    let mut a = vec!["--json"];
    a.extend_from_slice(args);
    let o = check(&a);
    let code = o.status.code().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    });
    assert_eq!(v["exit_code"], code, "exit_code field vs real exit code");
    (v, code)
}

fn findings<'a>(v: &'a serde_json::Value, code: &str) -> Vec<&'a serde_json::Value> {
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["code"] == code)
        .collect()
}

fn device_names(v: &serde_json::Value) -> Vec<String> {
    v["targets"][0]["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap().to_string())
        .collect()
}

/// Puts a loop device's write_cache back however the test ends.
struct RestoreWriteCache(String, String);
impl Drop for RestoreWriteCache {
    fn drop(&mut self) {
        let _ = std::fs::write(&self.0, &self.1);
    }
}

#[test]
fn loop_device_write_cache_follows_sysfs_and_flipping_it_changes_the_finding() {
    if !can_use_loop_devices() {
        return;
    }
    let lo = LoopDev::new("64M");
    let wc_path = format!("/sys/block/{}/queue/write_cache", lo.name());
    let before = std::fs::read_to_string(&wc_path)
        .unwrap()
        .trim()
        .to_string();
    let _restore = RestoreWriteCache(wc_path.clone(), before.clone());
    std::fs::write(&wc_path, "write back").unwrap();

    let (v, code) = check_json(&["--quick", lo.name()]);
    let d0 = &v["targets"][0]["devices"][0];
    assert_eq!(d0["name"], lo.name());
    assert_eq!(
        d0["queue"]["write_cache"],
        std::fs::read_to_string(&wc_path).unwrap().trim()
    );
    assert_eq!(d0["queue"]["write_cache"], "write back");
    let on = findings(&v, "write-cache-on");
    assert!(
        on.iter()
            .any(|f| f["device"] == lo.name() && f["level"] == "PASS"),
        "{v:#}"
    );
    assert!(findings(&v, "flushes-dropped").is_empty());
    assert_eq!(code, 0);

    // "write through" on a loop device: the kernel stops sending it flushes, so fsync
    // never reaches the disk below. Whether that loses data depends on that disk's cache:
    // the disk below is a second loop device here, set each way in turn.
    // Its image is on tmpfs, so the chain ends there: no disk of the host's (whose cache
    // setting this test does not control) is below it.
    struct Detach(String, Option<std::path::PathBuf>);
    impl Drop for Detach {
        fn drop(&mut self) {
            if let Some(m) = &self.1 {
                let _ = Command::new("umount").arg(m).status();
            }
            let _ = Command::new("losetup").args(["-d", &self.0]).status();
        }
    }
    let shm = tempfile::tempdir_in("/dev/shm").unwrap();
    let below_img = shm.path().join("below.img");
    sh("truncate", &["-s", "128M", below_img.to_str().unwrap()]);
    let below_dev = sh("losetup", &["-f", "--show", below_img.to_str().unwrap()]);
    let below_name = below_dev.trim_start_matches("/dev/").to_string();
    let m = shm.path().join("mnt");
    std::fs::create_dir(&m).unwrap();
    let mut below = Detach(below_dev.clone(), None);
    sh("mkfs.ext4", &["-q", "-F", &below_dev]);
    sh("mount", &[&below_dev, m.to_str().unwrap()]);
    below.1 = Some(m.clone());
    let below_wc = format!("/sys/block/{below_name}/queue/write_cache");
    let below_before = std::fs::read_to_string(&below_wc)
        .unwrap()
        .trim()
        .to_string();
    let _restore_below = RestoreWriteCache(below_wc.clone(), below_before);
    let image = m.join("top.img");
    sh("truncate", &["-s", "64M", image.to_str().unwrap()]);
    let top = sh("losetup", &["-f", "--show", image.to_str().unwrap()]);
    let _detach = Detach(top.clone(), None);
    let top_name = top.trim_start_matches("/dev/").to_string();
    let top_wc = format!("/sys/block/{top_name}/queue/write_cache");
    std::fs::write(&top_wc, "write through").unwrap();

    for setting in ["write back", "write through"] {
        std::fs::write(&below_wc, setting).unwrap();
        let (v, code) = check_json(&["--quick", &top]);
        let devs = v["targets"][0]["devices"].as_array().unwrap();
        let reported = |name: &str| {
            devs.iter()
                .find(|d| d["name"] == name)
                .unwrap_or_else(|| panic!("{name} not listed: {v:#}"))["queue"]["write_cache"]
                .clone()
        };
        // What the check reports is what sysfs says, for both devices.
        assert_eq!(reported(&top_name), "write through", "{v:#}");
        assert_eq!(reported(&below_name), setting, "{v:#}");
        assert_eq!(devs.len(), 2, "the chain ends on tmpfs: {v:#}");
        let dropped = findings(&v, "flushes-dropped");
        if setting == "write back" {
            // A volatile cache below that never gets a flush: FAIL, exit 1.
            assert_eq!(dropped.len(), 1, "{v:#}");
            assert_eq!(dropped[0]["level"], "FAIL");
            assert_eq!(dropped[0]["device"], top_name.as_str());
            assert!(
                dropped[0]["message"]
                    .as_str()
                    .unwrap()
                    .contains(&below_name),
                "{v:#}"
            );
            assert_eq!(code, 1, "a FAIL exits 1 without --strict");
        } else {
            // No cache below either: nothing is lost, nothing fails, exit 0.
            assert!(dropped.is_empty(), "{v:#}");
            assert_eq!(v["counts"]["fail"], 0, "{v:#}");
            assert_eq!(code, 0, "{v:#}");
        }
        assert!(findings(&v, "write-cache-on")
            .iter()
            .all(|f| f["device"] != top_name.as_str()));
    }
    drop(_detach);
    drop(below);
    std::fs::write(&wc_path, "write through").unwrap();

    // The human report says the same.
    let o = check(&["--quick", lo.name()]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("write_cache write through"), "{out}");
}

#[test]
fn ext4_on_loop_lists_the_loop_device_and_the_backing_disk() {
    if !can_use_loop_devices() {
        return;
    }
    let mut lo = LoopDev::new("128M");
    let m = lo.mount_ext4();
    let (v, _) = check_json(&["--quick", m.to_str().unwrap()]);
    let t = &v["targets"][0];
    assert_eq!(t["kind"], "path");
    assert_eq!(t["mount"]["fstype"], "ext4");
    assert_eq!(t["mount"]["source"], lo.dev);
    let names = device_names(&v);
    assert_eq!(names[0], lo.name());
    let backing = collectors::devices::Resolver::default()
        .for_path(Path::new("/var/tmp"))
        .unwrap();
    assert!(names.contains(&backing[0].name), "{names:?}");
    let b = t["devices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == backing[0].name.as_str())
        .unwrap();
    assert_eq!(b["why"], format!("backing file of {}", lo.name()));
    let o = check(&["--quick", m.to_str().unwrap()]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains(&format!("devices: {} -> ", lo.name())),
        "{out}"
    );
}

#[test]
fn btrfs_raid1_lists_both_members() {
    if !can_use_loop_devices() {
        return;
    }
    let Some(r) = BtrfsRaid1::new() else { return };
    let (a, b, m) = (&r.a, &r.b, r.mount.clone());
    let (v, _) = check_json(&["--quick", &m]);
    assert_eq!(v["targets"][0]["mount"]["fstype"], "btrfs");
    let devs = v["targets"][0]["devices"].as_array().unwrap();
    for lo in [&a, &b] {
        let d = devs
            .iter()
            .find(|d| d["name"] == lo.name())
            .unwrap_or_else(|| panic!("{} missing: {v:#}", lo.name()));
        assert!(
            d["why"].as_str().unwrap().starts_with("btrfs member"),
            "{d}"
        );
    }
    // The second member named as a device is found mounted through the first.
    let (v, _) = check_json(&["--quick", b.name()]);
    assert_eq!(v["targets"][0]["mount"]["fstype"], "btrfs", "{v:#}");
}

struct Unmount(String);
impl Drop for Unmount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
        let _ = std::fs::remove_dir(&self.0);
    }
}

#[test]
fn a_mount_without_barriers_warns_and_strict_turns_warn_into_exit_1() {
    if !can_use_loop_devices() {
        return;
    }
    let lo = LoopDev::new("64M");
    sh("mkfs.ext4", &["-q", "-F", &lo.dev]);
    let m = format!("{}.mnt", lo.image.display());
    std::fs::create_dir_all(&m).unwrap();
    let st = Command::new("mount")
        .args(["-o", "nobarrier", &lo.dev, &m])
        .status()
        .unwrap();
    if !st.success() {
        // The mountinfo parser's fixture test covers the option on kernels that refuse it.
        skip("this kernel refuses ext4 -o nobarrier");
        let _ = std::fs::remove_dir(&m);
        return;
    }
    let _u = Unmount(m.clone());
    let (v, code) = check_json(&["--quick", &m]);
    let w = findings(&v, "barriers-off");
    assert_eq!(w.len(), 1, "{v:#}");
    assert_eq!(w[0]["level"], "WARN");
    assert_eq!(v["targets"][0]["mount"]["barrier_off"], "nobarrier");
    assert!(w[0]["advice"].as_str().unwrap().contains("remount"));
    let fails = v["counts"]["fail"].as_u64().unwrap();
    assert_eq!(code, if fails > 0 { 1 } else { 0 }, "WARN alone exits 0");
    let (_, strict) = check_json(&["--quick", "--strict", &m]);
    assert_eq!(strict, 1, "--strict: any WARN exits 1");
    let o = check(&["--quick", &m]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains(&format!("WARN  {m} is mounted with nobarrier")),
        "{out}"
    );
}

#[test]
fn a_process_writing_during_the_check_is_listed_with_the_device() {
    if !can_use_loop_devices() {
        return;
    }
    let mut lo = LoopDev::new("256M");
    let m = lo.mount_ext4();
    // O_DIRECT|O_DSYNC 4 KiB writes: slow enough (each one a flush) to outlast the check.
    let mut dd = Command::new("dd")
        .args([
            "if=/dev/zero",
            &format!("of={}/ddfile", m.display()),
            "bs=4k",
            "count=40000",
            "oflag=direct,dsync",
            "status=none",
        ])
        .spawn()
        .unwrap();
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let pid = dd.id();
    std::thread::sleep(Duration::from_millis(300));
    let still_running = dd.try_wait().unwrap().is_none();
    let dd = Kill(dd);
    assert!(still_running, "dd ended before the check");
    let (v, _) = check_json(&["--quick", m.to_str().unwrap()]);
    drop(dd);
    let procs = v["system"]["processes"].as_array().unwrap();
    let p = procs
        .iter()
        .find(|p| p["pid"] == pid)
        .unwrap_or_else(|| panic!("dd ({pid}) not among busy processes: {v:#}"));
    assert_eq!(p["comm"], "dd");
    assert!(p["write_bytes"].as_u64().unwrap() > 0);
    assert!(
        p["files_on"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d == lo.name()),
        "{p}"
    );
    // The device's own counters over the same second saw the writes.
    let d0 = &v["targets"][0]["devices"][0];
    assert_eq!(d0["name"], lo.name());
    assert!(
        d0["io_during_sample"]["writes"].as_u64().unwrap() > 0,
        "{d0}"
    );
    let busy = findings(&v, "device-busy");
    let mine = busy
        .iter()
        .find(|f| f["device"] == lo.name())
        .unwrap_or_else(|| panic!("no device-busy for {}: {v:#}", lo.name()));
    assert_eq!(mine["level"], "WARN");
    assert!(
        mine["message"]
            .as_str()
            .unwrap()
            .contains(&format!("{pid} dd")),
        "{mine}"
    );
}

#[test]
fn json_carries_the_documented_fields_and_the_test_file_is_removed() {
    if !can_use_loop_devices() {
        return;
    }
    let mut lo = LoopDev::new("128M");
    let m = lo.mount_ext4();
    let (v, _) = check_json(&[
        "--sample",
        "300ms",
        "--test-time",
        "300ms",
        m.to_str().unwrap(),
    ]);
    assert_eq!(v["format_version"], 1);
    let t = &v["targets"][0];
    for k in ["arg", "kind", "path", "mount", "devices", "flush_tests"] {
        assert!(!t[k].is_null(), "targets[0].{k} missing: {t:#}");
    }
    for k in ["point", "fstype", "source", "options"] {
        assert!(!t["mount"][k].is_null(), "mount.{k}");
    }
    let d = &t["devices"][0];
    for k in [
        "name",
        "major",
        "minor",
        "why",
        "kind",
        "queue",
        "io_during_sample",
    ] {
        assert!(!d[k].is_null(), "devices[0].{k} missing: {d:#}");
    }
    for k in [
        "write_cache",
        "fua",
        "rotational",
        "scheduler",
        "nr_requests",
        "read_ahead_kb",
    ] {
        assert!(d["queue"][k].is_string(), "queue.{k}: {d:#}");
    }
    assert_eq!(d["kind"], "loop");
    let f = &t["flush_tests"];
    assert_eq!(f["status"], "measured", "{f:#}");
    for mode in ["direct", "direct_dsync", "write_fdatasync"] {
        let x = &f["modes"][mode];
        assert!(x["ops"].as_u64().unwrap() > 0, "{mode}: {x}");
        for k in [
            "ops_per_s",
            "lat_p50_us",
            "lat_p99_us",
            "lat_max_us",
            "lat_mean_us",
        ] {
            assert!(x[k].as_f64().unwrap() > 0.0, "{mode}.{k}: {x}");
        }
    }
    assert!(f["flush_cost_p50_us"].is_number());
    let written = f["written"].as_str().unwrap();
    assert!(written.starts_with(m.to_str().unwrap()), "{written}");
    assert!(!Path::new(written).exists(), "test file left behind");
    let sys = &v["system"];
    for k in [
        "dirty_ratio",
        "dirty_background_ratio",
        "dirty_bytes",
        "dirty_background_bytes",
        "dirty_expire_centisecs",
        "dirty_writeback_centisecs",
    ] {
        assert!(sys["vm"][k].is_u64(), "vm.{k}");
    }
    assert!(sys["sample_s"].as_f64().unwrap() >= 0.3);
    assert!(sys["processes"].is_array());
    // The clock: the kernel's own clocksource, a step the clock really takes, and the
    // finding that judged it at the level its numbers give.
    let cs = "/sys/devices/system/clocksource/clocksource0";
    let current = std::fs::read_to_string(format!("{cs}/current_clocksource")).unwrap();
    let clock = &sys["clock"];
    assert_eq!(clock["source"], current.trim(), "{clock}");
    let available = std::fs::read_to_string(format!("{cs}/available_clocksource")).unwrap();
    assert_eq!(
        clock["available"],
        serde_json::json!(available.split_whitespace().collect::<Vec<_>>())
    );
    let step = clock["step_ns"].as_u64().unwrap();
    let read = clock["read_ns"].as_f64().unwrap();
    assert!(step > 0 && read > 0.0, "{clock}");
    let judged = findings(&v, "clock");
    assert_eq!(judged.len(), 1, "{v:#}");
    let want = if step > 10_000 || current.contains("jiffies") {
        "WARN"
    } else if read > 500.0 {
        "INFO"
    } else {
        "PASS"
    };
    assert_eq!(judged[0]["level"], want, "{clock} {}", judged[0]);
    let list = v["findings"].as_array().unwrap();
    assert!(!list.is_empty());
    for x in list {
        for k in ["level", "code", "message", "advice"] {
            assert!(x[k].is_string(), "finding.{k}: {x}");
        }
        assert!(["PASS", "INFO", "WARN", "FAIL"].contains(&x["level"].as_str().unwrap()));
    }
    // One of the flush-cost findings is there.
    assert!(
        list.iter().any(
            |x| ["flush-cost", "writes-as-slow-as-flushes", "no-flushes-sent"]
                .contains(&x["code"].as_str().unwrap())
        ),
        "{v:#}"
    );
    let c = &v["counts"];
    let total: u64 = ["pass", "info", "warn", "fail"]
        .iter()
        .map(|k| c[k].as_u64().unwrap())
        .sum();
    assert_eq!(total as usize, list.len());
}

#[test]
fn raw_device_tests_need_allow_destructive_and_never_touch_a_file_system() {
    if !can_use_loop_devices() {
        return;
    }
    let lo = LoopDev::new("64M");
    let (v, _) = check_json(&["--sample", "100ms", lo.name()]);
    assert_eq!(v["targets"][0]["flush_tests"]["status"], "skipped");
    let s = findings(&v, "tests-skipped");
    assert!(
        s[0]["advice"]
            .as_str()
            .unwrap()
            .contains("--allow-destructive"),
        "{s:?}"
    );
    let (v, _) = check_json(&[
        "--sample",
        "100ms",
        "--test-time",
        "200ms",
        "--allow-destructive",
        &lo.dev,
    ]);
    let f = &v["targets"][0]["flush_tests"];
    assert_eq!(f["status"], "measured", "{v:#}");
    assert_eq!(f["written"], lo.dev);

    // With a file system on it (not mounted), even --allow-destructive does not write.
    sh("mkfs.ext4", &["-q", "-F", &lo.dev]);
    let (v, _) = check_json(&["--sample", "100ms", "--allow-destructive", &lo.dev]);
    assert_eq!(v["targets"][0]["flush_tests"]["status"], "skipped");
    assert!(findings(&v, "tests-skipped")[0]["message"]
        .as_str()
        .unwrap()
        .contains("ext2/3/4"));
    let head = collectors::gate::signature::read_head(Path::new(&lo.dev)).unwrap();
    assert_eq!(
        collectors::gate::signature::detect(&head),
        Some(collectors::gate::signature::Signature::Ext)
    );

    // Mounted: the tests run in a file on the mount, never on the raw device.
    let m = format!("{}.mnt", lo.image.display());
    std::fs::create_dir_all(&m).unwrap();
    sh("mount", &[&lo.dev, &m]);
    let _u = Unmount(m.clone());
    let (v, _) = check_json(&[
        "--sample",
        "100ms",
        "--test-time",
        "200ms",
        "--allow-destructive",
        lo.name(),
    ]);
    let f = &v["targets"][0]["flush_tests"];
    assert_eq!(f["status"], "measured", "{v:#}");
    assert!(f["written"].as_str().unwrap().starts_with(&m), "{f}");
}

fn one_line_exit_2(args: &[&str], must: &[&str]) {
    let o = check(args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
    // clap adds a blank line and "For more information, try '--help'." to its own errors.
    let lines = err
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with("For more information"))
        .count();
    assert_eq!(lines, 1, "one line: {err}");
    assert!(o.stdout.is_empty());
    for m in must {
        assert!(err.contains(m), "'{m}' not in {err}");
    }
}

#[test]
fn tmpfs_unknown_devices_and_missing_paths_are_one_line_and_exit_2() {
    one_line_exit_2(&["/dev/shm"], &["/dev/shm", "tmpfs", "no block device"]);
    one_line_exit_2(&["--json", "/dev/shm"], &["tmpfs"]);
    one_line_exit_2(&["nosuchdisk9"], &["nosuchdisk9", "devices here"]);
    one_line_exit_2(&["/no/such/path"], &["/no/such/path"]);
    one_line_exit_2(&["--sample", "1 s", "/var/tmp"], &["'1 s'"]);
}

#[test]
fn ctrl_c_during_the_flush_tests_removes_the_test_file_and_exits_130() {
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let c = diskpulse()
        .args(["check", "--sample", "100ms", "--test-time", "5s"])
        .arg(dir.path())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the test file exists, then interrupt.
    let t0 = std::time::Instant::now();
    while std::fs::read_dir(dir.path()).unwrap().count() == 0 {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "no test file appeared"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: kill has no memory preconditions; the pid is our own child.
    unsafe { libc::kill(c.id() as i32, libc::SIGINT) };
    let o = c.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(130));
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "test file left"
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("flush tests not run (interrupted)"), "{out}");
}
