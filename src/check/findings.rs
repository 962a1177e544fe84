//! Findings: what `check` saw, how much it matters, and what to do next.
//!
//! Each finding is a variant of [`Finding`] carrying its numbers; `level()` says PASS,
//! INFO, WARN or FAIL, `code()` is a stable name for machines, `message()` what was seen,
//! `advice()` one line saying what to do (like hyperfine's warnings).
//!
//! Levels:
//! - FAIL: durability is not what the stack claims (fsynced data can be lost) or a
//!   spinning disk acknowledges flushes faster than it can turn. Exit 1 always.
//! - WARN: a benchmark run now would measure something else than you think (other I/O,
//!   a cache that is off, barriers dropped, a sync mount). Exit 1 with `--strict`.
//! - INFO: context that explains numbers (a virtual disk, a loop device, write through).
//! - PASS: checked and fine.
//!
//! Thresholds (and why):
//! - flush cost: durable writes (O_DIRECT|O_DSYNC p50) within 1.25x of plain O_DIRECT
//!   writes count as "as slow as each other" ([`SAME_COST_RATIO`]);
//! - physical flush limit of a spinning disk: a sequential rewrite after a flush waits
//!   about one revolution, ~120/s at 7,200 rpm, ~250/s at 15,000 rpm; more than
//!   [`MAX_SPINNING_FLUSHES_PER_S`] durable writes/s is not a platter;
//! - a busy device: more than [`BUSY_MIB_S`] MiB/s or [`BUSY_IOPS`] I/O/s during the sample;
//! - dirty memory waiting: [`DIRTY_PENDING_MIB`] MiB or more.

use serde::Serialize;

use super::{Facts, FlushOutcome, SkipReason, TargetFacts};
use collectors::check::flush::Mode;
use collectors::check::kind::DeviceKind;

pub const SAME_COST_RATIO: f64 = 1.25;
pub const MAX_SPINNING_FLUSHES_PER_S: f64 = 250.0;
pub const BUSY_MIB_S: f64 = 1.0;
pub const BUSY_IOPS: f64 = 50.0;
pub const DIRTY_PENDING_MIB: f64 = 64.0;
pub const READ_AHEAD_LARGE_KB: u64 = 4096;

/// How much a finding matters, in increasing order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Level {
    Pass,
    Info,
    Warn,
    Fail,
}

impl Level {
    pub fn as_str(&self) -> &'static str {
        match self {
            Level::Pass => "PASS",
            Level::Info => "INFO",
            Level::Warn => "WARN",
            Level::Fail => "FAIL",
        }
    }
}

/// A finding and the data behind its text.
#[derive(Debug, Clone, PartialEq)]
pub enum Finding {
    // --- a device's cache, from sysfs and the device itself
    WriteCacheOn {
        dev: String,
        loop_: bool,
    },
    WriteCacheOff {
        dev: String,
    },
    FlushesDropped {
        dev: String,
        because: String,
    },
    NvmeCacheEnabled {
        dev: String,
    },
    NvmeCacheDisabled {
        dev: String,
    },
    NvmeNoCache {
        dev: String,
    },
    NvmeQueryFailed {
        dev: String,
        error: String,
    },
    ScsiWriteBack {
        dev: String,
        raw: String,
    },
    ScsiNoWriteCache {
        dev: String,
        raw: String,
    },
    ScsiUnreadable {
        dev: String,
        error: String,
    },
    VirtualDisk {
        dev: String,
        kind: &'static str,
        cache_type: Option<String>,
        rotational: bool,
    },
    LoopDevice {
        dev: String,
        backing: String,
        dio: bool,
    },
    ReadAheadLarge {
        dev: String,
        kb: u64,
    },
    // --- other I/O during the sample
    DeviceBusy {
        dev: String,
        read_mib_s: f64,
        write_mib_s: f64,
        iops: f64,
        sample_s: f64,
        procs: Vec<String>,
    },
    DeviceQuiet {
        dev: String,
        ios: u64,
        sample_s: f64,
    },
    // --- mount options
    BarriersOff {
        point: String,
        option: String,
        write_back: Vec<String>,
    },
    JournalAsyncCommit {
        point: String,
    },
    DataWriteback {
        point: String,
    },
    SyncMount {
        point: String,
    },
    DirsyncMount {
        point: String,
    },
    // --- the empirical tests
    FlushCost {
        direct_p50_us: f64,
        dsync_p50_us: f64,
        fdatasync_p50_us: f64,
        fua: bool,
    },
    WritesAsSlowAsFlushes {
        devs: String,
        direct_p50_us: f64,
        dsync_p50_us: f64,
    },
    NoFlushesSent {
        devs: String,
        direct_p50_us: f64,
        dsync_p50_us: f64,
    },
    FlushRateImpossible {
        dev: String,
        per_s: f64,
        virtual_: bool,
        write_back: bool,
    },
    FlushRatePlausible {
        dev: String,
        per_s: f64,
    },
    FlushRateInconclusive {
        dev: String,
        per_s: f64,
    },
    TestsSkipped {
        reason: SkipReason,
    },
    TestsNotRun,
    TestsFailed {
        error: String,
        errno: Option<i32>,
    },
    // --- the machine
    DirtySettings {
        text: String,
        background_mib: Option<f64>,
        expire_s: Option<f64>,
    },
    WritebackDisabled,
    DirtyPending {
        dirty_mib: f64,
        writeback_mib: f64,
    },
    ProcessesUnreadable {
        n: usize,
    },
}

fn us(v: f64) -> String {
    if v < 100.0 {
        format!("{v:.1} us")
    } else {
        format!("{v:.0} us")
    }
}

