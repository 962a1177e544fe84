//! Throttle tests and the block I/O cgroup controller: one lock for all of them, a
//! throttling cgroup in whichever hierarchy holds the controller (v1 blkio or v2 io, the
//! lab's own [`Hierarchy::find`]), and a guard that moves the controller from v1 to v2
//! for a test and back.
//!
//! The controller is machine-wide: a test that unmounts cgroup v1 blkio would break any
//! other throttle test running meanwhile. So every test that throttles takes
//! [`lock`] (an exclusive `flock` on `/run/diskpulse-cgroup-test.lock`, across test
//! binaries) for its whole length.

use std::fs;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

pub use diskpulse::lab::cgroup::{Hierarchy, Version};

pub const LOCK: &str = "/run/diskpulse-cgroup-test.lock";
/// Where this machine mounts cgroup v1 blkio (Debian's hybrid layout).
pub const V1_BLKIO: &str = "/sys/fs/cgroup/blkio";

/// Held for a throttle test's whole length; released on drop (also on panic).
pub struct Lock(fs::File);

/// Takes the machine-wide throttle-test lock, waiting for whoever holds it.
pub fn lock() -> Lock {
    let f = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(LOCK)
        .unwrap_or_else(|e| panic!("opening {LOCK}: {e}"));
    // SAFETY: flock on a file descriptor we own.
    let r = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) };
    assert_eq!(r, 0, "flock {LOCK}: {}", std::io::Error::last_os_error());
    Lock(f)
}

/// The hierarchy holding the block I/O controller; skips (see [`super::skip`]) without.
pub fn hierarchy() -> Option<Hierarchy> {
    match Hierarchy::find() {
        Ok(h) => Some(h),
        Err(e) => {
            super::skip(&format!("throttle tests need a block I/O cgroup: {e:#}"));
            None
        }
    }
}

/// A cgroup with a write IOPS cap on one device; processes exit, then it is removed on
/// drop.
pub struct Throttled {
    pub dir: PathBuf,
    pub version: Version,
    majmin: String,
}

impl Throttled {
    pub fn new(h: &Hierarchy, dev: &str, write_iops: u32) -> Throttled {
        let name = format!("test-{}-{}", std::process::id(), super::unique_suffix());
        let dir = h.group(&name);
        h.enable().unwrap();
        fs::create_dir(&dir).unwrap_or_else(|e| panic!("mkdir {}: {e}", dir.display()));
        let t = Throttled {
            dir,
            version: h.version,
            majmin: majmin(dev),
        };
        let (maj, min) = t.majmin.split_once(':').unwrap();
        let throttle = diskpulse::lab::Throttle {
            write_iops: Some(write_iops.into()),
            ..Default::default()
        };
        for (file, line) in h.rules(&throttle, maj.parse().unwrap(), min.parse().unwrap()) {
            fs::write(t.dir.join(file), &line).unwrap_or_else(|e| panic!("{file} {line}: {e}"));
        }
        t
    }

    /// `argv` run by a shell that first moves itself into the cgroup.
    pub fn command(&self, argv: &[&str]) -> Command {
        let mut c = Command::new("sh");
        c.arg("-c")
            .arg(format!(
                "echo $$ > {}/cgroup.procs && exec \"$@\"",
                self.dir.display()
            ))
            .arg("sh")
            .args(argv);
        c
    }

    /// Write I/Os the kernel charged to this cgroup on the device (v1
    /// `blkio.throttle.io_serviced` `Write`, v2 `io.stat` `wios=`).
    pub fn writes_charged(&self) -> u64 {
        writes_charged(&self.dir, self.version, &self.majmin)
    }
}

