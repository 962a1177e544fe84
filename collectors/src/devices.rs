//! Which block devices really hold a path, and what their queues are set to.
//!
//! `--device vda`, `--device /dev/vda`, `--device 7:0` name a device directly;
//! `--path DIR` is resolved through the mount table to the device behind it. From each
//! device we follow what also carries its I/O:
//! - a partition -> its whole disk (queue attributes live on the disk);
//! - a loop device -> the device holding its backing file (writes land there later);
//! - btrfs (anonymous `0:N` st_dev) -> every member in `/sys/fs/btrfs/<uuid>/devices/`;
//! - a stacked device (dm, md) -> its `slaves/`.
//!
//! Every reader takes `sysfs` and `procfs` roots so tests can use fixture trees.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use crate::mounts::{self, Mount};
use crate::sysfs::{read_trim, BlockSysfs};

pub use crate::devnum::DevNum;

/// One resolved device and why it is recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Device {
    pub name: String,
    pub num: DevNum,
    /// Why this device is in the run: "named", "holds /mnt/x", "whole disk of vda1",
    /// "backing file of loop0", "btrfs member of /mnt/r1", "slave of dm-0".
    pub why: String,
    /// The whole disk this is a partition of, if it is one.
    pub parent: Option<String>,
}

/// The sysfs queue attributes and identity of a device (strings as sysfs prints them).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueInfo {
    pub attrs: Vec<(String, String)>,
}

/// Errors resolving devices.
#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    #[error("unknown device '{given}'; devices here: {known}")]
    Unknown { given: String, known: String },
    #[error("cannot stat '{path}': {source}")]
    Stat {
        path: String,
        source: std::io::Error,
    },
    #[error("'{path}' is on {fstype} ({mount_source}): no block device behind it; pick a path on a disk-backed file system")]
    NoBlockDevice {
        path: String,
        fstype: String,
        mount_source: String,
    },
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
}

/// Looks devices up in `sysfs` (normally `/sys`) and `procfs` (normally `/proc`).
pub struct Resolver {
    pub sysfs: PathBuf,
    pub procfs: PathBuf,
}

impl Default for Resolver {
    fn default() -> Self {
        Resolver {
            sysfs: PathBuf::from("/sys"),
            procfs: PathBuf::from("/proc"),
        }
    }
}

impl Resolver {
    fn sys(&self) -> BlockSysfs {
        BlockSysfs::new(&self.sysfs)
    }

    /// Every block device sysfs knows: (name, number), sorted by name.
    pub fn all(&self) -> Vec<(String, DevNum)> {
        self.sys().all()
    }

    fn name_of(&self, num: DevNum) -> Option<String> {
        self.sys().name_of(num).or_else(|| {
            self.all()
                .into_iter()
                .find(|(_, n)| *n == num)
                .map(|(s, _)| s)
        })
    }

    fn known_list(&self) -> String {
        let names: Vec<String> = self
            .all()
            .into_iter()
            .map(|(n, d)| format!("{n} ({d})"))
            .collect();
        if names.is_empty() {
            "none found".into()
        } else {
            names.join(", ")
        }
    }

    /// Resolves `vda`, `/dev/vda` or `7:0` to one device.
    pub fn by_spec(&self, spec: &str) -> Result<(String, DevNum), DeviceError> {
        let s = spec.trim();
        let s = s.strip_prefix("/dev/").unwrap_or(s);
        let all = self.all();
        let hit = if let Some(num) = DevNum::parse(s) {
            all.into_iter().find(|(_, n)| *n == num)
        } else {
            all.into_iter().find(|(n, _)| n == s)
        };
        hit.ok_or_else(|| DeviceError::Unknown {
            given: spec.to_string(),
            known: self.known_list(),
        })
    }

    /// The mount holding `path` (longest mount point prefix; the last one mounted wins).
    fn mount_of(&self, path: &Path) -> Option<Mount> {
        let table = mounts::read(&self.procfs).unwrap_or_default();
        mounts::mount_of(&table, path).cloned()
    }

