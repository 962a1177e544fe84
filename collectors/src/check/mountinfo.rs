//! `/proc/self/mountinfo` with every option, and what those options do to durability.
//!
//! A line is (see proc(5)):
//! `36 35 98:0 /mnt1 /mnt/parent rw,noatime master:1 - ext3 /dev/root rw,errors=continue`
//! i.e. mount id, parent id, `MAJ:MIN` of the file system, root within it, mount point,
//! per-mount options, optional fields up to `-`, file system type, source, super-block
//! options. Flags such as `sync`/`dirsync` and file system options such as `nobarrier`
//! or `data=writeback` are super-block options; `ro` can be in either list.
//!
//! Options that drop write barriers (the cache flushes a journal commit and fsync rely on):
//! `nobarrier`, `barrier=0` (ext3/ext4 print it as `nobarrier`), `barrier=none` (gfs2,
//! reiserfs), `barrier=off`, and btrfs's `nobarrier`. xfs removed `nobarrier` in Linux
//! 4.19 (a mount with it fails), so a new kernel never shows it for xfs.

use std::path::{Path, PathBuf};

use crate::devices::DevNum;

/// One mount.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountEntry {
    pub mount_id: u32,
    /// `st_dev` of files on this mount (anonymous `0:N` for btrfs, tmpfs, ...).
    pub devnum: DevNum,
    pub root: String,
    pub point: PathBuf,
    pub fstype: String,
    pub source: String,
    /// Per-mount options (`rw,relatime`).
    pub mount_options: Vec<String>,
    /// Super-block options (`rw,nobarrier,data=ordered`).
    pub super_options: Vec<String>,
}

/// Undoes mountinfo's octal escapes (`\040` for a space).
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 4 <= b.len() {
            let oct = std::str::from_utf8(&b[i + 1..i + 4]).unwrap_or("");
            if let Ok(v) = u8::from_str_radix(oct, 8) {
                out.push(v);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn split_opts(s: &str) -> Vec<String> {
    s.split(',')
        .filter(|o| !o.is_empty())
        .map(unescape)
        .collect()
}

/// Parses mountinfo text; lines that do not parse are skipped.
pub fn parse(text: &str) -> Vec<MountEntry> {
    let mut v = vec![];
    for line in text.lines() {
        let Some((pre, post)) = line.split_once(" - ") else {
            continue;
        };
        let f: Vec<&str> = pre.split(' ').collect();
        let g: Vec<&str> = post.split(' ').collect();
        if f.len() < 6 || g.len() < 2 {
            continue;
        }
        let (Ok(mount_id), Some(devnum)) = (f[0].parse(), DevNum::parse(f[2])) else {
            continue;
        };
        v.push(MountEntry {
            mount_id,
            devnum,
            root: unescape(f[3]),
            point: PathBuf::from(unescape(f[4])),
            mount_options: split_opts(f[5]),
            fstype: g[0].to_string(),
            source: unescape(g[1]),
            super_options: g.get(2).map(|s| split_opts(s)).unwrap_or_default(),
        });
    }
    v
}

/// Reads `<procfs>/self/mountinfo`.
pub fn read(procfs: &Path) -> std::io::Result<Vec<MountEntry>> {
    Ok(parse(&std::fs::read_to_string(
        procfs.join("self/mountinfo"),
    )?))
}

/// The mount holding `path` (canonical): the longest mount point that is a prefix of it;
/// of equal ones the last mounted (it hides the others).
pub fn mount_of<'a>(mounts: &'a [MountEntry], path: &Path) -> Option<&'a MountEntry> {
    let mut best: Option<&MountEntry> = None;
    for m in mounts {
        if path.starts_with(&m.point)
            && best.is_none_or(|b| m.point.as_os_str().len() >= b.point.as_os_str().len())
        {
            best = Some(m);
        }
    }
    best
}

impl MountEntry {
    /// Per-mount then super-block options, without duplicates, in that order.
    pub fn options(&self) -> Vec<&str> {
        let mut v: Vec<&str> = vec![];
        for o in self.mount_options.iter().chain(&self.super_options) {
            if !v.contains(&o.as_str()) {
                v.push(o);
            }
        }
        v
    }

    /// Whether `opt` is set (exactly, e.g. `nobarrier` or `data=writeback`).
    pub fn has(&self, opt: &str) -> bool {
        self.options().contains(&opt)
    }

