//! Lab volumes: file systems on loop devices over image files diskpulse creates, so a
//! scenario can compare ext4 with xfs, or btrfs RAID 0 with RAID 1 and RAID 10, or a
//! volume capped at 200 write IOPS, on a machine without spare disks, md or
//! device-mapper.
//!
//! ```no_run
//! use diskpulse::lab::{Fs, Lab, Raid, Throttle, VolumeSpec};
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
//! Decisions, and what must stay true:
//! - **Only ours is touched.** Teardown acts on what the state file records, and only
//!   while it still matches: a loop device is detached only if its backing file is one
//!   of this volume's images under `ROOT/images` (path and inode); a mount is unmounted
//!   only if it is the top mount at `ROOT/mnt/<name>` and its source is one of those loop
//!   devices; a cgroup is removed only if it is `blkio/diskpulse-<name>`. Never
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
//! - **Throttles** are cgroup v1 blkio rules (`blkio.throttle.*_device`) on every member
//!   loop device, in cgroup `diskpulse-<name>`. They limit I/O *submitted by processes in
//!   the cgroup*: O_DIRECT writes, reads, fsync's own writes; buffered writes are
//!   written back later by kernel threads that are not charged to the cgroup, so a
//!   process doing buffered writes is throttled only where it waits for writeback.
//! - **No background discards**: btrfs is mounted `nodiscard` unless the mount options
//!   say otherwise (btrfs defaults to `discard=async` since 6.2).
//! - Images are sparse: the first write to a region of a device allocates blocks in the
//!   image's file system (ext4 `lazy_itable_init=0,lazy_journal_init=0` writes inode
//!   tables and journal at mkfs, so no background thread writes later).

pub mod os;
pub mod state;

use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use serde::{Deserialize, Serialize};

use crate::usage;
use state::{Entry, Locked, LoopRecord};

const MIB: u64 = 1 << 20;

/// A file system diskpulse can make on lab volumes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Fs {
    Ext4,
    Xfs,
    Btrfs,
}

impl Fs {
    pub fn name(self) -> &'static str {
        match self {
            Fs::Ext4 => "ext4",
            Fs::Xfs => "xfs",
            Fs::Btrfs => "btrfs",
        }
    }

    /// The smallest image (per device) its mkfs accepts here: xfsprogs 6.1 refuses
    /// file systems under 300 MiB; mkfs.btrfs 6.2 wants 131072000 bytes (125 MiB) per
    /// member for RAID profiles (we use that for every profile); ext4 works far lower,
    /// 16 MiB leaves room for a journal and a little data.
    pub fn min_device_bytes(self) -> u64 {
        match self {
            Fs::Ext4 => 16 * MIB,
            Fs::Xfs => 300 * MIB,
            Fs::Btrfs => 125 * MIB,
        }
    }
}

impl FromStr for Fs {
    type Err = String;
    fn from_str(s: &str) -> Result<Fs, String> {
        match s.to_ascii_lowercase().as_str() {
            "ext4" => Ok(Fs::Ext4),
            "xfs" => Ok(Fs::Xfs),
            "btrfs" => Ok(Fs::Btrfs),
            _ => Err(format!("takes ext4, xfs or btrfs; got '{s}'")),
        }
    }
}

/// How data and metadata spread over the devices (btrfs profiles; ext4 and xfs are
/// `Single` on one device: there is no md or device-mapper to stripe them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Raid {
    Single,
    Raid0,
    Raid1,
    Raid10,
}

impl Raid {
    pub fn name(self) -> &'static str {
        match self {
            Raid::Single => "single",
            Raid::Raid0 => "raid0",
            Raid::Raid1 => "raid1",
            Raid::Raid10 => "raid10",
        }
    }

    /// Devices needed: one for single, two for RAID 0 and 1, four for RAID 10.
    pub fn min_devices(self) -> usize {
        match self {
            Raid::Single => 1,
            Raid::Raid0 | Raid::Raid1 => 2,
            Raid::Raid10 => 4,
        }
    }

    /// The number of devices when none is given.
    pub fn default_devices(self) -> usize {
        self.min_devices()
    }
}

impl FromStr for Raid {
    type Err = String;
    fn from_str(s: &str) -> Result<Raid, String> {
        match s.to_ascii_lowercase().as_str() {
            "single" | "none" => Ok(Raid::Single),
            "0" | "raid0" => Ok(Raid::Raid0),
            "1" | "raid1" => Ok(Raid::Raid1),
            "10" | "raid10" => Ok(Raid::Raid10),
            _ => Err(format!("takes 0, 1, 10 or single; got '{s}'")),
        }
    }
}

/// cgroup v1 blkio limits, applied to each member loop device. `None` is no limit.
/// `*_bps` are bytes per second (the kernel's names).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Throttle {
    pub read_iops: Option<u64>,
    pub write_iops: Option<u64>,
    pub read_bps: Option<u64>,
    pub write_bps: Option<u64>,
}

impl Throttle {
    /// `(blkio file, value)` for each limit that is set.
    fn rules(&self) -> Vec<(&'static str, u64)> {
        [
            ("blkio.throttle.read_iops_device", self.read_iops),
            ("blkio.throttle.write_iops_device", self.write_iops),
            ("blkio.throttle.read_bps_device", self.read_bps),
            ("blkio.throttle.write_bps_device", self.write_bps),
        ]
        .into_iter()
        .filter_map(|(f, v)| v.map(|v| (f, v)))
        .collect()
    }

