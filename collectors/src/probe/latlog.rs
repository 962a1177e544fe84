//! fio's per-job logs: `write_lat_log=PREFIX` (PREFIX_slat.N.log, PREFIX_clat.N.log,
//! PREFIX_lat.N.log), `write_bw_log=PREFIX` (PREFIX_bw.N.log), `write_iops_log=PREFIX`
//! (PREFIX_iops.N.log); N is the job number from 1 (`per_job_logs=0`: no `.N`, all jobs
//! in one file). One line per entry, fio 3.33's columns:
//!
//! ```text
//! time_ms, value, direction, bs, prio             (fio's default)
//! time_ms, value, direction, bs, offset, prio     (log_offset=1)
//! ```
//! - `time_ms`: whole milliseconds (truncated) since the probe's start (the moment its jobs
//!   were released; inside a recording the `probe_start` event gives it on the run clock),
//!   as fio's time since the job started: for slat the I/O's issue, else its completion;
//! - `value`: slat/clat/lat in ns (the same points the statistics use: slat = issue -
//!   start, clat = completion - issue, lat = completion - start); bw: the I/O's bytes *
//!   10^6 / clat_ns (fio's per-I/O figure); iops: 1;
//! - `direction`: 0 read, 1 write; `bs`: the I/O's bytes; `offset`: its byte offset;
//!   `prio`: always 0 (no priority class, as fio without `log_prio`).
//!
//! With `log_avg_msec=M` each log has, per M ms window of the job's time (from its start)
//! and per direction that had I/O in it, one line at the window's end: slat/clat/lat the
//! mean in ns (rounded; `log_max_value=1`: the largest), bw in KiB/s (bytes * 1000 / M /
//! 1024, truncated as fio), iops in I/Os per second; `bs` and `offset` are 0, as fio
//! writes them. The last, partial window ends at the job's last completion and its rates
//! are over that span.
//!
//! The sync engine has no submission step: its slat log is empty, as fio's psync's is.
//! fsync/fdatasync calls and I/Os completed in the ramp are not logged (as in fio).
//!
//! ## What must stay true
//! Logging must not slow the probe: the job thread formats each line with `itoa` into a
//! buffer per file allocated once (no allocation per I/O) and writes it out when it is
//! nearly full (one `write` per ~40,000 lines) and at the end. A write error stops
//! logging and is reported when the job ends.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use super::{ProbeError, ProbeSpec};

/// Which logs a job writes, from its [`ProbeSpec`].
#[derive(Debug, Clone, Default)]
pub(crate) struct LogSpec {
    pub lat: Option<PathBuf>,
    pub bw: Option<PathBuf>,
    pub iops: Option<PathBuf>,
    pub avg_ms: u64,
    pub offset: bool,
    pub max_value: bool,
    pub per_job: bool,
}

impl LogSpec {
    pub fn of(s: &ProbeSpec) -> LogSpec {
        LogSpec {
            lat: s.lat_log.clone(),
            bw: s.bw_log.clone(),
            iops: s.iops_log.clone(),
            avg_ms: s.log_avg_ms,
            offset: s.log_offset,
            max_value: s.log_max_value,
            per_job: s.per_job_logs,
        }
    }
}

const BUF_BYTES: usize = 1 << 20;
/// Room for one line: 6 numbers of at most 20 digits and separators.
const LINE_MAX: usize = 160;

/// What one log file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Slat,
    Clat,
    Lat,
    Bw,
    Iops,
}

impl Kind {
    fn suffix(self) -> &'static str {
        match self {
            Kind::Slat => "slat",
            Kind::Clat => "clat",
            Kind::Lat => "lat",
            Kind::Bw => "bw",
            Kind::Iops => "iops",
        }
    }

    fn flag(self) -> &'static str {
        match self {
            Kind::Bw => "write_bw_log",
            Kind::Iops => "write_iops_log",
            _ => "write_lat_log",
        }
    }
}

/// The path of job `job`'s (from 0) log of one kind: `PREFIX_clat.1.log`, or without
/// per-job logs `PREFIX_clat.log`.
fn log_path(prefix: &Path, kind: &str, job: Option<u32>) -> PathBuf {
    let mut s = prefix.as_os_str().to_os_string();
    match job {
        Some(j) => s.push(format!("_{kind}.{}.log", j + 1)),
        None => s.push(format!("_{kind}.log")),
    }
    PathBuf::from(s)
}

