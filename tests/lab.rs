//! Lab volumes on real loop devices: ext4, xfs and btrfs RAID 1 up and down, a blkio
//! throttle that really caps a process's O_DIRECT writes, SIGINT and SIGKILL in the
//! middle of `lab up`, teardown that leaves a loop device and a mount that are not ours
//! alone, stale entries, bad input. Each test has its own lab root under /var/tmp and
//! its own volume names (cgroups are machine-wide); tests that throttle take
//! `common::cgroup::lock()` and use whichever hierarchy holds the block I/O controller
//! (tests/lab_cgroup2.rs tests v1 and v2 each). Tests that need root say why and skip
//! (see `common::skip`).

mod common;
use common::*;

// The tests, by what they look at (in tests/lab/); they share the helpers below.
#[path = "lab/bad_input.rs"]
mod bad_input;
#[path = "lab/teardown.rs"]
mod teardown;
#[path = "lab/throttle.rs"]
mod throttle;

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use diskpulse::lab::{Fs, Lab, Raid, Throttle, VolumeSpec, VolumeState};

/// A lab root of its own; dropping it tears down whatever a failed test left, then
/// removes the directory.
struct TestLab {
    dir: Option<tempfile::TempDir>,
    root: PathBuf,
}

impl TestLab {
    fn new() -> TestLab {
        TestLab::new_in("/var/tmp")
    }

    fn new_in(parent: &str) -> TestLab {
        let dir = tempfile::Builder::new()
            .prefix("diskpulse-labtest-")
            .tempdir_in(parent)
            .unwrap();
        let root = dir.path().to_path_buf();
        TestLab {
            dir: Some(dir),
            root,
        }
    }

    fn root_s(&self) -> &str {
        self.root.to_str().unwrap()
    }

    fn lab(&self) -> Lab {
        Lab::open(&self.root)
    }

    fn cli(&self, args: &[&str]) -> Output {
        let o = diskpulse()
            .arg("lab")
            .args(args)
            .args(["--root", self.root_s()])
            .output()
            .unwrap();
        eprintln!(
            "lab {args:?} -> {:?}\n{}",
            o.status.code(),
            String::from_utf8_lossy(&o.stderr)
        );
        o
    }

    /// `lab up` that must work; returns the mount point it printed.
    fn up(&self, args: &[&str]) -> PathBuf {
        let mut a = vec!["up"];
        a.extend_from_slice(args);
        let o = self.cli(&a);
        assert_eq!(o.status.code(), Some(0), "lab {a:?} failed");
        PathBuf::from(String::from_utf8_lossy(&o.stdout).trim())
    }

    fn state(&self) -> serde_json::Value {
        let p = self.root.join("state.json");
        if p.exists() {
            read_json(&p)
        } else {
            serde_json::json!({"volumes": []})
        }
    }

    /// Nothing of this lab is left: no mount, no loop device over its images, no image,
    /// no mount point, no state entry, none of `cgroups`.
    fn assert_clean(&self, cgroups: &[&str]) {
        let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        assert!(
            !mounts.contains(self.root_s()),
            "a mount is left under {}:\n{mounts}",
            self.root.display()
        );
        let backed = loops_backed_under(&self.root);
        assert!(backed.is_empty(), "loop devices left: {backed:?}");
        let losetup = sh("losetup", &["-a"]);
        assert!(!losetup.contains(self.root_s()), "losetup -a: {losetup}");
        for d in ["images", "mnt"] {
            let p = self.root.join(d);
            if p.exists() {
                let left: Vec<_> = std::fs::read_dir(&p).unwrap().collect();
                assert!(left.is_empty(), "{} holds {left:?}", p.display());
            }
        }
        let v = self.state();
        assert_eq!(v["volumes"].as_array().unwrap().len(), 0, "state: {v:#}");
        if let Ok(h) = diskpulse::lab::cgroup::Hierarchy::find() {
            for c in cgroups {
                let p = h.group(c);
                assert!(!p.exists(), "{} is left", p.display());
            }
        }
    }
}

impl Drop for TestLab {
    fn drop(&mut self) {
        if let Err(e) = self.lab().down_all() {
            eprintln!("cleanup of {}: {e:#}", self.root.display());
        }
        if !loops_backed_under(&self.root).is_empty()
            || std::fs::read_to_string("/proc/self/mountinfo")
                .unwrap()
                .contains(self.root_s())
        {
            // Never recurse into a file system that is still mounted: keep the directory.
            let _ = self.dir.take().map(|d| d.keep());
        }
    }
}

/// `(loopN, backing file)` of every loop device backed by a file under `root`.
fn loops_backed_under(root: &Path) -> Vec<(String, String)> {
    let mut v = Vec::new();
    for e in std::fs::read_dir("/sys/block").unwrap().flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        if let Ok(b) = std::fs::read_to_string(e.path().join("loop/backing_file")) {
            if b.starts_with(root.to_str().unwrap()) {
                v.push((name, b.trim().to_string()));
            }
        }
    }
    v
}

