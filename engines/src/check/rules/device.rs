//! Rules about one device of a target: its cache and identity ([`CACHE`], from sysfs and
//! the device itself) and the other I/O it did during the sample ([`IO`]).

use super::{is_busy, said, Level::*, Rule, Said, READ_AHEAD_LARGE_KB};
use crate::check::{DeviceFacts, Facts, TargetFacts};
use collectors::check::kind::DeviceKind;

/// One device of a target, with the rest of the facts (the devices beside it, the
/// processes).
pub struct DeviceCtx<'a> {
    pub facts: &'a Facts,
    pub target: &'a TargetFacts,
    pub dev: &'a DeviceFacts,
    pub sample_s: f64,
}

impl DeviceCtx<'_> {
    /// A partition whose whole disk is also listed (that disk's cache is judged there).
    pub(crate) fn disk_listed(&self) -> bool {
        self.dev
            .dev
            .parent
            .as_ref()
            .is_some_and(|p| self.target.devices.iter().any(|x| &x.dev.name == p))
    }

    fn name(&self) -> &str {
        &self.dev.dev.name
    }

    /// Why a device sysfs calls "write through" still caches writes, if it does.
    fn flushes_dropped_because(&self) -> Option<String> {
        let d = self.dev;
        let mut because = None;
        if let Some(Ok(ct)) = d.scsi.as_ref().map(|s| &s.cache_type) {
            if ct.write_cache {
                because = Some(format!("its SCSI cache_type is \"{}\" (WCE=1)", ct.raw));
            }
        }
        if let Some(Ok(v)) = &d.nvme {
            if v.enabled == Some(true) {
                because = Some(
                    "the NVMe controller's volatile write cache is enabled (Get Features 06h)"
                        .into(),
                );
            }
        }
        if let Some(Ok(ct)) = &d.virtio_cache_type {
            if ct.write_cache {
                because = Some(format!("its virtio cache_type is \"{}\"", ct.raw));
            }
        }
        if because.is_none() && d.stacked {
            let wb_lower: Vec<&str> = d
                .lower
                .iter()
                .filter(|l| {
                    self.target
                        .devices
                        .iter()
                        .any(|x| &x.dev.name == *l && x.write_back() == Some(true))
                })
                .map(String::as_str)
                .collect();
            if !wb_lower.is_empty() {
                because = Some(format!(
                    "the device below it ({}) has a volatile write cache (\"write back\")",
                    wb_lower.join(", ")
                ));
            }
        }
        because
    }
}

