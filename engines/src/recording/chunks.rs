//! Recording for days (issue 13 item 1): diskstats.csv.gz cut into chunks, retention
//! (`--keep`) and triggers that keep the window around an event (`--trigger`, SIGUSR1).
//!
//! The writer thread of diskstats.csv.gz cuts the file (`writer::Rotate`): a closed
//! chunk is fsynced and renamed to `chunks/diskstats.NNNNNN.csv.gz`; the current one is
//! always `diskstats.csv.gz`. As each chunk closes, [`Flight::closed`] (on that writer
//! thread) lists it, deletes the closed chunks older than `--keep` that no kept window
//! overlaps, and rewrites meta.json's `chunks` through the recording's shared meta.
//!
//! Triggers ([`TriggerFeed`]) watch every sample of every device on the diskstats
//! thread: per device, the counters at the start of a >= 10 ms window against the
//! sample that ends it (`write_mibps`, `read_mibps`: sectors x 512 / elapsed;
//! `await_ms`: (read_ms + write_ms) / (reads + writes) completed in the window, as
//! iostat's await). A firing writes a `trigger` event and keeps `[t - window, t +
//! window]` ([`Flight::keep`]); the same trigger on the same device fires again only
//! after its window has passed (a longer burst extends the kept window instead).
//!
//! Long because its tests live beside it; the code is under 690 lines.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use collectors::diskstats::{
    DiskCounters, F_READS, F_READ_MS, F_SECTORS_READ, F_SECTORS_WRITTEN, F_WRITES, F_WRITE_MS,
};

use super::writer::{Closed, Rotate};
use super::EventLog;
use format::diskstats::CHUNK_DIR;
use format::events::{self as ev, Body};
use format::meta::{ChunkFile, ChunksMeta, KeptWindow, Meta};

/// The default `--chunk`: an hour of rows per chunk.
const DEFAULT_CHUNK_NS: u64 = 3_600_000_000_000;
/// The default `--trigger-window`: 2 minutes before and after.
const DEFAULT_WINDOW_NS: u64 = 120_000_000_000;
/// The span a rate or await trigger is measured over (at least; the sample that ends it
/// is the first at or past it).
const TRIGGER_SPAN_NS: u64 = 10_000_000;

/// The most `--trigger`s a recording takes.
pub const MAX_TRIGGERS: usize = 8;

/// How a recording cuts diskstats.csv.gz, what it keeps, and what triggers a keep.
#[derive(Debug, Clone)]
pub struct ChunkSetup {
    pub every_ns: Option<u64>,
    pub every_bytes: Option<u64>,
    pub keep_ns: Option<u64>,
    pub triggers: Vec<Trigger>,
    pub window_ns: u64,
}

impl Default for ChunkSetup {
    fn default() -> Self {
        ChunkSetup {
            every_ns: Some(DEFAULT_CHUNK_NS),
            every_bytes: None,
            keep_ns: None,
            triggers: vec![],
            window_ns: DEFAULT_WINDOW_NS,
        }
    }
}

/// What a trigger measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Measure {
    WriteMibps,
    ReadMibps,
    AwaitMs,
    /// A load.csv window's `lat_p99_us` in ms ([`super::ack_trigger`]): the load's, not
    /// a device's.
    AckP99Ms,
}

impl Measure {
    const NAMES: [&'static str; 4] = ["write_mibps", "read_mibps", "await_ms", "ack_p99_ms"];
}

/// `[DEVICE:]MEASURE>VALUE`, e.g. `write_mibps>400` (any recorded device) or
/// `loop4:await_ms>50` (that one only); `[ROLE:]ack_p99_ms>50` (the load's acked roles,
/// or that load.csv role only).
#[derive(Debug, Clone, PartialEq)]
pub struct Trigger {
    pub text: String,
    /// The device (diskstats measures) or the load.csv role (`ack_p99_ms`) watched;
    /// `None`: every device, or every acked role.
    pub device: Option<String>,
    pub measure: Measure,
    pub above: f64,
}

/// What a run's triggers can watch, known before it starts (issue 25 point 9: a
/// flight recorder with a typo in its trigger ran for days and kept nothing).
pub struct TriggerSources<'a> {
    /// The devices the run records (as diskstats names them); `None` when they are only
    /// known once the run has made them (a scenario's lab volumes).
    pub devices: Option<&'a [String]>,
    /// The load.csv roles the run's load writes; `None` when unknown (`record -- CMD`:
    /// the command may run any load).
    pub roles: Option<&'a [String]>,
}

