//! Block devices in sysfs: the one reader of `<sysfs>/class/block/<dev>/...` for the
//! counters (`stat`), the queue attributes, sizes, partitions and holders.
//!
//! Units: `size` is in 512-byte sectors whatever the device's block size (block/genhd.c),
//! so [`BlockSysfs::size_bytes`] multiplies by 512; `stat` holds the same counters as a
//! `/proc/diskstats` line without its three name columns (Documentation/block/stat.rst),
//! parsed by [`crate::diskstats::parse_counters`]. A partition has no `queue/`: its
//! attributes are its whole disk's (`<partition>/../queue`).
//!
//! The root is a parameter (normally `/sys`) so tests feed fixture trees. Every reader
//! returns `None`/empty for what is missing: a device can go away between two reads.

use std::fs::{self, File};
use std::path::{Path, PathBuf};

use crate::devnum::DevNum;
use crate::diskstats::{self, DiskCounters};

/// `<sysfs>` for block devices.
#[derive(Debug, Clone)]
pub struct BlockSysfs {
    root: PathBuf,
}

impl Default for BlockSysfs {
    fn default() -> Self {
        BlockSysfs::new("/sys")
    }
}

/// Reads a small sysfs file, trimmed; `None` when missing or unreadable.
pub(crate) fn read_trim(p: &Path) -> Option<String> {
    fs::read_to_string(p).ok().map(|s| s.trim().to_string())
}

impl BlockSysfs {
    pub fn new(root: impl Into<PathBuf>) -> BlockSysfs {
        BlockSysfs { root: root.into() }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `<sysfs>/class/block/<name>`.
    pub fn dir(&self, name: &str) -> PathBuf {
        self.root.join("class/block").join(name)
    }

    /// `<sysfs>/class/block/<name>/<rel>`, trimmed.
    pub fn attr(&self, name: &str, rel: &str) -> Option<String> {
        read_trim(&self.dir(name).join(rel))
    }

    /// The device number in `<name>/dev`.
    pub fn dev_num(&self, name: &str) -> Option<DevNum> {
        self.attr(name, "dev").and_then(|s| DevNum::parse(&s))
    }

    /// The name of device `num` (`<sysfs>/dev/block/MAJ:MIN` links to it).
    pub fn name_of(&self, num: DevNum) -> Option<String> {
        let t = fs::read_link(self.root.join(format!("dev/block/{num}"))).ok()?;
        t.file_name().map(|s| s.to_string_lossy().into_owned())
    }

    /// Every block device: (name, number), sorted by name.
    pub fn all(&self) -> Vec<(String, DevNum)> {
        let mut v = vec![];
        if let Ok(rd) = fs::read_dir(self.root.join("class/block")) {
            for e in rd.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if let Some(num) = self.dev_num(&name) {
                    v.push((name, num));
                }
            }
        }
        v.sort();
        v
    }

    /// Size in bytes (`size` is in 512-byte sectors).
    pub fn size_bytes(&self, name: &str) -> Option<u64> {
        self.attr(name, "size")?
            .parse::<u64>()
            .ok()
            .map(|s| s * 512)
    }

    /// Whether `name` is a partition (it has a `partition` file).
    fn is_partition(&self, name: &str) -> bool {
        self.dir(name).join("partition").exists()
    }

    /// The whole disk a partition belongs to (its parent directory in sysfs).
    pub(crate) fn whole_disk_of(&self, name: &str) -> Option<String> {
        if !self.is_partition(name) {
            return None;
        }
        let p = fs::canonicalize(self.dir(name)).ok()?;
        p.parent()?
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
    }

    /// A queue attribute of `disk` (`write_cache`, `rotational`, ...).
    pub(crate) fn queue_attr(&self, disk: &str, attr: &str) -> Option<String> {
        self.attr(disk, &format!("queue/{attr}"))
    }

    /// The logical block size of device `num` and the sysfs file it came from (a
    /// partition reads its disk's queue).
    pub fn logical_block_size(&self, num: DevNum) -> Option<(u32, PathBuf)> {
        let base = self.root.join(format!("dev/block/{num}"));
        for p in [
            base.join("queue/logical_block_size"),
            base.join("../queue/logical_block_size"),
        ] {
            if let Some(v) = read_trim(&p).and_then(|s| s.parse().ok()) {
                let shown = fs::canonicalize(&p).unwrap_or(p);
                return Some((v, shown));
            }
        }
        None
    }

