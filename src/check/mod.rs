//! `diskpulse check`: everything to know before a benchmark, for each device that really
//! holds a path (through partitions, loop devices, btrfs members).
//!
//! Three stages, kept apart so each can be tested on its own:
//! 1. [`gather`] reads facts (collectors::check, collectors::devices): sysfs queue
//!    attributes, NVMe/SCSI/virtio caches, mount options, `vm.dirty_*`, a short sample of
//!    who is doing I/O and how much each device did in the same interval, then the
//!    empirical flush tests. Facts are raw; nothing is judged here.
//! 2. [`findings::judge`] turns facts into findings (PASS/INFO/WARN/FAIL), each an enum
//!    variant whose text says what was seen and what to do next (like hyperfine's
//!    warnings).
//! 3. [`render`] prints them for people (grouped per target and device) or as JSON.
//!
//! Order matters: the I/O sample runs before our own test writes, so the devices'
//! counters show other people's I/O only.

pub mod findings;
pub mod render;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use collectors::check::flush::{self, FlushError};
use collectors::check::kind::{self, DeviceKind};
use collectors::check::mountinfo::Durability;
use collectors::check::nvme::{self, VolatileWriteCache};
use collectors::check::procio;
use collectors::check::scsi::{self, CacheType, ScsiDisk};
use collectors::check::vm::{self, DirtyMemory, DirtySettings};
use collectors::devices::{DevNum, Device, DeviceError, Resolver};
use collectors::diskstats::{self, DiskCounters};
use collectors::gate;
use collectors::mounts::{self, Mount};

use crate::usage;

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
    pub busy_procs: Vec<usize>,
    /// dev_t values that mean "a file on this device" (its own number; for btrfs members
    /// also the file system's anonymous number).
    pub match_devs: Vec<u64>,
}

