//! Lab volumes on real loop devices: ext4, xfs and btrfs RAID 1 up and down, a blkio
//! throttle that really caps a process's O_DIRECT writes, SIGINT and SIGKILL in the
//! middle of `lab up`, teardown that leaves a loop device and a mount that are not ours
//! alone, stale entries, bad input. Each test has its own lab root under /var/tmp and
//! its own volume names (cgroups are machine-wide). Tests that need root say why and
//! skip.

mod common;
use common::*;

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
        for c in cgroups {
            let p = Path::new(Lab::BLKIO).join(format!("diskpulse-{c}"));
            assert!(!p.exists(), "{} is left", p.display());
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
        collectors::clock::monotonic_ns() % 1_000_000
    )
}

fn have(tool: &str, package: &str) -> bool {
    if Command::new(tool).arg("--version").output().is_err()
        && Command::new(tool).arg("-V").output().is_err()
    {
        eprintln!("skipping: {tool} not found (apt-get install {package})");
        return false;
    }
    true
}

fn can_throttle() -> bool {
    if !Path::new(Lab::BLKIO).join("cgroup.procs").exists() {
        eprintln!("skipping: cgroup v1 blkio is not mounted at {}", Lab::BLKIO);
        return false;
    }
    true
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

/// Runs `dd` writing `count` 4 KiB O_DIRECT blocks over an existing file; returns IOPS.
fn dd_iops(file: &Path, count: u32, vol: Option<&diskpulse::lab::Volume>) -> f64 {
    let mut cmd = Command::new("dd");
    cmd.args([
        "if=/dev/zero",
        &format!("of={}", file.display()),
        "bs=4k",
        &format!("count={count}"),
        "oflag=direct",
        "conv=notrunc",
    ])
    .stdout(Stdio::null())
    .stderr(Stdio::null());
    if let Some(v) = vol {
        v.throttle_command(&mut cmd).unwrap();
    }
    let t0 = Instant::now();
    let st = cmd.status().unwrap();
    assert!(st.success());
    count as f64 / t0.elapsed().as_secs_f64()
}

#[test]
fn a_write_iops_throttle_caps_o_direct_writes_of_processes_in_the_cgroup() {
    if !can_use_loop_devices() || !can_throttle() {
        return;
    }
    // Images on tmpfs: the unthrottled rate is then the loop stack's own (tens of
    // thousands of IOPS), not that of a virtual disk shared with other builds, so
    // "far below unthrottled" holds however busy the machine is.
    let t = TestLab::new_in("/dev/shm");
    let name = unique("thr");
    let spec = VolumeSpec {
        throttle: Some(Throttle {
            write_iops: Some(200),
            ..Default::default()
        }),
        ..VolumeSpec::new(&name, 256 << 20, Fs::Ext4)
    };
    let vol = t.lab().up(&spec).unwrap();
    let cg = vol.cgroup.clone().expect("a throttled volume has a cgroup");
    assert_eq!(cg, Path::new(Lab::BLKIO).join(format!("diskpulse-{name}")));
    let (maj, min) = {
        let d =
            std::fs::read_to_string(format!("/sys/block/{}/dev", vol.device_names()[0])).unwrap();
        let (a, b) = d.trim().split_once(':').unwrap();
        (a.to_string(), b.to_string())
    };
    let rules = std::fs::read_to_string(cg.join("blkio.throttle.write_iops_device")).unwrap();
    assert_eq!(rules.trim(), format!("{maj}:{min} 200"));

    // Allocate the file first (outside the cgroup), so both runs overwrite in place.
    let f = vol.mount.join("f");
    write_direct(&f, 4 << 20, 1 << 20);
    let free = dd_iops(&f, 1000, None);
    let capped = dd_iops(&f, 400, Some(&vol));
    eprintln!("4 KiB O_DIRECT writes: {free:.0} IOPS unthrottled, {capped:.0} IOPS in the cgroup (cap 200)");
    assert!(
        (120.0..=260.0).contains(&capped),
        "throttled to 200 but measured {capped:.0} IOPS"
    );
    assert!(
        free > 3.0 * capped,
        "unthrottled {free:.0} IOPS should be far above throttled {capped:.0}"
    );
    // The kernel charged those writes to the cgroup, on our device.
    let served = std::fs::read_to_string(cg.join("blkio.throttle.io_serviced")).unwrap();
    let writes: u64 = served
        .lines()
        .find(|l| l.starts_with(&format!("{maj}:{min} Write")))
        .and_then(|l| l.split_whitespace().nth(2))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(writes >= 400, "io_serviced: {served}");

    // add_pid moves a running process in; down moves it out and removes the cgroup.
    let mut sleeper = Command::new("sleep").arg("30").spawn().unwrap();
    vol.add_pid(sleeper.id()).unwrap();
    let procs = std::fs::read_to_string(cg.join("cgroup.procs")).unwrap();
    assert!(
        procs.lines().any(|l| l == sleeper.id().to_string()),
        "{procs}"
    );
    vol.down().unwrap();
    assert!(!cg.exists());
    sleeper.kill().unwrap();
    let _ = sleeper.wait();
    t.assert_clean(&[&name]);
}

#[test]
fn sigint_in_the_middle_of_lab_up_leaves_nothing_behind() {
    if !can_use_loop_devices() || !have("mkfs.btrfs", "btrfs-progs") {
        return;
    }
    let t = TestLab::new();
    let name = unique("int");
    let mut interrupted = 0;
    let mut rolled_back_devices = 0;
    let mut completed = 0;
    // A btrfs RAID 10 over four 1 GiB devices takes ~0.5-1 s to build here: signals at
    // these delays land while images, loop devices, mkfs or mount are under way.
    for delay_ms in [5u64, 30, 80, 150, 250, 320, 400, 480, 600, 900] {
        let child = diskpulse()
            .args([
                "lab", "up", &name, "--fs", "btrfs", "--raid", "10", "--size", "1G",
            ])
            .args(["--write-iops", "5000", "--root", t.root_s()])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(delay_ms));
        // SAFETY: kill with a pid we spawned.
        unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        match out.status.code() {
            Some(130) => {
                interrupted += 1;
                assert!(err.contains("interrupted"), "{err}");
                if err.contains("detached /dev/loop") {
                    rolled_back_devices += 1;
                }
            }
            Some(0) => {
                completed += 1;
                assert_eq!(t.cli(&["down", &name]).status.code(), Some(0));
            }
            // The signal beat the handler (nothing can have been created yet).
            None if out.status.signal() == Some(libc::SIGINT) => {}
            other => panic!("after SIGINT at {delay_ms} ms: exit {other:?}: {err}"),
        }
        eprintln!(
            "SIGINT at {delay_ms} ms: exit {:?}: {}",
            out.status.code(),
            err.trim()
        );
        t.assert_clean(&[&name]);
    }
    assert!(
        interrupted >= 2,
        "only {interrupted} runs were interrupted ({completed} completed)"
    );
    assert!(
        rolled_back_devices >= 1,
        "no SIGINT landed after a loop device was attached"
    );
}