impl Finding {
    pub fn level(&self) -> Level {
        use Finding::*;
        match self {
            WriteCacheOn { .. }
            | NvmeCacheEnabled { .. }
            | ScsiWriteBack { .. }
            | DeviceQuiet { .. }
            | FlushCost { .. }
            | FlushRatePlausible { .. } => Level::Pass,
            WriteCacheOff { .. }
            | NvmeNoCache { .. }
            | NvmeQueryFailed { .. }
            | ScsiNoWriteCache { .. }
            | ScsiUnreadable { .. }
            | VirtualDisk { .. }
            | LoopDevice { .. }
            | ReadAheadLarge { .. }
            | FlushRateInconclusive { .. }
            | DataWriteback { .. }
            | DirsyncMount { .. }
            | NoFlushesSent { .. }
            | TestsSkipped { .. }
            | TestsNotRun
            | DirtySettings { .. }
            | ProcessesUnreadable { .. } => Level::Info,
            NvmeCacheDisabled { .. }
            | DeviceBusy { .. }
            | BarriersOff { .. }
            | JournalAsyncCommit { .. }
            | SyncMount { .. }
            | WritesAsSlowAsFlushes { .. }
            | TestsFailed { .. }
            | WritebackDisabled
            | DirtyPending { .. } => Level::Warn,
            FlushesDropped { .. } => Level::Fail,
            FlushRateImpossible {
                virtual_,
                write_back,
                ..
            } => {
                if !virtual_ && *write_back {
                    Level::Fail
                } else {
                    Level::Warn
                }
            }
        }
    }

    /// Whether it comes from the empirical tests (shown with them, not with a device).
    pub fn is_test(&self) -> bool {
        use Finding::*;
        matches!(
            self,
            FlushCost { .. }
                | WritesAsSlowAsFlushes { .. }
                | NoFlushesSent { .. }
                | FlushRateImpossible { .. }
                | FlushRatePlausible { .. }
                | FlushRateInconclusive { .. }
                | TestsSkipped { .. }
                | TestsNotRun
                | TestsFailed { .. }
        )
    }

