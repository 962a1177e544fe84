//! "May this block device be overwritten?": the one write gate for probe, check and lab.
//!
//! A block device is refused when any of these holds, each checked for the device and
//! every partition of it:
//! - it is mounted (mountinfo, by device number or by the source's device number);
//! - it is in use as swap (`<procfs>/swaps`);
//! - another device is stacked on it (dm, md, bcache: `<sysfs>/class/block/X/holders`);
//! - it is a member of a btrfs the kernel knows (`<sysfs>/fs/btrfs/*/devices/X`);
//! - it has partitions;
//! - its first 128 KiB hold a signature ([`signature`]: file systems, partition tables,
//!   swap, LUKS, LVM, ISO 9660, MBR), or, when our table finds nothing, `blkid -p` does.
//!
//! What must stay true: the gate only reads, and passing it is not enough. The writer
//! then opens the device with [`open_exclusive`] (`O_EXCL`), so the kernel itself refuses
//! a device that is mounted or claimed between the check and the open, and anyone else's
//! exclusive open while our descriptor lives.

pub mod signature;

use std::fs::File;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::devices::DevNum;
use crate::mounts;
use crate::sysfs::BlockSysfs;
use signature::Signature;

/// Why a block device must not be written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// `who` (the device or a partition of it) is mounted on `point`.
    Mounted {
        who: String,
        point: PathBuf,
    },
    Swap {
        who: String,
    },
    /// Devices stacked on `who`, as listed in `dir`.
    Held {
        who: String,
        by: Vec<String>,
        dir: PathBuf,
    },
    BtrfsMember {
        who: String,
        fs_dir: PathBuf,
    },
    Partitions {
        dev: String,
        parts: Vec<String>,
    },
    /// A signature our table knows, found at byte `offset`.
    Signature {
        dev: String,
        what: Signature,
        offset: usize,
        path: PathBuf,
    },
    /// What `blkid -p` found ("a vfat signature", "a dos partition table").
    Blkid {
        dev: String,
        what: String,
        path: PathBuf,
    },
}

impl Refusal {
    /// What the device holds, for a refusal that is about its content.
    pub fn holds(&self) -> Option<String> {
        match self {
            Refusal::Signature { what, .. } => Some(what.name().to_string()),
            Refusal::Blkid { what, .. } => Some(what.clone()),
            _ => None,
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Mounted { who, point } => write!(f, "{who} is mounted on {}", point.display()),
            Refusal::Swap { who } => write!(f, "{who} is in use as swap"),
            Refusal::Held { who, by, dir } => {
                write!(f, "{who} is held by {} ({})", by.join(", "), dir.display())
            }
            Refusal::BtrfsMember { who, fs_dir } => write!(
                f,
                "{who} is a member of a mounted btrfs ({})",
                fs_dir.display()
            ),
            Refusal::Partitions { dev, parts } => {
                write!(f, "{dev} has partitions ({})", parts.join(", "))
            }
            Refusal::Signature {
                dev,
                what,
                offset,
                path,
            } => write!(
                f,
                "{dev} holds {} (magic at byte {offset}): erase it first if it is scratch (wipefs -a {})",
                what.name(),
                path.display()
            ),
            Refusal::Blkid { dev, what, path } => write!(
                f,
                "{dev} holds {what} (blkid -p): erase it first if it is scratch (wipefs -a {})",
                path.display()
            ),
        }
    }
}

/// The block device at `path` (`name` as in /sys/class/block, number `num`).
#[derive(Debug, Clone)]
pub struct BlockDev<'a> {
    pub path: &'a Path,
    pub name: &'a str,
    pub num: DevNum,
}

/// Everything that makes writing to `dev` unsafe, worst first. Empty when it looks like
/// scratch space. `sysfs`/`procfs` are the roots (normally `/sys`, `/proc`).
pub fn refusals(dev: &BlockDev, sysfs: &Path, procfs: &Path) -> Vec<Refusal> {
    let sys = BlockSysfs::new(sysfs);
    let mut out = vec![];
    let parts = sys.partitions(dev.name);
    let mut nums = vec![(dev.name.to_string(), dev.num)];
    nums.extend(parts.iter().filter_map(|(p, n)| n.map(|n| (p.clone(), n))));
    let who_is = |n: DevNum| nums.iter().find(|(_, x)| *x == n).map(|(w, _)| w.clone());

    for m in mounts::read(procfs).unwrap_or_default() {
        let by_source = || {
            m.source
                .starts_with('/')
                .then(|| rdev_of(Path::new(&m.source)))
                .flatten()
                .and_then(who_is)
        };
        if let Some(who) = who_is(m.devnum).or_else(by_source) {
            out.push(Refusal::Mounted {
                who,
                point: m.point.clone(),
            });
        }
    }
    if let Ok(sw) = std::fs::read_to_string(procfs.join("swaps")) {
        for line in sw.lines().skip(1) {
            let dev_path = line.split_whitespace().next().map(Path::new);
            if let Some(who) = dev_path.and_then(rdev_of).and_then(who_is) {
                out.push(Refusal::Swap { who });
            }
        }
    }
    for (who, _) in &nums {
        let by = sys.holders(who);
        if !by.is_empty() {
            out.push(Refusal::Held {
                who: who.clone(),
                by,
                dir: sys.dir(who).join("holders"),
            });
        }
    }
    if let Ok(rd) = std::fs::read_dir(sysfs.join("fs/btrfs")) {
        for fs_dir in rd.flatten() {
            for (who, _) in &nums {
                if fs_dir.path().join("devices").join(who).exists() {
                    out.push(Refusal::BtrfsMember {
                        who: who.clone(),
                        fs_dir: fs_dir.path(),
                    });
                }
            }
        }
    }
    if !parts.is_empty() {
        out.push(Refusal::Partitions {
            dev: dev.name.to_string(),
            parts: parts.into_iter().map(|(p, _)| p).collect(),
        });
    }
    if let Ok(head) = signature::read_head(dev.path) {
        for (what, offset) in signature::detect_all(&head) {
            out.push(Refusal::Signature {
                dev: dev.name.to_string(),
                what,
                offset,
                path: dev.path.to_path_buf(),
            });
        }
    }
    if out.is_empty() {
        if let Some(what) = blkid_signature(dev.path) {
            out.push(Refusal::Blkid {
                dev: dev.name.to_string(),
                what,
                path: dev.path.to_path_buf(),
            });
        }
    }
    out
}

