//! A recording session: creates the run directory, writes `meta.json`, runs the sampler
//! threads, and closes everything on [`Recording::finish`] (also from Drop, so an error
//! path still leaves a readable recording).
//!
//! `meta.json` ([`format::meta`]) is written when the run starts (`"complete":
//! false`) and rewritten at the end with the samplers' statistics; both writes go through
//! a temporary file and a rename, so the file is always whole.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use collectors::clock::Clock;
use collectors::devices::{Device, Resolver};
use collectors::periodic::LoopStats;

use super::samplers::{self, SamplerThread};
use super::trace::{TraceSetup, TracedPids};
use super::EventLog;
use format::events::{self as ev, Body};
use format::meta::{Meta, MetaDevice, SamplerMeta, SamplerStats, Section};
pub use format::FORMAT_VERSION;

/// What to sample and how often.
#[derive(Debug, Clone)]
pub struct SamplerSetup {
    /// Devices to record; empty = every device in /proc/diskstats.
    pub devices: Vec<Device>,
    pub disk_interval: Duration,
    pub mem_interval: Duration,
    pub cpu_interval: Duration,
    pub procfs: PathBuf,
    /// `--trace`: sync calls and block requests from tracefs; `None`: off.
    pub trace: Option<TraceSetup>,
    /// `--chunk/--keep/--trigger` (default: a chunk an hour, nothing dropped).
    pub chunks: super::chunks::ChunkSetup,
}

/// What a recording records (the name issue 11's interface uses).
pub type RecordSetup = SamplerSetup;

/// A running recording.
pub struct Recording {
    pub dir: PathBuf,
    pub clock: Clock,
    pub events: EventLog,
    pub stop: Arc<AtomicBool>,
    threads: Vec<SamplerThread>,
    traced: TracedPids,
    /// Processes started after `sample_processes` (a node restarted), for its sampler.
    procio_added: Arc<std::sync::Mutex<Vec<u32>>>,
    trace: Option<super::trace::TraceThread>,
    meta: Arc<std::sync::Mutex<Meta>>,
    /// `--chunk/--keep/--trigger`: the chunks of diskstats.csv.gz and what is kept.
    flight: Option<Arc<super::chunks::Flight>>,
    /// `--trigger 'ack_p99_ms>..'`: the thread tailing load.csv.
    load_watch: Option<super::ack_trigger::LoadWatch>,
    /// Cuts load.csv/load.hlog (other processes append to them) when chunked.
    load_chunks: Option<super::chunks::SharedRotator>,
    /// `kill -USR1`: the signal iterator's handle and the thread that keeps the window around it.
    usr1: Option<(signal_hook::iterator::Handle, std::thread::JoinHandle<()>)>,
    finished: bool,
}

/// Replaces secrets in an argument vector with `***` (the one redaction, [`format::redact`]).
pub use format::redact::argv as redact_argv;

fn unix_now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// The run's zero (`zero_monotonic_ns` on CLOCK_MONOTONIC) on the wall clock, ns since
/// the epoch: CLOCK_REALTIME read on both sides of a CLOCK_MONOTONIC read, the
/// tightest of three tries (off by less than a microsecond here).
pub fn clock_zero_unix_ns(zero_monotonic_ns: u64) -> u64 {
    let mut best = (u64::MAX, 0u64);
    for _ in 0..3 {
        let r0 = unix_now_ns();
        let m = collectors::clock::monotonic_ns();
        let r1 = unix_now_ns();
        let gap = r1.saturating_sub(r0);
        if gap < best.0 {
            let mid = r0 + gap / 2;
            best = (gap, mid.saturating_sub(m.saturating_sub(zero_monotonic_ns)));
        }
    }
    best.1
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

fn kernel() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// Creates a run directory: it must not exist, or be empty. Fails before anything is
/// written, with a usage error (exit 2) that names the directory.
pub fn create_run_dir(dir: &Path) -> anyhow::Result<RunDirClaim> {
    if dir.exists() {
        let empty = std::fs::read_dir(dir)
            .map(|mut r| r.next().is_none())
            .unwrap_or(false);
        if !dir.is_dir() || !empty {
            return Err(format::usage!(
                "--out {}: exists and is not an empty directory; name a new directory",
                dir.display()
            ));
        }
    }
    let cannot = |e: std::io::Error| {
        format::usage!(
            "--out {}: cannot create the run directory ({e}); name a writable directory",
            dir.display()
        )
    };
    if dir.exists() {
        std::fs::create_dir_all(dir).map_err(cannot)?;
    } else {
        // The last directory with mkdir(2), which fails if it exists: of two runs given
        // one new --out at the same moment (both saw no directory), the second stops here
        // before it writes anything (both wrote into one directory).
        if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(cannot)?;
        }
        std::fs::create_dir(dir).map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => format::usage!(
                "--out {}: another run created it at the same moment; name a new directory",
                dir.display()
            ),
            _ => cannot(e),
        })?;
    }
    // Probe that files can be created in it (read-only mounts pass create_dir_all on an
    // existing directory). The probe is also the claim (O_EXCL), kept until the caller's
    // first file is there: of two runs given one empty --out at the same moment, the
    // second finds the probe (or the first's files) and stops before it writes anything.
    let probe = dir.join(CLAIM_FILE);
    let another = || {
        format::usage!(
            "--out {}: another run started writing into it at the same moment; name a new directory",
            dir.display()
        )
    };
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => another(),
            _ => format::usage!(
                "--out {}: cannot write into the run directory ({e}); name a writable directory",
                dir.display()
            ),
        })?;
    let claim = RunDirClaim(probe);
    let others = std::fs::read_dir(dir).map_or(0, |r| r.count());
    if others != 1 {
        return Err(another());
    }
    Ok(claim)
}

