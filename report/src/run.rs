//! Reading a run directory back, every file through its [`crate::format`] type. A
//! recording that was cut off (crash, `kill -9`, truncated gzip) is read up to the last
//! whole row, with a warning; one of another format version, or whose files are not what
//! they should be (empty, not gzip, another header, a span past
//! [`format::csv::MAX_T_NS`]), is refused as a bad input naming the file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::stream;
pub use format::csv::Table;
use format::csv::MAX_T_NS;
use format::diskstats;
pub use format::diskstats::DiskRows;
use format::events::{self, Body, Event};
use format::fsync::{self, FsyncRow};
use format::hist;
use format::load::{self, LoadRow};
use format::meta::{Meta, MetaError};
use format::probe::{self, ProbeRow};
use format::procfs;
use format::usage;

/// A recording, read back.
#[derive(Debug, Clone)]
pub struct Run {
    pub dir: PathBuf,
    pub meta: Meta,
    /// The devices of diskstats.csv.gz, in order of first appearance: what the rows said
    /// of each (the rows themselves are read as a stream, never held: [`stream`]).
    pub disks: Vec<Disk>,
    /// meminfo.csv folded as it was read ([`super::fold`]): bounded whatever the length.
    pub mem: Option<super::fold::Folded>,
    /// cpu.csv's busy and iowait shares folded as they were read, and its first and last
    /// rows ([`super::fold::CpuFolded`]).
    pub cpu: Option<super::fold::CpuFolded>,
    /// load.csv split by role (`js-pub`, `sub`, ...).
    pub load: BTreeMap<String, Vec<LoadRow>>,
    /// probe.csv split by direction (`read`, `write`, `sync`); None without a probe.
    pub probe: Option<BTreeMap<String, Vec<ProbeRow>>>,
    /// fsync.csv; empty without `diskpulse fsync`.
    pub fsync: Vec<FsyncRow>,
    /// proc_io.csv by pid: the broker processes' /proc/PID/io; None without it.
    pub proc_io: Option<Vec<format::proc_io::ProcRows>>,
    /// `--trace`: fsync_calls.csv.gz and block_requests.csv.gz folded as they were read
    /// (no row held: [`super::trace::TraceFold`]); None when the run was not traced
    /// (meta.json has no `trace`). A file that cannot be read is a warning and folds
    /// as empty.
    pub trace: Option<super::trace::TraceFold>,
    /// varz.csv by server (what the broker was doing at a traced call); empty without.
    pub varz: BTreeMap<String, Table>,
    /// rabbitmq_metrics.csv by node (an embedded RabbitMQ's own counters); empty without.
    pub rabbit: BTreeMap<String, Table>,
    /// probe.hlog and load.hlog: every window's latency histogram; empty without them.
    pub(crate) probe_hist: Vec<hist::Interval>,
    pub(crate) load_hist: Vec<hist::Interval>,
    pub events: Vec<Event>,
    /// The diskstats files, in order ([`diskstats::files`]: the closed chunks, then the
    /// current one).
    diskstats_files: Vec<PathBuf>,
    /// Where the recording's rows start: 0, or the first kept row when `record --keep`
    /// deleted its first chunks (the report draws and averages from there, not over
    /// zeros that were never recorded). Set with [`Run::set_disks`].
    pub start_ns: u64,
    /// End of the recording: meta's duration, or the last timestamp seen if cut off (or
    /// if meta's duration claims more than the rows hold).
    pub duration_ns: u64,
    /// What was wrong but still read (a cut-off end, damaged lines skipped, an
    /// incomplete recording), each naming its file (and line): `report` prints them.
    pub warnings: Vec<String>,
}

