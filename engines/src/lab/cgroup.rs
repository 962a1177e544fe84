//! Where a lab volume's throttles live: the block I/O controller of cgroup v1 (`blkio`:
//! one `blkio.throttle.*_device` file per limit) or of cgroup v2 (`io`: one `io.max`
//! line per device, `MAJ:MIN riops=N wiops=N rbps=N wbps=N`). Both are the kernel's
//! blk-throttle underneath, with the same units: I/Os per second and bytes per second.
//!
//! The controller is bound to one hierarchy at a time (a hybrid host binds it to v1 and
//! leaves the v2 mount at `/sys/fs/cgroup/unified` without it; Debian 12, Ubuntu 22.04+
//! and RHEL 9 mount only v2, at `/sys/fs/cgroup`), so the first of these is used:
//! 1. `DISKPULSE_CGROUP_ROOT`, when set: that directory, a v2 cgroup whose
//!    `cgroup.controllers` lists `io` or the root of a v1 hierarchy with blkio;
//! 2. a cgroup2 mount whose `cgroup.controllers` lists `io`;
//! 3. a cgroup v1 mount with the `blkio` option.
//!
//! A volume's cgroup is `<root>/diskpulse-<name>`. On v2 the root's
//! `cgroup.subtree_control` must enable `io` for its children to have `io.max`: `+io`
//! is written there (and left: systemd enables it anyway, and an unused controller
//! costs nothing). Processes are moved in and out through `cgroup.procs` on both.
//!
//! What differs for a user: on v2 with the memory controller also on v2, buffered
//! writes are charged to the cgroup that dirtied the pages (cgroup writeback), so
//! writeback of a throttled process is throttled too; on v1 (and on a hybrid host) it is
//! done by kernel threads outside the cgroup and only O_DIRECT, reads and fsync's own
//! writes are throttled.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::Serialize;

use super::{os, Throttle};
use format::usage;

/// The environment variable naming the cgroup directory to make volume cgroups under.
const ROOT_ENV: &str = "DISKPULSE_CGROUP_ROOT";

/// Which cgroup version holds the block I/O controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Version {
    /// cgroup v1, controller `blkio`.
    V1,
    /// cgroup v2, controller `io`.
    V2,
}

/// A directory of a cgroup hierarchy with the block I/O controller, where volume
/// cgroups are made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hierarchy {
    pub version: Version,
    pub root: PathBuf,
}

impl Hierarchy {
    /// Finds the hierarchy as the module doc says. The error (a usage error: exit 2)
    /// names what is missing and how to get it.
    pub fn find() -> anyhow::Result<Hierarchy> {
        if let Some(p) = std::env::var_os(ROOT_ENV) {
            let p = PathBuf::from(p);
            return Hierarchy::at(&p).ok_or_else(|| {
                usage!(
                    "{ROOT_ENV}={}: not a cgroup v2 directory with 'io' in cgroup.controllers, nor a cgroup v1 blkio hierarchy; name one (like /sys/fs/cgroup) or unset it",
                    p.display()
                )
            });
        }
        let mounts = os::mounts()?;
        let v2 = mounts
            .iter()
            .filter(|m| m.fstype == "cgroup2")
            .find_map(|m| Hierarchy::at(&m.point).filter(|h| h.version == Version::V2));
        let v1 = || {
            mounts
                .iter()
                .filter(|m| m.fstype == "cgroup" && m.super_options.iter().any(|o| o == "blkio"))
                .find_map(|m| Hierarchy::at(&m.point).filter(|h| h.version == Version::V1))
        };
        v2.or_else(v1).ok_or_else(|| {
            usage!(
                "throttles need the kernel's block I/O cgroup controller, and neither a cgroup2 mount with 'io' in cgroup.controllers nor a cgroup v1 blkio mount is here; mount one (`mount -t cgroup2 none /sys/fs/cgroup`, or `mount -t cgroup -o blkio cgroup /sys/fs/cgroup/blkio`) or run without --read-iops/--write-iops/--read-bps/--write-bps"
            )
        })
    }

    /// What `dir` is: a v2 cgroup offering `io`, or a v1 blkio cgroup with throttle files.
    pub fn at(dir: &Path) -> Option<Hierarchy> {
        let root = dir.to_path_buf();
        if let Ok(c) = fs::read_to_string(dir.join("cgroup.controllers")) {
            return c
                .split_whitespace()
                .any(|c| c == "io")
                .then_some(Hierarchy {
                    version: Version::V2,
                    root,
                });
        }
        (dir.join("cgroup.procs").exists() && dir.join("blkio.throttle.write_iops_device").exists())
            .then_some(Hierarchy {
                version: Version::V1,
                root,
            })
    }

