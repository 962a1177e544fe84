//! Reading a run directory back, every file through its [`crate::format`] type. A
//! recording that was cut off (crash, `kill -9`, truncated gzip) is read up to the last
//! whole row; one of another format version is refused with a message that says so.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub use crate::format::csv::Table;
use crate::format::diskstats;
pub use crate::format::diskstats::DiskRows;
use crate::format::events::{self, Event};
use crate::format::fsync::{self, FsyncRow};
use crate::format::hist;
use crate::format::load::{self, LoadRow};
use crate::format::meta::{Meta, MetaError};
use crate::format::probe::{self, ProbeRow};
use crate::format::procfs;
use crate::usage;

/// A recording, read back.
#[derive(Debug, Clone)]
pub struct Run {
    pub dir: PathBuf,
    pub meta: Meta,
    pub disks: Vec<DiskRows>,
    pub mem: Option<Table>,
    pub cpu: Option<Table>,
    /// load.csv split by role (`js-pub`, `sub`, ...).
    pub load: BTreeMap<String, Vec<LoadRow>>,
    /// probe.csv split by direction (`read`, `write`, `sync`); None without a probe.
    pub probe: Option<BTreeMap<String, Vec<ProbeRow>>>,
    /// fsync.csv; empty without `diskpulse fsync`.
    pub fsync: Vec<FsyncRow>,
    /// probe.hlog and load.hlog: every window's latency histogram; empty without them.
    pub probe_hist: Vec<hist::Interval>,
    pub load_hist: Vec<hist::Interval>,
    pub events: Vec<Event>,
    /// End of the recording: meta's duration, or the last timestamp seen if cut off.
    pub duration_ns: u64,
}

impl Run {
    /// Reads a run directory. A directory without a diskpulse `meta.json` is a usage error.
    pub fn read(dir: &Path) -> anyhow::Result<Run> {
        let not_rec = |why: &str| {
            usage!(
                "RUN '{}' is not a diskpulse recording ({why}); pass a directory made by `diskpulse record` or `diskpulse demo`",
                dir.display()
            )
        };
        if !dir.is_dir() {
            return Err(not_rec("not a directory"));
        }
        let meta = match Meta::read(dir) {
            Ok(m) => m,
            Err(MetaError::NotARecording(why)) => return Err(not_rec(why)),
            Err(e) => return Err(usage!("RUN '{}': {e}", dir.display())),
        };
        let ds_gz = dir.join(diskstats::FILE);
        let ds_plain = dir.join("diskstats.csv");
        let disks = if ds_gz.exists() {
            diskstats::read(&ds_gz)?
        } else if ds_plain.exists() {
            diskstats::read(&ds_plain)?
        } else {
            return Err(not_rec("no diskstats.csv.gz"));
        };
        let mem = procfs::read(dir, procfs::MEMINFO_FILE)?;
        let cpu = procfs::read(dir, procfs::CPU_FILE)?;
        // A probe.csv or fsync.csv that cannot be read leaves its panel out; the rest of
        // the report stands.
        let probe = probe::read(dir).ok().flatten();
        let fsync = fsync::read(dir).unwrap_or_default();
        // Likewise a histogram log that cannot be read leaves the interference out.
        let hlog = |name: &str| {
            let p = dir.join(name);
            if p.exists() {
                hist::read(&p).unwrap_or_default()
            } else {
                vec![]
            }
        };
        let last_seen = disks
            .iter()
            .filter_map(|d| d.t_ns.last().copied())
            .chain(mem.iter().filter_map(|t| t.t_ns.last().copied()))
            .max()
            .unwrap_or(0);
        let duration_ns = meta.duration_ns.unwrap_or(last_seen).max(last_seen);
        Ok(Run {
            dir: dir.to_path_buf(),
            disks,
            mem,
            cpu,
            load: load::read(dir)?,
            probe,
            fsync,
            probe_hist: hlog(hist::PROBE_FILE),
            load_hist: hlog(hist::LOAD_FILE),
            events: events::read(dir)?,
            duration_ns,
            meta,
        })
    }

    /// The reason a device is in the run (from meta.json), if recorded.
    pub fn device_why(&self, name: &str) -> Option<String> {
        self.meta.device_why(name)
    }
}
