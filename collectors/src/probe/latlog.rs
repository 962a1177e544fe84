//! Raw per-I/O completion latencies, fio's `--write_lat_log` shape: one file per job,
//! `PREFIX_clat.N.log` (N = job number from 1), one line per I/O completed after the
//! ramp, in completion order:
//!
//! ```text
//! time_ms, clat_ns, direction, bs, prio            (fio 3.33's default)
//! time_ms, clat_ns, direction, bs, offset, prio    (with log_offset, our --log-offset)
//! ```
//! - `time_ms`: when the I/O completed, whole milliseconds (truncated) since the probe's
//!   start (the moment its jobs were released; inside a recording the `probe_start`
//!   event gives it on the run clock), as fio's time since the job started;
//! - `clat_ns`: completion latency in ns, the value `clat` histograms hold;
//! - `direction`: 0 read, 1 write (2 would be trim, which the probe does not do);
//! - `bs`: the I/O's size in bytes; `offset`: its byte offset;
//! - `prio`: always 0 (no priority class, as fio without `log_prio`).
//!
//! fio also writes `_slat` and `_lat` files; we write `_clat` only. fsync/fdatasync
//! calls are not logged (as in fio's clat log).
//!
//! ## What must stay true
//! Logging must not slow the probe: the job thread formats each line with `itoa` into a
//! buffer allocated once (no allocation per I/O) and writes the buffer to the file when
//! it is nearly full (one `write` per ~40,000 lines of ~25 bytes) and at the end. A write error stops
//! logging and is reported when the job ends.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use super::ProbeError;

const BUF_BYTES: usize = 1 << 20;
/// Room for one line: 6 numbers of at most 20 digits and separators.
const LINE_MAX: usize = 160;

/// The path of job `job`'s (from 0) completion-latency log for `prefix`.
fn clat_path(prefix: &Path, job: u32) -> PathBuf {
    let mut s = prefix.as_os_str().to_os_string();
    s.push(format!("_clat.{}.log", job + 1));
    PathBuf::from(s)
}

/// One job's log.
pub(crate) struct LatLog {
    file: File,
    path: PathBuf,
    buf: Vec<u8>,
    offset: bool,
    start_ns: u64,
    meas_ns: u64,
    error: Option<std::io::Error>,
}

impl LatLog {
    /// Creates (truncates) job `job`'s file; fails with the path when it cannot.
    pub fn create(prefix: &Path, job: u32, offset: bool) -> Result<LatLog, ProbeError> {
        let path = clat_path(prefix, job);
        let file = File::create(&path).map_err(|source| ProbeError::Io {
            path: path.clone(),
            op: "creating the latency log (--write-lat-log)".into(),
            source,
        })?;
        Ok(LatLog {
            file,
            path,
            buf: Vec::with_capacity(BUF_BYTES),
            offset,
            start_ns: 0,
            meas_ns: 0,
            error: None,
        })
    }

    /// The probe's start (time 0 of the log) and the end of its ramp (I/Os that
    /// complete before it are not logged), both `CLOCK_MONOTONIC` ns.
    pub(crate) fn set_start(&mut self, start_ns: u64, meas_ns: u64) {
        self.start_ns = start_ns;
        self.meas_ns = meas_ns;
    }

    /// Logs one completed I/O.
    #[inline]
    pub fn io(&mut self, done_ns: u64, clat_ns: u64, dir: usize, bs: u64, offset: u64) {
        if done_ns < self.meas_ns {
            return;
        }
        if self.buf.len() + LINE_MAX > BUF_BYTES {
            self.spill();
        }
        let mut n = itoa::Buffer::new();
        let b = &mut self.buf;
        b.extend_from_slice(n.format((done_ns - self.start_ns) / 1_000_000).as_bytes());
        b.extend_from_slice(b", ");
        b.extend_from_slice(n.format(clat_ns).as_bytes());
        b.extend_from_slice(if dir == 0 { b", 0, " } else { b", 1, " });
        b.extend_from_slice(n.format(bs).as_bytes());
        if self.offset {
            b.extend_from_slice(b", ");
            b.extend_from_slice(n.format(offset).as_bytes());
        }
        b.extend_from_slice(b", 0\n");
    }

    #[cold]
    fn spill(&mut self) {
        if self.error.is_none() {
            if let Err(e) = self.file.write_all(&self.buf) {
                self.error = Some(e);
            }
        }
        self.buf.clear();
    }

    /// Writes what is left; the first write error, if any, with the file's name.
    pub fn finish(mut self) -> Result<(), ProbeError> {
        self.spill();
        match self.error.take() {
            None => Ok(()),
            Some(source) => Err(ProbeError::Io {
                path: self.path.clone(),
                op: "writing the latency log (--write-lat-log)".into(),
                source,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_have_fios_columns_and_the_ramp_is_left_out() {
        let d = tempfile::tempdir().unwrap();
        let prefix = d.path().join("x");
        let mut a = LatLog::create(&prefix, 0, false).unwrap();
        a.set_start(1_000_000_000, 1_500_000_000);
        a.io(1_400_000_000, 5, 1, 4096, 8192); // in the ramp
        a.io(1_500_000_000, 81_234, 0, 8192, 16384);
        a.io(3_000_999_999, 7, 1, 4096, 0);
        a.finish().unwrap();
        let mut b = LatLog::create(&prefix, 1, true).unwrap();
        b.set_start(0, 0);
        for i in 0..100_000u64 {
            b.io(i * 1_000, i, 1, 4096, i * 4096);
        }
        b.finish().unwrap();
        let a = std::fs::read_to_string(d.path().join("x_clat.1.log")).unwrap();
        assert_eq!(a, "500, 81234, 0, 8192, 0\n2000, 7, 1, 4096, 0\n");
        let b = std::fs::read_to_string(d.path().join("x_clat.2.log")).unwrap();
        let lines: Vec<&str> = b.lines().collect();
        assert_eq!(lines.len(), 100_000, "every line survives the spills");
        assert_eq!(lines[99_999], "99, 99999, 1, 4096, 409595904, 0");
    }

    #[test]
    fn a_log_that_cannot_be_created_names_its_path() {
        let e = LatLog::create(Path::new("/nonexistent-dir/x"), 0, false)
            .err()
            .unwrap();
        assert!(
            e.to_string().contains("/nonexistent-dir/x_clat.1.log"),
            "{e}"
        );
    }
}
