//! The sampler flags (`--device`, `--path`, `--interval`, `--mem-interval`,
//! `--cpu-interval`) that `record`, `load --record`, `demo` and `agent` flatten, and
//! their checks. Here, beside the recording they set up, so a scenario's load phase is
//! parsed with the same types as the command (`diskpulse run --dry-run`).
//!
//! What must stay true: [`SamplerArgs::setup`] checks and resolves, and touches nothing
//! on disk; an interval below its minimum is a usage error naming the flag.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use collectors::devices::{self, Device, Resolver};
use format::cli::{fmt_duration, parse_duration};
use format::usage;

use super::session::SamplerSetup;

/// Shortest diskstats interval accepted: below 100 us the read itself dominates.
pub const MIN_INTERVAL: Duration = Duration::from_micros(100);

/// The samplers whose interval a user sets, each with its shortest interval: one check
/// for `record`/`demo`/`load --record`'s flags and a scenario's `[samplers]` (issue 25
/// point 4: `interval = "10us"` ran a SCHED_FIFO sampler spinning a whole core).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sampler {
    /// diskstats (`--interval`, `[samplers] interval`).
    Disk,
    /// /proc/meminfo (`--mem-interval`, `mem_interval`).
    Mem,
    /// /proc/stat (`--cpu-interval`, `cpu_interval`).
    Cpu,
}

impl Sampler {
    /// The shortest interval accepted.
    pub fn min(self) -> Duration {
        match self {
            Sampler::Disk => MIN_INTERVAL,
            Sampler::Mem | Sampler::Cpu => Duration::from_millis(1),
        }
    }

    /// `v` as this sampler's interval, or why not ("10us is too short: ..."); the caller
    /// puts the flag or key in front.
    pub fn check(self, v: Duration) -> Result<(), String> {
        if v < self.min() {
            return Err(format!(
                "{} is too short: the shortest is {}",
                fmt_duration(v),
                fmt_duration(self.min())
            ));
        }
        Ok(())
    }
}

#[derive(Args, Debug, Clone)]
pub struct SamplerArgs {
    /// Device to record: a name (vda, /dev/loop0) or MAJ:MIN (7:0). Repeatable.
    #[arg(long = "device", value_name = "D")]
    pub devices: Vec<String>,
    /// Record the block devices that really hold this path (through partitions, loop
    /// devices and btrfs members). Repeatable.
    #[arg(long = "path", value_name = "P")]
    pub paths: Vec<PathBuf>,
    /// diskstats sampling interval (at least 100us).
    #[arg(long, default_value = "1ms", value_parser = parse_duration)]
    pub interval: Duration,
    /// /proc/meminfo (Dirty, Writeback) sampling interval.
    #[arg(long, default_value = "10ms", value_parser = parse_duration)]
    pub mem_interval: Duration,
    /// /proc/stat (CPU, iowait) sampling interval.
    #[arg(long, default_value = "100ms", value_parser = parse_duration)]
    pub cpu_interval: Duration,
}

impl SamplerArgs {
    /// Refuses an interval longer than the run: its sampler would keep the run going
    /// past `--duration` (`--duration 300ms --cpu-interval 12s` recorded 12 s) or give
    /// one sample, which is no rate.
    pub fn check_within(&self, duration: Duration) -> anyhow::Result<()> {
        for (flag, v) in [
            ("--interval", self.interval),
            ("--mem-interval", self.mem_interval),
            ("--cpu-interval", self.cpu_interval),
        ] {
            if v > duration {
                return Err(usage!(
                    "{flag} {} is longer than --duration {}: a sampler needs at least two samples in the run for a rate; the limit is the duration: shorten {flag} or lengthen --duration",
                    fmt_duration(v),
                    fmt_duration(duration)
                ));
            }
        }
        Ok(())
    }

    /// Each interval against its sampler's shortest ([`Sampler::check`]).
    pub fn check_intervals(&self) -> anyhow::Result<()> {
        for (flag, v, which) in [
            ("--interval", self.interval, Sampler::Disk),
            ("--mem-interval", self.mem_interval, Sampler::Mem),
            ("--cpu-interval", self.cpu_interval, Sampler::Cpu),
        ] {
            which.check(v).map_err(|e| usage!("{flag} {e}"))?;
        }
        Ok(())
    }

    /// Validates intervals and resolves devices; touches nothing on disk.
    pub fn setup(&self) -> anyhow::Result<SamplerSetup> {
        self.check_intervals()?;
        let r = Resolver::default();
        let mut lists: Vec<Vec<Device>> = vec![];
        for d in &self.devices {
            lists.push(r.for_spec(d).map_err(|e| usage!("--device: {e}"))?);
        }
        for p in &self.paths {
            lists.push(r.for_path(p).map_err(|e| usage!("--path: {e}"))?);
        }
        Ok(SamplerSetup {
            devices: devices::merge(lists),
            disk_interval: self.interval,
            mem_interval: self.mem_interval,
            cpu_interval: self.cpu_interval,
            procfs: PathBuf::from("/proc"),
            trace: None,
            chunks: Default::default(),
        })
    }
}

/// The names of the devices a recording records: those chosen, or with none chosen
/// every block device the kernel has (what the sampler then records); what a
/// `DEVICE:` trigger may name.
pub fn recorded_names(chosen: &[Device]) -> Vec<String> {
    if chosen.is_empty() {
        Resolver::default()
            .all()
            .into_iter()
            .map(|(n, _)| n)
            .collect()
    } else {
        chosen.iter().map(|d| d.name.clone()).collect()
    }
}
