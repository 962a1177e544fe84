//! The tests `diskpulse fsync` runs: pg_test_fsync's rows (same sizes, flags and sync
//! calls, read from its strace) and ours beside them, as data. How they run is in `super`.

use std::fs::File;
use std::os::unix::io::AsRawFd;

use crate::directio::SyncFlag;

/// PostgreSQL's WAL block size (`XLOG_BLCKSZ`): the write size of most tests.
pub const XLOG_BLCKSZ: usize = 8192;
/// The test file's size: one WAL segment (`XLOG_SEG_SIZE`, 16 MiB).
pub const FILE_BYTES: usize = 16 << 20;
/// Bytes written per op in the open_sync size comparison.
pub(crate) const SIZES_OP_BYTES: usize = 16 << 10;

/// Where an op's writes go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Offsets {
    /// pg_test_fsync's: write `w` of every op at `w * write_bytes`.
    #[default]
    Fixed,
    /// Op `k` at `k * op_bytes` modulo the file size, as a WAL segment fills.
    Cycle,
}

/// The separate sync call of a "write, then sync" op.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncCall {
    Fdatasync,
    Fsync,
}

impl SyncCall {
    pub fn name(self) -> &'static str {
        match self {
            SyncCall::Fdatasync => "fdatasync",
            SyncCall::Fsync => "fsync",
        }
    }

    pub(crate) fn call(self, f: &File) -> std::io::Result<()> {
        // Plain fdatasync(2)/fsync(2): no F_FULLFSYNC, no sync_file_range.
        // SAFETY: the descriptor is open for the life of `f`.
        let rc = unsafe {
            match self {
                SyncCall::Fdatasync => libc::fdatasync(f.as_raw_fd()),
                SyncCall::Fsync => libc::fsync(f.as_raw_fd()),
            }
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    }
}

/// What one op does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Writes on one descriptor opened with O_DSYNC or O_SYNC (and maybe O_DIRECT): each
    /// write is durable when it returns; no separate sync call.
    SyncOnWrite { direct: bool, flag: SyncFlag },
    /// Writes on one descriptor, then one fdatasync/fsync on it.
    ThenSync { direct: bool, call: SyncCall },
    /// open, write, fsync, close, then open and close again (pg: "write, fsync, close").
    WriteFsyncClose,
    /// open, write, close, open, fsync, close: the fsync is on a descriptor that wrote
    /// nothing (pg: "write, close, fsync").
    WriteCloseFsync,
    /// Writes on one descriptor, no sync at all: the baseline.
    NoSync,
}

impl Kind {
    /// Whether the op has a separate sync call whose latency is timed alone.
    pub(crate) fn has_sync_call(self) -> bool {
        matches!(
            self,
            Kind::ThenSync { .. } | Kind::WriteFsyncClose | Kind::WriteCloseFsync
        )
    }

    pub(crate) fn direct(self) -> bool {
        match self {
            Kind::SyncOnWrite { direct, .. } | Kind::ThenSync { direct, .. } => direct,
            _ => false,
        }
    }
}

/// The sections of the report, in pg_test_fsync's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Group {
    OneWrite,
    TwoWrites,
    OpenSyncSizes,
    OtherFd,
    NoSync,
}