/// The probe file [`create_run_dir`] leaves while the caller makes its first file.
const CLAIM_FILE: &str = ".diskpulse-write-test";

/// A run directory claimed by [`create_run_dir`]: its probe file, removed on drop (once
/// the caller's first file is in it).
#[must_use = "the claim holds the directory until the first file is made"]
pub struct RunDirClaim(PathBuf);

impl Drop for RunDirClaim {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The default run directory: `diskpulse-runs/<local time>-<what>` under the cwd.
pub fn default_run_dir(what: &str) -> PathBuf {
    let ts = chrono::Local::now().format("%Y%m%d-%H%M%S");
    let base = PathBuf::from("diskpulse-runs");
    let mut p = base.join(format!("{ts}-{what}"));
    let mut i = 2;
    while p.exists() {
        p = base.join(format!("{ts}-{what}-{i}"));
        i += 1;
    }
    p
}

impl Recording {
    /// Creates `dir` (see [`create_run_dir`]), writes `meta.json` and starts the samplers.
    pub fn start(dir: &Path, setup: &SamplerSetup, argv: &[String]) -> anyhow::Result<Recording> {
        Self::start_with_live(dir, setup, argv, None)
    }

    /// [`Recording::start`], the diskstats sampler also feeding `live` (`record --listen`).
    pub fn start_with_live(
        dir: &Path,
        setup: &SamplerSetup,
        argv: &[String],
        live: Option<Arc<crate::live::Live>>,
    ) -> anyhow::Result<Recording> {
        let claim = create_run_dir(dir)?;
        // A file system that fills while the files are made: said as the full one.
        let r = Self::start_in(dir, setup, argv, live).map_err(|e| explain_full(e, dir));
        drop(claim);
        r
    }