    /// "read 100 IOPS, write 50 MiB/s".
    pub fn describe(&self) -> String {
        let mut v = Vec::new();
        for (what, iops, bps) in [
            ("read", self.read_iops, self.read_bps),
            ("write", self.write_iops, self.write_bps),
        ] {
            if let Some(n) = iops {
                v.push(format!("{what} {n} IOPS"));
            }
            if let Some(b) = bps {
                v.push(format!("{what} {}/s", fmt_bytes(b)));
            }
        }
        v.join(", ")
    }
}

/// The loop device's `queue/write_cache`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WriteCache {
    /// "write back": flushes are sent (and become an fsync of the image).
    #[serde(rename = "back")]
    WriteBack,
    /// "write through": no flushes are sent.
    #[serde(rename = "through")]
    WriteThrough,
}

impl WriteCache {
    fn sysfs(self) -> &'static str {
        match self {
            WriteCache::WriteBack => "write back",
            WriteCache::WriteThrough => "write through",
        }
    }
}

impl FromStr for WriteCache {
    type Err = String;
    fn from_str(s: &str) -> Result<WriteCache, String> {
        match s.to_ascii_lowercase().as_str() {
            "back" | "write-back" | "writeback" | "on" => Ok(WriteCache::WriteBack),
            "through" | "write-through" | "writethrough" | "off" => Ok(WriteCache::WriteThrough),
            _ => Err(format!("takes back or through; got '{s}'")),
        }
    }
}

/// What to build. Start from [`VolumeSpec::new`] and change fields with struct update
/// syntax; [`Lab::up`] validates it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VolumeSpec {
    /// Letters, digits, `.`, `_`, `-`: it names the mount point, the images and the
    /// cgroup `diskpulse-<name>`.
    pub name: String,
    /// Size of *each* member device's image, bytes (a whole number of MiB).
    #[serde(rename = "size_bytes")]
    pub size: u64,
    pub fs: Fs,
    pub raid: Raid,
    /// Loop devices: 1 for single, >= 2 for RAID 0/1, >= 4 for RAID 10.
    pub devices: usize,
    /// Passed to `mount -o`.
    pub mount_options: Option<String>,
    pub throttle: Option<Throttle>,
    /// `None` leaves the kernel's default ("write back" on loop devices).
    pub write_cache: Option<WriteCache>,
}

impl VolumeSpec {
    /// One device, no RAID, no throttle, default mount options and write cache.
    pub fn new(name: &str, size: u64, fs: Fs) -> VolumeSpec {
        VolumeSpec {
            name: name.to_string(),
            size,
            fs,
            raid: Raid::Single,
            devices: 1,
            mount_options: None,
            throttle: None,
            write_cache: None,
        }
    }

    /// Checks everything that can be checked without touching the system. Errors are
    /// usage errors (one line; exit code 2 in the CLI).
    pub fn validate(&self) -> anyhow::Result<()> {
        validate_name(&self.name)?;
        let n = &self.name;
        if self.fs != Fs::Btrfs && (self.raid != Raid::Single || self.devices != 1) {
            return Err(usage!(
                "lab up {n}: {} takes one device and no RAID here (no md or device-mapper); use --fs btrfs for RAID 0/1/10",
                self.fs.name()
            ));
        }
        if self.devices < self.raid.min_devices() {
            return Err(usage!(
                "lab up {n}: {} needs at least {} devices; got {}",
                self.raid.name(),
                self.raid.min_devices(),
                self.devices
            ));
        }
        if self.raid == Raid::Single && self.devices != 1 {
            return Err(usage!(
                "lab up {n}: single takes one device; got {} (use --raid 0 to stripe)",
                self.devices
            ));
        }
        if self.devices > 16 {
            return Err(usage!(
                "lab up {n}: at most 16 devices; got {}",
                self.devices
            ));
        }
        if !self.size.is_multiple_of(MIB) {
            return Err(usage!(
                "lab up {n}: the size takes a whole number of MiB, like 512M or 2G; got {} bytes",
                self.size
            ));
        }
        let min = self.fs.min_device_bytes();
        if self.size < min {
            return Err(usage!(
                "lab up {n}: {} needs at least {} per device; got {}",
                self.fs.name(),
                fmt_bytes(min),
                fmt_bytes(self.size)
            ));
        }
        if self.size > (16u64 << 40) {
            return Err(usage!(
                "lab up {n}: at most 16 TiB per device; got {}",
                fmt_bytes(self.size)
            ));
        }
        if let Some(o) = &self.mount_options {
            if o.is_empty() || o.chars().any(|c| c.is_whitespace() || c.is_control()) {
                return Err(usage!(
                    "lab up {n}: mount options are a comma-separated list without spaces, like noatime,commit=5; got '{o}'"
                ));
            }
        }
        if let Some(t) = &self.throttle {
            if t.rules().is_empty() {
                return Err(usage!("lab up {n}: a throttle needs at least one limit"));
            }
            if t.rules().iter().any(|(_, v)| *v == 0) {
                return Err(usage!(
                    "lab up {n}: a throttle limit of 0 means no limit to the kernel; leave it out instead"
                ));
            }
        }
        Ok(())
    }

