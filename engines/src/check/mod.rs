//! `diskpulse check`: everything to know before a benchmark, for each device that really
//! holds a path (through partitions, loop devices, btrfs members).
//!
//! Three stages, kept apart so each can be tested on its own:
//! 1. [`resolve_all`] (`resolve.rs`) and [`gather`] (`gather.rs`) read facts
//!    (collectors::check, collectors::devices): sysfs queue attributes, NVMe/SCSI/virtio
//!    caches, mount options, `vm.dirty_*`, a short sample of who is doing I/O and how
//!    much each device did in the same interval, then the empirical flush tests. Facts
//!    are raw (the types below); nothing is judged here.
//! 2. [`rules::judge`] turns facts into findings (PASS/INFO/WARN/FAIL): one rule per
//!    finding carries its code, level, condition, and text saying what was seen and what
//!    to do next (like hyperfine's warnings).
//! 3. [`render`] prints them for people (grouped per target and device) or as JSON.
//!
//! Order matters: the I/O sample runs before our own test writes, so the devices'
//! counters show other people's I/O only.

mod args;
pub mod render;
pub mod rules;

mod gather;
mod resolve;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use collectors::check::flush::{self, FlushError};
use collectors::check::kind::DeviceKind;
use collectors::check::mountinfo::Durability;
use collectors::check::nvme::VolatileWriteCache;
use collectors::check::scsi::{CacheType, ScsiDisk};
use collectors::check::vm::{DirtyMemory, DirtySettings};
use collectors::devices::Device;
use collectors::mounts::Mount;

pub use args::{check_args, CheckArgs};
pub use gather::gather;
pub use resolve::resolve_all;

/// What the user asked for.
#[derive(Debug, Clone)]
pub struct Options {
    pub quick: bool,
    pub allow_destructive: bool,
    /// How long to watch other I/O.
    pub sample: Duration,
    pub flush: flush::Config,
    pub sysfs: PathBuf,
    pub procfs: PathBuf,
}

/// Whether an argument named a path or a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetKind {
    Path,
    Device,
}

/// Counter deltas of one device over the sample.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct IoDelta {
    pub elapsed_ns: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub reads: u64,
    pub writes: u64,
    pub flushes: Option<u64>,
}

impl IoDelta {
    fn per_s(&self, v: u64) -> f64 {
        if self.elapsed_ns == 0 {
            0.0
        } else {
            v as f64 * 1e9 / self.elapsed_ns as f64
        }
    }
    pub fn read_mib_s(&self) -> f64 {
        self.per_s(self.read_bytes) / 1048576.0
    }
    pub fn write_mib_s(&self) -> f64 {
        self.per_s(self.write_bytes) / 1048576.0
    }
    pub fn iops(&self) -> f64 {
        self.per_s(self.reads + self.writes)
    }
}

/// Everything read about one device.
#[derive(Debug, Clone)]
pub struct DeviceFacts {
    pub dev: Device,
    /// The whole disk whose queue this is (the parent of a partition).
    pub disk: String,
    pub kind: DeviceKind,
    pub virtual_disk: bool,
    /// sysfs queue attributes and identity (strings as sysfs prints them).
    pub queue: Vec<(String, String)>,
    pub nvme: Option<Result<VolatileWriteCache, String>>,
    pub scsi: Option<ScsiDisk>,
    pub virtio_cache_type: Option<Result<CacheType, String>>,
    /// Its I/O goes on to devices below it (a loop device, dm/md with slaves).
    pub stacked: bool,
    /// The devices right below it (loop backing device, slaves).
    pub lower: Vec<String>,
    /// Counter deltas during the sample (`None` if its stat file could not be read).
    pub io: Option<IoDelta>,
    /// Processes with files open on it that did I/O during the sample (indices into
    /// [`SystemFacts::processes`]).
    busy_procs: Vec<usize>,
    /// dev_t values that mean "a file on this device" (its own number; for btrfs members
    /// also the file system's anonymous number).
    match_devs: Vec<u64>,
}

impl DeviceFacts {
    pub fn attr(&self, k: &str) -> Option<&str> {
        self.queue
            .iter()
            .find(|(a, _)| a == k)
            .map(|(_, v)| v.as_str())
    }
    /// sysfs `write_cache`: Some(true) for "write back".
    fn write_back(&self) -> Option<bool> {
        self.attr("write_cache").map(|v| v == "write back")
    }
    pub fn rotational(&self) -> Option<bool> {
        self.attr("rotational").map(|v| v == "1")
    }
}

/// Where the flush tests ran, or why not.
#[derive(Debug)]
pub enum FlushOutcome {
    /// Planned but not run (interrupted first).
    NotRun,
    Measured(flush::Results),
    Skipped(SkipReason),
    Failed(FlushError),
}

/// Why the empirical tests did not run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SkipReason {
    Quick,
    ReadOnly {
        point: PathBuf,
    },
    /// A device with no file system, and no --allow-destructive.
    NotAllowed {
        dev: String,
    },
    /// A device that is not mounted but holds a signature.
    HoldsData {
        dev: String,
        what: String,
    },
    /// A whole disk with partitions.
    HasPartitions {
        dev: String,
        parts: Vec<String>,
    },
    /// open(O_EXCL) refused: something holds the device.
    InUse {
        dev: String,
        error: String,
    },
}

/// One PATH or DEVICE argument.
#[derive(Debug)]
pub struct TargetFacts {
    pub arg: String,
    pub kind: TargetKind,
    /// The canonical path (for a path), or the device node (for a device).
    pub path: PathBuf,
    /// The mount holding the path, or (for a device) the mount of the device.
    pub mount: Option<Mount>,
    pub durability: Option<Durability>,
    pub devices: Vec<DeviceFacts>,
    pub flush: FlushOutcome,
    /// Where the tests write (for a planned test).
    planned: Option<flush::Target>,
}

impl TargetFacts {
    /// The devices that hold the path directly (not reached through loop backing files or
    /// partitions' whole disks).
    fn top_devices(&self) -> Vec<&DeviceFacts> {
        self.devices
            .iter()
            .filter(|d| {
                d.dev.why == "named"
                    || d.dev.why.starts_with("holds ")
                    || d.dev.why.starts_with("btrfs member")
            })
            .collect()
    }

    /// The devices at the bottom of the stack (the disks that finally take the writes),
    /// one per whole disk.
    fn bottom_devices(&self) -> Vec<&DeviceFacts> {
        let mut seen = BTreeSet::new();
        self.devices
            .iter()
            .filter(|d| !d.stacked && seen.insert(d.disk.clone()))
            .collect()
    }
}

/// One process that did I/O during the sample.
#[derive(Debug, Clone)]
pub struct ProcFacts {
    pub pid: u32,
    pub comm: String,
    pub read_bytes: u64,
    pub write_bytes: u64,
    /// Names of checked devices it has files open on.
    on_devices: Vec<String>,
}

/// Machine-wide facts.
#[derive(Debug, Clone)]
pub struct SystemFacts {
    pub dirty: DirtySettings,
    pub memory: Option<DirtyMemory>,
    sample_ns: u64,
    /// Busiest first; excludes diskpulse itself.
    pub processes: Vec<ProcFacts>,
    /// Processes whose /proc/PID/io could not be read.
    pub unreadable: usize,
    pub root: bool,
    /// The clock every timestamp is read from (`clock` finding).
    pub clock: collectors::clock::ClockFacts,
}

/// All facts.
#[derive(Debug)]
pub struct Facts {
    pub targets: Vec<TargetFacts>,
    pub system: SystemFacts,
    pub interrupted: bool,
}