    /// [`Recording::start_with_live`] in the directory made.
    #[allow(
        clippy::too_many_lines,
        reason = "every sampler's start in the order the recording needs them, each next to its meta.json entry"
    )]
    fn start_in(
        dir: &Path,
        setup: &SamplerSetup,
        argv: &[String],
        live: Option<Arc<crate::live::Live>>,
    ) -> anyhow::Result<Recording> {
        let clock = Clock::start();
        let start_wall = chrono::Utc::now();
        let events = EventLog::create(&dir.join("events.jsonl"), clock)?;
        let stop = Arc::new(AtomicBool::new(false));
        let resolver = Resolver {
            sysfs: PathBuf::from("/sys"),
            procfs: setup.procfs.clone(),
        };
        let devices: Vec<MetaDevice> = setup
            .devices
            .iter()
            .map(|d| MetaDevice {
                name: d.name.clone(),
                major: d.num.major,
                minor: d.num.minor,
                why: Some(d.why.clone()),
                parent: d.parent.clone(),
                queue: resolver.queue_info(d).attrs.into_iter().collect(),
            })
            .collect();
        let samplers::DiskPlan {
            filter,
            names,
            source,
        } = samplers::DiskPlan::of(setup);
        let us = |d: Duration| d.as_micros() as u64;
        let sampler = |file: &str, d: Duration, source: Option<String>| SamplerMeta {
            file: file.to_string(),
            interval_us: us(d),
            source,
            stats: None,
        };
        let meta = Meta {
            format_version: FORMAT_VERSION,
            tool: "diskpulse".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            argv: redact_argv(argv),
            host: hostname(),
            kernel: kernel(),
            start_wall: start_wall.to_rfc3339_opts(chrono::SecondsFormat::Nanos, true),
            end_wall: None,
            manifest: None,
            clock_zero_monotonic_ns: clock.zero_monotonic_ns(),
            clock_zero_unix_ns: clock_zero_unix_ns(clock.zero_monotonic_ns()),
            duration_ns: None,
            user_hz: collectors::procstat::clock_ticks_per_s(),
            clock: Some(format::meta::ClockMeta::of(
                &collectors::clock::ClockFacts::measure(
                    std::path::Path::new("/sys"),
                    Duration::from_millis(5),
                ),
            )),
            device_filter: if setup.devices.is_empty() {
                "all"
            } else {
                "listed"
            }
            .into(),
            devices,
            samplers: [
                (
                    "diskstats",
                    sampler(
                        format::diskstats::FILE,
                        setup.disk_interval,
                        Some(source.describe()),
                    ),
                ),
                (
                    "meminfo",
                    sampler(format::procfs::MEMINFO_FILE, setup.mem_interval, None),
                ),
                (
                    "cpu",
                    sampler(format::procfs::CPU_FILE, setup.cpu_interval, None),
                ),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
            complete: false,
            error_events: None,
            lost: vec![],
            chunks: None,
            sections: Default::default(),
        };
        meta.write(&dir.join(format::meta::FILE))?;
        let reserve = dir.join(RESERVE_FILE);
        if let Err(e) = reserve_space(&reserve, RESERVE_BYTES) {
            let _ = std::fs::remove_file(&reserve);
            events.error("meta", "reserve", &format!("{}: {e}", reserve.display()));
        }

        let mut rec = Recording {
            dir: dir.to_path_buf(),
            clock,
            events: events.clone(),
            stop: stop.clone(),
            threads: vec![],
            traced: TracedPids::default(),
            procio_added: Default::default(),
            trace: None,
            meta: Arc::new(std::sync::Mutex::new(meta)),
            flight: None,
            load_watch: None,
            load_chunks: None,
            usr1: None,
            finished: false,
        };
        let flight =
            (setup.chunks.every_ns.is_some() || setup.chunks.every_bytes.is_some()).then(|| {
                super::chunks::Flight::new(
                    setup.chunks.clone(),
                    dir,
                    rec.meta.clone(),
                    events.clone(),
                )
            });
        let mut ds = samplers::DiskSampler::new_chunked(
            source,
            filter,
            &names,
            &dir.join(format::diskstats::FILE),
            events.clone(),
            flight.as_ref(),
        )?;
        if let Some(feed) = flight
            .as_ref()
            .and_then(|f| super::chunks::TriggerFeed::new(f, events.clone()))
        {
            ds.set_triggers(feed);
        }
        rec.load_watch = flight.as_ref().and_then(|f| {
            super::ack_trigger::LoadWatch::start(
                f,
                &setup.chunks.triggers,
                dir,
                stop.clone(),
                events.clone(),
            )
        });
        if let Some(f) = &flight {
            rec.load_chunks = Some(super::chunks::SharedRotator::start(
                f,
                dir,
                rec.clock,
                stop.clone(),
            )?);
        }
        rec.flight = flight;
        if let Some(l) = &live {
            ds.set_live(l.tap());
        }
        // meminfo.csv and cpu.csv are cut into chunks by the same rules as diskstats.
        let sink = |_name: &str, file: &'static str, columns: &[&str]| {
            super::chunks::Flight::sink(
                rec.flight.as_ref(),
                dir,
                file,
                &format::procfs::header(columns),
                None,
            )
        };
        samplers::start(setup, ds, sink, clock, &stop, &events, &mut rec.threads)?;
        if let Some(t) = &setup.trace {
            rec.start_trace(t, &names);
        }
        events.event(Body::RecordStart(ev::NoDetail {}));
        Ok(rec)
    }

    /// Samples `/proc/PID/io` of `pids` (`(name, pid)`: the embedded servers) every
    /// 10 ms into `proc_io.csv` from now until the recording finishes, and names the
    /// sampler in meta.json (`samplers.proc_io`, its source the pids). A pid whose `io`
    /// cannot be opened is an error naming it (the caller records it and goes on).
    pub fn sample_processes(
        &mut self,
        procfs: &Path,
        pids: &[(String, u32)],
    ) -> anyhow::Result<()> {
        if pids.is_empty() || self.finished {
            return Ok(());
        }
        let interval_ns = samplers::PROC_IO_INTERVAL_NS;
        if let Ok(mut v) = self.procio_added.lock() {
            v.extend(pids.iter().map(|p| p.1));
        }
        let sink = super::chunks::Flight::sink(
            self.flight.as_ref(),
            &self.dir,
            format::proc_io::FILE,
            format::proc_io::HEADER,
            None,
        )?;
        let t = samplers::spawn_procio_to(
            procfs,
            self.procio_added.clone(),
            sink,
            self.clock,
            interval_ns,
            self.stop.clone(),
            self.events.clone(),
        )?;
        self.threads.push(t);
        let source = pids
            .iter()
            .map(|(n, p)| format!("{n}={p}"))
            .collect::<Vec<_>>()
            .join(",");
        self.m().samplers.insert(
            "proc_io".into(),
            SamplerMeta {
                file: format::proc_io::FILE.into(),
                interval_us: interval_ns / 1000,
                source: Some(format!("/proc/PID/io of {source}")),
                stats: None,
            },
        );
        self.write_meta()
    }

    /// Starts the tracefs collector; when it cannot run here (not root, no tracefs),
    /// says so in one line and an `error` event, and the rest records.
    fn start_trace(&mut self, t: &TraceSetup, devices: &[(u32, u32, String)]) {
        for p in &t.pids {
            self.traced.add(*p);
        }
        match super::trace::start(
            t,
            &self.traced,
            devices,
            &self.files(),
            self.clock,
            self.stop.clone(),
            self.events.clone(),
        ) {
            Ok(th) => {
                self.m().samplers.insert(
                    "trace".into(),
                    SamplerMeta {
                        file: format::fsync_calls::FILE.into(),
                        interval_us: super::trace::POLL.as_micros() as u64,
                        source: Some(format!("tracefs instance, {} events", th.meta.events.len())),
                        stats: None,
                    },
                );
                // A TraceMeta always serializes (string keys, no custom serializer).
                let _ = self.m().set(&th.meta);
                let _ = self.write_meta();
                self.trace = Some(th);
            }
            Err(why) => {
                eprintln!("warning: --trace: {why}; recording without the trace");
                self.events.error("trace", "unavailable", &why);
            }
        }
    }

    /// Traces the sync calls of `pid` too (every thread; with `TraceSetup::children`
    /// what it starts): for processes started after the recording (the command of
    /// `record -- CMD`, embedded brokers). Does nothing when the run does not trace.
    pub fn trace_pid(&self, pid: u32) {
        self.traced.add(pid);
    }

    /// What to call with a process started during the recording (a broker node started
    /// again): its `/proc/PID/io` sampled (when `sample_processes` runs) and, with
    /// `--trace`, its sync calls traced, from then on; an event names it.
    /// The recording's `--chunk`/`--keep` state, for files written outside it that are
    /// cut by the same rules (the broker monitor's varz.csv and jsz.csv, an embedded
    /// RabbitMQ node's rabbitmq_metrics.csv); `None` when the run is not chunked.
    pub fn flight(&self) -> Option<Arc<super::chunks::Flight>> {
        self.flight.clone()
    }

    /// The run directory and its [`flight`](Self::flight), for writers beside it.
    pub fn files(&self) -> super::chunks::RunFiles {
        super::chunks::RunFiles {
            dir: self.dir.clone(),
            flight: self.flight.clone(),
        }
    }

    pub fn process_hook(&self) -> super::OnNodeStart {
        let (traced, added, events) = (
            self.traced.clone(),
            self.procio_added.clone(),
            self.events.clone(),
        );
        Arc::new(move |name: &str, pid: u32| {
            traced.add(pid);
            if let Ok(mut v) = added.lock() {
                v.push(pid);
            }
            events.event(Body::ProcessWatched(ev::ProcessWatched {
                name: name.to_string(),
                pid,
            }));
        })
    }

    /// Sets a section of `meta.json` (broker, load, agents...) and writes the file.
    pub fn set<S: Section>(&mut self, s: &S) -> anyhow::Result<()> {
        self.m().set(s)?;
        self.write_meta()
    }

    /// Writes `meta.json` (through `meta.json.tmp` and a rename). When the file system
    /// is full, the space reserved at the start is given back and the write tried once
    /// more; if that fails too, the temporary file is removed (the last whole meta.json
    /// stays) and the error names meta.json and the full file system.
    fn write_meta(&mut self) -> anyhow::Result<()> {
        let path = self.dir.join(format::meta::FILE);
        let tmp = path.with_extension("json.tmp");
        // Under the lock: the diskstats writer thread rewrites it too as chunks close.
        let mut meta = self.m();
        if let Some(f) = &self.flight {
            meta.chunks = f.snapshot();
        }
        let mut r = meta.write(&path);
        if r.as_ref().is_err_and(is_disk_full) {
            let _ = std::fs::remove_file(&tmp);
            if std::fs::remove_file(self.dir.join(RESERVE_FILE)).is_ok() {
                r = meta.write(&path);
            }
        }
        drop(meta);
        r.map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            let full = if is_disk_full(&e) {
                format!(
                    "the file system holding {} is full; free space there or record to another --out",
                    self.dir.display()
                )
            } else {
                "the previous whole meta.json is kept".to_string()
            };
            // The cause may already name the file (meta.json's own writer does).
            let head = format!("cannot write {}", path.display());
            let cause = e.root_cause().to_string();
            let cause = cause.strip_prefix(&format!("{head}: ")).unwrap_or(&cause);
            anyhow::anyhow!("{head}: {cause}; {full}")
        })
    }

    /// The meta.json being kept (shared with the diskstats writer thread).
    fn m(&self) -> std::sync::MutexGuard<'_, Meta> {
        self.meta.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// From now until the recording finishes, `kill -USR1 PID` keeps the window around
    /// the signal (`keep_at`, a `trigger` event `signal USR1`): a thread of its own blocks
    /// on signal-hook's self-pipe until a signal or the end (it woke every 20 ms to look at
    /// a flag before: 0.09% of a core of a recorder whose loop costs 3%). Does nothing when
    /// the run is not chunked.
    pub fn keep_on_usr1(&mut self) -> anyhow::Result<()> {
        let Some(f) = self.flight.clone() else {
            return Ok(());
        };
        let mut signals = signal_hook::iterator::Signals::new([signal_hook::consts::SIGUSR1])?;
        let handle = signals.handle();
        let (clock, events) = (self.clock, self.events.clone());
        let h = std::thread::Builder::new()
            .name("usr1".into())
            .spawn(move || {
                for _ in signals.forever() {
                    keep_at(&f, &events, clock.now_ns(), "signal USR1");
                }
            })?;
        self.usr1 = Some((handle, h));
        Ok(())
    }

    /// Stops the samplers, closes every file and completes `meta.json`.
    pub fn finish(mut self) -> anyhow::Result<Meta> {
        self.finish_inner()
    }

    fn finish_inner(&mut self) -> anyhow::Result<Meta> {
        self.finished = true;
        self.stop.store(true, Ordering::SeqCst);
        self.events.event(Body::RecordStop(ev::NoDetail {}));
        if let Some(w) = self.load_watch.take() {
            w.join();
        }
        if let Some(r) = self.load_chunks.take() {
            r.join();
        }
        if let Some((handle, h)) = self.usr1.take() {
            handle.close();
            let _ = h.join();
        }
        let mut first_err: Option<anyhow::Error> = None;
        if let Some(th) = self.trace.take() {
            let mut meta = th.meta.clone();
            meta.pids = self.traced.get();
            match th.join() {
                Ok(stats) => meta.stats = Some(stats),
                Err(e) => {
                    self.events.error("trace", "trace", &format!("{e:#}"));
                    first_err.get_or_insert(e);
                }
            }
            let _ = self.m().set(&meta);
        }
        let threads: Vec<_> = self.threads.drain(..).collect();
        for t in threads {
            let (name, file, r) = t.join();
            match r {
                Ok(s) => {
                    if let Some(m) = self.m().samplers.get_mut(name) {
                        m.stats = Some(loop_stats(&s));
                    }
                }
                Err(e) => {
                    self.events.error(name, "sampler", &format!("{e:#}"));
                    self.m().lost.push(format::meta::Lost {
                        file: file.to_string(),
                        after_t_ns: last_row_t_ns(&self.dir, file),
                        error: format!("{}", e.root_cause()),
                    });
                    first_err.get_or_insert(e);
                }
            }
        }
        self.m().duration_ns = Some(self.clock.now_ns());
        self.m().end_wall =
            Some(chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Nanos, true));
        self.m().error_events = Some(self.events.error_count());
        // A sampler that failed (its file could not be written: a full disk) lost the
        // rows after the failure: the recording is not complete, and says so.
        self.m().complete = first_err.is_none();
        // Every writer has closed its file: what a reader will check them against.
        self.m().manifest = Some(format::manifest::of(&self.dir));
        let meta_written = self.write_meta();
        let _ = std::fs::remove_file(self.dir.join(RESERVE_FILE));
        match (first_err, meta_written) {
            (Some(e), Ok(())) => Err(explain_full(e, &self.dir)
                .context("the recording was cut short (meta.json says complete: false)")),
            (Some(e), Err(m)) => Err(explain_full(e, &self.dir).context(format!("{m:#}"))),
            (None, Err(m)) => Err(m),
            (None, Ok(())) => Ok(self.m().clone()),
        }
    }
}