impl Group {
    /// Stable id (JSON, CSV).
    pub fn id(self) -> &'static str {
        match self {
            Group::OneWrite => "one_8k",
            Group::TwoWrites => "two_8k",
            Group::OpenSyncSizes => "open_sync_16k",
            Group::OtherFd => "other_fd",
            Group::NoSync => "no_sync",
        }
    }

    pub fn title(self) -> &'static str {
        match self {
            Group::OneWrite => "Sync methods, one 8 KiB write per op",
            Group::TwoWrites => "Sync methods, two 8 KiB writes per op",
            Group::OpenSyncSizes => "O_DIRECT|O_SYNC, 16 KiB per op in different write sizes",
            Group::OtherFd => "Is fsync on a descriptor that did not write honoured?",
            Group::NoSync => "Non-synced 8 KiB writes (baseline)",
        }
    }

    /// pg_test_fsync's heading of the same section.
    pub fn pg_title(self) -> &'static str {
        match self {
            Group::OneWrite => "Compare file sync methods using one 8kB write:",
            Group::TwoWrites => "Compare file sync methods using two 8kB writes:",
            Group::OpenSyncSizes => "Compare open_sync with different write sizes:",
            Group::OtherFd => "Test if fsync on non-write file descriptor is honored:",
            Group::NoSync => "Non-sync'ed 8kB writes:",
        }
    }
}

/// One row of the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestSpec {
    pub group: Group,
    /// Stable id within the group (`fdatasync`, `open_datasync`, `4x4k`): pg_test_fsync's
    /// row name where the row is pg's.
    pub id: &'static str,
    /// Short human name.
    pub name: &'static str,
    /// What an op does, in syscall terms.
    pub how: &'static str,
    /// pg_test_fsync's label of the row that does exactly this, if one does.
    pub pg_label: Option<&'static str>,
    pub kind: Kind,
    pub writes_per_op: usize,
    pub write_bytes: usize,
}

impl TestSpec {
    /// `group.id`, e.g. `one_8k.fdatasync`.
    pub fn full_id(&self) -> String {
        format!("{}.{}", self.group.id(), self.id)
    }

    pub(crate) fn op_bytes(&self) -> usize {
        self.writes_per_op * self.write_bytes
    }
}

/// Ids that earlier versions used for pg's O_DIRECT rows, and today's id of the same row
/// (`--only` still takes them; fsync.csv of those runs carries them). Until then
/// `open_datasync`/`open_sync` named the buffered rows, now `*_buffered`.
pub const RENAMED_IDS: [(&str, &str); 2] = [
    ("open_datasync_direct", "open_datasync"),
    ("open_sync_direct", "open_sync"),
];

