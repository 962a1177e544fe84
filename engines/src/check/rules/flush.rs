//! Rules about the empirical flush tests: what they cost ([`TESTS`], or why they did not
//! run) and their rate against each spinning disk at the bottom of the stack ([`RATES`]).

use super::{is_busy, said, us, Level::*, Rule, Said, MAX_SPINNING_FLUSHES_PER_S, SAME_COST_RATIO};
use crate::check::{DeviceFacts, FlushOutcome, SkipReason, TargetFacts};
use collectors::check::flush::{Mode, Results};
use collectors::check::kind::DeviceKind;

/// The p50 latencies of a measured run and what the devices on top say about caching.
pub struct Measured {
    direct_p50_us: f64,
    dsync_p50_us: f64,
    fdatasync_p50_us: f64,
    /// The devices that hold the path, comma-separated.
    pub devs: String,
    /// Some of them say "write back" / "write through".
    any_write_back: bool,
    any_write_through: bool,
    /// All of them take FUA writes.
    pub fua: bool,
    /// Durable writes within [`SAME_COST_RATIO`] of plain ones.
    same_cost: bool,
    /// The most durable writes per second of the two durable modes.
    durable_per_s: f64,
}

/// A target's flush tests: their outcome and, when measured with every mode, the figures.
pub(crate) struct TestsCtx<'a> {
    pub target: &'a TargetFacts,
    pub outcome: &'a FlushOutcome,
    pub measured: Option<Measured>,
}

fn p50_us(r: &Results, m: Mode) -> Option<f64> {
    r.get(m)
        .and_then(|x| x.lat.at(50.0))
        .map(|ns| ns as f64 / 1000.0)
}

