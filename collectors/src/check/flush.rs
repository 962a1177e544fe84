//! The empirical half of `check`: what a durable write costs on this stack, measured.
//!
//! Three ways to write 4 KiB at queue depth 1, each for a fixed time on the same
//! preallocated region (sequential slots, wrapping), latency per operation into an
//! HdrHistogram, timed by the loop `diskpulse fsync` uses ([`crate::durable`]):
//! - `O_DIRECT`: the write as the device acknowledges it (from its cache, if it has one);
//! - `O_DIRECT|O_DSYNC`: the same write made durable: a FUA write where the device
//!   supports FUA (`queue/fua` 1), else the write plus a cache flush;
//! - buffered `write` + `fdatasync`: what a broker's fsync does.
//!
//! The difference between the first two is the flush cost. A "write back" device whose
//! plain writes cost as much as durable ones has its cache off or unused (the reference
//! study's RAID 1 LUN); more durable writes per second than a spinning disk can turn
//! (~120/s at 7,200 rpm: a sequential rewrite waits a revolution) is a cache that
//! acknowledges flushes early.
//!
//! Safety: in a directory we create our own file (`O_EXCL`) and remove it, also on error
//! and on interruption. On a block device we write only when the caller decided it may
//! (`--allow-destructive`), and open it with `O_EXCL`, which the kernel refuses while it
//! is mounted or held by anything.

use std::fs::File;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use crate::directio::{AlignedBuf, LatencyNs};
use crate::durable;

/// Where to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A temporary file we create in this directory and remove afterwards.
    TempFileIn(PathBuf),
    /// A whole block device (destroys what is in its first `region_bytes`).
    BlockDevice(PathBuf),
}

/// One way of writing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Direct,
    DirectDsync,
    WriteFdatasync,
}

impl Mode {
    pub const ALL: [Mode; 3] = [Mode::Direct, Mode::DirectDsync, Mode::WriteFdatasync];

    /// As printed for humans.
    pub fn label(&self) -> &'static str {
        match self {
            Mode::Direct => "O_DIRECT",
            Mode::DirectDsync => "O_DIRECT|O_DSYNC",
            Mode::WriteFdatasync => "write+fdatasync",
        }
    }

    /// As a JSON key.
    pub fn key(&self) -> &'static str {
        match self {
            Mode::Direct => "direct",
            Mode::DirectDsync => "direct_dsync",
            Mode::WriteFdatasync => "write_fdatasync",
        }
    }
}

/// How long and how much.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    pub block_bytes: usize,
    /// Size of the region rewritten (the temporary file's size).
    pub region_bytes: u64,
    /// Measuring time per mode (after the warm-up).
    pub time_per_mode: Duration,
    /// Stop a mode early after this many operations.
    pub max_ops: u64,
    /// Operations per mode before measuring (not recorded).
    pub warmup_ops: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            block_bytes: 4096,
            region_bytes: 4 << 20,
            time_per_mode: Duration::from_secs(1),
            max_ops: 50_000,
            warmup_ops: 8,
        }
    }
}

/// One mode's result.
#[derive(Debug, Clone)]
pub struct ModeResult {
    pub mode: Mode,
    pub ops: u64,
    pub elapsed_ns: u64,
    /// Per-operation latency (write, or write + fdatasync), ns.
    pub lat: LatencyNs,
}

impl ModeResult {
    pub fn ops_per_s(&self) -> f64 {
        if self.elapsed_ns == 0 {
            0.0
        } else {
            self.ops as f64 * 1e9 / self.elapsed_ns as f64
        }
    }
}

/// All modes' results.
#[derive(Debug, Clone)]
pub struct Results {
    /// The file or device written.
    pub written: PathBuf,
    pub block_bytes: usize,
    pub modes: Vec<ModeResult>,
}

impl Results {
    pub fn get(&self, m: Mode) -> Option<&ModeResult> {
        self.modes.iter().find(|r| r.mode == m)
    }
}

/// Errors of the empirical tests; each keeps the path and what was being done.
#[derive(Debug, thiserror::Error)]
pub enum FlushError {
    #[error("cannot create a test file in {dir}: {source}")]
    Create { dir: String, source: std::io::Error },
    #[error("cannot prepare {path}: {source}")]
    Prepare {
        path: String,
        source: std::io::Error,
    },
    #[error("cannot open {path} for {mode} writes: {source}")]
    Open {
        path: String,
        mode: &'static str,
        source: std::io::Error,
    },
    #[error("{mode} write to {path} failed: {source}")]
    Write {
        path: String,
        mode: &'static str,
        source: std::io::Error,
    },
    #[error("{path} has {bytes} bytes; the test needs {need}")]
    TooSmall { path: String, bytes: u64, need: u64 },
    #[error("interrupted")]
    Interrupted,
}

impl FlushError {
    /// The OS error number, when there is one (ENOSPC, EROFS, EINVAL, EBUSY, ...).
    pub fn errno(&self) -> Option<i32> {
        match self {
            FlushError::Create { source, .. }
            | FlushError::Prepare { source, .. }
            | FlushError::Open { source, .. }
            | FlushError::Write { source, .. } => source.raw_os_error(),
            _ => None,
        }
    }
}