/// Refuses a trigger whose source can never exist in this run: a `DEVICE:` not among
/// the recorded devices, an `ack_p99_ms` on a run without that load.csv role (or, bare,
/// without any acked role). The message names the trigger and lists what exists.
pub fn check_sources(triggers: &[Trigger], s: &TriggerSources) -> Result<(), String> {
    let list = |v: &[String]| {
        if v.is_empty() {
            "none".to_string()
        } else {
            v.join(", ")
        }
    };
    for t in triggers {
        match (t.measure, t.device.as_deref()) {
            (Measure::AckP99Ms, role) => {
                let Some(roles) = s.roles else { continue };
                let acked: Vec<String> = roles
                    .iter()
                    .filter(|r| super::ack_trigger::ACKED_ROLES.contains(&r.as_str()))
                    .cloned()
                    .collect();
                let why = if roles.is_empty() {
                    Some("this run runs no load, so no load.csv is written; drop the trigger, or run a load (`record -- diskpulse load ...`, a load phase)".to_string())
                } else {
                    match role {
                        Some(r) if !roles.iter().any(|x| x == r) => Some(format!(
                            "this run's load writes the load.csv roles {}, not '{r}'; name one of those, or drop the trigger",
                            list(roles)
                        )),
                        None if acked.is_empty() => Some(format!(
                            "a bare ack_p99_ms watches the acked roles ({}) and this run's load writes {}; name one of those (ROLE:ack_p99_ms>V), or drop the trigger",
                            super::ack_trigger::ACKED_ROLES.join(", "),
                            list(roles)
                        )),
                        _ => None,
                    }
                };
                if let Some(why) = why {
                    return Err(format!("'{}' can never fire: {why}", t.text));
                }
            }
            (_, Some(d)) => {
                let Some(devices) = s.devices else { continue };
                if !devices.iter().any(|x| x == d) {
                    return Err(format!(
                        "'{}' can never fire: no device '{d}' is recorded in this run (recorded: {}); name one of those, or leave out '{d}:' to watch every recorded device",
                        t.text,
                        list(devices)
                    ));
                }
            }
            (_, None) => {}
        }
    }
    Ok(())
}

/// Parses `--trigger`: `write_mibps>400`, `read_mibps>100`, `await_ms>50`, each optionally
/// after `DEVICE:` (a name as in diskstats.csv.gz, e.g. `nvme0n1:await_ms>20`), and
/// `ack_p99_ms>50`, optionally after a load.csv role (`kv-put:ack_p99_ms>20`).
pub fn parse_trigger(s: &str) -> Result<Trigger, String> {
    let t: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    let bad = || {
        format!(
            "takes [DEVICE:]MEASURE>VALUE with MEASURE one of {} (the disk ones over {} ms; ack_p99_ms a load.csv window's p99, after an optional ROLE: instead of a device), e.g. 'write_mibps>400', 'vdb:await_ms>50' or 'ack_p99_ms>50'; got '{s}'",
            Measure::NAMES.join(", "),
            TRIGGER_SPAN_NS / 1_000_000
        )
    };
    let (device, cond) = match t.split_once(':') {
        Some((d, c)) if !d.is_empty() && !d.contains(['>', ',', '/']) => (Some(d.to_string()), c),
        Some(_) => return Err(bad()),
        None => (None, t.as_str()),
    };
    let (m, v) = cond.split_once('>').ok_or_else(bad)?;
    let measure = match m {
        "write_mibps" => Measure::WriteMibps,
        "read_mibps" => Measure::ReadMibps,
        "await_ms" => Measure::AwaitMs,
        "ack_p99_ms" => Measure::AckP99Ms,
        _ => return Err(bad()),
    };
    if measure == Measure::AckP99Ms {
        if let Some(r) = device.as_deref() {
            let names = format::load::ROLE_NAMES;
            if !names.contains(&r) {
                return Err(format!(
                    "'{s}': ack_p99_ms watches a load.csv role, and '{r}' is none; give one of {} or no ROLE: (then {})",
                    names.join(", "),
                    super::ack_trigger::ACKED_ROLES.join(", ")
                ));
            }
        }
    }
    let above: f64 = v.parse().map_err(|_| bad())?;
    if !above.is_finite() || above < 0.0 {
        return Err(bad());
    }
    Ok(Trigger {
        text: t.clone(),
        device,
        measure,
        above,
    })
}

