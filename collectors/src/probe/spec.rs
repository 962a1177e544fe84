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
        }
    }

    pub fn reads(self) -> bool {
        !matches!(self, Rw::Write | Rw::RandWrite)
    }

    pub fn writes(self) -> bool {
        !matches!(self, Rw::Read | Rw::RandRead)
    }

    pub fn random(self) -> bool {
        matches!(self, Rw::RandRead | Rw::RandWrite | Rw::RandRw)
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
}

impl Engine {
    pub fn name(self) -> &'static str {
        match self {
            Engine::Sync => "psync",
            Engine::IoUring => "io_uring",
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
    // P2b: where I/Os go
    pub place: super::place::Placement,
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
}