    /// The devices that really hold `path`, with everything that also carries its I/O.
    pub fn for_path(&self, path: &Path) -> Result<Vec<Device>, DeviceError> {
        use std::os::unix::fs::MetadataExt;
        let md = fs::metadata(path).map_err(|source| DeviceError::Stat {
            path: path.display().to_string(),
            source,
        })?;
        let canon = fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        let num = DevNum::from_dev_t(md.dev());
        let why = format!("holds {}", path.display());
        let mut out = vec![];
        if self.name_of(num).is_some() {
            self.add_with_lower(num, &why, &mut out)?;
            return Ok(out);
        }
        // Anonymous device: btrfs (members listed in sysfs), or no block device at all.
        let m = self.mount_of(&canon);
        let (fstype, source) = m
            .as_ref()
            .map(|m| (m.fstype.clone(), m.source.clone()))
            .unwrap_or_else(|| ("an unknown file system".into(), "?".into()));
        if fstype == "btrfs" {
            let members = self.btrfs_members(&source, num);
            if !members.is_empty() {
                for (i, mnum) in members.into_iter().enumerate() {
                    let w = format!("btrfs member {} of {}", i + 1, path.display());
                    self.add_with_lower(mnum, &w, &mut out)?;
                }
                return Ok(out);
            }
        }
        if source.starts_with("/dev/") {
            if let Ok((_, n)) = self.by_spec(&source) {
                self.add_with_lower(n, &why, &mut out)?;
                return Ok(out);
            }
        }
        Err(DeviceError::NoBlockDevice {
            path: path.display().to_string(),
            fstype,
            mount_source: source,
        })
    }

    /// btrfs members: `/sys/fs/btrfs/<uuid>/devices/*` for the file system whose source is
    /// `source` (any member's /dev path).
    fn btrfs_members(&self, source: &str, _anon: DevNum) -> Vec<DevNum> {
        let src_num = self.by_spec(source).ok().map(|(_, n)| n);
        let root = self.sysfs.join("fs/btrfs");
        let Ok(rd) = fs::read_dir(&root) else {
            return vec![];
        };
        for e in rd.flatten() {
            let devdir = e.path().join("devices");
            let Ok(members) = fs::read_dir(&devdir) else {
                continue;
            };
            let mut nums: Vec<DevNum> = members
                .flatten()
                .filter_map(|m| {
                    read_trim(&m.path().join("dev"))
                        .and_then(|s| DevNum::parse(&s))
                        .or_else(|| {
                            let name = m.file_name().to_string_lossy().into_owned();
                            self.by_spec(&name).ok().map(|(_, n)| n)
                        })
                })
                .collect();
            nums.sort();
            if src_num.is_some_and(|s| nums.contains(&s)) {
                return nums;
            }
        }
        vec![]
    }

    /// Adds `num` and what lies under it (whole disk, loop backing device, slaves).
    fn add_with_lower(
        &self,
        num: DevNum,
        why: &str,
        out: &mut Vec<Device>,
    ) -> Result<(), DeviceError> {
        let mut seen: BTreeSet<DevNum> = out.iter().map(|d| d.num).collect();
        self.add_rec(num, why, out, &mut seen, 0);
        Ok(())
    }

    fn add_rec(
        &self,
        num: DevNum,
        why: &str,
        out: &mut Vec<Device>,
        seen: &mut BTreeSet<DevNum>,
        depth: usize,
    ) {
        if depth > 8 || !seen.insert(num) {
            return;
        }
        let Some(name) = self.name_of(num) else {
            return;
        };
        let sys = self.sys();
        let cls = sys.dir(&name);
        let parent = sys.whole_disk_of(&name);
        out.push(Device {
            name: name.clone(),
            num,
            why: why.to_string(),
            parent: parent.clone(),
        });
        if let Some(p) = parent {
            if let Ok((_, pn)) = self.by_spec(&p) {
                self.add_rec(pn, &format!("whole disk of {name}"), out, seen, depth + 1);
            }
        }
        // Loop device: the file behind it lives on another device, which sees the writes too.
        if let Some(back) = read_trim(&cls.join("loop/backing_file")) {
            let back = back.trim_end_matches(" (deleted)");
            if let Ok(md) = fs::metadata(back) {
                use std::os::unix::fs::MetadataExt;
                let bn = DevNum::from_dev_t(md.dev());
                let w = format!("backing file of {name}");
                if self.name_of(bn).is_some() {
                    self.add_rec(bn, &w, out, seen, depth + 1);
                } else if let Ok(devs) = self.for_path(Path::new(back)) {
                    for d in devs {
                        self.add_rec(d.num, &w, out, seen, depth + 1);
                    }
                }
            }
        }
        for s in sys.slaves(&name) {
            if let Ok((_, sn)) = self.by_spec(&s) {
                self.add_rec(sn, &format!("slave of {name}"), out, seen, depth + 1);
            }
        }
    }

    /// Resolves a named device and what lies under it.
    pub fn for_spec(&self, spec: &str) -> Result<Vec<Device>, DeviceError> {
        let (_, num) = self.by_spec(spec)?;
        let mut out = vec![];
        self.add_with_lower(num, "named", &mut out)?;
        Ok(out)
    }