impl DeviceFacts {
    pub fn attr(&self, k: &str) -> Option<&str> {
        self.queue
            .iter()
            .find(|(a, _)| a == k)
            .map(|(_, v)| v.as_str())
    }
    /// sysfs `write_cache`: Some(true) for "write back".
    pub fn write_back(&self) -> Option<bool> {
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
    pub fn top_devices(&self) -> Vec<&DeviceFacts> {
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
    pub fn bottom_devices(&self) -> Vec<&DeviceFacts> {
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
    pub on_devices: Vec<String>,
}

/// Machine-wide facts.
#[derive(Debug, Clone)]
pub struct SystemFacts {
    pub dirty: DirtySettings,
    pub memory: Option<DirtyMemory>,
    pub sample_ns: u64,
    /// Busiest first; excludes diskpulse itself.
    pub processes: Vec<ProcFacts>,
    /// Processes whose /proc/PID/io could not be read.
    pub unreadable: usize,
    pub root: bool,
}

/// All facts.
#[derive(Debug)]
pub struct Facts {
    pub targets: Vec<TargetFacts>,
    pub system: SystemFacts,
    pub interrupted: bool,
}

fn dev_t(n: DevNum) -> u64 {
    libc::makedev(n.major, n.minor)
}

fn read_counters(sysfs: &Path, name: &str) -> Option<DiskCounters> {
    collectors::sysfs::BlockSysfs::new(sysfs).counters(name)
}

fn delta(a: &DiskCounters, b: &DiskCounters, elapsed_ns: u64) -> Option<IoDelta> {
    let d = |i| diskstats::counter_delta(i, a.get(i)?, b.get(i)?);
    Some(IoDelta {
        elapsed_ns,
        read_bytes: d(diskstats::F_SECTORS_READ)? * 512,
        write_bytes: d(diskstats::F_SECTORS_WRITTEN)? * 512,
        reads: d(diskstats::F_READS)?,
        writes: d(diskstats::F_WRITES)?,
        flushes: d(diskstats::F_FLUSHES),
    })
}

/// Reads what sysfs and the device say about one device (not its I/O).
fn device_facts(r: &Resolver, o: &Options, dev: Device) -> DeviceFacts {
    let disk = dev.parent.clone().unwrap_or_else(|| dev.name.clone());
    let queue = r.queue_info(&dev).attrs;
    let kind = kind::device_kind(&o.sysfs, &disk);
    let get = |k: &str| queue.iter().find(|(a, _)| a == k).map(|(_, v)| v.as_str());
    let virtual_disk = kind::is_virtual(&kind, get("vendor"), get("model"));
    let nvme = matches!(kind, DeviceKind::Nvme)
        .then(|| nvme::query(&Path::new("/dev").join(&disk)).map_err(|e| e.to_string()));
    let scsi = scsi::read_scsi_disk(&o.sysfs, &disk);
    let virtio_cache_type = matches!(kind, DeviceKind::Virtio)
        .then(|| scsi::read_virtio_cache_type(&o.sysfs, &disk))
        .flatten();
    let own = o.sysfs.join("class/block").join(&dev.name);
    let slaves: Vec<String> = std::fs::read_dir(own.join("slaves"))
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    let is_loop = matches!(kind, DeviceKind::Loop { .. });
    let match_devs = vec![dev_t(dev.num)];
    DeviceFacts {
        disk,
        kind,
        virtual_disk,
        queue,
        nvme,
        scsi,
        virtio_cache_type,
        stacked: is_loop || !slaves.is_empty(),
        lower: slaves,
        io: None,
        busy_procs: vec![],
        match_devs,
        dev,
    }
}

/// Fills in `lower` of loop devices from the resolver's "backing file of X" reasons.
fn link_lower(devs: &mut [DeviceFacts]) {
    let backs: Vec<(String, String)> = devs
        .iter()
        .filter_map(|d| {
            d.dev
                .why
                .strip_prefix("backing file of ")
                .map(|top| (top.to_string(), d.dev.name.clone()))
        })
        .collect();
    for (top, below) in backs {
        if let Some(t) = devs.iter_mut().find(|d| d.dev.name == top) {
            if !t.lower.contains(&below) {
                t.lower.push(below);
            }
        }
    }
}

fn resolve_err(e: DeviceError) -> anyhow::Error {
    usage!("check: {e}")
}

/// Resolves one argument; usage errors for unknown devices, missing paths and paths with
/// no block device (tmpfs).
fn resolve(r: &Resolver, o: &Options, mounts: &[Mount], arg: &str) -> anyhow::Result<TargetFacts> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let p = Path::new(arg);
    let md = std::fs::metadata(p).ok();
    let is_blk = md.as_ref().is_some_and(|m| m.file_type().is_block_device());
    // An existing path is a path unless it is a block device node; a name that is not
    // a path (vda, 7:0, /dev/nosuch) is looked up as a device.
    let as_device = is_blk || (md.is_none() && (!arg.contains('/') || arg.starts_with("/dev/")));
    if !as_device {
        if md.is_none() {
            return Err(usage!(
                "check: '{arg}' is neither an existing path nor a block device"
            ));
        }
        let canon = std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
        let devs = r.for_path(&canon).map_err(resolve_err)?;
        let mount = mounts::mount_of(mounts, &canon).cloned();
        let durability = mount.as_ref().map(|m| m.durability());
        let mut devices: Vec<DeviceFacts> =
            devs.into_iter().map(|d| device_facts(r, o, d)).collect();
        link_lower(&mut devices);
        // Files on btrfs carry an anonymous st_dev: it means "on these members" too.
        let st_dev = md.as_ref().map(|m| m.dev()).unwrap_or(0);
        for d in devices.iter_mut() {
            if d.dev.why.starts_with("btrfs member") && !d.match_devs.contains(&st_dev) {
                d.match_devs.push(st_dev);
            }
        }
        let dir = if md.as_ref().is_some_and(|m| m.is_dir()) {
            canon.clone()
        } else {
            canon
                .parent()
                .map(Path::to_path_buf)
                .unwrap_or(canon.clone())
        };
        let (flush, planned) = if durability.as_ref().is_some_and(|d| d.read_only) {
            let point = mount.as_ref().map(|m| m.point.clone()).unwrap_or_default();
            (FlushOutcome::Skipped(SkipReason::ReadOnly { point }), None)
        } else if o.quick {
            (FlushOutcome::Skipped(SkipReason::Quick), None)
        } else {
            (FlushOutcome::NotRun, Some(flush::Target::TempFileIn(dir)))
        };
        return Ok(TargetFacts {
            arg: arg.to_string(),
            kind: TargetKind::Path,
            path: canon,
            mount,
            durability,
            devices,
            flush,
            planned,
        });
    }

    // A device: by node, name or MAJ:MIN.
    let spec = if is_blk {
        let rdev = md.as_ref().map(|m| m.rdev()).unwrap_or(0);
        DevNum::from_dev_t(rdev).to_string()
    } else {
        arg.to_string()
    };
    let devs = r.for_spec(&spec).map_err(resolve_err)?;
    let named = devs[0].clone();
    let node = Path::new("/dev").join(&named.name);
    let mut devices: Vec<DeviceFacts> = devs.into_iter().map(|d| device_facts(r, o, d)).collect();
    link_lower(&mut devices);

    // Is it mounted (directly, or as a member of a mounted btrfs)?
    let mut mount: Option<Mount> = None;
    for m in mounts {
        let direct = m.devnum == named.num
            || (m.source.starts_with("/dev/")
                && r.by_spec(&m.source).is_ok_and(|(_, n)| n == named.num));
        let member = !direct
            && m.fstype == "btrfs"
            && m.source.starts_with("/dev/")
            && r.for_path(&m.point).is_ok_and(|ds| {
                ds.iter()
                    .any(|d| d.num == named.num && d.why.starts_with("btrfs member"))
            });
        if direct || member {
            // Prefer a writable mount for the tests.
            if mount.as_ref().is_none_or(|b| b.durability().read_only) {
                mount = Some(m.clone());
            }
        }
    }
    if let Some(m) = &mount {
        if m.devnum.major == 0 {
            let anon = dev_t(m.devnum);
            devices[0].match_devs.push(anon);
        }
    }
    let durability = mount.as_ref().map(|m| m.durability());
    let (flush, planned) = if let Some(m) = &mount {
        if durability.as_ref().is_some_and(|d| d.read_only) {
            (
                FlushOutcome::Skipped(SkipReason::ReadOnly {
                    point: m.point.clone(),
                }),
                None,
            )
        } else if o.quick {
            (FlushOutcome::Skipped(SkipReason::Quick), None)
        } else {
            (
                FlushOutcome::NotRun,
                Some(flush::Target::TempFileIn(m.point.clone())),
            )
        }
    } else {
        let dev = gate::BlockDev {
            path: &node,
            name: &named.name,
            num: named.num,
        };
        let refusals = if o.quick {
            vec![]
        } else {
            gate::refusals(&dev, &o.sysfs, &o.procfs)
        };
        let skipped = |r| (FlushOutcome::Skipped(r), None);
        if o.quick {
            skipped(SkipReason::Quick)
        } else if let Some(first) = refusals.first() {
            let dev = named.name.clone();
            skipped(match first {
                gate::Refusal::Partitions { parts, .. } => SkipReason::HasPartitions {
                    dev,
                    parts: parts.clone(),
                },
                r => match r.holds() {
                    Some(what) => SkipReason::HoldsData { dev, what },
                    None => SkipReason::InUse {
                        dev,
                        error: r.to_string(),
                    },
                },
            })
        } else if !o.allow_destructive {
            skipped(SkipReason::NotAllowed {
                dev: named.name.clone(),
            })
        } else {
            match gate::open_exclusive(&node, 0) {
                Ok(_) => (
                    FlushOutcome::NotRun,
                    Some(flush::Target::BlockDevice(node.clone())),
                ),
                Err(e) => skipped(SkipReason::InUse {
                    dev: named.name.clone(),
                    error: e.to_string(),
                }),
            }
        }
    };
    Ok(TargetFacts {
        arg: arg.to_string(),
        kind: TargetKind::Device,
        path: node,
        mount,
        durability,
        devices,
        flush,
        planned,
    })
}

/// Resolves every argument; the first bad one is a usage error (nothing is written).
pub fn resolve_all(args: &[String], o: &Options) -> anyhow::Result<Vec<TargetFacts>> {
    let r = Resolver {
        sysfs: o.sysfs.clone(),
        procfs: o.procfs.clone(),
    };
    let mounts = mounts::read(&o.procfs).unwrap_or_default();
    args.iter().map(|a| resolve(&r, o, &mounts, a)).collect()
}

/// Samples I/O, then runs the flush tests. `stop` is set by Ctrl-C.
pub fn gather(mut targets: Vec<TargetFacts>, o: &Options, stop: &AtomicBool) -> Facts {
    use std::sync::atomic::Ordering;
    let me = std::process::id();
    // Every distinct device once.
    let mut names: Vec<String> = vec![];
    for t in &targets {
        for d in &t.devices {
            if !names.contains(&d.dev.name) {
                names.push(d.dev.name.clone());
            }
        }
    }
    let t0 = Instant::now();
    let c0: Vec<Option<DiskCounters>> = names.iter().map(|n| read_counters(&o.sysfs, n)).collect();
    let (p0, _) = procio::snapshot(&o.procfs);
    let dirty = vm::read_dirty_settings(&o.procfs);
    while t0.elapsed() < o.sample && !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(10).min(o.sample));
    }
    let c1: Vec<Option<DiskCounters>> = names.iter().map(|n| read_counters(&o.sysfs, n)).collect();
    let (p1, unreadable) = procio::snapshot(&o.procfs);
    let elapsed_ns = t0.elapsed().as_nanos() as u64;
    let memory = vm::read_dirty_memory(&o.procfs);