/// A volume name no other test (or run) uses at the same time: cgroups are machine-wide.
fn unique(prefix: &str) -> String {
    format!(
        "{prefix}-{}-{}",
        std::process::id(),
        common::unique_suffix()
    )
}

fn have(tool: &str, package: &str) -> bool {
    have_tool(tool, package)
}

/// The /proc/mounts line for `point`: (source, fstype).
fn mounted_at(point: &Path) -> Option<(String, String)> {
    let m = std::fs::read_to_string("/proc/mounts").unwrap();
    m.lines().find_map(|l| {
        let f: Vec<&str> = l.split(' ').collect();
        (f.get(1) == Some(&point.to_str().unwrap())).then(|| (f[0].to_string(), f[2].to_string()))
    })
}

/// sectors_written of a block device from sysfs.
fn sectors_written(dev: &str) -> u64 {
    let s = std::fs::read_to_string(format!("/sys/block/{dev}/stat")).unwrap();
    s.split_whitespace().nth(6).unwrap().parse().unwrap()
}

#[test]
fn ext4_single_up_and_down_leaves_no_loop_device_mount_or_image() {
    if !can_use_loop_devices() {
        return;
    }
    let t = TestLab::new();
    let name = unique("e4");
    let t0 = Instant::now();
    let mount = t.up(&[&name, "--size", "256M", "--fs", "ext4"]);
    let up_s = t0.elapsed().as_secs_f64();
    assert_eq!(mount, t.root.join("mnt").join(&name));
    let (source, fstype) = mounted_at(&mount).expect("mounted");
    assert_eq!(fstype, "ext4");
    assert!(source.starts_with("/dev/loop"), "{source}");
    let loops = loops_backed_under(&t.root);
    assert_eq!(loops.len(), 1, "{loops:?}");
    assert_eq!(format!("/dev/{}", loops[0].0), source);
    let loopn = loops[0].0.clone();
    assert_eq!(
        std::fs::read_to_string(format!("/sys/block/{loopn}/loop/dio"))
            .unwrap()
            .trim(),
        "1",
        "the loop device does direct I/O to its image"
    );
    assert!(t.root.join(format!("images/{name}-0.img")).exists());
    write_direct(&mount.join("data"), 4 << 20, 1 << 20);

    // list: ok, with what was made.
    let o = t.cli(&["list", "--json"]);
    assert_eq!(o.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let e = &v["volumes"][0];
    assert_eq!(e["name"], name.as_str());
    assert_eq!(e["state"], "ok", "{v:#}");
    assert_eq!(e["fs"], "ext4");
    assert_eq!(e["raid"], "single");
    assert_eq!(e["size_bytes"], 256u64 << 20);
    assert_eq!(e["loop_devices"][0], source.as_str());
    assert_eq!(e["direct_io"][0], true);
    assert_eq!(e["kept"], true);
    let human = String::from_utf8_lossy(&t.cli(&["list"]).stdout).to_string();
    assert!(human.contains(&name) && human.contains(" ok "), "{human}");

    let t1 = Instant::now();
    let o = t.cli(&["down", &name]);
    assert_eq!(o.status.code(), Some(0));
    eprintln!(
        "ext4 1 x 256 MiB: up {up_s:.2} s, down {:.2} s",
        t1.elapsed().as_secs_f64()
    );
    t.assert_clean(&[]);
    assert!(mounted_at(&mount).is_none());
}

#[test]
fn xfs_up_and_down_with_write_cache_through_put_back_after() {
    if !can_use_loop_devices() || !have("mkfs.xfs", "xfsprogs") {
        return;
    }
    let t = TestLab::new();
    let name = unique("xfs");
    let t0 = Instant::now();
    let mount = t.up(&[
        &name,
        "--size",
        "300M",
        "--fs",
        "xfs",
        "--write-cache",
        "through",
        "--mount-options",
        "noatime",
    ]);
    let up_s = t0.elapsed().as_secs_f64();
    let (source, fstype) = mounted_at(&mount).expect("mounted");
    assert_eq!(fstype, "xfs");
    let loopn = source.trim_start_matches("/dev/").to_string();
    let wc = format!("/sys/block/{loopn}/queue/write_cache");
    assert_eq!(
        std::fs::read_to_string(&wc).unwrap().trim(),
        "write through"
    );
    // What it was before, as recorded in the state file.
    let before = t.state()["volumes"][0]["loop_devices"][0]["write_cache_before"]
        .as_str()
        .expect("recorded before it was changed")
        .to_string();
    let opts = std::fs::read_to_string("/proc/mounts").unwrap();
    let line = opts
        .lines()
        .find(|l| l.contains(mount.to_str().unwrap()))
        .unwrap();
    assert!(line.contains("noatime"), "{line}");
    let t1 = Instant::now();
    assert_eq!(t.cli(&["down", &name]).status.code(), Some(0));
    eprintln!(
        "xfs 1 x 300 MiB: up {up_s:.2} s, down {:.2} s",
        t1.elapsed().as_secs_f64()
    );
    t.assert_clean(&[]);
    // The kernel keeps write_cache for the next user of the device: we put it back.
    assert_eq!(std::fs::read_to_string(&wc).unwrap().trim(), before);
}

#[test]
fn btrfs_raid1_over_two_devices_mirrors_every_write() {
    if !can_use_loop_devices() || !have("mkfs.btrfs", "btrfs-progs") {
        return;
    }
    let t = TestLab::new();
    let name = unique("r1");
    let spec = VolumeSpec {
        raid: Raid::Raid1,
        devices: 2,
        ..VolumeSpec::new(&name, 512 << 20, Fs::Btrfs)
    };
    let t0 = Instant::now();
    let vol = t.lab().up(&spec).unwrap();
    let up_s = t0.elapsed().as_secs_f64();
    let names = vol.device_names();
    assert_eq!(names.len(), 2);
    assert_ne!(names[0], names[1]);

    // The kernel's view: both loop devices are members of the mounted file system.
    let show = sh(
        "btrfs",
        &["filesystem", "show", vol.mount.to_str().unwrap()],
    );
    let uuid = show
        .split("uuid:")
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .to_string();
    for n in &names {
        assert!(show.contains(&format!("/dev/{n}")), "{show}");
        assert!(
            Path::new(&format!("/sys/fs/btrfs/{uuid}/devices/{n}")).exists(),
            "sysfs lists {n}"
        );
    }
    // No background discards on our volumes.
    let (_, _) = mounted_at(&vol.mount).unwrap();
    let m = std::fs::read_to_string("/proc/mounts").unwrap();
    let line = m
        .lines()
        .find(|l| l.contains(vol.mount.to_str().unwrap()))
        .unwrap();
    assert!(!line.contains("discard=async"), "{line}");

    // 64 MiB written and synced reach *both* devices.
    let before: Vec<u64> = names.iter().map(|n| sectors_written(n)).collect();
    write_direct(&vol.mount.join("data"), 64 << 20, 1 << 20);
    sh("sync", &["-f", vol.mount.join("data").to_str().unwrap()]);
    let after: Vec<u64> = names.iter().map(|n| sectors_written(n)).collect();
    for i in 0..2 {
        let mib = ((after[i] - before[i]) * 512) >> 20;
        assert!(mib >= 64, "{} got only {mib} MiB of 64 written", names[i]);
    }
    let df = sh("btrfs", &["filesystem", "df", vol.mount.to_str().unwrap()]);
    assert!(df.contains("Data, RAID1"), "{df}");
    assert!(Path::new(&format!("/sys/fs/btrfs/{uuid}/allocation/data/raid1")).exists());

    let t1 = Instant::now();
    drop(vol); // the guard tears down
    eprintln!(
        "btrfs raid1 2 x 512 MiB: up {up_s:.2} s, down {:.2} s",
        t1.elapsed().as_secs_f64()
    );
    t.assert_clean(&[]);
    assert!(!Path::new(&format!("/sys/fs/btrfs/{uuid}")).exists());
}

#[test]
fn btrfs_raid0_and_raid10_come_up_with_their_profiles() {
    if !can_use_loop_devices() || !have("mkfs.btrfs", "btrfs-progs") {
        return;
    }
    let t = TestLab::new();
    for (raid, n, profile) in [(Raid::Raid0, 2, "RAID0"), (Raid::Raid10, 4, "RAID10")] {
        let spec = VolumeSpec {
            raid,
            devices: n,
            ..VolumeSpec::new(&unique(raid.name()), 256 << 20, Fs::Btrfs)
        };
        let t0 = Instant::now();
        let vol = t.lab().up(&spec).unwrap();
        let up_s = t0.elapsed().as_secs_f64();
        assert_eq!(vol.loop_devices.len(), n);
        let df = sh("btrfs", &["filesystem", "df", vol.mount.to_str().unwrap()]);
        assert!(df.contains(&format!("Data, {profile}")), "{df}");
        assert!(df.contains(&format!("Metadata, {profile}")), "{df}");
        let t1 = Instant::now();
        vol.down().unwrap();
        eprintln!(
            "btrfs {} {n} x 256 MiB: up {up_s:.2} s, down {:.2} s",
            raid.name(),
            t1.elapsed().as_secs_f64()
        );
    }
    t.assert_clean(&[]);
}