impl Drop for Throttled {
    fn drop(&mut self) {
        for _ in 0..100 {
            if fs::remove_dir(&self.dir).is_ok() || !self.dir.exists() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        eprintln!("{} is left (processes still in it?)", self.dir.display());
    }
}

/// `MAJ:MIN` of a block device node (`/dev/loop3`) or sysfs name (`loop3`).
pub fn majmin(dev: &str) -> String {
    let name = dev.trim_start_matches("/dev/");
    fs::read_to_string(format!("/sys/block/{name}/dev"))
        .unwrap_or_else(|e| panic!("/sys/block/{name}/dev: {e}"))
        .trim()
        .to_string()
}

/// Write I/Os charged to cgroup `dir` on device `majmin`.
pub fn writes_charged(dir: &Path, version: Version, majmin: &str) -> u64 {
    match version {
        Version::V1 => {
            let s = fs::read_to_string(dir.join("blkio.throttle.io_serviced")).unwrap();
            s.lines()
                .find(|l| l.starts_with(&format!("{majmin} Write")))
                .and_then(|l| l.split_whitespace().nth(2))
                .and_then(|n| n.parse().ok())
                .unwrap_or(0)
        }
        Version::V2 => {
            let s = fs::read_to_string(dir.join("io.stat")).unwrap();
            s.lines()
                .find(|l| l.starts_with(&format!("{majmin} ")))
                .and_then(|l| l.split_whitespace().find_map(|kv| kv.strip_prefix("wios=")))
                .and_then(|n| n.parse().ok())
                .unwrap_or(0)
        }
    }
}

/// Writes completed on a block device (`/sys/block/NAME/stat` field 5): the device's own
/// count, not ours.
pub fn writes_completed(name: &str) -> u64 {
    fs::read_to_string(format!("/sys/block/{name}/stat"))
        .unwrap()
        .split_whitespace()
        .nth(4)
        .unwrap()
        .parse()
        .unwrap()
}

fn controllers(dir: &Path) -> String {
    fs::read_to_string(dir.join("cgroup.controllers")).unwrap_or_default()
}

fn has_io(dir: &Path) -> bool {
    controllers(dir).split_whitespace().any(|c| c == "io")
}

fn v1_blkio_mounted() -> bool {
    Path::new(V1_BLKIO)
        .join("blkio.throttle.write_iops_device")
        .exists()
}

/// Child cgroups of v1 blkio (anyone's: a test's, a lab volume's, a container's).
fn v1_children() -> Vec<String> {
    fs::read_dir(V1_BLKIO)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter(|e| e.path().is_dir())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// The block I/O controller moved from cgroup v1 to a cgroup v2 mount for a test (as on
/// a stock cgroup-v2 host): v1 blkio is unmounted (only when it has no child cgroups, so
/// the kernel frees the controller), and `io` then shows in a cgroup2 mount's
/// `cgroup.controllers` (one at a temporary directory if the machine has none). Dropping
/// it (also when the test fails) removes whatever `diskpulse-*` cgroups are left in
/// that mount, unmounts the temporary one, and remounts v1 blkio exactly as it was:
/// `mount -t cgroup -o blkio cgroup /sys/fs/cgroup/blkio`.
pub struct OnV2 {
    pub hierarchy: Hierarchy,
    remount_v1: bool,
    temp_mount: Option<tempfile::TempDir>,
}

impl OnV2 {
    /// `None` (skipped, see [`super::skip`]) when the controller cannot be moved here.
    /// Hold [`lock`] while this lives.
    pub fn new() -> Option<OnV2> {
        if let Ok(h) = Hierarchy::find() {
            if h.version == Version::V2 {
                // A stock cgroup-v2 host: nothing to move.
                return Some(OnV2 {
                    hierarchy: h,
                    remount_v1: false,
                    temp_mount: None,
                });
            }
        }
        if !v1_blkio_mounted() {
            super::skip(&format!(
                "no block I/O controller here: neither cgroup v1 blkio at {V1_BLKIO} nor a cgroup2 mount offering io"
            ));
            return None;
        }
        // Another user's cgroups keep the v1 hierarchy (and the controller) alive: wait
        // a while for them to go.
        let t0 = Instant::now();
        while !v1_children().is_empty() {
            if t0.elapsed() > Duration::from_secs(120) {
                // Another process's cgroups (a recorder's stall, a container's) are a
                // fact of this host that no install fixes, as a busy umount is.
                super::skip_on_this_host(
                    "cgroup-v2-io",
                    &format!(
                        "cgroup v1 blkio has child cgroups {:?} (someone is using it), so it cannot be moved to cgroup v2",
                        v1_children()
                    ),
                );
                return None;
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        // A process holding a file of the hierarchy open makes umount fail with EBUSY;
        // never `umount -l` (the hierarchy, and the controller, would live on unseen).
        let out = Command::new("umount").arg(V1_BLKIO).output().unwrap();
        if !out.status.success() {
            super::skip_on_this_host(
                "cgroup-v2-io",
                &format!(
                "cannot move the io controller to cgroup v2 here: umount {V1_BLKIO} failed ({}): a process outside the test holds the v1 hierarchy open",
                String::from_utf8_lossy(&out.stderr).trim()
            ),
            );
            return None;
        }
        let mut g = OnV2 {
            hierarchy: Hierarchy {
                version: Version::V2,
                root: PathBuf::new(),
            },
            remount_v1: true,
            temp_mount: None,
        };
        // The kernel frees the hierarchy asynchronously after the umount.
        let v2_mount = || {
            diskpulse::lab::os::mounts()
                .unwrap()
                .into_iter()
                .find(|m| m.fstype == "cgroup2")
                .map(|m| m.point)
        };
        let point = match v2_mount() {
            Some(p) => p,
            None => {
                let d = tempfile::tempdir_in("/run").unwrap();
                super::sh(
                    "mount",
                    &["-t", "cgroup2", "none", d.path().to_str().unwrap()],
                );
                let p = d.path().to_path_buf();
                g.temp_mount = Some(d);
                p
            }
        };
        let t0 = Instant::now();
        while !has_io(&point) {
            if t0.elapsed() > Duration::from_secs(10) {
                let why = format!(
                    "io did not show in {}/cgroup.controllers ({:?}) 10 s after unmounting {V1_BLKIO} (is the v1 hierarchy mounted in another mount namespace?)",
                    point.display(),
                    controllers(&point).trim()
                );
                drop(g);
                super::skip(&why);
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        g.hierarchy.root = point;
        Some(g)
    }
}

impl Drop for OnV2 {
    fn drop(&mut self) {
        let root = &self.hierarchy.root;
        if self.remount_v1 && !root.as_os_str().is_empty() {
            // Our cgroups hold the controller on v2: remove them (their processes go to
            // the root), and turn io off for the root's children.
            if let Ok(d) = fs::read_dir(root) {
                for e in d.flatten() {
                    let name = e.file_name().to_string_lossy().into_owned();
                    if name.starts_with("diskpulse-") && e.path().is_dir() {
                        let _ = diskpulse::lab::os::remove_cgroup(&e.path(), root);
                    }
                }
            }
            let _ = fs::write(root.join("cgroup.subtree_control"), "-io");
        }
        if let Some(d) = self.temp_mount.take() {
            let _ = Command::new("umount").arg(d.path()).status();
        }
        if self.remount_v1 {
            // The controller is released asynchronously too: retry while it is busy.
            let t0 = Instant::now();
            loop {
                let st = Command::new("mount")
                    .args(["-t", "cgroup", "-o", "blkio", "cgroup", V1_BLKIO])
                    .status();
                if st.is_ok_and(|s| s.success()) || v1_blkio_mounted() {
                    break;
                }
                if t0.elapsed() > Duration::from_secs(10) {
                    eprintln!(
                        "REMOUNTING cgroup v1 blkio FAILED: run `mount -t cgroup -o blkio cgroup {V1_BLKIO}`"
                    );
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}