/// Where a recording's files go: its directory and, when it is chunked (`--chunk`), the
/// [`Flight`] that cuts them. What writes files beside the recording (the broker
/// monitor, the trace, an embedded RabbitMQ node's metrics, the agents' collector)
/// takes one, so its files are cut and dropped by the same rules.
#[derive(Clone)]
pub struct RunFiles {
    pub dir: PathBuf,
    pub flight: Option<Arc<Flight>>,
}

impl RunFiles {
    /// Files in `dir`, not chunked.
    pub fn plain(dir: &Path) -> RunFiles {
        RunFiles {
            dir: dir.to_path_buf(),
            flight: None,
        }
    }

    /// [`Flight::sink`] for `file` of this run.
    pub fn sink(
        &self,
        file: &'static str,
        header: &str,
        level: Option<u32>,
    ) -> anyhow::Result<super::writer::ChunkSink> {
        Flight::sink_at(self.flight.as_ref(), &self.dir, file, header, level, 0)
    }

    /// [`Flight::sink_at`] for `file` of this run (`t_ns` in cell `t_cell`).
    pub(crate) fn sink_at(
        &self,
        file: &'static str,
        header: &str,
        level: Option<u32>,
        t_cell: usize,
    ) -> anyhow::Result<super::writer::ChunkSink> {
        Flight::sink_at(self.flight.as_ref(), &self.dir, file, header, level, t_cell)
    }
}

/// The state shared by the diskstats writer thread (chunks closing), the diskstats
/// sampler (triggers) and the recording (signals, meta.json).
pub struct Flight {
    setup: ChunkSetup,
    dir: PathBuf,
    meta: Arc<Mutex<Meta>>,
    state: Mutex<ChunksMeta>,
    events: EventLog,
}

impl Flight {
    pub fn new(
        setup: ChunkSetup,
        dir: &Path,
        meta: Arc<Mutex<Meta>>,
        events: EventLog,
    ) -> Arc<Flight> {
        let state = ChunksMeta {
            chunk_ns: setup.every_ns,
            chunk_bytes: setup.every_bytes,
            keep_ns: setup.keep_ns,
            triggers: setup.triggers.iter().map(|t| t.text.clone()).collect(),
            trigger_window_ns: setup.window_ns,
            ..Default::default()
        };
        Arc::new(Flight {
            setup,
            dir: dir.to_path_buf(),
            meta,
            state: Mutex::new(state),
            events,
        })
    }

    /// The writer's rotation for diskstats.csv.gz, reporting to this flight.
    pub fn rotate(self: &Arc<Self>) -> Rotate {
        self.rotate_file(format::diskstats::FILE)
    }

    /// The writer's rotation for `file` of the run directory (diskstats.csv.gz,
    /// meminfo.csv, ...): the same `--chunk`, its closed chunks
    /// `chunks/<stem>.NNNNNN.<ext>`, the same `--keep` and kept windows.
    fn rotate_file(self: &Arc<Self>, file: &'static str) -> Rotate {
        self.rotate_file_at(file, 0)
    }

    /// As [`Flight::rotate_file`] for a file whose rows hold `t_ns` in cell `t_cell`
    /// (the agents' files: `node,t_ns,...`).
    fn rotate_file_at(self: &Arc<Self>, file: &'static str, t_cell: usize) -> Rotate {
        let me = self.clone();
        Rotate {
            every_ns: self.setup.every_ns,
            every_bytes: self.setup.every_bytes,
            dir: self.dir.join(CHUNK_DIR),
            name: Box::new(move |seq| format::csv::chunk_name_of(file, seq)),
            on_close: Box::new(move |c| me.closed(file, c)),
            t_cell,
        }
    }