type DeviceRule = Rule<fn(&DeviceCtx<'_>) -> Option<Said>>;

/// Advice for a cache that is off where an array's cache should be on.
const CHECK_ARRAY_CACHE: &str = "on an array LUN or RAID controller, check that its cache is \
     enabled and battery/flash-backed: the reference study's RAID 1 wrote 1.84x slower with \
     the array cache forcibly off";

/// The cache and identity of a device, in report order.
pub(crate) const CACHE: &[DeviceRule] = &[
    Rule {
        code: "write-cache-on",
        levels: &[Pass],
        judge: |c| {
            if c.dev.write_back() != Some(true) {
                return None;
            }
            let dev = c.name();
            let message = if matches!(c.dev.kind, DeviceKind::Loop { .. }) {
                format!(
                    "write_cache \"write back\": {dev} passes flushes on to its backing file \
                     (fsync)"
                )
            } else {
                format!(
                    "write_cache \"write back\": {dev} has a volatile write cache and the kernel \
                     flushes it (fsync, O_DSYNC, journal commits)"
                )
            };
            said(
                message,
                "nothing to change; the flush tests show what a flush costs",
            )
        },
    },
    Rule {
        code: "flushes-dropped",
        levels: &[Fail],
        judge: |c| {
            if c.dev.write_back() != Some(false) {
                return None;
            }
            let because = c.flushes_dropped_because()?;
            let dev = c.name();
            said(
                format!(
                    "{dev} is set to \"write through\" but {because}: fsync on {dev} never \
                     flushes that cache, so acknowledged writes can be lost at power loss"
                ),
                format!(
                    "echo \"write back\" > /sys/block/{dev}/queue/write_cache so the kernel \
                     sends flushes again (or really turn the lower cache off)"
                ),
            )
        },
    },
    Rule {
        code: "write-cache-off",
        levels: &[Info],
        judge: |c| {
            if c.dev.write_back() != Some(false)
                || c.dev.stacked
                || c.flushes_dropped_because().is_some()
            {
                return None;
            }
            said(
                format!(
                    "write_cache \"write through\": the kernel sends {} no flushes; a write \
                     counts as durable when the device completes it",
                    c.name()
                ),
                CHECK_ARRAY_CACHE,
            )
        },
    },
    Rule {
        code: "nvme-vwc-enabled",
        levels: &[Pass],
        judge: |c| {
            let v = c.dev.nvme.as_ref()?.as_ref().ok()?;
            if !v.present || v.enabled == Some(false) {
                return None;
            }
            said(
                format!(
                    "NVMe volatile write cache present and enabled on {} (Identify VWC=1, Get \
                     Features 06h WCE=1)",
                    c.dev.disk
                ),
                "nothing to change: the kernel flushes this cache on fsync",
            )
        },
    },
    Rule {
        code: "nvme-vwc-disabled",
        levels: &[Warn],
        judge: |c| {
            let v = c.dev.nvme.as_ref()?.as_ref().ok()?;
            if !(v.present && v.enabled == Some(false)) {
                return None;
            }
            let dev = &c.dev.disk;
            said(
                format!(
                    "NVMe volatile write cache present but disabled on {dev} (Get Features 06h \
                     WCE=0): every write waits for the flash"
                ),
                format!(
                    "enable it unless that is on purpose (nvme set-feature /dev/{dev} -f 6 -v \
                     1); a benchmark now measures the uncached drive"
                ),
            )
        },
    },
    Rule {
        code: "nvme-no-vwc",
        levels: &[Info],
        judge: |c| {
            let v = c.dev.nvme.as_ref()?.as_ref().ok()?;
            if v.present {
                return None;
            }
            said(
                format!(
                    "{} has no volatile write cache (Identify VWC=0: power-loss protected or \
                     none): flushes are no-ops, writes are durable when they complete",
                    c.dev.disk
                ),
                "nothing to change; fast fsync here is honest if the drive has power-loss \
                 protection",
            )
        },
    },
    Rule {
        code: "nvme-query-failed",
        levels: &[Info],
        judge: |c| {
            let error = c.dev.nvme.as_ref()?.as_ref().err()?;
            said(
                format!(
                    "could not ask {} about its write cache: {error}",
                    c.dev.disk
                ),
                "run as root (the NVMe admin ioctl needs CAP_SYS_ADMIN) to see Get Features 06h",
            )
        },
    },
    Rule {
        code: "scsi-write-back",
        levels: &[Pass],
        judge: |c| {
            let ct = c.dev.scsi.as_ref()?.cache_type.as_ref().ok()?;
            if !ct.write_cache {
                return None;
            }
            said(
                format!(
                    "SCSI cache_type \"{}\" on {}: the disk's write cache is on (WCE=1)",
                    ct.raw, c.dev.disk
                ),
                "nothing to change: the kernel flushes this cache on fsync",
            )
        },
    },
    Rule {
        code: "scsi-no-write-cache",
        levels: &[Info],
        judge: |c| {
            let ct = c.dev.scsi.as_ref()?.cache_type.as_ref().ok()?;
            if ct.write_cache {
                return None;
            }
            said(
                format!(
                    "SCSI cache_type \"{}\" on {}: the disk/LUN reports no volatile write \
                     cache (WCE=0)",
                    ct.raw, c.dev.disk
                ),
                CHECK_ARRAY_CACHE,
            )
        },
    },
    Rule {
        code: "scsi-cache-type-unreadable",
        levels: &[Info],
        judge: |c| {
            let error = c.dev.scsi.as_ref()?.cache_type.as_ref().err()?;
            said(
                format!("SCSI cache_type of {}: {error}", c.dev.disk),
                "read it with sdparm --get=WCE to compare",
            )
        },
    },
    Rule {
        code: "virtual-disk",
        levels: &[Info],
        judge: |c| {
            let d = c.dev;
            if !d.virtual_disk {
                return None;
            }
            let ct = d
                .virtio_cache_type
                .as_ref()
                .and_then(|c| c.as_ref().ok())
                .map(|c| format!(", cache_type \"{}\"", c.raw))
                .unwrap_or_default();
            let rot = if d.rotational() == Some(true) {
                "; its rotational=1 says nothing about platters"
            } else {
                ""
            };
            said(
                format!(
                    "{} is a virtual disk ({}{ct}): the hypervisor decides what a flush does{rot}",
                    d.disk,
                    d.kind.label()
                ),
                "ask for the host's cache mode: qemu cache=none/writeback/directsync honour \
                 flushes, cache=unsafe drops them; the flush tests show which",
            )
        },
    },
    Rule {
        code: "loop-device",
        levels: &[Info],
        judge: |c| {
            let DeviceKind::Loop { backing_file, dio } = &c.dev.kind else {
                return None;
            };
            let backing = backing_file.as_deref().unwrap_or("?");
            let how = if *dio == Some(true) {
                "go to the backing file with O_DIRECT"
            } else {
                "land in the backing file's page cache"
            };
            said(
                format!(
                    "{} is a loop device over {backing}: its writes {how}, its flushes become \
                     fsync of that file",
                    c.name()
                ),
                "numbers measured here are of the loop stack; the device below takes the \
                 writes in the end",
            )
        },
    },
    Rule {
        code: "read-ahead-large",
        levels: &[Info],
        judge: |c| {
            let kb = c.dev.attr("read_ahead_kb")?.parse::<u64>().ok()?;
            if kb < READ_AHEAD_LARGE_KB {
                return None;
            }
            let dev = &c.dev.disk;
            said(
                format!(
                    "read_ahead_kb {kb} on {dev}: sequential reads (a broker re-reading its \
                     store at restart) fetch up to {} MiB ahead",
                    kb / 1024
                ),
                format!(
                    "compare device read MiB/s with what was asked for; to measure the device, \
                     not read-ahead: echo 128 > /sys/block/{dev}/queue/read_ahead_kb"
                ),
            )
        },
    },
];

/// Other I/O on a device during the sample.
pub const IO: &[DeviceRule] = &[
    Rule {
        code: "device-busy",
        levels: &[Warn],
        judge: |c| {
            let io = c.dev.io.filter(is_busy)?;
            let mib = |b: u64| b as f64 / 1048576.0 / c.sample_s.max(1e-9);
            let procs: Vec<String> = c
                .dev
                .busy_procs
                .iter()
                .map(|&i| {
                    let p = &c.facts.system.processes[i];
                    format!(
                        "{} {} ({:.1} MiB/s read, {:.1} MiB/s write)",
                        p.pid,
                        p.comm,
                        mib(p.read_bytes),
                        mib(p.write_bytes)
                    )
                })
                .collect();
            let who = if procs.is_empty() {
                "no process with files open on it did I/O (kernel writeback, or another \
                 host/VM sharing the disk)"
                    .to_string()
            } else {
                let more = if procs.len() > 3 {
                    format!(" and {} more (listed below)", procs.len() - 3)
                } else {
                    String::new()
                };
                format!(
                    "processes doing I/O with files open on it: {}{more}",
                    procs[..procs.len().min(3)].join(", ")
                )
            };
            said(
                format!(
                    "{} did {:.1} MiB/s read, {:.1} MiB/s write, {:.0} I/O/s during the {:.1} s \
                     before the tests; {who}",
                    c.name(),
                    io.read_mib_s(),
                    io.write_mib_s(),
                    io.iops(),
                    c.sample_s
                ),
                "stop or wait for that I/O before benchmarking, or record it beside the \
                 benchmark (diskpulse record) to tell the two apart",
            )
        },
    },
    Rule {
        code: "device-quiet",
        levels: &[Pass],
        judge: |c| {
            let io = c.dev.io.filter(|io| !is_busy(io))?;
            said(
                format!(
                    "{} was quiet during the {:.1} s before the tests ({} I/Os)",
                    c.name(),
                    c.sample_s,
                    io.reads + io.writes
                ),
                "nothing to change",
            )
        },
    },
];
