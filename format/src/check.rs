//! `check.json` in a run directory (`diskpulse check --json > RUN/check.json`, or a
//! scenario's check phase): the parts the report shows. The document is `check`'s own
//! (`format_version` 1 of `check::render`); see docs/commands/check.md.
//! [`CheckReport`] is the document as `check --json` writes it; [`CheckDoc`] the parts
//! the report reads back. `check` prints it through a `serde_json::Value`, so every
//! object's keys come out sorted (the fields are declared in that order too).
//!
//! Units: `*_us` microseconds, `*_ns` nanoseconds, `*_mib_s` MiB/s over the sample,
//! `*_mib` MiB, `*_bytes` bytes, `sample_s` seconds.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub const FILE: &str = "check.json";

/// How many findings of each level.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Counts {
    pub fail: u64,
    pub warn: u64,
    pub pass: u64,
    pub info: u64,
}

/// One finding.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Finding {
    pub advice: String,
    pub code: String,
    pub device: Option<String>,
    /// PASS, INFO, WARN or FAIL.
    pub level: String,
    pub message: String,
    /// The argument checked (None for machine-wide findings).
    pub target: Option<String>,
}

/// `check --json`: every target's facts and flush tests, the machine's, the findings.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CheckReport {
    pub counts: Counts,
    pub exit_code: i32,
    pub findings: Vec<Finding>,
    pub format_version: u32,
    pub system: SystemJson,
    pub targets: Vec<TargetJson>,
    /// diskpulse's version.
    pub version: String,
}

/// A path or device `check` was given.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TargetJson {
    /// As given.
    pub arg: String,
    pub devices: Vec<DeviceJson>,
    pub flush_tests: FlushTestsJson,
    /// `path` or `device`.
    pub kind: String,
    pub mount: Option<MountJson>,
    /// Canonical path, or the device node.
    pub path: PathBuf,
}

/// The mount holding a target; `barrier_off` the option that turns write barriers off.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct MountJson {
    pub barrier_off: Option<String>,
    pub fstype: String,
    pub options: Vec<String>,
    pub point: PathBuf,
    pub source: String,
}

/// The empirical flush tests of a target, by `status`.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum FlushTestsJson {
    Measured {
        block_bytes: usize,
        /// p50 of direct+dsync minus p50 of direct: what a flush cost.
        flush_cost_p50_us: Option<f64>,
        /// By mode key (`direct`, `direct_dsync`...).
        modes: BTreeMap<String, ModeJson>,
        /// The file written.
        written: PathBuf,
    },
    Skipped,
    NotRun,
    Failed {
        error: String,
    },
}

/// One flush-test mode's latencies (µs) and rate.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ModeJson {
    #[serde(flatten)]
    pub lat: LatJson,
    pub ops: u64,
    pub ops_per_s: f64,
}

/// A latency distribution, µs.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct LatJson {
    pub lat_max_us: f64,
    pub lat_mean_us: f64,
    pub lat_min_us: f64,
    pub lat_p50_us: f64,
    pub lat_p99_us: f64,
    pub lat_p999_us: f64,
}

/// A device under a target: identity, sysfs queue attributes, cache facts, and its I/O
/// during the sample.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct DeviceJson {
    pub io_during_sample: Option<IoJson>,
    /// The device kind's label.
    pub kind: String,
    pub major: u32,
    pub minor: u32,
    pub name: String,
    pub nvme: Option<NvmeJson>,
    pub parent: Option<String>,
    pub queue: BTreeMap<String, String>,
    pub scsi: Option<ScsiJson>,
    /// The raw `cache_type`, or why it could not be read.
    pub virtio_cache_type: Option<String>,
    #[serde(rename = "virtual")]
    pub virtual_disk: bool,
    pub why: String,
}

/// An NVMe controller's volatile write cache, or why it could not be read.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(untagged)]
pub enum NvmeJson {
    Read {
        model: Option<String>,
        vwc_enabled: Option<bool>,
        vwc_present: bool,
    },
    Error {
        error: String,
    },
}

/// A SCSI disk's cache mode page (`cache_type`, WCE, RCD) and FUA, or why the first
/// could not be read.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(untagged)]
pub enum ScsiJson {
    Read {
        cache_type: String,
        fua: Option<bool>,
        rcd: bool,
        wce: bool,
    },
    Error {
        error: String,
        fua: Option<bool>,
    },
}

/// A device's counters over the sample.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct IoJson {
    pub flushes: Option<u64>,
    pub iops: f64,
    pub read_bytes: u64,
    pub read_mib_s: f64,
    pub reads: u64,
    pub write_bytes: u64,
    pub write_mib_s: f64,
    pub writes: u64,
}

/// The machine: dirty-page settings (`vm`, by sysctl name) and memory, the busiest
/// processes over the sample, the clock.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SystemJson {
    pub clock: ClockJson,
    pub dirty_mib: Option<f64>,
    pub processes: Vec<ProcessJson>,
    pub processes_unreadable: usize,
    pub sample_s: f64,
    pub vm: BTreeMap<String, Option<u64>>,
    pub writeback_mib: Option<f64>,
}

/// A process that did I/O during the sample, and the devices it has files open on.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ProcessJson {
    pub comm: String,
    pub files_on: Vec<String>,
    pub pid: u32,
    pub read_bytes: u64,
    pub read_mib_s: f64,
    pub write_bytes: u64,
    pub write_mib_s: f64,
}

/// The clock every timestamp is read from.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ClockJson {
    pub available: Vec<String>,
    pub read_ns: f64,
    pub source: Option<String>,
    pub step_ns: u64,
}

/// The parts of check.json the report reads.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct CheckDoc {
    #[serde(default)]
    pub counts: Option<Counts>,
    pub findings: Vec<Finding>,
}

/// `None` when the run has no check.json; `Some(Err)` when it is not check's output.
pub fn read(dir: &Path) -> Option<anyhow::Result<CheckDoc>> {
    let p = dir.join(FILE);
    let bytes = std::fs::read(&p).ok()?;
    Some(
        serde_json::from_slice(&bytes).map_err(|e| {
            anyhow::anyhow!("{}: not diskpulse check --json output: {e}", p.display())
        }),
    )
}