#[test]
fn sigkill_in_the_middle_of_lab_up_leaves_a_stale_entry_that_down_all_cleans() {
    if !can_use_loop_devices() || !have("mkfs.btrfs", "btrfs-progs") {
        return;
    }
    let t = TestLab::new();
    let name = unique("kill");
    let mut stale_seen = 0;
    for delay_ms in [20u64, 100, 250, 500] {
        let mut child = diskpulse()
            .args([
                "lab", "up", &name, "--fs", "btrfs", "--raid", "1", "--size", "1G",
            ])
            .args(["--root", t.root_s()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(delay_ms));
        let _ = child.kill(); // SIGKILL: no handler runs, no rollback
        let st = child.wait().unwrap();
        // Its tools get SIGKILL too (PR_SET_PDEATHSIG); give a mount(2) in flight time
        // to return, as it would have long before anyone runs `down` by hand.
        std::thread::sleep(Duration::from_millis(300));
        let vols = t.lab().list().unwrap();
        if let Some(v) = vols.first() {
            if st.code() != Some(0) {
                assert_eq!(v.state, VolumeState::Stale, "{v:?}");
                let o = t.cli(&["list"]);
                let text = String::from_utf8_lossy(&o.stdout);
                assert!(text.contains("stale"), "{text}");
                stale_seen += 1;
            }
        }
        let o = t.cli(&["down", "--all"]);
        assert_eq!(o.status.code(), Some(0));
        t.assert_clean(&[&name]);
    }
    assert!(stale_seen >= 1, "no kill landed mid-way");
}

#[test]
fn a_dead_creator_makes_an_entry_stale_and_down_all_cleans_it() {
    if !can_use_loop_devices() {
        return;
    }
    let t = TestLab::new();
    let name = unique("dead");
    // A volume made through the library whose creator "died": forget the handle without
    // its Drop and hand the entry to a pid that has exited.
    let vol = t
        .lab()
        .up(&VolumeSpec::new(&name, 64 << 20, Fs::Ext4))
        .unwrap();
    let mount = vol.mount.clone();
    let mut ok = t.lab().list().unwrap();
    assert_eq!(ok[0].state, VolumeState::Ok, "its creator (us) is alive");
    std::mem::forget(vol);
    let mut gone = Command::new("true").spawn().unwrap();
    let dead_pid = gone.id();
    gone.wait().unwrap();
    let p = t.root.join("state.json");
    let mut s = read_json(&p);
    s["volumes"][0]["owner_pid"] = dead_pid.into();
    std::fs::write(&p, serde_json::to_string(&s).unwrap()).unwrap();

    ok = t.lab().list().unwrap();
    assert_eq!(ok[0].state, VolumeState::Stale);
    assert!(
        ok[0]
            .problem
            .as_deref()
            .unwrap()
            .contains(&dead_pid.to_string()),
        "{:?}",
        ok[0].problem
    );
    let o = t.cli(&["list", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["volumes"][0]["state"], "stale");
    assert!(mounted_at(&mount).is_some(), "list changes nothing");

    assert_eq!(t.cli(&["down", "--all"]).status.code(), Some(0));
    t.assert_clean(&[]);
    // And with nothing left, --all is a no-op that succeeds.
    assert_eq!(t.cli(&["down", "--all"]).status.code(), Some(0));
}

#[test]
fn down_leaves_a_loop_device_and_a_mount_that_are_not_ours_alone() {
    if !can_use_loop_devices() {
        return;
    }
    let t = TestLab::new();
    std::fs::create_dir_all(t.root.join("images")).unwrap();
    std::fs::create_dir_all(t.root.join("mnt/fake")).unwrap();
    // A loop device made by hand, over an image outside the lab, with ext4 mounted at
    // the very place the lab would mount "fake".
    let mut foreign = LoopDev::new("64M");
    sh("mkfs.ext4", &["-q", "-F", &foreign.dev]);
    let point = t.root.join("mnt/fake");
    sh("mount", &[&foreign.dev, point.to_str().unwrap()]);
    foreign.mount = Some(point.clone());
    std::fs::write(point.join("precious"), b"not yours").unwrap();

    // A state entry that claims it, twice over: once with an image path of the lab,
    // once with the foreign image itself (outside ROOT/images).
    let lab_img = t.root.join("images/fake-0.img");
    let entry = |name: &str, img: &Path| {
        serde_json::json!({
            "name": name, "id": format!("{name}-1-1"),
            "spec": {"name": name, "size_bytes": 64u64 << 20, "fs": "ext4", "raid": "single",
                     "devices": 1, "mount_options": null, "throttle": null, "write_cache": null},
            "owner_pid": 1, "owner_start_ticks": 0, "kept": true, "complete": true,
            "created": "2025-01-01T00:00:00Z",
            "images": [img],
            "loop_devices": [{"device": foreign.dev, "image": img, "write_cache_before": "write through"}],
            "mount": t.root.join(format!("mnt/{name}")),
            "cgroup": null
        })
    };
    let state = serde_json::json!({
        "format_version": 1,
        "volumes": [entry("fake", &lab_img), entry("fake2", &foreign.image)]
    });
    std::fs::write(t.root.join("state.json"), state.to_string()).unwrap();
    let wc = format!("/sys/block/{}/queue/write_cache", foreign.name());
    let wc_before = std::fs::read_to_string(&wc).unwrap();

    let vols = t.lab().list().unwrap();
    assert!(
        vols.iter().all(|v| v.state == VolumeState::Stale),
        "{vols:?}"
    );

    // The mount at our mount point is not from our loop device: refused, exit 1.
    let o = t.cli(&["down", "fake"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("not ours"));
    assert_eq!(
        mounted_at(&point).map(|m| m.0),
        Some(foreign.dev.clone()),
        "the foreign mount survives"
    );
    assert_eq!(std::fs::read(point.join("precious")).unwrap(), b"not yours");

    // Without the mount in the way: the entry goes, the device stays attached.
    sh("umount", &[point.to_str().unwrap()]);
    foreign.mount = None;
    let o = t.cli(&["down", "--all"]);
    assert_eq!(o.status.code(), Some(0));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("left alone"), "{err}");
    let backing =
        std::fs::read_to_string(format!("/sys/block/{}/loop/backing_file", foreign.name()))
            .expect("the foreign loop device is still attached");
    assert_eq!(backing.trim(), foreign.image.to_str().unwrap());
    assert!(
        foreign.image.exists(),
        "the foreign image is not ours to remove"
    );
    assert_eq!(
        std::fs::read_to_string(&wc).unwrap(),
        wc_before,
        "its write_cache untouched"
    );
    assert_eq!(t.state()["volumes"].as_array().unwrap().len(), 0);
}

fn fails_with_usage(args: &[&str], must_contain: &[&str]) {
    let o = diskpulse().arg("lab").args(args).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
    let lines = err
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with("For more information"))
        .count();
    assert_eq!(lines, 1, "one line expected: {err}");
    for m in must_contain {
        assert!(err.contains(m), "{args:?}: '{m}' not in: {err}");
    }
}

#[test]
fn bad_input_is_one_line_and_exit_2_with_nothing_created() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("lab");
    let r = root.to_str().unwrap();
    fails_with_usage(
        &["up", "v", "--size", "1G", "--fs", "zfs", "--root", r],
        &["'zfs'", "ext4"],
    );
    fails_with_usage(
        &[
            "up",
            "v",
            "--size",
            "1G",
            "--fs",
            "btrfs",
            "--raid",
            "1",
            "--devices",
            "1",
            "--root",
            r,
        ],
        &["raid1", "at least 2"],
    );
    fails_with_usage(
        &[
            "up",
            "v",
            "--size",
            "1G",
            "--fs",
            "btrfs",
            "--raid",
            "10",
            "--devices",
            "3",
            "--root",
            r,
        ],
        &["at least 4"],
    );
    fails_with_usage(
        &[
            "up", "v", "--size", "1G", "--fs", "btrfs", "--raid", "5", "--root", r,
        ],
        &["'5'"],
    );
    fails_with_usage(
        &["up", "v", "--size", "100M", "--fs", "btrfs", "--root", r],
        &["125 MiB", "100 MiB"],
    );
    fails_with_usage(
        &["up", "v", "--size", "200M", "--fs", "xfs", "--root", r],
        &["300 MiB"],
    );
    fails_with_usage(
        &["up", "a/b", "--size", "1G", "--fs", "ext4", "--root", r],
        &["'a/b'"],
    );
    fails_with_usage(
        &[
            "up", "v", "--size", "1G", "--fs", "ext4", "--raid", "0", "--root", r,
        ],
        &["--fs btrfs"],
    );
    fails_with_usage(
        &["up", "v", "--size", "1 G", "--fs", "ext4", "--root", r],
        &["'1 G'"],
    );
    fails_with_usage(
        &[
            "up",
            "v",
            "--size",
            "1G",
            "--fs",
            "ext4",
            "--write-cache",
            "maybe",
            "--root",
            r,
        ],
        &["'maybe'"],
    );
    fails_with_usage(
        &[
            "up",
            "v",
            "--size",
            "1G",
            "--fs",
            "ext4",
            "--write-iops",
            "0",
            "--root",
            r,
        ],
        &["0"],
    );
    fails_with_usage(&["down", "../x", "--root", r], &["'../x'"]);
    fails_with_usage(&["down", "nosuch", "--root", r], &["nosuch"]);
    assert!(!root.exists(), "bad input creates nothing");
}