    /// A stable name for machines (`--json`'s `code`).
    pub fn code(&self) -> &'static str {
        use Finding::*;
        match self {
            WriteCacheOn { .. } => "write-cache-on",
            WriteCacheOff { .. } => "write-cache-off",
            FlushesDropped { .. } => "flushes-dropped",
            NvmeCacheEnabled { .. } => "nvme-vwc-enabled",
            NvmeCacheDisabled { .. } => "nvme-vwc-disabled",
            NvmeNoCache { .. } => "nvme-no-vwc",
            NvmeQueryFailed { .. } => "nvme-query-failed",
            ScsiWriteBack { .. } => "scsi-write-back",
            ScsiNoWriteCache { .. } => "scsi-no-write-cache",
            ScsiUnreadable { .. } => "scsi-cache-type-unreadable",
            VirtualDisk { .. } => "virtual-disk",
            LoopDevice { .. } => "loop-device",
            ReadAheadLarge { .. } => "read-ahead-large",
            DeviceBusy { .. } => "device-busy",
            DeviceQuiet { .. } => "device-quiet",
            BarriersOff { .. } => "barriers-off",
            JournalAsyncCommit { .. } => "journal-async-commit",
            DataWriteback { .. } => "data-writeback",
            SyncMount { .. } => "sync-mount",
            DirsyncMount { .. } => "dirsync-mount",
            FlushCost { .. } => "flush-cost",
            WritesAsSlowAsFlushes { .. } => "writes-as-slow-as-flushes",
            NoFlushesSent { .. } => "no-flushes-sent",
            FlushRateImpossible { .. } => "flush-rate-impossible",
            FlushRatePlausible { .. } => "flush-rate-plausible",
            FlushRateInconclusive { .. } => "flush-rate-inconclusive",
            TestsSkipped { .. } => "tests-skipped",
            TestsNotRun => "tests-not-run",
            TestsFailed { .. } => "tests-failed",
            DirtySettings { .. } => "dirty-settings",
            WritebackDisabled => "writeback-disabled",
            DirtyPending { .. } => "dirty-pending",
            ProcessesUnreadable { .. } => "processes-unreadable",
        }
    }

    /// What was seen.
    pub fn message(&self) -> String {
        use Finding::*;
        match self {
            WriteCacheOn { dev, loop_: false } => format!(
                "write_cache \"write back\": {dev} has a volatile write cache and the kernel \
                 flushes it (fsync, O_DSYNC, journal commits)"
            ),
            WriteCacheOn { dev, loop_: true } => format!(
                "write_cache \"write back\": {dev} passes flushes on to its backing file (fsync)"
            ),
            WriteCacheOff { dev } => format!(
                "write_cache \"write through\": the kernel sends {dev} no flushes; a write counts \
                 as durable when the device completes it"
            ),
            FlushesDropped { dev, because } => format!(
                "{dev} is set to \"write through\" but {because}: fsync on {dev} never flushes \
                 that cache, so acknowledged writes can be lost at power loss"
            ),
            NvmeCacheEnabled { dev } => format!(
                "NVMe volatile write cache present and enabled on {dev} (Identify VWC=1, Get \
                 Features 06h WCE=1)"
            ),
            NvmeCacheDisabled { dev } => format!(
                "NVMe volatile write cache present but disabled on {dev} (Get Features 06h \
                 WCE=0): every write waits for the flash"
            ),
            NvmeNoCache { dev } => format!(
                "{dev} has no volatile write cache (Identify VWC=0: power-loss protected or \
                 none): flushes are no-ops, writes are durable when they complete"
            ),
            NvmeQueryFailed { dev, error } => {
                format!("could not ask {dev} about its write cache: {error}")
            }
            ScsiWriteBack { dev, raw } => {
                format!("SCSI cache_type \"{raw}\" on {dev}: the disk's write cache is on (WCE=1)")
            }
            ScsiNoWriteCache { dev, raw } => format!(
                "SCSI cache_type \"{raw}\" on {dev}: the disk/LUN reports no volatile write \
                 cache (WCE=0)"
            ),
            ScsiUnreadable { dev, error } => format!("SCSI cache_type of {dev}: {error}"),
            VirtualDisk {
                dev,
                kind,
                cache_type,
                rotational,
            } => {
                let ct = cache_type
                    .as_ref()
                    .map(|c| format!(", cache_type \"{c}\""))
                    .unwrap_or_default();
                let rot = if *rotational {
                    "; its rotational=1 says nothing about platters"
                } else {
                    ""
                };
                format!(
                    "{dev} is a virtual disk ({kind}{ct}): the hypervisor decides what a \
                     flush does{rot}"
                )
            }
            LoopDevice { dev, backing, dio } => {
                let how = if *dio {
                    "go to the backing file with O_DIRECT"
                } else {
                    "land in the backing file's page cache"
                };
                format!(
                    "{dev} is a loop device over {backing}: its writes {how}, its flushes \
                     become fsync of that file"
                )
            }
            ReadAheadLarge { dev, kb } => format!(
                "read_ahead_kb {kb} on {dev}: sequential reads (a broker re-reading its store \
                 at restart) fetch up to {} MiB ahead",
                kb / 1024
            ),
            DeviceBusy {
                dev,
                read_mib_s,
                write_mib_s,
                iops,
                sample_s,
                procs,
            } => {
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
                format!(
                    "{dev} did {read_mib_s:.1} MiB/s read, {write_mib_s:.1} MiB/s write, \
                     {iops:.0} I/O/s during the {sample_s:.1} s before the tests; {who}"
                )
            }
            DeviceQuiet { dev, ios, sample_s } => {
                format!("{dev} was quiet during the {sample_s:.1} s before the tests ({ios} I/Os)")
            }
            BarriersOff {
                point,
                option,
                write_back,
            } => {
                if write_back.is_empty() {
                    format!(
                        "{point} is mounted with {option}: the file system sends no cache \
                         flushes (no device below reports a volatile cache now)"
                    )
                } else {
                    format!(
                        "{point} is mounted with {option}: the file system sends no cache \
                         flushes, so fsync returns before data leaves the volatile write cache \
                         of {}",
                        write_back.join(", ")
                    )
                }
            }
            JournalAsyncCommit { point } => format!(
                "{point} is mounted with journal_async_commit: the commit block is written \
                 without waiting for the journal blocks before it"
            ),
            DataWriteback { point } => format!(
                "{point} is mounted with data=writeback: metadata is journaled without writing \
                 file data first; after a crash, files written without fsync can hold stale data"
            ),
            SyncMount { point } => format!(
                "{point} is mounted sync: every write waits for the device, so buffered writes \
                 and a broker's periodic sync become synchronous writes"
            ),
            DirsyncMount { point } => {
                format!("{point} is mounted dirsync: directory changes wait for the device")
            }
            FlushCost {
                direct_p50_us,
                dsync_p50_us,
                fdatasync_p50_us,
                fua,
            } => {
                let how = if *fua {
                    "a FUA write"
                } else {
                    "a write plus a cache flush"
                };
                format!(
                    "a durable 4 KiB write ({how}) takes {} p50, a plain O_DIRECT write {}: \
                     flushes cost {}; write+fdatasync {}",
                    us(*dsync_p50_us),
                    us(*direct_p50_us),
                    us((dsync_p50_us - direct_p50_us).max(0.0)),
                    us(*fdatasync_p50_us)
                )
            }
            WritesAsSlowAsFlushes {
                devs,
                direct_p50_us,
                dsync_p50_us,
            } => format!(
                "{devs} says \"write back\" but plain O_DIRECT writes take {} p50, as long as \
                 durable ones ({}): the write cache is off or not used",
                us(*direct_p50_us),
                us(*dsync_p50_us)
            ),
            NoFlushesSent {
                devs,
                direct_p50_us,
                dsync_p50_us,
            } => format!(
                "{devs} is \"write through\" and durable writes cost what plain ones cost ({} vs \
                 {} p50): nothing is flushed",
                us(*dsync_p50_us),
                us(*direct_p50_us)
            ),
            FlushRateImpossible {
                dev,
                per_s,
                virtual_,
                write_back,
            } => {
                let why = match (virtual_, write_back) {
                    (true, _) => {
                        "the host's cache absorbs the flushes, or the host's storage is not a \
                         spinning disk"
                    }
                    (false, true) => "the disk acknowledges flushes before data is on the platter",
                    (false, false) => "a cache acknowledges the writes (no flushes are sent)",
                };
                format!(
                    "{dev} says rotational=1 but took {per_s:.0} durable writes/s; a 7,200 rpm \
                     disk does ~120/s, a 15,000 rpm one ~250/s: {why}"
                )
            }
            FlushRatePlausible { dev, per_s } => format!(
                "{per_s:.0} durable writes/s on rotational {dev}: no more than a spinning disk \
                 can do (~120/s at 7,200 rpm), consistent with flushes reaching the platters"
            ),
            FlushRateInconclusive { dev, per_s } => format!(
                "{per_s:.0} durable writes/s on rotational {dev}, measured while it was busy \
                 with other I/O: too slow to tell whether a cache absorbs flushes"
            ),
            TestsSkipped { reason } => match reason {
                SkipReason::Quick => "flush tests skipped (--quick)".to_string(),
                SkipReason::ReadOnly { point } => {
                    format!(
                        "{} is mounted read-only: flush tests skipped",
                        point.display()
                    )
                }
                SkipReason::NotAllowed { dev } => format!(
                    "{dev} holds no file system and is not mounted: flush tests skipped (they \
                     would write to the raw device)"
                ),
                SkipReason::HoldsData { dev, what } => {
                    format!("{dev} is not mounted but holds {what}: flush tests skipped")
                }
                SkipReason::HasPartitions { dev, parts } => format!(
                    "{dev} has partitions ({}): flush tests skipped",
                    parts.join(", ")
                ),
                SkipReason::InUse { dev, error } => {
                    format!("{dev} is in use (exclusive open: {error}): flush tests skipped")
                }
            },
            TestsNotRun => "flush tests not run (interrupted)".to_string(),
            TestsFailed { error, .. } => format!("flush tests failed: {error}"),
            DirtySettings { text, .. } => text.clone(),
            WritebackDisabled => "vm.dirty_writeback_centisecs is 0: periodic writeback is \
                                  disabled, dirty data waits until memory runs short or a sync"
                .to_string(),
            DirtyPending {
                dirty_mib,
                writeback_mib,
            } => format!(
                "{dirty_mib:.0} MiB dirty and {writeback_mib:.0} MiB under writeback in the page \
                 cache: it will reach the disks during your benchmark"
            ),
            ProcessesUnreadable { n } => format!(
                "could not read /proc/PID/io of {n} processes (not root): busy processes may be \
                 missing"
            ),
        }
    }

    /// What to do next, one line.
    pub fn advice(&self) -> String {
        use Finding::*;
        match self {
            WriteCacheOn { .. } => {
                "nothing to change; the flush tests show what a flush costs".into()
            }
            WriteCacheOff { .. } | ScsiNoWriteCache { .. } => {
                "on an array LUN or RAID controller, check that its cache is enabled and \
                 battery/flash-backed: the reference study's RAID 1 wrote 1.84x slower with the \
                 array cache forcibly off"
                    .into()
            }
            FlushesDropped { dev, .. } => format!(
                "echo \"write back\" > /sys/block/{dev}/queue/write_cache so the kernel sends \
                 flushes again (or really turn the lower cache off)"
            ),
            NvmeCacheEnabled { .. } | ScsiWriteBack { .. } => {
                "nothing to change: the kernel flushes this cache on fsync".into()
            }
            NvmeCacheDisabled { dev } => format!(
                "enable it unless that is on purpose (nvme set-feature /dev/{dev} -f 6 -v 1); a \
                 benchmark now measures the uncached drive"
            ),
            NvmeNoCache { .. } => {
                "nothing to change; fast fsync here is honest if the drive has power-loss \
                 protection"
                    .into()
            }
            NvmeQueryFailed { .. } => {
                "run as root (the NVMe admin ioctl needs CAP_SYS_ADMIN) to see Get Features 06h"
                    .into()
            }
            ScsiUnreadable { .. } => "read it with sdparm --get=WCE to compare".into(),
            VirtualDisk { .. } => {
                "ask for the host's cache mode: qemu cache=none/writeback/directsync honour \
                 flushes, cache=unsafe drops them; the flush tests show which"
                    .into()
            }
            LoopDevice { .. } => {
                "numbers measured here are of the loop stack; the device below takes the writes \
                 in the end"
                    .into()
            }
            ReadAheadLarge { dev, .. } => format!(
                "compare device read MiB/s with what was asked for; to measure the device, not \
                 read-ahead: echo 128 > /sys/block/{dev}/queue/read_ahead_kb"
            ),
            DeviceBusy { .. } => {
                "stop or wait for that I/O before benchmarking, or record it beside the \
                 benchmark (diskpulse record) to tell the two apart"
                    .into()
            }
            DeviceQuiet { .. } => "nothing to change".into(),
            BarriersOff { option, .. } => format!(
                "remount without {option} for honest fsync numbers (ext4: mount -o \
                 remount,barrier), unless the cache is battery-backed"
            ),
            JournalAsyncCommit { .. } => {
                "remount without journal_async_commit for production-like durability (ext4(5) \
                 warns it can lose data on a crash)"
                    .into()
            }
            DataWriteback { .. } => {
                "fine for brokers that fsync; use data=ordered where files written without \
                 fsync must survive a crash"
                    .into()
            }
            SyncMount { .. } => {
                "remount without sync (mount -o remount,async) unless production mounts it so"
                    .into()
            }
            DirsyncMount { .. } => {
                "fine for a broker's few directory changes; remount without dirsync if it \
                 creates many files"
                    .into()
            }
            FlushCost {
                fdatasync_p50_us, ..
            } => format!(
                "nothing to change; a broker that syncs every write (sync_interval: always) pays \
                 about {} per sync",
                us(*fdatasync_p50_us)
            ),
            WritesAsSlowAsFlushes { .. } => {
                "check the array/controller/drive cache setting (the reference study's RAID 1 \
                 LUN had its cache forcibly disabled and wrote 1.84x slower than RAID 0)"
                    .into()
            }
            NoFlushesSent { .. } => {
                "fine if the cache is non-volatile (power-loss protection, battery-backed \
                 array); otherwise fsynced data is at risk: check the device"
                    .into()
            }
            FlushRateImpossible {
                dev,
                virtual_: true,
                ..
            } => format!(
                "if the host's storage is SSD, say so (echo 0 > /sys/block/{dev}/queue/rotational); \
                 otherwise ask whether the host honours flushes"
            ),
            FlushRateImpossible { .. } => {
                "do not trust fsync on this disk: disable its write cache (sdparm --clear=WCE) \
                 unless a battery/flash-backed controller sits in front"
                    .into()
            }
            FlushRatePlausible { .. } => "nothing to change".into(),
            FlushRateInconclusive { .. } => "run again when the device is quiet".into(),
            TestsSkipped { reason } => match reason {
                SkipReason::Quick => "run without --quick to measure flush cost".into(),
                SkipReason::ReadOnly { .. } => "check a path on a writable mount".into(),
                SkipReason::NotAllowed { dev } => format!(
                    "add --allow-destructive to write test data to /dev/{dev} (destroys its \
                     first 4 MiB), or check a path on a file system on it"
                ),
                SkipReason::HoldsData { .. } => {
                    "mount it and check the mount path (diskpulse never writes over a file \
                     system)"
                        .into()
                }
                SkipReason::HasPartitions { .. } => {
                    "check a partition or a path on one instead".into()
                }
                SkipReason::InUse { .. } => "check a path on the file system that uses it".into(),
            },
            TestsNotRun => "run again and let it finish".into(),
            TestsFailed { errno, .. } => match *errno {
                Some(libc::ENOSPC) => "free at least 4 MiB there, or use --quick".into(),
                Some(libc::EROFS) => "check a path on a writable mount".into(),
                Some(libc::EINVAL) => {
                    "the file system refuses 4 KiB O_DIRECT writes: check a path on \
                     ext4/xfs/btrfs, or use --quick"
                        .into()
                }
                Some(libc::EACCES) | Some(libc::EPERM) => {
                    "run as a user who can write there (root), or use --quick".into()
                }
                Some(libc::EBUSY) => "the device is in use: check a path on it instead".into(),
                _ => "use --quick to skip the flush tests".into(),
            },
            DirtySettings { background_mib, expire_s, .. } => {
                let mib = background_mib
                    .map(|m| format!("{m:.0} MiB"))
                    .unwrap_or_else(|| "the background threshold".into());
                let s = expire_s
                    .map(|s| format!("{s:.0} s"))
                    .unwrap_or_else(|| "the expiry time".into());
                format!(
                    "a buffered-write benchmark shorter than {s} or smaller than {mib} may never \
                     reach the disk: fsync at the end, or use O_DIRECT"
                )
            }
            WritebackDisabled => {
                "echo 500 > /proc/sys/vm/dirty_writeback_centisecs (the default) unless that is \
                 on purpose"
                    .into()
            }
            DirtyPending { .. } => "run sync (and wait for it) before benchmarking".into(),
            ProcessesUnreadable { .. } => "run as root to see every process".into(),
        }
    }
}

