//! The sampler threads of a recording: diskstats, meminfo, cpu, and proc_io (the
//! broker's `/proc/PID/io`, [`format::proc_io`]) once a broker runs.
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

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::thread::JoinHandle;

use collectors::clock::Clock;
use collectors::periodic::LoopStats;

use crate::recording::session::SamplerSetup;
use crate::recording::writer::ChunkSink;
use crate::recording::EventLog;

pub(crate) use disk::spawn_disk;
pub use disk::{diskstats_header, DeviceFilter, DiskSampler, DiskSource};
pub(crate) use proc::{cpu_row, mem_row, spawn_proc_to, ProcSource};
pub(crate) use procio::{spawn_procio_to, DEFAULT_INTERVAL_NS as PROC_IO_INTERVAL_NS};

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

/// What the diskstats sampler of a [`SamplerSetup`] reads: which devices, their names,
/// and from where (`/proc/diskstats` or the devices' sysfs `stat` files).
pub(crate) struct DiskPlan {
    pub filter: DeviceFilter,
    /// `(major, minor, name)` of each listed device; empty = every device.
    pub names: Vec<(u32, u32, String)>,
    pub source: DiskSource,
}

impl DiskPlan {
    /// The plan of `setup`: its devices, or every device when it lists none.
    pub fn of(setup: &SamplerSetup) -> DiskPlan {
        let filter = if setup.devices.is_empty() {
            DeviceFilter::All
        } else {
            DeviceFilter::Only(
                setup
                    .devices
                    .iter()
                    .map(|d| (d.num.major, d.num.minor))
                    .collect(),
            )
        };
        let names: Vec<(u32, u32, String)> = setup
            .devices
            .iter()
            .map(|d| (d.num.major, d.num.minor, d.name.clone()))
            .collect();
        let source = DiskSource::auto(&setup.procfs, &PathBuf::from("/sys"), &filter, &names);
        DiskPlan {
            filter,
            names,
            source,
        }
    }
}

/// Starts the samplers every recording and every agent runs, pushing each onto
/// `threads` as it starts: `disk` (made from a [`DiskPlan`], writing where its caller
/// chose) every `setup.disk_interval`, then meminfo and cpu, each into the sink
/// `sink(name, file, columns)` gives (a file of the run directory for `record`, a
/// channel to the wire for `agent`).
pub fn start(
    setup: &SamplerSetup,
    disk: DiskSampler,
    mut sink: impl FnMut(&'static str, &'static str, &[&str]) -> anyhow::Result<ChunkSink>,
    clock: Clock,
    stop: &Arc<AtomicBool>,
    events: &EventLog,
    threads: &mut Vec<SamplerThread>,
) -> anyhow::Result<()> {
    threads.push(spawn_disk(
        disk,
        setup.disk_interval.as_nanos() as u64,
        stop.clone(),
    )?);
    let mem = sink(
        "meminfo",
        format::procfs::MEMINFO_FILE,
        &collectors::procstat::MEM_COLUMNS,
    )?;
    threads.push(spawn_proc_to(
        ProcSource {
            name: "meminfo",
            file: format::procfs::MEMINFO_FILE,
            proc_path: setup.procfs.join("meminfo"),
            columns: collectors::procstat::MEM_COLUMNS,
            parse: mem_row,
        },
        mem,
        clock,
        setup.mem_interval.as_nanos() as u64,
        stop.clone(),
        events.clone(),
    )?);
    let cpu = sink(
        "cpu",
        format::procfs::CPU_FILE,
        &collectors::procstat::CPU_COLUMNS,
    )?;
    threads.push(spawn_proc_to(
        ProcSource {
            name: "cpu",
            file: format::procfs::CPU_FILE,
            proc_path: setup.procfs.join("stat"),
            columns: collectors::procstat::CPU_COLUMNS,
            parse: cpu_row,
        },
        cpu,
        clock,
        setup.cpu_interval.as_nanos() as u64,
        stop.clone(),
        events.clone(),
    )?);
    Ok(())
}
