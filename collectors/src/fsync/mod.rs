//! The fsync timer: pg_test_fsync's questions ("which way of making a write durable is
//! fastest here, and is fsync honoured?") answered with latency percentiles, not only means.
//!
//! Method, as PostgreSQL 15's `pg_test_fsync` does it (read from `strace -f` of
//! pg_test_fsync 15.18, not assumed):
//! - a 16 MiB file (`XLOG_SEG_SIZE`) is created in the directory under test, filled with one
//!   16 MiB write, fsynced and closed before any test;
//! - each test opens the file (without O_CREAT), starts its timer, and repeats one *op* until
//!   its time is up; an op is its writes plus its sync;
//! - writes go to FIXED offsets: write `w` of an op goes to `w * write_bytes` (so an op of one
//!   8 KiB write rewrites block 0 every time; two writes rewrite blocks 0 and 1). pg_test_fsync
//!   does not walk through the file. [`Offsets::Cycle`] does walk (as a WAL segment fills):
//!   op `k` starts at `k * op_bytes` modulo 16 MiB;
//! - pg's `open_datasync` and `open_sync` rows (and its whole 16 KiB size comparison) open with
//!   O_DIRECT as well as O_DSYNC/O_SYNC; its `fdatasync`/`fsync` rows use a buffered descriptor;
//!   its "non-sync'ed" row is one descriptor and `pwrite` at offset 0, no open per op;
//! - the two "non-write descriptor" rows do open/write/fsync/close/open/close and
//!   open/write/close/open/fsync/close per op.
//!
//! What we add: every op is timed on `CLOCK_MONOTONIC` into an HdrHistogram (ns), so each
//! test reports p50/p99/p99.9/max as well as ops/s; for an op that is writes then a separate
//! sync call, the sync call alone is timed too. Buffered O_DSYNC/O_SYNC and O_DIRECT +
//! fdatasync rows sit beside pg's. No `sync_file_range`: it makes nothing durable.
//!
//! Units: latencies in ns (histograms, [`LatencyNs`]); times `*_t_ns` on the run's clock.
//! Must stay true: the file is ours (created with O_EXCL) and is removed when [`TestFile`]
//! drops, whatever happened; a test the file system refuses is [`Outcome::NotAvailable`],
//! never an abort of the others.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::clock::Clock;
use crate::directio::{self, AlignedBuf, LatencyNs, OpenFlags, SyncFlag};
use crate::durable;

mod spec;
pub use spec::*;

/// Errors preparing the test file. Each keeps the path and says what to do.
#[derive(Debug, thiserror::Error)]
pub enum FsyncError {
    #[error("{path} already exists: a diskpulse fsync run with the same pid left it behind; remove it and retry")]
    Exists { path: String },
    #[error("cannot create {path}: {source}")]
    Create {
        path: String,
        source: std::io::Error,
    },
    #[error("no space left for the 16 MiB test file {path}: free some space in its directory")]
    NoSpace { path: String },
    #[error("cannot fill {path} ({what}): {source}")]
    Fill {
        path: String,
        what: &'static str,
        source: std::io::Error,
    },
    #[error("interrupted while preparing {path}")]
    Interrupted { path: String },
}

/// The 16 MiB file the tests write to. Removed on drop.
pub struct TestFile {
    path: PathBuf,
    /// The bytes every write writes: the start of the fill pattern, aligned for O_DIRECT.
    buf: AlignedBuf,
    /// The file size (16 MiB, smaller only in unit tests).
    bytes: usize,
}

impl TestFile {
    /// Creates `dir/.diskpulse-fsync.<pid>` with O_EXCL, fills it with one 16 MiB write of a
    /// non-zero pattern, fsyncs and closes it (as pg_test_fsync does before its first test).
    pub fn create(dir: &Path, stop: &AtomicBool) -> Result<TestFile, FsyncError> {
        Self::create_sized(dir, FILE_BYTES, stop)
    }

