//! What a probe job is: fio's `rw`, `ioengine` and sync vocabulary, and the validated
//! [`ProbeSpec`] that [`super::run`] executes.

use super::pace;
use crate::directio::SyncFlag;

/// fio's `rw`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rw {
    Read,
    Write,
    RandRead,
    RandWrite,
    ReadWrite,
    RandRw,
    /// fio's `trim`: sequential discards (BLKDISCARD), block devices only.
    Trim,
    /// fio's `randtrim`: random discards.
    RandTrim,
    /// fio's `trimwrite`: each block discarded, then written, in order.
    TrimWrite,
}

impl Rw {
    pub fn parse(s: &str) -> Option<Rw> {
        Some(match s {
            "read" => Rw::Read,
            "write" => Rw::Write,
            "randread" => Rw::RandRead,
            "randwrite" => Rw::RandWrite,
            "rw" | "readwrite" => Rw::ReadWrite,
            "randrw" => Rw::RandRw,
            "trim" => Rw::Trim,
            "randtrim" => Rw::RandTrim,
            "trimwrite" => Rw::TrimWrite,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Rw::Read => "read",
            Rw::Write => "write",
            Rw::RandRead => "randread",
            Rw::RandWrite => "randwrite",
            Rw::ReadWrite => "rw",
            Rw::RandRw => "randrw",
            Rw::Trim => "trim",
            Rw::RandTrim => "randtrim",
            Rw::TrimWrite => "trimwrite",
        }
    }

    pub fn reads(self) -> bool {
        matches!(self, Rw::Read | Rw::RandRead | Rw::ReadWrite | Rw::RandRw)
    }

    /// Whether the job writes data (not counting discards: see [`Rw::trims`]).
    pub fn writes(self) -> bool {
        matches!(
            self,
            Rw::Write | Rw::RandWrite | Rw::ReadWrite | Rw::RandRw | Rw::TrimWrite
        )
    }

    /// Whether the job discards (fio's third direction, `trim`).
    pub fn trims(self) -> bool {
        matches!(self, Rw::Trim | Rw::RandTrim | Rw::TrimWrite)
    }

    pub fn random(self) -> bool {
        matches!(
            self,
            Rw::RandRead | Rw::RandWrite | Rw::RandRw | Rw::RandTrim
        )
    }

    pub fn mixed(self) -> bool {
        matches!(self, Rw::ReadWrite | Rw::RandRw)
    }
}

/// fio's `ioengine`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    /// `pread`/`pwrite`, one I/O at a time (fio's `psync`).
    Sync,
    /// One io_uring per job, registered file and buffers.
    IoUring,
    /// Linux native AIO (fio's `libaio`): `io_submit`/`io_getevents`, one context per job.
    Aio,
}

impl Engine {
    pub fn name(self) -> &'static str {
        match self {
            Engine::Sync => "psync",
            Engine::IoUring => "io_uring",
            Engine::Aio => "libaio",
        }
    }
}

/// `--fsync N` or `--fdatasync N`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncKind {
    Fsync,
    Fdatasync,
}

impl SyncKind {
    pub fn name(self) -> &'static str {
        match self {
            SyncKind::Fsync => "fsync",
            SyncKind::Fdatasync => "fdatasync",
        }
    }
}