    /// "btrfs raid1, 2 x 1 GiB".
    pub fn describe(&self) -> String {
        let mut s = format!(
            "{} {}, {} x {}",
            self.fs.name(),
            self.raid.name(),
            self.devices,
            fmt_bytes(self.size)
        );
        if let Some(t) = &self.throttle {
            s.push_str(&format!(", throttled to {}", t.describe()));
        }
        if let Some(w) = self.write_cache {
            s.push_str(&format!(", write cache {}", w.sysfs()));
        }
        s
    }
}

/// Checks a volume name (usage error if bad).
pub fn validate_name(name: &str) -> anyhow::Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 48
        && !name.starts_with(['.', '-'])
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(usage!(
            "lab: a volume name is 1-48 letters, digits, '.', '_' or '-', not starting with '.' or '-' (it names a directory and a cgroup); got '{name}'"
        ))
    }
}

/// "1 GiB", "300 MiB", "4096 B".
pub fn fmt_bytes(b: u64) -> String {
    if b >= 1 << 30 && b.is_multiple_of(1 << 30) {
        format!("{} GiB", b >> 30)
    } else if b >= 1 << 30 {
        format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64)
    } else if b >= MIB && b.is_multiple_of(MIB) {
        format!("{} MiB", b >> 20)
    } else if b >= MIB {
        format!("{:.1} MiB", b as f64 / MIB as f64)
    } else if b >= 1024 && b.is_multiple_of(1024) {
        format!("{} KiB", b >> 10)
    } else {
        format!("{b} B")
    }
}

/// `up` stopped because the stop flag was set; everything it had created was removed
/// (`removed` says what that was, in [`Teardown::removed`]'s words).
#[derive(Debug, Clone, Default)]
pub struct Interrupted {
    pub removed: Vec<String>,
}

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("interrupted")
    }
}

impl std::error::Error for Interrupted {}

/// A lab: a root directory with images, mount points and the state file.
#[derive(Debug, Clone)]
pub struct Lab {
    root: PathBuf,
    blkio: PathBuf,
    stop: Option<Arc<AtomicBool>>,
}

/// What one teardown did.
#[derive(Debug, Clone, Serialize)]
pub struct Teardown {
    pub name: String,
    /// What was removed ("unmounted /var/tmp/diskpulse-lab/mnt/r1", "detached /dev/loop5", ...).
    pub removed: Vec<String>,
    /// What the state file named but that was not ours any more, so was left as it is.
    pub left_alone: Vec<String>,
}

/// A volume as `list` sees it.
#[derive(Debug, Clone, Serialize)]
pub struct VolumeStatus {
    pub name: String,
    /// `ok`, `creating` (its creator is still building it) or `stale`.
    pub state: VolumeState,
    /// Why it is stale.
    pub problem: Option<String>,
    pub mount: Option<PathBuf>,
    pub fs: Fs,
    pub raid: Raid,
    pub devices: usize,
    pub size_bytes: u64,
    pub throttle: Option<Throttle>,
    pub write_cache: Option<WriteCache>,
    pub mount_options: Option<String>,
    pub loop_devices: Vec<String>,
    /// Per loop device: the kernel does direct I/O to the image (`loop/dio`); `None`
    /// when it is not attached.
    pub direct_io: Vec<Option<bool>>,
    pub images: Vec<PathBuf>,
    pub cgroup: Option<PathBuf>,
    pub owner_pid: u32,
    /// Stays up after its creator exits (made by `diskpulse lab up`).
    pub kept: bool,
    pub created: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum VolumeState {
    Ok,
    Creating,
    Stale,
}

impl VolumeState {
    pub fn name(self) -> &'static str {
        match self {
            VolumeState::Ok => "ok",
            VolumeState::Creating => "creating",
            VolumeState::Stale => "stale",
        }
    }
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
    /// The blkio cgroup holding the throttles, when the spec has one.
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
        // allocated before the fork. Writing "0" to a v1 cgroup.procs moves the writer.
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

impl Lab {
    pub const DEFAULT_ROOT: &'static str = "/var/tmp/diskpulse-lab";
    /// Where cgroup v1 blkio is mounted.
    pub const BLKIO: &'static str = "/sys/fs/cgroup/blkio";

