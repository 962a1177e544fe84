//! The file or block device a probe runs on: what it is, whether writing to it is safe,
//! and laying the file out before the measurement.
//!
//! Safety (DESIGN.md): the probe writes only to a file it creates (removed afterwards),
//! to an existing file the user named (kept), or to a block device the user named with
//! `--allow-destructive`, and only when the one write gate ([`crate::gate`], shared with
//! check and lab) finds nothing on or using it. The device is then opened with `O_EXCL`,
//! so the kernel refuses it too if something claims it between the check and the open.
//! Read-only jobs open a block device read-only and need none of this.
//!
//! Layout: like fio, a file is written in full before the measurement (1 MiB writes of
//! a non-zero pattern), so reads hit allocated blocks and writes overwrite them rather
//! than convert unwritten extents (an extra journal commit per write on ext4 and xfs).

use std::fs::File;
use std::os::unix::fs::{FileExt, FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use super::error::ProbeError;
use crate::devices::DevNum;
use crate::directio::{self, AlignedBuf, OpenFlags};
use crate::gate;
use crate::sysfs::BlockSysfs;

/// What the target is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetKind {
    /// Did not exist: created by the probe and removed afterwards.
    NewFile,
    /// An existing regular file: used and kept (extended if shorter than --size).
    ExistingFile { len: u64 },
    /// A block device (`name` as in /sys/class/block).
    BlockDevice { name: String },
}

/// How to inspect a target.
#[derive(Debug, Clone)]
pub struct TargetOptions {
    /// `--size`, if given.
    pub size: Option<u64>,
    /// The size of a new file without `--size`.
    pub default_size: u64,
    /// Whether the job writes (writes, fsync).
    pub writes: bool,
    pub direct: bool,
    pub allow_destructive: bool,
    pub sysfs: PathBuf,
    pub procfs: PathBuf,
}

/// A checked target. Dropping it removes a file the probe created.
#[derive(Debug)]
pub struct Target {
    pub path: PathBuf,
    pub kind: TargetKind,
    /// Jobs use bytes `0..size`.
    pub size: u64,
    /// File-system type holding a file ("ext4", "tmpfs", ...), "block device" for a device.
    pub fstype: String,
    /// Logical block size of the device under the target and the sysfs file it came from.
    logical_block: Option<(u32, PathBuf)>,
    /// Bytes still to write before the measurement (`from..to`), if any.
    pub layout: Option<(u64, u64)>,
    created: bool,
}

fn refused(path: &Path, why: impl Into<String>) -> ProbeError {
    ProbeError::Refused {
        path: path.to_path_buf(),
        why: why.into(),
    }
}

fn io_err(path: &Path, op: &str, e: std::io::Error) -> ProbeError {
    match e.raw_os_error() {
        Some(libc::EROFS) => ProbeError::ReadOnly {
            path: path.to_path_buf(),
        },
        _ => ProbeError::Io {
            path: path.to_path_buf(),
            op: op.to_string(),
            source: e,
        },
    }
}

/// Inspects `path` and decides size and layout. Writes nothing.
pub fn inspect(path: &Path, o: &TargetOptions) -> Result<Target, ProbeError> {
    match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let parent = match path.parent() {
                Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
                _ => PathBuf::from("."),
            };
            if !parent.is_dir() {
                return Err(refused(
                    path,
                    format!(
                        "directory {} does not exist; create it or name a file in an existing directory",
                        parent.display()
                    ),
                ));
            }
            refuse_pseudo_fs(path, &parent)?;
            let size = o.size.unwrap_or(o.default_size);
            Ok(Target {
                path: path.to_path_buf(),
                kind: TargetKind::NewFile,
                size,
                fstype: fs_type(&parent),
                logical_block: logical_block_of(&o.sysfs, &parent),
                layout: Some((0, size)),
                created: false,
            })
        }
        Err(e) => Err(io_err(path, "stat", e)),
        Ok(md) if md.file_type().is_block_device() => inspect_block(path, &md, o),
        Ok(md) if md.is_file() => {
            refuse_pseudo_fs(path, path)?;
            let len = md.len();
            let size = match o.size {
                Some(s) => s,
                None if len > 0 => len,
                None => o.default_size,
            };
            Ok(Target {
                path: path.to_path_buf(),
                kind: TargetKind::ExistingFile { len },
                size,
                fstype: fs_type(path),
                logical_block: logical_block_of(&o.sysfs, path),
                layout: (len < size).then_some((len, size)),
                created: false,
            })
        }
        Ok(md) if md.is_dir() => Err(refused(
            path,
            "is a directory; name a file in it (for example DIR/probe.dat)",
        )),
        Ok(_) => Err(refused(
            path,
            "is neither a regular file nor a block device",
        )),
    }
}