impl Drop for Recording {
    fn drop(&mut self) {
        if !self.finished {
            let _ = self.finish_inner();
        }
    }
}

/// Keeps the window around `t` (a signal, a caller) from retention, with a `trigger`
/// event saying what.
fn keep_at(f: &super::chunks::Flight, events: &EventLog, t: u64, what: &str) {
    f.keep(t, what);
    let w = f.window_ns();
    events.event_at(
        t,
        Body::Trigger(ev::Trigger {
            trigger: what.to_string(),
            keep_from_t_ns: t.saturating_sub(w),
            keep_to_t_ns: t.saturating_add(w),
            ..Default::default()
        }),
    );
}

/// Space held in the run directory from the start, given back when the final
/// `meta.json` cannot be written for want of space: a full `--out` left only
/// `meta.json.tmp` and a meta.json from the start. Much more than a meta.json needs
/// (a few KiB, ~1 KiB per device).
const RESERVE_BYTES: u64 = 128 << 10;
/// The reserve's file name; removed at the end of every recording.
const RESERVE_FILE: &str = ".diskpulse-reserve";

fn reserve_space(path: &Path, bytes: u64) -> std::io::Result<()> {
    use std::os::unix::io::AsRawFd;
    let f = std::fs::File::create(path)?;
    // SAFETY: a plain system call on a file descriptor `f` owns.
    let rc = unsafe { libc::posix_fallocate(f.as_raw_fd(), 0, bytes as libc::off_t) };
    if rc != 0 {
        return Err(std::io::Error::from_raw_os_error(rc));
    }
    Ok(())
}