/// One window's sums for one direction.
#[derive(Debug, Clone, Copy, Default)]
struct Acc {
    n: u64,
    sum: u64,
    max: u64,
    bytes: u64,
}

struct LogFile {
    kind: Kind,
    file: File,
    path: PathBuf,
    buf: Vec<u8>,
    acc: [Acc; super::stats::DIRS],
    error: Option<std::io::Error>,
}

impl LogFile {
    #[inline]
    fn line(&mut self, t_ms: u64, value: u64, dir: usize, bs: u64, offset: Option<u64>) {
        if self.buf.len() + LINE_MAX > BUF_BYTES {
            self.spill();
        }
        let mut n = itoa::Buffer::new();
        let b = &mut self.buf;
        b.extend_from_slice(n.format(t_ms).as_bytes());
        b.extend_from_slice(b", ");
        b.extend_from_slice(n.format(value).as_bytes());
        // fio's direction column: 0 read, 1 write, 2 trim.
        b.extend_from_slice([&b", 0, "[..], b", 1, ", b", 2, "][dir.min(2)]);
        b.extend_from_slice(n.format(bs).as_bytes());
        if let Some(o) = offset {
            b.extend_from_slice(b", ");
            b.extend_from_slice(n.format(o).as_bytes());
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
}

/// One job's logs (the name is the old one: the clat log came first).
pub(crate) struct LatLog {
    files: Vec<LogFile>,
    offset: bool,
    /// `log_avg_msec` in ns; 0: one line per I/O.
    avg_ns: u64,
    log_max: bool,
    start_ns: u64,
    meas_ns: u64,
    /// End of the current averaging window (CLOCK_MONOTONIC ns).
    win_end_ns: u64,
}

impl LatLog {
    /// Creates (truncates) job `job`'s files for the logs `spec` asks for; `None` when it
    /// asks for none. Fails with the path of a file it cannot create.
    pub fn create(spec: &LogSpec, job: u32) -> Result<Option<LatLog>, ProbeError> {
        let mut files = vec![];
        let per_job = spec.per_job;
        let mut open = |prefix: &Path, kind: Kind| -> Result<(), ProbeError> {
            let path = log_path(prefix, kind.suffix(), per_job.then_some(job));
            // Without per-job logs the jobs share a file: the first truncates it, all
            // append (each spill is one write of whole lines).
            let shared = !per_job && job > 0;
            let file = OpenOptions::new()
                .create(true)
                .append(!per_job)
                .write(true)
                .truncate(!shared && per_job)
                .open(&path)
                .and_then(|f| {
                    if !per_job && job == 0 {
                        f.set_len(0)?;
                    }
                    Ok(f)
                })
                .map_err(|source| ProbeError::Io {
                    path: path.clone(),
                    op: format!("creating the {} log ({})", kind.suffix(), kind.flag()),
                    source,
                })?;
            files.push(LogFile {
                kind,
                file,
                path,
                buf: Vec::with_capacity(BUF_BYTES / 4),
                acc: [Acc::default(); super::stats::DIRS],
                error: None,
            });
            Ok(())
        };
        if let Some(p) = &spec.lat {
            open(p, Kind::Slat)?;
            open(p, Kind::Clat)?;
            open(p, Kind::Lat)?;
        }
        if let Some(p) = &spec.bw {
            open(p, Kind::Bw)?;
        }
        if let Some(p) = &spec.iops {
            open(p, Kind::Iops)?;
        }
        if files.is_empty() {
            return Ok(None);
        }
        Ok(Some(LatLog {
            files,
            offset: spec.offset,
            avg_ns: spec.avg_ms * 1_000_000,
            log_max: spec.max_value,
            start_ns: 0,
            meas_ns: 0,
            win_end_ns: u64::MAX,
        }))
    }

    /// The probe's start (time 0 of the logs) and the end of its ramp (I/Os that
    /// complete before it are not logged), both `CLOCK_MONOTONIC` ns.
    pub(crate) fn set_start(&mut self, start_ns: u64, meas_ns: u64) {
        self.start_ns = start_ns;
        self.meas_ns = meas_ns;
        if let Some(k) = meas_ns.saturating_sub(start_ns).checked_div(self.avg_ns) {
            self.win_end_ns = start_ns + (k + 1) * self.avg_ns;
        }
    }

    /// Logs one completed I/O from the points the statistics use: `start` (the slot was
    /// filled), `issue` (the kernel took it) and `done`; `has_slat`: the engine has a
    /// submission step (io_uring; not psync).
    #[allow(
        clippy::too_many_arguments,
        reason = "the same points `record_io` takes"
    )]
    #[inline]
    pub fn io(
        &mut self,
        dir: usize,
        bs: u64,
        offset: u64,
        start: u64,
        issue: u64,
        done: u64,
        has_slat: bool,
    ) {
        if done < self.meas_ns {
            return;
        }
        if self.avg_ns > 0 && done >= self.win_end_ns {
            self.roll(done);
        }
        let clat = done.saturating_sub(issue);
        let ms = |t: u64| t.saturating_sub(self.start_ns) / 1_000_000;
        let off = self.offset.then_some(offset);
        let avg = self.avg_ns > 0;
        for f in &mut self.files {
            let (t, v) = match f.kind {
                Kind::Slat if !has_slat => continue,
                Kind::Slat => (issue, issue.saturating_sub(start)),
                Kind::Clat => (done, clat),
                Kind::Lat => (done, done.saturating_sub(start)),
                Kind::Bw => (done, (bs * 1_000_000).checked_div(clat).unwrap_or(0)),
                Kind::Iops => (done, 1),
            };
            if avg {
                let a = &mut f.acc[dir.min(2)];
                a.n += 1;
                a.sum += v;
                a.max = a.max.max(v);
                a.bytes += bs;
            } else {
                f.line(ms(t), v, dir, bs, off);
            }
        }
    }