/// Removes the temporary file when dropped (also on error and interruption).
struct TempFile(PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn open_mode(path: &Path, blockdev: bool, mode: Mode) -> std::io::Result<File> {
    let flags = match mode {
        Mode::Direct => libc::O_DIRECT,
        Mode::DirectDsync => libc::O_DIRECT | libc::O_DSYNC,
        Mode::WriteFdatasync => 0,
    };
    if blockdev {
        return crate::gate::open_exclusive(path, flags);
    }
    std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(flags)
        .open(path)
}

/// Creates `<dir>/.diskpulse-check-<pid>-<n>` with O_EXCL and fills `bytes` of it with
/// data (written and fsynced, so the measured writes are overwrites of allocated blocks,
/// not extent allocations).
fn create_temp(dir: &Path, bytes: u64, block: &AlignedBuf) -> Result<TempFile, FlushError> {
    let name = format!(
        ".diskpulse-check-{}-{}",
        std::process::id(),
        crate::clock::monotonic_ns() % 1_000_000_007
    );
    let path = dir.join(name);
    let f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .map_err(|source| FlushError::Create {
            dir: dir.display().to_string(),
            source,
        })?;
    let guard = TempFile(path.clone());
    let prep = |source| FlushError::Prepare {
        path: path.display().to_string(),
        source,
    };
    let mut off = 0u64;
    while off < bytes {
        f.write_all_at(block.as_slice(), off).map_err(prep)?;
        off += block.len() as u64;
    }
    f.sync_all().map_err(prep)?;
    Ok(guard)
}

/// Runs every mode on `target`. `stop` (set by Ctrl-C) ends it with `Interrupted`.
pub fn run(target: &Target, cfg: &Config, stop: &AtomicBool) -> Result<Results, FlushError> {
    let buf = AlignedBuf::new(cfg.block_bytes);
    let (path, blockdev, _guard) = match target {
        Target::TempFileIn(dir) => {
            let g = create_temp(dir, cfg.region_bytes, &buf)?;
            (g.0.clone(), false, Some(g))
        }
        Target::BlockDevice(dev) => {
            use std::io::{Seek, SeekFrom};
            let mut f = File::open(dev).map_err(|source| FlushError::Prepare {
                path: dev.display().to_string(),
                source,
            })?;
            let bytes = f
                .seek(SeekFrom::End(0))
                .map_err(|source| FlushError::Prepare {
                    path: dev.display().to_string(),
                    source,
                })?;
            if bytes < cfg.region_bytes {
                return Err(FlushError::TooSmall {
                    path: dev.display().to_string(),
                    bytes,
                    need: cfg.region_bytes,
                });
            }
            (dev.clone(), true, None)
        }
    };
    let slots = (cfg.region_bytes / buf.len() as u64).max(1);
    let mut modes = vec![];
    for mode in Mode::ALL {
        let f = open_mode(&path, blockdev, mode).map_err(|source| FlushError::Open {
            path: path.display().to_string(),
            mode: mode.label(),
            source,
        })?;
        let werr = |source| FlushError::Write {
            path: path.display().to_string(),
            mode: mode.label(),
            source,
        };
        let limits = durable::Limits {
            duration: cfg.time_per_mode,
            warmup_ops: cfg.warmup_ops,
            max_ops: cfg.max_ops,
        };
        // Sequential slots, wrapping; the fdatasync ends the op.
        let (t, r) = durable::run(&limits, false, true, stop, |i| {
            let off = (i % slots) * buf.len() as u64;
            durable::write_all_at(&f, buf.as_slice(), off)?;
            if mode == Mode::WriteFdatasync {
                return durable::timed_call(&f, File::sync_data).map(Some);
            }
            Ok(None)
        });
        r.map_err(werr)?;
        if t.stopped {
            return Err(FlushError::Interrupted);
        }
        modes.push(ModeResult {
            mode,
            ops: t.ops,
            elapsed_ns: t.elapsed_ns(),
            lat: t.latency(),
        });
    }
    Ok(Results {
        written: path,
        block_bytes: buf.len(),
        modes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measures_every_mode_and_leaves_no_file() {
        let d = tempfile::tempdir_in("/var/tmp").unwrap();
        let cfg = Config {
            time_per_mode: Duration::from_millis(100),
            region_bytes: 256 << 10,
            ..Default::default()
        };
        let r = run(
            &Target::TempFileIn(d.path().to_path_buf()),
            &cfg,
            &AtomicBool::new(false),
        )
        .unwrap();
        assert_eq!(r.modes.len(), 3);
        for m in &r.modes {
            assert!(m.ops > 0, "{m:?}");
            assert_eq!(m.lat.count, m.ops);
            assert!(m.ops_per_s() > 0.0);
        }
        assert!(!r.written.exists(), "the test file must be removed");
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
    }

    #[test]
    fn errors_say_where_and_the_file_is_removed_on_interruption() {
        let e = run(
            &Target::TempFileIn(PathBuf::from("/nonexistent-dir")),
            &Config::default(),
            &AtomicBool::new(false),
        )
        .unwrap_err();
        assert!(e.to_string().contains("/nonexistent-dir"), "{e}");
        assert_eq!(e.errno(), Some(libc::ENOENT));

        let d = tempfile::tempdir_in("/var/tmp").unwrap();
        let e = run(
            &Target::TempFileIn(d.path().to_path_buf()),
            &Config::default(),
            &AtomicBool::new(true),
        )
        .unwrap_err();
        assert!(matches!(e, FlushError::Interrupted));
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
    }
}
