//! Notices a recorded loop device being detached (`losetup -d`) mid-run, and attached
//! again. A detached loop device does not leave `/proc/diskstats` or
//! `/sys/class/block`: the kernel keeps `loopN` with frozen counters, so without this the
//! recording would go on showing an idle device that no longer exists. The only sign is
//! `<sysfs>/class/block/loopN/loop/`, which exists only while the device is bound to a
//! file.
//!
//! Looked at every [`CHECK_NS`] (one `stat` of a path built once: no allocation on the
//! sampling path), so a detach is dated to within 100 ms.

use std::path::{Path, PathBuf};

/// How often a loop device's binding is looked at.
const CHECK_NS: u64 = 100_000_000;

/// One loop device's binding, as last seen.
#[derive(Debug)]
pub(crate) struct LoopWatch {
    backing_file: PathBuf,
    /// The file it was bound to when last seen bound (for the event).
    pub backing: String,
    pub bound: bool,
    next_check_ns: u64,
}

/// What changed since the last look.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Change {
    Detached,
    Attached,
}

impl LoopWatch {
    /// A watch for `name` when it is a loop device bound to a file now; `None` otherwise
    /// (not a loop device, or not bound: nothing to lose).
    pub(crate) fn for_device(sysfs: &Path, name: &str) -> Option<LoopWatch> {
        let rest = name.strip_prefix("loop")?;
        if rest.is_empty() || !rest.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let backing_file = sysfs
            .join("class/block")
            .join(name)
            .join("loop/backing_file");
        let backing = std::fs::read_to_string(&backing_file).ok()?;
        Some(LoopWatch {
            backing_file,
            backing: backing.trim().to_string(),
            bound: true,
            next_check_ns: 0,
        })
    }

    /// Looks (at most every [`CHECK_NS`]) whether the device is still bound.
    pub fn check(&mut self, now_ns: u64) -> Option<Change> {
        if now_ns < self.next_check_ns {
            return None;
        }
        self.next_check_ns = now_ns + CHECK_NS;
        let bound = self.backing_file.exists();
        match (self.bound, bound) {
            (true, false) => {
                self.bound = false;
                Some(Change::Detached)
            }
            (false, true) => {
                self.bound = true;
                if let Ok(b) = std::fs::read_to_string(&self.backing_file) {
                    self.backing = b.trim().to_string();
                }
                Some(Change::Attached)
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loop_device_is_seen_detached_and_attached_again() {
        let sys = tempfile::tempdir().unwrap();
        let dir = sys.path().join("class/block/loop7/loop");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("backing_file"), "/var/tmp/a.img\n").unwrap();
        assert!(LoopWatch::for_device(sys.path(), "sda").is_none());
        assert!(LoopWatch::for_device(sys.path(), "loop8").is_none());
        let mut w = LoopWatch::for_device(sys.path(), "loop7").unwrap();
        assert_eq!(w.backing, "/var/tmp/a.img");
        assert_eq!(w.check(1), None);
        std::fs::remove_dir_all(&dir).unwrap();
        // Not looked at again before CHECK_NS.
        assert_eq!(w.check(2), None);
        assert_eq!(w.check(1 + CHECK_NS), Some(Change::Detached));
        assert_eq!(w.check(1 + 2 * CHECK_NS), None);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("backing_file"), "/var/tmp/b.img\n").unwrap();
        assert_eq!(w.check(1 + 3 * CHECK_NS), Some(Change::Attached));
        assert_eq!(w.backing, "/var/tmp/b.img");
    }
}
