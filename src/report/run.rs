//! Reading a run directory back, every file through its [`crate::format`] type. A
//! recording that was cut off (crash, `kill -9`, truncated gzip) is read up to the last
//! whole row, with a warning; one of another format version, or whose files are not what
//! they should be (empty, not gzip, another header, a span past
//! [`crate::format::csv::MAX_T_NS`]), is refused as a bad input naming the file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub use crate::format::csv::Table;
use crate::format::csv::MAX_T_NS;
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
    /// proc_io.csv by pid: the broker processes' /proc/PID/io; None without it.
    pub proc_io: Option<Vec<crate::format::proc_io::ProcRows>>,
    /// `--trace`: fsync_calls.csv.gz and block_requests.csv.gz; None when the run was not
    /// traced (meta.json has no `trace`) or the file cannot be read (a warning).
    pub fsync_calls: Option<Vec<crate::format::fsync_calls::FsyncCall>>,
    pub block_requests: Option<Vec<crate::format::block_requests::BlockRequest>>,
    /// varz.csv by server (what the broker was doing at a traced call); empty without.
    pub varz: BTreeMap<String, Table>,
    /// probe.hlog and load.hlog: every window's latency histogram; empty without them.
    pub probe_hist: Vec<hist::Interval>,
    pub load_hist: Vec<hist::Interval>,
    pub events: Vec<Event>,
    /// End of the recording: meta's duration, or the last timestamp seen if cut off (or
    /// if meta's duration claims more than the rows hold).
    pub duration_ns: u64,
    /// Where the recording's rows start: 0, or the first kept row when `record --keep`
    /// deleted its first chunks (the report draws and averages from there, not over
    /// zeros that were never recorded).
    pub start_ns: u64,
    /// What was wrong but still read (a cut-off end, damaged lines skipped, an
    /// incomplete recording), each naming its file (and line): `report` prints them.
    pub warnings: Vec<String>,
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
        if let Some(d) = meta.duration_ns.filter(|&d| d > MAX_T_NS) {
            return Err(usage!(
                "RUN '{}': meta.json duration_ns {d} is {:.0} days; a report reads runs of at most {} days: the file is damaged",
                dir.display(),
                d as f64 / 8.64e13,
                crate::format::csv::MAX_DAYS
            ));
        }
        // A file that is not what it should be is a bad input (exit 2), named by the error.
        let bad = |e: anyhow::Error| usage!("RUN '{}': {e:#}", dir.display());
        let mut warnings = vec![];
        // Every chunk of a chunked run (`record --chunk`) in order, or the one file.
        if diskstats::files(dir).is_empty() {
            return Err(not_rec("no diskstats.csv.gz"));
        }
        let (disks, w) = diskstats::read_run(dir).map_err(bad)?;
        warnings.extend(w);
        let mut table = |file: &str| -> anyhow::Result<Option<Table>> {
            Ok(procfs::read(dir, file).map_err(bad)?.map(|(t, w)| {
                warnings.extend(w);
                t
            }))
        };
        let mem = table(procfs::MEMINFO_FILE)?;
        let cpu = table(procfs::CPU_FILE)?;
        let (load, w) = load::read_noted(dir).map_err(bad)?;
        warnings.extend(w);
        let (events, w) = events::read_noted(dir).map_err(bad)?;
        warnings.extend(w);
        // A probe.csv, fsync.csv or histogram log that cannot be read leaves its panel
        // (or the interference) out, with a warning; the rest of the report stands.
        let left_out =
            |what: &str, e: anyhow::Error| format!("{e:#}; the report leaves out {what}");
        let probe = match probe::read_noted(dir) {
            Ok((p, w)) => {
                warnings.extend(w);
                p
            }
            Err(e) => {
                warnings.push(left_out("the probe", e));
                None
            }
        };
        let fsync = fsync::read(dir).unwrap_or_else(|e| {
            warnings.push(left_out("the fsync tests", e));
            vec![]
        });
        let proc_io = match crate::format::proc_io::read_noted(dir) {
            Ok((p, w)) => {
                warnings.extend(w);
                p
            }
            Err(e) => {
                warnings.push(left_out("the broker's own I/O", e));
                None
            }
        };
        let traced = meta.trace().is_some();
        let fsync_calls = match crate::format::fsync_calls::read(dir) {
            Ok((v, w)) => {
                warnings.extend(w);
                traced.then_some(v)
            }
            Err(e) => {
                warnings.push(left_out("the traced sync calls", e));
                None
            }
        };
        let block_requests = match crate::format::block_requests::read(dir) {
            Ok((v, w)) => {
                warnings.extend(w);
                traced.then_some(v)
            }
            Err(e) => {
                warnings.push(left_out("the traced block requests", e));
                None
            }
        };
        let varz = crate::format::monitor::read(dir, crate::format::monitor::VARZ_FILE)
            .unwrap_or_else(|e| {
                warnings.push(left_out("the broker's /varz beside traced calls", e));
                Default::default()
            });
        let mut hlog = |name: &str| {
            let p = dir.join(name);
            if !p.exists() {
                return vec![];
            }
            match hist::read(&p) {
                Ok(v) => v
                    .into_iter()
                    .filter(|i| i.start_ns.saturating_add(i.duration_ns) <= MAX_T_NS)
                    .collect(),
                Err(e) => {
                    warnings.push(left_out("the interference", e));
                    vec![]
                }
            }
        };
        let probe_hist = hlog(hist::PROBE_FILE);
        let load_hist = hlog(hist::LOAD_FILE);
        // Everything is binned over what the rows hold: meta's duration counts only as far
        // as a second past the last row (diskstats are written at least once a second).
        let last_seen = disks
            .iter()
            .filter_map(|d| d.t_ns.last().copied())
            .chain(mem.iter().filter_map(|t| t.t_ns.last().copied()))
            .max()
            .unwrap_or(0);
        let data_end = last_seen + 1_000_000_000;
        let duration_ns = match meta.duration_ns {
            Some(d) if d > data_end => {
                warnings.push(format!(
                    "{}: duration_ns {d} is past the last recorded row ({last_seen} ns); the report covers the rows",
                    dir.join(crate::format::meta::FILE).display()
                ));
                last_seen
            }
            Some(d) => d.max(last_seen),
            None => last_seen,
        };
        // A device that vanished mid-run (removed, or a loop device detached): its rows
        // end there; said with when, so its flat tail is not read as an idle device.
        for e in events.iter().filter(|e| e.kind == "device_gone") {
            warnings.push(format!(
                "{}: device {} vanished at {:.3} s{}; its rows end there",
                dir.join(crate::format::events::FILE).display(),
                e.detail_str("device").unwrap_or("?"),
                e.t_ns as f64 / 1e9,
                e.detail_str("why")
                    .map(|w| format!(" ({w})"))
                    .unwrap_or_default()
            ));
        }
        if !meta.complete {
            warnings.push(format!(
                "{}: the recording is incomplete (complete: false: it was cut short, by a crash or kill -9?); the report covers what it holds",
                dir.join(crate::format::meta::FILE).display()
            ));
        }
        let start_ns = if diskstats::first_chunks_deleted(dir) {
            disks
                .iter()
                .filter_map(|d| d.t_ns.first().copied())
                .min()
                .unwrap_or(0)
                .min(duration_ns)
        } else {
            0
        };
        Ok(Run {
            dir: dir.to_path_buf(),
            disks,
            mem,
            cpu,
            load,
            probe,
            fsync,
            proc_io,
            fsync_calls,
            block_requests,
            varz,
            probe_hist,
            load_hist,
            events,
            duration_ns,
            start_ns,
            meta,
            warnings,
        })
    }

    /// The reason a device is in the run (from meta.json), if recorded.
    pub fn device_why(&self, name: &str) -> Option<String> {
        self.meta.device_why(name)
    }
}