/// The device number of block device node `p`.
pub fn rdev_of(p: &Path) -> Option<DevNum> {
    let md = std::fs::metadata(p).ok()?;
    md.file_type()
        .is_block_device()
        .then(|| DevNum::from_dev_t(md.rdev()))
}

/// Opens block device `dev` read-write with `O_EXCL` plus `extra` open flags (O_DIRECT,
/// O_DSYNC, ...): EBUSY means it is mounted or held by something else.
///
/// EBUSY is tried again for up to 300 ms: a program that just ended can hold its claim a
/// moment longer than its process (io_uring's registered files are released by deferred
/// kernel work after exit, fio's and ours alike), and a probe run right after another
/// must not be told the device is mounted.
pub fn open_exclusive(dev: &Path, extra: libc::c_int) -> std::io::Result<File> {
    let open = || {
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_EXCL | extra)
            .open(dev)
    };
    for _ in 0..6 {
        match open() {
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            r => return r,
        }
    }
    open()
}

/// `blkid -p -o export DEV` (low-level probe, no cache): the TYPE or PTTYPE it finds.
fn blkid_signature(path: &Path) -> Option<String> {
    let mut cmd = std::process::Command::new("blkid");
    cmd.args(["-p", "-o", "export"]).arg(path);
    // A probe that hangs (a device that does not answer reads) finds nothing here; the
    // gate's own read of the head decides then.
    let limit = crate::exec::Limit::new(
        std::time::Duration::from_secs(30),
        "`blkid -p`",
        "is the device answering reads?",
    );
    let out = crate::exec::output_within(&mut cmd, &limit).ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    for line in text.lines() {
        if let Some(t) = line.strip_prefix("TYPE=") {
            return Some(format!("a {t} signature"));
        }
        if let Some(t) = line.strip_prefix("PTTYPE=") {
            return Some(format!("a {t} partition table"));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_read_as_one_line_each() {
        let r = Refusal::Signature {
            dev: "loop3".into(),
            what: Signature::Ext,
            offset: 1080,
            path: "/dev/loop3".into(),
        };
        assert_eq!(
            r.to_string(),
            "loop3 holds an ext2/3/4 file system (magic at byte 1080): erase it first if it is scratch (wipefs -a /dev/loop3)"
        );
        assert_eq!(r.holds().as_deref(), Some("an ext2/3/4 file system"));
        let h = Refusal::Held {
            who: "sdb1".into(),
            by: vec!["dm-0".into(), "md0".into()],
            dir: "/sys/class/block/sdb1/holders".into(),
        };
        assert_eq!(
            h.to_string(),
            "sdb1 is held by dm-0, md0 (/sys/class/block/sdb1/holders)"
        );
        assert_eq!(h.holds(), None);
    }

    #[test]
    fn a_device_mounted_in_a_fixture_mount_table_is_refused_by_number() {
        let d = tempfile::tempdir().unwrap();
        let procfs = d.path().join("proc");
        std::fs::create_dir_all(procfs.join("self")).unwrap();
        std::fs::write(
            procfs.join("self/mountinfo"),
            "36 35 7:3 / /mnt/x rw,relatime shared:1 - ext4 /dev/nonexistent rw\n\
             37 35 8:1 / /boot rw - ext4 /dev/nonexistent2 rw\n",
        )
        .unwrap();
        // An empty file stands in for the device node: no signature in it.
        let node = d.path().join("loop3");
        std::fs::write(&node, vec![0u8; 4096]).unwrap();
        let dev = BlockDev {
            path: &node,
            name: "loop3",
            num: DevNum { major: 7, minor: 3 },
        };
        let r = refusals(&dev, &d.path().join("sys"), &procfs);
        assert_eq!(
            r[0],
            Refusal::Mounted {
                who: "loop3".into(),
                point: "/mnt/x".into()
            }
        );
        assert_eq!(r.len(), 1, "{r:?}");
    }
}