    /// Writes the windows that ended before `now` (those without I/O write nothing).
    #[cold]
    fn roll(&mut self, now: u64) {
        let end = self.win_end_ns;
        self.emit(end, self.avg_ns);
        let since = now.saturating_sub(self.start_ns);
        self.win_end_ns = self.start_ns + (since / self.avg_ns + 1) * self.avg_ns;
    }

    /// One line per log and direction for the window ending at `end`, `span_ns` long.
    fn emit(&mut self, end: u64, span_ns: u64) {
        let t_ms = end.saturating_sub(self.start_ns) / 1_000_000;
        let off = self.offset.then_some(0);
        let span_ms = (span_ns / 1_000_000).max(1);
        for f in &mut self.files {
            for dir in 0..super::stats::DIRS {
                let a = std::mem::take(&mut f.acc[dir]);
                if a.n == 0 {
                    continue;
                }
                let v = match f.kind {
                    Kind::Bw => a.bytes * 1000 / span_ms / 1024,
                    Kind::Iops => a.n * 1000 / span_ms,
                    _ if self.log_max => a.max,
                    _ => (a.sum + a.n / 2) / a.n,
                };
                f.line(t_ms, v, dir, 0, off);
            }
        }
    }

    /// Writes what is left (an averaged log: the last window, ending at `last_done_ns`);
    /// the first write error, if any, with the file's name.
    pub fn finish(mut self, last_done_ns: u64) -> Result<(), ProbeError> {
        if self.avg_ns > 0 && self.win_end_ns != u64::MAX {
            let begin = self.win_end_ns - self.avg_ns;
            if last_done_ns > begin {
                self.emit(last_done_ns, last_done_ns - begin);
            }
        }
        let mut first = None;
        for mut f in self.files {
            f.spill();
            if let (None, Some(source)) = (&first, f.error.take()) {
                first = Some(ProbeError::Io {
                    path: f.path.clone(),
                    op: format!("writing the {} log ({})", f.kind.suffix(), f.kind.flag()),
                    source,
                });
            }
        }
        first.map_or(Ok(()), Err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(prefix: &Path, avg_ms: u64, offset: bool) -> LogSpec {
        LogSpec {
            lat: Some(prefix.to_path_buf()),
            bw: Some(prefix.to_path_buf()),
            iops: Some(prefix.to_path_buf()),
            avg_ms,
            offset,
            max_value: false,
            per_job: true,
        }
    }

    fn read(d: &Path, name: &str) -> String {
        std::fs::read_to_string(d.join(name)).unwrap()
    }

    #[test]
    fn per_io_lines_have_fios_columns_and_the_ramp_is_left_out() {
        let d = tempfile::tempdir().unwrap();
        let prefix = d.path().join("x");
        let mut a = LatLog::create(&spec(&prefix, 0, false), 0)
            .unwrap()
            .unwrap();
        a.set_start(1_000_000_000, 1_500_000_000);
        a.io(
            1,
            4096,
            8192,
            1_300_000_000,
            1_300_000_000,
            1_400_000_000,
            false,
        ); // ramp
        a.io(
            0,
            8192,
            16384,
            1_500_000_000,
            1_500_010_000,
            1_500_091_234,
            true,
        );
        a.io(
            1,
            4096,
            0,
            3_000_000_000,
            3_000_000_000,
            3_000_999_999,
            false,
        );
        a.finish(3_000_999_999).unwrap();
        let d = d.path();
        assert_eq!(read(d, "x_slat.1.log"), "500, 10000, 0, 8192, 0\n");
        assert_eq!(
            read(d, "x_clat.1.log"),
            "500, 81234, 0, 8192, 0\n2000, 999999, 1, 4096, 0\n"
        );
        assert_eq!(
            read(d, "x_lat.1.log"),
            "500, 91234, 0, 8192, 0\n2000, 999999, 1, 4096, 0\n"
        );
        // 8192 bytes in 81234 ns: 8192 * 10^6 / 81234.
        assert_eq!(
            read(d, "x_bw.1.log"),
            "500, 100844, 0, 8192, 0\n2000, 4096, 1, 4096, 0\n"
        );
        assert_eq!(
            read(d, "x_iops.1.log"),
            "500, 1, 0, 8192, 0\n2000, 1, 1, 4096, 0\n"
        );
    }

    #[test]
    fn averaged_lines_are_one_per_window_and_direction() {
        let d = tempfile::tempdir().unwrap();
        let prefix = d.path().join("y");
        let mut a = LatLog::create(&spec(&prefix, 100, true), 1)
            .unwrap()
            .unwrap();
        a.set_start(0, 0);
        // 250 ms of reads every 1 ms, clat 1000 + (i % 2) * 1000 ns: mean 1500.
        for i in 0..250u64 {
            let t = i * 1_000_000 + 500_000;
            a.io(
                0,
                4096,
                i * 4096,
                t - 2000,
                t - 1000 - (i % 2) * 1000,
                t,
                false,
            );
        }
        a.finish(249_500_000).unwrap();
        let clat = read(d.path(), "y_clat.2.log");
        assert_eq!(
            clat.lines().collect::<Vec<_>>(),
            [
                "100, 1500, 0, 0, 0, 0",
                "200, 1500, 0, 0, 0, 0",
                "249, 1500, 0, 0, 0, 0"
            ]
        );
        let iops = read(d.path(), "y_iops.2.log");
        // 100 I/Os per 100 ms window; the last 50 in 49.5 ms (49 whole ms).
        assert_eq!(
            iops.lines().collect::<Vec<_>>(),
            [
                "100, 1000, 0, 0, 0, 0",
                "200, 1000, 0, 0, 0, 0",
                "249, 1020, 0, 0, 0, 0"
            ]
        );
        let bw = read(d.path(), "y_bw.2.log");
        assert!(bw.starts_with("100, 4000, 0, 0, 0, 0\n"), "{bw}");
        assert_eq!(read(d.path(), "y_slat.2.log"), "", "psync has no slat");
    }

    #[test]
    fn a_log_that_cannot_be_created_names_its_path() {
        let e = LatLog::create(&spec(Path::new("/nonexistent-dir/x"), 0, false), 0)
            .err()
            .unwrap();
        assert!(
            e.to_string().contains("/nonexistent-dir/x_slat.1.log"),
            "{e}"
        );
    }
}