    /// A [`ChunkSink`] for `file` in the run directory: cut into chunks by this flight
    /// when there is one, else a plain one. `level`: gzip level, `None` plain text.
    pub fn sink(
        flight: Option<&Arc<Self>>,
        dir: &Path,
        file: &'static str,
        header: &str,
        level: Option<u32>,
    ) -> anyhow::Result<super::writer::ChunkSink> {
        Self::sink_at(flight, dir, file, header, level, 0)
    }

    /// As [`Flight::sink`] for rows holding `t_ns` in cell `t_cell`.
    pub(crate) fn sink_at(
        flight: Option<&Arc<Self>>,
        dir: &Path,
        file: &'static str,
        header: &str,
        level: Option<u32>,
        t_cell: usize,
    ) -> anyhow::Result<super::writer::ChunkSink> {
        let path = dir.join(file);
        match flight {
            Some(f) => super::writer::ChunkSink::create_rotating(
                &path,
                header,
                level,
                f.rotate_file_at(file, t_cell),
            ),
            None => super::writer::ChunkSink::create_at(&path, header, level),
        }
    }

    /// `--trigger-window`.
    pub fn window_ns(&self) -> u64 {
        self.setup.window_ns
    }

    /// Keeps `[t - window, t + window]` from retention because of `what` (a firing;
    /// `""`: the same condition still holding, which only extends the window).
    pub fn keep(&self, t_ns: u64, what: &str) {
        let w = self.setup.window_ns;
        let (from, to) = (t_ns.saturating_sub(w), t_ns.saturating_add(w));
        let Ok(mut s) = self.state.lock() else { return };
        // An ack trigger reports a load.csv window ~0.4 s after it ended: its window may
        // begin before the last kept one.
        match s.kept_windows.last_mut() {
            Some(k) if from <= k.to_t_ns && to >= k.from_t_ns => {
                k.from_t_ns = k.from_t_ns.min(from);
                k.to_t_ns = k.to_t_ns.max(to);
                if !what.is_empty() && k.what.len() < 1000 {
                    k.what = format!("{}; {what}", k.what);
                }
            }
            _ => s.kept_windows.push(KeptWindow {
                from_t_ns: from,
                to_t_ns: to,
                what: what.to_string(),
            }),
        }
    }

    /// A chunk of `file` closed (its writer thread): list it, apply retention, rewrite
    /// meta.json.
    fn closed(&self, file_name: &str, c: &Closed) {
        let file = c
            .path
            .strip_prefix(&self.dir)
            .unwrap_or(&c.path)
            .display()
            .to_string();
        let entry = ChunkFile {
            file,
            first_t_ns: c.first_t_ns,
            last_t_ns: c.last_t_ns,
            rows: c.rows,
            bytes: c.bytes,
            why: None,
        };
        let snapshot = {
            let Ok(mut s) = self.state.lock() else { return };
            let ChunksMeta {
                closed,
                dropped,
                kept_windows,
                files,
                ..
            } = &mut *s;
            let (closed, dropped) = if file_name == format::diskstats::FILE {
                (closed, dropped)
            } else {
                if c.last && !files.contains_key(file_name) {
                    return;
                }
                let f = files.entry(file_name.to_string()).or_default();
                (&mut f.closed, &mut f.dropped)
            };
            if c.last && closed.is_empty() {
                // Never rotated: a run like one before chunking; meta.json says nothing.
                return;
            }
            closed.push(entry);
            if let Some(keep) = self.setup.keep_ns {
                let newest = c.last_t_ns;
                for f in drop_list_of(closed, dropped, kept_windows, keep, newest) {
                    match std::fs::remove_file(self.dir.join(&f.file)) {
                        Ok(()) => {
                            self.events.event(Body::ChunkDropped(ev::ChunkDropped {
                                file: f.file.clone(),
                                first_t_ns: f.first_t_ns,
                                last_t_ns: f.last_t_ns,
                                rows: f.rows,
                            }));
                            dropped.push(f);
                        }
                        Err(e) => self
                            .events
                            .error("chunks", "drop", &format!("{}: {e}", f.file)),
                    }
                }
            }
            s.clone()
        };
        if let Ok(mut m) = self.meta.lock() {
            m.chunks = Some(snapshot);
            if let Err(e) = m.write(&self.dir.join(format::meta::FILE)) {
                self.events.error("chunks", "meta", &format!("{e:#}"));
            }
        }
    }