    /// The partitions of whole disk `name`: (name, number), sorted by name.
    pub fn partitions(&self, name: &str) -> Vec<(String, Option<DevNum>)> {
        let mut v: Vec<(String, Option<DevNum>)> = fs::read_dir(self.dir(name))
            .map(|rd| {
                rd.flatten()
                    .filter(|e| e.path().join("partition").exists())
                    .map(|e| {
                        let num = read_trim(&e.path().join("dev")).and_then(|s| DevNum::parse(&s));
                        (e.file_name().to_string_lossy().into_owned(), num)
                    })
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    }

    /// The devices stacked on `name` (dm, md, bcache): `<name>/holders/*`, sorted.
    pub fn holders(&self, name: &str) -> Vec<String> {
        self.links(name, "holders")
    }

    /// The devices `name` is stacked on (a dm or md device's members): `<name>/slaves/*`,
    /// sorted.
    pub fn slaves(&self, name: &str) -> Vec<String> {
        self.links(name, "slaves")
    }

    fn links(&self, name: &str, dir: &str) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(self.dir(name).join(dir))
            .map(|rd| {
                rd.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    }

    /// The I/O counters of `name`, one read of `<name>/stat`.
    pub fn counters(&self, name: &str) -> Option<DiskCounters> {
        diskstats::parse_counters(&fs::read(self.dir(name).join("stat")).ok()?)
    }

    /// Whether `name` has a `stat` file.
    pub fn has_stat(&self, name: &str) -> bool {
        self.dir(name).join("stat").exists()
    }

    /// Opens `<name>/stat` to be re-read (pread at 0) by a sampler, if the device there
    /// still has number `num` (a name can be reused by another device).
    pub fn open_stat(&self, name: &str, num: DevNum) -> Option<File> {
        if self.dev_num(name)? != num {
            return None;
        }
        File::open(self.dir(name).join("stat")).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A disk `sdz` (8:0) with partition `sdz1` (8:1), laid out as sysfs does.
    fn fixture() -> (tempfile::TempDir, BlockSysfs) {
        let d = tempfile::tempdir().unwrap();
        let sys = d.path();
        let disk = sys.join("devices/virtual/block/sdz");
        let part = disk.join("sdz1");
        fs::create_dir_all(&part).unwrap();
        fs::create_dir_all(disk.join("queue")).unwrap();
        fs::create_dir_all(disk.join("holders/dm-3")).unwrap();
        fs::write(disk.join("dev"), "8:0\n").unwrap();
        fs::write(disk.join("size"), "2048\n").unwrap();
        fs::write(part.join("dev"), "8:1\n").unwrap();
        fs::write(part.join("partition"), "1\n").unwrap();
        fs::write(disk.join("queue/logical_block_size"), "4096\n").unwrap();
        fs::write(
            part.join("stat"),
            "     5     0    40     1    7     0    56     2     0     3     3     0     0     0     0     1     4\n",
        )
        .unwrap();
        fs::create_dir_all(sys.join("class/block")).unwrap();
        fs::create_dir_all(sys.join("dev/block")).unwrap();
        std::os::unix::fs::symlink(&disk, sys.join("class/block/sdz")).unwrap();
        std::os::unix::fs::symlink(&part, sys.join("class/block/sdz1")).unwrap();
        std::os::unix::fs::symlink(&disk, sys.join("dev/block/8:0")).unwrap();
        std::os::unix::fs::symlink(&part, sys.join("dev/block/8:1")).unwrap();
        let s = BlockSysfs::new(sys);
        (d, s)
    }

    #[test]
    fn a_partition_reads_its_disks_queue_and_counters_parse() {
        let (_d, s) = fixture();
        let p1 = DevNum { major: 8, minor: 1 };
        assert_eq!(s.all().len(), 2);
        assert_eq!(s.name_of(p1).as_deref(), Some("sdz1"));
        assert_eq!(s.size_bytes("sdz"), Some(2048 * 512));
        assert!(s.is_partition("sdz1") && !s.is_partition("sdz"));
        assert_eq!(s.whole_disk_of("sdz1").as_deref(), Some("sdz"));
        assert_eq!(s.logical_block_size(p1).unwrap().0, 4096);
        assert_eq!(s.partitions("sdz"), vec![("sdz1".to_string(), Some(p1))]);
        assert_eq!(s.holders("sdz"), ["dm-3"]);
        assert!(s.holders("sdz1").is_empty());
        assert!(s.slaves("sdz").is_empty());
        let c = s.counters("sdz1").unwrap();
        assert_eq!(c.get(diskstats::F_READS), Some(5));
        assert_eq!(c.get(diskstats::F_SECTORS_WRITTEN), Some(56));
        assert!(s.open_stat("sdz1", p1).is_some());
        assert!(
            s.open_stat("sdz1", DevNum { major: 8, minor: 2 }).is_none(),
            "another device under the same name is not ours"
        );
    }

    #[test]
    fn this_machines_devices_have_counters() {
        let s = BlockSysfs::default();
        let (name, num) = s.all().into_iter().next().expect("a block device");
        assert_eq!(s.name_of(num).as_deref(), Some(name.as_str()));
        assert!(s.counters(&name).is_some(), "{name}");
    }
}