    /// Creates the test file at `path` (pg_test_fsync's `-f`), also with O_EXCL: an
    /// existing file is [`FsyncError::Exists`], never overwritten (pg_test_fsync would
    /// overwrite it and delete it at the end).
    pub fn create_at(path: &Path, stop: &AtomicBool) -> Result<TestFile, FsyncError> {
        Self::create_path(path.to_path_buf(), FILE_BYTES, stop)
    }

    fn create_sized(dir: &Path, bytes: usize, stop: &AtomicBool) -> Result<TestFile, FsyncError> {
        let path = dir.join(format!(".diskpulse-fsync.{}", std::process::id()));
        Self::create_path(path, bytes, stop)
    }

    fn create_path(path: PathBuf, bytes: usize, stop: &AtomicBool) -> Result<TestFile, FsyncError> {
        assert!(bytes >= SIZES_OP_BYTES && bytes.is_multiple_of(SIZES_OP_BYTES));
        let p = || path.display().to_string();
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|source| match source.kind() {
                std::io::ErrorKind::AlreadyExists => FsyncError::Exists { path: p() },
                _ => FsyncError::Create { path: p(), source },
            })?;
        // From here on the file is ours: dropping `tf` removes it, also on error.
        let mut tf = TestFile {
            path: path.clone(),
            buf: AlignedBuf::new(SIZES_OP_BYTES),
            bytes,
        };
        let fill = AlignedBuf::new(bytes);
        let fill_err = |what, source: std::io::Error| {
            if source.raw_os_error() == Some(libc::ENOSPC)
                || source.raw_os_error() == Some(libc::EDQUOT)
            {
                FsyncError::NoSpace { path: p() }
            } else {
                FsyncError::Fill {
                    path: p(),
                    what,
                    source,
                }
            }
        };
        f.write_all_at(fill.as_slice(), 0)
            .map_err(|e| fill_err("write", e))?;
        if stop.load(Ordering::Relaxed) {
            return Err(FsyncError::Interrupted { path: p() });
        }
        f.sync_all().map_err(|e| fill_err("fsync", e))?;
        drop(f);
        // The writes carry the same bytes the fill put at the start of the file.
        tf.buf
            .as_mut_slice()
            .copy_from_slice(&fill.as_slice()[..SIZES_OP_BYTES]);
        Ok(tf)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn offset(&self, spec: &TestSpec, offsets: Offsets, op: u64, write: usize) -> u64 {
        let w = (write * spec.write_bytes) as u64;
        match offsets {
            Offsets::Fixed => w,
            Offsets::Cycle => (op * spec.op_bytes() as u64) % self.bytes as u64 + w,
        }
    }
}

impl Drop for TestFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// How the tests run.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// How long each test repeats its op (pg_test_fsync's `-s`).
    pub per_test: Duration,
    pub offsets: Offsets,
}

/// What one test measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Measured {
    /// Run-clock time just before the first op started.
    pub start_t_ns: u64,
    /// Run-clock time just after the last op ended.
    pub end_t_ns: u64,
    pub ops: u64,
    /// Whole op (writes + sync, and opens/closes where the op has them), ns.
    pub lat: LatencyNs,
    /// The sync call alone, ns, for ops that have one.
    pub sync_lat: Option<LatencyNs>,
    /// Stopped early by the stop flag (Ctrl-C).
    pub cut_short: bool,
}

impl Measured {
    pub fn secs(&self) -> f64 {
        self.end_t_ns.saturating_sub(self.start_t_ns) as f64 / 1e9
    }

    /// ops / seconds from the first op's start to the last op's end (pg's ops/sec).
    pub fn ops_per_s(&self) -> f64 {
        let s = self.secs();
        if s > 0.0 {
            self.ops as f64 / s
        } else {
            0.0
        }
    }
}