    /// A lab under `root` (made absolute; nothing is created until `up`).
    pub fn open(root: &Path) -> Lab {
        let root = if root.is_absolute() {
            root.to_path_buf()
        } else {
            std::env::current_dir()
                .map(|d| d.join(root))
                .unwrap_or_else(|_| root.to_path_buf())
        };
        Lab {
            root,
            blkio: PathBuf::from(Lab::BLKIO),
            stop: None,
        }
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

    /// Creates the volume: images, loop devices, write cache, mkfs, mount, cgroup. On any
    /// error (or [`Interrupted`]) what was created so far is removed before returning.
    pub fn up(&self, spec: &VolumeSpec) -> anyhow::Result<Volume> {
        spec.validate()?;
        require_root()?;
        let cgroup = match spec.throttle {
            None => None,
            Some(_) => {
                if !self.blkio.join("cgroup.procs").exists() {
                    bail!(
                        "lab up {}: throttles need cgroup v1 blkio, which is not mounted at {}",
                        spec.name,
                        self.blkio.display()
                    );
                }
                Some(self.blkio.join(format!("diskpulse-{}", spec.name)))
            }
        };
        for d in ["images", "mnt"] {
            let p = self.root.join(d);
            fs::create_dir_all(&p).with_context(|| format!("creating {}", p.display()))?;
        }
        let root = fs::canonicalize(&self.root)?;
        let need = spec.size * spec.devices as u64;
        if let Some(free) = os::free_bytes(&root.join("images")) {
            if need > free {
                bail!(
                    "lab up {}: {} image(s) of {} need {} on the file system of {}; it has {} free (images are sparse, but a full disk would fail the volume's writes)",
                    spec.name,
                    spec.devices,
                    fmt_bytes(spec.size),
                    fmt_bytes(need),
                    root.display(),
                    fmt_bytes(free)
                );
            }
        }
        let me = std::process::id();
        let id = format!("{}-{me}-{}", spec.name, now_ns());
        {
            let l = Locked::acquire(&root)?;
            let mut s = l.load()?;
            if s.volumes.iter().any(|e| e.name == spec.name) {
                return Err(usage!(
                    "lab up {0}: a volume named '{0}' is in {1}/state.json already (`diskpulse lab list --root {1}`; `diskpulse lab down {0}` removes it)",
                    spec.name,
                    root.display()
                ));
            }
            if let Some(cg) = cgroup.as_ref().filter(|cg| cg.exists()) {
                bail!(
                    "lab up {}: cgroup {} exists already (a volume of the same name under another lab root?): use another name, or rmdir it if it is a leftover",
                    spec.name,
                    cg.display()
                );
            }
            s.volumes.push(Entry {
                name: spec.name.clone(),
                id: id.clone(),
                spec: spec.clone(),
                owner_pid: me,
                owner_start_ticks: os::process_start_ticks(me).unwrap_or(0),
                kept: false,
                complete: false,
                created: chrono::Utc::now().to_rfc3339(),
                images: vec![],
                loop_devices: vec![],
                mount: None,
                cgroup: None,
            });
            l.save(&s)?;
        }
        // From here on the Volume is armed: a panic tears down through Drop.
        let mut vol = Volume {
            name: spec.name.clone(),
            mount: root.join("mnt").join(&spec.name),
            loop_devices: vec![],
            cgroup: None,
            spec: spec.clone(),
            lab: Lab {
                stop: None,
                ..self.clone()
            },
            root: root.clone(),
            id,
            armed: true,
        };
        match self.build(&mut vol, cgroup) {
            Ok(()) => Ok(vol),
            Err(e) => {
                vol.armed = false;
                match self.teardown_matching(&root, |x| x.id == vol.id) {
                    Ok(t) if e.downcast_ref::<Interrupted>().is_some() => {
                        Err(anyhow!(Interrupted {
                            removed: t.into_iter().flat_map(|t| t.removed).collect(),
                        }))
                    }
                    Ok(_) => Err(e),
                    Err(te) => Err(anyhow!(
                        "{e:#}; rolling back also failed: {te:#} (run `diskpulse lab down {}`)",
                        vol.name
                    )),
                }
            }
        }
    }

    /// Records a change to the entry `id` under the lock.
    fn record(&self, root: &Path, id: &str, f: impl FnOnce(&mut Entry)) -> anyhow::Result<()> {
        Locked::acquire(root)?.update(id, f)
    }

    fn build(&self, vol: &mut Volume, cgroup: Option<PathBuf>) -> anyhow::Result<()> {
        let root = vol.root.clone();
        let id = vol.id.clone();
        let spec = vol.spec.clone();
        let stop = self.stop.as_ref();

        // 1. Images: sparse files we create (O_EXCL: never one that was there before).
        let mut images = Vec::new();
        for i in 0..spec.devices {
            self.check_stop()?;
            let img = root.join("images").join(format!("{}-{i}.img", spec.name));
            self.record(&root, &id, |e| e.images.push(img.clone()))?;
            let f = match fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&img)
            {
                Ok(f) => f,
                Err(err) => {
                    // Not created by this run: forget it, so the rollback leaves it be.
                    self.record(&root, &id, |e| e.images.retain(|p| *p != img))?;
                    let hint = if err.kind() == std::io::ErrorKind::AlreadyExists {
                        " (a leftover of an earlier run? nothing in state.json names it: remove it by hand)"
                    } else {
                        ""
                    };
                    return Err(anyhow!(err).context(format!("creating {}{hint}", img.display())));
                }
            };
            f.set_len(spec.size)
                .with_context(|| format!("sizing {}", img.display()))?;
            images.push(img);
        }

        // 2. Loop devices: pick a free one, record it, attach it by name.
        for img in &images {
            self.check_stop()?;
            let dev = self.attach(&root, &id, img)?;
            vol.loop_devices.push(dev.clone());
            if let Some(wc) = spec.write_cache {
                let name = os::loop_name(&dev).expect("checked in attach");
                let p = format!("/sys/block/{name}/queue/write_cache");
                let before = fs::read_to_string(&p)
                    .with_context(|| format!("reading {p}"))?
                    .trim()
                    .to_string();
                let d = dev.clone();
                self.record(&root, &id, |e| {
                    if let Some(r) = e.loop_devices.iter_mut().find(|r| r.device == d) {
                        r.write_cache_before = Some(before.clone());
                    }
                })?;
                fs::write(&p, wc.sysfs()).with_context(|| format!("writing {p}"))?;
                let now = fs::read_to_string(&p).unwrap_or_default();
                if now.trim() != wc.sysfs() {
                    bail!("{p} reads '{}' after writing '{}'", now.trim(), wc.sysfs());
                }
            }
        }

        // 3. mkfs, on devices checked again to be ours. No force flag: if anything were
        //    on them, mkfs would refuse.
        for (dev, img) in vol.loop_devices.iter().zip(&images) {
            match os::loop_backing(dev) {
                Some(b) if os::backed_by(&b, img) => {}
                _ => bail!(
                    "{dev} is no longer backed by {}: not formatting it",
                    img.display()
                ),
            }
            if let Some(r) = os::write_refusals(dev)?.first() {
                bail!("{r}: not formatting it");
            }
        }
        self.check_stop()?;
        let devs: Vec<&str> = vol.loop_devices.iter().map(|s| s.as_str()).collect();
        let mut argv: Vec<&str> = match spec.fs {
            Fs::Ext4 => vec![
                "mkfs.ext4",
                "-q",
                "-E",
                "lazy_itable_init=0,lazy_journal_init=0,nodiscard",
            ],
            Fs::Xfs => vec!["mkfs.xfs", "-q", "-K"],
            Fs::Btrfs => vec![
                "mkfs.btrfs",
                "-q",
                "-K",
                "-d",
                spec.raid.name(),
                "-m",
                spec.raid.name(),
            ],
        };
        argv.extend(&devs);
        os::run_tool(&argv, true, stop)?;

        // 4. Mount at ROOT/mnt/<name>.
        self.check_stop()?;
        let point = vol.mount.clone();
        self.record(&root, &id, |e| e.mount = Some(point.clone()))?;
        if let Some(m) = os::top_mount_at(&point)? {
            bail!(
                "{} is already a mount point ({} from {}): not mounting over it",
                point.display(),
                m.fstype,
                m.source
            );
        }
        match fs::create_dir(&point) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                if fs::read_dir(&point)?.next().is_some() {
                    bail!(
                        "{} exists and is not empty: not mounting over it",
                        point.display()
                    );
                }
            }
            Err(e) => return Err(anyhow!(e).context(format!("creating {}", point.display()))),
        }
        let point_s = point
            .to_str()
            .ok_or_else(|| anyhow!("the lab root must be a UTF-8 path; got {}", point.display()))?;
        let mut argv = vec!["mount", "-t", spec.fs.name()];
        let options = mount_options(&spec);
        if let Some(o) = &options {
            argv.extend(["-o", o.as_str()]);
        }
        argv.extend([devs[0], point_s]);
        os::run_tool(&argv, false, stop)?;
        match os::top_mount_at(&point)? {
            Some(m) if vol.loop_devices.contains(&m.source) => {}
            other => bail!("after mount, {} shows {other:?}", point.display()),
        }