    /// The cgroup of volume `name`.
    pub fn group(&self, name: &str) -> PathBuf {
        self.root.join(format!("diskpulse-{name}"))
    }

    /// On v2, enables `io` for the root's children (`+io` in `cgroup.subtree_control`);
    /// nothing to do on v1.
    pub fn enable(&self) -> anyhow::Result<()> {
        if self.version == Version::V1 {
            return Ok(());
        }
        let p = self.root.join("cgroup.subtree_control");
        let on = fs::read_to_string(&p).unwrap_or_default();
        if on.split_whitespace().any(|c| c == "io") {
            return Ok(());
        }
        fs::write(&p, "+io").with_context(|| format!("writing '+io' to {}", p.display()))
    }

    /// `(file, line)` writes that set `t` on device `maj:min` in a cgroup of this
    /// hierarchy: one per limit on v1, one `io.max` line on v2.
    pub fn rules(&self, t: &Throttle, maj: u32, min: u32) -> Vec<(&'static str, String)> {
        let limits = [
            ("blkio.throttle.read_iops_device", "riops", t.read_iops),
            ("blkio.throttle.write_iops_device", "wiops", t.write_iops),
            ("blkio.throttle.read_bps_device", "rbps", t.read_bps),
            ("blkio.throttle.write_bps_device", "wbps", t.write_bps),
        ];
        match self.version {
            Version::V1 => limits
                .iter()
                .filter_map(|(file, _, v)| v.map(|v| (*file, format!("{maj}:{min} {v}"))))
                .collect(),
            Version::V2 => {
                let keys: Vec<String> = limits
                    .iter()
                    .filter_map(|(_, key, v)| v.map(|v| format!("{key}={v}")))
                    .collect();
                if keys.is_empty() {
                    vec![]
                } else {
                    vec![("io.max", format!("{maj}:{min} {}", keys.join(" ")))]
                }
            }
        }
    }
}

/// Whether `cg` may be removed as volume `name`'s cgroup: it is called
/// `diskpulse-<name>` and sits in a cgroup file system (v1 or v2), so a state file
/// naming anything else never makes teardown rmdir it.
pub(crate) fn is_volume_group(cg: &Path, name: &str) -> bool {
    let named = cg.file_name().and_then(|f| f.to_str()) == Some(&format!("diskpulse-{name}"));
    let parent_is_cgroup = cg
        .parent()
        .is_some_and(|p| matches!(os::pseudo_fs(p), Some("cgroup" | "cgroup2")));
    named && parent_is_cgroup
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(version: Version) -> Hierarchy {
        Hierarchy {
            version,
            root: PathBuf::from("/sys/fs/cgroup"),
        }
    }

    #[test]
    fn v2_sets_every_limit_in_one_io_max_line() {
        let t = Throttle {
            write_iops: Some(200),
            read_bps: Some(1 << 20),
            ..Default::default()
        };
        assert_eq!(
            h(Version::V2).rules(&t, 7, 3),
            vec![("io.max", "7:3 wiops=200 rbps=1048576".to_string())]
        );
    }

    #[test]
    fn v1_sets_one_file_per_limit() {
        let t = Throttle {
            write_iops: Some(200),
            read_bps: Some(1 << 20),
            ..Default::default()
        };
        assert_eq!(
            h(Version::V1).rules(&t, 7, 3),
            vec![
                ("blkio.throttle.write_iops_device", "7:3 200".to_string()),
                ("blkio.throttle.read_bps_device", "7:3 1048576".to_string()),
            ]
        );
    }

    #[test]
    fn a_directory_without_the_controller_is_no_hierarchy() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(Hierarchy::at(d.path()), None);
        fs::write(d.path().join("cgroup.controllers"), "cpu memory pids\n").unwrap();
        assert_eq!(Hierarchy::at(d.path()), None);
        fs::write(d.path().join("cgroup.controllers"), "cpu io memory\n").unwrap();
        assert_eq!(
            Hierarchy::at(d.path()).map(|h| h.version),
            Some(Version::V2)
        );
    }

    #[test]
    fn only_diskpulse_groups_on_a_cgroup_file_system_may_be_removed() {
        let d = tempfile::tempdir().unwrap();
        assert!(!is_volume_group(&d.path().join("diskpulse-a"), "a"));
        assert!(!is_volume_group(Path::new("/sys/fs/cgroup/other"), "a"));
    }
}