    /// Queue attributes and identity of a device (of its whole disk for a partition).
    pub fn queue_info(&self, dev: &Device) -> QueueInfo {
        let disk = dev.parent.as_deref().unwrap_or(&dev.name);
        let sys = self.sys();
        let mut attrs = vec![];
        for a in QUEUE_ATTRS {
            if let Some(v) = sys.queue_attr(disk, a) {
                attrs.push((a.to_string(), v));
            }
        }
        for (key, rel) in DEVICE_ATTRS {
            if let Some(v) = sys.attr(disk, rel) {
                attrs.push((key.to_string(), v));
            }
        }
        if let Some(v) = sys.attr(&dev.name, "size") {
            attrs.push((SIZE_KEY.into(), v));
        }
        QueueInfo { attrs }
    }
}

/// The sysfs `queue/` attributes [`Resolver::queue_info`] reads (of the whole disk).
const QUEUE_ATTRS: [&str; 10] = [
    "write_cache",
    "fua",
    "rotational",
    "scheduler",
    "logical_block_size",
    "physical_block_size",
    "nr_requests",
    "read_ahead_kb",
    "max_sectors_kb",
    "discard_max_bytes",
];

/// Identity attributes: the key [`QueueInfo`] gives them and their path under the disk.
const DEVICE_ATTRS: [(&str, &str); 3] = [
    ("model", "device/model"),
    ("vendor", "device/vendor"),
    ("loop_backing_file", "loop/backing_file"),
];

/// The key of the device's own size, in 512-byte sectors.
const SIZE_KEY: &str = "size_sectors";

/// Every key a [`QueueInfo`] may hold, in the order it is filled (an attribute the kernel
/// lacks is absent).
pub fn queue_keys() -> impl Iterator<Item = &'static str> {
    QUEUE_ATTRS
        .into_iter()
        .chain(DEVICE_ATTRS.into_iter().map(|(k, _)| k))
        .chain([SIZE_KEY])
}

/// Merges device lists, keeping the first reason given for each device.
pub fn merge(lists: impl IntoIterator<Item = Vec<Device>>) -> Vec<Device> {
    let mut out: Vec<Device> = vec![];
    for l in lists {
        for d in l {
            if !out.iter().any(|o| o.num == d.num) {
                out.push(d);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_path_resolves_to_a_real_disk() {
        let r = Resolver::default();
        let devs = r.for_path(Path::new("/")).unwrap();
        assert!(!devs.is_empty());
        let ds = fs::read_to_string("/proc/diskstats").unwrap();
        for d in &devs {
            assert!(
                ds.contains(&format!(" {} ", d.name)),
                "{} not in diskstats",
                d.name
            );
        }
    }

    #[test]
    fn tmpfs_has_no_block_device() {
        let r = Resolver::default();
        let err = r.for_path(Path::new("/dev/shm")).unwrap_err().to_string();
        assert!(err.contains("tmpfs"), "{err}");
        assert!(err.contains("/dev/shm"), "{err}");
    }

    #[test]
    fn unknown_device_lists_known_ones() {
        let r = Resolver::default();
        let err = r.by_spec("nosuchdisk9").unwrap_err().to_string();
        assert!(err.contains("nosuchdisk9"));
        let first = &r.all()[0].0;
        assert!(err.contains(first.as_str()), "{err}");
    }

    #[test]
    fn spec_by_number_and_dev_path_agree() {
        let r = Resolver::default();
        let (name, num) = r.all()[0].clone();
        assert_eq!(r.by_spec(&num.to_string()).unwrap().0, name);
        assert_eq!(r.by_spec(&format!("/dev/{name}")).unwrap().1, num);
    }

    #[test]
    fn partition_adds_whole_disk_from_fixture() {
        let d = tempfile::tempdir().unwrap();
        let sys = d.path();
        let disk = sys.join("devices/virtual/block/sdz");
        let part = disk.join("sdz1");
        fs::create_dir_all(part.clone()).unwrap();
        fs::create_dir_all(disk.join("queue")).unwrap();
        fs::write(disk.join("dev"), "8:0\n").unwrap();
        fs::write(part.join("dev"), "8:1\n").unwrap();
        fs::write(part.join("partition"), "1\n").unwrap();
        fs::write(disk.join("queue/write_cache"), "write back\n").unwrap();
        fs::create_dir_all(sys.join("class/block")).unwrap();
        fs::create_dir_all(sys.join("block")).unwrap();
        std::os::unix::fs::symlink(&disk, sys.join("class/block/sdz")).unwrap();
        std::os::unix::fs::symlink(&part, sys.join("class/block/sdz1")).unwrap();
        std::os::unix::fs::symlink(&disk, sys.join("block/sdz")).unwrap();
        let r = Resolver {
            sysfs: sys.to_path_buf(),
            procfs: PathBuf::from("/proc"),
        };
        let devs = r.for_spec("sdz1").unwrap();
        let names: Vec<&str> = devs.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["sdz1", "sdz"]);
        assert_eq!(devs[1].why, "whole disk of sdz1");
        let q = r.queue_info(&devs[0]);
        assert!(q
            .attrs
            .contains(&("write_cache".to_string(), "write back".to_string())));
    }
}