/// A finding and where it belongs.
#[derive(Debug, Clone, PartialEq)]
pub struct Placed {
    /// Index of the target (argument); `None` for machine-wide findings.
    pub target: Option<usize>,
    /// The device it is about, if one.
    pub device: Option<String>,
    pub finding: Finding,
}

fn p50_us(r: &collectors::check::flush::Results, m: Mode) -> Option<f64> {
    r.get(m)
        .and_then(|x| x.lat.at(50.0))
        .map(|ns| ns as f64 / 1000.0)
}

/// Judges the facts of one device.
fn device_findings(t: &TargetFacts, d: &super::DeviceFacts, sample_s: f64, out: &mut Vec<Finding>) {
    // A partition shares its whole disk's queue and cache: judge those once, on the disk.
    let disk_listed = d
        .dev
        .parent
        .as_ref()
        .is_some_and(|p| t.devices.iter().any(|x| &x.dev.name == p));
    if !disk_listed {
        cache_findings(t, d, out);
    }
    io_findings(d, sample_s, out);
}

/// The cache and identity of a device.
fn cache_findings(t: &TargetFacts, d: &super::DeviceFacts, out: &mut Vec<Finding>) {
    let wb = d.write_back();
    // The cache as sysfs says, and whether something below still caches.
    match wb {
        Some(true) => out.push(Finding::WriteCacheOn {
            dev: d.dev.name.clone(),
            loop_: matches!(d.kind, DeviceKind::Loop { .. }),
        }),
        Some(false) => {
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
                        t.devices
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
            match because {
                Some(b) => out.push(Finding::FlushesDropped {
                    dev: d.dev.name.clone(),
                    because: b,
                }),
                None if !d.stacked => out.push(Finding::WriteCacheOff {
                    dev: d.dev.name.clone(),
                }),
                None => {}
            }
        }
        None => {}
    }
    match &d.nvme {
        Some(Ok(v)) => out.push(match (v.present, v.enabled) {
            (false, _) => Finding::NvmeNoCache {
                dev: d.disk.clone(),
            },
            (true, Some(false)) => Finding::NvmeCacheDisabled {
                dev: d.disk.clone(),
            },
            _ => Finding::NvmeCacheEnabled {
                dev: d.disk.clone(),
            },
        }),
        Some(Err(e)) => out.push(Finding::NvmeQueryFailed {
            dev: d.disk.clone(),
            error: e.clone(),
        }),
        None => {}
    }
    if let Some(s) = &d.scsi {
        out.push(match &s.cache_type {
            Ok(ct) if ct.write_cache => Finding::ScsiWriteBack {
                dev: d.disk.clone(),
                raw: ct.raw.clone(),
            },
            Ok(ct) => Finding::ScsiNoWriteCache {
                dev: d.disk.clone(),
                raw: ct.raw.clone(),
            },
            Err(e) => Finding::ScsiUnreadable {
                dev: d.disk.clone(),
                error: e.clone(),
            },
        });
    }
    if d.virtual_disk {
        out.push(Finding::VirtualDisk {
            dev: d.disk.clone(),
            kind: d.kind.label(),
            cache_type: d
                .virtio_cache_type
                .as_ref()
                .and_then(|c| c.as_ref().ok())
                .map(|c| c.raw.clone()),
            rotational: d.rotational() == Some(true),
        });
    }
    if let DeviceKind::Loop { backing_file, dio } = &d.kind {
        out.push(Finding::LoopDevice {
            dev: d.dev.name.clone(),
            backing: backing_file.clone().unwrap_or_else(|| "?".into()),
            dio: *dio == Some(true),
        });
    }
    if let Some(kb) = d.attr("read_ahead_kb").and_then(|v| v.parse::<u64>().ok()) {
        if kb >= READ_AHEAD_LARGE_KB {
            out.push(Finding::ReadAheadLarge {
                dev: d.disk.clone(),
                kb,
            });
        }
    }
}