/// The outcome of one test.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Ran(Measured),
    /// The file system or device refuses this way of writing (O_DIRECT on ramfs: EINVAL).
    NotAvailable {
        reason: String,
    },
    /// An error mid-test (EIO, ENOSPC, ...); what was measured before it is kept.
    Failed {
        reason: String,
        partial: Option<Measured>,
    },
    /// Not started: the run was interrupted before it.
    NotRun,
}

/// `EINVAL (Invalid argument)` for an errno, or the error's text.
fn errno_text(e: &std::io::Error) -> String {
    let name = match e.raw_os_error() {
        Some(libc::EINVAL) => "EINVAL",
        Some(libc::ENOSPC) => "ENOSPC",
        Some(libc::EDQUOT) => "EDQUOT",
        Some(libc::EIO) => "EIO",
        Some(libc::EROFS) => "EROFS",
        Some(libc::EACCES) => "EACCES",
        Some(libc::EPERM) => "EPERM",
        Some(libc::EOPNOTSUPP) => "EOPNOTSUPP",
        Some(libc::ENOENT) => "ENOENT",
        Some(libc::EFBIG) => "EFBIG",
        Some(libc::EBADF) => "EBADF",
        _ => return e.to_string(),
    };
    let text = e.to_string();
    let text = text.split(" (os error").next().unwrap_or(&text);
    format!("{name} ({text})")
}

/// Why an op failed: the step and the error.
struct OpError {
    step: &'static str,
    err: std::io::Error,
    /// A write of this many bytes with O_DIRECT got EINVAL (alignment the device refuses).
    direct_write_bytes: Option<usize>,
}

fn open_rw(path: &Path, direct: bool, sync: SyncFlag) -> std::io::Result<File> {
    directio::open(
        path,
        OpenFlags {
            read: true,
            write: true,
            create: false,
            direct,
            sync,
        },
    )
}

/// The no-sync row times one op in this many (its percentiles are of that sample; ops/s
/// counts every op): at ~1 us an op, a clock read and a histogram record per op were ~5% of
/// it, which pg_test_fsync does not pay (decision 0099). 2 s of 300k-800k ops/s still
/// leave 37k-100k timed ops.
pub const NO_SYNC_TIMED_EVERY: u64 = 16;

/// Runs one test for `opts.per_test` (or until `stop`), returning what it measured.
pub fn run_test(
    file: &TestFile,
    spec: &TestSpec,
    opts: &Options,
    stop: &AtomicBool,
    clock: &Clock,
) -> Outcome {
    if stop.load(Ordering::Relaxed) {
        return Outcome::NotRun;
    }
    let direct = spec.kind.direct();
    // The descriptor of single-descriptor tests is opened before the timer starts, as pg does.
    let fd = match spec.kind {
        Kind::SyncOnWrite { direct, flag } => Some(open_rw(&file.path, direct, flag)),
        Kind::ThenSync { direct, .. } => Some(open_rw(&file.path, direct, SyncFlag::None)),
        Kind::NoSync => Some(open_rw(&file.path, false, SyncFlag::None)),
        Kind::WriteFsyncClose | Kind::WriteCloseFsync => None,
    };
    let fd = match fd.transpose() {
        Ok(f) => f,
        Err(e) if direct && e.raw_os_error() == Some(libc::EINVAL) => {
            return Outcome::NotAvailable {
                reason: format!("{}: this file system refuses O_DIRECT", errno_text(&e)),
            }
        }
        Err(e) => {
            return Outcome::Failed {
                reason: format!("open: {}", errno_text(&e)),
                partial: None,
            }
        }
    };
    let buf = &file.buf.as_slice()[..spec.write_bytes];
    let limits = durable::Limits {
        duration: opts.per_test,
        warmup_ops: 0,
        max_ops: u64::MAX,
    };
    let sync_ends_op = matches!(spec.kind, Kind::ThenSync { .. });
    let (timed, result) = if spec.kind == Kind::NoSync {
        // ~1 us ops: one in NO_SYNC_TIMED_EVERY is timed, all are counted (decision 0099).
        durable::run_sampled(&limits, NO_SYNC_TIMED_EVERY, stop, |op| {
            one_op(file, spec, opts, fd.as_ref(), buf, op).map(|_| ())
        })
    } else {
        durable::run(
            &limits,
            spec.kind.has_sync_call(),
            sync_ends_op,
            stop,
            |op| one_op(file, spec, opts, fd.as_ref(), buf, op),
        )
    };
    let op = timed.attempted;
    let finish = |t: &durable::Timed| {
        let first = t.first_ns?;
        let z = clock.zero_monotonic_ns();
        Some(Measured {
            start_t_ns: first.saturating_sub(z),
            end_t_ns: t.last_ns.saturating_sub(z),
            ops: t.ops,
            lat: t.latency(),
            sync_lat: t.sync_latency(),
            cut_short: t.stopped,
        })
    };
    match result {
        Ok(()) => finish(&timed).map(Outcome::Ran).unwrap_or(Outcome::NotRun),
        Err(e) => {
            if op == 0 && e.err.raw_os_error() == Some(libc::EINVAL) {
                if let Some(bytes) = e.direct_write_bytes {
                    return Outcome::NotAvailable {
                        reason: format!(
                            "{} on a {bytes}-byte O_DIRECT write: smaller than or not aligned to what the device or file system takes",
                            errno_text(&e.err)
                        ),
                    };
                }
            }
            Outcome::Failed {
                reason: format!("{}: {}", e.step, errno_text(&e.err)),
                partial: finish(&timed),
            }
        }
    }
}

