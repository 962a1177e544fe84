//! Lab volumes: file systems on loop devices over image files diskpulse creates, so a
//! scenario can compare ext4 with xfs, or btrfs RAID 0 with RAID 1 and RAID 10, or a
//! volume capped at 200 write IOPS, on a machine without spare disks, md or
//! device-mapper.
//!
//! ```no_run
//! use engines::lab::{Fs, Lab, Raid, Throttle, VolumeSpec};
//! # fn main() -> anyhow::Result<()> {
//! let lab = Lab::open(std::path::Path::new(Lab::DEFAULT_ROOT));
//! let spec = VolumeSpec {
//!     raid: Raid::Raid1,
//!     devices: 2,
//!     throttle: Some(Throttle { write_iops: Some(500), ..Default::default() }),
//!     ..VolumeSpec::new("r1", 1 << 30, Fs::Btrfs)
//! };
//! let vol = lab.up(&spec)?;                 // images, loop devices, mkfs, mount, cgroup
//! let mut cmd = std::process::Command::new("nats-server");
//! vol.throttle_command(&mut cmd)?;          // the child starts inside the volume's cgroup
//! // ... run the broker with its store under vol.mount, record vol.device_names() ...
//! vol.down()?;                              // or drop it: Drop tears down too (also on panic)
//! # Ok(()) }
//! ```
//!
//! Layout under the root (default `/var/tmp/diskpulse-lab`): `images/<name>-<i>.img`
//! (sparse files, `size` bytes each), `mnt/<name>` (the mount point), `state.json` (what
//! was created, by which process: see [`state`]), `state.lock`.
//!
//! The code: `spec.rs` (what a volume is made of, and what cannot be built), `up.rs`
//! (build and roll back), `down.rs` (teardown), `status.rs` (`list`), [`state`] (the
//! state file), [`cgroup`] (which hierarchy throttles, and its files), [`os`] (losetup,
//! mkfs, mount, cgroups, processes); this file holds the
//! [`Lab`] and the [`Volume`] handle that tears down when dropped.
//!
//! Decisions, and what must stay true:
//! - **Only ours is touched.** Teardown acts on what the state file records, and only
//!   while it still matches: a loop device is detached only if its backing file is one
//!   of this volume's images under `ROOT/images` (path and inode); a mount is unmounted
//!   only if it is the top mount at `ROOT/mnt/<name>` and its source is one of those loop
//!   devices; a cgroup is removed only if it is `diskpulse-<name>` in a cgroup file
//!   system ([`cgroup::is_volume_group`]). Never
//!   `losetup -D`. mkfs runs without its force flag, only on loop devices just attached
//!   to images just created (`O_EXCL`), checked again right before (backing file, and the
//!   block-device write gate probe and check use: `collectors::gate`).
//! - **Recorded before created** (see [`state`]), so a crash at any point leaves an
//!   entry that `down` can clean. A loop device is picked with `losetup -f`, recorded,
//!   then attached by name: if another process took it meanwhile, the attach fails with
//!   EBUSY and we pick again.
//! - **Always torn down.** A failure mid-`up` rolls back what was created; a [`Volume`]
//!   tears down when dropped (on every exit path, panics included) unless
//!   [`Volume::keep`] was called (`diskpulse lab up`). Callers that run long install
//!   `commands::stop_on_signals` and pass the flag to [`Lab::with_stop`]: `up` then
//!   stops between steps (killing a running mkfs), rolls back and returns
//!   [`Interrupted`]; the caller's own loop ends and its `Volume`s drop. Entries whose
//!   creator died (`kill -9`) show as stale in [`Lab::list`]; [`Lab::down_all`] cleans
//!   them.
//! - **Direct I/O loop devices** (`losetup --direct-io=on`): the loop device reads and
//!   writes its image with O_DIRECT, so its writes reach the disk below when they
//!   complete (as on a real device) instead of landing in a second page cache that
//!   writeback empties later, and file data is not cached twice. `list` shows whether
//!   the kernel kept direct I/O on (it falls back to buffered when the image's file system
//!   cannot do it).
//! - **Write cache** (`queue/write_cache`) on a loop device decides only whether the
//!   kernel sends it flushes (which the loop turns into an fsync of the image): "write
//!   through" means fsync on the volume returns without flushing anything. The kernel
//!   keeps the setting for the next user of `loopN`, so teardown puts the old value back.
//! - **Throttles** are blk-throttle rules on every member loop device, in cgroup
//!   `diskpulse-<name>` of whichever hierarchy holds the block I/O controller: cgroup v1
//!   blkio (`blkio.throttle.*_device`) or cgroup v2 io (`io.max`), see [`cgroup`]. They
//!   limit I/O *submitted by processes in the cgroup*: O_DIRECT writes, reads, fsync's
//!   own writes; buffered writes are written back later by kernel threads that are not
//!   charged to the cgroup (unless memory and io are both on v2), so a process doing
//!   buffered writes is throttled only where it waits for writeback.
//! - **No background discards**: btrfs is mounted `nodiscard` unless the mount options
//!   say otherwise (btrfs defaults to `discard=async` since 6.2).
//! - Images are sparse: the first write to a region of a device allocates blocks in the
//!   image's file system (ext4 `lazy_itable_init=0,lazy_journal_init=0` writes inode
//!   tables and journal at mkfs, so no background thread writes later).

pub mod cgroup;
pub mod os;
pub mod state;

mod down;
mod spec;
mod status;
mod up;

use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::{anyhow, bail, Context};

use state::{Entry, Locked};

pub use down::Teardown;
pub(crate) use spec::validate_name;
pub use spec::{fmt_bytes, Fs, Raid, Throttle, VolumeSpec, WriteCache};
pub use status::{VolumeState, VolumeStatus};
pub use up::{check_root, Interrupted};