/// Whether a device did more I/O than [`BUSY_MIB_S`] or [`BUSY_IOPS`] during the sample.
fn is_busy(io: &super::IoDelta) -> bool {
    io.read_mib_s() + io.write_mib_s() > BUSY_MIB_S || io.iops() > BUSY_IOPS
}

/// Other I/O on a device during the sample.
fn io_findings(d: &super::DeviceFacts, sample_s: f64, out: &mut Vec<Finding>) {
    if let Some(io) = &d.io {
        if is_busy(io) {
            out.push(Finding::DeviceBusy {
                dev: d.dev.name.clone(),
                read_mib_s: io.read_mib_s(),
                write_mib_s: io.write_mib_s(),
                iops: io.iops(),
                sample_s,
                procs: vec![],
            });
        } else {
            out.push(Finding::DeviceQuiet {
                dev: d.dev.name.clone(),
                ios: io.reads + io.writes,
                sample_s,
            });
        }
    }
}

/// Judges every fact.
pub fn judge(f: &Facts) -> Vec<Placed> {
    let mut out = vec![];
    let sample_s = f.system.sample_ns as f64 / 1e9;
    let mib = |b: u64| b as f64 / 1048576.0 / sample_s.max(1e-9);
    for (ti, t) in f.targets.iter().enumerate() {
        for d in &t.devices {
            let mut v = vec![];
            device_findings(t, d, sample_s, &mut v);
            for mut x in v {
                if let Finding::DeviceBusy { procs, .. } = &mut x {
                    *procs = d
                        .busy_procs
                        .iter()
                        .map(|&i| {
                            let p = &f.system.processes[i];
                            format!(
                                "{} {} ({:.1} MiB/s read, {:.1} MiB/s write)",
                                p.pid,
                                p.comm,
                                mib(p.read_bytes),
                                mib(p.write_bytes)
                            )
                        })
                        .collect();
                }
                out.push(Placed {
                    target: Some(ti),
                    device: Some(d.dev.name.clone()),
                    finding: x,
                });
            }
        }
        let mut tf = vec![];
        if let (Some(m), Some(du)) = (&t.mount, &t.durability) {
            let point = m.point.display().to_string();
            if let Some(opt) = &du.barrier_off {
                let write_back = t
                    .bottom_devices()
                    .iter()
                    .chain(t.top_devices().iter())
                    .filter(|d| d.write_back() == Some(true) && !d.stacked)
                    .map(|d| d.disk.clone())
                    .fold(vec![], |mut v: Vec<String>, n| {
                        if !v.contains(&n) {
                            v.push(n);
                        }
                        v
                    });
                tf.push(Finding::BarriersOff {
                    point: point.clone(),
                    option: opt.clone(),
                    write_back,
                });
            }
            if du.journal_async_commit {
                tf.push(Finding::JournalAsyncCommit {
                    point: point.clone(),
                });
            }
            if du.data_mode.as_deref() == Some("writeback") {
                tf.push(Finding::DataWriteback {
                    point: point.clone(),
                });
            }
            if du.sync {
                tf.push(Finding::SyncMount {
                    point: point.clone(),
                });
            }
            if du.dirsync {
                tf.push(Finding::DirsyncMount { point });
            }
        }
        match &t.flush {
            FlushOutcome::Measured(r) => flush_findings(t, r, &mut tf),
            FlushOutcome::Skipped(reason) => tf.push(Finding::TestsSkipped {
                reason: reason.clone(),
            }),
            FlushOutcome::NotRun => tf.push(Finding::TestsNotRun),
            FlushOutcome::Failed(e) => tf.push(Finding::TestsFailed {
                error: e.to_string(),
                errno: e.errno(),
            }),
        }
        for x in tf {
            let device = match &x {
                Finding::FlushRateImpossible { dev, .. }
                | Finding::FlushRatePlausible { dev, .. } => Some(dev.clone()),
                _ => None,
            };
            out.push(Placed {
                target: Some(ti),
                device,
                finding: x,
            });
        }
    }
    for x in system_findings(f) {
        out.push(Placed {
            target: None,
            device: None,
            finding: x,
        });
    }
    out
}