    // Busy processes and the devices they have files on.
    let mut processes = vec![];
    for d in procio::deltas(&p0, &p1) {
        if d.pid == me {
            continue;
        }
        let open = procio::open_devices(&o.procfs, d.pid);
        let mut on = vec![];
        for t in &targets {
            for dev in &t.devices {
                if dev.match_devs.iter().any(|m| open.contains(m)) && !on.contains(&dev.dev.name) {
                    on.push(dev.dev.name.clone());
                }
            }
        }
        processes.push(ProcFacts {
            pid: d.pid,
            comm: d.comm,
            read_bytes: d.read_bytes,
            write_bytes: d.write_bytes,
            on_devices: on,
        });
    }
    for t in targets.iter_mut() {
        for dev in t.devices.iter_mut() {
            let i = names.iter().position(|n| *n == dev.dev.name).unwrap();
            if let (Some(a), Some(b)) = (&c0[i], &c1[i]) {
                dev.io = delta(a, b, elapsed_ns);
            }
            dev.busy_procs = processes
                .iter()
                .enumerate()
                .filter(|(_, p)| p.on_devices.contains(&dev.dev.name))
                .map(|(i, _)| i)
                .collect();
        }
    }

    // The empirical tests, after the sample so they do not count as other I/O.
    let mut interrupted = stop.load(Ordering::Relaxed);
    for t in targets.iter_mut() {
        let Some(plan) = t.planned.take() else {
            continue;
        };
        if interrupted {
            break;
        }
        t.flush = match flush::run(&plan, &o.flush, stop) {
            Ok(r) => FlushOutcome::Measured(r),
            Err(FlushError::Interrupted) => {
                interrupted = true;
                FlushOutcome::NotRun
            }
            Err(e) => FlushOutcome::Failed(e),
        };
    }
    Facts {
        targets,
        system: SystemFacts {
            dirty,
            memory,
            sample_ns: elapsed_ns,
            processes,
            unreadable,
            // SAFETY: geteuid has no preconditions.
            root: unsafe { libc::geteuid() } == 0,
        },
        interrupted,
    }
}