fn inspect_block(
    path: &Path,
    md: &std::fs::Metadata,
    o: &TargetOptions,
) -> Result<Target, ProbeError> {
    let num = DevNum::from_dev_t(md.rdev());
    let sys = BlockSysfs::new(&o.sysfs);
    let name = sys.name_of(num).unwrap_or_else(|| {
        path.file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned()
    });
    let dev_bytes = sys.size_bytes(&name).unwrap_or(0);
    if o.writes {
        if !o.allow_destructive {
            return Err(refused(
                path,
                format!("is a block device ({name}); this job writes to it and destroys its data: pass --allow-destructive if that is what you want"),
            ));
        }
        let dev = gate::BlockDev {
            path,
            name: &name,
            num,
        };
        let problems = gate::refusals(&dev, &o.sysfs, &o.procfs);
        if let Some(p) = problems.first() {
            return Err(refused(
                path,
                format!("{p}; diskpulse probe will not write to it, even with --allow-destructive"),
            ));
        }
    }
    let size = match o.size {
        Some(s) if dev_bytes > 0 && s > dev_bytes => {
            return Err(refused(
                path,
                format!("--size {s} is larger than the device ({dev_bytes} bytes)"),
            ))
        }
        Some(s) => s,
        None => dev_bytes,
    };
    let logical_block = sys.logical_block_size(num);
    Ok(Target {
        path: path.to_path_buf(),
        kind: TargetKind::BlockDevice { name },
        size,
        fstype: "block device".into(),
        logical_block,
        layout: None,
        created: false,
    })
}

impl Target {
    /// Whether the probe created the file (and will remove it).
    pub fn created(&self) -> bool {
        self.created
    }

    /// The flags to open the target with for the jobs.
    pub(crate) fn open_flags(
        &self,
        writes: bool,
        direct: bool,
        sync: directio::SyncFlag,
    ) -> OpenFlags {
        OpenFlags {
            read: true,
            write: writes,
            create: false,
            direct,
            sync,
        }
    }

    /// Opens the target for a job. A block device opened for writing with `claim` gets
    /// `O_EXCL`: the kernel then refuses it if it is mounted or claimed, and refuses anyone
    /// else's exclusive open while the descriptor lives. Only one descriptor can hold the
    /// claim, so the first job claims and the others open the claimed device plainly.
    pub fn open(&self, f: OpenFlags, claim: bool) -> Result<File, ProbeError> {
        let r = if f.write && claim && matches!(self.kind, TargetKind::BlockDevice { .. }) {
            let mut custom = 0;
            if f.direct {
                custom |= libc::O_DIRECT;
            }
            match f.sync {
                directio::SyncFlag::None => {}
                directio::SyncFlag::Dsync => custom |= libc::O_DSYNC,
                directio::SyncFlag::Sync => custom |= libc::O_SYNC,
            }
            gate::open_exclusive(&self.path, custom)
        } else {
            directio::open(&self.path, f)
        };
        r.map_err(|e| self.open_error(e, f.direct))
    }

    fn open_error(&self, e: std::io::Error, direct: bool) -> ProbeError {
        match e.raw_os_error() {
            Some(libc::EINVAL) if direct => ProbeError::DirectOpen {
                path: self.path.clone(),
                fstype: self.fstype.clone(),
            },
            Some(libc::EBUSY) => refused(
                &self.path,
                "is in use (the kernel refused an exclusive open: mounted, or claimed by another driver)",
            ),
            _ => io_err(&self.path, "open", e),
        }
    }

    /// The ", 512 bytes here (/sys/...)" part of a direct-I/O error.
    fn lbs_note(&self) -> String {
        match &self.logical_block {
            Some((v, p)) => format!(", {v} bytes here ({})", p.display()),
            None => String::new(),
        }
    }

    /// Writes the layout (`self.layout`), creating the file if needed. With `direct`,
    /// through O_DIRECT; otherwise buffered, then fsync and drop the file's page cache
    /// (fio's `invalidate=1`), so buffered reads start cold.
    /// Returns early (file incomplete, still removed on drop if created) when `stop` is set.
    pub fn lay_out(&mut self, direct: bool, stop: &AtomicBool) -> Result<(), ProbeError> {
        let Some((from, to)) = self.layout else {
            return Ok(());
        };
        let new = self.kind == TargetKind::NewFile;
        let f = directio::open(
            &self.path,
            OpenFlags {
                read: false,
                write: true,
                create: new,
                direct,
                sync: directio::SyncFlag::None,
            },
        )
        .map_err(|e| self.open_error(e, direct))?;
        if new {
            self.created = true;
        }
        const CHUNK: u64 = 1 << 20;
        let buf = AlignedBuf::new(CHUNK as usize);
        // Direct I/O needs whole logical blocks: the last chunk is rounded up to 4 KiB.
        let mut off = from - from % directio::ALIGN as u64;
        let end = to.div_ceil(directio::ALIGN as u64) * directio::ALIGN as u64;
        while off < end {
            if stop.load(Ordering::Relaxed) {
                return Ok(());
            }
            let n = (end - off).min(CHUNK) as usize;
            if let Err(e) = f.write_all_at(&buf.as_slice()[..n], off) {
                return Err(self.write_error(e, "laying out the file", off, n as u64, direct));
            }
            off += n as u64;
        }
        if !direct {
            f.sync_all()
                .map_err(|e| self.write_error(e, "laying out the file", off, 0, direct))?;
            use std::os::unix::io::AsRawFd;
            // SAFETY: fd is open; advice on a range of our file has no memory effects.
            unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        }
        self.layout = None;
        Ok(())
    }

