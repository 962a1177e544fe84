//! The sampler threads of a recording: diskstats, meminfo, cpu, and proc_io (the
//! broker's `/proc/PID/io`, [`crate::format::proc_io`]) once a broker runs.
//!
//! ## `diskstats.csv.gz`
//! `t_ns,device,major,minor,` then the 17 raw counters of [`collectors::diskstats`] in
//! kernel order (empty where the kernel prints fewer). Gzip-compressed, readable with
//! `zcat`. A device's row is written when any counter changed since its previous
//! sample, together with that previous sample if it was not written (so every delta
//! spans exactly one sampling interval), and at least once a second. An idle device
//! therefore costs one row a second, and the deltas of consecutive rows are always
//! exact.
//!
//! ## `meminfo.csv`, `cpu.csv`
//! `t_ns` then [`collectors::procstat::MEM_COLUMNS`] / [`collectors::procstat::CPU_COLUMNS`],
//! every sample.

mod disk;
mod disk_source;
mod loopwatch;
mod proc;
mod procio;

use std::thread::JoinHandle;

use collectors::periodic::LoopStats;

pub use disk::{diskstats_header, spawn_disk, DeviceFilter, DiskSampler, DiskSource};
pub use proc::{cpu_row, mem_row, spawn_proc, spawn_proc_to, ProcSource};
pub use procio::{spawn_procio, spawn_procio_to, DEFAULT_INTERVAL_NS as PROC_IO_INTERVAL_NS};

/// A running sampler thread.
pub struct SamplerThread {
    pub name: &'static str,
    pub file: &'static str,
    handle: JoinHandle<anyhow::Result<LoopStats>>,
}

impl SamplerThread {
    pub fn join(self) -> (&'static str, &'static str, anyhow::Result<LoopStats>) {
        let r = match self.handle.join() {
            Ok(r) => r,
            Err(_) => Err(anyhow::anyhow!("sampler {} panicked", self.name)),
        };
        (self.name, self.file, r)
    }
}
