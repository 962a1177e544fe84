//! The file-system type holding a path, from statfs(2)'s magic number: one table for
//! probe, fsync and check.
//!
//! The magic numbers are those of include/uapi/linux/magic.h. ext2, ext3 and ext4 share
//! one magic (0xEF53), so statfs cannot tell them apart and the name says so:
//! `ext2/3/4`. A magic we do not name is shown as hex (`0x9fa0` is procfs), which
//! anyone can look up in magic.h.

use std::path::Path;

/// The magic of `f_type`, as statfs returned it (the low 32 bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FsType(pub u32);

impl FsType {
    /// The name of a known file system.
    pub fn known(&self) -> Option<&'static str> {
        Some(match self.0 {
            0xEF53 => "ext2/3/4",
            0x5846_5342 => "xfs",
            0x9123_683E => "btrfs",
            0x0102_1994 => "tmpfs",
            0x8584_58F6 => "ramfs",
            0xF2F5_2010 => "f2fs",
            0x2FC1_2FC1 => "zfs",
            0x794C_7630 => "overlayfs",
            0x6969 => "nfs",
            0xFF53_4D42 | 0xFE53_4D42 => "cifs/smb",
            0x6573_5546 => "fuse",
            0x4D44 => "vfat",
            _ => return None,
        })
    }

    /// The name, or the magic in hex.
    pub fn name(&self) -> String {
        match self.known() {
            Some(n) => n.to_string(),
            None => format!("0x{:x}", self.0),
        }
    }

    /// Whether the page cache is the storage: no block device under it at all.
    #[cfg(test)]
    fn is_memory(&self) -> bool {
        matches!(self.known(), Some("tmpfs" | "ramfs"))
    }
}

impl std::fmt::Display for FsType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name())
    }
}

/// statfs(2) of `path`; `None` when it fails (missing path, no permission).
pub fn of(path: &Path) -> Option<FsType> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: statfs is plain data; zeroed is a valid value.
    let mut s: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: c is a valid NUL-terminated path and s a writable statfs.
    if unsafe { libc::statfs(c.as_ptr(), &mut s) } != 0 {
        return None;
    }
    Some(FsType((s.f_type as u64 & 0xffff_ffff) as u32))
}

/// The name of the file system holding `path` (`ext2/3/4`, `tmpfs`, `0x9fa0`, ...).
pub fn name_of(path: &Path) -> Option<String> {
    of(path).map(|t| t.name())
}

/// Kernel pseudo file systems (statfs magics from include/uapi/linux/magic.h): their
/// files are views of kernel state, not storage, so nothing may be measured or kept
/// there (a probe would write into a kernel knob; a lab image could not be kept).
const PSEUDO: [(u32, &str); 15] = [
    (0x9fa0, "proc"),
    (0x6265_6572, "sysfs"),
    (0x6462_6720, "debugfs"),
    (0x7472_6163, "tracefs"),
    (0x0027_e0eb, "cgroup"),
    (0x6367_7270, "cgroup2"),
    (0x1cd1, "devpts"),
    (0x7363_6673, "securityfs"),
    (0xcafe_4a11, "bpf"),
    (0x6265_6570, "configfs"),
    (0x6165_676c, "pstore"),
    (0xde5e_81e4, "efivarfs"),
    (0x1980_0202, "mqueue"),
    (0x4249_4e4d, "binfmt_misc"),
    (0x6e73_6673, "nsfs"),
];

/// The name of the kernel pseudo file system holding `path` (`proc`, `sysfs`,
/// `cgroup`, ...), or `None` for a file system that holds files.
pub fn pseudo_name(path: &Path) -> Option<&'static str> {
    let t = of(path)?;
    PSEUDO.iter().find(|(m, _)| *m == t.0).map(|(_, n)| *n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_known_magics_and_shows_others_in_hex() {
        assert_eq!(FsType(0xEF53).name(), "ext2/3/4");
        assert_eq!(FsType(0x0102_1994).to_string(), "tmpfs");
        assert!(FsType(0x8584_58F6).is_memory());
        assert!(!FsType(0x5846_5342).is_memory());
        assert_eq!(name_of(Path::new("/proc")).as_deref(), Some("0x9fa0"));
        assert_eq!(name_of(Path::new("/dev/shm")).as_deref(), Some("tmpfs"));
        assert_eq!(of(Path::new("/no/such/path")), None);
    }
}
