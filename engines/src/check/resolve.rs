//! Stage 1a of `check`: each PATH or DEVICE argument resolved to the devices that hold
//! it, what sysfs and the devices say about them, its mount, and where the flush tests
//! may write (or why they may not).

use std::path::Path;

use collectors::check::flush;
use collectors::check::kind::{self, DeviceKind};
use collectors::check::nvme;
use collectors::check::scsi;
use collectors::devices::{DevNum, Device, DeviceError, Resolver};
use collectors::gate;
use collectors::mounts::{self, Mount};

use super::{DeviceFacts, FlushOutcome, Options, SkipReason, TargetFacts, TargetKind};
use format::usage;

fn dev_t(n: DevNum) -> u64 {
    libc::makedev(n.major, n.minor)
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
    let slaves = collectors::sysfs::BlockSysfs::new(&o.sysfs).slaves(&dev.name);
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
#[allow(
    clippy::too_many_lines,
    reason = "one argument's cases (device, mount point, file, directory) each next to the usage error it gives"
)]
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
