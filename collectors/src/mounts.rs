//! The mount table: `<procfs>/self/mountinfo`, read in one place for probe, check,
//! devices and lab.
//!
//! A line is (see proc(5)):
//! `36 35 98:0 /mnt1 /mnt/parent rw,noatime master:1 - ext3 /dev/root rw,errors=continue`
//! i.e. mount id, parent id, `MAJ:MIN` of the file system, root within it, mount point,
//! per-mount options, optional fields up to `-`, file system type, source, super-block
//! options.
//!
//! Each line is parsed by procfs-core's `MountInfo::from_line`. Two things it leaves to
//! us, and which must stay true here: the kernel's octal escapes (`\040` for a space in a
//! mount point) are undone, and options keep the kernel's order (procfs-core keeps them
//! in a `HashMap`; `check` prints them as the kernel did). Lines that do not parse are
//! skipped, so one odd line never hides the rest of the table.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use procfs_core::process::MountInfo;

use crate::devnum::DevNum;

/// One mount, every field diskpulse uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    pub mount_id: u32,
    /// `st_dev` of files on this mount (anonymous `0:N` for btrfs, tmpfs, ...).
    pub devnum: DevNum,
    pub root: String,
    pub point: PathBuf,
    pub fstype: String,
    /// The mount source (`/dev/vda`, `tmpfs`, ...); empty when the kernel printed `none`.
    pub source: String,
    /// Per-mount options (`rw,relatime`), in the kernel's order.
    pub mount_options: Vec<String>,
    /// Super-block options (`rw,nobarrier,data=ordered`), in the kernel's order.
    pub super_options: Vec<String>,
}

/// Undoes mountinfo's octal escapes (`\040` for a space, `\134` for a backslash).
fn unescape(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = (b[i + 1] - b'0') as u32 * 64 + (b[i + 2] - b'0') as u32 * 8;
            out.push((v + (b[i + 3] - b'0') as u32) as u8);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

fn unescape_str(s: &str) -> String {
    String::from_utf8_lossy(&unescape(s)).into_owned()
}

/// The options of `raw` (the comma list as the kernel printed it) that procfs-core parsed
/// into `map`, in the kernel's order, `key` or `key=value`, unescaped.
fn ordered(raw: &str, map: &HashMap<String, Option<String>>) -> Vec<String> {
    raw.split(',')
        .filter_map(|o| {
            let key = o.split_once('=').map_or(o, |(k, _)| k);
            let opt = match map.get(key)? {
                Some(v) => format!("{key}={v}"),
                None => key.to_string(),
            };
            (!opt.is_empty()).then(|| unescape_str(&opt))
        })
        .collect()
}

fn from_line(line: &str) -> Option<Mount> {
    let mi = MountInfo::from_line(line).ok()?;
    let (pre, post) = line.split_once(" - ")?;
    let raw_mount_opts = pre.split(' ').nth(5)?;
    let raw_super_opts = post.split(' ').nth(2).unwrap_or("");
    Some(Mount {
        mount_id: u32::try_from(mi.mnt_id).ok()?,
        devnum: DevNum::parse(&mi.majmin)?,
        root: unescape_str(&mi.root),
        point: PathBuf::from(OsStr::from_bytes(&unescape(
            mi.mount_point.to_str().unwrap_or_default(),
        ))),
        mount_options: ordered(raw_mount_opts, &mi.mount_options),
        super_options: ordered(raw_super_opts, &mi.super_options),
        source: mi
            .mount_source
            .as_deref()
            .map(unescape_str)
            .unwrap_or_default(),
        fstype: unescape_str(&mi.fs_type),
    })
}

/// Parses mountinfo text; lines that do not parse are skipped.
pub fn parse(text: &str) -> Vec<Mount> {
    text.lines().filter_map(from_line).collect()
}

/// Reads `<procfs>/self/mountinfo`, in mount order (the last one at a point is on top).
pub fn read(procfs: &Path) -> std::io::Result<Vec<Mount>> {
    Ok(parse(&std::fs::read_to_string(
        procfs.join("self/mountinfo"),
    )?))
}

/// The mount holding `path` (canonical): the longest mount point that is a prefix of it;
/// of equal ones the last mounted (it hides the others).
pub fn mount_of<'a>(mounts: &'a [Mount], path: &Path) -> Option<&'a Mount> {
    let mut best: Option<&Mount> = None;
    for m in mounts {
        if path.starts_with(&m.point)
            && best.is_none_or(|b| m.point.as_os_str().len() >= b.point.as_os_str().len())
        {
            best = Some(m);
        }
    }
    best
}

/// The mount on top at exactly `point`, if any.
pub fn top_at<'a>(mounts: &'a [Mount], point: &Path) -> Option<&'a Mount> {
    mounts.iter().rev().find(|m| m.point == point)
}

impl Mount {
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
46 27 7:3 / /mnt/g rw - gfs2 /dev/loop3 rw,barrier=none
garbage line
";

    #[test]
    fn parses_every_field_in_the_kernels_order_and_unescapes() {
        let m = parse(FIXTURE);
        assert_eq!(m.len(), 8, "the garbage line is skipped, the rest kept");
        let a = &m[3];
        assert_eq!(a.mount_id, 42);
        assert_eq!(a.devnum, DevNum { major: 7, minor: 0 });
        assert_eq!(a.point, PathBuf::from("/mnt/a b"));
        assert_eq!(a.fstype, "ext4");
        assert_eq!(a.source, "/dev/loop0");
        assert_eq!(a.mount_options, ["rw", "relatime"]);
        assert_eq!(
            a.super_options,
            ["rw", "journal_async_commit", "nobarrier", "data=writeback"]
        );
        assert_eq!(a.options()[..3], ["rw", "relatime", "journal_async_commit"]);
        assert_eq!(a.value("data"), Some("writeback"));
        assert_eq!(m[5].value("subvol"), Some("/"));
    }

    #[test]
    fn longest_prefix_wins_and_the_last_mount_is_on_top() {
        let m = parse(FIXTURE);
        assert_eq!(mount_of(&m, Path::new("/mnt/a b/x")).unwrap().mount_id, 42);
        assert_eq!(mount_of(&m, Path::new("/var/tmp")).unwrap().mount_id, 27);
        assert_eq!(mount_of(&m, Path::new("/dev/shm")).unwrap().fstype, "tmpfs");
        assert_eq!(top_at(&m, Path::new("/mnt/g")).unwrap().mount_id, 46);
        assert!(top_at(&m, Path::new("/mnt")).is_none());
    }

    #[test]
    fn escapes_are_octal_only() {
        assert_eq!(unescape("/mnt/a\\040b"), b"/mnt/a b");
        assert_eq!(unescape("/a\\134b"), b"/a\\b");
        assert_eq!(unescape("/plain\\9x"), b"/plain\\9x");
        assert_eq!(unescape("/end\\04"), b"/end\\04");
    }

    #[test]
    fn this_machine_has_a_root_mount() {
        let m = read(Path::new("/proc")).unwrap();
        assert!(mount_of(&m, Path::new("/")).is_some());
    }
}