/// Whether an error is ENOSPC (also when only its text says so: the writer threads'
/// errors are text).
fn is_disk_full(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.raw_os_error() == Some(libc::ENOSPC))
            || c.to_string().contains("os error 28")
    })
}

/// Adds what to do to a disk-full error.
fn explain_full(e: anyhow::Error, dir: &Path) -> anyhow::Error {
    if is_disk_full(&e) {
        e.context(format!(
            "the file system holding {} is full; free space there or record to another --out",
            dir.display()
        ))
    } else {
        e
    }
}

/// The `t_ns` of the last whole row of a sampler's file, read back as `report` reads it.
fn last_row_t_ns(dir: &Path, file: &str) -> Option<u64> {
    if file == format::diskstats::FILE {
        let (rows, _) = format::diskstats::read_run(dir).ok()?;
        rows.iter().filter_map(|d| d.t_ns.last().copied()).max()
    } else {
        let (t, _) = format::procfs::read(dir, file).ok()??;
        t.t_ns.last().copied()
    }
}

/// A sampler loop's statistics as they go into `meta.json`.
fn loop_stats(s: &LoopStats) -> SamplerStats {
    let wall = (s.ended_ns - s.started_ns).max(1) as f64;
    SamplerStats {
        samples: s.samples,
        expected: s.expected,
        skipped: s.skipped,
        jitter_p50_us: s.jitter_us(0.5),
        jitter_p99_us: s.jitter_us(0.99),
        jitter_max_us: s.jitter.max() as f64 / 1000.0,
        thread_cpu_ns: s.thread_cpu_ns,
        cpu_share_of_core: s.thread_cpu_ns as f64 / wall,
        ns_per_sample_cpu: s.thread_cpu_ns as f64 / s.samples.max(1) as f64,
        realtime_priority: s.realtime,
    }
}