/// What meta.json itself lacks, and each file against its manifest (missing, cut,
/// replaced or foreign: [`format::manifest::check`]). A meta.json without
/// `clock_zero_unix_ns` takes the zero from `start_wall` (the same instant, read a few
/// µs apart), so wall-clock times do not fall in 1970; said in a warning.
fn check_meta(dir: &Path, meta: &mut Meta) -> Vec<String> {
    let mut warnings = vec![];
    let file = dir.join(format::meta::FILE);
    // A zero after 2200 is no clock's (a flipped byte, a hand edit): `zero + t_ns`
    // overflowed u64 (a panic in rates.csv and export). Taken as absent, so start_wall
    // stands in for it below.
    if meta.clock_zero_unix_ns > YEAR_2200_UNIX_NS {
        warnings.push(format!(
            "{}: clock_zero_unix_ns {} is after the year 2200, no clock's time (the file is damaged): it is left out",
            file.display(),
            meta.clock_zero_unix_ns
        ));
        meta.clock_zero_unix_ns = 0;
    }
    if meta.clock_zero_unix_ns == 0 {
        match chrono::DateTime::parse_from_rfc3339(&meta.start_wall)
            .ok()
            .and_then(|t| t.timestamp_nanos_opt())
            .and_then(|n| u64::try_from(n).ok())
        {
            Some(n) => {
                meta.clock_zero_unix_ns = n;
                warnings.push(format!(
                    "{}: no clock_zero_unix_ns (the file is damaged or hand-made): wall-clock times (rates.csv unix_ms) are taken from start_wall {}",
                    file.display(),
                    meta.start_wall
                ));
            }
            None => warnings.push(format!(
                "{}: no clock_zero_unix_ns nor a start_wall: wall-clock times (rates.csv unix_ms) count from 1970; the run's own times (t_ns) are right",
                file.display()
            )),
        }
    }
    // One in the future: the recording host's clock was ahead (or the file was edited);
    // its wall-clock times are as it recorded them, and said to be.
    let now_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    if meta.clock_zero_unix_ns > now_ns.saturating_add(DAY_NS) {
        warnings.push(format!(
            "{}: clock_zero_unix_ns {} is {} days in the future: the recording host's clock was ahead (or the file is damaged); wall-clock times (rates.csv unix_ms, export) are as recorded, the run's own times (t_ns) are right",
            file.display(),
            meta.clock_zero_unix_ns,
            (meta.clock_zero_unix_ns - now_ns) / DAY_NS
        ));
    }
    warnings.extend(format::manifest::check(dir, meta));
    warnings
}

/// 2200-01-01T00:00:00Z in ns since the Unix epoch: a later clock zero is damage.
const YEAR_2200_UNIX_NS: u64 = 7_258_118_400 * 1_000_000_000;
const DAY_NS: u64 = 86_400 * 1_000_000_000;

/// What the rows said of one device ([`Run::disks`]).
#[derive(Debug, Clone, Default)]
pub struct Disk {
    pub name: String,
    pub major: u32,
    pub minor: u32,
    pub rows: usize,
    pub first_t_ns: Option<u64>,
    pub last_t_ns: Option<u64>,
    /// Bytes written and read over the run.
    pub write_bytes: f64,
    pub read_bytes: f64,
}

impl Disk {
    /// Whether it wrote or read anything.
    pub fn busy(&self) -> bool {
        self.write_bytes > 0.0 || self.read_bytes > 0.0
    }
}

impl Run {
    /// Reads a run directory. A directory without a diskpulse `meta.json` is a usage error.
    /// The diskstats rows are read once as a stream, counted, not held
    /// ([`Run::disk_rows`] holds them).
    pub fn read(dir: &Path) -> anyhow::Result<Run> {
        let mut run = Run::read_head(dir)?;
        let p = stream::count(&run.diskstats_files, run.row_limit_ns()).map_err(|e| run.bad(e))?;
        run.set_disks(&p);
        Ok(run)
    }

    /// The time past which a diskstats row is damage: a finished recording's end
    /// (meta.json `complete`, `duration_ns`) and 2 s (rows are written up to the end);
    /// None while a recording goes on or without a duration.
    pub(crate) fn row_limit_ns(&self) -> Option<u64> {
        match (self.meta.complete, self.meta.duration_ns) {
            (true, Some(d)) if d > 0 => Some(d.saturating_add(2_000_000_000)),
            _ => None,
        }
    }

    /// A bad diskstats file as a usage error naming the run.
    pub fn bad(&self, e: anyhow::Error) -> anyhow::Error {
        usage!("RUN '{}': {e:#}", self.dir.display())
    }