    /// The chunk list and kept windows as they stand, rotated or not.
    #[cfg(test)]
    pub(crate) fn snapshot_state(&self) -> ChunksMeta {
        self.state.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// meta.json's `chunks` as it stands (`None` before the first rotation).
    pub fn snapshot(&self) -> Option<ChunksMeta> {
        let s = self.state.lock().ok()?;
        (!s.closed.is_empty() || !s.files.is_empty()).then(|| s.clone())
    }
}

/// The files of the run directory other processes append to while the recorder runs
/// (`record -- diskpulse load`, `run` phases), cut by [`SharedRotator`].
const SHARED_FILES: [&str; 2] = [format::load::FILE, format::hist::LOAD_FILE];

/// How long past a chunk boundary the rotator waits before cutting load.csv/load.hlog:
/// a load window is written when it closes plus the collector's ~0.1-0.4 s, so most
/// windows before the boundary land in the chunk they belong to (the rest in the next
/// one: chunks record their actual first and last `t_ns`).
const SHARED_GRACE_NS: u64 = 500_000_000;

/// Cuts load.csv and load.hlog, which other processes append to, into
/// `chunks/load.NNNNNN.csv` / `chunks/load.NNNNNN.hlog` by the flight's `--chunk`
/// (time: at each aligned boundary plus [`SHARED_GRACE_NS`], at most a quarter
/// chunk; size: when the file passes `--chunk` bytes) through
/// [`super::writer::rotate_shared`] (a rename under the appenders' flock; they reopen,
/// [`super::writer::SharedAppend`]); each closed chunk goes through
/// [`Flight::closed`], so `--keep`, kept windows and meta.json `chunks.files` treat
/// them as every other file's.
pub(crate) struct SharedRotator {
    handle: std::thread::JoinHandle<()>,
}

/// The `t_ns` of a load.csv row (its first cell) or of a load.hlog interval line
/// (`Tag=...,start_s,...`); `None` for a header or comment line.
fn shared_row_t(line: &str) -> Option<u64> {
    if let Some(rest) = line.strip_prefix("Tag=") {
        let s = rest.split(',').nth(1)?;
        let (whole, frac) = s.split_once('.').unwrap_or((s, ""));
        let frac = format!("{frac:0<9}");
        return Some(
            whole.parse::<u64>().ok()? * 1_000_000_000 + frac.get(..9)?.parse::<u64>().ok()?,
        );
    }
    format::csv::t_ns_cell(line.split(',').next()?).ok()
}

/// A closed (or the last) chunk of a shared file: its rows, first and last `t_ns`.
fn shared_closed(path: &Path, last: bool) -> Option<Closed> {
    let raw = std::fs::read(path).ok()?;
    let bytes = raw.len() as u64;
    let text = String::from_utf8_lossy(&raw);
    let (mut first, mut last_t, mut rows) = (u64::MAX, 0u64, 0u64);
    for l in text.lines() {
        if let Some(t) = shared_row_t(l) {
            first = first.min(t);
            last_t = last_t.max(t);
            rows += 1;
        }
    }
    Some(Closed {
        path: path.to_path_buf(),
        first_t_ns: if rows == 0 { 0 } else { first },
        last_t_ns: last_t,
        rows,
        bytes,
        last,
    })
}

impl SharedRotator {
    /// Starts cutting `dir`'s shared files; polls every 100 ms until `stop`.
    pub fn start(
        flight: &Arc<Flight>,
        dir: &Path,
        clock: collectors::clock::Clock,
        stop: Arc<std::sync::atomic::AtomicBool>,
    ) -> anyhow::Result<SharedRotator> {
        let f = flight.clone();
        let dir = dir.to_path_buf();
        let handle = std::thread::Builder::new()
            .name("load-chunks".into())
            .spawn(move || {
                let every = f.setup.every_ns;
                let grace = every.map_or(0, |e| SHARED_GRACE_NS.min(e / 4));
                let mut seq = [1u64; SHARED_FILES.len()];
                let mut next_cut = every.map(|e| (clock.now_ns() / e + 1) * e);
                loop {
                    let last = stop.load(std::sync::atomic::Ordering::Relaxed);
                    let now = clock.now_ns();
                    let by_time = next_cut.is_some_and(|c| now >= c + grace);
                    if by_time {
                        let e = every.expect("a cut time comes from every_ns");
                        next_cut = Some((now / e + 1) * e);
                    }
                    for (i, file) in SHARED_FILES.iter().enumerate() {
                        let path = dir.join(file);
                        let big = f
                            .setup
                            .every_bytes
                            .is_some_and(|b| std::fs::metadata(&path).is_ok_and(|m| m.len() >= b));
                        if !(by_time || big) || last {
                            continue;
                        }
                        f.cut_shared(&path, file, &mut seq[i]);
                    }
                    if last {
                        for file in SHARED_FILES {
                            if let Some(c) = shared_closed(&dir.join(file), true) {
                                f.closed(file, &c);
                            }
                        }
                        break;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(100));
                }
            })?;
        Ok(SharedRotator { handle })
    }