/// One op; returns the sync call's (start, end) when it has one.
#[inline]
fn one_op(
    file: &TestFile,
    spec: &TestSpec,
    opts: &Options,
    fd: Option<&File>,
    buf: &[u8],
    op: u64,
) -> Result<Option<(u64, u64)>, OpError> {
    let wr = |f: &File, w: usize, direct: bool| {
        durable::write_all_at(f, buf, file.offset(spec, opts.offsets, op, w)).map_err(|err| {
            OpError {
                step: "write",
                direct_write_bytes: direct.then_some(buf.len()),
                err,
            }
        })
    };
    let open = |step| {
        open_rw(&file.path, false, SyncFlag::None).map_err(|err| OpError {
            step,
            err,
            direct_write_bytes: None,
        })
    };
    let sync = |f: &File, call: SyncCall| {
        durable::timed_call(f, |f| call.call(f)).map_err(|err| OpError {
            step: call.name(),
            err,
            direct_write_bytes: None,
        })
    };
    match spec.kind {
        Kind::SyncOnWrite { direct, .. } => {
            let f = fd.expect("opened");
            for w in 0..spec.writes_per_op {
                wr(f, w, direct)?;
            }
            Ok(None)
        }
        Kind::NoSync => {
            let f = fd.expect("opened");
            for w in 0..spec.writes_per_op {
                wr(f, w, false)?;
            }
            Ok(None)
        }
        Kind::ThenSync { direct, call } => {
            let f = fd.expect("opened");
            for w in 0..spec.writes_per_op {
                wr(f, w, direct)?;
            }
            sync(f, call).map(Some)
        }
        Kind::WriteFsyncClose => {
            let f = open("open")?;
            wr(&f, 0, false)?;
            let s = sync(&f, SyncCall::Fsync)?;
            drop(f);
            // Open and close again, so both rows of the pair do the same opens (as pg does).
            drop(open("reopen")?);
            Ok(Some(s))
        }
        Kind::WriteCloseFsync => {
            let f = open("open")?;
            wr(&f, 0, false)?;
            drop(f);
            let g = open("reopen")?;
            let s = sync(&g, SyncCall::Fsync)?;
            drop(g);
            Ok(Some(s))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quick() -> Options {
        Options {
            per_test: Duration::from_millis(30),
            offsets: Offsets::Fixed,
        }
    }

    #[test]
    fn offsets_fixed_like_pg_or_cycling_through_the_file() {
        let stop = AtomicBool::new(false);
        let d = tempfile::tempdir_in("/var/tmp").unwrap();
        let f = TestFile::create_sized(d.path(), 64 << 10, &stop).unwrap();
        let two = all_tests()
            .into_iter()
            .find(|s| s.full_id() == "two_8k.fdatasync")
            .unwrap();
        assert_eq!(f.offset(&two, Offsets::Fixed, 7, 1), 8192);
        assert_eq!(f.offset(&two, Offsets::Cycle, 0, 1), 8192);
        assert_eq!(f.offset(&two, Offsets::Cycle, 1, 0), 16384);
        // 64 KiB file, 16 KiB ops: op 4 wraps to the start.
        assert_eq!(f.offset(&two, Offsets::Cycle, 4, 1), 8192);
    }

    #[test]
    fn every_test_runs_and_the_file_is_removed() {
        let stop = AtomicBool::new(false);
        let d = tempfile::tempdir_in("/var/tmp").unwrap();
        let clock = Clock::start();
        let path;
        {
            let f = TestFile::create_sized(d.path(), 1 << 20, &stop).unwrap();
            path = f.path().to_path_buf();
            assert_eq!(std::fs::metadata(&path).unwrap().len(), 1 << 20);
            for spec in all_tests() {
                match run_test(&f, &spec, &quick(), &stop, &clock) {
                    Outcome::Ran(m) => {
                        assert!(m.ops > 0, "{}", spec.full_id());
                        if spec.kind == Kind::NoSync {
                            // One op in 16 timed (op 0, 16, ...), every op counted.
                            assert_eq!(m.lat.count, m.ops.div_ceil(NO_SYNC_TIMED_EVERY));
                        } else {
                            assert_eq!(m.lat.count, m.ops);
                        }
                        assert_eq!(m.sync_lat.is_some(), spec.kind.has_sync_call());
                        if let Some(s) = &m.sync_lat {
                            assert!(s.max <= m.lat.max, "{}: sync within op", spec.full_id());
                        }
                        assert!(m.end_t_ns > m.start_t_ns);
                        assert!(!m.cut_short);
                    }
                    // /var/tmp may sit on something without O_DIRECT; only those rows may say so.
                    Outcome::NotAvailable { reason } => {
                        assert!(spec.kind.direct(), "{}: {reason}", spec.full_id())
                    }
                    o => panic!("{}: {o:?}", spec.full_id()),
                }
            }
        }
        assert!(!path.exists(), "dropping the TestFile removes it");
    }

    #[test]
    fn a_raised_stop_flag_means_not_run() {
        let stop = AtomicBool::new(false);
        let d = tempfile::tempdir_in("/var/tmp").unwrap();
        let f = TestFile::create_sized(d.path(), 1 << 20, &stop).unwrap();
        stop.store(true, Ordering::Relaxed);
        let spec = &all_tests()[2];
        assert_eq!(
            run_test(&f, spec, &quick(), &stop, &Clock::start()),
            Outcome::NotRun
        );
    }

    #[test]
    fn a_second_file_in_the_same_dir_is_refused_not_clobbered() {
        let stop = AtomicBool::new(false);
        let d = tempfile::tempdir_in("/var/tmp").unwrap();
        let _a = TestFile::create_sized(d.path(), 64 << 10, &stop).unwrap();
        let e = TestFile::create_sized(d.path(), 64 << 10, &stop)
            .err()
            .unwrap();
        assert!(matches!(e, FsyncError::Exists { .. }), "{e}");
        assert!(_a.path().exists(), "the first file is untouched");
    }

    #[test]
    fn errno_names() {
        let e = std::io::Error::from_raw_os_error(libc::EINVAL);
        assert_eq!(errno_text(&e), "EINVAL (Invalid argument)");
    }
}