    /// Reads every file of a run directory but the diskstats rows: [`Run::disks`] is
    /// empty and [`Run::duration_ns`] 0 until [`Run::set_disks`].
    pub fn read_head(dir: &Path) -> anyhow::Result<Run> {
        let not_rec = |why: &str| {
            usage!(
                "RUN '{}' is not a diskpulse recording ({why}); pass a directory made by `diskpulse record` or `diskpulse demo`",
                dir.display()
            )
        };
        if !dir.is_dir() {
            return Err(not_rec("not a directory"));
        }
        let mut meta = match Meta::read(dir) {
            Ok(m) => m,
            Err(MetaError::NotARecording(why)) => return Err(not_rec(why)),
            Err(e) => return Err(usage!("RUN '{}': {e}", dir.display())),
        };
        if let Some(d) = meta.duration_ns.filter(|&d| d > MAX_T_NS) {
            return Err(usage!(
                "RUN '{}': meta.json duration_ns {d} is {:.0} days; a report reads runs of at most {} days: the file is damaged",
                dir.display(),
                d as f64 / 8.64e13,
                format::csv::MAX_DAYS
            ));
        }
        // A file that is not what it should be is a bad input (exit 2), named by the error.
        let bad = |e: anyhow::Error| usage!("RUN '{}': {e:#}", dir.display());
        let mut warnings = check_meta(dir, &mut meta);
        // Every chunk of a chunked run (`record --chunk`) in order, or the one file.
        let ds_files = diskstats::files(dir);
        if ds_files.is_empty() {
            return Err(not_rec("no diskstats.csv.gz"));
        }
        let mem = super::fold::Folded::read_chunked(
            dir,
            procfs::MEMINFO_FILE,
            &procfs::meminfo_columns(),
            super::fold::MAX_WINDOWS,
        )
        .map_err(bad)?
        .map(|(f, w)| {
            warnings.extend(w);
            f
        });
        let cpu = super::fold::CpuFolded::read_chunked(dir, super::fold::MAX_WINDOWS)
            .map_err(bad)?
            .map(|(c, w)| {
                warnings.extend(w);
                c
            });
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
        let proc_io = match format::proc_io::read_noted(dir) {
            Ok((p, w)) => {
                warnings.extend(w);
                p
            }
            Err(e) => {
                warnings.push(left_out("the broker's own I/O", e));
                None
            }
        };
        let trace = meta.trace().is_some().then(|| {
            let (fold, w, errors) = super::trace::TraceFold::read(dir);
            warnings.extend(w);
            for (what, e) in errors {
                warnings.push(left_out(what, e));
            }
            fold
        });
        let varz = format::monitor::read(dir, format::monitor::VARZ_FILE).unwrap_or_else(|e| {
            warnings.push(left_out("the broker's /varz beside traced calls", e));
            Default::default()
        });
        let rabbit =
            format::monitor::read(dir, format::monitor::RABBITMQ_FILE).unwrap_or_else(|e| {
                warnings.push(left_out("the RabbitMQ node's own counters", e));
                Default::default()
            });
        let mut hlog = |name: &str| {
            // The current file and its closed chunks (`record --chunk`).
            match hist::read_run_noted(dir, name) {
                Ok((v, w)) => {
                    warnings.extend(w);
                    v.into_iter()
                        .filter(|i| i.start_ns.saturating_add(i.duration_ns) <= MAX_T_NS)
                        .collect()
                }
                Err(e) => {
                    warnings.push(left_out("the interference", e));
                    vec![]
                }
            }
        };
        let probe_hist = hlog(hist::PROBE_FILE);
        let load_hist = hlog(hist::LOAD_FILE);
        Ok(Run {
            dir: dir.to_path_buf(),
            disks: vec![],
            diskstats_files: ds_files,
            mem,
            cpu,
            load,
            probe,
            fsync,
            proc_io,
            trace,
            varz,
            rabbit,
            probe_hist,
            load_hist,
            events,
            duration_ns: 0,
            start_ns: 0,
            meta,
            warnings,
        })
    }

    /// The run's end once the last row is known ([`Run::duration_ns`]): meta's duration,
    /// as far as a second past the last row (diskstats are written at least once a
    /// second), or the last row when meta.json has none or claims more.
    pub(crate) fn duration_with(&self, last_disk_row: Option<u64>) -> u64 {
        self.duration_and_warning(last_disk_row).0
    }

    fn duration_and_warning(&self, last_disk_row: Option<u64>) -> (u64, Option<String>) {
        let last_seen = last_disk_row
            .into_iter()
            .chain(self.mem.iter().filter_map(|m| m.last_t_ns))
            .max()
            .unwrap_or(0);
        let data_end = last_seen + 1_000_000_000;
        match self.meta.duration_ns {
            Some(d) if d > data_end => (
                last_seen,
                Some(format!(
                    "{}: duration_ns {d} is past the last recorded row ({last_seen} ns); the report covers the rows",
                    self.dir.join(format::meta::FILE).display()
                )),
            ),
            // A row far past a finished run's end is damage (a flipped byte in a gzip
            // stream read as t_ns) or another run's: believed, it set the windows of
            // every series to its time and filled the disk with empty ones (days of 1 ms
            // windows). Rows are written up to the end, so 2 s is slack enough.
            Some(d) if last_seen > d.saturating_add(2_000_000_000) => (
                d,
                Some(format!(
                    "{}: rows go on to {last_seen} ns, {:.0} s past the run's end ({} duration_ns {d}): those rows are damaged or from another run; the report covers the run's duration",
                    self.dir.display(),
                    (last_seen - d) as f64 / 1e9,
                    format::meta::FILE
                )),
            ),
            Some(d) => (d.max(last_seen), None),
            None => (last_seen, None),
        }
    }