    /// Waits for the last cut and listing (call after setting the stop flag).
    pub fn join(self) {
        let _ = self.handle.join();
    }
}

impl Flight {
    /// Moves the shared `path` into chunk `seq` (then the next number) and lists it.
    fn cut_shared(&self, path: &Path, file: &'static str, seq: &mut u64) {
        let chunks = self.dir.join(CHUNK_DIR);
        let to = chunks.join(format::csv::chunk_name_of(file, *seq));
        let head = std::fs::File::open(path).and_then(|f| {
            let mut b = Vec::new();
            std::io::Read::read_to_end(&mut std::io::Read::take(f, 64 << 10), &mut b)?;
            Ok(b)
        });
        let header_bytes = match head {
            // The header: every line before the first row.
            Ok(b) => String::from_utf8_lossy(&b)
                .split_inclusive('\n')
                .take_while(|l| shared_row_t(l.trim_end()).is_none())
                .map(|l| l.len() as u64)
                .sum(),
            Err(_) => return,
        };
        let _ = std::fs::create_dir_all(&chunks);
        match super::writer::rotate_shared(path, &to, header_bytes) {
            Ok(true) => {
                *seq += 1;
                if let Some(c) = shared_closed(&to, false) {
                    self.closed(file, &c);
                }
            }
            Ok(false) => {}
            Err(e) => self
                .events
                .error("chunks", "rotate", &format!("{}: {e}", path.display())),
        }
    }
}

/// The closed chunks retention deletes now: every closed chunk, not already dropped and
/// not the newest, whose last row is more than `keep` before `newest` and that no kept
/// window overlaps; each with its `why`.
#[cfg(test)]
fn drop_list(s: &ChunksMeta, keep: u64, newest: u64) -> Vec<ChunkFile> {
    drop_list_of(&s.closed, &s.dropped, &s.kept_windows, keep, newest)
}

/// [`drop_list`] of one file's chunks (diskstats.csv.gz's, or one in `chunks.files`).
fn drop_list_of(
    closed: &[ChunkFile],
    dropped: &[ChunkFile],
    kept_windows: &[KeptWindow],
    keep: u64,
    newest: u64,
) -> Vec<ChunkFile> {
    let n = closed.len();
    closed
        .iter()
        .take(n.saturating_sub(1))
        .filter(|c| !dropped.iter().any(|d| d.file == c.file))
        .filter(|c| c.last_t_ns.saturating_add(keep) < newest)
        .filter(|c| {
            !kept_windows
                .iter()
                .any(|k| k.from_t_ns <= c.last_t_ns && c.first_t_ns <= k.to_t_ns)
        })
        .map(|c| ChunkFile {
            why: Some(format!(
                "older than --keep {}: its last row is {:.1} s before the newest",
                format::cli::fmt_duration(std::time::Duration::from_nanos(keep)),
                (newest - c.last_t_ns) as f64 / 1e9
            )),
            ..c.clone()
        })
        .collect()
}

/// Per device: the counters where the current window began.
#[derive(Clone, Copy)]
struct Anchor {
    t: u64,
    sectors_w: u64,
    sectors_r: u64,
    ios: u64,
    ticks: u64,
    /// Per trigger: no firing before this t (its window is kept already).
    quiet_until: [u64; MAX_TRIGGERS],
}

/// The triggers, fed every sample of every device by the diskstats sampler.
pub(crate) struct TriggerFeed {
    triggers: Vec<Trigger>,
    flight: Arc<Flight>,
    events: EventLog,
    devices: Vec<Option<Anchor>>,
}

fn field(c: &DiskCounters, i: usize) -> u64 {
    if i < c.nfields as usize {
        c.f[i]
    } else {
        0
    }
}

impl TriggerFeed {
    /// `None` without triggers.
    pub fn new(flight: &Arc<Flight>, events: EventLog) -> Option<TriggerFeed> {
        let triggers: Vec<Trigger> = flight
            .setup
            .triggers
            .iter()
            .take(MAX_TRIGGERS)
            .cloned()
            .collect();
        (!triggers.is_empty()).then(|| TriggerFeed {
            triggers,
            flight: flight.clone(),
            events,
            devices: vec![],
        })
    }

