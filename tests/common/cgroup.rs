//! Throttle tests and the block I/O cgroup controller: one lock for all of them, and a
//! throttling cgroup in whichever hierarchy holds the controller (v1 blkio or v2 io, the
//! lab's own [`Hierarchy::find`]).
//!
//! No test unmounts, remounts or moves a host's cgroup hierarchy (issue 25: one that
//! unmounted v1 blkio to free `io` for cgroup v2 failed whenever another mount namespace
//! held the hierarchy). A test of the v2 `io.max` path uses the host's v2 `io` where the
//! host gives it, and a fixture tree (`DISKPULSE_CGROUP_ROOT`) otherwise.
//!
//! Throttle tests share the controller's counters on the same devices, so every test that
//! throttles takes [`lock`] (an exclusive `flock` on `/run/diskpulse-cgroup-test.lock`,
//! across test binaries) for its whole length.

use std::fs;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

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