        // 5. The blkio cgroup with a rule per member device.
        if let (Some(cg), Some(t)) = (cgroup, spec.throttle) {
            self.check_stop()?;
            self.record(&root, &id, |e| e.cgroup = Some(cg.clone()))?;
            fs::create_dir(&cg).with_context(|| format!("creating cgroup {}", cg.display()))?;
            vol.cgroup = Some(cg.clone());
            for dev in &vol.loop_devices {
                let (maj, min) = os::dev_numbers(os::loop_name(dev).expect("ours"))?;
                for (file, v) in t.rules() {
                    let p = cg.join(file);
                    fs::write(&p, format!("{maj}:{min} {v}"))
                        .with_context(|| format!("writing '{maj}:{min} {v}' to {}", p.display()))?;
                }
            }
        }
        self.check_stop()?;
        self.record(&root, &id, |e| e.complete = true)?;
        Ok(())
    }

    /// Attaches `img` to a free loop device with direct I/O and returns `/dev/loopN`.
    fn attach(&self, root: &Path, id: &str, img: &Path) -> anyhow::Result<String> {
        let img_s = img
            .to_str()
            .ok_or_else(|| anyhow!("the lab root must be a UTF-8 path; got {}", img.display()))?;
        let mut last = None;
        for _ in 0..8 {
            let out = os::run_tool(&["losetup", "-f"], false, None)?;
            let dev = out.trim().to_string();
            if os::loop_name(&dev).is_none() {
                bail!("`losetup -f` printed '{dev}', not a loop device");
            }
            let rec = LoopRecord {
                device: dev.clone(),
                image: img.to_path_buf(),
                write_cache_before: None,
            };
            self.record(root, id, |e| e.loop_devices.push(rec))?;
            match os::run_tool(&["losetup", "--direct-io=on", &dev, img_s], false, None) {
                Ok(_) => match os::loop_backing(&dev) {
                    Some(b) if os::backed_by(&b, img) => return Ok(dev),
                    b => bail!("after attaching {}, {dev} shows {b:?}", img.display()),
                },
                Err(e) => {
                    // Another process took the device between `-f` and our attach (EBUSY).
                    // Forget it, unless it somehow is ours.
                    let ours = os::loop_backing(&dev).is_some_and(|b| os::backed_by(&b, img));
                    if ours {
                        return Ok(dev);
                    }
                    self.record(root, id, |e| {
                        e.loop_devices
                            .retain(|r| !(r.device == dev && r.image == img));
                    })?;
                    last = Some(e);
                }
            }
        }
        Err(last
            .unwrap_or_else(|| anyhow!("no attempt made"))
            .context(format!("attaching {} to a loop device", img.display())))
    }

    /// Tears down the volume `name` (whoever created it). Things it names that are not
    /// ours any more are left alone and listed in the result. An error (entry kept) when
    /// something of ours could not be removed, e.g. a mount still in use.
    pub fn down(&self, name: &str) -> anyhow::Result<Teardown> {
        validate_name(name)?;
        let Some(root) = self.existing_root() else {
            return Err(usage!(
                "lab down: no lab volume named '{name}': {} does not exist",
                self.root.display()
            ));
        };
        let known: Vec<String> = state::load(&root.join("state.json"))?
            .volumes
            .into_iter()
            .map(|e| e.name)
            .collect();
        if !known.contains(&name.to_string()) {
            return Err(usage!(
                "lab down: no lab volume named '{name}' under {} (there: {})",
                root.display(),
                if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                }
            ));
        }
        let mut t = self.teardown_matching(&root, |e| e.name == name)?;
        Ok(t.pop().unwrap_or(Teardown {
            name: name.to_string(),
            removed: vec![],
            left_alone: vec![],
        }))
    }

    /// Tears down every volume in the state file: kept ones, ones still owned by a
    /// running process, and stale ones from crashed runs. Goes on past failures and
    /// reports them all at the end.
    pub fn down_all(&self) -> anyhow::Result<Vec<Teardown>> {
        let Some(root) = self.existing_root() else {
            return Ok(vec![]);
        };
        self.teardown_matching(&root, |_| true)
    }

    /// Every volume in the state file, with whether it is still what was made.
    pub fn list(&self) -> anyhow::Result<Vec<VolumeStatus>> {
        let Some(root) = self.existing_root() else {
            return Ok(vec![]);
        };
        let s = state::load(&root.join("state.json"))?;
        Ok(s.volumes.iter().map(|e| status_of(&root, e)).collect())
    }

    /// Tears down each entry `pick` selects, under the state lock.
    fn teardown_matching(
        &self,
        root: &Path,
        pick: impl Fn(&Entry) -> bool,
    ) -> anyhow::Result<Vec<Teardown>> {
        let l = Locked::acquire(root)?;
        let entries: Vec<Entry> = l.load()?.volumes.into_iter().filter(|e| pick(e)).collect();
        let mut done = Vec::new();
        let mut errors = Vec::new();
        for e in entries {
            match self.teardown_entry(root, &l, e) {
                Ok(t) => done.push(t),
                Err(err) => errors.push(format!("{err:#}")),
            }
        }
        if errors.is_empty() {
            Ok(done)
        } else {
            for t in &done {
                for a in &t.left_alone {
                    eprintln!("diskpulse lab: {}: left alone: {a}", t.name);
                }
            }
            Err(anyhow!(errors.join("; ")))
        }
    }

    /// Removes one entry's cgroup, mount, loop devices and images, each only if it is
    /// still ours; saves progress after each step; drops the entry when all is gone.
    fn teardown_entry(&self, root: &Path, l: &Locked, mut e: Entry) -> anyhow::Result<Teardown> {
        let mut t = Teardown {
            name: e.name.clone(),
            removed: vec![],
            left_alone: vec![],
        };
        let mut errors: Vec<String> = Vec::new();
        let images_dir = root.join("images");
        let image_ok = |p: &Path| -> bool {
            p.parent() == Some(images_dir.as_path())
                && p.file_name()
                    .and_then(|f| f.to_str())
                    .and_then(|f| f.strip_prefix(&format!("{}-", e.name)))
                    .and_then(|f| f.strip_suffix(".img"))
                    .is_some_and(|i| !i.is_empty() && i.bytes().all(|b| b.is_ascii_digit()))
        };
        let images: Vec<PathBuf> = e.images.iter().filter(|p| image_ok(p)).cloned().collect();
        for p in e.images.iter().filter(|p| !image_ok(p)) {
            t.left_alone.push(format!(
                "image {} (not a lab image path under {})",
                p.display(),
                images_dir.display()
            ));
        }
        // Loop devices that are ours now: recorded, and backed by a recorded image.
        let ours: Vec<LoopRecord> = e
            .loop_devices
            .iter()
            .filter(|r| {
                os::loop_name(&r.device).is_some()
                    && images.contains(&r.image)
                    && os::loop_backing(&r.device).is_some_and(|b| os::backed_by(&b, &r.image))
            })
            .cloned()
            .collect();
        let our_devs: Vec<String> = ours.iter().map(|r| r.device.clone()).collect();

        // 1. cgroup (its processes move to the blkio root).
        if let Some(cg) = e.cgroup.clone() {
            let expected = self.blkio.join(format!("diskpulse-{}", e.name));
            if cg != expected {
                t.left_alone.push(format!(
                    "cgroup {} (not {})",
                    cg.display(),
                    expected.display()
                ));
            } else if cg.exists() {
                match os::remove_cgroup(&cg, &self.blkio) {
                    Ok(()) => t.removed.push(format!("removed cgroup {}", cg.display())),
                    Err(err) => errors.push(format!("{err:#}")),
                }
            }
            if errors.is_empty() {
                e.cgroup = None;
                save(l, &e)?;
            }
        }

        // 2. The mount, while the top mount at our point comes from our loop device.
        if let Some(point) = e.mount.clone() {
            let expected = root.join("mnt").join(&e.name);
            if point != expected {
                t.left_alone.push(format!(
                    "mount point {} (not {})",
                    point.display(),
                    expected.display()
                ));
                e.mount = None;
            } else {
                let mut unmounted = false;
                for _ in 0..8 {
                    match os::top_mount_at(&point)? {
                        None => break,
                        Some(m) if our_devs.contains(&m.source) => {
                            match os::run_tool(&["umount", &point.to_string_lossy()], false, None) {
                                Ok(_) => {
                                    unmounted = true;
                                    t.removed.push(format!(
                                        "unmounted {} ({})",
                                        point.display(),
                                        m.source
                                    ));
                                }
                                Err(err) => {
                                    errors.push(format!("{err:#} (is a process still using it?)"));
                                    break;
                                }
                            }
                        }
                        Some(m) => {
                            t.left_alone.push(format!(
                                "the {} mount at {} from {} (not one of our loop devices)",
                                m.fstype,
                                point.display(),
                                m.source
                            ));
                            errors.push(format!(
                                "{} has a mount that is not ours on top ({}): unmount it, then run down again",
                                point.display(),
                                m.source
                            ));
                            break;
                        }
                    }
                }
                if unmounted && e.spec.fs == Fs::Btrfs {
                    // Let the btrfs module forget the members before the devices are reused.
                    for d in &our_devs {
                        let _ =
                            os::run_tool(&["btrfs", "device", "scan", "--forget", d], false, None);
                    }
                }
                if errors.is_empty() {
                    match fs::remove_dir(&point) {
                        Ok(()) => t.removed.push(format!("removed {}", point.display())),
                        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
                        Err(err) => t.left_alone.push(format!(
                            "directory {} ({err}): left as it is",
                            point.display()
                        )),
                    }
                    e.mount = None;
                }
            }
            save(l, &e)?;
        }
        if !errors.is_empty() {
            bail!("lab down {}: {}", e.name, errors.join("; "));
        }

        // 3. Loop devices backed by our images: put write_cache back, detach.
        let mut kept_records = Vec::new();
        for r in e.loop_devices.clone() {
            if !our_devs.contains(&r.device) {
                match os::loop_backing(&r.device).filter(|_| os::loop_name(&r.device).is_some()) {
                    None => {} // not attached: nothing to do
                    Some(b) => t.left_alone.push(format!(
                        "{} (backed by {}, not our image {})",
                        r.device,
                        b.path,
                        r.image.display()
                    )),
                }
                continue;
            }
            if let Some(before) = &r.write_cache_before {
                let name = os::loop_name(&r.device).expect("checked");
                let _ = fs::write(format!("/sys/block/{name}/queue/write_cache"), before);
            }
            match os::run_tool(&["losetup", "-d", &r.device], false, None) {
                Ok(_) if os::wait_detached(&r.device, Duration::from_secs(5)) => {
                    t.removed.push(format!("detached {}", r.device));
                }
                Ok(_) => {
                    errors.push(format!(
                        "{} is still attached 5 s after `losetup -d` (held open: mounted elsewhere?)",
                        r.device
                    ));
                    kept_records.push(r);
                }
                Err(err) => {
                    errors.push(format!("{err:#}"));
                    kept_records.push(r);
                }
            }
        }
        e.loop_devices = kept_records;
        save(l, &e)?;
        if !errors.is_empty() {
            bail!("lab down {}: {}", e.name, errors.join("; "));
        }

        // 4. Images.
        for p in &images {
            match fs::remove_file(p) {
                Ok(()) => t.removed.push(format!("removed {}", p.display())),
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
                Err(err) => errors.push(format!("removing {}: {err}", p.display())),
            }
        }
        if !errors.is_empty() {
            bail!("lab down {}: {}", e.name, errors.join("; "));
        }
        let mut s = l.load()?;
        s.volumes.retain(|x| x.id != e.id);
        l.save(&s)?;
        Ok(t)
    }
}