    /// One sample of device `idx` (`name`) at `t`.
    #[inline]
    pub fn observe(&mut self, idx: usize, name: &[u8], t: u64, c: &DiskCounters) {
        if self.devices.len() <= idx {
            self.devices.resize(idx + 1, None);
        }
        let now = Anchor {
            t,
            sectors_w: field(c, F_SECTORS_WRITTEN),
            sectors_r: field(c, F_SECTORS_READ),
            ios: field(c, F_READS).wrapping_add(field(c, F_WRITES)),
            ticks: field(c, F_READ_MS).wrapping_add(field(c, F_WRITE_MS)),
            quiet_until: [0; MAX_TRIGGERS],
        };
        let Some(a) = self.devices[idx] else {
            self.devices[idx] = Some(now);
            return;
        };
        let dt = t.saturating_sub(a.t);
        if dt < TRIGGER_SPAN_NS {
            return;
        }
        let secs = dt as f64 / 1e9;
        let mib = |d: u64| d as f64 * 512.0 / 1048576.0 / secs;
        let mut next = Anchor {
            quiet_until: a.quiet_until,
            ..now
        };
        for (i, tr) in self.triggers.iter().enumerate() {
            if tr.device.as_deref().is_some_and(|d| d.as_bytes() != name) {
                continue;
            }
            let value = match tr.measure {
                Measure::WriteMibps => Some(mib(now.sectors_w.wrapping_sub(a.sectors_w))),
                Measure::ReadMibps => Some(mib(now.sectors_r.wrapping_sub(a.sectors_r))),
                // Not a device's: fed from load.csv (`ack_trigger`).
                Measure::AckP99Ms => None,
                Measure::AwaitMs => {
                    let ios = now.ios.wrapping_sub(a.ios);
                    // *_ms wrap at 2^32.
                    let ticks = (now.ticks.wrapping_sub(a.ticks)) & 0xffff_ffff;
                    (ios > 0 && ios < 1 << 40).then(|| ticks as f64 / ios as f64)
                }
            };
            let Some(v) = value.filter(|v| v.is_finite() && *v < 1e12) else {
                continue;
            };
            if v > tr.above {
                let dev = String::from_utf8_lossy(name);
                if t < a.quiet_until[i] {
                    // Still above: the kept window grows, no new event.
                    self.flight.keep(t, "");
                } else {
                    self.flight
                        .keep(t, &format!("{} on {dev}: {v:.1}", tr.text));
                    let w = self.flight.setup.window_ns;
                    self.events.event_at(
                        t,
                        Body::Trigger(ev::Trigger {
                            trigger: tr.text.clone(),
                            device: Some(dev.to_string()),
                            value: Some(v),
                            span_ns: Some(dt),
                            keep_from_t_ns: t.saturating_sub(w),
                            keep_to_t_ns: t.saturating_add(w),
                            ..Default::default()
                        }),
                    );
                    next.quiet_until[i] = t.saturating_add(w);
                }
            }
        }
        self.devices[idx] = Some(next);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use format::diskstats::chunk_name;

    fn chunk(n: u64, first: u64, last: u64) -> ChunkFile {
        ChunkFile {
            file: format!("chunks/{}", chunk_name(n)),
            first_t_ns: first,
            last_t_ns: last,
            rows: 10,
            bytes: 100,
            why: None,
        }
    }

    #[test]
    fn a_shared_file_row_has_its_t_ns_and_a_header_line_none() {
        assert_eq!(
            shared_row_t("1200000000,100000000,js-pub,5"),
            Some(1_200_000_000)
        );
        assert_eq!(
            shared_row_t("Tag=js-pub,1.200000000,0.100000000,350.000,HISTFAAA"),
            Some(1_200_000_000)
        );
        assert_eq!(
            shared_row_t("Tag=p2:js-pub.co,12.5,0.1,1.0,X"),
            Some(12_500_000_000)
        );
        assert_eq!(shared_row_t(format::load::HEADER), None);
        assert_eq!(
            shared_row_t("#[StartTime: 1764561600.000 (seconds since epoch)]"),
            None
        );
        assert_eq!(
            shared_row_t("\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\""),
            None
        );
    }

    #[test]
    fn triggers_parse_and_bad_ones_say_what_is_wanted() {
        let t = parse_trigger("write_mibps > 400").unwrap();
        assert_eq!(
            (t.measure, t.above, t.text.as_str()),
            (Measure::WriteMibps, 400.0, "write_mibps>400")
        );
        assert_eq!(
            parse_trigger("await_ms>0.5").unwrap().measure,
            Measure::AwaitMs
        );
        for bad in [
            "write_mibps",
            "iops>3",
            "await_ms>x",
            "await_ms>-1",
            "await_ms>inf",
            "ack_p99_ms",
        ] {
            let e = parse_trigger(bad).unwrap_err();
            assert!(
                e.contains("write_mibps, read_mibps, await_ms, ack_p99_ms") && e.contains(bad),
                "{e}"
            );
        }
    }

    #[test]
    fn a_trigger_may_name_its_device() {
        let t = parse_trigger("loop4:await_ms>50").unwrap();
        assert_eq!(
            (t.device.as_deref(), t.measure, t.text.as_str()),
            (Some("loop4"), Measure::AwaitMs, "loop4:await_ms>50")
        );
        assert_eq!(parse_trigger("await_ms>50").unwrap().device, None);
        assert!(parse_trigger(":await_ms>50").is_err());
        assert!(parse_trigger("a/b:await_ms>50").is_err());
    }

    #[test]
    fn an_ack_trigger_names_a_role_not_a_device() {
        let t = parse_trigger("ack_p99_ms > 50").unwrap();
        assert_eq!(
            (t.device.as_deref(), t.measure, t.above, t.text.as_str()),
            (None, Measure::AckP99Ms, 50.0, "ack_p99_ms>50")
        );
        let t = parse_trigger("kv-put:ack_p99_ms>20").unwrap();
        assert_eq!(t.device.as_deref(), Some("kv-put"));
        let e = parse_trigger("loop4:ack_p99_ms>20").unwrap_err();
        assert!(
            e.contains("'loop4' is none") && e.contains("js-pub, kv-put"),
            "{e}"
        );
    }

    #[test]
    fn retention_drops_old_chunks_but_not_the_newest_nor_kept_windows() {
        let s = 1_000_000_000u64;
        let mut m = ChunksMeta::default();
        for i in 0..6 {
            m.closed
                .push(chunk(i + 1, i * 10 * s, (i + 1) * 10 * s - 1));
        }
        // Keep 25 s, newest row at 60 s: chunks ending before 35 s go (1, 2, 3) ...
        let d = drop_list(&m, 25 * s, 60 * s);
        let names: Vec<_> = d.iter().map(|c| c.file.clone()).collect();
        assert_eq!(
            names,
            [
                "chunks/diskstats.000001.csv.gz",
                "chunks/diskstats.000002.csv.gz",
                "chunks/diskstats.000003.csv.gz"
            ]
        );
        assert!(d[0].why.as_deref().unwrap().contains("--keep 25s"));
        // ... unless a kept window overlaps one (chunk 2: 10..20 s).
        m.kept_windows.push(KeptWindow {
            from_t_ns: 15 * s,
            to_t_ns: 17 * s,
            what: "signal USR1".into(),
        });
        let d = drop_list(&m, 25 * s, 60 * s);
        assert_eq!(d.len(), 2);
        assert!(d.iter().all(|c| !c.file.contains("000002")));
        // Already dropped ones are not dropped twice; the newest never (keep 0).
        m.dropped.push(d[0].clone());
        assert_eq!(drop_list(&m, 25 * s, 60 * s).len(), 1);
        assert!(drop_list(&m, 0, 60 * s)
            .iter()
            .all(|c| !c.file.contains("000006")));
    }
}
