//! Rules about a target's mount options ([`MOUNT`]).

use super::{said, Level::*, Rule, Said};
use crate::check::TargetFacts;
use collectors::check::mountinfo::Durability;

/// A target that has a mount, with what its options say about durability.
pub struct MountCtx<'a> {
    pub target: &'a TargetFacts,
    /// The mount point, as printed.
    pub point: String,
    pub durability: &'a Durability,
}

impl<'a> MountCtx<'a> {
    pub fn of(t: &'a TargetFacts) -> Option<MountCtx<'a>> {
        let (m, durability) = (t.mount.as_ref()?, t.durability.as_ref()?);
        Some(MountCtx {
            target: t,
            point: m.point.display().to_string(),
            durability,
        })
    }
}

type MountRule = Rule<fn(&MountCtx<'_>) -> Option<Said>>;

/// A target's mount options, in report order.
pub const MOUNT: &[MountRule] = &[
    Rule {
        code: "barriers-off",
        levels: &[Warn],
        judge: |c| {
            let option = c.durability.barrier_off.as_ref()?;
            let t = c.target;
            // The disks with a volatile cache that fsync now leaves unflushed.
            let mut write_back: Vec<String> = vec![];
            for d in t.bottom_devices().iter().chain(t.top_devices().iter()) {
                if d.write_back() == Some(true) && !d.stacked && !write_back.contains(&d.disk) {
                    write_back.push(d.disk.clone());
                }
            }
            let point = &c.point;
            let message = if write_back.is_empty() {
                format!(
                    "{point} is mounted with {option}: the file system sends no cache flushes \
                     (no device below reports a volatile cache now)"
                )
            } else {
                format!(
                    "{point} is mounted with {option}: the file system sends no cache flushes, \
                     so fsync returns before data leaves the volatile write cache of {}",
                    write_back.join(", ")
                )
            };
            said(
                message,
                format!(
                    "remount without {option} for honest fsync numbers (ext4: mount -o \
                     remount,barrier), unless the cache is battery-backed"
                ),
            )
        },
    },
    Rule {
        code: "journal-async-commit",
        levels: &[Warn],
        judge: |c| {
            if !c.durability.journal_async_commit {
                return None;
            }
            said(
                format!(
                    "{} is mounted with journal_async_commit: the commit block is written \
                     without waiting for the journal blocks before it",
                    c.point
                ),
                "remount without journal_async_commit for production-like durability (ext4(5) \
                 warns it can lose data on a crash)",
            )
        },
    },
    Rule {
        code: "data-writeback",
        levels: &[Info],
        judge: |c| {
            if c.durability.data_mode.as_deref() != Some("writeback") {
                return None;
            }
            said(
                format!(
                    "{} is mounted with data=writeback: metadata is journaled without writing \
                     file data first; after a crash, files written without fsync can hold stale \
                     data",
                    c.point
                ),
                "fine for brokers that fsync; use data=ordered where files written without \
                 fsync must survive a crash",
            )
        },
    },
    Rule {
        code: "sync-mount",
        levels: &[Warn],
        judge: |c| {
            if !c.durability.sync {
                return None;
            }
            said(
                format!(
                    "{} is mounted sync: every write waits for the device, so buffered writes \
                     and a broker's periodic sync become synchronous writes",
                    c.point
                ),
                "remount without sync (mount -o remount,async) unless production mounts it so",
            )
        },
    },
    Rule {
        code: "dirsync-mount",
        levels: &[Info],
        judge: |c| {
            if !c.durability.dirsync {
                return None;
            }
            said(
                format!(
                    "{} is mounted dirsync: directory changes wait for the device",
                    c.point
                ),
                "fine for a broker's few directory changes; remount without dirsync if it \
                 creates many files",
            )
        },
    },
];