/// Every test, in the order they run (pg_test_fsync's order, our extra rows beside theirs).
pub fn all_tests() -> Vec<TestSpec> {
    use Kind::*;
    let mut v = vec![];
    for (group, writes) in [(Group::OneWrite, 1), (Group::TwoWrites, 2)] {
        // pg_test_fsync's rows first, in its order (its open_datasync and open_sync open
        // with O_DIRECT: `open_direct()`), then ours. Its fsync_writethrough is n/a on
        // Linux: the table prints pg's n/a line for it.
        let rows: [(&str, &str, &str, Option<&str>, Kind); 7] = [
            (
                "open_datasync",
                "open_datasync",
                "O_DIRECT|O_DSYNC write",
                Some("open_datasync"),
                SyncOnWrite {
                    direct: true,
                    flag: SyncFlag::Dsync,
                },
            ),
            (
                "fdatasync",
                "fdatasync",
                "write, fdatasync",
                Some("fdatasync"),
                ThenSync {
                    direct: false,
                    call: SyncCall::Fdatasync,
                },
            ),
            (
                "fsync",
                "fsync",
                "write, fsync",
                Some("fsync"),
                ThenSync {
                    direct: false,
                    call: SyncCall::Fsync,
                },
            ),
            (
                "open_sync",
                "open_sync",
                "O_DIRECT|O_SYNC write",
                Some("open_sync"),
                SyncOnWrite {
                    direct: true,
                    flag: SyncFlag::Sync,
                },
            ),
            (
                "open_datasync_buffered",
                "open_datasync (no O_DIRECT)",
                "O_DSYNC write",
                None,
                SyncOnWrite {
                    direct: false,
                    flag: SyncFlag::Dsync,
                },
            ),
            (
                "direct_fdatasync",
                "fdatasync (O_DIRECT write)",
                "O_DIRECT write, fdatasync",
                None,
                ThenSync {
                    direct: true,
                    call: SyncCall::Fdatasync,
                },
            ),
            (
                "open_sync_buffered",
                "open_sync (no O_DIRECT)",
                "O_SYNC write",
                None,
                SyncOnWrite {
                    direct: false,
                    flag: SyncFlag::Sync,
                },
            ),
        ];
        for (id, name, how, pg_label, kind) in rows {
            v.push(TestSpec {
                group,
                id,
                name,
                how,
                pg_label,
                kind,
                writes_per_op: writes,
                write_bytes: XLOG_BLCKSZ,
            });
        }
    }
    let sizes: [(&str, &str, &str, usize); 5] = [
        ("1x16k", "1 x 16 KiB", " 1 * 16kB open_sync write", 16),
        ("2x8k", "2 x 8 KiB", " 2 *  8kB open_sync writes", 8),
        ("4x4k", "4 x 4 KiB", " 4 *  4kB open_sync writes", 4),
        ("8x2k", "8 x 2 KiB", " 8 *  2kB open_sync writes", 2),
        ("16x1k", "16 x 1 KiB", "16 *  1kB open_sync writes", 1),
    ];
    for (id, name, pg, kib) in sizes {
        v.push(TestSpec {
            group: Group::OpenSyncSizes,
            id,
            name,
            how: "O_DIRECT|O_SYNC writes",
            pg_label: Some(pg),
            kind: SyncOnWrite {
                direct: true,
                flag: SyncFlag::Sync,
            },
            writes_per_op: 16 / kib,
            write_bytes: kib << 10,
        });
    }
    v.push(TestSpec {
        group: Group::OtherFd,
        id: "write_fsync_close",
        name: "write, fsync, close",
        how: "open,write,fsync,close,open,close",
        pg_label: Some("write, fsync, close"),
        kind: WriteFsyncClose,
        writes_per_op: 1,
        write_bytes: XLOG_BLCKSZ,
    });
    v.push(TestSpec {
        group: Group::OtherFd,
        id: "write_close_fsync",
        name: "write, close, fsync",
        how: "open,write,close,open,fsync,close",
        pg_label: Some("write, close, fsync"),
        kind: WriteCloseFsync,
        writes_per_op: 1,
        write_bytes: XLOG_BLCKSZ,
    });
    v.push(TestSpec {
        group: Group::NoSync,
        id: "write",
        name: "write",
        how: "write, no sync",
        pg_label: Some("write"),
        kind: NoSync,
        writes_per_op: 1,
        write_bytes: XLOG_BLCKSZ,
    });
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_list_has_pg_test_fsyncs_rows_and_ours() {
        let t = all_tests();
        assert_eq!(t.len(), 22);
        let pg: Vec<_> = t.iter().filter(|s| s.pg_label.is_some()).collect();
        assert_eq!(
            pg.len(),
            4 + 4 + 5 + 2 + 1,
            "pg's rows, without fsync_writethrough"
        );
        let mut ids: Vec<_> = t.iter().map(|s| s.full_id()).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), t.len(), "ids are unique");
        // A row with pg's name does what pg's row of that name does (open_direct for the
        // open_* methods), and pg's rows come first in its order.
        for g in [Group::OneWrite, Group::TwoWrites] {
            let names: Vec<_> = t.iter().filter(|s| s.group == g).map(|s| s.id).collect();
            assert_eq!(
                names[..4],
                ["open_datasync", "fdatasync", "fsync", "open_sync"]
            );
            for s in t.iter().filter(|s| s.group == g && s.pg_label.is_some()) {
                assert_eq!(s.pg_label, Some(s.id));
                let direct = s.id.starts_with("open_");
                assert_eq!(s.kind.direct(), direct, "{}", s.id);
            }
        }
        for s in t.iter().filter(|s| s.group == Group::OpenSyncSizes) {
            assert_eq!(s.op_bytes(), 16 << 10, "{}", s.id);
        }
    }
}