/// The `mount -o` list: the spec's, and for btrfs `nodiscard` unless the spec says
/// anything about discard. Since 6.2 btrfs mounts with `discard=async` where the device
/// can discard (loop devices can: it punches holes in the image), and those background
/// discards would show up on the timeline as I/O nobody asked for.
fn mount_options(spec: &VolumeSpec) -> Option<String> {
    let user = spec.mount_options.clone();
    if spec.fs != Fs::Btrfs || user.as_deref().is_some_and(|o| o.contains("discard")) {
        return user;
    }
    Some(match user {
        Some(o) => format!("nodiscard,{o}"),
        None => "nodiscard".to_string(),
    })
}

/// Saves `e` over the entry with its id.
fn save(l: &Locked, e: &Entry) -> anyhow::Result<()> {
    let e = e.clone();
    l.update(&e.id.clone(), move |x| *x = e)
}

/// Whether an entry still is what it says, and why not.
fn status_of(root: &Path, e: &Entry) -> VolumeStatus {
    let alive = os::process_alive(e.owner_pid, e.owner_start_ticks);
    let mut problem = None;
    let mut state = VolumeState::Ok;
    let backings: Vec<Option<os::Backing>> = e
        .loop_devices
        .iter()
        .map(|r| os::loop_backing(&r.device))
        .collect();
    if !e.complete {
        if alive {
            state = VolumeState::Creating;
        } else {
            state = VolumeState::Stale;
            problem = Some(format!(
                "its creator (pid {}) is gone and it was never complete",
                e.owner_pid
            ));
        }
    } else if !e.kept && !alive {
        state = VolumeState::Stale;
        problem = Some(format!(
            "its creator (pid {}) exited without tearing it down",
            e.owner_pid
        ));
    } else {
        for (r, b) in e.loop_devices.iter().zip(&backings) {
            if !b.as_ref().is_some_and(|b| os::backed_by(b, &r.image)) {
                state = VolumeState::Stale;
                problem = Some(format!(
                    "{} is no longer backed by {}",
                    r.device,
                    r.image.display()
                ));
                break;
            }
        }
        if state == VolumeState::Ok {
            let point = root.join("mnt").join(&e.name);
            let mounted = os::top_mount_at(&point)
                .ok()
                .flatten()
                .is_some_and(|m| e.loop_devices.iter().any(|r| r.device == m.source));
            if !mounted {
                state = VolumeState::Stale;
                problem = Some(format!("{} is not mounted", point.display()));
            } else if let Some(cg) = &e.cgroup {
                if !cg.exists() {
                    state = VolumeState::Stale;
                    problem = Some(format!("cgroup {} is gone", cg.display()));
                }
            }
        }
    }
    VolumeStatus {
        name: e.name.clone(),
        state,
        problem,
        mount: e.mount.clone(),
        fs: e.spec.fs,
        raid: e.spec.raid,
        devices: e.spec.devices,
        size_bytes: e.spec.size,
        throttle: e.spec.throttle,
        write_cache: e.spec.write_cache,
        mount_options: e.spec.mount_options.clone(),
        loop_devices: e.loop_devices.iter().map(|r| r.device.clone()).collect(),
        direct_io: backings
            .iter()
            .map(|b| b.as_ref().map(|b| b.direct_io))
            .collect(),
        images: e.images.clone(),
        cgroup: e.cgroup.clone(),
        owner_pid: e.owner_pid,
        kept: e.kept,
        created: e.created.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(spec: &VolumeSpec) -> String {
        let e = spec.validate().unwrap_err();
        assert!(e.downcast_ref::<crate::cli::UsageError>().is_some(), "{e}");
        let s = e.to_string();
        assert_eq!(s.lines().count(), 1, "{s}");
        s
    }

    #[test]
    fn specs_that_cannot_be_built_are_usage_errors() {
        let ok = VolumeSpec::new("v0", 1 << 30, Fs::Ext4);
        ok.validate().unwrap();
        assert!(err(&VolumeSpec::new("a/b", 1 << 30, Fs::Ext4)).contains("'a/b'"));
        assert!(err(&VolumeSpec::new("", 1 << 30, Fs::Ext4)).contains("name"));
        assert!(err(&VolumeSpec::new("..", 1 << 30, Fs::Ext4)).contains("'..'"));
        let r1 = VolumeSpec {
            raid: Raid::Raid1,
            devices: 1,
            ..VolumeSpec::new("r1", 1 << 30, Fs::Btrfs)
        };
        assert!(err(&r1).contains("at least 2 devices"));
        let r10 = VolumeSpec {
            raid: Raid::Raid10,
            devices: 3,
            ..VolumeSpec::new("r10", 1 << 30, Fs::Btrfs)
        };
        assert!(err(&r10).contains("at least 4"));
        assert!(err(&VolumeSpec::new("b", 100 * MIB, Fs::Btrfs)).contains("125 MiB"));
        assert!(err(&VolumeSpec::new("x", 200 * MIB, Fs::Xfs)).contains("300 MiB"));
        VolumeSpec::new("x", 300 * MIB, Fs::Xfs).validate().unwrap();
        assert!(err(&VolumeSpec::new("x", (1 << 30) + 5, Fs::Xfs)).contains("whole number of MiB"));
        let ext4_raid = VolumeSpec {
            raid: Raid::Raid0,
            devices: 2,
            ..VolumeSpec::new("e", 1 << 30, Fs::Ext4)
        };
        assert!(err(&ext4_raid).contains("--fs btrfs"));
        let zero = VolumeSpec {
            throttle: Some(Throttle {
                write_iops: Some(0),
                ..Default::default()
            }),
            ..VolumeSpec::new("t", 1 << 30, Fs::Ext4)
        };
        assert!(err(&zero).contains("0"));
        let spaces = VolumeSpec {
            mount_options: Some("noatime, sync".into()),
            ..VolumeSpec::new("m", 1 << 30, Fs::Ext4)
        };
        assert!(err(&spaces).contains("noatime, sync"));
    }

    #[test]
    fn names_parse() {
        assert_eq!("XFS".parse::<Fs>(), Ok(Fs::Xfs));
        assert!("zfs".parse::<Fs>().unwrap_err().contains("'zfs'"));
        assert_eq!("10".parse::<Raid>(), Ok(Raid::Raid10));
        assert_eq!("raid1".parse::<Raid>(), Ok(Raid::Raid1));
        assert!("5".parse::<Raid>().is_err());
        assert_eq!(
            "through".parse::<WriteCache>(),
            Ok(WriteCache::WriteThrough)
        );
        assert_eq!(fmt_bytes(1 << 30), "1 GiB");
        assert_eq!(fmt_bytes(125 * MIB), "125 MiB");
    }

    #[test]
    fn spec_json_names_units() {
        let s = VolumeSpec {
            write_cache: Some(WriteCache::WriteThrough),
            ..VolumeSpec::new("v", 1 << 30, Fs::Btrfs)
        };
        let j = serde_json::to_value(&s).unwrap();
        assert_eq!(j["size_bytes"], 1u64 << 30);
        assert_eq!(j["fs"], "btrfs");
        assert_eq!(j["raid"], "single");
        assert_eq!(j["write_cache"], "through");
        let back: VolumeSpec = serde_json::from_value(j).unwrap();
        assert_eq!(back, s);
    }
}