    /// Turns an I/O error into the one-line error for it.
    fn write_error(
        &self,
        e: std::io::Error,
        during: &'static str,
        offset: u64,
        len: u64,
        direct: bool,
    ) -> ProbeError {
        self.io_error(e, during, "write", offset, len, direct)
    }

    /// Turns an errno from a read, write or sync into the one-line error for it.
    pub(crate) fn io_error(
        &self,
        e: std::io::Error,
        during: &'static str,
        op: &'static str,
        offset: u64,
        len: u64,
        direct: bool,
    ) -> ProbeError {
        match e.raw_os_error() {
            Some(libc::ENOSPC) | Some(libc::EDQUOT) => ProbeError::NoSpace {
                path: self.path.clone(),
                during,
                done_mib: offset >> 20,
                size_mib: self.size >> 20,
            },
            Some(libc::EROFS) => ProbeError::ReadOnly {
                path: self.path.clone(),
            },
            Some(libc::EINVAL) if direct && op != "fsync" && op != "fdatasync" => {
                ProbeError::DirectIo {
                    path: self.path.clone(),
                    op,
                    len,
                    offset,
                    lbs: self.lbs_note(),
                }
            }
            _ => ProbeError::Io {
                path: self.path.clone(),
                op: format!("{op} of {len} bytes at offset {offset} ({during})"),
                source: e,
            },
        }
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        if self.created {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// The file-system type holding `path` for messages ("ext2/3/4", "tmpfs", ...).
/// Refuses a target whose file system (`fs_of`: the file, or its directory for a new
/// one) is a kernel pseudo file system.
fn refuse_pseudo_fs(path: &Path, fs_of: &Path) -> Result<(), ProbeError> {
    match pseudo_fs_name(fs_of) {
        Some(name) => Err(refused(
            path,
            format!("is on {name}, a kernel pseudo file system, not storage; name a file on a disk-backed file system (for example /var/tmp/probe.dat)"),
        )),
        None => Ok(()),
    }
}

/// The name of the kernel pseudo file system holding `path` (`proc`, `sysfs`, ...), if
/// it is on one (also used by `diskpulse fsync --dir`).
pub fn pseudo_fs_name(path: &Path) -> Option<&'static str> {
    crate::fstype::pseudo_name(path)
}

pub fn fs_type(path: &Path) -> String {
    crate::fstype::name_of(path).unwrap_or_else(|| "an unknown file system".into())
}

/// The logical block size of the device holding `path`, from sysfs (partitions read
/// their disk's queue).
fn logical_block_of(sysfs: &Path, path: &Path) -> Option<(u32, PathBuf)> {
    let md = std::fs::metadata(path).ok()?;
    BlockSysfs::new(sysfs).logical_block_size(DevNum::from_dev_t(md.dev()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_own_fill_pattern_looks_like_no_file_system() {
        // A device the probe wrote to must stay probe-able.
        let b = AlignedBuf::new(128 * 1024);
        assert!(crate::gate::signature::detect_all(b.as_slice()).is_empty());
    }

    #[test]
    fn new_file_in_a_missing_directory_is_refused() {
        let o = TargetOptions {
            size: None,
            default_size: 1 << 20,
            writes: true,
            direct: true,
            allow_destructive: false,
            sysfs: "/sys".into(),
            procfs: "/proc".into(),
        };
        let e = inspect(Path::new("/nonexistent-dir-xyz/f"), &o).unwrap_err();
        assert!(e.to_string().contains("does not exist"), "{e}");
    }

    #[test]
    fn a_created_file_is_laid_out_and_removed() {
        let d = tempfile::tempdir_in("/var/tmp").unwrap();
        let p = d.path().join("probe.dat");
        let o = TargetOptions {
            size: Some(3 << 20),
            default_size: 1 << 20,
            writes: true,
            direct: true,
            allow_destructive: false,
            sysfs: "/sys".into(),
            procfs: "/proc".into(),
        };
        let mut t = inspect(&p, &o).unwrap();
        assert_eq!(t.kind, TargetKind::NewFile);
        t.lay_out(true, &AtomicBool::new(false)).unwrap();
        assert_eq!(std::fs::metadata(&p).unwrap().len(), 3 << 20);
        use std::os::unix::fs::MetadataExt;
        assert!(
            std::fs::metadata(&p).unwrap().blocks() * 512 >= 3 << 20,
            "blocks allocated"
        );
        drop(t);
        assert!(!p.exists());
    }
}