/// A lab: a root directory with images, mount points and the state file.
#[derive(Debug, Clone)]
pub struct Lab {
    root: PathBuf,
    stop: Option<Arc<AtomicBool>>,
}

/// A volume that is up. Dropping it tears it down (also while unwinding from a panic);
/// [`Volume::keep`] leaves it up for `diskpulse lab down`.
#[derive(Debug)]
pub struct Volume {
    pub name: String,
    /// Where the file system is mounted: `ROOT/mnt/<name>`.
    pub mount: PathBuf,
    /// `/dev/loopN` of each member, in order.
    pub loop_devices: Vec<String>,
    /// The cgroup (v1 blkio or v2 io) holding the throttles, when the spec has one.
    pub cgroup: Option<PathBuf>,
    pub spec: VolumeSpec,
    lab: Lab,
    root: PathBuf,
    id: String,
    armed: bool,
}

impl Volume {
    /// `loop5` for each member: the names `record --device` and diskstats use.
    pub fn device_names(&self) -> Vec<String> {
        self.loop_devices
            .iter()
            .map(|d| d.trim_start_matches("/dev/").to_string())
            .collect()
    }

    /// Moves a running process (all its threads) into the volume's cgroup, so its I/O
    /// to the volume is throttled. An error when the volume has no throttle.
    pub fn add_pid(&self, pid: u32) -> anyhow::Result<()> {
        let cg = self.cgroup.as_ref().ok_or_else(|| {
            anyhow!(
                "lab volume {} has no throttle, so no cgroup to put pid {pid} in",
                self.name
            )
        })?;
        fs::write(cg.join("cgroup.procs"), pid.to_string())
            .with_context(|| format!("putting pid {pid} into {}", cg.display()))
    }

    /// Makes `cmd`'s child join the volume's cgroup before it executes, so none of its
    /// I/O escapes the throttle. Does nothing when the volume has no throttle.
    pub fn throttle_command(&self, cmd: &mut Command) -> anyhow::Result<()> {
        let Some(cg) = &self.cgroup else {
            return Ok(());
        };
        let path = std::ffi::CString::new(cg.join("cgroup.procs").as_os_str().as_bytes())?;
        // SAFETY: the hook only calls open, write and close (async-signal-safe) on a path
        // allocated before the fork. Writing "0" to cgroup.procs (v1 and v2) moves the writer.
        unsafe {
            cmd.pre_exec(move || {
                let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                if fd < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                let r = libc::write(fd, b"0".as_ptr().cast(), 1);
                let e = std::io::Error::last_os_error();
                libc::close(fd);
                if r == 1 {
                    Ok(())
                } else {
                    Err(e)
                }
            });
        }
        Ok(())
    }

    /// Leaves the volume up after this handle (and process) is gone; `lab down` removes it.
    pub fn keep(mut self) -> anyhow::Result<()> {
        let l = Locked::acquire(&self.root)?;
        l.update(&self.id, |e| e.kept = true)?;
        self.armed = false;
        Ok(())
    }

    /// Tears the volume down now, reporting what went wrong (Drop can only print it).
    pub fn down(mut self) -> anyhow::Result<Teardown> {
        self.armed = false;
        let t = self
            .lab
            .teardown_matching(&self.root, |e| e.id == self.id)?;
        Ok(t.into_iter().next().unwrap_or(Teardown {
            name: self.name.clone(),
            removed: vec![],
            left_alone: vec![],
        }))
    }
}

impl Drop for Volume {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        self.armed = false;
        match self.lab.teardown_matching(&self.root, |e| e.id == self.id) {
            Ok(ts) => {
                for t in ts {
                    for l in t.left_alone {
                        eprintln!("diskpulse lab: {}: left alone: {l}", t.name);
                    }
                }
            }
            Err(e) => eprintln!(
                "diskpulse lab: tearing down {} failed: {e:#} (run `diskpulse lab down {}`)",
                self.name, self.name
            ),
        }
    }
}

fn require_root() -> anyhow::Result<()> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!("lab volumes need root (losetup, mkfs, mount and cgroups)");
    }
    Ok(())
}

fn now_ns() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

/// Saves `e` over the entry with its id.
fn save(l: &Locked, e: &Entry) -> anyhow::Result<()> {
    let e = e.clone();
    l.update(&e.id.clone(), move |x| *x = e)
}

impl Lab {
    pub const DEFAULT_ROOT: &'static str = "/var/tmp/diskpulse-lab";

    /// A lab under `root` (made absolute; nothing is created until `up`).
    pub fn open(root: &Path) -> Lab {
        let root = if root.is_absolute() {
            root.to_path_buf()
        } else {
            std::env::current_dir()
                .map(|d| d.join(root))
                .unwrap_or_else(|_| root.to_path_buf())
        };
        Lab { root, stop: None }
    }

    /// `up` checks `stop` between steps (and kills a running mkfs): set it from a
    /// SIGINT/SIGTERM handler (`commands::stop_on_signals`). Teardown ignores it.
    pub fn with_stop(mut self, stop: Arc<AtomicBool>) -> Lab {
        self.stop = Some(stop);
        self
    }

    /// The root as given (absolute).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The root with symlinks resolved, when it exists.
    fn existing_root(&self) -> Option<PathBuf> {
        fs::canonicalize(&self.root).ok()
    }

    fn check_stop(&self) -> anyhow::Result<()> {
        if self
            .stop
            .as_ref()
            .is_some_and(|f| f.load(Ordering::Relaxed))
        {
            return Err(anyhow!(Interrupted::default()));
        }
        Ok(())
    }
}