/// A validated probe job.
#[derive(Debug, Clone)]
pub struct ProbeSpec {
    pub rw: Rw,
    /// Share of reads in a mixed job, 0..=100.
    pub rwmixread: f64,
    /// Block sizes: [read, write].
    pub bs: [u64; 2],
    pub iodepth: u32,
    pub numjobs: u32,
    pub engine: Engine,
    pub direct: bool,
    pub sync: SyncFlag,
    /// Sync after every N writes.
    pub fsync: Option<(u32, SyncKind)>,
    /// Total I/Os per second over all jobs and both directions.
    pub rate_iops: Option<f64>,
    pub rate_process: pace::RateProcess,
    /// Measured time (after the ramp); None = until `size` bytes per job.
    pub runtime_ns: Option<u64>,
    pub ramp_ns: u64,
    /// Run for the whole runtime, wrapping around the file (fio's `time_based`).
    pub time_based: bool,
    pub window_ns: u64,
    pub seed: u64,
    /// A recording's zero on CLOCK_MONOTONIC: when set, the measured phase starts on a
    /// multiple of `window_ns` from it (up to one window later), so the probe's windows
    /// are the recording's windows (probe.csv joins rates.csv row for row).
    pub grid_zero_ns: Option<u64>,
    /// fio's `--write_lat_log`: each job's per-I/O completion latencies go to
    /// `PREFIX_clat.N.log` (see `latlog`).
    pub lat_log: Option<std::path::PathBuf>,
    /// fio's `log_offset`: the lat log has each I/O's offset.
    pub log_offset: bool,
    // P2a: engines and timing
    pub timing: Timing,
    // P3: verify and logs
    /// fio's `verify=` (with its options); None: no verify.
    pub verify: Option<super::verify::VerifySpec>,
    /// fio's `write_bw_log` / `write_iops_log` prefixes (see `latlog`).
    pub bw_log: Option<std::path::PathBuf>,
    pub iops_log: Option<std::path::PathBuf>,
    /// fio's `log_avg_msec`: 0 = one line per I/O.
    pub log_avg_ms: u64,
    /// fio's `log_max_value`: averaged lat logs hold the window's largest value.
    pub log_max_value: bool,
    /// fio's `per_job_logs` (default 1): one file per job (`.N`), else one for all.
    pub per_job_logs: bool,
    // P2b: where I/Os go
    pub place: super::place::Placement,
    /// fio's `file_service_type`: how a job with several files picks the next one.
    pub files: super::files::FileService,
}

/// P2a: how an async engine submits and reaps, think time, minimum rates, fill_device
/// (fio's names; see `Timing::default` for fio's defaults).
#[derive(Debug, Clone, PartialEq)]
pub struct Timing {
    /// fio's `iodepth_batch_submit`: I/Os queued before one submit call (1..=iodepth).
    pub batch_submit: u32,
    /// fio's `iodepth_batch_complete_min`: completions waited for once the queue is full.
    pub complete_min: u32,
    /// fio's `iodepth_batch_complete_max`: at most this many reaped per round.
    pub complete_max: u32,
    /// fio's `thinktime`: pause this long (ns) after every `think_blocks` I/Os, once all in
    /// flight have completed; `think_spin_ns` of it is spun, the rest slept.
    pub think_ns: u64,
    pub think_spin_ns: u64,
    pub think_blocks: u32,
    /// fio's `thinktime_blocks_type`: count completions (`complete`, fio's default) or
    /// issues (`issue`).
    pub think_on_complete: bool,
    /// fio's `ratemin` (bytes/s) and `rate_iops_min` (I/Os per s), [read, write], per job:
    /// the job fails when a `rate_cycle_ns` period after the ramp falls below.
    pub min_bytes_s: [u64; 2],
    pub min_iops: [u64; 2],
    pub rate_cycle_ns: u64,
    /// fio's `fill_device`: write until the file system is full (ENOSPC ends the job,
    /// it is not an error).
    pub fill_device: bool,
    /// fio's `invalidate` on a buffered time-based job: each new pass over the file drops
    /// its cached pages (fio's `loop_cache_invalidate`), so a pass does not read the last;
    /// verify's read-back starts cold too (fio reopens the file for it).
    pub loop_invalidate: bool,
    /// fio's `latency_target` (with `latency_window`, `latency_percentile`,
    /// `latency_run`): search for the deepest queue that meets it (see `lattarget`).
    pub latency: Option<super::LatencySpec>,
}

impl Default for Timing {
    /// fio's: one I/O per submit call, one completion per reap, no think time, no minimum.
    fn default() -> Self {
        Timing {
            batch_submit: 1,
            complete_min: 1,
            complete_max: 1,
            think_ns: 0,
            think_spin_ns: 0,
            think_blocks: 1,
            think_on_complete: true,
            min_bytes_s: [0, 0],
            min_iops: [0, 0],
            rate_cycle_ns: 1_000_000_000,
            fill_device: false,
            loop_invalidate: false,
            latency: None,
        }
    }
}

impl ProbeSpec {
    /// Share of reads, 0..=100, for this `rw`.
    pub fn read_pct(&self) -> f64 {
        match (self.rw.reads(), self.rw.writes()) {
            (true, false) => 100.0,
            (false, true) => 0.0,
            _ => self.rwmixread,
        }
    }

    pub fn writes(&self) -> bool {
        self.rw.writes()
    }

    /// Whether the job changes the target (writes, discards or syncs): it opens the
    /// target for writing, and a block device needs `--allow-destructive`.
    pub fn modifies(&self) -> bool {
        self.rw.writes() || self.rw.trims() || self.fsync.is_some()
    }
}
