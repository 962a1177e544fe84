//! Probe errors: each says what happened to which file and how to fix it, in one line.

use std::path::PathBuf;

/// Why a probe could not start or did not finish.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// Refused before touching anything (safety): bad target, mounted device, signature.
    #[error("{path}: {why}")]
    Refused { path: PathBuf, why: String },

    #[error("no space left on the file system holding {path} (ENOSPC) while {during} after {done_mib} MiB: free space there or use a smaller --size (now {size_mib} MiB)")]
    NoSpace {
        path: PathBuf,
        during: &'static str,
        done_mib: u64,
        size_mib: u64,
    },

    #[error("{path} is on a read-only file system (EROFS): remount it read-write, or probe an existing file with a read-only job (--rw read|randread)")]
    ReadOnly { path: PathBuf },

    #[error("{path} is on {fstype}, which refuses O_DIRECT (EINVAL at open): put the file on a disk-backed file system, or use --direct 0 (page cache, not the device)")]
    DirectOpen { path: PathBuf, fstype: String },

    #[error("{path}: the kernel refused a direct {op} of {len} bytes at offset {offset} (EINVAL): with O_DIRECT, --bs and offsets must be multiples of the device's logical block size{lbs}; use --bs 4k (or a multiple of it), or --direct 0")]
    DirectIo {
        path: PathBuf,
        op: &'static str,
        len: u64,
        offset: u64,
        /// ", 512 bytes here (/sys/...)" or empty when unknown.
        lbs: String,
    },

    #[error("{path}: {op} failed: {source}")]
    Io {
        path: PathBuf,
        op: String,
        source: std::io::Error,
    },

    /// fio's `ratemin`/`rate_iops_min` not met over a `rate_cycle` (fio's check_min_rate).
    #[error("{path}: {what} not met, got {got} over the last {cycle_ms} ms (fio's rate_cycle); the job stopped, as fio stops it: lower the minimum or find what slowed the device")]
    MinRate {
        path: PathBuf,
        what: String,
        got: String,
        cycle_ms: u64,
    },

    /// fio's `latency_target` missed at queue depth 1 with `latency_percentile=100`
    /// (fio's lat_fatal: ETIMEDOUT, "max latency exceeded").
    #[error("{path}: latency of {lat_ns} nsec exceeds specified max ({target_ns} nsec) at queue depth 1 (fio's latency_target, error 110 ETIMEDOUT); the job stopped, as fio stops it: raise latency_target, or set latency_percentile below 100")]
    LatencyTarget {
        path: PathBuf,
        lat_ns: u64,
        target_ns: u64,
    },

    #[error("io_uring is not available here (io_uring_setup: {source}; {hint}); use --ioengine sync (queue depth 1) or allow io_uring")]
    UringUnavailable {
        source: std::io::Error,
        hint: &'static str,
    },

    // P3: verify
    /// A block read back is not what was written (fio's EILSEQ, 84 in the JSON).
    #[error("{path}: verify failed at offset {offset}, length {len}: {what} (fio's error 84, EILSEQ: the data read back is not what the job wrote; the lines above say how)")]
    Verify {
        path: PathBuf,
        offset: u64,
        len: u64,
        what: String,
    },
}

impl ProbeError {
    /// True for errors that are the user's input (exit code 2): nothing was written.
    pub fn is_refusal(&self) -> bool {
        matches!(self, ProbeError::Refused { .. })
    }
}

/// Why io_uring_setup may have failed, from its errno.
pub(crate) fn uring_hint(e: &std::io::Error) -> &'static str {
    match e.raw_os_error() {
        Some(libc::EPERM) => {
            "kernel.io_uring_disabled is 1 or 2, or a seccomp filter (container runtime) blocks it"
        }
        Some(libc::ENOSYS) => "the kernel was built without io_uring or a seccomp filter blocks it",
        Some(libc::ENOMEM) => "not enough locked memory (ulimit -l)",
        _ => "the kernel refused it",
    }
}