    /// Sets the devices and the run's end from a pass over the rows ([`stream::pass`] or
    /// [`stream::count`]) and adds its warnings (the rows' first, as they are read first).
    pub(crate) fn set_disks(&mut self, p: &stream::Pass) {
        self.disks = p
            .devices
            .iter()
            .zip(&p.accs)
            .map(|(d, a)| Disk {
                name: d.name.clone(),
                major: d.major,
                minor: d.minor,
                rows: a.rows,
                first_t_ns: a.first_t_ns,
                last_t_ns: a.last_t_ns,
                write_bytes: a.write.bytes,
                read_bytes: a.read.bytes,
            })
            .collect();
        let (duration, w) = self.duration_and_warning(p.last_t_ns());
        self.duration_ns = duration;
        self.start_ns = if diskstats::first_chunks_deleted(&self.dir) {
            p.accs
                .iter()
                .filter_map(|a| a.first_t_ns)
                .min()
                .unwrap_or(0)
                .min(duration)
        } else {
            0
        };
        let mut warnings = p.warnings.clone();
        warnings.append(&mut self.warnings);
        warnings.extend(w);
        if self.meta.device_filter == "listed" && !self.meta.devices.is_empty() {
            for d in self
                .disks
                .iter()
                .filter(|d| !self.meta.devices.iter().any(|m| m.name == d.name))
            {
                warnings.push(format!(
                    "{}: {} rows of device {}, which meta.json's devices (device_filter listed) does not name: not recorded by this run (rows copied in from another?); shown, but not of this recording",
                    self.diskstats_files.last().unwrap_or(&self.dir).display(),
                    d.rows,
                    d.name
                ));
            }
        }
        // A device that vanished mid-run (removed, or a loop device detached): its rows
        // end there; said with when, so its flat tail is not read as an idle device.
        let dir = &self.dir;
        for (t_ns, g) in self.events.iter().filter_map(|e| match &e.body {
            Body::DeviceGone(g) => Some((e.t_ns, g)),
            _ => None,
        }) {
            warnings.push(format!(
                "{}: device {} vanished at {:.3} s{}; its rows end there",
                dir.join(format::events::FILE).display(),
                g.device,
                t_ns as f64 / 1e9,
                g.why
                    .as_ref()
                    .map(|w| format!(" ({w})"))
                    .unwrap_or_default()
            ));
        }
        if !self.meta.complete {
            warnings.push(format!(
                "{}: the recording is incomplete (complete: false: it was cut short, by a crash or kill -9?); the report covers what it holds",
                dir.join(format::meta::FILE).display()
            ));
        }
        if let Some(w) = self.meta.clock.as_ref().and_then(|c| c.warning()) {
            warnings.push(w);
        }
        self.warnings = warnings;
    }

    /// The diskstats files of the run, in order ([`diskstats::files`]).
    pub(crate) fn diskstats_files(&self) -> &[PathBuf] {
        &self.diskstats_files
    }

    /// Every diskstats row in memory, grouped by device (144 bytes a row: `export` and
    /// tests; `report` streams them).
    pub fn disk_rows(&self) -> anyhow::Result<Vec<DiskRows>> {
        let mut out: Vec<DiskRows> = vec![];
        diskstats::for_each_row_until(
            &self.diskstats_files,
            self.row_limit_ns(),
            |k, dev, t, row| {
                if k == out.len() {
                    out.push(DiskRows {
                        name: dev.name.clone(),
                        major: dev.major,
                        minor: dev.minor,
                        ..Default::default()
                    });
                }
                out[k].t_ns.push(t);
                out[k].f.push(*row);
            },
        )?;
        Ok(out)
    }

    /// The reason a device is in the run (from meta.json), if recorded.
    pub fn device_why(&self, name: &str) -> Option<String> {
        self.meta.device_why(name)
    }
}