    /// The value of `key=value`.
    pub fn value(&self, key: &str) -> Option<&str> {
        self.options()
            .into_iter()
            .find_map(|o| o.split_once('=').and_then(|(k, v)| (k == key).then_some(v)))
    }

    /// What the options do to durability.
    pub fn durability(&self) -> Durability {
        let barrier_off = self
            .options()
            .into_iter()
            .find(|o| {
                matches!(
                    *o,
                    "nobarrier" | "barrier=0" | "barrier=none" | "barrier=off"
                )
            })
            .map(str::to_string);
        Durability {
            barrier_off,
            journal_async_commit: self.has("journal_async_commit"),
            data_mode: self.value("data").map(str::to_string),
            sync: self.has("sync"),
            dirsync: self.has("dirsync"),
            read_only: self.mount_options.iter().any(|o| o == "ro")
                || self.super_options.iter().any(|o| o == "ro"),
        }
    }
}

/// The durability-relevant options of a mount.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Durability {
    /// The option that drops barriers, as written (`nobarrier`, `barrier=0`, ...).
    pub barrier_off: Option<String>,
    /// ext4 `journal_async_commit`: the commit block is written without waiting for the
    /// journal blocks before it (ext4(5) warns it can lose data on a crash).
    pub journal_async_commit: bool,
    /// ext3/ext4 `data=` mode (`ordered`, `writeback`, `journal`), when printed.
    pub data_mode: Option<String>,
    /// Mounted `sync`: every write is synchronous.
    pub sync: bool,
    /// Mounted `dirsync`: directory updates are synchronous.
    pub dirsync: bool,
    pub read_only: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIXTURE: &str = "\
22 27 0:21 / /proc rw,relatime - proc proc rw
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard,resv_strict
25 24 0:23 / /dev/shm rw,relatime - tmpfs tmpfs rw,size=24684096k
42 27 7:0 / /mnt/a\\040b rw,relatime shared:7 - ext4 /dev/loop0 rw,journal_async_commit,nobarrier,data=writeback
43 27 7:1 / /mnt/s rw,relatime - ext4 /dev/loop1 rw,sync,dirsync
44 27 0:55 / /mnt/r1 ro,relatime - btrfs /dev/loop2 ro,space_cache=v2,subvolid=5,subvol=/
45 27 7:3 / /mnt/g rw - gfs2 /dev/loop3 rw,barrier=none
garbage line
";

    #[test]
    fn parses_every_field_and_unescapes() {
        let m = parse(FIXTURE);
        assert_eq!(m.len(), 7);
        let a = &m[3];
        assert_eq!(a.mount_id, 42);
        assert_eq!(a.devnum, DevNum { major: 7, minor: 0 });
        assert_eq!(a.point, PathBuf::from("/mnt/a b"));
        assert_eq!(a.fstype, "ext4");
        assert_eq!(a.source, "/dev/loop0");
        assert_eq!(a.mount_options, ["rw", "relatime"]);
        assert_eq!(a.options()[..3], ["rw", "relatime", "journal_async_commit"]);
        assert_eq!(a.value("data"), Some("writeback"));
    }

    #[test]
    fn barrier_sync_and_journal_options() {
        let m = parse(FIXTURE);
        let d = m[3].durability();
        assert_eq!(d.barrier_off.as_deref(), Some("nobarrier"));
        assert!(d.journal_async_commit);
        assert_eq!(d.data_mode.as_deref(), Some("writeback"));
        assert!(!d.sync && !d.read_only);
        let s = m[4].durability();
        assert!(s.sync && s.dirsync && s.barrier_off.is_none());
        assert!(m[5].durability().read_only);
        assert_eq!(
            m[6].durability().barrier_off.as_deref(),
            Some("barrier=none")
        );
        assert_eq!(m[1].durability(), Durability::default());
    }

    #[test]
    fn longest_prefix_wins() {
        let m = parse(FIXTURE);
        assert_eq!(mount_of(&m, Path::new("/mnt/a b/x")).unwrap().mount_id, 42);
        assert_eq!(mount_of(&m, Path::new("/var/tmp")).unwrap().mount_id, 27);
        assert_eq!(mount_of(&m, Path::new("/dev/shm")).unwrap().fstype, "tmpfs");
    }

    #[test]
    fn this_machine_has_a_root_mount() {
        let m = read(Path::new("/proc")).unwrap();
        assert!(mount_of(&m, Path::new("/")).is_some());
    }
}