fn flush_findings(t: &TargetFacts, r: &collectors::check::flush::Results, out: &mut Vec<Finding>) {
    let (Some(direct), Some(dsync), Some(fds)) = (
        p50_us(r, Mode::Direct),
        p50_us(r, Mode::DirectDsync),
        p50_us(r, Mode::WriteFdatasync),
    ) else {
        return;
    };
    let tops = t.top_devices();
    let names = tops
        .iter()
        .map(|d| d.dev.name.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    let any_wb = tops.iter().any(|d| d.write_back() == Some(true));
    let any_wt = tops.iter().any(|d| d.write_back() == Some(false));
    let fua = tops.iter().all(|d| d.attr("fua") == Some("1"));
    let same = dsync < direct * SAME_COST_RATIO;
    if any_wt && same {
        out.push(Finding::NoFlushesSent {
            devs: names,
            direct_p50_us: direct,
            dsync_p50_us: dsync,
        });
    } else if any_wb && same {
        out.push(Finding::WritesAsSlowAsFlushes {
            devs: names,
            direct_p50_us: direct,
            dsync_p50_us: dsync,
        });
    } else {
        out.push(Finding::FlushCost {
            direct_p50_us: direct,
            dsync_p50_us: dsync,
            fdatasync_p50_us: fds,
            fua,
        });
    }
    // Durable writes per second against the physical limit of spinning disks below.
    let per_s = [Mode::DirectDsync, Mode::WriteFdatasync]
        .iter()
        .filter_map(|m| r.get(*m).map(|x| x.ops_per_s()))
        .fold(0.0, f64::max);
    for b in t.bottom_devices() {
        if b.rotational() != Some(true) || matches!(b.kind, DeviceKind::Zram) {
            continue;
        }
        if per_s > MAX_SPINNING_FLUSHES_PER_S {
            out.push(Finding::FlushRateImpossible {
                dev: b.disk.clone(),
                per_s,
                virtual_: b.virtual_disk || matches!(b.kind, DeviceKind::Loop { .. }),
                write_back: b.write_back() == Some(true) && !any_wt,
            });
        } else if b.io.is_some_and(|io| is_busy(&io)) {
            // Other I/O slows our flushes down: a low rate proves nothing then.
            out.push(Finding::FlushRateInconclusive {
                dev: b.disk.clone(),
                per_s,
            });
        } else {
            out.push(Finding::FlushRatePlausible {
                dev: b.disk.clone(),
                per_s,
            });
        }
    }
}

fn system_findings(f: &Facts) -> Vec<Finding> {
    let mut out = vec![];
    let s = &f.system;
    let d = &s.dirty;
    let dirtyable_mib = s.memory.map(|m| m.dirtyable_kib as f64 / 1024.0);
    let threshold = |bytes: Option<u64>, ratio: Option<u64>| -> (String, Option<f64>) {
        match (bytes, ratio) {
            (Some(b), _) if b > 0 => {
                let m = b as f64 / 1048576.0;
                (format!("{m:.0} MiB (bytes)"), Some(m))
            }
            (_, Some(r)) => {
                let m = dirtyable_mib.map(|x| x * r as f64 / 100.0);
                let approx = m.map(|m| format!(" = ~{m:.0} MiB")).unwrap_or_default();
                (format!("{r}%{approx}"), m)
            }
            _ => ("?".into(), None),
        }
    };
    let (bg_text, bg_mib) = threshold(d.dirty_background_bytes, d.dirty_background_ratio);
    let (lim_text, _) = threshold(d.dirty_bytes, d.dirty_ratio);
    let expire_s = d.dirty_expire_centisecs.map(|c| c as f64 / 100.0);
    let wb_s = d.dirty_writeback_centisecs.map(|c| c as f64 / 100.0);
    let secs = |v: Option<f64>| v.map(|s| format!("{s:.0} s")).unwrap_or_else(|| "?".into());
    out.push(Finding::DirtySettings {
        text: format!(
            "writeback starts at {bg_text} dirty, writers block at {lim_text}; data dirty for \
             {} is written back, checked every {}",
            secs(expire_s),
            secs(wb_s)
        ),
        background_mib: bg_mib,
        expire_s,
    });
    if d.dirty_writeback_centisecs == Some(0) {
        out.push(Finding::WritebackDisabled);
    }
    if let Some(m) = s.memory {
        let dirty_mib = m.dirty_kib as f64 / 1024.0;
        let writeback_mib = m.writeback_kib as f64 / 1024.0;
        if dirty_mib + writeback_mib >= DIRTY_PENDING_MIB {
            out.push(Finding::DirtyPending {
                dirty_mib,
                writeback_mib,
            });
        }
    }
    if s.unreadable > 0 && !s.root {
        out.push(Finding::ProcessesUnreadable { n: s.unreadable });
    }
    out
}

/// The exit code: 1 on any FAIL, or on any WARN with `--strict`; else 0.
pub fn exit_code(findings: &[Placed], strict: bool) -> i32 {
    let worst = findings.iter().map(|p| p.finding.level()).max();
    match worst {
        Some(Level::Fail) => 1,
        Some(Level::Warn) if strict => 1,
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_and_exit_codes() {
        let w = Placed {
            target: None,
            device: None,
            finding: Finding::WritebackDisabled,
        };
        let f = Placed {
            target: Some(0),
            device: Some("loop0".into()),
            finding: Finding::FlushesDropped {
                dev: "loop0".into(),
                because: "x".into(),
            },
        };
        assert_eq!(exit_code(&[], true), 0);
        assert_eq!(exit_code(std::slice::from_ref(&w), false), 0);
        assert_eq!(exit_code(std::slice::from_ref(&w), true), 1);
        assert_eq!(exit_code(&[w, f.clone()], false), 1);
        assert_eq!(f.finding.level(), Level::Fail);
    }

    #[test]
    fn an_impossible_flush_rate_fails_only_on_real_write_back_disks() {
        let mk = |virtual_, write_back| Finding::FlushRateImpossible {
            dev: "sda".into(),
            per_s: 2000.0,
            virtual_,
            write_back,
        };
        assert_eq!(mk(false, true).level(), Level::Fail);
        assert_eq!(mk(true, true).level(), Level::Warn);
        assert_eq!(mk(false, false).level(), Level::Warn);
        assert!(mk(false, true).message().contains("2000 durable writes/s"));
    }

    use crate::check::{DeviceFacts, FlushOutcome, SystemFacts, TargetFacts, TargetKind};
    use collectors::check::flush::{ModeResult, Results};
    use collectors::check::nvme::VolatileWriteCache;
    use collectors::check::scsi::{parse_cache_type, ScsiDisk};
    use collectors::devices::{DevNum, Device};
    use collectors::directio::{latency_histogram, record_ns, LatencyNs};

    fn dev(name: &str, kind: DeviceKind, why: &str, queue: &[(&str, &str)]) -> DeviceFacts {
        DeviceFacts {
            dev: Device {
                name: name.into(),
                num: DevNum { major: 8, minor: 0 },
                why: why.into(),
                parent: None,
            },
            disk: name.into(),
            kind,
            virtual_disk: false,
            queue: queue
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            nvme: None,
            scsi: None,
            virtio_cache_type: None,
            stacked: false,
            lower: vec![],
            io: None,
            busy_procs: vec![],
            match_devs: vec![],
        }
    }

    /// Results where each mode's latency is `us` microseconds and its rate `per_s`.
    fn measured(modes: [(Mode, f64, f64); 3]) -> FlushOutcome {
        FlushOutcome::Measured(Results {
            written: "/mnt/x/.diskpulse-check-1".into(),
            block_bytes: 4096,
            modes: modes
                .iter()
                .map(|&(mode, us, per_s)| {
                    let mut h = latency_histogram();
                    for _ in 0..100 {
                        record_ns(&mut h, (us * 1000.0) as u64);
                    }
                    ModeResult {
                        mode,
                        ops: per_s as u64,
                        elapsed_ns: 1_000_000_000,
                        lat: LatencyNs::from_histogram(&h),
                    }
                })
                .collect(),
        })
    }

    fn facts(devices: Vec<DeviceFacts>, flush: FlushOutcome) -> Facts {
        Facts {
            targets: vec![TargetFacts {
                arg: "/mnt/x".into(),
                kind: TargetKind::Path,
                path: "/mnt/x".into(),
                mount: None,
                durability: None,
                devices,
                flush,
                planned: None,
            }],
            system: SystemFacts {
                dirty: Default::default(),
                memory: None,
                sample_ns: 1_000_000_000,
                processes: vec![],
                unreadable: 0,
                root: true,
            },
            interrupted: false,
        }
    }

    fn codes(f: &Facts) -> Vec<(&'static str, Level)> {
        judge(f)
            .into_iter()
            .filter(|p| p.target.is_some())
            .map(|p| (p.finding.code(), p.finding.level()))
            .collect()
    }

    const HOLDS: &str = "holds /mnt/x";

    #[test]
    fn a_disk_whose_cache_is_on_but_the_kernel_says_write_through_fails() {
        let mut sda = dev(
            "sda",
            DeviceKind::Scsi,
            HOLDS,
            &[("write_cache", "write through"), ("rotational", "0")],
        );
        sda.scsi = Some(ScsiDisk {
            dir: "/sys/class/scsi_disk/0:0:0:0".into(),
            cache_type: parse_cache_type("write back"),
            fua: Some(true),
        });
        let f = facts(
            vec![sda],
            FlushOutcome::Skipped(crate::check::SkipReason::Quick),
        );
        let c = codes(&f);
        assert!(c.contains(&("flushes-dropped", Level::Fail)), "{c:?}");
        assert!(c.contains(&("scsi-write-back", Level::Pass)), "{c:?}");
        let j = judge(&f);
        let msg = j[0].finding.message();
        assert!(msg.contains("SCSI cache_type is \"write back\""), "{msg}");
        assert_eq!(exit_code(&j, false), 1);
    }

    #[test]
    fn nvme_get_features_results_become_findings() {
        let mut n = dev(
            "nvme0n1",
            DeviceKind::Nvme,
            HOLDS,
            &[("write_cache", "write back")],
        );
        n.nvme = Some(Ok(VolatileWriteCache {
            present: true,
            enabled: Some(false),
            model: None,
        }));
        let c = codes(&facts(vec![n.clone()], FlushOutcome::NotRun));
        assert!(c.contains(&("nvme-vwc-disabled", Level::Warn)), "{c:?}");
        n.nvme = Some(Ok(VolatileWriteCache {
            present: false,
            enabled: None,
            model: None,
        }));
        let c = codes(&facts(vec![n], FlushOutcome::NotRun));
        assert!(c.contains(&("nvme-no-vwc", Level::Info)), "{c:?}");
    }

    #[test]
    fn the_reference_studys_raid1_lun_writes_as_slowly_as_it_flushes() {
        // Write cache forcibly off on the array while the LUN still says write back:
        // plain writes ~260 us, durable ones about the same.
        let lun = dev(
            "sdb",
            DeviceKind::Scsi,
            HOLDS,
            &[("write_cache", "write back"), ("rotational", "0")],
        );
        let f = facts(
            vec![lun.clone()],
            measured([
                (Mode::Direct, 260.0, 3800.0),
                (Mode::DirectDsync, 280.0, 3500.0),
                (Mode::WriteFdatasync, 300.0, 3300.0),
            ]),
        );
        let c = codes(&f);
        assert!(
            c.contains(&("writes-as-slow-as-flushes", Level::Warn)),
            "{c:?}"
        );
        // With the cache on, flushes cost something: PASS.
        let f = facts(
            vec![lun.clone()],
            measured([
                (Mode::Direct, 120.0, 8000.0),
                (Mode::DirectDsync, 900.0, 1100.0),
                (Mode::WriteFdatasync, 1000.0, 1000.0),
            ]),
        );
        assert!(codes(&f).contains(&("flush-cost", Level::Pass)));
        // "write through" and flushes as fast as writes: a note.
        let mut wt = lun;
        wt.queue[0].1 = "write through".into();
        let f = facts(
            vec![wt],
            measured([
                (Mode::Direct, 60.0, 15000.0),
                (Mode::DirectDsync, 62.0, 14000.0),
                (Mode::WriteFdatasync, 70.0, 12000.0),
            ]),
        );
        let c = codes(&f);
        assert!(c.contains(&("no-flushes-sent", Level::Info)), "{c:?}");
        assert!(c.contains(&("write-cache-off", Level::Info)), "{c:?}");
    }

    #[test]
    fn flush_rate_against_a_spinning_disk() {
        let hdd = dev(
            "sdc",
            DeviceKind::Scsi,
            HOLDS,
            &[("write_cache", "write back"), ("rotational", "1")],
        );
        let rates = |per_s: f64| {
            measured([
                (Mode::Direct, 100.0, 9000.0),
                (Mode::DirectDsync, 1e6 / per_s, per_s),
                (Mode::WriteFdatasync, 1e6 / per_s, per_s),
            ])
        };
        let c = codes(&facts(vec![hdd.clone()], rates(2000.0)));
        assert!(c.contains(&("flush-rate-impossible", Level::Fail)), "{c:?}");
        let c = codes(&facts(vec![hdd.clone()], rates(110.0)));
        assert!(c.contains(&("flush-rate-plausible", Level::Pass)), "{c:?}");
        // Slow because someone else was writing: no conclusion.
        let mut busy = hdd.clone();
        busy.io = Some(crate::check::IoDelta {
            elapsed_ns: 1_000_000_000,
            write_bytes: 400 << 20,
            writes: 3000,
            ..Default::default()
        });
        let c = codes(&facts(vec![busy], rates(110.0)));
        assert!(
            c.contains(&("flush-rate-inconclusive", Level::Info)),
            "{c:?}"
        );
        assert!(c.contains(&("device-busy", Level::Warn)), "{c:?}");
        let mut vm = hdd;
        vm.virtual_disk = true;
        let c = codes(&facts(vec![vm], rates(2000.0)));
        assert!(c.contains(&("flush-rate-impossible", Level::Warn)), "{c:?}");
    }

    #[test]
    fn a_partition_and_its_disk_are_judged_once() {
        let mut part = dev(
            "sda1",
            DeviceKind::Scsi,
            HOLDS,
            &[("write_cache", "write back")],
        );
        part.dev.parent = Some("sda".into());
        part.disk = "sda".into();
        let disk = dev(
            "sda",
            DeviceKind::Scsi,
            "whole disk of sda1",
            &[("write_cache", "write back")],
        );
        let c = codes(&facts(vec![part, disk], FlushOutcome::NotRun));
        assert_eq!(
            c.iter().filter(|x| x.0 == "write-cache-on").count(),
            1,
            "{c:?}"
        );
    }

    #[test]
    fn every_finding_has_advice_and_a_code() {
        let all = [
            Finding::WriteCacheOff { dev: "sdb".into() },
            Finding::NvmeCacheDisabled {
                dev: "nvme0n1".into(),
            },
            Finding::TestsFailed {
                error: "x".into(),
                errno: Some(libc::ENOSPC),
            },
            Finding::BarriersOff {
                point: "/mnt/x".into(),
                option: "nobarrier".into(),
                write_back: vec!["vda".into()],
            },
        ];
        for f in all {
            assert!(!f.advice().is_empty() && !f.code().is_empty());
            assert!(!f.message().contains('\n'));
        }
        assert!(Finding::NvmeCacheDisabled {
            dev: "nvme0n1".into()
        }
        .advice()
        .contains("nvme set-feature /dev/nvme0n1 -f 6 -v 1"));
    }
}