impl<'a> TestsCtx<'a> {
    pub fn of(t: &'a TargetFacts) -> TestsCtx<'a> {
        let measured = match &t.flush {
            FlushOutcome::Measured(r) => Self::measured(t, r),
            _ => None,
        };
        TestsCtx {
            target: t,
            outcome: &t.flush,
            measured,
        }
    }

    fn measured(t: &TargetFacts, r: &Results) -> Option<Measured> {
        let direct = p50_us(r, Mode::Direct)?;
        let dsync = p50_us(r, Mode::DirectDsync)?;
        let fds = p50_us(r, Mode::WriteFdatasync)?;
        let tops = t.top_devices();
        Some(Measured {
            direct_p50_us: direct,
            dsync_p50_us: dsync,
            fdatasync_p50_us: fds,
            devs: tops
                .iter()
                .map(|d| d.dev.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            any_write_back: tops.iter().any(|d| d.write_back() == Some(true)),
            any_write_through: tops.iter().any(|d| d.write_back() == Some(false)),
            fua: tops.iter().all(|d| d.attr("fua") == Some("1")),
            same_cost: dsync < direct * SAME_COST_RATIO,
            durable_per_s: [Mode::DirectDsync, Mode::WriteFdatasync]
                .iter()
                .filter_map(|m| r.get(*m).map(|x| x.ops_per_s()))
                .fold(0.0, f64::max),
        })
    }
}

type TestsRule = Rule<fn(&TestsCtx<'_>) -> Option<Said>>;

/// The flush tests of a target, in report order (at most one applies).
pub(crate) const TESTS: &[TestsRule] = &[
    Rule {
        code: "flush-cost",
        levels: &[Pass],
        judge: |c| {
            let m = c.measured.as_ref()?;
            if m.same_cost && (m.any_write_through || m.any_write_back) {
                return None;
            }
            let how = if m.fua {
                "a FUA write"
            } else {
                "a write plus a cache flush"
            };
            said(
                format!(
                    "a durable 4 KiB write ({how}) takes {} p50, a plain O_DIRECT write {}: \
                     flushes cost {}; write+fdatasync {}",
                    us(m.dsync_p50_us),
                    us(m.direct_p50_us),
                    us((m.dsync_p50_us - m.direct_p50_us).max(0.0)),
                    us(m.fdatasync_p50_us)
                ),
                format!(
                    "nothing to change; a broker that syncs every write (sync_interval: always) \
                     pays about {} per sync",
                    us(m.fdatasync_p50_us)
                ),
            )
        },
    },
    Rule {
        code: "writes-as-slow-as-flushes",
        levels: &[Warn],
        judge: |c| {
            let m = c.measured.as_ref()?;
            if !(m.same_cost && m.any_write_back && !m.any_write_through) {
                return None;
            }
            said(
                format!(
                    "{} says \"write back\" but plain O_DIRECT writes take {} p50, as long as \
                     durable ones ({}): the write cache is off or not used",
                    m.devs,
                    us(m.direct_p50_us),
                    us(m.dsync_p50_us)
                ),
                "check the array/controller/drive cache setting (the reference study's RAID 1 \
                 LUN had its cache forcibly disabled and wrote 1.84x slower than RAID 0)",
            )
        },
    },
    Rule {
        code: "no-flushes-sent",
        levels: &[Info],
        judge: |c| {
            let m = c.measured.as_ref()?;
            if !(m.same_cost && m.any_write_through) {
                return None;
            }
            said(
                format!(
                    "{} is \"write through\" and durable writes cost what plain ones cost ({} \
                     vs {} p50): nothing is flushed",
                    m.devs,
                    us(m.dsync_p50_us),
                    us(m.direct_p50_us)
                ),
                "fine if the cache is non-volatile (power-loss protection, battery-backed \
                 array); otherwise fsynced data is at risk: check the device",
            )
        },
    },
    Rule {
        code: "tests-skipped",
        levels: &[Info],
        judge: |c| {
            let FlushOutcome::Skipped(reason) = c.outcome else {
                return None;
            };
            let (message, advice) = match reason {
                SkipReason::Quick => (
                    "flush tests skipped (--quick)".to_string(),
                    "run without --quick to measure flush cost".to_string(),
                ),
                SkipReason::ReadOnly { point } => (
                    format!(
                        "{} is mounted read-only: flush tests skipped",
                        point.display()
                    ),
                    "check a path on a writable mount".into(),
                ),
                SkipReason::NotAllowed { dev } => (
                    format!(
                        "{dev} holds no file system and is not mounted: flush tests skipped \
                         (they would write to the raw device)"
                    ),
                    format!(
                        "add --allow-destructive to write test data to /dev/{dev} (destroys \
                         its first 4 MiB), or check a path on a file system on it"
                    ),
                ),
                SkipReason::HoldsData { dev, what } => (
                    format!("{dev} is not mounted but holds {what}: flush tests skipped"),
                    "mount it and check the mount path (diskpulse never writes over a file \
                     system)"
                        .into(),
                ),
                SkipReason::HasPartitions { dev, parts } => (
                    format!(
                        "{dev} has partitions ({}): flush tests skipped",
                        parts.join(", ")
                    ),
                    "check a partition or a path on one instead".into(),
                ),
                SkipReason::InUse { dev, error } => (
                    format!("{dev} is in use (exclusive open: {error}): flush tests skipped"),
                    "check a path on the file system that uses it".into(),
                ),
            };
            said(message, advice)
        },
    },
    Rule {
        code: "tests-not-run",
        levels: &[Info],
        judge: |c| {
            if !matches!(c.outcome, FlushOutcome::NotRun) {
                return None;
            }
            said(
                "flush tests not run (interrupted)",
                "run again and let it finish",
            )
        },
    },
    Rule {
        code: "tests-failed",
        levels: &[Warn],
        judge: |c| {
            let FlushOutcome::Failed(e) = c.outcome else {
                return None;
            };
            let advice = match e.errno() {
                Some(libc::ENOSPC) => "free at least 4 MiB there, or use --quick",
                Some(libc::EROFS) => "check a path on a writable mount",
                Some(libc::EINVAL) => {
                    "the file system refuses 4 KiB O_DIRECT writes: check a path on \
                     ext4/xfs/btrfs, or use --quick"
                }
                Some(libc::EACCES) | Some(libc::EPERM) => {
                    "run as a user who can write there (root), or use --quick"
                }
                Some(libc::EBUSY) => "the device is in use: check a path on it instead",
                _ => "use --quick to skip the flush tests",
            };
            said(format!("flush tests failed: {e}"), advice)
        },
    },
];

/// A spinning disk at the bottom of a measured target's stack, with the durable write
/// rate the tests reached.
pub(crate) struct RateCtx<'a> {
    pub disk: &'a DeviceFacts,
    durable_per_s: f64,
    /// Some device on top says "write through" (no flushes are sent).
    any_write_through: bool,
}

impl<'a> RateCtx<'a> {
    /// One per rotational disk (zram says rotational too: not one) at the bottom of a
    /// target whose tests measured every mode.
    pub fn of(t: &TestsCtx<'a>) -> Vec<RateCtx<'a>> {
        let Some(m) = &t.measured else {
            return vec![];
        };
        t.target
            .bottom_devices()
            .into_iter()
            .filter(|b| b.rotational() == Some(true) && !matches!(b.kind, DeviceKind::Zram))
            .map(|disk| RateCtx {
                disk,
                durable_per_s: m.durable_per_s,
                any_write_through: m.any_write_through,
            })
            .collect()
    }
}

type RateRule = Rule<fn(&RateCtx<'_>) -> Option<Said>>;

/// Durable writes per second against the physical limit of a spinning disk (one applies).
pub(crate) const RATES: &[RateRule] = &[
    Rule {
        code: "flush-rate-impossible",
        levels: &[Fail, Warn],
        judge: |c| {
            let (dev, per_s) = (&c.disk.disk, c.durable_per_s);
            if per_s <= MAX_SPINNING_FLUSHES_PER_S {
                return None;
            }
            let virtual_ = c.disk.virtual_disk || matches!(c.disk.kind, DeviceKind::Loop { .. });
            let write_back = c.disk.write_back() == Some(true) && !c.any_write_through;
            let why = match (virtual_, write_back) {
                (true, _) => {
                    "the host's cache absorbs the flushes, or the host's storage is not a \
                     spinning disk"
                }
                (false, true) => "the disk acknowledges flushes before data is on the platter",
                (false, false) => "a cache acknowledges the writes (no flushes are sent)",
            };
            let advice = if virtual_ {
                format!(
                    "if the host's storage is SSD, say so (echo 0 > \
                     /sys/block/{dev}/queue/rotational); otherwise ask whether the host honours \
                     flushes"
                )
            } else {
                "do not trust fsync on this disk: disable its write cache (sdparm --clear=WCE) \
                 unless a battery/flash-backed controller sits in front"
                    .into()
            };
            // Only a real disk that says "write back" lies about its cache.
            let level = if !virtual_ && write_back { Fail } else { Warn };
            said(
                format!(
                    "{dev} says rotational=1 but took {per_s:.0} durable writes/s; a 7,200 rpm \
                     disk does ~120/s, a 15,000 rpm one ~250/s: {why}"
                ),
                advice,
            )
            .map(|s| s.at(level))
        },
    },
    Rule {
        code: "flush-rate-plausible",
        levels: &[Pass],
        judge: |c| {
            if c.durable_per_s > MAX_SPINNING_FLUSHES_PER_S
                || c.disk.io.is_some_and(|io| is_busy(&io))
            {
                return None;
            }
            said(
                format!(
                    "{:.0} durable writes/s on rotational {}: no more than a spinning disk can \
                     do (~120/s at 7,200 rpm), consistent with flushes reaching the platters",
                    c.durable_per_s, c.disk.disk
                ),
                "nothing to change",
            )
        },
    },
    Rule {
        code: "flush-rate-inconclusive",
        levels: &[Info],
        judge: |c| {
            // Other I/O slows our flushes down: a low rate proves nothing then.
            if c.durable_per_s > MAX_SPINNING_FLUSHES_PER_S
                || !c.disk.io.is_some_and(|io| is_busy(&io))
            {
                return None;
            }
            said(
                format!(
                    "{:.0} durable writes/s on rotational {}, measured while it was busy with \
                     other I/O: too slow to tell whether a cache absorbs flushes",
                    c.durable_per_s, c.disk.disk
                ),
                "run again when the device is quiet",
            )
        },
    },
];
